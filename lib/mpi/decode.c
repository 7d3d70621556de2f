/* attn_mpi's sharded-cache decode (attn_mpi.h, "Sharded-cache decode").
 *
 * Each rank runs one attn_sdpa call with positions on its shard of the
 * cache, into a buffer of R = B x Hq x n rows of dv + 1 floats: a row's
 * partial O then its logsumexp (the plan asks for the logsumexp whatever
 * the caller's want_lse, and computes O in fp32 whatever o_type).  The
 * rows are then merged across the ranks in rank order:
 * - ALLGATHER: MPI_Allgather of every rank's rows, then one
 *   attn_partials_merge over the P parts;
 * - ALLREDUCE: MPI_Allreduce over an MPI datatype of dv + 1 contiguous
 *   floats with a non-commutative MPI_Op merging two rows (the lower
 *   ranks' first) by attn_partials_merge.
 * The merged rows go to the caller's O (rounded once to o_type) and
 * logsumexp.  Without use_kv_lens, the shards' calls get the whole
 * context's length for every batch, the largest kv_pos0 + kv_len over the
 * ranks, so that a bottom-right diagonal is the whole context's. */
#include "mpi/common.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct attn_mpi_dec {
    attn_mpi_decode_desc desc;   /* the caller's */
    attn_sdpa_plan *plan;        /* the shard's call into part */
    void *ws;
    size_t ws_bytes;
    int64_t B, Hq, n, dv, rows; /* rows = B Hq n */
    int32_t *kv_lens;            /* [B] the whole context's, without use_kv_lens */
    float *part;                 /* [rows][dv + 1] */
    float *gather;               /* [P][rows][dv + 1], ALLGATHER */
    float *res;                  /* [rows][dv + 1], the merged rows */
    MPI_Datatype row_type;
    MPI_Op op;
};

void attn_mpi_dec_free(struct attn_mpi_dec *D)
{
    if (!D)
        return;
    attn_sdpa_plan_destroy(D->plan);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && D->row_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&D->row_type);
    if (!finalized && D->op != MPI_OP_NULL)
        MPI_Op_free(&D->op);
    free(D->ws);
    free(D->kv_lens);
    free(D->part);
    free(D->gather);
    free(D->res);
    free(D);
}

/* The MPI_Op of ALLREDUCE: inout = in (+) inout, `in` holding the lower
 * ranks' merge.  Rows of dv + 1 floats (the datatype's size tells dv);
 * columns a chunk at a time through the stack, since attn_partials_merge
 * takes the parts at one stride and its output apart from its inputs. */
#define OP_CHUNK 512

static void merge_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
    int bytes = 0;
    MPI_Type_size(*type, &bytes);
    const int64_t w = bytes / (int)sizeof(float), dv = w - 1;
    float tmp[2 * OP_CHUNK];
    for (int64_t e = 0; e < *len; e++) {
        const float *a = (const float *)in + e * w;
        float *b = (float *)inout + e * w;
        const float lse2[2] = { a[dv], b[dv] };
        float lse = 0.0f;
        for (int64_t c0 = 0; c0 < dv; c0 += OP_CHUNK) {
            const int64_t c = dv - c0 < OP_CHUNK ? dv - c0 : OP_CHUNK;
            memcpy(tmp, a + c0, (size_t)c * sizeof(float));
            memcpy(tmp + OP_CHUNK, b + c0, (size_t)c * sizeof(float));
            attn_partials_merge_args m;
            attn_partials_merge_args_init(&m);
            m.parts = 2;
            m.rows = 1;
            m.dim = c;
            m.o_parts = tmp;
            m.o_part_stride = OP_CHUNK;
            m.lse_parts = lse2;
            m.lse_part_stride = 1;
            m.o = b + c0;
            m.o_out_stride = c;
            m.lse_out = &lse;
            m.lse_out_stride = 1;
            if (attn_partials_merge(&m) != ATTN_OK) {
                /* (cannot happen with these arguments; never a silent
                 * wrong value) */
                for (int64_t i = 0; i < c; i++)
                    b[c0 + i] = NAN;
                lse = NAN;
            }
        }
        b[dv] = lse;
    }
}

static uint64_t dec_fingerprint(const attn_mpi_decode_desc *dd)
{
    /* Not the shard's own fields: kv_len, kv_pos0, and its storage
     * (kv_block_size, kv_num_blocks, kv_max_blocks; a rank's shard may be
     * paged while another's is contiguous). */
    uint64_t h = attn_mpi_fp_i64(ATTN_MPI_FP_INIT, ATTN_MPI_KIND_DECODE);
    h = attn_mpi_fp_sdpa_common(h, &dd->local);
    h = attn_mpi_fp_i64(h, dd->local.use_positions);
    h = attn_mpi_fp_i64(h, dd->local.q_pos0);
    return attn_mpi_fp_i64(h, dd->merge);
}

static attn_status check_desc(const attn_mpi_decode_desc *dd)
{
    if (!attn_mpi_reserved_zero(dd->reserved_flags, dd->reserved,
                                sizeof dd->reserved / sizeof dd->reserved[0]))
        return ATTN_ERR_BAD_OPTION;
    if (dd->merge != ATTN_MPI_MERGE_ALLGATHER && dd->merge != ATTN_MPI_MERGE_ALLREDUCE)
        return ATTN_ERR_BAD_OPTION;
    if (dd->local.want_probs || dd->local.use_positions != 1)
        return ATTN_ERR_BAD_OPTION;
    /* Everything else as attn checks the shard's own call. */
    attn_sdpa_plan *p = NULL;
    attn_status st = attn_sdpa_plan_create(&p, &dd->local);
    attn_sdpa_plan_destroy(p);
    return st;
}

static attn_status build(struct attn_mpi_dec *D, const attn_mpi_decode_desc *dd, int size)
{
    D->desc = *dd;
    D->row_type = MPI_DATATYPE_NULL;
    D->op = MPI_OP_NULL;
    const attn_sdpa_desc *l = &dd->local;
    D->B = l->batch;
    D->Hq = l->q_heads;
    D->n = l->q_len;
    D->dv = l->v_dim;
    int64_t t, w;
    if (!attn_mpi_mul(D->B, D->Hq, &t) || !attn_mpi_mul(t, D->n, &D->rows) ||
        D->rows > INT32_MAX || D->dv > INT32_MAX - 1 || !attn_mpi_mul(D->rows, D->dv + 1, &w) ||
        !attn_mpi_mul(w, size, &t))
        return ATTN_ERR_TOO_LARGE;
    attn_sdpa_desc in = *l;
    in.o_type = ATTN_DTYPE_F32;
    in.o = (attn_view){ D->Hq * D->n * (D->dv + 1), D->n * (D->dv + 1), D->dv + 1 };
    in.want_lse = 1;
    in.lse = in.o;
    in.use_kv_lens = 1;
    attn_status st = attn_sdpa_plan_create(&D->plan, &in);
    if (st != ATTN_OK)
        return st;
    size_t ws = 0;
    attn_sdpa_workspace_size(D->plan, &ws);
    if (ws > 0) {
        D->ws_bytes = (ws + 63) & ~(size_t)63;
        if (!(D->ws = aligned_alloc(64, D->ws_bytes)))
            return ATTN_ERR_OUT_OF_MEMORY;
    }
    int ok = 1;
    D->part = attn_mpi_alloc_floats((size_t)w, &ok);
    D->res = attn_mpi_alloc_floats((size_t)w, &ok);
    if (dd->merge == ATTN_MPI_MERGE_ALLGATHER)
        D->gather = attn_mpi_alloc_floats((size_t)t, &ok);
    D->kv_lens = calloc((size_t)D->B, sizeof *D->kv_lens);
    if (!ok || !D->kv_lens)
        return ATTN_ERR_OUT_OF_MEMORY;
    if (MPI_Type_contiguous((int)(D->dv + 1), MPI_FLOAT, &D->row_type) != MPI_SUCCESS ||
        MPI_Type_commit(&D->row_type) != MPI_SUCCESS) {
        D->row_type = MPI_DATATYPE_NULL;
        return ATTN_ERR_COMM;
    }
    if (dd->merge == ATTN_MPI_MERGE_ALLREDUCE &&
        MPI_Op_create(merge_op, 0, &D->op) != MPI_SUCCESS) {
        D->op = MPI_OP_NULL;
        return ATTN_ERR_COMM;
    }
    return ATTN_OK;
}

attn_status attn_mpi_decode_plan_create(attn_mpi_plan **plan, const attn_mpi_decode_desc *desc,
                                        MPI_Comm comm)
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
    int64_t extent = 0;
    if (!plan || !desc) {
        st = ATTN_ERR_NULL_ARGUMENT;
    } else if ((st = check_desc(desc)) == ATTN_OK) {
        fp = dec_fingerprint(desc);
        /* (kv_pos0 <= 2^40 was checked; the sum passes INT64_MAX only
         * for absurd kv_len) */
        if (desc->local.kv_len > INT64_MAX - desc->local.kv_pos0)
            st = ATTN_ERR_TOO_LARGE;
        else
            extent = desc->local.kv_pos0 + desc->local.kv_len;
        p = attn_mpi_plan_new(ATTN_MPI_KIND_DECODE, dup, rank, size);
        if (p)
            p->dec = calloc(1, sizeof *p->dec);
        if (!p || !p->dec)
            st = ATTN_ERR_OUT_OF_MEMORY;
        else if (st == ATTN_OK)
            st = build(p->dec, desc, size);
    }
    st = attn_mpi_agree(dup, st, fp, &extent);
    /* The whole context's length: what the lengths are without kv_lens. */
    if (st == ATTN_OK && extent > INT32_MAX && !desc->local.use_kv_lens)
        st = ATTN_ERR_TOO_LARGE;
    if (st != ATTN_OK) {
        if (p)
            attn_mpi_plan_destroy(p);
        else
            MPI_Comm_free(&dup);
        return st;
    }
    for (int64_t b = 0; b < p->dec->B; b++)
        p->dec->kv_lens[b] = (int32_t)(extent > INT32_MAX ? 0 : extent);
    *plan = p;
    return ATTN_OK;
}

/* The caller's O / O16 and lse as its desc says; the rest is checked by
 * attn_sdpa_execute on the shard's call. */
static attn_status check_args(const struct attn_mpi_dec *D, const attn_sdpa_args *a)
{
    if (!a)
        return ATTN_ERR_NULL_ARGUMENT;
    const attn_sdpa_desc *l = &D->desc.local;
    const int o16 = l->o_type != ATTN_DTYPE_F32;
    if ((o16 ? a->o16 == NULL : a->o == NULL) || (l->want_lse && !a->lse))
        return ATTN_ERR_NULL_ARGUMENT;
    if ((o16 ? a->o != NULL : a->o16 != NULL) || (!l->want_lse && a->lse) ||
        (!l->use_kv_lens && a->kv_lens))
        return ATTN_ERR_ARGUMENT_MISMATCH;
    return ATTN_OK;
}

/* The merged rows into the caller's O (rounded to o_type) and lse. */
static attn_status write_out(const struct attn_mpi_dec *D, const attn_sdpa_args *a)
{
    const attn_sdpa_desc *l = &D->desc.local;
    const int64_t dv = D->dv, w = dv + 1;
    for (int64_t b = 0; b < D->B; b++)
        for (int64_t h = 0; h < D->Hq; h++)
            for (int64_t i = 0; i < D->n; i++) {
                const float *row = D->res + ((b * D->Hq + h) * D->n + i) * w;
                const int64_t off = b * l->o.batch + h * l->o.head + i * l->o.seq;
                if (l->o_type == ATTN_DTYPE_F32) {
                    memcpy(a->o + off, row, (size_t)dv * sizeof(float));
                } else {
                    attn_status st = attn_dtype_encode(l->o_type, row, a->o16 + off, dv);
                    if (st != ATTN_OK)
                        return st;
                }
                if (l->want_lse)
                    a->lse[b * l->lse.batch + h * l->lse.head + i * l->lse.seq] = row[dv];
            }
    return ATTN_OK;
}

attn_status attn_mpi_decode(attn_mpi_plan *plan, const attn_sdpa_args *args)
{
    if (!plan)
        return ATTN_ERR_NULL_ARGUMENT;
    const double t_start = MPI_Wtime();
    struct attn_mpi_dec *D = plan->dec;
    attn_status st = plan->kind != ATTN_MPI_KIND_DECODE ? ATTN_ERR_BAD_OPTION
                                                        : check_args(D, args);
    uint64_t fp = 0;
    double t_compute = 0.0;
    if (st == ATTN_OK) {
        const attn_sdpa_desc *l = &D->desc.local;
        attn_sdpa_args a = *args;
        a.o = D->part;
        a.o16 = NULL;
        a.lse = D->part + D->dv;
        if (!l->use_kv_lens)
            a.kv_lens = D->kv_lens;
        const double t0 = MPI_Wtime();
        st = attn_sdpa_execute(D->plan, &a, D->ws, D->ws_bytes);
        t_compute = MPI_Wtime() - t0;
        fp = attn_mpi_fp_lens(ATTN_MPI_OP_DECODE, D->B, l->use_kv_lens ? args->kv_lens : NULL,
                              l->use_q_lens ? args->q_lens : NULL);
    }
    if ((st = attn_mpi_agree(plan->comm, st, fp, NULL)) != ATTN_OK)
        return st;
    memset(&plan->stats, 0, sizeof plan->stats);
    plan->stats.steps = 1;
    plan->stats.blocks_computed = 1;
    const int64_t count = D->rows;
    if (plan->size > 1)
        plan->stats.bytes_sent = count * (D->dv + 1) * (int64_t)sizeof(float);
    double t0 = MPI_Wtime();
    int rc;
    if (D->desc.merge == ATTN_MPI_MERGE_ALLGATHER)
        rc = MPI_Allgather(D->part, (int)count, D->row_type, D->gather, (int)count, D->row_type,
                           plan->comm);
    else
        rc = MPI_Allreduce(D->part, D->res, (int)count, D->row_type, D->op, plan->comm);
    plan->stats.seconds_wait = MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS)
        return ATTN_ERR_COMM;
    t0 = MPI_Wtime();
    if (D->desc.merge == ATTN_MPI_MERGE_ALLGATHER) {
        const int64_t w = D->dv + 1;
        attn_partials_merge_args m;
        attn_partials_merge_args_init(&m);
        m.parts = plan->size;
        m.rows = count;
        m.dim = D->dv;
        m.o_parts = D->gather;
        m.o_part_stride = count * w;
        m.o_row_stride = w;
        m.lse_parts = D->gather + D->dv;
        m.lse_part_stride = count * w;
        m.lse_row_stride = w;
        m.o = D->res;
        m.o_out_stride = w;
        m.lse_out = D->res + D->dv;
        m.lse_out_stride = w;
        st = attn_partials_merge(&m);
    }
    if (st == ATTN_OK)
        st = write_out(D, args);
    plan->stats.seconds_compute = t_compute + (MPI_Wtime() - t0);
    plan->stats.seconds_total = MPI_Wtime() - t_start;
    return st;
}
