package kernels

import (
	"fmt"
	"sync"
)

// Packed Q4_0 is the Q4_0 counterpart of packed Q8_0 (PackQ8_0): a load-time relayout for the
// products of one and of many activation rows. Rows go in groups of PackRows; a group holds
// nb = cols/32 blocks of 16·PackRows nibble bytes and then nb × PackRows fp16 scales. In a block the
// rows' 16 bytes are interleaved in 4-byte pieces (piece q of every row of the group, then piece
// q+1, ...), bytes as in the file: the low nibble of byte j is element j, the high nibble element
// j+16, each the unsigned q of value (q-8)·d. A 64-byte load then holds piece q of all 16 rows; its
// low nibbles multiply activation bytes 4q..4q+3 and its high nibbles bytes 16+4q..16+4q+3, and a
// dot-product instruction leaves row i's partial sum in lane i (no horizontal reduction).
//
// A group is exactly as large as its rows of plain Q4_0 (PackRows × nb × 18 bytes); a last group
// with fewer rows is padded with rows of value 0 (nibbles 8, scale 0).

// PackedQ4_0Size is the size of rows × cols Q4_0 weights in the packed layout.
func PackedQ4_0Size(rows, cols int) int {
	return (rows + PackRows - 1) / PackRows * PackRows * rowBytes(cols, BlockQ4_0)
}

// packed4At returns the offset of row i's piece q byte e in block b of a group; packed4Scale that
// of row i's scale for block b (the scales follow the nb blocks).
func packed4At(b, q, i, e int) int  { return b*16*PackRows + q*4*PackRows + i*4 + e }
func packed4Scale(nb, b, i int) int { return nb*16*PackRows + b*2*PackRows + 2*i }

// PackQ4_0 writes the packed form of rows × cols Q4_0 weights src (plain ggml rows) into dst,
// which must hold PackedQ4_0Size bytes.
func PackQ4_0(dst, src []byte, rows, cols int) {
	rb := rowBytes(cols, BlockQ4_0)
	if len(src) < rows*rb || len(dst) < PackedQ4_0Size(rows, cols) {
		panic(fmt.Sprintf("kernels: pack %d×%d Q4_0: src %d bytes (need %d), dst %d (need %d)",
			rows, cols, len(src), rows*rb, len(dst), PackedQ4_0Size(rows, cols)))
	}
	packGroups(dst, src, rows, rb, BlockQ4_0, 0, 0x88) // padding: both nibbles 8, the value 0
}

// DequantizePackedQ4_0Row writes row r of packed cols-wide Q4_0 weights as float32 (embedding
// lookups of a packed table); the values equal DequantizeQ4_0's of the plain row.
func DequantizePackedQ4_0Row(dst []float32, w []byte, cols, r int) {
	nb := rowBytes(cols, BlockQ4_0) / BlockQ4_0
	gb := PackRows * nb * BlockQ4_0
	grp := w[r/PackRows*gb:][:gb]
	i := r % PackRows
	dst = dst[:cols]
	for b := 0; b < nb; b++ {
		d := loadF16(grp[packed4Scale(nb, b, i):])
		for q := 0; q < 4; q++ {
			for e := 0; e < 4; e++ {
				v := grp[packed4At(b, q, i, e)]
				dst[b*32+4*q+e] = float32(int(v&0xf)-8) * d
				dst[b*32+16+4*q+e] = float32(int(v>>4)-8) * d
			}
		}
	}
}

// MatMulPackedQ4_0 sets out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n, with W packed
// by PackQ4_0 from a matrix of at least r1 rows and X quantized by QuantizeQ8_0 (rows cols/32·34
// bytes apart). r0 must be a multiple of PackRows. With n = 1, ldo is unused.
//
// Numerics are those of the SIMD plain-layout Q4_0 kernels (MatVecQ4_0, MatMulQ4_0 on AVX2 and
// AVX-512), so repacking changes no result on those tiers: per block s = Σ(q-8)·x over its 32
// elements exactly in integers, acc = fma(float(s)·d_x, d_w, acc), blocks in order, and the result
// is acc. The same on every tier and for every n, so one-row and batched products of the same pair
// are bit-identical.
func MatMulPackedQ4_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	ldo, work := packedArgs("Q4_0", out, ldo, w, r0, r1, xq, n, rowBytes(cols, BlockQ4_0), rowBytes(cols, BlockQ8_0))
	if !work {
		return
	}
	if l := currentLevel(); l == levelAMX && n >= amxRows {
		withOwnPrep(xq, n, cols, func(p *Q8Prep) { amxMatMulPackedQ4_0(out, ldo, w, r0, r1, p) })
		return
	} else if l != levelGeneric {
		simdMatMulPackedQ4_0(l, out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulPackedQ4_0(out, ldo, w, cols, r0, r1, xq, n)
}

// MatMulPackedQ4_0Prepared is MatMulPackedQ4_0 with the activation rows of p (bit-identical
// results); on the AMX tier it uses p's tile layout, elsewhere the rows as they are.
func MatMulPackedQ4_0Prepared(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep) {
	if p.level != levelAMX || currentLevel() != levelAMX {
		MatMulPackedQ4_0(out, ldo, w, p.cols, r0, r1, p.xq, p.n)
		return
	}
	ldo, work := packedArgs("Q4_0", out, ldo, w, r0, r1, p.xq, p.n, rowBytes(p.cols, BlockQ4_0), rowBytes(p.cols, BlockQ8_0))
	if work {
		amxMatMulPackedQ4_0(out, ldo, w, r0, r1, p)
	}
}

// unpackPool holds the AMX Q4_0 product's buffers for one group's nibbles widened to bytes.
var unpackPool sync.Pool

// amxMatMulPackedQ4_0 runs the AMX Q4_0 product of rows prepared for AMX, with a buffer of its own
// for the widened weights (calls run on several threads at once).
func amxMatMulPackedQ4_0(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep) {
	size := p.cols / QK * 512
	ub, _ := unpackPool.Get().(*[]byte)
	if ub == nil || cap(*ub) < size {
		b := make([]byte, size)
		ub = &b
	}
	simdMatMulPackedQ4_0AMX(out, ldo, w, r0, r1, p, (*ub)[:size])
	unpackPool.Put(ub)
}

func genericMatMulPackedQ4_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	nb := cols / QK
	xrow := nb * BlockQ8_0
	gb := PackRows * nb * BlockQ4_0
	for r := r0; r < r1; r++ {
		grp := w[r/PackRows*gb : (r/PackRows+1)*gb]
		i := r % PackRows
		for j := 0; j < n; j++ {
			x := xq[j*xrow : (j+1)*xrow]
			var acc float32
			for b := 0; b < nb; b++ {
				xb := x[b*BlockQ8_0 : (b+1)*BlockQ8_0]
				var s0, s1 int32
				for q := 0; q < 4; q++ {
					for e := 0; e < 4; e++ {
						v := grp[packed4At(b, q, i, e)]
						s0 += (int32(v&0xf) - 8) * int32(int8(xb[2+4*q+e]))
						s1 += (int32(v>>4) - 8) * int32(int8(xb[18+4*q+e]))
					}
				}
				dx, dw := loadF16(xb), loadF16(grp[packed4Scale(nb, b, i):])
				acc = fma32(float32(s0+s1)*dx, dw, acc)
			}
			out[j*ldo+r] = acc
		}
	}
}
