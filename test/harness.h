/*
 * harness.h -- shared machinery of the attn tests: a small PRNG, test cases
 * (shapes, layouts, options), buffers with NaN-poisoned padding and hidden
 * positions, comparison against the float64 reference (reference.h) with the
 * error bounds documented there, and per-family accuracy statistics.
 */
#ifndef ATTN_TEST_HARNESS_H
#define ATTN_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include <attn.h>

/* ------------------------------------------------------------------ PRNG */

typedef struct trng {
    uint64_t s;
} trng;

void trng_seed(trng *r, uint64_t seed);
uint64_t trng_next(trng *r);
/* Uniform in [lo, hi] (integers, inclusive) and [lo, hi) (doubles). */
int64_t trng_int(trng *r, int64_t lo, int64_t hi);
double trng_uniform(trng *r, double lo, double hi);
/* 1 with probability p. */
int trng_bool(trng *r, double p);

/* ------------------------------------------------------------ test cases */

#define TMAXB 8

/* Layout of Q, K and V. */
enum {
    LAY_BHSD = 0,    /* contiguous [B][H][S][D], one buffer each */
    LAY_BSHD,        /* contiguous [B][S][H][D] */
    LAY_PACKED,      /* one [B][S][Hq + 2 Hkv][D] buffer (needs n == m and
                        dk == dv); padded rows when `padded` is set */
    LAY_PADDED,      /* random order per tensor, random gaps (NaN) after
                        every row, head and batch */
    LAY_COUNT_
};

/* Layout of the outputs O, P and logsumexp. */
enum {
    OUT_BHSD = 0,    /* O [B][Hq][n][dv], P [B][Hq][n][m], lse [B][Hq][n] */
    OUT_BSHD,        /* O [B][n][Hq][dv], P [B][n][Hq][m], lse [B][n][Hq] */
    OUT_PADDED,      /* random order, random gaps (sentinel NaN) */
    OUT_COUNT_
};

/* Broadcast bits of the mask and the bias. */
enum { BC_BATCH = 1, BC_HEAD = 2, BC_SEQ = 4 };

typedef struct tcase {
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int layout;          /* LAY_* */
    int out_layout;      /* OUT_* */
    int misalign;        /* pointers 1 element past a malloc'd base */
    float scale;         /* NaN = default */
    int align;           /* attn_align */
    int64_t wl, wr;      /* window */
    int use_kv_lens, use_q_lens;
    int32_t kv_lens[TMAXB], q_lens[TMAXB];
    int mask_mode;       /* attn_mask_mode */
    int mask_bcast;      /* BC_* bits */
    double mask_keep;    /* probability that a position is kept */
    int use_bias;
    int bias_bcast;      /* BC_* bits */
    double bias_ninf;    /* probability of a -INFINITY bias entry */
    double bias_mag;     /* bias uniform in [-bias_mag, bias_mag] */
    int want_probs, want_lse;
    int threads;
    double in_mag;       /* Q, K, V uniform in [-in_mag, in_mag] */
    int poison;          /* NaN (Q, K, V, bias) or garbage (mask) at every
                            position hidden by the lengths or the window;
                            the visible data are those of poison = 0 */
    uint64_t seed;
    /* Sparse attention (drawn from their own generator, so that the other
     * data do not change): global key / query flags, set with these
     * probabilities (every position, padded ones included; with glob_first
     * instead the first glob_first keys and queries of every batch), and a
     * block layout of block size bs (0: none) of kind lay_kind, per head
     * or broadcast; poison also covers what the sparse rules hide. */
    int use_gk, use_gq;
    double gk_rate, gq_rate;
    int64_t glob_first;
    /* Scattered global queries by pattern instead (when gq_step or
     * gq_edges is set): row i of batch b is global iff
     * i % gq_step == (gq_off + b) % gq_step, or (gq_edges) i % 16 is 0 or
     * 15 (the first and last rows of every work item). */
    int64_t gq_step, gq_off;
    int gq_edges;
    int64_t bs;
    int lay_per_head;
    int lay_kind;        /* TLAY_* */
    double lay_keep;     /* TLAY_RANDOM: probability of a visible block */
    /* Build instead the dense twin: no global flags, layout or window, and
     * a full keep-mask [B][Hq][n][m] of the sparse visible set AND the
     * case's mask (same Q, K, V, bias). */
    int dense_twin;
    /* Element type of Q, K, V and O (attn_dtype; F32 = 0 the default).
     * 16-bit cases round the fp32 inputs to the type when they are built
     * (the float64 reference sees exactly what attn reads) and run attn on
     * 16-bit copies (tinst_run); O comes back widened into the fp32 O
     * buffer, so every check reads fp32 buffers as for F32 cases. */
    int dtype;
} tcase;

/* Kinds of test layouts. */
enum {
    TLAY_RANDOM = 0,     /* each block visible with probability lay_keep */
    TLAY_BIGBIRD,        /* attn_layout_build_bigbird(3, 1, 2, seed) */
    TLAY_STRIDED,        /* attn_layout_build_strided(3, causal = window right 0) */
    TLAY_FIXED,          /* attn_layout_build_fixed(4, 1, causal) */
    TLAY_EMPTY_ROWS,     /* random, with every third block row empty */
};

/* 1 when a case uses global tokens or a layout. */
int tcase_sparse(const tcase *c);

/* A case with every option off, 1 thread, magnitude 1, seed 1. */
tcase tcase_default(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m,
                    int64_t dk, int64_t dv);
/* One-line description for failure messages (static buffer). */
const char *tcase_str(const tcase *c);

/* ---------------------------------------------------------- instances */

typedef struct tbuf {
    void *base;          /* malloc'd */
    size_t count;        /* elements (float or uint8) in base */
} tbuf;

typedef struct tinst {
    tcase c;
    attn_sdpa_desc desc;
    attn_sdpa_args args;
    tbuf q, k, v;        /* for LAY_PACKED only q is allocated */
    tbuf o, p, lse;      /* output buffers (every element not in the view
                            holds the sentinel) */
    tbuf mask, bias;
    int32_t kv_lens[TMAXB], q_lens[TMAXB];
    tbuf gk, gq, layout; /* sparse: [B][m], [B][n], [H|1][nb][mb] */
    tbuf q16, k16, v16, o16; /* dtype != F32: uint16 twins of q, k, v, o */
} tinst;

/* The bit pattern every output buffer is filled with before a call. */
#define TSENTINEL 0x7fc0deadu

/* Build buffers, desc and args of a case.  Returns 0 or -1. */
int tinst_build(tinst *t, const tcase *c);
void tinst_free(tinst *t);
/* Refill O, P and lse buffers with the sentinel. */
void tinst_clear_outputs(tinst *t);
/* 1 if every element of every output buffer still holds the sentinel. */
int tinst_outputs_untouched(const tinst *t);

/* Copies of the whole output buffers, for bitwise comparisons. */
typedef struct tsnap {
    uint32_t *o, *p, *lse;
    size_t no, np, nl;
} tsnap;
void tsnap_take(tsnap *s, const tinst *t);
void tsnap_free(tsnap *s);
/* 1 if the two snapshots are bitwise equal (same sizes). */
int tsnap_equal(const tsnap *a, const tsnap *b);
/* Bitwise compare only the O buffers. */
int tsnap_equal_o(const tsnap *a, const tsnap *b);

/* -------------------------------------------------------- accuracy stats */

typedef struct tstats {
    const char *family;
    int cases;
    double err_o, err_p, err_lse;  /* max |lib - ref| */
    double ratio;                  /* max |lib - ref| / tolerance */
    /* the backward (CHK_BWD): rows checked, max |lib - ref| of dQ, dK,
     * dV, dBias and max |lib - ref| / tolerance */
    int bwd_cases;
    double err_dq, err_dk, err_dv, err_dbias, ratio_bwd;
    int bwd_widened;               /* of those, checked bitwise against the
                                    * fp32 call (16-bit sparse rows) */
    double ratio_dense;            /* CHK_DENSE: max |sparse - twin| / tol */
} tstats;

void tstats_init(tstats *s, const char *family);
/* One "[accuracy]" line, and a second one for the backward when it ran. */
void tstats_print(const tstats *s);

/* Compare the outputs of the last call with the reference: every view
 * element within the bounds of reference.h, every element outside the
 * views still the sentinel.  Prints the first few problems with the case;
 * returns the number of bad elements (0 = pass) and updates *st. */
long tinst_check(const tinst *t, tstats *st);

/* attn_sdpa on the instance (outputs cleared first; 16-bit cases through
 * tinst_call_types). */
attn_status tinst_run(tinst *t);
/* A 16-bit case's desc and args as attn takes them (types set, 16-bit
 * pointers into the uint16 twins); F32 cases: copies of t's. */
void tinst_call_types(const tinst *t, attn_sdpa_desc *d, attn_sdpa_args *a);
/* After a 16-bit call: O's uint16 twin widened into the fp32 O buffer
 * (elements still holding the 16-bit sentinel keep TSENTINEL). */
void tinst_widen_o(tinst *t);
/* Twice the unit roundoff of a type (2^-7 BF16: 8 significant bits, u =
 * 2^-8; 2^-10 F16: 11 bits, u = 2^-11; 0 for F32):
 * the relative error allowed for one rounding to it. */
double tdtype_u(int dtype);
/* n fp32 bit patterns rounded in place to a 16-bit dtype
 * (attn_dtype_encode) and widened back; TSENTINEL stays.  A few
 * conversion calls per thousand elements: attn_dtype_encode and _decode
 * look the conversion table up, and read ATTN_SIMD, per call, and
 * element by element (tround_bits until 1.4.3) that was a fifth of the
 * types suite's time. */
void tround_all(int dtype, uint32_t *bits, size_t n);
/* 1 when the BLAS in use is MKL, whose sgemm sums depend on the operands'
 * alignment and leading dimensions (attn.h, "Decoding and the KV cache"):
 * the bitwise checks of widened 16-bit results against the fp32 call on
 * other buffers are skipped then. */
int tblas_mkl(void);
/* Build, run, check, free: returns the number of bad elements, or -1 when
 * the call failed (the status is printed). */
long tcase_run_check(const tcase *c, tstats *st);

/* Reads ATTN_TEST_QUICK: 1 when the suite should shrink its case counts
 * (valgrind), 0 otherwise. */
int tquick(void);

#endif
