/* The MHA layer's forward: the projections as row-blocked GEMMs, the SDPA
 * core over head-strided views, the output projection; execute and the
 * training forward, which also fills the context. */
#include "mha/mha.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* C[M][N] (row stride ldc) = A[M][K] W[N][K]^T + bias, cut into blocks of
 * ATTN_MHA_ROWS rows. */
typedef struct gemm_job {
    const float *a;
    int64_t lda;
    const float *w;
    const float *bias;
    float *c;
    int64_t ldc;
    int64_t M, N, K;
} gemm_job;

static void run_gemm_block(const attn_gemm_kernels *gk, const gemm_job *j, int64_t r0)
{
    const int64_t rows = j->M - r0 < ATTN_MHA_ROWS ? j->M - r0 : ATTN_MHA_ROWS;
    float *c = j->c + r0 * j->ldc;
    attn_gemm(gk, 1, (int)rows, (int)j->N, (int)j->K, 1.0f, j->a + r0 * j->lda, (int)j->lda,
              j->w, (int)j->K, 0.0f, c, (int)j->ldc);
    if (j->bias)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t n = 0; n < j->N; n++)
                c[r * j->ldc + n] += j->bias[n];
}

typedef struct gemms_ctx {
    const attn_gemm_kernels *gk;
    const gemm_job *jobs;
    const int64_t *blocks;
    int64_t total;
} gemms_ctx;

static void gemms_body(void *arg, int tid)
{
    const gemms_ctx *c = arg;
    (void)tid;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < c->total; it++) {
        int64_t k = it;
        int j = 0;
        while (k >= c->blocks[j])
            k -= c->blocks[j++];
        run_gemm_block(c->gk, &c->jobs[j], k * ATTN_MHA_ROWS);
    }
}

static void run_gemms(const attn_mha_plan *p, const gemm_job *jobs, int njobs)
{
    int64_t blocks[4], total = 0;
    for (int i = 0; i < njobs; i++) {
        blocks[i] = (jobs[i].M + ATTN_MHA_ROWS - 1) / ATTN_MHA_ROWS;
        total += blocks[i];
    }
    const gemms_ctx ctx = { p->x.gk, jobs, blocks, total };
    attn_parallel(p->x.blas, p->x.nthreads, total, gemms_body, (void *)&ctx);
}

static attn_status check_args(const attn_mha_plan *p, const attn_mha_weights *w,
                              const attn_mha_args *a)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, bias = d->has_bias;
    const attn_pointer_use need[] = {
        { packed, w->in_proj_weight }, { packed && bias, w->in_proj_bias },
        { !packed, w->q_weight }, { !packed, w->k_weight }, { !packed, w->v_weight },
        { !packed && bias, w->q_bias }, { !packed && bias, w->k_bias },
        { !packed && bias, w->v_bias }, { 1, w->out_weight }, { bias, w->out_bias },
        { 1, a->x }, { !d->self_attention, a->key }, { !d->self_attention, a->value },
        { 1, a->out }, { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->key_padding_mode != ATTN_MASK_NONE, a->key_padding_mask },
        { d->weights != ATTN_WEIGHTS_NONE, a->weights },
        { d->use_global_k, a->global_k }, { d->use_global_q, a->global_q },
        { d->block_size != 0, a->layout },
    };
    attn_status st = attn_check_pointers(need, sizeof need / sizeof need[0]);
    if (st != ATTN_OK)
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
 * training forward, which also gets the logsumexp at lse). */
static attn_status forward(const attn_mha_plan *p, const attn_mha_weights *w,
                           const attn_mha_args *a, char *ws, char *qkvo, size_t qo,
                           size_t ko, size_t vo, size_t oo, float *lse)
{
    attn_status st;
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, BL = p->B * p->L, BS = p->B * p->S;
    float *q = (float *)(void *)(qkvo + qo);
    float *k = (float *)(void *)(qkvo + ko);
    float *v = (float *)(void *)(qkvo + vo);
    float *o = (float *)(void *)(qkvo + oo);

    /* Input projections, straight into [tokens][heads][dh]. */
    gemm_job jobs[3];
    int njobs;
    if (p->fused_qkv) {
        jobs[0] = (gemm_job){ a->x, p->xs, w->in_proj_weight, w->in_proj_bias, q, 3 * E, BL, 3 * E, E };
        njobs = 1;
    } else {
        const float *wq = d->packed_in_proj ? w->in_proj_weight : w->q_weight;
        const float *wk = d->packed_in_proj ? w->in_proj_weight + E * E : w->k_weight;
        const float *wv = d->packed_in_proj ? w->in_proj_weight + 2 * E * E : w->v_weight;
        const float *bq = d->packed_in_proj ? w->in_proj_bias : w->q_bias;
        const float *bk = d->packed_in_proj && w->in_proj_bias ? w->in_proj_bias + E : w->k_bias;
        const float *bv = d->packed_in_proj && w->in_proj_bias ? w->in_proj_bias + 2 * E : w->v_bias;
        const float *xk = d->self_attention ? a->x : a->key;
        const float *xv = d->self_attention ? a->x : a->value;
        const int64_t lk = d->self_attention ? p->xs : p->ks, lv = d->self_attention ? p->xs : p->vs;
        jobs[0] = (gemm_job){ a->x, p->xs, wq, bq, q, p->ldq, BL, E, E };
        jobs[1] = (gemm_job){ xk, lk, wk, bk, k, p->ldk, BS, p->kvE, p->kdim };
        jobs[2] = (gemm_job){ xv, lv, wv, bv, v, p->ldv, BS, p->kvE, p->vdim };
        njobs = 3;
    }
    run_gemms(p, jobs, njobs);

    uint8_t *keep = NULL;
    if (p->combine) {
        keep = (uint8_t *)(ws + p->off_mask);
        attn_mha_build_mask(p, a, keep);
    }
    float *probs = d->weights == ATTN_WEIGHTS_PER_HEAD ? a->weights
                 : d->weights == ATTN_WEIGHTS_AVERAGED ? (float *)(void *)(ws + p->off_p) : NULL;
    attn_sdpa_args sa = {
        .q = q, .k = k, .v = v, .o = o,
        .kv_lens = a->kv_lens, .q_lens = a->q_lens,
        .mask = p->combine ? keep : d->mask_mode != ATTN_MASK_NONE ? a->mask : a->key_padding_mask,
        .bias = a->bias, .probs = probs, .lse = lse,
        .global_k = a->global_k, .global_q = a->global_q, .layout = a->layout,
    };
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
        gemm_job out = { o, E, w->out_weight, w->out_bias, a->out, p->os, BL, E, E };
        run_gemms(p, &out, 1);
    }
    return st;
}

ATTN_DEFINE_ZERO_INIT(attn_mha_weights_init, attn_mha_weights)
ATTN_DEFINE_ZERO_INIT(attn_mha_args_init, attn_mha_args)

attn_status attn_mha_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                             const attn_mha_args *a, void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = check_args(p, w, a);
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
    attn_status st = check_args(p, w, a);
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
