// SIMD kernels of package kernels. The file itself builds for baseline x86-64; each kernel group
// sits in a `#pragma GCC target` region (same effect as per-function target attributes), and Go
// picks a tier once at start-up from kn_cpu_level, so no instruction runs on a CPU without it.
#define _DEFAULT_SOURCE // syscall(2) under -std=c11
#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "kernels.h"

// Linux's arch_prctl codes for AMX (asm/prctl.h) and the tile data's xstate component.
#define KN_ARCH_GET_XCOMP_PERM 0x1022
#define KN_ARCH_REQ_XCOMP_PERM 0x1023
#define KN_XFEATURE_XTILEDATA 18

// amx_usable reports whether the CPU has AMX-TILE and AMX-INT8 and Linux lets this process use
// them. Tile data is off for a process until it asks (ARCH_REQ_XCOMP_PERM, Linux 5.16+); the grant
// is process-wide and enlarges signal frames to about 11 KiB, inside the Go runtime's 32 KiB signal
// stacks.
static int amx_usable(void) {
	unsigned a, b, c, d;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
		return 0;
	if (syscall(SYS_arch_prctl, KN_ARCH_REQ_XCOMP_PERM, KN_XFEATURE_XTILEDATA) != 0)
		return 0;
	unsigned long perm = 0;
	return syscall(SYS_arch_prctl, KN_ARCH_GET_XCOMP_PERM, &perm) == 0 && (perm & (1ul << KN_XFEATURE_XTILEDATA));
}

int kn_cpu_level(void) {
	__builtin_cpu_init();
	if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
		return 0;
	if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")))
		return 1;
	return amx_usable() ? 3 : 2;
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

// kn_swiglu_rows_avx2 applies kn_swiglu_avx2 to n rows of len floats, ld apart.
void kn_swiglu_rows_avx2(float *g, const float *u, int64_t ld, int64_t n, int64_t len) {
	for (int64_t j = 0; j < n; j++)
		kn_swiglu_avx2(g + j * ld, u + j * ld, len);
}

// kn_rope_avx2 rotates the first 2·half values of each of heads rows of hd floats by the angles
// whose cosines and sines are cos[0:half], sin[0:half]: adjacent pairs (x[2i], x[2i+1]) or, when
// adjacent is 0, halves (x[i], x[i+half]). Products and sums round as the portable code's do
// (no fused multiply-add), so every tier gives the same bits.
void kn_rope_avx2(float *x, int64_t heads, int64_t hd, const float *cos, const float *sin, int64_t half,
		int adjacent) {
	for (int64_t h = 0; h < heads; h++, x += hd) {
		int64_t i = 0;
		if (adjacent) {
			for (; i + 4 <= half; i += 4) {
				const __m128 c4 = _mm_loadu_ps(cos + i), s4 = _mm_loadu_ps(sin + i);
				const __m256 c = _mm256_set_m128(_mm_unpackhi_ps(c4, c4), _mm_unpacklo_ps(c4, c4));
				const __m256 s = _mm256_set_m128(_mm_unpackhi_ps(s4, s4), _mm_unpacklo_ps(s4, s4));
				const __m256 v = _mm256_loadu_ps(x + 2 * i);
				const __m256 sw = _mm256_permute_ps(v, 0xB1); // (x1, x0, x3, x2, ...)
				// even lanes x0·c − x1·s, odd lanes x1·c + x0·s
				_mm256_storeu_ps(x + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(v, c), _mm256_mul_ps(sw, s)));
			}
			for (; i < half; i++) {
				const float x0 = x[2 * i], x1 = x[2 * i + 1];
				x[2 * i] = x0 * cos[i] - x1 * sin[i];
				x[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
			}
			continue;
		}
		for (; i + 8 <= half; i += 8) {
			const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
			const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + half);
			_mm256_storeu_ps(x + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
			_mm256_storeu_ps(x + i + half, _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c)));
		}
		for (; i < half; i++) {
			const float x0 = x[i], x1 = x[i + half];
			x[i] = x0 * cos[i] - x1 * sin[i];
			x[i + half] = x0 * sin[i] + x1 * cos[i];
		}
	}
}

// kn_store_key_f16_avx2 converts a key row of hd floats to fp16 and writes it as position t of a
// blocked key cache (kernels.KeyBlock positions per block, each block [hd][16]).
void kn_store_key_f16_avx2(uint16_t *k, int64_t hd, int64_t t, const float *row) {
	uint16_t *dst = k + t / 16 * 16 * hd + t % 16;
	int64_t d = 0;
	for (; d + 8 <= hd; d += 8) {
		uint16_t h[8];
		_mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(row + d), _MM_FROUND_TO_NEAREST_INT));
		for (int i = 0; i < 8; i++)
			dst[(d + i) * 16] = h[i];
	}
	for (; d < hd; d++)
		dst[d * 16] = _cvtss_sh(row[d], _MM_FROUND_TO_NEAREST_INT);
}

// kn_argmax_avx2 returns the first index of the largest value of x[0:n] (n > 0); NaNs never win
// (0 when every value is NaN).
int64_t kn_argmax_avx2(const float *x, int64_t n) {
	__m256 m = _mm256_set1_ps(-__builtin_inff());
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(_mm256_loadu_ps(x + i), m); // a NaN in the first operand yields the second
	float mv[8];
	_mm256_storeu_ps(mv, m);
	float best = mv[0];
	for (int k = 1; k < 8; k++)
		best = mv[k] > best ? mv[k] : best;
	for (; i < n; i++)
		best = x[i] > best ? x[i] : best;
	const __m256 b = _mm256_set1_ps(best);
	for (i = 0; i + 8 <= n; i += 8) {
		const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
		if (mask)
			return i + __builtin_ctz((unsigned)mask);
	}
	for (; i < n; i++)
		if (x[i] == best)
			return i;
	return 0;
}

// kn_rmsnorm_avx2 writes src/rms(src)·w to dst (dst may alias src): the sum of squares in double
// precision, as ggml takes it, then (x·scale)·w in float.
void kn_rmsnorm_avx2(float *dst, const float *src, const float *w, int64_t n, float eps) {
	__m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
	int64_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 v = _mm256_loadu_ps(src + i);
		const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
		a0 = _mm256_fmadd_pd(lo, lo, a0);
		a1 = _mm256_fmadd_pd(hi, hi, a1);
	}
	double t[4];
	_mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
	double ss = (t[0] + t[1]) + (t[2] + t[3]);
	for (; i < n; i++)
		ss += (double)src[i] * (double)src[i];
	const double r = _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(ss / (double)n + (double)eps)));
	const float scale = (float)(1.0 / r); // sqrtsd: correctly rounded, as math.Sqrt
	const __m256 sc = _mm256_set1_ps(scale);
	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(src + i), sc), _mm256_loadu_ps(w + i)));
	for (; i < n; i++)
		dst[i] = src[i] * scale * w[i];
}

// kn_f32_to_f16_avx2 converts n floats to fp16, rounding to nearest even (F16C), as F32ToF16 does.
void kn_f32_to_f16_avx2(uint16_t *dst, const float *src, int64_t n) {
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

// kn_pf_distance is how far ahead (bytes) the packed kernels (kernels_x8.h, kernels_x4.h) prefetch
// in a call that streams span bytes of weights: an eighth of the span, within [KN_PF_MIN, KN_PF_MAX]
// (both settable at build time). Far enough ahead to cover memory latency under load on a large
// matrix; not so far past the call's end that it fetches rows another thread computes. On the AMD
// EPYC (Zen 4) dev VM, 2 threads, alternated rounds, a fixed distance against the 8 KiB before it:
// Llama-3.2-1B Q4_0 decode 1.05x at 16 KiB, 1.08x at 32, 1.12-1.19x at 64, 1.02x at 128, 1.07x at
// 256 (calls of 576 KiB-2.2 MiB), Llama-3.2-1B Q8_0 1.12x at 64; but SmolLM2-135M Q8_0 0.92x at 64
// (attention and FFN calls of 88-235 KiB, where 8 KiB was best) and Qwen2.5-0.5B 1.01-1.02x.
#ifndef KN_PF_MIN
#define KN_PF_MIN 8192
#endif
#ifndef KN_PF_MAX
#define KN_PF_MAX 65536
#endif
static inline int kn_pf_distance(int64_t span) {
	int64_t d = span / 8;
	d = d < KN_PF_MIN ? KN_PF_MIN : d > KN_PF_MAX ? KN_PF_MAX : d;
	return (int)(d & ~(int64_t)63);
}

#define KN_VNNI 0
#define KN_TW4 3 // weight rows per 4-activation-row tile (AVX2: 16 ymm registers)
#define KN_FN(name) name##_avx2
#include "kernels_q.h"
#include "kernels_k.h"
#include "kernels_x8.h"
#include "kernels_x4.h"
// Attention (16 ymm registers): 2 heads x 2 partial sums x 2 halves of a key block, or 2 heads
// x 2 value pieces x 2 halves.
#define KN_W16 0
#define KN_AG 2
#define KN_PAR 2
#define KN_NV 2
#include "kernels_attn.h"
#undef KN_W16
#undef KN_AG
#undef KN_PAR
#undef KN_NV
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
#include "kernels_k.h"
#include "kernels_x8.h"
#include "kernels_x4.h"
// Attention (32 zmm registers): 4 heads x 4 partial sums, or 4 heads x 4 value pieces.
#define KN_W16 1
#define KN_AG 4
#define KN_PAR 4
#define KN_NV 4
#include "kernels_attn.h"
#undef KN_W16
#undef KN_AG
#undef KN_PAR
#undef KN_NV
#undef KN_VNNI
#undef KN_TW4
#undef KN_FN

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,amx-tile,amx-int8")
#include "kernels_amx.h"
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
// kn_read_stream reads n bytes (a multiple of 128) with 256-bit loads and
// returns a value that depends on every byte, so the loads cannot be elided:
// the plain streaming read that weight bandwidth is compared with.
uint64_t kn_read_stream(const uint8_t *p, int64_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 1) ^
           (uint64_t)_mm256_extract_epi64(a, 2) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#pragma GCC pop_options
