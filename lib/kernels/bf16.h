/* The tile engine's BF16 products: attn's register-blocked kernels with
 * bfloat16 inputs and fp32 accumulation, one table per unit, chosen at run
 * time (attn_bf16_at):
 *   amx         TDPBF16PS on the AMX tile unit (AMX-BF16: Sapphire Rapids
 *               and later Xeons), where Linux grants the tile state
 *               (cpu/cpu.h); mm only, the rest is the avx512bf16 table's
 *               (below: its own arithmetic, not bitwise the others');
 *   avx512bf16  VDPBF16PS (AVX512_BF16: Zen 4, Zen 5, Cooper Lake,
 *               Sapphire Rapids and later);
 *   avx512      the same arithmetic on AVX-512F: each pair as two fused
 *               multiply-adds with the MXCSR's DAZ and FTZ set;
 *   avx2        the same on AVX2 + FMA (mm only; the rest is the scalar
 *               table's);
 *   scalar      the portable C reference.
 *
 * The arithmetic of one element, the same in every table (VDPBF16PS's
 * definition, the SDM's "FP32 FMA with DAZ, FTZ, RNE"): the reduction runs
 * over pairs of k, (2p, 2p + 1), in order p = 0, 1, ...; each pair adds its
 * odd product, then its even one, each by one fused multiply-add:
 *   acc = ftz(fma(A(r, 2p + 1), B(2p + 1, j), acc));
 *   acc = ftz(fma(A(r, 2p), B(2p, j), acc));
 * from acc = 0, with BF16 denormal inputs read as zero (DAZ) and denormal
 * results flushed to zero of the same sign (FTZ), round to nearest even.
 * A product of two BF16 values is exact in fp32 unless it underflows, so
 * this is acc = ftz(acc + ftz(A B)) whenever no product falls below 2^-126
 * in magnitude; one that does is not flushed before it is added (VDPBF16PS
 * keeps it, and so do the avx512 table's FMAs under the MXCSR's DAZ and
 * FTZ), so the three tables give the same bits on every input, tiny ones
 * included; the tests hold them to it.  Then c = alpha_r * acc (or
 * c + alpha_r * acc, one fused multiply-add), as the fp32 kernels (gemm.h)
 * do, without DAZ or FTZ.
 *
 * The amx table's mm is the one exception: TDPBF16PS reduces each 32
 * elements of k inside the unit, in an order Intel does not promise (the
 * SDM's model: the even and the odd products in two fp32 sums, added
 * together, then to the tile; each step an fp32 FMA or addition with DAZ,
 * FTZ and round to nearest even, whatever the MXCSR), so its bits are its
 * own.  What holds for it, relative to the float64 result on the same
 * inputs, c_exact = alpha_r sum_k A(r, k) B(k, j) (+ c):
 *   |mm_amx - c_exact| <= 2^-23 ((K + 1) |alpha_r| sum_k |A(r, k)| |B(k, j)|
 *                                + |c|) + 2^-126
 * (at most K + 1 roundings of u = 2^-24 on any term's path, doubled for
 * slack), wherever no partial sum falls below 2^-126 in magnitude: no
 * input is a BF16 denormal (DAZ reads those as 0, as every table does)
 * and no flush to zero occurs.  Where either happens, each flush moves a
 * sum by less than 2^-126, so against the scalar table the test allows
 * twice the bound above plus 4 (K + 1) |alpha_r| 2^-126.  Its elements do
 * not depend on the position in the block, on M or on N (each is the same
 * sequence of instructions over k in steps of 32 from 0, the last step
 * zero-padded), so the tile engine's results stay the same bits whatever
 * the split of rows among threads. */
#ifndef ATTN_BF16_KERNELS_H
#define ATTN_BF16_KERNELS_H

#include "kernels/gemm.h"
#include <stdint.h>

typedef struct attn_bf16_kernels {
    const char *name;
    /* For r < M, j < N, with P = ceil(K / 2) pairs:
     *   A(r, k) = a[r * lda + k] (BF16, k < K; k = K reads as 0 when K
     *   is odd), B(k, j) = the BF16 half k % 2 of b[(k / 2) * ldb + j]
     *   (low half even k) (a packed pair panel, from pack_rows or
     *   pack_pairs),
     *   c[r * ldc + j] = acc ? fma(alpha_r, acc_r_j, c[r * ldc + j])
     *                        : alpha_r * acc_r_j,
     * alpha_r = rs ? rs[r] : alpha.  ah (may be NULL) is stepped before each
     * register block. */
    void (*mm)(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
               const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
               int64_t ldc, int acc, attn_ahead *ah);
    /* The transposed panel of N rows of K elements (the keys of a Q K^T
     * tile): bt[p * ldt + j] = row_j[2p] | row_j[2p + 1] << 16 for j < N,
     * p < ceil(K / 2), the high half 0 past K; row_j = rows[j]. */
    void (*pack_rows)(const uint16_t *const *rows, int64_t N, int64_t K, uint32_t *bt,
                      int64_t ldt);
    /* The pair panel of N rows of D elements (the values of a P V tile):
     * vp[q * ldp + x] = rows[2q][x] | rows[2q + 1][x] << 16 for q <
     * ceil(N / 2), x < D; the high half 0 when 2q + 1 == N. */
    void (*pack_pairs)(const uint16_t *const *rows, int64_t N, int64_t D, uint32_t *vp,
                       int64_t ldp);
    /* dst[j] = bf16(src[j]) for j < n, round to nearest even (the rule of
     * attn_dtype_encode, denormals kept, NaN quiet).  dst may be the
     * memory of src itself ((uint16_t *)src): the row is converted in
     * place, front to back. */
    void (*round)(const float *src, uint16_t *dst, int64_t n);
    /* The transpose of a rows x cols block of fp32 values, rounded to BF16
     * as round does: dst[c * ldd + r] = bf16(src[r * lds + c]) for r <
     * rows, c < cols; nothing else of dst is written, nothing of src past
     * the block read.  (The backward's P^T and dS^T: the A operand of mm
     * with its pairs along the query rows.)  dst must not overlap src. */
    void (*tr_round)(const float *src, int64_t lds, int64_t rows, int64_t cols, uint16_t *dst,
                     int64_t ldd);
    /* The BF16 operands the backward makes of a tile of rows x cols
     * probabilities P (row r at p + r * ldp) and dP (at dp + r * ldp): with
     * dS = p * (dp - d[r]) per element in fp32 (the subtraction, then the
     * multiply), or dS = dp itself when d is NULL (computed by the caller),
     *   pp[q * ldq + j] = bf16(P[2q][j]) | bf16(P[2q + 1][j]) << 16
     *   sp[q * ldq + j] = bf16(dS[2q][j]) | bf16(dS[2q + 1][j]) << 16
     * for q < ceil(rows / 2), j < cols (the high halves 0 past an odd last
     * row): pair panels along the rows (the B of dV^T += dO^T P and dK^T
     * += Q^T dS), and s16[r * lds + j] = bf16(dS[r][j]) for r < rows, j <
     * cols (the A of dQ += dS K).  Rounding as round; nothing else
     * written; the outputs must not overlap p or dp. */
    void (*ds_pack)(const float *p, const float *dp, int64_t ldp, const float *d, int64_t rows,
                    int64_t cols, uint32_t *pp, uint32_t *sp, int64_t ldq, uint16_t *s16,
                    int64_t lds);
} attn_bf16_kernels;

extern const attn_bf16_kernels attn_bf16_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_bf16_kernels attn_bf16_avx512;
#if ATTN_HAVE_AVX512BF16
extern const attn_bf16_kernels attn_bf16_avx512bf16;
#endif
/* bf16_avx2.c: the avx2 table's mm (AVX2 + FMA; attn_bf16_avx2()). */
void attn_bf16_mm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                       const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, attn_ahead *ah);
#if ATTN_HAVE_AMX
/* bf16_amx.c: the amx table's mm (run it only where attn_bf16_amx() is
 * not NULL: the CPU has the unit and this process the permission). */
void attn_bf16_mm_amx(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                      const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                      int64_t ldc, int acc, attn_ahead *ah);
#endif
#endif

/* The avx2 table (AVX2 + FMA, the same bits as the scalar one), or NULL
 * where it is not built: mm attn_bf16_mm_avx2, the rest the scalar
 * table's. */
const attn_bf16_kernels *attn_bf16_avx2(void);

/* The amx table, or NULL where it cannot run (not built, or no
 * ATTN_CPU_AMXBF16).  Built once, at the first call, as a copy of the
 * avx512bf16 table with its name "amx" and mm attn_bf16_mm_amx: every
 * other field is the avx512bf16 table's. */
const attn_bf16_kernels *attn_bf16_amx(void);

/* The table of a level (cpu/cpu.h): amx at ATTN_SIMD_AMX where
 * attn_bf16_amx() has it (else what this CPU runs best below: the level
 * is taken as min(level, attn_cpu_level(), ATTN_SIMD_AVX512BF16)),
 * avx512bf16 at ATTN_SIMD_AVX512BF16, avx512 at ATTN_SIMD_AVX512, avx2
 * at ATTN_SIMD_AVX2 (where built), the C table below. */
const attn_bf16_kernels *attn_bf16_at(int level);

#endif
