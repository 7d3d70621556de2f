/* Dropout on the attention probabilities: the keep decision of (b, h, i, j)
 * through Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11; Random123's constants), as attn.h
 * documents it at attn_dropout_mask_fill:
 *
 *   key   = words 0, 1 of Philox4x32-10((offset lo, offset hi, 0, 0),
 *                                       (seed lo, seed hi))
 *   u     = word j % 4 of Philox4x32-10((j / 4, i, h, b), key)
 *   keep  = u < round((1 - p) 2^32)
 *
 * A pure function of (seed, offset, b, h, i, j): no state, no dependence on
 * who asks, in which order or in what tile, so the forward (any thread
 * count, tile, layout, GQA stacking, split-K chunk) and the backward draw
 * the same decisions.  The generator and the rows are kernels
 * (kernels/scalar.c the reference, avx2.c and avx512.c 8 and 16 counters
 * at a time), bitwise the same at every level. */
#include "sdpa/sdpa.h"
#include <math.h>

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

attn_status attn_dropout_mask_fill(double p, uint64_t seed, uint64_t offset, int64_t b,
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
    const attn_kernels *kern = attn_kernels_select();
    for (int64_t r = 0; r < rows; r++)
        kern->dropout_keep_row(&dr, keep + r * ld, b, h, i0 + r, 0, m);
    return ATTN_OK;
}
