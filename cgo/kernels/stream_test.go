package kernels

import (
	"math/rand/v2"
	"testing"
)

func TestReadStreamMatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, n := range []int{0, 1, 127, 128, 129, 4096, 4096 + 77} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want := genericReadStream(p)
		if got := ReadStream(p); got != want {
			t.Errorf("n=%d: ReadStream %#x, generic %#x", n, got, want)
		}
		if n > 0 {
			p[n-1] ^= 0x80 // every byte counts
			if ReadStream(p) == want {
				t.Errorf("n=%d: flipping the last byte did not change the result", n)
			}
		}
	}
}
