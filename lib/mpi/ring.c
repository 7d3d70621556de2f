/* attn_mpi's ring (attn_mpi.h, "The ring"): the forward and the backward
 * of one whole problem whose Q and K/V rows are spread over the ranks.
 *
 * A block is (one of this rank's query runs, one key run of some rank):
 * an attn_sdpa call with use_positions whose desc is the whole desc with
 * q_len / kv_len the runs' counts, q_pos0 / kv_pos0 their global starts,
 * explicit lengths (the whole problem's: with none given, n and m for
 * every batch, so that the bottom-right diagonal is the whole problem's)
 * and want_lse.  Q, O, lse, the mask and the bias are the caller's local
 * views, offset to the run's first row (and the mask and bias to the key
 * run's first global key); K and V come from a packed shard buffer
 * [B][Hkv][rows][dk] then [B][Hkv][rows][dv] of the shard's owner.
 *
 * Forward: at step s the rank holds the shard of rank (r - s) mod P; the
 * receive of the next one (from r - 1) and the send of the held one (to
 * r + 1) are posted before its blocks are computed, then waited for.  Each
 * computed block goes to a partial (O, lse) and is merged into its query
 * run's running (O, lse) by attn_partials_merge, in the order of the steps
 * (then key runs), so the bits depend on P and the split only.
 *
 * Backward: K/V travel as in the forward; the dK/dV accumulators of the
 * held shard follow one step behind (a block's dK/dV are summed into a
 * step buffer while the accumulator is still on its way, then added to it
 * and sent on; three accumulator slots keep a send in flight during the
 * next step).  After the last step each accumulator makes one more hop,
 * to its owner.  dQ is summed locally. */
#include "mpi/common.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct attn_mpi_ring {
    attn_mpi_desc desc;          /* the caller's */
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int P, r;
    attn_mpi_run *qr, *kr;       /* [2P]: every rank's query and key runs */
    int64_t nloc, mloc;          /* this rank's query and key rows */
    int64_t shard_cap;           /* floats of the largest shard's K and V */
    attn_sdpa_plan **fwd;        /* [4P] by block_index; NULL: never visible */
    attn_sdpa_bwd_plan **bwd;    /* [4P] when want_lse */
    attn_status bwd_views;       /* the caller's dq/dk/dv views (q/k/v's) */
    void *ws;
    size_t ws_bytes;
    int32_t *kv_lens, *q_lens;   /* [B]: the whole problem's, per call */
    float *kv[2];                /* the held and the arriving shard */
    float *slot[2];              /* per query run: running, new, merged */
    /* The backward's buffers, made at its first call. */
    float *acc[3];               /* dK/dV accumulators travelling */
    float *step;                 /* this step's dK/dV sum of the held shard */
    float *dq_acc;               /* [run][B][Hq][count][dk] */
    float *dq_tmp, *dk_tmp, *dv_tmp;
    int bwd_ready;
};

static int64_t block_index(int src, int u, int t)
{
    return ((int64_t)src * 2 + u) * 2 + t;
}

static int64_t shard_rows(const struct attn_mpi_ring *R, int src)
{
    return R->kr[2 * src].count + R->kr[2 * src + 1].count;
}

static int64_t imin(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static int64_t imax(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

/* Whether some query of run q can see some key of run k in some batch,
 * from the window and the lengths alone (the mask and the bias may hide
 * more: then a computed block gives lse -INFINITY, which the merge
 * ignores, exactly as a skipped one).  N, M: the lengths per batch, or
 * NULL for n and m. */
static int block_visible(const struct attn_mpi_ring *R, const attn_mpi_run *q,
                         const attn_mpi_run *k, const int32_t *N, const int32_t *M)
{
    const attn_sdpa_desc *d = &R->desc.sdpa;
    /* A bound past 2^62 sees everything anyway (positions are < 2^41). */
    const int64_t big = (int64_t)1 << 62;
    const int left_open = d->window_left < 0 || d->window_left > big;
    const int right_open = d->window_right < 0 || d->window_right > big;
    for (int64_t b = 0; b < R->B; b++) {
        const int64_t Nb = N ? N[b] : R->n, Mb = M ? M[b] : R->m;
        const int64_t i0 = q->start, i1 = imin(q->start + q->count, Nb) - 1;
        const int64_t j0 = k->start, j1 = imin(k->start + k->count, Mb) - 1;
        if (i1 < i0 || j1 < j0)
            continue;
        const int64_t delta = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? Mb - Nb : 0;
        /* Rows i0..i1 see keys [D(i) - left, D(i) + right]: both bounds
         * grow with i, so their union is [D(i0) - left, D(i1) + right]. */
        const int64_t lo = left_open ? j0 : imax(j0, i0 + delta - d->window_left);
        const int64_t hi = right_open ? j1 : imin(j1, i1 + delta + d->window_right);
        if (lo <= hi)
            return 1;
    }
    return 0;
}

/* The desc of block (query run q, key run k of a shard of `rows` rows). */
static attn_sdpa_desc block_desc(const struct attn_mpi_ring *R, const attn_mpi_run *q,
                                 const attn_mpi_run *k, int64_t rows)
{
    attn_sdpa_desc d = R->desc.sdpa;
    d.q_len = q->count;
    d.kv_len = k->count;
    d.use_positions = 1;
    d.q_pos0 = q->start;
    d.kv_pos0 = k->start;
    d.use_kv_lens = 1;
    d.use_q_lens = 1;
    d.want_lse = 1;
    d.o = attn_view_bhsd(R->Hq, q->count, R->dv);
    d.lse = (attn_view){ R->Hq * q->count, q->count, 1 };
    d.k = attn_view_bhsd(R->Hkv, rows, R->dk);
    d.v = attn_view_bhsd(R->Hkv, rows, R->dv);
    return d;
}

void attn_mpi_ring_free(struct attn_mpi_ring *R)
{
    if (!R)
        return;
    for (int64_t i = 0; R->fwd && i < 4 * (int64_t)R->P; i++)
        attn_sdpa_plan_destroy(R->fwd[i]);
    for (int64_t i = 0; R->bwd && i < 4 * (int64_t)R->P; i++)
        attn_sdpa_bwd_plan_destroy(R->bwd[i]);
    free(R->fwd);
    free(R->bwd);
    free(R->qr);
    free(R->kr);
    free(R->ws);
    free(R->kv_lens);
    free(R->q_lens);
    for (int i = 0; i < 2; i++) {
        free(R->kv[i]);
        free(R->slot[i]);
    }
    for (int i = 0; i < 3; i++)
        free(R->acc[i]);
    free(R->step);
    free(R->dq_acc);
    free(R->dq_tmp);
    free(R->dk_tmp);
    free(R->dv_tmp);
    free(R);
}

/* ------------------------------------------------------------ plan ------ */

/* What the header excludes, before anything is built from the desc. */
static attn_status check_desc(const attn_mpi_desc *md)
{
    if (!attn_mpi_reserved_zero(md->reserved_flags, md->reserved,
                                sizeof md->reserved / sizeof md->reserved[0]))
        return ATTN_ERR_BAD_OPTION;
    if (md->split != ATTN_MPI_SPLIT_CONTIGUOUS && md->split != ATTN_MPI_SPLIT_ZIGZAG)
        return ATTN_ERR_BAD_OPTION;
    const attn_sdpa_desc *d = &md->sdpa;
    if (d->want_probs || d->use_global_k || d->use_global_q || d->block_size ||
        d->layout_per_head || d->kv_block_size || d->kv_num_blocks || d->kv_max_blocks ||
        d->use_positions || d->q_pos0 || d->kv_pos0)
        return ATTN_ERR_BAD_OPTION;
    const attn_dtype types[4] = { d->q_type, d->k_type, d->v_type, d->o_type };
    for (int i = 0; i < 4; i++)
        if ((int)types[i] < ATTN_DTYPE_F32 || (int)types[i] > ATTN_DTYPE_Q4_0)
            return ATTN_ERR_BAD_OPTION;
    for (int i = 0; i < 4; i++)
        if (types[i] != ATTN_DTYPE_F32)
            return ATTN_ERR_UNSUPPORTED_TYPE;
    return ATTN_OK;
}

static attn_status try_plan(const attn_sdpa_desc *d)
{
    attn_sdpa_plan *p = NULL;
    attn_status st = attn_sdpa_plan_create(&p, d);
    attn_sdpa_plan_destroy(p);
    return st;
}

/* Views a rank with no rows of a tensor does not use (its own may be
 * degenerate, e.g. attn_view_bhsd(H, 0, d)): stand-ins that pass. */
static void no_query_rows(const struct attn_mpi_ring *R, attn_sdpa_desc *c)
{
    c->q = attn_view_bhsd(R->Hq, 1, R->dk);
    c->o = attn_view_bhsd(R->Hq, 1, R->dv);
    c->lse = (attn_view){ R->Hq, 1, 1 };
    c->mask = attn_view_bhsd(R->Hq, 1, c->kv_len);
    c->bias = attn_view_bhsd(R->Hq, 1, c->kv_len);
}

static void no_key_rows(const struct attn_mpi_ring *R, attn_sdpa_desc *c)
{
    c->k = attn_view_bhsd(R->Hkv, 1, R->dk);
    c->v = attn_view_bhsd(R->Hkv, 1, R->dv);
}

/* The caller's local views, through attn's own checks: Q, O, lse, mask and
 * bias on a desc of this rank's query rows against all m keys (K and V
 * there stand-ins), K and V on one of its key rows.  The other fields are
 * checked by the first. */
static attn_status check_views(const struct attn_mpi_ring *R)
{
    attn_sdpa_desc c = R->desc.sdpa;
    c.q_len = imax(R->nloc, 1);
    c.k = attn_view_bhsd(R->Hkv, R->m, R->dk);
    c.v = attn_view_bhsd(R->Hkv, R->m, R->dv);
    if (R->nloc == 0)
        no_query_rows(R, &c);
    attn_status st = try_plan(&c);
    if (st != ATTN_OK)
        return st;
    c = R->desc.sdpa;
    c.kv_len = imax(R->mloc, 1);
    c.q_len = 1;
    c.mask_mode = ATTN_MASK_NONE;
    c.use_bias = 0;
    c.use_kv_lens = c.use_q_lens = 0;
    no_query_rows(R, &c);
    if (R->mloc == 0)
        no_key_rows(R, &c);
    return try_plan(&c);
}

/* The backward writes dQ, dK and dV in the views of Q, K and V: they must
 * pass as output views. */
static attn_status check_bwd_views(const struct attn_mpi_ring *R)
{
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = R->desc.sdpa;
    bd.fwd.q_len = imax(R->nloc, 1);
    bd.fwd.kv_len = imax(R->mloc, 1);
    bd.fwd.mask_mode = ATTN_MASK_NONE;
    bd.fwd.use_bias = 0;
    if (R->nloc == 0)
        no_query_rows(R, &bd.fwd);
    if (R->mloc == 0)
        no_key_rows(R, &bd.fwd);
    bd.d_o = bd.fwd.o;
    bd.dq = bd.fwd.q;
    bd.dk = bd.fwd.k;
    bd.dv = bd.fwd.v;
    attn_sdpa_bwd_plan *p = NULL;
    attn_status st = attn_sdpa_bwd_plan_create(&p, &bd);
    attn_sdpa_bwd_plan_destroy(p);
    return st;
}

static attn_status build(struct attn_mpi_ring *R, const attn_mpi_desc *md, int rank, int size)
{
    R->desc = *md;
    const attn_sdpa_desc *d = &md->sdpa;
    R->B = d->batch;
    R->Hq = d->q_heads;
    R->Hkv = d->kv_heads;
    R->n = d->q_len;
    R->m = d->kv_len;
    R->dk = d->qk_dim;
    R->dv = d->v_dim;
    R->P = size;
    R->r = rank;
    if (R->B <= 0 || R->Hq <= 0 || R->Hkv <= 0 || R->n <= 0 || R->m <= 0 || R->dk <= 0 ||
        R->dv <= 0)
        return ATTN_ERR_BAD_SIZE;
    /* The blocks get the whole problem's lengths as int32 kv_lens/q_lens. */
    if (R->n > INT32_MAX || R->m > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    R->qr = calloc(2 * (size_t)size, sizeof *R->qr);
    R->kr = calloc(2 * (size_t)size, sizeof *R->kr);
    R->fwd = calloc(4 * (size_t)size, sizeof *R->fwd);
    R->kv_lens = calloc((size_t)R->B, sizeof *R->kv_lens);
    R->q_lens = calloc((size_t)R->B, sizeof *R->q_lens);
    if (!R->qr || !R->kr || !R->fwd || !R->kv_lens || !R->q_lens)
        return ATTN_ERR_OUT_OF_MEMORY;
    attn_status st = attn_mpi_runs(md->split, R->n, size, R->qr);
    if (st == ATTN_OK)
        st = attn_mpi_runs(md->split, R->m, size, R->kr);
    if (st != ATTN_OK)
        return st;
    R->nloc = R->qr[2 * rank].count + R->qr[2 * rank + 1].count;
    R->mloc = shard_rows(R, rank);
    if ((st = check_views(R)) != ATTN_OK)
        return st;

    /* Shard buffers: K and V of the largest shard, each message's float
     * count an int for MPI. */
    int64_t rows_max = 0;
    for (int s = 0; s < size; s++)
        rows_max = imax(rows_max, shard_rows(R, s));
    int64_t bh, cap, t1, t2;
    if (!attn_mpi_mul(R->B, R->Hkv, &bh) || !attn_mpi_mul(bh, rows_max, &t1) ||
        !attn_mpi_mul(t1, R->dk + R->dv, &cap) || cap > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    R->shard_cap = cap;
    int ok = 1;
    for (int i = 0; i < 2; i++)
        R->kv[i] = attn_mpi_alloc_floats((size_t)cap, &ok);
    /* Per query run: running, new and merged (O then lse). */
    for (int t = 0; t < 2; t++) {
        const int64_t cnt = R->qr[2 * rank + t].count;
        if (!attn_mpi_mul(R->B * R->Hq, cnt, &t1) || !attn_mpi_mul(t1, R->dv + 1, &t2) ||
            !attn_mpi_mul(t2, 3, &t1))
            return ATTN_ERR_TOO_LARGE;
        R->slot[t] = attn_mpi_alloc_floats((size_t)t1, &ok);
    }
    if (!ok)
        return ATTN_ERR_OUT_OF_MEMORY;

    /* The blocks.  Without lengths or with the top-left diagonal, a block
     * no query sees with the lengths n and m is never seen (lengths only
     * hide more); bottom-right with lengths moves the diagonal per call,
     * so every block is planned and decided at execute. */
    const int lens_move = d->align == ATTN_ALIGN_BOTTOM_RIGHT && (d->use_kv_lens || d->use_q_lens);
    if (d->want_lse) {
        R->bwd = calloc(4 * (size_t)size, sizeof *R->bwd);
        if (!R->bwd)
            return ATTN_ERR_OUT_OF_MEMORY;
        R->bwd_views = check_bwd_views(R);
    }
    size_t ws = 0;
    for (int src = 0; src < size; src++) {
        for (int u = 0; u < 2; u++) {
            const attn_mpi_run *k = &R->kr[2 * src + u];
            for (int t = 0; t < 2; t++) {
                const attn_mpi_run *q = &R->qr[2 * rank + t];
                if (q->count == 0 || k->count == 0)
                    continue;
                if (!lens_move && !block_visible(R, q, k, NULL, NULL))
                    continue;
                const int64_t i = block_index(src, u, t);
                attn_sdpa_desc bd = block_desc(R, q, k, shard_rows(R, src));
                if ((st = attn_sdpa_plan_create(&R->fwd[i], &bd)) != ATTN_OK)
                    return st;
                size_t b = 0;
                attn_sdpa_workspace_size(R->fwd[i], &b);
                ws = b > ws ? b : ws;
                if (!R->bwd)
                    continue;
                attn_sdpa_bwd_desc bw;
                attn_sdpa_bwd_desc_init(&bw);
                bw.fwd = bd;
                /* The merged O and lse are the caller's. */
                bw.fwd.o = d->o;
                bw.fwd.lse = d->lse;
                bw.d_o = d->o;
                bw.dq = attn_view_bhsd(R->Hq, q->count, R->dk);
                bw.dk = attn_view_bhsd(R->Hkv, k->count, R->dk);
                bw.dv = attn_view_bhsd(R->Hkv, k->count, R->dv);
                if ((st = attn_sdpa_bwd_plan_create(&R->bwd[i], &bw)) != ATTN_OK)
                    return st;
                attn_sdpa_bwd_workspace_size(R->bwd[i], &b);
                ws = b > ws ? b : ws;
            }
        }
    }
    if (ws > 0) {
        R->ws_bytes = (ws + 63) & ~(size_t)63;
        R->ws = aligned_alloc(64, R->ws_bytes);
        if (!R->ws)
            return ATTN_ERR_OUT_OF_MEMORY;
    }
    return ATTN_OK;
}

static uint64_t ring_fingerprint(const attn_mpi_desc *md)
{
    uint64_t h = attn_mpi_fp_i64(ATTN_MPI_FP_INIT, ATTN_MPI_KIND_RING);
    h = attn_mpi_fp_sdpa_common(h, &md->sdpa);
    h = attn_mpi_fp_i64(h, md->sdpa.kv_len);
    return attn_mpi_fp_i64(h, md->split);
}

attn_status attn_mpi_plan_create(attn_mpi_plan **plan, const attn_mpi_desc *desc, MPI_Comm comm)
{
    if (plan)
        *plan = NULL;
    MPI_Comm dup;
    int rank = 0, size = 1;
    attn_status st = attn_mpi_comm_setup(comm, &dup, &rank, &size);
    if (st != ATTN_OK)
        return st;
    attn_mpi_plan *p = NULL;
    uint64_t fp = 0;
    if (!plan || !desc) {
        st = ATTN_ERR_NULL_ARGUMENT;
    } else if ((st = check_desc(desc)) == ATTN_OK) {
        fp = ring_fingerprint(desc);
        p = attn_mpi_plan_new(ATTN_MPI_KIND_RING, dup, rank, size);
        if (p)
            p->ring = calloc(1, sizeof *p->ring);
        if (!p || !p->ring)
            st = ATTN_ERR_OUT_OF_MEMORY;
        else
            st = build(p->ring, desc, rank, size);
    }
    st = attn_mpi_agree(dup, st, fp, NULL);
    if (st != ATTN_OK) {
        if (p)
            attn_mpi_plan_destroy(p);
        else
            MPI_Comm_free(&dup);
        return st;
    }
    *plan = p;
    return ATTN_OK;
}

/* ------------------------------------------------------------ execute --- */

/* The lengths of the whole problem for this call: the caller's, checked
 * against n and m as the one-process call checks them, or n and m. */
static attn_status take_lens(struct attn_mpi_ring *R, const int32_t *kv_lens,
                             const int32_t *q_lens)
{
    for (int64_t b = 0; b < R->B; b++) {
        if (kv_lens && (kv_lens[b] < 0 || kv_lens[b] > R->m))
            return ATTN_ERR_BAD_LENGTH;
        if (q_lens && (q_lens[b] < 0 || q_lens[b] > R->n))
            return ATTN_ERR_BAD_LENGTH;
    }
    for (int64_t b = 0; b < R->B; b++) {
        R->kv_lens[b] = kv_lens ? kv_lens[b] : (int32_t)R->m;
        R->q_lens[b] = q_lens ? q_lens[b] : (int32_t)R->n;
    }
    return ATTN_OK;
}

/* ptr must be given exactly when `used` (NULL_ARGUMENT / ARGUMENT_MISMATCH),
 * folded into *st in order. */
static void need(attn_status *st, const void *ptr, int used)
{
    if (*st != ATTN_OK)
        return;
    if (used && !ptr)
        *st = ATTN_ERR_NULL_ARGUMENT;
    else if (!used && ptr)
        *st = ATTN_ERR_ARGUMENT_MISMATCH;
}

/* Required when used; anything when not (a rank holding no rows of a
 * tensor passes what it likes). */
static void need_rows(attn_status *st, const void *ptr, int64_t rows)
{
    if (*st == ATTN_OK && rows > 0 && !ptr)
        *st = ATTN_ERR_NULL_ARGUMENT;
}

/* An optional feature over the query rows: given exactly when used, and
 * anything on a rank without query rows when used. */
static void need_feature(attn_status *st, const void *ptr, int used, int64_t rows)
{
    if (used)
        need_rows(st, ptr, rows);
    else
        need(st, ptr, 0);
}

static attn_status check_fwd_args(const struct attn_mpi_ring *R, const attn_sdpa_args *a)
{
    if (!a)
        return ATTN_ERR_NULL_ARGUMENT;
    for (size_t i = 0; i < sizeof a->reserved / sizeof a->reserved[0]; i++)
        if (a->reserved[i])
            return ATTN_ERR_BAD_OPTION;
    const attn_sdpa_desc *d = &R->desc.sdpa;
    attn_status st = ATTN_OK;
    need_rows(&st, a->q, R->nloc);
    need_rows(&st, a->k, R->mloc);
    need_rows(&st, a->v, R->mloc);
    need_rows(&st, a->o, R->nloc);
    need(&st, a->kv_lens, d->use_kv_lens);
    need(&st, a->q_lens, d->use_q_lens);
    need_feature(&st, a->mask, d->mask_mode != ATTN_MASK_NONE, R->nloc);
    need_feature(&st, a->bias, d->use_bias, R->nloc);
    need(&st, a->probs, 0);
    need_feature(&st, a->lse, d->want_lse, R->nloc);
    need(&st, a->global_k, 0);
    need(&st, a->global_q, 0);
    need(&st, a->layout, 0);
    need(&st, a->k16, 0);
    need(&st, a->v16, 0);
    need(&st, a->block_table, 0);
    need(&st, a->q16, 0);
    need(&st, a->o16, 0);
    need(&st, a->kq, 0);
    need(&st, a->vq, 0);
    return st;
}

static attn_status check_bwd_args(const struct attn_mpi_ring *R, const attn_sdpa_bwd_args *a)
{
    if (!a)
        return ATTN_ERR_NULL_ARGUMENT;
    for (size_t i = 0; i < sizeof a->reserved / sizeof a->reserved[0]; i++)
        if (a->reserved[i])
            return ATTN_ERR_BAD_OPTION;
    const attn_sdpa_desc *d = &R->desc.sdpa;
    if (!d->want_lse)
        return ATTN_ERR_BAD_OPTION;
    if (R->bwd_views != ATTN_OK)
        return R->bwd_views;
    attn_status st = ATTN_OK;
    need_rows(&st, a->q, R->nloc);
    need_rows(&st, a->k, R->mloc);
    need_rows(&st, a->v, R->mloc);
    need_rows(&st, a->o, R->nloc);
    need_rows(&st, a->d_o, R->nloc);
    need_rows(&st, a->lse, R->nloc);
    need(&st, a->kv_lens, d->use_kv_lens);
    need(&st, a->q_lens, d->use_q_lens);
    need_feature(&st, a->mask, d->mask_mode != ATTN_MASK_NONE, R->nloc);
    need_feature(&st, a->bias, d->use_bias, R->nloc);
    need_rows(&st, a->dq, R->nloc);
    need_rows(&st, a->dk, R->mloc);
    need_rows(&st, a->dv, R->mloc);
    need(&st, a->dbias, 0);
    need(&st, a->global_k, 0);
    need(&st, a->global_q, 0);
    need(&st, a->layout, 0);
    need(&st, a->args16, 0);
    return st;
}

/* Rows [0, rows) of every (b, h) between a strided view and a dense
 * [B][H][rows][w] buffer (float offsets; row0 the view's first row). */
static void copy_in(float *dst, const float *src, attn_view v, int64_t B, int64_t H,
                    int64_t row0, int64_t rows, int64_t w)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < rows; i++)
                memcpy(dst + ((b * H + h) * rows + i) * w,
                       src + b * v.batch + h * v.head + (row0 + i) * v.seq,
                       (size_t)w * sizeof(float));
}

static void copy_out(float *dst, attn_view v, const float *src, int64_t B, int64_t H,
                     int64_t row0, int64_t rows, int64_t w)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < rows; i++)
                memcpy(dst + b * v.batch + h * v.head + (row0 + i) * v.seq,
                       src + ((b * H + h) * rows + i) * w, (size_t)w * sizeof(float));
}

/* The logsumexp rows of a dense [B][H][rows] buffer into a strided view. */
static void copy_out_lse(float *dst, attn_view v, const float *src, int64_t B, int64_t H,
                         int64_t row0, int64_t rows)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < rows; i++)
                dst[b * v.batch + h * v.head + (row0 + i) * v.seq] = src[(b * H + h) * rows + i];
}

/* Pack this rank's K and V rows into a shard buffer. */
static void pack_shard(const struct attn_mpi_ring *R, float *buf, const float *k, const float *v)
{
    const attn_sdpa_desc *d = &R->desc.sdpa;
    if (R->mloc == 0)
        return;
    copy_in(buf, k, d->k, R->B, R->Hkv, 0, R->mloc, R->dk);
    copy_in(buf + R->B * R->Hkv * R->mloc * R->dk, v, d->v, R->B, R->Hkv, 0, R->mloc, R->dv);
}

static int shard_count(const struct attn_mpi_ring *R, int src)
{
    return (int)(R->B * R->Hkv * shard_rows(R, src) * (R->dk + R->dv));
}

/* The pointers of block (query run t, key run k) common to the forward
 * and the backward: the mask's and bias's row and key offsets. */
static void block_mask_bias(const struct attn_mpi_ring *R, const attn_mpi_run *q,
                            const attn_mpi_run *k, const uint8_t *mask, const float *bias,
                            const uint8_t **bmask, const float **bbias)
{
    const attn_sdpa_desc *d = &R->desc.sdpa;
    *bmask = mask ? mask + q->off * d->mask.seq + k->start : NULL;
    *bbias = bias ? bias + q->off * d->bias.seq + k->start : NULL;
}

/* Post the receive of the next shard (from r - 1) and the send of the
 * held one (to r + 1) at step s < P - 1. */
static attn_status post_kv(attn_mpi_plan *plan, int s, const float *held, float *next,
                           MPI_Request req[2])
{
    struct attn_mpi_ring *R = plan->ring;
    const int P = R->P, r = R->r;
    const int left = (r + P - 1) % P, right = (r + 1) % P;
    const int nsrc = (int)(((int64_t)r - s - 1 + 2 * (int64_t)P) % P);
    const int hsrc = (int)(((int64_t)r - s + 2 * (int64_t)P) % P);
    const int nrecv = shard_count(R, nsrc), nsend = shard_count(R, hsrc);
    if (MPI_Irecv(next, nrecv, MPI_FLOAT, left, ATTN_MPI_TAG_KV, plan->comm, &req[0]) !=
        MPI_SUCCESS)
        return ATTN_ERR_COMM;
    if (MPI_Isend(held, nsend, MPI_FLOAT, right, ATTN_MPI_TAG_KV, plan->comm, &req[1]) !=
        MPI_SUCCESS)
        return ATTN_ERR_COMM;
    plan->stats.bytes_sent += (int64_t)nsend * (int64_t)sizeof(float);
    return ATTN_OK;
}

static attn_status wait_all(attn_mpi_plan *plan, MPI_Request *req, int n)
{
    const double t0 = MPI_Wtime();
    const int rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    plan->stats.seconds_wait += MPI_Wtime() - t0;
    return rc == MPI_SUCCESS ? ATTN_OK : ATTN_ERR_COMM;
}

/* Between blocks: let MPI move the step's transfers along (an MPI without
 * a progress thread moves a large message, rendezvous, only inside MPI
 * calls, so posting it before the compute alone would leave it all to the
 * wait).  Its time counts as waiting: on shared memory the copy itself
 * happens here, on this rank's core. */
static double progress(attn_mpi_plan *plan, MPI_Request *req, int n)
{
    const double t0 = MPI_Wtime();
    int done;
    MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    const double t = MPI_Wtime() - t0;
    plan->stats.seconds_wait += t;
    return t;
}

static void stats_begin(attn_mpi_plan *plan)
{
    memset(&plan->stats, 0, sizeof plan->stats);
    plan->stats.steps = plan->size;
}

/* The call's status agreed at its start (the arguments, the lengths) and
 * the lengths taken. */
static attn_status begin(attn_mpi_plan *plan, int op, attn_status st, const int32_t *kv_lens,
                         const int32_t *q_lens)
{
    struct attn_mpi_ring *R = plan->ring;
    uint64_t fp = 0;
    if (st == ATTN_OK)
        st = take_lens(R, kv_lens, q_lens);
    if (st == ATTN_OK)
        fp = attn_mpi_fp_lens(op, R->B, kv_lens, q_lens);
    return attn_mpi_agree(plan->comm, st, fp, NULL);
}

attn_status attn_mpi_forward(attn_mpi_plan *plan, const attn_sdpa_args *args)
{
    if (!plan)
        return ATTN_ERR_NULL_ARGUMENT;
    const double t_start = MPI_Wtime();
    struct attn_mpi_ring *R = plan->ring;
    attn_status st = plan->kind != ATTN_MPI_KIND_RING ? ATTN_ERR_BAD_OPTION
                                                      : check_fwd_args(R, args);
    const int ok = st == ATTN_OK;
    st = begin(plan, ATTN_MPI_OP_FORWARD, st, ok ? args->kv_lens : NULL,
               ok ? args->q_lens : NULL);
    if (st != ATTN_OK)
        return st;
    stats_begin(plan);
    const attn_sdpa_desc *d = &R->desc.sdpa;
    const int P = R->P, r = R->r;
    const int64_t B = R->B, Hq = R->Hq, dv = R->dv;
    const attn_mpi_run *myq = &R->qr[2 * r];

    /* Running (O, lse) of each query run: O = 0, lse = -INFINITY. */
    int has[2] = { 0, 0 };
    for (int t = 0; t < 2; t++) {
        const int64_t rows = B * Hq * myq[t].count;
        if (rows == 0)
            continue;
        memset(R->slot[t], 0, (size_t)(rows * dv) * sizeof(float));
        for (int64_t i = 0; i < rows; i++)
            R->slot[t][rows * dv + i] = -INFINITY;
    }
    pack_shard(R, R->kv[0], args->k, args->v);
    int cur = 0;
    attn_status run = ATTN_OK;      /* a failure of attn inside the ring */
    MPI_Request req[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    for (int s = 0; s < P; s++) {
        const int src = (int)(((int64_t)r - s + 2 * (int64_t)P) % P);
        const int64_t srows = shard_rows(R, src);
        float *held = R->kv[cur];
        if (s < P - 1 && (st = post_kv(plan, s, held, R->kv[1 - cur], req)) != ATTN_OK) {
            attn_mpi_cancel(req, 2);
            return st;
        }
        const double t0 = MPI_Wtime();
        double t_prog = 0.0;   /* (inside progress: counted as waiting) */
        for (int t = 0; t < 2 && run == ATTN_OK; t++) {
            const attn_mpi_run *q = &myq[t];
            for (int u = 0; u < 2 && run == ATTN_OK; u++) {
                const attn_mpi_run *k = &R->kr[2 * src + u];
                if (q->count == 0 || k->count == 0)
                    continue;
                const attn_sdpa_plan *bp = R->fwd[block_index(src, u, t)];
                if (!bp || !block_visible(R, q, k, R->q_lens, R->kv_lens)) {
                    plan->stats.blocks_skipped++;
                    continue;
                }
                const int64_t rows = B * Hq * q->count, S = rows * (dv + 1);
                float *out = R->slot[t] + (has[t] ? S : 0);
                attn_sdpa_args a;
                attn_sdpa_args_init(&a);
                a.q = args->q + q->off * d->q.seq;
                a.k = held + k->off * R->dk;
                a.v = held + B * R->Hkv * srows * R->dk + k->off * dv;
                a.o = out;
                a.lse = out + rows * dv;
                a.kv_lens = R->kv_lens;
                a.q_lens = R->q_lens;
                block_mask_bias(R, q, k, args->mask, args->bias, &a.mask, &a.bias);
                if ((run = attn_sdpa_execute(bp, &a, R->ws, R->ws_bytes)) != ATTN_OK)
                    break;
                plan->stats.blocks_computed++;
                if (s < P - 1)
                    t_prog += progress(plan, req, 2);
                if (has[t]) {
                    attn_partials_merge_args m;
                    attn_partials_merge_args_init(&m);
                    m.parts = 2;
                    m.rows = rows;
                    m.dim = dv;
                    m.o_parts = R->slot[t];
                    m.o_part_stride = S;
                    m.o_row_stride = dv;
                    m.lse_parts = R->slot[t] + rows * dv;
                    m.lse_part_stride = S;
                    m.lse_row_stride = 1;
                    m.o = R->slot[t] + 2 * S;
                    m.o_out_stride = dv;
                    m.lse_out = R->slot[t] + 2 * S + rows * dv;
                    m.lse_out_stride = 1;
                    if ((run = attn_partials_merge(&m)) != ATTN_OK)
                        break;
                    memcpy(R->slot[t], R->slot[t] + 2 * S, (size_t)S * sizeof(float));
                }
                has[t] = 1;
            }
        }
        plan->stats.seconds_compute += MPI_Wtime() - t0 - t_prog;
        if (s < P - 1) {
            if ((st = wait_all(plan, req, 2)) != ATTN_OK) {
                attn_mpi_cancel(req, 2);
                return st;
            }
        }
        cur = 1 - cur;
    }
    /* Every rank went round the ring; agree on what attn said on the way
     * before anything is written. */
    if ((st = attn_mpi_agree(plan->comm, run, 0, NULL)) != ATTN_OK)
        return st;
    for (int t = 0; t < 2; t++) {
        const attn_mpi_run *q = &myq[t];
        if (q->count == 0)
            continue;
        const int64_t rows = B * Hq * q->count;
        copy_out(args->o, d->o, R->slot[t], B, Hq, q->off, q->count, dv);
        if (d->want_lse)
            copy_out_lse(args->lse, d->lse, R->slot[t] + rows * dv, B, Hq, q->off, q->count);
    }
    plan->stats.seconds_total = MPI_Wtime() - t_start;
    return ATTN_OK;
}

/* ------------------------------------------------------------ backward -- */

static attn_status bwd_buffers(struct attn_mpi_ring *R)
{
    if (R->bwd_ready)
        return ATTN_OK;
    int64_t t1, dq_all, tmp_q = 0, tmp_k = 0;
    if (!attn_mpi_mul(R->B * R->Hq, R->nloc, &t1) || !attn_mpi_mul(t1, R->dk, &dq_all))
        return ATTN_ERR_TOO_LARGE;
    for (int t = 0; t < 2; t++)
        tmp_q = imax(tmp_q, R->qr[2 * R->r + t].count);
    for (int i = 0; i < 2 * R->P; i++)
        tmp_k = imax(tmp_k, R->kr[i].count);
    int ok = 1;
    for (int i = 0; i < 3; i++)
        R->acc[i] = attn_mpi_alloc_floats((size_t)R->shard_cap, &ok);
    R->step = attn_mpi_alloc_floats((size_t)R->shard_cap, &ok);
    R->dq_acc = attn_mpi_alloc_floats((size_t)dq_all, &ok);
    R->dq_tmp = attn_mpi_alloc_floats((size_t)(R->B * R->Hq * tmp_q * R->dk), &ok);
    R->dk_tmp = attn_mpi_alloc_floats((size_t)(R->B * R->Hkv * tmp_k * R->dk), &ok);
    R->dv_tmp = attn_mpi_alloc_floats((size_t)(R->B * R->Hkv * tmp_k * R->dv), &ok);
    if (!ok) {
        for (int i = 0; i < 3; i++) {
            free(R->acc[i]);
            R->acc[i] = NULL;
        }
        free(R->step);
        free(R->dq_acc);
        free(R->dq_tmp);
        free(R->dk_tmp);
        free(R->dv_tmp);
        R->step = R->dq_acc = R->dq_tmp = R->dk_tmp = R->dv_tmp = NULL;
        return ATTN_ERR_OUT_OF_MEMORY;
    }
    R->bwd_ready = 1;
    return ATTN_OK;
}

/* dst[b][h][row0 + i][:] += src[b][h][i][:] for a [B][H][rows][w] block
 * inside a [B][H][total][w] buffer. */
static void add_rows(float *dst, int64_t total, const float *src, int64_t B, int64_t H,
                     int64_t row0, int64_t rows, int64_t w)
{
    for (int64_t bh = 0; bh < B * H; bh++) {
        float *o = dst + (bh * total + row0) * w;
        const float *x = src + bh * rows * w;
        for (int64_t e = 0; e < rows * w; e++)
            o[e] += x[e];
    }
}

attn_status attn_mpi_backward(attn_mpi_plan *plan, const attn_sdpa_bwd_args *args)
{
    if (!plan)
        return ATTN_ERR_NULL_ARGUMENT;
    const double t_start = MPI_Wtime();
    struct attn_mpi_ring *R = plan->ring;
    attn_status st = plan->kind != ATTN_MPI_KIND_RING ? ATTN_ERR_BAD_OPTION
                                                      : check_bwd_args(R, args);
    if (st == ATTN_OK)
        st = bwd_buffers(R);
    const int ok = st == ATTN_OK;
    st = begin(plan, ATTN_MPI_OP_BACKWARD, st, ok ? args->kv_lens : NULL,
               ok ? args->q_lens : NULL);
    if (st != ATTN_OK)
        return st;
    stats_begin(plan);
    const attn_sdpa_desc *d = &R->desc.sdpa;
    const int P = R->P, r = R->r;
    const int64_t B = R->B, Hq = R->Hq, Hkv = R->Hkv, dk = R->dk, dv = R->dv;
    const int left = (r + P - 1) % P, right = (r + 1) % P;
    const attn_mpi_run *myq = &R->qr[2 * r];

    if (R->dq_acc)
        memset(R->dq_acc, 0, (size_t)(B * Hq * R->nloc * dk) * sizeof(float));
    memset(R->acc[0], 0, (size_t)R->shard_cap * sizeof(float));
    pack_shard(R, R->kv[0], args->k, args->v);
    int cur = 0;
    attn_status run = ATTN_OK;
    /* kvreq: the K/V receive and send of the step; acc_recv[i] and
     * acc_send[i]: accumulator slot i's receive and send. */
    MPI_Request kvreq[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    MPI_Request accreq[6] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                              MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
    MPI_Request *acc_recv = accreq, *acc_send = accreq + 3;
    for (int s = 0; s < P && st == ATTN_OK; s++) {
        const int src = (int)(((int64_t)r - s + 2 * (int64_t)P) % P);
        const int64_t srows = shard_rows(R, src);
        const int64_t kfloats = B * Hkv * srows * dk;
        float *held = R->kv[cur];
        float *acc = R->acc[s % 3];
        if (s < P - 1 && (st = post_kv(plan, s, held, R->kv[1 - cur], kvreq)) != ATTN_OK)
            break;
        if (P > 1) {
            /* The accumulator of the next shard (after the last step: this
             * rank's own, home) into the slot whose send of two steps ago
             * must be complete first. */
            const int nslot = (s + 1) % 3;
            const int nsrc = (int)(((int64_t)r - s - 1 + 2 * (int64_t)P) % P);
            if ((st = wait_all(plan, &acc_send[nslot], 1)) != ATTN_OK)
                break;
            if (MPI_Irecv(R->acc[nslot], shard_count(R, nsrc), MPI_FLOAT, left,
                          ATTN_MPI_TAG_ACC, plan->comm, &acc_recv[nslot]) != MPI_SUCCESS) {
                st = ATTN_ERR_COMM;
                break;
            }
        }
        const double t0 = MPI_Wtime();
        double t_prog = 0.0;   /* (inside progress: counted as waiting) */
        int any = 0;
        for (int t = 0; t < 2 && run == ATTN_OK; t++) {
            const attn_mpi_run *q = &myq[t];
            for (int u = 0; u < 2 && run == ATTN_OK; u++) {
                const attn_mpi_run *k = &R->kr[2 * src + u];
                if (q->count == 0 || k->count == 0)
                    continue;
                const attn_sdpa_bwd_plan *bp = R->bwd[block_index(src, u, t)];
                if (!bp || !block_visible(R, q, k, R->q_lens, R->kv_lens)) {
                    plan->stats.blocks_skipped++;
                    continue;
                }
                if (!any) {
                    memset(R->step, 0, (size_t)shard_count(R, src) * sizeof(float));
                    any = 1;
                }
                attn_sdpa_bwd_args a;
                attn_sdpa_bwd_args_init(&a);
                a.q = args->q + q->off * d->q.seq;
                a.k = held + k->off * dk;
                a.v = held + kfloats + k->off * dv;
                a.o = args->o + q->off * d->o.seq;
                a.d_o = args->d_o + q->off * d->o.seq;
                a.lse = args->lse + q->off * d->lse.seq;
                a.kv_lens = R->kv_lens;
                a.q_lens = R->q_lens;
                block_mask_bias(R, q, k, args->mask, args->bias, &a.mask, &a.bias);
                a.dq = R->dq_tmp;
                a.dk = R->dk_tmp;
                a.dv = R->dv_tmp;
                if ((run = attn_sdpa_bwd_execute(bp, &a, R->ws, R->ws_bytes)) != ATTN_OK)
                    break;
                plan->stats.blocks_computed++;
                /* dQ of the run (flat), dK and dV at the key run's rows. */
                add_rows(R->dq_acc + B * Hq * q->off * dk, 0, R->dq_tmp, 1, 1, 0,
                         B * Hq * q->count, dk);
                add_rows(R->step, srows, R->dk_tmp, B, Hkv, k->off, k->count, dk);
                add_rows(R->step + kfloats, srows, R->dv_tmp, B, Hkv, k->off, k->count, dv);
                if (P > 1) {
                    if (s < P - 1)
                        t_prog += progress(plan, kvreq, 2);
                    t_prog += progress(plan, accreq, 6);
                }
            }
        }
        plan->stats.seconds_compute += MPI_Wtime() - t0 - t_prog;
        if (P > 1 && s > 0 && (st = wait_all(plan, &acc_recv[s % 3], 1)) != ATTN_OK)
            break;
        if (any) {
            const double t1 = MPI_Wtime();
            add_rows(acc, 0, R->step, 1, 1, 0, 1, shard_count(R, src));
            plan->stats.seconds_compute += MPI_Wtime() - t1;
        }
        if (P > 1) {
            const int n = shard_count(R, src);
            if (MPI_Isend(acc, n, MPI_FLOAT, right, ATTN_MPI_TAG_ACC, plan->comm,
                          &acc_send[s % 3]) != MPI_SUCCESS) {
                st = ATTN_ERR_COMM;
                break;
            }
            plan->stats.bytes_sent += (int64_t)n * (int64_t)sizeof(float);
        }
        if (s < P - 1 && (st = wait_all(plan, kvreq, 2)) != ATTN_OK)
            break;
        cur = 1 - cur;
    }
    /* The own accumulator's last hop, and every send. */
    if (st == ATTN_OK && P > 1)
        st = wait_all(plan, accreq, 6);
    if (st != ATTN_OK) {
        attn_mpi_cancel(kvreq, 2);
        attn_mpi_cancel(accreq, 6);
        return st;
    }
    if ((st = attn_mpi_agree(plan->comm, run, 0, NULL)) != ATTN_OK)
        return st;
    for (int t = 0; t < 2; t++) {
        const attn_mpi_run *q = &myq[t];
        if (q->count > 0)
            copy_out(args->dq, d->q, R->dq_acc + B * Hq * q->off * dk, B, Hq, q->off, q->count,
                     dk);
    }
    if (R->mloc > 0) {
        const float *home = R->acc[P > 1 ? P % 3 : 0];
        copy_out(args->dk, d->k, home, B, Hkv, 0, R->mloc, dk);
        copy_out(args->dv, d->v, home + B * Hkv * R->mloc * dk, B, Hkv, 0, R->mloc, dv);
    }
    plan->stats.seconds_total = MPI_Wtime() - t_start;
    return ATTN_OK;
}
