package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/voxpipe/voxpipe/llm"
	"github.com/voxpipe/voxpipe/tools"
)

// pendingUser is a final transcript waiting for its turn to start.
type pendingUser struct {
	id    int
	text  string
	trace *traceRec
}

// hub is the turn manager. It owns the conversation history and every
// turn's lifecycle: it starts a turn for each final transcript, cuts turns
// on barge-in, failure or the client's interrupt, and settles what the
// person heard into the history before the next turn starts.
//
// Every stage sends to the hub and the hub never blocks on a send: what it
// sends waits in a sendQueue and its select offers the queue's head. That
// keeps the graph free of deadlocks although it has cycles (hub → pacer →
// hub, hub → LLM → hub).
type hub struct {
	s   *Session
	cfg Config
	log zerolog.Logger
	ctx context.Context

	outQ sendQueue[outCtl]
	jobQ sendQueue[*turn]

	prefills    chan<- *prefillJob // nil when early start is off
	eou         chan eouJob        // to the end-of-utterance stage (cap 1); nil in silence mode
	spec        *speculation       // the speculative answer, if any (speculate.go)
	partialSeen latestPartial      // the utterance's latest partial transcript
	resumedSeq  int                // the last pause the person spoke after
	// finalOf is the turn the last final transcript went to, and its
	// utterance: a turn-limit report that arrives after that final (the two
	// come on different channels) names that turn.
	finalOf struct{ utt, turn int }
	early   earlyStart

	// notices come from the conversation's tools (a timer going off);
	// queued wait for the session to be idle (announce.go).
	notices <-chan tools.Notice
	queued  []tools.Notice

	// bc matches backchannels (nil: every utterance interrupts); heldUtt
	// is the utterance over the answer whose barge-in waits for its words
	// (backchannel.go), 0 when none.
	bc      *backchannels
	heldUtt int

	turnSeq int
	pending *pendingUser
	cur     *turn // generating, in its playback tail, or settling; nil when idle
	latest  *turn // the last turn started: its messages end the history

	reportTimer, tailTimer *time.Timer
	reportC, tailC         <-chan time.Time // nil while the timer is not armed
}

func (h *hub) run(ctx context.Context, inputEv <-chan inputEvent, asrEv <-chan asrEvent, llmEv <-chan llmEvent,
	ttsEv <-chan ttsFailure, reports <-chan pacerReport, jobs chan<- *turn, ctl chan<- outCtl,
) error {
	defer close(jobs)
	defer close(ctl)
	if h.prefills != nil {
		defer close(h.prefills)
	}
	if h.eou != nil {
		defer close(h.eou)
	}
	defer h.stopTimers()
	h.ctx = ctx
	for {
		if n := h.outQ.len(); n > maxOutBacklog {
			h.log.Warn().Int("events", n).Msg("output backlog over its bound: the client is not reading; ending the session")
			return ErrOutputBacklog
		}
		outCh, outV := h.outQ.next(ctl)
		jobCh, jobV := h.jobQ.next(jobs)
		var prefillCh chan<- *prefillJob // offered only while a job waits
		if h.early.queued != nil {
			prefillCh = h.prefills
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-inputEv:
			if !ok {
				inputEv = nil
				continue
			}
			h.input(m)
		case m, ok := <-asrEv:
			if !ok {
				asrEv = nil
				continue
			}
			h.transcript(m)
		case m, ok := <-llmEv:
			if !ok {
				llmEv = nil
				continue
			}
			h.llm(m)
		case m, ok := <-ttsEv:
			if !ok {
				ttsEv = nil
				continue
			}
			h.ttsFailed(m)
		case r, ok := <-reports:
			if !ok {
				reports = nil
				continue
			}
			h.report(r)
		case <-h.reportC:
			h.reportC = nil
			if t := h.cur; t != nil && t.phase == phaseSettling {
				t.reportTimedOut = true
				h.trySettle(t)
			}
		case <-h.tailC:
			h.tailC = nil
			if t := h.cur; t != nil && t.phase == phaseTail {
				t.tailOver = true
				h.trySettle(t)
			}
		case n := <-h.notices:
			h.queued = append(h.queued, n)
			h.maybeStart()
		case <-h.early.timerC:
			h.partialStable()
		case prefillCh <- h.early.queued:
			h.early.taken, h.early.queued = h.early.queued, nil
		case outCh <- outV:
			h.outQ.pop()
		case jobCh <- jobV:
			h.jobQ.pop()
		}
	}
}

func (h *hub) input(m inputEvent) {
	if m.kind == inputResume {
		h.resumed(m)
		return
	}
	if m.kind == inputTurnLimit {
		// The utterance's final transcript may still be on its way (then it
		// gets the turn number the next final gets) or may have come first.
		turn := h.nextTurnID()
		if h.finalOf.utt == m.utt && h.finalOf.turn > 0 {
			turn = h.finalOf.turn
		}
		h.sendError(turn, CodeTurnLimit, fmt.Sprintf(
			"you spoke for over %s: the turn was ended there and what was said so far is answered", h.cfg.MaxTurn))
		return
	}
	if m.kind == inputCommit {
		// Words were heard (a partial of this utterance), so a final with
		// words, and a turn, almost surely follow: transports that must
		// announce an answer ahead of its audio (xiaozhi's tts start) can
		// do it now instead of at the final.
		if p := h.partialSeen; p.utt != nil && p.utt.utt == m.utt && p.text != "" {
			h.event(&Event{Type: EventSpeechEnd, Turn: h.nextTurnID()})
		}
		return
	}
	if m.kind == inputSpeech {
		// Speech of the utterance that started the turn (its event can
		// arrive after the final transcript) is not a barge-in.
		if t := h.cur; t != nil && h.cfg.BargeIn && interruptible(t) && m.utt > t.trace.utt {
			if h.holdsBargeIn() && h.holdBargeIn(m.utt) {
				return
			}
			h.log.Debug().Msg("barge-in: speech while the answer plays")
			h.cutTurn(t, cutServer, m.at)
		}
		return
	}
	if m.kind == inputLongSpeech {
		h.longSpeech(m)
		return
	}
	ev := m.event
	t := h.findTurn(ev.Turn)
	if t == nil {
		h.log.Debug().Str("type", ev.Type).Int("client_turn", ev.Turn).Msg("client event for no known turn")
		return
	}
	switch ev.Type {
	case ClientPlaybackStart:
		t.trace.markAt(MarkPlaybackStart, m.at)
	case ClientInterrupt:
		h.clientInterrupt(t, ev.PlayedMs, m.at)
	}
}

// findTurn resolves a client's turn number; 0 means the current turn.
func (h *hub) findTurn(id int) *turn {
	switch {
	case id == 0 && h.cur != nil:
		return h.cur
	case id == 0:
		return h.latest
	case h.cur != nil && h.cur.id == id:
		return h.cur
	case h.latest != nil && h.latest.id == id:
		return h.latest
	}
	return nil
}

func interruptible(t *turn) bool {
	return t.phase == phaseGenerating || (t.phase == phaseTail && !t.tailOver)
}

func (h *hub) clientInterrupt(t *turn, playedMs float64, at time.Time) {
	played := max(0, int(playedMs*float64(h.cfg.OutputRate)/1000))
	switch t.phase {
	case phaseGenerating, phaseTail:
		// Clamped to the audio sent when the turn settles: only the pacer
		// knows that count, and it reports it with the flush.
		t.played, t.playedKnown = played, true
		h.log.Debug().Float64("played_ms", playedMs).Msg("client interrupted the turn")
		h.cutTurn(t, cutClient, at)
	case phaseSettling:
		t.played, t.playedKnown = played, true
		h.trySettle(t)
	case phaseDone:
		// A report after the turn settled (late, or after the estimate):
		// correct the history while it is still the last exchange.
		if t == h.latest {
			h.writeAssistant(t, heardText(t.answer, t.words, min(played, t.sentSamples)))
		}
	}
}

func (h *hub) transcript(m asrEvent) {
	if m.err != nil {
		h.endEarly()
		h.discardSpeculation("recognition failed")
		h.sendError(0, CodeBackend, m.err.Error())
		return
	}
	if m.pause > 0 {
		h.pauseMark(m)
		return
	}
	if !m.final {
		if m.text != "" {
			h.event(&Event{Type: EventTranscript, Turn: h.nextTurnID(), Text: m.text})
			if m.trace != nil {
				h.offerEOU(m.trace.utt, m.text)
				h.partialSeen = latestPartial{utt: m.trace, text: strings.TrimSpace(m.text)}
				h.heldPartial(m.trace.utt, m.text)
			}
			h.partial(m)
		}
		return
	}
	// Before the final request is queued: a prefill still running would
	// hold the backend (it keeps what it has processed).
	h.endEarly()
	h.partialSeen = latestPartial{}
	text := strings.TrimSpace(m.text)
	if text == "" {
		h.discardSpeculation("no words")
		h.log.Debug().Msg("empty final transcript: noise, no turn")
		return
	}
	if t := h.cur; t != nil && h.holdsBargeIn() && interruptible(t) && h.backchannel(t, m.trace, text) {
		h.discardSpeculation("backchannel")
		return
	}
	if h.commitSpeculation(text, m.trace) {
		return
	}
	if p := h.pending; p != nil {
		// The person spoke again before the previous words got their turn:
		// answer both at once, timed from the latest utterance.
		p.text += " " + text
		p.trace = m.trace
	} else {
		h.turnSeq++
		h.pending = &pendingUser{id: h.turnSeq, text: text, trace: m.trace}
	}
	h.event(&Event{Type: EventTranscript, Turn: h.pending.id, Text: text, Final: true})
	h.noteFinal(m.trace, h.pending.id)
	if t := h.cur; t != nil && h.cfg.BargeIn && interruptible(t) {
		// Speech too short to trigger barge-in by itself, but real words.
		h.cutTurn(t, cutServer, time.Now())
	}
	h.maybeStart()
}

// noteFinal records that utterance tr's final transcript went to turn.
func (h *hub) noteFinal(tr *traceRec, turn int) {
	if tr != nil {
		h.finalOf.utt, h.finalOf.turn = tr.utt, turn
	}
}

func (h *hub) nextTurnID() int {
	if h.pending != nil {
		return h.pending.id
	}
	return h.turnSeq + 1
}

func (h *hub) llm(m llmEvent) {
	if h.speculativeLLM(m) {
		return
	}
	t := m.t
	if m.event != nil {
		if (t.phase == phaseGenerating || t.phase == phaseTail) && t.cut == cutNone && t.ctx.Err() == nil {
			h.event(m.event)
		}
		return
	}
	if !m.done {
		// Not only while generating: the pacer's report that the audio
		// ended can reach this goroutine before the LLM stage's last delta
		// (they come on different channels), and the tail still shows it.
		if (t.phase == phaseGenerating || t.phase == phaseTail) && t.cut == cutNone && t.ctx.Err() == nil {
			h.event(&Event{Type: EventAnswer, Turn: t.id, Text: m.delta})
		}
		return
	}
	t.llmDone, t.answer, t.exchange = true, m.answer, m.exchange
	h.event(&Event{Type: EventAnswer, Turn: t.id, Final: true})
	if m.err != nil && t.cut == cutNone {
		// The LLM stage ended the turn's text; what was already handed to
		// the TTS still plays, so the person hears whole sentences.
		code, msg := CodeBackend, m.err.Error()
		switch {
		case errors.Is(m.err, llm.ErrBusy):
			code, msg = CodeBusy, "llm: busy: the model's queue is full, try again"
		case errors.Is(m.err, errToolRounds):
			code = CodeToolRounds
		}
		t.llmFailed = true
		h.log.Warn().Str("code", code).Str("error", msg).Msg("turn failed")
		h.sendError(t.id, code, msg)
	}
	h.trySettle(t)
}

func (h *hub) ttsFailed(m ttsFailure) {
	if m.t.committed != nil && !m.t.promoted {
		if h.spec != nil && h.spec.t == m.t {
			h.discardSpeculation("tts failed")
		}
		return
	}
	if m.t.cut == cutNone {
		h.fail(m.t, CodeBackend, m.err.Error())
		h.trySettle(m.t)
	}
}

// fail tells the client and cuts the turn; the session keeps serving.
func (h *hub) fail(t *turn, code, msg string) {
	h.log.Warn().Str("code", code).Str("error", msg).Msg("turn failed")
	h.sendError(t.id, code, msg)
	if t.phase == phaseGenerating || t.phase == phaseTail {
		h.cutTurn(t, cutFailed, time.Now())
	}
}

func (h *hub) report(r pacerReport) {
	t := r.t
	switch r.kind {
	case reportEnded:
		t.audioEnded = true
		if t.phase == phaseGenerating {
			t.phase = phaseTail
			if h.cfg.OutputLeadMs == 0 || t != h.cur {
				t.tailOver = true
			} else {
				h.tailC = arm(&h.tailTimer, time.Duration(h.cfg.OutputLeadMs)*time.Millisecond)
			}
		}
	case reportFlushed:
		t.flushed = true
	}
	h.trySettle(t)
}

// cutTurn stops t: its context is cancelled (the LLM and TTS stop), the
// pacer drops its unsent audio, and the turn waits to learn what was heard.
func (h *hub) cutTurn(t *turn, why cutReason, at time.Time) {
	if why != cutFailed {
		t.trace.markAt(MarkInterrupted, at)
	}
	t.cut, t.cutAt, t.phase = why, at, phaseSettling
	t.cancel()
	h.stopPrefill()
	h.outQ.push(outCtl{flush: t, notify: why == cutServer, clientStopped: why != cutFailed})
	h.tailC = disarm(h.tailTimer)
	if why == cutServer {
		h.reportC = arm(&h.reportTimer, h.cfg.PlaybackReportTimeout)
	}
}

// trySettle moves t on once everything it waits for has arrived, and then
// starts a waiting user turn.
func (h *hub) trySettle(t *turn) {
	if !t.traceQueued && t.llmDone && (t.audioEnded || t.flushed) {
		// After the answer's final event, which the LLM stage's done queued.
		t.traceQueued = true
		h.outQ.push(outCtl{trace: t})
	}
	switch t.phase {
	case phaseGenerating, phaseTail:
		if t.llmDone && t.audioEnded && !t.assistantWritten {
			text := strings.TrimSpace(t.answer)
			if t.llmFailed { // only what was spoken, not what stayed in the chunker
				text = heardText(t.answer, t.words, t.sentSamples)
			}
			h.writeAssistant(t, text)
			h.storeAnswer(t)
			t.cancel() // everything finished; release the context
		}
		if t.phase == phaseTail && t.tailOver && t.assistantWritten {
			h.done(t)
		}
	case phaseSettling:
		if !t.llmDone || !t.flushed {
			return
		}
		var played int
		switch {
		case t.playedKnown:
			played = t.played
		case t.cut == cutFailed:
			played = t.sentSamples // nobody stopped the client: it plays all it got
		case t.sentSamples == 0:
			played = 0
		case !t.reportTimedOut:
			return // wait for the client's interrupt{played_ms}
		default:
			played = h.estimatePlayed(t)
			h.log.Info().Int("played_samples", played).
				Msg("no playback report from the client; heard text is an estimate")
		}
		h.writeAssistant(t, heardText(t.answer, t.words, min(played, t.sentSamples)))
		h.done(t)
	}
	h.maybeStart()
}

// estimatePlayed guesses how much of the turn the client played when it
// did not say: the time from its playback_start report to the cut, or else
// all that was sent minus the lead the pacer had in use (at most
// OutputLeadMs) when it flushed.
func (h *hub) estimatePlayed(t *turn) int {
	if start, ok := t.trace.get(MarkPlaybackStart); ok {
		el := max(0, t.cutAt.Sub(start))
		return min(t.sentSamples, int(el.Seconds()*float64(h.cfg.OutputRate)))
	}
	return max(0, t.sentSamples-t.unplayed)
}

func (h *hub) done(t *turn) {
	t.phase = phaseDone
	t.cancel()
	if h.cur == t {
		h.cur = nil
		h.reportC = disarm(h.reportTimer)
		h.tailC = disarm(h.tailTimer)
		h.resumeEarly()
	}
}

// maybeStart starts the waiting user turn once the previous turn's history
// is settled.
func (h *hub) maybeStart() {
	p := h.pending
	if p == nil {
		h.maybeAnnounce()
		return
	}
	if c := h.cur; c != nil {
		if c.phase != phaseTail || !c.assistantWritten {
			return
		}
		h.done(c)
	}
	h.pending = nil
	tctx, cancel := context.WithCancel(h.ctx)
	p.trace.setTurn(p.id)
	t := &turn{id: p.id, ctx: tctx, cancel: cancel, trace: p.trace}

	h.s.histMu.Lock()
	h.s.history = joinUser(h.s.history, p.text) // after a backchannel, joined to it
	h.s.history = capHistory(h.s.history, h.cfg.MaxHistoryMessages)
	msgs := slices.Clone(h.s.history)
	h.s.histMu.Unlock()

	t.req, t.tools = h.request(msgs)
	t.conv = h.s.conv
	h.attachCache(t, p.text, msgs)
	h.cur, h.latest = t, t
	h.s.turn.Store(int64(t.id)) // log lines from here on carry this turn
	h.jobQ.push(t)
	h.log.Debug().Int("messages", len(msgs)).Msg("turn started")
}

// writeAssistant stores (or, for a turn cut after it was stored, corrects)
// the assistant message of t, which must be the latest turn. An answer the
// person heard none of is stored as an empty assistant message, which keeps
// user/assistant alternating (some chat templates require it).
func (h *hub) writeAssistant(t *turn, text string) {
	if t != h.latest {
		return
	}
	h.s.histMu.Lock()
	defer h.s.histMu.Unlock()
	if !t.assistantWritten {
		t.assistantWritten = true
		// The tool calls and results stay in the history even when the
		// answer after them was cut: the tools acted (a timer is set).
		h.s.history = append(h.s.history, t.exchange...)
		h.s.history = append(h.s.history, llm.Message{Role: llm.RoleAssistant, Content: text})
		h.s.history = appendBackchannels(h.s.history, t.backchannels)
		h.s.history = capHistory(h.s.history, h.cfg.MaxHistoryMessages)
		return
	}
	last := len(h.s.history) - 1
	if last >= 1 && h.s.history[last].Role == llm.RoleUser && len(t.backchannels) > 0 {
		last-- // the backchannels said over it follow the answer
	}
	if last >= 0 && h.s.history[last].Role == llm.RoleAssistant {
		h.s.history[last].Content = text
	}
}

func (h *hub) event(ev *Event) { h.outQ.push(outCtl{event: ev}) }

// maxOutBacklog bounds the events the turn manager holds for the pacer,
// which holds them while the transport does not take its output. A turn
// makes at most a few hundred (a delta per token up to max_tokens, a
// partial transcript per recogniser change); a backlog past this is a
// client that stopped reading while the conversation went on, and ends
// the session (ErrOutputBacklog) rather than grow without bound.
const maxOutBacklog = 8192

func (h *hub) sendError(turnID int, code, msg string) {
	h.event(&Event{Type: EventError, Turn: turnID, Code: code, Message: msg})
}

func (h *hub) stopTimers() {
	disarm(h.reportTimer)
	disarm(h.tailTimer)
	disarm(h.early.timer)
}

// arm starts (or restarts) *tm to fire after d and returns its channel.
func arm(tm **time.Timer, d time.Duration) <-chan time.Time {
	if *tm == nil {
		*tm = time.NewTimer(d)
	} else {
		(*tm).Reset(d)
	}
	return (*tm).C
}

// disarm stops tm (which may be nil) and returns the nil channel that
// disables its select case.
func disarm(tm *time.Timer) <-chan time.Time {
	if tm != nil {
		tm.Stop()
	}
	return nil
}
