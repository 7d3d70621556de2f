/* The tile engine's AVX-512 table: blocks of 12 rows x 32 columns (24
 * accumulators), A broadcast from memory in place, B rows loaded (masked at
 * the right edge).  Each element is one FMA chain in k order from 0, as in
 * the C table (gemm.c), so the bits are the same. */
#include "attn_config.h"
#include "kernels/gemm.h"
#include "kernels/tr16_avx512.h"
#include <immintrin.h>

#define MR 12

static inline __attribute__((always_inline)) void
block(const int mr, const int two, int64_t K, float alpha, const float *rs, const float *a,
      int64_t ars, int64_t aks, const float *b, int64_t ldb, __mmask16 m0, __mmask16 m1,
      float *c, int64_t ldc, int acc)
{
    __m512 x0[MR], x1[MR];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++) {
        x0[r] = _mm512_setzero_ps();
        x1[r] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; k++) {
        const float *bk = b + k * ldb, *ak = a + k * aks;
        const __m512 b0 = _mm512_maskz_loadu_ps(m0, bk);
        const __m512 b1 = two ? _mm512_maskz_loadu_ps(m1, bk + 16) : b0;
        _Pragma("GCC unroll 16")
        for (int r = 0; r < mr; r++) {
            const __m512 av = _mm512_set1_ps(ak[r * ars]);
            x0[r] = _mm512_fmadd_ps(av, b0, x0[r]);
            if (two)
                x1[r] = _mm512_fmadd_ps(av, b1, x1[r]);
        }
    }
    const __m512 alv = _mm512_set1_ps(alpha);
    _Pragma("GCC unroll 16")
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        const __m512 al = rs ? _mm512_set1_ps(rs[r]) : alv;
        if (acc) {
            _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(al, x0[r], _mm512_maskz_loadu_ps(m0, cr)));
            if (two)
                _mm512_mask_storeu_ps(cr + 16, m1,
                                      _mm512_fmadd_ps(al, x1[r], _mm512_maskz_loadu_ps(m1, cr + 16)));
        } else {
            _mm512_mask_storeu_ps(cr, m0, _mm512_mul_ps(al, x0[r]));
            if (two)
                _mm512_mask_storeu_ps(cr + 16, m1, _mm512_mul_ps(al, x1[r]));
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

static void mm_avx512(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                      const float *a, int64_t ars, int64_t aks, const float *b, int64_t ldb,
                      float *c, int64_t ldc, int acc, attn_ahead *ah)
{
    for (int64_t j = 0; j < N; j += 32) {
        const int64_t nr = N - j < 32 ? N - j : 32;
        const __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1);
        const __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF
                           : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : (__mmask16)0;
        const int two = nr > 16;
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
                ROWS(12) ROWS(11) ROWS(10) ROWS(9) ROWS(8) ROWS(7)
                ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
            }
            i += mr;
        }
    }
}

static void transpose_avx512(const float *b, int64_t ldb, int64_t N, int64_t K, float *bt,
                             int64_t ldt)
{
    const int64_t N16 = N & ~(int64_t)15, K16 = K & ~(int64_t)15;
    for (int64_t j = 0; j < N16; j += 16)
        for (int64_t x = 0; x < K16; x += 16)
            tr16(b + j * ldb + x, ldb, bt + x * ldt + j, ldt);
    for (int64_t j = 0; j < N; j++)
        for (int64_t x = j < N16 ? K16 : 0; x < K; x++)
            bt[x * ldt + j] = b[j * ldb + x];
}

const attn_gemm_kernels attn_gemm_avx512 = { "avx512", mm_avx512, transpose_avx512 };
