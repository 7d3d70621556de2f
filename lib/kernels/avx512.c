/* AVX-512F row kernels (this file alone is built with -mavx512f -mfma). */
#include "attn_config.h"
#include "kernels/kernels.h"
#include "kernels/softmax_rows.h"
#include "kernels/softmax_avx512.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

static float max_avx512(const float *x, int64_t n)
{
    __mmask16 nan;
    const __m512 v = max_vec(x, n, &nan);
    return nan ? NAN : hred16(v, RED_MAX);
}

static float prep_max_avx512(float *s, int64_t n, const float *bias, const uint8_t *mask,
                             int drop)
{
    if (!bias && !mask)
        return max_avx512(s, n);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf;
    __mmask16 nan = 0;
    int64_t j = 0;
    for (; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : tail16(n - j);
        __m512 x = _mm512_maskz_loadu_ps(k, s + j);
        if (bias)
            x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, bias + j));
        if (mask) {
            __m128i bytes;
            if (k == 0xFFFF) {
                bytes = _mm_loadu_si128((const __m128i *)(const void *)(mask + j));
            } else {
                uint8_t tmp[16] = { 0 };
                memcpy(tmp, mask + j, (size_t)(n - j));
                bytes = _mm_loadu_si128((const __m128i *)(const void *)tmp);
            }
            __m512i wide = _mm512_cvtepu8_epi32(bytes);
            __mmask16 nz = _mm512_test_epi32_mask(wide, wide);
            x = _mm512_mask_mov_ps(x, drop ? nz : (__mmask16)~nz, ninf);
        }
        _mm512_mask_storeu_ps(s + j, k, x);
        m0 = _mm512_mask_max_ps(m0, k, m0, x);
        nan |= _mm512_mask_cmp_ps_mask(k, x, x, _CMP_UNORD_Q);
    }
    return nan ? NAN : hred16(m0, RED_MAX);
}

/* exp(x - m) in place; returns the two chains' sum, not yet reduced. */
static inline __attribute__((always_inline)) __m512 exp_vec(__m512 tab16, float *x, int64_t n,
                                                           float m)
{
    return exp_vec_to(tab16, x, n, m, 0);
}

static float exp_sum_avx512(float *x, int64_t n, float m)
{
    return hred16(exp_vec(_mm512_loadu_ps(attn_exp2_16), x, n, m), RED_ADD);
}

static void exp_store_avx512(float *dst, const float *src, int64_t n, float m)
{
    const __m512 tab16 = _mm512_loadu_ps(attn_exp2_16);
    __m512 vm = _mm512_set1_ps(m);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(dst + j, exp16(tab16, _mm512_sub_ps(_mm512_loadu_ps(src + j), vm), 0));
    if (j < n) {
        __mmask16 k = tail16(n - j);
        _mm512_mask_storeu_ps(dst + j, k,
                              exp16(tab16, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, src + j), vm), 0));
    }
}

static void scale_avx512(float *x, int64_t n, float a)
{
    __m512 va = _mm512_set1_ps(a);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), va));
    if (j < n) {
        __mmask16 k = tail16(n - j);
        _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), va));
    }
}


/* Dropout: Philox4x32-10 on 16 counters at once (lane l = block c + l, the
 * keys 4 (c + l) .. 4 (c + l) + 3), the same words as attn_philox4x32_10.
 * The counter's words 1..3 (i, h, b) are the same in every lane, so the
 * parts of rounds 0 and 1 that only see them are scalar, once per row. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Batches of 16 blocks drawn together (interleaved, for the latency of
 * the multiply chain): 3 measured best, 4 runs out of registers. */
#define PHILOX_NB 3

typedef struct philox_row {
    uint32_t k0[10], k1[10];  /* round keys */
    uint32_t b1;              /* b ^ k1[0]: round 0's word 2 */
    uint32_t c1;              /* lo(M1 h) ^ k0[1]: round 1's word 0 */
    uint32_t c2;              /* hi(M0 c0') ^ k1[1]: round 1's word 2 */
    uint32_t c3;              /* lo(M0 c0'): round 1's word 3 */
    int all;                  /* -1: thresh = 0 (keep none), 1: 2^32 (all), 0: test */
    uint32_t thresh;
    int have, pos;            /* next[pos .. pos + have): the batches at next_c on */
    uint32_t next_c;
    uint64_t next[PHILOX_NB];
} philox_row;

static void philox_row_init(philox_row *r, const attn_dropout *dr, int64_t b, int64_t h,
                            int64_t i)
{
    for (int k = 0; k < 10; k++) {
        r->k0[k] = dr->key[0] + (uint32_t)k * PHILOX_W0;
        r->k1[k] = dr->key[1] + (uint32_t)k * PHILOX_W1;
    }
    const uint64_t p1 = (uint64_t)PHILOX_M1 * (uint32_t)h;
    const uint32_t c0 = (uint32_t)(p1 >> 32) ^ (uint32_t)i ^ r->k0[0];  /* after round 0 */
    const uint64_t p0 = (uint64_t)PHILOX_M0 * c0;                       /* round 1 */
    r->b1 = (uint32_t)b ^ r->k1[0];
    r->c1 = (uint32_t)p1 ^ r->k0[1];
    r->c2 = (uint32_t)(p0 >> 32) ^ r->k1[1];
    r->c3 = (uint32_t)p0;
    r->all = dr->thresh == 0 ? -1 : dr->thresh > 0xFFFFFFFFu ? 1 : 0;
    r->thresh = (uint32_t)dr->thresh;
    r->have = 0;
    r->next_c = 0;
    r->pos = 0;
}

/* The 32x32->64 products of the 16 lanes of a by m: even lanes from one
 * vpmuludq, odd lanes from another on a copy with the odd words moved
 * down; the high and low words put back in lane order by two masked
 * in-lane shuffles (cheaper than vpermt2d or shift + blend on the CPUs
 * measured). */
static inline void mulhilo16(__m512i a, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i e = _mm512_mul_epu32(a, m);
    __m512i o = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_DDBB), m);
    *hi = _mm512_mask_shuffle_epi32(o, 0x5555, e, _MM_PERM_DDBB);
    *lo = _mm512_mask_shuffle_epi32(e, 0xAAAA, o, _MM_PERM_CCAA);
}

#define XOR3(a, b, c) _mm512_ternarylogic_epi32(a, b, c, 0x96)

/* Keep bits of the NB * 64 keys 4c .. 4c + 64 NB - 1: bit q of out[v] for
 * key 4c + 64v + q.  NB (1 .. PHILOX_NB) independent batches interleaved:
 * one batch alone waits on the latency of the multiply chain. */
static inline __attribute__((always_inline)) void
philox_bits(const philox_row *r, uint32_t c, const int NB, uint64_t *out)
{
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i x0[PHILOX_NB], x1[PHILOX_NB], x2[PHILOX_NB], x3[PHILOX_NB], h0[PHILOX_NB], l0[PHILOX_NB],
        h1[PHILOX_NB], l1[PHILOX_NB];
    for (int v = 0; v < NB; v++) {
        const __m512i ctr = _mm512_add_epi32(_mm512_set1_epi32((int)(c + 16u * (uint32_t)v)), iota);
        mulhilo16(ctr, m0, &h0[v], &l0[v]);                            /* round 0 */
        x2[v] = _mm512_xor_si512(h0[v], _mm512_set1_epi32((int)r->b1));
        mulhilo16(x2[v], m1, &h1[v], &l1[v]);                          /* round 1 */
        x0[v] = _mm512_xor_si512(h1[v], _mm512_set1_epi32((int)r->c1));
        x1[v] = l1[v];
        x2[v] = _mm512_xor_si512(l0[v], _mm512_set1_epi32((int)r->c2));
        x3[v] = _mm512_set1_epi32((int)r->c3);
    }
    for (int k = 2; k < 10; k++) {
        const __m512i k0 = _mm512_set1_epi32((int)r->k0[k]), k1 = _mm512_set1_epi32((int)r->k1[k]);
        for (int v = 0; v < NB; v++) {
            mulhilo16(x0[v], m0, &h0[v], &l0[v]);
            mulhilo16(x2[v], m1, &h1[v], &l1[v]);
            x0[v] = XOR3(h1[v], x1[v], k0);
            x1[v] = l1[v];
            x2[v] = XOR3(h0[v], x3[v], k1);
            x3[v] = l0[v];
        }
    }
    const __m512i th = _mm512_set1_epi32((int)r->thresh);
    for (int v = 0; v < NB; v++) {
        /* Transpose to key order: 4x4 words within each 128-bit lane, then
         * the 128-bit lanes across the four vectors. */
        __m512i t0 = _mm512_unpacklo_epi32(x0[v], x1[v]), t1 = _mm512_unpacklo_epi32(x2[v], x3[v]);
        __m512i t2 = _mm512_unpackhi_epi32(x0[v], x1[v]), t3 = _mm512_unpackhi_epi32(x2[v], x3[v]);
        __m512i r0 = _mm512_unpacklo_epi64(t0, t1), r1 = _mm512_unpackhi_epi64(t0, t1);
        __m512i r2 = _mm512_unpacklo_epi64(t2, t3), r3 = _mm512_unpackhi_epi64(t2, t3);
        __m512i a = _mm512_shuffle_i32x4(r0, r1, 0x44), bb = _mm512_shuffle_i32x4(r2, r3, 0x44);
        __m512i cc = _mm512_shuffle_i32x4(r0, r1, 0xEE), d = _mm512_shuffle_i32x4(r2, r3, 0xEE);
        uint64_t q0 = _mm512_cmplt_epu32_mask(_mm512_shuffle_i32x4(a, bb, 0x88), th);
        uint64_t q1 = _mm512_cmplt_epu32_mask(_mm512_shuffle_i32x4(a, bb, 0xDD), th);
        uint64_t q2 = _mm512_cmplt_epu32_mask(_mm512_shuffle_i32x4(cc, d, 0x88), th);
        uint64_t q3 = _mm512_cmplt_epu32_mask(_mm512_shuffle_i32x4(cc, d, 0xDD), th);
        out[v] = q0 | q1 << 16 | q2 << 32 | q3 << 48;
    }
}

/* The bits of the batch at block c (64 keys): from the batches drawn ahead
 * if it is the next one, else drawn with up to PHILOX_NB - 1 following
 * batches, as many as the row needs (more keys from 4c on). */
static inline uint64_t philox_fetch(philox_row *r, uint32_t c, int64_t more)
{
    if (r->all)
        return r->all > 0 ? ~(uint64_t)0 : 0;
    if (r->have && r->next_c == c) {
        r->have--;
        r->next_c += 16;
        return r->next[r->pos++];
    }
    uint64_t out[PHILOX_NB];
    int64_t nb = (more + 63) / 64;
    if (nb >= PHILOX_NB) {
        philox_bits(r, c, PHILOX_NB, out);
        nb = PHILOX_NB;
    }
#if PHILOX_NB > 3
    else if (nb == 3)
        philox_bits(r, c, 3, out);
#endif
#if PHILOX_NB > 2
    else if (nb == 2)
        philox_bits(r, c, 2, out);
#endif
    else {
        philox_bits(r, c, 1, out);
        nb = 1;
    }
    for (int v = 1; v < nb; v++)
        r->next[v] = out[v];
    r->have = (int)nb - 1;
    r->pos = 1;
    r->next_c = c + 16;
    return out[0];
}

/* Runs BODY on the chunks of 64 elements of the row x[0..n) (keys j0 ..
 * j0 + n - 1) with xi_ the chunk's first element, len_ its length and
 * bits_ the keep bit of x[xi_ + q] at bit q.  j0 need not be a multiple of
 * 4: the batches start at block j0 / 4 and the bits are shifted by j0 % 4;
 * each batch is drawn once. */
#define DROPOUT_CHUNKS(dr, b, h, i, j0, n, BODY)                                   \
    do {                                                                           \
        philox_row r_;                                                             \
        philox_row_init(&r_, (dr), (b), (h), (i));                                 \
        const int s_ = (int)((j0) & 3);                                            \
        uint32_t c_ = (uint32_t)((j0) >> 2);                                       \
        uint64_t cur_ = philox_fetch(&r_, c_, s_ + (n));                           \
        for (int64_t xi_ = 0; xi_ < (n); xi_ += 64) {                              \
            const int64_t len_ = (n) - xi_ < 64 ? (n) - xi_ : 64;                  \
            uint64_t bits_ = cur_ >> s_;                                           \
            if (s_ + len_ > 64 || xi_ + 64 < (n)) {                                \
                c_ += 16;                                                          \
                cur_ = philox_fetch(&r_, c_, s_ + (n) - xi_ - 64);                 \
                if (s_)                                                            \
                    bits_ |= cur_ << (64 - s_);                                    \
            }                                                                      \
            BODY;                                                                  \
        }                                                                          \
    } while (0)

/* The 16-lane pieces of a chunk: t_ the lanes in the row, k_ the kept. */
#define CHUNK_PIECES(BODY)                                                         \
    for (int q_ = 0; q_ < 4 && 16 * q_ < len_; q_++) {                             \
        const int64_t o_ = xi_ + 16 * q_;                                          \
        const __mmask16 t_ = len_ - 16 * q_ >= 16 ? (__mmask16)0xFFFF              \
                                                  : tail16(len_ - 16 * q_);        \
        const __mmask16 k_ = (__mmask16)(bits_ >> (16 * q_)) & t_;                 \
        BODY;                                                                      \
    }

static void dropout_row_avx512(const attn_dropout *dr, float *x, int64_t b, int64_t h,
                               int64_t i, int64_t j0, int64_t n)
{
    const __m512 s = _mm512_set1_ps(dr->scale);
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, CHUNK_PIECES({
        __m512 v = _mm512_maskz_loadu_ps(t_, x + o_);
        _mm512_mask_storeu_ps(x + o_, t_, _mm512_maskz_mul_ps(k_, v, s));
    }));
}

static void dropout_bwd_row_avx512(const attn_dropout *dr, float *pr, float *dpr, float D,
                                   int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n)
{
    const __m512 s = _mm512_set1_ps(dr->scale), vd = _mm512_set1_ps(D);
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, CHUNK_PIECES({
        __m512 pv = _mm512_maskz_loadu_ps(t_, pr + o_);
        __m512 dp = _mm512_maskz_mul_ps(k_, _mm512_maskz_loadu_ps(t_, dpr + o_), s);
        _mm512_mask_storeu_ps(dpr + o_, t_, _mm512_mul_ps(pv, _mm512_sub_ps(dp, vd)));
        _mm512_mask_storeu_ps(pr + o_, t_, _mm512_maskz_mul_ps(k_, pv, s));
    }));
}

static void dropout_keep_row_avx512(const attn_dropout *dr, uint8_t *keep, int64_t b,
                                    int64_t h, int64_t i, int64_t j0, int64_t n)
{
    const __m512i one = _mm512_set1_epi32(1);
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, CHUNK_PIECES({
        _mm512_mask_cvtepi32_storeu_epi8(keep + o_, t_, _mm512_maskz_mov_epi32(k_, one));
    }));
}

static void softmax_rows_avx512(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                                float *corr)
{
    softmax_rows_to(s, lds, R, n, m, l, corr, 0);
}

/* The same with P rounded to BF16 as it is stored (the BF16 products'
 * P V reads it): one pass over the row instead of two. */
static void softmax_rows_p16_avx512(float *s, int64_t lds, int64_t R, int64_t n, float *m,
                                    float *l, float *corr)
{
    softmax_rows_to(s, lds, R, n, m, l, corr, 1);
}

const attn_kernels attn_kernels_avx512 = {
    "avx512", max_avx512, prep_max_avx512, exp_sum_avx512, exp_store_avx512, scale_avx512,
    softmax_rows_avx512, softmax_rows_p16_avx512,
    dropout_row_avx512, dropout_bwd_row_avx512, dropout_keep_row_avx512,
};

#if ATTN_HAVE_AVX512BF16
/* The AVX512-BF16 level: the same table with P rounded by VCVTNEPS2BF16
 * (softmax_avx512bf16.c), the same bits. */
const attn_kernels attn_kernels_avx512bf16 = {
    "avx512", max_avx512, prep_max_avx512, exp_sum_avx512, exp_store_avx512, scale_avx512,
    softmax_rows_avx512, attn_softmax_rows_p16_avx512bf16,
    dropout_row_avx512, dropout_bwd_row_avx512, dropout_keep_row_avx512,
};
#endif
