package pipeline

import (
	"testing"
	"testing/synctest"
)

// first_audible_out is the first frame with an audible sample: with a
// backend that sends 200 ms of silence first it comes after first_audio_out,
// by what the pacer's lead could not absorb; without, with it. heard_ms is
// first_audible_out − speech_end.
func TestFirstAudibleOut(t *testing.T) {
	for _, c := range []struct{ leadMs, wantGapMs int }{{0, 0}, {200, 200 - 100}} {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig() // OutputLeadMs 100
			a, m, s := newBackends([]string{"hello"}, answer("Hi there."))
			s.leadMs = c.leadMs
			h := newHarness(t, cfg, a, m, s)
			h.utterance()
			ev := events(h.until("trace", isEvent(EventTrace)), EventTrace)[0]
			out, audible := ev.Marks[MarkFirstAudioOut], ev.Marks[MarkFirstAudibleOut]
			if gap := audible - out; gap != float64(c.wantGapMs) {
				t.Errorf("lead-in %d ms: first_audible_out − first_audio_out = %.1f ms, want %d", c.leadMs, gap, c.wantGapMs)
			}
			if ev.HeardMs == nil || *ev.HeardMs != audible {
				t.Errorf("heard_ms %v, want first_audible_out %.1f", ev.HeardMs, audible)
			}
			traces, _ := h.obs.snapshot()
			if ms, ok := traces[0].Heard(); !ok || ms != audible {
				t.Errorf("Trace.Heard() = %.1f, %v", ms, ok)
			}
			h.close()
		})
	}
}
