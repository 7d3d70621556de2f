/*
 * harness.c -- see harness.h.
 */
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

/* ------------------------------------------------------------------ PRNG */

void trng_seed(trng *r, uint64_t seed)
{
    r->s = seed * 0x9E3779B97F4A7C15ull + 0x243F6A8885A308D3ull;
}

/* splitmix64 */
uint64_t trng_next(trng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int64_t trng_int(trng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return lo + (int64_t)(trng_next(r) % span);
}

double trng_uniform(trng *r, double lo, double hi)
{
    double x = (double)(trng_next(r) >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * x;
}

int trng_bool(trng *r, double p)
{
    return trng_uniform(r, 0.0, 1.0) < p;
}

/* ------------------------------------------------------------ test cases */

tcase tcase_default(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m,
                    int64_t dk, int64_t dv)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.B = B;
    c.Hq = Hq;
    c.Hkv = Hkv;
    c.n = n;
    c.m = m;
    c.dk = dk;
    c.dv = dv;
    c.layout = LAY_BHSD;
    c.out_layout = OUT_BHSD;
    c.scale = NAN;
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.wl = -1;
    c.wr = -1;
    c.mask_mode = ATTN_MASK_NONE;
    c.mask_keep = 0.7;
    c.bias_mag = 1.0;
    c.threads = 1;
    c.in_mag = 1.0;
    c.seed = 1;
    return c;
}

const char *tcase_str(const tcase *c)
{
    static char buf[1024];
    char kl[128] = "-", ql[128] = "-";
    if (c->use_kv_lens) {
        int off = 0;
        for (int64_t b = 0; b < c->B && b < TMAXB; b++)
            off += snprintf(kl + off, sizeof kl - (size_t)off, "%s%d",
                            b ? "," : "", (int)c->kv_lens[b]);
    }
    if (c->use_q_lens) {
        int off = 0;
        for (int64_t b = 0; b < c->B && b < TMAXB; b++)
            off += snprintf(ql + off, sizeof ql - (size_t)off, "%s%d",
                            b ? "," : "", (int)c->q_lens[b]);
    }
    snprintf(buf, sizeof buf,
             "B=%lld Hq=%lld Hkv=%lld n=%lld m=%lld dk=%lld dv=%lld layout=%d "
             "out=%d misalign=%d scale=%g align=%d wl=%lld wr=%lld "
             "kv_lens=[%s] q_lens=[%s] mask=%d/bc%d/keep%.2f bias=%d/bc%d/ninf%.2f/mag%g "
             "probs=%d lse=%d threads=%d mag=%g poison=%d dtype=%d seed=%llu",
             (long long)c->B, (long long)c->Hq, (long long)c->Hkv,
             (long long)c->n, (long long)c->m, (long long)c->dk,
             (long long)c->dv, c->layout, c->out_layout, c->misalign,
             (double)c->scale, c->align, (long long)c->wl, (long long)c->wr,
             kl, ql, c->mask_mode, c->mask_bcast, c->mask_keep, c->use_bias,
             c->bias_bcast, c->bias_ninf, c->bias_mag, c->want_probs,
             c->want_lse, c->threads, c->in_mag, c->poison, c->dtype,
             (unsigned long long)c->seed);
    if (tcase_sparse(c) || c->dense_twin) {
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof buf - len,
                 " gk=%d/%.2f gq=%d/%.2f first=%lld gq_step=%lld/%lld edges=%d bs=%lld"
                 " per_head=%d kind=%d keep=%.2f twin=%d",
                 c->use_gk, c->gk_rate, c->use_gq, c->gq_rate, (long long)c->glob_first,
                 (long long)c->gq_step, (long long)c->gq_off, c->gq_edges,
                 (long long)c->bs, c->lay_per_head, c->lay_kind, c->lay_keep, c->dense_twin);
    }
    return buf;
}

/* ---------------------------------------------------------- instances */

/* order 0: [B][H][S][D]; order 1: [B][S][H][D]; gaps ps after every row
 * (seq), ph after every head, pb after every batch. */
static attn_view mkview(int order, int64_t H, int64_t S, int64_t D,
                        int64_t ps, int64_t ph, int64_t pb)
{
    attn_view v;
    if (order == 0) {
        v.seq = D + ps;
        v.head = S * v.seq + ph;
        v.batch = H * v.head + pb;
    } else {
        v.head = D + ph;
        v.seq = H * v.head + ps;
        v.batch = S * v.seq + pb;
    }
    return v;
}

static size_t extent(attn_view v, int64_t B, int64_t H, int64_t S, int64_t D)
{
    return (size_t)((B - 1) * v.batch + (H - 1) * v.head + (S - 1) * v.seq + D);
}

static int tbuf_alloc(tbuf *b, size_t count, size_t esize)
{
    b->count = count;
    b->base = malloc(count * esize + 1);
    return b->base ? 0 : -1;
}

static void fill_f32(tbuf *b, float x)
{
    float *f = b->base;
    for (size_t i = 0; i < b->count; i++)
        f[i] = x;
}

static void fill_bits(tbuf *b, uint32_t bits)
{
    uint32_t *u = b->base;
    if (!u)
        return;
    for (size_t i = 0; i < b->count; i++)
        u[i] = bits;
}

static void random_pads(trng *r, int *order, int64_t *ps, int64_t *ph, int64_t *pb)
{
    *order = (int)trng_int(r, 0, 1);
    *ps = trng_int(r, 1, 5);
    *ph = trng_int(r, 1, 7);
    *pb = trng_int(r, 1, 9);
}

/* Allocate a float tensor buffer for view v over [B][H][S][D] (plus the
 * misalignment offset and a tail), filled with NaN. */
static int alloc_tensor(tbuf *b, attn_view v, int64_t B, int64_t H, int64_t S,
                        int64_t D, int misalign)
{
    if (tbuf_alloc(b, extent(v, B, H, S, D) + (size_t)misalign + 3, sizeof(float)))
        return -1;
    fill_f32(b, NAN);
    return 0;
}

/* 16-bit cases: round buffer f (count floats) to the type in place and
 * fill its uint16 twin with the same values, padding included. */
static int typed_twin(tbuf *h, const tbuf *f, int type)
{
    if (!f->base)
        return 0;
    h->base = malloc(f->count * sizeof(uint16_t) + 1);
    if (!h->base)
        return -1;
    h->count = f->count;
    attn_dtype_encode((attn_dtype)type, f->base, h->base, f->count);
    attn_dtype_decode((attn_dtype)type, h->base, f->base, f->count);
    return 0;
}

#define TSENTINEL16 0x7FA5u   /* a NaN in both 16-bit types */

double tdtype_u(int dtype)
{
    return dtype == ATTN_DTYPE_BF16 ? ldexp(1.0, -7) : dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -10)
                                                                                : 0.0;
}

void tround_all(int dtype, uint32_t *bits, size_t n)
{
    enum { CHUNK = 1024 };
    float f[CHUNK];
    uint16_t h[CHUNK];
    for (size_t x0 = 0; x0 < n; x0 += CHUNK) {
        const size_t m = n - x0 < CHUNK ? n - x0 : CHUNK;
        memcpy(f, bits + x0, m * sizeof *f);
        attn_dtype_encode((attn_dtype)dtype, f, h, (int64_t)m);
        attn_dtype_decode((attn_dtype)dtype, h, f, (int64_t)m);
        for (size_t x = 0; x < m; x++)
            if (bits[x0 + x] != TSENTINEL)
                memcpy(&bits[x0 + x], &f[x], sizeof f[x]);
    }
}

int tblas_mkl(void)
{
    static int mkl = -1;
    if (mkl < 0) {
        attn_blas_info info;
        attn_blas_query(&info);
        mkl = !strcmp(info.loaded, "mkl") || !strcmp(info.backend, "mkl");
    }
    return mkl;
}

/* The element of twin h at the offset of p in f (or in q's buffers, where
 * a packed layout keeps K and V). */
static uint16_t *twin_at(const tinst *t, const float *p, const tbuf *f, const tbuf *h)
{
    if (!f->base) {
        f = &t->q;
        h = &t->q16;
    }
    return (uint16_t *)h->base + (p - (const float *)f->base);
}

void tinst_call_types(const tinst *t, attn_sdpa_desc *d, attn_sdpa_args *a)
{
    *d = t->desc;
    *a = t->args;
    const int ty = t->c.dtype;
    if (ty == ATTN_DTYPE_F32)
        return;
    d->q_type = d->k_type = d->v_type = d->o_type = (attn_dtype)ty;
    a->q16 = twin_at(t, t->args.q, &t->q, &t->q16);
    a->k16 = twin_at(t, t->args.k, &t->k, &t->k16);
    a->v16 = twin_at(t, t->args.v, &t->v, &t->v16);
    a->o16 = twin_at(t, t->args.o, &t->o, &t->o16);
    a->q = a->k = a->v = NULL;
    a->o = NULL;
}

void tinst_widen_o(tinst *t)
{
    if (t->c.dtype == ATTN_DTYPE_F32)
        return;
    const uint16_t *h = t->o16.base;
    uint32_t *o = t->o.base;
    /* One call for the whole buffer (attn_dtype_decode is exact), then the
     * sentinels of elements attn must not write put back. */
    attn_dtype_decode((attn_dtype)t->c.dtype, h, (float *)(void *)o, (int64_t)t->o16.count);
    for (size_t i = 0; i < t->o16.count; i++)
        if (h[i] == TSENTINEL16)
            o[i] = TSENTINEL;
}

void tinst_free(tinst *t)
{
    free(t->q16.base);
    free(t->k16.base);
    free(t->v16.base);
    free(t->o16.base);
    free(t->q.base);
    free(t->k.base);
    free(t->v.base);
    free(t->o.base);
    free(t->p.base);
    free(t->lse.base);
    free(t->mask.base);
    free(t->bias.base);
    free(t->gk.base);
    free(t->gq.base);
    free(t->layout.base);
    memset(t, 0, sizeof *t);
}

int tcase_sparse(const tcase *c)
{
    return c->use_gk || c->use_gq || c->bs > 0;
}

/* The global flags and the layout of a sparse case, from their own
 * generator; desc and args get them.  Returns 0 or -1. */
static int build_sparse(tinst *t)
{
    const tcase *c = &t->c;
    attn_sdpa_desc *d = &t->desc;
    attn_sdpa_args *a = &t->args;
    trng sp;
    trng_seed(&sp, c->seed * 0x2545F4914F6CDD1Dull + 0x51);
    if (c->use_gk) {
        if (tbuf_alloc(&t->gk, (size_t)(c->B * c->m), 1))
            return -1;
        uint8_t *g = t->gk.base;
        for (int64_t x = 0; x < c->B * c->m; x++) {
            const int on = c->glob_first ? x % c->m < c->glob_first : trng_bool(&sp, c->gk_rate);
            g[x] = on ? (uint8_t)trng_int(&sp, 1, 255) : 0;
        }
        d->use_global_k = 1;
        a->global_k = g;
    }
    if (c->use_gq) {
        if (tbuf_alloc(&t->gq, (size_t)(c->B * c->n), 1))
            return -1;
        uint8_t *g = t->gq.base;
        for (int64_t x = 0; x < c->B * c->n; x++) {
            const int64_t i = x % c->n, b = x / c->n;
            int on;
            if (c->gq_step || c->gq_edges)
                on = (c->gq_step && i % c->gq_step == (c->gq_off + b) % c->gq_step) ||
                     (c->gq_edges && (i % 16 == 0 || i % 16 == 15));
            else
                on = c->glob_first ? i < c->glob_first : trng_bool(&sp, c->gq_rate);
            g[x] = on ? (uint8_t)trng_int(&sp, 1, 255) : 0;
        }
        d->use_global_q = 1;
        a->global_q = g;
    }
    if (c->bs > 0) {
        const int64_t nb = (c->n + c->bs - 1) / c->bs, mb = (c->m + c->bs - 1) / c->bs;
        const int64_t H = c->lay_per_head ? c->Hq : 1;
        if (tbuf_alloc(&t->layout, (size_t)(H * nb * mb), 1))
            return -1;
        uint8_t *l = t->layout.base;
        const int causal = c->wr == 0;
        for (int64_t h = 0; h < H; h++) {
            uint8_t *lh = l + h * nb * mb;
            attn_status st = ATTN_OK;
            switch (c->lay_kind) {
            case TLAY_BIGBIRD:
                st = attn_layout_build_bigbird(lh, nb, mb, 3, 1, 2, c->seed + (uint64_t)h);
                break;
            case TLAY_STRIDED:
                st = attn_layout_build_strided(lh, nb, mb, 2 + h % 3, causal);
                break;
            case TLAY_FIXED:
                st = attn_layout_build_fixed(lh, nb, mb, 3 + h % 2, 1, causal);
                break;
            default:
                for (int64_t I = 0; I < nb; I++)
                    for (int64_t J = 0; J < mb; J++)
                        lh[I * mb + J] = (uint8_t)(trng_bool(&sp, c->lay_keep) &&
                                                   !(c->lay_kind == TLAY_EMPTY_ROWS && I % 3 == 2));
                break;
            }
            if (st != ATTN_OK)
                return -1;
        }
        d->block_size = c->bs;
        d->layout_per_head = c->lay_per_head;
        a->layout = l;
    }
    return 0;
}

/* The dense twin: the sparse visible set (and the case's own mask) as a
 * full keep-mask; no global flags, layout or window. */
static int fold_twin(tinst *t, const int64_t *klen, const int64_t *qlen)
{
    attn_sdpa_desc *d = &t->desc;
    attn_sdpa_args *a = &t->args;
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len;
    tbuf nm;
    if (tbuf_alloc(&nm, (size_t)(B * Hq * n * m), 1))
        return -1;
    uint8_t *keep = nm.base;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const uint8_t *mr = d->mask_mode != ATTN_MASK_NONE
                    ? a->mask + b * d->mask.batch + h * d->mask.head + i * d->mask.seq : NULL;
                for (int64_t j = 0; j < m; j++) {
                    int k = ref_candidate(d, a, b, h, i, j, klen[b], qlen[b]);
                    if (k && mr)
                        k = (mr[j] != 0) == (d->mask_mode == ATTN_MASK_KEEP_NONZERO);
                    keep[((b * Hq + h) * n + i) * m + j] = (uint8_t)k;
                }
            }
    free(t->mask.base);
    t->mask = nm;
    d->mask_mode = ATTN_MASK_KEEP_NONZERO;
    d->mask = attn_view_bhsd(Hq, n, m);
    a->mask = keep;
    d->use_global_k = d->use_global_q = 0;
    d->block_size = 0;
    d->layout_per_head = 0;
    a->global_k = a->global_q = a->layout = NULL;
    d->window_left = d->window_right = -1;
    return 0;
}

void tinst_clear_outputs(tinst *t)
{
    fill_bits(&t->o, TSENTINEL);
    fill_bits(&t->p, TSENTINEL);
    fill_bits(&t->lse, TSENTINEL);
}

static int all_sentinel(const tbuf *b)
{
    const uint32_t *u = b->base;
    if (!u)
        return 1;
    for (size_t i = 0; i < b->count; i++)
        if (u[i] != TSENTINEL)
            return 0;
    return 1;
}

int tinst_outputs_untouched(const tinst *t)
{
    return all_sentinel(&t->o) && all_sentinel(&t->p) && all_sentinel(&t->lse);
}

int tinst_build(tinst *t, const tcase *cin)
{
    memset(t, 0, sizeof *t);
    t->c = *cin;
    const tcase *c = &t->c;
    trng r, junk; /* junk: the garbage of poisoned positions only, so that
                     a case and its poisoned twin draw the same data */
    trng_seed(&r, c->seed);
    trng_seed(&junk, ~c->seed);

    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m;
    const int64_t dk = c->dk, dv = c->dv;
    const int mis = c->misalign ? 1 : 0;
    attn_sdpa_desc *d = &t->desc;
    attn_sdpa_args *a = &t->args;

    if (attn_sdpa_desc_init(d) != ATTN_OK)
        return -1;
    d->batch = B;
    d->q_heads = Hq;
    d->kv_heads = Hkv;
    d->q_len = n;
    d->kv_len = m;
    d->qk_dim = dk;
    d->v_dim = dv;
    d->scale = c->scale;
    d->align = (attn_align)c->align;
    d->window_left = c->wl;
    d->window_right = c->wr;
    d->use_kv_lens = c->use_kv_lens;
    d->use_q_lens = c->use_q_lens;
    d->mask_mode = (attn_mask_mode)c->mask_mode;
    d->use_bias = c->use_bias;
    d->want_probs = c->want_probs;
    d->want_lse = c->want_lse;
    d->threads = c->threads;
    memset(a, 0, sizeof *a);

    /* effective lengths */
    int64_t klen[TMAXB], qlen[TMAXB];
    for (int64_t b = 0; b < B; b++) {
        klen[b] = m;
        qlen[b] = n;
        if (b < TMAXB) {
            t->kv_lens[b] = c->kv_lens[b];
            t->q_lens[b] = c->q_lens[b];
            if (c->use_kv_lens)
                klen[b] = c->kv_lens[b];
            if (c->use_q_lens)
                qlen[b] = c->q_lens[b];
        }
    }
    if (B > TMAXB && (c->use_kv_lens || c->use_q_lens))
        return -1;
    if (c->use_kv_lens)
        a->kv_lens = t->kv_lens;
    if (c->use_q_lens)
        a->q_lens = t->q_lens;

    if ((tcase_sparse(c) || c->dense_twin) && build_sparse(t))
        return -1;

    /* which K/V rows some query of the group sees through the lengths, the
     * window and the sparse rules: kv_used[(b * Hkv + hk) * m + j] */
    unsigned char *kv_used = calloc((size_t)(B * Hkv * m), 1);
    if (!kv_used)
        return -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < (tcase_sparse(c) ? Hq : 1); h++)
            for (int64_t i = 0; i < qlen[b]; i++)
                for (int64_t j = 0; j < klen[b]; j++)
                    if (ref_candidate(d, a, b, h, i, j, klen[b], qlen[b])) {
                        if (tcase_sparse(c))
                            kv_used[(b * Hkv + h / (Hq / Hkv)) * m + j] = 1;
                        else
                            for (int64_t hk = 0; hk < Hkv; hk++)
                                kv_used[(b * Hkv + hk) * m + j] = 1;
                    }

    /* ---- Q, K, V */
    float *qp, *kp, *vp;
    if (c->layout == LAY_PACKED) {
        if (n != m || dk != dv) {
            free(kv_used);
            return -1;
        }
        const int64_t T = Hq + 2 * Hkv;
        attn_view pk = mkview(1, T, n, dk, 0, 0, 0);
        if (alloc_tensor(&t->q, pk, B, T, n, dk, mis)) {
            free(kv_used);
            return -1;
        }
        qp = (float *)t->q.base + mis;
        kp = qp + Hq * dk;
        vp = qp + (Hq + Hkv) * dk;
        d->q = d->k = d->v = pk;
    } else {
        int oq = 0, ok = 0, ov = 0;
        int64_t ps[3] = {0, 0, 0}, ph[3] = {0, 0, 0}, pb[3] = {0, 0, 0};
        if (c->layout == LAY_BSHD)
            oq = ok = ov = 1;
        if (c->layout == LAY_PADDED) {
            random_pads(&r, &oq, &ps[0], &ph[0], &pb[0]);
            random_pads(&r, &ok, &ps[1], &ph[1], &pb[1]);
            random_pads(&r, &ov, &ps[2], &ph[2], &pb[2]);
        }
        d->q = mkview(oq, Hq, n, dk, ps[0], ph[0], pb[0]);
        d->k = mkview(ok, Hkv, m, dk, ps[1], ph[1], pb[1]);
        d->v = mkview(ov, Hkv, m, dv, ps[2], ph[2], pb[2]);
        if (alloc_tensor(&t->q, d->q, B, Hq, n, dk, mis) ||
            alloc_tensor(&t->k, d->k, B, Hkv, m, dk, mis) ||
            alloc_tensor(&t->v, d->v, B, Hkv, m, dv, mis)) {
            free(kv_used);
            return -1;
        }
        qp = (float *)t->q.base + mis;
        kp = (float *)t->k.base + mis;
        vp = (float *)t->v.base + mis;
    }
    const double mag = c->in_mag;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                float *row = qp + b * d->q.batch + h * d->q.head + i * d->q.seq;
                int hide = c->poison && i >= qlen[b];
                /* values drawn either way: a case and its poisoned twin
                 * hold the same visible data */
                for (int64_t x = 0; x < dk; x++) {
                    float val = (float)trng_uniform(&r, -mag, mag);
                    row[x] = hide ? NAN : val;
                }
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t j = 0; j < m; j++) {
                float *kr = kp + b * d->k.batch + h * d->k.head + j * d->k.seq;
                float *vr = vp + b * d->v.batch + h * d->v.head + j * d->v.seq;
                int hide = c->poison && !kv_used[(b * Hkv + h) * m + j];
                for (int64_t x = 0; x < dk; x++) {
                    float val = (float)trng_uniform(&r, -mag, mag);
                    kr[x] = hide ? NAN : val;
                }
                for (int64_t x = 0; x < dv; x++) {
                    float val = (float)trng_uniform(&r, -mag, mag);
                    vr[x] = hide ? NAN : val;
                }
            }
    a->q = qp;
    a->k = kp;
    a->v = vp;

    /* ---- mask and bias: [Bm][Hm][Nm][m] with broadcast strides 0 */
    for (int which = 0; which < 2; which++) {
        int on = which == 0 ? c->mask_mode != ATTN_MASK_NONE : c->use_bias;
        if (!on)
            continue;
        int bc = which == 0 ? c->mask_bcast : c->bias_bcast;
        int64_t Bm = (bc & BC_BATCH) ? 1 : B;
        int64_t Hm = (bc & BC_HEAD) ? 1 : Hq;
        int64_t Nm = (bc & BC_SEQ) ? 1 : n;
        int64_t ps = 0, ph = 0, pb = 0;
        if (c->layout == LAY_PADDED || c->out_layout == OUT_PADDED) {
            ps = trng_int(&r, 1, 5);
            ph = trng_int(&r, 0, 7);
            pb = trng_int(&r, 0, 9);
        }
        attn_view vw = mkview(0, Hm, Nm, m, ps, ph, pb);
        size_t cnt = extent(vw, Bm, Hm, Nm, m) + (size_t)mis + 3;
        unsigned char *used = calloc((size_t)(Bm * Hm * Nm * m), 1);
        tbuf *tb = which == 0 ? &t->mask : &t->bias;
        if (!used || tbuf_alloc(tb, cnt, which == 0 ? 1 : sizeof(float))) {
            free(used);
            free(kv_used);
            return -1;
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < (tcase_sparse(c) ? Hq : 1); h++)
                for (int64_t i = 0; i < qlen[b]; i++)
                    for (int64_t j = 0; j < klen[b]; j++) {
                        if (!ref_candidate(d, a, b, h, i, j, klen[b], qlen[b]))
                            continue;
                        int64_t bb = (bc & BC_BATCH) ? 0 : b;
                        int64_t ii = (bc & BC_SEQ) ? 0 : i;
                        if (tcase_sparse(c))
                            used[((bb * Hm + (Hm > 1 ? h : 0)) * Nm + ii) * m + j] = 1;
                        else
                            for (int64_t hh = 0; hh < Hm; hh++)
                                used[((bb * Hm + hh) * Nm + ii) * m + j] = 1;
                    }
        if (which == 0) {
            uint8_t *mb = tb->base;
            for (size_t x = 0; x < cnt; x++)
                mb[x] = (uint8_t)trng_int(&r, 0, 255);
            uint8_t *mp = mb + mis;
            for (int64_t b = 0; b < Bm; b++)
                for (int64_t h = 0; h < Hm; h++)
                    for (int64_t i = 0; i < Nm; i++)
                        for (int64_t j = 0; j < m; j++) {
                            uint8_t *e = mp + b * vw.batch + h * vw.head + i * vw.seq + j;
                            int keep = trng_bool(&r, c->mask_keep);
                            uint8_t nz = (uint8_t)trng_int(&r, 1, 255);
                            if (c->poison && !used[((b * Hm + h) * Nm + i) * m + j])
                                *e = (uint8_t)trng_int(&junk, 0, 255);
                            else if (c->mask_mode == ATTN_MASK_KEEP_NONZERO)
                                *e = keep ? nz : 0;
                            else
                                *e = keep ? 0 : nz;
                        }
            a->mask = mp;
        } else {
            fill_f32(tb, NAN);
            float *bp = (float *)tb->base + mis;
            for (int64_t b = 0; b < Bm; b++)
                for (int64_t h = 0; h < Hm; h++)
                    for (int64_t i = 0; i < Nm; i++)
                        for (int64_t j = 0; j < m; j++) {
                            float *e = bp + b * vw.batch + h * vw.head + i * vw.seq + j;
                            float val = trng_bool(&r, c->bias_ninf)
                                            ? -INFINITY
                                            : (float)trng_uniform(&r, -c->bias_mag, c->bias_mag);
                            if (c->poison && !used[((b * Hm + h) * Nm + i) * m + j])
                                val = NAN;
                            *e = val;
                        }
            a->bias = bp;
        }
        if (bc & BC_BATCH)
            vw.batch = 0;
        if (bc & BC_HEAD)
            vw.head = 0;
        if (bc & BC_SEQ)
            vw.seq = 0;
        if (which == 0)
            d->mask = vw;
        else
            d->bias = vw;
        free(used);
    }
    free(kv_used);
    if (c->dense_twin && fold_twin(t, klen, qlen))
        return -1;

    /* ---- outputs */
    {
        int oo = 0, op = 0, ol = 0;
        int64_t ps[3] = {0, 0, 0}, ph[3] = {0, 0, 0}, pb[3] = {0, 0, 0};
        if (c->out_layout == OUT_BSHD)
            oo = op = ol = 1;
        if (c->out_layout == OUT_PADDED) {
            random_pads(&r, &oo, &ps[0], &ph[0], &pb[0]);
            random_pads(&r, &op, &ps[1], &ph[1], &pb[1]);
            random_pads(&r, &ol, &ps[2], &ph[2], &pb[2]);
        }
        d->o = mkview(oo, Hq, n, dv, ps[0], ph[0], pb[0]);
        if (alloc_tensor(&t->o, d->o, B, Hq, n, dv, mis))
            return -1;
        a->o = (float *)t->o.base + mis;
        if (c->want_probs) {
            d->probs = mkview(op, Hq, n, m, ps[1], ph[1], pb[1]);
            if (alloc_tensor(&t->p, d->probs, B, Hq, n, m, mis))
                return -1;
            a->probs = (float *)t->p.base + mis;
        }
        if (c->want_lse) {
            d->lse = mkview(ol, Hq, n, 1, ps[2], ph[2], pb[2]);
            if (alloc_tensor(&t->lse, d->lse, B, Hq, n, 1, mis))
                return -1;
            a->lse = (float *)t->lse.base + mis;
        }
        tinst_clear_outputs(t);
    }
    if (c->dtype != ATTN_DTYPE_F32 &&
        (typed_twin(&t->q16, &t->q, c->dtype) || typed_twin(&t->k16, &t->k, c->dtype) ||
         typed_twin(&t->v16, &t->v, c->dtype) || typed_twin(&t->o16, &t->o, c->dtype)))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ snapshots */

static uint32_t *dup_bits(const tbuf *b, size_t *count)
{
    *count = b->base ? b->count : 0;
    if (!b->base)
        return NULL;
    uint32_t *u = malloc(b->count * sizeof *u);
    if (u)
        memcpy(u, b->base, b->count * sizeof *u);
    return u;
}

void tsnap_take(tsnap *s, const tinst *t)
{
    s->o = dup_bits(&t->o, &s->no);
    s->p = dup_bits(&t->p, &s->np);
    s->lse = dup_bits(&t->lse, &s->nl);
}

void tsnap_free(tsnap *s)
{
    free(s->o);
    free(s->p);
    free(s->lse);
    memset(s, 0, sizeof *s);
}

static int bits_equal(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
    if (na != nb)
        return 0;
    if (na == 0)
        return 1;
    return memcmp(a, b, na * sizeof *a) == 0;
}

int tsnap_equal_o(const tsnap *a, const tsnap *b)
{
    return bits_equal(a->o, a->no, b->o, b->no);
}

int tsnap_equal(const tsnap *a, const tsnap *b)
{
    return bits_equal(a->o, a->no, b->o, b->no) &&
           bits_equal(a->p, a->np, b->p, b->np) &&
           bits_equal(a->lse, a->nl, b->lse, b->nl);
}

/* -------------------------------------------------------- accuracy stats */

void tstats_init(tstats *s, const char *family)
{
    memset(s, 0, sizeof *s);
    s->family = family;
}

void tstats_print(const tstats *s)
{
    printf("[accuracy] %-22s cases=%-4d max|dO|=%.3e max|dP|=%.3e "
           "max|dlse|=%.3e max err/tol=%.3f\n",
           s->family, s->cases, s->err_o, s->err_p, s->err_lse, s->ratio);
    if (s->bwd_cases) {
        printf("[accuracy] %-22s bwd=%-4d max|ddQ|=%.3e max|ddK|=%.3e max|ddV|=%.3e "
               "max|ddBias|=%.3e max err/tol=%.3f",
               s->family, s->bwd_cases, s->err_dq, s->err_dk, s->err_dv, s->err_dbias,
               s->ratio_bwd);
        if (s->bwd_widened)
            printf(" widened-bitwise=%d", s->bwd_widened);
        printf("\n");
    }
    if (s->ratio_dense > 0.0)
        printf("[accuracy] %-22s sparse vs dense twin: max |diff| / (2 tol) = %.3f\n", s->family,
               s->ratio_dense);
    fflush(stdout);
}

/* ------------------------------------------------------------- checking */

#define MAX_REPORTS 8

typedef struct reporter {
    const tinst *t;
    long bad;
} reporter;

static void report(reporter *rp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void report(reporter *rp, const char *fmt, ...)
{
    if (rp->bad == 0)
        printf("FAIL case: %s\n", tcase_str(&rp->t->c));
    if (rp->bad < MAX_REPORTS) {
        va_list ap;
        va_start(ap, fmt);
        printf("  ");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
    }
    rp->bad++;
}

static void upd(double err, double tol, double *maxerr, double *ratio)
{
    if (isfinite(err) && err > *maxerr)
        *maxerr = err;
    double q = err / tol;
    if (isfinite(q) && q > *ratio)
        *ratio = q;
}

/* Mark the view elements of [B][H][S][D] in a buffer-sized byte map. */
static unsigned char *view_map(const tbuf *tb, const float *ptr, attn_view v,
                               int64_t B, int64_t H, int64_t S, int64_t D)
{
    unsigned char *map = calloc(tb->count, 1);
    if (!map)
        return NULL;
    size_t base = (size_t)(ptr - (const float *)tb->base);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t x = 0; x < D; x++)
                    map[base + (size_t)(b * v.batch + h * v.head + s * v.seq + x)] = 1;
    return map;
}

static void check_untouched(reporter *rp, const char *name, const tbuf *tb,
                            const float *ptr, attn_view v, int64_t B, int64_t H,
                            int64_t S, int64_t D)
{
    if (!tb->base)
        return;
    unsigned char *map = view_map(tb, ptr, v, B, H, S, D);
    if (!map) {
        report(rp, "out of memory");
        return;
    }
    const uint32_t *u = tb->base;
    for (size_t x = 0; x < tb->count; x++)
        if (!map[x] && u[x] != TSENTINEL)
            report(rp, "%s: element %zu outside the view was written (0x%08x)",
                   name, x, (unsigned)u[x]);
    free(map);
}

long tinst_check(const tinst *t, tstats *st)
{
    const attn_sdpa_desc *d = &t->desc;
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len;
    const int64_t dv = d->v_dim;
    reporter rp = {t, 0};
    ref_out ro;
    if (ref_sdpa_alloc(d, &t->args, &ro)) {
        printf("reference: out of memory\n");
        rp.bad = 1;
        goto done;
    }

    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const size_t row = (size_t)((b * Hq + h) * n + i);
                double prel, orel, ltol;
                ref_row_tolerance(d->qk_dim, ro.nvis[row], ro.s_abs[row],
                                  ro.lse[row], &prel, &orel, &ltol);
                /* 16-bit O: its own rounding (u_t |O| <= u_t sum p |v|);
                 * BF16 products also round P to BF16 for P V (the same
                 * again).  u_t is twice the unit roundoff, for slack. */
                orel += (t->c.dtype == ATTN_DTYPE_BF16 ? 2.0 : 1.0) * tdtype_u(t->c.dtype);
                /* (and F16's subnormal outputs, spaced 2^-24 apart: an
                 * absolute 2^-24, twice their rounding error) */
                const double oabs = t->c.dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
                const float *O = t->args.o + b * d->o.batch + h * d->o.head + i * d->o.seq;
                for (int64_t x = 0; x < dv; x++) {
                    double ref = ro.o[row * (size_t)dv + (size_t)x];
                    double tol = orel * ro.o_abs[row * (size_t)dv + (size_t)x] + oabs + REF_TINY;
                    double err = fabs((double)O[x] - ref);
                    upd(err, tol, &st->err_o, &st->ratio);
                    if (!(err <= tol))
                        report(&rp, "O[b=%lld h=%lld i=%lld d=%lld] = %.9g, ref %.9g, "
                               "err %.3g > tol %.3g (visible keys %lld)",
                               (long long)b, (long long)h, (long long)i, (long long)x,
                               (double)O[x], ref, err, tol, (long long)ro.nvis[row]);
                }
                if (d->want_probs) {
                    const float *P = t->args.probs + b * d->probs.batch +
                                     h * d->probs.head + i * d->probs.seq;
                    for (int64_t j = 0; j < m; j++) {
                        double ref = ro.p[row * (size_t)m + (size_t)j];
                        double tol = prel * ref + REF_TINY;
                        double err = fabs((double)P[j] - ref);
                        upd(err, tol, &st->err_p, &st->ratio);
                        if (!(err <= tol))
                            report(&rp, "P[b=%lld h=%lld i=%lld j=%lld] = %.9g, ref %.9g, "
                                   "err %.3g > tol %.3g",
                                   (long long)b, (long long)h, (long long)i, (long long)j,
                                   (double)P[j], ref, err, tol);
                    }
                }
                if (d->want_lse) {
                    const float L = t->args.lse[b * d->lse.batch + h * d->lse.head +
                                                i * d->lse.seq];
                    double ref = ro.lse[row];
                    if (ref == -INFINITY) {
                        if (!((double)L == -INFINITY))
                            report(&rp, "lse[b=%lld h=%lld i=%lld] = %.9g, expected -inf "
                                   "(no visible key)",
                                   (long long)b, (long long)h, (long long)i, (double)L);
                    } else {
                        double err = fabs((double)L - ref);
                        upd(err, ltol, &st->err_lse, &st->ratio);
                        if (!(err <= ltol))
                            report(&rp, "lse[b=%lld h=%lld i=%lld] = %.9g, ref %.9g, "
                                   "err %.3g > tol %.3g",
                                   (long long)b, (long long)h, (long long)i, (double)L,
                                   ref, err, ltol);
                    }
                }
            }

    check_untouched(&rp, "O", &t->o, t->args.o, d->o, B, Hq, n, dv);
    if (d->want_probs)
        check_untouched(&rp, "P", &t->p, t->args.probs, d->probs, B, Hq, n, m);
    if (d->want_lse)
        check_untouched(&rp, "lse", &t->lse, t->args.lse, d->lse, B, Hq, n, 1);

done:
    if (rp.bad > MAX_REPORTS)
        printf("  ... %ld problems in all\n", rp.bad);
    st->cases++;
    ref_out_free(&ro);
    return rp.bad;
}

attn_status tinst_run(tinst *t)
{
    tinst_clear_outputs(t);
    if (t->c.dtype == ATTN_DTYPE_F32)
        return attn_sdpa(&t->desc, &t->args);
    uint16_t *h = t->o16.base;
    for (size_t i = 0; i < t->o16.count; i++)
        h[i] = TSENTINEL16;
    attn_sdpa_desc d;
    attn_sdpa_args a;
    tinst_call_types(t, &d, &a);
    attn_status st = attn_sdpa(&d, &a);
    tinst_widen_o(t);
    return st;
}

long tcase_run_check(const tcase *c, tstats *st)
{
    tinst t;
    if (tinst_build(&t, c)) {
        printf("FAIL: could not build case %s\n", tcase_str(c));
        tinst_free(&t);
        return -1;
    }
    attn_status s = tinst_run(&t);
    long bad;
    if (s != ATTN_OK) {
        printf("FAIL: attn_sdpa returned %d (%s) for %s\n", (int)s,
               attn_status_str(s), tcase_str(c));
        bad = -1;
    } else {
        bad = tinst_check(&t, st);
    }
    tinst_free(&t);
    return bad;
}

int tquick(void)
{
    const char *e = getenv("ATTN_TEST_QUICK");
    return e && atoi(e) != 0;
}
