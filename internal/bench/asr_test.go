package bench

import (
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/asr/asrtest"
)

// --pauses: the partial when a pause begins, labelled 0 with the pause's
// length once speech resumes; the utterance's end labelled 1 with the
// partial its last pause began with (what the end-of-turn detector scores).
func TestPauseTracker(t *testing.T) {
	var out strings.Builder
	pt := newPauseTracker(&out, nil)
	quiet := make([]int16, 320)
	for _, f := range []struct {
		partial string
		silent  int
	}{
		{"please", 0}, {"please press", 0}, {"please press one", 1}, {"please press one", 2},
		{"please press one", 3}, {"please press one to", 4}, {"please press one to", 0}, // a 80 ms pause
		{"please press one to mute", 0}, {"please press one to mute", 1}, {"please press one to mute", 0}, // 20 ms: inside a word
		{"please press one to mute yourself", 0}, {"please press one to mute yourself", 3},
		{"please press one to mute yourself now", 4}, // a late revision after the pause began
	} {
		pt.partial = f.partial
		pt.speech(quiet, f.silent)
		pt.frame(f.silent)
	}
	pt.end()
	// Unvoiced frames: no intonation known.
	want := "0\tplease press one\t80\t-\t0.0\t0\n1\tplease press one to mute yourself\t-\t-\t0.0\t0\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
	var nilTracker *pauseTracker // --pauses off
	nilTracker.speech(quiet, 0)
	nilTracker.frame(3)
	nilTracker.end()
}

func TestTranscriptionLine(t *testing.T) {
	for _, c := range []struct {
		line, id, ref string
		ok            bool
	}{
		{"<s> ten of clubs  </s> (001)", "001", "ten of clubs", true},
		{"<s> he might even have been made amiable himself </s> (sense_and_sensibility_01_austen_64kb-0930)",
			"sense_and_sensibility_01_austen_64kb-0930", "he might even have been made amiable himself", true},
		{"go forward ten meters (goforward)", "goforward", "go forward ten meters", true},
		{"no id here", "", "", false},
	} {
		id, ref, ok := transcriptionLine(c.line)
		if id != c.id || ref != c.ref || ok != c.ok {
			t.Errorf("transcriptionLine(%q) = %q, %q, %v; want %q, %q, %v", c.line, id, ref, ok, c.id, c.ref, c.ok)
		}
		if got := strings.Join(asrtest.Words(ref), " "); got != c.ref {
			t.Errorf("Words(%q) = %q: a sentence marker became a word", ref, got)
		}
	}
}
