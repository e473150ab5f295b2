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
		for _, tier := range []string{"avx2", "avx512vnni"} {
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

// Attend matches a float64 reference on every tier, for head sizes with and
// without vector tails and visible lengths around the 8-position blocks.
func TestAttendMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, hd := range []int{32, 48, 64, 128, 72} {
		for _, npos := range []int{1, 7, 8, 9, 100} {
			const nq = 2
			q := randF32(rng, nq*hd, 1)
			k := randF32(rng, npos*hd, 1)
			v := randF32(rng, npos*hd, 1)
			scale := float32(1 / math.Sqrt(float64(hd)))
			want := make([]float64, nq*hd)
			for h := 0; h < nq; h++ {
				s := make([]float64, npos)
				maxS := math.Inf(-1)
				for p := range s {
					for d := 0; d < hd; d++ {
						s[p] += float64(q[h*hd+d]) * float64(k[p*hd+d])
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
			for _, tier := range []string{"generic", "avx2", "avx512vnni"} {
				if ForceFeatures(tier) != nil {
					continue
				}
				out := make([]float32, nq*hd)
				Attend(out, q, k, v, hd, npos, nq, scale, make([]float32, npos))
				for i := range out {
					if d := math.Abs(float64(out[i]) - want[i]); d > 1e-5 {
						t.Fatalf("%s hd=%d npos=%d: out[%d] = %v, reference %v", tier, hd, npos, i, out[i], want[i])
					}
				}
			}
			UseGeneric(false)
		}
	}
}

// BenchmarkAttend is one decode row's attention for one KV head (2 query
// heads, head size 64) at several context lengths, keys and values in cache.
func BenchmarkAttend(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, npos := range []int{100, 500} {
		const hd, nq = 64, 2
		q := randF32(rng, nq*hd, 1)
		k := randF32(rng, npos*hd, 1)
		v := randF32(rng, npos*hd, 1)
		out := make([]float32, nq*hd)
		probs := make([]float32, npos)
		b.Run(fmt.Sprintf("npos=%d", npos), func(b *testing.B) {
			loop(b, func() { Attend(out, q, k, v, hd, npos, nq, 0.125, probs) }, 4*float64(nq*npos*hd)/1e9, "GFLOP/s")
		})
	}
}

// The fp16 cache path: conversion matches F32ToF16 exactly on every tier, and
// AttendF16 equals Attend on the same values widened back to float32.
func TestAttendF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, hd := range []int{32, 64, 72} {
		for _, npos := range []int{1, 9, 100} {
			const nq = 2
			q := randF32(rng, nq*hd, 1)
			kf := randF32(rng, npos*hd, 1)
			vf := randF32(rng, npos*hd, 1)
			for _, tier := range []string{"generic", "avx2", "avx512vnni"} {
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
					if want := F32ToF16(kf[i]); k16[i] != want {
						t.Fatalf("%s: F32ToF16Row(%v) = %#04x, F32ToF16 %#04x", tier, kf[i], k16[i], want)
					}
					kw[i], vw[i] = F16ToF32(k16[i]), F16ToF32(v16[i])
				}
				want := make([]float32, nq*hd)
				got := make([]float32, nq*hd)
				Attend(want, q, kw, vw, hd, npos, nq, 0.125, make([]float32, npos))
				AttendF16(got, q, k16, v16, hd, npos, nq, 0.125, make([]float32, npos))
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
