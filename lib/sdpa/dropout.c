/* Dropout on the attention probabilities: the keep decision of (b, h, i, j)
 * through Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; Random123's constants), as attn.h
 * documents it at attn_dropout_keep_mask:
 *
 *   key   = words 0, 1 of Philox4x32-10((offset lo, offset hi, 0, 0),
 *                                       (seed lo, seed hi))
 *   u     = word j % 4 of Philox4x32-10((j / 4, i, h, b), key)
 *   keep  = u < round((1 - p) 2^32)
 *
 * A pure function of (seed, offset, b, h, i, j): no state, no dependence on
 * who asks, in which order or in what tile, so the forward (any thread
 * count, tile, layout, GQA stacking, split-K chunk) and the backward draw
 * the same decisions. */
#include "sdpa/sdpa.h"
#include <math.h>

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

void attn_dropout_init(attn_dropout *dr, double p, uint64_t seed, uint64_t offset)
{
    const uint32_t ctr[4] = { (uint32_t)offset, (uint32_t)(offset >> 32), 0, 0 };
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
    uint32_t out[4];
    attn_philox4x32_10(ctr, key, out);
    dr->key[0] = out[0];
    dr->key[1] = out[1];
    /* (1 - p) 2^32 is exact in double for the 1 - p it gets; llround in
     * [0, 2^32]: 2^32 keeps every u, 0 none. */
    dr->thresh = (uint64_t)llround((1.0 - p) * 4294967296.0);
    dr->scale = p < 1.0 ? (float)(1.0 / (1.0 - p)) : 0.0f;
}

/* Calls f(x, j - j0, keep) for j in [j0, j0 + n), one Philox block per 4
 * keys (j / 4 fits 32 bits: keys < 2^32). */
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

void attn_dropout_row(const attn_dropout *dr, float *x, int64_t b, int64_t h, int64_t i,
                      int64_t j0, int64_t n)
{
    const float s = dr->scale;
    DROPOUT_ROW(dr, b, h, i, j0, n, x[x_] = keep_ ? x[x_] * s : 0.0f);
}

void attn_dropout_bwd_row(const attn_dropout *dr, float *pr, float *dpr, float D, int64_t b,
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

void attn_dropout_keep_row(const attn_dropout *dr, uint8_t *keep, int64_t b, int64_t h,
                           int64_t i, int64_t j0, int64_t n)
{
    DROPOUT_ROW(dr, b, h, i, j0, n, keep[x_] = (uint8_t)keep_);
}

attn_status attn_dropout_keep_mask(double p, uint64_t seed, uint64_t offset, int64_t b,
                                   int64_t h, int64_t i0, int64_t rows, int64_t m,
                                   uint8_t *keep, int64_t ld)
{
    const int64_t lim = (int64_t)1 << 32;
    if (!keep)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!(p >= 0.0 && p <= 1.0))
        return ATTN_ERR_BAD_OPTION;
    if (rows <= 0 || m <= 0 || b < 0 || h < 0 || i0 < 0)
        return ATTN_ERR_BAD_SIZE;
    if (b >= lim || h >= lim || i0 > lim || rows > lim - i0 || m > lim)
        return ATTN_ERR_TOO_LARGE;
    /* The extent (rows - 1) ld + m bytes must fit an int64_t and a size_t;
     * ld >= m is checked after (its status ranks below). */
    uint64_t ext;
    if (ld >= m) {
        if (__builtin_mul_overflow((uint64_t)(rows - 1), (uint64_t)ld, &ext) ||
            __builtin_add_overflow(ext, (uint64_t)m, &ext) || ext > (uint64_t)INT64_MAX ||
            ext > (uint64_t)SIZE_MAX)
            return ATTN_ERR_TOO_LARGE;
    }
    if (ld < m)
        return ATTN_ERR_BAD_STRIDE;
    attn_dropout dr;
    attn_dropout_init(&dr, p, seed, offset);
    for (int64_t r = 0; r < rows; r++)
        attn_dropout_keep_row(&dr, keep + r * ld, b, h, i0 + r, 0, m);
    return ATTN_OK;
}
