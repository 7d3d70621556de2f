/* The integer Q K^T against a Q8_0 or Q4_0 K on AVX512_VNNI (this file
 * alone is built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni
 * -mf16c).  The arithmetic is kernels/decode.h's, to the bit: the C
 * version, attn_dec_qk8_c, is its specification.
 *
 * Keys go in groups of 16, one per lane.  A group's quants are transposed
 * once into kt[block][j][16 keys] (dword j of a block: its values 4j to
 * 4j + 3), so a query row's block is 8 VPDPBUSD of its int8 quadruples,
 * each broadcast from memory, against those 8 registers, giving the 16
 * keys' integer dot products with no horizontal sum; then one convert and
 * one fused multiply-add by the 16 keys' scales times the row's.
 * VPDPBUSD multiplies unsigned bytes by signed ones: the keys' quants are
 * made unsigned (Q8_0: q + 128, by flipping the top bit; Q4_0: the
 * nibble, q + 8 as stored) and the row's integer accumulator starts at
 * -128 (or -8) times the sum of its block's int8 values, which cancels
 * the offset exactly.  The group's transposes are shared by all R rows. */
#include "attn_config.h"
#include "kernels/decode.h"
#include "kernels/decode_pf.h"
#include "kernels/quant.h"
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

enum { NB_MAX = ATTN_QK8_MAX_D / 32, ROWS = 16 };

/* Row x's blocks rounded by attn_qk8_round_block's rule: the int8 values
 * into q (d bytes), the scales into sc, the accumulators' start values
 * (-off x the block's sum) into base. */
static void round_row(const float *x, int64_t nb, int off, int8_t *q, float *sc, int32_t *base)
{
    const __m512 fmax = _mm512_set1_ps(FLT_MAX), half = _mm512_set1_ps(0.5f);
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    for (int64_t b = 0; b < nb; b++) {
        const __m512 lo = _mm512_loadu_ps(x + 32 * b), hi = _mm512_loadu_ps(x + 32 * b + 16);
        const __m512 alo = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(lo), absm));
        const __m512 ahi = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(hi), absm));
        /* (ordered compares: a NaN fails them too) */
        const int bad = (_mm512_cmp_ps_mask(alo, fmax, _CMP_LE_OQ) &
                         _mm512_cmp_ps_mask(ahi, fmax, _CMP_LE_OQ)) != 0xffff;
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(alo, ahi));
        const float s = amax / 127.0f;
        if (bad || !(s >= FLT_MIN)) {
            memset(q + 32 * b, 0, 32);
            sc[b] = bad ? NAN : 0.0f;
            base[b] = 0;
            continue;
        }
        const __m512 id = _mm512_set1_ps(1.0f / s);
        __m512i qi[2];
        for (int h = 0; h < 2; h++) {
            /* roundf: truncate, then away from zero where the part cut
             * off is at least one half (both steps exact) */
            const __m512 v = _mm512_mul_ps(h ? hi : lo, id);
            __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m512 fr = _mm512_castsi512_ps(
                _mm512_and_si512(_mm512_castps_si512(_mm512_sub_ps(v, t)), absm));
            const __mmask16 up = _mm512_cmp_ps_mask(fr, half, _CMP_GE_OQ);
            const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(
                _mm512_castps_si512(_mm512_set1_ps(1.0f)),
                _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))));
            t = _mm512_mask_add_ps(t, up, t, one);
            qi[h] = _mm512_cvttps_epi32(t);
            _mm_storeu_si128((__m128i *)(q + 32 * b + 16 * h), _mm512_cvtepi32_epi8(qi[h]));
        }
        sc[b] = s;
        base[b] = -off * _mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
    }
}

/* The quants of block b of 16 Q8_0 keys, transposed and made unsigned:
 * kt[j] lane c = bytes 4j..4j+3 of key c's block, each + 128. */
INLINE void tr_q8_0(const uint8_t *const kr[16], int64_t b, __m512i kt[8])
{
    const int64_t o = b * ATTN_Q8_0_BYTES + 2;
    __m512i z[8], t[8], u[8];
    for (int i = 0; i < 8; i++)
        z[i] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(kr[i] + o))),
            _mm256_loadu_si256((const __m256i *)(kr[i + 8] + o)), 1);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);       /* dwords 0 / 4 */
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);   /* 1 / 5 */
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]); /* 2 / 6 */
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]); /* 3 / 7 */
    }
    const __m512i ia = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i ib = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int j = 0; j < 4; j++) {
        kt[j] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[j], ia, u[j + 4]), flip);
        kt[j + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[j], ib, u[j + 4]), flip);
    }
}

/* The same for Q4_0: the nibbles as bytes (q + 8 as stored). */
INLINE void tr_q4_0(const uint8_t *const kr[16], int64_t b, __m512i kt[8])
{
    const int64_t o = b * ATTN_Q4_0_BYTES + 2;
    __m512i y[4], t[4];
    for (int i = 0; i < 4; i++) {
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(kr[i] + o)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(kr[i + 4] + o)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(kr[i + 8] + o)), 2);
        y[i] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(kr[i + 12] + o)), 3);
    }
    t[0] = _mm512_unpacklo_epi32(y[0], y[1]);
    t[1] = _mm512_unpackhi_epi32(y[0], y[1]);
    t[2] = _mm512_unpacklo_epi32(y[2], y[3]);
    t[3] = _mm512_unpackhi_epi32(y[2], y[3]);
    const __m512i raw[4] = { _mm512_unpacklo_epi64(t[0], t[2]), _mm512_unpackhi_epi64(t[0], t[2]),
                             _mm512_unpacklo_epi64(t[1], t[3]), _mm512_unpackhi_epi64(t[1], t[3]) };
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        kt[j] = _mm512_and_si512(raw[j], m4);                          /* values 4j.. */
        kt[j + 4] = _mm512_and_si512(_mm512_srli_epi32(raw[j], 4), m4); /* 16 + 4j.. */
    }
}

/* NR rows (of the ROWS rounded ones, from rr) against the 16 keys of kt:
 * acc chains over the blocks, stored times scale into s (lanes of mk). */
INLINE void rows_pass(const int NR, const int32_t *kt, const float *ks, int64_t nb,
                      const int8_t *qq, const float *qs, const int32_t *qb, int64_t d, int64_t rr,
                      __m512 vs, float *s, int64_t lds, __mmask16 mk)
{
    __m512 acc[8];
    for (int r = 0; r < NR; r++)
        acc[r] = _mm512_setzero_ps();   /* (set by block 0's multiply) */
    for (int64_t b = 0; b < nb; b++) {
        __m512i k[8];
        for (int j = 0; j < 8; j++)
            k[j] = _mm512_load_si512((const void *)(kt + (b * 8 + j) * 16));
        const __m512 kb = _mm512_load_ps(ks + b * 16);
        /* the rows' integer sums side by side (independent chains); up to
         * 4 rows, two chains a row (even and odd j), added at the end
         * (exact: integers) */
        const int CH = NR <= 4 ? 2 : 1;
        __m512i a[2][8];
        for (int r = 0; r < NR; r++) {
            a[0][r] = _mm512_set1_epi32(qb[(rr + r) * NB_MAX + b]);
            if (CH == 2)
                a[1][r] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < NR; r++) {
                int32_t w;
                memcpy(&w, qq + (rr + r) * d + 32 * b + 4 * j, 4);
                a[j % CH][r] = _mm512_dpbusd_epi32(a[j % CH][r], k[j], _mm512_set1_epi32(w));
            }
        for (int r = 0; r < NR; r++) {
            const __m512i t = CH == 2 ? _mm512_add_epi32(a[0][r], a[1][r]) : a[0][r];
            const __m512 f = _mm512_cvtepi32_ps(t);
            const __m512 wv = _mm512_mul_ps(kb, _mm512_set1_ps(qs[(rr + r) * NB_MAX + b]));
            acc[r] = b == 0 ? _mm512_mul_ps(f, wv) : _mm512_fmadd_ps(f, wv, acc[r]);
        }
    }
    for (int r = 0; r < NR; r++)
        _mm512_mask_storeu_ps(s + r * lds, mk, _mm512_mul_ps(acc[r], vs));
}

INLINE void qk8_impl(const int ST, const float *q, int64_t ldq, int64_t R, const void *const *k,
                     int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    int8_t qq[ROWS * ATTN_QK8_MAX_D] __attribute__((aligned(64)));
    float qs[ROWS * NB_MAX];
    int32_t qb[ROWS * NB_MAX];
    int32_t kt[NB_MAX * 8 * 16] __attribute__((aligned(64)));
    float ks[NB_MAX * 16] __attribute__((aligned(64)));
    uint16_t h[NB_MAX * 16] __attribute__((aligned(64)));
    const int64_t nb = d / 32, rowb = attn_st_bytes(ST, d);
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t r0 = 0; r0 < R; r0 += ROWS) {
        const int64_t nr = R - r0 < ROWS ? R - r0 : ROWS;
        for (int64_t r = 0; r < nr; r++)
            round_row(q + (r0 + r) * ldq, nb, ST == ATTN_ST_Q8_0 ? 128 : 8, qq + r * d,
                      qs + r * NB_MAX, qb + r * NB_MAX);
        for (int64_t c0 = 0; c0 < nk; c0 += 16) {
            const uint8_t *kr[16];
            for (int c = 0; c < 16; c++)
                kr[c] = (const uint8_t *)k[c0 + c < nk ? c0 + c : nk - 1];
            if (r0 == 0)
                attn_dec_prefetch_group(k, c0, 16, nk, ATTN_DEC_PF_KEYS, far, rowb);
            const int64_t bb = ST == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES;
            for (int64_t b = 0; b < nb; b++)
                for (int c = 0; c < 16; c++)
                    memcpy(&h[16 * b + c], kr[c] + b * bb, 2);
            for (int64_t b = 0; b < nb; b++) {
                __m512i t[8];
                if (ST == ATTN_ST_Q8_0)
                    tr_q8_0(kr, b, t);
                else
                    tr_q4_0(kr, b, t);
                for (int j = 0; j < 8; j++)
                    _mm512_store_si512((void *)(kt + (b * 8 + j) * 16), t[j]);
            }
            /* the 16 keys' scales, read after the transposes (a vector
             * load of 2-byte stores just made would stall store
             * forwarding; gathers were slower still) */
            for (int64_t b = 0; b < nb; b++)
                _mm512_store_ps(ks + b * 16, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(h + 16 * b))));
            const __mmask16 mk = nk - c0 >= 16 ? (__mmask16)0xffff
                                               : (__mmask16)((1u << (nk - c0)) - 1u);
            float *sr = s + r0 * lds + c0;
            int64_t r = 0;
            for (; r + 8 <= nr; r += 8)
                rows_pass(8, kt, ks, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, mk);
            for (; r + 4 <= nr; r += 4)
                rows_pass(4, kt, ks, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, mk);
            for (; r + 2 <= nr; r += 2)
                rows_pass(2, kt, ks, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, mk);
            for (; r < nr; r++)
                rows_pass(1, kt, ks, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, mk);
        }
    }
}

void attn_dec_qk8_vnni(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                       int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    if (d > ATTN_QK8_MAX_D)
        attn_dec_qk8_c(st, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_Q8_0)
        qk8_impl(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else
        qk8_impl(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far);
}
