/*
 * mha_reference.c -- independent float64 multi-head attention layer for the
 * tests (see mha_reference.h).
 *
 * Error model (u = 2^-24, first order, worst case: no cancellation is
 * assumed, so it holds for any BLAS, blocking or summation order).  For a
 * projected element z = sum_k x_k W_k + b, |z|~ = sum_k |x_k W_k| + |b|
 * (computed here in double alongside z):
 * - projections (sgemm over K terms, then the bias add):
 *     |dz| <= (K + 2) u |z|~,   K = E, kdim, vdim for Q, K, V;
 * - logit s_j = scale q.k_j + bias_j, with T_j = |scale| sum_d |q|~ |k_j|~
 *   + |bias_j|: the projection errors of q and k contribute
 *   (cq + ck) u T_j and the fp32 dot product, scale, bias and max
 *   subtraction (dh + 6) u T_j, so E_s = (cq + ck + dh + 6) u max_j T_j;
 * - probabilities: p_rel = expm1(2 E_s) + (nvis + 2 KEXP + 4) u (KEXP = 16
 *   ulp allowed for a vectorized exp, nvis terms in the sum, the division),
 *   |P_j - p_j| <= p_rel p_j;
 * - attention output O_d = sum_j p_j v_jd over nvis visible keys:
 *     |dO_d| <= (p_rel + (nvis + 4) u + cv u) sum_j p_j |v_jd|~;
 * - layer output Y_e = sum_c O_c Wo_ec + bo_e:
 *     |dY_e| <= sum_c dO_c |Wo_ec| + (E + 2) u (sum_c (|O_c| + dO_c) |Wo_ec|
 *               + |bo_e|)   (the rounding acts on the perturbed O);
 * - averaged weights (fp32 sum over H heads, times 1/H rounded):
 *     |dA| <= (1/H) sum_h p_rel_h p_h + (H + 2) u A.
 * Every bound carries a safety factor SAFE for the neglected second-order
 * terms, plus MREF_TINY.
 */
#include "mha_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MREF_U 5.9604644775390625e-08 /* 2^-24 */
#define MREF_KEXP 16.0
#define MREF_SAFE 1.25

/* out[r][n] = sum_k in[r*ld + k] W[n][k] + b[n] (b may be NULL), and the
 * same with absolute values in out_abs. */
static void project(const float *in, int64_t ld, int64_t rows, int64_t K,
                    const float *W, const float *b, int64_t N, double *out,
                    double *out_abs)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in + r * ld;
        for (int64_t n = 0; n < N; n++) {
            const float *wr = W + n * K;
            double acc = b ? (double)b[n] : 0.0, aacc = b ? fabs((double)b[n]) : 0.0;
            for (int64_t k = 0; k < K; k++) {
                double t = (double)x[k] * (double)wr[k];
                acc += t;
                aacc += fabs(t);
            }
            out[r * N + n] = acc;
            out_abs[r * N + n] = aacc;
        }
    }
}

static int window_visible(const attn_mha_desc *d, int64_t klen, int64_t qlen,
                          int64_t i, int64_t j)
{
    int64_t diag = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? i + klen - qlen : i;
    if (d->window_left >= 0 && diag - j > d->window_left)
        return 0;
    if (d->window_right >= 0 && j - diag > d->window_right)
        return 0;
    return 1;
}

/* 1 if a uint8 entry lets its position take part under mode. */
static int mask_allows(attn_mask_mode mode, uint8_t v)
{
    return mode == ATTN_MASK_KEEP_NONZERO ? v != 0 : v == 0;
}

int mref_mha(const attn_mha_desc *d, const attn_mha_weights *w,
             const attn_mha_args *a, const mref_out *out)
{
    const int64_t E = d->embed_dim, H = d->num_heads;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : H;
    const int64_t dh = E / H, kvE = Hkv * dh, group = H / Hkv;
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    const int64_t B = d->batch, L = d->q_len, S = d->kv_len;
    const int64_t xs = d->x_stride ? d->x_stride : E;
    const int64_t ks = d->self_attention ? xs : (d->key_stride ? d->key_stride : kdim);
    const int64_t vs = d->self_attention ? xs : (d->value_stride ? d->value_stride : vdim);
    const float *xk = d->self_attention ? a->x : a->key;
    const float *xv = d->self_attention ? a->x : a->value;
    const double scale = isnan(d->scale) ? 1.0 / sqrt((double)dh) : (double)d->scale;
    const double u = MREF_U;

    /* The weights as separate matrices (views into in_proj when packed). */
    const float *wq = d->packed_in_proj ? w->in_proj_weight : w->q_weight;
    const float *wk = d->packed_in_proj ? w->in_proj_weight + E * E : w->k_weight;
    const float *wv = d->packed_in_proj ? w->in_proj_weight + 2 * E * E : w->v_weight;
    const float *bq = NULL, *bk = NULL, *bv = NULL, *bo = NULL;
    if (d->has_bias) {
        bq = d->packed_in_proj ? w->in_proj_bias : w->q_bias;
        bk = d->packed_in_proj ? w->in_proj_bias + E : w->k_bias;
        bv = d->packed_in_proj ? w->in_proj_bias + 2 * E : w->v_bias;
        bo = w->out_bias;
    }

    const size_t nq = (size_t)(B * L * E), nk = (size_t)(B * S * kvE);
    double *Q = malloc(nq * sizeof *Q), *Qa = malloc(nq * sizeof *Qa);
    double *K = malloc(nk * sizeof *K), *Ka = malloc(nk * sizeof *Ka);
    double *V = malloc(nk * sizeof *V), *Va = malloc(nk * sizeof *Va);
    double *O = calloc(nq, sizeof *O), *Oe = calloc(nq, sizeof *Oe);
    double *s = malloc((size_t)S * sizeof *s), *pr = malloc((size_t)S * sizeof *pr);
    double *prel = malloc((size_t)(B * H * L) * sizeof *prel);
    double *pp = malloc((size_t)(B * H * L * S) * sizeof *pp);
    unsigned char *vis = malloc((size_t)S);
    int rc = -1;
    if (!Q || !Qa || !K || !Ka || !V || !Va || !O || !Oe || !s || !pr || !prel || !pp || !vis)
        goto done;

    project(a->x, xs, B * L, E, wq, bq, E, Q, Qa);
    project(xk, ks, B * S, kdim, wk, bk, kvE, K, Ka);
    project(xv, vs, B * S, vdim, wv, bv, kvE, V, Va);
    const double cq = (double)E + 2.0, ck = (double)kdim + 2.0, cv = (double)vdim + 2.0;

    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? a->kv_lens[b] : S;
        const int64_t qlen = d->use_q_lens ? a->q_lens[b] : L;
        for (int64_t h = 0; h < H; h++) {
            const int64_t hk = h / group;
            for (int64_t i = 0; i < L; i++) {
                const int64_t row = (b * H + h) * L + i;
                const double *q = Q + (b * L + i) * E + h * dh;
                const double *qa = Qa + (b * L + i) * E + h * dh;
                int64_t nv = 0;
                double mx = -INFINITY, tmax = 0.0;
                for (int64_t j = 0; j < S; j++) {
                    vis[j] = 0;
                    if (i >= qlen || j >= klen || !window_visible(d, klen, qlen, i, j))
                        continue;
                    if (d->mask_mode != ATTN_MASK_NONE &&
                        !mask_allows(d->mask_mode, a->mask[b * d->mask.batch + h * d->mask.head +
                                                           i * d->mask.seq + j]))
                        continue;
                    if (d->key_padding_mode != ATTN_MASK_NONE &&
                        !mask_allows(d->key_padding_mode, a->key_padding_mask[b * S + j]))
                        continue;
                    double bj = 0.0;
                    if (d->use_bias) {
                        bj = (double)a->bias[b * d->bias.batch + h * d->bias.head +
                                             i * d->bias.seq + j];
                        if (bj == -INFINITY)
                            continue;
                    }
                    const double *kr = K + (b * S + j) * kvE + hk * dh;
                    const double *ka = Ka + (b * S + j) * kvE + hk * dh;
                    double dot = 0.0, t = 0.0;
                    for (int64_t x = 0; x < dh; x++) {
                        dot += q[x] * kr[x];
                        t += qa[x] * ka[x];
                    }
                    s[j] = scale * dot + bj;
                    t = fabs(scale) * t + fabs(bj);
                    if (t > tmax)
                        tmax = t;
                    if (s[j] > mx)
                        mx = s[j];
                    vis[j] = 1;
                    nv++;
                }
                double sum = 0.0;
                for (int64_t j = 0; j < S; j++)
                    if (vis[j])
                        sum += exp(s[j] - mx);
                for (int64_t j = 0; j < S; j++)
                    pr[j] = vis[j] ? exp(s[j] - mx) / sum : 0.0;
                const double es = (cq + ck + (double)dh + 6.0) * u * tmax;
                const double p_rel = nv ? expm1(2.0 * es) + ((double)nv + 2.0 * MREF_KEXP + 4.0) * u
                                        : 0.0;
                prel[row] = p_rel;
                memcpy(pp + row * S, pr, (size_t)S * sizeof *pr);
                if (out->p)
                    memcpy(out->p + row * S, pr, (size_t)S * sizeof *pr);
                if (out->p_tol)
                    for (int64_t j = 0; j < S; j++)
                        out->p_tol[row * S + j] = MREF_SAFE * p_rel * pr[j] + MREF_TINY;
                const double orel = p_rel + ((double)nv + 4.0) * u + cv * u;
                for (int64_t x = 0; x < dh; x++) {
                    double acc = 0.0, aacc = 0.0;
                    for (int64_t j = 0; j < S; j++) {
                        if (!vis[j])
                            continue;
                        acc += pr[j] * V[(b * S + j) * kvE + hk * dh + x];
                        aacc += pr[j] * Va[(b * S + j) * kvE + hk * dh + x];
                    }
                    O[(b * L + i) * E + h * dh + x] = acc;
                    Oe[(b * L + i) * E + h * dh + x] = orel * aacc;
                }
            }
        }
    }

    /* output projection */
    for (int64_t r = 0; r < B * L; r++)
        for (int64_t e = 0; e < E; e++) {
            const float *wr = w->out_weight + e * E;
            double acc = bo ? (double)bo[e] : 0.0, aacc = bo ? fabs((double)bo[e]) : 0.0;
            double prop = 0.0;
            for (int64_t c = 0; c < E; c++) {
                double t = O[r * E + c] * (double)wr[c];
                acc += t;
                aacc += fabs(t);
                prop += Oe[r * E + c] * fabs((double)wr[c]);
            }
            if (out->y)
                out->y[r * E + e] = acc;
            if (out->y_tol)
                out->y_tol[r * E + e] =
                    MREF_SAFE * (prop + ((double)E + 2.0) * u * (aacc + prop)) + MREF_TINY;
        }

    /* averaged weights */
    if (out->avg || out->avg_tol)
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < S; j++) {
                    double acc = 0.0, err = 0.0;
                    for (int64_t h = 0; h < H; h++) {
                        const int64_t row = (b * H + h) * L + i;
                        acc += pp[row * S + j];
                        err += prel[row] * pp[row * S + j];
                    }
                    acc /= (double)H;
                    err /= (double)H;
                    if (out->avg)
                        out->avg[(b * L + i) * S + j] = acc;
                    if (out->avg_tol)
                        out->avg_tol[(b * L + i) * S + j] =
                            MREF_SAFE * (err + ((double)H + 2.0) * u * acc) + MREF_TINY;
                }
    rc = 0;
done:
    free(Q);
    free(Qa);
    free(K);
    free(Ka);
    free(V);
    free(Va);
    free(O);
    free(Oe);
    free(s);
    free(pr);
    free(prel);
    free(pp);
    free(vis);
    return rc;
}
