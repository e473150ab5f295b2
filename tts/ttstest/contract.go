package ttstest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/tts"
)

// Contract runs the behaviour every tts.Synthesizer must have, whatever its
// engine: cancellation mid-text and before the start, a caller waiting for a
// busy engine giving up, empty and punctuation-only text, audio that starts
// at once and pauses no longer than stream.MaxPause, and a consumer that
// stops reading holding up no other synthesis. newSynth returns a fresh
// synthesizer (closed by the caller's cleanup); a subtest may call it twice.
func Contract(t *testing.T, newSynth func(t *testing.T) tts.Synthesizer) {
	t.Run("CancelStopsSynthesis", func(t *testing.T) { cancelStopsSynthesis(t, newSynth(t)) })
	t.Run("CancelledContextSendsNothing", func(t *testing.T) { cancelledContextSendsNothing(t, newSynth(t)) })
	t.Run("EmptyTextSpeaksNothing", func(t *testing.T) { emptyTextSpeaksNothing(t, newSynth(t)) })
	t.Run("PunctuationOnly", func(t *testing.T) { punctuationOnly(t, newSynth(t)) })
	t.Run("WaitingCallerGivesUp", func(t *testing.T) { waitingCallerGivesUp(t, newSynth(t)) })
	t.Run("FirstChunkAudible", func(t *testing.T) { firstChunkAudible(t, newSynth(t)) })
	t.Run("PausesCapped", func(t *testing.T) { pausesCapped(t, newSynth(t)) })
	t.Run("StalledConsumerBlocksNoOne", func(t *testing.T) { stalledConsumerBlocksNoOne(t, newSynth(t), newSynth(t)) })
}

func cancelStopsSynthesis(t *testing.T, s tts.Synthesizer) {
	long := strings.Repeat("This long reply keeps the speech engine busy for quite a while. ", 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan tts.Chunk)
	errc := make(chan error, 1)
	go func() { errc <- s.Synthesize(ctx, long, out) }()
	first := <-out
	cancel()
	after := 0
	for {
		select {
		case c := <-out:
			after += len(c.PCM)
			continue
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Synthesize after cancel = %v, want context.Canceled", err)
			}
		}
		break
	}
	// The whole text is about a minute of audio; at most the chunk already
	// on its way may still arrive.
	if after > 2*len(first.PCM) {
		t.Errorf("%d samples arrived after cancel (chunks are %d)", after, len(first.PCM))
	}
	// The engine is free again.
	if r := Synthesize(context.Background(), s, "Still working."); r.Err != nil || r.Samples == 0 {
		t.Errorf("after a cancel: %d samples, err %v", r.Samples, r.Err)
	}
}

func cancelledContextSendsNothing(t *testing.T, s tts.Synthesizer) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Synthesize(ctx, s, Sentence)
	if !errors.Is(r.Err, context.Canceled) || len(r.Chunks) != 0 {
		t.Errorf("got %d chunks, err %v; want none and context.Canceled", len(r.Chunks), r.Err)
	}
}

func emptyTextSpeaksNothing(t *testing.T, s tts.Synthesizer) {
	for _, text := range []string{"", "  \n\t"} {
		if r := Synthesize(context.Background(), s, text); r.Err != nil || len(r.Chunks) != 0 {
			t.Errorf("%q: %d chunks, err %v", text, len(r.Chunks), r.Err)
		}
	}
}

func punctuationOnly(t *testing.T, s tts.Synthesizer) {
	for _, text := range []string{"...", "?!", "- -", `"`} {
		r := Synthesize(context.Background(), s, text)
		if r.Err != nil {
			t.Errorf("%q: %v", text, r.Err)
		}
		for _, c := range r.Chunks {
			if len(c.Words) != 0 {
				t.Errorf("%q: word marks %+v for no words", text, c.Words)
			}
		}
	}
}

// waitingCallerGivesUp: while A is mid-synthesis (blocked on its next send),
// B starts and is cancelled; B must end at once, then A ends on its cancel.
func waitingCallerGivesUp(t *testing.T, s tts.Synthesizer) {
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	outA := make(chan tts.Chunk)
	errA := make(chan error, 1)
	go func() { errA <- s.Synthesize(ctxA, Sentence, outA) }()
	<-outA

	ctxB, cancelB := context.WithCancel(context.Background())
	errB := make(chan error, 1)
	go func() { errB <- s.Synthesize(ctxB, Sentence, make(chan tts.Chunk)) }()
	cancelB()
	if err := <-errB; !errors.Is(err, context.Canceled) {
		t.Errorf("waiting Synthesize after cancel = %v, want context.Canceled", err)
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("holding Synthesize after cancel = %v, want context.Canceled", err)
	}
}
