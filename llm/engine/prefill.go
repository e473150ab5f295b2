package engine

import (
	"context"
	"fmt"

	"github.com/voxpipe/voxpipe/llm"
)

var _ llm.Prefiller = (*Engine)(nil)

// Prefill implements llm.Prefiller (early start): it renders and tokenises
// req as Stream would and runs the prompt into the KV cache kept for
// req.Conversation, so that a following Stream for that conversation only
// processes what differs. It joins the batch like any request but gets
// rows only after the answers' prompts, and a Stream for the same
// conversation takes the sequence over at once, keeping what was done.
// It returns llm.ErrBusy instead of queueing behind waiting requests.
// Cancelled, it returns ctx's error with the tokens processed until then.
func (e *Engine) Prefill(ctx context.Context, req llm.Request) (int, error) {
	if len(req.Messages) == 0 {
		return 0, ErrEmptyPrompt
	}
	if req.Conversation == "" {
		return 0, ErrNoConversation
	}
	if len(e.queue) > 0 {
		return 0, llm.ErrBusy // requests are waiting for a place: do not add to it
	}
	tp, err := e.toolPrompt(&req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", llm.ErrInvalid, err)
	}
	prompt, err := e.renderPrompt(req.Messages, tp, e.maxTokens(&req))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", llm.ErrInvalid, err)
	}
	r := &request{ctx: ctx, req: req, prompt: prompt, prefillOnly: true, done: make(chan struct{})}
	if err := e.enqueue(r); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		return r.processed, r.err
	case <-ctx.Done():
		// The scheduler retires a cancelled prefill before its next step (or
		// drops it from the queue), so this waits at most for the step in
		// flight, and the count includes what that step processed: it is in
		// the cache and the final request reuses it.
		<-r.done
		return r.processed, ctx.Err()
	}
}
