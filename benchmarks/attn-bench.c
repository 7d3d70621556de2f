/*
 * attn-bench: times attn on the benchmark cases against the naive path (full
 * score matrix, softmax, GEMM) and against the sgemm rate of the same BLAS,
 * measured in the same run with the same thread count.
 *
 *   attn-bench [--case S1 ...] [--threads N ...] [--runs R] [--quick] [--json]
 *              [--no-naive] [--bw-mib M] [--kv-mib M] [--types LIST] [--dry-run]
 *   attn-bench --list [--json]
 *   attn-bench --help
 *
 * --help (stdout, exit 0) has every option and the case table; a bad command
 * line (an unknown option or case, a missing or malformed value) is a
 * message naming it on stderr and exit 2.  Before measuring, the program
 * prints the runs it makes (--dry-run: only that).
 *
 * The cases are the table of cases.c (--list prints it, --list --json as
 * JSON: the scripts of benchmarks/ read it so).  Cases S1-S9, T1, T1d, T2,
 * T3 and P1 run by default; S2n and S3n (S2 and S3 without their causal
 * mask) only when named.  S6 is the whole multi-head attention layer; T1
 * (S1's shape; T1d with dropout 0.1) and T2 (S2's, causal) time the forward
 * with logsumexp and the backward, T3 the layer's training forward and
 * backward (S6's shape).  P1 times what a plan costs: creating and
 * destroying one, the one-shot attn_sdpa, and the execute of a reused plan,
 * on a tiny problem.  --quick runs S8 and P1 at one thread, 5 runs, with the
 * read bandwidth over a smaller buffer (2 x L3, 64 to 256 MiB).
 *
 * The long-sequence cases (L1, X1, X2: long.c) and the decode cases (S5's
 * decode row, D1-D3, DL: decode.c) run only when named, --case D naming
 * S5, D1-D3.  Every run measures, next to the sgemm rate, the machine's
 * streaming read bandwidth and FMA peak at each thread count (harness.c).
 *
 * Each (case, threads, impl) runs in a child process, so its peak RSS is its
 * own.  FLOPs count the attention core, 4*B*Hq*n*m*d; the useful count
 * leaves out what causality or key padding hides.
 */
#include "attn.h"
#include "cases.h"
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* the options' limits */
enum { MAX_THREADS = 1024, MAX_RUNS = 100000 };
#define MAX_MIB (1L << 20)

/* The layer's four projections, 2 * (B * L) * E * E each. */
static double proj_flops(const bench_case *c)
{
    const double E = (double)(c->Hq * c->d);
    return c->mha ? 4.0 * 2.0 * (double)(c->B * c->n) * E * E : 0.0;
}

static double useful_flops(const bench_case *c)
{
    double f = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->n; i++) {
            int64_t vis = case_kv_len(c, b);
            if (c->causal && i + 1 < vis)
                vis = i + 1;
            f += (double)vis;
        }
    return 4.0 * c->Hq * c->d * f + proj_flops(c);
}

typedef struct naive_ctx {
    const bench_case *c;
    const float *q, *k, *v;
    float *o;
    const int32_t *kvl;
    float *scores;
} naive_ctx;

static void naive_body(void *arg, int tid)
{
    const naive_ctx *x = arg;
    const bench_case *c = x->c;
    const int64_t n = c->n, m = c->m, d = c->d, g = c->Hq / c->Hkv;
    const float scale = 1.0f / sqrtf((float)d);
    float *s = x->scores + (size_t)tid * n * m;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < c->B * c->Hq; bh++) {
        int64_t b = bh / c->Hq, h = bh % c->Hq, hk = h / g;
        const float *qb = x->q + (b * c->Hq + h) * n * d;
        const float *kb = x->k + (b * c->Hkv + hk) * m * d;
        const float *vb = x->v + (b * c->Hkv + hk) * m * d;
        bench_sgemm(1, (int)n, (int)m, (int)d, scale, qb, (int)d, kb, (int)d, 0.0f, s, (int)m);
        for (int64_t i = 0; i < n; i++) {
            float *r = s + i * m;
            int64_t lim = x->kvl[b];
            if (c->causal && i + 1 < lim)
                lim = i + 1;
            float mx = -INFINITY;
            for (int64_t j = 0; j < lim; j++)
                mx = r[j] > mx ? r[j] : mx;
            float sum = 0;
            for (int64_t j = 0; j < lim; j++) {
                r[j] = expf(r[j] - mx);
                sum += r[j];
            }
            float inv = sum > 0 ? 1.0f / sum : 0.0f;
            for (int64_t j = 0; j < lim; j++)
                r[j] *= inv;
            for (int64_t j = lim; j < m; j++)
                r[j] = 0.0f;
        }
        bench_sgemm(0, (int)n, (int)d, (int)m, 1.0f, s, (int)m, vb, (int)d, 0.0f,
                   x->o + (b * c->Hq + h) * n * d, (int)d);
    }
}

/* The naive path: per (b, h) the full n x m score matrix, a row softmax,
 * then P V; on OpenMP threads (bench_parallel) with the BLAS
 * single-threaded inside, as attn does. */
static void naive(const bench_case *c, int nthreads, const float *q, const float *k,
                  const float *v, float *o, const int32_t *kvl, float *scores)
{
    const naive_ctx ctx = { c, q, k, v, o, kvl, scores };
    bench_parallel(nthreads, c->B * c->Hq, naive_body, (void *)&ctx);
}

/* C[M][N] = A[M][K] W[N][K]^T + bias, rows split evenly over the threads
 * (each a single-threaded sgemm): the naive path's projections. */
typedef struct linear_ctx {
    int64_t M, N, K, parts;
    const float *A, *W, *bias;
    float *C;
} linear_ctx;

static void linear_body(void *arg, int tid)
{
    const linear_ctx *x = arg;
    (void)tid;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t part = 0; part < x->parts; part++) {
        int64_t r0 = x->M * part / x->parts, r1 = x->M * (part + 1) / x->parts;
        if (r1 <= r0)
            continue;
        bench_sgemm(1, (int)(r1 - r0), (int)x->N, (int)x->K, 1.0f, x->A + r0 * x->K, (int)x->K,
                   x->W, (int)x->K, 0.0f, x->C + r0 * x->N, (int)x->N);
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < x->N; j++)
                x->C[r * x->N + j] += x->bias[j];
    }
}

static void par_linear(int nthreads, int64_t M, int64_t N, int64_t K, const float *A,
                       const float *W, const float *bias, float *C)
{
    const linear_ctx ctx = { M, N, K, nthreads, A, W, bias, C };
    bench_parallel(nthreads, nthreads, linear_body, (void *)&ctx);
}

/* Runs in the child: impl 0 = attn, 1 = naive (the long kinds: long.c). */
/* The element type of Q, K, V and O the child's attn rows run at (the
 * "bf16" and "f16" rows; set by job_fn). */
static attn_dtype g_dtype = ATTN_DTYPE_F32;

/* 16-bit rows: x rounded to the type in place (the naive path then sees
 * what attn reads) and its 16-bit copy, or NULL when out of memory. */
static uint16_t *typed_copy(float *x, size_t n)
{
    uint16_t *h = aligned_alloc(64, (n * sizeof(uint16_t) + 63) / 64 * 64);
    if (!h)
        return NULL;
    attn_dtype_encode(g_dtype, x, h, n);
    attn_dtype_decode(g_dtype, h, x, n);
    return h;
}

/* S6: the whole nn.MultiheadAttention-style layer, self-attention with a
 * packed in_proj and biases.  The naive path projects, reshapes Q, K, V to
 * [B][H][S][d], runs the naive attention, reshapes back and projects. */
/* The S6/T3 layer: packed self-attention with biases, weights ~
 * U(-1/sqrt(E), 1/sqrt(E)) as nn.Linear initializes them, X and the
 * weights filled.  NULL (with res->error set) on failure. */
typedef struct mha_layer {
    float *x, *inw, *inb, *ow, *ob;
    /* g_dtype F16 or BF16 (S6's bf16 and f16 rows): X and the weights
     * rounded to it in place (the naive path sees what attn reads) and
     * their 16-bit copies, the layer's x_type and w_type */
    uint16_t *x16, *inw16, *inb16, *ow16, *ob16;
    attn_mha_plan *plan;
} mha_layer;

static int mha_layer_make(const bench_case *c, int nthreads, mha_layer *m, result *res)
{
    memset(m, 0, sizeof *m);
    const int64_t E = c->Hq * c->d, BL = c->B * c->n;
    m->x = alloc_fill((size_t)(BL * E), 1);
    m->inw = alloc_fill((size_t)(3 * E * E), 1);
    m->inb = alloc_fill((size_t)(3 * E), 1);
    m->ow = alloc_fill((size_t)(E * E), 1);
    m->ob = alloc_fill((size_t)E, 1);
    if (!m->x || !m->inw || !m->inb || !m->ow || !m->ob) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return -1;
    }
    const float ws_scale = 1.0f / sqrtf((float)E);
    for (int64_t i = 0; i < 3 * E * E; i++) m->inw[i] *= ws_scale;
    for (int64_t i = 0; i < E * E; i++) m->ow[i] *= ws_scale;
    if (g_dtype != ATTN_DTYPE_F32) {
        m->x16 = typed_copy(m->x, (size_t)(BL * E));
        m->inw16 = typed_copy(m->inw, (size_t)(3 * E * E));
        m->inb16 = typed_copy(m->inb, (size_t)(3 * E));
        m->ow16 = typed_copy(m->ow, (size_t)(E * E));
        m->ob16 = typed_copy(m->ob, (size_t)E);
        if (!m->x16 || !m->inw16 || !m->inb16 || !m->ow16 || !m->ob16) {
            snprintf(res->error, sizeof res->error, "out of memory");
            return -1;
        }
    }
    attn_mha_desc desc;
    attn_mha_desc_init(&desc);
    desc.embed_dim = E;
    desc.num_heads = c->Hq;
    desc.batch = c->B;
    desc.q_len = desc.kv_len = c->n;
    desc.self_attention = 1;
    desc.packed_in_proj = 1;
    desc.threads = nthreads;
    desc.x_type = desc.w_type = g_dtype;
    m->plan = NULL;
    attn_status st = attn_mha_plan_create(&m->plan, &desc);
    if (st != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
        return -1;
    }
    return 0;
}

/* One call of the layer: attn's (which 0), or the naive path's (which 1:
 * project, reshape Q, K, V to [B][H][S][d], naive attention, reshape back,
 * project; into out). */
typedef struct mha_call {
    const bench_case *c, *core;   /* core: the layer's attention (mha = 0) */
    const mha_layer *ml;          /* the naive path's fp32 X and weights */
    int which, nthreads;
    const attn_mha_plan *plan;
    const attn_mha_weights *w;
    const attn_mha_args *a;
    void *ws;
    size_t ws_bytes;
    float *qkv, *qh, *kh, *vh, *oh, *o2, *scores, *out;
    const int32_t *kvl;
} mha_call;

static int mha_call_run(void *arg, double *split)
{
    const mha_call *x = arg;
    (void)split;
    if (x->which == 0)
        return (int)attn_mha_execute(x->plan, x->w, x->a, x->ws, x->ws_bytes);
    const bench_case *c = x->c;
    const int64_t B = c->B, H = c->Hq, L = c->n, d = c->d, E = H * d, BL = B * L;
    par_linear(x->nthreads, BL, 3 * E, E, x->ml->x, x->ml->inw, x->ml->inb, x->qkv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++) {
                const float *row = x->qkv + (b * L + i) * 3 * E + h * d;
                size_t dst = (size_t)(((b * H + h) * L + i) * d);
                memcpy(x->qh + dst, row, (size_t)d * sizeof(float));
                memcpy(x->kh + dst, row + E, (size_t)d * sizeof(float));
                memcpy(x->vh + dst, row + 2 * E, (size_t)d * sizeof(float));
            }
    naive(x->core, x->nthreads, x->qh, x->kh, x->vh, x->oh, x->kvl, x->scores);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < L; i++)
                memcpy(x->o2 + (b * L + i) * E + h * d, x->oh + ((b * H + h) * L + i) * d,
                       (size_t)d * sizeof(float));
    par_linear(x->nthreads, BL, E, E, x->o2, x->ml->ow, x->ml->ob, x->out);
    return 0;
}

static void run_mha_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    const int64_t B = c->B, H = c->Hq, L = c->n, d = c->d, E = H * d, BL = B * L;
    mha_layer ml;
    if (mha_layer_make(c, nthreads, &ml, res))
        return;
    float *x = ml.x, *inw = ml.inw, *inb = ml.inb, *ow = ml.ow, *ob = ml.ob;
    attn_mha_plan *plan = ml.plan;
    attn_status st = ATTN_OK;
    float *y = alloc_fill((size_t)(BL * E), 0), *yref = alloc_fill((size_t)(BL * E), 0);
    if (!y || !yref)
        return result_fail(res, "out of memory");
    attn_mha_weights w = { .in_proj_weight = inw, .in_proj_bias = inb, .out_weight = ow, .out_bias = ob };
    attn_mha_args a = { .x = x, .out = y };
    /* bf16 and f16 rows: X, Y and the weights at g_dtype */
    uint16_t *y16 = NULL;
    attn_mha_weights16 w16 = { .in_proj_weight = ml.inw16, .in_proj_bias = ml.inb16,
                               .out_weight = ml.ow16, .out_bias = ml.ob16 };
    attn_mha_args16 a16 = { .x = ml.x16 };
    if (g_dtype != ATTN_DTYPE_F32) {
        y16 = typed_copy(y, (size_t)(BL * E));
        if (!y16)
            return result_fail(res, "out of memory");
        a16.out = y16;
        w = (attn_mha_weights){ .weights16 = &w16 };
        a = (attn_mha_args){ .args16 = &a16 };
    }
    attn_mha_workspace_size(plan, &res->workspace);
    void *ws = aligned_alloc(64, (res->workspace + 63) / 64 * 64);

    /* naive buffers */
    float *qkv = NULL, *qh = NULL, *kh = NULL, *vh = NULL, *oh = NULL, *o2 = NULL, *scores = NULL;
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++)
        kvl[b] = (int32_t)L;
    qkv = alloc_fill((size_t)(BL * 3 * E), 0);
    qh = alloc_fill((size_t)(BL * E), 0);
    kh = alloc_fill((size_t)(BL * E), 0);
    vh = alloc_fill((size_t)(BL * E), 0);
    oh = alloc_fill((size_t)(BL * E), 0);
    o2 = alloc_fill((size_t)(BL * E), 0);
    scores = alloc_fill((size_t)nthreads * (size_t)(L * L), 0);
    if (!ws || !kvl || !qkv || !qh || !kh || !vh || !oh || !o2 || !scores)
        return result_fail(res, "out of memory");
    bench_case core = *c;
    core.mha = 0;

    /* timed runs of impl (its output in y), then the other once, for the
     * error: attn's output ends in y, the naive one in yref */
    mha_call call = { c, &core, &ml, impl, nthreads, plan, &w, &a, ws, res->workspace,
                      qkv, qh, kh, vh, oh, o2, scores, y, kvl };
    const bench_timing timing = { .runs = runs, .warmup = 2, .sample_peak = 1 };
    bench_stats stats;
    if (bench_time(mha_call_run, &call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    result_set_times(res, &stats);
    if (impl == 1)   /* naive timed: keep its output in yref and let attn write y */
        memcpy(yref, y, (size_t)(BL * E) * sizeof(float));
    call.which = 1 - impl;
    call.out = yref;
    if ((st = (attn_status)mha_call_run(&call, NULL)) != ATTN_OK)
        return result_fail(res, attn_status_str(st));
    if (impl == 1)
        res->workspace = (size_t)(BL * 3 * E + 4 * BL * E) * sizeof(float) +
                         (size_t)nthreads * (size_t)(L * L) * sizeof(float);
    if (y16)   /* attn's Y at g_dtype, against the naive path's fp32 one */
        attn_dtype_decode(g_dtype, y16, y, BL * E);
    double e = 0;
    for (int64_t i = 0; i < BL * E; i++) {
        double dd = fabs((double)y[i] - (double)yref[i]);
        if (!(dd <= e))
            e = dd;
    }
    res->max_err = e;
    res->ok = 1;
}

/* The naive backward: per (b, key/value head), for each query head of the
 * group, the full n x m P (recomputed) and dP, then dS = P (dP - D) and
 * the four GEMMs; dK and dV sum over the group in head order. */
typedef struct naive_bwd_ctx {
    const bench_case *c;
    const float *q, *k, *v, *o, *d_o;
    float *dq, *dk, *dv;
    const int32_t *kvl;
    float *scores;      /* 2 n m floats per thread */
} naive_bwd_ctx;

static void naive_bwd_body(void *arg, int tid)
{
    const naive_bwd_ctx *x = arg;
    const bench_case *c = x->c;
    const int64_t n = c->n, m = c->m, d = c->d, g = c->Hq / c->Hkv;
    const float scale = 1.0f / sqrtf((float)d);
    float *s = x->scores + (size_t)tid * 2 * n * m, *dp = s + n * m;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t bk = 0; bk < c->B * c->Hkv; bk++) {
        const int64_t b = bk / c->Hkv, hk = bk % c->Hkv;
        const float *kb = x->k + bk * m * d, *vb = x->v + bk * m * d;
        float *dkb = x->dk + bk * m * d, *dvb = x->dv + bk * m * d;
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t bh = b * c->Hq + hk * g + hh;
            const float *qb = x->q + bh * n * d, *ob = x->o + bh * n * d, *dob = x->d_o + bh * n * d;
            bench_sgemm(1, (int)n, (int)m, (int)d, scale, qb, (int)d, kb, (int)d, 0.0f, s, (int)m);
            bench_sgemm(1, (int)n, (int)m, (int)d, 1.0f, dob, (int)d, vb, (int)d, 0.0f, dp, (int)m);
            for (int64_t i = 0; i < n; i++) {
                float *r = s + i * m, *dr = dp + i * m;
                int64_t lim = x->kvl[b];
                if (c->causal && i + 1 < lim)
                    lim = i + 1;
                float mx = -INFINITY, sum = 0, D = 0;
                for (int64_t j = 0; j < lim; j++)
                    mx = r[j] > mx ? r[j] : mx;
                for (int64_t j = 0; j < lim; j++) {
                    r[j] = expf(r[j] - mx);
                    sum += r[j];
                }
                for (int64_t e = 0; e < d; e++)
                    D += dob[i * d + e] * ob[i * d + e];
                float inv = sum > 0 ? 1.0f / sum : 0.0f;
                for (int64_t j = 0; j < lim; j++) {
                    r[j] *= inv;
                    dr[j] = r[j] * (dr[j] - D);
                }
                for (int64_t j = lim; j < m; j++)
                    r[j] = dr[j] = 0.0f;
            }
            const float beta = hh ? 1.0f : 0.0f;
            bench_sgemm_tn((int)m, (int)d, (int)n, 1.0f, s, (int)m, dob, (int)d, beta, dvb, (int)d);
            bench_sgemm(0, (int)n, (int)d, (int)m, scale, dp, (int)m, kb, (int)d, 0.0f,
                       x->dq + bh * n * d, (int)d);
            bench_sgemm_tn((int)m, (int)d, (int)n, scale, dp, (int)m, qb, (int)d, beta, dkb, (int)d);
        }
    }
}

/* A training case's times into res: each half's median, and the median
 * and range of both. */
static void train_times(result *res, const bench_stats *stats)
{
    result_set_times(res, stats);
    res->ms_fwd = stats->split_median[0];
    res->ms_bwd = stats->split_median[1];
}

/* One call of the T3 layer: train_forward (saving the context), then
 * backward, *split between the two. */
typedef struct mha_train_call {
    const attn_mha_plan *plan;
    const attn_mha_weights *w;
    const attn_mha_args *a;
    attn_mha_grads *g;
    const float *dy;
    void *ws, *ctx;
    size_t wf, wb, cx;
} mha_train_call;

static int mha_train_call_run(void *arg, double *split)
{
    const mha_train_call *x = arg;
    attn_status st = attn_mha_train_execute(x->plan, x->w, x->a, x->ctx, x->cx, x->ws, x->wf);
    *split = now_ms();
    if (st == ATTN_OK)
        st = attn_mha_bwd_execute(x->plan, x->w, x->a, x->dy, x->ctx, x->cx, x->g, 0, x->ws, x->wb);
    return (int)st;
}

/* T3: the MHA layer's training forward and backward (attn only: the naive
 * path has no layer backward; compare-torch.py adds PyTorch's autograd). */
static void run_mha_train_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    if (impl != 0)
        return result_fail(res, "no naive layer backward (see compare-torch.py)");
    const int64_t E = c->Hq * c->d, BL = c->B * c->n;
    mha_layer ml;
    if (mha_layer_make(c, nthreads, &ml, res))
        return;
    float *y = alloc_fill((size_t)(BL * E), 0);
    float *dy = alloc_fill((size_t)(BL * E), 1), *dx = alloc_fill((size_t)(BL * E), 0);
    float *dinw = alloc_fill((size_t)(3 * E * E), 0), *dinb = alloc_fill((size_t)(3 * E), 0);
    float *dow = alloc_fill((size_t)(E * E), 0), *dob = alloc_fill((size_t)E, 0);
    if (!y || !dy || !dx || !dinw || !dinb || !dow || !dob)
        return result_fail(res, "out of memory");
    attn_status st = ATTN_OK;
    size_t wf = 0, wb = 0, cx = 0;
    if ((st = attn_mha_workspace_size(ml.plan, &wf)) == ATTN_OK &&
        (st = attn_mha_bwd_workspace_size(ml.plan, &wb)) == ATTN_OK)
        st = attn_mha_context_size(ml.plan, &cx);
    if (st != ATTN_OK)
        return result_fail(res, attn_status_str(st));
    /* workspace: the larger of the two calls' plus the saved context */
    res->workspace = (wf > wb ? wf : wb) + cx;
    void *ws = aligned_alloc(64, (wf > wb ? wf : wb) + 64), *ctx = aligned_alloc(64, cx + 64);
    if (!ws || !ctx)
        return result_fail(res, "out of memory");
    attn_mha_weights w = { .in_proj_weight = ml.inw, .in_proj_bias = ml.inb,
                           .out_weight = ml.ow, .out_bias = ml.ob };
    attn_mha_args a = { .x = ml.x, .out = y };
    attn_mha_grads g = { .dx = dx, .d_in_proj_weight = dinw, .d_in_proj_bias = dinb,
                         .d_out_weight = dow, .d_out_bias = dob };
    /* bf16 and f16 rows: X, Y, dY, the weights and every gradient at
     * g_dtype (the float buffers' sizes, as 16-bit copies) */
    attn_mha_weights16 w16 = { .in_proj_weight = ml.inw16, .in_proj_bias = ml.inb16,
                               .out_weight = ml.ow16, .out_bias = ml.ob16 };
    attn_mha_args16 a16 = { .x = ml.x16 };
    attn_mha_grads16 g16 = { 0 };
    const float *dyp = dy;
    if (g_dtype != ATTN_DTYPE_F32) {
        a16.out = typed_copy(y, (size_t)(BL * E));
        g16.dy = typed_copy(dy, (size_t)(BL * E));
        g16.dx = typed_copy(dx, (size_t)(BL * E));
        g16.d_in_proj_weight = typed_copy(dinw, (size_t)(3 * E * E));
        g16.d_in_proj_bias = typed_copy(dinb, (size_t)(3 * E));
        g16.d_out_weight = typed_copy(dow, (size_t)(E * E));
        g16.d_out_bias = typed_copy(dob, (size_t)E);
        if (!a16.out || !g16.dy || !g16.dx || !g16.d_in_proj_weight || !g16.d_in_proj_bias ||
            !g16.d_out_weight || !g16.d_out_bias)
            return result_fail(res, "out of memory");
        w = (attn_mha_weights){ .weights16 = &w16 };
        a = (attn_mha_args){ .args16 = &a16 };
        g = (attn_mha_grads){ .grads16 = &g16 };
        dyp = NULL;
    }
    mha_train_call call = { ml.plan, &w, &a, &g, dyp, ws, ctx, wf, wb, cx };
    const bench_timing timing = { .runs = runs, .warmup = 2, .sample_peak = 1 };
    bench_stats stats;
    if (bench_time(mha_train_call_run, &call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    train_times(res, &stats);
    res->max_err = NAN;
    res->ok = 1;
}

/* One call of a dense SDPA case: attn's plan (impl 0) or the naive path
 * (impl 1); a training case adds its backward, *split between the two. */
typedef struct sdpa_call {
    const bench_case *c;
    int impl, nthreads;
    const attn_sdpa_plan *fp;
    const attn_sdpa_bwd_plan *bp;
    const attn_sdpa_args *fa;
    const attn_sdpa_bwd_args *ba;
    void *ws;
    size_t wf, wb;
    const float *q, *k, *v;
    float *o;                       /* the naive path's output */
    const int32_t *kvl;
    float *scores;
    const naive_bwd_ctx *nb;
} sdpa_call;

static int sdpa_call_run(void *arg, double *split)
{
    const sdpa_call *x = arg;
    attn_status st = ATTN_OK;
    if (x->impl == 0)
        st = attn_sdpa_execute(x->fp, x->fa, x->ws, x->wf);
    else
        naive(x->c, x->nthreads, x->q, x->k, x->v, x->o, x->kvl, x->scores);
    if (!x->c->train || st != ATTN_OK)
        return (int)st;
    if (split)
        *split = now_ms();
    if (x->impl == 0)
        st = attn_sdpa_bwd_execute(x->bp, x->ba, x->ws, x->wb);
    else
        bench_parallel(x->nthreads, x->c->B * x->c->Hkv, naive_bwd_body, (void *)x->nb);
    return (int)st;
}

/* A training case in the child: impl 0 = attn (forward with logsumexp,
 * then backward), 1 = the naive forward and backward.  ms_fwd and ms_bwd
 * are the medians of each half, ms_median of their sum.  At a 16-bit
 * g_dtype (attn only) Q, K, V, O, dO and the gradients are of that type
 * (rounded inputs; the naive path reads the same rounded values, and the
 * error is over the gradients widened). */
static void run_train_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, d = c->d;
    const size_t nq = (size_t)(B * Hq * n * d), nk = (size_t)(B * Hkv * m * d);
    float *q = alloc_fill(nq, 1), *k = alloc_fill(nk, 1), *v = alloc_fill(nk, 1);
    float *o = alloc_fill(nq, 0), *d_o = alloc_fill(nq, 1), *lse = alloc_fill((size_t)(B * Hq * n), 0);
    float *dq = alloc_fill(nq, 0), *dk = alloc_fill(nk, 0), *dv = alloc_fill(nk, 0);
    float *rq = alloc_fill(nq, 0), *rk = alloc_fill(nk, 0), *rv = alloc_fill(nk, 0);
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)B);
    float *scores = alloc_fill((size_t)nthreads * 2 * (size_t)(n * m), 0);
    if (!q || !k || !v || !o || !d_o || !lse || !dq || !dk || !dv || !rq || !rk || !rv || !kvl ||
        !scores)
        return result_fail(res, "out of memory");
    for (int64_t b = 0; b < B; b++)
        kvl[b] = (int32_t)case_kv_len(c, b);
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    attn_sdpa_desc *f = &bd.fwd;
    f->batch = B; f->q_heads = Hq; f->kv_heads = Hkv;
    f->q_len = n; f->kv_len = m; f->qk_dim = d; f->v_dim = d;
    f->q = f->o = attn_view_bhsd(Hq, n, d);
    f->k = f->v = attn_view_bhsd(Hkv, m, d);
    f->want_lse = 1;
    f->lse = attn_view_bhsd(Hq, n, 1);
    if (c->causal)
        f->window_right = 0;
    f->use_kv_lens = c->padded;
    f->dropout_p = c->dropout;
    f->dropout_seed = 42;
    f->threads = nthreads;
    bd.d_o = bd.dq = f->q;
    bd.dk = bd.dv = f->k;
    attn_sdpa_args fa = { .q = q, .k = k, .v = v, .o = o, .lse = lse,
                          .kv_lens = c->padded ? kvl : NULL };
    attn_sdpa_bwd_args ba = { .q = q, .k = k, .v = v, .o = o, .d_o = d_o, .lse = lse,
                              .kv_lens = c->padded ? kvl : NULL, .dq = dq, .dk = dk, .dv = dv };
    uint16_t *q16 = NULL, *k16 = NULL, *v16 = NULL, *o16 = NULL, *do16 = NULL, *dq16 = NULL,
             *dk16 = NULL, *dv16 = NULL;
    attn_sdpa_bwd_args16 ba16;
    attn_sdpa_bwd_args16_init(&ba16);
    if (g_dtype != ATTN_DTYPE_F32) {
        q16 = typed_copy(q, nq), k16 = typed_copy(k, nk), v16 = typed_copy(v, nk);
        o16 = typed_copy(o, nq), do16 = typed_copy(d_o, nq);
        dq16 = typed_copy(dq, nq), dk16 = typed_copy(dk, nk), dv16 = typed_copy(dv, nk);
        if (!q16 || !k16 || !v16 || !o16 || !do16 || !dq16 || !dk16 || !dv16)
            return result_fail(res, "out of memory");
        f->q_type = f->k_type = f->v_type = f->o_type = g_dtype;
        fa.q = fa.k = fa.v = NULL;
        fa.o = NULL;
        fa.q16 = q16, fa.k16 = k16, fa.v16 = v16, fa.o16 = o16;
        ba.q = ba.k = ba.v = ba.o = ba.d_o = NULL;
        ba.dq = ba.dk = ba.dv = NULL;
        ba16.q = q16, ba16.k = k16, ba16.v = v16, ba16.o = o16, ba16.d_o = do16;
        ba16.dq = dq16, ba16.dk = dk16, ba16.dv = dv16;
        ba.args16 = &ba16;
    }
    attn_sdpa_plan *fp = NULL;
    attn_sdpa_bwd_plan *bp = NULL;
    attn_status st = attn_sdpa_plan_create(&fp, f);
    if (st == ATTN_OK)
        st = attn_sdpa_bwd_plan_create(&bp, &bd);
    if (st != ATTN_OK)
        return result_fail(res, attn_status_str(st));
    size_t wf = 0, wb = 0;
    attn_sdpa_workspace_size(fp, &wf);
    attn_sdpa_bwd_workspace_size(bp, &wb);
    res->workspace = impl == 0 ? (wf > wb ? wf : wb)
                               : (size_t)nthreads * 2 * (size_t)(n * m) * sizeof(float);
    void *ws = impl == 0 ? aligned_alloc(64, res->workspace) : NULL;
    const naive_bwd_ctx nb = { c, q, k, v, o, d_o, dq, dk, dv, kvl, scores };
    sdpa_call call = { c, impl, nthreads, fp, bp, &fa, &ba, ws, wf, wb, q, k, v, o, kvl, scores, &nb };
    const bench_timing timing = { .runs = runs, .warmup = 2, .sample_peak = 1 };
    bench_stats stats;
    if (bench_time(sdpa_call_run, &call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    train_times(res, &stats);

    /* Error of the gradients against the other path (without dropout). */
    res->max_err = NAN;
    if (c->dropout == 0.0) {
        if (dq16) {
            attn_dtype_decode(g_dtype, dq16, dq, (int64_t)nq);
            attn_dtype_decode(g_dtype, dk16, dk, (int64_t)nk);
            attn_dtype_decode(g_dtype, dv16, dv, (int64_t)nk);
        }
        memcpy(rq, dq, nq * sizeof(float));
        memcpy(rk, dk, nk * sizeof(float));
        memcpy(rv, dv, nk * sizeof(float));
        sdpa_call other = call;
        other.impl = 1 - impl;
        other.ws = NULL;
        other.wf = other.wb = 0;
        sdpa_call_run(&other, NULL);
        double e = 0;
        for (size_t i = 0; i < nq; i++)
            e = fmax(e, fabs((double)dq[i] - rq[i]));
        for (size_t i = 0; i < nk; i++)
            e = fmax(e, fmax(fabs((double)dk[i] - rk[i]), fabs((double)dv[i] - rv[i])));
        res->max_err = e;
    }
    res->ok = 1;
}

/* Runs in the child: impl 0 = attn, 1 = naive (the long kinds: long.c). */
static void run_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    if (g_dtype != ATTN_DTYPE_F32 && c->kind != K_DENSE) {
        res->skipped = 1;
        return result_fail(res, "F32 only (this kind)");
    }
    if (c->kind != K_DENSE)
        return long_run_case(c, impl, nthreads, runs, res);
    if (c->mha && c->train)
        return run_mha_train_case(c, impl, nthreads, runs, res);
    if (c->mha)
        return run_mha_case(c, impl, nthreads, runs, res);
    if (c->train)
        return run_train_case(c, impl, nthreads, runs, res);
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, d = c->d;
    size_t nq = (size_t)(B * Hq * n * d), nk = (size_t)(B * Hkv * m * d);
    float *q = alloc_fill(nq, 1), *k = alloc_fill(nk, 1), *v = alloc_fill(nk, 1);
    float *o = alloc_fill(nq, 0), *oref = alloc_fill(nq, 0);
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)B);
    if (!q || !k || !v || !o || !oref || !kvl)
        return result_fail(res, "out of memory");
    for (int64_t b = 0; b < B; b++)
        kvl[b] = (int32_t)case_kv_len(c, b);

    attn_sdpa_desc desc;
    attn_sdpa_desc_init(&desc);
    desc.batch = B; desc.q_heads = Hq; desc.kv_heads = Hkv;
    desc.q_len = n; desc.kv_len = m; desc.qk_dim = d; desc.v_dim = d;
    desc.q = desc.o = attn_view_bhsd(Hq, n, d);
    desc.k = desc.v = attn_view_bhsd(Hkv, m, d);
    if (c->causal)
        desc.window_right = 0;
    desc.use_kv_lens = c->padded;
    desc.threads = nthreads;
    attn_sdpa_args args = { .q = q, .k = k, .v = v, .o = o, .kv_lens = c->padded ? kvl : NULL };
    uint16_t *q16 = NULL, *k16 = NULL, *v16 = NULL, *o16 = NULL;
    if (g_dtype != ATTN_DTYPE_F32) {
        q16 = typed_copy(q, nq), k16 = typed_copy(k, nk), v16 = typed_copy(v, nk);
        o16 = typed_copy(o, nq);
        if (!q16 || !k16 || !v16 || !o16)
            return result_fail(res, "out of memory");
        desc.q_type = desc.k_type = desc.v_type = desc.o_type = g_dtype;
        args.q = args.k = args.v = NULL;
        args.o = NULL;
        args.q16 = q16, args.k16 = k16, args.v16 = v16, args.o16 = o16;
    }

    float *scores = NULL;
    attn_sdpa_plan *plan = NULL;
    void *ws = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, &desc);
    if (st != ATTN_OK)
        return result_fail(res, attn_status_str(st));
    attn_sdpa_workspace_size(plan, &res->workspace);
    if (impl == 0) {
        ws = aligned_alloc(64, res->workspace);
    } else {
        res->workspace = (size_t)nthreads * (size_t)(n * m) * sizeof(float);
        scores = alloc_fill((size_t)nthreads * (size_t)(n * m), 0);
        if (!scores)
            return result_fail(res, "out of memory");
    }

    sdpa_call call = { c, impl, nthreads, plan, NULL, &args, NULL, ws, res->workspace, 0,
                       q, k, v, o, kvl, scores, NULL };
    const bench_timing timing = { .runs = runs, .warmup = 2, .sample_peak = 1 };
    bench_stats stats;
    if (bench_time(sdpa_call_run, &call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    result_set_times(res, &stats);

    /* Error against the other path, computed after the timing (and after
     * the RSS reading) so it does not count in either. */
    if (impl == 0) {
        if (!scores)
            scores = alloc_fill((size_t)nthreads * (size_t)(n * m), 0);
        if (scores)
            naive(c, nthreads, q, k, v, oref, kvl, scores);
        if (o16)
            attn_dtype_decode(g_dtype, o16, o, nq);
    } else {
        st = attn_sdpa_execute(plan, &args, NULL, 0);
        memcpy(oref, o, nq * sizeof(float));
        naive(c, nthreads, q, k, v, o, kvl, scores);
    }
    double e = 0;
    for (size_t i = 0; i < nq; i++) {
        double x = fabs((double)o[i] - (double)oref[i]);
        if (!(x <= e))
            e = x;
    }
    res->max_err = e;
    res->ok = 1;
}

/* ---- P1: what a plan costs ------------------------------------------------
 * On a problem so small that the arithmetic is nothing: creating and
 * destroying a plan, the one-shot attn_sdpa (plan, execute with its own
 * workspace, destroy), and the execute of a plan made once and reused
 * (with the caller's workspace, and with NULL: attn allocates it).  The
 * ratio one-shot / reused execute is what a caller pays for not keeping
 * its plan; the project's target is within 3x. */
enum { PLAN_CREATE, PLAN_ONESHOT, PLAN_REUSED, PLAN_REUSED_NULL_WS, PLAN_NWHAT };
static const struct {
    const char *key, *label;
    int calls;              /* calls per timed run */
} plan_what[PLAN_NWHAT] = {
    { "create_destroy", "create + destroy", 50 },
    { "one_shot", "one-shot attn_sdpa", 50 },
    { "reused_execute", "reused plan: execute", 2000 },
    { "reused_execute_null_ws", "reused, workspace NULL", 2000 },
};
static const double PLAN_TARGET = 3.0;   /* one-shot / reused execute, at most */

typedef struct plan_call {
    int what;
    const attn_sdpa_desc *desc;
    const attn_sdpa_args *args;
    const attn_sdpa_plan *plan;
    void *ws;
    size_t ws_bytes;
} plan_call;

static int plan_call_run(void *arg, double *split)
{
    const plan_call *x = arg;
    (void)split;
    attn_sdpa_plan *p = NULL;
    attn_status st;
    switch (x->what) {
    case PLAN_CREATE:
        if ((st = attn_sdpa_plan_create(&p, x->desc)) == ATTN_OK)
            st = attn_sdpa_plan_destroy(p);
        return (int)st;
    case PLAN_ONESHOT:
        return (int)attn_sdpa(x->desc, x->args);
    case PLAN_REUSED:
        return (int)attn_sdpa_execute(x->plan, x->args, x->ws, x->ws_bytes);
    default:
        return (int)attn_sdpa_execute(x->plan, x->args, NULL, 0);
    }
}

typedef struct plan_job { const bench_case *c; int what, threads, runs; } plan_job;

/* In the child: one of plan_what, ms per call. */
static void plan_job_fn(void *ctx, result *res)
{
    const plan_job *j = ctx;
    const bench_case *c = j->c;
    const size_t nq = (size_t)(c->B * c->Hq * c->n * c->d), nk = (size_t)(c->B * c->Hkv * c->m * c->d);
    float *q = alloc_fill(nq, 1), *k = alloc_fill(nk, 1), *v = alloc_fill(nk, 1);
    float *o = alloc_fill(nq, 0);
    if (!q || !k || !v || !o)
        return result_fail(res, "out of memory");
    attn_sdpa_desc desc;
    attn_sdpa_desc_init(&desc);
    desc.batch = c->B; desc.q_heads = c->Hq; desc.kv_heads = c->Hkv;
    desc.q_len = c->n; desc.kv_len = c->m; desc.qk_dim = c->d; desc.v_dim = c->d;
    desc.q = desc.o = attn_view_bhsd(c->Hq, c->n, c->d);
    desc.k = desc.v = attn_view_bhsd(c->Hkv, c->m, c->d);
    desc.threads = j->threads;
    const attn_sdpa_args args = { .q = q, .k = k, .v = v, .o = o };
    attn_sdpa_plan *plan = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, &desc);
    if (st == ATTN_OK)
        st = attn_sdpa_workspace_size(plan, &res->workspace);
    if (st != ATTN_OK)
        return result_fail(res, attn_status_str(st));
    void *ws = aligned_alloc(64, (res->workspace + 63) / 64 * 64 + 64);
    if (!ws)
        return result_fail(res, "out of memory");
    const plan_call call = { j->what, &desc, &args, plan, ws, res->workspace };
    const bench_timing timing = { .runs = j->runs, .warmup = 2, .per_run = plan_what[j->what].calls };
    bench_stats stats;
    if (bench_time(plan_call_run, (void *)&call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    result_set_times(res, &stats);
    res->max_err = NAN;
    res->ok = 1;
    attn_sdpa_plan_destroy(plan);
}

/* The plan-cost table of case c at nt threads (each line its own child). */
static void plan_run_case(const bench_case *c, int nt, int runs, const bench_env *env)
{
    if (!env->json) {
        printf("\nplan cost (%s %s: SDPA B %lld, Hq %lld, Hkv %lld, n %lld, m %lld, d %lld; us per "
               "call, over %d runs)\n", c->id, c->name, (long long)c->B, (long long)c->Hq,
               (long long)c->Hkv, (long long)c->n, (long long)c->m, (long long)c->d, runs);
        printf("%-4s %-24s %9s %9s %9s %9s %11s\n", "case", "what", "us(med)", "us(min)",
               "us(max)", "calls/run", "workspace");
    }
    double us[PLAN_NWHAT] = { 0 };
    for (int w = 0; w < PLAN_NWHAT; w++) {
        plan_job j = { c, w, nt, runs };
        result r;
        in_child(plan_job_fn, &j, &r);
        if (!r.ok) {
            if (env->json)
                printf("{\"kind\":\"plan\",\"case\":\"%s\",\"threads\":%d,\"what\":\"%s\","
                       "\"ok\":false,\"error\":\"%s\"}\n", c->id, nt, plan_what[w].key, r.error);
            else
                printf("%-4s %-24s FAILED: %s\n", c->id, plan_what[w].label, r.error);
            continue;
        }
        us[w] = 1e3 * r.ms_median;
        if (env->json)
            printf("{\"kind\":\"plan\",\"case\":\"%s\",\"name\":\"%s\",\"threads\":%d,"
                   "\"impl\":\"attn\",\"what\":\"%s\",\"ok\":true,\"us_median\":%.4f,"
                   "\"us_min\":%.4f,\"us_max\":%.4f,\"ms_median\":%.7f,\"calls_per_run\":%d,"
                   "\"runs\":%d,\"workspace_bytes\":%zu,\"blas\":\"%s\",\"kernel\":\"%s\","
                   "\"simd\":\"%s\"}\n",
                   c->id, c->name, nt, plan_what[w].key, us[w], 1e3 * r.ms_min, 1e3 * r.ms_max,
                   r.ms_median, plan_what[w].calls, runs, r.workspace, env->blas, env->kernel,
                   env->simd);
        else
            printf("%-4s %-24s %9.3f %9.3f %9.3f %9d %11zu\n", c->id, plan_what[w].label, us[w],
                   1e3 * r.ms_min, 1e3 * r.ms_max, plan_what[w].calls, r.workspace);
        fflush(stdout);
    }
    for (int w = PLAN_REUSED; w <= PLAN_REUSED_NULL_WS; w++) {
        if (us[PLAN_ONESHOT] <= 0 || us[w] <= 0)
            continue;
        const double ratio = us[PLAN_ONESHOT] / us[w];
        const int met = ratio <= PLAN_TARGET;
        const char *what = w == PLAN_REUSED ? "one-shot / reused execute"
                                            : "one-shot / reused execute (workspace NULL)";
        if (env->json)
            printf("{\"kind\":\"plan\",\"case\":\"%s\",\"ratio\":\"%s\",\"threads\":%d,"
                   "\"value\":%.4f,\"target\":%.2f,\"met\":%s}\n", c->id, what, nt, ratio,
                   PLAN_TARGET, met ? "true" : "false");
        else
            printf("  %s %-42s %8.2f   (target <= %.2f: %s)\n", c->id, what, ratio, PLAN_TARGET,
                   met ? "met" : "NOT met");
    }
    fflush(stdout);
}

/* ---- the driver ------------------------------------------------------------ */

typedef struct job { const bench_case *c; int impl, threads, runs; attn_dtype dtype; } job;
static void job_fn(void *ctx, result *r)
{
    job *j = ctx;
    g_dtype = j->dtype;
    peak_sample_start(j->threads);
    run_case(j->c, j->impl, j->threads, j->runs, r);
    r->fma_local = peak_sample_finish();
}
static void rate_fn(void *ctx, result *r)
{
    r->ms_median = sgemm_rate(*(int *)ctx);
    r->ok = 1;
}
static void fma_fn(void *ctx, result *r)
{
    r->ms_median = fma_peak(*(int *)ctx);
    r->ok = r->ms_median > 0;
}
static void bf16_fn(void *ctx, result *r)
{
    r->ms_median = bf16_peak(*(int *)ctx);
    r->ok = r->ms_median > 0;
}
typedef struct bw_job { int threads; size_t bytes; } bw_job;
typedef struct runs_job { int threads; size_t bytes, run; } runs_job;
static void runs_fn(void *ctx, result *r)
{
    const runs_job *j = ctx;
    r->ms_median = read_bandwidth_runs(j->threads, j->bytes, j->run);
    r->ok = r->ms_median > 0;
}
static void bw_fn(void *ctx, result *r)
{
    const bw_job *j = ctx;
    r->ms_median = read_bandwidth(j->threads, j->bytes);
    r->ok = r->ms_median > 0;
}

static const char *const usage_text =
    "usage: attn-bench [--case ID ...] [--threads N ...] [--runs R] [--quick] [--json]\n"
    "                  [--no-naive] [--bw-mib M] [--kv-mib M] [--types f32,bf16,f16]\n"
    "                  [--dry-run]\n"
    "       attn-bench --list [--json]\n"
    "       attn-bench --help\n";

/* --help: to stdout, with the cases, exit 0. */
static void help(void)
{
    fputs(usage_text, stdout);
    printf("\nTimes attn on the benchmark cases against the naive path (full score matrix,\n"
           "softmax, GEMM) and the same BLAS's sgemm rate, FMA peak and read bandwidth,\n"
           "each measurement in its own child process.  Before measuring it prints the\n"
           "runs it makes (the cases, thread counts and timed runs).\n\n"
           "  --case ID     run this case, or every case of a group (L1, X1, X2, D, DL);\n"
           "                repeatable; ids are case-sensitive (S1, not s1); default:\n"
           "                every case marked \"default\" below\n"
           "  --threads N   thread count, 1-%d (repeatable, up to 8; default 1 and 2)\n"
           "  --runs R      timed runs after 2 warm-up runs, 1-%d (default 10)\n"
           "  --quick       a short check, a minute or less: the cases marked quick\n"
           "                (S8, P1) unless --case, at 1 thread unless --threads, 5 runs\n"
           "                unless --runs, the read bandwidth over a smaller buffer\n"
           "                (2 x L3 within 64-256 MiB; with an L3 over 128 MiB partly\n"
           "                from the cache, an upper bound, as the header then says)\n"
           "  --json        one JSON object per measurement instead of the tables\n"
           "  --no-naive    time attn only (no naive path)\n"
           "  --bw-mib M    the read-bandwidth buffer in MiB, 1-%ld (default 16 x L3,\n"
           "                1-2 GiB; with --quick as above)\n"
           "  --kv-mib M    K/V copies of each decode case in MiB, 1-%ld (default 4 x L3,\n"
           "                at least 256)\n"
           "  --types LIST  element types of the dense cases' attn rows, comma-separated\n"
           "                from f32, bf16, f16 (default all three; f32 always runs)\n"
           "  --dry-run     print the header and the runs, measure nothing\n"
           "  --list        print the case table and exit (with --json: one JSON array)\n"
           "  --help, -h    this text\n\n"
           "Exit status: 0, or 2 for a bad command line (the message on stderr).\n\n"
           "The cases (attn-bench --list; \"named\" = only with --case):\n\n",
           MAX_THREADS, MAX_RUNS, MAX_MIB, MAX_MIB);
    cases_print(stdout, 0);
    exit(0);
}

/* A bad command line: the message, the usage, exit 2. */
static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("attn-bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fputs(usage_text, stderr);
    fputs("(attn-bench --help: every option and case)\n", stderr);
    exit(2);
}

/* The value of option argv[*i]: the next argument, which must exist. */
static const char *option_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc)
        bad_usage("%s needs a value", argv[*i]);
    return argv[++*i];
}

/* A decimal integer in [lo, hi], the whole string, for option `opt`. */
static long option_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        bad_usage("%s takes a whole number, not '%s'", opt, s);
    if (v < lo || v > hi)
        bad_usage("%s %s: out of range (%ld to %ld)", opt, s, lo, hi);
    return v;
}

static const char *threading_name(attn_blas_threading t)
{
    switch (t) {
    case ATTN_BLAS_THREADING_SEQUENTIAL: return "sequential";
    case ATTN_BLAS_THREADING_PTHREADS: return "pthreads";
    case ATTN_BLAS_THREADING_OPENMP: return "openmp";
    case ATTN_BLAS_THREADING_UNKNOWN: break;
    }
    return "unknown";
}

/* The loaded BLAS by its own name and version: "OpenBLAS 0.3.21" and
 * "BLIS 0.9.0" (the first two words of the version string, OpenBLAS's
 * being its build configuration), MKL's string up to " Product Build",
 * otherwise the name attn found it under ("netlib", "unknown"). */
static void blas_label(const attn_blas_info *bi, char *out, size_t size)
{
    const char *v = bi->version;
    size_t n = strlen(v);
    if (!strncmp(v, "OpenBLAS ", 9) || !strncmp(v, "BLIS ", 5)) {
        const char *sp = strchr(v, ' ');
        sp = strchr(sp + 1, ' ');
        if (sp)
            n = (size_t)(sp - v);
    } else {
        const char *pb = strstr(v, " Product Build");
        if (pb)
            n = (size_t)(pb - v);
    }
    if (!n)
        snprintf(out, size, "%s", bi->loaded);
    else
        snprintf(out, size, "%.*s", (int)n, v);
}

int main(int argc, char **argv)
{
    enum { MAX_WANT = 128 };
    const char *want[MAX_WANT];
    int nwant = 0, threads[8], nthreads = 0, runs = 10, json = 0, do_naive = 1, quick = 0, list = 0;
    /* --types: the element types of the attn rows of dense cases (f32 is
     * always run: the other rows' ratios are to it) */
    int want_bf16 = 1, want_f16 = 1, runs_given = 0, dry_run = 0;
    long bw_mib = 0, kv_mib = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            help();
        else if (!strcmp(a, "--case")) {
            const char *v = option_value(argc, argv, &i);
            if (nwant == MAX_WANT)
                bad_usage("--case: at most %d", MAX_WANT);
            want[nwant++] = v;
        } else if (!strcmp(a, "--threads")) {
            const char *v = option_value(argc, argv, &i);
            if (nthreads == (int)(sizeof threads / sizeof threads[0]))
                bad_usage("--threads: at most %d thread counts",
                          (int)(sizeof threads / sizeof threads[0]));
            threads[nthreads++] = (int)option_long(a, v, 1, MAX_THREADS);
        } else if (!strcmp(a, "--runs")) {
            runs = (int)option_long(a, option_value(argc, argv, &i), 1, MAX_RUNS);
            runs_given = 1;
        } else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--no-naive"))
            do_naive = 0;
        else if (!strcmp(a, "--quick"))
            quick = 1;
        else if (!strcmp(a, "--dry-run"))
            dry_run = 1;
        else if (!strcmp(a, "--bw-mib"))
            bw_mib = option_long(a, option_value(argc, argv, &i), 1, MAX_MIB);
        else if (!strcmp(a, "--kv-mib"))
            kv_mib = option_long(a, option_value(argc, argv, &i), 1, MAX_MIB);
        else if (!strcmp(a, "--list"))
            list = 1;
        else if (!strcmp(a, "--types")) {
            const char *v = option_value(argc, argv, &i);
            char list_[64];
            if (strlen(v) >= sizeof list_)
                bad_usage("--types '%s': too long (f32, bf16, f16, comma-separated)", v);
            snprintf(list_, sizeof list_, "%s", v);
            want_bf16 = want_f16 = 0;
            int ntok = 0;
            for (char *save = NULL, *tok = strtok_r(list_, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save), ntok++) {
                if (!strcmp(tok, "bf16")) want_bf16 = 1;
                else if (!strcmp(tok, "f16")) want_f16 = 1;
                else if (strcmp(tok, "f32"))
                    bad_usage("--types: no type '%s' (f32, bf16, f16)", tok);
            }
            if (!ntok)
                bad_usage("--types: an empty list (f32, bf16, f16)");
        } else if (a[0] == '-')
            bad_usage("unknown option %s", a);
        else
            bad_usage("unexpected argument '%s' (a case is named with --case %s)", a, a);
    }
    if (dry_run && json)
        bad_usage("--dry-run prints text: not with --json");
    if (list) {
        cases_print(stdout, json);
        return 0;
    }
    for (int w = 0; w < nwant; w++) {
        int known = 0;
        const char *near = NULL;
        for (int ci = 0; ci < bench_ncases; ci++) {
            const bench_case *c = &bench_cases[ci];
            known |= case_named(c, want[w]);
            if (!strcasecmp(want[w], c->id))
                near = c->id;
            else if (c->group && !strcasecmp(want[w], c->group))
                near = c->group;
        }
        if (!known) {
            if (near)
                bad_usage("no case '%s' (case ids are case-sensitive: did you mean %s?)",
                          want[w], near);
            bad_usage("no case '%s' (attn-bench --list prints the cases)", want[w]);
        }
    }
    if (!nthreads) {
        threads[nthreads++] = 1;
        if (!quick)
            threads[nthreads++] = 2;
    }
    if (quick && !runs_given)
        runs = 5;

    bench_blas_init();
    attn_blas_info bi;
    attn_blas_query(&bi);
    /* The engine "attn" rows run on (ATTN_ENGINE and the CPU); on the tile
     * engine every case also runs on the BLAS engine ("blas" rows). */
    attn_engine eng = ATTN_ENGINE_BLAS;
    attn_engine_resolve(ATTN_ENGINE_AUTO, &eng);
    const int tile_default = eng == ATTN_ENGINE_TILE;
    const char *env_engine = getenv("ATTN_ENGINE");
    if (!json) {
        char blas_name[128];
        blas_label(&bi, blas_name, sizeof blas_name);
        printf("attn %s | BLAS %s, %s threading (built for %s; loaded: %s, %s) | kernel %s"
               " | attn SIMD %s | engine %s\n",
               attn_version(), blas_name[0] ? blas_name : bi.loaded,
               threading_name(bi.threading), bi.backend, bi.loaded,
               bi.library[0] ? bi.library : "static", bi.kernel[0] ? bi.kernel : "-", bi.simd,
               tile_default ? "tile" : "blas");
        const char *ct = getenv("OPENBLAS_CORETYPE");
        printf("OPENBLAS_CORETYPE=%s  runs=%d (after 2 warm-up)\n", ct ? ct : "(unset)", runs);
    }

    /* which cases run: by default every case not marked extra, with
     * --quick those marked quick; --case names a case by its id or a group
     * (L1 every L1-*, D the decode cases S5, D1-D3, DL every DL-*) */
    int *selected = calloc((size_t)bench_ncases, sizeof *selected);
    int any_dense = 0, any_decode = 0, any_plan = 0;
    if (!selected) {
        fprintf(stderr, "attn-bench: out of memory\n");
        return 1;
    }
    for (int ci = 0; ci < bench_ncases; ci++) {
        const bench_case *c = &bench_cases[ci];
        int sel = !nwant && (quick ? c->quick : !c->extra);
        for (int w = 0; w < nwant; w++)
            sel |= case_named(c, want[w]);
        selected[ci] = sel;
        any_dense |= sel && c->kind != K_DECODE && c->kind != K_PLAN;
        any_decode |= sel && c->kind == K_DECODE;
        any_plan |= sel && c->kind == K_PLAN;
    }

    /* The read bandwidth's buffer: 16 x L3, at least 1 GiB, at most 2 GiB
     * (the machine is shared); with --quick 2 x L3, at least 64 MiB, at
     * most 256 MiB (a quick check does not allocate and write gigabytes;
     * the figure is partly the cache's when 2 x L3 is over 256 MiB);
     * --bw-mib sets it.  The decode cases' K/V copies: 4 x L3, at least
     * 256 MiB (--kv-mib sets it). */
    const size_t l3 = l3_size(), MiB = (size_t)1 << 20;
    const size_t bw_min = quick ? 64 * MiB : 1024 * MiB, bw_max = quick ? 256 * MiB : 2048 * MiB;
    size_t bw_bytes = (quick ? 2 : 16) * l3;
    if (bw_bytes < bw_min)
        bw_bytes = bw_min;
    if (bw_bytes > bw_max)
        bw_bytes = bw_max;
    if (bw_mib > 0)
        bw_bytes = (size_t)bw_mib * MiB;
    size_t kv_bytes = 4 * l3 > 256 * MiB ? 4 * l3 : 256 * MiB;
    if (kv_mib > 0)
        kv_bytes = (size_t)kv_mib * MiB;
    if (!json)
        printf("L3 %.1f MiB (%s); read bandwidth over %.0f MiB%s%s\n", l3 / (double)MiB,
               l3 ? "sysconf or /sys" : "unknown", bw_bytes / (double)MiB,
               l3 && bw_bytes < 2 * l3 ? " (under 2 x L3: partly from the cache, an upper bound)"
                                       : "",
               any_decode ? "" : "; no decode case named");
    if (!json && any_decode)
        printf("decode cases: K/V copies of at least %.0f MiB per case, a different copy each "
               "call\n", kv_bytes / (double)MiB);
    /* the runs this invocation makes, before any of them */
    if (!json) {
        printf("%s at %s", quick ? "--quick runs" : "runs", nthreads > 1 ? "threads " : "");
        for (int t = 0; t < nthreads; t++)
            printf("%s%d", t ? (t + 1 < nthreads ? ", " : " and ") : "", threads[t]);
        printf("%s: the sgemm rate, read bandwidth, FMA and BF16 peaks, then",
               nthreads > 1 ? "" : threads[0] == 1 ? " thread" : " threads");
        int nsel = 0;
        for (int ci = 0; ci < bench_ncases; ci++)
            if (selected[ci]) {
                const bench_case *c = &bench_cases[ci];
                printf("%s %s (%s)", nsel++ ? "," : "", c->id, c->name);
            }
        printf("; %d timed run%s each after 2 warm-up%s\n", runs, runs > 1 ? "s" : "",
               do_naive ? "" : "; no naive path");
        fflush(stdout);
    }
    if (dry_run) {
        free(selected);
        return 0;
    }

    for (int t = 0; t < nthreads; t++) {
        int nt = threads[t];
        result rr;
        in_child(rate_fn, &nt, &rr);
        double rate = rr.ms_median;
        bw_job bj = { nt, bw_bytes };
        in_child(bw_fn, &bj, &rr);
        const double read_gbs = rr.ok ? rr.ms_median : 0.0;
        in_child(fma_fn, &nt, &rr);
        const double fma_gflops = rr.ok ? rr.ms_median : 0.0;
        in_child(bf16_fn, &nt, &rr);
        const double bf16_gflops = rr.ok ? rr.ms_median : 0.0;
        /* the peak a bf16 row is held to: the unit its products run on */
        const int bf16_unit = !strcmp(bi.bf16, "avx512bf16") && tile_default;
        const double bf16_ref = bf16_unit && bf16_gflops > 0 ? bf16_gflops : fma_gflops;
        if (!json)
            printf("\n-- %d thread%s: FMA peak %.1f GFLOP/s | BF16 peak (VDPBF16PS) %.1f GFLOP/s | "
                   "sgemm 1024^3 per thread, same BLAS: %.1f GFLOP/s | read bandwidth: %.1f GB/s\n",
                   nt, nt > 1 ? "s" : "", fma_gflops, bf16_gflops, rate, read_gbs);
        else
            printf("{\"machine\":1,\"threads\":%d,\"sgemm_gflops\":%.2f,\"read_gbs\":%.2f,"
                   "\"fma_gflops\":%.2f,\"bf16_gflops\":%.2f,\"read_buffer_bytes\":%zu,"
                   "\"l3_bytes\":%zu,\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\","
                   "\"bf16\":\"%s\"}\n",
                   nt, rate, read_gbs, fma_gflops, bf16_gflops, bw_bytes, l3, bi.loaded, bi.kernel,
                   bi.simd, bi.bf16);
        if (!json && any_dense)
            printf("%-4s %-12s %-5s %9s %9s %9s %8s %8s %6s %6s %6s %11s %9s %9s %7s\n", "case",
                   "name", "impl", "ms(med)", "ms(min)", "ms(max)", "GF/s", "GF/s_u", "%peak",
                   "%local", "%sgemm", "workspace", "RSS MiB", "max_err", "speedup");
        for (int ci = 0; ci < bench_ncases; ci++) {
            const bench_case *c = &bench_cases[ci];
            if (!selected[ci] || c->kind == K_DECODE || c->kind == K_PLAN)
                continue;
            double full = 4.0 * c->B * c->Hq * c->n * c->m * c->d + proj_flops(c);
            double useful = c->kind == K_DENSE ? useful_flops(c) : long_useful_flops(c, 0);
            double attn_ms = 0, attn_part[3] = { 0, 0, 0 };
            /* the naive path has no dropout and no layer backward */
            const int naive_too = do_naive && !(c->train && (c->mha || c->dropout > 0));
            /* Rows: attn on its default engine; when that is the tile
             * engine, attn again on the BLAS engine (ATTN_ENGINE=blas in
             * the child); the other path. */
            /* then attn at BF16 and F16 (dense cases; "bf16", "f16" rows,
             * their ratio to the attn row's time) */
            int vimpl[5], nv = 0, vblas[5];
            attn_dtype vtype[5];
            vimpl[nv] = 0, vtype[nv] = ATTN_DTYPE_F32, vblas[nv++] = 0;
            if (tile_default)
                vimpl[nv] = 0, vtype[nv] = ATTN_DTYPE_F32, vblas[nv++] = 1;
            if (naive_too)
                vimpl[nv] = 1, vtype[nv] = ATTN_DTYPE_F32, vblas[nv++] = 0;
            if (want_bf16 && c->kind == K_DENSE)
                vimpl[nv] = 0, vtype[nv] = ATTN_DTYPE_BF16, vblas[nv++] = 0;
            if (want_f16 && c->kind == K_DENSE)
                vimpl[nv] = 0, vtype[nv] = ATTN_DTYPE_F16, vblas[nv++] = 0;
            for (int v = 0; v < nv; v++) {
                const int impl = vimpl[v];
                job j = { c, impl, nt, runs, vtype[v] };
                result r;
                if (vblas[v])
                    setenv("ATTN_ENGINE", "blas", 1);
                in_child(job_fn, &j, &r);
                if (vblas[v]) {
                    if (env_engine)
                        setenv("ATTN_ENGINE", env_engine, 1);
                    else
                        unsetenv("ATTN_ENGINE");
                }
                const char *iname = vblas[v] ? "blas"
                                  : vtype[v] == ATTN_DTYPE_BF16 ? "bf16"
                                  : vtype[v] == ATTN_DTYPE_F16 ? "f16"
                                  : !impl ? "attn" : c->kind == K_DENSE ? "naive" : long_other_name(c);
                /* %peak: a bf16 row against the BF16 unit's peak when its
                 * products run there */
                const double peak = vtype[v] == ATTN_DTYPE_BF16 ? bf16_ref : fma_gflops;
                if (!r.ok) {
                    if (json)
                        continue;
                    printf("%-4s %-12s %-5s %s: %s\n", c->id, c->name, iname,
                           r.skipped ? "skipped" : "failed", r.error);
                    continue;
                }
                if (c->kind != K_DENSE)   /* each path's own useful FLOPs */
                    full = useful = long_useful_flops(c, impl);
                if (c->train) {
                    /* forward, backward (2.5x the forward's FLOPs), both */
                    const char *part[3] = { "fwd", "bwd", "f+b" };
                    const double ms[3] = { r.ms_fwd, r.ms_bwd, r.ms_median };
                    /* T3: the projections' backward is 2x their forward
                     * (dX and dW for each), attention's 2.5x */
                    const double pf = proj_flops(c), af = useful - pf;
                    const double fl[3] = { useful, 2.5 * af + 2.0 * pf, 3.5 * af + 3.0 * pf };
                    if (v == 0) {
                        attn_ms = r.ms_median;
                        for (int k = 0; k < 3; k++)
                            attn_part[k] = ms[k];
                    }
                    const int typed = vtype[v] != ATTN_DTYPE_F32;
                    char err[32];
                    json_g(err, sizeof err, r.max_err);
                    for (int k = 0; k < 3; k++) {
                        double gfu = fl[k] / (ms[k] * 1e6);
                        /* typed rows: against their unit's peak and
                         * attn's fp32 time of the same part */
                        const double vs = typed && attn_part[k] > 0 ? attn_part[k] / ms[k] : 0.0;
                        if (json) {
                            printf("{\"case\":\"%s\",\"name\":\"%s\",\"threads\":%d,"
                                   "\"impl\":\"%s\",\"part\":\"%s\",\"ms_median\":%.4f,"
                                   "\"gflops_useful\":%.2f,\"sgemm_gflops\":%.2f,"
                                   "\"frac_sgemm\":%.4f,\"fma_gflops\":%.2f,\"frac_peak\":%.4f,"
                                   "\"fma_local_gflops\":%.2f,\"frac_peak_local\":%.4f,"
                                   "\"workspace_bytes\":%zu,"
                                   "\"peak_rss_bytes\":%ld,\"max_err\":%s,\"read_gbs\":%.2f,"
                                   "\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\","
                                   "\"unit_peak_gflops\":%.2f,\"vs_f32\":%.4f}\n",
                                   c->id, c->name, nt, iname, part[k], ms[k], gfu, rate,
                                   rate > 0 ? gfu / rate : 0, fma_gflops, peak > 0 ? gfu / peak : 0,
                                   r.fma_local, r.fma_local > 0 ? gfu / r.fma_local : 0,
                                   r.workspace, r.peak_rss_kb * 1024,
                                   err, read_gbs, bi.loaded, bi.kernel, bi.simd, peak, vs);
                            continue;
                        }
                        char sp[24] = "";
                        if (k == 2)
                            snprintf(sp, sizeof sp, "%.2fx fwd", r.ms_median / r.ms_fwd);
                        if (k == 2 && v > 0 && attn_ms > 0 && !typed)
                            snprintf(sp, sizeof sp, "%.2fx", r.ms_median / attn_ms);
                        if (vs > 0)   /* how much faster than attn's fp32 */
                            snprintf(sp, sizeof sp, "%.2fx f32", vs);
                        /* the sampled FMA peak scaled to the unit's */
                        const double local =
                            fma_gflops > 0 ? r.fma_local * peak / fma_gflops : 0.0;
                        char nm[24];
                        snprintf(nm, sizeof nm, "%s %s", iname, part[k]);
                        printf("%-4s %-12s %-9s %9.3f %9s %9s %8s %8.1f %5.0f%% %5.0f%% %5.0f%% %11zu "
                               "%9.1f %9.2g %7s\n",
                               c->id, c->name, nm, ms[k], "", "", "", gfu,
                               peak > 0 ? 100.0 * gfu / peak : 0.0,
                               local > 0 ? 100.0 * gfu / local : 0.0,
                               rate > 0 ? 100.0 * gfu / rate : 0.0, r.workspace,
                               r.peak_rss_kb / 1024.0, k == 2 ? r.max_err : NAN, sp);
                    }
                    fflush(stdout);
                    continue;
                }
                double gf = full / (r.ms_median * 1e6), gfu = useful / (r.ms_median * 1e6);
                if (v == 0)
                    attn_ms = r.ms_median;
                const int typed = vtype[v] != ATTN_DTYPE_F32;
                /* the sampled FMA peak scaled to the unit's (bf16 rows) */
                const double local = fma_gflops > 0 ? r.fma_local * peak / fma_gflops : 0.0;
                if (json) {
                    char err[32];
                    json_g(err, sizeof err, r.max_err);
                    printf("{\"case\":\"%s\",\"name\":\"%s\",\"threads\":%d,\"impl\":\"%s\","
                           "\"ms_median\":%.4f,\"ms_min\":%.4f,\"ms_max\":%.4f,\"gflops\":%.2f,"
                           "\"gflops_useful\":%.2f,\"sgemm_gflops\":%.2f,\"frac_sgemm\":%.4f,"
                           "\"fma_gflops\":%.2f,\"frac_peak\":%.4f,\"fma_local_gflops\":%.2f,"
                           "\"frac_peak_local\":%.4f,\"workspace_bytes\":%zu,\"peak_rss_bytes\":%ld,\"max_err\":%s,"
                           "\"read_gbs\":%.2f,\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\","
                           "\"unit_peak_gflops\":%.2f,\"vs_f32\":%.4f}\n",
                           c->id, c->name, nt, iname, r.ms_median, r.ms_min, r.ms_max, gf, gfu, rate,
                           rate > 0 ? gfu / rate : 0, fma_gflops, peak > 0 ? gfu / peak : 0,
                           local, local > 0 ? gfu / local : 0,
                           r.workspace, r.peak_rss_kb * 1024, err,
                           read_gbs, bi.loaded, bi.kernel, bi.simd, peak,
                           typed && attn_ms > 0 ? attn_ms / r.ms_median : 0.0);
                } else {
                    char sp[16] = "";
                    if (v > 0 && attn_ms > 0 && !typed)
                        snprintf(sp, sizeof sp, "%.2fx", r.ms_median / attn_ms);
                    if (typed && attn_ms > 0)   /* how much faster than attn's fp32 */
                        snprintf(sp, sizeof sp, "%.2fx f32", attn_ms / r.ms_median);
                    printf("%-4s %-12s %-5s %9.3f %9.3f %9.3f %8.1f %8.1f %5.0f%% %5.0f%% %5.0f%% %11zu "
                           "%9.1f %9.2g %9s\n",
                           c->id, c->name, iname, r.ms_median, r.ms_min, r.ms_max, gf, gfu,
                           peak > 0 ? 100.0 * gfu / peak : 0.0,
                           local > 0 ? 100.0 * gfu / local : 0.0,
                           rate > 0 ? 100.0 * gfu / rate : 0.0, r.workspace,
                           r.peak_rss_kb / 1024.0, r.max_err, sp);
                }
                fflush(stdout);
            }
        }
        bench_env env = { .json = json, .do_naive = do_naive, .runs = runs,
                          .sgemm_gflops = rate, .read_gbs = read_gbs, .fma_gflops = fma_gflops,
                          .l3_bytes = l3, .kv_target_bytes = kv_bytes, .blas = bi.loaded,
                          .kernel = bi.kernel, .simd = bi.simd };
        /* the paged decode rows' runs, read in a random order */
        for (int ci = 0; any_decode && ci < bench_ncases; ci++) {
            if (!selected[ci] || bench_cases[ci].kind != K_DECODE)
                continue;
            size_t rb[MAX_DECODE_ROWS];
            const int nr = decode_paged_runs(&bench_cases[ci], rb, MAX_DECODE_ROWS);
            for (int i = 0; i < nr && env.nruns < BENCH_MAX_RUNS; i++) {
                int seen = rb[i] % 64 != 0;   /* (read_bandwidth_runs: whole lines) */
                for (int k = 0; k < env.nruns; k++)
                    seen |= env.run_bytes[k] == rb[i];
                if (seen)
                    continue;
                runs_job rj = { nt, bw_bytes, rb[i] };
                in_child(runs_fn, &rj, &rr);
                env.run_bytes[env.nruns] = rb[i];
                env.run_gbs[env.nruns++] = rr.ok ? rr.ms_median : 0.0;
            }
        }
        if (env.nruns > 0) {
            if (!json) {
                printf("read bandwidth over runs in a random order (the paged rows' runs: 16 "
                       "rows of a head):");
                for (int i = 0; i < env.nruns; i++)
                    printf("%s %zu B %.1f GB/s", i ? "," : "", env.run_bytes[i], env.run_gbs[i]);
                printf("\n");
            } else
                for (int i = 0; i < env.nruns; i++)
                    printf("{\"kind\":\"read_runs\",\"threads\":%d,\"run_bytes\":%zu,\"read_gbs\":%.2f}\n",
                           nt, env.run_bytes[i], env.run_gbs[i]);
        }
        for (int ci = 0; ci < bench_ncases; ci++)
            if (selected[ci] && bench_cases[ci].kind == K_PLAN)
                plan_run_case(&bench_cases[ci], nt, runs, &env);
        if (any_decode) {
            decode_print_header(&env);
            for (int ci = 0; ci < bench_ncases; ci++)
                if (selected[ci] && bench_cases[ci].kind == K_DECODE)
                    decode_run_case(&bench_cases[ci], nt, &env);
            decode_print_ratios(nt, &env);
        }
    }
    if (!json && any_decode)
        decode_print_notes();
    if (!json && any_plan)
        printf("\nP1 (plan cost): us per call, the median (and range) of the runs, each of "
               "calls/run calls after 2 warm-up runs: creating and destroying a plan, the one-shot "
               "attn_sdpa (plan, execute with its own workspace, destroy), and the execute of a "
               "plan made once (with the caller's workspace; and with NULL, attn allocating it); "
               "the target is one-shot / reused execute <= %.0f.\n", PLAN_TARGET);
    if (!json && any_dense) {
        printf("\nT cases (training): fwd is the forward with logsumexp, bwd the backward (dQ, dK, "
               "dV), counted as 2.5x the forward's useful FLOPs (T3: plus 2x the projections'); "
               "f+b/fwd is the ratio of their times; max_err: |attn - naive| over dQ, dK, dV (T1, T2; "
               "the naive path has no dropout and no layer backward).\n");
        printf("\nL1, X1, X2 (long sequences, only when named): dense is attn's dense SDPA (causal "
               "for L1, with the same visible set as an element mask for X1 and X2), up to n = 16k; "
               "GF/s counts each path's useful FLOPs (linear: 4 d^2 + 2 d * 64 a row; sparse and "
               "masked dense: 4 d per visible (i, j)); max_err: against float64 on 64 sampled "
               "rows per head.\n");
        printf("\nGF/s: on 4*B*Hq*n*m*d (S6: plus the four projections, 8*B*L*E^2); GF/s_u, "
               "%%peak and %%sgemm: on the useful FLOPs (causal and padding excluded), %%peak over "
               "the FMA peak (independent register-only FMA chains, AVX-512 or AVX2, at this thread "
               "count, measured once for the run; the header), %%local over the same peak sampled "
               "in the case's own process after each timed run (the median of the samples: "
               "this machine's speed may change for seconds at a time), %%sgemm over "
               "the same BLAS's sgemm rate; speedup: naive ms / attn "
               "ms (blas rows: their ms / attn ms); max_err: |attn - naive| over O (S6: "
               "over Y).\nattn runs on the engine ATTN_ENGINE and the CPU choose (the header "
               "says which); on the tile engine, blas rows run the same case on the BLAS "
               "engine (ATTN_ENGINE=blas).\n");
    }
    free(selected);
    return 0;
}
