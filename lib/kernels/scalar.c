#include "attn_config.h"
#include "kernels/kernels.h"
#include "kernels/softmax_rows.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 2^(j/16), j = 0..15, each rounded to float (relative error 3.5e-8 at
 * most). */
const float attn_exp2_16[16] = {
    0x1.000000p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f,
    0x1.306fe0p+0f, 0x1.3dea64p+0f, 0x1.4bfdaep+0f, 0x1.5ab07ep+0f,
    0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
    0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f,
};

/* exp(x) = 2^k 2^(j/16) e^r:
 *   t = x log2(e) + 1.5 2^19, whose last ulp is 1/16, so t holds
 *   y = t - 1.5 2^19 = round(16 x log2(e)) / 16 = k + j/16 (k = floor(y),
 *   j in [0, 16)) and the low 4 bits of t's encoding are j;
 *   r = x - y ln 2 in two steps (Cody and Waite; y ln2_hi is exact), so
 *   |r| <= ln 2 / 32;
 *   e^r = 1 + q, q = r (1 + r (1/2 + r / 6)) (truncation 9.2e-9 at most);
 *   2^(j/16) e^r = T[j] + T[j] q, then times 2^k.
 * The float evaluation's roundings dominate: 1.2e-7 relative at most.
 * Below -87.336544 (log FLT_MIN) the result is 0, never a denormal; above
 * log(FLT_MAX) it overflows to inf; NaN gives NaN.  The SIMD tables do the
 * same steps (with one fused multiply-add for t and for each step after). */
float attn_exp_scalar(float x)
{
    if (x < -87.336544f)            /* also -INFINITY; NaN compares false */
        return 0.0f;
    if (x > 100.0f)                 /* keeps k in range; 2^k overflows below */
        x = 100.0f;
    const float magic = 786432.0f;  /* 1.5 2^19 */
    const float t = x * 1.44269504088896341f + magic;
    const float y = t - magic;
    float r = x - y * 0.693359375f;
    r = r - y * -2.12194440e-4f;
    float p = r * (1.0f / 6.0f) + 0.5f;
    p = p * r + 1.0f;
    const float q = p * r;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    const float tab = attn_exp2_16[tb & 15];
    const float e = tab * q + tab;
    if (isnan(e))
        return e;
    /* k = floor(y): y + 128 > 0 here, and it is exact. */
    const int32_t ki = (int32_t)(y + 128.0f) - 128;
    /* 2^k for k in [-127, 144]: two factors, each a normal float. */
    int32_t k1 = ki / 2, k2 = ki - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float f1, f2;
    memcpy(&f1, &b1, sizeof f1);
    memcpy(&f2, &b2, sizeof f2);
    return e * f1 * f2;
}

static float max_c(const float *x, int64_t n)
{
    float m = -INFINITY;
    int nan = 0;
    for (int64_t j = 0; j < n; j++) {
        m = x[j] > m ? x[j] : m;
        nan |= x[j] != x[j];
    }
    return nan ? NAN : m;
}

static float prep_max_c(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop)
{
    if (bias)
        for (int64_t j = 0; j < n; j++)
            s[j] += bias[j];
    if (mask)
        for (int64_t j = 0; j < n; j++)
            if ((mask[j] != 0) == (drop != 0))
                s[j] = -INFINITY;
    return max_c(s, n);
}

static float exp_sum_c(float *x, int64_t n, float m)
{
    float s = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        x[j] = attn_exp_scalar(x[j] - m);
        s += x[j];
    }
    return s;
}

static void exp_store_c(float *dst, const float *src, int64_t n, float m)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = attn_exp_scalar(src[j] - m);
}

static void scale_c(float *x, int64_t n, float a)
{
    for (int64_t j = 0; j < n; j++)
        x[j] *= a;
}

/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11; Random123's
 * constants): the reference the SIMD generators match. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void attn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        const uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Runs BODY for j in [j0, j0 + n) with x_ = j - j0 and keep_ the decision,
 * one Philox block per 4 keys (j / 4 fits 32 bits: keys < 2^32). */
#define DROPOUT_ROW(dr, b, h, i, j0, n, BODY)                                      \
    do {                                                                           \
        uint32_t ctr_[4] = { 0, (uint32_t)(i), (uint32_t)(h), (uint32_t)(b) };     \
        uint32_t u_[4];                                                            \
        int64_t j_ = (j0);                                                         \
        const int64_t end_ = (j0) + (n);                                           \
        while (j_ < end_) {                                                        \
            ctr_[0] = (uint32_t)(j_ >> 2);                                         \
            attn_philox4x32_10(ctr_, (dr)->key, u_);                               \
            int64_t e_ = (j_ | 3) + 1;                                             \
            if (e_ > end_) e_ = end_;                                              \
            for (; j_ < e_; j_++) {                                                \
                const int64_t x_ = j_ - (j0);                                      \
                const int keep_ = (uint64_t)u_[j_ & 3] < (dr)->thresh;             \
                BODY;                                                              \
            }                                                                      \
        }                                                                          \
    } while (0)

static void dropout_row_c(const attn_dropout *dr, float *x, int64_t b, int64_t h, int64_t i,
                          int64_t j0, int64_t n)
{
    const float s = dr->scale;
    DROPOUT_ROW(dr, b, h, i, j0, n, x[x_] = keep_ ? x[x_] * s : 0.0f);
}

static void dropout_bwd_row_c(const attn_dropout *dr, float *pr, float *dpr, float D, int64_t b,
                              int64_t h, int64_t i, int64_t j0, int64_t n)
{
    const float s = dr->scale;
    DROPOUT_ROW(dr, b, h, i, j0, n, {
        const float pv = pr[x_];
        const float dp = keep_ ? dpr[x_] * s : 0.0f;
        dpr[x_] = pv * (dp - D);
        pr[x_] = keep_ ? pv * s : 0.0f;
    });
}

static void dropout_keep_row_c(const attn_dropout *dr, uint8_t *keep, int64_t b, int64_t h,
                               int64_t i, int64_t j0, int64_t n)
{
    DROPOUT_ROW(dr, b, h, i, j0, n, keep[x_] = (uint8_t)keep_);
}

static void softmax_rows_c(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                           float *corr)
{
    attn_softmax_rows_with(max_c, exp_sum_c, s, lds, R, n, m, l, corr);
}

static void softmax_rows_p16_c(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                               float *corr)
{
    softmax_rows_c(s, lds, R, n, m, l, corr);
    attn_rows_to_bf16(s, lds, R, n);
}

const attn_kernels attn_kernels_scalar = {
    "scalar", max_c, prep_max_c, exp_sum_c, exp_store_c, scale_c, softmax_rows_c,
    softmax_rows_p16_c,
    dropout_row_c, dropout_bwd_row_c, dropout_keep_row_c,
};

const attn_kernels *attn_kernels_at(int level)
{
#if ATTN_HAVE_X86_KERNELS
#if ATTN_HAVE_AVX512BF16
    if (level >= ATTN_SIMD_AVX512BF16)
        return &attn_kernels_avx512bf16;
#endif
    if (level >= ATTN_SIMD_AVX512)
        return &attn_kernels_avx512;
    if (level >= ATTN_SIMD_AVX2)
        return &attn_kernels_avx2;
#endif
    (void)level;
    return &attn_kernels_scalar;
}

const attn_kernels *attn_kernels_select(void)
{
    return attn_kernels_at(attn_settings_level());
}
