/*
 * test_mha.c -- the multi-head attention layer (attn_mha_*): checks run over
 * the table of cases of mha_table.c (built and compared by mha_case.c
 * against the independent float64 reference of mha_reference.c), and every
 * error path as a table of mutations of a valid call.
 *
 * Checks, one CMocka test each, over every row unless a CK_* bit says:
 *   forward     out and weights against the reference (threads as in the
 *               row, workspace NULL); one "[accuracy]" line per family: the
 *               largest |error| of Y and of the weights, and the largest
 *               error/tolerance ratio
 *   engines     the desc's engine BLAS, then TILE (over ATTN_ENGINE): each
 *               against the reference
 *   threads     2 threads with a caller workspace full of NaN: bitwise the
 *               forward result; CK_THREADS rows also 1, 2, 3, 4 and 0
 *               (default) threads with workspace NULL
 *   input gaps  the gaps of x, key and value hold NaN in every build (NaN
 *               reaching an output fails the forward check); CK_GAPS rows
 *               (every row with a row stride) with -1e30 there instead
 *               give bitwise the same out and weights
 *   workspace   CK_WORKSPACE: caller workspaces filled with 0xFF, 0x00,
 *               reused as left, at an offset with more room, and NULL with
 *               a byte count: bitwise the result of workspace NULL
 *   weights     CK_WEIGHTS: out bitwise the same whether the weights are
 *               not asked, asked per head or averaged
 *   errors      each row of the error table: a mutation of a valid desc,
 *               weights, args or workspace, and the status plan_create or
 *               execute must return; a failing call writes no output (and
 *               no *plan); rows wanting ATTN_OK are the controls
 *   backward    CK_BACKWARD rows (every row: mha_rows sets the bit; the
 *               "backward" family adds two larger shapes with several row
 *               and weight blocks): train_forward with a
 *               NaN-filled caller context and workspace gives out and
 *               weights bitwise as execute; backward (NaN-filled workspace,
 *               dY with NaN row gaps) against the float64 reference
 *               backward, every gradient family, sentinels in the row gaps
 *               of dX, dXk, dXv and after every buffer; accumulate = 1 onto
 *               random values gives exactly fl(old + g) for every element
 *               (g the overwrite result; workspace NULL); threads 1, 2, 3, 4
 *               give bitwise the same gradients; one "[accuracy] backward"
 *               line per gradient family
 *   backward_fd the reference backward against central differences of the
 *               reference forward (L = sum dY * Y) on four tiny shapes,
 *               every element of every input, weight and bias:
 *               |fd - g| <= 1e-5 (1 + |g|), step 2^-10 (see the test)
 *   types       CK_TYPES (every 16-bit row, x_type and / or w_type F16 or
 *               BF16): where the types widen (all but the BF16 products;
 *               a BF16 row runs again with engine BLAS), out and weights
 *               bitwise the fp32 layer's on the rounded inputs and weights,
 *               Y rounded to x_type; context and backward sizes, train
 *               forward and backward ATTN_ERR_UNSUPPORTED_TYPE, nothing
 *               written
 *   train errors  mutations of a valid train_forward or backward (NULL
 *               pointers, context or workspace short or misaligned,
 *               accumulate not 0/1, every gradient pointer NULL when used
 *               and given when not, lengths); a failing call writes nothing
 *               (out, weights and the context; every gradient buffer)
 *
 * Tolerances (derived in mha_reference.c; u = 2^-24, worst case, first
 * order, safety factor 1.25, so they hold for any BLAS, blocking or
 * summation order), per output element:
 *   |Y_e - y_e| <= 1.25 (sum_c dO_c |Wo_ec| + (E + 2) u (sum_c (|O_c| + dO_c)
 *                  |Wo_ec| + |bo_e|)) + 1e-30
 *     with dO_d = (p_rel + (nvis + 4) u + (vdim + 2) u) sum_j p_j |v_jd|~,
 *   |P_j - p_j| <= 1.25 p_rel p_j + 1e-30                 (per-head weights)
 *   |A_j - a_j| <= 1.25 (mean_h p_rel_h p_hj + (H + 2) u a_j) + 1e-30
 *                                                         (averaged weights)
 *   p_rel = expm1(2 E_s) + (nvis + 36) u,
 *   E_s = (E + kdim + dh + 10) u max_j (|scale| sum_d |q_d|~ |k_jd|~ + |bias_j|)
 * where |z|~ of a projected element is sum_k |x_k W_k| + |b| (the magnitude
 * of its terms, in double).
 *
 * 16-bit rows (mcase xt, wt): X, Xk, Xv and the weights are drawn as in
 * fp32 and rounded to their types; the reference runs on the rounded
 * values, so the inputs' own rounding is no error.  Each rounding the
 * layer adds costs at most u_t |z| for the value z rounded (u_t =
 * tdtype_u: 2^-8 for BF16, its unit roundoff; 2^-10 for F16, twice its
 * unit roundoff), first order, and the products of BF16 values are exact
 * in fp32 (an underflowing one or a BF16 denormal read as 0 under DAZ is
 * below 2^-126, inside the 1e-30 floor), so the fp32 terms stay as above
 * and the bound grows by (mha_reference.c, mref_mha_typed):
 *   with BF16 products (x_type == w_type == BF16, the engine resolving
 *   to TILE, no sparse option; minst_round):
 *     Q and K rounded to BF16:  E_s += 2 u_t max_j (|scale| sum_d |q_d|~
 *                               |k_jd|~)     (|q - q~| <= (cq u + u_t) |q|~)
 *     V rounded, P rounded for P V, O rounded:  dO_d's relative factor
 *                               += 3 u_t     (each <= u_t sum_j p_j |v_jd|~)
 *   Y rounded to x_type (every 16-bit x_type):
 *     |Y_e - y_e| += 1.25 u_t (sum_c (|O_c| + dO_c) |Wo_ec| + |bo_e|)
 *                    (>= 1.25 u_t |Y_e|),  + 2^-24 for F16 (a Y among
 *                    F16's subnormals, spaced 2^-24, is off by up to half
 *                    that, absolute)
 * Widened rows (F16, mixed, BLAS engine, sparse) get only Y's term; they
 * are also bitwise the fp32 layer (types above), which the bound of that
 * layer covers.  The per-head and averaged weights are fp32 outputs: with
 * BF16 products their p_rel carries Q's and K's roundings through E_s.
 * Large logits make the BF16 bound loose (expm1(2 E_s) with E_s ~ 2 u_t
 * |logit|), as the error itself grows: the test rows keep |logit| small
 * but for the in_mag = 3 rows.  Empty rows (no visible key, padded queries)
 * must give exactly P = 0 and Y = b_o up to the same bound.  Every element
 * of out and weights outside the views (row gaps, a tail after each buffer)
 * must keep its sentinel bits.  test_threads checks thread counts on
 * larger shapes.
 *
 * Gradient tolerances (mha_reference.c: the same u, safety factor and
 * worst-case first-order model): every quantity carries its magnitude
 * |z|~ and an error bound e(z); a sum of n products a_k b_k gets
 *   sum_k (e(a_k) |b_k|~ + |a_k|~ e(b_k)) + (n + 2) u sum_k |a_k|~ |b_k|~
 * with the leaves Q, K, V (e = (K + 2) u |z|~ from their projections), the
 * saved O (the forward's bound), P (relative p_rel, recomputed from the
 * logsumexp) and dY (exact); n = E for dO = dY W_o, dh for dP and
 * D = dO . O, S for dQ, (H / Hkv) L for dK and dV, the B L or B S tokens
 * for the weight and bias gradients, E (3 E in self-attention) for dX and
 * Hkv dh for dXk, dXv; dS = P (dP - D) gets
 *   p_rel P |dP - D| + P (e(dP) + e(D)) + 3 u P (|dP| + |D|).
 * The bounds grow with the sizes and the magnitudes of the terms, never
 * with a fixed epsilon, so they hold for any BLAS and blocking.
 *
 * ATTN_TEST_QUICK=1 (valgrind): rows marked slow in the table are left out.
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
#include "mha_case.h"
#include "mha_table.h"

/* ------------------------------------------------------------ row checks */

/* A check of one built row (forward already run with the row's threads and
 * workspace NULL, its outputs in `first`).  Returns the number of failures,
 * having printed them. */
typedef int (*row_check)(minst *t, const msnap *first, const mrow *row);

/* Run `check` over every row with any of the bits `need` (0: every row):
 * build, forward, snapshot, check.  With stats, also the forward check
 * against the reference and one "[accuracy]" line per family. */
static void over_rows(unsigned need, row_check check, int stats)
{
    size_t n;
    const mrow *rows = mha_rows(&n);
    int fails = 0, rows_run = 0;
    mstats st;
    mstats_init(&st, NULL);
    for (size_t i = 0; i < n; i++) {
        const mrow *row = &rows[i];
        if (need && !(row->checks & need))
            continue;
        if (stats && st.family != row->family) {
            if (st.family)
                mstats_print(&st);
            mstats_init(&st, row->family);
        }
        rows_run++;
        minst t;
        if (minst_build(&t, &row->c) != 0) {
            printf("FAIL: cannot build %s\n", mcase_str(&row->c));
            fails++;
            minst_free(&t);
            continue;
        }
        attn_status s = minst_run(&t, 0);
        if (s != ATTN_OK) {
            printf("FAIL [%s]: %s: %s\n", row->family, attn_status_str(s), mcase_str(&row->c));
            fails++;
        } else {
            if (stats)
                fails += minst_check(&t, &st) != 0;
            if (check) {
                msnap first;
                msnap_take(&first, &t);
                fails += check(&t, &first, row);
                msnap_free(&first);
            }
        }
        minst_free(&t);
    }
    if (stats && st.family)
        mstats_print(&st);
    printf("  %d rows\n", rows_run);
    if (fails)
        fail_msg("%d failure(s)", fails);
}

/* Run the instance again (outputs cleared) and compare with first. */
static int again(minst *t, const msnap *first, int ws_mode, const char *what)
{
    minst_clear(t);
    attn_status s = minst_run(t, ws_mode);
    if (s != ATTN_OK || !msnap_equal(first, t)) {
        printf("FAIL %s: %s, %s bitwise: %s\n", what, attn_status_str(s),
               msnap_equal(first, t) ? "equal" : "differs", mcase_str(&t->c));
        return 1;
    }
    return 0;
}

static int check_threads(minst *t, const msnap *first, const mrow *row)
{
    int fails = 0;
    t->d.threads = 2;
    fails += again(t, first, 1, "threads=2 with a NaN-filled caller workspace");
    if (row->checks & CK_THREADS) {
        static const int threads[] = { 1, 2, 3, 4, 0 };
        for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
            char what[48];
            snprintf(what, sizeof what, "threads=%d", threads[k]);
            t->d.threads = threads[k];
            fails += again(t, first, 0, what);
        }
    }
    return fails;
}

static int check_gaps(minst *t, const msnap *first, const mrow *row)
{
    (void)row;
    minst_fill_gaps(t, -1e30f);
    return again(t, first, 0, "input gaps -1e30 instead of NaN");
}

static int check_workspace(minst *t, const msnap *first, const mrow *row)
{
    (void)row;
    int fails = 0;
    attn_mha_plan *plan = NULL;
    assert_int_equal(attn_mha_plan_create(&plan, &t->d), ATTN_OK);
    size_t bytes = 0;
    assert_int_equal(attn_mha_workspace_size(plan, &bytes), ATTN_OK);
    printf("  workspace of seed %llu: %zu bytes\n", (unsigned long long)t->c.seed, bytes);
    const size_t cap = (bytes + 63) / 64 * 64 + 128;
    unsigned char *ws = aligned_alloc(64, cap);
    assert_non_null(ws);
    const unsigned char fills[] = { 0xFF, 0x00, 0x7F };
    for (int rep = 0; rep < 3; rep++) {
        if (rep < 2) /* rep 2 reuses the workspace of rep 1 as it is */
            memset(ws, fills[rep], cap);
        minst_clear(t);
        /* exact size; then the same at an offset of 64 with more room */
        attn_status s = attn_mha_execute(plan, &t->w, &t->a, rep == 2 ? ws + 64 : ws,
                                         rep == 2 ? cap - 64 : bytes);
        if (s != ATTN_OK || !msnap_equal(first, t)) {
            printf("FAIL rep %d: caller workspace: %s, %s: %s\n", rep, attn_status_str(s),
                   msnap_equal(first, t) ? "equal" : "differs", mcase_str(&t->c));
            fails++;
        }
    }
    /* NULL workspace with a nonzero byte count: the count is ignored */
    minst_clear(t);
    if (attn_mha_execute(plan, &t->w, &t->a, NULL, 12345) != ATTN_OK || !msnap_equal(first, t)) {
        printf("FAIL NULL workspace with a byte count: %s\n", mcase_str(&t->c));
        fails++;
    }
    free(ws);
    attn_mha_plan_destroy(plan);
    return fails;
}

static int check_weights(minst *t, const msnap *first, const mrow *row)
{
    (void)t;
    int fails = 0;
    for (int wm = ATTN_WEIGHTS_NONE; wm <= ATTN_WEIGHTS_AVERAGED; wm++) {
        if (wm == row->c.weights)
            continue;
        mcase c = row->c;
        c.weights = wm;
        minst u;
        assert_int_equal(minst_build(&u, &c), 0);
        attn_status s = minst_run(&u, 0);
        if (s != ATTN_OK || !msnap_equal_out(first, &u)) {
            printf("FAIL weights %d instead of %d: %s, out %s: %s\n", wm, row->c.weights,
                   attn_status_str(s), msnap_equal_out(first, &u) ? "equal" : "differs",
                   mcase_str(&row->c));
            fails++;
        }
        minst_free(&u);
    }
    return fails;
}

static void test_forward(void **state)
{
    (void)state;
    over_rows(0, NULL, 1);
}

/* ------------------------------------------------- 16-bit training */

/* Is gradient family k at x_type (dX, dXk, dXv) rather than w_type? */
static int grad_of_x(int k)
{
    return k == MG_DX || k == MG_DKEY || k == MG_DVALUE;
}

/* The 16-bit buffers of a backward call, twins of m's (same element
 * counts and views), holding sentinels until written. */
typedef struct mgrads16 {
    uint16_t *buf[MG_COUNT];
    uint16_t *view[MG_COUNT];
    uint16_t *dy;
    attn_mha_grads16 g;
} mgrads16;

#define SENT16 0x7fc1u

static void mg16_fill(mgrads16 *h, const mgrads *m)
{
    for (int k = 0; k < MG_COUNT; k++)
        for (size_t i = 0; h->buf[k] && i < m->n[k]; i++)
            h->buf[k][i] = SENT16;
}

static void mg16_build(mgrads16 *h, const mgrads *m, const minst *t)
{
    memset(h, 0, sizeof *h);
    for (int k = 0; k < MG_COUNT; k++)
        if (m->buf[k]) {
            h->buf[k] = malloc(m->n[k] * sizeof(uint16_t));
            assert_non_null(h->buf[k]);
        }
    for (int k = 0; k < MG_COUNT; k++)
        if (m->view[k]) {
            const int owner = m->buf[k] ? k : (k == MG_DWK || k == MG_DWV) ? MG_DWQ : MG_DBQ;
            h->view[k] = h->buf[owner] + (m->view[k] - m->buf[owner]);
        }
    mg16_fill(h, m);
    h->dy = malloc(m->n_dy * sizeof(uint16_t));
    assert_non_null(h->dy);
    attn_mha_grads16_init(&h->g);
    const int xt = t->c.xt != 0, wt = t->c.wt != 0;
    h->g.dy = xt ? h->dy : NULL;
    h->g.dx = xt ? h->view[MG_DX] : NULL;
    h->g.dkey = xt ? h->view[MG_DKEY] : NULL;
    h->g.dvalue = xt ? h->view[MG_DVALUE] : NULL;
    if (wt) {
        if (t->c.packed) {
            h->g.d_in_proj_weight = h->view[MG_DWQ];
            h->g.d_in_proj_bias = h->view[MG_DBQ];
        } else {
            h->g.d_q_weight = h->view[MG_DWQ];
            h->g.d_k_weight = h->view[MG_DWK];
            h->g.d_v_weight = h->view[MG_DWV];
            h->g.d_q_bias = h->view[MG_DBQ];
            h->g.d_k_bias = h->view[MG_DBK];
            h->g.d_v_bias = h->view[MG_DBV];
        }
        h->g.d_out_weight = h->view[MG_DWO];
        h->g.d_out_bias = h->view[MG_DBO];
    }
}

/* Copies of h's buffers (NULL where it has none); free each. */
static void mg16_snap(const mgrads16 *h, const mgrads *m, uint16_t *snap[MG_COUNT])
{
    for (int k = 0; k < MG_COUNT; k++) {
        snap[k] = NULL;
        if (!h->buf[k])
            continue;
        snap[k] = malloc(m->n[k] * sizeof(uint16_t));
        assert_non_null(snap[k]);
        memcpy(snap[k], h->buf[k], m->n[k] * sizeof(uint16_t));
    }
}

static void mg16_free(mgrads16 *h)
{
    for (int k = 0; k < MG_COUNT; k++)
        free(h->buf[k]);
    free(h->dy);
}

/* The grads struct of the 16-bit call: m's float pointers for the side
 * whose type is F32, NULL for the other; grads16 = &h->g. */
static attn_mha_grads mixed_grads(const mgrads *m, const mgrads16 *h, const minst *t)
{
    attn_mha_grads g = m->g;
    if (t->c.xt)
        g.dx = g.dkey = g.dvalue = NULL;
    if (t->c.wt) {
        g.d_in_proj_weight = g.d_in_proj_bias = g.d_q_weight = g.d_k_weight = NULL;
        g.d_v_weight = g.d_q_bias = g.d_k_bias = g.d_v_bias = NULL;
        g.d_out_weight = g.d_out_bias = NULL;
    }
    g.grads16 = &h->g;
    return g;
}

/* Train forward + backward of the 16-bit layer (desc d, threads as in d),
 * accumulate as given.  Y of the training forward is compared with want_y
 * (execute's out16 or out) when not NULL. */
static attn_status train16(minst *t, const attn_mha_desc *d, mgrads *m, mgrads16 *h, int acc,
                           const msnap *want_y, int *y_differs)
{
    attn_mha_grads g = mixed_grads(m, h, t);
    minst_clear(t);
    attn_status s = minst_train_call(t, d, t->c.xt ? NULL : m->dy, &g, acc, NULL, NULL, NULL);
    if (s == ATTN_OK && want_y)
        *y_differs = !msnap_equal_out(want_y, t);
    return s;
}

static double g16_value(const minst *t, int k, const uint16_t *h)
{
    float f;
    attn_dtype_decode((attn_dtype)(grad_of_x(k) ? t->c.xt : t->c.wt), h, &f, 1);
    return (double)f;
}

/* Training at 16-bit types (CK_TYPES rows).  dY is drawn and rounded to
 * x_type; the fp32 training calls run on the widened (rounded) inputs,
 * weights and dY: g32.
 * - Where the types widen (anything but the BF16 products; a BF16-products
 *   row also runs on the BLAS engine, where it widens): every gradient is
 *   bitwise g32 rounded to its type (or g32 itself at F32); with
 *   accumulate = 1 onto random values, bitwise round(old + g32).  Skipped
 *   under MKL as in check_types.
 * - BF16 products: against the float64 reference on the widened values,
 *   within its bound with the roundings of the BF16 products
 *   (mref_mha_backward_typed: Q, K, V, P, O, dO, dS, dQ, dK, dV each
 *   rounded to BF16 on the way, the logits' sensitivity through exp
 *   included) plus the gradient's own rounding, 1.25 u_t |g|~ (|g|~
 *   the reference's magnitude of the element).
 * - Either way: the training forward's Y bitwise execute's, and the
 *   gradients the same bits at 1 and 2 threads (not under
 *   ATTN_TEST_QUICK). */
static double g_train16_ratio, g_train16_maxrel;
static int g_train16_rows, g_train16_bf_rows;

static int check_train16(minst *t)
{
    int fails = 0;
    mgrads m, m32;
    assert_int_equal(mgrads_build(&m, t), 0);
    assert_int_equal(mgrads_build(&m32, t), 0);
    mgrads16 h;
    mg16_build(&h, &m, t);
    if (t->c.xt) { /* dY rounded to x_type: both calls see the same values */
        attn_dtype_encode((attn_dtype)t->c.xt, m.dy, h.dy, (int64_t)m.n_dy);
        attn_dtype_decode((attn_dtype)t->c.xt, h.dy, m.dy, (int64_t)m.n_dy);
        memcpy(m32.dy, m.dy, m.n_dy * sizeof(float));
    }
    static int mkl = -1;
    if (mkl < 0) {
        attn_blas_info info;
        attn_blas_query(&info);
        mkl = !strcmp(info.loaded, "mkl") || !strcmp(info.backend, "mkl");
    }
    const attn_mha_desc d0 = t->d;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the row's engine; pass 1 (BF16 products only): BLAS */
        const int bf = minst_bf16_products(t);
        if (pass == 1 && !bf)
            break;
        if (pass == 1)
            t->d.engine = ATTN_ENGINE_BLAS;
        const int bfp = minst_bf16_products(t);
        attn_engine eng = ATTN_ENGINE_BLAS;
        attn_engine_resolve(t->d.engine, &eng);
        const int bitwise = !bfp && (!mkl || eng == ATTN_ENGINE_TILE);
        /* Y of execute, then of train_forward */
        minst_clear(t);
        assert_int_equal(minst_run(t, 0), ATTN_OK);
        msnap y;
        msnap_take(&y, t);
        int ydiff = 0;
        mgrads_clear(&m);
        mg16_fill(&h, &m);
        attn_status s = train16(t, &t->d, &m, &h, 0, &y, &ydiff);
        /* the fp32 layer on the widened values */
        attn_mha_desc d32 = t->d;
        d32.x_type = d32.w_type = ATTN_DTYPE_F32;
        mgrads_clear(&m32);
        minst tf = *t;
        tf.w = t->wf;
        tf.a = t->af;
        tf.c.xt = tf.c.wt = 0;
        tf.d = d32;
        attn_status s32 = minst_train(&tf, &m32, 0, NULL, NULL, NULL);
        if (s != ATTN_OK || s32 != ATTN_OK || ydiff) {
            printf("FAIL train16: %s, fp32 %s%s: %s\n", attn_status_str(s),
                   attn_status_str(s32), ydiff ? ", Y of train_forward not execute's" : "",
                   mcase_str(&t->c));
            fails++;
            msnap_free(&y);
            break;
        }
        g_train16_rows++;
        g_train16_bf_rows += bfp;
        long bad = 0;
        /* BF16 products: the magnitudes |g|~ of the float64 reference on
         * the widened values (elements indexed r * width + e) */
        mref_grads rg;
        memset(&rg, 0, sizeof rg);
        if (bfp) {
            for (int k = 0; k < MG_COUNT; k++)
                if (m.rows[k]) {
                    const size_t n = (size_t)(m.rows[k] * m.width[k]);
                    rg.g[k] = malloc(n * sizeof(double));
                    rg.tol[k] = malloc(n * sizeof(double));
                    rg.mag[k] = malloc(n * sizeof(double));
                    assert_true(rg.g[k] && rg.tol[k] && rg.mag[k]);
                }
            mref_round rnd;
            minst_round(t, &rnd);
            assert_int_equal(mref_mha_backward_typed(&d32, &t->wf, &t->af, m32.dy, &rg, &rnd),
                             0);
        }
        for (int k = 0; k < MG_COUNT; k++) {
            if (!m.view[k])
                continue;
            const int is16 = grad_of_x(k) ? t->c.xt != 0 : t->c.wt != 0;
            const attn_dtype ty = (attn_dtype)(grad_of_x(k) ? t->c.xt : t->c.wt);
            for (int64_t r = 0; r < m.rows[k]; r++)
                for (int64_t e = 0; e < m.width[k]; e++) {
                    const int64_t at = r * m.ld[k] + e;
                    const float g32 = m32.view[k][at];
                    int ok;
                    double got;
                    if (is16) {
                        uint16_t want;
                        attn_dtype_encode(ty, &g32, &want, 1);
                        got = g16_value(t, k, &h.view[k][at]);
                        ok = !bitwise || want == h.view[k][at];
                    } else {
                        got = (double)m.view[k][at];
                        ok = !bitwise || memcmp(&g32, &m.view[k][at], sizeof g32) == 0;
                    }
                    if (bfp) {
                        /* against float64, the roundings' bound plus the
                         * gradient's own rounding to its type */
                        const int64_t i = r * m.width[k] + e;
                        const double err = fabs(got - rg.g[k][i]);
                        const double mag = rg.mag[k][i];
                        const double tol = rg.tol[k][i] + 1.25 * tdtype_u(ty) * mag;
                        g_train16_ratio = fmax(g_train16_ratio, err / tol);
                        if (mag > 0)
                            g_train16_maxrel = fmax(g_train16_maxrel, err / mag);
                        ok = err <= tol;
                    }
                    if (!ok && bad++ < 4)
                        printf("FAIL train16 %s[%lld]: %.9g, fp32 on the widened values %.9g"
                               "%s: %s\n", mref_grad_name[k], (long long)at, got, (double)g32,
                               bfp ? " (beyond the bound)" : " (not bitwise, rounded)",
                               mcase_str(&t->c));
                }
            /* gaps and tails untouched */
            for (int64_t r = 0; r < m.rows[k] && is16; r++)
                for (int64_t e = m.width[k]; e < m.ld[k]; e++)
                    if (h.view[k][r * m.ld[k] + e] != SENT16 && bad++ < 4)
                        printf("FAIL train16 %s row %lld: gap written: %s\n", mref_grad_name[k],
                               (long long)r, mcase_str(&t->c));
        }
        for (int k = 0; k < MG_COUNT; k++)
            if (h.buf[k] && (grad_of_x(k) ? t->c.xt : t->c.wt) &&
                h.buf[k][m.n[k] - 1] != SENT16 && bad++ < 4)
                printf("FAIL train16 %s: written past the end: %s\n", mref_grad_name[k],
                       mcase_str(&t->c));

        /* threads 1 and 2: the same bits */
        uint16_t *snap16[MG_COUNT];
        mg16_snap(&h, &m, snap16);
        float *snap[MG_COUNT];
        mgrads_snap(&m, snap);
        /* (not under ATTN_TEST_QUICK: memcheck runs the threads one at a
         * time anyway, and the native runs check this) */
        for (int th = 1; th <= 2 && !tquick(); th++) {
            attn_mha_desc dt = t->d;
            dt.threads = th;
            mgrads_clear(&m);
            mg16_fill(&h, &m);
            s = train16(t, &dt, &m, &h, 0, NULL, NULL);
            int same = s == ATTN_OK && mgrads_equal(&m, snap);
            for (int k = 0; k < MG_COUNT && same; k++)
                if (h.buf[k])
                    same = !memcmp(snap16[k], h.buf[k], m.n[k] * sizeof(uint16_t));
            if (!same && bad++ < 4)
                printf("FAIL train16 threads=%d: %s, gradients differ: %s\n", th,
                       attn_status_str(s), mcase_str(&t->c));
        }

        /* accumulate = 1 onto random values (widened rows): round(old + g32) */
        if (bitwise) {
            trng r;
            trng_seed(&r, t->c.seed + 777u);
            for (int k = 0; k < MG_COUNT; k++)
                if (m.view[k])
                    for (int64_t i = 0; i < m.rows[k]; i++)
                        for (int64_t e = 0; e < m.width[k]; e++) {
                            const float v = (float)trng_uniform(&r, -1.0, 1.0);
                            const attn_dtype ty = (attn_dtype)(grad_of_x(k) ? t->c.xt : t->c.wt);
                            m.view[k][i * m.ld[k] + e] = v;
                            if (ty)
                                attn_dtype_encode(ty, &v, &h.view[k][i * m.ld[k] + e], 1);
                        }
            uint16_t *old16[MG_COUNT];
            mg16_snap(&h, &m, old16);
            float *old[MG_COUNT];
            mgrads_snap(&m, old);
            s = train16(t, &t->d, &m, &h, 1, NULL, NULL);
            long abad = s != ATTN_OK;
            for (int k = 0; k < MG_COUNT && s == ATTN_OK; k++) {
                if (!m.view[k])
                    continue;
                const attn_dtype ty = (attn_dtype)(grad_of_x(k) ? t->c.xt : t->c.wt);
                const int owner = m.buf[k] ? k : (k == MG_DWK || k == MG_DWV) ? MG_DWQ : MG_DBQ;
                const ptrdiff_t off = m.view[k] - m.buf[owner];
                for (int64_t i = 0; i < m.rows[k]; i++)
                    for (int64_t e = 0; e < m.width[k]; e++) {
                        const int64_t at = i * m.ld[k] + e;
                        const float g32 = m32.view[k][at];
                        int ok;
                        if (ty) {
                            float o;
                            attn_dtype_decode(ty, &old16[owner][off + at], &o, 1);
                            const float sum = o + g32;
                            uint16_t want;
                            attn_dtype_encode(ty, &sum, &want, 1);
                            ok = want == h.view[k][at];
                        } else {
                            const float want = old[owner][off + at] + g32;
                            ok = !memcmp(&want, &m.view[k][at], sizeof want);
                        }
                        if (!ok)
                            abad++;
                    }
            }
            if (abad) {
                printf("FAIL train16 accumulate = 1: %s, %ld element(s) not round(old + g): %s\n",
                       attn_status_str(s), abad, mcase_str(&t->c));
                bad++;
            }
            for (int k = 0; k < MG_COUNT; k++)
                free(old16[k]);
            mgrads_snap_free(old);
        }
        for (int k = 0; k < MG_COUNT; k++) {
            free(snap16[k]);
            free(rg.g[k]);
            free(rg.tol[k]);
            free(rg.mag[k]);
        }
        mgrads_snap_free(snap);
        msnap_free(&y);
        fails += bad != 0;
    }
    t->d = d0;
    mg16_free(&h);
    mgrads_free(&m);
    mgrads_free(&m32);
    return fails;
}

/* 16-bit rows (CK_TYPES).  Where the types widen (anything but the BF16
 * products; a BF16 row runs again with engine BLAS, where it widens), out
 * and weights are bitwise those of the fp32 layer on the rounded inputs
 * and weights (t->wf, t->af, the same engine and threads), Y rounded to
 * x_type.  The training calls and sizes of a 16-bit plan return
 * ATTN_ERR_UNSUPPORTED_TYPE and write nothing. */
static int check_types(minst *t, const msnap *first, const mrow *row)
{
    (void)first;
    (void)row;
    int fails = 0;
    const attn_engine engine0 = t->d.engine;
    if (minst_bf16_products(t))
        t->d.engine = ATTN_ENGINE_BLAS;
    minst_clear(t);
    attn_status s = minst_run(t, 0);
    /* the fp32 layer into buffers of its own */
    float *y = malloc(t->n_out * sizeof *y);
    float *wts = t->wts ? malloc(t->n_wts * sizeof *wts) : NULL;
    assert_non_null(y);
    for (size_t i = 0; i < t->n_out; i++)
        y[i] = NAN;
    attn_mha_desc d = t->d;
    d.x_type = d.w_type = ATTN_DTYPE_F32;
    attn_mha_args a = t->af;
    a.out = y;
    a.weights = wts;
    attn_mha_plan *plan = NULL;
    attn_status s32 = attn_mha_plan_create(&plan, &d);
    if (s32 == ATTN_OK)
        s32 = attn_mha_execute(plan, &t->wf, &a, NULL, 0);
    attn_mha_plan_destroy(plan);
    long bad = 0;
    if (s != ATTN_OK || s32 != ATTN_OK) {
        printf("FAIL types: %s, fp32 %s: %s\n", attn_status_str(s), attn_status_str(s32),
               mcase_str(&t->c));
        bad++;
    }
    /* With MKL the BLAS engine's sums depend on the operands' alignment and
     * leading dimensions, and the widened copies have others than the fp32
     * buffers: within rounding only (the reference check covers it). */
    static int mkl = -1;
    if (mkl < 0) {
        attn_blas_info info;
        attn_blas_query(&info);
        mkl = !strcmp(info.loaded, "mkl") || !strcmp(info.backend, "mkl");
    }
    attn_engine eng = ATTN_ENGINE_BLAS;
    attn_engine_resolve(t->d.engine, &eng);
    const int bitwise = !mkl || eng == ATTN_ENGINE_TILE;
    const int64_t BL = t->c.B * t->c.L, E = t->c.E;
    for (int64_t r = 0; r < BL && !bad && bitwise; r++)
        for (int64_t e = 0; e < E; e++) {
            const int64_t at = r * t->os + e;
            int same;
            if (t->c.xt) {
                uint16_t want;
                attn_dtype_encode((attn_dtype)t->c.xt, &y[at], &want, 1);
                same = want == t->out16[at];
            } else {
                same = memcmp(&y[at], &t->out[at], sizeof y[at]) == 0;
            }
            if (!same && bad++ < 4)
                printf("FAIL types: Y[%lld] not the fp32 layer's rounded (%.9g): %s\n",
                       (long long)at, (double)y[at], mcase_str(&t->c));
        }
    if (!bad && bitwise && wts && memcmp(wts, t->wts, t->n_wview * sizeof *wts) != 0) {
        printf("FAIL types: weights not the fp32 layer's: %s\n", mcase_str(&t->c));
        bad++;
    }
    fails += bad != 0;
    free(y);
    free(wts);
    t->d.engine = engine0;

    fails += check_train16(t);
    return fails;
}

static void test_types(void **state)
{
    (void)state;
    over_rows(CK_TYPES, check_types, 0);
    printf("[accuracy] training at 16-bit: %d rows (%d with BF16 products): BF16 products' "
           "max err/bound = %.3f, max |g - g32| / |g|~ = %.3e\n",
           g_train16_rows, g_train16_bf_rows, g_train16_ratio, g_train16_maxrel);
}

/* The desc's engine: BLAS and TILE each within the reference's
 * tolerances (the engines agree within rounding only), and bitwise the
 * result of AUTO under ATTN_ENGINE=blas or tile, so the field is what
 * chose the engine (with ATTN_ENGINE set to the other one meanwhile: the
 * desc wins). */
static int check_engines(minst *t, const msnap *first, const mrow *row)
{
    (void)first;
    int fails = 0;
    static const attn_engine eng[] = { ATTN_ENGINE_BLAS, ATTN_ENGINE_TILE };
    static const char *const name[] = { "blas", "tile" };
    const char *env = getenv("ATTN_ENGINE");
    char *saved = env ? strdup(env) : NULL;
    for (int k = 0; k < 2; k++) {
        setenv("ATTN_ENGINE", name[k], 1);
        t->d.engine = ATTN_ENGINE_AUTO;
        minst_clear(t);
        attn_status s = minst_run(t, 0);
        msnap byenv;
        msnap_take(&byenv, t);
        setenv("ATTN_ENGINE", name[1 - k], 1);
        t->d.engine = eng[k];
        minst_clear(t);
        if (s == ATTN_OK)
            s = minst_run(t, 0);
        mstats st;
        mstats_init(&st, row->family);
        if (s != ATTN_OK || minst_check(t, &st) != 0 || !msnap_equal(&byenv, t)) {
            printf("FAIL engine %s: %s, %s: %s\n", name[k], attn_status_str(s),
                   s == ATTN_OK && msnap_equal(&byenv, t) ? "inaccurate"
                                                        : "not the ATTN_ENGINE result",
                   mcase_str(&t->c));
            fails++;
        }
        msnap_free(&byenv);
    }
    if (saved) {
        setenv("ATTN_ENGINE", saved, 1);
        free(saved);
    } else {
        unsetenv("ATTN_ENGINE");
    }
    t->d.engine = ATTN_ENGINE_AUTO;
    return fails;
}

static void test_engines(void **state)
{
    (void)state;
    over_rows(0, check_engines, 0);
}

static void test_thread_invariance(void **state)
{
    (void)state;
    over_rows(0, check_threads, 0);
}

static void test_input_gaps(void **state)
{
    (void)state;
    over_rows(CK_GAPS, check_gaps, 0);
}

static void test_workspace(void **state)
{
    (void)state;
    over_rows(CK_WORKSPACE, check_workspace, 0);
}

static void test_weights_optional(void **state)
{
    (void)state;
    over_rows(CK_WEIGHTS, check_weights, 0);
}

/* ------------------------------------------------------------ error table */

/* The valid calls the error rows mutate. */
enum {
    EB_CROSS,    /* every option: cross, separate weights, GQA, kdim/vdim, both
                    lengths, mask, bias, key padding, per-head weights */
    EB_SELF,     /* self, packed in_proj, the same options, averaged weights */
    EB_PACKED,   /* plain self-attention in each weight layout */
    EB_PACKED_NOBIAS,
    EB_SEPARATE,
    EB_SEPARATE_NOBIAS,
    EB_SPARSE,   /* cross, GQA, global keys and queries, a per-head layout */
    EB_CROSS16,  /* EB_CROSS at BF16 (X and weights) */
    EB_SELF16,   /* EB_SELF at F16 */
    EB_X16,      /* self, packed: X at BF16, weights fp32 */
    EB_W16,      /* self, separate: X fp32, weights at F16 */
    EB_COUNT_
};

MCASE_ROWS_BEGIN
static const mcase err_bases[EB_COUNT_] = {
    [EB_CROSS] = MCASE(CROSS(2, 5, 7, 16, 4), .Hkv = 2, .kdim = 6, .vdim = 9, .use_kv_lens = 1,
                       .kv_lens = { 7, 3 }, .use_q_lens = 1, .q_lens = { 5, 2 },
                       .mask_mode = ATTN_MASK_KEEP_NONZERO, .use_bias = 1, .bias_bcast = BC_HEAD,
                       .kpm_mode = ATTN_MASK_DROP_NONZERO, .weights = ATTN_WEIGHTS_PER_HEAD,
                       .seed = 3000),
    [EB_SELF] = MCASE(SELF(2, 5, 16, 4, 1), .use_kv_lens = 1, .kv_lens = { 5, 3 },
                      .use_q_lens = 1, .q_lens = { 5, 4 }, .mask_mode = ATTN_MASK_DROP_NONZERO,
                      .mask_bcast = BC_BATCH, .use_bias = 1, .kpm_mode = ATTN_MASK_KEEP_NONZERO,
                      .weights = ATTN_WEIGHTS_AVERAGED, .seed = 3001),
    [EB_PACKED] = MCASE(SELF(2, 4, 8, 2, 1)),
    [EB_PACKED_NOBIAS] = MCASE(SELF(2, 4, 8, 2, 1), .has_bias = 0),
    [EB_SEPARATE] = MCASE(SELF(2, 4, 8, 2, 0)),
    [EB_SEPARATE_NOBIAS] = MCASE(SELF(2, 4, 8, 2, 0), .has_bias = 0),
    [EB_SPARSE] = MCASE(CROSS(2, 20, 37, 16, 4), .Hkv = 2, .use_gk = 1, .use_gq = 1, .bs = 16,
                        .lay_per_head = 1, .wl = 3, .wr = 3, .seed = 3002),
    [EB_CROSS16] = MCASE(CROSS(2, 5, 7, 16, 4), .Hkv = 2, .kdim = 6, .vdim = 9, .use_kv_lens = 1,
                         .kv_lens = { 7, 3 }, .use_q_lens = 1, .q_lens = { 5, 2 },
                         .mask_mode = ATTN_MASK_KEEP_NONZERO, .use_bias = 1,
                         .bias_bcast = BC_HEAD, .kpm_mode = ATTN_MASK_DROP_NONZERO,
                         .weights = ATTN_WEIGHTS_PER_HEAD, .seed = 3000,
                         .xt = ATTN_DTYPE_BF16, .wt = ATTN_DTYPE_BF16),
    [EB_SELF16] = MCASE(SELF(2, 5, 16, 4, 1), .use_kv_lens = 1, .kv_lens = { 5, 3 },
                        .use_q_lens = 1, .q_lens = { 5, 4 }, .mask_mode = ATTN_MASK_DROP_NONZERO,
                        .mask_bcast = BC_BATCH, .use_bias = 1,
                        .kpm_mode = ATTN_MASK_KEEP_NONZERO, .weights = ATTN_WEIGHTS_AVERAGED,
                        .seed = 3001, .xt = ATTN_DTYPE_F16, .wt = ATTN_DTYPE_F16),
    [EB_X16] = MCASE(SELF(2, 4, 8, 2, 1), .xt = ATTN_DTYPE_BF16),
    [EB_W16] = MCASE(SELF(2, 4, 8, 2, 0), .wt = ATTN_DTYPE_F16),
};
MCASE_ROWS_END

/* What a row does to the valid call before plan_create or execute. */
enum {
    M_END = 0,
    M_D64,        /* *(int64_t *)((char *)&desc + off) = v */
    M_DINT,       /* *(int *)((char *)&desc + off) = v (flags, enums, threads) */
    M_SCALE,      /* desc.scale = f */
    M_WEIGHT,     /* *(const float **)((char *)&weights + off) = v ? dummy : NULL */
    M_ARG,        /* *(const void **)((char *)&args + off) = v ? dummy : NULL */
    M_KV_LEN,     /* args.kv_lens[off] = v (a copy of the base lengths) */
    M_Q_LEN,      /* args.q_lens[off] = v */
    M_WS_AT,      /* caller workspace at byte offset v, size + 64 bytes */
    M_WS_SHORT,   /* caller workspace of size - v bytes */
    M_WS_BYTES,   /* caller workspace of v bytes */
    M_NULL,       /* v: which pointer of the call itself is NULL (N_*) */
    M_DROP,       /* desc.dropout_p = f */
    M_WEIGHT16,   /* *(const void **)((char *)&weights16 + off) = v ? dummy : NULL */
    M_ARG16,      /* *(const void **)((char *)&args16 + off) = v ? dummy : NULL */
    M_W16,        /* weights.weights16 = v ? &weights16 (the base's, zero in fp32) : NULL */
    M_A16,        /* args.args16 = v ? &args16 : NULL */
};
enum { N_PLAN_OUT = 1, N_DESC, N_PLAN, N_WEIGHTS, N_ARGS };

typedef struct emut {
    int kind;
    size_t off;
    int64_t v;
    double f;
} emut;

/* The call checked: plan_create (AT_PLAN: must return want and leave *plan
 * alone on failure) or execute with a plan of the mutated desc (AT_EXEC:
 * must return want and, on failure, leave out and weights untouched). */
enum { AT_PLAN, AT_EXEC };

#define EMUTS 8
typedef struct erow {
    char what[96];
    int base, at;
    attn_status want;
    emut m[EMUTS];
} erow;

#define D64(f, v) { M_D64, offsetof(attn_mha_desc, f), (int64_t)(v), 0.0 }
#define DINT(f, v) { M_DINT, offsetof(attn_mha_desc, f), (int64_t)(v), 0.0 }
#define SCALE(x) { M_SCALE, 0, 0, (double)(x) }
#define DROPP(x) { M_DROP, 0, 0, (double)(x) }
#define WEIGHT(f, v) { M_WEIGHT, offsetof(attn_mha_weights, f), (v), 0.0 }
#define ARG(f, v) { M_ARG, offsetof(attn_mha_args, f), (v), 0.0 }
#define MNULL(which) { M_NULL, 0, (which), 0.0 }
#define WEIGHT16(f, v) { M_WEIGHT16, offsetof(attn_mha_weights16, f), (v), 0.0 }
#define ARG16(f, v) { M_ARG16, offsetof(attn_mha_args16, f), (v), 0.0 }
#define W16(v) { M_W16, 0, (v), 0.0 }
#define A16(v) { M_A16, 0, (v), 0.0 }
#define BIG ((int64_t)INT32_MAX + 1)

_Static_assert(sizeof(attn_align) == sizeof(int) && sizeof(attn_mask_mode) == sizeof(int) &&
                   sizeof(attn_weights_mode) == sizeof(int) && sizeof(attn_engine) == sizeof(int),
               "enums of attn_mha_desc are written as int");

/* The rows written out; the cross products are added by err_table. */
static const erow err_rows[] = {
    /* NULL pointers of the calls */
    { "plan_create(NULL, desc)", EB_CROSS, AT_PLAN, ATTN_ERR_NULL_ARGUMENT, { MNULL(N_PLAN_OUT) } },
    { "plan_create(&plan, NULL)", EB_CROSS, AT_PLAN, ATTN_ERR_NULL_ARGUMENT, { MNULL(N_DESC) } },
    { "plan_create(NULL, desc)", EB_SELF, AT_PLAN, ATTN_ERR_NULL_ARGUMENT, { MNULL(N_PLAN_OUT) } },
    { "plan_create(&plan, NULL)", EB_SELF, AT_PLAN, ATTN_ERR_NULL_ARGUMENT, { MNULL(N_DESC) } },
    /* sizes */
    { "E = 16, H = 3", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_SIZE, { D64(num_kv_heads, 0), D64(num_heads, 3) } },
    { "E = 16, H = 32", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_SIZE, { D64(num_kv_heads, 0), D64(num_heads, 32) } },
    { "E = 16, H = 6, Hkv = 3", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_SIZE, { D64(num_heads, 6), D64(num_kv_heads, 3) } },
    { "control: E = H = 16 (dh = 1)", EB_CROSS, AT_PLAN, ATTN_OK, { D64(num_heads, 16), D64(num_kv_heads, 0) } },
    { "self-attention with S = L + 1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_SIZE, { D64(kv_len, 6) } },
    { "self-attention with S = L - 1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_SIZE, { D64(kv_len, 4) } },
    { "H = 4, Hkv = 3", EB_CROSS, AT_PLAN, ATTN_ERR_HEAD_RATIO, { D64(num_kv_heads, 3) } },
    { "H = 4, Hkv = 8", EB_CROSS, AT_PLAN, ATTN_ERR_HEAD_RATIO, { D64(num_kv_heads, 8) } },
    { "H = 8, Hkv = 3", EB_CROSS, AT_PLAN, ATTN_ERR_HEAD_RATIO, { D64(num_heads, 8), D64(num_kv_heads, 3) } },
    { "control: H = 8, Hkv = 4", EB_CROSS, AT_PLAN, ATTN_OK, { D64(num_heads, 8), D64(num_kv_heads, 4) } },
    { "control: H = 8, Hkv = 1 (MQA)", EB_CROSS, AT_PLAN, ATTN_OK, { D64(num_heads, 8), D64(num_kv_heads, 1) } },
    { "embed_dim = 2^31", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(embed_dim, BIG), D64(num_heads, 1), D64(num_kv_heads, 0) } },
    { "q_len = 2^31", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE, { D64(q_len, BIG) } },
    { "kv_len = 2^31", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE, { D64(kv_len, BIG) } },
    { "kdim = 2^31", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE, { D64(kdim, BIG) } },
    { "x_stride = 2^31", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE, { D64(x_stride, BIG) } },
    { "B * L * E overflows", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(batch, (int64_t)1 << 40), D64(q_len, (int64_t)1 << 22), D64(kv_len, 8) } },
    { "B * L overflows", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(batch, (int64_t)1 << 40), D64(q_len, (int64_t)1 << 30) } },
    { "B * L * S * H averaged weights overflow", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(batch, 1), D64(q_len, INT32_MAX), D64(kv_len, INT32_MAX),
        DINT(weights, ATTN_WEIGHTS_AVERAGED) } },
    { "B * L * S averaged weights, bytes overflow (H = 1)", EB_CROSS, AT_PLAN,
      ATTN_ERR_TOO_LARGE, { D64(batch, 1), D64(q_len, INT32_MAX), D64(kv_len, INT32_MAX),
                            D64(num_heads, 1), D64(num_kv_heads, 0),
                            DINT(weights, ATTN_WEIGHTS_AVERAGED) } },
    /* found by the fuzzer: B * L past 2^63 reached row_stride() as a
     * negative count; H * L * S of per-head weights overflowed in the
     * probabilities view before any size check */
    { "B * L >= 2^63 (B = 2^62, L = 2)", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(batch, (int64_t)1 << 62), D64(q_len, 2), D64(kv_len, 2) } },
    { "per-head weights, H * L * S overflows (B = 1)", EB_CROSS, AT_PLAN, ATTN_ERR_TOO_LARGE,
      { D64(batch, 1), D64(q_len, INT32_MAX), D64(kv_len, INT32_MAX),
        DINT(weights, ATTN_WEIGHTS_PER_HEAD) } },
    { "workspace total overflows (weights and combined mask)", EB_CROSS, AT_PLAN,
      ATTN_ERR_TOO_LARGE, { D64(batch, 1), D64(q_len, INT32_MAX), D64(kv_len, 1932735283),
                            D64(num_heads, 1), D64(num_kv_heads, 0),
                            DINT(weights, ATTN_WEIGHTS_AVERAGED) } },
    /* packed in_proj needs kdim == vdim == E and Hkv == H */
    { "control: packed cross, kdim = vdim = E", EB_CROSS, AT_PLAN, ATTN_OK,
      { DINT(packed_in_proj, 1), D64(kdim, 0), D64(vdim, 0), D64(num_kv_heads, 0) } },
    { "control: packed cross, kdim, vdim, Hkv given", EB_CROSS, AT_PLAN, ATTN_OK,
      { DINT(packed_in_proj, 1), D64(kdim, 16), D64(vdim, 16), D64(num_kv_heads, 4) } },
    { "packed with kdim != E", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(packed_in_proj, 1), D64(kdim, 6), D64(vdim, 16), D64(num_kv_heads, 4) } },
    { "packed with vdim != E", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(packed_in_proj, 1), D64(kdim, 0), D64(vdim, 9), D64(num_kv_heads, 4) } },
    { "packed with GQA (Hkv = 2)", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(packed_in_proj, 1), D64(kdim, 0), D64(vdim, 0), D64(num_kv_heads, 2) } },
    { "packed self with MQA (Hkv = 1)", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { D64(num_kv_heads, 1) } },
    /* self-attention projects keys and values from X: kdim, vdim must be E */
    { "control: self, kdim = vdim = E given", EB_SELF, AT_PLAN, ATTN_OK,
      { DINT(packed_in_proj, 0), D64(kdim, 16), D64(vdim, 16) } },
    { "self with kdim != E", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(packed_in_proj, 0), D64(kdim, 6), D64(vdim, 16) } },
    { "self with vdim != E", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(packed_in_proj, 0), D64(kdim, 0), D64(vdim, 6) } },
    { "self: key_stride and value_stride ignored", EB_SELF, AT_PLAN, ATTN_OK,
      { D64(key_stride, -1), D64(value_stride, 1) } },
    /* scale and threads */
    { "scale = +inf", EB_SELF, AT_PLAN, ATTN_ERR_BAD_SCALE, { SCALE(INFINITY) } },
    { "scale = -inf", EB_SELF, AT_PLAN, ATTN_ERR_BAD_SCALE, { SCALE(-INFINITY) } },
    { "control: scale NaN", EB_SELF, AT_PLAN, ATTN_OK, { SCALE(NAN) } },
    { "control: scale 0", EB_SELF, AT_PLAN, ATTN_OK, { SCALE(0.0) } },
    { "control: scale -1", EB_SELF, AT_PLAN, ATTN_OK, { SCALE(-1.0) } },
    { "control: scale FLT_MAX", EB_SELF, AT_PLAN, ATTN_OK, { SCALE(FLT_MAX) } },
    { "control: scale 1e-40 (subnormal)", EB_SELF, AT_PLAN, ATTN_OK, { SCALE(1e-40) } },
    { "threads = -1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_THREADS, { DINT(threads, -1) } },
    { "threads = INT_MIN", EB_SELF, AT_PLAN, ATTN_ERR_BAD_THREADS, { DINT(threads, INT_MIN) } },
    { "threads = 1025", EB_SELF, AT_PLAN, ATTN_ERR_BAD_THREADS, { DINT(threads, 1025) } },
    { "threads = INT_MAX", EB_SELF, AT_PLAN, ATTN_ERR_BAD_THREADS, { DINT(threads, INT_MAX) } },
    { "control: threads = 0", EB_SELF, AT_PLAN, ATTN_OK, { DINT(threads, 0) } },
    { "control: threads = 1024", EB_SELF, AT_PLAN, ATTN_OK, { DINT(threads, 1024) } },
    /* dropout_p in [0, 1] */
    { "dropout_p = -0.1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(-0.1) } },
    { "dropout_p = -0.1", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(-0.1) } },
    { "dropout_p = 1.5", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(1.5) } },
    { "dropout_p = 1.5", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(1.5) } },
    { "dropout_p = NaN", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(NAN) } },
    { "dropout_p = NaN", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(NAN) } },
    { "dropout_p = -inf", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(-INFINITY) } },
    { "dropout_p = +inf", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(INFINITY) } },
    { "dropout_p = 1 + 2^-52", EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, { DROPP(1.0 + DBL_EPSILON) } },
    { "control: dropout_p = 0", EB_SELF, AT_PLAN, ATTN_OK, { DROPP(0.0) } },
    { "control: dropout_p = -0.0", EB_SELF, AT_PLAN, ATTN_OK, { DROPP(-0.0) } },
    { "control: dropout_p = 0.5", EB_CROSS, AT_EXEC, ATTN_OK, { DROPP(0.5) } },
    { "control: dropout_p = 1", EB_SELF, AT_EXEC, ATTN_OK, { DROPP(1.0) } },
    { "control: dropout_p = 0.1, seed and offset", EB_CROSS, AT_EXEC, ATTN_OK,
      { DROPP(0.1), D64(dropout_seed, -1), D64(dropout_offset, INT64_MIN) } },
    /* strides */
    { "self: x_stride = -1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_STRIDE, { D64(x_stride, -1) } },
    { "self: x_stride = E - 1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_STRIDE, { D64(x_stride, 15) } },
    { "self: out_stride = E - 1", EB_SELF, AT_PLAN, ATTN_ERR_BAD_STRIDE, { D64(out_stride, 15) } },
    { "control: unused mask and bias unset", EB_CROSS, AT_PLAN, ATTN_OK,
      { DINT(mask_mode, ATTN_MASK_NONE), DINT(use_bias, 0), D64(mask.batch, ATTN_STRIDE_UNSET),
        D64(mask.head, ATTN_STRIDE_UNSET), D64(mask.seq, ATTN_STRIDE_UNSET),
        D64(bias.batch, ATTN_STRIDE_UNSET), D64(bias.head, ATTN_STRIDE_UNSET),
        D64(bias.seq, ATTN_STRIDE_UNSET) } },
    /* sparse attention: the options (checked by the SDPA plan, whose
     * statuses the layer returns), the pointers */
    { "control: sparse base", EB_SPARSE, AT_EXEC, ATTN_OK, { { 0 } } },
    { "block_size = 8", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { D64(block_size, 8) } },
    { "block_size = 24", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { D64(block_size, 24) } },
    { "block_size = 512", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { D64(block_size, 512) } },
    { "block_size = -16", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { D64(block_size, -16) } },
    { "block_size = INT64_MIN", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { D64(block_size, INT64_MIN) } },
    { "control: block_size = 256", EB_SPARSE, AT_PLAN, ATTN_OK, { D64(block_size, 256) } },
    { "layout_per_head = 2", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { DINT(layout_per_head, 2) } },
    { "layout_per_head = -1", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(layout_per_head, -1) } },
    { "layout_per_head = 1 without a layout", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { D64(block_size, 0) } },
    { "reserved_flags = 1", EB_SPARSE, AT_PLAN, ATTN_ERR_BAD_OPTION, { DINT(reserved_flags, 1) } },
    { "reserved_flags = 1 (dense)", EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION,
      { DINT(reserved_flags, 1) } },
    { "args.global_k = NULL", EB_SPARSE, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { ARG(global_k, 0) } },
    { "args.global_q = NULL", EB_SPARSE, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { ARG(global_q, 0) } },
    { "args.layout = NULL", EB_SPARSE, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { ARG(layout, 0) } },
    { "args.global_k given, use_global_k = 0", EB_SPARSE, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { DINT(use_global_k, 0) } },
    { "args.global_q given, use_global_q = 0", EB_SPARSE, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { DINT(use_global_q, 0) } },
    { "args.layout given, no layout", EB_SPARSE, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { D64(block_size, 0), DINT(layout_per_head, 0) } },
    { "control: no global keys, args.global_k NULL", EB_SPARSE, AT_EXEC, ATTN_OK,
      { DINT(use_global_k, 0), ARG(global_k, 0) } },
    { "control: no layout, args.layout NULL", EB_SPARSE, AT_EXEC, ATTN_OK,
      { D64(block_size, 0), DINT(layout_per_head, 0), ARG(layout, 0) } },
    { "args.global_k given to a dense plan", EB_CROSS, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { ARG(global_k, 1) } },
    { "args.layout given to a dense plan", EB_SELF, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { ARG(layout, 1) } },
    { "sparse: kv_lens given, not used", EB_SPARSE, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { ARG(kv_lens, 1) } },
    /* self-attention given key or value */
    { "self-attention given args.key", EB_SELF, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, { ARG(key, 1) } },
    { "self-attention given args.value", EB_SELF, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, { ARG(value, 1) } },
    /* element types: the 16-bit structs, their tails and the order of
     * the checks (reserved tails of weights and args, then weights16 and
     * args16, then their tails, then the pointers) */
    { "control: BF16 cross base", EB_CROSS16, AT_EXEC, ATTN_OK, { { 0 } } },
    { "control: F16 self base", EB_SELF16, AT_EXEC, ATTN_OK, { { 0 } } },
    { "control: X BF16, weights fp32", EB_X16, AT_EXEC, ATTN_OK, { { 0 } } },
    { "control: X fp32, weights F16", EB_W16, AT_EXEC, ATTN_OK, { { 0 } } },
    { "BF16: weights.weights16 = NULL", EB_CROSS16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { W16(0) } },
    { "BF16: args.args16 = NULL", EB_CROSS16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { A16(0) } },
    { "F16: weights.weights16 = NULL", EB_SELF16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { W16(0) } },
    { "F16: args.args16 = NULL", EB_SELF16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { A16(0) } },
    { "X BF16: args.args16 = NULL", EB_X16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { A16(0) } },
    { "X BF16: weights.weights16 given (w_type F32)", EB_X16, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { W16(1) } },
    { "weights F16: weights.weights16 = NULL", EB_W16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, { W16(0) } },
    { "weights F16: args.args16 given (x_type F32)", EB_W16, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { A16(1) } },
    { "fp32: weights.weights16 given", EB_CROSS, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, { W16(1) } },
    { "fp32: args.args16 given", EB_SELF, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, { A16(1) } },
    { "self F16: args16.key given", EB_SELF16, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, { ARG16(key, 1) } },
    { "self F16: args16.value given", EB_SELF16, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { ARG16(value, 1) } },
    { "weights.reserved[0] given", EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_OPTION, { WEIGHT(reserved[0], 1) } },
    { "weights.reserved[6] given", EB_SELF16, AT_EXEC, ATTN_ERR_BAD_OPTION, { WEIGHT(reserved[6], 1) } },
    { "args.reserved[0] given", EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_OPTION, { ARG(reserved[0], 1) } },
    { "args.reserved[6] given", EB_SELF, AT_EXEC, ATTN_ERR_BAD_OPTION, { ARG(reserved[6], 1) } },
    { "weights16.reserved[0] given", EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_OPTION,
      { WEIGHT16(reserved[0], 1) } },
    { "weights16.reserved[7] given", EB_W16, AT_EXEC, ATTN_ERR_BAD_OPTION,
      { WEIGHT16(reserved[7], 1) } },
    { "args16.reserved[0] given", EB_SELF16, AT_EXEC, ATTN_ERR_BAD_OPTION, { ARG16(reserved[0], 1) } },
    { "args16.reserved[7] given", EB_X16, AT_EXEC, ATTN_ERR_BAD_OPTION, { ARG16(reserved[7], 1) } },
    { "order: args.reserved[6] before args16 NULL", EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_OPTION,
      { ARG(reserved[6], 1), A16(0) } },
    { "order: args16 NULL before weights16's tail", EB_CROSS16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT,
      { WEIGHT16(reserved[3], 1), A16(0) } },
    { "order: weights16's tail before its pointers", EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_OPTION,
      { WEIGHT16(reserved[3], 1), WEIGHT16(q_weight, 0) } },
    { "order: weights16 given to fp32 weights before args's pointers", EB_X16, AT_EXEC,
      ATTN_ERR_ARGUMENT_MISMATCH, { W16(1), ARG16(x, 0) } },
    { "order: a weight before X", EB_CROSS16, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
      { WEIGHT(out_weight, 1), ARG16(x, 0) } },
    { "order: X before the lengths", EB_SELF16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT,
      { ARG16(x, 0), ARG(kv_lens, 0) } },
    /* workspace */
    { "workspace one byte short", EB_CROSS, AT_EXEC, ATTN_ERR_WORKSPACE_TOO_SMALL, { { M_WS_SHORT, 0, 1, 0 } } },
    { "workspace one byte short", EB_SELF, AT_EXEC, ATTN_ERR_WORKSPACE_TOO_SMALL, { { M_WS_SHORT, 0, 1, 0 } } },
    { "control: workspace of exactly the size", EB_CROSS, AT_EXEC, ATTN_OK, { { M_WS_SHORT, 0, 0, 0 } } },
    { "control: workspace of exactly the size", EB_SELF, AT_EXEC, ATTN_OK, { { M_WS_SHORT, 0, 0, 0 } } },
};

/* ------------------------------------------------- error rows, generated */

typedef struct erows {
    erow *v;
    size_t n, cap;
} erows;

static erow *eadd(erows *rs, int base, int at, attn_status want, const char *fmt, ...)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 256;
        rs->v = realloc(rs->v, rs->cap * sizeof *rs->v);
        assert_non_null(rs->v);
    }
    erow *r = &rs->v[rs->n++];
    memset(r, 0, sizeof *r);
    r->base = base;
    r->at = at;
    r->want = want;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    return r;
}

static void emut_add(erow *r, int kind, size_t off, int64_t v)
{
    for (int i = 0; i < EMUTS; i++)
        if (r->m[i].kind == M_END) {
            r->m[i].kind = kind;
            r->m[i].off = off;
            r->m[i].v = v;
            return;
        }
    fail_msg("too many mutations in error row %s", r->what);
}

/* The error table: err_rows and the cross products of fields and values,
 * over the built bases b (to know which pointers a layout uses). */
static void err_table(erows *rs, const minst *b)
{
    for (size_t i = 0; i < sizeof err_rows / sizeof err_rows[0]; i++)
        *eadd(rs, 0, 0, ATTN_OK, "%s", "") = err_rows[i];

    /* sizes: zero or negative, then sizes where 0 means a default */
    static const struct { const char *name; size_t off; int zero_ok; } sz[] = {
        { "embed_dim", offsetof(attn_mha_desc, embed_dim), 0 },
        { "num_heads", offsetof(attn_mha_desc, num_heads), 0 },
        { "batch", offsetof(attn_mha_desc, batch), 0 },
        { "q_len", offsetof(attn_mha_desc, q_len), 0 },
        { "kv_len", offsetof(attn_mha_desc, kv_len), 0 },
        { "num_kv_heads", offsetof(attn_mha_desc, num_kv_heads), 1 },
        { "kdim", offsetof(attn_mha_desc, kdim), 1 },
        { "vdim", offsetof(attn_mha_desc, vdim), 1 },
    };
    static const int64_t bad[] = { 0, -1, INT64_MIN };
    eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: cross base");
    eadd(rs, EB_SELF, AT_PLAN, ATTN_OK, "control: self base");
    for (size_t f = 0; f < sizeof sz / sizeof sz[0]; f++)
        for (int k = sz[f].zero_ok; k < 3; k++)
            emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_ERR_BAD_SIZE, "%s = %lld", sz[f].name,
                          (long long)bad[k]),
                     M_D64, sz[f].off, bad[k]);

    /* enums and reserved fields */
    static const struct { const char *name; size_t off; } en[] = {
        { "align", offsetof(attn_mha_desc, align) },
        { "mask_mode", offsetof(attn_mha_desc, mask_mode) },
        { "key_padding_mode", offsetof(attn_mha_desc, key_padding_mode) },
        { "weights", offsetof(attn_mha_desc, weights) },
        { "engine", offsetof(attn_mha_desc, engine) },
        { "x_type", offsetof(attn_mha_desc, x_type) },
        { "w_type", offsetof(attn_mha_desc, w_type) },
    };
    static const int badenum[] = { 3, -1, 1000 };
    emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: engine BLAS"), M_DINT,
             offsetof(attn_mha_desc, engine), ATTN_ENGINE_BLAS);
    emut_add(eadd(rs, EB_SELF, AT_PLAN, ATTN_OK, "control: engine TILE"), M_DINT,
             offsetof(attn_mha_desc, engine), ATTN_ENGINE_TILE);
    for (int k = ATTN_DTYPE_F16; k <= ATTN_DTYPE_BF16; k++) {
        emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: x_type = %d", k), M_DINT,
                 offsetof(attn_mha_desc, x_type), k);
        emut_add(eadd(rs, EB_SPARSE, AT_PLAN, ATTN_OK, "control: sparse, w_type = %d", k),
                 M_DINT, offsetof(attn_mha_desc, w_type), k);
    }
    emut_add(eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, "reserved_pad = 1"), M_DINT,
             offsetof(attn_mha_desc, reserved_pad), 1);
    for (size_t f = 0; f < sizeof en / sizeof en[0]; f++)
        for (int k = 0; k < 3; k++) {
            /* align's first unknown value is 2; the element types' 5 (3 and
             * 4 are the quantized K/V types since 1.2: below) */
            const int is_type = en[f].off == offsetof(attn_mha_desc, x_type) ||
                                en[f].off == offsetof(attn_mha_desc, w_type);
            const int v = badenum[k] != 3 ? badenum[k] : f == 0 ? 2 : is_type ? 5 : 3;
            emut_add(eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, "%s = %d", en[f].name, v),
                     M_DINT, en[f].off, v);
        }
    /* The quantized K/V types (1.2) are the SDPA forward's only: as x_type
     * or w_type ATTN_ERR_UNSUPPORTED_TYPE (with the other type any known
     * one), an unknown value beside them still ATTN_ERR_BAD_OPTION. */
    for (int k = ATTN_DTYPE_Q8_0; k <= ATTN_DTYPE_Q4_0; k++) {
        const char *tn = k == ATTN_DTYPE_Q8_0 ? "Q8_0" : "Q4_0";
        emut_add(eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_UNSUPPORTED_TYPE, "x_type %s", tn), M_DINT,
                 offsetof(attn_mha_desc, x_type), k);
        emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_ERR_UNSUPPORTED_TYPE, "w_type %s", tn), M_DINT,
                 offsetof(attn_mha_desc, w_type), k);
        emut_add(eadd(rs, EB_SPARSE, AT_PLAN, ATTN_ERR_UNSUPPORTED_TYPE, "sparse: x_type %s", tn),
                 M_DINT, offsetof(attn_mha_desc, x_type), k);
        erow *r = eadd(rs, EB_CROSS16, AT_PLAN, ATTN_ERR_UNSUPPORTED_TYPE,
                       "BF16 X, w_type %s", tn);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, w_type), k);
        r = eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_UNSUPPORTED_TYPE, "x_type and w_type %s", tn);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, x_type), k);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, w_type), k);
        r = eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, "x_type %s, w_type 99 (the unknown value wins)", tn);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, x_type), k);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, w_type), 99);
        r = eadd(rs, EB_CROSS, AT_PLAN, ATTN_ERR_BAD_OPTION, "x_type -1, w_type %s (the unknown value wins)", tn);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, x_type), -1);
        emut_add(r, M_DINT, offsetof(attn_mha_desc, w_type), k);
    }
    /* (reserved[8] since 1.1: x_type and w_type took slot 0 of 9) */
    const int nres = (int)(sizeof ((attn_mha_desc *)0)->reserved / sizeof(int64_t));
    for (int k = 0; k < nres; k = k + 3 < nres || k == nres - 1 ? k + 3 : nres - 1)
        emut_add(eadd(rs, EB_SELF, AT_PLAN, ATTN_ERR_BAD_OPTION, "reserved[%d] != 0", k), M_D64,
                 offsetof(attn_mha_desc, reserved) + (size_t)k * sizeof(int64_t),
                 k == nres - 1 ? INT64_MIN : 1);

    /* row strides */
    static const struct { const char *name; size_t off; } st[] = {
        { "x_stride", offsetof(attn_mha_desc, x_stride) },
        { "key_stride", offsetof(attn_mha_desc, key_stride) },
        { "value_stride", offsetof(attn_mha_desc, value_stride) },
        { "out_stride", offsetof(attn_mha_desc, out_stride) },
    };
    const minst *cr = &b[EB_CROSS];
    const int64_t rowlen[] = { cr->c.E, cr->kdim, cr->vdim, cr->c.E };
    for (int f = 0; f < 4; f++) {
        const int64_t vals[] = { -1, INT64_MIN, rowlen[f] - 1, 1 };
        for (int k = 0; k < 4; k++)
            emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_ERR_BAD_STRIDE, "%s = %lld (row %lld)",
                          st[f].name, (long long)vals[k], (long long)rowlen[f]),
                     M_D64, st[f].off, vals[k]);
        emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: %s = row", st[f].name), M_D64,
                 st[f].off, rowlen[f]);
        emut_add(eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: %s > row", st[f].name), M_D64,
                 st[f].off, rowlen[f] + 100);
    }
    /* mask and bias strides by SDPA's rules, alone and with key padding
     * (the combined path checks the user's mask strides itself) */
    static const struct { const char *name; size_t off[3]; int64_t v; attn_status want; } vs[] = {
        { "mask.batch = -1", { offsetof(attn_mha_desc, mask.batch) }, -1, ATTN_ERR_BAD_STRIDE },
        { "mask.seq = -5", { offsetof(attn_mha_desc, mask.seq) }, -5, ATTN_ERR_BAD_STRIDE },
        { "mask strides unset", { offsetof(attn_mha_desc, mask.batch),
            offsetof(attn_mha_desc, mask.head), offsetof(attn_mha_desc, mask.seq) },
          ATTN_STRIDE_UNSET, ATTN_ERR_STRIDES_UNSET },
        { "mask.head unset", { offsetof(attn_mha_desc, mask.head) }, ATTN_STRIDE_UNSET,
          ATTN_ERR_STRIDES_UNSET },
        { "bias.head = -1", { offsetof(attn_mha_desc, bias.head) }, -1, ATTN_ERR_BAD_STRIDE },
        { "bias strides unset", { offsetof(attn_mha_desc, bias.batch),
            offsetof(attn_mha_desc, bias.head), offsetof(attn_mha_desc, bias.seq) },
          ATTN_STRIDE_UNSET, ATTN_ERR_STRIDES_UNSET },
    };
    for (int kp = 0; kp < 2; kp++) {
        const char *tag = kp ? "with key padding" : "alone";
        erow *r = eadd(rs, EB_CROSS, AT_PLAN, ATTN_OK, "control: mask strides (%s)", tag);
        if (!kp)
            emut_add(r, M_DINT, offsetof(attn_mha_desc, key_padding_mode), ATTN_MASK_NONE);
        for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
            r = eadd(rs, EB_CROSS, AT_PLAN, vs[i].want, "%s (%s)", vs[i].name, tag);
            if (!kp)
                emut_add(r, M_DINT, offsetof(attn_mha_desc, key_padding_mode), ATTN_MASK_NONE);
            for (int j = 0; j < 3 && (j == 0 || vs[i].off[j]); j++)
                emut_add(r, M_D64, vs[i].off[j], vs[i].v);
        }
    }

#define WF(f) { #f, offsetof(attn_mha_weights, f) }
#define AF(f) { #f, offsetof(attn_mha_args, f) }
    static const struct { const char *name; size_t off; } wf[] = {
        WF(in_proj_weight), WF(in_proj_bias), WF(q_weight), WF(k_weight), WF(v_weight),
        WF(q_bias), WF(k_bias), WF(v_bias), WF(out_weight), WF(out_bias),
    }, af[] = {
        AF(x), AF(key), AF(value), AF(out), AF(kv_lens), AF(q_lens), AF(mask), AF(bias),
        AF(key_padding_mask), AF(weights),
    };
#undef WF
#undef AF
    for (int base = EB_CROSS; base <= EB_SELF; base++) {
        const minst *t = &b[base];
        const char *bn = base == EB_SELF ? "self" : "cross";
        /* NULL pointers: the call's, every weight and buffer the plan uses */
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, "%s: NULL plan", bn), M_NULL,
                 0, N_PLAN);
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, "%s: NULL weights", bn),
                 M_NULL, 0, N_WEIGHTS);
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, "%s: NULL args", bn), M_NULL,
                 0, N_ARGS);
        for (size_t k = 0; k < sizeof wf / sizeof wf[0]; k++)
            if (*(const float *const *)((const char *)&t->w + wf[k].off))
                emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_NULL_ARGUMENT,
                              "%s: weights.%s = NULL", bn, wf[k].name),
                         M_WEIGHT, wf[k].off, 0);
        for (size_t k = 0; k < sizeof af / sizeof af[0]; k++)
            if (*(const void *const *)((const char *)&t->a + af[k].off))
                emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, "%s: args.%s = NULL",
                              bn, af[k].name),
                         M_ARG, af[k].off, 0);
        eadd(rs, base, AT_EXEC, ATTN_OK, "control: %s: complete args", bn);

        /* a plan without feature f, given the pointer of f */
        static const struct { const char *name; int kind; size_t off; int64_t v; size_t aoff; } feat[] = {
            { "kv_lens", M_DINT, offsetof(attn_mha_desc, use_kv_lens), 0, offsetof(attn_mha_args, kv_lens) },
            { "q_lens", M_DINT, offsetof(attn_mha_desc, use_q_lens), 0, offsetof(attn_mha_args, q_lens) },
            { "mask", M_DINT, offsetof(attn_mha_desc, mask_mode), ATTN_MASK_NONE, offsetof(attn_mha_args, mask) },
            { "bias", M_DINT, offsetof(attn_mha_desc, use_bias), 0, offsetof(attn_mha_args, bias) },
            { "key_padding_mask", M_DINT, offsetof(attn_mha_desc, key_padding_mode), ATTN_MASK_NONE,
              offsetof(attn_mha_args, key_padding_mask) },
            { "weights", M_DINT, offsetof(attn_mha_desc, weights), ATTN_WEIGHTS_NONE, offsetof(attn_mha_args, weights) },
        };
        for (size_t f = 0; f < sizeof feat / sizeof feat[0]; f++) {
            emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
                          "%s: args.%s given, plan does not use it", bn, feat[f].name),
                     feat[f].kind, feat[f].off, feat[f].v);
            erow *r = eadd(rs, base, AT_EXEC, ATTN_OK, "control: %s: without args.%s", bn,
                           feat[f].name);
            emut_add(r, feat[f].kind, feat[f].off, feat[f].v);
            emut_add(r, M_ARG, feat[f].aoff, 0);
        }

        /* lengths out of range, in either batch */
        const int32_t L = (int32_t)t->c.L, S = (int32_t)t->c.S;
        const int32_t badk[] = { -1, S + 1, INT32_MIN, INT32_MAX };
        const int32_t badq[] = { -1, L + 1, INT32_MIN, INT32_MAX };
        for (size_t bi = 0; bi < 2; bi++)
            for (int k = 0; k < 4; k++) {
                emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_BAD_LENGTH, "%s: kv_lens[%zu] = %d (S = %d)",
                              bn, bi, (int)badk[k], (int)S),
                         M_KV_LEN, bi, badk[k]);
                emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_BAD_LENGTH, "%s: q_lens[%zu] = %d (L = %d)",
                              bn, bi, (int)badq[k], (int)L),
                         M_Q_LEN, bi, badq[k]);
            }
        erow *r = eadd(rs, base, AT_EXEC, ATTN_OK, "control: %s: lengths 0 and full", bn);
        emut_add(r, M_KV_LEN, 0, 0);
        emut_add(r, M_KV_LEN, 1, S);
        emut_add(r, M_Q_LEN, 0, L);
        emut_add(r, M_Q_LEN, 1, 0);

        /* workspace too small or misaligned */
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_WORKSPACE_TOO_SMALL, "%s: workspace of 0 bytes",
                      bn),
                 M_WS_BYTES, 0, 0);
        static const int64_t offs[] = { 4, 16, 32, 60 };
        for (int i = 0; i < 4; i++)
            emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_WORKSPACE_ALIGNMENT,
                          "%s: workspace misaligned by %lld bytes", bn, (long long)offs[i]),
                     M_WS_AT, 0, offs[i]);
    }

    /* 16-bit bases: every 16-bit pointer in use NULL; its float twin, and
     * every 16-bit pointer the layout does not use, given */
#define W6(f) { #f, offsetof(attn_mha_weights16, f), offsetof(attn_mha_weights, f) }
#define A6(f) { #f, offsetof(attn_mha_args16, f), offsetof(attn_mha_args, f) }
    static const struct { const char *name; size_t off16, off; } w6[] = {
        W6(in_proj_weight), W6(in_proj_bias), W6(q_weight), W6(k_weight), W6(v_weight),
        W6(q_bias), W6(k_bias), W6(v_bias), W6(out_weight), W6(out_bias),
    }, a6[] = { A6(x), A6(key), A6(value), A6(out) };
#undef W6
#undef A6
    for (int base = EB_CROSS16; base <= EB_W16; base++) {
        const minst *t = &b[base];
        static const char *const bn16[] = { "cross BF16", "self F16", "X BF16", "weights F16" };
        const char *bn = bn16[base - EB_CROSS16];
        if (t->c.wt)
            for (size_t k = 0; k < sizeof w6 / sizeof w6[0]; k++) {
                const int used = *(const void *const *)((const char *)&t->w16 + w6[k].off16) != NULL;
                emut_add(eadd(rs, base, AT_EXEC, used ? ATTN_ERR_NULL_ARGUMENT
                                                      : ATTN_ERR_ARGUMENT_MISMATCH,
                              "%s: weights16.%s %s", bn, w6[k].name, used ? "NULL" : "given"),
                         M_WEIGHT16, w6[k].off16, !used);
                if (used)
                    emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
                                  "%s: weights.%s given with weights16's", bn, w6[k].name),
                             M_WEIGHT, w6[k].off, 1);
            }
        if (t->c.xt)
            for (size_t k = 0; k < sizeof a6 / sizeof a6[0]; k++) {
                const int used = *(const void *const *)((const char *)&t->a16 + a6[k].off16) != NULL;
                emut_add(eadd(rs, base, AT_EXEC, used ? ATTN_ERR_NULL_ARGUMENT
                                                      : ATTN_ERR_ARGUMENT_MISMATCH,
                              "%s: args16.%s %s", bn, a6[k].name, used ? "NULL" : "given"),
                         M_ARG16, a6[k].off16, !used);
                if (used)
                    emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH,
                                  "%s: args.%s given with args16's", bn, a6[k].name),
                             M_ARG, a6[k].off, 1);
            }
        /* the other pointers keep their rules */
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, "%s: args.global_k given",
                      bn), M_ARG, offsetof(attn_mha_args, global_k), 1);
        emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_WORKSPACE_TOO_SMALL,
                      "%s: workspace one byte short", bn), M_WS_SHORT, 0, 1);
        emut_add(eadd(rs, base, AT_EXEC, ATTN_OK, "control: %s: workspace of exactly the size",
                      bn), M_WS_SHORT, 0, 0);
    }
    {
        erow *r = eadd(rs, EB_CROSS16, AT_EXEC, ATTN_ERR_BAD_LENGTH, "cross BF16: kv_lens[1] = -1");
        emut_add(r, M_KV_LEN, 1, -1);
        r = eadd(rs, EB_SELF16, AT_EXEC, ATTN_ERR_NULL_ARGUMENT, "self F16: args.weights NULL");
        emut_add(r, M_ARG, offsetof(attn_mha_args, weights), 0);
    }

    /* weights a layout does not use */
    static const char *const ln[] = { "packed", "packed without bias", "separate",
                                      "separate without bias" };
    for (int base = EB_PACKED; base <= EB_SEPARATE_NOBIAS; base++) {
        for (size_t k = 0; k < sizeof wf / sizeof wf[0]; k++)
            if (!*(const float *const *)((const char *)&b[base].w + wf[k].off))
                emut_add(eadd(rs, base, AT_EXEC, ATTN_ERR_ARGUMENT_MISMATCH, "%s: weights.%s given",
                              ln[base - EB_PACKED], wf[k].name),
                         M_WEIGHT, wf[k].off, 1);
        eadd(rs, base, AT_EXEC, ATTN_OK, "control: %s: layout weights", ln[base - EB_PACKED]);
    }
}

/* Apply row r to the valid call of t and check the status and the outputs.
 * Returns 1 on failure (printed). */
static int run_erow(const erow *r, minst *t)
{
    static const float dummy[4];
    attn_mha_desc d = t->d;
    attn_mha_weights w = t->w;
    attn_mha_args a = t->a;
    attn_mha_weights16 w16 = t->w16;
    attn_mha_args16 a16 = t->a16;
    if (w.weights16)
        w.weights16 = &w16;
    if (a.args16)
        a.args16 = &a16;
    int32_t kl[MMAXB], ql[MMAXB];
    memcpy(kl, t->kv_lens, sizeof kl);
    memcpy(ql, t->q_lens, sizeof ql);
    int null_which = 0, use_ws = 0;
    int64_t ws_at = 0, ws_short = 0, ws_bytes = -1;
    for (int i = 0; i < EMUTS && r->m[i].kind != M_END; i++) {
        const emut *m = &r->m[i];
        switch (m->kind) {
        case M_D64: memcpy((char *)&d + m->off, &m->v, sizeof(int64_t)); break;
        case M_DINT: {
            const int v = (int)m->v;
            memcpy((char *)&d + m->off, &v, sizeof v);
            break;
        }
        case M_SCALE: d.scale = (float)m->f; break;
        case M_DROP: d.dropout_p = m->f; break;
        case M_WEIGHT: {
            const float *p = m->v ? dummy : NULL;
            memcpy((char *)&w + m->off, &p, sizeof p);
            break;
        }
        case M_ARG: {
            const void *p = m->v ? (const void *)dummy : NULL;
            memcpy((char *)&a + m->off, &p, sizeof p);
            break;
        }
        case M_WEIGHT16: {
            const void *p = m->v ? (const void *)dummy : NULL;
            memcpy((char *)&w16 + m->off, &p, sizeof p);
            break;
        }
        case M_ARG16: {
            const void *p = m->v ? (const void *)dummy : NULL;
            memcpy((char *)&a16 + m->off, &p, sizeof p);
            break;
        }
        case M_W16: w.weights16 = m->v ? &w16 : NULL; break;
        case M_A16: a.args16 = m->v ? &a16 : NULL; break;
        case M_KV_LEN: kl[m->off] = (int32_t)m->v; a.kv_lens = kl; break;
        case M_Q_LEN: ql[m->off] = (int32_t)m->v; a.q_lens = ql; break;
        case M_WS_AT: use_ws = 1; ws_at = m->v; break;
        case M_WS_SHORT: use_ws = 1; ws_short = m->v; break;
        case M_WS_BYTES: use_ws = 1; ws_bytes = m->v; break;
        default: null_which = (int)m->v; break;
        }
    }
    int fail = 0;
    if (r->at == AT_PLAN) {
        static int marker;
        attn_mha_plan *plan = (attn_mha_plan *)&marker;
        attn_status s = attn_mha_plan_create(null_which == N_PLAN_OUT ? NULL : &plan,
                                             null_which == N_DESC ? NULL : &d);
        if (s != r->want) {
            printf("FAIL %s: plan_create returned %d (%s), want %s\n", r->what, (int)s,
                   attn_status_str(s), attn_status_str(r->want));
            fail = 1;
        }
        if (s != ATTN_OK && plan != (attn_mha_plan *)&marker) {
            printf("FAIL %s: plan_create wrote *plan on failure\n", r->what);
            fail = 1;
        }
        if (s == ATTN_OK && plan != (attn_mha_plan *)&marker)
            attn_mha_plan_destroy(plan);
        return fail;
    }
    attn_mha_plan *plan = NULL;
    attn_status s = attn_mha_plan_create(&plan, &d);
    if (s != ATTN_OK) {
        printf("FAIL %s: plan_create of the row's desc returned %s\n", r->what,
               attn_status_str(s));
        return 1;
    }
    unsigned char *ws = NULL;
    size_t bytes = 0;
    if (use_ws) {
        assert_int_equal(attn_mha_workspace_size(plan, &bytes), ATTN_OK);
        assert_true(bytes > 0);
        const size_t cap = (bytes + 63) / 64 * 64 + 128;
        ws = aligned_alloc(64, cap);
        assert_non_null(ws);
        memset(ws, 0x5A, cap);
        bytes = ws_bytes >= 0 ? (size_t)ws_bytes : ws_at ? bytes + 64 : bytes - (size_t)ws_short;
    }
    minst_clear(t);
    s = attn_mha_execute(null_which == N_PLAN ? NULL : plan, null_which == N_WEIGHTS ? NULL : &w,
                         null_which == N_ARGS ? NULL : &a, ws ? ws + ws_at : NULL, bytes);
    if (s != r->want) {
        printf("FAIL %s: execute returned %d (%s), want %s\n", r->what, (int)s,
               attn_status_str(s), attn_status_str(r->want));
        fail = 1;
    }
    if (r->want != ATTN_OK && !minst_untouched(t)) {
        printf("FAIL %s: out or weights written by a failing execute\n", r->what);
        fail = 1;
    }
    free(ws);
    attn_mha_plan_destroy(plan);
    return fail;
}

static void test_errors(void **state)
{
    (void)state;
    minst b[EB_COUNT_];
    for (int i = 0; i < EB_COUNT_; i++) {
        assert_int_equal(minst_build(&b[i], &err_bases[i]), 0);
    }
    erows rs = { NULL, 0, 0 };
    err_table(&rs, b);
    int fails = 0, controls = 0;
    for (size_t i = 0; i < rs.n; i++) {
        fails += run_erow(&rs.v[i], &b[rs.v[i].base]);
        controls += rs.v[i].want == ATTN_OK;
    }
    printf("  %zu error rows (%d controls)\n", rs.n, controls);
    free(rs.v);
    for (int i = 0; i < EB_COUNT_; i++)
        minst_free(&b[i]);
    if (fails)
        fail_msg("%d error row(s) failed", fails);
}

/* attn_mha_desc_init's defaults and the calls outside the table. */
static void test_api(void **state)
{
    (void)state;
    attn_mha_desc d;
    memset(&d, 0xAB, sizeof d);
    assert_int_equal(attn_mha_desc_init(&d), ATTN_OK);
    assert_true(d.embed_dim == 0 && d.num_heads == 0 && d.num_kv_heads == 0 && d.kdim == 0 &&
                d.vdim == 0 && d.batch == 0 && d.q_len == 0 && d.kv_len == 0);
    assert_int_equal(d.self_attention, 0);
    assert_int_equal(d.packed_in_proj, 0);
    assert_int_equal(d.has_bias, 1);
    assert_true(d.x_stride == 0 && d.key_stride == 0 && d.value_stride == 0 &&
                d.out_stride == 0);
    assert_true(isnan(d.scale));
    assert_int_equal(d.align, ATTN_ALIGN_TOP_LEFT);
    assert_true(d.window_left < 0 && d.window_right < 0);
    assert_int_equal(d.use_kv_lens, 0);
    assert_int_equal(d.use_q_lens, 0);
    assert_int_equal(d.mask_mode, ATTN_MASK_NONE);
    assert_int_equal(d.use_bias, 0);
    assert_int_equal(d.key_padding_mode, ATTN_MASK_NONE);
    assert_int_equal(d.weights, ATTN_WEIGHTS_NONE);
    assert_int_equal(d.threads, 0);
    assert_true(d.dropout_p == 0.0 && !signbit(d.dropout_p));
    assert_true(d.dropout_seed == 0 && d.dropout_offset == 0);
    assert_int_equal(sizeof d.reserved / sizeof d.reserved[0], 8);
    for (int i = 0; i < 8; i++)
        assert_true(d.reserved[i] == 0);
    assert_true(d.engine == ATTN_ENGINE_AUTO && d.reserved_pad == 0);
    assert_true(d.x_type == ATTN_DTYPE_F32 && d.w_type == ATTN_DTYPE_F32);
    assert_true(d.use_global_k == 0 && d.use_global_q == 0 && d.layout_per_head == 0 &&
                d.reserved_flags == 0 && d.block_size == 0);
    assert_int_equal(attn_mha_desc_init(NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_plan_destroy(NULL), ATTN_OK);

    for (int base = EB_CROSS; base <= EB_SELF; base++) {
        minst t;
        assert_int_equal(minst_build(&t, &err_bases[base]), 0);
        attn_mha_plan *plan = NULL;
        assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
        size_t bytes = 777;
        assert_int_equal(attn_mha_workspace_size(NULL, &bytes), ATTN_ERR_NULL_ARGUMENT);
        assert_int_equal(bytes, 777);
        assert_int_equal(attn_mha_workspace_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);
        attn_mha_plan_destroy(plan);
        minst_free(&t);
    }
}

/* ------------------------------------------------------------- backward */

static gstats g_bwd_stats, g_bwd_drop_stats; /* the dropout rows apart */

/* Where element view[k] of a gradient family lives in a snapshot of the
 * buffers (packed views share the buffer of dW_q or db_q). */
static float *snap_view(const mgrads *m, float *const snap[MG_COUNT], int k)
{
    const int owner = m->buf[k] ? k : (k == MG_DWK || k == MG_DWV) ? MG_DWQ : MG_DBQ;
    return snap[owner] + (m->view[k] - m->buf[owner]);
}

static int check_backward(minst *t, const msnap *first, const mrow *row)
{
    int fails = 0;
    mgrads m;
    assert_int_equal(mgrads_build(&m, t), 0);
    minst_clear(t);
    void *cx = NULL;
    size_t cb = 0;
    attn_mha_plan *plan = NULL;
    attn_status s = minst_train(t, &m, 0, &cx, &cb, &plan);
    if (s != ATTN_OK) {
        printf("FAIL train_forward + backward: %s: %s\n", attn_status_str(s), mcase_str(&t->c));
        free(cx);
        attn_mha_plan_destroy(plan);
        mgrads_free(&m);
        return 1;
    }
    /* train_forward's Y (and weights) bitwise execute's */
    if (!msnap_equal(first, t)) {
        printf("FAIL train_forward: out differs from execute bitwise: %s\n", mcase_str(&t->c));
        fails++;
    }
    fails += mgrads_check(t, &m,
                          strcmp(row->family, MHA_DROPOUT_FAMILY) == 0 ? &g_bwd_drop_stats
                                                                       : &g_bwd_stats) != 0;
    float *g0[MG_COUNT];
    mgrads_snap(&m, g0);

    /* accumulate = 1 onto random values: exactly old + g, in fp32 */
    trng r;
    trng_seed(&r, t->c.seed + 4242u);
    for (int k = 0; k < MG_COUNT; k++)
        if (m.view[k])
            for (int64_t i = 0; i < m.rows[k]; i++)
                for (int64_t e = 0; e < m.width[k]; e++)
                    m.view[k][i * m.ld[k] + e] = (float)trng_uniform(&r, -1.0, 1.0);
    float *old[MG_COUNT];
    mgrads_snap(&m, old);
    s = attn_mha_bwd_execute(plan, &t->w, &t->a, m.dy, cx, cb, &m.g, 1, NULL, 0);
    long bad = s != ATTN_OK;
    for (int k = 0; k < MG_COUNT && s == ATTN_OK; k++) {
        if (!m.view[k])
            continue;
        const float *o = snap_view(&m, old, k), *g = snap_view(&m, g0, k);
        for (int64_t i = 0; i < m.rows[k]; i++)
            for (int64_t e = 0; e < m.width[k]; e++) {
                const int64_t x = i * m.ld[k] + e;
                const float want = o[x] + g[x];
                if (memcmp(&want, &m.view[k][x], sizeof want) != 0) {
                    if (bad < 4)
                        printf("FAIL accumulate %s[%lld]: %.9g, want %.9g + %.9g (%s)\n",
                               mref_grad_name[k], (long long)x, (double)m.view[k][x],
                               (double)o[x], (double)g[x], mcase_str(&t->c));
                    bad++;
                }
            }
    }
    if (bad) {
        printf("FAIL accumulate = 1: %s, %ld element(s) not old + g: %s\n", attn_status_str(s),
               bad, mcase_str(&t->c));
        fails++;
    }
    mgrads_snap_free(old);
    free(cx);
    attn_mha_plan_destroy(plan);

    /* threads 1, 2, 3, 4 (1 and 2 under ATTN_TEST_QUICK=1): the same bits */
    const int threads0 = t->d.threads;
    for (int th = 1; th <= (tquick() ? 2 : 4); th++) {
        mgrads_clear(&m);
        minst_clear(t);
        t->d.threads = th;
        s = minst_train(t, &m, 0, NULL, NULL, NULL);
        if (s != ATTN_OK || !mgrads_equal(&m, g0) || !msnap_equal(first, t)) {
            printf("FAIL backward threads=%d: %s, gradients %s: %s\n", th, attn_status_str(s),
                   mgrads_equal(&m, g0) ? "equal" : "differ", mcase_str(&t->c));
            fails++;
        }
    }
    t->d.threads = threads0;
    mgrads_snap_free(g0);
    mgrads_free(&m);
    return fails;
}

static void test_backward(void **state)
{
    (void)state;
    memset(&g_bwd_stats, 0, sizeof g_bwd_stats);
    memset(&g_bwd_drop_stats, 0, sizeof g_bwd_drop_stats);
    over_rows(CK_BACKWARD, check_backward, 0);
    gstats_print(&g_bwd_stats);
    printf("[accuracy] backward, rows of \"%s\":\n", MHA_DROPOUT_FAMILY);
    gstats_print(&g_bwd_drop_stats);
}

/* L(theta) = sum dY * Y_ref(theta), Y from the forward reference. */
static double fd_loss(const minst *t, const float *dy, double *y)
{
    mref_out ro;
    memset(&ro, 0, sizeof ro);
    ro.y = y;
    assert_int_equal(mref_mha(&t->d, &t->w, &t->a, &ro), 0);
    const int64_t BL = t->c.B * t->c.L, E = t->c.E;
    double l = 0.0;
    for (int64_t r = 0; r < BL; r++)
        for (int64_t e = 0; e < E; e++)
            l += (double)dy[r * t->os + e] * y[r * E + e];
    return l;
}

/* The reference backward against central differences of the reference
 * forward, on tiny shapes: every input, weight and bias element p, with
 * steps h1 = fl(p + h) - p, h2 = p - fl(p - h), h = 2^-10:
 *   |(L(p + h1) - L(p - h2)) / (h1 + h2) - g| <= 1e-5 (1 + |g|)
 * (the truncation error is O(h^2) times third derivatives of order 1 here;
 * the rounding of L in double is ~1e-16 / h). */
static void test_backward_fd(void **state)
{
    (void)state;
    MCASE_ROWS_BEGIN
    static const mcase cases[] = {
        MCASE(SELF(2, 3, 4, 2, 1), .wr = 0, .seed = 2500),
        MCASE(CROSS(2, 3, 4, 4, 2), .Hkv = 1, .kdim = 3, .vdim = 5, .kpm_mode = ATTN_MASK_DROP_NONZERO,
              .use_kv_lens = 1, .kv_lens = { 4, 3 }, .use_q_lens = 1, .q_lens = { 3, 2 },
              .use_bias = 1, .mask_mode = ATTN_MASK_KEEP_NONZERO, .mask_keep = 0.9,
              .kpm_keep = 0.9, .seed = 2501),
        MCASE(SELF(1, 4, 6, 3, 0), .has_bias = 0, .xs = 7, .os = 9, .seed = 2502),
        MCASE(CROSS(2, 4, 3, 4, 2), .packed = 1, .align = ATTN_ALIGN_BOTTOM_RIGHT, .wl = 1,
              .wr = 0, .seed = 2503),
    };
    MCASE_ROWS_END
    const double h = 1.0 / 1024.0;
    int fails = 0;
    double maxerr[MG_COUNT] = { 0 };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        minst t;
        mgrads m;
        assert_int_equal(minst_build(&t, &cases[ci]), 0);
        assert_int_equal(mgrads_build(&m, &t), 0);
        mref_grads rg;
        memset(&rg, 0, sizeof rg);
        for (int k = 0; k < MG_COUNT; k++)
            if (m.rows[k]) {
                rg.g[k] = malloc((size_t)(m.rows[k] * m.width[k]) * sizeof(double));
                assert_non_null(rg.g[k]);
            }
        assert_int_equal(mref_mha_backward(&t.d, &t.w, &t.a, m.dy, &rg), 0);
        double *y = malloc((size_t)(t.c.B * t.c.L * t.c.E) * sizeof(double));
        assert_non_null(y);
        const int64_t E = t.c.E;
        const int pk = t.c.packed;
        /* the parameters: buffer, rows, width, row stride, family */
        const struct { float *p; int64_t rows, width, ld; int mg; } par[] = {
            { t.x, t.c.B * t.c.L, E, t.xs, MG_DX },
            { t.key, t.key ? t.c.B * t.c.S : 0, t.kdim, t.ks, MG_DKEY },
            { t.value, t.value ? t.c.B * t.c.S : 0, t.vdim, t.vs, MG_DVALUE },
            { pk ? t.in_proj : t.wq, E, E, E, MG_DWQ },
            { pk ? t.in_proj + E * E : t.wk, t.kvE, t.kdim, t.kdim, MG_DWK },
            { pk ? t.in_proj + 2 * E * E : t.wv, t.kvE, t.vdim, t.vdim, MG_DWV },
            { pk ? t.in_bias : t.bq, t.c.has_bias ? 1 : 0, E, E, MG_DBQ },
            { pk ? t.in_bias + E : t.bk, t.c.has_bias ? 1 : 0, t.kvE, t.kvE, MG_DBK },
            { pk ? t.in_bias + 2 * E : t.bv, t.c.has_bias ? 1 : 0, t.kvE, t.kvE, MG_DBV },
            { t.wo, E, E, E, MG_DWO },
            { t.bo, t.c.has_bias ? 1 : 0, E, E, MG_DBO },
        };
        for (size_t f = 0; f < sizeof par / sizeof par[0]; f++)
            for (int64_t r = 0; r < par[f].rows; r++)
                for (int64_t e = 0; e < par[f].width; e++) {
                    float *p = par[f].p + r * par[f].ld + e;
                    const float p0 = *p;
                    const float pp = (float)((double)p0 + h), pm = (float)((double)p0 - h);
                    *p = pp;
                    const double lp = fd_loss(&t, m.dy, y);
                    *p = pm;
                    const double lm = fd_loss(&t, m.dy, y);
                    *p = p0;
                    const double fd = (lp - lm) / ((double)pp - (double)pm);
                    const double g = rg.g[par[f].mg][r * par[f].width + e];
                    const double err = fabs(fd - g);
                    if (err > maxerr[par[f].mg])
                        maxerr[par[f].mg] = err;
                    if (!(err <= 1e-5 * (1.0 + fabs(g)))) {
                        if (fails < 8)
                            printf("FAIL fd %s[%lld][%lld]: fd %.12g ref %.12g (%s)\n",
                                   mref_grad_name[par[f].mg], (long long)r, (long long)e, fd, g,
                                   mcase_str(&t.c));
                        fails++;
                    }
                }
        for (int k = 0; k < MG_COUNT; k++)
            free(rg.g[k]);
        free(y);
        mgrads_free(&m);
        minst_free(&t);
    }
    for (int k = 0; k < MG_COUNT; k++)
        printf("[accuracy] finite differences %-6s max|fd - ref|=%.3e\n", mref_grad_name[k],
               maxerr[k]);
    if (fails)
        fail_msg("%d finite-difference mismatch(es)", fails);
}

/* Errors of attn_mha_train_execute and attn_mha_bwd_execute: each row a
 * mutation of a valid call; a failing call writes nothing (out, weights and
 * the context of train_forward, every gradient buffer of backward). */
enum { TC_FWD, TC_BWD };
enum {
    TM_NONE, TM_NULL_PLAN, TM_NULL_WEIGHTS, TM_NULL_ARGS, TM_NULL_DY, TM_NULL_CONTEXT,
    TM_NULL_GRADS, TM_CX_SHORT, TM_CX_AT, TM_WS_SHORT, TM_WS_AT, TM_ACC, TM_GRAD, TM_ARG,
    TM_KV_LEN
};
typedef struct trow {
    char what[96];
    int call, kind;
    size_t off;
    int64_t v;
    attn_status want;
} trow;

static int run_trow(const trow *r, minst *t, mgrads *m, const attn_mha_plan *plan,
                    const void *cx_valid, size_t cb)
{
    static const float dummy[4];
    attn_mha_args a = t->a;
    attn_mha_grads g = m->g;
    int32_t kl[MMAXB];
    memcpy(kl, t->kv_lens, sizeof kl);
    int acc = 0;
    size_t wb = 0;
    if (r->call == TC_FWD)
        assert_int_equal(attn_mha_workspace_size(plan, &wb), ATTN_OK);
    else
        assert_int_equal(attn_mha_bwd_workspace_size(plan, &wb), ATTN_OK);
    const size_t cap_w = (wb + 63) / 64 * 64 + 128, cap_c = (cb + 63) / 64 * 64 + 128;
    unsigned char *ws = aligned_alloc(64, cap_w), *cx = aligned_alloc(64, cap_c);
    assert_non_null(ws);
    assert_non_null(cx);
    memset(ws, 0x5A, cap_w);
    if (r->call == TC_FWD)
        memset(cx, 0x5A, cap_c);
    else
        memcpy(cx, cx_valid, cb);
    size_t wbytes = wb, cbytes = cb;
    unsigned char *wp = ws, *cp = cx;
    switch (r->kind) {
    case TM_CX_SHORT: cbytes = cb - (size_t)r->v; break;
    case TM_CX_AT: cp = cx + r->v; cbytes = cb + 64; break;
    case TM_WS_SHORT: wbytes = wb - (size_t)r->v; break;
    case TM_WS_AT: wp = ws + r->v; wbytes = wb + 64; break;
    case TM_ACC: acc = (int)r->v; break;
    case TM_GRAD: {
        float *p = r->v ? (float *)(uintptr_t)dummy : NULL;
        memcpy((char *)&g + r->off, &p, sizeof p);
        break;
    }
    case TM_ARG: {
        const void *p = r->v ? (const void *)dummy : NULL;
        memcpy((char *)&a + r->off, &p, sizeof p);
        break;
    }
    case TM_KV_LEN: kl[r->off] = (int32_t)r->v; a.kv_lens = kl; break;
    default: break;
    }
    if (r->kind == TM_CX_AT && r->call == TC_BWD)
        memcpy(cp, cx_valid, cb); /* the valid context, misaligned */
    minst_clear(t);
    mgrads_clear(m);
    attn_status s;
    const attn_mha_plan *pl = r->kind == TM_NULL_PLAN ? NULL : plan;
    const attn_mha_weights *w = r->kind == TM_NULL_WEIGHTS ? NULL : &t->w;
    const attn_mha_args *ap = r->kind == TM_NULL_ARGS ? NULL : &a;
    void *cxp = r->kind == TM_NULL_CONTEXT ? NULL : cp;
    if (r->call == TC_FWD)
        s = attn_mha_train_execute(pl, w, ap, cxp, cbytes, wp, wbytes);
    else
        s = attn_mha_bwd_execute(pl, w, ap, r->kind == TM_NULL_DY ? NULL : m->dy, cxp, cbytes,
                              r->kind == TM_NULL_GRADS ? NULL : &g, acc, wp, wbytes);
    int fail = 0;
    if (s != r->want) {
        printf("FAIL %s: returned %s, want %s\n", r->what, attn_status_str(s),
               attn_status_str(r->want));
        fail = 1;
    }
    if (r->want != ATTN_OK) {
        int clean = r->call == TC_FWD ? minst_untouched(t) : mgrads_untouched(m);
        if (r->call == TC_FWD)
            for (size_t i = 0; i < cap_c; i++)
                clean &= cx[i] == 0x5A;
        if (!clean) {
            printf("FAIL %s: a failing call wrote an output\n", r->what);
            fail = 1;
        }
    }
    free(ws);
    free(cx);
    return fail;
}

static trow *tadd(trow *rows, size_t *n, int call, int kind, size_t off, int64_t v,
                  attn_status want, const char *fmt, ...)
{
    trow *r = &rows[(*n)++];
    memset(r, 0, sizeof *r);
    r->call = call;
    r->kind = kind;
    r->off = off;
    r->v = v;
    r->want = want;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    return r;
}

static void test_train_errors(void **state)
{
    (void)state;
#define GF(f) { #f, offsetof(attn_mha_grads, f) }
    static const struct { const char *name; size_t off; } gf[] = {
        GF(dx), GF(dkey), GF(dvalue), GF(d_in_proj_weight), GF(d_in_proj_bias),
        GF(d_q_weight), GF(d_k_weight), GF(d_v_weight), GF(d_q_bias), GF(d_k_bias),
        GF(d_v_bias), GF(d_out_weight), GF(d_out_bias),
    };
#undef GF
    /* (the fp32 bases: the 16-bit ones have no training yet, test_types
     * checks that) */
    static const char *const bn[EB_SPARSE + 1] = { "cross", "self", "packed", "packed, no bias",
                                                  "separate", "separate, no bias", "sparse" };
    int fails = 0, nrows = 0, controls = 0;
    for (int base = 0; base <= EB_SPARSE; base++) {
        minst t;
        mgrads m;
        assert_int_equal(minst_build(&t, &err_bases[base]), 0);
        assert_int_equal(mgrads_build(&m, &t), 0);
        void *cx = NULL;
        size_t cb = 0;
        attn_mha_plan *plan = NULL;
        assert_int_equal(minst_train(&t, &m, 0, &cx, &cb, &plan), ATTN_OK);
        trow rows[160];
        size_t n = 0;
        const char *b = bn[base];
        for (int call = TC_FWD; call <= TC_BWD; call++) {
            const char *cn = call == TC_FWD ? "train_forward" : "backward";
            tadd(rows, &n, call, TM_NONE, 0, 0, ATTN_OK, "control: %s: %s", b, cn);
            if (base == EB_SPARSE) {
                tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, global_k), 0,
                     ATTN_ERR_NULL_ARGUMENT, "%s: %s: args.global_k NULL", b, cn);
                tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, global_q), 0,
                     ATTN_ERR_NULL_ARGUMENT, "%s: %s: args.global_q NULL", b, cn);
                tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, layout), 0,
                     ATTN_ERR_NULL_ARGUMENT, "%s: %s: args.layout NULL", b, cn);
            }
            if (base > EB_SELF)
                continue;
            tadd(rows, &n, call, TM_NULL_PLAN, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s(NULL plan)", b, cn);
            tadd(rows, &n, call, TM_NULL_WEIGHTS, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s(NULL weights)", b, cn);
            tadd(rows, &n, call, TM_NULL_ARGS, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s(NULL args)", b, cn);
            tadd(rows, &n, call, TM_NULL_CONTEXT, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s(NULL context)", b, cn);
            tadd(rows, &n, call, TM_CX_SHORT, 0, 1, ATTN_ERR_WORKSPACE_TOO_SMALL, "%s: %s: context 1 byte short", b, cn);
            tadd(rows, &n, call, TM_CX_SHORT, 0, (int64_t)cb, ATTN_ERR_WORKSPACE_TOO_SMALL, "%s: %s: context of 0 bytes", b, cn);
            tadd(rows, &n, call, TM_CX_AT, 0, 16, ATTN_ERR_WORKSPACE_ALIGNMENT, "%s: %s: context misaligned by 16", b, cn);
            tadd(rows, &n, call, TM_CX_AT, 0, 4, ATTN_ERR_WORKSPACE_ALIGNMENT, "%s: %s: context misaligned by 4", b, cn);
            tadd(rows, &n, call, TM_CX_AT, 0, 64, ATTN_OK, "control: %s: %s: context at +64", b, cn);
            tadd(rows, &n, call, TM_WS_SHORT, 0, 1, ATTN_ERR_WORKSPACE_TOO_SMALL, "%s: %s: workspace 1 byte short", b, cn);
            tadd(rows, &n, call, TM_WS_AT, 0, 32, ATTN_ERR_WORKSPACE_ALIGNMENT, "%s: %s: workspace misaligned by 32", b, cn);
            tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, x), 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s: args.x NULL", b, cn);
            tadd(rows, &n, call, TM_KV_LEN, 1, -1, ATTN_ERR_BAD_LENGTH, "%s: %s: kv_lens[1] = -1", b, cn);
            tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, args16), 1, ATTN_ERR_ARGUMENT_MISMATCH, "%s: %s: args.args16 given (fp32)", b, cn);
            if (base == EB_SELF)
                tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, key), 1, ATTN_ERR_ARGUMENT_MISMATCH, "%s: %s: args.key given", b, cn);
            else
                tadd(rows, &n, call, TM_ARG, offsetof(attn_mha_args, value), 0, ATTN_ERR_NULL_ARGUMENT, "%s: %s: args.value NULL", b, cn);
        }
        if (base <= EB_SELF) {
            tadd(rows, &n, TC_BWD, TM_NULL_DY, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: backward(NULL dy)", b);
            tadd(rows, &n, TC_BWD, TM_NULL_GRADS, 0, 0, ATTN_ERR_NULL_ARGUMENT, "%s: backward(NULL grads)", b);
            tadd(rows, &n, TC_BWD, TM_ACC, 0, 2, ATTN_ERR_BAD_OPTION, "%s: accumulate = 2", b);
            tadd(rows, &n, TC_BWD, TM_ACC, 0, -1, ATTN_ERR_BAD_OPTION, "%s: accumulate = -1", b);
            tadd(rows, &n, TC_BWD, TM_ARG, offsetof(attn_mha_args, out), 0, ATTN_OK, "control: %s: backward with args.out NULL", b);
            tadd(rows, &n, TC_BWD, TM_ARG, offsetof(attn_mha_args, weights), 0, ATTN_OK, "control: %s: backward with args.weights NULL", b);
            tadd(rows, &n, TC_FWD, TM_ARG, offsetof(attn_mha_args, out), 0, ATTN_ERR_NULL_ARGUMENT, "%s: train_forward: args.out NULL", b);
            tadd(rows, &n, TC_BWD, TM_KV_LEN, 0, (int64_t)t.c.S + 1, ATTN_ERR_BAD_LENGTH, "%s: backward: kv_lens[0] = S + 1", b);
        }
        /* every gradient pointer: NULL when used, given when not */
        for (size_t k = 0; k < sizeof gf / sizeof gf[0]; k++) {
            float *p;
            memcpy(&p, (const char *)&m.g + gf[k].off, sizeof p);
            if (p)
                tadd(rows, &n, TC_BWD, TM_GRAD, gf[k].off, 0, ATTN_ERR_NULL_ARGUMENT, "%s: grads.%s NULL", b, gf[k].name);
            else
                tadd(rows, &n, TC_BWD, TM_GRAD, gf[k].off, 1, ATTN_ERR_ARGUMENT_MISMATCH, "%s: grads.%s given, plan does not use it", b, gf[k].name);
        }
        assert_true(n <= sizeof rows / sizeof rows[0]);
        for (size_t i = 0; i < n; i++) {
            fails += run_trow(&rows[i], &t, &m, plan, cx, cb);
            controls += rows[i].want == ATTN_OK;
        }
        nrows += (int)n;
        free(cx);
        attn_mha_plan_destroy(plan);
        mgrads_free(&m);
        minst_free(&t);
    }
    printf("  %d training error rows (%d controls)\n", nrows, controls);
    if (fails)
        fail_msg("%d training error row(s) failed", fails);
}

/* The size calls of training. */
static void test_train_api(void **state)
{
    (void)state;
    minst t;
    assert_int_equal(minst_build(&t, &err_bases[EB_CROSS]), 0);
    attn_mha_plan *plan = NULL;
    assert_int_equal(attn_mha_plan_create(&plan, &t.d), ATTN_OK);
    size_t bytes = 777;
    assert_int_equal(attn_mha_context_size(NULL, &bytes), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_bwd_workspace_size(NULL, &bytes), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(bytes, 777);
    assert_int_equal(attn_mha_context_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);
    assert_int_equal(attn_mha_bwd_workspace_size(plan, NULL), ATTN_ERR_NULL_ARGUMENT);
    /* the context holds Q, K, V, O and the logsumexp at least */
    const int64_t B = t.c.B, L = t.c.L, S = t.c.S, E = t.c.E, H = t.c.H;
    assert_int_equal(attn_mha_context_size(plan, &bytes), ATTN_OK);
    assert_true(bytes >= (size_t)(2 * B * L * E + 2 * B * S * t.kvE + B * H * L) * sizeof(float));
    assert_int_equal(attn_mha_bwd_workspace_size(plan, &bytes), ATTN_OK);
    assert_true(bytes > 0);
    attn_mha_plan_destroy(plan);
    minst_free(&t);
}

/* dropout_p = 0 with a seed and an offset set is bitwise a desc that never
 * set dropout: execute (out and weights), train_forward and the backward's
 * gradients, on every row of the dropout family with p forced to 0. */
static void test_dropout_zero(void **state)
{
    (void)state;
    size_t n;
    const mrow *rows = mha_rows(&n);
    int fails = 0, run = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].family, MHA_DROPOUT_FAMILY) != 0)
            continue;
        mcase c0 = rows[i].c, c1 = rows[i].c;
        c0.dropout_p = 0.0;
        c0.drop_seed = c0.drop_offset = 0;
        c1.dropout_p = 0.0;
        c1.drop_seed = rows[i].c.drop_seed + 0x9E3779B97F4A7C15ull;
        c1.drop_offset = rows[i].c.drop_offset + 12345u;
        minst t0, t1;
        assert_int_equal(minst_build(&t0, &c0), 0);
        assert_int_equal(minst_build(&t1, &c1), 0);
        assert_true(t0.d.dropout_p == 0.0 && t0.d.dropout_seed == 0 && t0.d.dropout_offset == 0);
        assert_int_equal(minst_run(&t0, 0), ATTN_OK);
        assert_int_equal(minst_run(&t1, 0), ATTN_OK);
        msnap s0;
        msnap_take(&s0, &t0);
        if (!msnap_equal(&s0, &t1)) {
            printf("FAIL dropout_p = 0 with seed/offset: execute differs: %s\n", mcase_str(&c1));
            fails++;
        }
        mgrads m0, m1;
        assert_int_equal(mgrads_build(&m0, &t0), 0);
        assert_int_equal(mgrads_build(&m1, &t1), 0);
        minst_clear(&t0);
        minst_clear(&t1);
        assert_int_equal(minst_train(&t0, &m0, 0, NULL, NULL, NULL), ATTN_OK);
        assert_int_equal(minst_train(&t1, &m1, 0, NULL, NULL, NULL), ATTN_OK);
        float *g0[MG_COUNT];
        mgrads_snap(&m0, g0);
        if (!msnap_equal(&s0, &t1) || !mgrads_equal(&m1, g0)) {
            printf("FAIL dropout_p = 0 with seed/offset: training differs: %s\n", mcase_str(&c1));
            fails++;
        }
        mgrads_snap_free(g0);
        mgrads_free(&m0);
        mgrads_free(&m1);
        msnap_free(&s0);
        minst_free(&t0);
        minst_free(&t1);
        run++;
    }
    printf("  %d rows\n", run);
    assert_true(run > 0);
    if (fails)
        fail_msg("%d failure(s)", fails);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_engines),
        cmocka_unit_test(test_thread_invariance),
        cmocka_unit_test(test_input_gaps),
        cmocka_unit_test(test_workspace),
        cmocka_unit_test(test_weights_optional),
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_backward),
        cmocka_unit_test(test_backward_fd),
        cmocka_unit_test(test_train_errors),
        cmocka_unit_test(test_train_api),
        cmocka_unit_test(test_dropout_zero),
    };
    return cmocka_run_group_tests_name("mha", tests, NULL, NULL);
}
