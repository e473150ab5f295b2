package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestPackedQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, sh := range []struct{ rows, cols int }{{8, 32}, {13, 96}, {16, 64}, {64, 512}, {37, 1408}} {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		w := quantQ8(wf)
		wd := make([]float32, len(wf))
		genericDequantizeQ8_0(wd, w)
		wp := make([]byte, PackedQ8_0Size(sh.rows, sh.cols))
		PackQ8_0(wp, w, sh.rows, sh.cols)

		row := make([]float32, sh.cols)
		for r := 0; r < sh.rows; r++ {
			DequantizePackedQ8_0Row(row, wp, sh.cols, r)
			for c, v := range row {
				if v != wd[r*sh.cols+c] {
					t.Fatalf("%dx%d: dequantized row %d col %d = %v, want %v", sh.rows, sh.cols, r, c, v, wd[r*sh.cols+c])
				}
			}
		}

		// 16 and more rows reach the AMX tiles (whole tiles of 16, the rest on VNNI) where the CPU has them.
		for _, n := range []int{1, 2, 3, 5, 8, 9, 16, 17, 32, 35} {
			xf := randF32(rng, n*sh.cols, 1)
			xq := quantQ8(xf)
			xd := make([]float32, len(xf))
			genericDequantizeQ8_0(xd, xq)
			ref := make([]float32, n*sh.rows)
			genericMatMulQ8_0(ref, sh.rows, w, sh.cols, 0, sh.rows, xq, n)
			results := map[string][]float32{}
			for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
				if ForceFeatures(tier) != nil {
					continue
				}
				got := runPacked(t, fmt.Sprintf("%s %dx%d", tier, sh.rows, sh.cols), MatMulPackedQ8_0, wp, sh.rows, sh.cols, xq, n)
				checkPrepared(t, fmt.Sprintf("%s %dx%d n=%d", tier, sh.rows, sh.cols, n), MatMulPackedQ8_0Prepared, true, got, wp, sh.rows, sh.cols, xq, n)
				for j := 0; j < n; j++ {
					for r := 0; r < sh.rows; r++ {
						tol := tolerance(sh.cols/QK, absDotQ(wd[r*sh.cols:(r+1)*sh.cols], xd[j*sh.cols:(j+1)*sh.cols]))
						g, want := got[j*sh.rows+r], ref[j*sh.rows+r]
						if math.IsNaN(float64(g)) || math.Abs(float64(g-want)) > tol {
							t.Fatalf("%s %dx%d n=%d: out[%d][%d] = %v, plain Q8_0 %v (tol %g)", tier, sh.rows, sh.cols, n, j, r, g, want, tol)
						}
					}
				}
				results[tier] = got
			}
			UseGeneric(false)
			for _, tier := range []string{"avx512vnni", "amx"} {
				if a, b := results["avx2"], results[tier]; a != nil && b != nil {
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
							t.Fatalf("%dx%d n=%d: avx2 %v and %s %v differ at %d", sh.rows, sh.cols, n, a[i], tier, b[i], i)
						}
					}
				}
			}
		}
	}
}

func TestPackedQ8_0Bounds(t *testing.T) {
	w := make([]byte, PackedQ8_0Size(16, 64))
	xq := make([]byte, 2*BlockQ8_0)
	out := make([]float32, 16)
	expectPanics(t, map[string]func(){
		"unaligned r0": func() { MatMulPackedQ8_0(out, 16, w, 64, 3, 16, xq, 1) },
		"short w":      func() { MatMulPackedQ8_0(out, 16, w[:100], 64, 0, 16, xq, 1) },
		"short out":    func() { MatMulPackedQ8_0(out[:10], 16, w, 64, 0, 16, xq, 1) },
		"short x":      func() { MatMulPackedQ8_0(out, 16, w, 64, 0, 16, xq[:10], 1) },
	})
}

// BenchmarkPackedVsPlain compares the packed product with the plain Q8_0 kernels (MatVec for n = 1,
// MatMul above) on the demo model's FFN shapes, per activation row count n. The figure to read is
// the time per call: batching pays when time(n) grows much slower than n.
func BenchmarkPackedVsPlain(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, sh := range []struct{ rows, cols int }{{1408, 512}, {512, 1408}, {49152, 576}} {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		w := quantQ8(wf)
		wp := make([]byte, PackedQ8_0Size(sh.rows, sh.cols))
		PackQ8_0(wp, w, sh.rows, sh.cols)
		for _, n := range []int{1, 2, 4, 8, 16} {
			xq := quantQ8(randF32(rng, n*sh.cols, 1))
			out := make([]float32, n*sh.rows)
			flops := 2 * float64(sh.rows*sh.cols*n) / 1e9
			b.Run(fmt.Sprintf("%dx%d/n=%d/plain", sh.rows, sh.cols, n), func(b *testing.B) {
				loop(b, func() {
					if n == 1 {
						MatVecQ8_0(out, w, sh.cols, 0, sh.rows, xq)
					} else {
						MatMulQ8_0(out, sh.rows, w, sh.cols, 0, sh.rows, xq, n)
					}
				}, flops, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("%dx%d/n=%d/packed", sh.rows, sh.cols, n), func(b *testing.B) {
				loop(b, func() { MatMulPackedQ8_0(out, sh.rows, wp, sh.cols, 0, sh.rows, xq, n) }, flops, "GFLOP/s")
			})
		}
	}
}

// runPacked computes the n-row product mm (MatMulPackedQ8_0 or MatMulPackedQ4_0) of packed
// weights wp on the current tier in two calls over row ranges starting at multiples of PackRows,
// into NaNs so that a row left unwritten shows, checks that one activation row at a time gives the
// same bits as the batch, and returns the batch's result.
func runPacked(t *testing.T, label string, mm func([]float32, int, []byte, int, int, int, []byte, int),
	wp []byte, rows, cols int, xq []byte, n int) []float32 {
	t.Helper()
	got := make([]float32, n*rows)
	for i := range got {
		got[i] = float32(math.NaN())
	}
	mid := min(PackRows, rows)
	mm(got, rows, wp, cols, 0, mid, xq, n)
	mm(got, rows, wp, cols, mid, rows, xq, n)
	one := make([]float32, rows)
	xrow := cols / QK * BlockQ8_0
	for j := 0; j < n; j++ {
		mm(one, 0, wp, cols, 0, rows, xq[j*xrow:], 1)
		for r, v := range one {
			if math.Float32bits(v) != math.Float32bits(got[j*rows+r]) {
				t.Fatalf("%s n=%d: row %d of activation %d: alone %v, batched %v", label, n, r, j, v, got[j*rows+r])
			}
		}
	}
	return got
}

// checkPrepared computes the product of runPacked again with mm (MatMulPackedQ8_0Prepared or
// MatMulPackedQ4_0Prepared) from rows prepared once (Q8Prep, for Q8_0 readers or not as q8 says),
// in two calls over row ranges, and fails unless every output has the same bits as want.
func checkPrepared(t *testing.T, label string, mm func([]float32, int, []byte, int, int, *Q8Prep), q8 bool,
	want []float32, wp []byte, rows, cols int, xq []byte, n int) {
	t.Helper()
	var p Q8Prep
	p.Prepare(xq, n, cols, q8)
	if !p.Holds(xq[:n*cols/QK*BlockQ8_0]) {
		t.Fatalf("%s: Holds is false for the prepared rows", label)
	}
	got := make([]float32, n*rows)
	mid := min(PackRows, rows)
	mm(got, rows, wp, 0, mid, &p)
	mm(got, rows, wp, mid, rows, &p)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: prepared out[%d] = %v, unprepared %v", label, i, got[i], want[i])
		}
	}
}

// expectPanics runs each case and reports those that return without panicking.
func expectPanics(t *testing.T, cases map[string]func()) {
	t.Helper()
	for name, f := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestQ8PrepHolds checks the identity that lets the engine hand one preparation to every product
// of the same input, and that a reset or a different slice is never taken for it.
func TestQ8PrepHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const cols, n = 64, 20
	xq := quantQ8(randF32(rng, n*cols, 1))
	var p Q8Prep
	if p.Holds(xq) {
		t.Fatal("zero Q8Prep holds rows")
	}
	p.Prepare(xq, n, cols, true)
	if !p.Holds(xq) {
		t.Fatal("prepared rows not held")
	}
	if p.Holds(xq[:len(xq)-BlockQ8_0*cols/QK]) || p.Holds(append([]byte(nil), xq...)) {
		t.Fatal("a shorter slice or a copy of the rows is taken for them")
	}
	p.Reset()
	if p.Holds(xq) {
		t.Fatal("rows held after Reset")
	}
	expectPanics(t, map[string]func(){
		"short rows": func() { p.Prepare(xq[:10], n, cols, true) },
		"bad cols":   func() { p.Prepare(xq, n, 40, true) },
	})
}
