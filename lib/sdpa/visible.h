/* Which keys a query row sees (attn.h, the visibility rules): the window
 * and key length of a row, and for the sparse options the candidate runs,
 * tiles and segments (visible.c).  Shared by the forward, the sparse
 * forward, the backward and the plan. */
#ifndef ATTN_SDPA_VISIBLE_H
#define ATTN_SDPA_VISIBLE_H

#include "attn.h"
#include <stdint.h>

/* The sparse options of a desc: ATTN_OK or ATTN_ERR_BAD_OPTION. */
attn_status attn_sparse_validate(int layout_per_head, int reserved_flags, int64_t block_size);

/* The candidate keys of a group of query rows of one item, as a stream of
 * maximal runs [s, e) in increasing order: keys j < kvlen inside a visible
 * layout block (lay, or every block when NULL) and inside [wlo, whi) or
 * flagged in gk (NULL: none).  For global query rows [wlo, whi) is
 * [0, kvlen) and gk is NULL.  Reads lay and gk only there. */
typedef struct attn_krun {
    const uint8_t *lay;
    int64_t bs;
    const uint8_t *gk;
    int64_t wlo, whi, kvlen;
    int64_t j;
} attn_krun;
int attn_krun_next(attn_krun *r, int64_t *s, int64_t *e);

/* The first key in [j, end) visible to a row (inside [lo, hi), flagged in
 * gk, or any when all is set); *stop is the end of its visible interval.
 * Returns end when there is none. */
int64_t attn_vis_next(const uint8_t *gk, int all, int64_t lo, int64_t hi, int64_t j,
                      int64_t end, int64_t *stop);

/* One piece of a key tile: tile columns [c0, c0 + len) are keys
 * [j0, j0 + len). */
typedef struct attn_kseg {
    int64_t c0, j0, len;
} attn_kseg;

/* The first nonzero byte of p in [j, end), or end (8 bytes at a time). */
int64_t attn_next_nonzero(const uint8_t *p, int64_t j, int64_t end);

/* Fill a tile with up to bk keys of the stream kr (*s, *e its current
 * run, *have whether there is one): segments seg[0 .. *nseg), returns the
 * number of columns (0 at the end).  With gather, the segments of at
 * least ATTN_GATHER_SHORT keys take the first columns and the shorter ones
 * the last, from *cshort on; otherwise the columns follow the keys and
 * *cshort is the number of columns. */
int64_t attn_fill_tile(attn_krun *kr, int64_t *s, int64_t *e, int *have, attn_kseg *seg,
                       int64_t bk, int64_t *nseg, int gather, int64_t *cshort);

/* Copy the rows of the short segments (columns [cshort, ...)) of a
 * [rows][ld] matrix into dst [columns - cshort][width]. */
void attn_gather_rows(float *dst, const float *src, int64_t ld, int64_t width,
                      const attn_kseg *seg, int64_t nseg, int64_t cshort);

/* A window bound past n + m is as good as unbounded; clamping it keeps the
 * index arithmetic of execute far from overflow.  Negative: unbounded.
 * With positions the diagonal may sit up to 2^41 away from the block, so
 * the bound is kept up to 2^61 (still far from overflow). */
static inline int64_t attn_window_clamp(const attn_sdpa_desc *d, int64_t bound)
{
    const int64_t far = d->use_positions ? (int64_t)1 << 61 : d->q_len + d->kv_len;
    return bound < 0 ? -1 : bound > far ? far : bound;
}

/* Batch b's geometry in the call's own rows and keys: its valid query rows
 * [0, qlen), its keys [0, kvlen), and the window's diagonal D(i) = i +
 * shift.  Without positions: the lengths, and kvlen - qlen for
 * BOTTOM_RIGHT; with them (attn.h, "Blocks of a longer sequence") the
 * whole problem's lengths N, M cut to the block, and q_pos0 - kv_pos0 (+
 * M - N). */
typedef struct attn_geom {
    int64_t qlen, kvlen, shift;
} attn_geom;

static inline int64_t attn_clamp64(int64_t x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : x;
}

static inline attn_geom attn_geom_of(const attn_sdpa_desc *d, const int32_t *q_lens,
                                     const int32_t *kv_lens, int64_t b)
{
    const int64_t q0 = d->use_positions ? d->q_pos0 : 0;
    const int64_t k0 = d->use_positions ? d->kv_pos0 : 0;
    const int64_t N = d->use_q_lens ? q_lens[b] : q0 + d->q_len;
    const int64_t M = d->use_kv_lens ? kv_lens[b] : k0 + d->kv_len;
    attn_geom g;
    g.qlen = attn_clamp64(N - q0, 0, d->q_len);
    g.kvlen = attn_clamp64(M - k0, 0, d->kv_len);
    g.shift = q0 - k0 + (d->align == ATTN_ALIGN_BOTTOM_RIGHT ? M - N : 0);
    return g;
}

/* Visible keys [lo, hi) of query i (lo == hi == 0 when none), from the
 * (clamped) window, the diagonal's shift and the key length.  Bottom-right
 * alignment: its last valid query sees its last valid key. */
static inline void attn_row_range(int64_t shift, int64_t wl, int64_t wr, int64_t kvlen, int64_t i,
                                  int64_t *lo_out, int64_t *hi_out)
{
    int64_t diag = i + shift;
    int64_t lo = wl >= 0 ? diag - wl : 0;
    int64_t hi = wr >= 0 ? diag + wr + 1 : kvlen;
    if (lo < 0) lo = 0;
    if (hi > kvlen) hi = kvlen;
    if (lo >= hi) lo = hi = 0;
    *lo_out = lo;
    *hi_out = hi;
}

#endif
