package engine

import (
	"testing"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// TestStatsAndTTFTSplit: after an answer the KV gauge counts the kept
// conversation, speculation counters follow the engine's own, and the
// answer's usage splits its time to first token into queue and compute.
func TestStatsAndTTFTSplit(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeQ8_0), func(c *Config) { c.PromptLookup = true })
	if s := e.Stats(); s.Batch != 0 || s.Queued != 0 || s.KVBytes != 0 {
		t.Errorf("idle engine stats %+v", s)
	}
	_, u := ask(t, e, llm.Request{Messages: hello, MaxTokens: 12, Conversation: "c1"})
	if u.TTFTCompute <= 0 || u.TTFTQueue < 0 {
		t.Errorf("ttft split queue %v compute %v; want compute > 0", u.TTFTQueue, u.TTFTCompute)
	}
	s := e.Stats()
	if s.KVBytes <= 0 {
		t.Errorf("KV bytes %d after a kept conversation", s.KVBytes)
	}
	if want := specStats(t, e); s.Spec != want {
		t.Errorf("Stats().Spec = %+v, SpecStats = %+v", s.Spec, want)
	}
	if s.Batch > 1 {
		t.Errorf("batch %d with one request", s.Batch)
	}
}
