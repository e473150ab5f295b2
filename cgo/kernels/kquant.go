package kernels

import (
	"encoding/binary"
	"fmt"
)

// K-quant super-blocks: 256 elements each.
const (
	QKK      = 256 // elements per K-quant super-block
	BlockQ4K = 144 // fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
	BlockQ6K = 210 // 128 bytes low nibbles, 64 bytes high 2-bit parts, 16 int8 scales, fp16 d
)

func kRowBytes(cols, blockBytes int) int {
	if cols%QKK != 0 {
		panic(fmt.Sprintf("kernels: K-quant row length %d is not a multiple of %d", cols, QKK))
	}
	return cols / QKK * blockBytes
}

// MatMulQ4_K sets out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n: Q4_K weights in the
// GGUF row layout (cols a multiple of 256) against activation rows quantized with QuantizeQ8_0.
// Every 32 weights are summed with their activations in integers, then scaled by d·sc·d_x; the
// mins by dmin·m·d_x·Σx. n = 1 is the decode matvec.
func MatMulQ4_K(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if !checkMul(len(out), ldo, n, len(w), kRowBytes(cols, BlockQ4K), r0, r1, len(xq), rowBytes(cols, BlockQ8_0)) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulQ4_K(currentLevel(), out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulK(out, ldo, w, cols, r0, r1, xq, n, BlockQ4K, genericDotQ4_K)
}

// MatMulQ6_K is MatMulQ4_K for Q6_K weights (every 16 weights summed in integers).
func MatMulQ6_K(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if !checkMul(len(out), ldo, n, len(w), kRowBytes(cols, BlockQ6K), r0, r1, len(xq), rowBytes(cols, BlockQ8_0)) {
		return
	}
	if currentLevel() != levelGeneric {
		simdMatMulQ6_K(currentLevel(), out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulK(out, ldo, w, cols, r0, r1, xq, n, BlockQ6K, genericDotQ6_K)
}

func genericMatMulK(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n, bb int,
	dot func(w, x []byte) float32) {
	wr, xr := cols/QKK*bb, cols/QK*BlockQ8_0
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
		sc := b[4:16]
		for j := 0; j < 8; j++ {
			var scale, mn byte
			if j < 4 {
				scale, mn = sc[j]&63, sc[j+4]&63
			} else {
				scale, mn = sc[j+4]&15|(sc[j-4]>>6)<<4, sc[j+4]>>4|(sc[j]>>6)<<4
			}
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
