/* The one narrow interface between attn and a BLAS: a row-major strided
 * sgemm, one file per backend (openblas.c, blis.c, mkl.c, netlib.c).
 * Everything above it is backend-free.  The scoping of the BLAS's own
 * threads (runtime.c) asks the library really loaded at run time, since on
 * Debian the one behind the soname can change without a rebuild.  blas/
 * depends on nothing else in attn. */
#ifndef ATTN_BLAS_H
#define ATTN_BLAS_H

#include "attn.h"

/* C[M][N] = alpha * A[M][K] * op(B) + beta * C, all row-major with leading
 * dimensions lda, ldb, ldc (elements).  op(B) = B[K][N] when trans_b == 0,
 * B[N][K]^T when trans_b != 0.  beta == 0 means C is not read. */
void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc);

/* C[M][N] = alpha * A[K][M]^T * B[K][N] + beta * C, row-major (the
 * backward's dV += P^T dO and dK += dS^T Q).  beta == 0: C is not read. */
void attn_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc);

/* The symbol attn_sgemm calls, to find the loaded library with dladdr(). */
void *attn_blas_entry_point(void);

/* How to keep the loaded BLAS's own threads out of attn's parallel region.
 * The loaded BLAS never changes within a process, so attn_blas_hooks_get
 * finds them once (pthread_once: dladdr, dlopen and dlsym cost tens of
 * microseconds) and every plan shares that one answer. */
typedef struct attn_blas_hooks {
    int (*openblas_get_parallel)(void);
    int (*openblas_get_num_threads)(void);
    void (*openblas_set_num_threads)(int);
    int (*mkl_set_num_threads_local)(int);
} attn_blas_hooks;
const attn_blas_hooks *attn_blas_hooks_get(void);

/* Around attn's parallel region (the calling thread).  A pthreads OpenBLAS
 * only has a process-wide setting, which is set to 1 and restored after. */
typedef struct attn_blas_scope {
    const attn_blas_hooks *hooks;
    int saved;
    int active;
} attn_blas_scope;
void attn_blas_scope_enter(const attn_blas_hooks *hooks, attn_blas_scope *scope);
void attn_blas_scope_leave(const attn_blas_scope *scope);
/* In each worker thread, around its work; returns what to restore. */
int attn_blas_thread_enter(const attn_blas_scope *scope);
void attn_blas_thread_leave(const attn_blas_scope *scope, int saved);

/* Fill info's BLAS fields (backend, loaded, library, version, kernel,
 * threading) from the library really loaded; the rest is zeroed. */
void attn_blas_identify(attn_blas_info *info);

#endif
