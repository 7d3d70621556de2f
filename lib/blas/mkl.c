/* MKL backend, linked against the sequential layer (mkl_sequential): attn
 * does the threading, and Intel's OpenMP runtime must not be mixed with
 * GCC's. */
#include "blas/blas.h"
#include <mkl_cblas.h>
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
