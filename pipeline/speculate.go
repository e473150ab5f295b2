package pipeline

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/voxpipe/voxpipe/llm"
)

// Speculative answers (Config.Speculative, semantic end of turn only). When
// audio-in reports a pause (pauseMs of silence) and the utterance has a
// partial transcript, the turn manager starts the answer to that partial
// before the turn is committed: the LLM request is marked speculative (the
// engine serves committed answers of every session first), the TTS speaks
// only the first chunk, and the pacer holds the audio. The answer's text
// events are held too, and the history is not touched.
//
// On the final transcript: the same words (after normalising case and
// spaces) promote the speculation to the turn, which sends the held audio at
// once and continues normally; other words, resumed speech or a cut discard
// it (its context is cancelled and the pacer drops its audio unsent). At
// most one speculation runs per session, and only while no turn is active.

// SpeculationObserver is an optional Observer method: how a speculative
// answer ended, SpeculationCommitted (it became the turn's answer) or
// SpeculationDiscarded (speech resumed, the final differed or it failed;
// nothing of it reached the client). web counts them as
// voxpipe_speculations_total{result}, so the share of speculative work thrown
// away is visible.
type SpeculationObserver interface {
	SpeculationEnded(result string)
}

// SpeculationObserver results.
const (
	SpeculationCommitted = "committed"
	SpeculationDiscarded = "discarded"
)

func (h *hub) speculationEnded(result string) {
	if o, ok := h.s.obs.(SpeculationObserver); ok {
		o.SpeculationEnded(result)
	}
}

// speculation is the turn manager's speculative answer, if any.
type speculation struct {
	t       *turn
	text    string    // the partial it answers
	utt     *traceRec // the utterance's trace (t has its own until promoted)
	started time.Time
	held    strings.Builder // answer text not yet sent to the client
	done    *llmEvent       // the LLM stage finished it before the commit
}

// latestPartial is the last non-final transcript of the utterance in
// progress, for speculation.
type latestPartial struct {
	utt  *traceRec
	text string
}

// resumed handles audio-in's report that the person spoke again after
// pause m.seq.
func (h *hub) resumed(m inputEvent) {
	h.resumedSeq = max(h.resumedSeq, m.seq)
	if sp := h.spec; sp != nil && sp.utt.utt == m.utt {
		h.discardSpeculation("speech resumed")
	}
}

// pauseMark handles a pause, reported by the ASR stage once the audio before
// it was recognised: the partial seen now is what the person said. When the
// recogniser made its final there (Config.PauseFinal) after a speculation
// had started on the partial, a final with other words replaces it.
func (h *hub) pauseMark(m asrEvent) {
	p := h.partialSeen
	if sp := h.spec; sp != nil && m.pauseFinal && sp.utt == m.trace && p.utt == m.trace && !sameWords(sp.text, p.text) {
		h.discardSpeculation("the recogniser's final differs from the partial")
	}
	if !h.cfg.Speculative || m.pause <= h.resumedSeq || h.spec != nil || h.cur != nil || h.pending != nil ||
		p.utt == nil || p.utt != m.trace || p.text == "" {
		return
	}
	h.startSpeculation(p.utt, p.text)
}

func (h *hub) startSpeculation(utt *traceRec, text string) {
	h.stopPrefill() // the speculative request takes the conversation's cache over
	h.s.histMu.Lock()
	msgs := append(slices.Clone(h.s.history), llm.Message{Role: llm.RoleUser, Content: text})
	h.s.histMu.Unlock()
	tctx, cancel := context.WithCancel(h.ctx)
	committed := make(chan struct{})
	t := &turn{id: h.turnSeq + 1, ctx: tctx, cancel: cancel, trace: newTraceRec(utt.utt), committed: committed}
	t.req, t.tools = h.request(capHistory(msgs, h.cfg.MaxHistoryMessages))
	t.conv = h.s.conv
	t.req.Speculative, t.req.Committed = true, committed
	h.attachCache(t, text, msgs)
	h.spec = &speculation{t: t, text: text, utt: utt, started: time.Now()}
	h.jobQ.push(t)
	h.log.Debug().Str("partial", text).Msg("speculative answer started")
}

// sameWords compares transcripts as the recogniser's words.
func sameWords(a, b string) bool {
	return strings.Join(strings.Fields(strings.ToLower(a)), " ") == strings.Join(strings.Fields(strings.ToLower(b)), " ")
}

// commitSpeculation is called with a final transcript before it becomes a
// turn. It promotes the speculation when it answers exactly these words
// and nothing else waits, and reports whether it did; otherwise it discards
// any speculation.
func (h *hub) commitSpeculation(text string, utt *traceRec) bool {
	sp := h.spec
	if sp == nil {
		return false
	}
	if !sameWords(text, sp.text) || sp.utt != utt || h.pending != nil || h.cur != nil {
		h.discardSpeculation("the final transcript differs")
		return false
	}
	h.spec = nil
	h.speculationEnded(SpeculationCommitted)
	t := sp.t
	t.promoted = true
	h.turnSeq++ // == t.id
	// The utterance's marks (speech, recognition, early start, end of turn)
	// join the answer's, which the LLM, TTS and pacer keep recording.
	t.trace.adopt(utt)
	t.trace.setTurn(t.id)
	t.trace.setSpeculative(time.Since(sp.started))
	h.event(&Event{Type: EventTranscript, Turn: t.id, Text: text, Final: true})
	h.noteFinal(utt, t.id)

	h.s.histMu.Lock()
	h.s.history = append(h.s.history, llm.Message{Role: llm.RoleUser, Content: text})
	h.s.history = capHistory(h.s.history, h.cfg.MaxHistoryMessages)
	h.s.histMu.Unlock()
	h.cur, h.latest = t, t
	close(t.committed) // the engine serves it like any answer now; the TTS speaks on
	// The held text before the held audio: a client files the audio that
	// follows an answer event under that event's turn (voxclient lost the
	// first word of such answers to the turn before).
	if held := sp.held.String(); held != "" {
		h.event(&Event{Type: EventAnswer, Turn: t.id, Text: held})
	}
	h.outQ.push(outCtl{release: t})
	h.log.Debug().Int("turn", t.id).Dur("lead", time.Since(sp.started)).Msg("speculative answer committed")
	if sp.done != nil {
		h.llm(*sp.done)
	}
	return true
}

// discardSpeculation cancels the speculative answer and drops its audio
// unsent; nothing of it reached the client or the history.
func (h *hub) discardSpeculation(why string) {
	sp := h.spec
	if sp == nil {
		return
	}
	h.spec = nil
	h.speculationEnded(SpeculationDiscarded)
	sp.t.discarded = true
	sp.t.cancel()
	h.outQ.push(outCtl{discard: sp.t})
	h.log.Debug().Str("why", why).Str("partial", sp.text).Msg("speculative answer discarded")
}

// speculativeLLM keeps a speculative turn's LLM events back until the
// commit; it reports whether m belonged to a speculation (current or
// discarded), which the caller then ignores.
func (h *hub) speculativeLLM(m llmEvent) bool {
	t := m.t
	if t.committed == nil || t.promoted {
		return false
	}
	if sp := h.spec; sp != nil && sp.t == t && !t.discarded {
		if m.done {
			sp.done = &m
		} else {
			sp.held.WriteString(m.delta)
		}
	}
	return true
}

// adopt copies the marks and counts of the utterance's trace u that r lacks.
func (r *traceRec) adopt(u *traceRec) {
	u.mu.Lock()
	marks := make(map[string]time.Time, len(u.marks))
	for k, v := range u.marks {
		marks[k] = v
	}
	early, eot := u.early, u.eot
	u.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range marks {
		if _, ok := r.marks[k]; !ok {
			r.marks[k] = v
		}
	}
	r.early += early
	r.eot.EOUScore, r.eot.EndSilenceMs, r.eot.PauseFinal = eot.EOUScore, eot.EndSilenceMs, eot.PauseFinal
	r.eot.EndPitch, r.eot.Intonation = eot.EndPitch, eot.Intonation
}
