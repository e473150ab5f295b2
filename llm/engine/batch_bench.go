package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// ConcurrentResult is what BenchConcurrent measured for n sequences
// decoding at once through the scheduler.
type ConcurrentResult struct {
	Sequences    int
	PromptTokens int // per sequence
	DecodeTokens int // per sequence
	// Wall time from admission to the last token of the last sequence.
	Wall time.Duration
	// Aggregate decode throughput in the steady state: tokens produced by
	// all sequences while every one of them was decoding (from the last
	// first-token to the first last-token), over that time. The steps in
	// which some sequences still prefill are left out; they show in TTFT.
	AggregateTokensPerS float64
	// Per sequence means: time to first token (prompt included), and time
	// between tokens in that steady state (what one listener experiences).
	MeanTTFT       time.Duration
	MeanTokenDelay time.Duration
}

// BenchConcurrent runs n requests with pseudo-random prompts of
// promptTokens tokens that each decode exactly decodeTokens tokens (end of
// generation ignored), all admitted at the same step, and reports
// aggregate and per-sequence speed. The engine needs Sequences and
// QueueSize of at least n.
func (e *Engine) BenchConcurrent(ctx context.Context, n, promptTokens, decodeTokens int) (ConcurrentResult, error) {
	res := ConcurrentResult{Sequences: n, PromptTokens: promptTokens, DecodeTokens: decodeTokens}
	if n < 1 || n > e.cfg.Sequences || n > e.cfg.QueueSize {
		return res, fmt.Errorf("engine: concurrency %d needs Sequences and QueueSize >= %d (have %d, %d)", n, n, e.cfg.Sequences, e.cfg.QueueSize)
	}
	if promptTokens < 1 || decodeTokens < 2 || promptTokens+decodeTokens > e.cfg.ContextSize {
		return res, fmt.Errorf("engine: bench needs 1+ prompt and 2+ decode tokens within the context (%d)", e.cfg.ContextSize)
	}
	rng := rand.New(rand.NewPCG(uint64(n), 3))
	reqs := make([]*request, n)
	for i := range reqs {
		prompt := make([]int32, promptTokens)
		prompt[0] = e.tok.BOS()
		for j := 1; j < len(prompt); j++ {
			prompt[j] = int32(rng.IntN(e.model.hp.vocab))
		}
		reqs[i] = &request{
			ctx: ctx, prompt: prompt, ignoreEOG: true, timing: &seqTiming{times: make([]time.Time, 0, decodeTokens)},
			// A private sequence each: no cache reuse between runs.
			req: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser}}, MaxTokens: decodeTokens, Conversation: fmt.Sprintf("\x00bench-%d-%d", n, i)},
			out: make(chan llm.Token, decodeTokens+3),
		}
	}
	// Hold the scheduler while queueing so that all n join at one step.
	held, release := make(chan struct{}), make(chan struct{})
	jobDone := make(chan error, 1)
	go func() { jobDone <- e.runOnScheduler(ctx, func() { close(held); <-release }) }()
	select {
	case <-held:
	case err := <-jobDone:
		return res, err
	}
	var start time.Time
	var queueErr error
	for _, r := range reqs {
		if queueErr = e.enqueue(r); queueErr != nil {
			break
		}
	}
	start = time.Now()
	for _, r := range reqs {
		r.timing.start = start
	}
	close(release)
	<-jobDone //nolint:errcheck // the hold job ran (held was closed): it returns nil
	if queueErr != nil {
		return res, queueErr
	}
	var from, to, lastLast time.Time // the steady window: every sequence decoding
	var ttft time.Duration
	for _, r := range reqs {
		for tok := range r.out {
			if tok.Err != nil {
				return res, tok.Err
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		t := r.timing
		if t.tokens < 2 || len(t.times) != t.tokens {
			return res, fmt.Errorf("engine: bench sequence decoded %d tokens", t.tokens)
		}
		if t.first.After(from) {
			from = t.first
		}
		if to.IsZero() || t.last.Before(to) {
			to = t.last
		}
		if t.last.After(lastLast) {
			lastLast = t.last
		}
		ttft += t.first.Sub(t.start)
	}
	if !to.After(from) {
		return res, fmt.Errorf("engine: bench sequences did not decode together (decode more tokens)")
	}
	decoded := 0
	var delay time.Duration
	for _, r := range reqs {
		in := 0
		var span time.Duration
		times := r.timing.times
		for i := 1; i < len(times); i++ {
			if times[i].After(from) && !times[i].After(to) {
				in++
				span += times[i].Sub(times[i-1])
			}
		}
		decoded += in
		if in > 0 {
			delay += span / time.Duration(in)
		}
	}
	e.forgetBenchSequences(n) //nolint:contextcheck // a job on the scheduler: it drops cache slots and never blocks
	res.Wall = lastLast.Sub(start)
	res.AggregateTokensPerS = float64(decoded) / to.Sub(from).Seconds()
	res.MeanTTFT = ttft / time.Duration(n)
	res.MeanTokenDelay = delay / time.Duration(n)
	return res, nil
}

// forgetBenchSequences drops the benchmark's conversation caches.
func (e *Engine) forgetBenchSequences(n int) {
	_ = e.runOnScheduler(context.Background(), func() {
		for i := 0; i < n; i++ {
			delete(e.convs, fmt.Sprintf("\x00bench-%d-%d", n, i))
		}
	})
}
