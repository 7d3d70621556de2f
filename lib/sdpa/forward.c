/* SDPA forward.
 *
 * A work item is (batch, key/value head, block of query rows, key chunk).
 * It runs the query heads of its GQA group over the keys its rows can see,
 * in tiles of ATTN_TILE_K, so each K/V tile serves the whole group while it
 * is in cache.  Per tile and per head (or per stack of heads, when the
 * group's rows form one matrix) it does an online softmax:
 *
 *   S  = scale * Q_rows K_tile^T                 (sgemm, K read in place)
 *   S += bias, hidden -> -INFINITY, m' = max     (one vector pass)
 *   c  = exp(m - m');  S = exp(S - m');  l = c l + rowsum S
 *   O  = c O + S V_tile                          (sgemm into O itself)
 *
 * and at the end O /= l, lse = m + log l.  Tiles no row can see are never
 * computed; on tiles the rows see unevenly (the causal diagonal, window
 * edges) the rows go in sub-blocks of ATTN_SUB_Q (ATTN_TILE_SUB_Q on the tile
 * engine), each over its own columns.
 * Short queries over long keys (decode) with too few items split the keys
 * into chunks whose partial results are merged by logsumexp afterwards.
 *
 * When probabilities are requested the masked scores are also copied to P as
 * they are made and turned into exp(s - lse) once lse is known, so O never
 * depends on that option.  The partition depends on the shape only and each
 * row sees the same sequence of operations, so results are bitwise identical
 * for any number of threads. */
#include "sdpa/sdpa.h"
#include "kernels/softmax_rows.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if ATTN_HAVE_OPENMP
#include <omp.h>
#endif

typedef struct work {
    float *s;        /* srows x lds score tile */
    int64_t *lo;     /* visible key range [lo, hi) per query row */
    int64_t *hi;
    float *mrow;     /* running max per virtual row (head, query) */
    float *lrow;     /* running sum */
    float *corr;     /* rescale of O for the current tile */
    float *kbuf;     /* kv_copy: the tile's K and V as floats */
    float *vbuf;
    float *kt;       /* tile engine: the tile's K transposed, dk x ldt */
    float *qbuf;     /* qw: the item's Q rows widened, [g][rows][dk] */
    float *obuf;     /* ow: the item's O rows in fp32, [g][rows][dv] */
    attn_ahead *ah;  /* tile engine: the next tile's rows, asked for ahead */
    int64_t next;    /* the guess of this thread's next item */
} work;

/* Where a work item accumulates its O rows: the user's O, or its chunk's
 * slot of the split-K partial results. */
typedef struct dest {
    float *o;        /* row (h0 + hh, i0 + r) of the item at o + hh * head + r * seq */
    int64_t head, seq;
    float *m, *l;    /* split-K only: max and sum of row (h, i) at h * n + i */
} dest;

/* Split-K partial results, shared by all threads: for chunk c and row
 * (b, h, i), at index ((c * B + b) * Hq + h) * n + i: O (dv floats, not yet
 * divided by l), then m and l in two arrays after all the O rows. */
typedef struct partials {
    float *o, *m, *l;
} partials;

/* Where the K (or V) rows of one (batch, kv head) are: row j at base +
 * j * step bytes, or with a paged cache at base + table[j / bs] * bstep +
 * (j % bs) * step bytes; elements of st (attn_dtype), ld the row stride in
 * elements (what an in-place F32 operand's leading dimension is).  Every
 * offset of a block type is a whole number of blocks (attn_kv_validate). */
typedef struct kvsrc {
    const char *base;
    int st;
    int64_t ld, step;
    const int32_t *table;
    int64_t bs, bstep;
    int64_t far;    /* the decode kernels' second prefetch distance (decode.h) */
} kvsrc;

static inline const void *kv_row(const kvsrc *s, int64_t j)
{
    if (s->table)
        return s->base + (int64_t)s->table[j / s->bs] * s->bstep + (j % s->bs) * s->step;
    return s->base + j * s->step;
}

/* The addresses of rows [j0, j0 + nk), for the decode kernels. */
static void kv_rows(const kvsrc *s, int64_t j0, int64_t nk, const void **rows)
{
    const int64_t step = s->step;
    if (!s->table) {
        const char *r = s->base + j0 * step;
        for (int64_t c = 0; c < nk; c++, r += step)
            rows[c] = r;
        return;
    }
    for (int64_t c = 0; c < nk;) {
        const int64_t j = j0 + c, in = j % s->bs;
        const int64_t run = s->bs - in < nk - c ? s->bs - in : nk - c;
        const char *r = s->base + (int64_t)s->table[j / s->bs] * s->bstep + in * step;
        for (int64_t e = c + run; c < e; c++, r += step)
            rows[c] = r;
    }
}

/* The K (is_v 0) or V pointer of the call, of its storage type. */
static const char *kv_pointer(const attn_sdpa_args *a, attn_dtype st, int is_v)
{
    if (st == ATTN_DTYPE_F32)
        return (const char *)(is_v ? a->v : a->k);
    if (attn_dtype_is_block(st))
        return (const char *)(is_v ? a->vq : a->kq);
    return (const char *)(is_v ? a->v16 : a->k16);
}

static void kv_source(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b, int64_t hk,
                      int is_v, kvsrc *s)
{
    const attn_sdpa_desc *d = &p->d;
    const attn_view *vw = is_v ? &d->v : &d->k;
    s->st = (int)(is_v ? d->v_type : d->k_type);
    const char *ptr = kv_pointer(a, (attn_dtype)s->st, is_v);
    s->ld = vw->seq;
    s->step = attn_st_bytes(s->st, vw->seq);
    if (d->kv_block_size) {
        s->base = ptr + attn_st_bytes(s->st, hk * vw->head);
        s->table = a->block_table + b * d->kv_max_blocks;
        s->bs = d->kv_block_size;
        s->bstep = attn_st_bytes(s->st, vw->batch);
        s->far = !is_v && d->qk_int8
                     ? attn_dec_far_rows_int8(attn_st_bytes(s->st, d->qk_dim))
                     : attn_dec_far_rows(p->bk);
    } else {
        s->base = ptr + attn_st_bytes(s->st, b * vw->batch + hk * vw->head);
        s->table = NULL;
        s->bs = s->bstep = 0;
        s->far = 0;
    }
}

/* Prefetch (into L1) the first rows of [j0, j1), at most the decode
 * kernels' distance, of a row stream of `width` values each. */
static void decode_prefetch(const kvsrc *s, int64_t j0, int64_t j1, int64_t width)
{
    const int64_t bytes = attn_st_bytes(s->st, width);
    if (j1 > j0 + ATTN_DEC_PF_KEYS)
        j1 = j0 + ATTN_DEC_PF_KEYS;
    for (int64_t j = j0; j < j1; j++) {
        const char *row = kv_row(s, j);
        for (int64_t x = 0; x < bytes; x += 64)
            __builtin_prefetch(row + x, 0, 3);
    }
}

/* The K and V of a work item's current tile [t, t + nt): read in place
 * (kb, vb NULL) or widened into the thread's buffers (kv_copy). */
typedef struct kvtile {
    kvsrc k, v;
    const float *kb, *vb;   /* rows [t, t + nt) as floats, ld dk / dv */
    const float *kt;        /* tile engine: K^T of the tile, ld ldt */
} kvtile;

/* Fill the buffers of a kv_copy tile. */
static void kv_fill(const attn_sdpa_plan *p, const kvsrc *s, float *buf, int64_t width,
                    int64_t t, int64_t nt)
{
    for (int64_t j = t; j < t + nt; j++) {
        const void *row = kv_row(s, j);
        attn_load_values(p->x.cvt, s->st, row, buf + (j - t) * width, width);
    }
}

/* The products of a tile, one pair per engine, chosen at plan time
 * (attn_sdpa_products_for): the forward's row loop never asks which engine
 * runs them.
 *
 * qk: s[r][c] = scale q_r . K_(j0 + c) for rows r < R and c < nk (tile row
 * j0 - t of the tile at t).
 * pv: o[r] = (acc ? o[r] : 0) + sum_c s[r][c] V_(j0 + c); with rs (the tile
 * engine only) the sum is multiplied by rs[r] as it is written (the fold of
 * 1 / l into the last write of O). */
struct attn_sdpa_products {
    void (*qk)(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
               int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
               attn_ahead *ah);
    void (*pv)(const attn_sdpa_plan *p, const kvtile *kt, const float *s, int64_t lds,
               int64_t R, int64_t t, int64_t j0, int64_t nk, float *o, int64_t ldo, int acc,
               const float *rs, attn_ahead *ah);
};

/* BLAS: sgemm on K and V in place, or on the tile's widened buffers. */
static void qk_blas(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
                    attn_ahead *ah)
{
    const int64_t dk = p->d.qk_dim;
    const float *k = kt->kb ? kt->kb + (j0 - t) * dk : (const float *)kv_row(&kt->k, j0);
    const int64_t ldk = kt->kb ? dk : kt->k.ld;
    (void)ah;
    attn_sgemm(1, (int)R, (int)nk, (int)dk, p->scale, (const float *)q, (int)ldq, k, (int)ldk,
               0.0f, s, (int)lds);
}

static void pv_blas(const attn_sdpa_plan *p, const kvtile *kt, const float *s, int64_t lds,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *o, int64_t ldo, int acc,
                    const float *rs, attn_ahead *ah)
{
    const int64_t dv = p->d.v_dim;
    const float *v = kt->vb ? kt->vb + (j0 - t) * dv : (const float *)kv_row(&kt->v, j0);
    const int64_t ldv = kt->vb ? dv : kt->v.ld;
    (void)rs;
    (void)ah;
    attn_sgemm(0, (int)R, (int)dv, (int)nk, 1.0f, s, (int)lds, v, (int)ldv, acc ? 1.0f : 0.0f,
               o, (int)ldo);
}

/* The tile engine: Q K^T on the tile's K transposed (kt->kt), P V on V in
 * place or widened. */
static void qk_tile(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
                    attn_ahead *ah)
{
    p->x.gk->mm(R, nk, p->d.qk_dim, p->scale, NULL, (const float *)q, ldq, 1, kt->kt + (j0 - t),
                p->ldt, s, lds, 0, ah);
}

static void pv_tile(const attn_sdpa_plan *p, const kvtile *kt, const float *s, int64_t lds,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *o, int64_t ldo, int acc,
                    const float *rs, attn_ahead *ah)
{
    const int64_t dv = p->d.v_dim;
    const float *v = kt->vb ? kt->vb + (j0 - t) * dv : (const float *)kv_row(&kt->v, j0);
    const int64_t ldv = kt->vb ? dv : kt->v.ld;
    p->x.gk->mm(R, dv, nk, 1.0f, rs, s, lds, 1, v, ldv, o, ldo, acc, ah);
}

/* A Q K^T kernel of kernels/decode.h (the decode path's, or the integer
 * one) over K's rows [j0, j0 + nk) by address, in runs of at most
 * ATTN_DECODE_TILE keys (the decode path's tiles are one run). */
static void qk_rows(attn_dec_qk_fn fn, const attn_sdpa_plan *p, const kvtile *kt,
                    const void *q, int64_t ldq, int64_t R, int64_t j0, int64_t nk, float *s,
                    int64_t lds)
{
    const void *rows[ATTN_DECODE_TILE];
    for (int64_t c = 0; c < nk; c += ATTN_DECODE_TILE) {
        const int64_t n = nk - c < ATTN_DECODE_TILE ? nk - c : ATTN_DECODE_TILE;
        kv_rows(&kt->k, j0 + c, n, rows);
        fn(kt->k.st, (const float *)q, ldq, R, rows, n, p->d.qk_dim, p->scale, s + c, lds,
           kt->k.far);
    }
}

/* The decode path: the streaming kernels over the rows' addresses, K and
 * V in their storage type. */
static void qk_decode(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
                      int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
                      attn_ahead *ah)
{
    (void)t;
    (void)ah;
    qk_rows(p->x.dec->qk, p, kt, q, ldq, R, j0, nk, s, lds);
}

static void pv_decode(const attn_sdpa_plan *p, const kvtile *kt, const float *s, int64_t lds,
                      int64_t R, int64_t t, int64_t j0, int64_t nk, float *o, int64_t ldo,
                      int acc, const float *rs, attn_ahead *ah)
{
    const void *rows[ATTN_DECODE_TILE];
    (void)t;
    (void)rs;
    (void)ah;
    kv_rows(&kt->v, j0, nk, rows);
    p->x.dec->pv(kt->v.st, s, lds, R, rows, nk, p->d.v_dim, o, ldo, acc, kt->v.far);
}

/* BF16 products (the tile engine with Q, K and V in BF16): Q's pairs read
 * in place, K's as the tile's transposed pair panel (kt->kt), V's as its
 * pair panel over keys (kt->vb, ldv = dv pairs per key pair).  P V reads
 * each row's probabilities of the columns [c0, c1) as BF16 at the start of
 * its fp32 values, (uint16_t *)(s + r lds) (rounded there by
 * softmax_rows_p16 on the softmax-only path, else here), widened to whole
 * pairs of the tile: a column left of an odd start or right of an odd
 * end is a 0 (whose V partner is a key of the tile, or the panel's zero
 * half past its end; the 0 left of the start lands in the dead upper half
 * of column c0 - 1's float). */
static void qk_bf16(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
                    attn_ahead *ah)
{
    p->x.bf->mm(R, nk, p->d.qk_dim, p->scale, NULL, (const uint16_t *)q, ldq,
                (const uint32_t *)(const void *)kt->kt + (j0 - t), p->ldt, s, lds, 0, ah);
}

static void pv_bf16(const attn_sdpa_plan *p, const kvtile *kt, const float *s, int64_t lds,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *o, int64_t ldo, int acc,
                    const float *rs, attn_ahead *ah)
{
    const int64_t c0 = j0 - t, c1 = c0 + nk, e0 = c0 & ~(int64_t)1, e1 = (c1 + 1) & ~(int64_t)1;
    float *row0 = (float *)(uintptr_t)s;
    for (int64_t r = 0; r < R; r++) {
        float *sr = row0 + r * lds;
        uint16_t *pr = (uint16_t *)(void *)sr;
        if (!p->softmax_only)
            p->x.bf->round(sr, pr, nk);
        if (c0 & 1)
            pr[-1] = 0;
        if (c1 & 1)
            pr[nk] = 0;
    }
    p->x.bf->mm(R, p->d.v_dim, e1 - e0, 1.0f, rs, (const uint16_t *)(const void *)row0 - (c0 & 1),
                2 * lds, (const uint32_t *)(const void *)kt->vb + (e0 / 2) * p->d.v_dim,
                p->d.v_dim, o, ldo, acc, ah);
}

/* Integer scores (desc.qk_int8): on every path, the integer Q K^T on K's
 * Q8_0 or Q4_0 rows in place (kernels/decode.h), in runs of at most
 * ATTN_DECODE_TILE keys; each score is computed alone, so the paths, the
 * paging and the tiling give the same scores. */
static void qk_int8(const attn_sdpa_plan *p, const kvtile *kt, const void *q, int64_t ldq,
                    int64_t R, int64_t t, int64_t j0, int64_t nk, float *s, int64_t lds,
                    attn_ahead *ah)
{
    (void)t;
    (void)ah;
    qk_rows(p->x.qk8, p, kt, q, ldq, R, j0, nk, s, lds);
}

static const attn_sdpa_products products_blas = { qk_blas, pv_blas };
static const attn_sdpa_products products_bf16 = { qk_bf16, pv_bf16 };
static const attn_sdpa_products products_tile = { qk_tile, pv_tile };
static const attn_sdpa_products products_decode = { qk_decode, pv_decode };
static const attn_sdpa_products products_blas_i8 = { qk_int8, pv_blas };
static const attn_sdpa_products products_tile_i8 = { qk_int8, pv_tile };
static const attn_sdpa_products products_decode_i8 = { qk_int8, pv_decode };

const attn_sdpa_products *attn_sdpa_products_for(int decode, int tile, int bf, int qk8)
{
    /* (bf: Q, K and V BF16, never with a block type K, so never qk8) */
    if (qk8)
        return decode ? &products_decode_i8 : tile ? &products_tile_i8 : &products_blas_i8;
    return decode ? &products_decode : bf ? &products_bf16 : tile ? &products_tile
                                                                  : &products_blas;
}

/* Row i of (b, h) carries no attention: output 0, P 0, lse -INFINITY. */
static void write_empty_row(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                            int64_t b, int64_t h, int64_t i)
{
    const attn_sdpa_desc *d = &p->d;
    if (d->o_type == ATTN_DTYPE_F32)
        memset(ATTN_VIEW_AT(a->o, d->o, b, h, i), 0, (size_t)d->v_dim * sizeof(float));
    else
        memset(ATTN_VIEW_AT(a->o16, d->o, b, h, i), 0, (size_t)d->v_dim * sizeof(uint16_t));
    if (d->want_probs)
        memset(attn_sdpa_probs_row(p, a, b, h, i), 0, (size_t)d->kv_len * sizeof(float));
    if (d->want_lse)
        *attn_sdpa_lse_at(p, a, b, h, i) = -INFINITY;
}

static void row_range(const attn_sdpa_plan *p, const attn_geom *g, int64_t i, int64_t *lo,
                      int64_t *hi)
{
    attn_row_range(g->shift, p->window_left, p->window_right, g->kvlen, i, lo, hi);
}

/* Turn a row of raw scores into probabilities: exp(s - lse) on [lo, hi), 0
 * elsewhere, and everywhere when the row is empty. */
static void finish_probs(const attn_sdpa_plan *p, float *pr, int64_t lo, int64_t hi, float lse)
{
    if (lse == -INFINITY)
        lo = hi = 0;
    memset(pr, 0, (size_t)lo * sizeof(float));
    if (hi > lo)
        p->x.kern->exp_store(pr + lo, pr + lo, hi - lo, lse);
    memset(pr + hi, 0, (size_t)(p->d.kv_len - hi) * sizeof(float));
}

/* finish_probs for row (b, h, i), then dropout on what is visible: the
 * probabilities output is the P that multiplies V. */
static void finish_probs_row(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b,
                             int64_t h, int64_t i, int64_t lo, int64_t hi, float lse)
{
    float *pr = attn_sdpa_probs_row(p, a, b, h, i);
    finish_probs(p, pr, lo, hi, lse);
    if (p->dropout && lse > -INFINITY && hi > lo)  /* not NaN rows */
        p->x.kern->dropout_row(&p->drop, pr + lo, b, h, i + p->qpos, lo + p->kpos, hi - lo);
}

/* The rows of one GEMM: either one head's rows or the whole group's. */
typedef struct segment {
    const void *q;    /* first row (elements of qsz bytes) */
    int64_t ldq, qsz;
    float *o;
    int64_t ldo;
    int64_t v0;       /* first virtual row */
    int64_t nrows;
} segment;

/* Local row r's visible columns of the tile at t, within [cs, ce): [*a0,
 * *a1) (empty at cs when it sees none); its score row sr gets -inf on the
 * rest of [cs, ce). */
static void hide_outside(const work *w, float *sr, int64_t r, int64_t t, int64_t cs,
                         int64_t ce, int64_t *a0p, int64_t *a1p)
{
    int64_t a0 = w->lo[r] - t, a1 = w->hi[r] - t;
    if (a0 < cs) a0 = cs;
    if (a1 > ce) a1 = ce;
    if (a1 < a0) a0 = a1 = cs;
    for (int64_t j = cs; j < a0; j++) sr[j] = -INFINITY;
    for (int64_t j = a1; j < ce; j++) sr[j] = -INFINITY;
    *a0p = a0;
    *a1p = a1;
}

/* One work item while it runs: what run_item's stages (item_begin,
 * item_tile, item_finish) and the row loops share. */
typedef struct item {
    const attn_sdpa_plan *p;
    const attn_sdpa_args *a;
    work *w;
    int64_t b, hk, h0;      /* batch, kv head, its first query head */
    int64_t i0, rows;       /* the item's first query row and its valid rows */
    int64_t qlen, kvlen;    /* batch b's lengths */
    attn_geom g;            /* and its diagonal (visible.h) */
    int64_t jlo, jhi;       /* the union of the rows' visible keys (chunk) */
    int split;              /* split-K: out is the chunk's partials */
    int whole;              /* no window: every row sees [0, kvlen) */
    int stacked;            /* GQA: the group's rows as one matrix */
    int fold;               /* one tile seen evenly: 1 / l goes into P V */
    int folded;             /* ... and it went */
    dest out;
    kvtile kt;
} item;

/* How one pass over a tile of keys at t goes: fresh, the item's first
 * tile (O is written, not added to); even, every row sees all of the
 * columns; fold, this is the item's only tile (fresh and even), so O's rows
 * are final after its P V and 1 / l is applied as they are written. */
typedef struct pass {
    int64_t t;
    int fresh, even, fold;
} pass;

/* The tile at st->t for the local rows [r0, r1) of a segment, over the
 * tile columns [cs, ce). */
static void run_rows_part(const item *it, const segment *sg, int64_t r0, int64_t r1, int64_t cs,
                          int64_t ce, const pass *st)
{
    const attn_sdpa_plan *p = it->p;
    const attn_sdpa_args *a = it->a;
    work *w = it->w;
    const kvtile *kt = &it->kt;
    const int64_t b = it->b, h0 = it->h0, i0 = it->i0, rows = it->rows, t = st->t;
    const int fresh = st->fresh, even = st->even, fold = st->fold;
    const attn_sdpa_desc *d = &p->d;
    const attn_kernels *kern = p->x.kern;
    const int64_t bk = p->lds;
    const int drop = d->mask_mode == ATTN_MASK_DROP_NONZERO;
    float *s = w->s;

    /* Decode path: the kernels prefetch ATTN_DEC_PF_KEYS rows ahead within
     * their own stream; the first rows of the other stream are asked for
     * here, so neither pass starts cold: V's first rows of this tile
     * before Q K^T, the next tile's first K rows before P V. */
    if (p->decode)
        decode_prefetch(&kt->v, t + cs, t + ce, d->v_dim);
    p->prod->qk(p, kt, (const char *)sg->q + r0 * sg->ldq * sg->qsz, sg->ldq, r1 - r0, t, t + cs,
                ce - cs, s + r0 * bk + cs, bk, w->ah);

    /* Nothing but the softmax: one kernel call, the same steps as the loop
     * below.  Rows that see only part of [cs, ce) (the causal diagonal)
     * get -inf outside their range first; then their max over [cs, ce) is
     * the max over what they see, and the rest is the same. */
    const int64_t v0 = sg->v0 + r0;
    if (p->softmax_only) {
        if (!even)
            for (int64_t lr = r0, r = v0 % rows; lr < r1; lr++, r = r + 1 == rows ? 0 : r + 1) {
                int64_t a0, a1;
                hide_outside(w, s + lr * bk, r, t, cs, ce, &a0, &a1);
            }
        /* (BF16 products: P stored as BF16 as it is made) */
        (p->bf ? kern->softmax_rows_p16 : kern->softmax_rows)(
            s + r0 * bk + cs, bk, r1 - r0, ce - cs, w->mrow + v0, w->lrow + v0, w->corr + v0);
    } else {
        int64_t vr = v0, r = vr % rows, h = h0 + vr / rows;
        for (int64_t lr = r0; lr < r1; lr++, vr++, r++) {
            if (r == rows) {
                r = 0;
                h++;
            }
            const int64_t i = i0 + r;
            float *sr = s + lr * bk;
            int64_t a0, a1;
            hide_outside(w, sr, r, t, cs, ce, &a0, &a1);
            const float *bias = d->use_bias ? a->bias + b * d->bias.batch + h * d->bias.head +
                                                  i * d->bias.seq + t + a0
                                            : NULL;
            const uint8_t *mask = d->mask_mode != ATTN_MASK_NONE
                                      ? a->mask + b * d->mask.batch + h * d->mask.head +
                                            i * d->mask.seq + t + a0
                                      : NULL;
            float mt = kern->prep_max(sr + a0, a1 - a0, bias, mask, drop);
            if (d->want_probs)
                memcpy(attn_sdpa_probs_row(p, a, b, h, i) + t + cs, sr + cs,
                       (size_t)(ce - cs) * sizeof(float));
            /* Dropout: l and m stay those of the undropped scores; only the
             * P that multiplies V is dropped (and scaled), on the visible
             * columns (the others are 0 already). */
            if (attn_softmax_row_step(kern->exp_sum, sr + cs, ce - cs, mt, &w->mrow[vr],
                                      &w->lrow[vr], &w->corr[vr]) &&
                p->dropout)
                kern->dropout_row(&p->drop, sr + a0, b, h, i + p->qpos, t + a0 + p->kpos, a1 - a0);
        }
    }
    if (!fresh)
        for (int64_t lr = r0; lr < r1; lr++)
            if (w->corr[sg->v0 + lr] != 1.0f)
                kern->scale(sg->o + lr * sg->ldo, d->v_dim, w->corr[sg->v0 + lr]);
    const float *rs = NULL;
    if (fold) {
        /* The same 1 / l as the pass at the end would take (an empty
         * row's O is cleared there). */
        for (int64_t v = v0; v < v0 + (r1 - r0); v++)
            w->corr[v] = w->lrow[v] == 0.0f ? 0.0f : 1.0f / w->lrow[v];
        rs = w->corr + v0;
    }
    if (p->decode)
        decode_prefetch(&kt->k, t + bk, it->jhi, d->qk_dim);
    p->prod->pv(p, kt, s + r0 * bk + cs, bk, r1 - r0, t, t + cs, ce - cs, sg->o + r0 * sg->ldo,
           sg->ldo, !fresh, rs, w->ah);
}

/* run_rows_part over the rows [r0, r1); the tile engine goes
 * ATTN_TILE_ROWS rows at a time, so that a slice of the score tile stays in
 * the L1/L2 cache from Q K^T through the softmax to P V.  Every row's
 * arithmetic is the same whatever the slices. */
static void run_rows(const item *it, const segment *sg, int64_t r0, int64_t r1, int64_t cs,
                     int64_t ce, const pass *st)
{
    const attn_sdpa_plan *p = it->p;
    /* Slices of near-equal height (197 rows: 66, 66, 65, not 96, 96, 5). */
    const int64_t ns = p->tile ? (r1 - r0 + ATTN_TILE_ROWS - 1) / ATTN_TILE_ROWS : 1;
    const int64_t step = (r1 - r0 + ns - 1) / ns;
    for (int64_t c0 = r0; c0 < r1; c0 += step) {
        const int64_t c1 = c0 + step < r1 ? c0 + step : r1;
        /* The next slice's Q and O rows, on their way while this one runs. */
        if (p->tile) {
            const int64_t c2 = c1 + step < r1 ? c1 + step : r1;
            attn_prefetch_bytes(sg->q, sg->ldq * sg->qsz, c1, c2, p->d.qk_dim * sg->qsz, 0);
            attn_prefetch_rows(sg->o, sg->ldo, c1, c2, p->d.v_dim, 1);
        }
        run_rows_part(it, sg, c0, c1, cs, ce, st);
    }
}

/* Tile columns [cs, ce) the local rows [r0, r1) see; empty when cs >= ce. */
static void rows_span(const work *w, const segment *sg, int64_t r0, int64_t r1, int64_t rows,
                      int64_t t, int64_t nt, int64_t *cs, int64_t *ce, int *even)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    int ev = 1;
    for (int64_t lr = r0, r = (sg->v0 + r0) % rows; lr < r1; lr++, r = r + 1 == rows ? 0 : r + 1) {
        int64_t a0 = w->lo[r] - t, a1 = w->hi[r] - t;
        if (a0 < 0) a0 = 0;
        if (a1 > nt) a1 = nt;
        if (a0 != 0 || a1 != nt)
            ev = 0;
        if (a0 >= a1)
            continue;
        if (a0 < lo) lo = a0;
        if (a1 > hi) hi = a1;
    }
    *cs = lo == INT64_MAX ? 0 : lo;
    *ce = hi == INT64_MIN ? 0 : hi;
    *even = ev;
}

/* Work item it: its batch, kv head, query block and key chunk. */
static void item_of(const attn_sdpa_plan *p, int64_t it, int64_t *b, int64_t *hk, int64_t *qb,
                    int64_t *chunk)
{
    const int64_t per_block = p->d.batch * p->d.kv_heads * p->nchunks;
    const int64_t rem = it % per_block, bh = rem / p->nchunks;
    *qb = p->nqblocks - 1 - it / per_block;
    *chunk = rem % p->nchunks;
    *b = bh / p->d.kv_heads;
    *hk = bh % p->d.kv_heads;
}

/* The look-ahead (see attn_ahead) of the keys [t0, t1) of (b, hk): their K
 * and V rows, as streams 0 and 1. */
static void ahead_kv(const attn_sdpa_plan *p, const attn_sdpa_args *a, attn_ahead *ah,
                     int64_t b, int64_t hk, int64_t t0, int64_t t1)
{
    const attn_sdpa_desc *d = &p->d;
    ah->ns = ah->s = 0;
    ah->r = ah->x = ah->share = 0;
    if (t1 <= t0)
        return;
    kvsrc k, v;
    kv_source(p, a, b, hk, 0, &k);
    kv_source(p, a, b, hk, 1, &v);
    ah->base[0] = (const char *)kv_row(&k, t0);
    ah->base[1] = (const char *)kv_row(&v, t0);
    ah->ld[0] = k.step;
    ah->ld[1] = v.step;
    ah->rows[0] = ah->rows[1] = t1 - t0;
    ah->bytes[0] = attn_st_bytes(k.st, d->qk_dim);
    ah->bytes[1] = attn_st_bytes(v.st, d->v_dim);
    ah->ns = 2;
}

/* The look-ahead of item it's first tile: the K and V rows of the first
 * tile its query rows see, then its Q rows of every head of the group. */
static void ahead_item(const attn_sdpa_plan *p, const attn_sdpa_args *a, attn_ahead *ah,
                       int64_t it)
{
    const attn_sdpa_desc *d = &p->d;
    ah->ns = ah->s = 0;
    ah->r = ah->x = ah->share = 0;
    if (it >= p->nitems)
        return;
    int64_t b, hk, qb, chunk;
    item_of(p, it, &b, &hk, &qb, &chunk);
    const attn_geom g = attn_sdpa_geom(p, a, b);
    const int64_t qlen = g.qlen;
    const int64_t i0 = qb * p->bq, i1 = i0 + p->bq < qlen ? i0 + p->bq : qlen;
    if (i1 <= i0)
        return;
    /* Both bounds of a row's visible range grow with i. */
    int64_t jlo, hi0, lo1, jhi;
    row_range(p, &g, i0, &jlo, &hi0);
    row_range(p, &g, i1 - 1, &lo1, &jhi);
    ahead_kv(p, a, ah, b, hk, jlo, jhi - jlo > p->bk ? jlo + p->bk : jhi);
    const int64_t f = attn_dtype_size(d->q_type);
    const attn_view *vq = &d->q;
    const char *q = d->q_type == ATTN_DTYPE_F32 ? (const char *)a->q : (const char *)a->q16;
    for (int64_t h = hk * p->group; h < (hk + 1) * p->group && ah->ns < ATTN_AHEAD_STREAMS;
         h++, ah->ns++) {
        ah->base[ah->ns] = q + (b * vq->batch + h * vq->head + i0 * vq->seq) * f;
        ah->ld[ah->ns] = vq->seq * f;
        ah->rows[ah->ns] = i1 - i0;
        ah->bytes[ah->ns] = d->qk_dim * f;
    }
}

/* Spread the look-ahead's lines over about blocks register blocks. */
static void ahead_spread(attn_ahead *ah, int64_t blocks)
{
    int64_t lines = 0;
    for (int i = 0; i < ah->ns; i++)
        lines += ah->rows[i] * ((ah->bytes[i] + 63) / 64);
    ah->share = blocks > 0 ? (lines + blocks - 1) / blocks : lines;
}

/* An item's set-up: its padding rows written empty, its rows' visible
 * ranges and their union (within its key chunk), where its O goes, the
 * rows' running state and its K/V sources.  Returns 0 when it has no
 * valid row. */
static int item_begin(item *it, const partials *part, int64_t qb, int64_t chunk)
{
    const attn_sdpa_plan *p = it->p;
    const attn_sdpa_args *a = it->a;
    const attn_sdpa_desc *d = &p->d;
    work *w = it->w;
    const int64_t b = it->b, n = d->q_len, dv = d->v_dim, g = p->group;
    const int64_t h0 = it->h0 = it->hk * g;
    const int64_t i0 = it->i0 = qb * p->bq;
    const int64_t i1 = i0 + p->bq < n ? i0 + p->bq : n;
    it->g = attn_sdpa_geom(p, a, b);
    const int64_t qlen = it->qlen = it->g.qlen;
    const int64_t kvlen = it->kvlen = it->g.kvlen;
    const int64_t ie = i1 < qlen ? i1 : (i0 > qlen ? i0 : qlen);
    const int split = it->split = p->nchunks > 1;

    /* Padding query rows are never read (split-K: the merge writes them). */
    if (!split)
        for (int64_t hh = 0; hh < g; hh++)
            for (int64_t i = ie; i < i1; i++)
                write_empty_row(p, a, b, h0 + hh, i);
    const int64_t rows = it->rows = ie - i0;
    if (rows <= 0)
        return 0;

    /* The block reads only the union of its rows' visible keys (contiguous,
     * since both bounds grow with i), within this item's key chunk. */
    int64_t jlo = INT64_MAX, jhi = 0;
    /* Without a window every row sees the keys [0, kvlen): every tile is
     * seen evenly (no per-row scan, which short items notice). */
    const int whole = it->whole = p->window_left < 0 && p->window_right < 0;
    if (whole) {
        /* (read only by the general row loop, not by softmax_rows) */
        if (!p->softmax_only)
            for (int64_t r = 0; r < rows; r++) {
                w->lo[r] = 0;
                w->hi[r] = kvlen;
            }
        if (kvlen > 0)
            jlo = 0, jhi = kvlen;
    } else {
        for (int64_t r = 0; r < rows; r++) {
            row_range(p, &it->g, i0 + r, &w->lo[r], &w->hi[r]);
            if (w->lo[r] < w->hi[r]) {
                if (w->lo[r] < jlo) jlo = w->lo[r];
                if (w->hi[r] > jhi) jhi = w->hi[r];
            }
        }
    }
    if (split) {
        const int64_t c0 = chunk * p->chunk, c1 = c0 + p->chunk;
        if (jlo < c0) jlo = c0;
        if (jhi > c1) jhi = c1;
    }
    it->jlo = jlo;
    it->jhi = jhi;

    dest *out = &it->out;
    if (split) {
        int64_t base = (chunk * d->batch + b) * d->q_heads * n;
        out->o = part->o + (base + h0 * n + i0) * dv;
        out->head = n * dv;
        out->seq = dv;
        out->m = part->m + base;
        out->l = part->l + base;
    } else if (p->ow) {
        out->o = w->obuf;
        out->head = rows * dv;
        out->seq = dv;
        out->m = out->l = NULL;
    } else {
        out->o = ATTN_VIEW_AT(a->o, d->o, b, h0, i0);
        out->head = d->o.head;
        out->seq = d->o.seq;
        out->m = out->l = NULL;
    }
    /* 16-bit Q off the BF16 products: the rows of the group, widened (the
     * decode path's fp32 Q that would not stack: copied). */
    if (p->qw)
        for (int64_t hh = 0; hh < g; hh++)
            for (int64_t r = 0; r < rows; r++) {
                float *dst = w->qbuf + (hh * rows + r) * d->qk_dim;
                if (d->q_type == ATTN_DTYPE_F32) {
                    memcpy(dst, ATTN_VIEW_AT(a->q, d->q, b, h0 + hh, i0 + r),
                           (size_t)d->qk_dim * sizeof(float));
                    continue;
                }
                const uint16_t *src = ATTN_VIEW_AT(a->q16, d->q, b, h0 + hh, i0 + r);
                if (d->q_type == ATTN_DTYPE_F16)
                    p->x.cvt->f16_to_f32(src, dst, d->qk_dim);
                else
                    p->x.cvt->bf16_to_f32(src, dst, d->qk_dim);
            }

    const int64_t vrows = g * rows;
    for (int64_t vr = 0; vr < vrows; vr++) {
        w->mrow[vr] = -INFINITY;
        w->lrow[vr] = 0.0f;
    }

    /* GQA: the group's rows as one matrix when the layout allows it. */
    it->stacked = p->stack_ldq && rows == n;
    kv_source(p, a, b, it->hk, 0, &it->kt.k);
    kv_source(p, a, b, it->hk, 1, &it->kt.v);
    it->kt.kb = p->kv_copy ? w->kbuf : NULL;
    it->kt.vb = p->kv_copy || p->bf ? w->vbuf : NULL;   /* (BF16: V's pair panel) */
    it->kt.kt = w->kt;

    /* With one tile seen evenly, 1 / l goes into its P V (folded). */
    it->fold = p->tile && !p->decode && !split && jhi - jlo <= p->bk;
    it->folded = 0;
    return 1;
}

/* The tile of keys [t, t + nt): its look-ahead, its K and V widened or
 * transposed, then every segment (one head's rows, or the stacked group)
 * over it.  Every segment meets every tile.  Its O rows are written with
 * beta = 0 by the first tile when every row sees all of it; when the rows
 * see the first tile unevenly (some may skip it) they are zeroed first. */
static void item_tile(item *it, int64_t t, int64_t nt)
{
    const attn_sdpa_plan *p = it->p;
    const attn_sdpa_args *a = it->a;
    const attn_sdpa_desc *d = &p->d;
    work *w = it->w;
    const int64_t dv = d->v_dim, g = p->group, rows = it->rows, vrows = g * rows;
    const int stacked = it->stacked;
    const int64_t nseg = stacked ? 1 : g;
    const kvtile *kt = &it->kt;
    /* The next tile's K and V rows (or, at the last tile, the next
     * item's first tile and its Q rows) go out evenly over this tile's
     * register blocks (12 x 32 on AVX-512; a count near enough: the
     * shares are a hint).  One tile ahead, not a whole item: a long
     * item's K and V would not stay in the L2 until they are used. */
    if (w->ah) {
        if (t + p->bk < it->jhi)
            ahead_kv(p, a, w->ah, it->b, it->hk, t + p->bk,
                     it->jhi - t > 2 * p->bk ? t + 2 * p->bk : it->jhi);
        else
            ahead_item(p, a, w->ah, w->next);
        const int64_t nr = stacked ? vrows : rows;
        ahead_spread(w->ah, nseg * ((nr + 11) / 12) * ((nt + 31) / 32 + (dv + 31) / 32));
    }
    if (p->kv_copy) {
        if (!d->qk_int8)   /* (integer scores read K's blocks in place) */
            kv_fill(p, &kt->k, w->kbuf, d->qk_dim, t, nt);
        kv_fill(p, &kt->v, w->vbuf, dv, t, nt);
    }
    if (p->bf) {
        /* The tile's K as a transposed pair panel, its V as pairs of keys;
         * V first asked for, as below. */
        const uint16_t *rows_[ATTN_TILE_K];
        attn_prefetch_bytes(kv_row(&kt->v, t), kt->v.ld * 2, 0, kt->v.table ? 0 : nt, dv * 2, 0);
        for (int64_t j = 0; j < nt; j++)
            rows_[j] = kv_row(&kt->k, t + j);
        p->x.bf->pack_rows(rows_, nt, d->qk_dim, (uint32_t *)(void *)w->kt, p->ldt);
        for (int64_t j = 0; j < nt; j++)
            rows_[j] = kv_row(&kt->v, t + j);
        p->x.bf->pack_pairs(rows_, nt, dv, (uint32_t *)(void *)w->vbuf, dv);
    } else if (p->tile) {
        const float *k0 = p->kv_copy ? w->kbuf : (const float *)kv_row(&kt->k, t);
        /* V is first needed after a slice's scores and softmax: ask
         * for it now, so that it comes from memory meanwhile. */
        if (!p->kv_copy)
            attn_prefetch_rows((const float *)kv_row(&kt->v, 0), kt->v.ld, t, t + nt, dv, 0);
        if (!d->qk_int8)
            p->x.gk->transpose(k0, p->kv_copy ? d->qk_dim : kt->k.ld, nt, d->qk_dim, w->kt,
                               p->ldt);
    }
    /* Q's rows: the user's (fp32, or BF16 for the BF16 products) or the
     * item's widened copy. */
    const int64_t qsz = p->qw ? (int64_t)sizeof(float) : attn_dtype_size(d->q_type);
    const char *qb_base = p->qw ? (const char *)w->qbuf
                        : (d->q_type == ATTN_DTYPE_F32 ? (const char *)a->q : (const char *)a->q16) +
                              (it->b * d->q.batch + it->h0 * d->q.head + it->i0 * d->q.seq) * qsz;
    const int64_t qhead = p->qw ? rows * d->qk_dim : d->q.head;
    segment sg[1];
    for (int64_t si = 0; si < nseg; si++) {
        const int first = t == it->jlo;
        const int64_t hh = stacked ? 0 : si;
        sg->q = qb_base + hh * qhead * qsz;
        sg->qsz = qsz;
        sg->ldq = stacked ? p->stack_ldq : p->qw ? d->qk_dim : d->q.seq;
        sg->o = it->out.o + hh * it->out.head;
        sg->ldo = stacked ? p->stack_ldo : it->out.seq;
        sg->v0 = stacked ? 0 : si * rows;
        sg->nrows = stacked ? vrows : rows;
        int64_t cs, ce;
        int even;
        if (it->whole) {
            cs = 0;
            ce = nt;
            even = 1;
        } else {
            rows_span(w, sg, 0, sg->nrows, rows, t, nt, &cs, &ce, &even);
        }
        if (even) {
            const pass st = { t, first, 1, it->fold };
            run_rows(it, sg, 0, sg->nrows, 0, nt, &st);
            it->folded = it->fold;
            continue;
        }
        if (first)
            for (int64_t lr = 0; lr < sg->nrows; lr++)
                memset(sg->o + lr * sg->ldo, 0, (size_t)dv * sizeof(float));
        const int64_t sub = p->tile ? ATTN_TILE_SUB_Q : ATTN_SUB_Q;
        const pass st = { t, 0, 0, 0 };
        for (int64_t r0 = 0; r0 < sg->nrows; r0 += sub) {
            int64_t r1 = r0 + sub < sg->nrows ? r0 + sub : sg->nrows;
            rows_span(w, sg, r0, r1, rows, t, nt, &cs, &ce, &even);
            if (cs < ce)
                run_rows(it, sg, r0, r1, cs, ce, &st);
        }
    }
}

void attn_sdpa_store_orow(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b, int64_t h,
                          int64_t i, const float *row)
{
    if (p->d.o_type == ATTN_DTYPE_F32) {
        memcpy(ATTN_VIEW_AT(a->o, p->d.o, b, h, i), row, (size_t)p->d.v_dim * sizeof(float));
        return;
    }
    uint16_t *dst = ATTN_VIEW_AT(a->o16, p->d.o, b, h, i);
    /* (BF16: the BF16 table's rounding, the same rule as the conversion
     * table's, whose per-call set-up short rows notice: S8 0.95x) */
    if (p->d.o_type == ATTN_DTYPE_F16)
        p->x.cvt->f32_to_f16(row, dst, p->d.v_dim);
    else
        p->x.bf->round(row, dst, p->d.v_dim);
}

/* ow: the item's finished fp32 rows (ws.obuf) rounded into O. */
static void item_store(const item *it)
{
    if (!it->p->ow || it->split)
        return;
    const int64_t rows = it->rows, dv = it->p->d.v_dim;
    for (int64_t vr = 0; vr < it->p->group * rows; vr++)
        attn_sdpa_store_orow(it->p, it->a, it->b, it->h0 + vr / rows, it->i0 + vr % rows,
                             it->out.o + vr * dv);
}

/* An item's end: O /= l (unless folded), the logsumexp and the
 * probabilities; split-K: the rows' m and l go to the partials. */
static void item_finish(const item *it)
{
    const attn_sdpa_plan *p = it->p;
    const attn_sdpa_args *a = it->a;
    const attn_sdpa_desc *d = &p->d;
    const attn_kernels *kern = p->x.kern;
    const work *w = it->w;
    const dest *out = &it->out;
    const int64_t n = d->q_len, dv = d->v_dim, rows = it->rows, vrows = p->group * rows;
    const int64_t b = it->b, h0 = it->h0, i0 = it->i0;
    const int split = it->split, folded = it->folded;

    /* 1 / l folded into O's last write and nothing else to write: only a
     * row that saw no key (l exactly 0) is left to clear, which the scan
     * finds without the per-row bookkeeping below (S7's 64-row items
     * noticed it). */
    if (folded && !split && !d->want_lse && !d->want_probs) {
        for (int64_t vr = 0; vr < vrows; vr++)
            if (w->lrow[vr] == 0.0f)
                memset(out->o + (vr / rows) * out->head + (vr % rows) * out->seq, 0,
                       (size_t)dv * sizeof(float));
        item_store(it);
        return;
    }
    for (int64_t vr = 0, h = h0, r = 0; vr < vrows; vr++, r++) {
        if (r == rows) {
            r = 0;
            h++;
        }
        const int64_t i = i0 + r;
        const float l = w->lrow[vr];
        float *orow = out->o + (h - h0) * out->head + r * out->seq;
        if (split) {
            out->m[h * n + i] = w->mrow[vr];
            out->l[h * n + i] = l;
            continue;
        }
        /* l stays exactly 0 when no key was visible; NaN input gives NaN. */
        const int empty = l == 0.0f;
        if (empty)
            memset(orow, 0, (size_t)dv * sizeof(float));
        else if (!folded)
            kern->scale(orow, dv, 1.0f / l);
        if (d->want_lse || d->want_probs) {
            const float lse = empty ? -INFINITY : w->mrow[vr] + logf(l);
            if (d->want_lse)
                *attn_sdpa_lse_at(p, a, b, h, i) = lse;
            if (d->want_probs)
                finish_probs_row(p, a, b, h, i, w->lo[r], w->hi[r], lse);
        }
    }
    item_store(it);
}

/* Work item (b, kv head hk, query block qb, key chunk): item_begin, its
 * tiles, item_finish. */
static void run_item(const attn_sdpa_plan *p, const attn_sdpa_args *a, work *w,
                     const partials *part, int64_t b, int64_t hk, int64_t qb, int64_t chunk)
{
    item it;
    it.p = p;
    it.a = a;
    it.w = w;
    it.b = b;
    it.hk = hk;
    if (!item_begin(&it, part, qb, chunk))
        return;
    for (int64_t t = it.jlo; t < it.jhi; t += p->bk)
        item_tile(&it, t, it.jhi - t < p->bk ? it.jhi - t : p->bk);
    item_finish(&it);
}

/* Split-K: merge the chunks of every row of (b, h) in chunk order (a
 * 16-bit O through the thread's row obuf). */
static void merge_rows(const attn_sdpa_plan *p, const attn_sdpa_args *a, const partials *part,
                       int64_t b, int64_t h, float *obuf)
{
    const attn_sdpa_desc *d = &p->d;
    const int64_t n = d->q_len, dv = d->v_dim;
    const attn_geom g = attn_sdpa_geom(p, a, b);
    const int64_t qlen = g.qlen;
    const int64_t cstride = d->batch * d->q_heads * n;
    for (int64_t i = 0; i < n; i++) {
        if (i >= qlen) {
            write_empty_row(p, a, b, h, i);
            continue;
        }
        const int64_t row = (b * d->q_heads + h) * n + i;
        float mx = -INFINITY;
        int nan = 0;
        for (int64_t c = 0; c < p->nchunks; c++) {
            float mc = part->m[c * cstride + row];
            mx = mc > mx ? mc : mx;
            nan |= mc != mc;
        }
        float l = nan ? NAN : 0.0f;
        if (!nan && mx != -INFINITY)
            for (int64_t c = 0; c < p->nchunks; c++) {
                float mc = part->m[c * cstride + row];
                if (mc != -INFINITY)
                    l += part->l[c * cstride + row] * attn_exp_scalar(mc - mx);
            }
        const int empty = l == 0.0f;
        const float lse = empty ? -INFINITY : mx + logf(l);
        float *orow = p->ow ? obuf : ATTN_VIEW_AT(a->o, d->o, b, h, i);
        memset(orow, 0, (size_t)dv * sizeof(float));
        if (!empty)
            for (int64_t c = 0; c < p->nchunks; c++) {
                float mc = part->m[c * cstride + row];
                if (mc == -INFINITY)
                    continue;
                const float wgt = attn_exp_scalar(mc - mx) / l;
                const float *oc = part->o + (c * cstride + row) * dv;
                for (int64_t j = 0; j < dv; j++)
                    orow[j] += wgt * oc[j];
            }
        if (p->ow)
            attn_sdpa_store_orow(p, a, b, h, i, orow);
        if (d->want_lse)
            *attn_sdpa_lse_at(p, a, b, h, i) = lse;
        if (d->want_probs) {
            int64_t lo, hi;
            row_range(p, &g, i, &lo, &hi);
            finish_probs_row(p, a, b, h, i, lo, hi, lse);
        }
    }
}

static attn_status check_args(const attn_sdpa_plan *p, const attn_sdpa_args *a)
{
    const attn_sdpa_desc *d = &p->d;
    if (!(d->q_type == ATTN_DTYPE_F32 ? a->q : (const void *)a->q16) ||
        !(d->o_type == ATTN_DTYPE_F32 ? (void *)a->o : (void *)a->o16))
        return ATTN_ERR_NULL_ARGUMENT;
    const attn_pointer_use opt[] = {
        { d->q_type != ATTN_DTYPE_F32, a->q16 }, { d->o_type != ATTN_DTYPE_F32, a->o16 },
        { d->q_type == ATTN_DTYPE_F32, a->q }, { d->o_type == ATTN_DTYPE_F32, a->o },
        { d->k_type == ATTN_DTYPE_F32, a->k }, { d->v_type == ATTN_DTYPE_F32, a->v },
        { attn_dtype_valid(d->k_type) && d->k_type != ATTN_DTYPE_F32, a->k16 },
        { attn_dtype_valid(d->v_type) && d->v_type != ATTN_DTYPE_F32, a->v16 },
        { attn_dtype_is_block(d->k_type), a->kq }, { attn_dtype_is_block(d->v_type), a->vq },
        { d->kv_block_size != 0, a->block_table },
        { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->want_probs, a->probs }, { d->want_lse, a->lse },
        { d->use_global_k, a->global_k }, { d->use_global_q, a->global_q },
        { d->block_size != 0, a->layout },
    };
    attn_status st = attn_check_pointers(opt, sizeof opt / sizeof opt[0]);
    if (st != ATTN_OK)
        return st;
    if ((st = attn_check_lengths(d->batch, a->kv_lens, d->use_positions ? INT32_MAX : d->kv_len,
                                 a->q_lens, d->use_positions ? INT32_MAX : d->q_len)) != ATTN_OK)
        return st;
    /* Paged: the entries of every block holding a token of the sequence. */
    if (d->kv_block_size)
        for (int64_t b = 0; b < d->batch; b++) {
            const int64_t len = attn_sdpa_kv_len(p, a, b);
            const int32_t *row = a->block_table + b * d->kv_max_blocks;
            for (int64_t J = 0; J * d->kv_block_size < len; J++)
                if (row[J] < 0 || row[J] >= d->kv_num_blocks)
                    return ATTN_ERR_BAD_BLOCK_TABLE;
        }
    return ATTN_OK;
}

typedef struct execute_ctx {
    const attn_sdpa_plan *p;
    const attn_sdpa_args *a;
    void *ws;
    const partials *part;
} execute_ctx;

/* Work item it; its last tile's look-ahead (when the plan has one) is on
 * item next, the guess of this thread's next. */
static void take_item(const execute_ctx *c, work *w, int64_t it, int64_t next)
{
    int64_t b, hk, qb, chunk;
    item_of(c->p, it, &b, &hk, &qb, &chunk);
    w->next = next;
    run_item(c->p, c->a, w, c->part, b, hk, qb, chunk);
}

/* The decode path's items that do not cost alike go to the threads in
 * runs of r = ATTN_DECODE_RUN_ITEMS, 2 or 1 consecutive items (a
 * sequence's kv heads in order, no key chunks), the largest r that
 * divides the kv heads into a number of runs the team divides (so that one
 * sequence far longer than the others still spreads evenly over the
 * threads, as one item at a time would) and leaves 8 runs or more a
 * thread: D2 (8 kv heads) at 2 threads 4, at 4 threads 2, at 3 threads 1. */
static int64_t decode_run(const attn_sdpa_plan *p, int64_t team)
{
    const int64_t hk = p->d.kv_heads;
    int64_t r = ATTN_DECODE_RUN_ITEMS;
    if (!p->decode || p->nchunks > 1)
        return 1;
    while (r > 1 && (hk % r || (hk / r) % team || p->nitems < 8 * team * r))
        r /= 2;
    return r;
}

/* One thread of execute: its slice of the workspace, its share of the work
 * items (contiguous runs when they cost alike; else heaviest first, the
 * last query blocks under a causal mask, so that a dynamic schedule
 * balances the triangle), then of the split-K merge. */
static void execute_body(void *arg, int tid)
{
    const execute_ctx *c = arg;
    const attn_sdpa_plan *p = c->p;
    const attn_sdpa_desc *d = &p->d;
    const int64_t nitems = p->nitems;
    char *base = (char *)c->ws + (size_t)tid * p->ws.thread;
    work w;
    w.s = (float *)(void *)base;
    w.lo = (int64_t *)(void *)(base + p->ws.ranges);
    w.hi = w.lo + p->bq;
    w.mrow = (float *)(void *)(base + p->ws.state);
    w.lrow = w.mrow + p->vrows;
    w.corr = w.lrow + p->vrows;
    w.kbuf = (float *)(void *)(base + p->ws.kbuf);
    w.vbuf = (float *)(void *)(base + p->ws.vbuf);
    w.kt = (float *)(void *)(base + p->ws.kt);
    w.qbuf = (float *)(void *)(base + p->ws.qbuf);
    w.obuf = (float *)(void *)(base + p->ws.obuf);
    attn_ahead ah;
    w.ah = p->ahead ? &ah : NULL;
    if (p->alike) {
        /* Items that cost alike: each thread takes contiguous runs of
         * them, so that it reads contiguous stretches of the tensors (and
         * the hardware prefetchers of the two cores do not fetch each
         * other's next heads); guided, so that the runs shrink towards the
         * end and a core that ran slower is not waited for; its next item
         * is it + 1 (but at a run's end). */
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(guided)
#endif
        for (int64_t it = 0; it < nitems; it++)
            take_item(c, &w, it, it + 1);
    } else {
        /* Otherwise heaviest first, one at a time; the decode path's items
         * (no heaviest: its rows are one block) in runs of a sequence's
         * kv heads in order (decode_run).  A run of a paged cache's heads
         * reads the pages of the same pool blocks one after another: D2's
         * shape (8 sequences of 512-4096 keys, kv_lens) over a pool in a
         * random order, F16, 2 threads, on Zen 5 took 2.38-2.47 ms by runs
         * of 4 against 2.89-2.95 one at a time, and a contiguous cache the
         * same 1.83-1.84 (docs/DESIGN.md).  The look-ahead guesses the
         * next item of the run, or the first of the run `team` runs on,
         * which the schedule hands out in turn when neighbours cost alike. */
        int64_t team = 1;
#if ATTN_HAVE_OPENMP
        team = omp_get_num_threads();
#endif
        const int64_t run = decode_run(p, team);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, run)
#endif
        for (int64_t it = 0; it < nitems; it++)
            take_item(c, &w, it, (it + 1) % run ? it + 1 : it + 1 + (team - 1) * run);
    }
    if (p->nchunks > 1) {
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t bh = 0; bh < d->batch * d->q_heads; bh++)
            merge_rows(p, c->a, c->part, bh / d->q_heads, bh % d->q_heads, w.obuf);
    }
}

ATTN_DEFINE_ZERO_INIT(attn_sdpa_args_init, attn_sdpa_args)

attn_status attn_sdpa_execute(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                              void *workspace, size_t workspace_bytes)
{
    if (!p || !a)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(a))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = check_args(p, a);
    if (st != ATTN_OK)
        return st;
    void *ws;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->ws.bytes, &ws)) != ATTN_OK)
        return st;

    if (p->sparse) {
        attn_sparse_forward(p, a, ws);
        if (!workspace)
            free(ws);
        return ATTN_OK;
    }
    const attn_sdpa_desc *d = &p->d;
    partials part = { NULL, NULL, NULL };
    if (p->nchunks > 1) {
        int64_t rows = p->nchunks * d->batch * d->q_heads * d->q_len;
        part.o = (float *)((char *)ws + p->ws.thread * (size_t)p->x.nthreads);
        part.m = part.o + rows * d->v_dim;
        part.l = part.m + rows;
    }
    const execute_ctx ctx = { p, a, ws, &part };
    attn_parallel(p->x.blas, p->x.nthreads, p->nitems, execute_body, (void *)&ctx);
    if (!workspace)
        free(ws);
    return ATTN_OK;
}
