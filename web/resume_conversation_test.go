package web

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/tools"
	"github.com/voxpipe/voxpipe/tools/timer"
)

// timerModel calls set_timer when a request's last message is the person's
// and answers in words once the call's result is back.
type timerModel struct{}

func (timerModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	tok := llm.Token{Text: "Timer set.", Done: true, Usage: &llm.Usage{CompletionTokens: 2}}
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == llm.RoleUser && len(req.Tools) > 0 {
		tok = llm.Token{Done: true, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: timer.SetName, Arguments: `{"duration":60}`}},
			Usage: &llm.Usage{CompletionTokens: 5}}
	}
	out := make(chan llm.Token, 1)
	out <- tok
	close(out)
	return out, nil
}

// manualClock holds the timers' functions until the test rings them.
type manualClock struct {
	mu    sync.Mutex
	rings []func()
}

type manualTimer struct{}

func (manualTimer) Stop() bool { return true }

func (c *manualClock) after(_ time.Duration, f func()) timer.Stopper {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rings = append(c.rings, f)
	return manualTimer{}
}

// ring runs every timer set so far, as if its time had come.
func (c *manualClock) ring(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	rings := c.rings
	c.rings = nil
	c.mu.Unlock()
	if len(rings) != 1 {
		t.Fatalf("%d timers set, want 1", len(rings))
	}
	rings[0]()
}

// newTimerServer is a resumable /ws server whose model sets a timer on
// every spoken turn, with the built-in timers on clock; edit, when not
// nil, changes its config.
func newTimerServer(t *testing.T, clock *manualClock, edit func(*Config)) (*testServer, *tools.Conversations) {
	t.Helper()
	asrEngine, ttsEngine := engines(t)
	cfg := Config{
		MaxSessions:   4,
		MaxFrameBytes: 4096,
		IdleTimeout:   30 * time.Second,
		Pipeline:      pipeline.DefaultConfig(),
		Resume:        ResumeConfig{TTL: time.Minute},
	}
	if edit != nil {
		edit(&cfg)
	}
	convs := tools.NewConversations(time.Minute, time.UTC, testLogger(t))
	be := pipeline.Backends{ASR: asrEngine, LLM: timerModel{}, TTS: ttsEngine,
		Tools: []tools.Provider{timer.Tools(clock.after)}, Conversations: convs}
	srv, err := New(cfg, be, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		hs.Close()
		convs.Close()
	})
	return &testServer{srv: srv, http: hs, url: "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"}, convs
}

func isNotice(ev pipeline.Event) bool { return ev.Type == pipeline.EventNotice }

// TestResumeKeepsConversation: a timer set before a drop rings into the
// session that resumed it, also two resumptions on; once the client stops,
// the conversation ends and the timer rings into nothing.
func TestResumeKeepsConversation(t *testing.T) {
	checkLeaks(t)
	clock := &manualClock{}
	ts, convs := newTimerServer(t, clock, nil)
	srv, url := ts.srv, ts.url

	a, ready := dialResume(t, url, startMsg(16000, EncodingPCM16))
	a.say(utterance(t, "set a timer for one minute", 16000))
	res := a.until("the set_timer result", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventToolResult })
	if res.Tool == nil || res.Tool.Name != timer.SetName || res.Tool.Outcome != "ok" {
		t.Fatalf("tool result %+v, want set_timer ok", res.Tool)
	}
	a.until("turn 1's trace", traceOf(1))
	a.drop()

	b, ready2 := dialResume(t, url, resumeMsg(ready.SessionToken))
	if !ready2.Resumed {
		t.Fatalf("ready %+v, want resumed", ready2)
	}
	b.drop()
	c, ready3 := dialResume(t, url, resumeMsg(ready2.SessionToken))
	if !ready3.Resumed {
		t.Fatalf("ready %+v, want resumed", ready3)
	}
	if n := convs.Len(); n != 1 {
		t.Errorf("%d conversations live, want the chain's one", n)
	}
	clock.ring(t)
	if ev := c.until("the timer's notice", isNotice); ev.Tool == nil || ev.Tool.Name != timer.SetName || ev.Text == "" {
		t.Errorf("notice %+v, want the timer's words from %s", ev, timer.SetName)
	}

	// The client ends the session for good: its conversation goes with it.
	c.say(utterance(t, "set another timer", 16000))
	c.until("the second set_timer result", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventToolResult })
	c.mu.Lock()
	_ = c.ws.WriteJSON(map[string]any{"type": "stop"})
	c.mu.Unlock()
	for range c.events { // until the server closes
	}
	waitIdle(t, srv)
	if n := convs.Len(); n != 0 {
		t.Errorf("%d conversations live after stop, want 0", n)
	}
	clock.ring(t) // dropped with a log line, no session to hear it
}
