/*
 * fuzz_mha.h -- the MHA layer's problem shared by the forward
 * (fuzz_mha.c) and attn_mha_bwd_execute (fuzz_mha_train.c).
 */
#ifndef ATTN_FUZZ_MHA_H
#define ATTN_FUZZ_MHA_H

#include "fuzz_common.h"

/* A valid MHA problem whose attn_mha_train_execute (plan of d, d->threads)
 * has just been checked: out (and weights) hold its result, the context
 * its saved state. */
typedef struct mha_prob {
    const attn_mha_desc *d;
    const attn_mha_weights *w;
    const attn_mha_args *a;
    const float *pool;       /* every float input, to see that none changes */
    size_t pool_len;
    const uint8_t *mpool;
    size_t mlen;
    obuf *ob, *ow;           /* out and weights */
    const void *cx;          /* the context train_forward filled */
    size_t cx_bytes, cx_need;
    int t2;                  /* the other thread count */
    int sparse;              /* SEL_SPARSE */
} mha_prob;

expect expect_mha_call(const attn_mha_desc *d, const attn_mha_weights *w, const attn_mha_args *a,
                       int outputs, const void *ws, size_t ws_bytes, size_t need);
void expect_context(expect *e, const void *cx, size_t bytes, size_t need);

/* fuzz_mha_train.c: attn_mha_bwd_execute after a checked train_forward */
void fuzz_mha_train(rd *r, const mha_prob *M, const attn_mha_plan *plan);

#endif
