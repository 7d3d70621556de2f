/* OpenBLAS backend.  Debian ships three flavours of the same ABI: with the
 * OpenMP one, OpenBLAS sees attn's parallel region (omp_in_parallel, and the
 * per-task thread count the driver sets to 1) and runs single-threaded by
 * itself; the pthreads one only has the process-wide
 * openblas_set_num_threads(), which is set to 1 around the region and
 * restored.  The flavour is asked at run time, since the library behind the
 * soname can change without a rebuild. */
#include "attn_config.h"
#include "blas.h"
#include ATTN_CBLAS_HEADER
#include <stdio.h>
#include <string.h>

/* Not every cblas.h declares these (they are OpenBLAS extensions). */
int openblas_get_parallel(void);
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
char *openblas_get_config(void);
char *openblas_get_corename(void);

void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void attn_blas_scope_enter(attn_blas_scope *state)
{
    state->active = 0;
    state->saved = 0;
    if (openblas_get_parallel() == 1) { /* pthreads flavour */
        state->saved = openblas_get_num_threads();
        if (state->saved != 1) {
            openblas_set_num_threads(1);
            state->active = 1;
        }
    }
}

void attn_blas_scope_leave(const attn_blas_scope *state)
{
    if (state->active)
        openblas_set_num_threads(state->saved);
}

void attn_blas_describe(attn_blas_info *info)
{
    snprintf(info->version, sizeof info->version, "%s", openblas_get_config());
    snprintf(info->kernel, sizeof info->kernel, "%s", openblas_get_corename());
    switch (openblas_get_parallel()) {
    case 0: info->threading = ATTN_BLAS_THREADING_SEQUENTIAL; break;
    case 1: info->threading = ATTN_BLAS_THREADING_PTHREADS; break;
    case 2: info->threading = ATTN_BLAS_THREADING_OPENMP; break;
    default: info->threading = ATTN_BLAS_THREADING_UNKNOWN; break;
    }
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&cblas_sgemm; }
