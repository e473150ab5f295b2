package turn

import (
	"math"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

func TestIntonationCue(t *testing.T) {
	c := DefaultConfig()
	c.IntonationYield, c.IntonationHold = 0.7, 1.2
	for _, tc := range []struct {
		name string
		k    audio.Contour
		want float64
	}{
		{"low and falling: yield", audio.Contour{Voiced: 10, Range: 0.05, Slope: -20}, 0.7},
		{"high and level: hold", audio.Contour{Voiced: 10, Range: 0.9, Slope: 2}, -1.2},
		{"mid range: in between", audio.Contour{Voiced: 10, Range: 0.35, Slope: 0}, (0.7 - 1.2) / 2},
		{"low but rising: no yield", audio.Contour{Voiced: 10, Range: 0.1, Slope: 30}, 0},
		{"high but falling: no hold", audio.Contour{Voiced: 10, Range: 0.8, Slope: -30}, 0},
		{"rising high: hold", audio.Contour{Voiced: 10, Range: 1.1, Slope: 40}, -1.2},
		{"too little voicing", audio.Contour{Voiced: 2, Range: 0.05, Slope: -20}, 0},
		{"the speaker's range unknown", audio.Contour{Voiced: 10, Range: math.NaN(), Slope: -20}, 0},
	} {
		if got := c.IntonationCue(tc.k); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: cue %v, want %v", tc.name, got, tc.want)
		}
	}
	off := DefaultConfig()
	off.IntonationYield, off.IntonationHold = 0, 0
	if got := off.IntonationCue(audio.Contour{Voiced: 10, Range: 0, Slope: -20}); got != 0 {
		t.Errorf("text only (both weights 0): cue %v", got)
	}
}

func TestWithCue(t *testing.T) {
	if got := WithCue(0.3, 0); got != 0.3 {
		t.Errorf("no cue changed the score: %v", got)
	}
	if got := WithCue(math.NaN(), 1); !math.IsNaN(got) {
		t.Errorf("no score yet became %v", got)
	}
	// One unit of log-odds up from even odds.
	if got, want := WithCue(0.5, 1), 1/(1+math.Exp(-1)); math.Abs(got-want) > 1e-9 {
		t.Errorf("WithCue(0.5, 1) = %v, want %v", got, want)
	}
	// The wait follows: a score one unit short of the threshold waits
	// DoubtMs more, and the yield cue takes that back.
	c := DefaultConfig()
	short := WithCue(c.Threshold, -1)
	if got, want := c.Wait(short).Milliseconds(), int64(c.MinSilenceMs+c.DoubtMs); got < want-1 || got > want+1 {
		t.Errorf("one unit short waits %d ms, want %d", got, want)
	}
	if got := c.Wait(WithCue(short, 1)).Milliseconds(); got != int64(c.MinSilenceMs) {
		t.Errorf("with the cue back: %d ms, want %d", got, c.MinSilenceMs)
	}
}

func TestValidateIntonation(t *testing.T) {
	for _, v := range [][2]float64{{-0.1, 0}, {0, -1}, {6, 0}, {0, math.NaN()}} {
		c := DefaultConfig()
		c.IntonationYield, c.IntonationHold = v[0], v[1]
		if err := c.Validate(); err == nil {
			t.Errorf("yield %v hold %v: accepted", v[0], v[1])
		}
	}
}
