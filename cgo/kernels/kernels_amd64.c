// SIMD kernels of package kernels. The file itself builds for baseline x86-64; each kernel group
// sits in a `#pragma GCC target` region (same effect as per-function target attributes), and Go
// picks a tier once at start-up from kn_cpu_level, so no instruction runs on a CPU without it.
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

int kn_cpu_level(void) {
	__builtin_cpu_init();
	if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
		return 0;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
		return 2;
	return 1;
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

uint16_t kn_f32_to_f16_hw(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
float kn_f16_to_f32_hw(uint16_t h) { return _cvtsh_ss(h); }

// kn_quantize_q8_0_avx2 follows llama.cpp's x86 activation quantizer: d = amax/127 stored as fp16,
// q = round-to-nearest-even(x · (127/amax)) in float32.
void kn_quantize_q8_0_avx2(uint8_t *dst, const float *x, int64_t nb) {
	const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	for (int64_t b = 0; b < nb; b++, x += 32, dst += 34) {
		__m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
		__m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
		__m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v0, absmask), _mm256_and_ps(v1, absmask)),
			_mm256_max_ps(_mm256_and_ps(v2, absmask), _mm256_and_ps(v3, absmask)));
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		const float amax = _mm_cvtss_f32(m4);
		const uint16_t d = _cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
		memcpy(dst, &d, 2);
		const __m256 id = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
		const int mode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
		__m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), mode));
		__m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), mode));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), mode));
		__m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), mode));
		// packs work per 128-bit lane; the permute restores element order.
		__m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(dst + 2), p);
	}
}

static inline float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

float kn_dot_f32_avx2(const float *a, const float *b, int64_t n) {
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int64_t i = 0;
	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

// F32 tile: TW weight rows (ldw floats apart) × TX activation rows (ldx apart), 8 columns per step.
static inline __attribute__((always_inline)) void f32_tile(int tw, int tx, const float *w, int64_t ldw, int64_t cols,
		const float *x, int64_t ldx, float *out, int64_t ldo) {
	__m256 acc[2][4];
	for (int i = 0; i < tw; i++)
		for (int k = 0; k < tx; k++)
			acc[i][k] = _mm256_setzero_ps();
	int64_t c = 0;
	for (; c + 8 <= cols; c += 8) {
		__m256 wv[2];
		for (int i = 0; i < tw; i++)
			wv[i] = _mm256_loadu_ps(w + i * ldw + c);
		for (int k = 0; k < tx; k++) {
			const __m256 xv = _mm256_loadu_ps(x + k * ldx + c);
			for (int i = 0; i < tw; i++)
				acc[i][k] = _mm256_fmadd_ps(wv[i], xv, acc[i][k]);
		}
	}
	for (int i = 0; i < tw; i++)
		for (int k = 0; k < tx; k++) {
			float s = hsum8(acc[i][k]);
			for (int64_t t = c; t < cols; t++)
				s += w[i * ldw + t] * x[k * ldx + t];
			out[k * ldo + i] = s;
		}
}

// MatVec uses the matmul tiles too, so both give bit-identical results for the same row.
// The _ld forms read weight rows ldw floats apart, so a product can use the first cols columns
// of a wider matrix (attention reads only the cached positions so far).
void kn_matvec_f32_ld_avx2(float *out, const float *w, int64_t ldw, int64_t cols, int64_t r0, int64_t r1,
		const float *x) {
	int64_t r = r0;
	for (; r + 2 <= r1; r += 2)
		f32_tile(2, 1, w + r * ldw, ldw, cols, x, 0, out + (r - r0), 0);
	for (; r < r1; r++)
		f32_tile(1, 1, w + r * ldw, ldw, cols, x, 0, out + (r - r0), 0);
}

void kn_matvec_f32_avx2(float *out, const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x) {
	kn_matvec_f32_ld_avx2(out, w, cols, cols, r0, r1, x);
}

void kn_matmul_f32_ld_avx2(float *out, int64_t ldo, const float *w, int64_t ldw, int64_t cols, int64_t r0,
		int64_t r1, const float *x, int64_t ldx, int64_t n) {
	int64_t r = r0;
	for (; r + 2 <= r1; r += 2) {
		int64_t j = 0;
		for (; j + 4 <= n; j += 4)
			f32_tile(2, 4, w + r * ldw, ldw, cols, x + j * ldx, ldx, out + j * ldo + r, ldo);
		for (; j < n; j++)
			f32_tile(2, 1, w + r * ldw, ldw, cols, x + j * ldx, ldx, out + j * ldo + r, ldo);
	}
	for (; r < r1; r++) {
		int64_t j = 0;
		for (; j + 4 <= n; j += 4)
			f32_tile(1, 4, w + r * ldw, ldw, cols, x + j * ldx, ldx, out + j * ldo + r, ldo);
		for (; j < n; j++)
			f32_tile(1, 1, w + r * ldw, ldw, cols, x + j * ldx, ldx, out + j * ldo + r, ldo);
	}
}

void kn_matmul_f32_avx2(float *out, int64_t ldo, const float *w, int64_t cols, int64_t r0, int64_t r1,
		const float *x, int64_t n) {
	kn_matmul_f32_ld_avx2(out, ldo, w, cols, cols, r0, r1, x, cols, n);
}

// F16 tile: weights widened with F16C (vcvtph2ps), then FMA in float32.
static inline __attribute__((always_inline)) void f16_tile(int tw, int tx, const uint16_t *w, int64_t cols,
		const float *x, float *out, int64_t ldo) {
	__m256 acc[2][4];
	for (int i = 0; i < tw; i++)
		for (int k = 0; k < tx; k++)
			acc[i][k] = _mm256_setzero_ps();
	int64_t c = 0;
	for (; c + 8 <= cols; c += 8) {
		__m256 wv[2];
		for (int i = 0; i < tw; i++)
			wv[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i * cols + c)));
		for (int k = 0; k < tx; k++) {
			const __m256 xv = _mm256_loadu_ps(x + k * cols + c);
			for (int i = 0; i < tw; i++)
				acc[i][k] = _mm256_fmadd_ps(wv[i], xv, acc[i][k]);
		}
	}
	for (int i = 0; i < tw; i++)
		for (int k = 0; k < tx; k++) {
			float s = hsum8(acc[i][k]);
			for (int64_t t = c; t < cols; t++)
				s += _cvtsh_ss(w[i * cols + t]) * x[k * cols + t];
			out[k * ldo + i] = s;
		}
}

void kn_matvec_f16_avx2(float *out, const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x) {
	int64_t r = r0;
	for (; r + 2 <= r1; r += 2)
		f16_tile(2, 1, w + r * cols, cols, x, out + (r - r0), 0);
	for (; r < r1; r++)
		f16_tile(1, 1, w + r * cols, cols, x, out + (r - r0), 0);
}

void kn_matmul_f16_avx2(float *out, int64_t ldo, const uint16_t *w, int64_t cols, int64_t r0, int64_t r1,
		const float *x, int64_t n) {
	int64_t r = r0;
	for (; r + 2 <= r1; r += 2) {
		int64_t j = 0;
		for (; j + 4 <= n; j += 4)
			f16_tile(2, 4, w + r * cols, cols, x + j * cols, out + j * ldo + r, ldo);
		for (; j < n; j++)
			f16_tile(2, 1, w + r * cols, cols, x + j * cols, out + j * ldo + r, ldo);
	}
	for (; r < r1; r++) {
		int64_t j = 0;
		for (; j + 4 <= n; j += 4)
			f16_tile(1, 4, w + r * cols, cols, x + j * cols, out + j * ldo + r, ldo);
		for (; j < n; j++)
			f16_tile(1, 1, w + r * cols, cols, x + j * cols, out + j * ldo + r, ldo);
	}
}

// exp8 is e^x for 8 floats with the algorithm of the portable expf (generic.go): x = n·ln2 + r,
// |r| ≤ ln2/2, a degree-6 polynomial for e^r, and 2^n built in the exponent bits; inputs below
// −87.3 give 0 and above 88.4 give +Inf.
static inline __m256 exp8(__m256 x) {
	const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447505531f);
	const __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
	const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
		_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
	const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	__m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
	y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
	return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), over);
}

// kn_swiglu_avx2: g[i] = silu(g[i])·u[i] = g[i]/(1+e^−g[i])·u[i].
void kn_swiglu_avx2(float *g, const float *u, int64_t n) {
	int64_t i = 0;
	const __m256 one = _mm256_set1_ps(1.f);
	for (; i + 8 <= n; i += 8) {
		const __m256 a = _mm256_loadu_ps(g + i);
		const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), a));
		_mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(a, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
	}
	if (i < n) { // the tail through a padded vector, so every element gets the same arithmetic
		float ga[8] = {0}, ua[8] = {0};
		memcpy(ga, g + i, (n - i) * sizeof(float));
		memcpy(ua, u + i, (n - i) * sizeof(float));
		kn_swiglu_avx2(ga, ua, 8);
		memcpy(g + i, ga, (n - i) * sizeof(float));
	}
}

// kn_softmax_avx2 replaces s[0:n] by softmax(scale·s).
void kn_softmax_avx2(float *s, int64_t n, float scale) {
	const __m256 sc = _mm256_set1_ps(scale);
	__m256 mx = _mm256_set1_ps(-__builtin_inff());
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), sc);
		_mm256_storeu_ps(s + i, v);
		mx = _mm256_max_ps(mx, v);
	}
	float m = -__builtin_inff();
	for (; i < n; i++) {
		s[i] *= scale;
		m = s[i] > m ? s[i] : m;
	}
	float mv[8];
	_mm256_storeu_ps(mv, mx);
	for (int k = 0; k < 8; k++)
		m = mv[k] > m ? mv[k] : m;
	const __m256 m8 = _mm256_set1_ps(m);
	__m256 sum = _mm256_setzero_ps();
	for (i = 0; i + 8 <= n; i += 8) {
		const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), m8));
		_mm256_storeu_ps(s + i, e);
		sum = _mm256_add_ps(sum, e);
	}
	float tail[8] = {0};
	const int64_t rest = n - i;
	if (rest > 0) {
		float t[8];
		for (int k = 0; k < 8; k++)
			t[k] = k < rest ? s[i + k] - m : -__builtin_inff();
		_mm256_storeu_ps(tail, exp8(_mm256_loadu_ps(t)));
		for (int k = 0; k < rest; k++)
			s[i + k] = tail[k];
		sum = _mm256_add_ps(sum, _mm256_loadu_ps(tail));
	}
	const float inv = 1.f / hsum8(sum);
	const __m256 iv = _mm256_set1_ps(inv);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(s + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), iv));
	for (; i < n; i++)
		s[i] *= inv;
}

// hsum8x8 returns the eight horizontal sums of a[0..7] in lanes 0..7. Each sum is formed as
// ((e0+e1)+(e2+e3))+((e4+e5)+(e6+e7)), the order dot_row uses for a single vector.
static inline __m256 hsum8x8(const __m256 *a) {
	const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
	const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
	const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
	return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// ld8 loads eight cache values as float: float32 rows, or fp16 rows (half) widened with F16C.
static inline __attribute__((always_inline)) __m256 ld8(const void *p, int64_t i, int half) {
	if (half)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	return _mm256_loadu_ps((const float *)p + i);
}

// dot_acc accumulates q·r over hd values (hd a multiple of 8) into one 8-lane vector, in order.
static inline __attribute__((always_inline)) __m256 dot_acc(const float *q, const void *r, int64_t off, int64_t hd,
		int half) {
	__m256 acc = _mm256_mul_ps(_mm256_loadu_ps(q), ld8(r, off, half));
	for (int64_t c = 8; c < hd; c += 8)
		acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), ld8(r, off + c, half), acc);
	return acc;
}

// dot_row is one score with exactly hsum8x8's summation order.
static inline __attribute__((always_inline)) float dot_row(const float *q, const void *r, int64_t off, int64_t hd,
		int half) {
	__m256 a[8];
	a[0] = dot_acc(q, r, off, hd, half);
	for (int i = 1; i < 8; i++)
		a[i] = a[0];
	float s[8];
	_mm256_storeu_ps(s, hsum8x8(a));
	return s[0];
}

// attend is decoder attention for one query row and one KV head: for each of the nq query heads
// sharing the KV head (q: nq rows of hd floats, adjacent), scores s[t] = q·K[t] over the npos
// visible positions, softmax(scale·s), and out = Σ_t p[t]·V[t]; keys and values are rows of hd
// values (hd a multiple of 8), float32 or fp16 (half). probs holds npos floats of scratch. Scores
// are taken eight positions at a time with one transposing reduction; values are accumulated row
// by row, so no horizontal sum is needed there. Every row goes through the same operations
// whatever else is in the batch.
static inline __attribute__((always_inline)) void attend(float *out, const float *q, const void *k, const void *v,
		int64_t hd, int64_t npos, int64_t nq, float scale, float *probs, int half) {
	for (int64_t h = 0; h < nq; h++) {
		const float *qh = q + h * hd;
		int64_t t = 0;
		for (; t + 8 <= npos; t += 8) {
			__m256 a[8];
			for (int i = 0; i < 8; i++)
				a[i] = dot_acc(qh, k, (t + i) * hd, hd, half);
			_mm256_storeu_ps(probs + t, hsum8x8(a));
		}
		for (; t < npos; t++)
			probs[t] = dot_row(qh, k, t * hd, hd, half);
		kn_softmax_avx2(probs, npos, scale);
		float *oh = out + h * hd;
		for (int64_t d0 = 0; d0 < hd; d0 += 64) {
			const int nv = hd - d0 >= 64 ? 8 : (int)((hd - d0) / 8);
			__m256 acc[8];
			for (int i = 0; i < nv; i++)
				acc[i] = _mm256_setzero_ps();
			for (t = 0; t < npos; t++) {
				const __m256 p = _mm256_broadcast_ss(probs + t);
				for (int i = 0; i < nv; i++)
					acc[i] = _mm256_fmadd_ps(p, ld8(v, t * hd + d0 + 8 * i, half), acc[i]);
			}
			for (int i = 0; i < nv; i++)
				_mm256_storeu_ps(oh + d0 + 8 * i, acc[i]);
		}
	}
}

void kn_attend_avx2(float *out, const float *q, const float *k, const float *v, int64_t hd, int64_t npos,
		int64_t nq, float scale, float *probs) {
	attend(out, q, k, v, hd, npos, nq, scale, probs, 0);
}

void kn_attend_f16_avx2(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t hd, int64_t npos,
		int64_t nq, float scale, float *probs) {
	attend(out, q, k, v, hd, npos, nq, scale, probs, 1);
}

// kn_f32_to_f16_avx2 converts n floats to fp16, rounding to nearest even (F16C), as F32ToF16 does.
void kn_f32_to_f16_avx2(uint16_t *dst, const float *src, int64_t n) {
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

#define KN_VNNI 0
#define KN_TW4 3 // weight rows per 4-activation-row tile (AVX2: 16 ymm registers)
#define KN_FN(name) name##_avx2
#include "kernels_q.h"
#include "kernels_x8.h"
#undef KN_VNNI
#undef KN_TW4
#undef KN_FN

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")

#define KN_VNNI 1
#define KN_TW4 4 // 32 registers; 4 measured best (2..8 tried)
#define KN_FN(name) name##_vnni
#include "kernels_q.h"
#include "kernels_x8.h"
#undef KN_VNNI
#undef KN_TW4
#undef KN_FN

#pragma GCC pop_options
