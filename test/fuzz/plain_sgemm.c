/* plain_sgemm.c -- the test-only BLAS of the fuzz target: attn's internal
 * sgemm seam (lib/blas/blas.h) as plain loops, compiled with the sanitizers
 * like the rest of the fuzzer, so that AddressSanitizer sees every element
 * a BLAS may read or write.  It reads exactly
 *   A[i*lda + k]                      i < M, k < K
 *   B[k*ldb + j] (op = B)  or  B[j*ldb + k] (op = B^T)   j < N, k < K
 *   C[i*ldc + j]                      i < M, j < N, only when beta != 0
 * and writes exactly the C elements.  Accumulation is in float, in a fixed
 * order, so results are deterministic. */
#include "blas/blas.h"

#include <stdint.h>

void attn_sgemm(int trans_b, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++) {
                float b = trans_b ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j];
                acc += A[(int64_t)i * lda + k] * b;
            }
            float *c = &C[(int64_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
    }
}

/* A is read as A[k*lda + i], i < M, k < K. */
void attn_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda,
                   const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += A[(int64_t)k * lda + i] * B[(int64_t)k * ldb + j];
            float *c = &C[(int64_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
    }
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&attn_sgemm; }
