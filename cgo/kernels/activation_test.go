package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpMatchesMathExp(t *testing.T) {
	var worst float64
	for x := float32(-87); x < 88; x += 0.001 {
		want := math.Exp(float64(x))
		got := float64(Exp(x))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 1e-6 {
		t.Errorf("Exp relative error %.3g", worst)
	}
	if Exp(-200) != 0 || !math.IsInf(float64(Exp(200)), 1) {
		t.Error("Exp out-of-range handling")
	}
}

// The SIMD activations agree with the portable ones to float32 rounding, for
// every length (vector bodies and tails), and keep the edge cases.
func TestActivationsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 3, 8, 9, 17, 64, 301} {
		g := randF32(rng, n, 4)
		u := randF32(rng, n, 1)
		if n > 3 {
			g[0], g[1], g[2] = -100, 100, 0 // e^100 overflows: silu(-100) = -0, silu(100) = 100
		}
		want := append([]float32(nil), g...)
		genericSwiGLU(want, u)
		s := randF32(rng, n, 8)
		if n > 3 {
			s[3] = -1e4 // underflows to probability 0
		}
		wantS := append([]float32(nil), s...)
		genericSoftmax(wantS, 0.125)
		for _, tier := range []string{"avx2", "avx512vnni", "amx"} {
			if ForceFeatures(tier) != nil {
				continue
			}
			got := append([]float32(nil), g...)
			SwiGLU(got, u)
			gotS := append([]float32(nil), s...)
			Softmax(gotS, 0.125)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > 4e-7*math.Abs(float64(want[i]))+1e-30 {
					t.Fatalf("%s n=%d: SwiGLU[%d](%v, %v) = %v, generic %v", tier, n, i, g[i], u[i], got[i], want[i])
				}
			}
			var sum float64
			for i := range gotS {
				if d := math.Abs(float64(gotS[i] - wantS[i])); d > 1e-6*float64(wantS[i])+1e-12 {
					t.Fatalf("%s n=%d: Softmax[%d] = %v, generic %v", tier, n, i, gotS[i], wantS[i])
				}
				sum += float64(gotS[i])
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("%s n=%d: softmax sums to %v", tier, n, sum)
			}
		}
		UseGeneric(false)
	}
}

// blockedKeys lays key rows (npos rows of hd floats) out as a blocked key cache with StoreKey.
// The unused lanes of the last block hold NaN: a kernel that let them into a result would fail.
func blockedKeys(rows []float32, hd, npos int) []float32 {
	k := make([]float32, KeyCacheLen(hd, npos))
	for i := range k {
		k[i] = float32(math.NaN())
	}
	for t := 0; t < npos; t++ {
		StoreKey(k, hd, t, rows[t*hd:(t+1)*hd])
	}
	return k
}

// Attend matches a float64 reference on every tier, for head sizes with and
// without whole vectors, query-head groups of every size the tiers use,
// and visible lengths around the 16-position key blocks.
func TestAttendMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, hd := range []int{32, 48, 64, 128, 72} {
		for _, npos := range []int{1, 7, 15, 16, 17, 100} {
			for _, nq := range []int{1, 2, 3, 5, 9} {
				q := randF32(rng, nq*hd, 1)
				kr := randF32(rng, npos*hd, 1)
				v := randF32(rng, npos*hd, 1)
				k := blockedKeys(kr, hd, npos)
				scale := float32(1 / math.Sqrt(float64(hd)))
				want := make([]float64, nq*hd)
				for h := 0; h < nq; h++ {
					s := make([]float64, npos)
					maxS := math.Inf(-1)
					for p := range s {
						for d := 0; d < hd; d++ {
							s[p] += float64(q[h*hd+d]) * float64(kr[p*hd+d])
						}
						s[p] *= float64(scale)
						maxS = math.Max(maxS, s[p])
					}
					var sum float64
					for p := range s {
						s[p] = math.Exp(s[p] - maxS)
						sum += s[p]
					}
					for p := range s {
						for d := 0; d < hd; d++ {
							want[h*hd+d] += s[p] / sum * float64(v[p*hd+d])
						}
					}
				}
				for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
					if ForceFeatures(tier) != nil {
						continue
					}
					out := make([]float32, nq*hd)
					Attend(out, q, k, v, hd, npos, nq, scale, make([]float32, nq*npos))
					for i := range out {
						if d := math.Abs(float64(out[i]) - want[i]); !(d <= 1e-5) {
							t.Fatalf("%s hd=%d npos=%d nq=%d: out[%d] = %v, reference %v", tier, hd, npos, nq, i, out[i], want[i])
						}
					}
				}
				UseGeneric(false)
			}
		}
	}
}

// BenchmarkAttend is one decode row's attention for one KV head (3 query
// heads, head size 64: SmolLM2's grouping) at several context lengths,
// float32 and fp16 keys and values. "cold" cycles through 64 MiB of heads so
// the keys and values come from memory, as in a batched decode step whose
// weights have just streamed through the cache.
func BenchmarkAttend(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const hd, nq = 64, 3
	for _, npos := range []int{100, 500} {
		q := randF32(rng, nq*hd, 1)
		k := blockedKeys(randF32(rng, npos*hd, 1), hd, npos)
		v := randF32(rng, npos*hd, 1)
		k16, v16 := make([]uint16, len(k)), make([]uint16, len(v))
		F32ToF16Row(k16, k)
		F32ToF16Row(v16, v)
		out := make([]float32, nq*hd)
		probs := make([]float32, nq*npos)
		flops := 4 * float64(nq*npos*hd) / 1e9
		b.Run(fmt.Sprintf("f32/npos=%d", npos), func(b *testing.B) {
			loop(b, func() { Attend(out, q, k, v, hd, npos, nq, 0.125, probs) }, flops, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("f16/npos=%d", npos), func(b *testing.B) {
			loop(b, func() { AttendF16(out, q, k16, v16, hd, npos, nq, 0.125, probs) }, flops, "GFLOP/s")
		})
		per := len(k16) + len(v16)
		heads := (64 << 20) / (2 * per)
		cold := make([]uint16, heads*per)
		for h := 0; h < heads; h++ {
			copy(cold[h*per:], k16)
			copy(cold[h*per+len(k16):], v16)
		}
		b.Run(fmt.Sprintf("f16-cold/npos=%d", npos), func(b *testing.B) {
			h := 0
			loop(b, func() {
				kv := cold[h*per : (h+1)*per]
				AttendF16(out, q, kv[:len(k16)], kv[len(k16):], hd, npos, nq, 0.125, probs)
				h = (h + 1) % heads
			}, flops, "GFLOP/s")
		})
	}
}

// StoreKeyF16 puts F32ToF16 of each key value where StoreKey puts the value.
func TestStoreKeyF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, hd := range []int{48, 64, 300} {
		const npos = 40
		rows := randF32(rng, npos*hd, 1)
		k := make([]float32, KeyCacheLen(hd, npos))
		k16 := make([]uint16, len(k))
		for p := 0; p < npos; p++ {
			StoreKey(k, hd, p, rows[p*hd:(p+1)*hd])
			StoreKeyF16(k16, hd, p, rows[p*hd:(p+1)*hd])
		}
		for p := 0; p < npos; p++ {
			for d := 0; d < hd; d++ {
				i := keyIndex(hd, p, d)
				if k[i] != rows[p*hd+d] || k16[i] != F32ToF16(rows[p*hd+d]) {
					t.Fatalf("hd=%d: key (%d, %d) at %d = %v / %#04x, want %v", hd, p, d, i, k[i], k16[i], rows[p*hd+d])
				}
			}
		}
	}
}

// The fp16 cache path: conversion matches F32ToF16 exactly on every tier, and
// AttendF16 equals Attend on the same values widened back to float32.
func TestAttendF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, hd := range []int{32, 64, 72} {
		for _, npos := range []int{1, 9, 16, 100} {
			const nq = 3
			q := randF32(rng, nq*hd, 1)
			kf := blockedKeys(randF32(rng, npos*hd, 1), hd, npos)
			vf := randF32(rng, npos*hd, 1)
			for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
				if ForceFeatures(tier) != nil {
					continue
				}
				k16 := make([]uint16, len(kf))
				v16 := make([]uint16, len(vf))
				F32ToF16Row(k16, kf)
				F32ToF16Row(v16, vf)
				kw := make([]float32, len(kf))
				vw := make([]float32, len(vf))
				for i := range kf {
					if want := F32ToF16(kf[i]); k16[i] != want && !math.IsNaN(float64(kf[i])) {
						t.Fatalf("%s: F32ToF16Row(%v) = %#04x, F32ToF16 %#04x", tier, kf[i], k16[i], want)
					}
					kw[i] = F16ToF32(k16[i])
				}
				for i := range vf {
					vw[i] = F16ToF32(v16[i])
				}
				want := make([]float32, nq*hd)
				got := make([]float32, nq*hd)
				Attend(want, q, kw, vw, hd, npos, nq, 0.125, make([]float32, nq*npos))
				AttendF16(got, q, k16, v16, hd, npos, nq, 0.125, make([]float32, nq*npos))
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s hd=%d npos=%d: AttendF16[%d] = %v, Attend on widened values %v", tier, hd, npos, i, got[i], want[i])
					}
				}
			}
			UseGeneric(false)
		}
	}
}

// RMSNorm equals the float64 formula's float32 rounding on every tier (the
// double sum's order differs between tiers only far below float32's
// precision), also in place and for lengths with vector tails.
func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{1, 7, 8, 64, 576, 577} {
		src := randF32(rng, n, 3)
		w := randF32(rng, n, 1)
		var ss float64
		for _, v := range src {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(n)+1e-5)
		for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
			if ForceFeatures(tier) != nil {
				continue
			}
			dst := make([]float32, n)
			RMSNorm(dst, src, w, 1e-5)
			inPlace := append([]float32(nil), src...)
			RMSNorm(inPlace, inPlace, w, 1e-5)
			for i := range dst {
				want := float64(src[i]) * scale * float64(w[i])
				if d := math.Abs(float64(dst[i]) - want); d > 1e-6*math.Abs(want)+1e-30 || dst[i] != inPlace[i] {
					t.Fatalf("%s n=%d: [%d] = %v (in place %v), want %v", tier, n, i, dst[i], inPlace[i], want)
				}
			}
		}
		UseGeneric(false)
	}
}

// Rope gives the portable code's exact bits on every tier, in both pair
// layouts, with vector tails and a rotated part narrower than the head.
func TestRopeTiersAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct{ heads, hd, half int }{{3, 64, 32}, {2, 128, 64}, {1, 48, 24}, {2, 80, 13}, {4, 64, 16}} {
		x := randF32(rng, c.heads*c.hd, 2)
		cos, sin := make([]float32, c.half), make([]float32, c.half)
		for i := range cos {
			s, co := math.Sincos(rng.Float64() * 6)
			cos[i], sin[i] = float32(co), float32(s)
		}
		for _, adjacent := range []bool{true, false} {
			want := append([]float32(nil), x...)
			genericRope(want, c.heads, c.hd, cos, sin, adjacent)
			for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
				if ForceFeatures(tier) != nil {
					continue
				}
				got := append([]float32(nil), x...)
				Rope(got, c.heads, c.hd, cos, sin, adjacent)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %+v adjacent=%v: [%d] = %v, portable %v", tier, c, adjacent, i, got[i], want[i])
					}
				}
			}
			UseGeneric(false)
		}
		// The rotation keeps each pair's length.
		got := append([]float32(nil), x...)
		Rope(got, c.heads, c.hd, cos, sin, true)
		for i := 0; i < c.half; i++ {
			before := math.Hypot(float64(x[2*i]), float64(x[2*i+1]))
			after := math.Hypot(float64(got[2*i]), float64(got[2*i+1]))
			if math.Abs(before-after) > 1e-5*before+1e-6 {
				t.Fatalf("%+v: pair %d length %v -> %v", c, i, before, after)
			}
		}
	}
}

// SwiGLURows equals SwiGLU row by row.
func TestSwiGLURows(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const ld, n, width = 100, 3, 37
	g := randF32(rng, n*ld, 4)
	u := randF32(rng, n*ld, 4)
	want := append([]float32(nil), g...)
	for j := 0; j < n; j++ {
		SwiGLU(want[j*ld+5:j*ld+5+width], u[j*ld+5:j*ld+5+width])
	}
	got := append([]float32(nil), g...)
	SwiGLURows(got[5:], u[5:], ld, n, width)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("[%d] = %v, row by row %v", i, got[i], want[i])
		}
	}
}

// Argmax finds the first largest value on every tier, past vector tails,
// with ties, infinities and NaNs.
func TestArgmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := [][]float32{{1}, {nan}, {nan, 2, 3, 3}, {-inf, -inf}, {5, nan, 7, 7, 7, 7, 7, 7, 7, 7, 1}}
	for _, n := range []int{3, 8, 9, 100, 8192, 49153} {
		x := randF32(rng, n, 10)
		cases = append(cases, x)
		y := append([]float32(nil), x...)
		y[n-1], y[n/2] = 100, 100 // a tie: the first wins
		cases = append(cases, y)
		z := append([]float32(nil), x...)
		z[n/3] = nan
		cases = append(cases, z)
	}
	for _, x := range cases {
		want := -1
		for i, v := range x { // first index of the largest non-NaN value
			if !math.IsNaN(float64(v)) && (want < 0 || v > x[want]) {
				want = i
			}
		}
		want = max(want, 0)
		for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
			if ForceFeatures(tier) != nil {
				continue
			}
			if got := Argmax(x); got != want {
				t.Fatalf("%s: Argmax of %d values = %d, want %d", tier, len(x), got, want)
			}
		}
		UseGeneric(false)
	}
}
