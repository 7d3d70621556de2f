/* Row kernels of the softmax, one table per instruction set, chosen once per
 * plan at run time (attn_kernels_select).  Every kernel has a portable C
 * twin; exp() is the same polynomial everywhere:
 *   exp(x) = 2^k * e^r, k = round(x / ln 2), |r| <= ln 2 / 2,
 *   e^r by a degree-7 polynomial (Cephes' expf coefficients), error ~1 ulp;
 *   x < -87.336 (including -INFINITY) gives exactly 0 (no denormals);
 *   NaN stays NaN. */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include <stdint.h>

typedef struct attn_kernels {
    const char *name;
    /* max of x[0..n), -INFINITY when n == 0 or all are -INFINITY */
    float (*row_max)(const float *x, int64_t n);
    /* On s[0..n): add bias[j] (when bias != NULL), set -INFINITY where the
     * mask hides (when mask != NULL: hidden iff (mask[j] != 0) == drop),
     * and return the max of the result (-INFINITY when n == 0). */
    float (*prep_max)(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop);
    /* x[j] = exp(x[j] - m) in place; returns the sum of the new x[j].
     * m is finite. */
    float (*exp_sum)(float *x, int64_t n, float m);
    /* dst[j] = exp(src[j] - m); src may equal dst. */
    void (*exp_store)(float *dst, const float *src, int64_t n, float m);
    /* x[j] *= a */
    void (*scale)(float *x, int64_t n, float a);
} attn_kernels;

enum { ATTN_SIMD_SCALAR = 0, ATTN_SIMD_AVX2 = 1, ATTN_SIMD_AVX512 = 2 };

extern const attn_kernels attn_kernels_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_kernels attn_kernels_avx2;
extern const attn_kernels attn_kernels_avx512;
#endif

/* The best table this CPU runs, capped by the environment variable
 * ATTN_SIMD=scalar|avx2|avx512 (read each time; unknown values are
 * ignored). */
const attn_kernels *attn_kernels_select(void);

/* Scalar exp with the polynomial above, shared with the SIMD tails. */
float attn_exp_scalar(float x);

#endif
