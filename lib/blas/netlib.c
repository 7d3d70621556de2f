/* Reference BLAS backend (netlib, single-threaded by construction).  The
 * build pins the library's own directory (RUNPATH), since Debian's plain
 * libblas.so.3 is an alternatives link that may point to another BLAS;
 * attn_blas_query() reports what was really loaded. */
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
