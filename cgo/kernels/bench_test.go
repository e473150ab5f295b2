package kernels

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user+system CPU time. The build machine is shared by many jobs, so
// wall-clock rates swing several-fold; rates per CPU second ("cpu-" metrics) stay comparable.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports work/second by wall clock and by CPU time.
func loop(b *testing.B, f func(), work float64, unit string) {
	b.ReportAllocs()
	c0 := cpuTime()
	for b.Loop() {
		f()
	}
	cpu := (cpuTime() - c0).Seconds()
	b.ReportMetric(work*float64(b.N)/b.Elapsed().Seconds(), unit)
	if cpu > 0 {
		b.ReportMetric(work*float64(b.N)/cpu, "cpu-"+unit)
	}
}

// Benchmarks report weight bandwidth (GB/s of weight bytes read) for matvec, the decode-time
// bound, and GFLOP/s (2·rows·cols·n) for matmul, the prompt-time bound, for every tier.

var benchShapes = []struct{ rows, cols int }{{896, 4864}, {576, 1536}, {4864, 896}}

func benchTiers(b *testing.B, f func(b *testing.B)) {
	for _, tier := range []string{"generic", "avx2", "avx512vnni", "amx"} {
		if ForceFeatures(tier) != nil {
			continue
		}
		b.Run(tier, f)
	}
	UseGeneric(false)
}

func BenchmarkMatVec(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range benchShapes {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		x := randF32(rng, sh.cols, 1)
		xq := quantQ8(x)
		w8, w4 := quantQ8(wf), quantQ4(wf)
		w16 := make([]byte, 2*len(wf))
		for i, v := range wf {
			h := F32ToF16(v)
			w16[2*i], w16[2*i+1] = byte(h), byte(h>>8)
		}
		out := make([]float32, sh.rows)
		kinds := []struct {
			name  string
			bytes int
			run   func()
		}{
			{"q8_0", len(w8), func() { MatVecQ8_0(out, w8, sh.cols, 0, sh.rows, xq) }},
			{"q4_0", len(w4), func() { MatVecQ4_0(out, w4, sh.cols, 0, sh.rows, xq) }},
			{"f16", len(w16), func() { MatVecF16(out, w16, sh.cols, 0, sh.rows, x) }},
			{"f32", 4 * len(wf), func() { MatVecF32(out, wf, sh.cols, 0, sh.rows, x) }},
		}
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/%dx%d", k.name, sh.rows, sh.cols), func(b *testing.B) {
				benchTiers(b, func(b *testing.B) { loop(b, k.run, float64(k.bytes)/1e9, "GB/s") })
			})
		}
	}
}

func BenchmarkMatMul(b *testing.B) {
	const n = 64
	rng := rand.New(rand.NewPCG(2, 2))
	for _, sh := range benchShapes {
		wf := randF32(rng, sh.rows*sh.cols, 0.02)
		x := randF32(rng, n*sh.cols, 1)
		xq := quantQ8(x)
		w8, w4 := quantQ8(wf), quantQ4(wf)
		w16 := make([]byte, 2*len(wf))
		for i, v := range wf {
			h := F32ToF16(v)
			w16[2*i], w16[2*i+1] = byte(h), byte(h>>8)
		}
		p8 := make([]byte, PackedQ8_0Size(sh.rows, sh.cols))
		PackQ8_0(p8, w8, sh.rows, sh.cols)
		p4 := make([]byte, PackedQ4_0Size(sh.rows, sh.cols))
		PackQ4_0(p4, w4, sh.rows, sh.cols)
		out := make([]float32, n*sh.rows)
		kinds := []struct {
			name string
			run  func()
		}{
			{"q8_0", func() { MatMulQ8_0(out, sh.rows, w8, sh.cols, 0, sh.rows, xq, n) }},
			// The packed forms are what the engine runs (prompts on AMX where the CPU has it).
			{"q8_0-packed", func() { MatMulPackedQ8_0(out, sh.rows, p8, sh.cols, 0, sh.rows, xq, n) }},
			{"q4_0-packed", func() { MatMulPackedQ4_0(out, sh.rows, p4, sh.cols, 0, sh.rows, xq, n) }},
			{"q4_0", func() { MatMulQ4_0(out, sh.rows, w4, sh.cols, 0, sh.rows, xq, n) }},
			{"f16", func() { MatMulF16(out, sh.rows, w16, sh.cols, 0, sh.rows, x, n) }},
			{"f32", func() { MatMulF32(out, sh.rows, wf, sh.cols, 0, sh.rows, x, n) }},
		}
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/%dx%d/n%d", k.name, sh.rows, sh.cols, n), func(b *testing.B) {
				benchTiers(b, func(b *testing.B) { loop(b, k.run, 2*float64(sh.rows)*float64(sh.cols)*n/1e9, "GFLOP/s") })
			})
		}
	}
}

func BenchmarkQuantizeQ8_0(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	x := randF32(rng, 4864, 1)
	dst := make([]byte, len(x)/QK*BlockQ8_0)
	benchTiers(b, func(b *testing.B) { loop(b, func() { QuantizeQ8_0(dst, x) }, float64(len(x))/1e9, "Gelem/s") })
}
