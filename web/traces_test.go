package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/voiceclient"
	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/web/xiaozhi"
)

// TestTraceLog: the log keeps the newest traceLogSize turns, returns them
// oldest first (the newest limit of them), filters by transport and
// session, and lists sessions most recent first.
func TestTraceLog(t *testing.T) {
	l := newTraceLog()
	t0 := time.Unix(1_700_000_000, 0)
	n := traceLogSize + 44
	for i := range n {
		tr := transportWS
		if i%3 == 0 {
			tr = transportXiaozhi
		}
		l.add(TracedTurn{Session: fmt.Sprintf("s%d", i%5), Transport: tr, At: t0.Add(time.Duration(i) * time.Second),
			Event: &pipeline.Event{Type: pipeline.EventTrace, Turn: i}})
	}
	all, sessions := l.query("", "", traceLogSize)
	if len(all) != traceLogSize || all[0].Turn != n-traceLogSize || all[len(all)-1].Turn != n-1 {
		t.Fatalf("%d turns, %d..%d; want the newest %d, %d..%d", len(all), all[0].Turn, all[len(all)-1].Turn,
			traceLogSize, n-traceLogSize, n-1)
	}
	if len(sessions) != 5 || sessions[0].Session != fmt.Sprintf("s%d", (n-1)%5) || !sessions[0].Last.After(sessions[1].Last) {
		t.Errorf("sessions %+v, want 5, the latest first", sessions)
	}
	last3, _ := l.query("", "", 3)
	if len(last3) != 3 || last3[2].Turn != n-1 {
		t.Errorf("limit 3: %d turns ending at %d", len(last3), last3[len(last3)-1].Turn)
	}
	xz, xzSessions := l.query(transportXiaozhi, "s2", traceLogSize)
	for _, tt := range xz {
		if tt.Transport != transportXiaozhi || tt.Session != "s2" {
			t.Fatalf("filtered turn %+v", tt)
		}
	}
	if len(xz) == 0 {
		t.Error("no xiaozhi turns of s2")
	}
	for _, s := range xzSessions {
		if s.Transport != transportXiaozhi {
			t.Errorf("session %+v listed for transport xiaozhi", s)
		}
	}
}

// TestTracesEndpoint: a xiaozhi device's turn, which no page shows, is in
// GET /traces with its session, device and complete trace; the endpoint is
// guarded like /rtc/config (API key or session token) and rejects bad
// parameters.
func TestTracesEndpoint(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, []string{"It is sunny today."}, func(c *Config) {
		xc := xiaozhi.DefaultConfig()
		xc.Token = "device-token" // a keyed server's devices need theirs
		c.Xiaozhi = &xc
		c.MaxFrameBytes = 65536
		c.Access.Keys = []string{"api-key"}
	})
	_, synth := engines(t)
	speech := append(make([]int16, 16000/4), speak(t, synth, "what is the weather like today")...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const deviceID = "24:0a:c4:12:34:56"
	res, err := voiceclient.RunXiaozhi(ctx, voiceclient.XiaozhiConfig{OTAURL: ts.http.URL + "/xiaozhi/ota/", DeviceID: deviceID, Turns: 1}, speech)
	if err != nil || len(res.Turns) != 1 {
		t.Fatalf("device turn: %v (%d turns)", err, len(res.Turns))
	}
	waitIdle(t, ts.srv)

	get := func(query, key string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.http.URL+TracesPath+query, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	if resp, _ := get("", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /traces without a key: %d, want 401", resp.StatusCode)
	}
	for _, q := range []string{"?limit=0", "?limit=x", "?transport=mqtt"} {
		if resp, _ := get(q, "api-key"); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /traces%s: %d, want 400", q, resp.StatusCode)
		}
	}
	resp, body := get("?transport=xiaozhi", "api-key")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /traces: %d %s", resp.StatusCode, body)
	}
	var got struct {
		Turns []struct {
			Session, Transport, Device, Type string
			Turn                             int
			At                               time.Time
			Marks                            map[string]float64
			HeardMs                          *float64 `json:"heard_ms"`
		}
		Sessions []TracedSession
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Turns) != 1 || len(got.Sessions) != 1 {
		t.Fatalf("%d turns, %d sessions, want 1 of each: %s", len(got.Turns), len(got.Sessions), body)
	}
	tt, s := got.Turns[0], got.Sessions[0]
	if tt.Transport != transportXiaozhi || tt.Device != deviceID || tt.Session == "" || tt.Type != pipeline.EventTrace || tt.Turn != 1 ||
		tt.At.IsZero() || tt.HeardMs == nil {
		t.Errorf("turn %+v", tt)
	}
	if s.Session != tt.Session || s.Device != deviceID || s.Turns != 1 || !s.Last.Equal(tt.At) {
		t.Errorf("session %+v for turn of %s", s, tt.Session)
	}
	// The whole trace, down to the device's playback start (when its first
	// packet was written).
	for _, m := range []string{pipeline.MarkSpeechStart, pipeline.MarkSpeechEnd, pipeline.MarkASRFinal, pipeline.MarkLLMFirstToken,
		pipeline.MarkTTSFirstAudio, pipeline.MarkFirstAudioOut, pipeline.MarkPlaybackStart, pipeline.MarkTurnEnd} {
		if _, ok := tt.Marks[m]; !ok {
			t.Errorf("trace has no %s: %v", m, tt.Marks)
		}
	}
	// No /ws session served: nothing for that transport.
	if _, body := get("?transport=websocket", "api-key"); string(body) != `{"turns":[],"sessions":[]}` {
		t.Errorf("websocket traces %s, want none", body)
	}
}
