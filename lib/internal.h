#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn_config.h"
#include "attn.h"
#include "kernels.h"
#include "blas.h"
#include <stddef.h>
#include <stdint.h>

#define ATTN_ALIGNMENT 64

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

int attn_max_threads(void);

/* Checks shared by the SDPA and MHA plans (plan.c). */
#define ATTN_MAX_THREADS 1024
int attn_reserved_zero(const int64_t *reserved, size_t count);
int attn_mask_mode_valid(attn_mask_mode mode);
/* desc->threads resolved: 0 means omp_get_max_threads(); 1 without OpenMP. */
int attn_resolve_threads(int requested);

/* Execute-time checks.  A pointer a plan uses must be non-NULL
 * (ATTN_ERR_NULL_ARGUMENT), one it does not use must be NULL
 * (ATTN_ERR_ARGUMENT_MISMATCH). */
typedef struct attn_pointer_use {
    int used;
    const void *ptr;
} attn_pointer_use;
attn_status attn_check_pointers(const attn_pointer_use *list, size_t count);
/* kv_lens[b] in [0, m], q_lens[b] in [0, n]; NULL arrays are not used. */
attn_status attn_check_lengths(int64_t batch, const int32_t *kv_lens, int64_t m,
                               const int32_t *q_lens, int64_t n);

/* The caller's workspace after checking its size and alignment, or a fresh
 * allocation when it is NULL (the caller frees *ws then). */
attn_status attn_workspace_acquire(void *workspace, size_t bytes, size_t need, void **ws);

#endif
