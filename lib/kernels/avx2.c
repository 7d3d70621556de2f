/* AVX2 + FMA row kernels (this file alone is built with -mavx2 -mfma). */
#include "attn_config.h"
#include "kernels/kernels.h"
#include "kernels/softmax_rows.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

/* The steps of attn_exp_scalar, 2^(j/16) by two permutes of the table's
 * halves (each reads the low 3 bits of a lane of t) and a blend on bit 3.
 * Lanes below lo are cleared at the end (their arithmetic, even on -inf,
 * is discarded); min(hi, x) returns x when x is NaN, so NaN propagates;
 * above log(FLT_MAX) the product by 2^k overflows to inf.  With open, min
 * is left out, for exp_sum, whose x (s - m, m at least every s) is never
 * +inf: the same bits (see avx512.c). */
static inline __attribute__((always_inline)) __m256 exp8(const __m256 *tab, __m256 x,
                                                         const int open)
{
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.336544f), _CMP_LT_OQ);
    const __m256 magic = _mm256_set1_ps(786432.0f);
    const __m256 xc = open ? x : _mm256_min_ps(_mm256_set1_ps(100.0f), x);
    const __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    const __m256 y = _mm256_sub_ps(t, magic);
    __m256 r = _mm256_fnmadd_ps(y, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(y, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_fmadd_ps(r, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256 q = _mm256_mul_ps(p, r);
    const __m256i ti = _mm256_castps_si256(t);
    const __m256 hi8 = _mm256_castsi256_ps(_mm256_slli_epi32(ti, 28));  /* bit 3 -> sign */
    const __m256 tb = _mm256_blendv_ps(_mm256_permutevar8x32_ps(tab[0], ti),
                                       _mm256_permutevar8x32_ps(tab[1], ti), hi8);
    __m256 e = _mm256_fmadd_ps(tb, q, tb);
    /* k = floor(y): (t's encoding - magic's) is round(16 x log2(e)). */
    const __m256i ki = _mm256_srai_epi32(_mm256_sub_epi32(ti, _mm256_set1_epi32(0x49400000)), 4);
    /* 2^k as two normal factors (k in [-127, 144]). */
    __m256i k1 = _mm256_srai_epi32(ki, 1);
    __m256i k2 = _mm256_sub_epi32(ki, k1);
    __m256i bias = _mm256_set1_epi32(127);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    e = _mm256_mul_ps(_mm256_mul_ps(e, f1), f2);
    return _mm256_andnot_ps(under, e);
}

static inline float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* Eight vectors' hmax8 or hsum8 in one pass of shuffles, pairing the
 * lanes as those do (i with i + 4, then i + 2, then i + 1; v is
 * overwritten): row r's result lands in out[4 (r % 2) + r / 2]. */
static inline __attribute__((always_inline)) __m256 op8(__m256 a, __m256 b, const int max)
{
    return max ? _mm256_max_ps(a, b) : _mm256_add_ps(a, b);
}

static inline __attribute__((always_inline)) void reduce8(__m256 v[8], float out[8],
                                                         const int max)
{
    for (int p = 0; p < 4; p++) {
        const __m256 a = v[2 * p], b = v[2 * p + 1];
        v[p] = op8(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31), max);
    }
    for (int p = 0; p < 2; p++) {
        const __m256 a = v[2 * p], b = v[2 * p + 1];
        v[p] = op8(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xEE), max);
    }
    _mm256_storeu_ps(out, op8(_mm256_shuffle_ps(v[0], v[1], 0x88),
                              _mm256_shuffle_ps(v[0], v[1], 0xDD), max));
}

static inline __m256i tail_mask(int64_t r)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* max_ps drops a NaN operand, so NaNs are tracked on the side (*nan,
 * nonzero lanes where a NaN was seen): the max of a row holding a NaN is
 * NaN, as in the C table. */
static inline __attribute__((always_inline)) __m256 max_vec8(const float *x, int64_t n,
                                                            __m256 *nanp)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, nan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + 8);
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    }
    for (; j + 8 <= n; j += 8) {
        __m256 a = _mm256_loadu_ps(x + j);
        m0 = _mm256_max_ps(m0, a);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    }
    if (j < n) {
        __m256i k = tail_mask(n - j);
        __m256 v = _mm256_maskload_ps(x + j, k);
        v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(k));
        m1 = _mm256_max_ps(m1, v);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    *nanp = nan;
    return _mm256_max_ps(m0, m1);
}

static float max_avx2(const float *x, int64_t n)
{
    __m256 nan;
    const __m256 v = max_vec8(x, n, &nan);
    return _mm256_movemask_ps(nan) ? NAN : hmax8(v);
}

static float prep_max_avx2(float *s, int64_t n, const float *bias, const uint8_t *mask, int drop)
{
    if (!bias && !mask)
        return max_avx2(s, n);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i zero = _mm256_setzero_si256();
    __m256 m0 = ninf, nan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(s + j);
        if (bias)
            x = _mm256_add_ps(x, _mm256_loadu_ps(bias + j));
        if (mask) {
            int64_t bytes;
            memcpy(&bytes, mask + j, sizeof bytes);
            __m256i mz = _mm256_cmpeq_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes)), zero);
            /* hidden: nonzero when drop, zero when keep */
            __m256 hide = _mm256_castsi256_ps(drop ? _mm256_xor_si256(mz, _mm256_set1_epi32(-1)) : mz);
            x = _mm256_blendv_ps(x, ninf, hide);
        }
        _mm256_storeu_ps(s + j, x);
        m0 = _mm256_max_ps(m0, x);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    float m = hmax8(m0);
    int any_nan = _mm256_movemask_ps(nan) != 0;
    for (; j < n; j++) {
        float x = s[j];
        if (bias)
            x += bias[j];
        if (mask && (mask[j] != 0) == (drop != 0))
            x = -INFINITY;
        s[j] = x;
        m = x > m ? x : m;
        any_nan |= x != x;
    }
    return any_nan ? NAN : m;
}

/* exp(x - m) in place; returns the two chains' sum, not yet reduced. */
static inline __attribute__((always_inline)) __m256 exp_vec8(const __m256 *tab, float *x,
                                                            int64_t n, float m)
{
    __m256 vm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a = exp8(tab, _mm256_sub_ps(_mm256_loadu_ps(x + j), vm), 1);
        __m256 b = exp8(tab, _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm), 1);
        _mm256_storeu_ps(x + j, a);
        _mm256_storeu_ps(x + j + 8, b);
        s0 = _mm256_add_ps(s0, a);
        s1 = _mm256_add_ps(s1, b);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 a = exp8(tab, _mm256_sub_ps(_mm256_loadu_ps(x + j), vm), 1);
        _mm256_storeu_ps(x + j, a);
        s0 = _mm256_add_ps(s0, a);
    }
    if (j < n) {
        __m256i k = tail_mask(n - j);
        __m256 a = exp8(tab, _mm256_sub_ps(_mm256_maskload_ps(x + j, k), vm), 1);
        a = _mm256_and_ps(a, _mm256_castsi256_ps(k));
        _mm256_maskstore_ps(x + j, k, a);
        s1 = _mm256_add_ps(s1, a);
    }
    return _mm256_add_ps(s0, s1);
}

static float exp_sum_avx2(float *x, int64_t n, float m)
{
    const __m256 tab[2] = { _mm256_loadu_ps(attn_exp2_16), _mm256_loadu_ps(attn_exp2_16 + 8) };
    return hsum8(exp_vec8(tab, x, n, m));
}

static void exp_store_avx2(float *dst, const float *src, int64_t n, float m)
{
    const __m256 tab[2] = { _mm256_loadu_ps(attn_exp2_16), _mm256_loadu_ps(attn_exp2_16 + 8) };
    __m256 vm = _mm256_set1_ps(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(dst + j, exp8(tab, _mm256_sub_ps(_mm256_loadu_ps(src + j), vm), 0));
    if (j < n) {
        __m256i k = tail_mask(n - j);
        _mm256_maskstore_ps(dst + j, k,
                            exp8(tab, _mm256_sub_ps(_mm256_maskload_ps(src + j, k), vm), 0));
    }
}

static void scale_avx2(float *x, int64_t n, float a)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), va));
    if (j < n) {
        __m256i k = tail_mask(n - j);
        _mm256_maskstore_ps(x + j, k, _mm256_mul_ps(_mm256_maskload_ps(x + j, k), va));
    }
}


/* Dropout: Philox4x32-10 on 8 counters at once (lane l = block c + l, the
 * keys 4 (c + l) .. 4 (c + l) + 3), the same words as attn_philox4x32_10.
 * The counter's words 1..3 (i, h, b) are the same in every lane, so the
 * parts of rounds 0 and 1 that only see them are scalar, once per row. */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Batches of 8 blocks drawn together (interleaved, for the latency of the
 * multiply chain); 2 keeps the state in 16 registers. */
#define PHILOX_NB 2

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
    r->pos = 0;
    r->next_c = 0;
    /* Never read before philox_fetch fills it (have is 0); cleared so
     * that GCC's -Wmaybe-uninitialized (-O2 -g) sees it set. */
    memset(r->next, 0, sizeof r->next);
}

/* The 32x32->64 products of the 8 lanes of a by m: even lanes from one
 * vpmuludq, odd lanes from another on a shifted copy. */
static inline void mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i e = _mm256_mul_epu32(a, m);
    __m256i o = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(e, 32), o, 0xAA);
    *lo = _mm256_blend_epi32(e, _mm256_slli_epi64(o, 32), 0xAA);
}

#define XOR3(a, b, c) _mm256_xor_si256(_mm256_xor_si256(a, b), c)

/* Keep bits of the NB * 32 keys 4c .. 4c + 32 NB - 1: bit q of out[v] for
 * key 4c + 32v + q.  NB (1 .. PHILOX_NB) independent batches interleaved:
 * one batch alone waits on the latency of the multiply chain. */
static inline __attribute__((always_inline)) void
philox_bits(const philox_row *r, uint32_t c, const int NB, uint64_t *out)
{
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    __m256i x0[PHILOX_NB], x1[PHILOX_NB], x2[PHILOX_NB], x3[PHILOX_NB], h0[PHILOX_NB],
        l0[PHILOX_NB], h1[PHILOX_NB], l1[PHILOX_NB];
    for (int v = 0; v < NB; v++) {
        const __m256i ctr = _mm256_add_epi32(_mm256_set1_epi32((int)(c + 8u * (uint32_t)v)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        mulhilo8(ctr, m0, &h0[v], &l0[v]);                             /* round 0 */
        x2[v] = _mm256_xor_si256(h0[v], _mm256_set1_epi32((int)r->b1));
        mulhilo8(x2[v], m1, &h1[v], &l1[v]);                           /* round 1 */
        x0[v] = _mm256_xor_si256(h1[v], _mm256_set1_epi32((int)r->c1));
        x1[v] = l1[v];
        x2[v] = _mm256_xor_si256(l0[v], _mm256_set1_epi32((int)r->c2));
        x3[v] = _mm256_set1_epi32((int)r->c3);
    }
    for (int k = 2; k < 10; k++) {
        const __m256i k0 = _mm256_set1_epi32((int)r->k0[k]), k1 = _mm256_set1_epi32((int)r->k1[k]);
        for (int v = 0; v < NB; v++) {
            mulhilo8(x0[v], m0, &h0[v], &l0[v]);
            mulhilo8(x2[v], m1, &h1[v], &l1[v]);
            x0[v] = XOR3(h1[v], x1[v], k0);
            x1[v] = l1[v];
            x2[v] = XOR3(h0[v], x3[v], k1);
            x3[v] = l0[v];
        }
    }
    /* u < thresh unsigned: both offset by 2^31, then a signed compare. */
    const __m256i sign = _mm256_set1_epi32(INT32_MIN);
    const __m256i th = _mm256_xor_si256(_mm256_set1_epi32((int)r->thresh), sign);
#define KEEP8(v) \
    (uint64_t)(uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(th, _mm256_xor_si256(v, sign))))
    for (int v = 0; v < NB; v++) {
        /* Transpose to key order: 4x4 words within each 128-bit lane
         * (blocks c + L, c + 4 + L of vector L), then pair the halves. */
        __m256i t0 = _mm256_unpacklo_epi32(x0[v], x1[v]), t1 = _mm256_unpacklo_epi32(x2[v], x3[v]);
        __m256i t2 = _mm256_unpackhi_epi32(x0[v], x1[v]), t3 = _mm256_unpackhi_epi32(x2[v], x3[v]);
        __m256i r0 = _mm256_unpacklo_epi64(t0, t1), r1 = _mm256_unpackhi_epi64(t0, t1);
        __m256i r2 = _mm256_unpacklo_epi64(t2, t3), r3 = _mm256_unpackhi_epi64(t2, t3);
        uint64_t q0 = KEEP8(_mm256_permute2x128_si256(r0, r1, 0x20));
        uint64_t q1 = KEEP8(_mm256_permute2x128_si256(r2, r3, 0x20));
        uint64_t q2 = KEEP8(_mm256_permute2x128_si256(r0, r1, 0x31));
        uint64_t q3 = KEEP8(_mm256_permute2x128_si256(r2, r3, 0x31));
        out[v] = q0 | q1 << 8 | q2 << 16 | q3 << 24;
    }
#undef KEEP8
}

/* The bits of the batch at block c (32 keys): from the batches drawn ahead
 * if it is the next one, else drawn with up to PHILOX_NB - 1 following
 * batches, as many as the row needs (more keys from 4c on). */
static inline uint64_t philox_fetch(philox_row *r, uint32_t c, int64_t more)
{
    if (r->all)
        return r->all > 0 ? 0xFFFFFFFFu : 0;
    if (r->have && r->next_c == c) {
        r->have--;
        r->next_c += 8;
        return r->next[r->pos++];
    }
    uint64_t out[PHILOX_NB];
    int64_t nb = (more + 31) / 32;
    if (nb >= PHILOX_NB) {
        philox_bits(r, c, PHILOX_NB, out);
        nb = PHILOX_NB;
    }
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
    r->next_c = c + 8;
    return out[0];
}

/* Runs BODY on the chunks of 32 elements of the row x[0..n) (keys j0 ..
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
        uint64_t cur_ = philox_fetch(&r_, c_, s_ + (n));                                      \
        for (int64_t xi_ = 0; xi_ < (n); xi_ += 32) {                              \
            const int64_t len_ = (n) - xi_ < 32 ? (n) - xi_ : 32;                  \
            uint64_t bits_ = cur_ >> s_;                                           \
            if (s_ + len_ > 32 || xi_ + 32 < (n)) {                                \
                c_ += 8;                                                           \
                cur_ = philox_fetch(&r_, c_, s_ + (n) - xi_ - 32);                                     \
                bits_ |= cur_ << (32 - s_);                                        \
            }                                                                      \
            BODY;                                                                  \
        }                                                                          \
    } while (0)

/* The 8-lane pieces of a chunk: t_ the lanes in the row (all-ones lanes),
 * k_ the kept ones. */
#define CHUNK_PIECES(BODY)                                                         \
    for (int q_ = 0; q_ < 4 && 8 * q_ < len_; q_++) {                              \
        const int64_t o_ = xi_ + 8 * q_;                                           \
        const int full_ = len_ - 8 * q_ >= 8;                                      \
        const __m256i t_ = tail_mask(full_ ? 8 : len_ - 8 * q_);                   \
        const __m256i sel_ = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);      \
        const __m256i k_ = _mm256_cmpeq_epi32(                                     \
            _mm256_and_si256(_mm256_set1_epi32((int)(bits_ >> (8 * q_))), sel_), sel_); \
        BODY;                                                                      \
    }

static void dropout_row_avx2(const attn_dropout *dr, float *x, int64_t b, int64_t h, int64_t i,
                             int64_t j0, int64_t n)
{
    const __m256 s = _mm256_set1_ps(dr->scale);
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, CHUNK_PIECES({
        if (full_) {
            __m256 v = _mm256_loadu_ps(x + o_);
            _mm256_storeu_ps(x + o_, _mm256_and_ps(_mm256_mul_ps(v, s), _mm256_castsi256_ps(k_)));
        } else {
            __m256 v = _mm256_maskload_ps(x + o_, t_);
            _mm256_maskstore_ps(x + o_, t_,
                                _mm256_and_ps(_mm256_mul_ps(v, s), _mm256_castsi256_ps(k_)));
        }
    }));
}

static void dropout_bwd_row_avx2(const attn_dropout *dr, float *pr, float *dpr, float D,
                                 int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n)
{
    const __m256 s = _mm256_set1_ps(dr->scale), vd = _mm256_set1_ps(D);
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, CHUNK_PIECES({
        const __m256 km = _mm256_castsi256_ps(k_);
        __m256 pv = full_ ? _mm256_loadu_ps(pr + o_) : _mm256_maskload_ps(pr + o_, t_);
        __m256 dv = full_ ? _mm256_loadu_ps(dpr + o_) : _mm256_maskload_ps(dpr + o_, t_);
        /* The and between the multiply and the subtraction: never fused. */
        __m256 dp = _mm256_and_ps(_mm256_mul_ps(dv, s), km);
        __m256 ds = _mm256_mul_ps(pv, _mm256_sub_ps(dp, vd));
        __m256 pz = _mm256_and_ps(_mm256_mul_ps(pv, s), km);
        if (full_) {
            _mm256_storeu_ps(dpr + o_, ds);
            _mm256_storeu_ps(pr + o_, pz);
        } else {
            _mm256_maskstore_ps(dpr + o_, t_, ds);
            _mm256_maskstore_ps(pr + o_, t_, pz);
        }
    }));
}

static void dropout_keep_row_avx2(const attn_dropout *dr, uint8_t *keep, int64_t b, int64_t h,
                                  int64_t i, int64_t j0, int64_t n)
{
    DROPOUT_CHUNKS(dr, b, h, i, j0, n, {
        for (int64_t q = 0; q < len_; q++)
            keep[xi_ + q] = (uint8_t)((bits_ >> q) & 1);
    });
}

/* The steps of attn_softmax_rows_with, 8 rows at a time, their horizontal
 * reductions taken together by reduce8 (as softmax_rows_avx512 does with
 * 16): the same bits as row_max and exp_sum give each row. */
static void softmax_rows_avx2(float *s, int64_t lds, int64_t R, int64_t n, float *m, float *l,
                              float *corr)
{
    const __m256 tab[2] = { _mm256_loadu_ps(attn_exp2_16), _mm256_loadu_ps(attn_exp2_16 + 8) };
    /* A row's m' and c are set by attn_softmax_row_begin and read only
     * when it returned 1 (its live bit); zeroed once per call so that GCC's
     * -Wmaybe-uninitialized (Debian's -O2 -g) sees them set on every path,
     * at no cost in the loop. */
    float mnew[8] = { 0 }, c[8] = { 0 };
    for (int64_t r0 = 0; r0 < R; r0 += 8) {
        const int g = R - r0 < 8 ? (int)(R - r0) : 8;
        float *s0 = s + r0 * lds, *m0 = m + r0, *l0 = l + r0, *c0 = corr + r0;
        __m256 v[8];
        float red[8];
        unsigned nanrows = 0, live = 0;
        for (int i = 0; i < g; i++) {
            __m256 nan;
            v[i] = max_vec8(s0 + i * lds, n, &nan);
            nanrows |= (unsigned)(_mm256_movemask_ps(nan) != 0) << i;
        }
        for (int i = g; i < 8; i++)
            v[i] = _mm256_setzero_ps();
        reduce8(v, red, 1);
        for (int i = 0; i < g; i++) {
            const float mt = nanrows >> i & 1u ? NAN : red[4 * (i % 2) + i / 2];
            v[i] = _mm256_setzero_ps();
            if (attn_softmax_row_begin(s0 + i * lds, n, mt, m0 + i, l0 + i, c0 + i, &mnew[i],
                                       &c[i])) {
                v[i] = exp_vec8(tab, s0 + i * lds, n, mnew[i]);
                live |= 1u << i;
            }
        }
        reduce8(v, red, 0);
        for (int i = 0; i < g; i++)
            if (live >> i & 1u)
                attn_softmax_row_end(m0 + i, l0 + i, c0 + i, mnew[i], c[i],
                                     red[4 * (i % 2) + i / 2]);
    }
}

static void softmax_rows_p16_avx2(float *s, int64_t lds, int64_t R, int64_t n, float *m,
                                  float *l, float *corr)
{
    softmax_rows_avx2(s, lds, R, n, m, l, corr);
    attn_rows_to_bf16(s, lds, R, n);
}

const attn_kernels attn_kernels_avx2 = {
    "avx2", max_avx2, prep_max_avx2, exp_sum_avx2, exp_store_avx2, scale_avx2, softmax_rows_avx2,
    softmax_rows_p16_avx2,
    dropout_row_avx2, dropout_bwd_row_avx2, dropout_keep_row_avx2,
};
