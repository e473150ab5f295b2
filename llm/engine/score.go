package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/voxpipe/voxpipe/llm"
)

// NextLogProb returns log P(next | prompt): the natural log of the softmax
// of the model's logits after the tokenised prompt, at token next. It runs
// on the scheduler goroutine between steps and keeps prompt's KV cache
// under key (like llm.Request.Conversation), so a following call whose
// prompt extends this one only processes the new tokens: scoring a growing
// partial transcript costs a few tokens per call. It is what the turn
// detector (pipeline/turn) asks of its end-of-utterance model.
func (e *Engine) NextLogProb(ctx context.Context, key string, prompt []int32, next int32) (float64, error) {
	switch {
	case len(prompt) == 0:
		return 0, ErrEmptyPrompt
	case len(prompt) > e.cfg.ContextSize:
		return 0, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(prompt), e.cfg.ContextSize)
	case next < 0 || int(next) >= e.model.hp.vocab:
		return 0, fmt.Errorf("engine: token %d is outside the vocabulary (%d)", next, e.model.hp.vocab)
	}
	lp, err := math.NaN(), error(nil)
	job := func() {
		seq := e.sequenceFor(key)
		if seq.owner != nil {
			err = llm.ErrBusy // a generation holds that key's cache
			return
		}
		if _, err = e.prefill(ctx, seq, prompt); err != nil {
			seq.tokens = seq.tokens[:0]
			return
		}
		lp = logSoftmaxAt(e.rt.logits, int(next))
	}
	if serr := e.runOnScheduler(ctx, job); serr != nil {
		return 0, serr
	}
	return lp, err
}
