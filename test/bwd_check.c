/*
 * bwd_check.c -- see bwd_check.h.  Moved out of sdpa_bwd.c (its
 * cmp_tensor and bwd_compare) so that the fuzz target runs the same check.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwd_check.h"
#include "reference.h"

typedef struct chk {
    bwd_report_fn rep;
    void *ctx;
    long bad;
} chk;

static void bad(chk *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(chk *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->bad++;
    if (c->rep)
        c->rep(c->ctx, msg);
}

static void upd(double e, double tol, double *maxerr, double *ratio)
{
    if (isfinite(e) && e > *maxerr)
        *maxerr = e;
    double q = e / tol;
    if (isfinite(q) && q > *ratio)
        *ratio = q;
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static const float *at(const bwd_buf *o, int64_t b, int64_t h, int64_t s)
{
    return o->ptr + b * o->v.batch + h * o->v.head + s * o->v.seq;
}

/* Every element of o's buffer outside the view holds the sentinel. */
static void outside(chk *c, const char *name, const bwd_buf *o, uint32_t sentinel)
{
    if (!o->base)
        return;
    unsigned char *map = calloc(o->count ? o->count : 1, 1);
    if (!map) {
        bad(c, "out of memory");
        return;
    }
    const size_t off = (size_t)(o->ptr - (const float *)(const void *)o->base);
    for (int64_t b = 0; b < o->B; b++)
        for (int64_t h = 0; h < o->H; h++)
            for (int64_t s = 0; s < o->S; s++)
                for (int64_t x = 0; x < o->D; x++)
                    map[off + (size_t)(b * o->v.batch + h * o->v.head + s * o->v.seq + x)] = 1;
    for (size_t x = 0; x < o->count; x++)
        if (!map[x] && o->base[x] != sentinel)
            bad(c, "%s: element %zu outside the view was written (0x%08x)", name, x,
                (unsigned)o->base[x]);
    free(map);
}

/* Compare the view elements of o with the dense reference ref/tol
 * [B][H][S][D]; zero[(b, h, s)] (or NULL) marks rows that must be +0, and
 * zero_elem[e] (or NULL) single elements. */
static void cmp_tensor(chk *c, const char *name, const bwd_buf *o, const double *ref,
                       const double *tol, const unsigned char *zero,
                       const unsigned char *zero_elem, double *maxerr, double *ratio,
                       uint32_t sentinel)
{
    for (int64_t b = 0; b < o->B; b++)
        for (int64_t h = 0; h < o->H; h++)
            for (int64_t s = 0; s < o->S; s++) {
                const size_t row = (size_t)((b * o->H + h) * o->S + s);
                const float *g = at(o, b, h, s);
                for (int64_t x = 0; x < o->D; x++) {
                    const size_t e = row * (size_t)o->D + (size_t)x;
                    if ((zero && zero[row]) || (zero_elem && zero_elem[e])) {
                        if (fbits(g[x]) != 0)
                            bad(c, "%s[%lld][%lld][%lld][%lld] = %.9g (0x%08x), must be +0",
                                name, (long long)b, (long long)h, (long long)s, (long long)x,
                                (double)g[x], (unsigned)fbits(g[x]));
                        continue;
                    }
                    double e_ = fabs((double)g[x] - ref[e]);
                    upd(e_, tol[e], maxerr, ratio);
                    if (!(e_ <= tol[e]))
                        bad(c, "%s[%lld][%lld][%lld][%lld] = %.9g, ref %.9g, err %.3g > tol %.3g",
                            name, (long long)b, (long long)h, (long long)s, (long long)x,
                            (double)g[x], ref[e], e_, tol[e]);
                }
            }
    outside(c, name, o, sentinel);
}

long bwd_check(const attn_sdpa_desc *d, const attn_sdpa_args *fwd_args, const float *d_o,
               attn_view d_o_view, const bwd_buf *dq, const bwd_buf *dk, const bwd_buf *dv,
               const bwd_buf *dbias, uint32_t sentinel, bwd_report_fn rep, void *ctx,
               bwd_err *err)
{
    return bwd_check_types(d, fwd_args, d_o, d_o_view, dq, dk, dv, dbias, sentinel, rep, ctx, err,
                           NULL);
}

long bwd_check_types(const attn_sdpa_desc *d, const attn_sdpa_args *fwd_args, const float *d_o,
                     attn_view d_o_view, const bwd_buf *dq, const bwd_buf *dk, const bwd_buf *dv,
                     const bwd_buf *dbias, uint32_t sentinel, bwd_report_fn rep, void *ctx,
                     bwd_err *err, const ref_bwd_types *ty)
{
    chk c = {rep, ctx, 0};
    ref_bwd_out g;
    if (ref_sdpa_bwd_alloc(d, fwd_args, d_o, d_o_view, dbias != NULL, ty, &g)) {
        bad(&c, "backward reference: out of memory");
        return c.bad;
    }
    cmp_tensor(&c, "dQ", dq, g.dq, g.dq_tol, g.row_empty, NULL, &err->dq, &err->ratio,
               sentinel);
    const size_t nkv = (size_t)(d->batch * d->kv_heads * d->kv_len);
    unsigned char *unseen = malloc(nkv ? nkv : 1);
    if (unseen) {
        for (size_t x = 0; x < nkv; x++)
            unseen[x] = !g.kv_seen[x];
        cmp_tensor(&c, "dK", dk, g.dk, g.dk_tol, unseen, NULL, &err->dk, &err->ratio, sentinel);
        cmp_tensor(&c, "dV", dv, g.dv, g.dv_tol, unseen, NULL, &err->dv, &err->ratio, sentinel);
        free(unseen);
    } else {
        bad(&c, "out of memory");
    }
    if (dbias) {
        /* elements no visible position sums into: +0 */
        const size_t tot = (size_t)(dbias->B * dbias->H * dbias->S * dbias->D);
        double *val = malloc(tot * sizeof *val), *tol = malloc(tot * sizeof *tol);
        int64_t *cnt = malloc(tot * sizeof *cnt);
        unsigned char *zero = malloc(tot);
        if (val && tol && cnt && zero) {
            ref_dbias_reduce(d, &g, val, tol, cnt);
            for (size_t x = 0; x < tot; x++)
                zero[x] = cnt[x] == 0;
            cmp_tensor(&c, "dBias", dbias, val, tol, NULL, zero, &err->dbias, &err->ratio,
                       sentinel);
        } else {
            bad(&c, "out of memory");
        }
        free(val);
        free(tol);
        free(cnt);
        free(zero);
    }
    ref_bwd_out_free(&g);
    return c.bad;
}
