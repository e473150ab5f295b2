package web

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	asrsphinx "github.com/voxpipe/voxpipe/asr/sphinx"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
	"github.com/voxpipe/voxpipe/tts"
	ttsflite "github.com/voxpipe/voxpipe/tts/flite"
)

// scriptedModel is an llm.Model double: it answers the i-th request with
// answers[min(i, len-1)], one word per token. The in-process engine is
// tested in its own package; here the answer must be known in advance.
type scriptedModel struct {
	answers []string
	// perTurn: the i-th answer goes to the request with i+1 user messages
	// (the i-th turn of the conversation), not to the i-th request. A
	// speculative answer that is discarded then shifts nothing.
	perTurn bool

	mu       sync.Mutex // guards requests
	requests []llm.Request
}

func (m *scriptedModel) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	m.mu.Lock()
	i := len(m.requests)
	if m.perTurn {
		i = -1
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleUser {
				i++
			}
		}
	}
	i = max(0, min(i, len(m.answers)-1))
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	words := strings.SplitAfter(m.answers[i], " ")
	out := make(chan llm.Token)
	go func() {
		defer close(out)
		for _, w := range words {
			select {
			case out <- llm.Token{Text: w}:
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- llm.Token{Done: true, Usage: &llm.Usage{CompletionTokens: len(words)}}:
		case <-ctx.Done():
		}
	}()
	return out, nil
}

// Real engines, loaded once per test binary (a pocketsphinx decoder with the
// full LM takes ~0.4 s and ~94 MB).
var (
	enginesOnce sync.Once
	engineASR   *asrsphinx.Recognizer
	engineTTS   *ttsflite.Synthesizer
	enginesErr  error
)

func engines(t *testing.T) (*asrsphinx.Recognizer, *ttsflite.Synthesizer) {
	t.Helper()
	enginesOnce.Do(func() {
		engineASR, enginesErr = asrsphinx.New(asrsphinx.DefaultConfig())
		if enginesErr != nil {
			return
		}
		engineTTS, enginesErr = ttsflite.New(ttsflite.DefaultConfig())
	})
	if enginesErr != nil {
		t.Skipf("engines unavailable (requires cgo, pocketsphinx-en-us and flite1-dev): %v", enginesErr)
	}
	return engineASR, engineTTS
}

type testServer struct {
	srv   *Server
	http  *httptest.Server
	model *scriptedModel
	url   string // ws://.../ws
}

// newTestServer starts a server on real ASR and TTS engines and a scripted
// LLM; edit adjusts the config. Cleanup shuts it down.
func newTestServer(t *testing.T, answers []string, edit func(*Config)) *testServer {
	t.Helper()
	return newTestServerWith(t, &scriptedModel{answers: answers}, nil, edit)
}

// newTestServerWith is newTestServer with the scripted model given and, when
// eou is not nil, an end-of-utterance scorer for the semantic turn mode.
func newTestServerWith(t *testing.T, model *scriptedModel, eou endturn.Scorer, edit func(*Config)) *testServer {
	t.Helper()
	asrEngine, ttsEngine := engines(t)
	if len(model.answers) == 0 {
		model.answers = []string{"It is sunny today."}
	}
	cfg := Config{
		MaxSessions:   4,
		MaxFrameBytes: 4096,
		IdleTimeout:   30 * time.Second,
		Pipeline:      pipeline.DefaultConfig(),
	}
	cfg.Pipeline.SystemPrompt = "You are a test."
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg, pipeline.Backends{ASR: asrEngine, LLM: model, TTS: ttsEngine, EOU: eou}, testLogger(t))
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
	})
	return &testServer{srv: srv, http: hs, model: model, url: "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"}
}

func testLogger(t *testing.T) zerolog.Logger {
	if testing.Verbose() {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return zerolog.Nop()
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

func sendJSON(t *testing.T, ws *websocket.Conn, v any) {
	t.Helper()
	if err := ws.WriteJSON(v); err != nil {
		t.Fatalf("write %v: %v", v, err)
	}
}

func startMsg(rate int, encoding string) map[string]any {
	return map[string]any{"type": "start", "sample_rate": rate, "encoding": encoding,
		"client": map[string]string{"name": "web-test", "version": "0"}}
}

// nextEvent reads messages until a JSON event arrives (binary frames are
// skipped); it fails the test on a read error.
func nextEvent(t *testing.T, ws *websocket.Conn) pipeline.Event {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		var ev pipeline.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("bad event %q: %v", data, err)
		}
		return ev
	}
}

func expectError(t *testing.T, ws *websocket.Conn, code string) {
	t.Helper()
	ev := nextEvent(t, ws)
	if ev.Type != pipeline.EventError || ev.Code != code {
		t.Fatalf("have %+v, want an error event with code %q", ev, code)
	}
	if ev.Message == "" {
		t.Fatalf("error event %q without a message", code)
	}
}

func expectReady(t *testing.T, ws *websocket.Conn) pipeline.Event {
	t.Helper()
	ev := nextEvent(t, ws)
	if ev.Type != pipeline.EventReady {
		t.Fatalf("have %+v, want ready", ev)
	}
	return ev
}

// expectClose reads until the server closes the connection and returns
// the close code.
func expectClose(t *testing.T, ws *websocket.Conn) int {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		t.Fatalf("read: have %v, want a close frame", err)
	}
}

// stopAndExpectClose ends a session the polite way.
func stopAndExpectClose(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	sendJSON(t, ws, map[string]any{"type": "stop"})
	if code := expectClose(t, ws); code != websocket.CloseNormalClosure {
		t.Fatalf("close code %d, want %d", code, websocket.CloseNormalClosure)
	}
}

// waitIdle waits until the server has no session left (the goroutines
// exiting is checked by goleak afterwards).
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.ActiveSessions() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still active", s.ActiveSessions())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pcmBytes(pcm []int16) []byte {
	b := make([]byte, 2*len(pcm))
	for i, s := range pcm {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(s))
	}
	return b
}

// speak synthesizes text with flite (16 kHz).
func speak(t *testing.T, synth tts.Synthesizer, text string) []int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := make(chan tts.Chunk, 64)
	errc := make(chan error, 1)
	go func() {
		errc <- synth.Synthesize(ctx, text, ch)
		close(ch)
	}()
	var pcm []int16
	for c := range ch {
		pcm = append(pcm, c.PCM...)
	}
	if err := <-errc; err != nil {
		t.Fatalf("synthesize %q: %v", text, err)
	}
	return pcm
}

// checkLeaks verifies, after every later cleanup (server shutdown
// included), that no goroutine started during the test is left.
func checkLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		// The shared recogniser refills its decoder pool in the background
		// after a session took one: that build is the pool's, not a leak.
		if engineASR != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = engineASR.WaitReady(ctx)
		}
		goleak.VerifyNone(t, opt)
	})
}

// paceMic is a fake microphone: every 20 ms it hands send one frame of
// frame samples, taken from the speech queued on speech, or silence when
// none is queued. It returns when ctx ends or send fails.
func paceMic(ctx context.Context, speech <-chan []int16, frame int, send func(pcm []int16) error) {
	silence := make([]int16, frame)
	var pending []int16
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if len(pending) < frame {
			select {
			case s := <-speech:
				pending = append(pending, s...)
			default:
			}
		}
		pcm := silence
		if len(pending) >= frame {
			pcm, pending = pending[:frame], pending[frame:]
		}
		if send(pcm) != nil {
			return
		}
	}
}
