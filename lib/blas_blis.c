/* BLIS backend, through its typed expert interface: general row and column
 * strides, and a per-call runtime object asking for one thread, so nothing
 * process-wide is changed (no scope needed). */
#include "blas.h"
#include <blis.h>
#include <stdio.h>

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

void attn_blas_scope_enter(attn_blas_scope *state) { state->active = 0; state->saved = 0; }
void attn_blas_scope_leave(const attn_blas_scope *state) { (void)state; }

void attn_blas_describe(attn_blas_info *info)
{
    snprintf(info->version, sizeof info->version, "BLIS %s", bli_info_get_version_str());
    snprintf(info->kernel, sizeof info->kernel, "%s", bli_arch_string(bli_arch_query_id()));
    /* attn's calls always ask for one thread; report the library's build. */
    info->threading = bli_info_get_enable_openmp() ? ATTN_BLAS_THREADING_OPENMP
                    : bli_info_get_enable_pthreads() ? ATTN_BLAS_THREADING_PTHREADS
                    : ATTN_BLAS_THREADING_SEQUENTIAL;
}

void *attn_blas_entry_point(void) { return (void *)(uintptr_t)&bli_sgemm_ex; }
