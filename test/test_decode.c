/*
 * test_decode.c -- the decode path, F16/BF16 and Q8_0/Q4_0 K/V storage and
 * the paged KV cache (attn.h, "Decoding and the KV cache" and "Quantized
 * KV caches").
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
 *   quantized  K and/or V stored Q8_0 or Q4_0, the other F32, F16 or the
 *              other block type (12 combinations, qcomb; each row of head
 *              dims multiples of 32 runs one to three of them, so that
 *              the table covers each once, half of them twice; the last
 *              four rows are for them only): the bytes are attn_quantize's
 *              of the row's values, and the F32 instance then holds
 *              attn_dequantize's values (checked against a de-quantizer
 *              written here from attn.h's block layouts).  That F32 call
 *              is checked against the float64 reference on both paths;
 *              each quantized form must give its bits on both paths (MKL:
 *              the sgemm path against the reference): contiguous
 *              [B][H][m][d], and by turn one of: strided [B][m][H][d] with
 *              32-value gaps behind a pointer one byte (one element) off,
 *              paged with block sizes 1 ([H][bs][d] pools), 3 ([bs][H][d]
 *              with 32-value gaps) and 16 ([bs][H][d]) (random block order;
 *              unused blocks and gaps hold blocks of a NaN scale and
 *              random quants), with threads 1 to 4 across the forms.  Rows
 *              with a dim not a multiple of 32 check that Q8_0 and Q4_0 K
 *              or V are ATTN_ERR_BAD_SIZE (views of strides multiples of
 *              32, outputs untouched).  Valgrind (ATTN_TEST_QUICK) runs
 *              one combination on four rows.
 * Plus the execute-time errors of the new arguments (nothing written),
 * and the quantized types' argument, stride and type errors.
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
#include "qk8_ref.h"

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

/* ------------------------------------------------- quantized storage */

static int is_q(int type)
{
    return type == ATTN_DTYPE_Q8_0 || type == ATTN_DTYPE_Q4_0;
}

/* Bytes of n stored values of a storage type (n a multiple of 32 for the
 * block types). */
static size_t st_bytes(int type, int64_t n)
{
    switch (type) {
    case ATTN_DTYPE_F32: return (size_t)n * 4;
    case ATTN_DTYPE_Q8_0: return (size_t)(n / 32) * 34;
    case ATTN_DTYPE_Q4_0: return (size_t)(n / 32) * 18;
    default: return (size_t)n * 2;
    }
}

/* IEEE binary16, from its definition. */
static float half_value(uint16_t h)
{
    const int e = (h >> 10) & 31, f = h & 1023;
    const float v = e == 0 ? ldexpf((float)f, -24)
                  : e == 31 ? (f ? NAN : INFINITY) : ldexpf((float)(f | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* The 32 values of one block, as attn.h's "Quantized KV caches" lays them
 * out: Q8_0 q[i] x d, Q4_0 (nibble - 8) x d, one fp32 product each. */
static void deq_block(int type, const uint8_t *blk, float out[32])
{
    const float d = half_value((uint16_t)(blk[0] | blk[1] << 8));
    for (int i = 0; i < 32; i++) {
        const int q = type == ATTN_DTYPE_Q8_0 ? (int)(int8_t)blk[2 + i]
                    : (i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4) - 8;
        out[i] = (float)q * d;
    }
}

enum { QROW_MAX = 256 };

/* Row orig[0..dim) stored as type into buf (attn_quantize), row[] set to
 * the values the storage holds (attn_dequantize).  Returns 1 when
 * attn_dequantize agrees with deq_block (bitwise, or both NaN), 0
 * otherwise. */
static int q_store_row(int type, const float *orig, uint8_t *buf, float *row, int64_t dim)
{
    if (dim > QROW_MAX || attn_quantize((attn_dtype)type, orig, buf, dim) != ATTN_OK ||
        attn_dequantize((attn_dtype)type, buf, row, dim) != ATTN_OK)
        return 0;
    for (int64_t b = 0; b < dim / 32; b++) {
        float loc[32];
        deq_block(type, buf + st_bytes(type, 32 * b), loc);
        for (int i = 0; i < 32; i++) {
            const float x = row[32 * b + i];
            if (fbits(x) != fbits(loc[i]) && !(x != x && loc[i] != loc[i]))
                return 0;
        }
    }
    return 1;
}

/* --------------------------------------------------------------- cases */

enum { CHK_PAGED = 1, CHK_STORAGE = 2 };

/* The 12 quantized combinations (K type, V type): each block type with
 * F32, F16 or the other block type. */
static const int qcomb[12][2] = {
    { ATTN_DTYPE_Q8_0, ATTN_DTYPE_F32 },  { ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q8_0 },
    { ATTN_DTYPE_F16, ATTN_DTYPE_Q4_0 },  { ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q8_0 },
    { ATTN_DTYPE_Q4_0, ATTN_DTYPE_F16 },  { ATTN_DTYPE_F32, ATTN_DTYPE_Q8_0 },
    { ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q4_0 }, { ATTN_DTYPE_Q8_0, ATTN_DTYPE_F16 },
    { ATTN_DTYPE_F32, ATTN_DTYPE_Q4_0 },  { ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0 },
    { ATTN_DTYPE_Q4_0, ATTN_DTYPE_F32 },  { ATTN_DTYPE_F16, ATTN_DTYPE_Q8_0 },
};

typedef struct drow {
    const char *what;
    tcase c;
    /* quantized forms: qcombos of qcomb, qfirst, qfirst + 5, ... (mod
     * 12; where the dims are multiples of 32: the others check
     * ATTN_ERR_BAD_SIZE); valgrind (ATTN_TEST_QUICK): qquick only (-1:
     * none); qonly: only the quantized forms (which check the F32 call on
     * their values against the reference) */
    int qcombos, qfirst, qquick, qonly;
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

static void addq(const char *what, tcase c, int qcombos, int qfirst, int qquick, int qonly)
{
    rows[nrows].what = what;
    rows[nrows].c = c;
    rows[nrows].qcombos = qcombos;
    rows[nrows].qfirst = qfirst;
    rows[nrows].qquick = qquick;
    rows[nrows].qonly = qonly;
    nrows++;
}

static void add(const char *what, tcase c)
{
    addq(what, c, 0, 0, -1, 0);
}

static void build_table(void)
{
    tcase c;
    nrows = 0;
    addq("S5-like: 1 query, GQA 4, d 128", dcase(1, 8, 2, 1, 700, 128, 128), 1, 3, -1, 0);
    addq("MQA, d 64", dcase(2, 4, 1, 1, 300, 64, 64), 1, 6, 3, 0);
    /* (3 rows of d 128: two row blocks, a 16-bit V in runs of keys) */
    addq("GQA 3, d 128, 1 query", dcase(1, 6, 2, 1, 333, 128, 128), 1, 2, -1, 0);
    add("no GQA, odd dims (dk 37, dv 19)", dcase(2, 3, 3, 1, 129, 37, 19));
    c = dcase(2, 8, 2, 4, 520, 64, 64);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    addq("4 queries, bottom-right causal", c, 1, 9, -1, 0);
    c = dcase(1, 8, 2, 4, 600, 128, 160);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    addq("D3-like: 4 queries, GQA 4 (16 rows), dk 128, dv 160, bottom-right causal", c, 1, 4,
         -1, 0);
    c = dcase(3, 4, 2, 16, 300, 32, 48);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wr = 0;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 300; c.kv_lens[1] = 17; c.kv_lens[2] = 0;
    c.poison = 1;
    addq("16 queries, causal, kv lengths 300/17/0, poison", c, 1, 0, -1, 0);
    /* 64 items of D2's kind (one query, kv lengths): at 2 threads they go
     * in runs of 4, at 4 in runs of 2, at 3 one at a time (forward.c,
     * decode_run) */
    c = dcase(8, 16, 8, 1, 96, 32, 32);
    c.use_kv_lens = 1;
    for (int b = 0; b < 8; b++)
        c.kv_lens[b] = 12 * b + 5;
    add("8 sequences x 8 kv heads, kv lengths 5..89 (runs of items)", c);
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
    addq("BSHD, lse", c, 2, 4, 1, 0);
    c = dcase(2, 4, 2, 5, 77, 16, 8);
    c.layout = LAY_PADDED;
    c.out_layout = OUT_PADDED;
    c.misalign = 1;
    c.want_probs = 1;
    add("padded views, misaligned, probs", c);
    c = dcase(1, 2, 1, 1, 3000, 64, 64);
    c.in_mag = 3.0;
    addq("long cache (split over keys), large logits", c, 1, 1, -1, 0);
    c = dcase(1, 1, 1, 1, 1, 8, 8);
    add("one key", c);
    c = dcase(2, 4, 2, 8, 64, 16, 16);
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.wr = 0;
    c.want_lse = 1;
    add("8 queries, top-left causal (rows see few keys)", c);
    /* rows of head dims multiples of 32, for the quantized types */
    c = dcase(2, 6, 2, 2, 150, 96, 96);
    c.mask_mode = ATTN_MASK_DROP_NONZERO;
    c.mask_keep = 0.7;
    c.use_bias = 1;
    c.bias_mag = 2.0;
    c.bias_ninf = 0.05;
    c.want_probs = 1;
    c.want_lse = 1;
    addq("GQA 3, d 96: mask, bias with -inf, probs, lse", c, 3, 5, -1, 1);
    c = dcase(2, 4, 2, 3, 257, 128, 32);
    c.align = ATTN_ALIGN_BOTTOM_RIGHT;
    c.wl = 40;
    c.wr = 0;
    c.use_kv_lens = 1;
    c.kv_lens[0] = 200; c.kv_lens[1] = 257;
    c.use_q_lens = 1;
    c.q_lens[0] = 2; c.q_lens[1] = 3;
    c.poison = 1;
    addq("dk 128 dv 32: sliding window 40, both lengths, poison", c, 3, 8, 0, 1);
    c = dcase(1, 4, 1, 16, 90, 32, 64);
    c.layout = LAY_PADDED;
    c.out_layout = OUT_PADDED;
    c.misalign = 1;
    c.align = ATTN_ALIGN_TOP_LEFT;
    c.wr = 0;
    c.want_lse = 1;
    addq("MQA, dk 32 dv 64, 16 queries, top-left causal, padded", c, 2, 11, 9, 1);
    c = dcase(3, 6, 3, 9, 100, 64, 96);
    c.use_kv_lens = 1;
    c.kv_lens[0] = 100; c.kv_lens[1] = 33; c.kv_lens[2] = 1;
    c.use_bias = 1;
    c.bias_bcast = BC_HEAD | BC_SEQ;
    c.in_mag = 2.0;
    addq("GQA 2, dk 64 dv 96, 9 queries, kv lengths 100/33/1, broadcast bias", c, 3, 2, 6, 1);
}

/* ------------------------------------------------------ running a form */

/* One storage / placement of the instance's K and V. */
typedef struct form {
    int kt, vt;          /* attn_dtype */
    int64_t bs;          /* 0: contiguous */
    int pool_kind;       /* paged: 0 [blocks][H][bs][d], 1 [blocks][bs][H][d],
                            2 the same with 32-value gaps after every row
                            and 64 after every block */
    int own;             /* contiguous: 0 the harness's views (a block type:
                            its own [B][H][m][d] buffer), 1 own buffers
                            [B][m][H][d] with 32-value gaps, the pointer one
                            byte (one element) past the allocation */
} form;

typedef struct pool {
    void *k, *v;
    int32_t *table;
    void *own[2];
} pool;

/* Where the values of K (0) or V (1) come from: cur, the instance's
 * buffers (what the F32 call reads); orig, the same place in a copy of the
 * values before the block types' rounding; q, when the tensor is stored
 * as a block type (qtype), its rows [B][H][m] quantized from orig (what
 * every quantized form stores). */
typedef struct kvsrc {
    const float *cur, *orig;
    attn_view v;
    int64_t dim, H, m;
    int qtype;
    uint8_t *q;
} kvsrc;

static void *convert_buffer(const float *src, size_t count, int type)
{
    if (type == ATTN_DTYPE_F32)
        return NULL;
    uint16_t *d = malloc(count * sizeof(uint16_t) + 2);
    for (size_t i = 0; i < count; i++)
        d[i] = type == ATTN_DTYPE_F16 ? enc_f16(src[i]) : enc_bf16(src[i]);
    return d;
}

static const float *src_row(const kvsrc *s, int orig, int64_t b, int64_t h, int64_t j)
{
    return (orig ? s->orig : s->cur) + b * s->v.batch + h * s->v.head + j * s->v.seq;
}

/* The stored bytes of row (b, h, j) when the tensor is of block type
 * type (NULL: not quantized, or another type). */
static const uint8_t *src_qrow(const kvsrc *s, int type, int64_t b, int64_t h, int64_t j)
{
    if (!s->q || s->qtype != type)
        return NULL;
    return s->q + ((b * s->H + h) * s->m + j) * (int64_t)st_bytes(type, s->dim);
}

/* Quantize every row of tensor s as type into s->q, and set the
 * instance's values (s->cur) to those the storage holds.  Returns 0 when
 * attn_dequantize disagrees with the block layout (deq_block). */
static int make_qrows(kvsrc *s, int type, int64_t B)
{
    const size_t rb = st_bytes(type, s->dim);
    free(s->q);
    s->qtype = type;
    s->q = malloc((size_t)(B * s->H * s->m) * rb + 1);
    int ok = 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < s->H; h++)
            for (int64_t j = 0; j < s->m; j++)
                ok &= q_store_row(type, src_row(s, 1, b, h, j), s->q + ((b * s->H + h) * s->m + j) * rb,
                                  (float *)src_row(s, 0, b, h, j), s->dim);
    return ok;
}

/* A buffer of count values (rounded up to whole blocks, plus a tail) of a
 * storage type, every value unused: NaN (F32, F16, BF16), or blocks of a
 * NaN scale (random payload and sign) and random quants. */
static void *typed_alloc(int type, int64_t count, trng *g)
{
    const int64_t n = (count + 31) / 32 * 32 + 32;
    const size_t bytes = st_bytes(type, n) + 8;
    uint8_t *p = malloc(bytes);
    memset(p, 0xff, bytes);
    if (type == ATTN_DTYPE_F32) {
        float *f = (float *)(void *)p;
        for (int64_t i = 0; i < n; i++)
            f[i] = NAN;
    } else if (!is_q(type)) {
        uint16_t *h = (uint16_t *)(void *)p;
        for (int64_t i = 0; i < n; i++)
            h[i] = type == ATTN_DTYPE_F16 ? 0x7e00 : 0x7fc0;
    } else {
        const size_t bb = st_bytes(type, 32);
        for (int64_t k = 0; k < n / 32; k++) {
            uint8_t *blk = p + (size_t)k * bb;
            const uint64_t z = trng_next(g);
            const uint16_t scale = (uint16_t)(0x7c00 | (z & 0x8000) | (1 + (z >> 16) % 1023));
            blk[0] = (uint8_t)(scale & 0xff);
            blk[1] = (uint8_t)(scale >> 8);
            for (size_t x = 2; x < bb; x++)
                blk[x] = (uint8_t)(z >> (8 * (x % 8)));
        }
    }
    return p;
}

/* Value offset off of a buffer of a storage type: F32 and F16/BF16 rows
 * as the element types, block types the stored bytes q (none when the
 * dim or the offset is not one of whole blocks). */
static void put_row(int type, void *base, int64_t off, const float *cur, const uint8_t *q,
                    int64_t dim)
{
    if (type == ATTN_DTYPE_F32) {
        memcpy((float *)base + off, cur, (size_t)dim * sizeof(float));
    } else if (!is_q(type)) {
        uint16_t *d = (uint16_t *)base + off;
        for (int64_t x = 0; x < dim; x++)
            d[x] = type == ATTN_DTYPE_F16 ? enc_f16(cur[x]) : enc_bf16(cur[x]);
    } else if (q && dim % 32 == 0 && off % 32 == 0) {
        memcpy((uint8_t *)base + st_bytes(type, off), q, st_bytes(type, dim));
    }
}

static void set_ptr(attn_sdpa_args *a, int which, int type, const void *p)
{
    if (which) {
        a->v = type == ATTN_DTYPE_F32 ? p : NULL;
        a->v16 = type != ATTN_DTYPE_F32 && !is_q(type) ? p : NULL;
        a->vq = is_q(type) ? p : NULL;
    } else {
        a->k = type == ATTN_DTYPE_F32 ? p : NULL;
        a->k16 = type != ATTN_DTYPE_F32 && !is_q(type) ? p : NULL;
        a->kq = is_q(type) ? p : NULL;
    }
}

static size_t view_count(const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D)
{
    return (size_t)((B - 1) * v->batch + (H - 1) * v->head + (S - 1) * v->seq + D);
}

/* Build a paged copy: pool of B * maxb + 3 blocks in random order, unused
 * values everywhere not written (typed_alloc); unused table entries garbage
 * when lengths are on. */
static void build_pool(const tinst *t, const form *f, const kvsrc src[2], attn_sdpa_desc *d,
                       attn_sdpa_args *a, pool *pl, trng *r)
{
    const tcase *c = &t->c;
    const int64_t bs = f->bs, maxb = (c->m + bs - 1) / bs, nblk = c->B * maxb + 3;
    const int64_t H = c->Hkv;
    trng g;
    trng_seed(&g, trng_next(r) ^ 0x5bd1e995u);
    d->kv_block_size = bs;
    d->kv_max_blocks = maxb;
    d->kv_num_blocks = nblk;
    for (int which = 0; which < 2; which++) {
        const int64_t dim = which ? c->dv : c->dk;
        const int type = which ? f->vt : f->kt;
        attn_view pv = f->pool_kind == 1 ? (attn_view){ bs * H * dim, dim, H * dim }
                     : f->pool_kind == 2 ? (attn_view){ bs * (H * dim + 32) + 64, dim, H * dim + 32 }
                                         : (attn_view){ H * bs * dim, bs * dim, dim };
        void *buf = typed_alloc(type, (int64_t)view_count(&pv, nblk, H, bs, dim), &g);
        if (which) {
            d->v = pv;
            pl->v = buf;
        } else {
            d->k = pv;
            pl->k = buf;
        }
        set_ptr(a, which, type, buf);
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
                for (int64_t h = 0; h < H; h++)
                    for (int which = 0; which < 2; which++) {
                        const attn_view *pv = which ? &d->v : &d->k;
                        const int64_t off = perm[b * maxb + J] * pv->batch + h * pv->head +
                                            (j % bs) * pv->seq;
                        const int ty = which ? f->vt : f->kt;
                        put_row(ty, which ? pl->v : pl->k, off, src_row(&src[which], 0, b, h, j),
                                src_qrow(&src[which], ty, b, h, j), src[which].dim);
                    }
        }
    }
    free(perm);
    a->block_table = pl->table;
}

/* K (which 0) or V of the instance in a buffer of its own: [B][H][m][d]
 * (strides of the dim rounded up to 32, so that only the dim breaks the
 * block types' rules), or with own [B][m][H][d] with 32-value gaps, the
 * pointer one byte (block types) or one element past the allocation. */
static void *build_own(const tinst *t, int which, int type, int strided, const kvsrc *s,
                       attn_view *vw, void **alloc, trng *g)
{
    const tcase *c = &t->c;
    const int64_t B = c->B, H = c->Hkv, S = c->m, D = s->dim;
    const int64_t Dr = is_q(type) ? (D + 31) / 32 * 32 : D;
    if (strided) {
        vw->head = Dr + 32;
        vw->seq = H * vw->head + 32;
        vw->batch = S * vw->seq + 64;
    } else {
        *vw = (attn_view){ H * S * Dr, S * Dr, Dr };
    }
    uint8_t *buf = typed_alloc(type, (int64_t)view_count(vw, B, H, S, Dr) + 32, g);
    *alloc = buf;
    uint8_t *p = buf + (strided ? (is_q(type) ? 1 : st_bytes(type, 1)) : 0);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t j = 0; j < S; j++) {
                const int64_t off = b * vw->batch + h * vw->head + j * vw->seq;
                put_row(type, p, off, src_row(s, 0, b, h, j), src_qrow(s, type, b, h, j), D);
            }
    return p;
}

/* Run the instance in form f (decode on or off); snapshot the outputs. */
static attn_status run_form(tinst *t, const form *f, const kvsrc src[2], int decode, int threads,
                            tsnap *snap, uint64_t seed)
{
    attn_sdpa_desc d = t->desc;
    attn_sdpa_args a = t->args;
    pool pl = { NULL, NULL, NULL, { NULL, NULL } };
    void *conv[2] = { NULL, NULL };
    trng r;
    trng_seed(&r, seed);
    d.threads = threads;
    const tcase *c = &t->c;
    if (f->bs) {
        build_pool(t, f, src, &d, &a, &pl, &r);
    } else {
        for (int which = 0; which < 2; which++) {
            const int type = which ? f->vt : f->kt;
            attn_view *vw = which ? &d.v : &d.k;
            if (f->own || is_q(type)) {
                const void *p = build_own(t, which, type, f->own, &src[which], vw, &pl.own[which],
                                          &r);
                set_ptr(&a, which, type, p);
            } else if (type != ATTN_DTYPE_F32) {
                conv[which] = convert_buffer(which ? a.v : a.k,
                                             view_count(vw, c->B, c->Hkv, c->m,
                                                        which ? c->dv : c->dk), type);
                set_ptr(&a, which, type, conv[which]);
            }
        }
    }
    d.k_type = (attn_dtype)f->kt;
    d.v_type = (attn_dtype)f->vt;
    if (!decode)
        setenv("ATTN_DECODE", "0", 1);
    tinst_clear_outputs(t);
    attn_status st = attn_sdpa(&d, &a);
    unsetenv("ATTN_DECODE");
    if (snap)
        tsnap_take(snap, t);
    free(conv[0]);
    free(conv[1]);
    free(pl.k);
    free(pl.v);
    free(pl.table);
    free(pl.own[0]);
    free(pl.own[1]);
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

static void kv_sources(const tinst *t, const float *korig, const float *vorig, kvsrc src[2])
{
    src[0] = (kvsrc){ t->args.k, korig + (t->args.k - (const float *)t->k.base), t->desc.k,
                      t->c.dk, t->c.Hkv, t->c.m, 0, NULL };
    src[1] = (kvsrc){ t->args.v, vorig + (t->args.v - (const float *)t->v.base), t->desc.v,
                      t->c.dv, t->c.Hkv, t->c.m, 0, NULL };
}

/* The quantized forms of one row (see the header).  Returns the failures;
 * counts the forms compared bitwise and to the reference. */
static const struct {
    int64_t bs;
    int pool_kind, own, threads;
} qplace[5] = {
    { 0, 0, 0, 1 },      /* contiguous [B][H][m][d] */
    { 0, 0, 1, 2 },      /* strided [B][m][H][d], gaps, one byte off */
    { 1, 0, 0, 3 },      /* paged, bs 1, [H][bs][d] */
    { 3, 2, 0, 4 },      /* paged, bs 3, [bs][H][d] with gaps */
    { 16, 1, 0, 2 },     /* paged, bs 16, [bs][H][d] */
};

typedef struct qtally {
    int bitwise, ref, bad_size, turn, int8;
    tstats *sd, *sg, *sid, *sig;
} qtally;

/* Integer scores (desc.qk_int8) on one combination with a block-type K:
 * both paths against float64 on Q rounded by attn.h's rule (and K, V the
 * stored values), then placement pi (strided or paged) with its thread
 * count giving each path's bits (MKL: the sgemm path to the reference). */
static long q_int8(tinst *t, const drow *row, const kvsrc src[2], int kt, int vt, int pi,
                   int blas_is_mkl, qtally *qt)
{
    long bad = 0;
    float *qsave = malloc(t->q.count * sizeof(float));
    memcpy(qsave, t->q.base, t->q.count * sizeof(float));
    t->desc.qk_int8 = 1;
    for (int dec = 1; dec >= 0; dec--) {
        const form f0 = { kt, vt, 0, 0, 0 };
        tsnap base;
        attn_status st = run_form(t, &f0, src, dec, 1, &base, 21);
        /* Q's rows replaced by what integer scores use of them (restored below) */
        qk8_ref_round_view((float *)t->args.q, &t->desc.q, t->c.B, t->c.Hq, t->c.n, t->c.dk);
        const long e = st == ATTN_OK ? tinst_check(t, dec ? qt->sid : qt->sig) : 1;
        memcpy(t->q.base, qsave, t->q.count * sizeof(float));
        qt->int8++;
        if (e) {
            print_message("FAIL %s (%s path, integer scores, K %d V %d): %s\n", row->what,
                          dec ? "decode" : "sgemm", kt, vt,
                          st == ATTN_OK ? "off the reference on the rounded Q"
                                        : attn_status_str(st));
            bad++;
        }
        const form f = { kt, vt, qplace[pi].bs, qplace[pi].pool_kind, qplace[pi].own };
        tsnap s;
        st = run_form(t, &f, src, dec, qplace[pi].threads, &s, 31 + (uint64_t)pi);
        if (st != ATTN_OK || (dec || !blas_is_mkl ? !tsnap_equal(&s, &base) : 0)) {
            print_message("FAIL %s: %s path, integer scores, K %d V %d, placement %d, %d "
                          "threads: %s\n", row->what, dec ? "decode" : "sgemm", kt, vt, pi,
                          qplace[pi].threads,
                          st != ATTN_OK ? attn_status_str(st) : "bits differ from contiguous");
            bad++;
        }
        tsnap_free(&s);
        tsnap_free(&base);
    }
    t->desc.qk_int8 = 0;
    free(qsave);
    return bad;
}

static long q_forms(tinst *t, const drow *row, const float *korig, const float *vorig,
                    int blas_is_mkl, int quick, qtally *qt)
{
    const tcase *c = &t->c;
    long bad = 0;
    kvsrc src[2];
    kv_sources(t, korig, vorig, src);
    /* dims not multiples of 32: ATTN_ERR_BAD_SIZE, nothing written */
    for (int which = 0; which < 2; which++) {
        if ((which ? c->dv : c->dk) % 32 == 0)
            continue;
        for (int qt8 = 0; qt8 < 2; qt8++) {
            const int ty = qt8 ? ATTN_DTYPE_Q8_0 : ATTN_DTYPE_Q4_0;
            form f = { which ? ATTN_DTYPE_F32 : ty, which ? ty : ATTN_DTYPE_F32, 0, 0, 0 };
            const attn_status st = run_form(t, &f, src, 1, 1, NULL, 3);
            qt->bad_size++;
            if (st != ATTN_ERR_BAD_SIZE || !tinst_outputs_untouched(t)) {
                print_message("FAIL %s: %s %s with dim %lld: %s%s (expected BAD_SIZE)\n",
                              row->what, which ? "V" : "K", qt8 ? "Q8_0" : "Q4_0",
                              (long long)(which ? c->dv : c->dk), attn_status_str(st),
                              tinst_outputs_untouched(t) ? "" : ", outputs written");
                bad++;
            }
        }
    }
    /* combinations qfirst, qfirst + 5, ... (mod 12: every other group of
     * types first); valgrind (ATTN_TEST_QUICK): qquick */
    for (int ci = 0; ci < (quick ? row->qquick >= 0 : row->qcombos); ci++) {
        const int comb = quick ? row->qquick : (row->qfirst + ci * 5) % 12;
        const int kt = qcomb[comb][0], vt = qcomb[comb][1];
        if ((is_q(kt) && c->dk % 32) || (is_q(vt) && c->dv % 32))
            continue;
        /* the F32 instance on the values the storage holds */
        memcpy(t->k.base, korig, t->k.count * sizeof(float));
        memcpy(t->v.base, vorig, t->v.count * sizeof(float));
        int deq_ok = 1;
        for (int which = 0; which < 2; which++)
            if (is_q(which ? vt : kt))
                deq_ok &= make_qrows(&src[which], which ? vt : kt, c->B);
        if (!deq_ok) {
            print_message("FAIL %s: attn_dequantize (K %d, V %d) is not the block layout of "
                          "attn.h\n", row->what, kt, vt);
            bad++;
        }
        const form plain = { ATTN_DTYPE_F32, ATTN_DTYPE_F32, 0, 0, 0 };
        tsnap base[2];
        for (int dec = 1; dec >= 0; dec--) {
            const attn_status st = run_form(t, &plain, src, dec, 1, &base[dec], 1);
            long e = st == ATTN_OK ? tinst_check(t, dec ? qt->sd : qt->sg) : 1;
            if (e)
                print_message("FAIL %s (%s path, F32 on the values of K %d V %d): %s\n",
                              row->what, dec ? "decode" : "sgemm", kt, vt,
                              st == ATTN_OK ? "off the reference" : attn_status_str(st));
            bad += e != 0;
        }
        /* the placements: contiguous, and one of the four others by turn
         * over the table (their thread counts 2, 3, 4, 2) */
        const int other = 1 + qt->turn++ % 4;
        for (int pi = 0; pi < 5; pi++) {
            if (pi != 0 && pi != other)
                continue;
            const form f = { kt, vt, qplace[pi].bs, qplace[pi].pool_kind, qplace[pi].own };
            for (int dec = 1; dec >= 0; dec--) {
                tsnap s;
                const attn_status st = run_form(t, &f, src, dec, qplace[pi].threads, &s,
                                                11 + (uint64_t)pi + 5 * (uint64_t)ci);
                const int bitwise = dec || !blas_is_mkl;
                if (!bitwise && st == ATTN_OK) {
                    qt->ref++;
                    long e = tinst_check(t, qt->sg);
                    if (e) {
                        print_message("FAIL %s: sgemm path (MKL), K %d V %d placement %d: "
                                      "%ld elements off the reference\n",
                                      row->what, kt, vt, pi, e);
                        bad++;
                    }
                } else {
                    qt->bitwise++;
                    if (st != ATTN_OK || !tsnap_equal(&s, &base[dec])) {
                        print_message("FAIL %s: %s path, K %d V %d, block %lld pool %d own %d, "
                                      "%d threads: %s\n", row->what,
                                      dec ? "decode" : "sgemm", kt, vt, (long long)f.bs,
                                      f.pool_kind, f.own, qplace[pi].threads,
                                      st != ATTN_OK ? attn_status_str(st)
                                      : "bits differ from F32 on the de-quantized values");
                        bad++;
                    }
                }
                tsnap_free(&s);
            }
        }
        tsnap_free(&base[0]);
        tsnap_free(&base[1]);
        if (is_q(kt))
            bad += q_int8(t, row, src, kt, vt, other, blas_is_mkl, qt);
    }
    free(src[0].q);
    free(src[1].q);
    memcpy(t->k.base, korig, t->k.count * sizeof(float));
    memcpy(t->v.base, vorig, t->v.count * sizeof(float));
    return bad;
}

static void test_decode_table(void **state)
{
    (void)state;
    build_table();
    tstats sd, sg, sqd, sqg, sid, sig;
    tstats_init(&sd, "decode path");
    tstats_init(&sg, "sgemm path (ATTN_DECODE=0)");
    tstats_init(&sqd, "decode path, Q8_0/Q4_0 values");
    tstats_init(&sqg, "sgemm path, Q8_0/Q4_0 values");
    tstats_init(&sid, "decode path, integer scores (Q rounded)");
    tstats_init(&sig, "sgemm path, integer scores (Q rounded)");
    qtally qt = { 0, 0, 0, 0, 0, &sqd, &sqg, &sid, &sig };
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
        float *korig = malloc(t.k.count * sizeof(float));
        float *vorig = malloc(t.v.count * sizeof(float));
        memcpy(korig, t.k.base, t.k.count * sizeof(float));
        memcpy(vorig, t.v.base, t.v.count * sizeof(float));
        kvsrc src[2];
        kv_sources(&t, korig, vorig, src);
        const form plain = { 0, 0, 0, 0, 0 };
        tsnap base[2] = { { NULL, NULL, NULL, 0, 0, 0 }, { NULL, NULL, NULL, 0, 0, 0 } };
        for (int dec = 1; dec >= 0 && !rows[i].qonly; dec--) {
            attn_status st = run_form(&t, &plain, src, dec, 1, &base[dec], 1);
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
        for (int th = 2; th <= (quick ? 2 : 4) && !rows[i].qonly; th++) {
            tsnap s;
            run_form(&t, &plain, src, 1, th, &s, 1);
            if (!tsnap_equal(&s, &base[1])) {
                print_message("FAIL %s: decode with %d threads differs\n", rows[i].what, th);
                bad++;
            }
            tsnap_free(&s);
        }
        /* storage types and pages, each against the contiguous F32 bits of
         * the same path */
        for (int dec = 1; dec >= 0 && !rows[i].qonly; dec--)
            for (int ti = 0; ti < 9; ti++)
                for (int bi = -1; bi < 4; bi++) {
                    form f = { types[ti / 3], types[ti % 3], bi < 0 ? 0 : blocks[bi], bi == 2, 0 };
                    if (f.kt == 0 && f.vt == 0 && f.bs == 0)
                        continue;
                    /* every type with contiguous and block 3; the rest F16 K and V
                     * (quick: K and V of one type, contiguous and block 3) */
                    if (bi > 1 && !(f.kt == ATTN_DTYPE_F16 && f.vt == ATTN_DTYPE_F16) && ti != 0)
                        continue;
                    if (quick && (bi > 1 || bi == 0 || ti % 4 != 0))
                        continue;
                    tsnap s;
                    attn_status st = run_form(&t, &f, src, dec, 1 + (bi & 1), &s, 7 + (uint64_t)bi);
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
                                      (long long)f.bs, f.pool_kind ? " (bshd pool)" : "",
                                      st != ATTN_OK ? attn_status_str(st)
                                                    : "bits differ from contiguous F32");
                        bad++;
                    }
                    tsnap_free(&s);
                }
        tsnap_free(&base[0]);
        tsnap_free(&base[1]);
        /* Q8_0 and Q4_0 storage */
        bad += q_forms(&t, &rows[i], korig, vorig, blas_is_mkl, quick, &qt);
        free(korig);
        free(vorig);
        tinst_free(&t);
    }
    tstats_print(&sd);
    tstats_print(&sg);
    tstats_print(&sqd);
    tstats_print(&sqg);
    tstats_print(&sid);
    tstats_print(&sig);
    print_message("  %d cases, %d storage/paging forms compared bitwise, %d to the reference\n",
                  nrows, forms_checked - forms_ref, forms_ref);
    print_message("  Q8_0/Q4_0: %d forms compared bitwise, %d to the reference, %d "
                  "BAD_SIZE checks; integer scores: %d calls against the reference\n",
                  qt.bitwise, qt.ref, qt.bad_size, qt.int8);
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
    kvsrc src[2];
    kv_sources(&t, t.k.base, t.v.base, src);
    const form f = { ATTN_DTYPE_F16, ATTN_DTYPE_F32, 8, 0, 0 };
    attn_sdpa_desc d = t.desc;
    attn_sdpa_args a = t.args;
    pool pl = { NULL, NULL, NULL, { NULL, NULL } };
    trng r;
    trng_seed(&r, 3);
    build_pool(&t, &f, src, &d, &a, &pl, &r);
    d.k_type = ATTN_DTYPE_F16;
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
        { "kq given for F16 storage", ATTN_ERR_ARGUMENT_MISMATCH, 9 },
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
        case 5: aa.v16 = a.k16; break;
        case 6: aa.block_table = NULL; break;
        case 7: dd = t.desc; aa = t.args; aa.block_table = table; break;
        case 8: lens[1] = 41; break;
        case 9: aa.kq = a.k16; break;
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
    free(pl.k);
    free(pl.v);
    free(pl.table);
    tinst_free(&t);
}

/* The block types' own rules: pointers (args.kq / args.vq, the others
 * NULL), strides multiples of 32 (contiguous and paged), only as K/V
 * storage of the dense forward (attn.h, "Quantized KV caches"). */
static void test_decode_quant_errors(void **state)
{
    (void)state;
    tcase c = dcase(2, 4, 2, 1, 40, 32, 64);
    tinst t;
    assert_int_equal(tinst_build(&t, &c), 0);
    kvsrc src[2];
    kv_sources(&t, t.k.base, t.v.base, src);
    trng g;
    trng_seed(&g, 5);
    attn_sdpa_desc d = t.desc;
    attn_sdpa_args a = t.args;
    void *own[2];
    set_ptr(&a, 0, ATTN_DTYPE_Q8_0, build_own(&t, 0, ATTN_DTYPE_Q8_0, 0, &src[0], &d.k, &own[0], &g));
    set_ptr(&a, 1, ATTN_DTYPE_Q4_0, build_own(&t, 1, ATTN_DTYPE_Q4_0, 1, &src[1], &d.v, &own[1], &g));
    d.k_type = ATTN_DTYPE_Q8_0;
    d.v_type = ATTN_DTYPE_Q4_0;
    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa(&d, &a), ATTN_OK);
    /* and paged (block 8): a pool stride off a block is BAD_STRIDE too */
    const form fp = { ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q8_0, 8, 0, 0 };
    attn_sdpa_desc dp = t.desc;
    attn_sdpa_args ap = t.args;
    pool pl = { NULL, NULL, NULL, { NULL, NULL } };
    build_pool(&t, &fp, src, &dp, &ap, &pl, &g);
    dp.k_type = ATTN_DTYPE_Q4_0;
    dp.v_type = ATTN_DTYPE_Q8_0;
    tinst_clear_outputs(&t);
    assert_int_equal(attn_sdpa(&dp, &ap), ATTN_OK);
    static const float junkf[4];
    static const uint16_t junk16[4];
    struct {
        const char *what;
        attn_status want;
        int which;
    } errs[] = {
        { "kq NULL", ATTN_ERR_NULL_ARGUMENT, 0 },
        { "vq NULL", ATTN_ERR_NULL_ARGUMENT, 1 },
        { "k given besides kq", ATTN_ERR_ARGUMENT_MISMATCH, 2 },
        { "v16 given besides vq", ATTN_ERR_ARGUMENT_MISMATCH, 3 },
        { "K seq stride 33", ATTN_ERR_BAD_STRIDE, 4 },
        { "K head stride + 16", ATTN_ERR_BAD_STRIDE, 5 },
        { "V batch stride + 1", ATTN_ERR_BAD_STRIDE, 6 },
        { "paged: K pool block stride + 16", ATTN_ERR_BAD_STRIDE, 7 },
        { "paged: V pool seq stride 80", ATTN_ERR_BAD_STRIDE, 8 },
        { "q_type Q8_0", ATTN_ERR_UNSUPPORTED_TYPE, 9 },
        { "o_type Q4_0", ATTN_ERR_UNSUPPORTED_TYPE, 10 },
        { "global keys with Q8_0 K", ATTN_ERR_UNSUPPORTED_TYPE, 11 },
        { "k_type 5", ATTN_ERR_BAD_OPTION, 12 },
        { "v_dim 48 with Q4_0 V", ATTN_ERR_BAD_SIZE, 13 },
    };
    for (size_t e = 0; e < sizeof errs / sizeof errs[0]; e++) {
        attn_sdpa_desc dd = d;
        attn_sdpa_args aa = a;
        uint8_t gk[2 * 40];
        memset(gk, 1, sizeof gk);
        switch (errs[e].which) {
        case 0: aa.kq = NULL; break;
        case 1: aa.vq = NULL; break;
        case 2: aa.k = junkf; break;
        case 3: aa.v16 = junk16; break;
        case 4: dd.k.seq = 33; break;
        case 5: dd.k.head += 16; break;
        case 6: dd.v.batch += 1; break;
        case 7: dd = dp; aa = ap; dd.k.batch += 16; break;
        case 8: dd = dp; aa = ap; dd.v.seq = 80; break;
        case 9: dd.q_type = ATTN_DTYPE_Q8_0; aa.q16 = (const uint16_t *)aa.q; aa.q = NULL; break;
        case 10: dd.o_type = ATTN_DTYPE_Q4_0; aa.o16 = (uint16_t *)aa.o; aa.o = NULL; break;
        case 11: dd.use_global_k = 1; aa.global_k = gk; break;
        case 12: dd.k_type = (attn_dtype)5; break;
        case 13: dd.v_dim = 48; break;
        }
        tinst_clear_outputs(&t);
        attn_status st = attn_sdpa(&dd, &aa);
        if (st != errs[e].want || !tinst_outputs_untouched(&t))
            print_message("FAIL %s: got %s\n", errs[e].what, attn_status_str(st));
        assert_int_equal(st, errs[e].want);
        assert_true(tinst_outputs_untouched(&t));
    }
    free(own[0]);
    free(own[1]);
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
        cmocka_unit_test(test_decode_quant_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
