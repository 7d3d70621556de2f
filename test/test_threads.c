/*
 * test_threads.c -- results bitwise identical for desc.threads = 1, 2, 3, 4
 * and 0; one plan executed concurrently from several pthreads (own buffers,
 * own or NULL workspace) giving the bits of a single-threaded run; the same
 * from inside the caller's OpenMP parallel region when built with OpenMP.
 * The threads = 1 result of each case is also checked against the float64
 * reference (tolerances: see test_sdpa.c).
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

#ifdef _OPENMP
#include <omp.h>
#endif

static tcase thread_case(int k)
{
    tcase c;
    switch (k) {
    case 0: /* causal BR, GQA, broadcast mask, probs, lse */
        c = tcase_default(2, 8, 2, 300, 500, 64, 48);
        c.align = ATTN_ALIGN_BOTTOM_RIGHT;
        c.wr = 0;
        c.mask_mode = ATTN_MASK_KEEP_NONZERO;
        c.mask_bcast = BC_HEAD;
        c.mask_keep = 0.9;
        c.want_probs = 1;
        c.want_lse = 1;
        break;
    case 1: /* bias, lengths, sliding window, padded layouts */
        c = tcase_default(3, 4, 4, 129, 257, 40, 24);
        c.layout = LAY_PADDED;
        c.out_layout = OUT_PADDED;
        c.wl = 50;
        c.wr = 10;
        c.use_bias = 1;
        c.bias_bcast = BC_BATCH;
        c.bias_ninf = 0.05;
        c.use_kv_lens = 1;
        c.kv_lens[0] = 257;
        c.kv_lens[1] = 0;
        c.kv_lens[2] = 100;
        c.use_q_lens = 1;
        c.q_lens[0] = 129;
        c.q_lens[1] = 64;
        c.q_lens[2] = 1;
        c.want_lse = 1;
        break;
    case 2: /* decode: one query, many keys, MQA */
        c = tcase_default(2, 4, 1, 1, 1023, 64, 64);
        c.align = ATTN_ALIGN_BOTTOM_RIGHT;
        c.wr = 0;
        c.want_lse = 1;
        c.want_probs = 1;
        break;
    default: /* one long head: parallel only across query blocks */
        c = tcase_default(1, 1, 1, 1023, 1023, 32, 32);
        c.wr = 0;
        c.mask_mode = ATTN_MASK_DROP_NONZERO;
        c.mask_bcast = BC_BATCH | BC_HEAD;
        c.mask_keep = 0.95;
        c.want_probs = 1;
        c.want_lse = 1;
        c.poison = 1;
        break;
    }
    c.seed = 5000 + (uint64_t)k;
    return c;
}

static void test_threads_bitwise(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "threads 1/2/3/4/0");
    int fails = 0;
    const int threads[] = {1, 2, 4, 3, 0};
    const int ncases = tquick() ? 2 : 4;
    const size_t nthreads = tquick() ? 3 : sizeof threads / sizeof threads[0];
    for (int k = 0; k < ncases; k++) {
        tsnap first;
        memset(&first, 0, sizeof first);
        for (size_t x = 0; x < nthreads; x++) {
            tcase c = thread_case(k);
            c.threads = threads[x];
            tinst t;
            assert_int_equal(tinst_build(&t, &c), 0);
            attn_status s = tinst_run(&t);
            if (s != ATTN_OK) {
                printf("FAIL threads=%d: %s\n", threads[x], attn_status_str(s));
                fails++;
                tinst_free(&t);
                continue;
            }
            if (x == 0) {
                fails += tinst_check(&t, &st) != 0;
                tsnap_take(&first, &t);
            } else {
                tsnap snap;
                tsnap_take(&snap, &t);
                if (!tsnap_equal(&first, &snap)) {
                    printf("FAIL threads=%d differs bitwise from threads=1: %s\n",
                           threads[x], tcase_str(&c));
                    fails++;
                }
                tsnap_free(&snap);
            }
            tinst_free(&t);
        }
        tsnap_free(&first);
    }
    tstats_print(&st);
    if (fails)
        fail_msg("%d thread-count comparisons failed", fails);
}

/* ------------------------------------------------ concurrent executions */

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

/* Worker case: fixed layout (so that one plan fits every worker's
 * buffers), inputs differing by seed. */
static tcase worker_case(int plan_threads, uint64_t seed)
{
    tcase c = tcase_default(2, 4, 2, 97, 161, 32, 24);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wl = 64;
    c.wr = 0;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 161;
    c.kv_lens[1] = 77;
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.mask_keep = 0.9;
    c.use_bias = 1;
    c.bias_bcast = BC_HEAD | BC_SEQ;
    c.want_probs = 1;
    c.want_lse = 1;
    c.threads = plan_threads;
    c.seed = seed;
    return c;
}

static void run_concurrent(int plan_threads, int *fails, tstats *st)
{
    pthread_barrier_t barrier;
    worker w[NWORKERS];
    tcase c0 = worker_case(plan_threads, 7000);
    tinst t0;
    assert_int_equal(tinst_build(&t0, &c0), 0);
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t0.desc), ATTN_OK);
    size_t ws = 0;
    assert_int_equal(attn_sdpa_workspace_size(plan, &ws), ATTN_OK);
    tinst_free(&t0);
    assert_int_equal(pthread_barrier_init(&barrier, NULL, NWORKERS), 0);

    for (int i = 0; i < NWORKERS; i++) {
        tcase c = worker_case(plan_threads, 7100 + (uint64_t)i);
        memset(&w[i], 0, sizeof w[i]);
        assert_int_equal(tinst_build(&w[i].t, &c), 0);
        /* expected bits: a single-threaded run of the same plan */
        assert_int_equal(attn_sdpa_execute(plan, &w[i].t.args, NULL, 0), ATTN_OK);
        *fails += tinst_check(&w[i].t, st) != 0;
        tsnap_take(&w[i].expect, &w[i].t);
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
        if (w[i].failures) {
            printf("FAIL plan threads=%d, worker %d: %d of %d concurrent executions "
                   "failed or differed bitwise\n", plan_threads, i, w[i].failures,
                   w[i].iters);
            (*fails)++;
        }
        tsnap_free(&w[i].expect);
        tinst_free(&w[i].t);
    }
    pthread_barrier_destroy(&barrier);
    attn_sdpa_plan_destroy(plan);
}

static void test_concurrent_pthreads(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "concurrent pthreads");
    int fails = 0;
    run_concurrent(1, &fails, &st);
    run_concurrent(2, &fails, &st);
    tstats_print(&st);
    if (fails)
        fail_msg("%d concurrency failures", fails);
}

static void test_openmp_region(void **state)
{
    (void)state;
#ifdef _OPENMP
    tstats st;
    tstats_init(&st, "caller openmp region");
    int fails = 0;
    for (int pt = 1; pt <= 2; pt++) {
        enum { N = 6 };
        tinst t[N];
        tsnap expect[N];
        attn_sdpa_plan *plan = NULL;
        for (int i = 0; i < N; i++) {
            tcase c = worker_case(pt, 8000 + (uint64_t)i);
            assert_int_equal(tinst_build(&t[i], &c), 0);
            if (i == 0)
                assert_int_equal(attn_sdpa_plan_create(&plan, &t[0].desc), ATTN_OK);
            assert_int_equal(attn_sdpa_execute(plan, &t[i].args, NULL, 0), ATTN_OK);
            fails += tinst_check(&t[i], &st) != 0;
            tsnap_take(&expect[i], &t[i]);
            tinst_clear_outputs(&t[i]);
        }
        int bad = 0;
#pragma omp parallel for num_threads(3) schedule(dynamic, 1) reduction(+ : bad)
        for (int i = 0; i < N; i++) {
            if (attn_sdpa_execute(plan, &t[i].args, NULL, 0) != ATTN_OK) {
                bad++;
                continue;
            }
            tsnap got;
            tsnap_take(&got, &t[i]);
            if (!tsnap_equal(&expect[i], &got))
                bad++;
            tsnap_free(&got);
        }
        if (bad) {
            printf("FAIL plan threads=%d: %d executions inside an OpenMP region failed "
                   "or differed bitwise\n", pt, bad);
            fails++;
        }
        for (int i = 0; i < N; i++) {
            tsnap_free(&expect[i]);
            tinst_free(&t[i]);
        }
        attn_sdpa_plan_destroy(plan);
    }
    tstats_print(&st);
    if (fails)
        fail_msg("%d failures inside an OpenMP region", fails);
#else
    printf("built without OpenMP: skipped\n");
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_concurrent_pthreads),
        cmocka_unit_test(test_openmp_region),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
