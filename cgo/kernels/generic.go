package kernels

import "math"

// The portable implementations. They define the exact integer semantics the SIMD paths must
// reproduce; only the order of float additions may differ there.

func loadF16(b []byte) float32 { return f16Table[uint16(b[0])|uint16(b[1])<<8] }

func storeF16(b []byte, f float32) {
	h := F32ToF16(f)
	b[0], b[1] = byte(h), byte(h>>8)
}

func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > m {
			m = a
		}
	}
	return m
}

func genericQuantizeQ8_0(dst []byte, x []float32) {
	for b := 0; b < len(x)/QK; b++ {
		xb := x[b*QK : b*QK+QK]
		blk := dst[b*BlockQ8_0 : b*BlockQ8_0+BlockQ8_0]
		amax := absMax(xb)
		storeF16(blk, amax/127)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for i, v := range xb {
			blk[2+i] = byte(int8(clamp127(math.RoundToEven(float64(v * id)))))
		}
	}
}

func genericQuantizeQ8_0Ref(dst []byte, x []float32) {
	for b := 0; b < len(x)/QK; b++ {
		xb := x[b*QK : b*QK+QK]
		blk := dst[b*BlockQ8_0 : b*BlockQ8_0+BlockQ8_0]
		d := absMax(xb) / 127
		storeF16(blk, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for i, v := range xb {
			blk[2+i] = byte(int8(clamp127(math.Round(float64(v * id)))))
		}
	}
}

func clamp127(v float64) float64 {
	if v > 127 {
		return 127
	}
	if v < -127 {
		return -127
	}
	return v
}

func genericQuantizeQ4_0(dst []byte, x []float32) {
	for b := 0; b < len(x)/QK; b++ {
		xb := x[b*QK : b*QK+QK]
		blk := dst[b*BlockQ4_0 : b*BlockQ4_0+BlockQ4_0]
		var amax, maxv float32
		for _, v := range xb {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, maxv = a, v
			}
		}
		d := maxv / -8
		storeF16(blk, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j := 0; j < QK/2; j++ {
			blk[2+j] = q4Nibble(xb[j]*id) | q4Nibble(xb[j+QK/2]*id)<<4
		}
	}
}

// q4Nibble mirrors ggml's MIN(15, (int8_t)(v + 8.5f)): truncation toward zero in float32.
func q4Nibble(v float32) byte {
	q := int8(v + 8.5)
	if q > 15 {
		q = 15
	}
	return byte(q)
}

func genericDequantizeQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*BlockQ8_0 : b*BlockQ8_0+BlockQ8_0]
		d := loadF16(blk)
		o := dst[b*QK : b*QK+QK]
		for i := range o {
			o[i] = float32(int8(blk[2+i])) * d
		}
	}
}

func genericDequantizeQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*BlockQ4_0 : b*BlockQ4_0+BlockQ4_0]
		d := loadF16(blk)
		o := dst[b*QK : b*QK+QK]
		for j := 0; j < QK/2; j++ {
			o[j] = float32(int(blk[2+j]&0xf)-8) * d
			o[j+QK/2] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
}

func genericDotF32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func genericMatVecF32(out, w []float32, cols, r0, r1 int, x []float32) {
	for r := r0; r < r1; r++ {
		out[r-r0] = genericDotF32(w[r*cols:(r+1)*cols], x)
	}
}

func genericDotF16(w []byte, x []float32) float32 {
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += f16Table[uint16(w[2*i])|uint16(w[2*i+1])<<8] * x[i]
		s1 += f16Table[uint16(w[2*i+2])|uint16(w[2*i+3])<<8] * x[i+1]
	}
	for ; i < len(x); i++ {
		s0 += f16Table[uint16(w[2*i])|uint16(w[2*i+1])<<8] * x[i]
	}
	return s0 + s1
}

func genericMatVecF32Ld(out, w []float32, ldw, cols, r0, r1 int, x []float32) {
	for r := r0; r < r1; r++ {
		out[r-r0] = genericDotF32(w[r*ldw:r*ldw+cols], x)
	}
}

func genericMatMulF32Ld(out []float32, ldo int, w []float32, ldw, cols, r0, r1 int, x []float32, ldx, n int) {
	for r := r0; r < r1; r++ {
		wr := w[r*ldw : r*ldw+cols]
		for j := 0; j < n; j++ {
			out[j*ldo+r] = genericDotF32(wr, x[j*ldx:j*ldx+cols])
		}
	}
}

func genericMatVecF16(out []float32, w []byte, cols, r0, r1 int, x []float32) {
	x = x[:cols]
	for r := r0; r < r1; r++ {
		out[r-r0] = genericDotF16(w[r*2*cols:(r+1)*2*cols], x)
	}
}

// dotQ8_0 is ggml_vec_dot_q8_0_q8_0: per block an exact integer sum, then sumf += sumi·(dw·dx).
func dotQ8_0(w, x []byte, nb int) float32 {
	var sum float32
	w, x = w[:nb*BlockQ8_0], x[:nb*BlockQ8_0]
	for b := 0; b < nb; b++ {
		wb := (*[BlockQ8_0]byte)(w[b*BlockQ8_0:])
		xb := (*[BlockQ8_0]byte)(x[b*BlockQ8_0:])
		var s0, s1 int32
		for i := 2; i < BlockQ8_0; i += 2 {
			s0 += int32(int8(wb[i])) * int32(int8(xb[i]))
			s1 += int32(int8(wb[i+1])) * int32(int8(xb[i+1]))
		}
		sum += float32(s0+s1) * (f16Table[uint16(wb[0])|uint16(wb[1])<<8] * f16Table[uint16(xb[0])|uint16(xb[1])<<8])
	}
	return sum
}

// dotQ4_0 is ggml_vec_dot_q4_0_q8_0.
func dotQ4_0(w, x []byte, nb int) float32 {
	var sum float32
	w, x = w[:nb*BlockQ4_0], x[:nb*BlockQ8_0]
	for b := 0; b < nb; b++ {
		wb := (*[BlockQ4_0]byte)(w[b*BlockQ4_0:])
		xb := (*[BlockQ8_0]byte)(x[b*BlockQ8_0:])
		var s0, s1 int32
		for j := 0; j < QK/2; j++ {
			q := wb[2+j]
			s0 += (int32(q&0xf) - 8) * int32(int8(xb[2+j]))
			s1 += (int32(q>>4) - 8) * int32(int8(xb[2+j+QK/2]))
		}
		sum += float32(s0+s1) * (f16Table[uint16(wb[0])|uint16(wb[1])<<8] * f16Table[uint16(xb[0])|uint16(xb[1])<<8])
	}
	return sum
}

func genericMatVecQ8_0(out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	nb := cols / QK
	rb := nb * BlockQ8_0
	for r := r0; r < r1; r++ {
		out[r-r0] = dotQ8_0(w[r*rb:], xq, nb)
	}
}

func genericMatVecQ4_0(out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	nb := cols / QK
	rb := nb * BlockQ4_0
	for r := r0; r < r1; r++ {
		out[r-r0] = dotQ4_0(w[r*rb:], xq, nb)
	}
}

func genericMatMulF32(out []float32, ldo int, w []float32, cols, r0, r1 int, x []float32, n int) {
	for r := r0; r < r1; r++ {
		wr := w[r*cols : (r+1)*cols]
		for j := 0; j < n; j++ {
			out[j*ldo+r] = genericDotF32(wr, x[j*cols:(j+1)*cols])
		}
	}
}

func genericMatMulQ8_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	nb := cols / QK
	rb := nb * BlockQ8_0
	for r := r0; r < r1; r++ {
		for j := 0; j < n; j++ {
			out[j*ldo+r] = dotQ8_0(w[r*rb:], xq[j*rb:], nb)
		}
	}
}

func genericMatMulQ4_0(out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	nb := cols / QK
	wb := nb * BlockQ4_0
	xb := nb * BlockQ8_0
	for r := r0; r < r1; r++ {
		for j := 0; j < n; j++ {
			out[j*ldo+r] = dotQ4_0(w[r*wb:], xq[j*xb:], nb)
		}
	}
}

func genericMatMulF16(out []float32, ldo int, w []byte, cols, r0, r1 int, x []float32, n int) {
	for r := r0; r < r1; r++ {
		wr := w[r*2*cols : (r+1)*2*cols]
		for j := 0; j < n; j++ {
			out[j*ldo+r] = genericDotF16(wr, x[j*cols:(j+1)*cols])
		}
	}
}
