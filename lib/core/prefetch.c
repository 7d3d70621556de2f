/* Software prefetch of matrix rows into L2 (hint 2), for the paths whose
 * next operands come from memory while the current ones are computed on. */
#include "core/core.h"

void attn_prefetch_rows(const float *base, int64_t ld, int64_t r0, int64_t r1, int64_t width,
                        int write)
{
    attn_prefetch_bytes(base, ld * (int64_t)sizeof(float), r0, r1,
                        width * (int64_t)sizeof(float), write);
}

void attn_prefetch_bytes(const void *base, int64_t ld, int64_t r0, int64_t r1, int64_t bytes,
                         int write)
{
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)base + r * ld;
        for (int64_t x = 0; x < bytes; x += 64) {
            if (write)
                __builtin_prefetch(row + x, 1, 2);
            else
                __builtin_prefetch(row + x, 0, 2);
        }
    }
}
