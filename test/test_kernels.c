/*
 * checkasm-style tests of the softmax row kernels: every SIMD table this CPU
 * can run is compared with the portable C table on random rows of every
 * length from 0 to 100 and a few long ones, with -INFINITY holes, fully
 * masked rows, large negative arguments (underflow to exactly 0), and
 * poisoned guard elements around each row that must stay untouched.
 *
 * Tolerances: row_max and prep_max are exact (bitwise); exp on a sweep of
 * [-87, 0.5] within 3e-7 relative of double exp() in every table; exp rows
 * within 2e-6 relative of the C kernel and within 3e-6 of double exp();
 * sums within 1e-5 relative (the summation order differs between tables);
 * exp of -INFINITY and of arguments below -87.34 is exactly 0.
 *
 * The dropout rows (dropout_row, dropout_bwd_row, dropout_keep_row: the
 * Philox4x32-10 keep decisions, then one multiply) are bitwise equal to the
 * C table at random keys, thresholds (0, 2^32 and between), rows (b, h, i)
 * and offsets j0 (any j0 % 4, up to the last key 2^32 - 1), lengths 1..70
 * and long ones, on inputs with NaN, infinities and -0, with guards; the C
 * table's keep row is checked against attn_philox4x32_10 word by word.
 *
 * Links the static library: the kernels are internal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_config.h"
#include "kernels/kernels.h"
#include "kernels/convert.h"

#define GUARD 16
#define MAXN 1100
static const float POISON = 12345.678f;

static uint64_t rng = 0x243F6A8885A308D3ull;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

static const attn_kernels *tables[4];
static int ntables;

static int setup(void **state)
{
    (void)state;
    ntables = 0;
#if ATTN_HAVE_X86_KERNELS
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        tables[ntables++] = &attn_kernels_avx2;
    if (__builtin_cpu_supports("avx512f"))
        tables[ntables++] = &attn_kernels_avx512;
#if ATTN_HAVE_AVX512BF16
    /* the AVX512-BF16 level's (VCVTNEPS2BF16 in softmax_rows_p16) */
    if (attn_cpu_flags() & ATTN_CPU_AVX512BF16)
        tables[ntables++] = &attn_kernels_avx512bf16;
    else
        print_message("avx512bf16 kernel table: SKIPPED (no AVX512_BF16 on this CPU)\n");
#endif
#endif
    print_message("SIMD tables checked against C: %d\n", ntables);
    return 0;
}

/* A row in [-range, 0] with holes of -INFINITY (probability holes). */
static void fill(float *x, int64_t n, double range, double holes)
{
    for (int64_t j = 0; j < n; j++)
        x[j] = urand() < holes ? -INFINITY : (float)(-range * urand());
}

static void guard(float *buf, int64_t n)
{
    for (int g = 0; g < GUARD; g++) {
        buf[g] = POISON;
        buf[GUARD + n + g] = POISON;
    }
}

static void check_guard(const float *buf, int64_t n)
{
    for (int g = 0; g < GUARD; g++) {
        assert_true(buf[g] == POISON);
        assert_true(buf[GUARD + n + g] == POISON);
    }
}

static void rel_close(double got, double want, double tol)
{
    if (want == 0.0) {
        assert_true(got == 0.0);
        return;
    }
    double e = fabs(got - want) / fabs(want);
    if (!(e <= tol))
        fail_msg("got %.9g want %.9g (rel %.3g > %.3g)", got, want, e, tol);
}

static int64_t length_of(int i)
{
    static const int64_t extra[] = { 127, 128, 129, 197, 255, 256, 257, 511, 512, 1023, 1024 };
    return i <= 100 ? i : extra[(i - 101) % (int)(sizeof extra / sizeof extra[0])];
}
#define NLENGTHS (101 + 11)

/* exp against double exp() on a sweep of [-87, 0.5]: the scalar function
 * and every table's exp_store (the same steps, vectorized), 3e-7 relative
 * at most. */
static void test_exp_scalar(void **state)
{
    (void)state;
    assert_true(attn_exp_scalar(-INFINITY) == 0.0f);
    assert_true(attn_exp_scalar(-88.0f) == 0.0f);
    assert_true(attn_exp_scalar(0.0f) == 1.0f);
    assert_true(isnan(attn_exp_scalar(NAN)));
    assert_true(isinf(attn_exp_scalar(100.0f)));
    enum { NS = 200001 };
    float *x = malloc(NS * sizeof(float)), *y = malloc(NS * sizeof(float));
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < NS; i++)
        x[i] = (float)(-87.0 + 87.5 * i / (NS - 1.0));
    for (int t = -1; t < ntables; t++) {
        if (t < 0)
            for (int i = 0; i < NS; i++)
                y[i] = attn_exp_scalar(x[i]);
        else
            tables[t]->exp_store(y, x, NS, 0.0f);
        double worst = 0;
        for (int i = 0; i < NS; i++) {
            double e = fabs(y[i] - exp((double)x[i])) / exp((double)x[i]);
            if (e > worst)
                worst = e;
        }
        print_message("exp (%s): max relative error %.3g on [-87, 0.5]\n",
                      t < 0 ? "attn_exp_scalar" : tables[t]->name, worst);
        assert_true(worst < 3e-7);
    }
    free(x);
    free(y);
}

static void test_row_max(void **state)
{
    (void)state;
    float buf[MAXN + 2 * GUARD];
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < NLENGTHS; i++) {
            int64_t n = length_of(i);
            guard(buf, n);
            fill(buf + GUARD, n, 30.0, i % 3 == 0 ? 0.5 : 0.05);
            if (n && i % 7 == 0) /* all masked */
                for (int64_t j = 0; j < n; j++) buf[GUARD + j] = -INFINITY;
            float want = attn_kernels_scalar.row_max(buf + GUARD, n);
            float got = tables[t]->row_max(buf + GUARD, n);
            if (memcmp(&got, &want, sizeof got))
                fail_msg("%s row_max n=%lld: %g vs %g", tables[t]->name, (long long)n, got, want);
            check_guard(buf, n);
        }
}

static void test_exp_sum(void **state)
{
    (void)state;
    float a[MAXN + 2 * GUARD], b[MAXN + 2 * GUARD];
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < NLENGTHS; i++)
            for (int rep = 0; rep < 4; rep++) {
                int64_t n = length_of(i);
                double range = rep == 3 ? 200.0 : 20.0;   /* rep 3: underflows */
                guard(a, n);
                fill(a + GUARD, n, range, rep == 1 ? 0.6 : 0.1);
                if (n) a[GUARD + n / 2] = 0.0f;            /* a max of 0 */
                memcpy(b, a, sizeof a);
                double dsum = 0;
                for (int64_t j = 0; j < n; j++)
                    dsum += a[GUARD + j] < -87.3365f ? 0.0 : exp((double)a[GUARD + j]);
                float want = attn_kernels_scalar.exp_sum(a + GUARD, n, 0.0f);
                float got = tables[t]->exp_sum(b + GUARD, n, 0.0f);
                check_guard(b, n);
                rel_close(got, want, 1e-5);
                rel_close(got, dsum, 1e-5);
                for (int64_t j = 0; j < n; j++) {
                    float x0 = a[GUARD + j], x1 = b[GUARD + j];
                    rel_close(x1, x0, 2e-6);
                    if (x0 != 0.0f)
                        assert_true(x0 >= 1.17549435e-38f); /* no denormals */
                }
            }
}

static void test_exp_store_and_scale(void **state)
{
    (void)state;
    float src[MAXN + 2 * GUARD], d0[MAXN + 2 * GUARD], d1[MAXN + 2 * GUARD];
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < NLENGTHS; i++) {
            int64_t n = length_of(i);
            fill(src + GUARD, n, 25.0, 0.2);
            float m = -3.25f;  /* exp(x - m) with x - m <= 3.25 */
            guard(d0, n);
            guard(d1, n);
            attn_kernels_scalar.exp_store(d0 + GUARD, src + GUARD, n, m);
            tables[t]->exp_store(d1 + GUARD, src + GUARD, n, m);
            check_guard(d1, n);
            for (int64_t j = 0; j < n; j++) {
                rel_close(d1[GUARD + j], d0[GUARD + j], 2e-6);
                double want = src[GUARD + j] == -INFINITY ? 0.0 : exp((double)src[GUARD + j] - m);
                rel_close(d1[GUARD + j], want, 3e-6);
            }
            /* in place, as attn uses it for P */
            memcpy(d1 + GUARD, src + GUARD, (size_t)n * sizeof(float));
            tables[t]->exp_store(d1 + GUARD, d1 + GUARD, n, m);
            for (int64_t j = 0; j < n; j++)
                rel_close(d1[GUARD + j], d0[GUARD + j], 2e-6);
            /* scale: exact (one rounding, same in every table) */
            memcpy(d0 + GUARD, src + GUARD, (size_t)n * sizeof(float));
            memcpy(d1 + GUARD, src + GUARD, (size_t)n * sizeof(float));
            attn_kernels_scalar.scale(d0 + GUARD, n, 0.37f);
            tables[t]->scale(d1 + GUARD, n, 0.37f);
            check_guard(d1, n);
            assert_memory_equal(d0 + GUARD, d1 + GUARD, (size_t)n * sizeof(float));
        }
}

/* prep_max: bias add, mask (both polarities), max; every combination, every
 * length, against the C table: results and max bitwise equal (one addition
 * and a select per element, the same in every table). */
static void test_prep_max(void **state)
{
    (void)state;
    float a[MAXN + 2 * GUARD], b[MAXN + 2 * GUARD], bias[MAXN];
    uint8_t mask[MAXN + 16];
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < NLENGTHS; i++)
            for (int combo = 0; combo < 6; combo++) {
                int64_t n = length_of(i);
                int use_bias = combo & 1, use_mask = combo >= 2, drop = combo >= 4;
                guard(a, n);
                fill(a + GUARD, n, 20.0, 0.1);
                for (int64_t j = 0; j < n; j++) {
                    bias[j] = urand() < 0.05 ? -INFINITY : (float)(4.0 * urand() - 2.0);
                    mask[j] = urand() < 0.3 ? 0 : (uint8_t)(1 + (int)(urand() * 254));
                }
                if (n && i % 5 == 0)   /* every position hidden */
                    for (int64_t j = 0; j < n; j++) mask[j] = drop ? 1 : 0;
                memcpy(b, a, sizeof a);
                const float *bp = use_bias ? bias : NULL;
                const uint8_t *mp = use_mask ? mask : NULL;
                float want = attn_kernels_scalar.prep_max(a + GUARD, n, bp, mp, drop);
                float got = tables[t]->prep_max(b + GUARD, n, bp, mp, drop);
                check_guard(b, n);
                if (memcmp(&got, &want, sizeof got))
                    fail_msg("%s prep_max n=%lld combo %d: max %g vs %g", tables[t]->name,
                             (long long)n, combo, got, want);
                assert_memory_equal(a + GUARD, b + GUARD, (size_t)n * sizeof(float));
                for (int64_t j = 0; j < n; j++) {
                    int hidden = use_mask && ((mask[j] != 0) == drop);
                    if (hidden)
                        assert_true(b[GUARD + j] == -INFINITY);
                }
            }
}

static void test_nan_propagates(void **state)
{
    (void)state;
    float x[40];
    /* a NaN anywhere (each position, each length) makes the max NaN */
    const attn_kernels *all[5] = { &attn_kernels_scalar };
    for (int t = 0; t < ntables; t++)
        all[t + 1] = tables[t];
    for (int t = 0; t <= ntables; t++)
        for (int64_t n = 1; n <= 40; n++)
            for (int64_t at = 0; at < n; at++) {
                for (int j = 0; j < 40; j++) x[j] = -1.0f - (float)j;
                x[at] = NAN;
                assert_true(isnan(all[t]->row_max(x, n)));
                uint8_t keep[40];
                memset(keep, 1, sizeof keep);
                assert_true(isnan(all[t]->prep_max(x, n, NULL, keep, 0)));
                x[at] = -5.0f;
                assert_false(isnan(all[t]->row_max(x, n)));
            }
    for (int t = 0; t < ntables; t++) {
        for (int j = 0; j < 40; j++) x[j] = -1.0f;
        x[17] = NAN;
        tables[t]->exp_sum(x, 40, 0.0f);
        assert_true(isnan(x[17]));
        assert_false(isnan(x[16]));
    }
}

static uint32_t urand32(void)
{
    return (uint32_t)(urand() * 4294967296.0);
}

static float any_float(void)
{
    double u = urand();
    if (u < 0.03) return NAN;
    if (u < 0.05) return INFINITY;
    if (u < 0.07) return -INFINITY;
    if (u < 0.09) return -0.0f;
    if (u < 0.11) return 0.0f;
    return (float)((urand() - 0.5) * 8.0);
}

static void random_dropout(attn_dropout *dr)
{
    dr->key[0] = urand32();
    dr->key[1] = urand32();
    double u = urand();
    double p = u < 0.1 ? 1.0 : u < 0.2 ? 1e-12 : u < 0.3 ? 0.1 : urand();
    dr->thresh = (uint64_t)llround((1.0 - p) * 4294967296.0);
    dr->scale = p < 1.0 ? (float)(1.0 / (1.0 - p)) : 0.0f;
}

/* (b, h, i, j0, n) with keys j0 .. j0 + n - 1 < 2^32. */
static void random_row(int64_t *b, int64_t *h, int64_t *i, int64_t *j0, int64_t *n)
{
    *n = urand() < 0.9 ? 1 + (int64_t)(urand() * 70) : 71 + (int64_t)(urand() * 1000);
    *b = urand() < 0.5 ? (int64_t)(urand() * 8) : (int64_t)urand32();
    *h = urand() < 0.5 ? (int64_t)(urand() * 16) : (int64_t)urand32();
    *i = urand() < 0.5 ? (int64_t)(urand() * 4096) : (int64_t)urand32();
    const int64_t last = ((int64_t)1 << 32) - *n;  /* largest j0 */
    double u = urand();
    *j0 = u < 0.5 ? (int64_t)(urand() * 2048) : u < 0.6 ? last - (int64_t)(urand() * 8)
                                                          : (int64_t)(urand() * (double)last);
    if (*j0 < 0) *j0 = 0;
    if (*j0 > last) *j0 = last;
}

static void test_dropout_keep_scalar(void **state)
{
    (void)state;
    uint8_t keep[200];
    for (int c = 0; c < 200; c++) {
        attn_dropout dr;
        int64_t b, h, i, j0, n;
        random_dropout(&dr);
        random_row(&b, &h, &i, &j0, &n);
        if (n > 200) n = 200;
        attn_kernels_scalar.dropout_keep_row(&dr, keep, b, h, i, j0, n);
        for (int64_t x = 0; x < n; x++) {
            const int64_t j = j0 + x;
            const uint32_t ctr[4] = { (uint32_t)(j >> 2), (uint32_t)i, (uint32_t)h, (uint32_t)b };
            uint32_t u[4];
            attn_philox4x32_10(ctr, dr.key, u);
            assert_int_equal(keep[x], (uint64_t)u[j & 3] < dr.thresh);
        }
    }
}

static void test_dropout_rows(void **state)
{
    (void)state;
    enum { N = 1100 };
    static float x0[N + 2 * GUARD], x1[N + 2 * GUARD], p0[N + 2 * GUARD], p1[N + 2 * GUARD];
    static uint8_t k0[N + 2 * GUARD], k1[N + 2 * GUARD];
    int kept = 0, dropped = 0;
    for (int t = 0; t < ntables; t++)
        for (int c = 0; c < 3000; c++) {
            attn_dropout dr;
            int64_t b, h, i, j0, n;
            random_dropout(&dr);
            random_row(&b, &h, &i, &j0, &n);
            for (int64_t x = 0; x < n; x++) {
                x0[GUARD + x] = x1[GUARD + x] = any_float();
                p0[GUARD + x] = p1[GUARD + x] = any_float();
            }
            guard(x0, n);
            guard(x1, n);
            guard(p0, n);
            guard(p1, n);
            /* forward row */
            attn_kernels_scalar.dropout_row(&dr, x0 + GUARD, b, h, i, j0, n);
            tables[t]->dropout_row(&dr, x1 + GUARD, b, h, i, j0, n);
            check_guard(x1, n);
            assert_memory_equal(x0 + GUARD, x1 + GUARD, (size_t)n * sizeof(float));
            /* backward row on (P, dP') = (x, p) */
            const float D = urand() < 0.1 ? 0.0f : any_float();
            attn_kernels_scalar.dropout_bwd_row(&dr, x0 + GUARD, p0 + GUARD, D, b, h, i, j0, n);
            tables[t]->dropout_bwd_row(&dr, x1 + GUARD, p1 + GUARD, D, b, h, i, j0, n);
            check_guard(x1, n);
            check_guard(p1, n);
            assert_memory_equal(x0 + GUARD, x1 + GUARD, (size_t)n * sizeof(float));
            assert_memory_equal(p0 + GUARD, p1 + GUARD, (size_t)n * sizeof(float));
            /* keep bytes */
            memset(k0, 0xA5, sizeof k0);
            memset(k1, 0xA5, sizeof k1);
            attn_kernels_scalar.dropout_keep_row(&dr, k0 + GUARD, b, h, i, j0, n);
            tables[t]->dropout_keep_row(&dr, k1 + GUARD, b, h, i, j0, n);
            assert_memory_equal(k0, k1, sizeof k0);
            for (int64_t x = 0; x < n; x++) {
                kept += k0[GUARD + x];
                dropped += !k0[GUARD + x];
            }
        }
    if (ntables) {
        assert_true(kept > 0);
        assert_true(dropped > 0);
    }
}

/* softmax_rows against its contract, spelled out here over the same
 * table's row_max and exp_sum: bitwise, on blocks of 1-37 rows (the AVX
 * tables take 8 or 16 rows at a time, so several groups and a part) of every
 * length, scores of either sign, rows all -INFINITY or holding a NaN, and
 * running maxima that are -INFINITY, NaN, below or above the row's; the
 * stride's padding between rows must stay untouched. */
static void test_softmax_rows(void **state)
{
    (void)state;
    enum { RMAX = 37, PAD = 5 };
    const attn_kernels *all[5] = { &attn_kernels_scalar };
    for (int t = 0; t < ntables; t++)
        all[t + 1] = tables[t];
    const int64_t cap = (MAXN + PAD * 2) * RMAX;
    float *got = malloc((size_t)cap * sizeof(float)), *want = malloc((size_t)cap * sizeof(float));
    assert_non_null(got);
    assert_non_null(want);
    long rows = 0;
    for (int t = 0; t <= ntables; t++)
        for (int i = 0; i < NLENGTHS; i++) {
            const int64_t n = length_of(i);
            if (n == 0)
                continue;
            const int64_t R = 1 + i % RMAX, lds = n + (i % 3) * PAD;
            float m0[RMAX], l0[RMAX], m1[RMAX], l1[RMAX], c0[RMAX], c1[RMAX];
            for (int64_t x = 0; x < R * lds; x++)
                want[x] = POISON;
            for (int64_t r = 0; r < R; r++) {
                float *row = want + r * lds;
                const double range = r % 4 == 2 ? 100.0 : 8.0;
                for (int64_t j = 0; j < n; j++)
                    row[j] = (float)(range * (2.0 * urand() - 1.0));
                if (r % 7 == 3)
                    for (int64_t j = 0; j < n; j++)
                        row[j] = -INFINITY;
                if (r % 9 == 5)
                    row[(int64_t)(urand() * n)] = NAN;
                const int k = (int)((r + i) % 6);
                m0[r] = k == 0 ? -INFINITY : k == 1 && i % 4 == 0 ? NAN
                      : (float)(range * (2.0 * urand() - 1.0));
                l0[r] = k == 0 ? 0.0f : (float)(1.0 + 50.0 * urand());
                c0[r] = POISON;
            }
            memcpy(got, want, (size_t)(R * lds) * sizeof(float));
            memcpy(m1, m0, sizeof m0);
            memcpy(l1, l0, sizeof l0);
            memcpy(c1, c0, sizeof c0);
            /* softmax_rows_p16 on a copy: the same m, l, corr, and each row
             * the BF16 rounding of softmax_rows's, in place */
            float *p16 = malloc((size_t)(R * lds) * sizeof(float));
            float m2[RMAX], l2[RMAX], c2[RMAX];
            assert_non_null(p16);
            memcpy(p16, want, (size_t)(R * lds) * sizeof(float));
            memcpy(m2, m0, sizeof m0);
            memcpy(l2, l0, sizeof l0);
            memcpy(c2, c0, sizeof c0);
            all[t]->softmax_rows_p16(p16, lds, R, n, m2, l2, c2);
            all[t]->softmax_rows(got, lds, R, n, m1, l1, c1);
            for (int64_t r = 0; r < R; r++) {
                const uint16_t *h = (const uint16_t *)(const void *)(p16 + r * lds);
                for (int64_t j = 0; j < n; j++)
                    if (h[j] != attn_f32_to_bf16(got[r * lds + j]))
                        fail_msg("%s softmax_rows_p16: row %lld col %lld: 0x%04x, want 0x%04x",
                                 all[t]->name, (long long)r, (long long)j, h[j],
                                 attn_f32_to_bf16(got[r * lds + j]));
                /* the stride's padding untouched */
                for (int64_t j = n; j < lds && r + 1 < R; j++)
                    if (memcmp(p16 + r * lds + j, want + r * lds + j, sizeof(float)))
                        fail_msg("%s softmax_rows_p16: padding written", all[t]->name);
            }
            if (memcmp(m1, m2, (size_t)R * sizeof(float)) || memcmp(l1, l2, (size_t)R * sizeof(float)) ||
                memcmp(c1, c2, (size_t)R * sizeof(float)))
                fail_msg("%s softmax_rows_p16: m, l or corr differ from softmax_rows", all[t]->name);
            free(p16);
            for (int64_t r = 0; r < R; r++) {
                float *row = want + r * lds;
                const float mt = all[t]->row_max(row, n), mold = m0[r];
                const float mnew = mt > mold ? mt : mold;
                if (isnan(mt) || isnan(mold)) {
                    memset(row, 0, (size_t)n * sizeof(float));
                    m0[r] = l0[r] = c0[r] = NAN;
                } else if (mnew == -INFINITY) {
                    memset(row, 0, (size_t)n * sizeof(float));
                    c0[r] = 1.0f;
                } else {
                    const float c = mold == -INFINITY ? 0.0f : attn_exp_scalar(mold - mnew);
                    const float sum = all[t]->exp_sum(row, n, mnew);
                    l0[r] = l0[r] * c + sum;
                    m0[r] = mnew;
                    c0[r] = c;
                }
            }
            if (memcmp(got, want, (size_t)(R * lds) * sizeof(float)) != 0 ||
                memcmp(m1, m0, (size_t)R * sizeof(float)) != 0 ||
                memcmp(l1, l0, (size_t)R * sizeof(float)) != 0 ||
                memcmp(c1, c0, (size_t)R * sizeof(float)) != 0)
                fail_msg("%s softmax_rows: R %lld n %lld lds %lld differs from its contract",
                         all[t]->name, (long long)R, (long long)n, (long long)lds);
            rows += R;
        }
    print_message("softmax_rows (and softmax_rows_p16 = its BF16 rounding): %ld rows over %d "
                  "tables, bitwise\n", rows, ntables + 1);
    free(got);
    free(want);
}

static void test_select_cap(void **state)
{
    (void)state;
    setenv("ATTN_SIMD", "scalar", 1);
    assert_ptr_equal(attn_kernels_select(), &attn_kernels_scalar);
#if ATTN_HAVE_X86_KERNELS
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        setenv("ATTN_SIMD", "avx2", 1);
        assert_ptr_equal(attn_kernels_select(), &attn_kernels_avx2);
    }
#endif
    unsetenv("ATTN_SIMD");
    assert_non_null(attn_kernels_select());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_scalar),
        cmocka_unit_test(test_row_max),
        cmocka_unit_test(test_exp_sum),
        cmocka_unit_test(test_exp_store_and_scale),
        cmocka_unit_test(test_prep_max),
        cmocka_unit_test(test_nan_propagates),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_select_cap),
        cmocka_unit_test(test_dropout_keep_scalar),
        cmocka_unit_test(test_dropout_rows),
    };
    return cmocka_run_group_tests_name("kernels", tests, setup, NULL);
}
