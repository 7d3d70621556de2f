/* The decode kernels' software prefetches (decode_avx2.c, decode_avx512.c,
 * decode_vnni.c): every line of a row, and the two distances ahead in a
 * stream of rows by address (decode.h: ATTN_DEC_PF_KEYS within the stream,
 * and a paged cache's far distance).  Prefetches change no result. */
#ifndef ATTN_DECODE_PF_H
#define ATTN_DECODE_PF_H

#include <stdint.h>
#include <xmmintrin.h>

/* The 64-byte lines of [row, row + bytes). */
static inline __attribute__((always_inline)) void attn_dec_prefetch_row(const void *row,
                                                                        int64_t bytes)
{
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)row + o, _MM_HINT_T0);
}

/* Of rows[0, n): bytes from byte off of row c + dist, and of row c + far
 * when far > 0, where those rows exist. */
static inline __attribute__((always_inline)) void attn_dec_prefetch_ahead(
    const void *const *rows, int64_t c, int64_t n, int64_t dist, int64_t far, int64_t off,
    int64_t bytes)
{
    if (c + dist < n)
        attn_dec_prefetch_row((const char *)rows[c + dist] + off, bytes);
    if (far && c + far < n)
        attn_dec_prefetch_row((const char *)rows[c + far] + off, bytes);
}

#endif
