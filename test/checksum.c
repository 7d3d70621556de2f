/*
 * checksum.c -- attn-checksum: bitwise fingerprints of a fixed set of calls.
 *
 * What it is for: proving that a change of the library's internals
 * (dispatch, file layout, refactoring) left every result bitwise the same.
 * The same build at every level and the same calls must give the same
 * lines; compare a refactored library against a reference build: run both
 * and diff.  For example
 *
 *   OPENBLAS_NUM_THREADS=1 ref/test/attn-checksum > ref.txt
 *   OPENBLAS_NUM_THREADS=1 new/test/attn-checksum > new.txt && diff ref.txt new.txt
 *
 * and the same under ATTN_SIMD=avx2|scalar, ATTN_ENGINE=blas|tile and
 * ATTN_DECODE=0 (the library reads them; one binary covers every level).
 * Results of different levels or engines are not expected to agree with
 * each other, only with the same level of another build.
 *
 * Every call of the public API (attn.h only) runs on inputs from a
 * SplitMix64 generator seeded by the call's name (adding a case moves no
 * other line), with NaN planted where attn.h says nothing is read (padded
 * query rows, K/V rows no query sees, hidden mask/bias entries, gaps
 * between rows, unused cache blocks and table entries).  Every output
 * buffer, gaps and a tail included, is filled with a sentinel before the
 * call and hashed whole afterwards.  One line per call:
 *
 *   <name> <status> <64-bit FNV-1a of the output buffers' bytes, in hex>
 *
 * Lines ".t1" (one-shot call, 1 thread) and ".t2" (plan + caller workspace,
 * 2 threads) of one configuration must show the same hash.  The error
 * cases show a nonzero status and the hash of untouched (sentinel) buffers.
 * ATTN_CHECKSUM_POISON=<float> plants that finite value instead of NaN:
 * if the hashes change, the library read something attn.h says it never
 * reads.  No timing is printed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

#define TAIL 16               /* sentinel elements after every output */
#define SENT 0x7fc0deadu      /* the sentinel of float outputs */

static float poison;          /* NaN, or ATTN_CHECKSUM_POISON */
static const char *const eng_name[] = { "auto", "blas", "tile" };

/* ------------------------------------------------------------ helpers */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

typedef struct rng { uint64_t s; } rng;
static uint64_t next(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in [-1, 1), exact multiples of 2^-23 */
static float unif(rng *r) { return (float)((int64_t)(next(r) >> 40) - (1 << 23)) * 0x1p-23f; }
static int chance(rng *r, double p) { return (double)(next(r) >> 11) * 0x1p-53 < p; }
static rng seeded(const char *name, const char *salt)
{
    rng r = { fnv(fnv(FNV0, name, strlen(name)), salt, strlen(salt)) };
    return r;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "attn-checksum: out of memory\n");
        exit(2);
    }
    return p;
}
static float *fsent(size_t n)
{
    float *p = xmalloc(n * sizeof *p);
    const uint32_t s = SENT;
    for (size_t i = 0; i < n; i++)
        memcpy(&p[i], &s, 4);
    return p;
}
static float *frand(rng *r, size_t n, int pos)
{
    float *p = xmalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = pos ? fabsf(unif(r)) : unif(r);
    return p;
}
/* 64-byte aligned, whole, filled with 0xFF (NaN) */
static void *wsalloc(size_t n)
{
    const size_t r = (n + 63) / 64 * 64 + 64;
    void *w = aligned_alloc(64, r);
    if (!w)
        exit(2);
    memset(w, 0xFF, r);
    return w;
}

/* The output buffers of a call, hashed in order. */
typedef struct outs {
    const void *p[16];
    size_t n[16];
    int k;
} outs;
static void out_add(outs *o, const void *p, size_t bytes)
{
    if (p) {
        o->p[o->k] = p;
        o->n[o->k++] = bytes;
    }
}
/* outs of k (pointer, bytes) pairs; NULL pointers are skipped */
static outs mk(int k, ...)
{
    outs o = { .k = 0 };
    va_list ap;
    va_start(ap, k);
    for (int i = 0; i < k; i++) {
        const void *q = va_arg(ap, const void *);
        out_add(&o, q, va_arg(ap, size_t));
    }
    va_end(ap);
    return o;
}
static void emit(const char *name, attn_status s, const outs *o)
{
    uint64_t h = FNV0;
    for (int i = 0; i < o->k; i++)
        h = fnv(h, o->p[i], o->n[i]);
    printf("%s %d %016llx\n", name, (int)s, (unsigned long long)h);
}
static void emit1(const char *name, attn_status s, const void *p, size_t bytes)
{
    outs o = mk(1, p, bytes);
    emit(name, s, &o);
}

/* Views by layout: 0 BHSD, 1 BSHD, 2 BHSD with 8 elements of gap per row. */
static attn_view lview(int lay, int64_t H, int64_t S, int64_t D)
{
    if (lay == 1)
        return attn_view_bshd(H, S, D);
    const int64_t ld = lay == 2 ? D + 8 : D;
    attn_view v = { H * S * ld, S * ld, ld };
    return v;
}
static size_t vcount(attn_view v, int64_t B, int64_t H, int64_t S, int64_t D)
{
    return (size_t)((B - 1) * v.batch + (H - 1) * v.head + (S - 1) * v.seq + D) + TAIL;
}
static float *vat(float *p, attn_view v, int64_t b, int64_t h, int64_t i)
{
    return p + b * v.batch + h * v.head + i * v.seq;
}
/* A [B][H][S][D] input in view v: uniform values, poison in gaps and tail. */
static float *tens(rng *r, attn_view v, int64_t B, int64_t H, int64_t S, int64_t D, int pos,
                   size_t *cnt)
{
    *cnt = vcount(v, B, H, S, D);
    float *p = xmalloc(*cnt * sizeof *p);
    for (size_t i = 0; i < *cnt; i++)
        p[i] = poison;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++)
                for (int64_t x = 0; x < D; x++)
                    vat(p, v, b, h, i)[x] = pos ? fabsf(unif(r)) : unif(r);
    return p;
}
static void poison_row(float *p, attn_view v, int64_t b, int64_t h, int64_t i, int64_t D)
{
    for (int64_t x = 0; x < D; x++)
        vat(p, v, b, h, i)[x] = poison;
}
/* Lengths: the first batch full, then shorter ones (n / 3 rounds to 0 for
 * n < 3: an empty sequence). */
static int32_t len_of(int64_t b, int64_t full)
{
    return (int32_t)(b == 0 ? full : b == 1 ? full - full / 4 - 1 : full / 3);
}

/* ------------------------------------------------------------------ SDPA */

typedef struct scase {
    const char *name;
    int B, Hq, Hkv, n, m, dk, dv;
    int lay;                   /* 0 BHSD, 1 BSHD, 2 BHSD with gaps */
    int win, align, wl, wr;    /* window (win = 0: unbounded) */
    int kvl, ql;               /* kv_lens, q_lens */
    int mask, mbc;             /* mask mode, broadcast bits (1 B, 2 H, 4 n) */
    int bias, bbc;             /* additive bias with -inf, broadcast bits */
    int probs, lse, drop;      /* outputs; dropout p = 0.1 */
    int gk, gq, bs, ph;        /* sparse: global flags, block size, per head */
    int kt, vt, paged;         /* K/V storage, paged cache of 16-token blocks */
    int qt, ot;                /* element types of Q and O */
    int bwd;                   /* backward too (2: with dBias); needs lse */
    float scale;               /* 0: default */
} scase;

#define SH(b_, hq_, hkv_, n_, m_, dk_, dv_) \
    .B = b_, .Hq = hq_, .Hkv = hkv_, .n = n_, .m = m_, .dk = dk_, .dv = dv_
#define CAUSAL .win = 1, .wl = -1, .wr = 0
#define BR .align = ATTN_ALIGN_BOTTOM_RIGHT
#define F16 ATTN_DTYPE_F16
#define BF16 ATTN_DTYPE_BF16

static const scase sdpa_cases[] = {
    { "dense", SH(2, 4, 4, 200, 300, 64, 64), .probs = 1, .lse = 1 },
    { "dense_bshd_dkdv", SH(2, 4, 4, 190, 250, 40, 72), .lay = 1, .lse = 1, .bwd = 1 },
    { "dense_gaps", SH(2, 3, 3, 77, 129, 72, 72), .lay = 2, .probs = 1, .lse = 1 },
    { "dense_scale", SH(1, 2, 2, 33, 47, 64, 40), .scale = 0.3f, .lse = 1 },
    { "big_n", SH(1, 2, 1, 530, 100, 40, 40), CAUSAL, BR, .lse = 1 },
    { "split_k", SH(1, 4, 1, 40, 1500, 64, 64), CAUSAL, BR, .lse = 1 },
    { "causal_tl", SH(2, 4, 4, 200, 200, 64, 64), CAUSAL, .probs = 1, .lse = 1, .bwd = 1 },
    { "causal_tl_nm", SH(2, 2, 2, 150, 250, 64, 64), CAUSAL, .lse = 1 },
    { "causal_br", SH(2, 4, 4, 150, 250, 64, 64), CAUSAL, BR, .lse = 1 },
    { "causal_br_lens", SH(3, 4, 2, 130, 210, 72, 72), CAUSAL, BR, .kvl = 1, .ql = 1,
      .probs = 1, .lse = 1, .bwd = 1 },
    { "window_tl", SH(2, 2, 2, 200, 200, 64, 64), .win = 1, .wl = 37, .wr = 5, .probs = 1 },
    { "window_br", SH(2, 2, 2, 100, 300, 64, 64), .win = 1, .wl = 20, .wr = 20, BR, .lse = 1 },
    { "mask_keep", SH(2, 4, 4, 120, 170, 64, 64), .mask = ATTN_MASK_KEEP_NONZERO, .probs = 1,
      .lse = 1 },
    { "mask_drop_bc", SH(2, 4, 2, 130, 190, 64, 64), .mask = ATTN_MASK_DROP_NONZERO,
      .mbc = 3, .lse = 1, .bwd = 1 },
    { "mask_keyrow", SH(3, 2, 2, 90, 140, 40, 40), .mask = ATTN_MASK_DROP_NONZERO, .mbc = 6,
      .kvl = 1 },
    { "bias_ninf", SH(2, 4, 4, 110, 180, 64, 64), .bias = 1, .probs = 1, .lse = 1, .bwd = 2 },
    { "bias_bc_causal", SH(2, 4, 2, 150, 150, 64, 64), CAUSAL, .bias = 1, .bbc = 1, .lse = 1,
      .bwd = 2 },
    { "bias_bc_seq", SH(2, 2, 2, 70, 90, 72, 72), .bias = 1, .bbc = 6, .lse = 1, .bwd = 2 },
    { "lens", SH(3, 4, 4, 120, 260, 64, 64), .kvl = 1, .ql = 1, .probs = 1, .lse = 1 },
    { "gqa", SH(2, 4, 2, 200, 300, 64, 64), .lse = 1, .bwd = 1 },
    { "mqa_bshd", SH(2, 4, 1, 180, 230, 64, 64), .lay = 1, CAUSAL, BR, .lse = 1, .bwd = 1 },
    { "dropout", SH(2, 4, 4, 100, 170, 64, 64), .drop = 1, .probs = 1, .lse = 1 },
    { "dropout_gqa", SH(3, 4, 2, 120, 150, 40, 72), .drop = 1, CAUSAL, BR, .kvl = 1, .ql = 1,
      .lse = 1, .bwd = 1 },
    { "everything", SH(3, 4, 2, 140, 220, 64, 64), .lay = 1, .win = 1, .wl = 60, .wr = 10,
      .kvl = 1, .ql = 1, .mask = ATTN_MASK_KEEP_NONZERO, .mbc = 2, .bias = 1, .probs = 1,
      .lse = 1, .bwd = 2 },
    /* sparse */
    { "sp_global_k", SH(2, 4, 4, 200, 250, 64, 64), .win = 1, .wl = 16, .wr = 16, .gk = 1,
      .probs = 1, .lse = 1 },
    { "sp_global_kq", SH(2, 4, 2, 160, 160, 64, 64), CAUSAL, .gk = 1, .gq = 1, .lse = 1,
      .bwd = 1 },
    { "sp_bs16_shared", SH(2, 4, 4, 150, 230, 64, 64), .bs = 16, .probs = 1, .lse = 1 },
    { "sp_bs32_head", SH(2, 4, 2, 200, 300, 40, 40), .bs = 32, .ph = 1, .lse = 1 },
    { "sp_bs16_all", SH(3, 4, 2, 130, 170, 64, 64), .bs = 16, .ph = 1, .gk = 1, .gq = 1,
      .win = 1, .wl = 32, .wr = 0, BR, .kvl = 1, .ql = 1, .bias = 1, .probs = 1, .lse = 1,
      .bwd = 2 },
    { "sp_bs32_drop", SH(2, 2, 2, 100, 140, 64, 64), .bs = 32, .drop = 1, .lse = 1, .bwd = 1 },
    /* decode */
    { "dec_q1_f32", SH(2, 8, 2, 1, 300, 64, 64), CAUSAL, BR, .kvl = 1, .lse = 1 },
    { "dec_q4_f16", SH(2, 8, 2, 4, 300, 64, 64), CAUSAL, BR, .kvl = 1, .kt = F16, .vt = F16,
      .probs = 1, .lse = 1 },
    { "dec_q4_bf16", SH(2, 4, 4, 4, 270, 72, 72), CAUSAL, BR, .kvl = 1, .kt = BF16, .vt = BF16 },
    { "dec_q1_mixed_mqa", SH(3, 4, 1, 1, 190, 64, 40), .kvl = 1, .kt = F16, .vt = BF16,
      .lse = 1 },
    { "dec_q4_split", SH(1, 4, 1, 4, 1200, 64, 64), CAUSAL, BR, .lse = 1 },
    { "dec_paged_f32", SH(2, 8, 2, 4, 300, 64, 64), CAUSAL, BR, .kvl = 1, .paged = 1, .lse = 1 },
    { "dec_paged_f16", SH(3, 4, 2, 1, 260, 64, 64), CAUSAL, BR, .kvl = 1, .paged = 1,
      .kt = F16, .vt = F16, .lse = 1 },
    { "dec_paged_bf16", SH(2, 4, 4, 4, 200, 40, 40), CAUSAL, BR, .kvl = 1, .paged = 1,
      .kt = BF16, .vt = BF16, .probs = 1 },
    { "prefill_paged_f16", SH(2, 4, 2, 40, 200, 64, 64), CAUSAL, BR, .kvl = 1, .paged = 1,
      .kt = F16, .vt = F16, .lse = 1 },
    /* 16-bit Q, K, V, O: the BF16 products (tile engine) or widened */
    { "bf16_dense", SH(2, 4, 4, 200, 300, 64, 64), .qt = BF16, .kt = BF16, .vt = BF16,
      .ot = BF16, .probs = 1, .lse = 1, .bwd = 1 },
    { "bf16_causal_gqa_bshd", SH(2, 4, 2, 190, 250, 64, 64), .lay = 1, CAUSAL, BR, .qt = BF16,
      .kt = BF16, .vt = BF16, .ot = BF16, .lse = 1, .bwd = 1 },
    { "bf16_odd_dims_gaps", SH(2, 3, 3, 77, 129, 33, 17), .lay = 2, .win = 1, .wl = 9, .wr = 4,
      .qt = BF16, .kt = BF16, .vt = BF16, .ot = BF16, .probs = 1 },
    { "bf16_everything", SH(3, 4, 2, 140, 620, 64, 64), .lay = 1, .win = 1, .wl = 60, .wr = 10,
      .kvl = 1, .ql = 1, .mask = ATTN_MASK_KEEP_NONZERO, .mbc = 2, .bias = 1, .drop = 1,
      .qt = BF16, .kt = BF16, .vt = BF16, .ot = BF16, .probs = 1, .lse = 1, .bwd = 2 },
    { "bf16_split_k", SH(1, 4, 1, 40, 1500, 64, 64), CAUSAL, BR, .qt = BF16, .kt = BF16,
      .vt = BF16, .ot = BF16, .lse = 1 },
    { "bf16_decode_q4", SH(2, 8, 2, 4, 300, 64, 64), CAUSAL, BR, .kvl = 1, .qt = BF16,
      .kt = BF16, .vt = BF16, .ot = BF16, .lse = 1 },
    { "f16_dense", SH(2, 4, 4, 200, 300, 64, 64), .qt = F16, .kt = F16, .vt = F16, .ot = F16,
      .probs = 1, .lse = 1 },
    { "f16_lens_mask", SH(3, 4, 2, 130, 210, 72, 72), CAUSAL, BR, .kvl = 1, .ql = 1,
      .mask = ATTN_MASK_DROP_NONZERO, .mbc = 3, .qt = F16, .kt = F16, .vt = F16, .ot = F16,
      .lse = 1, .bwd = 1 },
    { "mixed_q_bf16_kv_f32", SH(2, 4, 4, 100, 170, 64, 64), .qt = BF16, .lse = 1, .bwd = 1 },
    { "mixed_o_f16_only", SH(2, 4, 2, 120, 150, 40, 72), CAUSAL, .ot = F16, .lse = 1, .bwd = 1 },
    { "mixed_kv_bf16_o_f16", SH(2, 4, 2, 90, 260, 40, 24), .qt = F16, .kt = BF16, .vt = BF16,
      .ot = F16, .drop = 1, .lse = 1, .bwd = 1 },
};

typedef struct sinst {
    attn_sdpa_desc d;
    float *q, *k, *v, *bias, *dout;
    uint16_t *q16, *k16, *v16;
    uint8_t *mask, *gk, *gq, *lay;
    int32_t kvl[4], ql[4], *table;
    size_t nq, nk, nv, no, nbias, np, nl, nmask;
} sinst;

/* Whether query i of batch b may see key j through the lengths, the window,
 * the global tokens and a shared layout (the mask and bias aside). */
static int sees(const scase *c, const sinst *t, int64_t b, int64_t i, int64_t j)
{
    const int64_t nb = c->ql ? t->ql[b] : c->n, mb = c->kvl ? t->kvl[b] : c->m;
    if (i >= nb || j >= mb)
        return 0;
    if (c->bs && !c->ph && !t->lay[(i / c->bs) * ((c->m + c->bs - 1) / c->bs) + j / c->bs])
        return 0;
    if ((c->gk && t->gk[b * c->m + j]) || (c->gq && t->gq[b * c->n + i]))
        return 1;
    if (!c->win)
        return 1;
    const int64_t d = c->align == ATTN_ALIGN_BOTTOM_RIGHT ? i + mb - nb : i;
    return !(c->wl >= 0 && j < d - c->wl) && !(c->wr >= 0 && j > d + c->wr);
}

/* [B|1][H|1][n|1][m] strides and count for broadcast bits bc */
static attn_view bview(int bc, int64_t B, int64_t H, int64_t n, int64_t m, size_t *count)
{
    const int64_t Bm = bc & 1 ? 1 : B, Hm = bc & 2 ? 1 : H, nm = bc & 4 ? 1 : n;
    attn_view v = { bc & 1 ? 0 : Hm * nm * m, bc & 2 ? 0 : nm * m, bc & 4 ? 0 : m };
    *count = (size_t)(Bm * Hm * nm * m);
    return v;
}

/* Paged pool of 16-token blocks [nblk][Hkv][16][D] from a contiguous view. */
static float *page(const scase *c, const sinst *t, float *src, attn_view v, int64_t D,
                   size_t *cnt)
{
    const int64_t maxb = (c->m + 15) / 16, nblk = c->B * maxb + 3;
    *cnt = (size_t)(nblk * c->Hkv * 16 * D) + TAIL;
    float *p = xmalloc(*cnt * sizeof *p);
    for (size_t i = 0; i < *cnt; i++)
        p[i] = poison;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t j = 0; j < t->kvl[b]; j++)
                memcpy(p + ((t->table[b * maxb + j / 16] * c->Hkv + h) * 16 + j % 16) * D,
                       vat(src, v, b, h, j), (size_t)D * sizeof *p);
    return p;
}
static uint16_t *to16(attn_dtype ty, const float *p, size_t n)
{
    uint16_t *d = xmalloc(n * sizeof *d);
    if (attn_dtype_encode(ty, p, d, (int64_t)n) != ATTN_OK)
        exit(3);
    return d;
}

static void sinst_build(const scase *c, sinst *t)
{
    memset(t, 0, sizeof *t);
    rng r = seeded(c->name, "sdpa");
    const int64_t B = c->B, n = c->n, m = c->m;
    for (int64_t b = 0; b < B; b++) {
        t->kvl[b] = c->kvl ? len_of(b, m) : (int32_t)m;
        t->ql[b] = c->ql ? len_of(b, n) : (int32_t)n;
    }
    if (c->gk || c->gq) {
        t->gk = xmalloc(B * m);
        t->gq = xmalloc(B * n);
        for (int64_t x = 0; x < B * m; x++)
            t->gk[x] = chance(&r, 0.08) ? (uint8_t)(1 + next(&r) % 255) : 0;
        for (int64_t x = 0; x < B * n; x++)
            t->gq[x] = chance(&r, 0.08) ? (uint8_t)(1 + next(&r) % 255) : 0;
    }
    if (c->bs) {
        const int64_t nl =
            (c->ph ? c->Hq : 1) * ((n + c->bs - 1) / c->bs) * ((m + c->bs - 1) / c->bs);
        t->lay = xmalloc((size_t)nl);
        for (int64_t x = 0; x < nl; x++)
            t->lay[x] = chance(&r, 0.6) ? (uint8_t)(1 + next(&r) % 255) : 0;
    }
    attn_sdpa_desc *d = &t->d;
    attn_sdpa_desc_init(d);
    d->batch = B;
    d->q_heads = c->Hq;
    d->kv_heads = c->Hkv;
    d->q_len = n;
    d->kv_len = m;
    d->qk_dim = c->dk;
    d->v_dim = c->dv;
    d->q = lview(c->lay, c->Hq, n, c->dk);
    d->k = lview(c->lay, c->Hkv, m, c->dk);
    d->v = lview(c->lay, c->Hkv, m, c->dv);
    d->o = lview(c->lay, c->Hq, n, c->dv);
    if (c->scale != 0.0f)
        d->scale = c->scale;
    d->align = (attn_align)c->align;
    if (c->win) {
        d->window_left = c->wl;
        d->window_right = c->wr;
    }
    d->use_kv_lens = c->kvl;
    d->use_q_lens = c->ql;
    d->want_probs = c->probs;
    d->want_lse = c->lse;
    const int64_t pld = c->lay == 2 ? m + 5 : m;
    if (c->probs) {
        d->probs = (attn_view){ c->Hq * n * pld, n * pld, pld };
        t->np = vcount(d->probs, B, c->Hq, n, m);
    }
    if (c->lse) {
        d->lse = c->lay == 1 ? (attn_view){ n * c->Hq, 1, c->Hq } : (attn_view){ c->Hq * n, n, 1 };
        t->nl = vcount(d->lse, B, c->Hq, n, 1);
    }
    if (c->drop) {
        d->dropout_p = 0.1;
        d->dropout_seed = 0x1234567887654321ull;
        d->dropout_offset = 977;
    }
    d->use_global_k = c->gk;
    d->use_global_q = c->gq;
    d->block_size = c->bs;
    d->layout_per_head = c->ph;

    t->q = tens(&r, d->q, B, c->Hq, n, c->dk, 0, &t->nq);
    t->k = tens(&r, d->k, B, c->Hkv, m, c->dk, 0, &t->nk);
    t->v = tens(&r, d->v, B, c->Hkv, m, c->dv, 0, &t->nv);
    t->dout = tens(&r, d->o, B, c->Hq, n, c->dv, 0, &t->no);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = t->ql[b]; i < n; i++)
            for (int64_t h = 0; h < c->Hq; h++) {
                poison_row(t->q, d->q, b, h, i, c->dk);
                poison_row(t->dout, d->o, b, h, i, c->dv);
            }
        for (int64_t j = 0; j < m; j++) {
            int used = 0;
            for (int64_t i = 0; i < n && !used; i++)
                used = sees(c, t, b, i, j);
            for (int64_t h = 0; h < c->Hkv && !used; h++) {
                poison_row(t->k, d->k, b, h, j, c->dk);
                poison_row(t->v, d->v, b, h, j, c->dv);
            }
        }
    }
    if (c->mask) {
        d->mask_mode = (attn_mask_mode)c->mask;
        d->mask = bview(c->mbc, B, c->Hq, n, m, &t->nmask);
        t->mask = xmalloc(t->nmask);
        for (size_t x = 0; x < t->nmask; x++)
            t->mask[x] = chance(&r, c->mask == ATTN_MASK_KEEP_NONZERO ? 0.8 : 0.2)
                             ? (uint8_t)(1 + next(&r) % 255) : 0;
    }
    if (c->bias) {
        d->use_bias = 1;
        d->bias = bview(c->bbc, B, c->Hq, n, m, &t->nbias);
        t->bias = xmalloc(t->nbias * sizeof(float));
        const int64_t Bm = c->bbc & 1 ? 1 : B, Hm = c->bbc & 2 ? 1 : c->Hq;
        const int64_t nm = c->bbc & 4 ? 1 : n;
        size_t x = 0;
        for (int64_t bb = 0; bb < Bm; bb++)
            for (int64_t hh = 0; hh < Hm; hh++)
                for (int64_t ii = 0; ii < nm; ii++)
                    for (int64_t j = 0; j < m; j++, x++) {
                        /* poison where every (b, i) reading the entry hides j */
                        int used = 0;
                        const int64_t b0 = Bm == 1 ? 0 : bb, b1 = Bm == 1 ? B : bb + 1;
                        const int64_t i0 = nm == 1 ? 0 : ii, i1 = nm == 1 ? n : ii + 1;
                        for (int64_t b = b0; b < b1 && !used; b++)
                            for (int64_t i = i0; i < i1 && !used; i++)
                                used = sees(c, t, b, i, j);
                        t->bias[x] = !used ? poison : chance(&r, 0.1) ? -INFINITY : unif(&r);
                    }
    }
    if (c->paged) {
        const int64_t maxb = (m + 15) / 16, nblk = B * maxb + 3;
        int32_t *perm = xmalloc((size_t)nblk * sizeof *perm);
        for (int64_t x = 0; x < nblk; x++)
            perm[x] = (int32_t)x;
        for (int64_t x = nblk - 1; x > 0; x--) {
            const int64_t y = (int64_t)(next(&r) % (uint64_t)(x + 1));
            const int32_t tmp = perm[x];
            perm[x] = perm[y];
            perm[y] = tmp;
        }
        t->table = xmalloc((size_t)(B * maxb) * sizeof *t->table);
        for (int64_t b = 0; b < B; b++)
            for (int64_t x = 0; x < maxb; x++)   /* entries past the length: never read */
                t->table[b * maxb + x] = x * 16 < t->kvl[b] ? perm[b * maxb + x] : -1;
        free(perm);
        float *kp = page(c, t, t->k, d->k, c->dk, &t->nk);
        float *vp = page(c, t, t->v, d->v, c->dv, &t->nv);
        free(t->k);
        free(t->v);
        t->k = kp;
        t->v = vp;
        d->k = attn_view_bhsd(c->Hkv, 16, c->dk);
        d->v = attn_view_bhsd(c->Hkv, 16, c->dv);
        d->kv_block_size = 16;
        d->kv_num_blocks = nblk;
        d->kv_max_blocks = maxb;
    }
    d->k_type = (attn_dtype)c->kt;
    d->v_type = (attn_dtype)c->vt;
    d->q_type = (attn_dtype)c->qt;
    d->o_type = (attn_dtype)c->ot;
    if (c->qt) {
        t->q16 = to16((attn_dtype)c->qt, t->q, t->nq);
        free(t->q);
        t->q = NULL;
    }
    if (c->kt) {
        t->k16 = to16((attn_dtype)c->kt, t->k, t->nk);
        free(t->k);
        t->k = NULL;
    }
    if (c->vt) {
        t->v16 = to16((attn_dtype)c->vt, t->v, t->nv);
        free(t->v);
        t->v = NULL;
    }
}

static void sinst_free(sinst *t)
{
    free(t->q); free(t->q16); free(t->k); free(t->v); free(t->bias); free(t->dout);
    free(t->k16);
    free(t->v16); free(t->mask); free(t->gk); free(t->gq); free(t->lay); free(t->table);
}

static attn_status sdpa_planned(const attn_sdpa_desc *d, const attn_sdpa_args *a)
{
    attn_sdpa_plan *p = NULL;
    attn_status s = attn_sdpa_plan_create(&p, d);
    if (s != ATTN_OK)
        return s;
    size_t n = 0;
    attn_sdpa_workspace_size(p, &n);
    void *ws = wsalloc(n);
    s = attn_sdpa_execute(p, a, ws, n);
    free(ws);
    attn_sdpa_plan_destroy(p);
    return s;
}

static attn_status bwd_planned(const attn_sdpa_bwd_desc *d, const attn_sdpa_bwd_args *a)
{
    attn_sdpa_bwd_plan *p = NULL;
    attn_status s = attn_sdpa_bwd_plan_create(&p, d);
    if (s != ATTN_OK)
        return s;
    size_t n = 0;
    attn_sdpa_bwd_workspace_size(p, &n);
    void *ws = wsalloc(n);
    s = attn_sdpa_bwd_execute(p, a, ws, n);
    free(ws);
    attn_sdpa_bwd_plan_destroy(p);
    return s;
}

static attn_sdpa_args sargs(const scase *c, const sinst *t, float *o, float *p, float *l)
{
    attn_sdpa_args a = { 0 };
    a.q = t->q;
    a.k = t->k;
    a.v = t->v;
    a.q16 = t->q16;
    a.k16 = t->k16;
    a.v16 = t->v16;
    a.o = o;
    a.probs = p;
    a.lse = l;
    a.kv_lens = c->kvl ? t->kvl : NULL;
    a.q_lens = c->ql ? t->ql : NULL;
    a.mask = t->mask;
    a.bias = t->bias;
    a.global_k = c->gk ? t->gk : NULL;
    a.global_q = c->gq ? t->gq : NULL;
    a.layout = t->lay;
    a.block_table = t->table;
    return a;
}

static void run_sdpa(const scase *c, const sinst *t, int eng, int th)
{
    char name[160];
    attn_sdpa_desc d = t->d;
    d.engine = (attn_engine)eng;
    d.threads = th;
    float *o = fsent(t->no), *p = c->probs ? fsent(t->np) : NULL, *l = c->lse ? fsent(t->nl) : NULL;
    attn_sdpa_args a = sargs(c, t, o, p, l);
    /* a 16-bit O: the float buffer's bytes hold it (sentinel bits as
     * pairs of 16-bit halves), hashed the same way */
    if (c->ot) {
        a.o16 = (uint16_t *)(void *)o;
        a.o = NULL;
    }
    attn_status s = th == 1 ? attn_sdpa(&d, &a) : sdpa_planned(&d, &a);
    outs ou = mk(3, o, t->no * 4, p, t->np * 4, l, t->nl * 4);
    snprintf(name, sizeof name, "sdpa.%s.%s.t%d", c->name, eng_name[eng], th);
    emit(name, s, &ou);

    if (c->bwd) {
        attn_sdpa_bwd_desc bd;
        attn_sdpa_bwd_desc_init(&bd);
        bd.fwd = d;
        bd.fwd.want_probs = 0;
        bd.fwd.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
        bd.d_o = d.o;
        bd.dq = d.q;
        bd.dk = d.k;
        bd.dv = d.v;
        float *dq = fsent(t->nq), *dk = fsent(t->nk), *dv = fsent(t->nv);
        float *db = c->bwd == 2 ? fsent(t->nbias) : NULL;
        if (db) {
            bd.want_dbias = 1;
            bd.dbias = d.bias;
        }
        attn_sdpa_bwd_args ba = { t->q, t->k, t->v, o, t->dout, l, a.kv_lens, a.q_lens, t->mask,
                                  t->bias, dq, dk, dv, db, a.global_k, a.global_q, t->lay, NULL, { 0 } };
        /* 16-bit tensors (1.1): through args16, dO rounded to O's type, the
         * gradients in the float buffers' bytes (as O above) */
        attn_sdpa_bwd_args16 b16;
        attn_sdpa_bwd_args16_init(&b16);
        uint16_t *do16 = NULL;
        if (c->qt || c->kt || c->vt || c->ot) {
            ba.args16 = &b16;
            if (c->qt) {
                b16.q = t->q16, b16.dq = (uint16_t *)(void *)dq;
                ba.dq = NULL;
            }
            if (c->kt) {
                b16.k = t->k16, b16.dk = (uint16_t *)(void *)dk;
                ba.dk = NULL;
            }
            if (c->vt) {
                b16.v = t->v16, b16.dv = (uint16_t *)(void *)dv;
                ba.dv = NULL;
            }
            if (c->ot) {
                do16 = to16((attn_dtype)c->ot, t->dout, t->no);
                b16.o = (const uint16_t *)(const void *)o, b16.d_o = do16;
                ba.o = ba.d_o = NULL;
            }
        }
        s = th == 1 ? attn_sdpa_backward(&bd, &ba) : bwd_planned(&bd, &ba);
        free(do16);
        outs ob = mk(4, dq, t->nq * 4, dk, t->nk * 4, dv, t->nv * 4, db, t->nbias * 4);
        snprintf(name, sizeof name, "sdpa_bwd.%s.%s.t%d", c->name, eng_name[eng], th);
        emit(name, s, &ob);
        free(dq); free(dk); free(dv); free(db);
    }
    free(o); free(p); free(l);
}

/* ---------------------------------------------------------------- linear */

typedef struct lcase {
    const char *name;
    int B, Hq, Hkv, n, m, dk, dv, lay, fmap, causal, align, kvl, ql, state, bwd;
    float eps;                 /* 0: default */
} lcase;

static const lcase lin_cases[] = {
    { "elu_full", SH(2, 4, 4, 150, 200, 64, 64), .bwd = 1 },
    { "elu_causal", SH(2, 4, 4, 200, 200, 64, 64), .causal = 1, .bwd = 1 },
    { "relu_causal_br_gqa_lens", SH(3, 4, 2, 100, 230, 72, 40), .fmap = ATTN_FEATURE_RELU,
      .causal = 1, BR, .kvl = 1, .ql = 1, .bwd = 1 },
    { "identity_bshd", SH(2, 4, 4, 130, 170, 40, 72), .lay = 1, .fmap = ATTN_FEATURE_IDENTITY,
      .bwd = 1 },
    { "identity_causal_mqa", SH(2, 4, 1, 129, 129, 64, 64), .lay = 2,
      .fmap = ATTN_FEATURE_IDENTITY, .causal = 1, .eps = 0.01f, .bwd = 1 },
    { "state_elu_causal_gqa", SH(2, 4, 2, 130, 130, 64, 64), .causal = 1, .state = 1 },
    { "state_relu_lens", SH(3, 2, 2, 70, 90, 64, 40), .fmap = ATTN_FEATURE_RELU, .kvl = 1,
      .ql = 1, .state = 1 },
    { "state_token", SH(2, 4, 2, 1, 1, 64, 64), .causal = 1, .state = 1 },
};

static void run_linear(const lcase *c, int eng, int th)
{
    rng r = seeded(c->name, "linear");
    const int64_t B = c->B, n = c->n, m = c->m;
    const int pos = c->fmap == ATTN_FEATURE_IDENTITY;
    int32_t kvl[4], ql[4];
    attn_linear_desc d;
    attn_linear_desc_init(&d);
    d.batch = B; d.q_heads = c->Hq; d.kv_heads = c->Hkv;
    d.q_len = n; d.kv_len = m; d.qk_dim = c->dk; d.v_dim = c->dv;
    d.q = lview(c->lay, c->Hq, n, c->dk);
    d.k = lview(c->lay, c->Hkv, m, c->dk);
    d.v = lview(c->lay, c->Hkv, m, c->dv);
    d.o = lview(c->lay, c->Hq, n, c->dv);
    d.feature_map = (attn_feature_map)c->fmap;
    d.causal = c->causal;
    d.align = (attn_align)c->align;
    if (c->eps != 0.0f)
        d.eps = c->eps;
    d.use_kv_lens = c->kvl;
    d.use_q_lens = c->ql;
    d.use_state = c->state;
    d.threads = th;
    d.engine = (attn_engine)eng;
    size_t nq, nk, nv, no;
    float *q = tens(&r, d.q, B, c->Hq, n, c->dk, pos, &nq);
    float *k = tens(&r, d.k, B, c->Hkv, m, c->dk, pos, &nk);
    float *v = tens(&r, d.v, B, c->Hkv, m, c->dv, 0, &nv);
    float *dout = tens(&r, d.o, B, c->Hq, n, c->dv, 0, &no);
    for (int64_t b = 0; b < B; b++) {
        kvl[b] = c->kvl ? len_of(b, m) : (int32_t)m;
        ql[b] = c->ql ? len_of(b, n) : (int32_t)n;
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = ql[b]; i < n; i++) {
                poison_row(q, d.q, b, h, i, c->dk);
                poison_row(dout, d.o, b, h, i, c->dv);
            }
        for (int64_t h = 0; h < c->Hkv; h++)
            for (int64_t j = kvl[b]; j < m; j++) {
                poison_row(k, d.k, b, h, j, c->dk);
                poison_row(v, d.v, b, h, j, c->dv);
            }
    }
    const size_t ns = B * c->Hkv * c->dk * c->dv, nz = (size_t)(B * c->Hkv * c->dk);
    float *ss = c->state ? frand(&r, ns, 0) : NULL, *sz = c->state ? frand(&r, nz, 1) : NULL;
    float *o = fsent(no);
    attn_linear_args a = { q, k, v, o, c->kvl ? kvl : NULL, c->ql ? ql : NULL, ss, sz, NULL, { 0 } };
    attn_status s;
    if (th == 1) {
        s = attn_linear(&d, &a);
    } else {
        attn_linear_plan *p = NULL;
        s = attn_linear_plan_create(&p, &d);
        if (s == ATTN_OK) {
            size_t wb = 0;
            attn_linear_workspace_size(p, &wb);
            void *ws = wsalloc(wb);
            s = attn_linear_execute(p, &a, ws, wb);
            free(ws);
        }
        attn_linear_plan_destroy(p);
    }
    char name[160];
    outs ou = mk(3, o, no * 4, ss, ns * 4, sz, nz * 4);
    snprintf(name, sizeof name, "linear.%s.%s.t%d", c->name, eng_name[eng], th);
    emit(name, s, &ou);

    if (c->bwd) {
        attn_linear_bwd_desc bd;
        attn_linear_bwd_desc_init(&bd);
        bd.fwd = d;
        bd.d_o = d.o;
        bd.dq = d.q;
        bd.dk = d.k;
        bd.dv = d.v;
        float *dq = fsent(nq), *dk = fsent(nk), *dv = fsent(nv);
        attn_linear_bwd_args ba = { q, k, v, dout, dq, dk, dv, a.kv_lens, a.q_lens, NULL,
                                    { 0 } };
        if (th == 1) {
            s = attn_linear_backward(&bd, &ba);
        } else {
            attn_linear_bwd_plan *p = NULL;
            s = attn_linear_bwd_plan_create(&p, &bd);
            if (s == ATTN_OK) {
                size_t wb = 0;
                attn_linear_bwd_workspace_size(p, &wb);
                void *ws = wsalloc(wb);
                s = attn_linear_bwd_execute(p, &ba, ws, wb);
                free(ws);
            }
            attn_linear_bwd_plan_destroy(p);
        }
        outs ob = mk(3, dq, nq * 4, dk, nk * 4, dv, nv * 4);
        snprintf(name, sizeof name, "linear_bwd.%s.%s.t%d", c->name, eng_name[eng], th);
        emit(name, s, &ob);
        free(dq); free(dk); free(dv);
    }
    free(q); free(k); free(v); free(dout); free(o); free(ss); free(sz);
}

/* ------------------------------------------------------------------- MHA */

typedef struct mcase {
    const char *name;
    int B, L, S, E, H, Hkv, kdim, vdim, self, packed, hasb, pad, causal, kvl, ql;
    int mask, mbc, kpm, abias, weights, drop, bs, gk;
    int xt, wt;                  /* x_type, w_type (the inputs rounded to them) */
} mcase;

static const mcase mha_cases[] = {
    { "self_packed", .B = 2, .L = 70, .S = 70, .E = 128, .H = 4, .self = 1, .packed = 1,
      .hasb = 1, .weights = ATTN_WEIGHTS_PER_HEAD },
    { "self_gqa_causal", .B = 2, .L = 100, .S = 100, .E = 160, .H = 4, .Hkv = 2, .self = 1,
      .hasb = 1, .causal = 1, .weights = ATTN_WEIGHTS_AVERAGED },
    { "cross_masks", .B = 3, .L = 50, .S = 130, .E = 96, .H = 4, .kdim = 80, .vdim = 56,
      .hasb = 1, .pad = 7, .kvl = 1, .ql = 1, .mask = ATTN_MASK_KEEP_NONZERO, .mbc = 1,
      .kpm = ATTN_MASK_DROP_NONZERO, .weights = ATTN_WEIGHTS_PER_HEAD },
    { "cross_bias_dropout_gqa", .B = 2, .L = 64, .S = 77, .E = 64, .H = 4, .Hkv = 1,
      .abias = 1, .drop = 1, .weights = ATTN_WEIGHTS_AVERAGED },
    { "self_sparse", .B = 2, .L = 96, .S = 96, .E = 64, .H = 4, .self = 1, .hasb = 1,
      .bs = 16, .gk = 1 },
    /* 16-bit layers: BF16 products (tile engine) or widened */
    { "bf16_self_packed", .B = 2, .L = 70, .S = 70, .E = 128, .H = 4, .self = 1, .packed = 1,
      .hasb = 1, .weights = ATTN_WEIGHTS_PER_HEAD, .xt = BF16, .wt = BF16 },
    { "bf16_cross_masks", .B = 3, .L = 50, .S = 130, .E = 96, .H = 4, .kdim = 80, .vdim = 56,
      .hasb = 1, .pad = 7, .kvl = 1, .ql = 1, .mask = ATTN_MASK_KEEP_NONZERO, .mbc = 1,
      .kpm = ATTN_MASK_DROP_NONZERO, .weights = ATTN_WEIGHTS_AVERAGED, .xt = BF16, .wt = BF16 },
    { "f16_self_gqa_causal", .B = 2, .L = 100, .S = 100, .E = 160, .H = 4, .Hkv = 2, .self = 1,
      .hasb = 1, .causal = 1, .xt = F16, .wt = F16 },
    { "mixed_x_f16_w_bf16_dropout", .B = 2, .L = 64, .S = 77, .E = 64, .H = 4, .Hkv = 1,
      .abias = 1, .drop = 1, .weights = ATTN_WEIGHTS_AVERAGED, .xt = F16, .wt = BF16 },
    { "bf16_sparse_widened", .B = 2, .L = 96, .S = 96, .E = 64, .H = 4, .self = 1, .hasb = 1,
      .bs = 16, .gk = 1, .xt = BF16, .wt = BF16 },
};

typedef struct minst {
    attn_mha_desc d;
    attn_mha_weights w;
    attn_mha_args a;
    float *wt[10], *x, *key, *value, *bias, *dy;
    uint8_t *mask, *kpm, *gk, *lay;
    int32_t kvl[4], ql[4];
    int64_t kvE, kdim, vdim, xs, ks, vs, os;
    size_t nw[10], nout, nwts;
    /* 16-bit types: the twins the call reads */
    uint16_t *wt16[10], *x16, *key16, *value16;
    attn_mha_weights16 w16;
    attn_mha_args16 a16;
} minst;

static void minst_build(const mcase *c, minst *t)
{
    memset(t, 0, sizeof *t);
    rng r = seeded(c->name, "mha");
    const int64_t B = c->B, L = c->L, S = c->S, E = c->E, H = c->H;
    const int64_t Hkv = c->Hkv ? c->Hkv : H;
    t->kvE = Hkv * (E / H);
    t->kdim = c->kdim ? c->kdim : E;
    t->vdim = c->vdim ? c->vdim : E;
    t->xs = E + c->pad;
    t->ks = t->kdim + c->pad;
    t->vs = t->vdim + c->pad;
    t->os = E + c->pad;
    const int64_t kvE = t->kvE;
    /* in_proj, in_bias, wq, wk, wv, bq, bk, bv, wo, bo */
    const int64_t sz[10] = { 3 * E * E, 3 * E, E * E, kvE * t->kdim, kvE * t->vdim, E, kvE, kvE,
                             E * E, E };
    for (int x = 0; x < 10; x++) {
        t->nw[x] = (size_t)sz[x];
        t->wt[x] = frand(&r, t->nw[x], 0);
        for (size_t y = 0; y < t->nw[x]; y++)
            t->wt[x][y] *= 0.25f;
    }
    size_t cnt, nx, nkey = 0, nvalue = 0;
    t->x = tens(&r, (attn_view){ L * t->xs, 0, t->xs }, B, 1, L, E, 0, &nx);
    if (!c->self) {
        t->key = tens(&r, (attn_view){ S * t->ks, 0, t->ks }, B, 1, S, t->kdim, 0, &nkey);
        t->value = tens(&r, (attn_view){ S * t->vs, 0, t->vs }, B, 1, S, t->vdim, 0, &nvalue);
    }
    t->dy = tens(&r, (attn_view){ L * t->os, 0, t->os }, B, 1, L, E, 0, &cnt);
    t->nout = (size_t)(B * L * t->os) + TAIL;
    if (c->weights)
        t->nwts = (size_t)(B * L * S * (c->weights == ATTN_WEIGHTS_PER_HEAD ? H : 1)) + TAIL;

    attn_mha_desc *d = &t->d;
    attn_mha_desc_init(d);
    d->embed_dim = E; d->num_heads = H; d->num_kv_heads = c->Hkv;
    d->kdim = c->kdim; d->vdim = c->vdim; d->batch = B; d->q_len = L; d->kv_len = S;
    d->self_attention = c->self;
    d->packed_in_proj = c->packed;
    d->has_bias = c->hasb;
    d->x_stride = t->xs;
    d->key_stride = t->ks;
    d->value_stride = t->vs;
    d->out_stride = t->os;
    if (c->causal) {
        d->window_right = 0;
        d->align = ATTN_ALIGN_BOTTOM_RIGHT;
    }
    d->use_kv_lens = c->kvl;
    d->use_q_lens = c->ql;
    d->weights = (attn_weights_mode)c->weights;
    for (int64_t b = 0; b < B; b++) {
        t->kvl[b] = len_of(b, S);
        t->ql[b] = len_of(b, L);
    }
    if (c->mask) {
        size_t nm;
        d->mask_mode = (attn_mask_mode)c->mask;
        d->mask = bview(c->mbc, B, H, L, S, &nm);
        t->mask = xmalloc(nm);
        for (size_t x = 0; x < nm; x++)
            t->mask[x] = chance(&r, 0.85) ? (uint8_t)(1 + next(&r) % 255) : 0;
    }
    if (c->abias) {
        size_t nb;
        d->use_bias = 1;
        d->bias = bview(c->mbc, B, H, L, S, &nb);
        t->bias = xmalloc(nb * sizeof(float));
        for (size_t x = 0; x < nb; x++)
            t->bias[x] = chance(&r, 0.1) ? -INFINITY : unif(&r);
    }
    if (c->kpm) {
        d->key_padding_mode = (attn_mask_mode)c->kpm;
        t->kpm = xmalloc(B * S);
        for (int64_t b = 0; b < B; b++)   /* odd batches: the last third padded */
            for (int64_t j = 0; j < S; j++)
                t->kpm[b * S + j] = (b % 2 == 1 && 3 * j >= 2 * S) || chance(&r, 0.1)
                                        ? (uint8_t)(1 + next(&r) % 255) : 0;
    }
    if (c->drop) {
        d->dropout_p = 0.1;
        d->dropout_seed = 99;
        d->dropout_offset = 1ull << 40;
    }
    if (c->gk) {
        d->use_global_k = 1;
        t->gk = xmalloc(B * S);
        for (int64_t x = 0; x < B * S; x++)
            t->gk[x] = (uint8_t)chance(&r, 0.1);
    }
    if (c->bs) {
        d->block_size = c->bs;
        d->layout_per_head = 1;
        const size_t nl = (size_t)(H * ((L + c->bs - 1) / c->bs) * ((S + c->bs - 1) / c->bs));
        t->lay = xmalloc(nl);
        for (size_t x = 0; x < nl; x++)
            t->lay[x] = (uint8_t)chance(&r, 0.6);
    }
    attn_mha_weights *w = &t->w;
    memset(w, 0, sizeof *w);
    if (c->packed) {
        w->in_proj_weight = t->wt[0];
        w->in_proj_bias = c->hasb ? t->wt[1] : NULL;
    } else {
        w->q_weight = t->wt[2];
        w->k_weight = t->wt[3];
        w->v_weight = t->wt[4];
        if (c->hasb) {
            w->q_bias = t->wt[5];
            w->k_bias = t->wt[6];
            w->v_bias = t->wt[7];
        }
    }
    w->out_weight = t->wt[8];
    w->out_bias = c->hasb ? t->wt[9] : NULL;
    attn_mha_args *a = &t->a;
    memset(a, 0, sizeof *a);
    a->x = t->x;
    a->key = t->key;
    a->value = t->value;
    a->kv_lens = c->kvl ? t->kvl : NULL;
    a->q_lens = c->ql ? t->ql : NULL;
    a->mask = t->mask;
    a->bias = t->bias;
    a->key_padding_mask = t->kpm;
    a->global_k = t->gk;
    a->layout = t->lay;
    if (c->wt) {   /* the weights given at w_type (the same layout) */
        d->w_type = (attn_dtype)c->wt;
        for (int x = 0; x < 10; x++)
            t->wt16[x] = to16((attn_dtype)c->wt, t->wt[x], t->nw[x]);
        attn_mha_weights16 *h = &t->w16;   /* the pointers in use, as above */
        h->in_proj_weight = w->in_proj_weight ? t->wt16[0] : NULL;
        h->in_proj_bias = w->in_proj_bias ? t->wt16[1] : NULL;
        h->q_weight = w->q_weight ? t->wt16[2] : NULL;
        h->k_weight = w->k_weight ? t->wt16[3] : NULL;
        h->v_weight = w->v_weight ? t->wt16[4] : NULL;
        h->q_bias = w->q_bias ? t->wt16[5] : NULL;
        h->k_bias = w->k_bias ? t->wt16[6] : NULL;
        h->v_bias = w->v_bias ? t->wt16[7] : NULL;
        h->out_weight = t->wt16[8];
        h->out_bias = w->out_bias ? t->wt16[9] : NULL;
        memset(w, 0, sizeof *w);
        w->weights16 = &t->w16;
    }
    if (c->xt) {   /* X, key, value at x_type; out given by run_mha */
        d->x_type = (attn_dtype)c->xt;
        t->x16 = to16((attn_dtype)c->xt, t->x, nx);
        if (!c->self) {
            t->key16 = to16((attn_dtype)c->xt, t->key, nkey);
            t->value16 = to16((attn_dtype)c->xt, t->value, nvalue);
        }
        t->a16.x = t->x16;
        t->a16.key = t->key16;
        t->a16.value = t->value16;
        a->x = a->key = a->value = NULL;
        a->args16 = &t->a16;
    }
}

static void minst_free(minst *t)
{
    for (int x = 0; x < 10; x++) {
        free(t->wt[x]);
        free(t->wt16[x]);
    }
    free(t->x16); free(t->key16); free(t->value16);
    free(t->x); free(t->key); free(t->value); free(t->bias); free(t->dy);
    free(t->mask); free(t->kpm); free(t->gk); free(t->lay);
}

static void run_mha(const mcase *c, const minst *t, int eng, int th)
{
    char name[160];
    attn_mha_desc d = t->d;
    d.engine = (attn_engine)eng;
    d.threads = th;
    attn_mha_args a = t->a;
    float *out = fsent(t->nout), *wts = c->weights ? fsent(t->nwts) : NULL;
    a.out = out;
    a.weights = wts;
    /* 16-bit Y: its own buffer, the sentinel's upper half in the gaps */
    attn_mha_args16 a16 = t->a16;
    uint16_t *out16 = NULL;
    if (c->xt) {
        out16 = xmalloc(t->nout * sizeof *out16);
        for (size_t x = 0; x < t->nout; x++)
            out16[x] = (uint16_t)(SENT >> 16);
        a16.out = out16;
        a.args16 = &a16;
        a.out = NULL;
    }
    attn_mha_plan *p = NULL;
    attn_status s = attn_mha_plan_create(&p, &d);
    size_t wb = 0, cb = 0, bb = 0;
    void *ws = NULL;
    if (s == ATTN_OK && th == 2) {
        attn_mha_workspace_size(p, &wb);
        ws = wsalloc(wb);
    }
    if (s == ATTN_OK)
        s = attn_mha_execute(p, &t->w, &a, ws, wb);
    outs ou = out16 ? mk(2, out16, t->nout * 2, wts, t->nwts * 4)
                    : mk(2, out, t->nout * 4, wts, t->nwts * 4);
    snprintf(name, sizeof name, "mha.%s.%s.t%d", c->name, eng_name[eng], th);
    emit(name, s, &ou);
    free(out16);

    /* training: forward with context, backward overwriting and accumulating */
    if (s == ATTN_OK)
        s = attn_mha_context_size(p, &cb);
    unsigned char *ctx = wsalloc(cb);
    memset(ctx, 0x5A, cb);
    free(out);
    free(wts);
    out = fsent(t->nout);
    wts = c->weights ? fsent(t->nwts) : NULL;
    a.out = c->xt ? NULL : out;
    a.weights = wts;
    if (s == ATTN_OK)   /* (16-bit: context_size said UNSUPPORTED_TYPE) */
        s = attn_mha_train_execute(p, &t->w, &a, ctx, cb, ws, wb);
    ou = mk(3, out, t->nout * 4, wts, t->nwts * 4, ctx, cb);
    snprintf(name, sizeof name, "mha_train.%s.%s.t%d", c->name, eng_name[eng], th);
    emit(name, s, &ou);

    const int64_t B = c->B, L = c->L, S = c->S, E = c->E;
    const size_t gn[13] = { B * L * t->xs, B * S * t->ks, B * S * t->vs,
                            t->nw[0], t->nw[1], t->nw[2], t->nw[3], t->nw[4], t->nw[5],
                            t->nw[6], t->nw[7], E * E, (size_t)E };
    const int use[13] = { 1, !c->self, !c->self, c->packed, c->packed && c->hasb, !c->packed,
                          !c->packed, !c->packed, !c->packed && c->hasb, !c->packed && c->hasb,
                          !c->packed && c->hasb, 1, c->hasb };
    void *bws = NULL;
    if (s == ATTN_OK && th == 2) {
        attn_mha_bwd_workspace_size(p, &bb);
        bws = wsalloc(bb);
    }
    for (int acc = 0; acc < 2; acc++) {
        rng r = seeded(c->name, "grads");
        float *g[13] = { 0 };
        for (int x = 0; x < 13; x++)
            if (use[x])
                g[x] = acc ? frand(&r, gn[x], 0) : fsent(gn[x]);
        attn_mha_grads gr = { g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10],
                              g[11], g[12], NULL, { 0 } };
        attn_status sb = s == ATTN_OK ? attn_mha_bwd_execute(p, &t->w, &a, t->dy, ctx, cb, &gr, acc,
                                                          bws, bb)
                                      : s;
        ou.k = 0;
        for (int x = 0; x < 13; x++)
            out_add(&ou, g[x], gn[x] * 4);
        snprintf(name, sizeof name, "mha_bwd.%s.%s.t%d.acc%d", c->name, eng_name[eng], th, acc);
        emit(name, sb, &ou);
        for (int x = 0; x < 13; x++)
            free(g[x]);
    }
    free(bws); free(ctx); free(ws); free(out); free(wts);
    attn_mha_plan_destroy(p);
}

/* ------------------------------------------------------------------ misc */

static void run_merge(const char *nm, int64_t parts, int64_t rows, int64_t dim, int with_lse)
{
    rng r = seeded(nm, "merge");
    const int64_t ors = dim + 3, ops = rows * ors;
    float *op = frand(&r, parts * ops, 0);
    float *lp = xmalloc((size_t)(parts * rows) * sizeof *lp);   /* [rows][parts] */
    for (int64_t x = 0; x < rows; x++)
        for (int64_t p = 0; p < parts; p++) {
            const int dead = (x == 3 && parts > 1) || x == 5 || chance(&r, 0.15);
            lp[x * parts + p] = dead ? -INFINITY : 4.0f * unif(&r);
            if (dead)
                for (int64_t y = 0; y < dim; y++)
                    op[p * ops + x * ors + y] = poison;
        }
    const int64_t oos = dim + 5;
    const size_t no = (size_t)(rows * oos) + TAIL, nl = (size_t)(2 * rows) + TAIL;
    float *o = fsent(no), *l = with_lse ? fsent(nl) : NULL;
    attn_partials_merge_args a = { parts, rows, dim, op, ops, ors, lp, 1, parts, o, oos, l, 2, { 0 } };
    const attn_status s = attn_partials_merge(&a);
    const outs ou = mk(2, o, no * 4, l, nl * 4);
    emit(nm, s, &ou);
    free(op); free(lp); free(o); free(l);
}

static void run_kv_append(const char *nm, int ty, int paged, int bshd, int all)
{
    rng r = seeded(nm, "kvappend");
    const int64_t B = 2, Hkv = 2, cap = 100, dk = 64, dv = 40, t = 40, maxb = 7, nblk = 17;
    const size_t es = ty ? 2 : 4;
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = B; d.kv_heads = Hkv; d.kv_len = cap; d.qk_dim = dk; d.v_dim = dv;
    d.k_type = d.v_type = (attn_dtype)ty;
    int32_t table[14], kvl[2] = { 5, 30 }, nl[2] = { 40, 33 };
    size_t nk, nv;
    if (paged) {
        d.kv_block_size = 16; d.kv_num_blocks = nblk; d.kv_max_blocks = maxb;
        d.k = attn_view_bhsd(Hkv, 16, dk);
        d.v = attn_view_bhsd(Hkv, 16, dv);
        nk = (size_t)(nblk * Hkv * 16 * dk) + TAIL;
        nv = (size_t)(nblk * Hkv * 16 * dv) + TAIL;
        for (int x = 0; x < 14; x++)
            table[x] = (int32_t)((x * 5 + 3) % nblk);
        table[6] = table[13] = 9999;   /* past what any sequence reaches: never read */
    } else {
        d.k = bshd ? attn_view_bshd(Hkv, cap, dk) : attn_view_bhsd(Hkv, cap, dk);
        d.v = bshd ? attn_view_bshd(Hkv, cap, dv) : attn_view_bhsd(Hkv, cap, dv);
        nk = vcount(d.k, B, Hkv, cap, dk);
        nv = vcount(d.v, B, Hkv, cap, dv);
    }
    unsigned char *kc = xmalloc(nk * es), *vc = xmalloc(nv * es);
    memset(kc, 0xA5, nk * es);
    memset(vc, 0xA5, nv * es);
    size_t cnt;
    const attn_view knv = lview(2, Hkv, t, dk), vnv = lview(1, Hkv, t, dv);
    float *kn = tens(&r, knv, B, Hkv, t, dk, 0, &cnt), *vn = tens(&r, vnv, B, Hkv, t, dv, 0, &cnt);
    for (int64_t h = 0; h < Hkv && !all; h++)   /* rows past new_lens are never read */
        for (int64_t i = nl[1]; i < t; i++) {
            poison_row(kn, knv, 1, h, i, dk);
            poison_row(vn, vnv, 1, h, i, dv);
        }
    if (all)
        nl[1] = 40;
    attn_kv_append_args a = { kc,    vc, paged ? table : NULL, kvl, all ? NULL : nl,
                              t,     kn, vn,                   knv, vnv, { 0 } };
    const attn_status s = attn_kv_append(&d, &a);
    outs ou = mk(3, kc, nk * es, vc, nv * es, kvl, sizeof kvl);
    emit(nm, s, &ou);
    free(kc); free(vc); free(kn); free(vn);
}

static void run_convert(void)
{
    static const uint32_t specials[] = {
        0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x00800000, 0x33000000,
        0x33000001, 0x337fffff, 0x33800000, 0x387fc000, 0x387fe000, 0x38800000, 0x38ffe000,
        0x38fff000, 0x477fe000, 0x477ff000, 0x477fefff, 0x47800000, 0x7f7fffff, 0xff7fffff,
        0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa00000,
        0x7fffffff, 0x7f812345, 0xffc01234, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f7f8000,
        0x3f800000, 0xbf800000, 0x40490fdb, 0x3c000000, 0x3bffffff, 0x3e800001,
    };
    const size_t ns = sizeof specials / sizeof specials[0], n = ns + 8192 + 4096;
    uint32_t *src = xmalloc(n * 4);
    rng r = seeded("convert", "bits");
    memcpy(src, specials, sizeof specials);
    for (size_t i = ns; i < ns + 8192; i++)
        src[i] = (uint32_t)next(&r);
    for (size_t i = ns + 8192; i < n; i++)   /* around the F16 and BF16 ties and denormals */
        src[i] = (0x33000000u + (uint32_t)(i - ns - 8192) * 0x6001u) ^ (uint32_t)(i & 1) << 31;
    uint16_t *d16 = xmalloc((n + TAIL) * 2);
    float *f = xmalloc((65536 + TAIL) * 4);
    uint16_t *all = xmalloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    for (int ty = 1; ty <= 2; ty++) {
        const char *tn = ty == 1 ? "f16" : "bf16";
        char name[64];
        memset(d16, 0xA5, (n + TAIL) * 2);
        attn_status s = attn_dtype_encode((attn_dtype)ty, (const float *)(const void *)src, d16,
                                              (int64_t)n);
        snprintf(name, sizeof name, "convert.from_f32.%s", tn);
        emit1(name, s, d16, (n + TAIL) * 2);
        memset(f, 0xA5, (65536 + TAIL) * 4);
        s = attn_dtype_decode((attn_dtype)ty, all, f, 65536);
        snprintf(name, sizeof name, "convert.to_f32.%s", tn);
        emit1(name, s, f, (65536 + TAIL) * 4);
        memset(d16, 0xA5, (n + TAIL) * 2);   /* an odd length and offset */
        s = attn_dtype_encode((attn_dtype)ty, (const float *)(const void *)(src + 3),
                                  d16 + 1, 37);
        snprintf(name, sizeof name, "convert.from_f32.%s.odd", tn);
        emit1(name, s, d16, 64 * 2);
    }
    free(src); free(d16); free(f); free(all);
}

static void run_misc(void)
{
    run_merge("merge.3parts", 3, 37, 72, 1);
    run_merge("merge.1part_nolse", 1, 20, 64, 0);
    run_merge("merge.5parts_dim1", 5, 9, 1, 1);
    run_kv_append("kv_append.f32.bhsd", 0, 0, 0, 0);
    run_kv_append("kv_append.f16.bshd", 1, 0, 1, 0);
    run_kv_append("kv_append.bf16.bhsd", 2, 0, 0, 1);
    run_kv_append("kv_append.paged.f16", 1, 1, 0, 0);
    run_kv_append("kv_append.paged.bf16.all", 2, 1, 0, 1);
    run_kv_append("kv_append.paged.f32", 0, 1, 0, 0);
    run_convert();

    static const struct { double p; uint64_t seed, off; int64_t b, h, i0, rows, m, ld; } km[] = {
        { 0.1, 0x1234567887654321ull, 977, 1, 3, 5, 37, 301, 320 },
        { 0.5, 7, 0, 0, 0, 0, 64, 64, 64 },
        { 0.0, 7, 1, 2, 1, 100, 3, 17, 20 },
        { 1.0, 7, 1, 2, 1, 100, 3, 17, 20 },
        { 0.3, ~0ull, ~0ull, 70000, 65535, 4000000000ll, 5, 1000, 1001 },
    };
    for (size_t x = 0; x < sizeof km / sizeof km[0]; x++) {
        const size_t nb = (size_t)(km[x].rows * km[x].ld) + TAIL;
        uint8_t *keep = xmalloc(nb);
        memset(keep, 0xA5, nb);
        const attn_status s = attn_dropout_mask_fill(km[x].p, km[x].seed, km[x].off, km[x].b,
                                                     km[x].h, km[x].i0, km[x].rows, km[x].m,
                                                     keep, km[x].ld);
        char name[64];
        snprintf(name, sizeof name, "dropout_keep_mask.%zu", x);
        emit1(name, s, keep, nb);
        free(keep);
    }

    uint8_t lay[64 * 64 + TAIL];
#define LAYOUT(nm, nb, mb, call)                          \
    do {                                                  \
        memset(lay, 0xA5, sizeof lay);                    \
        emit1(nm, call, lay, (size_t)((nb) * (mb)) + TAIL); \
    } while (0)
    LAYOUT("layout.bigbird.13x19", 13, 19, attn_layout_build_bigbird(lay, 13, 19, 3, 2, 3, 42));
    LAYOUT("layout.bigbird.20x20", 20, 20, attn_layout_build_bigbird(lay, 20, 20, 5, 1, 2, ~0ull));
    LAYOUT("layout.bigbird.noband", 9, 40, attn_layout_build_bigbird(lay, 9, 40, 0, 0, 4, 5));
    LAYOUT("layout.strided.17x23", 17, 23, attn_layout_build_strided(lay, 17, 23, 3, 0));
    LAYOUT("layout.strided.causal", 17, 17, attn_layout_build_strided(lay, 17, 17, 4, 1));
    LAYOUT("layout.fixed.17x23", 17, 23, attn_layout_build_fixed(lay, 17, 23, 4, 2, 0));
    LAYOUT("layout.fixed.causal", 19, 19, attn_layout_build_fixed(lay, 19, 19, 5, 1, 1));
}

/* Error statuses: the outputs must stay the sentinel. */
static void run_errors(void)
{
    const scase *c = &sdpa_cases[0];
    sinst t;
    sinst_build(c, &t);
    float *o = fsent(t.no), *p = fsent(t.np), *l = fsent(t.nl);
    attn_sdpa_args a = sargs(c, &t, o, p, l);
    attn_sdpa_desc d = t.d;
    outs ou = mk(3, o, t.no * 4, p, t.np * 4, l, t.nl * 4);
    d.q.seq = c->dk - 1;
    emit("error.sdpa.bad_stride", attn_sdpa(&d, &a), &ou);
    d = t.d;
    a.q = NULL;
    emit("error.sdpa.null_q", attn_sdpa(&d, &a), &ou);
    a.q = t.q;
    a.kv_lens = t.kvl;   /* the plan uses no lengths */
    emit("error.sdpa.mismatch", attn_sdpa(&d, &a), &ou);
    a.kv_lens = NULL;
    d.window_right = 0;
    d.scale = INFINITY;
    emit("error.sdpa.bad_scale", attn_sdpa(&d, &a), &ou);
    free(o); free(p); free(l);
    sinst_free(&t);

    const scase *cl = &sdpa_cases[9];   /* causal_br_lens */
    sinst_build(cl, &t);
    o = fsent(t.no); p = fsent(t.np); l = fsent(t.nl);
    a = sargs(cl, &t, o, p, l);
    ou = mk(3, o, t.no * 4, p, t.np * 4, l, t.nl * 4);
    t.kvl[1] = cl->m + 1;
    emit("error.sdpa.bad_length", attn_sdpa(&t.d, &a), &ou);
    float *dq = fsent(t.nq), *dk = fsent(t.nk), *dv = fsent(t.nv);
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = t.d;
    bd.fwd.want_probs = 0;
    bd.fwd.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    bd.d_o = t.d.o; bd.dq = t.d.q; bd.dk = t.d.k; bd.dv = t.d.v;
    attn_sdpa_bwd_args ba = { t.q, t.k, t.v, o, t.dout, l, t.kvl, t.ql, NULL, NULL, dq, dk, dv,
                              NULL, NULL, NULL, NULL, NULL, { 0 } };
    ou = mk(3, dq, t.nq * 4, dk, t.nk * 4, dv, t.nv * 4);
    emit("error.sdpa_bwd.bad_length", attn_sdpa_backward(&bd, &ba), &ou);
    t.kvl[1] = len_of(1, cl->m);
    ba.d_o = NULL;
    emit("error.sdpa_bwd.null_dout", attn_sdpa_backward(&bd, &ba), &ou);
    free(o); free(p); free(l); free(dq); free(dk); free(dv);
    sinst_free(&t);

    const scase *cp = NULL;
    for (size_t x = 0; x < sizeof sdpa_cases / sizeof sdpa_cases[0]; x++)
        if (!strcmp(sdpa_cases[x].name, "dec_paged_f16"))
            cp = &sdpa_cases[x];
    sinst_build(cp, &t);
    o = fsent(t.no);
    l = fsent(t.nl);
    a = sargs(cp, &t, o, NULL, l);
    t.table[2] = (int32_t)t.d.kv_num_blocks;
    ou = mk(2, o, t.no * 4, l, t.nl * 4);
    emit("error.sdpa.bad_block_table", attn_sdpa(&t.d, &a), &ou);
    free(o); free(l);
    sinst_free(&t);

    float op[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, lp[2] = { 0, 1 }, mo[8 + TAIL];
    memset(mo, 0xA5, sizeof mo);
    attn_partials_merge_args ma = { 2, 2, 2, op, 4, 2, lp, 1, 0, mo, 1, NULL, 0, { 0 } };
    emit1("error.merge.bad_stride", attn_partials_merge(&ma), mo, sizeof mo);
    ma.o_out_stride = 2;
    ma.o_parts = NULL;
    emit1("error.merge.null", attn_partials_merge(&ma), mo, sizeof mo);

    uint16_t h16[4 + TAIL];
    memset(h16, 0xA5, sizeof h16);
    emit1("error.convert.f32", attn_dtype_encode(ATTN_DTYPE_F32, op, h16, 4), h16, sizeof h16);
    uint8_t keep[64];
    memset(keep, 0xA5, sizeof keep);
    emit1("error.keep_mask.bad_ld", attn_dropout_mask_fill(0.1, 1, 2, 0, 0, 0, 2, 16, keep, 15),
          keep, sizeof keep);
    emit1("error.keep_mask.bad_p", attn_dropout_mask_fill(1.5, 1, 2, 0, 0, 0, 2, 16, keep, 16),
          keep, sizeof keep);
    emit1("error.layout.bigbird_even", attn_layout_build_bigbird(keep, 4, 4, 2, 0, 0, 0), keep,
          sizeof keep);
    emit1("error.layout.fixed_c", attn_layout_build_fixed(keep, 4, 4, 2, 3, 0), keep, sizeof keep);

    minst mi;
    minst_build(&mha_cases[2], &mi);
    float *out = fsent(mi.nout), *wts = fsent(mi.nwts);
    attn_mha_args ma2 = mi.a;
    ma2.out = out;
    ma2.weights = wts;
    ma2.x = NULL;
    attn_mha_plan *mp = NULL;
    attn_status s = attn_mha_plan_create(&mp, &mi.d);
    if (s == ATTN_OK)
        s = attn_mha_execute(mp, &mi.w, &ma2, NULL, 0);
    ou = mk(2, out, mi.nout * 4, wts, mi.nwts * 4);
    emit("error.mha.null_x", s, &ou);
    ma2.x = mi.x;
    mi.kvl[0] = -1;
    if (mp)
        s = attn_mha_execute(mp, &mi.w, &ma2, NULL, 0);
    emit("error.mha.bad_length", s, &ou);
    attn_mha_plan_destroy(mp);
    free(out); free(wts);
    minst_free(&mi);

    /* kv_append: new_lens[0] past t, and past the capacity; nothing written */
    attn_sdpa_desc kd;
    attn_sdpa_desc_init(&kd);
    kd.batch = 1; kd.kv_heads = 1; kd.kv_len = 8; kd.qk_dim = kd.v_dim = 4;
    kd.k = kd.v = attn_view_bhsd(1, 8, 4);
    float kc[32 + TAIL], vc[32 + TAIL];
    int32_t kl = 6, nl2 = 3;
    memset(kc, 0xA5, sizeof kc);
    memset(vc, 0xA5, sizeof vc);
    attn_kv_append_args ka = { kc, vc, NULL, &kl, &nl2, 2, op, op, attn_view_bhsd(1, 2, 4),
                               attn_view_bhsd(1, 2, 4), { 0 } };
    ou = mk(3, kc, sizeof kc, vc, sizeof vc, &kl, sizeof kl);
    emit("error.kv_append.new_len", attn_kv_append(&kd, &ka), &ou);
    nl2 = 2;
    kl = 7;
    emit("error.kv_append.capacity", attn_kv_append(&kd, &ka), &ou);

    /* linear: state used but NULL */
    attn_linear_desc ld;
    attn_linear_desc_init(&ld);
    ld.batch = 1; ld.q_heads = ld.kv_heads = 1; ld.q_len = ld.kv_len = 2;
    ld.qk_dim = ld.v_dim = 4;
    ld.q = ld.k = ld.v = ld.o = attn_view_bhsd(1, 2, 4);
    ld.use_state = 1;
    float lo[8 + TAIL];
    memset(lo, 0xA5, sizeof lo);
    attn_linear_args la = { op, op, op, lo, NULL, NULL, NULL, NULL, NULL, { 0 } };
    emit1("error.linear.null_state", attn_linear(&ld, &la), lo, sizeof lo);
}

int main(void)
{
    const char *env = getenv("ATTN_CHECKSUM_POISON");
    poison = env ? strtof(env, NULL) : NAN;
    for (size_t x = 0; x < sizeof sdpa_cases / sizeof sdpa_cases[0]; x++) {
        sinst t;
        sinst_build(&sdpa_cases[x], &t);
        for (int e = 0; e < 3; e++)
            for (int th = 1; th <= 2; th++)
                run_sdpa(&sdpa_cases[x], &t, e, th);
        sinst_free(&t);
    }
    for (size_t x = 0; x < sizeof lin_cases / sizeof lin_cases[0]; x++)
        for (int e = 0; e < 3; e++)
            for (int th = 1; th <= 2; th++)
                run_linear(&lin_cases[x], e, th);
    for (size_t x = 0; x < sizeof mha_cases / sizeof mha_cases[0]; x++) {
        minst t;
        minst_build(&mha_cases[x], &t);
        for (int e = 0; e < 3; e++)
            for (int th = 1; th <= 2; th++)
                run_mha(&mha_cases[x], &t, e, th);
        minst_free(&t);
    }
    run_misc();
    run_errors();
    return 0;
}
