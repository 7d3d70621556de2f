/* AVX-512F row kernels (this file alone is built with -mavx512f -mfma). */
#include "attn_config.h"
#include "kernels/kernels.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.336544f);
    const __m512 hi = _mm512_set1_ps(88.72283f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);  /* false for NaN */
    __mmask16 over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    /* max(lo, x) returns x when x is NaN, so NaN propagates. */
    __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 e = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    e = _mm512_scalef_ps(e, k);
    e = _mm512_mask_mov_ps(e, over, _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(e, under, _mm512_setzero_ps());
}

static inline __mmask16 tail16(int64_t r)
{
    return (__mmask16)((1u << r) - 1u);
}

/* max_ps drops a NaN operand, so NaNs are tracked on the side: the max of
 * a row holding a NaN is NaN, as in the C table. */
static float max_avx512(const float *x, int64_t n)
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
    return nan ? NAN : _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

static float prep_max_avx512(float *s, int64_t n, const float *bias, const uint8_t *mask,
                             int drop)
{
    if (!bias && !mask)
        return max_avx512(s, n);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf;
    __mmask16 nan = 0;
    int64_t j = 0;
    for (; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : tail16(n - j);
        __m512 x = _mm512_maskz_loadu_ps(k, s + j);
        if (bias)
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, bias + j));
        if (mask) {
            __m128i bytes;
            if (k == 0xFFFF) {
                bytes = _mm_loadu_si128((const __m128i *)(const void *)(mask + j));
            } else {
                uint8_t tmp[16] = { 0 };
                memcpy(tmp, mask + j, (size_t)(n - j));
                bytes = _mm_loadu_si128((const __m128i *)(const void *)tmp);
            }
            __m512i wide = _mm512_cvtepu8_epi32(bytes);
            __mmask16 nz = _mm512_test_epi32_mask(wide, wide);
            x = _mm512_mask_mov_ps(x, drop ? nz : (__mmask16)~nz, ninf);
        }
        _mm512_mask_storeu_ps(s + j, k, x);
        m0 = _mm512_mask_max_ps(m0, k, m0, x);
        nan |= _mm512_mask_cmp_ps_mask(k, x, x, _CMP_UNORD_Q);
    }
    return nan ? NAN : _mm512_reduce_max_ps(m0);
}

static float exp_sum_avx512(float *x, int64_t n, float m)
{
    __m512 vm = _mm512_set1_ps(m);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
        __m512 b = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm));
        _mm512_storeu_ps(x + j, a);
        _mm512_storeu_ps(x + j + 16, b);
        s0 = _mm512_add_ps(s0, a);
        s1 = _mm512_add_ps(s1, b);
    }
    for (; j + 16 <= n; j += 16) {
        __m512 a = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm));
        _mm512_storeu_ps(x + j, a);
        s0 = _mm512_add_ps(s0, a);
    }
    if (j < n) {
        __mmask16 k = tail16(n - j);
        __m512 a = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), vm));
        a = _mm512_maskz_mov_ps(k, a);
        _mm512_mask_storeu_ps(x + j, k, a);
        s1 = _mm512_add_ps(s1, a);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

static void exp_store_avx512(float *dst, const float *src, int64_t n, float m)
{
    __m512 vm = _mm512_set1_ps(m);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(dst + j, exp16(_mm512_sub_ps(_mm512_loadu_ps(src + j), vm)));
    if (j < n) {
        __mmask16 k = tail16(n - j);
        _mm512_mask_storeu_ps(dst + j, k,
                              exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, src + j), vm)));
    }
}

static void scale_avx512(float *x, int64_t n, float a)
{
    __m512 va = _mm512_set1_ps(a);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), va));
    if (j < n) {
        __mmask16 k = tail16(n - j);
        _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), va));
    }
}

const attn_kernels attn_kernels_avx512 = {
    "avx512", max_avx512, prep_max_avx512, exp_sum_avx512, exp_store_avx512, scale_avx512,
};
