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
 * - dropout (dropout_p > 0): p_j becomes p'_j = p_j keep_j / (1 - p), the
 *   keep mask from the public attn_dropout_mask_fill (which test_dropout.c
 *   checks against an independent Philox4x32-10); p' replaces p in O, the
 *   weights and their average, and the fp32 scale 1/(1 - p) (rounded, then
 *   a multiply) adds 2 u to p_rel.
 * - 16-bit layers (mref_mha_typed, mref_round r): a rounding of a value z
 *   to a 16-bit type adds r.* |z| at most.  Q and K rounded after their
 *   projections: |dq| <= (cq u + r.q) |q|~, so E_s gets (r.q + r.k) max T_j;
 *   V rounded, P rounded for P V (BF16 products) and O rounded: O's
 *   relative bound gets r.v + r.p + r.o; Y rounded: its bound gets
 *   r.y (sum_c (|O_c| + dO_c) |Wo_ec| + |bo_e|) >= r.y |Y| and r.y_abs (a
 *   result among the type's subnormals is off by an absolute amount).
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

/* The sparse rules (attn.h, "Sparse attention") on top of the window and
 * the lengths, element by element. */
static int candidate(const attn_mha_desc *d, const attn_mha_args *a, int64_t b, int64_t h,
                     int64_t i, int64_t j, int64_t klen, int64_t qlen)
{
    if (i >= qlen || j >= klen)
        return 0;
    int vis = window_visible(d, klen, qlen, i, j);
    if (d->use_global_k && a->global_k[b * d->kv_len + j])
        vis = 1;
    if (d->use_global_q && a->global_q[b * d->q_len + i])
        vis = 1;
    if (vis && d->block_size > 0) {
        const int64_t bs = d->block_size;
        const int64_t nb = (d->q_len + bs - 1) / bs, mb = (d->kv_len + bs - 1) / bs;
        vis = a->layout[((d->layout_per_head ? h : 0) * nb + i / bs) * mb + j / bs] != 0;
    }
    return vis;
}

/* The dropout of row (b, h, i): keep[j] from attn_dropout_mask_fill and
 * *zs = 1 / (1 - p) (0 for p = 1, where nothing is kept).  Returns 0 or -1
 * (the public call failed). */
static int drop_keep(const attn_mha_desc *d, int64_t b, int64_t h, int64_t i, int64_t S,
                     uint8_t *keep, double *zs)
{
    *zs = d->dropout_p < 1.0 ? 1.0 / (1.0 - d->dropout_p) : 0.0;
    return attn_dropout_mask_fill(d->dropout_p, d->dropout_seed, d->dropout_offset, b, h, i, 1,
                                  S, keep, S) == ATTN_OK ? 0 : -1;
}

/* 1 if a uint8 entry lets its position take part under mode. */
static int mask_allows(attn_mask_mode mode, uint8_t v)
{
    return mode == ATTN_MASK_KEEP_NONZERO ? v != 0 : v == 0;
}

int mref_mha(const attn_mha_desc *d, const attn_mha_weights *w,
             const attn_mha_args *a, const mref_out *out)
{
    return mref_mha_typed(d, w, a, out, NULL);
}

int mref_mha_typed(const attn_mha_desc *d, const attn_mha_weights *w,
                   const attn_mha_args *a, const mref_out *out, const mref_round *rnd)
{
    static const mref_round none;
    const mref_round *rd = rnd ? rnd : &none;
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
    uint8_t *keep = malloc((size_t)S);
    const int drop = d->dropout_p > 0.0;
    int rc = -1;
    if (!Q || !Qa || !K || !Ka || !V || !Va || !O || !Oe || !s || !pr || !prel || !pp || !vis ||
        !keep)
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
                    if (!candidate(d, a, b, h, i, j, klen, qlen))
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
                /* (Q and K rounded: rd->q, rd->k relative to |q|~, |k|~) */
                const double es = ((cq + ck + (double)dh + 6.0) * u + rd->q + rd->k) * tmax;
                double p_rel = nv ? expm1(2.0 * es) + ((double)nv + 2.0 * MREF_KEXP + 4.0) * u
                                  : 0.0;
                if (drop) { /* P' = P keep / (1 - p) */
                    double zs;
                    if (drop_keep(d, b, h, i, S, keep, &zs) != 0)
                        goto done;
                    for (int64_t j = 0; j < S; j++)
                        pr[j] = keep[j] ? pr[j] * zs : 0.0;
                    p_rel += 2.0 * u;
                }
                prel[row] = p_rel;
                memcpy(pp + row * S, pr, (size_t)S * sizeof *pr);
                if (out->p)
                    memcpy(out->p + row * S, pr, (size_t)S * sizeof *pr);
                if (out->p_tol)
                    for (int64_t j = 0; j < S; j++)
                        out->p_tol[row * S + j] = MREF_SAFE * p_rel * pr[j] + MREF_TINY;
                /* (V, P for P V and O rounded: rd->v, rd->p, rd->o) */
                const double orel = p_rel + ((double)nv + 4.0) * u + cv * u + rd->v + rd->p + rd->o;
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

    /* output projection (Y rounded: rd->y relative, rd->y_abs absolute) */
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
                    MREF_SAFE * (prop + (((double)E + 2.0) * u + rd->y) * (aacc + prop)) +
                    rd->y_abs + MREF_TINY;
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
    free(keep);
    return rc;
}

/* ---------------------------------------------------------------- backward
 *
 * Error model of the backward (u = 2^-24, first order, worst case, for any
 * blocking or summation order).  Every quantity z carries its double value,
 * a magnitude |z|~ (the sum of the absolute values of its terms) and a bound
 * e(z) on the error of an fp32 implementation that computes it from fp32
 * inputs; a sum of n products a_k b_k gets
 *   e = sum_k (e(a_k) |b_k|~ + |a_k|~ e(b_k)) + (n + 2) u sum_k |a_k|~ |b_k|~
 * (the propagated errors, then the rounding of n additions, a scale and a
 * final store).  The leaves: Q, K, V from the forward's model
 * (e = (K + 2) u |z|~), the attention output O the library saved (its
 * forward error Oe), P with relative error p_rel (the forward's: the
 * backward recomputes P from the saved logsumexp, whose error is that of
 * the max and the sum), dY exact.  Then
 *   dO: n = E;  dP: n = dh;  D = dO . O: n = dh;
 *   dS = P (dP - D): e = p_rel P |dP - D| + P (e(dP) + e(D))
 *                        + 3 u P (|dP| + |D|);
 *   dQ: n = S;  dK, dV: n = group L (the query rows of every head of the
 *   group);
 *   with dropout (Z = keep / (1 - p), keep from attn_dropout_mask_fill):
 *   O and dV use P' = Z P (relative error p_rel + 2 u), dP = Z dP' with
 *   dP' = dO . V (e = |Z| e(dP') + 2 u |Z dP'|~: the rounded scale and its
 *   multiply), and dS = P (dP - D) with the undropped P (D = dO . O is
 *   sum_j P'_j dP'_j = sum_j P_j dP_j);  dW_*, db_*: n = B L or B S tokens;  dX: n = E (3 E in
 *   self-attention), dXk, dXv: n = Hkv dh.
 * Each bound carries the safety factor MREF_SAFE and MREF_TINY.
 */

const char *const mref_grad_name[MG_COUNT] = {
    "dX", "dXk", "dXv", "dW_q", "dW_k", "dW_v", "db_q", "db_k", "db_v", "dW_o", "db_o",
};

void mref_grad_shape(const attn_mha_desc *d, int which, int64_t *rows, int64_t *width)
{
    const int64_t E = d->embed_dim, H = d->num_heads;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : H;
    const int64_t kvE = Hkv * (E / H);
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    const int64_t BL = d->batch * d->q_len, BS = d->batch * d->kv_len;
    const int cross = !d->self_attention, bias = d->has_bias;
    int64_t r = 0, w = 0;
    switch (which) {
    case MG_DX: r = BL; w = E; break;
    case MG_DKEY: r = cross ? BS : 0; w = kdim; break;
    case MG_DVALUE: r = cross ? BS : 0; w = vdim; break;
    case MG_DWQ: r = E; w = E; break;
    case MG_DWK: r = kvE; w = kdim; break;
    case MG_DWV: r = kvE; w = vdim; break;
    case MG_DBQ: r = bias; w = E; break;
    case MG_DBK: r = bias; w = kvE; break;
    case MG_DBV: r = bias; w = kvE; break;
    case MG_DWO: r = E; w = E; break;
    case MG_DBO: r = bias; w = E; break;
    default: break;
    }
    *rows = r;
    *width = w;
}

/* 1 if key j is visible to query i of (b, h); *bias_out its additive bias. */
static int bwd_visible(const attn_mha_desc *d, const attn_mha_args *a, int64_t S, int64_t klen,
                       int64_t qlen, int64_t b, int64_t h, int64_t i, int64_t j,
                       double *bias_out)
{
    *bias_out = 0.0;
    if (!candidate(d, a, b, h, i, j, klen, qlen))
        return 0;
    if (d->mask_mode != ATTN_MASK_NONE &&
        !mask_allows(d->mask_mode,
                     a->mask[b * d->mask.batch + h * d->mask.head + i * d->mask.seq + j]))
        return 0;
    if (d->key_padding_mode != ATTN_MASK_NONE &&
        !mask_allows(d->key_padding_mode, a->key_padding_mask[b * S + j]))
        return 0;
    if (d->use_bias) {
        const double bj =
            (double)a->bias[b * d->bias.batch + h * d->bias.head + i * d->bias.seq + j];
        if (bj == -INFINITY)
            return 0;
        *bias_out = bj;
    }
    return 1;
}

/* out[r][k] = sum_n g[r][n] W[n][k] over N, and its bound. */
static void grad_input(const double *g, const double *ge, int64_t rows, int64_t N,
                       const float *W, int64_t K, double *out, double *tol, double nterms,
                       int add)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < K; k++) {
            double acc = 0.0, err = 0.0, mag = 0.0;
            for (int64_t n = 0; n < N; n++) {
                const double wv = (double)W[n * K + k];
                acc += g[r * N + n] * wv;
                err += ge[r * N + n] * fabs(wv);
                mag += (fabs(g[r * N + n]) + ge[r * N + n]) * fabs(wv);
            }
            if (add) {
                out[r * K + k] += acc;
                tol[r * K + k] += err;
                tol[r * K + k + rows * K] += mag; /* magnitudes after the bounds */
            } else {
                out[r * K + k] = acc;
                tol[r * K + k] = err;
                tol[r * K + k + rows * K] = mag;
            }
        }
    (void)nterms;
}

/* dW[n][k] = sum_t g[t][n] x[t][k] (x float with row stride ldx), db[n] =
 * sum_t g[t][n], and their bounds. */
static void grad_weight(const double *g, const double *ge, int64_t T, int64_t N,
                        const float *x, int64_t ldx, int64_t K, const mref_grads *o, int wi,
                        int bi)
{
    const double u = MREF_U;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) {
            double acc = 0.0, err = 0.0, mag = 0.0;
            for (int64_t t = 0; t < T; t++) {
                const double xv = (double)x[t * ldx + k];
                acc += g[t * N + n] * xv;
                err += ge[t * N + n] * fabs(xv);
                mag += (fabs(g[t * N + n]) + ge[t * N + n]) * fabs(xv);
            }
            if (o->g[wi])
                o->g[wi][n * K + k] = acc;
            if (o->tol[wi])
                o->tol[wi][n * K + k] =
                    MREF_SAFE * (err + ((double)T + 2.0) * u * mag) + MREF_TINY;
            if (o->mag[wi])
                o->mag[wi][n * K + k] = mag;
        }
        if (bi >= 0) {
            double acc = 0.0, err = 0.0, mag = 0.0;
            for (int64_t t = 0; t < T; t++) {
                acc += g[t * N + n];
                err += ge[t * N + n];
                mag += fabs(g[t * N + n]) + ge[t * N + n];
            }
            if (o->g[bi])
                o->g[bi][n] = acc;
            if (o->tol[bi])
                o->tol[bi][n] = MREF_SAFE * (err + ((double)T + 2.0) * u * mag) + MREF_TINY;
            if (o->mag[bi])
                o->mag[bi][n] = mag;
        }
    }
}

int mref_mha_backward(const attn_mha_desc *d, const attn_mha_weights *w,
                      const attn_mha_args *a, const float *dy, const mref_grads *out)
{
    return mref_mha_backward_typed(d, w, a, dy, out, NULL);
}

int mref_mha_backward_typed(const attn_mha_desc *d, const attn_mha_weights *w,
                            const attn_mha_args *a, const float *dy, const mref_grads *out,
                            const mref_round *rnd)
{
    static const mref_round none;
    const mref_round *rd = rnd ? rnd : &none;
    const int64_t E = d->embed_dim, H = d->num_heads;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : H;
    const int64_t dh = E / H, kvE = Hkv * dh, group = H / Hkv;
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    const int64_t B = d->batch, L = d->q_len, S = d->kv_len, BL = B * L, BS = B * S;
    const int64_t xs = d->x_stride ? d->x_stride : E;
    const int64_t ks = d->self_attention ? xs : (d->key_stride ? d->key_stride : kdim);
    const int64_t vs = d->self_attention ? xs : (d->value_stride ? d->value_stride : vdim);
    const int64_t os = d->out_stride ? d->out_stride : E;
    const float *xk = d->self_attention ? a->x : a->key;
    const float *xv = d->self_attention ? a->x : a->value;
    const double scale = isnan(d->scale) ? 1.0 / sqrt((double)dh) : (double)d->scale;
    const double asc = fabs(scale);
    const double u = MREF_U;
    const int packed = d->packed_in_proj;
    const float *wq = packed ? w->in_proj_weight : w->q_weight;
    const float *wk = packed ? w->in_proj_weight + E * E : w->k_weight;
    const float *wv = packed ? w->in_proj_weight + 2 * E * E : w->v_weight;
    const float *bq = NULL, *bk = NULL, *bv = NULL;
    if (d->has_bias) {
        bq = packed ? w->in_proj_bias : w->q_bias;
        bk = packed ? w->in_proj_bias + E : w->k_bias;
        bv = packed ? w->in_proj_bias + 2 * E : w->v_bias;
    }

    const size_t nq = (size_t)(BL * E), nk = (size_t)(BS * kvE);
    double *Q = malloc(nq * sizeof *Q), *Qa = malloc(nq * sizeof *Qa);
    double *K = malloc(nk * sizeof *K), *Ka = malloc(nk * sizeof *Ka);
    double *V = malloc(nk * sizeof *V), *Va = malloc(nk * sizeof *Va);
    double *O = calloc(nq, sizeof *O), *Oe = calloc(nq, sizeof *Oe);
    double *dO = malloc(nq * sizeof *dO), *dOe = malloc(nq * sizeof *dOe);
    double *dQ = calloc(nq, sizeof *dQ), *dQe = calloc(nq, sizeof *dQe);
    double *dQa = calloc(nq, sizeof *dQa);
    double *dK = calloc(nk, sizeof *dK), *dKe = calloc(nk, sizeof *dKe);
    double *dKa = calloc(nk, sizeof *dKa);
    double *dV = calloc(nk, sizeof *dV), *dVe = calloc(nk, sizeof *dVe);
    double *dVa = calloc(nk, sizeof *dVa);
    double *s = malloc((size_t)S * sizeof *s), *pr = malloc((size_t)S * sizeof *pr);
    double *dp = malloc((size_t)S * sizeof *dp), *dpe = malloc((size_t)S * sizeof *dpe);
    unsigned char *vis = malloc((size_t)S);
    uint8_t *keep = malloc((size_t)S);
    double *pd = malloc((size_t)S * sizeof *pd);
    const int drop = d->dropout_p > 0.0;
    const size_t nx = (size_t)(BL * E) > (size_t)(BS * (kdim > vdim ? kdim : vdim))
                          ? (size_t)(BL * E) : (size_t)(BS * (kdim > vdim ? kdim : vdim));
    double *gx = malloc(nx * sizeof *gx), *gxt = malloc(2 * nx * sizeof *gxt);
    int rc = -1;
    if (!Q || !Qa || !K || !Ka || !V || !Va || !O || !Oe || !dO || !dOe || !dQ || !dQe ||
        !dQa || !dK || !dKe || !dKa || !dV || !dVe || !dVa || !s || !pr || !dp || !dpe ||
        !vis || !gx || !gxt || !keep || !pd)
        goto done;

    project(a->x, xs, BL, E, wq, bq, E, Q, Qa);
    project(xk, ks, BS, kdim, wk, bk, kvE, K, Ka);
    project(xv, vs, BS, vdim, wv, bv, kvE, V, Va);
    const double cq = (double)E + 2.0, ck = (double)kdim + 2.0, cv = (double)vdim + 2.0;

    /* dO = dY W_o, and dW_o, db_o need O first: the forward per row, then
     * the attention backward per row. */
    for (int64_t t = 0; t < BL; t++)
        for (int64_t c = 0; c < E; c++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t e = 0; e < E; e++) {
                const double tv = (double)dy[t * os + e] * (double)w->out_weight[e * E + c];
                acc += tv;
                mag += fabs(tv);
            }
            dO[t * E + c] = acc;
            /* (dO rounded to O's type: rd->o) */
            dOe[t * E + c] = ((double)E + 2.0) * u * mag + rd->o * mag;
        }

    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? a->kv_lens[b] : S;
        const int64_t qlen = d->use_q_lens ? a->q_lens[b] : L;
        for (int64_t h = 0; h < H; h++) {
            const int64_t hk = h / group;
            for (int64_t i = 0; i < L; i++) {
                const int64_t qo = (b * L + i) * E + h * dh;
                int64_t nv = 0;
                double mx = -INFINITY, tmax = 0.0;
                for (int64_t j = 0; j < S; j++) {
                    double bj;
                    vis[j] = (unsigned char)bwd_visible(d, a, S, klen, qlen, b, h, i, j, &bj);
                    if (!vis[j])
                        continue;
                    const int64_t ko = (b * S + j) * kvE + hk * dh;
                    double dot = 0.0, tt = 0.0;
                    for (int64_t x = 0; x < dh; x++) {
                        dot += Q[qo + x] * K[ko + x];
                        tt += Qa[qo + x] * Ka[ko + x];
                    }
                    s[j] = scale * dot + bj;
                    tt = asc * tt + fabs(bj);
                    if (tt > tmax)
                        tmax = tt;
                    if (s[j] > mx)
                        mx = s[j];
                    nv++;
                }
                if (!nv)
                    continue; /* O = 0, dQ = 0, no contribution */
                double sum = 0.0;
                for (int64_t j = 0; j < S; j++)
                    if (vis[j])
                        sum += exp(s[j] - mx);
                for (int64_t j = 0; j < S; j++)
                    pr[j] = vis[j] ? exp(s[j] - mx) / sum : 0.0;
                /* (Q and K rounded: rd->q, rd->k relative to |q|~, |k|~) */
                const double es = ((cq + ck + (double)dh + 6.0) * u + rd->q + rd->k) * tmax;
                const double p_rel = expm1(2.0 * es) + ((double)nv + 2.0 * MREF_KEXP + 4.0) * u;
                /* P' = Z P (the P that multiplies V) and its relative error */
                double zs = 1.0;
                if (drop && drop_keep(d, b, h, i, S, keep, &zs) != 0)
                    goto done;
                for (int64_t j = 0; j < S; j++)
                    pd[j] = !drop ? pr[j] : keep[j] ? pr[j] * zs : 0.0;
                /* (P rounded for P V and for dV: rd->p; V, O rounded: rd->v, rd->o) */
                const double pd_rel = (drop ? p_rel + 2.0 * u : p_rel) + rd->p;
                const double orel = pd_rel + ((double)nv + 4.0) * u + cv * u + rd->v + rd->o;
                for (int64_t x = 0; x < dh; x++) {
                    double acc = 0.0, aacc = 0.0;
                    for (int64_t j = 0; j < S; j++)
                        if (vis[j]) {
                            acc += pd[j] * V[(b * S + j) * kvE + hk * dh + x];
                            aacc += pd[j] * Va[(b * S + j) * kvE + hk * dh + x];
                        }
                    O[qo + x] = acc;
                    Oe[qo + x] = orel * aacc;
                }
                /* D = dO . O (the library's O, within Oe) */
                double D = 0.0, De = 0.0, Dm = 0.0;
                for (int64_t x = 0; x < dh; x++) {
                    D += dO[qo + x] * O[qo + x];
                    De += dOe[qo + x] * fabs(O[qo + x]) + fabs(dO[qo + x]) * Oe[qo + x];
                    Dm += (fabs(dO[qo + x]) + dOe[qo + x]) * (fabs(O[qo + x]) + Oe[qo + x]);
                }
                De += ((double)dh + 2.0) * u * Dm;
                for (int64_t j = 0; j < S; j++) {
                    if (!vis[j])
                        continue;
                    const int64_t ko = (b * S + j) * kvE + hk * dh;
                    double acc = 0.0, err = 0.0, mag = 0.0;
                    for (int64_t x = 0; x < dh; x++) {
                        const double eV = (cv * u + rd->v) * Va[ko + x];
                        acc += dO[qo + x] * V[ko + x];
                        err += dOe[qo + x] * Va[ko + x] + fabs(dO[qo + x]) * eV;
                        mag += (fabs(dO[qo + x]) + dOe[qo + x]) * (Va[ko + x] + eV);
                    }
                    dp[j] = acc;
                    dpe[j] = err + ((double)dh + 2.0) * u * mag;
                    if (drop) { /* dP = Z dP' */
                        const double z = keep[j] ? zs : 0.0;
                        dpe[j] = z * dpe[j] + 2.0 * u * z * (fabs(acc) + dpe[j]);
                        dp[j] = z * acc;
                    }
                }
                for (int64_t j = 0; j < S; j++) {
                    if (!vis[j])
                        continue;
                    const int64_t ko = (b * S + j) * kvE + hk * dh;
                    const double P = pr[j];
                    const double dS = P * (dp[j] - D);
                    /* (dS rounded where it enters dQ and dK: rd->p) */
                    const double dSe = p_rel * P * fabs(dp[j] - D) + P * (dpe[j] + De) +
                                       (3.0 * u + rd->p) * P * (fabs(dp[j]) + fabs(D));
                    const double dSa = fabs(dS) + dSe;
                    for (int64_t x = 0; x < dh; x++) {
                        const double eK = (ck * u + rd->k) * Ka[ko + x];
                        const double eQ = (cq * u + rd->q) * Qa[qo + x];
                        dQ[qo + x] += scale * dS * K[ko + x];
                        dQe[qo + x] += asc * (dSe * Ka[ko + x] + dSa * eK);
                        dQa[qo + x] += asc * dSa * (Ka[ko + x] + eK);
                        dK[ko + x] += scale * dS * Q[qo + x];
                        dKe[ko + x] += asc * (dSe * Qa[qo + x] + dSa * eQ);
                        dKa[ko + x] += asc * dSa * (Qa[qo + x] + eQ);
                        const double Pd = pd[j];
                        dV[ko + x] += Pd * dO[qo + x];
                        dVe[ko + x] += pd_rel * Pd * fabs(dO[qo + x]) + Pd * dOe[qo + x];
                        dVa[ko + x] += Pd * (1.0 + pd_rel) * (fabs(dO[qo + x]) + dOe[qo + x]);
                    }
                }
            }
        }
    }
    /* the summation errors of dQ (S terms), dK and dV (group L terms) */
    /* (then dQ, dK, dV rounded to their types: rd->q, rd->k, rd->v) */
    for (size_t k = 0; k < nq; k++)
        dQe[k] += (((double)S + 3.0) * u + rd->q) * dQa[k];
    for (size_t k = 0; k < nk; k++) {
        dKe[k] += (((double)(group * L) + 3.0) * u + rd->k) * dKa[k];
        dVe[k] += (((double)(group * L) + 3.0) * u + rd->v) * dVa[k];
    }

    /* dW_o = dY^T O (O within Oe), db_o */
    for (int64_t t = 0; t < BL; t++)
        for (int64_t e = 0; e < E; e++)
            gx[t * E + e] = (double)dy[t * os + e];
    for (int64_t n = 0; n < E; n++) {
        for (int64_t c = 0; c < E; c++) {
            double acc = 0.0, err = 0.0, mag = 0.0;
            for (int64_t t = 0; t < BL; t++) {
                const double g = gx[t * E + n];
                acc += g * O[t * E + c];
                err += fabs(g) * Oe[t * E + c];
                mag += fabs(g) * (fabs(O[t * E + c]) + Oe[t * E + c]);
            }
            if (out->g[MG_DWO])
                out->g[MG_DWO][n * E + c] = acc;
            if (out->tol[MG_DWO])
                out->tol[MG_DWO][n * E + c] =
                    MREF_SAFE * (err + ((double)BL + 2.0) * u * mag) + MREF_TINY;
            if (out->mag[MG_DWO])
                out->mag[MG_DWO][n * E + c] = mag;
        }
        if (d->has_bias) {
            double acc = 0.0, mag = 0.0;
            for (int64_t t = 0; t < BL; t++) {
                acc += gx[t * E + n];
                mag += fabs(gx[t * E + n]);
            }
            if (out->g[MG_DBO])
                out->g[MG_DBO][n] = acc;
            if (out->tol[MG_DBO])
                out->tol[MG_DBO][n] = MREF_SAFE * ((double)BL + 2.0) * u * mag + MREF_TINY;
            if (out->mag[MG_DBO])
                out->mag[MG_DBO][n] = mag;
        }
    }

    /* weight gradients of the projections */
    grad_weight(dQ, dQe, BL, E, a->x, xs, E, out, MG_DWQ, d->has_bias ? MG_DBQ : -1);
    grad_weight(dK, dKe, BS, kvE, xk, ks, kdim, out, MG_DWK, d->has_bias ? MG_DBK : -1);
    grad_weight(dV, dVe, BS, kvE, xv, vs, vdim, out, MG_DWV, d->has_bias ? MG_DBV : -1);

    /* input gradients: gx the value, gxt the propagated error then the
     * magnitude (rows x width each) */
    if (d->self_attention) {
        grad_input(dQ, dQe, BL, E, wq, E, gx, gxt, 0, 0);
        grad_input(dK, dKe, BL, kvE, wk, E, gx, gxt, 0, 1);
        grad_input(dV, dVe, BL, kvE, wv, E, gx, gxt, 0, 1);
        for (int64_t k = 0; k < BL * E; k++) {
            if (out->g[MG_DX])
                out->g[MG_DX][k] = gx[k];
            if (out->tol[MG_DX])
                out->tol[MG_DX][k] =
                    MREF_SAFE * (gxt[k] + (3.0 * (double)E + 2.0) * u * gxt[k + BL * E]) +
                    MREF_TINY;
            if (out->mag[MG_DX])
                out->mag[MG_DX][k] = gxt[k + BL * E];
        }
    } else {
        const struct { const double *g, *ge; int64_t rows, N; const float *W; int64_t K; int mg; } in[3] = {
            { dQ, dQe, BL, E, wq, E, MG_DX },
            { dK, dKe, BS, kvE, wk, kdim, MG_DKEY },
            { dV, dVe, BS, kvE, wv, vdim, MG_DVALUE },
        };
        for (int k = 0; k < 3; k++) {
            grad_input(in[k].g, in[k].ge, in[k].rows, in[k].N, in[k].W, in[k].K, gx, gxt, 0, 0);
            const int64_t n = in[k].rows * in[k].K;
            for (int64_t e = 0; e < n; e++) {
                if (out->g[in[k].mg])
                    out->g[in[k].mg][e] = gx[e];
                if (out->tol[in[k].mg])
                    out->tol[in[k].mg][e] =
                        MREF_SAFE * (gxt[e] + ((double)in[k].N + 2.0) * u * gxt[e + n]) +
                        MREF_TINY;
                if (out->mag[in[k].mg])
                    out->mag[in[k].mg][e] = gxt[e + n];
            }
        }
    }
    rc = 0;
done:
    free(Q); free(Qa); free(K); free(Ka); free(V); free(Va); free(O); free(Oe);
    free(dO); free(dOe); free(dQ); free(dQe); free(dQa); free(dK); free(dKe); free(dKa);
    free(dV); free(dVe); free(dVa); free(s); free(pr); free(dp); free(dpe); free(vis);
    free(keep); free(pd);
    free(gx); free(gxt);
    return rc;
}
