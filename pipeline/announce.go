package pipeline

import (
	"context"

	"github.com/voxpipe/voxpipe/tools"
)

// Notices: a tool that acts after its call returned (a timer) gives its
// words to the conversation (tools.Conversation.Announce), which hands
// them to the attached session's turn manager. Each becomes a turn of its
// own once the session is idle (no turn running or waiting, no speculative
// answer): the text is spoken without the LLM, as an assistant message of
// the history, and can be interrupted like any answer. Notices a session
// did not get to speak go back to the conversation when it ends, for the
// next session of the same conversation.

// noticeQueue is how many notices wait for the turn manager; a full queue
// makes the conversation hold the notice instead.
const noticeQueue = 8

// maybeAnnounce starts the oldest queued notice's turn when the session is
// idle.
func (h *hub) maybeAnnounce() {
	if len(h.queued) == 0 || h.pending != nil || h.spec != nil {
		return
	}
	if c := h.cur; c != nil {
		if c.phase != phaseTail || !c.assistantWritten {
			return
		}
		h.done(c)
	}
	n := h.queued[0]
	h.queued = h.queued[1:]
	h.turnSeq++
	tctx, cancel := context.WithCancel(h.ctx)
	tr := newTraceRec(0) // no utterance: any speech is a barge-in
	tr.setTurn(h.turnSeq)
	t := &turn{id: h.turnSeq, ctx: tctx, cancel: cancel, trace: tr, say: n.Text, conv: h.s.conv}
	h.cur, h.latest = t, t
	h.s.turn.Store(int64(t.id))
	h.event(&Event{Type: EventNotice, Turn: t.id, Text: n.Text, Tool: &ToolEvent{Name: n.From}})
	h.jobQ.push(t)
	h.log.Info().Str("tool", n.From).Msg("speaking a notice")
}

// attachNotices connects the session to its conversation for the length of
// Run: notices arrive on the returned channel. finish detaches and gives
// back what the session did not speak.
func (s *Session) attachNotices() (notices <-chan tools.Notice, finish func(unspoken []tools.Notice)) {
	ch := make(chan tools.Notice, noticeQueue)
	detach := s.conv.Attach(func(n tools.Notice) bool {
		select {
		case ch <- n:
			return true
		default:
			return false
		}
	})
	return ch, func(unspoken []tools.Notice) {
		detach() // no deliveries from here on
		for {
			select {
			case n := <-ch:
				unspoken = append(unspoken, n)
			default:
				for _, n := range unspoken {
					s.conv.Announce(n)
				}
				if s.ownConv {
					s.conv.End()
				}
				return
			}
		}
	}
}
