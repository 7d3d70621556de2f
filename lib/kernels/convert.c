/* Portable fp32 <-> F16 / BF16 conversions and the choice of table.  Pure
 * integer code on the bit patterns: no floating-point operation is done, so
 * neither the rounding mode nor FTZ / DAZ can change a result, and these
 * are the reference every SIMD table must match bit for bit. */
#include "kernels/convert.h"
#include "kernels/kernels.h"
#include <stdlib.h>
#include <string.h>

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float attn_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f)  /* Inf, or a NaN made quiet as VCVTPH2PS does */
        return bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0));
    if (e != 0)     /* rebias 15 -> 127 */
        return bits_f32(sign | ((e + 112) << 23) | (m << 13));
    if (m == 0)
        return bits_f32(sign);
    /* Denormal m * 2^-24: the leading bit p (0..9) becomes the implicit
     * one, value 2^(p - 24). */
    const int p = 31 - __builtin_clz(m);
    return bits_f32(sign | ((uint32_t)(p - 24 + 127) << 23) | ((m << (23 - p)) & 0x7fffffu));
}

float attn_bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

uint16_t attn_f32_to_f16(float f)
{
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u | ((a & 0x7fffffu) >> 13));
    /* 65520 = 65504 + half an ulp (a tie, and 65504's mantissa is odd):
     * from there on everything rounds to Inf, Inf included. */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) {
        /* Normal result: rebias 127 -> 15 and drop 13 bits; a carry out of
         * the mantissa correctly bumps the exponent. */
        const uint32_t h = (a - 0x38000000u) >> 13, rem = a & 0x1fffu;
        return (uint16_t)(sign | (h + (rem > 0x1000u || (rem == 0x1000u && (h & 1)))));
    }
    /* |x| <= 2^-25 (half the smallest denormal, a tie going to the even 0)
     * gives zero; f32 denormals land here too. */
    if (a <= 0x33000000u)
        return sign;
    /* Denormal result in units of 2^-24: the significand m (with its
     * implicit bit) times 2^(e - 150 + 24), i.e. m >> (126 - e), shift in
     * [14, 24].  Rounding up to 0x400 gives the smallest normal, right. */
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, s = 126 - e;
    const uint32_t h = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
    return (uint16_t)(sign | (h + (rem > half || (rem == half && (h & 1)))));
}

uint16_t attn_f32_to_bf16(float f)
{
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x0040u);
    /* Round to nearest even on the low 16 bits; a carry runs into the
     * exponent, up to Inf for the largest values.  No NaN is left, so the
     * sum cannot wrap (at most 0xff800000 + 0x8000). */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static void f16_to_f32_c(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = attn_f16_to_f32(src[i]);
}

static void bf16_to_f32_c(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = attn_bf16_to_f32(src[i]);
}

static void f32_to_f16_c(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = attn_f32_to_f16(src[i]);
}

static void f32_to_bf16_c(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = attn_f32_to_bf16(src[i]);
}

const attn_cvt_kernels attn_cvt_scalar = {
    "scalar", f16_to_f32_c, bf16_to_f32_c, f32_to_f16_c, f32_to_bf16_c,
};

const attn_cvt_kernels *attn_cvt_at(int level)
{
#if ATTN_HAVE_X86_KERNELS
#if ATTN_HAVE_AVX512BF16
    if (level >= ATTN_SIMD_AVX512BF16)
        return &attn_cvt_avx512bf16;
#endif
    if (level >= ATTN_SIMD_AVX512)
        return &attn_cvt_avx512;
    if (level >= ATTN_SIMD_AVX2)
        return &attn_cvt_avx2;
#endif
    (void)level;
    return &attn_cvt_scalar;
}

const attn_cvt_kernels *attn_cvt_select(void)
{
    return attn_cvt_at(attn_settings_level());
}
