package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
)

// faultyLLM's first answer sends "Well," and then stalls (or fails); later
// answers are whole.
type faultyLLM struct {
	fail bool // send an error instead of stalling
	n    atomic.Int32
}

func (m *faultyLLM) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	if m.n.Add(1) > 1 {
		return sessiontest.LLM{Answer: "Here is a whole answer."}.Stream(ctx, req)
	}
	out := make(chan llm.Token, 2)
	out <- llm.Token{Text: "Well,"}
	if m.fail {
		out <- llm.Token{Err: errors.New("backend fell over")}
		close(out)
		return out, nil
	}
	go func() {
		<-ctx.Done()
		close(out)
	}()
	return out, nil
}

// A backend that stalls or fails mid-turn ends that turn with an error
// event and the spoken apology; the session goes on.
func TestLLMFaultApologises(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "stall", true: "error"}[fail]
		t.Run(name, func(t *testing.T) {
			cfg := sessiontest.Config()
			cfg.LLMStallTimeout = 300 * time.Millisecond
			cfg.Apology = "Sorry, please try again."
			be := pipeline.Backends{ASR: sessiontest.ASR{Text: "hello there"}, LLM: &faultyLLM{fail: fail}, TTS: sessiontest.TTS{}}
			cl := sessiontest.Start(t, cfg, be)
			start := time.Now()
			first := cl.Utterance(false)
			want := map[bool]string{false: "stalled", true: "fell over"}[fail]
			if !strings.Contains(first.ErrorText(), want) || !strings.Contains(first.Answer, cfg.Apology) || first.AudioMs == 0 {
				t.Errorf("faulty turn: errors %q, answer %q, %d ms audio; want %q, the apology, audio", first.ErrorText(), first.Answer, first.AudioMs, want)
			}
			if took := time.Since(start); !fail && took > 10*time.Second {
				t.Errorf("stalled turn took %v", took)
			}
			second := cl.Utterance(false)
			if second.Answer != "Here is a whole answer." || len(second.Errors) != 0 {
				t.Errorf("next turn: %+v", second)
			}
		})
	}
}
