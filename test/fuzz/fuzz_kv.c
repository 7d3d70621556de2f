/*
 * fuzz_kv.c -- K/V storage types and the paged cache of an SDPA problem
 * (byte 0 bit 6, SEL_KV; fuzz_sdpa.c calls the stages below), and the KV
 * rules attn_kv_append shares (fuzz_kv_append.c).
 *
 * decode_kv: k_type and v_type F32, F16 or BF16 each, and mostly a paged
 * cache (block size 1, 2, 3 or 16; a pool with extra blocks in random
 * order, decoded pool views, NaN, +Inf or random bits in unused blocks,
 * rows past the lengths and gaps; garbage table entries past each
 * sequence's last block: out of range, another sequence's block, random),
 * with one planted invalid KV field of its own (KB_*: a needed table entry
 * out of range, table NULL or unexpected, the K/V pointer of the storage
 * type NULL or the other one given, an unknown type, paging fields, a
 * sparse option with them, K/V views) besides byte 1's.  The reference
 * reads the stored values widened (attn_dtype_decode) from contiguous
 * F32 buffers; a paged problem is rerun contiguously (bitwise equal), and
 * one with q_len <= 16 with ATTN_DECODE=0 (the sgemm path, within the
 * reference's bounds, and bitwise the F32 call on the stored values
 * where Q and O are F32, except with MKL).  Bit 6 was cleared in every
 * committed input before it got this meaning (the decoder ignored it).
 *
 * Q8_0 and Q4_0 (attn.h, "Quantized KV caches"): when the KV byte z has
 * bits 0, 1 and 3 set (no committed input had: their meaning stays), one
 * more byte (decode_kvq) makes K and/or V Q8_0 or Q4_0 (the other keeps
 * its decoded type), their dims 32 x the decoded ones and their views
 * gen_view's over blocks of 32 values (strides x 32; the packed QKV layout
 * is not taken), or plants a dim not a multiple of 32 (ATTN_ERR_BAD_SIZE)
 * or a view stride off 32 (ATTN_ERR_BAD_STRIDE).  The blocks are
 * attn_quantize's of the float pool's values (NaN where never read: a
 * whole block of NaN), the reference and the F32 twins read their
 * attn_dequantize; a paged pool holds blocks of a NaN or +Inf scale or
 * random bytes where unused, exactly to its last block.  The F32 twins
 * (qo_twin; here the ATTN_DECODE=0 one) must give the quantized call's
 * bits.
 *
 * Integer scores (attn.h): bit 6 of that byte sets desc.qk_int8 when K is
 * Q8_0 or Q4_0, Q is F32 and nothing KV-related is planted invalid (bits
 * 6 and 7 were unused; committed inputs with bit 6 set now take the
 * option).  The reference then reads Q rounded by attn.h's rule
 * (test/qk8_ref.c) from a copy of the pool; the paged, thread and
 * ATTN_DECODE=0 reruns hold as before, the F32 twin on the stored values
 * does not apply (an F32 K takes no integer scores).
 */
#include "fuzz_sdpa.h"
#include "../qk8_ref.h"


/* attn.h, "Decoding and the KV cache": k_type and v_type F32, F16 or
 * BF16; kv_block_size >= 0, and kv_num_blocks / kv_max_blocks zero without
 * paging (else ATTN_ERR_BAD_OPTION); paging does not combine with the
 * sparse options (ATTN_ERR_BAD_OPTION), the storage types do. */
int dtype_ok(int t)
{
    return t == ATTN_DTYPE_F32 || t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16;
}
int dtype_block(int t)
{
    return t == ATTN_DTYPE_Q8_0 || t == ATTN_DTYPE_Q4_0;
}
int kv_dtype_ok(int t)
{
    return dtype_ok(t) || dtype_block(t);
}
size_t kv_bytes(int t, int64_t n)
{
    if (dtype_block(t))
        return (size_t)((n + 31) / 32) * (t == ATTN_DTYPE_Q8_0 ? 34u : 18u);
    return (size_t)n * (t == ATTN_DTYPE_F32 ? 4u : 2u);
}
double dtype_u2(attn_dtype t)
{
    return t == ATTN_DTYPE_BF16 ? 0x1p-8 : t == ATTN_DTYPE_F16 ? 0x1p-10 : 0.0;
}
int kv_plain(const attn_sdpa_desc *d)
{
    return d->k_type == ATTN_DTYPE_F32 && d->v_type == ATTN_DTYPE_F32 && d->kv_block_size == 0;
}
void expect_kv_options(expect *e, const attn_sdpa_desc *d)
{
    if (!kv_dtype_ok(d->k_type) || !kv_dtype_ok(d->v_type))
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
    if (d->kv_block_size < 0 ||
        (d->kv_block_size == 0 && (d->kv_num_blocks != 0 || d->kv_max_blocks != 0)))
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
}
/* The paging sizes and the K and V views (batch, kv_heads, kv_len, qk_dim
 * and v_dim known positive): with paging, kv_num_blocks or kv_max_blocks
 * <= 0 or m > kv_max_blocks x kv_block_size are ATTN_ERR_BAD_SIZE, any of
 * the three past INT32_MAX ATTN_ERR_TOO_LARGE, and the views are checked
 * against [kv_num_blocks][Hkv][bs][d]; without, [B][Hkv][m][d]. */
void expect_kv_views(expect *e, const attn_sdpa_desc *d)
{
    const int64_t B = d->batch, Hkv = d->kv_heads, m = d->kv_len, bs = d->kv_block_size,
                  nb = d->kv_num_blocks, mb = d->kv_max_blocks;
    /* (the block types' views count values and are held to the fp32 byte
     * limit) */
    const int k16 = d->k_type != ATTN_DTYPE_F32 && !dtype_block(d->k_type);
    const int v16 = d->v_type != ATTN_DTYPE_F32 && !dtype_block(d->v_type);
    if (bs <= 0) {
        expect_view_es(e, &d->k, B, Hkv, m, d->qk_dim, VK_INPUT, k16);
        expect_view_es(e, &d->v, B, Hkv, m, d->v_dim, VK_INPUT, v16);
        return;
    }
    if (nb <= 0 || mb <= 0) {
        e->must |= BIT(ATTN_ERR_BAD_SIZE);
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_BAD_STRIDE) |
                    BIT(ATTN_ERR_STRIDES_UNSET);
        return;
    }
    if (bs > INT32_MAX || nb > INT32_MAX || mb > INT32_MAX) {
        e->must |= BIT(ATTN_ERR_TOO_LARGE);
        e->maybe |= BIT(ATTN_ERR_BAD_SIZE);
    } else if (m > mb * bs) {
        e->must |= BIT(ATTN_ERR_BAD_SIZE);
    }
    int64_t t;
    if (__builtin_mul_overflow(B, mb, &t) || t > INT64_MAX / 4)
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE); /* the table's bytes: not in attn.h */
    expect_view_es(e, &d->k, nb, Hkv, bs, d->qk_dim, VK_INPUT, k16);
    expect_view_es(e, &d->v, nb, Hkv, bs, d->v_dim, VK_INPUT, v16);
}

/* "Quantized KV caches": qk_dim (v_dim) a multiple of 32 for a block-type
 * K (V), else ATTN_ERR_BAD_SIZE; every stride of its view a multiple of
 * 32, else ATTN_ERR_BAD_STRIDE; the SDPA forward takes them dense only
 * (the sparse options: ATTN_ERR_UNSUPPORTED_TYPE). */
void expect_kv_blocks(expect *e, const attn_sdpa_desc *d, int sdpa)
{
    for (int t = 0; t < 2; t++) {
        const attn_dtype ty = t ? d->v_type : d->k_type;
        const attn_view *v = t ? &d->v : &d->k;
        if (!dtype_block(ty))
            continue;
        if ((t ? d->v_dim : d->qk_dim) % 32 != 0)
            e->must |= BIT(ATTN_ERR_BAD_SIZE);
        if (v->batch % 32 || v->head % 32 || v->seq % 32)
            e->must |= BIT(ATTN_ERR_BAD_STRIDE);
        if (sdpa && (d->use_global_k || d->use_global_q || d->block_size != 0))
            e->must |= BIT(ATTN_ERR_UNSUPPORTED_TYPE);
    }
}

void expect_kv_pointers(expect *e, const attn_sdpa_desc *d, const attn_sdpa_args *a)
{
    for (int t = 0; t < 2; t++) {
        const attn_dtype ty = t ? d->v_type : d->k_type;
        const void *p[3] = { t ? (const void *)a->v : (const void *)a->k,
                             t ? (const void *)a->v16 : (const void *)a->k16,
                             t ? a->vq : a->kq };
        const int use = ty == ATTN_DTYPE_F32 ? 0 : dtype_block(ty) ? 2 : 1;
        if (!p[use])
            e->must |= BIT(ATTN_ERR_NULL_ARGUMENT);
        for (int k = 0; k < 3; k++)
            if (k != use && p[k])
                e->must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
    }
}

void decode_kvq(rd *r, kv_q *q)
{
    /* which tensors, of which type: K, V, both */
    static const int sel[8][2] = {
        { ATTN_DTYPE_Q8_0, 0 }, { ATTN_DTYPE_Q4_0, 0 }, { 0, ATTN_DTYPE_Q8_0 },
        { 0, ATTN_DTYPE_Q4_0 }, { ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q8_0 },
        { ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0 }, { ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q8_0 },
        { ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q4_0 },
    };
    const unsigned b = u8(r);
    memset(q, 0, sizeof *q);
    q->on = 1;
    q->qt[0] = (attn_dtype)sel[b % 8][0];
    q->qt[1] = (attn_dtype)sel[b % 8][1];
    const unsigned kind = (b >> 3) % 4; /* 0, 1 valid */
    q->odd = kind == 2;
    q->badst = kind == 3;
    /* the tensor the invalid field is planted in: a quantized one */
    q->which = (b >> 5) & 1;
    if (!dtype_block(q->qt[q->which]))
        q->which ^= 1;
    q->int8 = (b >> 6) & 1;
    if (q->badst) {
        const unsigned w = u8(r);
        q->st = (int)(w % 3);
        q->off = 1 + (int64_t)(w / 3) % 31;
    }
}

/* A dim of 1 to 6, never a multiple of 32: 1, 34, 35, 68, 69, 102. */
static int64_t odd_dim(int64_t d)
{
    return 32 * (d / 2) + d;
}

void kvq_dims(const kv_q *q, int64_t *dk, int64_t *dv)
{
    if (!q->on)
        return;
    int64_t *dd[2] = { dk, dv };
    for (int t = 0; t < 2; t++)
        if (dtype_block(q->qt[t]))
            *dd[t] = q->odd && q->which == t ? odd_dim(*dd[t]) : 32 * *dd[t];
}

attn_view kvq_view(rd *r, const kv_q *q, int t, const int64_t sz[3], int64_t D, int call)
{
    if (!q->on || !dtype_block(q->qt[t]) || D % 32)
        return gen_view(r, sz, D);
    attn_view v = gen_view(r, sz, D / 32);
    v.batch *= 32;
    v.head *= 32;
    v.seq *= 32;
    if (call && q->badst && q->which == t) {
        int64_t *s = q->st == 0 ? &v.batch : q->st == 1 ? &v.head : &v.seq;
        *s += q->off;
    }
    return v;
}

void kv_apply_q(kv_cfg *c, int64_t *dk, int64_t *dv)
{
    if (!c->q.on)
        return;
    if (dtype_block(c->q.qt[0]))
        c->kt = c->q.qt[0];
    if (dtype_block(c->q.qt[1]))
        c->vt = c->q.qt[1];
    kvq_dims(&c->q, dk, dv);
}

void decode_kv(rd *r, kv_cfg *c, int64_t B, int64_t m)
{
    static const int64_t bss[4] = { 1, 2, 3, 16 };
    const unsigned x = u8(r), y = u8(r), z = u8(r);
    c->on = 1;
    c->kt = (attn_dtype)(x % 3);
    c->vt = (attn_dtype)(x / 3 % 3);
    c->paged = (x / 9) % 4 != 0;
    c->bs = bss[y & 3];
    const int64_t per = (m + c->bs - 1) / c->bs; /* blocks of the longest sequence */
    c->mb = per + (int64_t)((y >> 2) & 3);
    c->nb = B * per + (int64_t)((y >> 4) & 3);
    c->garb = y >> 6;
    c->bad = z < 128 ? KB_NONE : 1 + (z - 128) % (KB_COUNT_ - 1);
    /* the block types (no committed input has these bits of z set) */
    if ((z & 0x0b) == 0x0b)
        decode_kvq(r, &c->q);
    else
        memset(&c->q, 0, sizeof c->q);
}


static const uint16_t nan16[3] = { 0, 0x7e00, 0x7fc0 }; /* quiet NaN of F16, BF16 */

void kv_store_free(kv_store *S)
{
    for (int t = 0; t < 2; t++) {
        free(S->c16[t]);
        free(S->cq[t]);
        free(S->w[t]);
        free(S->cf[t]);
        free(S->pool[t]);
    }
    free(S->table);
    memset(S, 0, sizeof *S);
}

/* The blocks of n values (n rounded up to whole blocks; the values past n
 * NaN) of src as type ty, and their widening into w (n rounded up too). */
static void kv_quantize(attn_dtype ty, const float *src, int64_t n, uint8_t *dst, float *w)
{
    const int64_t whole = n / 32 * 32;
    if (attn_quantize(ty, src, dst, whole) != ATTN_OK)
        FAIL("attn_quantize of the K/V values failed");
    if (whole < n) {
        float last[32];
        for (int i = 0; i < 32; i++)
            last[i] = whole + i < n ? src[whole + i] : NAN;
        if (attn_quantize(ty, last, dst + kv_bytes(ty, whole), 32) != ATTN_OK)
            FAIL("attn_quantize of the K/V values failed");
    }
    if (attn_dequantize(ty, dst, w, (n + 31) / 32 * 32) != ATTN_OK)
        FAIL("attn_dequantize of the K/V values failed");
}

/* Unused pool blocks: a NaN (garb 0, 1) or +Inf (3) scale, or random
 * bytes (2). */
static void kv_junk_blocks(uint8_t *p, size_t bytes, attn_dtype ty, unsigned garb, prng *g)
{
    const size_t bb = kv_bytes(ty, 32);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (uint8_t)pr_next(g);
    if (garb == 2)
        return;
    for (size_t o = 0; o + 1 < bytes; o += bb) {
        const uint16_t h = garb == 3 ? 0x7c00 : 0x7e00;
        p[o] = (uint8_t)(h & 0xff);
        p[o + 1] = (uint8_t)(h >> 8);
    }
}

/* One tensor: src the float pool at the contiguous view's origin (ext
 * elements), cv that view, pv the pool view of pext elements. */
static void kv_store_tensor(kv_store *S, int t, const kv_cfg *c, attn_dtype ty, const float *src,
                            int64_t ext, const attn_view *cv, const attn_view *pv, int64_t pext,
                            int64_t B, int64_t Hkv, int64_t D, const int32_t *klens, prng *g)
{
    const int blk = dtype_block(ty);
    const int64_t extr = (ext + 31) / 32 * 32;
    if (blk) {
        S->cq[t] = xmalloc(kv_bytes(ty, ext));
        S->w[t] = xmalloc((size_t)extr * sizeof(float));
        kv_quantize(ty, src, ext, S->cq[t], S->w[t]);
    } else if (ty != ATTN_DTYPE_F32) {
        S->c16[t] = xmalloc((size_t)ext * sizeof(uint16_t));
        S->w[t] = xmalloc((size_t)ext * sizeof(float));
        if (attn_dtype_encode(ty, src, S->c16[t], ext) != ATTN_OK ||
            attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK)
            FAIL("attn_convert of the K/V values failed");
    }
    if (!c->paged)
        return;
    const size_t es = ty == ATTN_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    const size_t pbytes = kv_bytes(ty, pext);
    S->pool[t] = xmalloc(pbytes ? pbytes : 1);
    /* unused blocks, rows past the lengths and gaps: NaN, +Inf or random */
    if (blk)
        kv_junk_blocks(S->pool[t], pbytes, ty, c->garb, g);
    for (int64_t i = 0; i < pext && !blk; i++) {
        uint32_t bits = c->garb == 2 ? (uint32_t)pr_next(g) : c->garb == 3 ? 0x7f800000u : 0x7fc00000u;
        if (ty == ATTN_DTYPE_F32)
            memcpy((float *)S->pool[t] + i, &bits, 4);
        else
            ((uint16_t *)S->pool[t])[i] = c->garb == 2 ? (uint16_t)bits
                                          : c->garb == 3 ? (ty == ATTN_DTYPE_F16 ? 0x7c00 : 0x7f80)
                                                         : nan16[ty];
    }
    /* The rows, those holding a NaN first: a pool view may overlap itself
     * (a valid input view), and then the finite rows win.  Then the
     * contiguous values are gathered back from the pool, so that the
     * reference and the contiguous twin read what the paged call reads.
     * (Block types: rows of whole blocks only; other views fail the
     * plan.) */
    if (ty == ATTN_DTYPE_F32) {
        S->cf[t] = xmalloc((size_t)ext * sizeof(float));
        memcpy(S->cf[t], src, (size_t)ext * sizeof(float));
    }
    for (int pass = 0; pass < 3; pass++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t J = 0; J < S->nbl[b]; J++) {
                const int64_t blkid = S->table[b * c->mb + J];
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t jj = 0; jj < c->bs && J * c->bs + jj < klens[b]; jj++) {
                        const int64_t j = J * c->bs + jj;
                        const int64_t so = b * cv->batch + h * cv->head + j * cv->seq;
                        const int64_t po = blkid * pv->batch + h * pv->head + jj * pv->seq;
                        if (blk && (so % 32 || po % 32 || D % 32))
                            continue;
                        void *prow = blk ? (void *)((uint8_t *)S->pool[t] + kv_bytes(ty, po))
                                   : ty == ATTN_DTYPE_F32 ? (void *)((float *)S->pool[t] + po)
                                                          : (void *)((uint16_t *)S->pool[t] + po);
                        void *crow = blk ? (void *)(S->cq[t] + kv_bytes(ty, so))
                                   : ty == ATTN_DTYPE_F32 ? (void *)(S->cf[t] + so)
                                                          : (void *)(S->c16[t] + so);
                        const size_t bytes = blk ? kv_bytes(ty, D) : (size_t)D * es;
                        if (pass == 2) {
                            memcpy(crow, prow, bytes);
                            continue;
                        }
                        int has_nan = 0;
                        for (int64_t x = 0; x < D; x++)
                            if (isnan(ty == ATTN_DTYPE_F32 ? (double)S->cf[t][so + x]
                                                           : (double)S->w[t][so + x]))
                                has_nan = 1;
                        if (has_nan == (pass == 0))
                            memcpy(prow, crow, bytes);
                    }
            }
    if (blk) {
        if (attn_dequantize(ty, S->cq[t], S->w[t], extr) != ATTN_OK)
            FAIL("attn_dequantize of the K/V values failed");
    } else if (ty != ATTN_DTYPE_F32 && attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK) {
        FAIL("attn_convert of the K/V values failed");
    }
}

/* The block table: the blocks holding tokens [0, klens[b]) of every
 * sequence get distinct pool blocks in random order; entries past them
 * hold garbage (out of range, another sequence's block, random). */
static void kv_table(kv_store *S, const kv_cfg *c, int64_t B, const int32_t *klens, prng *g)
{
    int32_t *perm = xmalloc((size_t)c->nb * sizeof(int32_t));
    for (int64_t i = 0; i < c->nb; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = c->nb - 1; i > 0; i--) {
        const int64_t k = (int64_t)(pr_next(g) % (uint64_t)(i + 1));
        const int32_t x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    S->table = xmalloc((size_t)(B * c->mb) * sizeof(int32_t));
    int64_t used = 0;
    for (int64_t b = 0; b < B; b++) {
        S->nbl[b] = (klens[b] + c->bs - 1) / c->bs;
        for (int64_t J = 0; J < c->mb; J++) {
            int32_t id;
            if (J < S->nbl[b]) {
                id = perm[used++];
            } else {
                switch (pr_next(g) % 6) {
                case 0: id = -1; break;
                case 1: id = (int32_t)c->nb; break;
                case 2: id = INT32_MAX; break;
                case 3: id = INT32_MIN; break;
                case 4: id = perm[pr_next(g) % (uint64_t)c->nb]; break;
                default: id = (int32_t)pr_next(g); break;
                }
            }
            S->table[b * c->mb + J] = id;
        }
    }
    free(perm);
}

/* A planted KB_* field (after the buffers exist: they follow the decoded,
 * valid configuration). */
void kv_plant(rd *r, const kv_cfg *c, kv_store *S, attn_sdpa_desc *d, attn_sdpa_args *a)
{
    static const int32_t junk_table[8];
    static const uint16_t junk16[8];
    static const float junkf[8];
    switch (c->bad) {
    case KB_TABLE_RANGE: {
        if (!S->table)
            break;
        const int64_t b0 = pick(r, (unsigned)d->batch);
        for (int64_t k = 0; k < d->batch; k++) {
            const int64_t b = (b0 + k) % d->batch;
            if (S->nbl[b] == 0)
                continue;
            static const int32_t bad_id[5] = { -1, 0, INT32_MAX, INT32_MIN, -2 };
            const unsigned w = pick(r, 5);
            S->table[b * c->mb + pick(r, (unsigned)S->nbl[b])] =
                w == 1 ? (int32_t)c->nb + (int32_t)pick(r, 3) : bad_id[w];
            break;
        }
        break;
    }
    case KB_TABLE_NULL: a->block_table = NULL; break;
    case KB_TABLE_EXTRA: if (!a->block_table) a->block_table = junk_table; break;
    case KB_PTR_NULL:
        if (u8(r) & 1) {
            if (dtype_block(d->k_type)) a->kq = NULL;
            else if (d->k_type != ATTN_DTYPE_F32) a->k16 = NULL;
            else a->k = NULL;
        } else {
            if (dtype_block(d->v_type)) a->vq = NULL;
            else if (d->v_type != ATTN_DTYPE_F32) a->v16 = NULL;
            else a->v = NULL;
        }
        break;
    case KB_PTR_EXTRA: {
        /* (a block type: the F32 or, with bit 1, the 16-bit pointer too) */
        const unsigned w = u8(r);
        if (w & 1) {
            if (dtype_block(d->k_type) && (w & 2)) a->k16 = junk16;
            else if (d->k_type != ATTN_DTYPE_F32) a->k = junkf;
            else a->k16 = junk16;
        } else {
            if (dtype_block(d->v_type) && (w & 2)) a->v16 = junk16;
            else if (d->v_type != ATTN_DTYPE_F32) a->v = junkf;
            else a->v16 = junk16;
        }
        break;
    }
    case KB_TYPE: {
        /* unknown types (3 and 4 were, before Q8_0 and Q4_0) */
        static const int bad_t[4] = { 5, 6, -1, 255 };
        const int v = bad_t[pick(r, 4)];
        if (u8(r) & 1) d->k_type = (attn_dtype)v; else d->v_type = (attn_dtype)v;
        break;
    }
    case KB_PAGING: {
        const unsigned w = pick(r, 6);
        if (!c->paged) {
            if (w < 2) d->kv_num_blocks = 1 + (int64_t)u8(r);
            else if (w < 4) d->kv_max_blocks = (u8(r) & 1) ? -1 : 1 + (int64_t)u8(r);
            else if (w == 4) d->kv_block_size = -1 - (int64_t)u8(r);
            else d->kv_block_size = 1 + pick(r, 16); /* paged with no blocks */
            break;
        }
        static const int64_t huge32[3] = { (int64_t)INT32_MAX + 1, (int64_t)1 << 40, INT64_MAX };
        switch (w) {
        case 0: d->kv_block_size = (u8(r) & 1) ? -1 : INT64_MIN; break;
        case 1: d->kv_num_blocks = -(int64_t)pick(r, 3); break;
        case 2: d->kv_max_blocks = -(int64_t)pick(r, 3); break;
        case 3: d->kv_max_blocks = (d->kv_len - 1) / d->kv_block_size; /* m > mb x bs */
                if (d->kv_max_blocks == 0) d->kv_max_blocks = -1;
                break;
        case 4: d->kv_num_blocks = huge32[pick(r, 3)]; break;
        default:
            if (u8(r) & 1) d->kv_max_blocks = huge32[pick(r, 3)];
            else d->kv_block_size = huge32[pick(r, 3)];
            break;
        }
        break;
    }
    case KB_SPARSE:
        /* A decoded layout keeps its block size: the layout array was
         * sized by it (a plant of 16 over 256 made a valid plan read a
         * 4-byte layout as 62 bytes; CI's fuzz run). */
        if (u8(r) & 1) d->use_global_k = 1; else if (!d->block_size) d->block_size = 16;
        break;
    case KB_VIEW: {
        attn_view *v = (u8(r) & 1) ? &d->k : &d->v;
        switch (pick(r, 4)) {
        case 0: v->seq = (v == &d->k ? d->qk_dim : d->v_dim) - 1; break;
        case 1: v->batch = -1 - (int64_t)u8(r); break;
        case 2: v->head = ATTN_STRIDE_UNSET; break;
        default: v->seq = (int64_t)1 << 61; break;
        }
        break;
    }
    default: break;
    }
}

/* Run desc/args into P's outputs (cleared first); ATTN_DECODE=0 when
 * nodecode (read at plan time: the sgemm path). */
static attn_status kv_run(sdpa_prob *P, const attn_sdpa_desc *d, const attn_sdpa_args *a,
                          int nodecode)
{
    sdpa_clear(P);
    const char *old = getenv("ATTN_DECODE");
    char *saved = old ? strdup(old) : NULL;
    if (nodecode)
        setenv("ATTN_DECODE", "0", 1);
    attn_sdpa_plan *plan = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, d);
    if (nodecode) {
        if (saved)
            setenv("ATTN_DECODE", saved, 1);
        else
            unsetenv("ATTN_DECODE");
    }
    free(saved);
    if (st != ATTN_OK)
        return st;
    st = attn_sdpa_execute(plan, a, NULL, 0);
    attn_sdpa_plan_destroy(plan);
    return st;
}

/* args.k / k16 / kq (t 0) or v / v16 / vq of a storage type: p, the
 * others NULL. */
static void kv_set_ptr(attn_sdpa_args *a, int t, attn_dtype ty, const void *p)
{
    const void *f = ty == ATTN_DTYPE_F32 ? p : NULL;
    const void *h = ty != ATTN_DTYPE_F32 && !dtype_block(ty) ? p : NULL;
    const void *q = dtype_block(ty) ? p : NULL;
    if (t) {
        a->v = f;
        a->v16 = h;
        a->vq = q;
    } else {
        a->k = f;
        a->k16 = h;
        a->kq = q;
    }
}

/* The stored K and V (after the float pool and the outputs exist): in
 * their storage types, contiguous or paged, and args pointing at them. */
void kv_make_store(rd *r, sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    attn_sdpa_desc *d = &P->d;
    attn_sdpa_args *a = &P->a;
    kv_store *KS = &C->KS;
    const kv_cfg *kv = &C->kv;
    const int64_t B = C->B, Hkv = C->Hkv, m = C->m, dk = C->dk, dv = C->dv;
    int32_t klens[8];
    prng gk = { u32(r) ^ 0x9e3779b97f4a7c15ull };
    for (int64_t b = 0; b < B; b++)
        klens[b] = d->use_kv_lens ? P->kv_lens[b] : (int32_t)m;
    if (kv->paged)
        kv_table(KS, kv, B, klens, &gk);
    kv_store_tensor(KS, 0, kv, kv->kt, P->pool + C->okk, C->ekc, C->kvw, &d->k, C->ek, B, Hkv, dk,
                    klens, &gk);
    kv_store_tensor(KS, 1, kv, kv->vt, P->pool + C->ov, C->evc, C->vvw, &d->v, C->ev, B, Hkv, dv,
                    klens, &gk);
    if (kv->paged) {
        kv_set_ptr(a, 0, kv->kt, KS->pool[0]);
        kv_set_ptr(a, 1, kv->vt, KS->pool[1]);
        a->block_table = KS->table;
    } else {
        if (KS->c16[0]) kv_set_ptr(a, 0, kv->kt, KS->c16[0]);
        if (KS->c16[1]) kv_set_ptr(a, 1, kv->vt, KS->c16[1]);
        if (KS->cq[0]) kv_set_ptr(a, 0, kv->kt, KS->cq[0]);
        if (KS->cq[1]) kv_set_ptr(a, 1, kv->vt, KS->cq[1]);
    }
}

/* After a successful call: the reference reads F32, contiguous, the
 * stored values widened. */
void kv_reference(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const kv_store *KS = &C->KS;
    C->kv_refd = P->d;
    C->kv_refd.k = *C->kvw; /* contiguous: the final views (a planted stride may */
    C->kv_refd.v = *C->vvw; /* have changed them, validly, before the buffers)   */
    C->kv_refd.k_type = C->kv_refd.v_type = ATTN_DTYPE_F32;
    C->kv_refd.qk_int8 = 0;   /* (the rounded Q below instead) */
    C->kv_refd.kv_block_size = C->kv_refd.kv_num_blocks = C->kv_refd.kv_max_blocks = 0;
    C->kv_refa = P->a;
    C->kv_refa.k = KS->w[0] ? KS->w[0] : KS->cf[0] ? KS->cf[0] : P->pool + C->okk;
    C->kv_refa.v = KS->w[1] ? KS->w[1] : KS->cf[1] ? KS->cf[1] : P->pool + C->ov;
    C->kv_refa.k16 = C->kv_refa.v16 = NULL;
    C->kv_refa.kq = C->kv_refa.vq = NULL;
    C->kv_refa.block_table = NULL;
    if (P->d.qk_int8) {
        /* Q as the integer scores use it, in a copy of the pool */
        C->kv_qpool = xmalloc(P->pool_len * sizeof(float));
        memcpy(C->kv_qpool, P->pool, P->pool_len * sizeof(float));
        float *q0 = C->kv_qpool + (P->a.q - P->pool);
        qk8_ref_round_view(q0, &P->d.q, P->d.batch, P->d.q_heads, P->d.q_len, P->d.qk_dim);
        C->kv_refa.q = q0;
        counts[N_KV_INT8]++;
    }
    P->refd = &C->kv_refd;
    P->refa = &C->kv_refa;
}

/* 1 when the BLAS is MKL, whose sgemm sums depend on the operands'
 * leading dimensions and alignment (attn.h, "Decoding and the KV
 * cache"). */
static int blas_mkl(void)
{
    static int known = -1;
    if (known < 0) {
        attn_blas_info info;
        known = attn_blas_query(&info) == ATTN_OK &&
                (!strcmp(info.loaded, "mkl") || !strcmp(info.backend, "mkl"));
    }
    return known;
}

/* After the ATTN_DECODE=0 run (its outputs in P): K or V stored in
 * another type than F32, Q and O F32, the F32 call on the stored values
 * widened (the reference's desc and args: contiguous) with ATTN_DECODE=0
 * too must give its bits (attn.h: widening, de-quantizing are exact and
 * the arithmetic the same; not with MKL). */
static void kv_nodecode_twin(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    if (kv_plain(d) || !P->refd || d->qk_int8 || d->q_type != ATTN_DTYPE_F32 ||
        d->o_type != ATTN_DTYPE_F32 || (d->k_type == ATTN_DTYPE_F32 &&
                                        d->v_type == ATTN_DTYPE_F32) || blas_mkl())
        return;
    float *so = obuf_snap(&P->o), *sp = obuf_snap(&P->p), *sl = obuf_snap(&P->l);
    attn_sdpa_desc td = *P->refd;
    attn_sdpa_args ta = *P->refa;
    ta.q = P->a.q;
    ta.o = P->a.o;
    ta.q16 = NULL;
    ta.o16 = NULL;
    const attn_status st = kv_run(P, &td, &ta, 1);
    if (st != ATTN_OK)
        FAIL("the F32 twin on the stored values (ATTN_DECODE=0): %s", st_name(st));
    obuf_same(&P->o, so, "O", d->threads, d->threads, " (ATTN_DECODE=0, vs F32 on the stored values)");
    obuf_same(&P->p, sp, "P", d->threads, d->threads, " (ATTN_DECODE=0, vs F32 on the stored values)");
    obuf_same(&P->l, sl, "lse", d->threads, d->threads, " (ATTN_DECODE=0, vs F32 on the stored values)");
    counts[N_KV_NODECODE_TWIN]++;
    free(so);
    free(sp);
    free(sl);
}

/* After the checks and the thread-count rerun (with bit 6 or bit 7, SEL_QO):
 * a paged problem again on the same values stored contiguously (bitwise
 * the same), and one with q_len <= 16 on the sgemm path (within the
 * reference's bounds; BF16 products there when Q, K and V are BF16 on the
 * tile engine); then the first run's outputs back (the backward reads O). */
void kv_recheck(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    const attn_sdpa_args *a = &P->a;
    const kv_store *KS = &C->KS;
    attn_status st;
    float *so = obuf_snap(&P->o), *sp = obuf_snap(&P->p), *sl = obuf_snap(&P->l);
    uint16_t *so16 = obuf16_snap(&P->o16);
    if (C->kv.paged) {
        /* the same values stored contiguously: bitwise the same */
        attn_sdpa_desc kv_cd = *d;
        kv_cd.k = C->kv.kcv;
        kv_cd.v = C->kv.vcv;
        kv_cd.kv_block_size = kv_cd.kv_num_blocks = kv_cd.kv_max_blocks = 0;
        attn_sdpa_args kv_ca = *a;
        kv_ca.block_table = NULL;
        for (int t = 0; t < 2; t++) {
            const attn_dtype ty = t ? d->v_type : d->k_type;
            kv_set_ptr(&kv_ca, t, ty, dtype_block(ty) ? (const void *)KS->cq[t]
                                      : ty != ATTN_DTYPE_F32 ? (const void *)KS->c16[t]
                                                             : (const void *)KS->cf[t]);
        }
        st = kv_run(P, &kv_cd, &kv_ca, 0);
        if (st != ATTN_OK)
            FAIL("the contiguous twin of a paged problem: %s", st_name(st));
        obuf_same(&P->o, so, "O", d->threads, d->threads, " (paged vs contiguous)");
        obuf16_same(&P->o16, so16, "O", d->threads, d->threads, " (paged vs contiguous)");
        obuf_same(&P->p, sp, "P", d->threads, d->threads, " (paged vs contiguous)");
        obuf_same(&P->l, sl, "lse", d->threads, d->threads, " (paged vs contiguous)");
        counts[N_KV_PAGED_SAME]++;
    }
    if (d->q_len <= 16) {
        /* the sgemm path (ATTN_DECODE=0): the reference's bounds too */
        st = kv_run(P, d, a, 1);
        if (st != ATTN_OK)
            FAIL("ATTN_DECODE=0: %s", st_name(st));
        sdpa_check_results(P, 1);
        counts[C->kv.on ? N_KV_NODECODE : N_QO_NODECODE]++;
        if (C->kv.on && C->qo.on)
            counts[N_QO_NODECODE]++;
        if (C->kv.on)
            kv_nodecode_twin(C);
    }
    if (memcmp(C->inputs_copy, P->pool, P->pool_len * sizeof(float)) ||
        (C->QS.q16 && memcmp(C->QS.q16_copy, C->QS.q16, (size_t)C->QS.eq * sizeof(uint16_t))))
        FAIL("an input was modified");
    /* the first run's outputs back (the backward reads O) */
    if (so)
        memcpy(P->o.base, so, P->o.count * sizeof(float));
    if (so16)
        memcpy(P->o16.base, so16, P->o16.count * sizeof(uint16_t));
    if (sp)
        memcpy(P->p.base, sp, P->p.count * sizeof(float));
    if (sl)
        memcpy(P->l.base, sl, P->l.count * sizeof(float));
    free(so);
    free(so16);
    free(sp);
    free(sl);
}
