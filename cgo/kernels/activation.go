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

// Attend is decoder attention for one query row and one KV head: for each of the nq query heads in
// q (nq·hd floats) it scores the npos visible keys of k (rows of hd floats), takes softmax(scale·s)
// and writes Σ_t p[t]·v[t] to out (nq·hd floats), v holding value rows of hd floats. probs is npos
// floats of scratch. The result for a row never depends on what other rows or sequences are
// processed with it. The SIMD path needs hd to be a multiple of 8 (every supported model's is);
// other sizes take the portable path.
func Attend(out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	if !attendArgs(len(out), len(q), len(k), len(v), len(probs), hd, npos, nq) {
		return
	}
	if currentLevel() != levelGeneric && hd%8 == 0 {
		simdAttend(out, q, k, v, hd, npos, nq, scale, probs)
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
	if out < nq*hd || q < nq*hd || k < npos*hd || v < npos*hd || probs < npos {
		panic("kernels: attend: slices too short for the given sizes")
	}
	return true
}

func genericAttend(out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	p := probs[:npos]
	for h := 0; h < nq; h++ {
		qh := q[h*hd : (h+1)*hd]
		for t := range p {
			p[t] = genericDotF32(qh, k[t*hd:(t+1)*hd])
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
	if currentLevel() != levelGeneric && hd%8 == 0 {
		simdAttendF16(out, q, k, v, hd, npos, nq, scale, probs)
		return
	}
	genericAttendF16(out, q, k, v, hd, npos, nq, scale, probs)
}

func genericAttendF16(out, q []float32, k, v []uint16, hd, npos, nq int, scale float32, probs []float32) {
	p := probs[:npos]
	var stack [256]float32
	row := stack[:]
	if hd > len(row) {
		row = make([]float32, hd)
	}
	row = row[:hd]
	for h := 0; h < nq; h++ {
		qh := q[h*hd : (h+1)*hd]
		for t := range p {
			// Widened first, so each score is genericAttend's on the same values.
			for d, x := range k[t*hd : (t+1)*hd] {
				row[d] = f16Table[x]
			}
			p[t] = genericDotF32(qh, row)
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
