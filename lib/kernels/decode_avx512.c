/* AVX-512 decode kernels (this file alone is built with -mavx512f
 * -mavx512bw -mavx512vl -mfma).  F16 is widened by VCVTPH2PS, BF16 by a
 * shift; tails are masked loads. */
#include "attn_config.h"
#include "kernels/decode.h"
#include <immintrin.h>
#include <string.h>

static inline __mmask16 lanes(int64_t r)
{
    return r >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << r) - 1u);
}

/* 16 stored values (the first `m` lanes) as floats; the others 0. */
static inline __m512 load16(int st, const void *base, int64_t x, __mmask16 m)
{
    if (st == ATTN_ST_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)base + x);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)base + x);
    if (st == ATTN_ST_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline const void *row_at(int st, const void *base, int64_t r, int64_t ld)
{
    return st == ATTN_ST_F32 ? (const void *)((const float *)base + r * ld)
                             : (const void *)((const uint16_t *)base + r * ld);
}

/* Keys ahead that are prefetched: a cache row is one 4 KiB page or less,
 * where the hardware prefetchers stop, and measured streaming from memory
 * went from about 5 to GB/s with it (see docs/DESIGN.md). */
#define PF_KEYS 16

static inline void prefetch_row(const void *row, int64_t bytes)
{
    for (int64_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)row + o, _MM_HINT_T0);
}

/* The 16 dot products of a 4 x 4 block (a[4 r + c]: row r, key c), each
 * summed by the same tree: lane i + lane i + 8, then i + 4, i + 2, i + 1,
 * whatever its place in the block.  Returns them with dot (r, c) in lane
 * 4 c + r. */
static inline __m512 reduce16(const __m512 a[16])
{
    __m512 s[8], t[4], w[2];
    for (int k = 0; k < 8; k++)
        s[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xEE));
    for (int k = 0; k < 4; k++)
        t[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * k], s[2 * k + 1], 0xDD));
    for (int k = 0; k < 2; k++)
        w[k] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * k], t[2 * k + 1], 0x44),
                             _mm512_shuffle_ps(t[2 * k], t[2 * k + 1], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88),
                         _mm512_shuffle_ps(w[0], w[1], 0xDD));
}

/* Blocks of 4 keys x 4 rows; a short block repeats its last key or row
 * (computed again, not stored), so every score goes through the same code. */
static void qk_avx512(int st, const float *q, int64_t ldq, int64_t R, const void *k,
                      int64_t ldk, int64_t nk, int64_t d, float scale, float *s, int64_t lds)
{
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t c0 = 0; c0 < nk; c0 += 4) {
        const void *kr[4];
        for (int c = 0; c < 4; c++)
            kr[c] = row_at(st, k, c0 + c < nk ? c0 + c : nk - 1, ldk);
        for (int c = 0; c < 4; c++)
            if (c0 + PF_KEYS + c < nk)
                prefetch_row(row_at(st, k, c0 + PF_KEYS + c, ldk), d * (st == ATTN_ST_F32 ? 4 : 2));
        for (int64_t r0 = 0; r0 < R; r0 += 4) {
            const float *qr[4];
            for (int r = 0; r < 4; r++)
                qr[r] = q + (r0 + r < R ? r0 + r : R - 1) * ldq;
            __m512 a[16];
            for (int i = 0; i < 16; i++)
                a[i] = _mm512_setzero_ps();
            for (int64_t x = 0; x < d; x += 16) {
                const __mmask16 m = lanes(d - x);
                __m512 kv[4], qv[4];
                for (int c = 0; c < 4; c++)
                    kv[c] = load16(st, kr[c], x, m);
                for (int r = 0; r < 4; r++)
                    qv[r] = _mm512_maskz_loadu_ps(m, qr[r] + x);
                for (int r = 0; r < 4; r++)
                    for (int c = 0; c < 4; c++)
                        a[4 * r + c] = _mm512_fmadd_ps(qv[r], kv[c], a[4 * r + c]);
            }
            float out[16];
            _mm512_storeu_ps(out, _mm512_mul_ps(reduce16(a), vs));
            for (int r = 0; r < 4 && r0 + r < R; r++)
                for (int c = 0; c < 4 && c0 + c < nk; c++)
                    s[(r0 + r) * lds + c0 + c] = out[4 * c + r];
        }
    }
}

/* RB rows x 64 columns of O in registers, over every key in order. */
static inline __attribute__((always_inline)) void
pv_block(const int RB, int st, const float *p, int64_t ldp, const void *v, int64_t ldv,
         int64_t nk, int64_t x0, int64_t d, float *o, int64_t ldo, int acc)
{
    __mmask16 m[4];
    for (int j = 0; j < 4; j++)
        m[j] = x0 + 16 * j < d ? lanes(d - x0 - 16 * j) : 0;
    __m512 a[4][4];
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < 4; j++)
            a[r][j] = acc ? _mm512_maskz_loadu_ps(m[j], o + r * ldo + x0 + 16 * j)
                          : _mm512_setzero_ps();
    const int64_t esz = st == ATTN_ST_F32 ? 4 : 2;
    const int64_t span = (d - x0 < 64 ? d - x0 : 64) * esz;
    for (int64_t c = 0; c < nk; c++) {
        const void *vc = row_at(st, v, c, ldv);
        if (c + PF_KEYS < nk)
            prefetch_row((const char *)row_at(st, v, c + PF_KEYS, ldv) + x0 * esz, span);
        __m512 vv[4];
        for (int j = 0; j < 4; j++)
            vv[j] = load16(st, vc, x0 + 16 * j, m[j]);
        for (int r = 0; r < RB; r++) {
            const __m512 w = _mm512_set1_ps(p[r * ldp + c]);
            for (int j = 0; j < 4; j++)
                a[r][j] = _mm512_fmadd_ps(w, vv[j], a[r][j]);
        }
    }
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < 4; j++)
            _mm512_mask_storeu_ps(o + r * ldo + x0 + 16 * j, m[j], a[r][j]);
}

static void pv_avx512(int st, const float *p, int64_t ldp, int64_t R, const void *v,
                      int64_t ldv, int64_t nk, int64_t d, float *o, int64_t ldo, int acc)
{
    for (int64_t x0 = 0; x0 < d; x0 += 64) {
        int64_t r = 0;
        for (; r + 4 <= R; r += 4)
            pv_block(4, st, p + r * ldp, ldp, v, ldv, nk, x0, d, o + r * ldo, ldo, acc);
        for (; r < R; r++)
            pv_block(1, st, p + r * ldp, ldp, v, ldv, nk, x0, d, o + r * ldo, ldo, acc);
    }
}

static void widen_avx512(int st, const void *src, float *dst, int64_t n)
{
    for (int64_t x = 0; x < n; x += 16) {
        const __mmask16 m = lanes(n - x);
        _mm512_mask_storeu_ps(dst + x, m, load16(st, src, x, m));
    }
}

const attn_dec_kernels attn_dec_avx512 = { "avx512", qk_avx512, pv_avx512, widen_avx512 };
