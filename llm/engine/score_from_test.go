package engine

import (
	"context"
	"math"
	"testing"

	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// TestScoreFromMatchesScore: ScoreFrom gives Score's figures whether the
// key's cache holds nothing, a shared prefix, a longer sequence or the same
// one, and rejects a from outside the tokens.
func TestScoreFromMatchesScore(t *testing.T) {
	e := openTiny(t, defaultTiny("llama", gguf.TypeF32), nil)
	ctx := context.Background()
	for i, ids := range [][]int32{
		{1, 5, 9, 13, 2, 7, 7, 3},
		{1, 5, 9, 13, 4, 4},       // shares 4 tokens with the cache
		{1, 5, 9, 13, 4, 4, 8, 2}, // extends it
		{1, 5},                    // shorter than the cache
		{1, 5},                    // the same again
	} {
		want, _, err := e.Score(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for from := 1; from < len(ids); from += 2 {
			have, err := e.ScoreFrom(ctx, "k", ids, from)
			if err != nil {
				t.Fatal(err)
			}
			if len(have) != len(ids)-from {
				t.Fatalf("case %d from %d: %d log-probs, want %d", i, from, len(have), len(ids)-from)
			}
			for j, v := range have {
				if math.Abs(v-want[from-1+j]) > 1e-4 {
					t.Errorf("case %d from %d, token %d: have %g, want %g", i, from, from+j, v, want[from-1+j])
				}
			}
		}
	}
	for _, from := range []int{0, 2} {
		if _, err := e.ScoreFrom(ctx, "k", []int32{1, 5}, from); err == nil {
			t.Errorf("from %d of 2 tokens: want an error", from)
		}
	}
}
