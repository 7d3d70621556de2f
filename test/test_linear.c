/*
 * test_linear.c -- linear attention (attn_linear_*, attn_linear_bwd_*)
 * against the float64 quadratic reference of linear_ref.c.
 *
 * Table-driven like test_sdpa.c: families of rows (lcase plus check bits);
 * every row is run once through the one-shot attn_linear (the base) and
 * checked against the reference: every O element within its bound (see
 * linear_ref.c: relative to the magnitudes of the sums, for fp32
 * accumulation over dk terms and the row's keys), padded rows exactly 0,
 * every element outside the view still the sentinel, the state after the
 * call within its bound.  Then, by the row's bits:
 *   LC_THREADS  threads 1, 2, 3, 4 (quick: 1, 2) through a plan with an
 *               exact caller workspace and with NULL: the base's bits;
 *   LC_POISON   (automatic when a position is never read) NaN at every
 *               never-read Q/K/V/dO position: the base's bits;
 *   LC_BWD      the backward against the analytic float64 backward
 *               (bounds of linear_ref.c), the same sentinel and zero rules,
 *               threads 1-4 and poison bitwise.
 * 16-bit Q, K, V, O: every family again at BF16 and at F16 ("fmaps bf16",
 * ...): the inputs rounded to the type, attn called on uint16 twins through
 * args.args16, O checked against the float64 reference on the rounded
 * inputs within the fp32 bound + 2 u_t |O| (u_t the type's unit roundoff;
 * F16 also 2^-24 absolute), LC_THREADS and poison as above, and bitwise
 * the fp32 call on the rounded inputs with its O rounded to the type (the
 * state too).  The backward at 16-bit (dO rounded too, dQ, dK, dV through
 * attn_linear_bwd_args16): against the float64 backward within the fp32
 * bound + 2 u_t M (M the magnitude the fp32 bound scales, bound / c'; F16
 * also 2^-24 absolute), and at 1 and 2 threads bitwise the fp32 backward
 * on the rounded inputs with each gradient rounded to its type; threads
 * 1-4 and poison bitwise as in fp32.  The "mixed" family: only some of
 * Q, K, V, O 16-bit (the others F32), forward and backward.
 * Special tests: the recurrent form (pieces of 1, 3 and random sizes against
 * the full pass and the reference, final state included), the float64
 * backward reference against central finite differences of the float64
 * forward, the descriptor defaults, and every error path (plan-time table,
 * execute-time pointers, lengths, workspace) with outputs and state
 * untouched.
 *
 * Argument: "tables" (the families, the recurrent form and the finite
 * differences) or "errors"; none = all.  ATTN_TEST_QUICK=1
 * (valgrind) runs the rows marked quick.
 */
#include <float.h>
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
#include "linear_case.h"
#include "linear_ref.h"

enum {
    LC_THREADS = 1u << 0,
    LC_BWD = 1u << 1,
};

typedef struct lrow {
    lcase c;
    unsigned checks;
    int quick;
} lrow;

typedef struct lrows {
    lrow *v;
    int n, cap;
    unsigned checks;   /* of the rows added next */
    int quick;
} lrows;

static void add(lrows *rs, const lcase *c)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 64;
        rs->v = realloc(rs->v, (size_t)rs->cap * sizeof *rs->v);
        assert_non_null(rs->v);
    }
    rs->v[rs->n].c = *c;
    rs->v[rs->n].checks = rs->checks;
    rs->v[rs->n].quick = rs->quick;
    rs->n++;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Accuracy of a family: max |lib - ref| / bound per output. */
typedef struct lstats {
    int rows, bwd_rows, widened, bwd_widened;
    double r_o, r_state, r_dq, r_dk, r_dv;
} lstats;

static int g_fail;

/* ------------------------------------------------------------ checks */

/* Compare a float view with dense double ref/tol; elements with tol 0 must
 * be exactly 0.  Elements outside the view must hold the sentinel.
 * Returns the number of bad elements; *ratio gets the max err / tol. */
static long check_view(const char *what, const lcase *c, const lbuf *buf, const float *base,
                       attn_view v, int64_t B, int64_t H, int64_t S, int64_t D, const double *ref,
                       const double *tol, double *ratio)
{
    long bad = 0;
    unsigned char *mask = calloc(buf->n, 1);
    assert_non_null(mask);
    lview_mark(mask, buf->p, base, v, B, H, S, D);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t x = 0; x < D; x++) {
                    const size_t e = (size_t)(((b * H + h) * S + s) * D + x);
                    const float got = base[b * v.batch + h * v.head + s * v.seq + x];
                    const double err = fabs((double)got - ref[e]);
                    int ok;
                    if (tol[e] == 0.0) {
                        ok = got == 0.0f;
                    } else {
                        ok = err <= tol[e];
                        if (err / tol[e] > *ratio || isnan(err))
                            *ratio = isnan(err) ? INFINITY : err / tol[e];
                    }
                    if (!ok && bad++ < 4)
                        printf("FAIL %s [%lld][%lld][%lld][%lld]: got %.9g ref %.9g tol %.3g  (%s)\n",
                               what, (long long)b, (long long)h, (long long)s, (long long)x,
                               (double)got, ref[e], tol[e], lcase_str(c));
                }
    uint32_t sent = LSENTINEL;
    long outside = 0;
    for (size_t i = 0; i < buf->n; i++)
        if (!mask[i] && memcmp(&buf->p[i], &sent, 4) != 0)
            outside++;
    if (outside) {
        printf("FAIL %s: %ld elements outside the view written (%s)\n", what, outside,
               lcase_str(c));
        bad += outside;
    }
    free(mask);
    return bad;
}

static long check_dense(const char *what, const lcase *c, const float *got, const double *ref,
                        const double *tol, size_t n, double *ratio)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)got[i] - ref[i]);
        if (err / tol[i] > *ratio || isnan(err))
            *ratio = isnan(err) ? INFINITY : err / tol[i];
        if (!(err <= tol[i]) && bad++ < 4)
            printf("FAIL %s [%zu]: got %.9g ref %.9g tol %.3g (%s)\n", what, i, (double)got[i],
                   ref[i], tol[i], lcase_str(c));
    }
    return bad;
}

typedef struct snap {
    float *o, *s, *z, *dq, *dk, *dv;
} snap;

static float *dup(const lbuf *b)
{
    if (!b->p)
        return NULL;
    float *x = malloc((b->n ? b->n : 1) * sizeof(float));
    assert_non_null(x);
    memcpy(x, b->p, b->n * sizeof(float));
    return x;
}

static int same(const float *a, const lbuf *b)
{
    return !b->p || memcmp(a, b->p, b->n * sizeof(float)) == 0;
}

static void snap_free(snap *s)
{
    free(s->o); free(s->s); free(s->z); free(s->dq); free(s->dk); free(s->dv);
}

/* Forward through a plan with `threads`, caller workspace (exact) or NULL
 * (at the row's type). */
static attn_status run_plan(linst *t, int threads, int own_ws)
{
    attn_linear_desc d = t->desc, dt;
    attn_linear_args at;
    d.threads = threads;
    linst_call_types(t, &d, &dt, &at);
    attn_linear_plan *plan = NULL;
    attn_status st = attn_linear_plan_create(&plan, &dt);
    if (st != ATTN_OK)
        return st;
    size_t bytes = 0;
    attn_linear_workspace_size(plan, &bytes);
    void *ws = own_ws ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    linst_reset(t);
    st = linst_forward(t, plan, ws, bytes);
    free(ws);
    attn_linear_plan_destroy(plan);
    return st;
}

static attn_status run_bwd_plan(linst *t, int threads, int own_ws)
{
    attn_linear_bwd_desc d = t->bdesc, dt;
    attn_linear_bwd_args at;
    d.fwd.threads = threads;
    linst_bwd_call_types(t, &d, &dt, &at);
    attn_linear_bwd_plan *plan = NULL;
    attn_status st = attn_linear_bwd_plan_create(&plan, &dt);
    if (st != ATTN_OK)
        return st;
    size_t bytes = 0;
    attn_linear_bwd_workspace_size(plan, &bytes);
    void *ws = own_ws ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
    linst_reset(t);
    st = linst_backward(t, plan, ws, bytes);
    free(ws);
    attn_linear_bwd_plan_destroy(plan);
    return st;
}

static long check_row_fwd(linst *t, lstats *ls)
{
    const lcase *c = &t->c;
    const attn_linear_desc *d = &t->desc;
    const size_t no = (size_t)(c->B * c->Hq * c->n * c->dv);
    double *ro = malloc(no * sizeof(double)), *rt = malloc(no * sizeof(double));
    assert_true(ro && rt);
    const size_t ns = (size_t)(c->B * c->Hkv * c->dk * c->dv), nz = (size_t)(c->B * c->Hkv * c->dk);
    double *s1 = NULL, *z1 = NULL, *s1t = NULL, *z1t = NULL;
    if (c->use_state) {
        s1 = malloc(ns * sizeof(double)); s1t = malloc(ns * sizeof(double));
        z1 = malloc(nz * sizeof(double)); z1t = malloc(nz * sizeof(double));
        assert_true(s1 && s1t && z1 && z1t);
    }
    assert_int_equal(lref_forward(&t->shape, t->rq, t->rk, t->rv, t->rs0, t->rz0, ro, rt, s1,
                                  z1, s1t, z1t), 0);
    /* 16-bit O: its rounding, 2 u_t |O| with u_t the unit roundoff of
     * the type (2^-8 BF16, 2^-11 F16; the factor 2 is slack: one rounding
     * is at most u_t |O|), and for F16 an absolute 2^-24 (its subnormal
     * spacing); padded rows (bound 0) stay exact zeros */
    if (lcase_type(c, LT_O) != ATTN_DTYPE_F32) {
        const double u2 = 2.0 * ldexp(1.0, c->dtype == ATTN_DTYPE_BF16 ? -8 : -11);
        const double tiny = c->dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
        for (size_t e = 0; e < no; e++)
            if (rt[e] != 0.0)
                rt[e] += u2 * fabs(ro[e]) + tiny;
    }
    linst_reset(t);
    attn_status st = linst_forward(t, NULL, NULL, 0);
    (void)d;
    long bad = 0;
    if (st != ATTN_OK) {
        printf("FAIL attn_linear returned %d (%s): %s\n", (int)st, attn_status_str(st),
               lcase_str(c));
        bad = 1;
    } else {
        bad += check_view("O", c, &t->o, t->o.p, d->o, c->B, c->Hq, c->n, c->dv, ro, rt,
                          &ls->r_o);
        if (c->use_state) {
            bad += check_dense("S", c, t->s.p, s1, s1t, ns, &ls->r_state);
            bad += check_dense("z", c, t->z.p, z1, z1t, nz, &ls->r_state);
        }
    }
    free(ro); free(rt); free(s1); free(z1); free(s1t); free(z1t);
    return bad;
}

static long check_row_bwd(linst *t, lstats *ls)
{
    const lcase *c = &t->c;
    const attn_linear_bwd_desc *bd = &t->bdesc;
    const size_t nq = (size_t)(c->B * c->Hq * c->n * c->dk);
    const size_t nk = (size_t)(c->B * c->Hkv * c->m * c->dk);
    const size_t nv = (size_t)(c->B * c->Hkv * c->m * c->dv);
    double *dq = malloc(nq * 8), *dk = malloc(nk * 8), *dv = malloc(nv * 8);
    double *tq = malloc(nq * 8), *tk = malloc(nk * 8), *tv = malloc(nv * 8);
    assert_true(dq && dk && dv && tq && tk && tv);
    assert_int_equal(lref_backward(&t->shape, t->rq, t->rk, t->rv, t->rdo, dq, dk, dv, tq, tk,
                                   tv), 0);
    /* A 16-bit gradient: its one rounding, 2 u_t M with M = tol / c' the
     * magnitude the fp32 bound scales (linear_ref.c: c' = 2 (dk + dv + n +
     * m + 16) 2^-24; M bounds |ref|), u_t the type's unit roundoff (2^-8
     * BF16, 2^-11 F16; the factor 2 is slack), and for F16 an absolute
     * 2^-24 (its subnormal spacing).  Exact zeros (tol 0) stay exact. */
    if (c->dtype != ATTN_DTYPE_F32) {
        const double u2 = 2.0 * ldexp(1.0, c->dtype == ATTN_DTYPE_BF16 ? -8 : -11);
        const double tiny = c->dtype == ATTN_DTYPE_F16 ? ldexp(1.0, -24) : 0.0;
        const double cc = 2.0 * (double)(c->dk + c->dv + c->n + c->m + 16) * 0x1p-24;
        double *tols[] = { tq, tk, tv };
        const size_t ns[] = { nq, nk, nv };
        const unsigned bits[] = { LT_Q, LT_K, LT_V };
        for (int x = 0; x < 3; x++)
            if (lcase_type(c, bits[x]) != ATTN_DTYPE_F32)
                for (size_t e = 0; e < ns[x]; e++)
                    if (tols[x][e] != 0.0)
                        tols[x][e] += u2 * tols[x][e] / cc + tiny;
    }
    linst_reset(t);
    attn_status st = linst_backward(t, NULL, NULL, 0);
    long bad = 0;
    if (st != ATTN_OK) {
        printf("FAIL attn_linear_backward returned %d (%s): %s\n", (int)st, attn_status_str(st),
               lcase_str(c));
        bad = 1;
    } else {
        bad += check_view("dQ", c, &t->dq, t->dq.p, bd->dq, c->B, c->Hq, c->n, c->dk, dq, tq,
                          &ls->r_dq);
        bad += check_view("dK", c, &t->dk, t->dk.p, bd->dk, c->B, c->Hkv, c->m, c->dk, dk, tk,
                          &ls->r_dk);
        bad += check_view("dV", c, &t->dv, t->dv.p, bd->dv, c->B, c->Hkv, c->m, c->dv, dv, tv,
                          &ls->r_dv);
    }
    free(dq); free(dk); free(dv); free(tq); free(tk); free(tv);
    return bad;
}

/* 16-bit rows: the fp32 call on the same (rounded) inputs, its O rounded
 * to the type (attn_dtype_encode), is the 16-bit call's O bit for bit, and
 * the state is the same bits (the widened products are fp32's). */
static long check_widened(linst *t, const snap *base)
{
    linst_reset(t);
    attn_status st = attn_linear(&t->desc, &t->args);   /* the fp32 desc and args */
    if (st != ATTN_OK) {
        printf("FAIL widened: the fp32 call returned %s (%s)\n", attn_status_str(st),
               lcase_str(&t->c));
        return 1;
    }
    long bad = 0;
    for (size_t i = 0; i < t->o.n; i++) {
        uint32_t want, got;
        memcpy(&want, &t->o.p[i], 4);
        memcpy(&got, &base->o[i], 4);
        if (want != LSENTINEL && lcase_type(&t->c, LT_O) != ATTN_DTYPE_F32) {
            uint16_t h;
            float f;
            attn_dtype_encode((attn_dtype)t->c.dtype, &t->o.p[i], &h, 1);
            attn_dtype_decode((attn_dtype)t->c.dtype, &h, &f, 1);
            memcpy(&want, &f, 4);
        }
        if (want != got && bad++ < 4)
            printf("FAIL widened O element %zu: 0x%08x, the fp32 call's rounded 0x%08x (%s)\n",
                   i, (unsigned)got, (unsigned)want, lcase_str(&t->c));
    }
    if (!same(base->s, &t->s) || !same(base->z, &t->z)) {
        printf("FAIL widened: the state differs from the fp32 call's (%s)\n", lcase_str(&t->c));
        bad++;
    }
    return bad;
}

/* 16-bit backward rows: the fp32 backward on the same (rounded) inputs,
 * each 16-bit gradient rounded to its type (attn_dtype_encode), is the
 * 16-bit backward's result bit for bit (the base, from the one-shot call,
 * and plans at 1 and 2 threads). */
static long check_bwd_widened(linst *t, const snap *base)
{
    linst_reset(t);
    attn_status st = attn_linear_backward(&t->bdesc, &t->bargs);   /* fp32 */
    if (st != ATTN_OK) {
        printf("FAIL bwd widened: the fp32 call returned %s (%s)\n", attn_status_str(st),
               lcase_str(&t->c));
        return 1;
    }
    const lbuf *g[] = { &t->dq, &t->dk, &t->dv };
    const unsigned bits[] = { LT_Q, LT_K, LT_V };
    static const char *const names[] = { "dQ", "dK", "dV" };
    float *want[3];
    for (int x = 0; x < 3; x++) {
        want[x] = dup(g[x]);
        const int ty = lcase_type(&t->c, bits[x]);
        for (size_t i = 0; ty != ATTN_DTYPE_F32 && i < g[x]->n; i++) {
            uint32_t w;
            memcpy(&w, &want[x][i], 4);
            if (w == LSENTINEL)
                continue;
            uint16_t h;
            attn_dtype_encode((attn_dtype)ty, &want[x][i], &h, 1);
            attn_dtype_decode((attn_dtype)ty, &h, &want[x][i], 1);
        }
    }
    long bad = 0;
    for (int run = 0; run < 3; run++) {
        const float *got[3] = { base->dq, base->dk, base->dv };
        if (run > 0) {
            assert_int_equal(run_bwd_plan(t, run, 0), ATTN_OK);
            got[0] = t->dq.p; got[1] = t->dk.p; got[2] = t->dv.p;
        }
        for (int x = 0; x < 3; x++)
            for (size_t i = 0; i < g[x]->n; i++)
                if (memcmp(&got[x][i], &want[x][i], 4) != 0 && bad++ < 4) {
                    uint32_t a, b;
                    memcpy(&a, &got[x][i], 4);
                    memcpy(&b, &want[x][i], 4);
                    printf("FAIL bwd widened %s element %zu (%s): 0x%08x, the fp32 call's "
                           "rounded 0x%08x (%s)\n", names[x], i,
                           run ? (run == 1 ? "1 thread" : "2 threads") : "one-shot",
                           (unsigned)a, (unsigned)b, lcase_str(&t->c));
                }
    }
    for (int x = 0; x < 3; x++)
        free(want[x]);
    return bad;
}

static long check_row(const lrow *r, lstats *ls)
{
    linst t;
    assert_int_equal(linst_build(&t, &r->c), 0);
    long bad = check_row_fwd(&t, ls);
    ls->rows++;
    snap base = { dup(&t.o), dup(&t.s), dup(&t.z), NULL, NULL, NULL };
    if (!bad && r->c.dtype != ATTN_DTYPE_F32) {
        bad += check_widened(&t, &base);
        ls->widened++;
    }
    static const int thr_all[] = { 1, 2, 3, 4 }, thr_quick[] = { 1, 2 };
    const int *thr = tquick() ? thr_quick : thr_all;
    const int nthr = tquick() ? 2 : 4;
    if (!bad && (r->checks & LC_THREADS))
        for (int i = 0; i < nthr; i++)
            for (int own = 0; own < 2; own++) {
                assert_int_equal(run_plan(&t, thr[i], own), ATTN_OK);
                if (!same(base.o, &t.o) || !same(base.s, &t.s) || !same(base.z, &t.z)) {
                    printf("FAIL threads %d ws %d: not the base's bits (%s)\n", thr[i], own,
                           lcase_str(&t.c));
                    bad++;
                }
            }
    const int hidden = linst_has_hidden(&t);
    if (!bad && hidden) {
        linst_poison(&t, 1);
        assert_int_equal(run_plan(&t, 1, 0), ATTN_OK);
        if (!same(base.o, &t.o) || !same(base.s, &t.s) || !same(base.z, &t.z)) {
            printf("FAIL poison: outputs changed (%s)\n", lcase_str(&t.c));
            bad++;
        }
        linst_poison(&t, 0);
    }
    if (!bad && (r->checks & LC_BWD) && !r->c.use_state) {
        ls->bwd_rows++;
        bad += check_row_bwd(&t, ls);
        base.dq = dup(&t.dq);
        base.dk = dup(&t.dk);
        base.dv = dup(&t.dv);
        /* (With MKL the BLAS's sums depend on the operands' alignment and
         * leading dimensions, and the widened copies have others than the
         * fp32 buffers: within rounding only, which the reference check
         * covers.) */
        if (!bad && r->c.dtype != ATTN_DTYPE_F32 && !tblas_mkl()) {
            bad += check_bwd_widened(&t, &base);
            ls->bwd_widened++;
        }
        for (int i = 0; !bad && i < nthr; i++)
            for (int own = 0; own < 2; own++) {
                assert_int_equal(run_bwd_plan(&t, thr[i], own), ATTN_OK);
                if (!same(base.dq, &t.dq) || !same(base.dk, &t.dk) || !same(base.dv, &t.dv)) {
                    printf("FAIL bwd threads %d ws %d: not the base's bits (%s)\n", thr[i], own,
                           lcase_str(&t.c));
                    bad++;
                }
            }
        if (!bad && hidden) {
            linst_poison(&t, 1);
            assert_int_equal(run_bwd_plan(&t, 1, 0), ATTN_OK);
            if (!same(base.dq, &t.dq) || !same(base.dk, &t.dk) || !same(base.dv, &t.dv)) {
                printf("FAIL bwd poison: gradients changed (%s)\n", lcase_str(&t.c));
                bad++;
            }
            linst_poison(&t, 0);
        }
    }
    snap_free(&base);
    linst_free(&t);
    return bad;
}

/* ------------------------------------------------------------ families */

static lcase mk(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk, int64_t dv,
                uint64_t seed)
{
    lcase c = lcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.seed = seed;
    return c;
}

/* Every feature map x causal (both alignments) / non-causal, n = m, n < m,
 * n > m, dk != dv; IDENTITY with positive inputs and with signed ones. */
static void gen_fmaps(lrows *rs)
{
    static const int64_t nm[][2] = { { 17, 17 }, { 9, 30 }, { 30, 9 }, { 70, 70 } };
    uint64_t seed = 100;
    for (int fm = 0; fm < 3; fm++)
        for (int mode = 0; mode < 3; mode++)
            for (size_t k = 0; k < COUNT(nm); k++) {
                lcase c = mk(2, 2, 1, nm[k][0], nm[k][1], 8, 5, seed++);
                c.fmap = fm;
                c.causal = mode > 0;
                c.align = mode == 2;
                c.positive = fm == ATTN_FEATURE_IDENTITY && k != 1;
                rs->quick = k == 0 || k == 2;
                add(rs, &c);
            }
}

/* Per-batch key and query lengths (0 and full included), every mode. */
static void gen_lengths(lrows *rs)
{
    static const int32_t kv[][4] = { { 30, 0, 17, 1 }, { 5, 30, 30, 12 } };
    static const int32_t ql[][4] = { { 25, 3, 0, 25 }, { 1, 25, 14, 0 } };
    uint64_t seed = 200;
    for (int mode = 0; mode < 3; mode++)
        for (int use = 1; use < 4; use++)
            for (int k = 0; k < 2; k++) {
                lcase c = mk(4, 2, 2, 25, 30, 6, 7, seed++);
                c.causal = mode > 0;
                c.align = mode == 2;
                c.fmap = k == 0 ? ATTN_FEATURE_ELU1 : ATTN_FEATURE_RELU;
                if (use & 1) { c.use_kv_lens = 1; memcpy(c.kv_lens, kv[k], sizeof kv[k]); }
                if (use & 2) { c.use_q_lens = 1; memcpy(c.q_lens, ql[k], sizeof ql[k]); }
                rs->quick = use == 3;
                add(rs, &c);
            }
    /* lengths past a chunk boundary */
    for (int mode = 0; mode < 3; mode++) {
        lcase c = mk(2, 1, 1, 140, 150, 4, 3, seed++);
        c.causal = mode > 0;
        c.align = mode == 2;
        c.use_kv_lens = c.use_q_lens = 1;
        c.kv_lens[0] = 130; c.kv_lens[1] = 65;
        c.q_lens[0] = 129; c.q_lens[1] = 64;
        rs->quick = mode == 2;
        add(rs, &c);
    }
}

static void gen_gqa(lrows *rs)
{
    static const int64_t heads[][2] = { { 8, 2 }, { 6, 3 }, { 4, 1 }, { 5, 1 }, { 3, 3 }, { 1, 1 } };
    uint64_t seed = 300;
    for (size_t k = 0; k < COUNT(heads); k++)
        for (int mode = 0; mode < 3; mode++) {
            lcase c = mk(2, heads[k][0], heads[k][1], 21, 33, 16, 12, seed++);
            c.causal = mode > 0;
            c.align = mode == 2;
            c.layout = k % 2 ? LL_BSHD : LL_BHSD;
            rs->quick = mode == 1 && k < 3;
            add(rs, &c);
        }
}

/* Every input layout x output layout; packed needs n == m and dk == dv. */
static void gen_layouts(lrows *rs)
{
    uint64_t seed = 400;
    for (int lay = 0; lay < LL_COUNT_; lay++)
        for (int out = 0; out < LO_COUNT_; out++)
            for (int mode = 0; mode < 2; mode++) {
                const int packed = lay == LL_PACKED;
                lcase c = mk(2, 4, 2, 37, packed ? 37 : 45, 12, packed ? 12 : 9, seed++);
                c.layout = lay;
                c.out_layout = out;
                c.causal = mode;
                c.align = out % 2;
                rs->quick = out == lay % LO_COUNT_;
                add(rs, &c);
            }
}

/* Chunk boundaries at every offset: n = m from 1 to 2 chunks + 3, causal
 * top-left; bottom-right with m = n + 5 and m = n - 3 put the diagonal at
 * other offsets; non-causal at the boundary sizes. */
static void gen_chunks(lrows *rs)
{
    uint64_t seed = 500;
    for (int64_t n = 1; n <= 131; n++) {
        const int edge = n <= 3 || (n >= 62 && n <= 66) || n >= 126;
        lcase c = mk(1, 2, 1, n, n, 4, 3, seed++);
        c.causal = 1;
        rs->quick = n == 1 || n == 63 || n == 64 || n == 65 || n == 129;
        add(rs, &c);
        if (edge || n % 7 == 0) {
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.m = n + 5;
            c.seed = seed++;
            rs->quick = n == 64;
            add(rs, &c);
            if (n > 3) {
                c.m = n - 3;
                c.seed = seed++;
                rs->quick = n == 65;
                add(rs, &c);
            }
            c = mk(1, 1, 1, n, n + 2, 3, 5, seed++);
            rs->quick = 0;
            add(rs, &c);
        }
    }
}

static void gen_eps(lrows *rs)
{
    static const float eps[] = { NAN, 0.0f, 1e-3f, 0.5f, 7.0f };
    uint64_t seed = 600;
    for (size_t e = 0; e < COUNT(eps); e++)
        for (int fm = 0; fm < 3; fm++) {
            lcase c = mk(1, 2, 2, 20, 20, 8, 8, seed++);
            c.eps = eps[e];
            c.fmap = fm;
            c.causal = 1;
            /* eps 0 with RELU could divide 0 by 0 in a row that sees only
             * zero features; positive inputs keep every denominator > 0 */
            c.positive = fm != ATTN_FEATURE_ELU1;
            rs->quick = e == 2;
            add(rs, &c);
        }
}

/* The state going in (use_state): causal both alignments and non-causal,
 * lengths, GQA, every map. */
static void gen_state(lrows *rs)
{
    uint64_t seed = 700;
    for (int fm = 0; fm < 3; fm++)
        for (int mode = 0; mode < 3; mode++)
            for (int k = 0; k < 2; k++) {
                lcase c = mk(2, 4, 2, k ? 1 : 70, k ? 1 : 90, 8, 6, seed++);
                c.fmap = fm;
                c.positive = fm == ATTN_FEATURE_IDENTITY;
                c.causal = mode > 0;
                c.align = mode == 2;
                c.use_state = 1;
                if (k == 0 && mode == 1) {
                    c.use_kv_lens = c.use_q_lens = 1;
                    c.kv_lens[0] = 0; c.kv_lens[1] = 77;
                    c.q_lens[0] = 70; c.q_lens[1] = 0;
                }
                rs->quick = fm == 0 && k == 0;
                add(rs, &c);
            }
}

/* Larger shapes for the thread counts: several items per thread. */
static void gen_threads(lrows *rs)
{
    uint64_t seed = 800;
    for (int mode = 0; mode < 3; mode++) {
        lcase c = mk(3, 4, 2, 150, 150, 16, 24, seed++);
        c.causal = mode > 0;
        c.align = mode == 2;
        rs->quick = mode == 1;
        add(rs, &c);
    }
    lcase c = mk(2, 6, 3, 100, 130, 32, 8, seed++);
    c.causal = 1;
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.use_state = 1;
    rs->quick = 0;
    add(rs, &c);
}

/* Random shapes and options. */
static void gen_random(lrows *rs)
{
    trng r;
    trng_seed(&r, 9001);
    for (int k = 0; k < 40; k++) {
        const int64_t Hkv = trng_int(&r, 1, 3), g = trng_int(&r, 1, 3);
        lcase c = mk(trng_int(&r, 1, 3), Hkv * g, Hkv, trng_int(&r, 1, 140), trng_int(&r, 1, 140),
                     trng_int(&r, 1, 20), trng_int(&r, 1, 20), 10000 + (uint64_t)k);
        c.fmap = (int)trng_int(&r, 0, 2);
        c.positive = c.fmap == ATTN_FEATURE_IDENTITY;
        c.causal = trng_bool(&r, 0.6);
        c.align = (int)trng_int(&r, 0, 1);
        c.layout = (int)trng_int(&r, 0, 1) ? LL_PADDED : LL_BSHD;
        c.out_layout = (int)trng_int(&r, 0, LO_COUNT_ - 1);
        c.use_state = trng_bool(&r, 0.3);
        if (trng_bool(&r, 0.4)) {
            c.use_kv_lens = 1;
            for (int64_t b = 0; b < c.B; b++)
                c.kv_lens[b] = (int32_t)trng_int(&r, 0, c.m);
        }
        if (trng_bool(&r, 0.4)) {
            c.use_q_lens = 1;
            for (int64_t b = 0; b < c.B; b++)
                c.q_lens[b] = (int32_t)trng_int(&r, 0, c.n);
        }
        if (trng_bool(&r, 0.3))
            c.eps = (float)trng_uniform(&r, 0.0, 1.0);
        rs->quick = k < 4;
        add(rs, &c);
    }
}

/* Mixed types: some of Q, K, V, O 16-bit (the type below, or the typed
 * rerun's), the others F32; causal both alignments and non-causal, GQA,
 * lengths, chunk boundaries, a padded layout. */
static void gen_mixed(lrows *rs)
{
    static const struct { unsigned mask; int dtype; } mx[] = {
        { LT_K | LT_V, ATTN_DTYPE_BF16 }, { LT_K | LT_V, ATTN_DTYPE_F16 },
        { LT_Q | LT_O, ATTN_DTYPE_BF16 }, { LT_Q, ATTN_DTYPE_F16 },
        { LT_O, ATTN_DTYPE_BF16 }, { LT_K, ATTN_DTYPE_F16 }, { LT_V, ATTN_DTYPE_BF16 },
        { LT_Q | LT_K | LT_V, ATTN_DTYPE_F16 },
    };
    uint64_t seed = 1100;
    for (size_t k = 0; k < COUNT(mx); k++)
        for (int mode = 0; mode < 3; mode++) {
            lcase c = mk(2, 4, 2, 70, 75, 8, 6, seed++);
            c.dtype = mx[k].dtype;
            c.mask16 = mx[k].mask;
            c.fmap = (int)(k % 3);
            c.positive = c.fmap == ATTN_FEATURE_IDENTITY;
            c.causal = mode > 0;
            c.align = mode == 2;
            c.layout = k % 2 ? LL_PADDED : LL_BSHD;
            c.out_layout = (int)(k % LO_COUNT_);
            if (mode == 1) {
                c.use_kv_lens = c.use_q_lens = 1;
                c.kv_lens[0] = 66; c.kv_lens[1] = 75;
                c.q_lens[0] = 70; c.q_lens[1] = 3;
            }
            rs->quick = mode == 1;
            add(rs, &c);
        }
}

typedef struct lfamily {
    const char *name;
    void (*gen)(lrows *rs);
    unsigned checks;
} lfamily;

static const lfamily families[] = {
    { "fmaps", gen_fmaps, LC_THREADS | LC_BWD },
    { "lengths", gen_lengths, LC_THREADS | LC_BWD },
    { "gqa", gen_gqa, LC_THREADS | LC_BWD },
    { "layouts", gen_layouts, LC_THREADS | LC_BWD },
    { "chunks", gen_chunks, LC_BWD },
    { "eps", gen_eps, LC_BWD },
    { "state", gen_state, LC_THREADS },
    { "threads", gen_threads, LC_THREADS | LC_BWD },
    { "random", gen_random, LC_THREADS | LC_BWD },
    { "mixed", gen_mixed, LC_THREADS | LC_BWD },
};

static int g_total_rows, g_total_bwd;

/* A family at an element type: dtype 0 as generated; BF16 or F16 every
 * row at that type (for the tensors its mask names), the same checks and
 * the widened ones (forward and backward). */
static void run_family(const lfamily *f, int dtype)
{
    lrows rs = { NULL, 0, 0, f->checks, 1 };
    f->gen(&rs);
    lstats ls;
    memset(&ls, 0, sizeof ls);
    long bad = 0;
    for (int i = 0; i < rs.n; i++) {
        if (tquick() && !rs.v[i].quick)
            continue;
        if (dtype)
            rs.v[i].c.dtype = dtype;
        bad += check_row(&rs.v[i], &ls);
    }
    char name[32];
    snprintf(name, sizeof name, "%s%s", f->name,
             dtype == ATTN_DTYPE_BF16 ? " bf16" : dtype == ATTN_DTYPE_F16 ? " f16" : "");
    printf("[accuracy] linear %-13s rows %3d: max err/bound O %.3g, state %.3g", name, ls.rows,
           ls.r_o, ls.r_state);
    if (ls.widened)
        printf("; %d rows the fp32 call's bits (O rounded)", ls.widened);
    if (ls.bwd_rows)
        printf("; backward rows %3d: dQ %.3g, dK %.3g, dV %.3g", ls.bwd_rows, ls.r_dq, ls.r_dk,
               ls.r_dv);
    if (ls.bwd_widened)
        printf("; %d backward rows the fp32 call's bits (rounded)", ls.bwd_widened);
    printf("\n");
    g_total_rows += ls.rows;
    g_total_bwd += ls.bwd_rows;
    free(rs.v);
    if (bad)
        fail_msg("family %s: %ld bad elements", f->name, bad);
}

static void test_family(void **state)
{
    run_family((const lfamily *)*state, 0);
}

/* The families rerun at BF16 and at F16: the tests' states point at
 * typed[k] = { family, dtype }. */
typedef struct typed_lfamily {
    const lfamily *f;
    int dtype;
    char name[32];
} typed_lfamily;

static void test_typed_family(void **state)
{
    const typed_lfamily *tf = *state;
    run_family(tf->f, tf->dtype);
}

/* ------------------------------------------------------------ recurrent */

/*
 * A causal sequence of L tokens fed in pieces (n = m = piece length, top-
 * left, use_state, one plan per piece size) must give the O rows and the
 * final state of the full pass: each piece's O rows are checked against the
 * float64 full-pass reference with its bounds, and against the library's
 * own full pass; the final state against the reference state.
 */
static void run_pieces(const char *what, int fmap, const int64_t *pieces, int npieces,
                       double *worst, double *worst_lib)
{
    enum { B = 2, HQ = 4, HKV = 2, DK = 16, DV = 8 };
    int64_t L = 0;
    for (int p = 0; p < npieces; p++)
        L += pieces[p];
    lcase c = mk(B, HQ, HKV, L, L, DK, DV, 4242 + (uint64_t)L);
    c.fmap = fmap;
    c.causal = 1;
    c.positive = fmap == ATTN_FEATURE_IDENTITY;
    linst t;
    assert_int_equal(linst_build(&t, &c), 0);
    const size_t no = (size_t)(B * HQ * L * DV), ns = (size_t)(B * HKV * DK * DV),
                 nz = (size_t)(B * HKV * DK);
    double *ro = malloc(no * 8), *rt = malloc(no * 8), *s1 = malloc(ns * 8), *s1t = malloc(ns * 8),
           *z1 = malloc(nz * 8), *z1t = malloc(nz * 8);
    assert_true(ro && rt && s1 && s1t && z1 && z1t);
    assert_int_equal(lref_forward(&t.shape, t.rq, t.rk, t.rv, NULL, NULL, ro, rt, s1, z1, s1t,
                                  z1t), 0);
    /* the library's full pass (BHSD) */
    assert_int_equal(attn_linear(&t.desc, &t.args), ATTN_OK);
    float *full = malloc(no * sizeof(float));
    assert_non_null(full);
    memcpy(full, t.o.p, no * sizeof(float));

    float *S = calloc(ns, sizeof(float)), *Z = calloc(nz, sizeof(float));
    float *po = malloc((size_t)(B * HQ * L * DV) * sizeof(float));
    assert_true(S && Z && po);
    long bad = 0;
    int64_t start = 0;
    for (int p = 0; p < npieces; p++) {
        const int64_t len = pieces[p];
        attn_linear_desc d;
        attn_linear_desc_init(&d);
        d.batch = B; d.q_heads = HQ; d.kv_heads = HKV; d.q_len = d.kv_len = len;
        d.qk_dim = DK; d.v_dim = DV;
        d.feature_map = (attn_feature_map)fmap;
        d.causal = 1;
        d.use_state = 1;
        d.threads = 1 + p % 3;
        /* views into the full BHSD tensors at row `start` */
        d.q = t.desc.q;
        d.k = t.desc.k;
        d.v = t.desc.v;
        d.o = (attn_view){ HQ * len * DV, len * DV, DV };
        attn_linear_args a = { .q = t.args.q + start * t.desc.q.seq,
                               .k = t.args.k + start * t.desc.k.seq,
                               .v = t.args.v + start * t.desc.v.seq,
                               .o = po, .state_s = S, .state_z = Z };
        assert_int_equal(attn_linear(&d, &a), ATTN_OK);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < HQ; h++)
                for (int64_t i = 0; i < len; i++)
                    for (int64_t x = 0; x < DV; x++) {
                        const size_t e = (size_t)(((b * HQ + h) * L + start + i) * DV + x);
                        const double got = po[((b * HQ + h) * len + i) * DV + x];
                        const double err = fabs(got - ro[e]);
                        if (err / rt[e] > *worst || isnan(err))
                            *worst = isnan(err) ? INFINITY : err / rt[e];
                        const double el = fabs(got - full[e]) / rt[e];
                        if (el > *worst_lib)
                            *worst_lib = el;
                        if (!(err <= rt[e]) && bad++ < 4)
                            printf("FAIL %s piece %d row %lld: got %.9g ref %.9g tol %.3g\n",
                                   what, p, (long long)(start + i), got, ro[e], rt[e]);
                    }
        start += len;
    }
    double ws = 0.0;
    for (size_t i = 0; i < ns; i++) {
        const double err = fabs((double)S[i] - s1[i]);
        if (err / s1t[i] > ws) ws = err / s1t[i];
        if (!(err <= s1t[i]) && bad++ < 8)
            printf("FAIL %s final S[%zu]: %.9g ref %.9g\n", what, i, (double)S[i], s1[i]);
    }
    for (size_t i = 0; i < nz; i++) {
        const double err = fabs((double)Z[i] - z1[i]);
        if (err / z1t[i] > ws) ws = err / z1t[i];
        if (!(err <= z1t[i]) && bad++ < 8)
            printf("FAIL %s final z[%zu]: %.9g ref %.9g\n", what, i, (double)Z[i], z1[i]);
    }
    printf("[accuracy] linear recurrent %-12s L %3lld pieces %3d: O err/bound %.3g "
           "(vs full pass %.3g), final state %.3g\n",
           what, (long long)L, npieces, *worst, *worst_lib, ws);
    free(ro); free(rt); free(s1); free(s1t); free(z1); free(z1t);
    free(full); free(S); free(Z); free(po);
    linst_free(&t);
    if (bad)
        fail_msg("recurrent %s: %ld bad", what, bad);
}

static void test_recurrent(void **state)
{
    (void)state;
    const int L = tquick() ? 70 : 150;
    int64_t ones[150], threes[50], rnd[150];
    for (int i = 0; i < L; i++)
        ones[i] = 1;
    int n3 = 0;
    for (int left = L; left > 0; left -= 3)
        threes[n3++] = left < 3 ? left : 3;
    trng r;
    trng_seed(&r, 77);
    int nr = 0;
    for (int left = L; left > 0;) {
        int64_t p = trng_int(&r, 1, 80);
        if (p > left) p = left;
        rnd[nr++] = p;
        left -= (int)p;
    }
    /* a prompt of one piece, then tokens */
    int64_t prompt[80];
    int np = 0;
    prompt[np++] = L - 40;
    for (int i = 0; i < 40 && np < 80; i++)
        prompt[np++] = 1;
    static const char *const kinds[] = { "ones", "threes", "random", "prompt" };
    const int64_t *lists[] = { ones, threes, rnd, prompt };
    const int counts[] = { L, n3, nr, np };
    for (int fm = 0; fm < 3; fm++)
        for (int k = 0; k < (tquick() ? 1 : 4); k++) {
            char name[32];
            double w = 0, wl = 0;
            snprintf(name, sizeof name, "%s-fm%d", kinds[k], fm);
            run_pieces(name, fm, lists[k], counts[k], &w, &wl);
        }
}

/* ------------------------------------------------- finite differences */

/*
 * The float64 backward reference against central differences of the
 * float64 forward reference, L = sum over non-padded rows of dO . O, in
 * every input element of tiny shapes: h = 1e-6 max(|x|, 1); truncation
 * (h^2 |L'''|) and roundoff (1e-16 |L| / h) stay near 1e-10, so the
 * analytic gradient must agree within 1e-7 (|g| + max |grad|).  Elements
 * within 1e-4 of a kink (RELU, ELU1 at 0) are not perturbed.
 */
static void test_fd(void **state)
{
    (void)state;
    typedef struct { int64_t B, Hq, Hkv, n, m, dk, dv; int fm, causal, align, lens; } fdc;
    static const fdc cases[] = {
        { 1, 1, 1, 4, 4, 3, 2, 0, 0, 0, 0 }, { 1, 1, 1, 4, 4, 3, 2, 0, 1, 0, 0 },
        { 1, 1, 1, 3, 5, 2, 3, 1, 1, 0, 0 }, { 1, 1, 1, 5, 3, 2, 3, 1, 1, 1, 0 },
        { 1, 1, 1, 3, 5, 2, 2, 2, 1, 1, 0 }, { 2, 2, 1, 4, 5, 3, 2, 0, 1, 1, 1 },
        { 2, 4, 2, 3, 3, 2, 2, 1, 0, 0, 1 }, { 2, 3, 1, 5, 4, 2, 3, 2, 1, 0, 1 },
        { 1, 2, 2, 4, 4, 4, 1, 0, 1, 1, 0 },
    };
    double worst = 0.0;
    for (size_t k = 0; k < COUNT(cases); k++) {
        const fdc *f = &cases[k];
        lcase c = mk(f->B, f->Hq, f->Hkv, f->n, f->m, f->dk, f->dv, 900 + k);
        c.fmap = f->fm;
        c.causal = f->causal;
        c.align = f->align;
        c.positive = f->fm == ATTN_FEATURE_IDENTITY;
        if (f->lens) {
            c.use_kv_lens = c.use_q_lens = 1;
            c.kv_lens[0] = (int32_t)f->m - 1; c.kv_lens[1] = (int32_t)f->m;
            c.q_lens[0] = (int32_t)f->n; c.q_lens[1] = (int32_t)f->n - 2;
        }
        linst t;
        assert_int_equal(linst_build(&t, &c), 0);
        const lref_shape *s = &t.shape;
        const size_t nq = (size_t)(c.B * c.Hq * c.n * c.dk), nk = (size_t)(c.B * c.Hkv * c.m * c.dk),
                     nv = (size_t)(c.B * c.Hkv * c.m * c.dv), no = (size_t)(c.B * c.Hq * c.n * c.dv);
        double *gq = malloc(nq * 8), *gk = malloc(nk * 8), *gv = malloc(nv * 8), *o = malloc(no * 8);
        assert_true(gq && gk && gv && o);
        assert_int_equal(lref_backward(s, t.rq, t.rk, t.rv, t.rdo, gq, gk, gv, NULL, NULL, NULL), 0);
        double gmax = 0.0;
        for (size_t i = 0; i < nq; i++) gmax = fmax(gmax, fabs(gq[i]));
        for (size_t i = 0; i < nk; i++) gmax = fmax(gmax, fabs(gk[i]));
        for (size_t i = 0; i < nv; i++) gmax = fmax(gmax, fabs(gv[i]));
        double *ins[3] = { t.rq, t.rk, t.rv }, *gs[3] = { gq, gk, gv };
        const size_t ns[3] = { nq, nk, nv };
        const int64_t rowlen[3] = { c.dk, c.dk, c.dv }, seqlen[3] = { c.n, c.m, c.m };
        long bad = 0;
        for (int w = 0; w < 3; w++)
            for (size_t e = 0; e < ns[w]; e++) {
                /* skip never-read rows: their gradient must be exactly 0 */
                const int64_t row = (int64_t)(e / (size_t)rowlen[w]);
                const int64_t sq = row % seqlen[w], bh = row / seqlen[w];
                const int64_t b = bh / (w == 0 ? c.Hq : c.Hkv);
                const int64_t lim = w == 0 ? (c.use_q_lens ? c.q_lens[b] : c.n)
                                           : (c.use_kv_lens ? c.kv_lens[b] : c.m);
                if (sq >= lim) {
                    if (gs[w][e] != 0.0 && bad++ < 4)
                        printf("FAIL fd case %zu: gradient %g of a never-read element\n", k,
                               gs[w][e]);
                    continue;
                }
                const double x0 = ins[w][e];
                if (w < 2 && c.fmap != ATTN_FEATURE_IDENTITY && fabs(x0) < 1e-4)
                    continue;
                const double hh = 1e-6 * fmax(fabs(x0), 1.0);
                double L[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    ins[w][e] = x0 + (sgn ? -hh : hh);
                    assert_int_equal(lref_forward(s, t.rq, t.rk, t.rv, NULL, NULL, o, NULL, NULL,
                                                  NULL, NULL, NULL), 0);
                    double acc = 0.0;
                    for (size_t i = 0; i < no; i++)
                        if (isfinite(t.rdo[i]))
                            acc += t.rdo[i] * o[i];
                    L[sgn] = acc;
                }
                ins[w][e] = x0;
                const double fd = (L[0] - L[1]) / (2.0 * hh);
                const double err = fabs(fd - gs[w][e]);
                const double tol = 1e-7 * (fabs(gs[w][e]) + gmax) + 1e-12;
                if (err / tol > worst)
                    worst = err / tol;
                if (!(err <= tol) && bad++ < 4)
                    printf("FAIL fd case %zu tensor %d elem %zu: fd %.12g analytic %.12g\n", k, w,
                           e, fd, gs[w][e]);
            }
        free(gq); free(gk); free(gv); free(o);
        linst_free(&t);
        if (bad)
            fail_msg("finite differences, case %zu: %ld bad", k, bad);
    }
    printf("[accuracy] linear bwd-ref vs finite differences: %zu cases, max err/bound %.3g\n",
           COUNT(cases), worst);
}

#include "linear_errors.inc"

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    const int all = !strcmp(which, "all");
    struct CMUnitTest tests[64];
    static typed_lfamily typed[2 * COUNT(families)];
    int n = 0;
    if (all || !strcmp(which, "tables"))
        for (size_t i = 0; i < COUNT(families); i++) {
            tests[n] = (struct CMUnitTest)cmocka_unit_test_prestate(test_family,
                                                                      (void *)&families[i]);
            tests[n++].name = families[i].name;
        }
    /* 16-bit Q, K, V, O: every family again at BF16 and F16 */
    if (all || !strcmp(which, "tables"))
        for (size_t i = 0; i < COUNT(families); i++)
            for (int x = 0; x < 2; x++) {
                typed_lfamily *tf = &typed[2 * i + (size_t)x];
                tf->f = &families[i];
                tf->dtype = x ? ATTN_DTYPE_F16 : ATTN_DTYPE_BF16;
                snprintf(tf->name, sizeof tf->name, "%s %s", families[i].name,
                         x ? "f16" : "bf16");
                tests[n] = (struct CMUnitTest)cmocka_unit_test_prestate(test_typed_family,
                                                                          (void *)tf);
                tests[n++].name = tf->name;
            }
    if (all || !strcmp(which, "tables"))
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_recurrent);
    if (all || !strcmp(which, "tables"))
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_fd);
    if (all || !strcmp(which, "errors")) {
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_linear_desc_init);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_linear_desc_table);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_linear_execute_errors);
        tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_linear_bwd_errors);
    }
    int rc = _cmocka_run_group_tests("linear", tests, (size_t)n, NULL, NULL);
    (void)g_fail;
    if (g_total_rows)
        printf("linear: %d forward rows, %d backward rows checked\n", g_total_rows, g_total_bwd);
    return rc;
}
