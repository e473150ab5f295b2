package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatVecRowCounts covers every remainder of the streaming matvec's row passes (8 rows per pass,
// then 1..7): for each row count the SIMD matvec must equal the same tier's matmul bit for bit
// (its tile4 for activation row 0, its tilev for row 4) and match the other SIMD tier bit for bit.
// (Closeness to the generic path is TestQuantizedProducts' job: its bound is per block, too tight
// for single-block rows whose two half-block sums cancel.) The weight slice ends exactly at the last
// row, so a read past it would land outside the slice.
func TestMatVecRowCounts(t *testing.T) {
	tiers := levels(t)
	if len(tiers) == 0 {
		t.Skip("requires a SIMD tier (unavailable on this CPU or build)")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	const n = 5 // one tile4 group and one tilev row in the matmul
	for _, cols := range []int{32, 96, 576} {
		for rows := 1; rows <= 27; rows++ {
			r0 := rows % 3
			wf := randF32(rng, (r0+rows)*cols, 0.02)
			xf := randF32(rng, n*cols, 1)
			xq := quantQ8(xf)
			w8, w4 := quantQ8(wf), quantQ4(wf)
			for _, typ := range []string{"q8_0", "q4_0"} {
				w, mv, mm := w8, MatVecQ8_0, MatMulQ8_0
				if typ == "q4_0" {
					w, mv, mm = w4, MatVecQ4_0, MatMulQ4_0
				}
				r1 := r0 + rows
				rb := cols / QK * BlockQ8_0
				var first []float32
				for _, tier := range tiers {
					withLevel(t, tier, func() {
						got, got4 := make([]float32, rows), make([]float32, rows)
						mv(got, w, cols, r0, r1, xq)
						mv(got4, w, cols, r0, r1, xq[4*rb:])
						mat := make([]float32, n*r1)
						mm(mat, r1, w, cols, r0, r1, xq, n)
						for r := r0; r < r1; r++ {
							if math.Float32bits(got[r-r0]) != math.Float32bits(mat[r]) {
								t.Fatalf("%s %s cols %d rows [%d,%d): matvec row %d %v != matmul (tile4) %v", tier, typ, cols, r0, r1, r, got[r-r0], mat[r])
							}
							if math.Float32bits(got4[r-r0]) != math.Float32bits(mat[4*r1+r]) {
								t.Fatalf("%s %s cols %d rows [%d,%d): matvec row %d %v != matmul (tilev) %v", tier, typ, cols, r0, r1, r, got4[r-r0], mat[4*r1+r])
							}
							if first != nil && math.Float32bits(got[r-r0]) != math.Float32bits(first[r-r0]) {
								t.Fatalf("%s %s cols %d rows [%d,%d): row %d %v differs from %s %v", tier, typ, cols, r0, r1, r, got[r-r0], tiers[0], first[r-r0])
							}
						}
						if first == nil {
							first = got
						}
					})
				}
			}
		}
	}
}
