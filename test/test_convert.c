/*
 * attn_dtype_encode / attn_dtype_decode and the internal conversion
 * tables (kernels/convert.h) against the independent double reference of
 * cvt_ref.c, bit for bit:
 * - every one of the 65536 F16 and 65536 BF16 patterns: to fp32 exact (a
 *   NaN keeps sign and payload, quiet for F16), and back: the same pattern,
 *   or for a NaN a NaN of the same sign with the quiet bit set;
 * - fp32 inputs: every pattern k << 12 and its neighbours +-1 (for all k
 *   < 2^20: each F16 and BF16 value, each tie between two neighbours, just
 *   above and below, both signs, every exponent, so also every F16 denormal
 *   and overflow boundary), every exponent with a set of mantissas (all the
 *   fp32 denormal exponents among them), the F16 overflow boundary (65504,
 *   the float below 65520, 65520, 65536, FLT_MAX), infinities, zeros, NaNs
 *   with payloads (signalling and quiet, both signs) and four million
 *   random patterns;
 * - every SIMD level through the public functions, the level chosen by
 *   setting ATTN_SIMD with setenv() before each call (attn_cvt_select reads
 *   it every time), and every table this CPU runs called directly (the
 *   AVX-512F table without AVX512_BF16 included, which ATTN_SIMD cannot
 *   reach on a CPU with AVX512_BF16); each run also with the rounding
 *   mode set upward and toward zero and, on x86, MXCSR's FTZ and DAZ set:
 *   no result may change;
 * - lengths 0 to 70 at unaligned offsets with guard elements that must
 *   stay untouched, at every level;
 * - the statuses of attn.h (F32 or unknown type, n < 0, NULL buffers), with
 *   the destination untouched.
 * ATTN_TEST_QUICK=1 (valgrind) thins the fp32 sweep and the random inputs.
 *
 * Links the static library for the internal tables and the name of the
 * table each level ran, which is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_config.h"
#include <attn.h>
#include "kernels/convert.h"
#include "cvt_ref.h"

#if ATTN_HAVE_X86_KERNELS
#include <xmmintrin.h>
#if !ATTN_HAVE_CPU_SUPPORTS_F16C
#include <cpuid.h>
#endif
#endif

static int quick;

/* ---------------------------------------------------------------- levels */

/* The values of ATTN_SIMD run through the public functions; NULL = unset. */
static const char *const levels[] = { NULL, "scalar", "avx2", "avx512" };
#define NLEVELS (sizeof levels / sizeof levels[0])

static void set_level(const char *lv)
{
    if (lv)
        setenv("ATTN_SIMD", lv, 1);
    else
        unsetenv("ATTN_SIMD");
}

/* The tables this CPU can run, called directly. */
static const attn_cvt_kernels *tables[4];
static int ntables;

static int setup(void **state)
{
    (void)state;
    const char *q = getenv("ATTN_TEST_QUICK");
    quick = q && *q && strcmp(q, "0") != 0;
    ntables = 0;
    tables[ntables++] = &attn_cvt_scalar;
#if ATTN_HAVE_X86_KERNELS
#if ATTN_HAVE_CPU_SUPPORTS_F16C
    const int f16c = __builtin_cpu_supports("f16c");
#else
    unsigned a, b, c, d;
    const int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
#endif
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    if (avx2)
        tables[ntables++] = &attn_cvt_avx2;
    if (avx2 && __builtin_cpu_supports("avx512f")) {
        tables[ntables++] = &attn_cvt_avx512;
#if ATTN_HAVE_AVX512BF16
        if (__builtin_cpu_supports("avx512bf16"))
            tables[ntables++] = &attn_cvt_avx512bf16;
#endif
    }
#endif
    const char *saved = getenv("ATTN_SIMD");
    printf("tables run directly:");
    for (int i = 0; i < ntables; i++)
        printf(" %s", tables[i]->name);
    printf("\nATTN_SIMD levels:");
    for (size_t i = 0; i < NLEVELS; i++) {
        set_level(levels[i]);
        printf(" %s -> %s", levels[i] ? levels[i] : "(unset)", attn_cvt_select()->name);
    }
    printf("\n");
    if (saved)
        printf("(ATTN_SIMD=%s in the environment is overridden by each check)\n", saved);
    unsetenv("ATTN_SIMD");
    return 0;
}

/* ------------------------------------------------ floating-point modes */

/* 0: default; 1: round upward; 2: toward zero, and FTZ + DAZ on x86. */
#define NMODES 3
static const char *const mode_names[NMODES] = { "default", "upward", "towardzero+ftz+daz" };
#if ATTN_HAVE_X86_KERNELS
static unsigned saved_csr;
#endif

static void mode_enter(int mode)
{
    if (mode == 1)
        fesetround(FE_UPWARD);
    if (mode == 2) {
        fesetround(FE_TOWARDZERO);
#if ATTN_HAVE_X86_KERNELS
        saved_csr = _mm_getcsr();
        _mm_setcsr(saved_csr | 0x8040u);   /* FTZ (bit 15) | DAZ (bit 6) */
#endif
    }
}

static void mode_leave(int mode)
{
#if ATTN_HAVE_X86_KERNELS
    if (mode == 2)
        _mm_setcsr(saved_csr);
#endif
    fesetround(FE_TONEAREST);
}

/* ------------------------------------------------------------ helpers */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint64_t splitmix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const attn_dtype types[2] = { ATTN_DTYPE_F16, ATTN_DTYPE_BF16 };
static const char *const type_names[2] = { "f16", "bf16" };

/* The conversions of one table or of the public functions (tab NULL). */
static void run_to_f32(const attn_cvt_kernels *tab, int bf, const uint16_t *src, float *dst,
                       int64_t n)
{
    if (!tab) {
        assert_int_equal(attn_dtype_decode(types[bf], src, dst, n), ATTN_OK);
        return;
    }
    (bf ? tab->bf16_to_f32 : tab->f16_to_f32)(src, dst, n);
}

static void run_from_f32(const attn_cvt_kernels *tab, int bf, const float *src, uint16_t *dst,
                         int64_t n)
{
    if (!tab) {
        assert_int_equal(attn_dtype_encode(types[bf], src, dst, n), ATTN_OK);
        return;
    }
    (bf ? tab->f32_to_bf16 : tab->f32_to_f16)(src, dst, n);
}

/* The runs of a check: every public level, then every table, each in every
 * floating-point mode.  Run r: what and its name. */
#define NRUNS ((int)(NLEVELS + (size_t)ntables) * NMODES)
static const attn_cvt_kernels *run_begin(int r, char *name, size_t cap)
{
    const int who = r / NMODES, mode = r % NMODES;
    const attn_cvt_kernels *tab = NULL;
    if ((size_t)who < NLEVELS) {
        set_level(levels[who]);
        snprintf(name, cap, "ATTN_SIMD=%s (%s), %s", levels[who] ? levels[who] : "(unset)",
                 attn_cvt_select()->name, mode_names[mode]);
    } else {
        unsetenv("ATTN_SIMD");
        tab = tables[who - (int)NLEVELS];
        snprintf(name, cap, "table %s, %s", tab->name, mode_names[mode]);
    }
    mode_enter(mode);
    return tab;
}

static void run_end(int r)
{
    mode_leave(r % NMODES);
    unsetenv("ATTN_SIMD");
}

/* ------------------------------------------------- all 16-bit patterns */

static void test_all_16bit(void **state)
{
    (void)state;
    uint16_t *h = malloc(65536 * sizeof *h), *back = malloc(65536 * sizeof *back);
    uint32_t *want = malloc(65536 * sizeof *want);
    float *f = malloc(65536 * sizeof *f);
    assert_non_null(h);
    assert_non_null(back);
    assert_non_null(want);
    assert_non_null(f);
    long fails = 0;
    for (int bf = 0; bf < 2; bf++) {
        for (uint32_t i = 0; i < 65536; i++) {
            h[i] = (uint16_t)i;
            want[i] = cvt_ref_to_f32(bf, (uint16_t)i);
        }
        for (int r = 0; r < NRUNS; r++) {
            char name[128];
            const attn_cvt_kernels *tab = run_begin(r, name, sizeof name);
            run_to_f32(tab, bf, h, f, 65536);
            run_from_f32(tab, bf, f, back, 65536);
            run_end(r);
            long bad = 0;
            for (uint32_t i = 0; i < 65536; i++) {
                const uint32_t got = fbits(f[i]);
                const int nan = cvt_ref_value(bf, (uint16_t)i) != cvt_ref_value(bf, (uint16_t)i);
                /* A NaN comes back a NaN of its sign with the quiet bit
                 * (0x0200 in F16, 0x0040 in BF16), payload kept above it. */
                const uint16_t quiet = bf ? 0x0040 : 0x0200;
                const uint16_t want_back = nan ? (uint16_t)(i | quiet) : (uint16_t)i;
                if (got != want[i] || back[i] != want_back ||
                    back[i] != cvt_ref_from_f32(bf, want[i])) {
                    if (bad++ < 5)
                        printf("FAIL %s %s: 0x%04x -> 0x%08x (want 0x%08x) -> 0x%04x (want "
                               "0x%04x)\n", type_names[bf], name, i, got, want[i], back[i],
                               want_back);
                }
            }
            fails += bad;
        }
    }
    free(h);
    free(back);
    free(want);
    free(f);
    assert_int_equal(fails, 0);
}

/* ------------------------------------------------------- fp32 inputs */

static const uint32_t mantissas[] = {
    0, 1, 2, 3, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001, 0x3000, 0x7fff, 0x8000, 0x8001,
    0x18000, 0xffff, 0x10000, 0x3fffff, 0x400000, 0x400001, 0x7fe000, 0x7fefff, 0x7ff000,
    0x7ff001, 0x7fffff, 0x7f8000, 0x7f7fff,
};
#define NMANT (sizeof mantissas / sizeof mantissas[0])

static const uint32_t specials[] = {
    0x477fe000u,              /* 65504, the largest F16 */
    0x477fefffu,              /* 65519.99..., the float below 65520: 65504 */
    0x477ff000u,              /* 65520: the tie, to Inf */
    0x477ff001u, 0x47800000u, /* above, 65536 */
    0x7f7fffffu,              /* FLT_MAX */
    0x7f800000u,              /* Inf */
    0x00000000u,              /* +0 */
    0x7f800001u, 0x7f801fffu, 0x7f802000u, 0x7fa00000u, 0x7fbfffffu, /* signalling NaNs */
    0x7fc00000u, 0x7fc00001u, 0x7fd55555u, 0x7fffffffu, 0x7fe0a000u, /* quiet NaNs */
    0x33000000u, 0x33000001u, 0x337fffffu, 0x33800000u, /* the smallest F16 denormal */
    0x387fc000u, 0x387fe000u, 0x387ff000u, 0x38800000u, /* top of the F16 denormals */
    0x00800000u, 0x007fffffu, 0x00008000u, 0x00018000u, /* fp32 denormals / min normal */
    0x7f7f8000u, 0x7f7f7fffu, 0x7f7f8001u,  /* BF16's overflow tie */
    0x3f808000u, 0x3f818000u,               /* BF16 ties to even, down and up */
};
#define NSPEC (sizeof specials / sizeof specials[0])

/* The inputs, as a function of the index: the sweep, every exponent with
 * the mantissas, the specials (both signs), then random patterns. */
static uint64_t sweep_step(void) { return quick ? 97 : 1; }
static uint64_t n_sweep(void) { return 3 * (((uint64_t)1 << 20) / sweep_step()); }
static uint64_t n_exp(void) { return 512 * NMANT; }
static uint64_t n_random(void) { return quick ? 100000 : 4000000; }
static uint64_t n_inputs(void) { return n_sweep() + n_exp() + 2 * NSPEC + n_random(); }

static uint32_t input_at(uint64_t i)
{
    if (i < n_sweep()) {
        const uint64_t k = (i / 3) * sweep_step();
        return (uint32_t)(k << 12) + (uint32_t)(i % 3) - 1u;   /* -1, 0, +1 */
    }
    i -= n_sweep();
    if (i < n_exp()) {
        const uint32_t se = (uint32_t)(i / NMANT);             /* sign and exponent */
        return (se << 23) | mantissas[i % NMANT];
    }
    i -= n_exp();
    if (i < 2 * NSPEC)
        return specials[i / 2] | (i % 2 ? 0x80000000u : 0);
    return (uint32_t)splitmix(i);
}

static void test_f32_inputs(void **state)
{
    (void)state;
    const int64_t chunk = 65536;
    float *in = malloc((size_t)chunk * sizeof *in);
    uint16_t *want[2], *got = malloc((size_t)chunk * sizeof *got);
    want[0] = malloc((size_t)chunk * sizeof *want[0]);
    want[1] = malloc((size_t)chunk * sizeof *want[1]);
    assert_non_null(in);
    assert_non_null(got);
    assert_non_null(want[0]);
    assert_non_null(want[1]);
    const uint64_t total = n_inputs();
    long fails = 0;
    for (uint64_t base = 0; base < total; base += (uint64_t)chunk) {
        const int64_t n = total - base < (uint64_t)chunk ? (int64_t)(total - base) : chunk;
        for (int64_t i = 0; i < n; i++) {
            const uint32_t x = input_at(base + (uint64_t)i);
            in[i] = bitsf(x);
            want[0][i] = cvt_ref_from_f32(0, x);
            want[1][i] = cvt_ref_from_f32(1, x);
        }
        for (int r = 0; r < NRUNS; r++) {
            char name[128];
            for (int bf = 0; bf < 2; bf++) {
                const attn_cvt_kernels *tab = run_begin(r, name, sizeof name);
                run_from_f32(tab, bf, in, got, n);
                run_end(r);
                for (int64_t i = 0; i < n; i++)
                    if (got[i] != want[bf][i] && fails++ < 10)
                        printf("FAIL %s %s: 0x%08x -> 0x%04x, want 0x%04x\n", type_names[bf],
                               name, fbits(in[i]), got[i], want[bf][i]);
            }
        }
    }
    printf("%llu fp32 inputs x %d runs x 2 types\n", (unsigned long long)total, NRUNS);
    free(in);
    free(got);
    free(want[0]);
    free(want[1]);
    assert_int_equal(fails, 0);
}

/* A few hand-checked values, so that the reference itself is pinned. */
static void test_reference_pins(void **state)
{
    (void)state;
    static const struct { uint32_t x; uint16_t h, b; } pins[] = {
        { 0x3f800000u, 0x3c00, 0x3f80 },   /* 1 */
        { 0xc0000000u, 0xc000, 0xc000 },   /* -2 */
        { 0x477fe000u, 0x7bff, 0x4780 },   /* 65504 */
        { 0x477ff000u, 0x7c00, 0x4780 },   /* 65520: F16 Inf; BF16 tie to even */
        { 0x477fefffu, 0x7bff, 0x4780 },
        { 0x33800000u, 0x0001, 0x3380 },   /* 2^-24 */
        { 0x33000000u, 0x0000, 0x3300 },   /* 2^-25: tie to even 0 */
        { 0x33000001u, 0x0001, 0x3300 },
        { 0x33c00000u, 0x0002, 0x33c0 },   /* 1.5 * 2^-24: tie to even 2 */
        { 0x38800000u, 0x0400, 0x3880 },   /* 2^-14 */
        { 0x00000001u, 0x0000, 0x0000 },   /* fp32 denormals: 0 in F16, kept in BF16 */
        { 0x00018000u, 0x0000, 0x0002 },   /* BF16 denormal tie: 1.5 -> 2 */
        { 0x00008000u, 0x0000, 0x0000 },   /* 0.5 -> 0 */
        { 0x7f7fffffu, 0x7c00, 0x7f80 },   /* FLT_MAX: Inf in both */
        { 0x7f800001u, 0x7e00, 0x7fc0 },   /* sNaN made quiet */
        { 0xffa00000u, 0xff00, 0xffe0 },
        { 0x3f808000u, 0x3c04, 0x3f80 },   /* BF16 tie down to even */
        { 0x3f818000u, 0x3c0c, 0x3f82 },   /* BF16 tie up to even */
    };
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        assert_int_equal(cvt_ref_from_f32(0, pins[i].x), pins[i].h);
        assert_int_equal(cvt_ref_from_f32(1, pins[i].x), pins[i].b);
        assert_int_equal(attn_f32_to_f16(bitsf(pins[i].x)), pins[i].h);
        assert_int_equal(attn_f32_to_bf16(bitsf(pins[i].x)), pins[i].b);
    }
    assert_int_equal(cvt_ref_to_f32(0, 0x0001), 0x33800000u);
    assert_int_equal(cvt_ref_to_f32(0, 0x7c01), 0x7fc02000u);
    assert_int_equal(cvt_ref_to_f32(1, 0xff81), 0xff810000u);
    assert_true(cvt_ref_value(0, 0x7bff) == 65504.0);
    assert_true(cvt_ref_value(1, 0x0001) == ldexp(1.0, -133));
}

/* ------------------------------------------- lengths, offsets, guards */

#define GUARD 8
#define MAXLEN 70
static const uint16_t G16 = 0xA5A5;
static const uint32_t G32 = 0x7fa5a5a5u;

static void test_lengths(void **state)
{
    (void)state;
    float fin[MAXLEN + 8], fout[MAXLEN + 8 + 2 * GUARD];
    uint16_t hin[MAXLEN + 8], hout[MAXLEN + 8 + 2 * GUARD];
    uint64_t seed = 12345;
    long fails = 0;
    for (int r = 0; r < NRUNS; r++) {
        char name[128];
        for (int bf = 0; bf < 2; bf++)
            for (int64_t n = 0; n <= MAXLEN; n++)
                for (int off = 0; off < 4; off++) {
                    const int so = (off * 3) % 4;   /* source offset, another than off */
                    for (int64_t i = 0; i < n; i++) {
                        /* a mix of specials and random patterns */
                        const uint64_t z = splitmix(seed++);
                        const uint32_t x = z % 5 == 0 ? specials[(z >> 8) % NSPEC] ^
                                                            ((uint32_t)(z >> 40) & 0x80000000u)
                                                      : (uint32_t)(z >> 16);
                        fin[so + i] = bitsf(x);
                        hin[so + i] = (uint16_t)(z >> 7);
                    }
                    for (int i = 0; i < MAXLEN + 8 + 2 * GUARD; i++) {
                        hout[i] = G16;
                        fout[i] = bitsf(G32);
                    }
                    const attn_cvt_kernels *tab = run_begin(r, name, sizeof name);
                    run_from_f32(tab, bf, fin + so, hout + GUARD + off, n);
                    run_to_f32(tab, bf, hin + so, fout + GUARD + off, n);
                    run_end(r);
                    for (int i = 0; i < MAXLEN + 8 + 2 * GUARD; i++) {
                        const int64_t k = i - GUARD - off;
                        if (k >= 0 && k < n) {
                            if (hout[i] != cvt_ref_from_f32(bf, fbits(fin[so + k])) ||
                                fbits(fout[i]) != cvt_ref_to_f32(bf, hin[so + k])) {
                                if (fails++ < 10)
                                    printf("FAIL %s %s n=%lld off=%d: element %lld\n",
                                           type_names[bf], name, (long long)n, off,
                                           (long long)k);
                            }
                        } else if (hout[i] != G16 || fbits(fout[i]) != G32) {
                            if (fails++ < 10)
                                printf("FAIL %s %s n=%lld off=%d: guard %d written\n",
                                       type_names[bf], name, (long long)n, off, i);
                        }
                    }
                }
    }
    assert_int_equal(fails, 0);
}

/* ------------------------------------------------------------ errors */

static void test_errors(void **state)
{
    (void)state;
    float f[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
    uint16_t h[4] = { G16, G16, G16, G16 };
    float fo[4];
    for (int i = 0; i < 4; i++)
        fo[i] = bitsf(G32);
    static const struct {
        int type;
        int null_src, null_dst;
        int64_t n;
        attn_status want;
    } rows[] = {
        { ATTN_DTYPE_F32, 0, 0, 4, ATTN_ERR_BAD_OPTION },
        { 3, 0, 0, 4, ATTN_ERR_BAD_OPTION },
        { -1, 0, 0, 4, ATTN_ERR_BAD_OPTION },
        { ATTN_DTYPE_F16, 0, 0, -1, ATTN_ERR_BAD_SIZE },
        { ATTN_DTYPE_BF16, 0, 0, INT64_MIN, ATTN_ERR_BAD_SIZE },
        { ATTN_DTYPE_F16, 1, 0, 4, ATTN_ERR_NULL_ARGUMENT },
        { ATTN_DTYPE_BF16, 0, 1, 4, ATTN_ERR_NULL_ARGUMENT },
        { ATTN_DTYPE_F16, 1, 1, 1, ATTN_ERR_NULL_ARGUMENT },
        /* controls: n == 0 takes NULL buffers; a valid call */
        { ATTN_DTYPE_F16, 1, 1, 0, ATTN_OK },
        { ATTN_DTYPE_BF16, 0, 0, 0, ATTN_OK },
        { ATTN_DTYPE_BF16, 0, 0, 4, ATTN_OK },
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const attn_dtype t = (attn_dtype)rows[i].type;
        attn_status s1 = attn_dtype_encode(t, rows[i].null_src ? NULL : f,
                                               rows[i].null_dst ? NULL : h, rows[i].n);
        attn_status s2 = attn_dtype_decode(t, rows[i].null_src ? NULL : h,
                                             rows[i].null_dst ? NULL : fo, rows[i].n);
        if (s1 != rows[i].want || s2 != rows[i].want)
            printf("FAIL row %zu: from %d to %d, want %d\n", i, (int)s1, (int)s2,
                   (int)rows[i].want);
        assert_int_equal(s1, rows[i].want);
        assert_int_equal(s2, rows[i].want);
        if (rows[i].want != ATTN_OK || rows[i].n == 0)
            for (int k = 0; k < 4; k++) {
                assert_int_equal(h[k], G16);
                assert_int_equal(fbits(fo[k]), G32);
            }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_pins),
        cmocka_unit_test(test_all_16bit),
        cmocka_unit_test(test_f32_inputs),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
