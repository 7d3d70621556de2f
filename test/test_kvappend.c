/*
 * attn_kv_append against an independently built expected cache, byte for
 * byte.
 *
 * Appends (the table `cases`): contiguous caches ([B][H][m][d], [B][m][H][d]
 * and a view with gaps between rows, heads and batches) and paged pools
 * ([blocks][H][bs][d], [blocks][bs][H][d], with gaps) with block sizes 1,
 * 3 and 16, storage F32, F16, BF16 and mixed K/V types, new rows from
 * BHSD and gapped BSHD views, t from 1 to 17, new_lens NULL (t for all) or
 * per sequence (0 and t among them), several appends in a row starting
 * from uneven lengths, so that runs cross block boundaries and one append
 * can fill several blocks.  The pool's blocks are a shuffled permutation
 * with spare blocks nobody uses, and in every call the table entries of
 * blocks that receive no token hold garbage (-1, INT32_MAX, kv_num_blocks):
 * they must not be read.  The whole cache buffer starts as sentinels, so
 * any byte outside the written rows (gaps, other rows, unused blocks) must
 * keep its sentinel; the buffers are allocated to the exact extent of the
 * view (valgrind and ASan catch any write past them).  Expected values:
 * fp32 bits copied for F32, cvt_ref_from_f32 (the double reference of
 * test_convert) for F16 / BF16; inputs mix random values with NaNs,
 * denormals, -0 and values that overflow F16.
 *
 * Errors (the table `erows`): every status attn.h lists for attn_kv_append,
 * each row one or two changes to a valid base call (paged or contiguous)
 * and the status it must return; afterwards the caches, kv_lens and every
 * input must be bitwise unchanged.  Rows expecting ATTN_OK are the
 * controls next to a boundary (garbage in table entries that are not read,
 * in desc fields that are not K/V's, a length that exactly fills the
 * cache).
 *
 * The appends run at every ATTN_SIMD level (set with setenv before the
 * calls), or only at the one the environment gives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>
#include "cvt_ref.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A new K/V value: mostly ordinary, sometimes a special. */
static float new_value(void)
{
    static const uint32_t special[] = {
        0x7fc00001u, 0xff812345u, 0x00000001u, 0x80400000u, 0x80000000u, 0x477ff000u,
        0xc7800000u, 0x7f800000u, 0x33000000u, 0x3f808000u, 0x387fe001u,
    };
    uint64_t z = next_u64();
    if (z % 7 == 0) {
        float f;
        uint32_t u = special[(z >> 8) % (sizeof special / sizeof special[0])];
        memcpy(&f, &u, sizeof f);
        return f;
    }
    return (float)((double)(int64_t)(z >> 11) / 9007199254740992.0 * 8.0 - 4.0);
}

static size_t type_size(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 ? 4 : 2;
}

/* The stored bits of x (little or big endian alike: as the element type). */
static void store_expected(unsigned char *base, attn_dtype t, int64_t off, float x)
{
    if (t == ATTN_DTYPE_F32) {
        memcpy(base + off * 4, &x, 4);
        return;
    }
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t h = cvt_ref_from_f32(t == ATTN_DTYPE_BF16, u);
    memcpy(base + off * 2, &h, 2);
}

/* Strides of a [outer][H][S][d] tensor in one of the layouts:
 * 0 [outer][H][S][d], 1 [outer][S][H][d], 2 [outer][H][S][d] with gaps. */
static attn_view layout_view(int layout, int64_t H, int64_t S, int64_t d)
{
    attn_view v;
    if (layout == 0) {
        v.seq = d;
        v.head = S * d;
        v.batch = H * S * d;
    } else if (layout == 1) {
        v.head = d;
        v.seq = H * d;
        v.batch = S * H * d;
    } else {
        v.seq = d + 3;
        v.head = S * (d + 3) + 5;
        v.batch = H * v.head + 7;
    }
    return v;
}

/* Elements a view spans (the exact extent). */
static int64_t view_extent(const attn_view *v, int64_t outer, int64_t H, int64_t S, int64_t d)
{
    return (outer - 1) * v->batch + (H - 1) * v->head + (S - 1) * v->seq + d;
}

/* ------------------------------------------------------------- fixture */

#define MAXB 4
#define MAXSTEPS 4

typedef struct kcase {
    const char *name;
    int B, H, dk, dv;
    attn_dtype kt, vt;
    int bs;           /* 0: contiguous */
    int layout;       /* of the cache (layout_view) */
    int src_layout;   /* of k_new / v_new: 0 BHSD, 1 BSHD with gaps */
    int t;
    int per_seq;      /* new_lens given (else NULL) */
    int steps;
} kcase;

typedef struct fixture {
    attn_sdpa_desc desc;
    int64_t m, maxb, nblocks;
    unsigned char *kc, *vc;       /* the caches */
    unsigned char *ke, *ve;       /* what they must hold */
    size_t kbytes, vbytes;
    int32_t *perm;                /* block of (b, J): perm[b * maxb + J] */
    int32_t *table;               /* what the call gets */
    int32_t lens[MAXB], want_lens[MAXB], new_lens[MAXB];
    float *kn, *vn;
    attn_view knv, vnv;
    int64_t kn_count, vn_count;
} fixture;

static int64_t step_len(const kcase *c, int b, int s)
{
    return c->per_seq ? (b * 3 + s * 5 + 1) % (c->t + 1) : c->t;
}

static void fixture_build(fixture *f, const kcase *c)
{
    memset(f, 0, sizeof *f);
    int64_t longest = 0;
    for (int b = 0; b < c->B; b++) {
        /* uneven starting lengths, past a block boundary for some */
        int64_t len = (b * 5 + 1) % (c->bs ? 2 * c->bs + 1 : 7);
        f->lens[b] = f->want_lens[b] = (int32_t)len;
        for (int s = 0; s < c->steps; s++)
            len += step_len(c, b, s);
        if (len > longest)
            longest = len;
    }
    f->m = longest + 2;
    attn_sdpa_desc *d = &f->desc;
    assert_int_equal(attn_sdpa_desc_init(d), ATTN_OK);
    d->batch = c->B;
    d->kv_heads = c->H;
    d->kv_len = f->m;
    d->qk_dim = c->dk;
    d->v_dim = c->dv;
    d->k_type = c->kt;
    d->v_type = c->vt;
    int64_t outer = c->B, S = f->m;
    if (c->bs) {
        f->maxb = (f->m + c->bs - 1) / c->bs + 1;
        f->nblocks = c->B * f->maxb + 3;                    /* 3 spare blocks */
        d->kv_block_size = c->bs;
        d->kv_max_blocks = f->maxb;
        d->kv_num_blocks = f->nblocks;
        outer = f->nblocks;
        S = c->bs;
        f->perm = malloc((size_t)f->nblocks * sizeof *f->perm);
        f->table = malloc((size_t)(c->B * f->maxb) * sizeof *f->table);
        assert_non_null(f->perm);
        assert_non_null(f->table);
        for (int64_t i = 0; i < f->nblocks; i++)
            f->perm[i] = (int32_t)i;
        for (int64_t i = f->nblocks - 1; i > 0; i--) {
            int64_t j = (int64_t)(next_u64() % (uint64_t)(i + 1));
            int32_t tmp = f->perm[i];
            f->perm[i] = f->perm[j];
            f->perm[j] = tmp;
        }
    }
    d->k = layout_view(c->layout, c->H, S, c->dk);
    d->v = layout_view(c->layout, c->H, S, c->dv);
    f->kbytes = (size_t)view_extent(&d->k, outer, c->H, S, c->dk) * type_size(c->kt);
    f->vbytes = (size_t)view_extent(&d->v, outer, c->H, S, c->dv) * type_size(c->vt);
    f->kc = malloc(f->kbytes);
    f->vc = malloc(f->vbytes);
    f->ke = malloc(f->kbytes);
    f->ve = malloc(f->vbytes);
    assert_non_null(f->kc);
    assert_non_null(f->vc);
    assert_non_null(f->ke);
    assert_non_null(f->ve);
    for (size_t i = 0; i < f->kbytes; i++)
        f->kc[i] = f->ke[i] = (unsigned char)(0xA5 ^ (i * 7));
    for (size_t i = 0; i < f->vbytes; i++)
        f->vc[i] = f->ve[i] = (unsigned char)(0x5A ^ (i * 11));
    /* the new rows */
    if (c->src_layout == 0) {
        f->knv = attn_view_bhsd(c->H, c->t, c->dk);
        f->vnv = attn_view_bhsd(c->H, c->t, c->dv);
    } else {
        f->knv = (attn_view){ c->t * c->H * (c->dk + 2) + 1, c->dk + 2, c->H * (c->dk + 2) };
        f->vnv = (attn_view){ c->t * c->H * (c->dv + 2) + 1, c->dv + 2, c->H * (c->dv + 2) };
    }
    f->kn_count = view_extent(&f->knv, c->B, c->H, c->t, c->dk);
    f->vn_count = view_extent(&f->vnv, c->B, c->H, c->t, c->dv);
    f->kn = malloc((size_t)f->kn_count * sizeof *f->kn);
    f->vn = malloc((size_t)f->vn_count * sizeof *f->vn);
    assert_non_null(f->kn);
    assert_non_null(f->vn);
}

static void fixture_free(fixture *f)
{
    free(f->kc);
    free(f->vc);
    free(f->ke);
    free(f->ve);
    free(f->perm);
    free(f->table);
    free(f->kn);
    free(f->vn);
}

/* The table of this step: the entries of blocks that receive a token are
 * the permutation's, every other one garbage. */
static void step_table(fixture *f, const kcase *c, const int64_t *nl)
{
    static const int32_t garbage[] = { -1, INT32_MAX, 0 };
    for (int b = 0; b < c->B; b++)
        for (int64_t J = 0; J < f->maxb; J++) {
            const int64_t first = J * c->bs, last = first + c->bs - 1;
            const int touched =
                nl[b] > 0 && last >= f->want_lens[b] && first < f->want_lens[b] + nl[b];
            const int32_t g = garbage[(b + J) % 3] ? garbage[(b + J) % 3]
                                                   : (int32_t)f->nblocks;
            f->table[b * f->maxb + J] = touched ? f->perm[b * f->maxb + J] : g;
        }
}

/* Write the expected rows of one tensor, addressing the cache from the
 * layout's own formulas. */
static void expect_tensor(fixture *f, const kcase *c, unsigned char *exp, attn_dtype t,
                          const attn_view *cv, const float *src, const attn_view *sv,
                          int64_t dim, const int64_t *nl)
{
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int64_t r = 0; r < nl[b]; r++) {
                const int64_t j = f->want_lens[b] + r;
                int64_t off;
                if (c->bs)
                    off = (int64_t)f->perm[b * f->maxb + j / c->bs] * cv->batch +
                          h * cv->head + (j % c->bs) * cv->seq;
                else
                    off = b * cv->batch + h * cv->head + j * cv->seq;
                for (int64_t x = 0; x < dim; x++)
                    store_expected(exp, t, off + x,
                                   src[b * sv->batch + h * sv->head + r * sv->seq + x]);
            }
}

static const kcase cases[] = {
    { "contig f32 bhsd t1", 2, 2, 8, 5, ATTN_DTYPE_F32, ATTN_DTYPE_F32, 0, 0, 0, 1, 0, 3 },
    { "contig f16 bshd t3 per-seq", 3, 2, 6, 9, ATTN_DTYPE_F16, ATTN_DTYPE_F16, 0, 1, 0, 3, 1, 3 },
    { "contig bf16 gaps t4 per-seq", 2, 3, 5, 4, ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 0, 2, 1, 4, 1,
      3 },
    { "contig f16/bf16 bshd src-gaps t2", 2, 2, 17, 16, ATTN_DTYPE_F16, ATTN_DTYPE_BF16, 0, 1, 1,
      2, 0, 2 },
    { "contig f32/f16 d=1 t5", 1, 1, 1, 1, ATTN_DTYPE_F32, ATTN_DTYPE_F16, 0, 0, 0, 5, 1, 4 },
    { "paged bs1 f16 bhsd t3 per-seq", 2, 2, 8, 8, ATTN_DTYPE_F16, ATTN_DTYPE_F16, 1, 0, 0, 3, 1,
      3 },
    { "paged bs1 bf16 bshd t1", 3, 1, 4, 7, ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 1, 1, 1, 1, 0, 3 },
    { "paged bs3 bf16 bshd t4 per-seq", 2, 2, 6, 5, ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 3, 1, 0, 4,
      1, 4 },
    { "paged bs3 bf16/f32 gaps t7", 3, 2, 9, 3, ATTN_DTYPE_BF16, ATTN_DTYPE_F32, 3, 2, 1, 7, 0, 2 },
    { "paged bs3 f32 bhsd t2 per-seq", 4, 3, 4, 4, ATTN_DTYPE_F32, ATTN_DTYPE_F32, 3, 0, 1, 2, 1,
      4 },
    { "paged bs16 f32 bhsd t5", 2, 2, 8, 8, ATTN_DTYPE_F32, ATTN_DTYPE_F32, 16, 0, 0, 5, 0, 4 },
    { "paged bs16 f16 bshd t17 per-seq", 3, 2, 16, 12, ATTN_DTYPE_F16, ATTN_DTYPE_F16, 16, 1, 1, 17,
      1, 3 },
    { "paged bs16 f16/bf16 gaps t16", 2, 4, 70, 33, ATTN_DTYPE_F16, ATTN_DTYPE_BF16, 16, 2, 0, 16,
      0, 3 },
    { "paged bs16 bf16 bhsd t9 per-seq", 1, 2, 64, 64, ATTN_DTYPE_BF16, ATTN_DTYPE_BF16, 16, 0, 1,
      9, 1, 4 },
};

static void run_case(const kcase *c)
{
    fixture f;
    fixture_build(&f, c);
    long fails = 0;
    for (int s = 0; s < c->steps; s++) {
        int64_t nl[MAXB];
        for (int b = 0; b < c->B; b++) {
            nl[b] = step_len(c, b, s);
            f.new_lens[b] = (int32_t)nl[b];
        }
        for (int64_t i = 0; i < f.kn_count; i++)
            f.kn[i] = new_value();
        for (int64_t i = 0; i < f.vn_count; i++)
            f.vn[i] = new_value();
        if (c->bs)
            step_table(&f, c, nl);
        attn_kv_append_args a = {
            .k_cache = f.kc, .v_cache = f.vc, .block_table = c->bs ? f.table : NULL,
            .kv_lens = f.lens, .new_lens = c->per_seq ? f.new_lens : NULL, .t = c->t,
            .k_new = f.kn, .v_new = f.vn, .k_new_view = f.knv, .v_new_view = f.vnv,
        };
        const attn_status st = attn_kv_append(&f.desc, &a);
        if (st != ATTN_OK) {
            printf("FAIL %s step %d: %s\n", c->name, s, attn_status_str(st));
            fails++;
            break;
        }
        /* the model: rows at the old lengths (want_lens), then they grow */
        expect_tensor(&f, c, f.ke, c->kt, &f.desc.k, f.kn, &f.knv, c->dk, nl);
        expect_tensor(&f, c, f.ve, c->vt, &f.desc.v, f.vn, &f.vnv, c->dv, nl);
        for (int b = 0; b < c->B; b++) {
            f.want_lens[b] = (int32_t)(f.want_lens[b] + nl[b]);
            if (f.lens[b] != f.want_lens[b]) {
                printf("FAIL %s step %d: kv_lens[%d] = %d, want %d\n", c->name, s, b,
                       f.lens[b], f.want_lens[b]);
                fails++;
            }
        }
        if (memcmp(f.kc, f.ke, f.kbytes) != 0 || memcmp(f.vc, f.ve, f.vbytes) != 0) {
            int shown = 0;
            for (size_t i = 0; i < f.kbytes && shown < 5; i++)
                if (f.kc[i] != f.ke[i] && ++shown)
                    printf("FAIL %s step %d: K byte %zu is 0x%02x, want 0x%02x\n", c->name, s,
                           i, f.kc[i], f.ke[i]);
            for (size_t i = 0; i < f.vbytes && shown < 10; i++)
                if (f.vc[i] != f.ve[i] && ++shown)
                    printf("FAIL %s step %d: V byte %zu is 0x%02x, want 0x%02x\n", c->name, s,
                           i, f.vc[i], f.ve[i]);
            fails++;
        }
    }
    fixture_free(&f);
    assert_int_equal(fails, 0);
}

/* Every case at every conversion level (ATTN_SIMD set before the calls;
 * the library reads it in each call), unless the environment already sets
 * one: then only that. */
static void test_appends(void **state)
{
    (void)state;
    static const char *const levels[] = { "scalar", "avx2", "avx512" };
    const int given = getenv("ATTN_SIMD") != NULL;
    for (int l = 0; l < (given ? 1 : 3); l++) {
        if (!given)
            setenv("ATTN_SIMD", levels[l], 1);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&cases[i]);
    }
    if (!given)
        unsetenv("ATTN_SIMD");
}

/* -------------------------------------------------------------- errors */

/* The base calls: paged F16 K / BF16 V, B = 2, H = 2, dk = 4, dv = 3,
 * bs = 3, m = 12 (4 blocks per sequence), 10 blocks, t = 2, kv_lens
 * {2, 4}, new_lens {2, 1}: sequence 0 writes tokens 2 and 3 (blocks 0 and
 * 1: a run across a boundary), sequence 1 token 4 (block 1); or the same
 * contiguous, [B][H][12][d]. */
enum { EB = 2, EH = 2, EDK = 4, EDV = 3, EBS = 3, EM = 12, EMAXB = 4, ENB = 10, ET = 2 };

typedef struct efix {
    attn_sdpa_desc desc;
    attn_kv_append_args args;
    uint16_t kc[ENB * EH * EBS * EDK], vc[ENB * EH * EBS * EDV];   /* >= contiguous sizes */
    int32_t table[EB * EMAXB];
    int32_t kv_lens[EB], new_lens[EB];
    float kn[EB * EH * ET * EDK], vn[EB * EH * ET * EDV];
} efix;

static void efix_build(efix *e, int contig)
{
    memset(e, 0, sizeof *e);
    attn_sdpa_desc *d = &e->desc;
    attn_sdpa_desc_init(d);
    d->batch = EB;
    d->kv_heads = EH;
    d->kv_len = EM;
    d->qk_dim = EDK;
    d->v_dim = EDV;
    d->k_type = ATTN_DTYPE_F16;
    d->v_type = ATTN_DTYPE_BF16;
    if (contig) {
        d->k = attn_view_bhsd(EH, EM, EDK);
        d->v = attn_view_bhsd(EH, EM, EDV);
    } else {
        d->kv_block_size = EBS;
        d->kv_num_blocks = ENB;
        d->kv_max_blocks = EMAXB;
        d->k = attn_view_bhsd(EH, EBS, EDK);
        d->v = attn_view_bhsd(EH, EBS, EDV);
    }
    static const int32_t table[EB * EMAXB] = { 5, 2, 9, 7, 1, 8, 3, 0 };
    memcpy(e->table, table, sizeof table);
    e->kv_lens[0] = 2;
    e->kv_lens[1] = 4;
    e->new_lens[0] = 2;
    e->new_lens[1] = 1;
    for (size_t i = 0; i < sizeof e->kc / sizeof e->kc[0]; i++)
        e->kc[i] = (uint16_t)(0xA5A5 ^ i);
    for (size_t i = 0; i < sizeof e->vc / sizeof e->vc[0]; i++)
        e->vc[i] = (uint16_t)(0x5A5A ^ i);
    for (size_t i = 0; i < sizeof e->kn / sizeof e->kn[0]; i++)
        e->kn[i] = (float)i * 0.25f + 1.0f;
    for (size_t i = 0; i < sizeof e->vn / sizeof e->vn[0]; i++)
        e->vn[i] = (float)i * -0.5f - 1.0f;
    attn_kv_append_args *a = &e->args;
    a->k_cache = e->kc;
    a->v_cache = e->vc;
    a->block_table = contig ? NULL : e->table;
    a->kv_lens = e->kv_lens;
    a->new_lens = e->new_lens;
    a->t = ET;
    a->k_new = e->kn;
    a->v_new = e->vn;
    a->k_new_view = attn_view_bhsd(EH, ET, EDK);
    a->v_new_view = attn_view_bhsd(EH, ET, EDV);
}

/* One change to the base call. */
enum ekind {
    E_NONE,
    E_DESC_NULL,     /* desc = NULL */
    E_ARGS_NULL,     /* args = NULL */
    E_ARGS_PTR,      /* the pointer at args + off = NULL */
    E_GIVE_TABLE,    /* block_table = the table (for the contiguous base) */
    E_NEW_LENS_NULL, /* new_lens = NULL: t for every sequence */
    E_DESC_I64,      /* the int64_t at desc + off = val */
    E_DESC_INT,      /* the int / enum at desc + off = val */
    E_ARGS_I64,      /* the int64_t at args + off = val */
    E_KV_LEN,        /* kv_lens[off] = val */
    E_NEW_LEN,       /* new_lens[off] = val */
    E_TABLE,         /* table[off] = val */
};

typedef struct emut {
    int kind;
    size_t off;
    int64_t val;
} emut;

typedef struct erow {
    const char *name;
    int contig;
    emut mut[3];
    attn_status want;
} erow;

#define DOFF(f) offsetof(attn_sdpa_desc, f)
#define DVIEW(f, s) (offsetof(attn_sdpa_desc, f) + offsetof(attn_view, s))
#define AOFF(f) offsetof(attn_kv_append_args, f)
#define AVIEW(f, s) (offsetof(attn_kv_append_args, f) + offsetof(attn_view, s))
static const int64_t BIG = (int64_t)INT32_MAX + 1;

static const erow erows[] = {
    /* NULL pointers */
    { "desc NULL", 0, { { E_DESC_NULL, 0, 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "args NULL", 0, { { E_ARGS_NULL, 0, 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "k_cache NULL", 0, { { E_ARGS_PTR, AOFF(k_cache), 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "v_cache NULL", 1, { { E_ARGS_PTR, AOFF(v_cache), 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "kv_lens NULL", 0, { { E_ARGS_PTR, AOFF(kv_lens), 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "k_new NULL", 0, { { E_ARGS_PTR, AOFF(k_new), 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "v_new NULL", 1, { { E_ARGS_PTR, AOFF(v_new), 0 } }, ATTN_ERR_NULL_ARGUMENT },
    { "block_table NULL, paged", 0, { { E_ARGS_PTR, AOFF(block_table), 0 } },
      ATTN_ERR_NULL_ARGUMENT },
    /* a table without paging */
    { "block_table given, contiguous", 1, { { E_GIVE_TABLE, 0, 0 } }, ATTN_ERR_ARGUMENT_MISMATCH },
    /* sizes */
    { "t = 0", 0, { { E_ARGS_I64, AOFF(t), 0 } }, ATTN_ERR_BAD_SIZE },
    { "t = -1", 1, { { E_ARGS_I64, AOFF(t), -1 } }, ATTN_ERR_BAD_SIZE },
    { "batch = 0", 0, { { E_DESC_I64, DOFF(batch), 0 } }, ATTN_ERR_BAD_SIZE },
    { "kv_heads = -1", 0, { { E_DESC_I64, DOFF(kv_heads), -1 } }, ATTN_ERR_BAD_SIZE },
    { "kv_len = 0", 1, { { E_DESC_I64, DOFF(kv_len), 0 } }, ATTN_ERR_BAD_SIZE },
    { "qk_dim = 0", 0, { { E_DESC_I64, DOFF(qk_dim), 0 } }, ATTN_ERR_BAD_SIZE },
    { "v_dim = INT64_MIN", 1, { { E_DESC_I64, DOFF(v_dim), INT64_MIN } }, ATTN_ERR_BAD_SIZE },
    { "kv_len > kv_max_blocks x bs", 0, { { E_DESC_I64, DOFF(kv_len), EM + 1 } },
      ATTN_ERR_BAD_SIZE },
    { "kv_num_blocks = 0", 0, { { E_DESC_I64, DOFF(kv_num_blocks), 0 } }, ATTN_ERR_BAD_SIZE },
    { "kv_max_blocks = -1", 0, { { E_DESC_I64, DOFF(kv_max_blocks), -1 } }, ATTN_ERR_BAD_SIZE },
    /* too large */
    { "kv_len > INT32_MAX", 1, { { E_DESC_I64, DOFF(kv_len), BIG } }, ATTN_ERR_TOO_LARGE },
    { "qk_dim > INT32_MAX", 0, { { E_DESC_I64, DOFF(qk_dim), BIG } }, ATTN_ERR_TOO_LARGE },
    { "kv_block_size > INT32_MAX", 0, { { E_DESC_I64, DOFF(kv_block_size), BIG } },
      ATTN_ERR_TOO_LARGE },
    { "kv_num_blocks > INT32_MAX", 0, { { E_DESC_I64, DOFF(kv_num_blocks), BIG } },
      ATTN_ERR_TOO_LARGE },
    { "k batch stride huge", 0, { { E_DESC_I64, DVIEW(k, batch), INT64_MAX / 4 } },
      ATTN_ERR_TOO_LARGE },
    { "k_new batch stride huge", 0, { { E_ARGS_I64, AVIEW(k_new_view, batch), INT64_MAX / 2 } },
      ATTN_ERR_TOO_LARGE },
    { "v_new seq stride > INT32_MAX", 1, { { E_ARGS_I64, AVIEW(v_new_view, seq), BIG } },
      ATTN_ERR_TOO_LARGE },
    /* strides */
    { "k seq < dk", 0, { { E_DESC_I64, DVIEW(k, seq), EDK - 1 } }, ATTN_ERR_BAD_STRIDE },
    { "v head < 0", 1, { { E_DESC_I64, DVIEW(v, head), -1 } }, ATTN_ERR_BAD_STRIDE },
    { "k block stride 0", 0, { { E_DESC_I64, DVIEW(k, batch), 0 } }, ATTN_ERR_BAD_STRIDE },
    { "k_new seq < dk", 0, { { E_ARGS_I64, AVIEW(k_new_view, seq), EDK - 1 } },
      ATTN_ERR_BAD_STRIDE },
    { "v_new batch < 0", 1, { { E_ARGS_I64, AVIEW(v_new_view, batch), -5 } },
      ATTN_ERR_BAD_STRIDE },
    { "k_new head 0", 0, { { E_ARGS_I64, AVIEW(k_new_view, head), 0 } }, ATTN_ERR_BAD_STRIDE },
    /* unset strides */
    { "k seq unset", 0, { { E_DESC_I64, DVIEW(k, seq), ATTN_STRIDE_UNSET } },
      ATTN_ERR_STRIDES_UNSET },
    { "v batch unset", 1, { { E_DESC_I64, DVIEW(v, batch), ATTN_STRIDE_UNSET } },
      ATTN_ERR_STRIDES_UNSET },
    { "k_new head unset", 0, { { E_ARGS_I64, AVIEW(k_new_view, head), ATTN_STRIDE_UNSET } },
      ATTN_ERR_STRIDES_UNSET },
    { "v_new seq unset", 1, { { E_ARGS_I64, AVIEW(v_new_view, seq), ATTN_STRIDE_UNSET } },
      ATTN_ERR_STRIDES_UNSET },
    /* options */
    { "k_type 5", 0, { { E_DESC_INT, DOFF(k_type), 5 } }, ATTN_ERR_BAD_OPTION },
    { "v_type 99", 1, { { E_DESC_INT, DOFF(v_type), 99 } }, ATTN_ERR_BAD_OPTION },
    { "v_type -1", 1, { { E_DESC_INT, DOFF(v_type), -1 } }, ATTN_ERR_BAD_OPTION },
    /* the quantized types (1.2) with this base's head dims (4 and 3, not
     * multiples of 32): the size rule (test_quant.c has the appends and
     * the stride rule) */
    { "k_type Q8_0, qk_dim 4", 0, { { E_DESC_INT, DOFF(k_type), ATTN_DTYPE_Q8_0 } },
      ATTN_ERR_BAD_SIZE },
    { "v_type Q4_0, v_dim 3", 1, { { E_DESC_INT, DOFF(v_type), ATTN_DTYPE_Q4_0 } },
      ATTN_ERR_BAD_SIZE },
    { "kv_block_size -1", 0, { { E_DESC_I64, DOFF(kv_block_size), -1 } }, ATTN_ERR_BAD_OPTION },
    { "kv_num_blocks without paging", 1, { { E_DESC_I64, DOFF(kv_num_blocks), 5 } },
      ATTN_ERR_BAD_OPTION },
    { "kv_max_blocks without paging", 1, { { E_DESC_I64, DOFF(kv_max_blocks), 1 } },
      ATTN_ERR_BAD_OPTION },
    /* lengths; the bad sequence is the last where it can be, so a
     * write-as-you-check would already have written sequence 0 */
    { "kv_lens[0] = -1", 0, { { E_KV_LEN, 0, -1 } }, ATTN_ERR_BAD_LENGTH },
    { "kv_lens[1] + new_lens[1] > kv_len", 0, { { E_KV_LEN, 1, EM } }, ATTN_ERR_BAD_LENGTH },
    { "kv_lens[1] > kv_len, new_lens 0", 1,
      { { E_KV_LEN, 1, EM + 1 }, { E_NEW_LEN, 1, 0 } }, ATTN_ERR_BAD_LENGTH },
    { "new_lens[1] = -1", 0, { { E_NEW_LEN, 1, -1 } }, ATTN_ERR_BAD_LENGTH },
    { "new_lens[1] = t + 1", 1, { { E_NEW_LEN, 1, ET + 1 } }, ATTN_ERR_BAD_LENGTH },
    { "t = 1 < new_lens[0]", 0, { { E_ARGS_I64, AOFF(t), 1 } }, ATTN_ERR_BAD_LENGTH },
    { "new_lens NULL: kv_lens[1] + t > kv_len", 0,
      { { E_NEW_LENS_NULL, 0, 0 }, { E_KV_LEN, 1, EM - 1 } }, ATTN_ERR_BAD_LENGTH },
    /* the block table */
    { "table (0,0) = -1", 0, { { E_TABLE, 0, -1 } }, ATTN_ERR_BAD_BLOCK_TABLE },
    { "table (0,1) = num_blocks (second block of a run)", 0,
      { { E_TABLE, 1, ENB } }, ATTN_ERR_BAD_BLOCK_TABLE },
    { "table (1,1) = INT32_MIN", 0, { { E_TABLE, EMAXB + 1, INT32_MIN } },
      ATTN_ERR_BAD_BLOCK_TABLE },
    { "new_lens NULL: t tokens reach block 2 of sequence 1, its entry -1", 0,
      { { E_NEW_LENS_NULL, 0, 0 }, { E_KV_LEN, 1, 5 }, { E_TABLE, EMAXB + 2, -1 } },
      ATTN_ERR_BAD_BLOCK_TABLE },
    { "control of that row: the entry valid", 0,
      { { E_NEW_LENS_NULL, 0, 0 }, { E_KV_LEN, 1, 5 } }, ATTN_OK },
    /* controls */
    { "base paged", 0, { { E_NONE, 0, 0 } }, ATTN_OK },
    { "base contiguous", 1, { { E_NONE, 0, 0 } }, ATTN_OK },
    { "garbage in unread table entries", 0,
      { { E_TABLE, 2, -1 }, { E_TABLE, EMAXB + 0, ENB } }, ATTN_OK },
    { "no tokens for sequence 0: its entries unread", 0,
      { { E_NEW_LEN, 0, 0 }, { E_TABLE, 0, -7 } }, ATTN_OK },
    { "sequence 1 fills the cache exactly", 0, { { E_KV_LEN, 1, EM - 1 } }, ATTN_OK },
    { "new_lens NULL", 0, { { E_NEW_LENS_NULL, 0, 0 } }, ATTN_OK },
    { "desc fields other than K/V's hold garbage", 0,
      { { E_DESC_I64, DOFF(q_heads), -3 }, { E_DESC_I64, DOFF(reserved), 7 } }, ATTN_OK },
    { "q view unset, align garbage (not read)", 1,
      { { E_DESC_I64, DVIEW(q, seq), ATTN_STRIDE_UNSET }, { E_DESC_INT, DOFF(align), 9 } },
      ATTN_OK },
};

static void apply(efix *e, const emut *m, const attn_sdpa_desc **dp,
                  const attn_kv_append_args **ap)
{
    switch (m->kind) {
    case E_NONE: break;
    case E_DESC_NULL: *dp = NULL; break;
    case E_ARGS_NULL: *ap = NULL; break;
    case E_ARGS_PTR: memset((char *)&e->args + m->off, 0, sizeof(void *)); break;
    case E_GIVE_TABLE: e->args.block_table = e->table; break;
    case E_NEW_LENS_NULL: e->args.new_lens = NULL; break;
    case E_DESC_I64: memcpy((char *)&e->desc + m->off, &m->val, sizeof(int64_t)); break;
    case E_DESC_INT: {
        int v = (int)m->val;
        memcpy((char *)&e->desc + m->off, &v, sizeof v);
        break;
    }
    case E_ARGS_I64: memcpy((char *)&e->args + m->off, &m->val, sizeof(int64_t)); break;
    case E_KV_LEN: e->kv_lens[m->off] = (int32_t)m->val; break;
    case E_NEW_LEN: e->new_lens[m->off] = (int32_t)m->val; break;
    case E_TABLE: e->table[m->off] = (int32_t)m->val; break;
    }
}

static void test_error_table(void **state)
{
    (void)state;
    int fails = 0;
    for (size_t i = 0; i < sizeof erows / sizeof erows[0]; i++) {
        const erow *r = &erows[i];
        efix *e = malloc(sizeof *e), *before = malloc(sizeof *before);
        assert_non_null(e);
        assert_non_null(before);
        efix_build(e, r->contig);
        const attn_sdpa_desc *dp = &e->desc;
        const attn_kv_append_args *ap = &e->args;
        for (int k = 0; k < 3; k++)
            apply(e, &r->mut[k], &dp, &ap);
        /* The fixture holds no pointer into itself that a copy would
         * break: the args' pointers still point into e, whose data is
         * compared field by field below. */
        memcpy(before, e, sizeof *e);
        const attn_status st = attn_kv_append(dp, ap);
        if (st != r->want) {
            printf("FAIL %s: %s, want %s\n", r->name, attn_status_str(st),
                   attn_status_str(r->want));
            fails++;
        }
        if (r->want != ATTN_OK) {
            /* nothing written: caches, lengths, inputs, desc, args */
            if (memcmp(e, before, sizeof *e) != 0) {
                printf("FAIL %s: something changed on error\n", r->name);
                fails++;
            }
        } else if (st == ATTN_OK) {
            /* the lengths grew by the appended tokens */
            for (int b = 0; b < EB; b++) {
                const int32_t nl = e->args.new_lens ? before->new_lens[b] : (int32_t)e->args.t;
                if (e->kv_lens[b] != before->kv_lens[b] + nl) {
                    printf("FAIL %s: kv_lens[%d] = %d, want %d\n", r->name, b, e->kv_lens[b],
                           before->kv_lens[b] + nl);
                    fails++;
                }
            }
            if (!memcmp(e->kc, before->kc, sizeof e->kc) ||
                !memcmp(e->vc, before->vc, sizeof e->vc)) {
                printf("FAIL %s: nothing written\n", r->name);
                fails++;
            }
        }
        free(e);
        free(before);
    }
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_error_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
