/* SDPA forward: work items are (batch, query head, block of query rows); each
 * runs over the keys its rows can see in tiles of ATTN_TILE_K, with an online
 * softmax:
 *
 *   S    = scale * Q_blk K_tile^T                     (sgemm, K read in place)
 *   S   += bias, hidden positions -> -INFINITY        (row loop)
 *   m'   = max(m, rowmax S);  c = exp(m - m')
 *   S    = exp(S - m');  l = c * l + rowsum S          (vector kernels)
 *   O    = c * O + S V_tile                            (sgemm into O itself)
 *
 * and at the end O /= l, lse = m + log l.  When probabilities are requested
 * the masked scores are also copied to P as they are made, and turned into
 * exp(s - lse) once lse is known, so O never depends on that option.  Every
 * row is computed by the same sequence of operations whatever the thread
 * count, so results are bitwise identical for any number of threads. */
#include "internal.h"
#include "blas.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if ATTN_HAVE_OPENMP
#include <omp.h>
#endif

typedef struct work {
    float *s;        /* bq x bk score tile */
    float *mrow;     /* running max per row */
    float *lrow;     /* running sum per row */
    float *corr;     /* rescale of O per row for the current tile */
    int64_t *lo;     /* visible key range [lo, hi) per row */
    int64_t *hi;
} work;

static void zero_rows(float *base, int64_t rows, int64_t cols, int64_t ld)
{
    for (int64_t r = 0; r < rows; r++)
        memset(base + r * ld, 0, (size_t)cols * sizeof(float));
}

/* Rows [i0, i1) that carry no attention: output 0, P 0, lse -INFINITY. */
static void write_empty_rows(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                             int64_t b, int64_t h, int64_t i0, int64_t i1)
{
    const attn_sdpa_desc *d = &p->d;
    if (i1 <= i0)
        return;
    zero_rows(a->o + b * d->o.batch + h * d->o.head + i0 * d->o.seq, i1 - i0, d->v_dim, d->o.seq);
    if (d->want_probs)
        zero_rows(a->probs + b * d->probs.batch + h * d->probs.head + i0 * d->probs.seq,
                  i1 - i0, d->kv_len, d->probs.seq);
    if (d->want_lse)
        for (int64_t i = i0; i < i1; i++)
            a->lse[b * d->lse.batch + h * d->lse.head + i * d->lse.seq] = -INFINITY;
}

static void run_block(const attn_sdpa_plan *p, const attn_sdpa_args *a, work *w,
                      int64_t b, int64_t h, int64_t qb)
{
    const attn_sdpa_desc *d = &p->d;
    const attn_kernels *kern = p->kern;
    const int64_t n = d->q_len, m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    const int64_t hk = h / p->group;
    const int64_t i0 = qb * p->bq;
    const int64_t i1 = i0 + p->bq < n ? i0 + p->bq : n;
    const int64_t qlen = d->use_q_lens ? a->q_lens[b] : n;
    const int64_t kvlen = d->use_kv_lens ? a->kv_lens[b] : m;
    const int64_t ie = i1 < qlen ? i1 : (i0 > qlen ? i0 : qlen);

    /* Padding query rows are never read. */
    write_empty_rows(p, a, b, h, ie, i1);
    const int64_t rows = ie - i0;
    if (rows <= 0)
        return;

    /* Visible key range of each row from the window and the key length; the
     * block reads only the union of these ranges, which is contiguous since
     * both bounds grow with i.  Bottom-right alignment uses this batch's
     * lengths: its last valid query sees its last valid key.  The window
     * bounds were clamped to n + m at plan time, so nothing overflows. */
    const int64_t shift = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? kvlen - qlen : 0;
    int64_t jlo = INT64_MAX, jhi = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t diag = i0 + r + shift;
        int64_t lo = p->window_left >= 0 ? diag - p->window_left : 0;
        int64_t hi = p->window_right >= 0 ? diag + p->window_right + 1 : kvlen;
        if (lo < 0) lo = 0;
        if (hi > kvlen) hi = kvlen;
        if (lo >= hi) lo = hi = 0;
        else {
            if (lo < jlo) jlo = lo;
            if (hi > jhi) jhi = hi;
        }
        w->lo[r] = lo;
        w->hi[r] = hi;
        w->mrow[r] = -INFINITY;
        w->lrow[r] = 0.0f;
    }

    const float *q = a->q + b * d->q.batch + h * d->q.head + i0 * d->q.seq;
    const float *k = a->k + b * d->k.batch + hk * d->k.head;
    const float *v = a->v + b * d->v.batch + hk * d->v.head;
    float *o = a->o + b * d->o.batch + h * d->o.head + i0 * d->o.seq;
    float *prob = d->want_probs ? a->probs + b * d->probs.batch + h * d->probs.head + i0 * d->probs.seq : NULL;
    const uint8_t *mask = d->mask_mode != ATTN_MASK_NONE
                              ? a->mask + b * d->mask.batch + h * d->mask.head + i0 * d->mask.seq : NULL;
    const uint8_t drop_if = d->mask_mode == ATTN_MASK_DROP_NONZERO;
    const float *bias = d->use_bias ? a->bias + b * d->bias.batch + h * d->bias.head + i0 * d->bias.seq : NULL;
    const int64_t bk = p->bk;
    float *s = w->s;
    int first = 1;

    for (int64_t t = jlo; t < jhi; t += bk) {
        const int64_t nt = jhi - t < bk ? jhi - t : bk;
        attn_sgemm(1, (int)rows, (int)nt, (int)dk, p->scale, q, (int)d->q.seq,
                   k + t * d->k.seq, (int)d->k.seq, 0.0f, s, (int)bk);
        for (int64_t r = 0; r < rows; r++) {
            float *sr = s + r * bk;
            int64_t c0 = w->lo[r] - t, c1 = w->hi[r] - t;
            if (c0 < 0) c0 = 0;
            if (c1 > nt) c1 = nt;
            if (c1 < c0) c1 = c0;
            for (int64_t j = 0; j < c0; j++) sr[j] = -INFINITY;
            for (int64_t j = c1; j < nt; j++) sr[j] = -INFINITY;
            if (bias) {
                const float *br = bias + r * d->bias.seq + t;
                for (int64_t j = c0; j < c1; j++) sr[j] += br[j];
            }
            if (mask) {
                const uint8_t *mr = mask + r * d->mask.seq + t;
                for (int64_t j = c0; j < c1; j++)
                    if ((mr[j] != 0) == drop_if) sr[j] = -INFINITY;
            }
            if (prob)
                memcpy(prob + r * d->probs.seq + t, sr, (size_t)nt * sizeof(float));
            float mt = kern->row_max(sr + c0, c1 - c0);
            float mold = w->mrow[r];
            float mnew = mt > mold ? mt : mold;
            if (mnew == -INFINITY) {
                /* Nothing visible yet: contributes nothing. */
                memset(sr, 0, (size_t)nt * sizeof(float));
                w->corr[r] = 1.0f;
                continue;
            }
            float c = mold == -INFINITY ? 0.0f : attn_exp_scalar(mold - mnew);
            float sum = kern->exp_sum(sr, nt, mnew);
            w->lrow[r] = w->lrow[r] * c + sum;
            w->mrow[r] = mnew;
            w->corr[r] = c;
        }
        if (!first)
            for (int64_t r = 0; r < rows; r++)
                if (w->corr[r] != 1.0f)
                    kern->scale(o + r * d->o.seq, dv, w->corr[r]);
        attn_sgemm(0, (int)rows, (int)dv, (int)nt, 1.0f, s, (int)bk,
                   v + t * d->v.seq, (int)d->v.seq, first ? 0.0f : 1.0f, o, (int)d->o.seq);
        first = 0;
    }

    for (int64_t r = 0; r < rows; r++) {
        float *orow = o + r * d->o.seq;
        float l = w->lrow[r];
        /* l stays exactly 0 when no key was visible; NaN input gives NaN. */
        int empty = l == 0.0f;
        float lse = empty ? -INFINITY : w->mrow[r] + logf(l);
        if (empty || first)
            memset(orow, 0, (size_t)dv * sizeof(float));
        else
            kern->scale(orow, dv, 1.0f / l);
        if (d->want_lse)
            a->lse[b * d->lse.batch + h * d->lse.head + (i0 + r) * d->lse.seq] = lse;
        if (prob) {
            float *pr = prob + r * d->probs.seq;
            int64_t lo = empty ? 0 : w->lo[r], hi = empty ? 0 : w->hi[r];
            memset(pr, 0, (size_t)lo * sizeof(float));
            if (hi > lo)
                kern->exp_store(pr + lo, pr + lo, hi - lo, lse);
            memset(pr + hi, 0, (size_t)(m - hi) * sizeof(float));
        }
    }
}

static attn_status check_args(const attn_sdpa_plan *p, const attn_sdpa_args *a)
{
    const attn_sdpa_desc *d = &p->d;
    if (!a->q || !a->k || !a->v || !a->o)
        return ATTN_ERR_NULL_ARGUMENT;
    const struct { int used; const void *ptr; } opt[] = {
        { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->want_probs, a->probs }, { d->want_lse, a->lse },
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        if (opt[i].used && !opt[i].ptr)
            return ATTN_ERR_NULL_ARGUMENT;
        if (!opt[i].used && opt[i].ptr)
            return ATTN_ERR_ARGUMENT_MISMATCH;
    }
    for (int64_t b = 0; b < d->batch; b++) {
        if (d->use_kv_lens && (a->kv_lens[b] < 0 || a->kv_lens[b] > d->kv_len))
            return ATTN_ERR_BAD_LENGTH;
        if (d->use_q_lens && (a->q_lens[b] < 0 || a->q_lens[b] > d->q_len))
            return ATTN_ERR_BAD_LENGTH;
    }
    return ATTN_OK;
}

attn_status attn_sdpa_execute(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                              void *workspace, size_t workspace_bytes)
{
    if (!p || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = check_args(p, a);
    if (st != ATTN_OK)
        return st;
    void *ws = workspace;
    if (ws) {
        if (workspace_bytes < p->ws_bytes)
            return ATTN_ERR_WORKSPACE_TOO_SMALL;
        if ((uintptr_t)ws % ATTN_ALIGNMENT)
            return ATTN_ERR_WORKSPACE_ALIGNMENT;
    } else {
        ws = aligned_alloc(ATTN_ALIGNMENT, p->ws_bytes);
        if (!ws)
            return ATTN_ERR_OUT_OF_MEMORY;
    }

    const int64_t bh = p->d.batch * p->d.q_heads;
    const int64_t nitems = p->nitems;
    attn_blas_scope scope;
    attn_blas_scope_enter(&scope);
#if ATTN_HAVE_OPENMP
#pragma omp parallel num_threads(p->nthreads) if (p->nthreads > 1 && nitems > 1)
#endif
    {
        int tid = 0;
#if ATTN_HAVE_OPENMP
        /* Per-task ICV: the BLAS (OpenBLAS's OpenMP build) sees one thread
         * here; no effect outside this region. */
        omp_set_num_threads(1);
        tid = omp_get_thread_num();
#endif
        int blas_saved = attn_blas_thread_enter(&scope);
        char *base = (char *)ws + (size_t)tid * p->ws_thread;
        const size_t tile = ((size_t)p->bq * (size_t)p->bk * sizeof(float) + ATTN_ALIGNMENT - 1) /
                            ATTN_ALIGNMENT * ATTN_ALIGNMENT;
        work w;
        w.s = (float *)base;
        w.lo = (int64_t *)(void *)(base + tile);
        w.hi = w.lo + p->bq;
        w.mrow = (float *)(void *)(w.hi + p->bq);
        w.lrow = w.mrow + p->bq;
        w.corr = w.lrow + p->bq;
        /* Heaviest blocks first (the last query blocks under a causal
         * mask): a dynamic schedule then balances the triangle. */
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t it = 0; it < nitems; it++) {
            int64_t qb = p->nqblocks - 1 - it / bh;
            int64_t r = it % bh;
            run_block(p, a, &w, r / p->d.q_heads, r % p->d.q_heads, qb);
        }
        attn_blas_thread_leave(&scope, blas_saved);
    }
    attn_blas_scope_leave(&scope);
    if (!workspace)
        free(ws);
    return ATTN_OK;
}
