package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openTiny(t *testing.T, s tinySpec, mod func(*Config)) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ModelPath = writeTiny(t, s)
	cfg.Threads = 2
	cfg.Seed = 42
	if mod != nil {
		mod(&cfg)
	}
	e, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// collect reads a stream to the end.
func collect(t *testing.T, ch <-chan llm.Token) (string, *llm.Usage) {
	t.Helper()
	var sb strings.Builder
	var usage *llm.Usage
	for tok := range ch {
		if tok.Err != nil {
			t.Fatalf("stream error: %v", tok.Err)
		}
		sb.WriteString(tok.Text)
		if tok.Done {
			usage = tok.Usage
		}
	}
	if usage == nil {
		t.Fatal("stream ended without Done")
	}
	return sb.String(), usage
}

func ask(t *testing.T, e *Engine, req llm.Request) (string, *llm.Usage) {
	t.Helper()
	ch, err := e.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, ch)
}

var hello = []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}, {Role: llm.RoleUser, Content: "hello world the cat sat on the mat"}}

func TestStreamGreedyDeterministic(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	a, ua := ask(t, e, llm.Request{Messages: hello, MaxTokens: 20})
	b, _ := ask(t, e, llm.Request{Messages: hello, MaxTokens: 20})
	if a != b {
		t.Errorf("greedy answers differ: %q vs %q", a, b)
	}
	if ua.PromptTokens == 0 || ua.CompletionTokens == 0 || ua.CompletionTokens > 20 {
		t.Errorf("usage %+v", *ua)
	}
	// Sampling with a fixed seed is reproducible too.
	s1, _ := ask(t, e, llm.Request{Messages: hello, MaxTokens: 20, Temperature: 0.9, Seed: 7})
	s2, _ := ask(t, e, llm.Request{Messages: hello, MaxTokens: 20, Temperature: 0.9, Seed: 7})
	if s1 != s2 {
		t.Errorf("seeded samples differ: %q vs %q", s1, s2)
	}
}

func TestConversationCacheMatchesFresh(t *testing.T) {
	spec := defaultTiny("qwen2", gguf.TypeQ8_0)
	cached := openTiny(t, spec, nil)
	fresh := openTiny(t, spec, nil)
	answer, u1 := ask(t, cached, llm.Request{Messages: hello, MaxTokens: 12, Conversation: "c1"})
	turn2 := append(append([]llm.Message{}, hello...),
		llm.Message{Role: llm.RoleAssistant, Content: answer},
		llm.Message{Role: llm.RoleUser, Content: "the dog is on the mat"})
	got, u2 := ask(t, cached, llm.Request{Messages: turn2, MaxTokens: 12, Conversation: "c1"})
	if u2.CachedTokens < u1.PromptTokens/2 {
		t.Errorf("second turn reused %d tokens, first prompt had %d", u2.CachedTokens, u1.PromptTokens)
	}
	want, uf := ask(t, fresh, llm.Request{Messages: turn2, MaxTokens: 12, Conversation: "other"})
	if got != want {
		t.Errorf("cached turn answered %q, fresh engine %q", got, want)
	}
	if uf.CachedTokens != 0 {
		t.Errorf("fresh conversation reports %d cached tokens", uf.CachedTokens)
	}
}

func TestStopStringNeverEmitted(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), nil)
	full, _ := ask(t, e, llm.Request{Messages: hello, MaxTokens: 30})
	if len(full) < 6 {
		t.Skipf("greedy answer %q too short to cut (requires a longer random continuation)", full)
	}
	stop := full[len(full)/2 : len(full)/2+3]
	got, _ := ask(t, e, llm.Request{Messages: hello, MaxTokens: 30, Stop: []string{stop}})
	want := full[:strings.Index(full, stop)]
	if got != want {
		t.Errorf("with stop %q got %q, want %q", stop, got, want)
	}
}

func TestStopMatcherHoldsPrefixes(t *testing.T) {
	var m stopMatcher
	m.reset([]string{"<|im_end|>", "STOP"})
	var out strings.Builder
	for _, piece := range []string{"hel", "lo <", "|im", "_e", "nd|> more"} {
		e, stopped := m.push(piece)
		out.WriteString(e)
		if stopped {
			break
		}
	}
	if out.String() != "hello " {
		t.Errorf("got %q", out.String())
	}
	m.reset([]string{"STOP"})
	e1, _ := m.push("a ST")
	e2, _ := m.push("x")
	if e1+e2+m.flush() != "a STx" {
		t.Errorf("held text lost: %q %q", e1, e2)
	}
}

func TestCancelClosesStream(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), nil)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Stream(ctx, llm.Request{Messages: hello, MaxTokens: 400})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for tok := range ch {
		if tok.Done {
			break // finished before the cancel was seen: allowed
		}
	}
	// The engine still serves the next request.
	ask(t, e, llm.Request{Messages: hello, MaxTokens: 3})
}

func TestBusyWhenQueueFull(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), func(c *Config) { c.QueueSize = 1 })
	started, release := make(chan struct{}), make(chan struct{})
	blocked := make(chan error, 1)
	go func() {
		blocked <- e.runOnScheduler(context.Background(), func() { close(started); <-release })
	}()
	<-started
	ch, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 2})
	if err != nil {
		t.Fatalf("first queued request: %v", err)
	}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: hello, MaxTokens: 2}); !errors.Is(err, llm.ErrBusy) {
		t.Errorf("got %v, want llm.ErrBusy", err)
	}
	close(release)
	<-blocked
	collect(t, ch)
}

func TestCloseIsIdempotentAndFailsQueued(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), nil)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Stream(context.Background(), llm.Request{Messages: hello}); !errors.Is(err, ErrClosed) {
		t.Errorf("got %v, want ErrClosed", err)
	}
}

func TestOverflowDropsOldTurnsKeepsSystem(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	s.ctx = 96
	e := openTiny(t, s, func(c *Config) { c.ContextSize = 96 })
	long := strings.Repeat("the cat sat on the mat ", 4)
	msgs := []llm.Message{{Role: llm.RoleSystem, Content: "you are helpful"}}
	for i := 0; i < 6; i++ {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: long}, llm.Message{Role: llm.RoleAssistant, Content: long})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "hello world"})
	ids, err := e.renderPrompt(msgs, toolPrompt{}, 16)
	if err != nil {
		t.Fatal(err)
	}
	text := e.tok.Decode(ids)
	if !strings.Contains(text, "you are helpful") || !strings.HasSuffix(strings.TrimSpace(text), "hello world") {
		t.Errorf("trimmed prompt lost the system prompt or the last message: %q", text)
	}
	if len(ids) > 96-16 {
		t.Errorf("prompt of %d tokens does not leave room to answer", len(ids))
	}
	_, u := ask(t, e, llm.Request{Messages: msgs, MaxTokens: 16})
	if u.PromptTokens != len(ids) {
		t.Errorf("usage %+v, want %d prompt tokens", *u, len(ids))
	}
}

func TestOpenErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.gguf")
	_, err := Open(Config{ModelPath: missing})
	if !errors.Is(err, ErrModelNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	// A tensor whose shape disagrees with the metadata is named.
	path := writeTiny(t, defaultTiny("llama", gguf.TypeF32))
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	f.Close()
	g, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, k := range g.Keys() {
		v, _ := g.Value(k)
		w.Set(k, v)
	}
	w.Set("llama.feed_forward_length", uint32(96))
	for _, ti := range g.Tensors {
		_, b, _ := g.Tensor(ti.Name)
		w.AddTensor(ti.Name, ti.Type, ti.Dims, b)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := w.WriteFile(bad); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{ModelPath: bad})
	if !errors.Is(err, ErrBadShape) || !strings.Contains(err.Error(), "blk.0.ffn_gate.weight") {
		t.Errorf("bad shape: %v", err)
	}
}

func TestInPlaceWeightsSameAnswer(t *testing.T) {
	spec := defaultTiny("qwen3", gguf.TypeQ8_0)
	copied := openTiny(t, spec, nil)
	inPlace := openTiny(t, spec, func(c *Config) { c.InPlace = true })
	a, _ := ask(t, copied, llm.Request{Messages: hello, MaxTokens: 16})
	b, _ := ask(t, inPlace, llm.Request{Messages: hello, MaxTokens: 16})
	if a != b {
		t.Errorf("copied weights answered %q, in-place %q", a, b)
	}
}

func TestSamplerTopK(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32((i * 7919) % 1000) // a permutation of 0..999
	}
	s := newSampler(len(logits))
	s.reset(samplerParams{temperature: 1, topK: 5, seed: 1}, nil)
	seen := map[int32]bool{}
	for i := 0; i < 500; i++ {
		buf := append([]float32(nil), logits...)
		id := s.sample(buf)
		if logits[id] < 995 {
			t.Fatalf("top-5 sampling drew logit %v", logits[id])
		}
		seen[id] = true
	}
	if len(seen) < 2 {
		t.Errorf("top-5 at temperature 1 drew only %v", seen)
	}
	s.reset(samplerParams{temperature: 0}, nil)
	if id := s.sample(append([]float32(nil), logits...)); logits[id] != 999 {
		t.Errorf("greedy drew logit %v", logits[id])
	}
}
