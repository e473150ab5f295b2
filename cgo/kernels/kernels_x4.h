// Packed Q4_0 kernels, included twice by kernels_amd64.c like kernels_x8.h (KN_VNNI, KN_FN).
//
// Layout (PackQ4_0 writes it): rows in groups of 16; a group is nb blocks of 256 nibble bytes
// followed by nb × 16 fp16 scales. Within a block the 16 rows' 16 bytes are interleaved in 4-byte
// pieces: piece q (q < 4) of rows 0..15 forms one 64-byte vector. Its low nibbles are elements
// 4q..4q+3 of each row and its high nibbles elements 16+4q..16+4q+3, so after masking, a
// dot-product instruction against a broadcast 4-byte piece of the activation block leaves row i's
// partial sum in lane i: no horizontal reduction, and each weight load feeds every activation row
// of the tile. Nibbles are unsigned (q in [0, 15], value q-8), the operand form vpdpbusd and
// vpmaddubsw take: Σ(q-8)·x = Σq·x - 8·Σx, and each block's integer sum starts at -8·Σx over its
// 32 activation values (computed once per activation block), so it is exact.
//
// The activation pieces are broadcast straight from memory (vpbroadcastd on AVX2, the embedded
// broadcast of vpdpbusd on VNNI): load-port work, no shuffles.
//
// Numerics, identical on both tiers and for every n, and to the plain-layout Q4_0 kernels of
// kernels_q.h (tile4, tilev, streamv): per (row, activation row) and block, s = Σ(q-8)·x over all
// 32 elements exactly in int32 (both half blocks summed as integers, as ggml does), then
// acc = fma(float(s)·d_x, d_w, acc), blocks in order; the result is acc. That is the packed Q8_0
// kernels' arithmetic too, and one convert-scale-accumulate per block instead of one per half block.

// The tiles prefetch kn_pf_distance bytes ahead (kernels_amd64.c) with this hint, settable at build
// time (CGO_CFLAGS="-O2 -g -DKN_X4_HINT=_MM_HINT_T0"). Llama-3.2-1B shape Q4_0 decode on a Xeon dev
// VM, 2 threads, two alternated runs each (t/s): no prefetch 15.7, 18.2; 1024 bytes ahead 19.8, 21.7;
// 2048 19.5, 20.3; 4096 17.6, 20.5; 2048 with T1 18.7, 22.2: prefetching pays. On the AMD EPYC (Zen
// 4) dev VM, 2 threads, 4 alternated rounds, 8 KiB into L2 (T1) against 2 KiB into L1 (T0):
// Qwen2.5-0.5B Q4_0 decode 1.16x, Llama-3.2-1B Q4_0 1.13x, prompts unchanged; as the packed Q8_0
// tiles (kernels_x8.h).
#ifndef KN_X4_HINT
#define KN_X4_HINT _MM_HINT_T1
#endif

static inline __attribute__((always_inline)) int32_t KN_FN(ld32)(const uint8_t *p) {
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

#if KN_VNNI
// KN_DPBCST: acc += dot(w, the 4 bytes at p broadcast to every lane): vpdpbusd with an embedded
// broadcast operand, one fused uop where GCC emits a broadcast load and the dot product (it does not
// fold _mm512_set1_epi32 of a load into the intrinsic). Single thread, n=64, Qwen2.5-0.5B FFN
// shapes, 3 alternated runs: best 344 against 311 GFLOP/s, medians within the noise.
#define KN_DPBCST(acc, w, p) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)(p)))
#define KN_X4_NX 8 // activation rows per tile (32 registers: 8 nibble vectors, 16 sums, scales, temps)

// x4tile computes nx (compile-time, 1..8) activation rows against one group of 16 packed rows.
// xd holds each activation row's block scales ([k][nb]), xs its -8·Σx per block ([k][nb]);
// out rows are ldo floats apart; only the first valid lanes of each output row are stored. pf: the
// tile that streams the group from memory prefetches ahead.
static inline __attribute__((always_inline)) void KN_FN(x4tile)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	const uint8_t *scales = g + nb * 256;
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512 acc[8];
	for (int k = 0; k < nx; k++)
		acc[k] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = g + b * 256;
		if (pf > 0) {
			for (int l = 0; l < 256; l += 64)
				_mm_prefetch((const char *)(wb + pf + l), KN_X4_HINT);
			if ((b & 1) == 0)
				_mm_prefetch((const char *)(scales + b * 32 + 256), _MM_HINT_T0);
		}
		__m512i lo[4], hi[4];
		for (int q = 0; q < 4; q++) {
			const __m512i v = _mm512_loadu_si512((const void *)(wb + 64 * q));
			lo[q] = _mm512_and_si512(v, m4);
			hi[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
		}
		const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + b * 32)));
#pragma GCC unroll 8
		for (int k = 0; k < nx; k++) {
			const uint8_t *xb = xq + k * xrow + b * 34 + 2;
			__m512i s = _mm512_set1_epi32(xs[k * nb + b]), t = _mm512_setzero_si512();
			KN_DPBCST(s, lo[0], xb);
			KN_DPBCST(t, hi[0], xb + 16);
			KN_DPBCST(s, lo[1], xb + 4);
			KN_DPBCST(t, hi[1], xb + 20);
			KN_DPBCST(s, lo[2], xb + 8);
			KN_DPBCST(t, hi[2], xb + 24);
			KN_DPBCST(s, lo[3], xb + 12);
			KN_DPBCST(t, hi[3], xb + 28);
			const __m512 dx = _mm512_set1_ps(xd[k * nb + b]);
			const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s, t)), dx);
			acc[k] = _mm512_fmadd_ps(p, dw, acc[k]);
		}
	}
	const __mmask16 m = valid >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << valid) - 1);
	for (int k = 0; k < nx; k++)
		_mm512_mask_storeu_ps(out + k * ldo, m, acc[k]);
}
#else
#define KN_X4_NX 4 // activation rows per tile

// x4blk: the block sums of 8 packed rows (nibble vectors lo, hi) with one activation block xb,
// plus xs. vpmaddubsw's pair sums are at most 2·15·128 in magnitude, so all eight of a block add up
// in int16 (at most 30720) before one widening vpmaddwd.
static inline __attribute__((always_inline)) __m256i KN_FN(x4blk)(const __m256i *lo, const __m256i *hi,
		const uint8_t *xb, const int32_t *xs) {
	__m256i a = _mm256_maddubs_epi16(lo[0], _mm256_set1_epi32(KN_FN(ld32)(xb)));
	__m256i c = _mm256_maddubs_epi16(hi[0], _mm256_set1_epi32(KN_FN(ld32)(xb + 16)));
	for (int q = 1; q < 4; q++) {
		a = _mm256_add_epi16(a, _mm256_maddubs_epi16(lo[q], _mm256_set1_epi32(KN_FN(ld32)(xb + 4 * q))));
		c = _mm256_add_epi16(c, _mm256_maddubs_epi16(hi[q], _mm256_set1_epi32(KN_FN(ld32)(xb + 16 + 4 * q))));
	}
	return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(a, c), _mm256_set1_epi16(1)), _mm256_set1_epi32(*xs));
}

// Prefetching in x4row: into L2 only (T2). Single thread, AVX2 tier, BenchmarkMatVecStream
// q4_0packed cols1536/4864 against T0 at 2048 bytes in the same runs: T2 at 8192 1.17x and 1.08x (at
// 4096 1.11x, 1.02x; T1 at 4096 1.08x, 1.00x; T2 at 2048 0.99x, 0.85x). On the AMD EPYC (Zen 4) dev
// VM, 2 threads, decoding 64 tokens, alternated rounds, 16 KiB against 8 KiB: Llama-3.2-1B Q4_0
// 1.08x, Qwen2.5-0.5B Q4_0 1.14x, SmolLM2-135M Q4_0 1.19x; none 0.89x, 4 KiB into L1 0.91x. The
// distance is now kn_pf_distance's (kernels_amd64.c).
#ifndef KN_X4ROW_HINT
#define KN_X4ROW_HINT _MM_HINT_T2
#endif
// KN_X4_KEEP(v): an empty asm that takes v in a register, so GCC neither reassociates x4row's int16
// sums into a tree whose partial products stay live (it spilled them and 4 accumulators to the
// stack every block) nor folds one weight load into both the mask and the shift (two loads).
#define KN_X4_KEEP(v) __asm__("" : "+x"(v))

// x4row is x4tile for one activation row (decoding) on AVX2: both 8-row halves in one pass over the
// group, so every cache line is read once and prefetching never pauses (taking the halves in turn
// streamed the group from memory in the first and re-read it from cache, prefetching nothing, in
// the second), and each activation piece is broadcast once for the 16 rows. x4blk's arithmetic per
// lane (integer sums in another order, exact), so the results are bit-identical to x4tile's.
static inline __attribute__((always_inline)) void KN_FN(x4row)(const uint8_t *g, int64_t nb, const uint8_t *xq,
		const float *xd, const int32_t *xs, float *out, int valid, int pf) {
	const uint8_t *scales = g + nb * 256;
	const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi16(1);
	__m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = g + b * 256;
		if (pf > 0) {
			for (int l = 0; l < 256; l += 64)
				_mm_prefetch((const char *)(wb + pf + l), KN_X4ROW_HINT);
			if ((b & 1) == 0)
				_mm_prefetch((const char *)(scales + b * 32 + 256), _MM_HINT_T0);
		}
		const uint8_t *xb = xq + b * 34 + 2;
		const __m256 dx = _mm256_set1_ps(xd[b]);
		__m256i a0, c0, a1, c1;
#pragma GCC unroll 4
		for (int q = 0; q < 4; q++) {
			const __m256i xl = _mm256_set1_epi32(KN_FN(ld32)(xb + 4 * q));
			const __m256i xh = _mm256_set1_epi32(KN_FN(ld32)(xb + 16 + 4 * q));
			__m256i v0 = _mm256_loadu_si256((const __m256i *)(wb + 64 * q));
			__m256i v1 = _mm256_loadu_si256((const __m256i *)(wb + 64 * q + 32));
			KN_X4_KEEP(v0);
			KN_X4_KEEP(v1);
			const __m256i pa0 = _mm256_maddubs_epi16(_mm256_and_si256(v0, m4), xl);
			const __m256i pc0 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m4), xh);
			const __m256i pa1 = _mm256_maddubs_epi16(_mm256_and_si256(v1, m4), xl);
			const __m256i pc1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m4), xh);
			if (q == 0) {
				a0 = pa0, c0 = pc0, a1 = pa1, c1 = pc1;
			} else {
				a0 = _mm256_add_epi16(a0, pa0);
				c0 = _mm256_add_epi16(c0, pc0);
				a1 = _mm256_add_epi16(a1, pa1);
				c1 = _mm256_add_epi16(c1, pc1);
			}
			KN_X4_KEEP(a0);
			KN_X4_KEEP(c0);
			KN_X4_KEEP(a1);
			KN_X4_KEEP(c1);
		}
		// Both half blocks' int16 sums add up exactly (x4blk), so one widening, convert, scale
		// and accumulate per 8 rows and block.
		const __m256i sx = _mm256_set1_epi32(xs[b]);
		const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(a0, c0), one), sx);
		const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(a1, c1), one), sx);
		const __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32)));
		const __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32 + 16)));
		acc0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s0), dx), dw0, acc0);
		acc1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s1), dx), dw1, acc1);
	}
	KN_FN(store16)(out, acc0, acc1, valid);
}

// x4tile on AVX2: each 8-row half of the group in turn, with the VNNI tile's arithmetic per lane.
static inline __attribute__((always_inline)) void KN_FN(x4tile)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	if (nx == 1) {
		KN_FN(x4row)(g, nb, xq, xd, xs, out, valid, pf);
		return;
	}
	const uint8_t *scales = g + nb * 256;
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	for (int h = 0; h < 2 && 8 * h < valid; h++) {
		__m256 acc[KN_X4_NX];
		for (int k = 0; k < nx; k++)
			acc[k] = _mm256_setzero_ps();
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *wb = g + b * 256 + 32 * h;
			if (pf > 0 && h == 0) {
				for (int l = 0; l < 256; l += 64)
					_mm_prefetch((const char *)(g + b * 256 + pf + l), KN_X4_HINT);
				if ((b & 1) == 0)
					_mm_prefetch((const char *)(scales + b * 32 + 256), _MM_HINT_T0);
			}
			__m256i lo[4], hi[4];
			for (int q = 0; q < 4; q++) {
				const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + 64 * q));
				lo[q] = _mm256_and_si256(v, m4);
				hi[q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
			}
			const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32 + 16 * h)));
#pragma GCC unroll 8
			for (int k = 0; k < nx; k++) {
				const __m256i s = KN_FN(x4blk)(lo, hi, xq + k * xrow + b * 34 + 2, xs + k * nb + b);
				const __m256 dx = _mm256_set1_ps(xd[k * nb + b]);
				acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), dx), dw, acc[k]);
			}
		}
		const int v = valid - 8 * h < 8 ? valid - 8 * h : 8;
		for (int k = 0; k < nx; k++) {
			const __m256 r8 = acc[k];
			if (v == 8) {
				_mm256_storeu_ps(out + k * ldo + 8 * h, r8);
			} else {
				float r[8];
				_mm256_storeu_ps(r, r8);
				for (int i = 0; i < v; i++)
					out[k * ldo + 8 * h + i] = r[i];
			}
		}
	}
}
#endif

// x4tile_n dispatches a run-time activation-row count (1..KN_X4_NX) to x4tile with a constant one.
static inline __attribute__((always_inline)) void KN_FN(x4tile_n)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	switch (nx) {
	case 1: KN_FN(x4tile)(1, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 2: KN_FN(x4tile)(2, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 3: KN_FN(x4tile)(3, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
#if KN_X4_NX > 4
	case 4: KN_FN(x4tile)(4, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 5: KN_FN(x4tile)(5, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 6: KN_FN(x4tile)(6, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 7: KN_FN(x4tile)(7, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
#endif
	default: KN_FN(x4tile)(KN_X4_NX, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	}
}

// kn_matmul_q4_0x16: out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1) (r0 a multiple of 16; rows
// past the matrix's last are padding and never stored), j < n. Each group is read from memory once
// per call and from cache for the further tiles of activation rows.
void KN_FN(kn_matmul_q4_0x16)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n) {
	const int64_t nb = cols / 32, xrow = nb * 34, gbytes = nb * 288;
	float stack[KN_STACK_SCALES];
	float *xd = KN_FN(scale_buf)(stack, 2 * n * nb);
	int32_t *xs = (int32_t *)(xd + n * nb);
	KN_FN(x4sums)(xd, xs, xq, n, xrow, nb);
	const int pf = kn_pf_distance((r1 - r0 + 15) / 16 * gbytes);
	for (int64_t r = r0; r < r1; r += 16) {
		const uint8_t *g = w + (r / 16) * gbytes;
		const int valid = r1 - r < 16 ? (int)(r1 - r) : 16;
		for (int64_t j = 0; j < n; j += KN_X4_NX) {
			const int nx = n - j < KN_X4_NX ? (int)(n - j) : KN_X4_NX;
			KN_FN(x4tile_n)(nx, g, nb, xq + j * xrow, xrow, xd + j * nb, xs + j * nb, out + j * ldo + r, ldo, valid, j == 0 ? pf : 0);
		}
	}
	if (xd != stack)
		free(xd);
}

#undef KN_X4_NX
