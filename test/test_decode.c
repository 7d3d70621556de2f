/*
 * test_decode.c -- the decode path, F16/BF16 K/V storage and the paged KV
 * cache (attn.h, "Decoding and the KV cache").
 *
 * One table of cases with few queries (n <= 16: the planner's decode
 * path), over the harness's options (GQA, layouts, bottom-right causal,
 * windows, lengths, masks, bias, probabilities, logsumexp, dropout, NaN
 * poison).  Each row, with K and V first rounded to values that F16 and
 * BF16 both hold exactly (so every storage holds the same numbers):
 *   decode     the default plan (decode path) against the float64
 *              reference (tinst_check, reference.h's tolerances);
 *   sgemm      ATTN_DECODE=0 (the sgemm path) against the reference too;
 *   threads    decode with threads 1, 2, 3, 4: the same bits;
 *   storage    K and/or V stored F16 or BF16 (each combination) give the
 *              bits of F32 storage, on both paths: widening is exact and
 *              the arithmetic is the same (with MKL, whose sgemm kernels
 *              depend on leading dimension and alignment, the sgemm path
 *              is held to the float64 reference instead of bits);
 *   paged      the same values in a paged pool (block sizes 1, 3, 16, 64;
 *              [blocks][H][bs][d] and [blocks][bs][H][d]; blocks in random
 *              order; NaN in every unused block and row, and garbage table
 *              entries past each sequence's last block when lengths are on)
 *              give the bits of the contiguous cache, on both paths and for
 *              each storage type.
 * Plus the execute-time errors of the new arguments (nothing written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "reference.h"

/* ------------------------------------------------------------- values */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to a value both F16 and BF16 hold: 8 significant bits, and 0 below
 * F16's smallest normal (NaN stays NaN). */
static float both_exact(float x)
{
    /* on the bits only: GCC 12 at -O3 vectorized a float version of this
     * (fabsf compare, 0 * x) into a loop that left the values unchanged */
    const uint32_t u = fbits(x), mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u)
        return x;
    return bitsf(mag < 0x38800000u ? u & 0x80000000u : u & 0xffff0000u);
}

/* Encodings of such values, written here from the formats' definitions. */
static uint16_t enc_bf16(float x)
{
    return (uint16_t)(fbits(x) >> 16);
}

static uint16_t enc_f16(float x)
{
    const uint32_t u = fbits(x), sign = (u >> 16) & 0x8000u;
    if (x != x)
        return (uint16_t)(sign | 0x7e00u);
    if (x == 0.0f)
        return (uint16_t)sign;
    const uint32_t e = (u >> 23) & 0xff;          /* 113 .. 142 here */
    return (uint16_t)(sign | ((e - 112) << 10) | ((u >> 13) & 0x3ffu));
}

/* --------------------------------------------------------------- cases */

enum { CHK_PAGED = 1, CHK_STORAGE = 2 };

typedef struct drow {
    const char *what;
    tcase c;
} drow;

static tcase dcase(int64_t B, int64_t Hq, int64_t Hkv, int64_t n, int64_t m, int64_t dk,
                   int64_t dv)
{
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.seed = (uint64_t)(B * 131 + Hq * 31 + n * 7 + m);
    return c;
}

static int nrows;
static drow rows[64];

static void add(const char *what, tcase c)
{
    rows[nrows].what = what;
    rows[nrows].c = c;
    nrows++;
}

static void build_table(void)
{
    tcase c;
    nrows = 0;
    add("S5-like: 1 query, GQA 4, d 128", dcase(1, 8, 2, 1, 700, 128, 128));
    add("MQA, d 64", dcase(2, 4, 1, 1, 300, 64, 64));
    add("no GQA, odd dims (dk 37, dv 19)", dcase(2, 3, 3, 1, 129, 37, 19));
    c = dcase(2, 8, 2, 4, 520, 64, 64);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    add("4 queries, bottom-right causal", c);
    c = dcase(3, 4, 2, 16, 300, 32, 48);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 300; c.kv_lens[1] = 17; c.kv_lens[2] = 0;
    c.poison = 1;
    add("16 queries, causal, kv lengths 300/17/0, poison", c);
    c = dcase(2, 6, 3, 3, 257, 16, 16);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wl = 40;
    c.wr = 0;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 200; c.kv_lens[1] = 257;
    c.use_q_lens = 1;
    c.q_lens[0] = 2; c.q_lens[1] = 3;
    c.poison = 1;
    add("sliding window 40, both lengths, poison", c);
    c = dcase(2, 4, 2, 2, 150, 24, 24);
    c.mask_mode = ATTN_MASK_KEEP_NONZERO;
    c.mask_keep = 0.7;
    c.use_bias = 1;
    c.bias_mag = 2.0;
    c.bias_ninf = 0.05;
    c.want_probs = 1;
    c.want_lse = 1;
    add("mask, bias with -inf, probs, lse", c);
    c = dcase(1, 4, 4, 1, 90, 32, 32);
    c.layout = LAY_BSHD;
    c.out_layout = OUT_BSHD;
    c.want_lse = 1;
    add("BSHD, lse", c);
    c = dcase(2, 4, 2, 5, 77, 16, 8);
    c.layout = LAY_PADDED;
    c.out_layout = OUT_PADDED;
    c.misalign = 1;
    c.want_probs = 1;
    add("padded views, misaligned, probs", c);
    c = dcase(1, 2, 1, 1, 3000, 64, 64);
    c.in_mag = 3.0;
    add("long cache (split over keys), large logits", c);
    c = dcase(1, 1, 1, 1, 1, 8, 8);
    add("one key", c);
    c = dcase(2, 4, 2, 8, 64, 16, 16);
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.wr = 0;
    c.want_lse = 1;
    add("8 queries, top-left causal (rows see few keys)", c);
}

/* ------------------------------------------------------ running a form */

/* One storage / placement of the instance's K and V. */
typedef struct form {
    int kt, vt;          /* attn_dtype */
    int64_t bs;          /* 0: contiguous (the harness's views) */
    int bshd_pool;       /* pool blocks [bs][H][d] instead of [H][bs][d] */
} form;

typedef struct pool {
    void *k, *v;
    int32_t *table;
} pool;

static void *convert_buffer(const float *src, size_t count, int type)
{
    if (type == ATTN_DTYPE_F32)
        return NULL;
    uint16_t *d = malloc(count * sizeof(uint16_t) + 2);
    for (size_t i = 0; i < count; i++)
        d[i] = type == ATTN_DTYPE_F16 ? enc_f16(src[i]) : enc_bf16(src[i]);
    return d;
}

/* The stored element of (b, h, j, x) of K or V in the harness's buffers. */
static float tensor_at(const float *p, const attn_view *v, int64_t b, int64_t h, int64_t j,
                       int64_t x)
{
    return p[b * v->batch + h * v->head + j * v->seq + x];
}

/* Build a paged copy: pool of B * maxb + 3 blocks in random order, NaN
 * everywhere not written; unused table entries garbage when lengths are on. */
static void build_pool(const tinst *t, const form *f, attn_sdpa_desc *d, attn_sdpa_args *a,
                       pool *pl, trng *r)
{
    const tcase *c = &t->c;
    const int64_t bs = f->bs, maxb = (c->m + bs - 1) / bs, nblk = c->B * maxb + 3;
    const int64_t H = c->Hkv;
    d->kv_block_size = bs;
    d->kv_max_blocks = maxb;
    d->kv_num_blocks = nblk;
    for (int which = 0; which < 2; which++) {
        const int64_t dim = which ? c->dv : c->dk;
        const int type = which ? f->vt : f->kt;
        attn_view pv = f->bshd_pool ? (attn_view){ bs * H * dim, dim, H * dim }
                                    : (attn_view){ H * bs * dim, bs * dim, dim };
        const size_t count = (size_t)(nblk * bs * H * dim);
        float *fp = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++)
            fp[i] = NAN;
        if (which)
            d->v = pv;
        else
            d->k = pv;
        if (which)
            pl->v = fp;
        else
            pl->k = fp;
        (void)type;
    }
    /* a random permutation of the blocks */
    int32_t *perm = malloc((size_t)nblk * sizeof(int32_t));
    for (int64_t i = 0; i < nblk; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = nblk - 1; i > 0; i--) {
        int64_t k = trng_int(r, 0, i);
        int32_t tmp = perm[i]; perm[i] = perm[k]; perm[k] = tmp;
    }
    pl->table = malloc((size_t)(c->B * maxb) * sizeof(int32_t));
    for (int64_t b = 0; b < c->B; b++) {
        const int64_t len = c->use_kv_lens ? t->kv_lens[b] : c->m;
        for (int64_t J = 0; J < maxb; J++) {
            const int used = J * bs < len;
            pl->table[b * maxb + J] = used ? perm[b * maxb + J]
                                    : (int32_t)trng_int(r, -1000, 1000) * (J % 2 ? 1 : -1) - 5000;
            if (!used)
                continue;
            for (int64_t j = J * bs; j < (J + 1) * bs && j < len; j++)
                for (int64_t h = 0; h < H; h++) {
                    float *kd = (float *)pl->k + perm[b * maxb + J] * d->k.batch + h * d->k.head +
                                (j % bs) * d->k.seq;
                    float *vd = (float *)pl->v + perm[b * maxb + J] * d->v.batch + h * d->v.head +
                                (j % bs) * d->v.seq;
                    for (int64_t x = 0; x < c->dk; x++)
                        kd[x] = tensor_at(t->args.k, &t->desc.k, b, h, j, x);
                    for (int64_t x = 0; x < c->dv; x++)
                        vd[x] = tensor_at(t->args.v, &t->desc.v, b, h, j, x);
                }
        }
    }
    free(perm);
    a->block_table = pl->table;
    a->k = pl->k;
    a->v = pl->v;
}

static size_t view_count(const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D)
{
    return (size_t)((B - 1) * v->batch + (H - 1) * v->head + (S - 1) * v->seq + D);
}

/* Run the instance in form f (decode on or off); snapshot the outputs. */
static attn_status run_form(tinst *t, const form *f, int decode, int threads, tsnap *snap,
                            uint64_t seed)
{
    attn_sdpa_desc d = t->desc;
    attn_sdpa_args a = t->args;
    pool pl = { NULL, NULL, NULL };
    trng r;
    trng_seed(&r, seed);
    d.threads = threads;
    if (f->bs)
        build_pool(t, f, &d, &a, &pl, &r);
    const tcase *c = &t->c;
    const int64_t kb = f->bs ? d.kv_num_blocks : c->B, ks = f->bs ? f->bs : c->m;
    void *k16 = convert_buffer(a.k, view_count(&d.k, kb, c->Hkv, ks, c->dk), f->kt);
    void *v16 = convert_buffer(a.v, view_count(&d.v, kb, c->Hkv, ks, c->dv), f->vt);
    d.k_type = f->kt;
    d.v_type = f->vt;
    if (k16) { a.k16 = k16; a.k = NULL; }
    if (v16) { a.v16 = v16; a.v = NULL; }
    if (!decode)
        setenv("ATTN_DECODE", "0", 1);
    tinst_clear_outputs(t);
    attn_status st = attn_sdpa(&d, &a);
    unsetenv("ATTN_DECODE");
    if (snap)
        tsnap_take(snap, t);
    free(k16);
    free(v16);
    free(pl.k);
    free(pl.v);
    free(pl.table);
    return st;
}

static void round_kv(tinst *t)
{
    float *k = t->k.base, *v = t->v.base;
    for (size_t i = 0; i < t->k.count; i++)
        k[i] = both_exact(k[i]);
    for (size_t i = 0; i < t->v.count; i++)
        v[i] = both_exact(v[i]);
}

static void test_decode_table(void **state)
{
    (void)state;
    build_table();
    tstats sd, sg;
    tstats_init(&sd, "decode path");
    tstats_init(&sg, "sgemm path (ATTN_DECODE=0)");
    long bad = 0;
    int forms_checked = 0, forms_ref = 0;
    const int quick = tquick();
    attn_blas_info info;
    attn_blas_query(&info);
    const int blas_is_mkl = !strcmp(info.loaded, "mkl") || !strcmp(info.backend, "mkl");
    static const int types[3] = { ATTN_DTYPE_F32, ATTN_DTYPE_F16, ATTN_DTYPE_BF16 };
    static const int64_t blocks[4] = { 1, 3, 16, 64 };
    for (int i = 0; i < nrows; i++) {
        tinst t;
        if (tinst_build(&t, &rows[i].c)) {
            print_message("FAIL: build %s\n", rows[i].what);
            bad++;
            continue;
        }
        round_kv(&t);
        const form plain = { 0, 0, 0, 0 };
        tsnap base[2];
        for (int dec = 1; dec >= 0; dec--) {
            attn_status st = run_form(&t, &plain, dec, 1, &base[dec], 1);
            if (st != ATTN_OK) {
                print_message("FAIL %s: status %s\n", rows[i].what, attn_status_str(st));
                bad++;
                continue;
            }
            long e = tinst_check(&t, dec ? &sd : &sg);
            if (e)
                print_message("FAIL %s (%s path): %ld elements off the reference\n",
                              rows[i].what, dec ? "decode" : "sgemm", e);
            bad += e != 0;
        }
        /* threads (valgrind, ATTN_TEST_QUICK: 2 only) */
        for (int th = 2; th <= (quick ? 2 : 4); th++) {
            tsnap s;
            run_form(&t, &plain, 1, th, &s, 1);
            if (!tsnap_equal(&s, &base[1])) {
                print_message("FAIL %s: decode with %d threads differs\n", rows[i].what, th);
                bad++;
            }
            tsnap_free(&s);
        }
        /* storage types and pages, each against the contiguous F32 bits of
         * the same path */
        for (int dec = 1; dec >= 0; dec--)
            for (int ti = 0; ti < 9; ti++)
                for (int bi = -1; bi < 4; bi++) {
                    form f = { types[ti / 3], types[ti % 3], bi < 0 ? 0 : blocks[bi], bi == 2 };
                    if (f.kt == 0 && f.vt == 0 && f.bs == 0)
                        continue;
                    /* every type with contiguous and block 3; the rest F16 K and V
                     * (quick: K and V of one type, contiguous and block 3) */
                    if (bi > 1 && !(f.kt == ATTN_DTYPE_F16 && f.vt == ATTN_DTYPE_F16) && ti != 0)
                        continue;
                    if (quick && (bi > 1 || bi == 0 || ti % 4 != 0))
                        continue;
                    tsnap s;
                    attn_status st = run_form(&t, &f, dec, 1 + (bi & 1), &s, 7 + (uint64_t)bi);
                    forms_checked++;
                    /* MKL picks its sgemm kernels by leading dimension and
                     * alignment, so the widened or gathered tiles need not
                     * give the bits of the user's own arrays: there the
                     * sgemm path is held to the reference instead */
                    const int bitwise = dec || !blas_is_mkl;
                    forms_ref += !bitwise;
                    if (!bitwise && st == ATTN_OK) {
                        long e = tinst_check(&t, &sg);
                        if (e) {
                            print_message("FAIL %s: sgemm path (MKL), K %d V %d block %lld: "
                                          "%ld elements off the reference\n",
                                          rows[i].what, f.kt, f.vt, (long long)f.bs, e);
                            bad++;
                        }
                    } else if (st != ATTN_OK || !tsnap_equal(&s, &base[dec])) {
                        print_message("FAIL %s: %s path, K %d V %d block %lld%s: %s\n",
                                      rows[i].what, dec ? "decode" : "sgemm", f.kt, f.vt,
                                      (long long)f.bs, f.bshd_pool ? " (bshd pool)" : "",
                                      st != ATTN_OK ? attn_status_str(st)
                                                    : "bits differ from contiguous F32");
                        bad++;
                    }
                    tsnap_free(&s);
                }
        tsnap_free(&base[0]);
        tsnap_free(&base[1]);
        tinst_free(&t);
    }
    tstats_print(&sd);
    tstats_print(&sg);
    print_message("  %d cases, %d storage/paging forms compared bitwise, %d to the reference\n",
                  nrows, forms_checked - forms_ref, forms_ref);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------- errors */

static void test_decode_errors(void **state)
{
    (void)state;
    tcase c = dcase(2, 4, 2, 1, 40, 8, 8);
    c.use_kv_lens = 1;
    c.kv_lens[0] = 40; c.kv_lens[1] = 9;
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    round_kv(&t);
    const form f = { ATTN_DTYPE_F16, ATTN_DTYPE_F32, 8, 0 };
    attn_sdpa_desc d = t.desc;
    attn_sdpa_args a = t.args;
    pool pl = { NULL, NULL, NULL };
    trng r;
    trng_seed(&r, 3);
    build_pool(&t, &f, &d, &a, &pl, &r);
    d.k_type = ATTN_DTYPE_F16;
    uint16_t *k16 = convert_buffer(a.k, view_count(&d.k, d.kv_num_blocks, 2, 8, 8), f.kt);
    a.k16 = k16;
    a.k = NULL;
    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa(&d, &a), ATTN_OK);
    struct {
        const char *what;
        attn_status want;
        int which;
    } errs[] = {
        { "block id = kv_num_blocks", ATTN_ERR_BAD_BLOCK_TABLE, 0 },
        { "block id = -1", ATTN_ERR_BAD_BLOCK_TABLE, 1 },
        { "block id out of range in a short sequence's last block", ATTN_ERR_BAD_BLOCK_TABLE, 2 },
        { "F32 k given for F16 storage", ATTN_ERR_ARGUMENT_MISMATCH, 3 },
        { "k16 NULL", ATTN_ERR_NULL_ARGUMENT, 4 },
        { "v16 given for F32 storage", ATTN_ERR_ARGUMENT_MISMATCH, 5 },
        { "block table NULL", ATTN_ERR_NULL_ARGUMENT, 6 },
        { "block table without paging", ATTN_ERR_ARGUMENT_MISMATCH, 7 },
        { "kv_lens past m", ATTN_ERR_BAD_LENGTH, 8 },
    };
    int32_t table[2 * 5];
    const int64_t maxb = d.kv_max_blocks;
    assert_true(maxb == 5);
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) {
        attn_sdpa_desc dd = d;
        attn_sdpa_args aa = a;
        int32_t lens[2] = { 40, 9 };
        memcpy(table, pl.table, sizeof table);
        aa.block_table = table;
        aa.kv_lens = lens;
        switch (errs[e].which) {
        case 0: table[3] = (int32_t)d.kv_num_blocks; break;
        case 1: table[0] = -1; break;
        case 2: table[maxb + 1] = 1 << 30; break;
        case 3: aa.k = a.v; break;
        case 4: aa.k16 = NULL; break;
        case 5: aa.v16 = k16; break;
        case 6: aa.block_table = NULL; break;
        case 7: dd = t.desc; aa = t.args; aa.block_table = table; break;
        case 8: lens[1] = 41; break;
        }
        tinst_clear_outputs(&t);
        attn_status st = attn_sdpa(&dd, &aa);
        if (st != errs[e].want || !tinst_outputs_untouched(&t))
            print_message("FAIL %s: got %s\n", errs[e].what, attn_status_str(st));
        assert_int_equal(st, errs[e].want);
        assert_true(tinst_outputs_untouched(&t));
    }
    /* the entries past a sequence's last block are never read */
    memcpy(table, pl.table, sizeof table);
    table[maxb + 2] = -7;
    table[maxb + 4] = 1 << 30;
    a.block_table = table;
    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa(&d, &a), ATTN_OK);
    free(k16);
    free(pl.k);
    free(pl.v);
    free(pl.table);
    tinst_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_table),
        cmocka_unit_test(test_decode_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
