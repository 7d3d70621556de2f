/* AVX2 + F16C conversions (this file alone is built with -mavx2 -mfma
 * -mf16c).  F16 goes through VCVTPH2PS / VCVTPS2PH, whose rounding comes
 * from the immediate (never MXCSR) and which ignore FTZ and DAZ; BF16 is
 * integer arithmetic on the bit patterns.  Tails go through a 16-element
 * buffer, so every element takes the vector path. */
#include "kernels/convert.h"
#include <immintrin.h>
#include <string.h>

static void f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (i < n) {
        uint16_t in[8] = { 0 };
        float out[8];
        memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
        _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)in)));
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

static void f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float in[8] = { 0 };
        uint16_t out[8];
        memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
        _mm_storeu_si128((__m128i *)out,
                         _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

static void bf16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++)
        dst[i] = attn_bf16_to_f32(src[i]);
}

/* Round to nearest even on the low 16 bits of each lane, NaN made quiet;
 * the result in the low half of each 32-bit lane (as attn_f32_to_bf16). */
static inline __m256i bf16_round8(__m256i x)
{
    const __m256i absx = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    /* abs is below 2^31, so the signed compare is the unsigned one. */
    const __m256i nan = _mm256_cmpgt_epi32(absx, _mm256_set1_epi32(0x7f800000));
    const __m256i hi = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x0040));
    return _mm256_blendv_epi8(r, q, nan);
}

/* 16 floats at src to 16 bf16 at dst. */
static inline void bf16_store16(const float *src, uint16_t *dst)
{
    __m256i a = bf16_round8(_mm256_castps_si256(_mm256_loadu_ps(src)));
    __m256i b = bf16_round8(_mm256_castps_si256(_mm256_loadu_ps(src + 8)));
    /* packus works per 128-bit lane (a0-3 b0-3 a4-7 b4-7); the permute puts
     * the quarters back in order.  No lane exceeds 0xffff: no saturation. */
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256((__m256i *)dst, p);
}

static void f32_to_bf16_avx2(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        bf16_store16(src + i, dst + i);
    if (i < n) {
        float in[16] = { 0 };
        uint16_t out[16];
        memcpy(in, src + i, (size_t)(n - i) * sizeof *in);
        bf16_store16(in, out);
        memcpy(dst + i, out, (size_t)(n - i) * sizeof *out);
    }
}

const attn_cvt_kernels attn_cvt_avx2 = {
    "avx2", f16_to_f32_avx2, bf16_to_f32_avx2, f32_to_f16_avx2, f32_to_bf16_avx2,
};
