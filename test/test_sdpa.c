/*
 * test_sdpa.c -- the checks of attn_sdpa, run over the table of cases in
 * sdpa_cases.c (families: layouts, unusual views, GQA/MQA, scale, causal,
 * windows, lengths, masks, bias, combined options, optional outputs, edge
 * sizes, large logits, empty rows, NaN poison, plan/execute; thread
 * counts; concurrent executions; the engine's paths: split-K, GQA stacking,
 * uneven tiles; randomized cases).  One CMocka test per family; the
 * argument selects the families of one meson test (sdpa, threads, paths,
 * random; none: all).
 *
 * Every row: built (tinst_build), run at its own thread count and checked
 * against the float64 reference (tinst_check), then, per its CHK_ bits:
 *   threads   desc.threads = 2, 4 (, 3, 0) give the same bits as the base;
 *   optional  each other want_probs/want_lse combination passes the
 *             reference check and gives O bitwise equal to the base's;
 *   poison    the case with `poison` toggled (NaN or garbage at every input
 *             position hidden by the lengths or the window) gives the same
 *             bits (rows hiding something only);
 *   plan      attn_sdpa_plan_create (desc wiped afterwards) + execute with
 *             NULL, the exact, a larger garbage-filled and a reused
 *             workspace give the base's bits;
 *   pthreads  one plan executed concurrently from 4 pthreads, own inputs
 *             (seed + 100 + i), own or NULL workspace: the bits of a
 *             single execution of each;
 *   openmp    the same from inside the caller's OpenMP parallel region
 *             (seeds seed + i; skipped without OpenMP);
 *   bwd       attn_sdpa_backward on the row (sdpa_bwd.c, where its
 *             tolerances are summarized): dQ, dK, dV, dBias against the
 *             float64 ref_sdpa_bwd, exact zeros and sentinels, threads 1-4
 *             and the poisoned twin bitwise; rows too large for the float64
 *             reference are skipped (bwd_applies).
 * Plus hand-written tests: the visibility table (patterns written out
 * from attn.h, independent of the reference's window code), NaN in
 * visible data (poisons exactly the rows that see it), and the typed
 * backward (test_bwd_types, below: mixed types, dropout, dBias).
 *
 * Tolerances (derived in reference.c, ref_row_tolerance; u = 2^-24):
 *   per row, with nvis visible keys, head dim dk and logit magnitude
 *   s_abs = max_j |scale| sum_d |q_d k_jd| + |bias_j|:
 *     E_s   = (dk + 6) u s_abs                      logit error (worst case)
 *     p_rel = 1.25 (expm1(2 E_s) + (nvis + 36) u)
 *     |P_j - p_j|  <= p_rel p_j + 1e-30
 *     |O_d - o_d|  <= 1.25 (p_rel/1.25 + (nvis + 4) u) sum_j p_j |v_jd| + 1e-30
 *     |lse - ref|  <= 1.25 (E_s + (nvis + 20) u + 2 u |lse|) + 1e-30
 *   i.e. worst-case fp32 error bounds of sgemm + softmax (16 ulp allowed for
 *   a vectorized exp), so they scale with dk, the number of keys and the
 *   logit magnitude (x30 inputs) and never depend on a lucky summation
 *   order.  Rows without visible keys must give exactly O = 0, P = 0 and
 *   lse = -INFINITY; every element outside the output views must keep its
 *   sentinel bits.  Each family prints one "[accuracy]" line (the largest
 *   absolute errors seen and the largest error/tolerance ratio) and one
 *   "[checks]" line (how many rows each check ran on).
 *
 * ATTN_TEST_QUICK=1 (the valgrind setup) runs only the rows marked quick,
 * fewer thread counts and concurrent iterations.  ATTN_TEST_CASES=<n> and
 * ATTN_TEST_SEED=<s>: number of random cases (default 400, 40 quick) and
 * their base seed (default 20240601).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <attn.h>

#include "harness.h"
#include "layout_expect.h"
#include "sdpa_cases.h"
#include "reference.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* ------------------------------------------------------------- helpers */

/* Print the failure of one check on one row; returns 1 (one failure). */
static int failed(const char *check, const tcase *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int failed(const char *check, const tcase *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL [%s] ", check);
    vprintf(fmt, ap);
    printf(": %s\n", tcase_str(c));
    va_end(ap);
    return 1;
}

/* Run an instance and compare all its outputs bitwise with `expect`
 * (O only when o_only).  Returns 0 when equal. */
static int run_same_bits(tinst *t, const tsnap *expect, int o_only, attn_status *st)
{
    *st = tinst_run(t);
    if (*st != ATTN_OK)
        return 1;
    tsnap got;
    tsnap_take(&got, t);
    int same = o_only ? tsnap_equal_o(expect, &got) : tsnap_equal(expect, &got);
    tsnap_free(&got);
    return !same;
}

/* --------------------------------------------------------------- checks */

/* Each check gets the row, its instance after the base run (the check may
 * change and rerun it but must leave desc as it found it), the base
 * outputs and the family's accuracy statistics; returns its failures. */
typedef int (*tcheck_fn)(const trow *r, tinst *t, const tsnap *base, tstats *st);

static const int thread_list[] = {1, 2, 4, 3, 0};

static int check_threads(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)st;
    static const int count[][2] = {[THR_124] = {3, 2}, [THR_ALL] = {5, 3}};
    const int n = count[r->thr][tquick()];
    const int keep = t->desc.threads;
    int fails = 0;
    for (int x = 0; x < n; x++) {
        if (thread_list[x] == keep)
            continue;
        t->desc.threads = thread_list[x];
        attn_status s;
        if (run_same_bits(t, base, 0, &s))
            fails += failed("threads", &r->c, "threads=%d %s than threads=%d", thread_list[x],
                            s == ATTN_OK ? "gives other bits" : attn_status_str(s), keep);
    }
    t->desc.threads = keep;
    return fails;
}

static int check_optional(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)t;
    int fails = 0;
    for (int v = 0; v < 4; v++) {
        tcase c = r->c;
        c.want_probs = v & 1;
        c.want_lse = v >> 1;
        if (c.want_probs == r->c.want_probs && c.want_lse == r->c.want_lse)
            continue;
        tinst t2;
        attn_status s = ATTN_ERR_OUT_OF_MEMORY;
        if (trow_build(r, &c, &t2) || run_same_bits(&t2, base, 1, &s))
            fails += failed("optional", &c, "O %s with want_probs=%d want_lse=%d",
                            s == ATTN_OK ? "differs bitwise" : attn_status_str(s),
                            c.want_probs, c.want_lse);
        else
            fails += tinst_check(&t2, st) != 0;
        tinst_free(&t2);
    }
    return fails;
}

/* Rows where poison changes the inputs: lengths or a window hide some. */
static int hides_something(const trow *r)
{
    const tcase *c = &r->c;
    return c->use_kv_lens || c->use_q_lens || c->wl >= 0 || c->wr >= 0 || tcase_sparse(c);
}

/* Sparse rows: the dense twin (the same data, the visible set as a full
 * keep-mask, no window, flags or layout) through the dense path agrees
 * with the sparse result within the sum of both reference bounds (each
 * is within its bound of the same float64 result); empty rows exactly. */
static int check_dense(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)base;
    (void)st;
    tcase c = r->c;
    /* 16-bit rows (c.dtype, the types suite): both sides also carry the
     * rounding of O, and the twin the BF16 products' (as tinst_check's
     * bound: per side u_t, 2 u_t for BF16, plus F16's 2^-24). */
    const double typ = (c.dtype == ATTN_DTYPE_BF16 ? 2.0 : 1.0) * tdtype_u(c.dtype);
    const double typ_abs = c.dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
    c.dense_twin = 1;
    c.poison = 0;
    tinst t2;
    /* (the backward check poisons O rows of padded queries in t) */
    if (tinst_run(t) != ATTN_OK)
        return failed("dense", &c, "rerun of the sparse case failed");
    int fails = 0;
    ref_out ro;
    memset(&ro, 0, sizeof ro);
    attn_status s = ATTN_ERR_OUT_OF_MEMORY;
    if (trow_build(r, &c, &t2) || (s = tinst_run(&t2)) != ATTN_OK ||
        ref_sdpa_alloc(&t->desc, &t->args, &ro)) {
        fails = failed("dense", &c, "dense twin: %s", attn_status_str(s));
        goto out;
    }
    const attn_sdpa_desc *d = &t->desc, *d2 = &t2.desc;
    long bad = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->q_heads; h++)
            for (int64_t i = 0; i < d->q_len; i++) {
                const size_t row = (size_t)((b * d->q_heads + h) * d->q_len + i);
                double prel, orel, ltol;
                ref_row_tolerance(d->qk_dim, ro.nvis[row], ro.s_abs[row], ro.lse[row], &prel,
                                  &orel, &ltol);
                const float *o1 = t->args.o + b * d->o.batch + h * d->o.head + i * d->o.seq;
                const float *o2 = t2.args.o + b * d2->o.batch + h * d2->o.head + i * d2->o.seq;
                for (int64_t x = 0; x < d->v_dim; x++) {
                    const double tol =
                        2.0 * (orel + typ) * ro.o_abs[row * (size_t)d->v_dim + (size_t)x] +
                        2.0 * typ_abs + REF_TINY;
                    const double e = fabs((double)o1[x] - (double)o2[x]);
                    if (e / tol > worst)
                        worst = e / tol;
                    if (!(e <= tol) && bad++ < 4)
                        printf("  dense twin O[%lld][%lld][%lld][%lld]: %.9g vs %.9g\n",
                               (long long)b, (long long)h, (long long)i, (long long)x,
                               (double)o1[x], (double)o2[x]);
                }
                if (d->want_lse && d2->want_lse) {
                    const float l1 = t->args.lse[b * d->lse.batch + h * d->lse.head + i * d->lse.seq];
                    const float l2 =
                        t2.args.lse[b * d2->lse.batch + h * d2->lse.head + i * d2->lse.seq];
                    const int same_inf = l1 == -INFINITY && l2 == -INFINITY;
                    if (!same_inf && !(fabs((double)l1 - (double)l2) <= 2.0 * ltol) && bad++ < 4)
                        printf("  dense twin lse[%lld][%lld][%lld]: %.9g vs %.9g\n", (long long)b,
                               (long long)h, (long long)i, (double)l1, (double)l2);
                }
                if (d->want_probs && d2->want_probs) {
                    const float *p1 =
                        t->args.probs + b * d->probs.batch + h * d->probs.head + i * d->probs.seq;
                    const float *p2 = t2.args.probs + b * d2->probs.batch + h * d2->probs.head +
                                      i * d2->probs.seq;
                    for (int64_t j = 0; j < d->kv_len; j++) {
                        const double pr = ro.p ? ro.p[row * (size_t)d->kv_len + (size_t)j] : 1.0;
                        if (!(fabs((double)p1[j] - (double)p2[j]) <= 2.0 * prel * pr + REF_TINY) &&
                            bad++ < 4)
                            printf("  dense twin P[%lld][%lld][%lld][%lld]: %.9g vs %.9g\n",
                                   (long long)b, (long long)h, (long long)i, (long long)j,
                                   (double)p1[j], (double)p2[j]);
                    }
                }
            }
    if (worst > st->ratio_dense)
        st->ratio_dense = worst;
    if (bad)
        fails = failed("dense", &r->c, "%ld elements differ from the dense twin", bad);
out:
    ref_out_free(&ro);
    tinst_free(&t2);
    return fails;
}

static int check_poison(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)t;
    (void)st;
    tcase c = r->c;
    c.poison = !c.poison;
    tinst t2;
    attn_status s = ATTN_ERR_OUT_OF_MEMORY;
    int fails = 0;
    if (trow_build(r, &c, &t2) || run_same_bits(&t2, base, 0, &s))
        fails = failed("poison", &c, "poison=%d %s", c.poison,
                       s == ATTN_OK ? "gives other bits" : attn_status_str(s));
    tinst_free(&t2);
    return fails;
}

/* 16-bit rows on the widened products: the fp32 call on t's fp32 buffers
 * (which hold the rounded inputs) gives P and lse bitwise, and O that,
 * rounded to the type (attn_dtype_encode), is the 16-bit call's O bit for
 * bit. */
static int check_widened(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)st;
    tinst_clear_outputs(t);
    attn_status s = attn_sdpa(&t->desc, &t->args);   /* the fp32 desc and args */
    if (s != ATTN_OK)
        return failed("widened", &r->c, "the fp32 call: %s", attn_status_str(s));
    tsnap got;
    tsnap_take(&got, t);
    long bad = 0;
    tround_all(r->c.dtype, got.o, got.no);
    for (size_t x = 0; x < got.no; x++) {
        const uint32_t want = got.o[x];
        if (want != base->o[x] && bad++ < 4)
            printf("  widened O element %zu: 0x%08x, the fp32 call's rounded 0x%08x\n", x,
                   (unsigned)base->o[x], (unsigned)want);
    }
    /* (memcmp is not given the NULL buffers of outputs not asked for) */
    const int same_p = got.np == base->np &&
                       (got.np == 0 || !memcmp(got.p, base->p, got.np * sizeof *got.p));
    const int same_l = got.nl == base->nl &&
                       (got.nl == 0 || !memcmp(got.lse, base->lse, got.nl * sizeof *got.lse));
    tsnap_free(&got);
    if (bad || !same_p || !same_l)
        return failed("widened", &r->c, "not the fp32 call's bits (%ld O elements%s%s)", bad,
                      same_p ? "" : ", P", same_l ? "" : ", lse");
    return 0;
}

/* Rows check_widened applies to: the sparse rows, which never run the
 * BF16 products, and the dense rows of the decode path (n <= 16, unless
 * ATTN_DECODE=0 sends them to the engines), which never do either and
 * stack a GQA group in any layout.  (Not the other dense 16-bit rows:
 * there 16-bit Q or O can stack a group's heads into one GEMM where the
 * fp32 views do not allow it, BSHD Q or O, and the sums then differ within
 * rounding.) */
static int widened_applies(const trow *r)
{
    /* With MKL the sgemm path's sums depend on the operands' alignment and
     * leading dimensions, and the widened copies have others than the fp32
     * buffers: within rounding only, which the reference check covers. */
    const char *dec = getenv("ATTN_DECODE");
    const int decode = r->c.n <= 16 && !(dec && !strcmp(dec, "0"));
    return r->c.dtype != ATTN_DTYPE_F32 && (tcase_sparse(&r->c) || decode) && !tblas_mkl();
}

static int check_plan(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)st;
    static const char *what[] = {"NULL ws", "exact ws", "larger garbage ws", "reused ws"};
    attn_sdpa_desc d = t->desc;
    attn_sdpa_plan *plan = NULL;
    if (attn_sdpa_plan_create(&plan, &d) != ATTN_OK)
        return failed("plan", &r->c, "attn_sdpa_plan_create");
    /* the plan holds a copy: changing or wiping the desc has no effect */
    d.scale = 5.0f;
    d.q_len = 1;
    memset(&d, 0x3C, sizeof d);
    size_t ws = 0;
    int fails = 0;
    if (attn_sdpa_workspace_size(plan, &ws) != ATTN_OK) {
        attn_sdpa_plan_destroy(plan);
        return failed("plan", &r->c, "attn_sdpa_workspace_size");
    }
    size_t cap = (ws + 64 + 63) / 64 * 64;
    void *buf = aligned_alloc(64, cap);
    assert_non_null(buf);
    memset(buf, 0xC3, cap); /* garbage workspace must not matter */
    for (int v = 0; v < 4; v++) {
        tinst_clear_outputs(t);
        void *w = v == 0 ? NULL : buf;
        size_t bytes = v == 0 ? 0 : v == 2 ? cap : ws;
        attn_status s = attn_sdpa_execute(plan, &t->args, w, bytes);
        tsnap x;
        tsnap_take(&x, t);
        if (s != ATTN_OK || !tsnap_equal(base, &x))
            fails += failed("plan", &r->c, "execute with %s: %s", what[v],
                            s == ATTN_OK ? "other bits than attn_sdpa" : attn_status_str(s));
        tsnap_free(&x);
    }
    free(buf);
    attn_sdpa_plan_destroy(plan);
    return fails;
}

/* One worker of check_pthreads: NWORKERS of them share the plan. */
#define NWORKERS 4

typedef struct worker {
    const attn_sdpa_plan *plan;
    tinst t;
    tsnap expect;
    size_t ws_bytes;
    int iters;
    int failures;
    pthread_barrier_t *barrier;
    int id;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    void *ws = NULL;
    size_t cap = (w->ws_bytes + 63) / 64 * 64 + 64;
    if (w->id % 2 == 1)
        ws = aligned_alloc(64, cap);
    pthread_barrier_wait(w->barrier);
    for (int it = 0; it < w->iters; it++) {
        tinst_clear_outputs(&w->t);
        /* odd workers alternate their own workspace and NULL */
        void *use = (it % 2 == 0) ? ws : NULL;
        attn_status s = attn_sdpa_execute(w->plan, &w->t.args, use, use ? w->ws_bytes : 0);
        if (s != ATTN_OK) {
            w->failures++;
            continue;
        }
        tsnap got;
        tsnap_take(&got, &w->t);
        if (!tsnap_equal(&w->expect, &got))
            w->failures++;
        tsnap_free(&got);
    }
    free(ws);
    return NULL;
}

/* Inputs of worker i: the row's case with seed + off + i (same desc, so
 * one plan fits every worker's buffers); expected bits and the reference
 * check from a single execution of the plan. */
static int worker_inputs(const trow *r, attn_sdpa_plan *plan, uint64_t seed, tinst *t,
                         tsnap *expect, tstats *st)
{
    tcase c = r->c;
    c.seed = seed;
    assert_int_equal(trow_build(r, &c, t), 0);
    assert_int_equal(attn_sdpa_execute(plan, &t->args, NULL, 0), ATTN_OK);
    int fails = tinst_check(t, st) != 0;
    tsnap_take(expect, t);
    tinst_clear_outputs(t);
    return fails;
}

static int check_pthreads(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)base;
    pthread_barrier_t barrier;
    worker w[NWORKERS];
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t->desc), ATTN_OK);
    size_t ws = 0;
    assert_int_equal(attn_sdpa_workspace_size(plan, &ws), ATTN_OK);
    assert_int_equal(pthread_barrier_init(&barrier, NULL, NWORKERS), 0);
    int fails = 0;
    for (int i = 0; i < NWORKERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        fails += worker_inputs(r, plan, r->c.seed + 100 + (uint64_t)i, &w[i].t, &w[i].expect,
                               st);
        w[i].plan = plan;
        w[i].ws_bytes = ws;
        w[i].iters = tquick() ? 2 : 8;
        w[i].barrier = &barrier;
        w[i].id = i;
    }
    pthread_t th[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NWORKERS; i++) {
        if (w[i].failures)
            fails += failed("pthreads", &r->c, "worker %d: %d of %d concurrent executions "
                            "failed or differed bitwise", i, w[i].failures, w[i].iters);
        tsnap_free(&w[i].expect);
        tinst_free(&w[i].t);
    }
    pthread_barrier_destroy(&barrier);
    attn_sdpa_plan_destroy(plan);
    return fails;
}

static int check_openmp(const trow *r, tinst *t, const tsnap *base, tstats *st)
{
    (void)base;
#ifdef _OPENMP
    enum { N = 6 };
    tinst ti[N];
    tsnap expect[N];
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t->desc), ATTN_OK);
    int fails = 0;
    for (int i = 0; i < N; i++)
        fails += worker_inputs(r, plan, r->c.seed + (uint64_t)i, &ti[i], &expect[i], st);
    int bad = 0;
#pragma omp parallel for num_threads(3) schedule(dynamic, 1) reduction(+ : bad)
    for (int i = 0; i < N; i++) {
        if (attn_sdpa_execute(plan, &ti[i].args, NULL, 0) != ATTN_OK) {
            bad++;
            continue;
        }
        tsnap got;
        tsnap_take(&got, &ti[i]);
        if (!tsnap_equal(&expect[i], &got))
            bad++;
        tsnap_free(&got);
    }
    if (bad)
        fails += failed("openmp", &r->c, "%d executions inside an OpenMP region failed or "
                        "differed bitwise", bad);
    for (int i = 0; i < N; i++) {
        tsnap_free(&expect[i]);
        tinst_free(&ti[i]);
    }
    attn_sdpa_plan_destroy(plan);
    return fails;
#else
    (void)r;
    (void)t;
    (void)st;
    printf("built without OpenMP: skipped\n");
    skip();
    return 0;
#endif
}

/* The checks: the CHK_ bit that selects it, its name in "[checks]" lines,
 * the function and, optionally, which of the selected rows it applies to. */
static const struct {
    unsigned bit;
    const char *name;
    tcheck_fn fn;
    int (*applies)(const trow *r);
} checks[] = {
    {CHK_THREADS, "threads", check_threads, NULL},
    {CHK_OPTIONAL, "optional", check_optional, NULL},
    {CHK_POISON, "poison", check_poison, hides_something},
    {CHK_PLAN, "plan", check_plan, NULL},
    {CHK_PTHREADS, "pthreads", check_pthreads, NULL},
    {CHK_OPENMP, "openmp", check_openmp, NULL},
    {CHK_BWD, "bwd", check_bwd, bwd_applies},
    {CHK_DENSE, "dense", check_dense, NULL},
    {CHK_WIDENED, "widened", check_widened, widened_applies},
};
#define NCHECKS ((int)(sizeof checks / sizeof checks[0]))

/* ------------------------------------------------------- family runner */

/* A forward family rerun at a 16-bit type (the "types" suite): every row
 * with dtype set, the checks that go through tinst_run only (CHK_DENSE
 * does: both the sparse row and its dense twin run at the type), the
 * backward at the type (CHK_BWD; sdpa_bwd.c; on sparse rows also bitwise
 * the fp32 backward rounded), plus CHK_WIDENED where it applies. */
typedef struct typed_family {
    tfamily f;
    int dtype;
    char name[64];
} typed_family;

#define TYPED_CHECKS (CHK_THREADS | CHK_OPTIONAL | CHK_POISON | CHK_DENSE | CHK_BWD)

static long types_every(void)
{
    const char *e = getenv("ATTN_TEST_TYPES_EVERY");
    const long n = e ? strtol(e, NULL, 10) : 1;
    return n > 1 ? n : 1;
}

static void run_rows(const tfamily *f, int dtype, const char *name)
{
    trows rs;
    assert_int_equal(trows_generate(&rs, f), 0);
    tstats st;
    tstats_init(&st, name);
    int fails = 0, rows = 0, ran[NCHECKS] = {0};
    /* ATTN_TEST_TYPES_EVERY=n (CI's runs at the other engines, SIMD levels
     * and BLAS): a 16-bit rerun keeps every n-th row, BF16 and F16 from
     * different phases, so together they still touch every row's shape. */
    const long every = dtype ? types_every() : 1;
    const long phase = dtype == ATTN_DTYPE_F16 ? every / 2 : 0;
    const int total = rs.n;
    for (int k = 0; k < rs.n; k++) {
        trow *r = &rs.v[k];
        if (dtype) {
            r->c.dtype = dtype;
            r->checks = (r->checks & TYPED_CHECKS) | CHK_WIDENED;
        }
        if ((tquick() && !r->quick) || k % every != phase)
            continue;
        rows++;
        tinst t;
        if (trow_build(r, &r->c, &t)) {
            fails += failed("build", &r->c, "cannot build the case");
            tinst_free(&t);
            continue;
        }
        attn_status s = tinst_run(&t);
        if (s != ATTN_OK) {
            fails += failed("reference", &r->c, "attn_sdpa returned %s", attn_status_str(s));
            tinst_free(&t);
            continue;
        }
        fails += tinst_check(&t, &st) != 0;
        tsnap base;
        tsnap_take(&base, &t);
        for (int x = 0; x < NCHECKS; x++)
            if ((r->checks & checks[x].bit) && (!checks[x].applies || checks[x].applies(r))) {
                ran[x]++;
                fails += checks[x].fn(r, &t, &base, &st);
            }
        tsnap_free(&base);
        tinst_free(&t);
    }
    trows_free(&rs);
    tstats_print(&st);
    printf("[checks]   %-22s rows=%d", name, rows);
    if (dtype && types_every() > 1)
        printf(" (ATTN_TEST_TYPES_EVERY=%ld: of %d)", types_every(), total);
    for (int x = 0; x < NCHECKS; x++)
        if (ran[x])
            printf(" %s=%d", checks[x].name, ran[x]);
    printf("\n");
    fflush(stdout);
    if (fails)
        fail_msg("%d failure(s) in %s", fails, name);
}

static void run_family(void **state)
{
    const tfamily *f = *state;
    run_rows(f, 0, f->name);
}

static void run_typed_family(void **state)
{
    const typed_family *tf = *state;
    run_rows(&tf->f, tf->dtype, tf->name);
}

/* ------------------------------------------------- hand-written tests */

/* Visibility patterns written out by hand from attn.h (n = 4, m = 6,
 * scale 0 so that every visible key gets exactly 1/count): independent of
 * the reference's own window code. */
void test_visibility_table(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        int align;
        int64_t wl, wr;
        int32_t kv_len, q_len; /* -1: not in use */
        const char *rows[4];
    } tab[] = {
        {"TL causal", 0, -1, 0, -1, -1, {"100000", "110000", "111000", "111100"}},
        {"BR causal", 1, -1, 0, -1, -1, {"111000", "111100", "111110", "111111"}},
        {"TL window 1/1", 0, 1, 1, -1, -1, {"110000", "111000", "011100", "001110"}},
        {"BR diagonal only", 1, 0, 0, -1, -1, {"001000", "000100", "000010", "000001"}},
        {"TL right only 2", 0, -1, 2, -1, -1, {"111000", "111100", "111110", "111111"}},
        {"BR left only 1", 1, 1, -1, -1, -1, {"011111", "001111", "000111", "000011"}},
        {"BR causal kv 4 q 2", 1, -1, 0, 4, 2, {"111000", "111100", "000000", "000000"}},
        {"BR causal kv 3", 1, -1, 0, 3, -1, {"000000", "100000", "110000", "111000"}},
        {"BR causal q 1", 1, -1, 0, -1, 1, {"111111", "000000", "000000", "000000"}},
        {"TL causal kv 2", 0, -1, 0, 2, -1, {"100000", "110000", "110000", "110000"}},
        {"BR window 1/0 kv 5 q 3", 1, 1, 0, 5, 3, {"011000", "001100", "000110", "000000"}},
    };
    int fails = 0;
    for (size_t k = 0; k < sizeof tab / sizeof tab[0]; k++) {
        tcase c = tcase_default(1, 1, 1, 4, 6, 3, 2);
        c.scale = 0.0f;
        c.align = tab[k].align;
        c.wl = tab[k].wl;
        c.wr = tab[k].wr;
        c.use_kv_lens = tab[k].kv_len >= 0;
        c.kv_lens[0] = tab[k].kv_len;
        c.use_q_lens = tab[k].q_len >= 0;
        c.q_lens[0] = tab[k].q_len;
        c.want_probs = 1;
        c.want_lse = 1;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        assert_int_equal(tinst_run(&t), ATTN_OK);
        for (int i = 0; i < 4; i++) {
            const char *row = tab[k].rows[i];
            int cnt = 0;
            for (int j = 0; j < 6; j++)
                cnt += row[j] == '1';
            const float *P = t.args.probs + i * t.desc.probs.seq;
            const float L = t.args.lse[i * t.desc.lse.seq];
            char got[7];
            int ok = 1;
            for (int j = 0; j < 6; j++) {
                got[j] = P[j] != 0.0f ? '1' : '0';
                if (row[j] == '1' ? fabsf(P[j] - 1.0f / (float)cnt) > 1e-6f : P[j] != 0.0f)
                    ok = 0;
            }
            got[6] = 0;
            /* lse of zero logits = log(count), -inf for an empty row */
            if (cnt == 0 ? L != -INFINITY : fabs((double)L - log((double)cnt)) > 1e-6)
                ok = 0;
            if (!ok) {
                printf("FAIL %s, row %d: P pattern %s (want %s), lse %g\n", tab[k].what, i,
                       got, row, (double)L);
                fails++;
            }
        }
        tinst_free(&t);
    }
    if (fails)
        fail_msg("%d rows with the wrong visibility", fails);
}

/* NaN in visible data gives NaN where it is seen, and only there: a NaN in
 * a Q row poisons that row; a NaN in a K row poisons exactly the rows that
 * see that key (here: causal, key 600 of 700, second key tile); with
 * split-K too.  Checked at threads 1, 2 and 4. */
void test_nan_visible(void **state)
{
    (void)state;
    for (int split = 0; split < 2; split++) {
        const int64_t n = split ? 2 : 700, m = 700, d = 16, H = split ? 2 : 1;
        attn_sdpa_desc desc;
        attn_sdpa_desc_init(&desc);
        desc.batch = 1;
        desc.q_heads = desc.kv_heads = H;
        desc.q_len = n;
        desc.kv_len = m;
        desc.qk_dim = desc.v_dim = d;
        desc.q = desc.o = attn_view_bhsd(H, n, d);
        desc.k = desc.v = attn_view_bhsd(H, m, d);
        desc.align = ATTN_ALIGN_BOTTOM_RIGHT;
        desc.window_right = 0;
        float *q = calloc((size_t)(H * n * d), sizeof(float));
        float *k = calloc((size_t)(H * m * d), sizeof(float));
        float *v = calloc((size_t)(H * m * d), sizeof(float));
        float *o = calloc((size_t)(H * n * d), sizeof(float));
        assert_non_null(q); assert_non_null(k); assert_non_null(v); assert_non_null(o);
        for (int64_t i = 0; i < H * n * d; i++) q[i] = 0.01f * (float)(i % 7);
        for (int64_t i = 0; i < H * m * d; i++) { k[i] = 0.02f * (float)(i % 5); v[i] = 1.0f; }
        const int64_t qnan = split ? 0 : 100, knan = 600;
        q[qnan * d + 3] = NAN;                 /* head 0, row qnan */
        k[knan * d + 5] = NAN;                 /* head 0, key knan */
        for (int threads = 1; threads <= 4; threads *= 2) {
            desc.threads = threads;
            attn_sdpa_args a = { .q = q, .k = k, .v = v, .o = o };
            assert_int_equal(attn_sdpa(&desc, &a), ATTN_OK);
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < n; i++) {
                    /* row i sees keys j <= i + m - n */
                    int sees = h == 0 && (i == qnan || knan <= i + m - n);
                    float x = o[(h * n + i) * d];
                    if (sees != (isnan(x) != 0))
                        fail_msg("split %d threads %d head %lld row %lld: O = %g", split, threads,
                                 (long long)h, (long long)i, x);
                }
        }
        free(q); free(k); free(v); free(o);
    }
}

/* NaN in visible data with sparse rules: global keys every 50th key
 * (short, gathered segments for the rows whose windows miss them), global
 * queries every 40th row (gathered into their own items), window 5 + 5.
 * A NaN in an ordinary key's K row reaches exactly the rows that see it
 * (its window rows and the global queries), a NaN in a Q row only its
 * row; a NaN in a global key's K row reaches every row. */
/* Sparse rows with every mix of F32 and F16 for Q, K, V and O (each on its
 * own; F16 values are exact in fp32, so one set of rounded inputs serves
 * every mix): each mix gives the fp32 call's bits (P, lse, O; O rounded to
 * F16 when o_type is F16), since the sparse forward widens what it reads
 * and runs the fp32 operations. */
void test_sparse_mixed_types(void **state)
{
    (void)state;
    tcase cs[3];
    cs[0] = tcase_default(2, 4, 2, 70, 150, 24, 20);
    cs[0].use_gk = 1, cs[0].gk_rate = 0.1, cs[0].wl = 5, cs[0].wr = 5;
    cs[1] = tcase_default(1, 2, 1, 64, 96, 16, 8);
    cs[1].bs = 16, cs[1].lay_kind = TLAY_RANDOM, cs[1].lay_keep = 0.5, cs[1].lay_per_head = 1;
    cs[1].use_gq = 1, cs[1].gq_rate = 0.1;
    cs[2] = tcase_default(2, 2, 2, 33, 600, 12, 40);
    cs[2].use_gq = 1, cs[2].gq_rate = 0.1, cs[2].use_gk = 1, cs[2].gk_rate = 0.03;
    cs[2].wl = 3, cs[2].wr = 0, cs[2].align = ATTN_ALIGN_BOTTOM_RIGHT;
    int fails = 0, runs = 0;
    for (int k = 0; k < 3; k++) {
        tcase c = cs[k];
        c.dtype = ATTN_DTYPE_F16;
        c.want_probs = c.want_lse = 1;
        c.poison = 1;
        c.seed = 4100 + (uint64_t)k;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        tinst_clear_outputs(&t);
        assert_int_equal(attn_sdpa(&t.desc, &t.args), ATTN_OK);   /* fp32, rounded inputs */
        tsnap base;
        tsnap_take(&base, &t);
        for (int mix = 0; mix < 16; mix++) {
            attn_sdpa_desc d;
            attn_sdpa_args a;
            tinst_call_types(&t, &d, &a);   /* all F16; then bit x: tensor x F32 */
            if (mix & 1) d.q_type = ATTN_DTYPE_F32, a.q = t.args.q, a.q16 = NULL;
            if (mix & 2) d.k_type = ATTN_DTYPE_F32, a.k = t.args.k, a.k16 = NULL;
            if (mix & 4) d.v_type = ATTN_DTYPE_F32, a.v = t.args.v, a.v16 = NULL;
            if (mix & 8) d.o_type = ATTN_DTYPE_F32, a.o = t.args.o, a.o16 = NULL;
            tinst_clear_outputs(&t);
            uint16_t *h = t.o16.base;
            for (size_t i = 0; i < t.o16.count; i++)
                h[i] = 0x7FA5;
            attn_status st = attn_sdpa(&d, &a);
            runs++;
            if (st != ATTN_OK) {
                fails += failed("mixed", &c, "mix %d: %s", mix, attn_status_str(st));
                continue;
            }
            if (!(mix & 8))
                tinst_widen_o(&t);
            tsnap got;
            tsnap_take(&got, &t);
            long bad = 0;
            for (size_t x = 0; x < got.no; x++) {
                uint32_t want = base.o[x];
                if (!(mix & 8) && want != TSENTINEL) {
                    float f;
                    uint16_t hh;
                    memcpy(&f, &want, sizeof f);
                    attn_dtype_encode(ATTN_DTYPE_F16, &f, &hh, 1);
                    attn_dtype_decode(ATTN_DTYPE_F16, &hh, &f, 1);
                    memcpy(&want, &f, sizeof f);
                }
                bad += got.o[x] != want;
            }
            const int same_pl = !memcmp(got.p, base.p, got.np * sizeof *got.p) &&
                                !memcmp(got.lse, base.lse, got.nl * sizeof *got.lse);
            if (bad || !same_pl)
                fails += failed("mixed", &c, "q %s k %s v %s o %s: %ld O elements%s differ from "
                                "the fp32 call", mix & 1 ? "F32" : "F16", mix & 2 ? "F32" : "F16",
                                mix & 4 ? "F32" : "F16", mix & 8 ? "F32" : "F16", bad,
                                same_pl ? "" : ", P or lse");
            tsnap_free(&got);
        }
        tsnap_free(&base);
        tinst_free(&t);
    }
    printf("[checks]   sparse mixed types: %d calls (3 cases x 16 mixes of F32/F16 Q, K, V, O), "
           "each the fp32 call's bits\n", runs);
    if (fails)
        fail_msg("%d sparse mixed-type failures", fails);
}

void test_sparse_nan_visible(void **state)
{
    (void)state;
    const int64_t n = 300, m = 300, d = 16;
    for (int variant = 0; variant < 2; variant++) {
        attn_sdpa_desc desc;
        attn_sdpa_desc_init(&desc);
        desc.batch = 1;
        desc.q_heads = desc.kv_heads = 1;
        desc.q_len = n;
        desc.kv_len = m;
        desc.qk_dim = desc.v_dim = d;
        desc.q = desc.o = attn_view_bhsd(1, n, d);
        desc.k = desc.v = attn_view_bhsd(1, m, d);
        desc.window_left = desc.window_right = 5;
        desc.use_global_k = desc.use_global_q = 1;
        float *q = calloc((size_t)(n * d), sizeof(float));
        float *k = calloc((size_t)(m * d), sizeof(float));
        float *v = calloc((size_t)(m * d), sizeof(float));
        float *o = calloc((size_t)(n * d), sizeof(float));
        uint8_t *gk = calloc((size_t)m, 1), *gq = calloc((size_t)n, 1);
        assert_non_null(q); assert_non_null(k); assert_non_null(v); assert_non_null(o);
        assert_non_null(gk); assert_non_null(gq);
        for (int64_t i = 0; i < n * d; i++) q[i] = 0.01f * (float)(i % 7);
        for (int64_t i = 0; i < m * d; i++) { k[i] = 0.02f * (float)(i % 5); v[i] = 1.0f; }
        for (int64_t j = 0; j < m; j++) gk[j] = j % 50 == 7;
        for (int64_t i = 0; i < n; i++) gq[i] = i % 40 == 3;
        const int64_t knan = variant ? 157 : 120, qnan = 203;
        k[knan * d + 5] = NAN;
        q[qnan * d + 2] = NAN;
        for (int threads = 1; threads <= 4; threads *= 2) {
            desc.threads = threads;
            attn_sdpa_args a = { .q = q, .k = k, .v = v, .o = o, .global_k = gk, .global_q = gq };
            assert_int_equal(attn_sdpa(&desc, &a), ATTN_OK);
            for (int64_t i = 0; i < n; i++) {
                const int sees = gq[i] || gk[knan] || (i >= knan - 5 && i <= knan + 5);
                const int want = sees || i == qnan;
                const float x = o[i * d];
                if (want != (isnan(x) != 0))
                    fail_msg("variant %d threads %d row %lld: O = %g", variant, threads,
                             (long long)i, x);
            }
        }
        free(q); free(k); free(v); free(o); free(gk); free(gq);
    }
}

/* The layout builders against constructions of their own (layout_expect.c,
 * shared with the fuzz target), and their argument errors (nothing
 * written). */

void test_layout_builders(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{1, 1}, {7, 7}, {16, 16}, {9, 20}, {20, 9}, {33, 40}};
    int fails = 0, checked = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t nb = shapes[s][0], mb = shapes[s][1];
        uint8_t *got = malloc((size_t)(nb * mb)), *want = malloc((size_t)(nb * mb));
        assert_non_null(got);
        assert_non_null(want);
        for (int64_t w = 0; w <= 5; w += (w == 0 ? 1 : 2))
            for (int64_t gb = 0; gb <= 2; gb++)
                for (int64_t r = 0; r <= 4; r += 2)
                    for (uint64_t seed = 1; seed <= 2; seed++) {
                        memset(got, 0xEE, (size_t)(nb * mb));
                        assert_int_equal(attn_layout_build_bigbird(got, nb, mb, w, gb, r, seed), ATTN_OK);
                        assert_int_equal(expect_bigbird(want, nb, mb, w, gb, r, seed), 0);
                        checked++;
                        if (memcmp(got, want, (size_t)(nb * mb))) {
                            printf("FAIL bigbird nb=%lld mb=%lld w=%lld g=%lld r=%lld seed=%llu\n",
                                   (long long)nb, (long long)mb, (long long)w, (long long)gb,
                                   (long long)r, (unsigned long long)seed);
                            fails++;
                        }
                    }
        for (int64_t l = 1; l <= 5; l++)
            for (int causal = 0; causal < 2; causal++) {
                memset(got, 0xEE, (size_t)(nb * mb));
                assert_int_equal(attn_layout_build_strided(got, nb, mb, l, causal), ATTN_OK);
                expect_strided(want, nb, mb, l, causal);
                checked++;
                if (memcmp(got, want, (size_t)(nb * mb))) {
                    printf("FAIL strided nb=%lld mb=%lld l=%lld causal=%d\n", (long long)nb,
                           (long long)mb, (long long)l, causal);
                    fails++;
                }
                for (int64_t c = 1; c <= l; c++) {
                    memset(got, 0xEE, (size_t)(nb * mb));
                    assert_int_equal(attn_layout_build_fixed(got, nb, mb, l, c, causal), ATTN_OK);
                    expect_fixed(want, nb, mb, l, c, causal);
                    checked++;
                    if (memcmp(got, want, (size_t)(nb * mb))) {
                        printf("FAIL fixed nb=%lld mb=%lld l=%lld c=%lld causal=%d\n",
                               (long long)nb, (long long)mb, (long long)l, (long long)c, causal);
                        fails++;
                    }
                }
            }
        free(got);
        free(want);
    }
    /* the random blocks: r per row among the hidden ones, a pure function
     * of the seed (another seed, another layout) */
    {
        uint8_t a[64 * 64], b[64 * 64];
        assert_int_equal(attn_layout_build_bigbird(a, 64, 64, 3, 1, 3, 7), ATTN_OK);
        assert_int_equal(attn_layout_build_bigbird(b, 64, 64, 3, 1, 3, 8), ATTN_OK);
        if (!memcmp(a, b, sizeof a)) {
            printf("FAIL bigbird: seeds 7 and 8 give the same layout\n");
            fails++;
        }
        for (int64_t I = 1; I < 64; I++) {
            int cnt = 0;
            for (int64_t J = 0; J < 64; J++)
                cnt += a[I * 64 + J];
            /* the band I - 1 .. I + 1 inside [0, 64), column 0, 3 random */
            const int band = (I + 1 < 64 ? 3 : 2);
            const int want = band + (I - 1 > 0) + 3;
            if (cnt != want) {
                printf("FAIL bigbird: row %lld has %d visible blocks, want %d\n", (long long)I, cnt,
                       want);
                fails++;
            }
        }
    }
    /* errors: status, nothing written */
    static const struct {
        int fn;
        int64_t nb, mb, p1, p2, p3;
        int null;
        attn_status want;
    } bad[] = {
        {0, 4, 4, 3, 1, 1, 1, ATTN_ERR_NULL_ARGUMENT}, {0, 0, 4, 3, 1, 1, 0, ATTN_ERR_BAD_SIZE},
        {0, 4, -1, 3, 1, 1, 0, ATTN_ERR_BAD_SIZE},     {0, 4, 4, 2, 1, 1, 0, ATTN_ERR_BAD_OPTION},
        {0, 4, 4, -1, 1, 1, 0, ATTN_ERR_BAD_OPTION},   {0, 4, 4, 3, -1, 1, 0, ATTN_ERR_BAD_OPTION},
        {0, 4, 4, 3, 1, -2, 0, ATTN_ERR_BAD_OPTION},
        {0, INT64_MAX, 2, 3, 1, 1, 0, ATTN_ERR_TOO_LARGE},
        {1, 4, 4, 0, 0, 0, 0, ATTN_ERR_BAD_OPTION},    {1, 4, 4, 2, 2, 0, 0, ATTN_ERR_BAD_OPTION},
        {1, 4, 4, 2, 0, 0, 1, ATTN_ERR_NULL_ARGUMENT}, {1, -4, 4, 2, 0, 0, 0, ATTN_ERR_BAD_SIZE},
        {2, 4, 4, 3, 0, 0, 0, ATTN_ERR_BAD_OPTION},    {2, 4, 4, 3, 4, 0, 0, ATTN_ERR_BAD_OPTION},
        {2, 4, 4, 0, 1, 0, 0, ATTN_ERR_BAD_OPTION},    {2, 4, 4, 3, 1, -1, 0, ATTN_ERR_BAD_OPTION},
        {2, 4, 4, 3, 1, 0, 1, ATTN_ERR_NULL_ARGUMENT}, {2, 4, 0, 3, 1, 0, 0, ATTN_ERR_BAD_SIZE},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        uint8_t buf[16];
        memset(buf, 0xEE, sizeof buf);
        uint8_t *l = bad[k].null ? NULL : buf;
        attn_status s = bad[k].fn == 0
            ? attn_layout_build_bigbird(l, bad[k].nb, bad[k].mb, bad[k].p1, bad[k].p2, bad[k].p3, 1)
            : bad[k].fn == 1 ? attn_layout_build_strided(l, bad[k].nb, bad[k].mb, bad[k].p1, (int)bad[k].p2)
                             : attn_layout_build_fixed(l, bad[k].nb, bad[k].mb, bad[k].p1, bad[k].p2,
                                                 (int)bad[k].p3);
        int untouched = 1;
        for (size_t x = 0; x < sizeof buf; x++)
            untouched &= buf[x] == 0xEE;
        checked++;
        if (s != bad[k].want || !untouched) {
            printf("FAIL layout error row %zu: %s (want %s)%s\n", k, attn_status_str(s),
                   attn_status_str(bad[k].want), untouched ? "" : ", buffer written");
            fails++;
        }
    }
    printf("[checks]   layout builders: %d layouts and error rows checked\n", checked);
    if (fails)
        fail_msg("%d layout builder failures", fails);
}

/* Dropout with sparse plans: the keep decisions are a pure function of
 * (b, h, i, j), so a sparse case and its dense twin (harness.h) with the
 * same dropout agree to float tolerance, forward (O, P, lse) and backward
 * (dQ, dK, dV); threads 1 and 3 give the same bits. */
static double max_abs(const float *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)x[i]) > m)
            m = fabs((double)x[i]);
    return m;
}

static int bwd_dense_grads(tinst *t, float *g[3], size_t cnt[3])
{
    const attn_sdpa_desc *f = &t->desc;
    const size_t nq = (size_t)(f->batch * f->q_heads * f->q_len),
                 nk = (size_t)(f->batch * f->kv_heads * f->kv_len);
    cnt[0] = nq * (size_t)f->qk_dim;
    cnt[1] = nk * (size_t)f->qk_dim;
    cnt[2] = nk * (size_t)f->v_dim;
    float *d_o = malloc(nq * (size_t)f->v_dim * sizeof(float));
    for (int k = 0; k < 3; k++)
        g[k] = malloc(cnt[k] * sizeof(float));
    if (!d_o || !g[0] || !g[1] || !g[2]) {
        free(d_o);
        return -1;
    }
    for (size_t x = 0; x < nq * (size_t)f->v_dim; x++)
        d_o[x] = (float)((int)(x * 37 % 101) - 50) / 50.0f;
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = *f;
    bd.fwd.want_probs = 0;
    bd.d_o = attn_view_bhsd(f->q_heads, f->q_len, f->v_dim);
    bd.dq = attn_view_bhsd(f->q_heads, f->q_len, f->qk_dim);
    bd.dk = attn_view_bhsd(f->kv_heads, f->kv_len, f->qk_dim);
    bd.dv = attn_view_bhsd(f->kv_heads, f->kv_len, f->v_dim);
    /* O in a dense copy for the backward's view */
    float *o = malloc(nq * (size_t)f->v_dim * sizeof(float));
    if (!o) {
        free(d_o);
        return -1;
    }
    for (int64_t b = 0; b < f->batch; b++)
        for (int64_t h = 0; h < f->q_heads; h++)
            for (int64_t i = 0; i < f->q_len; i++)
                memcpy(o + ((b * f->q_heads + h) * f->q_len + i) * f->v_dim,
                       t->args.o + b * f->o.batch + h * f->o.head + i * f->o.seq,
                       (size_t)f->v_dim * sizeof(float));
    bd.fwd.o = bd.d_o;
    attn_sdpa_bwd_args ba = {.q = t->args.q, .k = t->args.k, .v = t->args.v, .o = o,
                             .d_o = d_o, .lse = t->args.lse, .kv_lens = t->args.kv_lens,
                             .q_lens = t->args.q_lens, .mask = t->args.mask,
                             .bias = t->args.bias, .dq = g[0], .dk = g[1], .dv = g[2],
                             .global_k = t->args.global_k, .global_q = t->args.global_q,
                             .layout = t->args.layout};
    attn_status s = attn_sdpa_backward(&bd, &ba);
    free(d_o);
    free(o);
    return s == ATTN_OK ? 0 : -1;
}

void test_sparse_dropout(void **state)
{
    (void)state;
    int fails = 0;
    for (int k = 0; k < 6; k++) {
        static const int32_t kl[2] = {70, 31}, ql[2] = {45, 20};
        tcase c = tcase_default(2, 4, 2, 45, 70, 16, 12);
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = 14000 + (uint64_t)k;
        c.use_gk = k != 2;
        c.use_gq = k % 2;
        c.gk_rate = c.gq_rate = 0.1;
        c.wl = 5;
        c.wr = k == 3 ? 0 : 5;
        c.align = k % 2;
        c.bs = k >= 2 ? 16 : 0;
        c.lay_per_head = k == 3;
        c.lay_keep = 0.6;
        if (k >= 4) {
            /* scattered global queries: several per item, item edges */
            c.use_gq = 1;
            c.gq_step = k == 4 ? 3 : 0;
            c.gq_edges = k == 5;
        }
        if (k == 1 || k == 5) {
            c.use_kv_lens = c.use_q_lens = 1;
            memcpy(c.kv_lens, kl, sizeof kl);
            memcpy(c.q_lens, ql, sizeof ql);
        }
        tcase tw = c;
        tw.dense_twin = 1;
        tinst t, t2;
        assert_int_equal(tinst_build(&t, &c), 0);
        assert_int_equal(tinst_build(&t2, &tw), 0);
        const double p = k % 2 ? 0.5 : 0.1;
        t.desc.dropout_p = t2.desc.dropout_p = p;
        t.desc.dropout_seed = t2.desc.dropout_seed = 99 + (uint64_t)k;
        t.desc.dropout_offset = t2.desc.dropout_offset = 7;
        assert_int_equal(tinst_run(&t), ATTN_OK);
        assert_int_equal(tinst_run(&t2), ATTN_OK);
        ref_out ro;
        assert_int_equal(ref_sdpa_alloc(&t.desc, &t.args, &ro), 0);
        const attn_sdpa_desc *d = &t.desc, *d2 = &t2.desc;
        long bad = 0;
        for (int64_t b = 0; b < d->batch; b++)
            for (int64_t h = 0; h < d->q_heads; h++)
                for (int64_t i = 0; i < d->q_len; i++) {
                    const size_t row = (size_t)((b * d->q_heads + h) * d->q_len + i);
                    double prel, orel, ltol;
                    ref_row_tolerance(d->qk_dim, ro.nvis[row], ro.s_abs[row], ro.lse[row], &prel,
                                      &orel, &ltol);
                    const float *o1 = t.args.o + b * d->o.batch + h * d->o.head + i * d->o.seq;
                    const float *o2 = t2.args.o + b * d2->o.batch + h * d2->o.head + i * d2->o.seq;
                    for (int64_t x = 0; x < d->v_dim; x++) {
                        const double tol =
                            2.0 * orel * ro.o_abs[row * (size_t)d->v_dim + (size_t)x] / (1.0 - p) +
                            REF_TINY;
                        bad += !(fabs((double)o1[x] - (double)o2[x]) <= tol);
                    }
                    const float *p1 = t.args.probs + b * d->probs.batch + h * d->probs.head +
                                      i * d->probs.seq;
                    const float *p2 = t2.args.probs + b * d2->probs.batch + h * d2->probs.head +
                                      i * d2->probs.seq;
                    for (int64_t j = 0; j < d->kv_len; j++) {
                        const double pr = ro.p ? ro.p[row * (size_t)d->kv_len + (size_t)j] : 1.0;
                        bad += !(fabs((double)p1[j] - (double)p2[j]) <=
                                 2.0 * prel * pr / (1.0 - p) + REF_TINY);
                    }
                }
        ref_out_free(&ro);
        /* threads: the same bits */
        tsnap s1, s3;
        tsnap_take(&s1, &t);
        t.desc.threads = 3;
        assert_int_equal(tinst_run(&t), ATTN_OK);
        tsnap_take(&s3, &t);
        if (!tsnap_equal(&s1, &s3)) {
            printf("FAIL sparse dropout: threads 3 gives other bits: %s\n", tcase_str(&c));
            fails++;
        }
        tsnap_free(&s1);
        tsnap_free(&s3);
        /* the backward against the twin's */
        float *g1[3], *g2[3];
        size_t n1[3], n2[3];
        assert_int_equal(bwd_dense_grads(&t, g1, n1), 0);
        assert_int_equal(bwd_dense_grads(&t2, g2, n2), 0);
        for (int x = 0; x < 3; x++) {
            const double scale = 1.0 + max_abs(g2[x], n2[x]);
            for (size_t e = 0; e < n1[x]; e++)
                bad += !(fabs((double)g1[x][e] - (double)g2[x][e]) <= 1e-4 * scale);
            free(g1[x]);
            free(g2[x]);
        }
        if (bad) {
            printf("FAIL sparse dropout: %ld elements differ from the dense twin: %s\n", bad,
                   tcase_str(&c));
            fails++;
        }
        tinst_free(&t);
        tinst_free(&t2);
    }
    printf("[checks]   sparse dropout: 6 cases vs their dense twins, fwd and bwd\n");
    if (fails)
        fail_msg("%d sparse dropout failures", fails);
}

/* ------------------------------------------------- the typed backward */

/* One configuration of test_bwd_types: shape, options, the four types
 * (Q, K, V, O with dO), the engine and the sparse options (1: global keys
 * and queries, 2: also a per-head layout of 16 x 16 blocks). */
typedef struct bwd_tcfg {
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int causal, lens, bias;
    double drop;
    int qt, kt, vt, ot;
    attn_engine engine;
    int sparse;
} bwd_tcfg;

static void round_to(int ty, float *x, uint16_t *h, size_t n)
{
    if (ty == ATTN_DTYPE_F32)
        return;
    attn_dtype_encode((attn_dtype)ty, x, h, (int64_t)n);
    attn_dtype_decode((attn_dtype)ty, h, x, (int64_t)n);
}

/*
 * The backward with per-tensor types against the fp32 backward on the same
 * (rounded) values, outside the float64 table (whose cases give every
 * tensor one type): Q, K, V, dO drawn and rounded to their types, O the
 * fp32 forward's rounded to O's type, the same lse; then
 *   - widened configurations (not all BF16, or the BLAS engine): each
 *     16-bit gradient bitwise equal to the fp32 gradient rounded to its
 *     type (attn_dtype_encode), each fp32 one and dBias bitwise equal (what
 *     attn.h promises: the fp32 call on the widened values);
 *   - BF16 products (all BF16 on the tile engine): each gradient within
 *     2^-5 max|g| of the fp32 one (P and dS rounded to BF16 move a sum by
 *     about 2^-9 of its terms; a dropped or misplaced term moves it by
 *     O(1)), dBias (fp32, from the unrounded dS) within 2^-12 max|dBias|;
 *   - threads 1 and 3: the same bits.
 * With dropout, causal windows, lengths, GQA and dBias, odd and even head
 * dims, several key tiles; and with the sparse options (global tokens, a
 * layout), which are always widened (all BF16 on the tile engine too).
 */
void test_bwd_types(void **state)
{
    (void)state;
    enum { F32 = ATTN_DTYPE_F32, F16 = ATTN_DTYPE_F16, BF = ATTN_DTYPE_BF16 };
    static const bwd_tcfg cfgs[] = {
        /* widened */
        {2, 4, 2, 100, 300, 40, 24, 1, 0, 1, 0.1, F16, F16, F16, F16, ATTN_ENGINE_TILE, 0},
        {2, 2, 1, 70, 520, 32, 32, 0, 1, 0, 0.0, BF, F16, F32, F32, ATTN_ENGINE_AUTO, 0},
        {1, 3, 3, 65, 90, 33, 17, 1, 0, 0, 0.2, F32, BF, BF, F16, ATTN_ENGINE_TILE, 0},
        {2, 2, 2, 80, 270, 64, 64, 1, 1, 1, 0.0, BF, BF, BF, BF, ATTN_ENGINE_BLAS, 0},
        {1, 4, 1, 33, 47, 17, 40, 0, 0, 1, 0.0, F16, F32, F32, BF, ATTN_ENGINE_AUTO, 0},
        {1, 2, 2, 50, 60, 16, 16, 0, 0, 0, 0.0, F32, F32, F32, F16, ATTN_ENGINE_BLAS, 0},
        /* BF16 products */
        {2, 4, 2, 130, 300, 64, 64, 1, 0, 0, 0.2, BF, BF, BF, BF, ATTN_ENGINE_TILE, 0},
        {2, 2, 2, 77, 530, 33, 48, 0, 1, 1, 0.0, BF, BF, BF, BF, ATTN_ENGINE_TILE, 0},
        {1, 2, 1, 1, 5, 8, 8, 0, 0, 0, 0.0, BF, BF, BF, BF, ATTN_ENGINE_TILE, 0},
        /* the sparse options: widened at every type */
        {2, 4, 2, 90, 300, 24, 20, 1, 1, 1, 0.1, BF, F16, F32, BF, ATTN_ENGINE_AUTO, 1},
        {2, 2, 1, 70, 130, 33, 16, 0, 0, 1, 0.0, BF, BF, BF, BF, ATTN_ENGINE_TILE, 2},
        {1, 3, 3, 40, 280, 16, 17, 0, 1, 0, 0.2, F32, F16, BF, F16, ATTN_ENGINE_BLAS, 2},
    };
    int fails = 0;
    trng r;
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const bwd_tcfg *c = &cfgs[ci];
        trng_seed(&r, 31000 + ci);
        const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, dk = c->dk,
                      dv = c->dv;
        const size_t nq = (size_t)(B * Hq * n), nk = (size_t)(B * Hkv * m);
        const size_t cnt[9] = {nq * (size_t)dk, nk * (size_t)dk, nk * (size_t)dv,
                               nq * (size_t)dv, nq * (size_t)dv, nq,
                               nq * (size_t)dk, nk * (size_t)dk, nk * (size_t)dv};
        /* q k v o dO lse dq dk dv, fp32 and 16-bit; the typed run's dq dk dv */
        float *f[9];
        uint16_t *h[9];
        for (int x = 0; x < 9; x++) {
            f[x] = malloc(cnt[x] * sizeof(float));
            h[x] = malloc(cnt[x] * sizeof(uint16_t));
            assert_non_null(f[x]);
            assert_non_null(h[x]);
        }
        float *g2[3];
        for (int x = 0; x < 3; x++) {
            g2[x] = malloc(cnt[6 + x] * sizeof(float));
            assert_non_null(g2[x]);
        }
        const size_t nb = c->bias ? (size_t)(B * n * m) : 1;
        float *bias = malloc(nb * sizeof(float)), *db1 = malloc(nb * sizeof(float)),
              *db2 = malloc(nb * sizeof(float));
        assert_non_null(bias);
        assert_non_null(db1);
        assert_non_null(db2);
        const int tys[5] = {c->qt, c->kt, c->vt, c->ot, c->ot};
        for (int x = 0; x < 5; x++)
            if (x != 3) {
                for (size_t e = 0; e < cnt[x]; e++)
                    f[x][e] = (float)trng_uniform(&r, -1.5, 1.5);
                round_to(tys[x], f[x], h[x], cnt[x]);
            }
        for (size_t e = 0; e < nb; e++)
            bias[e] = (float)trng_uniform(&r, -2.0, 2.0);
        int32_t kvl[2] = {(int32_t)m, (int32_t)(m * 2 / 3)}, ql[2] = {(int32_t)(n / 2),
                                                                       (int32_t)n};
        /* sparse: global keys and queries (a few, drawn), a per-head
         * layout of 16 x 16 blocks (about half kept) */
        const int64_t nlb = (n + 15) / 16, mlb = (m + 15) / 16;
        uint8_t *gk = malloc((size_t)(B * m)), *gq = malloc((size_t)(B * n)),
                *lay = malloc((size_t)(Hq * nlb * mlb));
        assert_non_null(gk);
        assert_non_null(gq);
        assert_non_null(lay);
        for (int64_t e = 0; e < B * m; e++)
            gk[e] = trng_bool(&r, 0.05);
        for (int64_t e = 0; e < B * n; e++)
            gq[e] = trng_bool(&r, 0.08);
        for (int64_t e = 0; e < Hq * nlb * mlb; e++)
            lay[e] = trng_bool(&r, 0.5);

        attn_sdpa_desc d;
        attn_sdpa_desc_init(&d);
        d.batch = B, d.q_heads = Hq, d.kv_heads = Hkv, d.q_len = n, d.kv_len = m;
        d.qk_dim = dk, d.v_dim = dv;
        d.q = d.o = attn_view_bhsd(Hq, n, dk);
        d.o = attn_view_bhsd(Hq, n, dv);
        d.k = attn_view_bhsd(Hkv, m, dk);
        d.v = attn_view_bhsd(Hkv, m, dv);
        d.want_lse = 1;
        d.lse = attn_view_bhsd(Hq, n, 1);
        d.engine = c->engine;
        if (c->causal) {
            d.window_right = 0;
            d.align = ATTN_ALIGN_BOTTOM_RIGHT;
        }
        d.use_kv_lens = d.use_q_lens = c->lens;
        if (c->bias) {
            d.use_bias = 1;
            d.bias = (attn_view){(int64_t)n * m, 0, m};  /* broadcast over heads */
        }
        if (c->drop > 0.0) {
            d.dropout_p = c->drop;
            d.dropout_seed = 77 + ci;
        }
        if (c->sparse) {
            d.use_global_k = d.use_global_q = 1;
            if (c->sparse == 2) {
                d.block_size = 16;
                d.layout_per_head = 1;
            } else {
                d.window_left = 8;   /* (with the causal right edge) */
            }
        }
        /* the fp32 forward: O rounded to O's type, lse */
        attn_sdpa_args fa = {.q = f[0], .k = f[1], .v = f[2], .o = f[3], .lse = f[5],
                             .kv_lens = c->lens ? kvl : NULL, .q_lens = c->lens ? ql : NULL,
                             .bias = c->bias ? bias : NULL,
                             .global_k = c->sparse ? gk : NULL,
                             .global_q = c->sparse ? gq : NULL,
                             .layout = c->sparse == 2 ? lay : NULL};
        assert_int_equal(attn_sdpa(&d, &fa), ATTN_OK);
        /* (padded rows: O written 0, lse -inf; fine as inputs) */
        round_to(tys[3], f[3], h[3], cnt[3]);

        attn_sdpa_bwd_desc bd;
        attn_sdpa_bwd_desc_init(&bd);
        bd.fwd = d;
        bd.d_o = d.o;
        bd.dq = d.q;
        bd.dk = d.k;
        bd.dv = d.v;
        bd.want_dbias = c->bias;
        if (c->bias)
            bd.dbias = d.bias;
        attn_sdpa_bwd_args a1 = {.q = f[0], .k = f[1], .v = f[2], .o = f[3], .d_o = f[4],
                                 .lse = f[5], .kv_lens = fa.kv_lens, .q_lens = fa.q_lens,
                                 .bias = fa.bias, .dq = f[6], .dk = f[7], .dv = f[8],
                                 .dbias = c->bias ? db1 : NULL, .global_k = fa.global_k,
                                 .global_q = fa.global_q, .layout = fa.layout};
        assert_int_equal(attn_sdpa_backward(&bd, &a1), ATTN_OK);

        /* the typed call */
        attn_sdpa_bwd_desc bt = bd;
        bt.fwd.q_type = (attn_dtype)c->qt;
        bt.fwd.k_type = (attn_dtype)c->kt;
        bt.fwd.v_type = (attn_dtype)c->vt;
        bt.fwd.o_type = (attn_dtype)c->ot;
        attn_sdpa_bwd_args16 a16;
        attn_sdpa_bwd_args16_init(&a16);
        attn_sdpa_bwd_args a2 = a1;
        a2.dbias = c->bias ? db2 : NULL;
        const int gty[3] = {c->qt, c->kt, c->vt};
        for (int x = 0; x < 3; x++) {
            const float **in = x == 0 ? &a2.q : x == 1 ? &a2.k : &a2.v;
            const uint16_t **in16 = x == 0 ? &a16.q : x == 1 ? &a16.k : &a16.v;
            float **out = x == 0 ? &a2.dq : x == 1 ? &a2.dk : &a2.dv;
            uint16_t **out16 = x == 0 ? &a16.dq : x == 1 ? &a16.dk : &a16.dv;
            if (gty[x] != F32) {
                *in = NULL;
                *in16 = h[x];
                *out = NULL;
                *out16 = h[6 + x];
            } else {
                *out = g2[x];
            }
        }
        if (c->ot != F32) {
            a2.o = a2.d_o = NULL;
            a16.o = h[3];
            a16.d_o = h[4];
        }
        const int typed = c->qt != F32 || c->kt != F32 || c->vt != F32 || c->ot != F32;
        a2.args16 = typed ? &a16 : NULL;
        attn_engine eng = ATTN_ENGINE_AUTO;
        assert_int_equal(attn_engine_resolve(c->engine, &eng), ATTN_OK);
        const int bfp = c->qt == BF && c->kt == BF && c->vt == BF && c->ot == BF &&
                        eng == ATTN_ENGINE_TILE && !c->sparse;
        /* (with MKL the sparse configurations' widened copies, other
         * leading dimensions than the fp32 buffers, agree within rounding
         * only: checked as the BF16 products are, tblas_mkl) */
        const int approx = bfp || (c->sparse && tblas_mkl());
        long bad = 0;
        double worst = 0.0;   /* BF16 products: max |g - fp32| / max |fp32| */
        uint16_t *keep16[3] = {NULL, NULL, NULL};
        float *keepdb = NULL;
        for (int th = 1; th <= 3; th += 2) {
            bt.fwd.threads = th;
            for (int x = 0; x < 3; x++)
                if (gty[x] != F32)
                    memset(h[6 + x], 0xA5, cnt[6 + x] * sizeof(uint16_t));
            attn_status st = attn_sdpa_backward(&bt, &a2);
            if (st != ATTN_OK) {
                printf("FAIL typed backward %zu: %s\n", ci, attn_status_str(st));
                fails++;
                break;
            }
            if (th == 1) {
                for (int x = 0; x < 3; x++) {
                    const size_t ne = cnt[6 + x];
                    double mx = 0.0;
                    for (size_t e = 0; e < ne; e++)
                        mx = fmax(mx, fabs((double)f[6 + x][e]));
                    for (size_t e = 0; e < ne; e++) {
                        float got;
                        if (gty[x] != F32)
                            attn_dtype_decode((attn_dtype)gty[x], h[6 + x] + e, &got, 1);
                        else
                            got = g2[x][e];
                        if (!approx) {
                            uint16_t want16 = 0;
                            if (gty[x] != F32)
                                attn_dtype_encode((attn_dtype)gty[x], f[6 + x] + e, &want16, 1);
                            const int same = gty[x] != F32
                                                 ? h[6 + x][e] == want16
                                                 : memcmp(&got, f[6 + x] + e, sizeof got) == 0;
                            if (!same && bad++ < 5)
                                printf("  cfg %zu grad %d elem %zu: %.9g, fp32 %.9g (not bitwise)\n",
                                       ci, x, e, (double)got, (double)f[6 + x][e]);
                        } else if (worst = fmax(worst, fabs((double)got - (double)f[6 + x][e]) /
                                                           (mx + 1e-30)),
                                   !(fabs((double)got - (double)f[6 + x][e]) <=
                                     ldexp(mx, -5) + 1e-30)) {
                            if (bad++ < 5)
                                printf("  cfg %zu grad %d elem %zu: %.9g, fp32 %.9g, max %.3g\n",
                                       ci, x, e, (double)got, (double)f[6 + x][e], mx);
                        }
                    }
                }
                if (c->bias) {
                    double mx = 0.0;
                    for (size_t e = 0; e < nb; e++)
                        mx = fmax(mx, fabs((double)db1[e]));
                    for (size_t e = 0; e < nb; e++) {
                        const int ok = approx ? fabs((double)db2[e] - (double)db1[e]) <=
                                                 ldexp(mx, -12) + 1e-30
                                           : memcmp(db2 + e, db1 + e, sizeof(float)) == 0;
                        if (!ok && bad++ < 5)
                            printf("  cfg %zu dBias elem %zu: %.9g, fp32 %.9g\n", ci, e,
                                   (double)db2[e], (double)db1[e]);
                    }
                }
                for (int x = 0; x < 3; x++) {
                    const size_t by = cnt[6 + x] * (gty[x] != F32 ? 2 : 4);
                    keep16[x] = malloc(by);
                    assert_non_null(keep16[x]);
                    memcpy(keep16[x], gty[x] != F32 ? (void *)h[6 + x] : (void *)g2[x], by);
                }
                keepdb = malloc(nb * sizeof(float));
                assert_non_null(keepdb);
                memcpy(keepdb, db2, nb * sizeof(float));
            } else {
                for (int x = 0; x < 3; x++) {
                    const size_t by = cnt[6 + x] * (gty[x] != F32 ? 2 : 4);
                    if (memcmp(keep16[x], gty[x] != F32 ? (void *)h[6 + x] : (void *)g2[x], by))
                        bad++, printf("  cfg %zu grad %d: threads 3 gives other bits\n", ci, x);
                }
                if (c->bias && memcmp(keepdb, db2, nb * sizeof(float)))
                    bad++, printf("  cfg %zu dBias: threads 3 gives other bits\n", ci);
            }
        }
        printf("[checks]   typed backward cfg %zu: types q%d k%d v%d o%d, %s, engine %d%s: %s",
               ci, c->qt, c->kt, c->vt, c->ot,
               bfp ? "BF16 products" : approx ? "widened (MKL: within rounding)" : "widened (bitwise)",
               (int)c->engine, c->sparse == 2 ? ", global tokens + layout"
                               : c->sparse ? ", global tokens" : "", bad ? "FAIL" : "ok");
        if (approx)
            printf(" (max |g - fp32| / max |fp32| = %.2e)", worst);
        printf("\n");
        fails += bad != 0;
        for (int x = 0; x < 3; x++)
            free(keep16[x]);
        free(keepdb);
        for (int x = 0; x < 9; x++) {
            free(f[x]);
            free(h[x]);
        }
        for (int x = 0; x < 3; x++)
            free(g2[x]);
        free(bias);
        free(db1);
        free(db2);
        free(gk);
        free(gq);
        free(lay);
    }
    if (fails)
        fail_msg("%d typed backward configurations failed", fails);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    const char *suite = argc > 1 ? argv[1] : NULL;
    /* "types" also reruns the generated forward families of sdpa, paths,
     * random and sparse at BF16 and F16; "types bf16" does the types
     * families and the BF16 reruns only, "types f16" the F16 reruns only
     * (meson's types-bf16 and types-f16: two halves that run side by
     * side). */
    const int types = suite && !strcmp(suite, "types");
    static const int dtypes[] = {ATTN_DTYPE_BF16, ATTN_DTYPE_F16};
    static const char *const dtype_names[] = {"bf16", "f16"};
    const char *half = types && argc > 2 ? argv[2] : NULL;
    if (half && strcmp(half, dtype_names[0]) != 0 && strcmp(half, dtype_names[1]) != 0) {
        fprintf(stderr, "%s: types takes bf16 or f16, not '%s'\n", argv[0], half);
        return 1;
    }
    struct CMUnitTest *tests = calloc((size_t)tfamily_count * 3, sizeof *tests);
    typed_family *typed = calloc((size_t)tfamily_count * 2, sizeof *typed);
    if (!tests || !typed)
        return 1;
    size_t count = 0, ntyped = 0;
    for (int k = 0; k < tfamily_count; k++) {
        const tfamily *f = &tfamilies[k];
        if (types && f->gen &&
            (!strcmp(f->suite, "sdpa") || !strcmp(f->suite, "paths") ||
             !strcmp(f->suite, "random") || !strcmp(f->suite, "sparse")))
            for (int x = 0; x < 2; x++) {
                if (half && strcmp(half, dtype_names[x]) != 0)
                    continue;
                typed_family *tf = &typed[ntyped++];
                tf->f = *f;
                tf->dtype = dtypes[x];
                snprintf(tf->name, sizeof tf->name, "%s %s", f->name, dtype_names[x]);
                tests[count].name = tf->name;
                tests[count].test_func = run_typed_family;
                tests[count].initial_state = tf;
                count++;
            }
        if ((suite && strcmp(suite, f->suite) != 0) || (half && !strcmp(half, dtype_names[1])))
            continue;
        tests[count].name = f->name;
        tests[count].test_func = f->special ? f->special : run_family;
        tests[count].initial_state = (void *)(uintptr_t)f;
        count++;
    }
    if (count == 0) {
        fprintf(stderr,
                "%s: no families in suite '%s' (sdpa, threads, paths, random, sparse, types)\n",
                argv[0], suite);
        free(tests);
        return 1;
    }
    int rc = _cmocka_run_group_tests(suite ? suite : "sdpa-all", tests, count, NULL, NULL);
    free(tests);
    free(typed);
    return rc;
}
