package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
	"github.com/voxpipe/voxpipe/llm/engine/quant"
)

// kBlocks returns rows×cols weights of typ as random codes and scales, with the fp16 fields set
// to small random values (random bytes there would be NaN or huge).
func kBlocks(rng *rand.Rand, typ gguf.Type, rows, cols int) []byte {
	bb := typ.BlockBytes()
	w := make([]byte, rows*cols/typ.BlockSize()*bb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(w); b += bb {
		put := func(off int, v float64) { binary.LittleEndian.PutUint16(w[b+off:], kernels.F32ToF16(float32(v))) }
		switch typ {
		case gguf.TypeQ6_K:
			put(208, rng.NormFloat64()*1e-3)
		case gguf.TypeQ5_0:
			put(0, rng.NormFloat64()*1e-2)
		default: // d and dmin (K) or d and m (Q5_1)
			put(0, rng.Float64()*1e-3)
			put(2, rng.NormFloat64()*1e-3)
		}
	}
	return w
}

// rowQuantKernels are the row-layout kernels and the type each reads.
var rowQuantKernels = []struct {
	typ gguf.Type
	f   func(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int)
}{
	{gguf.TypeQ4_K, kernels.MatMulQ4_K}, {gguf.TypeQ5_K, kernels.MatMulQ5_K}, {gguf.TypeQ6_K, kernels.MatMulQ6_K},
	{gguf.TypeQ5_0, kernels.MatMulQ5_0}, {gguf.TypeQ5_1, kernels.MatMulQ5_1},
}

func activations(rng *rand.Rand, n, cols int) []byte {
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xq := make([]byte, n*cols/32*kernels.BlockQ8_0)
	kernels.QuantizeQ8_0(xq, x)
	return xq
}

// refMatMul is the float64 product of the decoded weights and decoded activations.
func refMatMul(t *testing.T, typ gguf.Type, w []byte, rows, cols int, xq []byte, n int) (out, mag []float64) {
	wf := make([]float32, rows*cols)
	if err := quant.Dequantize(wf, w, typ); err != nil {
		t.Fatal(err)
	}
	xf := make([]float32, n*cols)
	kernels.DequantizeQ8_0(xf, xq)
	out, mag = make([]float64, n*rows), make([]float64, n*rows)
	for j := 0; j < n; j++ {
		for r := 0; r < rows; r++ {
			var s, m float64
			for i := 0; i < cols; i++ {
				p := float64(wf[r*cols+i]) * float64(xf[j*cols+i])
				s += p
				m += math.Abs(p)
			}
			out[j*rows+r], mag[j*rows+r] = s, m
		}
	}
	return out, mag
}

// TestMatMulK checks the Q4_K, Q5_K, Q6_K, Q5_0 and Q5_1 products on every tier against the
// float64 product of quant's decoders, for one activation row (decode) and several (prompt), on
// a row range.
func TestMatMulK(t *testing.T) {
	defer kernels.UseGeneric(false)
	rng := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 40, 512
	for _, k := range rowQuantKernels {
		w := kBlocks(rng, k.typ, rows, cols)
		for _, n := range []int{1, 5, 11} { // decode, one 4-row tile and a rest, 8-row tiles too
			xq := activations(rng, n, cols)
			want, mag := refMatMul(t, k.typ, w, rows, cols, xq, n)
			for _, tier := range []string{"generic", "avx2", "avx512vnni"} {
				if kernels.ForceFeatures(tier) != nil {
					continue
				}
				t.Run(fmt.Sprintf("%s/n%d/%s", k.typ, n, tier), func(t *testing.T) {
					const r0, r1 = 3, 37
					out := make([]float32, n*rows)
					k.f(out, rows, w, cols, r0, r1, xq, n)
					for j := 0; j < n; j++ {
						for r := 0; r < rows; r++ {
							got, i := out[j*rows+r], j*rows+r
							if r < r0 || r >= r1 {
								if got != 0 {
									t.Fatalf("row %d outside [%d,%d) written", r, r0, r1)
								}
								continue
							}
							if d := math.Abs(float64(got) - want[i]); d > 1e-5*mag[i]+1e-6 {
								t.Fatalf("x%d row %d = %g, want %g (|Δ| %.3g, Σ|w·x| %.3g)", j, r, got, want[i], d, mag[i])
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkMatVecK reports weight bandwidth of the row-layout decode products beside Q8_0 and
// Q4_0 on the same shape, so their ratio is read within one run.
func BenchmarkMatVecK(b *testing.B) {
	defer kernels.UseGeneric(false)
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct{ rows, cols int }{{896, 4864}, {4864, 1024}, {576, 1536}} {
		xq := activations(rng, 1, sh.cols)
		wf := make([]float32, sh.rows*sh.cols)
		for i := range wf {
			wf[i] = float32(rng.NormFloat64() * 0.02)
		}
		w8 := make([]byte, len(wf)/32*kernels.BlockQ8_0)
		kernels.QuantizeQ8_0(w8, wf)
		w4 := make([]byte, len(wf)/32*kernels.BlockQ4_0)
		kernels.QuantizeQ4_0(w4, wf)
		out := make([]float32, sh.rows)
		kinds := []struct {
			name string
			w    []byte
			run  func()
		}{
			{"q8_0", w8, func() { kernels.MatVecQ8_0(out, w8, sh.cols, 0, sh.rows, xq) }},
			{"q4_0", w4, func() { kernels.MatVecQ4_0(out, w4, sh.cols, 0, sh.rows, xq) }},
		}
		for _, k := range rowQuantKernels {
			w := kBlocks(rng, k.typ, sh.rows, sh.cols)
			kinds = append(kinds, struct {
				name string
				w    []byte
				run  func()
			}{strings.ToLower(k.typ.String()), w, func() { k.f(out, sh.rows, w, sh.cols, 0, sh.rows, xq, 1) }})
		}
		for _, k := range kinds {
			b.Run(fmt.Sprintf("%s/%dx%d", k.name, sh.rows, sh.cols), func(b *testing.B) {
				for _, tier := range []string{"generic", "avx2", "avx512vnni"} {
					if kernels.ForceFeatures(tier) != nil {
						continue
					}
					b.Run(tier, func(b *testing.B) {
						for b.Loop() {
							k.run()
						}
						b.ReportMetric(float64(len(k.w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
						b.ReportMetric(float64(sh.rows)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrows/s")
					})
				}
			})
		}
	}
}

// BenchmarkMatMulK reports the row-layout products for a 64-row prompt batch (GFLOP/s of
// 2·rows·cols·n) beside the file-layout Q8_0 product on the same shape.
func BenchmarkMatMulK(b *testing.B) {
	defer kernels.UseGeneric(false)
	rng := rand.New(rand.NewPCG(2, 2))
	const rows, cols, n = 512, 2048, 64
	xq := activations(rng, n, cols)
	wf := make([]float32, rows*cols)
	for i := range wf {
		wf[i] = float32(rng.NormFloat64() * 0.02)
	}
	w8 := make([]byte, len(wf)/32*kernels.BlockQ8_0)
	kernels.QuantizeQ8_0(w8, wf)
	out := make([]float32, n*rows)
	kinds := []struct {
		name string
		run  func()
	}{{"q8_0", func() { kernels.MatMulQ8_0(out, rows, w8, cols, 0, rows, xq, n) }}}
	for _, k := range rowQuantKernels {
		w := kBlocks(rng, k.typ, rows, cols)
		kinds = append(kinds, struct {
			name string
			run  func()
		}{strings.ToLower(k.typ.String()), func() { k.f(out, rows, w, cols, 0, rows, xq, n) }})
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			for _, tier := range []string{"avx2", "avx512vnni"} {
				if kernels.ForceFeatures(tier) != nil {
					continue
				}
				b.Run(tier, func(b *testing.B) {
					for b.Loop() {
						k.run()
					}
					b.ReportMetric(2*float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}
