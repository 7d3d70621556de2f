/*
 * test_sdpa.c -- functional tests of attn_sdpa against the float64
 * reference (reference.c): layouts, GQA/MQA, scale, causal and windows,
 * lengths, masks, bias, optional outputs, edge sizes, large logits, empty
 * rows, NaN poison, plan/execute/workspace equivalence.
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
 *   sentinel bits.  Each test prints one "[accuracy]" line: the largest
 *   absolute errors seen and the largest error/tolerance ratio.
 *
 * ATTN_TEST_QUICK=1 (the valgrind setup) trims the case lists.
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

/* Run a case and count it as failed (the harness prints why). */
static int run(const tcase *c, tstats *st)
{
    return tcase_run_check(c, st) != 0;
}

#define FINISH(st, fails)                                                   \
    do {                                                                    \
        tstats_print(st);                                                   \
        if ((fails) != 0)                                                   \
            fail_msg("%d case(s) failed in %s", (fails), (st)->family);     \
    } while (0)

static void test_layouts(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "layouts");
    int fails = 0;
    uint64_t seed = 100;
    for (int lay = 0; lay < LAY_COUNT_; lay++)
        for (int out = 0; out < OUT_COUNT_; out++)
            for (int mis = 0; mis < 2; mis++) {
                /* MHA packed [B][S][3][H][D] and GQA packed */
                tcase c = tcase_default(2, 4, lay == LAY_PACKED && mis ? 4 : 2, 37, 37, 24, 24);
                c.layout = lay;
                c.out_layout = out;
                c.misalign = mis;
                c.want_probs = 1;
                c.want_lse = 1;
                c.seed = seed++;
                fails += run(&c, &st);
                if (lay != LAY_PACKED) {
                    /* n != m, dk != dv */
                    c = tcase_default(3, 6, 3, 19, 45, 40, 12);
                    c.layout = lay;
                    c.out_layout = out;
                    c.misalign = mis;
                    c.want_probs = mis;
                    c.want_lse = !mis;
                    c.seed = seed++;
                    fails += run(&c, &st);
                }
            }
    /* padded layouts with several random stride draws, all options on */
    for (int k = 0; k < (tquick() ? 3 : 12); k++) {
        tcase c = tcase_default(2, 4, 2, 23, 31, 16, 20);
        c.layout = LAY_PADDED;
        c.out_layout = OUT_PADDED;
        c.misalign = k & 1;
        c.align = k % 2;
        c.wr = 0;
        c.mask_mode = 1 + k % 2;
        c.mask_bcast = k % 8;
        c.use_bias = 1;
        c.bias_bcast = (k + 3) % 8;
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* Valid but unusual views: zero strides over size-1 dimensions, outputs
 * interleaved as [S][H][B][D]. */
static void test_unusual_views(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "unusual views");
    int fails = 0;
    {
        tcase c = tcase_default(1, 3, 1, 9, 14, 8, 6);
        c.want_probs = 1;
        c.want_lse = 1;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        t.desc.q.batch = 0;
        t.desc.k.batch = t.desc.k.head = 0;
        t.desc.v.batch = t.desc.v.head = 0;
        t.desc.o.batch = 0;
        t.desc.probs.batch = 0;
        t.desc.lse.batch = 0;
        attn_status s = tinst_run(&t);
        if (s != ATTN_OK) {
            printf("FAIL zero strides over size-1 dims: %s\n", attn_status_str(s));
            fails++;
        } else {
            fails += tinst_check(&t, &st) != 0;
        }
        tinst_free(&t);
    }
    {
        const int64_t B = 2, Hq = 4, n = 7, m = 11, dv = 5;
        tcase c = tcase_default(B, Hq, 2, n, m, 8, dv);
        c.want_probs = 1;
        c.want_lse = 1;
        c.mask_mode = ATTN_MASK_DROP_NONZERO;
        c.mask_keep = 0.8;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        /* the dense buffers hold exactly B*Hq*n*(dv|m|1) elements + tail */
        t.desc.o = (attn_view){dv, B * dv, B * Hq * dv};
        t.desc.probs = (attn_view){m, B * m, B * Hq * m};
        t.desc.lse = (attn_view){1, B, B * Hq};
        attn_status s = tinst_run(&t);
        if (s != ATTN_OK) {
            printf("FAIL interleaved [S][H][B] outputs: %s\n", attn_status_str(s));
            fails++;
        } else {
            fails += tinst_check(&t, &st) != 0;
        }
        tinst_free(&t);
    }
    FINISH(&st, fails);
}

static void test_gqa_mqa(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "gqa/mqa");
    int fails = 0;
    const int64_t heads[][2] = {{8, 2}, {6, 3}, {4, 1}, {5, 1}, {3, 3}, {12, 4}, {1, 1}};
    uint64_t seed = 200;
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) {
        tcase c = tcase_default(2, heads[k][0], heads[k][1], 13, 29, 32, 17);
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
        c = tcase_default(1, heads[k][0], heads[k][1], 70, 9, 8, 64);
        c.layout = LAY_BSHD;
        c.align = ATTN_ALIGN_BOTTOM_RIGHT;
        c.wr = 0;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

static void test_scale(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "scale");
    int fails = 0;
    const float scales[] = {NAN, 0.3f, -0.7f, 0.0f, 2.5f, 1e-3f, 0.125f};
    const int64_t dks[] = {1, 7, 64};
    uint64_t seed = 300;
    for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++)
        for (size_t k = 0; k < 3; k++) {
            tcase c = tcase_default(2, 2, 1, 11, 17, dks[k], 9);
            c.scale = scales[s];
            c.want_probs = 1;
            c.want_lse = 1;
            c.seed = seed++;
            fails += run(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_causal(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "causal");
    int fails = 0;
    const int64_t nm[][2] = {{16, 16}, {10, 25}, {25, 10}, {1, 20}, {20, 1},
                             {64, 200}, {200, 64}, {130, 130}};
    uint64_t seed = 400;
    for (int align = 0; align < 2; align++)
        for (size_t k = 0; k < sizeof nm / sizeof nm[0]; k++) {
            tcase c = tcase_default(2, 2, 2, nm[k][0], nm[k][1], 16, 16);
            c.align = align;
            c.wr = 0;
            c.want_probs = 1;
            c.want_lse = 1;
            c.seed = seed++;
            fails += run(&c, &st);
        }
    FINISH(&st, fails);
}

static void test_windows(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "windows");
    int fails = 0;
    const int64_t w[][2] = {{3, -1}, {-1, 2},  {4, 4},    {0, 0},      {0, -1},
                            {-1, 0}, {2, 0},   {0, 3},    {1000, 1000}, {-7, -3},
                            {5, -2}, {-1, -1}, {40, 1},   {INT64_MIN, 0}, {INT64_MAX, 0},
                            /* huge right bounds: d(i) + window_right must not
                             * overflow (attn.h puts no upper limit on them) */
                            {0, INT64_MAX}, {INT64_MAX, INT64_MAX}, {-1, INT64_MAX - 5}};
    const int64_t nm[][2] = {{30, 30}, {20, 45}, {45, 20}, {1, 33}};
    uint64_t seed = 500;
    for (int align = 0; align < 2; align++)
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++)
            for (size_t s = 0; s < sizeof nm / sizeof nm[0]; s++) {
                tcase c = tcase_default(1, 2, 1, nm[s][0], nm[s][1], 8, 8);
                c.align = align;
                c.wl = w[k][0];
                c.wr = w[k][1];
                c.want_probs = 1;
                c.want_lse = 1;
                c.seed = seed++;
                fails += run(&c, &st);
            }
    FINISH(&st, fails);
}

/* Visibility patterns written out by hand from attn.h (n = 4, m = 6,
 * scale 0 so that every visible key gets exactly 1/count): independent of
 * the reference's own window code. */
static void test_visibility_table(void **state)
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

static void test_lengths(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "lengths");
    int fails = 0;
    uint64_t seed = 600;
    const int64_t n = 21, m = 34;
    const int32_t kl[4] = {0, 5, 34, 1}, ql[4] = {21, 0, 3, 20};
    for (int which = 1; which < 4; which++)
        for (int align = 0; align < 2; align++)
            for (int causal = 0; causal < 2; causal++) {
                tcase c = tcase_default(4, 4, 2, n, m, 16, 12);
                c.use_kv_lens = which & 1;
                c.use_q_lens = (which >> 1) & 1;
                memcpy(c.kv_lens, kl, sizeof kl);
                memcpy(c.q_lens, ql, sizeof ql);
                c.align = align;
                c.wr = causal ? 0 : -1;
                c.want_probs = 1;
                c.want_lse = 1;
                c.seed = seed++;
                fails += run(&c, &st);
            }
    /* larger, crossing typical block sizes */
    {
        tcase c = tcase_default(3, 2, 1, 150, 300, 32, 32);
        c.use_kv_lens = 1;
        c.use_q_lens = 1;
        c.kv_lens[0] = 300;
        c.kv_lens[1] = 129;
        c.kv_lens[2] = 65;
        c.q_lens[0] = 150;
        c.q_lens[1] = 1;
        c.q_lens[2] = 77;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

static void test_mask(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "mask");
    int fails = 0;
    uint64_t seed = 700;
    for (int mode = 1; mode <= 2; mode++)
        for (int bc = 0; bc < 8; bc++)
            for (int dens = 0; dens < 2; dens++) {
                tcase c = tcase_default(2, 4, 2, 12, 19, 8, 8);
                c.mask_mode = mode;
                c.mask_bcast = bc;
                c.mask_keep = dens ? 0.1 : 0.7;
                c.want_probs = 1;
                c.want_lse = 1;
                c.seed = seed++;
                fails += run(&c, &st);
            }
    /* everything masked out: every row empty */
    for (int mode = 1; mode <= 2; mode++) {
        tcase c = tcase_default(1, 2, 2, 5, 7, 4, 4);
        c.mask_mode = mode;
        c.mask_keep = 0.0;
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    /* polarity: the same bytes read both ways must give different results
     * that each match the reference */
    {
        tcase c = tcase_default(1, 1, 1, 6, 10, 4, 4);
        c.mask_mode = ATTN_MASK_KEEP_NONZERO;
        c.want_probs = 1;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        assert_int_equal(tinst_run(&t), ATTN_OK);
        fails += tinst_check(&t, &st) != 0;
        t.desc.mask_mode = ATTN_MASK_DROP_NONZERO;
        assert_int_equal(tinst_run(&t), ATTN_OK);
        fails += tinst_check(&t, &st) != 0;
        tinst_free(&t);
    }
    FINISH(&st, fails);
}

static void test_bias(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "bias");
    int fails = 0;
    uint64_t seed = 800;
    for (int bc = 0; bc < 8; bc++)
        for (int k = 0; k < 3; k++) {
            tcase c = tcase_default(2, 4, 1, 12, 19, 8, 8);
            c.use_bias = 1;
            c.bias_bcast = bc;
            c.bias_ninf = k == 0 ? 0.0 : k == 1 ? 0.2 : 0.9;
            c.bias_mag = k == 2 ? 10.0 : 1.0;
            c.want_probs = 1;
            c.want_lse = 1;
            c.seed = seed++;
            fails += run(&c, &st);
        }
    {
        tcase c = tcase_default(2, 2, 2, 8, 9, 4, 4);
        c.use_bias = 1;
        c.bias_ninf = 1.0;
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* Everything in one call. */
static void test_combined(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "combined");
    int fails = 0;
    for (int k = 0; k < (tquick() ? 4 : 16); k++) {
        tcase c = tcase_default(3, 6, 2, 27, 41, 20, 13);
        c.layout = k % 2 ? LAY_PADDED : LAY_BSHD;
        c.out_layout = k % 3 == 0 ? OUT_PADDED : k % 3 == 1 ? OUT_BSHD : OUT_BHSD;
        c.misalign = k % 2;
        c.scale = k % 4 == 0 ? NAN : 0.37f;
        c.align = k % 2;
        c.wl = k % 4 < 2 ? 9 : -1;
        c.wr = k % 3 == 0 ? 0 : 4;
        c.use_kv_lens = 1;
        c.kv_lens[0] = 41;
        c.kv_lens[1] = 0;
        c.kv_lens[2] = 17;
        c.use_q_lens = 1;
        c.q_lens[0] = 27;
        c.q_lens[1] = 13;
        c.q_lens[2] = 0 + k % 2;
        c.mask_mode = 1 + k % 2;
        c.mask_bcast = k % 8;
        c.mask_keep = 0.8;
        c.use_bias = 1;
        c.bias_bcast = (7 - k % 8);
        c.bias_ninf = 0.1;
        c.want_probs = 1;
        c.want_lse = 1;
        c.poison = k % 2;
        c.seed = 900 + (uint64_t)k;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* Asking for P and/or lse must not change O (bitwise). */
static void test_optional_outputs(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "optional outputs");
    int fails = 0;
    for (int k = 0; k < 6; k++) {
        tsnap ref;
        memset(&ref, 0, sizeof ref);
        for (int v = 0; v < 4; v++) {
            tcase c = tcase_default(2, 4, 2, 33 + k * 20, 47 + k * 30, 32, 24);
            c.layout = k % 2 ? LAY_PADDED : LAY_BHSD;
            c.out_layout = k % 2 ? OUT_PADDED : OUT_BHSD;
            c.align = k % 2;
            c.wr = k < 3 ? 0 : -1;
            c.mask_mode = k % 3;
            c.use_bias = k >= 2;
            c.bias_ninf = 0.05;
            c.use_kv_lens = k >= 4;
            c.kv_lens[0] = (int32_t)c.m / 2;
            c.kv_lens[1] = (int32_t)c.m;
            c.want_probs = v & 1;
            c.want_lse = v >> 1;
            c.seed = 1000 + (uint64_t)k;
            tinst t;
            assert_int_equal(tinst_build(&t, &c), 0);
            assert_int_equal(tinst_run(&t), ATTN_OK);
            fails += tinst_check(&t, &st) != 0;
            tsnap s;
            tsnap_take(&s, &t);
            if (v == 0) {
                ref = s;
            } else {
                if (!tsnap_equal_o(&ref, &s)) {
                    printf("FAIL O differs bitwise with want_probs=%d want_lse=%d: %s\n",
                           c.want_probs, c.want_lse, tcase_str(&c));
                    fails++;
                }
                tsnap_free(&s);
            }
            tinst_free(&t);
        }
        tsnap_free(&ref);
    }
    FINISH(&st, fails);
}

static void test_edge_sizes(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "edge sizes");
    int fails = 0;
    struct {
        int64_t B, Hq, Hkv, n, m, dk, dv;
        int align, causal, probs;
    } e[] = {
        {1, 1, 1, 1, 1, 1, 1, 0, 0, 1},
        {2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {1, 2, 1, 1, 1023, 64, 64, 1, 1, 1},   /* decode step */
        {1, 2, 2, 1023, 1, 64, 64, 1, 1, 1},   /* BR: only the last row sees key 0 */
        {1, 1, 1, 1023, 1, 64, 64, 0, 1, 1},
        {1, 2, 1, 37, 50, 1, 1, 0, 0, 1},
        {1, 2, 1, 37, 50, 1, 256, 0, 1, 0},
        {1, 2, 1, 37, 50, 256, 1, 1, 0, 1},
        {1, 2, 2, 197, 197, 64, 64, 0, 1, 1},
        {2, 1, 1, 197, 197, 80, 80, 0, 0, 1},
        {1, 2, 1, 1023, 1023, 64, 64, 1, 1, 0},
        {1, 1, 1, 197, 1023, 64, 32, 1, 1, 1},
        {1, 1, 1, 1023, 197, 32, 64, 1, 0, 0},
        {1, 2, 2, 64, 300, 256, 256, 0, 0, 1},
        {1, 1, 1, 33, 257, 256, 32, 1, 1, 1},
        {1, 1, 1, 65, 129, 255, 257, 0, 0, 1},
    };
    for (size_t k = 0; k < sizeof e / sizeof e[0]; k++) {
        if (tquick() && e[k].n * e[k].m > 500000)
            continue; /* the 1023 x 1023 case is slow under valgrind */
        tcase c = tcase_default(e[k].B, e[k].Hq, e[k].Hkv, e[k].n, e[k].m, e[k].dk, e[k].dv);
        c.align = e[k].align;
        c.wr = e[k].causal ? 0 : -1;
        c.want_probs = e[k].probs;
        c.want_lse = 1;
        c.seed = 1100 + (uint64_t)k;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

static void test_large_logits(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "large logits x30");
    int fails = 0;
    const int64_t dks[] = {1, 16, 64, 128};
    uint64_t seed = 1200;
    for (size_t k = 0; k < 4; k++)
        for (int v = 0; v < 3; v++) {
            tcase c = tcase_default(2, 2, 1, 31, 77, dks[k], 24);
            c.in_mag = 30.0;
            c.align = v % 2;
            c.wr = v == 1 ? 0 : -1;
            c.mask_mode = v == 2 ? ATTN_MASK_KEEP_NONZERO : ATTN_MASK_NONE;
            c.use_bias = v == 2;
            c.bias_mag = 100.0;
            c.bias_ninf = 0.1;
            c.want_probs = 1;
            c.want_lse = 1;
            c.seed = seed++;
            fails += run(&c, &st);
        }
    /* explicit large scale on unit inputs */
    {
        tcase c = tcase_default(1, 2, 2, 40, 60, 32, 32);
        c.scale = 40.0f;
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* Rows without a visible key, for every reason at once and separately. */
static void test_empty_rows(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "empty rows");
    int fails = 0;
    uint64_t seed = 1300;
    for (int k = 0; k < 5; k++) {
        tcase c = tcase_default(3, 2, 1, 24, 16, 8, 8);
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        if (k == 0 || k == 4) { /* kv_len 0 for a batch */
            c.use_kv_lens = 1;
            c.kv_lens[0] = 0;
            c.kv_lens[1] = 16;
            c.kv_lens[2] = 0;
        }
        if (k == 1 || k == 4) { /* window excluding every key for rows i < 8 */
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.wr = 0;
        }
        if (k == 2 || k == 4) { /* mask hiding whole rows (seq broadcast off) */
            c.mask_mode = ATTN_MASK_DROP_NONZERO;
            c.mask_keep = 0.15;
        }
        if (k == 3 || k == 4) { /* bias -inf everywhere on many rows */
            c.use_bias = 1;
            c.bias_ninf = 0.85;
        }
        if (k == 4) {
            c.use_q_lens = 1;
            c.q_lens[0] = 3;
            c.q_lens[1] = 24;
            c.q_lens[2] = 0;
            c.poison = 1;
        }
        fails += run(&c, &st);
    }
    /* TOP_LEFT, zero-width window, n > m: rows i >= m are empty */
    {
        tcase c = tcase_default(1, 1, 1, 30, 10, 4, 4);
        c.wl = 0;
        c.wr = 0;
        c.want_probs = 1;
        c.want_lse = 1;
        c.seed = seed++;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* NaN at every input position hidden by the lengths or the window. */
static void test_poison(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "nan poison");
    int fails = 0;
    trng r;
    trng_seed(&r, 1400);
    const int count = tquick() ? 12 : 48;
    for (int k = 0; k < count; k++) {
        const int64_t Hkv = trng_int(&r, 1, 2);
        const int64_t Hq = Hkv * trng_int(&r, 1, 3);
        const int64_t n = trng_int(&r, 1, 70);
        const int64_t m = trng_int(&r, 1, 140);
        const int64_t dk = trng_int(&r, 1, 40);
        const int64_t dv = trng_int(&r, 1, 40);
        tcase c = tcase_default(3, Hq, Hkv, n, m, dk, dv);
        c.poison = 1;
        c.layout = k % 3 == 0 ? LAY_PADDED : LAY_BHSD;
        c.out_layout = k % 3;
        c.align = (int)trng_int(&r, 0, 1);
        c.wl = trng_bool(&r, 0.5) ? trng_int(&r, 0, m) : -1;
        c.wr = trng_bool(&r, 0.5) ? trng_int(&r, 0, 5) : -1;
        c.use_kv_lens = trng_bool(&r, 0.7);
        c.use_q_lens = trng_bool(&r, 0.7);
        for (int b = 0; b < 3; b++) {
            c.kv_lens[b] = (int32_t)trng_int(&r, 0, m);
            c.q_lens[b] = (int32_t)trng_int(&r, 0, n);
        }
        c.mask_mode = (int)trng_int(&r, 0, 2);
        c.mask_bcast = (int)trng_int(&r, 0, 7);
        c.use_bias = trng_bool(&r, 0.5);
        c.bias_bcast = (int)trng_int(&r, 0, 7);
        c.bias_ninf = 0.1;
        c.want_probs = trng_bool(&r, 0.5);
        c.want_lse = 1;
        c.seed = 1400 + (uint64_t)k;
        fails += run(&c, &st);
    }
    FINISH(&st, fails);
}

/* attn_sdpa, plan + execute with NULL workspace, with a caller workspace of
 * the reported size, a larger one and repeated executions: same bits. */
static void test_plan_execute_workspace(void **state)
{
    (void)state;
    tstats st;
    tstats_init(&st, "plan/execute");
    int fails = 0;
    for (int k = 0; k < 4; k++) {
        tcase c = tcase_default(2, 4, 2, 70 + 50 * k, 90 + 40 * k, 32, 48);
        c.align = k % 2;
        c.wr = k < 2 ? 0 : -1;
        c.mask_mode = k % 3;
        c.use_bias = k >= 2;
        c.use_kv_lens = k == 3;
        c.kv_lens[0] = 33;
        c.kv_lens[1] = (int32_t)c.m;
        c.want_probs = 1;
        c.want_lse = 1;
        c.layout = k == 1 ? LAY_PADDED : LAY_BHSD;
        c.seed = 1500 + (uint64_t)k;
        tinst t;
        assert_int_equal(tinst_build(&t, &c), 0);
        assert_int_equal(tinst_run(&t), ATTN_OK);
        fails += tinst_check(&t, &st) != 0;
        tsnap one;
        tsnap_take(&one, &t);

        attn_sdpa_desc d = t.desc;
        attn_sdpa_plan *plan = NULL;
        assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
        /* the plan holds a copy: changing or wiping the desc has no effect */
        d.scale = 5.0f;
        d.q_len = 1;
        memset(&d, 0x3C, sizeof d);
        size_t ws = 0;
        assert_int_equal(attn_sdpa_workspace_size(plan, &ws), ATTN_OK);
        size_t cap = (ws + 64 + 63) / 64 * 64;
        void *buf = aligned_alloc(64, cap);
        assert_non_null(buf);
        memset(buf, 0xC3, cap); /* garbage workspace must not matter */
        for (int v = 0; v < 4; v++) {
            tinst_clear_outputs(&t);
            attn_status s;
            if (v == 0)
                s = attn_sdpa_execute(plan, &t.args, NULL, 0);
            else if (v == 1)
                s = attn_sdpa_execute(plan, &t.args, buf, ws);
            else if (v == 2)
                s = attn_sdpa_execute(plan, &t.args, buf, cap);
            else
                s = attn_sdpa_execute(plan, &t.args, buf, ws);
            assert_int_equal(s, ATTN_OK);
            tsnap x;
            tsnap_take(&x, &t);
            if (!tsnap_equal(&one, &x)) {
                printf("FAIL variant %d (0 NULL ws, 1 exact ws, 2 larger ws, 3 reuse) "
                       "differs bitwise from attn_sdpa: %s\n", v, tcase_str(&c));
                fails++;
            }
            tsnap_free(&x);
        }
        free(buf);
        attn_sdpa_plan_destroy(plan);
        tsnap_free(&one);
        tinst_free(&t);
    }
    FINISH(&st, fails);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_unusual_views),
        cmocka_unit_test(test_gqa_mqa),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_visibility_table),
        cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_combined),
        cmocka_unit_test(test_optional_outputs),
        cmocka_unit_test(test_edge_sizes),
        cmocka_unit_test(test_large_logits),
        cmocka_unit_test(test_empty_rows),
        cmocka_unit_test(test_poison),
        cmocka_unit_test(test_plan_execute_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
