/*
 * test_qk8.c -- the integer Q K^T against a Q8_0 or Q4_0 K (desc.qk_int8;
 * attn.h, "Integer scores"; lib/kernels/decode.h), kernel by kernel.
 *
 * One table of shapes (rows R 1 to 33, keys 1 to 300, d 32 to 544, both
 * block types, scale 1 and 0.125) over the same checks:
 *   rule     the C kernel (attn_dec_qk8_c) against a reference written
 *            here from attn.h's words: each block of a Q row rounded with
 *            s = amax / 127 and q = the nearest integer to x / s, ties away
 *            from zero (computed in double, where |x| x (1 / s) + 0.5 is
 *            exact, not with roundf), the integer dot products in int64,
 *            then the stated fp32 chain: bitwise;
 *   vnni     the AVX512_VNNI kernel (attn_dec_qk8_vnni) against the C one:
 *            bitwise ("skipped" on a CPU without AVX512_VNNI, or a build
 *            without the kernel);
 *   avx2     the AVX2 kernel (attn_dec_qk8_avx2) against the C one, the
 *            same way ("skipped" without AVX2);
 *   bound    the scores against float64 on the unrounded Q and the
 *            de-quantized K: within |scale| x sum_b (s_b / 2) x
 *            sum_i |k_bi| + 2^-20 x |scale| x sum |q_i k_i| (the rounding
 *            of Q, then fp32's);
 * on keys read through a list of addresses in random order (as a paged
 * cache's), with special blocks planted: Q blocks of zeros, of tiny
 * values (amax below 127 x FLT_MIN: read as zeros), of exact ties, with a
 * NaN or an infinity (their rows' scores NaN), K blocks with a zero
 * scale, and the largest products: a Q block of -127s against K blocks of
 * -128s (Q8_0; Q4_0: nibbles 0, -8), where the AVX2 kernel's 16-bit pair
 * sums are at their largest (32512).  ATTN_QK8_BENCH=1 also prints the kernels' time from cache.
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
#include <time.h>

#include "attn_config.h"
#include "cpu/cpu.h"
#include "kernels/decode.h"
#include "cvt_ref.h"
#include "qk8_ref.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float unif(void)
{
    return (float)(next() & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

/* A key row of nb blocks: scales 2^-e x (1 + j/64), random quants. */
static void make_key(int st, uint8_t *row, int64_t nb, int zero_scale_block, int extreme)
{
    const int bb = st == 3 ? 34 : 18;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = row + b * bb;
        float sc = ldexpf(1.0f + (float)(next() % 64) / 64.0f, -(int)(next() % 6) - 2);
        if (b == zero_scale_block)
            sc = 0.0f;
        uint32_t bits;
        memcpy(&bits, &sc, 4);
        const uint16_t h = cvt_ref_from_f32(0, bits);   /* (exact: sc is a binary16 value) */
        blk[0] = (uint8_t)h;
        blk[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < (st == 3 ? 32 : 16); i++)
            blk[2 + i] = extreme && b == 0 ? (st == 3 ? 0x80 : 0x00) : (uint8_t)next();
    }
}

static int key_q(int st, const uint8_t *row, int64_t x, float *sc)
{
    const int bb = st == 3 ? 34 : 18;
    const uint8_t *blk = row + (x / 32) * bb;
    *sc = (float)cvt_ref_value(0, (uint16_t)(blk[0] | blk[1] << 8));
    const int e = (int)(x % 32);
    if (st == 3)
        return (int8_t)blk[2 + e];
    return (e < 16 ? blk[2 + e] & 0xF : blk[2 + e - 16] >> 4) - 8;
}

typedef struct shape {
    int64_t R, nk, d;
    int st;
    float scale;
} shape;

static const shape shapes[] = {
    { 1, 1, 32, 3, 1.0f },      { 4, 256, 128, 3, 0.125f },   { 4, 256, 128, 4, 0.125f },
    { 3, 17, 64, 3, 0.5f },     { 2, 300, 96, 4, 1.0f },      { 5, 15, 32, 4, 0.25f },
    { 8, 16, 256, 3, 0.0625f }, { 16, 100, 128, 4, 0.125f },  { 13, 33, 64, 3, 0.125f },
    { 17, 40, 512, 4, 0.044f }, { 33, 20, 160, 3, 1.0f },     { 2, 9, 544, 3, 0.043f },
    { 1, 257, 544, 4, 1.0f },   { 32, 256, 128, 3, 0.0884f }, { 7, 64, 224, 4, 0.07f },
};

typedef struct inst {
    shape sh;
    float *q;
    uint8_t *pool;
    const void **k;
    float *s, *s2;
    int64_t lds;
} inst;

static void inst_make(inst *t, const shape *sh, int special)
{
    t->sh = *sh;
    const int64_t nb = sh->d / 32, rowb = nb * (sh->st == 3 ? 34 : 18);
    t->q = malloc((size_t)(sh->R * sh->d) * sizeof(float));
    for (int64_t i = 0; i < sh->R * sh->d; i++)
        t->q[i] = unif() * (1.0f + (float)(i % 7));
    if (special) {
        /* row 0 block 0 zeros; row min(1,R-1) last block tiny; ties in
         * row 0's last block (amax 127: id 1, so x.5 stays a tie); a NaN
         * and an infinity in the last rows */
        memset(t->q, 0, 32 * sizeof(float));
        float *tiny = t->q + (sh->R > 1 ? 1 : 0) * sh->d + sh->d - 32;
        for (int i = 0; i < 32; i++)
            tiny[i] = ldexpf(unif(), -130);
        if (nb > 1) {
            float *tie = t->q + sh->d - 32;
            for (int i = 0; i < 32; i++)
                tie[i] = (float)(i % 2 ? -(i / 2) : i / 2) + 0.5f;
            tie[31] = 127.0f;
        }
        if (sh->R > 1)
            for (int i = 0; i < 32; i++)
                t->q[sh->d + i] = -127.0f;   /* (row 1 block 0: s 1, q -127) */
        if (sh->R > 2)
            t->q[(sh->R - 1) * sh->d + 5] = NAN;
        if (sh->R > 3)
            t->q[(sh->R - 2) * sh->d + sh->d - 1] = -INFINITY;
    }
    /* keys scattered through a pool twice as large, in random order */
    const int64_t slots = 2 * sh->nk;
    t->pool = malloc((size_t)(slots * rowb));
    for (int64_t j = 0; j < slots; j++)
        make_key(sh->st, t->pool + j * rowb, nb, special && j % 5 == 0 ? (int)(j % nb) : -1,
                 special && j % 7 == 3);
    t->k = malloc((size_t)sh->nk * sizeof(void *));
    int64_t *perm = malloc((size_t)slots * sizeof(int64_t));
    for (int64_t j = 0; j < slots; j++)
        perm[j] = j;
    for (int64_t j = slots - 1; j > 0; j--) {
        const int64_t o = (int64_t)(next() % (uint32_t)(j + 1)), tmp = perm[j];
        perm[j] = perm[o];
        perm[o] = tmp;
    }
    for (int64_t c = 0; c < sh->nk; c++)
        t->k[c] = t->pool + perm[c] * rowb;
    free(perm);
    t->lds = sh->nk + 3;
    t->s = malloc((size_t)(sh->R * t->lds) * sizeof(float));
    t->s2 = malloc((size_t)(sh->R * t->lds) * sizeof(float));
}

static void inst_free(inst *t)
{
    free(t->q);
    free(t->pool);
    free(t->k);
    free(t->s);
    free(t->s2);
}

static void run(attn_dec_qk_fn fn, const inst *t, float *s)
{
    for (int64_t i = 0; i < t->sh.R * t->lds; i++)
        s[i] = 777.0f;   /* the gaps past nk must stay */
    fn(t->sh.st, t->q, t->sh.d, t->sh.R, t->k, t->sh.nk, t->sh.d, t->sh.scale, s, t->lds, 0);
}

static int same_bits(float a, float b)
{
    return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b));
}

/* rule: the C kernel against the reference of attn.h's words, bitwise */
static long check_rule(const inst *t)
{
    const shape *sh = &t->sh;
    const int64_t nb = sh->d / 32;
    long bad = 0;
    int qv[32];
    for (int64_t r = 0; r < sh->R; r++)
        for (int64_t c = 0; c < sh->nk; c++) {
            float a = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const float sq = qk8_ref_round(t->q + r * sh->d + 32 * b, qv);
                int64_t dot = 0;
                float sk = 0.0f;
                for (int i = 0; i < 32; i++)
                    dot += (int64_t)qv[i] * key_q(sh->st, t->k[c], 32 * b + i, &sk);
                const float w = sk * sq;
                a = b == 0 ? (float)dot * w : fmaf((float)dot, w, a);
            }
            const float want = sh->scale * a;
            if (!same_bits(t->s[r * t->lds + c], want) && bad++ < 3)
                print_message("  rule: R %lld nk %lld d %lld type %d: s[%lld][%lld] %.9g, "
                              "want %.9g\n", (long long)sh->R, (long long)sh->nk,
                              (long long)sh->d, sh->st, (long long)r, (long long)c,
                              (double)t->s[r * t->lds + c], (double)want);
        }
    for (int64_t r = 0; r < sh->R; r++)
        for (int64_t c = sh->nk; c < t->lds; c++)
            bad += t->s[r * t->lds + c] != 777.0f;
    return bad;
}

/* bound: against float64 on the unrounded Q (rows without NaN/Inf) */
static long check_bound(const inst *t, double *worst)
{
    const shape *sh = &t->sh;
    const int64_t nb = sh->d / 32;
    long bad = 0;
    int qv[32];
    for (int64_t r = 0; r < sh->R; r++) {
        const float *qr = t->q + r * sh->d;
        int finite = 1;
        for (int64_t x = 0; x < sh->d; x++)
            finite &= isfinite(qr[x]) != 0;
        for (int64_t c = 0; c < sh->nk; c++) {
            const float got = t->s[r * t->lds + c];
            if (!finite) {
                bad += !isnan(got);
                continue;
            }
            double exact = 0.0, mag = 0.0, lim = 0.0;
            for (int64_t b = 0; b < nb; b++) {
                const double sq = qk8_ref_round(qr + 32 * b, qv);
                double kab = 0.0;
                for (int i = 0; i < 32; i++) {
                    float sk;
                    const double kval = (double)key_q(sh->st, t->k[c], 32 * b + i, &sk) * sk;
                    exact += (double)qr[32 * b + i] * kval;
                    mag += fabs((double)qr[32 * b + i] * kval);
                    kab += fabs(kval);
                }
                /* a block rounded to zeros (tiny) loses all of itself */
                lim += sq == 0.0 ? 0.0 : sq / 2 * kab;
                if (sq == 0.0)
                    for (int i = 0; i < 32; i++) {
                        float sk;
                        lim += fabs((double)qr[32 * b + i]) *
                               fabs((double)key_q(sh->st, t->k[c], 32 * b + i, &sk) * sk);
                    }
            }
            const double sc = fabs((double)sh->scale);
            const double tol = sc * lim + ldexp(sc * mag, -20) + 1e-30;
            const double err = fabs((double)got - (double)sh->scale * exact);
            if (err / tol > *worst)
                *worst = err / tol;
            if (!(err <= tol) && bad++ < 3)
                print_message("  bound: R %lld nk %lld d %lld: s[%lld][%lld] off by %.3g "
                              "(bound %.3g)\n", (long long)sh->R, (long long)sh->nk,
                              (long long)sh->d, (long long)r, (long long)c, err, tol);
        }
    }
    return bad;
}

/* Every instance of the table (each shape plain and with the special
 * blocks): the C kernel's scores into t.s, then check; returns the
 * failures, *n the instances. */
static long each_instance(long (*check)(inst *t, double *worst), double *worst, int *n)
{
    long bad = 0;
    *n = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int special = 0; special < 2; special++) {
            inst t;
            inst_make(&t, &shapes[i], special);
            run(attn_dec_qk8_c, &t, t.s);
            const long e = check(&t, worst);
            if (e)
                print_message("FAIL R %lld nk %lld d %lld type %d special %d: %ld\n",
                              (long long)t.sh.R, (long long)t.sh.nk, (long long)t.sh.d,
                              t.sh.st, special, e);
            bad += e;
            ++*n;
            inst_free(&t);
        }
    return bad;
}

static long check_c(inst *t, double *worst)
{
    return check_rule(t) + check_bound(t, worst);
}

static void test_qk8_table(void **state)
{
    (void)state;
    double worst = 0.0;
    int n;
    const long bad = each_instance(check_c, &worst, &n);
    print_message("  %d instances: the C kernel bitwise to the rule; largest error against "
                  "float64 %.3f of the stated bound\n", n, worst);
    assert_int_equal(bad, 0);
}

static int have_vnni(void)
{
#if ATTN_HAVE_VNNI
    return (attn_cpu_flags() & ATTN_CPU_AVX512VNNI) != 0;
#else
    return 0;
#endif
}

/* The SIMD kernel under test: its scores (and untouched gaps) bitwise the
 * C kernel's. */
static attn_dec_qk_fn simd_fn;

static long check_simd(inst *t, double *worst)
{
    (void)worst;
    run(simd_fn, t, t->s2);
    long e = 0;
    for (int64_t j = 0; j < t->sh.R * t->lds; j++)
        if (!same_bits(t->s[j], t->s2[j]) && e++ < 3)
            print_message("  [%lld] %.9g, C %.9g\n", (long long)j, (double)t->s2[j],
                          (double)t->s[j]);
    return e;
}

/* The whole table through fn (name: its unit), then, under
 * ATTN_QK8_BENCH=1, its time and that of the fp32 Q K^T of the same
 * level (fp32) from cache: 4 rows, 256 keys, d 128. */
static void check_kernel(attn_dec_qk_fn fn, const char *name, attn_dec_qk_fn fp32)
{
    simd_fn = fn;
    double unused = 0.0;
    int n;
    const long bad = each_instance(check_simd, &unused, &n);
    print_message("  %d instances: the %s kernel gives the C kernel's bits\n", n, name);
    assert_int_equal(bad, 0);
    const char *bench = getenv("ATTN_QK8_BENCH");
    if (!bench || *bench != '1')
        return;
    const shape sh[2] = { { 4, 256, 128, 3, 0.125f }, { 4, 256, 128, 4, 0.125f } };
    for (int ti = 0; ti < 2; ti++) {
        inst t;
        inst_make(&t, &sh[ti], 0);
        for (int kind = 0; kind < 2; kind++) {
            double best = 1e30;
            for (int rep = 0; rep < 2000; rep++) {
                struct timespec a, b;
                clock_gettime(CLOCK_MONOTONIC, &a);
                (kind ? fn : fp32)(t.sh.st, t.q, 128, 4, t.k, 256, 128, 0.125f, t.s, t.lds, 0);
                clock_gettime(CLOCK_MONOTONIC, &b);
                const double us = (double)(b.tv_sec - a.tv_sec) * 1e6 +
                                  (double)(b.tv_nsec - a.tv_nsec) / 1e3;
                best = us < best ? us : best;
            }
            print_message("  %s %s %s: %.2f us per call (4 rows x 256 keys, d 128)\n",
                          ti ? "Q4_0" : "Q8_0", name, kind ? "integer" : "fp32   ", best);
        }
        inst_free(&t);
    }
}

static void test_qk8_vnni(void **state)
{
    (void)state;
#if ATTN_HAVE_VNNI
    if (!have_vnni()) {
        print_message("  SKIPPED: this CPU has no AVX512_VNNI\n");
        skip();
    }
    check_kernel(attn_dec_qk8_vnni, "AVX512_VNNI", attn_dec_avx512.qk);
#else
    print_message("  SKIPPED: built without the AVX512_VNNI kernel\n");
    skip();
#endif
}

static void test_qk8_avx2(void **state)
{
    (void)state;
#if ATTN_HAVE_X86_KERNELS
    if (!(attn_cpu_flags() & ATTN_CPU_AVX2)) {
        print_message("  SKIPPED: this CPU has no AVX2\n");
        skip();
    }
    check_kernel(attn_dec_qk8_avx2, "AVX2", attn_dec_avx2.qk);
#else
    print_message("  SKIPPED: built without the x86 kernels\n");
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qk8_table),
        cmocka_unit_test(test_qk8_vnni),
        cmocka_unit_test(test_qk8_avx2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
