package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tts"
)

// Backends whose first call panics and later ones work.
type panicASR struct {
	sessiontest.ASR
	n atomic.Int32
}

func (a *panicASR) Start(ctx context.Context, rate int) (asr.Stream, error) {
	if a.n.Add(1) == 1 {
		panic("asr start exploded")
	}
	return a.ASR.Start(ctx, rate)
}

type panicLLM struct {
	sessiontest.LLM
	n atomic.Int32
}

func (m *panicLLM) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	if m.n.Add(1) == 1 {
		panic("llm stream exploded")
	}
	return m.LLM.Stream(ctx, req)
}

type panicTTS struct {
	sessiontest.TTS
	n atomic.Int32
}

func (s *panicTTS) Synthesize(ctx context.Context, text string, out chan<- tts.Chunk) error {
	if s.n.Add(1) == 1 {
		panic("tts synthesize exploded")
	}
	return s.TTS.Synthesize(ctx, text, out)
}

// A panic in a backend call fails only that turn, with an error event; the
// next turn of the same session works.
func TestBackendPanicFailsOnlyTheTurn(t *testing.T) {
	good := func() pipeline.Backends {
		return pipeline.Backends{ASR: sessiontest.ASR{Text: "hello there"}, LLM: sessiontest.LLM{Answer: "Hi, how can I help?"}, TTS: sessiontest.TTS{}}
	}
	for _, c := range []struct {
		name string
		mod  func(*pipeline.Backends)
	}{
		{"asr", func(b *pipeline.Backends) { b.ASR = &panicASR{ASR: sessiontest.ASR{Text: "hello there"}} }},
		{"llm", func(b *pipeline.Backends) { b.LLM = &panicLLM{LLM: sessiontest.LLM{Answer: "Hi, how can I help?"}} }},
		{"tts", func(b *pipeline.Backends) { b.TTS = &panicTTS{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := good()
			c.mod(&be)
			cl := sessiontest.Start(t, sessiontest.Config(), be)
			first := cl.Utterance(false)
			second := cl.Utterance(false)
			// A TTS panic's error event can arrive after the first turn's
			// end, while the next utterance is collected: it still names
			// turn 1.
			named, own := strings.Contains(first.ErrorText(), "panic"), 0
			for _, e := range second.Errors {
				if e.Turn == 1 {
					named = named || strings.Contains(e.Message, "panic")
					continue
				}
				own++
			}
			if !named {
				t.Errorf("turn with the panic: errors %q, want one naming the panic", first.ErrorText())
			}
			if second.Transcript != "hello there" || second.Answer == "" || second.AudioMs == 0 || own != 0 {
				t.Errorf("next turn: %+v, want a whole answer", second)
			}
		})
	}
}

// explodingStream panics in Write, inside the ASR stage's own loop.
type explodingASR struct{}

func (explodingASR) Start(context.Context, int) (asr.Stream, error) { return explodingStream{}, nil }

type explodingStream struct{}

func (explodingStream) Write([]int16) error        { panic("write exploded") }
func (explodingStream) Results() <-chan asr.Result { return nil }
func (explodingStream) Close() error               { return nil }

// A panic elsewhere in a stage ends that session with ErrPanic, not the
// process.
func TestStagePanicEndsOnlyTheSession(t *testing.T) {
	be := pipeline.Backends{ASR: explodingASR{}, LLM: sessiontest.LLM{Answer: "x"}, TTS: sessiontest.TTS{}}
	sess, err := pipeline.NewSession("p", sessiontest.Config(), be, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	in, out := make(chan pipeline.Input, 64), make(chan pipeline.Output, 64)
	done := make(chan error, 1)
	go func() { done <- sess.Run(context.Background(), in, out) }()
	go func() {
		for range out {
		}
	}()
	for i := 0; i < 40; i++ {
		in <- pipeline.Input{Audio: sessiontest.Speech(320, i*320)}
	}
	select {
	case err := <-done:
		if !errors.Is(err, pipeline.ErrPanic) {
			t.Errorf("Run: %v, want ErrPanic", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("session still running after its ASR stage panicked")
	}
	close(out)
}
