package openai

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
	"github.com/voxpipe/voxpipe/llm/openaiapi"
)

// demoEngine opens the bundled demo model, or skips.
func demoEngine(t testing.TB) *engine.Engine {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(t), "models", "voxpipe-demo-q8_0.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("demo model missing: %v", err)
	}
	cfg := engine.DefaultConfig()
	cfg.ModelPath, cfg.Threads, cfg.ContextSize = path, 2, 1024
	e, err := engine.Open(cfg)
	if err != nil {
		t.Fatalf("open the demo model: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// voxpipeV1 serves e through voxpipe's own OpenAI-compatible handler, as
// `voxpipe serve` does at /v1, on a loopback port.
func voxpipeV1(t testing.TB, e llm.Model) string {
	srv := httptest.NewServer(openaiapi.New(e, "voxpipe-demo", zerolog.Nop()))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func drain(t testing.TB, m llm.Model, req llm.Request) (string, *llm.Usage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	toks, err := m.Stream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	var u *llm.Usage
	for tok := range toks {
		if tok.Err != nil {
			t.Fatal(tok.Err)
		}
		sb.WriteString(tok.Text)
		if tok.Done {
			u = tok.Usage
		}
	}
	return sb.String(), u
}

// TestAgainstVoxpipeV1 is the real peer check: the client against a second
// voxpipe's /v1 gives, at temperature 0, exactly the in-process answer, in
// streamed and whole mode, with the usage passed through.
func TestAgainstVoxpipeV1(t *testing.T) {
	e := demoEngine(t)
	base := voxpipeV1(t, e)
	questions := []string{"What is the capital of France?", "Tell me a joke.", "How do birds fly?"}
	for _, noStream := range []bool{false, true} {
		c, err := NewClient(Config{BaseURL: base, Model: "voxpipe-demo", NoStream: noStream, Retries: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range questions {
			req := llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant."}, {Role: llm.RoleUser, Content: q}}, MaxTokens: 40}
			want, wu := drain(t, e, req)
			got, gu := drain(t, c, req)
			if got != want {
				t.Errorf("stream=%v %q:\nremote    %q\nin-process %q", !noStream, q, got, want)
			}
			if gu == nil || gu.PromptTokens != wu.PromptTokens || gu.CompletionTokens != wu.CompletionTokens {
				t.Errorf("usage remote %+v, in-process %+v", gu, wu)
			}
		}
		c.Close()
	}
}

// TestPrefillAgainstVoxpipeV1: with prefill on, a prefill of the partial
// request leaves the server's cache holding it, so the final request finds
// most of its prompt cached.
func TestPrefillAgainstVoxpipeV1(t *testing.T) {
	e := demoEngine(t)
	m, err := New(Config{BaseURL: voxpipeV1(t, e), Model: "voxpipe-demo", Prefill: true})
	if err != nil {
		t.Fatal(err)
	}
	p := m.(llm.Prefiller)
	sys := llm.Message{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant."}
	partial := llm.Request{Messages: []llm.Message{sys, {Role: llm.RoleUser, Content: "what is the capital"}}, Conversation: "c1"}
	n, err := p.Prefill(context.Background(), partial)
	if err != nil || n == 0 {
		t.Fatalf("Prefill = %d, %v", n, err)
	}
	final := llm.Request{Messages: []llm.Message{sys, {Role: llm.RoleUser, Content: "what is the capital of france"}}, MaxTokens: 8, Conversation: "c1"}
	_, u := drain(t, m, final)
	// The engine saw nothing before the prefill, so every cached token is
	// its work: all of the partial's prompt but the chat template's closing
	// tokens, where the final's words go on instead.
	if u == nil || u.CachedTokens == 0 || u.CachedTokens < n-8 {
		t.Fatalf("final request: usage %+v after a prefill of %d tokens", u, n)
	}
	t.Logf("prefilled %d tokens; the final request found %d of %d cached", n, u.CachedTokens, u.PromptTokens)
}

// TestConversationsKeptApartOnV1: two sessions' turns interleaved through
// one /v1 each find their own history cached, because the client names the
// conversation and the server keeps each one's KV cache. (Sharing one
// anonymous slot, the second session's request evicted the first's, and
// the first's next turn found only the system prompt cached.)
func TestConversationsKeptApartOnV1(t *testing.T) {
	e := demoEngine(t)
	c, err := NewClient(Config{BaseURL: voxpipeV1(t, e), Model: "voxpipe-demo"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sys := llm.Message{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant."}
	history := map[string][]llm.Message{"a": {sys}, "b": {sys}}
	turn := func(conv, q string) *llm.Usage {
		msgs := append(history[conv], llm.Message{Role: llm.RoleUser, Content: q})
		text, u := drain(t, c, llm.Request{Messages: msgs, MaxTokens: 12, Conversation: conv})
		history[conv] = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: text})
		return u
	}
	first := turn("a", "What is the capital of France?")
	turn("b", "Tell me a joke about cats and dogs.")
	second := turn("a", "And of Spain?")
	// Everything of a's first request is still there: its prompt, at
	// least, comes from the cache.
	if second == nil || second.CachedTokens < first.PromptTokens {
		t.Fatalf("a's second turn found %+v cached; its first prompt was %d tokens", second, first.PromptTokens)
	}
	t.Logf("a's second turn: %d of %d prompt tokens cached", second.CachedTokens, second.PromptTokens)
}
