/* OpenBLAS backend (any of Debian's flavours: OpenMP, pthreads, serial;
 * blas_runtime.c keeps each one's threads out of attn's region). */
#include "attn_config.h"
#include "blas/blas.h"
#include ATTN_CBLAS_HEADER
#include <stdint.h>

void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void attn_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                C, ldc);
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&cblas_sgemm; }
