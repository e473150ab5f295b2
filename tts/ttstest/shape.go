package ttstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio"
	"github.com/voxpipe/voxpipe/tts"
	"github.com/voxpipe/voxpipe/tts/stream"
)

// PauseText has sentences and clauses that engines end with a pause.
const PauseText = "Sure. I can help with that, right away. First, the weather; then, the news!"

// maxLeadMs is how far into the first chunk the first audible window may
// start (the goal: the answer is heard from its first sample).
const maxLeadMs = 10

// firstChunkAudible: the first chunk of every synthesis is audible within
// maxLeadMs of its first sample, so nothing silent goes out ahead of speech.
func firstChunkAudible(t *testing.T, s tts.Synthesizer) {
	rate := s.SampleRate()
	for _, text := range []string{Sentence, "Sure.", "Okay, done.", MarksText} {
		r := Synthesize(context.Background(), s, text)
		if r.Err != nil || len(r.Chunks) == 0 {
			t.Fatalf("%q: %d chunks, err %v", text, len(r.Chunks), r.Err)
		}
		first := r.Chunks[0].PCM
		at := audio.FirstAudible(first, rate)
		if at < 0 {
			t.Errorf("%q: the first chunk (%d samples) has no audible sample", text, len(first))
		} else if at*1000 > maxLeadMs*rate {
			t.Errorf("%q: first audible sample of the first chunk at %d of %d (%.1f ms), want within %d ms",
				text, at, len(first), float64(at)*1000/float64(rate), maxLeadMs)
		}
	}
}

// pausesCapped: no silence inside one synthesis, nor across the join of two
// (as a turn speaks its text chunks one after another), lasts longer than
// stream.MaxPause (plus a window of measuring slack).
func pausesCapped(t *testing.T, s tts.Synthesizer) {
	rate := s.SampleRate()
	limit := durSamples(stream.MaxPause, rate) + 2*audio.AudibleWindow(rate)
	a := Synthesize(context.Background(), s, PauseText)
	b := Synthesize(context.Background(), s, "And that is all.")
	if a.Err != nil || b.Err != nil {
		t.Fatal(a.Err, b.Err)
	}
	joined := append(concat(a), concat(b)...)
	longest, at := longestSilence(joined, rate)
	if longest > limit {
		t.Errorf("a silence of %.0f ms at %.2f s, want at most %v", ms(longest, rate), float64(at)/float64(rate), stream.MaxPause)
	}
	if len(a.Chunks) == 0 || len(b.Chunks) == 0 {
		t.Errorf("%d and %d chunks", len(a.Chunks), len(b.Chunks))
	}
}

// stalledConsumerBlocksNoOne: a consumer that takes one chunk and then stops
// reading (a client that stopped reading its socket) must not keep another
// synthesizer sharing the engine from speaking.
func stalledConsumerBlocksNoOne(t *testing.T, stalled, healthy tts.Synthesizer) {
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	outA := make(chan tts.Chunk)
	errA := make(chan error, 1)
	long := strings.Repeat("A long answer nobody is listening to any more. ", 8)
	go func() { errA <- stalled.Synthesize(ctxA, long, outA) }()
	<-outA // A is under way, and from now on never read

	done := make(chan Result, 1)
	go func() { done <- Synthesize(context.Background(), healthy, Sentence) }()
	select {
	case r := <-done:
		if r.Err != nil || r.Samples == 0 {
			t.Errorf("healthy synthesis beside a stalled one: %d samples, err %v", r.Samples, r.Err)
		}
	case <-time.After(20 * time.Second): // deadlock detection, not a timing goal
		t.Error("a synthesis waited 20 s behind a consumer that stopped reading")
		cancelA()
		<-done
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("stalled Synthesize after cancel = %v, want context.Canceled", err)
	}
}

func concat(r Result) []int16 {
	var pcm []int16
	for _, c := range r.Chunks {
		pcm = append(pcm, c.PCM...)
	}
	return pcm
}

// longestSilence returns the longest run of inaudible windows in pcm and
// where it starts, both in samples.
func longestSilence(pcm []int16, rate int) (longest, at int) {
	w := audio.AudibleWindow(rate)
	run, start := 0, 0
	for i := 0; i < len(pcm); i += w {
		if audio.IsAudible(pcm[i:min(i+w, len(pcm))], rate) {
			run = 0
			continue
		}
		if run == 0 {
			start = i
		}
		run += min(w, len(pcm)-i)
		if run > longest {
			longest, at = run, start
		}
	}
	return longest, at
}

func durSamples(d time.Duration, rate int) int { return int(d.Seconds() * float64(rate)) }

func ms(samples, rate int) float64 { return float64(samples) * 1000 / float64(rate) }
