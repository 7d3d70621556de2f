/*
 * attn against llm.c's CPU attention, in the same run.
 *
 * llm.c (github.com/karpathy/llm.c) trains GPT-2 in plain C; its CPU
 * attention (train_gpt2.c: attention_forward, attention_backward) is a
 * direct O(T^2) loop over llm.c's layout: the QKV activations (B, T, 3C),
 * the output (B, T, C), causal, NH heads of C / NH.  This program includes
 * train_gpt2.c as it is (its main renamed), fills one input, and times
 * llm.c's forward and backward and attn's (attn_sdpa_execute and
 * attn_sdpa_bwd_execute on head-strided views of the same buffers: no
 * copies) on llm.c's test shape (B 4, T 64, C 768, NH 12) and at T 1024,
 * checking that both compute the same output and input gradient.
 * llm.c's code is not part of attn: benchmarks/llmc-compare.sh fetches
 * nothing, it compiles this file against a checkout you give it (see
 * benchmarks/README.md), with llm.c's own flags (-Ofast -march=native
 * -fopenmp) for the translation unit that holds its code; libattn is the
 * library as built.
 *
 *   benchmarks/llmc-compare.sh LLMC_DIR [--threads N] [--runs R]
 */
#define main llmc_main
#include "train_gpt2.c"
#undef main

#include <attn.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill(float *x, size_t n, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

static float maxdiff(const float *a, const float *b, size_t n, float *scale)
{
    float d = 0.0f, m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float e = fabsf(a[i] - b[i]);
        d = e > d ? e : d;
        m = fabsf(b[i]) > m ? fabsf(b[i]) : m;
    }
    *scale = m;
    return d;
}

#define CHECK(call)                                                              \
    do {                                                                         \
        attn_status st_ = (call);                                                \
        if (st_ != ATTN_OK) {                                                    \
            fprintf(stderr, "%s: %s\n", #call, attn_status_str(st_));            \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static void run(int B, int T, int C, int NH, int threads, int runs)
{
    const int hs = C / NH, C3 = 3 * C;
    const size_t nin = (size_t)B * T * C3, nout = (size_t)B * T * C;
    const size_t natt = (size_t)B * NH * T * T;
    float *inp = malloc(nin * sizeof(float)), *dout = malloc(nout * sizeof(float));
    float *out = malloc(nout * sizeof(float)), *preatt = malloc(natt * sizeof(float));
    float *att = malloc(natt * sizeof(float)), *dinp = malloc(nin * sizeof(float));
    float *dpreatt = malloc(natt * sizeof(float)), *datt = malloc(natt * sizeof(float));
    float *aout = malloc(nout * sizeof(float)), *adinp = malloc(nin * sizeof(float));
    float *lse = malloc((size_t)B * NH * T * sizeof(float));
    if (!inp || !dout || !out || !preatt || !att || !dinp || !dpreatt || !datt || !aout ||
        !adinp || !lse) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    uint64_t seed = 42;
    fill(inp, nin, &seed);
    fill(dout, nout, &seed);

    /* attn on llm.c's buffers: Q, K, V are head-strided views of the
     * (B, T, 3C) activations (K at +C, V at +2C), O and dO of (B, T, C). */
    attn_sdpa_desc d;
    CHECK(attn_sdpa_desc_init(&d));
    d.batch = B;
    d.q_heads = d.kv_heads = NH;
    d.q_len = d.kv_len = T;
    d.qk_dim = d.v_dim = hs;
    d.q = d.k = d.v = (attn_view){ (int64_t)T * C3, hs, C3 };
    d.o = (attn_view){ (int64_t)T * C, hs, C };
    d.window_right = 0;                    /* causal */
    d.want_lse = 1;
    d.lse = (attn_view){ (int64_t)NH * T, T, 1 };
    d.threads = threads;
    attn_sdpa_plan *fp;
    CHECK(attn_sdpa_plan_create(&fp, &d));
    attn_sdpa_args a;
    CHECK(attn_sdpa_args_init(&a));
    a.q = inp;
    a.k = inp + C;
    a.v = inp + 2 * C;
    a.o = aout;
    a.lse = lse;
    attn_sdpa_bwd_desc bd;
    CHECK(attn_sdpa_bwd_desc_init(&bd));
    bd.fwd = d;
    bd.d_o = d.o;
    bd.dq = bd.dk = bd.dv = d.q;
    attn_sdpa_bwd_plan *bp;
    CHECK(attn_sdpa_bwd_plan_create(&bp, &bd));
    attn_sdpa_bwd_args ba;
    CHECK(attn_sdpa_bwd_args_init(&ba));
    ba.q = a.q;
    ba.k = a.k;
    ba.v = a.v;
    ba.o = aout;
    ba.d_o = dout;
    ba.lse = lse;
    ba.dq = adinp;
    ba.dk = adinp + C;
    ba.dv = adinp + 2 * C;
    size_t fws, bws;
    CHECK(attn_sdpa_workspace_size(fp, &fws));
    CHECK(attn_sdpa_bwd_workspace_size(bp, &bws));
    void *fw = aligned_alloc(64, (fws + 63) / 64 * 64 + 64);
    void *bw = aligned_alloc(64, (bws + 63) / 64 * 64 + 64);

    double *t[4];
    for (int k = 0; k < 4; k++)
        t[k] = malloc(runs * sizeof(double));
    for (int r = -1; r < runs; r++) {      /* r = -1: warm-up */
        double t0 = now();
        attention_forward(out, preatt, att, inp, B, T, C, NH);
        double t1 = now();
        /* llm.c's backward accumulates (its step zeroes the grads first) */
        memset(dinp, 0, nin * sizeof(float));
        memset(dpreatt, 0, natt * sizeof(float));
        memset(datt, 0, natt * sizeof(float));
        double t2 = now();
        attention_backward(dinp, dpreatt, datt, dout, inp, att, B, T, C, NH);
        double t3 = now();
        CHECK(attn_sdpa_execute(fp, &a, fw, fws));
        double t4 = now();
        CHECK(attn_sdpa_bwd_execute(bp, &ba, bw, bws));
        double t5 = now();
        if (r >= 0) {
            t[0][r] = t1 - t0;
            t[1][r] = t3 - t2;
            t[2][r] = t4 - t3;
            t[3][r] = t5 - t4;
        }
    }
    float so, sd;
    float eo = maxdiff(aout, out, nout, &so), ed = maxdiff(adinp, dinp, nin, &sd);
    double lf = median(t[0], runs), lb = median(t[1], runs);
    double af = median(t[2], runs), ab = median(t[3], runs);
    printf("| B %d T %d C %d NH %d | %.3f | %.3f | %.1f | %.3f | %.3f | %.1f | %.1f | %.1e / %.1e |\n",
           B, T, C, NH, 1e3 * lf, 1e3 * af, lf / af, 1e3 * lb, 1e3 * ab, lb / ab,
           (lf + lb) / (af + ab), eo / so, ed / sd);
    fflush(stdout);
    if (!(eo <= 1e-4f * so && ed <= 1e-3f * sd)) {
        fprintf(stderr, "attn and llm.c disagree: output %g, dinp %g (relative to the largest)\n",
                eo / so, ed / sd);
        exit(1);
    }
    for (int k = 0; k < 4; k++)
        free(t[k]);
    attn_sdpa_plan_destroy(fp);
    attn_sdpa_bwd_plan_destroy(bp);
    free(fw);
    free(bw);
    free(inp);
    free(dout);
    free(out);
    free(preatt);
    free(att);
    free(dinp);
    free(dpreatt);
    free(datt);
    free(aout);
    free(adinp);
    free(lse);
}

int main(int argc, char **argv)
{
    int threads = 1, runs = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--runs R]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || runs < 1) {
        fprintf(stderr, "--threads and --runs must be positive\n");
        return 2;
    }
    omp_set_num_threads(threads);          /* llm.c's forward is an omp loop */
    printf("attn %s against llm.c's attention_forward / attention_backward "
           "(train_gpt2.c), %d thread(s), median of %d runs; times in ms\n\n",
           attn_version(), threads, runs);
    printf("| shape | llm.c fwd | attn fwd | ratio | llm.c bwd | attn bwd | ratio | "
           "fwd+bwd ratio | max diff O / dQKV (rel.) |\n|---|---|---|---|---|---|---|---|---|\n");
    run(4, 64, 768, 12, threads, runs);
    run(4, 1024, 768, 12, threads, runs < 3 ? runs : 3);
    return 0;
}
