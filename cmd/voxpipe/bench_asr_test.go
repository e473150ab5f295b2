package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/asr/asrtest"
	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// requireSphinx skips t where the default recogniser cannot run: no cgo
// build, or no pocketsphinx-en-us model.
func requireSphinx(t *testing.T) {
	t.Helper()
	if d, err := csphinx.NewDecoder([]string{"-no_such_flag", "x"}); errors.Is(err, csphinx.ErrNoCgo) {
		t.Skip("requires cgo: pocketsphinx unavailable")
	} else if err == nil {
		_ = d.Close()
	}
	if _, err := os.Stat("/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"); err != nil {
		t.Skipf("requires pocketsphinx-en-us: %v", err)
	}
}

// TestBenchASR runs `voxpipe bench asr` on pocketsphinx-testdata's
// goforward, as a tuning set and, resampled by the bench to 8 kHz, as a
// held-out one: it must find one turn, the right words and a latency.
func TestBenchASR(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(psTestData, "goforward.raw"))
	if err != nil {
		t.Skipf("requires pocketsphinx-testdata: %v", err)
	}
	requireSphinx(t)
	pcm := make([]int16, len(raw)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(raw[2*i:]))
	}
	dir := t.TempDir()
	for _, set := range []string{"tune", "heldout-x"} {
		if err := os.MkdirAll(filepath.Join(dir, set), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := audio.EncodeWAV(&b, pcm, 16000, 1); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, set, "gf.wav"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, set, "gf.txt"), []byte("Go forward ten meters.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join("..", ".."))
	var out bytes.Buffer
	if err := runBenchASR(context.Background(), []string{"--dir", dir, "--json", "--set", "asr.sphinx.pool_size=1"}, &out); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Sets    []setResult `json:"sets"`
		Tuning  setResult   `json:"tuning"`
		HeldOut setResult   `json:"held_out"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(res.Sets) != 2 || res.Tuning.Utterances != 1 || res.HeldOut.Utterances != 1 {
		t.Fatalf("sets %+v", res)
	}
	for _, r := range []setResult{res.Tuning, res.HeldOut} {
		if r.Turns != 1 || r.Words != 4 || r.Errors != 0 || r.FinalP50Ms <= 0 || r.CPUPerAudioS <= 0 {
			t.Errorf("%s: %+v, want 1 turn, 0 errors in 4 words, a latency and a CPU cost", r.Set, r)
		}
	}
	// --rate 48000: the bench upsamples each file first, as a 48 kHz client
	// sends it; the words must survive (a Flush that overwrote the
	// resampled audio once left a few samples and no turn).
	out.Reset()
	if err := runBenchASR(context.Background(), []string{"--dir", dir, "--json", "--rate", "48000", "--only", "tune", "--set", "asr.sphinx.pool_size=1"}, &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if r := res.Tuning; r.Turns != 1 || r.Words != 4 || r.Errors != 0 {
		t.Errorf("--rate 48000: %+v, want 1 turn and 0 errors in 4 words", r)
	}
	if err := runBenchASR(context.Background(), []string{"--dir", dir, "--rate", "7"}, &out); err == nil {
		t.Error("--rate 7 accepted")
	}
	// --rescore-grid: the default rescoring's n-best lists, re-picked under
	// each weight; goforward stays right at weight 0 and the shipped one.
	out.Reset()
	if err := runBenchASR(context.Background(), []string{"--dir", dir, "--rescore-grid", "0,0.0025;-0.01", "--set", "asr.sphinx.pool_size=1"}, &out); err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"rescoring: 2 turns with an n-best list", "first pass (no rescoring) 0.0% 0.0%",
		"weight 0 bonus -0.01 0.0% 0.0%", "weight 0.0025 bonus -0.01 0.0% 0.0%"} {
		if !strings.Contains(flat, want) {
			t.Errorf("--rescore-grid output lacks %q:\n%s", want, out.String())
		}
	}
	if err := runBenchASR(context.Background(), []string{"--dir", dir, "--rescore-grid", "0;x"}, &out); err == nil {
		t.Error("--rescore-grid 0;x accepted")
	}
}

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
