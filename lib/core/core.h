/* What every part of attn shares: the workspace alignment, the argument
 * checks common to every plan (checks.c) and the one parallel region all
 * work runs in (parallel.c).  core/ depends on blas/ (the BLAS's thread
 * controls) and kernels/ only; sdpa/ and mha/ build on it. */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include "attn_config.h"
#include "attn.h"
#include "blas/blas.h"
#include <stddef.h>
#include <stdint.h>

#define ATTN_ALIGNMENT 64

/* The products of the attention core (gemm.c): attn_sgemm / attn_sgemm_tn
 * of blas.h when gk is NULL (engine BLAS), else the tile engine's kernels
 * gk (a B^T operand is transposed into panels on the stack).  beta is 0 or
 * 1 on the tile engine (other values go to the BLAS). */
struct attn_gemm_kernels;
void attn_gemm(const struct attn_gemm_kernels *gk, int trans_b, int M, int N, int K,
               float alpha, const float *A, int lda, const float *B, int ldb, float beta,
               float *C, int ldc);
void attn_gemm_tn(const struct attn_gemm_kernels *gk, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc);

/* Rows [r0, r1) of a matrix asked for ahead of use, into L2 (prefetch.c):
 * row r at base + r * ld floats, width floats of it; write: the rows are
 * about to be stored.  Nothing when r1 <= r0; only the rows' own addresses
 * are formed, so r0 and r1 may be the bounds of an empty range at the
 * matrix's end. */
void attn_prefetch_rows(const float *base, int64_t ld, int64_t r0, int64_t r1, int64_t width,
                        int write);
/* The same with ld and the width in bytes (rows of any element type). */
void attn_prefetch_bytes(const void *base, int64_t ld, int64_t r0, int64_t r1, int64_t bytes,
                         int write);

/* Checked arithmetic for counts and byte sizes: a result above
 * ATTN_SIZE_LIMIT (what both an int64_t index and a size_t byte count hold)
 * clears *ok.  Plans turn that into ATTN_ERR_TOO_LARGE. */
#define ATTN_SIZE_LIMIT ((uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (uint64_t)INT64_MAX : (uint64_t)SIZE_MAX)
/* The element types of the computation (Q, O, the MHA layer's and linear
 * attention's tensors, and K and V in every path but the dense SDPA
 * forward and attn_kv_append). */
static inline int attn_dtype_valid(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 || t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16;
}

/* The block types of a quantized KV cache (K/V storage of the dense SDPA
 * forward and attn_kv_append only). */
static inline int attn_dtype_is_block(attn_dtype t)
{
    return t == ATTN_DTYPE_Q8_0 || t == ATTN_DTYPE_Q4_0;
}

/* Any known type (the rest is ATTN_ERR_BAD_OPTION). */
static inline int attn_dtype_known(attn_dtype t)
{
    return attn_dtype_valid(t) || attn_dtype_is_block(t);
}

/* n types of tensors that take F32, F16 or BF16 only: ATTN_ERR_BAD_OPTION
 * if one is unknown (that wins), else ATTN_ERR_UNSUPPORTED_TYPE if one is
 * a block type, else ATTN_OK. */
static inline attn_status attn_dtypes_check(const attn_dtype *t, int n)
{
    int block = 0;
    for (int i = 0; i < n; i++) {
        if (!attn_dtype_known(t[i]))
            return ATTN_ERR_BAD_OPTION;
        block |= attn_dtype_is_block(t[i]);
    }
    return block ? ATTN_ERR_UNSUPPORTED_TYPE : ATTN_OK;
}

static inline uint64_t attn_size_mul(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > ATTN_SIZE_LIMIT) {
        *ok = 0;
        return 0;
    }
    return r;
}
static inline uint64_t attn_size_add(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r) || r > ATTN_SIZE_LIMIT) {
        *ok = 0;
        return 0;
    }
    return r;
}
/* Rounded up to ATTN_ALIGNMENT. */
static inline uint64_t attn_size_align(uint64_t x, int *ok)
{
    return attn_size_add(x, ATTN_ALIGNMENT - 1, ok) / ATTN_ALIGNMENT * ATTN_ALIGNMENT;
}

/* A workspace layout carved block by block: each block starts at an
 * ATTN_ALIGNMENT-aligned offset, which attn_carve returns, and takes
 * count x elem bytes rounded up to the alignment (0 bytes: an empty block
 * at the current offset).  Any overflow clears ok, and the plan returns
 * ATTN_ERR_TOO_LARGE; size is the layout's whole size.  Every plan lays
 * out its workspace (and the MHA layer its context) with it. */
typedef struct attn_carver {
    uint64_t size;
    int ok;
} attn_carver;
#define ATTN_CARVER_INIT { 0, 1 }
static inline size_t attn_carve(attn_carver *c, uint64_t count, uint64_t elem)
{
    const size_t off = (size_t)c->size;
    const uint64_t bytes = attn_size_align(attn_size_mul(count, elem, &c->ok), &c->ok);
    c->size = attn_size_add(c->size, bytes, &c->ok);
    return off;
}

/* Checks shared by the SDPA and MHA plans (checks.c). */
#define ATTN_MAX_THREADS 1024
int attn_reserved_zero(const int64_t *reserved, size_t count);
/* Every pointer of an args struct's reserved tail is NULL. */
int attn_reserved_null(void *const *reserved, size_t count);
#define ATTN_RESERVED_NULL(s) attn_reserved_null((s)->reserved, sizeof (s)->reserved / sizeof (s)->reserved[0])
#define ATTN_RESERVED_ZERO(s) attn_reserved_zero((s)->reserved, sizeof (s)->reserved / sizeof (s)->reserved[0])
/* The _init of a growable struct: all zero (NULL pointers). */
#define ATTN_DEFINE_ZERO_INIT(fn, type)      \
    attn_status fn(type *x)                  \
    {                                        \
        if (!x)                              \
            return ATTN_ERR_NULL_ARGUMENT;   \
        memset(x, 0, sizeof *x);             \
        return ATTN_OK;                      \
    }
int attn_mask_mode_valid(attn_mask_mode mode);
int attn_engine_valid(attn_engine engine);

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


/* Threads (parallel.c).  attn_max_threads: what a plan with threads = 0
 * gets (omp_get_max_threads(); 1 without OpenMP). */
int attn_max_threads(void);
/* desc->threads resolved: 0 means omp_get_max_threads(); 1 without OpenMP. */
int attn_resolve_threads(int requested);

/* attn's parallel region: nthreads OpenMP threads (one when nthreads or
 * nitems is 1, or without OpenMP), each calling body(ctx, tid) with the
 * BLAS held to one thread (the scope of blas.h, and the per-task thread
 * count set to 1 for OpenBLAS's OpenMP build).  body may hold orphaned
 * `omp for` loops, which share out the work among the team. */
void attn_parallel(const attn_blas_hooks *hooks, int nthreads, int64_t nitems,
                   void (*body)(void *ctx, int tid), void *ctx);

#endif
