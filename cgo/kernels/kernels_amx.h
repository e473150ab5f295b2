// AMX tier of the packed Q8_0 and Q4_0 products, included once by kernels_amd64.c after the VNNI
// kernels (it calls their inline helpers for what tiles do not cover).
//
// A block of the packed layout (kernels_x8.h) is already an AMX B tile: 8 rows of 64 bytes, row q
// holding piece q (4 bytes) of each of the group's 16 weight rows, weights stored plus 128. Sixteen
// activation rows' 32 bytes of the same block form the A tile (16 rows of 32 bytes, laid out
// contiguously once per input by kn_q8_tiles_amx), and one TDPBSUD (signed A, unsigned B) leaves
// Σ(w+128)·x for all 16×16 pairs in a C tile of int32. Per block the kernel then does exactly what
// the VNNI tier does per lane: s = Σ(w+128)·x − 128·Σx in int32, p = float(s)·d_x,
// acc = fma(p, d_w, acc), blocks in order, so the results are bit-identical to every other tier.
//
// Only whole tiles of 16 activation rows run on AMX: fewer rows (decoding, speculative
// verification, the last rows of a prompt) take the VNNI tiles, where a weight load already feeds
// every row and a tile would be mostly padding.
//
// There is no move from a tile to vector registers on these CPUs, so every block's sums go through
// memory (a tile store, then vector loads). Variants measured on the device Xeon (one core, 64
// activation rows): the tile work alone ran at 2.4x the VNNI tier's GFLOP/s and the scaling alone
// at 2.9x, together 1.2-1.4x, so they overlap only in part; loading each block's weights once for
// four activation tiles (accumulators in memory) was slower in the engine than this loop, and
// three or five blocks in flight were slower than two.
//
// Tile state is per thread and a goroutine may change threads between cgo calls, so every call
// loads its configuration and releases the tiles before returning.

// Tile registers (plain numbers: the intrinsics paste them into the instruction's register name).
// Two blocks are in flight, each with its own C, A and B tile.
#define KN_AMX_C0 0
#define KN_AMX_C1 1
#define KN_AMX_A0 2
#define KN_AMX_A1 3
#define KN_AMX_B0 4
#define KN_AMX_B1 5

typedef struct {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} kn_tilecfg;

// C: 16 activation rows × 16 weight rows of int32; A: 16 activation rows × one block's 32 bytes;
// B: one packed block, 8 pieces × 16 rows × 4 bytes. A constant object, so that no store of the
// configuration can be dropped: ldtilecfg reads all 64 bytes, which the intrinsic does not tell
// the compiler.
static const kn_tilecfg kn_amx_cfg __attribute__((aligned(64))) = {
	.palette = 1,
	.colsb = {[KN_AMX_C0] = 64, [KN_AMX_C1] = 64, [KN_AMX_A0] = 32, [KN_AMX_A1] = 32, [KN_AMX_B0] = 64, [KN_AMX_B1] = 64},
	.rows = {[KN_AMX_C0] = 16, [KN_AMX_C1] = 16, [KN_AMX_A0] = 16, [KN_AMX_A1] = 16, [KN_AMX_B0] = 8, [KN_AMX_B1] = 8},
};

// KN_AMX_BLOCK: block bb's 16×16 sums (activation tile xt, weight tiles wt) in tile C, stored to buf.
#define KN_AMX_BLOCK(C, A, B, bb, buf)                                                                 \
	do {                                                                                               \
		_tile_zero(C);                                                                             \
		_tile_loadd(A, xt + (bb) * 512, 32);                                                       \
		_tile_loadd(B, wt + (bb) * 512, 64);                                                       \
		_tile_dpbsud(C, A, B);                                                                     \
		_tile_stored(C, buf, 64);                                                                  \
	} while (0)

// amx_scale adds block b's sums (c: 16 activation rows × 16 weight rows) to the accumulators,
// with the VNNI tier's arithmetic per lane. xs holds −128·Σx, the correction for Q8_0's weights
// stored plus 128; Q4_0's nibbles are the values plus 8, so q4 takes xs/16 = −8·Σx (exact).
static inline __attribute__((always_inline)) void kn_amx_scale(__m512 *acc, const int32_t *c, const float *xd,
		const int32_t *xs, int64_t nb, int64_t b, __m512 dw, int q4) {
	for (int m = 0; m < 16; m++) {
		const int32_t corr = q4 ? xs[m * nb + b] / 16 : xs[m * nb + b];
		const __m512i s = _mm512_add_epi32(_mm512_load_si512((const void *)(c + 16 * m)), _mm512_set1_epi32(corr));
		const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(xd[m * nb + b]));
		acc[m] = _mm512_fmadd_ps(p, dw, acc[m]);
	}
}

// amx_tile: one tile of 16 activation rows (xt: its blocks, 512 bytes each; scales xd and
// −128·Σx xs, [row][nb]) against one group of 16 weight rows (wt: its blocks as B tiles, 512 bytes
// each; scales: their nb × 16 fp16 scales); out rows ldo apart, first valid lanes stored. Block b+1's tile product is issued before block b's scaling, so that the tile
// unit and the vector ports overlap. pf: prefetch the group (the first tile streams it from
// memory; later ones find it in cache).
static inline __attribute__((always_inline)) void kn_amx_tile(const uint8_t *wt, const uint8_t *scales, int64_t nb,
		const uint8_t *xt, const float *xd, const int32_t *xs, float *out, int64_t ldo, int valid, int pf, int q4) {
	int32_t c0[256] __attribute__((aligned(64))), c1[256] __attribute__((aligned(64)));
	__m512 acc[16];
	for (int m = 0; m < 16; m++)
		acc[m] = _mm512_setzero_ps();
	KN_AMX_BLOCK(KN_AMX_C0, KN_AMX_A0, KN_AMX_B0, 0, c0);
	for (int64_t b = 0; b < nb; b += 2) {
		if (pf) {
			for (int l = 0; l < 1024; l += 64)
				_mm_prefetch((const char *)(wt + b * 512 + KN_PF_MIN + l), KN_X16_HINT); // prompts: the fixed 8 KiB
			_mm_prefetch((const char *)(scales + b * 32 + 128), _MM_HINT_T0);
		}
		if (b + 1 < nb)
			KN_AMX_BLOCK(KN_AMX_C1, KN_AMX_A1, KN_AMX_B1, b + 1, c1);
		kn_amx_scale(acc, c0, xd, xs, nb, b, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + b * 32))), q4);
		if (b + 1 >= nb)
			break;
		if (b + 2 < nb)
			KN_AMX_BLOCK(KN_AMX_C0, KN_AMX_A0, KN_AMX_B0, b + 2, c0);
		kn_amx_scale(acc, c1, xd, xs, nb, b + 1,
			_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(scales + (b + 1) * 32))), q4);
	}
	const __mmask16 mask = valid >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << valid) - 1);
	for (int m = 0; m < 16; m++)
		_mm512_mask_storeu_ps(out + m * ldo, mask, acc[m]);
}
#undef KN_AMX_BLOCK

// kn_q8_tiles_amx writes the first n16 (n rounded down to 16) of n activation rows xq into xt
// (n16·cols bytes) tile by tile: tile k (rows 16k..16k+15), block b at (k·nb + b)·512, row by row,
// 32 bytes each, so that every A tile is one contiguous 512-byte load.
void kn_q8_tiles_amx(const uint8_t *xq, int64_t n, int64_t cols, uint8_t *xt) {
	const int64_t nb = cols / 32, xrow = nb * 34, n16 = n & ~(int64_t)15;
	for (int64_t j = 0; j < n16; j++)
		for (int64_t b = 0; b < nb; b++)
			memcpy(xt + ((j / 16 * nb + b) * 16 + j % 16) * 32, xq + j * xrow + b * 34 + 2, 32);
}

// kn_matmul_q8_0x16_amx is kn_matmul_q8_0x8_prep_vnni for n ≥ 16 activation rows, also laid out
// by kn_q8_tiles_amx: the first n16 rows on AMX, the rest on the VNNI tiles.
void kn_matmul_q8_0x16_amx(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs, const uint8_t *xt) {
	const int64_t nb = cols / 32, xrow = nb * 34, gbytes = nb * 544, n16 = n & ~(int64_t)15;
	_tile_loadconfig(&kn_amx_cfg);
	for (int64_t r = r0; r < r1; r += 16) {
		const uint8_t *g = w + (r / 16) * gbytes;
		const int valid = r1 - r < 16 ? (int)(r1 - r) : 16;
		for (int64_t j = 0; j < n16; j += 16)
			kn_amx_tile(g, g + nb * 512, nb, xt + j * cols, xd + j * nb, xs + j * nb, out + j * ldo + r, ldo, valid, j == 0, 0);
		for (int64_t j = n16; j < n; j += 8) {
			const int nx = n - j < 8 ? (int)(n - j) : 8;
			x16tile_n_vnni(nx, g, nb, xq + j * xrow, xrow, xd + j * nb, xs + j * nb, out + j * ldo + r, ldo, valid, 0);
		}
	}
	_tile_release();
}

// kn_matmul_q4_0x16_amx is kn_matmul_q8_0x16_amx for packed Q4_0 (PackQ4_0) weights, with rows
// prepared the same way (xs: −128·Σx). Each group's nibbles are first widened into ub (nb·512
// bytes) as B tiles, rows q and q+4 of block b's tile from the low and high nibbles of its piece q,
// then every activation tile reads them there. Rows past the last whole tile use the VNNI tiles.
void kn_matmul_q4_0x16_amx(float *out, int64_t ldo, const uint8_t *w, int64_t cols, int64_t r0, int64_t r1,
		const uint8_t *xq, int64_t n, const float *xd, const int32_t *xs, const uint8_t *xt, uint8_t *ub) {
	const int64_t nb = cols / 32, xrow = nb * 34, gbytes = nb * 288, n16 = n & ~(int64_t)15;
	float stack[KN_STACK_SCALES];
	int32_t *xs4 = 0; // the VNNI tiles' −8·Σx of the rows past n16
	if (n > n16) {
		xs4 = (int32_t *)scale_buf_vnni(stack, (n - n16) * nb);
		for (int64_t i = 0; i < (n - n16) * nb; i++)
			xs4[i] = xs[n16 * nb + i] / 16;
	}
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	_tile_loadconfig(&kn_amx_cfg);
	for (int64_t r = r0; r < r1; r += 16) {
		const uint8_t *g = w + (r / 16) * gbytes;
		const int valid = r1 - r < 16 ? (int)(r1 - r) : 16;
		for (int64_t b = 0; b < nb; b++) {
			const uint8_t *wb = g + b * 256;
			for (int l = 0; l < 256; l += 64)
				_mm_prefetch((const char *)(wb + KN_PF_MIN + l), KN_X4_HINT); // prompts: the fixed 8 KiB
			for (int q = 0; q < 4; q++) {
				const __m512i v = _mm512_loadu_si512((const void *)(wb + 64 * q));
				_mm512_storeu_si512((void *)(ub + b * 512 + 64 * q), _mm512_and_si512(v, m4));
				_mm512_storeu_si512((void *)(ub + b * 512 + 64 * (q + 4)), _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
			}
		}
		for (int64_t j = 0; j < n16; j += 16)
			kn_amx_tile(ub, g + nb * 256, nb, xt + j * cols, xd + j * nb, xs + j * nb, out + j * ldo + r, ldo, valid, 0, 1);
		for (int64_t j = n16; j < n; j += 8) { // the VNNI tier's tile height (KN_X4_NX)
			const int nx = n - j < 8 ? (int)(n - j) : 8;
			x4tile_n_vnni(nx, g, nb, xq + j * xrow, xrow, xd + j * nb, xs4 + (j - n16) * nb, out + j * ldo + r, ldo, valid, 0);
		}
	}
	_tile_release();
	if (xs4 && (float *)xs4 != stack)
		free(xs4);
}
