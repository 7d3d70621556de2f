/*
 * tinygpt: a small GPT trained by attn (work in progress, issue 28).
 *
 * Byte-level tokens (256), learned token and position embeddings, N
 * pre-LayerNorm blocks (attn's MHA layer with its training calls, causal;
 * an MLP E -> 4E -> E with GELU on cblas_sgemm), a final LayerNorm and an
 * output layer tied to the token embedding; cross-entropy, AdamW, global
 * gradient-norm clipping.  Deterministic for a seed and any thread count
 * (attn's calls are; the rest is serial or a fixed-order BLAS call).
 *
 *   tinygpt --data FILE... [--steps N] [--check] [--save CKPT] [--load CKPT]
 *
 * --check compares the analytic gradient of a few parameters with central
 * differences of the loss (float64 accumulation of the loss).
 */
#define _POSIX_C_SOURCE 200809L
#include <attn.h>
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define V 256

typedef struct {
    int L, E, H, T, B;      /* layers, width, heads, context, batch */
} config;

/* Parameters and gradients share one layout: offsets into a float array. */
typedef struct {
    size_t wte, wpe, lnf_g, lnf_b;
    size_t ln1_g, ln1_b, in_w, in_b, out_w, out_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
    size_t per_layer, total;
} layout;

static layout make_layout(const config *c)
{
    layout l;
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
    /* layer offsets are relative to base + layer * per_layer */
    l.ln1_g += base; l.ln1_b += base; l.in_w += base; l.in_b += base;
    l.out_w += base; l.out_b += base; l.ln2_g += base; l.ln2_b += base;
    l.fc1_w += base; l.fc1_b += base; l.fc2_w += base; l.fc2_b += base;
    return l;
}

/* Activations of one step, kept for the backward. */
typedef struct {
    float *x0;                 /* embeddings [BT][E] */
    float **xin;               /* per layer: residual in [BT][E] */
    float **h1, **mean1, **rstd1, **att, **xmid, **h2, **mean2, **rstd2, **fc1, **gel;
    void **ctx;                /* MHA context per layer */
    float *xf, *meanf, *rstdf, *hf, *logits, *probs;
} acts;

typedef struct {
    config c;
    layout l;
    float *w, *g, *m, *v;
    attn_mha_plan *mha;
    size_t ctx_bytes, ws_bytes, bws_bytes;
    void *ws, *bws;
    acts a;
    float *scratch[6];
} model;

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

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float rng_normal(uint64_t *s)
{
    double u1 = ((rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void model_init(model *M, config c, uint64_t seed)
{
    M->c = c;
    M->l = make_layout(&c);
    size_t n = M->l.total;
    M->w = xalloc(n * sizeof(float));
    M->g = xalloc(n * sizeof(float));
    M->m = xalloc(n * sizeof(float));
    M->v = xalloc(n * sizeof(float));
    uint64_t s = seed;
    const layout *l = &M->l;
    size_t E = c.E;
    for (size_t i = 0; i < V * E; i++)
        M->w[l->wte + i] = 0.02f * rng_normal(&s);
    for (size_t i = 0; i < (size_t)c.T * E; i++)
        M->w[l->wpe + i] = 0.01f * rng_normal(&s);
    for (size_t i = 0; i < E; i++)
        M->w[l->lnf_g + i] = 1.0f;
    for (int L = 0; L < c.L; L++) {
        float *w = M->w + (size_t)L * l->per_layer;
        float proj = 0.02f / sqrtf(2.0f * c.L);
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

    attn_mha_desc d;
    CHECK(attn_mha_desc_init(&d));
    d.embed_dim = c.E;
    d.num_heads = c.H;
    d.batch = c.B;
    d.q_len = d.kv_len = c.T;
    d.self_attention = 1;
    d.packed_in_proj = 1;
    d.has_bias = 1;
    d.window_right = 0;             /* causal */
    CHECK(attn_mha_plan_create(&M->mha, &d));
    CHECK(attn_mha_context_size(M->mha, &M->ctx_bytes));
    CHECK(attn_mha_workspace_size(M->mha, &M->ws_bytes));
    CHECK(attn_mha_bwd_workspace_size(M->mha, &M->bws_bytes));
    M->ws = xalloc(M->ws_bytes + 64);
    M->bws = xalloc(M->bws_bytes + 64);

    size_t BT = (size_t)c.B * c.T;
    acts *a = &M->a;
    a->x0 = xalloc(BT * E * sizeof(float));
#define PER_LAYER(f, n)                                                   \
    do {                                                                  \
        a->f = xalloc((size_t)c.L * sizeof *a->f);                        \
        for (int L = 0; L < c.L; L++)                                     \
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
#undef PER_LAYER
    a->ctx = xalloc((size_t)c.L * sizeof *a->ctx);
    for (int L = 0; L < c.L; L++)
        a->ctx[L] = xalloc(M->ctx_bytes + 64);
    a->xf = xalloc(BT * E * sizeof(float));
    a->meanf = xalloc(BT * sizeof(float));
    a->rstdf = xalloc(BT * sizeof(float));
    a->hf = xalloc(BT * E * sizeof(float));
    a->logits = xalloc(BT * V * sizeof(float));
    a->probs = a->logits;
    for (int k = 0; k < 6; k++)
        M->scratch[k] = xalloc(BT * 4 * E * sizeof(float));
}

static void model_free(model *M)
{
    acts *a = &M->a;
    float **per[] = { a->xin, a->h1, a->mean1, a->rstd1, a->att, a->xmid, a->h2, a->mean2,
                      a->rstd2, a->fc1, a->gel };
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
    for (int k = 0; k < 6; k++)
        free(M->scratch[k]);
    free(M->ws);
    free(M->bws);
    attn_mha_plan_destroy(M->mha);
    free(M->w);
    free(M->g);
    free(M->m);
    free(M->v);
}

static void layernorm(float *out, float *mean, float *rstd, const float *x, const float *g,
                      const float *b, size_t n, int E)
{
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * E;
        double s = 0, ss = 0;
        for (int i = 0; i < E; i++)
            s += xr[i];
        double mu = s / E;
        for (int i = 0; i < E; i++)
            ss += (xr[i] - mu) * (xr[i] - mu);
        float rs = (float)(1.0 / sqrt(ss / E + 1e-5));
        mean[r] = (float)mu;
        rstd[r] = rs;
        for (int i = 0; i < E; i++)
            out[r * E + i] = ((xr[i] - (float)mu) * rs) * g[i] + b[i];
    }
}

/* dx += LayerNorm backward; dg, db += */
static void layernorm_bwd(float *dx, float *dg, float *db, const float *dout, const float *x,
                          const float *g, const float *mean, const float *rstd, size_t n, int E)
{
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * E, *dr = dout + r * E;
        float mu = mean[r], rs = rstd[r];
        double sd = 0, sdx = 0;
        for (int i = 0; i < E; i++) {
            float xh = (xr[i] - mu) * rs;
            float dxh = dr[i] * g[i];
            sd += dxh;
            sdx += dxh * xh;
            dg[i] += dr[i] * xh;
            db[i] += dr[i];
        }
        float md = (float)(sd / E), mdx = (float)(sdx / E);
        for (int i = 0; i < E; i++) {
            float xh = (xr[i] - mu) * rs;
            float dxh = dr[i] * g[i];
            dx[r * E + i] += rs * (dxh - md - xh * mdx);
        }
    }
}

#define GELU_K 0.7978845608028654f
static float gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

static float gelu_grad(float x)
{
    float u = GELU_K * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3 * 0.044715f * x * x);
}

/* y[n][o] = x[n][i] W[o][i]^T + b[o] */
static void linear(float *y, const float *x, const float *W, const float *b, int n, int in, int out)
{
    for (int r = 0; r < n; r++)
        memcpy(y + (size_t)r * out, b, out * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, W, in, 1.0f, y,
                out);
}

/* dx (+)= dy W; dW += dy^T x; db += sum dy */
static void linear_bwd(float *dx, float *dW, float *db, const float *dy, const float *x,
                       const float *W, int n, int in, int out, int accumulate_dx)
{
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, W, in,
                    accumulate_dx ? 1.0f : 0.0f, dx, in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                dW, in);
    if (db)
        for (int r = 0; r < n; r++)
            for (int o = 0; o < out; o++)
                db[o] += dy[(size_t)r * out + o];
}

static void mha_weights(const model *M, int L, const float *w, attn_mha_weights *mw)
{
    const layout *l = &M->l;
    const float *p = w + (size_t)L * l->per_layer;
    CHECK(attn_mha_weights_init(mw));
    mw->in_proj_weight = p + l->in_w;
    mw->in_proj_bias = p + l->in_b;
    mw->out_weight = p + l->out_w;
    mw->out_bias = p + l->out_b;
}

/* Mean cross-entropy of tokens[b][t+1] given tokens[b][0..t]; keeps the
 * activations.  tokens: [B][T+1]. */
static double forward(model *M, const uint8_t *tok)
{
    const config *c = &M->c;
    const layout *l = &M->l;
    acts *a = &M->a;
    int E = c->E, T = c->T;
    size_t BT = (size_t)c->B * T;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = M->w + l->wte + (size_t)tok[b * (T + 1) + t] * E;
            const float *pe = M->w + l->wpe + (size_t)t * E;
            float *x = a->x0 + ((size_t)b * T + t) * E;
            for (int i = 0; i < E; i++)
                x[i] = te[i] + pe[i];
        }
    const float *x = a->x0;
    for (int L = 0; L < c->L; L++) {
        const float *p = M->w + (size_t)L * l->per_layer;
        if (x != a->xin[L])
            memcpy(a->xin[L], x, BT * E * sizeof(float));
        layernorm(a->h1[L], a->mean1[L], a->rstd1[L], a->xin[L], p + l->ln1_g, p + l->ln1_b, BT, E);
        attn_mha_weights mw;
        mha_weights(M, L, M->w, &mw);
        attn_mha_args ma;
        CHECK(attn_mha_args_init(&ma));
        ma.x = a->h1[L];
        ma.out = a->att[L];
        CHECK(attn_mha_train_execute(M->mha, &mw, &ma, a->ctx[L], M->ctx_bytes, M->ws,
                                     M->ws_bytes));
        for (size_t i = 0; i < BT * E; i++)
            a->xmid[L][i] = a->xin[L][i] + a->att[L][i];
        layernorm(a->h2[L], a->mean2[L], a->rstd2[L], a->xmid[L], p + l->ln2_g, p + l->ln2_b, BT, E);
        linear(a->fc1[L], a->h2[L], p + l->fc1_w, p + l->fc1_b, (int)BT, E, 4 * E);
        for (size_t i = 0; i < BT * 4 * E; i++)
            a->gel[L][i] = gelu(a->fc1[L][i]);
        float *y = M->scratch[0];
        linear(y, a->gel[L], p + l->fc2_w, p + l->fc2_b, (int)BT, 4 * E, E);
        float *xo = (L + 1 < c->L) ? a->xin[L + 1] : a->xf;
        for (size_t i = 0; i < BT * E; i++)
            xo[i] = a->xmid[L][i] + y[i];
        x = xo;
    }
    if (c->L == 0)
        memcpy(a->xf, a->x0, BT * E * sizeof(float));
    layernorm(a->hf, a->meanf, a->rstdf, a->xf, M->w + l->lnf_g, M->w + l->lnf_b, BT, E);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)BT, V, E, 1.0f, a->hf, E,
                M->w + l->wte, E, 0.0f, a->logits, V);
    double loss = 0;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < T; t++) {
            float *z = a->logits + ((size_t)b * T + t) * V;
            float mx = z[0];
            for (int k = 1; k < V; k++)
                mx = z[k] > mx ? z[k] : mx;
            double s = 0;
            for (int k = 0; k < V; k++)
                s += exp((double)z[k] - mx);
            int y = tok[b * (T + 1) + t + 1];
            loss += log(s) + mx - z[y];
            for (int k = 0; k < V; k++)    /* probabilities, for the backward */
                z[k] = (float)(exp((double)z[k] - mx) / s);
        }
    return loss / (double)BT;
}

/* Gradients of forward()'s loss into M->g (overwritten). */
static void backward(model *M, const uint8_t *tok)
{
    const config *c = &M->c;
    const layout *l = &M->l;
    acts *a = &M->a;
    int E = c->E, T = c->T;
    size_t BT = (size_t)c->B * T;
    memset(M->g, 0, l->total * sizeof(float));
    float *dz = a->probs;                  /* dloss/dlogits, in place */
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < T; t++) {
            float *z = dz + ((size_t)b * T + t) * V;
            z[tok[b * (T + 1) + t + 1]] -= 1.0f;
            for (int k = 0; k < V; k++)
                z[k] /= (float)BT;
        }
    float *dhf = M->scratch[1], *dx = M->scratch[2];
    /* logits = hf wte^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)BT, E, V, 1.0f, dz, V,
                M->w + l->wte, E, 0.0f, dhf, E);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, E, (int)BT, 1.0f, dz, V, a->hf, E,
                1.0f, M->g + l->wte, E);
    memset(dx, 0, BT * E * sizeof(float));
    layernorm_bwd(dx, M->g + l->lnf_g, M->g + l->lnf_b, dhf, a->xf, M->w + l->lnf_g, a->meanf,
                  a->rstdf, BT, E);
    for (int L = c->L - 1; L >= 0; L--) {
        const float *p = M->w + (size_t)L * l->per_layer;
        float *gp = M->g + (size_t)L * l->per_layer;
        /* x_out = xmid + fc2(gelu(fc1(ln2(xmid)))) ; dx is d x_out */
        float *dgel = M->scratch[3], *dh2 = M->scratch[4];
        linear_bwd(dgel, gp + l->fc2_w, gp + l->fc2_b, dx, a->gel[L], p + l->fc2_w, (int)BT,
                   4 * E, E, 0);
        for (size_t i = 0; i < BT * 4 * E; i++)
            dgel[i] *= gelu_grad(a->fc1[L][i]);
        linear_bwd(dh2, gp + l->fc1_w, gp + l->fc1_b, dgel, a->h2[L], p + l->fc1_w, (int)BT, E,
                   4 * E, 0);
        /* dxmid = dx + LN2 backward */
        layernorm_bwd(dx, gp + l->ln2_g, gp + l->ln2_b, dh2, a->xmid[L], p + l->ln2_g,
                      a->mean2[L], a->rstd2[L], BT, E);
        /* xmid = xin + mha(ln1(xin)) */
        float *dh1 = M->scratch[5];
        attn_mha_weights mw;
        mha_weights(M, L, M->w, &mw);
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
        CHECK(attn_mha_bwd_execute(M->mha, &mw, &ma, dx, a->ctx[L], M->ctx_bytes, &mg, 1,
                                   M->bws, M->bws_bytes));
        /* accumulate = 1 above added into dh1, so it must start at 0: it
         * was zeroed below for this layer */
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
}

static void adamw(model *M, int step, float lr, float wd, float clip)
{
    size_t n = M->l.total;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)M->g[i] * M->g[i];
    float norm = (float)sqrt(ss), k = norm > clip ? clip / norm : 1.0f;
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    float c1 = 1.0f - powf(b1, (float)step), c2 = 1.0f - powf(b2, (float)step);
    for (size_t i = 0; i < n; i++) {
        float g = M->g[i] * k;
        M->m[i] = b1 * M->m[i] + (1 - b1) * g;
        M->v[i] = b2 * M->v[i] + (1 - b2) * g * g;
        float mh = M->m[i] / c1, vh = M->v[i] / c2;
        M->w[i] -= lr * (mh / (sqrtf(vh) + eps) + wd * M->w[i]);
    }
}

static uint8_t *read_files(char **paths, int n, size_t *len)
{
    size_t cap = 1 << 20, used = 0;
    uint8_t *buf = malloc(cap);
    for (int f = 0; f < n; f++) {
        FILE *fp = fopen(paths[f], "rb");
        if (!fp) {
            fprintf(stderr, "tinygpt: cannot open %s\n", paths[f]);
            exit(2);
        }
        for (;;) {
            if (used == cap)
                buf = realloc(buf, cap *= 2);
            size_t r = fread(buf + used, 1, cap - used, fp);
            used += r;
            if (r == 0)
                break;
        }
        fclose(fp);
    }
    *len = used;
    return buf;
}

static void batch(const uint8_t *text, size_t len, const config *c, uint64_t *s, uint8_t *tok)
{
    for (int b = 0; b < c->B; b++) {
        size_t o = rng_next(s) % (len - (size_t)c->T - 1);
        memcpy(tok + b * (c->T + 1), text + o, (size_t)c->T + 1);
    }
}

static int gradcheck(model *M, const uint8_t *tok)
{
    forward(M, tok);
    backward(M, tok);
    const layout *l = &M->l;
    size_t idx[] = { l->wte + 5, l->wpe + 3, l->lnf_g + 1, l->ln1_g + 2, l->in_w + 7,
                     l->in_b + 100 % (3 * M->c.E), l->out_w + 11, l->ln2_b + 4, l->fc1_w + 13,
                     l->fc2_w + 17, l->fc2_b + 1 };
    int bad = 0;
    for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
        size_t i = idx[k];
        float w0 = M->w[i], h = 1e-2f;
        M->w[i] = w0 + h;
        double lp = forward(M, tok);
        M->w[i] = w0 - h;
        double lm = forward(M, tok);
        M->w[i] = w0;
        double num = (lp - lm) / (2 * h), an = M->g[i];
        double rel = fabs(num - an) / fmax(1e-6, fabs(num) + fabs(an));
        printf("param %zu: analytic %.6e numeric %.6e rel %.2e\n", i, an, num, rel);
        bad += rel > 5e-2 && fabs(num - an) > 1e-5;
    }
    return bad;
}

/*
 * Checkpoint: little-endian, 8-byte magic "ATTNGPT\0", uint32 version (1),
 * int32 L, E, H, T, V, uint64 n (the parameter count these sizes give),
 * n float32 parameters in the layout of make_layout, uint64 FNV-1a of
 * those parameter bytes.  Loading checks every field, the file's exact
 * size and the checksum; any mismatch is an error message, never a crash.
 */
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

static int save_checkpoint(const model *M, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "tinygpt: cannot write %s\n", path);
        return -1;
    }
    uint32_t version = CKPT_VERSION;
    int32_t dims[5] = { M->c.L, M->c.E, M->c.H, M->c.T, V };
    uint64_t n = M->l.total, h = fnv1a(M->w, n * sizeof(float));
    int ok = fwrite(CKPT_MAGIC, 1, 8, f) == 8 && fwrite(&version, 4, 1, f) == 1 &&
             fwrite(dims, 4, 5, f) == 5 && fwrite(&n, 8, 1, f) == 1 &&
             fwrite(M->w, sizeof(float), n, f) == n && fwrite(&h, 8, 1, f) == 1;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        fprintf(stderr, "tinygpt: writing %s failed\n", path);
    return ok ? 0 : -1;
}

/* Reads the header of path into *c (batch untouched) and the parameters
 * into a fresh array *w; returns 0, or -1 after a message naming what is
 * wrong. */
static int load_checkpoint(const char *path, config *c, float **w)
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
        config t = { d[0], d[1], d[2], d[3], c->B };
        layout l = make_layout(&t);
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

int main(int argc, char **argv)
{
    config c = { 2, 64, 4, 64, 8 };
    int steps = 200, check = 0, nfiles = 0;
    const char *save = NULL, *load = NULL;
    char *files[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--check"))
            check = 1;
        else if (!strcmp(argv[i], "--save") && i + 1 < argc)
            save = argv[++i];
        else if (!strcmp(argv[i], "--load") && i + 1 < argc)
            load = argv[++i];
        else if (!strcmp(argv[i], "--data")) {
            while (i + 1 < argc && argv[i + 1][0] != '-' && nfiles < 64)
                files[nfiles++] = argv[++i];
        } else {
            fprintf(stderr, "usage: tinygpt --data FILE... [--steps N] [--check] [--save CKPT] "
                            "[--load CKPT]\n");
            return 2;
        }
    }
    if (!nfiles) {
        fprintf(stderr, "tinygpt: --data FILE... is required\n");
        return 2;
    }
    size_t len;
    uint8_t *text = read_files(files, nfiles, &len);
    if (len < (size_t)c.T + 2) {
        fprintf(stderr, "tinygpt: the data is shorter than one context\n");
        return 2;
    }
    if (check) {
        /* a small model, so that the check runs in seconds under valgrind */
        config small = { 2, 32, 2, 16, 2 };
        c = small;
    }
    float *loaded = NULL;
    if (load && load_checkpoint(load, &c, &loaded)) {
        free(text);
        return 1;
    }
    model M;
    model_init(&M, c, 1);
    if (loaded) {
        memcpy(M.w, loaded, M.l.total * sizeof(float));
        free(loaded);
        printf("loaded %s\n", load);
    }
    uint8_t *tok = malloc((size_t)c.B * (c.T + 1));
    uint64_t s = 7;
    if (check) {
        batch(text, len, &c, &s, tok);
        int bad = gradcheck(&M, tok);
        model_free(&M);
        free(tok);
        free(text);
        return bad ? 1 : 0;
    }
    printf("tinygpt: %zu parameters, %zu bytes of text, L %d E %d H %d T %d B %d\n",
           M.l.total, len, c.L, c.E, c.H, c.T, c.B);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int step = 1; step <= steps; step++) {
        batch(text, len, &c, &s, tok);
        double loss = forward(&M, tok);
        backward(&M, tok);
        adamw(&M, step, 1e-3f, 0.01f, 1.0f);
        if (step == 1 || step % 20 == 0)
            printf("step %4d loss %.4f (%.3f bits/byte)\n", step, loss, loss / log(2.0));
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    if (steps > 0)
        printf("%.1f ms/step\n", 1e3 * dt / steps);
    /* The same 8 batches (seed 99) every time: a loaded checkpoint gives
     * the loss its training run printed. */
    uint64_t es = 99;
    double eval = 0;
    for (int k = 0; k < 8; k++) {
        batch(text, len, &c, &es, tok);
        eval += forward(&M, tok) / 8;
    }
    printf("eval loss %.6f (%.4f bits/byte)\n", eval, eval / log(2.0));
    int rc = save && save_checkpoint(&M, save) ? 1 : 0;
    model_free(&M);
    free(tok);
    free(text);
    return rc;
}
