/* SDPA backward (FlashAttention-2's scheme over sgemm).
 *
 * A work item is a set of (batch, key/value head) pairs that own disjoint
 * outputs: one pair, or all batches (all key/value heads) when dBias is
 * broadcast over the batch (the heads), since those pairs add into the
 * same dBias entries.  An item runs its pairs one after the other; for each
 * pair it zeroes dQ of its query heads and dK, dV of its key/value head,
 * then for each key tile t, each query head h of the group and each block
 * of query rows r that sees the tile:
 *
 *   S  = scale Q_r K_t^T + bias, hidden -> -INFINITY     (sgemm + row pass)
 *   P  = exp(S - lse_r)                                  (0 where hidden)
 *   dP = dO_r V_t^T                                      (sgemm)
 *   dS = P (dP - D_r),  D_i = dO_i . O_i                 (row pass)
 *   dV_t += P^T dO_r;  dK_t += scale dS^T Q_r;  dQ_r += scale dS K_t
 *   dBias_r,t += dS
 *
 * Every sum runs in that fixed order within one item, and no two items
 * touch the same output, so the result does not depend on the number of
 * threads or the schedule.  Only the columns a block's rows see are
 * computed (the union of their visible ranges within the tile); tiles no
 * row sees are skipped, and K/V rows outside every row's range are never
 * read.  P and dP live in two tiles of the workspace per thread.
 *
 * 16-bit tensors (attn.h, "Element types of the computation") take the
 * same blocks and tiles in another order, query blocks outside and key
 * tiles inside, so that a block's dQ is summed in fp32 in the workspace
 * (bq x dk) and rounded once after its last tile, and dK, dV in fp32 sums
 * over the pair's keys (m x dk, m x dv per thread) rounded once after its
 * last block.  Each element of dQ, dK, dV, dBias still receives its terms
 * in the same order (dK_j and dV_j over (head, block), dQ_i over the
 * tiles).  Widened (F16, mixed types, the BLAS engine; run_pair16): the
 * 16-bit rows widened into the workspace and run_block as for fp32, so
 * bitwise the fp32 backward on the widened values.  BF16 products (every
 * tensor BF16, the tile engine; run_pair_bf, run_block_bf): the five
 * products with the x.bf kernels, on the pair's K^T and V^T pair panels
 * and K in pairs of keys (packed once), the block's Q^T and dO^T, and a
 * tile's P and dS packed by ds_pack (pair panels along the rows, dS rows);
 * dK and dV summed transposed (dV^T += dO^T P, dK^T += scale Q^T dS) and
 * transposed back by tr_round as they are rounded.  The sparse options
 * (run_pair_sparse) take 16-bit tensors widened only, as the sparse
 * forward: the pair's K and V widened whole, a block's Q, dO and O rows
 * (a chunk's, for global queries), the same fp32 steps on those copies,
 * dQ, dK and dV summed in fp32 and rounded once. */
#include "sdpa/sdpa.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTN_BWD_Q 64      /* query rows per block */
#define ATTN_BWD_K 256     /* keys per tile */
#define ATTN_BWD_BF_Q 96   /* BF16 products: rows per block (8 of mm's
                              12-row blocks; 48 pairs of rows deep for
                              dV and dK) */

struct attn_sdpa_bwd_plan {
    attn_sdpa_bwd_desc d;
    int dropout;              /* fwd.dropout_p > 0 */
    attn_dropout drop;
    int64_t qpos, kpos;       /* dropout's global (i, j) of row 0, key 0 */
    float scale;
    int64_t window_left, window_right;
    int64_t group;            /* Hq / Hkv */
    int64_t bq, bk;           /* rows per block, keys per tile */
    int64_t nb, nh;           /* items: batch groups x key/value head groups */
    int64_t bpi, hpi;         /* batches and key/value heads per item */
    /* dBias: whether it exists per batch, per head, per row (else the
     * bias broadcasts there and dBias sums over that dimension). */
    int db_b, db_h, db_i;
    size_t ws_dp, ws_d, ws_lo;  /* offsets in a thread's slice: P tile at 0 */
    /* Sparse (global tokens, layout): rows per block and the offset of
     * the tile's segments. */
    int sparse;
    int64_t sp_rows, nlb, mlb;
    size_t ws_seg;
    /* Sparse: short segments gathered (dk + dv <= ATTN_GATHER_MAX_DIM),
     * their buffers at ws_gather; the global queries' at ws_qg. */
    int gather;
    size_t ws_gather, ws_qg;
    /* Element types: q16, k16, v16, o16 say which of Q, K, V and O (with
     * dO) are 16-bit; ty16 any of them (run_pair16); bf the BF16 products
     * (all four BF16 on the tile engine), else the 16-bit ones widened. */
    int q16, k16, v16, o16, ty16, bf;
    int64_t ldp;              /* leading dimension of the P and dP tiles */
    int64_t ldk;              /* bf: of the K^T and V^T pair panels and of
                               * the dK^T, dV^T sums (m rounded up + 16) */
    int64_t ldr;              /* bf: of Q^T and dO^T (bq rounded up to even) */
    int64_t ldq;              /* bf: of the P and dS pair panels and of the
                               * dS rows (bk + 16) */
    /* run_pair16's buffers in a thread's slice (0: not used): widened K,
     * V (m rows), Q, dO, O (a block); fp32 sums of dQ (a block), dK, dV
     * (m rows; bf: transposed); bf: the K^T and V^T panels, K in pairs of
     * keys, the block's Q^T and dO^T, a tile's P and dS pair panels and dS
     * rows, row pointers and rows of scratch. */
    size_t ws_kw, ws_vw, ws_qw, ws_dow, ws_ow, ws_dqa, ws_dka, ws_dva;
    size_t ws_kt, ws_vt, ws_kp, ws_qt, ws_dot, ws_pp, ws_sp, ws_s16, ws_ptrs, ws_scr;
    size_t ws_thread, ws_bytes;
    attn_exec x;              /* kernels, engine (fwd.engine), threads */
};

/* Rows packed per call of pack_rows / pack_pairs (the row pointers' room;
 * even, so that pairs of keys stay pairs across calls). */
#define ATTN_BWD_PACK 256

attn_status attn_sdpa_bwd_desc_init(attn_sdpa_bwd_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    attn_sdpa_desc_init(&desc->fwd);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->d_o = desc->dq = desc->dk = desc->dv = desc->dbias = unset;
    return ATTN_OK;
}

/* The dBias view with the strides of the dimensions the bias broadcasts
 * over set to 0 (they have size 1 and are ignored). */
static attn_view dbias_view(const attn_sdpa_bwd_desc *d)
{
    attn_view v = d->dbias;
    if (d->fwd.bias.batch == 0) v.batch = 0;
    if (d->fwd.bias.head == 0) v.head = 0;
    if (d->fwd.bias.seq == 0) v.seq = 0;
    return v;
}

static attn_status validate(const attn_sdpa_bwd_desc *d)
{
    const attn_sdpa_desc *f = &d->fwd;
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        !f->want_lse || f->want_probs || (d->want_dbias && !f->use_bias))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = attn_sdpa_validate(f);
    if (st != ATTN_OK)
        return st;
    /* forward-only: the quantized K/V types and the paged cache */
    if (attn_dtype_is_block(f->k_type) || attn_dtype_is_block(f->v_type))
        return ATTN_ERR_UNSUPPORTED_TYPE;
    if (f->kv_block_size != 0)
        return ATTN_ERR_BAD_OPTION;
    const int64_t B = f->batch, Hq = f->q_heads, Hkv = f->kv_heads, n = f->q_len,
                  m = f->kv_len, dk = f->qk_dim, dv = f->v_dim;
    if ((st = attn_check_view(&d->d_o, B, Hq, n, dv, 0)) != ATTN_OK ||
        (st = attn_check_view(&d->dq, B, Hq, n, dk, VIEW_OUTPUT)) != ATTN_OK ||
        (st = attn_check_view(&d->dk, B, Hkv, m, dk, VIEW_OUTPUT)) != ATTN_OK ||
        (st = attn_check_view(&d->dv, B, Hkv, m, dv, VIEW_OUTPUT)) != ATTN_OK)
        return st;
    if (d->want_dbias) {
        /* The bias's own shape: size 1 where it broadcasts.  dBias is no
         * BLAS operand, so a broadcast seq needs no row stride. */
        const attn_view v = dbias_view(d);
        if ((st = attn_check_view(&v, f->bias.batch ? B : 1, f->bias.head ? Hq : 1,
                                  f->bias.seq ? n : 1, m, VIEW_OUTPUT | VIEW_VECTOR)) != ATTN_OK)
            return st;
    }
    return ATTN_OK;
}

attn_status attn_sdpa_bwd_plan_create(attn_sdpa_bwd_plan **plan, const attn_sdpa_bwd_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = validate(desc);
    if (st != ATTN_OK)
        return st;
    attn_sdpa_bwd_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *desc;
    const attn_sdpa_desc *f = &desc->fwd;
    p->d.dbias = desc->want_dbias ? dbias_view(desc) : desc->dbias;
    p->scale = isnan(f->scale) ? (float)(1.0 / sqrt((double)f->qk_dim)) : f->scale;
    p->window_left = attn_window_clamp(f, f->window_left);
    p->window_right = attn_window_clamp(f, f->window_right);
    attn_exec_init(&p->x, f->engine, f->threads);
    p->dropout = f->dropout_p > 0.0;
    if (p->dropout)
        attn_dropout_init(&p->drop, f->dropout_p, f->dropout_seed, f->dropout_offset);
    p->qpos = f->use_positions ? f->q_pos0 : 0;
    p->kpos = f->use_positions ? f->kv_pos0 : 0;
    p->group = f->q_heads / f->kv_heads;
    p->q16 = f->q_type != ATTN_DTYPE_F32;
    p->k16 = f->k_type != ATTN_DTYPE_F32;
    p->v16 = f->v_type != ATTN_DTYPE_F32;
    p->o16 = f->o_type != ATTN_DTYPE_F32;
    p->ty16 = p->q16 || p->k16 || p->v16 || p->o16;
    /* (the sparse options: always widened, as the sparse forward) */
    p->bf = p->x.tile && !attn_sdpa_is_sparse(f) && f->q_type == ATTN_DTYPE_BF16 &&
            f->k_type == ATTN_DTYPE_BF16 && f->v_type == ATTN_DTYPE_BF16 &&
            f->o_type == ATTN_DTYPE_BF16;
    const int64_t bq_max = p->bf ? ATTN_BWD_BF_Q : ATTN_BWD_Q;
    p->bq = f->q_len < bq_max ? f->q_len : bq_max;
    p->bk = f->kv_len < ATTN_BWD_K ? f->kv_len : ATTN_BWD_K;
    p->db_b = desc->want_dbias && f->bias.batch != 0;
    p->db_h = desc->want_dbias && f->bias.head != 0;
    p->db_i = desc->want_dbias && f->bias.seq != 0;
    p->bpi = desc->want_dbias && !p->db_b ? f->batch : 1;
    p->hpi = desc->want_dbias && !p->db_h ? f->kv_heads : 1;
    p->nb = f->batch / p->bpi;
    p->nh = f->kv_heads / p->hpi;

    int ok = 1;
    p->sparse = attn_sdpa_is_sparse(f);
    const int gqs = p->sparse && f->use_global_q;
    if (p->sparse) {
        p->sp_rows = attn_sparse_rows(f) < p->bq ? attn_sparse_rows(f) : p->bq;
        if (f->block_size) {
            p->nlb = (f->q_len + f->block_size - 1) / f->block_size;
            p->mlb = (f->kv_len + f->block_size - 1) / f->block_size;
        }
    }
    /* Sparse: the short segments' K, V rows and their dK or dV rows
     * (dk + dv <= ATTN_GATHER_MAX_DIM); the global queries' Q, dO, dQ. */
    const int64_t dmax = f->qk_dim > f->v_dim ? f->qk_dim : f->v_dim;
    p->gather = p->sparse && f->qk_dim + f->v_dim <= ATTN_GATHER_MAX_DIM;
    /* BF16 products: the P and dP tiles' rows 16 floats longer than the
     * tile (see forward.c's score tile); the dS rows (ldq) have room for
     * a 0 before an odd start and after an odd end. */
    p->ldp = p->bf ? p->bk + 16 : p->bk;
    const uint64_t m16 = ((uint64_t)f->kv_len + 15) / 16 * 16;
    p->ldk = (int64_t)m16 + 16;
    p->ldr = (p->bq + 1) / 2 * 2;
    p->ldq = p->bk + 16;
    /* Per thread: P (also dS) and dP tiles, D, the row ranges, the tile's
     * segments, the gathered segments' K, V and dK or dV rows, the global
     * queries' Q, dO, O and dQ rows. */
    attn_carver c = ATTN_CARVER_INIT;
    attn_carve(&c, (uint64_t)p->bq, (uint64_t)p->ldp * sizeof(float));
    p->ws_dp = attn_carve(&c, (uint64_t)p->bq, (uint64_t)p->ldp * sizeof(float));
    p->ws_d = attn_carve(&c, (uint64_t)p->bq, sizeof(float));
    p->ws_lo = attn_carve(&c, (uint64_t)p->bq * (gqs ? 3 : 2), sizeof(int64_t));
    p->ws_seg = attn_carve(&c, p->sparse ? (uint64_t)p->bk : 0, sizeof(attn_kseg));
    p->ws_gather = attn_carve(&c, p->gather ? (uint64_t)p->bk : 0,
                              (uint64_t)(f->qk_dim + f->v_dim + dmax) * sizeof(float));
    p->ws_qg = attn_carve(&c, gqs ? (uint64_t)p->sp_rows : 0,
                          (uint64_t)(2 * f->qk_dim + 2 * f->v_dim) * sizeof(float));
    /* 16-bit tensors (run_pair16, run_pair_sparse): see the plan struct.
     * Sizes over m are the pair's keys; m x d per thread, never n x m
     * (sparse: blocks of sp_rows <= bq rows). */
    const uint64_t m = (uint64_t)f->kv_len, bq = (uint64_t)p->bq, dk = (uint64_t)f->qk_dim,
                   dv = (uint64_t)f->v_dim, hbq = (bq + 1) / 2;
    const int wide = p->ty16 && !p->bf;
    p->ws_kw = attn_carve(&c, wide && p->k16 ? m : 0, dk * sizeof(float));
    p->ws_vw = attn_carve(&c, wide && p->v16 ? m : 0, dv * sizeof(float));
    p->ws_qw = attn_carve(&c, wide && p->q16 ? bq : 0, dk * sizeof(float));
    p->ws_dow = attn_carve(&c, wide && p->o16 ? bq : 0, dv * sizeof(float));
    p->ws_ow = attn_carve(&c, wide && p->o16 ? bq : 0, dv * sizeof(float));
    p->ws_dqa = attn_carve(&c, p->q16 ? bq : 0, dk * sizeof(float));
    const uint64_t ldk = (uint64_t)p->ldk, ldq = (uint64_t)p->ldq, dmx = dk > dv ? dk : dv;
    p->ws_dka = attn_carve(&c, p->bf ? dk : p->k16 ? m : 0, (p->bf ? ldk : dk) * sizeof(float));
    p->ws_dva = attn_carve(&c, p->bf ? dv : p->v16 ? m : 0, (p->bf ? ldk : dv) * sizeof(float));
    p->ws_kt = attn_carve(&c, p->bf ? (dk + 1) / 2 : 0, ldk * sizeof(uint32_t));
    p->ws_vt = attn_carve(&c, p->bf ? (dv + 1) / 2 : 0, ldk * sizeof(uint32_t));
    p->ws_kp = attn_carve(&c, p->bf ? (m + 1) / 2 : 0, dk * sizeof(uint32_t));
    p->ws_qt = attn_carve(&c, p->bf ? dk : 0, (uint64_t)p->ldr * sizeof(uint16_t));
    p->ws_dot = attn_carve(&c, p->bf ? dv : 0, (uint64_t)p->ldr * sizeof(uint16_t));
    p->ws_pp = attn_carve(&c, p->bf ? hbq : 0, ldq * sizeof(uint32_t));
    p->ws_sp = attn_carve(&c, p->bf ? hbq : 0, ldq * sizeof(uint32_t));
    p->ws_s16 = attn_carve(&c, p->bf ? bq : 0, ldq * sizeof(uint16_t));
    p->ws_ptrs = attn_carve(&c, p->bf ? ATTN_BWD_PACK : 0, sizeof(const uint16_t *));
    p->ws_scr = attn_carve(&c, p->bf ? bq : 0, (dv + dmx) * sizeof(float));
    p->ws_thread = (size_t)c.size;
    attn_carver all = ATTN_CARVER_INIT;
    attn_carve(&all, (uint64_t)p->x.nthreads, c.size);
    p->ws_bytes = (size_t)all.size;
    attn_size_mul((uint64_t)p->nb, (uint64_t)p->nh, &ok);
    if (!ok || !c.ok || !all.ok) {
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }
    *plan = p;
    return ATTN_OK;
}

attn_status attn_sdpa_bwd_plan_destroy(attn_sdpa_bwd_plan *plan)
{
    free(plan);
    return ATTN_OK;
}

attn_status attn_sdpa_bwd_workspace_size(const attn_sdpa_bwd_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

static attn_status check_args(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a)
{
    const attn_sdpa_desc *f = &p->d.fwd;
    /* args16: given exactly when some tensor is 16-bit, its reserved room
     * NULL; then each tensor's pointer in the struct of its type. */
    static const attn_sdpa_bwd_args16 none;
    const attn_sdpa_bwd_args16 *h = a->args16;
    if (h && !ATTN_RESERVED_NULL(h))
        return ATTN_ERR_BAD_OPTION;
    if (p->ty16 && !h)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!p->ty16 && h)
        return ATTN_ERR_ARGUMENT_MISMATCH;
    if (!h)
        h = &none;
    const int q16 = p->q16, k16 = p->k16, v16 = p->v16, o16 = p->o16;
    const attn_pointer_use use[] = {
        { !q16, a->q }, { !k16, a->k }, { !v16, a->v }, { !o16, a->o }, { !o16, a->d_o },
        { 1, a->lse }, { !q16, a->dq }, { !k16, a->dk }, { !v16, a->dv },
        { q16, h->q }, { k16, h->k }, { v16, h->v }, { o16, h->o }, { o16, h->d_o },
        { q16, h->dq }, { k16, h->dk }, { v16, h->dv },
        { f->use_kv_lens, a->kv_lens }, { f->use_q_lens, a->q_lens },
        { f->mask_mode != ATTN_MASK_NONE, a->mask }, { f->use_bias, a->bias },
        { p->d.want_dbias, a->dbias },
        { f->use_global_k, a->global_k }, { f->use_global_q, a->global_q },
        { f->block_size != 0, a->layout },
    };
    attn_status st = attn_check_pointers(use, sizeof use / sizeof use[0]);
    if (st != ATTN_OK)
        return st;
    return attn_check_lengths(f->batch, a->kv_lens, f->use_positions ? INT32_MAX : f->kv_len,
                              a->q_lens, f->use_positions ? INT32_MAX : f->q_len);
}

typedef struct bwork {
    float *p;        /* bq x bk: P, then dS in place */
    float *dp;       /* bq x bk: dP */
    float *dsum;     /* D of each row of the block */
    int64_t *lo, *hi;
    attn_kseg *seg;  /* sparse: the pieces of a key tile */
    /* Sparse, short segments gathered (else NULL): their K and V rows
     * (bk x dk, bk x dv) and their dK or dV rows before they are added
     * (bk x max(dk, dv)). */
    float *kg, *vg, *gacc;
    /* Sparse with global queries (else NULL): a chunk's row indices and
     * its Q, dO, O and dQ rows (sp_rows x dk, dv, dv, dk; copied, or
     * widened). */
    int64_t *idx;
    float *qg, *dog, *og, *dqg;
    /* run_pair16 (16-bit tensors; NULL where the plan has none): widened
     * K, V [m][d] and Q, dO, O [bq][d]; the fp32 sums of dQ [bq][dk], dK
     * [m][dk], dV [m][dv] (bf: transposed, dK^T [dk][ldk] and dV^T
     * [dv][ldk], column j - jlo); bf: the pair's K^T and V^T pair panels
     * ([d / 2][ldk], column j - jlo), its K in pairs of keys
     * ([(j - jlo) / 2][dk]), the block's Q^T [dk][ldr] and dO^T
     * [dv][ldr], a tile's P and dS pair panels [bq / 2][ldq] and dS rows
     * [bq][ldq], room for row pointers and the block's widened dO and O
     * (or Q) rows. */
    float *kw, *vw, *qw, *dow, *ow, *dqa, *dka, *dva;
    uint32_t *kt, *vt, *kp, *pp, *sp;
    uint16_t *qt, *dot, *s16;
    const uint16_t **ptrs;
    float *scr;
} bwork;

/* Where run_block reads and writes: query row i0 + r of the block at q +
 * r * ldq (dO, O, dQ likewise), key t + cs + c at k + c * ldk (V, dK,
 * dV likewise): the user's fp32 tensors, or their widened copies and fp32
 * sums in the workspace. */
typedef struct bsrc {
    const float *q, *dO, *o, *k, *v;
    float *dq, *dk, *dv;
    int64_t ldq, lddo, ldo, ldk, ldv, lddq, lddk, lddv;
} bsrc;

/* Add the gathered rows src [columns - cshort][width] of the short
 * segments to their rows of dst [keys][ld]. */
static void scatter_add(float *dst, int64_t ld, const float *src, int64_t width,
                        const attn_kseg *seg, int64_t nseg, int64_t cshort)
{
    for (int64_t x = 0; x < nseg; x++) {
        if (seg[x].c0 < cshort)
            continue;
        for (int64_t t = 0; t < seg[x].len; t++) {
            float *dr = dst + (seg[x].j0 + t) * ld;
            const float *sr = src + (seg[x].c0 - cshort + t) * width;
            for (int64_t c = 0; c < width; c++)
                dr[c] += sr[c];
        }
    }
}

static void zero_rows(float *base, int64_t rows, int64_t stride, int64_t width)
{
    for (int64_t r = 0; r < rows; r++)
        memset(base + r * stride, 0, (size_t)width * sizeof(float));
}

/* dBias row of (b, h, i), or NULL without dBias. */
static float *dbias_row(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, int64_t b,
                        int64_t h, int64_t i)
{
    if (!p->d.want_dbias)
        return NULL;
    const attn_view *v = &p->d.dbias;
    return a->dbias + (p->db_b ? b : 0) * v->batch + (p->db_h ? h : 0) * v->head +
           (p->db_i ? i : 0) * v->seq;
}

/* D_i = dO_i . O_i in fp32, in order (every path: the same bits). */
static float row_d(const float *dor, const float *o, int64_t dv)
{
    float D = 0.0f;
    for (int64_t x = 0; x < dv; x++)
        D += dor[x] * o[x];
    return D;
}

/* D_i in fp32 in eight interleaved partial sums (x % 8), added pairwise,
 * then the tail: the BF16 products' order (vectorized), not row_d's. */
static float row_d8(const float *dor, const float *o, int64_t dv)
{
    float s[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
    int64_t x = 0;
    for (; x + 8 <= dv; x += 8)
        for (int l = 0; l < 8; l++)
            s[l] += dor[x + l] * o[x + l];
    float D = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; x < dv; x++)
        D += dor[x] * o[x];
    return D;
}

/* n values of a 16-bit tensor of type ty widened (exact), or rounded to it
 * (round to nearest even, as attn_dtype_encode). */
static void widen(const attn_sdpa_bwd_plan *p, attn_dtype ty, const uint16_t *src, float *dst,
                  int64_t n)
{
    if (ty == ATTN_DTYPE_F16)
        p->x.cvt->f16_to_f32(src, dst, n);
    else
        p->x.cvt->bf16_to_f32(src, dst, n);
}

static void narrow(const attn_sdpa_bwd_plan *p, attn_dtype ty, const float *src, uint16_t *dst,
                   int64_t n)
{
    if (ty == ATTN_DTYPE_F16)
        p->x.cvt->f32_to_f16(src, dst, n);
    else
        p->x.cvt->f32_to_bf16(src, dst, n);
}

/* Row i of query head h of Q (x = 0), dO (1) or O (2) in fp32 at dst:
 * copied, or widened from its 16-bit tensor. */
static void qrow_in(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, int x, int64_t b,
                    int64_t h, int64_t i, float *dst)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_sdpa_bwd_args16 *a16 = a->args16;
    const int is16 = x == 0 ? p->q16 : p->o16;
    const attn_dtype ty = x == 0 ? f->q_type : f->o_type;
    const attn_view *v = x == 0 ? &f->q : x == 1 ? &d->d_o : &f->o;
    const int64_t n = x == 0 ? f->qk_dim : f->v_dim;
    if (is16) {
        const uint16_t *base = x == 0 ? a16->q : x == 1 ? a16->d_o : a16->o;
        widen(p, ty, ATTN_VIEW_AT(base, *v, b, h, i), dst, n);
    } else {
        const float *base = x == 0 ? a->q : x == 1 ? a->d_o : a->o;
        memcpy(dst, ATTN_VIEW_AT(base, *v, b, h, i), (size_t)n * sizeof(float));
    }
}

/* dQ row i of query head h from its fp32 sum src: copied, or rounded. */
static void dqrow_out(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, int64_t b,
                      int64_t h, int64_t i, const float *src)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    if (p->q16)
        narrow(p, d->fwd.q_type, src, ATTN_VIEW_AT(a->args16->dq, d->dq, b, h, i), d->fwd.qk_dim);
    else
        memcpy(ATTN_VIEW_AT(a->dq, d->dq, b, h, i), src, (size_t)d->fwd.qk_dim * sizeof(float));
}

/* The K side of a pair's operands, at key 0: the user's fp32 K, V, dK,
 * dV, or the widened copies and fp32 sums (kw, vw, dka, dva: [m][d]). */
static void kv_src(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, const bwork *w,
                   int64_t b, int64_t hk, bsrc *s)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    if (p->k16) {
        s->k = w->kw;
        s->dk = w->dka;
        s->ldk = s->lddk = dk;
    } else {
        s->k = ATTN_VIEW_HEAD(a->k, f->k, b, hk);
        s->dk = ATTN_VIEW_HEAD(a->dk, d->dk, b, hk);
        s->ldk = f->k.seq;
        s->lddk = d->dk.seq;
    }
    if (p->v16) {
        s->v = w->vw;
        s->dv = w->dva;
        s->ldv = s->lddv = dv;
    } else {
        s->v = ATTN_VIEW_HEAD(a->v, f->v, b, hk);
        s->dv = ATTN_VIEW_HEAD(a->dv, d->dv, b, hk);
        s->ldv = f->v.seq;
        s->lddv = d->dv.seq;
    }
}

/* The operands of rows [i0, i0 + rows) of query head h (K side at key 0,
 * kv_src): the user's fp32 Q, dO, O, dQ, or the rows widened into qw,
 * dow, ow and their dQ sum dqa zeroed. */
static bsrc block_src(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, const bwork *w,
                      int64_t b, int64_t hk, int64_t h, int64_t i0, int64_t rows)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    bsrc s;
    kv_src(p, a, w, b, hk, &s);
    if (p->q16) {
        for (int64_t r = 0; r < rows; r++)
            qrow_in(p, a, 0, b, h, i0 + r, w->qw + r * dk);
        memset(w->dqa, 0, (size_t)(rows * dk) * sizeof(float));
        s.q = w->qw;
        s.dq = w->dqa;
        s.ldq = s.lddq = dk;
    } else {
        s.q = ATTN_VIEW_AT(a->q, f->q, b, h, i0);
        s.dq = ATTN_VIEW_AT(a->dq, d->dq, b, h, i0);
        s.ldq = f->q.seq;
        s.lddq = d->dq.seq;
    }
    if (p->o16) {
        for (int64_t r = 0; r < rows; r++) {
            qrow_in(p, a, 1, b, h, i0 + r, w->dow + r * dv);
            qrow_in(p, a, 2, b, h, i0 + r, w->ow + r * dv);
        }
        s.dO = w->dow;
        s.o = w->ow;
        s.lddo = s.ldo = dv;
    } else {
        s.dO = ATTN_VIEW_AT(a->d_o, d->d_o, b, h, i0);
        s.o = ATTN_VIEW_AT(a->o, f->o, b, h, i0);
        s.lddo = d->d_o.seq;
        s.ldo = f->o.seq;
    }
    return s;
}

/* s with its K side moved to key j. */
static bsrc src_at_key(const bsrc *s, int64_t j)
{
    bsrc t = *s;
    t.k += j * s->ldk;
    t.v += j * s->ldv;
    t.dk += j * s->lddk;
    t.dv += j * s->lddv;
    return t;
}

/* 16-bit tensors: the K and V rows [jlo, jhi) of the pair widened and
 * their dK, dV sums zeroed; fp32 dK, dV (summed in place) zeroed whole. */
static void keys_in(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, const bwork *w,
                    int64_t b, int64_t hk, int64_t jlo, int64_t jhi)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_sdpa_bwd_args16 *a16 = a->args16;
    const int64_t dk = f->qk_dim, dv = f->v_dim, nk = jhi - jlo;
    for (int64_t j = jlo; j < jhi; j++) {
        if (p->k16)
            widen(p, f->k_type, ATTN_VIEW_AT(a16->k, f->k, b, hk, j), w->kw + j * dk, dk);
        if (p->v16)
            widen(p, f->v_type, ATTN_VIEW_AT(a16->v, f->v, b, hk, j), w->vw + j * dv, dv);
    }
    if (p->k16)
        memset(w->dka + jlo * dk, 0, (size_t)(nk * dk) * sizeof(float));
    else
        zero_rows(ATTN_VIEW_HEAD(a->dk, d->dk, b, hk), f->kv_len, d->dk.seq, dk);
    if (p->v16)
        memset(w->dva + jlo * dv, 0, (size_t)(nk * dv) * sizeof(float));
    else
        zero_rows(ATTN_VIEW_HEAD(a->dv, d->dv, b, hk), f->kv_len, d->dv.seq, dv);
}

/* 16-bit dK, dV: the sums of the keys [jlo, jhi) rounded once, the other
 * keys' rows +0. */
static void keys_out(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, const bwork *w,
                     int64_t b, int64_t hk, int64_t jlo, int64_t jhi)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_sdpa_bwd_args16 *a16 = a->args16;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    for (int64_t j = 0; j < f->kv_len; j++) {
        const int seen = j >= jlo && j < jhi;
        if (p->k16) {
            uint16_t *dst = ATTN_VIEW_AT(a16->dk, d->dk, b, hk, j);
            if (seen)
                narrow(p, f->k_type, w->dka + j * dk, dst, dk);
            else
                memset(dst, 0, (size_t)dk * sizeof(uint16_t));
        }
        if (p->v16) {
            uint16_t *dst = ATTN_VIEW_AT(a16->dv, d->dv, b, hk, j);
            if (seen)
                narrow(p, f->v_type, w->dva + j * dv, dst, dv);
            else
                memset(dst, 0, (size_t)dv * sizeof(uint16_t));
        }
    }
}

/* The dQ of query head h: fp32 zeroed whole before its blocks (first), or
 * 16-bit rows [qlen, n) no block writes +0 (after). */
static void dq_head(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, int64_t b,
                    int64_t h, int64_t qlen, int first)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    if (!p->q16 && first)
        zero_rows(ATTN_VIEW_HEAD(a->dq, d->dq, b, h), f->q_len, d->dq.seq, f->qk_dim);
    if (p->q16 && !first)
        for (int64_t i = qlen; i < f->q_len; i++)
            memset(ATTN_VIEW_AT(a->args16->dq, d->dq, b, h, i), 0,
                   (size_t)f->qk_dim * sizeof(uint16_t));
}

/* 16-bit dQ: the block's sums (dqa) rounded once. */
static void block_dq_out(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a,
                         const bwork *w, int64_t b, int64_t h, int64_t i0, int64_t rows)
{
    if (p->q16)
        for (int64_t r = 0; r < rows; r++)
            dqrow_out(p, a, b, h, i0 + r, w->dqa + r * p->d.fwd.qk_dim);
}

/* Rows [i0, i1) of query head h against the keys [t + cs, t + ce), the
 * operands at s. */
static void run_block(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                      int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t t, int64_t cs,
                      int64_t ce, const bsrc *s)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_kernels *kern = p->x.kern;
    const int64_t rows = i1 - i0, cols = ce - cs, bk = p->bk, dk = f->qk_dim, dv = f->v_dim;
    const int drop = f->mask_mode == ATTN_MASK_DROP_NONZERO;
    const float *q = s->q, *dO = s->dO, *k = s->k, *v = s->v;
    float *dq = s->dq, *dkt = s->dk, *dvt = s->dv;

    attn_gemm(p->x.gk, 1, (int)rows, (int)cols, (int)dk, p->scale, q, (int)s->ldq, k, (int)s->ldk,
               0.0f, w->p, (int)bk);
    attn_gemm(p->x.gk, 1, (int)rows, (int)cols, (int)dv, 1.0f, dO, (int)s->lddo, v, (int)s->ldv,
               0.0f, w->dp, (int)bk);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = i0 + r;
        float *pr = w->p + r * bk;
        const float lse = a->lse[b * f->lse.batch + h * f->lse.head + i * f->lse.seq];
        int64_t a0 = w->lo[r] - t - cs, a1 = w->hi[r] - t - cs;
        if (a0 < 0) a0 = 0;
        if (a1 > cols) a1 = cols;
        if (a1 <= a0 || lse == -INFINITY)
            a0 = a1 = 0;
        const int64_t j0 = t + cs + a0;
        const float *bias = f->use_bias
            ? ATTN_VIEW_AT(a->bias, f->bias, b, h, i) + j0 : NULL;
        const uint8_t *mask = f->mask_mode != ATTN_MASK_NONE
            ? ATTN_VIEW_AT(a->mask, f->mask, b, h, i) + j0 : NULL;
        memset(pr, 0, (size_t)a0 * sizeof(float));
        memset(pr + a1, 0, (size_t)(cols - a1) * sizeof(float));
        if (a1 > a0) {
            kern->prep_max(pr + a0, a1 - a0, bias, mask, drop);
            kern->exp_store(pr + a0, pr + a0, a1 - a0, lse);
        }
        /* D of the row, for dS = P (dP - D) once dV has used P. */
        const float D = row_d(dO + r * s->lddo, s->o + r * s->ldo, dv);
        w->dsum[r] = D;
        if (p->dropout) {
            /* With Z = keep / (1 - p): dP = Z dP' (dP' = dO V^T), then
             * dS = P (dP - D) goes to the dP tile, and P' = Z P (what
             * multiplied V) stays in the P tile for dV.  The decisions are
             * the forward's: the same pure function of (b, h, i, j). */
            kern->dropout_bwd_row(&p->drop, pr, w->dp + r * bk, D, b, h, i + p->qpos, t + cs + p->kpos, cols);
        }
    }
    /* dV_t += P^T dO_r  (P' with dropout) */
    attn_gemm_tn(p->x.gk, (int)cols, (int)dv, (int)rows, 1.0f, w->p, (int)bk, dO, (int)s->lddo, 1.0f,
                  dvt, (int)s->lddv);
    /* dS: in the P tile, or already in the dP tile with dropout. */
    float *ds = p->dropout ? w->dp : w->p;
    for (int64_t r = 0; r < rows; r++) {
        float *pr = ds + r * bk;
        if (!p->dropout) {
            const float *dpr = w->dp + r * bk;
            const float D = w->dsum[r];
            for (int64_t j = 0; j < cols; j++)
                pr[j] = pr[j] * (dpr[j] - D);
        }
        float *db = dbias_row(p, a, b, h, i0 + r);
        if (db) {
            db += t + cs;
            for (int64_t j = 0; j < cols; j++)
                db[j] += pr[j];
        }
    }
    /* dQ_r += scale dS K_t;  dK_t += scale dS^T Q_r */
    attn_gemm(p->x.gk, 0, (int)rows, (int)dk, (int)cols, p->scale, ds, (int)bk, k, (int)s->ldk, 1.0f,
               dq, (int)s->lddq);
    attn_gemm_tn(p->x.gk, (int)cols, (int)dk, (int)rows, p->scale, ds, (int)bk, q, (int)s->ldq, 1.0f,
                  dkt, (int)s->lddk);
}

/* One (batch, key/value head) pair. */
static void run_pair(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                     int64_t b, int64_t hk)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const int64_t n = f->q_len, m = f->kv_len, g = p->group, h0 = hk * g;
    const attn_geom gm = attn_geom_of(f, a->q_lens, a->kv_lens, b);
    const int64_t qlen = gm.qlen, kvlen = gm.kvlen;

    for (int64_t hh = 0; hh < g; hh++)
        zero_rows(ATTN_VIEW_HEAD(a->dq, d->dq, b, h0 + hh), n, d->dq.seq, f->qk_dim);
    zero_rows(ATTN_VIEW_HEAD(a->dk, d->dk, b, hk), m, d->dk.seq, f->qk_dim);
    zero_rows(ATTN_VIEW_HEAD(a->dv, d->dv, b, hk), m, d->dv.seq, f->v_dim);

    /* The keys any row sees: contiguous, since both bounds grow with i. */
    int64_t jlo = INT64_MAX, jhi = 0;
    for (int64_t i = 0; i < qlen; i++) {
        int64_t lo, hi;
        attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i, &lo, &hi);
        if (lo < hi) {
            if (lo < jlo) jlo = lo;
            if (hi > jhi) jhi = hi;
        }
    }
    for (int64_t t = jlo; t < jhi; t += p->bk) {
        const int64_t nt = jhi - t < p->bk ? jhi - t : p->bk;
        for (int64_t hh = 0; hh < g; hh++)
            for (int64_t i0 = 0; i0 < qlen; i0 += p->bq) {
                const int64_t i1 = i0 + p->bq < qlen ? i0 + p->bq : qlen;
                int64_t cs = INT64_MAX, ce = INT64_MIN;
                for (int64_t i = i0; i < i1; i++) {
                    int64_t *lo = &w->lo[i - i0], *hi = &w->hi[i - i0];
                    attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i, lo,
                                   hi);
                    int64_t c0 = *lo - t, c1 = *hi - t;
                    if (c0 < 0) c0 = 0;
                    if (c1 > nt) c1 = nt;
                    if (c0 >= c1)
                        continue;
                    if (c0 < cs) cs = c0;
                    if (c1 > ce) ce = c1;
                }
                if (cs < ce) {
                    const bsrc blk = block_src(p, a, w, b, hk, h0 + hh, i0, i1 - i0);
                    const bsrc src = src_at_key(&blk, t + cs);
                    run_block(p, a, w, b, h0 + hh, i0, i1, t, cs, ce, &src);
                }
            }
    }
}

/* ------------------------------------------------------------------------ */
/* 16-bit tensors: query blocks outside, key tiles inside (run_pair16)      */
/* ------------------------------------------------------------------------ */

/* The keys [jlo, jhi) some row of batch b sees (contiguous, since both
 * bounds of a row's range grow with i); jlo = jhi = 0 when none. */
static void seen_keys(const attn_sdpa_bwd_plan *p, attn_geom gm, int64_t *jlo, int64_t *jhi)
{
    const int64_t qlen = gm.qlen, kvlen = gm.kvlen;
    int64_t lo_ = INT64_MAX, hi_ = 0;
    for (int64_t i = 0; i < qlen; i++) {
        int64_t lo, hi;
        attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i, &lo, &hi);
        if (lo < hi) {
            if (lo < lo_) lo_ = lo;
            if (hi > hi_) hi_ = hi;
        }
    }
    if (lo_ >= hi_)
        lo_ = hi_ = 0;
    *jlo = lo_;
    *jhi = hi_;
}

/* The columns [cs, ce) of the tile [t, t + nt) that rows lo[r], hi[r] (r <
 * rows) see, as run_pair finds them (cs >= ce: none). */
static void block_cols(const bwork *w, int64_t rows, int64_t t, int64_t nt, int64_t *cs,
                       int64_t *ce)
{
    int64_t s = INT64_MAX, e = INT64_MIN;
    for (int64_t r = 0; r < rows; r++) {
        int64_t c0 = w->lo[r] - t, c1 = w->hi[r] - t;
        if (c0 < 0) c0 = 0;
        if (c1 > nt) c1 = nt;
        if (c0 >= c1)
            continue;
        if (c0 < s) s = c0;
        if (c1 > e) e = c1;
    }
    *cs = s;
    *ce = e;
}

/* A block's operands for run_block_bf: its rows' Q^T and dO^T ([d][ldr]),
 * D, visible ranges and dQ sums ([rows][dk]).  (A struct: a run over a
 * head's blocks could hold them side by side.) */
typedef struct bfblk {
    const uint16_t *qt, *dot;
    const float *dsum;
    const int64_t *lo, *hi;
    float *dqa;
} bfblk;

/* The BF16 products of rows [i0, i1) of query head h against the keys
 * [t + cs, t + ce): run_block's steps with the x.bf kernels, dK and dV
 * summed transposed (dV^T += dO^T P, dK^T += scale Q^T dS: P and dS as
 * pair panels along the rows, no transposition per tile).  The dS rows for
 * dQ start on a pair of the K pair panel: at column off = (t + cs - jlo)
 * % 2 of s16, a 0 before them when off is 1 and one after an odd end. */
static void run_block_bf(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                         const bfblk *k_, int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t t,
                         int64_t cs, int64_t ce, int64_t jlo)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_sdpa_bwd_args16 *a16 = a->args16;
    const attn_kernels *kern = p->x.kern;
    const attn_bf16_kernels *bf = p->x.bf;
    const int64_t rows = i1 - i0, cols = ce - cs, ldp = p->ldp, dk = f->qk_dim, dv = f->v_dim;
    const int drop = f->mask_mode == ATTN_MASK_DROP_NONZERO;
    const int64_t c0 = t + cs - jlo, off = c0 & 1;
    const uint16_t *q = ATTN_VIEW_AT(a16->q, f->q, b, h, i0);
    const uint16_t *dO = ATTN_VIEW_AT(a16->d_o, d->d_o, b, h, i0);
    float *P = w->p, *dP = w->dp;

    /* S = scale Q K^T, dP = dO V^T: Q and dO read in place */
    bf->mm(rows, cols, dk, p->scale, NULL, q, f->q.seq, w->kt + c0, p->ldk, P, ldp, 0, NULL);
    bf->mm(rows, cols, dv, 1.0f, NULL, dO, d->d_o.seq, w->vt + c0, p->ldk, dP, ldp, 0, NULL);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = i0 + r;
        float *pr = P + r * ldp;
        const float lse = a->lse[b * f->lse.batch + h * f->lse.head + i * f->lse.seq];
        int64_t a0 = k_->lo[r] - t - cs, a1 = k_->hi[r] - t - cs;
        if (a0 < 0) a0 = 0;
        if (a1 > cols) a1 = cols;
        if (a1 <= a0 || lse == -INFINITY)
            a0 = a1 = 0;
        const int64_t j0 = t + cs + a0;
        const float *bias = f->use_bias ? ATTN_VIEW_AT(a->bias, f->bias, b, h, i) + j0 : NULL;
        const uint8_t *mask = f->mask_mode != ATTN_MASK_NONE
            ? ATTN_VIEW_AT(a->mask, f->mask, b, h, i) + j0 : NULL;
        memset(pr, 0, (size_t)a0 * sizeof(float));
        memset(pr + a1, 0, (size_t)(cols - a1) * sizeof(float));
        if (a1 > a0) {
            if (bias || mask)   /* (the max it returns is not used here) */
                kern->prep_max(pr + a0, a1 - a0, bias, mask, drop);
            kern->exp_store(pr + a0, pr + a0, a1 - a0, lse);
        }
        if (p->dropout)
            kern->dropout_bwd_row(&p->drop, pr, dP + r * ldp, k_->dsum[r], b, h, i + p->qpos, t + cs + p->kpos, cols);
    }
    /* dS = P (dP - D) in fp32: made by ds_pack, or first in the dP tile
     * when dBias needs it (with dropout it is there already, P' in P) */
    const int own = p->dropout || d->want_dbias;
    for (int64_t r = 0; own && r < rows; r++) {
        float *dpr = dP + r * ldp;
        if (!p->dropout) {
            const float *pr = P + r * ldp;
            const float D = k_->dsum[r];
            for (int64_t j = 0; j < cols; j++)
                dpr[j] = pr[j] * (dpr[j] - D);
        }
        float *db = dbias_row(p, a, b, h, i0 + r);
        if (db) {
            db += t + cs;
            for (int64_t j = 0; j < cols; j++)
                db[j] += dpr[j];
        }
    }
    /* P and dS rounded to BF16: pair panels along the rows, dS rows */
    const int64_t ldq = p->ldq, e = (off + cols + 1) & ~(int64_t)1;
    bf->ds_pack(P, dP, ldp, own ? NULL : k_->dsum, rows, cols, w->pp, w->sp, ldq, w->s16 + off,
                ldq);
    /* dV^T += dO^T P'; dK^T += scale Q^T dS */
    bf->mm(dv, cols, rows, 1.0f, NULL, k_->dot, p->ldr, w->pp, ldq, w->dva + c0, p->ldk, 1, NULL);
    bf->mm(dk, cols, rows, p->scale, NULL, k_->qt, p->ldr, w->sp, ldq, w->dka + c0, p->ldk, 1,
           NULL);
    /* dQ += scale dS K, in whole pairs of keys from key t + cs - off */
    if (off || e > off + cols)
        for (int64_t r = 0; r < rows; r++) {
            uint16_t *hr = w->s16 + r * ldq;
            if (off)
                hr[0] = 0;
            if (e > off + cols)
                hr[off + cols] = 0;
        }
    bf->mm(rows, dk, e, p->scale, NULL, w->s16, ldq, w->kp + (c0 - off) / 2 * dk, dk, k_->dqa, dk,
           1, NULL);
}

/* Pack n rows of a 16-bit tensor (row j at base + j * ld) with a pack_rows
 * or pack_pairs kernel, ATTN_BWD_PACK rows per call: column (or pair) j
 * of out at out + j * step (step: 1 for a panel's columns, D / 2 for a
 * pair panel's rows; n is split at even rows). */
static void pack_bf(bwork *w, const uint16_t *base, int64_t ld, int64_t n, int64_t width,
                    uint32_t *out, int64_t ldo, int pairs,
                    void (*kern)(const uint16_t *const *, int64_t, int64_t, uint32_t *, int64_t))
{
    for (int64_t j0 = 0; j0 < n; j0 += ATTN_BWD_PACK) {
        const int64_t cnt = n - j0 < ATTN_BWD_PACK ? n - j0 : ATTN_BWD_PACK;
        for (int64_t j = 0; j < cnt; j++)
            w->ptrs[j] = base + (j0 + j) * ld;
        kern(w->ptrs, cnt, width, pairs ? out + j0 / 2 * ldo : out + j0, ldo);
    }
}

/* One (batch, key/value head) pair with BF16 products: K^T, V^T and K in
 * pairs of keys packed once; then for each query head of the group and
 * each block of bq rows, its D, ranges, Q^T and dO^T, and every key tile
 * the block sees (run_block_bf), its dQ sums rounded after its last tile;
 * dK and dV (summed transposed) after the last block.  Each sum receives
 * its terms in run_pair's order (dQ over tiles, dK and dV over (head,
 * block)).  (Tiles outside and the head's blocks inside kept a tile's
 * panels in cache but needed n x d more workspace per thread, for no time
 * measured on T1 and T2.) */
static void run_pair_bf(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                        int64_t b, int64_t hk)
{
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    const attn_sdpa_bwd_args16 *a16 = a->args16;
    const attn_bf16_kernels *bf = p->x.bf;
    const int64_t n = f->q_len, m = f->kv_len, g = p->group, h0 = hk * g;
    const int64_t dk = f->qk_dim, dv = f->v_dim, bq = p->bq;
    const attn_geom gm = attn_geom_of(f, a->q_lens, a->kv_lens, b);
    const int64_t qlen = gm.qlen, kvlen = gm.kvlen;
    int64_t jlo, jhi;
    seen_keys(p, gm, &jlo, &jhi);
    const int64_t nk = jhi - jlo;

    const uint16_t *k = ATTN_VIEW_AT(a16->k, f->k, b, hk, jlo);
    const uint16_t *v = ATTN_VIEW_AT(a16->v, f->v, b, hk, jlo);
    pack_bf(w, k, f->k.seq, nk, dk, w->kt, p->ldk, 0, bf->pack_rows);
    pack_bf(w, v, f->v.seq, nk, dv, w->vt, p->ldk, 0, bf->pack_rows);
    pack_bf(w, k, f->k.seq, nk, dk, w->kp, dk, 1, bf->pack_pairs);
    zero_rows(w->dka, dk, p->ldk, nk);
    zero_rows(w->dva, dv, p->ldk, nk);

    for (int64_t hh = 0; hh < g; hh++) {
        const int64_t h = h0 + hh;
        for (int64_t i0 = 0; i0 < qlen; i0 += bq) {
            const int64_t i1 = i0 + bq < qlen ? i0 + bq : qlen, rows = i1 - i0;
            /* the block's D (row_d8), ranges, dO^T and Q^T (the widened
             * rows transposed and rounded back: exact); its dQ 0 */
            float *dow = w->scr, *ow = w->scr + rows * dv;
            for (int64_t r = 0; r < rows; r++) {
                widen(p, f->o_type, ATTN_VIEW_AT(a16->d_o, d->d_o, b, h, i0 + r), dow + r * dv, dv);
                widen(p, f->o_type, ATTN_VIEW_AT(a16->o, f->o, b, h, i0 + r), ow + r * dv, dv);
                w->dsum[r] = row_d8(dow + r * dv, ow + r * dv, dv);
                attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i0 + r,
                               &w->lo[r], &w->hi[r]);
            }
            bf->tr_round(dow, dv, rows, dv, w->dot, p->ldr);
            for (int64_t r = 0; r < rows; r++)
                widen(p, f->q_type, ATTN_VIEW_AT(a16->q, f->q, b, h, i0 + r), ow + r * dk, dk);
            bf->tr_round(ow, dk, rows, dk, w->qt, p->ldr);
            memset(w->dqa, 0, (size_t)(rows * dk) * sizeof(float));
            const bfblk kb = { w->qt, w->dot, w->dsum, w->lo, w->hi, w->dqa };
            for (int64_t t = jlo; t < jhi; t += p->bk) {
                const int64_t nt = jhi - t < p->bk ? jhi - t : p->bk;
                int64_t cs, ce;
                block_cols(w, rows, t, nt, &cs, &ce);
                if (cs < ce)
                    run_block_bf(p, a, w, &kb, b, h, i0, i1, t, cs, ce, jlo);
            }
            for (int64_t r = 0; r < rows; r++)
                narrow(p, f->q_type, w->dqa + r * dk, ATTN_VIEW_AT(a16->dq, d->dq, b, h, i0 + r),
                       dk);
        }
        for (int64_t i = qlen; i < n; i++)
            memset(ATTN_VIEW_AT(a16->dq, d->dq, b, h, i), 0, (size_t)dk * sizeof(uint16_t));
    }
    /* dK, dV transposed back as they are rounded, once; the keys no row
     * sees +0 */
    if (nk > 0) {
        bf->tr_round(w->dka, p->ldk, dk, nk, ATTN_VIEW_AT(a16->dk, d->dk, b, hk, jlo), d->dk.seq);
        bf->tr_round(w->dva, p->ldk, dv, nk, ATTN_VIEW_AT(a16->dv, d->dv, b, hk, jlo), d->dv.seq);
    }
    for (int64_t j = 0; j < m; j++)
        if (j < jlo || j >= jhi) {
            memset(ATTN_VIEW_AT(a16->dk, d->dk, b, hk, j), 0, (size_t)dk * sizeof(uint16_t));
            memset(ATTN_VIEW_AT(a16->dv, d->dv, b, hk, j), 0, (size_t)dv * sizeof(uint16_t));
        }
}

/* One (batch, key/value head) pair with a 16-bit tensor, widened: for
 * each query head of the group and each block of bq rows, every key tile
 * the block sees (run_block on widened copies); the block's dQ rounded
 * after its last tile, dK and dV after the last block.  The same blocks,
 * tiles and columns as run_pair. */
static void run_pair16(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                       int64_t b, int64_t hk)
{
    const attn_sdpa_desc *f = &p->d.fwd;
    const int64_t g = p->group, h0 = hk * g;
    const attn_geom gm = attn_geom_of(f, a->q_lens, a->kv_lens, b);
    const int64_t qlen = gm.qlen, kvlen = gm.kvlen;
    int64_t jlo, jhi;
    seen_keys(p, gm, &jlo, &jhi);

    /* K and V of the keys seen widened; the dK, dV sums zeroed */
    keys_in(p, a, w, b, hk, jlo, jhi);
    for (int64_t hh = 0; hh < g; hh++) {
        const int64_t h = h0 + hh;
        dq_head(p, a, b, h, qlen, 1);
        for (int64_t i0 = 0; i0 < qlen; i0 += p->bq) {
            const int64_t i1 = i0 + p->bq < qlen ? i0 + p->bq : qlen, rows = i1 - i0;
            for (int64_t r = 0; r < rows; r++)
                attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i0 + r,
                               &w->lo[r], &w->hi[r]);
            /* The block's operands widened; its dQ sum zeroed. */
            const bsrc src = block_src(p, a, w, b, hk, h, i0, rows);
            for (int64_t t = jlo; t < jhi; t += p->bk) {
                const int64_t nt = jhi - t < p->bk ? jhi - t : p->bk;
                int64_t cs, ce;
                block_cols(w, rows, t, nt, &cs, &ce);
                if (cs >= ce)
                    continue;
                const bsrc s2 = src_at_key(&src, t + cs);
                run_block(p, a, w, b, h, i0, i1, t, cs, ce, &s2);
            }
            block_dq_out(p, a, w, b, h, i0, rows);
        }
        dq_head(p, a, b, h, qlen, 0);
    }
    /* dK, dV rounded once; the keys no row sees +0 */
    keys_out(p, a, w, b, hk, jlo, jhi);
}

/* ------------------------------------------------------------------------ */
/* Sparse: the forward's candidate runs (sparse.c), per block of rows       */
/* ------------------------------------------------------------------------ */

/* The rows of one group of a sparse pass: row r (of rows) is query row
 * idx[r] (gathered global queries) or ib + r; its Q, dO, O and dQ rows are
 * at q, dO, o, dq with these leading dimensions (in place, the block's
 * widened copies, or the per-thread copies of gathered rows); lo, hi its
 * window range (ordinary rows), gk the global keys (NULL for global rows
 * or without). */
typedef struct bgroup {
    const float *q, *dO, *o;
    float *dq;
    int64_t ldq, lddo, ldo, lddq;
    const int64_t *idx;
    int64_t ib, rows;
    const int64_t *lo, *hi;
    int glob;
    const uint8_t *gk;
} bgroup;

/* A group of rows of query head h against one tile of nseg segments (cols
 * columns, the short segments' keys gathered from column cshort on); K,
 * V, dK, dV of the pair at kv (kv_src). */
static void run_block_sparse(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                             int64_t b, int64_t h, const bgroup *G, const bsrc *kv,
                             const attn_kseg *seg, int64_t nseg, int64_t cols, int64_t cshort)
{
    const attn_sdpa_desc *f = &p->d.fwd;
    const attn_kernels *kern = p->x.kern;
    const int64_t rows = G->rows, bk = p->bk, dk = f->qk_dim, dv = f->v_dim;
    const int drop = f->mask_mode == ATTN_MASK_DROP_NONZERO;
    const float *q = G->q, *dO = G->dO;
    float *dq = G->dq;
    const int ldq = (int)G->ldq, lddo = (int)G->lddo, lddq = (int)G->lddq;
    const float *k = kv->k, *v = kv->v;
    float *dkh = kv->dk, *dvh = kv->dv;
    const int64_t ldk = kv->ldk, ldv = kv->ldv, lddk = kv->lddk, lddv = kv->lddv;
    const int64_t ng = cols - cshort;   /* gathered columns */

    for (int64_t x = 0; x < nseg; x++) {
        if (seg[x].c0 >= cshort)
            continue;
        attn_gemm(p->x.gk, 1, (int)rows, (int)seg[x].len, (int)dk, p->scale, q, ldq,
                   k + seg[x].j0 * ldk, (int)ldk, 0.0f, w->p + seg[x].c0, (int)bk);
        attn_gemm(p->x.gk, 1, (int)rows, (int)seg[x].len, (int)dv, 1.0f, dO, lddo,
                   v + seg[x].j0 * ldv, (int)ldv, 0.0f, w->dp + seg[x].c0, (int)bk);
    }
    if (ng > 0) {
        attn_gather_rows(w->kg, k, ldk, dk, seg, nseg, cshort);
        attn_gather_rows(w->vg, v, ldv, dv, seg, nseg, cshort);
        attn_gemm(p->x.gk, 1, (int)rows, (int)ng, (int)dk, p->scale, q, ldq, w->kg, (int)dk, 0.0f,
                   w->p + cshort, (int)bk);
        attn_gemm(p->x.gk, 1, (int)rows, (int)ng, (int)dv, 1.0f, dO, lddo, w->vg, (int)dv, 0.0f,
                   w->dp + cshort, (int)bk);
    }
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = G->idx ? G->idx[r] : G->ib + r;
        float *pr = w->p + r * bk;
        const float lse = a->lse[b * f->lse.batch + h * f->lse.head + i * f->lse.seq];
        const float *brow = f->use_bias
            ? ATTN_VIEW_AT(a->bias, f->bias, b, h, i) : NULL;
        const uint8_t *mrow = f->mask_mode != ATTN_MASK_NONE
            ? ATTN_VIEW_AT(a->mask, f->mask, b, h, i) : NULL;
        for (int64_t x = 0; x < nseg; x++) {
            const int64_t j0 = seg[x].j0, j1 = j0 + seg[x].len;
            float *sc = pr + seg[x].c0;
            if (lse == -INFINITY) {
                memset(sc, 0, (size_t)seg[x].len * sizeof(float));
                continue;
            }
            int64_t j = j0;
            while (j < j1) {
                int64_t stop;
                const int64_t va = attn_vis_next(G->gk, G->glob, G->lo[r], G->hi[r], j, j1, &stop);
                for (; j < va; j++)
                    sc[j - j0] = 0.0f;
                if (va >= j1)
                    break;
                kern->prep_max(sc + (va - j0), stop - va, brow ? brow + va : NULL,
                               mrow ? mrow + va : NULL, drop);
                kern->exp_store(sc + (va - j0), sc + (va - j0), stop - va, lse);
                j = stop;
            }
        }
        const float D = row_d(dO + r * lddo, G->o + r * G->ldo, dv);
        w->dsum[r] = D;
        if (p->dropout)
            for (int64_t x = 0; x < nseg; x++)
                kern->dropout_bwd_row(&p->drop, pr + seg[x].c0, w->dp + r * bk + seg[x].c0, D, b,
                                      h, i + p->qpos, seg[x].j0 + p->kpos, seg[x].len);
    }
    /* dV_seg += P^T dO_r  (P' with dropout); the gathered keys' rows into
     * a copy, then added to their places. */
    for (int64_t x = 0; x < nseg; x++)
        if (seg[x].c0 < cshort)
            attn_gemm_tn(p->x.gk, (int)seg[x].len, (int)dv, (int)rows, 1.0f, w->p + seg[x].c0, (int)bk,
                          dO, lddo, 1.0f, dvh + seg[x].j0 * lddv, (int)lddv);
    if (ng > 0) {
        attn_gemm_tn(p->x.gk, (int)ng, (int)dv, (int)rows, 1.0f, w->p + cshort, (int)bk, dO, lddo, 0.0f,
                      w->gacc, (int)dv);
        scatter_add(dvh, lddv, w->gacc, dv, seg, nseg, cshort);
    }
    float *ds = p->dropout ? w->dp : w->p;
    for (int64_t r = 0; r < rows; r++) {
        float *pr = ds + r * bk;
        if (!p->dropout) {
            const float *dpr = w->dp + r * bk;
            const float D = w->dsum[r];
            for (int64_t j = 0; j < cols; j++)
                pr[j] = pr[j] * (dpr[j] - D);
        }
        float *db = dbias_row(p, a, b, h, G->idx ? G->idx[r] : G->ib + r);
        if (db)
            for (int64_t x = 0; x < nseg; x++) {
                float *dbs = db + seg[x].j0;
                const float *dss = pr + seg[x].c0;
                for (int64_t j = 0; j < seg[x].len; j++)
                    dbs[j] += dss[j];
            }
    }
    /* dQ_r += scale dS K_seg;  dK_seg += scale dS^T Q_r */
    for (int64_t x = 0; x < nseg; x++) {
        if (seg[x].c0 >= cshort)
            continue;
        attn_gemm(p->x.gk, 0, (int)rows, (int)dk, (int)seg[x].len, p->scale, ds + seg[x].c0, (int)bk,
                   k + seg[x].j0 * ldk, (int)ldk, 1.0f, dq, lddq);
        attn_gemm_tn(p->x.gk, (int)seg[x].len, (int)dk, (int)rows, p->scale, ds + seg[x].c0, (int)bk, q,
                      ldq, 1.0f, dkh + seg[x].j0 * lddk, (int)lddk);
    }
    if (ng > 0) {
        attn_gemm(p->x.gk, 0, (int)rows, (int)dk, (int)ng, p->scale, ds + cshort, (int)bk, w->kg,
                   (int)dk, 1.0f, dq, lddq);
        attn_gemm_tn(p->x.gk, (int)ng, (int)dk, (int)rows, p->scale, ds + cshort, (int)bk, q, ldq, 0.0f,
                      w->gacc, (int)dk);
        scatter_add(dkh, lddk, w->gacc, dk, seg, nseg, cshort);
    }
}

/* A group's candidate runs in tiles of up to bk keys, as the forward
 * walks them. */
static void run_group_sparse(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a, bwork *w,
                             int64_t b, int64_t h, const bgroup *G, const bsrc *kv, attn_krun kr)
{
    int64_t s = 0, e = 0, nseg, cshort;
    int have = attn_krun_next(&kr, &s, &e);
    for (;;) {
        const int64_t cols =
            attn_fill_tile(&kr, &s, &e, &have, w->seg, p->bk, &nseg, w->kg != NULL, &cshort);
        if (cols == 0)
            break;
        run_block_sparse(p, a, w, b, h, G, kv, w->seg, nseg, cols, cshort);
    }
}

/* One (batch, key/value head) pair of a sparse plan, for each query head
 * of the group: each block of sp_rows rows (inside one layout block row)
 * and each group of its consecutive rows that are not global queries;
 * then the global queries, per span (a layout block row, or all rows),
 * gathered by chunks of sp_rows rows (Q, dO and O copied, dQ summed in a
 * copy and written back once).  The dQ rows of one query are summed by
 * one group; dK and dV in this fixed order.  16-bit tensors: K and V of
 * the keys [0, kvlen) widened first, a block's Q, dO and O rows widened
 * (block_src) and its dQ sums rounded after its groups, a chunk's rows
 * widened as they are gathered and rounded as they are written back, dK
 * and dV rounded after the last head: the same fp32 steps on the widened
 * values. */
static void run_pair_sparse(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a,
                            bwork *w, int64_t b, int64_t hk)
{
    const attn_sdpa_desc *f = &p->d.fwd;
    const int64_t n = f->q_len, m = f->kv_len, g = p->group, h0 = hk * g, R = p->sp_rows;
    const int64_t dk = f->qk_dim, dv = f->v_dim;
    const attn_geom gm = attn_geom_of(f, a->q_lens, a->kv_lens, b);
    const int64_t qlen = gm.qlen, kvlen = gm.kvlen;
    const uint8_t *gq = f->use_global_q ? a->global_q + b * n : NULL;
    const uint8_t *gkb = f->use_global_k ? a->global_k + b * m : NULL;

    keys_in(p, a, w, b, hk, 0, kvlen);
    for (int64_t hh = 0; hh < g; hh++)
        dq_head(p, a, b, h0 + hh, qlen, 1);
    bsrc kv;
    kv_src(p, a, w, b, hk, &kv);

    attn_krun kr;
    kr.bs = f->block_size ? f->block_size : 1;
    kr.kvlen = kvlen;
    kr.j = 0;
    for (int64_t hh = 0; hh < g; hh++) {
        const int64_t h = h0 + hh;
        const uint8_t *layh = f->block_size
            ? a->layout + (f->layout_per_head ? h : 0) * p->nlb * p->mlb : NULL;
        for (int64_t i0 = 0; i0 < qlen; i0 += R) {
            const int64_t rows = qlen - i0 < R ? qlen - i0 : R;
            for (int64_t r = 0; r < rows; r++)
                attn_row_range(gm.shift, p->window_left, p->window_right, kvlen, i0 + r,
                               &w->lo[r], &w->hi[r]);
            kr.lay = layh ? layh + i0 / f->block_size * p->mlb : NULL;
            const bsrc s = block_src(p, a, w, b, hk, h, i0, rows);
            for (int64_t r0 = 0; r0 < rows;) {
                if (gq && gq[i0 + r0]) {
                    r0++;   /* the global queries' chunks below */
                    continue;
                }
                int64_t r1 = r0 + 1;
                while (r1 < rows && !(gq && gq[i0 + r1]))
                    r1++;
                kr.gk = gkb;
                int64_t lo = INT64_MAX, hi = 0;
                for (int64_t r = r0; r < r1; r++)
                    if (w->lo[r] < w->hi[r]) {
                        if (w->lo[r] < lo) lo = w->lo[r];
                        if (w->hi[r] > hi) hi = w->hi[r];
                    }
                kr.wlo = lo == INT64_MAX ? 0 : lo;
                kr.whi = lo == INT64_MAX ? 0 : hi;
                const bgroup G = { s.q + r0 * s.ldq, s.dO + r0 * s.lddo, s.o + r0 * s.ldo,
                                   s.dq + r0 * s.lddq, s.ldq, s.lddo, s.ldo, s.lddq,
                                   NULL, i0 + r0, r1 - r0, w->lo + r0, w->hi + r0, 0, gkb };
                run_group_sparse(p, a, w, b, h, &G, &kv, kr);
                r0 = r1;
            }
            /* (the global queries' rows: +0 here, written below) */
            block_dq_out(p, a, w, b, h, i0, rows);
        }
        dq_head(p, a, b, h, qlen, 0);
        if (!gq)
            continue;
        /* The global queries: every key of their layout row. */
        const int64_t span = f->block_size ? f->block_size : (qlen > 0 ? qlen : 1);
        kr.gk = NULL;
        kr.wlo = 0;
        kr.whi = kvlen;
        for (int64_t s0 = 0; s0 < qlen; s0 += span) {
            const int64_t s1 = s0 + span < qlen ? s0 + span : qlen;
            kr.lay = layh ? layh + s0 / f->block_size * p->mlb : NULL;
            int64_t i = attn_next_nonzero(gq, s0, s1);
            while (i < s1) {
                int64_t rows = 0;
                for (; i < s1 && rows < R; i = attn_next_nonzero(gq, i + 1, s1)) {
                    w->idx[rows] = i;
                    w->lo[rows] = w->hi[rows] = 0;   /* unused: global rows */
                    qrow_in(p, a, 0, b, h, i, w->qg + rows * dk);
                    qrow_in(p, a, 1, b, h, i, w->dog + rows * dv);
                    qrow_in(p, a, 2, b, h, i, w->og + rows * dv);
                    memset(w->dqg + rows * dk, 0, (size_t)dk * sizeof(float));
                    rows++;
                }
                const bgroup G = { w->qg, w->dog, w->og, w->dqg, dk, dv, dv, dk, w->idx, 0, rows,
                                   w->lo, w->hi, 1, NULL };
                run_group_sparse(p, a, w, b, h, &G, &kv, kr);
                for (int64_t r = 0; r < rows; r++)
                    dqrow_out(p, a, b, h, w->idx[r], w->dqg + r * dk);
            }
        }
    }
    keys_out(p, a, w, b, hk, 0, kvlen);
}

typedef struct bwd_ctx {
    const attn_sdpa_bwd_plan *p;
    const attn_sdpa_bwd_args *a;
    void *ws;
} bwd_ctx;

static void bwd_body(void *arg, int tid)
{
    const bwd_ctx *c = arg;
    const attn_sdpa_bwd_plan *p = c->p;
    const attn_sdpa_bwd_desc *d = &p->d;
    const attn_sdpa_desc *f = &d->fwd;
    char *base = (char *)c->ws + (size_t)tid * p->ws_thread;
    bwork w;
    w.p = (float *)(void *)base;
    w.dp = (float *)(void *)(base + p->ws_dp);
    w.dsum = (float *)(void *)(base + p->ws_d);
    w.lo = (int64_t *)(void *)(base + p->ws_lo);
    w.hi = w.lo + p->bq;
    w.seg = p->sparse ? (attn_kseg *)(void *)(base + p->ws_seg) : NULL;
    w.kg = p->gather ? (float *)(void *)(base + p->ws_gather) : NULL;
    w.vg = p->gather ? w.kg + p->bk * f->qk_dim : NULL;
    w.gacc = p->gather ? w.vg + p->bk * f->v_dim : NULL;
    w.idx = p->sparse && f->use_global_q ? w.hi + p->bq : NULL;   /* (never bf) */
    w.qg = w.idx ? (float *)(void *)(base + p->ws_qg) : NULL;
    w.dog = w.idx ? w.qg + p->sp_rows * f->qk_dim : NULL;
    w.og = w.idx ? w.dog + p->sp_rows * f->v_dim : NULL;
    w.dqg = w.idx ? w.og + p->sp_rows * f->v_dim : NULL;
#define WS_AT(type, off, used) ((used) ? (type *)(void *)(base + (off)) : NULL)
    const int wide = p->ty16 && !p->bf;
    w.kw = WS_AT(float, p->ws_kw, wide && p->k16);
    w.vw = WS_AT(float, p->ws_vw, wide && p->v16);
    w.qw = WS_AT(float, p->ws_qw, wide && p->q16);
    w.dow = WS_AT(float, p->ws_dow, wide && p->o16);
    w.ow = WS_AT(float, p->ws_ow, wide && p->o16);
    w.dqa = WS_AT(float, p->ws_dqa, p->q16);
    w.dka = WS_AT(float, p->ws_dka, p->k16 || p->bf);
    w.dva = WS_AT(float, p->ws_dva, p->v16 || p->bf);
    w.kt = WS_AT(uint32_t, p->ws_kt, p->bf);
    w.vt = WS_AT(uint32_t, p->ws_vt, p->bf);
    w.kp = WS_AT(uint32_t, p->ws_kp, p->bf);
    w.pp = WS_AT(uint32_t, p->ws_pp, p->bf);
    w.sp = WS_AT(uint32_t, p->ws_sp, p->bf);
    w.s16 = WS_AT(uint16_t, p->ws_s16, p->bf);
    w.qt = WS_AT(uint16_t, p->ws_qt, p->bf);
    w.dot = WS_AT(uint16_t, p->ws_dot, p->bf);
    w.ptrs = WS_AT(const uint16_t *, p->ws_ptrs, p->bf);
    w.scr = WS_AT(float, p->ws_scr, p->bf);
#undef WS_AT
    const int64_t nitems = p->nb * p->nh;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < nitems; it++) {
        const int64_t b0 = it / p->nh * p->bpi, k0 = it % p->nh * p->hpi;
        /* The dBias this item owns: zeroed once, then summed into in order. */
        if (d->want_dbias)
            for (int64_t b = b0; b < b0 + (p->db_b ? p->bpi : 1); b++)
                for (int64_t h = k0 * p->group; h < (p->db_h ? (k0 + p->hpi) * p->group : 1); h++)
                    zero_rows(dbias_row(p, c->a, b, h, 0), p->db_i ? f->q_len : 1, d->dbias.seq,
                              f->kv_len);
        for (int64_t b = b0; b < b0 + p->bpi; b++)
            for (int64_t hk = k0; hk < k0 + p->hpi; hk++) {
                if (p->sparse)
                    run_pair_sparse(p, c->a, &w, b, hk);
                else if (p->bf)
                    run_pair_bf(p, c->a, &w, b, hk);
                else if (p->ty16)
                    run_pair16(p, c->a, &w, b, hk);
                else
                    run_pair(p, c->a, &w, b, hk);
            }
    }
}

ATTN_DEFINE_ZERO_INIT(attn_sdpa_bwd_args_init, attn_sdpa_bwd_args)
ATTN_DEFINE_ZERO_INIT(attn_sdpa_bwd_args16_init, attn_sdpa_bwd_args16)

attn_status attn_sdpa_bwd_execute(const attn_sdpa_bwd_plan *p, const attn_sdpa_bwd_args *a,
                                  void *workspace, size_t workspace_bytes)
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
    const bwd_ctx ctx = { p, a, ws };
    attn_parallel(p->x.blas, p->x.nthreads, p->nb * p->nh, bwd_body, (void *)&ctx);
    if (!workspace)
        free(ws);
    return ATTN_OK;
}

attn_status attn_sdpa_backward(const attn_sdpa_bwd_desc *desc, const attn_sdpa_bwd_args *args)
{
    attn_sdpa_bwd_plan *plan = NULL;
    attn_status st = attn_sdpa_bwd_plan_create(&plan, desc);
    if (st != ATTN_OK)
        return st;
    st = attn_sdpa_bwd_execute(plan, args, NULL, 0);
    attn_sdpa_bwd_plan_destroy(plan);
    return st;
}
