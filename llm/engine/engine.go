// Package engine is voxpipe's in-process LLM engine: it loads a GGUF model
// (llama, qwen2, qwen3; F32, F16, Q8_0, Q4_0 weights) and streams answers
// through llm.Model.
//
// Design:
//   - One scheduler goroutine owns the model state (scratch buffers, worker
//     pool, KV caches) and steps every active generation in one forward
//     pass (continuous batching, sched.go); requests beyond
//     Config.Sequences wait in a bounded queue (llm.ErrBusy when full).
//   - Matrix products are cut into row chunks that the scheduler goroutine
//     and Threads-1 workers claim through one atomic counter. An idle worker
//     polls for at most 30 µs (pool.go's spinWait), or up to 1 ms inside a
//     forward pass, whose jobs run back to back, yielding the core to other
//     processes meanwhile (hotSpinWait); then it blocks on a channel. A
//     worker the OS has descheduled simply claims nothing, so a busy core
//     slows a step instead of stalling it (llama.cpp's unbounded spinning
//     barrier collapses under the same contention).
//   - Q8_0/Q4_0 weights multiply activations quantized to Q8_0 once per
//     matmul (cgo/kernels' integer path), as llama.cpp does; Q8_0 and Q4_0
//     matrices are repacked at load into 16-row interleaved groups
//     (kernels.PackQ8_0, kernels.PackQ4_0) that serve one row and many, and
//     a step takes up to 64 rows, so each weight is read once per step.
//   - Weights are copied from the file mapping into anonymous huge-page
//     memory (Config.InPlace keeps them in the mapping); see copyWeights for
//     the measured reason.
//   - KV caches are fp16 for models with quantized matrices (F32 otherwise)
//     and kept per conversation (llm.Request.Conversation) in a small LRU; a
//     new request reuses the longest common token prefix.
//   - Cancellation: a step that holds one request's rows stops mid-pass
//     (between layers) when that request's context ends; a step shared by
//     several requests runs with no context, because stopping it would stop
//     everyone's rows, so a cancelled request leaves at the next step
//     boundary, at most one step later.
//   - Speculative decoding (spec.go): Config.DraftPath or PromptLookup
//     proposes tokens that the target verifies in one batched pass; greedy
//     output is unchanged and sampled output keeps the target's
//     distribution.
//   - The decode step allocates nothing; streaming text does (strings).
package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/tokenizer"
)

// Engine implements llm.Model on a local GGUF file. It is safe for
// concurrent use.
type Engine struct {
	cfg      Config
	file     *gguf.File
	release  func() error // frees the weight arena
	model    *model
	tok      *tokenizer.Tokenizer
	template string
	tmplWarn string        // why the template is the fallback; "" when recognised or chosen
	tools    string        // tool format (chat.ToolsTemplate, chat.ToolsCompact)
	callSeq  atomic.Uint64 // numbers the tool calls the model makes (tools.go)
	rt       *compute
	samp     *sampler    // decodeIDs' sampler (bench and tests)
	one      [1]int32    // the token fed in a decode step
	spec     *speculator // nil: no speculative decoding

	mu     sync.RWMutex // guards closed against Stream's send on queue
	closed bool
	queue  chan *request // created by Open; never closed (quit ends the scheduler)
	quit   chan struct{}
	done   chan struct{} // closed when the scheduler has exited

	// Owned by the scheduler goroutine.
	convs map[string]*sequence
	clock uint64
	batch batchState

	gauges gauges // written by the scheduler, read by Stats
}

// sequence is one token sequence with its KV cache.
type sequence struct {
	key      string
	tokens   []int32 // tokens whose keys and values are in kv
	kv       *kvCache
	lastUsed uint64
	owner    *generation // the active generation using it; nil when idle
}

type request struct {
	ctx  context.Context
	req  llm.Request
	out  chan llm.Token // nil for jobs and prefill-only requests
	job  func()         // set for work that is not a generation (Bench); done is closed after it
	done chan struct{}  // jobs and prefill-only requests: closed when finished

	// Prefill-only requests (Prefill) stop after the prompt; processed and
	// err are their result, valid once done is closed.
	prefillOnly bool
	processed   int
	err         error

	// prompt is the tokenised prompt, rendered before the request is
	// queued (BenchConcurrent's is random tokens). BenchConcurrent also sets
	// ignoreEOG: decoding runs to MaxTokens whatever the model samples.
	prompt    []int32
	tools     toolPrompt // how the prompt offered tools (tools.go)
	opens     []string   // likely answer openings (opening.go), found off the scheduler too
	ignoreEOG bool
	timing    *seqTiming

	// The TTFT split (Usage.QueueTime, ComputeTime): set by Stream, by
	// the scheduler at admission and at the first token.
	enqueued, admitted, firstToken time.Time
}

// Open loads the model and starts the scheduler.
func Open(cfg Config) (*Engine, error) {
	if cfg.ModelPath == "" {
		return nil, fmt.Errorf("%w: no model path given (set llm.model or --model to a GGUF file)", ErrModelNotFound)
	}
	if _, err := os.Stat(cfg.ModelPath); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s (make a test model with \"voxpipe llm synth --shape smollm2-135m --type q8_0 %s\" or download a GGUF such as SmolLM2-135M-Instruct Q8_0)", ErrModelNotFound, cfg.ModelPath, cfg.ModelPath)
		}
		return nil, fmt.Errorf("engine: model %s: %w", cfg.ModelPath, err)
	}
	f, err := gguf.Open(cfg.ModelPath)
	if err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", cfg.ModelPath, err)
	}
	e, err := newEngine(cfg, f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: load %s: %w", cfg.ModelPath, err)
	}
	return e, nil
}

func newEngine(cfg Config, f *gguf.File) (*Engine, error) {
	def := DefaultConfig()
	if cfg.Threads <= 0 {
		cfg.Threads = runtime.NumCPU()
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = def.QueueSize
	}
	if cfg.Conversations <= 0 {
		cfg.Conversations = def.Conversations
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = def.CacheBytes
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = def.MaxTokens
	}
	if cfg.Sequences <= 0 {
		cfg.Sequences = def.Sequences
	}
	cfg.Sequences = min(cfg.Sequences, defaultBatch)
	m, err := loadModel(f)
	if err != nil {
		return nil, err
	}
	m.hp.kvHalf = m.quantized() && !cfg.KVF32
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() > m.hp.vocab {
		// Encode could return ids past the embedding table.
		return nil, fmt.Errorf("%w: the tokenizer has %d tokens, token_embd.weight %d", ErrBadShape, tok.VocabSize(), m.hp.vocab)
	}
	release := func() error { return nil }
	if !cfg.InPlace {
		if release, err = m.copyWeights(!cfg.NoRepack); err != nil {
			return nil, fmt.Errorf("engine: weights memory: %w", err)
		}
	}
	if cfg.ContextSize <= 0 {
		cfg.ContextSize = min(m.hp.ctxTrain, 4096)
	}
	template, templateWarning := cfg.ChatTemplate, ""
	if template == "" {
		t, _ := f.String("tokenizer.chat_template")
		var known bool
		if template, known = chat.Identify(t); !known {
			templateWarning = fmt.Sprintf("the model's tokenizer.chat_template is not one the engine knows (%s); prompts are rendered as %s, set llm.engine.chat_template to choose", strings.Join(chat.Names, ", "), template)
		}
	}
	toolFormat := cfg.ToolFormat
	if toolFormat == "" {
		toolFormat, _ = f.String("voxpipe.tool_format")
	}
	if toolFormat != chat.ToolsTemplate && toolFormat != chat.ToolsCompact {
		_ = release()
		return nil, fmt.Errorf("%w: tool format %q", chat.ErrToolFormat, toolFormat)
	}
	e := &Engine{
		cfg:      cfg,
		file:     f,
		release:  release,
		model:    m,
		tok:      tok,
		template: template,
		tmplWarn: templateWarning,
		tools:    toolFormat,
		rt:       newCompute(m, cfg.Threads, cfg.ContextSize, defaultBatch),
		samp:     newSampler(m.hp.vocab),
		queue:    make(chan *request, cfg.QueueSize),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		convs:    make(map[string]*sequence),
	}
	e.batch.init(cfg.Sequences, m.hp.vocab)
	switch {
	case cfg.DraftPath != "":
		d, cost, err := openDraft(cfg, f, m)
		if err != nil {
			e.rt.close()
			_ = release()
			return nil, err
		}
		e.spec = newSpeculator(m.hp.vocab, d, cost)
	case cfg.PromptLookup:
		e.spec = newSpeculator(m.hp.vocab, nil, 0)
		e.spec.stopAt = lookupStops(m.hp.vocab, tok.IsControl, tok.Piece)
	}
	if e.spec != nil {
		e.spec.fixedK = min(max(cfg.SpecK, 0), specMaxK)
		if err := e.calibrate(); err != nil {
			e.rt.close()
			_ = release()
			if e.spec.draft != nil {
				e.spec.draft.close()
			}
			return nil, fmt.Errorf("engine: speculative calibration: %w", err)
		}
	}
	go e.schedule()
	return e, nil
}

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Template is the chat template name in use.
func (e *Engine) Template() string { return e.template }

// ContextSize is the number of tokens a sequence may hold.
func (e *Engine) ContextSize() int { return e.cfg.ContextSize }

// Close stops the scheduler (queued requests get ErrClosed), the workers,
// and unmaps the model. It is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.quit)
	e.mu.Unlock()
	<-e.done
	e.rt.close()
	err := e.release()
	if e.spec != nil && e.spec.draft != nil {
		if derr := e.spec.draft.close(); err == nil {
			err = derr
		}
	}
	if cerr := e.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// Stream implements llm.Model. It returns llm.ErrBusy when the admission
// queue is full. The channel has room for every token the answer can have,
// so the scheduler never waits for a slow reader (it steps all sequences
// together); it stops a request when its ctx ends.
func (e *Engine) Stream(ctx context.Context, req llm.Request) (<-chan llm.Token, error) {
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrEmptyPrompt)
	}
	called := time.Now()
	if err := checkStops(req.Stop); err != nil {
		return nil, fmt.Errorf("%w: %w", llm.ErrInvalid, err)
	}
	maxTokens := e.maxTokens(&req)
	tp, err := e.toolPrompt(&req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", llm.ErrInvalid, err)
	}
	prompt, err := e.renderPrompt(req.Messages, tp, maxTokens)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", llm.ErrInvalid, err)
	}
	r := &request{ctx: ctx, req: req, prompt: prompt, tools: tp, opens: e.openingsFor(req.Messages), out: make(chan llm.Token, maxTokens+3), enqueued: called}
	if err := e.enqueue(r); err != nil {
		return nil, err
	}
	return r.out, nil
}

// Limits on a request: the scheduler matches every stop string at every
// token of the batch, and a prompt's messages are walked per request.
const (
	MaxStops     = 4
	MaxStopBytes = 128
	MaxMessages  = 4096
)

func checkStops(stops []string) error {
	if len(stops) > MaxStops {
		return fmt.Errorf("%w: %d stop strings (at most %d)", ErrBadStop, len(stops), MaxStops)
	}
	for i, s := range stops {
		if len(s) > MaxStopBytes {
			return fmt.Errorf("%w: stop %d has %d bytes (at most %d)", ErrBadStop, i, len(s), MaxStopBytes)
		}
	}
	return nil
}

// maxTokens is a request's answer length bound.
func (e *Engine) maxTokens(req *llm.Request) int {
	n := req.MaxTokens
	if n <= 0 {
		n = e.cfg.MaxTokens
	}
	return min(n, e.cfg.ContextSize)
}

// enqueue hands r to the scheduler, or fails with llm.ErrBusy when the
// admission queue is full (fail fast: the caller can retry or tell its
// user) or ErrClosed.
func (e *Engine) enqueue(r *request) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	select {
	case e.queue <- r:
		return nil
	default:
		return llm.ErrBusy
	}
}

// runOnScheduler runs job on the scheduler goroutine between two steps,
// waiting in the queue behind earlier requests.
func (e *Engine) runOnScheduler(ctx context.Context, job func()) error {
	r := &request{ctx: ctx, job: job, done: make(chan struct{})}
	if err := e.enqueue(r); err != nil {
		return err
	}
	<-r.done // the scheduler always closes done, even when closing down
	return ctx.Err()
}

// samplerFor merges request settings with the engine defaults.
func (e *Engine) samplerFor(req *llm.Request) samplerParams {
	p := samplerParams{
		temperature:   req.Temperature,
		topK:          req.TopK,
		topP:          req.TopP,
		minP:          e.cfg.MinP,
		repeatPenalty: e.cfg.RepeatPenalty,
		seed:          req.Seed,
	}
	if p.topK == 0 {
		p.topK = e.cfg.TopK
	}
	if p.topP == 0 {
		p.topP = e.cfg.TopP
	}
	if p.seed == 0 {
		p.seed = e.cfg.Seed
	}
	return p
}

// renderPrompt renders the messages with the chat template and tokenises
// them, dropping the oldest user/assistant exchanges (never the leading
// system prompt or the last message) so the prompt leaves room for
// maxTokens. It runs on the caller's goroutine, never the scheduler's, and
// its work is bounded by the context, not by the request: each message is
// tokenised at most once, walking back from the newest until the budget is
// spent, and the kept prompt is rendered and tokenised once more (again
// for the rare template whose joins change a count).
func (e *Engine) renderPrompt(msgs []llm.Message, tp toolPrompt, maxTokens int) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, ErrEmptyPrompt
	}
	if len(msgs) > MaxMessages {
		return nil, fmt.Errorf("%w: %d messages (at most %d)", ErrTooManyMessages, len(msgs), MaxMessages)
	}
	budget := max(e.cfg.ContextSize-maxTokens, e.cfg.ContextSize/2)
	first := 0
	for first < len(msgs)-1 && msgs[first].Role == llm.RoleSystem {
		first++
	}
	// fixed: the system prompt, BOS and the generation prompt.
	fixed, err := e.countTokens(msgs[:first], tp.opts, true)
	if err != nil {
		return nil, err
	}
	if fixed > budget {
		// The system prompt (with its tools) alone leaves no room for the turn.
		return nil, fmt.Errorf("%w: the system prompt and tools take %d tokens, the budget is %d", ErrContextFull, fixed, budget)
	}
	// Walk back; cuts are where a kept suffix may start: at a user
	// message, at the last message, or keeping everything.
	cuts := make([]int, 0, 8)
	total := fixed
	for i := len(msgs) - 1; i >= first && total <= budget; i-- {
		n, err := e.countTokens(msgs[i:i+1], chat.Options{}, false)
		if err != nil {
			return nil, err
		}
		total += n
		if i == len(msgs)-1 || i == first || msgs[i].Role == llm.RoleUser {
			if total <= budget || len(cuts) == 0 {
				cuts = append(cuts, i)
			}
		}
	}
	// Longest fitting suffix first; if a join made it longer than counted,
	// the next shorter one.
	for k := len(cuts) - 1; k >= 0; k-- {
		kept := append(msgs[:first:first], msgs[cuts[k]:]...)
		text, err := chat.RenderWith(e.template, kept, tp.opts, true)
		if err != nil {
			return nil, err
		}
		text += tp.suffix
		ids := e.tok.Encode(text, true, true)
		if len(ids) == 0 {
			return nil, ErrEmptyPrompt
		}
		if len(ids) <= budget {
			return ids, nil
		}
		if k == 0 {
			if len(ids) < e.cfg.ContextSize {
				return ids, nil // fits, with less room to answer
			}
			return nil, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(ids), e.cfg.ContextSize)
		}
	}
	return nil, ErrEmptyPrompt // not reached: cuts holds the last message
}

// countTokens is how many tokens msgs render to on their own (with BOS and
// the generation prompt when whole is set).
func (e *Engine) countTokens(msgs []llm.Message, o chat.Options, whole bool) (int, error) {
	text, err := chat.RenderWith(e.template, msgs, o, whole)
	if err != nil {
		return 0, err
	}
	return len(e.tok.Encode(text, whole, true)), nil
}

// sequenceFor returns the cached sequence of a conversation, or a new one,
// evicting the least recently used idle ones beyond the configured bounds.
func (e *Engine) sequenceFor(key string) *sequence {
	e.clock++
	s, ok := e.convs[key]
	if !ok {
		s = &sequence{key: key, tokens: make([]int32, 0, e.cfg.ContextSize), kv: newKVCache(&e.model.hp, e.cfg.ContextSize)}
		e.convs[key] = s
	}
	s.lastUsed = e.clock
	for {
		var total int64
		var oldest *sequence
		for _, c := range e.convs {
			total += c.kv.bytes()
			if c != s && c.owner == nil && (oldest == nil || c.lastUsed < oldest.lastUsed) {
				oldest = c
			}
		}
		if oldest == nil || (len(e.convs) <= e.cfg.Conversations && total <= e.cfg.CacheBytes) {
			e.gauges.kvBytes.Store(total)
			return s
		}
		delete(e.convs, oldest.key)
	}
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefill makes seq hold prompt, reusing the longest common prefix, and
// leaves the logits of the last prompt token in e.rt.logits. It returns how
// many tokens were reused.
func (e *Engine) prefill(ctx context.Context, seq *sequence, prompt []int32) (int, error) {
	cached := commonPrefix(seq.tokens, prompt)
	if cached == len(prompt) {
		cached-- // the last token must run again to produce logits
	}
	seq.tokens = seq.tokens[:cached]
	// Feed in batches and record progress after each, so a cancelled
	// prompt keeps what it has already computed.
	for start := cached; start < len(prompt); start += e.rt.maxBatch {
		end := min(start+e.rt.maxBatch, len(prompt))
		if err := e.rt.forward(ctx, seq.kv, prompt[start:end], start, nil); err != nil {
			return cached, err
		}
		seq.tokens = append(seq.tokens, prompt[start:end]...)
	}
	return cached, nil
}

// UserTurn returns the token ids of ChatML's user-turn header
// ("<|im_start|>user\n") and the end-of-message token <|im_end|>: what a
// scorer of user turns (the end-of-turn detector, the recogniser's n-best
// rescoring) puts before a text and asks for after it. It fails when the
// model's vocabulary lacks either ChatML token.
func (e *Engine) UserTurn() (head []int32, end int32, err error) {
	end, ok := e.tok.ID("<|im_end|>")
	if !ok {
		return nil, 0, errors.New("the model has no <|im_end|> token")
	}
	if _, ok := e.tok.ID("<|im_start|>"); !ok {
		return nil, 0, errors.New("the model has no <|im_start|> token")
	}
	return e.tok.Encode("<|im_start|>user\n", false, true), end, nil
}

// ScoringConfig is the configuration of an engine that only scores short
// user turns (NextLogProb, ScoreFrom): a 128-token context, one sequence,
// greedy and unpenalised, threads worker threads, room for convs cached
// conversations of cacheBytes in all, queue requests waiting.
func ScoringConfig(path string, threads, queue, convs int, cacheBytes int64) Config {
	return Config{
		ModelPath:     path,
		Threads:       max(1, threads),
		ContextSize:   128,
		ChatTemplate:  "chatml",
		RepeatPenalty: 1,
		MaxTokens:     1,
		Sequences:     1,
		QueueSize:     queue,
		Conversations: convs,
		CacheBytes:    cacheBytes,
	}
}
