package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/voxpipe/voxpipe/pipeline"
)

func TestHealthz(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	resp, err := http.Get(ts.http.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status      string `json:"status"`
		MaxSessions int    `json:"max_sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || body.Status != "ok" || body.MaxSessions != 4 {
		t.Fatalf("have %d %+v", resp.StatusCode, body)
	}
}

func TestMetricsExposesNames(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	resp, err := http.Get(ts.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	want := []string{
		"voxpipe_asr_first_partial_seconds", "voxpipe_asr_final_seconds", "voxpipe_llm_request_seconds",
		"voxpipe_llm_first_token_seconds", "voxpipe_tts_first_chunk_seconds", "voxpipe_tts_first_audio_seconds",
		"voxpipe_first_audio_out_seconds", "voxpipe_playback_start_seconds", "voxpipe_turn_end_seconds",
		"voxpipe_voice_to_voice_seconds", "voxpipe_active_sessions",
		`voxpipe_frames_dropped_total{reason="input_full"}`, `voxpipe_frames_rejected_total{reason="too_large"}`,
		`voxpipe_sessions_rejected_total{reason="full"}`, "voxpipe_turns_total",
		`voxpipe_speculations_total{result="committed"}`, `voxpipe_speculations_total{result="discarded"}`,
		`voxpipe_asr_pause_finals_total{result="committed"}`, `voxpipe_asr_pause_finals_total{result="resumed"}`,
		"voxpipe_asr_replayed_seconds_total",
	}
	for _, name := range want {
		if !strings.Contains(string(text), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestMetricsObserveTrace(t *testing.T) {
	m := NewMetrics()
	end := time.Now()
	m.TurnTraced(pipeline.Trace{Turn: 1, Marks: map[string]time.Time{
		pipeline.MarkSpeechStart:   end.Add(-time.Second),
		pipeline.MarkSpeechEnd:     end,
		pipeline.MarkASRFinal:      end.Add(30 * time.Millisecond),
		pipeline.MarkFirstAudioOut: end.Add(400 * time.Millisecond),
	}})
	if n := metricValue(t, m, "voxpipe_asr_final_seconds", ""); n != 1 {
		t.Fatalf("asr_final observations: %v, want 1", n)
	}
	if n := metricValue(t, m, "voxpipe_turn_end_seconds", ""); n != 0 {
		t.Fatalf("turn_end observations: %v, want 0 (no such mark)", n)
	}
	if c := metricValue(t, m, "voxpipe_turns_total", "completed"); c != 1 {
		t.Fatalf("turns completed %v, want 1", c)
	}
	m.FrameDropped("pacer_late")
	if c := metricValue(t, m, "voxpipe_frames_dropped_total", "pacer_late"); c != 1 {
		t.Fatalf("dropped %v, want 1", c)
	}
}

// Every kind of bad input gets its own error event; the connection stays
// usable afterwards (except too_large, which closes it), and every server
// goroutine exits at the end.
func TestBadInput(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)

	cases := []struct {
		name    string
		started bool // send a valid start first
		send    func(ws *websocket.Conn) error
		code    string
	}{
		{"not json", false, text(`hello`), pipeline.CodeBadMessage},
		{"json array", false, text(`[1,2]`), pipeline.CodeBadMessage},
		{"type not a string", false, text(`{"type":5}`), pipeline.CodeBadMessage},
		{"no type", false, text(`{"sample_rate":16000}`), pipeline.CodeBadMessage},
		{"unknown type", false, text(`{"type":"dance"}`), pipeline.CodeUnknownType},
		{"unknown type after start", true, text(`{"type":"dance"}`), pipeline.CodeUnknownType},
		{"audio before start", false, binMsg(make([]byte, 640)), pipeline.CodeNotStarted},
		{"stop before start", false, text(`{"type":"stop"}`), pipeline.CodeNotStarted},
		{"interrupt before start", false, text(`{"type":"interrupt","turn":1,"played_ms":20}`), pipeline.CodeNotStarted},
		{"odd pcm", true, binMsg(make([]byte, 641)), pipeline.CodeBadAudio},
		{"empty pcm", true, binMsg(nil), pipeline.CodeBadAudio},
		{"rate too low", false, text(`{"type":"start","sample_rate":1000,"encoding":"pcm16"}`), pipeline.CodeBadFormat},
		{"rate too high", false, text(`{"type":"start","sample_rate":96000,"encoding":"pcm16"}`), pipeline.CodeBadFormat},
		{"odd rate", false, text(`{"type":"start","sample_rate":16001,"encoding":"pcm16"}`), pipeline.CodeBadFormat},
		{"output rate absurd", false, text(`{"type":"start","sample_rate":16000,"output_sample_rate":-5}`), pipeline.CodeBadFormat},
		{"opus at 44.1k", false, text(`{"type":"start","sample_rate":44100,"encoding":"opus"}`), pipeline.CodeBadFormat},
		{"opus output 22.05k", false, text(`{"type":"start","sample_rate":16000,"output_sample_rate":22050,"encoding":"opus"}`), pipeline.CodeBadFormat},
		{"unknown encoding", false, text(`{"type":"start","sample_rate":16000,"encoding":"mp3"}`), pipeline.CodeBadFormat},
		{"device id too long", false, text(`{"type":"start","sample_rate":16000,"device":"` + strings.Repeat("d", pipeline.MaxDeviceIDBytes+1) + `"}`), pipeline.CodeBadFormat},
		{"start twice", true, text(`{"type":"start","sample_rate":16000}`), pipeline.CodeBadMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := dial(t, ts.url)
			if tc.started {
				sendJSON(t, ws, startMsg(16000, EncodingPCM16))
				expectReady(t, ws)
			}
			if err := tc.send(ws); err != nil {
				t.Fatal(err)
			}
			expectError(t, ws, tc.code)
			// Still alive: a (second) start is answered, stop closes cleanly.
			if !tc.started {
				sendJSON(t, ws, startMsg(16000, EncodingPCM16))
				expectReady(t, ws)
			}
			stopAndExpectClose(t, ws)
		})
	}
	t.Run("bad opus packet", func(t *testing.T) {
		ws := dial(t, ts.url)
		sendJSON(t, ws, startMsg(48000, EncodingOpus))
		if ev := expectReady(t, ws); ev.Encoding != EncodingOpus || ev.SampleRate != 48000 {
			t.Fatalf("ready %+v", ev)
		}
		// TOC code 3 (arbitrary frame count) with no count byte: invalid.
		if err := ws.WriteMessage(websocket.BinaryMessage, []byte{0xff}); err != nil {
			t.Fatal(err)
		}
		expectError(t, ws, pipeline.CodeBadAudio)
		stopAndExpectClose(t, ws)
	})
	for _, started := range []bool{false, true} {
		name := "too large"
		if started {
			name += " after start"
		}
		t.Run(name, func(t *testing.T) {
			ws := dial(t, ts.url)
			if started {
				sendJSON(t, ws, startMsg(16000, EncodingPCM16))
				expectReady(t, ws)
			}
			if err := ws.WriteMessage(websocket.BinaryMessage, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			expectError(t, ws, pipeline.CodeTooLarge)
			if code := expectClose(t, ws); code != websocket.CloseMessageTooBig {
				t.Fatalf("close code %d, want %d", code, websocket.CloseMessageTooBig)
			}
		})
	}
	waitIdle(t, ts.srv)
	if c := metricValue(t, ts.srv.metrics, "voxpipe_frames_rejected_total", pipeline.CodeTooLarge); c != 2 {
		t.Errorf("frames_rejected{too_large} = %v, want 2", c)
	}
}

func text(s string) func(*websocket.Conn) error {
	return func(ws *websocket.Conn) error { return ws.WriteMessage(websocket.TextMessage, []byte(s)) }
}

func binMsg(b []byte) func(*websocket.Conn) error {
	return func(ws *websocket.Conn) error { return ws.WriteMessage(websocket.BinaryMessage, b) }
}

// A client that misbehaves and is thrown out leaves a concurrent session
// untouched.
func TestSecondSessionUnaffected(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)

	good := dial(t, ts.url)
	sendJSON(t, good, startMsg(16000, EncodingPCM16))
	expectReady(t, good)

	bad := dial(t, ts.url)
	sendJSON(t, bad, startMsg(16000, EncodingPCM16))
	expectReady(t, bad)
	_ = bad.WriteMessage(websocket.TextMessage, []byte("{{{"))
	expectError(t, bad, pipeline.CodeBadMessage)
	_ = bad.WriteMessage(websocket.BinaryMessage, make([]byte, 100<<10))
	expectError(t, bad, pipeline.CodeTooLarge)
	expectClose(t, bad)

	// The good session still reads, writes and takes audio.
	if err := good.WriteMessage(websocket.BinaryMessage, make([]byte, 640)); err != nil {
		t.Fatal(err)
	}
	sendJSON(t, good, map[string]any{"type": "dance"})
	expectError(t, good, pipeline.CodeUnknownType)
	stopAndExpectClose(t, good)
	waitIdle(t, ts.srv)
}

func TestFullServerAnswers503(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.MaxSessions = 1 })

	first := dial(t, ts.url)
	sendJSON(t, first, startMsg(16000, EncodingPCM16))
	expectReady(t, first)

	_, resp, err := websocket.DefaultDialer.Dial(ts.url, nil)
	if err == nil {
		t.Fatal("second session accepted, want HTTP 503")
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("have %v %v, want HTTP 503", resp, err)
	}
	var ev pipeline.Event
	_ = json.NewDecoder(resp.Body).Decode(&ev)
	_ = resp.Body.Close()
	if ev.Type != pipeline.EventError || ev.Code != pipeline.CodeBusy {
		t.Fatalf("503 body %+v, want a busy error event", ev)
	}
	if c := metricValue(t, ts.srv.metrics, "voxpipe_sessions_rejected_total", reasonFull); c != 1 {
		t.Fatalf("sessions_rejected{full} = %v, want 1", c)
	}
	stopAndExpectClose(t, first)
	waitIdle(t, ts.srv)

	// The slot is free again.
	again := dial(t, ts.url)
	sendJSON(t, again, startMsg(16000, EncodingPCM16))
	expectReady(t, again)
	stopAndExpectClose(t, again)
	waitIdle(t, ts.srv)
}

func TestPlainGETOnWSIsRefused(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	resp, err := http.Get(ts.http.URL + "/ws")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("have %d, want 400", resp.StatusCode)
	}
}

// A client that vanishes mid-turn (TCP gone, no close frame): everything
// the server started for it exits.
func TestClientVanishesMidTurn(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	_, synth := engines(t)
	speech := speak(t, synth, "What is the weather like today?")

	ws := dial(t, ts.url)
	sendJSON(t, ws, startMsg(16000, EncodingPCM16))
	expectReady(t, ws)
	// Speech then silence, as fast as the socket takes it, so the server is
	// mid-turn (recognising or answering) when the client disappears.
	audio := append(append(make([]int16, 8000), speech...), make([]int16, 16000)...)
	for i := 0; i+320 <= len(audio); i += 320 {
		if err := ws.WriteMessage(websocket.BinaryMessage, pcmBytes(audio[i:i+320])); err != nil {
			t.Fatal(err)
		}
	}
	_ = ws.NetConn().Close()
	waitIdle(t, ts.srv)
}

// Shutdown closes live WebSockets with 1001 and waits for their sessions.
func TestShutdownClosesSessions(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, nil)
	ws := dial(t, ts.url)
	sendJSON(t, ws, startMsg(16000, EncodingPCM16))
	expectReady(t, ws)
	idle := dial(t, ts.url) // never sends start

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- ts.srv.Shutdown(ctx) }()
	for _, c := range []*websocket.Conn{ws, idle} {
		if code := expectClose(t, c); code != websocket.CloseGoingAway {
			t.Fatalf("close code %d, want %d", code, websocket.CloseGoingAway)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// New sessions are refused while stopped.
	_, resp, err := websocket.DefaultDialer.Dial(ts.url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after shutdown: %v %v, want 503", resp, err)
	}
	_ = resp.Body.Close()
}

// metricValue reads a counter or gauge (its one label's value given), or a
// histogram's observation count, from m's registry.
func metricValue(t *testing.T, m *Metrics, name, label string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			if label != "" && (len(metric.GetLabel()) != 1 || metric.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case metric.GetHistogram() != nil:
				return float64(metric.GetHistogram().GetSampleCount())
			case metric.GetCounter() != nil:
				return metric.GetCounter().GetValue()
			case metric.GetGauge() != nil:
				return metric.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

// A client that stays connected but sends nothing and answers no ping is
// dropped after IdleTimeout.
func TestIdleClientIsDropped(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.IdleTimeout = 300 * time.Millisecond })
	ws := dial(t, ts.url) // never reads, so never answers pings
	sendJSON(t, ws, startMsg(16000, EncodingPCM16))
	for ts.srv.ActiveSessions() == 0 { // registered right after the upgrade
		time.Sleep(time.Millisecond)
	}
	waitIdle(t, ts.srv)
}
