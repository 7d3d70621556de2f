/* Streaming kernels of the decode path (sdpa/forward.c with few query rows):
 * the score and value products of a handful of query rows against K and V
 * rows read once from memory and widened from their storage type in
 * registers.  One table per instruction set, chosen at run time like
 * attn_kernels (capped by ATTN_SIMD).
 *
 * Every score is one dot product computed the same way whatever its
 * neighbours (which keys and rows share a register block), and every output
 * element one chain of fused multiply-adds in key order, so results do not
 * depend on how the keys are cut into runs (pages of a paged cache, tiles,
 * split-K chunks): paged and contiguous caches give the same bits.  How a
 * score is summed may depend on the call's row count R and on d (the
 * AVX-512 table's Q K^T for many rows), never on the storage type or the
 * paging; the decode path's R follows the shape alone (a GQA group is
 * stacked in every layout: sdpa/plan.c), so a 16-bit Q or O and its fp32
 * twin give the same bits too.
 *
 * The block types (Q8_0, Q4_0; d a multiple of 32) are de-quantized in
 * registers to their exact fp32 values (q x scale) and then go through the
 * same chains as F32: every score and output is bitwise the F32 kernel's
 * on the de-quantized rows. */
#ifndef ATTN_DECODE_KERNELS_H
#define ATTN_DECODE_KERNELS_H

#include <stdint.h>

/* Rows the decode kernels prefetch ahead within their K or V stream (a
 * cache row is one page or less, and the hardware prefetchers alone
 * streamed the rows at about half the speed; docs/DESIGN.md).  On Zen 5 a
 * distance in bytes instead, 2 to 16 KiB ahead, was no faster for F16,
 * Q8_0 or Q4_0 rows, paged or not.  sdpa/forward.c asks for the first
 * rows of each stream at this distance too. */
#define ATTN_DEC_PF_KEYS 16

/* A paged cache's blocks lie where the hardware prefetchers do not look,
 * so for one the callers ask the kernels to prefetch rows further ahead as
 * well (into L1, within the call's rows; since 1.4.9 a row of 256 bytes
 * or more by its first line only, decode_pf.h): half the decode tile (`tile`
 * keys, sdpa/plan.c: 512 rows at d 128), or none when that is no more
 * than twice ATTN_DEC_PF_KEYS.  Contiguous caches only lost by it, so
 * there it is 0 (none).  Until 1.4.4 the distance was about 16 KiB (at
 * most 128 rows; none for F32 at d 128); against that, on Zen 5 (2
 * vCPUs, pools in a random order, D1's shape, attn-ab, two runs), 512
 * rows took 5-12% off F32, 11-20% off F16, 3-19% off BF16, 3-7% off
 * Q8_0 and 4-9% off Q4_0 at 1 and 2 threads; 256 rows and 768 gained
 * about half as much, 1000 rows less still (docs/DESIGN.md). */
static inline int64_t attn_dec_far_rows(int64_t tile)
{
    const int64_t r = tile / 2;
    return r <= 2 * ATTN_DEC_PF_KEYS ? 0 : r;
}

/* The integer Q K^T's K rows (decode_vnni.c, decode_qk8_avx2.c: 16 or 8
 * keys a step, at several times the fp32 kernels' rate per key) keep the
 * distance of 1.4.3, about 16 KiB (at most 128 rows): half a tile made
 * Q8_0's paged D1 2-8% slower there. */
static inline int64_t attn_dec_far_rows_int8(int64_t row_bytes)
{
    const int64_t r = row_bytes > 0 ? 16384 / row_bytes : 0;
    return r <= 2 * ATTN_DEC_PF_KEYS ? 0 : r > 128 ? 128 : r;
}

/* Storage types, as attn_dtype. */
enum { ATTN_ST_F32 = 0, ATTN_ST_F16 = 1, ATTN_ST_BF16 = 2, ATTN_ST_Q8_0 = 3, ATTN_ST_Q4_0 = 4 };

typedef struct attn_dec_kernels {
    const char *name;
    /* s[r * lds + c] = scale * sum_x q[r * ldq + x] * K_c[x] for rows r < R
     * and keys c < nk, K_c the row at k[c] (elements of type st).  Rows are
     * given by address, so a paged cache is one call like a contiguous one
     * and the kernels prefetch across its blocks; far: the distance of
     * the second prefetch of a paged cache, in rows (0: none). */
    void (*qk)(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
               int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far);
    /* o[r * ldo + x] = (acc ? o[r * ldo + x] : 0) + sum_c p[r * ldp + c] V_c[x],
     * V_c the row at v[c], the sum one fused multiply-add per key in key
     * order.  far as for qk. */
    void (*pv)(int st, const float *p, int64_t ldp, int64_t R, const void *const *v,
               int64_t nk, int64_t d, float *o, int64_t ldo, int acc, int64_t far);
} attn_dec_kernels;

extern const attn_dec_kernels attn_dec_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_dec_kernels attn_dec_avx2;
extern const attn_dec_kernels attn_dec_avx512;
#endif

/* The table of a level (cpu/cpu.h). */
const attn_dec_kernels *attn_dec_at(int level);

/* The integer Q K^T against a Q8_0 or Q4_0 K (desc.qk_int8, 1.4; attn.h,
 * "Integer scores"), the signature of attn_dec_kernels.qk.  Each query
 * row's 32-value block b is rounded to int8 (attn_qk8_round_block), and
 * the score of row r and key c is, with i_b the exact integer dot product
 * of the block's int8 values with the key's block quants (Q4_0: q - 8) and
 * k_b the key's block scale (binary16, widened):
 *     a = (float)i_0 x (k_0 x s_0);  a = fmaf((float)i_b, k_b x s_b, a), b = 1, 2, ...
 *     score = scale x a
 * every operation one fp32 operation ((float)i_b is exact: |i_b| <= 32 x
 * 127 x 128 < 2^24).  Nothing depends on R, on the other keys or on the
 * paging, so every implementation gives the same bits: the C one below,
 * the AVX512_VNNI one (VPDPBUSD; cpu/cpu.h's ATTN_CPU_AVX512VNNI) and the
 * AVX2 one (VPMADDUBSW, decode_qk8_avx2.c). */
enum { ATTN_QK8_MAX_D = 512 };   /* the VNNI kernel's largest d (larger: C) */

/* Rounds x[0..31] as the integer Q K^T does: amax = max |x_i|, s = amax /
 * 127; s below FLT_MIN (a block of zeros or of tiny values) gives s 0 and
 * all q 0; a NaN or an infinity gives s NaN and all q 0; otherwise q_i =
 * roundf(x_i x (1 / s)) (to nearest, ties away from zero, in [-127, 127]).
 * Returns s and the sum of the q_i in *sum. */
float attn_qk8_round_block(const float *x, int8_t q[32], int32_t *sum);

void attn_dec_qk8_c(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                    int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far);
#if ATTN_HAVE_X86_KERNELS
void attn_dec_qk8_avx2(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                       int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far);
#endif
#if ATTN_HAVE_VNNI
void attn_dec_qk8_vnni(int st, const float *q, int64_t ldq, int64_t R, const void *const *k,
                       int64_t nk, int64_t d, float scale, float *s, int64_t lds, int64_t far);
#endif
typedef void (*attn_dec_qk_fn)(int st, const float *q, int64_t ldq, int64_t R,
                               const void *const *k, int64_t nk, int64_t d, float scale,
                               float *s, int64_t lds, int64_t far);
/* The integer Q K^T of a level: VNNI from the AVX-512 level up where the
 * CPU has AVX512_VNNI, else AVX2 (VPMADDUBSW) from the AVX2 level up, else
 * the C one (all three the same bits). */
attn_dec_qk_fn attn_dec_qk8_at(int level);

#endif
