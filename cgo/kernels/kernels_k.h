// K-quant products (Q4_K and Q6_K weights in the GGUF row layout against Q8_0 activations),
// included by kernels_amd64.c after kernels_q.h in each tier, whose u8dot they use (vpdpbusd
// on the VNNI tier).
//
// A 256-element super-block spans eight Q8_0 activation blocks of 32, each with its own scale
// d_x, so every 32 (Q4_K) or 16 (Q6_K) weights are summed exactly in integers and scaled in
// float: Q4_K value = d·sc·q − dmin·m (q in 0..15), Q6_K value = d·sc·(q − 32) (q in 0..63).
// The activation terms that do not depend on the weight row (d_x per block, and d_x·Σx per
// 32 or per 16 values for the offsets) are computed once per activation row.

// KN_KT activation rows share each unpacked weight super-block in prompt products (the *_dot4
// tiles): 4 with AVX2's 16 vector registers, 8 with AVX-512's 32.
#if KN_VNNI
#define KN_KT 8
#else
#define KN_KT 4
#endif

// kprep stores, for each of nb Q8_0 blocks of one activation row, d_x (xd[b]) and d_x·Σx over
// the block's two halves of 16 (xh[2b], xh[2b+1]).
static inline __attribute__((always_inline)) void KN_FN(kprep)(float *xd, float *xh, const uint8_t *xq,
		int64_t nb) {
	for (int64_t b = 0; b < nb; b++) {
		const uint8_t *blk = xq + b * 34;
		uint16_t h;
		memcpy(&h, blk, 2);
		const float d = _cvtsh_ss(h);
		int32_t s0 = 0, s1 = 0;
		for (int e = 0; e < 16; e++) {
			s0 += (int8_t)blk[2 + e];
			s1 += (int8_t)blk[18 + e];
		}
		xd[b] = d;
		xh[2 * b] = d * (float)s0;
		xh[2 * b + 1] = d * (float)s1;
	}
}

static inline __attribute__((always_inline)) float KN_FN(khsum)(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

// q4k_dot is one Q4_K row (nsb super-blocks of 144 bytes) against one prepared Q8_0 row.
static inline __attribute__((always_inline)) float KN_FN(q4k_dot)(const uint8_t *w, int64_t nsb,
		const uint8_t *xq, const float *xd, const float *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	__m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 144) {
		uint16_t hd, hm;
		memcpy(&hd, w, 2);
		memcpy(&hm, w + 2, 2);
		const float d = _cvtsh_ss(hd), dmin = _cvtsh_ss(hm);
		// Six-bit scales and mins of the eight sub-blocks, unpacked four bytes at a time.
		uint32_t a, b, c, sm[4];
		memcpy(&a, w + 4, 4);
		memcpy(&b, w + 8, 4);
		memcpy(&c, w + 12, 4);
		sm[0] = a & 0x3f3f3f3f;
		sm[1] = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
		sm[2] = b & 0x3f3f3f3f;
		sm[3] = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
		const __m128i smv = _mm_loadu_si128((const __m128i *)sm);
		const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(smv));
		const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(smv, 8)));
		const float *bd = xd + 8 * s;
		// Σ_j m_j·d_x·Σx over sub-block j: xh holds half sums, pairs added here.
		const __m256 h01 = _mm256_loadu_ps(xh + 16 * s), h23 = _mm256_loadu_ps(xh + 16 * s + 8);
		const __m256 hs = _mm256_hadd_ps(h01, h23); // blocks [0 1 4 5 | 2 3 6 7]
		const __m256 xsum = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(hs), 0xd8)); // blocks 0..7
		accm = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), mnf), xsum, accm);
		float f[8];
		_mm256_storeu_ps(f, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d), scf), _mm256_loadu_ps(bd)));
		const uint8_t *qs = w + 16;
		const uint8_t *x = xq + 8 * s * 34;
		for (int k = 0; k < 4; k++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
			const __m256i lo = _mm256_and_si256(q, low4);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
			const __m256i x0 = _mm256_loadu_si256((const __m256i *)(x + (2 * k) * 34 + 2));
			const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + (2 * k + 1) * 34 + 2));
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(lo, x0)), _mm256_set1_ps(f[2 * k]), acc);
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(hi, x1)), _mm256_set1_ps(f[2 * k + 1]), acc);
		}
	}
	return KN_FN(khsum)(acc) - KN_FN(khsum)(accm);
}

// q4k_dot4 is q4k_dot for four activation rows at once (a prompt batch): the weights' nibbles
// and scales are unpacked once for all four. x[j], xd[j], xh[j] are row j's; out gets four dots.
static inline __attribute__((always_inline)) void KN_FN(q4k_dot4)(float *out, int64_t ostride,
		const uint8_t *w, int64_t nsb, const uint8_t *const *xq, const float *const *xd, const float *const *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f);
	__m256 acc[KN_KT], accm[KN_KT];
	for (int j = 0; j < KN_KT; j++)
		acc[j] = accm[j] = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 144) {
		uint16_t hd, hm;
		memcpy(&hd, w, 2);
		memcpy(&hm, w + 2, 2);
		const float d = _cvtsh_ss(hd), dmin = _cvtsh_ss(hm);
		uint32_t a, b, c, sm[4];
		memcpy(&a, w + 4, 4);
		memcpy(&b, w + 8, 4);
		memcpy(&c, w + 12, 4);
		sm[0] = a & 0x3f3f3f3f;
		sm[1] = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
		sm[2] = b & 0x3f3f3f3f;
		sm[3] = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
		const __m128i smv = _mm_loadu_si128((const __m128i *)sm);
		const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(smv)));
		const __m256 dmn = _mm256_mul_ps(_mm256_set1_ps(dmin),
			_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(smv, 8))));
		float f[KN_KT][8];
		for (int j = 0; j < KN_KT; j++) {
			const __m256 hs = _mm256_hadd_ps(_mm256_loadu_ps(xh[j] + 16 * s), _mm256_loadu_ps(xh[j] + 16 * s + 8));
			const __m256 xsum = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(hs), 0xd8));
			accm[j] = _mm256_fmadd_ps(dmn, xsum, accm[j]);
			_mm256_storeu_ps(f[j], _mm256_mul_ps(dsc, _mm256_loadu_ps(xd[j] + 8 * s)));
		}
		const uint8_t *qs = w + 16;
		for (int k = 0; k < 4; k++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
			const __m256i lo = _mm256_and_si256(q, low4);
			const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
			for (int j = 0; j < KN_KT; j++) {
				const uint8_t *x = xq[j] + (8 * s + 2 * k) * 34 + 2;
				const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
				const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 34));
				acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(lo, x0)), _mm256_set1_ps(f[j][2 * k]), acc[j]);
				acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(hi, x1)), _mm256_set1_ps(f[j][2 * k + 1]), acc[j]);
			}
		}
	}
	for (int j = 0; j < KN_KT; j++)
		out[j * ostride] = KN_FN(khsum)(acc[j]) - KN_FN(khsum)(accm[j]);
}

// q6k_dot is one Q6_K row (nsb super-blocks of 210 bytes) against one prepared Q8_0 row.
static inline __attribute__((always_inline)) float KN_FN(q6k_dot)(const uint8_t *w, int64_t nsb,
		const uint8_t *xq, const float *xd, const float *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
	__m256 acc = _mm256_setzero_ps(), acco = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 210) {
		uint16_t hd;
		memcpy(&hd, w + 208, 2);
		const float d = _cvtsh_ss(hd);
		const int8_t *sc = (const int8_t *)(w + 192);
		// Offsets: Σ over 16-element groups of sc·32·d_x·Σx.
		const __m128i sc16 = _mm_loadu_si128((const __m128i *)sc);
		const __m256 s0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc16));
		const __m256 s1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc16, 8)));
		const __m256 dv = _mm256_set1_ps(d);
		acco = _mm256_fmadd_ps(_mm256_mul_ps(dv, s0), _mm256_loadu_ps(xh + 16 * s), acco);
		acco = _mm256_fmadd_ps(_mm256_mul_ps(dv, s1), _mm256_loadu_ps(xh + 16 * s + 8), acco);
		const uint8_t *x = xq + 8 * s * 34;
		const float *bd = xd + 8 * s;
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = w + 64 * h, *qh = w + 128 + 32 * h;
			const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
			__m256i q[4];
			q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(hb, three), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), three), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), three), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), three), 4));
			for (int k = 0; k < 4; k++) {
				const int blk = 4 * h + k; // activation block within the super-block
				const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + blk * 34 + 2));
				const float f = d * bd[blk];
				// lanes 0-3 sum elements 0-15 (scale 2·blk), lanes 4-7 elements 16-31 (2·blk+1).
				const __m256 sv = _mm256_set_m128(_mm_set1_ps(f * (float)sc[2 * blk + 1]), _mm_set1_ps(f * (float)sc[2 * blk]));
				acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(q[k], xv)), sv, acc);
			}
		}
	}
	return KN_FN(khsum)(acc) - 32.0f * KN_FN(khsum)(acco);
}


// q5_bits spreads the 32 fifth bits of a Q5_0/Q5_1 block (bit j of qh is element j's) to 0x10 in
// byte j: each 128-bit lane picks the qh byte holding its elements' bits, and a per-byte bit mask
// tests them.
static inline __attribute__((always_inline)) __m256i KN_FN(q5_bits)(uint32_t qh) {
	const __m256i pick = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
		0x0101010101010101ll, 0x0000000000000000ll);
	const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), pick);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// q5_dot is one Q5_0 (offset 0: value d·(q − 16)) or Q5_1 (value d·q + m) row of nb blocks against
// a prepared Q8_0 row: Σq·x per block in integers, the offsets from d_x·Σx.
static inline __attribute__((always_inline)) float KN_FN(q5_dot)(int q51, const uint8_t *w, int64_t nb,
		const uint8_t *xq, const float *xh) {
	const int64_t bb = q51 ? 24 : 22;
	const int qo = q51 ? 8 : 6; // offset of qs
	__m256 acc = _mm256_setzero_ps();
	float off = 0;
	for (int64_t b = 0; b < nb; b++, w += bb, xq += 34) {
		uint16_t hd, hm;
		uint32_t qh;
		memcpy(&hd, w, 2);
		memcpy(&qh, w + qo - 4, 4);
		uint16_t hx;
		memcpy(&hx, xq, 2);
		const float d = _cvtsh_ss(hd), dx = _cvtsh_ss(hx);
		const __m128i raw = _mm_loadu_si128((const __m128i *)(w + qo));
		const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), _mm256_set1_epi8(0x0f));
		const __m256i q = _mm256_or_si256(nib, KN_FN(q5_bits)(qh));
		const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + 2));
		acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(q, x)), _mm256_set1_ps(d * dx), acc);
		const float xs = xh[2 * b] + xh[2 * b + 1]; // d_x·Σx
		if (q51) {
			memcpy(&hm, w + 2, 2);
			off += _cvtsh_ss(hm) * xs;
		} else {
			off -= 16.0f * d * xs;
		}
	}
	return KN_FN(khsum)(acc) + off;
}

static inline __attribute__((always_inline)) float KN_FN(q5_0_dot)(const uint8_t *w, int64_t nsb,
		const uint8_t *xq, const float *xd, const float *xh) {
	(void)xd;
	return KN_FN(q5_dot)(0, w, nsb, xq, xh);
}

static inline __attribute__((always_inline)) float KN_FN(q5_1_dot)(const uint8_t *w, int64_t nsb,
		const uint8_t *xq, const float *xd, const float *xh) {
	(void)xd;
	return KN_FN(q5_dot)(1, w, nsb, xq, xh);
}

// q5k_dot is one Q5_K row (nsb super-blocks of 176 bytes): Q4_K's scales, mins and nibbles, and
// bit s of qh[l] as the fifth bit of element l of sub-block s.
static inline __attribute__((always_inline)) float KN_FN(q5k_dot)(const uint8_t *w, int64_t nsb,
		const uint8_t *xq, const float *xd, const float *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
	__m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 176) {
		uint16_t hd, hm;
		memcpy(&hd, w, 2);
		memcpy(&hm, w + 2, 2);
		const float d = _cvtsh_ss(hd), dmin = _cvtsh_ss(hm);
		uint32_t a, b, c, sm[4];
		memcpy(&a, w + 4, 4);
		memcpy(&b, w + 8, 4);
		memcpy(&c, w + 12, 4);
		sm[0] = a & 0x3f3f3f3f;
		sm[1] = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
		sm[2] = b & 0x3f3f3f3f;
		sm[3] = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
		const __m128i smv = _mm_loadu_si128((const __m128i *)sm);
		const __m256 scf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(smv));
		const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(smv, 8)));
		const __m256 h01 = _mm256_loadu_ps(xh + 16 * s), h23 = _mm256_loadu_ps(xh + 16 * s + 8);
		const __m256 hs = _mm256_hadd_ps(h01, h23);
		const __m256 xsum = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(hs), 0xd8));
		accm = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), mnf), xsum, accm);
		float f[8];
		_mm256_storeu_ps(f, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d), scf), _mm256_loadu_ps(xd + 8 * s)));
		const __m256i hb = _mm256_loadu_si256((const __m256i *)(w + 16));
		const uint8_t *qs = w + 48;
		const uint8_t *x = xq + 8 * s * 34;
		for (int k = 0; k < 4; k++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
			const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), one);
			const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k + 1), one);
			const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_slli_epi16(h0, 4));
			const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), _mm256_slli_epi16(h1, 4));
			const __m256i x0 = _mm256_loadu_si256((const __m256i *)(x + (2 * k) * 34 + 2));
			const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + (2 * k + 1) * 34 + 2));
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(lo, x0)), _mm256_set1_ps(f[2 * k]), acc);
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(hi, x1)), _mm256_set1_ps(f[2 * k + 1]), acc);
		}
	}
	return KN_FN(khsum)(acc) - KN_FN(khsum)(accm);
}

// q6k_dot4 is q6k_dot for four activation rows at once, the 6-bit codes built once for all four.
static inline __attribute__((always_inline)) void KN_FN(q6k_dot4)(float *out, int64_t ostride,
		const uint8_t *w, int64_t nsb, const uint8_t *const *xq, const float *const *xd, const float *const *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
	__m256 acc[KN_KT], acco[KN_KT];
	for (int j = 0; j < KN_KT; j++)
		acc[j] = acco[j] = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 210) {
		uint16_t hd;
		memcpy(&hd, w + 208, 2);
		const float d = _cvtsh_ss(hd);
		const int8_t *sc = (const int8_t *)(w + 192);
		const __m128i sc16 = _mm_loadu_si128((const __m128i *)sc);
		const __m256 dv = _mm256_set1_ps(d);
		const __m256 s0 = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc16)));
		const __m256 s1 = _mm256_mul_ps(dv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc16, 8))));
		for (int j = 0; j < KN_KT; j++) {
			acco[j] = _mm256_fmadd_ps(s0, _mm256_loadu_ps(xh[j] + 16 * s), acco[j]);
			acco[j] = _mm256_fmadd_ps(s1, _mm256_loadu_ps(xh[j] + 16 * s + 8), acco[j]);
		}
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = w + 64 * h, *qh = w + 128 + 32 * h;
			const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
			const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
			const __m256i hb = _mm256_loadu_si256((const __m256i *)qh);
			__m256i q[4];
			q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(hb, three), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(l1, low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), three), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), three), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
				_mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), three), 4));
			for (int k = 0; k < 4; k++) {
				const int blk = 4 * h + k;
				const __m256 scv = _mm256_set_m128(_mm_set1_ps(d * (float)sc[2 * blk + 1]), _mm_set1_ps(d * (float)sc[2 * blk]));
				for (int j = 0; j < KN_KT; j++) {
					const __m256i xv = _mm256_loadu_si256((const __m256i *)(xq[j] + (8 * s + blk) * 34 + 2));
					const __m256 sv = _mm256_mul_ps(scv, _mm256_set1_ps(xd[j][8 * s + blk]));
					acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(q[k], xv)), sv, acc[j]);
				}
			}
		}
	}
	for (int j = 0; j < KN_KT; j++)
		out[j * ostride] = KN_FN(khsum)(acc[j]) - 32.0f * KN_FN(khsum)(acco[j]);
}

// q5k_dot4 is q5k_dot for four activation rows at once, as q4k_dot4.
static inline __attribute__((always_inline)) void KN_FN(q5k_dot4)(float *out, int64_t ostride,
		const uint8_t *w, int64_t nsb, const uint8_t *const *xq, const float *const *xd, const float *const *xh) {
	const __m256i low4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
	__m256 acc[KN_KT], accm[KN_KT];
	for (int j = 0; j < KN_KT; j++)
		acc[j] = accm[j] = _mm256_setzero_ps();
	for (int64_t s = 0; s < nsb; s++, w += 176) {
		uint16_t hd, hm;
		memcpy(&hd, w, 2);
		memcpy(&hm, w + 2, 2);
		const float d = _cvtsh_ss(hd), dmin = _cvtsh_ss(hm);
		uint32_t a, b, c, sm[4];
		memcpy(&a, w + 4, 4);
		memcpy(&b, w + 8, 4);
		memcpy(&c, w + 12, 4);
		sm[0] = a & 0x3f3f3f3f;
		sm[1] = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
		sm[2] = b & 0x3f3f3f3f;
		sm[3] = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
		const __m128i smv = _mm_loadu_si128((const __m128i *)sm);
		const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(smv)));
		const __m256 dmn = _mm256_mul_ps(_mm256_set1_ps(dmin),
			_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(smv, 8))));
		float f[KN_KT][8];
		for (int j = 0; j < KN_KT; j++) {
			const __m256 hs = _mm256_hadd_ps(_mm256_loadu_ps(xh[j] + 16 * s), _mm256_loadu_ps(xh[j] + 16 * s + 8));
			const __m256 xsum = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(hs), 0xd8));
			accm[j] = _mm256_fmadd_ps(dmn, xsum, accm[j]);
			_mm256_storeu_ps(f[j], _mm256_mul_ps(dsc, _mm256_loadu_ps(xd[j] + 8 * s)));
		}
		const __m256i hb = _mm256_loadu_si256((const __m256i *)(w + 16));
		const uint8_t *qs = w + 48;
		for (int k = 0; k < 4; k++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
			const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), one);
			const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * k + 1), one);
			const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_slli_epi16(h0, 4));
			const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), _mm256_slli_epi16(h1, 4));
			for (int j = 0; j < KN_KT; j++) {
				const uint8_t *x = xq[j] + (8 * s + 2 * k) * 34 + 2;
				const __m256i x0 = _mm256_loadu_si256((const __m256i *)x);
				const __m256i x1 = _mm256_loadu_si256((const __m256i *)(x + 34));
				acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(lo, x0)), _mm256_set1_ps(f[j][2 * k]), acc[j]);
				acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(KN_FN(u8dot)(hi, x1)), _mm256_set1_ps(f[j][2 * k + 1]), acc[j]);
			}
		}
	}
	for (int j = 0; j < KN_KT; j++)
		out[j * ostride] = KN_FN(khsum)(acc[j]) - KN_FN(khsum)(accm[j]);
}

// The types without a four-row tile take the rows one at a time.
#define KN_DOT4_BY_ONE(DOT)                                                                              \
	static inline __attribute__((always_inline)) void KN_FN(DOT##4)(float *out, int64_t ostride,        \
			const uint8_t *w, int64_t nw, const uint8_t *const *xq, const float *const *xd,             \
			const float *const *xh) {                                                                    \
		for (int j = 0; j < KN_KT; j++)                                                                      \
			out[j * ostride] = KN_FN(DOT)(w, nw, xq[j], xd[j], xh[j]);                                   \
	}
KN_DOT4_BY_ONE(q5_0_dot)
KN_DOT4_BY_ONE(q5_1_dot)
#undef KN_DOT4_BY_ONE

// kn_matmul_<type>: out[j·ldo + r] = dot(W[r], X[j]) for r in [r0, r1), j < n, X rows Q8_0
// (cols/32·34 bytes apart). Each weight row (cols/QKW blocks of BB bytes) is read once and used
// for all n activation rows, four at a time where the type has a tile (DOT##4).
#define KN_KMATMUL(NAME, DOT, BB, QKW)                                                                       \
	void KN_FN(NAME)(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,   \
		const uint8_t *xq, int64_t n) {                                                                  \
		const int64_t nb = cols / 32, nw = cols / (QKW), xrow = nb * 34, wrow = nw * (BB);             \
		float stack[KN_STACK_SCALES];                                                                    \
		float *xd = KN_FN(scale_buf)(stack, 3 * n * nb);                                                 \
		float *xh = xd + n * nb;                                                                         \
		for (int64_t j = 0; j < n; j++)                                                                  \
			KN_FN(kprep)(xd + j * nb, xh + 2 * j * nb, xq + j * xrow, nb);                             \
		for (int64_t r = r0; r < r1; r++) {                                                              \
			const uint8_t *wr = w + r * wrow;                                                            \
			int64_t j = 0;                                                                               \
			for (; j + KN_KT <= n; j += KN_KT) {                                                                 \
				const uint8_t *xs[KN_KT];                                                                 \
				const float *ds[KN_KT], *hs[KN_KT];                                                           \
				for (int i = 0; i < KN_KT; i++) {                                                         \
					xs[i] = xq + (j + i) * xrow;                                                         \
					ds[i] = xd + (j + i) * nb;                                                           \
					hs[i] = xh + 2 * (j + i) * nb;                                                       \
				}                                                                                        \
				KN_FN(DOT##4)(out + j * ldo + r, ldo, wr, nw, xs, ds, hs);                               \
			}                                                                                            \
			for (; j < n; j++)                                                                           \
				out[j * ldo + r] = KN_FN(DOT)(wr, nw, xq + j * xrow, xd + j * nb, xh + 2 * j * nb);     \
		}                                                                                                \
		if (xd != stack)                                                                                 \
			free(xd);                                                                                    \
	}
KN_KMATMUL(kn_matmul_q4_k, q4k_dot, 144, 256)
KN_KMATMUL(kn_matmul_q5_k, q5k_dot, 176, 256)
KN_KMATMUL(kn_matmul_q6_k, q6k_dot, 210, 256)
KN_KMATMUL(kn_matmul_q5_0, q5_0_dot, 22, 32)
KN_KMATMUL(kn_matmul_q5_1, q5_1_dot, 24, 32)
#undef KN_KMATMUL
#undef KN_KT
