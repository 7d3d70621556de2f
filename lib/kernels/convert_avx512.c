/* AVX-512F conversions (this file alone is built with -mavx512f -mavx2
 * -mfma -mf16c; the AVX512_BF16 function below enables that extension for
 * itself only).  F16 through VCVTPH2PS / VCVTPS2PH (rounding from the
 * immediate, FTZ and DAZ ignored); BF16 to fp32 by a shift, from fp32 by
 * integer round-to-nearest-even, or with AVX512_BF16's VCVTNEPS2BF16, whose
 * flushed denormals are redone with the integer method.  The 16-bit side
 * of a tail goes through a 16-element buffer (masked 16-bit moves need
 * AVX512BW), the fp32 side through masks. */
#include "kernels/convert.h"
#include <immintrin.h>
#include <string.h>

static inline __mmask16 tail16(int64_t r)
{
    return (__mmask16)((1u << r) - 1u);
}

static void f16_to_f32_avx512(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i,
                         _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    if (i < n) {
        uint16_t in[16] = { 0 };
        memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
        _mm512_mask_storeu_ps(dst + i, tail16(n - i),
                              _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)in)));
    }
}

static void f32_to_f16_avx512(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        uint16_t out[16];
        __m512 x = _mm512_maskz_loadu_ps(tail16(n - i), src + i);
        _mm256_storeu_si256((__m256i *)out, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

static void bf16_to_f32_avx512(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, _mm512_slli_epi32(w, 16));
    }
    if (i < n) {
        uint16_t in[16] = { 0 };
        memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)in));
        _mm512_mask_storeu_epi32(dst + i, tail16(n - i), _mm512_slli_epi32(w, 16));
    }
}

/* attn_f32_to_bf16 on 16 lanes, the result in the low half of each lane. */
static inline __m512i bf16_round16(__m512i x)
{
    const __m512i absx = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(absx, _mm512_set1_epi32(0x7f800000));
    const __m512i hi = _mm512_srli_epi32(x, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb), 16);
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x0040));
}

static void f32_to_bf16_avx512(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_castps_si512(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtepi32_epi16(bf16_round16(x)));
    }
    if (i < n) {
        uint16_t out[16];
        __m512i x = _mm512_castps_si512(_mm512_maskz_loadu_ps(tail16(n - i), src + i));
        _mm256_storeu_si256((__m256i *)out, _mm512_cvtepi32_epi16(bf16_round16(x)));
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

const attn_cvt_kernels attn_cvt_avx512 = {
    "avx512", f16_to_f32_avx512, bf16_to_f32_avx512, f32_to_f16_avx512, f32_to_bf16_avx512,
};

#if ATTN_HAVE_AVX512BF16
/* 16 lanes with VCVTNEPS2BF16.  It rounds to nearest even (whatever
 * MXCSR says) and quiets NaNs exactly as the integer method, but treats
 * denormal inputs as zero and flushes denormal results.  Lanes with a
 * nonzero input whose input or result has a zero exponent field are redone
 * with the integer method (a normal input never rounds to a denormal, so
 * the input test alone would do; the result test costs nothing and keeps
 * this right whatever the instruction's rules). */
__attribute__((target("avx512bf16")))
static inline __m256i bf16_hw16(__m512 v)
{
    const __m512i x = _mm512_castps_si512(v);
    const __m256bh hb = _mm512_cvtneps_pbh(v);
    __m256i h;
    memcpy(&h, &hb, sizeof h);
    const __m512i absx = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    const __m512i w = _mm512_cvtepu16_epi32(h);
    const __mmask16 nonzero = _mm512_test_epi32_mask(absx, absx);
    const __mmask16 den_in = _mm512_testn_epi32_mask(absx, _mm512_set1_epi32(0x7f800000));
    const __mmask16 den_out = _mm512_testn_epi32_mask(w, _mm512_set1_epi32(0x7f80));
    const __mmask16 redo = nonzero & (den_in | den_out);
    if (!redo)
        return h;
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(w, redo, bf16_round16(x)));
}

__attribute__((target("avx512bf16")))
static void f32_to_bf16_avx512bf16(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), bf16_hw16(_mm512_loadu_ps(src + i)));
    if (i < n) {
        uint16_t out[16];
        _mm256_storeu_si256((__m256i *)out,
                            bf16_hw16(_mm512_maskz_loadu_ps(tail16(n - i), src + i)));
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

const attn_cvt_kernels attn_cvt_avx512bf16 = {
    "avx512bf16", f16_to_f32_avx512, bf16_to_f32_avx512, f32_to_f16_avx512,
    f32_to_bf16_avx512bf16,
};
#endif
