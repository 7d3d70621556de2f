/* The SDPA plan: what plan.c resolves once and forward.c executes. */
#ifndef ATTN_SDPA_H
#define ATTN_SDPA_H

#include "core/core.h"
#include "kernels/kernels.h"

/* Blocking.  Fixed by the shape only (never by the thread count), which is
 * what makes results bitwise identical for any number of threads. */
#define ATTN_BLOCK_Q 512     /* query rows per work item */
#define ATTN_TILE_K 512      /* keys per score tile */
#define ATTN_SUB_Q 64        /* rows per GEMM on tiles the rows see unevenly
                                (causal diagonal, window edges) */
#define ATTN_STACK_MAX 512   /* most rows of a GQA group stacked in a GEMM */
#define ATTN_SPLIT_ITEMS 16  /* split the keys of short queries until there
                                are this many work items */
#define ATTN_SPLIT_MIN_KEYS 512
#define ATTN_SPLIT_MAX_BYTES ((size_t)16 << 20)

struct attn_sdpa_plan {
    attn_sdpa_desc d;
    float scale;              /* resolved */
    int64_t window_left;      /* clamped to [-1, n + m] */
    int64_t window_right;
    int nthreads;             /* resolved, >= 1 */
    int64_t group;            /* g = Hq / Hkv */
    int64_t bq, bk;           /* query block rows, key tile columns */
    int64_t nqblocks;         /* ceil(n / bq) */
    int64_t nchunks;          /* key chunks (split-K for short queries) */
    int64_t chunk;            /* keys per chunk */
    int64_t nitems;           /* B * Hkv * nqblocks * nchunks */
    /* Stacking the g query heads of a group as the rows of one GEMM: the
     * leading dimensions of Q and O seen that way (0 = not possible). */
    int64_t stack_ldq, stack_ldo;
    int64_t vrows;            /* virtual rows per item: g * min(n, bq) */
    int64_t srows;            /* rows of the score tile */
    size_t ws_thread;         /* workspace bytes per thread (x64): score tile, */
    size_t ws_ranges;         /* then row ranges at this offset, */
    size_t ws_state;          /* then row state at this one */
    size_t ws_part;           /* split-K partial results (shared) */
    size_t ws_bytes;          /* nthreads * ws_thread + ws_part */
    const attn_kernels *kern;
    attn_blas_hooks blas;     /* the loaded BLAS's thread controls */
};

#endif
