package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/config"
	"github.com/voxpipe/voxpipe/llm"
)

// stallModel streams one token and then nothing until its request ends: a
// long /v1 completion.
type stallModel struct{}

func (stallModel) Stream(ctx context.Context, _ llm.Request) (<-chan llm.Token, error) {
	out := make(chan llm.Token, 1)
	out <- llm.Token{Text: "hi"}
	go func() {
		<-ctx.Done()
		close(out)
	}()
	return out, nil
}

// startStallServe runs serve with the stalling LLM and real ASR/TTS.
func startStallServe(t *testing.T, sets ...string) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	chdirRoot(t)
	llmBackends["stall"] = func(*config.Config) (llm.Model, io.Closer, error) { return stallModel{}, io.NopCloser(nil), nil }
	t.Cleanup(func() { delete(llmBackends, "stall") })
	cfg, err := loadConfig(defaultConfigPath, "127.0.0.1:0", append([]string{"log.level=warn", "llm.backend=stall", "pipeline.early_start=off"}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	addrc := make(chan net.Addr, 1)
	onListening = func(a net.Addr) { addrc <- a }
	t.Cleanup(func() { onListening = nil })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, cfg, zerolog.Nop()) }()
	select {
	case a := <-addrc:
		return a.String(), cancel, served
	case err := <-served:
		t.Skipf("server did not start (engines unavailable?): %v", err)
	}
	return "", nil, nil
}

func startSession(t *testing.T, addr string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteJSON(map[string]any{"type": "start", "sample_rate": 16000}); err != nil {
		t.Fatal(err)
	}
	var ready map[string]any
	if err := ws.ReadJSON(&ready); err != nil || ready["type"] != "ready" {
		t.Fatalf("have %v %v, want ready", ready, err)
	}
	return ws
}

// closeCode reads until the close frame and returns its code (-1: none).
func closeCode(ws *websocket.Conn, within time.Duration) int {
	_ = ws.SetReadDeadline(time.Now().Add(within))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			return -1
		}
	}
}

// Voice sessions are told going_away at once, not after the /v1 streams
// have used the shutdown budget; a /v1 stream still running at the deadline
// is cut with an error event.
func TestShutdownOrder(t *testing.T) {
	shutdownTimeout = 2 * time.Second
	t.Cleanup(func() { shutdownTimeout = 10 * time.Second })
	addr, cancel, served := startStallServe(t)
	ws := startSession(t, addr)
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"stream":true,"messages":[{"role":"user","content":"tell me a long story"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); l != "" {
				lines <- l
			}
		}
	}()
	<-lines // the role chunk: the stream is running

	cancel() // what SIGTERM does
	code := closeCode(ws, 5*time.Second)
	streamOpen := true
	select {
	case _, streamOpen = <-lines:
	default:
	}
	if code != websocket.CloseGoingAway || !streamOpen {
		t.Errorf("voice session: close %d with the /v1 stream open %v; want 1001 while it still runs", code, streamOpen)
	}
	var last string
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
			}
			if l != "" {
				last = l
			}
		case <-deadline:
			t.Fatal("the /v1 stream was not cut at the shutdown deadline")
		}
	}
	if !strings.Contains(last, "shutting down") {
		t.Errorf("the /v1 stream's last event %q, want an error saying the server is shutting down", last)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// With server.drain_timeout, SIGTERM refuses new sessions and reports
// draining while a running session goes on; when it ends, serve returns
// without waiting out the drain. A session still running at the drain
// deadline is told going_away.
func TestShutdownDrains(t *testing.T) {
	addr, cancel, served := startStallServe(t, "server.drain_timeout=60s")
	a := startSession(t, addr)
	cancel()
	// Draining is entered right after cancel; poll /healthz for it.
	var status int
	for i := 0; i < 50 && status != http.StatusServiceUnavailable; i++ {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		status = resp.StatusCode
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if status != http.StatusServiceUnavailable {
		t.Fatalf("/healthz while draining: %d, want 503", status)
	}
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("new session while draining: %v %v, want HTTP 503", resp, err)
	}
	if code := closeCode(a, 300*time.Millisecond); code != -1 {
		t.Fatalf("the running session was closed (%d) while draining", code)
	}
	_ = a.SetReadDeadline(time.Time{})
	if err := a.WriteJSON(map[string]any{"type": "stop"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve still draining after its only session ended")
	}
}

func TestShutdownDrainDeadline(t *testing.T) {
	addr, cancel, served := startStallServe(t, "server.drain_timeout=1s")
	a := startSession(t, addr)
	cancel()
	if code := closeCode(a, 10*time.Second); code != websocket.CloseGoingAway {
		t.Errorf("session at the drain deadline: close %d, want 1001", code)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}
