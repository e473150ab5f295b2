package openai

import (
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/pipeline"
)

// TestPipelineFaultEndsOnlyTheTurn: every fault of the fake server ends the
// turn with an error event naming the backend and the server; the next
// turn of the same session is answered.
func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	good := step{words: []string{"Fine ", "thanks."}}
	for _, tc := range []struct {
		name, code, want string
		fault            step
	}{
		{"server error", "backend_error", "HTTP 500", step{status: 500}},
		{"busy", "busy", "", step{status: 429, retryAfter: "0"}},
		{"dropped mid-stream", "backend_error", "connection closed before [DONE]", step{words: words, dropAfter: 2}},
		{"slow server", "backend_error", "timed out waiting for the first token", step{words: words, delay: 2 * time.Second}},
		{"error in stream", "backend_error", "error in stream: overloaded", step{words: words, inStream: `"overloaded"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.fault, good)
			c := client(t, f, func(c *Config) { c.Retries, c.TimeoutFirstToken = 0, 300*time.Millisecond })
			s := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "how are you"}, LLM: c, TTS: sessiontest.TTS{}})
			tr := s.Utterance(false)
			if len(tr.Errors) != 1 || tr.Errors[0].Code != tc.code || tr.Trace == nil {
				t.Fatalf("faulty turn: errors %q, trace %v", tr.ErrorText(), tr.Trace)
			}
			if msg := tr.Errors[0].Message; tc.code == "backend_error" && (!strings.Contains(msg, "llm: openai: 127.0.0.1:") || !strings.Contains(msg, tc.want)) {
				t.Fatalf("error %q does not name the backend or the fault (%q)", msg, tc.want)
			}
			tr = s.Utterance(false)
			if len(tr.Errors) != 0 || tr.Answer != "Fine thanks." || tr.AudioMs == 0 {
				t.Fatalf("next turn: %+v", tr)
			}
		})
	}
}

// TestTraceCarriesTTFTSplit: llama.cpp-style timings reach the turn's
// trace event as ttft_ms.
func TestTraceCarriesTTFTSplit(t *testing.T) {
	f := newFakeServer(t, step{words: []string{"Fine."}, delay: 20 * time.Millisecond,
		timings: `{"cache_n":0,"prompt_n":9,"prompt_ms":4.0,"predicted_n":1,"predicted_ms":1.0}`})
	s := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "hi"}, LLM: client(t, f, nil), TTS: sessiontest.TTS{}})
	tr := s.Utterance(false)
	if tr.Trace == nil {
		t.Fatalf("no trace: %v", tr.ErrorText())
	}
	ms := tr.Trace.TTFTMs
	if ms[pipeline.TTFTCompute] != 5 || ms[pipeline.TTFTQueue] < 10 || ms[pipeline.TTFTNetwork] <= 0 {
		t.Fatalf("ttft_ms %v", ms)
	}
}
