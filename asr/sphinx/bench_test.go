package sphinx

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkDecode streams a data set in 20 ms frames (partials drained after
// every frame, as the pipeline does) and reports:
//   - rtf: decoder time (all Writes and Close) / audio time;
//   - final_ms: median time of Close, i.e. ps_end_utt plus the final
//     hypothesis, which is what the turn manager waits for after end of speech;
//   - rtf_cpu, final_cpu_ms: the same on the decoding thread's CPU clock,
//     which other processes on a busy machine do not inflate;
//   - wer_%: word error rate over the set (deterministic for a fresh decoder).
//
// Run: go test -run '^$' -bench Decode -benchtime 1x ./asr/sphinx/
func BenchmarkDecode(b *testing.B) {
	requireModel(b)
	for _, firstPass := range []bool{true, false} {
		for _, set := range []string{"goforward", "librivox"} {
			b.Run(configName(firstPass)+"/"+set, func(b *testing.B) {
				utts := loadSet(b, set)
				cfg := DefaultConfig()
				cfg.FirstPassOnly = firstPass
				r, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				var audio, busy, busyCPU time.Duration
				var finals, finalsCPU []time.Duration
				errs, words := 0, 0
				b.ResetTimer()
				for range b.N {
					for _, u := range utts {
						res, err := decode(context.Background(), r, u.pcm)
						if err != nil {
							b.Fatal(err)
						}
						audio += time.Duration(len(u.pcm)) * time.Second / SampleRate
						busy += res.decode
						busyCPU += res.decodeCPU
						finals = append(finals, res.finalLat)
						finalsCPU = append(finalsCPU, res.finalCPU)
						e, w := werWords(u.ref, res.final)
						errs += e
						words += w
					}
				}
				b.StopTimer()
				b.ReportMetric(busy.Seconds()/audio.Seconds(), "rtf")
				b.ReportMetric(busyCPU.Seconds()/audio.Seconds(), "rtf_cpu")
				b.ReportMetric(median(finals), "final_ms")
				b.ReportMetric(median(finalsCPU), "final_cpu_ms")
				b.ReportMetric(100*float64(errs)/float64(words), "wer_%")
			})
		}
	}
}

// BenchmarkWrite measures one 20 ms Write (decode plus partial check) on
// the per-frame path; -benchmem shows that it does not allocate except when
// the hypothesis text changes.
func BenchmarkWrite(b *testing.B) {
	requireModel(b)
	pcm := loadSet(b, "goforward")[0].pcm
	r := sharedRecognizer(b, true)
	const frame = SampleRate / 50
	st, err := r.Start(context.Background(), SampleRate)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	off := 0
	for b.Loop() {
		if off+frame > len(pcm) {
			// A new utterance every 2.8 s of audio, outside the measurement.
			b.StopTimer()
			_ = st.Close()
			if st, err = r.Start(context.Background(), SampleRate); err != nil {
				b.Fatal(err)
			}
			off = 0
			b.StartTimer()
		}
		if err := st.Write(pcm[off : off+frame]); err != nil {
			b.Fatal(err)
		}
		off += frame
		for len(st.Results()) > 0 {
			<-st.Results()
		}
	}
	b.StopTimer()
	_ = st.Close()
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}
