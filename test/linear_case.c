/*
 * linear_case.c -- see linear_case.h.
 */
#include "linear_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lcase lcase_default(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk,
                    int64_t dv)
{
    lcase c;
    memset(&c, 0, sizeof c);
    c.B = B; c.Hq = Hq; c.Hkv = Hkv; c.n = n; c.m = m; c.dk = dk; c.dv = dv;
    c.fmap = ATTN_FEATURE_ELU1;
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.eps = NAN;
    c.mag = 1.0;
    c.threads = 1;
    c.seed = 1;
    return c;
}

const char *lcase_str(const lcase *c)
{
    static char buf[512];
    static const char *fm[] = { "elu1", "relu", "id" };
    char kl[96] = "-", ql[96] = "-";
    if (c->use_kv_lens) {
        int o = 0;
        for (int64_t b = 0; b < c->B && o < 80; b++)
            o += snprintf(kl + o, sizeof kl - (size_t)o, "%s%d", b ? "," : "", c->kv_lens[b]);
    }
    if (c->use_q_lens) {
        int o = 0;
        for (int64_t b = 0; b < c->B && o < 80; b++)
            o += snprintf(ql + o, sizeof ql - (size_t)o, "%s%d", b ? "," : "", c->q_lens[b]);
    }
    snprintf(buf, sizeof buf,
             "B%lld Hq%lld Hkv%lld n%lld m%lld dk%lld dv%lld %s %s%s eps=%g kv[%s] q[%s] "
             "lay%d out%d state%d pos%d thr%d dtype%d mask%x seed%llu",
             (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->n,
             (long long)c->m, (long long)c->dk, (long long)c->dv, fm[c->fmap % 3],
             c->causal ? "causal" : "full", c->causal ? (c->align ? "-br" : "-tl") : "",
             (double)c->eps, kl, ql, c->layout, c->out_layout, c->use_state, c->positive,
             c->threads, c->dtype, c->mask16, (unsigned long long)c->seed);
    return buf;
}

static attn_view view_of(int layout, int64_t B, int64_t H, int64_t S, int64_t D)
{
    attn_view v;
    switch (layout) {
    case LL_BSHD:
        v = attn_view_bshd(H, S, D);
        break;
    case LL_PADDED: {
        /* [H][B][S] order with gaps after every row, batch and head */
        const int64_t seq = D + 3, batch = S * seq + 5, head = B * batch + 7;
        v = (attn_view){ batch, head, seq };
        break;
    }
    default:
        v = attn_view_bhsd(H, S, D);
        break;
    }
    return v;
}

static size_t extent(attn_view v, int64_t B, int64_t H, int64_t S, int64_t D)
{
    return (size_t)((B - 1) * v.batch + (H - 1) * v.head + (S - 1) * v.seq + D);
}

static int lbuf_alloc(lbuf *b, size_t n, uint32_t bits)
{
    b->n = n;
    b->p = malloc((n ? n : 1) * sizeof(float));
    if (!b->p)
        return -1;
    for (size_t i = 0; i < n; i++)
        memcpy(&b->p[i], &bits, sizeof bits);
    return 0;
}

static const uint32_t NAN_BITS = 0x7fc00000u;

void lview_to_dense(const float *base, attn_view v, int64_t B, int64_t H, int64_t S,
                    int64_t D, double *dst)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t x = 0; x < D; x++)
                    dst[((b * H + h) * S + s) * D + x] =
                        base[b * v.batch + h * v.head + s * v.seq + x];
}

void lview_mark(unsigned char *mask, const float *buf, const float *base, attn_view v,
                int64_t B, int64_t H, int64_t S, int64_t D)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t x = 0; x < D; x++)
                    mask[(base - buf) + b * v.batch + h * v.head + s * v.seq + x] = 1;
}

/* Fill a view with uniform values (positive: [0.05, mag]). */
static void fill_view(float *base, attn_view v, int64_t B, int64_t H, int64_t S, int64_t D,
                      trng *r, double mag, int positive)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t x = 0; x < D; x++)
                    base[b * v.batch + h * v.head + s * v.seq + x] =
                        (float)(positive ? trng_uniform(r, 0.05, mag) : trng_uniform(r, -mag, mag));
}

/* A 16-bit twin of b (rounding b's values to the type in place). */
static int twin16(uint16_t **h, lbuf *b, int type)
{
    if (!b->n)
        return 0;
    *h = malloc(b->n * sizeof(uint16_t));
    if (!*h)
        return -1;
    attn_dtype_encode((attn_dtype)type, b->p, *h, (int64_t)b->n);
    attn_dtype_decode((attn_dtype)type, *h, b->p, (int64_t)b->n);
    return 0;
}

/* The twin element at the offset of p in its float buffer (q's for
 * packed K and V). */
static uint16_t *twin_of(const linst *t, const float *p, const lbuf *f, uint16_t *h)
{
    if (!f->n) {
        f = &t->q;
        h = t->q16;
    }
    return h + (p - f->p);
}

int lcase_type(const lcase *c, unsigned bit)
{
    if (c->dtype == ATTN_DTYPE_F32)
        return ATTN_DTYPE_F32;
    return !c->mask16 || (c->mask16 & bit) ? c->dtype : ATTN_DTYPE_F32;
}

void linst_call_types(linst *t, const attn_linear_desc *d, attn_linear_desc *dt,
                      attn_linear_args *at)
{
    *dt = *d;
    *at = t->args;
    const lcase *c = &t->c;
    if (c->dtype == ATTN_DTYPE_F32)
        return;
    dt->q_type = (attn_dtype)lcase_type(c, LT_Q);
    dt->k_type = (attn_dtype)lcase_type(c, LT_K);
    dt->v_type = (attn_dtype)lcase_type(c, LT_V);
    dt->o_type = (attn_dtype)lcase_type(c, LT_O);
    attn_linear_args16_init(&t->a16);
    if (dt->q_type) { t->a16.q = twin_of(t, t->args.q, &t->q, t->q16); at->q = NULL; }
    if (dt->k_type) { t->a16.k = twin_of(t, t->args.k, &t->k, t->k16); at->k = NULL; }
    if (dt->v_type) { t->a16.v = twin_of(t, t->args.v, &t->v, t->v16); at->v = NULL; }
    if (dt->o_type) { t->a16.o = twin_of(t, t->args.o, &t->o, t->o16); at->o = NULL; }
    at->args16 = &t->a16;
}

/* A 16-bit twin decoded into its float buffer (the sentinels map). */
static void widen_twin(lbuf *f, const uint16_t *h, int type)
{
    for (size_t i = 0; i < f->n; i++) {
        if (h[i] == LSENTINEL16) {
            const uint32_t s = LSENTINEL;
            memcpy(&f->p[i], &s, sizeof s);
        } else {
            attn_dtype_decode((attn_dtype)type, &h[i], &f->p[i], 1);
        }
    }
}

void linst_widen_o(linst *t)
{
    const int ty = lcase_type(&t->c, LT_O);
    if (ty != ATTN_DTYPE_F32)
        widen_twin(&t->o, t->o16, ty);
}

void linst_bwd_call_types(linst *t, const attn_linear_bwd_desc *d, attn_linear_bwd_desc *dt,
                          attn_linear_bwd_args *at)
{
    *dt = *d;
    *at = t->bargs;
    const lcase *c = &t->c;
    if (c->dtype == ATTN_DTYPE_F32)
        return;
    attn_linear_desc *f = &dt->fwd;
    f->q_type = (attn_dtype)lcase_type(c, LT_Q);
    f->k_type = (attn_dtype)lcase_type(c, LT_K);
    f->v_type = (attn_dtype)lcase_type(c, LT_V);
    f->o_type = (attn_dtype)lcase_type(c, LT_O);
    attn_linear_bwd_args16 *h = &t->b16;
    attn_linear_bwd_args16_init(h);
    if (f->q_type) {
        h->q = twin_of(t, t->bargs.q, &t->q, t->q16);
        h->dq = t->dq16 + (t->bargs.dq - t->dq.p);
        at->q = NULL;
        at->dq = NULL;
    }
    if (f->k_type) {
        h->k = twin_of(t, t->bargs.k, &t->k, t->k16);
        h->dk = t->dk16 + (t->bargs.dk - t->dk.p);
        at->k = NULL;
        at->dk = NULL;
    }
    if (f->v_type) {
        h->v = twin_of(t, t->bargs.v, &t->v, t->v16);
        h->dv = t->dv16 + (t->bargs.dv - t->dv.p);
        at->v = NULL;
        at->dv = NULL;
    }
    if (f->o_type) {
        h->d_o = t->do16 + (t->bargs.d_o - t->d_o.p);
        at->d_o = NULL;
    }
    at->args16 = h;
}

void linst_widen_grads(linst *t)
{
    const lcase *c = &t->c;
    if (lcase_type(c, LT_Q)) widen_twin(&t->dq, t->dq16, c->dtype);
    if (lcase_type(c, LT_K)) widen_twin(&t->dk, t->dk16, c->dtype);
    if (lcase_type(c, LT_V)) widen_twin(&t->dv, t->dv16, c->dtype);
}

attn_status linst_backward(linst *t, const attn_linear_bwd_plan *plan, void *ws,
                           size_t ws_bytes)
{
    attn_linear_bwd_desc dt;
    attn_linear_bwd_args at;
    linst_bwd_call_types(t, &t->bdesc, &dt, &at);
    const attn_status st =
        plan ? attn_linear_bwd_execute(plan, &at, ws, ws_bytes) : attn_linear_backward(&dt, &at);
    linst_widen_grads(t);
    return st;
}

attn_status linst_forward(linst *t, const attn_linear_plan *plan, void *ws, size_t ws_bytes)
{
    attn_linear_desc dt;
    attn_linear_args at;
    linst_call_types(t, &t->desc, &dt, &at);
    const attn_status st =
        plan ? attn_linear_execute(plan, &at, ws, ws_bytes) : attn_linear(&dt, &at);
    linst_widen_o(t);
    return st;
}

int linst_build(linst *t, const lcase *c)
{
    memset(t, 0, sizeof *t);
    t->c = *c;
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, dk = c->dk,
                  dv = c->dv;
    trng r;
    trng_seed(&r, c->seed);
    attn_linear_desc *d = &t->desc;
    attn_linear_desc_init(d);
    d->batch = B; d->q_heads = Hq; d->kv_heads = Hkv; d->q_len = n; d->kv_len = m;
    d->qk_dim = dk; d->v_dim = dv;
    d->feature_map = (attn_feature_map)c->fmap;
    d->causal = c->causal;
    d->align = (attn_align)c->align;
    d->eps = c->eps;
    d->use_kv_lens = c->use_kv_lens;
    d->use_q_lens = c->use_q_lens;
    d->use_state = c->use_state;
    d->threads = c->threads;

    float *qb, *kb, *vb;
    if (c->layout == LL_PACKED) {
        /* [B][S][Hq + 2 Hkv][D]: needs n == m and dk == dv */
        const int64_t W = Hq + 2 * Hkv, row = W * dk;
        if (lbuf_alloc(&t->q, (size_t)(B * n * row), NAN_BITS))
            return -1;
        d->q = d->k = d->v = (attn_view){ n * row, dk, row };
        qb = t->q.p;
        kb = qb + Hq * dk;
        vb = qb + (Hq + Hkv) * dk;
    } else {
        d->q = view_of(c->layout, B, Hq, n, dk);
        d->k = view_of(c->layout, B, Hkv, m, dk);
        d->v = view_of(c->layout, B, Hkv, m, dv);
        if (lbuf_alloc(&t->q, extent(d->q, B, Hq, n, dk) + 1, NAN_BITS) ||
            lbuf_alloc(&t->k, extent(d->k, B, Hkv, m, dk) + 1, NAN_BITS) ||
            lbuf_alloc(&t->v, extent(d->v, B, Hkv, m, dv) + 1, NAN_BITS))
            return -1;
        qb = t->q.p; kb = t->k.p; vb = t->v.p;
    }
    d->o = view_of(c->out_layout == LO_BSHD ? LL_BSHD : c->out_layout == LO_PADDED ? LL_PADDED
                                                                                    : LL_BHSD,
                   B, Hq, n, dv);
    if (lbuf_alloc(&t->o, extent(d->o, B, Hq, n, dv) + 1, LSENTINEL))
        return -1;
    fill_view(qb, d->q, B, Hq, n, dk, &r, c->mag, c->positive);
    fill_view(kb, d->k, B, Hkv, m, dk, &r, c->mag, c->positive);
    fill_view(vb, d->v, B, Hkv, m, dv, &r, c->mag, 0);
    /* 16-bit: the inputs rounded to the type in place (padding included),
     * with their uint16 twins; O's twin */
    if (c->dtype != ATTN_DTYPE_F32) {
        if (twin16(&t->q16, &t->q, c->dtype) || twin16(&t->k16, &t->k, c->dtype) ||
            twin16(&t->v16, &t->v, c->dtype))
            return -1;
        t->o16 = malloc((t->o.n ? t->o.n : 1) * sizeof(uint16_t));
        if (!t->o16)
            return -1;
    }

    t->rq = malloc((size_t)(B * Hq * n * dk) * sizeof(double));
    t->rk = malloc((size_t)(B * Hkv * m * dk) * sizeof(double));
    t->rv = malloc((size_t)(B * Hkv * m * dv) * sizeof(double));
    if (!t->rq || !t->rk || !t->rv)
        return -1;
    lview_to_dense(qb, d->q, B, Hq, n, dk, t->rq);
    lview_to_dense(kb, d->k, B, Hkv, m, dk, t->rk);
    lview_to_dense(vb, d->v, B, Hkv, m, dv, t->rv);

    t->args.q = qb;
    t->args.k = kb;
    t->args.v = vb;
    t->args.o = t->o.p;
    memcpy(t->kv_lens, c->kv_lens, sizeof t->kv_lens);
    memcpy(t->q_lens, c->q_lens, sizeof t->q_lens);
    if (c->use_kv_lens)
        t->args.kv_lens = t->kv_lens;
    if (c->use_q_lens)
        t->args.q_lens = t->q_lens;

    if (c->use_state) {
        const size_t ns = (size_t)(B * Hkv * dk * dv), nz = (size_t)(B * Hkv * dk);
        if (lbuf_alloc(&t->s, ns, 0) || lbuf_alloc(&t->z, nz, 0) || lbuf_alloc(&t->s0, ns, 0) ||
            lbuf_alloc(&t->z0, nz, 0))
            return -1;
        t->rs0 = malloc(ns * sizeof(double));
        t->rz0 = malloc(nz * sizeof(double));
        if (!t->rs0 || !t->rz0)
            return -1;
        /* A state as some earlier keys would leave it: z >= 0 for the
         * nonnegative maps, S of either sign. */
        const double keys = (double)trng_int(&r, 1, 40);
        for (size_t i = 0; i < nz; i++) {
            t->z0.p[i] = (float)(c->fmap == ATTN_FEATURE_IDENTITY && !c->positive
                                     ? trng_uniform(&r, -keys, keys)
                                     : trng_uniform(&r, 0.0, 2.0 * keys));
            t->rz0[i] = t->z0.p[i];
        }
        for (size_t i = 0; i < ns; i++) {
            t->s0.p[i] = (float)trng_uniform(&r, -keys, keys);
            t->rs0[i] = t->s0.p[i];
        }
        t->args.state_s = t->s.p;
        t->args.state_z = t->z.p;
    }

    lref_shape *s = &t->shape;
    s->B = B; s->Hq = Hq; s->Hkv = Hkv; s->n = n; s->m = m; s->dk = dk; s->dv = dv;
    s->fmap = c->fmap;
    s->causal = c->causal;
    s->align = c->align;
    s->eps = isnan(c->eps) ? 1e-6 : (double)c->eps;
    s->kv_lens = c->use_kv_lens ? t->kv_lens : NULL;
    s->q_lens = c->use_q_lens ? t->q_lens : NULL;

    /* backward: dO random in its view, dQ, dK, dV with the output layout */
    if (!c->use_state) {
        attn_linear_bwd_desc *bd = &t->bdesc;
        attn_linear_bwd_desc_init(bd);
        bd->fwd = *d;
        const int ol = c->out_layout == LO_BSHD ? LL_BSHD
                     : c->out_layout == LO_PADDED ? LL_PADDED : LL_BHSD;
        bd->d_o = view_of(ol, B, Hq, n, dv);
        bd->dq = view_of(ol, B, Hq, n, dk);
        bd->dk = view_of(ol, B, Hkv, m, dk);
        bd->dv = view_of(ol, B, Hkv, m, dv);
        if (lbuf_alloc(&t->d_o, extent(bd->d_o, B, Hq, n, dv) + 1, NAN_BITS) ||
            lbuf_alloc(&t->dq, extent(bd->dq, B, Hq, n, dk) + 1, LSENTINEL) ||
            lbuf_alloc(&t->dk, extent(bd->dk, B, Hkv, m, dk) + 1, LSENTINEL) ||
            lbuf_alloc(&t->dv, extent(bd->dv, B, Hkv, m, dv) + 1, LSENTINEL))
            return -1;
        fill_view(t->d_o.p, bd->d_o, B, Hq, n, dv, &r, 1.0, 0);
        /* 16-bit: dO rounded to the type with its twin; the gradients'
         * twins */
        if (c->dtype != ATTN_DTYPE_F32) {
            if (twin16(&t->do16, &t->d_o, c->dtype))
                return -1;
            t->dq16 = malloc(t->dq.n * sizeof(uint16_t));
            t->dk16 = malloc(t->dk.n * sizeof(uint16_t));
            t->dv16 = malloc(t->dv.n * sizeof(uint16_t));
            if (!t->dq16 || !t->dk16 || !t->dv16)
                return -1;
        }
        t->rdo = malloc((size_t)(B * Hq * n * dv) * sizeof(double));
        if (!t->rdo)
            return -1;
        lview_to_dense(t->d_o.p, bd->d_o, B, Hq, n, dv, t->rdo);
        attn_linear_bwd_args *ba = &t->bargs;
        ba->q = qb; ba->k = kb; ba->v = vb; ba->d_o = t->d_o.p;
        ba->dq = t->dq.p; ba->dk = t->dk.p; ba->dv = t->dv.p;
        ba->kv_lens = t->args.kv_lens;
        ba->q_lens = t->args.q_lens;
    }
    linst_reset(t);
    return 0;
}

void linst_free(linst *t)
{
    free(t->q.p); free(t->k.p); free(t->v.p); free(t->o.p);
    free(t->s.p); free(t->z.p); free(t->s0.p); free(t->z0.p);
    free(t->rq); free(t->rk); free(t->rv); free(t->rs0); free(t->rz0);
    free(t->d_o.p); free(t->dq.p); free(t->dk.p); free(t->dv.p); free(t->rdo);
    free(t->q16); free(t->k16); free(t->v16); free(t->o16);
    free(t->do16); free(t->dq16); free(t->dk16); free(t->dv16);
    memset(t, 0, sizeof *t);
}

static void fill_bits(lbuf *b, uint32_t bits)
{
    for (size_t i = 0; i < b->n; i++)
        memcpy(&b->p[i], &bits, sizeof bits);
}

static int all_bits(const lbuf *b, uint32_t bits)
{
    for (size_t i = 0; i < b->n; i++)
        if (memcmp(&b->p[i], &bits, sizeof bits) != 0)
            return 0;
    return 1;
}

static void fill16(uint16_t *h, size_t n)
{
    if (h)
        for (size_t i = 0; i < n; i++)
            h[i] = LSENTINEL16;
}

static int all16(const uint16_t *h, size_t n)
{
    if (h)
        for (size_t i = 0; i < n; i++)
            if (h[i] != LSENTINEL16)
                return 0;
    return 1;
}

void linst_reset(linst *t)
{
    fill_bits(&t->o, LSENTINEL);
    if (t->o16)
        for (size_t i = 0; i < t->o.n; i++)
            t->o16[i] = LSENTINEL16;
    fill_bits(&t->dq, LSENTINEL);
    fill_bits(&t->dk, LSENTINEL);
    fill_bits(&t->dv, LSENTINEL);
    fill16(t->dq16, t->dq.n);
    fill16(t->dk16, t->dk.n);
    fill16(t->dv16, t->dv.n);
    if (t->s.p) {
        memcpy(t->s.p, t->s0.p, t->s.n * sizeof(float));
        memcpy(t->z.p, t->z0.p, t->z.n * sizeof(float));
    }
}

int linst_untouched(const linst *t)
{
    if (!all_bits(&t->o, LSENTINEL) || !all_bits(&t->dq, LSENTINEL) ||
        !all_bits(&t->dk, LSENTINEL) || !all_bits(&t->dv, LSENTINEL))
        return 0;
    if (!all16(t->o16, t->o.n) || !all16(t->dq16, t->dq.n) || !all16(t->dk16, t->dk.n) ||
        !all16(t->dv16, t->dv.n))
        return 0;
    if (t->s.p && (memcmp(t->s.p, t->s0.p, t->s.n * sizeof(float)) ||
                   memcmp(t->z.p, t->z0.p, t->z.n * sizeof(float))))
        return 0;
    return 1;
}

/* First key no query reads in batch b (m_b, or less for causal without
 * state). */
static int64_t read_keys(const linst *t, int64_t b)
{
    const lcase *c = &t->c;
    const int64_t nb = c->use_q_lens ? c->q_lens[b] : c->n;
    const int64_t mb = c->use_kv_lens ? c->kv_lens[b] : c->m;
    if (c->use_state)
        return mb;
    if (nb == 0)
        return 0;
    if (!c->causal)
        return mb;
    const int64_t off = c->align == ATTN_ALIGN_BOTTOM_RIGHT ? mb - nb : 0;
    int64_t last = nb - 1 + off + 1;
    return last < 0 ? 0 : last > mb ? mb : last;
}

int linst_has_hidden(const linst *t)
{
    const lcase *c = &t->c;
    for (int64_t b = 0; b < c->B; b++) {
        if ((c->use_q_lens ? c->q_lens[b] : c->n) < c->n)
            return 1;
        if (read_keys(t, b) < c->m)
            return 1;
    }
    return 0;
}

void linst_poison(linst *t, int set)
{
    const lcase *c = &t->c;
    const attn_linear_desc *d = &t->desc;
    float *q = (float *)t->args.q, *k = (float *)t->args.k, *v = (float *)t->args.v;
    float *dO = t->d_o.p;
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t nb = c->use_q_lens ? c->q_lens[b] : c->n;
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = nb; i < c->n; i++) {
                for (int64_t x = 0; x < c->dk; x++)
                    q[b * d->q.batch + h * d->q.head + i * d->q.seq + x] =
                        set ? NAN : (float)t->rq[((b * c->Hq + h) * c->n + i) * c->dk + x];
                if (dO)
                    for (int64_t x = 0; x < c->dv; x++)
                        dO[b * t->bdesc.d_o.batch + h * t->bdesc.d_o.head +
                           i * t->bdesc.d_o.seq + x] =
                            set ? NAN : (float)t->rdo[((b * c->Hq + h) * c->n + i) * c->dv + x];
            }
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t j = read_keys(t, b); j < c->m; j++) {
                for (int64_t x = 0; x < c->dk; x++)
                    k[b * d->k.batch + h * d->k.head + j * d->k.seq + x] =
                        set ? NAN : (float)t->rk[((b * c->Hkv + h) * c->m + j) * c->dk + x];
                for (int64_t x = 0; x < c->dv; x++)
                    v[b * d->v.batch + h * d->v.head + j * d->v.seq + x] =
                        set ? NAN : (float)t->rv[((b * c->Hkv + h) * c->m + j) * c->dv + x];
            }
    }
    /* 16-bit: the twins take the same values (the fp32 buffers hold the
     * rounded ones, so this is exact; NaN stays NaN) */
    if (c->dtype != ATTN_DTYPE_F32) {
        attn_dtype_encode((attn_dtype)c->dtype, t->q.p, t->q16, (int64_t)t->q.n);
        if (t->k16)
            attn_dtype_encode((attn_dtype)c->dtype, t->k.p, t->k16, (int64_t)t->k.n);
        if (t->v16)
            attn_dtype_encode((attn_dtype)c->dtype, t->v.p, t->v16, (int64_t)t->v.n);
        if (t->do16)
            attn_dtype_encode((attn_dtype)c->dtype, t->d_o.p, t->do16, (int64_t)t->d_o.n);
    }
}
