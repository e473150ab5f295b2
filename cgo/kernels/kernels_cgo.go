//go:build cgo && amd64

package kernels

// -std=c11 (not gnu11) also makes GCC default to -ffp-contract=off (cgo rejects that flag itself):
// no mul+add is silently fused into an FMA, so the C arithmetic rounds exactly as written.

/*
#cgo CFLAGS: -O3 -std=c11
#include "kernels.h"
*/
import "C"

import "unsafe"

// Go slices are passed as pointers to their first element for the duration of one call; the C side
// never keeps them (cgo pointer rules). Weight slices may also point into an mmapped GGUF file.
// Callers have already checked every length, so the C loops never run past a slice.

func detectLevel() level { return level(C.kn_cpu_level()) }

func f32p(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }
func u8p(s []byte) *C.uint8_t   { return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(s))) }
func u16p(s []byte) *C.uint16_t { return (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func simdQuantizeQ8_0(dst []byte, x []float32, nb int) {
	C.kn_quantize_q8_0_avx2(u8p(dst), f32p(x), C.int64_t(nb))
}

func simdDotF32(a, b []float32) float32 {
	return float32(C.kn_dot_f32_avx2(f32p(a), f32p(b), C.int64_t(len(a))))
}

func simdMatVecF32(out, w []float32, cols, r0, r1 int, x []float32) {
	C.kn_matvec_f32_avx2(f32p(out), f32p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), f32p(x))
}

func simdMatVecF32Ld(out, w []float32, ldw, cols, r0, r1 int, x []float32) {
	C.kn_matvec_f32_ld_avx2(f32p(out), f32p(w), C.int64_t(ldw), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), f32p(x))
}

func simdMatMulF32Ld(out []float32, ldo int, w []float32, ldw, cols, r0, r1 int, x []float32, ldx, n int) {
	C.kn_matmul_f32_ld_avx2(f32p(out), C.int64_t(ldo), f32p(w), C.int64_t(ldw), C.int64_t(cols), C.int64_t(r0),
		C.int64_t(r1), f32p(x), C.int64_t(ldx), C.int64_t(n))
}

func simdMatVecF16(out []float32, w []byte, cols, r0, r1 int, x []float32) {
	C.kn_matvec_f16_avx2(f32p(out), u16p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), f32p(x))
}

func simdMatMulF32(out []float32, ldo int, w []float32, cols, r0, r1 int, x []float32, n int) {
	C.kn_matmul_f32_avx2(f32p(out), C.int64_t(ldo), f32p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		f32p(x), C.int64_t(n))
}

func simdMatMulF16(out []float32, ldo int, w []byte, cols, r0, r1 int, x []float32, n int) {
	C.kn_matmul_f16_avx2(f32p(out), C.int64_t(ldo), u16p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		f32p(x), C.int64_t(n))
}

func simdMatVecQ8_0(l level, out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	if l >= levelAVX512VNNI {
		C.kn_matvec_q8_0_vnni(f32p(out), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), u8p(xq))
		return
	}
	C.kn_matvec_q8_0_avx2(f32p(out), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), u8p(xq))
}

func simdMatVecQ4_0(l level, out []float32, w []byte, cols, r0, r1 int, xq []byte) {
	if l >= levelAVX512VNNI {
		C.kn_matvec_q4_0_vnni(f32p(out), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), u8p(xq))
		return
	}
	C.kn_matvec_q4_0_avx2(f32p(out), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), u8p(xq))
}

func simdMatMulQ8_0(l level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if l >= levelAVX512VNNI {
		C.kn_matmul_q8_0_vnni(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
			u8p(xq), C.int64_t(n))
		return
	}
	C.kn_matmul_q8_0_avx2(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		u8p(xq), C.int64_t(n))
}

func simdMatMulQ4_0(l level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if l >= levelAVX512VNNI {
		C.kn_matmul_q4_0_vnni(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
			u8p(xq), C.int64_t(n))
		return
	}
	C.kn_matmul_q4_0_avx2(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		u8p(xq), C.int64_t(n))
}

// hwF32ToF16 and hwF16ToF32 expose the F16C instructions to the tests.
func hwF32ToF16(f float32) uint16 { return uint16(C.kn_f32_to_f16_hw(C.float(f))) }
func hwF16ToF32(h uint16) float32 { return float32(C.kn_f16_to_f32_hw(C.uint16_t(h))) }

func simdMatMulPackedQ8_0(l level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if l >= levelAVX512VNNI {
		C.kn_matmul_q8_0x8_vnni(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
			u8p(xq), C.int64_t(n))
		return
	}
	C.kn_matmul_q8_0x8_avx2(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		u8p(xq), C.int64_t(n))
}

func simdMatMulPackedQ4_0(l level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	if l >= levelAVX512VNNI {
		C.kn_matmul_q4_0x16_vnni(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
			u8p(xq), C.int64_t(n))
		return
	}
	C.kn_matmul_q4_0x16_avx2(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1),
		u8p(xq), C.int64_t(n))
}

func simdSwiGLU(g, u []float32) { C.kn_swiglu_avx2(f32p(g), f32p(u), C.int64_t(len(g))) }

func simdSwiGLURows(g, u []float32, ld, n, width int) {
	C.kn_swiglu_rows_avx2(f32p(g), f32p(u), C.int64_t(ld), C.int64_t(n), C.int64_t(width))
}

func simdRope(x []float32, heads, hd int, cos, sin []float32, adjacent bool) {
	a := C.int(0)
	if adjacent {
		a = 1
	}
	C.kn_rope_avx2(f32p(x), C.int64_t(heads), C.int64_t(hd), f32p(cos), f32p(sin), C.int64_t(len(cos)), a)
}

func simdStoreKeyF16(k []uint16, hd, t int, row []float32) {
	C.kn_store_key_f16_avx2(u16s(k), C.int64_t(hd), C.int64_t(t), f32p(row))
}

func simdArgmax(x []float32) int { return int(C.kn_argmax_avx2(f32p(x), C.int64_t(len(x)))) }

func simdRMSNorm(dst, src, w []float32, eps float32) {
	C.kn_rmsnorm_avx2(f32p(dst), f32p(src), f32p(w), C.int64_t(len(src)), C.float(eps))
}

func simdSoftmax(s []float32, scale float32) {
	C.kn_softmax_avx2(f32p(s), C.int64_t(len(s)), C.float(scale))
}

func simdAttend(l level, out, q, k, v []float32, hd, npos, nq int, scale float32, probs []float32) {
	if l >= levelAVX512VNNI {
		C.kn_attend_blk_vnni(f32p(out), f32p(q), f32p(k), f32p(v), C.int64_t(hd), C.int64_t(npos), C.int64_t(nq),
			C.float(scale), f32p(probs))
		return
	}
	C.kn_attend_blk_avx2(f32p(out), f32p(q), f32p(k), f32p(v), C.int64_t(hd), C.int64_t(npos), C.int64_t(nq),
		C.float(scale), f32p(probs))
}

func u16s(s []uint16) *C.uint16_t { return (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func simdAttendF16(l level, out, q []float32, k, v []uint16, hd, npos, nq int, scale float32, probs []float32) {
	if l >= levelAVX512VNNI {
		C.kn_attend_blk_f16_vnni(f32p(out), f32p(q), u16s(k), u16s(v), C.int64_t(hd), C.int64_t(npos), C.int64_t(nq),
			C.float(scale), f32p(probs))
		return
	}
	C.kn_attend_blk_f16_avx2(f32p(out), f32p(q), u16s(k), u16s(v), C.int64_t(hd), C.int64_t(npos), C.int64_t(nq),
		C.float(scale), f32p(probs))
}

func simdF32ToF16(dst []uint16, src []float32) {
	C.kn_f32_to_f16_avx2(u16s(dst), f32p(src), C.int64_t(len(src)))
}

func simdReadStream(p []byte) uint64 { return uint64(C.kn_read_stream(u8p(p), C.int64_t(len(p)))) }

func i32p(s []int32) *C.int32_t { return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(s))) }

func simdPrepareQ8(p *Q8Prep) {
	if p.level >= levelAVX512VNNI {
		C.kn_q8_prepare_vnni(u8p(p.xq), C.int64_t(p.n), C.int64_t(p.cols), f32p(p.xd), i32p(p.xs))
		return
	}
	C.kn_q8_prepare_avx2(u8p(p.xq), C.int64_t(p.n), C.int64_t(p.cols), f32p(p.xd), i32p(p.xs))
}

func simdTilesQ8(p *Q8Prep) {
	C.kn_q8_tiles_amx(u8p(p.xq), C.int64_t(p.n), C.int64_t(p.cols), u8p(p.xt))
}

// simdMatMulPackedQ8_0Prepared runs the product on the tier p was prepared for.
func simdMatMulPackedQ8_0Prepared(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep) {
	o, l, wp, c, a, b := f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(p.cols), C.int64_t(r0), C.int64_t(r1)
	x, n, d, s := u8p(p.xq), C.int64_t(p.n), f32p(p.xd), i32p(p.xs)
	switch {
	case p.level == levelAMX:
		C.kn_matmul_q8_0x16_amx(o, l, wp, c, a, b, x, n, d, s, u8p(p.xt))
	case p.level >= levelAVX512VNNI:
		C.kn_matmul_q8_0x8_prep_vnni(o, l, wp, c, a, b, x, n, d, s)
	default:
		C.kn_matmul_q8_0x8_prep_avx2(o, l, wp, c, a, b, x, n, d, s)
	}
}

func simdMatMulPackedQ4_0AMX(out []float32, ldo int, w []byte, r0, r1 int, p *Q8Prep, ub []byte) {
	C.kn_matmul_q4_0x16_amx(f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(p.cols), C.int64_t(r0), C.int64_t(r1),
		u8p(p.xq), C.int64_t(p.n), f32p(p.xd), i32p(p.xs), u8p(p.xt), u8p(ub))
}

func simdMatMulRowQuant(k rowQuant, l level, out []float32, ldo int, w []byte, cols, r0, r1 int, xq []byte, n int) {
	o, lo, wp, c, a, b, x, nn := f32p(out), C.int64_t(ldo), u8p(w), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1), u8p(xq), C.int64_t(n)
	vnni := l >= levelAVX512VNNI
	switch {
	case k == rqQ4K && vnni:
		C.kn_matmul_q4_k_vnni(o, lo, wp, c, a, b, x, nn)
	case k == rqQ4K:
		C.kn_matmul_q4_k_avx2(o, lo, wp, c, a, b, x, nn)
	case k == rqQ5K && vnni:
		C.kn_matmul_q5_k_vnni(o, lo, wp, c, a, b, x, nn)
	case k == rqQ5K:
		C.kn_matmul_q5_k_avx2(o, lo, wp, c, a, b, x, nn)
	case k == rqQ6K && vnni:
		C.kn_matmul_q6_k_vnni(o, lo, wp, c, a, b, x, nn)
	case k == rqQ6K:
		C.kn_matmul_q6_k_avx2(o, lo, wp, c, a, b, x, nn)
	case k == rqQ5_0 && vnni:
		C.kn_matmul_q5_0_vnni(o, lo, wp, c, a, b, x, nn)
	case k == rqQ5_0:
		C.kn_matmul_q5_0_avx2(o, lo, wp, c, a, b, x, nn)
	case k == rqQ5_1 && vnni:
		C.kn_matmul_q5_1_vnni(o, lo, wp, c, a, b, x, nn)
	default:
		C.kn_matmul_q5_1_avx2(o, lo, wp, c, a, b, x, nn)
	}
}
