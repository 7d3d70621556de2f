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
 * reference's bounds).  Bit 6 was cleared in every committed input before
 * it got this meaning (the decoder ignored it).
 */
#include "fuzz_sdpa.h"


/* attn.h, "Decoding and the KV cache": k_type and v_type F32, F16 or
 * BF16; kv_block_size >= 0, and kv_num_blocks / kv_max_blocks zero without
 * paging (else ATTN_ERR_BAD_OPTION); paging does not combine with the
 * sparse options (ATTN_ERR_BAD_OPTION), the storage types do. */
int dtype_ok(int t)
{
    return t == ATTN_DTYPE_F32 || t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16;
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
    if (!dtype_ok(d->k_type) || !dtype_ok(d->v_type))
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
    const int k16 = d->k_type != ATTN_DTYPE_F32, v16 = d->v_type != ATTN_DTYPE_F32;
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
}


static const uint16_t nan16[3] = { 0, 0x7e00, 0x7fc0 }; /* quiet NaN of F16, BF16 */

void kv_store_free(kv_store *S)
{
    for (int t = 0; t < 2; t++) {
        free(S->c16[t]);
        free(S->w[t]);
        free(S->cf[t]);
        free(S->pool[t]);
    }
    free(S->table);
    memset(S, 0, sizeof *S);
}

/* One tensor: src the float pool at the contiguous view's origin (ext
 * elements), cv that view, pv the pool view of pext elements. */
static void kv_store_tensor(kv_store *S, int t, const kv_cfg *c, attn_dtype ty, const float *src,
                            int64_t ext, const attn_view *cv, const attn_view *pv, int64_t pext,
                            int64_t B, int64_t Hkv, int64_t D, const int32_t *klens, prng *g)
{
    if (ty != ATTN_DTYPE_F32) {
        S->c16[t] = xmalloc((size_t)ext * sizeof(uint16_t));
        S->w[t] = xmalloc((size_t)ext * sizeof(float));
        if (attn_dtype_encode(ty, src, S->c16[t], ext) != ATTN_OK ||
            attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK)
            FAIL("attn_convert of the K/V values failed");
    }
    if (!c->paged)
        return;
    const size_t es = ty == ATTN_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    S->pool[t] = xmalloc((size_t)pext * es);
    /* unused blocks, rows past the lengths and gaps: NaN, +Inf or random */
    for (int64_t i = 0; i < pext; i++) {
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
     * reference and the contiguous twin read what the paged call reads. */
    if (ty == ATTN_DTYPE_F32) {
        S->cf[t] = xmalloc((size_t)ext * sizeof(float));
        memcpy(S->cf[t], src, (size_t)ext * sizeof(float));
    }
    for (int pass = 0; pass < 3; pass++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t J = 0; J < S->nbl[b]; J++) {
                const int64_t blk = S->table[b * c->mb + J];
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t jj = 0; jj < c->bs && J * c->bs + jj < klens[b]; jj++) {
                        const int64_t j = J * c->bs + jj;
                        const int64_t so = b * cv->batch + h * cv->head + j * cv->seq;
                        const int64_t po = blk * pv->batch + h * pv->head + jj * pv->seq;
                        void *prow = ty == ATTN_DTYPE_F32 ? (void *)((float *)S->pool[t] + po)
                                                          : (void *)((uint16_t *)S->pool[t] + po);
                        void *crow = ty == ATTN_DTYPE_F32 ? (void *)(S->cf[t] + so)
                                                          : (void *)(S->c16[t] + so);
                        const size_t bytes = (size_t)D * es;
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
    if (ty != ATTN_DTYPE_F32 &&
        attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK)
        FAIL("attn_convert of the K/V values failed");
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
            if (d->k_type != ATTN_DTYPE_F32) a->k16 = NULL; else a->k = NULL;
        } else {
            if (d->v_type != ATTN_DTYPE_F32) a->v16 = NULL; else a->v = NULL;
        }
        break;
    case KB_PTR_EXTRA:
        if (u8(r) & 1) {
            if (d->k_type != ATTN_DTYPE_F32) a->k = junkf; else a->k16 = junk16;
        } else {
            if (d->v_type != ATTN_DTYPE_F32) a->v = junkf; else a->v16 = junk16;
        }
        break;
    case KB_TYPE: {
        static const int bad_t[4] = { 3, 4, -1, 255 };
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
        a->k = kv->kt == ATTN_DTYPE_F32 ? (const float *)KS->pool[0] : NULL;
        a->v = kv->vt == ATTN_DTYPE_F32 ? (const float *)KS->pool[1] : NULL;
        a->k16 = kv->kt != ATTN_DTYPE_F32 ? (const uint16_t *)KS->pool[0] : NULL;
        a->v16 = kv->vt != ATTN_DTYPE_F32 ? (const uint16_t *)KS->pool[1] : NULL;
        a->block_table = KS->table;
    } else {
        if (KS->c16[0]) { a->k = NULL; a->k16 = KS->c16[0]; }
        if (KS->c16[1]) { a->v = NULL; a->v16 = KS->c16[1]; }
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
    C->kv_refd.kv_block_size = C->kv_refd.kv_num_blocks = C->kv_refd.kv_max_blocks = 0;
    C->kv_refa = P->a;
    C->kv_refa.k = KS->w[0] ? KS->w[0] : KS->cf[0] ? KS->cf[0] : P->pool + C->okk;
    C->kv_refa.v = KS->w[1] ? KS->w[1] : KS->cf[1] ? KS->cf[1] : P->pool + C->ov;
    C->kv_refa.k16 = C->kv_refa.v16 = NULL;
    C->kv_refa.block_table = NULL;
    P->refd = &C->kv_refd;
    P->refa = &C->kv_refa;
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
        kv_ca.k = KS->c16[0] ? NULL : KS->cf[0];
        kv_ca.v = KS->c16[1] ? NULL : KS->cf[1];
        kv_ca.k16 = KS->c16[0];
        kv_ca.v16 = KS->c16[1];
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
