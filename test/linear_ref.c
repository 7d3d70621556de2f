/*
 * linear_ref.c -- float64 reference of linear attention (linear_ref.h).
 *
 * Error bounds.  An fp32 implementation evaluates phi (relative error
 * <= 2u, u = 2^-24), dot products of dk terms, sums over up to K keys
 * (chunked or running, each element a sum of at most K products, so the
 * classical bound (K + dk) u applies whatever the grouping), and one
 * division.  For a row with a_j = phi(q) . phi(k_j) over its visible keys:
 *   numabs_d = sum_j |phi(q)|.|phi(k_j)| |v_jd| + |phi(q)|.|S0_:d|
 *   denabs   = sum_j |phi(q)|.|phi(k_j)| + |phi(q)|.|z0| + eps
 *   D = exact denominator,  O_d = num_d / D
 * the computed numerator and denominator are within c u numabs_d and
 * c u denabs of the exact ones, c = dk + K + 8 with K the row's keys, so
 *   |O_d - ref_d| <= c u (numabs_d + |O_d| denabs) / |D| + 2 u |O_d|
 * to first order; o_tol is twice that (the second-order terms and the
 * conversion of inputs are below it).  The state after the call: each
 * element a sum of m_b products plus the old value, bound
 * (m_b + dk + 8) u (sum |phi(k)||v| + |S0|).
 *
 * Backward: with kappa = denabs / |D| (how much the denominator's error is
 * amplified), the magnitudes
 *   |g|_d = |dO_d| (1 + kappa) / |D|,
 *   |c|   = sum_d |dO_d| (|O_d| + oabs_d) (1 + kappa) / |D|,
 *           oabs_d = (numabs_d + |O_d| denabs) / |D|,
 *   |dA_ij| = sum_d |g_i|_d |v_jd| + |c_i|
 * bound every term; dq_tol = c' u |phi'(q)| sum_j |dA_ij| |phi(k_j)|,
 * dk_tol = c' u |phi'(k)| sum_i |dA_ij| |phi(q_i)|, dv_tol =
 * c' u sum_i |a_ij| |g_i|, with c' = 2 (dk + dv + n + m + 16): every
 * gradient element is a sum over at most n rows or m keys of products of
 * terms each carrying at most (dk + dv + 8) u relative error.
 */
#include "linear_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U 0x1p-24

double lref_phi(int fmap, double x)
{
    switch (fmap) {
    case ATTN_FEATURE_ELU1: return x > 0.0 ? x + 1.0 : exp(x);
    case ATTN_FEATURE_RELU: return x > 0.0 ? x : 0.0;
    default: return x;
    }
}

double lref_dphi(int fmap, double x)
{
    switch (fmap) {
    case ATTN_FEATURE_ELU1: return x > 0.0 ? 1.0 : exp(x);
    case ATTN_FEATURE_RELU: return x > 0.0 ? 1.0 : 0.0;
    default: return 1.0;
    }
}

static int64_t nb_of(const lref_shape *s, int64_t b)
{
    return s->q_lens ? s->q_lens[b] : s->n;
}

static int64_t mb_of(const lref_shape *s, int64_t b)
{
    return s->kv_lens ? s->kv_lens[b] : s->m;
}

int lref_visible(const lref_shape *s, int64_t b, int64_t i, int64_t j)
{
    const int64_t nb = nb_of(s, b), mb = mb_of(s, b);
    if (i >= nb || j >= mb)
        return 0;
    if (!s->causal)
        return 1;
    const int64_t diag = s->align == ATTN_ALIGN_BOTTOM_RIGHT ? i + mb - nb : i;
    return j <= diag;
}

/* Per row: phi(q), its absolute values, num, numabs, D, denabs, O. */
typedef struct rowc {
    double *pq, *num, *numabs;
    double den, denabs;
    int64_t nkeys;
} rowc;

/* Forward of row (b, h, i) from the dense inputs; pk = phi(k) dense. */
static void row_forward(const lref_shape *s, const double *q, const double *pk, const double *v,
                        const double *s0, const double *z0, int64_t b, int64_t h, int64_t i,
                        rowc *r)
{
    const int64_t dk = s->dk, dv = s->dv, g = s->Hq / s->Hkv, hk = h / g;
    const double *qi = q + ((b * s->Hq + h) * s->n + i) * dk;
    for (int64_t x = 0; x < dk; x++)
        r->pq[x] = lref_phi(s->fmap, qi[x]);
    memset(r->num, 0, (size_t)dv * sizeof(double));
    memset(r->numabs, 0, (size_t)dv * sizeof(double));
    r->den = s->eps;
    r->denabs = s->eps;
    r->nkeys = 0;
    if (s0) {
        const double *S = s0 + (b * s->Hkv + hk) * dk * dv, *Z = z0 + (b * s->Hkv + hk) * dk;
        for (int64_t x = 0; x < dk; x++) {
            for (int64_t y = 0; y < dv; y++) {
                r->num[y] += r->pq[x] * S[x * dv + y];
                r->numabs[y] += fabs(r->pq[x] * S[x * dv + y]);
            }
            r->den += r->pq[x] * Z[x];
            r->denabs += fabs(r->pq[x] * Z[x]);
        }
    }
    for (int64_t j = 0; j < s->m; j++) {
        if (!lref_visible(s, b, i, j))
            continue;
        r->nkeys++;
        const double *kj = pk + ((b * s->Hkv + hk) * s->m + j) * dk;
        const double *vj = v + ((b * s->Hkv + hk) * s->m + j) * dv;
        double a = 0.0, aabs = 0.0;
        for (int64_t x = 0; x < dk; x++) {
            a += r->pq[x] * kj[x];
            aabs += fabs(r->pq[x] * kj[x]);
        }
        for (int64_t y = 0; y < dv; y++) {
            r->num[y] += a * vj[y];
            r->numabs[y] += aabs * fabs(vj[y]);
        }
        r->den += a;
        r->denabs += aabs;
    }
}

/* phi of every valid key (NaN-safe: invalid keys are left 0). */
static double *phi_keys(const lref_shape *s, const double *k)
{
    const int64_t dk = s->dk;
    double *pk = calloc((size_t)(s->B * s->Hkv * s->m * dk), sizeof(double));
    if (!pk)
        return NULL;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t hk = 0; hk < s->Hkv; hk++)
            for (int64_t j = 0; j < mb_of(s, b); j++)
                for (int64_t x = 0; x < dk; x++) {
                    const int64_t e = ((b * s->Hkv + hk) * s->m + j) * dk + x;
                    pk[e] = lref_phi(s->fmap, k[e]);
                }
    return pk;
}

int lref_forward(const lref_shape *s, const double *q, const double *k, const double *v,
                 const double *s0, const double *z0, double *o, double *o_tol, double *s1,
                 double *z1, double *s1_tol, double *z1_tol)
{
    const int64_t dk = s->dk, dv = s->dv;
    double *pk = phi_keys(s, k);
    rowc r;
    r.pq = malloc((size_t)(dk + 2 * dv) * sizeof(double));
    if (!pk || !r.pq) {
        free(pk);
        free(r.pq);
        return -1;
    }
    r.num = r.pq + dk;
    r.numabs = r.num + dv;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->Hq; h++)
            for (int64_t i = 0; i < s->n; i++) {
                double *oi = o ? o + ((b * s->Hq + h) * s->n + i) * dv : NULL;
                double *ti = o_tol ? o_tol + ((b * s->Hq + h) * s->n + i) * dv : NULL;
                if (i >= nb_of(s, b)) {
                    for (int64_t y = 0; y < dv; y++) {
                        if (oi) oi[y] = 0.0;
                        if (ti) ti[y] = 0.0;
                    }
                    continue;
                }
                row_forward(s, q, pk, v, s0, z0, b, h, i, &r);
                const double c = (double)(dk + r.nkeys + 8) * U;
                for (int64_t y = 0; y < dv; y++) {
                    const double oy = r.num[y] / r.den;
                    if (oi) oi[y] = oy;
                    if (ti)
                        ti[y] = 2.0 * (c * (r.numabs[y] + fabs(oy) * r.denabs) / fabs(r.den) +
                                       2.0 * U * fabs(oy)) + 1e-30;
                }
            }
    if (s1 || z1) {
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t hk = 0; hk < s->Hkv; hk++) {
                const int64_t base = (b * s->Hkv + hk);
                const int64_t mb = mb_of(s, b);
                const double c = (double)(mb + dk + 8) * U;
                for (int64_t x = 0; x < dk; x++) {
                    double zs = z0 ? z0[base * dk + x] : 0.0, za = fabs(zs);
                    for (int64_t j = 0; j < mb; j++) {
                        const double p = pk[(base * s->m + j) * dk + x];
                        zs += p;
                        za += fabs(p);
                    }
                    if (z1) z1[base * dk + x] = zs;
                    if (z1_tol) z1_tol[base * dk + x] = 2.0 * c * za + 1e-30;
                    for (int64_t y = 0; y < dv; y++) {
                        double ss = s0 ? s0[(base * dk + x) * dv + y] : 0.0, sa = fabs(ss);
                        for (int64_t j = 0; j < mb; j++) {
                            const double p = pk[(base * s->m + j) * dk + x] *
                                             v[(base * s->m + j) * dv + y];
                            ss += p;
                            sa += fabs(p);
                        }
                        if (s1) s1[(base * dk + x) * dv + y] = ss;
                        if (s1_tol) s1_tol[(base * dk + x) * dv + y] = 2.0 * c * sa + 1e-30;
                    }
                }
            }
    }
    free(pk);
    free(r.pq);
    return 0;
}

int lref_backward(const lref_shape *s, const double *q, const double *k, const double *v,
                  const double *d_o, double *dq, double *dk_out, double *dv_out, double *dq_tol,
                  double *dk_tol, double *dv_tol)
{
    const int64_t dk = s->dk, dv = s->dv, g = s->Hq / s->Hkv;
    const size_t nq = (size_t)(s->B * s->Hq * s->n * dk);
    const size_t nk = (size_t)(s->B * s->Hkv * s->m * dk);
    const size_t nv = (size_t)(s->B * s->Hkv * s->m * dv);
    double *pk = phi_keys(s, k);
    double *w = malloc((size_t)(dk + 6 * dv + dk) * sizeof(double));
    /* accumulators of the magnitudes (tolerances) for dk, dv */
    double *dka = calloc(nk, sizeof(double)), *dva = calloc(nv, sizeof(double));
    if (!pk || !w || !dka || !dva) {
        free(pk); free(w); free(dka); free(dva);
        return -1;
    }
    rowc r;
    r.pq = w;
    r.num = w + dk;
    r.numabs = r.num + dv;
    double *gi = r.numabs + dv, *ga = gi + dv, *oi = ga + dv, *oa = oi + dv;
    double *dfq = oa + dv;
    memset(dq, 0, nq * sizeof(double));
    memset(dk_out, 0, nk * sizeof(double));
    memset(dv_out, 0, nv * sizeof(double));
    if (dq_tol) memset(dq_tol, 0, nq * sizeof(double));
    const double cc = 2.0 * (double)(dk + dv + s->n + s->m + 16) * U;
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t h = 0; h < s->Hq; h++) {
            const int64_t hk = h / g;
            for (int64_t i = 0; i < nb_of(s, b); i++) {
                row_forward(s, q, pk, v, NULL, NULL, b, h, i, &r);
                const double D = r.den, kappa = r.denabs / fabs(D);
                const double *doi = d_o + ((b * s->Hq + h) * s->n + i) * dv;
                double delta = 0.0, cabs = 0.0;
                for (int64_t y = 0; y < dv; y++) {
                    oi[y] = r.num[y] / D;
                    oa[y] = (r.numabs[y] + fabs(oi[y]) * r.denabs) / fabs(D);
                    delta += doi[y] * oi[y];
                    gi[y] = doi[y] / D;
                    ga[y] = fabs(doi[y]) * (1.0 + kappa) / fabs(D);
                    cabs += fabs(doi[y]) * (fabs(oi[y]) + oa[y]) * (1.0 + kappa) / fabs(D);
                }
                const double ci = -delta / D;
                memset(dfq, 0, (size_t)dk * sizeof(double));
                const double *qi = q + ((b * s->Hq + h) * s->n + i) * dk;
                double *dqt = dq_tol ? dq_tol + ((b * s->Hq + h) * s->n + i) * dk : NULL;
                for (int64_t j = 0; j < s->m; j++) {
                    if (!lref_visible(s, b, i, j))
                        continue;
                    const int64_t kb = (b * s->Hkv + hk) * s->m + j;
                    const double *kj = pk + kb * dk, *vj = v + kb * dv;
                    double a = 0.0, aabs = 0.0, dA = ci, dAabs = cabs;
                    for (int64_t x = 0; x < dk; x++) {
                        a += r.pq[x] * kj[x];
                        aabs += fabs(r.pq[x] * kj[x]);
                    }
                    for (int64_t y = 0; y < dv; y++) {
                        dA += gi[y] * vj[y];
                        dAabs += ga[y] * fabs(vj[y]);
                    }
                    for (int64_t x = 0; x < dk; x++) {
                        dfq[x] += dA * kj[x];
                        if (dqt) dqt[x] += dAabs * fabs(kj[x]);
                        dk_out[kb * dk + x] += dA * r.pq[x];
                        dka[kb * dk + x] += dAabs * fabs(r.pq[x]);
                    }
                    for (int64_t y = 0; y < dv; y++) {
                        dv_out[kb * dv + y] += a * gi[y];
                        dva[kb * dv + y] += aabs * ga[y];
                    }
                }
                double *dqi = dq + ((b * s->Hq + h) * s->n + i) * dk;
                for (int64_t x = 0; x < dk; x++) {
                    const double dp = lref_dphi(s->fmap, qi[x]);
                    dqi[x] = dfq[x] * dp;
                    if (dqt) dqt[x] = cc * dqt[x] * fabs(dp);
                }
            }
        }
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t hk = 0; hk < s->Hkv; hk++)
            for (int64_t j = 0; j < mb_of(s, b); j++) {
                const int64_t kb = (b * s->Hkv + hk) * s->m + j;
                for (int64_t x = 0; x < dk; x++) {
                    const double dp = lref_dphi(s->fmap, k[kb * dk + x]);
                    dk_out[kb * dk + x] *= dp;
                    dka[kb * dk + x] *= cc * fabs(dp);
                }
                for (int64_t y = 0; y < dv; y++)
                    dva[kb * dv + y] *= cc;
            }
    if (dk_tol) memcpy(dk_tol, dka, nk * sizeof(double));
    if (dv_tol) memcpy(dv_tol, dva, nv * sizeof(double));
    free(pk); free(w); free(dka); free(dva);
    return 0;
}
