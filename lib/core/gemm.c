/* The products of the attention core through one seam: the configured
 * BLAS (engine BLAS) or the tile engine's kernels (engine TILE).  Callers
 * pass the plan's kernel table, NULL for the BLAS. */
#include "core/core.h"
#include "kernels/gemm.h"

/* K^T panels of the B^T products: ATTN_GEMM_PANEL columns (rows of B) by
 * at most ATTN_GEMM_KMAX of K at a time, on the stack (32 KiB). */
#define ATTN_GEMM_PANEL 32
#define ATTN_GEMM_KMAX 256

void attn_gemm(const attn_gemm_kernels *gk, int trans_b, int M, int N, int K, float alpha,
               const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (!gk || (beta != 0.0f && beta != 1.0f)) {
        attn_sgemm(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (!trans_b) {
        gk->mm(M, N, K, alpha, NULL, A, lda, 1, B, ldb, C, ldc, beta != 0.0f, NULL);
        return;
    }
    float panel[ATTN_GEMM_PANEL * ATTN_GEMM_KMAX] __attribute__((aligned(64)));
    for (int j = 0; j < N; j += ATTN_GEMM_PANEL) {
        const int nj = N - j < ATTN_GEMM_PANEL ? N - j : ATTN_GEMM_PANEL;
        /* Past KMAX the sum runs in pieces, each added to C: within
         * rounding of one chain, and the same at every SIMD level. */
        int acc = beta != 0.0f, k = 0;
        do {
            const int nk = K - k < ATTN_GEMM_KMAX ? K - k : ATTN_GEMM_KMAX;
            gk->transpose(B + (int64_t)j * ldb + k, ldb, nj, nk, panel, nj);
            gk->mm(M, nj, nk, alpha, NULL, A + k, lda, 1, panel, nj, C + j, ldc, acc, NULL);
            acc = 1;
            k += ATTN_GEMM_KMAX;
        } while (k < K);
    }
}

void attn_gemm_tn(const attn_gemm_kernels *gk, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (!gk || (beta != 0.0f && beta != 1.0f)) {
        attn_sgemm_tn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gk->mm(M, N, K, alpha, NULL, A, 1, lda, B, ldb, C, ldc, beta != 0.0f, NULL);
}
