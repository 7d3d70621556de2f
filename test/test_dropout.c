/*
 * test_dropout.c -- dropout on the SDPA probabilities (attn.h: dropout_p,
 * dropout_seed, dropout_offset; attn_dropout_mask_fill).
 *
 * The test owns an independent Philox4x32-10, written from the paper
 * (Salmon et al., SC'11) and checked against Random123's known-answer
 * vectors, and from it the documented keep decision.  Against that:
 *   - attn_dropout_mask_fill: every status, the mask bit for bit (and the
 *     library's raw 32-bit draws, recovered by bisection on p);
 *   - keep rates within 4 sigma of 1 - p (p = 0.1, 0.5, 0.9), p = 0 keeps
 *     all, p = 1 drops all;
 *   - attn_sdpa with p > 0 against a float64 reference that applies the
 *     test's mask (O = (P Z) V with Z = keep / (1 - p), lse undropped,
 *     probabilities output = P Z), over layouts, GQA, causal, windows,
 *     lengths, masks, bias, split-K and GQA-stacking shapes, p = 1; thread
 *     counts 1-4 bitwise, and O the same whether or not P is asked for;
 *   - p = 0 bitwise equal to a desc that never set dropout (whatever the
 *     seed and offset);
 *   - attn_sdpa_backward with p > 0 against an analytic float64 backward
 *     written here (itself checked against central finite differences of
 *     L = sum(dO * O) with the mask held fixed), thread counts bitwise;
 *   - desc errors: p < 0, p > 1, NaN (forward and backward), and B, Hq
 *     past 2^32 with p > 0.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "reference.h"

/* ------------------------------------------------- the test's own Philox */

/* Philox4x32 with R rounds, Random123's constants: the multipliers of the
 * S-box and the Weyl increments of the key schedule (golden ratio and
 * sqrt(3) - 1). */
static const uint32_t PH_MULT_A = 0xD2511F53u, PH_MULT_B = 0xCD9E8D57u;
static const uint32_t PH_WEYL_A = 0x9E3779B9u, PH_WEYL_B = 0xBB67AE85u;

static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t prod = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(prod >> 32);
    *lo = (uint32_t)(prod & 0xFFFFFFFFu);
}

static void t_philox(int rounds, const uint32_t in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t x[4] = { in[0], in[1], in[2], in[3] };
    uint32_t key[2] = { key_in[0], key_in[1] };
    for (int r = 0; r < rounds; r++) {
        uint32_t hiA, loA, hiB, loB;
        mulhilo(PH_MULT_A, x[0], &hiA, &loA);
        mulhilo(PH_MULT_B, x[2], &hiB, &loB);
        uint32_t y[4] = { hiB ^ x[1] ^ key[0], loB, hiA ^ x[3] ^ key[1], loA };
        memcpy(x, y, sizeof x);
        key[0] += PH_WEYL_A;   /* (the bump after the last round is unused) */
        key[1] += PH_WEYL_B;
    }
    memcpy(out, x, sizeof x);
}

/* The decision of attn.h, spelled out. */
typedef struct tdrop {
    uint32_t key[2];
    uint64_t thresh;
    double z;              /* 1 / (1 - p), exact in double */
} tdrop;

static tdrop tdrop_make(double p, uint64_t seed, uint64_t offset)
{
    tdrop t;
    const uint32_t c[4] = { (uint32_t)(offset & 0xFFFFFFFFu), (uint32_t)(offset >> 32), 0, 0 };
    const uint32_t k[2] = { (uint32_t)(seed & 0xFFFFFFFFu), (uint32_t)(seed >> 32) };
    uint32_t o[4];
    t_philox(10, c, k, o);
    t.key[0] = o[0];
    t.key[1] = o[1];
    t.thresh = (uint64_t)round(ldexp(1.0 - p, 32));
    t.z = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
    return t;
}

static uint32_t tdrop_u(const tdrop *t, uint64_t b, uint64_t h, uint64_t i, uint64_t j)
{
    const uint32_t c[4] = { (uint32_t)(j / 4), (uint32_t)i, (uint32_t)h, (uint32_t)b };
    uint32_t o[4];
    t_philox(10, c, t->key, o);
    return o[j % 4];
}

static int tdrop_keep(const tdrop *t, uint64_t b, uint64_t h, uint64_t i, uint64_t j)
{
    return (uint64_t)tdrop_u(t, b, h, i, j) < t->thresh;
}

/* Random123 tests/kat_vectors (commit 9545ff64), the philox4x32 lines:
 * rounds, counter[4], key[2], expected[4]. */
static const struct {
    int rounds;
    uint32_t ctr[4], key[2], out[4];
} KAT[] = {
    { 7, { 0, 0, 0, 0 }, { 0, 0 }, { 0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u } },
    { 7, { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu }, { 0xffffffffu, 0xffffffffu },
      { 0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u } },
    { 7, { 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u }, { 0xa4093822u, 0x299f31d0u },
      { 0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au } },
    { 10, { 0, 0, 0, 0 }, { 0, 0 }, { 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u } },
    { 10, { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu }, { 0xffffffffu, 0xffffffffu },
      { 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu } },
    { 10, { 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u }, { 0xa4093822u, 0x299f31d0u },
      { 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u } },
};

static void test_philox_kat(void **state)
{
    (void)state;
    for (size_t v = 0; v < sizeof KAT / sizeof KAT[0]; v++) {
        uint32_t out[4];
        t_philox(KAT[v].rounds, KAT[v].ctr, KAT[v].key, out);
        for (int w = 0; w < 4; w++)
            assert_int_equal(out[w], KAT[v].out[w]);
    }
}

/* ------------------------------------------------- attn_dropout_mask_fill */

static void test_keep_mask_statuses(void **state)
{
    (void)state;
    uint8_t k[64];
    const int64_t L = (int64_t)1 << 32;
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 2, 4, NULL, 4),
                     ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_dropout_mask_fill(NAN, 1, 2, -1, 0, 0, 2, 4, NULL, 4),
                     ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_dropout_mask_fill(-0.1, 1, 2, 0, 0, 0, 2, 4, k, 4), ATTN_ERR_BAD_OPTION);
    assert_int_equal(attn_dropout_mask_fill(1.1, 1, 2, 0, 0, 0, 2, 4, k, 4), ATTN_ERR_BAD_OPTION);
    assert_int_equal(attn_dropout_mask_fill(NAN, 1, 2, 0, 0, 0, 2, 4, k, 4), ATTN_ERR_BAD_OPTION);
    assert_int_equal(attn_dropout_mask_fill(INFINITY, 1, 2, 0, 0, 0, 2, 4, k, 4),
                     ATTN_ERR_BAD_OPTION);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 0, 4, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 2, 0, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, -1, 0, 0, 2, 4, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, -1, 0, 2, 4, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, -1, 2, 4, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, -3, 4, k, 4), ATTN_ERR_BAD_SIZE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, L, 0, 0, 2, 4, k, 4), ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, L, 0, 2, 4, k, 4), ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, L - 1, 2, 4, k, 4),
                     ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, L, 1, 4, k, 4), ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 2, L + 1, k, L + 1),
                     ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 3, 4, k, INT64_MAX),
                     ATTN_ERR_TOO_LARGE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 2, 4, k, 3), ATTN_ERR_BAD_STRIDE);
    assert_int_equal(attn_dropout_mask_fill(0.5, 1, 2, 0, 0, 0, 2, 4, k, 0), ATTN_ERR_BAD_STRIDE);
    /* The last representable coordinates are fine, and match. */
    memset(k, 7, sizeof k);
    assert_int_equal(attn_dropout_mask_fill(0.5, 3, 4, L - 1, L - 1, L - 1, 1, 9, k, 9), ATTN_OK);
    tdrop t = tdrop_make(0.5, 3, 4);
    for (int64_t j = 0; j < 9; j++)
        assert_int_equal(k[j], tdrop_keep(&t, (uint64_t)(L - 1), (uint64_t)(L - 1),
                                          (uint64_t)(L - 1), (uint64_t)j));
    assert_int_equal(k[9], 7);
    /* ld > m: the gap is not written; rows = 1 with a huge ld is fine. */
    memset(k, 7, sizeof k);
    assert_int_equal(attn_dropout_mask_fill(0.3, 3, 4, 1, 2, 3, 2, 5, k, 8), ATTN_OK);
    for (int j = 5; j < 8; j++)
        assert_int_equal(k[j], 7);
    assert_int_equal(k[16], 7);
    assert_int_equal(attn_dropout_mask_fill(0.3, 3, 4, 1, 2, 3, 1, 5, k, INT64_MAX), ATTN_OK);
}

/* The library's mask equals the test's decision, bit for bit, over random
 * seeds, offsets (both halves used), coordinates, p and odd block sizes. */
static void test_keep_mask_independent(void **state)
{
    (void)state;
    trng r;
    trng_seed(&r, 777);
    const double ps[] = { 0.0, 1e-9, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0 - 1e-9, 1.0 };
    const int cases = tquick() ? 20 : 120;
    for (int c = 0; c < cases; c++) {
        const double p = c < 9 ? ps[c] : trng_uniform(&r, 0.0, 1.0);
        const uint64_t seed = trng_next(&r), off = c % 3 ? trng_next(&r) : (uint64_t)c;
        const int64_t b = c % 4 == 0 ? trng_int(&r, 0, 0xFFFFFFFFll) : trng_int(&r, 0, 7);
        const int64_t h = c % 5 == 0 ? trng_int(&r, 0, 0xFFFFFFFFll) : trng_int(&r, 0, 31);
        const int64_t i0 = c % 6 == 0 ? trng_int(&r, 0, 0xFFFF0000ll) : trng_int(&r, 0, 1000);
        const int64_t rows = trng_int(&r, 1, 9), m = trng_int(&r, 1, 77);
        const int64_t ld = m + trng_int(&r, 0, 5);
        uint8_t *k = malloc((size_t)(rows * ld));
        assert_non_null(k);
        assert_int_equal(attn_dropout_mask_fill(p, seed, off, b, h, i0, rows, m, k, ld), ATTN_OK);
        tdrop t = tdrop_make(p, seed, off);
        for (int64_t rr = 0; rr < rows; rr++)
            for (int64_t j = 0; j < m; j++) {
                int want = tdrop_keep(&t, (uint64_t)b, (uint64_t)h, (uint64_t)(i0 + rr),
                                      (uint64_t)j);
                if (k[rr * ld + j] != want) {
                    printf("mask differs: p %.17g seed %llx off %llx b %lld h %lld i %lld j %lld\n",
                           p, (unsigned long long)seed, (unsigned long long)off, (long long)b,
                           (long long)h, (long long)(i0 + rr), (long long)j);
                    fail();
                }
            }
        free(k);
    }
}

/* The library's raw draw u of one (b, h, i, j): keep iff u < T when
 * p = 1 - T 2^-32 (exact in double, and so is 1 - p), so the least T that
 * keeps is u + 1. */
static uint32_t lib_u(uint64_t seed, uint64_t off, int64_t b, int64_t h, int64_t i, int64_t j)
{
    uint64_t lo = 0, hi = (uint64_t)1 << 32;   /* keep(lo) = 0, keep(hi) = 1 */
    uint8_t k[8];
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        const double p = 1.0 - ldexp((double)mid, -32);
        assert_int_equal(attn_dropout_mask_fill(p, seed, off, b, h, i, 1, j + 1, k, j + 1),
                         ATTN_OK);
        if (k[j])
            hi = mid;
        else
            lo = mid;
    }
    return (uint32_t)(hi - 1);
}

static void test_keep_mask_raw_draws(void **state)
{
    (void)state;
    const struct { uint64_t seed, off; int64_t b, h, i, j; } pts[] = {
        { 0, 0, 0, 0, 0, 0 }, { 0, 0, 0, 0, 0, 3 }, { 42, 7, 1, 2, 3, 5 },
        { 0x123456789abcdef0ull, 0xfedcba9876543210ull, 3, 9, 100, 6 },
        { 0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffll, 0xffffffffll, 0xffffffffll, 7 },
    };
    for (size_t x = 0; x < sizeof pts / sizeof pts[0]; x++) {
        tdrop t = tdrop_make(0.5, pts[x].seed, pts[x].off);
        assert_int_equal(lib_u(pts[x].seed, pts[x].off, pts[x].b, pts[x].h, pts[x].i, pts[x].j),
                         tdrop_u(&t, (uint64_t)pts[x].b, (uint64_t)pts[x].h, (uint64_t)pts[x].i,
                                 (uint64_t)pts[x].j));
    }
}

static void test_keep_rates(void **state)
{
    (void)state;
    const int64_t rows = tquick() ? 128 : 512, m = 4096;
    uint8_t *k = malloc((size_t)(rows * m));
    assert_non_null(k);
    const double ps[] = { 0.0, 0.1, 0.5, 0.9, 1.0 };
    for (size_t x = 0; x < sizeof ps / sizeof ps[0]; x++) {
        const double p = ps[x];
        assert_int_equal(attn_dropout_mask_fill(p, 2024 + x, 11, 1, 3, 17, rows, m, k, m), ATTN_OK);
        int64_t kept = 0;
        for (int64_t e = 0; e < rows * m; e++)
            kept += k[e];
        const double N = (double)(rows * m), rate = kept / N;
        const double sigma = sqrt(p * (1.0 - p) / N);
        printf("[keep rate] p %.2f: %.6f kept of %.0f (expected %.2f, |dev| %.2f sigma)\n", p,
               rate, N, 1.0 - p, sigma > 0 ? fabs(rate - (1.0 - p)) / sigma : 0.0);
        if (p == 0.0)
            assert_true(kept == rows * m);
        else if (p == 1.0)
            assert_true(kept == 0);
        else
            assert_true(fabs(rate - (1.0 - p)) <= 4.0 * sigma);
    }
    free(k);
}

/* -------------------------------------------------------------- forward */

static const double U = 5.9604644775390625e-08;   /* 2^-24 */

typedef struct fstat {
    double err_o, err_p, err_lse, ratio;
    int cases;
} fstat;

static const float *view_at(const float *base, const attn_view *v, int64_t b, int64_t h,
                            int64_t i)
{
    return base + b * v->batch + h * v->head + i * v->seq;
}

/* Check the outputs of the last call of t (desc carrying dropout p, seed,
 * offset) against the float64 reference with the test's mask.  Returns the
 * number of bad elements. */
static long check_fwd(const tinst *t, fstat *st)
{
    const attn_sdpa_desc *d = &t->desc;
    const attn_sdpa_args *a = &t->args;
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len, dk = d->qk_dim,
                  dv = d->v_dim, g = d->q_heads / d->kv_heads;
    const size_t rows = (size_t)(B * Hq * n);
    ref_out r;
    memset(&r, 0, sizeof r);
    r.p = malloc(rows * (size_t)m * sizeof(double));
    r.lse = malloc(rows * sizeof(double));
    r.s_abs = malloc(rows * sizeof(double));
    r.nvis = malloc(rows * sizeof(int64_t));
    double *o = malloc((size_t)dv * sizeof(double)), *oa = malloc((size_t)dv * sizeof(double));
    assert_true(r.p && r.lse && r.s_abs && r.nvis && o && oa);
    /* the undropped reference: the test applies its own keep mask below */
    attn_sdpa_desc d0 = *d;
    d0.dropout_p = 0.0;
    assert_int_equal(ref_sdpa(&d0, a, &r), 0);
    const tdrop td = tdrop_make(d->dropout_p, d->dropout_seed, d->dropout_offset);
    long bad = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const size_t row = (size_t)((b * Hq + h) * n + i);
                const double *P = r.p + row * (size_t)m;
                const float *V = a->v + b * d->v.batch + (h / g) * d->v.head;
                for (int64_t x = 0; x < dv; x++)
                    o[x] = oa[x] = 0.0;
                for (int64_t j = 0; j < m; j++) {
                    if (P[j] == 0.0 || !tdrop_keep(&td, (uint64_t)b, (uint64_t)h, (uint64_t)i,
                                                   (uint64_t)j))
                        continue;
                    const double w = P[j] * td.z;
                    for (int64_t x = 0; x < dv; x++) {
                        o[x] += w * V[j * d->v.seq + x];
                        oa[x] += w * fabs((double)V[j * d->v.seq + x]);
                    }
                }
                double p_rel, o_rel, lse_abs;
                ref_row_tolerance(dk, r.nvis[row], r.s_abs[row], r.lse[row], &p_rel, &o_rel,
                                  &lse_abs);
                /* Z in fp32 (one rounding) and the product: 2 u more. */
                p_rel += 3 * U;
                o_rel += 3 * U;
                const float *O = view_at(a->o, &d->o, b, h, i);
                for (int64_t x = 0; x < dv; x++) {
                    const double e = fabs((double)O[x] - o[x]), tol = o_rel * oa[x] + REF_TINY;
                    if (e > st->err_o) st->err_o = e;
                    if (e / tol > st->ratio) st->ratio = e / tol;
                    if (!(e <= tol) && bad++ < 5)
                        printf("O(%lld,%lld,%lld,%lld) %.9g want %.9g\n", (long long)b,
                               (long long)h, (long long)i, (long long)x, O[x], o[x]);
                }
                if (d->want_lse) {
                    const float L = *view_at(a->lse, &d->lse, b, h, i);
                    if (r.lse[row] == -INFINITY) {
                        if (L != -INFINITY && bad++ < 5)
                            printf("lse(%lld,%lld,%lld) %g want -inf\n", (long long)b,
                                   (long long)h, (long long)i, L);
                    } else {
                        const double e = fabs((double)L - r.lse[row]);
                        if (e > st->err_lse) st->err_lse = e;
                        if (!(e <= lse_abs) && bad++ < 5)
                            printf("lse(%lld,%lld,%lld) %.9g want %.9g\n", (long long)b,
                                   (long long)h, (long long)i, L, r.lse[row]);
                    }
                }
                if (d->want_probs) {
                    const float *PR = view_at(a->probs, &d->probs, b, h, i);
                    for (int64_t j = 0; j < m; j++) {
                        const int kp = tdrop_keep(&td, (uint64_t)b, (uint64_t)h, (uint64_t)i,
                                                  (uint64_t)j);
                        const double want = kp ? P[j] * td.z : 0.0;
                        const double e = fabs((double)PR[j] - want);
                        const double tol = kp ? p_rel * want + REF_TINY : 0.0;
                        if (e > st->err_p) st->err_p = e;
                        if (!(e <= tol) && bad++ < 5)
                            printf("P(%lld,%lld,%lld,%lld) %.9g want %.9g keep %d\n",
                                   (long long)b, (long long)h, (long long)i, (long long)j, PR[j],
                                   want, kp);
                    }
                }
            }
    st->cases++;
    free(o);
    free(oa);
    free(r.p);
    free(r.lse);
    free(r.s_abs);
    free(r.nvis);
    return bad;
}

static attn_status run(tinst *t)
{
    tinst_clear_outputs(t);
    return attn_sdpa(&t->desc, &t->args);
}

typedef struct fcase {
    const char *name;
    tcase c;
    double p;
} fcase;

static tcase mk(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk, int64_t dv,
                uint64_t seed)
{
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.want_probs = 1;
    c.want_lse = 1;
    c.seed = seed;
    return c;
}

static size_t fwd_cases(fcase *fc)
{
    size_t k = 0;
    tcase c;

    c = mk(2, 4, 2, 37, 53, 16, 24, 1);
    fc[k++] = (fcase){ "bhsd gqa", c, 0.3 };

    c = mk(2, 3, 3, 20, 70, 8, 8, 2);
    c.layout = LAY_BSHD;
    c.out_layout = OUT_BSHD;
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    fc[k++] = (fcase){ "bshd causal bottom-right", c, 0.5 };

    c = mk(3, 4, 1, 29, 41, 12, 10, 3);
    c.layout = LAY_PADDED;
    c.out_layout = OUT_PADDED;
    c.misalign = 1;
    c.use_kv_lens = c.use_q_lens = 1;
    c.kv_lens[0] = 41; c.kv_lens[1] = 17; c.kv_lens[2] = 1;
    c.q_lens[0] = 29; c.q_lens[1] = 5; c.q_lens[2] = 20;
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.mask_bcast = BC_HEAD;
    c.use_bias = 1;
    c.bias_bcast = BC_BATCH;
    c.bias_ninf = 0.1;
    c.poison = 1;
    fc[k++] = (fcase){ "padded, lengths, mask, bias", c, 0.1 };

    c = mk(2, 2, 2, 33, 33, 16, 16, 4);
    c.layout = LAY_PACKED;
    c.wl = 5;
    c.wr = 3;
    c.mask_mode = ATTN_MASK_DROP_NONZERO;
    c.mask_keep = 0.8;
    fc[k++] = (fcase){ "packed, window, drop mask", c, 0.9 };

    c = mk(2, 8, 2, 8, 2000, 40, 24, 5);
    fc[k++] = (fcase){ "split-K, GQA stacked", c, 0.2 };

    c = mk(1, 8, 1, 1, 3000, 32, 32, 6);
    c.want_probs = 0;
    fc[k++] = (fcase){ "split-K MQA decode", c, 0.6 };

    c = mk(3, 4, 1, 33, 1500, 8, 8, 7);
    c.use_kv_lens = 1;
    c.kv_lens[0] = 1500; c.kv_lens[1] = 700; c.kv_lens[2] = 3;
    fc[k++] = (fcase){ "split-K, kv lengths", c, 0.35 };

    c = mk(2, 8, 2, 100, 300, 32, 32, 8);
    fc[k++] = (fcase){ "GQA stacking", c, 0.4 };

    c = mk(1, 6, 2, 1, 700, 16, 8, 9);
    c.want_probs = 0;
    fc[k++] = (fcase){ "GQA stacking decode", c, 0.5 };

    c = mk(1, 2, 1, 600, 700, 16, 16, 10);
    c.wr = 0;
    fc[k++] = (fcase){ "causal, several blocks and tiles", c, 0.25 };

    c = mk(1, 2, 2, 130, 1100, 8, 8, 11);
    c.wl = 300;
    c.wr = 40;
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.use_bias = 1;
    fc[k++] = (fcase){ "window over tiles, bias", c, 0.75 };

    c = mk(2, 2, 1, 19, 23, 8, 8, 12);
    c.wr = 0;
    fc[k++] = (fcase){ "p = 1", c, 1.0 };

    c = mk(1, 8, 1, 2, 2100, 16, 16, 13);
    fc[k++] = (fcase){ "p = 1 split-K", c, 1.0 };
    return k;
}

static void test_forward(void **state)
{
    (void)state;
    fcase fc[32];
    const size_t nc = fwd_cases(fc);
    fstat st;
    memset(&st, 0, sizeof st);
    const int maxthr = tquick() ? 2 : 4;
    for (size_t x = 0; x < nc; x++) {
        tinst t;
        assert_int_equal(tinst_build(&t, &fc[x].c), 0);
        t.desc.dropout_p = fc[x].p;
        t.desc.dropout_seed = 0x5eed0000ull + x * 0x100000001ull;
        t.desc.dropout_offset = x % 2 ? 0xabcdef0123ull * x : x;
        t.desc.threads = 1;
        assert_int_equal(run(&t), ATTN_OK);
        long bad = check_fwd(&t, &st);
        if (bad)
            printf("FAIL %s: %ld bad (%s)\n", fc[x].name, bad, tcase_str(&t.c));
        assert_int_equal(bad, 0);
        if (fc[x].p == 1.0 && t.desc.want_lse)
            for (int64_t b = 0; b < t.desc.batch; b++)
                assert_true(isfinite(*view_at(t.args.lse, &t.desc.lse, b, 0, 0)));
        tsnap base;
        tsnap_take(&base, &t);
        for (int th = 2; th <= maxthr; th++) {
            t.desc.threads = th;
            assert_int_equal(run(&t), ATTN_OK);
            tsnap s;
            tsnap_take(&s, &t);
            if (!tsnap_equal(&base, &s))
                printf("FAIL %s: threads %d differ from 1\n", fc[x].name, th);
            assert_true(tsnap_equal(&base, &s));
            tsnap_free(&s);
        }
        /* The decisions do not depend on whether P is asked for. */
        if (t.desc.want_probs) {
            t.desc.threads = 1;
            t.desc.want_probs = 0;
            float *pr = t.args.probs;
            t.args.probs = NULL;
            assert_int_equal(run(&t), ATTN_OK);
            tsnap s;
            tsnap_take(&s, &t);
            assert_true(tsnap_equal_o(&base, &s));
            tsnap_free(&s);
            t.args.probs = pr;
            t.desc.want_probs = 1;
        }
        tsnap_free(&base);
        tinst_free(&t);
    }
    printf("[accuracy] dropout forward: %d cases, max |err| O %.3g P %.3g lse %.3g, "
           "max err/tol %.3g\n", st.cases, st.err_o, st.err_p, st.err_lse, st.ratio);
}

/* p = 0 is the path without dropout, bit for bit, whatever seed and offset
 * say; a tiny p that keeps everything (threshold 2^32) with Z = 1 in fp32
 * computes the same numbers through the dropout path. */
static void test_p_zero_bitwise(void **state)
{
    (void)state;
    fcase fc[32];
    const size_t nc = fwd_cases(fc);
    for (size_t x = 0; x < nc; x++) {
        tinst t;
        assert_int_equal(tinst_build(&t, &fc[x].c), 0);
        assert_int_equal(run(&t), ATTN_OK);
        tsnap base;
        tsnap_take(&base, &t);
        const uint64_t seeds[][2] = { { 1, 2 }, { UINT64_MAX, UINT64_MAX } };
        for (int s = 0; s < 2; s++) {
            t.desc.dropout_p = 0.0;
            t.desc.dropout_seed = seeds[s][0];
            t.desc.dropout_offset = seeds[s][1];
            assert_int_equal(run(&t), ATTN_OK);
            tsnap sn;
            tsnap_take(&sn, &t);
            assert_true(tsnap_equal(&base, &sn));
            tsnap_free(&sn);
        }
        t.desc.dropout_p = 1e-12;
        assert_int_equal(run(&t), ATTN_OK);
        tsnap sn;
        tsnap_take(&sn, &t);
        assert_true(tsnap_equal(&base, &sn));
        tsnap_free(&sn);
        tsnap_free(&base);
        tinst_free(&t);
    }
}

/* ------------------------------------------------------------- backward */

/* A dense float64 problem: Q [B][Hq][n][dk], K [B][Hkv][m][dk], V
 * [B][Hkv][m][dv], bias [B][Hq][n][m] (optional), causal top-left, key
 * lengths; Z [B][Hq][n][m] = keep / (1 - p), held fixed. */
typedef struct dprob {
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int causal, use_bias;
    const int32_t *kvlen;   /* NULL: m */
    double scale;
    const double *Z;
} dprob;

static int dvis(const dprob *c, int64_t b, int64_t i, int64_t j)
{
    if (c->causal && j > i)
        return 0;
    return j < (c->kvlen ? c->kvlen[b] : c->m);
}

/* P (undropped), lse, O = (P Z) V. */
static void d_forward(const dprob *c, const double *Q, const double *K, const double *V,
                      const double *bias, double *P, double *lse, double *O)
{
    const int64_t g = c->Hq / c->Hkv, n = c->n, m = c->m, dk = c->dk, dv = c->dv;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++) {
            const double *Kb = K + (b * c->Hkv + h / g) * m * dk;
            const double *Vb = V + (b * c->Hkv + h / g) * m * dv;
            for (int64_t i = 0; i < n; i++) {
                const int64_t row = (b * c->Hq + h) * n + i;
                double *Pr = P + row * m, mx = -INFINITY;
                for (int64_t j = 0; j < m; j++) {
                    if (!dvis(c, b, i, j)) {
                        Pr[j] = -INFINITY;
                        continue;
                    }
                    double s = 0;
                    for (int64_t x = 0; x < dk; x++)
                        s += Q[row * dk + x] * Kb[j * dk + x];
                    s = s * c->scale + (c->use_bias ? bias[row * m + j] : 0.0);
                    Pr[j] = s;
                    if (s > mx) mx = s;
                }
                double sum = 0;
                for (int64_t j = 0; j < m; j++)
                    sum += Pr[j] == -INFINITY ? 0.0 : exp(Pr[j] - mx);
                lse[row] = mx + log(sum);
                for (int64_t j = 0; j < m; j++)
                    Pr[j] = Pr[j] == -INFINITY ? 0.0 : exp(Pr[j] - lse[row]);
                for (int64_t x = 0; x < dv; x++) {
                    double acc = 0;
                    for (int64_t j = 0; j < m; j++)
                        acc += Pr[j] * c->Z[row * m + j] * Vb[j * dv + x];
                    O[row * dv + x] = acc;
                }
            }
        }
}

/* The analytic gradients of L = sum(dO * O) with Z fixed:
 *   D_i = dO_i . O_i;  dV_j = sum_i P_ij Z_ij dO_i;  dP'_ij = dO_i . V_j
 *   dS_ij = P_ij (Z_ij dP'_ij - D_i);  dQ = scale dS K;  dK = scale dS^T Q;
 *   dBias = dS;  K/V gradients summed over the GQA group. */
static void d_backward(const dprob *c, const double *Q, const double *K, const double *V,
                       const double *P, const double *O, const double *dO, double *dQ,
                       double *dK, double *dV, double *dB)
{
    const int64_t g = c->Hq / c->Hkv, n = c->n, m = c->m, dk = c->dk, dv = c->dv;
    memset(dQ, 0, (size_t)(c->B * c->Hq * n * dk) * sizeof(double));
    memset(dK, 0, (size_t)(c->B * c->Hkv * m * dk) * sizeof(double));
    memset(dV, 0, (size_t)(c->B * c->Hkv * m * dv) * sizeof(double));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++) {
            const int64_t kv = b * c->Hkv + h / g;
            for (int64_t i = 0; i < n; i++) {
                const int64_t row = (b * c->Hq + h) * n + i;
                double D = 0;
                for (int64_t x = 0; x < dv; x++)
                    D += dO[row * dv + x] * O[row * dv + x];
                for (int64_t j = 0; j < m; j++) {
                    const double p = P[row * m + j], z = c->Z[row * m + j];
                    double dpp = 0;
                    for (int64_t x = 0; x < dv; x++) {
                        dpp += dO[row * dv + x] * V[(kv * m + j) * dv + x];
                        dV[(kv * m + j) * dv + x] += p * z * dO[row * dv + x];
                    }
                    const double ds = p * (z * dpp - D);
                    if (dB)
                        dB[row * m + j] = ds;
                    for (int64_t x = 0; x < dk; x++) {
                        dQ[row * dk + x] += c->scale * ds * K[(kv * m + j) * dk + x];
                        dK[(kv * m + j) * dk + x] += c->scale * ds * Q[row * dk + x];
                    }
                }
            }
        }
}

static double d_loss(const dprob *c, const double *Q, const double *K, const double *V,
                     const double *bias, const double *dO, double *P, double *lse, double *O)
{
    d_forward(c, Q, K, V, bias, P, lse, O);
    double L = 0;
    for (int64_t e = 0; e < c->B * c->Hq * c->n * c->dv; e++)
        L += dO[e] * O[e];
    return L;
}

static double *dalloc(int64_t count)
{
    double *p = calloc((size_t)count, sizeof(double));
    assert_non_null(p);
    return p;
}

static void fill_z(const dprob *c, double p, uint64_t seed, uint64_t off, double *Z)
{
    const tdrop t = tdrop_make(p, seed, off);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->n; i++)
                for (int64_t j = 0; j < c->m; j++)
                    Z[((b * c->Hq + h) * c->n + i) * c->m + j] =
                        tdrop_keep(&t, (uint64_t)b, (uint64_t)h, (uint64_t)i, (uint64_t)j) ? t.z
                                                                                           : 0.0;
}

/* The float64 reference backward against central finite differences of
 * its own forward, the mask held fixed (in double, tiny shape). */
static void test_reference_backward_fd(void **state)
{
    (void)state;
    const int32_t kvlen[2] = { 7, 4 };
    dprob c = { 2, 4, 2, 5, 7, 4, 3, 1, 1, kvlen, 0.6, NULL };
    const int64_t nq = c.B * c.Hq * c.n, nk = c.B * c.Hkv * c.m;
    double *Q = dalloc(nq * c.dk), *K = dalloc(nk * c.dk), *V = dalloc(nk * c.dv);
    double *bias = dalloc(nq * c.m), *dO = dalloc(nq * c.dv), *Z = dalloc(nq * c.m);
    double *P = dalloc(nq * c.m), *lse = dalloc(nq), *O = dalloc(nq * c.dv);
    double *dQ = dalloc(nq * c.dk), *dK = dalloc(nk * c.dk), *dV = dalloc(nk * c.dv);
    double *dB = dalloc(nq * c.m);
    trng r;
    trng_seed(&r, 99);
    for (int64_t e = 0; e < nq * c.dk; e++) Q[e] = trng_uniform(&r, -1, 1);
    for (int64_t e = 0; e < nk * c.dk; e++) K[e] = trng_uniform(&r, -1, 1);
    for (int64_t e = 0; e < nk * c.dv; e++) V[e] = trng_uniform(&r, -1, 1);
    for (int64_t e = 0; e < nq * c.m; e++) bias[e] = trng_uniform(&r, -1, 1);
    for (int64_t e = 0; e < nq * c.dv; e++) dO[e] = trng_uniform(&r, -1, 1);
    fill_z(&c, 0.4, 5, 6, Z);
    c.Z = Z;
    d_loss(&c, Q, K, V, bias, dO, P, lse, O);
    d_backward(&c, Q, K, V, P, O, dO, dQ, dK, dV, dB);
    struct { double *x, *g; int64_t count; const char *name; } T[] = {
        { Q, dQ, nq * c.dk, "Q" }, { K, dK, nk * c.dk, "K" }, { V, dV, nk * c.dv, "V" },
        { bias, dB, nq * c.m, "bias" },
    };
    double worst = 0;
    for (size_t t = 0; t < 4; t++)
        for (int64_t e = 0; e < T[t].count; e++) {
            const double keep = T[t].x[e], hstep = 1e-5;
            T[t].x[e] = keep + hstep;
            const double lp = d_loss(&c, Q, K, V, bias, dO, P, lse, O);
            T[t].x[e] = keep - hstep;
            const double lm = d_loss(&c, Q, K, V, bias, dO, P, lse, O);
            T[t].x[e] = keep;
            const double fd = (lp - lm) / (2 * hstep), err = fabs(fd - T[t].g[e]);
            if (err > worst) worst = err;
            if (!(err <= 1e-7 * (1 + fabs(fd))))
                printf("FD %s[%lld]: %.12g analytic %.12g\n", T[t].name, (long long)e, fd,
                       T[t].g[e]);
            assert_true(err <= 1e-7 * (1 + fabs(fd)));
        }
    printf("[accuracy] float64 dropout backward vs central differences: max |err| %.3g\n", worst);
    free(Q); free(K); free(V); free(bias); free(dO); free(Z); free(P); free(lse); free(O);
    free(dQ); free(dK); free(dV); free(dB);
}

typedef struct bcase {
    const char *name;
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int causal, use_bias, use_kvlen;
    double p;
} bcase;

static attn_view bhsd(int64_t H, int64_t S, int64_t D)
{
    attn_view v = { H * S * D, S * D, D };
    return v;
}

static double maxabs_d(const double *x, int64_t count)
{
    double mx = 0;
    for (int64_t e = 0; e < count; e++)
        if (fabs(x[e]) > mx) mx = fabs(x[e]);
    return mx;
}

/* max |lib - ref| / max |ref| */
static double normwise(const float *lib, const double *ref, int64_t count)
{
    double e = 0;
    for (int64_t k = 0; k < count; k++) {
        double d = fabs((double)lib[k] - ref[k]);
        if (!(d <= e)) e = d;
    }
    const double s = maxabs_d(ref, count);
    return s > 0 ? e / s : e;
}

static void test_backward(void **state)
{
    (void)state;
    const bcase cases[] = {
        { "small gqa causal bias lengths", 2, 4, 2, 9, 13, 8, 8, 1, 1, 1, 0.3 },
        { "tiles: n > 64, m > 256", 1, 2, 1, 70, 300, 16, 12, 0, 0, 0, 0.5 },
        { "causal, tiles, gqa", 2, 4, 2, 80, 270, 8, 16, 1, 1, 0, 0.8 },
        { "p = 1", 1, 2, 2, 10, 20, 8, 8, 1, 0, 0, 1.0 },
    };
    const double tol = 2e-5;
    double worst = 0;
    const int maxthr = tquick() ? 2 : 4;
    for (size_t x = 0; x < sizeof cases / sizeof cases[0]; x++) {
        const bcase *bc = &cases[x];
        const int64_t B = bc->B, Hq = bc->Hq, Hkv = bc->Hkv, n = bc->n, m = bc->m, dk = bc->dk,
                      dv = bc->dv;
        const int64_t nq = B * Hq * n, nk = B * Hkv * m;
        int32_t kvlen[4] = { (int32_t)m, (int32_t)(m / 2 + 1), 1, (int32_t)m };
        float *q = malloc((size_t)(nq * dk) * 4), *k = malloc((size_t)(nk * dk) * 4);
        float *v = malloc((size_t)(nk * dv) * 4), *bias = malloc((size_t)(nq * m) * 4);
        float *o = malloc((size_t)(nq * dv) * 4), *lse = malloc((size_t)nq * 4);
        float *dO = malloc((size_t)(nq * dv) * 4), *dq = malloc((size_t)(nq * dk) * 4);
        float *dk_ = malloc((size_t)(nk * dk) * 4), *dv_ = malloc((size_t)(nk * dv) * 4);
        float *db = malloc((size_t)(nq * m) * 4);
        assert_true(q && k && v && bias && o && lse && dO && dq && dk_ && dv_ && db);
        trng r;
        trng_seed(&r, 1000 + x);
        for (int64_t e = 0; e < nq * dk; e++) q[e] = (float)trng_uniform(&r, -1, 1);
        for (int64_t e = 0; e < nk * dk; e++) k[e] = (float)trng_uniform(&r, -1, 1);
        for (int64_t e = 0; e < nk * dv; e++) v[e] = (float)trng_uniform(&r, -1, 1);
        for (int64_t e = 0; e < nq * m; e++) bias[e] = (float)trng_uniform(&r, -1, 1);
        for (int64_t e = 0; e < nq * dv; e++) dO[e] = (float)trng_uniform(&r, -1, 1);

        attn_sdpa_bwd_desc bd;
        attn_sdpa_bwd_desc_init(&bd);
        attn_sdpa_desc *f = &bd.fwd;
        f->batch = B; f->q_heads = Hq; f->kv_heads = Hkv; f->q_len = n; f->kv_len = m;
        f->qk_dim = dk; f->v_dim = dv;
        f->q = bhsd(Hq, n, dk); f->k = bhsd(Hkv, m, dk); f->v = bhsd(Hkv, m, dv);
        f->o = bhsd(Hq, n, dv);
        f->lse = bhsd(Hq, n, 1);
        f->want_lse = 1;
        f->window_right = bc->causal ? 0 : -1;
        f->use_bias = bc->use_bias;
        if (bc->use_bias) f->bias = bhsd(Hq, n, m);
        f->use_kv_lens = bc->use_kvlen;
        f->dropout_p = bc->p;
        f->dropout_seed = 0xd00d + x;
        f->dropout_offset = 0x100000000ull * x + 3;
        f->threads = 1;
        bd.d_o = bhsd(Hq, n, dv); bd.dq = bhsd(Hq, n, dk);
        bd.dk = bhsd(Hkv, m, dk); bd.dv = bhsd(Hkv, m, dv);
        bd.want_dbias = bc->use_bias;
        if (bc->use_bias) bd.dbias = bhsd(Hq, n, m);

        attn_sdpa_args fa;
        memset(&fa, 0, sizeof fa);
        fa.q = q; fa.k = k; fa.v = v; fa.o = o; fa.lse = lse;
        fa.bias = bc->use_bias ? bias : NULL;
        fa.kv_lens = bc->use_kvlen ? kvlen : NULL;
        assert_int_equal(attn_sdpa(f, &fa), ATTN_OK);

        attn_sdpa_bwd_args ba;
        memset(&ba, 0, sizeof ba);
        ba.q = q; ba.k = k; ba.v = v; ba.o = o; ba.d_o = dO; ba.lse = lse;
        ba.bias = fa.bias; ba.kv_lens = fa.kv_lens;
        ba.dq = dq; ba.dk = dk_; ba.dv = dv_; ba.dbias = bc->use_bias ? db : NULL;
        assert_int_equal(attn_sdpa_backward(&bd, &ba), ATTN_OK);

        /* float64 reference on the same (float) inputs */
        dprob c = { B, Hq, Hkv, n, m, dk, dv, bc->causal, bc->use_bias,
                    bc->use_kvlen ? kvlen : NULL, 1.0 / sqrt((double)dk), NULL };
        double *Q = dalloc(nq * dk), *K = dalloc(nk * dk), *V = dalloc(nk * dv);
        double *BI = dalloc(nq * m), *DO = dalloc(nq * dv), *Z = dalloc(nq * m);
        double *P = dalloc(nq * m), *LSE = dalloc(nq), *O = dalloc(nq * dv);
        double *DQ = dalloc(nq * dk), *DK = dalloc(nk * dk), *DV = dalloc(nk * dv);
        double *DB = dalloc(nq * m);
        for (int64_t e = 0; e < nq * dk; e++) Q[e] = q[e];
        for (int64_t e = 0; e < nk * dk; e++) K[e] = k[e];
        for (int64_t e = 0; e < nk * dv; e++) V[e] = v[e];
        for (int64_t e = 0; e < nq * m; e++) BI[e] = bias[e];
        for (int64_t e = 0; e < nq * dv; e++) DO[e] = dO[e];
        fill_z(&c, bc->p, f->dropout_seed, f->dropout_offset, Z);
        c.Z = Z;
        d_forward(&c, Q, K, V, BI, P, LSE, O);
        d_backward(&c, Q, K, V, P, O, DO, DQ, DK, DV, bc->use_bias ? DB : NULL);

        const double eo = normwise(o, O, nq * dv), eq = normwise(dq, DQ, nq * dk),
                     ek = normwise(dk_, DK, nk * dk), ev = normwise(dv_, DV, nk * dv),
                     eb = bc->use_bias ? normwise(db, DB, nq * m) : 0.0;
        double el = 0;
        for (int64_t e = 0; e < nq; e++)
            el = fmax(el, fabs(lse[e] - LSE[e]));
        printf("[accuracy] dropout backward %s (p %.2f): O %.2g lse %.2g dQ %.2g dK %.2g dV %.2g "
               "dBias %.2g (max |err| / max |ref|)\n", bc->name, bc->p, eo, el, eq, ek, ev, eb);
        worst = fmax(worst, fmax(fmax(eq, ek), fmax(ev, eb)));
        assert_true(eo <= tol && el <= 1e-5);
        assert_true(eq <= tol && ek <= tol && ev <= tol && eb <= tol);
        if (bc->p == 1.0)
            for (int64_t e = 0; e < nk * dv; e++)
                assert_true(dv_[e] == 0.0f);

        /* thread counts: the same bits */
        const int64_t sizes[4] = { nq * dk, nk * dk, nk * dv, nq * m };
        float *outs[4] = { dq, dk_, dv_, db };
        float *copy[4];
        for (int w = 0; w < 4; w++) {
            copy[w] = malloc((size_t)sizes[w] * 4);
            memcpy(copy[w], outs[w], (size_t)sizes[w] * 4);
        }
        for (int th = 2; th <= maxthr; th++) {
            f->threads = th;
            for (int w = 0; w < 4; w++)
                memset(outs[w], 0x7f, (size_t)sizes[w] * 4);
            assert_int_equal(attn_sdpa_backward(&bd, &ba), ATTN_OK);
            for (int w = 0; w < (bc->use_bias ? 4 : 3); w++)
                assert_memory_equal(copy[w], outs[w], (size_t)sizes[w] * 4);
        }
        for (int w = 0; w < 4; w++)
            free(copy[w]);
        free(Q); free(K); free(V); free(BI); free(DO); free(Z); free(P); free(LSE); free(O);
        free(DQ); free(DK); free(DV); free(DB);
        free(q); free(k); free(v); free(bias); free(o); free(lse); free(dO); free(dq);
        free(dk_); free(dv_); free(db);
    }
    printf("[accuracy] dropout backward: worst gradient error %.3g (tolerance %.1g)\n", worst,
           tol);
}

/* --------------------------------------------------------------- errors */

static attn_sdpa_desc tiny_desc(void)
{
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = d.q_heads = d.kv_heads = 1;
    d.q_len = d.kv_len = 4;
    d.qk_dim = d.v_dim = 2;
    d.q = d.k = d.v = d.o = bhsd(1, 4, 2);
    return d;
}

static void test_desc_errors(void **state)
{
    (void)state;
    const double bad[] = { -0.1, -1e-300, 1.0000001, 2.0, NAN, -NAN, INFINITY, -INFINITY };
    const double good[] = { 0.0, -0.0, 1e-300, 0.5, 1.0 };
    attn_sdpa_plan *plan = NULL;
    attn_sdpa_bwd_plan *bplan = NULL;
    for (size_t x = 0; x < sizeof bad / sizeof bad[0]; x++) {
        attn_sdpa_desc d = tiny_desc();
        d.dropout_p = bad[x];
        assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_ERR_BAD_OPTION);
        attn_sdpa_bwd_desc bd;
        attn_sdpa_bwd_desc_init(&bd);
        bd.fwd = d;
        bd.fwd.want_lse = 1;
        bd.fwd.lse = bhsd(1, 4, 1);
        bd.d_o = bd.dq = bd.dk = bd.dv = bhsd(1, 4, 2);
        assert_int_equal(attn_sdpa_bwd_plan_create(&bplan, &bd), ATTN_ERR_BAD_OPTION);
    }
    for (size_t x = 0; x < sizeof good / sizeof good[0]; x++) {
        attn_sdpa_desc d = tiny_desc();
        d.dropout_p = good[x];
        d.dropout_seed = UINT64_MAX;
        d.dropout_offset = UINT64_MAX;
        assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
        attn_sdpa_plan_destroy(plan);
    }
    /* The counter holds b and h in 32 bits: B or Hq past 2^32 with p > 0
     * is TOO_LARGE (overlapping input views make such a desc valid). */
    const int64_t L = (int64_t)1 << 32;
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = L + 1;
    d.q_heads = d.kv_heads = 1;
    d.q_len = d.kv_len = d.qk_dim = d.v_dim = 1;
    const attn_view one = { 1, 1, 1 };
    d.q = d.k = d.v = d.o = one;
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
    attn_sdpa_plan_destroy(plan);
    d.dropout_p = 0.5;
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_ERR_TOO_LARGE);
    d.batch = L;
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
    attn_sdpa_plan_destroy(plan);
    d.batch = 1;
    d.q_heads = L + 1;
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_ERR_TOO_LARGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_keep_mask_statuses),
        cmocka_unit_test(test_keep_mask_independent),
        cmocka_unit_test(test_keep_mask_raw_draws),
        cmocka_unit_test(test_keep_rates),
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_p_zero_bitwise),
        cmocka_unit_test(test_reference_backward_fd),
        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_desc_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
