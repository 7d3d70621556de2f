/* The AVX-512 softmax pieces shared by kernels/avx512.c (the AVX-512
 * table) and kernels/softmax_avx512bf16.c (its softmax_rows_p16 with
 * VCVTNEPS2BF16, ATTN_SOFTMAX_BF16_UNIT defined): exp16, the reductions,
 * the row max, the exp pass and the 16-row online-softmax step.  Include
 * only from files built with AVX-512F (and BW, VL). */
#ifndef ATTN_SOFTMAX_AVX512_H
#define ATTN_SOFTMAX_AVX512_H

#include "kernels/kernels.h"
#include "kernels/softmax_rows.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

/* The steps of attn_exp_scalar, 2^(j/16) by a permute of the table (it
 * reads the low 4 bits of each lane of t) and 2^k by scalef (which takes
 * floor(y) = k).  Lanes below lo become 0 through scalef's zeroing mask
 * (their arithmetic, even on -inf, is discarded); min(hi, x) returns x
 * when x is NaN, so NaN propagates; above log(FLT_MAX) scalef overflows to
 * inf.  13 vector operations, 8 of them on the FMA pipes.  exp_sum's x is
 * s - m with m at least every s (kernels.h), so never +inf: there min(hi,
 * x) would be x itself, and open is 1 to leave it out (the same bits, and
 * exp_sum 1.15x faster on this CPU: it sits on the chain every lane
 * waits on). */
static inline __attribute__((always_inline)) __m512 exp16(__m512 tab16, __m512 x, const int open)
{
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.336544f), _CMP_NLT_UQ);
    const __m512 magic = _mm512_set1_ps(786432.0f);
    const __m512 xc = open ? x : _mm512_min_ps(_mm512_set1_ps(100.0f), x);
    const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), magic);
    const __m512 y = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_fnmadd_ps(y, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(y, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512 q = _mm512_mul_ps(p, r);
    const __m512 tab = _mm512_permutexvar_ps(_mm512_castps_si512(t), tab16);
    return _mm512_maskz_scalef_ps(keep, _mm512_fmadd_ps(tab, q, tab), y);
}

static inline __mmask16 tail16(int64_t r)
{
    return (__mmask16)((1u << r) - 1u);
}

/* The horizontal sum or max of a vector: lane i with lane i + 8, then with
 * i + 4, i + 2 and i + 1, each op taking (upper, lower) in the first two
 * steps as GCC's _mm512_reduce_add_ps does.  reduce16 below pairs the lanes
 * of 16 vectors the same way, so a row's sum or max has the same bits
 * whichever of the two took it. */
enum { RED_ADD, RED_MAX };

static inline __attribute__((always_inline)) __m512 op16(__m512 a, __m512 b, const int op)
{
    return op == RED_MAX ? _mm512_max_ps(a, b) : _mm512_add_ps(a, b);
}

static inline __attribute__((always_inline)) __m128 op4(__m128 a, __m128 b, const int op)
{
    return op == RED_MAX ? _mm_max_ps(a, b) : _mm_add_ps(a, b);
}

static inline __attribute__((always_inline)) float hred16(__m512 v, const int op)
{
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 a = op == RED_MAX ? _mm256_max_ps(hi, lo) : _mm256_add_ps(hi, lo);
    const __m128 b = op4(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a), op);
    const __m128 c = op4(b, _mm_movehl_ps(b, b), op);
    return _mm_cvtss_f32(op4(c, _mm_movehdup_ps(c), op));
}

/* Sixteen vectors' reductions in one pass of shuffles (v is overwritten):
 * row r's result lands in out[4 (r % 4) + r / 4]. */
static inline __attribute__((always_inline)) void reduce16(__m512 v[16], float out[16],
                                                          const int op)
{
    for (int p = 0; p < 8; p++) {   /* i with i + 8: rows 2p | 2p + 1 */
        const __m512 a = v[2 * p], b = v[2 * p + 1];
        v[p] = op16(_mm512_shuffle_f32x4(a, b, 0xEE), _mm512_shuffle_f32x4(a, b, 0x44), op);
    }
    for (int p = 0; p < 4; p++) {   /* i with i + 4: a row per 128-bit lane */
        const __m512 a = v[2 * p], b = v[2 * p + 1];
        v[p] = op16(_mm512_shuffle_f32x4(a, b, 0xDD), _mm512_shuffle_f32x4(a, b, 0x88), op);
    }
    for (int p = 0; p < 2; p++) {   /* i with i + 2 */
        const __m512 a = v[2 * p], b = v[2 * p + 1];
        v[p] = op16(_mm512_shuffle_ps(a, b, 0x44), _mm512_shuffle_ps(a, b, 0xEE), op);
    }
    _mm512_storeu_ps(out, op16(_mm512_shuffle_ps(v[0], v[1], 0x88),   /* i with i + 1 */
                               _mm512_shuffle_ps(v[0], v[1], 0xDD), op));
}

/* max_ps drops a NaN operand, so NaNs are tracked on the side (*nan): the
 * max of a row holding a NaN is NaN, as in the C table. */
static inline __attribute__((always_inline)) __m512 max_vec(const float *x, int64_t n,
                                                           __mmask16 *nanp)
{
    __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
    __mmask16 nan = 0;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + j + 16);
        m0 = _mm512_max_ps(m0, a);
        m1 = _mm512_max_ps(m1, b);
        nan |= _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
    }
    for (; j + 16 <= n; j += 16) {
        __m512 a = _mm512_loadu_ps(x + j);
        m0 = _mm512_max_ps(m0, a);
        nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    }
    if (j < n) {
        __m512 a = _mm512_maskz_loadu_ps(tail16(n - j), x + j);
        m1 = _mm512_mask_max_ps(m1, tail16(n - j), m1, a);
        nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    }
    *nanp = nan;
    return _mm512_max_ps(m0, m1);
}

/* Round 16 floats to BF16 (attn_f32_to_bf16's integer rule; NaN quiet).
 * With ATTN_SOFTMAX_BF16_UNIT (a file built with AVX512_BF16):
 * VCVTNEPS2BF16, the same rule but for denormal inputs, which it flushes;
 * a group holding one goes the integer way. */
static inline __m256i bf16_of_int(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
    return _mm512_cvtepi32_epi16(r);
}

static inline __attribute__((always_inline)) __m256i bf16_of(__m512 x)
{
#ifdef ATTN_SOFTMAX_BF16_UNIT
    const __m512i u = _mm512_castps_si512(x);
    const __mmask16 den = _mm512_mask_test_epi32_mask(
        _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000)), u,
        _mm512_set1_epi32(0x007FFFFF));
    if (den)
        return bf16_of_int(x);
    __m256bh h = _mm512_cvtneps_pbh(x);
    __m256i r;
    memcpy(&r, &h, sizeof r);
    return r;
#else
    return bf16_of_int(x);
#endif
}

/* exp(x[j] - m) into x (p16: as BF16 at (uint16_t *)x, in place front to
 * back; every group is read before it is written) and the vector of their
 * partial sums (of the fp32 values). */
static inline __attribute__((always_inline)) __m512 exp_vec_to(__m512 tab16, float *x, int64_t n,
                                                              float m, const int p16)
{
    __m512 vm = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    uint16_t *h = (uint16_t *)(void *)x;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m512 a = exp16(tab16, _mm512_sub_ps(_mm512_loadu_ps(x + j), vm), 1);
        __m512 b = exp16(tab16, _mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm), 1);
        if (p16) {
#ifdef ATTN_SOFTMAX_BF16_UNIT
            /* 32 at once: exp's values are 0 or at least FLT_MIN (never
             * denormal, kernels.h), where VCVTNE2PS2BF16's rounding is
             * the integer rule's */
            const __m512bh hb = _mm512_cvtne2ps_pbh(b, a);
            memcpy(h + j, &hb, sizeof hb);
#else
            _mm256_storeu_si256((__m256i *)(void *)(h + j), bf16_of(a));
            _mm256_storeu_si256((__m256i *)(void *)(h + j + 16), bf16_of(b));
#endif
        } else {
            _mm512_storeu_ps(x + j, a);
            _mm512_storeu_ps(x + j + 16, b);
        }
        s0 = _mm512_add_ps(s0, a);
        s1 = _mm512_add_ps(s1, b);
    }
    for (; j + 16 <= n; j += 16) {
        __m512 a = exp16(tab16, _mm512_sub_ps(_mm512_loadu_ps(x + j), vm), 1);
        if (p16)
            _mm256_storeu_si256((__m256i *)(void *)(h + j), bf16_of(a));
        else
            _mm512_storeu_ps(x + j, a);
        s0 = _mm512_add_ps(s0, a);
    }
    if (j < n) {
        __mmask16 k = tail16(n - j);
        __m512 a = exp16(tab16, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vm), 1);
        a = _mm512_maskz_mov_ps(k, a);
        if (p16) {
            /* (16-bit masked stores need AVX512BW: through a buffer) */
            uint16_t t[16];
            _mm256_storeu_si256((__m256i *)(void *)t, bf16_of(a));
            memcpy(h + j, t, (size_t)(n - j) * sizeof *t);
        } else {
            _mm512_mask_storeu_ps(x + j, k, a);
        }
        s1 = _mm512_add_ps(s1, a);
    }
    return _mm512_add_ps(s0, s1);
}

/* The steps of attn_softmax_rows_with, 16 rows at a time: their maxima,
 * then their exps, each group's horizontal reductions taken together by
 * reduce16.  A row of 64 scores is only four vectors; one row at a time,
 * its two reductions' chains of shuffles were half of exp_sum's time on
 * S7.  Each row's result has the same bits as row_max and exp_sum give. */
static inline __attribute__((always_inline)) void
softmax_rows_to(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l, float *corr,
                const int p16)
{
    const __m512 tab16 = _mm512_loadu_ps(attn_exp2_16);
    /* m' and c: read only for live rows; zeroed once per call (as in
     * softmax_rows_avx2) so that -Wmaybe-uninitialized sees them set. */
    float mnew[16] = { 0 }, c[16] = { 0 };
    for (int64_t r0 = 0; r0 < R; r0 += 16) {
        const int g = R - r0 < 16 ? (int)(R - r0) : 16;
        float *s0 = s + r0 * lds, *m0 = m + r0, *l0 = l + r0, *c0 = corr + r0;
        __m512 v[16];
        float red[16];
        unsigned nanrows = 0, live = 0;
        for (int i = 0; i < g; i++) {
            __mmask16 nan;
            v[i] = max_vec(s0 + i * lds, n, &nan);
            nanrows |= (unsigned)(nan != 0) << i;
        }
        for (int i = g; i < 16; i++)
            v[i] = _mm512_setzero_ps();
        reduce16(v, red, RED_MAX);
        for (int i = 0; i < g; i++) {
            const float mt = nanrows >> i & 1u ? NAN : red[4 * (i % 4) + i / 4];
            v[i] = _mm512_setzero_ps();
            if (attn_softmax_row_begin(s0 + i * lds, n, mt, m0 + i, l0 + i, c0 + i, &mnew[i],
                                       &c[i])) {
                v[i] = exp_vec_to(tab16, s0 + i * lds, n, mnew[i], p16);
                live |= 1u << i;
            }
        }
        reduce16(v, red, RED_ADD);
        for (int i = 0; i < g; i++)
            if (live >> i & 1u)
                attn_softmax_row_end(m0 + i, l0 + i, c0 + i, mnew[i], c[i],
                                     red[4 * (i % 4) + i / 4]);
    }
}

#endif
