/* The MHA layer's forward: the projections as row-blocked GEMMs, the SDPA
 * core over head-strided views, the output projection; execute and the
 * training forward, which also fills the context. */
#include "mha/mha.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C[M][N] (row stride ldc) = A[M][K] W[N][K]^T + bias, cut into blocks of
 * ATTN_MHA_ROWS rows.  Element types (attn.h, "Multi-head attention
 * layer: element types"):
 * - panel set (BF16 products): A is BF16 rows, read in place; W is the
 *   packed pair panel (ATTN_MHA_STRIP columns per strip); each strip of a
 *   block is computed into the thread's scratch, the bias added in fp32,
 *   and rounded to BF16 into C;
 * - otherwise the fp32 product of W (fp32 rows), with A widened a block
 *   at a time into the thread's scratch when at is F16 or BF16, and C
 *   computed in the scratch then rounded to ct when ct is (never both). */
typedef struct gemm_job {
    const void *a;
    attn_dtype at;
    int64_t lda;
    const float *w;
    const uint32_t *panel;
    const float *bias;
    void *c;
    attn_dtype ct;
    int64_t ldc;
    int64_t M, N, K;
} gemm_job;

/* dst[0..n) = src widened to fp32 (t F16 or BF16). */
static void widen(const attn_cvt_kernels *cvt, attn_dtype t, const uint16_t *src, float *dst,
                  int64_t n)
{
    if (t == ATTN_DTYPE_F16)
        cvt->f16_to_f32(src, dst, n);
    else
        cvt->bf16_to_f32(src, dst, n);
}

/* dst[0..n) = src rounded to t (F16 or BF16), as attn_dtype_encode. */
static void narrow(const attn_cvt_kernels *cvt, attn_dtype t, const float *src, uint16_t *dst,
                   int64_t n)
{
    if (t == ATTN_DTYPE_F16)
        cvt->f32_to_f16(src, dst, n);
    else
        cvt->f32_to_bf16(src, dst, n);
}

static void run_gemm_block(const attn_mha_plan *p, const gemm_job *j, int64_t r0, float *scr)
{
    const int64_t rows = j->M - r0 < ATTN_MHA_ROWS ? j->M - r0 : ATTN_MHA_ROWS;
    if (j->panel) {
        const uint16_t *a = (const uint16_t *)j->a + r0 * j->lda;
        uint16_t *c = (uint16_t *)j->c + r0 * j->ldc;
        const int64_t pk = (j->K + 1) / 2;
        for (int64_t n0 = 0, s = 0; n0 < j->N; n0 += ATTN_MHA_STRIP, s++) {
            const int64_t nc = j->N - n0 < ATTN_MHA_STRIP ? j->N - n0 : ATTN_MHA_STRIP;
            p->x.bf->mm(rows, nc, j->K, 1.0f, NULL, a, j->lda, j->panel + s * pk * ATTN_MHA_STRIP,
                        ATTN_MHA_STRIP, scr, ATTN_MHA_STRIP, 0, NULL);
            for (int64_t r = 0; r < rows; r++) {
                float *sr = scr + r * ATTN_MHA_STRIP;
                if (j->bias)
                    for (int64_t n = 0; n < nc; n++)
                        sr[n] += j->bias[n0 + n];
                p->x.bf->round(sr, c + r * j->ldc + n0, nc);
            }
        }
        return;
    }
    const float *a;
    int64_t lda;
    if (j->at != ATTN_DTYPE_F32) {
        const uint16_t *src = (const uint16_t *)j->a + r0 * j->lda;
        for (int64_t r = 0; r < rows; r++)
            widen(p->x.cvt, j->at, src + r * j->lda, scr + r * j->K, j->K);
        a = scr;
        lda = j->K;
    } else {
        a = (const float *)j->a + r0 * j->lda;
        lda = j->lda;
    }
    const int narrowed = j->ct != ATTN_DTYPE_F32;
    float *c = narrowed ? scr : (float *)j->c + r0 * j->ldc;
    const int64_t ldc = narrowed ? j->N : j->ldc;
    attn_gemm(p->x.gk, 1, (int)rows, (int)j->N, (int)j->K, 1.0f, a, (int)lda, j->w, (int)j->K,
              0.0f, c, (int)ldc);
    if (j->bias)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t n = 0; n < j->N; n++)
                c[r * ldc + n] += j->bias[n];
    if (narrowed)
        for (int64_t r = 0; r < rows; r++)
            narrow(p->x.cvt, j->ct, c + r * ldc, (uint16_t *)j->c + (r0 + r) * j->ldc, j->N);
}

typedef struct gemms_ctx {
    const attn_mha_plan *p;
    const gemm_job *jobs;
    const int64_t *blocks;
    int64_t total;
    char *scr;                       /* the threads' scratch blocks */
} gemms_ctx;

static void gemms_body(void *arg, int tid)
{
    const gemms_ctx *c = arg;
    float *scr = c->scr ? (float *)(void *)(c->scr + (size_t)tid * c->p->scr_thread) : NULL;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < c->total; it++) {
        int64_t k = it;
        int j = 0;
        while (k >= c->blocks[j])
            k -= c->blocks[j++];
        run_gemm_block(c->p, &c->jobs[j], k * ATTN_MHA_ROWS, scr);
    }
}

static void run_gemms(const attn_mha_plan *p, const gemm_job *jobs, int njobs, char *ws)
{
    int64_t blocks[4], total = 0;
    for (int i = 0; i < njobs; i++) {
        blocks[i] = (jobs[i].M + ATTN_MHA_ROWS - 1) / ATTN_MHA_ROWS;
        total += blocks[i];
    }
    const gemms_ctx ctx = { p, jobs, blocks, total, p->scr_thread ? ws + p->off_scr : NULL };
    attn_parallel(p->x.blas, p->x.nthreads, total, gemms_body, (void *)&ctx);
}

/* The weights of a call with w_type F16 or BF16, prepared in the
 * workspace: four matrices (mha.h, off_w), each [rows][K] of 16-bit values
 * at src, into pair panels (BF16 products: one item per strip) or widened
 * to fp32 (one item per ATTN_MHA_WROWS rows). */
typedef struct prep_mat {
    const uint16_t *src;
    int64_t rows, K;
    char *dst;
    int64_t items;
} prep_mat;

typedef struct prep_ctx {
    const attn_mha_plan *p;
    prep_mat m[4];
    int64_t total;
} prep_ctx;

static void prep_body(void *arg, int tid)
{
    const prep_ctx *c = arg;
    const attn_mha_plan *p = c->p;
    (void)tid;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < c->total; it++) {
        int64_t k = it;
        int m = 0;
        while (k >= c->m[m].items)
            k -= c->m[m++].items;
        const prep_mat *pm = &c->m[m];
        if (p->bf) {
            const int64_t r0 = k * ATTN_MHA_STRIP;
            const int64_t nr = pm->rows - r0 < ATTN_MHA_STRIP ? pm->rows - r0 : ATTN_MHA_STRIP;
            const uint16_t *rows[ATTN_MHA_STRIP];
            for (int64_t r = 0; r < nr; r++)
                rows[r] = pm->src + (r0 + r) * pm->K;
            uint32_t *panel = (uint32_t *)(void *)pm->dst + k * ((pm->K + 1) / 2) * ATTN_MHA_STRIP;
            p->x.bf->pack_rows(rows, nr, pm->K, panel, ATTN_MHA_STRIP);
        } else {
            const int64_t r0 = k * ATTN_MHA_WROWS;
            const int64_t nr = pm->rows - r0 < ATTN_MHA_WROWS ? pm->rows - r0 : ATTN_MHA_WROWS;
            widen(p->x.cvt, p->d.w_type, pm->src + r0 * pm->K,
                  (float *)(void *)pm->dst + r0 * pm->K, nr * pm->K);
        }
    }
}

/* The fp32 weights and biases a call's products read (packed: views into
 * in_proj).  With w_type F16 or BF16 they are prepared in the workspace
 * first (and panel[] set when the products are BF16). */
typedef struct layer_weights {
    const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    const uint32_t *panel[4];
} layer_weights;

static void prepare_weights(const attn_mha_plan *p, const attn_mha_weights *w, char *ws,
                            layer_weights *lw)
{
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, kvE = p->kvE;
    memset(lw, 0, sizeof *lw);
    if (!p->w16) {
        const float *ip = w->in_proj_weight, *ib = w->in_proj_bias;
        lw->wq = d->packed_in_proj ? ip : w->q_weight;
        lw->wk = d->packed_in_proj ? ip + E * E : w->k_weight;
        lw->wv = d->packed_in_proj ? ip + 2 * E * E : w->v_weight;
        lw->bq = d->packed_in_proj ? ib : w->q_bias;
        lw->bk = d->packed_in_proj && ib ? ib + E : w->k_bias;
        lw->bv = d->packed_in_proj && ib ? ib + 2 * E : w->v_bias;
        lw->wo = w->out_weight;
        lw->bo = w->out_bias;
        return;
    }
    const attn_mha_weights16 *h = w->weights16;
    /* Biases in fp32: b_q, b_k, b_v (in_proj_bias's 3E when packed), b_o. */
    if (d->has_bias) {
        float *b = (float *)(void *)(ws + p->off_b);
        if (d->packed_in_proj) {
            widen(p->x.cvt, d->w_type, h->in_proj_bias, b, 3 * E);
        } else {
            widen(p->x.cvt, d->w_type, h->q_bias, b, E);
            widen(p->x.cvt, d->w_type, h->k_bias, b + E, kvE);
            widen(p->x.cvt, d->w_type, h->v_bias, b + E + kvE, kvE);
        }
        widen(p->x.cvt, d->w_type, h->out_bias, b + E + 2 * kvE, E);
        lw->bq = b;
        lw->bk = b + E;
        lw->bv = b + E + kvE;
        lw->bo = b + E + 2 * kvE;
    }
    prep_ctx c;
    memset(&c, 0, sizeof c);
    c.p = p;
    const uint16_t *ip = h->in_proj_weight;
    if (p->bf) {
        /* Panels: in_proj as one when fused, else W_q, W_k, W_v (views of
         * in_proj when packed); W_o. */
        c.m[0] = (prep_mat){ d->packed_in_proj ? ip : h->q_weight,
                             p->fused_qkv ? 3 * E : E, E, NULL, 0 };
        if (!p->fused_qkv) {
            c.m[1] = (prep_mat){ d->packed_in_proj ? ip + E * E : h->k_weight, kvE, p->kdim,
                                 NULL, 0 };
            c.m[2] = (prep_mat){ d->packed_in_proj ? ip + 2 * E * E : h->v_weight, kvE,
                                 p->vdim, NULL, 0 };
        }
    } else {
        /* Widened: in_proj as one block whenever packed. */
        c.m[0] = (prep_mat){ d->packed_in_proj ? ip : h->q_weight,
                             d->packed_in_proj ? 3 * E : E, E, NULL, 0 };
        if (!d->packed_in_proj) {
            c.m[1] = (prep_mat){ h->k_weight, kvE, p->kdim, NULL, 0 };
            c.m[2] = (prep_mat){ h->v_weight, kvE, p->vdim, NULL, 0 };
        }
    }
    c.m[3] = (prep_mat){ h->out_weight, E, E, NULL, 0 };
    const int64_t per = p->bf ? ATTN_MHA_STRIP : ATTN_MHA_WROWS;
    for (int m = 0; m < 4; m++) {
        c.m[m].dst = ws + p->off_w[m];
        c.m[m].items = (c.m[m].rows + per - 1) / per;
        c.total += c.m[m].items;
    }
    attn_parallel(p->x.blas, p->x.nthreads, c.total, prep_body, (void *)&c);
    if (p->bf) {
        for (int m = 0; m < 4; m++)
            lw->panel[m] = (const uint32_t *)(const void *)(ws + p->off_w[m]);
        return;
    }
    const float *wq = (const float *)(const void *)(ws + p->off_w[0]);
    lw->wq = wq;
    lw->wk = d->packed_in_proj ? wq + E * E : (const float *)(const void *)(ws + p->off_w[1]);
    lw->wv = d->packed_in_proj ? wq + 2 * E * E : (const float *)(const void *)(ws + p->off_w[2]);
    lw->wo = (const float *)(const void *)(ws + p->off_w[3]);
}

/* The checks of weights and args shared by the forward (fwd 1: out and the
 * attention weights checked too) and the backward (fwd 0: they are
 * ignored), then the pointers in `more` (the backward's dY and
 * gradients), then the lengths. */
attn_status attn_mha_check_args(const attn_mha_plan *p, const attn_mha_weights *w,
                                const attn_mha_args *a, int fwd, const attn_pointer_use *more,
                                size_t nmore)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, bias = d->has_bias, cross = !d->self_attention;
    /* The 16-bit structs: present exactly when their type is 16-bit. */
    const attn_pointer_use structs[] = { { p->w16, w->weights16 }, { p->x16, a->args16 } };
    attn_status st = attn_check_pointers(structs, 2);
    if (st != ATTN_OK)
        return st;
    if ((w->weights16 && !ATTN_RESERVED_NULL(w->weights16)) ||
        (a->args16 && !ATTN_RESERVED_NULL(a->args16)))
        return ATTN_ERR_BAD_OPTION;
    static const attn_mha_weights16 no_w16;
    static const attn_mha_args16 no_a16;
    const attn_mha_weights16 *h = w->weights16 ? w->weights16 : &no_w16;
    const attn_mha_args16 *g = a->args16 ? a->args16 : &no_a16;
    /* A tensor in use takes the pointer of its type; the other is NULL. */
    const int wf = !p->w16, ws = p->w16, xf = !p->x16, xs = p->x16;
    const attn_pointer_use need[] = {
        { packed && wf, w->in_proj_weight }, { packed && ws, h->in_proj_weight },
        { packed && bias && wf, w->in_proj_bias }, { packed && bias && ws, h->in_proj_bias },
        { !packed && wf, w->q_weight }, { !packed && ws, h->q_weight },
        { !packed && wf, w->k_weight }, { !packed && ws, h->k_weight },
        { !packed && wf, w->v_weight }, { !packed && ws, h->v_weight },
        { !packed && bias && wf, w->q_bias }, { !packed && bias && ws, h->q_bias },
        { !packed && bias && wf, w->k_bias }, { !packed && bias && ws, h->k_bias },
        { !packed && bias && wf, w->v_bias }, { !packed && bias && ws, h->v_bias },
        { wf, w->out_weight }, { ws, h->out_weight },
        { bias && wf, w->out_bias }, { bias && ws, h->out_bias },
        { xf, a->x }, { xs, g->x }, { cross && xf, a->key }, { cross && xs, g->key },
        { cross && xf, a->value }, { cross && xs, g->value },
        /* (the backward ignores out and the attention weights) */
        { fwd && xf, fwd ? a->out : NULL }, { fwd && xs, fwd ? g->out : NULL },
        { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->key_padding_mode != ATTN_MASK_NONE, a->key_padding_mask },
        { fwd && d->weights != ATTN_WEIGHTS_NONE, fwd ? a->weights : NULL },
        { d->use_global_k, a->global_k }, { d->use_global_q, a->global_q },
        { d->block_size != 0, a->layout },
    };
    if ((st = attn_check_pointers(need, sizeof need / sizeof need[0])) != ATTN_OK ||
        (st = attn_check_pointers(more, nmore)) != ATTN_OK)
        return st;
    /* Checked here too (SDPA would), before any projection runs. */
    return attn_check_lengths(p->B, a->kv_lens, p->S, a->q_lens, p->L);
}

/* keep[b][h][i][j] = attn mask visible AND key padding visible. */
void attn_mha_build_mask(const attn_mha_plan *p, const attn_mha_args *a, uint8_t *keep)
{
    const attn_mha_desc *d = &p->d;
    const uint8_t mdrop = d->mask_mode == ATTN_MASK_DROP_NONZERO;
    const uint8_t kdrop = d->key_padding_mode == ATTN_MASK_DROP_NONZERO;
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->mask_heads; h++)
            for (int64_t i = 0; i < p->L; i++) {
                const uint8_t *mr = ATTN_VIEW_AT(a->mask, d->mask, b, h, i);
                const uint8_t *kp = a->key_padding_mask + b * p->S;
                uint8_t *out = keep + ((b * p->mask_heads + h) * p->L + i) * p->S;
                for (int64_t j = 0; j < p->S; j++)
                    out[j] = (uint8_t)(((mr[j] != 0) != mdrop) & ((kp[j] != 0) != kdrop));
            }
}

/* The forward with Q, K, V, O at qkvo (the workspace, or the context of a
 * training forward, which also gets the logsumexp at lse).  With BF16
 * products Q, K, V and O are BF16 (at the workspace's offsets), else
 * fp32. */
static attn_status forward(const attn_mha_plan *p, const attn_mha_weights *w,
                           const attn_mha_args *a, char *ws, char *qkvo, size_t qo,
                           size_t ko, size_t vo, size_t oo, float *lse)
{
    attn_status st;
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, BL = p->B * p->L, BS = p->B * p->S;
    void *q = qkvo + qo, *k = qkvo + ko, *v = qkvo + vo, *o = qkvo + oo;
    layer_weights lw;
    prepare_weights(p, w, ws, &lw);
    const attn_mha_args16 *a16 = a->args16;
    /* X, Xk, Xv and Y as given (float, or 16-bit of x_type) */
    const void *x = p->x16 ? (const void *)a16->x : (const void *)a->x;
    const void *xk = d->self_attention ? x : p->x16 ? (const void *)a16->key : (const void *)a->key;
    const void *xv = d->self_attention ? x : p->x16 ? (const void *)a16->value
                                                    : (const void *)a->value;
    void *y = p->x16 ? (void *)a16->out : (void *)a->out;
    /* C of the input projections: BF16 with BF16 products, else fp32. */
    const attn_dtype qt = p->bf ? ATTN_DTYPE_BF16 : ATTN_DTYPE_F32;

    /* Input projections, straight into [tokens][heads][dh]. */
    gemm_job jobs[3];
    int njobs;
    const int64_t lk = d->self_attention ? p->xs : p->ks, lv = d->self_attention ? p->xs : p->vs;
    if (p->fused_qkv) {
        jobs[0] = (gemm_job){ x, d->x_type, p->xs, lw.wq, lw.panel[0], lw.bq, q, qt, 3 * E,
                              BL, 3 * E, E };
        njobs = 1;
    } else {
        jobs[0] = (gemm_job){ x, d->x_type, p->xs, lw.wq, lw.panel[0], lw.bq, q, qt, p->ldq,
                              BL, E, E };
        jobs[1] = (gemm_job){ xk, d->x_type, lk, lw.wk, lw.panel[1], lw.bk, k, qt, p->ldk,
                              BS, p->kvE, p->kdim };
        jobs[2] = (gemm_job){ xv, d->x_type, lv, lw.wv, lw.panel[2], lw.bv, v, qt, p->ldv,
                              BS, p->kvE, p->vdim };
        njobs = 3;
    }
    run_gemms(p, jobs, njobs, ws);

    uint8_t *keep = NULL;
    if (p->combine) {
        keep = (uint8_t *)(ws + p->off_mask);
        attn_mha_build_mask(p, a, keep);
    }
    float *probs = d->weights == ATTN_WEIGHTS_PER_HEAD ? a->weights
                 : d->weights == ATTN_WEIGHTS_AVERAGED ? (float *)(void *)(ws + p->off_p) : NULL;
    attn_sdpa_args sa = {
        .kv_lens = a->kv_lens, .q_lens = a->q_lens,
        .mask = p->combine ? keep : d->mask_mode != ATTN_MASK_NONE ? a->mask : a->key_padding_mask,
        .bias = a->bias, .probs = probs, .lse = lse,
        .global_k = a->global_k, .global_q = a->global_q, .layout = a->layout,
    };
    if (p->bf) {
        sa.q16 = q;
        sa.k16 = k;
        sa.v16 = v;
        sa.o16 = o;
    } else {
        sa.q = q;
        sa.k = k;
        sa.v = v;
        sa.o = o;
    }
    st = attn_sdpa_execute(lse ? p->sdpa_train : p->sdpa, &sa, ws + p->off_sdpa,
                           p->ws_bytes - p->off_sdpa);

    if (st == ATTN_OK && d->weights == ATTN_WEIGHTS_AVERAGED) {
        /* Mean over heads in head order (thread-count independent). */
        const int64_t LS = p->L * p->S;
        const float inv = 1.0f / (float)p->H;
#if ATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(p->x.nthreads) schedule(static) if (p->x.nthreads > 1)
#endif
        for (int64_t bl = 0; bl < BL; bl++) {
            const int64_t b = bl / p->L, i = bl % p->L;
            float *dst = a->weights + bl * p->S;
            const float *src = probs + b * p->H * LS + i * p->S;
            memcpy(dst, src, (size_t)p->S * sizeof(float));
            for (int64_t h = 1; h < p->H; h++)
                for (int64_t j = 0; j < p->S; j++)
                    dst[j] += src[h * LS + j];
            for (int64_t j = 0; j < p->S; j++)
                dst[j] *= inv;
        }
    }
    if (st == ATTN_OK) {
        gemm_job out = { o, qt, E, lw.wo, lw.panel[3], lw.bo, y, d->x_type, p->os, BL, E, E };
        run_gemms(p, &out, 1, ws);
    }
    return st;
}

ATTN_DEFINE_ZERO_INIT(attn_mha_weights_init, attn_mha_weights)
ATTN_DEFINE_ZERO_INIT(attn_mha_args_init, attn_mha_args)
ATTN_DEFINE_ZERO_INIT(attn_mha_weights16_init, attn_mha_weights16)
ATTN_DEFINE_ZERO_INIT(attn_mha_args16_init, attn_mha_args16)

attn_status attn_mha_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                             const attn_mha_args *a, void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = attn_mha_check_args(p, w, a, 1, NULL, 0);
    if (st != ATTN_OK)
        return st;
    void *wsv;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws_bytes, &wsv)) != ATTN_OK)
        return st;
    char *ws = wsv;
    st = forward(p, w, a, ws, ws, p->off_q, p->off_k, p->off_v, p->off_o, NULL);
    if (!workspace)
        free(ws);
    return st;
}


/* The context's checks: the statuses of a caller workspace. */
attn_status attn_mha_check_context(const attn_mha_plan *p, const void *context, size_t bytes)
{
    if (!context)
        return ATTN_ERR_NULL_ARGUMENT;
    if (bytes < p->cx_bytes)
        return ATTN_ERR_WORKSPACE_TOO_SMALL;
    if ((uintptr_t)context % ATTN_ALIGNMENT)
        return ATTN_ERR_WORKSPACE_ALIGNMENT;
    return ATTN_OK;
}

attn_status attn_mha_train_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                                   const attn_mha_args *a, void *context, size_t context_bytes,
                                   void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a))
        return ATTN_ERR_BAD_OPTION;
    if (p->no_training)
        return ATTN_ERR_TOO_LARGE;
    attn_status st = attn_mha_check_args(p, w, a, 1, NULL, 0);
    if (st != ATTN_OK || (st = attn_mha_check_context(p, context, context_bytes)) != ATTN_OK)
        return st;
    void *wsv;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws_bytes, &wsv)) != ATTN_OK)
        return st;
    char *cx = context;
    st = forward(p, w, a, wsv, cx, p->cx_q, p->cx_k, p->cx_v, p->cx_o,
                 (float *)(void *)(cx + p->cx_lse));
    if (!workspace)
        free(wsv);
    return st;
}
