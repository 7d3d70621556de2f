/* The tile engine's portable C table (the reference of the SIMD ones), and
 * the run-time choice. */
#include "attn_config.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void mm_c(int64_t M, int64_t N, int64_t K, float alpha, const float *rs, const float *a,
                 int64_t ars, int64_t aks, const float *b, int64_t ldb, float *c, int64_t ldc,
                 int acc, attn_ahead *ah)
{
    for (int64_t r = 0; r < M; r++) {
        if (ah)
            attn_ahead_step(ah);
        const float *ar = a + r * ars;
        float *cr = c + r * ldc;
        const float al = rs ? rs[r] : alpha;
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++)
                s = fmaf(ar[k * aks], b[k * ldb + j], s);
            cr[j] = acc ? fmaf(al, s, cr[j]) : al * s;
        }
    }
}

static void transpose_c(const float *b, int64_t ldb, int64_t N, int64_t K, float *bt,
                        int64_t ldt)
{
    for (int64_t j = 0; j < N; j++)
        for (int64_t x = 0; x < K; x++)
            bt[x * ldt + j] = b[j * ldb + x];
}

const attn_gemm_kernels attn_gemm_scalar = { "scalar", mm_c, transpose_c };

const attn_gemm_kernels *attn_gemm_at(int level)
{
#if ATTN_HAVE_X86_KERNELS
    if (level >= ATTN_SIMD_AVX512)
        return &attn_gemm_avx512;
    if (level >= ATTN_SIMD_AVX2)
        return &attn_gemm_avx2;
#endif
    (void)level;
    return &attn_gemm_scalar;
}

int attn_gemm_tile_at(const attn_settings *s, int engine)
{
    if (engine == 1 || engine == 2)
        return engine == 2;
    if (s->engine)
        return s->engine == 2;
    return s->level >= ATTN_SIMD_AVX512;
}

const attn_gemm_kernels *attn_gemm_select(void)
{
    return attn_gemm_at(attn_settings_level());
}

int attn_gemm_use_tile(int engine)
{
    attn_settings s;
    attn_settings_read(&s);
    return attn_gemm_tile_at(&s, engine);
}
