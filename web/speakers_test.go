package web

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// halfScorer reads every partial as half complete.
type halfScorer struct{}

func (halfScorer) Score(context.Context, string, string) (float64, error) { return 0.5, nil }

// voiced returns ms of a 16 kHz voice gliding from f0 to f1 Hz.
func voiced(ms int, f0, f1 float64) []int16 {
	out := make([]int16, 16*ms)
	phase := 0.0
	for i := range out {
		phase += 2 * math.Pi * (f0 + (f1-f0)*float64(i)/float64(len(out))) / 16000
		var v float64
		for k := 1; k <= 10; k++ {
			v += math.Sin(float64(k)*phase) / float64(k)
		}
		out[i] = int16(4000 * v)
	}
	return out
}

// TestDeviceRemembersSpeaker: the start message's device reaches the
// session, which leaves its speaker's pitch range in the server's memory
// under that id; a session without a device leaves nothing.
func TestDeviceRemembersSpeaker(t *testing.T) {
	ts := newTestServerWith(t, &scriptedModel{}, halfScorer{}, func(c *Config) {
		c.Pipeline.Turn = endturn.DefaultConfig()
	})
	mem := pipeline.NewSpeakerMemory(8, time.Hour)
	ts.srv.backends.Speakers = mem // before any session
	var speech []int16
	for _, seg := range [][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}} {
		speech = append(speech, voiced(500, seg[0], seg[1])...)
	}
	for _, device := range []string{"", "kitchen-1"} {
		ws := dial(t, ts.url)
		start := startMsg(16000, EncodingPCM16)
		if device != "" {
			start["device"] = device
		}
		sendJSON(t, ws, start)
		expectReady(t, ws)
		for i := 0; i+320 <= len(speech); i += 320 {
			if err := ws.WriteMessage(2, pcmBytes(speech[i:i+320])); err != nil {
				t.Fatal(err)
			}
		}
		stopAndExpectClose(t, ws)
		waitIdle(t, ts.srv)
		want := 0
		if device != "" {
			want = 1
		}
		if mem.Len() != want {
			t.Fatalf("after a session with device %q: %d devices remembered, want %d", device, mem.Len(), want)
		}
	}
	if _, ok := mem.Recall("kitchen-1"); !ok {
		t.Error("device kitchen-1's speaker not remembered")
	}
}
