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
 * count.
 *
 * 16-bit Q, K, V or dO (the fwd types; pointers in args.args16): the rows
 * a chunk (or a piece of the keys) reads are widened exactly to fp32 into
 * the thread's slice (Q at o_wq, K at o_wk, V at o_wv, dO at o_wdo; C rows
 * each, the K and V rows kept while the group's heads run), the operations
 * are then the same on the widened rows, and a 16-bit dQ or dK is written
 * by the feature map's derivative into the phi(Q) or phi(K) buffer (no
 * longer read by then), dV is read from dV_c, and each is rounded once into
 * its 16-bit rows.  The rows widened are exactly those the fp32 path reads,
 * and nothing grows with n x m (the per-row D and delta are fp32's). */
#include "linear/linear.h"
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* args16 took one pointer of attn_linear_bwd_args' reserved room (8 -> 7):
 * the size and the other fields' offsets are unchanged (x86-64). */
#if defined(__x86_64__) && defined(__LP64__)
_Static_assert(sizeof(attn_linear_bwd_args) == 136, "attn_linear_bwd_args changed size");
_Static_assert(offsetof(attn_linear_bwd_args, reserved) == 80,
               "attn_linear_bwd_args' reserved tail moved");
#endif

struct attn_linear_bwd_plan {
    attn_linear_bwd_desc d;
    float eps;
    int64_t group, nitems;
    /* byte offsets in a thread's slice */
    size_t o_fk, o_dfx, o_a, o_da, o_g, o_dvc, o_s, o_z, o_den, o_c, o_stats;
    /* 16-bit tensors: which, and their widened rows (C x dk for Q and K,
     * C x dv for V and dO; 0 bytes for an F32 tensor) */
    int q16, k16, v16, o16, any16;
    size_t o_wq, o_wk, o_wv, o_wdo;
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
    /* (the element types: F32, F16 or BF16 each, else BAD_OPTION) */
    attn_status st = attn_linear_validate(f, 0);
    if (st != ATTN_OK)
        return st;
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
     * (dk), D and c of the chunk rows (C doubles, C floats), D and delta
     * of every query row of the group (2 g n floats), and the widened rows
     * of each 16-bit Q, K (C x dk), V, dO (C x dv). */
    const int q16 = f->q_type != ATTN_DTYPE_F32, k16 = f->k_type != ATTN_DTYPE_F32,
              v16 = f->v_type != ATTN_DTYPE_F32, o16 = f->o_type != ATTN_DTYPE_F32;
    int ok = 1;
    attn_carver c = ATTN_CARVER_INIT;
    size_t off[16];
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
    off[12] = attn_carve(&c, q16 ? C * dk : 0, sizeof(float));   /* Q widened */
    off[13] = attn_carve(&c, k16 ? C * dk : 0, sizeof(float));   /* K widened */
    off[14] = attn_carve(&c, v16 ? C * dv : 0, sizeof(float));   /* V widened */
    off[15] = attn_carve(&c, o16 ? C * dv : 0, sizeof(float));   /* dO widened */
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
    p->q16 = q16;
    p->k16 = k16;
    p->v16 = v16;
    p->o16 = o16;
    p->any16 = q16 || k16 || v16 || o16;
    p->o_wq = (size_t)off[12];
    p->o_wk = (size_t)off[13];
    p->o_wv = (size_t)off[14];
    p->o_wdo = (size_t)off[15];
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
    float *wq, *wk;         /* 16-bit Q, K: a chunk's rows widened (C x dk) */
    float *wv, *wdo;        /* 16-bit V, dO: (C x dv) */
} bwork;

/* The tensors of a call, each in args or args.args16 as its type says. */
typedef struct btensors {
    const void *q, *k, *v, *d_o;
    void *dq, *dk, *dv;
} btensors;

typedef struct bitem {
    const attn_linear_bwd_plan *p;
    const btensors *t;
    bwork *w;
    int64_t b, hk;
    lin_geom geo;
} bitem;

/* Rows [r0, r0 + rows) of (b, h) of a tensor of type t set to 0. */
static void zero_rows(attn_dtype t, void *base, attn_view v, int64_t b, int64_t h, int64_t r0,
                      int64_t rows, int64_t width)
{
    const int64_t es = t == ATTN_DTYPE_F32 ? (int64_t)sizeof(float) : (int64_t)sizeof(uint16_t);
    char *p = (char *)base + (b * v.batch + h * v.head + r0 * v.seq) * es;
    for (int64_t r = 0; r < rows; r++)
        memset(p + r * v.seq * es, 0, (size_t)(width * es));
}

/* Rows of a tensor of (b, h) as floats: in place (F32) or widened into
 * buf (16-bit). */
static const float *in_rows(const bitem *it, attn_dtype t, const void *base, attn_view v,
                            int64_t h, int64_t r0, int64_t rows, int64_t width, float *buf,
                            int64_t *ld)
{
    return attn_linear_rows(it->p->x.cvt, t, base, v, it->b, h, r0, rows, width, buf, ld);
}

/* A 16-bit gradient's rows, computed in fp32 (src, leading dimension lds),
 * rounded once into rows [r0, r0 + rows) of (b, h). */
static void narrow_rows(const bitem *it, attn_dtype t, void *base, attn_view v, int64_t h,
                        int64_t r0, int64_t rows, int64_t width, const float *src, int64_t lds)
{
    const attn_cvt_kernels *cvt = it->p->x.cvt;
    uint16_t *dst = ATTN_VIEW_AT((uint16_t *)base, v, it->b, h, r0);
    for (int64_t r = 0; r < rows; r++) {
        if (t == ATTN_DTYPE_F16)
            cvt->f32_to_f16(src + r * lds, dst + r * v.seq, width);
        else
            cvt->f32_to_bf16(src + r * lds, dst + r * v.seq, width);
    }
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
static void d_product(const bitem *it, const float *vv, int64_t ldv, int64_t rows, int64_t kc,
                      int64_t shift)
{
    const attn_linear_desc *f = &it->p->d.fwd;
    const int64_t C = ATTN_LINEAR_CHUNK, dv = f->v_dim;
    bwork *w = it->w;
    attn_gemm(it->p->x.gk, 1, (int)rows, (int)kc, (int)dv, 1.0f, w->g, (int)dv, vv, (int)ldv, 0.0f,
               w->da, (int)C);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < kc; c++)
            w->da[r * C + c] += w->c[r];
    lin_mask(w->da, C, rows, kc, shift);
}

/* G and c of rows [i0, i0 + rows) of query head hh of the group, from
 * their dO rows (dob, leading dimension ldo) and the kept D and delta. */
static void load_g(const bitem *it, int64_t hh, int64_t i0, int64_t rows, const float *dob,
                   int64_t ldo)
{
    const attn_linear_bwd_desc *d = &it->p->d;
    const int64_t dv = d->fwd.v_dim, n = d->fwd.q_len;
    bwork *w = it->w;
    for (int64_t r = 0; r < rows; r++) {
        const float *dor = dob + r * ldo;
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
    const btensors *t = it->t;
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
            int64_t ldk, ldv;
            const float *kj = in_rows(it, f->k_type, t->k, f->k, hk, j, kc, dk, w->wk, &ldk);
            const float *vj = in_rows(it, f->v_type, t->v, f->v, hk, j, kc, dv, w->wv, &ldv);
            attn_linear_phi(p->x.kern, f->feature_map, kj, ldk, kc, dk, w->fk, dk);
            attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)kc, 1.0f, w->fk, (int)dk, vj, (int)ldv,
                          1.0f, w->s, (int)dv);
            colsum_add(w->z, w->fk, kc, dk);
        }
        pos = kl;
        const int64_t kc = kh - kl;
        /* the chunk's keys: V stays (in place or in wv) for every head */
        const float *vv = NULL;
        int64_t ldv = f->v.seq;
        if (kc > 0) {
            int64_t ldk;
            const float *kk = in_rows(it, f->k_type, t->k, f->k, hk, kl, kc, dk, w->wk, &ldk);
            vv = in_rows(it, f->v_type, t->v, f->v, hk, kl, kc, dv, w->wv, &ldv);
            attn_linear_phi(p->x.kern, f->feature_map, kk, ldk, kc, dk, w->fk, dk);
        }
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t h = hk * g + hh;
            int64_t ldq, ldo;
            const float *q = in_rows(it, f->q_type, t->q, f->q, h, i0, rows, dk, w->wq, &ldq);
            const float *dob = in_rows(it, f->o_type, t->d_o, d->d_o, h, i0, rows, dv, w->wdo,
                                       &ldo);
            attn_linear_phi(p->x.kern, f->feature_map, q, ldq, rows, dk, w->fq, dk);
            /* N = Fq S + A V_c in the G buffer; D */
            attn_gemm(p->x.gk, 0, (int)rows, (int)dv, (int)dk, 1.0f, w->fq, (int)dk, w->s, (int)dv, 0.0f,
                       w->g, (int)dv);
            for (int64_t r = 0; r < rows; r++)
                w->den[r] = lin_dot(w->fq + r * dk, w->z, dk);
            if (kc > 0) {
                masked_product(it, rows, kc, shift);
                for (int64_t r = 0; r < rows; r++)
                    w->den[r] += lin_sum(w->a + r * C, kc);
                attn_gemm(p->x.gk, 0, (int)rows, (int)dv, (int)kc, 1.0f, w->a, (int)C, vv, (int)ldv,
                           1.0f, w->g, (int)dv);
            }
            /* D, delta = dO . O kept; G = dO / D, c = -delta / D */
            for (int64_t r = 0; r < rows; r++) {
                const float D = (float)(w->den[r] + (double)p->eps);
                const float *dor = dob + r * ldo;
                double acc = 0.0;
                for (int64_t x = 0; x < dv; x++)
                    acc += (double)dor[x] * (w->g[r * dv + x] / D);
                float *st = w->stats + (hh * n + i0 + r) * 2;
                st[0] = D;
                st[1] = (float)acc;
            }
            load_g(it, hh, i0, rows, dob, ldo);
            /* dFq = G S^T + c z^T + dA Fk */
            attn_gemm(p->x.gk, 1, (int)rows, (int)dk, (int)dv, 1.0f, w->g, (int)dv, w->s, (int)dv, 0.0f,
                       w->dfx, (int)dk);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t x = 0; x < dk; x++)
                    w->dfx[r * dk + x] += w->c[r] * w->z[x];
            if (kc > 0) {
                d_product(it, vv, ldv, rows, kc, shift);
                attn_gemm(p->x.gk, 0, (int)rows, (int)dk, (int)kc, 1.0f, w->da, (int)C, w->fk, (int)dk,
                           1.0f, w->dfx, (int)dk);
            }
            /* dQ = phi'(Q) * dFq: into dQ's rows (F32), or into phi(Q)'s
             * buffer (read no more for this head) and rounded once */
            if (!p->q16) {
                attn_linear_dphi(p->x.kern, f->feature_map, q, ldq, rows, dk, w->dfx, dk,
                                 ATTN_VIEW_AT((float *)t->dq, d->dq, b, h, i0), d->dq.seq);
            } else {
                attn_linear_dphi(p->x.kern, f->feature_map, q, ldq, rows, dk, w->dfx, dk, w->fq,
                                 dk);
                narrow_rows(it, f->q_type, t->dq, d->dq, h, i0, rows, dk, w->fq, dk);
            }
        }
        if (kc > 0) {
            attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)kc, 1.0f, w->fk, (int)dk, vv, (int)ldv,
                          1.0f, w->s, (int)dv);
            colsum_add(w->z, w->fk, kc, dk);
            pos = kh;
        }
    }
}

/* dK, dV of the keys [j, j + kc) (phi(K) in fk, V's rows vj with leading
 * dimension ldv) from the later rows' state alone: dFk = V R^T + r,
 * dV = Fk R. */
static void keys_from_state(const bitem *it, const float *vj, int64_t ldv, int64_t kc)
{
    const attn_linear_desc *f = &it->p->d.fwd;
    bwork *w = it->w;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    attn_gemm(it->p->x.gk, 1, (int)kc, (int)dk, (int)dv, 1.0f, vj, (int)ldv, w->s, (int)dv, 0.0f,
               w->dfx, (int)dk);
    for (int64_t r = 0; r < kc; r++)
        for (int64_t x = 0; x < dk; x++)
            w->dfx[r * dk + x] += w->z[x];
    attn_gemm(it->p->x.gk, 0, (int)kc, (int)dv, (int)dk, 1.0f, w->fk, (int)dk, w->s, (int)dv, 0.0f, w->dvc,
               (int)dv);
}

/* dK = phi'(K) * dFk and dV of the keys [j, j + kc) (K's rows kj, leading
 * dimension ldk): F32 ones written in place; 16-bit dK through phi(K)'s
 * buffer (read no more for these keys) and dV from dV_c, rounded once. */
static void store_keys(const bitem *it, int64_t j, int64_t kc, const float *kj, int64_t ldk)
{
    const attn_linear_bwd_plan *p = it->p;
    const attn_linear_bwd_desc *d = &p->d;
    const attn_linear_desc *f = &d->fwd;
    const btensors *t = it->t;
    bwork *w = it->w;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    if (!p->k16) {
        attn_linear_dphi(p->x.kern, f->feature_map, kj, ldk, kc, dk, w->dfx, dk,
                         ATTN_VIEW_AT((float *)t->dk, d->dk, it->b, it->hk, j), d->dk.seq);
    } else {
        attn_linear_dphi(p->x.kern, f->feature_map, kj, ldk, kc, dk, w->dfx, dk, w->fk, dk);
        narrow_rows(it, f->k_type, t->dk, d->dk, it->hk, j, kc, dk, w->fk, dk);
    }
    if (!p->v16) {
        for (int64_t r = 0; r < kc; r++)
            memcpy(ATTN_VIEW_AT((float *)t->dv, d->dv, it->b, it->hk, j + r), w->dvc + r * dv,
                   (size_t)dv * sizeof(float));
    } else {
        narrow_rows(it, f->v_type, t->dv, d->dv, it->hk, j, kc, dv, w->dvc, dv);
    }
}

static void reverse_sweep(const bitem *it)
{
    const attn_linear_bwd_plan *p = it->p;
    const attn_linear_bwd_desc *d = &p->d;
    const attn_linear_desc *f = &d->fwd;
    const btensors *t = it->t;
    bwork *w = it->w;
    const int64_t C = ATTN_LINEAR_CHUNK, dk = f->qk_dim, dv = f->v_dim;
    const int64_t hk = it->hk, g = p->group, qlen = it->geo.qlen;
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
        /* the chunk's K and V rows (in place or widened) stay until its
         * keys are stored */
        const float *kk = NULL, *vv = NULL;
        int64_t ldk = f->k.seq, ldv = f->v.seq;
        if (kc > 0) {
            kk = in_rows(it, f->k_type, t->k, f->k, hk, kl, kc, dk, w->wk, &ldk);
            vv = in_rows(it, f->v_type, t->v, f->v, hk, kl, kc, dv, w->wv, &ldv);
            attn_linear_phi(p->x.kern, f->feature_map, kk, ldk, kc, dk, w->fk, dk);
            keys_from_state(it, vv, ldv, kc);
        }
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t h = hk * g + hh;
            int64_t ldq, ldo;
            const float *q = in_rows(it, f->q_type, t->q, f->q, h, i0, rows, dk, w->wq, &ldq);
            const float *dob = in_rows(it, f->o_type, t->d_o, d->d_o, h, i0, rows, dv, w->wdo,
                                       &ldo);
            attn_linear_phi(p->x.kern, f->feature_map, q, ldq, rows, dk, w->fq, dk);
            load_g(it, hh, i0, rows, dob, ldo);
            if (kc > 0) {
                masked_product(it, rows, kc, shift);
                d_product(it, vv, ldv, rows, kc, shift);
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
            store_keys(it, kl, kc, kk, ldk);
    }
    /* The keys before the first chunk's: seen by every row. */
    int64_t kl0, kh0, shift0;
    lin_chunk_keys(&it->geo, 0, qlen < C ? qlen : C, &kl0, &kh0, &shift0);
    for (int64_t j = 0; j < kl0; j += C) {
        const int64_t kc = kl0 - j < C ? kl0 - j : C;
        int64_t ldk, ldv;
        const float *kj = in_rows(it, f->k_type, t->k, f->k, hk, j, kc, dk, w->wk, &ldk);
        const float *vj = in_rows(it, f->v_type, t->v, f->v, hk, j, kc, dv, w->wv, &ldv);
        attn_linear_phi(p->x.kern, f->feature_map, kj, ldk, kc, dk, w->fk, dk);
        keys_from_state(it, vj, ldv, kc);
        store_keys(it, j, kc, kj, ldk);
    }
}

static void run_item(const attn_linear_bwd_plan *p, const attn_linear_bwd_args *a,
                     const btensors *t, bwork *w, int64_t b, int64_t hk)
{
    const attn_linear_bwd_desc *d = &p->d;
    const attn_linear_desc *f = &d->fwd;
    const int64_t C = ATTN_LINEAR_CHUNK, n = f->q_len, m = f->kv_len;
    bitem it = { p, t, w, b, hk, { 0, 0, 0, 0 } };
    it.geo.causal = f->causal != 0;
    it.geo.qlen = f->use_q_lens ? a->q_lens[b] : n;
    it.geo.kvlen = f->use_kv_lens ? a->kv_lens[b] : m;
    it.geo.off = f->align == ATTN_ALIGN_BOTTOM_RIGHT ? it.geo.kvlen - it.geo.qlen : 0;

    /* Rows no sweep writes: padded queries; keys after the last chunk's
     * (or every key when there is no query). */
    for (int64_t hh = 0; hh < p->group; hh++)
        zero_rows(f->q_type, t->dq, d->dq, b, hk * p->group + hh, it.geo.qlen, n - it.geo.qlen,
                  f->qk_dim);
    int64_t kend = 0;
    if (it.geo.qlen > 0) {
        int64_t kl, kh, shift;
        const int64_t last = (it.geo.qlen - 1) / C * C;
        lin_chunk_keys(&it.geo, last, it.geo.qlen, &kl, &kh, &shift);
        kend = kh;
    }
    zero_rows(f->k_type, t->dk, d->dk, b, hk, kend, m - kend, f->qk_dim);
    zero_rows(f->v_type, t->dv, d->dv, b, hk, kend, m - kend, f->v_dim);
    forward_sweep(&it);
    reverse_sweep(&it);
}

typedef struct bctx {
    const attn_linear_bwd_plan *p;
    const attn_linear_bwd_args *a;
    btensors t;
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
    w.wq = (float *)(void *)(base + p->o_wq);
    w.wk = (float *)(void *)(base + p->o_wk);
    w.wv = (float *)(void *)(base + p->o_wv);
    w.wdo = (float *)(void *)(base + p->o_wdo);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < p->nitems; it++)
        run_item(p, c->a, &c->t, &w, it / p->d.fwd.kv_heads, it % p->d.fwd.kv_heads);
}

static attn_status check_args(const attn_linear_bwd_plan *p, const attn_linear_bwd_args *a)
{
    const attn_linear_desc *f = &p->d.fwd;
    /* args16: given exactly when some tensor is 16-bit, its reserved room
     * NULL; then each tensor's pointer in the struct of its type, the
     * other one NULL. */
    static const attn_linear_bwd_args16 none;
    const attn_linear_bwd_args16 *h = a->args16;
    if (h && !ATTN_RESERVED_NULL(h))
        return ATTN_ERR_BAD_OPTION;
    if (p->any16 && !h)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!p->any16 && h)
        return ATTN_ERR_ARGUMENT_MISMATCH;
    if (!h)
        h = &none;
    const int q16 = p->q16, k16 = p->k16, v16 = p->v16, o16 = p->o16;
    const attn_pointer_use use[] = {
        { !q16, a->q }, { !k16, a->k }, { !v16, a->v }, { !o16, a->d_o },
        { !q16, a->dq }, { !k16, a->dk }, { !v16, a->dv },
        { q16, h->q }, { k16, h->k }, { v16, h->v }, { o16, h->d_o },
        { q16, h->dq }, { k16, h->dk }, { v16, h->dv },
        { f->use_kv_lens, a->kv_lens }, { f->use_q_lens, a->q_lens },
    };
    attn_status st = attn_check_pointers(use, sizeof use / sizeof use[0]);
    if (st != ATTN_OK)
        return st;
    return attn_check_lengths(f->batch, a->kv_lens, f->kv_len, a->q_lens, f->q_len);
}

ATTN_DEFINE_ZERO_INIT(attn_linear_bwd_args_init, attn_linear_bwd_args)
ATTN_DEFINE_ZERO_INIT(attn_linear_bwd_args16_init, attn_linear_bwd_args16)

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
    const attn_linear_bwd_args16 *h = a->args16;
    bctx ctx = { p, a, { NULL, NULL, NULL, NULL, NULL, NULL, NULL }, ws };
    ctx.t.q = p->q16 ? (const void *)h->q : (const void *)a->q;
    ctx.t.k = p->k16 ? (const void *)h->k : (const void *)a->k;
    ctx.t.v = p->v16 ? (const void *)h->v : (const void *)a->v;
    ctx.t.d_o = p->o16 ? (const void *)h->d_o : (const void *)a->d_o;
    ctx.t.dq = p->q16 ? (void *)h->dq : (void *)a->dq;
    ctx.t.dk = p->k16 ? (void *)h->dk : (void *)a->dk;
    ctx.t.dv = p->v16 ? (void *)h->dv : (void *)a->dv;
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
