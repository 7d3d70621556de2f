/* MKL backend, linked against the sequential layer (mkl_sequential): attn
 * does the threading, and Intel's OpenMP runtime must not be mixed with
 * GCC's.  Nothing to scope. */
#include "blas.h"
#include <mkl_cblas.h>
#include <mkl_service.h>
#include <stdio.h>

void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void attn_blas_scope_enter(attn_blas_scope *state) { state->active = 0; state->saved = 0; }
void attn_blas_scope_leave(const attn_blas_scope *state) { (void)state; }

void attn_blas_describe(attn_blas_info *info)
{
    char buf[198];
    mkl_get_version_string(buf, (int)sizeof buf);
    snprintf(info->version, sizeof info->version, "%.127s", buf);
    info->kernel[0] = '\0';
    info->threading = ATTN_BLAS_THREADING_SEQUENTIAL;
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&cblas_sgemm; }
