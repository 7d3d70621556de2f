/*
 * mha_case.h -- one case of the multi-head attention layer tests (a row of
 * the table in mha_table.c) and the machinery every check shares: build all
 * buffers of a case (inputs with NaN gaps, outputs full of sentinels), run
 * it, compare with the float64 reference of mha_reference.h, snapshot the
 * outputs for bitwise comparisons.
 *
 * mcase is the set of columns of the table.  A new column gets its default
 * in MCASE_DEFAULTS (and so in every existing row), its effect in
 * minst_build, and its name in mcase_str.
 */
#ifndef ATTN_TEST_MHA_CASE_H
#define ATTN_TEST_MHA_CASE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <attn.h>

#include "harness.h"
#include "mha_reference.h"

#define MMAXB 4
#define MTAIL 16 /* sentinel (outputs) or NaN (inputs) elements after each buffer */

typedef struct mcase {
    int64_t B, L, S, E, H;       /* S is set to L for self-attention */
    int64_t Hkv, kdim, vdim;     /* as in the desc: 0 = default */
    int self, packed, has_bias;
    int64_t xs, ks, vs, os;      /* row strides as in the desc: 0 = dense */
    float scale;                 /* NaN = default */
    int align;                   /* attn_align */
    int64_t wl, wr;              /* window, -1 = unbounded */
    int use_kv_lens, use_q_lens;
    int32_t kv_lens[MMAXB], q_lens[MMAXB];
    int mask_mode, mask_bcast;   /* attn_mask_mode, BC_* bits */
    double mask_keep;            /* probability that a mask entry keeps */
    int use_bias, bias_bcast;
    double bias_ninf;            /* probability of a -INFINITY bias entry */
    int kpm_mode;                /* key_padding_mode */
    double kpm_keep;
    int weights;                 /* attn_weights_mode */
    int threads;
    double in_mag;               /* inputs uniform in [-in_mag, in_mag] */
    uint64_t seed;
    double dropout_p;            /* the desc's dropout_p, dropout_seed and */
    uint64_t drop_seed, drop_offset; /* dropout_offset (0: no dropout) */
    /* Sparse attention (own generator, the other data unchanged): global
     * keys / queries with probability 0.15 each (every position), a random
     * block layout of block size bs (0: none; blocks visible with
     * probability 0.6), per head or broadcast. */
    int use_gk, use_gq;
    int64_t bs;
    int lay_per_head;
    /* Element types (attn_dtype): x_type of X, key, value and Y, w_type of
     * the weights and biases.  A 16-bit row's inputs and weights are drawn
     * as in fp32, then rounded to their type (the reference reads the
     * rounded values); the call takes their uint16 twins. */
    int xt, wt;
} mcase;

/* The bits of a 16-bit output element no call has written (a NaN in both
 * 16-bit types). */
#define MSENTINEL16 0x7FA5u

/* The default of every column, for designated initializers:
 * (mcase){ MCASE_DEFAULTS, .B = 2, ... } (later designators win). */
#define MCASE_DEFAULTS                                                        \
    .has_bias = 1, .scale = NAN, .align = ATTN_ALIGN_TOP_LEFT, .wl = -1,     \
    .wr = -1, .mask_keep = 0.75, .kpm_keep = 0.75, .threads = 1,             \
    .in_mag = 1.5, .seed = 1, .dropout_p = 0.0, .drop_seed = 0, .drop_offset = 0

/* Rows written out as (mcase){ MCASE(CROSS(2, 5, 9, 16, 4), .kdim = 7) }:
 * the shape, then the columns that differ from the defaults.  Later
 * designators override earlier ones, which GCC and clang warn about under
 * -Wextra: tables of such rows sit between MCASE_ROWS_BEGIN and _END. */
#define MCASE(...) { MCASE_DEFAULTS, __VA_ARGS__ }
#define SELF(B_, L_, E_, H_, P_)                                             \
    .B = (B_), .L = (L_), .S = (L_), .E = (E_), .H = (H_), .self = 1, .packed = (P_)
#define CROSS(B_, L_, S_, E_, H_) .B = (B_), .L = (L_), .S = (S_), .E = (E_), .H = (H_)
#if defined(__clang__)
#define MCASE_ROWS_BEGIN                                                      \
    _Pragma("clang diagnostic push")                                          \
    _Pragma("clang diagnostic ignored \"-Winitializer-overrides\"")
#define MCASE_ROWS_END _Pragma("clang diagnostic pop")
#elif defined(__GNUC__)
#define MCASE_ROWS_BEGIN                                                      \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Woverride-init\"")
#define MCASE_ROWS_END _Pragma("GCC diagnostic pop")
#else
#define MCASE_ROWS_BEGIN
#define MCASE_ROWS_END
#endif

/* Cross- and self-attention with every option at its default. */
mcase mc_cross(int64_t B, int64_t L, int64_t S, int64_t E, int64_t H);
mcase mc_self(int64_t B, int64_t L, int64_t E, int64_t H, int packed);
/* One-line description for failure messages (static buffer). */
const char *mcase_str(const mcase *c);
/* Random lengths in [0, full] for every batch (the first one full). */
void mcase_set_lens(mcase *c, trng *r, int kv, int q);

/* A built case: buffers, desc, weights and args. */
typedef struct minst {
    mcase c;
    attn_mha_desc d;
    attn_mha_weights w;          /* the call's (16-bit rows: through w16, a16) */
    attn_mha_args a;
    attn_mha_weights wf;         /* the float buffers (rounded values): what */
    attn_mha_args af;            /* the reference reads */
    attn_mha_weights16 w16;
    attn_mha_args16 a16;
    int64_t Hkv, kdim, vdim, kvE, xs, ks, vs, os;
    float *in_proj, *in_bias, *wq, *wk, *wv, *bq, *bk, *bv, *wo, *bo;
    float *x, *key, *value, *out, *wts, *bias;
    /* uint16 twins of the weights (wt) and of x, key, value, out (xt);
     * out16 has n_out elements */
    uint16_t *in_proj16, *in_bias16, *wq16, *wk16, *wv16, *bq16, *bk16, *bv16, *wo16, *bo16;
    uint16_t *x16, *key16, *value16, *out16;
    uint8_t *mask, *kpm;
    uint8_t *gk, *gq, *layout;
    size_t n_out, n_wts, n_wview;
    int32_t kv_lens[MMAXB], q_lens[MMAXB];
} minst;

/* Build every buffer (all weight layouts, whatever the case uses), the desc
 * and the args of c.  Returns 0 or -1 (free with minst_free either way). */
int minst_build(minst *t, const mcase *c);
void minst_free(minst *t);
/* Refill out and weights with the sentinel. */
void minst_clear(minst *t);
/* 1 if out and weights hold only sentinels. */
int minst_untouched(const minst *t);
/* Write v into every element of x, key and value outside the rows (the row
 * gaps and the tail; NaN after minst_build). */
void minst_fill_gaps(minst *t, float v);
/* Plan, execute and destroy.  ws_mode 0: workspace NULL; 1: a caller
 * workspace of exactly attn_mha_workspace_size bytes, filled with NaN. */
attn_status minst_run(minst *t, int ws_mode);

/* Per-family accuracy statistics ("[accuracy]" lines). */
typedef struct mstats {
    const char *family;
    int cases;
    double err_y, err_w, ratio;
} mstats;
void mstats_init(mstats *s, const char *family);
void mstats_print(const mstats *s);

/* Check out and weights of the last call against the reference, and the
 * sentinels around them.  Returns the number of bad elements. */
long minst_check(const minst *t, mstats *st);

/* The roundings of the row's types (mref_round): Y's (x_type), and with
 * BF16 products (x_type == w_type == BF16, the engine resolving to TILE,
 * no sparse option) Q's, K's, V's, P's and O's; each tdtype_u of its type
 * (twice the unit roundoff), Y's absolute floor 2^-24 for F16. */
void minst_round(const minst *t, mref_round *r);
/* 1 if the row's call runs the BF16 products (above). */
int minst_bf16_products(const minst *t);

/* Whole output buffers, for bitwise comparisons (out16 too). */
typedef struct msnap {
    float *out, *wts;
    uint16_t *out16;
    size_t n_out, n_wts;
} msnap;
void msnap_take(msnap *s, const minst *t);
int msnap_equal(const msnap *s, const minst *t);
/* Bitwise compare out only. */
int msnap_equal_out(const msnap *s, const minst *t);
void msnap_free(msnap *s);

/* ------------------------------------------------------------- training */

#include "mha_reference.h"

/* The buffers of a backward call: dY (its row gaps and tail NaN, values
 * uniform in [-1, 1]) and the gradients (sentinels everywhere until
 * written; row strides of x, key, value as the inputs).  With packed
 * weights dW_q, dW_k, dW_v are views of one [3E][E] buffer (and the bias
 * gradients of one [3E]).  view[k] is NULL for a family the case has not. */
typedef struct mgrads {
    float *dy;
    size_t n_dy;
    float *buf[MG_COUNT];   /* allocations (NULL for the views into one) */
    size_t n[MG_COUNT];     /* their element counts, with the MTAIL tail */
    float *view[MG_COUNT];
    int64_t rows[MG_COUNT], width[MG_COUNT], ld[MG_COUNT];
    attn_mha_grads g;       /* the pointers a backward of the case takes */
} mgrads;

int mgrads_build(mgrads *m, const minst *t);
void mgrads_free(mgrads *m);
/* Sentinels in every gradient buffer. */
void mgrads_clear(mgrads *m);
/* 1 if every gradient buffer holds only sentinels. */
int mgrads_untouched(const mgrads *m);
/* Copies of the gradient buffers (same indexing as buf), and comparisons. */
void mgrads_snap(const mgrads *m, float *snap[MG_COUNT]);
int mgrads_equal(const mgrads *m, float *const snap[MG_COUNT]);
void mgrads_snap_free(float *snap[MG_COUNT]);

/* Plan with t->d (threads included), train_forward with a NaN-filled
 * caller context and workspace, then backward at m->dy with a NaN-filled
 * caller workspace (accumulate as given).  *context_out, when not NULL,
 * receives the context (free it) and the plan is kept in *plan_out (destroy
 * it); otherwise both are freed.  Returns the first failing status. */
attn_status minst_train(minst *t, mgrads *m, int accumulate, void **context_out,
                        size_t *context_bytes, attn_mha_plan **plan_out);
/* The same with the plan of desc d, dY at dy and the gradients of g (the
 * 16-bit calls: dy NULL, g->grads16 set). */
attn_status minst_train_call(minst *t, const attn_mha_desc *d, const float *dy,
                             attn_mha_grads *g, int accumulate, void **context_out,
                             size_t *context_bytes, attn_mha_plan **plan_out);

/* Per-family accuracy of the gradients. */
typedef struct gstats {
    int cases;
    double err[MG_COUNT], ratio[MG_COUNT];
} gstats;
void gstats_print(const gstats *s);
/* Check the gradients of the last backward (accumulate = 0) against the
 * reference and the sentinels around them.  Returns the bad elements. */
long mgrads_check(const minst *t, const mgrads *m, gstats *st);

#endif
