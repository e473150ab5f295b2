package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/voxpipe/voxpipe/pipeline"
)

// collector is a fake OTLP/HTTP collector: it decodes what the exporter
// posts to /v1/traces the way a real one does (protobuf).
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	attrs map[string]string // resource attributes
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces with application/x-protobuf", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			c.attrs[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func TestTurnSpansReachCollector(t *testing.T) {
	col := &collector{attrs: map[string]string{}}
	srv := httptest.NewServer(col)
	defer srv.Close()
	exp, err := New(srv.URL, "voxpipe-test")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	exp.TurnTraced("sess1", pipeline.Trace{Turn: 2, PromptTokens: 40, CachedTokens: 30,
		TTFT: map[string]time.Duration{pipeline.TTFTQueue: time.Millisecond, pipeline.TTFTCompute: 9 * time.Millisecond},
		Marks: map[string]time.Time{
			pipeline.MarkSpeechStart: at(0), pipeline.MarkSpeechEnd: at(1500),
			pipeline.MarkASRFinal: at(1520), pipeline.MarkLLMRequest: at(1521),
			pipeline.MarkLLMFirstToken: at(1540), pipeline.MarkFirstAudioOut: at(1600),
			pipeline.MarkTurnEnd: at(4000),
		}})
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.attrs["service.name"] != "voxpipe-test" {
		t.Errorf("resource attributes %v", col.attrs)
	}
	byName := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		byName[s.Name] = s
	}
	turn := byName["turn"]
	if turn == nil || len(col.spans) != 7 {
		t.Fatalf("got %d spans %v; want turn and 6 stages", len(col.spans), byName)
	}
	if d := time.Duration(turn.EndTimeUnixNano - turn.StartTimeUnixNano); d != 4*time.Second {
		t.Errorf("turn span lasts %v, want 4s (speech_start → turn_end)", d)
	}
	found := map[string]bool{}
	for _, kv := range turn.Attributes {
		found[kv.Key] = true
		if kv.Key == "voxpipe.session" && kv.Value.GetStringValue() != "sess1" {
			t.Errorf("session attribute %v", kv.Value)
		}
		if kv.Key == "voxpipe.turn" && kv.Value.GetIntValue() != 2 {
			t.Errorf("turn attribute %v", kv.Value)
		}
	}
	for _, k := range []string{"voxpipe.session", "voxpipe.turn", "voxpipe.voice_to_voice_ms", "voxpipe.llm.ttft_compute_ms"} {
		if !found[k] {
			t.Errorf("turn span lacks %s", k)
		}
	}
	llm := byName[pipeline.MarkLLMFirstToken]
	if llm == nil || string(llm.ParentSpanId) != string(turn.SpanId) || string(llm.TraceId) != string(turn.TraceId) {
		t.Fatalf("llm_first_token span %v is not a child of the turn", llm)
	}
	if d := time.Duration(llm.EndTimeUnixNano - llm.StartTimeUnixNano); d != 19*time.Millisecond {
		t.Errorf("llm_first_token stage lasts %v, want 19ms (llm_request → llm_first_token)", d)
	}
}

func TestNewRejectsBadEndpoint(t *testing.T) {
	for _, e := range []string{"127.0.0.1:4318", "grpc://x:4317", "http://"} {
		if _, err := New(e, "x"); err == nil {
			t.Errorf("New(%q) accepted", e)
		}
	}
}
