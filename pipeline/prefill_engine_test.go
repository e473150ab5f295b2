package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/internal/testenv"
	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine"
)

// demoEngine opens the bundled demo model on 2 threads, or skips.
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
	return e
}

// TestEarlyStartEngine runs a session on the real engine: the partial
// "what is the capital" is prefilled while the person speaks, and the final
// "what is the capital of france", the first request of a fresh
// conversation, reuses it from the KV cache.
func TestEarlyStartEngine(t *testing.T) {
	e := demoEngine(t)
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("close the engine: %v", err)
		}
	}()
	cfg := earlyConfig()
	cfg.MaxTokens, cfg.Temperature = 8, 0
	a := &partialASR{scripts: []asrScript{
		{partials: []timedPartial{{16, "what is"}, {24, "what is the capital"}}, final: "what is the capital of france"},
	}}
	h := newHarnessModel(t, cfg, a, e, &scriptedLLM{}, &toneTTS{rate: 16000, wordMs: 50})
	h.speak(600)
	outs := h.until("trace", isEvent(EventTrace))
	h.close()

	tr := events(outs, EventTrace)[0]
	t.Logf("prompt %d tokens, cached %d, prefilled early %d", tr.PromptTokens, tr.CachedTokens, tr.EarlyTokens)
	if tr.EarlyTokens == 0 {
		t.Fatalf("nothing prefilled early; turn output %s", summarize(outs))
	}
	// A fresh conversation has nothing cached but what early start put there.
	if tr.CachedTokens == 0 || tr.CachedTokens >= tr.PromptTokens {
		t.Errorf("final request reused %d of %d prompt tokens, want some but not all", tr.CachedTokens, tr.PromptTokens)
	}
	if len(events(outs, EventError)) != 0 || len(events(outs, EventAnswer)) < 2 {
		t.Errorf("turn output %s, want an answer and no error", summarize(outs))
	}
}

// BenchmarkEarlyStartEngine measures what early start saves on the demo
// model: the time from the final request to its first token, in the second
// turn of a conversation whose history is already cached. "off" prefills
// the user's words after the final; "on" prefilled them from the partial
// before it (not timed: the person was still speaking). prefill-tokens/op
// is what the final request still had to process.
//
//	go test -run '^$' -bench EarlyStartEngine -benchtime 20x ./pipeline
func BenchmarkEarlyStartEngine(b *testing.B) {
	e := demoEngine(b)
	defer func() { _ = e.Close() }()
	const words = "can you tell me what the weather is usually like in the mountains during the early spring season"
	history := []llm.Message{
		{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."},
		{Role: llm.RoleUser, Content: "what is the capital of france"},
		{Role: llm.RoleAssistant, Content: "The capital of France is Paris."},
	}
	ask := func(conv, text string) llm.Request {
		msgs := append(slices.Clone(history), llm.Message{Role: llm.RoleUser, Content: text})
		return llm.Request{Messages: msgs, MaxTokens: 4, Conversation: conv}
	}
	fields := strings.Fields(words)
	for _, c := range []struct {
		name, partial string // "" = early start off
	}{
		{"off", ""},
		{"on/partial=final", words},
		{"on/partial=final-2-words", strings.Join(fields[:len(fields)-2], " ")},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var computed int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				conv := fmt.Sprintf("%s-%d", c.name, i)
				// The previous turn left the history in the cache.
				if _, err := e.Prefill(ctx, ask(conv, "")); err != nil {
					b.Fatal(err)
				}
				if c.partial != "" {
					if _, err := e.Prefill(ctx, ask(conv, c.partial)); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				sctx, cancel := context.WithCancel(ctx)
				toks, err := e.Stream(sctx, ask(conv, words))
				if err != nil {
					b.Fatal(err)
				}
				var usage *llm.Usage
				for tok := range toks {
					if tok.Err != nil {
						b.Fatal(tok.Err)
					}
					if tok.Text != "" && usage == nil {
						b.StopTimer() // the first token: what the person waits for
						usage = &llm.Usage{}
					}
					if tok.Done {
						usage = tok.Usage
					}
				}
				cancel()
				if usage != nil {
					computed += usage.PromptTokens - usage.CachedTokens
				}
			}
			b.ReportMetric(float64(computed)/float64(b.N), "prefill-tokens/op")
		})
	}
}
