/*
 * fuzz_qo.c -- the element types of Q and O of an SDPA problem (byte 0
 * bit 7, SEL_QO; fuzz_sdpa.c calls the stages below).  Bit 7 was cleared
 * in every committed input before it got this meaning (the decoder
 * ignored it).
 *
 * decode_qo: q_type and o_type F32, F16 or BF16 each (a quarter of the
 * inputs: one 16-bit type for Q and O, and with bit 6 for K and V too, so
 * that BF16 products are common), and one planted invalid field of its own
 * (QB_*: an unknown q_type or o_type, 16-bit Q or O with a sparse option
 * (valid since the sparse forward widens 16-bit tensors: the buffers then
 * do not match the plan and execute must say so),
 * the pointer of Q's or O's type NULL, the other pointer given as well, or
 * only the other one) besides byte 1's BAD_* and bit 6's KB_*.  Q is
 * stored in its type, exactly its view's extent, from the values the
 * float pool holds (NaN where never read); O is written into a 16-bit
 * buffer of sentinels (obuf16).
 *
 * Checks (besides the forward's): the status (expect_qo_options,
 * expect_qo_pointers); nothing written on error, Q unchanged; O within the
 * float64 reference on the rounded inputs (Q, K and V widened exactly)
 * with the fp32 bound plus qo_tolerance (O's rounding, P's with BF16
 * products, F16's subnormals); nothing outside O's view written; bitwise
 * the same O for another thread count, for the paged problem's contiguous
 * twin and, where the products are not BF16 ones, bitwise the same call in
 * fp32 on the widened values with O then rounded to o_type (attn.h:
 * "the result is bitwise that of the same call in fp32 on the widened
 * values"; qo_twin).  A problem with q_len <= 16 runs again with
 * ATTN_DECODE=0 (fuzz_kv.c's kv_recheck: the sgemm path, BF16 products
 * when Q, K and V are BF16 on the tile engine), against the reference.
 * The backward of a valid problem with 16-bit Q or O must plan (with the
 * sparse options too) and need args16, with nothing written
 * (fuzz_sdpa_bwd.c, statuses only).
 */
#include "fuzz_sdpa.h"

void decode_qo(rd *r, qo_cfg *c, kv_cfg *kv)
{
    const unsigned x = u8(r), z = u8(r);
    c->on = 1;
    if (x >= 192) {
        /* one 16-bit type for Q and O (and K and V when stored) */
        const attn_dtype t = (x & 1) ? ATTN_DTYPE_F16 : ATTN_DTYPE_BF16;
        c->qt = c->ot = t;
        if (kv->on)
            kv->kt = kv->vt = t;
    } else {
        c->qt = (attn_dtype)(x % 3);
        c->ot = (attn_dtype)(x / 3 % 3);
    }
    c->bad = z < 160 ? QB_NONE : 1 + (z - 160) % (QB_COUNT_ - 1);
}

void qo_store_free(qo_store *S)
{
    free(S->q16);
    free(S->q16_copy);
    free(S->qw);
    memset(S, 0, sizeof *S);
}

int qo_16(const attn_sdpa_desc *d)
{
    return d->q_type != ATTN_DTYPE_F32 || d->o_type != ATTN_DTYPE_F32;
}

/* q_type and o_type F32, F16 or BF16; the quantized K/V types Q8_0 and
 * Q4_0 (1.2) are ATTN_ERR_UNSUPPORTED_TYPE as Q or O (QB_TYPE plants 3 and
 * 4 among its values: the committed inputs that did now test that); any
 * other value ATTN_ERR_BAD_OPTION.  Not fuzz_kv.c's dtype_ok: K and V
 * take more. */
void expect_qo_options(expect *e, const attn_sdpa_desc *d)
{
    const int q = d->q_type, o = d->o_type;
    if (q < ATTN_DTYPE_F32 || q > ATTN_DTYPE_Q4_0 || o < ATTN_DTYPE_F32 || o > ATTN_DTYPE_Q4_0)
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
    else if (q >= ATTN_DTYPE_Q8_0 || o >= ATTN_DTYPE_Q8_0)
        e->must |= BIT(ATTN_ERR_UNSUPPORTED_TYPE);
}

void expect_qo_pointers(expect *e, const attn_sdpa_desc *d, const attn_sdpa_args *a)
{
    const int q16 = d->q_type != ATTN_DTYPE_F32, o16 = d->o_type != ATTN_DTYPE_F32;
    const void *qp = q16 ? (const void *)a->q16 : (const void *)a->q;
    const void *op = o16 ? (const void *)a->o16 : (const void *)a->o;
    if (!qp || !op)
        e->must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    if ((q16 ? (const void *)a->q : (const void *)a->q16) ||
        (o16 ? (const void *)a->o : (const void *)a->o16))
        e->must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
}

int qo_bf16_products(const attn_sdpa_desc *d, int nodecode)
{
    if (d->q_type != ATTN_DTYPE_BF16 || d->k_type != ATTN_DTYPE_BF16 ||
        d->v_type != ATTN_DTYPE_BF16)
        return 0;
    attn_engine e = ATTN_ENGINE_AUTO;
    if (attn_engine_resolve(d->engine, &e) != ATTN_OK)
        FAIL("attn_engine_resolve(%d) failed", (int)d->engine);
    if (e != ATTN_ENGINE_TILE)
        return 0;
    const char *env = getenv("ATTN_DECODE");
    const int decode = !nodecode && !(env && !strcmp(env, "0"));
    return !(decode && d->q_len <= 16);
}

void qo_tolerance(const attn_sdpa_desc *d, int bf16, double *orel_add, double *oabs)
{
    *orel_add = dtype_u2(d->o_type) + (bf16 ? dtype_u2(ATTN_DTYPE_BF16) : 0.0);
    *oabs = d->o_type == ATTN_DTYPE_F16 ? 0x1p-24 : 0.0;
}

/* Q in its type (after the float pool is filled and the args made): the
 * view's extent encoded, its widening, and args.q16 instead of args.q. */
void qo_make_store(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    qo_store *S = &C->QS;
    if (C->qo.qt == ATTN_DTYPE_F32)
        return;
    const size_t eq = (size_t)C->eq;
    S->eq = C->eq;
    S->q16 = xmalloc(eq * sizeof(uint16_t));
    S->q16_copy = xmalloc(eq * sizeof(uint16_t));
    S->qw = xmalloc(eq * sizeof(float));
    if (attn_dtype_encode(C->qo.qt, P->pool + C->oq, S->q16, (int64_t)eq) != ATTN_OK ||
        attn_dtype_decode(C->qo.qt, S->q16, S->qw, (int64_t)eq) != ATTN_OK)
        FAIL("attn_dtype_encode/decode of Q failed");
    memcpy(S->q16_copy, S->q16, eq * sizeof(uint16_t));
    P->a.q = NULL;
    P->a.q16 = S->q16;
}

/* A planted QB_* field (after the buffers exist: they follow the decoded,
 * valid types). */
void qo_plant(rd *r, sdpa_case *C)
{
    static const uint16_t junk16[8];
    static float junkf[8];
    static uint16_t junko16[8];
    attn_sdpa_desc *d = &C->P.d;
    attn_sdpa_args *a = &C->P.a;
    const int on_q = u8(r) & 1; /* Q's field, else O's */
    switch (C->qo.bad) {
    case QB_TYPE: {
        static const int bad_t[6] = { 3, 4, -1, 255, INT_MAX, INT_MIN };
        const int v = bad_t[pick(r, 6)];
        if (on_q) d->q_type = (attn_dtype)v; else d->o_type = (attn_dtype)v;
        break;
    }
    case QB_SPARSE:
        /* a decoded layout keeps its block size (its array was sized by
         * it); Q or O 16-bit even where both were decoded F32: the plan is
         * valid, and execute finds the pointers (and a new sparse
         * option's array) missing */
        if (!qo_16(d)) {
            if (on_q) d->q_type = ATTN_DTYPE_BF16; else d->o_type = ATTN_DTYPE_F16;
        }
        switch (pick(r, 3)) {
        case 0: d->use_global_k = 1; break;
        case 1: d->use_global_q = 1; break;
        default: if (!d->block_size) d->block_size = 16 << pick(r, 5); break;
        }
        break;
    case QB_PTR_NULL:
        if (on_q) {
            if (d->q_type != ATTN_DTYPE_F32) a->q16 = NULL; else a->q = NULL;
        } else {
            if (d->o_type != ATTN_DTYPE_F32) a->o16 = NULL; else a->o = NULL;
        }
        break;
    case QB_PTR_EXTRA:
        if (on_q) {
            if (d->q_type != ATTN_DTYPE_F32) a->q = junkf; else a->q16 = junk16;
        } else {
            if (d->o_type != ATTN_DTYPE_F32) a->o = junkf; else a->o16 = junko16;
        }
        break;
    case QB_PTR_SWAP:
        /* the pointer of the other type only (a caller passing float data
         * for a 16-bit desc, or the reverse) */
        if (on_q) {
            if (d->q_type != ATTN_DTYPE_F32) { a->q = junkf; a->q16 = NULL; }
            else { a->q16 = junk16; a->q = NULL; }
        } else {
            if (d->o_type != ATTN_DTYPE_F32) { a->o = junkf; a->o16 = NULL; }
            else { a->o16 = junko16; a->o = NULL; }
        }
        break;
    default: break;
    }
}

/* After a successful call: the reference reads Q widened, O is not its
 * business (on top of kv_reference's K and V when bit 6 is set). */
void qo_reference(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    if (!P->refd) {
        C->kv_refd = P->d;
        C->kv_refa = P->a;
        P->refd = &C->kv_refd;
        P->refa = &C->kv_refa;
    }
    C->kv_refd.q_type = C->kv_refd.o_type = ATTN_DTYPE_F32;
    if (C->QS.qw)
        C->kv_refa.q = C->QS.qw;
    C->kv_refa.q16 = NULL;
    C->kv_refa.o16 = NULL;
    C->kv_refa.o = NULL;
}

/* Where the products are not BF16 ones: the same call in fp32 on the
 * widened values (the reference's desc and args: F32, contiguous, the
 * same engine, threads and options) gives O bitwise, once rounded to
 * o_type, and the same P and logsumexp bits.  Runs after the checks of
 * the first call, whose outputs it leaves in place. */
void qo_twin(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    if (!P->refd || qo_bf16_products(d, 0) || d->qk_int8)   /* (int8: an F32 K takes none) */
        return;
    attn_sdpa_desc td = *P->refd;
    attn_sdpa_args ta = *P->refa;
    const int o16 = d->o_type != ATTN_DTYPE_F32;
    const size_t ocount = o16 ? P->o16.count : P->o.count;
    const size_t ooff = o16 ? (size_t)(P->o16.ptr - P->o16.base) : (size_t)(P->o.ptr - P->o.base);
    float *to = xmalloc(ocount * sizeof(float));
    float *tp = P->p.base ? xmalloc(P->p.count * sizeof(float)) : NULL;
    float *tl = P->l.base ? xmalloc(P->l.count * sizeof(float)) : NULL;
    const float s = sentinel();
    for (size_t i = 0; i < ocount; i++)
        to[i] = s;
    for (size_t i = 0; tp && i < P->p.count; i++)
        tp[i] = s;
    for (size_t i = 0; tl && i < P->l.count; i++)
        tl[i] = s;
    ta.o = to + ooff;
    ta.o16 = NULL;
    if (tp)
        ta.probs = tp + (P->p.ptr - P->p.base);
    if (tl)
        ta.lse = tl + (P->l.ptr - P->l.base);
    const attn_status st = attn_sdpa(&td, &ta);
    if (st != ATTN_OK)
        FAIL("the fp32 twin on the widened values: %s", st_name(st));
    const uint8_t *inview = o16 ? P->o16.inview : P->o.inview;
    for (size_t i = 0; i < ocount; i++) {
        if (!inview[i])
            continue;
        if (o16) {
            uint16_t h;
            if (attn_dtype_encode(d->o_type, to + i, &h, 1) != ATTN_OK)
                FAIL("attn_dtype_encode of O failed");
            if (h != P->o16.base[i])
                FAIL("O element %zu: 0x%04x, the fp32 call on the widened values gives %.9g "
                     "(0x%08x), rounded 0x%04x", i, (unsigned)P->o16.base[i], (double)to[i],
                     fbits(to[i]), (unsigned)h);
        } else if (fbits(to[i]) != fbits(P->o.base[i])) {
            FAIL("O element %zu: %.9g (0x%08x), the fp32 call on the widened values gives "
                 "%.9g (0x%08x)", i, (double)P->o.base[i], fbits(P->o.base[i]), (double)to[i],
                 fbits(to[i]));
        }
    }
    if (tp && memcmp(tp, P->p.base, P->p.count * sizeof(float)))
        FAIL("P differs bitwise from the fp32 call on the widened values");
    if (tl && memcmp(tl, P->l.base, P->l.count * sizeof(float)))
        FAIL("lse differs bitwise from the fp32 call on the widened values");
    counts[N_QO_TWIN]++;
    free(to);
    free(tp);
    free(tl);
}
