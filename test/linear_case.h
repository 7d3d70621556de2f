/*
 * linear_case.h -- test instances of attn_linear_* (linear_case.c): a case
 * (shape, feature map, causal/alignment, eps, lengths, layouts, state,
 * threads, seed) becomes float buffers laid out through views with NaN in
 * every gap, outputs filled with a sentinel, and dense double copies of the
 * inputs for the float64 reference (linear_ref.h).
 */
#ifndef ATTN_TEST_LINEAR_CASE_H
#define ATTN_TEST_LINEAR_CASE_H

#include <stddef.h>
#include <stdint.h>

#include <attn.h>

#include "harness.h"
#include "linear_ref.h"

/* Layout of Q, K, V (and of dQ, dK, dV in the backward: the output layout
 * applies there). */
enum { LL_BHSD = 0, LL_BSHD, LL_PACKED, LL_PADDED, LL_COUNT_ };
/* Layout of O (and dO, dQ, dK, dV). */
enum { LO_BHSD = 0, LO_BSHD, LO_PADDED, LO_COUNT_ };

typedef struct lcase {
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int fmap, causal, align;
    float eps;                 /* NaN: default */
    int use_kv_lens, use_q_lens;
    int32_t kv_lens[TMAXB], q_lens[TMAXB];
    int layout, out_layout;
    int use_state;             /* random initial state */
    int positive;              /* Q, K in [0.05, mag] (IDENTITY rows) */
    double mag;
    int threads;
    uint64_t seed;
} lcase;

lcase lcase_default(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk,
                    int64_t dv);
const char *lcase_str(const lcase *c);

typedef struct lbuf {
    float *p;
    size_t n;
} lbuf;

typedef struct linst {
    lcase c;
    lref_shape shape;
    attn_linear_desc desc;
    attn_linear_args args;
    lbuf q, k, v, o;           /* packed: k and v alias q's buffer (n = 0) */
    lbuf s, z, s0, z0;         /* state now and its initial value */
    double *rq, *rk, *rv, *rs0, *rz0;   /* dense inputs (visible values) */
    int32_t kv_lens[TMAXB], q_lens[TMAXB];
    /* backward */
    attn_linear_bwd_desc bdesc;
    attn_linear_bwd_args bargs;
    lbuf d_o, dq, dk, dv;
    double *rdo;
} linst;

#define LSENTINEL 0x7fc0deadu

int linst_build(linst *t, const lcase *c);
void linst_free(linst *t);
/* Outputs (O, dQ, dK, dV) to the sentinel; state to its initial value. */
void linst_reset(linst *t);
/* 1 if O, dQ, dK, dV and the state are untouched since linst_reset. */
int linst_untouched(const linst *t);
/* 1 if some input position is never read (padded rows or keys, keys no
 * query sees without state): poisoning applies. */
int linst_has_hidden(const linst *t);
/* Write NaN at (set = 1) or restore (0) every never-read input position. */
void linst_poison(linst *t, int set);

/* Extract a view of a buffer into dense double [B][H][S][D]. */
void lview_to_dense(const float *base, attn_view v, int64_t B, int64_t H, int64_t S,
                    int64_t D, double *dst);
/* Mark in mask[] (one byte per buffer element) the elements of a view. */
void lview_mark(unsigned char *mask, const float *buf, const float *base, attn_view v,
                int64_t B, int64_t H, int64_t S, int64_t D);

#endif
