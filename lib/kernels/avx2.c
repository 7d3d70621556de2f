/* AVX2 + FMA row kernels (this file alone is built with -mavx2 -mfma). */
#include "attn_config.h"
#include "kernels/kernels.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.336544f);
    const __m256 hi = _mm256_set1_ps(88.72283f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);   /* false for NaN */
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    /* max(lo, x) returns x when x is NaN, so NaN propagates. */
    __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 e = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    /* 2^k as two normal factors (k in [-126, 128]). */
    __m256i ki = _mm256_cvtps_epi32(k);
    __m256i k1 = _mm256_srai_epi32(ki, 1);
    __m256i k2 = _mm256_sub_epi32(ki, k1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    e = _mm256_mul_ps(_mm256_mul_ps(e, f1), f2);
    e = _mm256_blendv_ps(e, _mm256_set1_ps(INFINITY), over);
    return _mm256_andnot_ps(under, e);
}

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static inline __m256i tail_mask(int64_t r)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* max_ps drops a NaN operand, so NaNs are tracked on the side: the max of
 * a row holding a NaN is NaN, as in the C table. */
static float max_avx2(const float *x, int64_t n)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, nan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + 8);
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    }
    for (; j + 8 <= n; j += 8) {
        __m256 a = _mm256_loadu_ps(x + j);
        m0 = _mm256_max_ps(m0, a);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    }
    if (j < n) {
        __m256i k = tail_mask(n - j);
        __m256 v = _mm256_maskload_ps(x + j, k);
        v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(k));
        m1 = _mm256_max_ps(m1, v);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    return _mm256_movemask_ps(nan) ? NAN : hmax8(_mm256_max_ps(m0, m1));
}

static float prep_max_avx2(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop)
{
    if (!bias && !mask)
        return max_avx2(s, n);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i zero = _mm256_setzero_si256();
    __m256 m0 = ninf, nan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(s + j);
        if (bias)
            x = _mm256_add_ps(x, _mm256_loadu_ps(bias + j));
        if (mask) {
            int64_t bytes;
            memcpy(&bytes, mask + j, sizeof bytes);
            __m256i mz = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes)), zero);
            /* hidden: nonzero when drop, zero when keep */
            __m256 hide = _mm256_castsi256_ps(drop ? _mm256_xor_si256(mz, _mm256_set1_epi32(-1)) : mz);
            x = _mm256_blendv_ps(x, ninf, hide);
        }
        _mm256_storeu_ps(s + j, x);
        m0 = _mm256_max_ps(m0, x);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    float m = hmax8(m0);
    int any_nan = _mm256_movemask_ps(nan) != 0;
    for (; j < n; j++) {
        float x = s[j];
        if (bias)
            x += bias[j];
        if (mask && (mask[j] != 0) == (drop != 0))
            x = -INFINITY;
        s[j] = x;
        m = x > m ? x : m;
        any_nan |= x != x;
    }
    return any_nan ? NAN : m;
}

static float exp_sum_avx2(float *x, int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        __m256 b = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm));
        _mm256_storeu_ps(x + j, a);
        _mm256_storeu_ps(x + j + 8, b);
        s0 = _mm256_add_ps(s0, a);
        s1 = _mm256_add_ps(s1, b);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 a = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm));
        _mm256_storeu_ps(x + j, a);
        s0 = _mm256_add_ps(s0, a);
    }
    if (j < n) {
        __m256i k = tail_mask(n - j);
        __m256 a = exp8(_mm256_sub_ps(_mm256_maskload_ps(x + j, k), vm));
        a = _mm256_and_ps(a, _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(x + j, k, a);
        s1 = _mm256_add_ps(s1, a);
    }
    return hsum8(_mm256_add_ps(s0, s1));
}

static void exp_store_avx2(float *dst, const float *src, int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, exp8(_mm256_sub_ps(_mm256_loadu_ps(src + j), vm)));
    if (j < n) {
        __m256i k = tail_mask(n - j);
        _mm256_maskstore_ps(dst + j, k,
                            exp8(_mm256_sub_ps(_mm256_maskload_ps(src + j, k), vm)));
    }
}

static void scale_avx2(float *x, int64_t n, float a)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), va));
    if (j < n) {
        __m256i k = tail_mask(n - j);
        _mm256_maskstore_ps(x + j, k, _mm256_mul_ps(_mm256_maskload_ps(x + j, k), va));
    }
}

const attn_kernels attn_kernels_avx2 = {
    "avx2", max_avx2, prep_max_avx2, exp_sum_avx2, exp_store_avx2, scale_avx2,
};
