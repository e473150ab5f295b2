//go:build cgo && amd64

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestF16MatchesF16C compares the Go conversions with the F16C instructions: all 65536 halves one
// way, and every half's neighbourhood plus a million random floats the other way.
func TestF16MatchesF16C(t *testing.T) {
	if detected < levelAVX2 {
		t.Skip("F16C unavailable on this CPU")
	}
	for h := 0; h < 1<<16; h++ {
		g, w := F16ToF32(uint16(h)), hwF16ToF32(uint16(h))
		if math.Float32bits(g) != math.Float32bits(w) {
			t.Fatalf("F16ToF32(%#04x) = %#08x, F16C %#08x", h, math.Float32bits(g), math.Float32bits(w))
		}
		for _, f := range []float32{g, math.Nextafter32(g, 0), math.Nextafter32(g, float32(math.Inf(1)))} {
			if a, b := F32ToF16(f), hwF32ToF16(f); a != b {
				t.Fatalf("F32ToF16(%v) = %#04x, F16C %#04x", f, a, b)
			}
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 1_000_000; i++ {
		f := math.Float32frombits(rng.Uint32())
		if a, b := F32ToF16(f), hwF32ToF16(f); a != b {
			t.Fatalf("F32ToF16(%v bits %#08x) = %#04x, F16C %#04x", f, math.Float32bits(f), a, b)
		}
	}
}
