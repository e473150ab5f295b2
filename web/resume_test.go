package web

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
)

// rclient is a device on /ws for the resume tests: a real-time microphone
// (silence unless say queued speech) and a reader that hands every event to
// the test. drop cuts the TCP connection without a close frame, as a
// device losing Wi-Fi does.
type rclient struct {
	t      *testing.T
	ws     *websocket.Conn
	speech chan []int16
	events chan pipeline.Event
	closed chan error // the reader's final error
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // one writer at a time
}

func dialResume(t *testing.T, url string, start map[string]any) (*rclient, pipeline.Event) {
	t.Helper()
	c := &rclient{t: t, ws: dial(t, url), speech: make(chan []int16, 4),
		events: make(chan pipeline.Event, 4096), closed: make(chan error, 1)}
	sendJSON(t, c.ws, start)
	ev := nextEvent(t, c.ws)
	if ev.Type != pipeline.EventReady {
		return c, ev // the caller checks
	}
	c.run()
	return c, ev
}

func (c *rclient) run() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() {
		paceMic(ctx, c.speech, 320, func(pcm []int16) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.ws.WriteMessage(websocket.BinaryMessage, pcmBytes(pcm))
		})
	})
	c.wg.Go(func() {
		defer close(c.events)
		_ = c.ws.SetReadDeadline(time.Now().Add(2 * time.Minute))
		for {
			typ, data, err := c.ws.ReadMessage()
			if err != nil {
				c.closed <- err
				return
			}
			if typ != websocket.TextMessage {
				continue
			}
			var ev pipeline.Event
			if err := json.Unmarshal(data, &ev); err != nil {
				c.t.Errorf("bad event %q", data)
				continue
			}
			c.events <- ev
		}
	})
	c.t.Cleanup(c.stop)
}

func (c *rclient) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	_ = c.ws.Close()
	c.wg.Wait()
}

// drop cuts the connection without a close frame.
func (c *rclient) drop() {
	c.cancel()
	_ = c.ws.UnderlyingConn().Close()
	c.wg.Wait()
}

// until returns the first event match accepts, failing after 60 s.
func (c *rclient) until(what string, match func(pipeline.Event) bool) pipeline.Event {
	c.t.Helper()
	timeout := time.After(60 * time.Second)
	var seen []string
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatalf("connection ended waiting for %s; saw %v", what, seen)
			}
			seen = append(seen, ev.Type+":"+ev.Code+ev.Text)
			if match(ev) {
				return ev
			}
		case <-timeout:
			c.t.Fatalf("no %s within 60 s; saw %v", what, seen)
		}
	}
}

func finalOf(turn int) func(pipeline.Event) bool {
	return func(ev pipeline.Event) bool {
		return ev.Type == pipeline.EventTranscript && ev.Final && ev.Turn == turn
	}
}

func resumeMsg(token string) map[string]any {
	return map[string]any{"type": "start", "resume": token}
}

// TestResumeAfterDrop: a device drops in the middle of its second turn's
// answer and reconnects with its token: the session comes back with its
// format, its turn numbers and its history (the cut answer as far as it
// was sent), and the cut turn is reported with the person's words.
func TestResumeAfterDrop(t *testing.T) {
	checkLeaks(t)
	long := "Here is a long answer that takes several seconds to speak, so the connection drops while it plays. It goes on and on."
	ts := newTestServer(t, []string{"It is sunny today.", long, "Yes."}, func(c *Config) {
		c.Resume = ResumeConfig{TTL: time.Minute}
	})
	start := startMsg(16000, EncodingPCM16)
	a, ready := dialResume(t, ts.url, start)
	if ready.Type != pipeline.EventReady || len(ready.SessionToken) != 32 || ready.Resumed {
		t.Fatalf("ready %+v, want a 128-bit session token", ready)
	}
	a.say(utterance(t, "what is the weather like today", 16000))
	a.until("turn 1's trace", traceOf(1))
	a.say(utterance(t, "tell me a long story", 16000))
	said := a.until("turn 2's final transcript", finalOf(2)).Text
	a.until("turn 2's answer", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventAnswer && ev.Turn == 2 })
	a.drop()

	b, ready2 := dialResume(t, ts.url, resumeMsg(ready.SessionToken))
	if ready2.Type != pipeline.EventReady || !ready2.Resumed || ready2.Turn != 2 || ready2.Encoding != EncodingPCM16 || ready2.SampleRate != 16000 {
		t.Fatalf("ready %+v, want resumed at turn 2 with the first start's format", ready2)
	}
	if ready2.SessionToken == "" || ready2.SessionToken == ready.SessionToken {
		t.Errorf("resumed session token %q, want a new one", ready2.SessionToken)
	}
	cut := b.until("turn_cut", func(ev pipeline.Event) bool { return ev.Type == pipeline.EventError })
	if cut.Code != pipeline.CodeTurnCut || cut.Turn != 2 || cut.Text != said || cut.Message == "" {
		t.Errorf("after resuming got %+v, want turn_cut for turn 2 with %q", cut, said)
	}
	b.say(utterance(t, "is it warm", 16000))
	b.until("turn 3's final transcript", finalOf(3))
	b.until("turn 3's trace", traceOf(3))

	ts.model.mu.Lock()
	reqs := append([]llm.Request(nil), ts.model.requests...)
	ts.model.mu.Unlock()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 6 || last[1].Content == "" || last[2].Content != "It is sunny today." || last[3].Content != said ||
		!strings.HasPrefix(long, last[4].Content) || last[4].Role != llm.RoleAssistant {
		t.Errorf("turn 3's request %q, want turns 1 and 2 (the cut answer as sent) before it", last)
	}

	// The token was used: it resumes nothing again.
	c, ev := dialResume(t, ts.url, resumeMsg(ready.SessionToken))
	if ev.Type != pipeline.EventError || ev.Code != pipeline.CodeResumeFailed {
		t.Errorf("reused token: %+v, want resume_failed", ev)
	}
	_ = c.ws.Close()
	b.mu.Lock()
	_ = b.ws.WriteJSON(map[string]any{"type": "stop"})
	b.mu.Unlock()
	waitIdle(t, ts.srv)
}

// TestResumeRefused: an unknown token, an expired one and the token of a
// session the client ended with stop get resume_failed; the connection
// stays open for a plain start.
func TestResumeRefused(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.Resume = ResumeConfig{TTL: 300 * time.Millisecond} })
	refused := func(token string) {
		t.Helper()
		c, ev := dialResume(t, ts.url, resumeMsg(token))
		if ev.Type != pipeline.EventError || ev.Code != pipeline.CodeResumeFailed {
			t.Fatalf("resume %q: %+v, want resume_failed", token, ev)
		}
		sendJSON(t, c.ws, startMsg(16000, EncodingPCM16))
		if ev := expectReady(t, c.ws); ev.Resumed {
			t.Errorf("plain start after a refused resume: %+v", ev)
		}
		stopAndExpectClose(t, c.ws)
	}
	refused("00112233445566778899aabbccddeeff")

	a, ready := dialResume(t, ts.url, startMsg(16000, EncodingPCM16))
	a.drop()
	time.Sleep(time.Second) // past the TTL
	refused(ready.SessionToken)

	b, ready := dialResume(t, ts.url, startMsg(16000, EncodingPCM16))
	b.mu.Lock()
	_ = b.ws.WriteJSON(map[string]any{"type": "stop"})
	b.mu.Unlock()
	for range b.events { // until the server closes
	}
	refused(ready.SessionToken)
	waitIdle(t, ts.srv)
}

// TestResumeTakesOver: a device whose old connection the server still
// thinks alive resumes anyway: the old one is closed with 4000 and the new
// one gets the session.
func TestResumeTakesOver(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.Resume = ResumeConfig{TTL: time.Minute} })
	a, ready := dialResume(t, ts.url, startMsg(16000, EncodingPCM16))
	b, ready2 := dialResume(t, ts.url, resumeMsg(ready.SessionToken))
	if !ready2.Resumed {
		t.Fatalf("ready %+v, want resumed", ready2)
	}
	for range a.events {
	}
	var ce *websocket.CloseError
	if err := <-a.closed; !errors.As(err, &ce) || ce.Code != closeTakenOver {
		t.Errorf("old connection ended with %v, want close %d", err, closeTakenOver)
	}
	b.mu.Lock()
	_ = b.ws.WriteJSON(map[string]any{"type": "stop"})
	b.mu.Unlock()
	waitIdle(t, ts.srv)
}

func (c *rclient) say(pcm []int16) { c.speech <- pcm }

// TestTurnLogCut: what the writer saw decides what a drop cut.
func TestTurnLogCut(t *testing.T) {
	var l turnLog
	for _, ev := range []pipeline.Event{
		{Type: pipeline.EventTranscript, Turn: 1, Text: "hello", Final: true},
		{Type: pipeline.EventAnswer, Turn: 1, Text: "Hi "},
		{Type: pipeline.EventAnswer, Turn: 1, Text: "there."},
		{Type: pipeline.EventTrace, Turn: 1},
		{Type: pipeline.EventTranscript, Turn: 2, Text: "what is"},
	} {
		l.observe(&ev)
	}
	cut := l.cut()
	if len(cut) != 1 || cut[0].Turn != 2 || cut[0].Text != "what is" || cut[0].Code != pipeline.CodeTurnCut {
		t.Fatalf("speech cut mid-utterance: %+v", cut)
	}
	for _, ev := range []pipeline.Event{
		{Type: pipeline.EventTranscript, Turn: 2, Text: "what is the time", Final: true},
		{Type: pipeline.EventTranscript, Turn: 2, Text: "in paris", Final: true}, // spoken again before the turn began
		{Type: pipeline.EventAnswer, Turn: 2, Text: "It is "},
	} {
		l.observe(&ev)
	}
	cut = l.cut()
	if len(cut) != 1 || cut[0].Turn != 2 || cut[0].Text != "what is the time in paris" || !strings.Contains(cut[0].Message, "5 characters") {
		t.Fatalf("answer cut: %+v", cut)
	}
	h := settledHistory([]llm.Message{{Role: llm.RoleUser, Content: "hello"}, {Role: llm.RoleAssistant, Content: "Hi there."},
		{Role: llm.RoleUser, Content: "what is the time in paris"}}, &l)
	if len(h) != 4 || h[3].Content != "It is" {
		t.Errorf("settled history %q, want the cut answer as sent", h)
	}
	l.observe(&pipeline.Event{Type: pipeline.EventTrace, Turn: 2})
	if cut := l.cut(); len(cut) != 0 {
		t.Errorf("nothing cut after the trace, got %+v", cut)
	}
}
