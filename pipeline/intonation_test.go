package pipeline

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
)

// glide returns ms of a voice at rate Hz whose pitch moves from f0 to f1 Hz.
func glide(ms, rate int, f0, f1 float64) []int16 { return audiotest.Voice(ms, rate, f0, f1) }

// say streams pcm in 20 ms messages at real-time pace.
func (h *harness) say(pcm []int16) {
	h.t.Helper()
	n := h.cfg.InputRate * frameMs / 1000
	for i := 0; i+n <= len(pcm); i += n {
		h.send(Input{Audio: append([]int16(nil), pcm[i:i+n]...)})
		time.Sleep(frameDur)
	}
}

// TestIntonationEndOfTurn: with the same text score, an utterance whose
// pitch falls to the bottom of the speaker's range at its end is committed
// sooner than one that stops level high in it, and the trace says why.
func TestIntonationEndOfTurn(t *testing.T) {
	// The text alone (0.3 against a 0.5 threshold) waits
	// 160 + 800*logit-shortfall = 838 ms.
	for _, tc := range []struct {
		name     string
		end      [2]float64
		min, max int
		cue      float64 // its sign
	}{
		{"falling to the bottom", [2]float64{125, 92}, 160, 400, 1},
		{"level and high", [2]float64{150, 152}, 1200, 1300, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := semanticConfig()
				cfg.Turn.Threshold = 0.5
				cfg.Turn.IntonationYield, cfg.Turn.IntonationHold = 1.5, 1.5
				h := newSemanticHarness(t, cfg, &fixedScorer{score: 0.3}, []string{"where is the station"}, answer("North."))
				h.audio(false, 200)
				var pcm []int16
				for _, seg := range [][2]float64{{120, 150}, {150, 115}, {105, 135}, {140, 110}} {
					pcm = append(pcm, glide(400, cfg.InputRate, seg[0], seg[1])...)
				}
				h.say(append(pcm, glide(300, cfg.InputRate, tc.end[0], tc.end[1])...))
				h.audio(false, 1500)
				outs := h.until("trace event", isEvent(EventTrace))
				tr := events(outs, EventTrace)[0]
				if tr.EndSilenceMs < tc.min || tr.EndSilenceMs > tc.max {
					t.Errorf("end_silence_ms %d, want %d..%d", tr.EndSilenceMs, tc.min, tc.max)
				}
				if tr.Intonation == nil || tr.EndPitch == nil || *tr.Intonation*tc.cue <= 0 {
					t.Errorf("trace intonation %v, end_pitch %v: want a cue of sign %v", tr.Intonation, tr.EndPitch, tc.cue)
				}
				if tr.EOUScore == nil || math.Abs(*tr.EOUScore-0.3) > 0.001 {
					t.Errorf("eou_score %v: want the text's own 0.3", tr.EOUScore)
				}
				h.close()
			})
		})
	}
}
