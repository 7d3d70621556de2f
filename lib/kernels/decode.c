/* The decode kernels' portable C table, and the run-time choice. */
#include "attn_config.h"
#include "kernels/decode.h"
#include "kernels/kernels.h"
#include "kernels/convert.h"
#include "kernels/quant.h"
#include "cpu/cpu.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static inline float load_st(int st, const void *base, int64_t i)
{
    if (st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0) {
        const uint8_t *blk = (const uint8_t *)base +
                             (i / ATTN_QBLOCK) * (st == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES
                                                                     : ATTN_Q4_0_BYTES);
        const float d = attn_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        const int64_t e = i % ATTN_QBLOCK;
        if (st == ATTN_ST_Q8_0)
            return (float)(int8_t)blk[2 + e] * d;
        const int q = e < 16 ? blk[2 + e] & 0xF : blk[2 + e - 16] >> 4;
        return (float)(q - 8) * d;
    }
    if (st == ATTN_ST_F16)
        return attn_f16_to_f32(((const uint16_t *)base)[i]);
    if (st == ATTN_ST_BF16)
        return attn_bf16_to_f32(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

static void qk_c(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                 int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    (void)far;   /* (no prefetching in C) */
    for (int64_t c = 0; c < nk; c++) {
        const void *kc = k[c];
        for (int64_t r = 0; r < R; r++) {
            const float *qr = q + r * ldq;
            float acc = 0.0f;
            for (int64_t x = 0; x < d; x++)
                acc = fmaf(qr[x], load_st(st, kc, x), acc);
            s[r * lds + c] = scale * acc;
        }
    }
}

static void pv_c(int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
                 int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far)
{
    (void)far;
    for (int64_t r = 0; r < R; r++) {
        float *orow = o + r * ldo;
        if (!acc)
            memset(orow, 0, (size_t)d * sizeof(float));
        for (int64_t c = 0; c < nk; c++) {
            const float w = p[r * ldp + c];
            const void *vc = v[c];
            for (int64_t x = 0; x < d; x++)
                orow[x] = fmaf(w, load_st(st, vc, x), orow[x]);
        }
    }
}

const attn_dec_kernels attn_dec_scalar = { "scalar", qk_c, pv_c };

float attn_qk8_round_block(const float *x, int8_t q[32], int32_t *sum)
{
    float amax = 0.0f;
    int bad = 0;
    for (int i = 0; i < ATTN_QBLOCK; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= FLT_MAX))
            bad = 1;
        else if (a > amax)
            amax = a;
    }
    const float sc = amax / 127.0f;
    *sum = 0;
    if (bad || !(sc >= FLT_MIN)) {
        memset(q, 0, ATTN_QBLOCK);
        return bad ? NAN : 0.0f;
    }
    const float id = 1.0f / sc;
    int32_t t = 0;
    for (int i = 0; i < ATTN_QBLOCK; i++) {
        q[i] = (int8_t)roundf(x[i] * id);
        t += q[i];
    }
    *sum = t;
    return sc;
}

/* The quants of block b of a Q8_0 or Q4_0 row as integers (Q4_0: q - 8),
 * and its scale. */
static float key_block(int st, const void *row, int64_t b, int v[32])
{
    const uint8_t *blk = (const uint8_t *)row +
                         b * (st == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES);
    for (int i = 0; i < ATTN_QBLOCK; i++)
        v[i] = st == ATTN_ST_Q8_0 ? (int8_t)blk[2 + i]
             : i < 16            ? (blk[2 + i] & 0xF) - 8
                                 : (blk[2 + i - 16] >> 4) - 8;
    return attn_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
}

void attn_dec_qk8_c(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    (void)far;
    enum { RUN = 256 };
    float acc[RUN];
    int8_t qq[ATTN_QBLOCK];
    int kv[ATTN_QBLOCK];
    for (int64_t r = 0; r < R; r++)
        for (int64_t c0 = 0; c0 < nk; c0 += RUN) {
            const int64_t n = nk - c0 < RUN ? nk - c0 : RUN;
            for (int64_t b = 0; b < d / ATTN_QBLOCK; b++) {
                int32_t qsum;
                const float sq = attn_qk8_round_block(q + r * ldq + b * ATTN_QBLOCK, qq, &qsum);
                for (int64_t c = 0; c < n; c++) {
                    const float sk = key_block(st, k[c0 + c], b, kv);
                    int32_t dot = 0;
                    for (int i = 0; i < ATTN_QBLOCK; i++)
                        dot += qq[i] * kv[i];
                    const float w = sk * sq;
                    acc[c] = b == 0 ? (float)dot * w : fmaf((float)dot, w, acc[c]);
                }
            }
            for (int64_t c = 0; c < n; c++)
                s[r * lds + c0 + c] = scale * acc[c];
        }
}

attn_dec_qk_fn attn_dec_qk8_at(int level)
{
#if ATTN_HAVE_VNNI
    if (level >= ATTN_SIMD_AVX512 && (attn_cpu_flags() & ATTN_CPU_AVX512VNNI))
        return attn_dec_qk8_vnni;
#endif
#if ATTN_HAVE_X86_KERNELS
    if (level >= ATTN_SIMD_AVX2)
        return attn_dec_qk8_avx2;
#endif
    (void)level;
    return attn_dec_qk8_c;
}

const attn_dec_kernels *attn_dec_at(int level)
{
#if ATTN_HAVE_X86_KERNELS
    if (level >= ATTN_SIMD_AVX512)
        return &attn_dec_avx512;
    if (level >= ATTN_SIMD_AVX2)
        return &attn_dec_avx2;
#endif
    (void)level;
    return &attn_dec_scalar;
}
