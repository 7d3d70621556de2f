/*
 * mha_reference.h -- an independent float64 reference of attn's multi-head
 * attention layer (attn_mha_*), used only by the tests.  It is written from
 * the semantics in attn.h ("Multi-head attention layer" and the SDPA
 * visibility rules) and shares no code with lib/:
 *
 *   Q = X W_q^T + b_q,  K = Xk W_k^T + b_k,  V = Xv W_v^T + b_v   (nn.Linear)
 *   per head h (K/V head h / (H / Hkv)): softmax over the visible keys of
 *     scale * q.k + bias, O = P V          (scale 1/sqrt(E / H) when NaN)
 *   Y = O W_o^T + b_o
 *   averaged weights = mean over heads of P
 *   with dropout_p > 0, P' = P keep / (1 - p) replaces P in O and in the
 *   weights (keep of (b, h, i, j) from the public attn_dropout_mask_fill)
 *
 * Visibility of key j to query i of batch b (AND of all that apply): the
 * window (TOP_LEFT d = i, BOTTOM_RIGHT d = i + kv_lens[b] - q_lens[b]),
 * j < kv_lens[b], i < q_lens[b], the element mask (KEEP/DROP_NONZERO, with
 * its strides over [B][H][L]), the key padding mask ([B][S], its own
 * polarity) and a bias entry that is not -INFINITY.  A row without visible
 * key has O = 0 and P = 0 (so its layer output is b_o).
 *
 * Error bounds of an fp32 implementation (sgemm projections, fp32 SDPA,
 * sgemm output projection) against the exact result, first order, worst
 * case, with u = 2^-24 (see mha_reference.c for the derivation):
 *   |Y - y| <= y_tol,   |P - p| <= p_tol,   |avg - a| <= avg_tol.
 */
#ifndef ATTN_TEST_MHA_REFERENCE_H
#define ATTN_TEST_MHA_REFERENCE_H

#include <stdint.h>

#include <attn.h>

/* Dense double outputs; every pointer may be NULL when not wanted. */
typedef struct mref_out {
    double *y;        /* [B][L][E]    layer output */
    double *y_tol;    /* [B][L][E]    bound on |Y_fp32 - y| */
    double *p;        /* [B][H][L][S] per-head attention weights */
    double *p_tol;    /* [B][H][L][S] */
    double *avg;      /* [B][L][S]    mean over heads */
    double *avg_tol;  /* [B][L][S] */
} mref_out;

/* The layer for a valid desc with its weights and args (the library's own
 * inputs; args->out and args->weights are not touched).  Returns 0, or -1
 * when scratch memory could not be allocated.  Only the float pointers of
 * w and args are read (desc's x_type and w_type are not): a 16-bit call is
 * referenced on its inputs and weights widened to float. */
int mref_mha(const attn_mha_desc *desc, const attn_mha_weights *w,
             const attn_mha_args *args, const mref_out *out);

/* The roundings a 16-bit layer adds to the fp32 one (attn.h, "Multi-head
 * attention layer: element types"), as relative errors of one rounding
 * each: of the projected Q, K, V, of P for P V, of O (BF16 products) and
 * of Y (x_type), and y_abs, the absolute error of Y's rounding where it
 * lands among subnormals.  The bounds then grow as derived in test_mha.c. */
typedef struct mref_round {
    double q, k, v, p, o, y, y_abs;
} mref_round;

/* mref_mha with the bounds of the roundings r (NULL: none, mref_mha). */
int mref_mha_typed(const attn_mha_desc *desc, const attn_mha_weights *w,
                   const attn_mha_args *args, const mref_out *out, const mref_round *r);

/*
 * The backward of the layer (attn_mha_bwd_execute) in float64, written from
 * the chain rule of the formulas above (nn.Linear: y = x W^T + b), per head
 * the softmax attention backward in its plain form:
 *   dO = dY W_o, dW_o = dY^T O, db_o = sum_t dY_t
 *   dV_j = sum_i P_ij dO_i, dP_ij = dO_i . V_j, D_i = sum_j P_ij dP_ij
 *   (= dO_i . O_i), dS_ij = P_ij (dP_ij - D_i),
 *   dQ_i = scale sum_j dS_ij K_j, dK_j = scale sum_i dS_ij Q_i
 *   (a GQA key/value head sums over its query heads)
 *   dW_q = dQ^T X, db_q = sum_t dQ_t, dX = dQ W_q (+ dK W_k + dV W_v when
 *   self-attention), dXk = dK W_k, dXv = dV W_v, dW_k = dK^T Xk, ...
 * Every gradient comes with a worst-case first-order bound on the error of
 * an fp32 implementation (see mha_reference.c).
 */
enum {
    MG_DX, MG_DKEY, MG_DVALUE,          /* [B*L][E], [B*S][kdim], [B*S][vdim] */
    MG_DWQ, MG_DWK, MG_DWV,             /* [E][E], [Hkv*dh][kdim], [Hkv*dh][vdim] */
    MG_DBQ, MG_DBK, MG_DBV,             /* [E], [Hkv*dh], [Hkv*dh] */
    MG_DWO, MG_DBO,                     /* [E][E], [E] */
    MG_COUNT
};
/* Names of the families, for messages. */
extern const char *const mref_grad_name[MG_COUNT];

/* Dense double gradients and bounds; any pointer may be NULL (not wanted).
 * dkey and dvalue exist in cross-attention only (self-attention folds
 * them into dx). */
typedef struct mref_grads {
    double *g[MG_COUNT];
    double *tol[MG_COUNT];
    /* Optional (NULL: not written): the magnitude |g|~ of each element,
     * the sum of the absolute values of its terms (with their bounds), the
     * scale a rounding of an intermediate to a 16-bit type acts on. */
    double *mag[MG_COUNT];
} mref_grads;

/* mref_mha_backward with the bounds of the roundings r of a layer with
 * BF16 products (as mref_mha_typed: Q, K, V, P, O; and dO at O's type, dS
 * at P's, dQ, dK, dV at Q's, K's, V's), NULL: none.  The rounding of the
 * gradients themselves to their types is the caller's to add. */
int mref_mha_backward_typed(const attn_mha_desc *d, const attn_mha_weights *w,
                            const attn_mha_args *a, const float *dy, const mref_grads *out,
                            const mref_round *r);

/* Rows and width of a gradient family of desc (0 rows: not present). */
void mref_grad_shape(const attn_mha_desc *desc, int which, int64_t *rows, int64_t *width);

/* The gradients at dy ([B][L][E], row stride out_stride or E), for a valid
 * desc with its weights and args.  Returns 0 or -1 (out of memory). */
int mref_mha_backward(const attn_mha_desc *desc, const attn_mha_weights *w,
                      const attn_mha_args *args, const float *dy, const mref_grads *out);

/* The absolute floor added to every bound (the fp32 softmax may flush
 * probabilities below it to 0). */
#define MREF_TINY 1e-30

#endif
