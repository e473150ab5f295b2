package ttstest

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
)

// BenchSentences are assistant-style replies of 11-16 words.
var BenchSentences = []string{
	"Sure, I can set a timer for ten minutes starting right now.",
	"The forecast says light rain this afternoon, so you might want an umbrella.",
	"Your next meeting is with the design team at three o'clock in room four.",
	"I found three Italian restaurants nearby that are still open tonight.",
	"Okay, I've added milk, eggs and fresh bread to your shopping list.",
	"The train to the airport leaves every fifteen minutes from platform two.",
	"That song was released in nineteen eighty five by a band from Manchester.",
	"Turning off the kitchen lights and locking the front door for you now.",
	"It takes about twenty minutes to walk there, or five minutes by bike.",
	"I'm sorry, I didn't catch that. Could you say the name of the contact again?",
}

// Benchmark reports the median time to first audio (Synthesize call to the
// first chunk received) and the real-time factor (synthesis wall time over
// audio duration) across BenchSentences. cpu_rtf uses the process's CPU
// time instead of wall time, which other load on the machine does not
// inflate. lead_ms is the median silent lead-in, the first audible sample
// of each synthesis (pipeline/audio's rule), and first_heard_ms the median
// of time to first audio plus that lead-in: when a listener hears it.
func Benchmark(b *testing.B, s tts.Synthesizer) {
	ctx := context.Background()
	out := make(chan tts.Chunk)
	errc := make(chan error, 1)
	var ttfa, lead, heard []time.Duration
	var busy time.Duration
	samples := 0
	cpu0 := cpuTime()
	for b.Loop() {
		for _, text := range BenchSentences {
			start := time.Now()
			go func() { errc <- s.Synthesize(ctx, text, out) }()
			first := time.Duration(0)
			var got []int16
		receive:
			for {
				select {
				case c := <-out:
					if first == 0 {
						first = time.Since(start)
					}
					samples += len(c.PCM)
					if len(got) < s.SampleRate() { // the first second is enough
						got = append(got, c.PCM...)
					}
				case err := <-errc:
					if err != nil {
						b.Fatal(err)
					}
					break receive
				}
			}
			busy += time.Since(start)
			ttfa = append(ttfa, first)
			l := time.Duration(max(0, audio.FirstAudible(got, s.SampleRate()))) * time.Second / time.Duration(s.SampleRate())
			lead = append(lead, l)
			heard = append(heard, first+l)
		}
	}
	cpu := cpuTime() - cpu0
	slices.Sort(ttfa)
	slices.Sort(lead)
	slices.Sort(heard)
	b.ReportMetric(float64(lead[len(lead)/2].Microseconds())/1000, "lead_ms")
	b.ReportMetric(float64(heard[len(heard)/2].Microseconds())/1000, "first_heard_ms")
	b.ReportMetric(float64(ttfa[len(ttfa)/2].Microseconds())/1000, "ttfa_ms")
	b.ReportMetric(float64(ttfa[len(ttfa)-1].Microseconds())/1000, "ttfa_max_ms")
	audio := float64(samples) / float64(s.SampleRate())
	b.ReportMetric(busy.Seconds()/audio, "rtf")
	b.ReportMetric(cpu.Seconds()/audio, "cpu_rtf")
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
