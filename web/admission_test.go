package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/pipeline"
)

// TestAdmissionAutoLimit: the auto limit is the CPU budget over the cost
// of a session, the starting estimate until a session is measured, then
// the measured peak, which decays.
func TestAdmissionAutoLimit(t *testing.T) {
	a := newAdmission(AdmissionConfig{Auto: true, Cores: 2, TargetUtilization: 0.8, SessionCPU: 0.2}, 16, func() int { return 0 }, zerolog.Nop())
	if got := a.Limit(); got != 8 {
		t.Fatalf("starting limit %d, want 8 (1.6 cores / 0.2)", got)
	}
	if a.refuse(7) != "" || a.refuse(8) != reasonCapacity {
		t.Errorf("refuse(7)=%q refuse(8)=%q; want admit, then capacity", a.refuse(7), a.refuse(8))
	}
	a.mu.Lock()
	a.idleCPU, a.cost = 0.1, 0.5 // measured: 0.1 idle, 0.5 a session
	a.limit = a.autoLimit(16)
	a.mu.Unlock()
	if got := a.Limit(); got != 3 {
		t.Errorf("measured limit %d, want 3 ((1.6-0.1)/0.5)", got)
	}
	fixed := newAdmission(AdmissionConfig{}, 5, func() int { return 0 }, zerolog.Nop())
	if fixed.Limit() != 5 || fixed.refuse(100) != "" {
		t.Error("without auto, admission leaves the limit to MaxSessions")
	}
}

// TestAdmissionRefusesWhileSlow: past max_v2v_ms at p95 over the recent
// turns a new session gets HTTP 503 busy (reason overloaded, counted),
// while the session already running is unaffected.
func TestAdmissionRefusesWhileSlow(t *testing.T) {
	checkLeaks(t)
	ts := newTestServer(t, nil, func(c *Config) { c.Admission.MaxV2V = time.Second })
	first := dial(t, ts.url)
	sendJSON(t, first, startMsg(16000, EncodingPCM16))
	expectReady(t, first)

	slow := pipeline.Trace{Marks: map[string]time.Time{pipeline.MarkSpeechEnd: time.Now(), pipeline.MarkFirstAudioOut: time.Now().Add(3 * time.Second)}}
	for range 3 {
		ts.srv.metrics.ForSession("x", ts.srv.metrics).TurnTraced(slow)
	}
	_, resp, err := websocket.DefaultDialer.Dial(ts.url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("have %v %v, want HTTP 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var ev pipeline.Event
	if json.Unmarshal(body, &ev) != nil || ev.Code != pipeline.CodeBusy || !strings.Contains(ev.Message, "overloaded") {
		t.Fatalf("503 body %s, want a busy error saying overloaded", body)
	}
	if c := metricValue(t, ts.srv.metrics, "voxpipe_sessions_rejected_total", reasonSlow); c != 1 {
		t.Errorf("sessions_rejected{overloaded} = %v, want 1", c)
	}
	if c := metricValue(t, ts.srv.metrics, "voxpipe_sessions_total", "ws"); c != 1 {
		t.Errorf("sessions_total{ws} = %v, want 1", c)
	}
	stopAndExpectClose(t, first)
	waitIdle(t, ts.srv)
	// With nobody running the guard has no one to protect: admitted.
	again := dial(t, ts.url)
	sendJSON(t, again, startMsg(16000, EncodingPCM16))
	expectReady(t, again)
	stopAndExpectClose(t, again)
	waitIdle(t, ts.srv)
}

// TestCapacityMetrics: a turn's trace feeds the interval histograms and
// the TTFT split; error events and engine gauges are exported.
func TestCapacityMetrics(t *testing.T) {
	m := NewMetrics()
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	m.TurnTraced(pipeline.Trace{Interrupted: true,
		TTFT: map[string]time.Duration{pipeline.TTFTQueue: 2 * time.Millisecond, pipeline.TTFTCompute: 10 * time.Millisecond},
		Marks: map[string]time.Time{
			pipeline.MarkSpeechEnd: at(0), pipeline.MarkASRFinal: at(30),
			pipeline.MarkLLMRequest: at(31), pipeline.MarkLLMFirstToken: at(45), pipeline.MarkInterrupted: at(900),
		}})
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	intervals := map[string]uint64{}
	ttft := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetName() {
			case "voxpipe_trace_interval_seconds":
				intervals[labels["from"]+">"+labels["to"]] = mt.GetHistogram().GetSampleCount()
			case "voxpipe_llm_ttft_seconds":
				ttft[labels["part"]] = mt.GetHistogram().GetSampleSum()
			}
		}
	}
	for _, k := range []string{"speech_end>asr_final", "asr_final>llm_request", "llm_request>llm_first_token", "llm_first_token>interrupted"} {
		if intervals[k] != 1 {
			t.Errorf("interval %s observed %d times, want 1 (have %v)", k, intervals[k], intervals)
		}
	}
	if d := ttft["network"]; d < 0.0019 || d > 0.0021 {
		t.Errorf("ttft network %v s, want 0.002 (14 ms - 2 - 10)", d)
	}
	if c := metricValue(t, m, "voxpipe_interruptions_total", ""); c != 1 {
		t.Errorf("interruptions %v", c)
	}
	m.ErrorSent(pipeline.CodeBackend)
	if c := metricValue(t, m, "voxpipe_errors_total", pipeline.CodeBackend); c != 1 {
		t.Errorf("errors_total{backend_error} = %v", c)
	}
	m.WatchEngine(func() EngineStats {
		return EngineStats{Batch: 3, Queued: 1, KVBytes: 4096, SpecDrafted: 10, SpecKept: 7}
	})
	if c := metricValue(t, m, "voxpipe_llm_batch_size", ""); c != 3 {
		t.Errorf("batch size gauge %v", c)
	}
	if c := metricValue(t, m, "voxpipe_llm_spec_acceptance_ratio", ""); c != 0.7 {
		t.Errorf("acceptance %v", c)
	}
}
