/* Linear attention forward: descriptor defaults, validation, the plan and
 * the chunked execute.
 *
 * A work item is one (batch, kv head) pair: it owns the O rows of the
 * query heads of its group and its state (S, z), so items never share an
 * output.  Per item, with S (dk x dv) and z (dk) the running state (the
 * caller's state or 0), the queries go in chunks [i0, i1) of
 * ATTN_LINEAR_CHUNK rows (lin_chunk_keys gives each its keys [kl, kh)):
 *
 *   state += keys [pos, kl)                  (pieces of 64 keys:
 *                                             S += phi(K)^T V, z += colsum)
 *   Fk = phi(K[kl:kh])
 *   per query head h of the group:
 *     Fq = phi(Q_h[i0:i1])
 *     O  = Fq S                               (sgemm, into O itself)
 *     A  = Fq Fk^T, 0 above the diagonal      (sgemm, masked)
 *     O += A V[kl:kh]                         (sgemm)
 *     O_r /= Fq_r . z + rowsum A_r + eps
 *   state += Fk, V[kl:kh]
 *
 * and with use_state the keys left after the last chunk go into the state,
 * which is written back.  Non-causal: every key is in the state before the
 * first chunk (kl = kh = kvlen).  Every item runs the same operations
 * whichever thread takes it: bitwise identical for any thread count.
 *
 * 16-bit Q, K, V or O (the desc's types, pointers in args.args16): the
 * rows a chunk (or a piece of the state sweep) reads are widened exactly
 * to fp32 into the thread's slice first (K or Q at o_wqk, V at o_wv), the
 * operations are then the same on the widened rows, and O is divided in
 * the block X and rounded once into its 16-bit row.  The rows widened are
 * exactly those the fp32 path reads. */
#include "linear/linear.h"
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The element types took two int64 slots of reserved[] (15 -> 13), and
 * args16 one pointer of attn_linear_args' (8 -> 7): the sizes and the
 * other fields' offsets are unchanged (x86-64). */
#if defined(__x86_64__) && defined(__LP64__)
_Static_assert(sizeof(attn_linear_desc) == 312, "attn_linear_desc changed size");
_Static_assert(sizeof(attn_linear_args) == 128, "attn_linear_args changed size");
#endif

attn_status attn_linear_desc_init(attn_linear_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->q = desc->k = desc->v = desc->o = unset;
    desc->feature_map = ATTN_FEATURE_ELU1;
    desc->align = ATTN_ALIGN_TOP_LEFT;
    desc->eps = NAN;
    return ATTN_OK;
}

attn_status attn_linear_validate(const attn_linear_desc *d, int check_o)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        d->reserved_pad != 0)
        return ATTN_ERR_BAD_OPTION;
    if (!attn_engine_valid(d->engine))
        return ATTN_ERR_BAD_OPTION;
    /* (the quantized K/V types are the SDPA forward's only) */
    const attn_dtype types[4] = { d->q_type, d->k_type, d->v_type, d->o_type };
    const attn_status tst = attn_dtypes_check(types, 4);
    if (tst != ATTN_OK)
        return tst;
    if (d->feature_map != ATTN_FEATURE_ELU1 && d->feature_map != ATTN_FEATURE_RELU &&
        d->feature_map != ATTN_FEATURE_IDENTITY)
        return ATTN_ERR_BAD_OPTION;
    if (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT)
        return ATTN_ERR_BAD_OPTION;
    /* NaN is the default; written so that -0.0 passes and -inf fails. */
    if (!isnan(d->eps) && !(d->eps >= 0.0f && d->eps <= FLT_MAX))
        return ATTN_ERR_BAD_OPTION;

    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    if (B <= 0 || Hq <= 0 || Hkv <= 0 || n <= 0 || m <= 0 || dk <= 0 || dv <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (n > INT32_MAX || m > INT32_MAX || dk > INT32_MAX || dv > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    if (Hq % Hkv != 0)
        return ATTN_ERR_HEAD_RATIO;

    attn_status st;
    if ((st = attn_check_view(&d->q, B, Hq, n, dk, 0)) != ATTN_OK) return st;
    if ((st = attn_check_view(&d->k, B, Hkv, m, dk, 0)) != ATTN_OK) return st;
    if ((st = attn_check_view(&d->v, B, Hkv, m, dv, 0)) != ATTN_OK) return st;
    if (check_o && (st = attn_check_view(&d->o, B, Hq, n, dv, VIEW_OUTPUT)) != ATTN_OK)
        return st;
    if (d->threads < 0 || d->threads > ATTN_MAX_THREADS)
        return ATTN_ERR_BAD_THREADS;

    /* The state arrays [B][Hkv][dk][dv] must be addressable (they are
     * indexed in execute even without use_state: the item count). */
    int ok = 1;
    uint64_t items = attn_size_mul((uint64_t)B, (uint64_t)Hkv, &ok);
    uint64_t sd = attn_size_mul((uint64_t)dk, (uint64_t)dv, &ok);
    attn_size_mul(attn_size_mul(items, sd, &ok), sizeof(float), &ok);
    if (!ok)
        return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

/* ----------------------------------------------------------- feature maps */

void attn_linear_phi(const attn_kernels *kern, attn_feature_map fm,
                     const float *src, int64_t lds, int64_t rows,
                     int64_t cols, float *dst, int64_t ldd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * lds;
        float *o = dst + r * ldd;
        switch (fm) {
        case ATTN_FEATURE_ELU1:
            /* elu(x) + 1 = max(x, 0) + exp(min(x, 0)): no branch on the
             * sign (random signs mispredict), exp from the SIMD table;
             * NaN stays NaN */
            for (int64_t x = 0; x < cols; x++)
                o[x] = s[x] >= 0.0f ? 0.0f : s[x];
            kern->exp_store(o, o, cols, 0.0f);
            for (int64_t x = 0; x < cols; x++)
                o[x] += s[x] > 0.0f ? s[x] : 0.0f;
            break;
        case ATTN_FEATURE_RELU:
            for (int64_t x = 0; x < cols; x++)
                o[x] = s[x] > 0.0f ? s[x] : 0.0f;
            break;
        default:
            memcpy(o, s, (size_t)cols * sizeof(float));
            break;
        }
    }
}

void attn_linear_dphi(const attn_kernels *kern, attn_feature_map fm,
                      const float *src, int64_t lds, int64_t rows,
                      int64_t cols, const float *g, int64_t ldg, float *dst, int64_t ldd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * lds, *gr = g + r * ldg;
        float *o = dst + r * ldd;
        switch (fm) {
        case ATTN_FEATURE_ELU1:
            /* g phi'(x) = g exp(min(x, 0)) */
            for (int64_t x = 0; x < cols; x++)
                o[x] = s[x] >= 0.0f ? 0.0f : s[x];
            kern->exp_store(o, o, cols, 0.0f);
            for (int64_t x = 0; x < cols; x++)
                o[x] *= gr[x];
            break;
        case ATTN_FEATURE_RELU:
            for (int64_t x = 0; x < cols; x++)
                o[x] = s[x] > 0.0f ? gr[x] : 0.0f;
            break;
        default:
            memcpy(o, gr, (size_t)cols * sizeof(float));
            break;
        }
    }
}

/* ------------------------------------------------------------------ plan */

attn_status attn_linear_plan_create(attn_linear_plan **plan, const attn_linear_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = attn_linear_validate(desc, 1);
    if (st != ATTN_OK)
        return st;
    const int64_t C = ATTN_LINEAR_CHUNK, dk = desc->qk_dim, dv = desc->v_dim;
    attn_exec x;
    attn_exec_init(&x, desc->engine, desc->threads);
    /* Per thread: phi(Q) and phi(K) chunks (C x dk each), the block X
     * ((C + dk) x (dv + C), see lwork), z (dk) and the denominators (C,
     * double). */
    int ok = 1;
    attn_carver c = ATTN_CARVER_INIT;
    attn_carve(&c, (uint64_t)C * sizeof(float), (uint64_t)dk);
    const size_t o_fk = attn_carve(&c, (uint64_t)C * sizeof(float), (uint64_t)dk);
    const size_t o_x = attn_carve(&c, attn_size_mul(attn_size_add((uint64_t)C, (uint64_t)dk, &ok),
                                                    attn_size_add((uint64_t)dv, (uint64_t)C, &ok),
                                                    &ok),
                                  sizeof(float));
    const size_t o_z = attn_carve(&c, (uint64_t)dk, sizeof(float));
    const size_t o_den = attn_carve(&c, (uint64_t)C, sizeof(double));
    /* 16-bit tensors: C widened rows of Q or K (C x dk) and of V (C x dv) */
    const int qk16 = desc->q_type != ATTN_DTYPE_F32 || desc->k_type != ATTN_DTYPE_F32;
    const int v16 = desc->v_type != ATTN_DTYPE_F32;
    const size_t o_wqk = attn_carve(&c, qk16 ? (uint64_t)C * (uint64_t)dk : 0, sizeof(float));
    const size_t o_wv = attn_carve(&c, v16 ? (uint64_t)C * (uint64_t)dv : 0, sizeof(float));
    attn_carver all = ATTN_CARVER_INIT;
    attn_carve(&all, (uint64_t)x.nthreads, c.size);
    if (!ok || !c.ok || !all.ok)
        return ATTN_ERR_TOO_LARGE;

    attn_linear_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *desc;
    p->eps = isnan(desc->eps) ? ATTN_LINEAR_EPS_DEFAULT : desc->eps;
    p->x = x;
    p->group = desc->q_heads / desc->kv_heads;
    p->nitems = desc->batch * desc->kv_heads;
    p->o_fk = o_fk;
    p->o_x = o_x;
    p->o_z = o_z;
    p->o_den = o_den;
    p->o_wqk = o_wqk;
    p->o_wv = o_wv;
    p->any16 = qk16 || v16 || desc->o_type != ATTN_DTYPE_F32;
    p->ws_thread = (size_t)c.size;
    p->ws_bytes = (size_t)all.size;
    *plan = p;
    return ATTN_OK;
}

attn_status attn_linear_plan_destroy(attn_linear_plan *plan)
{
    free(plan);
    return ATTN_OK;
}

attn_status attn_linear_workspace_size(const attn_linear_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

/* --------------------------------------------------------------- execute */

/* X, (C + dk) rows of ldx = dv + C floats, holds the chunk's work so that
 * two GEMMs do it (instead of four of 64 x 64 x 64):
 *
 *   rows [0, C):      [ O~ (dv) | A (C) ]       O~ = phi(Q) S + A V, A the
 *                                               masked scores phi(Q) phi(K)^T
 *   rows [C, C + dk): [ S (dv)  | phi(K)^T (C) ]
 *
 *   phi(Q) [S | phi(K)^T]      -> [phi(Q) S | A]   (one GEMM, N = dv + kc)
 *   [A; phi(K)^T] V_c  (+=)    -> [O~; S]          (one GEMM, M = C + dk)
 *
 * The second also moves the state past the chunk's keys; it takes the
 * state rows only with the group's last head (after every head read S),
 * and splits in two for a partial last chunk (rows < C). */
typedef struct lwork {
    float *fq, *fk;   /* C x dk each */
    float *wqk, *wv;  /* 16-bit Q or K, V: a chunk's rows widened (or NULL) */
    float *x;         /* (C + dk) x ldx */
    int64_t ldx;
    float *s;         /* S: x + C ldx, leading dimension ldx */
    float *kt;        /* phi(K)^T: s + dv */
    float *z;         /* dk */
    double *den;      /* C */
} lwork;

/* A tensor's elements (args or args.args16, by its type). */
static const void *lin_base(attn_dtype t, const void *f32, const uint16_t *h16)
{
    return t == ATTN_DTYPE_F32 ? f32 : (const void *)h16;
}

/* (linear.h; the backward widens its rows with it too) */
const float *attn_linear_rows(const attn_cvt_kernels *cvt, attn_dtype t, const void *base,
                              attn_view v, int64_t b, int64_t h, int64_t r0, int64_t rows,
                              int64_t width, float *buf, int64_t *ld)
{
    if (t == ATTN_DTYPE_F32) {
        *ld = v.seq;
        return ATTN_VIEW_AT((const float *)base, v, b, h, r0);
    }
    const uint16_t *src = ATTN_VIEW_AT((const uint16_t *)base, v, b, h, r0);
    for (int64_t r = 0; r < rows; r++) {
        if (t == ATTN_DTYPE_F16)
            cvt->f16_to_f32(src + r * v.seq, buf + r * width, width);
        else
            cvt->bf16_to_f32(src + r * v.seq, buf + r * width, width);
    }
    *ld = width;
    return buf;
}

/* Rows [r0, r1) of (b, h) of a tensor asked for ahead of use. */
static void lin_prefetch(attn_dtype t, const void *base, attn_view v, int64_t b, int64_t h,
                         int64_t r0, int64_t r1, int64_t width, int write)
{
    const int64_t es = t == ATTN_DTYPE_F32 ? 4 : 2;
    attn_prefetch_bytes((const char *)base + (b * v.batch + h * v.head) * es, v.seq * es, r0, r1,
                        width * es, write);
}

/* The running state takes the keys [j0, j1) of (b, hk), in pieces of C. */
static void state_add(const attn_linear_plan *p, const attn_linear_args *a, lwork *w,
                      int64_t b, int64_t hk, int64_t j0, int64_t j1)
{
    const attn_linear_desc *d = &p->d;
    const int64_t dk = d->qk_dim, dv = d->v_dim;
    const void *kbase = lin_base(d->k_type, a->k, a->args16 ? a->args16->k : NULL);
    const void *vbase = lin_base(d->v_type, a->v, a->args16 ? a->args16->v : NULL);
    for (int64_t j = j0; j < j1; j += ATTN_LINEAR_CHUNK) {
        const int64_t kc = j1 - j < ATTN_LINEAR_CHUNK ? j1 - j : ATTN_LINEAR_CHUNK;
        int64_t ldk, ldv;
        const float *k = attn_linear_rows(p->x.cvt, d->k_type, kbase, d->k, b, hk, j, kc, dk,
                                          w->wqk, &ldk);
        const float *v = attn_linear_rows(p->x.cvt, d->v_type, vbase, d->v, b, hk, j, kc, dv,
                                          w->wv, &ldv);
        attn_linear_phi(p->x.kern, d->feature_map, k, ldk, kc, dk, w->fk, dk);
        attn_gemm_tn(p->x.gk, (int)dk, (int)dv, (int)kc, 1.0f, w->fk, (int)dk, v, (int)ldv, 1.0f,
                      w->s, (int)w->ldx);
        for (int64_t r = 0; r < kc; r++)
            for (int64_t x = 0; x < dk; x++)
                w->z[x] += w->fk[r * dk + x];
    }
}

static void run_item(const attn_linear_plan *p, const attn_linear_args *a, lwork *w, int64_t b,
                     int64_t hk)
{
    const attn_linear_desc *d = &p->d;
    const int64_t C = ATTN_LINEAR_CHUNK, n = d->q_len, dk = d->qk_dim, dv = d->v_dim;
    const int64_t g = p->group;
    lin_geom geo;
    geo.causal = d->causal != 0;
    geo.qlen = d->use_q_lens ? a->q_lens[b] : n;
    geo.kvlen = d->use_kv_lens ? a->kv_lens[b] : d->kv_len;
    geo.off = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? geo.kvlen - geo.qlen : 0;

    float *st_s = d->use_state ? a->state_s + (b * d->kv_heads + hk) * dk * dv : NULL;
    float *st_z = d->use_state ? a->state_z + (b * d->kv_heads + hk) * dk : NULL;
    for (int64_t x = 0; x < dk; x++) {
        if (st_s)
            memcpy(w->s + x * w->ldx, st_s + x * dv, (size_t)dv * sizeof(float));
        else
            memset(w->s + x * w->ldx, 0, (size_t)dv * sizeof(float));
    }
    if (st_s)
        memcpy(w->z, st_z, (size_t)dk * sizeof(float));
    else
        memset(w->z, 0, (size_t)dk * sizeof(float));
    const int64_t ldx = w->ldx;
    const attn_linear_args16 *a16 = a->args16;
    const void *qbase = lin_base(d->q_type, a->q, a16 ? a16->q : NULL);
    const void *kbase = lin_base(d->k_type, a->k, a16 ? a16->k : NULL);
    const void *vbase = lin_base(d->v_type, a->v, a16 ? a16->v : NULL);
    void *obase = d->o_type == ATTN_DTYPE_F32 ? (void *)a->o : (void *)(a16 ? a16->o : NULL);

    int64_t pos = 0;   /* keys [0, pos) are in the state */
    for (int64_t i0 = 0; i0 < geo.qlen; i0 += C) {
        const int64_t i1 = i0 + C < geo.qlen ? i0 + C : geo.qlen, rows = i1 - i0;
        int64_t kl, kh, shift;
        lin_chunk_keys(&geo, i0, i1, &kl, &kh, &shift);
        state_add(p, a, w, b, hk, pos, kl);
        pos = kl;
        const int64_t kc = kh - kl;
        /* The next chunk's rows, while this one computes (Q, K, V and O
         * walk in order, and a long sequence comes from memory). */
        if (i1 < geo.qlen) {
            const int64_t n1 = i1 + C < geo.qlen ? i1 + C : geo.qlen;
            const int64_t k1 = kh + C < geo.kvlen ? kh + C : geo.kvlen;
            lin_prefetch(d->k_type, kbase, d->k, b, hk, kh, k1, dk, 0);
            lin_prefetch(d->v_type, vbase, d->v, b, hk, kh, k1, dv, 0);
            for (int64_t hh = 0; hh < g; hh++) {
                const int64_t h = hk * g + hh;
                lin_prefetch(d->q_type, qbase, d->q, b, h, i1, n1, dk, 0);
                lin_prefetch(d->o_type, obase, d->o, b, h, i1, n1, dv, 1);
            }
        }
        /* The chunk's keys [kl, kh): K and V in place, or widened (V stays
         * in w->wv for every head of the group). */
        int64_t ldk = d->k.seq, ldv = d->v.seq;
        const float *kk = NULL, *vv = NULL;
        if (kc > 0) {
            kk = attn_linear_rows(p->x.cvt, d->k_type, kbase, d->k, b, hk, kl, kc, dk, w->wqk,
                                  &ldk);
            vv = attn_linear_rows(p->x.cvt, d->v_type, vbase, d->v, b, hk, kl, kc, dv, w->wv,
                                  &ldv);
        }
        if (kc > 0) {
            attn_linear_phi(p->x.kern, d->feature_map, kk, ldk, kc, dk, w->fk, dk);
            for (int64_t x = 0; x < dk; x++)
                for (int64_t c = 0; c < kc; c++)
                    w->kt[x * ldx + c] = w->fk[c * dk + x];
        }
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t h = hk * g + hh;
            int64_t ldq;
            const float *q = attn_linear_rows(p->x.cvt, d->q_type, qbase, d->q, b, h, i0, rows,
                                              dk, w->wqk, &ldq);
            attn_linear_phi(p->x.kern, d->feature_map, q, ldq, rows, dk, w->fq, dk);
            /* [phi(Q) S | A] */
            attn_gemm(p->x.gk, 0, (int)rows, (int)(dv + kc), (int)dk, 1.0f, w->fq, (int)dk, w->s,
                       (int)ldx, 0.0f, w->x, (int)ldx);
            for (int64_t r = 0; r < rows; r++)
                w->den[r] = lin_dot(w->fq + r * dk, w->z, dk);
            if (kc > 0) {
                float *am = w->x + dv;
                lin_mask(am, ldx, rows, kc, shift);
                for (int64_t r = 0; r < rows; r++)
                    w->den[r] += lin_sum(am + r * ldx, kc);
                const int last = hh == g - 1;
                if (last && rows == C) {
                    /* [O~; S] += [A; phi(K)^T] V_c */
                    attn_gemm(p->x.gk, 0, (int)(C + dk), (int)dv, (int)kc, 1.0f, am, (int)ldx, vv,
                               (int)ldv, 1.0f, w->x, (int)ldx);
                } else {
                    attn_gemm(p->x.gk, 0, (int)rows, (int)dv, (int)kc, 1.0f, am, (int)ldx, vv,
                               (int)ldv, 1.0f, w->x, (int)ldx);
                    if (last)
                        attn_gemm(p->x.gk, 0, (int)dk, (int)dv, (int)kc, 1.0f, w->kt, (int)ldx, vv,
                                   (int)ldv, 1.0f, w->s, (int)ldx);
                }
            }
            for (int64_t r = 0; r < rows; r++) {
                const float den = (float)(w->den[r] + (double)p->eps);
                float *orow = w->x + r * ldx;
                if (d->o_type == ATTN_DTYPE_F32) {
                    float *dst = ATTN_VIEW_AT((float *)obase, d->o, b, h, i0 + r);
                    for (int64_t x = 0; x < dv; x++)
                        dst[x] = orow[x] / den;
                    continue;
                }
                /* 16-bit O: the same quotients in X's row (the next
                 * head's GEMM overwrites it), rounded once */
                for (int64_t x = 0; x < dv; x++)
                    orow[x] = orow[x] / den;
                uint16_t *dst = ATTN_VIEW_AT((uint16_t *)obase, d->o, b, h, i0 + r);
                if (d->o_type == ATTN_DTYPE_F16)
                    p->x.cvt->f32_to_f16(orow, dst, dv);
                else
                    p->x.cvt->f32_to_bf16(orow, dst, dv);
            }
        }
        if (kc > 0) {
            for (int64_t r = 0; r < kc; r++)
                for (int64_t x = 0; x < dk; x++)
                    w->z[x] += w->fk[r * dk + x];
            pos = kh;
        }
    }
    /* Padded query rows. */
    for (int64_t hh = 0; hh < g; hh++) {
        const int64_t h = hk * g + hh;
        for (int64_t i = geo.qlen; i < n; i++) {
            if (d->o_type == ATTN_DTYPE_F32)
                memset(ATTN_VIEW_AT((float *)obase, d->o, b, h, i), 0, (size_t)dv * sizeof(float));
            else
                memset(ATTN_VIEW_AT((uint16_t *)obase, d->o, b, h, i), 0,
                       (size_t)dv * sizeof(uint16_t));
        }
    }
    if (st_s) {
        state_add(p, a, w, b, hk, pos, geo.kvlen);
        for (int64_t x = 0; x < dk; x++)
            memcpy(st_s + x * dv, w->s + x * ldx, (size_t)dv * sizeof(float));
        memcpy(st_z, w->z, (size_t)dk * sizeof(float));
    }
}

typedef struct lctx {
    const attn_linear_plan *p;
    const attn_linear_args *a;
    void *ws;
} lctx;

static void body(void *arg, int tid)
{
    const lctx *c = arg;
    const attn_linear_plan *p = c->p;
    const int64_t C = ATTN_LINEAR_CHUNK, dv = p->d.v_dim;
    char *base = (char *)c->ws + (size_t)tid * p->ws_thread;
    const int64_t ldx = dv + C;
    lwork w;
    w.fq = (float *)(void *)base;
    w.fk = (float *)(void *)(base + p->o_fk);
    w.x = (float *)(void *)(base + p->o_x);
    w.ldx = ldx;
    w.s = w.x + C * ldx;
    w.kt = w.s + dv;
    w.z = (float *)(void *)(base + p->o_z);
    w.den = (double *)(void *)(base + p->o_den);
    w.wqk = (float *)(void *)(base + p->o_wqk);
    w.wv = (float *)(void *)(base + p->o_wv);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < p->nitems; it++)
        run_item(p, c->a, &w, it / p->d.kv_heads, it % p->d.kv_heads);
}

static attn_status check_args(const attn_linear_plan *p, const attn_linear_args *a)
{
    const attn_linear_desc *d = &p->d;
    /* args16 when some type is 16-bit; then each tensor's pointer where
     * its type says, the other one NULL */
    const attn_linear_args16 *h = a->args16;
    if (p->any16 && !h)
        return ATTN_ERR_NULL_ARGUMENT;
    const int q16 = d->q_type != ATTN_DTYPE_F32, k16 = d->k_type != ATTN_DTYPE_F32,
              v16 = d->v_type != ATTN_DTYPE_F32, o16 = d->o_type != ATTN_DTYPE_F32;
    if (!(q16 ? (const void *)h->q : a->q) || !(k16 ? (const void *)h->k : a->k) ||
        !(v16 ? (const void *)h->v : a->v) || !(o16 ? (void *)h->o : a->o))
        return ATTN_ERR_NULL_ARGUMENT;
    const attn_pointer_use opt[] = {
        { p->any16, h }, { !q16, a->q }, { !k16, a->k }, { !v16, a->v }, { !o16, a->o },
        { q16, h ? h->q : NULL }, { k16, h ? h->k : NULL },
        { v16, h ? h->v : NULL }, { o16, h ? h->o : NULL },
        { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->use_state, a->state_s }, { d->use_state, a->state_z },
    };
    attn_status st = attn_check_pointers(opt, sizeof opt / sizeof opt[0]);
    if (st != ATTN_OK)
        return st;
    return attn_check_lengths(d->batch, a->kv_lens, d->kv_len, a->q_lens, d->q_len);
}

ATTN_DEFINE_ZERO_INIT(attn_linear_args_init, attn_linear_args)
ATTN_DEFINE_ZERO_INIT(attn_linear_args16_init, attn_linear_args16)

attn_status attn_linear_execute(const attn_linear_plan *p, const attn_linear_args *a,
                                void *workspace, size_t workspace_bytes)
{
    if (!p || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(a) || (a->args16 && !ATTN_RESERVED_NULL(a->args16)))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = check_args(p, a);
    if (st != ATTN_OK)
        return st;
    void *ws;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws_bytes, &ws)) != ATTN_OK)
        return st;
    const lctx ctx = { p, a, ws };
    attn_parallel(p->x.blas, p->x.nthreads, p->nitems, body, (void *)&ctx);
    if (!workspace)
        free(ws);
    return ATTN_OK;
}

attn_status attn_linear(const attn_linear_desc *desc, const attn_linear_args *args)
{
    attn_linear_plan *plan = NULL;
    attn_status st = attn_linear_plan_create(&plan, desc);
    if (st != ATTN_OK)
        return st;
    st = attn_linear_execute(plan, args, NULL, 0);
    attn_linear_plan_destroy(plan);
    return st;
}
