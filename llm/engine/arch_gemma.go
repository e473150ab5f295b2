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
//
// The window is the kernels' attention over the window's keys and values
// (attendWindow), so it costs what attention over 512 positions costs.

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

// attendWindow is attention over positions [start, npos) of KV head g of
// the current layer. Values are rows, so the window's are a subslice; keys
// are in blocks of kernels.KeyBlock positions, so a window that does not
// start on a block is first re-blocked into the worker's scratch (a copy of
// window·headDim keys, against the window·headDim·heads multiply-adds the
// kernel then does), and the kernels compute it as they compute any prefix.
func (rt *compute) attendWindow(out, q []float32, kv *kvCache, g, start, npos, worker int, probs []float32) {
	hd, grp, n := rt.hp.headDim, rt.hp.heads/rt.hp.kvHeads, npos-start
	l := rt.layer
	if kv.half {
		k := kvHead(kv, kv.k16[l], g)
		if start%kernels.KeyBlock != 0 {
			rt.winK16[worker] = reblockKeys(rt.winK16[worker], k, hd, start, n)
			k = rt.winK16[worker]
		} else {
			k = k[start*hd:]
		}
		kernels.AttendF16(out, q, k, kvHead(kv, kv.v16[l], g)[start*hd:], hd, n, grp, rt.attScale, probs)
		return
	}
	k := kvHead(kv, kv.k[l], g)
	if start%kernels.KeyBlock != 0 {
		rt.winK[worker] = reblockKeys(rt.winK[worker], k, hd, start, n)
		k = rt.winK[worker]
	} else {
		k = k[start*hd:]
	}
	kernels.Attend(out, q, k, kvHead(kv, kv.v[l], g)[start*hd:], hd, n, grp, rt.attScale, probs)
}

// reblockKeys writes keys [start, start+n) of the blocked cache src into
// dst (grown as needed) as a blocked cache of its own, position start at 0.
// A source block's lanes from off = start%KeyBlock on go to the start of a
// destination block, the ones before off to the end of the one before.
func reblockKeys[T float32 | uint16](dst, src []T, hd, start, n int) []T {
	const kb = kernels.KeyBlock
	size := kernels.KeyCacheLen(hd, n)
	if cap(dst) < size {
		dst = make([]T, size)
	}
	dst = dst[:size]
	off := start % kb
	for i := 0; i < n; i += kb {
		// Destination block i/kb takes source lanes [off, kb) of block
		// (start+i)/kb and lanes [0, off) of the next one.
		d := dst[i/kb*kb*hd : (i/kb+1)*kb*hd]
		s0 := (start + i) / kb * kb * hd
		first := kb - off
		last := min(kb, n-i) - first // lanes from the next block (<= 0: none)
		for c := 0; c < hd; c++ {
			copy(d[c*kb:c*kb+min(first, n-i)], src[s0+c*kb+off:s0+c*kb+kb])
			if last > 0 {
				copy(d[c*kb+first:c*kb+first+last], src[s0+kb*hd+c*kb:s0+kb*hd+c*kb+last])
			}
		}
	}
	return dst
}
