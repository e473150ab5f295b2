package engine

import (
	"context"
	"fmt"
	"math"
)

// Score runs tokens through the model as one fresh sequence and returns,
// for every position i ≥ 1, the natural-log probability the model gave
// tokens[i] after tokens[:i] (logProbs[i-1]) and its greedy choice there
// (greedy[i-1]). It is what perplexity and draft-agreement figures are
// computed from; it runs on the scheduler goroutine like a request.
func (e *Engine) Score(ctx context.Context, tokens []int32) (logProbs []float64, greedy []int32, err error) {
	if len(tokens) < 2 {
		return nil, nil, fmt.Errorf("%w: score needs at least 2 tokens", ErrEmptyPrompt)
	}
	if len(tokens) > e.cfg.ContextSize {
		return nil, nil, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(tokens), e.cfg.ContextSize)
	}
	vocab := e.model.hp.vocab
	job := func() {
		kv := newKVCache(&e.model.hp, e.cfg.ContextSize)
		all := make([]float32, (len(tokens)-1)*vocab)
		if err = e.rt.forward(ctx, kv, tokens[:len(tokens)-1], 0, all); err != nil {
			return
		}
		logProbs = make([]float64, len(tokens)-1)
		greedy = make([]int32, len(tokens)-1)
		for i := range logProbs {
			row := all[i*vocab : (i+1)*vocab]
			greedy[i] = argmax(row)
			logProbs[i] = logSoftmaxAt(row, int(tokens[i+1]))
		}
	}
	if qerr := e.runOnScheduler(ctx, job); qerr != nil {
		return nil, nil, qerr
	}
	return logProbs, greedy, err
}

// logSoftmaxAt is log(softmax(row)[k]), computed in float64.
func logSoftmaxAt(row []float32, k int) float64 {
	maxv := float64(row[0])
	for _, v := range row[1:] {
		maxv = math.Max(maxv, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - maxv)
	}
	return float64(row[k]) - maxv - math.Log(sum)
}
