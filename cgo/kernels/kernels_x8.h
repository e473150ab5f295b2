// Packed Q8_0 kernels ("Q8_0x8"), included twice by kernels_amd64.c like kernels_q.h (KN_VNNI, KN_FN).
//
// Layout (PackQ8_0 writes it): rows in groups of 8; a group is nb blocks of 256 weight bytes followed
// by nb × 8 fp16 scales. Within a block the 8 rows' 32 bytes are interleaved in 4-byte pieces: piece q
// of rows 0..7 form one 32-byte vector, so lane i of a dot-product instruction accumulates row i and
// no horizontal reduction is ever needed. Weight bytes are stored plus 128 (unsigned), the operand
// form vpdpbusd takes: Σ(w+128)·x = Σw·x + 128·Σx, and 128·Σx per activation block is subtracted
// exactly by starting the block's integer sum at −128·Σx.
//
// Numerics, identical on both tiers and for every n: per (row, activation row) and block,
// s = Σ w·x exactly in int32, p = float(s)·d_x, acc = fma(p, d_w, acc); blocks in order.

#define KN_X8_PF 1024 // bytes ahead to prefetch within a group's stream

// x8dot adds the block's dot products of 8 packed rows (wv, as stored: w+128) with one activation
// block (xb: the 32 int8 values) to s.
static inline __attribute__((always_inline)) __m256i KN_FN(x8piece)(__m256i s, __m256i wq, __m256i xv) {
#if KN_VNNI
	return _mm256_dpbusd_epi32(s, wq, xv);
#else
	// No VNNI: back to signed weights and the sign trick, |w|·(x·sign w) = w·x, so maddubs never
	// saturates (|w| ≤ 127).
	const __m256i w = _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80));
	const __m256i d = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
	return _mm256_add_epi32(s, _mm256_madd_epi16(d, _mm256_set1_epi16(1)));
#endif
}

// x8dot adds the block's dot products of 8 packed rows (wv, as stored: w+128) with one activation
// block (xb: the 32 int8 values) to s. The activation's 4-byte pieces are spread to all lanes by
// in-register shuffles of two 16-byte broadcasts (two loads per block instead of eight), and the
// pieces alternate between two accumulators to halve the dependency chain.
static inline __attribute__((always_inline)) __m256i KN_FN(x8dot)(__m256i s, const __m256i *wv, const uint8_t *xb) {
	const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)xb));
	const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(xb + 16)));
	__m256i t = _mm256_setzero_si256();
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

// x8tile computes nx (compile-time, 1..8) activation rows against one group of 8 packed rows.
// xd holds each activation row's block scales, xs its −128·Σx per block (both [k][nb]); out rows are
// ldo floats apart; only the first valid lanes of each output row are stored.
static inline __attribute__((always_inline)) void KN_FN(x8tile)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	const uint8_t *scales = g + nb * 256;
	__m256 acc[8];
	for (int k = 0; k < nx; k++)
		acc[k] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = g + b * 256;
		if (pf) {
			for (int l = 0; l < 256; l += 64)
				_mm_prefetch((const char *)(wb + KN_X8_PF + l), _MM_HINT_T0);
			if ((b & 3) == 0)
				_mm_prefetch((const char *)(scales + b * 16 + 64), _MM_HINT_T0);
		}
		__m256i wv[8];
		for (int q = 0; q < 8; q++)
			wv[q] = _mm256_loadu_si256((const __m256i *)(wb + 32 * q));
		const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + b * 16)));
		for (int k = 0; k < nx; k++) {
#if KN_VNNI
			__m256i s = _mm256_set1_epi32(xs[k * nb + b]);
#else
			__m256i s = _mm256_setzero_si256();
#endif
			s = KN_FN(x8dot)(s, wv, xq + k * xrow + b * 34 + 2);
			const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(xd[k * nb + b]));
			acc[k] = _mm256_fmadd_ps(p, dw, acc[k]);
		}
	}
	for (int k = 0; k < nx; k++) {
		if (valid == 8) {
			_mm256_storeu_ps(out + k * ldo, acc[k]);
		} else {
			float r[8];
			_mm256_storeu_ps(r, acc[k]);
			for (int i = 0; i < valid; i++)
				out[k * ldo + i] = r[i];
		}
	}
}

// x8tile_n dispatches a run-time activation-row count (1..8) to x8tile with a constant one.
static inline __attribute__((always_inline)) void KN_FN(x8tile_n)(int nx, const uint8_t *g, int64_t nb,
		const uint8_t *xq, int64_t xrow, const float *xd, const int32_t *xs, float *out, int64_t ldo,
		int valid, int pf) {
	switch (nx) {
	case 1: KN_FN(x8tile)(1, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 2: KN_FN(x8tile)(2, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 3: KN_FN(x8tile)(3, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 4: KN_FN(x8tile)(4, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 5: KN_FN(x8tile)(5, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 6: KN_FN(x8tile)(6, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	case 7: KN_FN(x8tile)(7, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	default: KN_FN(x8tile)(8, g, nb, xq, xrow, xd, xs, out, ldo, valid, pf); break;
	}
}

// kn_matmul_q8_0x8: out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1) (r0 a multiple of 8; rows
// past the matrix's last are padding and never stored), j < n. Each group is read once per call
// when n ≤ 8, and from cache for further tiles of 8 activation rows.
void KN_FN(kn_matmul_q8_0x8)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n) {
	const int64_t nb = cols / 32, xrow = nb * 34, gbytes = nb * 272;
	float stack[KN_STACK_SCALES];
	float *xd = KN_FN(scale_buf)(stack, 2 * n * nb);
	int32_t *xs = (int32_t *)(xd + n * nb);
	KN_FN(scales)(xd, xq, n, xrow, nb, 34);
	for (int64_t j = 0; j < n; j++)
		for (int64_t b = 0; b < nb; b++) {
			const int8_t *v = (const int8_t *)(xq + j * xrow + b * 34 + 2);
			int32_t s = 0;
			for (int e = 0; e < 32; e++)
				s += v[e];
			xs[j * nb + b] = -128 * s;
		}
	const int pf = n <= 8; // weights stream from memory; with more rows they come from cache
	for (int64_t r = r0; r < r1; r += 8) {
		const uint8_t *g = w + (r / 8) * gbytes;
		const int valid = r1 - r < 8 ? (int)(r1 - r) : 8;
		for (int64_t j = 0; j < n; j += 8) {
			const int nx = n - j < 8 ? (int)(n - j) : 8;
			KN_FN(x8tile_n)(nx, g, nb, xq + j * xrow, xrow, xd + j * nb, xs + j * nb, out + j * ldo + r,
				ldo, valid, pf);
		}
	}
	if (xd != stack)
		free(xd);
}
