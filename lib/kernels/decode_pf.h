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

/* The 64-byte lines of [p, p + bytes) for bytes > 0, counted from p
 * rather than from its line (the last byte's line asked for apart, so
 * a span that starts mid-line loses none). */
static inline __attribute__((always_inline)) void attn_dec_prefetch_span_at(const char *p,
                                                                            int64_t bytes)
{
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch(p + o, _MM_HINT_T0);
    _mm_prefetch(p + bytes - 1, _MM_HINT_T0);
}

/* A paged cache's far prefetch (decode.h) of a row, or of the bytes of it
 * a kernel's pass reads: rows of ATTN_DEC_FAR_LINE_BYTES or more by their
 * first line alone, shorter ones whole.  That line starts the page walk
 * and the memory access of the row early; the near prefetch asks for the
 * whole row later.  Against the whole row, on Zen 5 (D1's shape over a
 * pool in a random order, attn-ab, 1 and 2 threads): F32 0.92-0.97x the
 * time, F16 0.92-0.98x, BF16 0.91-0.97x (one pair 1.01) at the AVX-512
 * level, F32 0.97-0.98x and F16 1.01-1.03x at the AVX2 level; for Q8_0
 * rows (136 bytes) one line took 1.01-1.02x, so they and Q4_0's stay
 * whole (docs/DESIGN.md). */
enum { ATTN_DEC_FAR_LINE_BYTES = 256 };

static inline __attribute__((always_inline)) void attn_dec_prefetch_far(const void *row,
                                                                        int64_t bytes)
{
    if (bytes >= ATTN_DEC_FAR_LINE_BYTES)
        _mm_prefetch((const char *)row, _MM_HINT_T0);
    else
        attn_dec_prefetch_row(row, bytes);
}

/* Of rows[0, n): bytes from byte off of row c + dist, and of row c + far
 * when far > 0 (attn_dec_prefetch_far), where those rows exist. */
static inline __attribute__((always_inline)) void attn_dec_prefetch_ahead(
    const void *const *rows, int64_t c, int64_t n, int64_t dist, int64_t far, int64_t off,
    int64_t bytes)
{
    if (c + dist < n)
        attn_dec_prefetch_row((const char *)rows[c + dist] + off, bytes);
    if (far && c + far < n)
        attn_dec_prefetch_far((const char *)rows[c + far] + off, bytes);
}

/* Of rows[0, n): the g rows from a (those that exist), each whole
 * (bytes).  When they lie back to back, bytes apart (a contiguous cache,
 * or within a page of a paged one), as one span of lines: no line asked
 * for twice (a Q8_0 row of 136 bytes spans three lines, two of them
 * shared) and no test per row; otherwise row by row.  (Only the first and
 * last rows are compared: should the rows between lie elsewhere, the
 * lines asked for are only useless, as a prefetch never faults.) */
static inline __attribute__((always_inline)) void attn_dec_prefetch_span(
    const void *const *rows, int64_t a, int64_t g, int64_t n, int64_t bytes)
{
    if (a + g <= n && (const char *)rows[a + g - 1] - (const char *)rows[a] == (g - 1) * bytes) {
        attn_dec_prefetch_span_at((const char *)rows[a], g * bytes);
        return;
    }
    for (int64_t i = 0; i < g && a + i < n; i++)
        attn_dec_prefetch_row(rows[a + i], bytes);
}

/* The lines of a span asked for a few at a time between a kernel's FMAs
 * rather than all at once: a burst of 128 prefetches (16 F32 rows of d
 * 128) fills the core's miss buffers, and the loads and FMAs behind it
 * wait until lines arrive.  attn_dec_spread_start takes the g rows from a
 * when they lie back to back (as attn_dec_prefetch_span) and returns 0
 * otherwise (then the caller asks for them row by row); _step asks for the
 * next k lines, _finish for the rest. */
typedef struct attn_dec_spread {
    const char *p;   /* the next line */
    int64_t left;    /* lines not yet asked for */
} attn_dec_spread;

static inline __attribute__((always_inline)) int attn_dec_spread_start(
    attn_dec_spread *sp, const void *const *rows, int64_t a, int64_t g, int64_t n, int64_t bytes)
{
    sp->left = 0;
    if (a + g > n || (const char *)rows[a + g - 1] - (const char *)rows[a] != (g - 1) * bytes)
        return 0;
    const uintptr_t b = (uintptr_t)rows[a], e = b + (uintptr_t)(g * bytes) - 1;
    sp->p = (const char *)(b & ~(uintptr_t)63);
    sp->left = (int64_t)((e >> 6) - (b >> 6)) + 1;
    return 1;
}

static inline __attribute__((always_inline)) void attn_dec_spread_step(attn_dec_spread *sp,
                                                                       int64_t k)
{
    for (; k > 0 && sp->left > 0; k--, sp->left--, sp->p += 64)
        _mm_prefetch(sp->p, _MM_HINT_T0);
}

static inline __attribute__((always_inline)) void attn_dec_spread_finish(attn_dec_spread *sp)
{
    attn_dec_spread_step(sp, sp->left);
}

/* The g rows from a: spread (sp started, and the lines to ask for per step
 * returned, for a loop of `steps` steps) when spread is set and they lie
 * back to back, else asked for at once (sp empty, 0 returned). */
static inline __attribute__((always_inline)) int64_t attn_dec_spread_or_span(
    attn_dec_spread *sp, int spread, int64_t steps, const void *const *rows, int64_t a, int64_t g,
    int64_t n, int64_t bytes)
{
    if (spread && attn_dec_spread_start(sp, rows, a, g, n, bytes))
        return (sp->left + steps - 1) / steps;
    sp->left = 0;
    attn_dec_prefetch_span(rows, a, g, n, bytes);
    return 0;
}

/* The g rows from c + dist, and from c + far when far > 0, as
 * attn_dec_prefetch_ahead asks for them row by row: the near ones by
 * attn_dec_prefetch_span, the far ones as attn_dec_prefetch_far. */
static inline __attribute__((always_inline)) void attn_dec_prefetch_group(
    const void *const *rows, int64_t c, int64_t g, int64_t n, int64_t dist, int64_t far,
    int64_t bytes)
{
    attn_dec_prefetch_span(rows, c + dist, g, n, bytes);
    if (far && bytes >= ATTN_DEC_FAR_LINE_BYTES)
        for (int64_t i = 0; i < g && c + far + i < n; i++)
            _mm_prefetch((const char *)rows[c + far + i], _MM_HINT_T0);
    else if (far)
        attn_dec_prefetch_span(rows, c + far, g, n, bytes);
}

/* Whether rows[0, n) look like one stream at one step apart (a contiguous
 * cache, or a strided layout): rows[n - 1] lies (n - 1) steps from
 * rows[0], the step being rows[1] - rows[0] (returned in *step).  Only
 * for prefetches: should the rows between lie elsewhere, the lines asked
 * for are only useless.  A kernel that takes the address of a row ahead
 * from the stream rather than from rows[c + dist] (a fresh load each key,
 * which the prefetch waits for) read F16 V from memory in 0.7-0.8x the
 * time on Zen 5 (docs/DESIGN.md). */
static inline __attribute__((always_inline)) int attn_dec_linear(const void *const *rows,
                                                                 int64_t n, uintptr_t *step)
{
    *step = n > 1 ? (uintptr_t)rows[1] - (uintptr_t)rows[0] : 0;
    return n > 1 && (uintptr_t)rows[n - 1] == (uintptr_t)rows[0] + (uintptr_t)(n - 1) * *step;
}

#endif
