package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/access"
)

func dialWith(url string, hdr http.Header) (*websocket.Conn, int, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(url, hdr)
	status := 0
	if resp != nil {
		status = resp.StatusCode
		resp.Body.Close()
	}
	return ws, status, err
}

// Any web page the user visits used to be able to open sessions to a local
// server (issue 14 item 7). Now only the server's own page may, plus
// server.allowed_origins, on /ws and /rtc/offer alike; devices (no
// Origin) are not affected, nor is a session already running.
func TestCrossOriginRefused(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	healthy := dial(t, ts.url)
	sendJSON(t, healthy, startMsg(16000, ""))
	expectReady(t, healthy)

	evil := http.Header{"Origin": {"https://evil.example"}}
	if ws, status, err := dialWith(ts.url, evil); err == nil || status != http.StatusForbidden {
		if ws != nil {
			ws.Close()
		}
		t.Errorf("/ws from another origin: HTTP %d (%v), want 403", status, err)
	}
	req, _ := http.NewRequest("POST", ts.http.URL+"/rtc/offer", strings.NewReader(`{"type":"offer","sdp":"v=0"}`))
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/rtc/offer from another origin: HTTP %d, want 403", resp.StatusCode)
	}
	own := http.Header{"Origin": {ts.http.URL}}
	ws, status, err := dialWith(ts.url, own)
	if err != nil {
		t.Fatalf("/ws from the server's own page: HTTP %d %v", status, err)
	}
	sendJSON(t, ws, startMsg(16000, ""))
	expectReady(t, ws)
	stopAndExpectClose(t, ws)
	if n := limitCount(ts.srv, access.RejectOrigin); n != 2 {
		t.Errorf("origin refusals counted %v, want 2", n)
	}
	// The running session did not notice.
	sendJSON(t, healthy, map[string]any{"type": "ping_check_unknown"})
	expectError(t, healthy, pipeline.CodeUnknownType)
	stopAndExpectClose(t, healthy)
}

// syncBuffer collects log lines from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// With API keys set, sessions and /v1 need a key or a session token; a
// refusal is a 401 saying what to send; and no key or token, right or
// wrong, ever reaches the log (at debug level).
func TestAPIKeysNoSecretInLogs(t *testing.T) {
	asrEngine, ttsEngine := engines(t)
	const key, wrong = "vp-key-7f3a91c2e5", "vp-wrong-0b77d41e"
	var logs syncBuffer
	cfg := Config{MaxSessions: 4, MaxFrameBytes: 4096, IdleTimeout: 30 * time.Second, Pipeline: pipeline.DefaultConfig(),
		Access: access.Config{Keys: []string{key}}, API: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })}
	srv, err := New(cfg, pipeline.Backends{ASR: asrEngine, LLM: &scriptedModel{answers: []string{"ok"}}, TTS: ttsEngine}, zerolog.New(&logs).Level(zerolog.DebugLevel))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() { _ = srv.Shutdown(t.Context()); hs.Close() }()
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"

	for _, h := range []http.Header{nil, {"Authorization": {"Bearer " + wrong}}} {
		_, status, err := dialWith(wsURL, h)
		if err == nil || status != http.StatusUnauthorized {
			t.Errorf("/ws with %v: HTTP %d, want 401", h, status)
		}
	}
	resp, err := http.Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || body["error"]["code"] != access.CodeUnauthorized || !strings.Contains(body["error"]["message"].(string), "Bearer") {
		t.Errorf("/v1 without a key: %d %v", resp.StatusCode, body)
	}
	ws, status, err := dialWith(wsURL, http.Header{"Authorization": {"Bearer " + key}})
	if err != nil {
		t.Fatalf("/ws with the key: HTTP %d %v", status, err)
	}
	sendJSON(t, ws, startMsg(16000, ""))
	expectReady(t, ws)
	stopAndExpectClose(t, ws)

	req, _ := http.NewRequest("POST", hs.URL+access.TokenPath, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if tok.Token == "" {
		t.Fatalf("no token: HTTP %d", resp.StatusCode)
	}
	ws, status, err = dialWith(wsURL+"?token="+tok.Token, nil)
	if err != nil {
		t.Fatalf("/ws with a session token: HTTP %d %v", status, err)
	}
	sendJSON(t, ws, startMsg(16000, ""))
	expectReady(t, ws)
	stopAndExpectClose(t, ws)
	_, status, _ = dialWith(wsURL+"?token="+wrong, nil)
	if status != http.StatusUnauthorized {
		t.Errorf("/ws with a bad token: HTTP %d", status)
	}
	waitIdle(t, srv)
	out := logs.String()
	if !strings.Contains(out, "websocket") {
		t.Fatalf("the debug log is empty? %q", out)
	}
	for _, secret := range []string{key, wrong, tok.Token} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a secret %q:\n%s", secret, out)
		}
	}
}

// A session that reaches server.limits.max_session is closed with 1008
// and the reason.
func TestMaxSession(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config) { c.MaxSession = 500 * time.Millisecond })
	ws := dial(t, ts.url)
	sendJSON(t, ws, startMsg(16000, ""))
	expectReady(t, ws)
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "max_session") {
				t.Errorf("closed with %v, want 1008 max_session", err)
			}
			break
		}
	}
	if n := limitCount(ts.srv, "max_session"); n != 1 {
		t.Errorf("max_session counted %v times", n)
	}
}

func limitCount(s *Server, limit string) float64 {
	var m dto.Metric
	_ = s.limitsHit.WithLabelValues(limit).Write(&m)
	return m.GetCounter().GetValue()
}

// A connection that never sends start is closed after StartTimeout with
// not_started and 1008, even while it answers pings; one that starts in
// time is not.
func TestStartTimeout(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config) {
		c.StartTimeout = 300 * time.Millisecond
		c.IdleTimeout = 200 * time.Millisecond // pings every 180 ms, answered by the reader
	})
	ws := dial(t, ts.url)
	began := time.Now()
	expectError(t, ws, "not_started")
	if code := expectClose(t, ws); code != websocket.ClosePolicyViolation {
		t.Errorf("close code %d, want 1008", code)
	}
	if el := time.Since(began); el > 3*time.Second {
		t.Errorf("closed after %v, want about 300 ms", el)
	}
	if n := limitCount(ts.srv, "start_timeout"); n != 1 {
		t.Errorf("start_timeout counted %v times", n)
	}

	ts2 := newTestServer(t, nil, func(c *Config) { c.StartTimeout = 300 * time.Millisecond })
	ok := dial(t, ts2.url)
	sendJSON(t, ok, startMsg(16000, ""))
	expectReady(t, ok)
	time.Sleep(600 * time.Millisecond) // past the start timeout
	stopAndExpectClose(t, ok)
	waitIdle(t, ts2.srv)
}
