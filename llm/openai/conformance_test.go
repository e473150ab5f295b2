package openai

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// TestConformance runs the client against a real OpenAI-compatible server
// (llama.cpp's llama-server, vLLM, ...) when VOXPIPE_OPENAI_URL names its
// API root, e.g.
//
//	llama-server -m models/voxpipe-demo-q8_0.gguf --port 18380 -t 1 &
//	VOXPIPE_OPENAI_URL=http://127.0.0.1:18380/v1 go test -run Conformance -v ./llm/openai
//
// With the demo model it also compares the greedy answers with the
// in-process engine's (logged, not failed: kernels may round differently).
func TestConformance(t *testing.T) {
	base := os.Getenv("VOXPIPE_OPENAI_URL")
	if base == "" {
		t.Skip("requires a real server: set VOXPIPE_OPENAI_URL=http://host:port/v1 (unset here)")
	}
	c, err := NewClient(Config{BaseURL: base, Model: os.Getenv("VOXPIPE_OPENAI_MODEL"), APIKey: os.Getenv("OPENAI_API_KEY"),
		TimeoutFirstToken: 60 * time.Second, TimeoutIdle: 30 * time.Second, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sys := llm.Message{Role: llm.RoleSystem, Content: "You are voxpipe, a friendly voice assistant. Answer in one or two short spoken sentences."}
	req := func(q string) llm.Request {
		return llm.Request{Messages: []llm.Message{sys, {Role: llm.RoleUser, Content: q}}, MaxTokens: 48}
	}
	// Streaming, usage, and the TTFT split.
	text, u := drain(t, c, req("What is the capital of France?"))
	if text == "" || u == nil || u.PromptTokens == 0 || u.CompletionTokens == 0 || u.CompletionTokens > 48 {
		t.Fatalf("stream: %q, usage %+v", text, u)
	}
	t.Logf("stream: %q usage %+v", text, *u)
	// The same prompt again: a server with a prompt cache reports it.
	again, u2 := drain(t, c, req("What is the capital of France?"))
	t.Logf("again: cached %d of %d prompt tokens; ttft network %v server %v (queue %v compute %v)",
		u2.CachedTokens, u2.PromptTokens, u2.TTFTNetwork, u2.TTFTServer, u2.TTFTQueue, u2.TTFTCompute)
	if again != text {
		t.Errorf("greedy answers differ between two identical requests:\n%q\n%q", text, again)
	}
	// A whole answer (stream: false) says the same.
	whole, err := NewClient(Config{BaseURL: base, Model: c.cfg.Model, APIKey: c.cfg.APIKey, NoStream: true})
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := drain(t, whole, req("What is the capital of France?")); w != text {
		t.Errorf("stream: false gave %q, streaming %q", w, text)
	}
	// Stop strings.
	stopReq := req("Count from one to ten, separated by commas.")
	stopReq.Stop = []string{","}
	if s, _ := drain(t, c, stopReq); strings.Contains(s, ",") {
		t.Errorf("stop \",\" not honoured: %q", s)
	}
	// Cancelling mid-answer closes the stream at once.
	ctx, cancel := context.WithCancel(context.Background())
	long := req("Tell me a long story about a dragon.")
	long.MaxTokens = 400
	toks, err := c.Stream(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	<-toks
	start := time.Now()
	cancel()
	for range toks {
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("cancel took %v", d)
	}
	// The next request is served normally.
	if s, _ := drain(t, c, req("Hello!")); s == "" {
		t.Error("empty answer after a cancel")
	}
	if os.Getenv("VOXPIPE_OPENAI_COMPARE_ENGINE") == "" {
		return
	}
	e := demoEngine(t)
	same := 0
	qs := []string{"What is the capital of France?", "Tell me a joke.", "How do birds fly?", "What is a dog?",
		"Can you help me cook rice?", "What is the weather like today?", "Who are you?", "What is music?"}
	for _, q := range qs {
		r := req(q)
		local, _ := drain(t, e, r)
		remote, _ := drain(t, c, r)
		if local == remote {
			same++
		} else {
			t.Logf("differs on %q:\n  server     %q\n  in-process %q", q, remote, local)
		}
	}
	t.Logf("greedy answers identical to the in-process engine: %d of %d", same, len(qs))
}
