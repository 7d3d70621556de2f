/*
 * sdpa_bwd.c -- CHK_BWD, the check of attn_sdpa_backward over the rows of
 * the SDPA table (see sdpa_cases.h, test_sdpa.c).
 *
 * For a row: its instance (or, when the row has no logsumexp, the same case
 * with want_lse = 1, which draws the same data) runs the library forward
 * for O and lse; a dO is drawn (uniform [-1, 1], in a buffer of O's view;
 * NaN in the gaps, and with `poison` NaN in the dO and O rows of padded
 * queries); dQ, dK, dV (and dBias when the row has a bias: want_dbias) go
 * to sentinel-filled buffers in views of the row's output layout (BHSD,
 * BSHD or random order with gaps).  Then:
 *   - (bwd_check.c) every gradient element within the bound of
 *     reference.c's backward error model (ref_sdpa_bwd, summarized below)
 *     of the float64 reference, with exact (bitwise +0) zeros for dQ of padded or empty rows, dK and
 *     dV of K/V rows no query sees, dBias elements no visible position
 *     sums into; every element outside the views keeps the sentinel;
 *   - threads 1, 2, 3, 4: the same bits in every output buffer;
 *   - the case with `poison` toggled (rows hiding something by lengths or
 *     window): the same bits.
 *
 * Tolerances (reference.c, ref_sdpa_bwd; u = 2^-24, worst case, first
 * order; p_b the relative error of P recomputed from the fp32 lse):
 *   E_s   = (dk + 6) u s_abs,   p_b = expm1(E_s + lse_tol) + 20 u
 *   D_err = sum_d |dO_d| (o_rel o_abs_d + (dv + 2) u |O_d|)
 *   E_dS  = P [(p_b + 3u)(|dP| + |D|) + (dv + 2) u sum_d |dO_d V_jd| + D_err]
 *           + 2^-126 (|dP| + |D|)
 *   |ddQ_id|  <= 1.25 |scale| sum_j (E_dS_ij + (nvis_i + 3) u |dS_ij|) |K_jd|
 *   |ddK_jd|  <= 1.25 |scale| sum_(h,i) (E_dS_ij + (N_j + 3) u |dS_ij|) |Q_id|
 *   |ddV_jd|  <= 1.25 sum_(h,i) ((p_b + (N_j + 2) u) P_ij + 2^-126) |dO_id|
 *   |ddBias|  <= 1.25 sum (E_dS + 2u |dS|) + 1.25 (c + 1) u sum |dS|
 *                (over the c visible positions a broadcast element sums)
 * (+1e-30 each), N_j the number of (head, row) pairs of the GQA group that
 * see key j, o_rel and lse_tol the forward's bounds (ref_row_tolerance).
 *
 * 16-bit rows (dtype BF16 or F16: the types suite).  The instance's Q, K,
 * V are already rounded to the type (harness.h); dO is drawn as above and
 * rounded too, O is the 16-bit forward's, and attn gets uint16 twins of all
 * of them through args16 (dQ, dK, dV likewise, filled with a 16-bit NaN
 * sentinel and widened back afterwards, so every check reads fp32 buffers
 * as for F32 rows).  The float64 reference runs on the rounded values, so
 * only what attn rounds itself is added (ref_bwd_types; u_t = tdtype_u, 2^-7
 * BF16 and 2^-10 F16: twice the unit roundoff, which leaves slack x2 on
 * each term below, first order, the products of two terms dropped):
 *   - O as the backward reads it: |O16 - o| <= (o_rel + u_t) o_abs (its
 *     rounding to the type, relative to |O| <= o_abs = sum_j p_j |V_j|),
 *     plus u_t o_abs more at BF16 (the forward's P rounded for P V); F16
 *     also an absolute 2^-24 (its subnormal spacing).  It enters D_err as
 *     sum_d |dO_d| (extra o_rel o_abs_d + extra absolute), so E_dS, and
 *     through it every gradient and dBias;
 *   - BF16 products (assumed for every BF16 row: the BLAS engine's widened
 *     path then gets a looser bound): P' rounded to BF16 for dV adds
 *     u_t P'_ij |dO_i| to each term of dV's bound, and dS rounded for dK
 *     and dQ adds u_t |dS_ij| |Q_i| (|K_j|) |scale| to each term of theirs.
 *     Their products are exact and their sums fp32 with FTZ (a flushed sum
 *     or product moves a result by < 2^-126 per term, inside the 1e-30);
 *   - each gradient's own rounding, once: u_t |g|, bounded by u_t times the
 *     sum of its terms' magnitudes (the reference's kc, vc and dQ's sum:
 *     |scale| sum |dS||Q|, sum P' |dO|, |scale| sum |dS||K|), plus 2^-24
 *     absolute at F16.  dBias stays fp32 (from the fp32 dS): only D's
 *     term.
 * With those, the fp32 bounds above hold as they are.  Thread counts and
 * the poisoned twin compare the widened bits (equal iff the 16-bit ones
 * are, NaN payloads aside).  Sparse rows at 16-bit (the widened products
 * always, so the BF16 bound above is loose for them) are also checked
 * bitwise: the fp32 backward on the same fp32 values, each gradient
 * rounded to the type, gives the same bits (bwd_widened; not with MKL).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwd_check.h"
#include "reference.h"
#include "sdpa_cases.h"

/* Rows whose float64 backward reference would take long: skipped. */
#define BWD_MAX_WORK 4e8

int bwd_applies(const trow *r)
{
    const tcase *c = &r->c;
    double work = (double)c->B * (double)c->Hq * (double)c->n * (double)c->m *
                  (double)(2 * c->dk + 2 * c->dv);
    return work <= BWD_MAX_WORK;
}

/* Sizes [B][H][S][D] of a view. */
typedef struct vshape {
    int64_t B, H, S, D;
} vshape;

static size_t vextent(attn_view v, vshape z)
{
    return (size_t)((z.B - 1) * v.batch + (z.H - 1) * v.head + (z.S - 1) * v.seq + z.D);
}

/* A view of shape z: order 0 [B][H][S][D], 1 [B][S][H][D], gaps ps, ph, pb. */
static attn_view mk(int order, vshape z, int64_t ps, int64_t ph, int64_t pb)
{
    attn_view v;
    if (order == 0) {
        v.seq = z.D + ps;
        v.head = z.S * v.seq + ph;
        v.batch = z.H * v.head + pb;
    } else {
        v.head = z.D + ph;
        v.seq = z.H * v.head + ps;
        v.batch = z.S * v.seq + pb;
    }
    return v;
}

static attn_view out_view(int out_layout, vshape z, trng *r)
{
    if (out_layout == OUT_BSHD)
        return mk(1, z, 0, 0, 0);
    if (out_layout == OUT_PADDED) {
        int order = (int)trng_int(r, 0, 1);
        int64_t ps = trng_int(r, 1, 5), ph = trng_int(r, 1, 7), pb = trng_int(r, 1, 9);
        return mk(order, z, ps, ph, pb);
    }
    return mk(0, z, 0, 0, 0);
}

typedef struct obuf {
    uint32_t *base;
    size_t count;
    float *ptr;          /* base + misalign */
    attn_view v;
    vshape z;
    uint16_t *h;         /* 16-bit cases: the uint16 twin (count elements) */
    uint16_t *hptr;      /* h + misalign */
} obuf;

#define TSENTINEL16 0x7FA5u   /* a NaN in both 16-bit types */

static int obuf_alloc(obuf *o, attn_view v, vshape z, int mis)
{
    o->v = v;
    o->z = z;
    o->count = vextent(v, z) + (size_t)mis + 3;
    o->base = malloc(o->count * sizeof *o->base);
    o->ptr = o->base ? (float *)(void *)o->base + mis : NULL;
    return o->base ? 0 : -1;
}

static void obuf_fill(obuf *o, uint32_t bits)
{
    for (size_t x = 0; x < o->count; x++)
        o->base[x] = bits;
    if (o->h)
        for (size_t x = 0; x < o->count; x++)
            o->h[x] = TSENTINEL16;
}

/* 16-bit cases: the twin of o (mis elements in, as o->ptr), holding o's
 * values rounded to type, and o's values replaced by the rounded ones. */
static int obuf_twin(obuf *o, int type, int mis)
{
    o->h = malloc(o->count * sizeof *o->h + 1);
    if (!o->h)
        return -1;
    o->hptr = o->h + mis;
    float *f = (float *)(void *)o->base;
    attn_dtype_encode((attn_dtype)type, f, o->h, (int64_t)o->count);
    attn_dtype_decode((attn_dtype)type, o->h, f, (int64_t)o->count);
    return 0;
}

/* After a 16-bit call: the twin widened into o (the 16-bit sentinel back
 * to TSENTINEL). */
static void obuf_widen(obuf *o, int type)
{
    for (size_t x = 0; x < o->count; x++) {
        if (o->h[x] == TSENTINEL16) {
            o->base[x] = TSENTINEL;
        } else {
            float f;
            attn_dtype_decode((attn_dtype)type, o->h + x, &f, 1);
            memcpy(o->base + x, &f, sizeof f);
        }
    }
}

static float *at(const obuf *o, int64_t b, int64_t h, int64_t s)
{
    return o->ptr + b * o->v.batch + h * o->v.head + s * o->v.seq;
}

/* One backward setup of a case. */
typedef struct bwd {
    tinst own;           /* used when the row's instance has no lse */
    tinst *t;            /* the forward instance */
    obuf d_o, dq, dk, dv, dbias;
    attn_sdpa_bwd_desc desc;
    attn_sdpa_bwd_args args;
    attn_sdpa_bwd_args16 args16;   /* 16-bit cases (dtype) */
    int dtype;
} bwd;

static void bwd_free(bwd *w)
{
    free(w->d_o.base);
    free(w->dq.base);
    free(w->dk.base);
    free(w->dv.base);
    free(w->dbias.base);
    free(w->d_o.h);
    free(w->dq.h);
    free(w->dk.h);
    free(w->dv.h);
    if (w->t == &w->own)
        tinst_free(&w->own);
    memset(w, 0, sizeof *w);
}

static int64_t qlen_b(const tinst *t, int64_t b)
{
    return t->desc.use_q_lens ? t->args.q_lens[b] : t->desc.q_len;
}

/* Build everything for case c on top of instance t (or a want_lse twin of
 * it), run the forward.  Returns 0, or -1 (printed). */
static int bwd_build(bwd *w, const trow *r, const tcase *c, tinst *t)
{
    memset(w, 0, sizeof *w);
    if (t && t->desc.want_lse) {
        w->t = t;
    } else {
        tcase c2 = *c;
        c2.want_lse = 1;
        w->t = &w->own;
        if (trow_build(r, &c2, &w->own)) {
            printf("bwd: cannot build the case\n");
            return -1;
        }
    }
    tinst *ti = w->t;
    attn_status s = tinst_run(ti);
    if (s != ATTN_OK) {
        printf("bwd: forward returned %s\n", attn_status_str(s));
        return -1;
    }
    const attn_sdpa_desc *d = &ti->desc;
    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    const int mis = c->misalign ? 1 : 0;
    const int ty = c->dtype;
    w->dtype = ty;
    trng rng;
    trng_seed(&rng, c->seed * 0x5851F42D4C957F2Dull + 17);

    /* dO in O's view (gaps NaN), NaN in padded rows when poisoned */
    vshape zo = {B, Hq, n, dv};
    if (obuf_alloc(&w->d_o, d->o, zo, mis))
        return -1;
    obuf_fill(&w->d_o, 0x7fc00000u);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                float *row = at(&w->d_o, b, h, i);
                float *orow = ti->args.o + b * d->o.batch + h * d->o.head + i * d->o.seq;
                const int pad = c->poison && i >= qlen_b(ti, b);
                for (int64_t x = 0; x < dv; x++) {
                    float val = (float)trng_uniform(&rng, -1.0, 1.0);
                    row[x] = pad ? NAN : val;
                    if (pad) {
                        orow[x] = NAN;
                        /* and in O's 16-bit twin, which the backward reads */
                        if (ty != ATTN_DTYPE_F32) {
                            const float nan = NAN;
                            attn_dtype_encode((attn_dtype)ty, &nan,
                                              (uint16_t *)ti->o16.base +
                                                  (orow + x - (float *)ti->o.base),
                                              1);
                        }
                    }
                }
            }
    /* 16-bit cases: dO rounded to the type (the reference reads what attn
     * reads), in a uint16 twin */
    if (ty != ATTN_DTYPE_F32 && obuf_twin(&w->d_o, ty, mis))
        return -1;

    /* outputs */
    vshape zq = {B, Hq, n, dk}, zk = {B, Hkv, m, dk}, zv = {B, Hkv, m, dv};
    if (obuf_alloc(&w->dq, out_view(c->out_layout, zq, &rng), zq, mis) ||
        obuf_alloc(&w->dk, out_view(c->out_layout, zk, &rng), zk, mis) ||
        obuf_alloc(&w->dv, out_view(c->out_layout, zv, &rng), zv, mis))
        return -1;
    if (ty != ATTN_DTYPE_F32 &&
        (obuf_twin(&w->dq, ty, mis) || obuf_twin(&w->dk, ty, mis) || obuf_twin(&w->dv, ty, mis)))
        return -1;
    /* the desc and pointers attn takes (16-bit cases: the types set, the
     * uint16 twins) */
    attn_sdpa_desc fd;
    attn_sdpa_args fa;
    tinst_call_types(ti, &fd, &fa);
    attn_sdpa_bwd_desc_init(&w->desc);
    w->desc.fwd = fd;
    w->desc.fwd.want_probs = 0;
    w->desc.d_o = d->o;
    w->desc.dq = w->dq.v;
    w->desc.dk = w->dk.v;
    w->desc.dv = w->dv.v;
    if (d->use_bias) {
        int64_t Bb, Hb, Nb;
        ref_dbias_shape(d, &Bb, &Hb, &Nb);
        vshape zb = {Bb, Hb, Nb, m};
        attn_view vb = mk(0, zb, c->out_layout == OUT_PADDED ? trng_int(&rng, 1, 5) : 0,
                          c->out_layout == OUT_PADDED ? trng_int(&rng, 0, 7) : 0,
                          c->out_layout == OUT_PADDED ? trng_int(&rng, 0, 9) : 0);
        /* the strides of broadcast dimensions (size 1) are those of a dense
         * view; test_errors checks that other values there are ignored */
        if (obuf_alloc(&w->dbias, vb, zb, mis))
            return -1;
        w->desc.want_dbias = 1;
        w->desc.dbias = vb;
    }
    attn_sdpa_bwd_args *a = &w->args;
    a->q = fa.q;
    a->k = fa.k;
    a->v = fa.v;
    a->o = fa.o;
    a->d_o = w->d_o.ptr;
    a->lse = ti->args.lse;
    a->kv_lens = ti->args.kv_lens;
    a->q_lens = ti->args.q_lens;
    a->mask = ti->args.mask;
    a->bias = ti->args.bias;
    a->dq = w->dq.ptr;
    a->dk = w->dk.ptr;
    a->dv = w->dv.ptr;
    a->dbias = w->dbias.ptr;
    a->global_k = ti->args.global_k;
    a->global_q = ti->args.global_q;
    a->layout = ti->args.layout;
    if (ty != ATTN_DTYPE_F32) {
        attn_sdpa_bwd_args16 *h = &w->args16;
        attn_sdpa_bwd_args16_init(h);
        h->q = fa.q16;
        h->k = fa.k16;
        h->v = fa.v16;
        h->o = fa.o16;
        h->d_o = w->d_o.hptr;
        h->dq = w->dq.hptr;
        h->dk = w->dk.hptr;
        h->dv = w->dv.hptr;
        a->d_o = NULL;
        a->dq = a->dk = a->dv = NULL;
        a->args16 = h;
    }
    return 0;
}

static attn_status bwd_run(bwd *w)
{
    obuf_fill(&w->dq, TSENTINEL);
    obuf_fill(&w->dk, TSENTINEL);
    obuf_fill(&w->dv, TSENTINEL);
    if (w->dbias.base)
        obuf_fill(&w->dbias, TSENTINEL);
    const attn_status s = attn_sdpa_backward(&w->desc, &w->args);
    if (w->dtype != ATTN_DTYPE_F32) {
        obuf_widen(&w->dq, w->dtype);
        obuf_widen(&w->dk, w->dtype);
        obuf_widen(&w->dv, w->dtype);
    }
    return s;
}

/* Bitwise equality of every output buffer of two setups. */
static int same_bits(const obuf *a, const obuf *b)
{
    if (a->count != b->count)
        return 0;
    return a->count == 0 || memcmp(a->base, b->base, a->count * sizeof *a->base) == 0;
}

static int bwd_same(const bwd *x, const bwd *y)
{
    return same_bits(&x->dq, &y->dq) && same_bits(&x->dk, &y->dk) && same_bits(&x->dv, &y->dv) &&
           same_bits(&x->dbias, &y->dbias);
}

typedef struct snap4 {
    obuf b[4];
} snap4;

static void snap_take(snap4 *s, const bwd *w)
{
    const obuf *src[4] = {&w->dq, &w->dk, &w->dv, &w->dbias};
    for (int k = 0; k < 4; k++) {
        s->b[k] = *src[k];
        s->b[k].base = NULL;
        s->b[k].h = s->b[k].hptr = NULL;
        if (src[k]->base) {
            s->b[k].base = malloc(src[k]->count * sizeof(uint32_t));
            if (s->b[k].base)
                memcpy(s->b[k].base, src[k]->base, src[k]->count * sizeof(uint32_t));
        }
    }
}

static int snap_same(const snap4 *s, const bwd *w)
{
    bwd tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.dq = s->b[0];
    tmp.dk = s->b[1];
    tmp.dv = s->b[2];
    tmp.dbias = s->b[3];
    return bwd_same(&tmp, w);
}

static void snap_free(snap4 *s)
{
    for (int k = 0; k < 4; k++)
        free(s->b[k].base);
}

/* ----------------------------------------------------------- comparing */

#define MAXREP 8

typedef struct rep {
    const tcase *c;
    long bad;
} rep;

/* bwd_check's reporter: the case once, then up to MAXREP problems. */
static void report(void *ctx, const char *msg)
{
    rep *r = ctx;
    if (r->bad == 0)
        printf("FAIL [bwd] case: %s\n", tcase_str(r->c));
    if (r->bad < MAXREP)
        printf("  %s\n", msg);
    r->bad++;
}

/* The terms 16-bit tensors add to the fp32 bounds (the header). */
static ref_bwd_types bwd_types(int dtype)
{
    ref_bwd_types t = {0, 0, 0, 0, 0, 0};
    if (dtype == ATTN_DTYPE_F32)
        return t;
    const double ut = tdtype_u(dtype), sub = dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
    const int bf = dtype == ATTN_DTYPE_BF16;
    t.o_rel = (bf ? 2.0 : 1.0) * ut;
    t.o_abs = sub;
    t.p_rel = bf ? ut : 0.0;
    t.ds_rel = bf ? ut : 0.0;
    t.g_rel = ut;
    t.g_abs = sub;
    return t;
}

static bwd_buf as_buf(const obuf *o)
{
    bwd_buf b = {o->ptr, o->v, o->z.B, o->z.H, o->z.S, o->z.D, o->base, o->count};
    return b;
}

static long bwd_compare(const bwd *w, const tcase *c, tstats *st)
{
    rep r = {c, 0};
    const bwd_buf dq = as_buf(&w->dq), dk = as_buf(&w->dk), dv = as_buf(&w->dv),
                  db = as_buf(&w->dbias);
    bwd_err e = {st->err_dq, st->err_dk, st->err_dv, st->err_dbias, st->ratio_bwd};
    const ref_bwd_types ty = bwd_types(c->dtype);
    bwd_check_types(&w->t->desc, &w->t->args, w->d_o.ptr, w->desc.d_o, &dq, &dk, &dv,
                    w->desc.want_dbias ? &db : NULL, TSENTINEL, report, &r, &e, &ty);
    st->err_dq = e.dq;
    st->err_dk = e.dk;
    st->err_dv = e.dv;
    st->err_dbias = e.dbias;
    st->ratio_bwd = e.ratio;
    if (r.bad > MAXREP)
        printf("  ... %ld problems in all\n", r.bad);
    st->bwd_cases++;
    return r.bad;
}

/* ------------------------------------------------------------ the check */

/* 16-bit sparse rows (always the widened products): the fp32 backward on
 * the fp32 buffers (the rounded Q, K, V and dO, the 16-bit forward's O
 * widened), each dQ, dK, dV element rounded to the type, gives the 16-bit
 * call's bits (first, widened back); dBias (fp32 at every type) the same
 * bits.  Skipped with MKL (tblas_mkl).  Leaves the fp32 call's results in
 * w's buffers. */
static int bwd_widened_applies(const tcase *c)
{
    return c->dtype != ATTN_DTYPE_F32 && tcase_sparse(c) && !tblas_mkl();
}

static int bwd_widened(bwd *w, const tcase *c, const snap4 *first)
{
    attn_sdpa_bwd_desc d = w->desc;
    d.fwd.q_type = d.fwd.k_type = d.fwd.v_type = d.fwd.o_type = ATTN_DTYPE_F32;
    attn_sdpa_bwd_args a = w->args;
    a.q = w->t->args.q;
    a.k = w->t->args.k;
    a.v = w->t->args.v;
    a.o = w->t->args.o;
    a.d_o = w->d_o.ptr;
    a.dq = w->dq.ptr;
    a.dk = w->dk.ptr;
    a.dv = w->dv.ptr;
    a.args16 = NULL;
    obuf *g[3] = {&w->dq, &w->dk, &w->dv};
    for (int k = 0; k < 3; k++)
        obuf_fill(g[k], TSENTINEL);
    if (w->dbias.base)
        obuf_fill(&w->dbias, TSENTINEL);
    const attn_status s = attn_sdpa_backward(&d, &a);
    if (s != ATTN_OK) {
        printf("FAIL [bwd widened] the fp32 backward returned %s: %s\n", attn_status_str(s),
               tcase_str(c));
        return 1;
    }
    for (int k = 0; k < 3; k++)
        tround_all(c->dtype, g[k]->base, g[k]->count);
    if (!snap_same(first, w)) {
        printf("FAIL [bwd widened] not the fp32 backward's bits rounded to the type: %s\n",
               tcase_str(c));
        return 1;
    }
    return 0;
}

static int hides(const tcase *c)
{
    return c->use_kv_lens || c->use_q_lens || c->wl >= 0 || c->wr >= 0 || tcase_sparse(c);
}

int check_bwd(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)base;
    bwd w;
    int fails = 0;
    if (bwd_build(&w, r, &r->c, t)) {
        bwd_free(&w);
        printf("FAIL [bwd] setup: %s\n", tcase_str(&r->c));
        return 1;
    }
    attn_status s = bwd_run(&w);
    if (s != ATTN_OK) {
        printf("FAIL [bwd] attn_sdpa_backward returned %s: %s\n", attn_status_str(s),
               tcase_str(&r->c));
        bwd_free(&w);
        return 1;
    }
    fails += bwd_compare(&w, &r->c, st) != 0;
    snap4 first;
    snap_take(&first, &w);
    if (bwd_widened_applies(&r->c)) {
        fails += bwd_widened(&w, &r->c, &first);
        st->bwd_widened++;
    }

    /* threads 1..4: the same bits */
    const int keep = w.desc.fwd.threads;
    for (int th = 1; th <= (tquick() ? 2 : 4); th++) {
        if (th == keep)
            continue;
        w.desc.fwd.threads = th;
        s = bwd_run(&w);
        if (s != ATTN_OK || !snap_same(&first, &w)) {
            printf("FAIL [bwd threads] threads=%d %s than threads=%d: %s\n", th,
                   s == ATTN_OK ? "gives other bits" : attn_status_str(s), keep,
                   tcase_str(&r->c));
            fails++;
        }
    }
    w.desc.fwd.threads = keep;

    /* the poisoned (or unpoisoned) twin: the same bits */
    if (hides(&r->c)) {
        tcase c2 = r->c;
        c2.poison = !c2.poison;
        bwd w2;
        if (bwd_build(&w2, r, &c2, NULL) || (s = bwd_run(&w2)) != ATTN_OK ||
            !snap_same(&first, &w2)) {
            printf("FAIL [bwd poison] poison=%d gives other bits (%s): %s\n", c2.poison,
                   attn_status_str(s), tcase_str(&c2));
            fails++;
        }
        bwd_free(&w2);
    }
    snap_free(&first);
    bwd_free(&w);
    return fails;
}
