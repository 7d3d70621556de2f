/* The integer Q K^T against a Q8_0 or Q4_0 K on AVX2 (this file alone is
 * built with -mavx2 -mfma -mf16c), for CPUs without AVX512_VNNI.  The
 * arithmetic is kernels/decode.h's, to the bit: the C version,
 * attn_dec_qk8_c, is its specification.
 *
 * As the VNNI kernel (decode_vnni.c), with 8 keys per register, one per
 * lane: a group's quants are transposed once into kt[block][j][8 keys]
 * (dword j of a block: its values 4j to 4j + 3), so a row's block is 8
 * products of its int8 quadruples, each broadcast, against those 8
 * registers, with no horizontal sum.  Without VPDPBUSD a product is
 * VPMADDUBSW (unsigned bytes times signed ones, pairs summed into 16 bits,
 * saturating) then VPMADDWD by ones (pairs into 32 bits) and an add:
 * - Q4_0: the nibbles (q + 8, at most 15) times the row's int8 values: a
 *   pair is at most 2 x 15 x 127, far from saturating; the accumulator
 *   starts at -8 times the sum of the row's block, which cancels the
 *   offset exactly (as in the VNNI kernel).
 * - Q8_0: |q| (at most 128, as unsigned bytes) times the row's values with
 *   the key's signs (VPSIGNB: a value whose key quant is 0 becomes 0, and
 *   the row's values are in [-127, 127], so none overflows): a pair is at
 *   most 2 x 128 x 127 = 32512 < 32767, so nothing saturates and every
 *   block sum is exact.
 * The group's transposes (and Q8_0's absolute values) are shared by all
 * the rows. */
#include "attn_config.h"
#include "kernels/decode.h"
#include "kernels/decode_pf.h"
#include "kernels/quant.h"
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

enum { NB_MAX = ATTN_QK8_MAX_D / 32, ROWS = 8, KEYS = 8 };

/* Block x[0..31] of a row rounded as attn_qk8_round_block does, to the
 * bit (its C loop, with roundf a call per value, took a third of a call's
 * time): the int8 values into q, the scale returned, their sum in *sum. */
static float round_block(const float *x, int8_t q[32], int32_t *sum)
{
    const __m256 fmax = _mm256_set1_ps(FLT_MAX), half = _mm256_set1_ps(0.5f);
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 v[4], amax = _mm256_setzero_ps();
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        const __m256 a = _mm256_and_ps(v[i], absm);
        /* (ordered compare: a NaN fails it too) */
        ok &= _mm256_movemask_ps(_mm256_cmp_ps(a, fmax, _CMP_LE_OQ)) == 0xff;
        amax = _mm256_max_ps(amax, a);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float sc = _mm_cvtss_f32(m) / 127.0f;
    *sum = 0;
    if (!ok || !(sc >= FLT_MIN)) {
        memset(q, 0, 32);
        return ok ? 0.0f : NAN;
    }
    const __m256 id = _mm256_set1_ps(1.0f / sc);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 sgn = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < 4; i++) {
        /* roundf: truncate, then away from zero where the part cut off is
         * at least one half (both steps exact) */
        const __m256 w = _mm256_mul_ps(v[i], id);
        const __m256 t = _mm256_round_ps(w, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        const __m256 up = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(w, t), absm), half, _CMP_GE_OQ);
        const __m256 step = _mm256_and_ps(up, _mm256_or_ps(one, _mm256_and_ps(w, sgn)));
        const __m256i qi = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
        acc = _mm256_add_epi32(acc, qi);
        /* the 8 int32 (in [-127, 127]) to bytes */
        const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
        _mm_storel_epi64((__m128i *)(q + 8 * i), _mm_packs_epi16(p16, p16));
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    *sum = _mm_cvtsi128_si32(s4);
    return sc;
}

/* 4 x 4 dword transposes within each 128-bit lane of y[0..3]: out[j] lane
 * L, dword i = dword j of y[i]'s lane L. */
INLINE void tr4(const __m256i y[4], __m256i out[4])
{
    const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]), t1 = _mm256_unpackhi_epi32(y[0], y[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]), t3 = _mm256_unpackhi_epi32(y[2], y[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* 16 bytes at off of key c (low lane) and of key c + 4 (high lane). */
INLINE __m256i pair16(const uint8_t *const kr[KEYS], int c, int64_t off)
{
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(kr[c] + off))),
        _mm_loadu_si128((const __m128i *)(kr[c + 4] + off)), 1);
}

/* Block b of the 8 keys transposed: kt[j] lane c = dword j of key c's
 * block (Q8_0: the signed quants; Q4_0: the nibbles as bytes, values 4j..
 * for j < 4 and 16 + 4(j - 4).. above). */
INLINE void tr_block(const int ST, const uint8_t *const kr[KEYS], int64_t b, __m256i kt[8])
{
    __m256i y[4];
    if (ST == ATTN_ST_Q8_0) {
        const int64_t o = b * ATTN_Q8_0_BYTES + 2;
        for (int h = 0; h < 2; h++) {
            for (int i = 0; i < 4; i++)
                y[i] = pair16(kr, i, o + 16 * h);
            tr4(y, kt + 4 * h);
        }
        return;
    }
    const int64_t o = b * ATTN_Q4_0_BYTES + 2;
    __m256i raw[4];
    for (int i = 0; i < 4; i++)
        y[i] = pair16(kr, i, o);
    tr4(y, raw);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        kt[j] = _mm256_and_si256(raw[j], m4);
        kt[j + 4] = _mm256_and_si256(_mm256_srli_epi32(raw[j], 4), m4);
    }
}

/* NR rows (rr on, of the rounded ones) against the 8 keys: ka the keys'
 * unsigned factors, ks (Q8_0 only) their signed quants, kb their scales;
 * stored times scale into s (the first nk lanes). */
INLINE void rows_pass(const int ST, const int NR, const int32_t *ka, const int32_t *ksg,
                      const float *kb, int64_t nb, const int8_t *qq, const float *qs,
                      const int32_t *qb, int64_t d, int64_t rr, __m256 vs, float *s,
                      int64_t lds, int64_t nk)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int r = 0; r < NR; r++)
        acc[r] = _mm256_setzero_ps();   /* (set by block 0's multiply) */
    for (int64_t b = 0; b < nb; b++) {
        __m256i a[4];
        for (int r = 0; r < NR; r++)
            a[r] = _mm256_set1_epi32(ST == ATTN_ST_Q4_0 ? qb[(rr + r) * NB_MAX + b] : 0);
        for (int j = 0; j < 8; j++) {
            const __m256i k = _mm256_load_si256((const __m256i *)(ka + (b * 8 + j) * KEYS));
            __m256i sg = k;
            if (ST == ATTN_ST_Q8_0)
                sg = _mm256_load_si256((const __m256i *)(ksg + (b * 8 + j) * KEYS));
            for (int r = 0; r < NR; r++) {
                int32_t w;
                memcpy(&w, qq + (rr + r) * d + 32 * b + 4 * j, 4);
                __m256i qv = _mm256_set1_epi32(w);
                if (ST == ATTN_ST_Q8_0)
                    qv = _mm256_sign_epi8(qv, sg);
                a[r] = _mm256_add_epi32(a[r], _mm256_madd_epi16(_mm256_maddubs_epi16(k, qv), ones));
            }
        }
        const __m256 kbv = _mm256_load_ps(kb + b * KEYS);
        for (int r = 0; r < NR; r++) {
            const __m256 f = _mm256_cvtepi32_ps(a[r]);
            const __m256 wv = _mm256_mul_ps(kbv, _mm256_set1_ps(qs[(rr + r) * NB_MAX + b]));
            acc[r] = b == 0 ? _mm256_mul_ps(f, wv) : _mm256_fmadd_ps(f, wv, acc[r]);
        }
    }
    for (int r = 0; r < NR; r++) {
        const __m256 v = _mm256_mul_ps(acc[r], vs);
        if (nk >= KEYS) {
            _mm256_storeu_ps(s + r * lds, v);
        } else {
            float t[KEYS];
            _mm256_storeu_ps(t, v);
            memcpy(s + r * lds, t, (size_t)nk * sizeof(float));
        }
    }
}

INLINE void qk8_impl(const int ST, const float *q, int64_t ldq, int64_t R, const void *const *k,
                     int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    int8_t qq[ROWS * ATTN_QK8_MAX_D];
    float qs[ROWS * NB_MAX];
    int32_t qb[ROWS * NB_MAX];
    int32_t ka[NB_MAX * 8 * KEYS] __attribute__((aligned(32)));
    int32_t ksg[NB_MAX * 8 * KEYS] __attribute__((aligned(32)));
    float kb[NB_MAX * KEYS] __attribute__((aligned(32)));
    uint16_t h[NB_MAX * KEYS] __attribute__((aligned(32)));
    const int64_t nb = d / 32, rowb = attn_st_bytes(ST, d);
    const int64_t bb = ST == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES;
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t r0 = 0; r0 < R; r0 += ROWS) {
        const int64_t nr = R - r0 < ROWS ? R - r0 : ROWS;
        for (int64_t r = 0; r < nr; r++)
            for (int64_t b = 0; b < nb; b++) {
                int32_t sum;
                qs[r * NB_MAX + b] = round_block(q + (r0 + r) * ldq + 32 * b,
                                                 qq + r * d + 32 * b, &sum);
                qb[r * NB_MAX + b] = -8 * sum;   /* (Q4_0's start value) */
            }
        for (int64_t c0 = 0; c0 < nk; c0 += KEYS) {
            const uint8_t *kr[KEYS];
            for (int c = 0; c < KEYS; c++)
                kr[c] = (const uint8_t *)k[c0 + c < nk ? c0 + c : nk - 1];
            if (r0 == 0)
                attn_dec_prefetch_group(k, c0, KEYS, nk, ATTN_DEC_PF_KEYS, far, rowb);
            for (int64_t b = 0; b < nb; b++)
                for (int c = 0; c < KEYS; c++)
                    memcpy(&h[KEYS * b + c], kr[c] + b * bb, 2);
            for (int64_t b = 0; b < nb; b++) {
                __m256i t[8];
                tr_block(ST, kr, b, t);
                for (int j = 0; j < 8; j++) {
                    __m256i *dst = (__m256i *)(ka + (b * 8 + j) * KEYS);
                    if (ST == ATTN_ST_Q8_0) {
                        _mm256_store_si256(dst, _mm256_abs_epi8(t[j]));
                        _mm256_store_si256((__m256i *)(ksg + (b * 8 + j) * KEYS), t[j]);
                    } else {
                        _mm256_store_si256(dst, t[j]);
                    }
                }
            }
            /* (the scales read after the transposes' stores, as in the
             * VNNI kernel) */
            for (int64_t b = 0; b < nb; b++)
                _mm256_store_ps(kb + b * KEYS,
                                _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(h + KEYS * b))));
            const int64_t left = nk - c0;
            float *sr = s + r0 * lds + c0;
            int64_t r = 0;
            for (; r + 4 <= nr; r += 4)
                rows_pass(ST, 4, ka, ksg, kb, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, left);
            for (; r + 2 <= nr; r += 2)
                rows_pass(ST, 2, ka, ksg, kb, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, left);
            for (; r < nr; r++)
                rows_pass(ST, 1, ka, ksg, kb, nb, qq, qs, qb, d, r, vs, sr + r * lds, lds, left);
        }
    }
}

void attn_dec_qk8_avx2(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                       int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    if (d > ATTN_QK8_MAX_D)
        attn_dec_qk8_c(st, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_Q8_0)
        qk8_impl(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else
        qk8_impl(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far);
}
