package engine

import (
	"path/filepath"
	"testing"
)

// TestSmolLM3Fixtures compares the smollm3 forward pass (llama layers, RoPE
// left out of every fourth) with llama.cpp's on testdata/smollm3 (README.md
// there), on every kernel tier this CPU has. Measured max |Δlogit| 1.5e-7
// (F32) and 4.5e-8 (Q8_0), 64 greedy ids identical; with RoPE on layer 3 as
// well the logits miss by 1.3e-3.
func TestSmolLM3Fixtures(t *testing.T) {
	dir := filepath.Join("testdata", "smollm3")
	onTiers(t, simdTiers, func(tier string) {
		for _, c := range []struct {
			name string
			tol  float64
		}{
			{"tiny-smollm3-f32", 1e-5},
			{"tiny-smollm3-q8_0", 1e-5},
		} {
			t.Run(tier+"/"+c.name, func(t *testing.T) { fixtureCase(t, dir, c.name, true, false, c.tol) })
		}
	})
}
