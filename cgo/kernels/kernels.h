// C entry points of package kernels. Every function handles a whole row range per call so the cgo
// call cost is paid once per matrix slice, never per row. No function keeps a pointer after return.
#ifndef VOXPIPE_KERNELS_H
#define VOXPIPE_KERNELS_H
#include <stdint.h>

// kn_cpu_level returns 0 (no usable SIMD), 1 (AVX2+FMA+F16C), 2 (also AVX-512 F/BW/VL/VNNI) or 3 (also
// AMX-TILE and AMX-INT8, with Linux's permission to use tile data, which it requests).
int kn_cpu_level(void);

// AVX2 + FMA + F16C
void kn_quantize_q8_0_avx2(uint8_t *dst, const float *x, int64_t nb);
float kn_dot_f32_avx2(const float *a, const float *b, int64_t n);
void kn_matvec_f32_avx2(float *out, const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x);
void kn_matmul_f32_avx2(float *out, int64_t ldo, const float *w, int64_t cols, int64_t r0, int64_t r1, const float *x, int64_t n);
void kn_matmul_f32_ld_avx2(float *out, int64_t ldo, const float *w, int64_t ldw, int64_t cols, int64_t r0, int64_t r1, const float *x, int64_t ldx, int64_t n);
void kn_matvec_f32_ld_avx2(float *out, const float *w, int64_t ldw, int64_t cols, int64_t r0, int64_t r1, const float *x);
void kn_matvec_f16_avx2(float *out, const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x);
void kn_matmul_f16_avx2(float *out, int64_t ldo, const uint16_t *w, int64_t cols, int64_t r0, int64_t r1, const float *x, int64_t n);

void kn_swiglu_avx2(float *g, const float *u, int64_t n);
void kn_softmax_avx2(float *s, int64_t n, float scale);
void kn_swiglu_rows_avx2(float *g, const float *u, int64_t ld, int64_t n, int64_t len);
void kn_rope_avx2(float *x, int64_t heads, int64_t hd, const float *cos, const float *sin, int64_t half, int adjacent);
void kn_store_key_f16_avx2(uint16_t *k, int64_t hd, int64_t t, const float *row);
uint64_t kn_read_stream(const uint8_t *p, int64_t n);
int64_t kn_argmax_avx2(const float *x, int64_t n);
void kn_rmsnorm_avx2(float *dst, const float *src, const float *w, int64_t n, float eps);
void kn_f32_to_f16_avx2(uint16_t *dst, const float *src, int64_t n);

// Quantized products, one set per tier.
void kn_matvec_q8_0_avx2(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq);
void kn_matvec_q4_0_avx2(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq);
void kn_matmul_q8_0_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q4_0_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matvec_q8_0_vnni(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq);
void kn_matvec_q4_0_vnni(float *out, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq);
void kn_matmul_q8_0_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q4_0_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);

// Q4_K, Q5_K, Q6_K, Q5_0 and Q5_1 rows (GGUF layout) against Q8_0 activations, one per tier.
void kn_matmul_q4_k_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q6_k_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q4_k_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q6_k_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_k_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_k_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_0_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_0_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_1_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q5_1_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);

// Attention over a key cache in blocks of 16 positions (kernels.KeyBlock), one per tier.
void kn_attend_blk_avx2(float *out, const float *q, const float *k, const float *v, int64_t hd, int64_t npos, int64_t nq, float scale, float *probs);
void kn_attend_blk_f16_avx2(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t hd, int64_t npos, int64_t nq, float scale, float *probs);
void kn_attend_blk_vnni(float *out, const float *q, const float *k, const float *v, int64_t hd, int64_t npos, int64_t nq, float scale, float *probs);
void kn_attend_blk_f16_vnni(float *out, const float *q, const uint16_t *k, const uint16_t *v, int64_t hd, int64_t npos, int64_t nq, float scale, float *probs);

// Packed Q8_0 (PackQ8_0's layout) against Q8_0 activations, one per tier.
void kn_matmul_q8_0x8_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q8_0x8_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
// The same from activation rows prepared once (block scales and sums; for AMX also the rows tile by tile).
void kn_q8_prepare_avx2(const uint8_t *xq, int64_t n, int64_t cols, float *xd, int32_t *xs);
void kn_q8_prepare_vnni(const uint8_t *xq, int64_t n, int64_t cols, float *xd, int32_t *xs);
void kn_q8_tiles_amx(const uint8_t *xq, int64_t n, int64_t cols, uint8_t *xt);
void kn_matmul_q8_0x8_prep_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs);
void kn_matmul_q8_0x8_prep_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs);
void kn_matmul_q8_0x16_amx(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs, const uint8_t *xt);
void kn_matmul_q4_0x16_amx(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs, const uint8_t *xt, uint8_t *ub);

// Packed Q4_0 (PackQ4_0's layout) against Q8_0 activations, one per tier.
void kn_matmul_q4_0x16_avx2(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);
void kn_matmul_q4_0x16_vnni(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1, const uint8_t *xq, int64_t n);

// Test hooks: F16C conversions, to check the Go conversions against the hardware.
uint16_t kn_f32_to_f16_hw(float f);
float kn_f16_to_f32_hw(uint16_t h);
#endif
