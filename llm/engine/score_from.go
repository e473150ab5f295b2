package engine

import (
	"context"
	"fmt"

	"github.com/voxpipe/voxpipe/llm"
)

// ScoreFrom returns, for every i in [from, len(tokens)), the natural-log
// probability the model gives tokens[i] after tokens[:i] (out[i-from]). Like
// NextLogProb it keeps the sequence's KV cache under key, so a following
// call that shares a prefix with this one computes only from where the two
// differ: scoring a sorted list of candidates that share their beginnings
// (an n-best list) costs about one token per distinct prefix. It runs on the
// scheduler goroutine between steps. 1 ≤ from < len(tokens).
func (e *Engine) ScoreFrom(ctx context.Context, key string, tokens []int32, from int) ([]float64, error) {
	switch {
	case len(tokens) < 2 || from < 1 || from >= len(tokens):
		return nil, fmt.Errorf("%w: score from %d of %d tokens", ErrEmptyPrompt, from, len(tokens))
	case len(tokens) > e.cfg.ContextSize:
		return nil, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(tokens), e.cfg.ContextSize)
	}
	vocab := e.model.hp.vocab
	for _, t := range tokens {
		if t < 0 || int(t) >= vocab {
			return nil, fmt.Errorf("engine: token %d is outside the vocabulary (%d)", t, vocab)
		}
	}
	var (
		out []float64
		err error
	)
	job := func() {
		seq := e.sequenceFor(key)
		if seq.owner != nil {
			err = llm.ErrBusy // a generation holds that key's cache
			return
		}
		// Row r of the forward pass predicts tokens[start+r+1]; the first
		// row needed predicts tokens[from].
		start := min(commonPrefix(seq.tokens, tokens), from-1)
		seq.tokens = seq.tokens[:start]
		in := tokens[start : len(tokens)-1]
		all := make([]float32, len(in)*vocab)
		if err = e.rt.forward(ctx, seq.kv, in, start, all); err != nil {
			return
		}
		seq.tokens = append(seq.tokens, in...)
		out = make([]float64, len(tokens)-from)
		for i := from; i < len(tokens); i++ {
			r := i - 1 - start
			out[i-from] = logSoftmaxAt(all[r*vocab:(r+1)*vocab], int(tokens[i]))
		}
	}
	if serr := e.runOnScheduler(ctx, job); serr != nil {
		return nil, serr
	}
	return out, err
}
