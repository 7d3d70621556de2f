/*
 * reference.c -- independent float64 SDPA for the tests (see reference.h).
 *
 * Straight from the semantics of attn.h, one (b, h, i) row at a time:
 *   s_j = scale * sum_d q_id k_jd + bias_ij           (in double)
 *   j visible iff  window(i, j)  and  j < kv_lens[b]  and  mask_ij allows it
 *                  and  bias_ij != -INFINITY
 *   window(i, j):  d - window_left <= j <= d + window_right (negative bound =
 *                  unbounded), d = i (TOP_LEFT) or i + m_b - n_b
 *                  (BOTTOM_RIGHT; m_b, n_b = kv_lens[b], q_lens[b] when in
 *                  use, else m, n)
 *   p_j = exp(s_j - max) / sum_visible exp(s_k - max), 0 where hidden
 *   o_d = sum_j p_j v_jd,   lse = max + log(sum_visible exp(s_k - max))
 * Rows i >= q_lens[b] and rows without visible key: o = 0, p = 0,
 * lse = -INFINITY.
 *
 * Inputs hidden by the lengths or the window are never touched: a Q row is
 * read only for i < q_lens[b]; K and V rows, mask and bias entries only for
 * (i, j) inside the window and the lengths.  The mask is read before the
 * bias, and the bias before K (hidden-by-mask positions skip the rest).
 */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ref_scale(const attn_sdpa_desc *desc)
{
    if (isnan(desc->scale))
        return 1.0 / sqrt((double)desc->qk_dim);
    return (double)desc->scale;
}

int ref_window_visible(const attn_sdpa_desc *desc, int64_t mb, int64_t nb,
                       int64_t i, int64_t j)
{
    int64_t diag = i;
    if (desc->align == ATTN_ALIGN_BOTTOM_RIGHT)
        diag = i + mb - nb;
    /* |diag - j| < 2^33 for any valid plan: no overflow for huge bounds */
    if (desc->window_left >= 0 && diag - j > desc->window_left)
        return 0;
    if (desc->window_right >= 0 && j - diag > desc->window_right)
        return 0;
    return 1;
}

/*
 * The scores of one row (b, h, i) with i < qlen: vis[j] = 1 for the visible
 * keys, s[j] their logit and a[j] its magnitude |scale| sum_d |q_d k_jd| +
 * |bias_j|; *mx and *amax the largest of each.  Returns the number of
 * visible keys.  Reads the Q row, and mask, bias and K only where the
 * lengths and the window let the position through (mask before bias before
 * K).  Shared by the forward and the backward reference.
 */
static int64_t row_scores(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
                          int64_t b, int64_t h, int64_t i, int64_t klen, int64_t qlen,
                          double *s, double *a, unsigned char *vis, double *mx_out,
                          double *amax_out)
{
    const int64_t m = desc->kv_len, dk = desc->qk_dim;
    const int64_t hk = h / (desc->q_heads / desc->kv_heads);
    const double scale = ref_scale(desc);
    const float *K = args->k + b * desc->k.batch + hk * desc->k.head;
    const float *Q = args->q + b * desc->q.batch + h * desc->q.head + i * desc->q.seq;
    const uint8_t *M = NULL;
    const float *Bi = NULL;
    if (desc->mask_mode != ATTN_MASK_NONE)
        M = args->mask + b * desc->mask.batch + h * desc->mask.head + i * desc->mask.seq;
    if (desc->use_bias)
        Bi = args->bias + b * desc->bias.batch + h * desc->bias.head + i * desc->bias.seq;
    int64_t nv = 0;
    double mx = -INFINITY, amax = 0.0;
    for (int64_t j = 0; j < m; j++) {
        vis[j] = 0;
        if (j >= klen || !ref_window_visible(desc, klen, qlen, i, j))
            continue;
        if (M) {
            int nz = M[j] != 0;
            if (desc->mask_mode == ATTN_MASK_KEEP_NONZERO ? !nz : nz)
                continue;
        }
        double bj = 0.0;
        if (Bi) {
            bj = (double)Bi[j];
            if (bj == -INFINITY)
                continue;
        }
        const float *Kj = K + j * desc->k.seq;
        double dot = 0.0, adot = 0.0;
        for (int64_t d = 0; d < dk; d++) {
            double t = (double)Q[d] * (double)Kj[d];
            dot += t;
            adot += fabs(t);
        }
        s[j] = scale * dot + bj;
        a[j] = fabs(scale) * adot + fabs(bj);
        vis[j] = 1;
        nv++;
        if (s[j] > mx)
            mx = s[j];
        if (a[j] > amax)
            amax = a[j];
    }
    *mx_out = mx;
    *amax_out = amax;
    return nv;
}

int ref_sdpa(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
             const ref_out *out)
{
    const int64_t B = desc->batch, Hq = desc->q_heads, Hkv = desc->kv_heads;
    const int64_t n = desc->q_len, m = desc->kv_len;
    const int64_t dv = desc->v_dim;
    const int64_t group = Hq / Hkv;

    double *s = malloc((size_t)m * sizeof *s);
    double *a = malloc((size_t)m * sizeof *a);
    unsigned char *vis = malloc((size_t)m);
    if (!s || !a || !vis) {
        free(s);
        free(a);
        free(vis);
        return -1;
    }

    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = desc->use_kv_lens ? args->kv_lens[b] : m;
        const int64_t qlen = desc->use_q_lens ? args->q_lens[b] : n;
        for (int64_t h = 0; h < Hq; h++) {
            const int64_t hk = h / group;
            const float *V = args->v + b * desc->v.batch + hk * desc->v.head;
            for (int64_t i = 0; i < n; i++) {
                const int64_t row = (b * Hq + h) * n + i;
                int64_t nv = 0;
                double mx = -INFINITY, amax = 0.0;

                if (i < qlen)
                    nv = row_scores(desc, args, b, h, i, klen, qlen, s, a, vis, &mx, &amax);

                double sum = 0.0;
                if (nv > 0) {
                    for (int64_t j = 0; j < m; j++)
                        if (vis[j])
                            sum += exp(s[j] - mx);
                }
                if (out->lse)
                    out->lse[row] = nv > 0 ? mx + log(sum) : -INFINITY;
                if (out->s_abs)
                    out->s_abs[row] = amax;
                if (out->nvis)
                    out->nvis[row] = nv;
                if (out->p) {
                    double *P = out->p + row * m;
                    for (int64_t j = 0; j < m; j++)
                        P[j] = (nv > 0 && vis[j]) ? exp(s[j] - mx) / sum : 0.0;
                }
                if (out->o || out->o_abs) {
                    for (int64_t d = 0; d < dv; d++) {
                        double acc = 0.0, aacc = 0.0;
                        if (nv > 0) {
                            for (int64_t j = 0; j < m; j++) {
                                if (!vis[j])
                                    continue;
                                double pj = exp(s[j] - mx) / sum;
                                double vj = (double)V[j * desc->v.seq + d];
                                acc += pj * vj;
                                aacc += pj * fabs(vj);
                            }
                        }
                        if (out->o)
                            out->o[row * dv + d] = acc;
                        if (out->o_abs)
                            out->o_abs[row * dv + d] = aacc;
                    }
                }
            }
        }
    }
    free(s);
    free(a);
    free(vis);
    return 0;
}

/*
 * Error model (u = 2^-24, the fp32 unit roundoff), first order, worst case
 * (no statistical cancellation is assumed, so the bounds hold for any BLAS,
 * blocking or summation order):
 * - each logit: an fp32 dot product of length dk (|err| <= dk u sum|q k|),
 *   the scale multiply, the bias add and the max subtraction add a few u of
 *   the magnitude:  E_s = (dk + 6) u s_abs.
 * - exp in fp32 (a vectorized approximation is allowed KEXP ulps), the sum
 *   over nvis terms (nvis u) and the division/normalization (2 u):
 *   p_rel = expm1(2 E_s) + (nvis + 2 KEXP + 4) u.
 * - O = sum_j p_j v_j in fp32 over nvis terms, possibly rescaled per key
 *   block (online softmax): o_rel = p_rel + (nvis + 4) u, times o_abs.
 * - lse = max + log(sum): E_s + (nvis + KEXP + 4) u + 2 u |lse|.
 * Everything carries a safety factor SAFE for the neglected second-order
 * terms.
 */
#define REF_U 5.9604644775390625e-08 /* 2^-24 */
#define REF_KEXP 16.0
#define REF_SAFE 1.25

void ref_row_tolerance(int64_t dk, int64_t nvis, double s_abs, double lse,
                       double *p_rel, double *o_rel, double *lse_abs)
{
    const double u = REF_U;
    const double es = ((double)dk + 6.0) * u * s_abs;
    const double pr = expm1(2.0 * es) + ((double)nvis + 2.0 * REF_KEXP + 4.0) * u;
    if (p_rel)
        *p_rel = REF_SAFE * pr;
    if (o_rel)
        *o_rel = REF_SAFE * (pr + ((double)nvis + 4.0) * u);
    if (lse_abs) {
        double l = isfinite(lse) ? fabs(lse) : 0.0;
        *lse_abs = REF_SAFE * (es + ((double)nvis + REF_KEXP + 4.0) * u +
                               2.0 * u * l) + REF_TINY;
    }
}

int ref_sdpa_alloc(const attn_sdpa_desc *d, const attn_sdpa_args *a, ref_out *ro)
{
    const size_t rows = (size_t)(d->batch * d->q_heads * d->q_len);
    memset(ro, 0, sizeof *ro);
    ro->o = malloc(rows * (size_t)d->v_dim * sizeof(double));
    ro->o_abs = malloc(rows * (size_t)d->v_dim * sizeof(double));
    ro->lse = malloc(rows * sizeof(double));
    ro->s_abs = malloc(rows * sizeof(double));
    ro->nvis = malloc(rows * sizeof(int64_t));
    if (d->want_probs)
        ro->p = malloc(rows * (size_t)d->kv_len * sizeof(double));
    if (!ro->o || !ro->o_abs || !ro->lse || !ro->s_abs || !ro->nvis ||
        (d->want_probs && !ro->p) || ref_sdpa(d, a, ro)) {
        ref_out_free(ro);
        return -1;
    }
    return 0;
}

void ref_out_free(ref_out *ro)
{
    free(ro->o);
    free(ro->o_abs);
    free(ro->lse);
    free(ro->s_abs);
    free(ro->nvis);
    free(ro->p);
    memset(ro, 0, sizeof *ro);
}
