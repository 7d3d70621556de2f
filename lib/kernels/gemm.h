/* The tile engine's matrix kernels: attn's own register-blocked products for
 * the attention shapes (a block of rows against a tile of keys, d <= 256),
 * where a general BLAS spends much of its time packing.  One table per
 * instruction set, chosen at run time like attn_kernels (capped by
 * ATTN_SIMD).
 *
 * Every element of a product is one chain of fused multiply-adds in k order
 * starting from 0, then one rounding with alpha (and C): whatever the
 * register block, the instruction set or the position of the element, so
 * the scalar, AVX2 and AVX-512 tables give the same bits. */
#ifndef ATTN_GEMM_KERNELS_H
#define ATTN_GEMM_KERNELS_H

#include "cpu/cpu.h"
#include <stdint.h>

/* A look-ahead stream: the rows of up to ATTN_AHEAD_STREAMS matrices that
 * a later product will read (the tile engine's next key tile, or at an
 * item's last tile the next item's first tile and Q rows), asked for
 * into L2 by mm, share lines before each register block, so that they come
 * from memory while this product computes instead of stalling the later
 * one.  Spread this finely, the prefetches never fill the core's queue of
 * misses the way a burst of them does.  A hint: it changes no result. */
#define ATTN_AHEAD_STREAMS 10
typedef struct attn_ahead {
    const char *base[ATTN_AHEAD_STREAMS];
    int64_t ld[ATTN_AHEAD_STREAMS];    /* bytes between rows */
    int64_t rows[ATTN_AHEAD_STREAMS];
    int64_t bytes[ATTN_AHEAD_STREAMS]; /* per row */
    int ns, s;                         /* streams; cursor: stream, row, byte */
    int64_t r, x;
    int64_t share;                     /* lines per register block */
} attn_ahead;

static inline void attn_ahead_step(attn_ahead *ah)
{
    for (int64_t c = 0; c < ah->share && ah->s < ah->ns; c++) {
        __builtin_prefetch(ah->base[ah->s] + ah->r * ah->ld[ah->s] + ah->x, 0, 2);
        if ((ah->x += 64) >= ah->bytes[ah->s]) {
            ah->x = 0;
            if (++ah->r == ah->rows[ah->s]) {
                ah->r = 0;
                ah->s++;
            }
        }
    }
}

typedef struct attn_gemm_kernels {
    const char *name;
    /* For r < M, j < N: with acc_r_j = fma chain over k < K of
     * A(r, k) * b[k * ldb + j], A(r, k) = a[r * ars + k * aks], and
     * alpha_r = rs ? rs[r] : alpha (one factor per row, or one for all),
     *   c[r * ldc + j] = acc ? fma(alpha_r, acc_r_j, c[r * ldc + j])
     *                        : alpha_r * acc_r_j.
     * So A is row-major (ars = lda, aks = 1) or transposed (ars = 1,
     * aks = lda) in place; B is row-major.  K may be 0 (then C = alpha_r * 0
     * or C unchanged).  ah (may be NULL) is stepped before each register
     * block. */
    void (*mm)(int64_t M, int64_t N, int64_t K, float alpha, const float *rs, const float *a,
               int64_t ars, int64_t aks, const float *b, int64_t ldb, float *c, int64_t ldc,
               int acc, attn_ahead *ah);
    /* bt[x * ldt + j] = b[j * ldb + x] for j < N, x < K: rows of B (keys)
     * become columns, so B^T products run through mm. */
    void (*transpose)(const float *b, int64_t ldb, int64_t N, int64_t K, float *bt,
                      int64_t ldt);
} attn_gemm_kernels;

extern const attn_gemm_kernels attn_gemm_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_gemm_kernels attn_gemm_avx2;
extern const attn_gemm_kernels attn_gemm_avx512;
#endif

/* The table of a level (cpu/cpu.h), and the one of the current settings. */
const attn_gemm_kernels *attn_gemm_at(int level);
const attn_gemm_kernels *attn_gemm_select(void);

/* Whether a plan whose desc asks for engine (attn_engine: 0 auto, 1 blas,
 * 2 tile) runs on these kernels under settings s: an explicit choice as
 * given; auto from ATTN_ENGINE=blas|tile when set (other values mean
 * auto), else tile at the AVX-512 level.  attn_gemm_use_tile: the same
 * under the current settings. */
int attn_gemm_tile_at(const attn_settings *s, int engine);
int attn_gemm_use_tile(int engine);

#endif
