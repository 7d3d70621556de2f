/* The MHA layer's backward (attn_mha_bwd_execute): dY through the output
 * projection, the SDPA backward from the saved context, and the input and
 * weight gradients of the projections (mha.h). */
#include "mha/mha.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Work items of the backward, in two kinds, each cut into fixed blocks:
 *
 * - an input gradient (BJ_INPUT): C[M][N] (row stride ldc) = sum over
 *   terms t of A_t[M][K_t] W_t[K_t][N] (the weights as stored, row stride
 *   N), in blocks of ATTN_MHA_ROWS rows: the terms add up in order in the
 *   thread's scratch, which then replaces or adds into C;
 * - a weight gradient (BJ_WEIGHT): dW[N][K] = dZ[M][N]^T A[M][K] and
 *   db[N] = sum of dZ rows, in blocks of ATTN_MHA_WROWS rows of dW, each one
 *   GEMM over all M tokens (in chunks of ATTN_MHA_TOKENS, added in order)
 *   and sums in token order, into the scratch, then stored or added.
 *
 * No two blocks write the same element and each computes in an order fixed
 * by the shape, so any thread count gives the same bits, and accumulate
 * gives exactly old + (what overwriting writes). */
enum { BJ_INPUT, BJ_WEIGHT };

typedef struct bterm {
    const float *a;
    int64_t lda;
    const float *w;
    int64_t K;
} bterm;

typedef struct bjob {
    int kind, nterms, acc;
    bterm t[3];          /* BJ_INPUT */
    float *c;            /* BJ_INPUT: C; BJ_WEIGHT: dW */
    int64_t ldc;
    const float *dz;     /* BJ_WEIGHT */
    int64_t ldz;
    const float *x;
    int64_t ldx;
    float *db;
    int64_t M, N, K;
} bjob;

typedef struct bjobs_ctx {
    const attn_gemm_kernels *gk;
    const bjob *jobs;
    int64_t blocks[8];
    int njobs;
    int64_t total;
    char *scratch;
    size_t per_thread;
} bjobs_ctx;

static void store(float *dst, const float *src, int64_t n, int acc)
{
    if (acc)
        for (int64_t i = 0; i < n; i++)
            dst[i] += src[i];
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

static void run_input_block(const attn_gemm_kernels *gk, const bjob *j, int64_t r0, float *s)
{
    const int64_t rows = j->M - r0 < ATTN_MHA_ROWS ? j->M - r0 : ATTN_MHA_ROWS;
    for (int t = 0; t < j->nterms; t++)
        attn_gemm(gk, 0, (int)rows, (int)j->N, (int)j->t[t].K, 1.0f,
                  j->t[t].a + r0 * j->t[t].lda, (int)j->t[t].lda, j->t[t].w, (int)j->N,
                  t ? 1.0f : 0.0f, s, (int)j->N);
    for (int64_t r = 0; r < rows; r++)
        store(j->c + (r0 + r) * j->ldc, s + r * j->N, j->N, j->acc);
}

/* A weight gradient stays on the BLAS on either engine: its product sums
 * over every token (K = B x L), so the tile kernels would stream a
 * 4096 x 32 panel of X from L3 for each block of rows, where the BLAS packs
 * it once (measured: T3's backward 20% slower on the tile kernels, while
 * the projections and input gradients run 1.8x faster on them). */
static void run_weight_block(const bjob *j, int64_t n0, float *s)
{
    const int64_t nb = j->N - n0 < ATTN_MHA_WROWS ? j->N - n0 : ATTN_MHA_WROWS;
    for (int64_t t0 = 0; t0 < j->M; t0 += ATTN_MHA_TOKENS) {
        const int64_t tk = j->M - t0 < ATTN_MHA_TOKENS ? j->M - t0 : ATTN_MHA_TOKENS;
        attn_gemm_tn(NULL, (int)nb, (int)j->K, (int)tk, 1.0f, j->dz + t0 * j->ldz + n0,
                     (int)j->ldz, j->x + t0 * j->ldx, (int)j->ldx, t0 ? 1.0f : 0.0f, s,
                     (int)j->K);
    }
    store(j->c + n0 * j->K, s, nb * j->K, j->acc);
    if (j->db) {
        float *sb = s + nb * j->K;
        for (int64_t n = 0; n < nb; n++)
            sb[n] = 0.0f;
        for (int64_t t = 0; t < j->M; t++) {
            const float *z = j->dz + t * j->ldz + n0;
            for (int64_t n = 0; n < nb; n++)
                sb[n] += z[n];
        }
        store(j->db + n0, sb, nb, j->acc);
    }
}

static void bjobs_body(void *arg, int tid)
{
    const bjobs_ctx *c = arg;
    float *s = (float *)(void *)(c->scratch + (size_t)tid * c->per_thread);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < c->total; it++) {
        int64_t k = it;
        int j = 0;
        while (k >= c->blocks[j])
            k -= c->blocks[j++];
        if (c->jobs[j].kind == BJ_INPUT)
            run_input_block(c->gk, &c->jobs[j], k * ATTN_MHA_ROWS, s);
        else
            run_weight_block(&c->jobs[j], k * ATTN_MHA_WROWS, s);
    }
}

static void run_bjobs(const attn_mha_plan *p, const bjob *jobs, int njobs, char *scratch)
{
    bjobs_ctx ctx = { p->x.gk, jobs, { 0 }, njobs, 0, scratch, p->bw_thread };
    for (int i = 0; i < njobs; i++) {
        const int64_t per = jobs[i].kind == BJ_INPUT ? ATTN_MHA_ROWS : ATTN_MHA_WROWS;
        const int64_t n = jobs[i].kind == BJ_INPUT ? jobs[i].M : jobs[i].N;
        ctx.blocks[i] = (n + per - 1) / per;
        ctx.total += ctx.blocks[i];
    }
    attn_parallel(p->x.blas, p->x.nthreads, ctx.total, bjobs_body, (void *)&ctx);
}

static bjob input_job(float *c, int64_t ldc, int64_t M, int64_t N, int acc)
{
    bjob j;
    memset(&j, 0, sizeof j);
    j.kind = BJ_INPUT;
    j.c = c;
    j.ldc = ldc;
    j.M = M;
    j.N = N;
    j.acc = acc;
    return j;
}

static void add_term(bjob *j, const float *a, int64_t lda, const float *w, int64_t K)
{
    j->t[j->nterms++] = (bterm){ a, lda, w, K };
}

static bjob weight_job(float *dw, float *db, const float *dz, int64_t ldz, const float *x,
                       int64_t ldx, int64_t M, int64_t N, int64_t K, int acc)
{
    bjob j;
    memset(&j, 0, sizeof j);
    j.kind = BJ_WEIGHT;
    j.c = dw;
    j.db = db;
    j.dz = dz;
    j.ldz = ldz;
    j.x = x;
    j.ldx = ldx;
    j.M = M;
    j.N = N;
    j.K = K;
    j.acc = acc;
    return j;
}

static attn_status check_bwd_args(const attn_mha_plan *p, const attn_mha_weights *w,
                                  const attn_mha_args *a, const attn_mha_grads *g)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, bias = d->has_bias, cross = !d->self_attention;
    const attn_pointer_use need[] = {
        /* (fp32 only: the 16-bit structs are not used) */
        { 0, w->weights16 }, { 0, a->args16 },
        { packed, w->in_proj_weight }, { packed && bias, w->in_proj_bias },
        { !packed, w->q_weight }, { !packed, w->k_weight }, { !packed, w->v_weight },
        { !packed && bias, w->q_bias }, { !packed && bias, w->k_bias },
        { !packed && bias, w->v_bias }, { 1, w->out_weight }, { bias, w->out_bias },
        { 1, a->x }, { cross, a->key }, { cross, a->value },
        { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->key_padding_mode != ATTN_MASK_NONE, a->key_padding_mask },
        { d->use_global_k, a->global_k }, { d->use_global_q, a->global_q },
        { d->block_size != 0, a->layout },
        { 1, g->dx }, { cross, g->dkey }, { cross, g->dvalue },
        { packed, g->d_in_proj_weight }, { packed && bias, g->d_in_proj_bias },
        { !packed, g->d_q_weight }, { !packed, g->d_k_weight }, { !packed, g->d_v_weight },
        { !packed && bias, g->d_q_bias }, { !packed && bias, g->d_k_bias },
        { !packed && bias, g->d_v_bias }, { 1, g->d_out_weight }, { bias, g->d_out_bias },
    };
    attn_status st = attn_check_pointers(need, sizeof need / sizeof need[0]);
    if (st != ATTN_OK)
        return st;
    return attn_check_lengths(p->B, a->kv_lens, p->S, a->q_lens, p->L);
}

ATTN_DEFINE_ZERO_INIT(attn_mha_grads_init, attn_mha_grads)

attn_status attn_mha_bwd_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                              const attn_mha_args *a, const float *dy, const void *context,
                              size_t context_bytes, attn_mha_grads *g, int accumulate,
                              void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a || !dy || !g)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a) || !ATTN_RESERVED_NULL(g))
        return ATTN_ERR_BAD_OPTION;
    if (p->x16 || p->w16)
        return ATTN_ERR_UNSUPPORTED_TYPE;
    if (p->no_training)
        return ATTN_ERR_TOO_LARGE;
    attn_status st = check_bwd_args(p, w, a, g);
    if (st != ATTN_OK || (st = attn_mha_check_context(p, context, context_bytes)) != ATTN_OK)
        return st;
    if (accumulate != 0 && accumulate != 1)
        return ATTN_ERR_BAD_OPTION;
    void *wsv;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->bw_bytes, &wsv)) != ATTN_OK)
        return st;
    char *ws = wsv;
    const char *cx = context;
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, BL = p->B * p->L, BS = p->B * p->S;
    const int acc = accumulate;
    const float *q = (const float *)(const void *)(cx + p->cx_q);
    const float *k = (const float *)(const void *)(cx + p->cx_k);
    const float *v = (const float *)(const void *)(cx + p->cx_v);
    const float *o = (const float *)(const void *)(cx + p->cx_o);
    const float *lse = (const float *)(const void *)(cx + p->cx_lse);
    float *dout = (float *)(void *)(ws + p->bw_do);
    float *dq = (float *)(void *)(ws + p->bw_q);
    float *dk = (float *)(void *)(ws + p->bw_k);
    float *dv = (float *)(void *)(ws + p->bw_v);
    char *scratch = ws + p->bw_scratch;

    /* dO = dY W_o (into the workspace: no gradient is written before the
     * SDPA backward has succeeded). */
    bjob jobs[8];
    jobs[0] = input_job(dout, E, BL, E, 0);
    add_term(&jobs[0], dy, p->os, w->out_weight, E);
    run_bjobs(p, jobs, 1, scratch);

    /* dQ, dK, dV: the SDPA backward under the forward's masks. */
    uint8_t *keep = NULL;
    if (p->combine) {
        keep = (uint8_t *)(ws + p->bw_mask);
        attn_mha_build_mask(p, a, keep);
    }
    attn_sdpa_bwd_args sa = {
        .q = q, .k = k, .v = v, .o = o, .d_o = dout, .lse = lse,
        .kv_lens = a->kv_lens, .q_lens = a->q_lens,
        .mask = p->combine ? keep : d->mask_mode != ATTN_MASK_NONE ? a->mask : a->key_padding_mask,
        .bias = a->bias, .dq = dq, .dk = dk, .dv = dv, .dbias = NULL,
        .global_k = a->global_k, .global_q = a->global_q, .layout = a->layout,
    };
    st = attn_sdpa_bwd_execute(p->sdpa_bwd, &sa, ws + p->bw_sdpa, p->bw_bytes - p->bw_sdpa);

    if (st == ATTN_OK) {
        /* The projections' gradients, in the weights' layout. */
        const int packed = d->packed_in_proj;
        const float *wq = packed ? w->in_proj_weight : w->q_weight;
        const float *wk = packed ? w->in_proj_weight + E * E : w->k_weight;
        const float *wv = packed ? w->in_proj_weight + 2 * E * E : w->v_weight;
        float *dwq = packed ? g->d_in_proj_weight : g->d_q_weight;
        float *dwk = packed ? g->d_in_proj_weight + E * E : g->d_k_weight;
        float *dwv = packed ? g->d_in_proj_weight + 2 * E * E : g->d_v_weight;
        float *dbq = packed ? g->d_in_proj_bias : g->d_q_bias;
        float *dbk = packed && g->d_in_proj_bias ? g->d_in_proj_bias + E : g->d_k_bias;
        float *dbv = packed && g->d_in_proj_bias ? g->d_in_proj_bias + 2 * E : g->d_v_bias;
        const float *xk = d->self_attention ? a->x : a->key;
        const float *xv = d->self_attention ? a->x : a->value;
        const int64_t lk = d->self_attention ? p->xs : p->ks, lv = d->self_attention ? p->xs : p->vs;
        int n = 0;
        /* dW_o = dY^T O, db_o = sum of dY rows. */
        jobs[n++] = weight_job(g->d_out_weight, g->d_out_bias, dy, p->os, o, E, BL, E, E, acc);
        jobs[n] = input_job(g->dx, p->xs, BL, E, acc);
        add_term(&jobs[n], dq, p->ldq, wq, E);
        if (d->self_attention) {
            add_term(&jobs[n], dk, p->ldk, wk, p->kvE);
            add_term(&jobs[n], dv, p->ldv, wv, p->kvE);
            n++;
        } else {
            n++;
            jobs[n] = input_job(g->dkey, p->ks, BS, p->kdim, acc);
            add_term(&jobs[n++], dk, p->ldk, wk, p->kvE);
            jobs[n] = input_job(g->dvalue, p->vs, BS, p->vdim, acc);
            add_term(&jobs[n++], dv, p->ldv, wv, p->kvE);
        }
        jobs[n++] = weight_job(dwq, dbq, dq, p->ldq, a->x, p->xs, BL, E, E, acc);
        jobs[n++] = weight_job(dwk, dbk, dk, p->ldk, xk, lk, BS, p->kvE, p->kdim, acc);
        jobs[n++] = weight_job(dwv, dbv, dv, p->ldv, xv, lv, BS, p->kvE, p->vdim, acc);
        run_bjobs(p, jobs, n, scratch);
    }
    if (!workspace)
        free(ws);
    return st;
}
