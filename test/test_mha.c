/*
 * test_mha.c -- the multi-head attention layer (attn_mha_*) against the
 * independent float64 reference of mha_reference.c, and every error path.
 *
 * Tolerances (derived in mha_reference.c; u = 2^-24, worst case, first
 * order, safety factor 1.25, so they hold for any BLAS, blocking or
 * summation order), per output element:
 *   |Y_e - y_e| <= 1.25 (sum_c dO_c |Wo_ec| + (E + 2) u (sum_c (|O_c| + dO_c)
 *                  |Wo_ec| + |bo_e|)) + 1e-30
 *     with dO_d = (p_rel + (nvis + 4) u + (vdim + 2) u) sum_j p_j |v_jd|~,
 *   |P_j - p_j| <= 1.25 p_rel p_j + 1e-30                 (per-head weights)
 *   |A_j - a_j| <= 1.25 (mean_h p_rel_h p_hj + (H + 2) u a_j) + 1e-30
 *                                                         (averaged weights)
 *   p_rel = expm1(2 E_s) + (nvis + 36) u,
 *   E_s = (E + kdim + dh + 10) u max_j (|scale| sum_d |q_d|~ |k_jd|~ + |bias_j|)
 * where |z|~ of a projected element is sum_k |x_k W_k| + |b| (the magnitude
 * of its terms, in double).  Empty rows (no visible key, padded queries)
 * must give exactly P = 0 and Y = b_o up to the same bound.  Every element
 * of out and weights outside the views (row gaps, a tail after each buffer)
 * must keep its sentinel bits; the gaps of the inputs x, key and value hold
 * NaN, which must not reach any output.
 *
 * Each family prints an "[accuracy]" line: the largest |error| of Y and of
 * the weights, and the largest error/tolerance ratio.
 *
 * Every accuracy case also runs again with 2 threads and a caller-supplied,
 * NaN-filled workspace, and must be bitwise identical.  test_threads checks
 * 1, 2, 4 and 0 (default) threads bitwise on larger shapes.
 *
 * ATTN_TEST_QUICK=1 (valgrind): fewer shapes, option sets and random cases.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <attn.h>

#include "harness.h"
#include "mha_reference.h"

/* ------------------------------------------------------------------ cases */

#define MMAXB 4
#define TAIL 16 /* sentinel (outputs) or NaN (inputs) elements after each buffer */

typedef struct mcase {
    int64_t B, L, S, E, H;
    int64_t Hkv, kdim, vdim;     /* as in the desc: 0 = default */
    int self, packed, has_bias;
    int64_t xs, ks, vs, os;      /* row strides as in the desc: 0 = dense */
    float scale;
    int align;
    int64_t wl, wr;
    int use_kv_lens, use_q_lens;
    int32_t kv_lens[MMAXB], q_lens[MMAXB];
    int mask_mode, mask_bcast;   /* attn_mask_mode, BC_* bits */
    double mask_keep;
    int use_bias, bias_bcast;
    double bias_ninf;
    int kpm_mode;                /* key_padding_mode */
    double kpm_keep;
    int weights;                 /* attn_weights_mode */
    int threads;
    double in_mag;
    uint64_t seed;
} mcase;

static mcase mc_cross(int64_t B, int64_t L, int64_t S, int64_t E, int64_t H)
{
    mcase c;
    memset(&c, 0, sizeof c);
    c.B = B;
    c.L = L;
    c.S = S;
    c.E = E;
    c.H = H;
    c.has_bias = 1;
    c.scale = NAN;
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.wl = c.wr = -1;
    c.mask_keep = 0.75;
    c.kpm_keep = 0.75;
    c.threads = 1;
    c.in_mag = 1.5;
    c.seed = 1;
    return c;
}

static mcase mc_self(int64_t B, int64_t L, int64_t E, int64_t H, int packed)
{
    mcase c = mc_cross(B, L, L, E, H);
    c.self = 1;
    c.packed = packed;
    return c;
}

static const char *mcase_str(const mcase *c)
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
             "kpm=%d weights=%d threads=%d seed=%llu",
             (long long)c->B, (long long)c->L, (long long)c->S, (long long)c->E,
             (long long)c->H, (long long)c->Hkv, (long long)c->kdim, (long long)c->vdim,
             c->self, c->packed, c->has_bias, (long long)c->xs, (long long)c->ks,
             (long long)c->vs, (long long)c->os, (double)c->scale, c->align,
             (long long)c->wl, (long long)c->wr, kl, ql, c->mask_mode, c->mask_bcast,
             c->use_bias, c->bias_bcast, c->bias_ninf, c->kpm_mode, c->weights, c->threads,
             (unsigned long long)c->seed);
    return buf;
}

/* Random lengths in [lo, full] for every batch (the first one full). */
static void set_lens(mcase *c, trng *r, int kv, int q)
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

typedef struct minst {
    mcase c;
    attn_mha_desc d;
    attn_mha_weights w;
    attn_mha_args a;
    int64_t Hkv, kdim, vdim, kvE, xs, ks, vs, os;
    float *in_proj, *in_bias, *wq, *wk, *wv, *bq, *bk, *bv, *wo, *bo;
    float *x, *key, *value, *out, *wts, *bias;
    uint8_t *mask, *kpm;
    size_t n_out, n_wts, n_wview;
    int32_t kv_lens[MMAXB], q_lens[MMAXB];
} minst;

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
 * (gaps and the TAIL). */
static float *input_rows(int64_t rows, int64_t width, int64_t ld, trng *r, double mag)
{
    size_t n = (size_t)(rows * ld) + TAIL;
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

static void minst_free(minst *t)
{
    float *fs[] = {t->in_proj, t->in_bias, t->wq, t->wk, t->wv, t->bq, t->bk, t->bv, t->wo,
                   t->bo, t->x, t->key, t->value, t->out, t->wts, t->bias};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++)
        free(fs[i]);
    free(t->mask);
    free(t->kpm);
    memset(t, 0, sizeof *t);
}

static void minst_clear(minst *t)
{
    fill_bits(t->out, t->n_out, TSENTINEL);
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

static int minst_untouched(const minst *t)
{
    return all_sentinel(t->out, t->n_out) && (!t->wts || all_sentinel(t->wts, t->n_wts));
}

/* Build every buffer (all weight layouts, whatever the case uses), the
 * desc and the args of c.  Returns 0 or -1. */
static int minst_build(minst *t, const mcase *c)
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
    t->in_proj = falloc((size_t)(3 * E * E));
    t->in_bias = falloc((size_t)(3 * E));
    t->wq = falloc((size_t)(E * E));
    t->wk = falloc((size_t)(kvE * kdim));
    t->wv = falloc((size_t)(kvE * vdim));
    t->bq = falloc((size_t)E);
    t->bk = falloc((size_t)kvE);
    t->bv = falloc((size_t)kvE);
    t->wo = falloc((size_t)(E * E));
    t->bo = falloc((size_t)E);
    if (!t->in_proj || !t->in_bias || !t->wq || !t->wk || !t->wv || !t->bq || !t->bk ||
        !t->bv || !t->wo || !t->bo)
        return -1;
    fill_uniform(t->in_proj, (size_t)(3 * E * E), &r, ae);
    fill_uniform(t->in_bias, (size_t)(3 * E), &r, 0.5);
    fill_uniform(t->wq, (size_t)(E * E), &r, ae);
    fill_uniform(t->wk, (size_t)(kvE * kdim), &r, ak);
    fill_uniform(t->wv, (size_t)(kvE * vdim), &r, av);
    fill_uniform(t->bq, (size_t)E, &r, 0.5);
    fill_uniform(t->bk, (size_t)kvE, &r, 0.5);
    fill_uniform(t->bv, (size_t)kvE, &r, 0.5);
    fill_uniform(t->wo, (size_t)(E * E), &r, ae);
    fill_uniform(t->bo, (size_t)E, &r, 0.5);

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
    t->n_out = (size_t)(B * L * t->os) + TAIL;
    t->out = falloc(t->n_out);
    if (!t->out)
        return -1;
    if (c->weights != ATTN_WEIGHTS_NONE) {
        t->n_wview = (size_t)(B * L * S) * (c->weights == ATTN_WEIGHTS_PER_HEAD ? (size_t)H : 1u);
        t->n_wts = t->n_wview + TAIL;
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
    return 0;
}

/* Plan, execute and destroy.  ws_mode 0: workspace NULL; 1: a caller
 * workspace of exactly attn_mha_workspace_size bytes, filled with NaN. */
static attn_status minst_run(minst *t, int ws_mode)
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

typedef struct mstats {
    const char *family;
    int cases;
    double err_y, err_w, ratio;
} mstats;

static void mstats_init(mstats *s, const char *family)
{
    memset(s, 0, sizeof *s);
    s->family = family;
}

static void mstats_print(const mstats *s)
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
static long minst_check(const minst *t, mstats *st)
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
    assert_int_equal(mref_mha(&t->d, &t->w, &t->a, &ro), 0);

    long bad = 0;
    double ey = 0.0, ew = 0.0, ratio = st->ratio;
    for (int64_t r = 0; r < B * L; r++) {
        for (int64_t e = 0; e < E; e++) {
            const double lib = (double)t->out[r * t->os + e];
            const int64_t k = r * E + e;
            if (cmp_elem(lib, ro.y[k], ro.y_tol[k], &ey, &ratio))
                bad = report(bad, t, "Y", k, lib, ro.y[k], ro.y_tol[k]);
        }
        if (!all_sentinel(t->out + r * t->os + E, (size_t)(t->os - E))) {
            if (bad < 6)
                printf("FAIL out row %lld: gap after the row written (%s)\n", (long long)r,
                       mcase_str(c));
            bad++;
        }
    }
    if (!all_sentinel(t->out + B * L * t->os, TAIL)) {
        printf("FAIL out: written past the last row (%s)\n", mcase_str(c));
        bad++;
    }
    if (c->weights != ATTN_WEIGHTS_NONE) {
        const double *ref = ro.p ? ro.p : ro.avg, *tol = ro.p ? ro.p_tol : ro.avg_tol;
        for (size_t k = 0; k < t->n_wview; k++)
            if (cmp_elem((double)t->wts[k], ref[k], tol[k], &ew, &ratio))
                bad = report(bad, t, ro.p ? "P" : "avgP", (int64_t)k, (double)t->wts[k], ref[k],
                             tol[k]);
        if (!all_sentinel(t->wts + t->n_wview, TAIL)) {
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
typedef struct msnap {
    float *out, *wts;
    size_t n_out, n_wts;
} msnap;

static void msnap_take(msnap *s, const minst *t)
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
}

static int msnap_equal(const msnap *s, const minst *t)
{
    return memcmp(s->out, t->out, s->n_out * sizeof(float)) == 0 &&
           (!s->n_wts || memcmp(s->wts, t->wts, s->n_wts * sizeof(float)) == 0);
}

static void msnap_free(msnap *s)
{
    free(s->out);
    free(s->wts);
}

/* Run c against the reference (threads = c.threads, workspace NULL), then
 * again with 2 threads and a caller workspace full of NaN: bitwise equal.
 * Returns the number of failures. */
static int run_case(const mcase *c, mstats *st)
{
    minst t;
    if (minst_build(&t, c) != 0) {
        printf("FAIL: cannot build %s\n", mcase_str(c));
        minst_free(&t);
        return 1;
    }
    int fails = 0;
    attn_status s = minst_run(&t, 0);
    if (s != ATTN_OK) {
        printf("FAIL: %s: %s\n", attn_status_str(s), mcase_str(c));
        minst_free(&t);
        return 1;
    }
    fails += minst_check(&t, st) != 0;
    msnap first;
    msnap_take(&first, &t);
    minst_clear(&t);
    t.d.threads = 2;
    s = minst_run(&t, 1);
    if (s != ATTN_OK || !msnap_equal(&first, &t)) {
        printf("FAIL: threads=2 with caller workspace: %s, %s bitwise: %s\n",
               attn_status_str(s), msnap_equal(&first, &t) ? "equal" : "differs",
               mcase_str(c));
        fails++;
    }
    msnap_free(&first);
    minst_free(&t);
    return fails;
}

#define FINISH(st, fails)                                                   \
    do {                                                                    \
        mstats_print(st);                                                   \
        if ((fails) != 0)                                                   \
            fail_msg("%d case(s) failed in %s", (fails), (st)->family);     \
    } while (0)

/* ------------------------------------------------------- accuracy families */

/* Self-attention shapes {B, L, E, H}; several GEMM row blocks (128 rows)
 * when B * L > 128. */
static const int64_t self_shapes[][4] = {
    { 2, 5, 16, 4 }, { 1, 1, 8, 1 }, { 2, 9, 12, 3 }, { 3, 50, 32, 4 },
    { 1, 130, 8, 2 }, { 2, 17, 64, 8 },
};
#define NSELF (sizeof self_shapes / sizeof self_shapes[0])

static void self_family(int packed, const char *name, uint64_t seed)
{
    mstats st;
    mstats_init(&st, name);
    int fails = 0;
    const size_t ns = tquick() ? 4 : NSELF;
    for (size_t s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = self_shapes[s];
            mcase c = mc_self(x[0], x[1], x[2], x[3], packed);
            c.seed = seed + 10 * s + (uint64_t)k;
            if (k == 0) {
                c.weights = packed ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE;
            } else {
                c.kpm_mode = packed ? ATTN_MASK_DROP_NONZERO : ATTN_MASK_KEEP_NONZERO;
                c.weights = packed ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            }
            fails += run_case(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_self_packed(void **state)
{
    (void)state;
    self_family(1, "self, packed (fused)", 1000);
}

static void test_self_separate(void **state)
{
    (void)state;
    self_family(0, "self, separate weights", 1100);
}

static void test_cross_dims(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "cross, kdim/vdim != E");
    int fails = 0;
    /* B, L, S, E, H, kdim, vdim */
    static const int64_t shapes[][7] = {
        { 2, 7, 13, 24, 4, 10, 17 },
        { 1, 3, 40, 16, 2, 5, 33 },
        { 2, 1, 9, 8, 8, 3, 2 },      /* dh = 1 */
        { 1, 6, 6, 12, 2, 12, 20 },   /* kdim given equal to E */
        { 3, 20, 150, 32, 4, 48, 7 }, /* 450 key rows: 4 row blocks */
    };
    const size_t ns = tquick() ? 3 : sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = mc_cross(x[0], x[1], x[2], x[3], x[4]);
            c.kdim = x[5];
            c.vdim = x[6];
            c.seed = 1200 + 10 * s + (uint64_t)k;
            c.weights = k ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            if (k)
                c.kpm_mode = ATTN_MASK_DROP_NONZERO;
            fails += run_case(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_cross_packed(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "cross, packed in_proj");
    int fails = 0;
    /* B, L, S, E, H */
    static const int64_t shapes[][5] = {
        { 2, 7, 13, 24, 4 }, { 1, 5, 3, 16, 2 }, { 1, 1, 1, 4, 1 }, { 2, 64, 70, 32, 8 },
    };
    const size_t ns = tquick() ? 3 : sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = mc_cross(x[0], x[1], x[2], x[3], x[4]);
            c.packed = 1;
            if (s == 1) { /* kdim, vdim and Hkv given explicitly */
                c.kdim = c.vdim = c.E;
                c.Hkv = c.H;
            }
            c.seed = 1300 + 10 * s + (uint64_t)k;
            c.weights = k ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            if (k)
                c.kpm_mode = ATTN_MASK_KEEP_NONZERO;
            fails += run_case(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_no_bias(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "no bias (has_bias = 0)");
    int fails = 0;
    mcase cs[6];
    cs[0] = mc_self(2, 6, 16, 4, 1);
    cs[1] = mc_self(2, 6, 16, 4, 0);
    cs[2] = mc_cross(2, 5, 9, 16, 4);
    cs[2].kdim = 7;
    cs[2].vdim = 11;
    cs[3] = mc_cross(2, 5, 9, 16, 2);
    cs[3].packed = 1;
    cs[4] = mc_self(2, 6, 16, 4, 0);
    cs[4].Hkv = 2;
    cs[5] = mc_self(1, 140, 16, 2, 1);
    for (int i = 0; i < 6; i++) {
        cs[i].has_bias = 0;
        cs[i].weights = i % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        cs[i].seed = 1400 + (uint64_t)i;
        fails += run_case(&cs[i], &st);
    }
    FINISH(&st, fails);
}

static void test_gqa(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "GQA (num_kv_heads < H)");
    int fails = 0;
    /* B, L, S, E, H, Hkv, self, kdim, vdim */
    static const int64_t shapes[][9] = {
        { 2, 9, 9, 32, 8, 2, 1, 0, 0 },
        { 2, 6, 11, 32, 8, 1, 0, 20, 12 },   /* MQA */
        { 1, 40, 40, 48, 6, 3, 1, 0, 0 },
        { 2, 5, 30, 64, 16, 4, 0, 64, 64 },
        { 1, 3, 200, 16, 4, 2, 0, 9, 9 },    /* 200 key rows: 2 row blocks */
    };
    const size_t ns = tquick() ? 3 : sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < ns; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = x[6] ? mc_self(x[0], x[1], x[3], x[4], 0)
                           : mc_cross(x[0], x[1], x[2], x[3], x[4]);
            c.Hkv = x[5];
            c.kdim = x[7];
            c.vdim = x[8];
            c.seed = 1500 + 10 * s + (uint64_t)k;
            if (k == 0) {
                c.weights = ATTN_WEIGHTS_PER_HEAD;
            } else {
                c.weights = ATTN_WEIGHTS_AVERAGED;
                c.kpm_mode = ATTN_MASK_DROP_NONZERO;
                c.align = ATTN_ALIGN_BOTTOM_RIGHT;
                c.wr = 0;
            }
            fails += run_case(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_causal(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "causal / window");
    int fails = 0;
    trng r;
    trng_seed(&r, 1600);
    mcase cs[12];
    int n = 0;
    cs[n++] = mc_self(2, 12, 16, 4, 1);                 /* top-left causal */
    cs[n] = mc_self(2, 12, 16, 4, 0);                   /* bottom-right, L == S */
    cs[n++].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[n++] = mc_cross(2, 5, 12, 16, 4);                /* TL, L < S */
    cs[n] = mc_cross(2, 5, 12, 16, 4);                  /* BR, L < S */
    cs[n++].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[n++] = mc_cross(2, 12, 5, 16, 2);                /* TL, L > S */
    cs[n] = mc_cross(2, 12, 5, 16, 2);                  /* BR, L > S: empty rows */
    cs[n++].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[n] = mc_cross(3, 1, 20, 16, 4);                  /* decode step */
    cs[n++].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[n] = mc_cross(3, 8, 15, 16, 4);                  /* BR with per-batch lengths */
    cs[n].align = ATTN_ALIGN_BOTTOM_RIGHT;
    set_lens(&cs[n++], &r, 1, 1);
    cs[n] = mc_self(3, 10, 16, 4, 1);                   /* TL with lengths */
    set_lens(&cs[n++], &r, 1, 1);
    cs[n] = mc_self(2, 20, 16, 2, 1);                   /* sliding window */
    cs[n].wl = 3;
    cs[n++].wr = 0;
    cs[n] = mc_cross(2, 9, 14, 16, 2);                  /* BR band */
    cs[n].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[n].wl = 2;
    cs[n++].wr = 1;
    cs[n] = mc_self(1, 140, 16, 2, 1);                  /* causal over 2 row blocks */
    cs[n].kpm_mode = ATTN_MASK_DROP_NONZERO;
    n++;
    for (int i = 0; i < n; i++) {
        if (!(i == 9 || i == 10))
            cs[i].wr = 0;
        cs[i].weights = i % 3 == 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        cs[i].seed = 1600 + (uint64_t)i;
        if (tquick() && i % 2)
            continue;
        fails += run_case(&cs[i], &st);
    }
    FINISH(&st, fails);
}

static void test_key_padding(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "key padding / masks / bias");
    int fails = 0;
    int idx = 0;
    const int modes[2] = { ATTN_MASK_KEEP_NONZERO, ATTN_MASK_DROP_NONZERO };
    /* the base: self packed or cross with its own kdim/vdim, alternating */
#define BASE(i)                                                            \
    ((i) % 2 ? mc_self(2, 7, 16, 4, 1) : mc_cross(2, 6, 9, 16, 4))
    /* key padding alone, both polarities */
    for (int km = 0; km < 2; km++)
        for (int b = 0; b < 2; b++) {
            mcase c = BASE(b);
            if (!c.self) {
                c.kdim = 12;
                c.vdim = 20;
            }
            c.kpm_mode = modes[km];
            c.weights = ATTN_WEIGHTS_PER_HEAD;
            c.seed = 1700 + (uint64_t)idx++;
            fails += run_case(&c, &st);
        }
    /* element mask alone and combined with key padding: both polarities
     * each, broadcast over heads or not */
    static const int bcs[] = { 0, BC_HEAD, BC_BATCH | BC_HEAD, BC_SEQ, BC_BATCH | BC_SEQ };
    const int nbc = tquick() ? 2 : (int)(sizeof bcs / sizeof bcs[0]);
    for (int mm = 0; mm < 2; mm++)
        for (int km = -1; km < 2; km++)
            for (int bi = 0; bi < nbc; bi++) {
                mcase c = BASE(idx);
                c.mask_mode = modes[mm];
                c.mask_bcast = bcs[bi];
                c.mask_keep = 0.8;
                if (km >= 0)
                    c.kpm_mode = modes[km];
                c.weights = idx % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
                c.seed = 1700 + (uint64_t)idx++;
                fails += run_case(&c, &st);
            }
    /* additive float bias alone and with key padding */
    static const int bbcs[] = { 0, BC_HEAD, BC_BATCH | BC_HEAD | BC_SEQ };
    for (int km = -1; km < 2; km++)
        for (int bi = 0; bi < 3; bi++) {
            mcase c = BASE(idx);
            c.use_bias = 1;
            c.bias_bcast = bbcs[bi];
            c.bias_ninf = 0.1;
            if (km >= 0)
                c.kpm_mode = modes[km];
            c.weights = idx % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            c.seed = 1700 + (uint64_t)idx++;
            fails += run_case(&c, &st);
        }
    /* all three, with lengths and a causal window; sparse masks (empty rows) */
    for (int k = 0; k < 4; k++) {
        mcase c = BASE(k);
        trng r;
        trng_seed(&r, 1790 + (uint64_t)k);
        c.mask_mode = modes[k % 2];
        c.mask_bcast = k < 2 ? 0 : BC_HEAD;
        c.kpm_mode = modes[k / 2];
        c.use_bias = 1;
        c.bias_bcast = k % 2 ? BC_BATCH : 0;
        c.bias_ninf = 0.05;
        c.mask_keep = k == 3 ? 0.3 : 0.8;
        c.kpm_keep = k == 3 ? 0.4 : 0.8;
        set_lens(&c, &r, 1, k >= 2);
        c.wr = k == 1 ? 0 : -1;
        c.weights = k % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        c.seed = 1700 + (uint64_t)idx++;
        fails += run_case(&c, &st);
    }
#undef BASE
    FINISH(&st, fails);
}

static void test_lengths(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "kv_lens / q_lens");
    int fails = 0;
    trng r;
    trng_seed(&r, 1800);
    for (int k = 0; k < 8; k++) {
        mcase c = k < 4 ? mc_self(3, 10, 16, 4, k % 2) : mc_cross(3, 6, 14, 16, 2);
        if (!c.self) {
            c.kdim = 9;
            c.vdim = 13;
            c.packed = 0;
        }
        const int kv = k % 4 != 1, q = k % 4 != 0;
        set_lens(&c, &r, kv, q);
        if (k == 3 || k == 7) { /* explicit zeros */
            if (c.use_kv_lens)
                c.kv_lens[1] = 0;
            if (c.use_q_lens)
                c.q_lens[2] = 0;
        }
        if (k == 6)
            c.kpm_mode = ATTN_MASK_DROP_NONZERO;
        c.weights = k % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        c.seed = 1800 + (uint64_t)k;
        fails += run_case(&c, &st);
    }
    FINISH(&st, fails);
}

static void test_strides(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "row strides (NaN gaps)");
    int fails = 0;
    mcase cs[8];
    int n = 0;
    cs[n] = mc_self(2, 6, 16, 4, 1);
    cs[n].xs = 19;
    cs[n++].os = 21;
    cs[n] = mc_self(2, 6, 16, 4, 0);
    cs[n].xs = 17;
    cs[n++].os = 32;
    cs[n] = mc_cross(2, 5, 9, 16, 4);
    cs[n].kdim = 10;
    cs[n].vdim = 6;
    cs[n].xs = 18;
    cs[n].ks = 15;
    cs[n].vs = 7;
    cs[n++].os = 23;
    cs[n] = mc_cross(2, 5, 9, 16, 2);
    cs[n].packed = 1;
    cs[n].xs = 20;
    cs[n].ks = 20;
    cs[n].vs = 25;
    cs[n++].os = 17;
    cs[n] = mc_cross(2, 4, 11, 32, 8);
    cs[n].Hkv = 2;
    cs[n].kdim = 12;
    cs[n].vdim = 12;
    cs[n].ks = 13;
    cs[n].vs = 40;
    cs[n++].os = 33;
    cs[n] = mc_cross(2, 4, 11, 16, 4);   /* strides given equal to the rows */
    cs[n].kdim = 5;
    cs[n].vdim = 3;
    cs[n].xs = 16;
    cs[n].ks = 5;
    cs[n].vs = 3;
    cs[n++].os = 16;
    cs[n] = mc_self(2, 70, 16, 4, 1);    /* strided, 2 row blocks */
    cs[n].xs = 19;
    cs[n].os = 20;
    cs[n++].kpm_mode = ATTN_MASK_DROP_NONZERO;
    cs[n] = mc_cross(1, 3, 150, 8, 2);   /* strided keys, 2 row blocks */
    cs[n].kdim = 4;
    cs[n].ks = 9;
    cs[n].vs = 11;
    cs[n++].os = 9;
    for (int i = 0; i < n; i++) {
        cs[i].weights = i % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        cs[i].seed = 1900 + (uint64_t)i;
        fails += run_case(&cs[i], &st);
    }
    FINISH(&st, fails);
}

static void test_weights_modes(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "weights NONE/PER_HEAD/AVG");
    int fails = 0;
    trng r;
    trng_seed(&r, 2000);
    for (int k = 0; k < 4; k++)
        for (int wm = 0; wm < 3; wm++) {
            mcase c;
            switch (k) {
            case 0:
                c = mc_self(2, 6, 16, 4, 1);
                c.kpm_mode = ATTN_MASK_DROP_NONZERO;
                break;
            case 1:
                c = mc_cross(2, 5, 8, 16, 4);
                c.kdim = 7;
                set_lens(&c, &r, 0, 1);
                c.q_lens[1] = 2;
                break;
            case 2:
                c = mc_self(2, 4, 8, 1, 0); /* H = 1: averaged == per head */
                break;
            default:
                c = mc_cross(2, 5, 12, 32, 8);
                c.Hkv = 2;
                c.mask_mode = ATTN_MASK_DROP_NONZERO;
                c.mask_bcast = BC_BATCH;
                c.mask_keep = 0.7;
                break;
            }
            c.weights = wm;
            c.seed = 2000 + 10 * (uint64_t)k;
            fails += run_case(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_scale(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "custom scale");
    int fails = 0;
    const float scales[] = { 0.3f, -0.7f, 0.0f, 2.5f, 1e-3f };
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        mcase c = k % 2 ? mc_cross(2, 5, 9, 16, 4) : mc_self(2, 6, 16, 4, 1);
        c.scale = scales[k];
        c.weights = ATTN_WEIGHTS_PER_HEAD;
        c.seed = 2100 + (uint64_t)k;
        fails += run_case(&c, &st);
    }
    FINISH(&st, fails);
}

/* Random combinations of every option (shapes, layouts, strides, masks,
 * bias, lengths, window, scale, weights). */
static void test_random_mix(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "random mix");
    int fails = 0;
    trng r;
    trng_seed(&r, 2400);
    const int ncases = tquick() ? 25 : 1500;
    static const int64_t heads[] = { 1, 2, 3, 4, 6, 8 };
    for (int k = 0; k < ncases; k++) {
        const int64_t H = heads[trng_int(&r, 0, 5)], dh = trng_int(&r, 1, 8);
        const int64_t B = trng_int(&r, 1, 3), L = trng_int(&r, 1, 20);
        int64_t Hkv;
        do
            Hkv = trng_int(&r, 1, H);
        while (H % Hkv != 0);
        mcase c;
        if (trng_bool(&r, 0.5)) {
            c = mc_self(B, L, H * dh, H, 0);
        } else {
            c = mc_cross(B, L, trng_int(&r, 1, 25), H * dh, H);
            if (trng_bool(&r, 0.6)) {
                c.kdim = trng_int(&r, 1, 20);
                c.vdim = trng_int(&r, 1, 20);
            }
        }
        c.Hkv = trng_bool(&r, 0.5) ? Hkv : 0;
        const int64_t kd = c.kdim ? c.kdim : c.E, vd = c.vdim ? c.vdim : c.E;
        if ((c.Hkv == 0 || c.Hkv == H) && kd == c.E && vd == c.E)
            c.packed = trng_bool(&r, 0.5);
        c.has_bias = trng_bool(&r, 0.7);
        if (trng_bool(&r, 0.3))
            c.xs = c.E + trng_int(&r, 0, 5);
        if (!c.self && trng_bool(&r, 0.3))
            c.ks = kd + trng_int(&r, 0, 5);
        if (!c.self && trng_bool(&r, 0.3))
            c.vs = vd + trng_int(&r, 0, 5);
        if (trng_bool(&r, 0.3))
            c.os = c.E + trng_int(&r, 0, 5);
        if (trng_bool(&r, 0.2))
            c.scale = (float)trng_uniform(&r, -1.0, 1.5);
        c.align = (int)trng_int(&r, 0, 1);
        c.wl = trng_bool(&r, 0.6) ? -1 : trng_int(&r, 0, 6);
        c.wr = trng_bool(&r, 0.5) ? -1 : trng_int(&r, 0, 3);
        set_lens(&c, &r, trng_bool(&r, 0.3), trng_bool(&r, 0.3));
        c.mask_mode = (int)trng_int(&r, 0, 2);
        c.mask_bcast = (int)trng_int(&r, 0, 7);
        c.mask_keep = trng_uniform(&r, 0.5, 1.0);
        c.use_bias = trng_bool(&r, 0.3);
        c.bias_bcast = (int)trng_int(&r, 0, 7);
        c.bias_ninf = trng_bool(&r, 0.5) ? 0.0 : 0.1;
        c.kpm_mode = (int)trng_int(&r, 0, 2);
        c.kpm_keep = trng_uniform(&r, 0.5, 1.0);
        c.weights = (int)trng_int(&r, 0, 2);
        c.in_mag = trng_uniform(&r, 0.5, 3.0);
        c.seed = 2400 + (uint64_t)k;
        fails += run_case(&c, &st);
    }
    FINISH(&st, fails);
}

/* 1, 2, 4 and 0 (default) threads, bitwise in out and weights; the first
 * against the reference. */
static void test_threads(void **state)
{
    (void)state;
    mstats st;
    mstats_init(&st, "threads 1/2/4/0 bitwise");
    int fails = 0;
    trng r;
    trng_seed(&r, 2200);
    mcase cs[3];
    cs[0] = mc_self(2, 70, 32, 4, 1);
    cs[0].kpm_mode = ATTN_MASK_DROP_NONZERO;
    cs[0].weights = ATTN_WEIGHTS_AVERAGED;
    cs[1] = mc_cross(2, 40, 150, 32, 8);
    cs[1].Hkv = 2;
    cs[1].kdim = 24;
    cs[1].vdim = 40;
    cs[1].mask_mode = ATTN_MASK_KEEP_NONZERO;
    cs[1].mask_bcast = BC_HEAD;
    cs[1].mask_keep = 0.9;
    cs[1].kpm_mode = ATTN_MASK_DROP_NONZERO;
    cs[1].use_bias = 1;
    set_lens(&cs[1], &r, 1, 0);
    cs[1].weights = ATTN_WEIGHTS_PER_HEAD;
    cs[2] = mc_self(3, 50, 16, 2, 0);
    cs[2].align = ATTN_ALIGN_BOTTOM_RIGHT;
    cs[2].wr = 0;
    set_lens(&cs[2], &r, 0, 1);
    cs[2].weights = ATTN_WEIGHTS_AVERAGED;
    cs[2].xs = 20;
    cs[2].os = 18;
    const int threads[] = { 1, 2, 4, 0 };
    const int nt = tquick() ? 2 : 4;
    for (int i = 0; i < 3; i++) {
        cs[i].seed = 2200 + (uint64_t)i;
        minst t;
        assert_int_equal(minst_build(&t, &cs[i]), 0);
        msnap first;
        memset(&first, 0, sizeof first);
        for (int x = 0; x < nt; x++) {
            minst_clear(&t);
            t.d.threads = threads[x];
            attn_status s = minst_run(&t, 0);
            if (s != ATTN_OK) {
                printf("FAIL threads=%d: %s: %s\n", threads[x], attn_status_str(s),
                       mcase_str(&t.c));
                fails++;
            } else if (x == 0) {
                fails += minst_check(&t, &st) != 0;
                msnap_take(&first, &t);
            } else if (!msnap_equal(&first, &t)) {
                printf("FAIL threads=%d differs bitwise from threads=1: %s\n", threads[x],
                       mcase_str(&t.c));
                fails++;
            }
        }
        msnap_free(&first);
        minst_free(&t);
    }
    FINISH(&st, fails);
}

/* A caller workspace (attn_mha_workspace_size bytes, 64-byte aligned,
 * filled with garbage, reused) gives bitwise the result of workspace NULL. */
static void test_workspace(void **state)
{
    (void)state;
    int fails = 0;
    mcase cs[5];
    cs[0] = mc_self(2, 6, 16, 4, 1);                 /* fused */
    cs[1] = mc_cross(2, 5, 9, 16, 4);                /* separate, cross */
    cs[1].kdim = 7;
    cs[1].weights = ATTN_WEIGHTS_AVERAGED;
    cs[2] = mc_self(2, 6, 16, 4, 0);                 /* combined mask */
    cs[2].mask_mode = ATTN_MASK_KEEP_NONZERO;
    cs[2].kpm_mode = ATTN_MASK_DROP_NONZERO;
    cs[2].weights = ATTN_WEIGHTS_PER_HEAD;
    cs[3] = cs[2];                                   /* combined, head broadcast */
    cs[3].mask_bcast = BC_HEAD;
    cs[3].weights = ATTN_WEIGHTS_AVERAGED;
    cs[4] = mc_cross(1, 3, 140, 16, 4);              /* GQA, strided */
    cs[4].Hkv = 1;
    cs[4].ks = 20;
    cs[4].os = 17;
    for (int i = 0; i < 5; i++) {
        cs[i].seed = 2300 + (uint64_t)i;
        minst t;
        assert_int_equal(minst_build(&t, &cs[i]), 0);
        assert_int_equal(minst_run(&t, 0), ATTN_OK);
        msnap ref;
        msnap_take(&ref, &t);
        attn_mha_plan *plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        size_t bytes = 0;
        assert_int_equal(attn_mha_workspace_size(plan, &bytes), ATTN_OK);
        printf("  workspace of case %d: %zu bytes\n", i, bytes);
        const size_t cap = (bytes + 63) / 64 * 64 + 128;
        unsigned char *ws = aligned_alloc(64, cap);
        assert_non_null(ws);
        const unsigned char fills[] = { 0xFF, 0x00, 0x7F };
        for (int rep = 0; rep < 3; rep++) {
            if (rep < 2) /* rep 2 reuses the workspace of rep 1 as it is */
                memset(ws, fills[rep], cap);
            minst_clear(&t);
            /* exact size; then the same at an offset of 64 with more room */
            attn_status s = attn_mha_execute(plan, &t.w, &t.a, rep == 2 ? ws + 64 : ws,
                                             rep == 2 ? cap - 64 : bytes);
            if (s != ATTN_OK || !msnap_equal(&ref, &t)) {
                printf("FAIL case %d rep %d: caller workspace: %s, %s\n", i, rep,
                       attn_status_str(s), msnap_equal(&ref, &t) ? "equal" : "differs");
                fails++;
            }
        }
        /* NULL workspace with a nonzero byte count: the count is ignored */
        minst_clear(&t);
        if (attn_mha_execute(plan, &t.w, &t.a, NULL, 12345) != ATTN_OK ||
            !msnap_equal(&ref, &t)) {
            printf("FAIL case %d: NULL workspace with a byte count\n", i);
            fails++;
        }
        free(ws);
        attn_mha_plan_destroy(plan);
        msnap_free(&ref);
        minst_free(&t);
    }
    if (fails)
        fail_msg("%d workspace failure(s)", fails);
}

/* ---------------------------------------------------------------- errors */

static int g_fail;

static const char *sname(attn_status s)
{
    static char buf[4][96];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%d (%s)", (int)s, attn_status_str(s));
    return buf[k];
}

/* plan_create(bad) must fail with want (or want2 >= 0) and leave *plan. */
static void expect_plan_fail2(const attn_mha_desc *bad, attn_status want, int want2,
                              const char *what)
{
    static int marker;
    attn_mha_plan *plan = (attn_mha_plan *)&marker;
    attn_status s = attn_mha_plan_create(&plan, bad);
    if (s == ATTN_OK) {
        printf("FAIL %s: plan_create accepted it (want %s)\n", what, sname(want));
        if (plan != (attn_mha_plan *)&marker)
            attn_mha_plan_destroy(plan);
        g_fail++;
        return;
    }
    if (!(s == want || (want2 >= 0 && s == (attn_status)want2))) {
        printf("FAIL %s: plan_create returned %s, want %s\n", what, sname(s), sname(want));
        g_fail++;
    }
    if (plan != (attn_mha_plan *)&marker) {
        printf("FAIL %s: plan_create wrote *plan on failure\n", what);
        g_fail++;
    }
}

static void expect_plan_fail(const attn_mha_desc *bad, attn_status want, const char *what)
{
    expect_plan_fail2(bad, want, -1, what);
}

static void expect_plan_ok(const attn_mha_desc *good, const char *what)
{
    attn_mha_plan *plan = NULL;
    attn_status s = attn_mha_plan_create(&plan, good);
    if (s != ATTN_OK || !plan) {
        printf("FAIL %s: plan_create returned %s, want ATTN_OK\n", what, sname(s));
        g_fail++;
    }
    attn_mha_plan_destroy(plan);
}

/* execute must fail with want and leave out and weights bitwise alone. */
static void expect_exec_fail(minst *t, const attn_mha_plan *plan, const attn_mha_weights *w,
                             const attn_mha_args *a, void *ws, size_t wsb, attn_status want,
                             const char *what)
{
    minst_clear(t);
    attn_status s = attn_mha_execute(plan, w, a, ws, wsb);
    if (s != want) {
        printf("FAIL %s: execute returned %s, want %s\n", what, sname(s), sname(want));
        g_fail++;
    }
    if (!minst_untouched(t)) {
        printf("FAIL %s: out or weights written by a failing execute\n", what);
        g_fail++;
    }
}

static void expect_exec_ok(minst *t, const attn_mha_plan *plan, const attn_mha_weights *w,
                           const attn_mha_args *a, const char *what)
{
    minst_clear(t);
    attn_status s = attn_mha_execute(plan, w, a, NULL, 0);
    if (s != ATTN_OK) {
        printf("FAIL %s: execute returned %s, want ATTN_OK\n", what, sname(s));
        g_fail++;
    }
}

/* Every option on: cross-attention, separate weights, GQA, kdim/vdim, both
 * lengths, mask, bias, key padding, per-head weights. */
static mcase err_cross(void)
{
    mcase c = mc_cross(2, 5, 7, 16, 4);
    c.Hkv = 2;
    c.kdim = 6;
    c.vdim = 9;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 7;
    c.kv_lens[1] = 3;
    c.use_q_lens = 1;
    c.q_lens[0] = 5;
    c.q_lens[1] = 2;
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.use_bias = 1;
    c.bias_bcast = BC_HEAD;
    c.kpm_mode = ATTN_MASK_DROP_NONZERO;
    c.weights = ATTN_WEIGHTS_PER_HEAD;
    c.seed = 3000;
    return c;
}

/* Self-attention, packed in_proj, with the same options. */
static mcase err_self(void)
{
    mcase c = mc_self(2, 5, 16, 4, 1);
    c.use_kv_lens = 1;
    c.kv_lens[0] = 5;
    c.kv_lens[1] = 3;
    c.use_q_lens = 1;
    c.q_lens[0] = 5;
    c.q_lens[1] = 4;
    c.mask_mode = ATTN_MASK_DROP_NONZERO;
    c.mask_bcast = BC_BATCH;
    c.use_bias = 1;
    c.kpm_mode = ATTN_MASK_KEEP_NONZERO;
    c.weights = ATTN_WEIGHTS_AVERAGED;
    c.seed = 3001;
    return c;
}

static void test_desc_defaults(void **state)
{
    (void)state;
    attn_mha_desc d;
    memset(&d, 0xAB, sizeof d);
    assert_int_equal(attn_mha_desc_init(&d), ATTN_OK);
    assert_true(d.embed_dim == 0 && d.num_heads == 0 && d.num_kv_heads == 0 && d.kdim == 0 &&
                d.vdim == 0 && d.batch == 0 && d.q_len == 0 && d.kv_len == 0);
    assert_int_equal(d.self_attention, 0);
    assert_int_equal(d.packed_in_proj, 0);
    assert_int_equal(d.has_bias, 1);
    assert_true(d.x_stride == 0 && d.key_stride == 0 && d.value_stride == 0 &&
                d.out_stride == 0);
    assert_true(isnan(d.scale));
    assert_int_equal(d.align, ATTN_ALIGN_TOP_LEFT);
    assert_true(d.window_left < 0 && d.window_right < 0);
    assert_int_equal(d.use_kv_lens, 0);
    assert_int_equal(d.use_q_lens, 0);
    assert_int_equal(d.mask_mode, ATTN_MASK_NONE);
    assert_int_equal(d.use_bias, 0);
    assert_int_equal(d.key_padding_mode, ATTN_MASK_NONE);
    assert_int_equal(d.weights, ATTN_WEIGHTS_NONE);
    assert_int_equal(d.threads, 0);
    for (int i = 0; i < 16; i++)
        assert_true(d.reserved[i] == 0);
    assert_int_equal(attn_mha_desc_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_plan_destroy(NULL), ATTN_OK);
}

static void test_err_null(void **state)
{
    (void)state;
    g_fail = 0;
    for (int v = 0; v < 2; v++) {
        mcase c = v ? err_self() : err_cross();
        minst t;
        assert_int_equal(minst_build(&t, &c), 0);
        static int marker;
        attn_mha_plan *plan = (attn_mha_plan *)&marker;
        assert_int_equal(attn_mha_plan_create(NULL, &t.d), ATTN_ERR_NULL_ARGUMENT);
        assert_int_equal(attn_mha_plan_create(&plan, NULL), ATTN_ERR_NULL_ARGUMENT);
        assert_ptr_equal(plan, &marker);
        plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        size_t bytes = 777;
        assert_int_equal(attn_mha_workspace_size(NULL, &bytes), ATTN_ERR_NULL_ARGUMENT);
        assert_int_equal(bytes, 777);
        assert_int_equal(attn_mha_workspace_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);

        expect_exec_fail(&t, NULL, &t.w, &t.a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, "NULL plan");
        expect_exec_fail(&t, plan, NULL, &t.a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, "NULL weights");
        expect_exec_fail(&t, plan, &t.w, NULL, NULL, 0, ATTN_ERR_NULL_ARGUMENT, "NULL args");

        /* every weight the plan uses */
        const char *wn[] = { "in_proj_weight", "in_proj_bias", "q_weight", "k_weight",
                             "v_weight", "q_bias", "k_bias", "v_bias", "out_weight",
                             "out_bias" };
        for (int k = 0; k < 10; k++) {
            attn_mha_weights w = t.w;
            const float **f[] = { &w.in_proj_weight, &w.in_proj_bias, &w.q_weight,
                                  &w.k_weight, &w.v_weight, &w.q_bias, &w.k_bias,
                                  &w.v_bias, &w.out_weight, &w.out_bias };
            if (!*f[k])
                continue; /* not used by this layout */
            *f[k] = NULL;
            char what[96];
            snprintf(what, sizeof what, "%s: weights.%s = NULL", v ? "self" : "cross", wn[k]);
            expect_exec_fail(&t, plan, &w, &t.a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, what);
        }
        /* every buffer the plan uses */
        const char *an[] = { "x", "key", "value", "out", "kv_lens", "q_lens", "mask", "bias",
                             "key_padding_mask", "weights" };
        for (int k = 0; k < 10; k++) {
            attn_mha_args a = t.a;
            const void *cur[] = { a.x, a.key, a.value, a.out, a.kv_lens, a.q_lens,
                                  a.mask, a.bias, a.key_padding_mask, a.weights };
            if (!cur[k])
                continue;
            switch (k) {
            case 0: a.x = NULL; break;
            case 1: a.key = NULL; break;
            case 2: a.value = NULL; break;
            case 3: a.out = NULL; break;
            case 4: a.kv_lens = NULL; break;
            case 5: a.q_lens = NULL; break;
            case 6: a.mask = NULL; break;
            case 7: a.bias = NULL; break;
            case 8: a.key_padding_mask = NULL; break;
            default: a.weights = NULL; break;
            }
            char what[96];
            snprintf(what, sizeof what, "%s: args.%s = NULL", v ? "self" : "cross", an[k]);
            expect_exec_fail(&t, plan, &t.w, &a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, what);
        }
        expect_exec_ok(&t, plan, &t.w, &t.a, "control: complete args");
        attn_mha_plan_destroy(plan);
        minst_free(&t);
    }
    assert_int_equal(g_fail, 0);
}

static void test_err_mismatch(void **state)
{
    (void)state;
    g_fail = 0;
    static const float dummy[4];
    char what[128];
    /* options: a plan without feature f, given the pointer of f */
    for (int v = 0; v < 2; v++) {
        mcase c = v ? err_self() : err_cross();
        minst t;
        assert_int_equal(minst_build(&t, &c), 0);
        const char *fn[] = { "kv_lens", "q_lens", "mask", "bias", "key_padding_mask",
                             "weights" };
        for (int f = 0; f < 6; f++) {
            attn_mha_desc d = t.d;
            attn_mha_args ok = t.a;
            switch (f) {
            case 0: d.use_kv_lens = 0; ok.kv_lens = NULL; break;
            case 1: d.use_q_lens = 0; ok.q_lens = NULL; break;
            case 2: d.mask_mode = ATTN_MASK_NONE; ok.mask = NULL; break;
            case 3: d.use_bias = 0; ok.bias = NULL; break;
            case 4: d.key_padding_mode = ATTN_MASK_NONE; ok.key_padding_mask = NULL; break;
            default: d.weights = ATTN_WEIGHTS_NONE; ok.weights = NULL; break;
            }
            attn_mha_plan *plan = NULL;
            assert_int_equal(attn_mha_plan_create(&plan, &d), ATTN_OK);
            snprintf(what, sizeof what, "%s: args.%s given, plan does not use it",
                     v ? "self" : "cross", fn[f]);
            expect_exec_fail(&t, plan, &t.w, &t.a, NULL, 0, ATTN_ERR_ARGUMENT_MISMATCH, what);
            snprintf(what, sizeof what, "control: %s: without args.%s", v ? "self" : "cross",
                     fn[f]);
            expect_exec_ok(&t, plan, &t.w, &ok, what);
            attn_mha_plan_destroy(plan);
        }
        /* self-attention given key or value */
        if (v) {
            attn_mha_plan *plan = NULL;
            assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
            attn_mha_args a = t.a;
            a.key = dummy;
            expect_exec_fail(&t, plan, &t.w, &a, NULL, 0, ATTN_ERR_ARGUMENT_MISMATCH,
                             "self-attention given args.key");
            a = t.a;
            a.value = dummy;
            expect_exec_fail(&t, plan, &t.w, &a, NULL, 0, ATTN_ERR_ARGUMENT_MISMATCH,
                             "self-attention given args.value");
            attn_mha_plan_destroy(plan);
        }
        minst_free(&t);
    }

    /* weights a layout does not use */
    for (int layout = 0; layout < 4; layout++) {
        /* 0 packed + bias, 1 packed no bias, 2 separate + bias, 3 separate no bias */
        mcase c = mc_self(2, 4, 8, 2, layout < 2);
        c.has_bias = layout % 2 == 0;
        minst t;
        assert_int_equal(minst_build(&t, &c), 0);
        attn_mha_plan *plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        const char *wn[] = { "in_proj_weight", "in_proj_bias", "q_weight", "k_weight",
                             "v_weight", "q_bias", "k_bias", "v_bias", "out_weight",
                             "out_bias" };
        for (int k = 0; k < 10; k++) {
            attn_mha_weights w = t.w;
            const float **f[] = { &w.in_proj_weight, &w.in_proj_bias, &w.q_weight,
                                  &w.k_weight, &w.v_weight, &w.q_bias, &w.k_bias,
                                  &w.v_bias, &w.out_weight, &w.out_bias };
            if (*f[k])
                continue; /* used by this layout */
            *f[k] = dummy;
            snprintf(what, sizeof what, "%s%s: weights.%s given",
                     layout < 2 ? "packed" : "separate", c.has_bias ? "" : " without bias",
                     wn[k]);
            expect_exec_fail(&t, plan, &w, &t.a, NULL, 0, ATTN_ERR_ARGUMENT_MISMATCH, what);
        }
        expect_exec_ok(&t, plan, &t.w, &t.a, "control: layout weights");
        attn_mha_plan_destroy(plan);
        minst_free(&t);
    }
    assert_int_equal(g_fail, 0);
}

static void test_err_sizes(void **state)
{
    (void)state;
    g_fail = 0;
    mcase c = err_cross();
    minst t;
    assert_int_equal(minst_build(&t, &c), 0);
    const attn_mha_desc base = t.d;
    expect_plan_ok(&base, "control: cross base");
    char what[96];
    const char *fn[] = { "embed_dim", "num_heads", "batch", "q_len", "kv_len" };
    const int64_t bad[] = { 0, -1, INT64_MIN };
    for (int f = 0; f < 5; f++)
        for (int k = 0; k < 3; k++) {
            attn_mha_desc d = base;
            int64_t *p[] = { &d.embed_dim, &d.num_heads, &d.batch, &d.q_len, &d.kv_len };
            *p[f] = bad[k];
            snprintf(what, sizeof what, "%s = %lld", fn[f], (long long)bad[k]);
            expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, what);
        }
    const char *gn[] = { "num_kv_heads", "kdim", "vdim" };
    for (int f = 0; f < 3; f++)
        for (int k = 1; k < 3; k++) {
            attn_mha_desc d = base;
            int64_t *p[] = { &d.num_kv_heads, &d.kdim, &d.vdim };
            *p[f] = bad[k];
            snprintf(what, sizeof what, "%s = %lld", gn[f], (long long)bad[k]);
            expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, what);
        }
    /* E % H != 0 */
    {
        attn_mha_desc d = base;
        d.num_kv_heads = 0;
        d.num_heads = 3;
        expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, "E = 16, H = 3");
        d.num_heads = 32;
        expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, "E = 16, H = 32");
        d.num_heads = 6;
        d.num_kv_heads = 3;
        expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, "E = 16, H = 6, Hkv = 3");
        d.num_heads = 16;
        d.num_kv_heads = 0;
        expect_plan_ok(&d, "control: E = H = 16 (dh = 1)");
    }
    /* S != L for self-attention */
    {
        mcase cs = err_self();
        minst ts;
        assert_int_equal(minst_build(&ts, &cs), 0);
        attn_mha_desc d = ts.d;
        expect_plan_ok(&d, "control: self base");
        d.kv_len = d.q_len + 1;
        expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, "self-attention with S = L + 1");
        d.kv_len = d.q_len - 1;
        expect_plan_fail(&d, ATTN_ERR_BAD_SIZE, "self-attention with S = L - 1");
        minst_free(&ts);
    }
    /* head ratio */
    {
        attn_mha_desc d = base;
        d.num_kv_heads = 3;
        expect_plan_fail(&d, ATTN_ERR_HEAD_RATIO, "H = 4, Hkv = 3");
        d.num_kv_heads = 8;
        expect_plan_fail(&d, ATTN_ERR_HEAD_RATIO, "H = 4, Hkv = 8");
        d.num_heads = 8;
        d.num_kv_heads = 3;
        expect_plan_fail(&d, ATTN_ERR_HEAD_RATIO, "H = 8, Hkv = 3");
        d.num_kv_heads = 4;
        expect_plan_ok(&d, "control: H = 8, Hkv = 4");
        d.num_kv_heads = 1;
        expect_plan_ok(&d, "control: H = 8, Hkv = 1 (MQA)");
    }
    /* sizes beyond what the BLAS takes */
    {
        const int64_t big = (int64_t)INT32_MAX + 1;
        attn_mha_desc d = base;
        d.embed_dim = big;
        d.num_heads = 1;
        d.num_kv_heads = 0;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "embed_dim = 2^31");
        d = base;
        d.q_len = big;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "q_len = 2^31");
        d = base;
        d.kv_len = big;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "kv_len = 2^31");
        d = base;
        d.kdim = big;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "kdim = 2^31");
        d = base;
        d.x_stride = big;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "x_stride = 2^31");
        d = base;
        d.batch = (int64_t)1 << 40;
        d.q_len = (int64_t)1 << 22;
        d.kv_len = 8;
        expect_plan_fail(&d, ATTN_ERR_TOO_LARGE, "B * L * E overflows");
    }
    minst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_err_options(void **state)
{
    (void)state;
    g_fail = 0;
    mcase c = err_self();
    minst t;
    assert_int_equal(minst_build(&t, &c), 0);
    const attn_mha_desc self = t.d;
    mcase cc = err_cross();
    minst tc;
    assert_int_equal(minst_build(&tc, &cc), 0);
    const attn_mha_desc cross = tc.d;
    attn_mha_desc d;
    char what[96];

    /* packed in_proj needs kdim == vdim == E and Hkv == H */
    d = cross;
    d.packed_in_proj = 1;
    d.kdim = d.vdim = 0;
    d.num_kv_heads = 0;
    expect_plan_ok(&d, "control: packed cross, kdim = vdim = E");
    d.kdim = d.embed_dim;
    d.vdim = d.embed_dim;
    d.num_kv_heads = d.num_heads;
    expect_plan_ok(&d, "control: packed cross, kdim, vdim, Hkv given");
    d.kdim = 6;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "packed with kdim != E");
    d.kdim = 0;
    d.vdim = 9;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "packed with vdim != E");
    d.vdim = 0;
    d.num_kv_heads = 2;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "packed with GQA (Hkv = 2)");
    d = self;
    d.num_kv_heads = 1;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "packed self with MQA (Hkv = 1)");
    /* self-attention projects keys and values from X: kdim, vdim must be E
     * (attn.h: ATTN_ERR_BAD_OPTION) */
    d = self;
    d.packed_in_proj = 0;
    d.kdim = d.embed_dim;
    d.vdim = d.embed_dim;
    expect_plan_ok(&d, "control: self, kdim = vdim = E given");
    d.kdim = 6;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "self with kdim != E");
    d.kdim = 0;
    d.vdim = 6;
    expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, "self with vdim != E");
    /* key_stride and value_stride are ignored in self-attention */
    d = self;
    d.key_stride = -1;
    d.value_stride = 1;
    expect_plan_ok(&d, "self: key_stride and value_stride ignored");

    /* enums */
    const int badenum[] = { 3, -1, 1000 };
    for (int k = 0; k < 3; k++) {
        d = self;
        d.align = (attn_align)(badenum[k] == 3 ? 2 : badenum[k]);
        snprintf(what, sizeof what, "align = %d", (int)d.align);
        expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, what);
        d = self;
        d.mask_mode = (attn_mask_mode)badenum[k];
        snprintf(what, sizeof what, "mask_mode = %d", badenum[k]);
        expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, what);
        d = self;
        d.key_padding_mode = (attn_mask_mode)badenum[k];
        snprintf(what, sizeof what, "key_padding_mode = %d", badenum[k]);
        expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, what);
        d = self;
        d.weights = (attn_weights_mode)badenum[k];
        snprintf(what, sizeof what, "weights = %d", badenum[k]);
        expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, what);
    }
    for (int k = 0; k < 16; k += 5) {
        d = self;
        d.reserved[k] = k == 15 ? INT64_MIN : 1;
        snprintf(what, sizeof what, "reserved[%d] != 0", k);
        expect_plan_fail(&d, ATTN_ERR_BAD_OPTION, what);
    }

    /* scale */
    d = self;
    d.scale = INFINITY;
    expect_plan_fail(&d, ATTN_ERR_BAD_SCALE, "scale = +inf");
    d.scale = -INFINITY;
    expect_plan_fail(&d, ATTN_ERR_BAD_SCALE, "scale = -inf");
    const float okscales[] = { NAN, 0.0f, -1.0f, FLT_MAX, 1e-40f };
    for (size_t i = 0; i < sizeof okscales / sizeof okscales[0]; i++) {
        d.scale = okscales[i];
        expect_plan_ok(&d, "control: finite or NaN scale");
    }

    /* threads */
    const int badt[] = { -1, INT_MIN, 1025, INT_MAX };
    for (int k = 0; k < 4; k++) {
        d = self;
        d.threads = badt[k];
        snprintf(what, sizeof what, "threads = %d", badt[k]);
        expect_plan_fail(&d, ATTN_ERR_BAD_THREADS, what);
    }
    d = self;
    d.threads = 0;
    expect_plan_ok(&d, "control: threads = 0");
    d.threads = 1024;
    expect_plan_ok(&d, "control: threads = 1024");

    minst_free(&t);
    minst_free(&tc);
    assert_int_equal(g_fail, 0);
}

static void test_err_strides(void **state)
{
    (void)state;
    g_fail = 0;
    mcase c = err_cross();
    minst t;
    assert_int_equal(minst_build(&t, &c), 0);
    const attn_mha_desc base = t.d;
    attn_mha_desc d;
    char what[96];
    const char *fn[] = { "x_stride", "key_stride", "value_stride", "out_stride" };
    const int64_t rowlen[] = { base.embed_dim, base.kdim, base.vdim, base.embed_dim };
    for (int f = 0; f < 4; f++) {
        const int64_t vals[] = { -1, INT64_MIN, rowlen[f] - 1, 1 };
        for (int k = 0; k < 4; k++) {
            d = base;
            int64_t *p[] = { &d.x_stride, &d.key_stride, &d.value_stride, &d.out_stride };
            *p[f] = vals[k];
            snprintf(what, sizeof what, "%s = %lld (row %lld)", fn[f], (long long)vals[k],
                     (long long)rowlen[f]);
            expect_plan_fail(&d, ATTN_ERR_BAD_STRIDE, what);
        }
        d = base;
        int64_t *p[] = { &d.x_stride, &d.key_stride, &d.value_stride, &d.out_stride };
        *p[f] = rowlen[f];
        expect_plan_ok(&d, "control: stride = row");
        *p[f] = rowlen[f] + 100;
        expect_plan_ok(&d, "control: stride > row");
    }
    /* self-attention: x_stride and out_stride */
    {
        mcase cs = err_self();
        minst ts;
        assert_int_equal(minst_build(&ts, &cs), 0);
        d = ts.d;
        d.x_stride = -1;
        expect_plan_fail(&d, ATTN_ERR_BAD_STRIDE, "self: x_stride = -1");
        d = ts.d;
        d.x_stride = d.embed_dim - 1;
        expect_plan_fail(&d, ATTN_ERR_BAD_STRIDE, "self: x_stride = E - 1");
        d = ts.d;
        d.out_stride = d.embed_dim - 1;
        expect_plan_fail(&d, ATTN_ERR_BAD_STRIDE, "self: out_stride = E - 1");
        minst_free(&ts);
    }
    /* mask and bias strides, by SDPA's rules: alone and combined with key
     * padding (the combined path checks the user's mask strides itself) */
    for (int kp = 0; kp < 2; kp++) {
        const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
        const char *tag = kp ? "with key padding" : "alone";
        d = base;
        if (!kp)
            d.key_padding_mode = ATTN_MASK_NONE;
        expect_plan_ok(&d, "control: mask strides");
        attn_mha_desc e = d;
        e.mask.batch = -1;
        snprintf(what, sizeof what, "mask.batch = -1 (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_BAD_STRIDE, what);
        e = d;
        e.mask.seq = -5;
        snprintf(what, sizeof what, "mask.seq = -5 (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_BAD_STRIDE, what);
        e = d;
        e.mask = unset;
        snprintf(what, sizeof what, "mask strides unset (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_STRIDES_UNSET, what);
        e = d;
        e.mask.head = ATTN_STRIDE_UNSET;
        snprintf(what, sizeof what, "mask.head unset (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_STRIDES_UNSET, what);
        e = d;
        e.bias.head = -1;
        snprintf(what, sizeof what, "bias.head = -1 (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_BAD_STRIDE, what);
        e = d;
        e.bias = unset;
        snprintf(what, sizeof what, "bias strides unset (%s)", tag);
        expect_plan_fail(&e, ATTN_ERR_STRIDES_UNSET, what);
    }
    /* unused mask and bias may stay unset */
    d = base;
    d.mask_mode = ATTN_MASK_NONE;
    d.use_bias = 0;
    d.mask.batch = d.mask.head = d.mask.seq = ATTN_STRIDE_UNSET;
    d.bias = d.mask;
    expect_plan_ok(&d, "control: unused mask and bias unset");
    minst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_err_lengths(void **state)
{
    (void)state;
    g_fail = 0;
    for (int v = 0; v < 2; v++) {
        mcase c = v ? err_self() : err_cross();
        minst t;
        assert_int_equal(minst_build(&t, &c), 0);
        attn_mha_plan *plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        const int32_t L = (int32_t)c.L, S = (int32_t)c.S;
        const int32_t badk[] = { -1, S + 1, INT32_MIN, INT32_MAX };
        const int32_t badq[] = { -1, L + 1, INT32_MIN, INT32_MAX };
        char what[96];
        for (int b = 0; b < 2; b++)
            for (int k = 0; k < 4; k++) {
                int32_t kl[2] = { S, 1 }, ql[2] = { L, 1 };
                attn_mha_args a = t.a;
                a.kv_lens = kl;
                a.q_lens = ql;
                kl[b] = badk[k];
                snprintf(what, sizeof what, "kv_lens[%d] = %d (S = %d)", b, (int)badk[k],
                         (int)S);
                expect_exec_fail(&t, plan, &t.w, &a, NULL, 0, ATTN_ERR_BAD_LENGTH, what);
                kl[b] = b ? 1 : S;
                ql[b] = badq[k];
                snprintf(what, sizeof what, "q_lens[%d] = %d (L = %d)", b, (int)badq[k],
                         (int)L);
                expect_exec_fail(&t, plan, &t.w, &a, NULL, 0, ATTN_ERR_BAD_LENGTH, what);
            }
        int32_t kl[2] = { 0, S }, ql[2] = { L, 0 };
        attn_mha_args a = t.a;
        a.kv_lens = kl;
        a.q_lens = ql;
        expect_exec_ok(&t, plan, &t.w, &a, "control: lengths 0 and full");
        attn_mha_plan_destroy(plan);
        minst_free(&t);
    }
    assert_int_equal(g_fail, 0);
}

static void test_err_workspace(void **state)
{
    (void)state;
    g_fail = 0;
    for (int v = 0; v < 2; v++) {
        mcase c = v ? err_self() : err_cross();
        minst t;
        assert_int_equal(minst_build(&t, &c), 0);
        attn_mha_plan *plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        size_t ws = 0;
        assert_int_equal(attn_mha_workspace_size(plan, &ws), ATTN_OK);
        assert_true(ws > 0);
        const size_t cap = (ws + 63) / 64 * 64 + 128;
        unsigned char *buf = aligned_alloc(64, cap);
        assert_non_null(buf);
        memset(buf, 0x5A, cap);
        expect_exec_fail(&t, plan, &t.w, &t.a, buf, ws - 1, ATTN_ERR_WORKSPACE_TOO_SMALL,
                         "workspace one byte short");
        expect_exec_fail(&t, plan, &t.w, &t.a, buf, 0, ATTN_ERR_WORKSPACE_TOO_SMALL,
                         "workspace of 0 bytes");
        const size_t offs[] = { 4, 16, 32, 60 };
        for (size_t i = 0; i < 4; i++) {
            char what[64];
            snprintf(what, sizeof what, "workspace misaligned by %zu bytes", offs[i]);
            expect_exec_fail(&t, plan, &t.w, &t.a, buf + offs[i], ws + 64,
                             ATTN_ERR_WORKSPACE_ALIGNMENT, what);
        }
        minst_clear(&t);
        if (attn_mha_execute(plan, &t.w, &t.a, buf, ws) != ATTN_OK) {
            printf("FAIL control: workspace of exactly %zu bytes refused\n", ws);
            g_fail++;
        }
        free(buf);
        attn_mha_plan_destroy(plan);
        minst_free(&t);
    }
    assert_int_equal(g_fail, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_packed),
        cmocka_unit_test(test_self_separate),
        cmocka_unit_test(test_cross_dims),
        cmocka_unit_test(test_cross_packed),
        cmocka_unit_test(test_no_bias),
        cmocka_unit_test(test_gqa),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_key_padding),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_strides),
        cmocka_unit_test(test_weights_modes),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_random_mix),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_desc_defaults),
        cmocka_unit_test(test_err_null),
        cmocka_unit_test(test_err_mismatch),
        cmocka_unit_test(test_err_sizes),
        cmocka_unit_test(test_err_options),
        cmocka_unit_test(test_err_strides),
        cmocka_unit_test(test_err_lengths),
        cmocka_unit_test(test_err_workspace),
    };
    return cmocka_run_group_tests_name("mha", tests, NULL, NULL);
}
