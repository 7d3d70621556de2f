/*
 * test_positions.c -- blocks of a longer sequence (attn.h, "Blocks of a
 * longer sequence"): use_positions, q_pos0 and kv_pos0.
 *
 * The table (cases[]): each row is a whole problem (B, Hq, Hkv, N, M, dk,
 * dv, alignment, window, lengths, mask, bias, dropout) and cuts of its
 * query rows and of its keys into runs (uneven, some of one row).  Every
 * (query run, key run) block is one attn_sdpa call with use_positions,
 * q_pos0 and kv_pos0 the runs' starts, its views the whole tensors' with
 * the pointers moved to the block (mask and bias too), the whole problem's
 * lengths (with BOTTOM_RIGHT and no lengths, N and M for every batch, as
 * attn.h asks).  Then:
 * - forward: the blocks' O and logsumexp, merged over the key runs by
 *   attn_partials_merge, equal the float64 reference of the whole problem
 *   and one attn_sdpa call on it, |err| <= TOL (1 + |ref|); rows with no
 *   visible key are exactly O = 0, lse = -INFINITY;
 * - one block covering everything (positions 0) is bitwise the call
 *   without positions;
 * - backward: each block's attn_sdpa_bwd (given the whole problem's O and
 *   logsumexp) summed over the blocks equals the whole problem's dQ, dK,
 *   dV: against the float64 reference within 2 x its fp32 error bound plus
 *   TOL (1 + |ref|), and against one attn_sdpa_bwd call within TOL_G (1 +
 *   |ref|);
 * - dropout: the blocks draw the whole problem's keep decisions (any
 *   other draw fails the comparisons above by far more than TOL).
 * Then the statuses of the positions' rules, as a table.
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

/* Forward: a few hundred float roundings on values of size <= 1 (each
 * block and the merge carry fp32 error of their own, as in test_merge.c;
 * the largest seen is 1.0e-7).  Gradients sum over the blocks in another
 * order than one call does: TOL_G relative to 1 + |value| (seen: 1.7e-7). */
#define TOL 1e-6
#define TOL_G 2e-6
#define MAXCUT 6

typedef struct pcase {
    const char *name;
    int64_t B, Hq, Hkv, N, M, dk, dv;
    attn_align align;
    int64_t wl, wr;
    int kv_lens, q_lens;        /* use per-batch lengths (shorter than N, M) */
    attn_mask_mode mask;
    int bias;
    double dropout;
    int64_t qcut[MAXCUT];       /* run starts after 0, ending at 0 */
    int64_t kcut[MAXCUT];
} pcase;

static const pcase cases[] = {
    { "full, 2x3 blocks", 2, 2, 2, 24, 24, 16, 16, ATTN_ALIGN_TOP_LEFT, -1, -1, 0, 0,
      ATTN_MASK_NONE, 0, 0.0, { 10 }, { 7, 16 } },
    { "causal top-left", 1, 2, 1, 33, 33, 8, 8, ATTN_ALIGN_TOP_LEFT, -1, 0, 0, 0,
      ATTN_MASK_NONE, 0, 0.0, { 8, 17, 25 }, { 8, 17, 25 } },
    { "causal bottom-right, n < m", 2, 4, 2, 13, 29, 16, 8, ATTN_ALIGN_BOTTOM_RIGHT, -1, 0, 0,
      0, ATTN_MASK_NONE, 0, 0.0, { 5 }, { 9, 18, 20 } },
    { "causal bottom-right, n > m", 1, 2, 2, 21, 9, 8, 8, ATTN_ALIGN_BOTTOM_RIGHT, -1, 0, 0, 0,
      ATTN_MASK_NONE, 0, 0.0, { 4, 13 }, { 3, 6 } },
    { "sliding window 5 / 2", 1, 2, 1, 40, 40, 8, 16, ATTN_ALIGN_TOP_LEFT, 5, 2, 0, 0,
      ATTN_MASK_NONE, 0, 0.0, { 10, 20, 30 }, { 10, 20, 30 } },
    { "window, bottom-right, lengths", 3, 2, 1, 19, 27, 8, 8, ATTN_ALIGN_BOTTOM_RIGHT, 6, 0, 1,
      1, ATTN_MASK_NONE, 0, 0.0, { 7, 14 }, { 5, 13, 26 } },
    { "lengths, full", 3, 2, 2, 17, 23, 8, 8, ATTN_ALIGN_TOP_LEFT, -1, -1, 1, 1, ATTN_MASK_NONE,
      0, 0.0, { 1, 9 }, { 11 } },
    { "GQA, bias, keep-mask, causal", 2, 4, 2, 20, 20, 16, 16, ATTN_ALIGN_TOP_LEFT, -1, 0, 0, 0,
      ATTN_MASK_KEEP_NONZERO, 1, 0.0, { 6, 12 }, { 6, 12 } },
    { "drop-mask, bias, lengths", 2, 2, 1, 15, 31, 8, 8, ATTN_ALIGN_BOTTOM_RIGHT, -1, -1, 1, 0,
      ATTN_MASK_DROP_NONZERO, 1, 0.0, { 8 }, { 4, 19, 30 } },
    { "dropout 0.2, causal", 2, 2, 1, 26, 26, 8, 8, ATTN_ALIGN_TOP_LEFT, -1, 0, 0, 0,
      ATTN_MASK_NONE, 0, 0.2, { 5, 13, 21 }, { 3, 13, 22 } },
    { "dropout 0.3, window, lengths", 2, 4, 4, 22, 30, 8, 16, ATTN_ALIGN_BOTTOM_RIGHT, 7, 3, 1,
      1, ATTN_MASK_NONE, 1, 0.3, { 11 }, { 2, 15, 29 } },
    /* the decode path (few query rows, long keys; split-K when the items
     * are few) */
    { "decode: 1 query, GQA 4, causal", 1, 8, 2, 1, 300, 32, 32, ATTN_ALIGN_BOTTOM_RIGHT, -1, 0,
      0, 0, ATTN_MASK_NONE, 0, 0.0, { 0 }, { 77, 160, 299 } },
    { "decode: 4 queries, window, lengths", 2, 4, 1, 4, 260, 32, 32, ATTN_ALIGN_BOTTOM_RIGHT,
      100, 0, 1, 0, ATTN_MASK_NONE, 0, 0.0, { 2 }, { 128, 200 } },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static uint64_t rng_state;
static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *frand(size_t n)
{
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = urand();
    return p;
}

static int runs(const int64_t *cut, int64_t len, int64_t *st)
{
    int r = 0;
    st[r++] = 0;
    for (int c = 0; c < MAXCUT && cut[c] > 0; c++)
        st[r++] = cut[c];
    st[r] = len;
    return r;
}

typedef struct problem {
    const pcase *c;
    attn_sdpa_desc d;       /* the whole problem, want_lse */
    attn_sdpa_args a;
    float *q, *k, *v, *bias, *dO;
    uint8_t *mask;
    int32_t kvl[4], ql[4];
    int32_t Mfull[4], Nfull[4];   /* M and N for every batch */
} problem;

static void problem_make(problem *P, const pcase *c)
{
    memset(P, 0, sizeof *P);
    P->c = c;
    rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(c - cases);
    attn_sdpa_desc *d = &P->d;
    attn_sdpa_desc_init(d);
    d->batch = c->B; d->q_heads = c->Hq; d->kv_heads = c->Hkv;
    d->q_len = c->N; d->kv_len = c->M; d->qk_dim = c->dk; d->v_dim = c->dv;
    d->q = attn_view_bhsd(c->Hq, c->N, c->dk);
    d->k = attn_view_bhsd(c->Hkv, c->M, c->dk);
    d->v = attn_view_bhsd(c->Hkv, c->M, c->dv);
    d->o = attn_view_bhsd(c->Hq, c->N, c->dv);
    d->align = c->align;
    d->window_left = c->wl;
    d->window_right = c->wr;
    d->want_lse = 1;
    d->lse = attn_view_bhsd(c->Hq, c->N, 1);
    d->use_kv_lens = c->kv_lens;
    d->use_q_lens = c->q_lens;
    d->threads = 2;
    P->q = frand((size_t)(c->B * c->Hq * c->N * c->dk));
    P->k = frand((size_t)(c->B * c->Hkv * c->M * c->dk));
    P->v = frand((size_t)(c->B * c->Hkv * c->M * c->dv));
    P->dO = frand((size_t)(c->B * c->Hq * c->N * c->dv));
    P->a.q = P->q; P->a.k = P->k; P->a.v = P->v;
    for (int64_t b = 0; b < c->B; b++) {
        P->Mfull[b] = (int32_t)c->M;
        P->Nfull[b] = (int32_t)c->N;
        P->kvl[b] = (int32_t)(c->M - 5 * b);
        P->ql[b] = (int32_t)(c->N - 3 * b);
    }
    if (c->kv_lens)
        P->a.kv_lens = P->kvl;
    if (c->q_lens)
        P->a.q_lens = P->ql;
    if (c->mask != ATTN_MASK_NONE) {
        d->mask_mode = c->mask;
        d->mask = attn_view_bhsd(c->Hq, c->N, c->M);
        size_t cnt = (size_t)(c->B * c->Hq * c->N * c->M);
        P->mask = malloc(cnt);
        assert_non_null(P->mask);
        for (size_t x = 0; x < cnt; x++) {
            int hide = urand() > 0.7f;
            P->mask[x] = (uint8_t)(c->mask == ATTN_MASK_KEEP_NONZERO ? !hide : hide);
        }
        P->a.mask = P->mask;
    }
    if (c->bias) {
        /* per head, broadcast over the batch */
        d->use_bias = 1;
        d->bias = attn_view_bhsd(c->Hq, c->N, c->M);
        d->bias.batch = 0;
        P->bias = frand((size_t)(c->Hq * c->N * c->M));
        P->a.bias = P->bias;
    }
    if (c->dropout > 0.0) {
        d->dropout_p = c->dropout;
        d->dropout_seed = 0x1234abcdull;
        d->dropout_offset = 77;
    }
}

static void problem_free(problem *P)
{
    free(P->q); free(P->k); free(P->v); free(P->bias); free(P->dO); free(P->mask);
}

/* The block (query rows [qa, qb), keys [ka, kb)) of the whole problem: its
 * desc and args, O and lse pointers left to the caller. */
static void block_of(const problem *P, int64_t qa, int64_t qb, int64_t ka, int64_t kb,
                     attn_sdpa_desc *bd, attn_sdpa_args *ba)
{
    const attn_sdpa_desc *d = &P->d;
    *bd = *d;
    bd->q_len = qb - qa;
    bd->kv_len = kb - ka;
    bd->use_positions = 1;
    bd->q_pos0 = qa;
    bd->kv_pos0 = ka;
    *ba = P->a;
    ba->q = P->q + qa * d->q.seq;
    ba->k = P->k + ka * d->k.seq;
    ba->v = P->v + ka * d->v.seq;
    if (P->mask)
        ba->mask = P->mask + qa * d->mask.seq + ka;
    if (P->bias)
        ba->bias = P->bias + qa * d->bias.seq + ka;
    /* Without lengths a block's whole lengths are its own ends; the
     * bottom-right diagonal needs the whole problem's (attn.h). */
    if (d->align == ATTN_ALIGN_BOTTOM_RIGHT) {
        if (!d->use_kv_lens) {
            bd->use_kv_lens = 1;
            ba->kv_lens = P->Mfull;
        }
        if (!d->use_q_lens) {
            bd->use_q_lens = 1;
            ba->q_lens = P->Nfull;
        }
    }
}

/* One-shot backward: plan, execute with internal workspace, destroy. */
static attn_status bwd_once(const attn_sdpa_bwd_desc *d, const attn_sdpa_bwd_args *a)
{
    attn_sdpa_bwd_plan *p;
    attn_status st = attn_sdpa_bwd_plan_create(&p, d);
    if (st != ATTN_OK)
        return st;
    st = attn_sdpa_bwd_execute(p, a, NULL, 0);
    attn_sdpa_bwd_plan_destroy(p);
    return st;
}

static double rel_err(double x, double ref)
{
    return fabs(x - ref) / (1.0 + fabs(ref));
}

static void check_case(const pcase *c)
{
    problem P;
    problem_make(&P, c);
    const attn_sdpa_desc *d = &P.d;
    const int64_t rowsN = c->B * c->Hq * c->N;
    const size_t on = (size_t)(rowsN * c->dv);

    /* the whole problem: attn and the float64 reference */
    float *Ow = malloc(on * sizeof(float)), *Lw = malloc((size_t)rowsN * sizeof(float));
    attn_sdpa_args aw = P.a;
    aw.o = Ow;
    aw.lse = Lw;
    assert_int_equal(attn_sdpa(d, &aw), ATTN_OK);
    ref_out ref;
    assert_int_equal(ref_sdpa_alloc(d, &aw, &ref), 0);

    /* one block over everything: bitwise the call without positions */
    {
        attn_sdpa_desc bd;
        attn_sdpa_args ba;
        block_of(&P, 0, c->N, 0, c->M, &bd, &ba);
        float *O1 = malloc(on * sizeof(float)), *L1 = malloc((size_t)rowsN * sizeof(float));
        ba.o = O1;
        ba.lse = L1;
        assert_int_equal(attn_sdpa(&bd, &ba), ATTN_OK);
        assert_memory_equal(O1, Ow, on * sizeof(float));
        assert_memory_equal(L1, Lw, (size_t)rowsN * sizeof(float));
        free(O1);
        free(L1);
    }

    int64_t qs[MAXCUT + 2], ks[MAXCUT + 2];
    const int nq = runs(c->qcut, c->N, qs), nk = runs(c->kcut, c->M, ks);

    /* forward by blocks: part t (key run t) holds whole-shaped O and lse */
    float *Op = malloc((size_t)nk * on * sizeof(float));
    float *Lp = malloc((size_t)nk * (size_t)rowsN * sizeof(float));
    for (int t = 0; t < nk; t++)
        for (int r = 0; r < nq; r++) {
            attn_sdpa_desc bd;
            attn_sdpa_args ba;
            block_of(&P, qs[r], qs[r + 1], ks[t], ks[t + 1], &bd, &ba);
            ba.o = Op + (size_t)t * on + qs[r] * d->o.seq;
            ba.lse = Lp + (size_t)t * (size_t)rowsN + qs[r] * d->lse.seq;
            assert_int_equal(attn_sdpa(&bd, &ba), ATTN_OK);
        }
    float *Om = malloc(on * sizeof(float)), *Lm = malloc((size_t)rowsN * sizeof(float));
    attn_partials_merge_args ma;
    attn_partials_merge_args_init(&ma);
    ma.parts = nk;
    ma.rows = rowsN;
    ma.dim = c->dv;
    ma.o_parts = Op;
    ma.o_part_stride = (int64_t)on;
    ma.o_row_stride = c->dv;
    ma.lse_parts = Lp;
    ma.lse_part_stride = rowsN;
    ma.lse_row_stride = 1;
    ma.o = Om;
    ma.o_out_stride = c->dv;
    ma.lse_out = Lm;
    ma.lse_out_stride = 1;
    assert_int_equal(attn_partials_merge(&ma), ATTN_OK);

    double eo = 0, el = 0, ew = 0;
    for (int64_t r = 0; r < rowsN; r++) {
        const double rl = ref.lse[r];
        if (rl == -INFINITY) {
            assert_true(Lm[r] == -INFINITY);
            for (int64_t x = 0; x < c->dv; x++)
                assert_true(Om[r * c->dv + x] == 0.0f);
            continue;
        }
        el = fmax(el, rel_err(Lm[r], rl));
        for (int64_t x = 0; x < c->dv; x++) {
            eo = fmax(eo, rel_err(Om[r * c->dv + x], ref.o[r * c->dv + x]));
            ew = fmax(ew, rel_err(Om[r * c->dv + x], Ow[r * c->dv + x]));
        }
    }
    print_message("  %-32s fwd: %dx%d blocks, O err %.1e (vs one call %.1e), lse %.1e\n",
                  c->name, nq, nk, eo, ew, el);
    assert_true(eo <= TOL && el <= TOL && ew <= TOL);

    /* backward by blocks, from the whole problem's O and lse */
    const size_t qn = (size_t)(c->B * c->Hq * c->N * c->dk);
    const size_t kn = (size_t)(c->B * c->Hkv * c->M * c->dk);
    const size_t vn = (size_t)(c->B * c->Hkv * c->M * c->dv);
    float *dQw = malloc(qn * 4), *dKw = malloc(kn * 4), *dVw = malloc(vn * 4);
    attn_sdpa_bwd_desc bw;
    attn_sdpa_bwd_desc_init(&bw);
    bw.fwd = *d;
    bw.d_o = d->o;
    bw.dq = d->q;
    bw.dk = d->k;
    bw.dv = d->v;
    attn_sdpa_bwd_args ga;
    attn_sdpa_bwd_args_init(&ga);
    ga.q = P.q; ga.k = P.k; ga.v = P.v; ga.o = Ow; ga.d_o = P.dO; ga.lse = Lw;
    ga.kv_lens = P.a.kv_lens; ga.q_lens = P.a.q_lens; ga.mask = P.a.mask; ga.bias = P.a.bias;
    ga.dq = dQw; ga.dk = dKw; ga.dv = dVw;
    assert_int_equal(bwd_once(&bw, &ga), ATTN_OK);
    ref_bwd_out rb;
    assert_int_equal(ref_sdpa_bwd_alloc(d, &aw, P.dO, d->o, 0, NULL, &rb), 0);

    float *dQs = calloc(qn, 4), *dKs = calloc(kn, 4), *dVs = calloc(vn, 4);
    float *dQt = malloc(qn * 4), *dKt = malloc(kn * 4), *dVt = malloc(vn * 4);
    for (int t = 0; t < nk; t++)
        for (int r = 0; r < nq; r++) {
            attn_sdpa_bwd_desc bb = bw;
            attn_sdpa_args ba;
            block_of(&P, qs[r], qs[r + 1], ks[t], ks[t + 1], &bb.fwd, &ba);
            attn_sdpa_bwd_args gb = ga;
            const int64_t qo = qs[r] * d->q.seq, oo = qs[r] * d->o.seq;
            const int64_t ko = ks[t] * d->k.seq, vo = ks[t] * d->v.seq;
            gb.q = ba.q; gb.k = ba.k; gb.v = ba.v; gb.mask = ba.mask; gb.bias = ba.bias;
            gb.kv_lens = ba.kv_lens; gb.q_lens = ba.q_lens;
            gb.o = Ow + oo;
            gb.d_o = P.dO + oo;
            gb.lse = Lw + qs[r] * d->lse.seq;
            gb.dq = dQt + qo;
            gb.dk = dKt + ko;
            gb.dv = dVt + vo;
            assert_int_equal(bwd_once(&bb, &gb), ATTN_OK);
            /* add the block's rows (dense bhsd: rows of every (b, h)) */
            for (int64_t bh = 0; bh < c->B * c->Hq; bh++)
                for (int64_t i = qs[r]; i < qs[r + 1]; i++)
                    for (int64_t x = 0; x < c->dk; x++) {
                        size_t at = (size_t)((bh * c->N + i) * c->dk + x);
                        dQs[at] += dQt[at];
                    }
            for (int64_t bh = 0; bh < c->B * c->Hkv; bh++)
                for (int64_t j = ks[t]; j < ks[t + 1]; j++) {
                    for (int64_t x = 0; x < c->dk; x++) {
                        size_t at = (size_t)((bh * c->M + j) * c->dk + x);
                        dKs[at] += dKt[at];
                    }
                    for (int64_t x = 0; x < c->dv; x++) {
                        size_t at = (size_t)((bh * c->M + j) * c->dv + x);
                        dVs[at] += dVt[at];
                    }
                }
        }
    double gq = 0, gk = 0, gv = 0, wq = 0, wk = 0, wv = 0;
    int bad = 0;
    const struct { const float *s, *w; const double *ref, *tol; size_t n; double *e, *ew; } g[3] = {
        { dQs, dQw, rb.dq, rb.dq_tol, qn, &gq, &wq },
        { dKs, dKw, rb.dk, rb.dk_tol, kn, &gk, &wk },
        { dVs, dVw, rb.dv, rb.dv_tol, vn, &gv, &wv },
    };
    for (int x = 0; x < 3; x++)
        for (size_t e = 0; e < g[x].n; e++) {
            const double err = fabs(g[x].s[e] - g[x].ref[e]);
            *g[x].e = fmax(*g[x].e, rel_err(g[x].s[e], g[x].ref[e]));
            *g[x].ew = fmax(*g[x].ew, rel_err(g[x].s[e], g[x].w[e]));
            if (!(err <= 2.0 * g[x].tol[e] + TOL * (1.0 + fabs(g[x].ref[e]))) ||
                !(rel_err(g[x].s[e], g[x].w[e]) <= TOL_G))
                bad++;
        }
    print_message("  %-32s bwd: dQ %.1e dK %.1e dV %.1e (vs one call %.1e %.1e %.1e)\n",
                  c->name, gq, gk, gv, wq, wk, wv);
    assert_int_equal(bad, 0);

    free(dQs); free(dKs); free(dVs); free(dQt); free(dKt); free(dVt);
    free(dQw); free(dKw); free(dVw);
    ref_bwd_out_free(&rb);
    free(Op); free(Lp); free(Om); free(Lm); free(Ow); free(Lw);
    ref_out_free(&ref);
    problem_free(&P);
}

static void test_blocks(void **state)
{
    (void)state;
    for (int i = 0; i < NCASES; i++)
        check_case(&cases[i]);
}

/* ------------------------------------------------------------ statuses */

typedef struct scase {
    const char *name;
    int use_positions;
    int64_t q_pos0, kv_pos0;
    double dropout;
    int sparse;
    int32_t kv_len0;            /* kv_lens[0] (use_kv_lens when >= -1) */
    attn_status want;
} scase;

static const scase scases[] = {
    { "positions", 1, 100, 7, 0.0, 0, -2, ATTN_OK },
    { "use_positions = 2", 2, 0, 0, 0.0, 0, -2, ATTN_ERR_BAD_OPTION },
    { "use_positions = -1", -1, 0, 0, 0.0, 0, -2, ATTN_ERR_BAD_OPTION },
    { "q_pos0 without use_positions", 0, 5, 0, 0.0, 0, -2, ATTN_ERR_BAD_OPTION },
    { "kv_pos0 without use_positions", 0, 0, 5, 0.0, 0, -2, ATTN_ERR_BAD_OPTION },
    { "negative q_pos0", 1, -1, 0, 0.0, 0, -2, ATTN_ERR_BAD_SIZE },
    { "negative kv_pos0", 1, 0, INT64_MIN, 0.0, 0, -2, ATTN_ERR_BAD_SIZE },
    { "q_pos0 2^40", 1, (int64_t)1 << 40, 0, 0.0, 0, -2, ATTN_OK },
    { "q_pos0 2^40 + 1", 1, ((int64_t)1 << 40) + 1, 0, 0.0, 0, -2, ATTN_ERR_TOO_LARGE },
    { "kv_pos0 INT64_MAX", 1, 0, INT64_MAX, 0.0, 0, -2, ATTN_ERR_TOO_LARGE },
    { "dropout, rows to 2^32", 1, ((int64_t)1 << 32) - 8, 0, 0.1, 0, -2, ATTN_OK },
    { "dropout, rows past 2^32", 1, ((int64_t)1 << 32) - 7, 0, 0.1, 0, -2, ATTN_ERR_TOO_LARGE },
    { "dropout, keys to 2^34", 1, 0, ((int64_t)1 << 34) - 8, 0.1, 0, -2, ATTN_OK },
    { "dropout, keys past 2^34", 1, 0, ((int64_t)1 << 34) - 7, 0.1, 0, -2, ATTN_ERR_TOO_LARGE },
    { "with global keys", 1, 0, 0, 0.0, 1, -2, ATTN_ERR_BAD_OPTION },
    { "whole length past m", 1, 0, 0, 0.0, 0, 1000, ATTN_OK },
    { "whole length 0", 1, 0, 0, 0.0, 0, 0, ATTN_OK },
    { "negative length", 1, 0, 0, 0.0, 0, -1, ATTN_ERR_BAD_LENGTH },
};

static void test_statuses(void **state)
{
    (void)state;
    enum { N = 8, M = 8, D = 8 };
    float q[N * D], k[M * D], v[M * D], o[N * D];
    for (int i = 0; i < N * D; i++)
        q[i] = k[i] = v[i] = (float)(i % 7) * 0.1f;
    uint8_t gk[M] = { 1 };
    for (size_t x = 0; x < sizeof scases / sizeof scases[0]; x++) {
        const scase *s = &scases[x];
        attn_sdpa_desc d;
        attn_sdpa_desc_init(&d);
        d.batch = d.q_heads = d.kv_heads = 1;
        d.q_len = N; d.kv_len = M; d.qk_dim = d.v_dim = D;
        d.q = attn_view_bhsd(1, N, D);
        d.k = d.v = attn_view_bhsd(1, M, D);
        d.o = attn_view_bhsd(1, N, D);
        d.use_positions = s->use_positions;
        d.q_pos0 = s->q_pos0;
        d.kv_pos0 = s->kv_pos0;
        d.dropout_p = s->dropout;
        d.use_global_k = s->sparse;
        attn_sdpa_args a;
        attn_sdpa_args_init(&a);
        a.q = q; a.k = k; a.v = v; a.o = o;
        int32_t kl = s->kv_len0;
        if (s->kv_len0 >= -1) {
            d.use_kv_lens = 1;
            a.kv_lens = &kl;
        }
        if (s->sparse)
            a.global_k = gk;
        attn_status st = attn_sdpa(&d, &a);
        print_message("  %-32s %s\n", s->name, attn_status_str(st));
        assert_int_equal(st, s->want);
        if (st == ATTN_OK && s->kv_len0 == 0)
            for (int i = 0; i < N * D; i++)
                assert_true(o[i] == 0.0f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_statuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
