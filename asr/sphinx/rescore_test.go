package sphinx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/asr"
	"github.com/voxpipe/voxpipe/asr/lmscore"
	"github.com/voxpipe/voxpipe/internal/testenv"
)

// fakeScorer gives every text containing favour a log-probability of 0 and
// the rest -1000, or fails, or waits for its context.
type fakeScorer struct {
	favour string
	fail   error
	block  bool

	mu    sync.Mutex
	texts []string
}

func (f *fakeScorer) LogProbs(ctx context.Context, texts []string) ([]float64, error) {
	f.mu.Lock()
	f.texts = append(f.texts[:0], texts...)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.fail != nil {
		return nil, f.fail
	}
	out := make([]float64, len(texts))
	for i, t := range texts {
		if !strings.Contains(t, f.favour) {
			out[i] = -1000
		}
	}
	return out, nil
}

func TestRescorePick(t *testing.T) {
	r := Rescored{FirstPass: "a b", Candidates: []Candidate{
		{Text: "a b", Lattice: -1.0, LogProb: -20, Words: 2},
		{Text: "a c", Lattice: -1.1, LogProb: -10, Words: 2},
		{Text: "a c d", Lattice: -1.15, LogProb: -14, Words: 3},
	}}
	for _, tc := range []struct {
		weight, bonus float64
		want          int
	}{
		{0, 0, 0},       // the lattice alone
		{0.005, 0, 0},   // -1.1 vs -1.15 vs -1.12
		{0.02, 0, 1},    // -1.4 vs -1.3 vs -1.43
		{0.02, 0.2, 2},  // the extra word pays
		{0.001, 0.3, 2}, // -0.42 vs -0.51 vs -0.264
	} {
		if have := r.Pick(tc.weight, tc.bonus); have != tc.want {
			t.Errorf("weight %g bonus %g: have %d, want %d", tc.weight, tc.bonus, have, tc.want)
		}
	}
	if have := (Rescored{}).Pick(1, 1); have != -1 {
		t.Errorf("no candidates: have %d, want -1", have)
	}
}

// TestRescoreFinal decodes goforward with a scorer that favours another
// n-best entry: the final follows the scorer at a high weight and stays the
// first pass's at weight 0, when the scorer fails and when it runs past the
// timeout; partials are never rescored.
func TestRescoreFinal(t *testing.T) {
	requireModel(t)
	requireTestData(t)
	pcm := loadSet(t, "goforward")[0].pcm
	const firstPass = "go forward ten meters"
	for _, tc := range []struct {
		name    string
		scorer  *fakeScorer
		weight  float64
		timeout time.Duration
		rescore bool // the final is another candidate
		errs    bool
	}{
		{"follows the scorer", &fakeScorer{favour: "for word"}, 1, 0, true, false},
		{"weight 0", &fakeScorer{favour: "for word"}, 0, 0, false, false},
		{"scorer fails", &fakeScorer{favour: "readers", fail: errors.New("boom")}, 1, 0, false, true},
		{"timeout", &fakeScorer{block: true}, 1, 20 * time.Millisecond, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.PoolSize = 0
			var seen []Rescored
			cfg.Rescore = Rescore{Scorer: tc.scorer, NBest: 20, Weight: tc.weight, Timeout: tc.timeout,
				Observe: func(r Rescored) { seen = append(seen, r) }}
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			res, err := decode(context.Background(), r, pcm)
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 1 {
				t.Fatalf("observed %d rescorings, want 1", len(seen))
			}
			o := seen[0]
			if o.FirstPass != firstPass || len(o.Candidates) < 3 || o.Candidates[0].Text != firstPass {
				t.Fatalf("rescored %+v: want the first pass %q first among several", o, firstPass)
			}
			if (o.Err != nil) != tc.errs {
				t.Errorf("scorer error: have %v, want one: %v", o.Err, tc.errs)
			}
			if tc.rescore {
				if !strings.Contains(res.final, tc.scorer.favour) || o.Chosen <= 0 {
					t.Errorf("final %q (chosen %d): want the candidate with %q", res.final, o.Chosen, tc.scorer.favour)
				}
			} else if res.final != firstPass {
				t.Errorf("final: have %q, want the first pass's %q", res.final, firstPass)
			}
			for _, p := range res.partials {
				if strings.Contains(p, "for word") {
					t.Errorf("partial %q was rescored", p)
				}
			}
		})
	}
}

func TestRescoreConfig(t *testing.T) {
	requireModel(t)
	cfg := DefaultConfig()
	cfg.Rescore = Rescore{Scorer: &fakeScorer{}, NBest: 1}
	if _, err := New(cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("NBest 1: have %v, want ErrConfig", err)
	}
}

// withRescore returns DefaultConfig with n-best rescoring by the shipped
// rescoring model at the settings docs/asr.md measured (the
// scorer is closed when the test ends).
func withRescore(t *testing.T) Config {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(t), "models", "voxpipe-rescore-q8_0.gguf")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s absent", p)
	}
	sc, err := lmscore.Open(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Close() })
	cfg := DefaultConfig()
	cfg.Rescore = Rescore{Scorer: sc, NBest: 5, Weight: 0.0025, WordBonus: -0.01} // configs/default.yaml's
	return cfg
}

// TestRescoredSets: with n-best rescoring on, the package sets and the TTS
// loop may not get worse by more than 2 points than without (measured
// without, when rescoring was added: cards 23.8%, LibriVox 25.4%, loop 16.1%; with: see
// the log and docs/asr.md). With the shipped weight and bonus
// (the test had used 0.002 and 0) and the loop really rescored (it had
// decoded with DefaultConfig): cards 23.8%, LibriVox 26.8%, loop 14.6%.
func TestRescoredSets(t *testing.T) {
	requireModel(t)
	for _, tc := range []struct {
		set    string
		maxWER float64
	}{
		{"cards", 0.258},
		{"librivox", 0.274},
	} {
		t.Run(tc.set, func(t *testing.T) {
			utts := loadSet(t, tc.set)
			r, err := New(withRescore(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			sess := r.NewSession(asr.SessionOptions{InputRate: SampleRate})
			defer sess.Close()
			errs, words, log := werOver(t, sess, utts)
			wer := float64(errs) / float64(words)
			t.Logf("rescored WER %d/%d = %.1f%%", errs, words, 100*wer)
			if wer > tc.maxWER {
				t.Errorf("rescored WER %.1f%% above %.1f%%:\n%s", 100*wer, 100*tc.maxWER, strings.Join(log, "\n"))
			}
		})
	}
	t.Run("tts-loop", func(t *testing.T) {
		testTTSLoop(t, withRescore(t), 0.181)
	})
}
