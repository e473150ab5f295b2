//go:build cgo

package sphinx

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

const (
	modelRoot = "/usr/share/pocketsphinx/model/en-us"
	testData  = "/usr/share/pocketsphinx/test/data"
)

func requireFiles(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("requires %s (apt-get install pocketsphinx-en-us pocketsphinx-testdata): not found", p)
		}
	}
}

func readRaw(t *testing.T, path string) []int16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pcm := make([]int16, len(b)/2)
	for i := range pcm {
		pcm[i] = int16(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return pcm
}

func lmArgs(extra ...string) []string {
	return append([]string{
		"-hmm", modelRoot + "/en-us",
		"-lm", modelRoot + "/en-us.lm.bin",
		"-dict", modelRoot + "/cmudict-en-us.dict",
	}, extra...)
}

func TestDecoderGoForward(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.raw")
	pcm := readRaw(t, testData+"/goforward.raw")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"3-pass", lmArgs()},
		{"first-pass", lmArgs("-fwdflat", "no", "-bestpath", "no")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecoder(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			// Two utterances on one decoder: reuse must work.
			for range 2 {
				if err := d.StartUtt(); err != nil {
					t.Fatal(err)
				}
				sawSpeech := false
				var partial []byte
				for off := 0; off < len(pcm); off += 320 {
					if err := d.ProcessRaw(pcm[off:min(off+320, len(pcm))]); err != nil {
						t.Fatal(err)
					}
					sawSpeech = sawSpeech || d.InSpeech()
					partial = d.AppendHyp(partial[:0])
				}
				if len(partial) == 0 {
					t.Error("no partial hypothesis before EndUtt")
				}
				if !sawSpeech {
					t.Error("InSpeech never reported speech")
				}
				if err := d.EndUtt(); err != nil {
					t.Fatal(err)
				}
				if have, want := d.Hyp(), "go forward ten meters"; have != want {
					t.Errorf("have %q, want %q", have, want)
				}
			}
		})
	}
}

func TestDecoderErrors(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef")
	if _, err := NewDecoder([]string{"-hmm"}); !errors.Is(err, ErrConfig) {
		t.Errorf("odd args: have %v, want ErrConfig", err)
	}
	if _, err := NewDecoder([]string{"-no_such_flag", "1"}); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown flag: have %v, want ErrConfig", err)
	}
	if _, err := NewDecoder(lmArgs("-logfn", "/dev/null")); !errors.Is(err, ErrConfig) {
		t.Errorf("-logfn: have %v, want ErrConfig", err)
	}
	_, err := NewDecoder([]string{"-hmm", modelRoot + "/en-us", "-lm", "/nonexistent/x.lm.bin", "-dict", modelRoot + "/cmudict-en-us.dict"})
	if !errors.Is(err, ErrInit) {
		t.Fatalf("missing lm: have %v, want ErrInit", err)
	}
	t.Logf("missing lm error: %v", err)
	if !strings.Contains(err.Error(), "x.lm.bin") {
		t.Errorf("error %q does not name the missing file", err)
	}
}

func TestDecoderCloseIdempotent(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.gram")
	d, err := NewDecoder([]string{"-hmm", modelRoot + "/en-us", "-jsgf", testData + "/goforward.gram", "-dict", modelRoot + "/cmudict-en-us.dict"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.StartUtt(); !errors.Is(err, ErrClosed) {
		t.Errorf("StartUtt after Close: have %v, want ErrClosed", err)
	}
	if err := d.ProcessRaw(make([]int16, 320)); !errors.Is(err, ErrClosed) {
		t.Errorf("ProcessRaw after Close: have %v, want ErrClosed", err)
	}
	if d.Hyp() != "" || d.InSpeech() {
		t.Error("Hyp/InSpeech after Close should be empty/false")
	}
}

func TestDecoderStartTwice(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.gram")
	d, err := NewDecoder([]string{"-hmm", modelRoot + "/en-us", "-jsgf", testData + "/goforward.gram", "-dict", modelRoot + "/cmudict-en-us.dict"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	err = d.StartUtt()
	if !errors.Is(err, ErrDecode) {
		t.Fatalf("second StartUtt: have %v, want ErrDecode", err)
	}
	t.Logf("second StartUtt: %v", err)
}

func TestAppendHypNoAlloc(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.raw", testData+"/goforward.gram")
	d, err := NewDecoder([]string{"-hmm", modelRoot + "/en-us", "-jsgf", testData + "/goforward.gram", "-dict", modelRoot + "/cmudict-en-us.dict"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	if err := d.ProcessRaw(readRaw(t, testData+"/goforward.raw")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = d.AppendHyp(buf[:0]) }); n != 0 {
		t.Errorf("AppendHyp: %v allocations per call, want 0", n)
	}
	if len(buf) == 0 {
		t.Error("no partial hypothesis")
	}
	_ = d.EndUtt()
}

// TestCMNGetSet: a new decoder's mean is the model's -cmninit (feat.params
// wins over a -cmninit flag, which is why SetCMN exists); SetCMN replaces it,
// an utterance moves it, and a vector of the wrong length is refused.
func TestCMNGetSet(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.raw")
	d, err := NewDecoder(lmArgs("-fwdflat", "no", "-bestpath", "no", "-cmninit", "1,2,3,4,5,6,7,8,9,10,11,12,13"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := d.CMNLen(); n != 13 {
		t.Fatalf("CMNLen %d, want 13", n)
	}
	if m := d.CMN(nil); m[0] != 41 {
		t.Errorf("starting mean %v: want the model's (41.00, -5.29, ...)", m)
	}
	want := []float32{30, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if err := d.SetCMN(want); err != nil {
		t.Fatal(err)
	}
	if m := d.CMN(nil); m[0] != 30 || m[12] != 10 {
		t.Errorf("after SetCMN: %v, want %v", m, want)
	}
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	if err := d.ProcessRaw(readRaw(t, testData+"/goforward.raw")); err != nil {
		t.Fatal(err)
	}
	if err := d.EndUtt(); err != nil {
		t.Fatal(err)
	}
	if m := d.CMN(nil); m[0] == 30 {
		t.Errorf("mean did not move over an utterance: %v", m)
	}
	if err := d.SetCMN(want[:3]); !errors.Is(err, ErrConfig) {
		t.Errorf("3 values: have %v, want ErrConfig", err)
	}
}

// TestCMNWeightRefresh: within a short utterance pocketsphinx leaves the
// mean where it started; RefreshCMN moves it to the running estimate, and
// the lighter the start mean's weight (SetCMNWeight), the further.
func TestCMNWeightRefresh(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.raw")
	pcm := readRaw(t, testData+"/goforward.raw")[:16000] // 1 s: under pocketsphinx's own 3 s update
	start := []float32{30, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	moved := func(weight int, refresh bool) float32 {
		d, err := NewDecoder(lmArgs("-fwdflat", "no", "-bestpath", "no"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.SetCMN(start); err != nil {
			t.Fatal(err)
		}
		if weight > 0 {
			if err := d.SetCMNWeight(weight); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.StartUtt(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = d.EndUtt() }()
		if err := d.ProcessRaw(pcm); err != nil {
			t.Fatal(err)
		}
		if refresh {
			d.RefreshCMN()
		}
		m := d.CMN(nil)
		var dist float32
		for i := range m {
			dist += (m[i] - start[i]) * (m[i] - start[i])
		}
		return dist
	}
	if d := moved(0, false); d != 0 {
		t.Errorf("without RefreshCMN the mean moved within 1 s (distance² %g): pocketsphinx updates it only every 3 s", d)
	}
	heavy, light := moved(0, true), moved(50, true)
	if heavy <= 0 || light <= heavy {
		t.Errorf("distance² moved after 1 s: weight 500 %g, weight 50 %g; want 0 < the first < the second", heavy, light)
	}
	d, err := NewDecoder(lmArgs())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetCMNWeight(0); !errors.Is(err, ErrConfig) {
		t.Errorf("weight 0: %v, want ErrConfig", err)
	}
	_ = d.Close()
	if err := d.SetCMNWeight(10); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	d.RefreshCMN() // no-op after Close
}

// TestNBest: the n-best list of goforward holds the best hypothesis first,
// distinct texts and at most n entries (A* emits them roughly, not
// strictly, in score order); a
// second call on the same utterance gives the same list (the search is
// freed and rebuilt, nothing kept between calls).
func TestNBest(t *testing.T) {
	requireFiles(t, modelRoot+"/en-us/mdef", testData+"/goforward.raw")
	pcm := readRaw(t, testData+"/goforward.raw")
	d, err := NewDecoder(lmArgs("-fwdflat", "no", "-bestpath", "yes"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.StartUtt(); err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(pcm); off += 320 {
		if err := d.ProcessRaw(pcm[off:min(off+320, len(pcm))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.EndUtt(); err != nil {
		t.Fatal(err)
	}
	list, err := d.NBest(8, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) < 2 || len(list) > 8 {
		t.Fatalf("have %d hypotheses, want 2..8: %+v", len(list), list)
	}
	if list[0].Text != "go forward ten meters" {
		t.Errorf("best: have %q", list[0].Text)
	}
	seen := map[string]bool{}
	for _, h := range list {
		if seen[h.Text] {
			t.Errorf("%q twice", h.Text)
		}
		seen[h.Text] = true
		if h.Score >= 0 || h.Score < list[0].Score-1 {
			t.Errorf("%q: score %g, want a log score near the best's %g", h.Text, h.Score, list[0].Score)
		}
	}
	again, err := d.NBest(8, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(list) || again[0] != list[0] {
		t.Errorf("second call: have %+v, want %+v", again, list)
	}
	for _, h := range list {
		t.Logf("%10.4f  %s", h.Score, h.Text)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NBest(8, 200); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: have %v, want ErrClosed", err)
	}
}
