// Packed Q8_0 kernels, included twice by kernels_amd64.c like kernels_q.h (KN_VNNI, KN_FN).
//
// Layout (PackQ8_0 writes it): rows in groups of 16; a group is nb blocks of 512 weight bytes
// followed by nb × 16 fp16 scales. Within a block the 16 rows' 32 bytes are interleaved in 4-byte
// pieces: piece q of rows 0..15 forms one 64-byte vector, so lane i of a dot-product instruction
// accumulates row i and no horizontal reduction is ever needed. Weight bytes are stored plus 128
// (unsigned), the operand form vpdpbusd takes: Σ(w+128)·x = Σw·x + 128·Σx, and 128·Σx per
// activation block is subtracted exactly by starting the block's integer sum at −128·Σx.
//
// The VNNI tier computes all 16 rows with 512-bit instructions (on the dev VM a 512-bit vpdpbusd
// retires about as often as a 256-bit one, so it does twice the work per cycle); the AVX2 tier
// takes the two 8-row halves one after the other.
//
// Numerics, identical on both tiers and for every n: per (row, activation row) and block,
// s = Σ w·x exactly in int32, p = float(s)·d_x, acc = fma(p, d_w, acc); blocks in order.

// Prefetch kn_pf_distance bytes ahead within the call's stream (kernels_amd64.c), into L2 (T1).
// The hint can be set at build time for experiments (CGO_CFLAGS="-O2 -g -DKN_X16_HINT=_MM_HINT_T0").
// 4 KiB into L1 (T0) was the default until the AMD EPYC (Zen 4) dev VM: there, 2 threads, 4
// alternated rounds, 8 KiB into L2 (T1) decoded Qwen2.5-0.5B Q8_0 1.12x, Llama-3.2-1B Q8_0 1.05x and
// SmolLM2-135M 1.32x faster, prompts unchanged; a streamed line that lands in L1 4 KiB early is
// mostly evicted again before its use. The device Xeon had read T1 42.6 against T0 39.7 t/s on
// Qwen2.5-0.5B Q8_0 (medians of 3). NTA here and in the x4 tiles: Llama-3.2-1B Q4_0 decode 0.78x
// (0.73-0.85, 4 alternated rounds, AMD dev VM, 2026-12-03).
#ifndef KN_X16_HINT
#define KN_X16_HINT _MM_HINT_T1
#endif

#if KN_VNNI
// x16dot: the block's dot products of 16 packed rows (wv, as stored: w+128) with one activation
// block (xb: 32 int8 values), added to s. Each of the activation's 4-byte pieces reaches all lanes
// by a broadcast load (load-port work; in-register shuffles of two 16-byte broadcasts competed with
// the dot products for the vector ports: 1.3-1.7x slower at 2-16 activation rows, the same at one);
// two accumulators halve the dependency chain.
static inline __attribute__((always_inline)) __m512i KN_FN(x16dot)(__m512i s, const __m512i *wv, const uint8_t *xb) {
	typedef int32_t __attribute__((aligned(1), may_alias)) kn_i32u;
	const kn_i32u *x = (const kn_i32u *)xb;
	__m512i t = _mm512_setzero_si512();
	s = _mm512_dpbusd_epi32(s, wv[0], _mm512_set1_epi32(x[0]));
	t = _mm512_dpbusd_epi32(t, wv[1], _mm512_set1_epi32(x[1]));
	s = _mm512_dpbusd_epi32(s, wv[2], _mm512_set1_epi32(x[2]));
	t = _mm512_dpbusd_epi32(t, wv[3], _mm512_set1_epi32(x[3]));
	s = _mm512_dpbusd_epi32(s, wv[4], _mm512_set1_epi32(x[4]));
	t = _mm512_dpbusd_epi32(t, wv[5], _mm512_set1_epi32(x[5]));
	s = _mm512_dpbusd_epi32(s, wv[6], _mm512_set1_epi32(x[6]));
	t = _mm512_dpbusd_epi32(t, wv[7], _mm512_set1_epi32(x[7]));
	return _mm512_add_epi32(s, t);
}

// x16tile computes nx (compile-time, 1..8) activation rows against one group of 16 packed rows.
// xd holds each activation row's block scales, xs its −128·Σx per block (both [k][nb]); out rows
// are ldo floats apart; only the first valid lanes of each output row are stored.
static inline __attribute__((always_inline)) void KN_FN(x16tile)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	const uint8_t *scales = g + nb * 512;
	__m512 acc[8];
	for (int k = 0; k < nx; k++)
		acc[k] = _mm512_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = g + b * 512;
		if (pf > 0) {
			for (int l = 0; l < 512; l += 64)
				_mm_prefetch((const char *)(wb + pf + l), KN_X16_HINT);
			if ((b & 1) == 0)
				_mm_prefetch((const char *)(scales + b * 32 + 128), _MM_HINT_T0);
		}
		__m512i wv[8];
		for (int q = 0; q < 8; q++)
			wv[q] = _mm512_loadu_si512((const void *)(wb + 64 * q));
		const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + b * 32)));
		for (int k = 0; k < nx; k++) {
			__m512i s = KN_FN(x16dot)(_mm512_set1_epi32(xs[k * nb + b]), wv, xq + k * xrow + b * 34 + 2);
			const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(xd[k * nb + b]));
			acc[k] = _mm512_fmadd_ps(p, dw, acc[k]);
		}
	}
	const __mmask16 m = valid >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << valid) - 1);
	for (int k = 0; k < nx; k++)
		_mm512_mask_storeu_ps(out + k * ldo, m, acc[k]);
}
#else
// x8piece: one piece's dot products for 8 rows without VNNI: back to signed weights and the sign
// trick, |w|·(x·sign w) = w·x, so maddubs never saturates (|w| ≤ 127).
static inline __attribute__((always_inline)) __m256i KN_FN(x8piece)(__m256i s, __m256i wq, __m256i xv) {
	const __m256i w = _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80));
	const __m256i d = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
	return _mm256_add_epi32(s, _mm256_madd_epi16(d, _mm256_set1_epi16(1)));
}

// x8dot is x16dot for one 8-row half (pieces 64 bytes apart in wv).
static inline __attribute__((always_inline)) __m256i KN_FN(x8dot)(const __m256i *wv, const uint8_t *xb) {
	const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xb));
	const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + 16)));
	__m256i s = _mm256_setzero_si256(), t = _mm256_setzero_si256();
	s = KN_FN(x8piece)(s, wv[0], _mm256_shuffle_epi32(lo, 0x00));
	t = KN_FN(x8piece)(t, wv[1], _mm256_shuffle_epi32(lo, 0x55));
	s = KN_FN(x8piece)(s, wv[2], _mm256_shuffle_epi32(lo, 0xaa));
	t = KN_FN(x8piece)(t, wv[3], _mm256_shuffle_epi32(lo, 0xff));
	s = KN_FN(x8piece)(s, wv[4], _mm256_shuffle_epi32(hi, 0x00));
	t = KN_FN(x8piece)(t, wv[5], _mm256_shuffle_epi32(hi, 0x55));
	s = KN_FN(x8piece)(s, wv[6], _mm256_shuffle_epi32(hi, 0xaa));
	t = KN_FN(x8piece)(t, wv[7], _mm256_shuffle_epi32(hi, 0xff));
	return _mm256_add_epi32(s, t);
}

// store16 writes the first valid (1..16) of a group's 16 row results, rows 0-7 in lo, 8-15 in hi.
static inline __attribute__((always_inline)) void KN_FN(store16)(float *out, __m256 lo, __m256 hi, int valid) {
	if (valid == 16) {
		_mm256_storeu_ps(out, lo);
		_mm256_storeu_ps(out + 8, hi);
		return;
	}
	float r[16];
	_mm256_storeu_ps(r, lo);
	_mm256_storeu_ps(r + 8, hi);
	for (int i = 0; i < valid; i++)
		out[i] = r[i];
}

// x16row's prefetch hint, settable apart from the tiles'.
#ifndef KN_X16ROW_HINT
#define KN_X16ROW_HINT KN_X16_HINT
#endif

// x16row is x16tile for one activation row (decoding) on AVX2: both 8-row halves in one pass over
// the group, so every cache line is read once and prefetching never pauses (taking the halves in
// turn streamed the group from memory in the first and re-read it from cache, prefetching nothing,
// in the second), and each of the activation's pieces is broadcast once for the 16 rows. Same
// x8piece arithmetic per lane, so the results are bit-identical to x16tile's.
static inline __attribute__((always_inline)) void KN_FN(x16row)(const uint8_t *g, int64_t nb, const uint8_t *xq,
		const float *xd, float *out, int valid, int pf) {
	const uint8_t *scales = g + nb * 512;
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = g + b * 512;
		if (pf > 0) {
			for (int l = 0; l < 512; l += 64)
				_mm_prefetch((const char *)(wb + pf + l), KN_X16ROW_HINT);
			if ((b & 1) == 0)
				_mm_prefetch((const char *)(scales + b * 32 + 128), _MM_HINT_T0);
		}
		const uint8_t *xb = xq + b * 34 + 2;
		const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xb));
		const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + 16)));
		__m256i s0 = _mm256_setzero_si256(), t0 = s0, s1 = s0, t1 = s0;
#define KN_X16ROW_PIECE(q, src, imm, sa, sb)                                                                  \
	{                                                                                                     \
		const __m256i xv = _mm256_shuffle_epi32(src, imm);                                                \
		sa = KN_FN(x8piece)(sa, _mm256_loadu_si256((const __m256i *)(wb + 64 * (q))), xv);                \
		sb = KN_FN(x8piece)(sb, _mm256_loadu_si256((const __m256i *)(wb + 64 * (q) + 32)), xv);           \
	}
		KN_X16ROW_PIECE(0, lo, 0x00, s0, s1)
		KN_X16ROW_PIECE(1, lo, 0x55, t0, t1)
		KN_X16ROW_PIECE(2, lo, 0xaa, s0, s1)
		KN_X16ROW_PIECE(3, lo, 0xff, t0, t1)
		KN_X16ROW_PIECE(4, hi, 0x00, s0, s1)
		KN_X16ROW_PIECE(5, hi, 0x55, t0, t1)
		KN_X16ROW_PIECE(6, hi, 0xaa, s0, s1)
		KN_X16ROW_PIECE(7, hi, 0xff, t0, t1)
#undef KN_X16ROW_PIECE
		const __m256 dx = _mm256_set1_ps(xd[b]);
		const __m256 dw0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32)));
		const __m256 dw1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32 + 16)));
		acc0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, t0)), dx), dw0, acc0);
		acc1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s1, t1)), dx), dw1, acc1);
	}
	KN_FN(store16)(out, acc0, acc1, valid);
}

// x16tile on AVX2: each 8-row half of the group in turn, with x16tile's arithmetic per lane.
static inline __attribute__((always_inline)) void KN_FN(x16tile)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	(void)xs; // the sign trick needs no correction
	const uint8_t *scales = g + nb * 512;
	if (nx == 1) {
		KN_FN(x16row)(g, nb, xq, xd, out, valid, pf);
		return;
	}
	for (int h = 0; h < 2 && 8 * h < valid; h++) {
		__m256 acc[8];
		for (int k = 0; k < nx; k++)
			acc[k] = _mm256_setzero_ps();
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *wb = g + b * 512 + 32 * h;
			if (pf > 0 && h == 0) {
				for (int l = 0; l < 512; l += 64)
					_mm_prefetch((const char *)(g + b * 512 + pf + l), KN_X16_HINT);
				if ((b & 1) == 0)
					_mm_prefetch((const char *)(scales + b * 32 + 128), _MM_HINT_T0);
			}
			__m256i wv[8];
			for (int q = 0; q < 8; q++)
				wv[q] = _mm256_loadu_si256((const __m256i *)(wb + 64 * q));
			const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 32 + 16 * h)));
			for (int k = 0; k < nx; k++) {
				const __m256i s = KN_FN(x8dot)(wv, xq + k * xrow + b * 34 + 2);
				const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(xd[k * nb + b]));
				acc[k] = _mm256_fmadd_ps(p, dw, acc[k]);
			}
		}
		const int v = valid - 8 * h < 8 ? valid - 8 * h : 8;
		for (int k = 0; k < nx; k++) {
			if (v == 8) {
				_mm256_storeu_ps(out + k * ldo + 8 * h, acc[k]);
			} else {
				float r[8];
				_mm256_storeu_ps(r, acc[k]);
				for (int i = 0; i < v; i++)
					out[k * ldo + 8 * h + i] = r[i];
			}
		}
	}
}
#endif

// x16tile_n dispatches a run-time activation-row count (1..8) to x16tile with a constant one.
static inline __attribute__((always_inline)) void KN_FN(x16tile_n)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	switch (nx) {
	case 1: KN_FN(x16tile)(1, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 2: KN_FN(x16tile)(2, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 3: KN_FN(x16tile)(3, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 4: KN_FN(x16tile)(4, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 5: KN_FN(x16tile)(5, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 6: KN_FN(x16tile)(6, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 7: KN_FN(x16tile)(7, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	default: KN_FN(x16tile)(8, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	}
}

// kn_matmul_q8_0x8: out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1) (r0 a multiple of 16; rows
// past the matrix's last are padding and never stored), j < n. Each group is read once per call
// when n ≤ 8, and from cache for further tiles of 8 activation rows.
void KN_FN(kn_matmul_q8_0x8)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n) {
	const int64_t nb = cols / 32;
	float stack[KN_STACK_SCALES];
	float *xd = KN_FN(scale_buf)(stack, 2 * n * nb);
	int32_t *xs = (int32_t *)(xd + n * nb);
	KN_FN(kn_q8_prepare)(xq, n, cols, xd, xs);
	KN_FN(kn_matmul_q8_0x8_prep)(out, ldo, w, cols, r0, r1, xq, n, xd, xs);
	if (xd != stack)
		free(xd);
}

// kn_q8_prepare writes what the packed products derive from n activation rows xq: each block's
// scale as float (xd) and −128·Σx (xs), [row][nb] each.
void KN_FN(kn_q8_prepare)(const uint8_t *xq, int64_t n, int64_t cols, float *xd, int32_t *xs) {
	const int64_t nb = cols / 32;
	KN_FN(x4sums)(xd, xs, xq, n, nb * 34, nb);
	for (int64_t i = 0; i < n * nb; i++)
		xs[i] *= 16; // −8·Σx → −128·Σx, exact
}

// kn_matmul_q8_0x8_prep is kn_matmul_q8_0x8 with xd and xs from kn_q8_prepare.
void KN_FN(kn_matmul_q8_0x8_prep)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs) {
	const int64_t nb = cols / 32, xrow = nb * 34, gbytes = nb * 544;
	const int pf = kn_pf_distance((r1 - r0 + 15) / 16 * gbytes);
	for (int64_t r = r0; r < r1; r += 16) {
		const uint8_t *g = w + (r / 16) * gbytes;
		const int valid = r1 - r < 16 ? (int)(r1 - r) : 16;
		for (int64_t j = 0; j < n; j += 8) {
			const int nx = n - j < 8 ? (int)(n - j) : 8;
			// The first tile streams the group from memory; later ones find it in cache.
			KN_FN(x16tile_n)(nx, g, nb, xq + j * xrow, xrow, xd + j * nb, xs + j * nb, out + j * ldo + r, ldo, valid, j == 0 ? pf : 0);
		}
	}
}
