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

/* A quantized K or V: whole blocks per row and block-aligned strides
 * (attn.h, "Quantized KV caches"); checked after the views. */
static attn_status check_block_tensor(attn_dtype t, const attn_view *v, int64_t dim)
{
    if (!attn_dtype_is_block(t))
        return ATTN_OK;
    if (dim % ATTN_QBLOCK != 0)
        return ATTN_ERR_BAD_SIZE;
    if (v->batch % ATTN_QBLOCK != 0 || v->head % ATTN_QBLOCK != 0 || v->seq % ATTN_QBLOCK != 0)
        return ATTN_ERR_BAD_STRIDE;
    return ATTN_OK;
}

static attn_status check_blocks(const attn_sdpa_desc *d)
{
    attn_status st = check_block_tensor(d->k_type, &d->k, d->qk_dim);
    return st != ATTN_OK ? st : check_block_tensor(d->v_type, &d->v, d->v_dim);
}

attn_status attn_kv_validate(const attn_sdpa_desc *d)
{
    if (!attn_dtype_known(d->k_type) || !attn_dtype_known(d->v_type))
        return ATTN_ERR_BAD_OPTION;
    const int64_t bs = d->kv_block_size;
    if (bs < 0 || (bs == 0 && (d->kv_num_blocks != 0 || d->kv_max_blocks != 0)))
        return ATTN_ERR_BAD_OPTION;
    const int64_t B = d->batch, Hkv = d->kv_heads, m = d->kv_len, dk = d->qk_dim,
                  dv = d->v_dim;
    if (B <= 0 || Hkv <= 0 || m <= 0 || dk <= 0 || dv <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (m > INT32_MAX || dk > INT32_MAX || dv > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    attn_status st;
    if (!bs) {
        if ((st = attn_check_view(&d->k, B, Hkv, m, dk, 0)) != ATTN_OK) return st;
        if ((st = attn_check_view(&d->v, B, Hkv, m, dv, 0)) != ATTN_OK) return st;
        return check_blocks(d);
    }
    if (d->kv_num_blocks <= 0 || d->kv_max_blocks <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (bs > INT32_MAX || d->kv_num_blocks > INT32_MAX || d->kv_max_blocks > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    if (m > d->kv_max_blocks * bs)
        return ATTN_ERR_BAD_SIZE;
    /* The block table is indexed b * kv_max_blocks + J. */
    int ok = 1;
    attn_size_mul(attn_size_mul((uint64_t)B, (uint64_t)d->kv_max_blocks, &ok), sizeof(int32_t),
                  &ok);
    if (!ok)
        return ATTN_ERR_TOO_LARGE;
    if ((st = attn_check_view(&d->k, d->kv_num_blocks, Hkv, bs, dk, 0)) != ATTN_OK) return st;
    if ((st = attn_check_view(&d->v, d->kv_num_blocks, Hkv, bs, dv, 0)) != ATTN_OK) return st;
    return check_blocks(d);
}

attn_status attn_sdpa_validate(const attn_sdpa_desc *d)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        d->reserved_pad2 != 0 || (d->use_positions != 0 && d->use_positions != 1))
        return ATTN_ERR_BAD_OPTION;
    /* Integer scores: 0 or 1, and only against a Q8_0 or Q4_0 K. */
    if ((d->qk_int8 != 0 && d->qk_int8 != 1) ||
        (d->qk_int8 && !attn_dtype_is_block(d->k_type)))
        return ATTN_ERR_BAD_OPTION;
    if (!attn_engine_valid(d->engine))
        return ATTN_ERR_BAD_OPTION;
    if (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT)
        return ATTN_ERR_BAD_OPTION;
    if (!attn_mask_mode_valid(d->mask_mode))
        return ATTN_ERR_BAD_OPTION;
    /* (written so that NaN fails too) */
    if (!(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))
        return ATTN_ERR_BAD_OPTION;
    attn_status sst = attn_sparse_validate(d->layout_per_head, d->reserved_flags, d->block_size);
    if (sst != ATTN_OK)
        return sst;

    /* Positions: 0 without use_positions; not with the sparse options. */
    if (!d->use_positions && (d->q_pos0 != 0 || d->kv_pos0 != 0))
        return ATTN_ERR_BAD_OPTION;
    if (d->use_positions && attn_sdpa_is_sparse(d))
        return ATTN_ERR_BAD_OPTION;

    /* (the sparse options take 16-bit Q, K, V and O, widened; not the
     * paged cache) */
    if (d->kv_block_size && attn_sdpa_is_sparse(d))
        return ATTN_ERR_BAD_OPTION;
    const attn_dtype qo[2] = { d->q_type, d->o_type };
    attn_status tst = attn_dtypes_check(qo, 2);
    if (tst != ATTN_OK)
        return tst;
    /* Quantized K/V: the dense forward's (sparse and backward plans say
     * so themselves). */
    if ((attn_dtype_is_block(d->k_type) || attn_dtype_is_block(d->v_type)) &&
        attn_sdpa_is_sparse(d))
        return ATTN_ERR_UNSUPPORTED_TYPE;

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
    /* Dropout's counter holds b, h and i in 32 bits each (and j / 4, with
     * m < 2^31 already): B, Hq and n up to 2^32. */
    if (d->dropout_p > 0.0 &&
        (B > ((int64_t)1 << 32) || Hq > ((int64_t)1 << 32) || n > ((int64_t)1 << 32)))
        return ATTN_ERR_TOO_LARGE;
    /* Positions up to 2^40; with dropout, global rows below 2^32 and keys
     * below 2^34 (j / 4 in 32 bits). */
    if (d->use_positions) {
        const int64_t lim = (int64_t)1 << 40;
        if (d->q_pos0 < 0 || d->kv_pos0 < 0)
            return ATTN_ERR_BAD_SIZE;
        if (d->q_pos0 > lim || d->kv_pos0 > lim)
            return ATTN_ERR_TOO_LARGE;
        if (d->dropout_p > 0.0 &&
            (d->q_pos0 + n > ((int64_t)1 << 32) || d->kv_pos0 + m > ((int64_t)1 << 34)))
            return ATTN_ERR_TOO_LARGE;
    }

    attn_status st;
    if ((st = attn_check_view(&d->q, B, Hq, n, dk, 0)) != ATTN_OK) return st;
    if ((st = attn_kv_validate(d)) != ATTN_OK) return st;
    if ((st = attn_check_view(&d->o, B, Hq, n, dv, VIEW_OUTPUT)) != ATTN_OK) return st;
    if (d->mask_mode != ATTN_MASK_NONE &&
        (st = attn_check_view(&d->mask, B, Hq, n, m, VIEW_BROADCAST)) != ATTN_OK) return st;
    if (d->use_bias &&
        (st = attn_check_view(&d->bias, B, Hq, n, m, VIEW_BROADCAST)) != ATTN_OK) return st;
    if (d->want_probs &&
        (st = attn_check_view(&d->probs, B, Hq, n, m, VIEW_OUTPUT)) != ATTN_OK) return st;
    if (d->want_lse &&
        (st = attn_check_view(&d->lse, B, Hq, n, 1, VIEW_OUTPUT | VIEW_VECTOR)) != ATTN_OK) return st;

    if (isinf(d->scale))
        return ATTN_ERR_BAD_SCALE;
    if (d->threads < 0 || d->threads > ATTN_MAX_THREADS)
        return ATTN_ERR_BAD_THREADS;
    return ATTN_OK;
}

/* Blocking, work items and workspace layout, from the shape alone
 * (plan_sparse for sparse plans, plan_dense otherwise).  Every count and
 * byte size is formed with checked arithmetic: with overlapping input
 * views the products of batch, heads and rows can exceed what an int64_t
 * or a size_t holds although each view fits, and such a plan is
 * ATTN_ERR_TOO_LARGE.
 *
 * A sparse plan: items (b, query head, block of sp.rows rows), no split-K
 * and no stacking.  Per thread: the score tile (sp.rows x bk), the row
 * ranges, the row state and the tile's segments (and with global queries
 * the gathered rows' indices, Q and O); shared: the item order (cost and
 * index per item; twice as many items with global queries). */
static attn_status plan_sparse(attn_sdpa_plan *p)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t n = d->q_len, m = d->kv_len;
    int ok = 1;
    p->sparse = 1;
    p->group = d->q_heads / d->kv_heads;
    p->sp.rows = attn_sparse_rows(d);
    if (p->sp.rows > n)
        p->sp.rows = n;
    p->sp.nrb = (n + p->sp.rows - 1) / p->sp.rows;
    if (d->block_size) {
        p->sp.nb = (n + d->block_size - 1) / d->block_size;
        p->sp.mb = (m + d->block_size - 1) / d->block_size;
    }
    p->bq = p->sp.rows;
    p->bk = m < ATTN_TILE_K ? m : ATTN_TILE_K;
    p->nqblocks = p->sp.nrb;
    p->nchunks = 1;
    p->chunk = m;
    p->vrows = p->sp.rows;
    p->srows = p->sp.rows;
    p->stack_ldq = p->stack_ldo = 0;
    p->sp.nreg = (int64_t)attn_size_mul(
        attn_size_mul((uint64_t)d->batch, (uint64_t)d->q_heads, &ok), (uint64_t)p->sp.nrb, &ok);
    p->nitems = (int64_t)attn_size_mul((uint64_t)p->sp.nreg, d->use_global_q ? 2 : 1, &ok);
    /* Per thread: the score tile, the rows' ranges, their state, the
     * tile's segments, the gathered short segments' K and V, the global
     * queries' Q and O rows; then the item order, shared. */
    const uint64_t dkv = (uint64_t)(d->qk_dim + d->v_dim);
    p->sp.gather = d->qk_dim + d->v_dim <= ATTN_GATHER_MAX_DIM;
    /* 16-bit tensors, widened (never the BF16 products): a group's Q rows
     * into ws.qbuf (rows x dk), its O rows accumulated in ws.obuf (rows x
     * dv) and rounded at its end, a tile's K and V rows (every segment)
     * into ws.kbuf / ws.vbuf (bk x dk, bk x dv), which then also take the
     * gathered short segments. */
    p->qw = d->q_type != ATTN_DTYPE_F32;
    p->ow = d->o_type != ATTN_DTYPE_F32;
    p->kv_copy = d->k_type != ATTN_DTYPE_F32 || d->v_type != ATTN_DTYPE_F32;
    const int kb = p->sp.gather || d->k_type != ATTN_DTYPE_F32;
    const int vb = p->sp.gather || d->v_type != ATTN_DTYPE_F32;
    attn_carver c = ATTN_CARVER_INIT;
    attn_carve(&c, (uint64_t)p->srows, (uint64_t)p->bk * sizeof(float));
    p->ws.ranges = attn_carve(&c, (uint64_t)p->bq * (d->use_global_q ? 3 : 2), sizeof(int64_t));
    p->ws.state = attn_carve(&c, (uint64_t)p->vrows, 3 * sizeof(float));
    p->ws.seg = attn_carve(&c, (uint64_t)p->bk, sizeof(attn_kseg));
    p->ws.kbuf = attn_carve(&c, kb ? (uint64_t)p->bk * (uint64_t)d->qk_dim : 0, sizeof(float));
    p->ws.vbuf = attn_carve(&c, vb ? (uint64_t)p->bk * (uint64_t)d->v_dim : 0, sizeof(float));
    p->ws.qbuf = attn_carve(&c, p->qw ? (uint64_t)p->sp.rows * (uint64_t)d->qk_dim : 0,
                            sizeof(float));
    p->ws.obuf = attn_carve(&c, p->ow ? (uint64_t)p->sp.rows * (uint64_t)d->v_dim : 0,
                            sizeof(float));
    p->ws.qg = attn_carve(&c, d->use_global_q ? (uint64_t)p->sp.rows * dkv : 0, sizeof(float));
    p->ws.thread = (size_t)c.size;
    attn_carver all = ATTN_CARVER_INIT;
    attn_carve(&all, (uint64_t)p->x.nthreads, c.size);
    p->ws.order = attn_carve(&all, (uint64_t)p->nitems, 2 * sizeof(int64_t));
    p->ws.part = 0;
    p->ws.bytes = (size_t)all.size;
    ok = ok && c.ok && all.ok;
    /* The flags and the layout are indexed b * m + j, b * n + i and
     * (h * nb + I) * mb + J. */
    attn_size_mul((uint64_t)d->batch, (uint64_t)(m > n ? m : n), &ok);
    attn_size_mul(attn_size_mul((uint64_t)d->q_heads, (uint64_t)p->sp.nb, &ok), (uint64_t)p->sp.mb, &ok);
    if (!ok || p->nitems > INT64_MAX / 2)
        return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

/* A stacked group's row stride ld over rows of d elements: at least a row,
 * and within the int of a GEMM's leading dimension. */
static int stack_ld_ok(int64_t ld, int64_t d)
{
    return ld >= d && ld <= INT32_MAX;
}

/* The decode path's tile: ATTN_DECODE_TILE_MIN keys, doubled up to
 * ATTN_DECODE_TILE while the score rows of the tile (vrows x keys floats)
 * stay within ATTN_DECODE_SCORE_BYTES and its K or V rows within
 * ATTN_DECODE_TILE_VALUES values.  Longer tiles spend less per key on
 * what each tile does once (the kernels' calls and first rows, the
 * softmax's rescaling of O, the integer scores' rounding of Q); past the
 * bounds they lost (docs/DESIGN.md).  The tiles change the bits (the
 * online softmax's steps), so they follow the shape alone: never the
 * storage types (a 16-bit or quantized cache gives the bits of its fp32
 * twin) nor the paging. */
static int64_t decode_tile(const attn_sdpa_desc *d, int64_t vrows)
{
    const uint64_t dmax = (uint64_t)(d->qk_dim > d->v_dim ? d->qk_dim : d->v_dim);
    int64_t t = ATTN_DECODE_TILE_MIN;
    while (t < ATTN_DECODE_TILE &&
           (uint64_t)vrows * (uint64_t)(2 * t) * sizeof(float) <= ATTN_DECODE_SCORE_BYTES &&
           dmax * (uint64_t)(2 * t) <= ATTN_DECODE_TILE_VALUES)
        t *= 2;
    return t;
}

static attn_status plan_dense(attn_sdpa_plan *p)
{
    const attn_sdpa_desc *desc = &p->d;
    const int64_t B = desc->batch, n = desc->q_len, m = desc->kv_len, dv = desc->v_dim;
    const int64_t g = desc->q_heads / desc->kv_heads;
    int ok = 1;
    p->group = g;
    /* The decode path: few queries, decided by the shape (ATTN_DECODE=0
     * turns it off, for comparisons). */
    p->decode = n <= ATTN_DECODE_MAX_Q && p->x.set.decode;
    if (p->decode)
        p->tile = 0;
    /* Element types ("Element types of the computation" in attn.h): BF16
     * products on the tile engine when Q, K and V are all BF16; else Q
     * widened per item (qw); O accumulated in fp32 in the workspace and
     * rounded at the end (ow). */
    p->bf = p->tile && !p->decode && desc->q_type == ATTN_DTYPE_BF16 &&
            desc->k_type == ATTN_DTYPE_BF16 && desc->v_type == ATTN_DTYPE_BF16;
    p->qw = desc->q_type != ATTN_DTYPE_F32 && !p->bf;
    p->ow = desc->o_type != ATTN_DTYPE_F32;
    p->kv_copy = !p->decode && !p->bf &&
                 (desc->k_type != ATTN_DTYPE_F32 || desc->v_type != ATTN_DTYPE_F32 ||
                  desc->kv_block_size != 0);
    p->bq = n < ATTN_BLOCK_Q ? n : ATTN_BLOCK_Q;
    p->nqblocks = (n + p->bq - 1) / p->bq;
    p->vrows = (int64_t)attn_size_mul((uint64_t)g, (uint64_t)p->bq, &ok);
    const int64_t tile_k = p->decode ? decode_tile(desc, p->vrows) : ATTN_TILE_K;
    p->bk = m < tile_k ? m : tile_k;
    const int64_t base = (int64_t)attn_size_mul(
        attn_size_mul((uint64_t)B, (uint64_t)desc->kv_heads, &ok), (uint64_t)p->nqblocks, &ok);
    if (!ok)
        return ATTN_ERR_TOO_LARGE;
    /* Bytes of one split-K chunk's partials: O, m and l of every (b, h, i)
     * row.  Past the limit the keys are simply not split. */
    int rows_ok = 1;
    uint64_t row_bytes = attn_size_mul(
        attn_size_mul(attn_size_mul((uint64_t)B, (uint64_t)desc->q_heads, &rows_ok), (uint64_t)n,
                      &rows_ok),
        (uint64_t)(dv + 2) * sizeof(float), &rows_ok);
    if (!rows_ok)
        row_bytes = UINT64_MAX;

    /* Short queries over many keys with too few (batch, group, block) items
     * to keep every thread busy: split the keys into chunks merged by
     * logsumexp.  Decided by the shape alone. */
    p->nchunks = 1;
    if (n <= 64 && base < ATTN_SPLIT_ITEMS) {
        int64_t c = (ATTN_SPLIT_ITEMS + base - 1) / base;
        int64_t cmax = (m + ATTN_SPLIT_MIN_KEYS - 1) / ATTN_SPLIT_MIN_KEYS;
        if (c > cmax) c = cmax;
        while (c > 1 && row_bytes > ATTN_SPLIT_MAX_BYTES / (uint64_t)c)
            c--;
        p->nchunks = c;
    }
    p->chunk = (m + p->nchunks - 1) / p->nchunks;
    p->nitems = (int64_t)attn_size_mul((uint64_t)base, (uint64_t)p->nchunks, &ok);

    /* GQA: the g heads of a group as one matrix of g * n rows, when the
     * whole of n is one block and the heads lie at a constant row stride. */
    p->stack_ldq = p->stack_ldo = 0;
    if (g > 1 && p->nqblocks == 1 && n <= ATTN_STACK_MAX / g) {
        /* (Q widened or O accumulated in the workspace: rows there are
         * [g][n][d], stacked by construction.) */
        int64_t ldq = p->qw ? desc->qk_dim
                    : n == 1 ? desc->q.head : desc->q.head == n * desc->q.seq ? desc->q.seq : 0;
        int64_t ldo = p->nchunks > 1 || p->ow ? dv
                    : n == 1 ? desc->o.head : desc->o.head == n * desc->o.seq ? desc->o.seq : 0;
        /* The decode path always stacks: an fp32 Q or O whose heads do not
         * lie at a constant row stride goes through the workspace as a
         * 16-bit one does.  Its calls' row counts then follow the shape
         * alone, never the layout or the element types; the AVX-512 Q K^T
         * chooses its form by the row count (kernels/decode.h), and a
         * 16-bit call must give the bits of its fp32 twin on the widened
         * values in any layout. */
        if (p->decode && !stack_ld_ok(ldq, desc->qk_dim)) {
            p->qw = 1;
            ldq = desc->qk_dim;
        }
        if (p->decode && !stack_ld_ok(ldo, dv)) {
            p->ow = 1;
            ldo = dv;
        }
        if (stack_ld_ok(ldq, desc->qk_dim) && stack_ld_ok(ldo, dv)) {
            p->stack_ldq = ldq;
            p->stack_ldo = ldo;
        }
    }
    p->srows = p->stack_ldq ? p->vrows : p->bq;
    /* The tile engine's rows are 16 floats longer than the tile: a row
     * stride of a power of two would map a column of the score tile (and a
     * panel of K^T) to a handful of L1 sets. */
    p->lds = p->tile ? p->bk + 16 : p->bk;
    p->ldt = p->bk + 16;

    /* Per thread: the score tile, the visible range of each row (int64) and
     * the running max, sum and correction of each virtual row. */
    const uint64_t dk = (uint64_t)desc->qk_dim;
    attn_carver c = ATTN_CARVER_INIT;
    attn_carve(&c, (uint64_t)p->srows, (uint64_t)p->lds * sizeof(float));
    p->ws.ranges = attn_carve(&c, (uint64_t)p->bq, 2 * sizeof(int64_t));
    p->ws.state = attn_carve(&c, (uint64_t)p->vrows, 3 * sizeof(float));
    p->ws.kbuf = attn_carve(&c, p->kv_copy ? (uint64_t)p->bk * dk : 0, sizeof(float));
    /* (BF16 products: V's pair panel, ceil(bk / 2) x dv pairs) */
    p->ws.vbuf = attn_carve(&c, p->kv_copy ? (uint64_t)p->bk * (uint64_t)dv
                              : p->bf ? (uint64_t)(p->bk + 1) / 2 * (uint64_t)dv : 0,
                            sizeof(float));
    p->ws.qbuf = attn_carve(&c, p->qw ? (uint64_t)p->vrows * dk : 0, sizeof(float));
    p->ws.obuf = attn_carve(&c, p->ow ? (uint64_t)p->vrows * (uint64_t)dv : 0, sizeof(float));
    p->ws.kt = attn_carve(&c, p->tile ? (uint64_t)p->ldt * dk : 0, sizeof(float));
    p->ws.thread = (size_t)c.size;
    /* After the threads' slices: the split-K partials, shared. */
    attn_carver all = ATTN_CARVER_INIT;
    attn_carve(&all, (uint64_t)p->x.nthreads, c.size);
    const size_t part_at = attn_carve(&all, p->nchunks > 1 ? (uint64_t)p->nchunks : 0, row_bytes);
    if (!ok || !c.ok || !all.ok)
        return ATTN_ERR_TOO_LARGE;
    p->ws.part = (size_t)all.size - part_at;
    p->ws.bytes = (size_t)all.size;
    return ATTN_OK;
}

static attn_status plan_blocking(attn_sdpa_plan *p)
{
    return attn_sdpa_is_sparse(&p->d) ? plan_sparse(p) : plan_dense(p);
}

attn_status attn_sdpa_plan_create(attn_sdpa_plan **plan, const attn_sdpa_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = attn_sdpa_validate(desc);
    if (st != ATTN_OK)
        return st;

    attn_sdpa_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *desc;
    p->window_left = attn_window_clamp(desc, desc->window_left);
    p->window_right = attn_window_clamp(desc, desc->window_right);
    p->scale = isnan(desc->scale) ? (float)(1.0 / sqrt((double)desc->qk_dim)) : desc->scale;
    attn_exec_init(&p->x, desc->engine, desc->threads);
    p->dropout = desc->dropout_p > 0.0;
    if (p->dropout)
        attn_dropout_init(&p->drop, desc->dropout_p, desc->dropout_seed, desc->dropout_offset);
    p->qpos = desc->use_positions ? desc->q_pos0 : 0;
    p->kpos = desc->use_positions ? desc->kv_pos0 : 0;
    p->softmax_only = !p->dropout && !desc->use_bias && desc->mask_mode == ATTN_MASK_NONE &&
                      !desc->want_probs;
    p->tile = p->x.tile;
    if ((st = plan_blocking(p)) != ATTN_OK) {
        free(p);
        return st;
    }
    /* The look-ahead pays where K and V come from memory: a (batch, head)
     * of 64 KiB or more, or tensors too large for a last-level cache. */
    const double kv_bytes = (double)desc->kv_len * (double)(desc->qk_dim + desc->v_dim) * 4.0;
    const double all_bytes =
        (double)desc->batch * ((double)desc->q_heads * (double)desc->q_len +
                               (double)desc->kv_heads * (double)desc->kv_len) *
        (double)(desc->qk_dim + desc->v_dim) * 4.0;
    p->ahead = p->tile && !p->decode && !p->kv_copy && !desc->kv_block_size &&
               p->nchunks == 1 && !p->sparse &&
               (kv_bytes >= (double)ATTN_AHEAD_MIN_KV || all_bytes >= (double)ATTN_AHEAD_MIN_ALL);
    p->prod = attn_sdpa_products_for(p->decode, p->tile, p->bf, desc->qk_int8);
    p->alike = !p->sparse && desc->window_left < 0 && desc->window_right < 0 &&
               !desc->use_kv_lens && !desc->use_q_lens;
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
    *bytes = plan->ws.bytes;
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
