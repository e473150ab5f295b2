package openai

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/openaiapi"
)

var words = []string{"Hel", "lo", " there", "."}

func client(t *testing.T, f *fakeServer, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{BaseURL: f.url(), Model: "m", Retries: 2, TimeoutFirstToken: 3 * time.Second, TimeoutIdle: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type result struct {
	text   string
	tokens int
	usage  *llm.Usage
	err    error
}

func ask(t *testing.T, m llm.Model) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	toks, err := m.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "Be brief."}, {Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 20, Stop: []string{"\n"}})
	if err != nil {
		return result{err: err}
	}
	var r result
	var sb strings.Builder
	for tok := range toks {
		if tok.Text != "" {
			r.tokens++
			sb.WriteString(tok.Text)
		}
		if tok.Err != nil {
			r.err = tok.Err
		}
		if tok.Done {
			r.usage = tok.Usage
		}
	}
	r.text = sb.String()
	if r.err == nil && r.usage == nil {
		t.Fatal("channel closed without Done or Err")
	}
	return r
}

func TestStreamHappyPath(t *testing.T) {
	f := newFakeServer(t, step{words: words})
	r := ask(t, client(t, f, nil))
	if r.err != nil || r.text != "Hello there." || r.tokens != 4 {
		t.Fatalf("got %+v", r)
	}
	if r.usage.PromptTokens != 10 || r.usage.CompletionTokens != 4 || r.usage.CachedTokens != 4 {
		t.Fatalf("usage %+v", r.usage)
	}
	if r.usage.TTFTNetwork <= 0 || r.usage.TTFTServer <= 0 || r.usage.TTFTQueue != 0 {
		t.Fatalf("ttft split %+v", r.usage)
	}
	b := f.body(0)
	if b["stream"] != true || b["model"] != "m" || b["max_tokens"] != float64(20) || b["temperature"] != float64(0) {
		t.Fatalf("request %v", b)
	}
	if so, _ := b["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Fatalf("stream_options %v", b["stream_options"])
	}
	if msgs, _ := b["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("messages %v", b["messages"])
	}
	if h := f.header(0); h.Get("Authorization") != "" || h.Get("Accept") != "text/event-stream" {
		t.Fatalf("headers %v", h)
	}
}

func TestKeyAndHeadersSentOnlyWhenSet(t *testing.T) {
	f := newFakeServer(t, step{words: words})
	r := ask(t, client(t, f, func(c *Config) {
		c.APIKey = "sk-secret"
		c.Headers = map[string]string{"X-Tenant": "t1"}
	}))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if h := f.header(0); h.Get("Authorization") != "Bearer sk-secret" || h.Get("X-Tenant") != "t1" {
		t.Fatalf("headers %v", h)
	}
}

func TestNonStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		st   step
	}{
		{"configured", func(c *Config) { c.NoStream = true }, step{words: words}},
		{"server does not stream", nil, step{words: words, whole: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t, tc.st)
			r := ask(t, client(t, f, tc.mod))
			if r.err != nil || r.text != "Hello there." || r.usage.CachedTokens != 4 {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

func TestLlamaTimingsSplitTTFT(t *testing.T) {
	f := newFakeServer(t, step{words: words, delay: 30 * time.Millisecond,
		usage:   `{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14}`,
		timings: `{"cache_n":7,"prompt_n":3,"prompt_ms":5.0,"predicted_n":4,"predicted_ms":8.0}`})
	r := ask(t, client(t, f, nil))
	if r.err != nil {
		t.Fatal(r.err)
	}
	u := r.usage
	if u.CachedTokens != 7 {
		t.Fatalf("cached tokens from timings.cache_n: %+v", u)
	}
	if u.TTFTCompute != 7*time.Millisecond || u.TTFTQueue < 20*time.Millisecond || u.TTFTQueue+u.TTFTCompute != u.TTFTServer {
		t.Fatalf("split %+v", u)
	}
}

func TestLastEventWithoutBlankLine(t *testing.T) {
	f := newFakeServer(t, step{words: words, noBlank: true})
	if r := ask(t, client(t, f, nil)); r.err != nil || r.text != "Hello there." {
		t.Fatalf("got %+v", r)
	}
}

func TestRetriesBeforeFirstToken(t *testing.T) {
	for _, first := range []step{{status: 500}, {status: 503}, {words: words, dropFirst: true}} {
		f := newFakeServer(t, step{status: 500}, first, step{words: words})
		r := ask(t, client(t, f, nil))
		if r.err != nil || r.text != "Hello there." || f.requests() != 3 {
			t.Fatalf("first %+v: got %+v after %d requests", first, r, f.requests())
		}
	}
}

func TestNoRetryAfterFirstToken(t *testing.T) {
	f := newFakeServer(t, step{words: words, dropAfter: 2}, step{words: words})
	r := ask(t, client(t, f, nil))
	if r.err == nil || !strings.Contains(r.err.Error(), "before [DONE]") || r.text != "Hello" {
		t.Fatalf("got %+v", r)
	}
	if !strings.HasPrefix(r.err.Error(), "openai: 127.0.0.1:") {
		t.Fatalf("error does not name the backend and server: %v", r.err)
	}
	if f.requests() != 1 {
		t.Fatalf("%d requests: a started answer was retried", f.requests())
	}
}

func TestClientErrorsNotRetried(t *testing.T) {
	f := newFakeServer(t, step{status: 400})
	r := ask(t, client(t, f, nil))
	var e *Error
	if !errors.As(r.err, &e) || e.Status != 400 || !strings.Contains(e.Message, "status 400 from the fake") || f.requests() != 1 {
		t.Fatalf("got %+v after %d requests", r, f.requests())
	}
}

func TestInStreamError(t *testing.T) {
	f := newFakeServer(t, step{words: words, inStream: `"overloaded"`})
	r := ask(t, client(t, f, nil))
	if r.err == nil || !strings.Contains(r.err.Error(), "error in stream: overloaded") || f.requests() != 1 {
		t.Fatalf("got %+v", r)
	}
}

func TestBusyHonoursRetryAfter(t *testing.T) {
	f := newFakeServer(t, step{status: 429, retryAfter: "1"}, step{words: words})
	c := client(t, f, nil)
	r := ask(t, c)
	var e *Error
	if !errors.Is(r.err, llm.ErrBusy) || !errors.As(r.err, &e) || e.RetryAfter != time.Second || f.requests() != 1 {
		t.Fatalf("got %+v after %d requests", r, f.requests())
	}
	// Within Retry-After: refused without calling the server.
	if _, err := c.Stream(context.Background(), llm.Request{}); !errors.Is(err, llm.ErrBusy) || f.requests() != 1 {
		t.Fatalf("second request: %v (%d requests)", err, f.requests())
	}
	c.busyUntil.Store(time.Now().UnixNano()) // as if the second had passed
	if r := ask(t, c); r.err != nil || r.text != "Hello there." {
		t.Fatalf("after Retry-After: %+v", r)
	}
}

func TestSlowServer(t *testing.T) {
	t.Run("first token", func(t *testing.T) {
		f := newFakeServer(t, step{words: words, delay: 5 * time.Second})
		start := time.Now()
		r := ask(t, client(t, f, func(c *Config) { c.TimeoutFirstToken = 150 * time.Millisecond }))
		if r.err == nil || !strings.Contains(r.err.Error(), "timed out waiting for the first token") {
			t.Fatalf("got %+v", r)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
	t.Run("idle", func(t *testing.T) {
		f := newFakeServer(t, step{words: words, stallAfter: 2})
		r := ask(t, client(t, f, func(c *Config) { c.TimeoutIdle = 150 * time.Millisecond }))
		if r.err == nil || !strings.Contains(r.err.Error(), "timed out waiting for the next token") || r.text != "Hello" {
			t.Fatalf("got %+v", r)
		}
	})
}

func TestConnectionRefused(t *testing.T) {
	f := newFakeServer(t, step{words: words})
	base := f.url()
	f.srv.Close()
	c, _ := NewClient(Config{BaseURL: base, Retries: 1})
	r := ask(t, c)
	if r.err == nil || !strings.Contains(r.err.Error(), "refused") {
		t.Fatalf("got %+v", r)
	}
}

func TestCancelClosesStreamAtOnce(t *testing.T) {
	f := newFakeServer(t, step{words: words, stallAfter: 1})
	c := client(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	toks, err := c.Stream(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if tok := <-toks; tok.Text != "Hel" {
		t.Fatalf("first %+v", tok)
	}
	start := time.Now()
	cancel()
	for range toks {
	}
	select {
	case <-f.gone:
	case <-time.After(time.Second):
		t.Fatal("the server's request did not end within 1 s of the cancel")
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("closing took %v", d)
	}
}

func TestPrefill(t *testing.T) {
	f := newFakeServer(t, step{words: []string{"x"}, usage: `{"prompt_tokens":30,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":20}}`})
	m, err := New(Config{BaseURL: f.url(), Prefill: true})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.(llm.Prefiller)
	if !ok {
		t.Fatal("Prefill: true does not give an llm.Prefiller")
	}
	n, err := p.Prefill(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is"}}, Conversation: "c"})
	if err != nil || n != 10 {
		t.Fatalf("Prefill = %d, %v", n, err)
	}
	if b := f.body(0); b["max_tokens"] != float64(1) || b["stream"] != false {
		t.Fatalf("prefill request %v", b)
	}
	if m2, _ := New(Config{BaseURL: f.url()}); m2 != nil {
		if _, ok := m2.(llm.Prefiller); ok {
			t.Fatal("a client without prefill claims to prefill")
		}
	}
}

func TestBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8000", "ftp://x/v1"} {
		if _, err := NewClient(Config{BaseURL: u}); err == nil {
			t.Errorf("base_url %q accepted", u)
		}
	}
}

// TestConnectionReused: after a finished stream the connection goes back
// to the pool, so the next turn pays no new handshake.
func TestConnectionReused(t *testing.T) {
	f := newFakeServer(t, step{words: words})
	var conns atomic.Int32
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	c := client(t, f, func(c *Config) { c.HTTPClient = hc })
	for range 3 {
		if r := ask(t, c); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 3 requests", n)
	}
}

// TestConversationHeader: the request's conversation goes in the header
// voxpipe's /v1 reads, and only when there is one.
func TestConversationHeader(t *testing.T) {
	if conversationHeader != openaiapi.ConversationHeader {
		t.Fatalf("client sends %q, /v1 reads %q", conversationHeader, openaiapi.ConversationHeader)
	}
	f := newFakeServer(t, step{words: []string{"a"}}, step{words: []string{"b"}})
	c := client(t, f, nil)
	for _, conv := range []string{"sess-1", ""} {
		toks, err := c.Stream(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Conversation: conv})
		if err != nil {
			t.Fatal(err)
		}
		for range toks {
		}
	}
	if got := f.header(0).Get(conversationHeader); got != "sess-1" {
		t.Errorf("first request's header %q", got)
	}
	if got, ok := f.header(1)[http.CanonicalHeaderKey(conversationHeader)]; ok {
		t.Errorf("a request without a conversation sent %q", got)
	}
}
