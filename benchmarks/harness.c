/* attn-bench's harness: see harness.h. */
#include "attn_config.h"
#include "attn.h"
#include "harness.h"

/* The BLAS header: benchmarks/meson.build sets BENCH_CBLAS_HEADER where
 * attn_config.h has no ATTN_CBLAS_HEADER (blis.h, mkl_cblas.h).  A BLIS
 * built without its CBLAS layer leaves BENCH_INTERNAL_SGEMM: then, and only
 * then, the comparison paths call attn's own sgemm seam (lib/blas/blas.h,
 * attn_sgemm over bli_sgemm_ex), the one internal header used here. */
#if defined(BENCH_INTERNAL_SGEMM)
#include "blas/blas.h"
#elif defined(BENCH_CBLAS_HEADER)
#include BENCH_CBLAS_HEADER
#else
#include ATTN_CBLAS_HEADER
#endif

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if ATTN_HAVE_OPENMP
#include <omp.h>
#endif
#if ATTN_HAVE_X86_KERNELS
#include <immintrin.h>
#endif

/* ---- timing --------------------------------------------------------------- */

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

double median_sorted(double *t, int count)
{
    qsort(t, (size_t)count, sizeof *t, cmp_double);
    return count % 2 ? t[count / 2] : 0.5 * (t[count / 2 - 1] + t[count / 2]);
}

int bench_time(bench_fn fn, void *ctx, const bench_timing *timing, bench_stats *stats)
{
    const int runs = timing->runs, per = timing->per_run > 1 ? timing->per_run : 1;
    memset(stats, 0, sizeof *stats);
    double *t = malloc(sizeof(double) * 3 * (size_t)runs);
    if (!t)
        return stats->status = -1;
    double *first = t + runs, *second = first + runs;
    int split = 0;
    for (int r = -timing->warmup; r < runs; r++) {
        double mark = NAN;
        const double t0 = now_ms();
        for (int k = 0; k < per; k++)
            if ((stats->status = fn(ctx, &mark)) != 0) {
                free(t);
                return stats->status;
            }
        const double t1 = now_ms();
        if (r < 0)
            continue;
        t[r] = (t1 - t0) / per;
        if (mark == mark) {
            first[r] = mark - t0;
            second[r] = t1 - mark;
            split = 1;
        }
        if (timing->sample_peak)
            peak_sample();
        if (timing->after_run)
            timing->after_run(timing->after_ctx);
    }
    stats->median = median_sorted(t, runs);
    stats->min = t[0];
    stats->max = t[runs - 1];
    if (split) {
        stats->split_median[0] = median_sorted(first, runs);
        stats->split_median[1] = median_sorted(second, runs);
    }
    free(t);
    return 0;
}

/* ---- processes, buffers, threads ------------------------------------------ */

int in_child(void (*fn)(void *, result *), void *ctx, result *res)
{
    int fd[2];
    memset(res, 0, sizeof *res);
    if (pipe(fd))
        return -1;
    fflush(stdout);
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

long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

void result_set_times(result *res, const bench_stats *stats)
{
    res->ms_median = stats->median;
    res->ms_min = stats->min;
    res->ms_max = stats->max;
    res->peak_rss_kb = peak_rss_kb();
}

void result_fail(result *res, const char *what)
{
    snprintf(res->error, sizeof res->error, "%s", what);
}

const char *status_str(int status)
{
    return status < 0 ? "out of memory" : attn_status_str((attn_status)status);
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

void permutation(int32_t *perm, int64_t n, int shuffle)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = shuffle ? n - 1 : 0; i > 0; i--) {
        const int64_t r = (int64_t)((frand() * 0.5f + 0.5f) * (float)(i + 1)) % (i + 1);
        const int32_t tmp = perm[i];
        perm[i] = perm[r];
        perm[r] = tmp;
    }
}

void bench_parallel(int nthreads, int64_t nitems, void (*body)(void *, int), void *ctx)
{
#if ATTN_HAVE_OPENMP
#pragma omp parallel num_threads(nthreads) if (nthreads > 1 && nitems > 1)
    {
        /* the per-task thread count: an OpenMP BLAS called in body sees 1 */
        omp_set_num_threads(1);
        body(ctx, omp_get_thread_num());
    }
#else
    (void)nthreads;
    (void)nitems;
    body(ctx, 0);
#endif
}

/* ---- the BLAS of the comparison paths -------------------------------------- */

void bench_blas_init(void)
{
    attn_blas_info bi;
    if (attn_blas_query(&bi) != ATTN_OK || bi.threading != ATTN_BLAS_THREADING_PTHREADS)
        return;
    /* OpenBLAS's pthreads build has only a process-wide count (attn sets
     * and restores it around each of its regions); found by name, so that
     * nothing here depends on which BLAS is linked */
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
    if (set)
        set(1);
}

void bench_sgemm(int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
#if defined(BENCH_INTERNAL_SGEMM)
    attn_sgemm(trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
                A, lda, B, ldb, beta, C, ldc);
#endif
}

void bench_sgemm_tn(int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc)
{
#if defined(BENCH_INTERNAL_SGEMM)
    attn_sgemm_tn(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
#endif
}

/* ---- the machine's limits ------------------------------------------------- */

/* The best rate (work / 1e6 per ms: GFLOP/s for flops, GB/s for bytes) of
 * `passes` passes of body on nthreads threads after `warmup` untimed ones;
 * the per-thread sums body writes are read afterwards, so its work cannot
 * be optimized away. */
typedef struct pass_ctx {
    int nthreads;
    void (*body)(void *, int);
    void *ctx;
} pass_ctx;

static int one_pass(void *arg, double *split)
{
    const pass_ctx *p = arg;
    (void)split;
    bench_parallel(p->nthreads, p->nthreads, p->body, p->ctx);
    return 0;
}

static double best_rate(int nthreads, void (*body)(void *, int), void *ctx, double work, int warmup,
                        int passes, const float *sums)
{
    pass_ctx p = { nthreads, body, ctx };
    const bench_timing timing = { .runs = passes, .warmup = warmup };
    bench_stats st;
    if (bench_time(one_pass, &p, &timing, &st))
        return 0;
    volatile float sink = 0;
    for (int t = 0; t < nthreads; t++)
        sink += sums[t];
    (void)sink;
    return work / (st.min * 1e6);
}

/* sgemm rate of this BLAS at this thread count: every thread multiplies its
 * own 1024^3 matrices, as attn's work items each call a single-threaded
 * sgemm. */
typedef struct rate_ctx {
    int N, count;
    const float *a, *b;
    float *c;
    float *sums;
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
        bench_sgemm(0, x->N, x->N, x->N, 1.0f, x->a + off, x->N, x->b + off, x->N, 0.0f,
                    x->c + off, x->N);
        x->sums[i] = x->c[off];
    }
}

double sgemm_rate(int nthreads)
{
    const int N = 1024, reps = 24;
    float *a = alloc_fill((size_t)N * N * nthreads, 1), *b = alloc_fill((size_t)N * N * nthreads, 1);
    float *c = alloc_fill((size_t)N * N * nthreads, 0), sums[64] = { 0 };
    if (!a || !b || !c || nthreads > 64)
        return 0;
    const rate_ctx ctx = { N, nthreads, a, b, c, sums };
    /* the best of reps - 1 passes, the first left out */
    return best_rate(nthreads, rate_body, (void *)&ctx, 2.0 * N * N * N * nthreads, 1, reps - 1,
                     sums);
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

/* The BF16 peak: the same with VDPBF16PS (4 flops a lane: two products
 * and two additions), where the CPU has AVX512_BF16. */
#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AVX512BF16
__attribute__((target("avx512f,avx512bf16"))) static float bf16_loop(long iters)
{
    __m512 a[12];
    const __m512i x = _mm512_set1_epi32(0x3F803F80), y = _mm512_set1_epi32(0x33803380);
    for (int k = 0; k < 12; k++)
        a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = _mm512_dpbf16_ps(a[k], (__m512bh)x, (__m512bh)y);
    for (int k = 1; k < 12; k++)
        a[0] = _mm512_add_ps(a[0], a[k]);
    return _mm512_reduce_add_ps(a[0]);
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
#if ATTN_HAVE_AVX512BF16
    if (x->isa == 32) {
        x->sums[tid] = bf16_loop(x->iters);
        return;
    }
#endif
    x->sums[tid] = x->isa == 16 ? fma_loop_avx512(x->iters) : fma_loop_avx2(x->iters);
#else
    (void)x;
    (void)tid;
#endif
}

static double fma_peak_iters(int nthreads, long iters, int passes)
{
    int lanes = 0;
#if ATTN_HAVE_X86_KERNELS
    lanes = __builtin_cpu_supports("avx512f") ? 16
          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 8 : 0;
#endif
    float sums[64] = { 0 };
    if (!lanes || nthreads > 64)
        return 0;
    const fma_ctx ctx = { iters, lanes, sums };
    return best_rate(nthreads, fma_body, (void *)&ctx,
                     2.0 * 12 * lanes * (double)ctx.iters * nthreads, 0, passes, sums);
}

double fma_peak(int nthreads)
{
    return fma_peak_iters(nthreads, 20L * 1000 * 1000, 4);
}

double bf16_peak(int nthreads)
{
    float sums[64] = { 0 };
    int have = 0;
#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AVX512BF16
    have = __builtin_cpu_supports("avx512bf16");
#endif
    if (!have || nthreads > 64)
        return 0;
    const fma_ctx ctx = { 20L * 1000 * 1000, 32, sums };
    /* 12 chains of 16 lanes, 4 flops each */
    return best_rate(nthreads, fma_body, (void *)&ctx, 4.0 * 12 * 16 * (double)ctx.iters * nthreads,
                     0, 4, sums);
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

/* The widest loop bw_body can run here: 2 AVX-512, 1 AVX2, 0 plain C. */
static int bw_isa(void)
{
#if ATTN_HAVE_X86_KERNELS
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#else
    return 0;
#endif
}

double read_bandwidth(int nthreads, size_t bytes)
{
    const size_t unit = 64 * sizeof(float) * (size_t)nthreads;
    bytes = bytes / unit * unit;
    float sums[64] = { 0 };
    if (nthreads > 64 || !bytes)
        return 0;
    /* every page present and private (an untouched page reads as the
     * shared zero page, from the cache): made so at once where the kernel
     * can (MADV_POPULATE_WRITE, about 0.2 s a GiB on the VMs here, where a
     * first touch page by page cost about 3 ms a MiB), else written */
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return 0;
    float *buf = mem;
    int present = 0;
#ifdef MADV_POPULATE_WRITE
    present = madvise(mem, bytes, MADV_POPULATE_WRITE) == 0;
#endif
    for (size_t i = 0; !present && i < bytes / sizeof(float); i++)
        buf[i] = (float)(i & 7);
    const bw_ctx ctx = { buf, bytes / sizeof(float), nthreads, bw_isa(), sums };
    /* the first pass warms the threads and the TLB: the best of 3 after it */
    const double best = best_rate(nthreads, bw_body, (void *)&ctx, (double)bytes, 1, 3, sums);
    munmap(mem, bytes);
    return best;
}

double read_pass(int nthreads, const void *buf, size_t bytes, size_t *read)
{
    float sums[64] = { 0 };
    *read = 0;
    if (nthreads < 1 || nthreads > 64)
        return 0;
    const uintptr_t a = ((uintptr_t)buf + 63) & ~(uintptr_t)63;
    const size_t skip = (size_t)(a - (uintptr_t)buf), unit = 64 * sizeof(float) * (size_t)nthreads;
    if (bytes < skip + unit)
        return 0;
    const size_t n = (bytes - skip) / unit * unit;
    const bw_ctx ctx = { (const float *)a, n / sizeof(float), nthreads, bw_isa(), sums };
    /* one pass, no warm-up: GB/s, back to seconds */
    const double gbs = best_rate(nthreads, bw_body, (void *)&ctx, (double)n, 0, 1, sums);
    if (gbs <= 0)
        return 0;
    *read = n;
    return (double)n / (gbs * 1e9);
}

/* The read bandwidth over runs of `run` bytes (a multiple of 64) taken in
 * the order of a random permutation, as a paged KV cache is read: each
 * thread sums its share of the permutation, run by run, asking for the run
 * RUNS_AHEAD places on a line at a time as it reads (without that, a
 * plain loop read such runs at a third of the streaming rate here).
 * Against read_bandwidth it tells what the placement costs this machine's
 * memory (D2's paged rows read runs of 16 rows of one head); not a
 * ceiling: attn's kernels, with work between the loads, can do better. */
enum { RUNS_AHEAD = 2 };
typedef struct runs_ctx {
    const char *buf;
    const int32_t *order;
    size_t nruns, run;
    int parts, isa;
    float *sums;
} runs_ctx;

#if ATTN_HAVE_X86_KERNELS
__attribute__((target("avx512f"))) static float run_sum_avx512(const char *p, const char *ahead,
                                                               size_t bytes)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    size_t o = 0;
    for (; o + 128 <= bytes; o += 128) {
        _mm_prefetch(ahead + o, _MM_HINT_T0);
        _mm_prefetch(ahead + o + 64, _MM_HINT_T0);
        a0 = _mm512_add_ps(a0, _mm512_load_ps((const float *)(p + o)));
        a1 = _mm512_add_ps(a1, _mm512_load_ps((const float *)(p + o + 64)));
    }
    if (o < bytes) {
        _mm_prefetch(ahead + o, _MM_HINT_T0);
        a0 = _mm512_add_ps(a0, _mm512_load_ps((const float *)(p + o)));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}
#endif

static float run_sum_c(const char *p, const char *ahead, size_t bytes)
{
    float acc[16] = { 0 };
    for (size_t o = 0; o < bytes; o += 64) {
        __builtin_prefetch(ahead + o, 0, 3);
        for (int k = 0; k < 16; k++)
            acc[k] += ((const float *)(const void *)(p + o))[k];
    }
    float s = 0;
    for (int k = 0; k < 16; k++)
        s += acc[k];
    return s;
}

static void runs_body(void *arg, int tid)
{
    const runs_ctx *x = arg;
    (void)tid;
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int part = 0; part < x->parts; part++) {
        const size_t per = x->nruns / (size_t)x->parts;
        float acc = 0;
        const size_t i0 = per * (size_t)part, i1 = i0 + per;
        for (size_t i = i0; i < i1; i++) {
            const char *r = x->buf + (size_t)x->order[i] * x->run;
            const char *ahead = x->buf + (size_t)x->order[i + RUNS_AHEAD < i1 ? i + RUNS_AHEAD : i] * x->run;
#if ATTN_HAVE_X86_KERNELS
            if (x->isa)
                acc += run_sum_avx512(r, ahead, x->run);
            else
#endif
                acc += run_sum_c(r, ahead, x->run);
        }
        x->sums[part] = acc;
    }
}

double read_bandwidth_runs(int nthreads, size_t bytes, size_t run)
{
    if (run == 0 || run % 64 || nthreads > 64)
        return 0;
    const size_t nruns = bytes / run / (size_t)nthreads * (size_t)nthreads;
    float *buf = aligned_alloc(64, nruns * run), sums[64] = { 0 };
    int32_t *order = malloc(nruns * sizeof *order);
    if (!buf || !order || nruns == 0 || nruns > INT32_MAX) {
        free(buf);
        free(order);
        return 0;
    }
    for (size_t i = 0; i < nruns * run / sizeof(float); i++)
        buf[i] = (float)(i & 7);
    permutation(order, (int64_t)nruns, 1);
    int isa = 0;
#if ATTN_HAVE_X86_KERNELS
    isa = __builtin_cpu_supports("avx512f") ? 1 : 0;
#endif
    const runs_ctx ctx = { (const char *)buf, order, nruns, run, nthreads, isa, sums };
    const double best =
        best_rate(nthreads, runs_body, (void *)&ctx, (double)(nruns * run), 1, 3, sums);
    free(buf);
    free(order);
    return best;
}

size_t l3_size(void)
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

/* The VMs this runs on change speed for seconds at a time, so a case is
 * also reported against the peak of the moments it ran in: the median of
 * one short pass after each of its timed runs. */
enum { MAX_SAMPLES = 1024 };
static int sample_threads;   /* 0: not sampling */
static double samples[MAX_SAMPLES];
static int nsamples;

void peak_sample_start(int nthreads)
{
    sample_threads = nthreads;
    nsamples = 0;
}

void peak_sample(void)
{
    if (sample_threads > 0 && nsamples < MAX_SAMPLES)
        samples[nsamples++] = fma_peak_iters(sample_threads, 1000L * 1000, 1);
}

double peak_sample_finish(void)
{
    sample_threads = 0;
    return nsamples > 0 ? median_sorted(samples, nsamples) : 0.0;
}

/* ---- output --------------------------------------------------------------- */

const char *json_g(char *buf, size_t size, double x)
{
    if (x == x)
        snprintf(buf, size, "%.3g", x);
    else
        snprintf(buf, size, "null");
    return buf;
}
