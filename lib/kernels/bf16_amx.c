/* The BF16 products on the AMX tile unit (AMX-BF16's TDPBF16PS): the amx
 * table's mm (bf16.h states its contract and its accuracy; bf16.c builds
 * the table from the avx512bf16 one).  Compiled alone with -mamx-tile
 * -mamx-bf16 and AVX-512 F/BW/VL; run only where cpu/cpu.c set
 * ATTN_CPU_AMXBF16 (CPUID, XCR0 and Linux's permission for the tile state).
 *
 * Blocks of 32 rows x 32 columns of C: four fp32 tiles of 16 x 16 (tmm0
 * rows 0-15 columns 0-15, tmm1 rows 0-15 columns 16-31, tmm2 and tmm3 rows
 * 16-31), fed per 32 elements of k by two A tiles (tmm4, tmm5: 16 rows of
 * 32 BF16, 64 bytes, read in place at a row stride of lda * 2 bytes: the
 * pairs of A(r, k), A(r, k + 1) are TDPBF16PS's dword pairs as they lie in
 * memory) and two B tiles (tmm6, tmm7: 16 pair rows of 16 uint32 of the
 * packed panel, read in place at a stride of ldb * 4 bytes: low half even
 * k, as TDPBF16PS takes them).  Every tile is configured 16 rows x 64
 * bytes once per call (palette 1); where a tile would reach past M rows,
 * past N columns or past K elements (the last step of a K that is not a
 * multiple of 32, an odd K's A(r, K) included), it is read from a
 * zero-padded copy on the stack instead, filled with masked AVX-512 loads
 * that touch only the elements of the product.  The four C tiles go to a
 * scratch block, which AVX-512 then combines with alpha_r (and C) into c,
 * masked at the right edge, rows past M untouched.  TILERELEASE at the end:
 * the tile state is per thread, and left in its initial state it costs the
 * context switches nothing.
 *
 * GCC's tile intrinsics are inline asm that do not tell the compiler the
 * memory they read (TILELOADD's operands are the address and the stride in
 * registers, LDTILECFG's the first 8 bytes of the configuration): each tile
 * load and the configuration load are fenced with a compiler barrier that
 * takes the pointer, so that the stores filling a copy are made before
 * and not moved after.
 *
 * The tile instructions are reached through the TILE_* macros only: a test
 * (test/amx_emu.c) includes this file with them defined as a C model of
 * the unit (BF16_AMX_EMULATED), to run this very code on CPUs without AMX
 * (with the sanitizers checking every byte a tile load reads). */
#include "attn_config.h"
#include "kernels/bf16.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#ifndef BF16_AMX_EMULATED
/* The compiler's view: the asm may read everything through p. */
#define ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")
#define TILE_CONFIG(p)                                                                      \
    do {                                                                                    \
        ESCAPE(p);                                                                          \
        _tile_loadconfig(p);                                                                \
    } while (0)
#define TILE_LOAD(t, p, stride)                                                             \
    do {                                                                                    \
        ESCAPE(p);                                                                          \
        _tile_loadd(t, p, stride);                                                          \
        __asm__ volatile("" : : : "memory");                                                \
    } while (0)
#define TILE_STORE(t, p, stride)                                                            \
    do {                                                                                    \
        _tile_stored(t, p, stride);                                                         \
        ESCAPE(p);                                                                          \
    } while (0)
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define TILE_RELEASE() _tile_release()
#define MM_AMX attn_bf16_mm_amx
#endif

/* LDTILECFG's 64 bytes (the SDM: palette 1, start_row 0, reserved bytes
 * 0; bytes per row and rows of tmm0-7, 0 for the names past 7). */
typedef struct tilecfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;
_Static_assert(sizeof(tilecfg) == 64, "LDTILECFG reads 64 bytes");

/* A zero-padded A tile: rows r < mr of A from p (stride lda), kn <= 32
 * elements of each (masked: nothing past them is read, an odd K's A(r, K)
 * included), 0 elsewhere. */
static inline void fill_a(uint16_t *t, const uint16_t *p, int64_t lda, int mr, int64_t kn)
{
    const __mmask32 m = kn >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << kn) - 1u);
    for (int r = 0; r < 16; r++) {
        const __m512i v =
            r < mr ? _mm512_maskz_loadu_epi16(m, p + r * lda) : _mm512_setzero_si512();
        _mm512_store_si512((void *)(t + 32 * r), v);
    }
}

static inline __mmask16 cols_mask(int n)
{
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* A zero-padded B tile: pair rows q < pn of the panel from p (stride
 * ldb), nc <= 16 columns of each (masked), 0 elsewhere. */
static inline void fill_b(uint32_t *t, const uint32_t *p, int64_t ldb, int64_t pn, int nc)
{
    const __mmask16 m = cols_mask(nc);
    for (int q = 0; q < 16; q++) {
        const __m512i v =
            q < pn ? _mm512_maskz_loadu_epi32(m, p + q * ldb) : _mm512_setzero_si512();
        _mm512_store_si512((void *)(t + 16 * q), v);
    }
}

void MM_AMX(int64_t M, int64_t N, int64_t K, float alpha, const float *rs, const uint16_t *a,
            int64_t lda, const uint32_t *b, int64_t ldb, float *c, int64_t ldc, int acc,
            attn_ahead *ah)
{
    if (M <= 0 || N <= 0)
        return;
    const int64_t P = (K + 1) / 2;
    const long sa = (long)(lda * (int64_t)sizeof *a), sb = (long)(ldb * (int64_t)sizeof *b);
    _Alignas(64) tilecfg cfg;
    _Alignas(64) uint16_t at[2][16 * 32];  /* A copies (tmm4, tmm5) */
    _Alignas(64) uint32_t bt[2][16 * 16];  /* B copies (tmm6, tmm7) */
    _Alignas(64) float ct[32 * 32];        /* the four C tiles, rows of 32 */
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    TILE_CONFIG(&cfg);
    const __m512 alv = _mm512_set1_ps(alpha);
    for (int64_t j = 0; j < N; j += 32) {
        /* columns of the two column tiles (n1 = 0: no second one) */
        const int n0 = N - j >= 16 ? 16 : (int)(N - j);
        const int n1 = N - j >= 32 ? 16 : N - j > 16 ? (int)(N - j - 16) : 0;
        const __mmask16 mk0 = cols_mask(n0), mk1 = cols_mask(n1);
        for (int64_t i = 0; i < M; i += 32) {
            const int m0 = M - i >= 16 ? 16 : (int)(M - i);
            const int m1 = M - i >= 32 ? 16 : M - i > 16 ? (int)(M - i - 16) : 0;
            if (ah)
                attn_ahead_step(ah);
            TILE_ZERO(0);
            if (n1)
                TILE_ZERO(1);
            if (m1) {
                TILE_ZERO(2);
                if (n1)
                    TILE_ZERO(3);
            }
            for (int64_t k = 0; k < K; k += 32) {
                /* a whole step reads in place; the last one of a K that is
                 * not a multiple of 32 from copies (pn pair rows of B, kn
                 * elements of A) */
                const int whole = K - k >= 32;
                const int64_t kn = whole ? 32 : K - k;
                const int64_t pn = P - k / 2 >= 16 ? 16 : P - k / 2;
                const uint16_t *a0 = a + i * lda + k;
                const uint32_t *b0 = b + (k / 2) * ldb + j;
                if (whole && m0 == 16) {
                    TILE_LOAD(4, a0, sa);
                } else {
                    fill_a(at[0], a0, lda, m0, kn);
                    TILE_LOAD(4, at[0], 64);
                }
                if (m1) {
                    const uint16_t *a1 = a0 + 16 * lda;
                    if (whole && m1 == 16) {
                        TILE_LOAD(5, a1, sa);
                    } else {
                        fill_a(at[1], a1, lda, m1, kn);
                        TILE_LOAD(5, at[1], 64);
                    }
                }
                if (whole && n0 == 16) {
                    TILE_LOAD(6, b0, sb);
                } else {
                    fill_b(bt[0], b0, ldb, pn, n0);
                    TILE_LOAD(6, bt[0], 64);
                }
                if (n1) {
                    if (whole && n1 == 16) {
                        TILE_LOAD(7, b0 + 16, sb);
                    } else {
                        fill_b(bt[1], b0 + 16, ldb, pn, n1);
                        TILE_LOAD(7, bt[1], 64);
                    }
                }
                TILE_DP(0, 4, 6);
                if (n1)
                    TILE_DP(1, 4, 7);
                if (m1) {
                    TILE_DP(2, 5, 6);
                    if (n1)
                        TILE_DP(3, 5, 7);
                }
            }
            TILE_STORE(0, ct, 32 * sizeof(float));
            if (n1)
                TILE_STORE(1, ct + 16, 32 * sizeof(float));
            if (m1) {
                TILE_STORE(2, ct + 16 * 32, 32 * sizeof(float));
                if (n1)
                    TILE_STORE(3, ct + 16 * 32 + 16, 32 * sizeof(float));
            }
            /* c = alpha_r * s or fma(alpha_r, s, c), rows < M, columns < N */
            const int mr = m0 + m1;
            for (int r = 0; r < mr; r++) {
                const __m512 al = rs ? _mm512_set1_ps(rs[i + r]) : alv;
                float *cr = c + (i + r) * ldc + j;
                const float *sr = ct + 32 * r;
                const __m512 s0 = _mm512_load_ps(sr);
                if (acc)
                    _mm512_mask_storeu_ps(cr, mk0,
                                          _mm512_fmadd_ps(al, s0, _mm512_maskz_loadu_ps(mk0, cr)));
                else
                    _mm512_mask_storeu_ps(cr, mk0, _mm512_mul_ps(al, s0));
                if (n1) {
                    const __m512 s1 = _mm512_load_ps(sr + 16);
                    if (acc)
                        _mm512_mask_storeu_ps(
                            cr + 16, mk1,
                            _mm512_fmadd_ps(al, s1, _mm512_maskz_loadu_ps(mk1, cr + 16)));
                    else
                        _mm512_mask_storeu_ps(cr + 16, mk1, _mm512_mul_ps(al, s1));
                }
            }
        }
    }
    TILE_RELEASE();
}
