/*
 * mha_case.c -- building, running and checking one case of the multi-head
 * attention layer tests (see mha_case.h; the tolerances are those of
 * mha_reference.h, described in test_mha.c).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

#include <attn.h>

#include "harness.h"
#include "mha_case.h"
#include "mha_reference.h"

mcase mc_cross(int64_t B, int64_t L, int64_t S, int64_t E, int64_t H)
{
    mcase c = { MCASE_DEFAULTS };
    c.B = B;
    c.L = L;
    c.S = S;
    c.E = E;
    c.H = H;
    return c;
}

mcase mc_self(int64_t B, int64_t L, int64_t E, int64_t H, int packed)
{
    mcase c = mc_cross(B, L, L, E, H);
    c.self = 1;
    c.packed = packed;
    return c;
}

const char *mcase_str(const mcase *c)
{
    static char buf[768];
    char kl[64] = "-", ql[64] = "-";
    int off = 0;
    if (c->use_kv_lens)
        for (int64_t b = 0; b < c->B; b++)
            off += snprintf(kl + off, sizeof kl - (size_t)off, "%s%d", b ? "," : "",
                            (int)c->kv_lens[b]);
    off = 0;
    if (c->use_q_lens)
        for (int64_t b = 0; b < c->B; b++)
            off += snprintf(ql + off, sizeof ql - (size_t)off, "%s%d", b ? "," : "",
                            (int)c->q_lens[b]);
    snprintf(buf, sizeof buf,
             "B=%lld L=%lld S=%lld E=%lld H=%lld Hkv=%lld kdim=%lld vdim=%lld self=%d "
             "packed=%d bias=%d strides=%lld/%lld/%lld/%lld scale=%g align=%d wl=%lld "
             "wr=%lld kv_lens=[%s] q_lens=[%s] mask=%d/bc%d attn_bias=%d/bc%d/ninf%.2f "
             "kpm=%d weights=%d threads=%d seed=%llu dropout=%g/%llu/%llu",
             (long long)c->B, (long long)c->L, (long long)c->S, (long long)c->E,
             (long long)c->H, (long long)c->Hkv, (long long)c->kdim, (long long)c->vdim,
             c->self, c->packed, c->has_bias, (long long)c->xs, (long long)c->ks,
             (long long)c->vs, (long long)c->os, (double)c->scale, c->align,
             (long long)c->wl, (long long)c->wr, kl, ql, c->mask_mode, c->mask_bcast,
             c->use_bias, c->bias_bcast, c->bias_ninf, c->kpm_mode, c->weights, c->threads,
             (unsigned long long)c->seed, c->dropout_p, (unsigned long long)c->drop_seed,
             (unsigned long long)c->drop_offset);
    if (c->use_gk || c->use_gq || c->bs) {
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " gk=%d gq=%d bs=%lld per_head=%d", c->use_gk,
                 c->use_gq, (long long)c->bs, c->lay_per_head);
    }
    if (c->xt || c->wt) {
        static const char *const tn[] = { "f32", "f16", "bf16" };
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len, " x_type=%s w_type=%s", tn[c->xt % 3],
                 tn[c->wt % 3]);
    }
    return buf;
}

/* Random lengths in [lo, full] for every batch (the first one full). */
void mcase_set_lens(mcase *c, trng *r, int kv, int q)
{
    for (int64_t b = 0; b < c->B; b++) {
        if (kv) {
            c->use_kv_lens = 1;
            c->kv_lens[b] = b == 0 ? (int32_t)c->S : (int32_t)trng_int(r, 0, c->S);
        }
        if (q) {
            c->use_q_lens = 1;
            c->q_lens[b] = b == 0 ? (int32_t)c->L : (int32_t)trng_int(r, 0, c->L);
        }
    }
}

/* -------------------------------------------------------------- instances */


static float *falloc(size_t n)
{
    return malloc((n ? n : 1) * sizeof(float));
}

static void fill_uniform(float *p, size_t n, trng *r, double mag)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)trng_uniform(r, -mag, mag);
}

static void fill_bits(float *p, size_t n, uint32_t bits)
{
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &bits, sizeof bits);
}

/* rows x width inside a buffer of row stride ld, NaN everywhere else
 * (gaps and the tail). */
static float *input_rows(int64_t rows, int64_t width, int64_t ld, trng *r, double mag)
{
    size_t n = (size_t)(rows * ld) + MTAIL;
    float *p = falloc(n);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    for (int64_t i = 0; i < rows; i++)
        fill_uniform(p + i * ld, (size_t)width, r, mag);
    return p;
}

/* A random nonzero byte. */
static uint8_t nonzero(trng *r)
{
    return (uint8_t)trng_int(r, 1, 255);
}

/* Encode "visible" for a uint8 mask of the given mode. */
static uint8_t encode(int mode, int visible, trng *r)
{
    if (mode == ATTN_MASK_KEEP_NONZERO)
        return visible ? nonzero(r) : 0;
    return visible ? 0 : nonzero(r);
}

/* Strides and element count of a [B|1][H|1][L|1][S] tensor. */
static attn_view bcast_view(int bc, int64_t B, int64_t H, int64_t L, int64_t S, size_t *count)
{
    const int64_t Bm = bc & BC_BATCH ? 1 : B, Hm = bc & BC_HEAD ? 1 : H;
    const int64_t Lm = bc & BC_SEQ ? 1 : L;
    attn_view v;
    v.seq = bc & BC_SEQ ? 0 : S;
    v.head = bc & BC_HEAD ? 0 : Lm * S;
    v.batch = bc & BC_BATCH ? 0 : Hm * Lm * S;
    *count = (size_t)(Bm * Hm * Lm * S);
    return v;
}

/* The uint16 twin of p[0..n) at type t, with p rounded to it in place
 * (NaN stays NaN), or NULL when out of memory. */
static uint16_t *twin16(int type, float *p, size_t n)
{
    uint16_t *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return NULL;
    attn_dtype_encode((attn_dtype)type, p, h, (int64_t)n);
    attn_dtype_decode((attn_dtype)type, h, p, (int64_t)n);
    return h;
}

static void fill16(uint16_t *p, size_t n, uint16_t v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

static int all_sentinel16(const uint16_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != MSENTINEL16)
            return 0;
    return 1;
}

void minst_free(minst *t)
{
    float *fs[] = {t->in_proj, t->in_bias, t->wq, t->wk, t->wv, t->bq, t->bk, t->bv, t->wo,
                   t->bo, t->x, t->key, t->value, t->out, t->wts, t->bias};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        free(fs[i]);
    uint16_t *hs[] = {t->in_proj16, t->in_bias16, t->wq16, t->wk16, t->wv16, t->bq16, t->bk16,
                      t->bv16, t->wo16, t->bo16, t->x16, t->key16, t->value16, t->out16};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        free(hs[i]);
    free(t->mask);
    free(t->kpm);
    free(t->gk);
    free(t->gq);
    free(t->layout);
    memset(t, 0, sizeof *t);
}

void minst_clear(minst *t)
{
    fill_bits(t->out, t->n_out, TSENTINEL);
    if (t->out16)
        fill16(t->out16, t->n_out, MSENTINEL16);
    if (t->wts)
        fill_bits(t->wts, t->n_wts, TSENTINEL);
}

static int all_sentinel(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &p[i], sizeof u);
        if (u != TSENTINEL)
            return 0;
    }
    return 1;
}

int minst_untouched(const minst *t)
{
    return all_sentinel(t->out, t->n_out) && (!t->out16 || all_sentinel16(t->out16, t->n_out)) &&
           (!t->wts || all_sentinel(t->wts, t->n_wts));
}

/* Build every buffer (all weight layouts, whatever the case uses), the
 * desc and the args of c.  Returns 0 or -1. */
int minst_build(minst *t, const mcase *c)
{
    memset(t, 0, sizeof *t);
    t->c = *c;
    trng r;
    trng_seed(&r, c->seed);
    const int64_t B = c->B, L = c->L, S = c->S, E = c->E, H = c->H;
    t->Hkv = c->Hkv ? c->Hkv : H;
    t->kdim = c->kdim ? c->kdim : E;
    t->vdim = c->vdim ? c->vdim : E;
    t->kvE = t->Hkv * (E / H);
    t->xs = c->xs ? c->xs : E;
    t->ks = c->ks ? c->ks : t->kdim;
    t->vs = c->vs ? c->vs : t->vdim;
    t->os = c->os ? c->os : E;
    const int64_t kvE = t->kvE, kdim = t->kdim, vdim = t->vdim;

    /* weights: uniform with the variance of the input kept (sqrt(3/fan_in)),
     * biases in [-0.5, 0.5] */
    const double ae = sqrt(3.0 / (double)E), ak = sqrt(3.0 / (double)kdim);
    const double av = sqrt(3.0 / (double)vdim);
    const struct {
        float **p;
        int64_t n;
        double mag;
        uint16_t **h;
    } wb[] = {
        { &t->in_proj, 3 * E * E, ae, &t->in_proj16 }, { &t->in_bias, 3 * E, 0.5, &t->in_bias16 },
        { &t->wq, E * E, ae, &t->wq16 },  { &t->wk, kvE * kdim, ak, &t->wk16 },
        { &t->wv, kvE * vdim, av, &t->wv16 }, { &t->bq, E, 0.5, &t->bq16 },
        { &t->bk, kvE, 0.5, &t->bk16 },   { &t->bv, kvE, 0.5, &t->bv16 },
        { &t->wo, E * E, ae, &t->wo16 },  { &t->bo, E, 0.5, &t->bo16 },
    };
    for (size_t k = 0; k < sizeof wb / sizeof wb[0]; k++) {
        if (!(*wb[k].p = falloc((size_t)wb[k].n)))
            return -1;
        fill_uniform(*wb[k].p, (size_t)wb[k].n, &r, wb[k].mag);
    }
    /* 16-bit weights: rounded in place, with their twins (the same random
     * stream as in fp32: the draws above are done) */
    if (c->wt)
        for (size_t k = 0; k < sizeof wb / sizeof wb[0]; k++)
            if (!(*wb[k].h = twin16(c->wt, *wb[k].p, (size_t)wb[k].n)))
                return -1;

    /* inputs with NaN gaps, outputs with sentinel gaps */
    t->x = input_rows(B * L, E, t->xs, &r, c->in_mag);
    if (!t->x)
        return -1;
    if (!c->self) {
        t->key = input_rows(B * S, kdim, t->ks, &r, c->in_mag);
        t->value = input_rows(B * S, vdim, t->vs, &r, c->in_mag);
        if (!t->key || !t->value)
            return -1;
    }
    t->n_out = (size_t)(B * L * t->os) + MTAIL;
    t->out = falloc(t->n_out);
    if (!t->out)
        return -1;
    if (c->xt) {   /* 16-bit inputs (NaN gaps stay NaN) and output */
        t->x16 = twin16(c->xt, t->x, (size_t)(B * L * t->xs) + MTAIL);
        t->out16 = malloc(t->n_out * sizeof *t->out16);
        if (!t->x16 || !t->out16)
            return -1;
        if (!c->self) {
            t->key16 = twin16(c->xt, t->key, (size_t)(B * S * t->ks) + MTAIL);
            t->value16 = twin16(c->xt, t->value, (size_t)(B * S * t->vs) + MTAIL);
            if (!t->key16 || !t->value16)
                return -1;
        }
    }
    if (c->weights != ATTN_WEIGHTS_NONE) {
        t->n_wview = (size_t)(B * L * S) * (c->weights == ATTN_WEIGHTS_PER_HEAD ? (size_t)H : 1u);
        t->n_wts = t->n_wview + MTAIL;
        t->wts = falloc(t->n_wts);
        if (!t->wts)
            return -1;
    }
    minst_clear(t);

    /* desc */
    attn_mha_desc *d = &t->d;
    attn_mha_desc_init(d);
    d->embed_dim = E;
    d->num_heads = H;
    d->num_kv_heads = c->Hkv;
    d->kdim = c->kdim;
    d->vdim = c->vdim;
    d->batch = B;
    d->q_len = L;
    d->kv_len = S;
    d->self_attention = c->self;
    d->packed_in_proj = c->packed;
    d->has_bias = c->has_bias;
    d->x_stride = c->xs;
    d->key_stride = c->ks;
    d->value_stride = c->vs;
    d->out_stride = c->os;
    d->scale = c->scale;
    d->align = (attn_align)c->align;
    d->window_left = c->wl;
    d->window_right = c->wr;
    d->use_kv_lens = c->use_kv_lens;
    d->use_q_lens = c->use_q_lens;
    d->mask_mode = (attn_mask_mode)c->mask_mode;
    d->use_bias = c->use_bias;
    d->key_padding_mode = (attn_mask_mode)c->kpm_mode;
    d->weights = (attn_weights_mode)c->weights;
    d->threads = c->threads;
    d->dropout_p = c->dropout_p;
    d->dropout_seed = c->drop_seed;
    d->dropout_offset = c->drop_offset;
    d->x_type = (attn_dtype)c->xt;
    d->w_type = (attn_dtype)c->wt;

    /* masks, bias, lengths */
    if (c->mask_mode != ATTN_MASK_NONE) {
        size_t n;
        d->mask = bcast_view(c->mask_bcast, B, H, L, S, &n);
        t->mask = malloc(n);
        if (!t->mask)
            return -1;
        for (size_t i = 0; i < n; i++)
            t->mask[i] = encode(c->mask_mode, trng_bool(&r, c->mask_keep), &r);
    }
    if (c->use_bias) {
        size_t n;
        d->bias = bcast_view(c->bias_bcast, B, H, L, S, &n);
        t->bias = falloc(n);
        if (!t->bias)
            return -1;
        for (size_t i = 0; i < n; i++)
            t->bias[i] = trng_bool(&r, c->bias_ninf) ? -INFINITY
                                                     : (float)trng_uniform(&r, -1.0, 1.0);
    }
    if (c->kpm_mode != ATTN_MASK_NONE) {
        t->kpm = malloc((size_t)(B * S));
        if (!t->kpm)
            return -1;
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < S; j++) {
                /* odd batches: the last third is padding, as in a padded
                 * batch of shorter sequences; plus random holes */
                int vis = trng_bool(&r, c->kpm_keep) && !(b % 2 == 1 && 3 * j >= 2 * S);
                t->kpm[b * S + j] = encode(c->kpm_mode, vis, &r);
            }
    }
    memcpy(t->kv_lens, c->kv_lens, sizeof t->kv_lens);
    memcpy(t->q_lens, c->q_lens, sizeof t->q_lens);
    /* sparse attention, from a generator of its own */
    {
        trng sp;
        trng_seed(&sp, c->seed * 0x2545F4914F6CDD1Dull + 0x77);
        if (c->use_gk || c->use_gq) {
            t->gk = malloc((size_t)(B * S));
            t->gq = malloc((size_t)(B * L));
            if (!t->gk || !t->gq)
                return -1;
            for (int64_t x = 0; x < B * S; x++)
                t->gk[x] = trng_bool(&sp, 0.15) ? (uint8_t)trng_int(&sp, 1, 255) : 0;
            for (int64_t x = 0; x < B * L; x++)
                t->gq[x] = trng_bool(&sp, 0.15) ? (uint8_t)trng_int(&sp, 1, 255) : 0;
        }
        if (c->bs) {
            const int64_t nb = (L + c->bs - 1) / c->bs, mb = (S + c->bs - 1) / c->bs;
            const int64_t nl = (c->lay_per_head ? H : 1) * nb * mb;
            t->layout = malloc((size_t)nl);
            if (!t->layout)
                return -1;
            for (int64_t x = 0; x < nl; x++)
                t->layout[x] = (uint8_t)trng_bool(&sp, 0.6);
        }
        d->use_global_k = c->use_gk;
        d->use_global_q = c->use_gq;
        d->block_size = c->bs;
        d->layout_per_head = c->lay_per_head;
    }

    /* weights and args: exactly the pointers the plan uses */
    attn_mha_weights *w = &t->w;
    memset(w, 0, sizeof *w);
    if (c->packed) {
        w->in_proj_weight = t->in_proj;
        if (c->has_bias)
            w->in_proj_bias = t->in_bias;
    } else {
        w->q_weight = t->wq;
        w->k_weight = t->wk;
        w->v_weight = t->wv;
        if (c->has_bias) {
            w->q_bias = t->bq;
            w->k_bias = t->bk;
            w->v_bias = t->bv;
        }
    }
    w->out_weight = t->wo;
    if (c->has_bias)
        w->out_bias = t->bo;
    attn_mha_args *a = &t->a;
    memset(a, 0, sizeof *a);
    a->x = t->x;
    a->key = t->key;
    a->value = t->value;
    a->out = t->out;
    a->kv_lens = c->use_kv_lens ? t->kv_lens : NULL;
    a->q_lens = c->use_q_lens ? t->q_lens : NULL;
    a->mask = t->mask;
    a->bias = t->bias;
    a->key_padding_mask = t->kpm;
    a->weights = t->wts;
    a->global_k = c->use_gk ? t->gk : NULL;
    a->global_q = c->use_gq ? t->gq : NULL;
    a->layout = t->layout;
    t->wf = *w;
    t->af = *a;
    /* 16-bit types: the same tensors through their uint16 twins */
    if (c->wt) {
        attn_mha_weights16 *h = &t->w16;
        attn_mha_weights16_init(h);
        if (c->packed) {
            h->in_proj_weight = t->in_proj16;
            if (c->has_bias)
                h->in_proj_bias = t->in_bias16;
        } else {
            h->q_weight = t->wq16;
            h->k_weight = t->wk16;
            h->v_weight = t->wv16;
            if (c->has_bias) {
                h->q_bias = t->bq16;
                h->k_bias = t->bk16;
                h->v_bias = t->bv16;
            }
        }
        h->out_weight = t->wo16;
        if (c->has_bias)
            h->out_bias = t->bo16;
        attn_mha_weights_init(w);
        w->weights16 = h;
    }
    if (c->xt) {
        attn_mha_args16 *h = &t->a16;
        attn_mha_args16_init(h);
        h->x = t->x16;
        h->key = t->key16;
        h->value = t->value16;
        h->out = t->out16;
        a->x = a->key = a->value = NULL;
        a->out = NULL;
        a->args16 = h;
    }
    minst_clear(t);
    return 0;
}

int minst_bf16_products(const minst *t)
{
    attn_engine e = ATTN_ENGINE_BLAS;
    attn_engine_resolve(t->d.engine, &e);
    return t->c.xt == ATTN_DTYPE_BF16 && t->c.wt == ATTN_DTYPE_BF16 &&
           e == ATTN_ENGINE_TILE && !t->c.use_gk && !t->c.use_gq && !t->c.bs;
}

void minst_round(const minst *t, mref_round *r)
{
    memset(r, 0, sizeof *r);
    if (minst_bf16_products(t))
        r->q = r->k = r->v = r->p = r->o = tdtype_u(ATTN_DTYPE_BF16);
    r->y = tdtype_u(t->c.xt);
    r->y_abs = t->c.xt == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
}

/* Plan, execute and destroy.  ws_mode 0: workspace NULL; 1: a caller
 * workspace of exactly attn_mha_workspace_size bytes, filled with NaN. */
attn_status minst_run(minst *t, int ws_mode)
{
    attn_mha_plan *plan = NULL;
    attn_status s = attn_mha_plan_create(&plan, &t->d);
    if (s != ATTN_OK)
        return s;
    void *ws = NULL;
    size_t bytes = 0;
    if (ws_mode) {
        assert_int_equal(attn_mha_workspace_size(plan, &bytes), ATTN_OK);
        ws = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        assert_non_null(ws);
        memset(ws, 0xFF, (bytes + 63) / 64 * 64 + 64);
    }
    s = attn_mha_execute(plan, &t->w, &t->a, ws, bytes);
    free(ws);
    attn_mha_plan_destroy(plan);
    return s;
}

/* ----------------------------------------------------------------- checks */


void mstats_init(mstats *s, const char *family)
{
    memset(s, 0, sizeof *s);
    s->family = family;
}

void mstats_print(const mstats *s)
{
    printf("[accuracy] %-26s cases=%-4d max|dY|=%.3e max|dW|=%.3e max err/tol=%.3f\n",
           s->family, s->cases, s->err_y, s->err_w, s->ratio);
    fflush(stdout);
}

/* Compare one element; returns 1 if bad. */
static int cmp_elem(double lib, double ref, double tol, double *maxerr, double *ratio)
{
    double e = fabs(lib - ref);
    if (!(e <= tol))
        return 1;
    if (e > *maxerr)
        *maxerr = e;
    if (e / tol > *ratio)
        *ratio = e / tol;
    return 0;
}

static long report(long bad, const minst *t, const char *what, int64_t idx, double lib,
                   double ref, double tol)
{
    if (bad < 6)
        printf("FAIL %s[%lld]: lib %.9g ref %.9g tol %.3g (%s)\n", what, (long long)idx, lib,
               ref, tol, mcase_str(&t->c));
    return bad + 1;
}

/* Check out and weights of the last call against the reference, and the
 * sentinels around them.  Returns the number of bad elements. */
long minst_check(const minst *t, mstats *st)
{
    const mcase *c = &t->c;
    const int64_t B = c->B, L = c->L, S = c->S, E = c->E, H = c->H;
    mref_out ro;
    memset(&ro, 0, sizeof ro);
    const size_t ny = (size_t)(B * L * E), np = (size_t)(B * H * L * S);
    const size_t na = (size_t)(B * L * S);
    ro.y = malloc(ny * sizeof(double));
    ro.y_tol = malloc(ny * sizeof(double));
    if (c->weights == ATTN_WEIGHTS_PER_HEAD) {
        ro.p = malloc(np * sizeof(double));
        ro.p_tol = malloc(np * sizeof(double));
    } else if (c->weights == ATTN_WEIGHTS_AVERAGED) {
        ro.avg = malloc(na * sizeof(double));
        ro.avg_tol = malloc(na * sizeof(double));
    }
    assert_non_null(ro.y);
    assert_non_null(ro.y_tol);
    mref_round rnd;
    minst_round(t, &rnd);
    assert_int_equal(mref_mha_typed(&t->d, &t->wf, &t->af, &ro, &rnd), 0);

    long bad = 0;
    double ey = 0.0, ew = 0.0, ratio = st->ratio;
    /* Y: out, or its 16-bit twin (the float out then never written) */
    const uint16_t *o16 = c->xt ? t->out16 : NULL;
    for (int64_t r = 0; r < B * L; r++) {
        for (int64_t e = 0; e < E; e++) {
            const int64_t at = r * t->os + e;
            float y16 = 0.0f;
            if (o16)
                attn_dtype_decode((attn_dtype)c->xt, o16 + at, &y16, 1);
            const double lib = o16 ? (double)y16 : (double)t->out[at];
            const int64_t k = r * E + e;
            if (cmp_elem(lib, ro.y[k], ro.y_tol[k], &ey, &ratio))
                bad = report(bad, t, "Y", k, lib, ro.y[k], ro.y_tol[k]);
        }
        const size_t gap0 = (size_t)(r * t->os + E), ngap = (size_t)(t->os - E);
        if (!all_sentinel(t->out + gap0, ngap) || (o16 && !all_sentinel16(o16 + gap0, ngap))) {
            if (bad < 6)
                printf("FAIL out row %lld: gap after the row written (%s)\n", (long long)r,
                       mcase_str(c));
            bad++;
        }
    }
    const size_t end = (size_t)(B * L * t->os);
    if (!all_sentinel(t->out + end, MTAIL) || (o16 && !all_sentinel16(o16 + end, MTAIL))) {
        printf("FAIL out: written past the last row (%s)\n", mcase_str(c));
        bad++;
    }
    if (o16 && !all_sentinel(t->out, t->n_out)) {
        printf("FAIL out: the float out written by a 16-bit call (%s)\n", mcase_str(c));
        bad++;
    }
    if (c->weights != ATTN_WEIGHTS_NONE) {
        const double *ref = ro.p ? ro.p : ro.avg, *tol = ro.p ? ro.p_tol : ro.avg_tol;
        for (size_t k = 0; k < t->n_wview; k++)
            if (cmp_elem((double)t->wts[k], ref[k], tol[k], &ew, &ratio))
                bad = report(bad, t, ro.p ? "P" : "avgP", (int64_t)k, (double)t->wts[k], ref[k],
                             tol[k]);
        if (!all_sentinel(t->wts + t->n_wview, MTAIL)) {
            printf("FAIL weights: written past the end (%s)\n", mcase_str(c));
            bad++;
        }
    }
    st->cases++;
    if (ey > st->err_y)
        st->err_y = ey;
    if (ew > st->err_w)
        st->err_w = ew;
    st->ratio = ratio;
    free(ro.y);
    free(ro.y_tol);
    free(ro.p);
    free(ro.p_tol);
    free(ro.avg);
    free(ro.avg_tol);
    return bad;
}

/* Whole output buffers, for bitwise comparisons. */

void msnap_take(msnap *s, const minst *t)
{
    s->n_out = t->n_out;
    s->n_wts = t->wts ? t->n_wts : 0;
    s->out = falloc(s->n_out);
    s->wts = falloc(s->n_wts);
    assert_non_null(s->out);
    assert_non_null(s->wts);
    memcpy(s->out, t->out, s->n_out * sizeof(float));
    if (s->n_wts)
        memcpy(s->wts, t->wts, s->n_wts * sizeof(float));
    s->out16 = NULL;
    if (t->out16) {
        s->out16 = malloc(s->n_out * sizeof *s->out16);
        assert_non_null(s->out16);
        memcpy(s->out16, t->out16, s->n_out * sizeof *s->out16);
    }
}

int msnap_equal(const msnap *s, const minst *t)
{
    return msnap_equal_out(s, t) &&
           (!s->n_wts || memcmp(s->wts, t->wts, s->n_wts * sizeof(float)) == 0);
}

void msnap_free(msnap *s)
{
    free(s->out);
    free(s->wts);
    free(s->out16);
}

void minst_fill_gaps(minst *t, float v)
{
    const mcase *c = &t->c;
    float *bufs[3] = { t->x, t->key, t->value };
    const int64_t rows[3] = { c->B * c->L, c->B * c->S, c->B * c->S };
    const int64_t width[3] = { c->E, t->kdim, t->vdim };
    const int64_t ld[3] = { t->xs, t->ks, t->vs };
    uint16_t *twins[3] = { t->x16, t->key16, t->value16 };
    uint16_t v16 = 0;
    if (c->xt)
        attn_dtype_encode((attn_dtype)c->xt, &v, &v16, 1);
    for (int k = 0; k < 3; k++) {
        if (!bufs[k])
            continue;
        for (int64_t i = 0; i < rows[k]; i++)
            for (int64_t j = width[k]; j < ld[k]; j++) {
                bufs[k][i * ld[k] + j] = v;
                if (twins[k])
                    twins[k][i * ld[k] + j] = v16;
            }
        for (int64_t j = 0; j < MTAIL; j++) {
            bufs[k][rows[k] * ld[k] + j] = v;
            if (twins[k])
                twins[k][rows[k] * ld[k] + j] = v16;
        }
    }
}

int msnap_equal_out(const msnap *s, const minst *t)
{
    return memcmp(s->out, t->out, s->n_out * sizeof(float)) == 0 &&
           (!s->out16 || (t->out16 && memcmp(s->out16, t->out16,
                                               s->n_out * sizeof *s->out16) == 0));
}

/* --------------------------------------------------------------- training */

int mgrads_build(mgrads *m, const minst *t)
{
    memset(m, 0, sizeof *m);
    const mcase *c = &t->c;
    trng r;
    trng_seed(&r, c->seed * 7919u + 17u);
    const int64_t B = c->B, L = c->L, E = c->E;
    m->n_dy = (size_t)(B * L * t->os) + MTAIL;
    m->dy = input_rows(B * L, E, t->os, &r, 1.0);
    if (!m->dy)
        return -1;
    int64_t ld[MG_COUNT];
    for (int k = 0; k < MG_COUNT; k++) {
        mref_grad_shape(&t->d, k, &m->rows[k], &m->width[k]);
        ld[k] = m->width[k];
    }
    ld[MG_DX] = t->xs;
    ld[MG_DKEY] = t->ks;
    ld[MG_DVALUE] = t->vs;
    for (int k = 0; k < MG_COUNT; k++) {
        m->ld[k] = ld[k];
        if (!m->rows[k])
            continue;
        if (c->packed && (k == MG_DWK || k == MG_DWV || k == MG_DBK || k == MG_DBV)) {
            const int base = k == MG_DWK || k == MG_DWV ? MG_DWQ : MG_DBQ;
            const int64_t part = k == MG_DWK || k == MG_DBK ? 1 : 2;
            m->view[k] = m->view[base] + part * m->rows[base] * m->width[base];
            continue;
        }
        int64_t total = m->rows[k] * ld[k];
        if (c->packed && (k == MG_DWQ || k == MG_DBQ))
            total *= 3;
        m->n[k] = (size_t)total + MTAIL;
        if (!(m->buf[k] = falloc(m->n[k])))
            return -1;
        m->view[k] = m->buf[k];
    }
    mgrads_clear(m);
    attn_mha_grads *g = &m->g;
    memset(g, 0, sizeof *g);
    g->dx = m->view[MG_DX];
    g->dkey = m->view[MG_DKEY];
    g->dvalue = m->view[MG_DVALUE];
    if (c->packed) {
        g->d_in_proj_weight = m->view[MG_DWQ];
        g->d_in_proj_bias = m->view[MG_DBQ];
    } else {
        g->d_q_weight = m->view[MG_DWQ];
        g->d_k_weight = m->view[MG_DWK];
        g->d_v_weight = m->view[MG_DWV];
        g->d_q_bias = m->view[MG_DBQ];
        g->d_k_bias = m->view[MG_DBK];
        g->d_v_bias = m->view[MG_DBV];
    }
    g->d_out_weight = m->view[MG_DWO];
    g->d_out_bias = m->view[MG_DBO];
    return 0;
}

void mgrads_free(mgrads *m)
{
    free(m->dy);
    for (int k = 0; k < MG_COUNT; k++)
        free(m->buf[k]);
    memset(m, 0, sizeof *m);
}

void mgrads_clear(mgrads *m)
{
    for (int k = 0; k < MG_COUNT; k++)
        if (m->buf[k])
            fill_bits(m->buf[k], m->n[k], TSENTINEL);
}

int mgrads_untouched(const mgrads *m)
{
    for (int k = 0; k < MG_COUNT; k++)
        if (m->buf[k] && !all_sentinel(m->buf[k], m->n[k]))
            return 0;
    return 1;
}

void mgrads_snap(const mgrads *m, float *snap[MG_COUNT])
{
    for (int k = 0; k < MG_COUNT; k++) {
        snap[k] = NULL;
        if (!m->buf[k])
            continue;
        snap[k] = falloc(m->n[k]);
        assert_non_null(snap[k]);
        memcpy(snap[k], m->buf[k], m->n[k] * sizeof(float));
    }
}

int mgrads_equal(const mgrads *m, float *const snap[MG_COUNT])
{
    for (int k = 0; k < MG_COUNT; k++)
        if (m->buf[k] && memcmp(snap[k], m->buf[k], m->n[k] * sizeof(float)) != 0)
            return 0;
    return 1;
}

void mgrads_snap_free(float *snap[MG_COUNT])
{
    for (int k = 0; k < MG_COUNT; k++) {
        free(snap[k]);
        snap[k] = NULL;
    }
}

/* A 64-byte aligned buffer of at least bytes, filled with 0xFF (NaN). */
static void *nan_buffer(size_t bytes)
{
    const size_t cap = (bytes + 63) / 64 * 64 + 64;
    void *p = aligned_alloc(64, cap);
    assert_non_null(p);
    memset(p, 0xFF, cap);
    return p;
}

attn_status minst_train(minst *t, mgrads *m, int accumulate, void **context_out,
                        size_t *context_bytes, attn_mha_plan **plan_out)
{
    return minst_train_call(t, &t->d, m->dy, &m->g, accumulate, context_out, context_bytes,
                            plan_out);
}

attn_status minst_train_call(minst *t, const attn_mha_desc *d, const float *dy,
                             attn_mha_grads *g, int accumulate, void **context_out,
                             size_t *context_bytes, attn_mha_plan **plan_out)
{
    attn_mha_plan *plan = NULL;
    attn_status s = attn_mha_plan_create(&plan, d);
    if (s != ATTN_OK)
        return s;
    size_t cb = 0, wb = 0, bb = 0;
    assert_int_equal(attn_mha_context_size(plan, &cb), ATTN_OK);
    assert_int_equal(attn_mha_workspace_size(plan, &wb), ATTN_OK);
    assert_int_equal(attn_mha_bwd_workspace_size(plan, &bb), ATTN_OK);
    void *cx = nan_buffer(cb), *ws = nan_buffer(wb), *bws = nan_buffer(bb);
    s = attn_mha_train_execute(plan, &t->w, &t->a, cx, cb, ws, wb);
    if (s == ATTN_OK)
        s = attn_mha_bwd_execute(plan, &t->w, &t->a, dy, cx, cb, g, accumulate, bws, bb);
    free(ws);
    free(bws);
    if (context_out) {
        *context_out = cx;
        *context_bytes = cb;
    } else {
        free(cx);
    }
    if (plan_out)
        *plan_out = plan;
    else
        attn_mha_plan_destroy(plan);
    return s;
}

void gstats_print(const gstats *s)
{
    for (int k = 0; k < MG_COUNT; k++)
        printf("[accuracy] backward %-6s cases=%-4d max|err|=%.3e max err/tol=%.3f\n",
               mref_grad_name[k], s->cases, s->err[k], s->ratio[k]);
    fflush(stdout);
}

long mgrads_check(const minst *t, const mgrads *m, gstats *st)
{
    mref_grads rg;
    memset(&rg, 0, sizeof rg);
    for (int k = 0; k < MG_COUNT; k++) {
        if (!m->rows[k])
            continue;
        const size_t n = (size_t)(m->rows[k] * m->width[k]);
        rg.g[k] = malloc(n * sizeof(double));
        rg.tol[k] = malloc(n * sizeof(double));
        assert_non_null(rg.g[k]);
        assert_non_null(rg.tol[k]);
    }
    assert_int_equal(mref_mha_backward(&t->d, &t->w, &t->a, m->dy, &rg), 0);
    long bad = 0;
    for (int k = 0; k < MG_COUNT; k++) {
        if (!m->rows[k])
            continue;
        double err = st->err[k], ratio = st->ratio[k];
        for (int64_t r = 0; r < m->rows[k]; r++) {
            const float *row = m->view[k] + r * m->ld[k];
            for (int64_t e = 0; e < m->width[k]; e++) {
                const int64_t i = r * m->width[k] + e;
                if (cmp_elem((double)row[e], rg.g[k][i], rg.tol[k][i], &err, &ratio))
                    bad = report(bad, t, mref_grad_name[k], i, (double)row[e], rg.g[k][i],
                                 rg.tol[k][i]);
            }
            if (!all_sentinel(row + m->width[k], (size_t)(m->ld[k] - m->width[k]))) {
                if (bad < 6)
                    printf("FAIL %s row %lld: gap written (%s)\n", mref_grad_name[k],
                           (long long)r, mcase_str(&t->c));
                bad++;
            }
        }
        st->err[k] = err;
        st->ratio[k] = ratio;
    }
    for (int k = 0; k < MG_COUNT; k++)
        if (m->buf[k] && !all_sentinel(m->buf[k] + m->n[k] - MTAIL, MTAIL)) {
            printf("FAIL %s: written past the end (%s)\n", mref_grad_name[k], mcase_str(&t->c));
            bad++;
        }
    st->cases++;
    for (int k = 0; k < MG_COUNT; k++) {
        free(rg.g[k]);
        free(rg.tol[k]);
    }
    return bad;
}
