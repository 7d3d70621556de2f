/* BLIS backend, through its typed expert interface: general row and column
 * strides, and a per-call runtime object asking for one thread, so nothing
 * process-wide is changed. */
#include "blas/blas.h"
#include <blis.h>
#include <stdint.h>

void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(1, &rntm);
    float a = alpha, b = beta;
    /* Row-major: row stride = leading dimension, column stride = 1. */
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, trans_b ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 M, N, K, &a, (float *)A, lda, 1, (float *)B, ldb, 1,
                 &b, C, ldc, 1, NULL, &rntm);
}

void attn_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
    rntm_t rntm = BLIS_RNTM_INITIALIZER;
    bli_rntm_set_num_threads(1, &rntm);
    float a = alpha, b = beta;
    bli_sgemm_ex(BLIS_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &a, (float *)A, lda, 1,
                 (float *)B, ldb, 1, &b, C, ldc, 1, NULL, &rntm);
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&bli_sgemm_ex; }
