package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// Early start. While the person speaks, the turn manager watches the
// partial transcripts of the utterance; once one has stayed unchanged for
// EarlyStartStableMs it asks the prefill stage to run the request the final
// transcript would make, with the partial as the user's message, into the
// backend's cache (llm.Prefiller). When the final arrives its request
// reuses the common prefix, so only the words that changed, and the chat
// template's closing tokens, are left to prefill after speech_end.
//
// At most one prefill runs per session: a newer stable partial cancels the
// running one (the backend keeps what it processed) and replaces any still
// waiting. The final transcript, a cut turn and the session's end cancel
// it too, before the final request is sent, so the prefill never delays
// the answer. A prefill that fails or finds the backend busy is dropped.

// prefillJob goes from the turn manager to the prefill stage.
type prefillJob struct {
	ctx    context.Context // cancelled when replaced, on the final, a cut or the session's end
	cancel context.CancelFunc
	req    llm.Request
	trace  *traceRec // the utterance's: receives the tokens prefilled
}

// prefillStage runs one prefill at a time.
type prefillStage struct {
	model llm.Prefiller
	log   zerolog.Logger
}

func (p *prefillStage) run(ctx context.Context, jobs <-chan *prefillJob) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case j, ok := <-jobs:
			if !ok {
				return nil
			}
			p.prefill(j) //nolint:contextcheck // each job carries its turn's context
		}
	}
}

func (p *prefillStage) prefill(j *prefillJob) {
	defer j.cancel()
	if j.ctx.Err() != nil {
		return // replaced or the final came while the job waited
	}
	j.trace.mark(MarkLLMPrefillEarly)
	started := time.Now()
	processed, err := p.model.Prefill(j.trace.observer(j.ctx, false), j.req)
	j.trace.addEarly(processed)
	ev := p.log.Debug().Int("tokens", processed).Dur("took", time.Since(started))
	switch {
	case err == nil:
		ev.Msg("early prefill done")
	case j.ctx.Err() != nil:
		ev.Msg("early prefill stopped: replaced or the final transcript came")
	case errors.Is(err, llm.ErrBusy):
		ev.Msg("early prefill skipped: llm busy")
	default:
		ev.Err(err).Msg("early prefill failed")
	}
}

// earlyStart is the turn manager's early-start state.
type earlyStart struct {
	stable time.Duration

	utt       *traceRec   // the utterance the partials below belong to
	candidate string      // its latest partial, trimmed
	sent      string      // the partial of the latest job made for it
	queued    *prefillJob // made, not yet taken by the prefill stage
	taken     *prefillJob // taken by the prefill stage; may have finished

	timer  *time.Timer
	timerC <-chan time.Time // nil while the stability timer is not armed
}

// partial watches a non-final transcript for stability.
func (h *hub) partial(m asrEvent) {
	e := &h.early
	if h.prefills == nil || m.trace == nil {
		return
	}
	if m.trace != e.utt {
		e.utt, e.candidate, e.sent = m.trace, "", ""
	}
	text := strings.TrimSpace(m.text)
	if text == "" || text == e.candidate {
		return
	}
	e.candidate = text
	e.timerC = arm(&e.timer, e.stable)
}

// partialStable starts a prefill of the stable partial, replacing the
// previous one. It waits while a turn is active: the final request's
// history is only known once that turn has settled (done re-arms it).
func (h *hub) partialStable() {
	e := &h.early
	e.timerC = nil
	if e.candidate == "" || e.candidate == e.sent || h.cur != nil || h.pending != nil {
		return
	}
	h.s.histMu.Lock()
	msgs := append(slices.Clone(h.s.history), llm.Message{Role: llm.RoleUser, Content: e.candidate})
	h.s.histMu.Unlock()
	ctx, cancel := context.WithCancel(h.ctx)
	job := &prefillJob{ctx: ctx, cancel: cancel, req: h.prefillRequest(capHistory(msgs, h.cfg.MaxHistoryMessages)), trace: e.utt}
	h.stopPrefill()
	e.queued, e.sent = job, e.candidate
	h.log.Debug().Str("partial", e.candidate).Msg("early prefill of a stable partial")
}

// resumeEarly re-arms the stability timer after a turn settled, for a
// partial that became stable while the turn was active.
func (h *hub) resumeEarly() {
	if e := &h.early; h.prefills != nil && e.candidate != "" && e.candidate != e.sent && e.timerC == nil {
		e.timerC = arm(&e.timer, e.stable)
	}
}

// stopPrefill cancels the running prefill and drops the waiting one.
func (h *hub) stopPrefill() {
	e := &h.early
	if e.queued != nil {
		e.queued.cancel()
		e.queued = nil
	}
	if e.taken != nil {
		e.taken.cancel()
		e.taken = nil
	}
}

// endEarly ends early start for the utterance: its final came (or it
// failed), so nothing of it is prefilled any more.
func (h *hub) endEarly() {
	h.stopPrefill()
	e := &h.early
	e.utt, e.candidate, e.sent = nil, "", ""
	e.timerC = disarm(e.timer)
}

// request is the LLM request for msgs (the history ending with the user's
// message). The final request and early prefills both use it, so that
// their prompts agree up to the user's words.
// request builds the LLM request of msgs, with the tools the session's
// providers offer now (nil when none): the same for a prefill, a
// speculative answer and the turn, so their prompts share a prefix.
func (h *hub) request(msgs []llm.Message) (llm.Request, *tools.Set) {
	var set *tools.Set
	if len(h.s.be.Tools) > 0 {
		set = tools.NewSet(h.cfg.Tools.Limits, h.s.be.Tools...)
		if set.Len() == 0 {
			set = nil
		}
	}
	return llm.Request{
		Messages:     msgs,
		MaxTokens:    h.cfg.MaxTokens,
		Temperature:  h.cfg.Temperature,
		Conversation: h.s.id,
		Tools:        set.Specs(),
	}, set
}

func (h *hub) prefillRequest(msgs []llm.Message) llm.Request {
	req, _ := h.request(msgs)
	return req
}
