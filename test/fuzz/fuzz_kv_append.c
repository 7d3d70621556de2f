/*
 * fuzz_kv_append.c -- attn_kv_append (byte 0 bits 6 and 0 together).
 *
 * After the kind byte: the planted fields (AB_*; >= 128 plants a second),
 * sizes, storage types and paging, lengths, the new rows' views and
 * values, the desc's unread fields (garbage half of the time).  Decoded:
 * contiguous or paged caches (fuzz_kv.c's block sizes) of any storage
 * types, lengths, new_lens or NULL, decoded views of the new rows, invalid
 * fields (a NULL argument, the table, t, lengths, a table entry out of
 * range, types, paging, views, sizes).
 *
 * Q8_0 / Q4_0 caches: a types byte x >= 216 (no committed input has one)
 * picks them: x - 216 the paging and the types of a tensor not quantized,
 * then decode_kvq's byte (fuzz_kv.c) which of K and V are of which block
 * type, their dims 32 x the decoded ones and cache views of strides
 * multiples of 32, or a dim not a multiple of 32 (ATTN_ERR_BAD_SIZE) or
 * a cache view stride off 32 (ATTN_ERR_BAD_STRIDE).
 *
 * Contract: the status (expect_append, with fuzz_kv.c's KV rules); the new
 * rows never change; the cache must become the model written here (the
 * initial bytes, then every new row converted with attn_dtype_encode or,
 * for the block types, attn_quantize, F32 copied, at its token's place,
 * through the table when paged) byte for byte with kv_lens advanced, or
 * stay untouched with kv_lens on error.
 */
#include "fuzz_kv.h"

enum { AB_NONE, AB_NULL_TOP, AB_PTR_NULL, AB_TABLE, AB_T, AB_LENGTH, AB_TABLE_RANGE, AB_TYPE,
       AB_PAGING, AB_NEW_VIEW, AB_CACHE_VIEW, AB_SIZE, AB_COUNT_ };

static expect expect_append(const attn_sdpa_desc *d, const attn_kv_append_args *a)
{
    expect e = { 0, 0 };
    expect_kv_options(&e, d);
    if (d->batch <= 0 || d->kv_heads <= 0 || d->kv_len <= 0 || d->qk_dim <= 0 || d->v_dim <= 0) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        e.maybe = ~0u & ~1u;
        return e;
    }
    if (d->kv_len > INT32_MAX || d->qk_dim > INT32_MAX || d->v_dim > INT32_MAX)
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    expect_kv_views(&e, d);
    expect_kv_blocks(&e, d, 0);
    const int paged = d->kv_block_size > 0;
    if (!a->k_cache || !a->v_cache || !a->kv_lens || !a->k_new || !a->v_new ||
        (paged && !a->block_table))
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    if (!paged && a->block_table)
        e.must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
    if (a->t < 1) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        /* the new rows' views and new_lens in [0, t] cannot be judged */
        e.maybe |= BIT(ATTN_ERR_BAD_STRIDE) | BIT(ATTN_ERR_STRIDES_UNSET) |
                   BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_BAD_LENGTH) |
                   BIT(ATTN_ERR_BAD_BLOCK_TABLE);
        return e;
    }
    if (a->t > INT32_MAX)
        e.maybe |= BIT(ATTN_ERR_TOO_LARGE);
    expect_view(&e, &a->k_new_view, d->batch, d->kv_heads, a->t, d->qk_dim, VK_INPUT);
    expect_view(&e, &a->v_new_view, d->batch, d->kv_heads, a->t, d->v_dim, VK_INPUT);
    if (!a->kv_lens || d->batch > 8) {
        e.maybe |= BIT(ATTN_ERR_BAD_LENGTH) | BIT(ATTN_ERR_BAD_BLOCK_TABLE);
        return e;
    }
    int lens_ok = 1;
    for (int64_t b = 0; b < d->batch; b++) {
        const int64_t len = a->kv_lens[b], nl = a->new_lens ? a->new_lens[b] : a->t;
        if (len < 0 || nl < 0 || nl > a->t || len + nl > d->kv_len) {
            e.must |= BIT(ATTN_ERR_BAD_LENGTH);
            lens_ok = 0;
        }
    }
    if (paged && a->block_table && !lens_ok)
        e.maybe |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
    if (paged && a->block_table && lens_ok && d->kv_max_blocks > 0) {
        const int64_t bs = d->kv_block_size;
        for (int64_t b = 0; b < d->batch; b++) {
            const int64_t len = a->kv_lens[b], nl = a->new_lens ? a->new_lens[b] : a->t;
            for (int64_t j = len; j < len + nl; j++) {
                const int32_t id = a->block_table[b * d->kv_max_blocks + j / bs];
                if (id < 0 || id >= d->kv_num_blocks)
                    e.must |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
            }
        }
    }
    return e;
}

/* Store n floats as type ty at value offset off of a cache (the model of
 * one appended row; a block type's row of whole blocks only: other views
 * and dims are invalid). */
static void put_row(attn_dtype ty, uint8_t *cache, int64_t off, const float *src, int64_t n)
{
    if (dtype_block(ty)) {
        if (n % 32 == 0 && off % 32 == 0 &&
            attn_quantize(ty, src, cache + kv_bytes(ty, off), n) != ATTN_OK)
            FAIL("attn_quantize failed");
    } else if (ty == ATTN_DTYPE_F32) {
        memcpy(cache + kv_bytes(ty, off), src, (size_t)n * sizeof(float));
    } else if (attn_dtype_encode(ty, src, (uint16_t *)(void *)(cache + kv_bytes(ty, off)), n) !=
               ATTN_OK) {
        FAIL("attn_dtype_encode failed");
    }
}

/* The attn_kv_append call's state from stage to stage. */
typedef struct append_case {
    attn_sdpa_desc d;
    attn_kv_append_args a;
    unsigned bad[2];                      /* AB_* */
    unsigned y;                           /* paging byte: block size, junk, new_lens */
    int64_t B, Hkv, dk, dv, m, t, bs, mb, nb;
    attn_dtype kt, vt;
    kv_q q;                               /* Q8_0 / Q4_0 (x >= 216) */
    int paged;
    int64_t szc[3], szn[3];               /* the caches', the new rows' shapes */
    int32_t kv_lens[8], new_lens[8], want_lens[8];
    const int32_t *nlp;                   /* new_lens as passed (NULL: t each) */
    int64_t eck, ecv, enk, env;           /* extents of the caches and new rows */
    size_t ck_bytes, cv_bytes;
    uint8_t *kc, *vc;                     /* the caches */
    uint8_t *ek, *ev;                     /* the caches expected after the call */
    int32_t *table;
    float *kn, *vn;                       /* the new rows */
    prng g;
    int null_top;
} append_case;

/* -------------------------------------------------------------- decode */

/* The planted fields, sizes, storage types and paging, the desc (with
 * junk in the fields attn_kv_append does not read), the lengths and the
 * new rows' views. */
static void append_decode(rd *r, append_case *C)
{
    static const int64_t bss[4] = { 1, 2, 3, 16 };
    C->bad[0] = C->bad[1] = AB_NONE;
    decode_bad(r, u8(r), AB_COUNT_, C->bad);
    const int64_t B = C->B = 1 + pick(r, 3), Hkv = C->Hkv = 1 + pick(r, 2);
    int64_t dk = 1 + pick(r, 6), dv = 1 + pick(r, 6);
    const int64_t m = C->m = 1 + pick(r, 24), t = C->t = 1 + pick(r, 5);
    const unsigned x = u8(r), y = C->y = u8(r);
    memset(&C->q, 0, sizeof C->q);
    if (x >= 216) {
        /* Q8_0 / Q4_0: the types of the tensors not quantized and the
         * paging from x - 216, then the block types, dims, strides */
        const unsigned u = x - 216;
        C->kt = (attn_dtype)(u / 4 % 3), C->vt = (attn_dtype)(u / 12 % 3);
        C->paged = u % 4 != 0;
        decode_kvq(r, &C->q);
        if (dtype_block(C->q.qt[0]))
            C->kt = C->q.qt[0];
        if (dtype_block(C->q.qt[1]))
            C->vt = C->q.qt[1];
        kvq_dims(&C->q, &dk, &dv);
    } else {
        C->kt = (attn_dtype)(x % 3), C->vt = (attn_dtype)(x / 3 % 3);
        C->paged = (x / 9) % 4 != 0;
    }
    C->dk = dk;
    C->dv = dv;
    const int64_t bs = C->bs = bss[y & 3], per = (m + bs - 1) / bs;
    C->mb = per + (int64_t)((y >> 2) & 3), C->nb = B * per + (int64_t)((y >> 4) & 3);

    attn_sdpa_desc *d = &C->d;
    attn_sdpa_desc_init(d);
    d->batch = B;
    d->kv_heads = Hkv;
    d->kv_len = m;
    d->qk_dim = dk;
    d->v_dim = dv;
    d->k_type = C->kt;
    d->v_type = C->vt;
    C->szc[0] = C->paged ? C->nb : B, C->szc[1] = Hkv, C->szc[2] = C->paged ? bs : m;
    C->szn[0] = B, C->szn[1] = Hkv, C->szn[2] = t;
    d->k = kvq_view(r, &C->q, 0, C->szc, dk, 1);
    d->v = kvq_view(r, &C->q, 1, C->szc, dv, 1);
    if (C->paged) {
        d->kv_block_size = bs;
        d->kv_num_blocks = C->nb;
        d->kv_max_blocks = C->mb;
    }
    if (y & 0x40) {
        /* the fields attn_kv_append does not read: anything */
        d->q_heads = -3;
        d->q_len = 0;
        d->scale = INFINITY;
        d->threads = -1;
        d->mask_mode = (attn_mask_mode)77;
        d->use_global_k = 1;
        d->block_size = 5;
        d->dropout_p = NAN;
        d->reserved[0] = 1;
        d->o = (attn_view){ -1, -1, -1 };
    }

    /* lengths: each sequence holds len tokens, gets nl more */
    int32_t *kv_lens = C->kv_lens, *new_lens = C->new_lens;
    const int use_new = !!(y & 0x80);
    for (int64_t b = 0; b < B; b++) {
        kv_lens[b] = (int32_t)pick(r, (unsigned)m + 1);
        const int64_t room = m - kv_lens[b];
        if (!use_new && room < t)
            kv_lens[b] = (int32_t)(m > t ? m - t - (int64_t)pick(r, (unsigned)(m - t + 1)) : 0);
        const int64_t room2 = m - kv_lens[b];
        new_lens[b] = (int32_t)pick(r, (unsigned)((room2 < t ? room2 : t) + 1));
    }
    int ok_t = 1; /* every sequence has room for t rows when new_lens is NULL */
    for (int64_t b = 0; b < B; b++)
        if (kv_lens[b] + t > m)
            ok_t = 0;
    C->nlp = use_new || !ok_t ? new_lens : NULL;

    attn_kv_append_args *a = &C->a;
    memset(a, 0, sizeof *a);
    a->t = t;
    a->k_new_view = gen_view(r, C->szn, dk);
    a->v_new_view = gen_view(r, C->szn, dv);
    a->kv_lens = kv_lens;
    a->new_lens = C->nlp;
}

/* ------------------------------------------------------------- buffers */

/* Distinct blocks in random order for every block a sequence's tokens
 * [0, len + nl) reach, garbage past them. */
static void append_table(append_case *C)
{
    const int64_t nb = C->nb, mb = C->mb, bs = C->bs;
    prng *g = &C->g;
    int32_t *perm = xmalloc((size_t)nb * sizeof(int32_t));
    for (int64_t i = 0; i < nb; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = nb - 1; i > 0; i--) {
        const int64_t k = (int64_t)(pr_next(g) % (uint64_t)(i + 1));
        const int32_t tmp = perm[i];
        perm[i] = perm[k];
        perm[k] = tmp;
    }
    int32_t *table = C->table = xmalloc((size_t)(C->B * mb) * sizeof(int32_t));
    int64_t used = 0;
    for (int64_t b = 0; b < C->B; b++) {
        const int64_t end = C->kv_lens[b] + (C->nlp ? C->nlp[b] : C->t);
        for (int64_t J = 0; J < mb; J++) {
            const uint64_t z = pr_next(g);
            table[b * mb + J] = J < (end + bs - 1) / bs ? perm[used++]
                                : (z & 3) == 0 ? -1 : (z & 3) == 1 ? (int32_t)nb
                                : (z & 3) == 2 ? perm[(z >> 8) % (uint64_t)nb]
                                : (int32_t)(z >> 32);
        }
    }
    free(perm);
}

/* The new rows: values of decoded magnitude (past F16's range, F16 and
 * F32 denormals), some Inf and NaN; NaN in gaps and unread rows. */
static void append_new_rows(rd *r, append_case *C)
{
    static const double mags[4] = { 1.0, 1e5, 1e-6, 1e-40 };
    const unsigned vo = u8(r);
    const double mag = mags[vo & 3];
    const int specials = !!(vo & 4);
    C->kn = xmalloc((size_t)C->enk * sizeof(float));
    C->vn = xmalloc((size_t)C->env * sizeof(float));
    for (int64_t i = 0; i < C->enk; i++)
        C->kn[i] = NAN;
    for (int64_t i = 0; i < C->env; i++)
        C->vn[i] = NAN;
    for (int tn = 0; tn < 2; tn++) {
        float *buf = tn ? C->vn : C->kn;
        const attn_view *nv = tn ? &C->a.v_new_view : &C->a.k_new_view;
        const int64_t D = tn ? C->dv : C->dk;
        for (int64_t b = 0; b < C->B; b++)
            for (int64_t h = 0; h < C->Hkv; h++)
                for (int64_t rr = 0; rr < (C->nlp ? C->nlp[b] : C->t); rr++)
                    for (int64_t c = 0; c < D; c++) {
                        float v = pr_val(&C->g, mag);
                        if (specials) {
                            const uint64_t z = pr_next(&C->g) % 16;
                            v = z == 0 ? INFINITY : z == 1 ? -NAN : z == 2 ? 65520.0f : z == 3 ? -0.0f : v;
                        }
                        buf[b * nv->batch + h * nv->head + rr * nv->seq + c] = v;
                    }
    }
}

/* The caches (exact extents, random bytes), the table, the new rows;
 * 0 when an extent is not computable (cannot happen: small sizes). */
static int append_buffers(rd *r, append_case *C)
{
    const attn_sdpa_desc *d = &C->d;
    C->eck = view_extent(&d->k, C->szc, C->dk);
    C->ecv = view_extent(&d->v, C->szc, C->dv);
    C->enk = view_extent(&C->a.k_new_view, C->szn, C->dk);
    C->env = view_extent(&C->a.v_new_view, C->szn, C->dv);
    if (C->eck < 0 || C->ecv < 0 || C->enk < 0 || C->env < 0)
        return 0;
    C->ck_bytes = kv_bytes(C->kt, C->eck), C->cv_bytes = kv_bytes(C->vt, C->ecv);
    C->kc = xmalloc(C->ck_bytes);
    C->vc = xmalloc(C->cv_bytes);
    C->g = (prng){ u32(r) };
    for (size_t i = 0; i < C->ck_bytes; i++)
        C->kc[i] = (uint8_t)pr_next(&C->g);
    for (size_t i = 0; i < C->cv_bytes; i++)
        C->vc[i] = (uint8_t)pr_next(&C->g);
    if (C->paged)
        append_table(C);
    append_new_rows(r, C);
    C->a.k_cache = C->kc;
    C->a.v_cache = C->vc;
    C->a.block_table = C->table;
    C->a.k_new = C->kn;
    C->a.v_new = C->vn;
    return 1;
}

/* The model: expected caches and lengths (from the valid arguments). */
static void append_model(append_case *C)
{
    C->ek = xmalloc(C->ck_bytes);
    C->ev = xmalloc(C->cv_bytes);
    memcpy(C->ek, C->kc, C->ck_bytes);
    memcpy(C->ev, C->vc, C->cv_bytes);
    for (int64_t b = 0; b < C->B; b++) {
        const int64_t nl = C->nlp ? C->nlp[b] : C->t;
        C->want_lens[b] = C->kv_lens[b] + (int32_t)nl;
        for (int tn = 0; tn < 2; tn++) {
            const attn_view *cv = tn ? &C->d.v : &C->d.k;
            const attn_view *nv = tn ? &C->a.v_new_view : &C->a.k_new_view;
            const attn_dtype ty = tn ? C->vt : C->kt;
            uint8_t *cache = tn ? C->ev : C->ek;
            const float *src = tn ? C->vn : C->kn;
            const int64_t D = tn ? C->dv : C->dk;
            for (int64_t h = 0; h < C->Hkv; h++)
                for (int64_t rr = 0; rr < nl; rr++) {
                    const int64_t j = C->kv_lens[b] + rr;
                    const int64_t off = C->paged ? C->table[b * C->mb + j / C->bs] * cv->batch +
                                                       h * cv->head + (j % C->bs) * cv->seq
                                                 : b * cv->batch + h * cv->head + j * cv->seq;
                    put_row(ty, cache, off, src + b * nv->batch + h * nv->head + rr * nv->seq, D);
                }
        }
    }
}

/* --------------------------------------------------------------- plant */

/* One planted invalid field of kind bad (AB_*). */
static void append_plant1(rd *r, append_case *C, unsigned bad)
{
    static const int32_t junk_table[4];
    attn_sdpa_desc *d = &C->d;
    attn_kv_append_args *a = &C->a;
    const int paged = C->paged;
    const int64_t B = C->B, m = C->m, t = C->t, bs = C->bs, nb = C->nb, dk = C->dk, dv = C->dv;
    int32_t *kv_lens = C->kv_lens, *new_lens = C->new_lens;
    switch (bad) {
    case AB_NULL_TOP: C->null_top = 1 + (int)pick(r, 2); break;
    case AB_PTR_NULL: {
        void **p[5] = { &a->k_cache, &a->v_cache, (void **)&a->kv_lens, (void **)&a->k_new,
                        (void **)&a->v_new };
        *p[pick(r, 5)] = NULL;
        break;
    }
    case AB_TABLE:
        if (paged) a->block_table = NULL;
        else a->block_table = junk_table;
        break;
    case AB_T: a->t = (u8(r) & 1) ? 0 : -1 - (int64_t)u8(r); break;
    case AB_LENGTH: {
        const unsigned b = pick(r, (unsigned)B);
        switch (pick(r, 4)) {
        case 0: kv_lens[b] = (u8(r) & 1) ? -1 : INT32_MIN; break;
        case 1: kv_lens[b] = (int32_t)m - new_lens[b] + 1 + (int32_t)pick(r, 3);
                a->new_lens = new_lens; break;
        case 2: new_lens[b] = -1; a->new_lens = new_lens; break;
        default: new_lens[b] = (int32_t)t + 1 + (int32_t)pick(r, 3); a->new_lens = new_lens; break;
        }
        break;
    }
    case AB_TABLE_RANGE:
        if (paged) {
            const int64_t b = pick(r, (unsigned)B);
            const int64_t nl = a->new_lens ? a->new_lens[b] : t;
            if (nl > 0 && nl <= t && kv_lens[b] >= 0 && kv_lens[b] + nl <= m) {
                const int64_t j = kv_lens[b] + pick(r, (unsigned)nl);
                static const int32_t bid[4] = { -1, INT32_MIN, INT32_MAX, 0 };
                const unsigned w = pick(r, 4);
                C->table[b * C->mb + j / bs] = w == 3 ? (int32_t)nb : bid[w];
            }
        }
        break;
    case AB_TYPE: {
        /* unknown types (3 was, before Q8_0 and Q4_0) */
        static const int bt[3] = { 5, -1, 100 };
        if (u8(r) & 1) d->k_type = (attn_dtype)bt[pick(r, 3)];
        else d->v_type = (attn_dtype)bt[pick(r, 3)];
        break;
    }
    case AB_PAGING:
        switch (pick(r, 5)) {
        case 0: d->kv_block_size = -1; break;
        case 1: if (paged) d->kv_num_blocks = 0; else d->kv_num_blocks = 1 + pick(r, 4); break;
        case 2: if (paged) d->kv_max_blocks = -1; else d->kv_max_blocks = 1; break;
        case 3: if (paged) d->kv_max_blocks = (m - 1) / bs ? (m - 1) / bs : -1;
                else d->kv_block_size = 4; /* paged with no blocks */
                break;
        default: if (paged) d->kv_num_blocks = (int64_t)INT32_MAX + 1; else d->kv_max_blocks = 3; break;
        }
        break;
    case AB_NEW_VIEW: {
        attn_view *v = (u8(r) & 1) ? &a->k_new_view : &a->v_new_view;
        switch (pick(r, 4)) {
        case 0: v->seq = (v == &a->k_new_view ? dk : dv) - 1; break;
        case 1: v->head = -1; break;
        case 2: v->batch = ATTN_STRIDE_UNSET; break;
        default: v->seq = 0; if (t == 1) v->seq = -5; break;
        }
        break;
    }
    case AB_CACHE_VIEW: {
        attn_view *v = (u8(r) & 1) ? &d->k : &d->v;
        switch (pick(r, 3)) {
        case 0: v->seq = (v == &d->k ? dk : dv) - 1; break;
        case 1: v->batch = -7; break;
        default: v->head = ATTN_STRIDE_UNSET; break;
        }
        break;
    }
    case AB_SIZE: {
        int64_t *s[5] = { &d->batch, &d->kv_heads, &d->kv_len, &d->qk_dim, &d->v_dim };
        const unsigned w = pick(r, 5);
        *s[w] = (u8(r) & 1) ? 0 : w >= 2 ? (int64_t)INT32_MAX + 1 : -2;
        break;
    }
    default: break;
    }
}

static void print_append(const append_case *C)
{
    const attn_sdpa_desc *d = &C->d;
    fprintf(stderr, "KV_APPEND B=%lld Hkv=%lld m=%lld dk=%lld dv=%lld t=%lld kt=%d vt=%d "
            "paged=%d bs=%lld nb=%lld mb=%lld new_lens=%d junk=%d bad=%u,%u null_top=%d q=%d\n",
            (long long)d->batch, (long long)d->kv_heads, (long long)d->kv_len,
            (long long)d->qk_dim, (long long)d->v_dim, (long long)C->a.t, (int)d->k_type,
            (int)d->v_type, C->paged, (long long)d->kv_block_size, (long long)d->kv_num_blocks,
            (long long)d->kv_max_blocks, C->a.new_lens != NULL, !!(C->y & 0x40), C->bad[0],
            C->bad[1], C->null_top, C->q.on);
}

/* ------------------------------------------------------------ run, check */

/* The call: its status; the new rows never change; on error the cache
 * and kv_lens untouched; on success the cache is the model byte for byte
 * and kv_lens advanced. */
static void append_run(append_case *C)
{
    const attn_sdpa_desc *d = &C->d;
    const attn_kv_append_args *a = &C->a;
    const size_t ck_bytes = C->ck_bytes, cv_bytes = C->cv_bytes;
    const size_t nk = (size_t)C->enk * sizeof(float), nv = (size_t)C->env * sizeof(float);
    int32_t lens_in[8];
    memcpy(lens_in, C->kv_lens, sizeof lens_in);
    uint8_t *kc0 = xmalloc(ck_bytes), *vc0 = xmalloc(cv_bytes);
    memcpy(kc0, C->kc, ck_bytes);
    memcpy(vc0, C->vc, cv_bytes);
    float *kn0 = xmalloc(nk), *vn0 = xmalloc(nv);
    memcpy(kn0, C->kn, nk);
    memcpy(vn0, C->vn, nv);

    attn_status st;
    expect e;
    if (C->null_top) {
        st = C->null_top == 1 ? attn_kv_append(NULL, a) : attn_kv_append(d, NULL);
        e = (expect){ BIT(ATTN_ERR_NULL_ARGUMENT), 0 };
    } else {
        e = expect_append(d, a);
        st = attn_kv_append(d, a);
    }
    check_status("attn_kv_append", st, e);
    if (memcmp(kn0, C->kn, nk) || memcmp(vn0, C->vn, nv))
        FAIL("attn_kv_append changed k_new or v_new");
    if (st != ATTN_OK) {
        if (memcmp(kc0, C->kc, ck_bytes) || memcmp(vc0, C->vc, cv_bytes))
            FAIL("attn_kv_append: %s, but the cache was written", st_name(st));
        if (memcmp(lens_in, C->kv_lens, sizeof lens_in))
            FAIL("attn_kv_append: %s, but kv_lens changed", st_name(st));
        counts[N_APPEND_ERROR]++;
        if (C->q.on)
            counts[N_APPENDQ_ERROR]++;
    } else {
        for (size_t i = 0; i < ck_bytes; i++)
            if (C->kc[i] != C->ek[i])
                FAIL("attn_kv_append: K cache byte %zu is 0x%02x, expected 0x%02x", i, C->kc[i],
                     C->ek[i]);
        for (size_t i = 0; i < cv_bytes; i++)
            if (C->vc[i] != C->ev[i])
                FAIL("attn_kv_append: V cache byte %zu is 0x%02x, expected 0x%02x", i, C->vc[i],
                     C->ev[i]);
        for (int64_t b = 0; b < C->B; b++)
            if (C->kv_lens[b] != C->want_lens[b])
                FAIL("attn_kv_append: kv_lens[%lld] = %d, expected %d", (long long)b,
                     C->kv_lens[b], C->want_lens[b]);
        counts[N_APPEND_CHECKED]++;
        if (C->q.on)
            counts[N_APPENDQ_CHECKED]++;
    }
    free(kc0);
    free(vc0);
    free(kn0);
    free(vn0);
}

void fuzz_kv_append(rd *r)
{
    append_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    /* decode, the buffers and the model */
    append_decode(r, C);
    if (append_buffers(r, C)) {
        append_model(C);
        /* plant */
        for (int k = 0; k < 2; k++)
            append_plant1(r, C, C->bad[k]);
        if (verbose)
            print_append(C);
        /* run, check */
        append_run(C);
    }
    free(C->kc);
    free(C->vc);
    free(C->ek);
    free(C->ev);
    free(C->kn);
    free(C->vn);
    free(C->table);
    free(C);
}
