package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

var tinyPrompt = []int32{1, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271, 272, 273, 274, 275, 280, 290, 300, 301, 302, 303, 304, 305}

func tinyRuntime(t testing.TB, s tinySpec, threads, batch int) *compute {
	t.Helper()
	_, m := testModel(t, writeTiny(t, s))
	rt := newCompute(m, threads, s.ctx, batch)
	t.Cleanup(rt.close)
	return rt
}

func allLogits(t testing.TB, rt *compute, tokens []int32) []float32 {
	t.Helper()
	kv := newKVCache(rt.hp, rt.ctxSize)
	out := make([]float32, len(tokens)*rt.hp.vocab)
	if err := rt.forward(context.Background(), kv, tokens, 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBatchedMatchesIncremental(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ4_0} {
			t.Run(fmt.Sprintf("%s-%s", arch, typ), func(t *testing.T) {
				// Batch 8 so the prompt spans several batches.
				rt := tinyRuntime(t, defaultTiny(arch, typ), 2, 8)
				vocab := rt.hp.vocab
				all := allLogits(t, rt, tinyPrompt)
				kv := newKVCache(rt.hp, rt.ctxSize)
				var d float64
				for i, id := range tinyPrompt {
					if err := rt.forward(context.Background(), kv, []int32{id}, i, nil); err != nil {
						t.Fatal(err)
					}
					d = max(d, maxAbsDiff(rt.logits, all[i*vocab:(i+1)*vocab]))
				}
				// Bit for bit: every product does the same operations in
				// the same order for one row and for many (the packed Q8_0
				// and Q4_0 kernels by design; measured 0 on every type and
				// on the AVX-512, AVX2 and generic tiers, VOXPIPE_KERNELS),
				// so any difference is a batching bug, not rounding.
				t.Logf("batched vs incremental max|Δ| %.3g", d)
				if d != 0 {
					t.Errorf("batched vs incremental max|Δ| %.3g, want 0", d)
				}
			})
		}
	}
}

func TestKVReuseMatchesFresh(t *testing.T) {
	rt := tinyRuntime(t, defaultTiny("qwen2", gguf.TypeQ8_0), 2, 8)
	all := allLogits(t, rt, tinyPrompt)
	vocab := rt.hp.vocab
	// Prefix first, then the rest on the same cache (a later turn).
	kv := newKVCache(rt.hp, rt.ctxSize)
	split := 11
	if err := rt.forward(context.Background(), kv, tinyPrompt[:split], 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := rt.forward(context.Background(), kv, tinyPrompt[split:], split, nil); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(rt.logits, all[(len(tinyPrompt)-1)*vocab:]); d > 1e-5 {
		t.Errorf("reused KV prefix vs fresh: max|Δ| %.3g", d)
	}
	// Rewinding overwrites the stale tail.
	if err := rt.forward(context.Background(), kv, tinyPrompt[split:], split, nil); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(rt.logits, all[(len(tinyPrompt)-1)*vocab:]); d > 1e-5 {
		t.Errorf("rewound KV vs fresh: max|Δ| %.3g", d)
	}
}

func TestQ8CloseToF32(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		f := allLogits(t, tinyRuntime(t, defaultTiny(arch, gguf.TypeF32), 2, 64), tinyPrompt)
		q := allLogits(t, tinyRuntime(t, defaultTiny(arch, gguf.TypeQ8_0), 2, 64), tinyPrompt)
		var scale float64
		for _, v := range f {
			scale = max(scale, float64(v), -float64(v))
		}
		d := maxAbsDiff(f, q)
		t.Logf("%s: F32 vs Q8_0 max|Δ| %.3g (max|logit| %.3g)", arch, d, scale)
		if d > 0.05*scale {
			t.Errorf("%s: Q8_0 logits differ from F32 by %.3g (scale %.3g)", arch, d, scale)
		}
	}
}

func TestGenericKernelsSameGreedy(t *testing.T) {
	if kernels.Features() == "generic" {
		t.Skip("SIMD kernels unavailable on this CPU (generic only)")
	}
	for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0, gguf.TypeQ4_0} {
		rt := tinyRuntime(t, defaultTiny("llama", typ), 2, 8)
		run := func() []int32 {
			kv := newKVCache(rt.hp, rt.ctxSize)
			if err := rt.forward(context.Background(), kv, tinyPrompt, 0, nil); err != nil {
				t.Fatal(err)
			}
			ids, _ := greedy(t, rt, kv, len(tinyPrompt), 16)
			return ids
		}
		simd := run()
		kernels.UseGeneric(true)
		gen := run()
		kernels.UseGeneric(false)
		if fmt.Sprint(simd) != fmt.Sprint(gen) {
			t.Errorf("%s: SIMD greedy %v, generic %v", typ, simd, gen)
		}
	}
}

func TestDecodeAllocatesNothing(t *testing.T) {
	rt := tinyRuntime(t, defaultTiny("qwen2", gguf.TypeQ8_0), 2, 8)
	kv := newKVCache(rt.hp, rt.ctxSize)
	kv.reserve(rt.ctxSize)
	s := newSampler(rt.hp.vocab)
	s.reset(samplerParams{temperature: 0.8, topK: 40, topP: 0.9, minP: 0.05, repeatPenalty: 1.1, seed: 3}, nil)
	one := []int32{5}
	pos := 0
	allocs := testing.AllocsPerRun(50, func() {
		if err := rt.forward(context.Background(), kv, one, pos, nil); err != nil {
			t.Fatal(err)
		}
		one[0] = s.sample(rt.logits)
		s.accept(one[0])
		pos++
	})
	if allocs != 0 {
		t.Errorf("decode step allocates %.1f times per token", allocs)
	}
}

type countRunner struct{ hits []atomic.Int32 }

func (c *countRunner) runChunk(op, chunk, worker int) { c.hits[chunk].Add(1) }

func TestPoolRunsEachChunkOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		c := &countRunner{hits: make([]atomic.Int32, 1000)}
		p := newPool(threads, c)
		for n := 1; n <= 1000; n += 37 {
			for i := range c.hits[:n] {
				c.hits[i].Store(0)
			}
			p.run(0, n)
			for i := range c.hits[:n] {
				if h := c.hits[i].Load(); h != 1 {
					t.Fatalf("threads %d n %d: chunk %d ran %d times", threads, n, i, h)
				}
			}
		}
		p.close()
	}
}

func TestContextFull(t *testing.T) {
	s := defaultTiny("llama", gguf.TypeF32)
	s.ctx = 16
	rt := tinyRuntime(t, s, 1, 8)
	kv := newKVCache(rt.hp, rt.ctxSize)
	if err := rt.forward(context.Background(), kv, tinyPrompt, 0, nil); !errors.Is(err, ErrContextFull) {
		t.Fatalf("got %v, want ErrContextFull", err)
	}
}

// A context that is not a whole number of key blocks, and one whose cache
// grows past kvGrowStep, fill to the last position with one-token passes
// (the cache growing as it goes) exactly as batched passes over a cache
// sized for the whole context at once do (fp16 and float32 caches), and
// the next position is refused.
func TestContextEdgesMatchIncremental(t *testing.T) {
	for _, ctx := range []int{25, 300} {
		for _, typ := range []gguf.Type{gguf.TypeF32, gguf.TypeQ8_0} {
			t.Run(fmt.Sprintf("ctx=%d/%s", ctx, typ), func(t *testing.T) {
				s := defaultTiny("llama", typ)
				s.ctx = ctx
				rt := tinyRuntime(t, s, 2, 8)
				rt.hp.kvHalf = typ == gguf.TypeQ8_0
				tokens := make([]int32, ctx)
				for i := range tokens {
					tokens[i] = tinyPrompt[i%len(tinyPrompt)] + int32(i%7)
				}
				vocab := rt.hp.vocab
				all := make([]float32, ctx*vocab)
				whole := newKVCache(rt.hp, rt.ctxSize)
				whole.reserve(ctx)
				if err := rt.forward(context.Background(), whole, tokens, 0, all); err != nil {
					t.Fatal(err)
				}
				kv := newKVCache(rt.hp, rt.ctxSize)
				var d float64
				for i, id := range tokens {
					if err := rt.forward(context.Background(), kv, []int32{id}, i, nil); err != nil {
						t.Fatal(err)
					}
					d = max(d, maxAbsDiff(rt.logits, all[i*vocab:(i+1)*vocab]))
				}
				if tol := map[bool]float64{false: 1e-4, true: 0.02}[typ == gguf.TypeQ8_0]; d > tol {
					t.Errorf("batched vs incremental max|Δ| %.3g > %g", d, tol)
				}
				if err := rt.forward(context.Background(), kv, tokens[:1], ctx, nil); !errors.Is(err, ErrContextFull) {
					t.Errorf("position %d of a %d context: got %v, want ErrContextFull", ctx, ctx, err)
				}
			})
		}
	}
}

// smolShape is SmolLM2-135M's shape with random weights.
func smolShape(typ gguf.Type) tinySpec {
	return tinySpec{arch: "llama", typ: typ, dim: 576, layers: 30, heads: 9, kvHeads: 3, ffn: 1536, ctx: 1024, seed: 1, vocab: 49152}
}

func benchDecode(b *testing.B, typ gguf.Type, threads int) {
	rt := tinyRuntime(b, smolShape(typ), threads, defaultBatch)
	kv := newKVCache(rt.hp, rt.ctxSize)
	kv.reserve(rt.ctxSize)
	one := []int32{5}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rt.forward(context.Background(), kv, one, i%512, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func benchPrompt(b *testing.B, typ gguf.Type, threads int) {
	rt := tinyRuntime(b, smolShape(typ), threads, defaultBatch)
	kv := newKVCache(rt.hp, rt.ctxSize)
	kv.reserve(rt.ctxSize)
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(300 + i*37)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := rt.forward(context.Background(), kv, prompt, 0, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeSmolQ8(b *testing.B)  { benchDecode(b, gguf.TypeQ8_0, 2) }
func BenchmarkDecodeSmolF32(b *testing.B) { benchDecode(b, gguf.TypeF32, 2) }
func BenchmarkPromptSmolQ8(b *testing.B)  { benchPrompt(b, gguf.TypeQ8_0, 2) }

// TestRowChunksBalanced checks the row chunks of the real shapes' matrices: chunk heights are
// whole packed groups, at most maxChunkRows, and when the threads claim them in turn (equal
// speeds) no thread streams more than 5% and one packed group more rows than the average: a decode step waits for the
// last thread at every matrix. The old rule (rows/4 clamped to 1024) gave Qwen2.5-0.5B's 4864-row
// FFN matrices chunks of 1024,1024,1024,1024,768, 16% above the average for one thread.
func TestRowChunksBalanced(t *testing.T) {
	for _, threads := range []int{2, 4} {
		rt := &compute{threads: threads}
		for _, rows := range []int{576, 896, 1536, 2048, 4864, 8192, 49152, 128256, 151936} {
			rpc := rt.rowsPerChunk(rows)
			if rpc%kernels.PackRows != 0 || rpc > maxChunkRows || rpc < 64 {
				t.Errorf("threads %d rows %d: chunk %d rows", threads, rows, rpc)
				continue
			}
			load := make([]int, threads)
			for c, r0 := 0, 0; r0 < rows; c, r0 = c+1, r0+rpc {
				load[c%threads] += min(rpc, rows-r0)
			}
			most := 0
			for _, l := range load {
				most = max(most, l)
			}
			if avg := float64(rows) / float64(threads); float64(most) > 1.05*avg+kernels.PackRows {
				t.Errorf("threads %d rows %d: chunks of %d rows, the busiest thread streams %d rows (average %.0f)", threads, rows, rpc, most, avg)
			}
		}
	}
}

// TestPackedQ4_0MatchesFileLayout: Q4_0 matrices repacked at load (kernels.PackQ4_0) give the very
// logits, batched and token by token, and greedy ids of the file layout's kernels on every SIMD
// tier, so the packed layout changes no output.
func TestPackedQ4_0MatchesFileLayout(t *testing.T) {
	defer kernels.UseGeneric(false)
	for _, arch := range []string{"llama", "qwen2"} {
		path := writeTiny(t, defaultTiny(arch, gguf.TypeQ4_0))
		for _, tier := range []string{"avx2", "avx512vnni", "amx"} {
			if kernels.ForceFeatures(tier) != nil {
				continue // not on this CPU
			}
			var logits [2][]float32
			var ids [2][]int32
			for i, repack := range []bool{false, true} {
				_, m := testModelLayout(t, path, repack)
				if lw := m.layers[0].wGate; lw.typ != gguf.TypeQ4_0 || lw.packed != repack {
					t.Fatalf("%s: ffn_gate is %s, packed %v (want Q4_0, packed %v)", arch, lw.typ, lw.packed, repack)
				}
				rt := newCompute(m, 2, 256, 8)
				logits[i] = allLogits(t, rt, tinyPrompt)
				kv := newKVCache(rt.hp, rt.ctxSize)
				for p, id := range tinyPrompt {
					if err := rt.forward(context.Background(), kv, []int32{id}, p, nil); err != nil {
						t.Fatal(err)
					}
				}
				ids[i], _ = greedy(t, rt, kv, len(tinyPrompt), 24)
				rt.close()
			}
			for k := range logits[0] {
				if math.Float32bits(logits[0][k]) != math.Float32bits(logits[1][k]) {
					t.Fatalf("%s %s: logit %d: file layout %v, packed %v", arch, tier, k, logits[0][k], logits[1][k])
				}
			}
			if fmt.Sprint(ids[0]) != fmt.Sprint(ids[1]) {
				t.Errorf("%s %s: greedy file layout %v, packed %v", arch, tier, ids[0], ids[1])
			}
		}
	}
}
