package sphinx

import (
	"context"
	"fmt"
	"strings"
	"time"

	csphinx "github.com/voxpipe/voxpipe/cgo/sphinx"
)

// TextScorer scores candidate transcripts under a language model: the
// natural-log probability of each text, in order. It is safe for concurrent
// use. asr/lmscore implements it with an in-process GGUF model.
type TextScorer interface {
	LogProbs(ctx context.Context, texts []string) ([]float64, error)
}

// Rescore configures n-best rescoring of the final hypothesis: at the end
// of an utterance the lattice's NBest distinct word strings are scored by
// Scorer, and the final is the candidate with the highest
//
//	lattice score + Weight × log P(text) + WordBonus × words
//
// (the lattice score is pocketsphinx's A* path score, acoustic plus its own
// trigram LM, csphinx.NBestHyp.Score). Partials are not rescored. When the
// scorer fails or takes longer than Timeout, the final is the first pass's.
type Rescore struct {
	Scorer    TextScorer // nil: off
	NBest     int        // candidates to score (at least 2 for any effect)
	MaxPaths  int        // A* paths to draw them from; 0 = 10 × NBest
	Weight    float64
	WordBonus float64
	Timeout   time.Duration // 0 = no limit but the stream's context

	// Observe, when set, is called on the Close goroutine with every
	// rescored utterance's candidates (benchmarks use it to try other
	// weights on the same lists). It must not keep the slice.
	Observe func(Rescored)
}

// Candidate is one n-best entry with its scores.
type Candidate struct {
	Text    string
	Lattice float64 // csphinx.NBestHyp.Score
	LogProb float64 // the scorer's
	Words   int
}

// Rescored is one utterance's n-best list as rescoring saw it.
type Rescored struct {
	FirstPass  string        // the final without rescoring (the best-path pass's)
	Candidates []Candidate   // FirstPass first, then the rest of the n-best list; LogProb 0 if Err
	Chosen     int           // index into Candidates, -1: FirstPass was kept
	Err        error         // the scorer's error or timeout
	NBestTook  time.Duration // the A* search
	Took       time.Duration // the A* search and the scoring
}

// Pick returns the index of the candidate with the highest combined score
// under weight and bonus (-1 when there are none).
func (r Rescored) Pick(weight, bonus float64) int {
	best, bi := 0.0, -1
	for i, c := range r.Candidates {
		v := c.Lattice + weight*c.LogProb + bonus*float64(c.Words)
		if bi < 0 || v > best || (v == best && c.Text == r.FirstPass) {
			best, bi = v, i
		}
	}
	return bi
}

func (c Rescore) validate() error {
	if c.Scorer == nil {
		return nil
	}
	if c.NBest < 2 || c.NBest > 100 {
		return fmt.Errorf("%w: Rescore.NBest %d: want 2..100", ErrConfig, c.NBest)
	}
	if c.MaxPaths < 0 || c.Timeout < 0 || c.Weight < 0 {
		return fmt.Errorf("%w: Rescore: negative MaxPaths, Timeout or Weight", ErrConfig)
	}
	return nil
}

// rescore returns the final text of an ended utterance on d: firstPass, or
// the n-best candidate the scorer prefers.
func (r *Recognizer) rescore(ctx context.Context, d *csphinx.Decoder, firstPass string) string {
	rc := r.rescoreCfg
	if rc.Scorer == nil || strings.TrimSpace(firstPass) == "" {
		return firstPass
	}
	t0 := time.Now()
	paths := rc.MaxPaths
	if paths == 0 {
		paths = 10 * rc.NBest
	}
	list, err := d.NBest(rc.NBest, paths)
	out := Rescored{FirstPass: firstPass, Chosen: -1, Err: err, NBestTook: time.Since(t0)}
	if err == nil && len(list) > 1 {
		// The best-path pass's final competes with the list's best
		// lattice score: A*'s ranking and the best-path pass's differ,
		// and with weight 0 rescoring must keep the first pass's final.
		top := list[0].Score
		for _, h := range list {
			top = max(top, h.Score)
		}
		found := false
		for i := range list {
			if list[i].Text == firstPass {
				list[i].Score, found = top, true
			}
		}
		if !found {
			list = append([]csphinx.NBestHyp{{Text: firstPass, Score: top}}, list...)
		}
		texts := make([]string, len(list))
		out.Candidates = make([]Candidate, len(list))
		for i, h := range list {
			texts[i] = h.Text
			out.Candidates[i] = Candidate{Text: h.Text, Lattice: h.Score, Words: len(strings.Fields(h.Text))}
		}
		sctx := ctx
		if rc.Timeout > 0 {
			var cancel context.CancelFunc
			sctx, cancel = context.WithTimeout(ctx, rc.Timeout)
			defer cancel()
		}
		var lps []float64
		lps, out.Err = rc.Scorer.LogProbs(sctx, texts)
		if out.Err == nil && len(lps) != len(texts) {
			out.Err = fmt.Errorf("sphinx: rescore: %d scores for %d texts", len(lps), len(texts))
		}
		if out.Err == nil {
			for i := range lps {
				out.Candidates[i].LogProb = lps[i]
			}
			out.Chosen = out.Pick(rc.Weight, rc.WordBonus)
		}
	}
	out.Took = time.Since(t0)
	if rc.Observe != nil {
		rc.Observe(out)
	}
	if out.Chosen < 0 {
		return firstPass
	}
	return out.Candidates[out.Chosen].Text
}
