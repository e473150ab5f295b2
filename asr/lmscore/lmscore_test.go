package lmscore

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/voxpipe/voxpipe/internal/testenv"
)

func openModel(t *testing.T, name string) *Scorer {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(t), "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s absent", p)
	}
	s, err := Open(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestLogProbs: a sentence scores above the same words scrambled and above
// a near-homophone the recogniser confuses with it, every score is a finite
// negative log-probability, and scoring is deterministic.
func TestLogProbs(t *testing.T) {
	for _, model := range []string{"voxpipe-rescore-q8_0.gguf", "voxpipe-eou-q8_0.gguf", "voxpipe-demo-q8_0.gguf"} {
		t.Run(model, func(t *testing.T) {
			s := openModel(t, model)
			texts := []string{
				"what is the weather like today",
				"weather the like is today what",
				"what is the whether like to day",
				"",
				"what is the weather like to day",
			}
			lp, err := s.LogProbs(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range lp {
				t.Logf("%8.2f %q", v, texts[i])
				if !(v < 0) || math.IsInf(v, 0) {
					t.Errorf("%q: log P %g, want finite and negative", texts[i], v)
				}
			}
			if lp[0] <= lp[1] || lp[0] <= lp[2] {
				t.Errorf("the sentence (%g) does not beat the scrambled (%g) and misheard (%g) ones", lp[0], lp[1], lp[2])
			}
			// Alone, each text is computed from scratch; together, the
			// shared prefixes come from the cache: the same figures.
			for i, text := range texts {
				alone, err := s.LogProbs(context.Background(), []string{text})
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(alone[0]-lp[i]) > 1e-3 {
					t.Errorf("%q alone: %g, in the list %g", text, alone[0], lp[i])
				}
			}
		})
	}
}

func TestLogProbsCancelled(t *testing.T) {
	s := openModel(t, "voxpipe-rescore-q8_0.gguf")
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if _, err := s.LogProbs(ctx, []string{"hello there"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("have %v, want context.DeadlineExceeded", err)
	}
}
