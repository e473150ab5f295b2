package engine

// The scheduler: one goroutine owns the model state and steps every active
// generation together (continuous batching).
//
//   - A step is one forward pass over a batch of at most defaultBatch rows:
//     one row per decoding sequence (its last sampled token), then prompt
//     chunks of sequences still prefilling, round-robin, in the rows left.
//     Each weight matrix is read once per step for all of them, and a long
//     prompt is cut into chunks so it never stalls the others' decoding,
//     while a new request's prompt starts on the very next step however
//     long the running answers are (fairness both ways). Early-start
//     prefills take rows after answers' prompts, at most earlyRowsBeside
//     of a step that serves an answer.
//   - Requests join between steps, up to Config.Sequences at a time; the
//     rest wait in the bounded queue, and Stream fails fast with
//     llm.ErrBusy when that is full.
//   - A request whose ctx ends leaves at the next step boundary; a forward
//     pass that serves only it also stops between layers.
//   - When exactly one sequence is decoding and a drafter is configured, the
//     step is a speculative round instead (spec.go): speculation pays when
//     the machine has spare compute, batching when it has not.
//   - Batching never changes a sequence's output: every row goes through
//     the same kernels (one-row and batched products are bit-identical) and
//     attends only to its own cache.

import (
	"context"
	"time"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/llm/engine/chat"
	"github.com/voxpipe/voxpipe/llm/engine/tokenizer"
)

// earlyRowsBeside bounds the early-start prefill rows of a step that also
// serves an answer. A step's cost grows with its rows (demo model: ~0.9 ms
// for one, ~0.15 ms more per row), and a person waits for the answer's
// next token while the prefills only have to be done by the end of their
// own utterances: when eight people stopped speaking within a second or
// two, the first answers decoded one token per 64-row step, 5-10x slower
// than alone, while the others' prefills filled the rows. With 16, an
// answer's step costs ~3 ms and the prefills still move 16 tokens a step.
const earlyRowsBeside = 16

// batchState is the scheduler's working set; only the scheduler goroutine
// touches it.
type batchState struct {
	active   []*generation
	rr       int        // round-robin start among prefilling generations
	samplers []*sampler // idle samplers, reused so admission allocates little
	vocab    int

	tokens  []int32       // [defaultBatch] the step's rows
	segs    []segment     // the step's sequences
	segGen  []*generation // generation of each segment
	outRows []int32       // rows whose logits are wanted
	outGen  []*generation // the generation each of those logits belongs to
	logits  []float32     // [Sequences][vocab]
}

func (b *batchState) init(sequences, vocab int) {
	b.vocab = vocab
	b.tokens = make([]int32, defaultBatch)
	b.segs = make([]segment, 0, defaultBatch)
	b.segGen = make([]*generation, 0, defaultBatch)
	b.outRows = make([]int32, 0, defaultBatch)
	b.outGen = make([]*generation, 0, defaultBatch)
	b.logits = make([]float32, sequences*vocab)
}

func (b *batchState) getSampler() *sampler {
	if n := len(b.samplers); n > 0 {
		s := b.samplers[n-1]
		b.samplers = b.samplers[:n-1]
		return s
	}
	return newSampler(b.vocab)
}

func (b *batchState) putSampler(s *sampler) { b.samplers = append(b.samplers, s) }

// generation is the state of one answer being produced.
type generation struct {
	e         *Engine
	r         *request // nil: tokens are only recorded (decodeIDs)
	seq       *sequence
	prompt    []int32 // the whole prompt
	fed       int     // prompt tokens already in seq
	fed0      int     // fed at admission (cached tokens)
	decoding  bool    // the prompt is done; pending is the next token to feed
	pending   int32
	samp      *sampler
	stop      stopMatcher
	calls     *chat.CallParser // tool calls in the answer (tools.go); nil when the request offers none
	stream    *tokenizer.TextStream
	maxTokens int
	count     int
	stopped   bool     // a stop string ended the answer
	plain     bool     // decode without speculation even when configured
	opens     []string // likely openings of the answer, for prompt lookup (opening.go); nil once past them
	ids       []int32  // recorded tokens when r is nil
	ended     bool
	err       error
}

// schedule is the only goroutine that touches the model state.
func (e *Engine) schedule() {
	defer close(e.done)
	b := &e.batch
	for {
		if len(b.active) == 0 {
			e.gauges.batch.Store(0) // idle
			select {
			case <-e.quit:
				e.shutdown()
				return
			case r := <-e.queue:
				e.admit(r)
			}
		}
	admit:
		for len(b.active) < e.cfg.Sequences {
			select {
			case r := <-e.queue:
				e.admit(r)
			default:
				break admit
			}
		}
		select {
		case <-e.quit:
			e.shutdown()
			return
		default:
		}
		e.step()
	}
}

// shutdown fails everything active or queued with ErrClosed.
func (e *Engine) shutdown() {
	for _, g := range e.batch.active {
		g.ended, g.err = true, ErrClosed
	}
	e.sweep()
	for {
		select {
		case r := <-e.queue:
			r.end(ErrClosed)
		default:
			return
		}
	}
}

// end finishes a request that never became a generation, or a prefill or
// a failed one: err (nil for a done prefill) goes to the caller; a cancelled
// caller gets a closed channel only.
func (r *request) end(err error) {
	switch {
	case r.job != nil:
		close(r.done)
	case r.prefillOnly:
		r.err = err
		close(r.done)
	default:
		if r.ctx.Err() == nil {
			r.out <- llm.Token{Err: err} // room is reserved
		}
		close(r.out)
	}
}

// admit starts r: a job runs at once; a generation joins the batch.
func (e *Engine) admit(r *request) {
	if r.job != nil {
		if r.ctx.Err() == nil {
			r.job()
		}
		close(r.done)
		return
	}
	if err := r.ctx.Err(); err != nil {
		r.end(err)
		return
	}
	r.admitted = time.Now()
	g, err := e.newGeneration(r)
	if err != nil {
		r.end(err)
		return
	}
	e.batch.active = append(e.batch.active, g)
}

func (e *Engine) newGeneration(r *request) (*generation, error) {
	req := &r.req
	maxTokens := e.maxTokens(req)
	prompt := r.prompt // rendered by Stream or Prefill, off this goroutine
	if len(prompt) == 0 {
		return nil, ErrEmptyPrompt
	}
	g := &generation{e: e, r: r, prompt: prompt, maxTokens: maxTokens, opens: r.opens}
	g.seq = e.acquireSequence(req.Conversation, g)
	cached := commonPrefix(g.seq.tokens, prompt)
	if cached == len(prompt) && !r.prefillOnly {
		cached-- // the last token must run again to produce logits
	}
	g.seq.tokens = g.seq.tokens[:cached]
	g.fed, g.fed0 = cached, cached
	if r.prefillOnly {
		return g, nil
	}
	g.samp = e.batch.getSampler()
	g.samp.reset(e.samplerFor(req), prompt)
	stops := append(append([]string(nil), chat.StopStrings(e.template)...), req.Stop...)
	g.stop.reset(stops)
	g.calls = e.callParser(r.tools)
	g.stream = e.tok.NewStream()
	return g, nil
}

// acquireSequence returns the conversation's kept sequence for g, or a
// private one when another generation is using it. An early-start prefill
// holding it gives way: what it processed stays in the cache.
func (e *Engine) acquireSequence(key string, g *generation) *sequence {
	if s, ok := e.convs[key]; ok && s.owner != nil {
		if o := s.owner; o.r != nil && o.r.prefillOnly && !g.r.prefillOnly {
			o.ended = true
			s.owner = nil
		} else {
			return &sequence{tokens: make([]int32, 0, len(g.prompt)+g.maxTokens), kv: newKVCache(&e.model.hp, e.cfg.ContextSize), owner: g}
		}
	}
	s := e.sequenceFor(key)
	s.owner = g
	return s
}

// step runs one forward pass for every active generation (or one
// speculative round for a lone decoder) and retires those that ended.
func (e *Engine) step() {
	b := &e.batch
	for _, g := range b.active {
		if g.r != nil && g.r.ctx.Err() != nil {
			g.ended, g.err = true, g.r.ctx.Err()
		}
	}
	e.sweep()
	defer e.noteStep(len(b.active))
	if len(b.active) == 0 {
		return
	}
	if g := b.active[0]; len(b.active) == 1 && g.decoding && e.spec != nil && !g.plain {
		e.specRound(g.r.ctx, g)
		e.sweep()
		return
	}

	// Speculative answers get no rows while a committed one is active, so
	// speculation never slows another person's answer.
	committed := false
	for _, g := range b.active {
		if !g.ended && (g.r == nil || !g.r.prefillOnly) && !g.speculative() {
			committed = true
			break
		}
	}
	waits := func(g *generation) bool { return committed && g.speculative() }

	tokens := b.tokens[:0]
	b.segs, b.segGen, b.outRows, b.outGen = b.segs[:0], b.segGen[:0], b.outRows[:0], b.outGen[:0]
	add := func(g *generation, toks []int32, pos int, logits bool) {
		start := len(tokens)
		tokens = append(tokens, toks...)
		b.segs = append(b.segs, segment{kv: g.seq.kv, pos0: pos, start: start, n: len(toks)})
		b.segGen = append(b.segGen, g)
		if logits {
			b.outRows = append(b.outRows, int32(len(tokens)-1))
			b.outGen = append(b.outGen, g)
		}
	}
	for _, g := range b.active {
		if !g.decoding || waits(g) {
			continue
		}
		pos := len(g.seq.tokens)
		if pos >= e.cfg.ContextSize {
			g.ended = true // the context is full: the answer ends here
			continue
		}
		e.one[0] = g.pending
		add(g, e.one[:], pos, true)
	}
	// Prompt chunks in the rows left: answers first, then early-start
	// prefills, each group round-robin so no prompt waits behind another.
	// Beside an answer, prefills get at most earlyRowsBeside rows a step.
	answering := false
	for _, g := range b.active {
		if !g.ended && (g.r == nil || !g.r.prefillOnly) && !waits(g) {
			answering = true
			break
		}
	}
	budget := defaultBatch - len(tokens)
	n := len(b.active)
	for pass := 0; pass < 2 && budget > 0; pass++ {
		if pass == 1 && answering {
			budget = min(budget, earlyRowsBeside)
		}
		for i := 0; i < n && budget > 0; i++ {
			g := b.active[(b.rr+i)%n]
			if g.decoding || g.ended || g.r.prefillOnly != (pass == 1) || waits(g) {
				continue
			}
			c := min(len(g.prompt)-g.fed, budget)
			if c <= 0 {
				g.ended = true // a prefill with nothing left to do
				continue
			}
			add(g, g.prompt[g.fed:g.fed+c], g.fed, g.fed+c == len(g.prompt) && !g.r.prefillOnly)
			budget -= c
		}
	}
	b.rr++
	if len(tokens) == 0 {
		e.sweep()
		return
	}

	// A pass shared by several requests cannot be stopped mid-pass (that
	// would stop every row); a cancelled request leaves at the next step.
	var ctx context.Context
	if len(b.segs) == 1 && b.segGen[0].r != nil {
		ctx = b.segGen[0].r.ctx // only its own request can stop it mid-pass
	}
	logits := b.logits[:len(b.outRows)*b.vocab]
	if err := e.rt.forwardBatch(ctx, tokens, b.segs, b.outRows, logits); err != nil {
		for _, g := range b.segGen {
			g.ended, g.err = true, err
		}
		e.sweep()
		return
	}
	for i, sg := range b.segs {
		g := b.segGen[i]
		g.seq.tokens = append(g.seq.tokens, tokens[sg.start:sg.start+sg.n]...)
		if !g.decoding {
			g.fed += sg.n
			if g.fed == len(g.prompt) && g.r.prefillOnly {
				g.ended = true
			}
		}
	}
	for i, g := range b.outGen {
		g.decoding = true
		g.advance(g.samp.sample(logits[i*b.vocab : (i+1)*b.vocab]))
	}
	e.sweep()
}

// speculative reports whether g is a speculative answer not committed yet.
func (g *generation) speculative() bool {
	if g.r == nil || !g.r.req.Speculative {
		return false
	}
	select {
	case <-g.r.req.Committed: // nil: never
		return false
	default:
		return true
	}
}

// advance commits a sampled token: it is streamed and, unless the answer
// ended, becomes the next token to feed.
func (g *generation) advance(id int32) {
	end, err := g.commit(id)
	if end || err != nil {
		g.ended, g.err = true, err
		return
	}
	g.pending = id
}

// commit streams id and reports whether the answer is complete.
func (g *generation) commit(id int32) (end bool, err error) {
	e := g.e
	if e.tok.IsEOG(id) && (g.r == nil || !g.r.ignoreEOG) {
		return true, nil
	}
	g.count++
	g.samp.accept(id)
	if g.r == nil {
		g.ids = append(g.ids, id)
	} else {
		if t := g.r.timing; t != nil {
			t.token(g.count)
		}
		if g.count == 1 {
			g.r.firstToken = time.Now()
		}
		text, stopped := g.stop.push(g.stream.Add(id))
		var calls []llm.ToolCall
		if g.calls != nil && text != "" {
			var err error
			if text, calls, err = g.calls.Push(text); err != nil {
				return true, err
			}
		}
		if (text != "" || len(calls) > 0) && !g.r.send(llm.Token{Text: text, ToolCalls: calls}) {
			return true, g.r.ctx.Err()
		}
		if stopped {
			g.stopped = true
			return true, nil
		}
	}
	return g.count >= g.maxTokens, nil
}

// sweep retires ended generations, keeping the others in order.
func (e *Engine) sweep() {
	b := &e.batch
	kept := b.active[:0]
	for _, g := range b.active {
		if g.ended {
			e.finish(g)
		} else {
			kept = append(kept, g)
		}
	}
	clear(b.active[len(kept):])
	b.active = kept
}

// finish delivers a generation's end and releases what it held.
func (e *Engine) finish(g *generation) {
	if g.seq.owner == g {
		g.seq.owner = nil
	}
	// Before the end is delivered: a caller that reads Stats once its
	// stream has ended must see the conversation it kept (deferred, the
	// gauge raced the caller; TestStatsAndTTFTSplit failed under -race).
	e.noteKV()
	if g.samp != nil {
		e.batch.putSampler(g.samp)
		g.samp = nil
	}
	r := g.r
	switch {
	case r == nil:
	case r.prefillOnly:
		r.processed = g.fed - g.fed0
		r.end(g.err)
	case g.err != nil:
		r.end(g.err)
	default:
		text := ""
		if !g.stopped {
			var stopped bool
			text, stopped = g.stop.push(g.stream.Flush())
			if !stopped {
				text += g.stop.flush()
			}
		}
		calls, err := g.flushCalls(&text)
		if err != nil {
			if text != "" {
				r.out <- llm.Token{Text: text}
			}
			r.out <- llm.Token{Err: err}
			close(r.out)
			return
		}
		if text != "" || len(calls) > 0 {
			r.out <- llm.Token{Text: text, ToolCalls: calls}
		}
		queue, compute := r.ttft()
		r.out <- llm.Token{Done: true, Usage: &llm.Usage{PromptTokens: len(g.prompt), CompletionTokens: g.count, CachedTokens: g.fed0,
			TTFTQueue: queue, TTFTCompute: compute}}
		close(r.out)
	}
}

// send delivers one token; false when the request's ctx has ended. The
// channel has room for the whole answer, so it does not wait.
func (r *request) send(t llm.Token) bool {
	if r.ctx.Err() != nil {
		return false
	}
	select {
	case r.out <- t:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// seqTiming records when a benchmark sequence produced its tokens.
type seqTiming struct {
	start  time.Time
	first  time.Time // first token
	last   time.Time // last token
	tokens int
	times  []time.Time // every token's, when the bench asked for them (cap set)
}

func (t *seqTiming) token(count int) {
	now := time.Now()
	if count == 1 {
		t.first = now
	}
	t.last = now
	t.tokens = count
	if len(t.times) < cap(t.times) {
		t.times = append(t.times, now)
	}
}
