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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_MHA_ROWS 128

struct attn_mha_plan {
    attn_mha_desc d;
    int64_t E, H, Hkv, dh, kvE, kdim, vdim, B, L, S;
    int64_t xs, ks, vs, os;          /* row strides of X, key, value, Y */
    int nthreads;
    int fused_qkv;                   /* self-attention with packed weights */
    int combine;                     /* element mask AND key padding */
    int64_t mask_heads;              /* heads of the combined mask (1 or H) */
    int64_t ldq, ldk, ldv;           /* row strides of Q, K, V in workspace */
    size_t off_q, off_k, off_v, off_o, off_p, off_mask, off_sdpa, ws_bytes;
    attn_sdpa_plan *sdpa;
    attn_blas_hooks blas;
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

static attn_status validate(const attn_mha_desc *d)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]))
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
    p->nthreads = attn_resolve_threads(d->threads);
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
    sd.threads = p->nthreads;
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
    attn_blas_hooks_resolve(&p->blas);
    *plan = p;
    return ATTN_OK;
}

attn_status attn_mha_plan_destroy(attn_mha_plan *plan)
{
    if (plan) {
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

static void run_gemm_block(const gemm_job *j, int64_t r0)
{
    const int64_t rows = j->M - r0 < ATTN_MHA_ROWS ? j->M - r0 : ATTN_MHA_ROWS;
    float *c = j->c + r0 * j->ldc;
    attn_sgemm(1, (int)rows, (int)j->N, (int)j->K, 1.0f, j->a + r0 * j->lda, (int)j->lda,
               j->w, (int)j->K, 0.0f, c, (int)j->ldc);
    if (j->bias)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t n = 0; n < j->N; n++)
                c[r * j->ldc + n] += j->bias[n];
}

typedef struct gemms_ctx {
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
        run_gemm_block(&c->jobs[j], k * ATTN_MHA_ROWS);
    }
}

static void run_gemms(const attn_mha_plan *p, const gemm_job *jobs, int njobs)
{
    int64_t blocks[4], total = 0;
    for (int i = 0; i < njobs; i++) {
        blocks[i] = (jobs[i].M + ATTN_MHA_ROWS - 1) / ATTN_MHA_ROWS;
        total += blocks[i];
    }
    const gemms_ctx ctx = { jobs, blocks, total };
    attn_parallel(&p->blas, p->nthreads, total, gemms_body, (void *)&ctx);
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
                const uint8_t *mr = a->mask + b * d->mask.batch + h * d->mask.head + i * d->mask.seq;
                const uint8_t *kp = a->key_padding_mask + b * p->S;
                uint8_t *out = keep + ((b * p->mask_heads + h) * p->L + i) * p->S;
                for (int64_t j = 0; j < p->S; j++)
                    out[j] = (uint8_t)(((mr[j] != 0) != mdrop) & ((kp[j] != 0) != kdrop));
            }
}

attn_status attn_mha_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                             const attn_mha_args *a, void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = check_args(p, w, a);
    if (st != ATTN_OK)
        return st;
    void *wsv;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws_bytes, &wsv)) != ATTN_OK)
        return st;
    char *ws = wsv;
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, BL = p->B * p->L, BS = p->B * p->S;
    float *q = (float *)(void *)(ws + p->off_q);
    float *k = (float *)(void *)(ws + p->off_k);
    float *v = (float *)(void *)(ws + p->off_v);
    float *o = (float *)(void *)(ws + p->off_o);

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
        .bias = a->bias, .probs = probs, .lse = NULL,
    };
    st = attn_sdpa_execute(p->sdpa, &sa, ws + p->off_sdpa, p->ws_bytes - p->off_sdpa);

    if (st == ATTN_OK && d->weights == ATTN_WEIGHTS_AVERAGED) {
        /* Mean over heads in head order (thread-count independent). */
        const int64_t LS = p->L * p->S;
        const float inv = 1.0f / (float)p->H;
#if ATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(p->nthreads) schedule(static) if (p->nthreads > 1)
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
    if (!workspace)
        free(ws);
    return st;
}
