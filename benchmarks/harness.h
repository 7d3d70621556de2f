/* attn-bench's harness (harness.c): the one timing routine every timed loop
 * goes through, the child process each measurement runs in, buffers, the
 * machine's limits (sgemm rate, FMA peak, read bandwidth, L3), the BLAS
 * calls of the comparison paths, and small output helpers.  It knows
 * nothing of the cases (cases.h) and uses attn only through attn.h. */
#ifndef ATTN_BENCH_HARNESS_H
#define ATTN_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

/* What one measurement sends back from its child process. */
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
    double read_gbs;           /* decode rows: the read bandwidth of the
                                  moments they ran in, the best of one
                                  sample after each run of their calls
                                  (0: none) */
    char error[96];
} result;

/* What the driver measured in this run, for the decode cases. */
enum { BENCH_MAX_RUNS = 8 };   /* run sizes bench_env holds */

typedef struct bench_env {
    int json;
    int do_naive;
    int runs;
    double sgemm_gflops;       /* at this thread count */
    double read_gbs;           /* streaming read bandwidth at this thread count */
    double fma_gflops;         /* FMA peak (registers only) at this thread count */
    size_t l3_bytes;           /* as read from sysconf or /sys (0: unknown) */
    size_t kv_target_bytes;    /* K/V copies per decode case: at least this much */
    int nruns;                 /* D2's paged runs: the read bandwidth over runs of */
    size_t run_bytes[BENCH_MAX_RUNS]; /* run_bytes in a random order */
    double run_gbs[BENCH_MAX_RUNS];   /* (read_bandwidth_runs) at this thread
                                         count, 0 where not measured */
    const char *blas, *kernel, *simd;
} bench_env;

/* ---- timing --------------------------------------------------------------- */

double now_ms(void);

/* A timed call: 0 to go on, anything else stops the timing (that value is
 * bench_time's status).  A call made of two halves (a forward and a
 * backward) sets *split to now_ms() between them. */
typedef int (*bench_fn)(void *ctx, double *split);

typedef struct bench_timing {
    int runs;          /* timed runs, >= 1 */
    int warmup;        /* untimed runs before them */
    int per_run;       /* calls per run, the run's time divided by it (0: 1) */
    int sample_peak;   /* peak_sample() after each timed run */
    void (*after_run)(void *);   /* called after each timed run, if set */
    void *after_ctx;
} bench_timing;

typedef struct bench_stats {
    double median, min, max;    /* ms per call over the timed runs */
    double split_median[2];     /* when fn set *split: each half's median */
    int status;                 /* fn's nonzero return, or -1 out of memory; 0 */
} bench_stats;

/* warmup + runs runs of per_run calls of fn; returns stats->status. */
int bench_time(bench_fn fn, void *ctx, const bench_timing *timing, bench_stats *stats);

/* The median of t[0 .. count), sorting t. */
double median_sorted(double *t, int count);
int cmp_double(const void *a, const void *b);

/* ---- processes, buffers, threads ------------------------------------------ */

/* fork, run fn(ctx, res) in the child, its result back through a pipe;
 * -1 (res->error set) when the child failed. */
int in_child(void (*fn)(void *ctx, result *res), void *ctx, result *res);

/* A timed measurement's figures into res: times, peak RSS of the process. */
void result_set_times(result *res, const bench_stats *stats);
/* res->error = what (ok stays 0). */
void result_fail(result *res, const char *what);
/* What a bench_time status says: attn_status_str, or "out of memory". */
const char *status_str(int status);

float frand(void);                          /* uniform in [-1, 1), a fixed stream */
float *alloc_fill(size_t count, int fill);  /* 64-byte aligned; filled with frand() */
/* perm[i] = i, then (shuffle) a Fisher-Yates permutation drawn from frand() */
void permutation(int32_t *perm, int64_t n, int shuffle);
long peak_rss_kb(void);

/* body(ctx, tid) on nthreads OpenMP threads (one when nitems < 2), each
 * with an OpenMP thread count of 1 for what it calls (an OpenMP BLAS then
 * runs on the calling thread, as inside attn); body shares its items out
 * with `#pragma omp for`. */
void bench_parallel(int nthreads, int64_t nitems, void (*body)(void *ctx, int tid), void *ctx);

/* ---- the BLAS of the comparison paths -------------------------------------- */

/* Once, before any measurement: a BLAS with a process-wide thread count (a
 * pthreads OpenBLAS) is set to one thread; every BLAS call here is made on
 * one thread of a parallel region, as attn makes them. */
void bench_blas_init(void);

/* C[M][N] = alpha A[M][K] op(B) + beta C, row-major; op(B) = B[K][N], or
 * B[N][K]^T when trans_b. */
void bench_sgemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
/* C[M][N] = alpha A[K][M]^T B[K][N] + beta C, row-major. */
void bench_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc);

/* ---- the machine's limits ------------------------------------------------- */

/* GFLOP/s of the BLAS's sgemm, every thread its own 1024^3 product. */
double sgemm_rate(int nthreads);
/* GFLOP/s of independent register-only FMA chains (AVX-512 or AVX2; 0
 * without either). */
double fma_peak(int nthreads);
/* GFLOP/s of independent VDPBF16PS chains (4 flops a lane), 0 without
 * AVX512_BF16: the peak of the BF16 products. */
double bf16_peak(int nthreads);
/* GB/s of a streaming read of `bytes`, every thread its own part. */
double read_bandwidth(int nthreads, size_t bytes);
/* The seconds of one streaming read of [buf, buf + bytes) on nthreads
 * threads, every thread its own part (memory the caller owns and has made
 * present; from buf rounded up to 64 bytes, a multiple of 256 bytes a
 * thread), and in *read the bytes it read; 0 when nothing was read. */
double read_pass(int nthreads, const void *buf, size_t bytes, size_t *read);
/* The same over runs of `run` bytes (a multiple of 64) in a random order,
 * as a paged KV cache is read (0 on failure). */
double read_bandwidth_runs(int nthreads, size_t bytes, size_t run);
/* The last-level cache's size: sysconf, else /sys, else 0. */
size_t l3_size(void);

/* The FMA peak sampled during a case, in its own process: start, then one
 * short pass (about 2 ms) per peak_sample() (bench_time calls it after
 * each timed run when asked), then the median of the samples (0: none). */
void peak_sample_start(int nthreads);
void peak_sample(void);
double peak_sample_finish(void);

/* ---- output --------------------------------------------------------------- */

/* x as "%.3g", or "null" when x is NaN (JSON has no NaN). */
const char *json_g(char *buf, size_t size, double x);

#endif
