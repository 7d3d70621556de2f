/* Linear attention: what plan time resolves (forward.c holds the forward
 * plan and execute, backward.c the backward) and the pieces both share:
 * the feature map and its derivative, the chunk geometry and the running
 * state's key sweep.  linear/ builds on core/ and blas/, and takes the
 * view rules from core/. */
#ifndef ATTN_LINEAR_H
#define ATTN_LINEAR_H

#include "core/core.h"
#include "core/exec.h"
#include "core/view.h"

/* Rows (queries, and keys of the masked product) per chunk.  Fixed, never
 * a function of the thread count. */
#define ATTN_LINEAR_CHUNK 64

#define ATTN_LINEAR_EPS_DEFAULT 1e-6f

struct attn_linear_plan {
    attn_linear_desc d;
    float eps;                /* resolved */
    int64_t group;            /* Hq / Hkv */
    int64_t nitems;           /* B * Hkv */
    size_t o_fk, o_x, o_z, o_den;  /* offsets in a thread's slice (phi(Q) at 0) */
    /* 16-bit tensors (q_type, k_type, v_type, o_type): a chunk's Q or K
     * rows widened at o_wqk (C x dk floats, when Q or K is 16-bit), its V
     * rows at o_wv (C x dv, when V is); O rows rounded from fp32. */
    int any16;
    size_t o_wqk, o_wv;
    size_t ws_thread, ws_bytes;
    attn_exec x;               /* kernels (exp of the elu + 1 map), engine, threads */
};

/* Checks of a forward desc shared with the backward plan; check_o = 0
 * skips the o view (the backward does not use it).  Also the counts the
 * plans form (items, state size).  (forward.c) */
attn_status attn_linear_validate(const attn_linear_desc *d, int check_o);

/* dst[r][x] = phi(src[r * lds + x]) for r < rows, x < cols; dst row-major
 * with leading dimension ldd.  elu + 1 takes exp from the plan's kernel
 * table (SIMD), then keeps x + 1 where x > 0. */
void attn_linear_phi(const attn_kernels *kern, attn_feature_map fm, const float *src, int64_t lds, int64_t rows,
                     int64_t cols, float *dst, int64_t ldd);
/* dst[r * ldd + x] = g[r][x] * phi'(src[r * lds + x]) (g row-major, ldg). */
void attn_linear_dphi(const attn_kernels *kern, attn_feature_map fm, const float *src, int64_t lds, int64_t rows,
                      int64_t cols, const float *g, int64_t ldg, float *dst, int64_t ldd);

/* Rows [r0, r0 + rows) of (b, h) of a tensor of type t as floats: in
 * place (F32; *ld = its seq stride) or widened exactly into buf (F16,
 * BF16; rows x width floats, *ld = width).  (forward.c) */
const float *attn_linear_rows(const attn_cvt_kernels *cvt, attn_dtype t, const void *base,
                              attn_view v, int64_t b, int64_t h, int64_t r0, int64_t rows,
                              int64_t width, float *buf, int64_t *ld);

/* Sums in double over eight fixed lanes, combined in a fixed order: the
 * same bits for any thread count, without a serial chain of double adds
 * (which cost as much as the chunk's GEMMs). */
static inline double lin_dot(const float *x, const float *y, int64_t n)
{
    double s[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += (double)x[i + l] * y[i + l];
    for (; i < n; i++)
        s[i & 7] += (double)x[i] * y[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static inline double lin_sum(const float *x, int64_t n)
{
    double s[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += x[i + l];
    for (; i < n; i++)
        s[i & 7] += x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* The chunk geometry of one (b, h) pair: queries [0, qlen) in chunks of
 * ATTN_LINEAR_CHUNK; chunk [i0, i1) takes the keys [kl, kh) in its masked
 * product, and every key before kl is in the running state it starts from.
 * Causal: kl = clamp(i0 + off), kh = clamp(i1 + off) with off = 0
 * (TOP_LEFT) or kvlen - qlen (BOTTOM_RIGHT), clamped to [0, kvlen]; local
 * key c is visible to local row r iff c <= r + shift, shift = i0 + off - kl.
 * Non-causal: kl = kh = kvlen (every key in the state). */
typedef struct lin_geom {
    int causal;
    int64_t qlen, kvlen, off;
} lin_geom;

static inline int64_t lin_clamp(int64_t x, int64_t hi)
{
    return x < 0 ? 0 : x > hi ? hi : x;
}

static inline void lin_chunk_keys(const lin_geom *g, int64_t i0, int64_t i1, int64_t *kl,
                                  int64_t *kh, int64_t *shift)
{
    if (!g->causal) {
        *kl = *kh = g->kvlen;
        *shift = 0;
        return;
    }
    *kl = lin_clamp(i0 + g->off, g->kvlen);
    *kh = lin_clamp(i1 + g->off, g->kvlen);
    *shift = i0 + g->off - *kl;
}

/* Zero the entries of the r x c block a (leading dimension lda) that local
 * row i does not see: columns c > i + shift. */
static inline void lin_mask(float *a, int64_t lda, int64_t rows, int64_t cols, int64_t shift)
{
    for (int64_t r = 0; r < rows; r++) {
        int64_t first = r + shift + 1;
        if (first < 0) first = 0;
        for (int64_t c = first; c < cols; c++)
            a[r * lda + c] = 0.0f;
    }
}

#endif
