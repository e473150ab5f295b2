package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refPackedQ4_0 is the packed Q4_0 product's definition computed from the plain Q4_0 rows, without
// the packed layout: per block the exact integer s = Σ(q-8)·x over its 32 elements, then
// acc = fma(float(s)·d_x, d_w, acc).
func refPackedQ4_0(w []byte, cols, r int, xq []byte) float32 {
	nb := cols / QK
	row := w[r*nb*BlockQ4_0:]
	var acc float32
	for b := 0; b < nb; b++ {
		wb, xb := row[b*BlockQ4_0:], xq[b*BlockQ8_0:]
		var s int32
		for e := 0; e < 16; e++ {
			s += (int32(wb[2+e]&0xf) - 8) * int32(int8(xb[2+e]))
			s += (int32(wb[2+e]>>4) - 8) * int32(int8(xb[18+e]))
		}
		acc = fma32(float32(s)*loadF16(xb), loadF16(wb), acc)
	}
	return acc
}

func TestPackedQ4_0(t *testing.T) {
	defer UseGeneric(false)
	rng := rand.New(rand.NewPCG(11, 4))
	for _, sh := range []struct{ rows, cols int }{{8, 32}, {13, 96}, {16, 64}, {64, 512}, {37, 1408}, {48, 4864}} {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		w := quantQ4(wf)
		wd := make([]float32, len(wf))
		genericDequantizeQ4_0(wd, w)
		wp := make([]byte, PackedQ4_0Size(sh.rows, sh.cols))
		if len(wp) != (sh.rows+PackRows-1)/PackRows*PackRows*sh.cols/QK*BlockQ4_0 {
			t.Fatalf("%dx%d: packed size %d", sh.rows, sh.cols, len(wp))
		}
		PackQ4_0(wp, w, sh.rows, sh.cols)

		row := make([]float32, sh.cols)
		for r := 0; r < sh.rows; r++ {
			DequantizePackedQ4_0Row(row, wp, sh.cols, r)
			for c, v := range row {
				if v != wd[r*sh.cols+c] {
					t.Fatalf("%dx%d: dequantized row %d col %d = %v, want %v", sh.rows, sh.cols, r, c, v, wd[r*sh.cols+c])
				}
			}
		}

		// 16 and more rows reach the AMX tiles where the CPU has them.
		for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 35} {
			xf := randF32(rng, n*sh.cols, 1)
			xq := quantQ8(xf)
			xd := make([]float32, len(xf))
			genericDequantizeQ8_0(xd, xq)
			xrow := sh.cols / QK * BlockQ8_0
			plain := make([]float32, n*sh.rows)
			genericMatMulQ4_0(plain, sh.rows, w, sh.cols, 0, sh.rows, xq, n)
			results := map[string][]float32{}
			for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
				if ForceFeatures(tier) != nil {
					continue
				}
				got := runPacked(t, fmt.Sprintf("%s %dx%d", tier, sh.rows, sh.cols), MatMulPackedQ4_0, wp, sh.rows, sh.cols, xq, n)
				checkPrepared(t, fmt.Sprintf("%s Q4_0 %dx%d n=%d", tier, sh.rows, sh.cols, n), MatMulPackedQ4_0Prepared, false, got, wp, sh.rows, sh.cols, xq, n)
				for j := 0; j < n; j++ {
					for r := 0; r < sh.rows; r++ {
						g := got[j*sh.rows+r]
						// The definition, bit for bit.
						if want := refPackedQ4_0(w, sh.cols, r, xq[j*xrow:]); math.Float32bits(g) != math.Float32bits(want) {
							t.Fatalf("%s %dx%d n=%d: out[%d][%d] = %v, reference %v", tier, sh.rows, sh.cols, n, j, r, g, want)
						}
						// The true dot product of the dequantized values, and the plain-layout kernel,
						// within the float reordering bound.
						wr, xr := wd[r*sh.cols:(r+1)*sh.cols], xd[j*sh.cols:(j+1)*sh.cols]
						tol := tolerance(sh.cols/QK, absDotQ(wr, xr))
						var exact float64
						for c := range wr {
							exact += float64(wr[c]) * float64(xr[c])
						}
						if math.Abs(float64(g)-exact) > tol || math.Abs(float64(g-plain[j*sh.rows+r])) > tol {
							t.Fatalf("%s %dx%d n=%d: out[%d][%d] = %v, exact %v, plain Q4_0 %v (tol %g)",
								tier, sh.rows, sh.cols, n, j, r, g, exact, plain[j*sh.rows+r], tol)
						}
					}
				}
				// On the SIMD tiers, the plain-layout kernels' very bits: repacking changes no result.
				if tier != "generic" {
					plainSIMD := make([]float32, n*sh.rows)
					MatMulQ4_0(plainSIMD, sh.rows, w, sh.cols, 0, sh.rows, xq, n)
					for i, v := range plainSIMD {
						if math.Float32bits(v) != math.Float32bits(got[i]) {
							t.Fatalf("%s %dx%d n=%d: out[%d][%d] = %v, plain-layout MatMulQ4_0 %v", tier, sh.rows, sh.cols, n, i/sh.rows, i%sh.rows, got[i], v)
						}
					}
				}
				results[tier] = got
			}
			UseGeneric(false)
			if len(results) < 2 {
				t.Logf("only %d tier(s) on this CPU", len(results))
			}
		}
	}
}

// TestPackedQ4_0Extremes runs the largest nibble and activation magnitudes through every tier: the
// AVX2 kernels add a block's eight vpmaddubsw results in int16 (16 products a lane) before widening, which
// must not overflow (at most 16·15·128 = 30720 in a lane, with activations of -128).
func TestPackedQ4_0Extremes(t *testing.T) {
	defer UseGeneric(false)
	const rows, cols, n = 16, 128, 4
	nb := cols / QK
	w := make([]byte, rows*nb*BlockQ4_0)
	xq := make([]byte, n*nb*BlockQ8_0)
	for r := 0; r < rows; r++ {
		for b := 0; b < nb; b++ {
			blk := w[(r*nb+b)*BlockQ4_0:]
			blk[0], blk[1] = 0x00, 0x3c // d = 1
			for e := 0; e < 16; e++ {
				blk[2+e] = []byte{0xff, 0x00, 0xf0, 0x0f}[r%4] // nibbles 15 (+7) or 0 (-8)
			}
		}
	}
	for j := 0; j < n; j++ {
		for b := 0; b < nb; b++ {
			blk := xq[(j*nb+b)*BlockQ8_0:]
			blk[0], blk[1] = 0x00, 0x3c
			for e := 0; e < 32; e++ {
				blk[2+e] = byte([]int8{127, -127, 127, -128}[j])
			}
		}
	}
	wp := make([]byte, PackedQ4_0Size(rows, cols))
	PackQ4_0(wp, w, rows, cols)
	for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
		if ForceFeatures(tier) != nil {
			continue
		}
		got := make([]float32, n*rows)
		MatMulPackedQ4_0(got, rows, wp, cols, 0, rows, xq, n)
		for j := 0; j < n; j++ {
			for r := 0; r < rows; r++ {
				if want := refPackedQ4_0(w, cols, r, xq[j*nb*BlockQ8_0:]); got[j*rows+r] != want {
					t.Fatalf("%s: out[%d][%d] = %v, want %v", tier, j, r, got[j*rows+r], want)
				}
			}
		}
	}
}

func TestPackedQ4_0Bounds(t *testing.T) {
	w := make([]byte, PackedQ4_0Size(16, 64))
	xq := make([]byte, 2*BlockQ8_0)
	out := make([]float32, 16)
	expectPanics(t, map[string]func(){
		"unaligned r0": func() { MatMulPackedQ4_0(out, 16, w, 64, 3, 16, xq, 1) },
		"short w":      func() { MatMulPackedQ4_0(out, 16, w[:100], 64, 0, 16, xq, 1) },
		"short out":    func() { MatMulPackedQ4_0(out[:10], 16, w, 64, 0, 16, xq, 1) },
		"short x":      func() { MatMulPackedQ4_0(out, 16, w, 64, 0, 16, xq[:10], 1) },
		"small ldo":    func() { MatMulPackedQ4_0(make([]float32, 64), 8, w, 64, 0, 16, make([]byte, 4*BlockQ8_0), 2) },
		"short pack":   func() { PackQ4_0(w[:10], make([]byte, 16*2*BlockQ4_0), 16, 64) },
	})
}

// BenchmarkPackedQ4_0 compares the packed Q4_0 product with the plain Q4_0 kernels (MatVec for
// n = 1, MatMul above) on Qwen2.5-0.5B's FFN shapes and Llama-3.2-1B's down projection, per activation row count n.
func BenchmarkPackedQ4_0(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, sh := range []struct{ rows, cols int }{{4864, 896}, {896, 4864}, {2048, 8192}} {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		w := quantQ4(wf)
		wp := make([]byte, PackedQ4_0Size(sh.rows, sh.cols))
		PackQ4_0(wp, w, sh.rows, sh.cols)
		for _, n := range []int{1, 8, 64} {
			xq := quantQ8(randF32(rng, n*sh.cols, 1))
			out := make([]float32, n*sh.rows)
			flops := 2 * float64(sh.rows*sh.cols*n) / 1e9
			b.Run(fmt.Sprintf("%dx%d/n=%d/plain", sh.rows, sh.cols, n), func(b *testing.B) {
				loop(b, func() {
					if n == 1 {
						MatVecQ4_0(out, w, sh.cols, 0, sh.rows, xq)
					} else {
						MatMulQ4_0(out, sh.rows, w, sh.cols, 0, sh.rows, xq, n)
					}
				}, flops, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("%dx%d/n=%d/packed", sh.rows, sh.cols, n), func(b *testing.B) {
				loop(b, func() { MatMulPackedQ4_0(out, sh.rows, wp, sh.cols, 0, sh.rows, xq, n) }, flops, "GFLOP/s")
			})
		}
	}
}
