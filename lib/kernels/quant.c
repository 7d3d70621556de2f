/* Quantizing and de-quantizing Q8_0 and Q4_0 blocks (kernels/quant.h).
 * Quantizing runs on appends of a few rows and whole-tensor conversions, so
 * it is plain C: each step is the one fp32 operation of ggml's reference
 * quantizers (this file is built without contraction of a x b + c, as the
 * whole library, so none of them fuse).  De-quantizing here serves the
 * sgemm path's tiles and attn_dequantize; the decode kernels do the same in
 * registers. */
#include "kernels/quant.h"
#include "kernels/convert.h"
#include <math.h>
#include <pthread.h>
#include <string.h>

/* The scale and quants of a block holding a NaN or an infinity. */
enum { NAN_SCALE = 0x7E00 };

static void put_scale(uint8_t *blk, uint16_t h)
{
    blk[0] = (uint8_t)(h & 0xFF);
    blk[1] = (uint8_t)(h >> 8);
}

static float get_scale(const uint8_t *blk)
{
    return attn_f16_to_f32((uint16_t)(blk[0] | (blk[1] << 8)));
}

static int finite_block(const float *x)
{
    for (int i = 0; i < ATTN_QBLOCK; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

void attn_quantize_q8_0(const float *src, void *dst, int64_t n)
{
    uint8_t *blk = dst;
    for (int64_t b = 0; b < n / ATTN_QBLOCK; b++, blk += ATTN_Q8_0_BYTES) {
        const float *x = src + b * ATTN_QBLOCK;
        int8_t *q = (int8_t *)(blk + 2);
        if (!finite_block(x)) {
            put_scale(blk, NAN_SCALE);
            memset(q, 0, ATTN_QBLOCK);
            continue;
        }
        float amax = 0.0f;
        for (int i = 0; i < ATTN_QBLOCK; i++) {
            const float a = fabsf(x[i]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_scale(blk, attn_f32_to_f16(d));
        /* |x id| <= 127 after rounding, except where 1 / d overflowed
         * (0 < d <= 2^-128): then x id is +-Inf or NaN (0 x Inf), whose
         * conversion to an integer C leaves undefined; q 0 there (attn.h;
         * what cvttss2si's indefinite value gave on x86-64).  The scale
         * is a binary16 zero then, so the block reads back as zeros. */
        for (int i = 0; i < ATTN_QBLOCK; i++) {
            const float r = roundf(x[i] * id);
            q[i] = isfinite(r) ? (int8_t)r : 0;
        }
    }
}

void attn_quantize_q4_0(const float *src, void *dst, int64_t n)
{
    uint8_t *blk = dst;
    for (int64_t b = 0; b < n / ATTN_QBLOCK; b++, blk += ATTN_Q4_0_BYTES) {
        const float *x = src + b * ATTN_QBLOCK;
        uint8_t *q = blk + 2;
        if (!finite_block(x)) {
            put_scale(blk, NAN_SCALE);
            memset(q, 0x88, ATTN_QBLOCK / 2);
            continue;
        }
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < ATTN_QBLOCK; i++)
            if (amax < fabsf(x[i])) {
                amax = fabsf(x[i]);
                max = x[i];
            }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        put_scale(blk, attn_f32_to_f16(d));
        for (int j = 0; j < ATTN_QBLOCK / 2; j++) {
            /* x id is in [-8, 8], so x id + 8.5 in [0.5, 16.5]: the
             * truncation is a floor and fits.  Except where 1 / d
             * overflowed (0 < |d| <= 2^-128): +-Inf or NaN, whose conversion
             * C leaves undefined; the nibble 0 there (attn.h; what x86-64
             * gave before; the scale is a binary16 zero). */
            const float f0 = x[j] * id + 8.5f, f1 = x[j + 16] * id + 8.5f;
            const int lo = isfinite(f0) ? (int)f0 : 0, hi = isfinite(f1) ? (int)f1 : 0;
            q[j] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
        }
    }
}

void attn_dequantize_q8_0(const void *src, float *dst, int64_t n)
{
    const uint8_t *blk = src;
    for (int64_t b = 0; b < n / ATTN_QBLOCK; b++, blk += ATTN_Q8_0_BYTES) {
        const float d = get_scale(blk);
        const int8_t *q = (const int8_t *)(blk + 2);
        for (int i = 0; i < ATTN_QBLOCK; i++)
            dst[b * ATTN_QBLOCK + i] = (float)q[i] * d;
    }
}

void attn_dequantize_q4_0(const void *src, float *dst, int64_t n)
{
    const uint8_t *blk = src;
    for (int64_t b = 0; b < n / ATTN_QBLOCK; b++, blk += ATTN_Q4_0_BYTES) {
        const float d = get_scale(blk);
        const uint8_t *q = blk + 2;
        for (int j = 0; j < ATTN_QBLOCK / 2; j++) {
            dst[b * ATTN_QBLOCK + j] = (float)((q[j] & 0xF) - 8) * d;
            dst[b * ATTN_QBLOCK + j + 16] = (float)((q[j] >> 4) - 8) * d;
        }
    }
}

void attn_store_values(const struct attn_cvt_kernels *cvt, int st, const float *src, void *dst,
                       int64_t n)
{
    switch (st) {
    case 0: memmove(dst, src, (size_t)n * sizeof(float)); break;
    case 1: cvt->f32_to_f16(src, dst, n); break;
    case 2: cvt->f32_to_bf16(src, dst, n); break;
    case 3: attn_quantize_q8_0(src, dst, n); break;
    default: attn_quantize_q4_0(src, dst, n); break;
    }
}

void attn_load_values(const struct attn_cvt_kernels *cvt, int st, const void *src, float *dst,
                      int64_t n)
{
    switch (st) {
    case 0: memmove(dst, src, (size_t)n * sizeof(float)); break;
    case 1: cvt->f16_to_f32(src, dst, n); break;
    case 2: cvt->bf16_to_f32(src, dst, n); break;
    case 3: attn_dequantize_q8_0(src, dst, n); break;
    default: attn_dequantize_q4_0(src, dst, n); break;
    }
}

float attn_f16_values[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_build(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        attn_f16_values[h] = attn_f16_to_f32((uint16_t)h);
}

const float *attn_f16_table(void)
{
    pthread_once(&f16_once, f16_table_build);
    return attn_f16_values;
}
