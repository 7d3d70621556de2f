/*
 * fuzz_mha.h -- the MHA layer's problem shared by the forward
 * (fuzz_mha.c), attn_mha_bwd_execute (fuzz_mha_train.c) and the element
 * types (fuzz_mha16.c).
 */
#ifndef ATTN_FUZZ_MHA_H
#define ATTN_FUZZ_MHA_H

#include "../mha_reference.h"
#include "fuzz_common.h"
#include "fuzz_sparse.h"

/* The element types of the layer (byte 0 bit 7 with bit 0, SEL_QO): two
 * bytes after byte 1, x (x_type + 3 w_type, 0 F32, 1 F16, 2 BF16; >= 192
 * one 16-bit type for both, BF16 when even) and z (>= 160 plants XB_*
 * kind z - 159): an unknown x_type or w_type (plan time); the 16-bit
 * struct NULL where its type needs it or given where not (args16,
 * weights16, grads16); a float pointer given besides the 16-bit one, or
 * instead of it; a 16-bit pointer NULL; a reserved pointer of a 16-bit
 * struct set.  A training input plants them in the backward. */
enum { XB_NONE, XB_TYPE, XB_STRUCT, XB_FLOAT, XB_SWAP, XB_PTR16_NULL, XB_RESERVED, XB_COUNT_ };

typedef struct mha16_cfg {
    attn_dtype xt, wt;   /* the decoded (valid) types */
    unsigned bad;        /* XB_* */
} mha16_cfg;


/* One input region of the pool: rows of width at stride. */
typedef struct mha_reg {
    size_t off;
    int64_t rows, width, stride;
} mha_reg;

/* The MHA problem's state from stage to stage. */
typedef struct mha_case {
    attn_mha_desc d;
    unsigned bad[2];                      /* BAD_* */
    int train, sparse, huge, t2;
    int64_t H, dh, E, Hkv, kdim, vdim, B, L, S; /* as decoded (the desc's may be planted) */
    int64_t szm[3];                       /* [B][H][L] of the mask and bias */
    sparse_cfg sc;
    int32_t kv_lens[8], q_lens[8];
    expect pe;
    mha_reg rg[12];                       /* the inputs' regions of the pool */
    int nr, ix, ik, iv, iw0, iw1, iw2, ib0, ib1, ib2, iwo, ibo;
    size_t bias_off;
    float *pool;
    size_t pool_len;
    uint8_t *mpool, *kpm;                 /* the mask, the key padding mask */
    size_t mlen;
    sparse_buf sb;
    attn_mha_weights w;                   /* the call's (16-bit: through w16, a16) */
    attn_mha_args a;
    attn_mha_weights wf;                  /* the float pointers (rounded values): */
    attn_mha_args af;                     /* the reference's and the fp32 twin's */
    attn_mha_weights16 w16;
    attn_mha_args16 a16;
    mha16_cfg ty;
    uint16_t *px, *pw;                    /* the pool at x_type, at w_type (or NULL) */
    obuf ob, ow;                          /* out and weights */
    obuf16 ob16;                          /* out at a 16-bit x_type */
    int ws_small, ws_mis, null_top, cx_small, cx_mis, cx_null;
    unsigned wsel;
    float *inputs_copy;
    uint8_t *mcopy;
    attn_mha_plan *plan;
    size_t need_ws, need_cx;
    wsp cx;                               /* train_forward's context */
    unsigned char *cx_copy;
} mha_case;

/* A valid MHA problem whose attn_mha_train_execute (plan of d, d->threads)
 * has just been checked: out (and weights) hold its result, the context
 * its saved state. */
typedef struct mha_prob {
    const attn_mha_desc *d;
    const attn_mha_weights *w;
    const attn_mha_args *a;
    const attn_mha_weights *wf;  /* with the float pointers (the reference's) */
    const attn_mha_args *af;
    const mha_case *C;
    const float *pool;       /* every float input, to see that none changes */
    size_t pool_len;
    const uint8_t *mpool;
    size_t mlen;
    obuf *ob, *ow;           /* out and weights */
    obuf16 *ob16;            /* out at a 16-bit x_type */
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

/* ---------------------------------------------- fuzz_mha16.c: types */

void decode_mha16(rd *r, mha_case *C);
void mha16_plant_type(rd *r, mha_case *C);
int mha16_bf(const attn_mha_desc *d);
void mha16_round(const attn_mha_desc *d, mref_round *rnd);
float widen16(attn_dtype t, uint16_t h);
uint16_t narrow16(attn_dtype t, float f);
/* The pool rounded to the types of the regions that read it, its 16-bit
 * twins, and the call's weights and args through them. */
void mha16_pools(mha_case *C);
void mha16_args(mha_case *C);
int mha16_pools_same(const mha_case *C);
/* The 16-bit rules of a call (after expect_mha_call's float ones): f holds
 * nf entries of which the first 14 are the weights' and x, key, value, out
 * (outputs: out used); they become the float pointers' uses, and the
 * 16-bit pointers' are appended (returns the new count). */
size_t expect_mha16(expect *e, const attn_mha_desc *d, const attn_mha_weights *w,
                    const attn_mha_args *a, int outputs, ptr_use *f, size_t nf);
/* An XB_* plant into the call's pointers (g, dy: the backward's, else NULL);
 * a16, w16, g16: the call's own copies of the 16-bit structs. */
typedef struct mha16_site {
    attn_mha_weights *w;
    attn_mha_args *a;
    attn_mha_weights16 *w16;
    attn_mha_args16 *a16;
    attn_mha_grads *g;
    attn_mha_grads16 *g16;
    const float **dy;
} mha16_site;
void mha16_plant(rd *r, const attn_mha_desc *d, unsigned bad, const mha16_site *s);
void mha16_junk_untouched(const char *what);
/* Every element of b in its view is f's (the fp32 twin's, laid out as b)
 * rounded to t. */
void mha16_rounded(const uint16_t *b, const float *f, const uint8_t *inview, size_t count,
                   attn_dtype t, const char *name);
/* The forward's fp32 twin (widened types): out and weights. */
void mha16_twin(const mha_case *C);

#endif
