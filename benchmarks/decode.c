/*
 * attn-bench's decode cases (only when named; --case D names them all):
 *
 *   S5  B 1, Hq 32, Hkv 8, n 1, m 4096, d 128, F32 K/V
 *   D1  S5's shape with K/V stored F16, BF16, Q8_0 and Q4_0 (and an F32
 *       row, so the ratios need no other case)
 *   D2  B 8, Hq 32, Hkv 8, n 1, kv lengths 512, 1024, ..., 4096, every
 *       storage type: a paged cache (block 16, the block table a random
 *       permutation of the pool's blocks) and the same values in a
 *       contiguous cache (the sgemm comparison on F16 only); a third F16,
 *       diagnostic row (attn only) has the pool's blocks in order, which
 *       tells the cost of the random placement (TLB misses, prefetchers
 *       stopping at 4 KiB pages) from that of paging itself
 *   D3  4 queries, bottom-right causal (window_right 0), m 4096, F32, F16,
 *       Q8_0 and Q4_0
 *   DL  S5 at cache lengths 512 ... 32k, F32 and F16 (--case DL only: the
 *       plot of GB/s against cache length, benchmarks/plot-decode.py)
 *
 * Decoding is bound by the K/V bytes read, so each case is timed with its
 * K/V memory larger than the L3: R copies of the cache, R x the bytes a
 * call reads >= the target (4 x L3, at least 256 MiB; --kv-mib), and every
 * call reads the next copy, round-robin.  Per row: attn (the decode path),
 * attn with ATTN_DECODE=0 (the sgemm path) and, for S5, a plain scalar C
 * loop.  GB/s counts the K/V bytes a call must read: per sequence
 * kv_len x Hkv x (dk + dv) x element size.  max_err is against float64 on
 * a few heads of every sequence, computed from the same rounded F16/BF16
 * values.  Each case's rows (how its cache is stored) are in the case
 * table (cases.c); the kv lengths of D2 are case_kv_len's.
 */
#include "attn.h"
#include "cases.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    BLOCK = 16,          /* D2's kv_block_size */
    SAMPLE_HEADS = 4,    /* query heads per sequence checked against float64 */
    CALLS_PER_RUN = 10,  /* timed calls = CALLS_PER_RUN x --runs */
    MAX_ROWS = 64,
};

typedef decode_row drow;

enum { IMPL_ATTN, IMPL_SGEMM, IMPL_SCALAR, NIMPL };
static const char *const impl_name[NIMPL] = { "attn", "sgemm", "scalar" };

/* ---- sizes ------------------------------------------------------------- */

/* Bytes of n stored values (n a multiple of 32 for the block types). */
static size_t stored(attn_dtype t, size_t n)
{
    size_t b = 0;
    attn_dtype_bytes(t, (int64_t)n, &b);
    return b;
}

static int is_block(attn_dtype t)
{
    return t == ATTN_DTYPE_Q8_0 || t == ATTN_DTYPE_Q4_0;
}

/* K/V bytes one call must read. */
static double kv_bytes_read(const bench_case *c, const drow *r)
{
    double rows = 0;
    for (int64_t b = 0; b < c->B; b++)
        rows += (double)case_kv_len(c, b);
    return rows * (double)c->Hkv * 2.0 * (double)stored(r->type, (size_t)c->d);
}

/* Floating-point operations one call must do: per query row and visible
 * key, a dk-long dot product and a dv-long multiply-add (2 flops per fused
 * multiply-add); bottom-right causal rows see m - n + i + 1 keys. */
static double flops_of(const bench_case *c)
{
    double f = 0;
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t m = case_kv_len(c, b);
        for (int64_t i = 0; i < c->n; i++) {
            const int64_t vis = c->causal ? m - c->n + i + 1 : m;
            f += (double)(vis > 0 ? vis : 0);
        }
    }
    return f * (double)c->Hq * 2.0 * 2.0 * (double)c->d;
}

/* Copies of the cache: R x the bytes read >= the target, R >= 2. */
static int copies_of(const bench_case *c, const drow *r, size_t target)
{
    const double per = kv_bytes_read(c, r);
    int R = (int)ceil((double)target / per);
    return R < 2 ? 2 : R;
}

/* Large buffers whose pages are made present by prefault() over the
 * ranges that will be written: touching them page by page costs about
 * 3 ms per MiB in faults on the VMs this runs on, which made the setup of
 * a row with 2 GiB of copies take seconds.  Ordinary 4 KiB pages, as the
 * read bandwidth's buffer (no MADV_HUGEPAGE): only the setup changes, not
 * what the timed calls see.  Zero-filled; never freed (the row's process
 * exits).  A range never prefaulted nor written (the rows of a contiguous
 * cache past a sequence's length) stays absent. */
static void *big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void prefault(void *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = (uintptr_t)p + bytes;
    if (bytes)
        (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);   /* else faults on touch */
#else
    (void)p;
    (void)bytes;
#endif
}

/* ---- the plain scalar loop (S5's third comparison) ---------------------- */

typedef struct scalar_ctx {
    const bench_case *c;
    const float *q, *k, *v;
    float *o;
    float *scores;   /* [threads][m] */
} scalar_ctx;

static void scalar_body(void *arg, int tid)
{
    const scalar_ctx *x = arg;
    const bench_case *c = x->c;
    const int64_t n = c->n, m = c->m, d = c->d, g = c->Hq / c->Hkv;
    const float scale = 1.0f / sqrtf((float)d);
    float *s = x->scores + (size_t)tid * (size_t)m;
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t bh = 0; bh < c->B * c->Hq; bh++) {
        const int64_t b = bh / c->Hq, h = bh % c->Hq, hk = h / g, len = case_kv_len(c, b);
        const float *kb = x->k + (b * c->Hkv + hk) * m * d;
        const float *vb = x->v + (b * c->Hkv + hk) * m * d;
        for (int64_t i = 0; i < n; i++) {
            const float *qi = x->q + ((b * c->Hq + h) * n + i) * d;
            float *oi = x->o + ((b * c->Hq + h) * n + i) * d;
            const int64_t lim = c->causal ? len - n + i + 1 : len;
            float mx = -INFINITY;
            for (int64_t j = 0; j < lim; j++) {
                float dot = 0;
                for (int64_t t = 0; t < d; t++)
                    dot += qi[t] * kb[j * d + t];
                s[j] = dot * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            float sum = 0;
            for (int64_t t = 0; t < d; t++)
                oi[t] = 0;
            for (int64_t j = 0; j < lim; j++) {
                const float p = expf(s[j] - mx);
                sum += p;
                for (int64_t t = 0; t < d; t++)
                    oi[t] += p * vb[j * d + t];
            }
            for (int64_t t = 0; t < d; t++)
                oi[t] = sum > 0 ? oi[t] / sum : 0.0f;
        }
    }
}

/* ---- one row in the child ----------------------------------------------- */

typedef struct djob {
    const bench_case *c;
    const drow *row;
    int impl, threads, runs;
    size_t target;
} djob;

/* A row's failure: what failed, and the status (ATTN_OK: none). */
static void fail(result *res, const char *what, int status)
{
    if (status != ATTN_OK)
        snprintf(res->error, sizeof res->error, "%s: %s", what, status_str(status));
    else
        result_fail(res, what);
}

/* Largest |o - float64| over SAMPLE_HEADS query heads of every sequence,
 * all query rows; kr, vr: the stored values as floats, [B][Hkv][m][d]. */
static double sampled_error(const bench_case *c, const float *q, const float *kr, const float *vr,
                            const float *o)
{
    const int64_t n = c->n, m = c->m, d = c->d, g = c->Hq / c->Hkv;
    double *s = malloc(sizeof(double) * (size_t)m), *acc = malloc(sizeof(double) * (size_t)d);
    double err = 0;
    if (!s || !acc) {
        free(s);
        free(acc);
        return NAN;
    }
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hs = 0; hs < SAMPLE_HEADS; hs++) {
            const int64_t h = hs * (c->Hq - 1) / (SAMPLE_HEADS - 1), hk = h / g;
            const int64_t len = case_kv_len(c, b);
            const float *kb = kr + (b * c->Hkv + hk) * m * d, *vb = vr + (b * c->Hkv + hk) * m * d;
            for (int64_t i = 0; i < n; i++) {
                const float *qi = q + ((b * c->Hq + h) * n + i) * d;
                const int64_t lim = c->causal ? len - n + i + 1 : len;
                double mx = -INFINITY, den = 0;
                for (int64_t j = 0; j < lim; j++) {
                    double dot = 0;
                    for (int64_t t = 0; t < d; t++)
                        dot += (double)qi[t] * kb[j * d + t];
                    s[j] = dot / sqrt((double)d);
                    mx = s[j] > mx ? s[j] : mx;
                }
                memset(acc, 0, sizeof(double) * (size_t)d);
                for (int64_t j = 0; j < lim; j++) {
                    const double w = exp(s[j] - mx);
                    den += w;
                    for (int64_t t = 0; t < d; t++)
                        acc[t] += w * vb[j * d + t];
                }
                const float *oi = o + ((b * c->Hq + h) * n + i) * d;
                for (int64_t t = 0; t < d; t++) {
                    const double e = fabs((double)oi[t] - (den > 0 ? acc[t] / den : 0.0));
                    if (!(e <= err))
                        err = e;
                }
            }
        }
    free(s);
    free(acc);
    return err;
}

/* Copies r0 .. r1 - 1 of the cache: the rows < kv_len of the logical
 * [B][Hkv][m][d] source (only those are written: the rest of a contiguous
 * copy is never touched, so never resident). */
static void copies_fill(const bench_case *c, const drow *row, char *kc, char *vc, const char *ksrc,
                        const char *vsrc, const int32_t *kvl, const int32_t *table,
                        size_t copy_bytes, int r0, int r1)
{
    const int64_t B = c->B, Hkv = c->Hkv, m = c->m, d = c->d, maxb = m / BLOCK;
    const attn_dtype t = row->type;
    for (int r = r0; r < r1; r++) {
        if (row->paged) {
            prefault(kc + (size_t)r * copy_bytes, copy_bytes);
            prefault(vc + (size_t)r * copy_bytes, copy_bytes);
        } else {
            for (int64_t bh = 0; bh < B * Hkv; bh++) {
                const size_t off = (size_t)r * copy_bytes + stored(t, (size_t)(bh * m * d));
                prefault(kc + off, stored(t, (size_t)(kvl[bh / Hkv] * d)));
                prefault(vc + off, stored(t, (size_t)(kvl[bh / Hkv] * d)));
            }
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t j0 = 0; j0 < kvl[b]; j0 += row->paged ? BLOCK : kvl[b]) {
                    const int64_t rows = row->paged && kvl[b] - j0 > BLOCK ? BLOCK : kvl[b] - j0;
                    const size_t src = stored(t, (size_t)(((b * Hkv + h) * m + j0) * d));
                    const size_t dst = (size_t)r * copy_bytes +
                        stored(t, row->paged
                                      ? (size_t)((table[b * maxb + j0 / BLOCK] * Hkv + h) * BLOCK * d)
                                      : (size_t)(((b * Hkv + h) * m + j0) * d));
                    memcpy(kc + dst, ksrc + src, stored(t, (size_t)(rows * d)));
                    memcpy(vc + dst, vsrc + src, stored(t, (size_t)(rows * d)));
                }
    }
}

/* One timed call, on the next copy of the cache (round-robin). */
typedef struct decode_call {
    const bench_case *c;
    int impl, threads;
    attn_dtype type;
    const attn_sdpa_plan *plan;
    attn_sdpa_args *args;
    void *ws;
    size_t ws_bytes;
    const float *q;
    float *o, *scores;
    const char *kc, *vc;
    size_t copy_bytes;
    int copies, next;
} decode_call;

/* ---- the bandwidth of the moments a row runs in ---------------------------- */

/* On the shared VMs this runs on, the memory's speed drifts within
 * minutes: one run on Zen 5 read 27.0 GB/s at 2 threads at its start (29.0
 * at 1), and the same reading taken around its last decode rows a minute
 * later gave 53-68.  A row's %bw is therefore taken against the bandwidth
 * of the moments its calls ran in: after every CALLS_PER_RUN timed calls
 * (a run), a short FMA pass (peak_sample) and one streaming read of at
 * least BW_SAMPLE_BYTES of the row's own K/V copies, those the calls will
 * not read for longest (half the copies ahead of the next call's: read a
 * few hundred MiB ago, so from memory), with the same loop and thread
 * count as read_bandwidth; the row's figure is the best of these samples
 * (as read_bandwidth's is the best of its passes: a figure that never
 * flatters the row).  The run's figure
 * (read_bandwidth at the start) is still printed in the header.  The call
 * after a sample finds Q, O and the workspace out of the cache (a few
 * hundred KiB), one call in CALLS_PER_RUN. */
enum { BW_SAMPLE_BYTES = 256 << 20, BW_SAMPLES_MAX = 256 };

typedef struct bw_sampler {
    const decode_call *call;
    size_t off, len;   /* the range of each copy read: present in every copy */
    int threads;
    double gbs[BW_SAMPLES_MAX];
    int n, calls;
} bw_sampler;

static double best_of(const double *x, int n)
{
    double b = 0;
    for (int i = 0; i < n; i++)
        b = x[i] > b ? x[i] : b;
    return b;
}

/* The range of a copy every copy holds (written, so present): the whole
 * copy for a paged pool or a cache of full sequences, else the longest
 * sequence's rows (all its heads when it is full, else its first head). */
static void bw_sample_range(const bench_case *c, const int32_t *kvl, attn_dtype t,
                            size_t copy_bytes, int paged, bw_sampler *b)
{
    const int64_t B = c->B, Hkv = c->Hkv, m = c->m, d = c->d;
    int64_t best = 0;
    for (int64_t i = 1; i < B; i++)
        if (kvl[i] > kvl[best])
            best = i;
    if (paged) {
        b->off = 0;
        b->len = copy_bytes;
    } else if (!c->padded) {
        b->off = 0;
        b->len = stored(t, (size_t)(B * Hkv * m * d));
    } else {
        b->off = stored(t, (size_t)(best * Hkv * m * d));
        b->len = stored(t, (size_t)((kvl[best] == m ? Hkv * m : kvl[best]) * d));
    }
}

static void bw_sample(void *arg)
{
    bw_sampler *b = arg;
    const decode_call *x = b->call;
    if (++b->calls % CALLS_PER_RUN)
        return;
    peak_sample();
    double secs = 0;
    size_t bytes = 0;
    for (int i = 0; bytes < BW_SAMPLE_BYTES && i < x->copies; i++) {
        const size_t r = (size_t)((x->next + x->copies / 2 + i) % x->copies);
        for (int kv = 0; kv < 2; kv++) {
            size_t got = 0;
            secs += read_pass(b->threads, (kv ? x->vc : x->kc) + r * x->copy_bytes + b->off,
                              b->len, &got);
            bytes += got;
        }
    }
    if (secs > 0 && b->n < BW_SAMPLES_MAX)
        b->gbs[b->n++] = (double)bytes / secs * 1e-9;
}

static int decode_call_run(void *arg, double *split)
{
    decode_call *x = arg;
    const char *kp = x->kc + (size_t)x->next * x->copy_bytes;
    const char *vp = x->vc + (size_t)x->next * x->copy_bytes;
    (void)split;
    x->next = (x->next + 1) % x->copies;
    if (x->impl == IMPL_SCALAR) {
        const scalar_ctx ctx = { x->c, x->q, (const float *)kp, (const float *)vp, x->o, x->scores };
        bench_parallel(x->threads, x->c->B * x->c->Hq, scalar_body, (void *)&ctx);
        return 0;
    }
    if (x->type == ATTN_DTYPE_F32) {
        x->args->k = (const float *)kp;
        x->args->v = (const float *)vp;
    } else if (is_block(x->type)) {
        x->args->kq = kp;
        x->args->vq = vp;
    } else {
        x->args->k16 = (const uint16_t *)kp;
        x->args->v16 = (const uint16_t *)vp;
    }
    return (int)attn_sdpa_execute(x->plan, x->args, x->ws, x->ws_bytes);
}

static void run_decode_row(const djob *j, result *res)
{
    const bench_case *c = j->c;
    const drow *row = j->row;
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, d = c->d;
    const attn_dtype type = row->type;
    const int R = copies_of(c, row, j->target);

    /* ATTN_DECODE is read by attn_sdpa_plan_create (lib/sdpa/plan.c: the
     * plan keeps its choice), so it is set before the plan is made: "0" =
     * the sgemm path for IMPL_SGEMM, unset = the default (the decode path
     * where the shape allows) otherwise.  Each row runs in its own process,
     * so nothing else sees it. */
    if (j->impl == IMPL_SGEMM)
        setenv("ATTN_DECODE", "0", 1);
    else
        unsetenv("ATTN_DECODE");
    if (j->impl == IMPL_SCALAR && (type != ATTN_DTYPE_F32 || row->paged)) {
        res->skipped = 1;
        return fail(res, "the scalar loop reads F32 contiguous only", ATTN_OK);
    }

    /* Q, O; K and V in the logical layout [B][Hkv][m][d] (rows < kv_len
     * filled), as floats (kr, vr: the values the cache holds, widened) and
     * as stored (k16, v16 for F16/BF16). */
    const size_t nq = (size_t)(B * Hq * n * d), nkv = (size_t)(B * Hkv * m * d);
    float *q = alloc_fill(nq, 1), *o = alloc_fill(nq, 0);
    float *kr = big_alloc(nkv * sizeof(float)), *vr = big_alloc(nkv * sizeof(float));
    char *k16 = NULL, *v16 = NULL;   /* the stored bytes (F16, BF16, Q8_0, Q4_0) */
    int32_t *kvl = malloc(sizeof(int32_t) * (size_t)B);
    if (!q || !o || !kr || !vr || !kvl)
        return fail(res, "out of memory", ATTN_OK);
    for (int64_t b = 0; b < B; b++) {
        kvl[b] = (int32_t)case_kv_len(c, b);
        for (int64_t h = 0; h < Hkv; h++) {
            prefault(kr + ((b * Hkv + h) * m) * d, sizeof(float) * (size_t)(kvl[b] * d));
            prefault(vr + ((b * Hkv + h) * m) * d, sizeof(float) * (size_t)(kvl[b] * d));
        }
        for (int64_t h = 0; h < Hkv; h++)
            for (int64_t x = 0; x < kvl[b] * d; x++) {
                kr[((b * Hkv + h) * m) * d + x] = frand();
                vr[((b * Hkv + h) * m) * d + x] = frand();
            }
    }
    if (type != ATTN_DTYPE_F32) {
        k16 = big_alloc(stored(type, nkv));
        v16 = big_alloc(stored(type, nkv));
        if (!k16 || !v16)
            return fail(res, "out of memory", ATTN_OK);
        /* the stored values, and those values widened back: what the
         * float64 reference reads (rows < kv_len only: the rest is never
         * read, so never touched) */
        attn_status st = ATTN_OK;
        for (int64_t bh = 0; bh < B * Hkv && st == ATTN_OK; bh++) {
            const size_t off = (size_t)(bh * m * d);
            const int64_t cnt = kvl[bh / Hkv] * d;
            const size_t so = stored(type, off);
            prefault(k16 + so, stored(type, (size_t)cnt));
            prefault(v16 + so, stored(type, (size_t)cnt));
            st = attn_quantize(type, kr + off, k16 + so, cnt);
            if (st == ATTN_OK)
                st = attn_quantize(type, vr + off, v16 + so, cnt);
            if (st == ATTN_OK)
                st = attn_dequantize(type, k16 + so, kr + off, cnt);
            if (st == ATTN_OK)
                st = attn_dequantize(type, v16 + so, vr + off, cnt);
        }
        if (st != ATTN_OK)
            return fail(res, "convert", st);
    }
    const char *ksrc = type == ATTN_DTYPE_F32 ? (const char *)kr : (const char *)k16;
    const char *vsrc = type == ATTN_DTYPE_F32 ? (const char *)vr : (const char *)v16;

    /* The paged layout: each sequence's logical blocks get the pool's
     * blocks in the order of a random permutation (paged == 2: in order).
     * The values are the same in every row of the case: they are drawn
     * before the permutation. */
    const int64_t maxb = m / BLOCK;
    int64_t nblocks = 0;
    int32_t *table = NULL;
    if (row->paged) {
        for (int64_t b = 0; b < B; b++)
            nblocks += (kvl[b] + BLOCK - 1) / BLOCK;
        table = calloc((size_t)(B * maxb), sizeof(int32_t));
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)nblocks);
        if (!table || !perm)
            return fail(res, "out of memory", ATTN_OK);
        permutation(perm, nblocks, row->paged != 2);
        int64_t next = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t lb = 0; lb < (kvl[b] + BLOCK - 1) / BLOCK; lb++)
                table[b * maxb + lb] = perm[next++];
        free(perm);
    }

    /* R copies of the cache (only the rows a call reads are written: the
     * rest of a contiguous copy is never touched, so never resident) */
    const size_t copy_elems = row->paged ? (size_t)(nblocks * Hkv * BLOCK * d) : nkv;
    const size_t copy_bytes = (stored(type, copy_elems) + 4095) / 4096 * 4096;
    char *kc = big_alloc(copy_bytes * (size_t)R), *vc = big_alloc(copy_bytes * (size_t)R);
    if (!kc || !vc)
        return fail(res, "out of memory (K/V copies)", ATTN_OK);
    copies_fill(c, row, kc, vc, ksrc, vsrc, kvl, table, copy_bytes, 0, 1);

    attn_sdpa_desc desc;
    attn_sdpa_desc_init(&desc);
    desc.batch = B; desc.q_heads = Hq; desc.kv_heads = Hkv;
    desc.q_len = n; desc.kv_len = m; desc.qk_dim = d; desc.v_dim = d;
    desc.q = desc.o = attn_view_bhsd(Hq, n, d);
    desc.k = desc.v = row->paged ? attn_view_bhsd(Hkv, BLOCK, d) : attn_view_bhsd(Hkv, m, d);
    desc.k_type = desc.v_type = type;
    desc.qk_int8 = row->qk_int8;
    if (row->paged) {
        desc.kv_block_size = BLOCK;
        desc.kv_num_blocks = nblocks;
        desc.kv_max_blocks = maxb;
    }
    if (c->causal) {
        desc.align = ATTN_ALIGN_BOTTOM_RIGHT;
        desc.window_right = 0;
    }
    desc.use_kv_lens = c->padded;
    desc.threads = j->threads;
    attn_sdpa_args args = { .q = q, .o = o, .kv_lens = c->padded ? kvl : NULL,
                            .block_table = table };

    attn_sdpa_plan *plan = NULL;
    void *ws = NULL;
    float *scores = NULL;
    if (j->impl == IMPL_SCALAR) {
        res->workspace = (size_t)j->threads * (size_t)m * sizeof(float);
        if (!(scores = alloc_fill((size_t)j->threads * (size_t)m, 0)))
            return fail(res, "out of memory", ATTN_OK);
    } else {
        attn_status st = attn_sdpa_plan_create(&plan, &desc);
        if (st != ATTN_OK)
            return fail(res, "plan", st);
        attn_sdpa_workspace_size(plan, &res->workspace);
        if (!(ws = aligned_alloc(64, (res->workspace + 63) / 64 * 64 + 64)))
            return fail(res, "out of memory", ATTN_OK);
    }

    /* one call on copy 0 first: a row that fails does so before the
     * other copies are made */
    decode_call call = { c, j->impl, j->threads, type, plan, &args, ws, res->workspace,
                         q, o, scores, kc, vc, copy_bytes, R, 0 };
    if (j->impl != IMPL_SCALAR) {
        const int st = decode_call_run(&call, NULL);
        if (st != ATTN_OK)
            return fail(res, "execute", st);
        call.next = 0;
    }
    copies_fill(c, row, kc, vc, ksrc, vsrc, kvl, table, copy_bytes, 1, R);

    /* warm-up: one pass over every copy (the first read of a page after
     * the copies were written is slower here), then the timed calls, each
     * run of CALLS_PER_RUN followed by a sample of the FMA peak and of the
     * read bandwidth (bw_sample) */
    bw_sampler samp = { &call, 0, 0, j->threads, { 0 }, 0, 0 };
    bw_sample_range(c, kvl, type, copy_bytes, row->paged != 0, &samp);
    peak_sample_start(j->threads);
    const bench_timing timing = { .runs = j->runs * CALLS_PER_RUN,
                                  .warmup = R > 2 ? R : 2,
                                  .after_run = bw_sample,
                                  .after_ctx = &samp };
    bench_stats stats;
    if (bench_time(decode_call_run, &call, &timing, &stats))
        return fail(res, "execute", stats.status);
    result_set_times(res, &stats);
    res->read_gbs = best_of(samp.gbs, samp.n);
    res->fma_local = peak_sample_finish();
    res->max_err = sampled_error(c, q, kr, vr, o);
    res->ok = 1;
    attn_sdpa_plan_destroy(plan);
}

static void djob_fn(void *ctx, result *res)
{
    run_decode_row(ctx, res);
}

/* ---- the parent: tables and ratios -------------------------------------- */

typedef struct kept {
    const char *case_id, *label;
    int impl;
    double ms, gbs, frac, roof;
    double run_gbs;   /* paged rows: the random-run read bandwidth of their runs */
} kept;
static kept done[MAX_ROWS * NIMPL];
static int ndone;

static const kept *find(const char *case_id, const char *label, int impl)
{
    for (int i = 0; i < ndone; i++)
        if (!strcmp(done[i].case_id, case_id) && !strcmp(done[i].label, label) &&
            done[i].impl == impl)
            return &done[i];
    return NULL;
}

void decode_print_header(const bench_env *env)
{
    ndone = 0;
    if (env->json)
        return;
    printf("\ndecode (K/V far larger than the L3; read bandwidth this thread count: %.1f GB/s at "
           "the run's start; each row's %%bw and %%roof against the read bandwidth and FMA peak "
           "sampled between its own calls: column bw)\n",
           env->read_gbs);
    printf("%-6s %-10s %-6s %9s %9s %9s %8s %7s %6s %6s %6s %6s %10s %9s %9s %8s\n", "case",
           "row", "impl", "ms(med)", "ms(min)", "ms(max)", "KV MiB", "GB/s", "bw", "%bw", "%roof",
           "copies", "workspace", "RSS MiB", "max_err", "vs attn");
}

/* The bytes of one head's run of a pool block (BLOCK rows of d values) of
 * each of c's randomly paged rows, at most max of them. */
int decode_paged_runs(const bench_case *c, size_t *runs, int max)
{
    int n = 0;
    for (int ri = 0; c->rows[ri].label && n < max; ri++)
        if (c->rows[ri].paged == 1)
            runs[n++] = stored(c->rows[ri].type, (size_t)(BLOCK * c->d));
    return n;
}

/* The read bandwidth over c's paged runs in a random order, 0 if not
 * measured. */
static double run_gbs_of(const bench_env *env, const bench_case *c, attn_dtype t)
{
    const size_t b = stored(t, (size_t)(BLOCK * c->d));
    for (int i = 0; i < env->nruns; i++)
        if (env->run_bytes[i] == b)
            return env->run_gbs[i];
    return 0;
}

void decode_run_case(const bench_case *c, int nthreads, const bench_env *env)
{
    for (int ri = 0; c->rows[ri].label; ri++) {
        const drow *row = &c->rows[ri];
        const double bytes = kv_bytes_read(c, row);
        const int R = copies_of(c, row, env->kv_target_bytes);
        double attn_ms = 0;
        for (int impl = 0; impl < NIMPL; impl++) {
            if (impl == IMPL_SCALAR && (!env->do_naive || strcmp(c->id, "S5")))
                continue;
            if (impl != IMPL_ATTN && row->paged == 2)
                continue;
            /* D2's sgemm comparison on its F16 rows only (each row costs a
             * process and its cache copies) */
            if (impl == IMPL_SGEMM && !strcmp(c->id, "D2") && row->type != ATTN_DTYPE_F16)
                continue;
            djob j = { c, row, impl, nthreads, env->runs, env->kv_target_bytes };
            result r;
            in_child(djob_fn, &j, &r);
            if (!r.ok) {
                if (env->json)
                    printf("{\"kind\":\"decode\",\"case\":\"%s\",\"row\":\"%s\",\"threads\":%d,"
                           "\"impl\":\"%s\",\"ok\":false,\"skipped\":%s,\"error\":\"%s\"}\n",
                           c->id, row->label, nthreads, impl_name[impl],
                           r.skipped ? "true" : "false", r.error);
                else
                    printf("%-6s %-10s %-6s %s: %s\n", c->id, row->label, impl_name[impl],
                           r.skipped ? "skipped" : "FAILED", r.error);
                fflush(stdout);
                continue;
            }
            /* (the row's own bandwidth, else the run's) */
            const double bw = r.read_gbs > 0 ? r.read_gbs : env->read_gbs;
            const double gbs = bytes / (r.ms_median * 1e6);
            const double frac = bw > 0 ? gbs / bw : 0;
            /* the roofline: the longer of reading the K/V bytes at the
             * measured bandwidth and doing the flops at the FMA peak */
            const double t_read = bw > 0 ? bytes / (bw * 1e6) : 0;
            const double fma = r.fma_local > 0 ? r.fma_local : env->fma_gflops;
            const double t_fma = fma > 0 ? flops_of(c) / (fma * 1e6) : 0;
            const double roof = (t_read > t_fma ? t_read : t_fma) / r.ms_median;
            if (impl == IMPL_ATTN)
                attn_ms = r.ms_median;
            if (ndone < (int)(sizeof done / sizeof done[0]))
                done[ndone++] = (kept){ c->id, row->label, impl, r.ms_median, gbs, frac, roof,
                                        row->paged == 1 ? run_gbs_of(env, c, row->type) : 0 };
            char err[32];
            json_g(err, sizeof err, r.max_err);
            if (env->json) {
                printf("{\"kind\":\"decode\",\"case\":\"%s\",\"name\":\"%s\",\"row\":\"%s\","
                       "\"threads\":%d,\"impl\":\"%s\",\"ok\":true,\"ms_median\":%.4f,"
                       "\"ms_min\":%.4f,\"ms_max\":%.4f,\"kv_bytes\":%.0f,\"gbs\":%.3f,"
                       "\"read_gbs\":%.2f,\"read_gbs_run\":%.2f,\"fma_local_gflops\":%.2f,"
                       "\"fma_gflops_run\":%.2f,\"frac_bw\":%.4f,\"flops\":%.0f,"
                       "\"frac_roofline\":%.4f,"
                       "\"copies\":%d,\"workspace_bytes\":%zu,"
                       "\"peak_rss_bytes\":%ld,\"max_err\":%s,\"sgemm_gflops\":%.2f,"
                       "\"blas\":\"%s\",\"kernel\":\"%s\",\"simd\":\"%s\"}\n",
                       c->id, c->name, row->label, nthreads, impl_name[impl], r.ms_median,
                       r.ms_min, r.ms_max, bytes, gbs, bw, env->read_gbs, fma, env->fma_gflops,
                       frac, flops_of(c), roof, R, r.workspace,
                       r.peak_rss_kb * 1024, err, env->sgemm_gflops, env->blas, env->kernel,
                       env->simd);
            } else {
                char vs[16] = "";
                if (impl != IMPL_ATTN && attn_ms > 0)
                    snprintf(vs, sizeof vs, "%.2fx", r.ms_median / attn_ms);
                printf("%-6s %-10s %-6s %9.3f %9.3f %9.3f %8.1f %7.1f %6.1f %5.0f%% %5.0f%% %6d "
                       "%10zu %9.1f %9.2g %8s\n",
                       c->id, row->label, impl_name[impl], r.ms_median, r.ms_min, r.ms_max,
                       bytes / 1048576.0, gbs, bw, 100.0 * frac, 100.0 * roof, R, r.workspace,
                       r.peak_rss_kb / 1024.0, r.max_err, vs);
            }
            fflush(stdout);
        }
    }
}

static void ratio(const bench_env *env, int nthreads, const char *what, double value,
                  double target, int higher_better)
{
    const int met = higher_better ? value >= target : value <= target;
    if (target <= 0) {   /* a gain to report, with no target */
        if (env->json)
            printf("{\"kind\":\"decode\",\"ratio\":\"%s\",\"threads\":%d,\"value\":%.4f}\n",
                   what, nthreads, value);
        else
            printf("  %-42s %6.2f\n", what, value);
        return;
    }
    if (env->json)
        printf("{\"kind\":\"decode\",\"ratio\":\"%s\",\"threads\":%d,\"value\":%.4f,"
               "\"target\":%.2f,\"met\":%s}\n", what, nthreads, value, target,
               met ? "true" : "false");
    else
        printf("  %-42s %6.2f   (target >= %.2f: %s)\n", what, value, target, met ? "met" : "NOT met");
}

/* The attn rows the bandwidth target and the roofline are reported for:
 * not the in-order paging diagnostic, not the sweep DL (a plot, no
 * targets). */
static int with_targets(const kept *k)
{
    return k->impl == IMPL_ATTN && strcmp(k->label, "f16-pg-ord") != 0 &&
           strncmp(k->case_id, "DL", 2) != 0;
}

void decode_print_ratios(int nthreads, const bench_env *env)
{
    if (!env->json)
        printf("decode ratios, %d thread%s (attn rows; speed = the other row's ms / this row's ms):\n",
               nthreads, nthreads > 1 ? "s" : "");
    int any = 0;
    /* The speed each storage type should gain from its bytes alone (the
     * bandwidth targets restated as ratios; Q8_0 reads 34/64 of F16's bytes,
     * Q4_0 18/64), and paging's cost. */
    static const struct { const char *c, *num, *den, *what; double target; } speed[] = {
        { "D1", "f16", "f32", "D1 F16/F32 speed", 1.8 },
        { "D1", "bf16", "f32", "D1 BF16/F32 speed", 1.8 },
        { "D1", "q8_0", "f16", "D1 Q8_0/F16 speed", 1.7 },
        { "D1", "q4_0", "f16", "D1 Q4_0/F16 speed", 2.8 },
        { "D2", "f16-paged", "f32-paged", "D2 paged F16/F32 speed", 1.8 },
        { "D2", "bf16-paged", "f32-paged", "D2 paged BF16/F32 speed", 1.8 },
        { "D2", "q8_0-paged", "f16-paged", "D2 paged Q8_0/F16 speed", 1.7 },
        { "D2", "q4_0-paged", "f16-paged", "D2 paged Q4_0/F16 speed", 2.8 },
        { "D2", "f32-paged", "f32-contig", "D2 F32 paged/contiguous speed", 0.9 },
        { "D2", "f16-paged", "f16-contig", "D2 F16 paged/contiguous speed", 0.9 },
        { "D2", "bf16-paged", "bf16-contig", "D2 BF16 paged/contiguous speed", 0.9 },
        { "D2", "q8_0-paged", "q8_0-contig", "D2 Q8_0 paged/contiguous speed", 0.9 },
        { "D2", "q4_0-paged", "q4_0-contig", "D2 Q4_0 paged/contiguous speed", 0.9 },
        /* the integer Q K^T (desc.qk_int8): against F16, and its gain */
        { "D1", "q8_0-int8", "f16", "D1 Q8_0 int8/F16 speed", 1.7 },
        { "D1", "q4_0-int8", "f16", "D1 Q4_0 int8/F16 speed", 2.8 },
        { "D2", "q8_0-int8-paged", "f16-paged", "D2 paged Q8_0 int8/F16 speed", 1.7 },
        { "D2", "q4_0-int8-paged", "f16-paged", "D2 paged Q4_0 int8/F16 speed", 2.8 },
        { "D1", "q8_0-int8", "q8_0", "D1 Q8_0 int8/fp32 scores speed", 0 },
        { "D1", "q4_0-int8", "q4_0", "D1 Q4_0 int8/fp32 scores speed", 0 },
        { "D3", "q8_0-int8", "q8_0", "D3 Q8_0 int8/fp32 scores speed", 0 },
        { "D3", "q4_0-int8", "q4_0", "D3 Q4_0 int8/fp32 scores speed", 0 },
    };
    for (size_t i = 0; i < sizeof speed / sizeof speed[0]; i++) {
        const kept *a = find(speed[i].c, speed[i].num, IMPL_ATTN);
        const kept *b = find(speed[i].c, speed[i].den, IMPL_ATTN);
        if (!b && !strcmp(speed[i].c, "D1"))   /* S5 is D1's F32 row too */
            b = find("S5", "f32", IMPL_ATTN);
        if (a && b && a->ms > 0) {
            ratio(env, nthreads, speed[i].what, b->ms / a->ms, speed[i].target, 1);
            any = 1;
        }
    }
    /* the diagnostic: the same pool with the blocks in order, to tell the
     * cost of the random placement (TLB, prefetch) from that of paging */
    const kept *po = find("D2", "f16-pg-ord", IMPL_ATTN), *pc = find("D2", "f16-contig", IMPL_ATTN);
    if (po && pc && po->ms > 0) {
        if (env->json)
            printf("{\"kind\":\"decode\",\"ratio\":\"D2 paged in order/contiguous speed\","
                   "\"threads\":%d,\"value\":%.4f}\n", nthreads, pc->ms / po->ms);
        else
            printf("  %-42s %6.2f   (diagnostic: blocks in order)\n",
                   "D2 paged in order/contiguous speed", pc->ms / po->ms);
    }
    /* What the placement costs this machine's memory: a read loop over
     * the paged rows' runs in a random order against the streaming one,
     * and each paged row's GB/s over that loop's. */
    for (int i = 0; i < ndone; i++) {
        const kept *k = &done[i];
        if (k->impl != IMPL_ATTN || k->run_gbs <= 0 || env->read_gbs <= 0)
            continue;
        char what[64], what2[64];
        snprintf(what, sizeof what, "%s %s: random-run read / streaming", k->case_id, k->label);
        snprintf(what2, sizeof what2, "%s %s fraction of random-run read", k->case_id, k->label);
        if (env->json) {
            printf("{\"kind\":\"decode\",\"ratio\":\"%s\",\"threads\":%d,\"value\":%.4f,"
                   "\"run_gbs\":%.2f}\n", what, nthreads, k->run_gbs / env->read_gbs, k->run_gbs);
            printf("{\"kind\":\"decode\",\"ratio\":\"%s\",\"threads\":%d,\"value\":%.4f}\n",
                   what2, nthreads, k->gbs / k->run_gbs);
        } else {
            printf("  %-42s %6.2f   (diagnostic: %.1f GB/s in a read loop)\n", what,
                   k->run_gbs / env->read_gbs, k->run_gbs);
            printf("  %-42s %6.2f   (diagnostic)\n", what2, k->gbs / k->run_gbs);
        }
    }
    /* S5, D1 and D2 are bound by the bytes: >= 80% of the read bandwidth.
     * D3's 4 query rows make compute matter: within 1.3x of its roofline
     * (the longer of the read and the FMAs). */
    for (int i = 0; i < ndone; i++) {
        if (!with_targets(&done[i]))
            continue;
        char what[64];
        if (!strcmp(done[i].case_id, "D3")) {
            snprintf(what, sizeof what, "%s %s fraction of the roofline", done[i].case_id,
                     done[i].label);
            ratio(env, nthreads, what, done[i].roof, 1.0 / 1.3, 1);
        } else {
            snprintf(what, sizeof what, "%s %s fraction of read bandwidth", done[i].case_id,
                     done[i].label);
            ratio(env, nthreads, what, done[i].frac, 0.8, 1);
        }
        any = 1;
    }
    for (int i = 0; i < ndone; i++) {
        if (!with_targets(&done[i]) || !strcmp(done[i].case_id, "D3"))
            continue;
        if (env->json)
            printf("{\"kind\":\"decode\",\"ratio\":\"%s %s fraction of the roofline\","
                   "\"threads\":%d,\"value\":%.4f}\n", done[i].case_id, done[i].label, nthreads,
                   done[i].roof);
        else {
            char what[64];
            snprintf(what, sizeof what, "%s %s fraction of the roofline", done[i].case_id,
                     done[i].label);
            printf("  %-42s %6.2f   (diagnostic: max(read, FMA) time / time)\n", what,
                   done[i].roof);
        }
    }
    for (int i = 0; i < ndone; i++) {
        const kept *s = &done[i], *a = find(s->case_id, s->label, IMPL_ATTN);
        if (s->impl == IMPL_ATTN || !a || a->ms <= 0 || !strncmp(s->case_id, "DL", 2))
            continue;
        if (env->json)
            printf("{\"kind\":\"decode\",\"ratio\":\"%s %s %s/attn ms\",\"threads\":%d,"
                   "\"value\":%.4f}\n", s->case_id, s->label, impl_name[s->impl], nthreads,
                   s->ms / a->ms);
        else {
            char what[64];
            snprintf(what, sizeof what, "%s %s %s / attn ms", s->case_id, s->label,
                     s->impl == IMPL_SGEMM ? "sgemm path" : "scalar loop");
            printf("  %-42s %6.2f\n", what, s->ms / a->ms);
        }
        any = 1;
    }
    if (!any && !env->json)
        printf("  (no attn row succeeded)\n");
    fflush(stdout);
}

void decode_print_notes(void)
{
    printf("\nDecode cases (S5, D1-D3, only when named; --case D names all): attn is the decode "
           "path (ATTN_DECODE unset), sgemm the same call with ATTN_DECODE=0 (its own plan, in its "
           "own process), scalar a plain C loop (S5 only); each call reads the next of `copies` "
           "copies of the cache, round-robin, so K/V come from memory; KV MiB and GB/s count the "
           "K/V bytes a call must read (kv_len x Hkv x (dk + dv) x element size per sequence); "
           "%%bw is GB/s over bw, the streaming read bandwidth of the moments the row ran in "
           "(after each run of %d timed calls, a read of 256 MiB of the row's own K/V copies at the same "
           "thread count, those the calls read last; the best sample); "
           "%%roof is the roofline time over the time, the roofline time being the longer of "
           "reading the K/V bytes at that bandwidth and doing the call's flops (4 x query rows x "
           "visible keys x d x Hq) at the FMA peak sampled the same way (decoding "
           "with many query rows per K/V row, D3 and F16 at 1 thread, is bound by the FMAs, not "
           "by memory); DL (--case DL) is S5 over cache lengths, the data of the plot; "
           "%d timed calls per --runs, after a warm-up pass over every copy; max_err against float64 on %d query heads of every "
           "sequence from the same stored (rounded) values; D2's \"random-run read\" is a read loop over runs of its paged rows' size (16 rows of a head) in a random order, asking for the run two ahead as it reads (benchmarks/harness.c): against the streaming bandwidth it tells what the random placement costs this machine's memory, and each paged row is given as a fraction of it (not a ceiling: the kernels, with work between the loads, can do better).\n", CALLS_PER_RUN, CALLS_PER_RUN, SAMPLE_HEADS);
}
