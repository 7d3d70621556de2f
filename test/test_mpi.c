/*
 * test_mpi.c -- libattn_mpi (attn_mpi.h), run as `mpirun -n P test_mpi`
 * (Meson tests mpi-1 .. mpi-4).
 *
 * Plain C with tables rather than CMocka: every case is collective (every
 * rank must run it, in the same order, whatever failed before), and the
 * verdict of a case is that of all ranks, agreed with MPI_Allreduce;
 * CMocka's per-process test runner and its longjmp on failure fit neither.
 * Rank 0 prints one line per case and a summary; the exit status is
 * nonzero on any failure on any rank.
 *
 * Every rank builds the whole problem from the same seed, computes the
 * one-process reference with plain attn_sdpa / attn_sdpa_bwd (decode: one
 * attn_sdpa call on the whole cache, in the same storage type), runs
 * attn_mpi on its own rows and compares its rows.
 *
 * Tolerance: max |result - reference| <= TOL x max(1, max |reference|)
 * per tensor.  The two sides compute the same sums cut at different
 * places: the ring's blocks merged by logsumexp (in double, one rounding)
 * against one call's online softmax, gradients summed over blocks in
 * another order than one call sums them.  Each side carries fp32 error of
 * a few ulps per value of the magnitudes above (seen: about 1e-7); TOL
 * leaves two orders of magnitude for sums over longer rows, and any wrong
 * block, position, mask offset or dropout decision misses it by far
 * (errors of order 1e-2 .. 1).  Rows with no visible key must have
 * logsumexp -INFINITY exactly in both.
 *
 * Tables:
 * - rcases[] (ring forward + backward), each with both splits: full,
 *   causal TOP_LEFT, causal BOTTOM_RIGHT with n != m, windows with left
 *   and right bounds, kv_lens and q_lens (padding rows, an empty batch),
 *   GQA, bias per head broadcast over batch (with -INFINITY entries),
 *   element masks of both polarities, dropout 0.2, local BSHD views, sizes
 *   not divisible by P and smaller than 2P.  Each is also run at threads
 *   1 and 2 (twice): the outputs must be bitwise identical.
 * - dcases[] (sharded decode): a cache split unevenly over the ranks,
 *   contiguous and paged, F32, F16 and Q8_0 storage, both merges.
 * - failure injection: a different desc on rank 1, a NULL q on one rank,
 *   different lengths on one rank, options the header excludes; every
 *   rank must return the same status.
 * - MPI_COMM_SELF: one rank's plan of the whole problem equals one call.
 * - attn_mpi_rows: the partitions and the statuses.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn_mpi.h>

#define TOL 1e-5

static int g_rank, g_size;
static int g_cases, g_failed;

/* ----------------------------------------------------------- helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_uniform(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 40) * 0x1p-23 - 1.0);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "rank %d: out of memory\n", g_rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static float *randf(size_t n, uint64_t *s, float scale)
{
    float *p = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * rng_uniform(s);
    return p;
}

/* The verdict of a case: every rank's ok and its largest error. */
static void report(const char *name, int ok_local, double err_local, const char *note)
{
    int ok = 0;
    double err = 0.0;
    MPI_Allreduce(&ok_local, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&err_local, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    g_cases++;
    if (!ok)
        g_failed++;
    if (g_rank == 0) {
        printf("%s P=%d %-58s max err %.2e%s%s\n", ok ? "ok  " : "FAIL", g_size, name, err,
               note && *note ? "  " : "", note ? note : "");
        fflush(stdout);
    }
}

/* max |a - r| / max(1, max |r|) over rows[] of a [rows][w] pair, element
 * stride given; NaN in a is an infinite error.  Rows where r is -INFINITY
 * (logsumexp of an empty row) must be -INFINITY in a. */
typedef struct cmp {
    double scale;   /* max(1, max |ref|) over the whole reference tensor */
    double err;
    int ok;
    double tol;     /* TOL, or what a 16-bit output allows */
} cmp;

static double ref_scale(const float *r, size_t n)
{
    double mx = 1.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(r[i]) && fabs(r[i]) > mx)
            mx = fabs(r[i]);
    return mx;
}

static void cmp_value(cmp *c, float a, float r)
{
    if (isinf(r) && r < 0) {
        if (!(isinf(a) && a < 0))
            c->ok = 0, c->err = INFINITY;
        return;
    }
    double e = isnan(a) ? INFINITY : fabs((double)a - (double)r) / c->scale;
    if (e > c->err)
        c->err = e;
    if (!(e <= c->tol))
        c->ok = 0;
}

/* The local rows of a tensor: runs t of attn_mpi_rows. */
typedef struct rows2 {
    int64_t start[2], count[2];
    int64_t total;
} rows2;

static rows2 rows_of(attn_mpi_split split, int64_t len, int ranks, int rank)
{
    rows2 r;
    attn_status st = attn_mpi_rows(split, len, ranks, rank, r.start, r.count);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_mpi_rows: %s\n", attn_status_str(st));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    r.total = r.count[0] + r.count[1];
    return r;
}

/* Global row of local row i. */
static int64_t global_row(const rows2 *r, int64_t i)
{
    return i < r->count[0] ? r->start[0] + i : r->start[1] + (i - r->count[0]);
}

/* A [B][H][L][w] whole tensor's rows r into a local view. */
static void gather_rows(float *dst, attn_view v, const float *src, int64_t B, int64_t H,
                        int64_t L, int64_t w, const rows2 *r)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < r->total; i++)
                memcpy(dst + b * v.batch + h * v.head + i * v.seq,
                       src + ((b * H + h) * L + global_row(r, i)) * w, (size_t)w * sizeof(float));
}

/* Compare a local view's rows with the whole reference [B][H][L][w]. */
static void cmp_rows(cmp *c, const float *got, attn_view v, const float *ref, int64_t B,
                     int64_t H, int64_t L, int64_t w, const rows2 *r)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < r->total; i++)
                for (int64_t e = 0; e < w; e++)
                    cmp_value(c, got[b * v.batch + h * v.head + i * v.seq + e],
                              ref[((b * H + h) * L + global_row(r, i)) * w + e]);
}

static cmp cmp_begin(const float *ref, size_t n)
{
    cmp c = { ref_scale(ref, n), 0.0, 1, TOL };
    return c;
}

static attn_view local_view(int bshd, int64_t H, int64_t L, int64_t w)
{
    return bshd ? attn_view_bshd(H, L, w) : attn_view_bhsd(H, L, w);
}

/* ------------------------------------------------------------ the ring --- */

typedef struct rcase {
    const char *name;
    int64_t B, Hq, Hkv, n, m, dk, dv;
    attn_align align;
    int64_t wl, wr;
    int kv_lens, q_lens;
    attn_mask_mode mask;
    int bias;
    double p;
    int bshd;                /* local tensors BSHD instead of BHSD */
} rcase;

#define TL ATTN_ALIGN_TOP_LEFT
#define BR ATTN_ALIGN_BOTTOM_RIGHT
#define NOMASK ATTN_MASK_NONE
#define KEEP ATTN_MASK_KEEP_NONZERO
#define DROP ATTN_MASK_DROP_NONZERO

static const rcase rcases[] = {
    /* name                              B  Hq Hkv  n   m  dk  dv align wl  wr kvl ql mask  bias p    bshd */
    { "full, n=37 m=29",                  2, 2, 2, 37, 29, 16, 16, TL, -1, -1, 0, 0, NOMASK, 0, 0.0, 0 },
    { "causal top-left n=m=37",           2, 2, 2, 37, 37, 16, 16, TL, -1, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "causal bottom-right n=20 m=45",    2, 2, 1, 20, 45, 16, 8, BR, -1, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "causal bottom-right n=45 m=20",    1, 2, 2, 45, 20, 8, 16, BR, -1, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "sliding window left 5, causal",    2, 2, 2, 40, 40, 16, 16, TL, 5, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "window left 4 right 3, n=33 m=41", 1, 2, 2, 33, 41, 16, 16, TL, 4, 3, 0, 0, NOMASK, 0, 0.0, 0 },
    { "window right 2 only, BR",          1, 2, 2, 30, 38, 16, 16, BR, -1, 2, 0, 0, NOMASK, 0, 0.0, 0 },
    { "window BR 6/2 with kv_lens",       3, 2, 2, 25, 50, 16, 16, BR, 6, 2, 1, 0, NOMASK, 0, 0.0, 0 },
    { "kv_lens and q_lens, full",         3, 2, 2, 31, 27, 16, 16, TL, -1, -1, 1, 1, NOMASK, 0, 0.0, 0 },
    { "kv_lens and q_lens, causal BR",    3, 2, 1, 29, 34, 16, 16, BR, -1, 0, 1, 1, NOMASK, 0, 0.0, 0 },
    { "GQA Hq=4 Hkv=2, causal TL",        2, 4, 2, 35, 35, 16, 16, TL, -1, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "bias per head, broadcast batch",   2, 4, 2, 26, 33, 16, 16, TL, -1, -1, 0, 0, NOMASK, 1, 0.0, 0 },
    { "mask keep-nonzero",                2, 2, 2, 27, 31, 16, 16, TL, -1, -1, 0, 0, KEEP, 0, 0.0, 0 },
    { "mask drop-nonzero, causal BR",     2, 2, 2, 31, 27, 16, 16, BR, -1, 0, 0, 0, DROP, 0, 0.0, 0 },
    { "dropout 0.2, full",                2, 2, 2, 37, 29, 16, 16, TL, -1, -1, 0, 0, NOMASK, 0, 0.2, 0 },
    { "dropout 0.2, GQA causal lens",     3, 4, 2, 30, 30, 16, 16, BR, -1, 0, 1, 1, NOMASK, 0, 0.2, 0 },
    { "local BSHD, GQA causal, dk!=dv",   2, 4, 1, 33, 33, 16, 8, TL, -1, 0, 0, 0, NOMASK, 0, 0.0, 1 },
    { "tiny n=3 m=5 (< 2P)",              2, 2, 2, 3, 5, 8, 8, TL, -1, -1, 0, 0, NOMASK, 0, 0.0, 0 },
    { "tiny causal n=5 m=3 BR",           1, 2, 1, 5, 3, 8, 8, BR, -1, 0, 0, 0, NOMASK, 0, 0.0, 0 },
    { "n=m=1",                            1, 1, 1, 1, 1, 8, 8, TL, -1, -1, 0, 0, NOMASK, 0, 0.0, 0 },
    { "everything: BR window, lens, GQA, bias, mask, dropout, BSHD",
                                          3, 4, 2, 38, 45, 16, 16, BR, 9, 1, 1, 1, KEEP, 1, 0.2, 1 },
};

/* The whole problem's data, the same on every rank. */
typedef struct whole {
    float *q, *k, *v, *d_o, *bias;
    uint8_t *mask;
    int32_t kv_lens[3], q_lens[3];
    float *o, *lse, *dq, *dk, *dv;  /* the reference */
} whole;

static void whole_free(whole *w)
{
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->d_o);
    free(w->bias);
    free(w->mask);
    free(w->o);
    free(w->lse);
    free(w->dq);
    free(w->dk);
    free(w->dv);
}

/* The whole desc in BHSD, mask [B][1][n][m], bias [1][Hq][n][m]. */
static attn_sdpa_desc whole_desc(const rcase *c, int threads)
{
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = c->B;
    d.q_heads = c->Hq;
    d.kv_heads = c->Hkv;
    d.q_len = c->n;
    d.kv_len = c->m;
    d.qk_dim = c->dk;
    d.v_dim = c->dv;
    d.q = attn_view_bhsd(c->Hq, c->n, c->dk);
    d.k = attn_view_bhsd(c->Hkv, c->m, c->dk);
    d.v = attn_view_bhsd(c->Hkv, c->m, c->dv);
    d.o = attn_view_bhsd(c->Hq, c->n, c->dv);
    d.align = c->align;
    d.window_left = c->wl;
    d.window_right = c->wr;
    d.use_kv_lens = c->kv_lens;
    d.use_q_lens = c->q_lens;
    d.mask_mode = c->mask;
    d.mask = (attn_view){ c->n * c->m, 0, c->m };
    d.use_bias = c->bias;
    d.bias = (attn_view){ 0, c->n * c->m, c->m };
    d.want_lse = 1;
    d.lse = (attn_view){ c->Hq * c->n, c->n, 1 };
    d.dropout_p = c->p;
    d.dropout_seed = 0x5eed;
    d.dropout_offset = 7;
    d.threads = threads;
    return d;
}

static attn_status whole_make(const rcase *c, int index, whole *w)
{
    memset(w, 0, sizeof *w);
    uint64_t s = 0x1234567ull + (uint64_t)index * 7919u;
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, n = c->n, m = c->m;
    w->q = randf((size_t)(B * Hq * n * c->dk), &s, 1.0f);
    w->k = randf((size_t)(B * Hkv * m * c->dk), &s, 1.0f);
    w->v = randf((size_t)(B * Hkv * m * c->dv), &s, 1.0f);
    w->d_o = randf((size_t)(B * Hq * n * c->dv), &s, 1.0f);
    w->mask = xcalloc((size_t)(B * n * m), 1);
    for (int64_t i = 0; i < B * n * m; i++) {
        const int hidden = (rng_next(&s) % 5) == 0;
        w->mask[i] = (uint8_t)(c->mask == DROP ? hidden : !hidden);
    }
    w->bias = randf((size_t)(Hq * n * m), &s, 0.5f);
    for (int64_t i = 0; i < Hq * n * m; i++)
        if (rng_next(&s) % 16 == 0)
            w->bias[i] = -INFINITY;
    /* Lengths: shorter than the whole, one batch empty or short. */
    const int32_t kvl[3] = { (int32_t)m - 4, (int32_t)m, 3 };
    const int32_t ql[3] = { (int32_t)n, (int32_t)n - 6, 0 };
    for (int b = 0; b < 3; b++) {
        w->kv_lens[b] = kvl[b] < 0 ? 0 : kvl[b];
        w->q_lens[b] = ql[b] < 0 ? 0 : ql[b];
    }
    /* The reference: one call each. */
    w->o = xcalloc((size_t)(B * Hq * n * c->dv), sizeof(float));
    w->lse = xcalloc((size_t)(B * Hq * n), sizeof(float));
    w->dq = xcalloc((size_t)(B * Hq * n * c->dk), sizeof(float));
    w->dk = xcalloc((size_t)(B * Hkv * m * c->dk), sizeof(float));
    w->dv = xcalloc((size_t)(B * Hkv * m * c->dv), sizeof(float));
    attn_sdpa_desc d = whole_desc(c, 1);
    attn_sdpa_args a;
    attn_sdpa_args_init(&a);
    a.q = w->q;
    a.k = w->k;
    a.v = w->v;
    a.o = w->o;
    a.lse = w->lse;
    a.kv_lens = c->kv_lens ? w->kv_lens : NULL;
    a.q_lens = c->q_lens ? w->q_lens : NULL;
    a.mask = c->mask != NOMASK ? w->mask : NULL;
    a.bias = c->bias ? w->bias : NULL;
    attn_status st = attn_sdpa(&d, &a);
    if (st != ATTN_OK)
        return st;
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = d;
    bd.d_o = d.o;
    bd.dq = d.q;
    bd.dk = d.k;
    bd.dv = d.v;
    attn_sdpa_bwd_args ba;
    attn_sdpa_bwd_args_init(&ba);
    ba.q = w->q;
    ba.k = w->k;
    ba.v = w->v;
    ba.o = w->o;
    ba.d_o = w->d_o;
    ba.lse = w->lse;
    ba.kv_lens = a.kv_lens;
    ba.q_lens = a.q_lens;
    ba.mask = a.mask;
    ba.bias = a.bias;
    ba.dq = w->dq;
    ba.dk = w->dk;
    ba.dv = w->dv;
    return attn_sdpa_backward(&bd, &ba);
}

/* This rank's local tensors of a case and a split. */
typedef struct local {
    rows2 qr, kr;
    attn_view qv, kv, vv, ov, lsev, maskv, biasv;
    float *q, *k, *v, *d_o, *bias;
    uint8_t *mask;
    float *o, *lse, *dq, *dk, *dv;
} local;

static void local_free(local *l)
{
    free(l->q);
    free(l->k);
    free(l->v);
    free(l->d_o);
    free(l->bias);
    free(l->mask);
    free(l->o);
    free(l->lse);
    free(l->dq);
    free(l->dk);
    free(l->dv);
}

static void local_make(const rcase *c, attn_mpi_split split, int P, int r, const whole *w,
                       local *l)
{
    memset(l, 0, sizeof *l);
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv;
    l->qr = rows_of(split, c->n, P, r);
    l->kr = rows_of(split, c->m, P, r);
    const int64_t nl = l->qr.total, ml = l->kr.total;
    l->qv = local_view(c->bshd, Hq, nl, c->dk);
    l->ov = local_view(c->bshd, Hq, nl, c->dv);
    l->kv = local_view(c->bshd, Hkv, ml, c->dk);
    l->vv = local_view(c->bshd, Hkv, ml, c->dv);
    l->lsev = c->bshd ? (attn_view){ nl * Hq, 1, Hq } : (attn_view){ Hq * nl, nl, 1 };
    l->maskv = (attn_view){ nl * c->m, 0, c->m };
    l->biasv = (attn_view){ 0, nl * c->m, c->m };
    l->q = xcalloc((size_t)(B * Hq * nl * c->dk), sizeof(float));
    l->d_o = xcalloc((size_t)(B * Hq * nl * c->dv), sizeof(float));
    l->o = xcalloc((size_t)(B * Hq * nl * c->dv), sizeof(float));
    l->lse = xcalloc((size_t)(B * Hq * nl), sizeof(float));
    l->dq = xcalloc((size_t)(B * Hq * nl * c->dk), sizeof(float));
    l->k = xcalloc((size_t)(B * Hkv * ml * c->dk), sizeof(float));
    l->v = xcalloc((size_t)(B * Hkv * ml * c->dv), sizeof(float));
    l->dk = xcalloc((size_t)(B * Hkv * ml * c->dk), sizeof(float));
    l->dv = xcalloc((size_t)(B * Hkv * ml * c->dv), sizeof(float));
    l->mask = xcalloc((size_t)(B * nl * c->m), 1);
    l->bias = xcalloc((size_t)(Hq * nl * c->m), sizeof(float));
    gather_rows(l->q, l->qv, w->q, B, Hq, c->n, c->dk, &l->qr);
    gather_rows(l->d_o, l->ov, w->d_o, B, Hq, c->n, c->dv, &l->qr);
    gather_rows(l->k, l->kv, w->k, B, Hkv, c->m, c->dk, &l->kr);
    gather_rows(l->v, l->vv, w->v, B, Hkv, c->m, c->dv, &l->kr);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < nl; i++)
            memcpy(l->mask + (b * nl + i) * c->m,
                   w->mask + (b * c->n + global_row(&l->qr, i)) * c->m, (size_t)c->m);
    for (int64_t h = 0; h < Hq; h++)
        for (int64_t i = 0; i < nl; i++)
            memcpy(l->bias + (h * nl + i) * c->m,
                   w->bias + (h * c->n + global_row(&l->qr, i)) * c->m,
                   (size_t)c->m * sizeof(float));
}

static attn_mpi_desc mpi_desc(const rcase *c, const local *l, attn_mpi_split split, int threads)
{
    attn_mpi_desc md;
    attn_mpi_desc_init(&md);
    md.sdpa = whole_desc(c, threads);
    md.sdpa.q = l->qv;
    md.sdpa.k = l->kv;
    md.sdpa.v = l->vv;
    md.sdpa.o = l->ov;
    md.sdpa.lse = l->lsev;
    md.sdpa.mask = l->maskv;
    md.sdpa.bias = l->biasv;
    md.split = split;
    return md;
}

/* A rank without query (key) rows passes NULL for those tensors. */
#define QROWS(p) (l->qr.total ? (p) : NULL)
#define KROWS(p) (l->kr.total ? (p) : NULL)

static attn_sdpa_args fwd_args(const rcase *c, const whole *w, local *l)
{
    attn_sdpa_args a;
    attn_sdpa_args_init(&a);
    a.q = QROWS(l->q);
    a.k = KROWS(l->k);
    a.v = KROWS(l->v);
    a.o = QROWS(l->o);
    a.lse = QROWS(l->lse);
    a.kv_lens = c->kv_lens ? w->kv_lens : NULL;
    a.q_lens = c->q_lens ? w->q_lens : NULL;
    a.mask = c->mask != NOMASK ? QROWS(l->mask) : NULL;
    a.bias = c->bias ? QROWS(l->bias) : NULL;
    return a;
}

static attn_sdpa_bwd_args bwd_args(const rcase *c, const whole *w, local *l)
{
    attn_sdpa_bwd_args a;
    attn_sdpa_bwd_args_init(&a);
    a.q = QROWS(l->q);
    a.k = KROWS(l->k);
    a.v = KROWS(l->v);
    a.o = QROWS(l->o);
    a.d_o = QROWS(l->d_o);
    a.lse = QROWS(l->lse);
    a.kv_lens = c->kv_lens ? w->kv_lens : NULL;
    a.q_lens = c->q_lens ? w->q_lens : NULL;
    a.mask = c->mask != NOMASK ? QROWS(l->mask) : NULL;
    a.bias = c->bias ? QROWS(l->bias) : NULL;
    a.dq = QROWS(l->dq);
    a.dk = KROWS(l->dk);
    a.dv = KROWS(l->dv);
    return a;
}

/* Forward then backward of one local problem on comm; statuses in st[2]. */
static void ring_run(const rcase *c, const whole *w, local *l, attn_mpi_split split, int threads,
                     MPI_Comm comm, attn_status st[2], attn_mpi_stats *stats)
{
    attn_mpi_desc md = mpi_desc(c, l, split, threads);
    attn_mpi_plan *plan = NULL;
    st[0] = attn_mpi_plan_create(&plan, &md, comm);
    st[1] = st[0];
    if (st[0] != ATTN_OK)
        return;
    attn_sdpa_args a = fwd_args(c, w, l);
    st[0] = attn_mpi_forward(plan, &a);
    if (stats)
        attn_mpi_plan_stats(plan, &stats[0]);
    if (st[0] == ATTN_OK) {
        attn_sdpa_bwd_args ba = bwd_args(c, w, l);
        st[1] = attn_mpi_backward(plan, &ba);
        if (stats)
            attn_mpi_plan_stats(plan, &stats[1]);
    }
    attn_mpi_plan_destroy(plan);
}

static size_t local_floats(const local *l, const rcase *c, int which)
{
    const int64_t nl = l->qr.total, ml = l->kr.total;
    switch (which) {
    case 0: return (size_t)(c->B * c->Hq * nl * c->dv);  /* o */
    case 1: return (size_t)(c->B * c->Hq * nl);          /* lse */
    case 2: return (size_t)(c->B * c->Hq * nl * c->dk);  /* dq */
    case 3: return (size_t)(c->B * c->Hkv * ml * c->dk); /* dk */
    default: return (size_t)(c->B * c->Hkv * ml * c->dv); /* dv */
    }
}

static void run_ring_case(const rcase *c, int index, attn_mpi_split split)
{
    char name[160];
    snprintf(name, sizeof name, "ring %s, %s", c->name,
             split == ATTN_MPI_SPLIT_ZIGZAG ? "zigzag" : "contiguous");
    whole w;
    attn_status wst = whole_make(c, index, &w);
    local l;
    local_make(c, split, g_size, g_rank, &w, &l);
    attn_status st[2];
    attn_mpi_stats stats[2];
    memset(stats, 0, sizeof stats);
    ring_run(c, &w, &l, split, 1, MPI_COMM_WORLD, st, stats);
    int ok = wst == ATTN_OK && st[0] == ATTN_OK && st[1] == ATTN_OK;
    char note[200] = "";
    double e[5] = { 0, 0, 0, 0, 0 }, emax[5];
    if (!ok) {
        fprintf(stderr, "rank %d %s: reference %s, forward %s, backward %s\n", g_rank, name,
                attn_status_str(wst), attn_status_str(st[0]), attn_status_str(st[1]));
    } else {
        const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv;
        cmp co = cmp_begin(w.o, (size_t)(B * Hq * c->n * c->dv));
        cmp cl = cmp_begin(w.lse, (size_t)(B * Hq * c->n));
        cmp cq = cmp_begin(w.dq, (size_t)(B * Hq * c->n * c->dk));
        cmp ck = cmp_begin(w.dk, (size_t)(B * Hkv * c->m * c->dk));
        cmp cv = cmp_begin(w.dv, (size_t)(B * Hkv * c->m * c->dv));
        cmp_rows(&co, l.o, l.ov, w.o, B, Hq, c->n, c->dv, &l.qr);
        cmp_rows(&cl, l.lse, l.lsev, w.lse, B, Hq, c->n, 1, &l.qr);
        cmp_rows(&cq, l.dq, l.qv, w.dq, B, Hq, c->n, c->dk, &l.qr);
        cmp_rows(&ck, l.dk, l.kv, w.dk, B, Hkv, c->m, c->dk, &l.kr);
        cmp_rows(&cv, l.dv, l.vv, w.dv, B, Hkv, c->m, c->dv, &l.kr);
        ok = co.ok && cl.ok && cq.ok && ck.ok && cv.ok;
        e[0] = co.err, e[1] = cl.err, e[2] = cq.err, e[3] = ck.err, e[4] = cv.err;
        if (!ok)
            fprintf(stderr, "rank %d %s: o %d lse %d dq %d dk %d dv %d\n", g_rank, name, co.ok,
                    cl.ok, cq.ok, ck.ok, cv.ok);
        if (stats[0].steps != g_size || stats[1].steps != g_size) {
            ok = 0;
            fprintf(stderr, "rank %d %s: stats.steps %lld\n", g_rank, name,
                    (long long)stats[0].steps);
        }
    }
    /* (collective: every rank, whatever its verdict) */
    MPI_Allreduce(e, emax, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    long long blocks[2] = { stats[0].blocks_computed, stats[0].blocks_skipped }, bsum[2];
    MPI_Allreduce(blocks, bsum, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    snprintf(note, sizeof note, "(o %.1e lse %.1e dq %.1e dk %.1e dv %.1e; blocks %lld run, %lld skipped)",
             emax[0], emax[1], emax[2], emax[3], emax[4], bsum[0], bsum[1]);
    double err = 0.0;
    for (int i = 0; i < 5; i++)
        err = e[i] > err ? e[i] : err;
    report(name, ok, err, note);

    /* Repeatability: threads 1 and 2, each twice, bitwise the same. */
    snprintf(name, sizeof name, "ring %s, %s: threads 1,1,2,2 bitwise", c->name,
             split == ATTN_MPI_SPLIT_ZIGZAG ? "zigzag" : "contiguous");
    int same = 1;
    float *keep[5];
    float *outs[5] = { l.o, l.lse, l.dq, l.dk, l.dv };
    for (int i = 0; i < 5; i++) {
        keep[i] = xcalloc(local_floats(&l, c, i), sizeof(float));
        memcpy(keep[i], outs[i], local_floats(&l, c, i) * sizeof(float));
    }
    const int threads[3] = { 1, 2, 2 };
    for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < 5; i++)
            memset(outs[i], 0xff, local_floats(&l, c, i) * sizeof(float));
        ring_run(c, &w, &l, split, threads[rep], MPI_COMM_WORLD, st, NULL);
        if (st[0] != ATTN_OK || st[1] != ATTN_OK)
            same = 0;
        for (int i = 0; i < 5; i++)
            if (memcmp(keep[i], outs[i], local_floats(&l, c, i) * sizeof(float)) != 0)
                same = 0;
    }
    report(name, same, 0.0, "");
    for (int i = 0; i < 5; i++)
        free(keep[i]);
    local_free(&l);
    whole_free(&w);
}

/* ------------------------------------------------------------ decode ---- */

typedef struct dcase {
    const char *name;
    int64_t B, Hq, Hkv, nq, M, d;
    attn_align align;
    int64_t wl, wr;
    int kv_lens;
    int q_at_end;            /* q_pos0 = M - nq (else 0) */
    attn_dtype type;
    int64_t block;           /* paged with blocks of this many tokens; 0: contiguous */
    attn_dtype otype;        /* O's type (F32 unless given) */
} dcase;

static const dcase dcases[] = {
    /* name                           B Hq Hkv nq  M    d  align wl  wr kvl end type   block  O type */
    { "f32, causal BR, kv_lens",      2, 4, 2, 1, 100, 32, BR, -1, 0, 1, 0, ATTN_DTYPE_F32, 0, ATTN_DTYPE_F32 },
    { "f32 paged, causal BR, kv_lens", 2, 4, 2, 1, 100, 32, BR, -1, 0, 1, 0, ATTN_DTYPE_F32, 16, ATTN_DTYPE_F32 },
    { "f16, 4 queries, causal BR",    2, 4, 2, 4, 90, 32, BR, -1, 0, 1, 0, ATTN_DTYPE_F16, 0, ATTN_DTYPE_F32 },
    { "f16 paged, 4 queries",         2, 4, 2, 4, 90, 32, BR, -1, 0, 1, 0, ATTN_DTYPE_F16, 8, ATTN_DTYPE_F32 },
    { "q8_0, causal BR",              2, 4, 2, 2, 96, 64, BR, -1, 0, 1, 0, ATTN_DTYPE_Q8_0, 0, ATTN_DTYPE_F32 },
    { "q8_0 paged, causal BR",        2, 4, 2, 2, 96, 64, BR, -1, 0, 1, 0, ATTN_DTYPE_Q8_0, 16, ATTN_DTYPE_F32 },
    { "f32, no kv_lens, q_pos0 at end", 1, 2, 1, 3, 70, 32, BR, -1, 0, 0, 1, ATTN_DTYPE_F32, 0, ATTN_DTYPE_F32 },
    { "f32, window 30 BR, kv_lens",   2, 2, 2, 2, 100, 32, BR, 30, 0, 1, 0, ATTN_DTYPE_F32, 0, ATTN_DTYPE_F32 },
    { "f32, full TL, 3 queries",      1, 4, 4, 3, 50, 32, TL, -1, -1, 0, 0, ATTN_DTYPE_F32, 0, ATTN_DTYPE_F32 },
    { "f16 paged, O f16",             2, 4, 2, 2, 80, 32, BR, -1, 0, 1, 0, ATTN_DTYPE_F16, 16,
      ATTN_DTYPE_F16 },
};

/* Rank r's shard of M keys: weights 1, 2, .., P (uneven). */
static void shard_of(int64_t M, int P, int r, int64_t *start, int64_t *len)
{
    const int64_t W = (int64_t)P * (P + 1) / 2;
    const int64_t a = M * ((int64_t)r * (r + 1) / 2) / W;
    const int64_t b = M * ((int64_t)(r + 1) * (r + 2) / 2) / W;
    *start = a;
    *len = b - a;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static size_t row_bytes(attn_dtype t, int64_t d)
{
    size_t b = 0;
    attn_dtype_bytes(t, d, &b);
    return b;
}

/* A [B][H][L][d] fp32 tensor stored in type t (rows of row_bytes). */
static unsigned char *store(attn_dtype t, const float *x, int64_t rows, int64_t d)
{
    unsigned char *p = xcalloc((size_t)rows, row_bytes(t, d));
    if (attn_quantize(t, x, p, rows * d) != ATTN_OK) {
        fprintf(stderr, "attn_quantize failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void set_kv(attn_sdpa_args *a, attn_dtype t, const void *k, const void *v)
{
    if (t == ATTN_DTYPE_F32) {
        a->k = k;
        a->v = v;
    } else if (t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16) {
        a->k16 = k;
        a->v16 = v;
    } else {
        a->kq = k;
        a->vq = v;
    }
}

static void run_decode_case(const dcase *c, int index, attn_mpi_merge merge)
{
    char name[160];
    snprintf(name, sizeof name, "decode %s, %s", c->name,
             merge == ATTN_MPI_MERGE_ALLREDUCE ? "allreduce" : "allgather");
    uint64_t s = 0xdec0de00ull + (uint64_t)index * 104729u;
    const int64_t B = c->B, Hq = c->Hq, Hkv = c->Hkv, nq = c->nq, M = c->M, d = c->d;
    float *q = randf((size_t)(B * Hq * nq * d), &s, 1.0f);
    float *k = randf((size_t)(B * Hkv * M * d), &s, 1.0f);
    float *v = randf((size_t)(B * Hkv * M * d), &s, 1.0f);
    const size_t rb = row_bytes(c->type, d);
    unsigned char *ks = store(c->type, k, B * Hkv * M, d);
    unsigned char *vs = store(c->type, v, B * Hkv * M, d);
    int32_t kv_lens[2] = { (int32_t)M, (int32_t)(M - 17) };

    /* The reference: one call on the whole cache, without positions. */
    attn_sdpa_desc rd;
    attn_sdpa_desc_init(&rd);
    rd.batch = B;
    rd.q_heads = Hq;
    rd.kv_heads = Hkv;
    rd.q_len = nq;
    rd.kv_len = M;
    rd.qk_dim = rd.v_dim = d;
    rd.q = attn_view_bhsd(Hq, nq, d);
    rd.o = attn_view_bhsd(Hq, nq, d);
    rd.k = rd.v = attn_view_bhsd(Hkv, M, d);
    rd.k_type = rd.v_type = c->type;
    rd.o_type = c->otype;
    rd.align = c->align;
    rd.window_left = c->wl;
    rd.window_right = c->wr;
    rd.use_kv_lens = c->kv_lens;
    rd.want_lse = 1;
    rd.lse = (attn_view){ Hq * nq, nq, 1 };
    rd.threads = 1;
    const size_t no = (size_t)(B * Hq * nq * d);
    float *ro = xcalloc(no, sizeof(float));
    float *rl = xcalloc((size_t)(B * Hq * nq), sizeof(float));
    /* A 16-bit O: both sides' bits, compared widened. */
    uint16_t *ro16 = xcalloc(no, sizeof(uint16_t)), *o16 = xcalloc(no, sizeof(uint16_t));
    const int half = c->otype != ATTN_DTYPE_F32;
    attn_sdpa_args ra;
    attn_sdpa_args_init(&ra);
    ra.q = q;
    ra.o = half ? NULL : ro;
    ra.o16 = half ? ro16 : NULL;
    ra.lse = rl;
    ra.kv_lens = c->kv_lens ? kv_lens : NULL;
    set_kv(&ra, c->type, ks, vs);
    attn_status rst = attn_sdpa(&rd, &ra);

    /* This rank's shard, contiguous [B][Hkv][len][d] or paged. */
    int64_t start, len;
    shard_of(M, g_size, g_rank, &start, &len);
    attn_mpi_decode_desc dd;
    attn_mpi_decode_desc_init(&dd);
    dd.merge = merge;
    attn_sdpa_desc *l = &dd.local;
    *l = rd;
    l->kv_len = len;
    l->use_positions = 1;
    l->q_pos0 = c->q_at_end ? M - nq : 0;
    l->kv_pos0 = start;
    unsigned char *kl, *vl;
    int32_t *table = NULL;
    const int64_t rows = B * Hkv * len;
    if (c->block == 0) {
        l->k = l->v = attn_view_bhsd(Hkv, len, d);
        kl = xcalloc((size_t)rows, rb);
        vl = xcalloc((size_t)rows, rb);
        for (int64_t bh = 0; bh < B * Hkv; bh++) {
            memcpy(kl + (size_t)(bh * len) * rb, ks + (size_t)(bh * M + start) * rb,
                   (size_t)len * rb);
            memcpy(vl + (size_t)(bh * len) * rb, vs + (size_t)(bh * M + start) * rb,
                   (size_t)len * rb);
        }
    } else {
        /* Blocks of bs tokens, in a scrambled order, two spare blocks. */
        const int64_t bs = c->block, maxb = (len + bs - 1) / bs, nb = B * maxb + 2;
        l->kv_block_size = bs;
        l->kv_num_blocks = nb;
        l->kv_max_blocks = maxb;
        l->k = l->v = attn_view_bhsd(Hkv, bs, d);
        kl = xcalloc((size_t)(nb * Hkv * bs), rb);
        vl = xcalloc((size_t)(nb * Hkv * bs), rb);
        table = xcalloc((size_t)(B * maxb), sizeof(int32_t));
        int64_t g = 7; /* a stride coprime with nb: a permutation */
        while (gcd64(g, nb) != 1)
            g++;
        for (int64_t i = 0; i < B * maxb; i++)
            table[i] = (int32_t)((i * g + 1) % nb);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t j = 0; j < len; j++) {
                    const int64_t blk = table[b * maxb + j / bs];
                    const size_t dst = (size_t)((blk * Hkv + h) * bs + j % bs) * rb;
                    const size_t src = (size_t)((b * Hkv + h) * M + start + j) * rb;
                    memcpy(kl + dst, ks + src, rb);
                    memcpy(vl + dst, vs + src, rb);
                }
    }
    float *o = xcalloc((size_t)(B * Hq * nq * d), sizeof(float));
    float *lse = xcalloc((size_t)(B * Hq * nq), sizeof(float));
    attn_mpi_plan *plan = NULL;
    attn_status st = attn_mpi_decode_plan_create(&plan, &dd, MPI_COMM_WORLD);
    if (st == ATTN_OK) {
        attn_sdpa_args a;
        attn_sdpa_args_init(&a);
        a.q = q;
        a.o = half ? NULL : o;
        a.o16 = half ? o16 : NULL;
        a.lse = lse;
        a.kv_lens = c->kv_lens ? kv_lens : NULL;
        a.block_table = table;
        set_kv(&a, c->type, kl, vl);
        st = attn_mpi_decode(plan, &a);
    }
    attn_mpi_plan_destroy(plan);
    int ok = rst == ATTN_OK && st == ATTN_OK;
    double err = 0.0;
    char note[160] = "";
    if (ok && half) {
        attn_dtype_decode(c->otype, ro16, ro, (int64_t)no);
        attn_dtype_decode(c->otype, o16, o, (int64_t)no);
    }
    if (ok) {
        cmp co = cmp_begin(ro, (size_t)(B * Hq * nq * d));
        cmp cl = cmp_begin(rl, (size_t)(B * Hq * nq));
        /* Each side rounds its fp32 O to binary16 once: the two may differ
         * by one binary16 ulp (2^-11 relative; 2^-10 leaves room). */
        if (half)
            co.tol = 0x1p-10;
        for (int64_t i = 0; i < B * Hq * nq * d; i++)
            cmp_value(&co, o[i], ro[i]);
        for (int64_t i = 0; i < B * Hq * nq; i++)
            cmp_value(&cl, lse[i], rl[i]);
        ok = co.ok && cl.ok;
        err = co.err > cl.err ? co.err : cl.err;
    } else {
        snprintf(note, sizeof note, "rank %d: reference %s, attn_mpi %s", g_rank,
                 attn_status_str(rst), attn_status_str(st));
        fprintf(stderr, "%s: %s\n", name, note);
    }
    report(name, ok, err, g_rank == 0 ? note : "");
    free(q);
    free(k);
    free(v);
    free(ks);
    free(vs);
    free(kl);
    free(vl);
    free(table);
    free(ro);
    free(rl);
    free(ro16);
    free(o16);
    free(o);
    free(lse);
}

/* ---------------------------------------------------- failure injection -- */

/* Every rank's status equal to `want` (want < 0: equal, and nonzero). */
static void expect_all(const char *name, attn_status got, int want)
{
    int mn = (int)got, mx = (int)got;
    MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int ok = mn == mx && (want < 0 ? mn != 0 : mn == want);
    char note[120];
    snprintf(note, sizeof note, "(statuses %d..%d: %s)", mn, mx, attn_status_str((attn_status)mn));
    report(name, ok, 0.0, note);
}

static void run_failures(void)
{
    const rcase *c = &rcases[1]; /* causal top-left */
    whole w;
    whole_make(c, 1, &w);
    local l;
    local_make(c, ATTN_MPI_SPLIT_CONTIGUOUS, g_size, g_rank, &w, &l);
    attn_mpi_plan *plan = NULL;
    attn_status st;

    /* A different window on rank 1 (P >= 2; with one rank there is nothing
     * to differ, the plan is made). */
    attn_mpi_desc md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    if (g_rank == 1)
        md.sdpa.window_left = 3;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: rank 1's desc has another window", st,
               g_size > 1 ? ATTN_ERR_DESC_MISMATCH : ATTN_OK);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    /* Another split on the last rank. */
    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    if (g_rank == g_size - 1 && g_size > 1)
        md.split = ATTN_MPI_SPLIT_ZIGZAG;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: the last rank has another split", st,
               g_size > 1 ? ATTN_ERR_DESC_MISMATCH : ATTN_OK);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    /* An option the header excludes on one rank only: its status on all. */
    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    if (g_rank == 0)
        md.sdpa.want_probs = 1;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: want_probs on rank 0", st, ATTN_ERR_BAD_OPTION);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    md.sdpa.k_type = ATTN_DTYPE_F16;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: F16 K", st, ATTN_ERR_UNSUPPORTED_TYPE);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    md.sdpa.use_positions = 1;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: use_positions set by the caller", st, ATTN_ERR_BAD_OPTION);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    md.split = (attn_mpi_split)7;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: unknown split", st, ATTN_ERR_BAD_OPTION);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    /* A bad view on the last rank only. */
    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    if (g_rank == g_size - 1)
        md.sdpa.o.seq = ATTN_STRIDE_UNSET;
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    expect_all("fail: the last rank's O view unset", st, ATTN_ERR_STRIDES_UNSET);
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    /* At execute: a NULL q on the last rank (which holds query rows). */
    md = mpi_desc(c, &l, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
    if (st == ATTN_OK) {
        attn_sdpa_args a = fwd_args(c, &w, &l);
        if (g_rank == g_size - 1)
            a.q = NULL;
        st = attn_mpi_forward(plan, &a);
    }
    expect_all("fail: NULL q on the last rank (forward)", st, ATTN_ERR_NULL_ARGUMENT);

    /* The backward with a dbias pointer on rank 0. */
    if (plan) {
        attn_sdpa_bwd_args ba = bwd_args(c, &w, &l);
        float junk[4];
        if (g_rank == 0)
            ba.dbias = junk;
        st = attn_mpi_backward(plan, &ba);
        expect_all("fail: dbias on rank 0 (backward)", st, ATTN_ERR_ARGUMENT_MISMATCH);
        /* And after the failures the plan still works. */
        attn_sdpa_args a = fwd_args(c, &w, &l);
        st = attn_mpi_forward(plan, &a);
        expect_all("fail: the plan works after failed calls", st, ATTN_OK);
        /* The decode call on a ring plan. */
        st = attn_mpi_decode(plan, &a);
        expect_all("fail: attn_mpi_decode on a ring plan", st, ATTN_ERR_BAD_OPTION);
    }
    attn_mpi_plan_destroy(plan);
    plan = NULL;

    /* Lengths that differ on rank 1, and a length past m on rank 0. */
    {
        const rcase *cl = &rcases[8]; /* kv_lens and q_lens */
        whole w2;
        whole_make(cl, 8, &w2);
        local l2;
        local_make(cl, ATTN_MPI_SPLIT_CONTIGUOUS, g_size, g_rank, &w2, &l2);
        md = mpi_desc(cl, &l2, ATTN_MPI_SPLIT_CONTIGUOUS, 1);
        st = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD);
        if (st == ATTN_OK) {
            attn_sdpa_args a = fwd_args(cl, &w2, &l2);
            int32_t other[3];
            memcpy(other, w2.kv_lens, sizeof other);
            other[1] -= 1;
            if (g_rank == 1)
                a.kv_lens = other;
            st = attn_mpi_forward(plan, &a);
            expect_all("fail: rank 1's kv_lens differ", st,
                       g_size > 1 ? ATTN_ERR_DESC_MISMATCH : ATTN_OK);
            a = fwd_args(cl, &w2, &l2);
            memcpy(other, w2.kv_lens, sizeof other);
            other[0] = (int32_t)cl->m + 1;
            if (g_rank == 0)
                a.kv_lens = other;
            st = attn_mpi_forward(plan, &a);
            expect_all("fail: rank 0's kv_lens[0] = m + 1", st, ATTN_ERR_BAD_LENGTH);
        } else {
            expect_all("fail: plan for the lengths cases", st, ATTN_OK);
        }
        attn_mpi_plan_destroy(plan);
        plan = NULL;
        local_free(&l2);
        whole_free(&w2);
    }

    /* Decode: another q_len on rank 0. */
    {
        attn_mpi_decode_desc dd;
        attn_mpi_decode_desc_init(&dd);
        attn_sdpa_desc *d = &dd.local;
        d->batch = 1;
        d->q_heads = d->kv_heads = 2;
        d->q_len = g_rank == 0 && g_size > 1 ? 2 : 1;
        d->kv_len = 10 + g_rank;
        d->qk_dim = d->v_dim = 8;
        d->q = d->o = attn_view_bhsd(2, d->q_len, 8);
        d->k = d->v = attn_view_bhsd(2, d->kv_len, 8);
        d->use_positions = 1;
        d->kv_pos0 = 100 * g_rank;
        st = attn_mpi_decode_plan_create(&plan, &dd, MPI_COMM_WORLD);
        expect_all("fail: decode, another q_len on rank 0", st,
                   g_size > 1 ? ATTN_ERR_DESC_MISMATCH : ATTN_OK);
        attn_mpi_plan_destroy(plan);
        plan = NULL;
        d->q_len = 1;
        d->q = d->o = attn_view_bhsd(2, 1, 8);
        d->use_positions = 0;
        d->kv_pos0 = 0;
        st = attn_mpi_decode_plan_create(&plan, &dd, MPI_COMM_WORLD);
        expect_all("fail: decode without use_positions", st, ATTN_ERR_BAD_OPTION);
        attn_mpi_plan_destroy(plan);
        plan = NULL;
    }

    /* Decode: integer scores (1.4) on rank 0 only, against a Q8_0 K. */
    {
        attn_mpi_decode_desc dd;
        attn_mpi_decode_desc_init(&dd);
        attn_sdpa_desc *d = &dd.local;
        d->batch = 1;
        d->q_heads = d->kv_heads = 2;
        d->q_len = 1;
        d->kv_len = 10 + g_rank;
        d->qk_dim = d->v_dim = 32;
        d->q = d->o = attn_view_bhsd(2, 1, 32);
        d->k = d->v = attn_view_bhsd(2, d->kv_len, 32);
        d->k_type = ATTN_DTYPE_Q8_0;
        d->use_positions = 1;
        d->kv_pos0 = 100 * g_rank;
        d->qk_int8 = g_rank == 0;
        st = attn_mpi_decode_plan_create(&plan, &dd, MPI_COMM_WORLD);
        expect_all("fail: decode, integer scores on rank 0 only", st,
                   g_size > 1 ? ATTN_ERR_DESC_MISMATCH : ATTN_OK);
        attn_mpi_plan_destroy(plan);
        plan = NULL;
    }

    /* NULL arguments: every rank the same. */
    st = attn_mpi_plan_create(&plan, NULL, MPI_COMM_WORLD);
    expect_all("fail: NULL desc", st, ATTN_ERR_NULL_ARGUMENT);
    st = attn_mpi_plan_create(NULL, &md, MPI_COMM_WORLD);
    expect_all("fail: NULL plan pointer", st, ATTN_ERR_NULL_ARGUMENT);
    st = attn_mpi_plan_create(&plan, &md, MPI_COMM_NULL);
    expect_all("fail: MPI_COMM_NULL", st, ATTN_ERR_NULL_ARGUMENT);
    local_free(&l);
    whole_free(&w);
}

/* MPI_COMM_SELF: each rank runs the whole problem alone. */
static void run_self(void)
{
    const rcase *c = &rcases[20];
    whole w;
    attn_status wst = whole_make(c, 20, &w);
    local l;
    local_make(c, ATTN_MPI_SPLIT_ZIGZAG, 1, 0, &w, &l);
    attn_status st[2];
    ring_run(c, &w, &l, ATTN_MPI_SPLIT_ZIGZAG, 1, MPI_COMM_SELF, st, NULL);
    int ok = wst == ATTN_OK && st[0] == ATTN_OK && st[1] == ATTN_OK;
    double err = 0.0;
    if (ok) {
        cmp co = cmp_begin(w.o, (size_t)(c->B * c->Hq * c->n * c->dv));
        cmp cq = cmp_begin(w.dq, (size_t)(c->B * c->Hq * c->n * c->dk));
        cmp ck = cmp_begin(w.dk, (size_t)(c->B * c->Hkv * c->m * c->dk));
        cmp_rows(&co, l.o, l.ov, w.o, c->B, c->Hq, c->n, c->dv, &l.qr);
        cmp_rows(&cq, l.dq, l.qv, w.dq, c->B, c->Hq, c->n, c->dk, &l.qr);
        cmp_rows(&ck, l.dk, l.kv, w.dk, c->B, c->Hkv, c->m, c->dk, &l.kr);
        ok = co.ok && cq.ok && ck.ok;
        err = fmax(co.err, fmax(cq.err, ck.err));
    }
    report("MPI_COMM_SELF: whole problem on one rank = one call", ok, err, "");
    local_free(&l);
    whole_free(&w);
}

/* attn_mpi_rows: partitions of [0, L) and the statuses. */
static void run_rows(void)
{
    int ok = 1;
    const int64_t lens[] = { 0, 1, 3, 7, 8, 29, 37, 1000 };
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (int P = 1; P <= 6; P++)
            for (int split = 0; split < 2; split++) {
                const int64_t L = lens[li];
                unsigned char *seen = xcalloc((size_t)L + 1, 1);
                int64_t mn = INT64_MAX, mx = 0;
                for (int r = 0; r < P; r++) {
                    int64_t s[2], n[2];
                    if (attn_mpi_rows((attn_mpi_split)split, L, P, r, s, n) != ATTN_OK) {
                        ok = 0;
                        continue;
                    }
                    if (split == 0 && n[1] != 0)
                        ok = 0;
                    for (int t = 0; t < 2; t++) {
                        /* Run c of k: [c L / k, (c + 1) L / k). */
                        const int64_t k = split ? 2 * P : P, cc = t == 0 ? r : 2 * P - 1 - r;
                        if (t == 1 && split == 0)
                            continue;
                        if (s[t] != cc * L / k || n[t] != (cc + 1) * L / k - cc * L / k)
                            ok = 0;
                        mn = n[t] < mn ? n[t] : mn;
                        mx = n[t] > mx ? n[t] : mx;
                        for (int64_t i = s[t]; i < s[t] + n[t] && i < L; i++)
                            seen[i]++;
                    }
                }
                for (int64_t i = 0; i < L; i++)
                    if (seen[i] != 1)
                        ok = 0;
                if (mx - mn > 1)
                    ok = 0;
                free(seen);
            }
    int64_t s[2], n[2];
    ok &= attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, 5, 2, 0, NULL, n) == ATTN_ERR_NULL_ARGUMENT;
    ok &= attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, -1, 2, 0, s, n) == ATTN_ERR_BAD_SIZE;
    ok &= attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, 5, 0, 0, s, n) == ATTN_ERR_BAD_SIZE;
    ok &= attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, 5, 2, 2, s, n) == ATTN_ERR_BAD_SIZE;
    ok &= attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, 5, 2, -1, s, n) == ATTN_ERR_BAD_SIZE;
    ok &= attn_mpi_rows((attn_mpi_split)2, 5, 2, 0, s, n) == ATTN_ERR_BAD_OPTION;
    report("attn_mpi_rows: partitions (L 0..1000, P 1..6) and statuses", ok, 0.0, "");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_rank == 0)
        printf("test_mpi: %d rank(s), attn %s\n", g_size, attn_version());

    run_rows();
    const int nr = (int)(sizeof rcases / sizeof rcases[0]);
    for (int i = 0; i < nr; i++) {
        run_ring_case(&rcases[i], i, ATTN_MPI_SPLIT_CONTIGUOUS);
        run_ring_case(&rcases[i], i, ATTN_MPI_SPLIT_ZIGZAG);
    }
    const int nd = (int)(sizeof dcases / sizeof dcases[0]);
    for (int i = 0; i < nd; i++) {
        run_decode_case(&dcases[i], i, ATTN_MPI_MERGE_ALLGATHER);
        run_decode_case(&dcases[i], i, ATTN_MPI_MERGE_ALLREDUCE);
    }
    run_failures();
    run_self();

    if (g_rank == 0)
        printf("test_mpi: P=%d, %d cases, %d passed, %d failed\n", g_size, g_cases,
               g_cases - g_failed, g_failed);
    const int failed = g_failed;
    MPI_Finalize();
    return failed ? 1 : 0;
}
