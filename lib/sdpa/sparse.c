/* Sparse SDPA forward: global tokens and block-sparse layouts.
 *
 * Query i of batch b sees key j iff
 *   (window(i, j) OR global_k[b][j] OR global_q[b][i])
 *   AND j < kv_len_b AND i < q_len_b AND mask AND bias != -inf
 *   AND layout[h][i / bs][j / bs] != 0 (with a layout).
 *
 * Two kinds of work items, each owning the O, P and lse rows it computes:
 *
 * - ordinary items (b, query head h, block of sp.rows query rows); with a
 *   layout the block lies inside one block row (sp.rows divides the block
 *   size), so its rows share their layout row.  Its rows that are not
 *   global queries split into groups of consecutive rows (a global query
 *   row ends a group and is skipped); the rows >= q_len_b are zeroed here
 *   whatever their flag.
 * - with global queries, as many global-query items (b, h, rb) follow:
 *   the global queries of b below q_len_b, in increasing order, are taken
 *   per span (the layout block row I = rb sp.rows / bs with a layout, so
 *   that they share their layout row; all n rows without one), and item
 *   rb takes chunk k of sp.rows of them, k its rank among the span's
 *   items (k = rb without a layout).  Such an item is one group: its Q
 *   rows are copied into a per-thread buffer (dense, sp.rows x dk), its O
 *   rows accumulate in another (sp.rows x dv) and are scattered to their
 *   places at the finish, so scattered global queries (every 128th token,
 *   say) run with M = sp.rows GEMMs instead of one M = 1 pass over every
 *   key each, and their cost no longer lands on the ordinary item that
 *   holds them.  Every per-row index (mask, bias, dropout, P, lse, the
 *   layout row) is the row's real index.  Most of these items are empty
 *   (cost 0) unless global queries are many.
 *
 * A group's candidate keys are a union of maximal runs of keys
 * (attn_krun): for ordinary rows the union of their windows plus the global
 * keys, for global rows every key, both cut to the layout's visible blocks
 * and to kv_len.  The runs are walked in tiles of up to bk keys; a tile is
 * a list of segments (pieces of runs), and per tile the group does one
 * online-softmax step as forward.c does:
 *
 *   S[:, seg] = scale Q K_seg^T                  (one sgemm per segment)
 *   per row: keys it does not see -> -inf; bias, mask, max on the rest
 *   c = exp(m - m');  S = exp(S - m');  l = c l + rowsum S
 *   O = c O + sum over segments S[:, seg] V_seg  (one sgemm per segment)
 *
 * (segments shorter than ATTN_GATHER_SHORT keys, scattered global keys,
 * have their K and V rows gathered and cost one sgemm per tile together.)
 *
 * 16-bit tensors (q_type, k_type, v_type, o_type F16 or BF16) are widened
 * exactly to fp32 as they are read, a bounded piece at a time into the
 * thread's slice: a group's Q rows into w->qw (a global-query item's into
 * its copy w->qg), a tile's K rows and V rows, segment by segment, into
 * w->kb and w->vb at their tile columns (then the sgemms read them there,
 * the long segments one by one and the short ones together, exactly as
 * the fp32 path reads them in place and gathered); O rows are accumulated
 * in fp32 in w->ow (w->og) and rounded once to o_type at the group's end.
 * Only the keys of the segments are widened (nothing hidden is read), and
 * the operations are those of the fp32 path on the widened values: the
 * same bits, then O rounded.
 *
 * Keys, mask and bias entries outside the candidate runs are never read,
 * so hidden blocks cost nothing.  Items are run heaviest first (their cost
 * is rows x candidate keys, counted per execute), each by one thread, with
 * outputs owned by the item (every row by exactly one item): the result
 * does not depend on the thread count or the schedule.  A plan without
 * global queries has only ordinary items and runs exactly as before. */
#include "sdpa/sdpa.h"
#include "kernels/softmax_rows.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The sparse fields took three int64 slots of reserved[] (13 -> 10): the
 * descs keep their size and the ABI of the fields before them (x86-64). */
#if defined(__x86_64__) && defined(__LP64__)
_Static_assert(sizeof(attn_sdpa_desc) == 448, "attn_sdpa_desc changed size");
_Static_assert(sizeof(attn_mha_desc) == 352, "attn_mha_desc changed size");
#endif

typedef struct swork {
    float *s;        /* sp.rows x bk score tile */
    int64_t *lo, *hi;
    float *mrow, *lrow, *corr;
    attn_kseg *seg;
    /* The tile's K and V rows as floats: the gathered short segments (fp32
     * K or V, from row 0) or every segment widened at its tile columns
     * (16-bit K or V); NULL when neither. */
    float *kb, *vb;
    int gather;      /* short segments gathered (p->sp.gather) */
    /* 16-bit Q and O (else NULL): an ordinary group's Q rows widened
     * (sp.rows x dk) and its O rows in fp32 (sp.rows x dv, local row r at
     * r dv). */
    float *qw, *ow;
    /* Global-query items (plans with global queries only, else NULL): the
     * real index of each gathered row, their Q rows (sp.rows x dk) and
     * their O accumulators (sp.rows x dv). */
    int64_t *idx;
    float *qg, *og;
    int64_t ahead;   /* kv length while a global-query item runs, else 0 */
} swork;

/* The layout row of block row I of query head h, or NULL without one. */
static const uint8_t *layout_row(const attn_sdpa_plan *p, const uint8_t *layout, int64_t h,
                                 int64_t I)
{
    if (!p->d.block_size)
        return NULL;
    const int64_t hh = p->d.layout_per_head ? h : 0;
    return layout + (hh * p->sp.nb + I) * p->sp.mb;
}

/* Widen rows j0 + [0, count) of a 16-bit matrix (row j at src + j ld) into
 * dst (count x width, dense). */
static void widen_rows(const attn_sdpa_plan *p, attn_dtype type, const uint16_t *src,
                       int64_t ld, int64_t j0, int64_t count, int64_t width, float *dst)
{
    for (int64_t j = 0; j < count; j++) {
        const uint16_t *row = src + (j0 + j) * ld;
        if (type == ATTN_DTYPE_F16)
            p->x.cvt->f16_to_f32(row, dst + j * width, width);
        else
            p->x.cvt->bf16_to_f32(row, dst + j * width, width);
    }
}

/* The K (is_v 0) or V rows of the segments of a tile widened into buf at
 * their tile columns (column c at buf + c width). */
static void widen_segments(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b,
                           int64_t hk, int is_v, const attn_kseg *seg, int64_t nseg, float *buf)
{
    const attn_sdpa_desc *d = &p->d;
    const attn_view v = is_v ? d->v : d->k;
    const int64_t width = is_v ? d->v_dim : d->qk_dim;
    const uint16_t *src = ATTN_VIEW_HEAD(is_v ? a->v16 : a->k16, v, b, hk);
    for (int64_t x = 0; x < nseg; x++)
        widen_rows(p, is_v ? d->v_type : d->k_type, src, v.seq, seg[x].j0, seg[x].len, width,
                   buf + seg[x].c0 * width);
}

/* Row i of (b, h) of O (any type) set to 0. */
static void zero_o_row(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b, int64_t h,
                       int64_t i)
{
    if (p->ow)
        memset(ATTN_VIEW_AT(a->o16, p->d.o, b, h, i), 0, (size_t)p->d.v_dim * sizeof(uint16_t));
    else
        memset(attn_sdpa_o_row(p, a, b, h, i), 0, (size_t)p->d.v_dim * sizeof(float));
}

/* Rows [r0, r1) of a tensor (b, h slice) asked for ahead of use (prefetch
 * only: no element is read), whatever its element type. */
static void prefetch_tensor(const void *f32, const uint16_t *h16, attn_dtype type, attn_view v,
                            int64_t b, int64_t h, int64_t r0, int64_t r1, int64_t width,
                            int write)
{
    const int64_t es = attn_dtype_size(type);
    const char *base = type == ATTN_DTYPE_F32 ? (const char *)f32 : (const char *)h16;
    attn_prefetch_bytes(base + (b * v.batch + h * v.head) * es, v.seq * es, r0, r1, width * es,
                        write);
}

/* One group of an item: rows [r0, r1) (local), all global queries or all
 * not, and their candidate-key stream.  Local row r is query row
 * idx[r] (a global-query item's gathered rows) or i0 + r (idx NULL); its
 * Q row is q + (r - r0) ldq and its O accumulator o + (r - r0) ldo: the
 * rows in place for an ordinary item, the per-thread copies for a
 * global-query item. */
typedef struct sgroup {
    int64_t r0, r1;
    int global;
    attn_krun kr;
    const int64_t *idx;
    int64_t i0;
    const float *q;
    float *o;
    int64_t ldq, ldo;
} sgroup;

static inline int64_t grow(const sgroup *g, int64_t r)
{
    return g->idx ? g->idx[r] : g->i0 + r;
}

/* The next group of ordinary item (b, h, i0) at or after local row r0
 * (rows < qlen only): a run of consecutive rows that are not global
 * queries (those belong to the global-query items and are skipped).  The
 * row ranges are in w->lo, w->hi.  Returns 0 when no rows are left. */
static int next_group(const attn_sdpa_plan *p, const attn_sdpa_args *a, const swork *w,
                      int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t kvlen,
                      int64_t r0, sgroup *g)
{
    const uint8_t *gq = p->d.use_global_q ? a->global_q + b * p->d.q_len : NULL;
    while (gq && r0 < rows && gq[i0 + r0])
        r0++;
    if (r0 >= rows)
        return 0;
    int64_t r1 = r0 + 1;
    while (r1 < rows && !(gq && gq[i0 + r1]))
        r1++;
    g->r0 = r0;
    g->r1 = r1;
    g->global = 0;
    g->idx = NULL;
    g->i0 = i0;
    /* (16-bit Q: run_sparse_item widens the group's rows into w->qw) */
    g->q = p->qw ? w->qw : ATTN_VIEW_AT(a->q, p->d.q, b, h, i0 + r0);
    g->o = p->ow ? w->ow + r0 * p->d.v_dim : attn_sdpa_o_row(p, a, b, h, i0 + r0);
    g->ldq = p->qw ? p->d.qk_dim : p->d.q.seq;
    g->ldo = p->ow ? p->d.v_dim : p->d.o.seq;
    g->kr.lay = layout_row(p, a->layout, h, p->d.block_size ? i0 / p->d.block_size : 0);
    g->kr.bs = p->d.block_size ? p->d.block_size : 1;
    g->kr.kvlen = kvlen;
    g->kr.j = 0;
    g->kr.gk = p->d.use_global_k ? a->global_k + b * p->d.kv_len : NULL;
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t r = r0; r < r1; r++)
        if (w->lo[r] < w->hi[r]) {
            if (w->lo[r] < lo) lo = w->lo[r];
            if (w->hi[r] > hi) hi = w->hi[r];
        }
    g->kr.wlo = lo == INT64_MAX ? 0 : lo;
    g->kr.whi = lo == INT64_MAX ? 0 : hi;
    return 1;
}

/* The span of global-query item rb: rows [*s0, *s1) (before the cut at
 * qlen), the layout block row *I, the item's rank *k in the span and the
 * span's number of items *nk. */
static void global_span(const attn_sdpa_plan *p, int64_t rb, int64_t *s0, int64_t *s1,
                        int64_t *I, int64_t *k, int64_t *nk)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t R = p->sp.rows;
    *s0 = 0;
    *s1 = d->q_len;
    *I = 0;
    if (d->block_size) {
        *I = rb * R / d->block_size;
        *s0 = *I * d->block_size;
        *s1 = *s0 + d->block_size < d->q_len ? *s0 + d->block_size : d->q_len;
    }
    *k = rb - *s0 / R;
    *nk = (*s1 - *s0 + R - 1) / R;
}

/* The rows of global-query item (b, h, rb): global queries of batch b
 * below qlen, taken in increasing order from a span of query rows (the
 * block row I of the item's rows with a layout, so that the rows share
 * their layout row; all n rows without one), chunk k of sp.rows of them,
 * where rb is the k-th item of its span.  Their indices go to w->idx;
 * returns their number (0 when the span has at most k sp.rows) and sets
 * the group over them (every key of the layout row, up to kvlen). */
static int64_t global_group(const attn_sdpa_plan *p, const attn_sdpa_args *a, const swork *w,
                            int64_t b, int64_t h, int64_t rb, int64_t qlen, int64_t kvlen,
                            sgroup *g)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t R = p->sp.rows;
    int64_t s0, s1, I, k, nk;
    global_span(p, rb, &s0, &s1, &I, &k, &nk);
    if (s1 > qlen)
        s1 = qlen;
    const uint8_t *gq = a->global_q + b * d->q_len;
    int64_t skip = k * R, rows = 0;
    for (int64_t i = s0 < s1 ? attn_next_nonzero(gq, s0, s1) : s1; i < s1 && rows < R;
         i = attn_next_nonzero(gq, i + 1, s1)) {
        if (skip > 0)
            skip--;
        else
            w->idx[rows++] = i;
    }
    g->r0 = 0;
    g->r1 = rows;
    g->global = 1;
    g->idx = w->idx;
    g->i0 = 0;
    g->q = w->qg;
    g->o = w->og;
    g->ldq = d->qk_dim;
    g->ldo = d->v_dim;
    g->kr.lay = layout_row(p, a->layout, h, I);
    g->kr.bs = d->block_size ? d->block_size : 1;
    g->kr.kvlen = kvlen;
    g->kr.j = 0;
    g->kr.gk = NULL;
    g->kr.wlo = 0;
    g->kr.whi = kvlen;
    return rows;
}

/* Window ranges of the item's rows [0, rows). */
static void item_ranges(const attn_sdpa_plan *p, swork *w, int64_t qlen, int64_t kvlen,
                        int64_t i0, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++)
        attn_row_range(p->d.align == ATTN_ALIGN_BOTTOM_RIGHT ? kvlen - qlen : 0, p->window_left,
                       p->window_right, kvlen, i0 + r, &w->lo[r], &w->hi[r]);
}

/* One tile of a group: its rows [g->r0, g->r1) of (b, h). */
static void run_tile(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w,
                     const sgroup *g, int64_t b, int64_t h, const attn_kseg *seg,
                     int64_t nseg, int64_t cols, int64_t cshort)
{
    const attn_sdpa_desc *d = &p->d;
    const attn_kernels *kern = p->x.kern;
    const int64_t bk = p->bk, hk = h / p->group, nr = g->r1 - g->r0;
    const int drop = d->mask_mode == ATTN_MASK_DROP_NONZERO;
    const float *q = g->q;
    const int ldq = (int)g->ldq, ldo = (int)g->ldo;
    const int64_t dk = d->qk_dim, dv = d->v_dim;
    /* 16-bit K or V: every segment's rows widened into w->kb (w->vb) at
     * their tile columns, where the sgemms then read them (ld dk or dv);
     * fp32: in place, the short segments gathered. */
    const int kw = d->k_type != ATTN_DTYPE_F32, vw = d->v_type != ATTN_DTYPE_F32;
    const float *k = kw ? NULL : ATTN_VIEW_HEAD(a->k, d->k, b, hk);
    const float *v = vw ? NULL : ATTN_VIEW_HEAD(a->v, d->v, b, hk);
    const int64_t ldk = kw ? dk : d->k.seq, ldv = vw ? dv : d->v.seq;
    float *o = g->o;
    const uint8_t *gk = g->kr.gk;

    const int64_t ng = cols - cshort;   /* gathered columns */
    /* V is first needed after the scores and softmax: ask for the rows
     * read in place (16-bit: every segment's) now, so that they come from
     * memory meanwhile.  A global-query item walks every key in order:
     * its next tile's K rows too. */
    for (int64_t x = 0; x < nseg; x++)
        if (vw || seg[x].c0 < cshort)
            prefetch_tensor(a->v, a->v16, d->v_type, d->v, b, hk, seg[x].j0,
                            seg[x].j0 + seg[x].len, dv, 0);
    if (w->ahead && nseg > 0) {
        const int64_t j0 = seg[nseg - 1].j0 + seg[nseg - 1].len;
        const int64_t j1 = j0 + bk < w->ahead ? j0 + bk : w->ahead;
        prefetch_tensor(a->k, a->k16, d->k_type, d->k, b, hk, j0, j1, dk, 0);
    }
    if (kw)
        widen_segments(p, a, b, hk, 0, seg, nseg, w->kb);
    for (int64_t x = 0; x < nseg; x++)
        if (seg[x].c0 < cshort)
            attn_gemm(p->x.gk, 1, (int)nr, (int)seg[x].len, (int)dk, p->scale, q, ldq,
                       kw ? w->kb + seg[x].c0 * dk : k + seg[x].j0 * ldk, (int)ldk, 0.0f,
                       w->s + seg[x].c0, (int)bk);
    if (ng > 0) {
        if (!kw)
            attn_gather_rows(w->kb, k, d->k.seq, dk, seg, nseg, cshort);
        attn_gemm(p->x.gk, 1, (int)nr, (int)ng, (int)dk, p->scale, q, ldq,
                   w->kb + (kw ? cshort * dk : 0), (int)dk, 0.0f, w->s + cshort, (int)bk);
    }

    for (int64_t r = g->r0; r < g->r1; r++) {
        const int64_t i = grow(g, r);
        float *sr = w->s + (r - g->r0) * bk;
        const float *brow = d->use_bias
            ? ATTN_VIEW_AT(a->bias, d->bias, b, h, i) : NULL;
        const uint8_t *mrow = d->mask_mode != ATTN_MASK_NONE
            ? ATTN_VIEW_AT(a->mask, d->mask, b, h, i) : NULL;
        float mt = -INFINITY;
        int nan = 0;
        for (int64_t x = 0; x < nseg; x++) {
            const int64_t j0 = seg[x].j0, j1 = j0 + seg[x].len;
            float *sc = sr + seg[x].c0;   /* sc[j - j0]: the score of key j */
            int64_t j = j0;
            if (seg[x].c0 >= cshort) {
                /* A short (gathered) segment: key by key, what prep_max
                 * does (bias, mask, max, NaN), without a call per key. */
                const int64_t lo = w->lo[r], hi = w->hi[r];
                for (; j < j1; j++) {
                    float *e = sc + (j - j0);
                    if (!g->global && !(j >= lo && j < hi) && !(gk && gk[j])) {
                        *e = -INFINITY;
                        continue;
                    }
                    if (brow)
                        *e += brow[j];
                    if (mrow && (mrow[j] != 0) == (drop != 0))
                        *e = -INFINITY;
                    if (*e != *e)
                        nan = 1;
                    else if (*e > mt)
                        mt = *e;
                }
            }
            while (j < j1) {
                int64_t stop;
                const int64_t va = attn_vis_next(gk, g->global, w->lo[r], w->hi[r], j, j1, &stop);
                for (; j < va; j++)
                    sc[j - j0] = -INFINITY;
                if (va >= j1)
                    break;
                float mx = kern->prep_max(sc + (va - j0), stop - va, brow ? brow + va : NULL,
                                          mrow ? mrow + va : NULL, drop);
                if (mx != mx)
                    nan = 1;
                else if (mx > mt)
                    mt = mx;
                j = stop;
            }
            if (d->want_probs)
                memcpy(attn_sdpa_probs_row(p, a, b, h, i) + j0, sc, (size_t)seg[x].len * sizeof(float));
        }
        if (nan)
            mt = NAN;
        if (attn_softmax_row_step(kern->exp_sum, sr, cols, mt, &w->mrow[r], &w->lrow[r],
                                  &w->corr[r]) &&
            p->dropout)
            for (int64_t x = 0; x < nseg; x++)
                kern->dropout_row(&p->drop, sr + seg[x].c0, b, h, i, seg[x].j0, seg[x].len);
    }
    for (int64_t r = g->r0; r < g->r1; r++)
        if (w->corr[r] != 1.0f)
            kern->scale(o + (r - g->r0) * ldo, dv, w->corr[r]);
    if (vw)
        widen_segments(p, a, b, hk, 1, seg, nseg, w->vb);
    for (int64_t x = 0; x < nseg; x++)
        if (seg[x].c0 < cshort)
            attn_gemm(p->x.gk, 0, (int)nr, (int)dv, (int)seg[x].len, 1.0f, w->s + seg[x].c0,
                       (int)bk, vw ? w->vb + seg[x].c0 * dv : v + seg[x].j0 * ldv, (int)ldv,
                       1.0f, o, ldo);
    if (ng > 0) {
        if (!vw)
            attn_gather_rows(w->vb, v, d->v.seq, dv, seg, nseg, cshort);
        attn_gemm(p->x.gk, 0, (int)nr, (int)dv, (int)ng, 1.0f, w->s + cshort, (int)bk,
                   w->vb + (vw ? cshort * dv : 0), (int)dv, 1.0f, o, ldo);
    }
}

/* Finish the rows of a group: O /= l (and a global-query item's rows
 * scattered to their places in O), lse, and the probabilities over the
 * group's candidate runs (the rest of each P row is 0 already). */
static void finish_group(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w,
                         const sgroup *g, int64_t b, int64_t h)
{
    const attn_sdpa_desc *d = &p->d;
    const attn_kernels *kern = p->x.kern;
    for (int64_t r = g->r0; r < g->r1; r++) {
        const int64_t i = grow(g, r);
        const float l = w->lrow[r];
        float *orow = g->o + (r - g->r0) * g->ldo;
        const int empty = l == 0.0f;
        const float lse = empty ? -INFINITY : w->mrow[r] + logf(l);
        if (empty)
            memset(orow, 0, (size_t)d->v_dim * sizeof(float));
        else
            kern->scale(orow, d->v_dim, 1.0f / l);
        if (p->ow)
            attn_sdpa_store_orow(p, a, b, h, i, orow);   /* (rounded once, here) */
        else if (g->idx)
            memcpy(attn_sdpa_o_row(p, a, b, h, i), orow, (size_t)d->v_dim * sizeof(float));
        if (d->want_lse)
            *attn_sdpa_lse_at(p, a, b, h, i) = lse;
        if (d->want_probs) {
            float *pr = attn_sdpa_probs_row(p, a, b, h, i);
            attn_krun kr = g->kr;
            kr.j = 0;
            int64_t s, e;
            while (attn_krun_next(&kr, &s, &e)) {
                if (lse == -INFINITY) {
                    memset(pr + s, 0, (size_t)(e - s) * sizeof(float));
                    continue;
                }
                kern->exp_store(pr + s, pr + s, e - s, lse);
                if (p->dropout && lse > -INFINITY)
                    kern->dropout_row(&p->drop, pr + s, b, h, i, s, e - s);
            }
        }
    }
}

/* Run a group's tiles and finish its rows. */
static void run_group(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w,
                      const sgroup *g, int64_t b, int64_t h)
{
    attn_krun kr = g->kr;
    int64_t s = 0, e = 0, nseg, cshort;
    int have = attn_krun_next(&kr, &s, &e);
    for (;;) {
        const int64_t cols =
            attn_fill_tile(&kr, &s, &e, &have, w->seg, p->bk, &nseg, w->gather, &cshort);
        if (cols == 0)
            break;
        run_tile(p, a, w, g, b, h, w->seg, nseg, cols, cshort);
    }
    finish_group(p, a, w, g, b, h);
}

/* Global-query item rb of (b, h): its rows' Q gathered into w->qg, run
 * against every key of their layout row into w->og, O scattered back by
 * finish_group.  It owns the O, P and lse rows of its global queries. */
static void run_global_item(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w,
                            int64_t b, int64_t h, int64_t rb)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t qlen = attn_sdpa_q_len(p, a, b), kvlen = attn_sdpa_kv_len(p, a, b);
    sgroup g;
    const int64_t rows = global_group(p, a, w, b, h, rb, qlen, kvlen, &g);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = w->idx[r];
        w->mrow[r] = -INFINITY;
        w->lrow[r] = 0.0f;
        w->lo[r] = w->hi[r] = 0;   /* unused: global rows see every candidate */
        if (p->qw)
            widen_rows(p, d->q_type, ATTN_VIEW_HEAD(a->q16, d->q, b, h), d->q.seq, i, 1,
                       d->qk_dim, w->qg + r * d->qk_dim);
        else
            memcpy(w->qg + r * d->qk_dim, ATTN_VIEW_AT(a->q, d->q, b, h, i),
                   (size_t)d->qk_dim * sizeof(float));
        memset(w->og + r * d->v_dim, 0, (size_t)d->v_dim * sizeof(float));
        if (d->want_probs)
            memset(attn_sdpa_probs_row(p, a, b, h, i), 0, (size_t)d->kv_len * sizeof(float));
    }
    if (rows > 0) {
        w->ahead = kvlen;
        run_group(p, a, w, &g, b, h);
        w->ahead = 0;
    }
}

/* Item it: ordinary items (b, h, block rb of sp.rows rows) first, then,
 * with global queries, the global-query items (b, h, rb). */
static void run_sparse_item(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w,
                            int64_t it)
{
    const attn_sdpa_desc *d = &p->d;
    const int glob_item = it >= p->sp.nreg;
    if (glob_item)
        it -= p->sp.nreg;
    const int64_t rb = it % p->sp.nrb, bh = it / p->sp.nrb;
    const int64_t b = bh / d->q_heads, h = bh % d->q_heads;
    if (glob_item) {
        run_global_item(p, a, w, b, h, rb);
        return;
    }
    const int64_t n = d->q_len, dv = d->v_dim;
    const int64_t i0 = rb * p->sp.rows;
    const int64_t i1 = i0 + p->sp.rows < n ? i0 + p->sp.rows : n;
    const int64_t qlen = attn_sdpa_q_len(p, a, b), kvlen = attn_sdpa_kv_len(p, a, b);
    const int64_t ie = i1 < qlen ? i1 : (i0 > qlen ? i0 : qlen);
    for (int64_t i = ie; i < i1; i++) {
        zero_o_row(p, a, b, h, i);
        if (d->want_probs)
            memset(attn_sdpa_probs_row(p, a, b, h, i), 0, (size_t)d->kv_len * sizeof(float));
        if (d->want_lse)
            *attn_sdpa_lse_at(p, a, b, h, i) = -INFINITY;
    }
    const int64_t rows = ie - i0;
    if (rows <= 0)
        return;
    const uint8_t *gq = d->use_global_q ? a->global_q + b * n : NULL;
    item_ranges(p, w, qlen, kvlen, i0, rows);
    for (int64_t r = 0; r < rows; r++) {
        w->mrow[r] = -INFINITY;
        w->lrow[r] = 0.0f;
        if (gq && gq[i0 + r])
            continue;   /* a global-query item's row */
        memset(p->ow ? w->ow + r * dv : attn_sdpa_o_row(p, a, b, h, i0 + r), 0,
               (size_t)dv * sizeof(float));
        if (d->want_probs)
            memset(attn_sdpa_probs_row(p, a, b, h, i0 + r), 0, (size_t)d->kv_len * sizeof(float));
    }
    /* The next block of rows reads the keys after this one's window and
     * its own Q and O rows: ask for them now (into L2), so that a long
     * sequence's rows come from memory while this block computes. */
    if (ie < qlen && !d->block_size) {
        const int64_t hk = h / p->group, nr = p->sp.rows;
        const int64_t j0 = w->hi[rows - 1] < kvlen ? w->hi[rows - 1] : kvlen;
        const int64_t j1 = j0 + nr < kvlen ? j0 + nr : kvlen;
        const int64_t n1 = ie + nr < qlen ? ie + nr : qlen;
        prefetch_tensor(a->k, a->k16, d->k_type, d->k, b, hk, j0, j1, d->qk_dim, 0);
        prefetch_tensor(a->v, a->v16, d->v_type, d->v, b, hk, j0, j1, dv, 0);
        prefetch_tensor(a->q, a->q16, d->q_type, d->q, b, h, ie, n1, d->qk_dim, 0);
        prefetch_tensor(a->o, a->o16, d->o_type, d->o, b, h, ie, n1, dv, 1);
    }
    sgroup g;
    for (int64_t r0 = 0; next_group(p, a, w, b, h, i0, rows, kvlen, r0, &g); r0 = g.r1) {
        if (p->qw)
            widen_rows(p, d->q_type, ATTN_VIEW_HEAD(a->q16, d->q, b, h), d->q.seq,
                       i0 + g.r0, g.r1 - g.r0, d->qk_dim, w->qw);
        run_group(p, a, w, &g, b, h);
    }
}

typedef struct sorder {
    int64_t cost, item;
} sorder;

/* The cost of an item into *out: rows x candidate keys, summed over its
 * groups.  For a global-query item the first of its span fills the
 * entries of the whole span (out[0 .. items of the span)), the others
 * write nothing. */
static void item_cost(const attn_sdpa_plan *p, const attn_sdpa_args *a, swork *w, int64_t it,
                      sorder *out)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t it0 = it;
    const int glob_item = it >= p->sp.nreg;
    if (glob_item)
        it -= p->sp.nreg;
    const int64_t rb = it % p->sp.nrb, bh = it / p->sp.nrb;
    const int64_t b = bh / d->q_heads, h = bh % d->q_heads;
    const int64_t qlen = attn_sdpa_q_len(p, a, b), kvlen = attn_sdpa_kv_len(p, a, b);
    sgroup g;
    if (glob_item) {
        /* The span's first item writes the entries of all the span's
         * items (one scan of the flags); the others write nothing. */
        int64_t s0, s1, I, k, nk;
        global_span(p, rb, &s0, &s1, &I, &k, &nk);
        if (k != 0)
            return;
        const uint8_t *gq = a->global_q + b * d->q_len;
        int64_t cnt = 0;
        if (s1 > qlen)
            s1 = qlen;
        for (int64_t i = s0 < s1 ? attn_next_nonzero(gq, s0, s1) : s1; i < s1;
             i = attn_next_nonzero(gq, i + 1, s1))
            cnt++;
        int64_t keys = 0;
        if (cnt > 0) {
            global_group(p, a, w, b, h, rb, 0, kvlen, &g);   /* qlen 0: no rows, the keys */
            int64_t s, e;
            while (attn_krun_next(&g.kr, &s, &e))
                keys += e - s;
        }
        for (int64_t x = 0; x < nk; x++) {
            const int64_t rows = cnt - x * p->sp.rows < 0 ? 0
                : cnt - x * p->sp.rows < p->sp.rows ? cnt - x * p->sp.rows : p->sp.rows;
            /* rows x (keys + 1): the row pass counts too, and an item has
             * cost 0 exactly when it has no rows (then it is not run) */
            out[x].cost = rows * (keys + 1);
            out[x].item = it0 + x;
        }
        return;
    }
    const int64_t i0 = rb * p->sp.rows;
    const int64_t i1 = i0 + p->sp.rows < d->q_len ? i0 + p->sp.rows : d->q_len;
    const int64_t rows = (i1 < qlen ? i1 : qlen) - i0;
    out->item = it0;
    out->cost = 0;
    if (rows <= 0)
        return;
    item_ranges(p, w, qlen, kvlen, i0, rows);
    int64_t cost = 0;
    for (int64_t r0 = 0; next_group(p, a, w, b, h, i0, rows, kvlen, r0, &g); r0 = g.r1) {
        int64_t s, e, keys = 0;
        while (attn_krun_next(&g.kr, &s, &e))
            keys += e - s;
        cost += (g.r1 - g.r0) * keys;
    }
    out->cost = cost;
}

/* a before b: heavier first, then lower index (a total order, so the
 * sorted order is unique). */
static int order_before(const sorder *a, const sorder *b)
{
    return a->cost != b->cost ? a->cost > b->cost : a->item < b->item;
}

static void sift_down(sorder *v, int64_t root, int64_t n)
{
    for (;;) {
        int64_t c = 2 * root + 1;
        if (c >= n)
            return;
        /* a max-heap of "comes last" */
        if (c + 1 < n && order_before(&v[c], &v[c + 1]))
            c++;
        if (!order_before(&v[root], &v[c]))
            return;
        const sorder t = v[root];
        v[root] = v[c];
        v[c] = t;
        root = c;
    }
}

/* Heapsort: no allocation (qsort may allocate), O(n log n). */
static void sort_order(sorder *v, int64_t n)
{
    for (int64_t k = n / 2; k-- > 0;)
        sift_down(v, k, n);
    for (int64_t end = n - 1; end > 0; end--) {
        const sorder t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0, end);
    }
}

typedef struct sparse_ctx {
    const attn_sdpa_plan *p;
    const attn_sdpa_args *a;
    void *ws;
    sorder *order;
} sparse_ctx;

static void sparse_body(void *arg, int tid)
{
    const sparse_ctx *c = arg;
    const attn_sdpa_plan *p = c->p;
    char *base = (char *)c->ws + (size_t)tid * p->ws.thread;
    swork w;
    w.s = (float *)(void *)base;
    w.lo = (int64_t *)(void *)(base + p->ws.ranges);
    w.hi = w.lo + p->bq;
    w.mrow = (float *)(void *)(base + p->ws.state);
    w.lrow = w.mrow + p->vrows;
    w.corr = w.lrow + p->vrows;
    w.seg = (attn_kseg *)(void *)(base + p->ws.seg);
    w.gather = p->sp.gather;
    w.kb = p->sp.gather || p->d.k_type != ATTN_DTYPE_F32 ? (float *)(void *)(base + p->ws.kbuf)
                                                         : NULL;
    w.vb = p->sp.gather || p->d.v_type != ATTN_DTYPE_F32 ? (float *)(void *)(base + p->ws.vbuf)
                                                         : NULL;
    w.qw = p->qw ? (float *)(void *)(base + p->ws.qbuf) : NULL;
    w.ow = p->ow ? (float *)(void *)(base + p->ws.obuf) : NULL;
    w.idx = p->d.use_global_q ? w.hi + p->bq : NULL;
    w.qg = p->d.use_global_q ? (float *)(void *)(base + p->ws.qg) : NULL;
    w.og = p->d.use_global_q ? w.qg + p->sp.rows * p->d.qk_dim : NULL;
    w.ahead = 0;
    const int64_t nitems = p->nitems;
    sorder *order = c->order;
    /* The cost of every item, then the order (heaviest first, ties by
     * index: a pure function of the inputs), then the items by a dynamic
     * schedule.  Which thread runs an item changes nothing in its
     * outputs. */
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t it = 0; it < nitems; it++)
        item_cost(p, c->a, &w, it, order + it);
#if ATTN_HAVE_OPENMP
#pragma omp single
#endif
    sort_order(order, nitems);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t k = 0; k < nitems; k++)
        if (order[k].item < p->sp.nreg || order[k].cost > 0)   /* empty global items */
            run_sparse_item(p, c->a, &w, order[k].item);
}

void attn_sparse_forward(const attn_sdpa_plan *p, const attn_sdpa_args *a, void *ws)
{
    sparse_ctx ctx = { p, a, ws, (sorder *)(void *)((char *)ws + p->ws.order) };
    attn_parallel(p->x.blas, p->x.nthreads, p->nitems, sparse_body, (void *)&ctx);
}
