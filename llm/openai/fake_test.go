package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer speaks OpenAI's chat completions: SSE chunks (role chunk,
// content deltas, a finish chunk, the usage chunk when asked, [DONE]) or a
// whole chat.completion, and OpenAI's error bodies. Each request takes the
// next entry of script (the last repeats), so a test can fail the first
// attempts and answer the next.
type fakeServer struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	script []step
	bodies []map[string]any
	heads  []http.Header
	n      atomic.Int32
	// gone is closed when a request's context ends (the client hung up).
	gone chan struct{}
}

// step says how to answer one request.
type step struct {
	status     int    // non-200: an error body with this status
	retryAfter string // Retry-After header of an error
	words      []string
	usage      string // the usage JSON; "" = a default
	timings    string // llama.cpp timings JSON on the last chunk
	whole      bool   // answer with one JSON body even when asked to stream
	dropAfter  int    // >0: close the connection after this many words, no [DONE]
	stallAfter int    // >0: stop sending after this many words until the client leaves
	delay      time.Duration
	inStream   string // an error event after the first word
	noBlank    bool   // omit the blank line after the last event (then EOF)
	dropFirst  bool   // close the connection before the first word
	// Tool calls: deltas are raw "delta" objects sent after the words,
	// one chunk each (hold, when set, must close before the first goes
	// out); message is raw fields added to a whole answer's message;
	// finish replaces the finish_reason "stop" ("-": none at all).
	deltas  []string
	hold    chan struct{}
	message string
	finish  string
	// deltaGap is the pause before each delta; stallDeltas > 0 stops
	// after that many deltas until the client leaves.
	deltaGap    time.Duration
	stallDeltas int
}

func newFakeServer(t *testing.T, script ...step) *fakeServer {
	f := &fakeServer{t: t, script: script, gone: make(chan struct{}, 64)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL + "/v1" }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	defer func() { f.gone <- struct{}{} }()
	i := int(f.n.Add(1)) - 1
	var body map[string]any
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&body) != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, 400)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.heads = append(f.heads, r.Header.Clone())
	st := f.script[min(i, len(f.script)-1)]
	f.mu.Unlock()
	if st.delay > 0 {
		select {
		case <-time.After(st.delay):
		case <-r.Context().Done():
			return
		}
	}
	if st.status != 0 && st.status != 200 {
		w.Header().Set("Content-Type", "application/json")
		if st.retryAfter != "" {
			w.Header().Set("Retry-After", st.retryAfter)
		}
		w.WriteHeader(st.status)
		fmt.Fprintf(w, `{"error":{"message":"status %d from the fake","type":"server_error","param":null,"code":"c%d"}}`, st.status, st.status)
		return
	}
	usage := st.usage
	if usage == "" {
		usage = fmt.Sprintf(`{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":4}}`, len(st.words), 10+len(st.words))
	}
	timings := ""
	if st.timings != "" {
		timings = `,"timings":` + st.timings
	}
	stream, _ := body["stream"].(bool)
	if !stream || st.whole {
		w.Header().Set("Content-Type", "application/json")
		text, _ := json.Marshal(strings.Join(st.words, ""))
		if st.message != "" {
			st.message = "," + st.message
		}
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s%s},"finish_reason":%s}],"usage":%s%s}`, text, st.message, st.finishJSON(), usage, timings)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	ev := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	const pre = `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	ev(pre + `{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
	fmt.Fprint(w, ": keep-alive comment\n\n") // must be ignored
	if st.dropFirst {
		return
	}
	for k, wd := range st.words {
		if st.dropAfter > 0 && k == st.dropAfter {
			return
		}
		if st.stallAfter > 0 && k == st.stallAfter {
			<-r.Context().Done()
			return
		}
		if st.inStream != "" && k == 1 {
			ev(`{"error":{"message":` + st.inStream + `,"type":"server_error"}}`)
			return
		}
		text, _ := json.Marshal(wd)
		ev(pre + `{"index":0,"delta":{"content":` + string(text) + `},"finish_reason":null}]}`)
	}
	if st.hold != nil {
		select {
		case <-st.hold:
		case <-r.Context().Done():
			return
		}
	}
	for k, d := range st.deltas {
		if st.stallDeltas > 0 && k == st.stallDeltas {
			<-r.Context().Done()
			return
		}
		time.Sleep(st.deltaGap)
		ev(pre + `{"index":0,"delta":` + d + `,"finish_reason":null}]}`)
	}
	if st.finish != "-" {
		ev(pre + `{"index":0,"delta":{},"finish_reason":` + st.finishJSON() + `}]` + timings + `}`)
	}
	if so, _ := body["stream_options"].(map[string]any); so["include_usage"] == true {
		ev(pre + `],"usage":` + usage + `}`)
	}
	if st.noBlank {
		fmt.Fprint(w, "data: [DONE]")
		return
	}
	ev("[DONE]")
	time.Sleep(5 * time.Millisecond) // the body ends a little later, as with real servers
}

func (st step) finishJSON() string {
	switch st.finish {
	case "":
		return `"stop"`
	case "-":
		return "null"
	}
	return `"` + st.finish + `"`
}

func (f *fakeServer) requests() int { return int(f.n.Load()) }

func (f *fakeServer) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fakeServer) header(i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heads[i]
}
