// Package llm declares the language model contract the pipeline uses.
// Backends live in sub-packages (llm/engine, llm/openai, llm/ark).
package llm

import (
	"context"
	"errors"
	"time"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls (assistant messages) are the calls the answer made, in
	// order; Content is the text spoken before them, possibly empty.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID (RoleTool messages) is the ToolCall.ID this result answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// Request asks for one streamed answer.
type Request struct {
	Messages    []Message
	MaxTokens   int      // 0: the backend's default
	Temperature float32  // 0: greedy
	TopP        float32  // 0: off
	TopK        int      // 0: off
	Seed        uint64   // 0: random
	Stop        []string // stop strings; the matched text is not emitted
	// Conversation identifies a conversation whose state (a KV cache) a
	// backend may keep between requests; "" means none.
	Conversation string
	// Speculative marks an answer started before the person's turn was
	// committed (pipeline/speculate.go): a backend that schedules several
	// answers serves it only while no committed answer needs the model,
	// until Committed is closed; from then on it is an ordinary answer.
	// Backends that do not schedule may ignore both.
	Speculative bool
	Committed   <-chan struct{}
	// Tools the model may call (tools.go); ToolChoice is one of the
	// ToolChoice constants.
	Tools      []Tool
	ToolChoice string
}

// Model streams answers. It is safe for concurrent use.
type Model interface {
	// Stream starts generating. The returned channel is closed by the
	// backend after a Token with Done or Err set, or when ctx ends.
	// Cancelling ctx stops generation promptly (within one forward step
	// for the in-process engine).
	Stream(ctx context.Context, req Request) (<-chan Token, error)
}

// Token is a piece of streamed text. The last Token has Done (with Usage)
// or Err set.
type Token struct {
	Text string
	// ToolCalls are calls whose arguments are complete, delivered once
	// each, on any token up to and including the Done one.
	ToolCalls []ToolCall
	Err       error
	Done      bool
	Usage     *Usage
}

// Usage counts tokens of one request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens is how many prompt tokens were reused from a cache.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// Where a backend's time to the first token went. A remote backend:
	// TTFTNetwork is connecting and sending the request, TTFTServer the
	// rest (server work plus the answer's way back); TTFTQueue and
	// TTFTCompute split TTFTServer when the server reports its timings
	// (llama.cpp's "timings"), else they are zero. The in-process engine
	// sets TTFTQueue (waiting for admission) and TTFTCompute (admission to
	// the first token) only.
	TTFTNetwork time.Duration `json:"-"`
	TTFTServer  time.Duration `json:"-"`
	TTFTQueue   time.Duration `json:"-"`
	TTFTCompute time.Duration `json:"-"`
}

// ErrBusy is returned when a backend's admission queue is full.
var ErrBusy = errors.New("llm: busy")

// ErrInvalid wraps the errors of a request the backend cannot take as
// given (a prompt longer than its context, too many messages or stops):
// retrying it unchanged fails again.
var ErrInvalid = errors.New("llm: invalid request")

// Prefiller is implemented by backends that can process a prompt before it
// is asked for (early start): the pipeline prefills the conversation plus a
// stable partial transcript while the person is still talking, so the final
// request only processes what changed. Usage.CachedTokens of that request
// then counts the reused tokens.
type Prefiller interface {
	// Prefill processes req's prompt into the state kept for
	// req.Conversation (which must be set) without generating. It returns
	// how many prompt tokens it processed (the rest were cached already).
	// It is best effort and low priority: it returns ErrBusy rather than
	// wait behind requests, and stops promptly when ctx ends, keeping
	// what it had processed.
	Prefill(ctx context.Context, req Request) (processed int, err error)
}

// Augmentation reports context a middleware put into a request before the
// backend saw it (the knowledge stage, llm/knowledge): how many passages and
// how many tokens it added, and how long the lookup took (0 when it came
// from a cache).
type Augmentation struct {
	Passages int
	Tokens   int
	Lookup   time.Duration
	Cached   bool
}

type observerKey struct{}

// WithObserver returns a context whose requests report their augmentation
// to fn (called on the goroutine that calls Stream or Prefill, before the
// backend gets the request).
func WithObserver(ctx context.Context, fn func(Augmentation)) context.Context {
	return context.WithValue(ctx, observerKey{}, fn)
}

// Observe reports a to ctx's observer, if it has one.
func Observe(ctx context.Context, a Augmentation) {
	if fn, ok := ctx.Value(observerKey{}).(func(Augmentation)); ok && fn != nil {
		fn(a)
	}
}
