package audio

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// sine returns n samples of a sine at freq Hz, amplitude amp, at rate.
func sine(n int, freq, amp float64, rate int) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = int16(math.Round(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate))))
	}
	return out
}

func rms(x []int16) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(max(1, len(x))))
}

// snrDB compares got with want sample by sample over [from, to).
func snrDB(want, got []int16, from, to int) float64 {
	var sig, noise float64
	for i := from; i < to; i++ {
		d := float64(want[i]) - float64(got[i])
		sig += float64(want[i]) * float64(want[i])
		noise += d * d
	}
	return 10 * math.Log10(sig/max(noise, 1e-9))
}

func mustResampler(t testing.TB, in, out int) *Resampler {
	t.Helper()
	r, err := NewResampler(in, out)
	if err != nil {
		t.Fatalf("NewResampler(%d, %d): %v", in, out, err)
	}
	return r
}

func TestResamplerRejectsRates(t *testing.T) {
	for _, pair := range [][2]int{{0, 16000}, {16000, 0}, {44000, 16000}, {16000, 96000}, {-8000, 8000}} {
		if _, err := NewResampler(pair[0], pair[1]); !errors.Is(err, ErrSampleRate) {
			t.Errorf("NewResampler(%d, %d) error = %v, want ErrSampleRate", pair[0], pair[1], err)
		}
	}
}

func TestResamplerIdentity(t *testing.T) {
	r := mustResampler(t, 16000, 16000)
	src := sine(500, 440, 10000, 16000)
	got := r.Process(nil, src)
	if len(got) != len(src) {
		t.Fatalf("len = %d, want %d", len(got), len(src))
	}
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("sample %d = %d, want %d", i, got[i], src[i])
		}
	}
}

// TestResamplerRoundTripSNR sends speech-band tones 48k→16k→48k: the two
// filters together must leave them nearly untouched (measured 87-94 dB, about
// the int16 rounding floor of two conversions).
func TestResamplerRoundTripSNR(t *testing.T) {
	for _, freq := range []float64{200, 1000, 3000, 6000} {
		t.Run(fmt.Sprintf("%gHz", freq), func(t *testing.T) {
			src := sine(48000, freq, 20000, 48000)
			down := mustResampler(t, 48000, 16000)
			up := mustResampler(t, 16000, 48000)
			mid := down.Process(nil, src)
			back := up.Process(nil, mid)
			// Output is time-aligned with the input; skip the filters'
			// start-up (zero history) and compare what came back.
			from, to := 4800, len(back)
			snr := snrDB(src, back, from, to)
			t.Logf("48k→16k→48k %g Hz: SNR %.1f dB over %d samples", freq, snr, to-from)
			if snr < 80 {
				t.Errorf("SNR = %.1f dB, want >= 80", snr)
			}
		})
	}
}

// TestResamplerDownsampleAntiAlias: tones above the new Nyquist must not
// fold back into the output.
func TestResamplerDownsampleAntiAlias(t *testing.T) {
	cases := []struct {
		in, out int
		freq    float64
	}{
		{48000, 16000, 8200},
		{48000, 16000, 10000},
		{48000, 16000, 15000},
		{48000, 16000, 22000},
		{44100, 16000, 9000},
		{22050, 16000, 8500},
		{48000, 8000, 4300},
		{44100, 22050, 11500},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%d-%gHz", tc.in, tc.out, tc.freq), func(t *testing.T) {
			src := sine(tc.in, tc.freq, 30000, tc.in)
			got := mustResampler(t, tc.in, tc.out).Process(nil, src)
			atten := 20 * math.Log10(rms(src)/max(rms(got[len(got)/10:]), 1e-3))
			t.Logf("%d→%d Hz, %g Hz tone attenuated %.1f dB", tc.in, tc.out, tc.freq, atten)
			if atten < 80 {
				t.Errorf("attenuation %.1f dB, want >= 80", atten)
			}
		})
	}
}

// TestResamplerUpsampleImages: upsampling a tone must not create images
// above the old Nyquist. The output is compared with the ideal tone at the
// new rate; any image would show up as error.
func TestResamplerUpsampleImages(t *testing.T) {
	for _, pair := range [][2]int{{16000, 48000}, {22050, 48000}, {8000, 44100}, {24000, 32000}} {
		in, out := pair[0], pair[1]
		t.Run(fmt.Sprintf("%d-%d", in, out), func(t *testing.T) {
			const freq = 1000.0
			src := sine(in, freq, 20000, in)
			got := mustResampler(t, in, out).Process(nil, src)
			want := sine(len(got), freq, 20000, out)
			snr := snrDB(want, got, len(got)/10, len(got))
			t.Logf("%d→%d, 1 kHz tone: SNR %.1f dB against the ideal tone", in, out, snr)
			if snr < 70 {
				t.Errorf("SNR = %.1f dB, want >= 70", snr)
			}
		})
	}
}

// TestResamplerChunkedEqualsOneShot: chunk boundaries must not change a
// single sample, for every rate pair.
func TestResamplerChunkedEqualsOneShot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]int16, 30000)
	for i := range src {
		src[i] = int16(rng.IntN(40000) - 20000)
	}
	for _, in := range commonRates {
		for _, out := range commonRates {
			oneShot := mustResampler(t, in, out).Process(nil, src)
			r := mustResampler(t, in, out)
			var chunked, tmp []int16
			for rest := src; len(rest) > 0; {
				n := min(len(rest), rng.IntN(3000))
				tmp = r.Process(tmp, rest[:n])
				chunked = append(chunked, tmp...)
				rest = rest[n:]
			}
			if len(chunked) != len(oneShot) {
				t.Errorf("%d→%d: chunked gave %d samples, one-shot %d", in, out, len(chunked), len(oneShot))
				continue
			}
			for i := range oneShot {
				if chunked[i] != oneShot[i] {
					t.Errorf("%d→%d: sample %d chunked %d, one-shot %d", in, out, i, chunked[i], oneShot[i])
					break
				}
			}
		}
	}
}

// TestResamplerNoDrift: over a long stream in odd-sized pieces the output
// length follows the rate ratio exactly, behind it by a constant (half the
// filter), for every pair.
func TestResamplerNoDrift(t *testing.T) {
	for _, in := range commonRates {
		for _, out := range commonRates {
			if in == out {
				continue
			}
			r := mustResampler(t, in, out)
			chunk := make([]int16, 997)
			dst := make([]int16, 0, r.MaxOutput(len(chunk)))
			total, inputs := 0, 0
			for range 10 * in / len(chunk) { // 10 s
				dst = r.Process(dst, chunk)
				if len(dst) > r.MaxOutput(len(chunk)) {
					t.Fatalf("%d→%d: %d outputs exceed MaxOutput %d", in, out, len(dst), r.MaxOutput(len(chunk)))
				}
				total += len(dst)
				inputs += len(chunk)
			}
			half := int64(r.filt.taps / 2)
			up, down := int64(r.filt.up), int64(r.filt.down)
			want := ((int64(inputs)-half)*up + down - 1) / down // ceil
			if int64(total) != want {
				t.Errorf("%d→%d: %d inputs gave %d outputs, want %d", in, out, inputs, total, want)
			}
			lag := float64(inputs)*float64(out)/float64(in) - float64(total)
			if lag < 0 || lag > float64(half)*float64(out)/float64(in)+1 {
				t.Errorf("%d→%d: output lags the ratio by %.1f samples, want within half a filter", in, out, lag)
			}
		}
	}
}

func TestResamplerDCGain(t *testing.T) {
	for _, pair := range [][2]int{{48000, 16000}, {16000, 48000}, {22050, 16000}, {44100, 48000}} {
		r := mustResampler(t, pair[0], pair[1])
		src := make([]int16, 20000)
		for i := range src {
			src[i] = 10000
		}
		got := r.Process(nil, src)
		for i := len(got) / 2; i < len(got); i++ {
			if d := int(got[i]) - 10000; d < -1 || d > 1 {
				t.Fatalf("%v: DC output %d at %d, want 10000±1", pair, got[i], i)
			}
		}
	}
}

func TestResamplerReset(t *testing.T) {
	r := mustResampler(t, 22050, 16000)
	src := sine(5000, 700, 12000, 22050)
	first := append([]int16(nil), r.Process(nil, src)...)
	r.Process(nil, sine(333, 3000, 5000, 22050))
	r.Reset()
	second := r.Process(nil, src)
	if len(first) != len(second) {
		t.Fatalf("after Reset %d samples, want %d", len(second), len(first))
	}
	for i := range first {
		if first[i] != second[i] {
			t.Fatalf("after Reset sample %d = %d, want %d", i, second[i], first[i])
		}
	}
}

func TestResamplerZeroAllocs(t *testing.T) {
	for _, pair := range [][2]int{{48000, 16000}, {16000, 48000}, {22050, 48000}, {22050, 16000}} {
		r := mustResampler(t, pair[0], pair[1])
		src := sine(pair[0]/50, 440, 10000, pair[0])
		dst := make([]int16, 0, r.MaxOutput(len(src)))
		allocs := testing.AllocsPerRun(100, func() { dst = r.Process(dst, src) })
		if allocs != 0 {
			t.Errorf("%v: %.1f allocations per 20 ms frame, want 0", pair, allocs)
		}
	}
}

// BenchmarkResampler measures one 20 ms frame; cpu-ns/frame is the CPU
// time it used and %core the share of one core a real-time stream needs.
func BenchmarkResampler(b *testing.B) {
	for _, pair := range [][2]int{{48000, 16000}, {16000, 48000}, {22050, 48000}, {22050, 16000}, {44100, 16000}, {24000, 48000}} {
		b.Run(fmt.Sprintf("%dto%d", pair[0], pair[1]), func(b *testing.B) {
			r := mustResampler(b, pair[0], pair[1])
			src := sine(pair[0]/50, 440, 10000, pair[0])
			dst := make([]int16, 0, r.MaxOutput(len(src)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				dst = r.Process(dst, src)
			}
			cpuPerFrame := float64((processCPU() - cpu0).Nanoseconds()) / float64(b.N)
			b.ReportMetric(cpuPerFrame, "cpu-ns/frame")
			b.ReportMetric(100*cpuPerFrame/20e6, "%core")
			b.ReportMetric(float64(r.filt.taps), "taps")
		})
	}
}

// TestResamplerFlush: Process plus Flush accounts for every input sample:
// the output covers the whole input duration.
func TestResamplerFlush(t *testing.T) {
	for _, pair := range [][2]int{{48000, 16000}, {16000, 48000}, {22050, 48000}, {44100, 8000}} {
		in, out := pair[0], pair[1]
		r := mustResampler(t, in, out)
		src := sine(in/10, 500, 10000, in) // 100 ms
		got := r.Process(nil, src)
		tail := r.Flush(make([]int16, 0, 1024))
		total := len(got) + len(tail)
		want := float64(len(src)) * float64(out) / float64(in)
		if math.Abs(float64(total)-want) > 1 {
			t.Errorf("%d→%d: %d + %d flushed samples, want %.1f", in, out, len(got), len(tail), want)
		}
		// After Flush the Resampler starts afresh.
		again := r.Process(nil, src)
		if len(again) != len(got) || again[len(again)/2] != got[len(got)/2] {
			t.Errorf("%d→%d: Flush did not reset the state", in, out)
		}
	}
}
