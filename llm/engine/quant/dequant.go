package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// Dequantize decodes src, whole blocks of typ, into dst (len(dst) elements, a multiple of typ's
// block size; src exactly their bytes). These are the generic, pure-Go decoders of the GGML block
// formats the engine reads: they turn the types that have no compute kernel into ones that do
// (see the engine's model loading) and are the reference the packed kernels are tested against.
func Dequantize(dst []float32, src []byte, typ gguf.Type) error {
	bs, bb := typ.BlockSize(), typ.BlockBytes()
	dec, ok := decoders[typ]
	if !ok {
		return fmt.Errorf("quant: %s: %w", typ, ErrSourceType)
	}
	if len(dst)%bs != 0 || len(src) != len(dst)/bs*bb {
		return fmt.Errorf("quant: %s: %d elements in %d bytes: %w", typ, len(dst), len(src), ErrTensorSize)
	}
	for b := 0; b < len(dst)/bs; b++ {
		dec(dst[b*bs:(b+1)*bs], src[b*bb:(b+1)*bb])
	}
	return nil
}

// CanDequantize reports whether Dequantize decodes typ.
func CanDequantize(typ gguf.Type) bool { _, ok := decoders[typ]; return ok }

// DequantizableTypes lists the types Dequantize decodes, in ggml's numbering order.
func DequantizableTypes() []gguf.Type {
	var ts []gguf.Type
	for t := gguf.Type(0); t < 64; t++ {
		if CanDequantize(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// decoders decode one block each: dst holds the block's elements, src its bytes.
var decoders = map[gguf.Type]func(dst []float32, src []byte){
	gguf.TypeF32: func(dst []float32, src []byte) {
		dst[0] = math.Float32frombits(binary.LittleEndian.Uint32(src))
	},
	gguf.TypeF16: func(dst []float32, src []byte) { dst[0] = f16(src) },
	gguf.TypeBF16: func(dst []float32, src []byte) {
		dst[0] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src)) << 16)
	},
	gguf.TypeQ8_0:   kernels.DequantizeQ8_0,
	gguf.TypeQ4_0:   kernels.DequantizeQ4_0,
	gguf.TypeQ4_1:   decodeQ4_1,
	gguf.TypeQ5_0:   decodeQ5_0,
	gguf.TypeQ5_1:   decodeQ5_1,
	gguf.TypeIQ4_NL: decodeIQ4NL,
	gguf.TypeQ2_K:   decodeQ2K,
	gguf.TypeQ3_K:   decodeQ3K,
	gguf.TypeQ4_K:   decodeQ4K,
	gguf.TypeQ5_K:   decodeQ5K,
	gguf.TypeQ6_K:   decodeQ6K,
	gguf.TypeIQ4_XS: decodeIQ4XS,
}

func f16(b []byte) float32 { return kernels.F16ToF32(binary.LittleEndian.Uint16(b)) }

// Q4_1: fp16 scale d, fp16 offset m, 16 bytes of 4-bit codes; element j is the low nibble of
// byte j, element j+16 its high nibble; value = d·q + m.
func decodeQ4_1(dst []float32, src []byte) {
	d, m := f16(src), f16(src[2:])
	qs := src[4:20]
	for j := 0; j < 16; j++ {
		dst[j] = d*float32(qs[j]&15) + m
		dst[j+16] = d*float32(qs[j]>>4) + m
	}
}

// fifthBits returns the 5-bit codes of a Q5_0/Q5_1 block: nibbles as in Q4_1, and bit j of the
// little-endian 32-bit qh is the fifth bit of element j.
func fifthBits(qh uint32, qs []byte, j int) (lo, hi int) {
	lo = int(qs[j]&15) | int(qh>>uint(j)&1)<<4
	hi = int(qs[j]>>4) | int(qh>>uint(j+16)&1)<<4
	return lo, hi
}

// Q5_0: fp16 d, 32-bit qh, 16 bytes of nibbles; value = d·(q − 16).
func decodeQ5_0(dst []float32, src []byte) {
	d := f16(src)
	qh := binary.LittleEndian.Uint32(src[2:])
	qs := src[6:22]
	for j := 0; j < 16; j++ {
		lo, hi := fifthBits(qh, qs, j)
		dst[j] = d * float32(lo-16)
		dst[j+16] = d * float32(hi-16)
	}
}

// Q5_1: fp16 d, fp16 m, 32-bit qh, 16 bytes of nibbles; value = d·q + m.
func decodeQ5_1(dst []float32, src []byte) {
	d, m := f16(src), f16(src[2:])
	qh := binary.LittleEndian.Uint32(src[4:])
	qs := src[8:24]
	for j := 0; j < 16; j++ {
		lo, hi := fifthBits(qh, qs, j)
		dst[j] = d*float32(lo) + m
		dst[j+16] = d*float32(hi) + m
	}
}

// iq4nlValues is the non-linear codebook of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
var iq4nlValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// IQ4_NL: fp16 d, 16 bytes of nibbles indexing the codebook; value = d·book[q].
func decodeIQ4NL(dst []float32, src []byte) {
	d := f16(src)
	qs := src[2:18]
	for j := 0; j < 16; j++ {
		dst[j] = d * float32(iq4nlValues[qs[j]&15])
		dst[j+16] = d * float32(iq4nlValues[qs[j]>>4])
	}
}

// IQ4_XS: fp16 d, 16-bit high scale bits, 4 bytes of low scale nibbles, 128 bytes of codebook
// nibbles; 8 sub-blocks of 32, each with a 6-bit scale (low nibble from scales_l, two high bits
// from scales_h) minus 32.
func decodeIQ4XS(dst []float32, src []byte) {
	d := f16(src)
	sh := binary.LittleEndian.Uint16(src[2:])
	sl := src[4:8]
	qs := src[8:136]
	for ib := 0; ib < 8; ib++ {
		ls := int(sl[ib/2]>>(4*(ib%2)))&15 | int(sh>>(2*ib)&3)<<4
		dl := d * float32(ls-32)
		q := qs[16*ib : 16*ib+16]
		y := dst[32*ib : 32*ib+32]
		for j := 0; j < 16; j++ {
			y[j] = dl * float32(iq4nlValues[q[j]&15])
			y[j+16] = dl * float32(iq4nlValues[q[j]>>4])
		}
	}
}

// kScaleMin unpacks sub-block j's 6-bit scale and min from the 12 scale bytes of Q4_K and Q5_K:
// sub-blocks 0-3 keep theirs in the low 6 bits of bytes j and j+4; sub-blocks 4-7 take a low
// nibble from byte j+4 and their two high bits from the top bits of bytes j-4 (scale) and j (min).
func kScaleMin(j int, s []byte) (sc, m float32) {
	if j < 4 {
		return float32(s[j] & 63), float32(s[j+4] & 63)
	}
	return float32(s[j+4]&15 | (s[j-4]>>6)<<4), float32(s[j+4]>>4 | (s[j]>>6)<<4)
}

// Q4_K: fp16 d, fp16 dmin, 12 scale bytes, 128 bytes of nibbles. The 256 elements are 8
// sub-blocks of 32; each 32 bytes of qs hold two sub-blocks (low nibbles, then high nibbles).
// value = d·sc·q − dmin·m.
func decodeQ4K(dst []float32, src []byte) {
	d, dmin := f16(src), f16(src[2:])
	scales := src[4:16]
	qs := src[16:144]
	for c := 0; c < 4; c++ {
		q := qs[32*c : 32*c+32]
		sc1, m1 := kScaleMin(2*c, scales)
		sc2, m2 := kScaleMin(2*c+1, scales)
		d1, d2, o1, o2 := d*sc1, d*sc2, dmin*m1, dmin*m2
		y := dst[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			y[l] = d1*float32(q[l]&15) - o1
			y[32+l] = d2*float32(q[l]>>4) - o2
		}
	}
}

// Q5_K: as Q4_K, with 32 bytes qh (after the scales) giving each element a fifth bit: element l
// of sub-block s takes bit s of qh[l].
func decodeQ5K(dst []float32, src []byte) {
	d, dmin := f16(src), f16(src[2:])
	scales := src[4:16]
	qh := src[16:48]
	qs := src[48:176]
	for c := 0; c < 4; c++ {
		q := qs[32*c : 32*c+32]
		sc1, m1 := kScaleMin(2*c, scales)
		sc2, m2 := kScaleMin(2*c+1, scales)
		d1, d2, o1, o2 := d*sc1, d*sc2, dmin*m1, dmin*m2
		y := dst[64*c : 64*c+64]
		for l := 0; l < 32; l++ {
			lo := int(q[l]&15) | int(qh[l]>>uint(2*c)&1)<<4
			hi := int(q[l]>>4) | int(qh[l]>>uint(2*c+1)&1)<<4
			y[l] = d1*float32(lo) - o1
			y[32+l] = d2*float32(hi) - o2
		}
	}
}

// Q6_K: 128 bytes ql (low nibbles), 64 bytes qh (2-bit high parts), 16 int8 scales (one per 16
// elements), fp16 d last. Each half of 128 elements uses 64 bytes of ql and 32 of qh: element
// l (l < 32) of the four quarters takes ql[l] low, ql[l+32] low, ql[l] high, ql[l+32] high nibble
// and bits 0-1, 2-3, 4-5, 6-7 of qh[l]. value = d·scale·(q − 32).
func decodeQ6K(dst []float32, src []byte) {
	d := f16(src[208:])
	for h := 0; h < 2; h++ {
		ql := src[64*h : 64*h+64]
		qh := src[128+32*h : 128+32*h+32]
		sc := src[192+8*h : 192+8*h+8]
		y := dst[128*h : 128*h+128]
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int(ql[l]&15|(qh[l]&3)<<4) - 32
			q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			y[l] = d * float32(int8(sc[is])) * float32(q1)
			y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}

// Q2_K: 16 scale bytes (low nibble scale, high nibble min, one per 16 elements), 64 bytes of
// 2-bit codes, fp16 d, fp16 dmin. Each half of 128 elements reads 32 bytes of qs four times,
// taking bits 0-1, 2-3, 4-5, 6-7 in turn. value = d·sc·q − dmin·m.
func decodeQ2K(dst []float32, src []byte) {
	scales := src[0:16]
	qs := src[16:80]
	d, dmin := f16(src[80:]), f16(src[82:])
	is := 0
	for h := 0; h < 2; h++ {
		q := qs[32*h : 32*h+32]
		for j := 0; j < 4; j++ {
			shift := uint(2 * j)
			y := dst[128*h+32*j : 128*h+32*j+32]
			for part := 0; part < 2; part++ {
				s := scales[is]
				is++
				dl, ml := d*float32(s&15), dmin*float32(s>>4)
				for l := 0; l < 16; l++ {
					y[16*part+l] = dl*float32(q[16*part+l]>>shift&3) - ml
				}
			}
		}
	}
}

// q3kScale unpacks scale j (of 16) of a Q3_K block from its 12 scale bytes: the low nibble is
// byte j's (j < 8) or byte j-8's high nibble, the two high bits come from byte 8 + j%4 at bit
// 2·(j/4). The stored value is offset by 32.
func q3kScale(j int, s []byte) float32 {
	var lo byte
	if j < 8 {
		lo = s[j] & 15
	} else {
		lo = s[j-8] >> 4
	}
	hi := s[8+j%4] >> uint(2*(j/4)) & 3
	return float32(int(lo|hi<<4) - 32)
}

// Q3_K: 32 bytes hmask, 64 bytes of 2-bit codes, 12 scale bytes, fp16 d. The codes are laid out
// as in Q2_K; bit b of hmask[l] belongs to the b-th group of 32 elements and, when clear,
// subtracts 4 from the code. value = d·scale·q.
func decodeQ3K(dst []float32, src []byte) {
	hm := src[0:32]
	qs := src[32:96]
	scales := src[96:108]
	d := f16(src[108:])
	is := 0
	for h := 0; h < 2; h++ {
		q := qs[32*h : 32*h+32]
		for j := 0; j < 4; j++ {
			shift := uint(2 * j)
			bit := byte(1) << uint(4*h+j)
			y := dst[128*h+32*j : 128*h+32*j+32]
			for part := 0; part < 2; part++ {
				dl := d * q3kScale(is, scales)
				is++
				for l := 0; l < 16; l++ {
					i := 16*part + l
					v := int(q[i] >> shift & 3)
					if hm[i]&bit == 0 {
						v -= 4
					}
					y[i] = dl * float32(v)
				}
			}
		}
	}
}

// TranscodeQ8_0 rewrites blocks of typ as Q8_0 blocks without rounding, for the types whose
// values are one fp16 scale per 32 times an integer in [-127, 127]: Q5_0 (d·(q−16)) and IQ4_NL
// (d·book[q]) keep their scale d and store the integer. It reports false for other types. dst
// holds len(src)/typ.BlockBytes() Q8_0 blocks.
func TranscodeQ8_0(dst, src []byte, typ gguf.Type) bool {
	if typ != gguf.TypeQ5_0 && typ != gguf.TypeIQ4_NL {
		return false
	}
	bb := typ.BlockBytes()
	for b := 0; b < len(src)/bb; b++ {
		s, d := src[b*bb:(b+1)*bb], dst[b*kernels.BlockQ8_0:(b+1)*kernels.BlockQ8_0]
		d[0], d[1] = s[0], s[1]
		q := d[2:34]
		if typ == gguf.TypeQ5_0 {
			qh := binary.LittleEndian.Uint32(s[2:])
			for j := 0; j < 16; j++ {
				lo, hi := fifthBits(qh, s[6:22], j) //nolint:gosec // s is one 22-byte Q5_0 block (bb)
				q[j], q[j+16] = byte(int8(lo-16)), byte(int8(hi-16))
			}
			continue
		}
		for j := 0; j < 16; j++ {
			q[j], q[j+16] = byte(iq4nlValues[s[2+j]&15]), byte(iq4nlValues[s[2+j]>>4])
		}
	}
	return true
}
