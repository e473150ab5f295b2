// Decoder attention for one query row and one KV head, included once per SIMD tier (inside that
// tier's `#pragma GCC target` region) with:
//   KN_FN(name)  the tier's suffix for every function defined here
//   KN_W16       1: a block of 16 positions is one 512-bit vector; 0: two 256-bit vectors
//   KN_AG        query heads scored and accumulated together (registers decide)
//   KN_PAR       partial score sums per head (independent FMA chains; hd % KN_PAR == 0)
//   KN_NV        16-float pieces of a value row accumulated per pass
//
// Keys are stored in blocks of 16 positions, each block d-major ([hd][16], kernels.KeyBlock), so
// the 16 scores of a block are 16 lanes of one accumulator: one broadcast query value times one
// key vector per dimension, no horizontal sums, and one key load serves every query head of the
// group. Values stay [pos][hd]: one value row load serves every head of the group too.

#if KN_W16
typedef __m512 KN_FN(v16);
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(z16)(void) { return _mm512_setzero_ps(); }
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(ld16)(const void *p, int64_t i, int half) {
	if (half)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
	return _mm512_loadu_ps((const float *)p + i);
}
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(fma16)(float s, KN_FN(v16) x, KN_FN(v16) acc) {
	return _mm512_fmadd_ps(_mm512_set1_ps(s), x, acc);
}
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(add16)(KN_FN(v16) a, KN_FN(v16) b) {
	return _mm512_add_ps(a, b);
}
static inline __attribute__((always_inline)) void KN_FN(st16)(float *p, KN_FN(v16) x) { _mm512_storeu_ps(p, x); }
#else
typedef struct {
	__m256 lo, hi;
} KN_FN(v16);
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(z16)(void) {
	return (KN_FN(v16)){_mm256_setzero_ps(), _mm256_setzero_ps()};
}
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(ld16)(const void *p, int64_t i, int half) {
	if (half) {
		const uint16_t *h = (const uint16_t *)p + i;
		return (KN_FN(v16)){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)),
			_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 8)))};
	}
	const float *f = (const float *)p + i;
	return (KN_FN(v16)){_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8)};
}
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(fma16)(float s, KN_FN(v16) x, KN_FN(v16) acc) {
	const __m256 b = _mm256_set1_ps(s);
	return (KN_FN(v16)){_mm256_fmadd_ps(b, x.lo, acc.lo), _mm256_fmadd_ps(b, x.hi, acc.hi)};
}
static inline __attribute__((always_inline)) KN_FN(v16) KN_FN(add16)(KN_FN(v16) a, KN_FN(v16) b) {
	return (KN_FN(v16)){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
static inline __attribute__((always_inline)) void KN_FN(st16)(float *p, KN_FN(v16) x) {
	_mm256_storeu_ps(p, x.lo);
	_mm256_storeu_ps(p + 8, x.hi);
}
#endif

// attn_scores writes the raw scores q_g·K[t] of g heads (q: g rows of hd floats) for positions
// [0, npos) to probs rows of ldp floats. Lanes past npos in the last block are computed from
// whatever the cache holds there and never stored.
static inline __attribute__((always_inline)) void KN_FN(attn_scores)(float *probs, int64_t ldp, const float *q,
		const void *k, int64_t hd, int64_t npos, int half, const int g) {
	for (int64_t t0 = 0; t0 < npos; t0 += 16) {
		const int64_t kb = t0 * hd; // block t0/16 starts at (t0/16)·16·hd
		KN_FN(v16) acc[KN_AG][KN_PAR];
		for (int h = 0; h < g; h++)
			for (int p = 0; p < KN_PAR; p++)
				acc[h][p] = KN_FN(z16)();
		for (int64_t d = 0; d < hd; d += KN_PAR)
			for (int p = 0; p < KN_PAR; p++) {
				const KN_FN(v16) kv = KN_FN(ld16)(k, kb + (d + p) * 16, half);
				for (int h = 0; h < g; h++)
					acc[h][p] = KN_FN(fma16)(q[h * hd + d + p], kv, acc[h][p]);
			}
		for (int h = 0; h < g; h++) {
			KN_FN(v16) s = acc[h][0];
			for (int p = 1; p < KN_PAR; p++)
				s = KN_FN(add16)(s, acc[h][p]);
			if (npos - t0 >= 16) {
				KN_FN(st16)(probs + h * ldp + t0, s);
			} else {
				float tmp[16];
				KN_FN(st16)(tmp, s);
				memcpy(probs + h * ldp + t0, tmp, (size_t)(npos - t0) * sizeof(float));
			}
		}
	}
}

// attn_values writes out_h = Σ_t p_h[t]·V[t] for g heads, nv 16-float pieces of the value rows
// starting at d0.
static inline __attribute__((always_inline)) void KN_FN(attn_values)(float *out, const float *probs, int64_t ldp,
		const void *v, int64_t hd, int64_t d0, int64_t npos, int half, const int g, const int nv) {
	KN_FN(v16) acc[KN_AG][KN_NV];
	for (int h = 0; h < g; h++)
		for (int i = 0; i < nv; i++)
			acc[h][i] = KN_FN(z16)();
	for (int64_t t = 0; t < npos; t++)
		for (int i = 0; i < nv; i++) {
			const KN_FN(v16) x = KN_FN(ld16)(v, t * hd + d0 + 16 * i, half);
			for (int h = 0; h < g; h++)
				acc[h][i] = KN_FN(fma16)(probs[h * ldp + t], x, acc[h][i]);
		}
	for (int h = 0; h < g; h++)
		for (int i = 0; i < nv; i++)
			KN_FN(st16)(out + h * hd + d0 + 16 * i, acc[h][i]);
}

// attn_group is the whole attention of g (1..KN_AG) query heads.
static inline __attribute__((always_inline)) void KN_FN(attn_group)(float *out, const float *q, const void *k,
		const void *v, int64_t hd, int64_t npos, float scale, float *probs, int half, const int g) {
	KN_FN(attn_scores)(probs, npos, q, k, hd, npos, half, g);
	for (int h = 0; h < g; h++)
		kn_softmax_avx2(probs + h * npos, npos, scale);
	int64_t d0 = 0;
	for (; d0 + 16 * KN_NV <= hd; d0 += 16 * KN_NV)
		KN_FN(attn_values)(out, probs, npos, v, hd, d0, npos, half, g, KN_NV);
	switch ((hd - d0) / 16) { // the rest of the row: fewer pieces, still whole registers
	case 1:
		KN_FN(attn_values)(out, probs, npos, v, hd, d0, npos, half, g, 1);
		break;
#if KN_NV > 2
	case 2:
		KN_FN(attn_values)(out, probs, npos, v, hd, d0, npos, half, g, 2);
		break;
#endif
#if KN_NV > 3
	case 3:
		KN_FN(attn_values)(out, probs, npos, v, hd, d0, npos, half, g, 3);
		break;
#endif
	}
}

// attend: nq query heads sharing one KV head, in groups of up to KN_AG. hd % 16 == 0; probs holds
// min(nq, KN_AG)·npos floats of scratch.
static inline __attribute__((always_inline)) void KN_FN(attend_blk)(float *out, const float *q, const void *k,
		const void *v, int64_t hd, int64_t npos, int64_t nq, float scale, float *probs, int half) {
	for (int64_t h = 0; h < nq; h += KN_AG) {
		switch (nq - h >= KN_AG ? KN_AG : nq - h) {
		case 1:
			KN_FN(attn_group)(out + h * hd, q + h * hd, k, v, hd, npos, scale, probs, half, 1);
			break;
#if KN_AG > 1
		case 2:
			KN_FN(attn_group)(out + h * hd, q + h * hd, k, v, hd, npos, scale, probs, half, 2);
			break;
#endif
#if KN_AG > 2
		case 3:
			KN_FN(attn_group)(out + h * hd, q + h * hd, k, v, hd, npos, scale, probs, half, 3);
			break;
#endif
#if KN_AG > 3
		case 4:
			KN_FN(attn_group)(out + h * hd, q + h * hd, k, v, hd, npos, scale, probs, half, 4);
			break;
#endif
		}
	}
}

void KN_FN(kn_attend_blk)(float *out, const float *q, const float *k, const float *v, int64_t hd, int64_t npos,
		int64_t nq, float scale, float *probs) {
	KN_FN(attend_blk)(out, q, k, v, hd, npos, nq, scale, probs, 0);
}

void KN_FN(kn_attend_blk_f16)(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t hd,
		int64_t npos, int64_t nq, float scale, float *probs) {
	KN_FN(attend_blk)(out, q, k, v, hd, npos, nq, scale, probs, 1);
}
