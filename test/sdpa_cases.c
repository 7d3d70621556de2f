/*
 * sdpa_cases.c -- the table of attn_sdpa cases: one generator per family
 * and the family table (see sdpa_cases.h).  Shapes, options and seeds are
 * those of the former per-family test functions.
 */
#include "sdpa_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ machinery */

void trows_add(trows *rs, const tcase *c)
{
    if (rs->n == rs->cap) {
        int cap = rs->cap ? 2 * rs->cap : 64;
        trow *v = realloc(rs->v, (size_t)cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "trows_add: out of memory\n");
            abort();
        }
        rs->v = v;
        rs->cap = cap;
    }
    rs->v[rs->n] = rs->next;
    rs->v[rs->n].c = *c;
    rs->n++;
}

int trows_generate(trows *rs, const tfamily *f)
{
    memset(rs, 0, sizeof *rs);
    rs->next.checks = f->checks;
    rs->next.thr = f->thr;
    rs->next.quick = 1;
    rs->next.tweak = TW_NONE;
    if (f->gen)
        f->gen(rs);
    return 0;
}

void trows_free(trows *rs)
{
    free(rs->v);
    memset(rs, 0, sizeof *rs);
}

static void tweak(tinst *t, int tw)
{
    attn_sdpa_desc *d = &t->desc;
    const int64_t B = d->batch, Hq = d->q_heads, m = d->kv_len, dv = d->v_dim;
    switch (tw) {
    case TW_ZERO_STRIDES:
        d->q.batch = 0;
        d->k.batch = d->k.head = 0;
        d->v.batch = d->v.head = 0;
        d->o.batch = 0;
        d->probs.batch = 0;
        d->lse.batch = 0;
        break;
    case TW_INTERLEAVED_OUT:
        /* the dense buffers hold exactly B*Hq*n*(dv|m|1) elements + tail */
        d->o = (attn_view){dv, B * dv, B * Hq * dv};
        if (d->want_probs)
            d->probs = (attn_view){m, B * m, B * Hq * m};
        if (d->want_lse)
            d->lse = (attn_view){1, B, B * Hq};
        break;
    case TW_FLIP_MASK:
        d->mask_mode = d->mask_mode == ATTN_MASK_KEEP_NONZERO ? ATTN_MASK_DROP_NONZERO
                                                              : ATTN_MASK_KEEP_NONZERO;
        break;
    default:
        break;
    }
}

int trow_build(const trow *r, const tcase *c, tinst *t)
{
    if (tinst_build(t, c))
        return -1;
    tweak(t, r->tweak);
    return 0;
}

/* tcase_default with both optional outputs on (most families want them). */
static tcase full(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk,
                  int64_t dv, uint64_t seed)
{
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.want_probs = 1;
    c.want_lse = 1;
    c.seed = seed;
    return c;
}

/* Per-batch lengths in use, from an array of exactly B entries. */
#define KV_LENS(c, a) ((c).use_kv_lens = 1, memcpy((c).kv_lens, (a), sizeof(a)))
#define Q_LENS(c, a) ((c).use_q_lens = 1, memcpy((c).q_lens, (a), sizeof(a)))

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------- families of test_sdpa */

/* Every layout x output layout x misalignment, MHA and GQA packed, n != m
 * with dk != dv; padded layouts with several stride draws, all options. */
static void gen_layouts(trows *rs)
{
    uint64_t seed = 100;
    for (int lay = 0; lay < LAY_COUNT_; lay++)
        for (int out = 0; out < OUT_COUNT_; out++)
            for (int mis = 0; mis < 2; mis++) {
                tcase c = full(2, 4, lay == LAY_PACKED && mis ? 4 : 2, 37, 37, 24, 24, seed++);
                c.layout = lay;
                c.out_layout = out;
                c.misalign = mis;
                trows_add(rs, &c);
                if (lay != LAY_PACKED) {
                    c = tcase_default(3, 6, 3, 19, 45, 40, 12);
                    c.layout = lay;
                    c.out_layout = out;
                    c.misalign = mis;
                    c.want_probs = mis;
                    c.want_lse = !mis;
                    c.seed = seed++;
                    trows_add(rs, &c);
                }
            }
    for (int k = 0; k < 12; k++) {
        tcase c = full(2, 4, 2, 23, 31, 16, 20, seed++);
        c.layout = LAY_PADDED;
        c.out_layout = OUT_PADDED;
        c.misalign = k & 1;
        c.align = k % 2;
        c.wr = 0;
        c.mask_mode = 1 + k % 2;
        c.mask_bcast = k % 8;
        c.use_bias = 1;
        c.bias_bcast = (k + 3) % 8;
        rs->next.quick = k < 3;
        trows_add(rs, &c);
    }
}

/* Valid but unusual views: zero strides over size-1 dimensions, outputs
 * interleaved as [S][H][B][D]. */
static void gen_unusual_views(trows *rs)
{
    tcase c = full(1, 3, 1, 9, 14, 8, 6, 1);
    rs->next.tweak = TW_ZERO_STRIDES;
    trows_add(rs, &c);
    c = full(2, 4, 2, 7, 11, 8, 5, 1);
    c.mask_mode = ATTN_MASK_DROP_NONZERO;
    c.mask_keep = 0.8;
    rs->next.tweak = TW_INTERLEAVED_OUT;
    trows_add(rs, &c);
}

static void gen_gqa_mqa(trows *rs)
{
    static const int64_t heads[][2] = {{8, 2}, {6, 3}, {4, 1}, {5, 1}, {3, 3}, {12, 4}, {1, 1}};
    uint64_t seed = 200;
    for (size_t k = 0; k < COUNT(heads); k++) {
        tcase c = full(2, heads[k][0], heads[k][1], 13, 29, 32, 17, seed++);
        trows_add(rs, &c);
        c = tcase_default(1, heads[k][0], heads[k][1], 70, 9, 8, 64);
        c.layout = LAY_BSHD;
        c.align = ATTN_ALIGN_BOTTOM_RIGHT;
        c.wr = 0;
        c.seed = seed++;
        trows_add(rs, &c);
    }
}

static void gen_scale(trows *rs)
{
    static const float scales[] = {NAN, 0.3f, -0.7f, 0.0f, 2.5f, 1e-3f, 0.125f};
    static const int64_t dks[] = {1, 7, 64};
    uint64_t seed = 300;
    for (size_t s = 0; s < COUNT(scales); s++)
        for (size_t k = 0; k < COUNT(dks); k++) {
            tcase c = full(2, 2, 1, 11, 17, dks[k], 9, seed++);
            c.scale = scales[s];
            trows_add(rs, &c);
        }
}

static void gen_causal(trows *rs)
{
    static const int64_t nm[][2] = {{16, 16}, {10, 25}, {25, 10}, {1, 20}, {20, 1},
                                    {64, 200}, {200, 64}, {130, 130}};
    uint64_t seed = 400;
    for (int align = 0; align < 2; align++)
        for (size_t k = 0; k < COUNT(nm); k++) {
            tcase c = full(2, 2, 2, nm[k][0], nm[k][1], 16, 16, seed++);
            c.align = align;
            c.wr = 0;
            trows_add(rs, &c);
        }
}

static void gen_windows(trows *rs)
{
    static const int64_t w[][2] = {
        {3, -1}, {-1, 2}, {4, 4}, {0, 0}, {0, -1}, {-1, 0}, {2, 0}, {0, 3}, {1000, 1000},
        {-7, -3}, {5, -2}, {-1, -1}, {40, 1}, {INT64_MIN, 0}, {INT64_MAX, 0},
        /* huge right bounds: d(i) + window_right must not overflow (attn.h
         * puts no upper limit on them) */
        {0, INT64_MAX}, {INT64_MAX, INT64_MAX}, {-1, INT64_MAX - 5}};
    static const int64_t nm[][2] = {{30, 30}, {20, 45}, {45, 20}, {1, 33}};
    uint64_t seed = 500;
    for (int align = 0; align < 2; align++)
        for (size_t k = 0; k < COUNT(w); k++)
            for (size_t s = 0; s < COUNT(nm); s++) {
                tcase c = full(1, 2, 1, nm[s][0], nm[s][1], 8, 8, seed++);
                c.align = align;
                c.wl = w[k][0];
                c.wr = w[k][1];
                trows_add(rs, &c);
            }
}

static void gen_lengths(trows *rs)
{
    static const int32_t kl[4] = {0, 5, 34, 1}, ql[4] = {21, 0, 3, 20};
    uint64_t seed = 600;
    for (int which = 1; which < 4; which++)
        for (int align = 0; align < 2; align++)
            for (int causal = 0; causal < 2; causal++) {
                tcase c = full(4, 4, 2, 21, 34, 16, 12, seed++);
                memcpy(c.kv_lens, kl, sizeof kl);
                memcpy(c.q_lens, ql, sizeof ql);
                c.use_kv_lens = which & 1;
                c.use_q_lens = (which >> 1) & 1;
                c.align = align;
                c.wr = causal ? 0 : -1;
                trows_add(rs, &c);
            }
    /* larger, crossing typical block sizes */
    static const int32_t kl2[3] = {300, 129, 65}, ql2[3] = {150, 1, 77};
    tcase c = tcase_default(3, 2, 1, 150, 300, 32, 32);
    KV_LENS(c, kl2);
    Q_LENS(c, ql2);
    c.want_lse = 1;
    c.seed = seed++;
    trows_add(rs, &c);
}

static void gen_mask(trows *rs)
{
    uint64_t seed = 700;
    for (int mode = 1; mode <= 2; mode++)
        for (int bc = 0; bc < 8; bc++)
            for (int dens = 0; dens < 2; dens++) {
                tcase c = full(2, 4, 2, 12, 19, 8, 8, seed++);
                c.mask_mode = mode;
                c.mask_bcast = bc;
                c.mask_keep = dens ? 0.1 : 0.7;
                trows_add(rs, &c);
            }
    /* everything masked out: every row empty */
    for (int mode = 1; mode <= 2; mode++) {
        tcase c = full(1, 2, 2, 5, 7, 4, 4, seed++);
        c.mask_mode = mode;
        c.mask_keep = 0.0;
        trows_add(rs, &c);
    }
    /* polarity: the same bytes read both ways, each against the reference */
    tcase c = tcase_default(1, 1, 1, 6, 10, 4, 4);
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.want_probs = 1;
    trows_add(rs, &c);
    rs->next.tweak = TW_FLIP_MASK;
    trows_add(rs, &c);
}

static void gen_bias(trows *rs)
{
    uint64_t seed = 800;
    for (int bc = 0; bc < 8; bc++)
        for (int k = 0; k < 3; k++) {
            tcase c = full(2, 4, 1, 12, 19, 8, 8, seed++);
            c.use_bias = 1;
            c.bias_bcast = bc;
            c.bias_ninf = k == 0 ? 0.0 : k == 1 ? 0.2 : 0.9;
            c.bias_mag = k == 2 ? 10.0 : 1.0;
            trows_add(rs, &c);
        }
    tcase c = full(2, 2, 2, 8, 9, 4, 4, seed++);
    c.use_bias = 1;
    c.bias_ninf = 1.0;
    trows_add(rs, &c);
}

/* Everything in one call. */
static void gen_combined(trows *rs)
{
    static const int32_t kl[3] = {41, 0, 17};
    for (int k = 0; k < 16; k++) {
        tcase c = full(3, 6, 2, 27, 41, 20, 13, 900 + (uint64_t)k);
        const int32_t ql[3] = {27, 13, 0 + k % 2};
        c.layout = k % 2 ? LAY_PADDED : LAY_BSHD;
        c.out_layout = k % 3 == 0 ? OUT_PADDED : k % 3 == 1 ? OUT_BSHD : OUT_BHSD;
        c.misalign = k % 2;
        c.scale = k % 4 == 0 ? NAN : 0.37f;
        c.align = k % 2;
        c.wl = k % 4 < 2 ? 9 : -1;
        c.wr = k % 3 == 0 ? 0 : 4;
        KV_LENS(c, kl);
        Q_LENS(c, ql);
        c.mask_mode = 1 + k % 2;
        c.mask_bcast = k % 8;
        c.mask_keep = 0.8;
        c.use_bias = 1;
        c.bias_bcast = (7 - k % 8);
        c.bias_ninf = 0.1;
        c.poison = k % 2;
        rs->next.quick = k < 4;
        trows_add(rs, &c);
    }
}

/* Rows without P and lse; CHK_OPTIONAL asks for them in every combination
 * (O must not change bitwise). */
static void gen_optional_outputs(trows *rs)
{
    for (int k = 0; k < 6; k++) {
        tcase c = tcase_default(2, 4, 2, 33 + k * 20, 47 + k * 30, 32, 24);
        c.layout = k % 2 ? LAY_PADDED : LAY_BHSD;
        c.out_layout = k % 2 ? OUT_PADDED : OUT_BHSD;
        c.align = k % 2;
        c.wr = k < 3 ? 0 : -1;
        c.mask_mode = k % 3;
        c.use_bias = k >= 2;
        c.bias_ninf = 0.05;
        c.use_kv_lens = k >= 4;
        c.kv_lens[0] = (int32_t)c.m / 2;
        c.kv_lens[1] = (int32_t)c.m;
        c.seed = 1000 + (uint64_t)k;
        trows_add(rs, &c);
    }
}

static void gen_edge_sizes(trows *rs)
{
    static const struct {
        int64_t B, Hq, Hkv, n, m, dk, dv;
        int align, causal, probs;
    } e[] = {
        {1, 1, 1, 1, 1, 1, 1, 0, 0, 1},
        {2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {1, 2, 1, 1, 1023, 64, 64, 1, 1, 1}, /* decode step */
        {1, 2, 2, 1023, 1, 64, 64, 1, 1, 1}, /* BR: only the last row sees key 0 */
        {1, 1, 1, 1023, 1, 64, 64, 0, 1, 1},
        {1, 2, 1, 37, 50, 1, 1, 0, 0, 1},
        {1, 2, 1, 37, 50, 1, 256, 0, 1, 0},
        {1, 2, 1, 37, 50, 256, 1, 1, 0, 1},
        {1, 2, 2, 197, 197, 64, 64, 0, 1, 1},
        {2, 1, 1, 197, 197, 80, 80, 0, 0, 1},
        {1, 2, 1, 1023, 1023, 64, 64, 1, 1, 0},
        {1, 1, 1, 197, 1023, 64, 32, 1, 1, 1},
        {1, 1, 1, 1023, 197, 32, 64, 1, 0, 0},
        {1, 2, 2, 64, 300, 256, 256, 0, 0, 1},
        {1, 1, 1, 33, 257, 256, 32, 1, 1, 1},
        {1, 1, 1, 65, 129, 255, 257, 0, 0, 1},
    };
    for (size_t k = 0; k < COUNT(e); k++) {
        tcase c = tcase_default(e[k].B, e[k].Hq, e[k].Hkv, e[k].n, e[k].m, e[k].dk, e[k].dv);
        c.align = e[k].align;
        c.wr = e[k].causal ? 0 : -1;
        c.want_probs = e[k].probs;
        c.want_lse = 1;
        c.seed = 1100 + (uint64_t)k;
        rs->next.quick = e[k].n * e[k].m <= 500000; /* 1023 x 1023: slow under valgrind */
        trows_add(rs, &c);
    }
}

static void gen_large_logits(trows *rs)
{
    static const int64_t dks[] = {1, 16, 64, 128};
    uint64_t seed = 1200;
    for (size_t k = 0; k < COUNT(dks); k++)
        for (int v = 0; v < 3; v++) {
            tcase c = full(2, 2, 1, 31, 77, dks[k], 24, seed++);
            c.in_mag = 30.0;
            c.align = v % 2;
            c.wr = v == 1 ? 0 : -1;
            c.mask_mode = v == 2 ? ATTN_MASK_KEEP_NONZERO : ATTN_MASK_NONE;
            c.use_bias = v == 2;
            c.bias_mag = 100.0;
            c.bias_ninf = 0.1;
            trows_add(rs, &c);
        }
    /* explicit large scale on unit inputs */
    tcase c = full(1, 2, 2, 40, 60, 32, 32, seed++);
    c.scale = 40.0f;
    trows_add(rs, &c);
}

/* Rows without a visible key, for every reason at once and separately. */
static void gen_empty_rows(trows *rs)
{
    static const int32_t kl[3] = {0, 16, 0}, ql[3] = {3, 24, 0};
    uint64_t seed = 1300;
    for (int k = 0; k < 5; k++) {
        tcase c = full(3, 2, 1, 24, 16, 8, 8, seed++);
        if (k == 0 || k == 4) /* kv_len 0 for a batch */
            KV_LENS(c, kl);
        if (k == 1 || k == 4) { /* window excluding every key for rows i < 8 */
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.wr = 0;
        }
        if (k == 2 || k == 4) { /* mask hiding whole rows (seq broadcast off) */
            c.mask_mode = ATTN_MASK_DROP_NONZERO;
            c.mask_keep = 0.15;
        }
        if (k == 3 || k == 4) { /* bias -inf everywhere on many rows */
            c.use_bias = 1;
            c.bias_ninf = 0.85;
        }
        if (k == 4) {
            Q_LENS(c, ql);
            c.poison = 1;
        }
        trows_add(rs, &c);
    }
    /* TOP_LEFT, zero-width window, n > m: rows i >= m are empty */
    tcase c = full(1, 1, 1, 30, 10, 4, 4, seed++);
    c.wl = 0;
    c.wr = 0;
    trows_add(rs, &c);
}

/* NaN at every input position hidden by the lengths or the window. */
static void gen_poison(trows *rs)
{
    trng r;
    trng_seed(&r, 1400);
    for (int k = 0; k < 48; k++) {
        const int64_t Hkv = trng_int(&r, 1, 2);
        const int64_t Hq = Hkv * trng_int(&r, 1, 3);
        const int64_t n = trng_int(&r, 1, 70);
        const int64_t m = trng_int(&r, 1, 140);
        const int64_t dk = trng_int(&r, 1, 40);
        const int64_t dv = trng_int(&r, 1, 40);
        tcase c = tcase_default(3, Hq, Hkv, n, m, dk, dv);
        c.poison = 1;
        c.layout = k % 3 == 0 ? LAY_PADDED : LAY_BHSD;
        c.out_layout = k % 3;
        c.align = (int)trng_int(&r, 0, 1);
        c.wl = trng_bool(&r, 0.5) ? trng_int(&r, 0, m) : -1;
        c.wr = trng_bool(&r, 0.5) ? trng_int(&r, 0, 5) : -1;
        c.use_kv_lens = trng_bool(&r, 0.7);
        c.use_q_lens = trng_bool(&r, 0.7);
        for (int b = 0; b < 3; b++) {
            c.kv_lens[b] = (int32_t)trng_int(&r, 0, m);
            c.q_lens[b] = (int32_t)trng_int(&r, 0, n);
        }
        c.mask_mode = (int)trng_int(&r, 0, 2);
        c.mask_bcast = (int)trng_int(&r, 0, 7);
        c.use_bias = trng_bool(&r, 0.5);
        c.bias_bcast = (int)trng_int(&r, 0, 7);
        c.bias_ninf = 0.1;
        c.want_probs = trng_bool(&r, 0.5);
        c.want_lse = 1;
        c.seed = 1400 + (uint64_t)k;
        rs->next.quick = k < 12;
        trows_add(rs, &c);
    }
}

/* Rows for CHK_PLAN: plan + execute against attn_sdpa. */
static void gen_plan_execute(trows *rs)
{
    for (int k = 0; k < 4; k++) {
        tcase c = full(2, 4, 2, 70 + 50 * k, 90 + 40 * k, 32, 48, 1500 + (uint64_t)k);
        c.align = k % 2;
        c.wr = k < 2 ? 0 : -1;
        c.mask_mode = k % 3;
        c.use_bias = k >= 2;
        c.use_kv_lens = k == 3;
        c.kv_lens[0] = 33;
        c.kv_lens[1] = (int32_t)c.m;
        c.layout = k == 1 ? LAY_PADDED : LAY_BHSD;
        trows_add(rs, &c);
    }
}

/* ----------------------------------------------- families of test_threads */

static void gen_threads(trows *rs)
{
    for (int k = 0; k < 4; k++) {
        tcase c;
        switch (k) {
        case 0: /* causal BR, GQA, broadcast mask, probs, lse */
            c = full(2, 8, 2, 300, 500, 64, 48, 0);
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.wr = 0;
            c.mask_mode = ATTN_MASK_KEEP_NONZERO;
            c.mask_bcast = BC_HEAD;
            c.mask_keep = 0.9;
            break;
        case 1: { /* bias, lengths, sliding window, padded layouts */
            static const int32_t kl[3] = {257, 0, 100}, ql[3] = {129, 64, 1};
            c = tcase_default(3, 4, 4, 129, 257, 40, 24);
            c.layout = LAY_PADDED;
            c.out_layout = OUT_PADDED;
            c.wl = 50;
            c.wr = 10;
            c.use_bias = 1;
            c.bias_bcast = BC_BATCH;
            c.bias_ninf = 0.05;
            KV_LENS(c, kl);
            Q_LENS(c, ql);
            c.want_lse = 1;
            break;
        }
        case 2: /* decode: one query, many keys, MQA */
            c = full(2, 4, 1, 1, 1023, 64, 64, 0);
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.wr = 0;
            break;
        default: /* one long head: parallel only across query blocks */
            c = full(1, 1, 1, 1023, 1023, 32, 32, 0);
            c.wr = 0;
            c.mask_mode = ATTN_MASK_DROP_NONZERO;
            c.mask_bcast = BC_BATCH | BC_HEAD;
            c.mask_keep = 0.95;
            c.poison = 1;
            break;
        }
        c.seed = 5000 + (uint64_t)k;
        rs->next.quick = k < 2;
        trows_add(rs, &c);
    }
}

/* One plan for every worker: fixed layout, inputs differing by seed (the
 * checks use seed + i for the workers). */
static tcase worker_case(int plan_threads, uint64_t seed)
{
    static const int32_t kl[2] = {161, 77};
    tcase c = full(2, 4, 2, 97, 161, 32, 24, seed);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wl = 64;
    c.wr = 0;
    KV_LENS(c, kl);
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.mask_keep = 0.9;
    c.use_bias = 1;
    c.bias_bcast = BC_HEAD | BC_SEQ;
    c.threads = plan_threads;
    return c;
}

static void gen_concurrent(trows *rs)
{
    for (int pt = 1; pt <= 2; pt++) {
        tcase c = worker_case(pt, 7000);
        trows_add(rs, &c);
    }
}

static void gen_openmp_region(trows *rs)
{
    for (int pt = 1; pt <= 2; pt++) {
        tcase c = worker_case(pt, 8000);
        trows_add(rs, &c);
    }
}

/* ------------------------------------------------- families of test_paths */

/* Option set k (0..5) on top of a path shape; the quick set is k = 4. */
static void path_options(tcase *c, int k, trng *r)
{
    switch (k) {
    case 0:
        break;
    case 1: /* lengths + bottom-right causal */
        c->use_kv_lens = 1;
        c->use_q_lens = 1;
        for (int b = 0; b < c->B; b++) {
            c->kv_lens[b] = (int32_t)trng_int(r, 0, c->m);
            c->q_lens[b] = (int32_t)trng_int(r, 0, c->n);
        }
        c->kv_lens[0] = (int32_t)c->m;
        c->q_lens[0] = (int32_t)c->n;
        c->align = ATTN_ALIGN_BOTTOM_RIGHT;
        c->wr = 0;
        break;
    case 2: /* per-head mask and bias */
        c->mask_mode = ATTN_MASK_KEEP_NONZERO;
        c->mask_keep = 0.8;
        c->use_bias = 1;
        c->bias_ninf = 0.05;
        break;
    case 3: /* broadcast drop-mask, window */
        c->mask_mode = ATTN_MASK_DROP_NONZERO;
        c->mask_bcast = BC_HEAD | BC_SEQ;
        c->mask_keep = 0.9;
        c->wl = c->m / 3;
        c->wr = 7;
        break;
    case 4: /* everything, poisoned */
        c->use_kv_lens = 1;
        for (int b = 0; b < c->B; b++)
            c->kv_lens[b] = (int32_t)trng_int(r, c->m / 2, c->m);
        c->mask_mode = ATTN_MASK_KEEP_NONZERO;
        c->mask_keep = 0.95;
        c->use_bias = 1;
        c->poison = 1;
        c->align = ATTN_ALIGN_BOTTOM_RIGHT;
        c->wl = c->m / 2;
        break;
    default: /* large logits, top-left causal */
        c->in_mag = 6.0;
        c->wr = 0;
        break;
    }
    c->want_probs = k != 3;
    c->want_lse = 1;
}

/* shapes x layouts x option sets 0..5; seeds base + 20 s + 10 lay + k
 * (10 s + k with one layout). */
static void gen_paths(trows *rs, uint64_t base, const int64_t (*shapes)[7], size_t ns,
                      int nlay, int narrow_band)
{
    trng r;
    trng_seed(&r, base);
    for (size_t s = 0; s < ns; s++)
        for (int lay = 0; lay < nlay; lay++)
            for (int k = 0; k < 6; k++) {
                const int64_t *x = shapes[s];
                tcase c = tcase_default(x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
                c.layout = lay ? LAY_BSHD : LAY_BHSD;
                c.out_layout = lay ? OUT_BSHD : OUT_BHSD;
                c.seed = base + (nlay > 1 ? 20 : 10) * s + 10 * (uint64_t)lay + (uint64_t)k;
                path_options(&c, k, &r);
                if (narrow_band && k == 0) { /* most tiles uneven or hidden */
                    c.wl = 40;
                    c.wr = 3;
                }
                rs->next.quick = k == 4;
                trows_add(rs, &c);
            }
}

/* split-K: short queries over many keys with few (batch, group, block)
 * items (n <= 64, B * Hkv * ceil(n / 512) < 16, m > 512). */
static void gen_split_k(trows *rs)
{
    /* B, Hq, Hkv, n, m, dk, dv */
    static const int64_t shapes[][7] = {
        {1, 8, 1, 1, 3000, 64, 64}, /* MQA decode, 6 chunks */
        {1, 4, 4, 1, 1100, 32, 48}, /* MHA decode, 3 chunks */
        {2, 8, 2, 8, 2000, 40, 24}, /* short queries, GQA stacked */
        {1, 6, 3, 5, 777, 16, 16},  /* odd sizes, 2 chunks */
        {3, 4, 1, 33, 1500, 8, 8},  /* n > 32, 2 chunks */
    };
    gen_paths(rs, 9100, shapes, COUNT(shapes), 1, 0);
}

/* GQA stacking: the g query heads of a group as the rows of one GEMM
 * (BHSD-like layouts, whole n in one block, g * n <= 512); BSHD cannot. */
static void gen_gqa_stacking(trows *rs)
{
    static const int64_t shapes[][7] = {
        {2, 8, 2, 100, 300, 32, 32}, /* g 4, 400 stacked rows */
        {1, 6, 2, 1, 700, 16, 8},    /* decode, stacked by head stride */
        {2, 12, 3, 37, 90, 8, 12},
        {1, 16, 2, 64, 600, 24, 24}, /* g * n = 512: the limit */
        {1, 16, 2, 65, 200, 24, 24}, /* just over: not stacked */
    };
    gen_paths(rs, 9200, shapes, COUNT(shapes), 2, 0);
}

/* The causal diagonal and window edges in sub-blocks of 64 rows over their
 * own key columns; several query blocks and key tiles. */
static void gen_uneven_tiles(trows *rs)
{
    static const int64_t shapes[][7] = {
        {1, 2, 1, 1100, 700, 16, 16}, /* 3 query blocks, 2 key tiles */
        {1, 1, 1, 300, 1100, 8, 8},   /* bottom-right diagonal far right */
        {2, 2, 2, 520, 257, 12, 20},
        {1, 3, 1, 513, 513, 4, 4},    /* one past each block size */
    };
    gen_paths(rs, 9300, shapes, COUNT(shapes), 1, 1);
}

/* ------------------------------------------------ family of test_random */

static int64_t pick_len(trng *r, int64_t n)
{
    /* favour 0 and the full length */
    int k = (int)trng_int(r, 0, 5);
    if (k == 0)
        return 0;
    if (k <= 2)
        return n;
    return trng_int(r, 0, n);
}

static tcase random_case(uint64_t seed)
{
    trng r;
    trng_seed(&r, seed);
    const int64_t B = trng_int(&r, 1, 3);
    const int64_t Hkv = trng_int(&r, 1, 3);
    const int64_t Hq = Hkv * trng_int(&r, 1, 3);
    int64_t n, m;
    if (trng_bool(&r, 0.8)) {
        n = trng_int(&r, 1, 40);
        m = trng_int(&r, 1, 40);
    } else {
        n = trng_int(&r, 1, 150);
        m = trng_int(&r, 1, 300);
    }
    int64_t dk = trng_bool(&r, 0.9) ? trng_int(&r, 1, 80) : trng_int(&r, 81, 260);
    int64_t dv = trng_bool(&r, 0.9) ? trng_int(&r, 1, 80) : trng_int(&r, 81, 260);
    int layout = (int)trng_int(&r, 0, LAY_COUNT_ - 1);
    if (layout == LAY_PACKED) {
        m = n;
        dv = dk;
    }
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.layout = layout;
    c.out_layout = (int)trng_int(&r, 0, OUT_COUNT_ - 1);
    c.misalign = trng_bool(&r, 0.3);
    int sk = (int)trng_int(&r, 0, 5);
    c.scale = sk <= 2 ? NAN : sk == 3 ? 0.0f : (float)trng_uniform(&r, -2.0, 2.0);
    c.align = (int)trng_int(&r, 0, 1);
    int wk = (int)trng_int(&r, 0, 4);
    c.wl = wk == 0 || wk == 3 ? trng_int(&r, 0, m) : wk == 4 ? -trng_int(&r, 1, 9) : -1;
    wk = (int)trng_int(&r, 0, 4);
    c.wr = wk == 0 ? 0 : wk == 1 || wk == 3 ? trng_int(&r, 0, m) : -1;
    c.use_kv_lens = trng_bool(&r, 0.4);
    c.use_q_lens = trng_bool(&r, 0.4);
    for (int64_t b = 0; b < B; b++) {
        c.kv_lens[b] = (int32_t)pick_len(&r, m);
        c.q_lens[b] = (int32_t)pick_len(&r, n);
    }
    c.mask_mode = (int)trng_int(&r, 0, 2);
    c.mask_bcast = (int)trng_int(&r, 0, 7);
    c.mask_keep = trng_uniform(&r, 0.2, 1.0);
    c.use_bias = trng_bool(&r, 0.5);
    c.bias_bcast = (int)trng_int(&r, 0, 7);
    int bk = (int)trng_int(&r, 0, 3);
    c.bias_ninf = bk == 0 ? 0.0 : bk == 1 ? 0.1 : bk == 2 ? 0.5 : 0.02;
    c.bias_mag = trng_bool(&r, 0.8) ? 1.0 : 8.0;
    c.want_probs = trng_bool(&r, 0.5);
    c.want_lse = trng_bool(&r, 0.5);
    c.in_mag = trng_bool(&r, 0.85) ? 1.0 : 10.0;
    c.poison = trng_bool(&r, 0.5);
    c.threads = 1;
    c.seed = seed;
    return c;
}

static long env_long(const char *name, long def)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return def;
    return strtol(e, NULL, 0);
}

/* ATTN_TEST_CASES=<n> cases (default 400, 40 when quick) from base seed
 * ATTN_TEST_SEED (default 20240601); every fourth also gets CHK_OPTIONAL,
 * every fifth CHK_PLAN. */
static void gen_random(trows *rs)
{
    const long count = env_long("ATTN_TEST_CASES", tquick() ? 40 : 400);
    const uint64_t base = (uint64_t)env_long("ATTN_TEST_SEED", 20240601);
    const unsigned def = rs->next.checks;
    for (long k = 0; k < count; k++) {
        tcase c = random_case(base * 1000003u + (uint64_t)k);
        rs->next.checks = def | (k % 4 == 0 ? CHK_OPTIONAL : 0u) | (k % 5 == 0 ? CHK_PLAN : 0u);
        trows_add(rs, &c);
    }
}

/* ------------------------------------------------ sparse attention */

/* Global keys and queries with windows (sliding, causal, left only; both
 * alignments), lengths (flags on padded positions too), masks of both
 * polarities, bias, GQA; Longformer's first tokens global. */
static void gen_global(trows *rs)
{
    static const int64_t w[][2] = {{3, 3}, {-1, 0}, {5, -1}};
    static const int32_t kl[2] = {53, 20}, ql[2] = {37, 11};
    uint64_t seed = 11000;
    for (int align = 0; align < 2; align++)
        for (size_t x = 0; x < COUNT(w); x++)
            for (int k = 0; k < 4; k++) {
                tcase c = full(2, 4, 2, 37, 53, 16, 12, seed++);
                c.align = align;
                c.wl = w[x][0];
                c.wr = w[x][1];
                c.use_gk = k != 1;
                c.use_gq = k != 0;
                c.gk_rate = 0.12;
                c.gq_rate = 0.08;
                if (k == 2) {
                    KV_LENS(c, kl);
                    Q_LENS(c, ql);
                }
                if (k == 3) {
                    c.mask_mode = 1 + (int)((x + (size_t)align) % 2);
                    c.mask_bcast = (int)x;
                    c.mask_keep = 0.8;
                    c.use_bias = 1;
                    c.bias_bcast = BC_SEQ;
                    c.bias_ninf = 0.05;
                }
                rs->next.quick = align == 0 && x == 0;
                trows_add(rs, &c);
            }
    /* Longformer: the first tokens global both ways, sliding window, GQA,
     * BSHD; and many scattered global keys, BR causal */
    for (int k = 0; k < 2; k++) {
        tcase c = full(2, 8, 2, 150, 150, 32, 32, seed++);
        c.layout = LAY_BSHD;
        c.out_layout = OUT_BSHD;
        c.wl = 8;
        c.wr = k ? 0 : 8;
        c.align = k;
        c.use_gk = c.use_gq = 1;
        c.glob_first = k ? 0 : 4;
        c.gk_rate = 0.3;
        c.gq_rate = 0.02;
        rs->next.quick = k == 0;
        trows_add(rs, &c);
    }
}

/* Scattered global queries (each (b, h)'s global rows gathered into dense
 * blocks): several per work item, the first and last rows of every item,
 * every row, none, one per item at its edge, and a mix; each with a
 * sliding window and GQA, a layout (per head, causal, bottom-right, with
 * lengths, mask and bias), a layout whose block rows hold several items
 * (bs 128: several global-query items per block row), and lengths with
 * flags on padded rows, mask and bias, lse only; and dk + dv > 1024. */
static void gen_global_scattered(trows *rs)
{
    static const int64_t pat[][3] = {
        /* step, offset, edges */
        {5, 2, 0}, {0, 0, 1}, {1, 0, 0}, {0, 0, 0}, {64, 63, 0}, {7, 3, 1},
    };
    static const int32_t kl[2] = {170, 61}, ql[2] = {150, 45};
    static const int32_t kl2[2] = {280, 130}, ql2[2] = {300, 200};
    uint64_t seed = 11500;
    for (size_t x = 0; x < COUNT(pat); x++)
        for (int k = 0; k < 4; k++) {
            const int big = k == 2;
            tcase c = full(2, 4, 2, big ? 300 : 150, big ? 280 : 170, 16, 12, seed++);
            c.use_gq = 1;
            c.gq_step = pat[x][0];
            c.gq_off = pat[x][1];
            c.gq_edges = (int)pat[x][2];
            c.gq_rate = 0.0;   /* no pattern: no global query */
            c.use_gk = k != 3;
            c.gk_rate = 0.1;
            c.poison = k % 2 == 0;
            switch (k) {
            case 0:
                c.wl = c.wr = 6;
                break;
            case 1:
                c.bs = 16;
                c.lay_kind = TLAY_RANDOM;
                c.lay_per_head = 1;
                c.lay_keep = 0.5;
                c.align = ATTN_ALIGN_BOTTOM_RIGHT;
                c.wl = 20;
                c.wr = 0;
                KV_LENS(c, kl);
                Q_LENS(c, ql);
                c.mask_mode = ATTN_MASK_DROP_NONZERO;
                c.mask_keep = 0.85;
                c.mask_bcast = BC_HEAD;
                c.use_bias = 1;
                c.bias_bcast = BC_BATCH;
                c.bias_ninf = 0.03;
                break;
            case 2:
                c.bs = 128;
                c.lay_kind = TLAY_BIGBIRD;
                c.layout = LAY_BSHD;
                c.out_layout = OUT_BSHD;
                c.wl = 30;
                c.wr = -1;
                KV_LENS(c, kl2);
                Q_LENS(c, ql2);
                c.use_bias = 1;
                c.bias_bcast = BC_SEQ;
                c.bias_ninf = 0.02;
                c.want_lse = 0;
                break;
            default:
                c.wl = 4;
                c.wr = 0;
                KV_LENS(c, kl);
                Q_LENS(c, ql);
                c.mask_mode = ATTN_MASK_KEEP_NONZERO;
                c.mask_keep = 0.8;
                c.mask_bcast = (int)x % 8;
                c.use_bias = 1;
                c.bias_bcast = BC_HEAD;
                c.want_probs = 0;
                break;
            }
            rs->next.quick = k == 0 || (k == 1 && x < 2);
            trows_add(rs, &c);
        }
    /* dk + dv > 1024: no gather of short key segments (scattered global
     * keys) in the forward and the backward, global queries still
     * gathered; with and without a layout. */
    for (int k = 0; k < 2; k++) {
        tcase c = full(1, 2, 1, 40, 50, 600, 500, seed++);
        c.use_gq = c.use_gk = 1;
        c.gq_step = 3;
        c.gk_rate = 0.2;
        c.wl = c.wr = 2;
        c.bs = k ? 16 : 0;
        c.lay_kind = TLAY_RANDOM;
        c.lay_keep = 0.7;
        c.poison = 1;
        rs->next.quick = 0;
        trows_add(rs, &c);
    }
}

/* Block layouts: every block size 16..256 with n and m not multiples of
 * it; random (per head and broadcast), empty block rows, BigBird, strided,
 * fixed; with windows, causal (both alignments), lengths, masks, bias,
 * GQA. */
static void gen_layout_rows(trows *rs)
{
    uint64_t seed = 12000;
    for (int64_t bs = 16; bs <= 256; bs *= 2) {
        const int64_t n = bs * 5 / 2 + 3, m = bs * 3 + 5;
        for (int k = 0; k < 3; k++) {
            tcase c = full(k == 2 ? 2 : 1, 4, k == 2 ? 1 : 2, n, m, 16, 8, seed++);
            c.bs = bs;
            c.lay_keep = 0.5;
            switch (k) {
            case 0:
                c.lay_kind = TLAY_RANDOM;
                c.lay_per_head = 1;
                break;
            case 1: {
                const int32_t kl[1] = {(int32_t)(m - bs / 2)}, ql[1] = {(int32_t)(n - 5)};
                c.lay_kind = TLAY_EMPTY_ROWS;
                c.align = ATTN_ALIGN_BOTTOM_RIGHT;
                c.wr = 0;
                KV_LENS(c, kl);
                Q_LENS(c, ql);
                break;
            }
            default:
                c.lay_kind = bs == 16 || bs == 128 ? TLAY_BIGBIRD : bs == 32 || bs == 256
                                                                   ? TLAY_STRIDED : TLAY_FIXED;
                c.lay_per_head = bs >= 64;
                c.wl = bs;
                c.wr = bs == 32 ? 0 : bs / 2;
                c.mask_mode = bs % 64 ? ATTN_MASK_DROP_NONZERO : ATTN_MASK_KEEP_NONZERO;
                c.mask_keep = 0.85;
                c.mask_bcast = BC_HEAD;
                c.use_bias = 1;
                c.bias_bcast = BC_BATCH;
                c.bias_ninf = 0.02;
                break;
            }
            rs->next.quick = bs <= 32;
            trows_add(rs, &c);
        }
    }
}

/* Global tokens and a layout together, with everything else: views,
 * misalignment, lengths, masks, bias, probabilities or not. */
static void gen_sparse_combined(trows *rs)
{
    static const int32_t kl[3] = {70, 0, 33};
    for (int k = 0; k < 8; k++) {
        tcase c = full(3, 6, 2, 61, 70, 20, 13, 13000 + (uint64_t)k);
        const int32_t ql[3] = {61, 20, (int32_t)(k % 2)};
        c.layout = k % 2 ? LAY_PADDED : LAY_BSHD;
        c.out_layout = k % 3 == 0 ? OUT_PADDED : k % 3 == 1 ? OUT_BSHD : OUT_BHSD;
        c.misalign = k % 2;
        c.align = k % 2;
        c.wl = k % 4 < 2 ? 9 : -1;
        c.wr = k % 3 == 0 ? 0 : 4;
        if (k >= 2) {
            KV_LENS(c, kl);
            Q_LENS(c, ql);
        }
        c.mask_mode = k % 3;
        c.mask_bcast = k % 8;
        c.mask_keep = 0.85;
        c.use_bias = k % 2;
        c.bias_bcast = 7 - k % 8;
        c.bias_ninf = 0.05;
        c.use_gk = 1;
        c.use_gq = k % 4 != 3;
        c.gk_rate = 0.1;
        c.gq_rate = 0.1;
        c.bs = k < 4 ? 16 : 32;
        c.lay_kind = k % 5;
        c.lay_per_head = k % 2;
        c.lay_keep = 0.6;
        c.want_probs = k % 4 != 1;
        c.want_lse = k % 4 != 2;
        c.poison = k % 2;
        rs->next.quick = k < 2;
        trows_add(rs, &c);
    }
}

/* 16-bit Q, K, V and O (the "types" suite, which also reruns the forward
 * families above at BF16 and F16): what those families do not reach. */
static void gen_types(trows *rs)
{
    static const int types[] = {ATTN_DTYPE_BF16, ATTN_DTYPE_F16};
    uint64_t seed = 9100;
    for (size_t ti = 0; ti < COUNT(types); ti++) {
        const int ty = types[ti];
        /* odd head dims (a pair's second half past the row), every
         * alignment and a window, GQA; misaligned (odd-address) tensors */
        for (int v = 0; v < 4; v++) {
            tcase c = full(2, 4, 2, 37, 45, 33, 17, seed++);
            c.dtype = ty;
            c.align = v % 2;
            c.wr = v >= 1 ? 0 : -1;
            c.wl = v == 3 ? 5 : -1;
            c.misalign = v % 2;
            c.want_probs = c.want_lse = v == 2;
            trows_add(rs, &c);
        }
        /* the decode path and split-K (n <= 16), GQA 8 / 2 */
        for (int64_t n = 1; n <= 16; n *= 4) {
            tcase c = full(1, 8, 2, n, 700, 64, 64, seed++);
            c.dtype = ty;
            c.align = ATTN_ALIGN_BOTTOM_RIGHT;
            c.wr = n > 1 ? 0 : -1;
            trows_add(rs, &c);
        }
        /* the decode path with Q and O whose heads do not lie at one row
         * stride (BSHD, padded): it stacks the group all the same, so the
         * calls' row counts (16 and 32 here, past which the AVX-512 Q K^T
         * takes its many-rows form) are those of the fp32 call; bitwise
         * that call, causal and not, d 64 and 128 */
        {
            const unsigned keep = rs->next.checks;
            rs->next.checks |= CHK_WIDENED;
            for (int v = 0; v < 3; v++) {
                /* g 4 x n 4, g 8 x n 2, g 8 x n 4 */
                tcase c = full(2, v ? 16 : 8, 2, v == 1 ? 2 : 4, 300, v == 1 ? 128 : 64,
                               v == 1 ? 128 : 40, seed++);
                c.dtype = ty;
                c.layout = v == 2 ? LAY_PADDED : LAY_BSHD;
                c.out_layout = v == 2 ? OUT_PADDED : OUT_BSHD;
                c.align = ATTN_ALIGN_BOTTOM_RIGHT;
                c.wr = v != 1 ? 0 : -1;
                c.want_probs = c.want_lse = 1;
                c.poison = 1;
                trows_add(rs, &c);
            }
            rs->next.checks = keep;
        }
        /* large logits (inputs x30, bias up to 100) and a long row */
        {
            tcase c = full(1, 2, 1, 40, 97, 64, 32, seed++);
            c.dtype = ty;
            c.in_mag = 30.0;
            c.use_bias = 1;
            c.bias_mag = 100.0;
            c.bias_ninf = 0.1;
            trows_add(rs, &c);
            tcase l = full(1, 1, 1, 24, 32768, 64, 64, seed++);
            l.dtype = ty;
            l.want_lse = 1;
            rs->next.quick = 0;
            trows_add(rs, &l);
            rs->next.quick = 1;
        }
        /* sparse rows beyond the sparse families: scattered global keys
         * (short segments) and a window with dk + dv > 1024 (no gather:
         * every segment widened and read on its own), and a layout with
         * global queries over two key tiles; bitwise the fp32 call too */
        {
            const unsigned keep = rs->next.checks;
            rs->next.checks |= CHK_WIDENED;
            tcase c = full(1, 2, 1, 40, 300, 520, 516, seed++);
            c.dtype = ty;
            c.use_gk = 1;
            c.gk_rate = 0.05;
            c.wl = 8;
            c.wr = 0;
            c.poison = 1;
            trows_add(rs, &c);
            tcase l = full(2, 4, 2, 96, 700, 32, 24, seed++);
            l.dtype = ty;
            l.use_gq = 1;
            l.gq_rate = 0.05;
            l.use_gk = 1;
            l.gk_rate = 0.02;
            l.bs = 32;
            l.lay_kind = TLAY_BIGBIRD;
            l.lay_per_head = 1;
            l.use_kv_lens = 1;
            l.kv_lens[0] = 700, l.kv_lens[1] = 517;
            l.mask_mode = ATTN_MASK_KEEP_NONZERO;
            l.mask_keep = 0.9;
            trows_add(rs, &l);
            rs->next.checks = keep;
        }
        /* lengths, masks, probabilities over several tiles (m > 512) */
        {
            tcase c = full(3, 2, 2, 70, 600, 64, 48, seed++);
            c.dtype = ty;
            c.use_kv_lens = c.use_q_lens = 1;
            c.kv_lens[0] = 600, c.kv_lens[1] = 513, c.kv_lens[2] = 0;
            c.q_lens[0] = 70, c.q_lens[1] = 33, c.q_lens[2] = 70;
            c.mask_mode = ATTN_MASK_DROP_NONZERO;
            c.mask_keep = 0.8;
            c.want_probs = c.want_lse = 1;
            trows_add(rs, &c);
        }
    }
}

/* ------------------------------------------------------------ the table */


const tfamily tfamilies[] = {
    /* name                     suite      generator             checks */
    {"layouts", "sdpa", gen_layouts, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"unusual views", "sdpa", gen_unusual_views,
     CHK_POISON | CHK_THREADS | CHK_OPTIONAL | CHK_PLAN | CHK_BWD,
     THR_ALL, NULL},
    {"gqa/mqa", "sdpa", gen_gqa_mqa, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"scale", "sdpa", gen_scale, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"causal", "sdpa", gen_causal, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"windows", "sdpa", gen_windows, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"visibility table", "sdpa", NULL, 0, THR_ALL, test_visibility_table},
    {"lengths", "sdpa", gen_lengths, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"mask", "sdpa", gen_mask, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"bias", "sdpa", gen_bias, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"combined", "sdpa", gen_combined, CHK_POISON | CHK_THREADS | CHK_BWD, THR_ALL, NULL},
    {"optional outputs", "sdpa", gen_optional_outputs, CHK_POISON | CHK_OPTIONAL | CHK_BWD, THR_ALL, NULL},
    {"edge sizes", "sdpa", gen_edge_sizes, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"large logits x30", "sdpa", gen_large_logits, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"empty rows", "sdpa", gen_empty_rows, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"nan poison", "sdpa", gen_poison, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"plan/execute", "sdpa", gen_plan_execute, CHK_POISON | CHK_PLAN | CHK_BWD, THR_ALL, NULL},

    {"threads 1/2/4/3/0", "threads", gen_threads, CHK_THREADS, THR_ALL, NULL},
    {"concurrent pthreads", "threads", gen_concurrent, CHK_PTHREADS, THR_ALL, NULL},
    {"caller openmp region", "threads", gen_openmp_region, CHK_OPENMP, THR_ALL, NULL},

    {"split-K (decode)", "paths", gen_split_k, CHK_THREADS | CHK_POISON, THR_124, NULL},
    {"gqa stacking", "paths", gen_gqa_stacking, CHK_THREADS | CHK_POISON | CHK_BWD, THR_124,
     NULL},
    {"blocks, tiles, diagonal", "paths", gen_uneven_tiles,
     CHK_THREADS | CHK_POISON | CHK_BWD, THR_124,
     NULL},
    {"nan in visible data", "paths", NULL, 0, THR_124, test_nan_visible},

    {"random", "random", gen_random, CHK_POISON | CHK_BWD, THR_ALL, NULL},
    {"types", "types", gen_types, CHK_POISON | CHK_THREADS | CHK_OPTIONAL | CHK_BWD, THR_124, NULL},
    {"sparse mixed types", "types", NULL, 0, THR_124, test_sparse_mixed_types},
    {"typed backward", "types", NULL, 0, THR_ALL, test_bwd_types},

    {"global tokens", "sparse", gen_global,
     CHK_POISON | CHK_THREADS | CHK_DENSE | CHK_BWD, THR_ALL, NULL},
    {"scattered global queries", "sparse", gen_global_scattered,
     CHK_POISON | CHK_THREADS | CHK_DENSE | CHK_BWD | CHK_OPTIONAL, THR_ALL, NULL},
    {"block layouts", "sparse", gen_layout_rows,
     CHK_POISON | CHK_THREADS | CHK_DENSE | CHK_BWD, THR_ALL, NULL},
    {"sparse combined", "sparse", gen_sparse_combined,
     CHK_POISON | CHK_THREADS | CHK_DENSE | CHK_BWD | CHK_PLAN | CHK_OPTIONAL, THR_ALL, NULL},
    {"layout builders", "sparse", NULL, 0, THR_ALL, test_layout_builders},
    {"sparse dropout", "sparse", NULL, 0, THR_ALL, test_sparse_dropout},
    {"sparse nan in visible data", "sparse", NULL, 0, THR_ALL, test_sparse_nan_visible},
};
const int tfamily_count = (int)COUNT(tfamilies);
