/*
 * attn-demo -- what attn computes, on a sentence and on a real shape.
 *
 * 1. Self-attention over "The cat sat on the mat": hand-made word features
 *    plus a sinusoidal position code, fixed projections W_q, W_k, W_v, two
 *    heads, one attn_sdpa() call that also returns the probabilities, shown
 *    as a heatmap per head.
 * 2. The same with causal attention (window_right = 0, top-left aligned).
 * 3. Sparse attention next to dense: a window of one word on each side plus
 *    "The" as a global token (Longformer's pattern), probabilities side by
 *    side with the dense ones.
 * 4. Linear attention (elu + 1 feature map) next to softmax attention: its
 *    implied weights and its output beside softmax's.
 * 5. A timed case (B=8, H=12, n=m=512, d=64, BHSD, no mask): plan once,
 *    execute repeatedly, median time and GFLOP/s, and the BLAS in use.
 *
 * Usage: attn-demo [--no-bench] [--threads N]
 *        attn-demo --html FILE [--sentence TEXT] [--json FILE] [--window N]
 *                  [--global I,J,...] [--threads N]
 *        attn-demo --html FILE --model CKPT [--sentence TEXT] [--json FILE]
 *                  [--threads N]
 *
 * With --html, the demo writes the interactive attention view instead
 * (demo_html.c, docs/VIEW.md): one self-contained HTML page over the
 * sentence (default "The cat sat on the mat") with every weight computed
 * by attn_sdpa for both heads and every pattern.  With --model, the page
 * shows a trained tinygpt checkpoint's attention over the sentence's bytes
 * instead, every layer and head (only in builds with cblas.h).
 *
 * Colours (ANSI 256) are used only when stdout is a terminal, TERM is not
 * "dumb" and NO_COLOR is unset or empty (https://no-color.org).
 */
/* clock_gettime and CLOCK_MONOTONIC under -std=c11 (POSIX.1b) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <attn.h>

#include "demo_html.h"
#include "demo_model.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Every attn call goes through this: print the status and exit 1. */
#define CHECK(call)                                                          \
    do {                                                                     \
        attn_status st_ = (call);                                            \
        if (st_ != ATTN_OK) {                                                \
            fprintf(stderr, "attn-demo: %s failed: %s\n", #call,             \
                    attn_status_str(st_));                                   \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static void *xalloc(size_t bytes)
{
    /* 64-byte aligned; aligned_alloc wants a multiple of the alignment. */
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "attn-demo: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* ------------------------------------------------------------ tiny PRNG */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

/* splitmix64 */
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(void)
{
    return (float)((double)(rng_next() >> 40) / (double)(1u << 23) - 1.0);
}

/* ------------------------------------------------------------- sentence */

enum { NTOK = 6, DMODEL = DEMO_DMODEL, NHEAD = DEMO_NHEAD, DHEAD = DEMO_DHEAD };

static const char *const tokens[NTOK] = { "The", "cat", "sat", "on", "the", "mat" };

/* The sentence's embeddings (word features of demo_model.c's lexicon plus
 * the position code) and the model's projections. */
static void build_inputs(float x[NTOK][DMODEL], float wq[DMODEL][DMODEL],
                         float wk[DMODEL][DMODEL], float wv[DMODEL][DMODEL])
{
    memset(x, 0, sizeof(float) * NTOK * DMODEL);
    for (int i = 0; i < NTOK; i++) {
        char lower[8];
        size_t len = strlen(tokens[i]);
        for (size_t c = 0; c <= len; c++)
            lower[c] = (char)(tokens[i][c] >= 'A' && tokens[i][c] <= 'Z'
                                  ? tokens[i][c] - 'A' + 'a' : tokens[i][c]);
        if (!demo_lexicon(lower, x[i]))
            demo_hashed_features(tokens[i], len, x[i]);
        demo_position(i, &x[i][F_POS0]);
    }
    demo_weights(wq, wk, wv);
}

/* y[NTOK][DMODEL] = x[NTOK][DMODEL] * w[DMODEL][DMODEL] */
static void project(float y[NTOK][DMODEL], float x[NTOK][DMODEL], float w[DMODEL][DMODEL])
{
    for (int i = 0; i < NTOK; i++)
        for (int j = 0; j < DMODEL; j++) {
            double s = 0.0;
            for (int k = 0; k < DMODEL; k++)
                s += (double)x[i][k] * w[k][j];
            y[i][j] = (float)s;
        }
}

/* -------------------------------------------------------------- heatmap */

static int use_color;

static int color_wanted(void)
{
    const char *no_color = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    if (no_color && no_color[0])
        return 0;
    if (term && !strcmp(term, "dumb"))
        return 0;
    return isatty(STDOUT_FILENO);
}

/* A 256-colour cube index along dark violet -> blue -> teal -> green ->
 * yellow for t in [0, 1]. */
static int heat_color(double t)
{
    static const double stops[5][3] = {
        { 0.27, 0.00, 0.33 }, { 0.23, 0.32, 0.55 }, { 0.13, 0.57, 0.55 },
        { 0.37, 0.79, 0.38 }, { 0.99, 0.91, 0.14 },
    };
    double u = t * 4.0;
    int s = (int)u;
    if (s > 3)
        s = 3;
    double f = u - s;
    int c[3];
    for (int k = 0; k < 3; k++) {
        double v = stops[s][k] + f * (stops[s + 1][k] - stops[s][k]);
        c[k] = (int)lround(v * 5.0);
    }
    return 16 + 36 * c[0] + 6 * c[1] + c[2];
}

static void print_cell(float p)
{
    static const char ramp[] = " .:-=+*#%@";
    if (p == 0.0f) {            /* hidden (exactly zero) */
        printf("      0 ");
        return;
    }
    double t = p < 0.0f ? 0.0 : p > 1.0f ? 1.0 : p;
    char c = ramp[(int)lround(t * 9.0)];
    if (use_color)
        printf("\033[48;5;%dm\033[%dm%c%c %4.2f\033[0m ", heat_color(t),
               t > 0.55 ? 30 : 97, c, c, p);
    else
        printf("%c%c %4.2f ", c, c, p);
}

/* probs: [NHEAD][NTOK][NTOK] */
static void print_heatmaps(const char *title, const float *probs)
{
    printf("%s\n", title);
    for (int h = 0; h < NHEAD; h++) {
        printf("\n  head %d      key:", h);
        for (int j = 0; j < NTOK; j++)
            printf(" %-7s", tokens[j]);
        printf("\n");
        for (int i = 0; i < NTOK; i++) {
            printf("  query %-5s     ", tokens[i]);
            for (int j = 0; j < NTOK; j++)
                print_cell(probs[(h * NTOK + i) * NTOK + j]);
            printf("\n");
        }
    }
    printf("\n  shade \" .:-=+*#%%@\" = probability 0 .. 1; \"0\" = not visible\n\n");
}

/* The sentence's Q, K, V: [S][H][D] row-major (one batch), BSHD views. */
typedef struct qkv { float q[NTOK][DMODEL], k[NTOK][DMODEL], v[NTOK][DMODEL]; } qkv;

static void sentence_qkv(qkv *t)
{
    float x[NTOK][DMODEL], wq[DMODEL][DMODEL], wk[DMODEL][DMODEL], wv[DMODEL][DMODEL];
    build_inputs(x, wq, wk, wv);
    project(t->q, x, wq);
    project(t->k, x, wk);
    project(t->v, x, wv);
}

/* An SDPA desc over the sentence that returns P [1][H][n][m]. */
static void sentence_desc(attn_sdpa_desc *d, int threads)
{
    CHECK(attn_sdpa_desc_init(d));
    d->batch = 1;
    d->q_heads = d->kv_heads = NHEAD;
    d->q_len = d->kv_len = NTOK;
    d->qk_dim = d->v_dim = DHEAD;
    d->q = d->k = d->v = d->o = attn_view_bshd(NHEAD, NTOK, DHEAD);
    d->want_probs = 1;
    d->probs = attn_view_bhsd(NHEAD, NTOK, NTOK);
    d->threads = threads;
}

/* Two [NTOK][NTOK] maps of one head side by side. */
static void print_pair(int head, const char *lname, const float *l, const char *rname,
                       const float *r)
{
    printf("\n  head %d  %-46s   %s\n  %-12s", head, lname, rname, "");
    for (int side = 0; side < 2; side++) {
        for (int j = 0; j < NTOK; j++)
            printf(" %-7s", tokens[j]);
        printf("   ");
    }
    printf("\n");
    for (int i = 0; i < NTOK; i++) {
        printf("  query %-5s", tokens[i]);
        for (int j = 0; j < NTOK; j++)
            print_cell(l[i * NTOK + j]);
        printf("  ");
        for (int j = 0; j < NTOK; j++)
            print_cell(r[i * NTOK + j]);
        printf("\n");
    }
}

/* Run SDPA over the sentence (BSHD views of the projections) and show the
 * probabilities; check O against P V. */
static void sentence(int threads, int causal)
{
    qkv t;
    float (*q)[DMODEL] = t.q, (*k)[DMODEL] = t.k, (*v)[DMODEL] = t.v;
    float o[NTOK][DMODEL];
    float probs[NHEAD * NTOK * NTOK];
    sentence_qkv(&t);

    attn_sdpa_desc d;
    sentence_desc(&d, threads);
    if (causal) {
        d.align = ATTN_ALIGN_TOP_LEFT;
        d.window_left = -1;
        d.window_right = 0;
    }
    attn_sdpa_args a = { 0 };
    a.q = &q[0][0];
    a.k = &k[0][0];
    a.v = &v[0][0];
    a.o = &o[0][0];
    a.probs = probs;
    CHECK(attn_sdpa(&d, &a));

    print_heatmaps(causal ? "Causal self-attention (window_right = 0, top-left): "
                            "each word sees only itself and earlier words"
                          : "Self-attention over \"The cat sat on the mat\" "
                            "(d_model 12, 2 heads of 6, scale 1/sqrt(6))",
                   probs);

    double err = 0.0;
    for (int h = 0; h < NHEAD; h++)
        for (int i = 0; i < NTOK; i++)
            for (int c = 0; c < DHEAD; c++) {
                double s = 0.0;
                for (int j = 0; j < NTOK; j++)
                    s += (double)probs[(h * NTOK + i) * NTOK + j] * v[j][h * DHEAD + c];
                double e = fabs(s - o[i][h * DHEAD + c]);
                err = e > err ? e : err;
            }
    printf("  output O checked against P V: max |difference| = %.1e\n\n", err);
}

/* Dense attention next to sparse attention (window 1 + 1, "The" global):
 * the same scores, renormalized over the visible set. */
static void sparse_vs_dense(int threads)
{
    qkv t;
    float o[NTOK][DMODEL], dense[NHEAD * NTOK * NTOK], sparse[NHEAD * NTOK * NTOK];
    sentence_qkv(&t);
    attn_sdpa_desc d;
    sentence_desc(&d, threads);
    attn_sdpa_args a = { .q = &t.q[0][0], .k = &t.k[0][0], .v = &t.v[0][0], .o = &o[0][0],
                         .probs = dense };
    CHECK(attn_sdpa(&d, &a));
    /* Longformer's pattern: one word on each side, and "The" (token 0)
     * global both ways: every word sees it and it sees every word. */
    static const uint8_t global[NTOK] = { 1, 0, 0, 0, 0, 0 };
    d.window_left = d.window_right = 1;
    d.use_global_k = d.use_global_q = 1;
    a.global_k = a.global_q = global;
    a.probs = sparse;
    CHECK(attn_sdpa(&d, &a));
    printf("Sparse attention next to dense: window_left = window_right = 1 and \"The\" as a\n"
           "global token (use_global_k, use_global_q); the hidden pairs are never computed\n");
    for (int h = 0; h < NHEAD; h++)
        print_pair(h, "dense", dense + h * NTOK * NTOK, "window 1 + 1, global \"The\"",
                   sparse + h * NTOK * NTOK);
    printf("\n");
}

static double elu1(double x) { return x > 0 ? x + 1.0 : exp(x); }

/* Linear attention (elu + 1) next to softmax attention: the weights it
 * implies, phi(q_i).phi(k_j) / sum_j phi(q_i).phi(k_j), beside softmax's
 * probabilities, and the two outputs of the first head. */
static void linear_vs_softmax(int threads)
{
    qkv t;
    float so[NTOK][DMODEL], lo[NTOK][DMODEL], probs[NHEAD * NTOK * NTOK];
    float lw[NHEAD * NTOK * NTOK];
    sentence_qkv(&t);
    attn_sdpa_desc d;
    sentence_desc(&d, threads);
    attn_sdpa_args a = { .q = &t.q[0][0], .k = &t.k[0][0], .v = &t.v[0][0], .o = &so[0][0],
                         .probs = probs };
    CHECK(attn_sdpa(&d, &a));

    attn_linear_desc ld;
    CHECK(attn_linear_desc_init(&ld));
    ld.batch = 1;
    ld.q_heads = ld.kv_heads = NHEAD;
    ld.q_len = ld.kv_len = NTOK;
    ld.qk_dim = ld.v_dim = DHEAD;
    ld.q = ld.k = ld.v = ld.o = attn_view_bshd(NHEAD, NTOK, DHEAD);
    ld.threads = threads;
    attn_linear_args la = { .q = &t.q[0][0], .k = &t.k[0][0], .v = &t.v[0][0], .o = &lo[0][0] };
    CHECK(attn_linear(&ld, &la));

    /* The implied weights, and the output they give (to check attn's). */
    double err = 0.0;
    for (int h = 0; h < NHEAD; h++)
        for (int i = 0; i < NTOK; i++) {
            double w[NTOK], sum = 0.0;
            for (int j = 0; j < NTOK; j++) {
                w[j] = 0.0;
                for (int c = 0; c < DHEAD; c++)
                    w[j] += elu1(t.q[i][h * DHEAD + c]) * elu1(t.k[j][h * DHEAD + c]);
                sum += w[j];
            }
            for (int j = 0; j < NTOK; j++)
                lw[(h * NTOK + i) * NTOK + j] = (float)(w[j] / (sum + 1e-6));
            for (int c = 0; c < DHEAD; c++) {
                double y = 0.0;
                for (int j = 0; j < NTOK; j++)
                    y += w[j] / (sum + 1e-6) * t.v[j][h * DHEAD + c];
                const double e = fabs(y - lo[i][h * DHEAD + c]);
                err = e > err ? e : err;
            }
        }
    printf("Linear attention (attn_linear, feature map elu + 1, no softmax) next to softmax\n"
           "attention: the weights phi(q).phi(k) / sum imply are flatter, since phi(x) > 0\n"
           "is no exponential\n");
    for (int h = 0; h < NHEAD; h++)
        print_pair(h, "softmax", probs + h * NTOK * NTOK, "linear (implied weights)",
                   lw + h * NTOK * NTOK);
    printf("\n  outputs of head 0 (first 4 of 6 channels):\n  %-6s %-32s %s\n", "", "softmax",
           "linear");
    for (int i = 0; i < NTOK; i++) {
        printf("  %-6s", tokens[i]);
        for (int c = 0; c < 4; c++)
            printf(" %7.3f", so[i][c]);
        printf("    ");
        for (int c = 0; c < 4; c++)
            printf(" %7.3f", lo[i][c]);
        printf("\n");
    }
    printf("  linear output checked against its implied weights times V: max |difference| = "
           "%.1e\n\n", err);
}

/* ------------------------------------------------------------ benchmark */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *threading_name(attn_blas_threading t)
{
    switch (t) {
    case ATTN_BLAS_THREADING_SEQUENTIAL: return "sequential";
    case ATTN_BLAS_THREADING_PTHREADS: return "pthreads";
    case ATTN_BLAS_THREADING_OPENMP: return "OpenMP";
    case ATTN_BLAS_THREADING_UNKNOWN: break;
    }
    return "unknown";
}

static void bench(int threads)
{
    enum { B = 8, H = 12, N = 512, M = 512, D = 64, WARMUP = 2,
           MIN_RUNS = 10, MAX_RUNS = 50 };
    const double budget_s = 3.0;   /* stop timing after MIN_RUNS and this */

    attn_blas_info info;
    CHECK(attn_blas_query(&info));

    attn_sdpa_desc d;
    CHECK(attn_sdpa_desc_init(&d));
    d.batch = B;
    d.q_heads = d.kv_heads = H;
    d.q_len = N;
    d.kv_len = M;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bhsd(H, N, D);
    d.k = d.v = attn_view_bhsd(H, M, D);
    d.threads = threads;

    const size_t nq = (size_t)B * H * N * D, nk = (size_t)B * H * M * D;
    float *q = xalloc(nq * sizeof(float)), *o = xalloc(nq * sizeof(float));
    float *k = xalloc(nk * sizeof(float)), *v = xalloc(nk * sizeof(float));
    rng_state = 2024;
    for (size_t i = 0; i < nq; i++)
        q[i] = rng_float();
    for (size_t i = 0; i < nk; i++) {
        k[i] = rng_float();
        v[i] = rng_float();
    }

    attn_sdpa_plan *plan = NULL;
    CHECK(attn_sdpa_plan_create(&plan, &d));
    size_t ws_bytes = 0;
    CHECK(attn_sdpa_workspace_size(plan, &ws_bytes));
    void *ws = xalloc(ws_bytes);

    attn_sdpa_args a = { 0 };
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = o;
    for (int r = 0; r < WARMUP; r++)
        CHECK(attn_sdpa_execute(plan, &a, ws, ws_bytes));

    double times[MAX_RUNS];
    int runs = 0;
    double start = now_s();
    while (runs < MAX_RUNS && (runs < MIN_RUNS || now_s() - start < budget_s)) {
        double t0 = now_s();
        CHECK(attn_sdpa_execute(plan, &a, ws, ws_bytes));
        times[runs++] = now_s() - t0;
    }
    qsort(times, (size_t)runs, sizeof times[0], cmp_double);
    double median = runs % 2 ? times[runs / 2]
                             : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
    double flops = 4.0 * B * H * (double)N * M * D;

    int nthreads = !info.openmp ? 1 : threads ? threads : info.max_threads;
    printf("Benchmark S1: B=%d Hq=Hkv=%d n=m=%d d=%d, BHSD, no mask\n", B, H, N, D);
    printf("  runs           : %d warm-up + %d timed (plan once, workspace %.1f KiB)\n",
           WARMUP, runs, (double)ws_bytes / 1024.0);
    printf("  median         : %.2f ms (min %.2f ms)\n", median * 1e3, times[0] * 1e3);
    printf("  throughput     : %.1f GFLOP/s (4*B*H*n*m*d = %.2f GFLOP per call)\n",
           flops / median * 1e-9, flops * 1e-9);
    printf("  threads        : %d%s\n", nthreads,
           info.openmp ? " (OpenMP)" : " (built without OpenMP)");
    printf("  attn           : %s, SIMD kernels %s\n", attn_version(), info.simd);
    printf("  BLAS backend   : %s (build)\n", info.backend);
    printf("  BLAS loaded    : %s, %s\n", info.loaded,
           info.library[0] ? info.library : "(linked into attn)");
    if (info.version[0])
        printf("  BLAS version   : %s\n", info.version);
    printf("  BLAS kernel    : %s\n", info.kernel[0] ? info.kernel : "(not reported)");
    printf("  BLAS threading : %s (%s)\n", threading_name(info.threading),
           info.openmp ? "one thread per call inside attn's threads"
                       : "attn runs on the calling thread");

    CHECK(attn_sdpa_plan_destroy(plan));
    free(ws);
    free(q);
    free(k);
    free(v);
    free(o);
}

/* ----------------------------------------------------------------- main */

/* VIEW.md where the Debian package attn-doc installs it (uncompressed:
 * debian/rules excludes .md from dh_compress); .ci/packages.sh checks that
 * the path --help names exists once the packages are installed. */
#ifndef ATTN_DEMO_VIEW_DOC
#define ATTN_DEMO_VIEW_DOC "/usr/share/doc/attn-doc/VIEW.md"
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: attn-demo [--no-bench] [--threads N]\n"
               "       attn-demo --html FILE [--sentence TEXT] [--json FILE] [--window N]\n"
               "                 [--global I,J,...] [--threads N]\n"
               "       attn-demo --html FILE --model CKPT [--sentence TEXT] [--json FILE]\n"
               "                 [--threads N]\n"
               "  --no-bench     skip the timed benchmark case\n"
               "  --threads N    OpenMP threads for attn (0 = all, the default)\n"
               "  --html FILE    write the interactive attention view to FILE (- = stdout)\n"
               "                 instead of the terminal demo (the view is described in\n"
               "                 " ATTN_DEMO_VIEW_DOC ",\n"
               "                 docs/VIEW.md in attn's source tree)\n"
               "  --sentence T   the view's sentence (default \"The cat sat on the mat\"),\n"
               "                 at most %d tokens: words, and each punctuation mark\n"
               "  --json FILE    also write the view's data block (JSON) to FILE\n"
               "  --window N     the window pattern's tokens on each side (default 1)\n"
               "  --global LIST  the global tokens, comma-separated indices (default 0)\n"
               "  --model CKPT   the view shows this tinygpt checkpoint's attention (every\n"
               "                 layer and head, causal) over the sentence's bytes, at most\n"
               "                 %d and the model's context, instead of the toy model's%s\n",
            DEMO_HTML_MAX_TOKENS, DEMO_HTML_MAX_BYTES,
#ifdef ATTN_DEMO_GPT
            ""
#else
            "\n                 (not available in this build: no cblas.h)"
#endif
            );
}

/* A decimal integer in [lo, hi], the whole string. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long t = strtol(s, &end, 10);
    if (errno || end == s || *end || t < lo || t > hi)
        return -1;
    *out = (int)t;
    return 0;
}

static int parse_global(const char *s, demo_html_opts *o)
{
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    strcpy(buf, s);
    o->n_global = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (o->n_global == DEMO_HTML_MAX_GLOBAL ||
            parse_int(tok, 0, DEMO_HTML_MAX_TOKENS - 1, &o->global[o->n_global]))
            return -1;
        o->n_global++;
    }
    return o->n_global ? 0 : -1;
}

static int parse_threads(const char *s, int *out)
{
    char *end;
    errno = 0;
    long t = strtol(s, &end, 10);
    if (errno || end == s || *end || t < 0 || t > 1024)
        return -1;
    *out = (int)t;
    return 0;
}

int main(int argc, char **argv)
{
    int bench_on = 1, threads = 0, html_only = 0;
    demo_html_opts html = { .window = 1, .global = { 0 }, .n_global = 1 };
    for (int i = 1; i < argc; i++) {
        const int has_value = i + 1 < argc;
        if (!strcmp(argv[i], "--html") && has_value) {
            html.html_path = argv[++i];
        } else if (!strcmp(argv[i], "--sentence") && has_value) {
            html.sentence = argv[++i];
            html_only = 1;
        } else if (!strcmp(argv[i], "--json") && has_value) {
            html.json_path = argv[++i];
            html_only = 1;
        } else if (!strcmp(argv[i], "--window") && has_value) {
            if (parse_int(argv[++i], 0, DEMO_HTML_MAX_TOKENS, &html.window)) {
                fprintf(stderr, "attn-demo: bad window '%s' (0 to %d)\n", argv[i],
                        DEMO_HTML_MAX_TOKENS);
                return 2;
            }
            html_only = html.pattern_options = 1;
        } else if (!strcmp(argv[i], "--global") && has_value) {
            if (parse_global(argv[++i], &html)) {
                fprintf(stderr, "attn-demo: bad global token list '%s' (1 to %d indices "
                                "from 0, comma-separated)\n", argv[i], DEMO_HTML_MAX_GLOBAL);
                return 2;
            }
            html_only = html.pattern_options = 1;
        } else if (!strcmp(argv[i], "--model") && has_value) {
            html.model_path = argv[++i];
            html_only = 1;
        } else if (!strcmp(argv[i], "--no-bench")) {
            bench_on = 0;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (parse_threads(argv[++i], &threads)) {
                fprintf(stderr, "attn-demo: bad thread count '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strncmp(argv[i], "--threads=", 10)) {
            if (parse_threads(argv[i] + 10, &threads)) {
                fprintf(stderr, "attn-demo: bad thread count '%s'\n", argv[i] + 10);
                return 2;
            }
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (html.html_path) {
        html.threads = threads;
        return demo_html_run(&html);
    }
    if (html_only) {
        fprintf(stderr, "attn-demo: --sentence, --json, --window, --global and --model go with "
                        "--html\n");
        usage(stderr);
        return 2;
    }
    use_color = color_wanted();

    printf("attn %s demo\n\n", attn_version());
    sentence(threads, 0);
    sentence(threads, 1);
    sparse_vs_dense(threads);
    linear_vs_softmax(threads);
    if (bench_on)
        bench(threads);
    return 0;
}
