package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	endturn "github.com/voxpipe/voxpipe/pipeline/turn"
)

func TestAUCOf(t *testing.T) {
	for _, tc := range []struct {
		pos, neg []float64
		want     float64
	}{
		{[]float64{0.9, 0.8}, []float64{0.1, 0.2, 0.3}, 1},
		{[]float64{0.1}, []float64{0.5, 0.9}, 0},
		{[]float64{0.5}, []float64{0.5}, 0.5},
		{[]float64{0.4, 0.6}, []float64{0.5}, 0.5},
	} {
		if got := aucOf(tc.pos, tc.neg); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("aucOf(%v, %v) = %v, want %v", tc.pos, tc.neg, got, tc.want)
		}
	}
}

func TestReadEOUSetErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"label":   "1\twhat time is it\n2\tthe\n",
		"tab":     "1 what time is it\n",
		"empty":   "# nothing\n\n",
		"pause":   "0\twhat time\tlong\n",
		"columns": "0\twhat time\t120\t0.3\n",
		"pitch":   "0\twhat time\t120\thigh\t-3.0\t9\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readEOUSet(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err %v, want one naming the file", name, err)
		}
	}
}

// readEOUText reads a labelled set written to a file from body.
func readEOUText(t *testing.T, body string) []eouExample {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pauses.tsv")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	exs, err := readEOUSet(path)
	if err != nil {
		t.Fatal(err)
	}
	return exs
}

// The intonation columns of bench asr --pauses, "-" where not known, and
// the cue they give under the configured weights.
func TestReadEOUSetIntonation(t *testing.T) {
	exs := readEOUText(t, "0\tplease press\t120\t0.900\t25.0\t12\n1\tplease try again\t-\t0.050\t-30.0\t9\n1\thello\t-\t-\t0.0\t2\n")
	c := endturn.DefaultConfig()
	c.IntonationYield, c.IntonationHold = 1, 1
	var cues []float64
	for _, e := range exs {
		cues = append(cues, c.IntonationCue(e.contour))
	}
	if len(exs) != 3 || exs[0].pauseMs != 120 || !math.IsNaN(exs[1].pauseMs) || exs[1].contour.Voiced != 9 ||
		!math.IsNaN(exs[2].contour.Range) || cues[0] != -1 || cues[1] != 1 || cues[2] != 0 {
		t.Errorf("read %+v, cues %v; want a hold, a yield and nothing", exs, cues)
	}
}

// A set from real speech (bench asr --pauses) carries each cut-off's pause:
// a policy cuts exactly the pauses longer than its wait.
func TestEOUPolicyMeasuredPauses(t *testing.T) {
	exs := readEOUText(t, "# from bench asr --pauses\n0\tplease press one\t120\n0\tto mute yourself\t300\n1\tplease try again\n")
	if len(exs) != 3 || exs[0].pauseMs != 120 || exs[1].pauseMs != 300 || !math.IsNaN(exs[2].pauseMs) || !exs[2].complete {
		t.Fatalf("read %+v", exs)
	}
	c := endturn.DefaultConfig() // min 200 ms: a confident partial waits 200
	// Both partials read complete (score 0.9): the 300 ms pause outlasts the
	// 200 ms wait, the 120 ms one does not.
	p := eouPolicyOf(c, []float64{0.9}, []float64{0.9, 0.9}, []float64{120, 300}, false)
	if p.CutOffRate != 0.5 {
		t.Errorf("cut-off rate %v, want 0.5 (the 300 ms pause only)", p.CutOffRate)
	}
	// Without a measured pause the uniform 300-1200 ms assumption holds:
	// every such pause outlasts 200 ms.
	if p := eouPolicyOf(c, []float64{0.9}, []float64{0.9}, []float64{math.NaN()}, false); p.CutOffRate != 1 {
		t.Errorf("cut-off rate %v, want 1", p.CutOffRate)
	}
}
