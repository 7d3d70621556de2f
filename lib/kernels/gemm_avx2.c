/* The tile engine's AVX2 table: blocks of 6 rows x 16 columns (12
 * accumulators), A broadcast from memory in place, B rows loaded (masked at
 * the right edge).  Each element is one FMA chain in k order from 0, as in
 * the C table (gemm.c), so the bits are the same. */
#include "attn_config.h"
#include "kernels/gemm.h"
#include <immintrin.h>

#define MR 6

static inline __attribute__((always_inline)) void
block(const int mr, const int two, int64_t K, float alpha, const float *rs, const float *a,
      int64_t ars, int64_t aks, const float *b, int64_t ldb, __m256i m0, __m256i m1, float *c,
      int64_t ldc, int acc)
{
    __m256 x0[MR], x1[MR];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++) {
        x0[r] = _mm256_setzero_ps();
        x1[r] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < K; k++) {
        const float *bk = b + k * ldb, *ak = a + k * aks;
        const __m256 b0 = _mm256_maskload_ps(bk, m0);
        const __m256 b1 = two ? _mm256_maskload_ps(bk + 8, m1) : b0;
        _Pragma("GCC unroll 16")
        for (int r = 0; r < mr; r++) {
            const __m256 av = _mm256_broadcast_ss(ak + r * ars);
            x0[r] = _mm256_fmadd_ps(av, b0, x0[r]);
            if (two)
                x1[r] = _mm256_fmadd_ps(av, b1, x1[r]);
        }
    }
    const __m256 alv = _mm256_set1_ps(alpha);
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        const __m256 al = rs ? _mm256_set1_ps(rs[r]) : alv;
        if (acc) {
            _mm256_maskstore_ps(cr, m0, _mm256_fmadd_ps(al, x0[r], _mm256_maskload_ps(cr, m0)));
            if (two)
                _mm256_maskstore_ps(cr + 8, m1,
                                    _mm256_fmadd_ps(al, x1[r], _mm256_maskload_ps(cr + 8, m1)));
        } else {
            _mm256_maskstore_ps(cr, m0, _mm256_mul_ps(al, x0[r]));
            if (two)
                _mm256_maskstore_ps(cr + 8, m1, _mm256_mul_ps(al, x1[r]));
        }
    }
}

#define ROWS(mr)                                                                            \
    case mr:                                                                                \
        if (two)                                                                            \
            block(mr, 1, K, alpha, ri, ai, ars, aks, bj, ldb, m0, m1, ci, ldc, acc);       \
        else                                                                                \
            block(mr, 0, K, alpha, ri, ai, ars, aks, bj, ldb, m0, m1, ci, ldc, acc);       \
        break;

static void mm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                    const float *a, int64_t ars, int64_t aks, const float *b, int64_t ldb,
                    float *c, int64_t ldc, int acc, attn_ahead *ah)
{
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t j = 0; j < N; j += 16) {
        const int nr = N - j < 16 ? (int)(N - j) : 16;
        const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), iota);
        const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), iota);
        const int two = nr > 8;
        const float *bj = b + j;
        /* ceil(M / MR) blocks whose heights differ by one at most, not a
         * short last block, which would run the FMA units at a fraction
         * of their rate (197 rows: 11 and 12, not 16 x 12 + 5). */
        const int64_t nb = (M + MR - 1) / MR;
        for (int64_t bi = 0, i = 0; bi < nb; bi++) {
            const int64_t mr = M * (bi + 1) / nb - i;
            const float *ai = a + i * ars;
            const float *ri = rs ? rs + i : NULL;
            float *ci = c + i * ldc + j;
            if (ah)
                attn_ahead_step(ah);
            switch (mr) {
                ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
            }
            i += mr;
        }
    }
}

/* 8 x 8 in registers: rows become columns. */
static inline void tr8(const float *src, int64_t lds, float *dst, int64_t ldd)
{
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(src + i * lds);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 2; g++) {
        u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_ps(dst + q * ldd, _mm256_permute2f128_ps(u[q], u[4 + q], 0x20));
        _mm256_storeu_ps(dst + (q + 4) * ldd, _mm256_permute2f128_ps(u[q], u[4 + q], 0x31));
    }
}

static void transpose_avx2(const float *b, int64_t ldb, int64_t N, int64_t K, float *bt,
                           int64_t ldt)
{
    const int64_t N8 = N & ~(int64_t)7, K8 = K & ~(int64_t)7;
    for (int64_t j = 0; j < N8; j += 8)
        for (int64_t x = 0; x < K8; x += 8)
            tr8(b + j * ldb + x, ldb, bt + x * ldt + j, ldt);
    for (int64_t j = 0; j < N; j++)
        for (int64_t x = j < N8 ? K8 : 0; x < K; x++)
            bt[x * ldt + j] = b[j * ldb + x];
}

const attn_gemm_kernels attn_gemm_avx2 = { "avx2", mm_avx2, transpose_avx2 };
