/*
 * gpt.c -- the small GPT of examples/tinygpt (gpt.h): training forward and
 * backward, AdamW, inference, generation through the paged F16 KV cache,
 * checkpoints.
 *
 * Thread counts never change a result: the per-row loops (LayerNorm,
 * GELU, the cross-entropy) split rows over OpenMP threads, every sum
 * across rows (the LayerNorm gains' gradients, the loss) runs in row
 * order on one thread, attn's calls are thread-count independent, and the
 * projections run in fixed blocks of rows, each a single-threaded
 * cblas_sgemm (gemm below).  The tinygpt-threads test checks it: the
 * checkpoints of runs at 1 and 2 threads are the same bytes.
 */
/* clock_gettime, CLOCK_MONOTONIC under -std=c11 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "gpt.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define V GPT_V

struct gpt_acts {
    float *x0;                 /* embeddings [BT][E] */
    float **xin;               /* per layer: residual in [BT][E] */
    float **h1, **mean1, **rstd1, **att, **xmid, **h2, **mean2, **rstd2, **fc1, **gel, **tnh;
    void **ctx;                /* MHA context per layer */
    float *xf, *meanf, *rstdf, *hf, *logits;
    double *rowloss;
    float *scratch[6];
};

static void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "tinygpt: out of memory\n");
        exit(1);
    }
    memset(p, 0, (n + 63) / 64 * 64);
    return p;
}

#define CHECK(call)                                                                \
    do {                                                                           \
        attn_status st_ = (call);                                                  \
        if (st_ != ATTN_OK) {                                                      \
            fprintf(stderr, "tinygpt: %s: %s\n", #call, attn_status_str(st_));     \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

gpt_layout gpt_make_layout(const gpt_config *c)
{
    gpt_layout l;
    size_t E = c->E, o = 0;
    l.wte = o; o += V * E;
    l.wpe = o; o += (size_t)c->T * E;
    l.lnf_g = o; o += E;
    l.lnf_b = o; o += E;
    size_t base = o, p = 0;
    l.ln1_g = p; p += E;
    l.ln1_b = p; p += E;
    l.in_w = p; p += 3 * E * E;
    l.in_b = p; p += 3 * E;
    l.out_w = p; p += E * E;
    l.out_b = p; p += E;
    l.ln2_g = p; p += E;
    l.ln2_b = p; p += E;
    l.fc1_w = p; p += 4 * E * E;
    l.fc1_b = p; p += 4 * E;
    l.fc2_w = p; p += 4 * E * E;
    l.fc2_b = p; p += E;
    l.per_layer = p;
    l.total = base + (size_t)c->L * p;
    l.ln1_g += base; l.ln1_b += base; l.in_w += base; l.in_b += base;
    l.out_w += base; l.out_b += base; l.ln2_g += base; l.ln2_b += base;
    l.fc1_w += base; l.fc1_b += base; l.fc2_w += base; l.fc2_b += base;
    return l;
}

uint64_t gpt_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float rng_normal(uint64_t *s)
{
    double u1 = ((gpt_rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (gpt_rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* The MHA layer's description at batch b, length n. */
static attn_mha_desc mha_desc(const gpt_config *c, int b, int n)
{
    attn_mha_desc d;
    CHECK(attn_mha_desc_init(&d));
    d.embed_dim = c->E;
    d.num_heads = c->H;
    d.batch = b;
    d.q_len = d.kv_len = n;
    d.self_attention = 1;
    d.packed_in_proj = 1;
    d.has_bias = 1;
    d.window_right = 0;             /* causal */
    d.threads = c->threads;
    return d;
}

/* (Re)makes layer L's plan for the training shapes; with dropout, its keep
 * mask is that of (step, L): seed = splitmix(seed ^ (step * L_total + L)). */
static int make_plan(gpt_model *M, int L, long step)
{
    attn_mha_desc d = mha_desc(&M->c, M->c.B, M->c.T);
    if (M->c.dropout > 0) {
        uint64_t s = M->seed ^ ((uint64_t)step * (uint64_t)M->c.L + (uint64_t)L);
        d.dropout_p = M->c.dropout;
        d.dropout_seed = gpt_rng_next(&s);
    }
    attn_mha_plan_destroy(M->plans[L]);
    M->plans[L] = NULL;
    attn_status st = attn_mha_plan_create(&M->plans[L], &d);
    if (st != ATTN_OK) {
        fprintf(stderr, "tinygpt: attn_mha_plan_create: %s\n", attn_status_str(st));
        return -1;
    }
    return 0;
}

int gpt_init(gpt_model *M, const gpt_config *c, uint64_t seed)
{
    memset(M, 0, sizeof *M);
    M->c = *c;
    M->l = gpt_make_layout(c);
    M->seed = seed;
    size_t n = M->l.total;
    M->w = xalloc(n * sizeof(float));
    M->g = xalloc(n * sizeof(float));
    M->m = xalloc(n * sizeof(float));
    M->v = xalloc(n * sizeof(float));
    uint64_t s = seed;
    const gpt_layout *l = &M->l;
    size_t E = c->E;
    for (size_t i = 0; i < V * E; i++)
        M->w[l->wte + i] = 0.02f * rng_normal(&s);
    for (size_t i = 0; i < (size_t)c->T * E; i++)
        M->w[l->wpe + i] = 0.01f * rng_normal(&s);
    for (size_t i = 0; i < E; i++)
        M->w[l->lnf_g + i] = 1.0f;
    for (int L = 0; L < c->L; L++) {
        float *w = M->w + (size_t)L * l->per_layer;
        float proj = 0.02f / sqrtf(2.0f * c->L);
        for (size_t i = 0; i < E; i++)
            w[l->ln1_g + i] = w[l->ln2_g + i] = 1.0f;
        for (size_t i = 0; i < 3 * E * E; i++)
            w[l->in_w + i] = 0.02f * rng_normal(&s);
        for (size_t i = 0; i < E * E; i++)
            w[l->out_w + i] = proj * rng_normal(&s);
        for (size_t i = 0; i < 4 * E * E; i++)
            w[l->fc1_w + i] = 0.02f * rng_normal(&s);
        for (size_t i = 0; i < 4 * E * E; i++)
            w[l->fc2_w + i] = proj * rng_normal(&s);
    }

    M->plans = xalloc((size_t)(c->L + 1) * sizeof *M->plans);
    for (int L = 0; L < c->L; L++)
        if (make_plan(M, L, 0))
            return -1;
    if (c->L) {
        CHECK(attn_mha_context_size(M->plans[0], &M->ctx_bytes));
        CHECK(attn_mha_workspace_size(M->plans[0], &M->ws_bytes));
        CHECK(attn_mha_bwd_workspace_size(M->plans[0], &M->bws_bytes));
    }
    M->ws = xalloc(M->ws_bytes + 64);
    M->bws = xalloc(M->bws_bytes + 64);

    size_t BT = (size_t)c->B * c->T;
    gpt_acts *a = M->a = xalloc(sizeof *M->a);
    a->x0 = xalloc(BT * E * sizeof(float));
#define PER_LAYER(f, n)                                                   \
    do {                                                                  \
        a->f = xalloc((size_t)(c->L + 1) * sizeof *a->f);                 \
        for (int L = 0; L < c->L; L++)                                    \
            a->f[L] = xalloc((n) * sizeof(float));                        \
    } while (0)
    PER_LAYER(xin, BT * E);
    PER_LAYER(h1, BT * E);
    PER_LAYER(mean1, BT);
    PER_LAYER(rstd1, BT);
    PER_LAYER(att, BT * E);
    PER_LAYER(xmid, BT * E);
    PER_LAYER(h2, BT * E);
    PER_LAYER(mean2, BT);
    PER_LAYER(rstd2, BT);
    PER_LAYER(fc1, BT * 4 * E);
    PER_LAYER(gel, BT * 4 * E);
    PER_LAYER(tnh, BT * 4 * E);
#undef PER_LAYER
    a->ctx = xalloc((size_t)(c->L + 1) * sizeof *a->ctx);
    for (int L = 0; L < c->L; L++)
        a->ctx[L] = xalloc(M->ctx_bytes + 64);
    a->xf = xalloc(BT * E * sizeof(float));
    a->meanf = xalloc(BT * sizeof(float));
    a->rstdf = xalloc(BT * sizeof(float));
    a->hf = xalloc(BT * E * sizeof(float));
    a->logits = xalloc(BT * V * sizeof(float));
    a->rowloss = xalloc(BT * sizeof(double));
    for (int k = 0; k < 6; k++)
        a->scratch[k] = xalloc(BT * 4 * E * sizeof(float));
    return 0;
}

void gpt_free(gpt_model *M)
{
    gpt_acts *a = M->a;
    if (a) {
        float **per[] = { a->xin, a->h1, a->mean1, a->rstd1, a->att, a->xmid, a->h2, a->mean2,
                          a->rstd2, a->fc1, a->gel, a->tnh };
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
            for (int L = 0; L < M->c.L; L++)
                free(per[k][L]);
            free(per[k]);
        }
        for (int L = 0; L < M->c.L; L++)
            free(a->ctx[L]);
        free(a->ctx);
        free(a->x0);
        free(a->xf);
        free(a->meanf);
        free(a->rstdf);
        free(a->hf);
        free(a->logits);
        free(a->rowloss);
        for (int k = 0; k < 6; k++)
            free(a->scratch[k]);
        free(a);
    }
    if (M->plans)
        for (int L = 0; L < M->c.L; L++)
            attn_mha_plan_destroy(M->plans[L]);
    free(M->plans);
    free(M->ws);
    free(M->bws);
    free(M->w);
    free(M->g);
    free(M->m);
    free(M->v);
    memset(M, 0, sizeof *M);
}

static void layernorm(float *out, float *mean, float *rstd, const float *x, const float *g,
                      const float *b, size_t n, int E)
{
#pragma omp parallel for schedule(static) if (n * E > 32768)
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * E;
        double s = 0, ss = 0;
        for (int i = 0; i < E; i++)
            s += xr[i];
        double mu = s / E;
        for (int i = 0; i < E; i++)
            ss += (xr[i] - mu) * (xr[i] - mu);
        float rs = (float)(1.0 / sqrt(ss / E + 1e-5));
        if (mean) {
            mean[r] = (float)mu;
            rstd[r] = rs;
        }
        for (int i = 0; i < E; i++)
            out[r * E + i] = ((xr[i] - (float)mu) * rs) * g[i] + b[i];
    }
}

/* dx += LayerNorm backward (rows in parallel); dg, db += (in row order) */
static void layernorm_bwd(float *dx, float *dg, float *db, const float *dout, const float *x,
                          const float *g, const float *mean, const float *rstd, size_t n, int E)
{
#pragma omp parallel for schedule(static) if (n * E > 32768)
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * E, *dr = dout + r * E;
        float mu = mean[r], rs = rstd[r];
        double sd = 0, sdx = 0;
        for (int i = 0; i < E; i++) {
            float xh = (xr[i] - mu) * rs;
            float dxh = dr[i] * g[i];
            sd += dxh;
            sdx += dxh * xh;
        }
        float md = (float)(sd / E), mdx = (float)(sdx / E);
        for (int i = 0; i < E; i++) {
            float xh = (xr[i] - mu) * rs;
            float dxh = dr[i] * g[i];
            dx[r * E + i] += rs * (dxh - md - xh * mdx);
        }
    }
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * E, *dr = dout + r * E;
        float mu = mean[r], rs = rstd[r];
        for (int i = 0; i < E; i++) {
            dg[i] += dr[i] * ((xr[i] - mu) * rs);
            db[i] += dr[i];
        }
    }
}

/* GELU's tanh form; the forward keeps t = tanh(u) (gelu_rows) for the
 * backward, which then computes no tanh. */
#define GELU_K 0.7978845608028654f
static float gelu_grad(float x, float t)
{
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3 * 0.044715f * x * x);
}

/*
 * C[M][N] = op(A) op(B) + beta C (row-major) in fixed blocks of GEMM_ROWS
 * rows of C, spread over OpenMP threads, each block one single-threaded
 * cblas_sgemm.  A threaded BLAS may pick other kernels (another summation
 * order) for other thread counts -- OpenBLAS 0.3.21 does, measured: one
 * training step at 1 and 2 threads differed in the last bit of most
 * gradients -- so the BLAS is told to use one thread (the OpenMP
 * nthreads-var of the block's task, which OpenBLAS's OpenMP build reads)
 * and the blocks, the same for every thread count, carry the parallelism.
 */
enum { GEMM_ROWS = 32 };

static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    int nb = (M + GEMM_ROWS - 1) / GEMM_ROWS;
#pragma omp parallel for schedule(static) if ((double)M * N * K > 262144.0)
    for (int i = 0; i < nb; i++) {
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        int m0 = i * GEMM_ROWS, m = M - m0 < GEMM_ROWS ? M - m0 : GEMM_ROWS;
        const float *Ai = ta == CblasNoTrans ? A + (size_t)m0 * lda : A + m0;
        cblas_sgemm(CblasRowMajor, ta, tb, m, N, K, 1.0f, Ai, lda, B, ldb, beta,
                    C + (size_t)m0 * ldc, ldc);
    }
}

/* y[n][o] = x[n][i] W[o][i]^T + b[o] */
static void linear(float *y, const float *x, const float *W, const float *b, int n, int in, int out)
{
    for (int r = 0; r < n; r++)
        memcpy(y + (size_t)r * out, b, out * sizeof(float));
    gemm(CblasNoTrans, CblasTrans, n, out, in, x, in, W, in, 1.0f, y, out);
}

/* dx = dy W; dW += dy^T x; db += sum dy (in row order) */
static void linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                       const float *W, int n, int in, int out)
{
    gemm(CblasNoTrans, CblasNoTrans, n, in, out, dy, out, W, in, 0.0f, dx, in);
    gemm(CblasTrans, CblasNoTrans, out, in, n, dy, out, x, in, 1.0f, dW, in);
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++)
            db[o] += dy[(size_t)r * out + o];
}

/* y = GELU(x); t = tanh(u) when t is not NULL */
static void gelu_rows(float *y, float *t, const float *x, size_t n)
{
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        /* tanh(u) = 1 - 2 / (exp(2u) + 1): one expf, three times faster
         * than glibc's tanhf here, within 1.8e-7 of tanh (absolute, where
         * GELU and its derivative use 1 + t and 1 - t^2) */
        float v = x[i], e = expf(2.0f * GELU_K * (v + 0.044715f * v * v * v));
        float th = 1.0f - 2.0f / (e + 1.0f);
        y[i] = 0.5f * v * (1.0f + th);
        if (t)
            t[i] = th;
    }
}

static void mha_weights(const gpt_layout *l, int L, const float *w, attn_mha_weights *mw)
{
    const float *p = w + (size_t)L * l->per_layer;
    CHECK(attn_mha_weights_init(mw));
    mw->in_proj_weight = p + l->in_w;
    mw->in_proj_bias = p + l->in_b;
    mw->out_weight = p + l->out_w;
    mw->out_bias = p + l->out_b;
}

/* The MLP half of a block on rows h2 = LN2(xmid): y = W2 GELU(W1 h2 + b1) + b2. */
static void mlp(float *y, float *fc1, float *gel, float *tnh, const float *h2, const float *p,
                const gpt_layout *l, int n, int E)
{
    linear(fc1, h2, p + l->fc1_w, p + l->fc1_b, n, E, 4 * E);
    gelu_rows(gel, tnh, fc1, (size_t)n * 4 * E);
    linear(y, gel, p + l->fc2_w, p + l->fc2_b, n, 4 * E, E);
}

static void embed(float *x, const gpt_layout *l, const float *w, const uint8_t *tok, int pos0,
                  int n, int E)
{
    for (int t = 0; t < n; t++) {
        const float *te = w + l->wte + (size_t)tok[t] * E;
        const float *pe = w + l->wpe + (size_t)(pos0 + t) * E;
        for (int i = 0; i < E; i++)
            x[(size_t)t * E + i] = te[i] + pe[i];
    }
}

/* Splits the rows' logits into probabilities in place; returns the mean
 * cross-entropy against targets tgt(r) (rows' losses summed in order). */
static double cross_entropy(float *z, double *rowloss, const uint8_t *tok, int B, int T)
{
    size_t BT = (size_t)B * T;
#pragma omp parallel for schedule(static) if (BT >= 64)
    for (size_t r = 0; r < BT; r++) {
        float *zr = z + r * V;
        float mx = zr[0];
        for (int k = 1; k < V; k++)
            mx = zr[k] > mx ? zr[k] : mx;
        size_t b = r / T, t = r % T;
        float zy = zr[tok[b * (T + 1) + t + 1]];
        double s = 0;
        for (int k = 0; k < V; k++) {  /* exp(z - max) in float, summed in double */
            zr[k] = expf(zr[k] - mx);
            s += zr[k];
        }
        rowloss[r] = log(s) - ((double)zy - mx);
        float inv = (float)(1.0 / s);  /* probabilities, for the backward */
        for (int k = 0; k < V; k++)
            zr[k] *= inv;
    }
    double loss = 0;
    for (size_t r = 0; r < BT; r++)
        loss += rowloss[r];
    return loss / (double)BT;
}

double gpt_forward(gpt_model *M, const uint8_t *tok, long step)
{
    const gpt_config *c = &M->c;
    const gpt_layout *l = &M->l;
    gpt_acts *a = M->a;
    int E = c->E, T = c->T;
    size_t BT = (size_t)c->B * T;
    for (int b = 0; b < c->B; b++)
        embed(a->x0 + (size_t)b * T * E, l, M->w, tok + (size_t)b * (T + 1), 0, T, E);
    const float *x = a->x0;
    for (int L = 0; L < c->L; L++) {
        const float *p = M->w + (size_t)L * l->per_layer;
        if (x != a->xin[L])
            memcpy(a->xin[L], x, BT * E * sizeof(float));
        layernorm(a->h1[L], a->mean1[L], a->rstd1[L], a->xin[L], p + l->ln1_g, p + l->ln1_b, BT, E);
        /* a fresh keep mask per layer and step: the seed is plan-bound */
        if (c->dropout > 0 && make_plan(M, L, step))
            exit(1);
        attn_mha_weights mw;
        mha_weights(l, L, M->w, &mw);
        attn_mha_args ma;
        CHECK(attn_mha_args_init(&ma));
        ma.x = a->h1[L];
        ma.out = a->att[L];
        double t0 = now();
        CHECK(attn_mha_train_execute(M->plans[L], &mw, &ma, a->ctx[L], M->ctx_bytes, M->ws,
                                     M->ws_bytes));
        M->attn_seconds += now() - t0;
        float *xm = a->xmid[L];
        const float *xi = a->xin[L], *at = a->att[L];
#pragma omp parallel for schedule(static) if (BT * E > 16384)
        for (size_t i = 0; i < BT * E; i++)
            xm[i] = xi[i] + at[i];
        layernorm(a->h2[L], a->mean2[L], a->rstd2[L], a->xmid[L], p + l->ln2_g, p + l->ln2_b, BT, E);
        float *y = a->scratch[0];
        mlp(y, a->fc1[L], a->gel[L], a->tnh[L], a->h2[L], p, l, (int)BT, E);
        float *xo = (L + 1 < c->L) ? a->xin[L + 1] : a->xf;
#pragma omp parallel for schedule(static) if (BT * E > 16384)
        for (size_t i = 0; i < BT * E; i++)
            xo[i] = xm[i] + y[i];
        x = xo;
    }
    if (c->L == 0)
        memcpy(a->xf, a->x0, BT * E * sizeof(float));
    layernorm(a->hf, a->meanf, a->rstdf, a->xf, M->w + l->lnf_g, M->w + l->lnf_b, BT, E);
    gemm(CblasNoTrans, CblasTrans, (int)BT, V, E, a->hf, E, M->w + l->wte, E, 0.0f, a->logits, V);
    return cross_entropy(a->logits, a->rowloss, tok, c->B, T);
}

int gpt_backward(gpt_model *M, const uint8_t *tok)
{
    const gpt_config *c = &M->c;
    const gpt_layout *l = &M->l;
    gpt_acts *a = M->a;
    int E = c->E, T = c->T;
    size_t BT = (size_t)c->B * T;
    memset(M->g, 0, l->total * sizeof(float));
    float *dz = a->logits;                 /* probabilities -> dloss/dlogits, in place */
#pragma omp parallel for schedule(static) if (BT >= 64)
    for (size_t r = 0; r < BT; r++) {
        float *z = dz + r * V;
        z[tok[(r / T) * (T + 1) + r % T + 1]] -= 1.0f;
        for (int k = 0; k < V; k++)
            z[k] /= (float)BT;
    }
    float *dhf = a->scratch[1], *dx = a->scratch[2];
    /* logits = hf wte^T */
    gemm(CblasNoTrans, CblasNoTrans, (int)BT, E, V, dz, V, M->w + l->wte, E, 0.0f, dhf, E);
    gemm(CblasTrans, CblasNoTrans, V, E, (int)BT, dz, V, a->hf, E, 1.0f, M->g + l->wte, E);
    memset(dx, 0, BT * E * sizeof(float));
    layernorm_bwd(dx, M->g + l->lnf_g, M->g + l->lnf_b, dhf, a->xf, M->w + l->lnf_g, a->meanf,
                  a->rstdf, BT, E);
    for (int L = c->L - 1; L >= 0; L--) {
        const float *p = M->w + (size_t)L * l->per_layer;
        float *gp = M->g + (size_t)L * l->per_layer;
        /* x_out = xmid + fc2(gelu(fc1(ln2(xmid)))) ; dx is d x_out */
        float *dgel = a->scratch[3], *dh2 = a->scratch[4];
        linear_bwd(dgel, gp + l->fc2_w, gp + l->fc2_b, dx, a->gel[L], p + l->fc2_w, (int)BT,
                   4 * E, E);
        const float *fc1 = a->fc1[L], *tnh = a->tnh[L];
#pragma omp parallel for schedule(static) if (BT * E > 16384)
        for (size_t i = 0; i < BT * 4 * E; i++)
            dgel[i] *= gelu_grad(fc1[i], tnh[i]);
        linear_bwd(dh2, gp + l->fc1_w, gp + l->fc1_b, dgel, a->h2[L], p + l->fc1_w, (int)BT, E,
                   4 * E);
        /* dxmid = dx + LN2 backward */
        layernorm_bwd(dx, gp + l->ln2_g, gp + l->ln2_b, dh2, a->xmid[L], p + l->ln2_g,
                      a->mean2[L], a->rstd2[L], BT, E);
        /* xmid = xin + mha(ln1(xin)) */
        float *dh1 = a->scratch[5];
        attn_mha_weights mw;
        mha_weights(l, L, M->w, &mw);
        attn_mha_args ma;
        CHECK(attn_mha_args_init(&ma));
        ma.x = a->h1[L];
        attn_mha_grads mg;
        CHECK(attn_mha_grads_init(&mg));
        mg.dx = dh1;
        mg.d_in_proj_weight = gp + l->in_w;
        mg.d_in_proj_bias = gp + l->in_b;
        mg.d_out_weight = gp + l->out_w;
        mg.d_out_bias = gp + l->out_b;
        double t0 = now();
        /* accumulate = 1: the parameter gradients add to the zeros above;
         * dh1 is zeroed after each use */
        CHECK(attn_mha_bwd_execute(M->plans[L], &mw, &ma, dx, a->ctx[L], M->ctx_bytes, &mg, 1,
                                   M->bws, M->bws_bytes));
        M->attn_seconds += now() - t0;
        layernorm_bwd(dx, gp + l->ln1_g, gp + l->ln1_b, dh1, a->xin[L], p + l->ln1_g,
                      a->mean1[L], a->rstd1[L], BT, E);
        memset(dh1, 0, BT * E * sizeof(float));
    }
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = dx + ((size_t)b * T + t) * E;
            float *gt = M->g + l->wte + (size_t)tok[b * (T + 1) + t] * E;
            float *gpos = M->g + l->wpe + (size_t)t * E;
            for (int i = 0; i < E; i++) {
                gt[i] += d[i];
                gpos[i] += d[i];
            }
        }
    return 0;
}

int gpt_set_dropout(gpt_model *M, float p)
{
    M->c.dropout = p;
    for (int L = 0; L < M->c.L; L++) {
        size_t ctx, ws, bws;
        if (make_plan(M, L, 0))
            return -1;
        CHECK(attn_mha_context_size(M->plans[L], &ctx));
        CHECK(attn_mha_workspace_size(M->plans[L], &ws));
        CHECK(attn_mha_bwd_workspace_size(M->plans[L], &bws));
        if (ctx > M->ctx_bytes || ws > M->ws_bytes || bws > M->bws_bytes) {
            fprintf(stderr, "tinygpt: dropout %g needs more workspace than the model holds\n", p);
            return -1;
        }
    }
    return 0;
}

float gpt_adamw(gpt_model *M, long step, float lr, float wd, float clip)
{
    size_t n = M->l.total;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)M->g[i] * M->g[i];
    float norm = (float)sqrt(ss), k = norm > clip ? clip / norm : 1.0f;
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
    float *w = M->w, *gr = M->g, *m = M->m, *v = M->v;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++) {
        float g = gr[i] * k;
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        float mh = m[i] / c1, vh = v[i] / c2;
        w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[i]);
    }
    return norm;
}

void gpt_batch(const uint8_t *text, size_t len, const gpt_config *c, uint64_t *s, uint8_t *tok)
{
    for (int b = 0; b < c->B; b++) {
        size_t o = gpt_rng_next(s) % (len - (size_t)c->T - 1);
        memcpy(tok + (size_t)b * (c->T + 1), text + o, (size_t)c->T + 1);
    }
}

/* ---- inference ---- */

int gpt_logits(const gpt_config *c, const float *w, const uint8_t *tok, int n, float *logits,
               float *attw)
{
    if (n < 1 || n > c->T) {
        fprintf(stderr, "tinygpt: %d tokens, the model takes 1 to %d\n", n, c->T);
        return -1;
    }
    gpt_layout l = gpt_make_layout(c);
    int E = c->E;
    attn_mha_desc d = mha_desc(c, 1, n);
    d.weights = attw ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE;
    attn_mha_plan *plan;
    attn_status st = attn_mha_plan_create(&plan, &d);
    if (st != ATTN_OK) {
        fprintf(stderr, "tinygpt: attn_mha_plan_create: %s\n", attn_status_str(st));
        return -1;
    }
    size_t wsb;
    CHECK(attn_mha_workspace_size(plan, &wsb));
    void *ws = xalloc(wsb + 64);
    float *x = xalloc((size_t)n * E * sizeof(float)), *h = xalloc((size_t)n * E * sizeof(float));
    float *y = xalloc((size_t)n * E * sizeof(float));
    float *f1 = xalloc((size_t)n * 4 * E * sizeof(float)), *g1 = xalloc((size_t)n * 4 * E * sizeof(float));
    embed(x, &l, w, tok, 0, n, E);
    for (int L = 0; L < c->L; L++) {
        const float *p = w + (size_t)L * l.per_layer;
        layernorm(h, NULL, NULL, x, p + l.ln1_g, p + l.ln1_b, n, E);
        attn_mha_weights mw;
        mha_weights(&l, L, w, &mw);
        attn_mha_args ma;
        CHECK(attn_mha_args_init(&ma));
        ma.x = h;
        ma.out = y;
        ma.weights = attw ? attw + (size_t)L * c->H * n * n : NULL;
        CHECK(attn_mha_execute(plan, &mw, &ma, ws, wsb));
        for (size_t i = 0; i < (size_t)n * E; i++)
            x[i] += y[i];
        layernorm(h, NULL, NULL, x, p + l.ln2_g, p + l.ln2_b, n, E);
        mlp(y, f1, g1, NULL, h, p, &l, n, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            x[i] += y[i];
    }
    if (logits) {
        layernorm(h, NULL, NULL, x, w + l.lnf_g, w + l.lnf_b, n, E);
        gemm(CblasNoTrans, CblasTrans, n, V, E, h, E, w + l.wte, E, 0.0f, logits, V);
    }
    free(ws);
    free(x);
    free(h);
    free(y);
    free(f1);
    free(g1);
    attn_mha_plan_destroy(plan);
    return 0;
}

/* ---- generation through the paged F16 KV cache ---- */

enum { GEN_BS = 16 };

struct gpt_gen {
    gpt_config c;
    gpt_layout l;
    const float *w;
    int len, max_blocks, num_blocks;
    int32_t *table;             /* [max_blocks], a scrambled order of the pool */
    uint16_t **kpool, **vpool;  /* per layer: [num_blocks][H][BS][D] F16 */
    int32_t *lens;              /* per layer: tokens held */
    float *x, *h, *y, *qkv, *q, *k, *v, *o, *f1, *g1;
};

gpt_gen *gpt_gen_create(const gpt_config *c, const float *w)
{
    gpt_gen *G = xalloc(sizeof *G);
    G->c = *c;
    G->l = gpt_make_layout(c);
    G->w = w;
    G->max_blocks = (c->T + GEN_BS - 1) / GEN_BS;
    G->num_blocks = G->max_blocks + 3;   /* a pool a bit larger than one sequence */
    G->table = xalloc((size_t)G->max_blocks * sizeof(int32_t));
    for (int b = 0; b < G->max_blocks; b++)   /* 5 b + 2 mod num_blocks: a permutation */
        G->table[b] = (int32_t)(((int64_t)b * 5 + 2) % G->num_blocks);
    size_t pool = (size_t)G->num_blocks * c->E * GEN_BS;   /* H x D = E */
    G->kpool = xalloc((size_t)(c->L + 1) * sizeof *G->kpool);
    G->vpool = xalloc((size_t)(c->L + 1) * sizeof *G->vpool);
    for (int L = 0; L < c->L; L++) {
        G->kpool[L] = xalloc(pool * sizeof(uint16_t));
        G->vpool[L] = xalloc(pool * sizeof(uint16_t));
    }
    G->lens = xalloc((size_t)(c->L + 1) * sizeof(int32_t));
    size_t nE = (size_t)c->T * c->E;
    G->x = xalloc(nE * sizeof(float));
    G->h = xalloc(nE * sizeof(float));
    G->y = xalloc(nE * sizeof(float));
    G->qkv = xalloc(3 * nE * sizeof(float));
    G->q = xalloc(nE * sizeof(float));
    G->k = xalloc(nE * sizeof(float));
    G->v = xalloc(nE * sizeof(float));
    G->o = xalloc(nE * sizeof(float));
    G->f1 = xalloc(4 * nE * sizeof(float));
    G->g1 = xalloc(4 * nE * sizeof(float));
    return G;
}

void gpt_gen_free(gpt_gen *G)
{
    if (!G)
        return;
    for (int L = 0; L < G->c.L; L++) {
        free(G->kpool[L]);
        free(G->vpool[L]);
    }
    free(G->kpool);
    free(G->vpool);
    free(G->lens);
    free(G->table);
    float *bufs[] = { G->x, G->h, G->y, G->qkv, G->q, G->k, G->v, G->o, G->f1, G->g1 };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(G);
}

int gpt_gen_len(const gpt_gen *G)
{
    return G->len;
}

int gpt_gen_feed(gpt_gen *G, const uint8_t *tok, int n, float *logits)
{
    const gpt_config *c = &G->c;
    const gpt_layout *l = &G->l;
    int E = c->E, H = c->H, D = E / H;
    if (n < 1 || G->len + n > c->T) {
        fprintf(stderr, "tinygpt: the context holds %d tokens (%d held, %d more asked)\n", c->T,
                G->len, n);
        return -1;
    }
    /* The cache and the attention against it share one description: the
     * new tokens' Q [n][H][D] (BSHD, as the projection writes it), K and V
     * in pool blocks [H][BS][D], causal from the bottom-right corner (the
     * new tokens are the last n of the sequence). */
    attn_sdpa_desc d;
    CHECK(attn_sdpa_desc_init(&d));
    d.batch = 1;
    d.q_heads = d.kv_heads = H;
    d.q_len = n;
    d.kv_len = c->T;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bshd(H, n, D);
    d.k_type = d.v_type = ATTN_DTYPE_F16;
    d.kv_block_size = GEN_BS;
    d.kv_num_blocks = G->num_blocks;
    d.kv_max_blocks = G->max_blocks;
    d.k = d.v = attn_view_bhsd(H, GEN_BS, D);
    d.align = ATTN_ALIGN_BOTTOM_RIGHT;
    d.window_right = 0;
    d.use_kv_lens = 1;
    d.threads = c->threads;
    embed(G->x, l, G->w, tok, G->len, n, E);
    for (int L = 0; L < c->L; L++) {
        const float *p = G->w + (size_t)L * l->per_layer;
        layernorm(G->h, NULL, NULL, G->x, p + l->ln1_g, p + l->ln1_b, n, E);
        /* packed in_proj: rows [0, E) Q, [E, 2E) K, [2E, 3E) V */
        linear(G->qkv, G->h, p + l->in_w, p + l->in_b, n, E, 3 * E);
        for (int t = 0; t < n; t++) {
            memcpy(G->q + (size_t)t * E, G->qkv + (size_t)t * 3 * E, E * sizeof(float));
            memcpy(G->k + (size_t)t * E, G->qkv + (size_t)t * 3 * E + E, E * sizeof(float));
            memcpy(G->v + (size_t)t * E, G->qkv + (size_t)t * 3 * E + 2 * E, E * sizeof(float));
        }
        attn_kv_append_args ap;
        CHECK(attn_kv_append_args_init(&ap));
        ap.k_cache = G->kpool[L];
        ap.v_cache = G->vpool[L];
        ap.block_table = G->table;
        ap.kv_lens = &G->lens[L];
        ap.t = n;
        ap.k_new = G->k;
        ap.v_new = G->v;
        ap.k_new_view = ap.v_new_view = attn_view_bshd(H, n, D);
        attn_status st = attn_kv_append(&d, &ap);
        attn_sdpa_args a;
        if (st == ATTN_OK)
            st = attn_sdpa_args_init(&a);
        if (st == ATTN_OK) {
            a.q = G->q;
            a.o = G->o;
            a.k16 = G->kpool[L];
            a.v16 = G->vpool[L];
            a.block_table = G->table;
            a.kv_lens = &G->lens[L];
            st = attn_sdpa(&d, &a);
        }
        if (st != ATTN_OK) {
            fprintf(stderr, "tinygpt: decode, layer %d: %s\n", L, attn_status_str(st));
            return -1;
        }
        linear(G->y, G->o, p + l->out_w, p + l->out_b, n, E, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            G->x[i] += G->y[i];
        layernorm(G->h, NULL, NULL, G->x, p + l->ln2_g, p + l->ln2_b, n, E);
        mlp(G->y, G->f1, G->g1, NULL, G->h, p, l, n, E);
        for (size_t i = 0; i < (size_t)n * E; i++)
            G->x[i] += G->y[i];
    }
    G->len += n;
    layernorm(G->h, NULL, NULL, G->x, G->w + l->lnf_g, G->w + l->lnf_b, n, E);
    gemm(CblasNoTrans, CblasTrans, n, V, E, G->h, E, G->w + l->wte, E, 0.0f, logits, V);
    return 0;
}

int gpt_sample(const float *logits, float temperature, int top_k, double u)
{
    int best = 0;
    for (int k = 1; k < V; k++)
        if (logits[k] > logits[best])
            best = k;
    if (temperature <= 0)
        return best;
    /* the top_k largest logits (ties: lower byte first) */
    int idx[V], n = (top_k > 0 && top_k < V) ? top_k : V;
    for (int k = 0; k < V; k++)
        idx[k] = k;
    for (int i = 0; i < n; i++) {      /* partial selection sort: n <= 256 */
        int m = i;
        for (int j = i + 1; j < V; j++)
            if (logits[idx[j]] > logits[idx[m]])
                m = j;
        int t = idx[i];
        idx[i] = idx[m];
        idx[m] = t;
    }
    double p[V], s = 0;
    for (int i = 0; i < n; i++)
        s += p[i] = exp(((double)logits[idx[i]] - logits[best]) / temperature);
    double r = u * s;
    for (int i = 0; i < n; i++) {
        if (r < p[i])
            return idx[i];
        r -= p[i];
    }
    return idx[n - 1];
}

/* ---- checkpoints ---- */

#define CKPT_MAGIC "ATTNGPT"
#define CKPT_VERSION 1u

static uint64_t fnv1a(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

int gpt_save(const gpt_config *c, const float *w, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "tinygpt: cannot write %s\n", path);
        return -1;
    }
    uint32_t version = CKPT_VERSION;
    int32_t dims[5] = { c->L, c->E, c->H, c->T, V };
    gpt_layout l = gpt_make_layout(c);
    uint64_t n = l.total, h = fnv1a(w, n * sizeof(float));
    int ok = fwrite(CKPT_MAGIC, 1, 8, f) == 8 && fwrite(&version, 4, 1, f) == 1 &&
             fwrite(dims, 4, 5, f) == 5 && fwrite(&n, 8, 1, f) == 1 &&
             fwrite(w, sizeof(float), n, f) == n && fwrite(&h, 8, 1, f) == 1;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, "tinygpt: writing %s failed\n", path);
    return ok ? 0 : -1;
}

int gpt_load(const char *path, gpt_config *c, float **w)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tinygpt: cannot open checkpoint %s\n", path);
        return -1;
    }
    char magic[8];
    uint32_t version;
    int32_t d[5];
    uint64_t n, h;
    const char *err = NULL;
    *w = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CKPT_MAGIC, 8))
        err = "not a tinygpt checkpoint (magic)";
    else if (fread(&version, 4, 1, f) != 1)
        err = "truncated header";
    else if (version != CKPT_VERSION)
        err = "unsupported version";
    else if (fread(d, 4, 5, f) != 5 || fread(&n, 8, 1, f) != 1)
        err = "truncated header";
    else if (d[0] < 0 || d[0] > 64 || d[1] < 1 || d[1] > 4096 || d[2] < 1 || d[1] % d[2] ||
             d[3] < 2 || d[3] > 65536 || d[4] != V)
        err = "sizes out of range";
    if (!err) {
        gpt_config t = *c;
        t.L = d[0];
        t.E = d[1];
        t.H = d[2];
        t.T = d[3];
        gpt_layout l = gpt_make_layout(&t);
        if (n != l.total)
            err = "parameter count does not match the sizes";
        else {
            long here = ftell(f);
            if (fseek(f, 0, SEEK_END) || ftell(f) != here + (long)(n * sizeof(float) + 8))
                err = "file size does not match the sizes (truncated or extended)";
            else if (fseek(f, here, SEEK_SET))
                err = "cannot seek";
            else {
                *w = xalloc(n * sizeof(float));
                if (fread(*w, sizeof(float), n, f) != n || fread(&h, 8, 1, f) != 1)
                    err = "truncated parameters";
                else if (h != fnv1a(*w, n * sizeof(float)))
                    err = "checksum mismatch (corrupt parameters)";
                else
                    *c = t;
                if (err) {
                    free(*w);
                    *w = NULL;
                }
            }
        }
    }
    fclose(f);
    if (err) {
        fprintf(stderr, "tinygpt: %s: %s\n", path, err);
        return -1;
    }
    return 0;
}
