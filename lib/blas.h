/* The one narrow interface between attn and a BLAS: a row-major strided
 * sgemm, plus the scoping of the BLAS's own threads.  One file per backend
 * (blas_openblas.c, blas_blis.c, blas_mkl.c, blas_netlib.c) implements it;
 * everything above it is backend-free. */
#ifndef ATTN_BLAS_H
#define ATTN_BLAS_H

#include "attn.h"

/* C[M][N] = alpha * A[M][K] * op(B) + beta * C, all row-major with leading
 * dimensions lda, ldb, ldc (elements).  op(B) = B[K][N] when trans_b == 0,
 * B[N][K]^T when trans_b != 0.  beta == 0 means C is not read. */
void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc);

/* Called by the driver once around its parallel region: make the BLAS run
 * single-threaded inside attn's worker threads and give back the caller's
 * setting afterwards.  *state is opaque to the caller. */
typedef struct attn_blas_scope { int saved; int active; } attn_blas_scope;
void attn_blas_scope_enter(attn_blas_scope *state);
void attn_blas_scope_leave(const attn_blas_scope *state);

/* Fill the backend-specific part of *info (version, kernel, threading). */
void attn_blas_describe(attn_blas_info *info);

/* The symbol attn calls, for locating the loaded library with dladdr(). */
void *attn_blas_entry_point(void);

#endif
