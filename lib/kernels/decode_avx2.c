/* AVX2 decode kernels (this file alone is built with -mavx2 -mfma -mf16c).
 * Every dot product is one 8-lane accumulator reduced by the same tree,
 * then the columns past the last multiple of 8 added in order; every
 * output element one chain of fused multiply-adds in key order. */
#include "attn_config.h"
#include "kernels/decode.h"
#include "kernels/decode_pf.h"
#include "kernels/convert.h"
#include "kernels/quant.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define PF_KEYS ATTN_DEC_PF_KEYS

/* The 8 values of chunk j (0-3) of a Q8_0 or Q4_0 block, q x dv (Q4_0:
 * (q - 8) x dv), dv the block's scale as the caller read it: load8 per
 * chunk, qk_block once per block. */
INLINE __m256 blk8(const int st, const uint8_t *blk, int j, __m256 dv)
{
    __m256i q;
    if (st == ATTN_ST_Q8_0) {
        q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * j)));
    } else {
        q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * (j & 1))));
        q = (j & 2) ? _mm256_srli_epi32(q, 4) : _mm256_and_si256(q, _mm256_set1_epi32(15));
        q = _mm256_sub_epi32(q, _mm256_set1_epi32(8));
    }
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), dv);
}

/* 8 values from element x (a multiple of 8) of a row, as floats; the block
 * types de-quantized exactly (q x scale, Q4_0 (q - 8) x scale) by blk8. */
INLINE __m256 load8(const int st, const void *base, int64_t x)
{
    if (st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0) {
        const uint8_t *blk = (const uint8_t *)base + (x >> 5) * (st == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES);
        uint16_t h;
        memcpy(&h, blk, 2);
        /* (the scale from attn_f16_values, kernels/quant.h) */
        return blk8(st, blk, (int)((x & 31) >> 3), _mm256_set1_ps(attn_f16_values[h]));
    }
    if (st == ATTN_ST_F32)
        return _mm256_loadu_ps((const float *)base + x);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + x));
    if (st == ATTN_ST_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE float load1(const int st, const void *base, int64_t x)
{
    if (st == ATTN_ST_F16)
        return attn_f16_to_f32(((const uint16_t *)base)[x]);
    if (st == ATTN_ST_BF16)
        return attn_bf16_to_f32(((const uint16_t *)base)[x]);
    return ((const float *)base)[x];
}

static inline float hsum8(__m256 a)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* hsum8 of eight accumulators at once, by the same tree: returns
 * (hsum8(A), hsum8(C), hsum8(E), hsum8(G) | hsum8(B), hsum8(D), hsum8(F),
 * hsum8(H)) for v = A..H. */
INLINE __m256 hsum8x8(const __m256 v[8])
{
    __m256 p[4], w[2];
    for (int i = 0; i < 4; i++)     /* lo + hi of each */
        p[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * i], v[2 * i + 1], 0x31));
    for (int i = 0; i < 2; i++)     /* lanes 0 + 2, 1 + 3 */
        w[i] = _mm256_add_ps(_mm256_shuffle_ps(p[2 * i], p[2 * i + 1], 0x44),
                             _mm256_shuffle_ps(p[2 * i], p[2 * i + 1], 0xEE));
    return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], 0x88),   /* then 0 + 1 */
                         _mm256_shuffle_ps(w[0], w[1], 0xDD));
}

/* Rows [r0, r0 + RB) against keys [c0, c0 + KB) (a short group repeats
 * its last key, computed but not stored).  RB and KB are constants and
 * every loop over the accumulators has a constant count (the sums taken
 * before the stores, whose counts are not), so they stay in registers.
 * Each row's q chunk is loaded once into a register for the KB keys (as
 * memory operands the compiler loaded it once per key, and the loads, not
 * the multiply-adds, bound the loop); a block type's scale is read once
 * per block and key.  With RB x KB = 8 and d a multiple of 8, the eight
 * sums come from one hsum8x8 and go out as vectors. */
INLINE void qk_block(const int RB, const int KB, const int st, const float *q, int64_t ldq,
                     const void *const *k, int64_t nk, int64_t c0, int64_t r0, int64_t d,
                     float scale, float *s, int64_t lds)
{
    const int64_t d8 = d & ~(int64_t)7;
    const int blocks = st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0;
    const void *kr[4];
    for (int c = 0; c < KB; c++)
        kr[c] = k[c0 + c < nk ? c0 + c : nk - 1];
    const float *qr[4];
    for (int r = 0; r < RB; r++)
        qr[r] = q + (r0 + r) * ldq;
    __m256 a[4][4];
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < KB; c++)
            a[r][c] = _mm256_setzero_ps();
    if (blocks) {
        /* (d is a multiple of 32) */
        const int64_t bb = st == ATTN_ST_Q8_0 ? ATTN_Q8_0_BYTES : ATTN_Q4_0_BYTES;
        for (int64_t x0 = 0; x0 < d; x0 += 32) {
            const uint8_t *blk[4];
            __m256 dv[4];
            for (int c = 0; c < KB; c++) {
                uint16_t h;
                blk[c] = (const uint8_t *)kr[c] + (x0 >> 5) * bb;
                memcpy(&h, blk[c], 2);
                dv[c] = _mm256_set1_ps(attn_f16_values[h]);   /* (kernels/quant.h) */
            }
            for (int j = 0; j < 4; j++) {
                __m256 kv[4];
                for (int c = 0; c < KB; c++)
                    kv[c] = blk8(st, blk[c], j, dv[c]);
                for (int r = 0; r < RB; r++) {
                    __m256 qv = _mm256_loadu_ps(qr[r] + x0 + 8 * j);
                    __asm__("" : "+x"(qv));
                    for (int c = 0; c < KB; c++)
                        a[r][c] = _mm256_fmadd_ps(qv, kv[c], a[r][c]);
                }
            }
        }
    } else {
        for (int64_t x = 0; x < d8; x += 8) {
            __m256 kv[4];
            for (int c = 0; c < KB; c++)
                kv[c] = load8(st, kr[c], x);
            for (int r = 0; r < RB; r++) {
                __m256 qv = _mm256_loadu_ps(qr[r] + x);
                __asm__("" : "+x"(qv));
                for (int c = 0; c < KB; c++)
                    a[r][c] = _mm256_fmadd_ps(qv, kv[c], a[r][c]);
            }
        }
    }
    if (RB * KB == 8 && d8 == d && c0 + KB <= nk) {
        /* out = (row 0's KB scores, ... | the other half's rows) */
        __m256 v[8];
        for (int i = 0; i < 8; i++) {
            const int lane = i & 1 ? 4 + i / 2 : i / 2;   /* of v[i] in the result */
            v[i] = a[lane / KB][lane % KB];
        }
        const __m256 out = _mm256_mul_ps(_mm256_set1_ps(scale), hsum8x8(v));
        const __m128 lo = _mm256_castps256_ps128(out), hi = _mm256_extractf128_ps(out, 1);
        if (KB == 4) {
            _mm_storeu_ps(s + r0 * lds + c0, lo);
            _mm_storeu_ps(s + (r0 + 1) * lds + c0, hi);
        } else {
            _mm_storel_pi((__m64 *)(void *)(s + r0 * lds + c0), lo);
            _mm_storeh_pi((__m64 *)(void *)(s + (r0 + 1) * lds + c0), lo);
            _mm_storel_pi((__m64 *)(void *)(s + (r0 + 2) * lds + c0), hi);
            _mm_storeh_pi((__m64 *)(void *)(s + (r0 + 3) * lds + c0), hi);
        }
        return;
    }
    float t[4][4];
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < KB; c++)
            t[r][c] = hsum8(a[r][c]);
    for (int r = 0; r < RB; r++)
        for (int c = 0; c < KB && c0 + c < nk; c++) {
            float u = t[r][c];
            for (int64_t x = d8; x < d; x++)
                u = fmaf(qr[r][x], load1(st, kr[c], x), u);
            s[(r0 + r) * lds + c0 + c] = scale * u;
        }
}

/* Keys KB at a time for rows [r0, r0 + RB).  Only the first rows'
 * pass prefetches (as in the AVX-512 P V): the later passes find the keys
 * in L1 or L2. */
#define QK_KEYS(RB, KB)                                                                     \
    for (int64_t c0 = 0; c0 < nk; c0 += (KB)) {                                             \
        if (r0 == 0)                                                                        \
            attn_dec_prefetch_group(k, c0, KB, nk, PF_KEYS, far, rowb);                     \
        qk_block(RB, KB, st, q, ldq, k, nk, c0, r0, d, scale, s, lds);                      \
    }

/* Every dot product is one chain over the chunks of 8, then the same
 * tree, whatever the blocking: rows 4 at a time against 2 keys (each key
 * value widened or de-quantized once for the 4 rows), the last rows 2 or
 * 1 at a time against 4 keys. */
INLINE void qk_impl(const int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    const int64_t rowb = attn_st_bytes(st, d);
    int64_t r0 = 0;
    for (; r0 + 4 <= R; r0 += 4) {
        QK_KEYS(4, 2);
    }
    for (; r0 + 2 <= R; r0 += 2) {
        QK_KEYS(2, 4);
    }
    for (; r0 < R; r0++) {
        QK_KEYS(1, 4);
    }
}

/* One key's row vc into the RB x NV accumulators (pv_block). */
INLINE void pv_key(const int RB, const int NV, const int st, __m256 a[4][4], const void *vc,
                   const float *p, int64_t ldp, int64_t c, int64_t x0)
{
    __m256 vv[4];
    for (int j = 0; j < NV; j++)
        vv[j] = load8(st, vc, x0 + 8 * j);
    for (int r = 0; r < RB; r++) {
        const __m256 w = _mm256_set1_ps(p[r * ldp + c]);
        for (int j = 0; j < NV; j++)
            a[r][j] = _mm256_fmadd_ps(w, vv[j], a[r][j]);
    }
}

/* RB rows x NV chunks of 8 columns from x0 of O in registers over every
 * key in order.  RB and NV are constants at every call, so the
 * accumulators stay in registers (with a run-time count they lived on the
 * stack, each fused multiply-add a load and a store: 4-5x slower).  nv:
 * the rows of the stream from v[0] (nk or more), which the prefetches, dist
 * rows ahead, may reach. */
INLINE void pv_block(const int RB, const int NV, const int st, const float *p, int64_t ldp,
                     const void *const *v, int64_t nk, int64_t nv, int64_t dist, int64_t x0,
                     float *o, int64_t ldo, int acc, int64_t far)
{
    __m256 a[4][4];
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < NV; j++)
            a[r][j] = acc ? _mm256_loadu_ps(o + r * ldo + x0 + 8 * j) : _mm256_setzero_ps();
    const int64_t off = attn_st_bytes(st, x0), span = attn_st_bytes(st, 8 * NV);
    /* the rows ahead from the stream when it looks linear (decode_pf.h),
     * else from v (the block types always from v: from the stream, Q8_0
     * took 1.04-1.06x the time on Zen 5, F16 and BF16 0.95-0.96x) */
    uintptr_t step;
    int64_t c = 0;
    if (!far && st != ATTN_ST_Q8_0 && st != ATTN_ST_Q4_0 && attn_dec_linear(v, nv, &step)) {
        const uintptr_t v0 = (uintptr_t)v[0] + off;
        const int64_t m = nv - dist < nk ? nv - dist : nk;
        for (; c < m; c++) {
            attn_dec_prefetch_row((const char *)(v0 + (uintptr_t)(c + dist) * step), span);
            pv_key(RB, NV, st, a, v[c], p, ldp, c, x0);
        }
    }
    for (; c < nk; c++) {
        attn_dec_prefetch_ahead(v, c, nv, dist, far, off, span);
        pv_key(RB, NV, st, a, v[c], p, ldp, c, x0);
    }
    for (int r = 0; r < RB; r++)
        for (int j = 0; j < NV; j++)
            _mm256_storeu_ps(o + r * ldo + x0 + 8 * j, a[r][j]);
}

/* Rows [r0, r0 + RB) over the whole chunks of 8: NV at a time, then the
 * rest. */
#define PV_COLS(RB, NV)                                                                     \
    do {                                                                                    \
        int64_t x0 = 0;                                                                     \
        for (; x0 + 8 * (NV) <= d8; x0 += 8 * (NV))                                         \
            pv_block(RB, NV, st, p + r0 * ldp, ldp, v, nk, nv, dist, x0, o + r0 * ldo, ldo, \
                     acc, far);                                                             \
        for (; x0 < d8; x0 += 8)                                                            \
            pv_block(RB, 1, st, p + r0 * ldp, ldp, v, nk, nv, dist, x0, o + r0 * ldo, ldo,  \
                     acc, far);                                                             \
    } while (0)

/* Rows 4 at a time over 16 columns (each value widened or de-quantized
 * once for the 4 rows: 8 accumulators, 2 values and a weight in 16
 * registers), 3 last rows the same way, else the last 2 or 1 at a time
 * over 32, for keys [0, nk) of a stream of nv rows; the rows dist ahead
 * prefetched. */
INLINE void pv_rows(const int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
                    int64_t nk, int64_t nv, int64_t dist, int64_t d8, float *o, int64_t ldo,
                    int acc, int64_t far)
{
    int64_t r0 = 0;
    for (; r0 + 4 <= R; r0 += 4)
        PV_COLS(4, 2);
    if (R - r0 == 3) {
        PV_COLS(3, 2);
        r0 += 3;
    }
    for (; r0 + 2 <= R; r0 += 2)
        PV_COLS(2, 4);
    for (; r0 < R; r0++)
        PV_COLS(1, 4);
}

/* The column passes each stream every key, the first from memory and the
 * others a whole call's rows later (a decode tile of up to 1024 keys: 512
 * KiB of F32 rows at d 128), from L2 at best.  So the keys go in runs of
 * about PV_RUN_BYTES (at least PF_KEYS keys), which the later passes find
 * in L1, and each pass asks for its columns of the rows a run ahead (the
 * next run), so that the next run arrives over the whole run's work.  O
 * carries the sums from run to run (exact): every chain and every bit is
 * unchanged.  On Zen 5 at the AVX2 level (ATTN_SIMD=avx2; attn-ab, D1's
 * shape, against one run of all the keys): 4 KiB runs took 0.68-0.71x the
 * time for F32 (1 and 2 threads), 0.71x F16, 0.74x BF16, 0.90-0.98x Q8_0;
 * the kernel alone from memory, 4 rows, F32 P V 44 -> 20-26 ns a key.
 * 16 KiB runs gained less (F32 0.73, F16 0.78; F16 over a paged pool
 * 0.91), 2 KiB lost Q8_0 5%.  Q4_0's short rows (72 bytes at d 128) took
 * 1.00-1.07x with runs, so they keep one run of all the keys.  The
 * columns past the last multiple of 8 go in scalar chains. */
enum { PV_RUN_BYTES = 4096 };

INLINE void pv_impl(const int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
                    int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far)
{
    const int64_t d8 = d & ~(int64_t)7;
    int64_t run = nk > 0 ? nk : 1, dist = PF_KEYS;
    if (st != ATTN_ST_Q4_0 && d8 > 0) {
        run = PV_RUN_BYTES / attn_st_bytes(st, d);
        run = run < PF_KEYS ? PF_KEYS : run;
        dist = run;
    }
    int64_t c0 = 0;
    do {
        const int64_t n = nk - c0 < run ? nk - c0 : run;
        pv_rows(st, p + c0, ldp, R, v + c0, n, nk - c0, dist, d8, o, ldo, acc || c0 > 0, far);
        c0 += run;
    } while (c0 < nk);
    for (int64_t r = 0; r < R; r++) {
        float *orow = o + r * ldo;
        for (int64_t x = d8; x < d; x++) {
            float t = acc ? orow[x] : 0.0f;
            for (int64_t c = 0; c < nk; c++)
                t = fmaf(p[r * ldp + c], load1(st, v[c], x), t);
            orow[x] = t;
        }
    }
}

/* Instantiated per storage type: a run-time type test inside the key
 * loops costs the streaming kernels much of their speed.  The block types
 * read their scales from attn_f16_values, built here first. */
static void qk_avx2(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far)
{
    if (st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0)
        (void)attn_f16_table();
    if (st == ATTN_ST_Q8_0)
        qk_impl(ATTN_ST_Q8_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_Q4_0)
        qk_impl(ATTN_ST_Q4_0, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_F16)
        qk_impl(ATTN_ST_F16, q, ldq, R, k, nk, d, scale, s, lds, far);
    else if (st == ATTN_ST_BF16)
        qk_impl(ATTN_ST_BF16, q, ldq, R, k, nk, d, scale, s, lds, far);
    else
        qk_impl(ATTN_ST_F32, q, ldq, R, k, nk, d, scale, s, lds, far);
}

static void pv_avx2(int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
                    int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far)
{
    if (st == ATTN_ST_Q8_0 || st == ATTN_ST_Q4_0)
        (void)attn_f16_table();
    if (st == ATTN_ST_Q8_0)
        pv_impl(ATTN_ST_Q8_0, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else if (st == ATTN_ST_Q4_0)
        pv_impl(ATTN_ST_Q4_0, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else if (st == ATTN_ST_F16)
        pv_impl(ATTN_ST_F16, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else if (st == ATTN_ST_BF16)
        pv_impl(ATTN_ST_BF16, p, ldp, R, v, nk, d, o, ldo, acc, far);
    else
        pv_impl(ATTN_ST_F32, p, ldp, R, v, nk, d, o, ldo, acc, far);
}

const attn_dec_kernels attn_dec_avx2 = { "avx2", qk_avx2, pv_avx2 };
