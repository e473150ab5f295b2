package kernels

import (
	"math/rand"
	"testing"
)

// TestMatVecF32LdMatchesPacked checks that MatVecF32Ld and MatMulF32Ld, reading the first cols columns of
// wider rows, give bit for bit what MatVecF32 gives on those columns packed.
func TestMatVecF32LdMatchesPacked(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, tier := range []bool{false, true} {
		UseGeneric(tier)
		for _, cols := range []int{8, 40, 64, 256} {
			const rows, ldw = 13, 264
			w := make([]float32, rows*ldw)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			packed := make([]float32, rows*cols)
			for r := 0; r < rows; r++ {
				copy(packed[r*cols:(r+1)*cols], w[r*ldw:])
			}
			want := make([]float32, rows)
			got := make([]float32, rows)
			MatVecF32(want, packed, cols, 0, rows, x)
			MatVecF32Ld(got, w[:(rows-1)*ldw+cols], ldw, cols, 0, rows, x)
			for r := range want {
				if got[r] != want[r] {
					t.Fatalf("generic=%v cols %d row %d: got %v want %v", tier, cols, r, got[r], want[r])
				}
			}
			// MatMulF32Ld over activation rows ldx apart: each (row, x row)
			// pair equals MatVecF32 on the packed data.
			const n, ldx = 5, 272
			xs := make([]float32, (n-1)*ldx+cols)
			for i := range xs {
				xs[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, n*rows)
			MatMulF32Ld(out, rows, w[:(rows-1)*ldw+cols], ldw, cols, 0, rows, xs, ldx, n)
			for j := 0; j < n; j++ {
				MatVecF32(want, packed, cols, 0, rows, xs[j*ldx:j*ldx+cols])
				for r := range want {
					if out[j*rows+r] != want[r] {
						t.Fatalf("matmul generic=%v cols %d x row %d row %d: got %v want %v", tier, cols, j, r, out[j*rows+r], want[r])
					}
				}
			}
		}
	}
	UseGeneric(false)
}
