/* Linear attention backward.
 *
 * A work item is one (batch, kv head) pair: it owns dQ of the query heads
 * of its group and dK, dV of the kv head.  With the chunks of the forward
 * (lin_chunk_keys), per item:
 *
 * Forward sweep (chunks in order), running state S = sum phi(k) v^T and
 * z = sum phi(k) over the keys before the chunk's kl:
 *   Fq = phi(Q_h[i0:i1]);  A = Fq Fk^T (masked);  N = Fq S + A V_c
 *   D_r = Fq_r . z + rowsum A_r + eps;  delta_r = dO_r . N_r / D_r
 *   G = dO / D;  c = -delta / D               (D and delta kept per row)
 *   dA = G V_c^T + c (masked)
 *   dQ = phi'(Q) * (G S^T + c z^T + dA Fk)
 *   state += Fk, V_c
 * Reverse sweep (chunks from the last), running state R = sum phi(q) g^T
 * and r = sum c phi(q) over the rows of the later chunks (every one of
 * them sees every key of this chunk):
 *   dFk = V_c R^T + r;  dV_c = Fk R
 *   per head: G, c from the kept D and delta; A and dA as above;
 *             dFk += dA^T Fq;  dV_c += A^T G;  R += Fq^T G;  r += Fq^T c
 *   dK_c = phi'(K_c) * dFk
 * and the keys before the first chunk's kl (seen by every row) get
 * dFk = V R^T + r, dV = Fk R with the final R.  Every sum runs in an order
 * fixed by the shape inside one item: bitwise identical for any thread
 * count. */
#include "linear/linear.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct attn_linear_bwd_plan {
    attn_linear_bwd_desc d;
    float eps;
    int64_t group, nitems;
    /* byte offsets in a thread's slice */
    size_t o_fk, o_dfx, o_a, o_da, o_g, o_dvc, o_s, o_z, o_den, o_c, o_stats;
    size_t ws_thread, ws_bytes;
    attn_exec x;                  /* kernels, engine (fwd.engine), threads */
};

attn_status attn_linear_bwd_desc_init(attn_linear_bwd_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    attn_linear_desc_init(&desc->fwd);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->d_o = desc->dq = desc->dk = desc->dv = unset;
    return ATTN_OK;
}

static attn_status validate(const attn_linear_bwd_desc *d)
{
    const attn_linear_desc *f = &d->fwd;
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        f->use_state)
        return ATTN_ERR_BAD_OPTION;
    attn_status st = attn_linear_validate(f, 0);
    if (st != ATTN_OK)
        return st;
    /* 16-bit Q, K, V, O: the forward only, so far */
    if (f->q_type != ATTN_DTYPE_F32 || f->k_type != ATTN_DTYPE_F32 ||
        f->v_type != ATTN_DTYPE_F32 || f->o_type != ATTN_DTYPE_F32)
        return ATTN_ERR_UNSUPPORTED_TYPE;
    const int64_t B = f->batch, Hq = f->q_heads, Hkv = f->kv_heads, n = f->q_len,
                  m = f->kv_len, dk = f->qk_dim, dv = f->v_dim;
    if ((st = attn_check_view(&d->d_o, B, Hq, n, dv, 0)) != ATTN_OK ||
        (st = attn_check_view(&d->dq, B, Hq, n, dk, VIEW_OUTPUT)) != ATTN_OK ||
        (st = attn_check_view(&d->dk, B, Hkv, m, dk, VIEW_OUTPUT)) != ATTN_OK ||
        (st = attn_check_view(&d->dv, B, Hkv, m, dv, VIEW_OUTPUT)) != ATTN_OK)
        return st;
    return ATTN_OK;
}

attn_status attn_linear_bwd_plan_create(attn_linear_bwd_plan **plan,
                                        const attn_linear_bwd_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = validate(desc);
    if (st != ATTN_OK)
        return st;
    const attn_linear_desc *f = &desc->fwd;
    const uint64_t C = ATTN_LINEAR_CHUNK, dk = (uint64_t)f->qk_dim, dv = (uint64_t)f->v_dim;
    const uint64_t g = (uint64_t)(f->q_heads / f->kv_heads);
    attn_exec x;
    attn_exec_init(&x, f->engine, f->threads);
    /* Per thread: phi(Q), phi(K), dFq / dFk (C x dk each), A and dA
     * (C x C), N / G and dV_c (C x dv), the state S / R (dk x dv) and z / r
     * (dk), D and c of the chunk rows (C doubles, C floats), and D and
     * delta of every query row of the group (2 g n floats). */
    int ok = 1;
    attn_carver c = ATTN_CARVER_INIT;
    size_t off[12];
    off[0] = attn_carve(&c, C * sizeof(float), dk);       /* phi(Q) */
    off[1] = attn_carve(&c, C * sizeof(float), dk);       /* phi(K) */
    off[2] = attn_carve(&c, C * sizeof(float), dk);       /* dFq / dFk */
    off[3] = attn_carve(&c, C * C, sizeof(float));        /* A */
    off[4] = attn_carve(&c, C * C, sizeof(float));        /* dA */
    off[5] = attn_carve(&c, C * sizeof(float), dv);       /* N / G */
    off[6] = attn_carve(&c, C * sizeof(float), dv);       /* dV_c */
    off[7] = attn_carve(&c, attn_size_mul(dk, dv, &ok), sizeof(float));   /* S / R */
    off[8] = attn_carve(&c, dk, sizeof(float));           /* z / r */
    off[9] = attn_carve(&c, C, sizeof(double));           /* D of the chunk rows */
    off[10] = attn_carve(&c, C, sizeof(float));           /* c */
    off[11] = attn_carve(&c, attn_size_mul(g, (uint64_t)f->q_len, &ok), 2 * sizeof(float));
    attn_carver all = ATTN_CARVER_INIT;
    attn_carve(&all, (uint64_t)x.nthreads, c.size);
    if (!ok || !c.ok || !all.ok)
        return ATTN_ERR_TOO_LARGE;

    attn_linear_bwd_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *desc;
    p->eps = isnan(f->eps) ? ATTN_LINEAR_EPS_DEFAULT : f->eps;
    p->x = x;
    p->group = (int64_t)g;
    p->nitems = f->batch * f->kv_heads;
    /* fq at 0 */
    p->o_fk = (size_t)off[1];
    p->o_dfx = (size_t)off[2];
    p->o_a = (size_t)off[3];
    p->o_da = (size_t)off[4];
    p->o_g = (size_t)off[5];
    p->o_dvc = (size_t)off[6];
    p->o_s = (size_t)off[7];
    p->o_z = (size_t)off[8];
    p->o_den = (size_t)off[9];
    p->o_c = (size_t)off[10];
    p->o_stats = (size_t)off[11];
    p->ws_thread = (size_t)c.size;
    p->ws_bytes = (size_t)all.size;
    *plan = p;
    return ATTN_OK;
}

attn_status attn_linear_bwd_plan_destroy(attn_linear_bwd_plan *plan)
{
    free(plan);
    return ATTN_OK;
}

attn_status attn_linear_bwd_workspace_size(const attn_linear_bwd_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

typedef struct bwork {
    float *fq, *fk, *dfx;   /* C x dk */
    float *a, *da;          /* C x C */
    float *g, *dvc;         /* C x dv */
    float *s, *z;           /* dk x dv, dk */
    double *den;            /* C */
    float *c;               /* C */
    float *stats;           /* [g][n][2]: D, delta */
} bwork;

typedef struct bitem {
    const attn_linear_bwd_plan *p;
    const attn_linear_bwd_args *a;
    bwork *w;
    int64_t b, hk;
    lin_geom geo;
} bitem;

static void zero_rows(float *base, int64_t rows, int64_t stride, int64_t width)
{
    for (int64_t r = 0; r < rows; r++)
        memset(base + r * stride, 0, (size_t)width * sizeof(float));
}

static void colsum_add(float *z, const float *x, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            z[c] += x[r * cols + c];
}

/* A = Fq Fk^T masked, for rows of the chunk against its kc keys. */
static void masked_product(const bitem *it, int64_t rows, int64_t kc, int64_t shift)
{
    const int64_t C = ATTN_LINEAR_CHUNK, dk = it->p->d.fwd.qk_dim;
    attn_gemm(it->p->x.gk, 1, (int)rows, (int)kc, (int)dk, 1.0f, it->w->fq, (int)dk, it->w->fk, (int)dk,
               0.0f, it->w->a, (int)C);
    lin_mask(it->w->a, C, rows, kc, shift);
}

/* dA = G V_c^T + c, masked. */
static void d_product(const bitem *it, const float *vv, int64_t rows, int64_t kc, int64_t shift)
{
    const attn_linear_desc *f = &it->p->d.fwd;
    const int64_t C = ATTN_LINEAR_CHUNK, dv = f->v_dim;
    bwork *w = it->w;
    attn_gemm(it->p->x.gk, 1, (int)rows, (int)kc, (int)dv, 1.0f, w->g, (int)dv, vv, (int)f->v.seq, 0.0f,
               w->da, (int)C);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < kc; c++)
            w->da[r * C + c] += w->c[r];
    lin_mask(w->da, C, rows, kc, shift);
}

/* G and c of rows [i0, i0 + rows) of query head hh of the group, from dO
 * and the kept D and delta. */
static void load_g(const bitem *it, int64_t hh, int64_t i0, int64_t rows)
{
    const attn_linear_bwd_desc *d = &it->p->d;
    const int64_t dv = d->fwd.v_dim, n = d->fwd.q_len, h = it->hk * it->p->group + hh;
    bwork *w = it->w;
    for (int64_t r = 0; r < rows; r++) {
        const float *dor = ATTN_VIEW_AT(it->a->d_o, d->d_o, it->b, h, i0 + r);
        const float *st = w->stats + (hh * n + i0 + r) * 2;
        for (int64_t x = 0; x < dv; x++)
            w->g[r * dv + x] = dor[x] / st[0];
        w->c[r] = -st[1] / st[0];
    }
}

static void forward_sweep(const bitem *it)
{
    const attn_linear_bwd_plan *p = it->p;
    const attn_linear_bwd_desc *d = &p->d;
    const attn_linear_desc *f = &d->fwd;
    const attn_linear_bwd_args *a = it->a;
    bwork *w = it->w;
    const int64_t C = ATTN_LINEAR_CHUNK, n = f->q_len, dk = f->qk_dim, dv = f->v_dim;
    const int64_t b = it->b, hk = it->hk, g = p->group;
    memset(w->s, 0, (size_t)(dk * dv) * sizeof(float));
    memset(w->z, 0, (size_t)dk * sizeof(float));
    int64_t pos = 0;
    for (int64_t i0 = 0; i0 < it->geo.qlen; i0 += C) {
        const int64_t i1 = i0 + C < it->geo.qlen ? i0 + C : it->geo.qlen, rows = i1 - i0;
        int64_t kl, kh, shift;
        lin_chunk_keys(&it->geo, i0, i1, &kl, &kh, &shift);
        for (int64_t j = pos; j < kl; j += C) {
            const int64_t kc = kl - j < C ? kl - j : C;
            attn_linear_phi(it->p->x.kern, f->feature_map,
                            ATTN_VIEW_AT(a->k, f->k, b, hk, j), f->k.seq, kc, dk, w->fk,
                            dk);
            attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)kc, 1.0f, w->fk, (int)dk,
                          ATTN_VIEW_AT(a->v, f->v, b, hk, j), (int)f->v.seq, 1.0f, w->s, (int)dv);
            colsum_add(w->z, w->fk, kc, dk);
        }
        pos = kl;
        const int64_t kc = kh - kl;
        const float *vv = ATTN_VIEW_AT(a->v, f->v, b, hk, kl);
        if (kc > 0)
            attn_linear_phi(it->p->x.kern, f->feature_map,
                            ATTN_VIEW_AT(a->k, f->k, b, hk, kl), f->k.seq, kc, dk, w->fk,
                            dk);
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t h = hk * g + hh;
            const float *q = ATTN_VIEW_AT(a->q, f->q, b, h, i0);
            attn_linear_phi(it->p->x.kern, f->feature_map, q, f->q.seq, rows, dk, w->fq, dk);
            /* N = Fq S + A V_c in the G buffer; D */
            attn_gemm(p->x.gk, 0, (int)rows, (int)dv, (int)dk, 1.0f, w->fq, (int)dk, w->s, (int)dv, 0.0f,
                       w->g, (int)dv);
            for (int64_t r = 0; r < rows; r++)
                w->den[r] = lin_dot(w->fq + r * dk, w->z, dk);
            if (kc > 0) {
                masked_product(it, rows, kc, shift);
                for (int64_t r = 0; r < rows; r++)
                    w->den[r] += lin_sum(w->a + r * C, kc);
                attn_gemm(p->x.gk, 0, (int)rows, (int)dv, (int)kc, 1.0f, w->a, (int)C, vv, (int)f->v.seq,
                           1.0f, w->g, (int)dv);
            }
            /* D, delta = dO . O kept; G = dO / D, c = -delta / D */
            for (int64_t r = 0; r < rows; r++) {
                const float D = (float)(w->den[r] + (double)p->eps);
                const float *dor = ATTN_VIEW_AT(a->d_o, d->d_o, b, h, i0 + r);
                double acc = 0.0;
                for (int64_t x = 0; x < dv; x++)
                    acc += (double)dor[x] * (w->g[r * dv + x] / D);
                float *st = w->stats + (hh * n + i0 + r) * 2;
                st[0] = D;
                st[1] = (float)acc;
            }
            load_g(it, hh, i0, rows);
            /* dFq = G S^T + c z^T + dA Fk */
            attn_gemm(p->x.gk, 1, (int)rows, (int)dk, (int)dv, 1.0f, w->g, (int)dv, w->s, (int)dv, 0.0f,
                       w->dfx, (int)dk);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t x = 0; x < dk; x++)
                    w->dfx[r * dk + x] += w->c[r] * w->z[x];
            if (kc > 0) {
                d_product(it, vv, rows, kc, shift);
                attn_gemm(p->x.gk, 0, (int)rows, (int)dk, (int)kc, 1.0f, w->da, (int)C, w->fk, (int)dk,
                           1.0f, w->dfx, (int)dk);
            }
            attn_linear_dphi(it->p->x.kern, f->feature_map, q, f->q.seq, rows, dk, w->dfx, dk,
                             ATTN_VIEW_AT(a->dq, d->dq, b, h, i0), d->dq.seq);
        }
        if (kc > 0) {
            attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)kc, 1.0f, w->fk, (int)dk, vv, (int)f->v.seq,
                          1.0f, w->s, (int)dv);
            colsum_add(w->z, w->fk, kc, dk);
            pos = kh;
        }
    }
}

/* dK, dV of the keys [j, j + kc) (phi(K) in fk) from the later rows'
 * state alone: dFk = V R^T + r, dV = Fk R. */
static void keys_from_state(const bitem *it, int64_t j, int64_t kc)
{
    const attn_linear_desc *f = &it->p->d.fwd;
    const attn_linear_bwd_args *a = it->a;
    bwork *w = it->w;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    attn_gemm(it->p->x.gk, 1, (int)kc, (int)dk, (int)dv, 1.0f, ATTN_VIEW_AT(a->v, f->v, it->b, it->hk, j),
               (int)f->v.seq, w->s, (int)dv, 0.0f, w->dfx, (int)dk);
    for (int64_t r = 0; r < kc; r++)
        for (int64_t x = 0; x < dk; x++)
            w->dfx[r * dk + x] += w->z[x];
    attn_gemm(it->p->x.gk, 0, (int)kc, (int)dv, (int)dk, 1.0f, w->fk, (int)dk, w->s, (int)dv, 0.0f, w->dvc,
               (int)dv);
}

static void store_keys(const bitem *it, int64_t j, int64_t kc)
{
    const attn_linear_bwd_desc *d = &it->p->d;
    const attn_linear_desc *f = &d->fwd;
    const attn_linear_bwd_args *a = it->a;
    bwork *w = it->w;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    attn_linear_dphi(it->p->x.kern, f->feature_map,
                     ATTN_VIEW_AT(a->k, f->k, it->b, it->hk, j), f->k.seq, kc, dk,
                     w->dfx, dk, ATTN_VIEW_AT(a->dk, d->dk, it->b, it->hk, j), d->dk.seq);
    for (int64_t r = 0; r < kc; r++)
        memcpy(ATTN_VIEW_AT(a->dv, d->dv, it->b, it->hk, j + r), w->dvc + r * dv,
               (size_t)dv * sizeof(float));
}

static void reverse_sweep(const bitem *it)
{
    const attn_linear_bwd_plan *p = it->p;
    const attn_linear_desc *f = &p->d.fwd;
    const attn_linear_bwd_args *a = it->a;
    bwork *w = it->w;
    const int64_t C = ATTN_LINEAR_CHUNK, dk = f->qk_dim, dv = f->v_dim;
    const int64_t b = it->b, hk = it->hk, g = p->group, qlen = it->geo.qlen;
    /* R and r in the state buffers */
    memset(w->s, 0, (size_t)(dk * dv) * sizeof(float));
    memset(w->z, 0, (size_t)dk * sizeof(float));
    if (qlen == 0)
        return;
    const int64_t nch = (qlen + C - 1) / C;
    for (int64_t ci = nch - 1; ci >= 0; ci--) {
        const int64_t i0 = ci * C, i1 = i0 + C < qlen ? i0 + C : qlen, rows = i1 - i0;
        int64_t kl, kh, shift;
        lin_chunk_keys(&it->geo, i0, i1, &kl, &kh, &shift);
        const int64_t kc = kh - kl;
        const float *vv = ATTN_VIEW_AT(a->v, f->v, b, hk, kl);
        if (kc > 0) {
            attn_linear_phi(it->p->x.kern, f->feature_map,
                            ATTN_VIEW_AT(a->k, f->k, b, hk, kl), f->k.seq, kc, dk, w->fk,
                            dk);
            keys_from_state(it, kl, kc);
        }
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t h = hk * g + hh;
            attn_linear_phi(it->p->x.kern, f->feature_map,
                            ATTN_VIEW_AT(a->q, f->q, b, h, i0), f->q.seq, rows, dk, w->fq,
                            dk);
            load_g(it, hh, i0, rows);
            if (kc > 0) {
                masked_product(it, rows, kc, shift);
                d_product(it, vv, rows, kc, shift);
                attn_gemm_tn(p->x.gk, (int)kc, (int)dk, (int)rows, 1.0f, w->da, (int)C, w->fq, (int)dk,
                              1.0f, w->dfx, (int)dk);
                attn_gemm_tn(p->x.gk, (int)kc, (int)dv, (int)rows, 1.0f, w->a, (int)C, w->g, (int)dv,
                              1.0f, w->dvc, (int)dv);
            }
            attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)rows, 1.0f, w->fq, (int)dk, w->g, (int)dv, 1.0f,
                          w->s, (int)dv);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t x = 0; x < dk; x++)
                    w->z[x] += w->c[r] * w->fq[r * dk + x];
        }
        if (kc > 0)
            store_keys(it, kl, kc);
    }
    /* The keys before the first chunk's: seen by every row. */
    int64_t kl0, kh0, shift0;
    lin_chunk_keys(&it->geo, 0, qlen < C ? qlen : C, &kl0, &kh0, &shift0);
    for (int64_t j = 0; j < kl0; j += C) {
        const int64_t kc = kl0 - j < C ? kl0 - j : C;
        attn_linear_phi(it->p->x.kern, f->feature_map,
                        ATTN_VIEW_AT(a->k, f->k, b, hk, j), f->k.seq, kc, dk, w->fk, dk);
        keys_from_state(it, j, kc);
        store_keys(it, j, kc);
    }
}

static void run_item(const attn_linear_bwd_plan *p, const attn_linear_bwd_args *a, bwork *w,
                     int64_t b, int64_t hk)
{
    const attn_linear_bwd_desc *d = &p->d;
    const attn_linear_desc *f = &d->fwd;
    const int64_t C = ATTN_LINEAR_CHUNK, n = f->q_len, m = f->kv_len;
    bitem it = { p, a, w, b, hk, { 0, 0, 0, 0 } };
    it.geo.causal = f->causal != 0;
    it.geo.qlen = f->use_q_lens ? a->q_lens[b] : n;
    it.geo.kvlen = f->use_kv_lens ? a->kv_lens[b] : m;
    it.geo.off = f->align == ATTN_ALIGN_BOTTOM_RIGHT ? it.geo.kvlen - it.geo.qlen : 0;

    /* Rows no sweep writes: padded queries; keys after the last chunk's
     * (or every key when there is no query). */
    for (int64_t hh = 0; hh < p->group; hh++)
        zero_rows(ATTN_VIEW_AT(a->dq, d->dq, b, hk * p->group + hh, it.geo.qlen), n - it.geo.qlen,
                  d->dq.seq, f->qk_dim);
    int64_t kend = 0;
    if (it.geo.qlen > 0) {
        int64_t kl, kh, shift;
        const int64_t last = (it.geo.qlen - 1) / C * C;
        lin_chunk_keys(&it.geo, last, it.geo.qlen, &kl, &kh, &shift);
        kend = kh;
    }
    zero_rows(ATTN_VIEW_AT(a->dk, d->dk, b, hk, kend), m - kend, d->dk.seq, f->qk_dim);
    zero_rows(ATTN_VIEW_AT(a->dv, d->dv, b, hk, kend), m - kend, d->dv.seq, f->v_dim);
    forward_sweep(&it);
    reverse_sweep(&it);
}

typedef struct bctx {
    const attn_linear_bwd_plan *p;
    const attn_linear_bwd_args *a;
    void *ws;
} bctx;

static void body(void *arg, int tid)
{
    const bctx *c = arg;
    const attn_linear_bwd_plan *p = c->p;
    char *base = (char *)c->ws + (size_t)tid * p->ws_thread;
    bwork w;
    w.fq = (float *)(void *)base;
    w.fk = (float *)(void *)(base + p->o_fk);
    w.dfx = (float *)(void *)(base + p->o_dfx);
    w.a = (float *)(void *)(base + p->o_a);
    w.da = (float *)(void *)(base + p->o_da);
    w.g = (float *)(void *)(base + p->o_g);
    w.dvc = (float *)(void *)(base + p->o_dvc);
    w.s = (float *)(void *)(base + p->o_s);
    w.z = (float *)(void *)(base + p->o_z);
    w.den = (double *)(void *)(base + p->o_den);
    w.c = (float *)(void *)(base + p->o_c);
    w.stats = (float *)(void *)(base + p->o_stats);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < p->nitems; it++)
        run_item(p, c->a, &w, it / p->d.fwd.kv_heads, it % p->d.fwd.kv_heads);
}

static attn_status check_args(const attn_linear_bwd_plan *p, const attn_linear_bwd_args *a)
{
    const attn_linear_desc *f = &p->d.fwd;
    const attn_pointer_use use[] = {
        { 1, a->q }, { 1, a->k }, { 1, a->v }, { 1, a->d_o }, { 1, a->dq }, { 1, a->dk },
        { 1, a->dv }, { f->use_kv_lens, a->kv_lens }, { f->use_q_lens, a->q_lens },
    };
    attn_status st = attn_check_pointers(use, sizeof use / sizeof use[0]);
    if (st != ATTN_OK)
        return st;
    return attn_check_lengths(f->batch, a->kv_lens, f->kv_len, a->q_lens, f->q_len);
}

ATTN_DEFINE_ZERO_INIT(attn_linear_bwd_args_init, attn_linear_bwd_args)

attn_status attn_linear_bwd_execute(const attn_linear_bwd_plan *p,
                                    const attn_linear_bwd_args *a, void *workspace,
                                    size_t workspace_bytes)
{
    if (!p || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(a))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = check_args(p, a);
    if (st != ATTN_OK)
        return st;
    void *ws;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws_bytes, &ws)) != ATTN_OK)
        return st;
    const bctx ctx = { p, a, ws };
    attn_parallel(p->x.blas, p->x.nthreads, p->nitems, body, (void *)&ctx);
    if (!workspace)
        free(ws);
    return ATTN_OK;
}

attn_status attn_linear_backward(const attn_linear_bwd_desc *desc,
                                 const attn_linear_bwd_args *args)
{
    attn_linear_bwd_plan *plan = NULL;
    attn_status st = attn_linear_bwd_plan_create(&plan, desc);
    if (st != ATTN_OK)
        return st;
    st = attn_linear_bwd_execute(plan, args, NULL, 0);
    attn_linear_bwd_plan_destroy(plan);
    return st;
}
