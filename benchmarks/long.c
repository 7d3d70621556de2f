/*
 * attn-bench's long-sequence cases (B = 1, H = 8, d = 64, BHSD):
 *
 *   L1  causal linear attention (elu + 1) at n = 1k, 4k, 16k, 64k;
 *       the other path is attn's dense causal SDPA at the same n
 *   X1  Longformer: window 256 + 256 and the first 32 tokens global (both ways),
 *       at n = 4k, 16k, 64k; the other path is attn's dense SDPA with the
 *       same visible set as an element mask [n][n]
 *   X2  BigBird: block 64, 3 window + 2 global + 3 random blocks a row
 *       (attn_layout_build_bigbird), at n = 4k, 16k; the other path as in X1
 *
 * The window, the global tokens and BigBird's layout are fields of the
 * case table (cases.c).  The dense paths run up to n = 16k (their time is
 * O(n^2): at 64k one run takes minutes).  max_err is against float64 on 64
 * sampled rows of every head, computed here from the definitions, after
 * the timing.
 */
#include "attn.h"
#include "cases.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    LINEAR_CHUNK = 64,     /* rows per chunk of attn's linear attention (FLOP count) */
    DENSE_MAX_N = 16384,   /* the O(n^2) paths run up to here */
    SAMPLE_ROWS = 64,
};

const char *long_other_name(const bench_case *c)
{
    (void)c;
    return "dense";
}

/* X1's global tokens: the first c->global, as Longformer makes a
 * question's tokens (or [CLS]) global. */
static int x1_global(const bench_case *c, int64_t j)
{
    return j < c->global;
}

/* The BigBird layout of X2, [ceil(n/bs)][ceil(m/bs)], or NULL. */
static uint8_t *x2_layout(const bench_case *c, int64_t *nb, int64_t *mb)
{
    *nb = (c->n + c->block - 1) / c->block;
    *mb = (c->m + c->block - 1) / c->block;
    uint8_t *l = malloc((size_t)(*nb * *mb));
    if (l && attn_layout_build_bigbird(l, *nb, *mb, c->bb_window, c->bb_global, c->bb_random,
                                 c->seed) != ATTN_OK) {
        free(l);
        l = NULL;
    }
    return l;
}

/* Whether query i sees key j (X1, X2; layout for X2). */
static int visible(const bench_case *c, const uint8_t *layout, int64_t mb, int64_t i, int64_t j)
{
    if (c->kind == K_GLOBAL)
        return x1_global(c, i) || x1_global(c, j) || (j >= i - c->window && j <= i + c->window);
    return layout[(i / c->block) * mb + j / c->block] != 0;
}

/* Keys query i sees (X1, X2). */
static int64_t visible_in_row(const bench_case *c, const uint8_t *layout, int64_t mb, int64_t i)
{
    int64_t count = 0;
    if (c->kind == K_GLOBAL) {
        if (x1_global(c, i))
            return c->m;
        const int64_t lo = i - c->window < 0 ? 0 : i - c->window;
        const int64_t hi = i + c->window + 1 > c->m ? c->m : i + c->window + 1;
        count = hi - lo;
        for (int64_t j = 0; j < c->global && j < c->m; j++)
            count += j < lo || j >= hi;
        return count;
    }
    for (int64_t jb = 0; jb < mb; jb++)
        if (layout[(i / c->block) * mb + jb]) {
            const int64_t hi = (jb + 1) * c->block > c->m ? c->m : (jb + 1) * c->block;
            count += hi - jb * c->block;
        }
    return count;
}

/* Useful FLOPs of impl (0 = attn's long-sequence path, 1 = dense):
 * linear: the chunked scheme's GEMMs without the masked half of each
 *         chunk's own product, per row 4 d^2 (phi(Q) S and phi(K)^T V)
 *         + chunk (dk + dv);
 * dense causal: 4 d per visible (i, j), i.e. 2 d n (n + 1) per head;
 * sparse, and dense with the sparse mask: 4 d per visible (i, j). */
double long_useful_flops(const bench_case *c, int impl)
{
    const double BH = (double)(c->B * c->Hq), n = (double)c->n, d = (double)c->d;
    if (c->kind == K_LINEAR)
        return impl == 0 ? BH * n * (4.0 * d * d + (double)LINEAR_CHUNK * 2.0 * d)
                         : BH * 2.0 * d * n * (n + 1.0);
    int64_t nb = 0, mb = 0;
    uint8_t *layout = c->kind == K_BIGBIRD ? x2_layout(c, &nb, &mb) : NULL;
    if (c->kind == K_BIGBIRD && !layout)
        return 0.0;
    double pairs = 0;
    for (int64_t i = 0; i < c->n; i++)
        pairs += (double)visible_in_row(c, layout, mb, i);
    free(layout);
    return BH * 4.0 * d * pairs;
}

static double elu1(double x) { return x > 0 ? x + 1.0 : exp(x); }

/* Largest |o - float64| over SAMPLE_ROWS rows of each head. */
static double sampled_error(const bench_case *c, const float *q, const float *k, const float *v,
                            const float *o, const uint8_t *layout, int64_t mb)
{
    const int64_t n = c->n, m = c->m, d = c->d, g = c->Hq / c->Hkv;
    double *acc = malloc(sizeof(double) * (size_t)d), *s = malloc(sizeof(double) * (size_t)m);
    double err = 0;
    if (!acc || !s) {
        free(acc);
        free(s);
        return NAN;
    }
    for (int64_t h = 0; h < c->B * c->Hq; h++) {
        const int64_t hk = (h / c->Hq) * c->Hkv + (h % c->Hq) / g;
        const float *kh = k + hk * m * d, *vh = v + hk * m * d;
        for (int64_t r = 0; r < SAMPLE_ROWS; r++) {
            const int64_t i = r == SAMPLE_ROWS - 1 ? n - 1 : r * n / SAMPLE_ROWS + r % 7;
            const float *qi = q + (h * n + i) * d;
            memset(acc, 0, sizeof(double) * (size_t)d);
            double den = 0;
            if (c->kind == K_LINEAR) {
                for (int64_t j = 0; j <= i && j < m; j++) {
                    double w = 0;
                    for (int64_t x = 0; x < d; x++)
                        w += elu1(qi[x]) * elu1(kh[j * d + x]);
                    den += w;
                    for (int64_t x = 0; x < d; x++)
                        acc[x] += w * vh[j * d + x];
                }
                den += 1e-6;
            } else {
                double mx = -INFINITY;
                for (int64_t j = 0; j < m; j++) {
                    s[j] = -INFINITY;
                    if (!visible(c, layout, mb, i, j))
                        continue;
                    double dot = 0;
                    for (int64_t x = 0; x < d; x++)
                        dot += (double)qi[x] * kh[j * d + x];
                    s[j] = dot / sqrt((double)d);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int64_t j = 0; j < m; j++) {
                    if (s[j] == -INFINITY)
                        continue;
                    const double w = exp(s[j] - mx);
                    den += w;
                    for (int64_t x = 0; x < d; x++)
                        acc[x] += w * vh[j * d + x];
                }
            }
            for (int64_t x = 0; x < d; x++) {
                const double e = fabs(o[(h * n + i) * d + x] - (den > 0 ? acc[x] / den : 0.0));
                if (!(e <= err))
                    err = e;
            }
        }
    }
    free(acc);
    free(s);
    return err;
}

/* One timed call: the linear plan, or the SDPA one. */
typedef struct long_call {
    const attn_linear_plan *lp;
    const attn_sdpa_plan *sp;
    const attn_linear_args *la;
    const attn_sdpa_args *sa;
    void *ws;
    size_t ws_bytes;
} long_call;

static int long_call_run(void *arg, double *split)
{
    const long_call *x = arg;
    (void)split;
    return (int)(x->lp ? attn_linear_execute(x->lp, x->la, x->ws, x->ws_bytes)
                       : attn_sdpa_execute(x->sp, x->sa, x->ws, x->ws_bytes));
}

/* Runs in the child: impl 0 = attn's linear or sparse path, 1 = dense. */
void long_run_case(const bench_case *c, int impl, int nthreads, int runs, result *res)
{
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m, d = c->d;
    if (impl == 1 && n > DENSE_MAX_N) {
        res->skipped = 1;
        snprintf(res->error, sizeof res->error, "dense path only up to n = %d (O(n^2))",
                 DENSE_MAX_N);
        return;
    }
    if (n >= 16384 && runs > 3)
        runs = 3;
    const size_t nq = (size_t)(B * Hq * n * d), nk = (size_t)(B * Hkv * m * d);
    float *q = alloc_fill(nq, 1), *k = alloc_fill(nk, 1), *v = alloc_fill(nk, 1);
    float *o = alloc_fill(nq, 0);
    uint8_t *gflags = malloc((size_t)(B * n)), *mask = NULL, *layout = NULL;
    int64_t nb = 0, mb = 0;
    if (!q || !k || !v || !o || !gflags)
        return result_fail(res, "out of memory");
    for (int64_t i = 0; i < B * n; i++)
        gflags[i] = (uint8_t)(c->kind == K_GLOBAL && x1_global(c, i % n));
    if (c->kind == K_BIGBIRD && !(layout = x2_layout(c, &nb, &mb)))
        return result_fail(res, "attn_layout_build_bigbird failed");
    if (impl == 1 && c->kind != K_LINEAR) {
        /* the dense path's element mask [n][m], broadcast over B and H */
        if (!(mask = malloc((size_t)(n * m))))
            return result_fail(res, "out of memory (mask)");
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++)
                mask[i * m + j] = (uint8_t)visible(c, layout, mb, i, j);
    }

    attn_status st = ATTN_OK;
    attn_linear_plan *lp = NULL;
    attn_sdpa_plan *sp = NULL;
    attn_linear_args la = { .q = q, .k = k, .v = v, .o = o };
    attn_sdpa_args sa = { .q = q, .k = k, .v = v, .o = o };
    if (c->kind == K_LINEAR && impl == 0) {
        attn_linear_desc ld;
        attn_linear_desc_init(&ld);
        ld.batch = B; ld.q_heads = Hq; ld.kv_heads = Hkv;
        ld.q_len = n; ld.kv_len = m; ld.qk_dim = d; ld.v_dim = d;
        ld.q = ld.o = attn_view_bhsd(Hq, n, d);
        ld.k = ld.v = attn_view_bhsd(Hkv, m, d);
        ld.causal = 1;
        ld.threads = nthreads;
        if ((st = attn_linear_plan_create(&lp, &ld)) == ATTN_OK)
            st = attn_linear_workspace_size(lp, &res->workspace);
    } else {
        attn_sdpa_desc sd;
        attn_sdpa_desc_init(&sd);
        sd.batch = B; sd.q_heads = Hq; sd.kv_heads = Hkv;
        sd.q_len = n; sd.kv_len = m; sd.qk_dim = d; sd.v_dim = d;
        sd.q = sd.o = attn_view_bhsd(Hq, n, d);
        sd.k = sd.v = attn_view_bhsd(Hkv, m, d);
        sd.threads = nthreads;
        if (c->kind == K_LINEAR) {
            sd.window_right = 0;
        } else if (impl == 1) {
            sd.mask_mode = ATTN_MASK_KEEP_NONZERO;
            sd.mask = (attn_view){ 0, 0, m };
            sa.mask = mask;
        } else if (c->kind == K_GLOBAL) {
            sd.window_left = sd.window_right = c->window;
            sd.use_global_k = sd.use_global_q = 1;
            sa.global_k = sa.global_q = gflags;
        } else {
            sd.block_size = c->block;
            sa.layout = layout;
        }
        if ((st = attn_sdpa_plan_create(&sp, &sd)) == ATTN_OK)
            st = attn_sdpa_workspace_size(sp, &res->workspace);
    }
    void *ws = st == ATTN_OK ? aligned_alloc(64, (res->workspace + 63) / 64 * 64 + 64) : NULL;
    if (st != ATTN_OK || !ws)
        return result_fail(res, st != ATTN_OK ? attn_status_str(st) : "out of memory");

    const long_call call = { lp, sp, &la, &sa, ws, res->workspace };
    const bench_timing timing = { .runs = runs, .warmup = 1, .sample_peak = 1 };
    bench_stats stats;
    if (bench_time(long_call_run, (void *)&call, &timing, &stats))
        return result_fail(res, status_str(stats.status));
    result_set_times(res, &stats);
    /* the dense causal path of L1 computes softmax attention: no error */
    res->max_err = c->kind == K_LINEAR && impl == 1 ? NAN
                                                    : sampled_error(c, q, k, v, o, layout, mb);
    res->ok = 1;
}
