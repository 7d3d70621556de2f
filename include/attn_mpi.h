/*
 * attn_mpi: attention over the ranks of an MPI communicator (context
 * parallelism).  A separate library (libattn_mpi, `pkg-config attn-mpi`)
 * over libattn and MPI; libattn itself never links MPI.
 *
 * Three things, all collective over the communicator:
 *
 * 1. The ring forward.  A sequence's Q, K and V rows are spread over the P
 *    ranks (attn_mpi_rows says which rows a rank holds); K/V shards travel
 *    round the ring (MPI_Isend / MPI_Irecv of the next shard posted before
 *    the current one is computed), each rank computes its query rows
 *    against every shard with the global positions (attn.h, "Blocks of a
 *    longer sequence"), skips the (query run, key run) pairs no query can
 *    see, and merges the partial results by logsumexp in a fixed order.
 * 2. The ring backward: dQ locally; dK and dV accumulated as the shards
 *    travel and returned to their owners (one more hop), from the forward's
 *    merged O and logsumexp.  Dropout draws the same decisions as the one
 *    process call (a pure function of global positions).
 * 3. Sharded-cache decode: each rank holds a stretch of a long context's KV
 *    cache (contiguous or paged, any storage type); a step computes each
 *    shard's partial and merges them by logsumexp in rank order.
 *
 * Results equal the one-process attn_sdpa / attn_sdpa_bwd call on the
 * whole problem within fp32 rounding (the sums are cut at the shards'
 * edges), and are bitwise the same from run to run and for any thread
 * count, for a given number of ranks and split.
 *
 * Errors: the library works on a duplicate of the communicator with
 * MPI_ERRORS_RETURN, so an MPI failure is ATTN_ERR_COMM, never an abort
 * from inside attn.  Every call agrees on its status across the ranks
 * before any data moves: a rank whose arguments are bad makes every rank
 * return its status (the lowest-numbered nonzero one), and descs or
 * lengths that differ between ranks are ATTN_ERR_DESC_MISMATCH on every
 * rank.  (A rank that never makes a collective call cannot be detected:
 * the others wait, as with any MPI collective.)
 *
 * Threads: MPI must be initialized (MPI_Init or MPI_Init_thread with any
 * level; attn_mpi calls MPI from the calling thread only, between its
 * OpenMP regions).  A plan holds its buffers and its communicator: one call
 * at a time per plan (every call is collective anyway).
 */
#ifndef ATTN_MPI_H
#define ATTN_MPI_H

#include <attn.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How the rows of a sequence of length L are spread over P ranks. */
typedef enum attn_mpi_split {
    /* Rank r holds rows [r L / P, (r + 1) L / P) (integer division: the
     * runs differ by at most one row when P does not divide L). */
    ATTN_MPI_SPLIT_CONTIGUOUS = 0,
    /* The sequence cut into 2P runs c = 0 .. 2P - 1, run c being
     * [c L / 2P, (c + 1) L / 2P); rank r holds runs r and 2P - 1 - r, in
     * that order.  Under a causal mask every rank then has about the same
     * work (the load-balanced "zigzag" split). */
    ATTN_MPI_SPLIT_ZIGZAG = 1
} attn_mpi_split;

/* The global rows held by rank `rank` of `ranks` under `split`: up to two
 * runs, run t being rows [start[t], start[t] + count[t]) (count[1] = 0
 * for CONTIGUOUS; a count may be 0 when L < 2P).  A rank's local tensors
 * hold its runs' rows one after the other.  Returns ATTN_OK,
 * ATTN_ERR_NULL_ARGUMENT, ATTN_ERR_BAD_SIZE (len < 0, ranks < 1, rank
 * outside [0, ranks)) or ATTN_ERR_BAD_OPTION (split). */
ATTN_API attn_status attn_mpi_rows(attn_mpi_split split, int64_t len, int ranks, int rank,
                                   int64_t start[2], int64_t count[2]);

/* ------------------------------------------------------------------------ */
/* The ring (context parallelism)                                            */
/* ------------------------------------------------------------------------ */

/*
 * The whole problem and how it is spread.
 *
 * sdpa describes the whole problem: batch, heads, q_len = n and kv_len = m
 * of the whole sequences, and every option of attn_sdpa_desc, with these
 * limits: F32 tensors; no probabilities output (want_probs 0); no sparse
 * options or paged cache; use_positions 0 (the library sets the positions
 * of each block).  want_lse is 1 for a forward whose backward will run.
 * Its views give the strides of this rank's local tensors, whose seq
 * index is the local row (the rank's runs of attn_mpi_rows one after the
 * other): Q, O and the logsumexp over the rank's query rows, K and V over
 * its key rows; the mask and the bias over its query rows and all m keys
 * (key stride 1).  Q rows are spread with split over n, K/V rows over m.
 * A rank that holds no rows of a tensor (n or m < P, or < 2P zigzag) may
 * pass NULL for it and any view (nothing of it is read or written).  A
 * shard's K and V (B x Hkv x its rows x (dk + dv) floats) travel as one
 * MPI message: past INT32_MAX floats the plan is ATTN_ERR_TOO_LARGE.
 */
typedef struct attn_mpi_desc {
    attn_sdpa_desc sdpa;
    attn_mpi_split split;
    int reserved_flags;          /* must be zero */
    /* Must be zero (attn_mpi_desc_init does it). */
    int64_t reserved[6];
} attn_mpi_desc;

/* sdpa as attn_sdpa_desc_init leaves it, CONTIGUOUS, the rest zero.
 * Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mpi_desc_init(attn_mpi_desc *desc);

typedef struct attn_mpi_plan attn_mpi_plan;

/* Collective: validate the desc on every rank, check that every rank has
 * the same whole problem (else ATTN_ERR_DESC_MISMATCH), duplicate comm
 * and make the plans of every (query run, key run) block this rank will
 * compute.  On error *plan is NULL on every rank. */
ATTN_API attn_status attn_mpi_plan_create(attn_mpi_plan **plan, const attn_mpi_desc *desc,
                                          MPI_Comm comm);

/* Free a plan; NULL is accepted.  Returns ATTN_OK.  It frees the plan's
 * duplicate communicator with MPI_Comm_free, which MPI counts as
 * collective (common implementations do not wait for the other ranks):
 * destroy a plan on every rank of its communicator, plans of one
 * communicator in the same order on every rank, before MPI_Finalize. */
ATTN_API attn_status attn_mpi_plan_destroy(attn_mpi_plan *plan);

/* Collective: the forward of the whole problem.  args holds this rank's
 * local tensors (q, k, v, o, and lse when want_lse; mask, bias as the
 * desc says) and the whole problem's kv_lens / q_lens (the same on every
 * rank, else ATTN_ERR_DESC_MISMATCH).  Writes this rank's O rows (and
 * logsumexp rows). */
ATTN_API attn_status attn_mpi_forward(attn_mpi_plan *plan, const attn_sdpa_args *args);

/* Collective: the backward of the whole problem (the plan's desc must have
 * want_lse 1).  args: this rank's q, k, v, the forward's o and lse rows,
 * d_o, and outputs dq (its query rows), dk, dv (its key rows); no dbias;
 * lengths, mask and bias as in the forward.  d_o has the view of O, dq
 * that of Q, dk of K and dv of V (the desc's), so those views must pass
 * as output views (nested) for the backward, which otherwise returns the
 * status attn_sdpa_bwd_plan_create gives them.  Every output element is
 * written. */
ATTN_API attn_status attn_mpi_backward(attn_mpi_plan *plan, const attn_sdpa_bwd_args *args);

/* What the last forward, backward or decode of a plan did on this rank.
 * (A decode step is one step and one block; its bytes_sent are those of
 * this rank's partial results handed to the collective, 0 with one rank.) */
typedef struct attn_mpi_stats {
    int64_t steps;               /* ring steps (P) */
    int64_t blocks_computed;     /* (query run, key run) blocks computed */
    int64_t blocks_skipped;      /* blocks no query of the run can see */
    int64_t bytes_sent;          /* bytes this rank sent */
    double seconds_total;        /* the whole call */
    double seconds_compute;      /* attn calls and merges */
    double seconds_wait;         /* waiting for the ring's transfers: the
                                    communication not hidden by compute */
    int64_t reserved[8];
} attn_mpi_stats;

/* Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mpi_plan_stats(const attn_mpi_plan *plan, attn_mpi_stats *stats);

/* ------------------------------------------------------------------------ */
/* Sharded-cache decode                                                      */
/* ------------------------------------------------------------------------ */

/* How a decode step combines the shards' partial results. */
typedef enum attn_mpi_merge {
    /* MPI_Allgather of every shard's O and logsumexp, then
     * attn_partials_merge over the ranks in rank order (the default). */
    ATTN_MPI_MERGE_ALLGATHER = 0,
    /* MPI_Allreduce with a custom (non-commutative) MPI_Op that merges two
     * (O, logsumexp) partials. */
    ATTN_MPI_MERGE_ALLREDUCE = 1
} attn_mpi_merge;

/*
 * local describes this rank's shard as one attn_sdpa call on it: K/V the
 * shard (kv_len its rows; contiguous or paged, any storage type), Q the
 * query rows (the same on every rank), with use_positions 1, q_pos0 the
 * queries' global position and kv_pos0 the shard's first global position,
 * and the whole context's lengths in kv_lens / q_lens when used.  want_lse
 * may be 0 or 1 (the merged logsumexp is written when 1); want_probs 0.
 * Without use_kv_lens every shard's call gets the whole context's length,
 * the largest kv_pos0 + kv_len over the ranks, as its key length of every
 * batch (attn.h's default, kv_pos0 + kv_len, would differ per shard and
 * move a bottom-right diagonal).  Every rank but the shards' own fields
 * (kv_len, kv_pos0, the storage of the shard: kv_block_size,
 * kv_num_blocks, kv_max_blocks and the pool) must agree (else
 * ATTN_ERR_DESC_MISMATCH).
 */
typedef struct attn_mpi_decode_desc {
    attn_sdpa_desc local;
    attn_mpi_merge merge;
    int reserved_flags;          /* must be zero */
    int64_t reserved[6];
} attn_mpi_decode_desc;

/* local as attn_sdpa_desc_init leaves it, ALLGATHER, the rest zero. */
ATTN_API attn_status attn_mpi_decode_desc_init(attn_mpi_decode_desc *desc);

/* Collective. */
ATTN_API attn_status attn_mpi_decode_plan_create(attn_mpi_plan **plan,
                                                 const attn_mpi_decode_desc *desc,
                                                 MPI_Comm comm);

/* Collective: one decode step.  args as attn_sdpa_execute takes them for
 * the local desc; every rank gets the merged O (and logsumexp). */
ATTN_API attn_status attn_mpi_decode(attn_mpi_plan *plan, const attn_sdpa_args *args);

#ifdef __cplusplus
}
#endif

#endif
