/* SDPA descriptor defaults, validation, plans and workspace sizing.
 * Everything that can be checked once is checked here; execute only checks
 * what changes per call (pointers, lengths, workspace). */
#include "sdpa/sdpa.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_status attn_sdpa_desc_init(attn_sdpa_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->q = desc->k = desc->v = desc->o = unset;
    desc->mask = desc->bias = desc->probs = desc->lse = unset;
    desc->scale = NAN;
    desc->align = ATTN_ALIGN_TOP_LEFT;
    desc->window_left = -1;
    desc->window_right = -1;
    desc->mask_mode = ATTN_MASK_NONE;
    return ATTN_OK;
}

/* One dimension of a view: its size and stride. */
typedef struct { int64_t size, stride; } dim_t_;

static int view_unset(const attn_view *v)
{
    return v->batch == ATTN_STRIDE_UNSET || v->head == ATTN_STRIDE_UNSET ||
           v->seq == ATTN_STRIDE_UNSET;
}

/*
 * Check a view of [B][H][S][D] (dim stride 1).  row_min is the smallest seq
 * stride allowed (D for matrices); broadcast allows 0 for batch, head and
 * seq; output asks that no two elements share an address.
 */
static attn_status check_view(const attn_view *v, int64_t B, int64_t H, int64_t S,
                              int64_t D, int broadcast, int output)
{
    if (view_unset(v))
        return ATTN_ERR_STRIDES_UNSET;
    dim_t_ dims[3] = { { B, v->batch }, { H, v->head }, { S, v->seq } };
    for (int i = 0; i < 3; i++) {
        if (dims[i].stride < 0)
            return ATTN_ERR_BAD_STRIDE;
        if (dims[i].stride == 0 && dims[i].size > 1 && !broadcast)
            return ATTN_ERR_BAD_STRIDE;
    }
    /* The seq stride is the BLAS leading dimension: at least a row, even
     * when there is a single row; only broadcast views may use 0. */
    if (v->seq < D && !(broadcast && v->seq == 0))
        return ATTN_ERR_BAD_STRIDE;
    if (v->seq > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    /* Extent in elements and bytes must fit (int64 and size_t). */
    uint64_t ext = (uint64_t)D, t;
    for (int i = 0; i < 3; i++) {
        if (__builtin_mul_overflow((uint64_t)(dims[i].size - 1), (uint64_t)dims[i].stride, &t) ||
            __builtin_add_overflow(ext, t, &ext))
            return ATTN_ERR_TOO_LARGE;
    }
    if (ext > (uint64_t)INT64_MAX / sizeof(float) || ext > SIZE_MAX / sizeof(float))
        return ATTN_ERR_TOO_LARGE;
    if (output) {
        /* Sort the dimensions of size > 1 by stride; each stride must clear
         * the extent of everything inside it. */
        dim_t_ s[3];
        int k = 0;
        for (int i = 0; i < 3; i++)
            if (dims[i].size > 1)
                s[k++] = dims[i];
        for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && s[j].stride < s[j - 1].stride; j--) {
                dim_t_ tmp = s[j]; s[j] = s[j - 1]; s[j - 1] = tmp;
            }
        uint64_t inner = (uint64_t)D;
        for (int i = 0; i < k; i++) {
            if ((uint64_t)s[i].stride < inner)
                return ATTN_ERR_BAD_STRIDE;
            inner += (uint64_t)(s[i].size - 1) * (uint64_t)s[i].stride;
        }
    }
    return ATTN_OK;
}

static attn_status validate(const attn_sdpa_desc *d)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]))
        return ATTN_ERR_BAD_OPTION;
    if (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT)
        return ATTN_ERR_BAD_OPTION;
    if (!attn_mask_mode_valid(d->mask_mode))
        return ATTN_ERR_BAD_OPTION;

    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    if (B <= 0 || Hq <= 0 || Hkv <= 0 || n <= 0 || m <= 0 || dk <= 0 || dv <= 0)
        return ATTN_ERR_BAD_SIZE;
    /* The BLAS takes int sizes; B and heads only need their products to fit,
     * which the extent checks below cover. */
    if (n > INT32_MAX || m > INT32_MAX || dk > INT32_MAX || dv > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    if (Hq % Hkv != 0)
        return ATTN_ERR_HEAD_RATIO;

    attn_status st;
    if ((st = check_view(&d->q, B, Hq, n, dk, 0, 0)) != ATTN_OK) return st;
    if ((st = check_view(&d->k, B, Hkv, m, dk, 0, 0)) != ATTN_OK) return st;
    if ((st = check_view(&d->v, B, Hkv, m, dv, 0, 0)) != ATTN_OK) return st;
    if ((st = check_view(&d->o, B, Hq, n, dv, 0, 1)) != ATTN_OK) return st;
    if (d->mask_mode != ATTN_MASK_NONE &&
        (st = check_view(&d->mask, B, Hq, n, m, 1, 0)) != ATTN_OK) return st;
    if (d->use_bias &&
        (st = check_view(&d->bias, B, Hq, n, m, 1, 0)) != ATTN_OK) return st;
    if (d->want_probs &&
        (st = check_view(&d->probs, B, Hq, n, m, 0, 1)) != ATTN_OK) return st;
    if (d->want_lse &&
        (st = check_view(&d->lse, B, Hq, n, 1, 0, 1)) != ATTN_OK) return st;

    if (isinf(d->scale))
        return ATTN_ERR_BAD_SCALE;
    if (d->threads < 0 || d->threads > ATTN_MAX_THREADS)
        return ATTN_ERR_BAD_THREADS;
    return ATTN_OK;
}

static size_t round_up(size_t x) { return (x + ATTN_ALIGNMENT - 1) / ATTN_ALIGNMENT * ATTN_ALIGNMENT; }

attn_status attn_sdpa_plan_create(attn_sdpa_plan **plan, const attn_sdpa_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = validate(desc);
    if (st != ATTN_OK)
        return st;

    attn_sdpa_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *desc;
    /* A bound past n + m is as good as unbounded; clamping it keeps the
     * index arithmetic of execute far from overflow. */
    const int64_t far = desc->q_len + desc->kv_len;
    p->window_left = desc->window_left < 0 ? -1 : desc->window_left > far ? far : desc->window_left;
    p->window_right = desc->window_right < 0 ? -1 : desc->window_right > far ? far : desc->window_right;
    p->scale = isnan(desc->scale) ? (float)(1.0 / sqrt((double)desc->qk_dim)) : desc->scale;
    p->nthreads = attn_resolve_threads(desc->threads);
    const int64_t B = desc->batch, n = desc->q_len, m = desc->kv_len, dv = desc->v_dim;
    const int64_t g = desc->q_heads / desc->kv_heads;
    p->group = g;
    p->bq = n < ATTN_BLOCK_Q ? n : ATTN_BLOCK_Q;
    p->bk = m < ATTN_TILE_K ? m : ATTN_TILE_K;
    p->nqblocks = (n + p->bq - 1) / p->bq;
    p->vrows = g * p->bq;

    /* Short queries over many keys with too few (batch, group, block) items
     * to keep every thread busy: split the keys into chunks merged by
     * logsumexp.  Decided by the shape alone. */
    const int64_t base = B * desc->kv_heads * p->nqblocks;
    p->nchunks = 1;
    if (n <= 64 && base < ATTN_SPLIT_ITEMS) {
        int64_t c = (ATTN_SPLIT_ITEMS + base - 1) / base;
        int64_t cmax = (m + ATTN_SPLIT_MIN_KEYS - 1) / ATTN_SPLIT_MIN_KEYS;
        if (c > cmax) c = cmax;
        size_t row_bytes = (size_t)(B * desc->q_heads * n) * (size_t)(dv + 2) * sizeof(float);
        while (c > 1 && row_bytes * (size_t)c > ATTN_SPLIT_MAX_BYTES)
            c--;
        p->nchunks = c;
    }
    p->chunk = (m + p->nchunks - 1) / p->nchunks;
    p->nitems = base * p->nchunks;

    /* GQA: the g heads of a group as one matrix of g * n rows, when the
     * whole of n is one block and the heads lie at a constant row stride. */
    p->stack_ldq = p->stack_ldo = 0;
    if (g > 1 && p->nqblocks == 1 && g * n <= ATTN_STACK_MAX) {
        int64_t ldq = n == 1 ? desc->q.head : desc->q.head == n * desc->q.seq ? desc->q.seq : 0;
        int64_t ldo = p->nchunks > 1 ? dv
                    : n == 1 ? desc->o.head : desc->o.head == n * desc->o.seq ? desc->o.seq : 0;
        if (ldq >= desc->qk_dim && ldq <= INT32_MAX && ldo >= dv && ldo <= INT32_MAX) {
            p->stack_ldq = ldq;
            p->stack_ldo = ldo;
        }
    }
    p->srows = p->stack_ldq ? p->vrows : p->bq;

    /* Per thread: the score tile, the visible range of each row (int64) and
     * the running max, sum and correction of each virtual row. */
    size_t tile = round_up((size_t)p->srows * (size_t)p->bk * sizeof(float));
    size_t ranges = round_up((size_t)p->bq * 2 * sizeof(int64_t));
    size_t state = round_up((size_t)p->vrows * 3 * sizeof(float));
    p->ws_ranges = tile;
    p->ws_state = tile + ranges;
    p->ws_thread = tile + ranges + state;
    p->ws_part = p->nchunks > 1
        ? round_up((size_t)(p->nchunks * B * desc->q_heads * n) * (size_t)(dv + 2) * sizeof(float))
        : 0;
    p->ws_bytes = p->ws_thread * (size_t)p->nthreads + p->ws_part;
    p->kern = attn_kernels_select();
    attn_blas_hooks_resolve(&p->blas);
    *plan = p;
    return ATTN_OK;
}

attn_status attn_sdpa_plan_destroy(attn_sdpa_plan *plan)
{
    free(plan);
    return ATTN_OK;
}

attn_status attn_sdpa_workspace_size(const attn_sdpa_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

attn_status attn_sdpa(const attn_sdpa_desc *desc, const attn_sdpa_args *args)
{
    attn_sdpa_plan *plan = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, desc);
    if (st != ATTN_OK)
        return st;
    st = attn_sdpa_execute(plan, args, NULL, 0);
    attn_sdpa_plan_destroy(plan);
    return st;
}
