/*
 * test_errors.c -- every error path of the public API, each checked for its
 * status and for outputs (O, P, logsumexp buffers) left bitwise untouched;
 * attn_sdpa_desc_init defaults, attn_status_str, attn_version,
 * attn_blas_query.
 *
 * Plan-time errors are one table, desc_rows: each row is a base desc (the
 * base case with every feature on, or a plain dense desc of given sizes)
 * with a few fields set by offset, and the status plan_create must return;
 * rows expecting ATTN_OK are the controls next to each boundary.  Rules that
 * hold for every view field (negative, zero, unset strides) and every size
 * field expand over those fields.  A failing desc is given to
 * attn_sdpa_plan_create (which must fail and leave *plan alone) and then to
 * the one-shot attn_sdpa with complete buffers (which must fail the same way
 * without writing anything).  A new option adds rows; a new view or size
 * field adds an entry to views[] or size_fields[].
 *
 * Execute-time errors run over the table of argument slots (required, or
 * enabled by a desc field): NULL while used is ATTN_ERR_NULL_ARGUMENT, given
 * while unused ATTN_ERR_ARGUMENT_MISMATCH; then lengths and workspaces.
 *
 * The SDPA backward reuses the machinery: bwd_rows are field settings (SI,
 * SF, SV for the forward's fields, SB, SVB for the backward's own) over a
 * bwd base (base_case()'s forward without probabilities, dense dO, dQ, dK,
 * dV and a head-broadcast dBias); every failing forward row of desc_rows
 * must fail the backward with the forward's own status; the rules over
 * every field of the new views; then the argument slots of
 * attn_sdpa_bwd_args, lengths and workspaces, and the 16-bit tensors of
 * attn_sdpa_bwd_args16 (test_bwd_args16_errors).  Every failing call
 * leaves the dQ, dK, dV and dBias buffers (fp32 or 16-bit) bitwise
 * untouched.
 *
 * The quantized K/V types (1.2, Q8_0 and Q4_0): desc_rows hold their plan
 * rules (the dense forward's K/V storage only; head dims and view strides
 * multiples of 32), bwd_rows the backward's refusal, and
 * test_quant_execute_errors the pointer rules of args.kq / args.vq.
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

/* The number of statuses (the last one + 1; attn.h keeps no count in its
 * enum, so that adding a status changes no value a program holds). */
#define N_STATUS (ATTN_ERR_DESC_MISMATCH + 1)

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
    assert_true(d.dropout_p == 0.0 && d.dropout_seed == 0 && d.dropout_offset == 0);
    for (size_t i = 0; i < sizeof d.reserved / sizeof d.reserved[0]; i++)
        assert_true(d.reserved[i] == 0);
    assert_int_equal(attn_sdpa_desc_init(NULL), ATTN_ERR_NULL_ARGUMENT);

    /* the view helpers */
    attn_view v = attn_view_bhsd(3, 5, 7);
    assert_true(v.batch == 105 && v.head == 35 && v.seq == 7);
    v = attn_view_bshd(3, 5, 7);
    assert_true(v.batch == 105 && v.head == 7 && v.seq == 21);
}

/* ------------------------------------------------------------------------ */
/* Plan-time errors: one table of descs, each a valid base with a few fields  */
/* set, and the status plan_create must return (ATTN_OK rows are controls).   */
/* ------------------------------------------------------------------------ */

/* The sizes of base_case(), for the rows' arithmetic. */
enum { NB = 2, HQ = 4, HKV = 2, NQ = 6, MK = 9, DK = 8, DV = 5 };
static const int64_t BIG = (int64_t)INT32_MAX + 1;

enum { K_END = 0, K_I64, K_INT, K_FLT, K_DBL };
typedef struct field_set {
    size_t off;     /* offsetof(attn_sdpa_desc, field) */
    int kind;       /* K_* */
    int64_t i;
    double f;
} field_set;

#define FTYPE(field) (sizeof(((attn_sdpa_desc *)0)->field) == 8 ? K_I64 : K_INT)
/* Set an integer (or enum) field, a float or double field, or a whole view. */
#define SI(field, v) { offsetof(attn_sdpa_desc, field), FTYPE(field), (int64_t)(v), 0 }
#define SF(field, v) { offsetof(attn_sdpa_desc, field), \
    sizeof(((attn_sdpa_desc *)0)->field) == 8 ? K_DBL : K_FLT, 0, (double)(v) }
#define SV(view, b, h, s) SI(view.batch, b), SI(view.head, h), SI(view.seq, s)

enum { BASE_FULL, BASE_PLAIN };

typedef struct desc_row {
    const char *what;
    attn_status want;        /* ATTN_OK: a control that must plan */
    int base;                /* BASE_FULL: base_case(); BASE_PLAIN: no
                                option, dense BHSD views of size[] */
    int64_t size[7];         /* B, Hq, Hkv, n, m, dk, dv (BASE_PLAIN) */
    field_set set[12];       /* applied in order, up to K_END */
} desc_row;

#define PLAIN(B, Hq, Hkv, n, m, dk, dv) BASE_PLAIN, { B, Hq, Hkv, n, m, dk, dv }
#define FULL BASE_FULL, { 0 }
/* A plain desc whose head dims suit the quantized K/V types (1.2). */
#define QPLAIN PLAIN(2, 4, 2, 6, 9, 64, 32)

static const desc_row desc_rows[] = {
    /* sizes and the head ratio (every size field <= 0: see test_desc_table) */
    {"Hq = 4, Hkv = 3", ATTN_ERR_HEAD_RATIO, FULL, {SI(kv_heads, 3)}},
    {"Hq = 4, Hkv = 8", ATTN_ERR_HEAD_RATIO, FULL, {SI(kv_heads, 8)}},
    {"Hq = 5, Hkv = 2", ATTN_ERR_HEAD_RATIO, FULL, {SI(q_heads, 5), SI(kv_heads, 2)}},

    /* sizes and strides past the limits */
    {"control: plain desc", ATTN_OK, PLAIN(2, 4, 2, 6, 9, 8, 5), {{0}}},
    {"q_len = 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, BIG, 9, 8, 5), {{0}}},
    {"kv_len = 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, BIG, 8, 5), {{0}}},
    {"qk_dim = 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, BIG, 5), {{0}}},
    {"v_dim = 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, BIG), {{0}}},
    {"all sizes 2^16 (bytes overflow)", ATTN_ERR_TOO_LARGE,
     PLAIN(1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16, 1 << 16), {{0}}},
    {"q batch stride INT64_MAX/2", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SI(q.batch, INT64_MAX / 2)}},
    {"v batch stride 2^62", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SI(v.batch, (int64_t)1 << 62)}},
    {"o batch stride INT64_MAX/2", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SI(o.batch, INT64_MAX / 2)}},
    {"k seq stride 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SV(k, 2 * 9 * BIG, 9 * BIG, BIG)}},
    {"q seq stride 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SV(q, 4 * 6 * BIG, 6 * BIG, BIG)}},
    {"o seq stride 2^31", ATTN_ERR_TOO_LARGE, PLAIN(2, 4, 2, 6, 9, 8, 5),
     {SV(o, 4 * 6 * BIG, 6 * BIG, BIG)}},
    /* Overlapping input views let every view fit while the products of
     * batch, heads and rows that size the workspace do not (found by a
     * fuzzer: the m = 1024 plan reported a 2240-byte workspace, m = 8192
     * overflowed a signed product). */
    {"Hq = 1537228672809129302 over overlapping views, m = 1024", ATTN_ERR_TOO_LARGE,
     PLAIN(1, 1537228672809129302, 1, 1, 1024, 1, 1),
     {SV(q, 0, 1, 1), SV(k, 0, 0, 1), SV(v, 0, 0, 1)}},
    {"Hq = 1537228672809129302 over overlapping views, m = 8192", ATTN_ERR_TOO_LARGE,
     PLAIN(1, 1537228672809129302, 1, 1, 8192, 1, 1),
     {SV(q, 0, 1, 1), SV(k, 0, 0, 1), SV(v, 0, 0, 1)}},
    {"Hq = 2^60 over overlapping views (group state > 2^63 bytes)", ATTN_ERR_TOO_LARGE,
     PLAIN(1, (int64_t)1 << 60, 1, 1, 1, 1, 1),
     {SV(q, 0, 1, 1), SV(k, 0, 0, 1), SV(v, 0, 0, 1)}},
    {"control: Hq = 2^20 over overlapping views", ATTN_OK, PLAIN(1, 1 << 20, 1, 1, 1024, 1, 1),
     {SV(q, 0, 1, 1), SV(k, 0, 0, 1), SV(v, 0, 0, 1)}},
    /* the split-K partials would not fit: the keys are not split, and
     * nothing else is too large */
    {"control: B = 2^60 over overlapping views", ATTN_OK,
     PLAIN((int64_t)1 << 60, 1, 1, 1, 4096, 1, 1),
     {SV(q, 1, 0, 1), SV(k, 1, 0, 1), SV(v, 1, 0, 1), SV(o, 1, 0, 1)}},

    /* row strides shorter than the row */
    {"q.seq < dk", ATTN_ERR_BAD_STRIDE, FULL, {SI(q.seq, DK - 1)}},
    {"k.seq < dk", ATTN_ERR_BAD_STRIDE, FULL, {SI(k.seq, DK - 1)}},
    {"v.seq < dv", ATTN_ERR_BAD_STRIDE, FULL, {SI(v.seq, DV - 1)}},
    {"o.seq < dv", ATTN_ERR_BAD_STRIDE, FULL, {SI(o.seq, DV - 1)}},
    {"probs.seq < m", ATTN_ERR_BAD_STRIDE, FULL, {SI(probs.seq, MK - 1)}},
    /* also when the length is 1: the seq stride is the BLAS leading
     * dimension */
    {"control: n = m = 1", ATTN_OK, PLAIN(2, 4, 2, 1, 1, 8, 5), {{0}}},
    {"q.seq = 0 with n = 1", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 1, 1, 8, 5), {SI(q.seq, 0)}},
    {"k.seq = dk - 1 with m = 1", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 1, 1, 8, 5),
     {SI(k.seq, 7)}},
    {"v.seq = 0 with m = 1", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 1, 1, 8, 5), {SI(v.seq, 0)}},
    {"o.seq = dv - 1 with n = 1", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 1, 1, 8, 5),
     {SI(o.seq, 4)}},
    {"control: probs [B][H][1][1] dense", ATTN_OK, PLAIN(2, 4, 2, 1, 1, 8, 5),
     {SI(want_probs, 1), SV(probs, 4, 1, 1)}},
    {"probs.seq = 0 with n = m = 1", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 1, 1, 8, 5),
     {SI(want_probs, 1), SV(probs, 4, 1, 0)}},
    /* the logsumexp is no BLAS matrix: a 0 seq stride is a 0 stride on a
     * dimension of size 1, as for any view */
    {"control: lse.seq = 0 with n = 1", ATTN_OK, PLAIN(2, 4, 2, 1, 1, 8, 5),
     {SI(want_lse, 1), SV(lse, 4, 1, 0)}},
    {"lse.seq = 0 with n = 2", ATTN_ERR_BAD_STRIDE, PLAIN(2, 4, 2, 2, 1, 8, 5),
     {SI(want_lse, 1), SV(lse, 8, 2, 0)}},

    /* output views that are not nested (attn.h: sorted by stride, each
     * stride at least the extent of everything inside it) */
    {"o heads overlap (head = n*dv - 1)", ATTN_ERR_BAD_STRIDE, FULL, {SI(o.head, NQ * DV - 1)}},
    {"o batches overlap", ATTN_ERR_BAD_STRIDE, FULL, {SI(o.batch, HQ * NQ * DV - 1)}},
    {"o BSHD with head = dv - 1", ATTN_ERR_BAD_STRIDE, FULL,
     {SV(o, NQ * HQ * DV, DV - 1, HQ * DV)}},
    {"o head stride = seq stride", ATTN_ERR_BAD_STRIDE, FULL, {SV(o, HQ * NQ * DV, DV, DV)}},
    {"o batch stride = head stride", ATTN_ERR_BAD_STRIDE, FULL, {SV(o, NQ * DV, NQ * DV, DV)}},
    {"probs heads overlap", ATTN_ERR_BAD_STRIDE, FULL, {SI(probs.head, NQ * MK - 1)}},
    {"probs head stride = seq stride", ATTN_ERR_BAD_STRIDE, FULL,
     {SV(probs, HQ * NQ * MK, MK, MK)}},
    {"probs batch stride = m", ATTN_ERR_BAD_STRIDE, FULL, {SI(probs.batch, MK)}},
    {"lse head stride = seq stride = 1", ATTN_ERR_BAD_STRIDE, FULL, {SV(lse, HQ * NQ, 1, 1)}},
    {"lse batches overlap", ATTN_ERR_BAD_STRIDE, FULL, {SV(lse, HQ * NQ - 1, NQ, 1)}},
    {"lse heads overlap", ATTN_ERR_BAD_STRIDE, FULL, {SV(lse, HQ * NQ, NQ - 1, 1)}},
    /* the nesting rule at its boundary, both ways */
    {"control: o nested at the boundary", ATTN_OK, FULL, {SV(o, HQ * NQ * DV, NQ * DV, DV)}},
    {"o batch stride one less than the boundary", ATTN_ERR_BAD_STRIDE, FULL,
     {SV(o, HQ * NQ * DV - 1, NQ * DV, DV)}},
    {"control: lse [H][2] in rows of 2, head stride = extent", ATTN_OK,
     PLAIN(1, 3, 1, 2, 1, 1, 1), {SI(want_lse, 1), SV(lse, 0, 2, 1)}},
    {"control: lse [S][H], seq stride = extent of the heads", ATTN_OK,
     PLAIN(1, 3, 1, 2, 1, 1, 1), {SI(want_lse, 1), SV(lse, 0, 1, 3)}},
    {"lse seq stride one less than the heads' extent", ATTN_ERR_BAD_STRIDE,
     PLAIN(1, 3, 1, 2, 1, 1, 1), {SI(want_lse, 1), SV(lse, 0, 1, 2)}},
    /* sufficient, not necessary: interleaved views that share no address
     * (rows at {0, 2, 4} and {3, 5, 7}) are rejected, as attn.h says */
    {"o rows {0, 2, 4} and {3, 5, 7}", ATTN_ERR_BAD_STRIDE, PLAIN(1, 3, 1, 2, 1, 1, 1),
     {SV(o, 0, 2, 3)}},
    {"probs rows {0, 2, 4} and {3, 5, 7}", ATTN_ERR_BAD_STRIDE, PLAIN(1, 3, 1, 2, 1, 1, 1),
     {SI(want_probs, 1), SV(probs, 0, 2, 3)}},
    {"lse at {0, 2, 4} and {3, 5, 7}", ATTN_ERR_BAD_STRIDE, PLAIN(1, 3, 1, 2, 1, 1, 1),
     {SI(want_lse, 1), SV(lse, 0, 2, 3)}},
    {"control: o interleaved [S][H][B][D]", ATTN_OK, FULL, {SV(o, DV, 2 * DV, 2 * HQ * DV)}},
    {"control: o, probs, lse interleaved [S][H][B]", ATTN_OK, FULL,
     {SV(o, DV, 2 * DV, 2 * HQ * DV), SV(probs, MK, 2 * MK, 2 * HQ * MK)}},
    {"control: lse interleaved [S][H][B]", ATTN_OK, FULL, {SV(lse, 1, 2, 2 * HQ)}},
    /* zero strides that are fine: dimensions of size 1, mask/bias broadcast */
    {"control: zero strides over size-1 dims", ATTN_OK, PLAIN(1, 1, 1, 1, 5, 4, 3),
     {SI(q.batch, 0), SI(q.head, 0), SI(o.batch, 0), SI(o.head, 0), SI(k.batch, 0),
      SI(k.head, 0), SI(v.batch, 0), SI(v.head, 0)}},
    {"control: mask and bias fully broadcast", ATTN_OK, FULL, {SV(mask, 0, 0, 0),
                                                               SV(bias, 0, 0, 0)}},
    /* unused tensors may stay unset */
    {"control: unused tensors unset", ATTN_OK, FULL,
     {SI(mask_mode, ATTN_MASK_NONE), SI(use_bias, 0), SI(want_probs, 0), SI(want_lse, 0),
      SV(mask, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET)}},

    /* scale, options, reserved fields, threads, windows */
    {"scale = +inf", ATTN_ERR_BAD_SCALE, FULL, {SF(scale, INFINITY)}},
    {"scale = -inf", ATTN_ERR_BAD_SCALE, FULL, {SF(scale, -INFINITY)}},
    {"control: scale NaN", ATTN_OK, FULL, {SF(scale, NAN)}},
    {"control: scale 0", ATTN_OK, FULL, {SF(scale, 0.0)}},
    {"control: scale -1", ATTN_OK, FULL, {SF(scale, -1.0)}},
    {"control: scale FLT_MAX", ATTN_OK, FULL, {SF(scale, FLT_MAX)}},
    {"control: scale -FLT_MAX", ATTN_OK, FULL, {SF(scale, -FLT_MAX)}},
    {"control: scale FLT_MIN", ATTN_OK, FULL, {SF(scale, FLT_MIN)}},
    {"control: scale 1e-40 (subnormal)", ATTN_OK, FULL, {SF(scale, 1e-40)}},
    {"align = 2", ATTN_ERR_BAD_OPTION, FULL, {SI(align, 2)}},
    {"align = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(align, -1)}},
    {"align = 1000", ATTN_ERR_BAD_OPTION, FULL, {SI(align, 1000)}},
    {"mask_mode = 3", ATTN_ERR_BAD_OPTION, FULL, {SI(mask_mode, 3)}},
    {"mask_mode = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(mask_mode, -1)}},
    {"reserved[0] != 0", ATTN_ERR_BAD_OPTION, FULL, {SI(reserved[0], 1)}},
    /* reserved[] shrank from 13 to 10 when the sparse fields took three
     * slots, to 6 for the storage types and the paged cache, to 5 for the
     * engine, to 4 for q_type and o_type, to 2 for q_pos0 and kv_pos0
     * (1.3), then to 1 for qk_int8 and reserved_pad2 (1.4; the desc keeps
     * its size); the last one is reserved[0] */
    {"reserved[0] = INT64_MIN", ATTN_ERR_BAD_OPTION, FULL, {SI(reserved[0], INT64_MIN)}},
    {"reserved[0] = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(reserved[0], -1)}},
    /* positions (1.3): only with use_positions (test_positions.c has the
     * rest of their statuses) */
    {"q_pos0 without use_positions", ATTN_ERR_BAD_OPTION, FULL, {SI(q_pos0, 3)}},
    {"kv_pos0 without use_positions", ATTN_ERR_BAD_OPTION, FULL, {SI(kv_pos0, -3)}},
    /* the element types of Q and O: 3 and 4 are the quantized K/V types
     * (1.2), which Q and O do not take; 5 and up are unknown */
    {"q_type = 5", ATTN_ERR_BAD_OPTION, FULL, {SI(q_type, 5)}},
    {"q_type = 99", ATTN_ERR_BAD_OPTION, FULL, {SI(q_type, 99)}},
    {"q_type = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(q_type, -1)}},
    {"o_type = 5", ATTN_ERR_BAD_OPTION, FULL, {SI(o_type, 5)}},
    {"o_type = 99", ATTN_ERR_BAD_OPTION, FULL, {SI(o_type, 99)}},
    {"o_type = INT_MIN", ATTN_ERR_BAD_OPTION, FULL, {SI(o_type, INT_MIN)}},
    {"q_type Q8_0", ATTN_ERR_UNSUPPORTED_TYPE, FULL, {SI(q_type, ATTN_DTYPE_Q8_0)}},
    {"q_type Q4_0", ATTN_ERR_UNSUPPORTED_TYPE, FULL, {SI(q_type, ATTN_DTYPE_Q4_0)}},
    {"o_type Q8_0", ATTN_ERR_UNSUPPORTED_TYPE, FULL, {SI(o_type, ATTN_DTYPE_Q8_0)}},
    {"o_type Q4_0", ATTN_ERR_UNSUPPORTED_TYPE, FULL, {SI(o_type, ATTN_DTYPE_Q4_0)}},
    {"q_type Q4_0, every dim a multiple of 32", ATTN_ERR_UNSUPPORTED_TYPE, QPLAIN,
     {SI(q_type, ATTN_DTYPE_Q4_0)}},
    {"o_type Q8_0 with K and V Q8_0, every dim a multiple of 32", ATTN_ERR_UNSUPPORTED_TYPE,
     QPLAIN, {SI(o_type, ATTN_DTYPE_Q8_0), SI(k_type, ATTN_DTYPE_Q8_0),
              SI(v_type, ATTN_DTYPE_Q8_0)}},
    {"control: q_type BF16, o_type F16", ATTN_OK, FULL,
     {SI(q_type, ATTN_DTYPE_BF16), SI(o_type, ATTN_DTYPE_F16)}},
    /* the sparse options take 16-bit Q and O (1.1; they were
     * ATTN_ERR_UNSUPPORTED_TYPE) */
    {"control: q_type BF16 with global keys", ATTN_OK, FULL,
     {SI(q_type, ATTN_DTYPE_BF16), SI(use_global_k, 1)}},
    {"control: o_type F16 with a layout", ATTN_OK, FULL,
     {SI(o_type, ATTN_DTYPE_F16), SI(block_size, 16)}},
    {"control: q F16, o BF16, global queries and a layout", ATTN_OK, FULL,
     {SI(q_type, ATTN_DTYPE_F16), SI(o_type, ATTN_DTYPE_BF16), SI(use_global_q, 1),
      SI(block_size, 16)}},
    {"q_type = 5 with global keys", ATTN_ERR_BAD_OPTION, FULL,
     {SI(q_type, 5), SI(use_global_k, 1)}},
    {"q_type Q8_0 with global keys", ATTN_ERR_UNSUPPORTED_TYPE, FULL,
     {SI(q_type, ATTN_DTYPE_Q8_0), SI(use_global_k, 1)}},
    {"o_type Q4_0 with a layout", ATTN_ERR_UNSUPPORTED_TYPE, FULL,
     {SI(o_type, ATTN_DTYPE_Q4_0), SI(block_size, 16)}},
    {"use_positions = 2", ATTN_ERR_BAD_OPTION, FULL, {SI(use_positions, 2)}},
    {"use_positions = INT_MIN", ATTN_ERR_BAD_OPTION, FULL, {SI(use_positions, INT_MIN)}},
    /* the engine */
    {"control: engine BLAS", ATTN_OK, FULL, {SI(engine, ATTN_ENGINE_BLAS)}},
    {"control: engine TILE", ATTN_OK, FULL, {SI(engine, ATTN_ENGINE_TILE)}},
    {"engine = 3", ATTN_ERR_BAD_OPTION, FULL, {SI(engine, 3)}},
    {"engine = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(engine, -1)}},
    {"engine = INT_MAX", ATTN_ERR_BAD_OPTION, FULL, {SI(engine, INT_MAX)}},

    /* storage types and the paged cache */
    {"control: k F16, v BF16", ATTN_OK, FULL,
     {SI(k_type, ATTN_DTYPE_F16), SI(v_type, ATTN_DTYPE_BF16)}},
    {"k_type = 5", ATTN_ERR_BAD_OPTION, FULL, {SI(k_type, 5)}},
    {"k_type = 99", ATTN_ERR_BAD_OPTION, FULL, {SI(k_type, 99)}},
    {"v_type = 5", ATTN_ERR_BAD_OPTION, FULL, {SI(v_type, 5)}},
    {"v_type = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(v_type, -1)}},
    /* the quantized K/V types (1.2, "Quantized KV caches"): qk_dim (K) or
     * v_dim (V) a multiple of 32, else ATTN_ERR_BAD_SIZE; every stride of
     * the quantized tensor's view (counted in values) a multiple of 32,
     * else ATTN_ERR_BAD_STRIDE.  QPLAIN: dk 64, dv 32, dense BHSD views,
     * k {1152, 576, 64}, v {576, 288, 32}. */
    {"control: K Q8_0, V Q4_0", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"control: K Q4_0, V F16", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q4_0), SI(v_type, ATTN_DTYPE_F16)}},
    {"control: K BF16, V Q8_0, Q and O F16", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_BF16), SI(v_type, ATTN_DTYPE_Q8_0), SI(q_type, ATTN_DTYPE_F16),
      SI(o_type, ATTN_DTYPE_F16)}},
    /* integer scores (1.4): qk_int8 0 or 1, and 1 only with a Q8_0 or
     * Q4_0 K (whatever V); reserved_pad2 zero */
    {"control: qk_int8 = 1, K Q8_0, V F32", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SI(qk_int8, 1)}},
    {"control: qk_int8 = 1, K Q4_0, V Q8_0, Q and O F16", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q4_0), SI(v_type, ATTN_DTYPE_Q8_0), SI(qk_int8, 1),
      SI(q_type, ATTN_DTYPE_F16), SI(o_type, ATTN_DTYPE_F16)}},
    {"qk_int8 = 2", ATTN_ERR_BAD_OPTION, QPLAIN, {SI(k_type, ATTN_DTYPE_Q8_0), SI(qk_int8, 2)}},
    {"qk_int8 = -1", ATTN_ERR_BAD_OPTION, QPLAIN, {SI(k_type, ATTN_DTYPE_Q4_0), SI(qk_int8, -1)}},
    {"qk_int8 = 1 with K F32", ATTN_ERR_BAD_OPTION, FULL, {SI(qk_int8, 1)}},
    {"qk_int8 = 1 with K F16, V Q8_0", ATTN_ERR_BAD_OPTION, QPLAIN,
     {SI(k_type, ATTN_DTYPE_F16), SI(v_type, ATTN_DTYPE_Q8_0), SI(qk_int8, 1)}},
    {"qk_int8 = 1 with K BF16", ATTN_ERR_BAD_OPTION, FULL,
     {SI(k_type, ATTN_DTYPE_BF16), SI(qk_int8, 1)}},
    {"reserved_pad2 = 1", ATTN_ERR_BAD_OPTION, FULL, {SI(reserved_pad2, 1)}},
    {"control: V Q8_0 (dv 32) with dk 8", ATTN_OK, PLAIN(2, 4, 2, 6, 9, 8, 32),
     {SI(v_type, ATTN_DTYPE_Q8_0)}},
    {"K Q8_0, qk_dim 48", ATTN_ERR_BAD_SIZE, PLAIN(2, 4, 2, 6, 9, 48, 32),
     {SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"control: K F32, qk_dim 48", ATTN_OK, PLAIN(2, 4, 2, 6, 9, 48, 32), {{0}}},
    {"K Q4_0, qk_dim 16", ATTN_ERR_BAD_SIZE, PLAIN(2, 4, 2, 6, 9, 16, 32),
     {SI(k_type, ATTN_DTYPE_Q4_0)}},
    {"V Q4_0, v_dim 40", ATTN_ERR_BAD_SIZE, PLAIN(2, 4, 2, 6, 9, 64, 40),
     {SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"V Q8_0, v_dim 1", ATTN_ERR_BAD_SIZE, PLAIN(2, 4, 2, 6, 9, 64, 1),
     {SI(v_type, ATTN_DTYPE_Q8_0)}},
    {"K Q8_0 on the base (qk_dim 8)", ATTN_ERR_BAD_SIZE, FULL, {SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"V Q4_0 on the base (v_dim 5)", ATTN_ERR_BAD_SIZE, FULL, {SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"K Q8_0, k.seq = 80", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SV(k, 1472, 736, 80)}},
    {"control: K F32, k.seq = 80", ATTN_OK, QPLAIN, {SV(k, 1472, 736, 80)}},
    {"K Q4_0, k.head = 592", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q4_0), SV(k, 1184, 592, 64)}},
    {"K Q8_0, k.batch = 1168", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SV(k, 1168, 576, 64)}},
    {"V Q4_0, v.seq = 48", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(v_type, ATTN_DTYPE_Q4_0), SV(v, 896, 448, 48)}},
    {"V Q8_0, v.head = 304", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(v_type, ATTN_DTYPE_Q8_0), SV(v, 608, 304, 32)}},
    {"V Q4_0, v.batch = 592", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(v_type, ATTN_DTYPE_Q4_0), SV(v, 592, 288, 32)}},
    {"control: F16 V, v.batch = 592", ATTN_OK, QPLAIN,
     {SI(v_type, ATTN_DTYPE_F16), SV(v, 592, 288, 32)}},
    {"control: K Q8_0, gapped strides 96 / 9 x 96 + 32 / 2 x that", ATTN_OK, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SV(k, 2 * (9 * 96 + 32), 9 * 96 + 32, 96)}},
    {"control: K Q8_0 as ggml's layer cache {m x Hkv x dk, dk, Hkv x dk}", ATTN_OK,
     PLAIN(1, 4, 2, 6, 9, 64, 32),
     {SI(k_type, ATTN_DTYPE_Q8_0), SV(k, 9 * 2 * 64, 64, 2 * 64)}},
    {"control: paged Q8_0 K, Q4_0 V [blocks][H][bs][d]", ATTN_OK, QPLAIN,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * 64, 4 * 64, 64), SV(v, HKV * 4 * 32, 4 * 32, 32),
      SI(k_type, ATTN_DTYPE_Q8_0), SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"control: paged Q4_0 K [blocks][bs][H][d], block size 3", ATTN_OK, QPLAIN,
     {SI(kv_block_size, 3), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 3 * 64, 64, HKV * 64), SV(v, HKV * 3 * 32, 3 * 32, 32),
      SI(k_type, ATTN_DTYPE_Q4_0)}},
    {"paged Q8_0 K, pool k.seq = 80", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, 640, 320, 80), SV(v, HKV * 4 * 32, 4 * 32, 32), SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"paged Q4_0 V, pool v.batch = 272", ATTN_ERR_BAD_STRIDE, QPLAIN,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * 64, 4 * 64, 64), SV(v, 272, 4 * 32, 32), SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"paged Q8_0 K, qk_dim 8", ATTN_ERR_BAD_SIZE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV),
      SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"kv_block_size = -1", ATTN_ERR_BAD_OPTION, FULL, {SI(kv_block_size, -1)}},
    {"kv_num_blocks without paging", ATTN_ERR_BAD_OPTION, FULL, {SI(kv_num_blocks, 4)}},
    {"kv_max_blocks without paging", ATTN_ERR_BAD_OPTION, FULL, {SI(kv_max_blocks, 4)}},
    {"control: paged, 3 blocks of 4 per sequence, pool of 7", ATTN_OK, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"control: paged [blocks][bs][H][d] pool", ATTN_OK, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, DK, HKV * DK), SV(v, HKV * 4 * DV, DV, HKV * DV)}},
    {"paged, m > max_blocks x bs", ATTN_ERR_BAD_SIZE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 2),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"paged, kv_num_blocks = 0", ATTN_ERR_BAD_SIZE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 0), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"paged, kv_max_blocks = -1", ATTN_ERR_BAD_SIZE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, -1),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"paged, kv_block_size = 2^31", ATTN_ERR_TOO_LARGE, FULL,
     {SI(kv_block_size, BIG), SI(kv_num_blocks, 1), SI(kv_max_blocks, 1),
      SV(k, 0, 0, DK), SV(v, 0, 0, DV)}},
    {"paged, kv_num_blocks = 2^31", ATTN_ERR_TOO_LARGE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, BIG), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"paged, pool k.seq < dk", ATTN_ERR_BAD_STRIDE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK - 1), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    {"paged, pool v.batch = 0 over 7 blocks", ATTN_ERR_BAD_STRIDE, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, 0, 4 * DV, DV)}},
    {"paged, pool k strides unset", ATTN_ERR_STRIDES_UNSET, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, ATTN_STRIDE_UNSET, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV)}},
    /* 16-bit K/V storage with the sparse options: widened (1.1; it was
     * ATTN_ERR_BAD_OPTION); the paged cache with them still is */
    {"control: F16 K with global keys", ATTN_OK, FULL,
     {SI(k_type, ATTN_DTYPE_F16), SI(use_global_k, 1)}},
    {"control: BF16 V with a block layout", ATTN_OK, FULL,
     {SI(v_type, ATTN_DTYPE_BF16), SI(block_size, 16)}},
    {"control: Q, K, V, O all BF16 with global queries", ATTN_OK, FULL,
     {SI(q_type, ATTN_DTYPE_BF16), SI(k_type, ATTN_DTYPE_BF16), SI(v_type, ATTN_DTYPE_BF16),
      SI(o_type, ATTN_DTYPE_BF16), SI(use_global_q, 1)}},
    {"k_type = 5 with a layout", ATTN_ERR_BAD_OPTION, FULL,
     {SI(k_type, 5), SI(block_size, 16)}},
    /* the quantized K/V types are the dense forward's only (1.2) */
    {"control: QPLAIN with global keys", ATTN_OK, QPLAIN, {SI(use_global_k, 1)}},
    {"K Q8_0 with global keys", ATTN_ERR_UNSUPPORTED_TYPE, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q8_0), SI(use_global_k, 1)}},
    {"V Q4_0 with global queries", ATTN_ERR_UNSUPPORTED_TYPE, QPLAIN,
     {SI(v_type, ATTN_DTYPE_Q4_0), SI(use_global_q, 1)}},
    {"K Q4_0 with a block layout", ATTN_ERR_UNSUPPORTED_TYPE, QPLAIN,
     {SI(k_type, ATTN_DTYPE_Q4_0), SI(block_size, 16)}},
    {"V Q8_0 with a per-head layout", ATTN_ERR_UNSUPPORTED_TYPE, QPLAIN,
     {SI(v_type, ATTN_DTYPE_Q8_0), SI(block_size, 32), SI(layout_per_head, 1)}},
    {"K Q8_0 with global keys on the base", ATTN_ERR_UNSUPPORTED_TYPE, FULL,
     {SI(k_type, ATTN_DTYPE_Q8_0), SI(use_global_k, 1), SI(qk_dim, 32),
      SV(q, HQ * NQ * 32, NQ * 32, 32), SV(k, HKV * MK * 32, MK * 32, 32)}},
    {"paged F16 K with a block layout", ATTN_ERR_BAD_OPTION, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV),
      SI(k_type, ATTN_DTYPE_F16), SI(block_size, 16)}},
    {"paged with global queries", ATTN_ERR_BAD_OPTION, FULL,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3),
      SV(k, HKV * 4 * DK, 4 * DK, DK), SV(v, HKV * 4 * DV, 4 * DV, DV), SI(use_global_q, 1)}},
    {"dropout_p = -0.1", ATTN_ERR_BAD_OPTION, FULL, {SF(dropout_p, -0.1)}},
    {"dropout_p = 1.5", ATTN_ERR_BAD_OPTION, FULL, {SF(dropout_p, 1.5)}},
    {"dropout_p = NaN", ATTN_ERR_BAD_OPTION, FULL, {SF(dropout_p, NAN)}},
    {"threads = -1", ATTN_ERR_BAD_THREADS, FULL, {SI(threads, -1)}},
    {"threads = INT_MIN", ATTN_ERR_BAD_THREADS, FULL, {SI(threads, INT_MIN)}},
    {"threads = 1025", ATTN_ERR_BAD_THREADS, FULL, {SI(threads, 1025)}},
    {"threads = INT_MAX", ATTN_ERR_BAD_THREADS, FULL, {SI(threads, INT_MAX)}},
    {"control: threads = 0", ATTN_OK, FULL, {SI(threads, 0)}},
    {"control: threads = 64", ATTN_OK, FULL, {SI(threads, 64)}},
    {"control: threads = 1024", ATTN_OK, FULL, {SI(threads, 1024)}},
    /* sparse attention: block size a power of two in [16, 256] or 0,
     * layout_per_head 0 or 1 (0 without a layout), reserved_flags 0; the
     * flags need no other option (global flags with lengths: no error,
     * padding wins) */
    {"block_size = 8", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, 8)}},
    {"block_size = 24", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, 24)}},
    {"block_size = 512", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, 512)}},
    {"block_size = -16", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, -16)}},
    {"block_size = 1", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, 1)}},
    {"block_size = INT64_MIN", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, INT64_MIN)}},
    {"block_size = 2^62", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, (int64_t)1 << 62)}},
    {"control: block_size = 16", ATTN_OK, FULL, {SI(block_size, 16)}},
    {"control: block_size = 256 > n, m", ATTN_OK, FULL, {SI(block_size, 256)}},
    {"control: block_size = 64, per head", ATTN_OK, FULL,
     {SI(block_size, 64), SI(layout_per_head, 1)}},
    {"layout_per_head = 2", ATTN_ERR_BAD_OPTION, FULL, {SI(block_size, 16), SI(layout_per_head, 2)}},
    {"layout_per_head = -1", ATTN_ERR_BAD_OPTION, FULL,
     {SI(block_size, 16), SI(layout_per_head, -1)}},
    {"layout_per_head = 1 without a layout", ATTN_ERR_BAD_OPTION, FULL, {SI(layout_per_head, 1)}},
    {"reserved_flags = 1", ATTN_ERR_BAD_OPTION, FULL, {SI(reserved_flags, 1)}},
    {"reserved_flags = INT_MIN", ATTN_ERR_BAD_OPTION, FULL,
     {SI(use_global_k, 1), SI(reserved_flags, INT_MIN)}},
    {"control: global keys and queries with both lengths", ATTN_OK, FULL,
     {SI(use_global_k, 1), SI(use_global_q, 7)}},
    {"control: everything sparse at once", ATTN_OK, FULL,
     {SI(use_global_k, 1), SI(use_global_q, 1), SI(block_size, 32), SI(layout_per_head, 1)}},
    {"sparse with overlapping views, B = 2^40 (flags b * m + j)", ATTN_ERR_TOO_LARGE,
     PLAIN((int64_t)1 << 40, 1, 1, 1, 1 << 24, 1, 1),
     {SV(k, 1, 0, 1), SV(v, 1, 0, 1), SI(use_global_k, 1)}},
    {"control: the same dense", ATTN_OK, PLAIN((int64_t)1 << 40, 1, 1, 1, 1 << 24, 1, 1),
     {SV(k, 1, 0, 1), SV(v, 1, 0, 1)}},
    /* any negative bound means unbounded, large ones are fine */
    {"control: window INT64_MIN / INT64_MAX", ATTN_OK, FULL,
     {SI(window_left, INT64_MIN), SI(window_right, INT64_MAX)}},
};

/* The eight views of a desc and their three fields, for the rules that
 * hold for every one of them. */
static const struct {
    const char *name;
    size_t off;
    int broadcast;   /* mask and bias take 0 strides */
} views[] = {
    {"q", offsetof(attn_sdpa_desc, q), 0},       {"k", offsetof(attn_sdpa_desc, k), 0},
    {"v", offsetof(attn_sdpa_desc, v), 0},       {"o", offsetof(attn_sdpa_desc, o), 0},
    {"mask", offsetof(attn_sdpa_desc, mask), 1}, {"bias", offsetof(attn_sdpa_desc, bias), 1},
    {"probs", offsetof(attn_sdpa_desc, probs), 0}, {"lse", offsetof(attn_sdpa_desc, lse), 0},
};
static const struct {
    const char *name;
    size_t off;
} view_fields[] = {
    {"batch", offsetof(attn_view, batch)}, {"head", offsetof(attn_view, head)},
    {"seq", offsetof(attn_view, seq)},
};
/* Every field of every view set to a value (on the base case, where every
 * dimension has size > 1). */
static const struct {
    int64_t value;
    int skip_broadcast;
    attn_status want;
} view_rules[] = {
    {-1, 0, ATTN_ERR_BAD_STRIDE},
    {-12345678, 0, ATTN_ERR_BAD_STRIDE},
    {0, 1, ATTN_ERR_BAD_STRIDE},
    {ATTN_STRIDE_UNSET, 0, ATTN_ERR_STRIDES_UNSET},
};
/* Every size field set to a value. */
static const struct {
    const char *name;
    size_t off;
} size_fields[] = {
    {"batch", offsetof(attn_sdpa_desc, batch)},   {"q_heads", offsetof(attn_sdpa_desc, q_heads)},
    {"kv_heads", offsetof(attn_sdpa_desc, kv_heads)}, {"q_len", offsetof(attn_sdpa_desc, q_len)},
    {"kv_len", offsetof(attn_sdpa_desc, kv_len)}, {"qk_dim", offsetof(attn_sdpa_desc, qk_dim)},
    {"v_dim", offsetof(attn_sdpa_desc, v_dim)},
};
static const int64_t bad_sizes[] = {0, -1, INT64_MIN};

static int64_t *i64_at(attn_sdpa_desc *d, size_t off)
{
    return (int64_t *)(void *)((char *)d + off);
}

/* Set the fields of set[0 .. K_END) in the struct at d (an attn_sdpa_desc,
 * or an attn_sdpa_bwd_desc, whose fwd comes first so SI() works there too). */
static void apply_sets(void *d, const field_set *set, size_t nset)
{
    for (const field_set *f = set; f < set + nset && f->kind != K_END; f++) {
        char *at = (char *)d + f->off;
        if (f->kind == K_I64)
            memcpy(at, &f->i, sizeof f->i);
        else if (f->kind == K_INT) {
            int v = (int)f->i;
            memcpy(at, &v, sizeof v);
        } else if (f->kind == K_DBL) {
            memcpy(at, &f->f, sizeof f->f);
        } else {
            float v = (float)f->f;
            memcpy(at, &v, sizeof v);
        }
    }
}

/* The desc of a row: its base, then its fields set in order. */
static attn_sdpa_desc row_desc(const desc_row *r, const attn_sdpa_desc *full)
{
    attn_sdpa_desc d;
    if (r->base == BASE_FULL) {
        d = *full;
    } else {
        const int64_t *z = r->size;
        attn_sdpa_desc_init(&d);
        d.batch = z[0];
        d.q_heads = z[1];
        d.kv_heads = z[2];
        d.q_len = z[3];
        d.kv_len = z[4];
        d.qk_dim = z[5];
        d.v_dim = z[6];
        d.q = attn_view_bhsd(z[1], z[3], z[5]);
        d.k = attn_view_bhsd(z[2], z[4], z[5]);
        d.v = attn_view_bhsd(z[2], z[4], z[6]);
        d.o = attn_view_bhsd(z[1], z[3], z[6]);
        d.threads = 1;
    }
    apply_sets(&d, r->set, sizeof r->set / sizeof r->set[0]);
    return d;
}

/* Every row, then the rules over every view field and every size field. */
static void test_desc_table(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    const attn_sdpa_desc full = t.desc;
    assert_true(full.batch == NB && full.q_heads == HQ && full.kv_heads == HKV &&
                full.q_len == NQ && full.kv_len == MK && full.qk_dim == DK && full.v_dim == DV);
    expect_desc_ok(&full, "control: base desc");
    for (size_t k = 0; k < sizeof desc_rows / sizeof desc_rows[0]; k++) {
        const attn_sdpa_desc d = row_desc(&desc_rows[k], &full);
        if (desc_rows[k].want == ATTN_OK)
            expect_desc_ok(&d, desc_rows[k].what);
        else
            expect_desc_fail(&t, &d, desc_rows[k].want, desc_rows[k].what);
    }
    int cases = 1 + (int)(sizeof desc_rows / sizeof desc_rows[0]);
    char what[96];
    for (size_t r = 0; r < sizeof view_rules / sizeof view_rules[0]; r++)
        for (size_t x = 0; x < sizeof views / sizeof views[0]; x++) {
            if (view_rules[r].skip_broadcast && views[x].broadcast)
                continue;
            for (size_t f = 0; f < 3; f++) {
                attn_sdpa_desc d = full;
                *i64_at(&d, views[x].off + view_fields[f].off) = view_rules[r].value;
                snprintf(what, sizeof what, "%s.%s = %lld", views[x].name, view_fields[f].name,
                         (long long)view_rules[r].value);
                expect_desc_fail(&t, &d, view_rules[r].want, what);
                cases++;
            }
            if (view_rules[r].value == ATTN_STRIDE_UNSET) {
                attn_sdpa_desc d = full;
                for (size_t f = 0; f < 3; f++)
                    *i64_at(&d, views[x].off + view_fields[f].off) = ATTN_STRIDE_UNSET;
                snprintf(what, sizeof what, "%s strides unset", views[x].name);
                expect_desc_fail(&t, &d, ATTN_ERR_STRIDES_UNSET, what);
                cases++;
            }
        }
    for (size_t f = 0; f < sizeof size_fields / sizeof size_fields[0]; f++)
        for (size_t k = 0; k < sizeof bad_sizes / sizeof bad_sizes[0]; k++) {
            attn_sdpa_desc d = full;
            *i64_at(&d, size_fields[f].off) = bad_sizes[k];
            snprintf(what, sizeof what, "%s = %lld", size_fields[f].name, (long long)bad_sizes[k]);
            expect_desc_fail(&t, &d, ATTN_ERR_BAD_SIZE, what);
            cases++;
        }
    printf("  %d descs checked, %d wrong\n", cases, g_fail);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

/* MHA weights whose byte count is not representable ([3E][E] packed
 * in_proj, [E][kdim], [E][vdim] with 2^31 - 1 each), every other size fine. */
static void test_mha_too_large(void **state)
{
    (void)state;
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
        assert_int_equal(attn_mha_plan_create(&mp, &md), ATTN_ERR_TOO_LARGE);
        assert_null(mp);
    }
}

/* ------------------------------------------------------------------------ */
/* Execute-time errors                                                        */
/* ------------------------------------------------------------------------ */

/* The pointers of attn_sdpa_args: the four required ones, then the optional
 * ones with the desc field that enables each (0 disables it). */
static const struct {
    const char *name;
    size_t arg;
    size_t flag;     /* (size_t)-1: required */
} slots[] = {
    {"q", offsetof(attn_sdpa_args, q), (size_t)-1},
    {"k", offsetof(attn_sdpa_args, k), (size_t)-1},
    {"v", offsetof(attn_sdpa_args, v), (size_t)-1},
    {"o", offsetof(attn_sdpa_args, o), (size_t)-1},
    {"kv_lens", offsetof(attn_sdpa_args, kv_lens), offsetof(attn_sdpa_desc, use_kv_lens)},
    {"q_lens", offsetof(attn_sdpa_args, q_lens), offsetof(attn_sdpa_desc, use_q_lens)},
    {"mask", offsetof(attn_sdpa_args, mask), offsetof(attn_sdpa_desc, mask_mode)},
    {"bias", offsetof(attn_sdpa_args, bias), offsetof(attn_sdpa_desc, use_bias)},
    {"probs", offsetof(attn_sdpa_args, probs), offsetof(attn_sdpa_desc, want_probs)},
    {"lse", offsetof(attn_sdpa_args, lse), offsetof(attn_sdpa_desc, want_lse)},
};

static void set_null(attn_sdpa_args *a, size_t off)
{
    const void *null = NULL;
    memcpy((char *)a + off, &null, sizeof null);
}

/* Per-batch lengths out of [0, n] and [0, m]: ATTN_ERR_BAD_LENGTH. */
static void check_lengths(tinst *t, const attn_sdpa_plan *plan)
{
    const int32_t n = (int32_t)t->desc.q_len, m = (int32_t)t->desc.kv_len;
    const int32_t badk[] = {-1, m + 1, INT32_MIN, INT32_MAX};
    const int32_t badq[] = {-1, n + 1, INT32_MIN, INT32_MAX};
    char what[96];
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            int32_t kl[2] = {m, 3}, ql[2] = {n, 2};
            attn_sdpa_args a = t->args;
            kl[b] = badk[k];
            a.kv_lens = kl;
            snprintf(what, sizeof what, "kv_lens[%d] = %d (m = %d)", b, (int)badk[k], (int)m);
            expect_exec_fail(t, plan, &t->desc, &a, ATTN_ERR_BAD_LENGTH, what);
            kl[b] = b ? 3 : m;
            ql[b] = badq[k];
            a.q_lens = ql;
            snprintf(what, sizeof what, "q_lens[%d] = %d (n = %d)", b, (int)badq[k], (int)n);
            expect_exec_fail(t, plan, &t->desc, &a, ATTN_ERR_BAD_LENGTH, what);
        }
    /* controls: 0 and the full length are valid */
    {
        int32_t kl[2] = {0, m}, ql[2] = {n, 0};
        attn_sdpa_args a = t->args;
        a.kv_lens = kl;
        a.q_lens = ql;
        tinst_clear_outputs(t);
        attn_status s = attn_sdpa_execute(plan, &a, NULL, 0);
        if (s != ATTN_OK) {
            printf("FAIL control: lengths 0 and full: %s\n", sname(s));
            g_fail++;
        }
    }
}

/* A caller workspace too small or misaligned; controls of the right size,
 * larger, and NULL with a byte count. */
static void check_workspace(tinst *t, const attn_sdpa_plan *plan)
{
    size_t ws = 0;
    assert_int_equal(attn_sdpa_workspace_size(plan, &ws), ATTN_OK);
    printf("workspace size of the base plan: %zu bytes\n", ws);
    size_t cap = ((ws + 256) + 63) / 64 * 64;
    unsigned char *buf = aligned_alloc(64, cap);
    assert_non_null(buf);
    memset(buf, 0x5A, cap);

    if (ws > 0) {
        expect_exec_fail2(t, plan, NULL, &t->args, buf, ws - 1, ATTN_ERR_WORKSPACE_TOO_SMALL,
                          -1, "workspace one byte short");
        expect_exec_fail2(t, plan, NULL, &t->args, buf, 0, ATTN_ERR_WORKSPACE_TOO_SMALL, -1,
                          "workspace of 0 bytes");
    } else {
        printf("note: workspace size is 0, the too-small path cannot be reached\n");
    }
    const size_t offs[] = {4, 16, 32, 60};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "workspace misaligned by %zu bytes", offs[i]);
        expect_exec_fail2(t, plan, NULL, &t->args, buf + offs[i], ws + 64,
                          ATTN_ERR_WORKSPACE_ALIGNMENT, -1, what);
    }
    /* controls: exact size, larger size, NULL with a nonzero byte count */
    tinst_clear_outputs(t);
    if (attn_sdpa_execute(plan, &t->args, buf, ws) != ATTN_OK) {
        printf("FAIL control: workspace of exactly %zu bytes refused\n", ws);
        g_fail++;
    }
    if (attn_sdpa_execute(plan, &t->args, buf + 64, cap - 64) != ATTN_OK) {
        printf("FAIL control: larger workspace refused\n");
        g_fail++;
    }
    if (attn_sdpa_execute(plan, &t->args, NULL, 12345) != ATTN_OK) {
        printf("FAIL control: NULL workspace with a byte count refused\n");
        g_fail++;
    }
    free(buf);
}

/* NULL plan, desc, args and outputs; NULL for a pointer the plan uses
 * (ATTN_ERR_NULL_ARGUMENT), a pointer for a feature it does not use
 * (ATTN_ERR_ARGUMENT_MISMATCH, and runs once that pointer is NULL); then
 * lengths and workspace. */
static void test_execute_errors(void **state)
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

    char what[96];
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
        attn_sdpa_args a = t.args;
        set_null(&a, slots[k].arg);
        snprintf(what, sizeof what, "args.%s = NULL%s", slots[k].name,
                 slots[k].flag == (size_t)-1 ? "" : " while enabled");
        expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_NULL_ARGUMENT, what);
        if (slots[k].flag == (size_t)-1)
            continue;
        /* a plan without that feature, given every pointer */
        attn_sdpa_desc d = t.desc;
        const int off = 0;
        memcpy((char *)&d + slots[k].flag, &off, sizeof off);
        attn_sdpa_plan *p2 = NULL;
        assert_int_equal(attn_sdpa_plan_create(&p2, &d), ATTN_OK);
        snprintf(what, sizeof what, "args.%s given, plan does not use it", slots[k].name);
        expect_exec_fail(&t, p2, &d, &t.args, ATTN_ERR_ARGUMENT_MISMATCH, what);
        /* control: without that pointer it runs */
        attn_status s = attn_sdpa_execute(p2, &a, NULL, 0);
        if (s != ATTN_OK) {
            printf("FAIL control for %s: execute returned %s\n", what, sname(s));
            g_fail++;
        }
        attn_sdpa_plan_destroy(p2);
    }
    check_lengths(&t, plan);
    check_workspace(&t, plan);
    attn_sdpa_plan_destroy(plan);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

/* ------------------------------------------------------------------------ */
/* The SDPA backward: plan-time rows over a bwd base, execute-time slots       */
/* ------------------------------------------------------------------------ */

/* The backward's desc holds the forward's first, so SI/SF/SV of forward
 * fields apply to it unchanged; SB/SVB set its own fields. */
_Static_assert(offsetof(attn_sdpa_bwd_desc, fwd) == 0, "fwd first");
#define FTYPEB(field) (sizeof(((attn_sdpa_bwd_desc *)0)->field) == 8 ? K_I64 : K_INT)
#define SB(field, v) { offsetof(attn_sdpa_bwd_desc, field), FTYPEB(field), (int64_t)(v), 0 }
#define SVB(view, b, h, s) SB(view.batch, b), SB(view.head, h), SB(view.seq, s)

/* The bwd base: base_case()'s forward (want_probs off) with dense BHSD
 * dO, dQ, dK, dV, and dBias [B][1][n][m] (the bias broadcasts over heads,
 * so dBias's head stride is ignored); buffers for one-shot calls, outputs
 * sentinel-filled. */
typedef struct bwd_fix {
    tinst t;
    attn_sdpa_bwd_desc d;
    attn_sdpa_bwd_args a;
    tbuf d_o, dq, dk, dv, dbias;
} bwd_fix;

static void bwd_fill(tbuf *b, uint32_t bits)
{
    uint32_t *u = b->base;
    for (size_t i = 0; i < b->count; i++)
        u[i] = bits;
}

static void bwd_clear(bwd_fix *f)
{
    bwd_fill(&f->dq, TSENTINEL);
    bwd_fill(&f->dk, TSENTINEL);
    bwd_fill(&f->dv, TSENTINEL);
    bwd_fill(&f->dbias, TSENTINEL);
}

static int bwd_untouched(const bwd_fix *f)
{
    const tbuf *b[4] = {&f->dq, &f->dk, &f->dv, &f->dbias};
    for (int k = 0; k < 4; k++) {
        const uint32_t *u = b[k]->base;
        for (size_t i = 0; i < b[k]->count; i++)
            if (u[i] != TSENTINEL)
                return 0;
    }
    return 1;
}

static void bwd_alloc(tbuf *b, size_t n)
{
    b->count = n + 8; /* a tail: views stretched by the rows stay inside */
    b->base = malloc(b->count * sizeof(float));
    assert_non_null(b->base);
}

static void bwd_fix_build(bwd_fix *f)
{
    memset(f, 0, sizeof *f);
    tcase c = base_case();
    assert_int_equal(tinst_build(&f->t, &c), 0);
    assert_int_equal(attn_sdpa(&f->t.desc, &f->t.args), ATTN_OK); /* O, lse */
    assert_int_equal(attn_sdpa_bwd_desc_init(&f->d), ATTN_OK);
    f->d.fwd = f->t.desc;
    f->d.fwd.want_probs = 0;
    f->d.d_o = attn_view_bhsd(HQ, NQ, DV);
    f->d.dq = attn_view_bhsd(HQ, NQ, DK);
    f->d.dk = attn_view_bhsd(HKV, MK, DK);
    f->d.dv = attn_view_bhsd(HKV, MK, DV);
    f->d.want_dbias = 1;
    f->d.dbias = attn_view_bhsd(1, NQ, MK);
    /* large enough for every view the rows below make (x4) */
    bwd_alloc(&f->d_o, 4 * NB * HQ * NQ * DV);
    bwd_alloc(&f->dq, 4 * NB * HQ * NQ * DK);
    bwd_alloc(&f->dk, 4 * NB * HKV * MK * DK);
    bwd_alloc(&f->dv, 4 * NB * HKV * MK * DV);
    bwd_alloc(&f->dbias, 4 * NB * HQ * NQ * MK);
    float *dO = f->d_o.base;
    for (size_t i = 0; i < f->d_o.count; i++)
        dO[i] = (float)((int)(i % 7) - 3) * 0.25f;
    bwd_clear(f);
    attn_sdpa_bwd_args *a = &f->a;
    a->q = f->t.args.q;
    a->k = f->t.args.k;
    a->v = f->t.args.v;
    a->o = f->t.args.o;
    a->lse = f->t.args.lse;
    a->d_o = f->d_o.base;
    a->kv_lens = f->t.args.kv_lens;
    a->q_lens = f->t.args.q_lens;
    a->mask = f->t.args.mask;
    a->bias = f->t.args.bias;
    a->dq = f->dq.base;
    a->dk = f->dk.base;
    a->dv = f->dv.base;
    a->dbias = f->dbias.base;
}

static void bwd_fix_free(bwd_fix *f)
{
    free(f->d_o.base);
    free(f->dq.base);
    free(f->dk.base);
    free(f->dv.base);
    free(f->dbias.base);
    tinst_free(&f->t);
}

/* plan_create(bad) must return want, leave *plan alone; the one-shot must
 * agree and write nothing.  want == ATTN_OK: a control that must plan and
 * run. */
static void expect_bwd_desc(bwd_fix *f, const attn_sdpa_bwd_desc *d, attn_status want,
                            const char *what)
{
    static int marker;
    attn_sdpa_bwd_plan *plan = (attn_sdpa_bwd_plan *)&marker;
    attn_status s = attn_sdpa_bwd_plan_create(&plan, d);
    if (want == ATTN_OK) {
        if (s != ATTN_OK) {
            printf("FAIL %s: bwd plan_create returned %s, want ATTN_OK\n", what, sname(s));
            g_fail++;
            return;
        }
        attn_sdpa_bwd_plan_destroy(plan);
        bwd_clear(f);
        attn_sdpa_bwd_args a = f->a; /* pointers of the features in use only */
        if (!d->fwd.use_bias)
            a.bias = NULL;
        if (!d->want_dbias)
            a.dbias = NULL;
        s = attn_sdpa_backward(d, &a);
        if (s != ATTN_OK) {
            printf("FAIL %s: attn_sdpa_backward returned %s, want ATTN_OK\n", what, sname(s));
            g_fail++;
        }
        return;
    }
    if (s == ATTN_OK) {
        printf("FAIL %s: bwd plan_create accepted it (want %s)\n", what, sname(want));
        attn_sdpa_bwd_plan_destroy(plan);
        g_fail++;
        return;
    }
    if (s != want) {
        printf("FAIL %s: bwd plan_create returned %s, want %s\n", what, sname(s), sname(want));
        g_fail++;
    }
    if (plan != (attn_sdpa_bwd_plan *)&marker) {
        printf("FAIL %s: bwd plan_create wrote *plan on failure\n", what);
        g_fail++;
    }
    bwd_clear(f);
    attn_status s2 = attn_sdpa_backward(d, &f->a);
    if (s2 != s) {
        printf("FAIL %s: attn_sdpa_backward returned %s, plan_create %s\n", what, sname(s2),
               sname(s));
        g_fail++;
    }
    if (!bwd_untouched(f)) {
        printf("FAIL %s: outputs written by a failing attn_sdpa_backward\n", what);
        g_fail++;
    }
}

/* Rows over the bwd base (the base field of desc_row is unused here). */
#define BWD BASE_FULL, { 0 }
static const desc_row bwd_rows[] = {
    /* the forward's own errors come through (more: every forward row in
     * test_bwd_desc_table) */
    {"fwd: Hq = 4, Hkv = 3", ATTN_ERR_HEAD_RATIO, BWD, {SI(kv_heads, 3)}},
    {"fwd: batch = 0", ATTN_ERR_BAD_SIZE, BWD, {SI(batch, 0)}},
    {"fwd: q.seq < dk", ATTN_ERR_BAD_STRIDE, BWD, {SI(q.seq, DK - 1)}},
    {"fwd: k strides unset", ATTN_ERR_STRIDES_UNSET, BWD,
     {SV(k, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET)}},
    {"fwd: lse strides unset", ATTN_ERR_STRIDES_UNSET, BWD,
     {SV(lse, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET)}},
    {"fwd: scale inf", ATTN_ERR_BAD_SCALE, BWD, {SF(scale, INFINITY)}},
    {"fwd: align = 2", ATTN_ERR_BAD_OPTION, BWD, {SI(align, 2)}},
    {"fwd: threads = -1", ATTN_ERR_BAD_THREADS, BWD, {SI(threads, -1)}},
    {"fwd: q_len = 2^31", ATTN_ERR_TOO_LARGE, BWD, {SI(q_len, BIG)}},
    /* options */
    {"control: bwd base", ATTN_OK, BWD, {{0}}},
    {"want_lse = 0", ATTN_ERR_BAD_OPTION, BWD, {SI(want_lse, 0)}},
    {"want_probs = 1", ATTN_ERR_BAD_OPTION, BWD, {SI(want_probs, 1)}},
    {"want_dbias without use_bias", ATTN_ERR_BAD_OPTION, BWD, {SI(use_bias, 0)}},
    {"control: no bias, no dbias", ATTN_OK, BWD, {SI(use_bias, 0), SB(want_dbias, 0)}},
    {"control: bias, no dbias (dbias strides unset)", ATTN_OK, BWD,
     {SB(want_dbias, 0), SVB(dbias, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET)}},
    /* 16-bit types plan, with the sparse options too (1.1; they were
     * ATTN_ERR_UNSUPPORTED_TYPE): test_bwd_args16_errors runs them;
     * unknown types */
    {"fwd: q_type 5", ATTN_ERR_BAD_OPTION, BWD, {SI(q_type, 5)}},
    {"fwd: k_type 99", ATTN_ERR_BAD_OPTION, BWD, {SI(k_type, 99)}},
    /* the quantized K/V types are forward-only (1.2): as K or V with
     * dims and views they would take in the forward, as Q or O */
    {"fwd: K Q8_0 (qk_dim 32)", ATTN_ERR_UNSUPPORTED_TYPE, BWD,
     {SI(qk_dim, 32), SV(q, HQ * NQ * 32, NQ * 32, 32), SV(k, HKV * MK * 32, MK * 32, 32),
      SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"fwd: K Q4_0 (qk_dim 32)", ATTN_ERR_UNSUPPORTED_TYPE, BWD,
     {SI(qk_dim, 32), SV(q, HQ * NQ * 32, NQ * 32, 32), SV(k, HKV * MK * 32, MK * 32, 32),
      SI(k_type, ATTN_DTYPE_Q4_0)}},
    {"fwd: V Q4_0 (v_dim 32)", ATTN_ERR_UNSUPPORTED_TYPE, BWD,
     {SI(v_dim, 32), SV(v, HKV * MK * 32, MK * 32, 32), SV(o, HQ * NQ * 32, NQ * 32, 32),
      SI(v_type, ATTN_DTYPE_Q4_0)}},
    {"fwd: V Q8_0 (v_dim 32)", ATTN_ERR_UNSUPPORTED_TYPE, BWD,
     {SI(v_dim, 32), SV(v, HKV * MK * 32, MK * 32, 32), SV(o, HQ * NQ * 32, NQ * 32, 32),
      SI(v_type, ATTN_DTYPE_Q8_0)}},
    {"fwd: q_type Q8_0", ATTN_ERR_UNSUPPORTED_TYPE, BWD, {SI(q_type, ATTN_DTYPE_Q8_0)}},
    {"fwd: o_type Q4_0", ATTN_ERR_UNSUPPORTED_TYPE, BWD, {SI(o_type, ATTN_DTYPE_Q4_0)}},
    {"fwd: K Q8_0 on the bwd base (qk_dim 8: the forward's size rule)", ATTN_ERR_BAD_SIZE, BWD,
     {SI(k_type, ATTN_DTYPE_Q8_0)}},
    {"fwd: o_type -1", ATTN_ERR_BAD_OPTION, BWD, {SI(o_type, -1)}},
    {"fwd: v_type 7", ATTN_ERR_BAD_OPTION, BWD, {SI(v_type, 7)}},
    {"fwd: paged", ATTN_ERR_BAD_OPTION, BWD,
     {SI(kv_block_size, 4), SI(kv_num_blocks, 7), SI(kv_max_blocks, 3)}},
    {"fwd: paged BF16 K and V", ATTN_ERR_BAD_OPTION, BWD,
     {SI(k_type, ATTN_DTYPE_BF16), SI(v_type, ATTN_DTYPE_BF16), SI(kv_block_size, 4),
      SI(kv_num_blocks, 7), SI(kv_max_blocks, 3)}},
    {"bwd reserved[0] != 0", ATTN_ERR_BAD_OPTION, BWD, {SB(reserved[0], 1)}},
    {"bwd reserved[15] = INT64_MIN", ATTN_ERR_BAD_OPTION, BWD, {SB(reserved[15], INT64_MIN)}},
    /* rows shorter than the row */
    {"d_o.seq < dv", ATTN_ERR_BAD_STRIDE, BWD, {SB(d_o.seq, DV - 1)}},
    {"dq.seq < dk", ATTN_ERR_BAD_STRIDE, BWD, {SB(dq.seq, DK - 1)}},
    {"dk.seq < dk", ATTN_ERR_BAD_STRIDE, BWD, {SB(dk.seq, DK - 1)}},
    {"dv.seq < dv", ATTN_ERR_BAD_STRIDE, BWD, {SB(dv.seq, DV - 1)}},
    {"dbias.seq < m", ATTN_ERR_BAD_STRIDE, BWD, {SB(dbias.seq, MK - 1)}},
    /* outputs not nested (overlapping) */
    {"dq heads overlap", ATTN_ERR_BAD_STRIDE, BWD, {SVB(dq, HQ * NQ * DK, NQ * DK - 1, DK)}},
    {"dk batches overlap", ATTN_ERR_BAD_STRIDE, BWD,
     {SVB(dk, HKV * MK * DK - 1, MK * DK, DK)}},
    {"dv rows overlap heads (BSHD, head stride < dv)", ATTN_ERR_BAD_STRIDE, BWD,
     {SVB(dv, MK * HKV * DV, DV - 1, HKV * DV)}},
    {"dbias batches overlap", ATTN_ERR_BAD_STRIDE, BWD, {SVB(dbias, NQ * MK - 1, 0, MK)}},
    {"dbias batch stride 0 (bias does not broadcast over batch)", ATTN_ERR_BAD_STRIDE, BWD,
     {SVB(dbias, 0, 0, MK)}},
    /* controls: other layouts, inputs may overlap, ignored strides */
    {"control: BSHD gradients", ATTN_OK, BWD,
     {SVB(dq, NQ * HQ * DK, DK, HQ * DK), SVB(dk, MK * HKV * DK, DK, HKV * DK),
      SVB(dv, MK * HKV * DV, DV, HKV * DV), SVB(d_o, NQ * HQ * DV, DV, HQ * DV)}},
    {"d_o head stride 0 (input, but Hq > 1)", ATTN_ERR_BAD_STRIDE, BWD, {SVB(d_o, NQ * DV, 0, DV)}},
    {"control: dO heads overlapping (input)", ATTN_OK, BWD, {SVB(d_o, NQ * DV, DV, DV)}},
    {"control: dbias head stride (broadcast) -7", ATTN_OK, BWD, {SVB(dbias, NQ * MK, -7, MK)}},
    {"control: dbias head stride (broadcast) unset", ATTN_OK, BWD,
     {SVB(dbias, NQ * MK, ATTN_STRIDE_UNSET, MK)}},
    {"control: bias over [1][1][1][m], dbias strides all 0", ATTN_OK, BWD,
     {SV(bias, 0, 0, 0), SVB(dbias, 0, 0, 0)}},
    {"control: bias over [1][1][1][m], dbias strides all -1", ATTN_OK, BWD,
     {SV(bias, 0, 0, 0), SVB(dbias, -1, -1, -1)}},
    {"control: bias over [B][1][1][m], dbias seq stride 0", ATTN_OK, BWD,
     {SV(bias, MK, 0, 0), SVB(dbias, MK, 0, 0)}},
    {"control: bias over [B][1][1][m], dbias seq stride m", ATTN_OK, BWD,
     {SV(bias, MK, 0, 0), SVB(dbias, MK, 0, MK)}},
};

static const struct {
    const char *name;
    size_t off;
    int ignored; /* dbias.head: the bias broadcasts over heads */
} bwd_views[] = {
    {"d_o", offsetof(attn_sdpa_bwd_desc, d_o), 0},
    {"dq", offsetof(attn_sdpa_bwd_desc, dq), 0},
    {"dk", offsetof(attn_sdpa_bwd_desc, dk), 0},
    {"dv", offsetof(attn_sdpa_bwd_desc, dv), 0},
    {"dbias", offsetof(attn_sdpa_bwd_desc, dbias), 0},
};

static void test_bwd_desc_table(void **state)
{
    (void)state;
    g_fail = 0;
    bwd_fix f;
    bwd_fix_build(&f);
    int cases = 0;
    char what[128];
    for (size_t k = 0; k < sizeof bwd_rows / sizeof bwd_rows[0]; k++) {
        attn_sdpa_bwd_desc d = f.d;
        apply_sets(&d, bwd_rows[k].set, sizeof bwd_rows[k].set / sizeof bwd_rows[k].set[0]);
        expect_bwd_desc(&f, &d, bwd_rows[k].want, bwd_rows[k].what);
        cases++;
    }
    /* every forward row on the bwd base: where the forward (want_probs
     * off) fails, the backward fails the same way */
    for (size_t k = 0; k < sizeof desc_rows / sizeof desc_rows[0]; k++) {
        if (desc_rows[k].base != BASE_FULL)
            continue;
        attn_sdpa_bwd_desc d = f.d;
        apply_sets(&d, desc_rows[k].set, sizeof desc_rows[k].set / sizeof desc_rows[k].set[0]);
        d.fwd.want_probs = 0;
        attn_sdpa_plan *fp = NULL;
        attn_status fs = attn_sdpa_plan_create(&fp, &d.fwd);
        attn_sdpa_plan_destroy(fp);
        if (fs == ATTN_OK)
            continue;
        snprintf(what, sizeof what, "fwd row \"%s\"", desc_rows[k].what);
        expect_bwd_desc(&f, &d, fs, what);
        cases++;
    }
    /* every field of every new view: negative, zero, unset; all unset */
    static const struct {
        int64_t value;
        attn_status want;
    } rules[] = {
        {-1, ATTN_ERR_BAD_STRIDE},
        {INT64_MIN + 1, ATTN_ERR_BAD_STRIDE},
        {0, ATTN_ERR_BAD_STRIDE},
        {ATTN_STRIDE_UNSET, ATTN_ERR_STRIDES_UNSET},
    };
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        for (size_t x = 0; x < sizeof bwd_views / sizeof bwd_views[0]; x++)
            for (size_t fl = 0; fl < 3; fl++) {
                attn_sdpa_bwd_desc d = f.d;
                const size_t off = bwd_views[x].off + view_fields[fl].off;
                memcpy((char *)&d + off, &rules[r].value, sizeof(int64_t));
                /* dbias.head is ignored (the bias broadcasts over heads) */
                const int ignored = off == offsetof(attn_sdpa_bwd_desc, dbias.head);
                snprintf(what, sizeof what, "%s.%s = %lld%s", bwd_views[x].name,
                         view_fields[fl].name, (long long)rules[r].value,
                         ignored ? " (ignored: control)" : "");
                expect_bwd_desc(&f, &d, ignored ? ATTN_OK : rules[r].want, what);
                cases++;
            }
    for (size_t x = 0; x < sizeof bwd_views / sizeof bwd_views[0]; x++) {
        attn_sdpa_bwd_desc d = f.d;
        const attn_view unset = {ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET};
        memcpy((char *)&d + bwd_views[x].off, &unset, sizeof unset);
        snprintf(what, sizeof what, "%s strides unset", bwd_views[x].name);
        expect_bwd_desc(&f, &d, ATTN_ERR_STRIDES_UNSET, what);
        cases++;
    }
    /* NULL desc / plan pointers */
    static int marker;
    attn_sdpa_bwd_plan *plan = (attn_sdpa_bwd_plan *)&marker;
    assert_int_equal(attn_sdpa_bwd_plan_create(NULL, &f.d), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa_bwd_plan_create(&plan, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_ptr_equal(plan, &marker);
    assert_int_equal(attn_sdpa_bwd_plan_destroy(NULL), ATTN_OK);
    assert_int_equal(attn_sdpa_bwd_desc_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    bwd_clear(&f);
    assert_int_equal(attn_sdpa_backward(NULL, &f.a), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa_backward(&f.d, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_true(bwd_untouched(&f));
    printf("  %d backward descs checked, %d wrong\n", cases, g_fail);
    bwd_fix_free(&f);
    assert_int_equal(g_fail, 0);
}

/* execute(plan, bad) must return want and write nothing; with ws == NULL
 * and a desc, the one-shot must agree. */
static void expect_bwd_exec(bwd_fix *f, const attn_sdpa_bwd_plan *plan,
                            const attn_sdpa_bwd_desc *desc, const attn_sdpa_bwd_args *a,
                            void *ws, size_t wsb, attn_status want, const char *what)
{
    bwd_clear(f);
    attn_status s = attn_sdpa_bwd_execute(plan, a, ws, wsb);
    if (s != want) {
        printf("FAIL %s: bwd execute returned %s, want %s\n", what, sname(s), sname(want));
        g_fail++;
    }
    if (!bwd_untouched(f)) {
        printf("FAIL %s: outputs written by a failing bwd execute\n", what);
        g_fail++;
    }
    if (desc && !ws && s != ATTN_OK) {
        attn_status s2 = attn_sdpa_backward(desc, a);
        if (s2 != s) {
            printf("FAIL %s: attn_sdpa_backward returned %s, execute %s\n", what, sname(s2),
                   sname(s));
            g_fail++;
        }
        if (!bwd_untouched(f)) {
            printf("FAIL %s: outputs written by a failing attn_sdpa_backward\n", what);
            g_fail++;
        }
    }
}

/* Argument slots of attn_sdpa_bwd_args: required, or enabled by a field of
 * the bwd desc (fwd fields at their own offsets). */
static const struct {
    const char *name;
    size_t arg;
    size_t flag; /* (size_t)-1: required */
} bwd_slots[] = {
    {"q", offsetof(attn_sdpa_bwd_args, q), (size_t)-1},
    {"k", offsetof(attn_sdpa_bwd_args, k), (size_t)-1},
    {"v", offsetof(attn_sdpa_bwd_args, v), (size_t)-1},
    {"o", offsetof(attn_sdpa_bwd_args, o), (size_t)-1},
    {"d_o", offsetof(attn_sdpa_bwd_args, d_o), (size_t)-1},
    {"lse", offsetof(attn_sdpa_bwd_args, lse), (size_t)-1},
    {"dq", offsetof(attn_sdpa_bwd_args, dq), (size_t)-1},
    {"dk", offsetof(attn_sdpa_bwd_args, dk), (size_t)-1},
    {"dv", offsetof(attn_sdpa_bwd_args, dv), (size_t)-1},
    {"kv_lens", offsetof(attn_sdpa_bwd_args, kv_lens), offsetof(attn_sdpa_bwd_desc, fwd.use_kv_lens)},
    {"q_lens", offsetof(attn_sdpa_bwd_args, q_lens), offsetof(attn_sdpa_bwd_desc, fwd.use_q_lens)},
    {"mask", offsetof(attn_sdpa_bwd_args, mask), offsetof(attn_sdpa_bwd_desc, fwd.mask_mode)},
    {"bias", offsetof(attn_sdpa_bwd_args, bias), offsetof(attn_sdpa_bwd_desc, fwd.use_bias)},
    {"dbias", offsetof(attn_sdpa_bwd_args, dbias), offsetof(attn_sdpa_bwd_desc, want_dbias)},
};

static void test_bwd_execute_errors(void **state)
{
    (void)state;
    g_fail = 0;
    bwd_fix f;
    bwd_fix_build(&f);
    attn_sdpa_bwd_plan *plan = NULL;
    assert_int_equal(attn_sdpa_bwd_plan_create(&plan, &f.d), ATTN_OK);
    size_t ws = 12345;
    assert_int_equal(attn_sdpa_bwd_workspace_size(NULL, &ws), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(ws, 12345);
    assert_int_equal(attn_sdpa_bwd_workspace_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa_bwd_workspace_size(plan, &ws), ATTN_OK);
    expect_bwd_exec(&f, NULL, NULL, &f.a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, "bwd execute(NULL plan)");
    expect_bwd_exec(&f, plan, NULL, NULL, NULL, 0, ATTN_ERR_NULL_ARGUMENT, "bwd execute(NULL args)");
    char what[128];
    for (size_t k = 0; k < sizeof bwd_slots / sizeof bwd_slots[0]; k++) {
        attn_sdpa_bwd_args a = f.a;
        const void *null = NULL;
        memcpy((char *)&a + bwd_slots[k].arg, &null, sizeof null);
        snprintf(what, sizeof what, "bwd args.%s = NULL%s", bwd_slots[k].name,
                 bwd_slots[k].flag == (size_t)-1 ? "" : " while enabled");
        expect_bwd_exec(&f, plan, &f.d, &a, NULL, 0, ATTN_ERR_NULL_ARGUMENT, what);
        if (bwd_slots[k].flag == (size_t)-1)
            continue;
        /* a plan without the feature, given every pointer */
        attn_sdpa_bwd_desc d = f.d;
        const int off = 0;
        memcpy((char *)&d + bwd_slots[k].flag, &off, sizeof off);
        if (bwd_slots[k].flag == offsetof(attn_sdpa_bwd_desc, fwd.use_bias))
            d.want_dbias = 0; /* dbias needs the bias */
        attn_sdpa_bwd_plan *p2 = NULL;
        assert_int_equal(attn_sdpa_bwd_plan_create(&p2, &d), ATTN_OK);
        snprintf(what, sizeof what, "bwd args.%s given, plan does not use it", bwd_slots[k].name);
        expect_bwd_exec(&f, p2, &d, &f.a, NULL, 0, ATTN_ERR_ARGUMENT_MISMATCH, what);
        /* control: without it (and without dbias when the bias is off) */
        if (d.want_dbias == 0)
            a.dbias = NULL;
        bwd_clear(&f);
        attn_status s = attn_sdpa_bwd_execute(p2, &a, NULL, 0);
        if (s != ATTN_OK) {
            printf("FAIL control for %s: execute returned %s\n", what, sname(s));
            g_fail++;
        }
        attn_sdpa_bwd_plan_destroy(p2);
    }
    /* lengths */
    const int32_t badk[] = {-1, MK + 1, INT32_MIN, INT32_MAX};
    const int32_t badq[] = {-1, NQ + 1, INT32_MIN, INT32_MAX};
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) {
            int32_t kl[2] = {MK, 3}, ql[2] = {NQ, 2};
            attn_sdpa_bwd_args a = f.a;
            a.kv_lens = kl;
            a.q_lens = ql;
            kl[b] = badk[k];
            snprintf(what, sizeof what, "bwd kv_lens[%d] = %d", b, (int)badk[k]);
            expect_bwd_exec(&f, plan, &f.d, &a, NULL, 0, ATTN_ERR_BAD_LENGTH, what);
            kl[b] = b ? 3 : MK;
            ql[b] = badq[k];
            snprintf(what, sizeof what, "bwd q_lens[%d] = %d", b, (int)badq[k]);
            expect_bwd_exec(&f, plan, &f.d, &a, NULL, 0, ATTN_ERR_BAD_LENGTH, what);
        }
    /* workspace */
    size_t cap = ((ws + 256) + 63) / 64 * 64;
    unsigned char *buf = aligned_alloc(64, cap);
    assert_non_null(buf);
    memset(buf, 0x5A, cap);
    if (ws > 0) {
        expect_bwd_exec(&f, plan, NULL, &f.a, buf, ws - 1, ATTN_ERR_WORKSPACE_TOO_SMALL,
                        "bwd workspace one byte short");
        expect_bwd_exec(&f, plan, NULL, &f.a, buf, 0, ATTN_ERR_WORKSPACE_TOO_SMALL,
                        "bwd workspace of 0 bytes");
    } else {
        printf("note: bwd workspace size is 0\n");
    }
    const size_t offs[] = {4, 16, 32, 60};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        snprintf(what, sizeof what, "bwd workspace misaligned by %zu bytes", offs[i]);
        expect_bwd_exec(&f, plan, NULL, &f.a, buf + offs[i], ws + 64,
                        ATTN_ERR_WORKSPACE_ALIGNMENT, what);
    }
    bwd_clear(&f);
    if (attn_sdpa_bwd_execute(plan, &f.a, buf, ws) != ATTN_OK ||
        attn_sdpa_bwd_execute(plan, &f.a, buf + 64, cap - 64) != ATTN_OK ||
        attn_sdpa_bwd_execute(plan, &f.a, NULL, 777) != ATTN_OK) {
        printf("FAIL control: bwd workspace exact / larger / NULL refused\n");
        g_fail++;
    }
    printf("  bwd workspace of the base plan: %zu bytes\n", ws);
    free(buf);
    attn_sdpa_bwd_plan_destroy(plan);
    bwd_fix_free(&f);
    assert_int_equal(g_fail, 0);
}

/* The 16-bit tensors of the backward at execute time (attn.h,
 * attn_sdpa_bwd_args16): on the bwd base with every type BF16, every type
 * F16 and mixed types (Q BF16, K F32, V F16, O F32; Q F32, K/V BF16, O
 * F16): args16 NULL (ATTN_ERR_NULL_ARGUMENT); each of the eight tensors
 * with its pointer of the other struct given as well (MISMATCH) or its own
 * NULL (NULL_ARGUMENT); each reserved slot of args16 nonzero
 * (ATTN_ERR_BAD_OPTION); controls.  An fp32 plan given args16
 * (ATTN_ERR_ARGUMENT_MISMATCH, also all-NULL), or args16 with a nonzero
 * reserved slot (ATTN_ERR_BAD_OPTION).  Nothing written on error, fp32 or
 * 16-bit outputs. */
#define SENT16 0x7FA5u
typedef struct bwd16_fix {
    uint16_t *in[5];    /* q k v o d_o, encoded from the fixture's fp32 */
    uint16_t *out[3];   /* dq dk dv */
    size_t nin[5], nout[3];
} bwd16_fix;

static void bwd16_clear(bwd16_fix *h)
{
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < h->nout[k]; i++)
            h->out[k][i] = SENT16;
}

static int bwd16_untouched(const bwd16_fix *h)
{
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < h->nout[k]; i++)
            if (h->out[k][i] != SENT16)
                return 0;
    return 1;
}

static void expect_bwd16(bwd_fix *f, bwd16_fix *h, const attn_sdpa_bwd_desc *d,
                         const attn_sdpa_bwd_args *a, attn_status want, const char *what)
{
    attn_sdpa_bwd_plan *plan = NULL;
    assert_int_equal(attn_sdpa_bwd_plan_create(&plan, d), ATTN_OK);
    for (int oneshot = 0; oneshot < 2; oneshot++) {
        bwd_clear(f);
        bwd16_clear(h);
        const attn_status s = oneshot ? attn_sdpa_backward(d, a)
                                      : attn_sdpa_bwd_execute(plan, a, NULL, 0);
        if (s != want) {
            printf("FAIL %s: %s returned %s, want %s\n", what,
                   oneshot ? "attn_sdpa_backward" : "bwd execute", sname(s), sname(want));
            g_fail++;
        }
        if (want != ATTN_OK && (!bwd_untouched(f) || !bwd16_untouched(h))) {
            printf("FAIL %s: outputs written on error\n", what);
            g_fail++;
        }
        if (want == ATTN_OK && bwd16_untouched(h) && bwd_untouched(f)) {
            printf("FAIL %s: nothing written by a successful call\n", what);
            g_fail++;
        }
    }
    attn_sdpa_bwd_plan_destroy(plan);
}

static void test_bwd_args16_errors(void **state)
{
    (void)state;
    g_fail = 0;
    bwd_fix f;
    bwd_fix_build(&f);
    bwd16_fix h;
    const tbuf *src[5] = {&f.t.q, &f.t.k, &f.t.v, &f.t.o, &f.d_o};
    const tbuf *dst[3] = {&f.dq, &f.dk, &f.dv};
    for (int k = 0; k < 5; k++) {
        h.nin[k] = src[k]->count;
        h.in[k] = malloc(h.nin[k] * sizeof(uint16_t) + 2);
        assert_non_null(h.in[k]);
    }
    for (int k = 0; k < 3; k++) {
        h.nout[k] = dst[k]->count;
        h.out[k] = malloc(h.nout[k] * sizeof(uint16_t) + 2);
        assert_non_null(h.out[k]);
    }
    enum { F32 = ATTN_DTYPE_F32, F16 = ATTN_DTYPE_F16, BF = ATTN_DTYPE_BF16 };
    static const int cfg[][4] = {   /* q k v o */
        {BF, BF, BF, BF}, {F16, F16, F16, F16}, {BF, F32, F16, F32}, {F32, BF, BF, F16},
    };
    static const char *const names[8] = {"q", "k", "v", "o", "d_o", "dq", "dk", "dv"};
    /* each configuration dense (sp 0) and sparse (sp 1: global keys and
     * queries, a per-head layout of 16 x 16 blocks (one; head 1 sees by
     * the global tokens only); 1.1, they were
     * ATTN_ERR_UNSUPPORTED_TYPE) */
    enum { BS = 16, NLB = (NQ + BS - 1) / BS, MLB = (MK + BS - 1) / BS };
    uint8_t gk[NB * MK], gq[NB * NQ], lay[HQ * NLB * MLB];
    for (int x = 0; x < NB * MK; x++)
        gk[x] = x % 4 == 1;
    for (int x = 0; x < NB * NQ; x++)
        gq[x] = x % 5 == 2;
    for (int x = 0; x < HQ * NLB * MLB; x++)
        lay[x] = x % 3 != 1;
    char what[160];
    for (size_t cs = 0; cs < 2 * sizeof cfg / sizeof cfg[0]; cs++) {
        const size_t c = cs / 2;
        const int sp = (int)(cs % 2);
        attn_sdpa_bwd_desc d = f.d;
        attn_sdpa_bwd_args a = f.a;
        if (sp) {
            d.fwd.use_global_k = d.fwd.use_global_q = 1;
            d.fwd.block_size = BS;
            d.fwd.layout_per_head = 1;
            a.global_k = gk;
            a.global_q = gq;
            a.layout = lay;
        }
        d.fwd.q_type = (attn_dtype)cfg[c][0];
        d.fwd.k_type = (attn_dtype)cfg[c][1];
        d.fwd.v_type = (attn_dtype)cfg[c][2];
        d.fwd.o_type = (attn_dtype)cfg[c][3];
        /* the tensor of each slot: its type */
        const int ty[8] = {cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], cfg[c][3],
                           cfg[c][0], cfg[c][1], cfg[c][2]};
        for (int k = 0; k < 5; k++)
            if (ty[k] != F32)
                attn_dtype_encode((attn_dtype)ty[k], src[k]->base, h.in[k], (int64_t)h.nin[k]);
        attn_sdpa_bwd_args16 a16;
        assert_int_equal(attn_sdpa_bwd_args16_init(&a16), ATTN_OK);
        const void **p32[8] = {(const void **)&a.q, (const void **)&a.k, (const void **)&a.v,
                               (const void **)&a.o, (const void **)&a.d_o, (const void **)&a.dq,
                               (const void **)&a.dk, (const void **)&a.dv};
        const void **p16[8] = {(const void **)&a16.q, (const void **)&a16.k,
                               (const void **)&a16.v, (const void **)&a16.o,
                               (const void **)&a16.d_o, (const void **)&a16.dq,
                               (const void **)&a16.dk, (const void **)&a16.dv};
        for (int k = 0; k < 8; k++)
            if (ty[k] != F32) {
                *p16[k] = k < 5 ? (const void *)h.in[k] : (const void *)h.out[k - 5];
                *p32[k] = NULL;
            }
        a.args16 = &a16;
        snprintf(what, sizeof what, "bwd16 cfg %zu%s: control", c, sp ? " sparse" : "");
        expect_bwd16(&f, &h, &d, &a, ATTN_OK, what);
        attn_sdpa_bwd_args b = a;
        b.args16 = NULL;
        snprintf(what, sizeof what, "bwd16 cfg %zu%s: args16 NULL", c, sp ? " sparse" : "");
        expect_bwd16(&f, &h, &d, &b, ATTN_ERR_NULL_ARGUMENT, what);
        for (int k = 0; k < 8; k++) {
            /* the other struct's pointer given as well */
            attn_sdpa_bwd_args16 x16 = a16;
            b = a;
            b.args16 = &x16;
            const void **o32 = (const void **)((char *)&b + ((char *)p32[k] - (char *)&a));
            const void **o16 = (const void **)((char *)&x16 + ((char *)p16[k] - (char *)&a16));
            if (ty[k] != F32)
                *o32 = k < 5 ? src[k]->base : dst[k - 5]->base;
            else
                *o16 = k < 5 ? (const void *)h.in[k] : (const void *)h.out[k - 5];
            snprintf(what, sizeof what, "bwd16 cfg %zu%s: %s (%s) given its %s pointer too", c,
                     sp ? " sparse" : "", names[k], ty[k] == F32 ? "F32" : "16-bit",
                     ty[k] == F32 ? "16-bit" : "float");
            expect_bwd16(&f, &h, &d, &b, ATTN_ERR_ARGUMENT_MISMATCH, what);
            /* its own pointer NULL */
            x16 = a16;
            b = a;
            b.args16 = &x16;
            if (ty[k] != F32)
                *o16 = NULL;
            else
                *o32 = NULL;
            snprintf(what, sizeof what, "bwd16 cfg %zu%s: %s (%s) NULL", c, sp ? " sparse" : "",
                     names[k], ty[k] == F32 ? "F32" : "16-bit");
            expect_bwd16(&f, &h, &d, &b, ATTN_ERR_NULL_ARGUMENT, what);
        }
        for (int slot = 0; slot < 8; slot++) {
            attn_sdpa_bwd_args16 x16 = a16;
            x16.reserved[slot] = &x16;
            b = a;
            b.args16 = &x16;
            snprintf(what, sizeof what, "bwd16 cfg %zu%s: args16.reserved[%d] != NULL", c,
                     sp ? " sparse" : "", slot);
            expect_bwd16(&f, &h, &d, &b, ATTN_ERR_BAD_OPTION, what);
        }
    }
    /* an fp32 plan */
    attn_sdpa_bwd_args16 none, bad;
    attn_sdpa_bwd_args16_init(&none);
    attn_sdpa_bwd_args16_init(&bad);
    bad.reserved[7] = &bad;
    attn_sdpa_bwd_args b = f.a;
    b.args16 = &none;
    expect_bwd16(&f, &h, &f.d, &b, ATTN_ERR_ARGUMENT_MISMATCH, "fp32 plan: args16 (all NULL)");
    b.args16 = &bad;
    expect_bwd16(&f, &h, &f.d, &b, ATTN_ERR_BAD_OPTION, "fp32 plan: args16.reserved[7] != NULL");
    expect_bwd16(&f, &h, &f.d, &f.a, ATTN_OK, "fp32 plan: control");
    printf("  16-bit backward arguments: %zu type configurations, dense and sparse\n",
           sizeof cfg / sizeof cfg[0]);
    for (int k = 0; k < 5; k++)
        free(h.in[k]);
    for (int k = 0; k < 3; k++)
        free(h.out[k]);
    bwd_fix_free(&f);
    assert_int_equal(g_fail, 0);
}

/* Sparse attention at execute time, forward and backward, on a case with
 * global keys and queries and a per-head layout: each pointer NULL while
 * enabled (ATTN_ERR_NULL_ARGUMENT), given to a plan without the feature
 * (ATTN_ERR_ARGUMENT_MISMATCH), controls; outputs untouched. */
static void test_sparse_execute_errors(void **state)
{
    (void)state;
    g_fail = 0;
    tcase c = base_case();
    c.use_gk = c.use_gq = 1;
    c.gk_rate = c.gq_rate = 0.3;
    c.bs = 16;
    c.lay_per_head = 1;
    c.lay_keep = 0.7;
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    static const struct {
        const char *name;
        size_t arg, bwd_arg;
    } sl[] = {
        {"global_k", offsetof(attn_sdpa_args, global_k), offsetof(attn_sdpa_bwd_args, global_k)},
        {"global_q", offsetof(attn_sdpa_args, global_q), offsetof(attn_sdpa_bwd_args, global_q)},
        {"layout", offsetof(attn_sdpa_args, layout), offsetof(attn_sdpa_bwd_args, layout)},
    };
    attn_sdpa_plan *plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &t.desc), ATTN_OK);
    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa_execute(plan, &t.args, NULL, 0), ATTN_OK);
    char what[96];
    for (size_t k = 0; k < 3; k++) {
        attn_sdpa_args a = t.args;
        set_null(&a, sl[k].arg);
        snprintf(what, sizeof what, "sparse args.%s = NULL while enabled", sl[k].name);
        expect_exec_fail(&t, plan, &t.desc, &a, ATTN_ERR_NULL_ARGUMENT, what);
        attn_sdpa_desc d = t.desc;
        if (k == 0) d.use_global_k = 0;
        if (k == 1) d.use_global_q = 0;
        if (k == 2) d.block_size = 0, d.layout_per_head = 0;
        attn_sdpa_plan *p2 = NULL;
        assert_int_equal(attn_sdpa_plan_create(&p2, &d), ATTN_OK);
        snprintf(what, sizeof what, "sparse args.%s given, plan does not use it", sl[k].name);
        expect_exec_fail(&t, p2, &d, &t.args, ATTN_ERR_ARGUMENT_MISMATCH, what);
        if (attn_sdpa_execute(p2, &a, NULL, 0) != ATTN_OK) {
            printf("FAIL control for %s\n", what);
            g_fail++;
        }
        attn_sdpa_plan_destroy(p2);
    }
    check_lengths(&t, plan);
    check_workspace(&t, plan);
    attn_sdpa_plan_destroy(plan);

    /* the backward: dO, dQ, dK, dV dense, sentinel-filled */
    const attn_sdpa_desc *f = &t.desc;
    const size_t nq = (size_t)(f->batch * f->q_heads * f->q_len), nk =
        (size_t)(f->batch * f->kv_heads * f->kv_len);
    float *d_o = malloc(nq * (size_t)f->v_dim * sizeof(float));
    uint32_t *dq = malloc(nq * (size_t)f->qk_dim * 4), *dk = malloc(nk * (size_t)f->qk_dim * 4),
             *dv = malloc(nk * (size_t)f->v_dim * 4);
    assert_non_null(d_o);
    assert_non_null(dq);
    assert_non_null(dk);
    assert_non_null(dv);
    for (size_t x = 0; x < nq * (size_t)f->v_dim; x++)
        d_o[x] = 0.25f;
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = *f;
    bd.fwd.want_probs = 0;
    bd.d_o = f->o;
    bd.dq = attn_view_bhsd(f->q_heads, f->q_len, f->qk_dim);
    bd.dk = attn_view_bhsd(f->kv_heads, f->kv_len, f->qk_dim);
    bd.dv = attn_view_bhsd(f->kv_heads, f->kv_len, f->v_dim);
    attn_sdpa_bwd_args ba = {.q = t.args.q, .k = t.args.k, .v = t.args.v, .o = t.args.o,
                             .d_o = d_o, .lse = t.args.lse, .kv_lens = t.args.kv_lens,
                             .q_lens = t.args.q_lens, .mask = t.args.mask, .bias = t.args.bias,
                             .dq = (float *)(void *)dq, .dk = (float *)(void *)dk,
                             .dv = (float *)(void *)dv, .global_k = t.args.global_k,
                             .global_q = t.args.global_q, .layout = t.args.layout};
    tinst_clear_outputs(&t);
    assert_int_equal(tinst_run(&t), ATTN_OK);
    for (size_t k = 0; k < 4; k++) {
        attn_sdpa_bwd_desc d = bd;
        attn_sdpa_bwd_args a = ba;
        attn_status want = ATTN_ERR_NULL_ARGUMENT;
        if (k < 3) {
            const void *null = NULL;
            memcpy((char *)&a + sl[k].bwd_arg, &null, sizeof null);
            snprintf(what, sizeof what, "sparse bwd args.%s = NULL while enabled", sl[k].name);
        } else {
            d.fwd.use_global_q = 0;
            want = ATTN_ERR_ARGUMENT_MISMATCH;
            snprintf(what, sizeof what, "sparse bwd args.global_q given, plan does not use it");
        }
        memset(dq, 0xA5, nq * (size_t)f->qk_dim * 4);
        memset(dk, 0xA5, nk * (size_t)f->qk_dim * 4);
        memset(dv, 0xA5, nk * (size_t)f->v_dim * 4);
        attn_status s = attn_sdpa_backward(&d, &a);
        int touched = 0;
        for (size_t x = 0; x < nq * (size_t)f->qk_dim; x++)
            touched |= dq[x] != 0xA5A5A5A5u;
        for (size_t x = 0; x < nk * (size_t)f->qk_dim; x++)
            touched |= dk[x] != 0xA5A5A5A5u;
        for (size_t x = 0; x < nk * (size_t)f->v_dim; x++)
            touched |= dv[x] != 0xA5A5A5A5u;
        if (s != want || touched) {
            printf("FAIL %s: %s (want %s)%s\n", what, sname(s), sname(want),
                   touched ? ", gradients written" : "");
            g_fail++;
        }
    }
    if (attn_sdpa_backward(&bd, &ba) != ATTN_OK) {
        printf("FAIL control: sparse backward\n");
        g_fail++;
    }
    free(d_o);
    free(dq);
    free(dk);
    free(dv);
    tinst_free(&t);
    assert_int_equal(g_fail, 0);
}

/* The growable structs (attn.h, "ABI"): each _init refuses NULL and zeroes
 * the struct (reserved tail included); a nonzero reserved slot in any args
 * struct is ATTN_ERR_BAD_OPTION with nothing written; with the slot back to
 * zero the same call succeeds. */
#define GROW_N 2
#define GROW_D 8
static int grow_untouched(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]))
            return 0;
    return 1;
}

static void grow_fill(float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

static void test_growable_structs(void **state)
{
    (void)state;
    enum { N = GROW_N * GROW_D };
    float q[N], k[N], v[N], o[N], lse[GROW_N], dO[N], dq[N], dk[N], dv[N];
    grow_fill(q, N, 0.25f);
    grow_fill(k, N, -0.5f);
    grow_fill(v, N, 1.0f);
    grow_fill(dO, N, 0.125f);

    /* Every _init refuses NULL and leaves no nonzero byte where the
     * defaults are zero. */
    assert_int_equal(attn_sdpa_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_sdpa_bwd_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_linear_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_linear_bwd_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_weights_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_grads_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_weights16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_args16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_grads16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_kv_append_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_partials_merge_args_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    {
        attn_kv_append_args ka;
        memset(&ka, 0xA5, sizeof ka);
        assert_int_equal(attn_kv_append_args_init(&ka), ATTN_OK);
        assert_null(ka.k_cache);
        assert_int_equal(ka.t, 0);
        assert_true(ka.k_new_view.seq == ATTN_STRIDE_UNSET &&
                    ka.v_new_view.batch == ATTN_STRIDE_UNSET);
        for (int i = 0; i < 8; i++)
            assert_null(ka.reserved[i]);
    }

    /* SDPA forward and backward. */
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = d.q_heads = d.kv_heads = 1;
    d.q_len = d.kv_len = GROW_N;
    d.qk_dim = d.v_dim = GROW_D;
    d.q = d.k = d.v = d.o = attn_view_bhsd(1, GROW_N, GROW_D);
    d.want_lse = 1;
    d.lse = (attn_view){ GROW_N, GROW_N, 1 };
    d.threads = 1;
    attn_sdpa_args a;
    memset(&a, 0xA5, sizeof a);
    assert_int_equal(attn_sdpa_args_init(&a), ATTN_OK);
    a.q = q, a.k = k, a.v = v, a.o = o, a.lse = lse;
    for (int slot = 0; slot < 4; slot += 3) {
        grow_fill(o, N, NAN);
        a.reserved[slot] = &a;
        assert_int_equal(attn_sdpa(&d, &a), ATTN_ERR_BAD_OPTION);
        assert_true(grow_untouched(o, N));
        a.reserved[slot] = NULL;
    }
    assert_int_equal(attn_sdpa(&d, &a), ATTN_OK);

    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = d;
    bd.d_o = bd.dq = bd.dk = bd.dv = attn_view_bhsd(1, GROW_N, GROW_D);
    attn_sdpa_bwd_args ba;
    memset(&ba, 0xA5, sizeof ba);
    assert_int_equal(attn_sdpa_bwd_args_init(&ba), ATTN_OK);
    ba.q = q, ba.k = k, ba.v = v, ba.o = o, ba.d_o = dO, ba.lse = lse;
    ba.dq = dq, ba.dk = dk, ba.dv = dv;
    assert_null(ba.args16);
    for (int slot = 0; slot < 7; slot += 3) {   /* reserved[7] (1.1: args16 took [0]) */
        grow_fill(dq, N, NAN);
        ba.reserved[slot] = &ba;
        assert_int_equal(attn_sdpa_backward(&bd, &ba), ATTN_ERR_BAD_OPTION);
        assert_true(grow_untouched(dq, N));
        ba.reserved[slot] = NULL;
    }
    assert_int_equal(attn_sdpa_backward(&bd, &ba), ATTN_OK);

    /* The backward's 16-bit tensors (attn_sdpa_bwd_args16, 1.1). */
    assert_int_equal(attn_sdpa_bwd_args16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    {
        attn_sdpa_bwd_args16 h;
        memset(&h, 0xA5, sizeof h);
        assert_int_equal(attn_sdpa_bwd_args16_init(&h), ATTN_OK);
        const unsigned char *hb = (const unsigned char *)&h;
        for (size_t i = 0; i < sizeof h; i++)
            assert_int_equal(hb[i], 0);
        uint16_t q16[N], k16[N], v16[N], o16[N], do16[N], dq16[N], dk16[N], dv16[N];
        attn_dtype_encode(ATTN_DTYPE_BF16, q, q16, N);
        attn_dtype_encode(ATTN_DTYPE_BF16, k, k16, N);
        attn_dtype_encode(ATTN_DTYPE_BF16, v, v16, N);
        attn_dtype_encode(ATTN_DTYPE_BF16, o, o16, N);
        attn_dtype_encode(ATTN_DTYPE_BF16, dO, do16, N);
        h.q = q16, h.k = k16, h.v = v16, h.o = o16, h.d_o = do16;
        h.dq = dq16, h.dk = dk16, h.dv = dv16;
        attn_sdpa_bwd_desc bd16 = bd;
        bd16.fwd.q_type = bd16.fwd.k_type = bd16.fwd.v_type = bd16.fwd.o_type = ATTN_DTYPE_BF16;
        attn_sdpa_bwd_args ba16;
        attn_sdpa_bwd_args_init(&ba16);
        ba16.lse = lse;
        ba16.args16 = &h;
        for (int slot = 0; slot < 8; slot++) {
            for (int i = 0; i < N; i++)
                dq16[i] = 0x7FA5u;
            h.reserved[slot] = &h;
            assert_int_equal(attn_sdpa_backward(&bd16, &ba16), ATTN_ERR_BAD_OPTION);
            for (int i = 0; i < N; i++)
                assert_int_equal(dq16[i], 0x7FA5u);
            h.reserved[slot] = NULL;
        }
        assert_int_equal(attn_sdpa_backward(&bd16, &ba16), ATTN_OK);
    }

    /* Linear attention forward and backward. */
    attn_linear_desc ld;
    attn_linear_desc_init(&ld);
    ld.batch = ld.q_heads = ld.kv_heads = 1;
    ld.q_len = ld.kv_len = GROW_N;
    ld.qk_dim = ld.v_dim = GROW_D;
    ld.q = ld.k = ld.v = ld.o = attn_view_bhsd(1, GROW_N, GROW_D);
    ld.threads = 1;
    attn_linear_args la;
    memset(&la, 0xA5, sizeof la);
    assert_int_equal(attn_linear_args_init(&la), ATTN_OK);
    la.q = q, la.k = k, la.v = v, la.o = o;
    grow_fill(o, N, NAN);
    /* (reserved[7] became reserved[6] when args16 took reserved[0]) */
    la.reserved[6] = &la;
    assert_int_equal(attn_linear(&ld, &la), ATTN_ERR_BAD_OPTION);
    assert_true(grow_untouched(o, N));
    la.reserved[6] = NULL;
    assert_int_equal(attn_linear(&ld, &la), ATTN_OK);
    /* its 16-bit pointers (1.1): attn_linear_args16 has a tail of its own */
    {
        attn_linear_desc ld16 = ld;
        ld16.q_type = ld16.k_type = ld16.v_type = ld16.o_type = ATTN_DTYPE_BF16;
        uint16_t q16[N], k16[N], v16[N], o16[N];
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, q, q16, N), ATTN_OK);
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, k, k16, N), ATTN_OK);
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, v, v16, N), ATTN_OK);
        for (int i = 0; i < N; i++)
            o16[i] = 0x7FA5;
        attn_linear_args16 l16;
        memset(&l16, 0xA5, sizeof l16);
        assert_int_equal(attn_linear_args16_init(&l16), ATTN_OK);
        assert_true(!l16.q && !l16.k && !l16.v && !l16.o);
        for (int i = 0; i < 8; i++)
            assert_null(l16.reserved[i]);
        assert_int_equal(attn_linear_args16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
        l16.q = q16, l16.k = k16, l16.v = v16, l16.o = o16;
        attn_linear_args la16;
        assert_int_equal(attn_linear_args_init(&la16), ATTN_OK);
        la16.args16 = &l16;
        for (int r = 0; r < 8; r += 7) {
            l16.reserved[r] = &l16;
            assert_int_equal(attn_linear(&ld16, &la16), ATTN_ERR_BAD_OPTION);
            for (int i = 0; i < N; i++)
                assert_int_equal(o16[i], 0x7FA5);
            l16.reserved[r] = NULL;
        }
        assert_int_equal(attn_linear(&ld16, &la16), ATTN_OK);
        for (int i = 0; i < N; i++)
            assert_int_not_equal(o16[i], 0x7FA5);
    }
    attn_linear_bwd_desc lbd;
    attn_linear_bwd_desc_init(&lbd);
    lbd.fwd = ld;
    lbd.d_o = lbd.dq = lbd.dk = lbd.dv = attn_view_bhsd(1, GROW_N, GROW_D);
    attn_linear_bwd_args lba;
    memset(&lba, 0xA5, sizeof lba);
    assert_int_equal(attn_linear_bwd_args_init(&lba), ATTN_OK);
    lba.q = q, lba.k = k, lba.v = v, lba.d_o = dO, lba.dq = dq, lba.dk = dk, lba.dv = dv;
    assert_null(lba.args16);
    for (int slot = 0; slot < 7; slot += 6) {   /* reserved[7] (1.1: args16 took [0]) */
        grow_fill(dq, N, NAN);
        lba.reserved[slot] = &lba;
        assert_int_equal(attn_linear_backward(&lbd, &lba), ATTN_ERR_BAD_OPTION);
        assert_true(grow_untouched(dq, N));
        lba.reserved[slot] = NULL;
    }
    assert_int_equal(attn_linear_backward(&lbd, &lba), ATTN_OK);
    /* its 16-bit pointers (1.1): attn_linear_bwd_args16 has a tail of its own */
    {
        attn_linear_bwd_desc lbd16 = lbd;
        lbd16.fwd.q_type = lbd16.fwd.k_type = lbd16.fwd.v_type = lbd16.fwd.o_type =
            ATTN_DTYPE_BF16;
        uint16_t q16[N], k16[N], v16[N], do16[N], dq16[N], dk16[N], dv16[N];
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, q, q16, N), ATTN_OK);
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, k, k16, N), ATTN_OK);
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, v, v16, N), ATTN_OK);
        assert_int_equal(attn_dtype_encode(ATTN_DTYPE_BF16, dO, do16, N), ATTN_OK);
        attn_linear_bwd_args16 l16;
        memset(&l16, 0xA5, sizeof l16);
        assert_int_equal(attn_linear_bwd_args16_init(&l16), ATTN_OK);
        const unsigned char *hb = (const unsigned char *)&l16;
        for (size_t i = 0; i < sizeof l16; i++)
            assert_int_equal(hb[i], 0);
        assert_int_equal(attn_linear_bwd_args16_init(NULL), ATTN_ERR_NULL_ARGUMENT);
        l16.q = q16, l16.k = k16, l16.v = v16, l16.d_o = do16;
        l16.dq = dq16, l16.dk = dk16, l16.dv = dv16;
        attn_linear_bwd_args lba16;
        assert_int_equal(attn_linear_bwd_args_init(&lba16), ATTN_OK);
        lba16.args16 = &l16;
        for (int r = 0; r < 8; r++) {
            for (int i = 0; i < N; i++)
                dq16[i] = 0x7FA5;
            l16.reserved[r] = &l16;
            assert_int_equal(attn_linear_backward(&lbd16, &lba16), ATTN_ERR_BAD_OPTION);
            for (int i = 0; i < N; i++)
                assert_int_equal(dq16[i], 0x7FA5);
            l16.reserved[r] = NULL;
        }
        assert_int_equal(attn_linear_backward(&lbd16, &lba16), ATTN_OK);
        for (int i = 0; i < N; i++)
            assert_int_not_equal(dq16[i], 0x7FA5);
    }

    /* The MHA layer: weights, args and grads each carry a tail. */
    enum { E = GROW_D, L = GROW_N };
    float x[L * E], y[L * E], dy[L * E], dx[L * E], wq[E * E], wk[E * E], wv[E * E], wo[E * E];
    float gq[E * E], gk[E * E], gv[E * E], go[E * E];
    for (int i = 0; i < E * E; i++)
        wq[i] = wk[i] = wv[i] = wo[i] = (float)((i * 7) % 5 - 2) * 0.1f;
    grow_fill(x, L * E, 0.3f);
    grow_fill(dy, L * E, -0.2f);
    attn_mha_desc md;
    attn_mha_desc_init(&md);
    md.embed_dim = E;
    md.num_heads = 2;
    md.batch = 1;
    md.q_len = md.kv_len = L;
    md.self_attention = 1;
    md.has_bias = 0;
    md.threads = 1;
    attn_mha_plan *mp = NULL;
    assert_int_equal(attn_mha_plan_create(&mp, &md), ATTN_OK);
    attn_mha_weights mw;
    attn_mha_args ma;
    attn_mha_grads mg;
    memset(&mw, 0xA5, sizeof mw);
    memset(&ma, 0xA5, sizeof ma);
    memset(&mg, 0xA5, sizeof mg);
    assert_int_equal(attn_mha_weights_init(&mw), ATTN_OK);
    assert_int_equal(attn_mha_args_init(&ma), ATTN_OK);
    assert_int_equal(attn_mha_grads_init(&mg), ATTN_OK);
    mw.q_weight = wq, mw.k_weight = wk, mw.v_weight = wv, mw.out_weight = wo;
    ma.x = x, ma.out = y;
    mg.dx = dx, mg.d_q_weight = gq, mg.d_k_weight = gk, mg.d_v_weight = gv;
    mg.d_out_weight = go;
    size_t cx_bytes = 0;
    assert_int_equal(attn_mha_context_size(mp, &cx_bytes), ATTN_OK);
    void *cx = NULL;
    assert_int_equal(posix_memalign(&cx, 64, cx_bytes), 0);
    grow_fill(y, L * E, NAN);
    /* (1.1: weights16 and args16 took slot 0 of 8; slots 0 and 6 of the
     * 7 left) */
    assert_int_equal(sizeof mw.reserved / sizeof mw.reserved[0], 7);
    assert_int_equal(sizeof ma.reserved / sizeof ma.reserved[0], 7);
    for (int slot = 0; slot < 7; slot += 6) {
        mw.reserved[slot] = &mw;
        assert_int_equal(attn_mha_execute(mp, &mw, &ma, NULL, 0), ATTN_ERR_BAD_OPTION);
        assert_int_equal(attn_mha_train_execute(mp, &mw, &ma, cx, cx_bytes, NULL, 0),
                         ATTN_ERR_BAD_OPTION);
        mw.reserved[slot] = NULL;
        ma.reserved[slot] = &ma;
        assert_int_equal(attn_mha_execute(mp, &mw, &ma, NULL, 0), ATTN_ERR_BAD_OPTION);
        assert_true(grow_untouched(y, L * E));
        ma.reserved[slot] = NULL;
    }
    assert_int_equal(attn_mha_train_execute(mp, &mw, &ma, cx, cx_bytes, NULL, 0), ATTN_OK);
    grow_fill(dx, L * E, NAN);
    mg.reserved[2] = &mg;
    assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, dy, cx, cx_bytes, &mg, 0, NULL, 0),
                     ATTN_ERR_BAD_OPTION);
    assert_true(grow_untouched(dx, L * E));
    mg.reserved[2] = NULL;
    assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, dy, cx, cx_bytes, &mg, 0, NULL, 0),
                     ATTN_OK);
    free(cx);
    attn_mha_plan_destroy(mp);

    /* The MHA layer at 16-bit types: attn_mha_args16 and
     * attn_mha_weights16 carry tails of their own, and so does
     * attn_mha_grads16 of the training calls. */
    {
        uint16_t x16[L * E], y16[L * E], wq16[E * E], wk16[E * E], wv16[E * E], wo16[E * E];
        attn_dtype_encode(ATTN_DTYPE_BF16, x, x16, L * E);
        attn_dtype_encode(ATTN_DTYPE_BF16, wq, wq16, E * E);
        attn_dtype_encode(ATTN_DTYPE_BF16, wk, wk16, E * E);
        attn_dtype_encode(ATTN_DTYPE_BF16, wv, wv16, E * E);
        attn_dtype_encode(ATTN_DTYPE_BF16, wo, wo16, E * E);
        md.x_type = md.w_type = ATTN_DTYPE_BF16;
        mp = NULL;
        assert_int_equal(attn_mha_plan_create(&mp, &md), ATTN_OK);
        attn_mha_weights16 mw16;
        attn_mha_args16 ma16;
        memset(&mw16, 0xA5, sizeof mw16);
        memset(&ma16, 0xA5, sizeof ma16);
        assert_int_equal(attn_mha_weights16_init(&mw16), ATTN_OK);
        assert_int_equal(attn_mha_args16_init(&ma16), ATTN_OK);
        assert_null(mw16.in_proj_weight);
        assert_null(ma16.out);
        for (int i = 0; i < 8; i++)
            assert_true(mw16.reserved[i] == NULL && ma16.reserved[i] == NULL);
        mw16.q_weight = wq16, mw16.k_weight = wk16, mw16.v_weight = wv16, mw16.out_weight = wo16;
        ma16.x = x16, ma16.out = y16;
        assert_int_equal(attn_mha_weights_init(&mw), ATTN_OK);
        assert_int_equal(attn_mha_args_init(&ma), ATTN_OK);
        mw.weights16 = &mw16;
        ma.args16 = &ma16;
        for (int i = 0; i < L * E; i++)
            y16[i] = 0x7FA5;
        for (int slot = 0; slot < 8; slot += 7) {
            mw16.reserved[slot] = &mw16;
            assert_int_equal(attn_mha_execute(mp, &mw, &ma, NULL, 0), ATTN_ERR_BAD_OPTION);
            mw16.reserved[slot] = NULL;
            ma16.reserved[slot] = &ma16;
            assert_int_equal(attn_mha_execute(mp, &mw, &ma, NULL, 0), ATTN_ERR_BAD_OPTION);
            ma16.reserved[slot] = NULL;
        }
        for (int i = 0; i < L * E; i++)
            assert_int_equal(y16[i], 0x7FA5);
        /* Training (1.1): the 16-bit dY and gradients through
         * grads.grads16, whose tail is checked like the others. */
        size_t cbytes = 0, bbytes = 0;
        assert_int_equal(attn_mha_context_size(mp, &cbytes), ATTN_OK);
        assert_int_equal(attn_mha_bwd_workspace_size(mp, &bbytes), ATTN_OK);
        assert_true(cbytes > 0 && bbytes > 0);
        void *cx16 = NULL;
        assert_int_equal(posix_memalign(&cx16, 64, cbytes), 0);
        assert_int_equal(attn_mha_train_execute(mp, &mw, &ma, cx16, cbytes, NULL, 0), ATTN_OK);
        uint16_t dy16[L * E], dx16[L * E], g16w[4][E * E];
        attn_dtype_encode(ATTN_DTYPE_BF16, dy, dy16, L * E);
        attn_mha_grads16 mg16;
        memset(&mg16, 0xA5, sizeof mg16);
        assert_int_equal(attn_mha_grads16_init(&mg16), ATTN_OK);
        assert_null(mg16.dy);
        for (int i = 0; i < 8; i++)
            assert_null(mg16.reserved[i]);
        mg16.dy = dy16, mg16.dx = dx16, mg16.d_q_weight = g16w[0], mg16.d_k_weight = g16w[1];
        mg16.d_v_weight = g16w[2], mg16.d_out_weight = g16w[3];
        attn_mha_grads g16;
        assert_int_equal(attn_mha_grads_init(&g16), ATTN_OK);
        assert_null(g16.grads16);
        g16.grads16 = &mg16;
        for (int i = 0; i < L * E; i++)
            dx16[i] = 0x7FA5;
        for (int slot = 0; slot < 8; slot += 7) {
            mg16.reserved[slot] = &mg16;
            assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, NULL, cx16, cbytes, &g16, 0,
                                                  NULL, 0), ATTN_ERR_BAD_OPTION);
            mg16.reserved[slot] = NULL;
        }
        /* grads16 missing; the float dy given besides dY16 */
        g16.grads16 = NULL;
        assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, NULL, cx16, cbytes, &g16, 0, NULL, 0),
                         ATTN_ERR_NULL_ARGUMENT);
        g16.grads16 = &mg16;
        assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, dy, cx16, cbytes, &g16, 0, NULL, 0),
                         ATTN_ERR_ARGUMENT_MISMATCH);
        for (int i = 0; i < L * E; i++)
            assert_int_equal(dx16[i], 0x7FA5);
        assert_int_equal(attn_mha_bwd_execute(mp, &mw, &ma, NULL, cx16, cbytes, &g16, 0, NULL, 0),
                         ATTN_OK);
        for (int i = 0; i < L * E; i++)
            assert_int_not_equal(dx16[i], 0x7FA5);
        assert_int_equal(attn_mha_execute(mp, &mw, &ma, NULL, 0), ATTN_OK);
        free(cx16);
        attn_mha_plan_destroy(mp);
    }

    /* attn_kv_append and attn_partials_merge. */
    float kc[N], vc[N];
    grow_fill(kc, N, NAN);
    grow_fill(vc, N, NAN);
    int32_t lens[1] = { 0 };
    attn_kv_append_args ka;
    attn_kv_append_args_init(&ka);
    ka.k_cache = kc, ka.v_cache = vc, ka.kv_lens = lens, ka.t = 1;
    ka.k_new = k, ka.v_new = v;
    ka.k_new_view = ka.v_new_view = attn_view_bhsd(1, 1, GROW_D);
    ka.reserved[1] = &ka;
    assert_int_equal(attn_kv_append(&d, &ka), ATTN_ERR_BAD_OPTION);
    assert_true(grow_untouched(kc, N) && lens[0] == 0);
    ka.reserved[1] = NULL;
    assert_int_equal(attn_kv_append(&d, &ka), ATTN_OK);
    assert_int_equal(lens[0], 1);

    float parts_lse[2] = { 0.0f, -1.0f };
    attn_partials_merge_args mr;
    memset(&mr, 0xA5, sizeof mr);
    assert_int_equal(attn_partials_merge_args_init(&mr), ATTN_OK);
    mr.parts = 2, mr.rows = 1, mr.dim = GROW_D;
    mr.o_parts = q, mr.o_part_stride = GROW_D, mr.o_row_stride = GROW_D;
    mr.lse_parts = parts_lse, mr.lse_part_stride = 1, mr.lse_row_stride = 1;
    mr.o = o, mr.o_out_stride = GROW_D;
    grow_fill(o, N, NAN);
    mr.reserved[4] = 1;
    assert_int_equal(attn_partials_merge(&mr), ATTN_ERR_BAD_OPTION);
    assert_true(grow_untouched(o, N));
    mr.reserved[4] = 0;
    assert_int_equal(attn_partials_merge(&mr), ATTN_OK);

    /* attn_blas_query fills its reserved tail with zeros. */
    attn_blas_info info;
    memset(&info, 0xA5, sizeof info);
    assert_int_equal(attn_blas_query(&info), ATTN_OK);
    for (size_t i = 0; i < sizeof info.reserved / sizeof info.reserved[0]; i++)
        assert_int_equal(info.reserved[i], 0);
}

/* The pointers of quantized K and V at execute time (1.2): args.kq / vq
 * for Q8_0 / Q4_0 storage, the other K or V pointers NULL.  One table of
 * rows over a dense problem (B 2, Hq 4, Hkv 2, n 3, m 9, dk 32, dv 64) and
 * its paged twin; each row a plan's storage types and the pointers given,
 * and the status; O (sentinel-filled) untouched on error, the one-shot
 * agreeing with the plan. */
enum { QB = 2, QHQ = 4, QHKV = 2, QN = 3, QM = 9, QDK = 32, QDV = 64, QBS = 4, QMAXB = 3,
       QNBLK = 7 };

enum {
    QP_K = 1, QP_V = 2, QP_K16 = 4, QP_V16 = 8, QP_KQ = 16, QP_VQ = 32, QP_TABLE = 64
};

typedef struct qexec_row {
    const char *what;
    attn_dtype kt, vt;
    int paged;
    unsigned give;     /* QP_*: the pointers set (the rest NULL) */
    attn_status want;
    int want2;         /* also accepted (-1: none): two rules broken at once */
} qexec_row;

#define QG8 ATTN_DTYPE_Q8_0
#define QG4 ATTN_DTYPE_Q4_0
static const qexec_row qexec_rows[] = {
    {"control: K Q8_0, V Q4_0 through kq, vq", QG8, QG4, 0, QP_KQ | QP_VQ, ATTN_OK, -1},
    {"control: K Q4_0, V Q8_0", QG4, QG8, 0, QP_KQ | QP_VQ, ATTN_OK, -1},
    {"control: K Q8_0, V F32 (v)", QG8, ATTN_DTYPE_F32, 0, QP_KQ | QP_V, ATTN_OK, -1},
    {"control: K F16 (k16), V Q4_0", ATTN_DTYPE_F16, QG4, 0, QP_K16 | QP_VQ, ATTN_OK, -1},
    {"control: paged K Q8_0, V Q4_0", QG8, QG4, 1, QP_KQ | QP_VQ | QP_TABLE, ATTN_OK, -1},
    {"Q8_0 K: kq NULL", QG8, QG4, 0, QP_VQ, ATTN_ERR_NULL_ARGUMENT, -1},
    {"Q4_0 V: vq NULL", QG8, QG4, 0, QP_KQ, ATTN_ERR_NULL_ARGUMENT, -1},
    {"paged Q8_0 K: kq NULL", QG8, QG4, 1, QP_VQ | QP_TABLE, ATTN_ERR_NULL_ARGUMENT, -1},
    {"paged: block_table NULL", QG8, QG4, 1, QP_KQ | QP_VQ, ATTN_ERR_NULL_ARGUMENT, -1},
    {"Q8_0 K: k given as well", QG8, QG4, 0, QP_KQ | QP_VQ | QP_K, ATTN_ERR_ARGUMENT_MISMATCH,
     -1},
    {"Q8_0 K: k16 given as well", QG8, QG4, 0, QP_KQ | QP_VQ | QP_K16,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"Q4_0 V: v given as well", QG8, QG4, 0, QP_KQ | QP_VQ | QP_V, ATTN_ERR_ARGUMENT_MISMATCH,
     -1},
    {"Q4_0 V: v16 given as well", QG8, QG4, 0, QP_KQ | QP_VQ | QP_V16,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"paged Q4_0 V: v16 given as well", QG8, QG4, 1, QP_KQ | QP_VQ | QP_V16 | QP_TABLE,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"Q8_0 K: k given instead of kq", QG8, QG4, 0, QP_K | QP_VQ, ATTN_ERR_ARGUMENT_MISMATCH,
     ATTN_ERR_NULL_ARGUMENT},
    {"Q4_0 V: v16 given instead of vq", QG8, QG4, 0, QP_KQ | QP_V16,
     ATTN_ERR_ARGUMENT_MISMATCH, ATTN_ERR_NULL_ARGUMENT},
    {"F32 K: kq given as well", ATTN_DTYPE_F32, ATTN_DTYPE_F32, 0, QP_K | QP_V | QP_KQ,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"F32 V: vq given as well", ATTN_DTYPE_F32, ATTN_DTYPE_F32, 0, QP_K | QP_V | QP_VQ,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"F16 K: kq given as well", ATTN_DTYPE_F16, ATTN_DTYPE_BF16, 0, QP_K16 | QP_V16 | QP_KQ,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"BF16 V: vq given as well", ATTN_DTYPE_F16, ATTN_DTYPE_BF16, 0, QP_K16 | QP_V16 | QP_VQ,
     ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"paged F16 K: kq given as well", ATTN_DTYPE_F16, ATTN_DTYPE_F32, 1,
     QP_K16 | QP_V | QP_KQ | QP_TABLE, ATTN_ERR_ARGUMENT_MISMATCH, -1},
    {"F16 K: kq given instead of k16", ATTN_DTYPE_F16, ATTN_DTYPE_F32, 0, QP_KQ | QP_V,
     ATTN_ERR_ARGUMENT_MISMATCH, ATTN_ERR_NULL_ARGUMENT},
    {"F32 V: vq given instead of v", ATTN_DTYPE_F32, ATTN_DTYPE_F32, 0, QP_K | QP_VQ,
     ATTN_ERR_ARGUMENT_MISMATCH, ATTN_ERR_NULL_ARGUMENT},
};

static void test_quant_execute_errors(void **state)
{
    (void)state;
    g_fail = 0;
    /* K and V of every type at once, each buffer large enough for the
     * dense and the paged views (the pool: QNBLK blocks of QBS rows) */
    const int64_t nk = QNBLK * QHKV * QBS * QDK, nv = QNBLK * QHKV * QBS * QDV;
    assert_true(nk >= QB * QHKV * QM * QDK && nv >= QB * QHKV * QM * QDV);
    const int64_t nq = QB * QHQ * QN * QDK, no = QB * QHQ * QN * QDV;
    float *q = malloc((size_t)nq * sizeof(float)), *o = malloc((size_t)no * sizeof(float));
    float *k = malloc((size_t)nk * sizeof(float)), *v = malloc((size_t)nv * sizeof(float));
    uint16_t *k16 = malloc((size_t)nk * 2), *v16 = malloc((size_t)nv * 2);
    size_t kqb = 0, vqb = 0;
    assert_int_equal(attn_dtype_bytes(ATTN_DTYPE_Q8_0, nk, &kqb), ATTN_OK);  /* the larger */
    assert_int_equal(attn_dtype_bytes(ATTN_DTYPE_Q8_0, nv, &vqb), ATTN_OK);
    unsigned char *kq = malloc(kqb), *vq = malloc(vqb);
    assert_true(q && o && k && v && k16 && v16 && kq && vq);
    for (int64_t i = 0; i < nq; i++)
        q[i] = (float)((i * 37) % 17 - 8) * 0.0625f;
    for (int64_t i = 0; i < nk; i++)
        k[i] = (float)((i * 29) % 13 - 6) * 0.125f;
    for (int64_t i = 0; i < nv; i++)
        v[i] = (float)((i * 23) % 11 - 5) * 0.25f;
    assert_int_equal(attn_dtype_encode(ATTN_DTYPE_F16, k, k16, nk), ATTN_OK);
    assert_int_equal(attn_dtype_encode(ATTN_DTYPE_F16, v, v16, nv), ATTN_OK);
    /* Q8_0 bytes serve the Q4_0 plans as well (any bytes are values) */
    assert_int_equal(attn_quantize(ATTN_DTYPE_Q8_0, k, kq, nk), ATTN_OK);
    assert_int_equal(attn_quantize(ATTN_DTYPE_Q8_0, v, vq, nv), ATTN_OK);
    int32_t table[QB * QMAXB] = {4, 0, 6, 2, 5, 1};
    char what[128];
    for (size_t r = 0; r < sizeof qexec_rows / sizeof qexec_rows[0]; r++) {
        const qexec_row *row = &qexec_rows[r];
        attn_sdpa_desc d;
        attn_sdpa_desc_init(&d);
        d.batch = QB, d.q_heads = QHQ, d.kv_heads = QHKV, d.q_len = QN, d.kv_len = QM;
        d.qk_dim = QDK, d.v_dim = QDV, d.threads = 1;
        d.k_type = row->kt, d.v_type = row->vt;
        d.q = attn_view_bhsd(QHQ, QN, QDK);
        d.o = attn_view_bhsd(QHQ, QN, QDV);
        if (row->paged) {
            d.kv_block_size = QBS, d.kv_num_blocks = QNBLK, d.kv_max_blocks = QMAXB;
            d.k = attn_view_bhsd(QHKV, QBS, QDK);
            d.v = attn_view_bhsd(QHKV, QBS, QDV);
        } else {
            d.k = attn_view_bhsd(QHKV, QM, QDK);
            d.v = attn_view_bhsd(QHKV, QM, QDV);
        }
        attn_sdpa_args a;
        attn_sdpa_args_init(&a);
        a.q = q, a.o = o;
        if (row->give & QP_K) a.k = k;
        if (row->give & QP_V) a.v = v;
        if (row->give & QP_K16) a.k16 = k16;
        if (row->give & QP_V16) a.v16 = v16;
        if (row->give & QP_KQ) a.kq = kq;
        if (row->give & QP_VQ) a.vq = vq;
        if (row->give & QP_TABLE) a.block_table = table;
        attn_sdpa_plan *plan = NULL;
        attn_status s = attn_sdpa_plan_create(&plan, &d);
        if (s != ATTN_OK) {
            printf("FAIL %s: plan_create returned %s\n", row->what, sname(s));
            g_fail++;
            continue;
        }
        for (int shot = 0; shot < 2; shot++) {
            grow_fill(o, (size_t)no, NAN);
            s = shot ? attn_sdpa(&d, &a) : attn_sdpa_execute(plan, &a, NULL, 0);
            snprintf(what, sizeof what, "%s (%s)", row->what, shot ? "attn_sdpa" : "execute");
            const int ok = s == row->want || (row->want2 >= 0 && s == (attn_status)row->want2);
            if (!ok) {
                printf("FAIL %s: returned %s, want %s%s%s\n", what, sname(s), sname(row->want),
                       row->want2 >= 0 ? " or " : "",
                       row->want2 >= 0 ? sname((attn_status)row->want2) : "");
                g_fail++;
            }
            if (row->want != ATTN_OK && !grow_untouched(o, (size_t)no)) {
                printf("FAIL %s: O written by a failing call\n", what);
                g_fail++;
            }
            if (row->want == ATTN_OK && s == ATTN_OK && grow_untouched(o, (size_t)no)) {
                printf("FAIL %s: O not written\n", what);
                g_fail++;
            }
        }
        attn_sdpa_plan_destroy(plan);
    }
    printf("  %zu quantized K/V pointer rows\n", sizeof qexec_rows / sizeof qexec_rows[0]);
    free(q), free(o), free(k), free(v), free(k16), free(v16), free(kq), free(vq);
    assert_int_equal(g_fail, 0);
}

static void test_status_strings(void **state)
{
    (void)state;
    const char *strs[N_STATUS];
    for (int s = 0; s < N_STATUS; s++) {
        strs[s] = attn_status_str((attn_status)s);
        assert_non_null(strs[s]);
        assert_true(strlen(strs[s]) > 0);
        for (int r = 0; r < s; r++)
            if (strcmp(strs[r], strs[s]) == 0)
                fail_msg("statuses %d and %d share the string \"%s\"", r, s, strs[s]);
    }
    const int outside[] = {N_STATUS, N_STATUS + 1, -1, 1000, INT_MIN,
                           INT_MAX};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        const char *u = attn_status_str((attn_status)outside[i]);
        assert_non_null(u);
        assert_non_null(strcasestr(u, "unknown"));
        for (int s = 0; s < N_STATUS; s++)
            assert_string_not_equal(u, strs[s]);
    }
    for (int s = 0; s < N_STATUS; s++)
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
    /* attn_engine_resolve: explicit engines as given, AUTO one of them,
     * the same as ATTN_ENGINE says when it is set; bad values refused and
     * *resolved left alone. */
    attn_engine e = (attn_engine)77;
    assert_int_equal(attn_engine_resolve(ATTN_ENGINE_AUTO, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_engine_resolve((attn_engine)3, &e), ATTN_ERR_BAD_OPTION);
    assert_int_equal(attn_engine_resolve((attn_engine)-1, &e), ATTN_ERR_BAD_OPTION);
    assert_int_equal((int)e, 77);
    assert_int_equal(attn_engine_resolve(ATTN_ENGINE_BLAS, &e), ATTN_OK);
    assert_int_equal(e, ATTN_ENGINE_BLAS);
    assert_int_equal(attn_engine_resolve(ATTN_ENGINE_TILE, &e), ATTN_OK);
    assert_int_equal(e, ATTN_ENGINE_TILE);
    assert_int_equal(attn_engine_resolve(ATTN_ENGINE_AUTO, &e), ATTN_OK);
    assert_true(e == ATTN_ENGINE_BLAS || e == ATTN_ENGINE_TILE);
    const char *env = getenv("ATTN_ENGINE");
    if (env && !strcmp(env, "blas"))
        assert_int_equal(e, ATTN_ENGINE_BLAS);
    if (env && !strcmp(env, "tile"))
        assert_int_equal(e, ATTN_ENGINE_TILE);

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
    assert_non_null(memchr(info.bf16, 0, sizeof info.bf16));
    static const char *const bf16[] = {"amx", "avx512bf16", "avx512", "avx2", "scalar",
                                       "widened"};
    if (!in_set(info.bf16, bf16, 6))
        fail_msg("bf16 \"%s\"", info.bf16);
    for (size_t r = 0; r < sizeof info.reserved / sizeof info.reserved[0]; r++)
        assert_true(info.reserved[r] == 0);
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
           "threading=%d simd=%s bf16=%s openmp=%d max_threads=%d\n",
           info.backend, info.loaded, info.library, info.version, info.kernel,
           (int)info.threading, info.simd, info.bf16, info.openmp, info.max_threads);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desc_init_defaults),
        cmocka_unit_test(test_desc_table),
        cmocka_unit_test(test_mha_too_large),
        cmocka_unit_test(test_execute_errors),
        cmocka_unit_test(test_bwd_desc_table),
        cmocka_unit_test(test_bwd_execute_errors),
        cmocka_unit_test(test_bwd_args16_errors),
        cmocka_unit_test(test_sparse_execute_errors),
        cmocka_unit_test(test_quant_execute_errors),
        cmocka_unit_test(test_growable_structs),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_blas_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
