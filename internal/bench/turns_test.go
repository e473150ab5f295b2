package bench

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/pipeline/audio"
)

// A --real-dir recording becomes one real turn: resampled to 16 kHz, cut
// after its last audible sample, with 300 ms in front.
func TestRecordingItem(t *testing.T) {
	const rate = 8000
	pcm := make([]int16, rate) // 0.5 s of tone, then 0.5 s of silence
	for i := range rate / 2 {
		pcm[i] = int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate))
	}
	path := filepath.Join(t.TempDir(), "prompt.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := audio.EncodeWAV(f, pcm, rate, 1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	it, err := recordingItem(path, rand.New(rand.NewPCG(1, 2)))
	if err != nil || it == nil {
		t.Fatalf("recordingItem: %v, %v", it, err)
	}
	if it.Name != "real-prompt" || it.Kind != "real" {
		t.Errorf("name %q kind %q", it.Name, it.Kind)
	}
	// 300 ms lead + 500 ms of tone at 16 kHz; the trailing silence is gone.
	if want := benchRate * 8 / 10; it.speechEnd < want-benchRate/50 || it.speechEnd > want+benchRate/50 || it.speechEnd != len(it.pcm) {
		t.Errorf("speech end %d of %d samples, want about %d", it.speechEnd, len(it.pcm), want)
	}

	silent := filepath.Join(t.TempDir(), "silent.wav")
	f, _ = os.Create(silent)
	_ = audio.EncodeWAV(f, make([]int16, rate), rate, 1)
	f.Close()
	if it, err := recordingItem(silent, rand.New(rand.NewPCG(1, 2))); err != nil || it != nil {
		t.Errorf("a silent recording gave %v, %v; want nothing", it, err)
	}
	if _, err := recordingItem(filepath.Join(t.TempDir(), "absent.wav"), rand.New(rand.NewPCG(1, 2))); !os.IsNotExist(err) {
		t.Errorf("absent file: %v, want not-exist", err)
	}
}

// A run with nothing to measure for a figure (--only real: no complete
// questions) still prints its JSON report.
func TestTurnsReportWithoutCompleteQuestions(t *testing.T) {
	items := []benchItem{{Name: "real-a", Kind: "real"}}
	heard := 250.0
	runs := []itemRun{{Item: "real-a", Mode: "semantic", HeardMs: &heard}, {Item: "real-a", Mode: "silence", CutOff: true}}
	rep := turnsReport{Semantic: summarise("semantic", items, runs), Silence: summarise("silence", items, runs)}
	rep.Semantic.zeroNaN()
	rep.Silence.zeroNaN()
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	if rep.Semantic.RealHeardP50 != 250 || rep.Silence.RealCutOffs != 1 || rep.Semantic.HeardP50Ms != 0 {
		t.Errorf("semantic %+v, silence %+v", rep.Semantic, rep.Silence)
	}
}

// Short everyday turns get their own heard figures; the complete questions'
// are not mixed with them.
func TestTurnsReportShortTurns(t *testing.T) {
	items := []benchItem{{Name: "complete-00", Kind: "complete"}, {Name: "short-00", Kind: "short"}, {Name: "short-01", Kind: "short"}}
	ms := func(v float64) *float64 { return &v }
	runs := []itemRun{
		{Item: "complete-00", Mode: "semantic", HeardMs: ms(200)}, {Item: "complete-00", Mode: "silence", HeardMs: ms(560)},
		{Item: "short-00", Mode: "semantic", HeardMs: ms(1300)}, {Item: "short-00", Mode: "silence", HeardMs: ms(570)},
		{Item: "short-01", Mode: "semantic"}, {Item: "short-01", Mode: "silence", HeardMs: ms(580)},
	}
	sem := summarise("semantic", items, runs)
	if sem.HeardP50Ms != 200 || sem.HeardN != 1 || sem.ShortHeardP50 != 1300 || sem.ShortN != 1 || sem.NoAnswer != 1 {
		t.Errorf("semantic %+v", sem)
	}
	if sil := summarise("silence", items, runs); sil.ShortHeardP95 != 580 || sil.ShortN != 2 || sil.HeardP50Ms != 560 {
		t.Errorf("silence %+v", sil)
	}
}

// A paused item is one synthesized sentence cut at the word mark after its
// first part: both parts are speech, together about the whole sentence
// (less the synthesizer's own gap at a comma), split where the words are.
func TestSpeakPaused(t *testing.T) {
	voices, err := benchVoices()
	if err != nil {
		t.Skipf("no TTS voice: %v", err)
	}
	ctx := context.Background()
	for _, v := range voices {
		for _, p := range [][2]string{{"Set an alarm for", "six thirty in the morning."}, {"If it rains tomorrow,", "should I take an umbrella to work?"}} {
			a, b, err := speakPaused(ctx, v.synth, p[0], p[1])
			if err != nil {
				t.Fatalf("%s %q: %v", v.name, p, err)
			}
			whole, err := speak(ctx, v.synth, p[0]+" "+p[1])
			if err != nil {
				t.Fatal(err)
			}
			// Each part's audible span may keep a few ms of its edges.
			n := len(a) + len(b)
			if n > len(whole)+benchRate/50 || n < len(whole)*7/10 {
				t.Errorf("%s %q: parts %d + %d samples, the whole sentence %d", v.name, p, len(a), len(b), len(whole))
			}
			if f := float64(len(a)) / float64(n); f < 0.2 || f > 0.6 {
				t.Errorf("%s %q: the first part is %.2f of the speech; the cut is not after %q", v.name, p, f, p[0])
			}
		}
	}
}

// Paused sentences of two rounds: the cut-offs are counted per round and
// paired between the servers, which heard the same audio.
func TestTurnsReportRoundsAndPairs(t *testing.T) {
	items := []benchItem{
		{Name: "paused-00", Kind: "paused"}, {Name: "paused-01", Kind: "paused"},
		{Name: "paused-00", Kind: "paused", Round: 1}, {Name: "paused-01", Kind: "paused", Round: 1},
	}
	runs := []itemRun{
		{Item: "paused-00", Mode: "semantic", CutOff: true}, {Item: "paused-00", Mode: "silence", CutOff: true},
		{Item: "paused-01", Mode: "silence", CutOff: true}, {Item: "paused-01", Mode: "semantic"},
		{Item: "paused-00", Round: 1, Mode: "semantic", CutOff: true}, {Item: "paused-00", Round: 1, Mode: "silence"},
		{Item: "paused-01", Round: 1, Mode: "semantic"}, {Item: "paused-01", Round: 1, Mode: "silence", CutOff: true},
	}
	sem := summarise("semantic", items, runs)
	if sem.CutOffs != 2 || sem.Paused != 4 || len(sem.CutOffsPerRound) != 2 || sem.CutOffsPerRound[0] != 1 || sem.CutOffsPerRound[1] != 1 {
		t.Errorf("semantic %+v", sem)
	}
	if lo, hi := wilson(2, 4); sem.CutOffRateCI != [2]float64{lo, hi} {
		t.Errorf("cut-off interval %v, want %g-%g", sem.CutOffRateCI, lo, hi)
	}
	if sil := summarise("silence", items, runs); sil.CutOffs != 3 || sil.CutOffsPerRound[1] != 1 {
		t.Errorf("silence %+v", sil)
	}
	want := pairedCutOffs{Both: 1, SemanticOnly: 1, BaselineOnly: 2, McNemarP: 1}
	if p := pairCutOffs(items, runs); p != want {
		t.Errorf("pairs %+v, want %+v", p, want)
	}
}

// The text report names only the kinds the run had (--only paused prints
// no NaN latencies) and puts each figure's 95% interval beside it.
func TestPrintSummary(t *testing.T) {
	items := []benchItem{{Name: "paused-00", Kind: "paused"}, {Name: "paused-01", Kind: "paused"}}
	runs := []itemRun{
		{Item: "paused-00", Mode: "semantic", CutOff: true}, {Item: "paused-00", Mode: "silence"},
		{Item: "paused-01", Mode: "semantic"}, {Item: "paused-01", Mode: "silence"},
	}
	var b strings.Builder
	printSummary(&b, summarise("semantic", items, runs))
	got := b.String()
	if strings.Contains(got, "NaN") || strings.Contains(got, "heard") || !strings.Contains(got, "false cut-offs 1/2 (50.0% [9.5-90.5], per round [1])") {
		t.Errorf("report %q", got)
	}
	ms := func(v float64) *float64 { return &v }
	items = []benchItem{{Name: "complete-00", Kind: "complete"}}
	runs = []itemRun{{Item: "complete-00", Mode: "semantic", HeardMs: ms(210)}, {Item: "complete-00", Mode: "silence", HeardMs: ms(560)}}
	b.Reset()
	printSummary(&b, summarise("semantic", items, runs))
	if got := b.String(); !strings.Contains(got, "heard p50 210 ms [210-210]  p95 210 ms [210-max 210] (n 1, 0 without answer)") || strings.Contains(got, "cut-offs") {
		t.Errorf("report %q", got)
	}
}
