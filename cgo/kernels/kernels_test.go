package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// levels returns the SIMD tiers usable here, to run each against the generic path.
func levels(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, name := range []string{"avx2", "avx512vnni", "amx"} {
		if ForceFeatures(name) == nil {
			out = append(out, name)
		}
	}
	UseGeneric(false)
	if len(out) == 0 {
		t.Log("no SIMD tier available (generic-only build or CPU); comparing generic with itself")
	}
	return out
}

// withLevel runs f with the named tier active and restores the detected one.
func withLevel(t *testing.T, name string, f func()) {
	t.Helper()
	if err := ForceFeatures(name); err != nil {
		t.Fatal(err)
	}
	defer UseGeneric(false)
	f()
}

func randF32(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

func quantQ8(x []float32) []byte {
	q := make([]byte, len(x)/QK*BlockQ8_0)
	genericQuantizeQ8_0(q, x)
	return q
}

func quantQ4(x []float32) []byte {
	q := make([]byte, len(x)/QK*BlockQ4_0)
	genericQuantizeQ4_0(q, x)
	return q
}

// absDotQ bounds the float rounding of a quantized dot product: Σ_b |sumi_b·dw_b·dx_b|. Reordering
// a sum of nb terms changes it by at most about nb·2^-24 of that (plus one rounding per term).
func absDotQ(w, x []float32) float64 {
	var s float64
	for b := 0; b < len(w)/QK; b++ {
		var blk float64
		for i := b * QK; i < (b+1)*QK; i++ {
			blk += float64(w[i]) * float64(x[i])
		}
		s += math.Abs(blk)
	}
	return s
}

func absDot(w, x []float32) float64 {
	var s float64
	for i := range w {
		s += math.Abs(float64(w[i]) * float64(x[i]))
	}
	return s
}

// tolerance for two float32 sums of n terms with absolute sum abs, differing only in order.
func tolerance(n int, abs float64) float64 { return float64(n+4) * 0x1p-24 * abs * 2 }

func TestF16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := F16ToF32(uint16(h))
		sign := 1.0
		if h&0x8000 != 0 {
			sign = -1
		}
		e, m := (h>>10)&0x1f, h&0x3ff
		var want float64
		switch {
		case e == 0x1f && m != 0:
			if !math.IsNaN(float64(got)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, got)
			}
			continue
		case e == 0x1f:
			want = math.Inf(int(sign))
		case e == 0:
			want = sign * float64(m) * math.Pow(2, -24)
		default:
			want = sign * (1 + float64(m)/1024) * math.Pow(2, float64(e-15))
		}
		if float64(got) != want || math.Signbit(float64(got)) != (sign < 0) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, got, want)
		}
		if back := F32ToF16(got); back != uint16(h) {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestF32ToF16Rounding checks round-to-nearest-even on every midpoint between adjacent halves.
func TestF32ToF16Rounding(t *testing.T) {
	for h := 0; h < 0x7bff; h++ { // positive finite halves; the next one is h+1
		lo, hi := float64(F16ToF32(uint16(h))), float64(F16ToF32(uint16(h+1)))
		mid := float32((lo + hi) / 2) // exact in float32: halves have 11 significant bits
		want := uint16(h)
		if h&1 == 1 {
			want = uint16(h + 1)
		}
		if got := F32ToF16(mid); got != want {
			t.Fatalf("F32ToF16(%v) midpoint of %#04x/%#04x = %#04x, want %#04x", mid, h, h+1, got, want)
		}
		if got := F32ToF16(-mid); got != want|0x8000 {
			t.Fatalf("F32ToF16(%v) = %#04x, want %#04x", -mid, got, want|0x8000)
		}
		above := math.Nextafter32(mid, float32(hi))
		if got := F32ToF16(above); got != uint16(h+1) {
			t.Fatalf("F32ToF16(%v) just above midpoint = %#04x, want %#04x", above, got, h+1)
		}
	}
	if got := F32ToF16(65520); got != 0x7c00 {
		t.Fatalf("F32ToF16(65520) = %#04x, want inf", got)
	}
	if got := F32ToF16(65519.996); got != 0x7bff {
		t.Fatalf("F32ToF16(65519.996) = %#04x, want 0x7bff", got)
	}
}

func TestQuantizeQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := randF32(rng, 32*67, 1)
	for i := 32; i < 64; i++ {
		x[i] = 0 // an all-zero block: d = 0, q = 0
	}
	for i := 64; i < 96; i++ { // exact .5 ties after scaling by 127/amax = 1
		x[i] = float32(i-80) + 0.5
	}
	x[64] = 127
	want := quantQ8(x)
	// round trip: |x - d16·q| ≤ d/2 (rounding) + 127·|d - d16| (fp16 scale) ≤ d·(0.5 + 127·2^-11).
	deq := make([]float32, len(x))
	DequantizeQ8_0(deq, want)
	for b := 0; b < len(x)/QK; b++ {
		d := float64(absMax(x[b*QK:(b+1)*QK])) / 127
		for i := b * QK; i < (b+1)*QK; i++ {
			if e := math.Abs(float64(x[i] - deq[i])); e > d*(0.5+127*0x1p-11)+1e-12 {
				t.Fatalf("block %d elem %d: |%v - %v| = %g > bound (d %g)", b, i, x[i], deq[i], e, d)
			}
		}
	}
	for _, lv := range levels(t) {
		withLevel(t, lv, func() {
			got := make([]byte, len(want))
			QuantizeQ8_0(got, x)
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: byte %d (block %d) = %d, generic %d", lv, i, i/BlockQ8_0, got[i], want[i])
				}
			}
		})
	}
}

func TestQuantizeQ4_0RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := randF32(rng, 32*41, 0.02)
	q := quantQ4(x)
	deq := make([]float32, len(x))
	DequantizeQ4_0(deq, q)
	for b := 0; b < len(x)/QK; b++ {
		d := float64(absMax(x[b*QK:(b+1)*QK])) / 8
		// interior values round to within d/2; the side opposite the max clips at +7d, so ≤ d.
		for i := b * QK; i < (b+1)*QK; i++ {
			if e := math.Abs(float64(x[i] - deq[i])); e > d*(1+16*0x1p-11) {
				t.Fatalf("block %d elem %d: |%v - %v| = %g > d %g", b, i, x[i], deq[i], e, d)
			}
		}
	}
}

func TestQuantizeRefVsActivation(t *testing.T) {
	// The weight (ref) quantizer rounds half away from zero, the activation
	// one (llama.cpp's AVX2 path) half to even: they must differ exactly at
	// ties and nowhere else, on every tier. A block whose max is 127 makes
	// x·127/amax = x exactly, so x = k+0.5 is a tie.
	tie := make([]float32, QK)
	tie[0] = 127
	wantDiff := make([]bool, QK)
	for i := 1; i < QK; i++ {
		tie[i] = float32(i) - 16.5 // -15.5 ... 14.5
		v := float64(tie[i])
		wantDiff[i] = math.RoundToEven(v) != math.Round(v) // half of the ties
	}
	rng := rand.New(rand.NewPCG(5, 6))
	x := append(randF32(rng, 32*4096, 1), tie...)
	tieBlock := len(x)/QK - 1
	for _, generic := range []bool{true, false} {
		UseGeneric(generic)
		a, r := make([]byte, len(x)/QK*BlockQ8_0), make([]byte, len(x)/QK*BlockQ8_0)
		QuantizeQ8_0(a, x)
		QuantizeQ8_0Ref(r, x)
		for i := range a {
			b, j := i/BlockQ8_0, i%BlockQ8_0-2
			want := b == tieBlock && j >= 0 && wantDiff[j]
			if got := a[i] != r[i]; got != want {
				t.Errorf("%s: block %d byte %d: activation %d, reference %d (tie %v)",
					Features(), b, i%BlockQ8_0, int8(a[i]), int8(r[i]), want)
			}
		}
	}
	UseGeneric(false)
}

type prodCase struct{ rows, cols, r0, r1, n int }

var prodCases = []prodCase{
	{1, 32, 0, 1, 1}, {7, 64, 0, 7, 3}, {37, 96, 3, 34, 5}, {37, 160, 1, 36, 9},
	{64, 896, 5, 62, 7}, {33, 576, 0, 33, 4}, {9, 4864, 2, 9, 2}, {40, 128, 0, 40, 17},
}

func TestQuantizedProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range prodCases {
		wf := randF32(rng, c.rows*c.cols, 0.02)
		xf := randF32(rng, c.n*c.cols, 1)
		w8, w4, xq := quantQ8(wf), quantQ4(wf), quantQ8(xf)
		wd8, wd4, xd := make([]float32, len(wf)), make([]float32, len(wf)), make([]float32, len(xf))
		DequantizeQ8_0(wd8, w8)
		DequantizeQ4_0(wd4, w4)
		DequantizeQ8_0(xd, xq)
		for _, typ := range []string{"q8_0", "q4_0"} {
			w, wd := w8, wd8
			mv, mm := MatVecQ8_0, MatMulQ8_0
			if typ == "q4_0" {
				w, wd, mv, mm = w4, wd4, MatVecQ4_0, MatMulQ4_0
			}
			ldo := c.rows + 3
			UseGeneric(true)
			wantV := make([]float32, c.r1-c.r0)
			mv(wantV, w, c.cols, c.r0, c.r1, xq)
			wantM := make([]float32, c.n*ldo)
			mm(wantM, ldo, w, c.cols, c.r0, c.r1, xq, c.n)
			UseGeneric(false)
			// the generic matmul must agree with its own matvec exactly
			for j := 0; j < c.n; j++ {
				v := make([]float32, c.r1-c.r0)
				UseGeneric(true)
				mv(v, w, c.cols, c.r0, c.r1, xq[j*c.cols/QK*BlockQ8_0:])
				UseGeneric(false)
				for r := c.r0; r < c.r1; r++ {
					if v[r-c.r0] != wantM[j*ldo+r] {
						t.Fatalf("%s %+v: generic matmul[%d][%d] %v != matvec %v", typ, c, j, r, wantM[j*ldo+r], v[r-c.r0])
					}
				}
			}
			for _, lv := range levels(t) {
				withLevel(t, lv, func() {
					gotV := make([]float32, c.r1-c.r0)
					mv(gotV, w, c.cols, c.r0, c.r1, xq)
					gotM := make([]float32, c.n*ldo)
					for i := range gotM {
						gotM[i] = -7 // untouched entries must stay
					}
					mm(gotM, ldo, w, c.cols, c.r0, c.r1, xq, c.n)
					var maxDiff float64
					for r := c.r0; r < c.r1; r++ {
						tol := tolerance(c.cols/QK, absDotQ(wd[r*c.cols:(r+1)*c.cols], xd))
						d := math.Abs(float64(gotV[r-c.r0] - wantV[r-c.r0]))
						maxDiff = math.Max(maxDiff, d)
						if d > tol {
							t.Fatalf("%s %s %+v matvec row %d: %v vs generic %v (tol %g)", lv, typ, c, r, gotV[r-c.r0], wantV[r-c.r0], tol)
						}
						for j := 0; j < c.n; j++ {
							tol := tolerance(c.cols/QK, absDotQ(wd[r*c.cols:(r+1)*c.cols], xd[j*c.cols:]))
							d := math.Abs(float64(gotM[j*ldo+r] - wantM[j*ldo+r]))
							maxDiff = math.Max(maxDiff, d)
							if d > tol {
								t.Fatalf("%s %s %+v matmul [%d][%d]: %v vs generic %v (tol %g)", lv, typ, c, j, r, gotM[j*ldo+r], wantM[j*ldo+r], tol)
							}
						}
					}
					for j := 0; j < c.n; j++ {
						for r := 0; r < ldo; r++ {
							if (r < c.r0 || r >= c.r1) && gotM[j*ldo+r] != -7 {
								t.Fatalf("%s %s %+v: matmul wrote outside its rows at [%d][%d]", lv, typ, c, j, r)
							}
						}
					}
					if maxDiff > 0 {
						t.Logf("%s %s rows %d cols %d: max |simd - generic| = %.3g", lv, typ, c.rows, c.cols, maxDiff)
					}
				})
			}
		}
	}
}

func TestFloatProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	cases := append([]prodCase{{5, 7, 0, 5, 3}, {37, 172, 2, 35, 6}, {11, 33, 1, 10, 5}}, prodCases...)
	for _, c := range cases {
		w := randF32(rng, c.rows*c.cols, 0.02)
		x := randF32(rng, c.n*c.cols, 1)
		w16 := make([]byte, 2*len(w))
		wr := make([]float32, len(w)) // w rounded to fp16
		for i, v := range w {
			h := F32ToF16(v)
			w16[2*i], w16[2*i+1] = byte(h), byte(h>>8)
			wr[i] = F16ToF32(h)
		}
		ldo := c.rows + 1
		type kind struct {
			name string
			wf   []float32
			mv   func(out []float32)
			mm   func(out []float32)
		}
		kinds := []kind{
			{"f32", w, func(o []float32) { MatVecF32(o, w, c.cols, c.r0, c.r1, x) },
				func(o []float32) { MatMulF32(o, ldo, w, c.cols, c.r0, c.r1, x, c.n) }},
			{"f16", wr, func(o []float32) { MatVecF16(o, w16, c.cols, c.r0, c.r1, x) },
				func(o []float32) { MatMulF16(o, ldo, w16, c.cols, c.r0, c.r1, x, c.n) }},
		}
		for _, k := range kinds {
			UseGeneric(true)
			wantV, wantM := make([]float32, c.r1-c.r0), make([]float32, c.n*ldo)
			k.mv(wantV)
			k.mm(wantM)
			wantDot := DotF32(x[:c.cols], w[:c.cols])
			UseGeneric(false)
			for _, lv := range levels(t) {
				withLevel(t, lv, func() {
					gotV, gotM := make([]float32, c.r1-c.r0), make([]float32, c.n*ldo)
					k.mv(gotV)
					k.mm(gotM)
					if d, tol := math.Abs(float64(DotF32(x[:c.cols], w[:c.cols])-wantDot)), tolerance(c.cols, absDot(x[:c.cols], w[:c.cols])); d > tol {
						t.Fatalf("%s DotF32 cols %d: diff %g > %g", lv, c.cols, d, tol)
					}
					for r := c.r0; r < c.r1; r++ {
						wrow := k.wf[r*c.cols : (r+1)*c.cols]
						if d, tol := math.Abs(float64(gotV[r-c.r0]-wantV[r-c.r0])), tolerance(c.cols, absDot(wrow, x)); d > tol {
							t.Fatalf("%s %s %+v matvec row %d: %v vs %v (tol %g)", lv, k.name, c, r, gotV[r-c.r0], wantV[r-c.r0], tol)
						}
						for j := 0; j < c.n; j++ {
							d := math.Abs(float64(gotM[j*ldo+r] - wantM[j*ldo+r]))
							if tol := tolerance(c.cols, absDot(wrow, x[j*c.cols:(j+1)*c.cols])); d > tol {
								t.Fatalf("%s %s %+v matmul [%d][%d]: %v vs %v (tol %g)", lv, k.name, c, j, r, gotM[j*ldo+r], wantM[j*ldo+r], tol)
							}
						}
					}
				})
			}
		}
	}
}

func TestForceFeatures(t *testing.T) {
	defer UseGeneric(false)
	if err := ForceFeatures("sse9"); err == nil {
		t.Fatal("ForceFeatures(sse9) succeeded")
	}
	if err := ForceFeatures("generic"); err != nil || Features() != "generic" {
		t.Fatalf("ForceFeatures(generic) = %v, Features %s", err, Features())
	}
	UseGeneric(false)
	if Features() != Detected() {
		t.Fatalf("after UseGeneric(false) Features %s, detected %s", Features(), Detected())
	}
	t.Logf("detected %s", Detected())
}

// TestMatVecMatMulIdentical: on every tier, a MatMul output equals the MatVec of the same rows bit
// for bit, so batched prompt processing and one-token decoding agree exactly (llama.cpp's Q8_0 CPU
// path has the same property).
func TestMatVecMatMulIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, tier := range append([]string{"generic"}, levels(t)...) {
		withLevel(t, tier, func() {
			for _, c := range prodCases {
				wf := randF32(rng, c.rows*c.cols, 0.02)
				xf := randF32(rng, c.n*c.cols, 1)
				w16 := make([]byte, 2*len(wf))
				for i, v := range wf {
					h := F32ToF16(v)
					w16[2*i], w16[2*i+1] = byte(h), byte(h>>8)
				}
				w8, w4, xq := quantQ8(wf), quantQ4(wf), quantQ8(xf)
				rb := c.cols / QK * BlockQ8_0
				type pair struct {
					name string
					mv   func(out []float32, j int)
					mm   func(out []float32, ldo int)
				}
				pairs := []pair{
					{"q8_0", func(o []float32, j int) { MatVecQ8_0(o, w8, c.cols, c.r0, c.r1, xq[j*rb:]) },
						func(o []float32, ldo int) { MatMulQ8_0(o, ldo, w8, c.cols, c.r0, c.r1, xq, c.n) }},
					{"q4_0", func(o []float32, j int) { MatVecQ4_0(o, w4, c.cols, c.r0, c.r1, xq[j*rb:]) },
						func(o []float32, ldo int) { MatMulQ4_0(o, ldo, w4, c.cols, c.r0, c.r1, xq, c.n) }},
					{"f32", func(o []float32, j int) { MatVecF32(o, wf, c.cols, c.r0, c.r1, xf[j*c.cols:]) },
						func(o []float32, ldo int) { MatMulF32(o, ldo, wf, c.cols, c.r0, c.r1, xf, c.n) }},
					{"f16", func(o []float32, j int) { MatVecF16(o, w16, c.cols, c.r0, c.r1, xf[j*c.cols:]) },
						func(o []float32, ldo int) { MatMulF16(o, ldo, w16, c.cols, c.r0, c.r1, xf, c.n) }},
				}
				for _, p := range pairs {
					ldo := c.rows
					mm := make([]float32, c.n*ldo)
					p.mm(mm, ldo)
					v := make([]float32, c.r1-c.r0)
					for j := 0; j < c.n; j++ {
						p.mv(v, j)
						for r := c.r0; r < c.r1; r++ {
							if math.Float32bits(v[r-c.r0]) != math.Float32bits(mm[j*ldo+r]) {
								t.Fatalf("%s %s %+v: matvec %v != matmul %v at x row %d, w row %d", tier, p.name, c, v[r-c.r0], mm[j*ldo+r], j, r)
							}
						}
					}
				}
			}
		})
	}
}

// TestTiersAgree: AVX2 and AVX-512 VNNI compute the same integers and the same float operations,
// so their outputs must match bit for bit.
func TestTiersAgree(t *testing.T) {
	if len(levels(t)) < 2 {
		t.Skip("requires both avx2 and avx512vnni (not available on this CPU)")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range prodCases {
		w8, w4 := quantQ8(randF32(rng, c.rows*c.cols, 0.02)), quantQ4(randF32(rng, c.rows*c.cols, 0.02))
		xq := quantQ8(randF32(rng, c.n*c.cols, 1))
		run := func(tier string) []float32 {
			out := make([]float32, 2*c.n*c.rows)
			withLevel(t, tier, func() {
				MatMulQ8_0(out, c.rows, w8, c.cols, c.r0, c.r1, xq, c.n)
				MatMulQ4_0(out[c.n*c.rows:], c.rows, w4, c.cols, c.r0, c.r1, xq, c.n)
			})
			return out
		}
		a, b := run("avx2"), run("avx512vnni")
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%+v: output %d avx2 %v, avx512vnni %v", c, i, a[i], b[i])
			}
		}
	}
}
