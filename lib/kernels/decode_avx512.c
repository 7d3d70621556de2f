/* AVX-512 decode kernels (this file alone is built with -mavx512f
 * -mavx512bw -mavx512vl -mfma).  F16 is widened by VCVTPH2PS, BF16 by a
 * shift.  Each kernel is instantiated per storage type and keeps its
 * full 16-lane chunks unmasked (a masked chunk only at the end of a row):
 * a storage test or a mask reload inside the key loop cost the streaming
 * kernels two thirds of their speed (docs/DESIGN.md). */
#include "attn_config.h"
#include "kernels/decode.h"
#include "kernels/decode_pf.h"
#include "kernels/quant.h"
#include "kernels/tr16_avx512.h"
#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

#define PF_KEYS ATTN_DEC_PF_KEYS

INLINE __mmask16 lanes(int64_t r)
{
    return r >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << r) - 1u);
}

INLINE __m512 widen16(const int ST, __m256i h)
{
    if (ST == ATTN_ST_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The 32 values of the block holding element x (x a multiple of 32) of a
 * Q8_0 or Q4_0 row, de-quantized exactly: q x scale (Q4_0: (q - 8) x
 * scale), the scale read from attn_f16_values (kernels/quant.h: the
 * entry points below build it first). */
INLINE void ld32q(const int ST, const void *base, int64_t x, __m512 *lo, __m512 *hi)
{
    const int64_t bb = ST == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES;
    const uint8_t *blk = (const uint8_t *)base + (x >> 5) * bb;
    uint16_t h;
    memcpy(&h, blk, 2);
    const __m512 d = _mm512_set1_ps(attn_f16_values[h]);
    __m512i a, b;
    if (ST == ATTN_ST_Q8_0) {
        a = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        b = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 18)));
    } else {
        /* the 16 values (q - 8) x scale of the block, exact, then one
         * permute per 16 nibbles */
        const __m512 tbl = _mm512_mul_ps(
            _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), d);
        const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
        *lo = _mm512_permutexvar_ps(u, tbl);          /* uses the low 4 bits */
        *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(u, 4), tbl);
        return;
    }
    *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(a), d);
    *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(b), d);
}

#define IS_BLOCK(ST) ((ST) == ATTN_ST_Q8_0 || (ST) == ATTN_ST_Q4_0)

/* 16 stored values from element x of a row, as floats. */
INLINE __m512 ld16(const int ST, const void *base, int64_t x)
{
    if (ST == ATTN_ST_F32)
        return _mm512_loadu_ps((const float *)base + x);
    return widen16(ST, _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + x)));
}

/* The same for the lanes of m only (the others 0). */
INLINE __m512 ld16m(const int ST, const void *base, int64_t x, __mmask16 m)
{
    if (ST == ATTN_ST_F32)
        return _mm512_maskz_loadu_ps(m, (const float *)base + x);
    return widen16(ST, _mm256_maskz_loadu_epi16(m, (const uint16_t *)base + x));
}


/* The 16 dot products of a 4 x 4 block (a[4 i + j]), each summed by the
 * same tree: lane i + lane i + 8, then i + 4, i + 2, i + 1, whatever its
 * place in the block.  Returns them with the dot of a[4 i + j] in lane
 * 4 j + i. */
INLINE __m512 reduce16(const __m512 a[16])
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
 * (computed again, not stored), so every score goes through the same code.
 * Each dot product's chain starts with a multiply (the same value as a
 * fused multiply-add onto 0, but for the sign of a zero product: a dot
 * product of zeros may come out -0), not from zeroed registers, and the
 * block's accumulators are kept key-major (a[4 c + r]), so reduce16
 * returns row r's four scores in lanes 4 r to 4 r + 3, stored as one
 * 16-byte run per row.  Both together took 6-17% off Q K^T of F16, Q8_0
 * and Q4_0 keys from the L1/L2 cache on a Xeon (Cascade Lake, 4 rows, d
 * 128; docs/DESIGN.md). */
INLINE void qk_block(const int ST, const float *q, int64_t ldq, int64_t R,
                     const void *const kr[4], int64_t c0, int64_t nk, int64_t d, __m512 vs,
                     float *s, int64_t lds)
{
    const int64_t dfull = d & ~(int64_t)15;
    const __mmask16 mt = lanes(d - dfull);
    for (int64_t r0 = 0; r0 < R; r0 += 4) {
        const float *qr[4];
        for (int r = 0; r < 4; r++)
            qr[r] = q + (r0 + r < R ? r0 + r : R - 1) * ldq;
        __m512 a[16];
        /* Block types: a block (two chunks) per step, the same FMA
         * chains as F32 chunk by chunk (d is a multiple of 32). */
        if (IS_BLOCK(ST)) {
            __m512 k0[4], k1[4];
            for (int c = 0; c < 4; c++)
                ld32q(ST, kr[c], 0, &k0[c], &k1[c]);
            for (int r = 0; r < 4; r++) {
                const __m512 q0 = _mm512_loadu_ps(qr[r]), q1 = _mm512_loadu_ps(qr[r] + 16);
                for (int c = 0; c < 4; c++)
                    a[4 * c + r] = _mm512_fmadd_ps(q1, k1[c], _mm512_mul_ps(q0, k0[c]));
            }
            for (int64_t x = 32; x < d; x += 32) {
                for (int c = 0; c < 4; c++)
                    ld32q(ST, kr[c], x, &k0[c], &k1[c]);
                for (int r = 0; r < 4; r++) {
                    const __m512 q0 = _mm512_loadu_ps(qr[r] + x);
                    const __m512 q1 = _mm512_loadu_ps(qr[r] + x + 16);
                    for (int c = 0; c < 4; c++) {
                        a[4 * c + r] = _mm512_fmadd_ps(q0, k0[c], a[4 * c + r]);
                        a[4 * c + r] = _mm512_fmadd_ps(q1, k1[c], a[4 * c + r]);
                    }
                }
            }
        }
        else {
            /* the first chunk (whole, or the masked one if d < 16) */
            __m512 kv[4];
            const int part = dfull == 0;
            for (int c = 0; c < 4; c++)
                kv[c] = part ? ld16m(ST, kr[c], 0, mt) : ld16(ST, kr[c], 0);
            for (int r = 0; r < 4; r++) {
                const __m512 qv = part ? _mm512_maskz_loadu_ps(mt, qr[r]) : _mm512_loadu_ps(qr[r]);
                for (int c = 0; c < 4; c++)
                    a[4 * c + r] = _mm512_mul_ps(qv, kv[c]);
            }
            for (int64_t x = 16; x < dfull; x += 16) {
                for (int c = 0; c < 4; c++)
                    kv[c] = ld16(ST, kr[c], x);
                for (int r = 0; r < 4; r++) {
                    const __m512 qv = _mm512_loadu_ps(qr[r] + x);
                    for (int c = 0; c < 4; c++)
                        a[4 * c + r] = _mm512_fmadd_ps(qv, kv[c], a[4 * c + r]);
                }
            }
            if (!part && dfull < d) {
                for (int c = 0; c < 4; c++)
                    kv[c] = ld16m(ST, kr[c], dfull, mt);
                for (int r = 0; r < 4; r++) {
                    const __m512 qv = _mm512_maskz_loadu_ps(mt, qr[r] + dfull);
                    for (int c = 0; c < 4; c++)
                        a[4 * c + r] = _mm512_fmadd_ps(qv, kv[c], a[4 * c + r]);
                }
            }
        }
        float out[16];
        _mm512_storeu_ps(out, _mm512_mul_ps(reduce16(a), vs));
        if (r0 + 4 <= R && c0 + 4 <= nk)
            for (int r = 0; r < 4; r++)
                _mm_storeu_ps(s + (r0 + r) * lds + c0, _mm_loadu_ps(out + 4 * r));
        else
            for (int r = 0; r < 4 && r0 + r < R; r++)
                for (int c = 0; c < 4 && c0 + c < nk; c++)
                    s[(r0 + r) * lds + c0 + c] = out[4 * r + c];
    }
}

/* Q K^T in blocks of 4 keys (qk_block); the rows PF_KEYS ahead from the
 * stream when it looks linear (decode_pf.h) and has no far rows, else
 * from k.  (F32 always from k: from the stream, D1 F32 took 1.04x the
 * time on Zen 5, F16 and BF16 0.96-0.98x.)  Q4_0 with D1's shape (a GQA
 * group of 4 rows, d 128) has a copy of its own, the row count and d
 * constants (its de-quantizing unrolled whole), which asks for the rows
 * QK_Q4_PF_KEYS ahead, as it computes faster than memory brings them 16
 * ahead.  On Zen 5 (2 vCPUs, attn-ab, two runs each) the whole D1 call
 * took 0.93x the time at 1 thread and 0.93-0.95x at 2; over a paged pool
 * (the rows ahead from k, 16 and the far distance) 0.95x at 1 thread and
 * 0.88-0.93x at 2.  The same for Q8_0 took 0.98-1.01x, F16 0.98-0.99x
 * and BF16 1.02-1.04x, so they keep the general code.  (The kernel alone,
 * F16 from memory in a quiet spell: 8.8-9.8 ns a key as it is, 9.6-11.1
 * with the copy and 16 rows ahead, 7.8-8.5 with 32: the faster loop needs
 * the longer distance.) */
enum { QK_Q4_PF_KEYS = 32, QK_Q4_D = 128 };

/* A K of F32, F16 or BF16 over a paged pool (far rows) asks for the rows
 * about 8 KiB ahead, 16 rows at least and 32 at most, not 16 (1.4.10):
 * 32 for F16 and BF16 at d 128 and for F32 at d 64, 16 as before for F32
 * at d 128 and F16 at 256.  On Zen 5 (attn-ab, the whole call) D1's shape
 * took 0.92-0.99x the time for F16 at 1 thread (0.94-0.95 as built),
 * 0.95-0.97x at 2, BF16 0.96-0.97x, D2's F16 0.96-0.98x at 2 threads;
 * F32 at d 64 0.96x, F16 at d 64 0.95-0.99x.  F16 at d 128 with 48 rows
 * took 0.94-0.99x, 64 rows 0.96-1.03x, 24 rows 1.00-1.03x; F32 at d 128
 * with 32 rows 1.01-1.02x, F16 at d 256 1.02x, F16 at d 64 with 64 rows
 * 0.99-1.00x; Q8_0 with 32 rows 0.99-1.00x, so the block types keep 16. */
enum { QK_PAGED_PF_BYTES = 8192 };

INLINE void qk_impl(const int ST, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    const __m512 vs = _mm512_set1_ps(scale);
    const int64_t rowb = attn_st_bytes(ST, d);
    uintptr_t step;
    int64_t c0 = 0;
    if (ST != ATTN_ST_F32 && !far && attn_dec_linear(k, nk, &step) && step == (uintptr_t)rowb) {
        const char *k0 = (const char *)k[0];
        if (ST == ATTN_ST_Q4_0 && R == 4 && d == QK_Q4_D)
            for (; c0 + QK_Q4_PF_KEYS + 4 <= nk; c0 += 4) {
                const void *kr[4];
                for (int c = 0; c < 4; c++)
                    kr[c] = k[c0 + c];
                attn_dec_prefetch_span_at(k0 + (c0 + QK_Q4_PF_KEYS) * rowb, 4 * rowb);
                qk_block(ST, q, ldq, 4, kr, c0, nk, QK_Q4_D, vs, s, lds);
            }
        for (; c0 + PF_KEYS + 4 <= nk; c0 += 4) {
            const void *kr[4];
            for (int c = 0; c < 4; c++)
                kr[c] = k[c0 + c];
            attn_dec_prefetch_span_at(k0 + (c0 + PF_KEYS) * rowb, 4 * rowb);
            qk_block(ST, q, ldq, R, kr, c0, nk, d, vs, s, lds);
        }
    }
    /* (the Q4_0 copy for a paged cache and the last keys too: whole
     * blocks of 4, the rows ahead from k; a paged F32, F16 or BF16 K's
     * about QK_PAGED_PF_BYTES ahead) */
    int64_t pf = PF_KEYS;
    if (far && !IS_BLOCK(ST) && QK_PAGED_PF_BYTES / rowb > PF_KEYS)
        pf = QK_PAGED_PF_BYTES / rowb < 2 * PF_KEYS ? QK_PAGED_PF_BYTES / rowb : 2 * PF_KEYS;
    if (ST == ATTN_ST_Q4_0 && R == 4 && d == QK_Q4_D)
        for (; c0 + 4 <= nk; c0 += 4) {
            const void *kr[4];
            for (int c = 0; c < 4; c++)
                kr[c] = k[c0 + c];
            attn_dec_prefetch_group(k, c0, 4, nk, PF_KEYS, far, rowb);
            qk_block(ST, q, ldq, 4, kr, c0, nk, QK_Q4_D, vs, s, lds);
        }
    for (; c0 < nk; c0 += 4) {
        const void *kr[4];
        for (int c = 0; c < 4; c++)
            kr[c] = k[c0 + c < nk ? c0 + c : nk - 1];
        attn_dec_prefetch_group(k, c0, 4, nk, pf, far, rowb);
        qk_block(ST, q, ldq, R, kr, c0, nk, d, vs, s, lds);
    }
}

/* BF16 V in whole chunks of 32 columns (1.4.10): a pair of accumulators
 * holds the even and the odd columns of 32, whose values are one 64-byte
 * load shifted left by 16 bits (the even ones) or masked to its high
 * halves (the odd ones), one operation per 16 values where the widening of
 * widen16 takes two; pv_block puts the columns back in order when it loads
 * and stores O.  Each column's chain of fused multiply-adds is the same,
 * so every bit is.  On Zen 5 (attn-ab, the whole call, from memory) D3's
 * shape (16 rows: 8 row blocks, each widening every V row again) took
 * 0.94-0.96x the time at 1 and 2 threads, 8 rows 0.96x; D1's (4 rows)
 * 1.00-1.02x, within the noise (docs/DESIGN.md). */
#define BF_PAIRS(ST, tail, NV) ((ST) == ATTN_ST_BF16 && !(tail) && (NV) % 2 == 0)

/* One key's row vc into the RB x NV accumulators (pv_block). */
INLINE void pv_key(const int RB, const int NV, const int ST, const int tail, __m512 a[4][8],
                   const char *vc, const float *p, int64_t ldp, int64_t c, int64_t x0,
                   __mmask16 mt)
{
    __m512 vv[8];
    /* (block types: NV is even and no chunk is partial, as d and x0 are
     * multiples of 32) */
    for (int j = 0; IS_BLOCK(ST) && j + 1 < NV; j += 2)
        ld32q(ST, vc, x0 + 16 * j, &vv[j], &vv[j + 1]);
    if (BF_PAIRS(ST, tail, NV))
        /* 32 BF16 values as 16 pairs: the even ones shifted up, the odd
         * ones masked in place (pv_block) */
        for (int j = 0; j + 1 < NV; j += 2) {
            const __m512i w = _mm512_loadu_si512((const uint16_t *)(const void *)vc + x0 + 16 * j);
            const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
            vv[j] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
            vv[j + 1] = _mm512_castsi512_ps(_mm512_and_si512(w, high));
        }
    for (int j = 0; !IS_BLOCK(ST) && !BF_PAIRS(ST, tail, NV) && j < NV; j++)
        vv[j] = tail && j == NV - 1 ? ld16m(ST, vc, x0 + 16 * j, mt) : ld16(ST, vc, x0 + 16 * j);
    for (int r = 0; r < RB; r++) {
        const __m512 w = _mm512_set1_ps(p[r * ldp + c]);
        for (int j = 0; j < NV; j++)
            a[r][j] = _mm512_fmadd_ps(w, vv[j], a[r][j]);
    }
}

/* RB rows x 16 NV columns [x0, x0 + 16 NV) of O in registers, over every
 * key in order.  tail: the last chunk holds only the columns below d
 * (masked); otherwise all NV chunks are whole.  nv: the rows of the
 * stream from v[0] (nk or more), which the prefetches may reach.  pf,
 * far, sdist, bi, nb: the prefetches (PV_ROWS).  When the stream looks
 * linear (decode_pf.h) and has no far rows, the addresses of the rows
 * ahead come from it, in a loop with no test but for the keys whose rows
 * ahead lie past the stream. */
INLINE void pv_block(const int RB, const int NV, const int ST, const int tail, const float *p,
                     int64_t ldp, const void *const *v, int64_t nk, int64_t nv, int64_t x0,
                     int64_t d, float *o, int64_t ldo, int acc, int pf, int64_t far,
                     int64_t sdist, int64_t bi, int64_t nb)
{
    const __mmask16 mt = tail ? lanes(d - x0 - 16 * (NV - 1)) : (__mmask16)0xffff;
    const int64_t off = attn_st_bytes(ST, x0);
    const int64_t span = tail ? attn_st_bytes(ST, d - x0) : attn_st_bytes(ST, 16 * NV);
    /* block bi of nb: its share of the lines of the rows sdist ahead */
    const int64_t lines = (span + 63) / 64, lo = sdist ? bi * lines / nb : 0,
                  sbytes = sdist ? 64 * ((bi + 1) * lines / nb - lo) : 0;
    __m512 a[4][8];
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < NV; j++) {
            float *oj = o + r * ldo + x0 + 16 * j;
            a[r][j] = !acc ? _mm512_setzero_ps()
                    : tail && j == NV - 1 ? _mm512_maskz_loadu_ps(mt, oj) : _mm512_loadu_ps(oj);
        }
    /* (BF16 pairs: the even and the odd columns of 32 from O) */
    if (BF_PAIRS(ST, tail, NV) && acc) {
        const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
                                             30),
                      od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29,
                                             31);
        for (int r = 0; r < RB; r++)
            for (int j = 0; j + 1 < NV; j += 2) {
                const __m512 x = a[r][j], y = a[r][j + 1];
                a[r][j] = _mm512_permutex2var_ps(x, ev, y);
                a[r][j + 1] = _mm512_permutex2var_ps(x, od, y);
            }
    }
    uintptr_t step;
    int64_t c = 0;
    if (!far && (pf || sbytes) && attn_dec_linear(v, nv, &step)) {
        const int64_t ahead = sdist > PF_KEYS ? sdist : PF_KEYS,
                      m = nv - ahead < nk ? nv - ahead : nk;
        const uintptr_t v0 = (uintptr_t)v[0];
        for (; c < m; c++) {
            const char *ra = (const char *)(v0 + (uintptr_t)c * step);
            if (pf)
                attn_dec_prefetch_row(ra + PF_KEYS * step + off, span);
            if (sbytes)
                attn_dec_prefetch_row(ra + sdist * step + off + 64 * lo, sbytes);
            pv_key(RB, NV, ST, tail, a, (const char *)v[c], p, ldp, c, x0, mt);
        }
    }
    for (; c < nk; c++) {
        if (pf)
            attn_dec_prefetch_ahead(v, c, nv, PF_KEYS, far, off, span);
        if (sbytes)
            attn_dec_prefetch_ahead(v, c, nv, sdist, 0, off + 64 * lo, sbytes);
        pv_key(RB, NV, ST, tail, a, (const char *)v[c], p, ldp, c, x0, mt);
    }
    /* (BF16 pairs: the columns back in order) */
    if (BF_PAIRS(ST, tail, NV)) {
        const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7,
                                              23),
                      ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                              15, 31);
        for (int r = 0; r < RB; r++)
            for (int j = 0; j + 1 < NV; j += 2) {
                const __m512 e = a[r][j], f = a[r][j + 1];
                a[r][j] = _mm512_permutex2var_ps(e, ilo, f);
                a[r][j + 1] = _mm512_permutex2var_ps(e, ihi, f);
            }
    }
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < NV; j++) {
            float *oj = o + r * ldo + x0 + 16 * j;
            if (tail && j == NV - 1)
                _mm512_mask_storeu_ps(oj, mt, a[r][j]);
            else
                _mm512_storeu_ps(oj, a[r][j]);
        }
}

/* Rows in blocks of RB over one column chunk.  Only the first block
 * prefetches PF_KEYS rows ahead: the later ones find the chunk's V rows in
 * L1 or L2, and their prefetches would only take load slots from the FMAs.
 * With sdist (pv_impl: rows in runs of keys), block bi of the chunk's nb
 * also asks for its share of the rows sdist ahead (the next run's): the
 * bi-th of nb equal parts of each row's lines, so that the next run
 * arrives over the whole run's work, not during its first block alone.
 * With last set instead, the first block asks for nothing and the last
 * block for the whole of the next run's rows. */
#define PV_BLOCK(RB, NV, TAIL, r, bi, nb)                                                      \
    pv_block(RB, NV, ST, TAIL, p + (r) * ldp, ldp, v, nk, nv, x0, d, o + (r) * ldo, ldo, acc, \
             !last && (r) == 0, far, !last || (bi) == (nb) - 1 ? sdist : 0, last ? 0 : (bi),  \
             last ? 1 : (nb))
#define PV_ROWS(RB, NV, TAIL)                                 \
    do {                                                      \
        int64_t r = 0, bi = 0;                                \
        const int64_t nb = R / (RB) + R % (RB);               \
        for (; r + (RB) <= R; r += (RB), bi++)                \
            PV_BLOCK(RB, NV, TAIL, r, bi, nb);                \
        for (; r < R; r++, bi++)                              \
            PV_BLOCK(1, NV, TAIL, r, bi, nb);                 \
    } while (0)

/* Columns in whole chunks of 128 (2 rows at a time: 16 accumulators and 8
 * row vectors in registers; a V row of 128 floats read whole), then of 64
 * (4 rows at a time), then the last partial chunk of 64; nv as for
 * pv_block. */
enum { PV_F16_BY64_ROWS = 5 };

INLINE void pv_chunks(const int ST, const float *p, int64_t ldp, int64_t R,
                      const void *const *v, int64_t nk, int64_t nv, int64_t d, float *o,
                      int64_t ldo, int acc, int64_t sdist, int last, int64_t far)
{
    int64_t x0 = 0;
    /* (the block types with 3 or 4 rows: 64 columns for 4 rows, so each
     * value is de-quantized once; F32 with a multiple of 4 rows (D3's 16):
     * 4 rows x 64 columns took 0.94-0.97x the time of 2 x 128 on Zen 5,
     * from memory and from L3, where F16 was 4% slower and BF16 the same.
     * F32 with 4 rows (D1's GQA group) joined in 1.4.8: the kernel alone
     * on Zen 5, d 128, from L2 8.6-8.9 -> 5.5-5.6 ns a key, from memory
     * 25.9-27.2 -> 22.3-22.6 (the second row block of 2 x 128 reads every
     * row again from L2 while memory idles); the whole D1 call 0.87-0.92x
     * the time at 1 and 2 threads, over a paged pool 0.94-0.95x.  4 x 96
     * then 4 x 32 did as well from L2 and no better from memory; F16 with
     * 4 rows x 64 read half of each 256-byte row a pass and took 1.4x the
     * time from memory, so it keeps its runs (pv_impl).  F16 with 8 rows or
     * more (a multiple of 4) joined in 1.4.10, with pv_impl asking for the
     * next run over all the row blocks as for F32: half the widenings of
     * 2 x 128 (4 per 16 multiply-adds, not 8), and the column passes read
     * the run from L1.  On Zen 5 (attn-ab, the whole call) D3's shape took
     * 0.93-0.96x the time from memory at 1 thread, 0.90-0.95x at 2, over a
     * paged pool 0.92-0.94x, 8 and 12 rows 0.95-0.96x; 4 x 64 without the
     * run's prefetch took 1.02-1.11x from memory (0.95x from L3).  BF16 (in
     * pairs, BF_PAIRS) took 0.98x at 16 rows and 1 thread, 0.94-0.97x at
     * 2, but 1.01-1.03x at 8, so it keeps 2 x 128.  F16 over
     * a paged pool (far rows; one run of all the keys, pv_impl) with 4
     * rows too: D1's shape took 0.97-0.98x the time at 1 thread and
     * 0.98-0.99x at 2, D2's 0.98-0.99x at 2 (contiguous, in runs of 8 KiB,
     * 4 x 64 took 1.05-1.11x); BF16 0.99x, left as it is.) */
    const int rows4 = ST == ATTN_ST_F32 || (ST == ATTN_ST_F16 && (R >= PV_F16_BY64_ROWS || far));
    const int by64 = R > 2 && (IS_BLOCK(ST) || (rows4 && R >= 4 && R % 4 == 0));
    for (; x0 + 128 <= d && !by64; x0 += 128)
        PV_ROWS(2, 8, 0);
    for (; x0 + 64 <= d; x0 += 64)
        PV_ROWS(4, 4, 0);
    if (x0 < d) {
        const int64_t left = d - x0;
        if (IS_BLOCK(ST)) PV_ROWS(4, 2, 0);   /* left is 32 */
        else if (left > 48) PV_ROWS(4, 4, 1);
        else if (left > 32) PV_ROWS(4, 3, 1);
        else if (left > 16) PV_ROWS(4, 2, 1);
        else PV_ROWS(4, 1, 1);
    }
}

/* Many rows of a 16-bit or F32 V (several queries of a GQA group, 5 rows
 * or more, d >= 128): each of pv_chunks's row blocks streams all the
 * call's V rows, which the later blocks found in L2 only, so the keys go
 * in runs of about 16 KiB, which they find in L1 (the block types do
 * this in pv_blocks, de-quantizing each run into a buffer).  O carries
 * the sums from run to run (exact), so every chain and every bit is
 * unchanged, and the prefetches look ahead along the whole stream, across
 * the runs.  From cache on a Xeon (Cascade Lake; 256 keys, cycles per key,
 * d 128): F32 at 5, 8, 16 and 32 rows 47 -> 41, 64 -> 54, 124 -> 99,
 * 244 -> 185; F16 3-7% less; BF16 within 2% either way, also at d 160 and
 * 256.  Otherwise one run of all nk keys (none when nk is 0: O is then
 * cleared or kept, as acc says).  F32 rows (512 bytes at d 128: D3 reads
 * them at 8 cycles a key in the first row block, 16 keys ahead is 128
 * cycles, far less than memory's latency) also ask for the next run over
 * all the row blocks (PV_ROWS); with qk_many's spread prefetches, D3 F32
 * from memory took 0.74-0.77x the time on Zen 5 (1.4.3 -> 1.4.4; the
 * slices alone 0.94-0.96x).  A 16-bit V of d 128 with 3 or 4 rows (a
 * GQA group of 4: D1's shape) has two row blocks, the second reading each
 * row again from L2 while memory idled: in runs of 8 KiB instead, the
 * second block reads the run from L1 and asks for the whole of the next
 * run, the first asks for nothing (the last keyword of PV_ROWS).  On Zen 5
 * from memory, 4 rows of F16 (the kernel alone): 13.9 -> 12.4 ns a key,
 * BF16 12.9 -> 11.6; the whole D1 call 0.87-0.94x (F16), 0.94x (BF16).
 * F32 (runs of 16 or 32 keys) took 1.00-1.03x, Q8_0 and Q4_0 (4 x 64
 * blocks, each column pass asking for its part of the next run)
 * 0.97-1.03x, so they keep one run.  mem: 0
 * when v is the block types' buffer (in L1 already), which is not
 * prefetched. */
enum { PV_RUN_BYTES = 16384, PV_RUN_MIN_ROWS = 5, PV_RUN_MIN_D = 128, PV_RUN2_BYTES = 8192,
       PV_RUN2_D = 128 };

INLINE void pv_impl(const int ST, const float *p, int64_t ldp, int64_t R, const void *const *v,
                    int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far,
                    int mem)
{
    int64_t run = nk > 0 ? nk : 1, sdist = 0;
    int last = 0;
    if ((ST == ATTN_ST_F16 || ST == ATTN_ST_BF16) && R > 2 && R <= 4 && d == PV_RUN2_D && mem &&
        !far) {
        run = PV_RUN2_BYTES / attn_st_bytes(ST, d);
        sdist = run;
        last = 1;
    } else if (!IS_BLOCK(ST) && R >= PV_RUN_MIN_ROWS && d >= PV_RUN_MIN_D) {
        run = PV_RUN_BYTES / attn_st_bytes(ST, d);
        run = run < 16 ? 16 : run;
        /* (F16 in 4 x 64 blocks since 1.4.10, as F32: pv_chunks) */
        if (mem && (ST == ATTN_ST_F32 || (ST == ATTN_ST_F16 && R % 4 == 0)))
            sdist = run;
    }
    int64_t c0 = 0;
    do {
        const int64_t n = nk - c0 < run ? nk - c0 : run;
        pv_chunks(ST, p + c0, ldp, R, v + c0, n, nk - c0, d, o, ldo, acc || c0 > 0, sdist, last,
                  far);
        c0 += run;
    } while (c0 < nk);
}

/* The block types with many rows per key (a GQA group times several
 * queries): de-quantizing in registers would redo each key's blocks once
 * per block of rows, so runs of keys are de-quantized once into a buffer
 * on the stack (L1-sized) and the F32 kernel runs on it.  The F32 kernel's
 * arithmetic on the de-quantized values is the register path's, so both
 * give the same bits; the output of P V is carried from run to run in O
 * (exact), so its chains stay one per element in key order. */
enum { QBUF_FLOATS = 4096, QROWS_IN_REGS_QK = 4, QROWS_IN_REGS_PV = 4 };

/* Values [x0, x0 + w) of a row of type ST as floats into dst: widened,
 * de-quantized (x0 and w multiples of 32) or copied; the last chunk of a
 * 16-bit or F32 span may be partial. */
INLINE void widen_span(const int ST, const void *row, int64_t x0, int64_t w, float *dst)
{
    for (int64_t x = 0; IS_BLOCK(ST) && x < w; x += 32) {
        __m512 lo, hi;
        ld32q(ST, row, x0 + x, &lo, &hi);
        _mm512_storeu_ps(dst + x, lo);
        _mm512_storeu_ps(dst + x + 16, hi);
    }
    for (int64_t x = 0; !IS_BLOCK(ST) && x < w; x += 16)
        _mm512_storeu_ps(dst + x, x + 16 <= w ? ld16(ST, row, x0 + x)
                                              : ld16m(ST, row, x0 + x, lanes(w - x)));
}

INLINE void dequant_rows(const int ST, const void *const *rows, int64_t nk, int64_t d,
                         float *buf, const void **out, int64_t c_all, const void *const *all,
                         int64_t n_all, int64_t far)
{
    const int64_t rowb = attn_st_bytes(ST, d);
    for (int64_t c = 0; c < nk; c++) {
        attn_dec_prefetch_ahead(all, c_all + c, n_all, PF_KEYS, far, 0, rowb);
        float *dst = buf + c * d;
        widen_span(ST, rows[c], 0, d, dst);
        out[c] = dst;
    }
}

INLINE void qk_blocks(const int ST, const float *q, int64_t ldq, int64_t R, const void *const *k,
                      int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    float buf[QBUF_FLOATS] __attribute__((aligned(64)));
    const void *rows[QBUF_FLOATS / 32];
    const int64_t run = QBUF_FLOATS / d;
    for (int64_t c0 = 0; c0 < nk; c0 += run) {
        const int64_t n = nk - c0 < run ? nk - c0 : run;
        dequant_rows(ST, k + c0, n, d, buf, rows, c0, k, nk, far);
        qk_impl(ATTN_ST_F32, q, ldq, R, rows, n, d, scale, s + c0, lds, 0);
    }
}

/* Q K^T with many rows per key (QK_MANY_ROWS or more: a GQA group times
 * several queries), as a small GEMM: lanes over 16 rows, a register per
 * key, each K value broadcast from memory into a fused multiply-add with
 * the 16 rows' q values at its position (Q transposed once per call), so
 * no dot product needs a horizontal reduction.  The keys go in blocks of
 * 16, their values in panels of 64 copied (F32), widened or de-quantized
 * into a buffer of a fixed row pitch (so one register addresses all 16
 * rows); a short block repeats its last key.  Every score is one chain of
 * fused multiply-adds over x in order (the first a multiply), whatever
 * its place, though not the 4 x 4 path's bits (which sums 16 lanes, then a
 * tree).  The choice depends on R and d only, never on the storage type or
 * the paging, so those still give the same bits; and the decode path's R
 * depends on the shape only (sdpa/plan.c stacks a GQA group in every
 * layout), so a 16-bit Q or O gives its fp32 twin's bits.  A call of more
 * than 16 rows widens each panel again per 16 rows.  From cache on a Xeon
 * (Cascade Lake), against the 4 x 4 path, 256 keys: at 16
 * rows and d 128, F32 11%, F16 23%, BF16 26%, Q8_0 29% and Q4_0 24% less
 * time; 13-15 rows: F32 3-4%, Q8_0 22-31%; 64 rows 20%; F16 at d 64 35%.
 * With 12 rows (a quarter of the lanes idle) F32 was 13% slower, and at d
 * 256 (a 16 KiB Q^T beside the panels) 12% slower: those stay on the 4 x 4
 * path. */
/* (Off in 1.3.2: a 16-bit call's fp32 twin, whose BSHD O did not stack,
 * ran with other row counts, so the two took different forms; the fuzzer
 * found it, test/fuzz/regressions/qo-twin-stacking.  1.3.3 stacks in every
 * layout.) */
enum { QK_MANY_ON = 1, QK_MANY_ROWS = 13, QK_MANY_D = 128, QK_PANEL = 64, QK_SPREAD_BYTES = 4096 };

/* qk_many's multiply-adds over values [x0, x1): value x of key c at
 * kb[c * PITCH + x - x0] (PITCH a constant, so one register addresses all
 * 16 keys), Q^T in qt; the first value (x 0) multiplies.  Each step also
 * asks for the spread prefetches' next lines. */
INLINE void qk_many_fma(const int PITCH, const float *kb, const float *qt, int64_t x0, int64_t x1,
                        __m512 a[16], attn_dec_spread *sp, int64_t per, attn_dec_spread *spf,
                        int64_t perf)
{
    int64_t x = x0;
    if (x0 == 0) {
        const __m512 qv = _mm512_load_ps(qt);
        for (int c = 0; c < 16; c++)
            a[c] = _mm512_mul_ps(_mm512_set1_ps(kb[c * PITCH]), qv);
        x = 1;
    }
    for (; x < x1; x++) {
        attn_dec_spread_step(sp, per);
        attn_dec_spread_step(spf, perf);
        const __m512 qv = _mm512_load_ps(qt + x * 16);
        for (int c = 0; c < 16; c++)
            a[c] = _mm512_fmadd_ps(_mm512_set1_ps(kb[c * PITCH + x - x0]), qv, a[c]);
    }
}

INLINE void qk_many(const int ST, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    float qt[QK_MANY_D * 16] __attribute__((aligned(64)));       /* Q^T, [x][16 rows] */
    float kp[16 * QK_PANEL] __attribute__((aligned(64)));        /* [16 keys][64 values] */
    const __m512 vs = _mm512_set1_ps(scale);
    const int64_t rowb = attn_st_bytes(ST, d);
    for (int64_t r0 = 0; r0 < R; r0 += 16) {
        const int64_t nr = R - r0 < 16 ? R - r0 : 16;
        /* Q^T of rows [r0, r0 + nr), 0 in the lanes past nr */
        for (int64_t x = 0; x < d; x += 16) {
            const __mmask16 mx = lanes(d - x);
            __m512 rows[16], cols[16];
            for (int r = 0; r < 16; r++)
                rows[r] = r < nr ? _mm512_maskz_loadu_ps(mx, q + (r0 + r) * ldq + x)
                                 : _mm512_setzero_ps();
            tr16_to(rows, cols);
            for (int j = 0; j < 16 && x + j < d; j++)
                _mm512_store_ps(qt + (x + j) * 16, cols[j]);
        }
        for (int64_t c0 = 0; c0 < nk; c0 += 16) {
            const void *kr[16];
            for (int c = 0; c < 16; c++)
                kr[c] = k[c0 + c < nk ? c0 + c : nk - 1];
            /* the rows PF_KEYS ahead, and a paged cache's far rows: each
             * spread over the FMA loop below when they are 4 KiB or more
             * and lie back to back, else at once (decode_pf.h) */
            attn_dec_spread sp = { 0, 0 }, spf = { 0, 0 };
            int64_t per = 0, perf = 0;
            if (r0 == 0) {
                const int spread = 16 * rowb >= QK_SPREAD_BYTES;
                per = attn_dec_spread_or_span(&sp, spread, d, k, c0 + PF_KEYS, 16, nk, rowb);
                if (far)
                    perf = attn_dec_spread_or_span(&spf, spread, d, k, c0 + far, 16, nk, rowb);
            }
            __m512 a[16];
            for (int c = 0; c < 16; c++)
                a[c] = _mm512_setzero_ps();   /* (set by the first multiply) */
            const int direct = ST == ATTN_ST_F32 && (d == QK_MANY_D || d == QK_PANEL) &&
                               (const char *)kr[15] - (const char *)kr[0] == 15 * rowb;
            if (direct && d == QK_MANY_D) {
                /* 16 F32 rows of d 128 (or 64) back to back: broadcast
                 * from the rows themselves (a constant pitch, as the
                 * panel's) */
                qk_many_fma(QK_MANY_D, (const float *)kr[0], qt, 0, d, a, &sp, per, &spf, perf);
            } else if (direct) {
                qk_many_fma(QK_PANEL, (const float *)kr[0], qt, 0, d, a, &sp, per, &spf, perf);
            } else {
                for (int64_t x0 = 0; x0 < d; x0 += QK_PANEL) {
                    const int64_t w = d - x0 < QK_PANEL ? d - x0 : QK_PANEL;
                    /* the panel: values [x0, x0 + w) of the 16 keys */
                    for (int c = 0; c < 16; c++)
                        widen_span(ST, kr[c], x0, w, kp + c * QK_PANEL);
                    qk_many_fma(QK_PANEL, kp, qt, x0, x0 + w, a, &sp, per, &spf, perf);
                }
            }
            attn_dec_spread_finish(&sp);
            attn_dec_spread_finish(&spf);
            /* a[c] holds key c's scores of the 16 rows; rows out */
            __m512 out[16];
            for (int c = 0; c < 16; c++)
                a[c] = _mm512_mul_ps(a[c], vs);
            tr16_to(a, out);
            const __mmask16 mk = lanes(nk - c0);
            for (int64_t r = 0; r < nr; r++)
                _mm512_mask_storeu_ps(s + (r0 + r) * lds + c0, mk, out[r]);
        }
    }
}

/* The buffered path, a function of its own apart from the register path's
 * instances in qk_avx512: compiled together, the register path of the
 * block types ran 10-15% slower on a Xeon (Cascade Lake). */
static __attribute__((noinline)) void qk_buffered(int st, const float *q, int64_t ldq, int64_t R,
                                                  const void *const *k, int64_t nk, int64_t d,
                                                  float scale, float *s, int64_t lds, int64_t far)
{
    if (st == ATTN_ST_Q8_0)
        qk_blocks(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else
        qk_blocks(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far);
}

/* (a function of its own, as qk_buffered) */
static __attribute__((noinline)) void qk_many_any(int st, const float *q, int64_t ldq, int64_t R,
                                                  const void *const *k, int64_t nk, int64_t d,
                                                  float scale, float *s, int64_t lds, int64_t far)
{
    switch (st) {
    case ATTN_ST_Q8_0: qk_many(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far); break;
    case ATTN_ST_Q4_0: qk_many(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far); break;
    case ATTN_ST_F16: qk_many(ATTN_ST_F16, q, ldq, R, k, nk, d, scale, s, lds, far); break;
    case ATTN_ST_BF16: qk_many(ATTN_ST_BF16, q, ldq, R, k, nk, d, scale, s, lds, far); break;
    default: qk_many(ATTN_ST_F32, q, ldq, R, k, nk, d, scale, s, lds, far); break;
    }
}

/* (the block types read their scales from attn_f16_values, built here
 * first, as in pv_avx512) */
static void qk_avx512(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                      int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    if (IS_BLOCK(st))
        (void)attn_f16_table();
    if (QK_MANY_ON && R >= QK_MANY_ROWS && d <= QK_MANY_D) {
        qk_many_any(st, q, ldq, R, k, nk, d, scale, s, lds, far);
        return;
    }
    const int regs = R <= QROWS_IN_REGS_QK || d > QBUF_FLOATS / 4;
    if (st == ATTN_ST_Q8_0 && regs)
        qk_impl(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_Q4_0 && regs)
        qk_impl(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0)
        qk_buffered(st, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_F16)
        qk_impl(ATTN_ST_F16, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_BF16)
        qk_impl(ATTN_ST_BF16, q, ldq, R, k, nk, d, scale, s, lds, far);
    else
        qk_impl(ATTN_ST_F32, q, ldq, R, k, nk, d, scale, s, lds, far);
}

static void pv_blocks(const int ST, const float *p, int64_t ldp, int64_t R,
                      const void *const *v, int64_t nk, int64_t d, float *o, int64_t ldo, int acc,
                      int64_t far)
{
    if (R <= QROWS_IN_REGS_PV || d > QBUF_FLOATS / 4) {
        pv_impl(ST, p, ldp, R, v, nk, d, o, ldo, acc, far, 1);
        return;
    }
    float buf[QBUF_FLOATS] __attribute__((aligned(64)));
    const void *rows[QBUF_FLOATS / 32];
    const int64_t run = QBUF_FLOATS / d;
    for (int64_t c0 = 0; c0 < nk; c0 += run) {
        const int64_t n = nk - c0 < run ? nk - c0 : run;
        dequant_rows(ST, v + c0, n, d, buf, rows, c0, v, nk, far);
        pv_impl(ATTN_ST_F32, p + c0, ldp, R, rows, n, d, o, ldo, acc || c0 > 0, 0, 0);
    }
}

static void pv_avx512(int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
                      int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far)
{
    if (IS_BLOCK(st))
        (void)attn_f16_table();
    if (st == ATTN_ST_Q8_0)
        pv_blocks(ATTN_ST_Q8_0, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else if (st == ATTN_ST_Q4_0)
        pv_blocks(ATTN_ST_Q4_0, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else if (st == ATTN_ST_F16)
        pv_impl(ATTN_ST_F16, p, ldp, R, v, nk, d, o, ldo, acc, far, 1);
    else if (st == ATTN_ST_BF16)
        pv_impl(ATTN_ST_BF16, p, ldp, R, v, nk, d, o, ldo, acc, far, 1);
    else
        pv_impl(ATTN_ST_F32, p, ldp, R, v, nk, d, o, ldo, acc, far, 1);
}

const attn_dec_kernels attn_dec_avx512 = { "avx512", qk_avx512, pv_avx512 };
