package kernels

import "math"

// SwiGLU sets g[i] = silu(g[i])·u[i] = g[i]/(1+e^−g[i])·u[i], the gated activation of
// Llama-family feed-forward layers.
func SwiGLU(g, u []float32) {
	u = u[:len(g)]
	if len(g) == 0 {
		return
	}
	if currentLevel() != levelGeneric {
		simdSwiGLU(g, u)
		return
	}
	genericSwiGLU(g, u)
}

// SwiGLURows applies SwiGLU to n rows of width values that start ld apart in g and u.
func SwiGLURows(g, u []float32, ld, n, width int) {
	if n <= 0 || width <= 0 {
		return
	}
	last := (n-1)*ld + width
	g, u = g[:last], u[:last]
	if currentLevel() != levelGeneric {
		simdSwiGLURows(g, u, ld, n, width)
		return
	}
	genericSwiGLURows(g, u, ld, n, width)
}

func genericSwiGLURows(g, u []float32, ld, n, width int) {
	for j := 0; j < n; j++ {
		genericSwiGLU(g[j*ld:j*ld+width], u[j*ld:j*ld+width])
	}
}

// Rope rotates the first 2·len(cos) values of each of heads rows of hd floats in x (rotary
// position embedding) by the angles whose cosines and sines are cos and sin: adjacent pairs
// (x[2i], x[2i+1]), Llama's layout, or else halves (x[i], x[i+len(cos)]), NeoX's. Every tier
// rounds alike.
func Rope(x []float32, heads, hd int, cos, sin []float32, adjacent bool) {
	half := len(cos)
	if heads <= 0 || half == 0 {
		return
	}
	if 2*half > hd {
		panic("kernels: rope: rotated part wider than a head")
	}
	x, sin = x[:heads*hd], sin[:half]
	if currentLevel() != levelGeneric {
		simdRope(x, heads, hd, cos, sin, adjacent)
		return
	}
	genericRope(x, heads, hd, cos, sin, adjacent)
}

func genericRope(x []float32, heads, hd int, cos, sin []float32, adjacent bool) {
	half := len(cos)
	for h := 0; h < heads; h++ {
		xh := x[h*hd : (h+1)*hd]
		for i := 0; i < half; i++ {
			a, b := i, i+half
			if adjacent {
				a, b = 2*i, 2*i+1
			}
			x0, x1 := xh[a], xh[b]
			xh[a] = x0*cos[i] - x1*sin[i]
			xh[b] = x0*sin[i] + x1*cos[i]
		}
	}
}

// Argmax returns the first index of the largest value of x (greedy decoding's token); NaNs never
// win, and it returns 0 when every value is NaN or x is empty.
func Argmax(x []float32) int {
	if len(x) == 0 {
		return 0
	}
	if currentLevel() != levelGeneric {
		return simdArgmax(x)
	}
	return genericArgmax(x)
}

func genericArgmax(x []float32) int {
	best, bv := 0, float32(math.Inf(-1))
	for i, v := range x {
		if v > bv {
			best, bv = i, v
		}
	}
	return best
}

// RMSNorm writes src/rms(src)·w to dst (dst may alias src), rms(x) = √(mean(x²)+eps), the
// sum of squares taken in float64 as ggml does.
func RMSNorm(dst, src, w []float32, eps float32) {
	if len(src) == 0 {
		return
	}
	dst, w = dst[:len(src)], w[:len(src)]
	if currentLevel() != levelGeneric {
		simdRMSNorm(dst, src, w, eps)
		return
	}
	genericRMSNorm(dst, src, w, eps)
}

func genericRMSNorm(dst, src, w []float32, eps float32) {
	var ss float64
	for _, v := range src {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(src))+float64(eps)))
	for i, v := range src {
		dst[i] = v * scale * w[i]
	}
}

// Softmax replaces s by softmax(scale·s): the attention weights of one query row.
func Softmax(s []float32, scale float32) {
	if len(s) == 0 {
		return
	}
	if currentLevel() != levelGeneric {
		simdSoftmax(s, scale)
		return
	}
	genericSoftmax(s, scale)
}

func genericSwiGLU(g, u []float32) {
	for i, a := range g {
		g[i] = a / (1 + Exp(-a)) * u[i]
	}
}

func genericSoftmax(s []float32, scale float32) {
	maxS := float32(math.Inf(-1))
	for t, v := range s {
		v *= scale
		s[t] = v
		maxS = max(maxS, v)
	}
	var sum float32
	for t, v := range s {
		e := Exp(v - maxS)
		s[t] = e
		sum += e
	}
	inv := 1 / sum
	for t := range s {
		s[t] *= inv
	}
}

// Exp is e^x in float32: range reduction to r in [-ln2/2, ln2/2] and a degree-6 polynomial
// (relative error ~2e-7), several times faster than math.Exp and good to float32 precision. The
// SIMD activations use the same algorithm.
func Exp(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if x > 88.3762626647949 {
		return float32(math.Inf(1))
	}
	if x < -87.3365447505531 {
		return 0
	}
	// Round to nearest; the +256 keeps the operand positive so the truncating conversion acts as
	// floor.
	n := float32(int32(x*log2e+0.5+256) - 256)
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// KeyBlock is the number of positions in one block of a key cache. Attend and AttendF16 read keys
// in blocks of KeyBlock positions, each block dimension-major ([hd][KeyBlock]): the scores of a
// block are then the lanes of one vector, built from one broadcast query value and one key load
// per dimension, and that load serves every query head sharing the KV head. StoreKey and
// StoreKeyF16 write a key row into this layout; a key cache holds whole blocks.
const KeyBlock = 16

// KeyCacheLen is the length a key cache for npos positions of head size hd needs: whole blocks.
func KeyCacheLen(hd, npos int) int { return (npos + KeyBlock - 1) / KeyBlock * KeyBlock * hd }

// keyIndex is where dimension d of position t's key lives in a blocked key cache.
func keyIndex(hd, t, d int) int { return t/KeyBlock*KeyBlock*hd + d*KeyBlock + t%KeyBlock }

// StoreKey writes the key row of position t (hd floats) into the blocked key cache k.
func StoreKey(k []float32, hd, t int, row []float32) {
	base := keyIndex(hd, t, 0)
	k = k[base : base+(hd-1)*KeyBlock+1]
	for d, x := range row[:hd] {
		k[d*KeyBlock] = x
	}
}

// StoreKeyF16 writes the key row of position t (hd floats) into the blocked fp16 key cache k,
// rounding as F32ToF16Row does.
func StoreKeyF16(k []uint16, hd, t int, row []float32) {
	base := keyIndex(hd, t, 0)
	_ = k[base+(hd-1)*KeyBlock] // the row's last value is in range
	row = row[:hd]
	if currentLevel() != levelGeneric {
		simdStoreKeyF16(k, hd, t, row)
		return
	}
	genericStoreKeyF16(k, hd, t, row)
}

func genericStoreKeyF16(k []uint16, hd, t int, row []float32) {
	base := keyIndex(hd, t, 0)
	for d, x := range row[:hd] {
		k[base+d*KeyBlock] = F32ToF16(x)
	}
}

// Attend is decoder attention for one query row and one KV head: for each of the nq query heads in
// q (nq·hd floats) it scores the npos visible keys of k (a blocked key cache, see KeyBlock; at
// least KeyCacheLen(hd, npos) floats), takes softmax(scale·s) and writes Σ_t p[t]·v[t] to out
// (nq·hd floats), v holding value rows of hd floats. probs is nq·npos floats of scratch. The result
// for a row never depends on what other rows or sequences are processed with it. The SIMD path
// needs hd to be a multiple of 16 (every supported model's is); other sizes take the portable
// path.
func Attend(out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	if !attendArgs(len(out), len(q), len(k), len(v), len(probs), hd, npos, nq) {
		return
	}
	if l := currentLevel(); l != levelGeneric && hd%16 == 0 {
		simdAttend(l, out, q, k, v, hd, npos, nq, scale, probs)
		return
	}
	genericAttend(out, q, k, v, hd, npos, nq, scale, probs)
}

// attendArgs checks Attend's slice lengths (panicking like an out-of-range index) and reports
// whether there is anything to do.
func attendArgs(out, q, k, v, probs, hd, npos, nq int) bool {
	if npos <= 0 || nq <= 0 {
		return false
	}
	if out < nq*hd || q < nq*hd || k < KeyCacheLen(hd, npos) || v < npos*hd || probs < nq*npos {
		panic("kernels: attend: slices too short for the given sizes")
	}
	return true
}

func genericAttend(out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	p := probs[:npos]
	for h := 0; h < nq; h++ {
		qh := q[h*hd : (h+1)*hd]
		for t := range p {
			var s float32
			for d, x := range qh {
				s += x * k[keyIndex(hd, t, d)]
			}
			p[t] = s
		}
		genericSoftmax(p, scale)
		oh := out[h*hd : (h+1)*hd]
		clear(oh)
		for t, pt := range p {
			vr := v[t*hd : (t+1)*hd]
			for d := range oh {
				oh[d] += pt * vr[d]
			}
		}
	}
}

// AttendF16 is Attend with keys and values stored as fp16 (an F16 KV cache: half the bytes to
// read per position); q, out and the arithmetic stay float32.
func AttendF16(out, q []float32, k, v []uint16, hd, npos, nq int, scale float32, probs []float32) {
	if !attendArgs(len(out), len(q), len(k), len(v), len(probs), hd, npos, nq) {
		return
	}
	if l := currentLevel(); l != levelGeneric && hd%16 == 0 {
		simdAttendF16(l, out, q, k, v, hd, npos, nq, scale, probs)
		return
	}
	genericAttendF16(out, q, k, v, hd, npos, nq, scale, probs)
}

func genericAttendF16(out, q []float32, k, v []uint16, hd, npos, nq int, scale float32, probs []float32) {
	p := probs[:npos]
	for h := 0; h < nq; h++ {
		qh := q[h*hd : (h+1)*hd]
		for t := range p {
			var s float32
			for d, x := range qh {
				s += x * f16Table[k[keyIndex(hd, t, d)]]
			}
			p[t] = s
		}
		genericSoftmax(p, scale)
		oh := out[h*hd : (h+1)*hd]
		clear(oh)
		for t, pt := range p {
			for d, x := range v[t*hd : (t+1)*hd] {
				oh[d] += pt * f16Table[x]
			}
		}
	}
}

// F32ToF16Row converts src to fp16 in dst (round to nearest even), e.g. a key or value row into
// an F16 KV cache.
func F32ToF16Row(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	if currentLevel() != levelGeneric {
		simdF32ToF16(dst, src)
		return
	}
	genericF32ToF16(dst, src)
}

func genericF32ToF16(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = F32ToF16(f)
	}
}
