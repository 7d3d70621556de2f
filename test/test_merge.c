/*
 * test_merge.c -- attn_partials_merge (attn.h, "Decoding and the KV
 * cache"): attention split over shards of the keys, each shard an attn_sdpa
 * call with want_lse, merged back.
 *
 * The table (cases[]): each row is a problem (B, Hq, Hkv, n, m, dk, dv,
 * causal bottom-right or not, key lengths) and a split of the m keys into
 * 1 to 5 shards (uneven, some empty).  Shard s covering keys [k0, k0 + len)
 * is attn_sdpa over K and V views that start at key k0 and keep the full
 * tensors' strides, so that its rows see exactly the keys of the full
 * problem that fall in the shard:
 * - key lengths: the shard's kv_lens[b] = clamp(m_b - k0, 0, len) (0: the
 *   shard is empty for that batch, every row -INFINITY);
 * - causal bottom-right (diagonal i + m_b - n): one call per (shard,
 *   batch), since the shift of the diagonal differs per batch.  When the
 *   sequence ends inside the shard (m_b - k0 < len) the shard's kv_lens
 *   m_b - k0 puts its own diagonal in place (window_right 0); when it
 *   ends after it, the shard's diagonal i + len - n is m_b - k0 - len keys
 *   short, and window_right = m_b - k0 - len moves it there.
 * The partial O and lse go into one buffer each, parts either one after
 * the other (part-major) or interleaved within each row, rows with padding
 * (NaN, never read); a shard with no keys is no call: its lse rows are
 * -INFINITY and its O rows stay NaN.  K and V rows past m_b are NaN.
 * The merge (into a padded output, gaps checked untouched, inputs checked
 * unchanged) is compared with (a) one attn_sdpa call over all keys and
 * (b) the float64 reference (test/reference.c), O and lse, both within
 * |err| <= TOL * (1 + |ref|); rows with no visible key must be O = 0 and
 * lse = -INFINITY exactly.  The largest errors are printed per case.
 *
 * Then, on hand-made partials: a NaN O_p whose lse_p is -INFINITY never
 * shows; a NaN or +INFINITY lse_p makes its row NaN and only it; an
 * all-empty row is O 0 and lse -INFINITY; parts = 1 is the identity bit
 * for bit (-0, denormals, strided input); extreme lse spreads against a
 * double merge written here; every error path as a table, each failing
 * call leaving the outputs bitwise untouched.
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
#include "reference.h"

/* The tolerance of the comparisons, |err| <= TOL * (1 + |ref|): a few
 * hundred float roundings on values of size <= 1, as the partials and the
 * full call each carry fp32 error of their own. */
#define TOL 1e-5

#define SENT 0x7fc0deadu   /* bit pattern of output elements before a call */
#define NSHARD 5

static float sentinel(void)
{
    const uint32_t u = SENT;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int is_sentinel(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u == SENT;
}

static float *falloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

static void fill(float *p, size_t n, float v)
{
    for (size_t x = 0; x < n; x++)
        p[x] = v;
}

/* ------------------------------------------------------------ the table */

enum { PART_MAJOR = 0, INTERLEAVED = 1 };

typedef struct mcase {
    const char *name;
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int causal;                 /* bottom-right, window_right = 0 */
    int use_kv_lens;
    int32_t kv_lens[4];
    int nshards;
    int64_t shard[NSHARD];      /* keys per shard, in order; sum = m */
    int parts_layout;           /* PART_MAJOR or INTERLEAVED */
    int64_t o_pad, lse_pad;     /* gap after each partial O row / lse */
    int64_t out_pad;            /* gap after each merged O row */
    int64_t lse_out_stride;     /* 0: lse_out NULL */
    uint64_t seed;
} mcase;

static const mcase cases[] = {
    { "one shard", 2, 4, 2, 5, 37, 16, 16, 0, 0, {0}, 1, {37},
      PART_MAJOR, 0, 0, 0, 1, 1 },
    { "two even shards, causal", 1, 2, 2, 8, 64, 32, 32, 1, 0, {0}, 2, {32, 32},
      PART_MAJOR, 0, 0, 0, 1, 2 },
    { "three uneven, GQA 3, dk != dv, interleaved, padded", 2, 6, 2, 3, 100, 24, 40, 1, 0,
      {0}, 3, {7, 60, 33}, INTERLEAVED, 3, 1, 2, 2, 3 },
    { "empty shards, lengths, not causal", 2, 2, 1, 4, 50, 8, 8, 0, 1, {50, 13}, 5,
      {0, 20, 0, 30, 0}, PART_MAJOR, 1, 2, 0, 1, 4 },
    { "lengths empty whole shards, causal, MQA", 3, 4, 1, 6, 96, 64, 64, 1, 1, {96, 30, 0},
      4, {24, 24, 24, 24}, INTERLEAVED, 0, 0, 3, 1, 5 },
    { "n > m_b causal: rows with nothing visible", 2, 2, 2, 20, 12, 16, 16, 1, 1, {12, 3},
      3, {5, 0, 7}, PART_MAJOR, 2, 0, 1, 3, 6 },
    { "decode n = 1, 5 shards, GQA 4", 3, 8, 2, 1, 1000, 64, 64, 1, 1, {1000, 777, 301}, 5,
      {1, 300, 0, 450, 249}, INTERLEAVED, 5, 3, 5, 2, 7 },
    { "speculative n = 16, d = 128", 2, 4, 4, 16, 700, 128, 128, 1, 1, {700, 500}, 3,
      {256, 256, 188}, PART_MAJOR, 4, 1, 0, 1, 8 },
    { "5 tiny shards, no lse_out, not causal", 1, 3, 1, 9, 41, 8, 8, 0, 0, {0}, 5,
      {1, 2, 3, 5, 30}, INTERLEAVED, 0, 0, 0, 0, 9 },
    { "dv = 300 > merge chunk", 1, 2, 1, 2, 40, 16, 300, 0, 1, {40}, 2, {10, 30},
      PART_MAJOR, 1, 0, 7, 1, 10 },
    { "causal, lengths, 4 shards one past the end", 4, 2, 1, 7, 64, 16, 24, 1, 1,
      {64, 17, 48, 1}, 4, {16, 16, 16, 16}, INTERLEAVED, 2, 2, 2, 4, 11 },
};

/* The partial and merged buffers of a case. */
typedef struct mlayout {
    int64_t rows, P;
    int64_t ors, ops, lrs, lps;  /* partial O and lse: row and part strides */
    size_t o_count, lse_count;
    int64_t out_stride;
    size_t out_count, lse_out_count;
} mlayout;

static mlayout layout_of(const mcase *c)
{
    mlayout L;
    L.rows = c->B * c->Hq * c->n;
    L.P = c->nshards;
    const int64_t R = c->dv + c->o_pad, LR = 1 + c->lse_pad;
    if (c->parts_layout == INTERLEAVED) {
        L.ors = L.P * R;
        L.ops = R;
        L.lrs = L.P * LR;
        L.lps = LR;
    } else {
        L.ors = R;
        L.ops = L.rows * R + 3;   /* a gap between parts too */
        L.lrs = LR;
        L.lps = L.rows * LR + 1;
    }
    L.o_count = (size_t)((L.P - 1) * L.ops + L.rows * L.ors + c->dv);
    L.lse_count = (size_t)((L.P - 1) * L.lps + L.rows * L.lrs + 1);
    L.out_stride = c->dv + c->out_pad;
    L.out_count = (size_t)(L.rows * L.out_stride);
    L.lse_out_count = c->lse_out_stride ? (size_t)(L.rows * c->lse_out_stride) : 0;
    return L;
}

static int64_t m_of(const mcase *c, int64_t b)
{
    return c->use_kv_lens ? c->kv_lens[b] : c->m;
}

/* Q, K, V dense BHSD; K and V rows past m_b are NaN (never read). */
typedef struct inputs {
    float *q, *k, *v;
} inputs;

static inputs make_inputs(const mcase *c)
{
    inputs in;
    const size_t nq = (size_t)(c->B * c->Hq * c->n * c->dk);
    const size_t nk = (size_t)(c->B * c->Hkv * c->m * c->dk);
    const size_t nv = (size_t)(c->B * c->Hkv * c->m * c->dv);
    in.q = falloc(nq);
    in.k = falloc(nk);
    in.v = falloc(nv);
    trng r;
    trng_seed(&r, c->seed);
    for (size_t x = 0; x < nq; x++)
        in.q[x] = (float)trng_uniform(&r, -1.0, 1.0);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t j = 0; j < c->m; j++) {
                const int pad = j >= m_of(c, b);
                float *kr = in.k + ((b * c->Hkv + h) * c->m + j) * c->dk;
                float *vr = in.v + ((b * c->Hkv + h) * c->m + j) * c->dv;
                for (int64_t d = 0; d < c->dk; d++)
                    kr[d] = pad ? NAN : (float)trng_uniform(&r, -1.0, 1.0);
                for (int64_t d = 0; d < c->dv; d++)
                    vr[d] = pad ? NAN : (float)trng_uniform(&r, -1.0, 1.0);
            }
    return in;
}

static void free_inputs(inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
}

/* The desc of the full problem over dense BHSD tensors, with want_lse. */
static attn_sdpa_desc full_desc(const mcase *c)
{
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = c->B;
    d.q_heads = c->Hq;
    d.kv_heads = c->Hkv;
    d.q_len = c->n;
    d.kv_len = c->m;
    d.qk_dim = c->dk;
    d.v_dim = c->dv;
    d.q = attn_view_bhsd(c->Hq, c->n, c->dk);
    d.k = attn_view_bhsd(c->Hkv, c->m, c->dk);
    d.v = attn_view_bhsd(c->Hkv, c->m, c->dv);
    d.o = attn_view_bhsd(c->Hq, c->n, c->dv);
    d.want_lse = 1;
    d.lse = attn_view_bhsd(c->Hq, c->n, 1);
    d.use_kv_lens = c->use_kv_lens;
    d.threads = 1;
    if (c->causal) {
        d.align = ATTN_ALIGN_BOTTOM_RIGHT;
        d.window_right = 0;
    }
    return d;
}

/* Run shard s (keys [k0, k0 + len)) over batches [b0, b0 + nb) into its
 * slots of the partial buffers. */
static void run_shard(const mcase *c, const mlayout *L, const inputs *in, int s, int64_t k0,
                      int64_t len, int64_t b0, int64_t nb, float *op, float *lp)
{
    attn_sdpa_desc d = full_desc(c);
    d.batch = nb;
    d.kv_len = len;
    d.o = (attn_view){ c->Hq * c->n * L->ors, c->n * L->ors, L->ors };
    d.lse = (attn_view){ c->Hq * c->n * L->lrs, c->n * L->lrs, L->lrs };
    int32_t kvl[4];
    d.use_kv_lens = 0;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t e = m_of(c, b0 + b) - k0;
        kvl[b] = (int32_t)(e < 0 ? 0 : e > len ? len : e);
        if (kvl[b] < len)
            d.use_kv_lens = 1;
    }
    if (c->causal) {
        /* nb == 1 here: the diagonal must sit at i + m_b - n - k0. */
        const int64_t e = m_of(c, b0) - k0;
        d.window_right = e > len ? e - len : 0;
    }
    attn_sdpa_args a;
    memset(&a, 0, sizeof a);
    a.q = in->q + b0 * d.q.batch;
    a.k = in->k + b0 * d.k.batch + k0 * d.k.seq;
    a.v = in->v + b0 * d.v.batch + k0 * d.v.seq;
    a.o = op + s * L->ops + b0 * d.o.batch;
    a.lse = lp + s * L->lps + b0 * d.lse.batch;
    a.kv_lens = d.use_kv_lens ? kvl : NULL;
    const attn_status st = attn_sdpa(&d, &a);
    if (st != ATTN_OK)
        fail_msg("shard %d (b0 %lld): attn_sdpa returned %s", s, (long long)b0,
                 attn_status_str(st));
}

typedef struct errs {
    double o_full, lse_full, o_ref, lse_ref;
} errs;

static void upd(double *mx, double err)
{
    if (err > *mx)
        *mx = err;
}

static long check_value(const char *what, const mcase *c, int64_t r, int64_t j, double got,
                        double want, double *mx)
{
    const double err = fabs(got - want);
    upd(mx, err);
    if (!(err <= TOL * (1.0 + fabs(want)))) {
        printf("FAIL %s: row %lld col %lld: %.9g vs %s %.9g (err %.3g)\n", c->name,
               (long long)r, (long long)j, got, what, want, err);
        return 1;
    }
    return 0;
}

static long run_case(const mcase *c, errs *E)
{
    const mlayout L = layout_of(c);
    inputs in = make_inputs(c);
    long bad = 0;

    /* (a) the full call and (b) the reference. */
    attn_sdpa_desc fd = full_desc(c);
    float *o_full = falloc((size_t)(L.rows * c->dv));
    float *lse_full = falloc((size_t)L.rows);
    int32_t kvl[4];
    for (int64_t b = 0; b < c->B; b++)
        kvl[b] = (int32_t)m_of(c, b);
    attn_sdpa_args fa;
    memset(&fa, 0, sizeof fa);
    fa.q = in.q;
    fa.k = in.k;
    fa.v = in.v;
    fa.o = o_full;
    fa.lse = lse_full;
    fa.kv_lens = c->use_kv_lens ? kvl : NULL;
    assert_int_equal(attn_sdpa(&fd, &fa), ATTN_OK);
    ref_out ref;
    assert_int_equal(ref_sdpa_alloc(&fd, &fa, &ref), 0);

    /* The shards. */
    float *op = falloc(L.o_count), *lp = falloc(L.lse_count);
    fill(op, L.o_count, NAN);
    fill(lp, L.lse_count, NAN);
    int64_t k0 = 0;
    for (int s = 0; s < c->nshards; s++) {
        const int64_t len = c->shard[s];
        if (len == 0) {
            /* No keys, no call: every row of the part is empty, its O is
             * left NaN (never read). */
            for (int64_t r = 0; r < L.rows; r++)
                lp[s * L.lps + r * L.lrs] = -INFINITY;
        } else if (c->causal) {
            for (int64_t b = 0; b < c->B; b++)
                run_shard(c, &L, &in, s, k0, len, b, 1, op, lp);
        } else {
            run_shard(c, &L, &in, s, k0, len, 0, c->B, op, lp);
        }
        k0 += len;
    }
    assert_int_equal(k0, c->m);

    /* The merge. */
    float *op_copy = falloc(L.o_count), *lp_copy = falloc(L.lse_count);
    memcpy(op_copy, op, L.o_count * sizeof(float));
    memcpy(lp_copy, lp, L.lse_count * sizeof(float));
    float *out = falloc(L.out_count);
    float *lse_out = L.lse_out_count ? falloc(L.lse_out_count) : NULL;
    fill(out, L.out_count, sentinel());
    if (lse_out)
        fill(lse_out, L.lse_out_count, sentinel());
    const attn_partials_merge_args ma = {
        .parts = L.P, .rows = L.rows, .dim = c->dv,
        .o_parts = op, .o_part_stride = L.ops, .o_row_stride = L.ors,
        .lse_parts = lp, .lse_part_stride = L.lps, .lse_row_stride = L.lrs,
        .o = out, .o_out_stride = L.out_stride,
        .lse_out = lse_out, .lse_out_stride = c->lse_out_stride,
    };
    assert_int_equal(attn_partials_merge(&ma), ATTN_OK);
    if (memcmp(op, op_copy, L.o_count * sizeof(float)) ||
        memcmp(lp, lp_copy, L.lse_count * sizeof(float))) {
        printf("FAIL %s: the merge changed its inputs\n", c->name);
        bad++;
    }

    for (int64_t r = 0; r < L.rows; r++) {
        const float *orow = out + r * L.out_stride;
        const double rl = ref.lse[r];
        for (int64_t j = c->dv; j < L.out_stride; j++)
            if (!is_sentinel(orow[j])) {
                printf("FAIL %s: row %lld: gap written\n", c->name, (long long)r);
                bad++;
                break;
            }
        if (lse_out)
            for (int64_t j = 1; j < c->lse_out_stride; j++)
                if (!is_sentinel(lse_out[r * c->lse_out_stride + j])) {
                    printf("FAIL %s: row %lld: lse gap written\n", c->name, (long long)r);
                    bad++;
                    break;
                }
        if (rl == -INFINITY) {
            /* Nothing visible in any shard: exactly what attn_sdpa writes. */
            int ok = lse_full[r] == -INFINITY && (!lse_out || lse_out[r * c->lse_out_stride] ==
                                                  -INFINITY);
            for (int64_t j = 0; j < c->dv; j++)
                ok &= orow[j] == 0.0f;
            if (!ok) {
                printf("FAIL %s: row %lld: empty row not O 0, lse -inf\n", c->name,
                       (long long)r);
                bad++;
            }
            continue;
        }
        for (int64_t j = 0; j < c->dv; j++) {
            bad += check_value("full", c, r, j, orow[j], o_full[r * c->dv + j], &E->o_full);
            bad += check_value("ref", c, r, j, orow[j], ref.o[r * c->dv + j], &E->o_ref);
        }
        if (lse_out) {
            const float l = lse_out[r * c->lse_out_stride];
            bad += check_value("full lse", c, r, -1, l, lse_full[r], &E->lse_full);
            bad += check_value("ref lse", c, r, -1, l, rl, &E->lse_ref);
        }
        if (bad > 20)
            break;
    }

    ref_out_free(&ref);
    free(o_full);
    free(lse_full);
    free(op);
    free(lp);
    free(op_copy);
    free(lp_copy);
    free(out);
    free(lse_out);
    free_inputs(&in);
    return bad;
}

static void test_shards(void **state)
{
    (void)state;
    long bad = 0;
    errs all = {0, 0, 0, 0};
    for (size_t x = 0; x < sizeof cases / sizeof cases[0]; x++) {
        errs E = {0, 0, 0, 0};
        bad += run_case(&cases[x], &E);
        printf("  [merge] %-52s O vs full %.2e, vs ref %.2e; lse vs full %.2e, vs ref %.2e\n",
               cases[x].name, E.o_full, E.o_ref, E.lse_full, E.lse_ref);
        upd(&all.o_full, E.o_full);
        upd(&all.o_ref, E.o_ref);
        upd(&all.lse_full, E.lse_full);
        upd(&all.lse_ref, E.lse_ref);
    }
    printf("  [merge] all cases: max |err| O vs full %.2e, vs ref %.2e; lse vs full %.2e, "
           "vs ref %.2e (tolerance %.0e * (1 + |ref|))\n",
           all.o_full, all.o_ref, all.lse_full, all.lse_ref, TOL);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------ hand-made parts */

/* The merge in double, written from the formula of attn.h (lse = log sum
 * exp(lse_p), O = sum exp(lse_p - lse) O_p), for rows with finite lse_p
 * or -INFINITY and at least one finite. */
static void merge_double(int64_t parts, int64_t dim, const float *o, int64_t ops,
                         const float *lse, int64_t lps, double *o_out, double *lse_out)
{
    double mx = -INFINITY;
    for (int64_t p = 0; p < parts; p++)
        mx = fmax(mx, lse[p * lps]);
    double s = 0.0;
    for (int64_t p = 0; p < parts; p++)
        if (lse[p * lps] != -INFINITY)
            s += exp(lse[p * lps] - mx);
    *lse_out = mx + log(s);
    /* exp(lse_p - lse) as exp((lse_p - mx) - log s): lse itself may have
     * absorbed log s (at 3e38 a double's ulp is 2^75). */
    for (int64_t j = 0; j < dim; j++) {
        double acc = 0.0;
        for (int64_t p = 0; p < parts; p++)
            if (lse[p * lps] != -INFINITY)
                acc += exp((lse[p * lps] - mx) - log(s)) * o[p * ops + j];
        o_out[j] = acc;
    }
}

/* Three parts, interleaved (part stride dim, row stride parts * dim), one
 * row per special case; every row is checked. */
static void test_special_rows(void **state)
{
    (void)state;
    enum { P = 3, D = 7, ROWS = 8 };
    static const float lse[ROWS][P] = {
        { 1.0f, -INFINITY, 0.5f },        /* NaN O_1 behind -inf: unseen */
        { -INFINITY, -INFINITY, -INFINITY }, /* empty row */
        { 0.0f, NAN, 1.0f },              /* NaN lse: NaN row */
        { INFINITY, 0.0f, 0.0f },         /* +inf: NaN row */
        { -INFINITY, 2.0f, -INFINITY },   /* one part: O_1 bit for bit */
        { 80.0f, -80.0f, 0.0f },          /* wide spread */
        { -1e30f, 0.0f, 1e30f },          /* weights underflow to 0 */
        { 3e38f, 3e38f, -3e38f },         /* near FLT_MAX */
    };
    float o[ROWS][P][D], out[ROWS][D], lo[ROWS], o_copy[ROWS][P][D];
    trng r;
    trng_seed(&r, 42);
    for (int i = 0; i < ROWS; i++)
        for (int p = 0; p < P; p++)
            for (int j = 0; j < D; j++)
                o[i][p][j] = lse[i][p] == -INFINITY ? NAN : (float)trng_uniform(&r, -1.0, 1.0);
    memcpy(o_copy, o, sizeof o);
    fill(&out[0][0], ROWS * D, sentinel());
    fill(lo, ROWS, sentinel());
    const attn_partials_merge_args a = {
        .parts = P, .rows = ROWS, .dim = D,
        .o_parts = &o[0][0][0], .o_part_stride = D, .o_row_stride = P * D,
        .lse_parts = &lse[0][0], .lse_part_stride = 1, .lse_row_stride = P,
        .o = &out[0][0], .o_out_stride = D, .lse_out = lo, .lse_out_stride = 1,
    };
    assert_int_equal(attn_partials_merge(&a), ATTN_OK);
    assert_memory_equal(o, o_copy, sizeof o);

    for (int i = 0; i < ROWS; i++) {
        if (i == 1) {
            assert_true(lo[i] == -INFINITY);
            for (int j = 0; j < D; j++)
                assert_true(out[i][j] == 0.0f && !signbit(out[i][j]));
        } else if (i == 2 || i == 3) {
            assert_true(isnan(lo[i]));
            for (int j = 0; j < D; j++)
                assert_true(isnan(out[i][j]));
        } else if (i == 4) {
            assert_memory_equal(out[i], o[i][1], sizeof out[i]);
            assert_true(lo[i] == 2.0f);
        } else {
            double od[D], ld;
            merge_double(P, D, &o[i][0][0], D, lse[i], 1, od, &ld);
            assert_true(isfinite(lo[i]));
            if (!(fabs(lo[i] - ld) <= 1e-7 * (1.0 + fabs(ld))))
                fail_msg("row %d: lse %.9g, double %.17g", i, lo[i], ld);
            for (int j = 0; j < D; j++)
                if (!(fabs(out[i][j] - od[j]) <= 1e-7 * (1.0 + fabs(od[j]))))
                    fail_msg("row %d col %d: %.9g, double %.17g", i, j, out[i][j], od[j]);
        }
    }
}

/* parts = 1 gives back O_p and lse_p bit for bit: -0, denormals, large and
 * tiny values, a strided input and a padded output. */
static void test_one_part_identity(void **state)
{
    (void)state;
    enum { ROWS = 50, D = 33, ORS = 40, OUTS = 35 };
    float o[ROWS * ORS], lse[ROWS * 2], out[ROWS * OUTS], lo[ROWS * 2];
    trng r;
    trng_seed(&r, 7);
    for (int x = 0; x < ROWS * ORS; x++) {
        switch (x % 5) {
        case 0: o[x] = -0.0f; break;
        case 1: o[x] = (float)trng_uniform(&r, -1.0, 1.0) * 1e-40f; break;  /* denormal */
        case 2: o[x] = (float)trng_uniform(&r, -1.0, 1.0) * 1e30f; break;
        default: o[x] = (float)trng_uniform(&r, -1.0, 1.0); break;
        }
    }
    for (int x = 0; x < ROWS * 2; x++)
        lse[x] = x % 7 == 0 ? -0.0f : (float)trng_uniform(&r, -1e4, 1e4);
    fill(out, ROWS * OUTS, sentinel());
    fill(lo, ROWS * 2, sentinel());
    const attn_partials_merge_args a = {
        .parts = 1, .rows = ROWS, .dim = D,
        .o_parts = o, .o_part_stride = 12345, .o_row_stride = ORS,
        .lse_parts = lse, .lse_part_stride = 999, .lse_row_stride = 2,
        .o = out, .o_out_stride = OUTS, .lse_out = lo, .lse_out_stride = 2,
    };
    assert_int_equal(attn_partials_merge(&a), ATTN_OK);
    for (int i = 0; i < ROWS; i++) {
        assert_memory_equal(out + i * OUTS, o + i * ORS, D * sizeof(float));
        assert_memory_equal(lo + 2 * i, lse + 2 * i, sizeof(float));
        for (int j = D; j < OUTS; j++)
            assert_true(is_sentinel(out[i * OUTS + j]));
        assert_true(is_sentinel(lo[2 * i + 1]));
    }
}

/* Broadcast inputs (strides 0) and merging a part with itself: P copies of
 * the same (O, lse) give O and lse + log P. */
static void test_broadcast_inputs(void **state)
{
    (void)state;
    enum { P = 4, ROWS = 6, D = 5 };
    float o[D] = { 0.25f, -1.0f, 0.5f, 3.0f, -0.125f };
    float lse = 1.5f;
    float out[ROWS * D], lo[ROWS];
    const attn_partials_merge_args a = {
        .parts = P, .rows = ROWS, .dim = D,
        .o_parts = o, .o_part_stride = 0, .o_row_stride = 0,
        .lse_parts = &lse, .lse_part_stride = 0, .lse_row_stride = 0,
        .o = out, .o_out_stride = D, .lse_out = lo, .lse_out_stride = 1,
    };
    assert_int_equal(attn_partials_merge(&a), ATTN_OK);
    for (int i = 0; i < ROWS; i++) {
        assert_float_equal(lo[i], 1.5 + log(4.0), 1e-6);
        for (int j = 0; j < D; j++)
            assert_true(out[i * D + j] == o[j]);   /* (1/4) * 4 exactly */
    }
}

/* ----------------------------------------------------------- the errors */

enum { PTR_NONE = 0, PTR_ARGS, PTR_O_PARTS, PTR_LSE_PARTS, PTR_O, PTR_LSE_OUT };

typedef struct fset {
    size_t off;       /* an int64_t field of attn_partials_merge_args */
    int64_t val;
} fset;

typedef struct erow {
    const char *what;
    int ptr;          /* PTR_*: a pointer set to NULL */
    int nset;
    fset set[2];
    attn_status want;
} erow;

#define F(field) offsetof(attn_partials_merge_args, field)
#define S1(f, v) 1, { { F(f), (v) } }
#define S2(f, v, g, w) 2, { { F(f), (v) }, { F(g), (w) } }

/* The base: parts 3, rows 4, dim 5, interleaved parts with padding. */
enum { EP = 3, ER = 4, ED = 5, EORS = EP * 6, ELRS = EP * 2, EOUT = 7, ELOUT = 2 };

static const erow erows[] = {
    { "valid base", PTR_NONE, 0, {{0, 0}}, ATTN_OK },
    { "args NULL", PTR_ARGS, 0, {{0, 0}}, ATTN_ERR_NULL_ARGUMENT },
    { "o_parts NULL", PTR_O_PARTS, 0, {{0, 0}}, ATTN_ERR_NULL_ARGUMENT },
    { "lse_parts NULL", PTR_LSE_PARTS, 0, {{0, 0}}, ATTN_ERR_NULL_ARGUMENT },
    { "o NULL", PTR_O, 0, {{0, 0}}, ATTN_ERR_NULL_ARGUMENT },
    { "lse_out NULL (allowed)", PTR_LSE_OUT, 0, {{0, 0}}, ATTN_OK },
    { "lse_out NULL, its stride not read", PTR_LSE_OUT, S1(lse_out_stride, -1), ATTN_OK },
    { "lse_out NULL, its stride huge", PTR_LSE_OUT, S1(lse_out_stride, INT64_MAX), ATTN_OK },
    { "NULL before a bad size", PTR_O, S1(parts, 0), ATTN_ERR_NULL_ARGUMENT },
    { "parts 0", PTR_NONE, S1(parts, 0), ATTN_ERR_BAD_SIZE },
    { "parts -1", PTR_NONE, S1(parts, -1), ATTN_ERR_BAD_SIZE },
    { "parts INT64_MIN", PTR_NONE, S1(parts, INT64_MIN), ATTN_ERR_BAD_SIZE },
    { "parts 1", PTR_NONE, S1(parts, 1), ATTN_OK },
    { "rows 0", PTR_NONE, S1(rows, 0), ATTN_ERR_BAD_SIZE },
    { "rows -3", PTR_NONE, S1(rows, -3), ATTN_ERR_BAD_SIZE },
    { "rows 1", PTR_NONE, S1(rows, 1), ATTN_OK },
    { "dim 0", PTR_NONE, S1(dim, 0), ATTN_ERR_BAD_SIZE },
    { "dim -1", PTR_NONE, S1(dim, -1), ATTN_ERR_BAD_SIZE },
    { "dim 1", PTR_NONE, S1(dim, 1), ATTN_OK },
    { "bad size before a bad stride", PTR_NONE, S2(dim, 0, o_row_stride, -1),
      ATTN_ERR_BAD_SIZE },
    { "o_part_stride -1", PTR_NONE, S1(o_part_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "o_part_stride INT64_MIN", PTR_NONE, S1(o_part_stride, INT64_MIN), ATTN_ERR_BAD_STRIDE },
    { "o_part_stride 0 (broadcast input)", PTR_NONE, S1(o_part_stride, 0), ATTN_OK },
    { "o_row_stride -1", PTR_NONE, S1(o_row_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "o_row_stride 0 (broadcast input)", PTR_NONE, S1(o_row_stride, 0), ATTN_OK },
    { "o_row_stride 1 < dim (overlapping input)", PTR_NONE, S1(o_row_stride, 1), ATTN_OK },
    { "lse_part_stride -1", PTR_NONE, S1(lse_part_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "lse_part_stride 0", PTR_NONE, S1(lse_part_stride, 0), ATTN_OK },
    { "lse_row_stride -1", PTR_NONE, S1(lse_row_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "lse_row_stride 0", PTR_NONE, S1(lse_row_stride, 0), ATTN_OK },
    { "o_out_stride -1", PTR_NONE, S1(o_out_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "o_out_stride 0", PTR_NONE, S1(o_out_stride, 0), ATTN_ERR_BAD_STRIDE },
    { "o_out_stride dim - 1", PTR_NONE, S1(o_out_stride, ED - 1), ATTN_ERR_BAD_STRIDE },
    { "o_out_stride dim", PTR_NONE, S1(o_out_stride, ED), ATTN_OK },
    { "o_out_stride < dim with one row", PTR_NONE, S2(rows, 1, o_out_stride, ED - 1),
      ATTN_ERR_BAD_STRIDE },
    { "lse_out_stride -1", PTR_NONE, S1(lse_out_stride, -1), ATTN_ERR_BAD_STRIDE },
    { "lse_out_stride 0 with rows > 1", PTR_NONE, S1(lse_out_stride, 0), ATTN_ERR_BAD_STRIDE },
    { "lse_out_stride 0 with one row", PTR_NONE, S2(rows, 1, lse_out_stride, 0), ATTN_OK },
    { "lse_out_stride 1", PTR_NONE, S1(lse_out_stride, 1), ATTN_OK },
    { "bad stride before too large", PTR_NONE, S2(o_part_stride, INT64_MAX, o_row_stride, -1),
      ATTN_ERR_BAD_STRIDE },
    /* Extents: TOO_LARGE from the first element count whose bytes pass
     * 2^63 - 1 (2^61 floats), or when the count itself overflows. */
    { "o_part_stride INT64_MAX", PTR_NONE, S1(o_part_stride, INT64_MAX), ATTN_ERR_TOO_LARGE },
    { "o_part_stride: 2 x stride overflows", PTR_NONE, S1(o_part_stride, INT64_MAX / 2 + 1),
      ATTN_ERR_TOO_LARGE },
    { "o input extent 2^61 floats", PTR_NONE,
      S2(parts, 2, o_part_stride, ((int64_t)1 << 61) - (ER - 1) * EORS - ED),
      ATTN_ERR_TOO_LARGE },
    { "o_row_stride INT64_MAX", PTR_NONE, S1(o_row_stride, INT64_MAX), ATTN_ERR_TOO_LARGE },
    { "rows INT64_MAX", PTR_NONE, S1(rows, INT64_MAX), ATTN_ERR_TOO_LARGE },
    { "lse_part_stride INT64_MAX", PTR_NONE, S1(lse_part_stride, INT64_MAX),
      ATTN_ERR_TOO_LARGE },
    { "lse input extent 2^61 floats", PTR_NONE,
      S2(rows, 2, lse_row_stride, ((int64_t)1 << 61) - (EP - 1) * 2 - 1), ATTN_ERR_TOO_LARGE },
    { "lse_row_stride INT64_MAX", PTR_NONE, S1(lse_row_stride, INT64_MAX), ATTN_ERR_TOO_LARGE },
    { "o_out_stride INT64_MAX", PTR_NONE, S1(o_out_stride, INT64_MAX), ATTN_ERR_TOO_LARGE },
    { "o output extent 2^61 floats", PTR_NONE,
      S2(rows, 2, o_out_stride, ((int64_t)1 << 61) - ED), ATTN_ERR_TOO_LARGE },
    { "dim 2^61 (o_out_stride too)", PTR_NONE,
      S2(dim, (int64_t)1 << 61, o_out_stride, (int64_t)1 << 61), ATTN_ERR_TOO_LARGE },
    { "lse_out_stride INT64_MAX", PTR_NONE, S1(lse_out_stride, INT64_MAX),
      ATTN_ERR_TOO_LARGE },
    { "lse output extent 2^61 floats", PTR_NONE,
      S2(rows, 2, lse_out_stride, ((int64_t)1 << 61) - 1), ATTN_ERR_TOO_LARGE },
};

static void test_errors(void **state)
{
    (void)state;
    float o_parts[ER * EORS], lse_parts[ER * ELRS], out[ER * EOUT], lo[ER * ELOUT];
    trng r;
    trng_seed(&r, 3);
    for (size_t x = 0; x < sizeof o_parts / sizeof o_parts[0]; x++)
        o_parts[x] = (float)trng_uniform(&r, -1.0, 1.0);
    for (size_t x = 0; x < sizeof lse_parts / sizeof lse_parts[0]; x++)
        lse_parts[x] = (float)trng_uniform(&r, -5.0, 5.0);
    float o_copy[ER * EORS], lse_copy[ER * ELRS];
    memcpy(o_copy, o_parts, sizeof o_parts);
    memcpy(lse_copy, lse_parts, sizeof lse_parts);
    const attn_partials_merge_args base = {
        .parts = EP, .rows = ER, .dim = ED,
        .o_parts = o_parts, .o_part_stride = 6, .o_row_stride = EORS,
        .lse_parts = lse_parts, .lse_part_stride = 2, .lse_row_stride = ELRS,
        .o = out, .o_out_stride = EOUT, .lse_out = lo, .lse_out_stride = ELOUT,
    };
    int fails = 0;
    for (size_t x = 0; x < sizeof erows / sizeof erows[0]; x++) {
        const erow *e = &erows[x];
        attn_partials_merge_args a = base;
        for (int k = 0; k < e->nset; k++)
            memcpy((char *)&a + e->set[k].off, &e->set[k].val, sizeof(int64_t));
        switch (e->ptr) {
        case PTR_O_PARTS: a.o_parts = NULL; break;
        case PTR_LSE_PARTS: a.lse_parts = NULL; break;
        case PTR_O: a.o = NULL; break;
        case PTR_LSE_OUT: a.lse_out = NULL; break;
        default: break;
        }
        fill(out, ER * EOUT, sentinel());
        fill(lo, ER * ELOUT, sentinel());
        const attn_status s = attn_partials_merge(e->ptr == PTR_ARGS ? NULL : &a);
        if (s != e->want) {
            printf("FAIL %s: returned %d (%s), want %d (%s)\n", e->what, (int)s,
                   attn_status_str(s), (int)e->want, attn_status_str(e->want));
            fails++;
        }
        if (memcmp(o_parts, o_copy, sizeof o_parts) || memcmp(lse_parts, lse_copy,
                                                               sizeof lse_parts)) {
            printf("FAIL %s: inputs changed\n", e->what);
            fails++;
        }
        if (s == ATTN_OK)
            continue;
        int untouched = 1;
        for (int i = 0; i < ER * EOUT; i++)
            untouched &= is_sentinel(out[i]);
        for (int i = 0; i < ER * ELOUT; i++)
            untouched &= is_sentinel(lo[i]);
        if (!untouched) {
            printf("FAIL %s: outputs written on error\n", e->what);
            fails++;
        }
    }
    printf("  [merge] %zu error-table rows\n", sizeof erows / sizeof erows[0]);
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_special_rows),
        cmocka_unit_test(test_one_part_identity),
        cmocka_unit_test(test_broadcast_inputs),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
