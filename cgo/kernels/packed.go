package kernels

import (
	"fmt"
	"math"
	"sync"
)

// Packed Q8_0 is a load-time relayout of Q8_0 weights for the batched products. Rows go in groups
// of PackRows; a group holds nb = cols/32 blocks of 32·PackRows weight bytes and then nb ×
// PackRows fp16 scales. In a block the rows' 32 values are interleaved in 4-byte pieces (piece q of
// every row of the group, then piece q+1, ...), each byte stored as value+128. One load then holds a
// piece of all the group's rows, so a dot-product instruction leaves row i's partial sum in lane i:
// no horizontal reduction, and each weight load feeds every activation row of the call. That makes
// a product over n activation rows cost little more than one while n is small (speculative
// verification, continuous batching), and prompts faster too.
//
// A group is exactly as large as its rows of plain Q8_0 (PackRows × nb × 34 bytes); a last group
// with fewer rows is padded with zero rows.

// PackRows is the row-group height of the packed layout; row ranges given to MatMulPackedQ8_0
// start at multiples of it.
const PackRows = 16

// PackedQ8_0Size is the size of rows × cols Q8_0 weights in the packed layout.
func PackedQ8_0Size(rows, cols int) int {
	return (rows + PackRows - 1) / PackRows * PackRows * rowBytes(cols, BlockQ8_0)
}

// packedAt returns the offset of row i's piece q byte e in block b of a group; packedScale that
// of row i's scale for block b (the scales follow the nb blocks).
func packedAt(b, q, i, e int) int  { return b*32*PackRows + q*4*PackRows + i*4 + e }
func packedScale(nb, b, i int) int { return nb*32*PackRows + b*2*PackRows + 2*i }

// PackQ8_0 writes the packed form of rows × cols Q8_0 weights src (plain ggml rows) into dst,
// which must hold PackedQ8_0Size bytes.
func PackQ8_0(dst, src []byte, rows, cols int) {
	rb := rowBytes(cols, BlockQ8_0)
	if len(src) < rows*rb || len(dst) < PackedQ8_0Size(rows, cols) {
		panic(fmt.Sprintf("kernels: pack %d×%d: src %d bytes (need %d), dst %d (need %d)",
			rows, cols, len(src), rows*rb, len(dst), PackedQ8_0Size(rows, cols)))
	}
	// Stored as q+128: the kernels multiply unsigned weights by signed activations.
	packGroups(dst, src, rows, rb, BlockQ8_0, 0x80, 0x80)
}

// packGroups writes rows of plain blocks (a 2-byte scale, then pieces of 4 weight bytes) in the
// packed layout shared by Q8_0 and Q4_0: in each group of PackRows rows, block b's piece q of row i
// at b·4P·PackRows + q·4·PackRows + 4i (P pieces a block), then the groups' scales. flip is XORed
// into every weight byte; rows past the last are padding, bytes pad (the value 0) and scale 0.
func packGroups(dst, src []byte, rows, rb, blockBytes int, flip, pad byte) {
	nb, pieces := rb/blockBytes, (blockBytes-2)/4
	gb := PackRows * rb
	for g := 0; g < (rows+PackRows-1)/PackRows; g++ {
		grp := dst[g*gb : (g+1)*gb]
		for i := 0; i < PackRows; i++ {
			r := g*PackRows + i
			for b := 0; b < nb; b++ {
				sc := grp[nb*4*pieces*PackRows+b*2*PackRows+2*i:][:2]
				if r >= rows {
					sc[0], sc[1] = 0, 0
					for q := 0; q < pieces; q++ {
						p := grp[b*4*pieces*PackRows+q*4*PackRows+i*4:][:4]
						p[0], p[1], p[2], p[3] = pad, pad, pad, pad
					}
					continue
				}
				blk := src[r*rb+b*blockBytes:][:blockBytes]
				sc[0], sc[1] = blk[0], blk[1]
				for q := 0; q < pieces; q++ {
					p, w := grp[b*4*pieces*PackRows+q*4*PackRows+i*4:][:4], blk[2+4*q:][:4]
					p[0], p[1], p[2], p[3] = w[0]^flip, w[1]^flip, w[2]^flip, w[3]^flip
				}
			}
		}
	}
}

// DequantizePackedQ8_0Row writes row r of packed cols-wide weights as float32 (embedding lookups
// of a packed table).
func DequantizePackedQ8_0Row(dst []float32, w []byte, cols, r int) {
	nb := rowBytes(cols, BlockQ8_0) / BlockQ8_0
	gb := PackRows * nb * BlockQ8_0
	grp := w[r/PackRows*gb:][:gb]
	i := r % PackRows
	dst = dst[:cols]
	for b := 0; b < nb; b++ {
		d := loadF16(grp[packedScale(nb, b, i):])
		for q := 0; q < 8; q++ {
			for e := 0; e < 4; e++ {
				dst[b*32+4*q+e] = d * float32(int8(grp[packedAt(b, q, i, e)]^0x80))
			}
		}
	}
}

// MatMulPackedQ8_0 sets out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n, with W packed
// by PackQ8_0 from a matrix of rows ≥ r1 rows and X quantized by QuantizeQ8_0 (rows cols/32·34 bytes
// apart). r0 must be a multiple of PackRows. With n = 1, ldo is unused. Per block the integer sum is exact
// and then acc = fma(float(s)·d_x, d_w, acc), the same operations on every tier and for every n, so
// one-row and batched products of the same pair are bit-identical.
func MatMulPackedQ8_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	rb := rowBytes(cols, BlockQ8_0)
	ldo, work := packedArgs("Q8_0", out, ldo, w, r0, r1, xq, n, rb, rb)
	if !work {
		return
	}
	if l := currentLevel(); l == levelAMX && n >= amxRows {
		withOwnPrep(xq, n, cols, func(p *Q8Prep) { simdMatMulPackedQ8_0Prepared(out, ldo, w, r0, r1, p) })
		return
	} else if l != levelGeneric {
		simdMatMulPackedQ8_0(l, out, ldo, w, cols, r0, r1, xq, n)
		return
	}
	genericMatMulPackedQ8_0(out, ldo, w, cols, r0, r1, xq, n)
}

// amxRows is the AMX tile height: packed products of at least this many activation rows use tiles.
const amxRows = 16

// Q8Prep holds activation rows quantized by QuantizeQ8_0 together with what the packed products
// derive from them: each block's scale as float32 and its −128·Σx, and on the AMX tier the rows'
// values rearranged tile by tile. The engine prepares each matrix input once for all the products
// and threads that read it; MatMulPackedQ8_0 does the same work on every call, which for the
// engine's row chunks repeated it 2-12 times per input. The zero value is ready to use; buffers
// are reused.
type Q8Prep struct {
	xq      []byte
	n, cols int
	level   level // the tier it was prepared for (generic: nothing derived, products take xq)
	xd      []float32
	xs      []int32
	xt      []byte // AMX: the first n rounded down to 16 rows, tile by tile
}

// prepPool serves the preparations of products called with bare rows (withOwnPrep).
var prepPool = sync.Pool{New: func() any { return new(Q8Prep) }}

// withOwnPrep runs the product f on rows xq prepared in a pooled Q8Prep: MatMulPackedQ8_0 and
// MatMulPackedQ4_0 called with bare rows on the AMX tier, where q8 makes no difference.
func withOwnPrep(xq []byte, n, cols int, f func(p *Q8Prep)) {
	p := prepPool.Get().(*Q8Prep)
	p.Prepare(xq, n, cols, true)
	f(p)
	p.xq = nil // keep no reference to the caller's rows
	prepPool.Put(p)
}

// Prepare records n rows xq (cols wide) for the packed products that read them and, for 16 rows
// or more, derives what the current tier's products use: the block scales and sums for Q8_0
// products (q8: a Q8_0 weight reads the rows), and on AMX those and the tile layout for Q8_0 and
// Q4_0 alike (the other tiers' Q4_0 products take the bare rows). Below 16 rows (decoding, small
// batches) the per-call work is a few hundred cycles and nothing is derived. p keeps xq until the
// next Prepare: the rows must not change meanwhile.
func (p *Q8Prep) Prepare(xq []byte, n, cols int, q8 bool) {
	rb := rowBytes(cols, BlockQ8_0)
	if n < 0 || len(xq) < n*rb {
		panic(fmt.Sprintf("kernels: prepare %d rows of %d columns from %d bytes (need %d)", n, cols, len(xq), n*rb))
	}
	p.xq, p.n, p.cols, p.level = xq[:n*rb], n, cols, currentLevel()
	if n < amxRows || (p.level != levelAMX && !q8) {
		p.level = levelGeneric
	}
	if p.level == levelGeneric {
		return
	}
	nb := cols / QK
	p.xd = grow(p.xd, n*nb)
	p.xs = grow(p.xs, n*nb)
	simdPrepareQ8(p)
	if p.level == levelAMX {
		p.xt = grow(p.xt, n/amxRows*amxRows*cols)
		simdTilesQ8(p)
	}
}

// Reset forgets the rows: Holds is false until the next Prepare.
func (p *Q8Prep) Reset() { p.xq = nil }

// Holds reports whether p was last prepared from exactly the rows xq (the same memory and length).
func (p *Q8Prep) Holds(xq []byte) bool {
	return len(xq) > 0 && len(p.xq) == len(xq) && &p.xq[0] == &xq[0]
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// MatMulPackedQ8_0Prepared is MatMulPackedQ8_0 with the activation rows of p (bit-identical
// results), without redoing p's work.
func MatMulPackedQ8_0Prepared(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep) {
	l := currentLevel()
	if p.level != l || l == levelGeneric {
		MatMulPackedQ8_0(out, ldo, w, p.cols, r0, r1, p.xq, p.n)
		return
	}
	rb := rowBytes(p.cols, BlockQ8_0)
	ldo, work := packedArgs("Q8_0", out, ldo, w, r0, r1, p.xq, p.n, rb, rb)
	if work {
		simdMatMulPackedQ8_0Prepared(out, ldo, w, r0, r1, p)
	}
}

// packedArgs checks the arguments of a packed product of kind (Q8_0, Q4_0)
// whose weight rows are rb bytes and activation rows xrb bytes, panicking on
// any that would read or write out of bounds. It returns the ldo to use (0
// for one activation row) and whether there is anything to compute.
func packedArgs(kind string, out []float32, ldo int, w []byte, r0, r1 int, xq []byte, n, rb, xrb int) (int, bool) {
	if r0 < 0 || r1 < r0 || n < 0 {
		panic(fmt.Sprintf("kernels: bad row range [%d, %d) or n %d", r0, r1, n))
	}
	if r0 == r1 || n == 0 {
		return ldo, false
	}
	if r0%PackRows != 0 {
		panic(fmt.Sprintf("kernels: packed product from row %d, not a multiple of %d", r0, PackRows))
	}
	if n == 1 {
		ldo = 0
	} else if ldo < r1 {
		panic(fmt.Sprintf("kernels: packed product ldo %d < r1 %d", ldo, r1))
	}
	if wNeed := (r1 + PackRows - 1) / PackRows * PackRows * rb; len(out) < (n-1)*ldo+r1 || len(w) < wNeed || len(xq) < n*xrb {
		panic(fmt.Sprintf("kernels: packed %s product rows [%d,%d) n %d: out %d (need %d), w %d (need %d), x %d (need %d)",
			kind, r0, r1, n, len(out), (n-1)*ldo+r1, len(w), wNeed, len(xq), n*xrb))
	}
	return ldo, true
}

func genericMatMulPackedQ8_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	nb := cols / QK
	xrow := nb * BlockQ8_0
	gb := PackRows * xrow
	for r := r0; r < r1; r++ {
		grp := w[r/PackRows*gb : (r/PackRows+1)*gb]
		i := r % PackRows
		for j := 0; j < n; j++ {
			x := xq[j*xrow : (j+1)*xrow]
			var acc float32
			for b := 0; b < nb; b++ {
				xb := x[b*BlockQ8_0 : (b+1)*BlockQ8_0]
				var s int32
				for q := 0; q < 8; q++ {
					for e := 0; e < 4; e++ {
						s += int32(int8(grp[packedAt(b, q, i, e)]^0x80)) * int32(int8(xb[2+4*q+e]))
					}
				}
				p := float32(s) * loadF16(xb)
				acc = fma32(p, loadF16(grp[packedScale(nb, b, i):]), acc)
			}
			out[j*ldo+r] = acc
		}
	}
}

// fma32 is a float32 fused multiply-add: the float64 product of two float32 values is exact, so
// only the final roundings remain (float64, then float32), which match a true fused operation
// except in rare double-rounding ties.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}
