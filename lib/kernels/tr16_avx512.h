/* A 16 x 16 transpose of 32-bit elements in AVX-512 registers, shared by
 * the tile engine's fp32 transpose (gemm_avx512.c) and the BF16 pair
 * panels (bf16_avx512.c: a pair of BF16 values is one 32-bit element).
 * Include only from files built with AVX-512F. */
#ifndef ATTN_TR16_AVX512_H
#define ATTN_TR16_AVX512_H

#include <immintrin.h>
#include <stdint.h>

/* 16 x 16 in registers: out[c] = column c of the rows r[0..15]. */
static inline void tr16_to(const __m512 r[16], __m512 out[16])
{
    __m512 t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int q = 0; q < 4; q++) {
        const __m512 va = _mm512_shuffle_f32x4(u[q], u[4 + q], 0x88);
        const __m512 vb = _mm512_shuffle_f32x4(u[q], u[4 + q], 0xDD);
        const __m512 wa = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0x88);
        const __m512 wb = _mm512_shuffle_f32x4(u[8 + q], u[12 + q], 0xDD);
        out[q + 0] = _mm512_shuffle_f32x4(va, wa, 0x88);
        out[q + 8] = _mm512_shuffle_f32x4(va, wa, 0xDD);
        out[q + 4] = _mm512_shuffle_f32x4(vb, wb, 0x88);
        out[q + 12] = _mm512_shuffle_f32x4(vb, wb, 0xDD);
    }
}

/* The same, stored: rows r[0..15] of 16 floats become columns of dst. */
static inline void tr16_regs(const __m512 r[16], float *dst, int64_t ldd)
{
    __m512 out[16];
    tr16_to(r, out);
    for (int c = 0; c < 16; c++)
        _mm512_storeu_ps(dst + c * ldd, out[c]);
}

static inline void tr16(const float *src, int64_t lds, float *dst, int64_t ldd)
{
    __m512 r[16];
    for (int i = 0; i < 16; i++)
        r[i] = _mm512_loadu_ps(src + i * lds);
    tr16_regs(r, dst, ldd);
}

#endif
