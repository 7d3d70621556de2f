/*
 * bwd_check.h -- the check of one attn_sdpa_backward result against the
 * float64 backward reference (reference.h, ref_sdpa_bwd): every gradient
 * element within its fp32 error bound, the exact (bitwise +0) zeros attn.h
 * promises, and the sentinel everywhere outside the output views.  Shared
 * by the SDPA test table (sdpa_bwd.c) and the fuzz target
 * (fuzz/fuzz_sdpa_bwd.c); the bounds are summarized in sdpa_bwd.c.
 */
#ifndef ATTN_TEST_BWD_CHECK_H
#define ATTN_TEST_BWD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <attn.h>

/* One gradient output: the view and, for the sentinel check, the whole
 * buffer it lies in. */
typedef struct bwd_buf {
    const float *ptr;       /* origin of the view */
    attn_view v;            /* strides (for dBias: 0 where the bias broadcasts) */
    int64_t B, H, S, D;     /* the view's shape */
    const uint32_t *base;   /* the whole buffer (NULL: no sentinel check) */
    size_t count;           /* its elements */
} bwd_buf;

/* Largest |error| per output and largest error / tolerance; bwd_check
 * raises them (initialize to 0 or carry them over calls). */
typedef struct bwd_err {
    double dq, dk, dv, dbias, ratio;
} bwd_err;

/* Called with the text of each problem found. */
typedef void (*bwd_report_fn)(void *ctx, const char *msg);

/*
 * Check dq, dk, dv and dbias (NULL without dBias; its shape is that of
 * ref_dbias_shape) of the backward of the forward fwd (only its problem
 * fields: o, probs, lse unused) on the inputs fwd_args (q, k, v, lengths,
 * mask, bias) with dO at d_o in view d_o_view.  Elements outside each view
 * must hold the 32-bit pattern sentinel.  Returns the number of problems
 * reported (out of memory counts as one).
 */
struct ref_bwd_types;
long bwd_check(const attn_sdpa_desc *fwd, const attn_sdpa_args *fwd_args, const float *d_o,
               attn_view d_o_view, const bwd_buf *dq, const bwd_buf *dk, const bwd_buf *dv,
               const bwd_buf *dbias, uint32_t sentinel, bwd_report_fn rep, void *ctx,
               bwd_err *err);
/* bwd_check with the error terms of 16-bit tensors (reference.h,
 * ref_bwd_types; NULL: fp32), on gradients widened back to fp32. */
long bwd_check_types(const attn_sdpa_desc *fwd, const attn_sdpa_args *fwd_args, const float *d_o,
                     attn_view d_o_view, const bwd_buf *dq, const bwd_buf *dk, const bwd_buf *dv,
                     const bwd_buf *dbias, uint32_t sentinel, bwd_report_fn rep, void *ctx,
                     bwd_err *err, const struct ref_bwd_types *ty);

#endif
