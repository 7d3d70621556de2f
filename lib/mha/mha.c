/* Multi-head attention layer: projections as row-blocked sgemm over all
 * B x L (or B x S) tokens, written straight into BSHD layout in the
 * workspace; the SDPA core reads them as head-strided views and writes its
 * output in BSHD; the output projection reads that.  Nothing is transposed
 * or copied between input and output.
 *
 * Every GEMM is cut into blocks of ATTN_MHA_ROWS rows fixed by the shape and
 * run on attn's threads with the BLAS single-threaded, so results are
 * bitwise identical for any number of threads, as for SDPA. */
#include "core/core.h"
#include "core/view.h"
#include "core/exec.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_MHA_ROWS 128
/* Rows of a weight gradient per work item of the backward. */
#define ATTN_MHA_WROWS 64
/* Tokens per sgemm call of a weight gradient (int arguments); the chunks
 * add up in token order. */
#define ATTN_MHA_TOKENS ((int64_t)1 << 30)

struct attn_mha_plan {
    attn_mha_desc d;
    int64_t E, H, Hkv, dh, kvE, kdim, vdim, B, L, S;
    int64_t xs, ks, vs, os;          /* row strides of X, key, value, Y */
    int fused_qkv;                   /* self-attention with packed weights */
    int combine;                     /* element mask AND key padding */
    int64_t mask_heads;              /* heads of the combined mask (1 or H) */
    int64_t ldq, ldk, ldv;           /* row strides of Q, K, V in workspace */
    size_t off_q, off_k, off_v, off_o, off_p, off_mask, off_sdpa, ws_bytes;
    attn_sdpa_plan *sdpa;
    /* Training: the context (Q, K, V, O as in the workspace, then the
     * logsumexp [B][H][L]), the forward's SDPA plan with the logsumexp, the
     * SDPA backward and the backward's workspace (dO, dQ, dK, dV, the
     * combined mask, the SDPA backward's workspace, per-thread scratch). */
    size_t cx_q, cx_k, cx_v, cx_o, cx_lse, cx_bytes;
    size_t bw_do, bw_q, bw_k, bw_v, bw_mask, bw_sdpa, bw_scratch, bw_thread, bw_bytes;
    attn_sdpa_plan *sdpa_train;
    attn_sdpa_bwd_plan *sdpa_bwd;
    int no_training;                 /* context or backward sizes overflow */
    attn_exec x;                     /* projections: engine, BLAS hooks, threads */
};

attn_status attn_mha_desc_init(attn_mha_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->mask = desc->bias = unset;
    desc->has_bias = 1;
    desc->scale = NAN;
    desc->align = ATTN_ALIGN_TOP_LEFT;
    desc->window_left = desc->window_right = -1;
    desc->mask_mode = ATTN_MASK_NONE;
    desc->key_padding_mode = ATTN_MASK_NONE;
    desc->weights = ATTN_WEIGHTS_NONE;
    return ATTN_OK;
}

/* Row stride of a [rows][width] matrix: 0 means width. */
static attn_status row_stride(int64_t stride, int64_t width, int64_t rows, int64_t *out)
{
    if (stride == 0)
        stride = width;
    if (stride < width)
        return ATTN_ERR_BAD_STRIDE;
    if (stride > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    uint64_t ext;
    if (__builtin_mul_overflow((uint64_t)(rows - 1), (uint64_t)stride, &ext) ||
        __builtin_add_overflow(ext, (uint64_t)width, &ext) ||
        ext > SIZE_MAX / sizeof(float) / 4)
        return ATTN_ERR_TOO_LARGE;
    *out = stride;
    return ATTN_OK;
}

/* Append a block of count elements of elem bytes, rounded to 64 bytes, to
 * the workspace layout: *offset is where it starts.  Overflow clears *ok. */
static void add_block(size_t *total, size_t *offset, uint64_t count, size_t elem, int *ok)
{
    uint64_t bytes = attn_size_align(attn_size_mul(count, elem, ok), ok);
    uint64_t end = attn_size_add(*total, bytes, ok);
    if (*ok) {
        *offset = *total;
        *total = (size_t)end;
    }
}

/* The context and backward workspace layouts, and the SDPA plans of
 * training: the forward's with the logsumexp, and the backward's (the
 * forward's views; dO, dQ, dK, dV laid out as O, Q, K, V). */
static attn_status plan_training(attn_mha_plan *p, const attn_sdpa_desc *sd)
{
    int ok = 1;
    const uint64_t BL = (uint64_t)p->B * (uint64_t)p->L, BS = (uint64_t)p->B * (uint64_t)p->S;
    const uint64_t E = (uint64_t)p->E;
    size_t cx = 0, bw = 0;
    if (p->fused_qkv) {
        add_block(&cx, &p->cx_q, attn_size_mul(BL, 3 * E, &ok), sizeof(float), &ok);
        p->cx_k = p->cx_q + (size_t)p->E * sizeof(float);
        p->cx_v = p->cx_q + 2 * (size_t)p->E * sizeof(float);
        add_block(&bw, &p->bw_q, attn_size_mul(BL, 3 * E, &ok), sizeof(float), &ok);
        p->bw_k = p->bw_q + (size_t)p->E * sizeof(float);
        p->bw_v = p->bw_q + 2 * (size_t)p->E * sizeof(float);
    } else {
        add_block(&cx, &p->cx_q, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
        add_block(&cx, &p->cx_k, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
        add_block(&cx, &p->cx_v, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
        add_block(&bw, &p->bw_q, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
        add_block(&bw, &p->bw_k, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
        add_block(&bw, &p->bw_v, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
    }
    add_block(&cx, &p->cx_o, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
    add_block(&cx, &p->cx_lse, attn_size_mul(BL, (uint64_t)p->H, &ok), sizeof(float), &ok);
    add_block(&bw, &p->bw_do, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
    if (p->combine)
        add_block(&bw, &p->bw_mask,
                  attn_size_mul(attn_size_mul(BL, (uint64_t)p->S, &ok), (uint64_t)p->mask_heads, &ok),
                  1, &ok);
    if (!ok)
        return ATTN_ERR_TOO_LARGE;

    attn_sdpa_desc tr = *sd;
    tr.want_probs = 0;
    tr.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    tr.want_lse = 1;
    tr.lse = (attn_view){ p->H * p->L, p->L, 1 };
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = tr;
    bd.d_o = sd->o;
    bd.dq = sd->q;
    bd.dk = sd->k;
    bd.dv = sd->v;
    /* The training forward's SDPA: the forward's, with the logsumexp. */
    tr.want_probs = sd->want_probs;
    tr.probs = sd->probs;
    attn_status st = attn_sdpa_plan_create(&p->sdpa_train, &tr);
    if (st != ATTN_OK)
        return st;
    if ((st = attn_sdpa_bwd_plan_create(&p->sdpa_bwd, &bd)) != ATTN_OK)
        return st;
    size_t sws;
    attn_sdpa_bwd_workspace_size(p->sdpa_bwd, &sws);
    add_block(&bw, &p->bw_sdpa, sws, 1, &ok);
    /* Scratch per thread: a block of ATTN_MHA_ROWS rows of an input
     * gradient, or ATTN_MHA_WROWS rows of a weight gradient and its bias. */
    int64_t feat = p->E > p->kdim ? p->E : p->kdim;
    feat = feat > p->vdim ? feat : p->vdim;
    p->bw_thread = (size_t)attn_size_align(
        attn_size_mul(attn_size_mul(ATTN_MHA_ROWS, (uint64_t)feat, &ok), sizeof(float), &ok), &ok);
    add_block(&bw, &p->bw_scratch, attn_size_mul(p->bw_thread, (uint64_t)p->x.nthreads, &ok), 1,
              &ok);
    if (!ok)
        return ATTN_ERR_TOO_LARGE;
    p->cx_bytes = cx;
    p->bw_bytes = bw;
    return ATTN_OK;
}

static attn_status validate(const attn_mha_desc *d)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        d->reserved_pad != 0 || !attn_engine_valid(d->engine))
        return ATTN_ERR_BAD_OPTION;
    if ((d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        !attn_mask_mode_valid(d->mask_mode) || !attn_mask_mode_valid(d->key_padding_mode) ||
        (d->weights != ATTN_WEIGHTS_NONE && d->weights != ATTN_WEIGHTS_PER_HEAD &&
         d->weights != ATTN_WEIGHTS_AVERAGED))
        return ATTN_ERR_BAD_OPTION;
    if (d->embed_dim <= 0 || d->num_heads <= 0 || d->num_kv_heads < 0 || d->kdim < 0 ||
        d->vdim < 0 || d->batch <= 0 || d->q_len <= 0 || d->kv_len <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (d->embed_dim % d->num_heads != 0)
        return ATTN_ERR_BAD_SIZE;
    if (d->self_attention && d->kv_len != d->q_len)
        return ATTN_ERR_BAD_SIZE;
    if (d->embed_dim > INT32_MAX || d->kdim > INT32_MAX || d->vdim > INT32_MAX ||
        d->q_len > INT32_MAX || d->kv_len > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : d->num_heads;
    if (d->num_heads % Hkv != 0)
        return ATTN_ERR_HEAD_RATIO;
    const int64_t E = d->embed_dim;
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    if (d->packed_in_proj && (kdim != E || vdim != E || Hkv != d->num_heads))
        return ATTN_ERR_BAD_OPTION;
    if (d->self_attention && (kdim != E || vdim != E))
        return ATTN_ERR_BAD_OPTION;
    /* key_stride and value_stride are not used (and not checked) in
     * self-attention, as the key and value pointers are not. */
    if (d->x_stride < 0 || d->out_stride < 0 ||
        (!d->self_attention && (d->key_stride < 0 || d->value_stride < 0)))
        return ATTN_ERR_BAD_STRIDE;
    if (isinf(d->scale))
        return ATTN_ERR_BAD_SCALE;
    if (d->threads < 0 || d->threads > ATTN_MAX_THREADS)
        return ATTN_ERR_BAD_THREADS;
    if (!(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))  /* NaN too */
        return ATTN_ERR_BAD_OPTION;
    /* (the SDPA plan checks the rest of the sparse options) */
    if (d->reserved_flags != 0)
        return ATTN_ERR_BAD_OPTION;
    return ATTN_OK;
}

attn_status attn_mha_plan_create(attn_mha_plan **plan, const attn_mha_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = validate(desc);
    if (st != ATTN_OK)
        return st;
    const attn_mha_desc *d = desc;
    attn_mha_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *d;
    p->E = d->embed_dim;
    p->H = d->num_heads;
    p->Hkv = d->num_kv_heads ? d->num_kv_heads : d->num_heads;
    p->dh = p->E / p->H;
    p->kvE = p->Hkv * p->dh;
    p->kdim = d->kdim ? d->kdim : p->E;
    p->vdim = d->vdim ? d->vdim : p->E;
    p->B = d->batch;
    p->L = d->q_len;
    p->S = d->kv_len;
    /* Token counts, and the weights' byte counts (never formed elsewhere,
     * but a caller's weights must be representable). */
    int ok = 1;
    const uint64_t BL = attn_size_mul((uint64_t)p->B, (uint64_t)p->L, &ok);
    const uint64_t BS = attn_size_mul((uint64_t)p->B, (uint64_t)p->S, &ok);
    const uint64_t E = (uint64_t)p->E;
    attn_size_mul(attn_size_mul(3 * E, E, &ok), sizeof(float), &ok);
    attn_size_mul(attn_size_mul(E, (uint64_t)p->kdim, &ok), sizeof(float), &ok);
    attn_size_mul(attn_size_mul(E, (uint64_t)p->vdim, &ok), sizeof(float), &ok);
    if (!ok) {
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }
    if ((st = row_stride(d->x_stride, p->E, (int64_t)BL, &p->xs)) != ATTN_OK ||
        (st = row_stride(d->out_stride, p->E, (int64_t)BL, &p->os)) != ATTN_OK ||
        (!d->self_attention &&
         ((st = row_stride(d->key_stride, p->kdim, (int64_t)BS, &p->ks)) != ATTN_OK ||
          (st = row_stride(d->value_stride, p->vdim, (int64_t)BS, &p->vs)) != ATTN_OK))) {
        free(p);
        return st;
    }
    attn_exec_init(&p->x, d->engine, d->threads);
    p->fused_qkv = d->self_attention && d->packed_in_proj;
    p->combine = d->mask_mode != ATTN_MASK_NONE && d->key_padding_mode != ATTN_MASK_NONE;
    p->mask_heads = p->combine && d->mask.head != 0 ? p->H : 1;

    /* Workspace: Q, K, V (one [B*L][3E] buffer when fused), O, per-head
     * weights to average, the combined mask, then the SDPA workspace. */
    size_t total = 0;
    if (p->fused_qkv) {
        p->ldq = p->ldk = p->ldv = 3 * p->E;
        add_block(&total, &p->off_q, attn_size_mul(BL, 3 * E, &ok), sizeof(float), &ok);
        p->off_k = p->off_q + (size_t)p->E * sizeof(float);
        p->off_v = p->off_q + 2 * (size_t)p->E * sizeof(float);
    } else {
        p->ldq = p->E;
        p->ldk = p->ldv = p->kvE;
        add_block(&total, &p->off_q, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
        add_block(&total, &p->off_k, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
        add_block(&total, &p->off_v, attn_size_mul(BS, (uint64_t)p->kvE, &ok), sizeof(float), &ok);
    }
    add_block(&total, &p->off_o, attn_size_mul(BL, E, &ok), sizeof(float), &ok);
    /* Attention weights per head, [B][H][L][S]: the caller's output, or
     * the workspace block averaged from. */
    const uint64_t lsz = attn_size_mul(BL, (uint64_t)p->S, &ok);
    uint64_t hlsz = 0;
    if (d->weights != ATTN_WEIGHTS_NONE) {
        hlsz = attn_size_mul(lsz, (uint64_t)p->H, &ok);
        attn_size_mul(hlsz, sizeof(float), &ok);
    }
    if (d->weights == ATTN_WEIGHTS_AVERAGED)
        add_block(&total, &p->off_p, hlsz, sizeof(float), &ok);
    if (p->combine)
        add_block(&total, &p->off_mask, attn_size_mul(lsz, (uint64_t)p->mask_heads, &ok), 1, &ok);
    if (!ok) {
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }

    attn_sdpa_desc sd;
    attn_sdpa_desc_init(&sd);
    sd.batch = p->B;
    sd.q_heads = p->H;
    sd.kv_heads = p->Hkv;
    sd.q_len = p->L;
    sd.kv_len = p->S;
    sd.qk_dim = sd.v_dim = p->dh;
    sd.q = (attn_view){ p->L * p->ldq, p->dh, p->ldq };
    sd.k = (attn_view){ p->S * p->ldk, p->dh, p->ldk };
    sd.v = (attn_view){ p->S * p->ldv, p->dh, p->ldv };
    sd.o = (attn_view){ p->L * p->E, p->dh, p->E };
    sd.scale = d->scale;
    sd.align = d->align;
    sd.window_left = d->window_left;
    sd.window_right = d->window_right;
    sd.use_kv_lens = d->use_kv_lens;
    sd.use_q_lens = d->use_q_lens;
    if (p->combine) {
        sd.mask_mode = ATTN_MASK_KEEP_NONZERO;
        sd.mask = (attn_view){ p->mask_heads * p->L * p->S, p->mask_heads > 1 ? p->L * p->S : 0, p->S };
    } else if (d->mask_mode != ATTN_MASK_NONE) {
        sd.mask_mode = d->mask_mode;
        sd.mask = d->mask;
    } else if (d->key_padding_mode != ATTN_MASK_NONE) {
        sd.mask_mode = d->key_padding_mode;
        sd.mask = (attn_view){ p->S, 0, 0 };
    }
    sd.use_bias = d->use_bias;
    sd.bias = d->bias;
    if (d->weights != ATTN_WEIGHTS_NONE) {
        sd.want_probs = 1;
        sd.probs = attn_view_bhsd(p->H, p->L, p->S);
    }
    sd.threads = p->x.nthreads;
    sd.engine = d->engine;
    /* Dropout: in this desc, so in the training forward's and (as its fwd)
     * the backward's, which regenerates the same keep mask. */
    sd.dropout_p = d->dropout_p;
    sd.dropout_seed = d->dropout_seed;
    sd.dropout_offset = d->dropout_offset;
    /* Sparse attention: global tokens and the layout, as given. */
    sd.use_global_k = d->use_global_k;
    sd.use_global_q = d->use_global_q;
    sd.block_size = d->block_size;
    sd.layout_per_head = d->layout_per_head;
    /* The user's mask strides are checked here, by SDPA's own rules. */
    if (p->combine) {
        attn_sdpa_desc chk = sd;
        chk.mask_mode = d->mask_mode;
        chk.mask = d->mask;
        attn_sdpa_plan *tmp = NULL;
        st = attn_sdpa_plan_create(&tmp, &chk);
        attn_sdpa_plan_destroy(tmp);
        if (st != ATTN_OK) {
            free(p);
            return st;
        }
    }
    st = attn_sdpa_plan_create(&p->sdpa, &sd);
    if (st != ATTN_OK) {
        free(p);
        return st;
    }
    size_t sws;
    attn_sdpa_workspace_size(p->sdpa, &sws);
    add_block(&total, &p->off_sdpa, sws, 1, &ok);
    if (!ok) {
        attn_sdpa_plan_destroy(p->sdpa);
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }
    p->ws_bytes = total;
    if ((st = plan_training(p, &sd)) != ATTN_OK) {
        attn_sdpa_bwd_plan_destroy(p->sdpa_bwd);
        attn_sdpa_plan_destroy(p->sdpa_train);
        p->sdpa_bwd = NULL;
        p->sdpa_train = NULL;
        /* A forward that fits stays usable; the training calls then
         * return ATTN_ERR_TOO_LARGE. */
        if (st != ATTN_ERR_TOO_LARGE) {
            attn_sdpa_plan_destroy(p->sdpa);
            free(p);
            return st;
        }
        p->no_training = 1;
    }
    /* The projections run on the engine the layer's attention runs on. */
    *plan = p;
    return ATTN_OK;
}

attn_status attn_mha_plan_destroy(attn_mha_plan *plan)
{
    if (plan) {
        attn_sdpa_bwd_plan_destroy(plan->sdpa_bwd);
        attn_sdpa_plan_destroy(plan->sdpa_train);
        attn_sdpa_plan_destroy(plan->sdpa);
        free(plan);
    }
    return ATTN_OK;
}

attn_status attn_mha_workspace_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

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
static void build_mask(const attn_mha_plan *p, const attn_mha_args *a, uint8_t *keep)
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
        build_mask(p, a, keep);
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
ATTN_DEFINE_ZERO_INIT(attn_mha_grads_init, attn_mha_grads)

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


/* ------------------------------------------------------------------------ */
/* Training: the context and the backward                                    */
/* ------------------------------------------------------------------------ */

attn_status attn_mha_context_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    if (plan->no_training)
        return ATTN_ERR_TOO_LARGE;
    *bytes = plan->cx_bytes;
    return ATTN_OK;
}

attn_status attn_mha_bwd_workspace_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    if (plan->no_training)
        return ATTN_ERR_TOO_LARGE;
    *bytes = plan->bw_bytes;
    return ATTN_OK;
}

/* The context's checks: the statuses of a caller workspace. */
static attn_status check_context(const attn_mha_plan *p, const void *context, size_t bytes)
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
    if (st != ATTN_OK || (st = check_context(p, context, context_bytes)) != ATTN_OK)
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

attn_status attn_mha_bwd_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                              const attn_mha_args *a, const float *dy, const void *context,
                              size_t context_bytes, attn_mha_grads *g, int accumulate,
                              void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a || !dy || !g)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a) || !ATTN_RESERVED_NULL(g))
        return ATTN_ERR_BAD_OPTION;
    if (p->no_training)
        return ATTN_ERR_TOO_LARGE;
    attn_status st = check_bwd_args(p, w, a, g);
    if (st != ATTN_OK || (st = check_context(p, context, context_bytes)) != ATTN_OK)
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
        build_mask(p, a, keep);
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
