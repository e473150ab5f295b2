package pipeline

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestSpeechEndBeforeTheFinal: when the end of turn commits an utterance
// with words heard, the client gets speech_end at once, before the final
// transcript and with its turn number (xiaozhi sends tts start on it); an
// utterance with no words gets none.
func TestSpeechEndBeforeTheFinal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, m, s := newBackends([]string{"hello there", ""}, answer("Hi."), answer("Hi."))
		h := newHarness(t, testConfig(), a, m, s)
		h.utterance()
		outs := h.untilAll(EventTrace)
		var order []string
		var endTurn, finalTurn int
		for _, o := range outs {
			switch e := o.Event; {
			case e == nil:
			case e.Type == EventSpeechEnd:
				order = append(order, e.Type)
				endTurn = e.Turn
			case e.Type == EventTranscript && e.Final:
				order = append(order, "final")
				finalTurn = e.Turn
			}
		}
		if len(order) != 2 || order[0] != EventSpeechEnd || order[1] != "final" || endTurn != finalTurn || endTurn != 1 {
			t.Errorf("events %v (speech_end turn %d, final turn %d), want speech_end then the final, both turn 1", order, endTurn, finalTurn)
		}
		// Noise: the recogniser hears no words, so no speech_end.
		h.utterance()
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(events(h.drain(), EventSpeechEnd)); n != 0 {
			t.Errorf("%d speech_end events for an utterance without words", n)
		}
		h.close()
	})
}
