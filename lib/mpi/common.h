/* What the parts of libattn_mpi share (attn_mpi.h is the contract): the
 * plan object of both the ring (ring.c) and the sharded decode (decode.c),
 * the communicator set-up, the agreement of a status and a fingerprint
 * across the ranks, FNV-1a fingerprints, and small buffer helpers
 * (common.c).  libattn_mpi uses libattn through attn.h only, like any
 * other program. */
#ifndef ATTN_MPI_COMMON_H
#define ATTN_MPI_COMMON_H

#include "attn_mpi.h"
#include <stddef.h>
#include <stdint.h>

/* Message tags on the plan's private communicator: K/V shards of the ring
 * and the dK/dV accumulators of the backward travel between the same pairs
 * of ranks, so they need tags of their own to be matched in order. */
#define ATTN_MPI_TAG_KV 1
#define ATTN_MPI_TAG_ACC 2

/* The operation a call performs, hashed into the execute fingerprint so
 * that ranks calling different operations on one plan stop with
 * ATTN_ERR_DESC_MISMATCH instead of exchanging mismatched messages. */
enum { ATTN_MPI_OP_FORWARD = 1, ATTN_MPI_OP_BACKWARD = 2, ATTN_MPI_OP_DECODE = 3 };

/* The runs of rows a rank holds (attn_mpi_rows): run t is global rows
 * [start, start + count), at local rows [off, off + count). */
typedef struct attn_mpi_run {
    int64_t start, count, off;
} attn_mpi_run;

struct attn_mpi_ring;
struct attn_mpi_dec;

enum { ATTN_MPI_KIND_RING = 1, ATTN_MPI_KIND_DECODE = 2 };

struct attn_mpi_plan {
    int kind;
    MPI_Comm comm;               /* the duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    attn_mpi_stats stats;
    struct attn_mpi_ring *ring;  /* kind RING */
    struct attn_mpi_dec *dec;    /* kind DECODE */
};

/* Whether an attn_mpi desc's reserved_flags and reserved tail are zero
 * (libattn's own check is internal to it). */
int attn_mpi_reserved_zero(int flags, const int64_t *reserved, size_t count);

/* A plan of the kind (zeroed, the duplicate communicator and this rank's
 * place in it), or NULL without memory. */
attn_mpi_plan *attn_mpi_plan_new(int kind, MPI_Comm dup, int rank, int size);

/* ---- FNV-1a, 64 bits ---- */
#define ATTN_MPI_FP_INIT 14695981039346656037ull
uint64_t attn_mpi_fp_u64(uint64_t h, uint64_t v);
uint64_t attn_mpi_fp_i64(uint64_t h, int64_t v);
/* A float's bits, every NaN as one (NaN means the default scale). */
uint64_t attn_mpi_fp_f32(uint64_t h, float v);
uint64_t attn_mpi_fp_f64(uint64_t h, double v);
/* The semantic fields shared by the ring's whole problem and a decode
 * step's shards: sizes but kv_len, scale, window, lengths, mask, bias,
 * dropout, types.  Not strides, pointers, threads or the engine. */
uint64_t attn_mpi_fp_sdpa_common(uint64_t h, const attn_sdpa_desc *d);
/* An execute call's operation and lengths (B entries each when used). */
uint64_t attn_mpi_fp_lens(int op, int64_t batch, const int32_t *kv_lens, const int32_t *q_lens);

/* ---- The communicator ---- */
/* MPI initialized and not finalized, comm not MPI_COMM_NULL; then *dup
 * a duplicate of comm with MPI_ERRORS_RETURN (collective over comm; the
 * caller's error handler of comm is set to MPI_ERRORS_RETURN for the
 * duplication only, so that a failure returns ATTN_ERR_COMM).  On error
 * *dup is MPI_COMM_NULL. */
attn_status attn_mpi_comm_setup(MPI_Comm comm, MPI_Comm *dup, int *rank, int *size);

/* Collective over comm: every rank passes its local status and
 * fingerprint; all return the lowest-numbered nonzero status of any rank,
 * else ATTN_ERR_DESC_MISMATCH when the fingerprints differ, else ATTN_OK.
 * *max_value (may be NULL, the same on every rank) becomes the largest
 * value over the ranks.  An MPI failure is ATTN_ERR_COMM on the rank that
 * sees it. */
attn_status attn_mpi_agree(MPI_Comm comm, attn_status local, uint64_t fp, int64_t *max_value);

/* Cancel and free every request not MPI_REQUEST_NULL (after an MPI
 * failure, so that no transfer outlives the call's buffers' use). */
void attn_mpi_cancel(MPI_Request *reqs, int n);

/* ---- Buffers ---- */
/* 64-byte aligned, zeroed floats; NULL when n is 0 or on failure (*ok
 * cleared then; n == 0 leaves *ok alone). */
float *attn_mpi_alloc_floats(size_t n, int *ok);
/* count x size in *out, 0 on overflow past INT64_MAX / SIZE_MAX. */
int attn_mpi_mul(int64_t a, int64_t b, int64_t *out);

/* The two runs of rows of every rank: runs[r * 2 + t]. */
attn_status attn_mpi_runs(attn_mpi_split split, int64_t len, int ranks, attn_mpi_run *runs);

/* Kind-specific parts of attn_mpi_plan_destroy. */
void attn_mpi_ring_free(struct attn_mpi_ring *ring);
void attn_mpi_dec_free(struct attn_mpi_dec *dec);

#endif
