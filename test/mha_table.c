/*
 * mha_table.c -- the rows of the multi-head attention layer tests: each
 * family either a list of rows written out (ROW: the columns that differ
 * from MCASE_DEFAULTS) or a generator for a cross product or random rows.
 * The seeds make every row reproducible; mcase_str prints a failing row.
 *
 * To add a row, append it to a family's list (or a family to `families`);
 * to add a column, see mha_case.h; to add a check, see test_mha.c.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

#include "harness.h"
#include "mha_case.h"
#include "mha_table.h"

/* A row written out: slow, then the shape and the columns that differ from
 * the defaults (MCASE in mha_case.h). */
#define ROW(slow_, ...) { .slow = (slow_), .c = MCASE(__VA_ARGS__) }
#define PH .weights = ATTN_WEIGHTS_PER_HEAD
#define AVG .weights = ATTN_WEIGHTS_AVERAGED
#define BR .align = ATTN_ALIGN_BOTTOM_RIGHT
#define KEEP ATTN_MASK_KEEP_NONZERO
#define DROP ATTN_MASK_DROP_NONZERO

MCASE_ROWS_BEGIN

static const mrow no_bias_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), .has_bias = 0, PH, .seed = 1400),
    ROW(0, SELF(2, 6, 16, 4, 0), .has_bias = 0, AVG, .seed = 1401),
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 7, .vdim = 11, .has_bias = 0, PH, .seed = 1402),
    ROW(0, CROSS(2, 5, 9, 16, 2), .packed = 1, .has_bias = 0, AVG, .seed = 1403),
    ROW(0, SELF(2, 6, 16, 4, 0), .Hkv = 2, .has_bias = 0, PH, .seed = 1404),
    ROW(0, SELF(1, 140, 16, 2, 1), .has_bias = 0, AVG, .seed = 1405),
};

/* causal (wr = 0) unless a band is given */
static const mrow causal_rows[] = {
    ROW(0, SELF(2, 12, 16, 4, 1), .wr = 0, PH, .seed = 1600),            /* top-left */
    ROW(1, SELF(2, 12, 16, 4, 0), BR, .wr = 0, PH, .seed = 1601),        /* BR, L == S */
    ROW(0, CROSS(2, 5, 12, 16, 4), .wr = 0, AVG, .seed = 1602),          /* TL, L < S */
    ROW(1, CROSS(2, 5, 12, 16, 4), BR, .wr = 0, PH, .seed = 1603),       /* BR, L < S */
    ROW(0, CROSS(2, 12, 5, 16, 2), .wr = 0, PH, .seed = 1604),           /* TL, L > S */
    ROW(1, CROSS(2, 12, 5, 16, 2), BR, .wr = 0, AVG, .seed = 1605),      /* BR: empty rows */
    ROW(0, CROSS(3, 1, 20, 16, 4), BR, .wr = 0, PH, .seed = 1606),       /* decode step */
    ROW(1, CROSS(3, 8, 15, 16, 4), BR, .wr = 0, .use_kv_lens = 1, .kv_lens = { 15, 6, 0 },
        .use_q_lens = 1, .q_lens = { 8, 2, 0 }, PH, .seed = 1607),      /* BR with lengths */
    ROW(0, SELF(3, 10, 16, 4, 1), .wr = 0, .use_kv_lens = 1, .kv_lens = { 10, 10, 0 },
        .use_q_lens = 1, .q_lens = { 10, 3, 6 }, AVG, .seed = 1608),    /* TL with lengths */
    ROW(1, SELF(2, 20, 16, 2, 1), .wl = 3, .wr = 0, PH, .seed = 1609),   /* sliding window */
    ROW(0, CROSS(2, 9, 14, 16, 2), BR, .wl = 2, .wr = 1, PH, .seed = 1610), /* BR band */
    ROW(1, SELF(1, 140, 16, 2, 1), .wr = 0, .kpm_mode = DROP, AVG,
        .seed = 1611),                                                  /* 2 row blocks */
};

/* NaN in every gap of x, key and value; sentinels in those of out */
static const mrow stride_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), .xs = 19, .os = 21, PH, .seed = 1900),
    ROW(0, SELF(2, 6, 16, 4, 0), .xs = 17, .os = 32, AVG, .seed = 1901),
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 10, .vdim = 6, .xs = 18, .ks = 15, .vs = 7,
        .os = 23, PH, .seed = 1902),
    ROW(0, CROSS(2, 5, 9, 16, 2), .packed = 1, .xs = 20, .ks = 20, .vs = 25, .os = 17, AVG,
        .seed = 1903),
    ROW(0, CROSS(2, 4, 11, 32, 8), .Hkv = 2, .kdim = 12, .vdim = 12, .ks = 13, .vs = 40,
        .os = 33, PH, .seed = 1904),
    ROW(0, CROSS(2, 4, 11, 16, 4), .kdim = 5, .vdim = 3, .xs = 16, .ks = 5, .vs = 3,
        .os = 16, AVG, .seed = 1905),                   /* strides equal to the rows */
    ROW(0, SELF(2, 70, 16, 4, 1), .xs = 19, .os = 20, .kpm_mode = DROP, PH,
        .seed = 1906),                                  /* 2 row blocks */
    ROW(0, CROSS(1, 3, 150, 8, 2), .kdim = 4, .ks = 9, .vs = 11, .os = 9, AVG,
        .seed = 1907),                                  /* strided keys, 2 row blocks */
};

static const mrow scale_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), .scale = 0.3f, PH, .seed = 2100),
    ROW(0, CROSS(2, 5, 9, 16, 4), .scale = -0.7f, PH, .seed = 2101),
    ROW(0, SELF(2, 6, 16, 4, 1), .scale = 0.0f, PH, .seed = 2102),
    ROW(0, CROSS(2, 5, 9, 16, 4), .scale = 2.5f, PH, .seed = 2103),
    ROW(0, SELF(2, 6, 16, 4, 1), .scale = 1e-3f, PH, .seed = 2104),
};

/* larger shapes, for threads 1/2/3/4/0 (CK_THREADS) */
static const mrow thread_rows[] = {
    ROW(0, SELF(2, 70, 32, 4, 1), .kpm_mode = DROP, AVG, .seed = 2200),
    ROW(0, CROSS(2, 40, 150, 32, 8), .Hkv = 2, .kdim = 24, .vdim = 40, .mask_mode = KEEP,
        .mask_bcast = BC_HEAD, .mask_keep = 0.9, .kpm_mode = DROP, .use_bias = 1,
        .use_kv_lens = 1, .kv_lens = { 150, 74 }, PH, .seed = 2201),
    ROW(0, SELF(3, 50, 16, 2, 0), BR, .wr = 0, .use_q_lens = 1, .q_lens = { 50, 14, 50 },
        AVG, .xs = 20, .os = 18, .seed = 2202),
};

/* caller workspaces (CK_WORKSPACE) */
static const mrow workspace_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), .seed = 2300),                        /* fused */
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 7, AVG, .seed = 2301),       /* separate, cross */
    ROW(0, SELF(2, 6, 16, 4, 0), .mask_mode = KEEP, .kpm_mode = DROP, PH,
        .seed = 2302),                                                 /* combined mask */
    ROW(0, SELF(2, 6, 16, 4, 0), .mask_mode = KEEP, .mask_bcast = BC_HEAD, .kpm_mode = DROP,
        AVG, .seed = 2303),                                            /* head broadcast */
    ROW(0, CROSS(1, 3, 140, 16, 4), .Hkv = 1, .ks = 20, .os = 17, .seed = 2304), /* GQA */
};

/* the backward (CK_BACKWARD): every layout and option, then larger shapes
 * with several row blocks and weight-row blocks for the thread check */
static const mrow backward_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), .seed = 2400),                          /* fused */
    ROW(0, SELF(2, 6, 16, 4, 0), .seed = 2401),                          /* separate */
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 7, .vdim = 11, .seed = 2402),  /* kdim, vdim */
    ROW(0, CROSS(2, 5, 9, 16, 2), .packed = 1, .seed = 2403),            /* packed cross */
    ROW(0, SELF(2, 6, 16, 4, 1), .has_bias = 0, .seed = 2404),
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 7, .has_bias = 0, .seed = 2405),
    ROW(0, SELF(2, 6, 16, 4, 0), .Hkv = 2, .seed = 2406),                /* GQA */
    ROW(0, CROSS(2, 5, 9, 32, 8), .Hkv = 1, .kdim = 12, .vdim = 5, .seed = 2407), /* MQA */
    ROW(0, SELF(2, 12, 16, 4, 1), .wr = 0, .seed = 2408),                /* causal */
    ROW(0, CROSS(2, 9, 14, 16, 2), BR, .wl = 2, .wr = 1, .seed = 2409),  /* BR band */
    ROW(0, CROSS(2, 12, 5, 16, 2), BR, .wr = 0, .seed = 2410),           /* empty rows */
    ROW(0, SELF(2, 7, 16, 4, 0), .kpm_mode = DROP, .seed = 2411),        /* key padding */
    ROW(0, SELF(2, 7, 16, 4, 0), .mask_mode = KEEP, .kpm_mode = DROP,
        .seed = 2412),                                                   /* combined mask */
    ROW(0, CROSS(2, 5, 8, 16, 4), .mask_mode = DROP, .mask_bcast = BC_HEAD, .use_bias = 1,
        .bias_ninf = 0.1, .seed = 2413),                                 /* mask and bias */
    ROW(0, CROSS(2, 5, 8, 16, 4), .use_bias = 1, .bias_bcast = BC_BATCH | BC_SEQ,
        .seed = 2414),                                                   /* broadcast bias */
    ROW(0, CROSS(3, 6, 9, 16, 4), .use_kv_lens = 1, .kv_lens = { 9, 4, 0 }, .use_q_lens = 1,
        .q_lens = { 6, 2, 3 }, .seed = 2415),                            /* lengths */
    ROW(0, SELF(3, 8, 16, 4, 1), .use_kv_lens = 1, .kv_lens = { 8, 3, 8 }, .use_q_lens = 1,
        .q_lens = { 8, 8, 0 }, .seed = 2416),
    ROW(0, SELF(2, 6, 16, 4, 1), .xs = 19, .os = 21, .seed = 2417),      /* strides */
    ROW(0, CROSS(2, 5, 9, 16, 4), .kdim = 10, .vdim = 6, .xs = 18, .ks = 15, .vs = 7,
        .os = 23, .seed = 2418),
    ROW(0, SELF(2, 6, 16, 4, 0), .scale = 2.5f, .seed = 2419),           /* scale */
    ROW(0, SELF(2, 6, 16, 4, 1), PH, .seed = 2420),                      /* weights too */
    ROW(1, SELF(2, 150, 128, 4, 1), .kpm_mode = DROP, .xs = 130, .seed = 2421),
    ROW(1, CROSS(2, 70, 150, 64, 8), .Hkv = 2, .kdim = 24, .vdim = 40, .use_kv_lens = 1,
        .kv_lens = { 150, 74 }, .mask_mode = KEEP, .mask_bcast = BC_HEAD, .kpm_mode = DROP,
        .use_bias = 1, .seed = 2422),
};

/* dropout on the attention weights (p = 0.1 and 0.5; one p = 1): every
 * layout and option against the reference with the keep mask of
 * attn_dropout_mask_fill, threads 1/2/3/4/0 bitwise, out bitwise the same
 * in every weights mode, the backward (CK_BACKWARD on every row); under
 * ATTN_TEST_QUICK=1 (valgrind) four of them: fused, packed cross, causal,
 * lengths */
#define DRP(p_, s_, o_) .dropout_p = (p_), .drop_seed = (s_), .drop_offset = (o_)
static const mrow dropout_rows[] = {
    ROW(0, SELF(2, 6, 16, 4, 1), DRP(0.1, 7, 0), PH, .seed = 2600),       /* fused */
    ROW(1, SELF(2, 6, 16, 4, 0), DRP(0.5, 7, 1), AVG, .seed = 2601),      /* separate */
    ROW(1, CROSS(2, 5, 9, 16, 4), .kdim = 7, .vdim = 11, DRP(0.1, 12345, 3), PH,
        .seed = 2602),                                                    /* cross */
    ROW(0, CROSS(2, 5, 9, 16, 2), .packed = 1, DRP(0.5, 99, 0), AVG, .seed = 2603),
    ROW(1, SELF(2, 9, 32, 8, 0), .Hkv = 2, DRP(0.1, 5, 8), PH, .seed = 2604), /* GQA */
    ROW(1, CROSS(2, 6, 11, 32, 8), .Hkv = 1, .kdim = 20, .vdim = 12, DRP(0.5, 5, 9), AVG,
        .seed = 2605),                                                    /* MQA */
    ROW(0, SELF(2, 12, 16, 4, 1), .wr = 0, DRP(0.5, 0xDEADBEEFCAFEull, (uint64_t)1 << 40), PH,
        .seed = 2606),                                                    /* causal */
    ROW(1, CROSS(2, 5, 12, 16, 4), BR, .wr = 0, DRP(0.1, 1, 2), AVG, .seed = 2607),
    ROW(1, CROSS(2, 12, 5, 16, 2), BR, .wr = 0, DRP(0.5, 1, 2), PH, .seed = 2608), /* empty rows */
    ROW(1, SELF(2, 7, 16, 4, 0), .kpm_mode = DROP, DRP(0.1, 42, 42), PH,
        .seed = 2609),                                                    /* key padding */
    ROW(1, SELF(2, 7, 16, 4, 1), .kpm_mode = KEEP, DRP(0.5, 42, 43), AVG, .seed = 2610),
    ROW(1, SELF(2, 7, 16, 4, 0), .mask_mode = KEEP, .kpm_mode = DROP, DRP(0.5, 3, 0), AVG,
        .seed = 2611),                                                    /* combined mask */
    ROW(1, CROSS(2, 5, 8, 16, 4), .mask_mode = DROP, .mask_bcast = BC_HEAD, .use_bias = 1,
        .bias_ninf = 0.1, DRP(0.1, 3, 1), PH, .seed = 2612),              /* mask and bias */
    ROW(0, CROSS(3, 6, 9, 16, 4), .use_kv_lens = 1, .kv_lens = { 9, 4, 0 }, .use_q_lens = 1,
        .q_lens = { 6, 2, 3 }, DRP(0.5, 8, 8), PH, .seed = 2613),         /* lengths */
    ROW(1, CROSS(2, 5, 9, 16, 4), .kdim = 10, .vdim = 6, .xs = 18, .ks = 15, .vs = 7,
        .os = 23, DRP(0.1, 11, 0), AVG, .seed = 2614),                    /* strides */
    ROW(1, SELF(2, 6, 16, 4, 1), .has_bias = 0, .scale = 0.7f, DRP(0.5, 13, 0), PH,
        .seed = 2615),                                                    /* no bias, scale */
    ROW(1, SELF(2, 6, 16, 4, 1), DRP(1.0, 7, 0), PH, .seed = 2616),       /* p = 1 */
    ROW(1, SELF(2, 70, 32, 4, 1), .kpm_mode = DROP, DRP(0.1, 21, 5), AVG,
        .seed = 2617),                                                    /* 2 row blocks */
    ROW(1, CROSS(2, 40, 150, 32, 8), .Hkv = 2, .kdim = 24, .vdim = 40, .mask_mode = KEEP,
        .mask_bcast = BC_HEAD, .mask_keep = 0.9, .kpm_mode = DROP, .use_bias = 1,
        .use_kv_lens = 1, .kv_lens = { 150, 74 }, DRP(0.5, 77, 1), PH, .seed = 2618),
};
#undef DRP

/* sparse attention: global tokens (Longformer-like, with a window), block
 * layouts (broadcast and per head, several block sizes), both, with GQA,
 * masks, lengths, weights; the backward on every row (mha_rows) */
static const mrow sparse_rows[] = {
    ROW(0, SELF(2, 40, 16, 4, 1), .use_gk = 1, .use_gq = 1, .wl = 4, .wr = 4, PH, .seed = 2700),
    ROW(0, CROSS(2, 37, 50, 16, 4), .use_gk = 1, BR, .wr = 0, AVG, .seed = 2701),
    ROW(0, SELF(2, 70, 32, 4, 0), .bs = 16, .Hkv = 2, PH, .seed = 2702),
    ROW(1, CROSS(2, 45, 70, 32, 8), .bs = 32, .lay_per_head = 1, .Hkv = 2, .kdim = 20,
        .mask_mode = KEEP, .mask_bcast = BC_HEAD, .kpm_mode = DROP, AVG, .seed = 2703),
    ROW(1, SELF(2, 90, 16, 2, 1), .bs = 64, .lay_per_head = 1, .use_gq = 1, .wr = 0,
        .use_kv_lens = 1, .kv_lens = { 90, 41 }, .use_q_lens = 1, .q_lens = { 90, 50 }, PH,
        .seed = 2704),
    ROW(1, CROSS(2, 33, 40, 16, 4), .bs = 16, .use_gk = 1, .use_gq = 1, .wl = 6, .wr = 2,
        .use_bias = 1, .bias_ninf = 0.05, .mask_mode = DROP, .seed = 2705),
};

MCASE_ROWS_END

/* ------------------------------------------------------------ generators */

typedef struct mrows {
    mrow *v;
    size_t n, cap;
} mrows;

static void add(mrows *rs, const char *family, unsigned checks, int slow, const mcase *c)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 256;
        rs->v = realloc(rs->v, rs->cap * sizeof *rs->v);
        if (!rs->v) {
            fprintf(stderr, "mha_table: out of memory\n");
            abort();
        }
    }
    mrow *r = &rs->v[rs->n++];
    r->family = family;
    r->checks = checks;
    r->slow = slow;
    r->c = *c;
}

static void add_list(mrows *rs, const char *family, unsigned checks, const mrow *list,
                     size_t n)
{
    for (size_t i = 0; i < n; i++)
        add(rs, family, checks | list[i].checks, list[i].slow, &list[i].c);
}

#define ADD_LIST(rs, family, checks, list)                                   \
    add_list(rs, family, checks, list, sizeof list / sizeof list[0])

/* Self-attention shapes {B, L, E, H}; several GEMM row blocks (128 rows)
 * when B * L > 128.  Without and with key padding and weights. */
static void gen_self(mrows *rs, int packed, const char *family, uint64_t seed)
{
    static const int64_t shapes[][4] = {
        { 2, 5, 16, 4 }, { 1, 1, 8, 1 }, { 2, 9, 12, 3 }, { 3, 50, 32, 4 },
        { 1, 130, 8, 2 }, { 2, 17, 64, 8 },
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = mc_self(x[0], x[1], x[2], x[3], packed);
            c.seed = seed + 10 * s + (uint64_t)k;
            if (k == 0) {
                c.weights = packed ? ATTN_WEIGHTS_PER_HEAD : ATTN_WEIGHTS_NONE;
            } else {
                c.kpm_mode = packed ? DROP : KEEP;
                c.weights = packed ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            }
            add(rs, family, 0, s >= 4, &c);
        }
}

/* Cross-attention {B, L, S, E, H, kdim, vdim, Hkv} (0 = default), separate
 * or packed weights; each per-head weights, then averaged with key padding. */
static void gen_cross(mrows *rs, const char *family, const int64_t (*shapes)[8], size_t n,
                      int packed, int kpm, uint64_t seed)
{
    for (size_t s = 0; s < n; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = mc_cross(x[0], x[1], x[2], x[3], x[4]);
            c.packed = packed;
            c.kdim = x[5];
            c.vdim = x[6];
            c.Hkv = x[7];
            c.seed = seed + 10 * s + (uint64_t)k;
            c.weights = k ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
            if (k)
                c.kpm_mode = kpm;
            add(rs, family, 0, s >= 3, &c);
        }
}

static const int64_t cross_dims[][8] = {
    { 2, 7, 13, 24, 4, 10, 17, 0 },
    { 1, 3, 40, 16, 2, 5, 33, 0 },
    { 2, 1, 9, 8, 8, 3, 2, 0 },      /* dh = 1 */
    { 1, 6, 6, 12, 2, 12, 20, 0 },   /* kdim given equal to E */
    { 3, 20, 150, 32, 4, 48, 7, 0 }, /* 450 key rows: 4 row blocks */
};

static const int64_t cross_packed[][8] = {
    { 2, 7, 13, 24, 4, 0, 0, 0 },
    { 1, 5, 3, 16, 2, 16, 16, 2 },   /* kdim, vdim and Hkv given explicitly */
    { 1, 1, 1, 4, 1, 0, 0, 0 },
    { 2, 64, 70, 32, 8, 0, 0, 0 },
};

/* {B, L, S, E, H, Hkv, self, kdim, vdim}; per-head weights, then averaged
 * with key padding and bottom-right causal. */
static void gen_gqa(mrows *rs, const char *family)
{
    static const int64_t shapes[][9] = {
        { 2, 9, 9, 32, 8, 2, 1, 0, 0 },
        { 2, 6, 11, 32, 8, 1, 0, 20, 12 },   /* MQA */
        { 1, 40, 40, 48, 6, 3, 1, 0, 0 },
        { 2, 5, 30, 64, 16, 4, 0, 64, 64 },
        { 1, 3, 200, 16, 4, 2, 0, 9, 9 },    /* 200 key rows: 2 row blocks */
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int k = 0; k < 2; k++) {
            const int64_t *x = shapes[s];
            mcase c = x[6] ? mc_self(x[0], x[1], x[3], x[4], 0)
                           : mc_cross(x[0], x[1], x[2], x[3], x[4]);
            c.Hkv = x[5];
            c.kdim = x[7];
            c.vdim = x[8];
            c.seed = 1500 + 10 * s + (uint64_t)k;
            c.weights = ATTN_WEIGHTS_PER_HEAD;
            if (k) {
                c.weights = ATTN_WEIGHTS_AVERAGED;
                c.kpm_mode = DROP;
                c.align = ATTN_ALIGN_BOTTOM_RIGHT;
                c.wr = 0;
            }
            add(rs, family, 0, s >= 3, &c);
        }
}

/* Key padding, element mask and float bias, alone and combined, both
 * polarities, with and without broadcasting; the base alternates between
 * self packed and cross with its own kdim/vdim. */
static mcase kp_base(int i)
{
    return i % 2 ? mc_self(2, 7, 16, 4, 1) : mc_cross(2, 6, 9, 16, 4);
}

/* With key padding kpm, weights alternating, the next seed. */
static void kp_add(mrows *rs, const char *family, mcase *c, int kpm, uint64_t *idx, int slow)
{
    c->kpm_mode = kpm;
    c->weights = *idx % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
    c->seed = 1700 + (*idx)++;
    add(rs, family, 0, slow, c);
}

static void gen_key_padding(mrows *rs, const char *family)
{
    const int modes[2] = { KEEP, DROP };
    uint64_t idx = 0;
    for (int km = 0; km < 2; km++) /* key padding alone */
        for (int b = 0; b < 2; b++) {
            mcase c = kp_base(b);
            if (!c.self) {
                c.kdim = 12;
                c.vdim = 20;
            }
            c.kpm_mode = modes[km];
            c.weights = ATTN_WEIGHTS_PER_HEAD;
            c.seed = 1700 + idx++;
            add(rs, family, 0, 0, &c);
        }
    static const int bcs[] = { 0, BC_HEAD, BC_BATCH | BC_HEAD, BC_SEQ, BC_BATCH | BC_SEQ };
    for (int mm = 0; mm < 2; mm++) /* element mask, alone or with key padding */
        for (int km = -1; km < 2; km++)
            for (int bi = 0; bi < 5; bi++) {
                mcase c = kp_base((int)idx);
                c.mask_mode = modes[mm];
                c.mask_bcast = bcs[bi];
                c.mask_keep = 0.8;
                kp_add(rs, family, &c, km < 0 ? ATTN_MASK_NONE : modes[km], &idx, bi >= 2);
            }
    static const int bbcs[] = { 0, BC_HEAD, BC_BATCH | BC_HEAD | BC_SEQ };
    for (int km = -1; km < 2; km++) /* additive bias, alone or with key padding */
        for (int bi = 0; bi < 3; bi++) {
            mcase c = kp_base((int)idx);
            c.use_bias = 1;
            c.bias_bcast = bbcs[bi];
            c.bias_ninf = 0.1;
            kp_add(rs, family, &c, km < 0 ? ATTN_MASK_NONE : modes[km], &idx, 0);
        }
    for (int k = 0; k < 4; k++) { /* all three, lengths, causal; sparse (empty rows) */
        mcase c = kp_base(k);
        trng r;
        trng_seed(&r, 1790 + (uint64_t)k);
        c.mask_mode = modes[k % 2];
        c.mask_bcast = k < 2 ? 0 : BC_HEAD;
        c.kpm_mode = modes[k / 2];
        c.use_bias = 1;
        c.bias_bcast = k % 2 ? BC_BATCH : 0;
        c.bias_ninf = 0.05;
        c.mask_keep = k == 3 ? 0.3 : 0.8;
        c.kpm_keep = k == 3 ? 0.4 : 0.8;
        mcase_set_lens(&c, &r, 1, k >= 2);
        c.wr = k == 1 ? 0 : -1;
        c.weights = k % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        c.seed = 1700 + idx++;
        add(rs, family, 0, 0, &c);
    }
}

/* kv_lens and q_lens, alone and together, with explicit zeros */
static void gen_lengths(mrows *rs, const char *family)
{
    trng r;
    trng_seed(&r, 1800);
    for (int k = 0; k < 8; k++) {
        mcase c = k < 4 ? mc_self(3, 10, 16, 4, k % 2) : mc_cross(3, 6, 14, 16, 2);
        if (!c.self) {
            c.kdim = 9;
            c.vdim = 13;
        }
        mcase_set_lens(&c, &r, k % 4 != 1, k % 4 != 0);
        if (k == 3 || k == 7) { /* explicit zeros */
            if (c.use_kv_lens)
                c.kv_lens[1] = 0;
            if (c.use_q_lens)
                c.q_lens[2] = 0;
        }
        if (k == 6)
            c.kpm_mode = DROP;
        c.weights = k % 2 ? ATTN_WEIGHTS_AVERAGED : ATTN_WEIGHTS_PER_HEAD;
        c.seed = 1800 + (uint64_t)k;
        add(rs, family, 0, 0, &c);
    }
}

/* Four bases, each with weights NONE, PER_HEAD and AVERAGED (CK_WEIGHTS) */
static void gen_weights(mrows *rs, const char *family)
{
    trng r;
    trng_seed(&r, 2000);
    for (int k = 0; k < 4; k++)
        for (int wm = 0; wm < 3; wm++) {
            mcase c;
            switch (k) {
            case 0:
                c = mc_self(2, 6, 16, 4, 1);
                c.kpm_mode = DROP;
                break;
            case 1:
                c = mc_cross(2, 5, 8, 16, 4);
                c.kdim = 7;
                mcase_set_lens(&c, &r, 0, 1);
                c.q_lens[1] = 2;
                break;
            case 2:
                c = mc_self(2, 4, 8, 1, 0); /* H = 1: averaged == per head */
                break;
            default:
                c = mc_cross(2, 5, 12, 32, 8);
                c.Hkv = 2;
                c.mask_mode = DROP;
                c.mask_bcast = BC_BATCH;
                c.mask_keep = 0.7;
                break;
            }
            c.weights = wm;
            c.seed = 2000 + 10 * (uint64_t)k;
            add(rs, family, CK_WEIGHTS, 0, &c);
        }
}

/* Random combinations of every column; the first 25 under ATTN_TEST_QUICK. */
static void gen_random(mrows *rs, const char *family)
{
    trng r;
    trng_seed(&r, 2400);
    static const int64_t heads[] = { 1, 2, 3, 4, 6, 8 };
    for (int k = 0; k < 1500; k++) {
        const int64_t H = heads[trng_int(&r, 0, 5)], dh = trng_int(&r, 1, 8);
        const int64_t B = trng_int(&r, 1, 3), L = trng_int(&r, 1, 20);
        int64_t Hkv;
        do
            Hkv = trng_int(&r, 1, H);
        while (H % Hkv != 0);
        mcase c;
        if (trng_bool(&r, 0.5)) {
            c = mc_self(B, L, H * dh, H, 0);
        } else {
            c = mc_cross(B, L, trng_int(&r, 1, 25), H * dh, H);
            if (trng_bool(&r, 0.6)) {
                c.kdim = trng_int(&r, 1, 20);
                c.vdim = trng_int(&r, 1, 20);
            }
        }
        c.Hkv = trng_bool(&r, 0.5) ? Hkv : 0;
        const int64_t kd = c.kdim ? c.kdim : c.E, vd = c.vdim ? c.vdim : c.E;
        if ((c.Hkv == 0 || c.Hkv == H) && kd == c.E && vd == c.E)
            c.packed = trng_bool(&r, 0.5);
        c.has_bias = trng_bool(&r, 0.7);
        if (trng_bool(&r, 0.3))
            c.xs = c.E + trng_int(&r, 0, 5);
        if (!c.self && trng_bool(&r, 0.3))
            c.ks = kd + trng_int(&r, 0, 5);
        if (!c.self && trng_bool(&r, 0.3))
            c.vs = vd + trng_int(&r, 0, 5);
        if (trng_bool(&r, 0.3))
            c.os = c.E + trng_int(&r, 0, 5);
        if (trng_bool(&r, 0.2))
            c.scale = (float)trng_uniform(&r, -1.0, 1.5);
        c.align = (int)trng_int(&r, 0, 1);
        c.wl = trng_bool(&r, 0.6) ? -1 : trng_int(&r, 0, 6);
        c.wr = trng_bool(&r, 0.5) ? -1 : trng_int(&r, 0, 3);
        mcase_set_lens(&c, &r, trng_bool(&r, 0.3), trng_bool(&r, 0.3));
        c.mask_mode = (int)trng_int(&r, 0, 2);
        c.mask_bcast = (int)trng_int(&r, 0, 7);
        c.mask_keep = trng_uniform(&r, 0.5, 1.0);
        c.use_bias = trng_bool(&r, 0.3);
        c.bias_bcast = (int)trng_int(&r, 0, 7);
        c.bias_ninf = trng_bool(&r, 0.5) ? 0.0 : 0.1;
        c.kpm_mode = (int)trng_int(&r, 0, 2);
        c.kpm_keep = trng_uniform(&r, 0.5, 1.0);
        c.weights = (int)trng_int(&r, 0, 2);
        c.in_mag = trng_uniform(&r, 0.5, 3.0);
        c.seed = 2400 + (uint64_t)k;
        add(rs, family, 0, k >= 25, &c);
    }
}

/* ----------------------------------------------------------- 16-bit rows */

/* Larger shapes for the BF16 products: several strips of the packed
 * weights with a partial last one (3E, kvE not multiples of 32), odd and
 * even K (E, kdim, vdim), L and S past the decode path (16) and past one
 * row block (128), GQA, causal, masks, lengths, weights, strides; threads
 * 1/2/3/4/0 bitwise (CK_THREADS). */
MCASE_ROWS_BEGIN
static const mrow bf16_rows[] = {
    ROW(0, SELF(2, 70, 64, 4, 1), PH, .seed = 2800),
    ROW(0, SELF(1, 150, 48, 3, 0), .wr = 0, AVG, .seed = 2801),
    ROW(0, CROSS(2, 40, 90, 40, 4), .kdim = 33, .vdim = 17, .kpm_mode = DROP, PH, .seed = 2802),
    ROW(0, CROSS(2, 33, 140, 64, 8), .Hkv = 2, .kdim = 24, .vdim = 40, .mask_mode = KEEP,
        .mask_bcast = BC_HEAD, .mask_keep = 0.9, .use_bias = 1, .use_kv_lens = 1,
        .kv_lens = { 140, 61 }, AVG, .seed = 2803),
    ROW(0, CROSS(1, 20, 30, 96, 6), .packed = 1, .xs = 101, .ks = 99, .vs = 96, .os = 97, PH,
        .seed = 2804),
    ROW(0, SELF(3, 50, 32, 2, 1), BR, .wl = 8, .wr = 0, .use_q_lens = 1,
        .q_lens = { 50, 17, 0 }, .has_bias = 0, .seed = 2805),
    ROW(0, SELF(2, 64, 64, 8, 0), .Hkv = 4, .in_mag = 3.0, .scale = 0.5f, AVG, .seed = 2806),
    ROW(1, SELF(1, 260, 128, 2, 1), .kpm_mode = KEEP, .seed = 2807),
};
MCASE_ROWS_END

/* Pairs (x_type, w_type) of the mixed rows. */
static const int mixed_types[][2] = {
    { ATTN_DTYPE_BF16, ATTN_DTYPE_F32 }, { ATTN_DTYPE_F32, ATTN_DTYPE_BF16 },
    { ATTN_DTYPE_F16, ATTN_DTYPE_BF16 }, { ATTN_DTYPE_BF16, ATTN_DTYPE_F16 },
    { ATTN_DTYPE_F32, ATTN_DTYPE_F16 },  { ATTN_DTYPE_F16, ATTN_DTYPE_F32 },
};

/* Every row of rs[from, to) again at x_type and w_type t (family fam). */
static void add_typed(mrows *rs, size_t from, size_t to, const char *fam, int xt, int wt)
{
    for (size_t i = from; i < to; i++) {
        mcase c = rs->v[i].c;
        c.xt = xt;
        c.wt = wt;
        add(rs, fam, rs->v[i].checks, rs->v[i].slow, &c);
    }
}

/* ----------------------------------------------------------------- table */

static void build_table(mrows *rs)
{
    gen_self(rs, 1, "self, packed (fused)", 1000);
    gen_self(rs, 0, "self, separate weights", 1100);
    gen_cross(rs, "cross, kdim/vdim != E", cross_dims, 5, 0, DROP, 1200);
    gen_cross(rs, "cross, packed in_proj", cross_packed, 4, 1, KEEP, 1300);
    ADD_LIST(rs, "no bias (has_bias = 0)", 0, no_bias_rows);
    gen_gqa(rs, "GQA (num_kv_heads < H)");
    ADD_LIST(rs, "causal / window", 0, causal_rows);
    gen_key_padding(rs, "key padding / masks / bias");
    gen_lengths(rs, "kv_lens / q_lens");
    ADD_LIST(rs, "row strides (NaN gaps)", 0, stride_rows);
    gen_weights(rs, "weights NONE/PER_HEAD/AVG");
    ADD_LIST(rs, "custom scale", 0, scale_rows);
    gen_random(rs, "random mix");
    ADD_LIST(rs, "threads 1/2/3/4/0", CK_THREADS | CK_WEIGHTS, thread_rows);
    ADD_LIST(rs, "caller workspace", CK_WORKSPACE | CK_WEIGHTS, workspace_rows);
    ADD_LIST(rs, "backward", CK_BACKWARD, backward_rows);
    ADD_LIST(rs, MHA_DROPOUT_FAMILY, CK_THREADS | CK_WEIGHTS, dropout_rows);
    ADD_LIST(rs, "sparse (global tokens, layouts)", CK_THREADS | CK_WEIGHTS, sparse_rows);

    /* 16-bit types: every fixed row (all but the random mix and the
     * backward family) at BF16 and at F16; the BF16 products' larger
     * shapes at BF16 and F16; the fixed rows in turn at each mixed pair;
     * one random row in 6 at a random pair (F32 / F32 left out). */
    const size_t n32 = rs->n;
    size_t fixed_end = 0, rnd_from = 0, rnd_to = 0;
    for (size_t i = 0; i < n32; i++) {
        if (!strcmp(rs->v[i].family, "random mix")) {
            if (!rnd_to)
                rnd_from = i;
            rnd_to = i + 1;
        }
        if (!fixed_end && !strcmp(rs->v[i].family, "random mix"))
            fixed_end = i;
    }
    static const char *const fam16[] = { "BF16: the fixed rows", "F16: the fixed rows" };
    static const int t16[] = { ATTN_DTYPE_BF16, ATTN_DTYPE_F16 };
    for (int k = 0; k < 2; k++) {
        add_typed(rs, 0, fixed_end, fam16[k], t16[k], t16[k]);
        /* the families after the random mix, the backward's left out */
        for (size_t i = rnd_to; i < n32; i++)
            if (strcmp(rs->v[i].family, "backward") != 0)
                add_typed(rs, i, i + 1, fam16[k], t16[k], t16[k]);
    }
    const size_t big = rs->n;
    ADD_LIST(rs, "BF16: larger shapes", CK_THREADS | CK_WEIGHTS, bf16_rows);
    for (size_t i = big; i < rs->n; i++)
        rs->v[i].c.xt = rs->v[i].c.wt = ATTN_DTYPE_BF16;
    add_typed(rs, big, rs->n, "F16: larger shapes", ATTN_DTYPE_F16, ATTN_DTYPE_F16);
    const int nmixed = (int)(sizeof mixed_types / sizeof mixed_types[0]);
    for (size_t i = 0; i < fixed_end; i += 3) {
        const int *m = mixed_types[(i / 3) % (size_t)nmixed];
        add_typed(rs, i, i + 1, "mixed x_type / w_type", m[0], m[1]);
    }
    trng r;
    trng_seed(&r, 2900);
    static const int any[] = { ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16 };
    for (size_t i = rnd_from; i < rnd_to; i += 6) {
        int xt, wt;
        do {
            xt = any[trng_int(&r, 0, 2)];
            wt = any[trng_int(&r, 0, 2)];
        } while (xt == ATTN_DTYPE_F32 && wt == ATTN_DTYPE_F32);
        if (trng_bool(&r, 0.5))   /* half of them at BF16 products */
            xt = wt = ATTN_DTYPE_BF16;
        add_typed(rs, i, i + 1, "16-bit random mix", xt, wt);
    }
}

const mrow *mha_rows(size_t *count)
{
    static mrows table;
    static int built;
    if (!built) {
        mrows all = { NULL, 0, 0 };
        build_table(&all);
        const int quick = tquick();
        for (size_t i = 0; i < all.n; i++)
            if (!(quick && all.v[i].slow)) {
                mrow *r = &all.v[table.n++];
                *r = all.v[i];
                if (r->c.xs || (!r->c.self && (r->c.ks || r->c.vs)))
                    r->checks |= CK_GAPS;
                /* The backward on every row of every family but the random
                 * mix, where one row in 8 (its float64 reference costs more
                 * than the forward's checks; the "backward" family adds
                 * larger shapes and the combinations it needs); 16-bit
                 * rows: no training yet, CK_TYPES instead. */
                if (r->c.xt || r->c.wt) {
                    r->checks &= ~(unsigned)CK_BACKWARD;
                    r->checks |= CK_TYPES;
                } else if (strcmp(r->family, "random mix") != 0 || i % 8 == 0) {
                    r->checks |= CK_BACKWARD;
                }
            }
        table.v = all.v;
        built = 1;
    }
    *count = table.n;
    return table.v;
}
