/*
 * attn-bench: times attn on the benchmark cases against the naive path (full
 * score matrix, softmax, GEMM) and against the sgemm rate of the same BLAS,
 * measured in the same run with the same thread count.
 *
 *   attn-bench [--case S1 ...] [--threads N ...] [--runs R] [--quick] [--json]
 *              [--no-naive] [--bw-mib M] [--kv-mib M]
 *
 * Cases S1-S9 and T1, T1d, T2 run by default; S2n and S3n (S2 and S3
 * without their causal mask) only when named.  S6 is the whole multi-head
 * attention layer; T1 (S1's shape; T1d with dropout 0.1) and T2 (S2's,
 * causal) time the forward with logsumexp and the backward, T3 the layer's
 * training forward and backward (S6's shape).
 *
 * The decode cases (S5's decode row, D1-D3: decode.c) run only when named,
 * --case D naming them all.  Every run measures, next to the sgemm rate,
 * the machine's streaming read bandwidth at each thread count.
 *
 * Each (case, threads, impl) runs in a child process, so its peak RSS is its
 * own.  FLOPs count the attention core, 4*B*Hq*n*m*d; the useful count
 * leaves out what causality or key padding hides.
 */
#include "attn_config.h"
#include "attn.h"
#include "blas/blas.h"   /* the same internal sgemm attn uses (static library) */
#include "core/core.h"   /* attn_parallel: the region attn runs its work in */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static const bench_case cases[] = {
    { "S1", "bert-base", 8, 12, 12, 512, 512, 64, 0, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S2", "gpt2-causal", 4, 12, 12, 1024, 1024, 64, 1, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S3", "long-causal", 1, 8, 8, 4096, 4096, 64, 1, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S4", "cross", 8, 8, 8, 128, 1024, 64, 0, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S5", "decode-gqa", 1, 32, 8, 1, 4096, 128, 0, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S6", "mha-module", 8, 12, 12, 512, 512, 64, 0, 0, 1, 0, 0, 0.0, K_DENSE },
    { "S7", "tiny", 32, 8, 8, 64, 64, 32, 0, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S8", "vit", 8, 12, 12, 197, 197, 64, 0, 0, 0, 0, 0, 0.0, K_DENSE },
    { "S9", "padded", 8, 12, 12, 512, 512, 64, 0, 1, 0, 0, 0, 0.0, K_DENSE },
    /* S2 and S3 without their mask: what causality saves */
    { "S2n", "gpt2-nomask", 4, 12, 12, 1024, 1024, 64, 0, 0, 0, 1, 0, 0.0, K_DENSE },
    { "S3n", "long-nomask", 1, 8, 8, 4096, 4096, 64, 0, 0, 0, 1, 0, 0.0, K_DENSE },
    /* training: forward with logsumexp, then the backward (dQ, dK, dV) */
    { "T1", "train-bert", 8, 12, 12, 512, 512, 64, 0, 0, 0, 0, 1, 0.0, K_DENSE },
    { "T1d", "train-bert-p.1", 8, 12, 12, 512, 512, 64, 0, 0, 0, 0, 1, 0.1, K_DENSE },
    { "T2", "train-gpt2", 4, 12, 12, 1024, 1024, 64, 1, 0, 0, 0, 1, 0.0, K_DENSE },
    /* the whole layer: train_forward (saving the context), then backward */
    { "T3", "train-mha", 8, 12, 12, 512, 512, 64, 0, 0, 1, 0, 1, 0.0, K_DENSE },
    /* long sequences (only when named; --case L1 names every L1-*): linear
     * attention against dense causal SDPA, window + global tokens and
     * BigBird against dense SDPA with the same mask (long.c) */
    { "L1-1k", "linear-causal", 1, 8, 8, 1024, 1024, 64, 1, 0, 0, 1, 0, 0.0, K_LINEAR },
    { "L1-4k", "linear-causal", 1, 8, 8, 4096, 4096, 64, 1, 0, 0, 1, 0, 0.0, K_LINEAR },
    { "L1-16k", "linear-causal", 1, 8, 8, 16384, 16384, 64, 1, 0, 0, 1, 0, 0.0, K_LINEAR },
    { "L1-64k", "linear-causal", 1, 8, 8, 65536, 65536, 64, 1, 0, 0, 1, 0, 0.0, K_LINEAR },
    { "X1-4k", "longformer", 1, 8, 8, 4096, 4096, 64, 0, 0, 0, 1, 0, 0.0, K_GLOBAL },
    { "X1-16k", "longformer", 1, 8, 8, 16384, 16384, 64, 0, 0, 0, 1, 0, 0.0, K_GLOBAL },
    { "X1-64k", "longformer", 1, 8, 8, 65536, 65536, 64, 0, 0, 0, 1, 0, 0.0, K_GLOBAL },
    { "X2-4k", "bigbird", 1, 8, 8, 4096, 4096, 64, 0, 0, 0, 1, 0, 0.0, K_BIGBIRD },
    { "X2-16k", "bigbird", 1, 8, 8, 16384, 16384, 64, 0, 0, 0, 1, 0, 0.0, K_BIGBIRD },
    /* decoding (only when named; --case D names all four): one or a few
     * queries against a KV cache far larger than the L3, F32/F16/BF16
     * storage, paged and contiguous (decode.c).  The S5 entry here is the
     * decode table's S5 row; the dense S5 above stays in the default run. */
    { "S5", "decode-f32", 1, 32, 8, 1, 4096, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "D1", "decode-f16/bf16", 1, 32, 8, 1, 4096, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "D2", "decode-paged", 8, 32, 8, 1, 4096, 128, 0, 1, 0, 1, 0, 0.0, K_DECODE },
    { "D3", "decode-4q-causal", 1, 32, 8, 4, 4096, 128, 1, 0, 0, 1, 0, 0.0, K_DECODE },
    /* S5 over cache lengths, F32 and F16 (only when named: --case DL; the
     * data of docs/bench-decode.svg, benchmarks/plot-decode.py) */
    { "DL-512", "decode-len", 1, 32, 8, 1, 512, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-1k", "decode-len", 1, 32, 8, 1, 1024, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-2k", "decode-len", 1, 32, 8, 1, 2048, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-4k", "decode-len", 1, 32, 8, 1, 4096, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-8k", "decode-len", 1, 32, 8, 1, 8192, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-16k", "decode-len", 1, 32, 8, 1, 16384, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
    { "DL-32k", "decode-len", 1, 32, 8, 1, 32768, 128, 0, 0, 0, 1, 0, 0.0, K_DECODE },
};
#define NCASES (int)(sizeof cases / sizeof cases[0])


double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
float frand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

float *alloc_fill(size_t count, int fill)
{
    float *p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
    if (p && fill)
        for (size_t i = 0; i < count; i++)
            p[i] = frand();
    return p;
}

static int kv_len_of(const bench_case *c, int64_t b)
{
    return c->padded ? (int)(c->m - b * (c->m / c->B)) : (int)c->m;
}

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
            int64_t vis = kv_len_of(c, b);
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
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < c->B * c->Hq; bh++) {
        int64_t b = bh / c->Hq, h = bh % c->Hq, hk = h / g;
        const float *qb = x->q + (b * c->Hq + h) * n * d;
        const float *kb = x->k + (b * c->Hkv + hk) * m * d;
        const float *vb = x->v + (b * c->Hkv + hk) * m * d;
        attn_sgemm(1, (int)n, (int)m, (int)d, scale, qb, (int)d, kb, (int)d, 0.0f, s, (int)m);
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
        attn_sgemm(0, (int)n, (int)d, (int)m, 1.0f, s, (int)m, vb, (int)d, 0.0f,
                   x->o + (b * c->Hq + h) * n * d, (int)d);
    }
}

/* The naive path: per (b, h) the full n x m score matrix, a row softmax,
 * then P V; on attn's threads (attn_parallel) with the BLAS single-threaded
 * inside, as attn does. */
static void naive(const bench_case *c, int nthreads, const float *q, const float *k,
                  const float *v, float *o, const int32_t *kvl, float *scores)
{
    attn_blas_hooks hooks;
    attn_blas_hooks_resolve(&hooks);
    const naive_ctx ctx = { c, q, k, v, o, kvl, scores };
    attn_parallel(&hooks, nthreads, c->B * c->Hq, naive_body, (void *)&ctx);
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
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t part = 0; part < x->parts; part++) {
        int64_t r0 = x->M * part / x->parts, r1 = x->M * (part + 1) / x->parts;
        if (r1 <= r0)
            continue;
        attn_sgemm(1, (int)(r1 - r0), (int)x->N, (int)x->K, 1.0f, x->A + r0 * x->K, (int)x->K,
                   x->W, (int)x->K, 0.0f, x->C + r0 * x->N, (int)x->N);
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < x->N; j++)
                x->C[r * x->N + j] += x->bias[j];
    }
}

static void par_linear(int nthreads, int64_t M, int64_t N, int64_t K, const float *A,
                       const float *W, const float *bias, float *C)
{
    attn_blas_hooks hooks;
    attn_blas_hooks_resolve(&hooks);
    const linear_ctx ctx = { M, N, K, nthreads, A, W, bias, C };
    attn_parallel(&hooks, nthreads, nthreads, linear_body, (void *)&ctx);
}

/* S6: the whole nn.MultiheadAttention-style layer, self-attention with a
 * packed in_proj and biases.  The naive path projects, reshapes Q, K, V to
 * [B][H][S][d], runs the naive attention, reshapes back and projects. */
/* The S6/T3 layer: packed self-attention with biases, weights ~
 * U(-1/sqrt(E), 1/sqrt(E)) as nn.Linear initializes them, X and the
 * weights filled.  NULL (with res->error set) on failure. */
typedef struct mha_layer {
    float *x, *inw, *inb, *ow, *ob;
    attn_mha_plan *plan;
} mha_layer;

static int mha_layer_make(const bench_case *c, int nthreads, mha_layer *m, result *res)
{
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
    attn_mha_desc desc;
    attn_mha_desc_init(&desc);
    desc.embed_dim = E;
    desc.num_heads = c->Hq;
    desc.batch = c->B;
    desc.q_len = desc.kv_len = c->n;
    desc.self_attention = 1;
    desc.packed_in_proj = 1;
    desc.threads = nthreads;
    m->plan = NULL;
    attn_status st = attn_mha_plan_create(&m->plan, &desc);
    if (st != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
        return -1;
    }
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
    if (!y || !yref) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    attn_mha_weights w = { .in_proj_weight = inw, .in_proj_bias = inb, .out_weight = ow, .out_bias = ob };
    attn_mha_args a = { .x = x, .out = y };
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
    if (!ws || !kvl || !qkv || !qh || !kh || !vh || !oh || !o2 || !scores) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    bench_case core = *c;
    core.mha = 0;

    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: timed runs of impl; pass 1: the other impl once, for the error */
        int which = pass == 0 ? impl : 1 - impl;
        int reps = pass == 0 ? runs : 1;
        for (int r = pass == 0 ? -2 : 0; r < reps; r++) {
            double t0 = now_ms();
            if (which == 0) {
                st = attn_mha_execute(plan, &w, &a, ws, res->workspace);
            } else {
                par_linear(nthreads, BL, 3 * E, E, x, inw, inb, qkv);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t i = 0; i < L; i++) {
                            const float *row = qkv + (b * L + i) * 3 * E + h * d;
                            size_t dst = (size_t)(((b * H + h) * L + i) * d);
                            memcpy(qh + dst, row, (size_t)d * sizeof(float));
                            memcpy(kh + dst, row + E, (size_t)d * sizeof(float));
                            memcpy(vh + dst, row + 2 * E, (size_t)d * sizeof(float));
                        }
                naive(&core, nthreads, qh, kh, vh, oh, kvl, scores);
                for (int64_t b = 0; b < B; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t i = 0; i < L; i++)
                            memcpy(o2 + (b * L + i) * E + h * d, oh + ((b * H + h) * L + i) * d,
                                   (size_t)d * sizeof(float));
                par_linear(nthreads, BL, E, E, o2, ow, ob, pass == 0 ? y : yref);
            }
            double t1 = now_ms();
            if (st != ATTN_OK) {
                snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
                return;
            }
            if (pass == 0 && r >= 0) {
                t[r] = t1 - t0;
                peak_sample();
            }
        }
        if (pass == 0) {
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            res->peak_rss_kb = ru.ru_maxrss;
            /* naive timed: keep its output in yref and let attn write y */
            if (impl == 1)
                memcpy(yref, y, (size_t)(BL * E) * sizeof(float));
        }
    }
    /* attn's output is in y, the naive one in yref */
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    res->ms_min = t[0];
    res->ms_max = t[runs - 1];
    res->ms_median = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
    if (impl == 1)
        res->workspace = (size_t)(BL * 3 * E + 4 * BL * E) * sizeof(float) +
                         (size_t)nthreads * (size_t)(L * L) * sizeof(float);
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
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t bk = 0; bk < c->B * c->Hkv; bk++) {
        const int64_t b = bk / c->Hkv, hk = bk % c->Hkv;
        const float *kb = x->k + bk * m * d, *vb = x->v + bk * m * d;
        float *dkb = x->dk + bk * m * d, *dvb = x->dv + bk * m * d;
        for (int64_t hh = 0; hh < g; hh++) {
            const int64_t bh = b * c->Hq + hk * g + hh;
            const float *qb = x->q + bh * n * d, *ob = x->o + bh * n * d, *dob = x->d_o + bh * n * d;
            attn_sgemm(1, (int)n, (int)m, (int)d, scale, qb, (int)d, kb, (int)d, 0.0f, s, (int)m);
            attn_sgemm(1, (int)n, (int)m, (int)d, 1.0f, dob, (int)d, vb, (int)d, 0.0f, dp, (int)m);
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
            attn_sgemm_tn((int)m, (int)d, (int)n, 1.0f, s, (int)m, dob, (int)d, beta, dvb, (int)d);
            attn_sgemm(0, (int)n, (int)d, (int)m, scale, dp, (int)m, kb, (int)d, 0.0f,
                       x->dq + bh * n * d, (int)d);
            attn_sgemm_tn((int)m, (int)d, (int)n, scale, dp, (int)m, qb, (int)d, beta, dkb, (int)d);
        }
    }
}

/* A training case's times (forward, backward, both; runs each) into res:
 * the medians of each, and the range of both. */
double median_sorted(double *t, int runs)
{
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    return runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);
}

static void train_times(result *res, double *tf, double *tb, double *tt, int runs)
{
    res->ms_fwd = median_sorted(tf, runs);
    res->ms_bwd = median_sorted(tb, runs);
    res->ms_median = median_sorted(tt, runs);
    res->ms_min = tt[0];
    res->ms_max = tt[runs - 1];
}

/* T3: the MHA layer's training forward and backward (attn only: the naive
 * path has no layer backward; compare-torch.py adds PyTorch's autograd). */
static void run_mha_train_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    if (impl != 0) {
        snprintf(res->error, sizeof res->error, "no naive layer backward (see compare-torch.py)");
        return;
    }
    const int64_t E = c->Hq * c->d, BL = c->B * c->n;
    mha_layer ml;
    if (mha_layer_make(c, nthreads, &ml, res))
        return;
    float *x = ml.x, *inw = ml.inw, *inb = ml.inb, *ow = ml.ow, *ob = ml.ob;
    attn_mha_plan *plan = ml.plan;
    float *y = alloc_fill((size_t)(BL * E), 0);
    float *dy = alloc_fill((size_t)(BL * E), 1), *dx = alloc_fill((size_t)(BL * E), 0);
    float *dinw = alloc_fill((size_t)(3 * E * E), 0), *dinb = alloc_fill((size_t)(3 * E), 0);
    float *dow = alloc_fill((size_t)(E * E), 0), *dob = alloc_fill((size_t)E, 0);
    if (!y || !dy || !dx || !dinw || !dinb || !dow || !dob) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    attn_status st = ATTN_OK;
    size_t wf = 0, wb = 0, cx = 0;
    if ((st = attn_mha_workspace_size(plan, &wf)) == ATTN_OK &&
        (st = attn_mha_bwd_workspace_size(plan, &wb)) == ATTN_OK)
        st = attn_mha_context_size(plan, &cx);
    if (st != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
        return;
    }
    /* workspace: the larger of the two calls' plus the saved context */
    res->workspace = (wf > wb ? wf : wb) + cx;
    void *ws = aligned_alloc(64, (wf > wb ? wf : wb) + 64), *ctx = aligned_alloc(64, cx + 64);
    attn_mha_weights w = { .in_proj_weight = inw, .in_proj_bias = inb, .out_weight = ow,
                           .out_bias = ob };
    attn_mha_args a = { .x = x, .out = y };
    attn_mha_grads g = { .dx = dx, .d_in_proj_weight = dinw, .d_in_proj_bias = dinb,
                         .d_out_weight = dow, .d_out_bias = dob };
    double *tf = malloc(sizeof(double) * (size_t)runs), *tb = malloc(sizeof(double) * (size_t)runs);
    double *tt = malloc(sizeof(double) * (size_t)runs);
    if (!ws || !ctx || !tf || !tb || !tt) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    for (int r = -2; r < runs; r++) {
        double t0 = now_ms();
        st = attn_mha_train_execute(plan, &w, &a, ctx, cx, ws, wf);
        double t1 = now_ms();
        if (st == ATTN_OK)
            st = attn_mha_bwd_execute(plan, &w, &a, dy, ctx, cx, &g, 0, ws, wb);
        double t2 = now_ms();
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
            return;
        }
        if (r >= 0) {
            tf[r] = t1 - t0;
            tb[r] = t2 - t1;
            tt[r] = t2 - t0;
            peak_sample();
        }
    }
    train_times(res, tf, tb, tt, runs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    res->peak_rss_kb = ru.ru_maxrss;
    res->max_err = NAN;
    res->ok = 1;
}

/* A training case in the child: impl 0 = attn (forward with logsumexp,
 * then backward), 1 = the naive forward and backward.  ms_fwd and ms_bwd
 * are the medians of each half, ms_median of their sum. */
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
        !scores) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    for (int64_t b = 0; b < B; b++)
        kvl[b] = kv_len_of(c, b);
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
    attn_sdpa_plan *fp = NULL;
    attn_sdpa_bwd_plan *bp = NULL;
    attn_status st = attn_sdpa_plan_create(&fp, f);
    if (st == ATTN_OK)
        st = attn_sdpa_bwd_plan_create(&bp, &bd);
    if (st != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
        return;
    }
    size_t wf = 0, wb = 0;
    attn_sdpa_workspace_size(fp, &wf);
    attn_sdpa_bwd_workspace_size(bp, &wb);
    res->workspace = impl == 0 ? (wf > wb ? wf : wb)
                               : (size_t)nthreads * 2 * (size_t)(n * m) * sizeof(float);
    void *ws = impl == 0 ? aligned_alloc(64, res->workspace) : NULL;
    attn_blas_hooks hooks;
    attn_blas_hooks_resolve(&hooks);
    const naive_bwd_ctx nb = { c, q, k, v, o, d_o, dq, dk, dv, kvl, scores };
    double *tf = malloc(sizeof(double) * (size_t)runs), *tb = malloc(sizeof(double) * (size_t)runs);
    double *tt = malloc(sizeof(double) * (size_t)runs);
    for (int r = -2; r < runs; r++) {
        double t0 = now_ms();
        if (impl == 0)
            st = attn_sdpa_execute(fp, &fa, ws, wf);
        else
            naive(c, nthreads, q, k, v, o, kvl, scores);
        double t1 = now_ms();
        if (impl == 0 && st == ATTN_OK)
            st = attn_sdpa_bwd_execute(bp, &ba, ws, wb);
        else if (impl == 1)
            attn_parallel(&hooks, nthreads, B * Hkv, naive_bwd_body, (void *)&nb);
        double t2 = now_ms();
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
            return;
        }
        if (r >= 0) {
            tf[r] = t1 - t0;
            tb[r] = t2 - t1;
            tt[r] = t2 - t0;
            peak_sample();
        }
    }
    train_times(res, tf, tb, tt, runs);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    res->peak_rss_kb = ru.ru_maxrss;

    /* Error of the gradients against the other path (without dropout). */
    res->max_err = NAN;
    if (c->dropout == 0.0) {
        memcpy(rq, dq, nq * sizeof(float));
        memcpy(rk, dk, nk * sizeof(float));
        memcpy(rv, dv, nk * sizeof(float));
        if (impl == 0) {
            naive(c, nthreads, q, k, v, o, kvl, scores);
            attn_parallel(&hooks, nthreads, B * Hkv, naive_bwd_body, (void *)&nb);
        } else {
            attn_sdpa_execute(fp, &fa, NULL, 0);
            attn_sdpa_bwd_execute(bp, &ba, NULL, 0);
        }
        double e = 0;
        for (size_t i = 0; i < nq; i++)
            e = fmax(e, fabs((double)dq[i] - rq[i]));
        for (size_t i = 0; i < nk; i++)
            e = fmax(e, fmax(fabs((double)dk[i] - rk[i]), fabs((double)dv[i] - rv[i])));
        res->max_err = e;
    }
    res->ok = 1;
}

/* Runs in the child: impl 0 = attn, 1 = naive. */
static void run_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    if (c->kind != K_DENSE) {
        run_long_case(c, impl, nthreads, runs, res);
        return;
    }
    if (c->mha && c->train) {
        run_mha_train_case(c, impl, nthreads, runs, res);
        return;
    }
    if (c->mha) {
        run_mha_case(c, impl, nthreads, runs, res);
        return;
    }
    if (c->train) {
        run_train_case(c, impl, nthreads, runs, res);
        return;
    }
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, d = c->d;
    size_t nq = (size_t)(B * Hq * n * d), nk = (size_t)(B * Hkv * m * d);
    float *q = alloc_fill(nq, 1), *k = alloc_fill(nk, 1), *v = alloc_fill(nk, 1);
    float *o = alloc_fill(nq, 0), *oref = alloc_fill(nq, 0);
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)B);
    if (!q || !k || !v || !o || !oref || !kvl) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    for (int64_t b = 0; b < B; b++)
        kvl[b] = kv_len_of(c, b);

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

    float *scores = NULL;
    attn_sdpa_plan *plan = NULL;
    void *ws = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, &desc);
    if (st != ATTN_OK) {
        snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
        return;
    }
    attn_sdpa_workspace_size(plan, &res->workspace);
    if (impl == 0) {
        ws = aligned_alloc(64, res->workspace);
    } else {
        res->workspace = (size_t)nthreads * (size_t)(n * m) * sizeof(float);
        scores = alloc_fill((size_t)nthreads * (size_t)(n * m), 0);
        if (!scores) {
            snprintf(res->error, sizeof res->error, "out of memory");
            return;
        }
    }

    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int r = -2; r < runs; r++) {
        double t0 = now_ms();
        if (impl == 0)
            st = attn_sdpa_execute(plan, &args, ws, res->workspace);
        else
            naive(c, nthreads, q, k, v, o, kvl, scores);
        double t1 = now_ms();
        if (st != ATTN_OK) {
            snprintf(res->error, sizeof res->error, "%s", attn_status_str(st));
            return;
        }
        if (r >= 0) {
            t[r] = t1 - t0;
            peak_sample();
        }
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    res->ms_min = t[0];
    res->ms_max = t[runs - 1];
    res->ms_median = runs % 2 ? t[runs / 2] : 0.5 * (t[runs / 2 - 1] + t[runs / 2]);

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    res->peak_rss_kb = ru.ru_maxrss;

    /* Error against the other path, computed after the timing (and after
     * the RSS reading) so it does not count in either. */
    if (impl == 0) {
        if (!scores)
            scores = alloc_fill((size_t)nthreads * (size_t)(n * m), 0);
        if (scores)
            naive(c, nthreads, q, k, v, oref, kvl, scores);
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

/* sgemm rate of this BLAS at this thread count: every thread multiplies its
 * own 1024^3 matrices, as attn's work items each call a single-threaded
 * sgemm. */
typedef struct rate_ctx {
    int N, count;
    const float *a, *b;
    float *c;
} rate_ctx;

static void rate_body(void *arg, int tid)
{
    const rate_ctx *x = arg;
    (void)tid;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int i = 0; i < x->count; i++) {
        size_t off = (size_t)i * (size_t)x->N * (size_t)x->N;
        attn_sgemm(0, x->N, x->N, x->N, 1.0f, x->a + off, x->N, x->b + off, x->N, 0.0f,
                   x->c + off, x->N);
    }
}

static double sgemm_rate(int nthreads)
{
    const int N = 1024, reps = 24;
    float *a = alloc_fill((size_t)N * N * nthreads, 1), *b = alloc_fill((size_t)N * N * nthreads, 1);
    float *c = alloc_fill((size_t)N * N * nthreads, 0);
    if (!a || !b || !c)
        return 0;
    double best = 0;
    attn_blas_hooks hooks;
    attn_blas_hooks_resolve(&hooks);
    const rate_ctx ctx = { N, nthreads, a, b, c };
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_ms();
        attn_parallel(&hooks, nthreads, nthreads, rate_body, (void *)&ctx);
        double dt = now_ms() - t0;
        double gf = 2.0 * N * N * N * nthreads / (dt * 1e6);
        if (rep > 0 && gf > best)
            best = gf;
    }
    return best;
}

/* The last-level cache's size: sysconf, else /sys, else 0. */
static size_t l3_size(void)
{
    long v = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (v > 0)
        return (size_t)v;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    if (!f)
        return 0;
    unsigned long x = 0;
    char unit = 0;
    int got = fscanf(f, "%lu%c", &x, &unit);
    fclose(f);
    if (got < 1)
        return 0;
    return (size_t)x * (unit == 'K' ? 1024u : unit == 'M' ? 1048576u : 1u);
}

/* Streaming read bandwidth: every thread sums its own contiguous part of a
 * buffer far larger than the L3, with the widest loads the CPU has (an
 * AVX-512 or AVX2 loop chosen at run time, 4 independent accumulators; a
 * plain loop of 32 float accumulators otherwise), so that the figure is the
 * memory's limit and not that of the loop reading it. */
typedef struct bw_ctx {
    const float *buf;
    size_t count;     /* floats, a multiple of 64 * parts */
    int parts;
    int isa;          /* 2 AVX-512, 1 AVX2, 0 plain C */
    float *sums;      /* one per part, so the sums are not optimized away */
} bw_ctx;

#if ATTN_HAVE_X86_KERNELS
#include <immintrin.h>
__attribute__((target("avx512f"))) static float bw_sum_avx512(const float *p, size_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) static float bw_sum_avx2(const float *p, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

static float bw_sum_c(const float *p, size_t n)
{
    float acc[32] = { 0 };
    for (size_t i = 0; i < n; i += 32)
        for (int k = 0; k < 32; k++)
            acc[k] += p[i + k];
    float s = 0;
    for (int k = 0; k < 32; k++)
        s += acc[k];
    return s;
}

static void bw_body(void *arg, int tid)
{
    const bw_ctx *x = arg;
    (void)tid;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int part = 0; part < x->parts; part++) {
        const size_t per = x->count / (size_t)x->parts;
        const float *p = x->buf + per * (size_t)part;
#if ATTN_HAVE_X86_KERNELS
        if (x->isa == 2)
            x->sums[part] = bw_sum_avx512(p, per);
        else if (x->isa == 1)
            x->sums[part] = bw_sum_avx2(p, per);
        else
#endif
            x->sums[part] = bw_sum_c(p, per);
    }
}

/* The FMA peak: every thread runs independent chains of fused
 * multiply-adds on registers (12 vectors, more than the FMA latency x the
 * FMA ports), the widest the CPU has; GFLOP/s of the best of a few passes. */
#if ATTN_HAVE_X86_KERNELS
__attribute__((target("avx512f"))) static float fma_loop_avx512(long iters)
{
    __m512 a[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++)
        a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = _mm512_fmadd_ps(a[k], x, y);
    for (int k = 1; k < 12; k++)
        a[0] = _mm512_add_ps(a[0], a[k]);
    return _mm512_reduce_add_ps(a[0]);
}

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iters)
{
    __m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++)
        a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = _mm256_fmadd_ps(a[k], x, y);
    for (int k = 1; k < 12; k++)
        a[0] = _mm256_add_ps(a[0], a[k]);
    float t[8];
    _mm256_storeu_ps(t, a[0]);
    return t[0] + t[7];
}
#endif

typedef struct fma_ctx {
    long iters;
    int isa;       /* lanes per FMA: 16, 8, or 0 when neither kernel runs */
    float *sums;
} fma_ctx;

static void fma_body(void *arg, int tid)
{
    const fma_ctx *x = arg;
#if ATTN_HAVE_X86_KERNELS
    x->sums[tid] = x->isa == 16 ? fma_loop_avx512(x->iters) : fma_loop_avx2(x->iters);
#else
    (void)x;
    (void)tid;
#endif
}

/* The best rate (work / 1e6 per ms: GFLOP/s for flops, GB/s for bytes) of
 * `passes` passes of body on nthreads threads, the first left out when
 * skip_first; the per-thread sums body writes are read afterwards, so its
 * work cannot be optimized away. */
static double best_rate(int nthreads, void (*body)(void *, int), void *ctx, double work,
                        int skip_first, const float *sums, int passes)
{
    attn_blas_hooks hooks;
    attn_blas_hooks_resolve(&hooks);
    double best = 0;
    for (int pass = 0; pass < passes; pass++) {
        const double t0 = now_ms();
        attn_parallel(&hooks, nthreads, nthreads, body, ctx);
        const double rate = work / ((now_ms() - t0) * 1e6);
        if ((pass > 0 || !skip_first) && rate > best)
            best = rate;
    }
    volatile float sink = 0;
    for (int t = 0; t < nthreads; t++)
        sink += sums[t];
    (void)sink;
    return best;
}

static double fma_peak_iters(int nthreads, long iters, int passes)
{
    int lanes = 0;
#if ATTN_HAVE_X86_KERNELS
    lanes = __builtin_cpu_supports("avx512f") ? 16
          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8 : 0;
#endif
    float sums[64];
    if (!lanes || nthreads > 64)
        return 0;
    const fma_ctx ctx = { iters, lanes, sums };
    return best_rate(nthreads, fma_body, (void *)&ctx,
                     2.0 * 12 * lanes * (double)ctx.iters * nthreads, 0, sums, passes);
}

static double fma_peak(int nthreads)
{
    return fma_peak_iters(nthreads, 20L * 1000 * 1000, 4);
}

/* The FMA peak sampled during a case, in its own process: one short pass
 * (about 2 ms) after each of its timed runs; the case's local peak is the
 * median of these.  The VMs this runs on change speed for seconds at a
 * time, so a case is also reported against the peak of the moments it ran
 * in. */
enum { MAX_SAMPLES = 1024 };
static int sample_threads;   /* 0: not sampling */
static double samples[MAX_SAMPLES];
static int nsamples;

void peak_sample(void)
{
    if (sample_threads > 0 && nsamples < MAX_SAMPLES)
        samples[nsamples++] = fma_peak_iters(sample_threads, 1000L * 1000, 1);
}

/* GB/s (1e9 bytes) of the best of a few passes over `bytes`. */
static double read_bandwidth(int nthreads, size_t bytes)
{
    const size_t unit = 64 * sizeof(float) * (size_t)nthreads;
    bytes = bytes / unit * unit;
    float *buf = aligned_alloc(64, bytes), sums[64];
    if (!buf || nthreads > 64)
        return 0;
    /* written, so that every page is really there (an untouched page reads
     * as the shared zero page, from the cache) */
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        buf[i] = (float)(i & 7);
    int isa = 0;
#if ATTN_HAVE_X86_KERNELS
    isa = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    const bw_ctx ctx = { buf, bytes / sizeof(float), nthreads, isa, sums };
    /* the first pass warms the threads and the TLB */
    const double best = best_rate(nthreads, bw_body, (void *)&ctx, (double)bytes, 1, sums, 4);
    free(buf);
    return best;
}

/* fork, run fn in the child, return its result through a pipe. */
int in_child(void (*fn)(void *, result *), void *ctx, result *res)
{
    int fd[2];
    memset(res, 0, sizeof *res);
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        result r;
        memset(&r, 0, sizeof r);
        fn(ctx, &r);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], res, sizeof *res);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof *res) {
        memset(res, 0, sizeof *res);
        snprintf(res->error, sizeof res->error, "child failed (status %d)", status);
        return -1;
    }
    return 0;
}

typedef struct job { const bench_case *c; int impl, threads, runs; } job;
static void job_fn(void *ctx, result *r)
{
    job *j = ctx;
    sample_threads = j->threads;
    nsamples = 0;
    run_case(j->c, j->impl, j->threads, j->runs, r);
    sample_threads = 0;
    if (nsamples > 0) {
        qsort(samples, (size_t)nsamples, sizeof samples[0], cmp_double);
        r->fma_local = median_sorted(samples, nsamples);
    }
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
typedef struct bw_job { int threads; size_t bytes; } bw_job;
static void bw_fn(void *ctx, result *r)
{
    const bw_job *j = ctx;
    r->ms_median = read_bandwidth(j->threads, j->bytes);
    r->ok = r->ms_median > 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: attn-bench [--case S1 ...] [--threads N ...] [--runs R] [--quick] "
                    "[--json] [--no-naive] [--bw-mib M] [--kv-mib M]\n"
                    "  --case D names the decode cases S5, D1, D2, D3 (only run when named);\n"
                    "            --case DL the decode sweep over cache lengths (S5, 512 ... 32k)\n"
                    "  --bw-mib: buffer of the read-bandwidth measurement (default 16 x L3,\n"
                    "            at least 1 GiB and at most 2 GiB)\n"
                    "  --kv-mib: K/V copies of each decode case (default 4 x L3, at least 256)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *want[NCASES];
    int nwant = 0, threads[8], nthreads = 0, runs = 10, json = 0, do_naive = 1, quick = 0;
    long bw_mib = 0, kv_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--case") && i + 1 < argc && nwant < NCASES) want[nwant++] = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc && nthreads < 8) threads[nthreads++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--no-naive")) do_naive = 0;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--bw-mib") && i + 1 < argc) bw_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--kv-mib") && i + 1 < argc) kv_mib = atol(argv[++i]);
        else usage();
    }
    if (runs < 1)
        usage();
    if (quick && !nwant)
        want[nwant++] = "S8";
    if (!nthreads) {
        threads[nthreads++] = 1;
        if (!quick)
            threads[nthreads++] = 2;
    }
    for (int t = 0; t < nthreads; t++)
        if (threads[t] < 1)
            usage();

    attn_blas_info bi;
    attn_blas_query(&bi);
    /* The engine "attn" rows run on (ATTN_ENGINE and the CPU); on the tile
     * engine every case also runs on the BLAS engine ("blas" rows). */
    attn_engine eng = ATTN_ENGINE_BLAS;
    attn_engine_resolve(ATTN_ENGINE_AUTO, &eng);
    const int tile_default = eng == ATTN_ENGINE_TILE;
    const char *env_engine = getenv("ATTN_ENGINE");
    if (!json) {
        printf("attn %s | BLAS %s (loaded: %s, %s) | kernel %s | BLAS threading %d | attn SIMD %s"
               " | engine %s\n",
               attn_version(), bi.backend, bi.loaded, bi.library[0] ? bi.library : "static",
               bi.kernel[0] ? bi.kernel : "-", (int)bi.threading, bi.simd,
               tile_default ? "tile" : "blas");
        const char *ct = getenv("OPENBLAS_CORETYPE");
        printf("OPENBLAS_CORETYPE=%s  runs=%d (after 2 warm-up)\n", ct ? ct : "(unset)", runs);
    }

    /* which cases run: by default every case not marked extra; --case ID
     * names one (L1 names every L1-*, D the decode cases S5, D1-D3, DL
     * every DL-*) */
    int selected[NCASES], any_dense = 0, any_decode = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        const bench_case *c = &cases[ci];
        int sel = !nwant && !c->extra;
        for (int w = 0; w < nwant; w++) {
            const size_t wl = strlen(want[w]);
            sel |= !strcmp(want[w], c->id) || (!strncmp(want[w], c->id, wl) && c->id[wl] == '-') ||
                   (c->kind == K_DECODE && !strcmp(want[w], "D") && strncmp(c->id, "DL", 2));
        }
        selected[ci] = sel;
        any_dense |= sel && c->kind != K_DECODE;
        any_decode |= sel && c->kind == K_DECODE;
    }

    /* The read bandwidth's buffer: 16 x L3, at least 1 GiB, at most 2 GiB
     * (the machine is shared; --bw-mib sets it); the decode cases' K/V
     * copies: 4 x L3, at least 256 MiB (--kv-mib sets it). */
    const size_t l3 = l3_size(), MiB = (size_t)1 << 20;
    size_t bw_bytes = 16 * l3;
    if (bw_bytes < 1024 * MiB)
        bw_bytes = 1024 * MiB;
    if (bw_bytes > 2048 * MiB)
        bw_bytes = 2048 * MiB;
    if (bw_mib > 0)
        bw_bytes = (size_t)bw_mib * MiB;
    size_t kv_bytes = 4 * l3 > 256 * MiB ? 4 * l3 : 256 * MiB;
    if (kv_mib > 0)
        kv_bytes = (size_t)kv_mib * MiB;
    if (!json)
        printf("L3 %.1f MiB (%s); read bandwidth over %.0f MiB%s\n", l3 / (double)MiB,
               l3 ? "sysconf or /sys" : "unknown", bw_bytes / (double)MiB,
               any_decode ? "" : "; no decode case named");
    if (!json && any_decode)
        printf("decode cases: K/V copies of at least %.0f MiB per case, a different copy each "
               "call\n", kv_bytes / (double)MiB);

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
        if (!json)
            printf("\n-- %d thread%s: FMA peak %.1f GFLOP/s | sgemm 1024^3 per thread, same BLAS: "
                   "%.1f GFLOP/s | read bandwidth: %.1f GB/s\n", nt, nt > 1 ? "s" : "", fma_gflops,
                   rate, read_gbs);
        else
            printf("{\"machine\":1,\"threads\":%d,\"sgemm_gflops\":%.2f,\"read_gbs\":%.2f,"
                   "\"fma_gflops\":%.2f,\"read_buffer_bytes\":%zu,\"l3_bytes\":%zu,"
                   "\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\"}\n",
                   nt, rate, read_gbs, fma_gflops, bw_bytes, l3, bi.loaded, bi.kernel, bi.simd);
        if (!json && any_dense)
            printf("%-4s %-12s %-5s %9s %9s %9s %8s %8s %6s %6s %6s %11s %9s %9s %7s\n", "case",
                   "name", "impl", "ms(med)", "ms(min)", "ms(max)", "GF/s", "GF/s_u", "%peak",
                   "%local", "%sgemm", "workspace", "RSS MiB", "max_err", "speedup");
        for (int ci = 0; ci < NCASES; ci++) {
            const bench_case *c = &cases[ci];
            if (!selected[ci] || c->kind == K_DECODE)
                continue;
            double full = 4.0 * c->B * c->Hq * c->n * c->m * c->d + proj_flops(c);
            double useful = c->kind == K_DENSE ? useful_flops(c) : long_useful_flops(c, 0);
            double attn_ms = 0;
            /* the naive path has no dropout and no layer backward */
            const int naive_too = do_naive && !(c->train && (c->mha || c->dropout > 0));
            /* Rows: attn on its default engine; when that is the tile
             * engine, attn again on the BLAS engine (ATTN_ENGINE=blas in
             * the child); the other path. */
            int vimpl[3], nv = 0, vblas[3];
            vimpl[nv] = 0, vblas[nv++] = 0;
            if (tile_default)
                vimpl[nv] = 0, vblas[nv++] = 1;
            if (naive_too)
                vimpl[nv] = 1, vblas[nv++] = 0;
            for (int v = 0; v < nv; v++) {
                const int impl = vimpl[v];
                job j = { c, impl, nt, quick ? 5 : runs };
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
                                  : !impl ? "attn" : c->kind == K_DENSE ? "naive" : long_other_name(c);
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
                    if (v == 0)
                        attn_ms = r.ms_median;
                    char err[32] = "null";   /* JSON has no NaN */
                    if (r.max_err == r.max_err)
                        snprintf(err, sizeof err, "%.3g", r.max_err);
                    for (int k = 0; k < 3; k++) {
                        double gfu = fl[k] / (ms[k] * 1e6);
                        if (json) {
                            printf("{\"case\":\"%s\",\"name\":\"%s\",\"threads\":%d,"
                                   "\"impl\":\"%s\",\"part\":\"%s\",\"ms_median\":%.4f,"
                                   "\"gflops_useful\":%.2f,\"sgemm_gflops\":%.2f,"
                                   "\"frac_sgemm\":%.4f,\"fma_gflops\":%.2f,\"frac_peak\":%.4f,"
                                   "\"fma_local_gflops\":%.2f,\"frac_peak_local\":%.4f,"
                                   "\"workspace_bytes\":%zu,"
                                   "\"peak_rss_bytes\":%ld,\"max_err\":%s,\"read_gbs\":%.2f,"
                                   "\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\"}\n",
                                   c->id, c->name, nt, iname, part[k], ms[k], gfu, rate,
                                   rate > 0 ? gfu / rate : 0, fma_gflops, fma_gflops > 0 ? gfu / fma_gflops : 0,
                                   r.fma_local, r.fma_local > 0 ? gfu / r.fma_local : 0,
                                   r.workspace, r.peak_rss_kb * 1024,
                                   err, read_gbs, bi.loaded, bi.kernel, bi.simd);
                            continue;
                        }
                        char sp[24] = "";
                        if (k == 2)
                            snprintf(sp, sizeof sp, "%.2fx fwd", r.ms_median / r.ms_fwd);
                        if (k == 2 && v > 0 && attn_ms > 0)
                            snprintf(sp, sizeof sp, "%.2fx", r.ms_median / attn_ms);
                        char nm[24];
                        snprintf(nm, sizeof nm, "%s %s", iname, part[k]);
                        printf("%-4s %-12s %-9s %9.3f %9s %9s %8s %8.1f %5.0f%% %5.0f%% %5.0f%% %11zu "
                               "%9.1f %9.2g %7s\n",
                               c->id, c->name, nm, ms[k], "", "", "", gfu,
                               fma_gflops > 0 ? 100.0 * gfu / fma_gflops : 0.0,
                               r.fma_local > 0 ? 100.0 * gfu / r.fma_local : 0.0,
                               rate > 0 ? 100.0 * gfu / rate : 0.0, r.workspace,
                               r.peak_rss_kb / 1024.0, k == 2 ? r.max_err : NAN, sp);
                    }
                    fflush(stdout);
                    continue;
                }
                double gf = full / (r.ms_median * 1e6), gfu = useful / (r.ms_median * 1e6);
                if (v == 0)
                    attn_ms = r.ms_median;
                if (json) {
                    char err[32] = "null";   /* JSON has no NaN */
                    if (r.max_err == r.max_err)
                        snprintf(err, sizeof err, "%.3g", r.max_err);
                    printf("{\"case\":\"%s\",\"name\":\"%s\",\"threads\":%d,\"impl\":\"%s\","
                           "\"ms_median\":%.4f,\"ms_min\":%.4f,\"ms_max\":%.4f,\"gflops\":%.2f,"
                           "\"gflops_useful\":%.2f,\"sgemm_gflops\":%.2f,\"frac_sgemm\":%.4f,"
                           "\"fma_gflops\":%.2f,\"frac_peak\":%.4f,\"fma_local_gflops\":%.2f,"
                           "\"frac_peak_local\":%.4f,\"workspace_bytes\":%zu,\"peak_rss_bytes\":%ld,\"max_err\":%s,"
                           "\"read_gbs\":%.2f,\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\"}\n",
                           c->id, c->name, nt, iname, r.ms_median, r.ms_min, r.ms_max, gf, gfu, rate,
                           rate > 0 ? gfu / rate : 0, fma_gflops, fma_gflops > 0 ? gfu / fma_gflops : 0,
                           r.fma_local, r.fma_local > 0 ? gfu / r.fma_local : 0,
                           r.workspace, r.peak_rss_kb * 1024, err,
                           read_gbs, bi.loaded, bi.kernel, bi.simd);
                } else {
                    char sp[16] = "";
                    if (v > 0 && attn_ms > 0)
                        snprintf(sp, sizeof sp, "%.2fx", r.ms_median / attn_ms);
                    printf("%-4s %-12s %-5s %9.3f %9.3f %9.3f %8.1f %8.1f %5.0f%% %5.0f%% %5.0f%% %11zu "
                           "%9.1f %9.2g %7s\n",
                           c->id, c->name, iname, r.ms_median, r.ms_min, r.ms_max, gf, gfu,
                           fma_gflops > 0 ? 100.0 * gfu / fma_gflops : 0.0,
                           r.fma_local > 0 ? 100.0 * gfu / r.fma_local : 0.0,
                           rate > 0 ? 100.0 * gfu / rate : 0.0, r.workspace,
                           r.peak_rss_kb / 1024.0, r.max_err, sp);
                }
                fflush(stdout);
            }
        }
        if (any_decode) {
            const bench_env env = { json, do_naive, runs, rate, read_gbs, fma_gflops, l3,
                                    kv_bytes, bi.loaded, bi.kernel, bi.simd };
            decode_print_header(&env);
            for (int ci = 0; ci < NCASES; ci++)
                if (selected[ci] && cases[ci].kind == K_DECODE)
                    run_decode_case(&cases[ci], nt, &env);
            decode_print_ratios(nt, &env);
        }
    }
    if (!json && any_decode)
        decode_print_notes();
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
    return 0;
}
