/* attn-bench's shared types and helpers (attn-bench.c: the dense and
 * training cases, the sgemm rate, the read bandwidth and the driver;
 * long.c: the long-sequence cases L1, X1, X2; decode.c: the decode cases
 * S5 (decode row), D1, D2, D3). */
#ifndef ATTN_BENCH_H
#define ATTN_BENCH_H

#include <stddef.h>
#include <stdint.h>

enum bench_kind {
    K_DENSE,     /* SDPA or the MHA layer (S, T cases) */
    K_LINEAR,    /* L1: causal linear attention (elu + 1) */
    K_GLOBAL,    /* X1: window 256 + 256 and 32 global tokens (Longformer) */
    K_BIGBIRD,   /* X2: block 64, 3 window + 2 global + 3 random blocks a row */
    K_DECODE,    /* S5 (decode table), D1-D3: decode against a large KV cache */
};

typedef struct bench_case {
    const char *id, *name;
    int64_t B, Hq, Hkv, n, m, d;
    int causal;    /* top-left causal */
    int padded;    /* kv lengths m, m - m/8, ... per batch */
    int mha;       /* the whole layer (d_model = Hq * d), packed in_proj + bias */
    int extra;     /* not run unless named with --case */
    int train;     /* forward (with logsumexp) + backward */
    double dropout;
    int kind;      /* enum bench_kind */
} bench_case;

typedef struct result {
    int ok;
    int skipped;               /* not run (error says why): not a failure */
    double ms_median, ms_min, ms_max;
    double ms_fwd, ms_bwd;     /* training cases: medians of each half */
    double max_err;
    size_t workspace;
    long peak_rss_kb;
    double fma_local;          /* GFLOP/s: the FMA peak sampled in the case's
                                  own process after each timed run (median) */
    char error[96];
} result;

double now_ms(void);
int cmp_double(const void *a, const void *b);
float frand(void);
float *alloc_fill(size_t count, int fill);
double median_sorted(double *t, int runs);

/* fork, run fn(ctx) in the child, its result back through a pipe. */
int in_child(void (*fn)(void *, result *), void *ctx, result *res);

/* After each timed run of a case: one short sample of the FMA peak, whose
 * median over the case is its result's fma_local (attn-bench.c). */
void peak_sample(void);

/* What the driver measured in this run, for the decode cases. */
typedef struct bench_env {
    int json;
    int do_naive;
    int runs;
    double sgemm_gflops;       /* at this thread count */
    double read_gbs;           /* streaming read bandwidth at this thread count */
    double fma_gflops;         /* FMA peak (registers only) at this thread count */
    size_t l3_bytes;           /* as read from sysconf or /sys (0: unknown) */
    size_t kv_target_bytes;    /* K/V copies per decode case: at least this much */
    const char *blas, *kernel, *simd;
} bench_env;

/* long.c */
double long_useful_flops(const bench_case *c, int impl);
void run_long_case(const bench_case *c, int impl, int nthreads, int runs, result *res);
const char *long_other_name(const bench_case *c);

/* decode.c */
void decode_print_header(const bench_env *env);
void run_decode_case(const bench_case *c, int nthreads, const bench_env *env);
void decode_print_ratios(int nthreads, const bench_env *env);
void decode_print_notes(void);

#endif
