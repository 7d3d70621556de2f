/* Builders of the standard block-sparse layouts (attn.h documents what
 * each produces): BigBird's sliding window + global + random blocks, and
 * the Sparse Transformer's strided and fixed patterns, at block
 * granularity.  Each writes every entry of a dense [nb][mb] uint8 layout
 * (1 visible, 0 hidden) and is a pure function of its arguments. */
#include "sdpa/sdpa.h"
#include <string.h>

/* nb x mb bytes must be representable. */
static attn_status layout_size(const uint8_t *layout, int64_t nb, int64_t mb)
{
    if (!layout)
        return ATTN_ERR_NULL_ARGUMENT;
    if (nb <= 0 || mb <= 0)
        return ATTN_ERR_BAD_SIZE;
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)nb, (uint64_t)mb, &bytes) || bytes > (uint64_t)INT64_MAX ||
        bytes > (uint64_t)SIZE_MAX)
        return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

/* SplitMix64's finalizer of x + golden (Steele, Lea and Flood, 2014). */
static uint64_t mix64(uint64_t x)
{
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

attn_status attn_layout_build_bigbird(uint8_t *layout, int64_t nb, int64_t mb, int64_t window_blocks,
                                int64_t global_blocks, int64_t random_blocks, uint64_t seed)
{
    attn_status st = layout_size(layout, nb, mb);
    if (st != ATTN_OK)
        return st;
    if (window_blocks < 0 || (window_blocks > 0 && window_blocks % 2 == 0) || global_blocks < 0 ||
        random_blocks < 0)
        return ATTN_ERR_BAD_OPTION;
    const int64_t half = window_blocks > 0 ? (window_blocks - 1) / 2 : -1;
    for (int64_t I = 0; I < nb; I++) {
        uint8_t *row = layout + I * mb;
        int64_t free_blocks = 0;
        for (int64_t J = 0; J < mb; J++) {
            const int64_t dist = I > J ? I - J : J - I;
            row[J] = (uint8_t)(I < global_blocks || J < global_blocks ||
                               (window_blocks > 0 && dist <= half));
            free_blocks += !row[J];
        }
        /* random_blocks picks among the blocks still hidden: pick k takes
         * the x-th hidden block, x = hash(seed, I, k) mod (hidden left). */
        const uint64_t rowkey = mix64(seed ^ mix64((uint64_t)I));
        for (int64_t k = 0; k < random_blocks && free_blocks > 0; k++) {
            uint64_t x = mix64(rowkey + (uint64_t)k) % (uint64_t)free_blocks;
            for (int64_t J = 0; J < mb; J++) {
                if (row[J])
                    continue;
                if (x == 0) {
                    row[J] = 1;
                    break;
                }
                x--;
            }
            free_blocks--;
        }
    }
    return ATTN_OK;
}

attn_status attn_layout_build_strided(uint8_t *layout, int64_t nb, int64_t mb, int64_t stride,
                                int causal)
{
    attn_status st = layout_size(layout, nb, mb);
    if (st != ATTN_OK)
        return st;
    if (stride < 1 || (causal != 0 && causal != 1))
        return ATTN_ERR_BAD_OPTION;
    for (int64_t I = 0; I < nb; I++)
        for (int64_t J = 0; J < mb; J++) {
            const int64_t diff = I - J;
            const int64_t dist = diff < 0 ? -diff : diff;
            int vis = dist < stride || dist % stride == 0;
            if (causal && J > I)
                vis = 0;
            layout[I * mb + J] = (uint8_t)vis;
        }
    return ATTN_OK;
}

attn_status attn_layout_build_fixed(uint8_t *layout, int64_t nb, int64_t mb, int64_t stride, int64_t c,
                              int causal)
{
    attn_status st = layout_size(layout, nb, mb);
    if (st != ATTN_OK)
        return st;
    if (stride < 1 || c < 1 || c > stride || (causal != 0 && causal != 1))
        return ATTN_ERR_BAD_OPTION;
    for (int64_t I = 0; I < nb; I++)
        for (int64_t J = 0; J < mb; J++) {
            int vis = I / stride == J / stride || J % stride >= stride - c;
            if (causal && J > I)
                vis = 0;
            layout[I * mb + J] = (uint8_t)vis;
        }
    return ATTN_OK;
}
