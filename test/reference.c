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
 * Dropout (dropout_p > 0): p'_j = p_j keep_j / (1 - p) (0 for all j when
 * p = 1), keep_j of (b, h, i, j) from the public attn_dropout_mask_fill
 * (test_dropout.c checks it against an independent Philox4x32-10), replaces
 * p_j in o, o_abs and the probabilities output; lse stays that of the
 * undropped scores (attn.h).
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

/* Sparse attention (attn.h, "Sparse attention"), written element by
 * element from the definition, independently of the library's runs:
 * (window OR global key OR global query) AND inside the lengths AND the
 * layout block of (i, j) visible. */
int ref_candidate(const attn_sdpa_desc *desc, const attn_sdpa_args *args, int64_t b,
                  int64_t h, int64_t i, int64_t j, int64_t klen, int64_t qlen)
{
    if (i >= qlen || j >= klen)
        return 0;
    int vis = ref_window_visible(desc, klen, qlen, i, j);
    if (desc->use_global_k && args->global_k[b * desc->kv_len + j] != 0)
        vis = 1;
    if (desc->use_global_q && args->global_q[b * desc->q_len + i] != 0)
        vis = 1;
    if (vis && desc->block_size > 0) {
        const int64_t bs = desc->block_size;
        const int64_t nb = (desc->q_len + bs - 1) / bs, mb = (desc->kv_len + bs - 1) / bs;
        const int64_t hh = desc->layout_per_head ? h : 0;
        vis = args->layout[(hh * nb + i / bs) * mb + j / bs] != 0;
    }
    return vis;
}

/* The dropout of row (b, h, i) of m keys: keep[j] from the public
 * attn_dropout_mask_fill and *z = 1 / (1 - p) (0 for p = 1, where nothing
 * is kept).  Returns 0, or -1 when the call failed. */
static int row_keep(const attn_sdpa_desc *desc, int64_t b, int64_t h, int64_t i, int64_t m,
                    uint8_t *keep, double *z)
{
    *z = desc->dropout_p < 1.0 ? 1.0 / (1.0 - desc->dropout_p) : 0.0;
    return attn_dropout_mask_fill(desc->dropout_p, desc->dropout_seed, desc->dropout_offset, b,
                                  h, i, 1, m, keep, m) == ATTN_OK ? 0 : -1;
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
        if (!ref_candidate(desc, args, b, h, i, j, klen, qlen))
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
    const int drop = desc->dropout_p > 0.0;

    double *s = malloc((size_t)m * sizeof *s);
    double *a = malloc((size_t)m * sizeof *a);
    double *pw = malloc((size_t)m * sizeof *pw);
    unsigned char *vis = malloc((size_t)m);
    uint8_t *keep = malloc((size_t)m);
    int rc = -1;
    if (!s || !a || !pw || !vis || !keep)
        goto out;

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
                /* the probabilities that multiply V: p, or p' with dropout */
                for (int64_t j = 0; j < m; j++)
                    pw[j] = (nv > 0 && vis[j]) ? exp(s[j] - mx) / sum : 0.0;
                if (drop && nv > 0) {
                    double z;
                    if (row_keep(desc, b, h, i, m, keep, &z))
                        goto out;
                    for (int64_t j = 0; j < m; j++)
                        pw[j] = keep[j] ? pw[j] * z : 0.0;
                }
                if (out->lse)
                    out->lse[row] = nv > 0 ? mx + log(sum) : -INFINITY;
                if (out->s_abs)
                    out->s_abs[row] = amax;
                if (out->nvis)
                    out->nvis[row] = nv;
                if (out->p)
                    memcpy(out->p + row * m, pw, (size_t)m * sizeof *pw);
                if (out->o || out->o_abs) {
                    for (int64_t d = 0; d < dv; d++) {
                        double acc = 0.0, aacc = 0.0;
                        if (nv > 0) {
                            for (int64_t j = 0; j < m; j++) {
                                if (!vis[j])
                                    continue;
                                double vj = (double)V[j * desc->v.seq + d];
                                acc += pw[j] * vj;
                                aacc += pw[j] * fabs(vj);
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
    rc = 0;
out:
    free(s);
    free(a);
    free(pw);
    free(vis);
    free(keep);
    return rc;
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
 * - dropout: P' = P keep Z with Z = 1 / (1 - p) rounded to fp32 and one
 *   multiply: 2 u more on P' and on O, taken as 3 u (ref_dropout_rel, added
 *   by the callers of ref_row_tolerance; lse has no dropout).
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

double ref_dropout_rel(const attn_sdpa_desc *desc)
{
    return desc->dropout_p > 0.0 ? 3.0 * REF_U : 0.0;
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

/* ------------------------------------------------------------- backward */

/*
 * Backward reference, per (b, h, i) row with i < q_lens[b] (the visible set
 * from row_scores, so hidden inputs are never read), all in double:
 *   P_ij = exp(s_ij - max) / sum,  O_i = sum_j P_ij V_j,  D_i = dO_i . O_i
 *   dP_ij = dO_i . V_j,  dS_ij = P_ij (dP_ij - D_i)
 *   dV_j += P_ij dO_i,  dQ_i = scale sum_j dS_ij K_j,  dK_j += scale dS_ij Q_i
 *   dBias_ij = dS_ij (dense; ref_dbias_reduce sums over the broadcast dims)
 * (the gradient of L = sum dO O; D_i uses the exact O, and
 * sum_j P_ij (dP_ij - D_i) = 0 is what makes dS the softmax's Jacobian).
 * A K/V row seen by no query of its group gets dK = dV = 0 unread.
 *
 * With dropout (dropout_p > 0; keep and Z = 1 / (1 - p) as in ref_sdpa, Z_ij
 * = keep_ij Z): O_i = sum_j P'_ij V_j with P' = Z P, dV_j += P'_ij dO_i,
 * dS_ij = P_ij (Z_ij dP_ij - D_i), the gradient with the keep mask held
 * fixed (attn.h; test_dropout.c checks that form against finite
 * differences).
 *
 * Error model of an fp32 implementation (u = 2^-24; worst case, first
 * order, no cancellation assumed; the forward's bounds come from
 * ref_row_tolerance).  For row i with nvis keys, logit magnitude s_abs:
 *   E_s     = (dk + 6) u s_abs           the recomputed logits (as forward)
 *   lse_abs = the forward's lse bound    (lse read from the fp32 forward)
 *   p_b     = expm1(E_s + lse_abs) + (KEXP + 4) u
 *             |P~ - P| <= p_b P + 2^-126  (exp(S - lse), underflow/FTZ)
 *   D_err   = sum_d |dO_d| (o_rel o_abs_d + (dv + 2) u |O_d|)
 *             (O from the fp32 forward, o_rel its bound; dv-term dot)
 *   dP      : dv-term sgemm dot: (dv + 2) u sum_d |dO_d V_jd| =: (dv+2) u dPa_ij
 *   E_dS_ij = P_ij [(p_b + 3u)(|dP_ij| + |D_i|) + (dv + 2) u dPa_ij + D_err_i]
 *             + 2^-126 (|dP_ij| + |D_i|)
 *   dQ_id : |scale| sum_j (E_dS_ij + (nvis_i + 3) u |dS_ij|) |K_jd|
 *   dK_jd : |scale| sum_(h,i) (E_dS_ij + (N_j + 3) u |dS_ij|) |Q_id|
 *   dV_jd : sum_(h,i) ((p_b,i + (N_j + 2) u) P_ij + 2^-126) |dO_id|
 *   dBias_ij : E_dS_ij + 2 u |dS_ij|   (per position; a broadcast sum of c
 *              terms adds (c + 1) u sum |dS|, ref_dbias_reduce)
 * N_j is the number of (query head, row) pairs of the GQA group that see
 * key j: the fp32 sums over key tiles, query blocks and heads, in any
 * order or blocking, have at most that many nonzero terms (adding a 0 is
 * exact).  With dropout, o_rel gets ref_dropout_rel (the forward's O),
 * P' = Z P in fp32 is off by (p_b + 2 u) P' + Z_ij 2^-126 (Z rounded and a
 * multiply), and Z dP (Z rounded, a multiply) by 2 u Z |dP| more: in the
 * bounds above P becomes P' in dV's, |dP| becomes Z_ij |dP| and p_b + 3 u
 * becomes p_b + 5 u in E_dS, whose dP term is Z_ij (dv + 2) u dPa.  Every
 * bound carries the factor REF_SAFE and REF_TINY.
 */
#define REF_PTINY 1.1754943508222875e-38 /* 2^-126 */

int ref_sdpa_bwd(const attn_sdpa_desc *desc, const attn_sdpa_args *args,
                 const float *d_o, attn_view dov, const ref_bwd_types *ty,
                 const ref_bwd_out *out)
{
    static const ref_bwd_types fp32;
    if (!ty)
        ty = &fp32;
    const int64_t B = desc->batch, Hq = desc->q_heads, Hkv = desc->kv_heads;
    const int64_t n = desc->q_len, m = desc->kv_len;
    const int64_t dk = desc->qk_dim, dv = desc->v_dim;
    const int64_t group = Hq / Hkv;
    const double scale = ref_scale(desc), ascale = fabs(scale), u = REF_U;
    const int drop = desc->dropout_p > 0.0;

    double *s = malloc((size_t)m * sizeof *s);
    double *a = malloc((size_t)m * sizeof *a);
    double *p = malloc((size_t)m * sizeof *p);
    double *pd = malloc((size_t)m * sizeof *pd); /* P' = Z P (P without dropout) */
    double *zr = malloc((size_t)m * sizeof *zr); /* Z_ij (1 without dropout) */
    uint8_t *keep = malloc((size_t)m);
    double *dp = malloc((size_t)m * sizeof *dp);
    double *ds = malloc((size_t)m * sizeof *ds);
    double *eds = malloc((size_t)m * sizeof *eds);
    double *o = malloc((size_t)dv * sizeof *o);
    double *oa = malloc((size_t)dv * sizeof *oa);
    unsigned char *vis = malloc((size_t)m);
    double *qc = malloc((size_t)dk * sizeof *qc);   /* dQ's magnitude sum */
    /* per group: the two parts of the dK and dV bounds, and N_j */
    double *ka = calloc((size_t)(m * dk), sizeof *ka);
    double *kc = calloc((size_t)(m * dk), sizeof *kc);
    double *va = calloc((size_t)(m * dv), sizeof *va);
    double *vc = calloc((size_t)(m * dv), sizeof *vc);
    int64_t *cnt = calloc((size_t)m, sizeof *cnt);
    int rc = -1;
    if (!s || !a || !p || !pd || !zr || !keep || !dp || !ds || !eds || !o || !oa || !vis ||
        !qc || !ka || !kc || !va || !vc || !cnt)
        goto out;

    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = desc->use_kv_lens ? args->kv_lens[b] : m;
        const int64_t qlen = desc->use_q_lens ? args->q_lens[b] : n;
        for (int64_t hk = 0; hk < Hkv; hk++) {
            const float *K = args->k + b * desc->k.batch + hk * desc->k.head;
            const float *V = args->v + b * desc->v.batch + hk * desc->v.head;
            double *DK = out->dk + ((b * Hkv + hk) * m) * dk;
            double *DV = out->dv + ((b * Hkv + hk) * m) * dv;
            memset(DK, 0, (size_t)(m * dk) * sizeof *DK);
            memset(DV, 0, (size_t)(m * dv) * sizeof *DV);
            memset(ka, 0, (size_t)(m * dk) * sizeof *ka);
            memset(kc, 0, (size_t)(m * dk) * sizeof *kc);
            memset(va, 0, (size_t)(m * dv) * sizeof *va);
            memset(vc, 0, (size_t)(m * dv) * sizeof *vc);
            memset(cnt, 0, (size_t)m * sizeof *cnt);
            for (int64_t h = hk * group; h < (hk + 1) * group; h++)
                for (int64_t i = 0; i < n; i++) {
                    const int64_t row = (b * Hq + h) * n + i;
                    double *DQ = out->dq + row * dk, *DQT = out->dq_tol + row * dk;
                    int64_t nv = 0;
                    double mx = -INFINITY, amax = 0.0;
                    if (i < qlen)
                        nv = row_scores(desc, args, b, h, i, klen, qlen, s, a, vis, &mx, &amax);
                    for (int64_t x = 0; x < dk; x++)
                        DQ[x] = DQT[x] = 0.0;
                    if (out->dbias)
                        for (int64_t j = 0; j < m; j++)
                            out->dbias[row * m + j] = out->dbias_tol[row * m + j] = 0.0;
                    if (out->vis)
                        for (int64_t j = 0; j < m; j++)
                            out->vis[row * m + j] = nv > 0 && vis[j];
                    if (out->row_empty)
                        out->row_empty[row] = nv == 0;
                    if (nv == 0)
                        continue;

                    /* softmax, O, D */
                    double sum = 0.0;
                    for (int64_t j = 0; j < m; j++)
                        if (vis[j])
                            sum += exp(s[j] - mx);
                    const double lse = mx + log(sum);
                    for (int64_t j = 0; j < m; j++) {
                        p[j] = vis[j] ? exp(s[j] - mx) / sum : 0.0;
                        pd[j] = p[j];
                        zr[j] = 1.0;
                    }
                    if (drop) {
                        double z;
                        if (row_keep(desc, b, h, i, m, keep, &z))
                            goto out;
                        for (int64_t j = 0; j < m; j++) {
                            zr[j] = keep[j] ? z : 0.0;
                            pd[j] = zr[j] * p[j];
                        }
                    }
                    for (int64_t x = 0; x < dv; x++)
                        o[x] = oa[x] = 0.0;
                    for (int64_t j = 0; j < m; j++) {
                        if (!vis[j])
                            continue;
                        const float *Vj = V + j * desc->v.seq;
                        for (int64_t x = 0; x < dv; x++) {
                            o[x] += pd[j] * (double)Vj[x];
                            oa[x] += pd[j] * fabs((double)Vj[x]);
                        }
                    }
                    const float *dO = d_o + b * dov.batch + h * dov.head + i * dov.seq;
                    const float *Q = args->q + b * desc->q.batch + h * desc->q.head +
                                     i * desc->q.seq;
                    double o_rel, lse_abs;
                    ref_row_tolerance(dk, nv, amax, lse, NULL, &o_rel, &lse_abs);
                    o_rel += ref_dropout_rel(desc) + ty->o_rel;
                    double D = 0.0, Derr = 0.0;
                    for (int64_t x = 0; x < dv; x++) {
                        D += (double)dO[x] * o[x];
                        Derr += fabs((double)dO[x]) *
                                (o_rel * oa[x] + ty->o_abs + ((double)dv + 2.0) * u * fabs(o[x]));
                    }
                    const double es = ((double)dk + 6.0) * u * amax;
                    const double pb = expm1(es + lse_abs) + (REF_KEXP + 4.0) * u;
                    /* P' (dV's factor) and dS's rounding, 2 u more with dropout */
                    const double pbd = drop ? pb + 2.0 * u : pb, dsr = drop ? 5.0 * u : 3.0 * u;

                    /* dP, dS and their bounds; dV, dK accumulate */
                    for (int64_t j = 0; j < m; j++) {
                        if (!vis[j])
                            continue;
                        const float *Vj = V + j * desc->v.seq;
                        double d1 = 0.0, d1a = 0.0;
                        for (int64_t x = 0; x < dv; x++) {
                            double t = (double)dO[x] * (double)Vj[x];
                            d1 += t;
                            d1a += fabs(t);
                        }
                        const double zj = zr[j];
                        dp[j] = zj * d1;
                        ds[j] = p[j] * (dp[j] - D);
                        const double mag = fabs(dp[j]) + fabs(D);
                        eds[j] = p[j] * ((pb + dsr) * mag + zj * ((double)dv + 2.0) * u * d1a +
                                         Derr) +
                                 REF_PTINY * mag;
                        cnt[j]++;
                        double *DVj = DV + j * dv, *DKj = DK + j * dk;
                        for (int64_t x = 0; x < dv; x++) {
                            DVj[x] += pd[j] * (double)dO[x];
                            va[j * dv + x] += ((pbd + ty->p_rel) * pd[j] + zj * REF_PTINY) *
                                              fabs((double)dO[x]);
                            vc[j * dv + x] += pd[j] * fabs((double)dO[x]);
                        }
                        for (int64_t x = 0; x < dk; x++) {
                            DKj[x] += scale * ds[j] * (double)Q[x];
                            ka[j * dk + x] += ascale * (eds[j] + ty->ds_rel * fabs(ds[j])) *
                                              fabs((double)Q[x]);
                            kc[j * dk + x] += ascale * fabs(ds[j]) * fabs((double)Q[x]);
                        }
                        if (out->dbias) {
                            out->dbias[row * m + j] = ds[j];
                            out->dbias_tol[row * m + j] =
                                REF_SAFE * (eds[j] + 2.0 * u * fabs(ds[j])) + REF_TINY;
                        }
                    }
                    /* dQ */
                    for (int64_t x = 0; x < dk; x++)
                        qc[x] = 0.0;
                    for (int64_t j = 0; j < m; j++) {
                        if (!vis[j])
                            continue;
                        const float *Kj = K + j * desc->k.seq;
                        const double w =
                            eds[j] + ((double)nv + 3.0 + ty->ds_rel / u) * u * fabs(ds[j]);
                        for (int64_t x = 0; x < dk; x++) {
                            DQ[x] += scale * ds[j] * (double)Kj[x];
                            DQT[x] += ascale * w * fabs((double)Kj[x]);
                            qc[x] += ascale * fabs(ds[j]) * fabs((double)Kj[x]);
                        }
                    }
                    for (int64_t x = 0; x < dk; x++)
                        DQT[x] = REF_SAFE * (DQT[x] + ty->g_rel * qc[x]) + ty->g_abs + REF_TINY;
                }
            /* the group's dK and dV bounds */
            double *DKT = out->dk_tol + ((b * Hkv + hk) * m) * dk;
            double *DVT = out->dv_tol + ((b * Hkv + hk) * m) * dv;
            for (int64_t j = 0; j < m; j++) {
                const double N = (double)cnt[j];
                if (out->kv_seen)
                    out->kv_seen[(b * Hkv + hk) * m + j] = cnt[j] > 0;
                for (int64_t x = 0; x < dk; x++)
                    DKT[j * dk + x] =
                        REF_SAFE * (ka[j * dk + x] + ((N + 3.0) * u + ty->g_rel) * kc[j * dk + x]) +
                        ty->g_abs + REF_TINY;
                for (int64_t x = 0; x < dv; x++)
                    DVT[j * dv + x] =
                        REF_SAFE * (va[j * dv + x] + ((N + 2.0) * u + ty->g_rel) * vc[j * dv + x]) +
                        ty->g_abs + REF_TINY;
            }
        }
    }
    rc = 0;
out:
    free(s);
    free(a);
    free(p);
    free(pd);
    free(zr);
    free(keep);
    free(dp);
    free(ds);
    free(eds);
    free(o);
    free(oa);
    free(vis);
    free(qc);
    free(ka);
    free(kc);
    free(va);
    free(vc);
    free(cnt);
    return rc;
}

int ref_sdpa_bwd_alloc(const attn_sdpa_desc *d, const attn_sdpa_args *a, const float *d_o,
                       attn_view dov, int want_dbias, const ref_bwd_types *ty, ref_bwd_out *r)
{
    const size_t rows = (size_t)(d->batch * d->q_heads * d->q_len);
    const size_t kvrows = (size_t)(d->batch * d->kv_heads * d->kv_len);
    const size_t m = (size_t)d->kv_len;
    memset(r, 0, sizeof *r);
    r->dq = malloc(rows * (size_t)d->qk_dim * sizeof(double));
    r->dq_tol = malloc(rows * (size_t)d->qk_dim * sizeof(double));
    r->dk = malloc(kvrows * (size_t)d->qk_dim * sizeof(double));
    r->dk_tol = malloc(kvrows * (size_t)d->qk_dim * sizeof(double));
    r->dv = malloc(kvrows * (size_t)d->v_dim * sizeof(double));
    r->dv_tol = malloc(kvrows * (size_t)d->v_dim * sizeof(double));
    r->kv_seen = malloc(kvrows);
    r->row_empty = malloc(rows);
    int bad = !r->dq || !r->dq_tol || !r->dk || !r->dk_tol || !r->dv || !r->dv_tol ||
              !r->kv_seen || !r->row_empty;
    if (want_dbias) {
        r->dbias = malloc(rows * m * sizeof(double));
        r->dbias_tol = malloc(rows * m * sizeof(double));
        r->vis = malloc(rows * m);
        bad = bad || !r->dbias || !r->dbias_tol || !r->vis;
    }
    if (bad || ref_sdpa_bwd(d, a, d_o, dov, ty, r)) {
        ref_bwd_out_free(r);
        return -1;
    }
    return 0;
}

void ref_bwd_out_free(ref_bwd_out *r)
{
    free(r->dq);
    free(r->dk);
    free(r->dv);
    free(r->dbias);
    free(r->dq_tol);
    free(r->dk_tol);
    free(r->dv_tol);
    free(r->dbias_tol);
    free(r->vis);
    free(r->kv_seen);
    free(r->row_empty);
    memset(r, 0, sizeof *r);
}

void ref_dbias_shape(const attn_sdpa_desc *d, int64_t *Bb, int64_t *Hb, int64_t *Nb)
{
    *Bb = d->bias.batch == 0 ? 1 : d->batch;
    *Hb = d->bias.head == 0 ? 1 : d->q_heads;
    *Nb = d->bias.seq == 0 ? 1 : d->q_len;
}

void ref_dbias_reduce(const attn_sdpa_desc *d, const ref_bwd_out *r, double *val, double *tol,
                      int64_t *cnt)
{
    int64_t Bb, Hb, Nb;
    ref_dbias_shape(d, &Bb, &Hb, &Nb);
    const int64_t Hq = d->q_heads, n = d->q_len, m = d->kv_len;
    const size_t total = (size_t)(Bb * Hb * Nb * m);
    double *absum = calloc(total, sizeof *absum);
    for (size_t x = 0; x < total; x++) {
        val[x] = 0.0;
        if (tol)
            tol[x] = 0.0;
        if (cnt)
            cnt[x] = 0;
    }
    for (int64_t b = 0; b < d->batch; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < m; j++) {
                    const size_t src = (size_t)((((b * Hq + h) * n + i) * m) + j);
                    const size_t dst = (size_t)((((Bb > 1 ? b : 0) * Hb + (Hb > 1 ? h : 0)) * Nb +
                                                 (Nb > 1 ? i : 0)) * m + j);
                    if (!r->vis[src])
                        continue;
                    val[dst] += r->dbias[src];
                    if (tol)
                        tol[dst] += r->dbias_tol[src];
                    if (absum)
                        absum[dst] += fabs(r->dbias[src]);
                    if (cnt)
                        cnt[dst]++;
                }
    if (tol && cnt && absum)
        for (size_t x = 0; x < total; x++)
            tol[x] += REF_SAFE * ((double)cnt[x] + 1.0) * REF_U * absum[x];
    free(absum);
}
