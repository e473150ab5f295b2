// Package lmscore scores candidate transcripts with an in-process GGUF
// language model (llm/engine): log P(text) as a user's message, the form
// the recogniser's n-best rescoring (asr/sphinx.Rescore) takes.
package lmscore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/voxpipe/voxpipe/llm/engine"
)

// Scorer gives log P(text <|im_end|> | "<|im_start|>user\n") under a
// ChatML model: how likely the words are as a whole user turn. It
// implements asr/sphinx.TextScorer and is safe for concurrent use (the
// engine's scheduler serialises the work).
type Scorer struct {
	eng   *engine.Engine
	owned bool
	head  []int32
	end   int32
}

// Open loads the model at path into an engine of its own with threads
// worker threads (1 keeps rescoring on one core).
func Open(path string, threads int) (*Scorer, error) {
	eng, err := engine.Open(engine.ScoringConfig(path, threads, 16, 1, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("lmscore: %w", err)
	}
	s, err := New(eng)
	if err != nil {
		_ = eng.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New scores with an engine the caller owns and closes. Its model must have
// ChatML's <|im_start|> and <|im_end|> tokens.
func New(eng *engine.Engine) (*Scorer, error) {
	head, end, err := eng.UserTurn()
	if err != nil {
		return nil, fmt.Errorf("lmscore: %w", err)
	}
	return &Scorer{eng: eng, head: head, end: end}, nil
}

// LogProbs returns, for each text, the natural-log probability of its tokens
// and the end-of-message token after the user-turn header. An empty text
// scores the end token alone. Texts longer than the context keep their end.
// The texts are scored in sorted order on one cached sequence, so a prefix
// that several share (an n-best list's usually do) is computed once.
func (s *Scorer) LogProbs(ctx context.Context, texts []string) ([]float64, error) {
	tok := s.eng.Tokenizer()
	room := s.eng.ContextSize() - len(s.head) - 1
	seqs := make([][]int32, len(texts))
	order := make([]int, len(texts))
	for i, t := range texts {
		ids := tok.Encode(strings.TrimSpace(t), false, false)
		if len(ids) > room {
			ids = ids[len(ids)-room:]
		}
		seq := make([]int32, 0, len(s.head)+len(ids)+1)
		seqs[i] = append(append(append(seq, s.head...), ids...), s.end)
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return slices.Compare(seqs[order[a]], seqs[order[b]]) < 0 })
	out := make([]float64, len(texts))
	var prev []int32
	var prevLP []float64 // prevLP[j]: log P(prev[j] | prev[:j]), from len(head) on
	for _, i := range order {
		seq := seqs[i]
		from := len(s.head)
		for from < min(len(prev), len(seq)-1) && prev[from] == seq[from] {
			from++
		}
		lps, err := s.eng.ScoreFrom(ctx, scoreKey, seq, from)
		if err != nil {
			return nil, fmt.Errorf("lmscore: %w", err)
		}
		cur := make([]float64, len(seq))
		if from > len(s.head) { // only after a previous text
			copy(cur[len(s.head):from], prevLP[len(s.head):from])
		}
		copy(cur[from:], lps)
		for _, lp := range cur[len(s.head):] {
			out[i] += lp
		}
		prev, prevLP = seq, cur
	}
	return out, nil
}

// scoreKey names the engine's cached sequence.
const scoreKey = "lmscore"

// Close releases the engine when Open made it.
func (s *Scorer) Close() error {
	if s.owned {
		return s.eng.Close()
	}
	return nil
}
