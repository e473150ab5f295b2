package web

import (
	"context"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/pipeline"
	"github.com/voxpipe/voxpipe/pipeline/audio/audiotest"
	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

// halfScorer reads every partial as half complete.
type halfScorer struct{}

func (halfScorer) Score(context.Context, string, string) (float64, error) { return 0.5, nil }

// TestDeviceRemembersSpeaker: the start message's device reaches the
// session, which leaves its speaker's pitch range in the server's memory
// under that id; a session without a device leaves nothing.
func TestDeviceRemembersSpeaker(t *testing.T) {
	ts := newTestServerWith(t, &scriptedModel{}, halfScorer{}, func(c *Config) {
		c.Pipeline.Turn = endturn.DefaultConfig()
	})
	mem := pipeline.NewSpeakerMemory(8, 0, time.Hour)
	ts.srv.backends.Speakers = mem // before any session
	var speech []int16
	for _, seg := range [][2]float64{{120, 160}, {160, 110}, {100, 140}, {150, 100}} {
		speech = append(speech, audiotest.Voice(500, 16000, seg[0], seg[1])...)
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
