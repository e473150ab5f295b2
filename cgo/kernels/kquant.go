package kernels

import (
	"encoding/binary"
	"fmt"
)

// K-quant super-blocks: 256 elements each.
const (
	QKK      = 256 // elements per K-quant super-block
	BlockQ4K = 144 // fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
	BlockQ5K = 176 // Q4_K's fields, then 32 bytes of fifth bits before the nibbles
	BlockQ6K = 210 // 128 bytes low nibbles, 64 bytes high 2-bit parts, 16 int8 scales, fp16 d

	BlockQ5_0 = 22 // fp16 d, 32 fifth bits, 16 bytes of nibbles
	BlockQ5_1 = 24 // fp16 d, fp16 m, 32 fifth bits, 16 bytes of nibbles
)

// rowQuant names a weight type the row-layout K-quant kernels read.
type rowQuant int

const (
	rqQ4K rowQuant = iota
	rqQ5K
	rqQ6K
	rqQ5_0
	rqQ5_1
)

// rowQuants: elements and bytes per block, and the generic dot of one row.
var rowQuants = [...]struct {
	qk, bb int
	dot    func(w, xq []byte) float32
}{
	rqQ4K:  {QKK, BlockQ4K, genericDotQ4_K},
	rqQ5K:  {QKK, BlockQ5K, genericDotQ5_K},
	rqQ6K:  {QKK, BlockQ6K, genericDotQ6_K},
	rqQ5_0: {QK, BlockQ5_0, genericDotQ5_0},
	rqQ5_1: {QK, BlockQ5_1, genericDotQ5_1},
}

func matMulRowQuant(k rowQuant, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	rq := rowQuants[k]
	if cols%rq.qk != 0 {
		panic(fmt.Sprintf("kernels: row length %d is not a multiple of the block size %d", cols, rq.qk))
	}
	if !checkMul(len(out), ldo, n, len(w), cols/rq.qk*rq.bb, r0, r1, len(xq), rowBytes(cols, BlockQ8_0)) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulRowQuant(k, currentLevel(), out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulK(out, ldo, w, cols, r0, r1, xq, n, cols/rq.qk*rq.bb, rq.dot)
}

// MatMulQ4_K sets out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n: Q4_K weights in the
// GGUF row layout (cols a multiple of 256) against activation rows quantized with QuantizeQ8_0.
// Every 32 weights are summed with their activations in integers, then scaled by d·sc·d_x; the
// mins by dmin·m·d_x·Σx. n = 1 is the decode matvec.
func MatMulQ4_K(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	matMulRowQuant(rqQ4K, out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulQ5_K is MatMulQ4_K for Q5_K weights (a fifth bit per weight).
func MatMulQ5_K(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	matMulRowQuant(rqQ5K, out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulQ6_K is MatMulQ4_K for Q6_K weights (every 16 weights summed in integers).
func MatMulQ6_K(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	matMulRowQuant(rqQ6K, out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulQ5_0 is MatMulQ4_K for Q5_0 weights (cols a multiple of 32): value d·(q − 16).
func MatMulQ5_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	matMulRowQuant(rqQ5_0, out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulQ5_1 is MatMulQ5_0 for Q5_1 weights: value d·q + m.
func MatMulQ5_1(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	matMulRowQuant(rqQ5_1, out, ldo, w, cols, r0, r1, xq, n)
}

func genericMatMulK(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n, wr int,
	dot func(w, x []byte) float32) {
	xr := cols / QK * BlockQ8_0
	for r := r0; r < r1; r++ {
		row := w[r*wr : (r+1)*wr]
		for j := 0; j < n; j++ {
			out[j*ldo+r] = dot(row, xq[j*xr:(j+1)*xr])
		}
	}
}

func f16At(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// q8Sum returns Σx over elements [lo, hi) of a Q8_0 block.
func q8Sum(blk []byte, lo, hi int) int32 {
	var s int32
	for _, v := range blk[2+lo : 2+hi] {
		s += int32(int8(v))
	}
	return s
}

func genericDotQ4_K(w, xq []byte) float32 {
	var acc, accm float32
	for s := 0; s < len(w)/BlockQ4K; s++ {
		b := w[s*BlockQ4K : (s+1)*BlockQ4K]
		d, dmin := f16At(b), f16At(b[2:])
		for j := 0; j < 8; j++ {
			scale, mn := kScaleMin(j, b[4:16])
			x := xq[(8*s+j)*BlockQ8_0 : (8*s+j+1)*BlockQ8_0]
			dx := f16At(x)
			qs := b[16+32*(j/2) : 16+32*(j/2)+32]
			var isum int32
			for l := 0; l < 32; l++ {
				q := qs[l] >> (4 * uint(j%2)) & 15
				isum += int32(q) * int32(int8(x[2+l]))
			}
			acc += d * float32(scale) * dx * float32(isum)
			accm += dmin * float32(mn) * dx * float32(q8Sum(x, 0, 32))
		}
	}
	return acc - accm
}

func genericDotQ6_K(w, xq []byte) float32 {
	var acc float32
	for s := 0; s < len(w)/BlockQ6K; s++ {
		b := w[s*BlockQ6K : (s+1)*BlockQ6K]
		d := f16At(b[208:])
		for blk := 0; blk < 8; blk++ {
			h, k := blk/4, blk%4
			ql := b[64*h+32*(k%2) : 64*h+32*(k%2)+32]
			qh := b[128+32*h : 128+32*h+32]
			x := xq[(8*s+blk)*BlockQ8_0 : (8*s+blk+1)*BlockQ8_0]
			dx := f16At(x)
			for half := 0; half < 2; half++ {
				var isum int32
				for l := 16 * half; l < 16*half+16; l++ {
					q := int32(ql[l]>>(4*uint(k/2))&15 | (qh[l]>>(2*uint(k))&3)<<4)
					isum += (q - 32) * int32(int8(x[2+l]))
				}
				acc += d * float32(int8(b[192+2*blk+half])) * dx * float32(isum)
			}
		}
	}
	return acc
}

// kScaleMin unpacks sub-block j's 6-bit scale and min from the 12 scale bytes of Q4_K and Q5_K.
func kScaleMin(j int, sc []byte) (scale, mn byte) {
	if j < 4 {
		return sc[j] & 63, sc[j+4] & 63
	}
	return sc[j+4]&15 | (sc[j-4]>>6)<<4, sc[j+4]>>4 | (sc[j]>>6)<<4
}

func genericDotQ5_K(w, xq []byte) float32 {
	var acc, accm float32
	for s := 0; s < len(w)/BlockQ5K; s++ {
		b := w[s*BlockQ5K : (s+1)*BlockQ5K]
		d, dmin := f16At(b), f16At(b[2:])
		qh := b[16:48]
		for j := 0; j < 8; j++ {
			scale, mn := kScaleMin(j, b[4:16])
			x := xq[(8*s+j)*BlockQ8_0 : (8*s+j+1)*BlockQ8_0]
			dx := f16At(x)
			qs := b[48+32*(j/2) : 48+32*(j/2)+32]
			var isum int32
			for l := 0; l < 32; l++ {
				q := qs[l]>>(4*uint(j%2))&15 | (qh[l]>>uint(j)&1)<<4
				isum += int32(q) * int32(int8(x[2+l]))
			}
			acc += d * float32(scale) * dx * float32(isum)
			accm += dmin * float32(mn) * dx * float32(q8Sum(x, 0, 32))
		}
	}
	return acc - accm
}

// q5Dot is the generic Q5_0 (offset false: value d·(q − 16)) or Q5_1 (value d·q + m) row dot.
func q5Dot(w, xq []byte, bb int, offset bool) float32 {
	var acc float32
	qo := bb - 16 // the nibbles are the last 16 bytes
	for b := 0; b < len(w)/bb; b++ {
		blk := w[b*bb : (b+1)*bb]
		x := xq[b*BlockQ8_0 : (b+1)*BlockQ8_0]
		d, dx := f16At(blk), f16At(x)
		qh := binary.LittleEndian.Uint32(blk[qo-4:])
		var isum int32
		for j := 0; j < 16; j++ {
			lo := int32(blk[qo+j]&15) | int32(qh>>uint(j)&1)<<4
			hi := int32(blk[qo+j]>>4) | int32(qh>>uint(j+16)&1)<<4
			isum += lo*int32(int8(x[2+j])) + hi*int32(int8(x[18+j]))
		}
		xs := float32(q8Sum(x, 0, 32))
		if offset {
			acc += d*dx*float32(isum) + f16At(blk[2:])*dx*xs
		} else {
			acc += d * dx * (float32(isum) - 16*xs)
		}
	}
	return acc
}

func genericDotQ5_0(w, xq []byte) float32 { return q5Dot(w, xq, BlockQ5_0, false) }
func genericDotQ5_1(w, xq []byte) float32 { return q5Dot(w, xq, BlockQ5_1, true) }
