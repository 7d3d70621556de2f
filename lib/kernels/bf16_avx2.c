/* The BF16 products' mm on AVX2 + FMA (CPUs without AVX-512: Haswell to
 * Alder Lake, Zen 1 to 3): VDPBF16PS's arithmetic (bf16.h) as two fused
 * multiply-adds per pair, odd half first, under the MXCSR's DAZ and FTZ,
 * as the AVX-512F table does, so the same bits as the scalar table.  Blocks
 * of 4 rows x 16 columns (8 accumulators; B's pair row split into its
 * even and odd halves, 4 registers; A's pair broadcast, 2).  The table's
 * other kernels are the scalar ones (bf16.c builds it): they are O(n m)
 * where mm is O(n m d). */
#include "attn_config.h"
#include "kernels/bf16.h"
#include <immintrin.h>
#include <string.h>

#define MR 4

static inline uint32_t load_pair(const uint16_t *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

static inline __m256 hi_half(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xFFFF0000u)));
}

static inline __m256 lo_half(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* Lanes below n (0..8) on, as a maskload/maskstore mask. */
static inline __m256i lanes(int64_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

static inline __attribute__((always_inline)) void
block(const int mr, int64_t K, float alpha, const float *rs, const uint16_t *a, int64_t lda,
      const uint32_t *b, int64_t ldb, __m256i m0, __m256i m1, int two, float *c, int64_t ldc,
      int acc)
{
    __m256 x0[MR], x1[MR];
    for (int r = 0; r < mr; r++) {
        x0[r] = _mm256_setzero_ps();
        x1[r] = _mm256_setzero_ps();
    }
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);   /* FTZ | DAZ */
    const int64_t P = K / 2;
    for (int64_t p = 0; p <= P; p++) {
        if (p == P && !(K & 1))
            break;
        const uint32_t *bp = b + p * ldb;
        const __m256i b0 = _mm256_maskload_epi32((const int *)bp, m0);
        const __m256i b1 = two ? _mm256_maskload_epi32((const int *)(bp + 8), m1) : b0;
        const __m256 h0 = hi_half(b0), l0 = lo_half(b0), h1 = hi_half(b1), l1 = lo_half(b1);
        const uint16_t *ap = a + 2 * p;
        for (int r = 0; r < mr; r++) {
            /* The last pair of an odd K reads its one element. */
            const uint32_t w = p < P ? load_pair(ap + r * lda) : ap[r * lda];
            const __m256i av = _mm256_set1_epi32((int)w);
            const __m256 ah = hi_half(av), al = lo_half(av);
            x0[r] = _mm256_fmadd_ps(al, l0, _mm256_fmadd_ps(ah, h0, x0[r]));
            if (two)
                x1[r] = _mm256_fmadd_ps(al, l1, _mm256_fmadd_ps(ah, h1, x1[r]));
        }
    }
    _mm_setcsr(csr);
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        const __m256 al = _mm256_set1_ps(rs ? rs[r] : alpha);
        __m256 y0 = _mm256_mul_ps(al, x0[r]), y1 = _mm256_mul_ps(al, x1[r]);
        if (acc) {
            y0 = _mm256_fmadd_ps(al, x0[r], _mm256_maskload_ps(cr, m0));
            y1 = _mm256_fmadd_ps(al, x1[r], _mm256_maskload_ps(cr + 8, m1));
        }
        _mm256_maskstore_ps(cr, m0, y0);
        if (two)
            _mm256_maskstore_ps(cr + 8, m1, y1);
    }
}

#define ROWS(mr)                                                                            \
    case mr:                                                                                \
        block(mr, K, alpha, ri, ai, lda, bj, ldb, m0, m1, two, ci, ldc, acc);              \
        break;

void attn_bf16_mm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                       const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, attn_ahead *ah)
{
    for (int64_t j = 0; j < N; j += 16) {
        const int64_t nr = N - j < 16 ? N - j : 16;
        const __m256i m0 = lanes(nr < 8 ? nr : 8), m1 = lanes(nr > 8 ? nr - 8 : 0);
        const int two = nr > 8;
        const uint32_t *bj = b + j;
        /* Blocks of near-equal height, as in the other tables. */
        const int64_t nb = (M + MR - 1) / MR;
        for (int64_t bi = 0, i = 0; bi < nb; bi++) {
            const int64_t mr = M * (bi + 1) / nb - i;
            const uint16_t *ai = a + i * lda;
            const float *ri = rs ? rs + i : NULL;
            float *ci = c + i * ldc + j;
            if (ah)
                attn_ahead_step(ah);
            switch (mr) {
                ROWS(4) ROWS(3) ROWS(2) ROWS(1)
            }
            i += mr;
        }
    }
}
