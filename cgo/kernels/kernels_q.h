// Quantized product kernels, included twice by kernels_amd64.c: once for AVX2 (KN_VNNI 0) and once
// for AVX-512 VNNI (KN_VNNI 1). KN_FN(name) appends the tier suffix; KN_TW4 is the number of weight
// rows per matmul tile (each weight block loaded feeds four activation rows).

// u8dot: 8 int32 lanes, each the sum of u·x over a group of four bytes, u unsigned (≤ 127, or a
// nibble) and x signed. maddubs sums byte pairs into int16 (max 2·127·127, no saturation) and
// madd widens; VNNI's vpdpbusd does both in one instruction.
static inline __attribute__((always_inline)) __m256i KN_FN(u8dot)(__m256i u, __m256i x) {
#if KN_VNNI
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
#else
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
#endif
}

// i8dot: u8dot for signed w (in [-127, 127]) via the sign trick: |w|·(x·sign w) = w·x.
static inline __attribute__((always_inline)) __m256i KN_FN(i8dot)(__m256i absw, __m256i w, __m256i x) {
	return KN_FN(u8dot)(absw, _mm256_sign_epi8(x, w));
}

// Q4_0 weights are used as unsigned nibbles q in [0, 15] (value q-8): Σ(q-8)·x = Σq·x - 8·Σx. The
// reduction leaves the sums of elements 0..15 and 16..31 in the two 128-bit halves; q4fold adds
// them (as integers, so a block is one exact int32 sum, as in ggml and the packed kernels) and
// subtracts 8·Σx over the block, computed once per activation block. Both halves then hold the
// same values, and q4 results are read from the low half.

// Q4_0 block → 32 unsigned nibbles: low nibbles are elements 0..15, high nibbles 16..31.
static inline __attribute__((always_inline)) __m256i KN_FN(unpack_q4)(const uint8_t *blk) {
	const __m128i raw = _mm_loadu_si128((const __m128i *)(blk + 2));
	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
}

// xsum8 returns 8·Σx over the 32 values of a Q8_0 block.
static inline __attribute__((always_inline)) int32_t KN_FN(xsum8)(const uint8_t *blk) {
	int32_t a = 0;
	for (int e = 0; e < 32; e++)
		a += (int8_t)blk[2 + e];
	return 8 * a;
}

// q4fold turns reduced Q4_0 lanes [lo sums | hi sums] into whole-block sums in both halves, minus
// cx (8·Σx per lane).
static inline __attribute__((always_inline)) __m256i KN_FN(q4fold)(__m256i u, const int32_t *cx) {
	u = _mm256_add_epi32(u, _mm256_permute2x128_si256(u, u, 0x01));
	return _mm256_sub_epi32(u, _mm256_loadu_si256((const __m256i *)cx));
}

// fold4 gives the four results of an accumulator: q4's halves are equal (q4fold), others add.
static inline __attribute__((always_inline)) __m128 KN_FN(fold4)(int q4, __m256 acc) {
	return q4 ? _mm256_castps256_ps128(acc) : _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
}

// scales converts the fp16 scales of rows × nb blocks (rows stride bytes apart, blocks bb bytes
// apart) to float, row-major into d.
static inline __attribute__((always_inline)) void KN_FN(scales)(float *d, const uint8_t *p, int64_t rows,
		int64_t stride, int64_t nb, int64_t bb) {
	for (int64_t r = 0; r < rows; r++)
		for (int64_t b = 0; b < nb; b++) {
			uint16_t h;
			memcpy(&h, p + r * stride + b * bb, 2);
			d[r * nb + b] = _cvtsh_ss(h);
		}
}

// x4sums stores d_x as float ([j][b]) and -8·Σx over each block ([j][b]) of n activation rows: the
// corrections of Q4_0 nibbles (value + 8), and ×16 those of packed Q8_0 weights (value + 128).
static inline __attribute__((always_inline)) void KN_FN(x4sums)(float *xd, int32_t *xs, const uint8_t *xq,
		int64_t n, int64_t xrow, int64_t nb) {
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	for (int64_t j = 0; j < n; j++)
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *blk = xq + j * xrow + b * 34;
			uint16_t h;
			memcpy(&h, blk, 2);
			xd[j * nb + b] = _cvtsh_ss(h);
			// |x| ≤ 128: pair sums fit int16, and the int32 lanes sum exactly.
			const __m256i v = _mm256_loadu_si256((const __m256i *)(blk + 2));
			const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16);
			__m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
			t = _mm_hadd_epi32(t, t);
			t = _mm_hadd_epi32(t, t);
			xs[j * nb + b] = -8 * _mm_cvtsi128_si32(t);
		}
}

// reduce4 sums each of four int32 vectors within its 128-bit halves: lanes [a b c d | a b c d].
static inline __attribute__((always_inline)) __m256i KN_FN(reduce4)(__m256i a, __m256i b, __m256i c, __m256i d) {
	const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
	const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
	return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

// tile4 computes out[k·ldo + i] = dot(W row i, X row k) for i < tw, k < 4: weight rows wstride
// bytes apart (Q8_0 or Q4_0 blocks), Q8_0 activation rows xstride bytes apart, wd the weight
// rows' scales as floats (nb per row). tw and q4 are compile-time constants at every call, so the
// loops unroll into registers. For four activation rows the four int32 block sums of a weight row are
// reduced into one vector (lanes = rows 0..3, per 128-bit half) by two unpack-and-add rounds, so
// convert, scale and accumulate run once per four block pairs instead of once per pair. xd4 holds
// the four rows' scales interleaved per block ([b][k]).
static inline __attribute__((always_inline)) void KN_FN(tile4)(int q4, int tw, const uint8_t *w, int64_t wstride,
		const float *wd, const uint8_t *x, int64_t xstride, const float *xd4, const int32_t *cx4, int64_t nb,
		float *out, int64_t ldo) {
	const int64_t wbb = q4 ? 18 : 34;
	__m256 acc[KN_TW4];
	for (int i = 0; i < tw; i++)
		acc[i] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		__m256i xv[4];
		for (int k = 0; k < 4; k++)
			xv[k] = _mm256_loadu_si256((const __m256i *)(x + k * xstride + b * 34 + 2));
		const __m256 dx = _mm256_broadcast_ps((const __m128 *)(xd4 + b * 4));
		for (int i = 0; i < tw; i++) {
			__m256i u;
			if (q4) {
				const __m256i q = KN_FN(unpack_q4)(w + i * wstride + b * wbb);
				u = KN_FN(reduce4)(KN_FN(u8dot)(q, xv[0]), KN_FN(u8dot)(q, xv[1]),
					KN_FN(u8dot)(q, xv[2]), KN_FN(u8dot)(q, xv[3]));
				u = KN_FN(q4fold)(u, cx4 + b * 8);
			} else {
				const __m256i wv = _mm256_loadu_si256((const __m256i *)(w + i * wstride + b * wbb + 2));
				const __m256i aw = _mm256_sign_epi8(wv, wv);
				u = KN_FN(reduce4)(KN_FN(i8dot)(aw, wv, xv[0]), KN_FN(i8dot)(aw, wv, xv[1]),
					KN_FN(i8dot)(aw, wv, xv[2]), KN_FN(i8dot)(aw, wv, xv[3]));
			}
			acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(u), dx), _mm256_broadcast_ss(wd + i * nb + b), acc[i]);
		}
	}
	for (int i = 0; i < tw; i++) {
		float r[4];
		_mm_storeu_ps(r, KN_FN(fold4)(q4, acc[i]));
		for (int k = 0; k < 4; k++)
			out[k * ldo + i] = r[k];
	}
}

// tilev is the matrix-vector counterpart of tile4: up to four weight rows (lanes) against one
// activation row. Its float operations are exactly tile4's for the same (row, activation) pair:
// per block p = float(int sum)·d_x, acc = fma(p, d_w, acc), and finally (Q8_0, whose two half
// blocks are summed apart) low half + high half.
// So MatVec and MatMul give bit-identical results, like llama.cpp's batched and one-token paths.
// wd4 holds the rows' scales interleaved per block ([b][4]).
static inline __attribute__((always_inline)) void KN_FN(tilev)(int q4, int tw, const uint8_t *w, int64_t wstride,
		const float *wd4, const uint8_t *x, const float *xd, const int32_t *cx, int64_t nb, float *out) {
	const int64_t wbb = q4 ? 18 : 34;
	__m256 acc = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + b * 34 + 2));
		__m256i s[4];
		for (int i = 0; i < 4; i++) {
			if (i >= tw) {
				s[i] = _mm256_setzero_si256();
			} else if (q4) {
				s[i] = KN_FN(u8dot)(KN_FN(unpack_q4)(w + i * wstride + b * wbb), xv);
			} else {
				const __m256i wv = _mm256_loadu_si256((const __m256i *)(w + i * wstride + b * wbb + 2));
				s[i] = KN_FN(i8dot)(_mm256_sign_epi8(wv, wv), wv, xv);
			}
		}
		__m256i u = KN_FN(reduce4)(s[0], s[1], s[2], s[3]);
		if (q4) // cx holds 8·Σx ×8 for this block
			u = KN_FN(q4fold)(u, cx + b * 8);
		const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(u), _mm256_broadcast_ss(xd + b));
		acc = _mm256_fmadd_ps(p, _mm256_broadcast_ps((const __m128 *)(wd4 + b * 4)), acc);
	}
	float r[4];
	_mm_storeu_ps(r, KN_FN(fold4)(q4, acc));
	for (int i = 0; i < tw; i++)
		out[i] = r[i];
}

// tilev_rows dispatches a run-time row count (1..4) to tilev with a constant one.
static inline __attribute__((always_inline)) void KN_FN(tilev_rows)(int q4, int rows, const uint8_t *w, int64_t wstride,
		const float *wd4, const uint8_t *x, const float *xd, const int32_t *cx, int64_t nb, float *out) {
	switch (rows) {
	case 1: KN_FN(tilev)(q4, 1, w, wstride, wd4, x, xd, cx, nb, out); break;
	case 2: KN_FN(tilev)(q4, 2, w, wstride, wd4, x, xd, cx, nb, out); break;
	case 3: KN_FN(tilev)(q4, 3, w, wstride, wd4, x, xd, cx, nb, out); break;
	default: KN_FN(tilev)(q4, 4, w, wstride, wd4, x, xd, cx, nb, out); break;
	}
}

// xsumsv fills cx ([b][8]) for one activation row as tilev reads it.
static inline __attribute__((always_inline)) void KN_FN(xsumsv)(int32_t *cx, const uint8_t *x, int64_t nb) {
	for (int64_t b = 0; b < nb; b++) {
		const int32_t s = KN_FN(xsum8)(x + b * 34);
		for (int i = 0; i < 8; i++)
			cx[b * 8 + i] = s;
	}
}

// scales4 converts the scales of up to four weight rows into the [b][4] layout tilev reads.
static inline __attribute__((always_inline)) void KN_FN(scales4)(float *d4, const uint8_t *w, int rows, int64_t stride,
		int64_t nb, int64_t bb) {
	for (int64_t b = 0; b < nb; b++)
		for (int i = 0; i < 4; i++) {
			uint16_t h = 0;
			if (i < rows)
				memcpy(&h, w + i * stride + b * bb, 2);
			d4[b * 4 + i] = _cvtsh_ss(h);
		}
}

// Scale buffers up to this many floats live on the stack; larger ones are malloc'd.
#define KN_STACK_SCALES 4096 // 16 KiB; cgo runs C on the thread's system stack

// scale_buf returns room for need 4-byte values (floats, then int32 block sums).
static inline __attribute__((always_inline)) float *KN_FN(scale_buf)(float *stack, int64_t need) {
	if (need <= KN_STACK_SCALES)
		return stack;
	float *p = malloc(need * sizeof(float));
	if (!p)
		__builtin_trap(); // a few KiB unavailable: nothing sensible left to do
	return p;
}

// wscales reads the fp16 scales of tw weight rows (stride bytes apart) at one block and widens them
// with F16C into the lane order tilev uses: [d0 d1 d2 d3 | d0 d1 d2 d3], rows past tw 0.
static inline __attribute__((always_inline)) __m256 KN_FN(wscales)(int tw, const uint8_t *p, int64_t stride) {
	uint64_t h = 0;
	for (int i = 0; i < tw; i++) {
		uint16_t v;
		memcpy(&v, p + i * stride, 2);
		h |= (uint64_t)v << (16 * i);
	}
	return _mm256_cvtph_ps(_mm_set1_epi64x((long long)h));
}

// Streaming matvec geometry (measured on Zen 5, AVX2 and VNNI tiers alike, ~96 MiB of Q8_0 weights,
// 576..4864 columns): 8 rows per pass beat 4 by ~25%; a prefetch two passes ahead (16 rows) beat one
// pass ahead, an in-row distance of 0.5..2 KiB, and no prefetch (which is 2..5× slower), and T0
// matched NTA. Rows are contiguous, so "16 rows on" is the same block of the rows two passes later.
// The look-ahead stops at the call's last row: the engine gives row chunks to threads in no fixed
// order, so rows past r1 are usually another thread's. For the first two passes, which nothing
// prefetched, KN_PF_LEAD bytes per row are fetched up front and then KN_PF_LEAD bytes ahead within
// the row (512 beat 256 and 1024); that roughly doubled the bandwidth when calls of 40 rows (the
// engine's chunk for 576-row matrices on 2 threads) are not consecutive.
#define KN_MV_ROWS 8
#define KN_PF_ROWS 16
#define KN_PF_LEAD 512

// streamv is tilev for decoding, where the weights stream from memory once: tw rows (up to 8, two
// groups of four lanes) in one pass over the blocks, the weight scales widened in the same pass
// (no separate scalar pass), and a prefetch of the rows KN_PF_ROWS further on so the next pass
// finds them in cache. Each group's float operations are exactly tilev's (and so tile4's), which
// keeps MatVec and MatMul bit-identical.
static inline __attribute__((always_inline)) void KN_FN(streamv)(int q4, int tw, int ahead, int lead, const uint8_t *w,
		int64_t wstride, const uint8_t *x, const float *xd, const int32_t *cx, int64_t nb, float *out) {
	const int64_t wbb = q4 ? 18 : 34;
	const int ng = (tw + 3) / 4;
	__m256 acc[2];
	for (int g = 0; g < ng; g++)
		acc[g] = _mm256_setzero_ps();
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * wbb;
		const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + b * 34 + 2));
		const __m256 dx = _mm256_broadcast_ss(xd + b);
		for (int g = 0; g < ng; g++) {
			const int rows = tw - 4 * g < 4 ? tw - 4 * g : 4;
			const uint8_t *wg = wb + 4 * g * wstride;
			__m256i s[4];
			for (int i = 0; i < 4; i++) {
				if (i >= rows) {
					s[i] = _mm256_setzero_si256();
				} else if (q4) {
					s[i] = KN_FN(u8dot)(KN_FN(unpack_q4)(wg + i * wstride), xv);
				} else {
					const __m256i wv = _mm256_loadu_si256((const __m256i *)(wg + i * wstride + 2));
					s[i] = KN_FN(i8dot)(_mm256_sign_epi8(wv, wv), wv, xv);
				}
			}
			__m256i u = KN_FN(reduce4)(s[0], s[1], s[2], s[3]);
			if (q4)
				u = KN_FN(q4fold)(u, cx + b * 8);
			const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(u), dx);
			acc[g] = _mm256_fmadd_ps(p, KN_FN(wscales)(rows, wg, wstride), acc[g]);
		}
		if (q4 && (b & 1)) // 18-byte blocks: every other block still touches every cache line
			continue;
		for (int i = 0; i < tw; i++) {
			if (ahead)
				_mm_prefetch((const char *)(wb + (i + KN_PF_ROWS) * wstride), _MM_HINT_T0);
			if (lead)
				_mm_prefetch((const char *)(wb + i * wstride + KN_PF_LEAD), _MM_HINT_T0);
		}
	}
	for (int g = 0; g < ng; g++) {
		float r[4];
		_mm_storeu_ps(r, KN_FN(fold4)(q4, acc[g]));
		for (int i = 0; i < 4 && 4 * g + i < tw; i++)
			out[4 * g + i] = r[i];
	}
}

// matvec: eight weight rows per pass (streamv), then what is left.
static inline __attribute__((always_inline)) void KN_FN(matvec)(int q4, float *out, const uint8_t *w, int64_t cols,
		int64_t r0, int64_t r1, const uint8_t *xq) {
	const int64_t nb = cols / 32, wbb = q4 ? 18 : 34, wrow = nb * wbb;
	float stack[KN_STACK_SCALES];
	float *xd = KN_FN(scale_buf)(stack, (q4 ? 9 : 1) * nb);
	int32_t *cx = (int32_t *)(xd + nb);
	KN_FN(scales)(xd, xq, 1, 0, nb, 34);
	if (q4)
		KN_FN(xsumsv)(cx, xq, nb);
	// Nothing has prefetched the first two passes' rows: fetch their first KN_PF_LEAD bytes now,
	// and have those passes prefetch KN_PF_LEAD bytes ahead within their own rows.
	const int64_t nlead = r1 - r0 < KN_PF_ROWS ? r1 - r0 : KN_PF_ROWS;
	const int64_t lead_bytes = wrow < KN_PF_LEAD ? wrow : KN_PF_LEAD;
	for (int64_t i = 0; i < nlead; i++)
		for (int64_t o = 0; o < lead_bytes; o += 64)
			_mm_prefetch((const char *)(w + (r0 + i) * wrow + o), _MM_HINT_T0);
	const int long_rows = wrow > KN_PF_LEAD;
	int64_t r = r0;
	for (; r + KN_MV_ROWS <= r1; r += KN_MV_ROWS) {
		const int ahead = r + KN_PF_ROWS + KN_MV_ROWS <= r1, lead = long_rows && r - r0 < KN_PF_ROWS;
		KN_FN(streamv)(q4, KN_MV_ROWS, ahead, lead, w + r * wrow, wrow, xq, xd, cx, nb, out + (r - r0));
	}
	const uint8_t *wr = w + r * wrow;
	float *o = out + (r - r0);
	const int lead = long_rows && r - r0 < KN_PF_ROWS;
	switch (r1 - r) {
	case 0: break;
	case 1: KN_FN(streamv)(q4, 1, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	case 2: KN_FN(streamv)(q4, 2, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	case 3: KN_FN(streamv)(q4, 3, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	case 4: KN_FN(streamv)(q4, 4, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	case 5: KN_FN(streamv)(q4, 5, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	case 6: KN_FN(streamv)(q4, 6, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	default: KN_FN(streamv)(q4, 7, 0, lead, wr, wrow, xq, xd, cx, nb, o); break;
	}
	if (xd != stack)
		free(xd);
}

// matmul: KN_TW4 weight rows × 4 activation rows per pass (tile4); a weight row group stays in L1
// while every activation row streams past it. Activation scales (and, for Q4_0, block sums) are
// computed once per call. Leftover activation rows (n % 4) go through tilev, leftover weight rows
// through tile4 with one row; every output is computed with the same float operations as MatVec.
static inline __attribute__((always_inline)) void KN_FN(matmul)(int q4, float *out, int64_t ldo, const uint8_t *w,
		int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n) {
	const int64_t nb = cols / 32, wbb = q4 ? 18 : 34, wrow = nb * wbb, xrow = nb * 34;
	const int64_t n4 = n / 4 * 4, nleft = n - n4;
	float stack[KN_STACK_SCALES];
	float *xd = KN_FN(scale_buf)(stack, (2 * n + KN_TW4 + 4 + (q4 ? 2 * n4 + 8 * nleft : 0)) * nb);
	float *xd4 = xd + n * nb, *wd = xd4 + n * nb, *wd4 = wd + KN_TW4 * nb;
	int32_t *cx4 = (int32_t *)(wd4 + 4 * nb), *cxv = cx4 + 2 * n4 * nb;
	KN_FN(scales)(xd, xq, n, xrow, nb, 34);
	for (int64_t j = 0; j < n4; j += 4) // per group of four rows: scales (and sums) interleaved per block
		for (int64_t b = 0; b < nb; b++)
			for (int k = 0; k < 4; k++) {
				xd4[j * nb + b * 4 + k] = xd[(j + k) * nb + b];
				if (q4)
					cx4[j * 2 * nb + b * 8 + k] = cx4[j * 2 * nb + b * 8 + 4 + k] =
						KN_FN(xsum8)(xq + (j + k) * xrow + b * 34);
			}
	if (q4)
		for (int64_t j = n4; j < n; j++)
			KN_FN(xsumsv)(cxv + (j - n4) * 8 * nb, xq + j * xrow, nb);
	int64_t r = r0;
	for (; r + KN_TW4 <= r1; r += KN_TW4) {
		const uint8_t *wr = w + r * wrow;
		KN_FN(scales)(wd, wr, KN_TW4, wrow, nb, wbb);
		for (int64_t j = 0; j < n4; j += 4)
			KN_FN(tile4)(q4, KN_TW4, wr, wrow, wd, xq + j * xrow, xrow, xd4 + j * nb, cx4 + j * 2 * nb, nb,
				out + j * ldo + r, ldo);
		if (nleft) {
			for (int i = 0; i < KN_TW4; i += 4) {
				const int rows = KN_TW4 - i < 4 ? KN_TW4 - i : 4;
				KN_FN(scales4)(wd4, wr + i * wrow, rows, wrow, nb, wbb);
				for (int64_t j = n4; j < n; j++)
					KN_FN(tilev_rows)(q4, rows, wr + i * wrow, wrow, wd4, xq + j * xrow, xd + j * nb,
						cxv + (j - n4) * 8 * nb, nb, out + j * ldo + r + i);
			}
		}
	}
	for (; r < r1; r++) {
		const uint8_t *wr = w + r * wrow;
		KN_FN(scales)(wd, wr, 1, wrow, nb, wbb);
		for (int64_t j = 0; j < n4; j += 4)
			KN_FN(tile4)(q4, 1, wr, wrow, wd, xq + j * xrow, xrow, xd4 + j * nb, cx4 + j * 2 * nb, nb,
				out + j * ldo + r, ldo);
		if (nleft) {
			KN_FN(scales4)(wd4, wr, 1, wrow, nb, wbb);
			for (int64_t j = n4; j < n; j++)
				KN_FN(tilev)(q4, 1, wr, wrow, wd4, xq + j * xrow, xd + j * nb, cxv + (j - n4) * 8 * nb, nb,
					out + j * ldo + r);
		}
	}
	if (xd != stack)
		free(xd);
}

void KN_FN(kn_matvec_q8_0)(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq) {
	KN_FN(matvec)(0, out, w, cols, r0, r1, xq);
}
void KN_FN(kn_matvec_q4_0)(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq) {
	KN_FN(matvec)(1, out, w, cols, r0, r1, xq);
}
void KN_FN(kn_matmul_q8_0)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n) {
	KN_FN(matmul)(0, out, ldo, w, cols, r0, r1, xq, n);
}
void KN_FN(kn_matmul_q4_0)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n) {
	KN_FN(matmul)(1, out, ldo, w, cols, r0, r1, xq, n);
}
