package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/voxpipe/voxpipe/cgo/kernels"
	"github.com/voxpipe/voxpipe/llm/engine/gguf"
)

// The tests below build blocks from chosen codes, scales and offsets by writing each bit where
// the GGML block layout puts it (element by element, the opposite direction from the decoders'
// loops), then check that Dequantize gives value = formula(codes) for every element.

func putF16(b []byte, v float32) float32 {
	h := kernels.F32ToF16(v)
	binary.LittleEndian.PutUint16(b, h)
	return kernels.F16ToF32(h)
}

// setNibble stores 4-bit code q of element i of a 32-element group whose nibbles sit in qs
// (element i < 16: low nibble of byte i; else high nibble of byte i-16).
func setNibble(qs []byte, i int, q int) {
	if i < 16 {
		qs[i] |= byte(q)
	} else {
		qs[i-16] |= byte(q) << 4
	}
}

func checkBlock(t *testing.T, typ gguf.Type, blk []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	if err := Dequantize(got, blk, typ); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-6*math.Max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s element %d = %g, want %g", typ, i, got[i], want[i])
		}
	}
}

func TestDequantizeLegacy32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 20; trial++ {
		q := make([]int, 32)
		for i := range q {
			q[i] = r.IntN(32)
		}
		dIn, mIn := float32(r.NormFloat64()*0.01), float32(r.NormFloat64()*0.1)

		// Q4_1
		blk := make([]byte, 20)
		d, m := putF16(blk, dIn), putF16(blk[2:], mIn)
		want := make([]float32, 32)
		for i := range q {
			setNibble(blk[4:], i, q[i]&15)
			want[i] = d*float32(q[i]&15) + m
		}
		checkBlock(t, gguf.TypeQ4_1, blk, want)

		// Q5_0: bit i of qh is element i's fifth bit.
		blk = make([]byte, 22)
		d = putF16(blk, dIn)
		var qh uint32
		for i := range q {
			setNibble(blk[6:], i, q[i]&15)
			qh |= uint32(q[i]>>4) << uint(i)
			want[i] = d * float32(q[i]-16)
		}
		binary.LittleEndian.PutUint32(blk[2:], qh)
		checkBlock(t, gguf.TypeQ5_0, blk, want)

		// Q5_1
		blk = make([]byte, 24)
		d, m = putF16(blk, dIn), putF16(blk[2:], mIn)
		for i := range q {
			setNibble(blk[8:], i, q[i]&15)
			want[i] = d*float32(q[i]) + m
		}
		binary.LittleEndian.PutUint32(blk[4:], qh)
		checkBlock(t, gguf.TypeQ5_1, blk, want)

		// IQ4_NL
		book := []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
		blk = make([]byte, 18)
		d = putF16(blk, dIn)
		for i := range q {
			setNibble(blk[2:], i, q[i]&15)
			want[i] = d * book[q[i]&15]
		}
		checkBlock(t, gguf.TypeIQ4_NL, blk, want)
	}
}

// TestDequantizeWorked checks blocks whose bytes were written out by hand.
func TestDequantizeWorked(t *testing.T) {
	// Q5_0, d = 1.0 (fp16 0x3C00): qs[0] = 0x21 gives element 0 code 1 and element 16 code 2;
	// qh = 0x00010001 sets the fifth bit of elements 0 and 16: codes 17 and 18, values 1 and 2.
	// Every other element has code 0: value -16.
	blk := make([]byte, 22)
	blk[0], blk[1] = 0x00, 0x3C
	blk[2], blk[4] = 0x01, 0x01
	blk[6] = 0x21
	want := make([]float32, 32)
	for i := range want {
		want[i] = -16
	}
	want[0], want[16] = 1, 2
	checkBlock(t, gguf.TypeQ5_0, blk, want)

	// BF16 0x3FC0 is 1.5; 0xC000 is -2.
	checkBlock(t, gguf.TypeBF16, []byte{0xC0, 0x3F, 0x00, 0xC0}, []float32{1.5, -2})

	// Q4_K, d = 1, dmin = 0.5 (0x3800). Scale bytes: byte 0 = 2 (sub-block 0 scale 2), byte 4 =
	// 6 (sub-block 0 min 6), byte 8 = 0x13 (sub-block 4: scale low nibble 3, min low nibble 1),
	// byte 0's top bits 0b01 give sub-block 4's scale high bits: scale 16+3 = 19. qs[0] = 0x5A:
	// element 0 code 10 (2·10 − 0.5·6 = 17), element 32 (sub-block 1, scale 0 min 0) code 5 → 0.
	// qs[64] = 0x07: element 128 (sub-block 4) code 7 → 19·7 − 0.5·1 = 132.5.
	blk = make([]byte, 144)
	blk[0], blk[1] = 0x00, 0x3C
	blk[2], blk[3] = 0x00, 0x38
	blk[4+0] = 2 | 1<<6
	blk[4+4] = 6
	blk[4+8] = 0x13
	blk[16+0] = 0x5A
	blk[16+64] = 0x07
	want = make([]float32, 256)
	want[0] = 17
	for i := 1; i < 32; i++ {
		want[i] = -3 // code 0: −dmin·m
	}
	want[128] = 132.5
	for i := 129; i < 160; i++ {
		want[i] = -0.5
	}
	checkBlock(t, gguf.TypeQ4_K, blk, want)
}

// kScales packs 8 six-bit scales and mins into Q4_K's 12 bytes, bit by bit.
func kScales(sc, m [8]int) []byte {
	s := make([]byte, 12)
	for j := 0; j < 8; j++ {
		if j < 4 {
			s[j] |= byte(sc[j])
			s[j+4] |= byte(m[j])
			continue
		}
		s[j+4] |= byte(sc[j]&15) | byte(m[j]&15)<<4
		s[j-4] |= byte(sc[j]>>4) << 6
		s[j] |= byte(m[j]>>4) << 6
	}
	return s
}

func TestDequantizeQ4KQ5K(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 20; trial++ {
		var sc, mn [8]int
		for j := range sc {
			sc[j], mn[j] = r.IntN(64), r.IntN(64)
		}
		q := make([]int, 256)
		for i := range q {
			q[i] = r.IntN(32)
		}
		dIn, mIn := float32(r.Float64()*0.01), float32(r.Float64()*0.01)

		blk := make([]byte, 144)
		d, dmin := putF16(blk, dIn), putF16(blk[2:], mIn)
		copy(blk[4:], kScales(sc, mn))
		want := make([]float32, 256)
		for i := range q {
			s := i / 32 // sub-block
			c, l := s/2, i%32
			blk[16+32*c+l] |= byte(q[i]&15) << uint(4*(s%2))
			want[i] = d*float32(sc[s])*float32(q[i]&15) - dmin*float32(mn[s])
		}
		checkBlock(t, gguf.TypeQ4_K, blk, want)

		blk = make([]byte, 176)
		d, dmin = putF16(blk, dIn), putF16(blk[2:], mIn)
		copy(blk[4:], kScales(sc, mn))
		for i := range q {
			s := i / 32
			c, l := s/2, i%32
			blk[48+32*c+l] |= byte(q[i]&15) << uint(4*(s%2))
			blk[16+l] |= byte(q[i]>>4) << uint(s)
			want[i] = d*float32(sc[s])*float32(q[i]) - dmin*float32(mn[s])
		}
		checkBlock(t, gguf.TypeQ5_K, blk, want)
	}
}

func TestDequantizeQ6K(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 20; trial++ {
		blk := make([]byte, 210)
		d := putF16(blk[208:], float32(r.Float64()*0.01))
		var sc [16]int
		for j := range sc {
			sc[j] = r.IntN(256) - 128
			blk[192+j] = byte(int8(sc[j]))
		}
		want := make([]float32, 256)
		for i := 0; i < 256; i++ {
			q := r.IntN(64)
			h, rest := i/128, i%128
			quarter, l := rest/32, rest%32
			// quarters 0,1 use low nibbles of ql[l], ql[l+32]; 2,3 the high nibbles.
			qlIdx := 64*h + l + 32*(quarter%2)
			blk[qlIdx] |= byte(q&15) << uint(4*(quarter/2))
			blk[128+32*h+l] |= byte(q>>4) << uint(2*quarter)
			want[i] = d * float32(sc[i/16]) * float32(q-32)
		}
		checkBlock(t, gguf.TypeQ6_K, blk, want)
	}
}

func TestDequantizeQ2KQ3K(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 20; trial++ {
		// Q2_K: element i lies in half h = i/128, bit pair j = (i%128)/32 of qs[32h + i%32];
		// scale byte i/16.
		blk := make([]byte, 84)
		d, dmin := putF16(blk[80:], float32(r.Float64()*0.01)), putF16(blk[82:], float32(r.Float64()*0.01))
		var sc, mn [16]int
		for j := range sc {
			sc[j], mn[j] = r.IntN(16), r.IntN(16)
			blk[j] = byte(sc[j] | mn[j]<<4)
		}
		want := make([]float32, 256)
		for i := range want {
			q := r.IntN(4)
			h, j := i/128, (i%128)/32
			blk[16+32*h+i%32] |= byte(q) << uint(2*j)
			want[i] = d*float32(sc[i/16])*float32(q) - dmin*float32(mn[i/16])
		}
		checkBlock(t, gguf.TypeQ2_K, blk, want)

		// Q3_K: 3-bit code q in -4..3: low two bits as Q2_K, hmask bit (i/32) of hmask[i%32]
		// set when q ≥ 0. 16 six-bit scales − 32.
		blk = make([]byte, 110)
		d = putF16(blk[108:], float32(r.Float64()*0.01))
		var s3 [16]int
		for j := range s3 {
			s3[j] = r.IntN(64)
			if j < 8 {
				blk[96+j] |= byte(s3[j] & 15)
			} else {
				blk[96+j-8] |= byte(s3[j]&15) << 4
			}
			blk[96+8+j%4] |= byte(s3[j]>>4) << uint(2*(j/4))
		}
		for i := range want {
			q := r.IntN(8) - 4
			h, j := i/128, (i%128)/32
			blk[32+32*h+i%32] |= byte(q&3) << uint(2*j)
			if q >= 0 {
				blk[i%32] |= 1 << uint(i/32)
			}
			want[i] = d * float32(s3[i/16]-32) * float32(q)
		}
		checkBlock(t, gguf.TypeQ3_K, blk, want)
	}
}

func TestDequantizeIQ4XS(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	book := []float32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	blk := make([]byte, 136)
	d := putF16(blk, 0.003)
	var ls [8]int
	var sh uint16
	for ib := range ls {
		ls[ib] = r.IntN(64)
		blk[4+ib/2] |= byte(ls[ib]&15) << uint(4*(ib%2))
		sh |= uint16(ls[ib]>>4) << uint(2*ib)
	}
	binary.LittleEndian.PutUint16(blk[2:], sh)
	want := make([]float32, 256)
	for i := range want {
		q := r.IntN(16)
		setNibble(blk[8+16*(i/32):], i%32, q)
		want[i] = d * float32(ls[i/32]-32) * book[q]
	}
	checkBlock(t, gguf.TypeIQ4_XS, blk, want)
}

func TestDequantizeRefuses(t *testing.T) {
	if err := Dequantize(make([]float32, 256), make([]byte, 66), gguf.TypeIQ2_XXS); !errors.Is(err, ErrSourceType) {
		t.Fatalf("IQ2_XXS: %v, want ErrSourceType", err)
	}
	if err := Dequantize(make([]float32, 256), make([]byte, 143), gguf.TypeQ4_K); !errors.Is(err, ErrTensorSize) {
		t.Fatalf("short Q4_K: %v, want ErrTensorSize", err)
	}
	if err := Dequantize(make([]float32, 100), make([]byte, 144), gguf.TypeQ4_K); !errors.Is(err, ErrTensorSize) {
		t.Fatalf("partial block: %v, want ErrTensorSize", err)
	}
}

// TestTranscodeQ8_0: Q5_0 and IQ4_NL blocks rewritten as Q8_0 decode to the very same values.
func TestTranscodeQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range []gguf.Type{gguf.TypeQ5_0, gguf.TypeIQ4_NL} {
		const nb = 8
		src := make([]byte, nb*typ.BlockBytes())
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		for b := 0; b < nb; b++ {
			putF16(src[b*typ.BlockBytes():], float32(r.NormFloat64()*0.01))
		}
		dst := make([]byte, nb*kernels.BlockQ8_0)
		if !TranscodeQ8_0(dst, src, typ) {
			t.Fatalf("%s not transcoded", typ)
		}
		want, got := make([]float32, nb*32), make([]float32, nb*32)
		if err := Dequantize(want, src, typ); err != nil {
			t.Fatal(err)
		}
		kernels.DequantizeQ8_0(got, dst)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s element %d: Q8_0 %g, source %g", typ, i, got[i], want[i])
			}
		}
	}
	if TranscodeQ8_0(make([]byte, 34), make([]byte, 20), gguf.TypeQ4_1) {
		t.Fatal("Q4_1 (an offset per block) cannot be Q8_0 exactly, but was transcoded")
	}
}
