/*
 * layout_expect.c -- independent constructions of the layout builders'
 * layouts (layout_expect.h).
 */
#include "layout_expect.h"

#include <stdlib.h>
#include <string.h>

static uint64_t lt_mix(uint64_t x)
{
    uint64_t z = x + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int expect_bigbird(uint8_t *e, int64_t nb, int64_t mb, int64_t w, int64_t gb, int64_t r,
                   uint64_t seed)
{
    memset(e, 0, (size_t)(nb * mb));
    for (int64_t I = 0; I < nb; I++) {
        for (int64_t t = -(w - 1) / 2; w > 0 && t <= (w - 1) / 2; t++)
            if (I + t >= 0 && I + t < mb)
                e[I * mb + I + t] = 1;
        if (I < gb)
            memset(e + I * mb, 1, (size_t)mb);
    }
    for (int64_t J = 0; J < gb && J < mb; J++)
        for (int64_t I = 0; I < nb; I++)
            e[I * mb + J] = 1;
    int64_t *list = malloc((size_t)mb * sizeof *list);
    if (!list)
        return -1;
    for (int64_t I = 0; I < nb; I++) {
        int64_t cnt = 0;
        for (int64_t J = 0; J < mb; J++)
            if (!e[I * mb + J])
                list[cnt++] = J;
        const uint64_t key = lt_mix(seed ^ lt_mix((uint64_t)I));
        for (int64_t k = 0; k < r && cnt > 0; k++) {
            const int64_t x = (int64_t)(lt_mix(key + (uint64_t)k) % (uint64_t)cnt);
            e[I * mb + list[x]] = 1;
            memmove(list + x, list + x + 1, (size_t)(cnt - x - 1) * sizeof *list);
            cnt--;
        }
    }
    free(list);
    return 0;
}

void expect_strided(uint8_t *e, int64_t nb, int64_t mb, int64_t l, int causal)
{
    memset(e, 0, (size_t)(nb * mb));
    for (int64_t I = 0; I < nb; I++) {
        for (int64_t J = I - l + 1; J < I + l; J++)   /* local */
            if (J >= 0 && J < mb)
                e[I * mb + J] = 1;
        for (int64_t J = I % l; J < mb; J += l)        /* strided */
            e[I * mb + J] = 1;
        if (causal)
            for (int64_t J = I + 1; J < mb; J++)
                e[I * mb + J] = 0;
    }
}

void expect_fixed(uint8_t *e, int64_t nb, int64_t mb, int64_t l, int64_t c, int causal)
{
    memset(e, 0, (size_t)(nb * mb));
    for (int64_t I = 0; I < nb; I++) {
        const int64_t g0 = I - I % l;
        for (int64_t J = g0; J < g0 + l && J < mb; J++)
            e[I * mb + J] = 1;
        for (int64_t g = 0; g < mb; g += l)           /* summary columns */
            for (int64_t J = g + l - c; J < g + l && J < mb; J++)
                e[I * mb + J] = 1;
        if (causal)
            for (int64_t J = I + 1; J < mb; J++)
                e[I * mb + J] = 0;
    }
}
