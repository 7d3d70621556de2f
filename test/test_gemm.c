/*
 * The tile engine's matrix kernels (lib/kernels/gemm.h: the attn_gemm_kernels
 * tables scalar, avx2, avx512) and the seam over them and the BLAS
 * (lib/core/gemm.c: attn_gemm, attn_gemm_tn).  Every table this CPU runs is
 * checked; a table the CPU lacks (no AVX2+FMA, no AVX-512F) is skipped and
 * the output says so.
 *
 * The contract (gemm.h): every element is one FMA chain in k order from 0,
 * then acc ? fmaf(alpha, s, c) : alpha * s.  So:
 *
 *  mm         over one table of shapes (mm_cases, 154 rows: every M tail of
 *             the 12- and 6-row blocks, every N tail mod 32 and mod 16, the K
 *             edges 0 .. 512; row-major and transposed A; padded leading
 *             dimensions; alpha 1 / 0.37; acc 0 / 1), every check on every
 *             row: the scalar table bit for bit equal to the test's own model
 *             of the contract (fmaf chain), every SIMD table bit for bit equal
 *             to the scalar table over the whole C buffer (the padding
 *             columns and a guard after the last row hold a canary that must
 *             survive; with acc = 0, C holds NaN that must not be read),
 *             results unchanged when the padding of A and B (beyond K / N
 *             within the leading dimension, and a guard after the last row)
 *             is NaN instead of finite values, and the scalar table within
 *             tolerance of a float64 reference:
 *               |err| <= 2^-23 ((K + 1) |alpha| sum_k |a||b| + |c|) + 2^-126
 *             (K roundings of the chain, one of alpha (and C); u = 2^-24 is
 *             doubled for slack).
 *  transpose  N, K in 0..40 and 512x64, 197x64, 64x197, 32x256, 33x256 with
 *             padded leading dimensions: every table bit for bit equal to
 *             bt[x ldt + j] = b[j ldb + x], everything else in bt untouched.
 *  seam       attn_gemm (trans_b 0 / 1) and attn_gemm_tn over a table of
 *             shapes (K up to 777: the K^T panels of at most 256 in pieces)
 *             x beta 0 / 1 / 0.5 x alpha 1 / 0.37, with gk NULL (the BLAS)
 *             and every table: each within tolerance of the float64
 *             reference (the pieces add one rounding each), each table bit
 *             for bit equal to the test's model of the seam (one chain, or
 *             one chain per 256-piece of K added to C when trans_b), the
 *             tables equal to each other over the whole buffer, and
 *             beta = 0.5 (the BLAS fallback) bit for bit equal to gk = NULL.
 *  use_tile   attn_gemm_use_tile: explicit engines, ATTN_ENGINE, ATTN_SIMD;
 *             attn_gemm_select under ATTN_SIMD.
 *
 * Prints `[accuracy] ...` lines with the largest error / tolerance.
 * ATTN_TEST_QUICK=1 (valgrind) drops the mm rows above 2^20 multiply-adds.
 * Links the static library: the kernels and the seam are internal.
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
#include "core/core.h"
#include "kernels/gemm.h"

#define GUARD 64
/* The piece of K of the seam's B^T panels (ATTN_GEMM_KMAX in core/gemm.c). */
#define SEAM_KMAX 256
#define MAX_FAILS 20

static const uint32_t CANARY = 0x7fc5a5a5u;  /* C beyond N; bt outside N x K */
static const uint32_t NOTREAD = 0x7fc0deadu; /* C with acc = 0 / beta = 0 */
static const uint32_t PADNAN = 0x7fc0beefu;  /* A and B padding */

static float fbits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
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
static float frand(void) { return (float)(2.0 * urand() - 1.0); }

static const attn_gemm_kernels *tabs[3];
static int ntabs;
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

static int setup(void **state)
{
    (void)state;
    const char *q = getenv("ATTN_TEST_QUICK");
    quick = q && *q && strcmp(q, "0");
    const char *seed = getenv("ATTN_TEST_SEED");
    if (seed && *seed)
        rng = strtoull(seed, NULL, 0) | 1;
    ntabs = 0;
    tabs[ntabs++] = &attn_gemm_scalar;
    printf("gemm tables checked: scalar");
#if ATTN_HAVE_X86_KERNELS
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const int avx512 = __builtin_cpu_supports("avx512f");
    if (avx2)
        tabs[ntabs++] = &attn_gemm_avx2;
    if (avx512)
        tabs[ntabs++] = &attn_gemm_avx512;
    printf("%s%s", avx2 ? " avx2" : "", avx512 ? " avx512" : "");
    if (!avx2)
        printf("; SKIPPED avx2 (CPU lacks AVX2/FMA)");
    if (!avx512)
        printf("; SKIPPED avx512 (CPU lacks AVX-512F)");
#else
    printf("; no x86 SIMD tables in this build");
#endif
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------------ */
/* A rows x cols matrix in a buffer of leading dimension ld, with GUARD
 * floats after the last row. */
typedef struct mat {
    float *p;
    int64_t rows, cols, ld;
    size_t n;
} mat;

static mat mat_new(int64_t rows, int64_t cols, int64_t ld)
{
    mat m = { NULL, rows, cols, ld, (size_t)(rows * ld) + GUARD };
    m.p = malloc(m.n * sizeof *m.p);
    assert_non_null(m.p);
    return m;
}

static void mat_data(mat *m)
{
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            m->p[r * m->ld + c] = frand();
}

/* Everything outside the rows x cols matrix: NaN (nan) or finite values. */
static void mat_pad(mat *m, int nan)
{
    for (size_t i = 0; i < m->n; i++) {
        if (i < (size_t)(m->rows * m->ld) && (int64_t)i % m->ld < m->cols)
            continue;
        m->p[i] = nan ? fbits(PADNAN) : frand();
    }
}

/* C: inside = random (acc) or NOTREAD, outside CANARY. */
static void mat_c(mat *m, int inside_random)
{
    for (size_t i = 0; i < m->n; i++)
        m->p[i] = fbits(CANARY);
    for (int64_t r = 0; r < m->rows; r++)
        for (int64_t c = 0; c < m->cols; c++)
            m->p[r * m->ld + c] = inside_random ? frand() : fbits(NOTREAD);
}

static float *dup(const mat *m)
{
    float *p = malloc(m->n * sizeof *p);
    assert_non_null(p);
    memcpy(p, m->p, m->n * sizeof *p);
    return p;
}

/* Max err / tol of C (M x N, ldc) against the float64 reference
 * alpha * A op B + beta C0; A(r, k) = a[r ars + k aks], B(k, j) =
 * b[k bks + j bjs].  extra: roundings beyond the chain's K + 1 (pieces). */
typedef struct acc_stat {
    double max_ratio, max_err;
    long elems;
} acc_stat;

static double check_ref(const char *what, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *rs, const float *a, int64_t ars, int64_t aks,
                        const float *b, int64_t bks,
                        int64_t bjs, float beta, const float *c0, const float *c, int64_t ldc,
                        int extra, acc_stat *st)
{
    double worst = 0;
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)a[r * ars + k * aks] * (double)b[k * bks + j * bjs];
                s += p;
                sa += fabs(p);
            }
            const double cin = beta != 0.0f ? (double)beta * (double)c0[r * ldc + j] : 0.0;
            const double al = rs ? (double)rs[r] : (double)alpha;
            const double ref = al * s + cin;
            const double tol = ldexp(1.0, -23) * ((double)(K + 1 + extra) * fabs(al) * sa +
                                                  (1 + extra) * fabs(cin)) +
                               ldexp(1.0, -126);
            const double got = c[r * ldc + j];
            const double err = fabs(got - ref);
            const double ratio = err / tol;
            if (!(ratio <= 1.0))
                fail_note("%s: element (%lld, %lld) = %.9g, reference %.9g, err %.3g > tol %.3g",
                          what, (long long)r, (long long)j, got, ref, err, tol);
            if (isnan(ratio) || ratio > worst)
                worst = isnan(ratio) ? INFINITY : ratio;
            if (isnan(err) || err > st->max_err)
                st->max_err = isnan(err) ? INFINITY : err;
            st->elems++;
        }
    if (worst > st->max_ratio)
        st->max_ratio = worst;
    return worst;
}

/* The contract, written from gemm.h: one fmaf chain in k order from 0 per
 * piece of at most kmax of K (kmax = K: one piece), each piece then
 * acc ? fmaf(alpha_r, s, c) : alpha_r * s, acc = 1 after the first, with
 * alpha_r = rs ? rs[r] : alpha. */
static void model(int64_t M, int64_t N, int64_t K, int64_t kmax, float alpha, const float *rs,
                  const float *a, int64_t ars, int64_t aks, const float *b, int64_t bks,
                  int64_t bjs, float *c, int64_t ldc, int acc0)
{
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            const float al = rs ? rs[r] : alpha;
            float v = c[r * ldc + j];
            int acc = acc0;
            int64_t k0 = 0;
            do {
                const int64_t k1 = K - k0 < kmax ? K : k0 + kmax;
                float s = 0.0f;
                for (int64_t k = k0; k < k1; k++)
                    s = fmaf(a[r * ars + k * aks], b[k * bks + j * bjs], s);
                v = acc ? fmaf(al, s, v) : al * s;
                acc = 1;
                k0 += kmax;
            } while (k0 < K);
            c[r * ldc + j] = v;
        }
}

/* First differing float of two buffers, -1 if none. */
static long first_diff(const float *x, const float *y, size_t n)
{
    if (!memcmp(x, y, n * sizeof *x))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (memcmp(x + i, y + i, sizeof *x))
            return (long)i;
    return -1;
}

/* ------------------------------------------------------------------ */
/* mm: the table of cases */

static const int MS[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 24, 25, 37, 64, 97 };
/* 1..33 gives every tail mod 32 and mod 16 (18..30 added to the brief's
 * 1..17, 31..33: no other value of it ends a 32-column block there), then
 * longer rows. */
static const int NS[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13,
                          14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
                          27, 28, 29, 30, 31, 32, 33, 47, 64, 100, 513 };
static const int KS[] = { 0, 1, 2, 7, 16, 64, 255, 256, 300, 512 };
static const int PADS[] = { 0, 1, 2, 3, 5, 8, 16, 17, 31 };
#define NMS ((int)(sizeof MS / sizeof *MS))
#define NNS ((int)(sizeof NS / sizeof *NS))
#define NKS ((int)(sizeof KS / sizeof *KS))
#define NPADS ((int)(sizeof PADS / sizeof *PADS))
#define N_CYCLED 150
/* then a few large rows: many full blocks in both directions and a tail */
static const int BIG[][3] = { { 97, 513, 300 }, { 97, 100, 512 }, { 64, 513, 255 }, { 37, 47, 512 } };
#define N_MM (N_CYCLED + (int)(sizeof BIG / sizeof *BIG))

typedef struct mm_case {
    int M, N, K;
    int at;       /* A transposed in place: ars = 1, aks = lda */
    int pa, pb, pc; /* leading-dimension padding of A, B, C */
    float alpha;
    int acc;
    int rs;       /* one factor per row (rs[r]) instead of alpha */
} mm_case;

static mm_case mm_cases[N_MM];

/* Row i < N_CYCLED: M, N, K cycle through their lists (lengths 18, 37, 10
 * mix them), then the rows of BIG; the variant bits and the paddings from a generator of its own, so
 * ATTN_TEST_SEED changes the data only. */
static void make_mm_cases(void)
{
    uint64_t g = 0xC0FFEE1234567ull;
    for (int i = 0; i < N_MM; i++) {
        g ^= g << 13;
        g ^= g >> 7;
        g ^= g << 17;
        mm_case *c = &mm_cases[i];
        c->M = i < N_CYCLED ? MS[i % NMS] : BIG[i - N_CYCLED][0];
        c->N = i < N_CYCLED ? NS[i % NNS] : BIG[i - N_CYCLED][1];
        c->K = i < N_CYCLED ? KS[i % NKS] : BIG[i - N_CYCLED][2];
        c->at = (int)(g >> 20) & 1;
        c->alpha = (g >> 21) & 1 ? 0.37f : 1.0f;
        c->acc = (int)(g >> 22) & 1;
        c->rs = (int)(g >> 23) & 1;
        c->pa = PADS[(g >> 24) % NPADS];
        c->pb = PADS[(g >> 32) % NPADS];
        c->pc = PADS[(g >> 40) % NPADS];
    }
}

/* The table covers what the brief of the kernels needs: every last-block
 * height of the 12-row (AVX-512) and 6-row (AVX2) blocks, every last-block
 * width of the 32- and 16-column blocks, every K, both A forms x alpha x acc. */
static void test_mm_coverage(void **state)
{
    (void)state;
    int m12[13] = { 0 }, m6[7] = { 0 }, n32[33] = { 0 }, n16[17] = { 0 }, k[NKS] = { 0 };
    int var[16] = { 0 }, kat[NKS][2] = { { 0 } };
    for (int i = 0; i < N_MM; i++) {
        const mm_case *c = &mm_cases[i];
        m12[(c->M - 1) % 12 + 1]++;
        m6[(c->M - 1) % 6 + 1]++;
        n32[(c->N - 1) % 32 + 1]++;
        n16[(c->N - 1) % 16 + 1]++;
        for (int x = 0; x < NKS; x++)
            if (KS[x] == c->K) {
                k[x]++;
                kat[x][c->at]++;
            }
        var[c->at | (c->alpha != 1.0f) << 1 | c->acc << 2 | c->rs << 3]++;
    }
    for (int t = 1; t <= 12; t++)
        assert_true(m12[t] > 0);
    for (int t = 1; t <= 6; t++)
        assert_true(m6[t] > 0);
    for (int t = 1; t <= 32; t++)
        assert_true(n32[t] > 0);
    for (int t = 1; t <= 16; t++)
        assert_true(n16[t] > 0);
    for (int x = 0; x < NKS; x++) {
        assert_true(k[x] > 0);
        assert_true(kat[x][0] > 0 && kat[x][1] > 0);
    }
    for (int v = 0; v < 16; v++)
        assert_true(var[v] > 0);
    printf("mm table: %d rows; (A form, alpha, acc, per-row factors) variants:", N_MM);
    for (int v = 0; v < 16; v++)
        printf(" %d", var[v]);
    printf("\n");
}

static void test_mm(void **state)
{
    (void)state;
    fails = 0;
    acc_stat st = { 0, 0, 0 };
    int run = 0, skipped = 0;
    for (int i = 0; i < N_MM; i++) {
        const mm_case *cs = &mm_cases[i];
        const int64_t M = cs->M, N = cs->N, K = cs->K;
        if (quick && M * N * K > (1 << 20)) {
            skipped++;
            continue;
        }
        run++;
        /* A(r, k): row-major M x K (lda >= K) or stored K x M (lda >= M). */
        const int64_t lda = (cs->at ? M : K) + cs->pa;
        mat A = cs->at ? mat_new(K, M, lda) : mat_new(M, K, lda);
        const int64_t ars = cs->at ? 1 : lda, aks = cs->at ? lda : 1;
        mat B = mat_new(K, N, N + cs->pb);
        mat C0 = mat_new(M, N, N + cs->pc);
        mat_data(&A);
        mat_data(&B);
        mat_c(&C0, cs->acc);
        /* per-row factors: 1/l-like values, 0, 1 and a negative one */
        float *rs = NULL;
        if (cs->rs) {
            rs = malloc((size_t)M * sizeof(float));
            assert_non_null(rs);
            for (int64_t r = 0; r < M; r++)
                rs[r] = r % 5 == 1 ? 0.0f : r % 5 == 2 ? 1.0f : r % 5 == 3 ? -2.5f
                      : (float)(1.0 / (1.0 + 60.0 * urand()));
        }
        char what[192];
        snprintf(what, sizeof what,
                 "mm row %d (M %lld N %lld K %lld, A %s lda %lld, ldb %lld, ldc %lld, "
                 "%s %g, acc %d)",
                 i, (long long)M, (long long)N, (long long)K, cs->at ? "transposed" : "row-major",
                 (long long)lda, (long long)B.ld, (long long)C0.ld,
                 cs->rs ? "per-row factors, not alpha" : "alpha", cs->alpha, cs->acc);

        /* The second run (NaN padding) also carries a look-ahead stream
         * over B's rows: a hint, so it must change no bit (checked against
         * the first run below), and mm must step it. */
        float *res[2][3];
        for (int nan = 0; nan < 2; nan++) {
            mat_pad(&A, nan);
            mat_pad(&B, nan);
            for (int t = 0; t < ntabs; t++) {
                attn_ahead ah;
                memset(&ah, 0, sizeof ah);
                ah.base[0] = (const char *)B.p;
                ah.ld[0] = B.ld * (int64_t)sizeof(float);
                ah.rows[0] = K;
                ah.bytes[0] = N * (int64_t)sizeof(float);
                ah.ns = K > 0 && N > 0;
                ah.share = 1;
                res[nan][t] = dup(&C0);
                tabs[t]->mm(M, N, K, cs->alpha, rs, A.p, ars, aks, B.p, B.ld, res[nan][t], C0.ld,
                            cs->acc, nan ? &ah : NULL);
                if (nan && ah.ns && M > 0 && !(ah.s || ah.r || ah.x))
                    fail_note("%s: %s did not step its look-ahead stream", what, tabs[t]->name);
            }
        }
        /* the contract (canaries included: the model leaves them) */
        float *want = dup(&C0);
        model(M, N, K, K ? K : 1, cs->alpha, rs, A.p, ars, aks, B.p, B.ld, 1, want, C0.ld,
              cs->acc);
        long d = first_diff(want, res[0][0], C0.n);
        if (d >= 0)
            fail_note("%s: scalar != fmaf-chain model at float %ld (row %ld col %ld): %.9g vs "
                      "%.9g",
                      what, d, d / (long)C0.ld, d % (long)C0.ld, res[0][0][d], want[d]);
        for (int t = 0; t < ntabs; t++) {
            d = first_diff(res[0][0], res[0][t], C0.n);
            if (d >= 0)
                fail_note("%s: %s != scalar at float %ld (row %ld col %ld): %.9g vs %.9g", what,
                          tabs[t]->name, d, d / (long)C0.ld, d % (long)C0.ld, res[0][t][d],
                          res[0][0][d]);
            d = first_diff(res[0][t], res[1][t], C0.n);
            if (d >= 0)
                fail_note("%s: %s changes with NaN in the padding of A / B, float %ld (row %ld "
                          "col %ld): %.9g vs %.9g",
                          what, tabs[t]->name, d, d / (long)C0.ld, d % (long)C0.ld,
                          res[1][t][d], res[0][t][d]);
        }
        check_ref(what, M, N, K, cs->alpha, rs, A.p, ars, aks, B.p, B.ld, 1, cs->acc ? 1.0f : 0.0f,
                  C0.p, res[0][0], C0.ld, 0, &st);
        for (int nan = 0; nan < 2; nan++)
            for (int t = 0; t < ntabs; t++)
                free(res[nan][t]);
        free(want);
        free(rs);
        free(A.p);
        free(B.p);
        free(C0.p);
    }
    if (skipped)
        printf("ATTN_TEST_QUICK: %d large mm rows skipped\n", skipped);
    printf("[accuracy] gemm mm: %d cases x %d tables, %ld elements: max|err| %.3e, "
           "max err/tol %.3f\n",
           run, ntabs, st.elems, st.max_err, st.max_ratio);
    if (fails)
        fail_msg("%d mismatches in mm", fails);
}

/* ------------------------------------------------------------------ */
/* transpose */

static void transpose_one(int64_t N, int64_t K, int *checked)
{
    const int64_t ldb = K + PADS[next() % NPADS], ldt = N + PADS[next() % NPADS];
    mat b = mat_new(N, K, ldb);
    mat_data(&b);
    mat_pad(&b, 1);
    mat t0 = mat_new(K, N, ldt);
    for (size_t i = 0; i < t0.n; i++)
        t0.p[i] = fbits(CANARY);
    for (int t = 0; t < ntabs; t++) {
        float *bt = dup(&t0);
        tabs[t]->transpose(b.p, ldb, N, K, bt, ldt);
        for (size_t i = 0; i < t0.n; i++) {
            /* ldt may be 0 (N = 0, no padding): all guard then */
            const int64_t x = ldt ? (int64_t)i / ldt : K, j = ldt ? (int64_t)i % ldt : N;
            const float want = x < K && j < N ? b.p[j * ldb + x] : fbits(CANARY);
            if (memcmp(&want, bt + i, sizeof want)) {
                fail_note("transpose %s N %lld K %lld ldb %lld ldt %lld: bt[%zu] (x %lld j %lld) "
                          "= %.9g, want %.9g%s",
                          tabs[t]->name, (long long)N, (long long)K, (long long)ldb,
                          (long long)ldt, i, (long long)x, (long long)j, bt[i], want,
                          x < K && j < N ? "" : " (outside: canary)");
                break;
            }
        }
        free(bt);
        (*checked)++;
    }
    free(b.p);
    free(t0.p);
}

static void test_transpose(void **state)
{
    (void)state;
    fails = 0;
    int checked = 0;
    static const int big[][2] = { { 512, 64 }, { 197, 64 }, { 64, 197 }, { 32, 256 }, { 33, 256 } };
    for (int64_t N = 0; N <= 40; N++)
        for (int64_t K = 0; K <= 40; K++)
            transpose_one(N, K, &checked);
    for (size_t s = 0; s < sizeof big / sizeof *big; s++)
        transpose_one(big[s][0], big[s][1], &checked);
    printf("transpose: %d (shape, table) checks\n", checked);
    if (fails)
        fail_msg("%d mismatches in transpose", fails);
}

/* ------------------------------------------------------------------ */
/* the seam */

typedef struct seam_shape {
    int M, N, K;
} seam_shape;
static const seam_shape seam_shapes[] = {
    { 1, 1, 1 },     { 3, 5, 0 },     { 7, 33, 64 },   { 13, 100, 255 }, { 25, 47, 256 },
    { 12, 32, 257 }, { 37, 31, 300 }, { 5, 64, 512 },  { 11, 17, 513 },  { 2, 40, 777 },
};
#define N_SEAM_SHAPES ((int)(sizeof seam_shapes / sizeof *seam_shapes))
static const char *const mode_names[] = { "attn_gemm trans_b 0", "attn_gemm trans_b 1",
                                          "attn_gemm_tn" };
static const float seam_betas[] = { 0.0f, 1.0f, 0.5f };
static const float seam_alphas[] = { 1.0f, 0.37f };

static void test_seam(void **state)
{
    (void)state;
    fails = 0;
    acc_stat st_blas = { 0, 0, 0 }, st_tile = { 0, 0, 0 };
    int ncases = 0;
    for (int s = 0; s < N_SEAM_SHAPES; s++)
        for (int mode = 0; mode < 3; mode++)
            for (int bi = 0; bi < 3; bi++)
                for (int ai = 0; ai < 2; ai++) {
                    const int M = seam_shapes[s].M, N = seam_shapes[s].N, K = seam_shapes[s].K;
                    const float alpha = seam_alphas[ai], beta = seam_betas[bi];
                    ncases++;
                    /* A: M x K (attn_gemm) or K x M (tn); B: K x N or N x K
                     * (trans_b).  Leading dimensions at least 1 (CBLAS). */
                    const int pa = PADS[next() % NPADS], pb = PADS[next() % NPADS],
                              pc = PADS[next() % NPADS];
                    mat A = mode == 2 ? mat_new(K, M, M + pa) : mat_new(M, K, K + pa + !(K + pa));
                    mat B = mode == 1 ? mat_new(N, K, K + pb + !(K + pb)) : mat_new(K, N, N + pb);
                    mat C0 = mat_new(M, N, N + pc);
                    mat_data(&A);
                    mat_data(&B);
                    mat_pad(&A, 1);
                    mat_pad(&B, 1);
                    mat_c(&C0, beta != 0.0f);
                    const int lda = (int)A.ld, ldb = (int)B.ld, ldc = (int)C0.ld;
                    const int64_t ars = mode == 2 ? 1 : lda, aks = mode == 2 ? lda : 1;
                    const int64_t bks = mode == 1 ? 1 : ldb, bjs = mode == 1 ? ldb : 1;
                    char what[200];
                    snprintf(what, sizeof what,
                             "%s M %d N %d K %d lda %d ldb %d ldc %d alpha %g beta %g",
                             mode_names[mode], M, N, K, lda, ldb, ldc, alpha, beta);

                    float *res[4]; /* [0] BLAS, [1 + t] table t */
                    for (int g = 0; g <= ntabs; g++) {
                        const attn_gemm_kernels *gk = g ? tabs[g - 1] : NULL;
                        res[g] = dup(&C0);
                        if (mode == 2)
                            attn_gemm_tn(gk, M, N, K, alpha, A.p, lda, B.p, ldb, beta, res[g],
                                         ldc);
                        else
                            attn_gemm(gk, mode, M, N, K, alpha, A.p, lda, B.p, ldb, beta,
                                      res[g], ldc);
                    }
                    /* the tile path's model: pieces of SEAM_KMAX for B^T */
                    float *want = dup(&C0);
                    const int pieces = mode == 1 && K > SEAM_KMAX;
                    if (beta == 0.0f || beta == 1.0f)
                        model(M, N, K, pieces ? SEAM_KMAX : (K ? K : 1), alpha, NULL, A.p, ars, aks,
                              B.p, bks, bjs, want, ldc, beta != 0.0f);
                    else
                        memcpy(want, res[0], C0.n * sizeof *want);
                    const int extra = pieces ? (K + SEAM_KMAX - 1) / SEAM_KMAX : 0;
                    for (int g = 0; g <= ntabs; g++) {
                        const char *name = g ? tabs[g - 1]->name : "BLAS";
                        char w2[240];
                        snprintf(w2, sizeof w2, "%s [%s]", what, name);
                        /* C beyond N and the guard: untouched on every path */
                        for (size_t i = 0; i < C0.n; i++) {
                            const int64_t r = (int64_t)i / ldc, j = (int64_t)i % ldc;
                            if ((r >= M || j >= N) && memcmp(res[g] + i, C0.p + i, sizeof(float))) {
                                fail_note("%s: C outside M x N written at float %zu", w2, i);
                                break;
                            }
                        }
                        check_ref(w2, M, N, K, alpha, NULL, A.p, ars, aks, B.p, bks, bjs, beta,
                                  C0.p, res[g], ldc, extra, g ? &st_tile : &st_blas);
                        if (g) {
                            const long d = first_diff(want, res[g], C0.n);
                            if (d >= 0)
                                fail_note("%s: != %s at float %ld (row %ld col %ld): %.9g vs %.9g",
                                          w2,
                                          beta == 0.0f || beta == 1.0f
                                              ? "the model of the tile path"
                                              : "the BLAS (beta 0.5 falls back)",
                                          d, d / (long)ldc, d % (long)ldc, res[g][d], want[d]);
                            const long d1 = first_diff(res[1], res[g], C0.n);
                            if (d1 >= 0)
                                fail_note("%s: != scalar table at float %ld", w2, d1);
                        }
                    }
                    for (int g = 0; g <= ntabs; g++)
                        free(res[g]);
                    free(want);
                    free(A.p);
                    free(B.p);
                    free(C0.p);
                }
    printf("[accuracy] gemm seam: %d cases x (BLAS + %d tables): BLAS max|err| %.3e max "
           "err/tol %.3f; tile max|err| %.3e max err/tol %.3f\n",
           ncases, ntabs, st_blas.max_err, st_blas.max_ratio, st_tile.max_err, st_tile.max_ratio);
    if (fails)
        fail_msg("%d mismatches in the seam", fails);
}

/* ------------------------------------------------------------------ */
/* attn_gemm_use_tile and attn_gemm_select */

static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}
static void restore_env(const char *name, char *v)
{
    if (v)
        setenv(name, v, 1);
    else
        unsetenv(name);
    free(v);
}

static void test_use_tile(void **state)
{
    (void)state;
    char *engine = saved_env("ATTN_ENGINE"), *simd = saved_env("ATTN_SIMD");
    unsetenv("ATTN_ENGINE");
    unsetenv("ATTN_SIMD");

    int have_avx2 = 0, have_avx512 = 0;
#if ATTN_HAVE_X86_KERNELS
    have_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have_avx512 = !!__builtin_cpu_supports("avx512f");
#endif
    const int auto_tile = have_avx512; /* auto: tile iff the AVX-512 table is selected */

    /* select, capped by ATTN_SIMD */
#if ATTN_HAVE_X86_KERNELS
    assert_ptr_equal(attn_gemm_select(), have_avx512 ? &attn_gemm_avx512
                                         : have_avx2 ? &attn_gemm_avx2
                                                     : &attn_gemm_scalar);
    setenv("ATTN_SIMD", "avx2", 1);
    assert_ptr_equal(attn_gemm_select(), have_avx2 ? &attn_gemm_avx2 : &attn_gemm_scalar);
    assert_int_equal(attn_gemm_use_tile(0), 0);
#endif
    setenv("ATTN_SIMD", "scalar", 1);
    assert_ptr_equal(attn_gemm_select(), &attn_gemm_scalar);
    assert_int_equal(attn_gemm_use_tile(0), 0);   /* ATTN_SIMD=scalar, no ATTN_ENGINE */
    setenv("ATTN_ENGINE", "tile", 1);
    assert_int_equal(attn_gemm_use_tile(0), 1);   /* ATTN_ENGINE wins over the table */
    unsetenv("ATTN_ENGINE");
    unsetenv("ATTN_SIMD");

    /* explicit engines, whatever the environment */
    static const char *const envs[] = { NULL, "blas", "tile", "garbage" };
    for (size_t e = 0; e < sizeof envs / sizeof *envs; e++) {
        if (envs[e])
            setenv("ATTN_ENGINE", envs[e], 1);
        else
            unsetenv("ATTN_ENGINE");
        assert_int_equal(attn_gemm_use_tile(1), 0);
        assert_int_equal(attn_gemm_use_tile(2), 1);
    }
    /* auto */
    unsetenv("ATTN_ENGINE");
    assert_int_equal(attn_gemm_use_tile(0), auto_tile);
    setenv("ATTN_ENGINE", "blas", 1);
    assert_int_equal(attn_gemm_use_tile(0), 0);
    setenv("ATTN_ENGINE", "tile", 1);
    assert_int_equal(attn_gemm_use_tile(0), 1);
    setenv("ATTN_ENGINE", "garbage", 1);
    assert_int_equal(attn_gemm_use_tile(0), auto_tile);
    setenv("ATTN_ENGINE", "", 1);
    assert_int_equal(attn_gemm_use_tile(0), auto_tile);
    setenv("ATTN_ENGINE", "TILE", 1);
    assert_int_equal(attn_gemm_use_tile(0), auto_tile);
    printf("use_tile: auto on this CPU -> %d (%s)\n", auto_tile, attn_gemm_select()->name);

    restore_env("ATTN_ENGINE", engine);
    restore_env("ATTN_SIMD", simd);
}

int main(void)
{
    make_mm_cases();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mm_coverage),
        cmocka_unit_test(test_mm),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_seam),
        cmocka_unit_test(test_use_tile),
    };
    return cmocka_run_group_tests_name("gemm", tests, setup, NULL);
}
