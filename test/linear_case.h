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
    /* Element type of Q, K, V and O (attn_dtype; F32 = 0 the default).
     * 16-bit cases round the fp32 inputs to the type when they are built
     * (the float64 reference sees what attn reads) and call attn on
     * uint16 twins through args.args16 (linst_call); O comes back widened
     * into the fp32 O buffer, so the checks read it as for F32.  The
     * backward likewise: dO rounded, dQ, dK, dV (of the types of Q, K, V)
     * written to uint16 twins through attn_linear_bwd_args16 and widened
     * back into their fp32 buffers. */
    int dtype;
    /* With dtype != F32: which of Q, K, V, O take it (LT_Q | LT_K | LT_V |
     * LT_O); 0 = all four.  The others stay F32 (mixed types); every input
     * is rounded to dtype all the same. */
    unsigned mask16;
} lcase;

enum { LT_Q = 1u, LT_K = 2u, LT_V = 4u, LT_O = 8u };
/* The element type of tensor bit (LT_Q, ...) of case c. */
int lcase_type(const lcase *c, unsigned bit);

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
    /* dtype != F32: uint16 twins of q (with k and v when packed), k, v, o
     * (counts as their float buffers) and the args16 of a call */
    uint16_t *q16, *k16, *v16, *o16;
    attn_linear_args16 a16;
    /* backward at dtype != F32: the twin of dO (rounded like the inputs)
     * and of dQ, dK, dV (counts as their float buffers), the args16 */
    uint16_t *do16, *dq16, *dk16, *dv16;
    attn_linear_bwd_args16 b16;
} linst;

#define LSENTINEL 0x7fc0deadu
#define LSENTINEL16 0x7FA5u    /* a NaN in both 16-bit types */

int linst_build(linst *t, const lcase *c);
/* The desc and args attn takes for t: copies of t's (F32), or with the
 * four types set and the pointers in t->a16 (16-bit). */
void linst_call_types(linst *t, const attn_linear_desc *d, attn_linear_desc *dt,
                      attn_linear_args *at);
/* After a 16-bit call: O's twin widened into the fp32 O buffer (elements
 * still holding the 16-bit sentinel get LSENTINEL).  Nothing for F32. */
void linst_widen_o(linst *t);
/* The forward of t through attn_linear (plan NULL) or the plan (made from
 * linst_call_types of t->desc with its threads) with workspace ws (may be
 * NULL), at t's type; O widened back.  Returns the status. */
attn_status linst_forward(linst *t, const attn_linear_plan *plan, void *ws, size_t ws_bytes);
/* The backward's desc and args for t: copies of t's (F32), or with the
 * case's types set in fwd and the pointers of 16-bit tensors in t->b16. */
void linst_bwd_call_types(linst *t, const attn_linear_bwd_desc *d, attn_linear_bwd_desc *dt,
                          attn_linear_bwd_args *at);
/* After a 16-bit backward call: the twins of the 16-bit gradients widened
 * into their fp32 buffers (the 16-bit sentinel to LSENTINEL). */
void linst_widen_grads(linst *t);
/* The backward of t through attn_linear_backward (plan NULL) or the plan
 * (made from linst_bwd_call_types) with workspace ws, at t's types;
 * gradients widened back.  Returns the status. */
attn_status linst_backward(linst *t, const attn_linear_bwd_plan *plan, void *ws,
                           size_t ws_bytes);
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
