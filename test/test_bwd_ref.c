/*
 * test_bwd_ref.c -- the float64 backward reference (reference.c,
 * ref_sdpa_bwd) checked against central finite differences of the float64
 * forward reference; nothing of lib/ is called but the desc initializer.
 *
 * For small cases (B <= 2, H <= 2, n, m <= 5, d <= 3) built by the harness
 * (so with its views, lengths, masks, biases and NaN poison), the scalar
 *   L(Q, K, V, bias) = sum over non-padded rows of sum_d dO_id O_id
 * (O from ref_sdpa in double) is differentiated numerically in every input
 * element: x -> fl(x +- h), h = 2^-17 max(|x|, 1) (near eps^(1/3), the
 * best step of a central difference in double), divided by the exact
 * difference of the two perturbed floats, so the float rounding of x +- h
 * does not enter; truncation (h^2 |L'''|) and double roundoff
 * (1e-16 |L| / h) stay near 1e-10 (observed: ~3e-9 relative).  The analytic gradient must agree within
 *   |fd - an| <= 1e-7 |an| + 1e-8 max|grad| + 1e-12.
 * Bias elements are perturbed in the bias's own (broadcast) shape and
 * compared with ref_dbias_reduce.  Never-read elements (NaN poison, -inf
 * bias entries) are not perturbed; their gradient must be exactly 0, as
 * must dQ of empty or padded rows and dK, dV of K/V rows no query sees.
 * Cases: plain, causal both alignments with n < m and n > m, windows,
 * lengths (with 0) and poison, masks of both polarities and broadcasts,
 * bias with -inf entries in every broadcast combination, GQA and MQA,
 * scale 0 and negative, empty rows (mask, bias, lengths), combined, and
 * dropout (p = 0.3, 0.7, 1 on some of those): ref_sdpa applies the keep mask
 * of attn_dropout_mask_fill, the same at every perturbation, so the finite
 * differences are those of the dropped forward with the mask held fixed.
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
#include "reference.h"

typedef struct fdctx {
    tinst t;
    float *d_o;          /* dense [B][Hq][n][dv], NaN in padded rows */
    attn_view dov;
    ref_out ro;          /* o only */
    double *o;
} fdctx;

static int64_t qlen_of(const fdctx *f, int64_t b)
{
    return f->t.desc.use_q_lens ? f->t.args.q_lens[b] : f->t.desc.q_len;
}

static double loss(fdctx *f)
{
    const attn_sdpa_desc *d = &f->t.desc;
    assert_int_equal(ref_sdpa(d, &f->t.args, &f->ro), 0);
    double L = 0.0;
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < d->q_heads; h++)
            for (int64_t i = 0; i < qlen_of(f, b); i++)
                for (int64_t x = 0; x < d->v_dim; x++)
                    L += (double)f->d_o[b * f->dov.batch + h * f->dov.head + i * f->dov.seq + x] *
                         f->o[((b * d->q_heads + h) * d->q_len + i) * d->v_dim + x];
    return L;
}

/* Central difference of L in *x; 0 (not perturbed) for NaN / infinite. */
static int fd_at(fdctx *f, float *x, double *g)
{
    const float x0 = *x;
    if (!isfinite(x0))
        return 0;
    const double hh = 0x1p-17 * fmax(fabs((double)x0), 1.0);
    const float xp = (float)((double)x0 + hh), xm = (float)((double)x0 - hh);
    *x = xp;
    const double lp = loss(f);
    *x = xm;
    const double lm = loss(f);
    *x = x0;
    *g = (lp - lm) / ((double)xp - (double)xm);
    return 1;
}

typedef struct fdstat {
    double max_rel;      /* max |fd - an| / (|an| + 1e-2 gmax) */
    long compared, zeros, bad;
} fdstat;

static void cmp(fdstat *st, const tcase *c, const char *what, long idx, double fd, double an,
                double gmax)
{
    const double err = fabs(fd - an);
    const double tol = 1e-7 * fabs(an) + 1e-8 * gmax + 1e-12;
    const double rel = err / (fabs(an) + 1e-2 * gmax + 1e-300);
    if (rel > st->max_rel)
        st->max_rel = rel;
    st->compared++;
    if (!(err <= tol)) {
        if (st->bad < 8)
            printf("FAIL %s[%ld]: fd %.12g analytic %.12g (err %.3g > tol %.3g): %s\n", what, idx,
                   fd, an, err, tol, tcase_str(c));
        st->bad++;
    }
}

static void must_zero(fdstat *st, const tcase *c, const char *what, long idx, double an)
{
    st->zeros++;
    if (an != 0.0) {
        if (st->bad < 8)
            printf("FAIL %s[%ld] = %.6g, must be exactly 0: %s\n", what, idx, an, tcase_str(c));
        st->bad++;
    }
}

static double amax(const double *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(v[i]) > m)
            m = fabs(v[i]);
    return m;
}

static void fd_case_p(const tcase *c, double p, fdstat *st)
{
    fdctx f;
    memset(&f, 0, sizeof f);
    assert_int_equal(tinst_build(&f.t, c), 0);
    f.t.desc.dropout_p = p;
    f.t.desc.dropout_seed = c->seed * 0x9e3779b97f4a7c15ull;
    f.t.desc.dropout_offset = c->seed;
    const attn_sdpa_desc *d = &f.t.desc;
    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len, m = d->kv_len;
    const int64_t dk = d->qk_dim, dv = d->v_dim;
    f.dov = attn_view_bhsd(Hq, n, dv);
    f.d_o = malloc((size_t)(B * Hq * n * dv) * sizeof(float));
    f.o = malloc((size_t)(B * Hq * n * dv) * sizeof(double));
    assert_non_null(f.d_o);
    assert_non_null(f.o);
    f.ro.o = f.o;
    trng r;
    trng_seed(&r, c->seed * 77 + 5);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t x = 0; x < dv; x++)
                    f.d_o[((b * Hq + h) * n + i) * dv + x] =
                        i < qlen_of(&f, b) ? (float)trng_uniform(&r, -1.0, 1.0) : NAN;

    ref_bwd_out g;
    assert_int_equal(ref_sdpa_bwd_alloc(d, &f.t.args, f.d_o, f.dov, d->use_bias, NULL, &g), 0);
    const double gq = amax(g.dq, (size_t)(B * Hq * n * dk));
    const double gk = amax(g.dk, (size_t)(B * Hkv * m * dk));
    const double gv = amax(g.dv, (size_t)(B * Hkv * m * dv));
    const double gmax = fmax(gq, fmax(gk, gv));
    double fd;

    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const long row = (long)((b * Hq + h) * n + i);
                for (int64_t x = 0; x < dk; x++) {
                    float *e = (float *)f.t.args.q + b * d->q.batch + h * d->q.head +
                               i * d->q.seq + x;
                    const double an = g.dq[row * dk + x];
                    if (g.row_empty[row])
                        must_zero(st, c, "dq(empty row)", row * dk + x, an);
                    if (fd_at(&f, e, &fd))
                        cmp(st, c, "dq", row * dk + x, fd, an, gmax);
                }
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t j = 0; j < m; j++) {
                const long row = (long)((b * Hkv + h) * m + j);
                for (int64_t x = 0; x < dk; x++) {
                    float *e = (float *)f.t.args.k + b * d->k.batch + h * d->k.head +
                               j * d->k.seq + x;
                    const double an = g.dk[row * dk + x];
                    if (!g.kv_seen[row])
                        must_zero(st, c, "dk(unseen)", row * dk + x, an);
                    if (fd_at(&f, e, &fd))
                        cmp(st, c, "dk", row * dk + x, fd, an, gmax);
                }
                for (int64_t x = 0; x < dv; x++) {
                    float *e = (float *)f.t.args.v + b * d->v.batch + h * d->v.head +
                               j * d->v.seq + x;
                    const double an = g.dv[row * dv + x];
                    if (!g.kv_seen[row])
                        must_zero(st, c, "dv(unseen)", row * dv + x, an);
                    if (fd_at(&f, e, &fd))
                        cmp(st, c, "dv", row * dv + x, fd, an, gmax);
                }
            }
    if (d->use_bias) {
        int64_t Bb, Hb, Nb;
        ref_dbias_shape(d, &Bb, &Hb, &Nb);
        const size_t tot = (size_t)(Bb * Hb * Nb * m);
        double *val = malloc(tot * sizeof *val), *tol = malloc(tot * sizeof *tol);
        int64_t *cnt = malloc(tot * sizeof *cnt);
        assert_non_null(val);
        assert_non_null(tol);
        assert_non_null(cnt);
        ref_dbias_reduce(d, &g, val, tol, cnt);
        const double gb = fmax(gmax, amax(val, tot));
        for (int64_t b = 0; b < Bb; b++)
            for (int64_t h = 0; h < Hb; h++)
                for (int64_t i = 0; i < Nb; i++)
                    for (int64_t j = 0; j < m; j++) {
                        const long x = (long)(((b * Hb + h) * Nb + i) * m + j);
                        float *e = (float *)f.t.args.bias + b * d->bias.batch +
                                   h * d->bias.head + i * d->bias.seq + j;
                        if (cnt[x] == 0)
                            must_zero(st, c, "dbias(hidden)", x, val[x]);
                        if (fd_at(&f, e, &fd))
                            cmp(st, c, "dbias", x, fd, val[x], gb);
                    }
        free(val);
        free(tol);
        free(cnt);
    }
    ref_bwd_out_free(&g);
    free(f.d_o);
    free(f.o);
    tinst_free(&f.t);
}

static void fd_case(const tcase *c, fdstat *st)
{
    fd_case_p(c, 0.0, st);
}

static tcase small(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk,
                   int64_t dv, uint64_t seed)
{
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.seed = seed;
    return c;
}

static void test_fd(void **state)
{
    (void)state;
    fdstat st;
    memset(&st, 0, sizeof st);
    uint64_t seed = 31000;
    int cases = 0;
#define RUN(c) (fd_case(&(c), &st), cases++)
    /* plain, layouts, GQA / MQA, scale */
    {
        tcase c = small(1, 1, 1, 4, 5, 3, 2, seed++);
        RUN(c);
        c = small(2, 2, 1, 3, 4, 2, 3, seed++);
        c.layout = LAY_PADDED;
        RUN(c);
        c = small(1, 2, 2, 5, 3, 3, 3, seed++);
        c.layout = LAY_BSHD;
        RUN(c);
        c = small(2, 2, 1, 4, 4, 1, 1, seed++);
        RUN(c);
        c = small(1, 2, 1, 3, 5, 2, 2, seed++);
        c.scale = -0.7f;
        RUN(c);
        c = small(1, 1, 1, 3, 4, 2, 2, seed++);
        c.scale = 0.0f;
        c.use_bias = 1;
        RUN(c);
        c = small(1, 2, 1, 4, 5, 3, 2, seed++);
        c.in_mag = 3.0;
        RUN(c);
    }
    /* causal both alignments, n < m and n > m; windows */
    static const int64_t nm[][2] = {{3, 5}, {5, 3}, {4, 4}};
    for (int align = 0; align < 2; align++)
        for (size_t k = 0; k < 3; k++) {
            tcase c = small(1, 2, 1, nm[k][0], nm[k][1], 2, 2, seed++);
            c.align = align;
            c.wr = 0;
            c.poison = 1;
            RUN(c);
            c.wl = 1;
            c.wr = k == 2 ? 1 : 0;
            c.seed = seed++;
            RUN(c);
        }
    /* lengths with 0, poisoned */
    for (int align = 0; align < 2; align++) {
        tcase c = small(2, 2, 1, 4, 5, 2, 3, seed++);
        c.use_kv_lens = c.use_q_lens = 1;
        c.kv_lens[0] = 3;
        c.kv_lens[1] = 0;
        c.q_lens[0] = 2;
        c.q_lens[1] = 4;
        c.align = align;
        c.wr = align ? 0 : -1;
        c.poison = 1;
        RUN(c);
        c.kv_lens[1] = 5;
        c.q_lens[0] = 0;
        c.seed = seed++;
        RUN(c);
    }
    /* masks, both polarities, broadcasts */
    for (int mode = 1; mode <= 2; mode++)
        for (int bc = 0; bc < 8; bc += 3) {
            tcase c = small(2, 2, 1, 4, 5, 2, 2, seed++);
            c.mask_mode = mode;
            c.mask_bcast = bc;
            c.mask_keep = 0.6;
            RUN(c);
        }
    /* bias with -inf entries, every broadcast combination */
    for (int bc = 0; bc < 8; bc++) {
        tcase c = small(2, 2, 1, 4, 5, 2, 2, seed++);
        c.use_bias = 1;
        c.bias_bcast = bc;
        c.bias_ninf = 0.25;
        c.bias_mag = 2.0;
        RUN(c);
    }
    /* empty rows: everything masked, all-(-inf) bias rows, kv_len 0 */
    {
        tcase c = small(1, 2, 2, 3, 4, 2, 2, seed++);
        c.mask_mode = ATTN_MASK_KEEP_NONZERO;
        c.mask_keep = 0.0;
        RUN(c);
        c = small(1, 1, 1, 5, 4, 2, 2, seed++);
        c.use_bias = 1;
        c.bias_ninf = 0.8;
        RUN(c);
        c = small(1, 1, 1, 5, 3, 2, 2, seed++); /* TL zero-width window: rows >= 3 empty */
        c.wl = 0;
        c.wr = 0;
        c.poison = 1;
        RUN(c);
    }
    /* combined */
    for (int k = 0; k < 4; k++) {
        tcase c = small(2, 2, 1, 5, 5, 3, 2, seed++);
        c.layout = k % 2 ? LAY_PADDED : LAY_BSHD;
        c.align = k % 2;
        c.wl = 2;
        c.wr = k < 2 ? 0 : 1;
        c.use_kv_lens = c.use_q_lens = 1;
        c.kv_lens[0] = 5;
        c.kv_lens[1] = 3;
        c.q_lens[0] = 4;
        c.q_lens[1] = 5;
        c.mask_mode = 1 + k % 2;
        c.mask_bcast = k;
        c.mask_keep = 0.8;
        c.use_bias = 1;
        c.bias_bcast = 7 - k;
        c.bias_ninf = 0.15;
        c.scale = k == 3 ? 0.45f : NAN;
        c.poison = 1;
        RUN(c);
    }
    /* dropout: plain, GQA with lengths, bias and mask, causal; p = 1 */
    static const double drop_p[] = { 0.3, 0.7, 1.0 };
    for (int k = 0; k < 3; k++) {
        tcase c = small(2, 2, 1, 4, 5, 2, 3, seed++);
        if (k == 1) {
            c.use_kv_lens = c.use_q_lens = 1;
            c.kv_lens[0] = 3;
            c.kv_lens[1] = 5;
            c.q_lens[0] = 4;
            c.q_lens[1] = 2;
            c.use_bias = 1;
            c.bias_bcast = 1;
            c.bias_ninf = 0.15;
            c.mask_mode = ATTN_MASK_KEEP_NONZERO;
            c.mask_keep = 0.8;
            c.poison = 1;
        } else if (k == 2) {
            c.wr = 0;
            c.use_bias = 1;
        }
        fd_case_p(&c, drop_p[k], &st);
        cases++;
    }
#undef RUN
    printf("[fd] cases=%d elements compared=%ld exact zeros=%ld max |fd-an|/(|an|+1e-2 max|g|)"
           "=%.3e bad=%ld\n",
           cases, st.compared, st.zeros, st.max_rel, st.bad);
    if (st.bad)
        fail_msg("%ld gradient elements disagree with finite differences", st.bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
