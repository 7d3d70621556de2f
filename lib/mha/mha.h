/* Multi-head attention layer: projections as row-blocked sgemm over all
 * B x L (or B x S) tokens, written straight into BSHD layout in the
 * workspace; the SDPA core reads them as head-strided views and writes its
 * output in BSHD; the output projection reads that.  Nothing is transposed
 * or copied between input and output.
 *
 * Every GEMM is cut into blocks of ATTN_MHA_ROWS rows fixed by the shape and
 * run on attn's threads with the BLAS single-threaded, so results are
 * bitwise identical for any number of threads, as for SDPA. */
#ifndef ATTN_MHA_H
#define ATTN_MHA_H

#include "core/core.h"
#include "core/view.h"
#include "core/exec.h"

#define ATTN_MHA_ROWS 128
/* Rows of a weight gradient per work item of the backward. */
#define ATTN_MHA_WROWS 64
/* Tokens per sgemm call of a weight gradient (int arguments); the chunks
 * add up in token order. */
#define ATTN_MHA_TOKENS ((int64_t)1 << 30)

struct attn_mha_plan {
    attn_mha_desc d;
    int64_t E, H, Hkv, dh, kvE, kdim, vdim, B, L, S;
    int64_t xs, ks, vs, os;          /* row strides of X, key, value, Y */
    int fused_qkv;                   /* self-attention with packed weights */
    int combine;                     /* element mask AND key padding */
    int64_t mask_heads;              /* heads of the combined mask (1 or H) */
    int64_t ldq, ldk, ldv;           /* row strides of Q, K, V in workspace */
    size_t off_q, off_k, off_v, off_o, off_p, off_mask, off_sdpa, ws_bytes;
    attn_sdpa_plan *sdpa;
    /* Training: the context (Q, K, V, O as in the workspace, then the
     * logsumexp [B][H][L]), the forward's SDPA plan with the logsumexp, the
     * SDPA backward and the backward's workspace (dO, dQ, dK, dV, the
     * combined mask, the SDPA backward's workspace, per-thread scratch). */
    size_t cx_q, cx_k, cx_v, cx_o, cx_lse, cx_bytes;
    size_t bw_do, bw_q, bw_k, bw_v, bw_mask, bw_sdpa, bw_scratch, bw_thread, bw_bytes;
    attn_sdpa_plan *sdpa_train;
    attn_sdpa_bwd_plan *sdpa_bwd;
    int no_training;                 /* context or backward sizes overflow */
    attn_exec x;                     /* projections: engine, BLAS hooks, threads */
    /* Element types (attn.h, "Multi-head attention layer: element
     * types"): x16, w16 when x_type, w_type is F16 or BF16 (no training
     * then); bf: the BF16 products (x_type == w_type == BF16 on the tile
     * engine, no sparse option), with Q, K, V and O as BF16 in the
     * workspace; otherwise 16-bit values are widened to fp32.  The
     * workspace then also holds the weights as prepared per call (off_w:
     * BF16 pair panels, ATTN_MHA_STRIP columns per strip, when bf; the
     * weights widened to fp32 when w16 without bf) in the order in_proj or
     * W_q, W_k, W_v, W_o; the biases in fp32 (off_b: b_q, b_k, b_v, b_o,
     * when w16 and has_bias) and a scratch block per thread (off_scr,
     * scr_thread bytes each: bf, a strip of ATTN_MHA_ROWS rows of fp32
     * results; x16 without bf, ATTN_MHA_ROWS widened input or output
     * rows). */
    int x16, w16, bf;
    size_t off_w[4], off_b, off_scr, scr_thread;
    /* The 16-bit backward's workspace (after bw_scratch): with BF16
     * products BF16 dO, dQ, dK, dV for the SDPA backward (bw_do16, bw_q16
     * and K, V after Q as in the context) and O widened (bw_o32); when x16
     * X, Xk, Xv and dY widened (dense rows) and the fp32 sums of dX, dXk,
     * dXv (bw_gx[3]); when w16 the weights widened as the forward widens
     * them (bw_w, off_w's order) and the fp32 sums of their gradients
     * (bw_gw) and of the biases' (bw_gb: b_q, b_k, b_v, b_o). */
    size_t bw_do16, bw_q16, bw_k16, bw_v16, bw_o32;
    size_t bw_x[3], bw_dy, bw_gx[3], bw_w[4], bw_gw[4], bw_gb;
};

/* Columns of a strip of a packed BF16 weight panel. */
#define ATTN_MHA_STRIP 32

/* Shared by the forward and the backward (forward.c). */
/* The context's checks: the statuses of a caller workspace. */
attn_status attn_mha_check_context(const attn_mha_plan *p, const void *context, size_t bytes);
/* The pointers of weights and args (fwd: with out and the attention
 * weights), then those in more[], then the lengths (forward.c). */
attn_status attn_mha_check_args(const attn_mha_plan *p, const attn_mha_weights *w,
                                const attn_mha_args *a, int fwd, const attn_pointer_use *more,
                                size_t nmore);
/* keep[b][h][i][j] = attn mask visible AND key padding visible. */
void attn_mha_build_mask(const attn_mha_plan *p, const attn_mha_args *a, uint8_t *keep);

#endif
