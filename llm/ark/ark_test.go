package ark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/sessiontest"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/pipeline"
)

// fakeArk speaks Ark's chat completions as the SDK expects them
// (volcengine-protocols.md 1.4-1.8): bearer auth, data: events each
// followed by a blank line, a usage-only chunk, [DONE]. fault picks one
// misbehaviour.
type fakeArk struct {
	key   string
	words []string
	fault string // "", "500", "429", "401", "instream", "drop", "stall"
	once  bool   // the fault hits the first request only
	// deltas are raw "delta" objects (tool calls, in Ark's wire shape)
	// sent after the words, one chunk each; finish replaces "stop".
	deltas   []string
	finish   string
	requests atomic.Int32
	lastBody atomic.Value // map[string]any
}

func (f *fakeArk) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.requests.Add(1)
	fault := f.fault
	if f.once && n > 1 {
		fault = ""
	}
	errBody := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Client-Request-Id", r.Header.Get("X-Client-Request-Id"))
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":%q,"type":"t"}}`, code, msg)
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/v3/chat/completions" {
		errBody(404, "NotFound", r.URL.Path)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		errBody(401, "AuthenticationError", "the API key is invalid")
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		errBody(400, "InvalidParameter", err.Error())
		return
	}
	f.lastBody.Store(body)
	switch fault {
	case "500":
		errBody(500, "InternalServiceError", "boom")
		return
	case "429":
		errBody(429, "RateLimitExceeded.EndpointRPMExceeded", "slow down")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	event := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		fl.Flush()
	}
	chunk := func(content, finish string) string {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		c, _ := json.Marshal(content)
		return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":` + string(c) + `},"finish_reason":` + fin + `}]}`
	}
	for i, wd := range f.words {
		if i == 1 {
			switch fault {
			case "instream":
				event(`{"error":{"code":"ServerOverloaded","message":"try later","type":"t"}}`)
				return
			case "drop":
				return // the body ends without [DONE]
			case "stall":
				<-r.Context().Done()
				return
			}
		}
		event(chunk(wd, ""))
	}
	for _, d := range f.deltas {
		event(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`)
	}
	finish := "stop"
	if f.finish != "" {
		finish = f.finish
	}
	event(chunk("", finish))
	event(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}}`)
	event("[DONE]")
}

func newFake(t *testing.T, fault string) (*fakeArk, *Client) {
	t.Helper()
	f := &fakeArk{key: "sk-test-secret", words: []string{"Hel", "lo", " there."}, fault: fault}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{Model: "ep-1", BaseURL: srv.URL + "/api/v3", APIKey: f.key, TimeoutFirstToken: 2 * time.Second, TimeoutIdle: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func collect(t *testing.T, c *Client) (string, *llm.Usage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := c.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 50})
	if err != nil {
		return "", nil, err
	}
	var sb strings.Builder
	for tok := range toks {
		sb.WriteString(tok.Text)
		if tok.Err != nil {
			return sb.String(), nil, tok.Err
		}
		if tok.Done {
			return sb.String(), tok.Usage, nil
		}
	}
	return sb.String(), nil, errors.New("channel closed without Done")
}

func TestStreamHappyPath(t *testing.T) {
	f, c := newFake(t, "")
	text, u, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if text != "Hello there." {
		t.Fatalf("text %q", text)
	}
	if u == nil || u.PromptTokens != 12 || u.CompletionTokens != 3 || u.CachedTokens != 8 || u.TTFTNetwork <= 0 || u.TTFTServer <= 0 {
		t.Fatalf("usage %+v", u)
	}
	body := f.lastBody.Load().(map[string]any)
	if body["model"] != "ep-1" || body["stream"] != true || body["max_tokens"] != float64(50) {
		t.Fatalf("request body %v", body)
	}
	if th, _ := body["thinking"].(map[string]any); th["type"] != "disabled" {
		t.Fatalf("thinking %v", body["thinking"])
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		fault, want string
		busy        bool
	}{
		{"500", "HTTP 500: InternalServiceError", false},
		{"429", "HTTP 429", true},
		{"instream", "ServerOverloaded", false},
		{"drop", "before [DONE]", false},
		{"stall", "timed out waiting for the next token", false},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			_, c := newFake(t, tc.fault)
			_, _, err := collect(t, c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "ark: ") {
				t.Fatalf("error %v, want one naming ark and %q", err, tc.want)
			}
			if errors.Is(err, llm.ErrBusy) != tc.busy {
				t.Fatalf("errors.Is(ErrBusy) = %v for %v", !tc.busy, err)
			}
		})
	}
}

func TestBadKeyIsNotRetriedAndNotLogged(t *testing.T) {
	f, c := newFake(t, "")
	c2, _ := New(Config{Model: "ep-1", BaseURL: c.cfg.BaseURL, APIKey: "wrong-key", Retries: 2})
	_, _, err := collect(t, c2)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "wrong-key") {
		t.Fatalf("error %v", err)
	}
	if n := f.requests.Load(); n != 1 {
		t.Fatalf("%d requests for a 401, want 1 (no retry)", n)
	}
}

func TestCancelClosesStream(t *testing.T) {
	_, c := newFake(t, "stall")
	ctx, cancel := context.WithCancel(context.Background())
	toks, _ := c.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if tok := <-toks; tok.Text != "Hel" {
		t.Fatalf("first token %+v", tok)
	}
	start := time.Now()
	cancel()
	for range toks {
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("channel closed %v after cancel", d)
	}
}

func TestNoKey(t *testing.T) {
	if _, err := New(Config{Model: "ep-1"}); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), KeyEnv) {
		t.Fatalf("New without a key: %v", err)
	}
}

// TestPipelineFaultEndsOnlyTheTurn: each fault of the fake Ark ends the
// turn with an error event naming Ark; the session's next turn is answered.
func TestPipelineFaultEndsOnlyTheTurn(t *testing.T) {
	for _, tc := range []struct{ fault, code, want string }{
		{"500", "backend_error", "llm: ark: HTTP 500: InternalServiceError"},
		{"429", "busy", ""},
		{"instream", "backend_error", "llm: ark: error in stream: ServerOverloaded"},
		{"drop", "backend_error", "llm: ark: connection closed before [DONE]"},
		{"stall", "backend_error", "llm: ark: timed out waiting for the next token"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			f, c := newFake(t, tc.fault)
			f.once = true
			s := sessiontest.Start(t, sessiontest.Config(), pipeline.Backends{ASR: sessiontest.ASR{Text: "hi"}, LLM: c, TTS: sessiontest.TTS{}})
			tr := s.Utterance(false)
			if len(tr.Errors) != 1 || tr.Errors[0].Code != tc.code || !strings.Contains(tr.Errors[0].Message, tc.want) || tr.Trace == nil {
				t.Fatalf("faulty turn: %q, trace %v", tr.ErrorText(), tr.Trace)
			}
			tr = s.Utterance(false)
			if len(tr.Errors) != 0 || tr.Answer != "Hello there." {
				t.Fatalf("next turn: %+v", tr)
			}
		})
	}
}
