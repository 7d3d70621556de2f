/* Row kernels of the softmax and of dropout, one table per instruction set, chosen once per
 * plan at run time (attn_kernels_select).  Every kernel has a portable C
 * twin; exp() takes the same steps everywhere:
 *   exp(x) = 2^k * 2^(j/16) * e^r, k + j/16 = round(16 x / ln 2) / 16,
 *   |r| <= ln 2 / 32, 2^(j/16) from a table, e^r by a cubic (scalar.c),
 *   error 1.2e-7 relative at most;
 *   x < -87.336 (including -INFINITY) gives exactly 0 (no denormals);
 *   NaN stays NaN. */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include "cpu/cpu.h"
#include <stdint.h>

/* Dropout's parameters (filled by attn_dropout_init in sdpa/dropout.c):
 * the Philox key derived from (seed, offset), the keep threshold
 * round((1 - p) 2^32) in [0, 2^32] and the scale 1 / (1 - p) (0 when
 * p = 1).  keep(b, h, i, j) = word j % 4 of
 * Philox4x32-10((j / 4, i, h, b), key) < thresh: integer-only, so every
 * table draws the same decisions, and the scaling is one fp32 multiply, so
 * every table gives the same bits. */
typedef struct attn_dropout {
    uint32_t key[2];
    uint64_t thresh;
    float scale;
} attn_dropout;

/* The scalar Philox4x32-10 block (the reference of the SIMD generators). */
void attn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

typedef struct attn_kernels {
    const char *name;
    /* max of x[0..n), -INFINITY when n == 0 or all are -INFINITY */
    float (*row_max)(const float *x, int64_t n);
    /* On s[0..n): add bias[j] (when bias != NULL), set -INFINITY where the
     * mask hides (when mask != NULL: hidden iff (mask[j] != 0) == drop),
     * and return the max of the result (-INFINITY when n == 0). */
    float (*prep_max)(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop);
    /* x[j] = exp(x[j] - m) in place; returns the sum of the new x[j].
     * m is finite and no x[j] is +INFINITY (the softmax's m is at least
     * every x[j]; exp_store has no such condition). */
    float (*exp_sum)(float *x, int64_t n, float m);
    /* dst[j] = exp(src[j] - m); src may equal dst. */
    void (*exp_store)(float *dst, const float *src, int64_t n, float m);
    /* x[j] *= a */
    void (*scale)(float *x, int64_t n, float a);
    /* The forward's online-softmax step on rows r < R of s (stride lds),
     * n columns each, all visible, with the running max m[r], sum l[r]
     * and O's rescale corr[r] (kernels/softmax_rows.h): the same bits as
     * row_max, exp_sum and the forward's per-row steps. */
    void (*softmax_rows)(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                         float *corr);
    /* The same, and each row's n probabilities then rounded to BF16 (round
     * to nearest even, attn_f32_to_bf16) in place: row r's BF16 values
     * at (uint16_t *)(s + r * lds), its fp32 ones gone (for the BF16
     * products' P V; m, l and corr as softmax_rows gives them). */
    void (*softmax_rows_p16)(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                             float *corr);
    /* Dropout rows (b, h, i < 2^32, keys j0 .. j0 + n - 1 < 2^32), the
     * same bits at every level.  Dropped entries become exactly +0. */
    /* x[j - j0] = keep(b, h, i, j) ? x[j - j0] * scale : 0 */
    void (*dropout_row)(const attn_dropout *dr, float *x, int64_t b, int64_t h, int64_t i,
                        int64_t j0, int64_t n);
    /* The backward's row, with Z = keep(b, h, i, j) ? scale : 0: from P (pr)
     * and dP' = dO V^T (dpr), dpr = P (Z dP' - D) (that is dS) and
     * pr = Z P (the P' that multiplied V), in one pass of the generator;
     * Z dP' is keep ? dP' * scale : 0, then one subtraction and one
     * multiply (never fused). */
    void (*dropout_bwd_row)(const attn_dropout *dr, float *pr, float *dpr, float D, int64_t b,
                            int64_t h, int64_t i, int64_t j0, int64_t n);
    /* keep[j - j0] = keep(b, h, i, j) (0 or 1) */
    void (*dropout_keep_row)(const attn_dropout *dr, uint8_t *keep, int64_t b, int64_t h,
                             int64_t i, int64_t j0, int64_t n);
} attn_kernels;

extern const attn_kernels attn_kernels_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_kernels attn_kernels_avx2;
extern const attn_kernels attn_kernels_avx512;
#if ATTN_HAVE_AVX512BF16
/* The AVX-512 table at the AVX512-BF16 level: softmax_rows_p16 rounds with
 * VCVTNEPS2BF16 (the same bits). */
extern const attn_kernels attn_kernels_avx512bf16;
void attn_softmax_rows_p16_avx512bf16(float *s, int64_t lds, int64_t R, int64_t n, float *m,
                                      float *l, float *corr);
#endif
#endif

/* The table of a level (ATTN_SIMD_*, cpu/cpu.h: what the plan's settings
 * resolved; never above what the CPU runs). */
const attn_kernels *attn_kernels_at(int level);

/* The table at the level of the current settings (attn_settings_read). */
const attn_kernels *attn_kernels_select(void);

/* Scalar exp with the steps above, shared with the SIMD tails. */
float attn_exp_scalar(float x);

/* 2^(j/16) for j = 0..15, the table of every exp. */
extern const float attn_exp2_16[16];

#endif
