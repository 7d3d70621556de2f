/*
 * The tile engine's BF16 products (lib/kernels/bf16.h: the attn_bf16_kernels
 * tables scalar, avx512, avx512bf16 and amx).  Every table this CPU runs is
 * checked; a table the CPU lacks (avx512: AVX-512 F+BW+VL, avx512bf16: also
 * AVX512_BF16, per attn_cpu_flags(); amx: ATTN_CPU_AMXBF16, i.e. AMX-BF16
 * and Linux's permission for the tile state) or the build lacks
 * (avx512bf16 without ATTN_HAVE_AVX512BF16, amx without ATTN_HAVE_AMX) is
 * skipped and the output says so ("amx: SKIPPED (...)").
 *
 * The contract of mm (bf16.h, VDPBF16PS's definition): per element, the pairs
 * of k in order p = 0, 1, ..., each adding its odd product, then its even
 * one, from acc = 0, BF16 denormal inputs read as zero (DAZ), denormal sums
 * flushed to zero of their sign (FTZ, ftz(x) = |x| < FLT_MIN ? +-0 : x), an
 * odd K's A(r, K) read as 0 (and never loaded); then
 * c = acc ? fmaf(alpha_r, s, c) : alpha_r * s, alpha_r = rs ? rs[r] : alpha,
 * without DAZ or FTZ.  The test writes that model itself (model()) in two
 * forms of one step:
 *   flush  acc = ftz(acc + ftz(a * b))   (each product rounded, flushed)
 *   fused  acc = ftz(fmaf(a, b, acc))    (one rounding per accumulation)
 * A product of two BF16 values is exact in fp32 unless it falls below
 * 2^-126, so the two agree on every input where no product underflows.
 * Where one does, VDPBF16PS is the fused form (the SDM: "FP32 FMA with DAZ,
 * FTZ, RNE", rounding "each accumulation of the FMA"; an AMD EPYC with
 * AVX512_BF16 does the same): the underflowing product is not flushed before
 * it is added.  The scalar table is the fused form (bf16.c, fixed with this
 * test: it flushed the product first, so the native table differed from its
 * C reference on such data), and the avx512 table's FMAs under the MXCSR's
 * DAZ and FTZ are the fused form by construction; so all three tables are
 * held to the same bits on every input, the tiny ones included.
 *
 *  mm         one table of cases (mm_cases, 263 rows: every M in 1..25, 96,
 *             197 (every tail of the 12-row blocks and of their near-equal
 *             splits), every N in 1..40, 64, 65, 512 (every tail of the 32-
 *             and 16-column blocks), K in 0, 1, 2, 3 .. 512 odd and even;
 *             padded lda / ldb / ldc (odd lda: unaligned pair loads);
 *             alpha 1 / 0.37; rs NULL / per-row factors; acc 0 / 1), random
 *             BF16 inputs of magnitude 2^-8 .. 2^8 with random signs (no
 *             product below 2^-126, so both forms of the model agree:
 *             checked), every check on every row:
 *             - the scalar table bit for bit equal to the model (both forms);
 *             - every SIMD table bit for bit equal to the scalar table over
 *               the whole C buffer: the padding columns and a guard of
 *               GUARD floats after the last row hold a canary that must
 *               survive; with acc = 0, C holds NaN that must not be read;
 *             - results unchanged when everything of A and B outside the
 *               product (A(r, k >= K) within lda, B's columns >= N within
 *               ldb, the guards after the last rows) is NaN instead of
 *               finite: an odd K's A(r, K) is never read (for the last row
 *               it is the guard, NaN);
 *             - mm steps its look-ahead stream (a hint: no bit changes);
 *             - the scalar table against a float64 reference:
 *                 |err| <= 2^-23 ((K + 1) |alpha_r| sum_k |a||b| + |c|)
 *                          + 2^-126
 *               (K roundings of the chain, one of alpha_r (and C);
 *               u = 2^-24 doubled for slack).
 *  mm tiny    40 small cases on data near the bottom of the range:
 *             - daz: BF16 denormals mixed into normal-range values (small K,
 *               so that whole dot products consist of denormal terms): no
 *               product underflows, the denormals must read as zero;
 *             - underflow: values 2^-68 .. 2^-56 and denormals, so that
 *               products fall below 2^-126 next to sums of their size and
 *               sums cancel to denormals (flushed);
 *             both with per-row factors down to 2^-110 and a denormal one
 *             and, with acc = 1, denormal C: the results of the final step
 *             are kept denormal (no FTZ/DAZ outside the reduction: the
 *             avx512 table restores the MXCSR before it).  The scalar table
 *             bit for bit equal to the fused model, every table equal to
 *             the scalar one.  The run counts and requires the elements
 *             where it matters: a no-DAZ model differs (daz), the flush and
 *             the fused forms differ (underflow), a denormal result.
 *  pack_rows  N in 0..40 and 512 x K in 0..70, 128, 197 (3066 shapes), rows
 *             as an array of pointers into one pool, in shuffled order at
 *             random (odd and even) element offsets, each followed by
 *             0xFFFF (row_j[K] of an odd K: the high half must be 0, not
 *             0xFFFF), the last row ending at the end of its allocation;
 *             padded ldt: bit for bit equal to
 *               bt[p ldt + j] = row_j[2p] | row_j[2p + 1] << 16
 *             (high half 0 past K), every other element of bt (and a
 *             guard) untouched.
 *  pack_pairs N in 0..40, 511, 512 x D in 1..70, 128 (3053 shapes), rows
 *             as above, padded ldp: bit for bit equal to
 *               vp[q ldp + x] = rows[2q][x] | rows[2q + 1][x] << 16
 *             (high half 0 when 2q + 1 == N), everything else untouched.
 *  round      n in 0..100 and 1000: random floats with +-0, denormals (ties
 *             among them), +-Inf, quiet and signalling NaNs with payloads,
 *             values exactly halfway between BF16 neighbours with an even
 *             and an odd lower neighbour, their neighbours, values that
 *             round up to Inf (0x7F7FFFFF, 0x7F7F8000): every table equal to
 *             attn_f32_to_bf16 (kernels/convert.h) per element, out of place
 *             and in place (dst = (uint16_t *)src), src untouched out of
 *             place, dst beyond n (and, in place, every byte from 2n on)
 *             untouched.
 *  tr_round   rows in 0..70, 128 x cols in 0..40, 255, 256 (3096 shapes):
 *             src rows at a padded lds whose padding (and the rows after
 *             the block) hold values that would round to something else,
 *             inputs as for round (specials, ties, denormals, NaNs); dst at
 *             a padded ldd (odd and even) prefilled with a canary: bit for
 *             bit
 *               dst[c ldd + r] = attn_f32_to_bf16(src[r lds + c])
 *             for r < rows, c < cols, every other element of dst (and a
 *             guard after it) untouched, src untouched; half the shapes
 *             without fp32 denormals (the native table's VCVTNE2PS2BF16
 *             path; a group with one takes its exact fallback).
 *  ds_pack    rows in 0..40, 95, 96 x cols in 0..40, 255, 256 (1849 shapes),
 *             with d (dS = p * (dp - d) computed) and without (dS = dp):
 *             P, dP as for round (specials, ties, denormals, NaN) at a
 *             padded ldp, d random with specials; padded ldq and lds,
 *             outputs prefilled with canaries: bit for bit the model
 *               pp[q ldq + j] = bf16(P[2q][j]) | bf16(P[2q+1][j]) << 16,
 *               sp likewise of dS = (float)(p * (float)(dp - d)),
 *               s16[r lds + j] = bf16(dS[r][j])
 *             (high halves 0 past an odd last row, bf16 =
 *             attn_f32_to_bf16), every other element untouched, p and
 *             dp untouched; half the shapes without fp32 denormals in
 *             P and dP (dS may still be one).
 *  amx        the amx table's mm is not bitwise the others' (TDPBF16PS adds
 *             inside the unit in its own order; bf16.h), so it is held to
 *             bounds instead, on every row of both tables above:
 *             - normal data: against the float64 reference within
 *                 2^-23 ((K + 1) |alpha_r| sum_k |a||b| + |c|) + 2^-126
 *               and against the scalar table within twice that;
 *             - tiny data (DAZ, flushes): against the scalar table within
 *               twice the same bound on the DAZ inputs plus
 *               4 (K + 1) |alpha_r| 2^-126 (each flush moves a sum by less
 *               than 2^-126);
 *             - bitwise: the canaries (C beyond N, the guard) untouched,
 *               C not read with acc = 0 (NaN there), the same bits with NaN
 *               instead of finite values outside the product in A and B,
 *               the look-ahead stream stepped.
 *             The amx table runs where the CPU has it (else "amx: SKIPPED");
 *             its kernel (bf16_amx.c, the same source) also runs on any CPU
 *             with AVX-512 on a C model of the tile unit (amx_emu.c), in
 *             two orders of TDPBF16PS's additions (the SDM's two sums, the
 *             intrinsics guide's one chain), under the same checks, with
 *             the model checking the tile configuration, every tile's
 *             shape and TILERELEASE at the end; its tile loads are plain C
 *             reads, which the sanitizer build checks byte by byte.
 *  at         attn_bf16_at(level): scalar below ATTN_SIMD_AVX512, avx512 at
 *             ATTN_SIMD_AVX512, avx512bf16 at ATTN_SIMD_AVX512BF16 when built
 *             in (else avx512), amx at ATTN_SIMD_AMX where attn_bf16_amx()
 *             has it (else the best table below that the CPU runs); the
 *             tables' names; ATTN_SIMD=avx512|avx512bf16|amx cap the level
 *             (attn_settings_level) and attn_blas_query's info.bf16 names
 *             the table of that level ("amx" where it runs).
 *
 * Prints `[accuracy] ...` lines with the largest error / tolerance, and the
 * count of each check.  ATTN_TEST_QUICK=1 (valgrind) drops the mm rows above
 * 2^18 multiply-adds.  Deterministic: xorshift generators with fixed seeds
 * (ATTN_TEST_SEED changes the data, not the table of cases).
 * Links the static library: the kernels are internal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "attn_config.h"
#include "cpu/cpu.h"
#include "kernels/bf16.h"
#include "kernels/convert.h"
#if ATTN_HAVE_X86_KERNELS
#include "amx_emu.h"
#endif

#define GUARD 64
#define MAX_FAILS 20
/* ATTN_TEST_QUICK: mm rows above this many multiply-adds are dropped. */
#define QUICK_MACS (1 << 18)

static const uint32_t CANARY = 0x7fc5a5a5u;  /* C beyond N and its guard */
static const uint32_t NOTREAD = 0x7fc0deadu; /* C with acc = 0 */
static const uint16_t PADNAN16 = 0x7fc1u;    /* A's padding (a BF16 NaN) */
static const uint32_t PADNAN32 = 0xffc17fc1u; /* B's padding (two NaNs) */
static const uint16_t ROWEND = 0xffffu;      /* after each row of a pack */
static const uint32_t CANARY32 = 0xa5a5c3c3u; /* bt / vp outside the panel */
static const uint16_t CANARY16 = 0xa5c3u;    /* round: dst beyond n */

static float fbits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t ubits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double urand(void) { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }

#define MAX_TABS 4
static const attn_bf16_kernels *tabs[MAX_TABS];
static int ntabs;

/* The tables held to the amx bounds instead of bitwise (see the top): the
 * amx table where this CPU runs it, and its kernel on the model of the unit
 * in both orders where the CPU has AVX-512.  Only their mm is used. */
#define MAX_LOOSE 3
static attn_bf16_kernels loose[MAX_LOOSE];
static int nloose;

#if ATTN_HAVE_X86_KERNELS
static void mm_model_sdm(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                         const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb,
                         float *c, int64_t ldc, int acc, attn_ahead *ah)
{
    amx_emu_mm(AMX_EMU_SDM, M, N, K, alpha, rs, a, lda, b, ldb, c, ldc, acc, ah);
}

static void mm_model_chain(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                           const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb,
                           float *c, int64_t ldc, int acc, attn_ahead *ah)
{
    amx_emu_mm(AMX_EMU_CHAIN, M, N, K, alpha, rs, a, lda, b, ldb, c, ldc, acc, ah);
}
#endif

/* Whether /proc/cpuinfo's flags list the word (for the output only). */
static int cpuinfo_flag(const char *word)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int found = 0;
    const size_t n = strlen(word);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5))
            continue;
        for (const char *p = strstr(line, word); p && !found; p = strstr(p + 1, word))
            found = p[-1] == ' ' && (p[n] == ' ' || p[n] == '\n' || p[n] == 0);
        break;
    }
    fclose(f);
    return found;
}

static int quick;
static int fails;

static void fail_note(const char *fmt, ...)
{
    fails++;
    if (fails > MAX_FAILS)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static void print_tables(const char *what)
{
    printf("%s: tables", what);
    for (int t = 0; t < ntabs; t++)
        printf(" %s", tabs[t]->name);
    printf("\n");
}

#if ATTN_HAVE_X86_KERNELS
#include <immintrin.h>
/* Whether setting the MXCSR's DAZ makes the SSE unit read a denormal as
 * zero (a real CPU does; valgrind's emulation ignores the bit). */
static int mxcsr_daz_honored(void)
{
    volatile float den = 0x1p-140f, one = 1.0f;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    const float r = den * one;
    _mm_setcsr(csr);
    return r == 0.0f;
}
#endif

static int setup(void **state)
{
    (void)state;
    const char *q = getenv("ATTN_TEST_QUICK");
    quick = q && *q && strcmp(q, "0");
    const char *seed = getenv("ATTN_TEST_SEED");
    if (seed && *seed)
        rng = strtoull(seed, NULL, 0) | 1;
    ntabs = 0;
    tabs[ntabs++] = &attn_bf16_scalar;
    printf("bf16 tables checked: scalar");
#if ATTN_HAVE_X86_KERNELS
    const unsigned f = attn_cpu_flags();
    const int avx512 = !!(f & ATTN_CPU_AVX512);
    /* The avx2 table gets VDPBF16PS's DAZ and FTZ from the MXCSR, which
     * valgrind does not emulate: there it is left out (the library's
     * other tests still run it). */
    const int daz = mxcsr_daz_honored();
    if ((f & ATTN_CPU_AVX2) && daz) {
        tabs[ntabs++] = attn_bf16_avx2();
        printf(" avx2");
    } else {
        printf("; SKIPPED avx2 (%s)", daz ? "CPU lacks AVX2/FMA"
                                         : "the MXCSR's DAZ is not honored here: valgrind?");
    }
    if (avx512)
        tabs[ntabs++] = &attn_bf16_avx512;
#if ATTN_HAVE_AVX512BF16
    const int native = avx512 && (f & ATTN_CPU_AVX512BF16);
    if (native)
        tabs[ntabs++] = &attn_bf16_avx512bf16;
    printf("%s%s", avx512 ? " avx512" : "", native ? " avx512bf16" : "");
    if (!avx512)
        printf("; SKIPPED avx512 (CPU lacks AVX-512 F/BW/VL)");
    if (!native)
        printf("; SKIPPED avx512bf16 (CPU lacks %s)", avx512 ? "AVX512_BF16" : "AVX-512");
#else
    printf("%s", avx512 ? " avx512" : "");
    if (!avx512)
        printf("; SKIPPED avx512 (CPU lacks AVX-512 F/BW/VL)");
    printf("; SKIPPED avx512bf16 (not built: the compiler lacks AVX512_BF16)");
#endif
#else
    printf("; SKIPPED avx512, avx512bf16 (no x86 SIMD tables in this build)");
#endif
    printf("\n");

    nloose = 0;
    const attn_bf16_kernels *amx = attn_bf16_amx();
    if (amx) {
        loose[nloose++] = *amx;
        printf("amx: checked against its bounds (%s)\n", attn_cpu_amx_note());
    } else {
        printf("amx: SKIPPED (no AMX-BF16 on this CPU or the kernel refused the permission): "
               "%s%s\n",
               attn_cpu_amx_note(),
               cpuinfo_flag("amx_bf16") ? " (note: /proc/cpuinfo lists amx_bf16)" : "");
    }
#if ATTN_HAVE_X86_KERNELS
    if (avx512) {
        loose[nloose] = attn_bf16_scalar;
        loose[nloose].name = "amx-model-sdm";
        loose[nloose++].mm = mm_model_sdm;
        loose[nloose] = attn_bf16_scalar;
        loose[nloose].name = "amx-model-chain";
        loose[nloose++].mm = mm_model_chain;
        printf("amx model: bf16_amx.c's mm on the C model of the tile unit, both orders\n");
    } else {
        printf("amx model: SKIPPED (the kernel's copies and combine need AVX-512 F/BW/VL)\n");
    }
#endif
    return 0;
}

/* ------------------------------------------------------------------ */
/* BF16 values */

/* Normal range: magnitude 2^e (1 + m / 128), e in [lo, hi], random sign. */
static uint16_t bf_normal(int lo, int hi)
{
    const uint64_t g = next();
    const int e = lo + (int)((g >> 8) % (uint64_t)(hi - lo + 1));
    return (uint16_t)((g >> 40 & 1) << 15 | (uint32_t)(127 + e) << 7 | (g >> 20 & 0x7f));
}

/* A BF16 denormal (exponent field 0, mantissa != 0), random sign. */
static uint16_t bf_denormal(void)
{
    const uint64_t g = next();
    return (uint16_t)((g >> 40 & 1) << 15 | (1 + (g >> 20) % 127));
}

enum { KIND_NORMAL, KIND_DAZ, KIND_UNDERFLOW };
static const char *const kind_names[] = { "normal", "daz", "underflow" };

/* One element of A or B of a kind. */
static uint16_t bf_of(int kind)
{
    switch (kind) {
    case KIND_NORMAL:
        return bf_normal(-8, 7);
    case KIND_DAZ: {
        const uint64_t g = next() % 10;
        return g < 4 ? bf_denormal() : g < 5 ? (uint16_t)((next() & 1) << 15) : bf_normal(-8, 7);
    }
    default: {
        const uint64_t g = next() % 10;
        return g < 2 ? bf_denormal() : g < 3 ? (uint16_t)((next() & 1) << 15) : bf_normal(-68, -56);
    }
    }
}

/* A value of C (acc = 1): normal for the normal kind; for the tiny kinds
 * also tiny normals and fp32 denormals. */
static float c_of(int kind)
{
    const uint64_t g = next();
    const float s = g & 1 ? -1.0f : 1.0f;
    if (kind == KIND_NORMAL || g % 3 == 0)
        return s * ldexpf(1.0f + (float)urand(), (int)(g >> 8 & 15) - 8);
    if (g % 3 == 1)
        return fbits((uint32_t)(g & 1) << 31 | (uint32_t)(1 + (g >> 16) % 0x7fffff));
    return s * ldexpf(1.0f + (float)urand(), -126 + (int)(g >> 8 & 7));
}

/* ------------------------------------------------------------------ */
/* The model of mm (the contract, written here from bf16.h) */

static float bf_f32(uint16_t h) { return fbits((uint32_t)h << 16); }
/* DAZ: a BF16 denormal (exponent field 0) reads as zero of its sign. */
static float bf_daz(uint16_t h) { return (h & 0x7f80u) ? bf_f32(h) : bf_f32(h & 0x8000u); }
static float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

enum { STEP_FLUSH, STEP_FUSED, STEP_NODAZ };

static float step(float s, uint16_t a, uint16_t b, int how)
{
    switch (how) {
    case STEP_FLUSH:
        return ftz(s + ftz(bf_daz(a) * bf_daz(b)));
    case STEP_FUSED:
        return ftz(fmaf(bf_daz(a), bf_daz(b), s));
    default: /* what the sum would be without DAZ (to count where it shows) */
        return ftz(fmaf(bf_f32(a), bf_f32(b), s));
    }
}

/* A(r, k) = a[r lda + k] for k < K (A(r, K) = 0 for an odd K, never read),
 * B(k, j) = half k % 2 of b[(k / 2) ldb + j]; pairs in order, odd then even. */
static void model(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                  const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                  int64_t ldc, int acc, int how)
{
    const int64_t P = (K + 1) / 2;
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < P; p++) {
                const uint16_t alo = a[r * lda + 2 * p];
                const uint16_t ahi = 2 * p + 1 < K ? a[r * lda + 2 * p + 1] : 0;
                const uint32_t w = b[p * ldb + j];
                s = step(s, ahi, (uint16_t)(w >> 16), how);
                s = step(s, alo, (uint16_t)(w & 0xffffu), how);
            }
            const float al = rs ? rs[r] : alpha;
            float *cj = c + r * ldc + j;
            *cj = acc ? fmaf(al, s, *cj) : al * s;
        }
}

/* First differing float of two buffers (bitwise), -1 if none. */
static long first_diff(const float *x, const float *y, size_t n)
{
    if (!memcmp(x, y, n * sizeof *x))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (memcmp(x + i, y + i, sizeof *x))
            return (long)i;
    return -1;
}

static long count_diff(const float *x, const float *y, size_t n)
{
    long d = 0;
    for (size_t i = 0; i < n; i++)
        d += !!memcmp(x + i, y + i, sizeof *x);
    return d;
}

typedef struct acc_stat {
    double max_ratio, max_err;
    long elems;
} acc_stat;

/* The scalar table against float64: alpha_r sum_k A(r, k) B(k, j) (+ c0). */
static void check_ref(const char *what, int64_t M, int64_t N, int64_t K, float alpha,
                      const float *rs, const uint16_t *a, int64_t lda, const uint32_t *b,
                      int64_t ldb, int acc, const float *c0, const float *c, int64_t ldc,
                      acc_stat *st)
{
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                const uint32_t w = b[(k / 2) * ldb + j];
                const double p = (double)bf_f32(a[r * lda + k]) *
                                 (double)bf_f32((uint16_t)(k & 1 ? w >> 16 : w & 0xffffu));
                s += p;
                sa += fabs(p);
            }
            const double cin = acc ? (double)c0[r * ldc + j] : 0.0;
            const double al = rs ? (double)rs[r] : (double)alpha;
            const double ref = al * s + cin;
            const double tol = ldexp(1.0, -23) * ((double)(K + 1) * fabs(al) * sa + fabs(cin)) +
                               ldexp(1.0, -126);
            const double got = c[r * ldc + j];
            const double err = fabs(got - ref);
            const double ratio = err / tol;
            if (!(ratio <= 1.0))
                fail_note("%s: element (%lld, %lld) = %.9g, reference %.9g, err %.3g > tol %.3g",
                          what, (long long)r, (long long)j, got, ref, err, tol);
            if (isnan(ratio) || ratio > st->max_ratio)
                st->max_ratio = isnan(ratio) ? INFINITY : ratio;
            if (isnan(err) || err > st->max_err)
                st->max_err = isnan(err) ? INFINITY : err;
            st->elems++;
        }
}

/* A table held to the amx bounds (see the top). */
typedef struct loose_stat {
    double ref_ratio;    /* largest err / bound against float64 (normal data) */
    double scalar_ratio; /* largest |x - scalar| / its bound */
    long elems, differ;  /* elements checked; of which not bitwise scalar's */
} loose_stat;

static void check_loose(const char *what, const char *name, int kind, int64_t M, int64_t N,
                        int64_t K, float alpha, const float *rs, const uint16_t *a,
                        int64_t lda, const uint32_t *b, int64_t ldb, int acc, const float *c0,
                        const float *x, const float *sc, int64_t ldc, loose_stat *st)
{
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0, sd = 0;
            for (int64_t k = 0; k < K; k++) {
                const uint32_t w = b[(k / 2) * ldb + j];
                const uint16_t ha = a[r * lda + k], hb = (uint16_t)(k & 1 ? w >> 16 : w & 0xffffu);
                const double p = (double)bf_f32(ha) * (double)bf_f32(hb);
                s += p;
                sa += fabs(p);
                sd += fabs((double)bf_daz(ha) * (double)bf_daz(hb));
            }
            const double cin = acc ? (double)c0[r * ldc + j] : 0.0;
            const double al = rs ? (double)rs[r] : (double)alpha;
            const double got = x[r * ldc + j], scal = sc[r * ldc + j];
            double tol_s;
            if (kind == KIND_NORMAL) {
                const double tol = ldexp(1.0, -23) * ((double)(K + 1) * fabs(al) * sa + fabs(cin)) +
                                   ldexp(1.0, -126);
                const double err = fabs(got - (al * s + cin)), ratio = err / tol;
                if (!(ratio <= 1.0))
                    fail_note("%s: %s element (%lld, %lld) = %.9g, reference %.9g, err %.3g > "
                              "tol %.3g", what, name, (long long)r, (long long)j, got,
                              al * s + cin, err, tol);
                if (isnan(ratio) || ratio > st->ref_ratio)
                    st->ref_ratio = isnan(ratio) ? INFINITY : ratio;
                tol_s = 2.0 * tol;
            } else {
                tol_s = 2.0 * (ldexp(1.0, -23) * ((double)(K + 1) * fabs(al) * sd + fabs(cin)) +
                               ldexp(1.0, -126)) +
                        4.0 * (double)(K + 1) * fabs(al) * ldexp(1.0, -126);
            }
            const double ratio_s = fabs(got - scal) / tol_s;
            if (!(ratio_s <= 1.0))
                fail_note("%s: %s element (%lld, %lld) = %a, scalar %a: |diff| %.3g > %.3g", what,
                          name, (long long)r, (long long)j, got, scal, fabs(got - scal), tol_s);
            if (isnan(ratio_s) || ratio_s > st->scalar_ratio)
                st->scalar_ratio = isnan(ratio_s) ? INFINITY : ratio_s;
            st->differ += !!memcmp(x + r * ldc + j, sc + r * ldc + j, sizeof *x);
            st->elems++;
        }
}

static void print_loose(const char *what, int ref, const loose_stat *ls)
{
    for (int t = 0; t < nloose; t++) {
        printf("[accuracy] bf16 %s %s: %ld elements, %ld not bitwise the scalar table's; max "
               "err/bound ", what, loose[t].name, ls[t].elems, ls[t].differ);
        if (ref)
            printf("%.3f (float64), ", ls[t].ref_ratio);
        printf("%.3f (against the scalar table)\n", ls[t].scalar_ratio);
    }
#if ATTN_HAVE_X86_KERNELS
    const char *first;
    const long errs = amx_emu_errors(&first);
    if (errs)
        fail_note("the model of the tile unit saw %ld misuses; the first: %s", errs, first);
#endif
}

/* ------------------------------------------------------------------ */
/* mm: the table of cases */

static const int MS[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                          15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 96, 197 };
static const int NS[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                          16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30,
                          31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 64, 65, 512 };
static const int KS[] = { 0,  1,  2,   3,   4,   5,   6,   7,   8,   9,   15,  16,  17,  31,
                          32, 33, 63,  64,  65,  127, 128, 129, 255, 256, 257, 510, 511, 512 };
static const int PADS[] = { 0, 1, 2, 3, 5, 8, 16, 17, 31 };
#define NMS ((int)(sizeof MS / sizeof *MS))
#define NNS ((int)(sizeof NS / sizeof *NS))
#define NKS ((int)(sizeof KS / sizeof *KS))
#define NPADS ((int)(sizeof PADS / sizeof *PADS))
/* 27, 43 and 28 are coprime: the cycled rows mix every M, N and K. */
#define N_CYCLED 258
/* then a few large rows: many full blocks both ways, odd and even K */
static const int BIG[][3] = {
    { 197, 512, 512 }, { 96, 65, 511 }, { 197, 40, 257 }, { 25, 512, 129 }, { 96, 512, 64 },
};
#define N_BIG ((int)(sizeof BIG / sizeof *BIG))
#define N_MM (N_CYCLED + N_BIG)

/* The tiny-data cases: shapes x acc x rs per kind; daz with small K, so
 * that some dot products have only denormal terms. */
static const int DAZ_SHAPES[][3] = { { 13, 33, 3 }, { 25, 40, 2 }, { 5, 17, 1 },
                                     { 12, 32, 5 }, { 24, 48, 7 } };
static const int UF_SHAPES[][3] = { { 13, 33, 37 }, { 25, 40, 64 }, { 1, 17, 9 },
                                    { 12, 32, 128 }, { 7, 5, 3 } };
#define N_DAZ_SHAPES ((int)(sizeof DAZ_SHAPES / sizeof *DAZ_SHAPES))
#define N_UF_SHAPES ((int)(sizeof UF_SHAPES / sizeof *UF_SHAPES))
#define N_TINY (4 * (N_DAZ_SHAPES + N_UF_SHAPES))

typedef struct mm_case {
    int M, N, K;
    int pa, pb, pc; /* leading-dimension padding of A, B, C */
    float alpha;
    int acc;
    int rs; /* one factor per row (rs[r]) instead of alpha */
    int kind;
} mm_case;

static mm_case mm_cases[N_MM], tiny_cases[N_TINY];

static uint64_t case_gen(uint64_t *g)
{
    *g ^= *g << 13;
    *g ^= *g >> 7;
    *g ^= *g << 17;
    return *g;
}

/* The variant bits and the paddings from a generator of their own, so
 * ATTN_TEST_SEED changes the data only. */
static void make_mm_cases(void)
{
    uint64_t g = 0xB16B00B5F00Dull;
    for (int i = 0; i < N_MM; i++) {
        const uint64_t x = case_gen(&g);
        mm_case *c = &mm_cases[i];
        c->M = i < N_CYCLED ? MS[i % NMS] : BIG[i - N_CYCLED][0];
        c->N = i < N_CYCLED ? NS[i % NNS] : BIG[i - N_CYCLED][1];
        c->K = i < N_CYCLED ? KS[i % NKS] : BIG[i - N_CYCLED][2];
        c->alpha = (x >> 21) & 1 ? 0.37f : 1.0f;
        c->acc = (int)(x >> 22) & 1;
        c->rs = (int)(x >> 23) & 1;
        c->pa = PADS[(x >> 24) % NPADS];
        c->pb = PADS[(x >> 32) % NPADS];
        c->pc = PADS[(x >> 40) % NPADS];
        c->kind = KIND_NORMAL;
    }
    int n = 0;
    for (int kind = KIND_DAZ; kind <= KIND_UNDERFLOW; kind++) {
        const int ns = kind == KIND_DAZ ? N_DAZ_SHAPES : N_UF_SHAPES;
        for (int s = 0; s < ns; s++)
            for (int v = 0; v < 4; v++) {
                const int *sh = kind == KIND_DAZ ? DAZ_SHAPES[s] : UF_SHAPES[s];
                const uint64_t x = case_gen(&g);
                mm_case *c = &tiny_cases[n++];
                c->M = sh[0];
                c->N = sh[1];
                c->K = sh[2];
                c->acc = v & 1;
                c->rs = v >> 1;
                c->alpha = (s + v) & 1 ? 0.37f : 1.0f;
                c->pa = PADS[(x >> 24) % NPADS];
                c->pb = PADS[(x >> 32) % NPADS];
                c->pc = PADS[(x >> 40) % NPADS];
                c->kind = kind;
            }
    }
}

/* What the tiny cases must reach (summed over them). */
typedef struct tiny_stat {
    long nodaz_diff;  /* elements a model without DAZ gets otherwise */
    long flush_diff;  /* elements where the flush and the fused forms differ */
    long denormal;    /* denormal results (of the final step) */
} tiny_stat;

/* The look-ahead stream of a run: B's P rows of N uint32. */
static void ahead_over_b(attn_ahead *ah, const uint32_t *b, int64_t ldb, int64_t P, int64_t N)
{
    memset(ah, 0, sizeof *ah);
    ah->base[0] = (const char *)b;
    ah->ld[0] = ldb * (int64_t)sizeof *b;
    ah->rows[0] = P;
    ah->bytes[0] = N * (int64_t)sizeof *b;
    ah->ns = P > 0 && N > 0;
    ah->share = 1;
}

/* One mm case on every table: see the comment at the top. */
static void mm_run(int idx, const mm_case *cs, acc_stat *st, tiny_stat *ts, loose_stat *ls)
{
    const int64_t M = cs->M, N = cs->N, K = cs->K, P = (K + 1) / 2;
    const int64_t lda = K + cs->pa, ldb = N + cs->pb, ldc = N + cs->pc;
    const size_t na = (size_t)(M * lda) + GUARD, nb = (size_t)(P * ldb) + GUARD,
                 nc = (size_t)(M * ldc) + GUARD;
    uint16_t *a = malloc(na * sizeof *a);
    uint32_t *b = malloc(nb * sizeof *b);
    float *c0 = malloc(nc * sizeof *c0);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c0);
    for (int64_t r = 0; r < M; r++)
        for (int64_t k = 0; k < K; k++)
            a[r * lda + k] = bf_of(cs->kind);
    /* the pair panel of a K x N B: the high half of an odd K's last pair 0
     * (as pack_rows and pack_pairs make it) */
    for (int64_t p = 0; p < P; p++)
        for (int64_t j = 0; j < N; j++) {
            const uint32_t lo = bf_of(cs->kind);
            const uint32_t hi = 2 * p + 1 < K ? bf_of(cs->kind) : 0u;
            b[p * ldb + j] = lo | hi << 16;
        }
    for (size_t i = 0; i < nc; i++)
        c0[i] = fbits(CANARY);
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++)
            c0[r * ldc + j] = cs->acc ? c_of(cs->kind) : fbits(NOTREAD);
    float *rs = NULL;
    if (cs->rs) {
        rs = malloc((size_t)M * sizeof *rs);
        assert_non_null(rs);
        for (int64_t r = 0; r < M; r++) {
            if (cs->kind == KIND_NORMAL)
                rs[r] = r % 5 == 1 ? 0.0f : r % 5 == 2 ? 1.0f : r % 5 == 3 ? -2.5f
                      : (float)(1.0 / (1.0 + 60.0 * urand()));
            else /* down to a denormal factor: denormal results to keep */
                rs[r] = r % 5 == 0 ? 1.0f : r % 5 == 1 ? -0.37f : r % 5 == 2 ? ldexpf(1.0f, -20)
                      : r % 5 == 3 ? -ldexpf(1.0f, -110) : fbits(0x00300000u);
        }
    }
    char what[224];
    snprintf(what, sizeof what,
             "mm %s case %d (M %lld N %lld K %lld, lda %lld, ldb %lld, ldc %lld, %s %g, acc %d)",
             kind_names[cs->kind], idx, (long long)M, (long long)N, (long long)K,
             (long long)lda, (long long)ldb, (long long)ldc,
             cs->rs ? "per-row factors, not alpha" : "alpha", cs->alpha, cs->acc);

    float *res[2][MAX_TABS], *lres[2][MAX_LOOSE];
    for (int nan = 0; nan < 2; nan++) {
        /* everything of A and B outside the product: NaN or finite */
        for (size_t i = 0; i < na; i++)
            if (i >= (size_t)(M * lda) || (int64_t)i % lda >= K)
                a[i] = nan ? PADNAN16 : bf_of(cs->kind);
        for (size_t i = 0; i < nb; i++)
            if (i >= (size_t)(P * ldb) || (int64_t)i % ldb >= N)
                b[i] = nan ? PADNAN32 : (uint32_t)bf_of(cs->kind) | (uint32_t)bf_of(cs->kind) << 16;
        for (int t = 0; t < ntabs; t++) {
            /* the NaN run also carries a look-ahead stream over B's rows */
            attn_ahead ah;
            ahead_over_b(&ah, b, ldb, P, N);
            res[nan][t] = malloc(nc * sizeof(float));
            assert_non_null(res[nan][t]);
            memcpy(res[nan][t], c0, nc * sizeof(float));
            tabs[t]->mm(M, N, K, cs->alpha, rs, a, lda, b, ldb, res[nan][t], ldc, cs->acc,
                        nan ? &ah : NULL);
            if (nan && ah.ns && M > 0 && !(ah.s || ah.r || ah.x))
                fail_note("%s: %s did not step its look-ahead stream", what, tabs[t]->name);
        }
        for (int t = 0; t < nloose; t++) {
            attn_ahead ah;
            ahead_over_b(&ah, b, ldb, P, N);
            lres[nan][t] = malloc(nc * sizeof(float));
            assert_non_null(lres[nan][t]);
            memcpy(lres[nan][t], c0, nc * sizeof(float));
#if ATTN_HAVE_X86_KERNELS
            /* the model's tile loads: nothing of A and B but the product */
            amx_emu_fence(a, na * sizeof *a, lda * (int64_t)sizeof *a, M, K * (int64_t)sizeof *a,
                          b, nb * sizeof *b, ldb * (int64_t)sizeof *b, P,
                          N * (int64_t)sizeof *b);
#endif
            loose[t].mm(M, N, K, cs->alpha, rs, a, lda, b, ldb, lres[nan][t], ldc, cs->acc,
                        nan ? &ah : NULL);
#if ATTN_HAVE_X86_KERNELS
            amx_emu_fence(NULL, 0, 0, 0, 0, NULL, 0, 0, 0, 0);
#endif
            if (nan && ah.ns && M > 0 && !(ah.s || ah.r || ah.x))
                fail_note("%s: %s did not step its look-ahead stream", what, loose[t].name);
        }
    }
    /* the model (the canaries included: it leaves them) */
    float *want[3];
    for (int how = 0; how < 3; how++) {
        want[how] = malloc(nc * sizeof(float));
        assert_non_null(want[how]);
        memcpy(want[how], c0, nc * sizeof(float));
        model(M, N, K, cs->alpha, rs, a, lda, b, ldb, want[how], ldc, cs->acc, how);
    }
    long d;
    if (cs->kind == KIND_NORMAL) {
        d = first_diff(want[STEP_FLUSH], want[STEP_FUSED], nc);
        if (d >= 0)
            fail_note("%s: the test's data: the flush and fused models differ at float %ld "
                      "(a product underflowed)", what, d);
    } else {
        ts->nodaz_diff += count_diff(want[STEP_FUSED], want[STEP_NODAZ], nc);
        ts->flush_diff += count_diff(want[STEP_FUSED], want[STEP_FLUSH], nc);
        for (int64_t r = 0; r < M; r++)
            for (int64_t j = 0; j < N; j++) {
                const float v = want[STEP_FUSED][r * ldc + j];
                ts->denormal += v != 0.0f && fabsf(v) < FLT_MIN;
            }
    }
    d = first_diff(want[STEP_FUSED], res[0][0], nc);
    if (d >= 0)
        fail_note("%s: scalar != the model at float %ld (row %ld col %ld): %a vs %a (the "
                  "flush form: %a)",
                  what, d, d / (long)ldc, d % (long)ldc, res[0][0][d], want[STEP_FUSED][d],
                  want[STEP_FLUSH][d]);
    for (int t = 0; t < ntabs; t++) {
        d = first_diff(res[0][0], res[0][t], nc);
        if (d >= 0)
            fail_note("%s: %s != scalar at float %ld (row %ld col %ld): %a vs %a", what,
                      tabs[t]->name, d, d / (long)ldc, d % (long)ldc, res[0][t][d],
                      res[0][0][d]);
        d = first_diff(res[0][t], res[1][t], nc);
        if (d >= 0)
            fail_note("%s: %s changes with NaN outside the product in A / B, float %ld (row "
                      "%ld col %ld): %a vs %a",
                      what, tabs[t]->name, d, d / (long)ldc, d % (long)ldc, res[1][t][d],
                      res[0][t][d]);
    }
    if (cs->kind == KIND_NORMAL)
        check_ref(what, M, N, K, cs->alpha, rs, a, lda, b, ldb, cs->acc, c0, res[0][0], ldc,
                  st);
    for (int t = 0; t < nloose; t++) {
        /* bitwise: outside the product untouched, nothing outside it read */
        for (size_t i = 0; i < nc; i++)
            if ((i >= (size_t)(M * ldc) || (int64_t)i % ldc >= N) &&
                memcmp(lres[0][t] + i, c0 + i, sizeof *c0)) {
                fail_note("%s: %s wrote float %zu outside the product (row %ld col %ld): %a, "
                          "was %a", what, loose[t].name, i, (long)i / (long)ldc,
                          (long)i % (long)ldc, lres[0][t][i], c0[i]);
                break;
            }
        d = first_diff(lres[0][t], lres[1][t], nc);
        if (d >= 0)
            fail_note("%s: %s changes with NaN outside the product in A / B, float %ld (row "
                      "%ld col %ld): %a vs %a",
                      what, loose[t].name, d, d / (long)ldc, d % (long)ldc, lres[1][t][d],
                      lres[0][t][d]);
        check_loose(what, loose[t].name, cs->kind, M, N, K, cs->alpha, rs, a, lda, b, ldb,
                    cs->acc, c0, lres[0][t], res[0][0], ldc, &ls[t]);
    }
    for (int nan = 0; nan < 2; nan++) {
        for (int t = 0; t < ntabs; t++)
            free(res[nan][t]);
        for (int t = 0; t < nloose; t++)
            free(lres[nan][t]);
    }
    for (int how = 0; how < 3; how++)
        free(want[how]);
    free(rs);
    free(a);
    free(b);
    free(c0);
}

/* The table covers what the brief asks for: every M, N and K of the lists,
 * every (alpha, rs, acc) variant, odd K with and without A padding,
 * padded and unpadded leading dimensions, odd lda. */
static void test_mm_coverage(void **state)
{
    (void)state;
    int m[NMS] = { 0 }, n[NNS] = { 0 }, k[NKS] = { 0 }, var[8] = { 0 };
    int oddk_pad = 0, oddk_nopad = 0, odd_lda = 0, pb = 0, pc = 0, m12[13] = { 0 },
        n32[33] = { 0 };
    for (int i = 0; i < N_MM; i++) {
        const mm_case *c = &mm_cases[i];
        for (int x = 0; x < NMS; x++)
            m[x] += MS[x] == c->M;
        for (int x = 0; x < NNS; x++)
            n[x] += NS[x] == c->N;
        for (int x = 0; x < NKS; x++)
            k[x] += KS[x] == c->K;
        var[(c->alpha != 1.0f) | c->rs << 1 | c->acc << 2]++;
        if (c->K & 1)
            *(c->pa ? &oddk_pad : &oddk_nopad) += 1;
        odd_lda += (c->K + c->pa) & 1;
        pb += c->pb > 0;
        pc += c->pc > 0;
        m12[(c->M - 1) % 12 + 1]++;
        n32[(c->N - 1) % 32 + 1]++;
    }
    for (int x = 0; x < NMS; x++)
        assert_true(m[x] > 0);
    for (int x = 0; x < NNS; x++)
        assert_true(n[x] > 0);
    for (int x = 0; x < NKS; x++)
        assert_true(k[x] > 0);
    for (int v = 0; v < 8; v++)
        assert_true(var[v] > 0);
    for (int t = 1; t <= 12; t++)
        assert_true(m12[t] > 0);
    for (int t = 1; t <= 32; t++)
        assert_true(n32[t] > 0);
    assert_true(oddk_pad > 0 && oddk_nopad > 0 && odd_lda > 0 && pb > 0 && pc > 0);
    printf("mm table: %d rows (%d cycled, %d large) + %d tiny-data rows; (alpha, rs, acc) "
           "variants:",
           N_MM, N_CYCLED, N_BIG, N_TINY);
    for (int v = 0; v < 8; v++)
        printf(" %d", var[v]);
    printf("; odd K %d (A padded %d), odd lda %d\n", oddk_pad + oddk_nopad, oddk_pad, odd_lda);
}

static void test_mm(void **state)
{
    (void)state;
    fails = 0;
    acc_stat st = { 0, 0, 0 };
    tiny_stat ts = { 0, 0, 0 };
    loose_stat ls[MAX_LOOSE];
    memset(ls, 0, sizeof ls);
    int run = 0, skipped = 0;
    print_tables("mm");
    for (int i = 0; i < N_MM; i++) {
        const mm_case *cs = &mm_cases[i];
        if (quick && (int64_t)cs->M * cs->N * cs->K > QUICK_MACS) {
            skipped++;
            continue;
        }
        mm_run(i, cs, &st, &ts, ls);
        run++;
    }
    if (skipped)
        printf("ATTN_TEST_QUICK: %d large mm rows skipped\n", skipped);
    printf("[accuracy] bf16 mm scalar: %d cases (x %d tables bitwise), %ld elements: max|err| "
           "%.3e, max err/tol %.3f\n",
           run, ntabs, st.elems, st.max_err, st.max_ratio);
    print_loose("mm", 1, ls);
    if (fails)
        fail_msg("%d mismatches in mm", fails);
}

static void test_mm_tiny(void **state)
{
    (void)state;
    fails = 0;
    tiny_stat ts[3] = { { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } };
    loose_stat ls[MAX_LOOSE];
    memset(ls, 0, sizeof ls);
    print_tables("mm tiny");
    for (int i = 0; i < N_TINY; i++)
        mm_run(i, &tiny_cases[i], NULL, &ts[tiny_cases[i].kind], ls);
    print_loose("mm tiny", 0, ls);
    printf("mm tiny: %d cases x %d tables; daz: %ld elements where DAZ shows, %ld denormal "
           "results; underflow: %ld elements where an underflowing product shows (flush != "
           "fused), %ld denormal results\n",
           N_TINY, ntabs, ts[KIND_DAZ].nodaz_diff, ts[KIND_DAZ].denormal,
           ts[KIND_UNDERFLOW].flush_diff, ts[KIND_UNDERFLOW].denormal);
    /* the data reach what they are there for */
    if (ts[KIND_DAZ].flush_diff)
        fail_note("the daz cases: a product underflowed (the test's data)");
    if (!ts[KIND_DAZ].nodaz_diff)
        fail_note("the daz cases: no element where DAZ shows (the test's data)");
    if (!ts[KIND_UNDERFLOW].flush_diff)
        fail_note("the underflow cases: no element where an underflowing product shows");
    if (!ts[KIND_DAZ].denormal || !ts[KIND_UNDERFLOW].denormal)
        fail_note("the tiny cases: no denormal result of the final step");
    if (fails)
        fail_msg("%d mismatches in mm on tiny data", fails);
}

/* ------------------------------------------------------------------ */
/* pack_rows and pack_pairs */

/* n rows of len elements in one pool, in shuffled order at random element
 * offsets (odd and even), each followed by ROWEND elements except the last
 * in memory, which ends the allocation. */
typedef struct rowset {
    uint16_t *pool;
    const uint16_t **rows;
} rowset;

static rowset rows_new(int64_t n, int64_t len)
{
    rowset rw;
    int64_t *slot = malloc((size_t)(n + 1) * sizeof *slot);
    assert_non_null(slot);
    for (int64_t j = 0; j < n; j++)
        slot[j] = j;
    for (int64_t j = n - 1; j > 0; j--) {
        const int64_t x = (int64_t)(next() % (uint64_t)(j + 1)), y = slot[j];
        slot[j] = slot[x];
        slot[x] = y;
    }
    int64_t *off = malloc((size_t)(n + 1) * sizeof *off);
    assert_non_null(off);
    int64_t pos = 0;
    for (int64_t s = 0; s < n; s++) {
        off[slot[s]] = pos + (int64_t)(next() % 3);
        pos = off[slot[s]] + len + (s + 1 < n ? 1 + (int64_t)(next() % 3) : 0);
    }
    rw.pool = malloc((size_t)(pos ? pos : 1) * sizeof *rw.pool);
    rw.rows = malloc((size_t)(n ? n : 1) * sizeof *rw.rows);
    assert_non_null(rw.pool);
    assert_non_null(rw.rows);
    for (int64_t i = 0; i < pos; i++)
        rw.pool[i] = ROWEND;
    for (int64_t j = 0; j < n; j++) {
        rw.rows[j] = rw.pool + off[j];
        for (int64_t x = 0; x < len; x++)
            rw.pool[off[j] + x] = (uint16_t)(next() >> 20);
    }
    rw.rows[0] = n ? rw.rows[0] : rw.pool;
    free(slot);
    free(off);
    return rw;
}

static void rows_free(rowset *rw)
{
    free(rw->pool);
    free(rw->rows);
}

/* A panel of rows x ld 32-bit elements plus GUARD, every one CANARY32. */
static uint32_t *panel_new(int64_t rows, int64_t ld, size_t *n)
{
    *n = (size_t)(rows * ld) + GUARD;
    uint32_t *p = malloc(*n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < *n; i++)
        p[i] = CANARY32;
    return p;
}

static void pack_rows_one(int64_t N, int64_t K, long *checked)
{
    const int64_t PK = (K + 1) / 2, ldt = N + PADS[next() % NPADS];
    rowset rw = rows_new(N, K);
    size_t n;
    uint32_t *t0 = panel_new(PK, ldt, &n);
    uint32_t *bt = malloc(n * sizeof *bt);
    assert_non_null(bt);
    for (int t = 0; t < ntabs; t++) {
        memcpy(bt, t0, n * sizeof *bt);
        tabs[t]->pack_rows(rw.rows, N, K, bt, ldt);
        for (size_t i = 0; i < n; i++) {
            /* ldt may be 0 (N = 0, no padding): all guard then */
            const int64_t p = ldt ? (int64_t)i / ldt : PK, j = ldt ? (int64_t)i % ldt : N;
            uint32_t want = CANARY32;
            if (p < PK && j < N)
                want = (uint32_t)rw.rows[j][2 * p] |
                       (2 * p + 1 < K ? (uint32_t)rw.rows[j][2 * p + 1] << 16 : 0u);
            if (bt[i] != want) {
                fail_note("pack_rows %s N %lld K %lld ldt %lld: bt[%zu] (p %lld j %lld) = "
                          "0x%08x, want 0x%08x%s",
                          tabs[t]->name, (long long)N, (long long)K, (long long)ldt, i,
                          (long long)p, (long long)j, bt[i], want,
                          p < PK && j < N ? (2 * p + 1 == K ? " (high half past K: 0)" : "")
                                          : " (outside: canary)");
                break;
            }
        }
        (*checked)++;
    }
    free(bt);
    free(t0);
    rows_free(&rw);
}

static void test_pack_rows(void **state)
{
    (void)state;
    fails = 0;
    long checked = 0, shapes = 0;
    static const int64_t KX[] = { 128, 197 };
    print_tables("pack_rows");
    for (int64_t ni = 0; ni <= 41; ni++) {
        const int64_t N = ni <= 40 ? ni : 512;
        for (int64_t ki = 0; ki <= 72; ki++) {
            const int64_t K = ki <= 70 ? ki : KX[ki - 71];
            pack_rows_one(N, K, &checked);
            shapes++;
        }
    }
    printf("pack_rows: %ld shapes, %ld (shape, table) checks\n", shapes, checked);
    if (fails)
        fail_msg("%d mismatches in pack_rows", fails);
}

static void pack_pairs_one(int64_t N, int64_t D, long *checked)
{
    const int64_t Q = (N + 1) / 2, ldp = D + PADS[next() % NPADS];
    rowset rw = rows_new(N, D);
    size_t n;
    uint32_t *v0 = panel_new(Q, ldp, &n);
    uint32_t *vp = malloc(n * sizeof *vp);
    assert_non_null(vp);
    for (int t = 0; t < ntabs; t++) {
        memcpy(vp, v0, n * sizeof *vp);
        tabs[t]->pack_pairs(rw.rows, N, D, vp, ldp);
        for (size_t i = 0; i < n; i++) {
            const int64_t q = (int64_t)i / ldp, x = (int64_t)i % ldp;
            uint32_t want = CANARY32;
            if (q < Q && x < D)
                want = (uint32_t)rw.rows[2 * q][x] |
                       (2 * q + 1 < N ? (uint32_t)rw.rows[2 * q + 1][x] << 16 : 0u);
            if (vp[i] != want) {
                fail_note("pack_pairs %s N %lld D %lld ldp %lld: vp[%zu] (q %lld x %lld) = "
                          "0x%08x, want 0x%08x%s",
                          tabs[t]->name, (long long)N, (long long)D, (long long)ldp, i,
                          (long long)q, (long long)x, vp[i], want,
                          q < Q && x < D ? (2 * q + 1 == N ? " (high half of an odd N: 0)" : "")
                                         : " (outside: canary)");
                break;
            }
        }
        (*checked)++;
    }
    free(vp);
    free(v0);
    rows_free(&rw);
}

static void test_pack_pairs(void **state)
{
    (void)state;
    fails = 0;
    long checked = 0, shapes = 0;
    static const int64_t NX[] = { 511, 512 };
    print_tables("pack_pairs");
    for (int64_t ni = 0; ni <= 42; ni++) {
        const int64_t N = ni <= 40 ? ni : NX[ni - 41];
        for (int64_t di = 1; di <= 71; di++) {
            const int64_t D = di <= 70 ? di : 128;
            pack_pairs_one(N, D, &checked);
            shapes++;
        }
    }
    printf("pack_pairs: %ld shapes, %ld (shape, table) checks\n", shapes, checked);
    if (fails)
        fail_msg("%d mismatches in pack_pairs", fails);
}

/* ------------------------------------------------------------------ */
/* round */

static const uint32_t SPECIALS[] = {
    0x00000000u, 0x80000000u,                           /* +-0 */
    0x00000001u, 0x807fffffu, 0x00400000u, 0x0000ffffu, /* denormals */
    0x00008000u, 0x00018000u, 0x80008000u, 0x80018000u, /* denormal ties, even / odd */
    0x007fffffu, 0x007f8000u, 0x007e8000u,              /* up to the smallest normal */
    0x00800000u, 0x80800000u,                           /* +-FLT_MIN */
    0x7f800000u, 0xff800000u,                           /* +-Inf */
    0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffffffffu, /* quiet NaNs */
    0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7f80ffffu, /* signalling NaNs */
    0x7f810000u, 0xffa5a5a5u, 0x7f808000u,
    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0xff7f8000u, /* round up to Inf */
    0x7f7f7fffu, 0x7f7e8000u,                           /* stay finite */
    0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u, /* ties, even / odd */
    0x3f807fffu, 0x3f808001u, 0x3f817fffu, 0x3f818001u, /* their neighbours */
    0x3f7fffffu, 0x3f7f8000u, 0x3effffffu, 0x3f800000u,
};
#define NSPECIALS ((int)(sizeof SPECIALS / sizeof *SPECIALS))

static uint32_t round_input(void)
{
    const uint64_t g = next();
    const uint32_t hi = (uint32_t)(g >> 48) << 16;
    switch (g % 8) {
    case 0:
    case 1:
        return SPECIALS[(g >> 8) % NSPECIALS];
    case 2: /* a tie */
        return hi | 0x8000u;
    case 3: /* next to a tie */
        return hi | (g & 256 ? 0x8001u : 0x7fffu);
    case 4: /* an fp32 denormal */
        return (uint32_t)(g >> 8 & 1) << 31 | ((uint32_t)(g >> 16) % 0x7fffffu + 1);
    case 5: /* a NaN, quiet or signalling */
        return (uint32_t)(g >> 8 & 1) << 31 | 0x7f800000u | ((uint32_t)(g >> 16) % 0x7fffffu + 1);
    default:
        return (uint32_t)(g >> 16);
    }
}

/* round_input without fp32 denormals (they become normal values of the
 * same sign and mantissa), for the groups the native table converts
 * without its exact fallback. */
static uint32_t round_input_normal(void)
{
    const uint32_t u = round_input();
    return (u & 0x7f800000u) == 0 && (u & 0x007fffffu) ? u | 0x3f800000u : u;
}

static void round_one(int64_t n, long *checked)
{
    const size_t ns = (size_t)n + GUARD;
    float *src = malloc(ns * sizeof *src), *srccopy = malloc(ns * sizeof *src),
          *inplace = malloc(ns * sizeof *src);
    uint16_t *dst = malloc(ns * sizeof *dst), *want = malloc(ns * sizeof *dst);
    assert_non_null(src);
    assert_non_null(srccopy);
    assert_non_null(inplace);
    assert_non_null(dst);
    assert_non_null(want);
    for (size_t i = 0; i < ns; i++)
        src[i] = fbits((int64_t)i < NSPECIALS ? SPECIALS[(i + (size_t)n) % NSPECIALS]
                                              : round_input());
    memcpy(srccopy, src, ns * sizeof *src);
    for (size_t i = 0; i < ns; i++)
        want[i] = (int64_t)i < n ? attn_f32_to_bf16(src[i]) : CANARY16;
    for (int t = 0; t < ntabs; t++) {
        for (size_t i = 0; i < ns; i++)
            dst[i] = CANARY16;
        tabs[t]->round(src, dst, n);
        for (size_t i = 0; i < ns; i++)
            if (dst[i] != want[i]) {
                fail_note("round %s n %lld (out of place): dst[%zu] = 0x%04x, want 0x%04x "
                          "(src 0x%08x)%s",
                          tabs[t]->name, (long long)n, i, dst[i], want[i], ubits(src[i]),
                          (int64_t)i < n ? "" : " (beyond n: untouched)");
                break;
            }
        if (memcmp(src, srccopy, ns * sizeof *src))
            fail_note("round %s n %lld: src modified out of place", tabs[t]->name, (long long)n);
        /* in place: the first 2n bytes become the result, the rest stays */
        memcpy(inplace, src, ns * sizeof *src);
        tabs[t]->round(inplace, (uint16_t *)(void *)inplace, n);
        const unsigned char *ip = (const unsigned char *)inplace,
                            *sp = (const unsigned char *)srccopy;
        if (memcmp(ip, want, (size_t)n * sizeof *want)) {
            for (int64_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, ip + 2 * i, sizeof h);
                if (h != want[i]) {
                    fail_note("round %s n %lld (in place): element %lld = 0x%04x, want 0x%04x "
                              "(src 0x%08x)",
                              tabs[t]->name, (long long)n, (long long)i, h, want[i],
                              ubits(srccopy[i]));
                    break;
                }
            }
        }
        for (size_t i = 2 * (size_t)n; i < ns * sizeof(float); i++)
            if (ip[i] != sp[i]) {
                fail_note("round %s n %lld (in place): byte %zu beyond the result written",
                          tabs[t]->name, (long long)n, i);
                break;
            }
        (*checked)++;
    }
    free(src);
    free(srccopy);
    free(inplace);
    free(dst);
    free(want);
}

static void test_round(void **state)
{
    (void)state;
    fails = 0;
    long checked = 0;
    print_tables("round");
    for (int64_t n = 0; n <= 100; n++)
        round_one(n, &checked);
    round_one(1000, &checked);
    printf("round: 102 lengths, %ld (length, table) checks, out of place and in place\n",
           checked);
    if (fails)
        fail_msg("%d mismatches in round", fails);
}

/* ------------------------------------------------------------------ */
/* tr_round */

static void tr_round_one(int64_t rows, int64_t cols, long *checked)
{
    const int64_t lds = cols + (int64_t)(next() % 5), ldd = rows + (int64_t)(next() % 4);
    const size_t ns = (size_t)((rows + 1) * lds) + GUARD;
    const size_t nd = (size_t)(cols * ldd) + GUARD;
    float *src = malloc(ns * sizeof *src), *srccopy = malloc(ns * sizeof *src);
    uint16_t *dst = malloc(nd * sizeof *dst), *want = malloc(nd * sizeof *dst);
    assert_non_null(src);
    assert_non_null(srccopy);
    assert_non_null(dst);
    assert_non_null(want);
    const int den = (int)(next() & 1);   /* half the shapes: no fp32 denormal */
    for (size_t i = 0; i < ns; i++)
        src[i] = fbits(den ? round_input() : round_input_normal());
    memcpy(srccopy, src, ns * sizeof *src);
    for (size_t i = 0; i < nd; i++)
        want[i] = CANARY16;
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < rows; r++)
            want[c * ldd + r] = attn_f32_to_bf16(src[r * lds + c]);
    for (int t = 0; t < ntabs; t++) {
        for (size_t i = 0; i < nd; i++)
            dst[i] = CANARY16;
        tabs[t]->tr_round(src, lds, rows, cols, dst, ldd);
        for (size_t i = 0; i < nd; i++)
            if (dst[i] != want[i]) {
                const int64_t c = (int64_t)i / ldd, r = (int64_t)i % ldd;
                fail_note("tr_round %s rows %lld cols %lld lds %lld ldd %lld: dst[%zu] (column "
                          "%lld, row %lld) = 0x%04x, want 0x%04x%s",
                          tabs[t]->name, (long long)rows, (long long)cols, (long long)lds,
                          (long long)ldd, i, (long long)c, (long long)r, dst[i], want[i],
                          c < cols && r < rows ? "" : " (outside the block: untouched)");
                break;
            }
        if (memcmp(src, srccopy, ns * sizeof *src))
            fail_note("tr_round %s rows %lld cols %lld: src modified", tabs[t]->name,
                      (long long)rows, (long long)cols);
        (*checked)++;
    }
    free(src);
    free(srccopy);
    free(dst);
    free(want);
}

static void test_tr_round(void **state)
{
    (void)state;
    fails = 0;
    long checked = 0, shapes = 0;
    static const int64_t CX[] = { 255, 256 };
    print_tables("tr_round");
    for (int64_t ri = 0; ri <= 71; ri++) {
        const int64_t rows = ri <= 70 ? ri : 128;
        for (int64_t ci = 0; ci <= 42; ci++) {
            const int64_t cols = ci <= 40 ? ci : CX[ci - 41];
            tr_round_one(rows, cols, &checked);
            shapes++;
        }
    }
    printf("tr_round: %ld shapes, %ld (shape, table) checks\n", shapes, checked);
    if (fails)
        fail_msg("%d mismatches in tr_round", fails);
}

/* ------------------------------------------------------------------ */
/* ds_pack */

static void ds_pack_one(int64_t rows, int64_t cols, int with_d, long *checked)
{
    const int64_t ldp = cols + (int64_t)(next() % 5), ldq = cols + (int64_t)(next() % 3),
                  lds = cols + (int64_t)(next() % 4);
    const int64_t hq = (rows + 1) / 2;
    const size_t np = (size_t)((rows + 1) * ldp) + GUARD, nq = (size_t)(hq * ldq) + GUARD,
                 ns = (size_t)(rows * lds) + GUARD;
    float *p = malloc(np * sizeof *p), *dp = malloc(np * sizeof *dp), *d = malloc(72 * 2 * sizeof *d);
    float *pc = malloc(np * sizeof *p), *dpc = malloc(np * sizeof *dp);
    uint32_t *pp = malloc(nq * sizeof *pp), *sp = malloc(nq * sizeof *sp);
    uint32_t *wpp = malloc(nq * sizeof *pp), *wsp = malloc(nq * sizeof *sp);
    uint16_t *s16 = malloc(ns * sizeof *s16), *ws16 = malloc(ns * sizeof *s16);
    assert_true(p && dp && d && pc && dpc && pp && sp && wpp && wsp && s16 && ws16);
    const int den = (int)(next() & 1);   /* half the shapes: no fp32 denormal */
    for (size_t i = 0; i < np; i++) {
        p[i] = fbits(den ? round_input() : round_input_normal());
        dp[i] = fbits(den ? round_input() : round_input_normal());
    }
    for (int64_t r = 0; r < rows; r++)
        d[r] = r % 7 == 3 ? fbits(SPECIALS[next() % NSPECIALS]) : (float)(urand() * 4.0 - 2.0);
    memcpy(pc, p, np * sizeof *p);
    memcpy(dpc, dp, np * sizeof *dp);
    for (size_t i = 0; i < nq; i++)
        wpp[i] = wsp[i] = CANARY32;
    for (size_t i = 0; i < ns; i++)
        ws16[i] = CANARY16;
    for (int64_t q = 0; q < hq; q++)
        for (int64_t j = 0; j < cols; j++) {
            uint32_t pw = 0, sw = 0;
            for (int64_t e = 0; e < 2 && 2 * q + e < rows; e++) {
                const int64_t r = 2 * q + e;
                const float pv = p[r * ldp + j], dv = dp[r * ldp + j];
                const float diff = dv - d[r];
                const float ds = with_d ? pv * diff : dv;
                pw |= (uint32_t)attn_f32_to_bf16(pv) << (16 * e);
                sw |= (uint32_t)attn_f32_to_bf16(ds) << (16 * e);
                ws16[r * lds + j] = attn_f32_to_bf16(ds);
            }
            wpp[q * ldq + j] = pw;
            wsp[q * ldq + j] = sw;
        }
    for (int t = 0; t < ntabs; t++) {
        for (size_t i = 0; i < nq; i++)
            pp[i] = sp[i] = CANARY32;
        for (size_t i = 0; i < ns; i++)
            s16[i] = CANARY16;
        tabs[t]->ds_pack(p, dp, ldp, with_d ? d : NULL, rows, cols, pp, sp, ldq, s16, lds);
        const char *bad = memcmp(pp, wpp, nq * sizeof *pp) ? "pp"
                        : memcmp(sp, wsp, nq * sizeof *sp) ? "sp"
                        : memcmp(s16, ws16, ns * sizeof *s16) ? "s16"
                        : memcmp(p, pc, np * sizeof *p) || memcmp(dp, dpc, np * sizeof *dp)
                            ? "p or dp modified" : NULL;
        if (bad)
            fail_note("ds_pack %s rows %lld cols %lld d %s: %s differs from the model",
                      tabs[t]->name, (long long)rows, (long long)cols, with_d ? "given" : "NULL",
                      bad);
        (*checked)++;
    }
    free(p);
    free(dp);
    free(d);
    free(pc);
    free(dpc);
    free(pp);
    free(sp);
    free(wpp);
    free(wsp);
    free(s16);
    free(ws16);
}

static void test_ds_pack(void **state)
{
    (void)state;
    fails = 0;
    long checked = 0, shapes = 0;
    static const int64_t RX[] = { 95, 96 }, CX[] = { 255, 256 };
    print_tables("ds_pack");
    for (int64_t ri = 0; ri <= 42; ri++) {
        const int64_t rows = ri <= 40 ? ri : RX[ri - 41];
        for (int64_t ci = 0; ci <= 42; ci++) {
            const int64_t cols = ci <= 40 ? ci : CX[ci - 41];
            ds_pack_one(rows, cols, 1, &checked);
            ds_pack_one(rows, cols, 0, &checked);
            shapes++;
        }
    }
    printf("ds_pack: %ld shapes (with d and without), %ld (shape, table) checks\n", shapes,
           checked);
    if (fails)
        fail_msg("%d mismatches in ds_pack", fails);
}

/* ------------------------------------------------------------------ */
/* attn_bf16_at */

static void test_at(void **state)
{
    (void)state;
    assert_string_equal(attn_bf16_scalar.name, "scalar");
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_SCALAR), &attn_bf16_scalar);
#if ATTN_HAVE_X86_KERNELS
    assert_string_equal(attn_bf16_avx2()->name, "avx2");
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX2), attn_bf16_avx2());
    assert_string_equal(attn_bf16_avx512.name, "avx512");
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX512), &attn_bf16_avx512);
#if ATTN_HAVE_AVX512BF16
    assert_string_equal(attn_bf16_avx512bf16.name, "avx512bf16");
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX512BF16), &attn_bf16_avx512bf16);
#else
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX512BF16), &attn_bf16_avx512);
#endif
#else
    assert_null(attn_bf16_avx2());
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX2), &attn_bf16_scalar);
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX512), &attn_bf16_scalar);
    assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AVX512BF16), &attn_bf16_scalar);
#endif
    printf("attn_bf16_at: %s %s %s %s %s (scalar, avx2, avx512, avx512bf16, amx levels)\n",
           attn_bf16_at(ATTN_SIMD_SCALAR)->name, attn_bf16_at(ATTN_SIMD_AVX2)->name,
           attn_bf16_at(ATTN_SIMD_AVX512)->name, attn_bf16_at(ATTN_SIMD_AVX512BF16)->name,
           attn_bf16_at(ATTN_SIMD_AMX)->name);
}

/* The level the CPU runs at most lev (the table attn_bf16_at gives there). */
static int level_min(int lev)
{
    const int cpu = attn_cpu_level();
    return lev < cpu ? lev : cpu;
}

/* attn_bf16_at(ATTN_SIMD_AMX): the amx table only where the CPU has it;
 * ATTN_SIMD caps; attn_blas_query's info.bf16. */
static void test_at_amx(void **state)
{
    (void)state;
    const int has = !!(attn_cpu_flags() & ATTN_CPU_AMXBF16);
    const attn_bf16_kernels *amx = attn_bf16_amx();
    assert_int_equal(ATTN_SIMD_TOP, ATTN_SIMD_AMX);
    assert_true(ATTN_SIMD_AMX > ATTN_SIMD_AVX512BF16);
#if !(ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AMX)
    assert_false(has);
#endif
    /* the flag only with the AVX512_BF16 level, the level only with the flag */
    if (has)
        assert_true(attn_cpu_flags() & ATTN_CPU_AVX512BF16);
    assert_int_equal(attn_cpu_level() == ATTN_SIMD_AMX, has);
    if (has) {
        assert_non_null(amx);
        assert_string_equal(amx->name, "amx");
        assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AMX), amx);
        assert_ptr_equal(attn_bf16_at(ATTN_SIMD_TOP), amx);
        assert_ptr_equal(attn_bf16_amx(), amx);  /* built once */
#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AVX512BF16
        /* every field but name and mm is the avx512bf16 table's */
        attn_bf16_kernels want = attn_bf16_avx512bf16;
        want.name = amx->name;
        want.mm = amx->mm;
        assert_memory_equal(amx, &want, sizeof want);
        assert_true(amx->mm != attn_bf16_avx512bf16.mm);
#endif
    } else {
        assert_null(amx);
        /* the best table below that the CPU runs */
        const attn_bf16_kernels *below = attn_bf16_at(level_min(ATTN_SIMD_AVX512BF16));
        assert_ptr_equal(attn_bf16_at(ATTN_SIMD_AMX), below);
        assert_ptr_equal(attn_bf16_at(ATTN_SIMD_TOP), below);
        assert_string_not_equal(attn_bf16_at(ATTN_SIMD_AMX)->name, "amx");
    }

    /* ATTN_SIMD: the level and what attn_blas_query names */
    const char *saved = getenv("ATTN_SIMD");
    char *keep = saved ? strdup(saved) : NULL;
    static const struct { const char *env; int cap; } caps[] = {
        { NULL, ATTN_SIMD_TOP },
        { "amx", ATTN_SIMD_AMX },
        { "avx512bf16", ATTN_SIMD_AVX512BF16 },
        { "avx512", ATTN_SIMD_AVX512 },
        { "avx2", ATTN_SIMD_AVX2 },
        { "scalar", ATTN_SIMD_SCALAR },
        { "no-such-level", ATTN_SIMD_TOP },
    };
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        if (caps[i].env)
            setenv("ATTN_SIMD", caps[i].env, 1);
        else
            unsetenv("ATTN_SIMD");
        const int lev = attn_settings_level();
        assert_int_equal(lev, level_min(caps[i].cap));
        attn_settings set;
        attn_settings_read(&set);
        assert_int_equal(set.simd_cap, caps[i].cap);
        assert_int_equal(set.level, lev);
        attn_blas_info info;
        memset(&info, 0, sizeof info);
        assert_int_equal(attn_blas_query(&info), ATTN_OK);
        /* (what the AUTO engine would run: the BLAS engine widens) */
        attn_engine eng = ATTN_ENGINE_BLAS;
        assert_int_equal(attn_engine_resolve(ATTN_ENGINE_AUTO, &eng), ATTN_OK);
        assert_string_equal(info.bf16,
                            eng == ATTN_ENGINE_TILE ? attn_bf16_at(lev)->name : "widened");
        if (caps[i].cap >= ATTN_SIMD_AMX)
            assert_int_equal(!strcmp(info.bf16, "amx"), has);
        else
            assert_string_not_equal(info.bf16, "amx");
        printf("ATTN_SIMD=%s: level %d, info.bf16 \"%s\"\n", caps[i].env ? caps[i].env : "(unset)",
               lev, info.bf16);
    }
    if (keep) {
        setenv("ATTN_SIMD", keep, 1);
        free(keep);
    } else {
        unsetenv("ATTN_SIMD");
    }
    printf("amx: %s (%s)\n", has ? "the level and the table" : "SKIPPED, not on this CPU",
           attn_cpu_amx_note());
}

int main(void)
{
    make_mm_cases();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_coverage),
        cmocka_unit_test(test_mm),
        cmocka_unit_test(test_mm_tiny),
        cmocka_unit_test(test_pack_rows),
        cmocka_unit_test(test_pack_pairs),
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_tr_round),
        cmocka_unit_test(test_ds_pack),
        cmocka_unit_test(test_at),
        cmocka_unit_test(test_at_amx),
    };
    return cmocka_run_group_tests_name("bf16", tests, setup, NULL);
}
