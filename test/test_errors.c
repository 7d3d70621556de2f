/*
 * test_errors.c -- every error path of the public API, each checked for its
 * status and for outputs (O, P, logsumexp buffers) left bitwise untouched;
 * attn_sdpa_desc_init defaults, attn_status_str, attn_version,
 * attn_blas_query.
 *
 * A bad desc is given to attn_sdpa_plan_create (which must fail and leave
 * *plan alone) and, only then, to the one-shot attn_sdpa with complete
 * buffers (which must fail the same way without writing anything).  Each bad
 * desc or args differs from a valid one in exactly one respect.
 *
 * As attn.h states: a NULL pointer for an enabled optional feature (kv_lens,
 * q_lens, mask, bias, probs, lse) is ATTN_ERR_NULL_ARGUMENT, and a view with
 * any one of its strides at ATTN_STRIDE_UNSET is ATTN_ERR_STRIDES_UNSET.
 */
#include <float.h>
#include <limits.h>
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

static int g_fail;

static const char *sname(attn_status s)
{
    static char buf[4][96];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%d (%s)", (int)s, attn_status_str(s));
    return buf[k];
}

/* Base case: every feature on, small sizes, B = 2, Hq = 4, Hkv = 2. */
static tcase base_case(void)
{
    tcase c = tcase_default(2, 4, 2, 6, 9, 8, 5);
    c.use_kv_lens = 1;
    c.kv_lens[0] = 9;
    c.kv_lens[1] = 4;
    c.use_q_lens = 1;
    c.q_lens[0] = 6;
    c.q_lens[1] = 3;
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.use_bias = 1;
    c.bias_bcast = BC_HEAD;
    c.want_probs = 1;
    c.want_lse = 1;
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    return c;
}

/* Expect plan_create(bad) to fail with want (or want2 if >= 0); then the
 * one-shot must fail the same way and leave the outputs of t untouched. */
static void expect_desc_fail2(tinst *t, const attn_sdpa_desc *bad, attn_status want,
                              int want2, const char *what)
{
    static int marker;
    attn_sdpa_plan *plan = (attn_sdpa_plan *)&marker;
    attn_status s = attn_sdpa_plan_create(&plan, bad);
    int ok_status = s == want || (want2 >= 0 && s == (attn_status)want2);
    if (s == ATTN_OK) {
        printf("FAIL %s: plan_create accepted it (want %s)\n", what, sname(want));
        attn_sdpa_plan_destroy(plan);
        g_fail++;
        return;
    }
    if (!ok_status) {
        printf("FAIL %s: plan_create returned %s, want %s%s%s\n", what, sname(s),
               sname(want), want2 >= 0 ? " or " : "",
               want2 >= 0 ? sname((attn_status)want2) : "");
        g_fail++;
    }
    if (plan != (attn_sdpa_plan *)&marker) {
        printf("FAIL %s: plan_create wrote *plan on failure\n", what);
        g_fail++;
    }
    tinst_clear_outputs(t);
    attn_status s2 = attn_sdpa(bad, &t->args);
    if (s2 != s) {
        printf("FAIL %s: attn_sdpa returned %s, plan_create %s\n", what, sname(s2),
               sname(s));
        g_fail++;
    }
    if (!tinst_outputs_untouched(t)) {
        printf("FAIL %s: outputs written by a failing attn_sdpa\n", what);
        g_fail++;
    }
}

static void expect_desc_fail(tinst *t, const attn_sdpa_desc *bad, attn_status want,
                             const char *what)
{
    expect_desc_fail2(t, bad, want, -1, what);
}

static void expect_desc_ok(const attn_sdpa_desc *good, const char *what)
{
    attn_sdpa_plan *plan = NULL;
    attn_status s = attn_sdpa_plan_create(&plan, good);
    if (s != ATTN_OK || !plan) {
        printf("FAIL %s: plan_create returned %s, want ATTN_OK\n", what, sname(s));
        g_fail++;
    }
    attn_sdpa_plan_destroy(plan);
}

/* execute(plan, bad) must fail with want (or want2 if >= 0) and write
 * nothing; with workspace == NULL the one-shot on desc must agree. */
static void expect_exec_fail2(tinst *t, const attn_sdpa_plan *plan,
                              const attn_sdpa_desc *desc, const attn_sdpa_args *bad,
                              void *ws, size_t wsb, attn_status want, int want2,
                              const char *what)
{
    tinst_clear_outputs(t);
    attn_status s = attn_sdpa_execute(plan, bad, ws, wsb);
    if (!(s == want || (want2 >= 0 && s == (attn_status)want2))) {
        printf("FAIL %s: execute returned %s, want %s%s%s\n", what, sname(s),
               sname(want), want2 >= 0 ? " or " : "",
               want2 >= 0 ? sname((attn_status)want2) : "");
        g_fail++;
    }
    if (!tinst_outputs_untouched(t)) {
        printf("FAIL %s: outputs written by a failing execute\n", what);
        g_fail++;
    }
    if (desc && !ws && s != ATTN_OK) {
        attn_status s2 = attn_sdpa(desc, bad);
        if (s2 != s) {
            printf("FAIL %s: attn_sdpa returned %s, execute %s\n", what, sname(s2),
                   sname(s));
            g_fail++;
        }
        if (!tinst_outputs_untouched(t)) {
            printf("FAIL %s: outputs written by a failing attn_sdpa\n", what);
            g_fail++;
        }
    }
}

static void expect_exec_fail(tinst *t, const attn_sdpa_plan *plan,
                             const attn_sdpa_desc *desc, const attn_sdpa_args *bad,
                             attn_status want, const char *what)
{
    expect_exec_fail2(t, plan, desc, bad, NULL, 0, want, -1, what);
}

/* ------------------------------------------------------------------------ */

static void test_desc_init_defaults(void **state)
{
    (void)state;
    attn_sdpa_desc d;
    memset(&d, 0xAB, sizeof d);
    assert_int_equal(attn_sdpa_desc_init(&d), ATTN_OK);
    assert_true(d.batch == 0 && d.q_heads == 0 && d.kv_heads == 0 && d.q_len == 0 &&
                d.kv_len == 0 && d.qk_dim == 0 && d.v_dim == 0);
    const attn_view *views[] = {&d.q, &d.k, &d.v, &d.o, &d.mask, &d.bias, &d.probs, &d.lse};
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) {
        assert_true(views[i]->batch == ATTN_STRIDE_UNSET);
        assert_true(views[i]->head == ATTN_STRIDE_UNSET);
        assert_true(views[i]->seq == ATTN_STRIDE_UNSET);
    }
    assert_true(isnan(d.scale));
    assert_int_equal(d.align, ATTN_ALIGN_TOP_LEFT);
    assert_true(d.window_left < 0 && d.window_right < 0);
    assert_int_equal(d.use_kv_lens, 0);
    assert_int_equal(d.use_q_lens, 0);
    assert_int_equal(d.mask_mode, ATTN_MASK_NONE);
    assert_int_equal(d.use_bias, 0);
    assert_int_equal(d.want_probs, 0);
    assert_int_equal(d.want_lse, 0);
    assert_int_equal(d.threads, 0);
    for (int i = 0; i < 16; i++)
        assert_true(d.reserved[i] == 0);
    assert_int_equal(attn_sdpa_desc_init(NULL), ATTN_ERR_NULL_ARGUMENT);

    /* the view helpers */
    attn_view v = attn_view_bhsd(3, 5, 7);
    assert_true(v.batch == 105 && v.head == 35 && v.seq == 7);
    v = attn_view_bshd(3, 5, 7);
    assert_true(v.batch == 105 && v.head == 7 && v.seq == 21);
}

static void test_null_arguments(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);

    static int marker;
    attn_sdpa_plan *plan = (attn_sdpa_plan *)&marker;
    assert_int_equal(attn_sdpa_plan_create(NULL, &t.desc), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa_plan_create(&plan, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_ptr_equal(plan, &marker);
    assert_int_equal(attn_sdpa_plan_destroy(NULL), ATTN_OK);

    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa(NULL, &t.args), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa(&t.desc, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_true(tinst_outputs_untouched(&t));

    plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t.desc), ATTN_OK);
    assert_non_null(plan);
    size_t bytes = 12345;
    assert_int_equal(attn_sdpa_workspace_size(NULL, &bytes), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(bytes, 12345);
    assert_int_equal(attn_sdpa_workspace_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);

    expect_exec_fail(&t, NULL, NULL, &t.args, ATTN_ERR_NULL_ARGUMENT, "execute(NULL plan)");
    expect_exec_fail(&t, plan, NULL, NULL, ATTN_ERR_NULL_ARGUMENT, "execute(NULL args)");

    /* required pointers */
    const char *names[] = {"q", "k", "v", "o"};
    for (int w = 0; w < 4; w++) {
        attn_sdpa_args a = t.args;
        if (w == 0) a.q = NULL;
        if (w == 1) a.k = NULL;
        if (w == 2) a.v = NULL;
        if (w == 3) a.o = NULL;
        char what[64];
        snprintf(what, sizeof what, "args.%s = NULL", names[w]);
        expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_NULL_ARGUMENT, what);
    }
    /* pointers of enabled optional features */
    const char *opt[] = {"kv_lens", "q_lens", "mask", "bias", "probs", "lse"};
    for (int w = 0; w < 6; w++) {
        attn_sdpa_args a = t.args;
        if (w == 0) a.kv_lens = NULL;
        if (w == 1) a.q_lens = NULL;
        if (w == 2) a.mask = NULL;
        if (w == 3) a.bias = NULL;
        if (w == 4) a.probs = NULL;
        if (w == 5) a.lse = NULL;
        char what[64];
        snprintf(what, sizeof what, "args.%s = NULL while enabled", opt[w]);
        expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_NULL_ARGUMENT, what);
    }
    attn_sdpa_plan_destroy(plan);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_argument_mismatch(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const char *opt[] = {"kv_lens", "q_lens", "mask", "bias", "probs", "lse"};
    for (int w = 0; w < 6; w++) {
        /* a plan without feature w, given all pointers */
        attn_sdpa_desc d = t.desc;
        if (w == 0) d.use_kv_lens = 0;
        if (w == 1) d.use_q_lens = 0;
        if (w == 2) d.mask_mode = ATTN_MASK_NONE;
        if (w == 3) d.use_bias = 0;
        if (w == 4) d.want_probs = 0;
        if (w == 5) d.want_lse = 0;
        attn_sdpa_plan *plan = NULL;
        assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
        char what[80];
        snprintf(what, sizeof what, "args.%s given, plan does not use it", opt[w]);
        expect_exec_fail(&t, plan, &d, &t.args, ATTN_ERR_ARGUMENT_MISMATCH, what);
        /* control: without that pointer it runs */
        attn_sdpa_args a = t.args;
        if (w == 0) a.kv_lens = NULL;
        if (w == 1) a.q_lens = NULL;
        if (w == 2) a.mask = NULL;
        if (w == 3) a.bias = NULL;
        if (w == 4) a.probs = NULL;
        if (w == 5) a.lse = NULL;
        attn_status s = attn_sdpa_execute(plan, &a, NULL, 0);
        if (s != ATTN_OK) {
            printf("FAIL control for %s: execute returned %s\n", what, sname(s));
            g_fail++;
        }
        attn_sdpa_plan_destroy(plan);
    }
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_bad_sizes(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const char *names[] = {"batch", "q_heads", "kv_heads", "q_len", "kv_len", "qk_dim",
                           "v_dim"};
    const int64_t vals[] = {0, -1, INT64_MIN};
    for (int f = 0; f < 7; f++)
        for (int k = 0; k < 3; k++) {
            attn_sdpa_desc d = t.desc;
            int64_t *fld[] = {&d.batch, &d.q_heads, &d.kv_heads, &d.q_len, &d.kv_len,
                              &d.qk_dim, &d.v_dim};
            *fld[f] = vals[k];
            char what[64];
            snprintf(what, sizeof what, "%s = %lld", names[f], (long long)vals[k]);
            expect_desc_fail(&t, &d, ATTN_ERR_BAD_SIZE, what);
        }
    /* head ratio */
    {
        attn_sdpa_desc d = t.desc;
        d.kv_heads = 3;
        expect_desc_fail(&t, &d, ATTN_ERR_HEAD_RATIO, "Hq=4 Hkv=3");
        d.kv_heads = 8;
        expect_desc_fail(&t, &d, ATTN_ERR_HEAD_RATIO, "Hq=4 Hkv=8");
        d.q_heads = 5;
        d.kv_heads = 2;
        expect_desc_fail(&t, &d, ATTN_ERR_HEAD_RATIO, "Hq=5 Hkv=2");
    }
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

/* A plain desc (no optional feature) with dense BHSD strides for the
 * given sizes, for the size-limit tests. */
static attn_sdpa_desc plain_desc(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m,
                                 int64_t dk, int64_t dv)
{
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = B;
    d.q_heads = Hq;
    d.kv_heads = Hkv;
    d.q_len = n;
    d.kv_len = m;
    d.qk_dim = dk;
    d.v_dim = dv;
    d.q = attn_view_bhsd(Hq, n, dk);
    d.k = attn_view_bhsd(Hkv, m, dk);
    d.v = attn_view_bhsd(Hkv, m, dv);
    d.o = attn_view_bhsd(Hq, n, dv);
    d.threads = 1;
    return d;
}

static void test_too_large(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = tcase_default(2, 4, 2, 6, 9, 8, 5);
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const int64_t big = (int64_t)INT32_MAX + 1;
    attn_sdpa_desc d;
    char what[128];

    expect_desc_ok(&t.desc, "control: plain desc");
    d = plain_desc(2, 4, 2, big, 9, 8, 5);
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "q_len = 2^31");
    d = plain_desc(2, 4, 2, 6, big, 8, 5);
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "kv_len = 2^31");
    d = plain_desc(2, 4, 2, 6, 9, big, 5);
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "qk_dim = 2^31");
    d = plain_desc(2, 4, 2, 6, 9, 8, big);
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "v_dim = 2^31");
    /* each size fits in int32 but the byte counts overflow size_t */
    const int64_t s16 = 1 << 16;
    d = plain_desc(s16, s16, s16, s16, s16, s16, s16);
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "all sizes 2^16 (bytes overflow)");
    /* a stride whose byte extent overflows size_t */
    d = t.desc;
    d.q.batch = INT64_MAX / 2;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "q batch stride INT64_MAX/2");
    d = t.desc;
    d.v.batch = (int64_t)1 << 62;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "v batch stride 2^62");
    d = t.desc;
    d.o.batch = INT64_MAX / 2;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "o batch stride INT64_MAX/2");
    /* BLAS leading dimensions beyond INT32_MAX */
    d = t.desc;
    d.k.seq = big;
    d.k.head = 9 * big;
    d.k.batch = 2 * 9 * big;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "k seq stride 2^31");
    d = t.desc;
    d.q.seq = big;
    d.q.head = 6 * big;
    d.q.batch = 4 * 6 * big;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "q seq stride 2^31");
    d = t.desc;
    d.o.seq = big;
    d.o.head = 6 * big;
    d.o.batch = 4 * 6 * big;
    expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, "o seq stride 2^31");
    /* Overlapping input views let every view fit while the products of
     * batch, heads and rows that size the workspace do not (found by a
     * fuzzer: the m = 1024 plan reported a 2240-byte workspace, m = 8192
     * overflowed a signed product).  Rows of the table: Hq, m, GQA group. */
    {
        static const struct { int64_t hq, hkv, m; } ovf[] = {
            {1537228672809129302, 1, 1024},
            {1537228672809129302, 1, 8192},
            {(int64_t)1 << 60, 1, 1},   /* row state of the group > INT64_MAX bytes */
        };
        for (size_t k = 0; k < sizeof ovf / sizeof ovf[0]; k++) {
            d = plain_desc(1, ovf[k].hq, ovf[k].hkv, 1, ovf[k].m, 1, 1);
            d.q = (attn_view){0, 1, 1};
            d.k = d.v = (attn_view){0, ovf[k].hkv > 1 ? 1 : 0, 1};
            d.o = (attn_view){0, 1, 1};
            snprintf(what, sizeof what, "Hq = %lld, Hkv = %lld, m = %lld over overlapping views",
                     (long long)ovf[k].hq, (long long)ovf[k].hkv, (long long)ovf[k].m);
            expect_desc_fail(&t, &d, ATTN_ERR_TOO_LARGE, what);
        }
        /* control: the same views with a representable group */
        d = plain_desc(1, 1 << 20, 1, 1, 1024, 1, 1);
        d.q = (attn_view){0, 1, 1};
        d.k = d.v = (attn_view){0, 0, 1};
        d.o = (attn_view){0, 1, 1};
        expect_desc_ok(&d, "control: Hq = 2^20 over overlapping views");
        /* control: 2^60 batches of one row each; the split-K partials
         * would not fit, so the keys are not split, and nothing else is
         * too large */
        d = plain_desc((int64_t)1 << 60, 1, 1, 1, 4096, 1, 1);
        d.q = d.k = d.v = d.o = (attn_view){1, 0, 1};
        expect_desc_ok(&d, "control: B = 2^60 over overlapping views");
    }
    /* MHA: weights whose byte count is not representable ([3E][E] packed
     * in_proj, [E][kdim] with E = kdim = 2^31 - 1), every other size fine. */
    for (int k = 0; k < 3; k++) {
        attn_mha_desc md;
        attn_mha_desc_init(&md);
        md.embed_dim = INT32_MAX;
        md.num_heads = 1;
        md.batch = md.q_len = md.kv_len = 1;
        md.self_attention = k == 0;
        md.packed_in_proj = k == 0;
        md.kdim = k == 0 ? 0 : k == 1 ? INT32_MAX : 1;
        md.vdim = k == 0 ? 0 : k == 2 ? INT32_MAX : 1;
        md.threads = 1;
        attn_mha_plan *mp = NULL;
        attn_status ms = attn_mha_plan_create(&mp, &md);
        if (ms != ATTN_ERR_TOO_LARGE || mp) {
            printf("FAIL MHA weights of 2^31 - 1 squared (case %d): %s\n", k, sname(ms));
            attn_mha_plan_destroy(mp);
            g_fail++;
        }
    }
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_bad_strides(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const attn_sdpa_desc base = t.desc;
    expect_desc_ok(&base, "control: base desc");
    const char *tn[] = {"q", "k", "v", "o", "mask", "bias", "probs", "lse"};
    const char *fn[] = {"batch", "head", "seq"};
    char what[96];

    /* negative strides, every tensor and field */
    for (int x = 0; x < 8; x++)
        for (int f = 0; f < 3; f++) {
            attn_sdpa_desc d = base;
            attn_view *vs[] = {&d.q, &d.k, &d.v, &d.o, &d.mask, &d.bias, &d.probs, &d.lse};
            int64_t *fl[] = {&vs[x]->batch, &vs[x]->head, &vs[x]->seq};
            *fl[f] = -1;
            snprintf(what, sizeof what, "%s.%s = -1", tn[x], fn[f]);
            expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, what);
            *fl[f] = -12345678;
            snprintf(what, sizeof what, "%s.%s = -12345678", tn[x], fn[f]);
            expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, what);
        }

    /* row stride shorter than the row */
    {
        attn_sdpa_desc d = base;
        d.q.seq = base.qk_dim - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "q.seq < dk");
        d = base;
        d.k.seq = base.qk_dim - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "k.seq < dk");
        d = base;
        d.v.seq = base.v_dim - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "v.seq < dv");
        d = base;
        d.o.seq = base.v_dim - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o.seq < dv");
        d = base;
        d.probs.seq = base.kv_len - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "probs.seq < m");
        d = base;
        d.q.seq = 0;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "q.seq = 0");
        /* also when the length is 1: the seq stride is the BLAS leading
         * dimension */
        attn_sdpa_desc one = plain_desc(2, 4, 2, 1, 1, 8, 5);
        expect_desc_ok(&one, "control: n = m = 1");
        d = one;
        d.q.seq = 0;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "q.seq = 0 with n = 1");
        d = one;
        d.k.seq = 7;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "k.seq = dk - 1 with m = 1");
        d = one;
        d.v.seq = 0;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "v.seq = 0 with m = 1");
        d = one;
        d.o.seq = 4;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o.seq = dv - 1 with n = 1");
        d = one;
        d.want_probs = 1;
        d.probs = (attn_view){4, 1, 1};
        expect_desc_ok(&d, "control: probs [B][H][1][1] dense");
        d.probs = (attn_view){4, 1, 0};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "probs.seq = 0 with n = m = 1");
        /* the logsumexp is no BLAS matrix: a 0 seq stride is a 0 stride on
         * a dimension of size 1, as for any view */
        d = one;
        d.want_lse = 1;
        d.lse = (attn_view){4, 1, 0};
        expect_desc_ok(&d, "lse.seq = 0 with n = 1");
        d = plain_desc(2, 4, 2, 2, 1, 8, 5);
        d.want_lse = 1;
        d.lse = (attn_view){8, 2, 0};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "lse.seq = 0 with n = 2");
        d = base;
        d.k.seq = 0;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "k.seq = 0");
    }

    /* zero strides where no broadcast is allowed (all sizes > 1 here) */
    for (int x = 0; x < 8; x++)
        for (int f = 0; f < 3; f++) {
            if (x == 4 || x == 5)
                continue; /* mask and bias broadcast */
            attn_sdpa_desc d = base;
            attn_view *vs[] = {&d.q, &d.k, &d.v, &d.o, &d.mask, &d.bias, &d.probs, &d.lse};
            int64_t *fl[] = {&vs[x]->batch, &vs[x]->head, &vs[x]->seq};
            *fl[f] = 0;
            snprintf(what, sizeof what, "%s.%s = 0", tn[x], fn[f]);
            expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, what);
        }

    /* overlapping output views */
    {
        const int64_t Hq = base.q_heads, n = base.q_len, m = base.kv_len, dv = base.v_dim;
        attn_sdpa_desc d = base;
        d.o.head = n * dv - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o heads overlap (head = n*dv - 1)");
        d = base;
        d.o.batch = Hq * n * dv - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o batches overlap");
        d = base;
        d.o = (attn_view){n * Hq * dv, dv - 1, Hq * dv};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o BSHD with head = dv - 1");
        d = base;
        d.o = (attn_view){Hq * n * dv, dv, dv};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o head stride = seq stride");
        d = base;
        d.o = (attn_view){n * dv, n * dv, dv};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o batch stride = head stride");
        d = base;
        d.probs.head = n * m - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "probs heads overlap");
        d = base;
        d.probs = (attn_view){Hq * n * m, m, m};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "probs head stride = seq stride");
        d = base;
        d.probs.batch = m;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "probs batch stride = m");
        d = base;
        d.lse = (attn_view){Hq * n, 1, 1};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "lse head stride = seq stride = 1");
        d = base;
        d.lse = (attn_view){Hq * n - 1, n, 1};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "lse batches overlap");
        d = base;
        d.lse = (attn_view){Hq * n, n - 1, 1};
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "lse heads overlap");
        /* The rule attn.h states: the dimensions of size > 1 sorted by
         * stride, each stride at least the extent of everything inside it.
         * At the boundary it holds; one element less it fails; views that
         * interleave without sharing an address fail it too (rows at
         * {0, 2, 4} and {3, 5, 7}), as documented. */
        d = base;
        d.o = (attn_view){Hq * n * dv, n * dv, dv};
        expect_desc_ok(&d, "control: o nested at the boundary");
        d.o.batch = Hq * n * dv - 1;
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_STRIDE, "o batch stride one less than the boundary");
        attn_sdpa_desc il = plain_desc(1, 3, 1, 2, 1, 1, 1);
        il.o = (attn_view){0, 2, 3};
        expect_desc_fail(&t, &il, ATTN_ERR_BAD_STRIDE, "o rows {0, 2, 4} and {3, 5, 7}");
        il = plain_desc(1, 3, 1, 2, 1, 1, 1);
        il.want_probs = 1;
        il.probs = (attn_view){0, 2, 3};
        expect_desc_fail(&t, &il, ATTN_ERR_BAD_STRIDE, "probs rows {0, 2, 4} and {3, 5, 7}");
        il = plain_desc(1, 3, 1, 2, 1, 1, 1);
        il.want_lse = 1;
        il.lse = (attn_view){0, 2, 3};
        expect_desc_fail(&t, &il, ATTN_ERR_BAD_STRIDE, "lse at {0, 2, 4} and {3, 5, 7}");
        il.lse = (attn_view){0, 2, 1};
        expect_desc_ok(&il, "control: lse [H][2] in rows of 2, head stride = extent");
        il.lse = (attn_view){0, 1, 3};
        expect_desc_ok(&il, "control: lse [S][H], seq stride = extent of the heads");
        il.lse = (attn_view){0, 1, 2};
        expect_desc_fail(&t, &il, ATTN_ERR_BAD_STRIDE, "lse seq stride one less than the heads' extent");
        /* controls: interleaved but disjoint views are fine */
        d = base;
        d.o = (attn_view){dv, 2 * dv, 2 * Hq * dv};
        expect_desc_ok(&d, "control: o interleaved [S][H][B][D]");
        d.probs = (attn_view){m, 2 * m, 2 * Hq * m};
        d.lse = (attn_view){1, 2, 2 * Hq};
        expect_desc_ok(&d, "control: o, probs, lse interleaved [S][H][B]");
    }

    /* zero strides that are fine: dimensions of size 1, mask/bias broadcast */
    {
        attn_sdpa_desc d = plain_desc(1, 1, 1, 1, 5, 4, 3);
        d.q.batch = d.q.head = 0;
        d.o.batch = d.o.head = 0;
        d.k.batch = d.k.head = 0;
        d.v.batch = d.v.head = 0;
        expect_desc_ok(&d, "control: zero strides over size-1 dims");
        d = base;
        d.mask = (attn_view){0, 0, 0};
        d.bias = (attn_view){0, 0, 0};
        expect_desc_ok(&d, "control: mask and bias fully broadcast");
    }
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_strides_unset(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const attn_sdpa_desc base = t.desc;
    const char *tn[] = {"q", "k", "v", "o", "mask", "bias", "probs", "lse"};
    const char *fn[] = {"batch", "head", "seq"};
    const attn_view unset = {ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET};
    char what[96];
    for (int x = 0; x < 8; x++) {
        attn_sdpa_desc d = base;
        attn_view *vs[] = {&d.q, &d.k, &d.v, &d.o, &d.mask, &d.bias, &d.probs, &d.lse};
        *vs[x] = unset;
        snprintf(what, sizeof what, "%s strides unset", tn[x]);
        expect_desc_fail(&t, &d, ATTN_ERR_STRIDES_UNSET, what);
        for (int f = 0; f < 3; f++) {
            d = base;
            attn_view *ws[] = {&d.q, &d.k, &d.v, &d.o, &d.mask, &d.bias, &d.probs, &d.lse};
            int64_t *fl[] = {&ws[x]->batch, &ws[x]->head, &ws[x]->seq};
            *fl[f] = ATTN_STRIDE_UNSET;
            snprintf(what, sizeof what, "%s.%s unset", tn[x], fn[f]);
            expect_desc_fail(&t, &d, ATTN_ERR_STRIDES_UNSET, what);
        }
    }
    /* unused tensors may stay unset */
    attn_sdpa_desc d = base;
    d.mask_mode = ATTN_MASK_NONE;
    d.use_bias = 0;
    d.want_probs = 0;
    d.want_lse = 0;
    d.mask = d.bias = d.probs = d.lse = unset;
    expect_desc_ok(&d, "control: unused tensors unset");
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_bad_scale_options_threads(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const attn_sdpa_desc base = t.desc;
    attn_sdpa_desc d;

    d = base;
    d.scale = INFINITY;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_SCALE, "scale = +inf");
    d.scale = -INFINITY;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_SCALE, "scale = -inf");
    const float okscales[] = {NAN, 0.0f, -1.0f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-40f};
    for (size_t i = 0; i < sizeof okscales / sizeof okscales[0]; i++) {
        d.scale = okscales[i];
        expect_desc_ok(&d, "control: finite or NaN scale");
    }

    d = base;
    d.align = (attn_align)2;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "align = 2");
    d.align = (attn_align)-1;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "align = -1");
    d.align = (attn_align)1000;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "align = 1000");
    d = base;
    d.mask_mode = (attn_mask_mode)3;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "mask_mode = 3");
    d.mask_mode = (attn_mask_mode)-1;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "mask_mode = -1");
    for (int k = 0; k < 16; k += 5) {
        d = base;
        d.reserved[k] = k == 15 ? INT64_MIN : 1;
        char what[48];
        snprintf(what, sizeof what, "reserved[%d] != 0", k);
        expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, what);
    }
    d = base;
    d.reserved[15] = -1;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_OPTION, "reserved[15] = -1");

    d = base;
    d.threads = -1;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_THREADS, "threads = -1");
    d.threads = INT_MIN;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_THREADS, "threads = INT_MIN");
    d.threads = 1025;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_THREADS, "threads = 1025");
    d.threads = INT_MAX;
    expect_desc_fail(&t, &d, ATTN_ERR_BAD_THREADS, "threads = INT_MAX");
    d.threads = 0;
    expect_desc_ok(&d, "control: threads = 0");
    d.threads = 64;
    expect_desc_ok(&d, "control: threads = 64");
    d.threads = 1024;
    expect_desc_ok(&d, "control: threads = 1024");

    /* window bounds: any negative value means unbounded, large ones are fine */
    d = base;
    d.window_left = INT64_MIN;
    d.window_right = INT64_MAX;
    expect_desc_ok(&d, "control: window INT64_MIN / INT64_MAX");
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_bad_lengths(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t.desc), ATTN_OK);
    const int32_t n = (int32_t)t.desc.q_len, m = (int32_t)t.desc.kv_len;
    const int32_t badk[] = {-1, m + 1, INT32_MIN, INT32_MAX};
    const int32_t badq[] = {-1, n + 1, INT32_MIN, INT32_MAX};
    char what[96];
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            int32_t kl[2] = {m, 3}, ql[2] = {n, 2};
            attn_sdpa_args a = t.args;
            kl[b] = badk[k];
            a.kv_lens = kl;
            snprintf(what, sizeof what, "kv_lens[%d] = %d (m = %d)", b, (int)badk[k], (int)m);
            expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_BAD_LENGTH, what);
            kl[b] = b ? 3 : m;
            ql[b] = badq[k];
            a.q_lens = ql;
            snprintf(what, sizeof what, "q_lens[%d] = %d (n = %d)", b, (int)badq[k], (int)n);
            expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_BAD_LENGTH, what);
        }
    /* controls: 0 and the full length are valid */
    {
        int32_t kl[2] = {0, m}, ql[2] = {n, 0};
        attn_sdpa_args a = t.args;
        a.kv_lens = kl;
        a.q_lens = ql;
        tinst_clear_outputs(&t);
        attn_status s = attn_sdpa_execute(plan, &a, NULL, 0);
        if (s != ATTN_OK) {
            printf("FAIL control: lengths 0 and full: %s\n", sname(s));
            g_fail++;
        }
    }
    attn_sdpa_plan_destroy(plan);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_workspace_errors(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t.desc), ATTN_OK);
    size_t ws = 0;
    assert_int_equal(attn_sdpa_workspace_size(plan, &ws), ATTN_OK);
    printf("workspace size of the base plan: %zu bytes\n", ws);
    size_t cap = ((ws + 256) + 63) / 64 * 64;
    unsigned char *buf = aligned_alloc(64, cap);
    assert_non_null(buf);
    memset(buf, 0x5A, cap);

    if (ws > 0) {
        expect_exec_fail2(&t, plan, NULL, &t.args, buf, ws - 1, ATTN_ERR_WORKSPACE_TOO_SMALL,
                          -1, "workspace one byte short");
        expect_exec_fail2(&t, plan, NULL, &t.args, buf, 0, ATTN_ERR_WORKSPACE_TOO_SMALL, -1,
                          "workspace of 0 bytes");
    } else {
        printf("note: workspace size is 0, the too-small path cannot be reached\n");
    }
    const size_t offs[] = {4, 16, 32, 60};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "workspace misaligned by %zu bytes", offs[i]);
        expect_exec_fail2(&t, plan, NULL, &t.args, buf + offs[i], ws + 64,
                          ATTN_ERR_WORKSPACE_ALIGNMENT, -1, what);
    }
    /* controls: exact size, larger size, NULL with a nonzero byte count */
    tinst_clear_outputs(&t);
    if (attn_sdpa_execute(plan, &t.args, buf, ws) != ATTN_OK) {
        printf("FAIL control: workspace of exactly %zu bytes refused\n", ws);
        g_fail++;
    }
    if (attn_sdpa_execute(plan, &t.args, buf + 64, cap - 64) != ATTN_OK) {
        printf("FAIL control: larger workspace refused\n");
        g_fail++;
    }
    if (attn_sdpa_execute(plan, &t.args, NULL, 12345) != ATTN_OK) {
        printf("FAIL control: NULL workspace with a byte count refused\n");
        g_fail++;
    }
    free(buf);
    attn_sdpa_plan_destroy(plan);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

static void test_status_strings(void **state)
{
    (void)state;
    const char *strs[ATTN_STATUS_COUNT_];
    for (int s = 0; s < ATTN_STATUS_COUNT_; s++) {
        strs[s] = attn_status_str((attn_status)s);
        assert_non_null(strs[s]);
        assert_true(strlen(strs[s]) > 0);
        for (int r = 0; r < s; r++)
            if (strcmp(strs[r], strs[s]) == 0)
                fail_msg("statuses %d and %d share the string \"%s\"", r, s, strs[s]);
    }
    const int outside[] = {ATTN_STATUS_COUNT_, ATTN_STATUS_COUNT_ + 1, -1, 1000, INT_MIN,
                           INT_MAX};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        const char *u = attn_status_str((attn_status)outside[i]);
        assert_non_null(u);
        assert_non_null(strcasestr(u, "unknown"));
        for (int s = 0; s < ATTN_STATUS_COUNT_; s++)
            assert_string_not_equal(u, strs[s]);
    }
    for (int s = 0; s < ATTN_STATUS_COUNT_; s++)
        printf("  status %2d: %s\n", s, strs[s]);
}

static void test_version(void **state)
{
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR,
             ATTN_VERSION_PATCH);
    const char *v = attn_version();
    assert_non_null(v);
    assert_string_equal(v, want);
    assert_int_equal(ATTN_VERSION, ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 +
                                       ATTN_VERSION_PATCH);
}

static int in_set(const char *s, const char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, set[i]) == 0)
            return 1;
    return 0;
}

static void test_blas_query(void **state)
{
    (void)state;
    assert_int_equal(attn_blas_query(NULL), ATTN_ERR_NULL_ARGUMENT);
    attn_blas_info info;
    memset(&info, 0xFF, sizeof info);
    assert_int_equal(attn_blas_query(&info), ATTN_OK);
    /* every string NUL-terminated within its field */
    assert_non_null(memchr(info.backend, 0, sizeof info.backend));
    assert_non_null(memchr(info.loaded, 0, sizeof info.loaded));
    assert_non_null(memchr(info.library, 0, sizeof info.library));
    assert_non_null(memchr(info.version, 0, sizeof info.version));
    assert_non_null(memchr(info.kernel, 0, sizeof info.kernel));
    assert_non_null(memchr(info.simd, 0, sizeof info.simd));
    static const char *const backends[] = {"openblas", "blis", "mkl", "netlib"};
    static const char *const loaded[] = {"openblas", "blis", "mkl", "netlib", "unknown"};
    static const char *const simd[] = {"avx512", "avx2", "scalar"};
    if (!in_set(info.backend, backends, 4))
        fail_msg("backend \"%s\"", info.backend);
    if (!in_set(info.loaded, loaded, 5))
        fail_msg("loaded \"%s\"", info.loaded);
    if (!in_set(info.simd, simd, 3))
        fail_msg("simd \"%s\"", info.simd);
    assert_true(info.threading >= ATTN_BLAS_THREADING_UNKNOWN &&
                info.threading <= ATTN_BLAS_THREADING_OPENMP);
    assert_true(info.openmp == 0 || info.openmp == 1);
    assert_true(info.max_threads >= 1);
    if (!info.openmp)
        assert_int_equal(info.max_threads, 1);
    printf("  blas: backend=%s loaded=%s library=%s version=\"%s\" kernel=\"%s\" "
           "threading=%d simd=%s openmp=%d max_threads=%d\n",
           info.backend, info.loaded, info.library, info.version, info.kernel,
           (int)info.threading, info.simd, info.openmp, info.max_threads);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_init_defaults),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_argument_mismatch),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_too_large),
        cmocka_unit_test(test_bad_strides),
        cmocka_unit_test(test_strides_unset),
        cmocka_unit_test(test_bad_scale_options_threads),
        cmocka_unit_test(test_bad_lengths),
        cmocka_unit_test(test_workspace_errors),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_blas_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
