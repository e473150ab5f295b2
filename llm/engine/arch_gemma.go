package engine

import (
	"fmt"
	"math"
	"sync"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// Gemma 3 (general.architecture "gemma3"), as llama.cpp runs it:
//   - token embeddings scaled by √n_embd; tied output (token_embd) unless
//     the file has output.weight;
//   - RMS norms everywhere, with the weights as stored (Gemma's 1+w is
//     folded in by the converter): attn_norm, then q and k per-head norms
//     (attn_q_norm, attn_k_norm), post_attention_norm on the attention's
//     output before the residual add, ffn_norm, post_ffw_norm on the FFN's
//     output before its residual add;
//   - NeoX RoPE; sliding-window layers (all but every
//     attention.sliding_window_pattern-th, default 6) use
//     rope.freq_base_swa (default 10000) unscaled and see only the latest
//     attention.sliding_window positions; the global layers use
//     rope.freq_base with the file's linear rope scaling;
//   - q·k scaled by 1/√head_dim (1/√(n_embd/n_head) for the 62-layer 27B,
//     as llama.cpp does);
//   - FFN down(gelu(gate)·up), GELU in its tanh form through an fp16 table,
//     as ggml computes it on the CPU;
//   - optional final_logit_softcapping.

// readGemma3 reads Gemma 3's own metadata into hp (the common keys are read).
func readGemma3(f *gguf.File, hp *hyperParams) error {
	key := func(k string) string { return archKey(hp.arch, k) }
	hp.embScale = float32(math.Sqrt(float64(hp.dim)))
	hp.attnScale = float32(1 / math.Sqrt(float64(hp.headDim)))
	if hp.layers == 62 {
		hp.attnScale = float32(1 / math.Sqrt(float64(hp.dim/hp.heads)))
	}
	hp.ropeBaseSWA = 10000
	if v, ok := f.Float(key("rope.freq_base_swa")); ok && v > 0 {
		hp.ropeBaseSWA = float32(v)
	}
	if t, ok := f.String(key("rope.scaling.type")); ok && t != "linear" && t != "none" {
		return fmt.Errorf("%w: %s = %q (the engine does linear RoPE scaling only)", ErrUnsupportedArch, key("rope.scaling.type"), t)
	}
	factor, ok := f.Float(key("rope.scaling.factor"))
	if !ok {
		factor, _ = f.Float(key("rope.scale_linear"))
	}
	if factor > 0 && factor != 1 {
		hp.ropeScale = float32(1 / factor)
	}
	if v, ok := f.Float(key("final_logit_softcapping")); ok && v > 0 {
		hp.softcap = float32(v)
	}
	window, ok := f.Uint(key("attention.sliding_window"))
	if !ok || window == 0 {
		return nil // every layer global
	}
	if window > 1<<30 {
		return fmt.Errorf("%w: %s = %d is out of range", ErrBadShape, key("attention.sliding_window"), window)
	}
	pattern := uint64(6)
	if _, _, present := f.ValueType(key("attention.sliding_window_pattern")); present {
		if pattern, ok = f.Uint(key("attention.sliding_window_pattern")); !ok || pattern > 1<<20 {
			return fmt.Errorf("%w: %s is not a layer period (a per-layer array is not supported)", ErrBadShape, key("attention.sliding_window_pattern"))
		}
	}
	hp.swaWindow = int(window)
	hp.swa = make([]bool, hp.layers)
	for l := range hp.swa {
		hp.swa[l] = pattern == 0 || uint64(l)%pattern < pattern-1
	}
	return nil
}

// ropeInvFreq is the RoPE inverse frequencies for base, times scale
// (linear scaling; 0 = none), divided by the file's rope_freqs if any.
func ropeInvFreq(hp *hyperParams, base, scale float32) []float64 {
	inv := make([]float64, hp.ropeDims/2)
	for i := range inv {
		f := math.Pow(float64(base), -2*float64(i)/float64(hp.ropeDims))
		if hp.ropeFreqs != nil {
			f /= float64(hp.ropeFreqs[i])
		}
		if scale != 0 {
			f *= float64(scale)
		}
		inv[i] = f
	}
	return inv
}

// geluTable holds ggml's CPU GELU: gelu(x) for every fp16 x, rounded to
// fp16. ggml looks x up by its fp16 rounding for |x| < 10, so the FFN
// matches llama.cpp's to the bit on the activation.
var (
	geluOnce  sync.Once
	geluTable []float32
)

func geluF32(x float32) float32 {
	const a, s = 0.044715, 0.79788456080286535587989211986876
	return 0.5 * x * (1 + float32(math.Tanh(float64(s*x*(1+a*x*x)))))
}

func gelu16() []float32 {
	geluOnce.Do(func() {
		geluTable = make([]float32, 1<<16)
		for i := range geluTable {
			geluTable[i] = kernels.F16ToF32(kernels.F32ToF16(geluF32(kernels.F16ToF32(uint16(i)))))
		}
	})
	return geluTable
}

// gegluRows sets g = gelu(g)·u over n rows of width values ld apart, as
// ggml's geglu: 0 below -10, the identity above 10, the table between.
func gegluRows(g, u []float32, ld, n, width int) {
	t := gelu16()
	for j := 0; j < n; j++ {
		gr, ur := g[j*ld:j*ld+width], u[j*ld:j*ld+width]
		for i, x := range gr {
			switch {
			case x <= -10:
				gr[i] = 0
			case x >= 10:
				gr[i] = x * ur[i]
			default:
				gr[i] = t[kernels.F32ToF16(x)] * ur[i]
			}
		}
	}
}

// softcapLogits maps logits to c·tanh(logit/c).
func softcapLogits(logits []float32, c float32) {
	for i, x := range logits {
		logits[i] = c * float32(math.Tanh(float64(x/c)))
	}
}

// windowStart is the first position a query at position npos-1 of layer l
// sees: npos-window on a sliding-window layer, 0 otherwise.
func (hp *hyperParams) windowStart(l, npos int) int {
	if hp.swa == nil || !hp.swa[l] || npos <= hp.swaWindow {
		return 0
	}
	return npos - hp.swaWindow
}

// attendWindow is kernels.Attend (AttendF16) over positions [start, npos)
// of KV head g, for a window that does not start on a key block: the
// kernels score whole blocks from position 0, so this reads the blocked
// keys itself. Scalar Go, only for sliding-window layers past their window.
func attendWindow(out, q []float32, kv *kvCache, layer, g, hd, start, npos, nq int, scale float32, probs []float32) {
	n := npos - start
	p := probs[:n]
	var k32, v32 []float32
	var k16, v16 []uint16
	if kv.half {
		k16, v16 = kvHead(kv, kv.k16[layer], g), kvHead(kv, kv.v16[layer], g)
	} else {
		k32, v32 = kvHead(kv, kv.k[layer], g), kvHead(kv, kv.v[layer], g)
	}
	for h := 0; h < nq; h++ {
		qh := q[h*hd : (h+1)*hd]
		best := float32(math.Inf(-1))
		for i := range p {
			t := start + i
			base := t/kernels.KeyBlock*kernels.KeyBlock*hd + t%kernels.KeyBlock
			var s float32
			if kv.half {
				for d, x := range qh {
					s += x * kernels.F16ToF32(k16[base+d*kernels.KeyBlock])
				}
			} else {
				for d, x := range qh {
					s += x * k32[base+d*kernels.KeyBlock]
				}
			}
			s *= scale
			p[i] = s
			best = max(best, s)
		}
		var sum float32
		for i, s := range p {
			e := float32(math.Exp(float64(s - best)))
			p[i] = e
			sum += e
		}
		inv := 1 / sum
		oh := out[h*hd : (h+1)*hd]
		clear(oh)
		for i, pt := range p {
			pt *= inv
			t := start + i
			if kv.half {
				for d, x := range v16[t*hd : (t+1)*hd] {
					oh[d] += pt * kernels.F16ToF32(x)
				}
			} else {
				for d, x := range v32[t*hd : (t+1)*hd] {
					oh[d] += pt * x
				}
			}
		}
	}
}
