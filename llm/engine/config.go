package engine

import "runtime"

// Config configures an Engine. Sampling fields are defaults for requests
// that leave the matching llm.Request field zero. Temperature is the
// exception: llm.Request defines Temperature 0 as greedy, so
// Config.Temperature is only a default for callers that build requests
// from the config (the CLI).
type Config struct {
	ModelPath   string
	Threads     int // worker threads for matmuls; 0 = number of CPUs
	ContextSize int // tokens per sequence; 0 = the model's context_length capped at 4096

	ChatTemplate string // "" = detected from the model (chat.Identify); one of chat.Names
	// ToolFormat is how tools are listed in prompts (chat.ToolsTemplate,
	// chat.ToolsCompact); "" = the model's voxpipe.tool_format metadata, else
	// the template's own convention.
	ToolFormat string

	Temperature   float32
	TopK          int
	TopP, MinP    float32
	RepeatPenalty float32 // 1 = off
	Seed          uint64  // 0 = random per request

	MaxTokens int // default answer length for requests with MaxTokens 0

	// DraftPath is a smaller GGUF with the same vocabulary (size and every
	// token's text) used for speculative decoding; "" = none. A Q4_0 copy
	// of the target ("voxpipe llm quantize") works as a self-draft.
	DraftPath string
	// PromptLookup drafts by matching the last n-gram against the prompt
	// and history when no DraftPath is set (cheap; wins when answers quote).
	PromptLookup bool
	// SpecK fixes the proposals per speculative round (1..8); 0 lets the
	// engine choose from measured costs and acceptance.
	SpecK int

	// InPlace computes with the weights where they are in the file
	// mapping instead of copying them into anonymous huge-page memory.
	// It loads faster and shares pages between processes, but decoding
	// was 4-6x slower on the dev VM (TLB misses on 4 KiB page-cache
	// pages); see model.copyWeights.
	InPlace bool
	// KVF32 keeps the KV cache in float32 for models with quantized
	// matrices too (they get fp16 by default: half the bytes attention
	// reads; F32 and F16 models always keep float32).
	KVF32 bool

	// NoRepack keeps Q8_0 and Q4_0 weights in the file's row layout and
	// uses the row kernels; only for measuring what the packed kernels
	// (kernels.PackQ8_0, kernels.PackQ4_0) gain. Implied by InPlace.
	NoRepack bool

	// Sequences is how many generations the scheduler steps together
	// (continuous batching); more wait in the queue. 0 = 16, at most 64.
	Sequences int
	// QueueSize bounds requests waiting for a place among Sequences;
	// Stream returns llm.ErrBusy when it is full. 0 = 8.
	QueueSize int
	// Conversations is how many conversation KV caches are kept (LRU). 0 = 4.
	Conversations int
	// CacheBytes bounds the memory of the kept KV caches. 0 = 1 GiB.
	CacheBytes int64
}

// DefaultConfig returns settings suited to a voice assistant: short,
// lightly sampled answers.
func DefaultConfig() Config {
	return Config{
		Threads:       runtime.NumCPU(),
		Temperature:   0.7,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1, // off, as llama.cpp's current default
		MaxTokens:     256,
		Sequences:     16,
		QueueSize:     8,
		Conversations: 4,
		CacheBytes:    1 << 30,
	}
}
