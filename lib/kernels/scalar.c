#include "attn_config.h"
#include "kernels/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

float attn_exp_scalar(float x)
{
    if (x < -87.336544f)            /* also -INFINITY; NaN compares false */
        return 0.0f;
    if (x > 88.72283f)
        return INFINITY;
    float k = nearbyintf(x * 1.44269504088896341f);
    float r = x - k * 0.693359375f;
    r = r - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float e = p * r * r + r + 1.0f;
    if (isnan(e))
        return e;
    int32_t ki = (int32_t)k;
    /* 2^k for k in [-126, 128]: split so each factor stays normal. */
    int32_t k1 = ki / 2, k2 = ki - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float f1, f2;
    memcpy(&f1, &b1, sizeof f1);
    memcpy(&f2, &b2, sizeof f2);
    return e * f1 * f2;
}

static float max_c(const float *x, int64_t n)
{
    float m = -INFINITY;
    int nan = 0;
    for (int64_t j = 0; j < n; j++) {
        m = x[j] > m ? x[j] : m;
        nan |= x[j] != x[j];
    }
    return nan ? NAN : m;
}

static float prep_max_c(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop)
{
    if (bias)
        for (int64_t j = 0; j < n; j++)
            s[j] += bias[j];
    if (mask)
        for (int64_t j = 0; j < n; j++)
            if ((mask[j] != 0) == (drop != 0))
                s[j] = -INFINITY;
    return max_c(s, n);
}

static float exp_sum_c(float *x, int64_t n, float m)
{
    float s = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        x[j] = attn_exp_scalar(x[j] - m);
        s += x[j];
    }
    return s;
}

static void exp_store_c(float *dst, const float *src, int64_t n, float m)
{
    for (int64_t j = 0; j < n; j++)
        dst[j] = attn_exp_scalar(src[j] - m);
}

static void scale_c(float *x, int64_t n, float a)
{
    for (int64_t j = 0; j < n; j++)
        x[j] *= a;
}

const attn_kernels attn_kernels_scalar = {
    "scalar", max_c, prep_max_c, exp_sum_c, exp_store_c, scale_c,
};

const attn_kernels *attn_kernels_select(void)
{
    int cap = ATTN_SIMD_AVX512;
    const char *env = getenv("ATTN_SIMD");
    if (env) {
        if (!strcmp(env, "scalar")) cap = ATTN_SIMD_SCALAR;
        else if (!strcmp(env, "avx2")) cap = ATTN_SIMD_AVX2;
    }
#if ATTN_HAVE_X86_KERNELS
    /* libgcc's constructor has filled the CPU model before any call. */
    if (cap >= ATTN_SIMD_AVX512 && __builtin_cpu_supports("avx512f"))
        return &attn_kernels_avx512;
    if (cap >= ATTN_SIMD_AVX2 && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
        return &attn_kernels_avx2;
#endif
    (void)cap;
    return &attn_kernels_scalar;
}
