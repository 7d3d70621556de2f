/*
 * test_paths.c -- the execution paths attn picks from the shape, each
 * against the float64 reference (tolerances of reference.h, as everywhere)
 * and bitwise across thread counts 1, 2 and 4:
 *
 * - split-K: short queries over many keys with few (batch, group, block)
 *   items are split into key chunks merged by logsumexp (n <= 64 and
 *   B * Hkv * ceil(n / 512) < 16, m > 512);
 * - GQA stacking: the g query heads of a group as the rows of one GEMM
 *   (BHSD-like layouts with the whole of n in one block, g * n <= 512), and
 *   the same cases in BSHD, which cannot stack;
 * - uneven tiles: the causal diagonal and window edges go in sub-blocks of
 *   64 rows over their own key columns (n, m of several hundred);
 * - several query blocks and key tiles (n > 512, m > 512).
 * Every family runs with lengths, masks, bias, P and lse switched on in
 * turn, and with NaN poison in every hidden position (ATTN_TEST_QUICK=1, as
 * under valgrind: only the all-options poisoned set, threads 1 and 2).
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

#include <attn.h>

#include "harness.h"

/* Run c at threads 1, 2 and 4: the first against the reference, the others
 * bitwise against the first.  Returns the number of failures. */
static int run_threads(tcase c, tstats *st)
{
    static const int threads[] = { 1, 2, 4 };
    const int nthreads = tquick() ? 2 : 3;
    int fails = 0;
    tsnap first;
    memset(&first, 0, sizeof first);
    for (int x = 0; x < nthreads; x++) {
        c.threads = threads[x];
        tinst t;
        if (tinst_build(&t, &c) != 0) {
            printf("FAIL: cannot build %s\n", tcase_str(&c));
            return fails + 1;
        }
        attn_status s = tinst_run(&t);
        if (s != ATTN_OK) {
            printf("FAIL threads=%d: %s: %s\n", c.threads, attn_status_str(s), tcase_str(&c));
            fails++;
        } else if (x == 0) {
            fails += tinst_check(&t, st) != 0;
            tsnap_take(&first, &t);
        } else {
            tsnap snap;
            tsnap_take(&snap, &t);
            if (!tsnap_equal(&first, &snap)) {
                printf("FAIL threads=%d differs bitwise from threads=1: %s\n", c.threads,
                       tcase_str(&c));
                fails++;
            }
            tsnap_free(&snap);
        }
        tinst_free(&t);
    }
    tsnap_free(&first);
    return fails;
}

/* Option set k (0..5) on top of a case. */
static void options(tcase *c, int k, trng *r)
{
    switch (k) {
    case 0:
        break;
    case 1: /* lengths + bottom-right causal */
        c->use_kv_lens = 1;
        c->use_q_lens = 1;
        for (int b = 0; b < c->B; b++) {
            c->kv_lens[b] = (int32_t)trng_int(r, 0, c->m);
            c->q_lens[b] = (int32_t)trng_int(r, 0, c->n);
        }
        c->kv_lens[0] = (int32_t)c->m;
        c->q_lens[0] = (int32_t)c->n;
        c->align = ATTN_ALIGN_BOTTOM_RIGHT;
        c->wr = 0;
        break;
    case 2: /* per-head mask and bias */
        c->mask_mode = ATTN_MASK_KEEP_NONZERO;
        c->mask_keep = 0.8;
        c->use_bias = 1;
        c->bias_ninf = 0.05;
        break;
    case 3: /* broadcast drop-mask, window */
        c->mask_mode = ATTN_MASK_DROP_NONZERO;
        c->mask_bcast = BC_HEAD | BC_SEQ;
        c->mask_keep = 0.9;
        c->wl = c->m / 3;
        c->wr = 7;
        break;
    case 4: /* everything, poisoned */
        c->use_kv_lens = 1;
        for (int b = 0; b < c->B; b++)
            c->kv_lens[b] = (int32_t)trng_int(r, c->m / 2, c->m);
        c->mask_mode = ATTN_MASK_KEEP_NONZERO;
        c->mask_keep = 0.95;
        c->use_bias = 1;
        c->poison = 1;
        c->align = ATTN_ALIGN_BOTTOM_RIGHT;
        c->wl = c->m / 2;
        break;
    default: /* large logits, top-left causal */
        c->in_mag = 6.0;
        c->wr = 0;
        break;
    }
    c->want_probs = k != 3;
    c->want_lse = 1;
}

#define FINISH(st, fails)                                                   \
    do {                                                                    \
        tstats_print(st);                                                   \
        if ((fails) != 0)                                                   \
            fail_msg("%d case(s) failed in %s", (fails), (st)->family);     \
    } while (0)

static void test_split_k(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "split-K (decode)");
    int fails = 0;
    trng r;
    trng_seed(&r, 9100);
    /* B, Hq, Hkv, n, m, dk, dv */
    static const int64_t shapes[][7] = {
        { 1, 8, 1, 1, 3000, 64, 64 },    /* MQA decode, 6 chunks */
        { 1, 4, 4, 1, 1100, 32, 48 },    /* MHA decode, 3 chunks */
        { 2, 8, 2, 8, 2000, 40, 24 },    /* short queries, GQA stacked */
        { 1, 6, 3, 5, 777, 16, 16 },     /* odd sizes, 2 chunks */
        { 3, 4, 1, 33, 1500, 8, 8 },     /* n > 32, 2 chunks */
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int k = tquick() ? 4 : 0; k < (tquick() ? 5 : 6); k++) {
            const int64_t *x = shapes[s];
            tcase c = tcase_default(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
            c.seed = 9100 + 10 * s + (uint64_t)k;
            options(&c, k, &r);
            fails += run_threads(c, &st);
        }
    FINISH(&st, fails);
}

static void test_gqa_stacking(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "gqa stacking");
    int fails = 0;
    trng r;
    trng_seed(&r, 9200);
    static const int64_t shapes[][7] = {
        { 2, 8, 2, 100, 300, 32, 32 },   /* g 4, 400 stacked rows */
        { 1, 6, 2, 1, 700, 16, 8 },      /* decode, stacked by head stride */
        { 2, 12, 3, 37, 90, 8, 12 },
        { 1, 16, 2, 64, 600, 24, 24 },   /* g * n = 512: the limit */
        { 1, 16, 2, 65, 200, 24, 24 },   /* just over: not stacked */
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int lay = 0; lay < 2; lay++)
            for (int k = tquick() ? 4 : 0; k < (tquick() ? 5 : 6); k++) {
                const int64_t *x = shapes[s];
                tcase c = tcase_default(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
                c.layout = lay ? LAY_BSHD : LAY_BHSD;
                c.out_layout = lay ? OUT_BSHD : OUT_BHSD;
                c.seed = 9200 + 20 * s + 10 * (uint64_t)lay + (uint64_t)k;
                options(&c, k, &r);
                fails += run_threads(c, &st);
            }
    FINISH(&st, fails);
}

static void test_uneven_tiles(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "blocks, tiles, diagonal");
    int fails = 0;
    trng r;
    trng_seed(&r, 9300);
    static const int64_t shapes[][7] = {
        { 1, 2, 1, 1100, 700, 16, 16 },   /* 3 query blocks, 2 key tiles */
        { 1, 1, 1, 300, 1100, 8, 8 },     /* bottom-right diagonal far right */
        { 2, 2, 2, 520, 257, 12, 20 },
        { 1, 3, 1, 513, 513, 4, 4 },      /* one past each block size */
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int k = tquick() ? 4 : 0; k < (tquick() ? 5 : 6); k++) {
            const int64_t *x = shapes[s];
            tcase c = tcase_default(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
            c.seed = 9300 + 10 * s + (uint64_t)k;
            options(&c, k, &r);
            if (k == 0) {      /* a narrow band: most tiles uneven or hidden */
                c.wl = 40;
                c.wr = 3;
            }
            fails += run_threads(c, &st);
        }
    FINISH(&st, fails);
}

/* NaN in visible data gives NaN where it is seen, and only there: a NaN in
 * a Q row poisons that row; a NaN in a K row poisons exactly the rows that
 * see that key (here: causal, key 600 of 700, second key tile); with
 * split-K too.  Checked at every thread count. */
static void test_nan_visible(void **state)
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_k),
        cmocka_unit_test(test_gqa_stacking),
        cmocka_unit_test(test_uneven_tiles),
        cmocka_unit_test(test_nan_visible),
    };
    return cmocka_run_group_tests_name("paths", tests, NULL, NULL);
}
