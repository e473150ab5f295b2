package turn

import (
	"context"
	"fmt"
	"math"

	"github.com/voxpipe/voxpipe/llm/engine"
)

// Scorer scores how complete a partial transcript reads, in [0, 1]. It is
// safe for concurrent use; key names the caller's utterance stream (a
// session), so that a scorer can reuse work between growing partials.
type Scorer interface {
	Score(ctx context.Context, key, text string) (float64, error)
}

// LM is the language-model scorer: P(<|im_end|> | "<|im_start|>user\n" +
// partial) from a GGUF model in an engine of its own.
type LM struct {
	eng   *engine.Engine
	owned bool // Close closes eng
	head  []int32
	end   int32
}

// OpenLM loads the end-of-utterance model at path into its own engine, with
// threads worker threads (1 is plenty: a partial costs about a millisecond)
// and room for sessions conversation caches.
func OpenLM(path string, threads, sessions int) (*LM, error) {
	eng, err := engine.Open(engine.ScoringConfig(path, threads, max(8, sessions), max(4, sessions), 64<<20))
	if err != nil {
		return nil, fmt.Errorf("turn: end-of-utterance model: %w", err)
	}
	s, err := NewLM(eng)
	if err != nil {
		eng.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// NewLM scores with an engine the caller owns (and closes). Its model must
// use ChatML's <|im_start|> and <|im_end|> tokens.
func NewLM(eng *engine.Engine) (*LM, error) {
	head, end, err := eng.UserTurn()
	if err != nil {
		return nil, fmt.Errorf("turn: end-of-utterance model: %w", err)
	}
	return &LM{eng: eng, head: head, end: end}, nil
}

// Score implements Scorer. An empty text scores 0.
func (s *LM) Score(ctx context.Context, key, text string) (float64, error) {
	text = Normalize(text)
	if text == "" {
		return 0, nil
	}
	ids := s.eng.Tokenizer().Encode(text, false, false)
	if room := s.eng.ContextSize() - len(s.head); len(ids) > room {
		ids = ids[len(ids)-room:]
	}
	prompt := make([]int32, 0, len(s.head)+len(ids))
	prompt = append(append(prompt, s.head...), ids...)
	lp, err := s.eng.NextLogProb(ctx, "eou/"+key, prompt, s.end)
	if err != nil {
		return 0, err
	}
	return math.Exp(lp), nil
}

// Close releases the engine when OpenLM made it.
func (s *LM) Close() error {
	if s.owned {
		return s.eng.Close()
	}
	return nil
}
