/*
 * linear_ref.h -- an independent float64 reference of attn's linear
 * attention (attn.h, "Linear attention"), used only by the tests.  It is the
 * quadratic form: for each query, explicit sums over the keys it sees
 * (plus the state passed in), no chunks, no running state, nothing shared
 * with lib/.  Inputs are dense double arrays (the tests copy the views
 * out); the reference never reads a padded query row (i >= q_lens[b]) or a
 * key j >= kv_lens[b], so NaN there does not disturb it.
 *
 * Dense layouts: q [B][Hq][n][dk], k [B][Hkv][m][dk], v [B][Hkv][m][dv],
 * o, d_o [B][Hq][n][dv], s [B][Hkv][dk][dv], z [B][Hkv][dk].
 */
#ifndef ATTN_TEST_LINEAR_REF_H
#define ATTN_TEST_LINEAR_REF_H

#include <stdint.h>

#include <attn.h>

typedef struct lref_shape {
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int fmap;                /* attn_feature_map */
    int causal;
    int align;               /* attn_align */
    double eps;              /* resolved (no NaN) */
    const int32_t *kv_lens;  /* NULL: m for every batch */
    const int32_t *q_lens;   /* NULL: n */
} lref_shape;

/* phi and phi' of the feature map, in double. */
double lref_phi(int fmap, double x);
double lref_dphi(int fmap, double x);

/* 1 if query i of batch b sees key j (of this call; the state is seen by
 * every non-padded query). */
int lref_visible(const lref_shape *s, int64_t b, int64_t i, int64_t j);

/*
 * The forward.  s0, z0: the state passed in (NULL: 0).  Outputs (any may be
 * NULL): o; o_tol, the error bound of an fp32 implementation for each O
 * element (see linear_ref.c); s1, z1 the state after the call (s0 + the
 * sums over every valid key) and s1_tol, z1_tol their bounds.  Padded rows
 * get o = 0, o_tol = 0.  Returns 0, or -1 without memory.
 */
int lref_forward(const lref_shape *s, const double *q, const double *k, const double *v,
                 const double *s0, const double *z0, double *o, double *o_tol, double *s1,
                 double *z1, double *s1_tol, double *z1_tol);

/*
 * The analytic backward of L = sum over non-padded rows of dO . O (no
 * state): dq, dk, dv and their fp32 error bounds (any tol may be NULL).
 * Padded query rows and keys no query sees get exactly 0 (tol 0).
 * Returns 0, or -1 without memory.
 */
int lref_backward(const lref_shape *s, const double *q, const double *k, const double *v,
                  const double *d_o, double *dq, double *dk, double *dv, double *dq_tol,
                  double *dk_tol, double *dv_tol);

#endif
