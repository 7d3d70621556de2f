/*
 * reference.h -- an independent float64 reference of attn's SDPA, used only
 * by the tests.  It implements the semantics documented in attn.h on its own
 * (it shares no code with lib/) and, like the library, never reads an input
 * position hidden by the lengths or the window, so NaN-poisoned inputs do not
 * disturb it.
 */
#ifndef ATTN_TEST_REFERENCE_H
#define ATTN_TEST_REFERENCE_H

#include <stdint.h>

#include <attn.h>

/*
 * Outputs of the reference, all dense and in double; every pointer may be
 * NULL when that output is not wanted.
 *   o      [B][Hq][n][dv]  the attention output
 *   p      [B][Hq][n][m]   probabilities
 *   lse    [B][Hq][n]      logsumexp (-INFINITY for rows without visible key)
 *   o_abs  [B][Hq][n][dv]  sum_j p_j |v_jd|       (error-bound material)
 *   s_abs  [B][Hq][n]      max over visible j of |scale| sum_d |q_d k_jd|
 *                          + |bias_j| (0 for an empty row)
 *   nvis   [B][Hq][n]      number of visible keys of the row
 */
typedef struct ref_out {
    double *o;
    double *p;
    double *lse;
    double *o_abs;
    double *s_abs;
    int64_t *nvis;
} ref_out;

/* Compute SDPA for a valid desc and its args (the plan's own inputs).
 * With desc->dropout_p > 0, p, o and o_abs are of the dropped probabilities
 * P' = P keep / (1 - p), the keep mask taken from the public
 * attn_dropout_mask_fill (test_dropout.c checks that call against its own
 * Philox4x32-10); lse, s_abs and nvis are those of the undropped row.
 * Returns 0, or -1 when scratch memory could not be allocated (or the keep
 * mask call failed). */
int ref_sdpa(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
             const ref_out *out);

/* ref_sdpa into freshly allocated outputs: o, o_abs, lse, s_abs, nvis, and
 * p when desc->want_probs.  Returns 0, or -1 when memory ran out (*out is
 * freed then).  ref_out_free frees what either left in *out. */
int ref_sdpa_alloc(const attn_sdpa_desc *desc, const attn_sdpa_args *args, ref_out *out);
void ref_out_free(ref_out *out);

/* The window predicate of attn.h alone: 1 if key j is inside query i's
 * window (ignoring lengths, mask and bias).  mb and nb are the batch's key
 * and query lengths (kv_lens[b] and q_lens[b] when in use, m and n
 * otherwise): BOTTOM_RIGHT puts the diagonal at d(i) = i + mb - nb. */
int ref_window_visible(const attn_sdpa_desc *desc, int64_t mb, int64_t nb,
                       int64_t i, int64_t j);

/* The visible-set predicate before the mask and the bias: 1 if query i of
 * (b, h) may see key j through the window, the global flags, the layout
 * and the lengths (attn.h, "Sparse attention"); reads the flags and the
 * layout of args. */
int ref_candidate(const attn_sdpa_desc *desc, const attn_sdpa_args *args, int64_t b,
                  int64_t h, int64_t i, int64_t j, int64_t klen, int64_t qlen);

/* The scale the reference uses: desc->scale, or 1/sqrt(dk) when NaN. */
double ref_scale(const attn_sdpa_desc *desc);

/*
 * Forward error bounds of an fp32 implementation (sgemm for S = scale Q K^T
 * and O = P V, fp32 softmax) against the exact result, for one row with
 * nvis visible keys, logit magnitude s_abs (see ref_out) and head dim dk:
 *   *p_rel   |P - p| <= p_rel * p + REF_TINY
 *   *o_rel   |O_d - o_d| <= o_rel * o_abs_d + REF_TINY
 *   *lse_abs |lse - ref| <= lse_abs
 * The derivation is in reference.c (ref_row_tolerance).
 */
#define REF_TINY 1e-30
void ref_row_tolerance(int64_t dk, int64_t nvis, double s_abs, double lse,
                       double *p_rel, double *o_rel, double *lse_abs);
/* What dropout adds to p_rel and o_rel (1 / (1 - p) rounded to fp32 and a
 * multiply): 3 u when desc->dropout_p > 0, else 0. */
double ref_dropout_rel(const attn_sdpa_desc *desc);

/* ------------------------------------------------------------- backward */

/*
 * Outputs of the backward reference, dense, in double (see ref_sdpa_bwd):
 *   dq, dq_tol        [B][Hq][n][dk]
 *   dk, dk_tol        [B][Hkv][m][dk]
 *   dv, dv_tol        [B][Hkv][m][dv]
 *   dbias, dbias_tol  [B][Hq][n][m]  per position, before any summing over
 *                     the bias's broadcast dimensions (ref_dbias_reduce);
 *                     optional (NULL: not computed)
 *   vis               [B][Hq][n][m]  1 where query i sees key j (optional)
 *   kv_seen           [B][Hkv][m]    1 where some query of the group sees j
 *   row_empty         [B][Hq][n]     1 for padded rows and rows without
 *                                    visible key (dQ must be exactly 0)
 * The *_tol arrays are the worst-case fp32 error bounds of reference.c
 * (ref_sdpa_bwd's error model) for each element.
 */
typedef struct ref_bwd_out {
    double *dq, *dk, *dv, *dbias;
    double *dq_tol, *dk_tol, *dv_tol, *dbias_tol;
    unsigned char *vis, *kv_seen, *row_empty;
} ref_bwd_out;

/*
 * The error terms a backward on 16-bit tensors adds to the fp32 model
 * (sdpa_bwd.c derives them; NULL or all 0: fp32):
 *   o_rel, o_abs  the O the backward reads (the 16-bit forward's): relative
 *                 to o_abs_d = sum_j p_j |V_jd|, and absolute; enters D
 *   p_rel         P (P' with dropout) rounded for dV, relative
 *   ds_rel        dS rounded for dK and dQ, relative
 *   g_rel, g_abs  each gradient's own rounding: relative to the sum of the
 *                 magnitudes of its terms (|scale| sum |dS| |Q| for dK,
 *                 sum P' |dO| for dV, |scale| sum |dS| |K| for dQ) and
 *                 absolute
 */
typedef struct ref_bwd_types {
    double o_rel, o_abs, p_rel, ds_rel, g_rel, g_abs;
} ref_bwd_types;

/*
 * The gradients of L = sum dO * O for the forward of desc (its o, probs and
 * lse fields are not used) and the inputs of args (q, k, v, lengths, mask,
 * bias; o, probs, lse not used), with dO [B][Hq][n][dv] at d_o with view
 * d_o_view.  P, O and D_i = dO_i . O_i are recomputed in double from the
 * inputs (own softmax).  With desc->dropout_p > 0 it is the backward of the
 * dropped forward with the keep mask (attn_dropout_mask_fill, as ref_sdpa)
 * held fixed.  ty (NULL: none) adds the terms of 16-bit tensors to the
 * bounds.  Reads nothing attn.h says is never read, nor the dO rows of
 * padded queries.  Returns 0, or -1 without memory.
 */
int ref_sdpa_bwd(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
                 const float *d_o, attn_view d_o_view, const ref_bwd_types *ty,
                 const ref_bwd_out *out);
/* ref_sdpa_bwd into fresh outputs (dbias, dbias_tol and vis only when
 * want_dbias).  Returns 0 or -1 (then *out is freed). */
int ref_sdpa_bwd_alloc(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
                       const float *d_o, attn_view d_o_view, int want_dbias,
                       const ref_bwd_types *ty, ref_bwd_out *out);
void ref_bwd_out_free(ref_bwd_out *out);

/* The shape of dBias: [Bb][Hb][Nb][m] with Bb = 1 when the bias's batch
 * stride is 0 (else B), likewise Hb, Nb. */
void ref_dbias_shape(const attn_sdpa_desc *desc, int64_t *Bb, int64_t *Hb, int64_t *Nb);
/* Sum the dense per-position dbias over the broadcast dimensions into
 * val[Bb][Hb][Nb][m]; tol (optional) gets the summed tolerances plus the
 * error of an fp32 sum of that many terms; cnt (optional) the number of
 * visible positions summed (0: the element must be exactly 0). */
void ref_dbias_reduce(const attn_sdpa_desc *desc, const ref_bwd_out *r, double *val,
                      double *tol, int64_t *cnt);

#endif
