/* The visibility machinery every SDPA path shares (visible.h): the sparse
 * options' check, the candidate keys of a group of rows as maximal runs
 * (window, global keys, layout blocks, key length), a row's next visible
 * key, and the tiles cut from the runs with their short segments gathered.
 * The sparse forward (sparse.c), the backward (backward.c) and the plan
 * (plan.c) use it; it computes nothing itself. */
#include "sdpa/sdpa.h"
#include <string.h>

attn_status attn_sparse_validate(int layout_per_head, int reserved_flags, int64_t block_size)
{
    if (reserved_flags != 0)
        return ATTN_ERR_BAD_OPTION;
    if (layout_per_head != 0 && layout_per_head != 1)
        return ATTN_ERR_BAD_OPTION;
    if (block_size == 0)
        return layout_per_head ? ATTN_ERR_BAD_OPTION : ATTN_OK;
    if (block_size < 16 || block_size > 256 || (block_size & (block_size - 1)) != 0)
        return ATTN_ERR_BAD_OPTION;
    return ATTN_OK;
}

/* The first nonzero byte of p in [j, end), or end. */
int64_t attn_next_nonzero(const uint8_t *p, int64_t j, int64_t end)
{
    while (j < end && (j & 7)) {
        if (p[j])
            return j;
        j++;
    }
    while (end - j >= 8) {
        uint64_t w;
        memcpy(&w, p + j, sizeof w);
        if (w)
            break;
        j += 8;
    }
    while (j < end && !p[j])
        j++;
    return j;
}

int attn_krun_next(attn_krun *r, int64_t *s, int64_t *e)
{
    const int64_t end = r->kvlen, bs = r->bs;
    int64_t j = r->j;
    /* the start: the first candidate key at or after j */
    for (;;) {
        if (j >= end) {
            r->j = end;
            return 0;
        }
        if (r->lay && !r->lay[j / bs]) {
            j = (j / bs + 1) * bs;
            continue;
        }
        if (j >= r->wlo && j < r->whi)
            break;
        int64_t lim = r->lay ? (j / bs + 1) * bs : end;
        if (lim > end)
            lim = end;
        if (j < r->wlo && r->wlo < lim && r->wlo < r->whi)
            lim = r->wlo;
        if (r->gk) {
            int64_t x = attn_next_nonzero(r->gk, j, lim);
            if (x < lim) {
                j = x;
                break;
            }
        }
        j = lim;
    }
    const int64_t s0 = j;
    /* the end: extend over candidates */
    while (j < end) {
        if (r->lay && !r->lay[j / bs])
            break;
        int64_t bend = r->lay ? (j / bs + 1) * bs : end;
        if (bend > end)
            bend = end;
        if (j >= r->wlo && j < r->whi) {
            j = r->whi < bend ? r->whi : bend;
            continue;
        }
        if (r->gk && r->gk[j]) {
            int64_t lim = bend;
            if (j < r->wlo && r->wlo < lim)
                lim = r->wlo;
            while (j < lim && r->gk[j])
                j++;
            continue;
        }
        break;
    }
    *s = s0;
    *e = j;
    r->j = j;
    return 1;
}

int64_t attn_vis_next(const uint8_t *gk, int all, int64_t lo, int64_t hi, int64_t j,
                      int64_t end, int64_t *stop)
{
    if (all) {
        *stop = end;
        return j < end ? j : end;
    }
    for (;;) {
        if (j >= end) {
            *stop = end;
            return end;
        }
        if (j >= lo && j < hi)
            break;
        if (gk) {
            if (gk[j])
                break;
            j++;
        } else {
            j = j < lo && lo < hi ? lo : end;
        }
    }
    const int64_t a = j;
    while (j < end) {
        if (j >= lo && j < hi) {
            j = hi < end ? hi : end;
            continue;
        }
        if (gk && gk[j]) {
            j++;
            continue;
        }
        break;
    }
    *stop = j;
    return a;
}

/* ------------------------------------------------------------------------ */

/* Fill a tile with up to bk keys of the stream (s, e the current run);
 * returns the number of columns (0 at the end).  With gather, the long
 * segments take the first columns and the short ones (fewer than
 * ATTN_GATHER_SHORT keys) the last, from *cshort on; otherwise the columns
 * follow the keys and *cshort = cols. */
int64_t attn_fill_tile(attn_krun *kr, int64_t *s, int64_t *e, int *have, attn_kseg *seg,
                       int64_t bk, int64_t *nseg, int gather, int64_t *cshort)
{
    int64_t cols = 0, ns = 0;
    while (*have && cols < bk) {
        int64_t take = *e - *s < bk - cols ? *e - *s : bk - cols;
        seg[ns].c0 = cols;
        seg[ns].j0 = *s;
        seg[ns].len = take;
        ns++;
        cols += take;
        *s += take;
        if (*s == *e)
            *have = attn_krun_next(kr, s, e);
    }
    *nseg = ns;
    *cshort = cols;
    if (gather) {
        int64_t c = 0;
        for (int64_t x = 0; x < ns; x++)
            if (seg[x].len >= ATTN_GATHER_SHORT) {
                seg[x].c0 = c;
                c += seg[x].len;
            }
        *cshort = c;
        for (int64_t x = 0; x < ns; x++)
            if (seg[x].len < ATTN_GATHER_SHORT) {
                seg[x].c0 = c;
                c += seg[x].len;
            }
    }
    return cols;
}

/* Gather the rows of the short segments (columns [cshort, cols)) of a
 * [rows][ld] matrix into dst [cols - cshort][width]. */
void attn_gather_rows(float *dst, const float *src, int64_t ld, int64_t width,
                      const attn_kseg *seg, int64_t nseg, int64_t cshort)
{
    for (int64_t x = 0; x < nseg; x++) {
        if (seg[x].c0 < cshort)
            continue;
        for (int64_t t = 0; t < seg[x].len; t++)
            memcpy(dst + (seg[x].c0 - cshort + t) * width, src + (seg[x].j0 + t) * ld,
                   (size_t)width * sizeof(float));
    }
}
