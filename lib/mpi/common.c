/* attn_mpi: the row split, the desc initializers, the communicator, the
 * agreement of statuses and fingerprints across the ranks, stats and
 * destroy (attn_mpi.h). */
#include "mpi/common.h"
#include <stdlib.h>
#include <string.h>

attn_status attn_mpi_rows(attn_mpi_split split, int64_t len, int ranks, int rank,
                          int64_t start[2], int64_t count[2])
{
    if (!start || !count)
        return ATTN_ERR_NULL_ARGUMENT;
    if (len < 0 || ranks < 1 || rank < 0 || rank >= ranks)
        return ATTN_ERR_BAD_SIZE;
    /* Run c of k runs is [c L / k, (c + 1) L / k), computed as
     * (L / k) c + (L % k) c / k (the same integer) so that c L cannot
     * overflow. */
    const int64_t P = ranks;
    int64_t k, c[2];
    if (split == ATTN_MPI_SPLIT_CONTIGUOUS) {
        k = P;
        c[0] = rank;
        c[1] = -1;
    } else if (split == ATTN_MPI_SPLIT_ZIGZAG) {
        k = 2 * P;
        c[0] = rank;
        c[1] = 2 * P - 1 - rank;
    } else {
        return ATTN_ERR_BAD_OPTION;
    }
    /* (rem < k <= 2^32, so rem (c + 1) fits 64 unsigned bits) */
    const int64_t q = len / k, rem = len % k;
    for (int t = 0; t < 2; t++) {
        if (c[t] < 0) {
            start[t] = start[0] + count[0];
            count[t] = 0;
            continue;
        }
        const int64_t lo = q * c[t] + (int64_t)((uint64_t)rem * (uint64_t)c[t] / (uint64_t)k);
        const int64_t hi =
            q * (c[t] + 1) + (int64_t)((uint64_t)rem * (uint64_t)(c[t] + 1) / (uint64_t)k);
        start[t] = lo;
        count[t] = hi - lo;
    }
    return ATTN_OK;
}

attn_status attn_mpi_runs(attn_mpi_split split, int64_t len, int ranks, attn_mpi_run *runs)
{
    for (int r = 0; r < ranks; r++) {
        int64_t s[2], c[2];
        attn_status st = attn_mpi_rows(split, len, ranks, r, s, c);
        if (st != ATTN_OK)
            return st;
        runs[2 * r] = (attn_mpi_run){ s[0], c[0], 0 };
        runs[2 * r + 1] = (attn_mpi_run){ s[1], c[1], c[0] };
    }
    return ATTN_OK;
}

attn_status attn_mpi_desc_init(attn_mpi_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    attn_sdpa_desc_init(&desc->sdpa);
    desc->split = ATTN_MPI_SPLIT_CONTIGUOUS;
    return ATTN_OK;
}

attn_status attn_mpi_decode_desc_init(attn_mpi_decode_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    attn_sdpa_desc_init(&desc->local);
    desc->merge = ATTN_MPI_MERGE_ALLGATHER;
    return ATTN_OK;
}

attn_status attn_mpi_plan_stats(const attn_mpi_plan *plan, attn_mpi_stats *stats)
{
    if (!plan || !stats)
        return ATTN_ERR_NULL_ARGUMENT;
    *stats = plan->stats;
    return ATTN_OK;
}

attn_status attn_mpi_plan_destroy(attn_mpi_plan *plan)
{
    if (!plan)
        return ATTN_OK;
    attn_mpi_ring_free(plan->ring);
    attn_mpi_dec_free(plan->dec);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (plan->comm != MPI_COMM_NULL && !finalized)
        MPI_Comm_free(&plan->comm);
    free(plan);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- FNV-1a */

uint64_t attn_mpi_fp_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t attn_mpi_fp_i64(uint64_t h, int64_t v)
{
    return attn_mpi_fp_u64(h, (uint64_t)v);
}

uint64_t attn_mpi_fp_f32(uint64_t h, float v)
{
    uint32_t u;
    if (v != v)
        u = 0x7fc00000u;
    else
        memcpy(&u, &v, sizeof u);
    return attn_mpi_fp_u64(h, u);
}

uint64_t attn_mpi_fp_f64(uint64_t h, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return attn_mpi_fp_u64(h, u);
}

uint64_t attn_mpi_fp_sdpa_common(uint64_t h, const attn_sdpa_desc *d)
{
    const int64_t sizes[] = { d->batch, d->q_heads, d->kv_heads, d->q_len, d->qk_dim, d->v_dim };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        h = attn_mpi_fp_i64(h, sizes[i]);
    h = attn_mpi_fp_f32(h, d->scale);
    h = attn_mpi_fp_i64(h, d->align);
    /* Every negative bound is the same unbounded side. */
    h = attn_mpi_fp_i64(h, d->window_left < 0 ? -1 : d->window_left);
    h = attn_mpi_fp_i64(h, d->window_right < 0 ? -1 : d->window_right);
    h = attn_mpi_fp_i64(h, d->use_kv_lens != 0);
    h = attn_mpi_fp_i64(h, d->use_q_lens != 0);
    h = attn_mpi_fp_i64(h, d->mask_mode);
    h = attn_mpi_fp_i64(h, d->use_bias != 0);
    /* The generator's seed and offset matter only when something is
     * dropped. */
    h = attn_mpi_fp_f64(h, d->dropout_p);
    h = attn_mpi_fp_u64(h, d->dropout_p != 0.0 ? d->dropout_seed : 0);
    h = attn_mpi_fp_u64(h, d->dropout_p != 0.0 ? d->dropout_offset : 0);
    const int64_t types[] = { d->q_type, d->k_type, d->v_type, d->o_type };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        h = attn_mpi_fp_i64(h, types[i]);
    /* integer scores change every score (1.4) */
    h = attn_mpi_fp_i64(h, d->qk_int8);
    return h;
}

uint64_t attn_mpi_fp_lens(int op, int64_t batch, const int32_t *kv_lens, const int32_t *q_lens)
{
    uint64_t h = attn_mpi_fp_i64(ATTN_MPI_FP_INIT, op);
    h = attn_mpi_fp_i64(h, kv_lens != NULL);
    for (int64_t b = 0; kv_lens && b < batch; b++)
        h = attn_mpi_fp_i64(h, kv_lens[b]);
    h = attn_mpi_fp_i64(h, q_lens != NULL);
    for (int64_t b = 0; q_lens && b < batch; b++)
        h = attn_mpi_fp_i64(h, q_lens[b]);
    return h;
}

/* ------------------------------------------------------- communicator ---- */

attn_status attn_mpi_comm_setup(MPI_Comm comm, MPI_Comm *dup, int *rank, int *size)
{
    *dup = MPI_COMM_NULL;
    int init = 0, fin = 0;
    if (MPI_Initialized(&init) != MPI_SUCCESS || MPI_Finalized(&fin) != MPI_SUCCESS || !init ||
        fin)
        return ATTN_ERR_COMM;
    if (comm == MPI_COMM_NULL)
        return ATTN_ERR_NULL_ARGUMENT;
    /* The duplication itself under MPI_ERRORS_RETURN: the caller's handler
     * (often MPI_ERRORS_ARE_FATAL) would abort on a failure. */
    MPI_Errhandler old;
    if (MPI_Comm_get_errhandler(comm, &old) != MPI_SUCCESS)
        return ATTN_ERR_COMM;
    if (MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
        MPI_Errhandler_free(&old);
        return ATTN_ERR_COMM;
    }
    int rc = MPI_Comm_dup(comm, dup);
    MPI_Comm_set_errhandler(comm, old);
    MPI_Errhandler_free(&old);
    if (rc != MPI_SUCCESS) {
        *dup = MPI_COMM_NULL;
        return ATTN_ERR_COMM;
    }
    if (MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(*dup, rank) != MPI_SUCCESS || MPI_Comm_size(*dup, size) != MPI_SUCCESS) {
        MPI_Comm_free(dup);
        *dup = MPI_COMM_NULL;
        return ATTN_ERR_COMM;
    }
    return ATTN_OK;
}

/* Statuses are small positive numbers: KEY - status orders them so that
 * MPI_MAX picks the lowest nonzero one (0 = every rank is fine). */
#define STATUS_KEY 0x10000u

attn_status attn_mpi_agree(MPI_Comm comm, attn_status local, uint64_t fp, int64_t *max_value)
{
    /* [status key, fp, ~fp, value]: max(fp) and max(~fp) = ~min(fp) in one
     * reduction; the value is biased so that unsigned order is signed
     * order. */
    uint64_t v[4] = { local != ATTN_OK ? STATUS_KEY - (uint64_t)local : 0, fp, ~fp,
                      max_value ? (uint64_t)*max_value ^ (1ull << 63) : 0 };
    if (MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS)
        return ATTN_ERR_COMM;
    if (max_value)
        *max_value = (int64_t)(v[3] ^ (1ull << 63));
    if (v[0] != 0)
        return (attn_status)(STATUS_KEY - v[0]);
    return v[1] != ~v[2] ? ATTN_ERR_DESC_MISMATCH : ATTN_OK;
}

void attn_mpi_cancel(MPI_Request *reqs, int n)
{
    for (int i = 0; i < n; i++) {
        if (reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&reqs[i]);
            MPI_Request_free(&reqs[i]);
            reqs[i] = MPI_REQUEST_NULL;
        }
    }
}

/* ------------------------------------------------------------- buffers --- */

int attn_mpi_mul(int64_t a, int64_t b, int64_t *out)
{
    const uint64_t lim = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX
                                                                   : (uint64_t)SIZE_MAX;
    if (a < 0 || b < 0 || (a != 0 && (uint64_t)b > lim / (uint64_t)a)) {
        *out = 0;
        return 0;
    }
    *out = a * b;
    return 1;
}

float *attn_mpi_alloc_floats(size_t n, int *ok)
{
    if (n == 0)
        return NULL;
    if (n > (SIZE_MAX - 63) / sizeof(float)) {
        *ok = 0;
        return NULL;
    }
    const size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        *ok = 0;
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

attn_mpi_plan *attn_mpi_plan_new(int kind, MPI_Comm dup, int rank, int size)
{
    attn_mpi_plan *p = calloc(1, sizeof *p);
    if (p) {
        p->kind = kind;
        p->comm = dup;
        p->rank = rank;
        p->size = size;
    }
    return p;
}

int attn_mpi_reserved_zero(int flags, const int64_t *reserved, size_t count)
{
    if (flags != 0)
        return 0;
    for (size_t i = 0; i < count; i++)
        if (reserved[i] != 0)
            return 0;
    return 1;
}
