package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// longHistory is a system prompt, n user/assistant exchanges and a last
// question: far more than a 96-token context holds.
func longHistory(n int) []llm.Message {
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}}
	for i := 0; i < n; i++ {
		msgs = append(msgs,
			llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("the cat sat on the mat %d", i)},
			llm.Message{Role: llm.RoleAssistant, Content: "the dog sat on the log"})
	}
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: "hello world"})
}

// allocated is the bytes f allocates (a measure of its work that does not
// depend on the machine's speed).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A request's history beyond the context costs nothing more to render:
// trimming used to re-render and re-tokenise the whole conversation per
// dropped exchange (quadratic), on the scheduler goroutine every voice
// session's tokens come from.
func TestRenderPromptWorkIsBoundedByContext(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	s.ctx = 96
	e := openTiny(t, s, func(c *Config) { c.ContextSize = 96 })
	var small, large []int32
	short, long := longHistory(50), longHistory(1000)
	a := allocated(func() {
		var err error
		if small, err = e.renderPrompt(short, toolPrompt{}, 16); err != nil {
			t.Fatal(err)
		}
	})
	b := allocated(func() {
		var err error
		if large, err = e.renderPrompt(long, toolPrompt{}, 16); err != nil {
			t.Fatal(err)
		}
	})
	if ratio := float64(b) / float64(a); ratio > 2 {
		t.Errorf("20x the history cost %.1fx the work (%d vs %d bytes allocated), want ≤ 2x", ratio, b, a)
	}
	if len(large) > 96-16 || len(small) > 96-16 {
		t.Errorf("prompts of %d and %d tokens leave no room to answer", len(small), len(large))
	}
	if text := e.tok.Decode(large); !strings.Contains(text, "you are helpful") || !strings.HasSuffix(strings.TrimSpace(text), "hello world") {
		t.Errorf("trimmed prompt lost the system prompt or the last message: %q", text)
	}
}

// The prompt is rendered before the request is queued: a request that
// cannot run fails at once, even while the scheduler is busy.
func TestStreamRendersOffTheScheduler(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	s.ctx = 96
	e := openTiny(t, s, func(c *Config) { c.ContextSize = 96 })
	started, release := make(chan struct{}), make(chan struct{})
	go e.runOnScheduler(context.Background(), func() { close(started); <-release })
	<-started
	defer close(release)
	huge := []llm.Message{{Role: llm.RoleUser, Content: strings.Repeat("the cat sat on the mat ", 200)}}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: huge}); !errors.Is(err, ErrContextFull) {
		t.Errorf("prompt longer than the context: got %v, want ErrContextFull from Stream itself", err)
	}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: longHistory(MaxMessages)}); !errors.Is(err, ErrTooManyMessages) {
		t.Errorf("%d messages: got %v, want ErrTooManyMessages", 2*MaxMessages+2, err)
	}
	stops := []string{"a", "b", "c", "d", "e"}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: hello, Stop: stops}); !errors.Is(err, ErrBadStop) {
		t.Errorf("5 stops: got %v, want ErrBadStop", err)
	}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: hello, Stop: []string{strings.Repeat("x", MaxStopBytes+1)}}); !errors.Is(err, ErrBadStop) {
		t.Errorf("long stop: got %v, want ErrBadStop", err)
	}
}
