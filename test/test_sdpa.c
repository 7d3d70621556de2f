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
 * Plus two hand-written tests: the visibility table (patterns written out
 * from attn.h, independent of the reference's window code) and NaN in
 * visible data (poisons exactly the rows that see it).
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
#include "sdpa_cases.h"

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
    return c->use_kv_lens || c->use_q_lens || c->wl >= 0 || c->wr >= 0;
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
};
#define NCHECKS ((int)(sizeof checks / sizeof checks[0]))

/* ------------------------------------------------------- family runner */

static void run_family(void **state)
{
    const tfamily *f = *state;
    trows rs;
    assert_int_equal(trows_generate(&rs, f), 0);
    tstats st;
    tstats_init(&st, f->name);
    int fails = 0, rows = 0, ran[NCHECKS] = {0};
    for (int k = 0; k < rs.n; k++) {
        const trow *r = &rs.v[k];
        if (tquick() && !r->quick)
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
    printf("[checks]   %-22s rows=%d", f->name, rows);
    for (int x = 0; x < NCHECKS; x++)
        if (ran[x])
            printf(" %s=%d", checks[x].name, ran[x]);
    printf("\n");
    fflush(stdout);
    if (fails)
        fail_msg("%d failure(s) in %s", fails, f->name);
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

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    const char *suite = argc > 1 ? argv[1] : NULL;
    struct CMUnitTest *tests = calloc((size_t)tfamily_count, sizeof *tests);
    if (!tests)
        return 1;
    size_t count = 0;
    for (int k = 0; k < tfamily_count; k++) {
        const tfamily *f = &tfamilies[k];
        if (suite && strcmp(suite, f->suite) != 0)
            continue;
        tests[count].name = f->name;
        tests[count].test_func = f->special ? f->special : run_family;
        tests[count].initial_state = (void *)(uintptr_t)f;
        count++;
    }
    if (count == 0) {
        fprintf(stderr, "%s: no families in suite '%s' (sdpa, threads, paths, random)\n",
                argv[0], suite);
        free(tests);
        return 1;
    }
    int rc = _cmocka_run_group_tests(suite ? suite : "sdpa-all", tests, count, NULL, NULL);
    free(tests);
    return rc;
}
