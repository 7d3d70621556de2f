/*
 * fuzz_sdpa_bwd.c -- the SDPA backward (attn_sdpa_bwd_plan_create/execute
 * and the one-shot attn_sdpa_backward), on the problem of a valid SDPA
 * forward with plain K/V that fuzz_sdpa.c has just checked; its bytes
 * follow the forward's (skipped for a quarter of the inputs).
 *
 * Decoded: the forward's O and logsumexp (a want_lse run when the problem
 * had none) as inputs, dO from the input's seed in a decoded view (NaN in
 * its gaps and in padded query rows, whose O rows are set to NaN too:
 * never read), dQ, dK, dV and, with a bias, mostly dBias in decoded views
 * (BHSD, BSHD, any order with gaps; garbage in dBias's strides of the
 * dimensions the bias broadcasts over, which attn.h says are ignored), one
 * or two planted invalid backward fields (BB_*: want_lse 0, want_probs 1,
 * dBias without bias, reserved, unset, negative, zero, short, non-nested
 * or huge strides, a field of fwd, NULL or extra pointers, lengths,
 * workspace, NULL plan/desc/args), plan/execute with a workspace choice or
 * the one-shot.
 *
 * Contract: the status (expect_bwd_*), outputs untouched and inputs (Q, K,
 * V, bias, O, dO, lse) unchanged on error; on success test/bwd_check.c
 * (shared with the SDPA table's backward check: every gradient within
 * ref_sdpa_bwd's bounds, the exact zeros, the sentinel outside the views)
 * and a rerun with another thread count, bitwise.
 */
#include "../bwd_check.h"
#include "fuzz_sdpa.h"

/* Invalid fields of the backward (one or two per input, as the forward's). */
enum {
    BB_NONE = 0,
    BB_LSE_OFF,        /* fwd.want_lse 0 */
    BB_PROBS_ON,       /* fwd.want_probs 1 */
    BB_DBIAS_NOBIAS,   /* want_dbias without fwd.use_bias */
    BB_RESERVED,
    BB_VIEW_UNSET,     /* a stride of dO, dQ, dK, dV or dBias */
    BB_VIEW_NEG,
    BB_VIEW_ZERO,
    BB_VIEW_SHORT,
    BB_VIEW_OVERLAP,   /* an output view not nested */
    BB_VIEW_HUGE,
    BB_FWD,            /* a field of fwd: scale, threads, reserved, dropout */
    BB_PTR_NULL,
    BB_PTR_EXTRA,      /* a pointer of a feature not in use (dbias too) */
    BB_LENGTH,
    BB_WS_SMALL,
    BB_WS_MISALIGNED,
    BB_NULL_TOP,       /* NULL plan, desc, args or bytes */
    BB_COUNT_
};

/* dBias's shape: 1 where the bias broadcasts (its stride 0). */
static void dbias_shape(const attn_sdpa_desc *f, int64_t sz[3])
{
    sz[0] = f->bias.batch ? f->batch : 1;
    sz[1] = f->bias.head ? f->q_heads : 1;
    sz[2] = f->bias.seq ? f->q_len : 1;
}

/* The dBias view with the strides attn.h says are ignored (those of the
 * dimensions the bias broadcasts over) set to 0. */
static attn_view dbias_eff(const attn_sdpa_bwd_desc *bd)
{
    attn_view v = bd->dbias;
    if (!bd->fwd.bias.batch) v.batch = 0;
    if (!bd->fwd.bias.head) v.head = 0;
    if (!bd->fwd.bias.seq) v.seq = 0;
    return v;
}

static expect expect_bwd_plan(const attn_sdpa_bwd_desc *bd)
{
    const attn_sdpa_desc *f = &bd->fwd;
    expect e = expect_sdpa_plan(f);
    if (reserved_nonzero(bd->reserved, (int)(sizeof bd->reserved / sizeof bd->reserved[0])) ||
        !f->want_lse || f->want_probs || (bd->want_dbias && !f->use_bias))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    /* (attn.h: the backward takes 16-bit types, with the sparse options
     * too since 1.1: no ATTN_ERR_UNSUPPORTED_TYPE) */
    const int64_t B = f->batch, Hq = f->q_heads, Hkv = f->kv_heads, n = f->q_len,
                  m = f->kv_len;
    expect_view(&e, &bd->d_o, B, Hq, n, f->v_dim, VK_INPUT);
    expect_view(&e, &bd->dq, B, Hq, n, f->qk_dim, VK_OUTPUT);
    expect_view(&e, &bd->dk, B, Hkv, m, f->qk_dim, VK_OUTPUT);
    expect_view(&e, &bd->dv, B, Hkv, m, f->v_dim, VK_OUTPUT);
    if (bd->want_dbias && f->use_bias) {
        int64_t sz[3];
        dbias_shape(f, sz);
        const attn_view v = dbias_eff(bd);
        expect_view(&e, &v, sz[0], sz[1], sz[2], m, VK_DBIAS);
    }
    return e;
}

static expect expect_bwd_exec(const attn_sdpa_bwd_desc *bd, const attn_sdpa_bwd_args *a,
                              const void *ws, size_t ws_bytes, size_t need)
{
    const attn_sdpa_desc *f = &bd->fwd;
    expect e = { 0, 0 };
    const ptr_use u[] = {
        { 1, a->q },  { 1, a->k },  { 1, a->v },  { 1, a->o },  { 1, a->d_o }, { 1, a->lse },
        { 1, a->dq }, { 1, a->dk }, { 1, a->dv },
        { f->use_kv_lens, a->kv_lens }, { f->use_q_lens, a->q_lens },
        { f->mask_mode != ATTN_MASK_NONE, a->mask }, { f->use_bias, a->bias },
        { bd->want_dbias, a->dbias },
        { f->use_global_k != 0, a->global_k }, { f->use_global_q != 0, a->global_q },
        { f->block_size != 0, a->layout },
    };
    expect_call(&e, u, sizeof u / sizeof u[0], f->batch, f->use_kv_lens ? a->kv_lens : NULL,
                f->kv_len, f->use_q_lens ? a->q_lens : NULL, f->q_len, ws, ws_bytes, need);
    return e;
}

static void bwd_clear(obuf *o[4])
{
    for (int k = 0; k < 4; k++)
        if (o[k]->base)
            obuf_clear(o[k]);
}

/* The backward on the problem of P, whose forward (O, and the logsumexp
 * when it wanted one) has just been checked. */
/* The backward's state from stage to stage. */
typedef struct bwd_case {
    sdpa_prob *P;                      /* the checked forward */
    int t2;                            /* the other thread count */
    unsigned ctl, bad[2];              /* BB_* */
    int64_t B, Hq, Hkv, n, m, dk, dv;
    int64_t szq[3], szk[3], szb[3];    /* szb: dBias's shape */
    const float *lse;                  /* the forward's logsumexp, view lv */
    attn_view lv;
    float *own_lse;                    /* when the forward had none */
    attn_sdpa_bwd_desc bd, valid;      /* valid: before the plants */
    expect pe;
    int unalloc;                       /* a view spanned too much: obuf_make2 took the valid one */
    obuf go, gq, gk, gv, gb;           /* dO, dQ, dK, dV, dBias */
    obuf *outs[4];
    attn_view dbv;                     /* dBias's view as written */
    attn_sdpa_bwd_args a;
    int32_t kvl[8], ql[8];             /* planted lengths */
    int ws_small, ws_mis, null_top;
    unsigned wsel;
    float *pool_copy, *o_copy, *do_copy, *l_copy; /* the inputs, to see that none changes */
    size_t l_bytes;
    const void *l_base;
} bwd_case;

static const char *const bwd_names[4] = { "dQ", "dK", "dV", "dBias" };

/* -------------------------------------------------------------- decode */

/* The forward's logsumexp: its own output, or a run with want_lse. */
static void bwd_forward_lse(bwd_case *C)
{
    sdpa_prob *P = C->P;
    const attn_sdpa_desc *d = &P->d;
    C->lse = P->l.ptr;
    C->lv = d->lse;
    if (d->want_lse)
        return;
    attn_sdpa_desc d2 = *d;
    d2.want_probs = 0;
    d2.want_lse = 1;
    d2.lse = attn_view_bhsd(C->Hq, C->n, 1);
    C->own_lse = xmalloc((size_t)(C->B * C->Hq * C->n) * sizeof(float));
    float *so = obuf_snap(&P->o);
    attn_sdpa_args a2 = P->a;
    a2.probs = NULL;
    a2.lse = C->own_lse;
    attn_status st = attn_sdpa(&d2, &a2);
    if (st != ATTN_OK)
        FAIL("forward with want_lse for the backward: %s", st_name(st));
    if (memcmp(so, P->o.base, P->o.count * sizeof(float)))
        FAIL("want_lse changed the bits of O");
    free(so);
    C->lse = C->own_lse;
    C->lv = d2.lse;
}

/* The desc: the forward's with its logsumexp, views of dO, dQ, dK, dV
 * and (with a bias, mostly) dBias, garbage in dBias's ignored strides. */
static void bwd_decode_desc(rd *r, bwd_case *C)
{
    const attn_sdpa_desc *d = &C->P->d;
    attn_sdpa_bwd_desc *bd = &C->bd;
    attn_sdpa_bwd_desc_init(bd);
    bd->fwd = *d;
    bd->fwd.want_probs = 0;
    bd->fwd.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    bd->fwd.want_lse = 1;
    bd->fwd.lse = C->lv;
    bd->d_o = gen_view(r, C->szq, C->dv);
    bd->dq = gen_view(r, C->szq, C->dk);
    bd->dk = gen_view(r, C->szk, C->dk);
    bd->dv = gen_view(r, C->szk, C->dv);
    dbias_shape(d, C->szb);
    if (d->use_bias && !(C->ctl & 4)) {
        bd->want_dbias = 1;
        bd->dbias = gen_view(r, C->szb, C->m);
        /* garbage in the strides attn.h says are ignored */
        static const int64_t junk[] = { ATTN_STRIDE_UNSET, -1, 0, INT64_MAX, 3, -77777 };
        unsigned jb = u8(r);
        if (!d->bias.batch) bd->dbias.batch = junk[jb % 6];
        if (!d->bias.head) bd->dbias.head = junk[(jb >> 2) % 6];
        if (!d->bias.seq) bd->dbias.seq = junk[(jb >> 4) % 6];
    }
    C->valid = *bd;
}

/* 0: the input skips the backward. */
static int bwd_decode(rd *r, bwd_case *C)
{
    const sdpa_prob *P = C->P;
    const attn_sdpa_desc *d = &P->d;
    C->ctl = u8(r);
    if ((C->ctl & 3) == 3)
        return 0;
    C->bad[0] = C->bad[1] = BB_NONE;
    decode_bad(r, u8(r), BB_COUNT_, C->bad);
    C->B = d->batch, C->Hq = d->q_heads, C->Hkv = d->kv_heads, C->n = d->q_len;
    C->m = d->kv_len, C->dk = d->qk_dim, C->dv = d->v_dim;
    C->szq[0] = C->B, C->szq[1] = C->Hq, C->szq[2] = C->n;
    C->szk[0] = C->B, C->szk[1] = C->Hkv, C->szk[2] = C->m;
    bwd_forward_lse(C);
    /* O rows of padded queries are never read: NaN (the gaps hold the
     * sentinel, a NaN, already) */
    for (int64_t b = 0; b < C->B; b++)
        for (int64_t h = 0; h < C->Hq; h++)
            for (int64_t i = d->use_q_lens ? P->q_lens[b] : C->n; i < C->n; i++)
                for (int64_t x = 0; x < C->dv; x++)
                    P->o.ptr[b * d->o.batch + h * d->o.head + i * d->o.seq + x] = NAN;
    bwd_decode_desc(r, C);
    return 1;
}

/* --------------------------------------------------------------- plant */

/* One plan-time invalid field of kind bad (the view and stride it may hit
 * are decoded first, whatever the kind). */
static void bwd_plant_plan1(rd *r, bwd_case *C, unsigned bad)
{
    attn_sdpa_bwd_desc *bd = &C->bd;
    attn_view *views[] = { &bd->d_o, &bd->dq, &bd->dk, &bd->dv, &bd->dbias };
    unsigned wv = pick(r, 5);
    if (wv == 4 && !bd->want_dbias)
        wv = 1;
    attn_view *vw = views[wv];
    int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
    switch (bad) {
    case BB_LSE_OFF: bd->fwd.want_lse = 0; break;
    case BB_PROBS_ON:
        bd->fwd.want_probs = 1;
        if (u8(r) & 1) bd->fwd.probs = attn_view_bhsd(C->Hq, C->n, C->m);
        break;
    case BB_DBIAS_NOBIAS:
        if (!bd->want_dbias) {
            bd->want_dbias = 1;
            bd->dbias = attn_view_bhsd(C->Hq, C->n, C->m);
        }
        bd->fwd.use_bias = 0;
        break;
    case BB_RESERVED: {
        const int64_t val = (int64_t)u8(r) - 128;
        bd->reserved[pick(r, 16)] = val ? val : INT64_MIN;
        break;
    }
    case BB_VIEW_UNSET: *sp = ATTN_STRIDE_UNSET; break;
    case BB_VIEW_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
    case BB_VIEW_ZERO: *sp = 0; break;
    case BB_VIEW_SHORT: vw->seq = vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0; if (vw->seq < 0) vw->seq = 0; break;
    case BB_VIEW_OVERLAP: {
        if (wv == 0)
            vw = &bd->dq; /* dO is an input: overlapping is fine there */
        int64_t *s = pick(r, 2) ? &vw->head : &vw->batch;
        *s = (int64_t)pick(r, 4) + (s == &vw->head ? 0 : 1);
        if (u8(r) & 1) vw->seq = vw->head;
        break;
    }
    case BB_VIEW_HUGE:
        if (u8(r) & 1) vw->seq = (int64_t)INT32_MAX + 1 + pick(r, 4);
        else *sp = (int64_t)1 << (52 + pick(r, 11));
        break;
    case BB_FWD:
        if (C->P->sparse && (u8(r) & 1)) {
            plant_sparse(r, pick(r, 2) == 0, &bd->fwd.reserved_flags,
                         &bd->fwd.layout_per_head, &bd->fwd.block_size);
            break;
        }
        switch (pick(r, 4)) {
        case 0: bd->fwd.scale = (u8(r) & 1) ? INFINITY : -INFINITY; break;
        case 1: bd->fwd.threads = (u8(r) & 1) ? -1 : 1025; break;
        case 2:
            bd->fwd.reserved[pick(r, (unsigned)(sizeof bd->fwd.reserved / sizeof bd->fwd.reserved[0]))] =
                1 + (int64_t)u8(r);
            break;
        default: bd->fwd.dropout_p = (u8(r) & 1) ? NAN : -0.5; break;
        }
        break;
    default: break;
    }
}

/* ------------------------------------------------------------- buffers */

/* An output buffer for view v, or for the valid view v0 when v (planted)
 * spans nothing allocatable (then *unalloc = 1); the plan must refuse
 * such a view anyway. */
static attn_view obuf_make2(obuf *b, rd *r, const attn_view *v, const attn_view *v0,
                            const int64_t sz[3], int64_t D, int *unalloc)
{
    int64_t ext = view_extent(v, sz, D);
    if (ext < 0) {
        *unalloc = 1;
        v = v0;
        ext = view_extent(v, sz, D);
    }
    obuf_make(b, r, v, sz, D, ext);
    return *v;
}

/* dO (NaN in gaps and padded rows) and the sentinel-filled outputs. */
static void bwd_buffers(rd *r, bwd_case *C)
{
    const sdpa_prob *P = C->P;
    const attn_sdpa_desc *d = &P->d;
    const attn_sdpa_bwd_desc *bd = &C->bd, *valid = &C->valid;
    const int64_t B = C->B, Hq = C->Hq, n = C->n, m = C->m, dk = C->dk, dv = C->dv;
    C->unalloc = 0;
    const attn_view gov = obuf_make2(&C->go, r, &bd->d_o, &valid->d_o, C->szq, dv, &C->unalloc);
    {
        prng g = { u32(r) ^ 0x5851f42d4c957f2dull };
        for (size_t i = 0; i < C->go.count; i++)
            C->go.base[i] = NAN;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < (d->use_q_lens ? P->q_lens[b] : n); i++)
                    for (int64_t x = 0; x < dv; x++)
                        C->go.ptr[b * gov.batch + h * gov.head + i * gov.seq + x] =
                            pr_val(&g, 1.0);
    }
    obuf_make2(&C->gq, r, &bd->dq, &valid->dq, C->szq, dk, &C->unalloc);
    obuf_make2(&C->gk, r, &bd->dk, &valid->dk, C->szk, dk, &C->unalloc);
    obuf_make2(&C->gv, r, &bd->dv, &valid->dv, C->szk, dv, &C->unalloc);
    C->dbv = dbias_eff(bd);
    if (bd->want_dbias) {
        attn_view dbv0 = dbias_eff(valid);
        if (!valid->want_dbias)
            dbv0 = attn_view_bhsd(Hq, n, m);
        C->dbv = obuf_make2(&C->gb, r, &C->dbv, &dbv0, C->szb, m, &C->unalloc);
    }
    C->outs[0] = &C->gq;
    C->outs[1] = &C->gk;
    C->outs[2] = &C->gv;
    C->outs[3] = &C->gb;

    attn_sdpa_bwd_args *a = &C->a;
    memset(a, 0, sizeof *a);
    a->q = P->a.q;
    a->k = P->a.k;
    a->v = P->a.v;
    a->o = P->a.o;
    a->d_o = C->go.ptr;
    a->lse = C->lse;
    a->kv_lens = P->a.kv_lens;
    a->q_lens = P->a.q_lens;
    a->mask = P->a.mask;
    a->bias = P->a.bias;
    a->dq = C->gq.ptr;
    a->dk = C->gk.ptr;
    a->dv = C->gv.ptr;
    a->dbias = bd->want_dbias ? C->gb.ptr : NULL;
    a->global_k = P->a.global_k;
    a->global_q = P->a.global_q;
    a->layout = P->a.layout;
}

/* One execute-time invalid field of kind bad. */
static void bwd_plant_exec1(rd *r, bwd_case *C, unsigned bad)
{
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[8];
    static float junk_f[8];
    attn_sdpa_bwd_desc *bd = &C->bd;
    attn_sdpa_bwd_args *a = &C->a;
    switch (bad) {
    case BB_PTR_NULL: {
        if (C->P->sparse && (u8(r) & 1)) {
            plant_sparse_null(r, &a->global_k, &a->global_q, &a->layout);
            break;
        }
        const void **p[] = { (const void **)&a->q, (const void **)&a->k, (const void **)&a->v,
                             (const void **)&a->o, (const void **)&a->d_o, (const void **)&a->lse,
                             (const void **)&a->kv_lens, (const void **)&a->q_lens,
                             (const void **)&a->mask, (const void **)&a->bias,
                             (const void **)&a->dq, (const void **)&a->dk,
                             (const void **)&a->dv, (const void **)&a->dbias };
        *p[pick(r, 14)] = NULL;
        break;
    }
    case BB_PTR_EXTRA:
        if (C->P->sparse && (u8(r) & 1)) {
            plant_sparse_extra(r, bd->fwd.use_global_k, bd->fwd.use_global_q,
                               bd->fwd.block_size, junk_u8, &a->global_k, &a->global_q,
                               &a->layout);
            break;
        }
        switch (pick(r, 5)) {
        case 0: if (!bd->fwd.use_kv_lens) a->kv_lens = zero_lens; break;
        case 1: if (!bd->fwd.use_q_lens) a->q_lens = zero_lens; break;
        case 2: if (!bd->fwd.mask_mode) a->mask = junk_u8; break;
        case 3: if (!bd->fwd.use_bias) a->bias = junk_f; break;
        default: if (!bd->want_dbias) a->dbias = junk_f; break;
        }
        break;
    case BB_LENGTH: {
        unsigned b = pick(r, (unsigned)C->B);
        if (u8(r) & 1) { C->kvl[b] = bad_length(r, C->m); bd->fwd.use_kv_lens = 1; a->kv_lens = C->kvl; }
        else { C->ql[b] = bad_length(r, C->n); bd->fwd.use_q_lens = 1; a->q_lens = C->ql; }
        break;
    }
    case BB_WS_SMALL: C->ws_small = 1; break;
    case BB_WS_MISALIGNED: C->ws_mis = 1; break;
    case BB_NULL_TOP: C->null_top = 1 + (int)pick(r, 6); break;
    default: break;
    }
}

static void print_bwd(const bwd_case *C)
{
    const attn_sdpa_bwd_desc *bd = &C->bd;
    fprintf(stderr, "  bwd: dO{%lld,%lld,%lld} dQ{%lld,%lld,%lld} dK{%lld,%lld,%lld} "
            "dV{%lld,%lld,%lld} dbias=%d{%lld,%lld,%lld} lse{%lld,%lld,%lld} bad=%u,%u "
            "threads=%d/%d\n",
            (long long)bd->d_o.batch, (long long)bd->d_o.head, (long long)bd->d_o.seq,
            (long long)bd->dq.batch, (long long)bd->dq.head, (long long)bd->dq.seq,
            (long long)bd->dk.batch, (long long)bd->dk.head, (long long)bd->dk.seq,
            (long long)bd->dv.batch, (long long)bd->dv.head, (long long)bd->dv.seq,
            bd->want_dbias, (long long)bd->dbias.batch, (long long)bd->dbias.head,
            (long long)bd->dbias.seq, (long long)C->lv.batch, (long long)C->lv.head,
            (long long)C->lv.seq, C->bad[0], C->bad[1], bd->fwd.threads, C->t2);
}

/* The exec-time plants, then the plan's expected status again (BB_LENGTH
 * may have enabled lengths) and copies of every input. */
static void bwd_plant_exec(rd *r, bwd_case *C)
{
    const sdpa_prob *P = C->P;
    memcpy(C->kvl, P->kv_lens, sizeof C->kvl);
    memcpy(C->ql, P->q_lens, sizeof C->ql);
    for (int k = 0; k < 2; k++)
        bwd_plant_exec1(r, C, C->bad[k]);
    if (verbose)
        print_bwd(C);
    C->pe = expect_bwd_plan(&C->bd); /* BB_LENGTH may have enabled lengths */

    /* inputs, to see that none changes */
    C->pool_copy = xmalloc(P->pool_len * sizeof(float));
    memcpy(C->pool_copy, P->pool, P->pool_len * sizeof(float));
    C->o_copy = obuf_snap(&P->o);
    C->do_copy = obuf_snap(&C->go);
    C->l_bytes = C->own_lse ? (size_t)(C->B * C->Hq * C->n) * sizeof(float)
                            : P->l.count * sizeof(float);
    C->l_base = C->own_lse ? (const void *)C->own_lse : (const void *)P->l.base;
    C->l_copy = xmalloc(C->l_bytes);
    memcpy(C->l_copy, C->l_base, C->l_bytes);
}

/* ------------------------------------------------------------------ run */

/* A planted view that may be valid but spans more than we allocate: plan
 * only. */
static void bwd_plan_only(const bwd_case *C)
{
    attn_sdpa_bwd_plan *plan = NULL;
    const attn_status st = attn_sdpa_bwd_plan_create(&plan, &C->bd);
    check_status("attn_sdpa_bwd_plan_create", st, C->pe);
    attn_sdpa_bwd_plan_destroy(plan);
}

static void bwd_untouched(const bwd_case *C, const char *when)
{
    for (int k = 0; k < 4; k++)
        if (C->outs[k]->base)
            obuf_untouched(C->outs[k], bwd_names[k], when);
}

/* NULL plan, desc, args or bytes (a valid desc otherwise). */
static void bwd_run_null_top(rd *r, bwd_case *C)
{
    attn_sdpa_bwd_plan *plan = NULL;
    attn_status st = ATTN_OK;
    switch (C->null_top) {
    case 1: st = attn_sdpa_bwd_plan_create(&plan, NULL); break;
    case 2: st = attn_sdpa_bwd_plan_create(NULL, &C->bd); break;
    case 3: st = attn_sdpa_backward(NULL, &C->a); break;
    case 4: st = attn_sdpa_backward(&C->bd, NULL); break;
    default:
        st = attn_sdpa_bwd_plan_create(&plan, &C->bd);
        check_status("attn_sdpa_bwd_plan_create", st, C->pe);
        st = C->null_top == 5 ? attn_sdpa_bwd_execute(NULL, &C->a, NULL, 0)
           : (u8(r) & 1)      ? attn_sdpa_bwd_execute(plan, NULL, NULL, 0)
                              : attn_sdpa_bwd_workspace_size(plan, NULL);
        attn_sdpa_bwd_plan_destroy(plan);
        plan = NULL;
        break;
    }
    if (plan)
        FAIL("backward plan set on error");
    if (st != ATTN_ERR_NULL_ARGUMENT)
        FAIL("backward: NULL plan/desc/args: got %s", st_name(st));
    bwd_untouched(C, "NULL argument");
}

/* The call: the one-shot or plan, workspace and execute. */
static attn_status bwd_run(bwd_case *C)
{
    const attn_sdpa_bwd_desc *bd = &C->bd;
    const attn_sdpa_bwd_args *a = &C->a;
    const expect pe = C->pe;
    const int oneshot = (C->wsel & 3) == 3 && !C->ws_small && !C->ws_mis;
    attn_status st;
    if (oneshot) {
        expect x = pe.must ? pe : expect_bwd_exec(bd, a, NULL, 0, 0);
        if (!pe.must)
            x.maybe |= pe.maybe;
        st = attn_sdpa_backward(bd, a);
        check_status("attn_sdpa_backward", st, x);
        return st;
    }
    attn_sdpa_bwd_plan *plan = NULL;
    st = attn_sdpa_bwd_plan_create(&plan, bd);
    check_status("attn_sdpa_bwd_plan_create", st, pe);
    if (st != ATTN_OK) {
        if (plan)
            FAIL("backward plan set on error");
        return st;
    }
    size_t need_ws = 0;
    if (attn_sdpa_bwd_workspace_size(plan, &need_ws) != ATTN_OK)
        FAIL("attn_sdpa_bwd_workspace_size failed");
    wsp w1;
    wsp_make(&w1, C->wsel & 3, need_ws, C->ws_small, C->ws_mis);
    expect ee = expect_bwd_exec(bd, a, w1.ptr, w1.bytes, need_ws);
    if (C->ws_small && need_ws == 0)
        ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    st = attn_sdpa_bwd_execute(plan, a, w1.ptr, w1.bytes);
    check_status("attn_sdpa_bwd_execute", st, ee);
    attn_sdpa_bwd_plan_destroy(plan);
    free(w1.raw);
    return st;
}

/* ---------------------------------------------------------------- check */

static void bwd_report(void *ctx, const char *msg)
{
    (void)ctx;
    FAIL("backward: %s", msg);
}

static bwd_buf bwd_buf_of(const obuf *o, const attn_view *v, const int64_t sz[3], int64_t D)
{
    bwd_buf b = { o->ptr, *v, sz[0], sz[1], sz[2], D, NULL, 0 };
    return b;
}

/* After the call: the inputs unchanged; on error nothing written (0); on
 * success every gradient against the float64 reference (with dropout,
 * that of the keep mask of attn_dropout_mask_fill held fixed), the
 * sentinels outside (1). */
static int bwd_check_result(bwd_case *C, attn_status st)
{
    const sdpa_prob *P = C->P;
    const attn_sdpa_desc *d = &P->d;
    const attn_sdpa_bwd_desc *bd = &C->bd;
    if (memcmp(C->pool_copy, P->pool, P->pool_len * sizeof(float)) ||
        memcmp(C->o_copy, P->o.base, P->o.count * sizeof(float)) ||
        memcmp(C->do_copy, C->go.base, C->go.count * sizeof(float)) ||
        memcmp(C->l_copy, C->l_base, C->l_bytes))
        FAIL("backward: an input was modified");
    if (st != ATTN_OK) {
        bwd_untouched(C, st_name(st));
        counts[N_BWD_ERROR]++;
        return 0;
    }
    counts[N_BWD_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_BWD_CHECKED]++;
    if (P->sparse)
        counts[N_SPARSE_BWD_CHECKED]++;
    const int64_t dk = C->dk, dv = C->dv;
    const bwd_buf bq = bwd_buf_of(&C->gq, &bd->dq, C->szq, dk),
                  bk = bwd_buf_of(&C->gk, &bd->dk, C->szk, dk),
                  bv = bwd_buf_of(&C->gv, &bd->dv, C->szk, dv),
                  bdb = bwd_buf_of(&C->gb, &C->dbv, C->szb, C->m);
    bwd_err err = { 0, 0, 0, 0, 0 };
    bwd_check(d, &P->a, C->go.ptr, bd->d_o, &bq, &bk, &bv, bd->want_dbias ? &bdb : NULL, SENT,
              bwd_report, NULL, &err);
    for (int k = 0; k < 4; k++)
        if (C->outs[k]->base)
            obuf_outside(C->outs[k], bwd_names[k]);
    return 1;
}

/* Again with another thread count and workspace: bitwise equal. */
static void bwd_rerun(bwd_case *C)
{
    attn_sdpa_bwd_desc *bd = &C->bd;
    const int t2 = C->t2;
    attn_status st;
    float *snap[4];
    for (int k = 0; k < 4; k++)
        snap[k] = obuf_snap(C->outs[k]);
    const int t1 = bd->fwd.threads;
    const char *note =
        drop_zero_reset(bd->fwd.dropout_p, &bd->fwd.dropout_seed, &bd->fwd.dropout_offset);
    bd->fwd.threads = t2;
    bwd_clear(C->outs);
    attn_sdpa_bwd_plan *plan = NULL;
    st = attn_sdpa_bwd_plan_create(&plan, bd);
    if (st != ATTN_OK)
        FAIL("backward plan with %d threads: %s", t2, st_name(st));
    size_t need_ws = 0;
    attn_sdpa_bwd_workspace_size(plan, &need_ws);
    wsp w2;
    wsp_make(&w2, (C->wsel >> 2) % 3, need_ws, 0, 0);
    st = attn_sdpa_bwd_execute(plan, &C->a, w2.ptr, w2.bytes);
    if (st != ATTN_OK)
        FAIL("backward execute with %d threads: %s", t2, st_name(st));
    attn_sdpa_bwd_plan_destroy(plan);
    free(w2.raw);
    for (int k = 0; k < 4; k++) {
        obuf_same(C->outs[k], snap[k], bwd_names[k], t1, t2, note);
        free(snap[k]);
    }
}

static void bwd_case_free(bwd_case *C)
{
    free(C->pool_copy);
    free(C->o_copy);
    free(C->do_copy);
    free(C->l_copy);
    free(C->own_lse);
    obuf_free(&C->go);
    obuf_free(&C->gq);
    obuf_free(&C->gk);
    obuf_free(&C->gv);
    obuf_free(&C->gb);
}

/* ----------------------------------------------------------------- kind */

/* The backward on the problem of P, whose forward (O, and the logsumexp
 * when it wanted one) has just been checked. */
void fuzz_sdpa_bwd(rd *r, sdpa_prob *P, int t2)
{
    bwd_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    C->P = P;
    C->t2 = t2;
    /* decode */
    if (!bwd_decode(r, C)) {
        free(C);
        return;
    }
    /* plant (plan-time fields), buffers, plant (exec-time fields) */
    for (int k = 0; k < 2; k++)
        bwd_plant_plan1(r, C, C->bad[k]);
    bwd_buffers(r, C);
    bwd_plant_exec(r, C);
    /* run */
    C->wsel = u8(r);
    bwd_clear(C->outs);
    if (C->unalloc && C->pe.must == 0) {
        bwd_plan_only(C);
    } else if (C->null_top && C->pe.must == 0) {
        bwd_run_null_top(r, C);
    } else {
        const attn_status st = bwd_run(C);
        /* check */
        if (bwd_check_result(C, st))
            bwd_rerun(C);
    }
    bwd_case_free(C);
    free(C);
}

/* A valid forward with 16-bit Q or O (plain K/V) that fuzz_sdpa.c has
 * just checked: its backward (the forward's desc with a logsumexp, every
 * gradient view contiguous) must plan, with the sparse options too
 * (attn.h: the backward takes 16-bit types); the one-shot with float
 * pointers only (no args16) must then be ATTN_ERR_NULL_ARGUMENT.  Either way nothing is
 * written.  (The values of a 16-bit backward are the types suite's: this
 * target checks its statuses only.)  The args point at valid float data
 * of the right extents (Q and O widened). */
void sdpa_bwd_qo16(const sdpa_prob *P)
{
    const attn_sdpa_desc *d = &P->d;
    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = *d;
    bd.fwd.want_probs = 0;
    bd.fwd.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    bd.fwd.want_lse = 1;
    if (!d->want_lse)
        bd.fwd.lse = attn_view_bhsd(Hq, n, 1);
    bd.d_o = attn_view_bhsd(Hq, n, dv);
    bd.dq = attn_view_bhsd(Hq, n, dk);
    bd.dk = attn_view_bhsd(Hkv, m, dk);
    bd.dv = attn_view_bhsd(Hkv, m, dv);
    const expect pe = expect_bwd_plan(&bd);
    attn_sdpa_bwd_plan *plan = NULL;
    attn_status st = attn_sdpa_bwd_plan_create(&plan, &bd);
    check_status("attn_sdpa_bwd_plan_create (16-bit Q or O)", st, pe);
    attn_sdpa_bwd_plan_destroy(plan);

    /* the one-shot: Q and O widened, O's own view; dO, lse and the
     * gradients contiguous, sentinel-filled outputs */
    const size_t nq = (size_t)(B * Hq * n), nk = (size_t)(B * Hkv * m);
    const size_t ocount = d->o_type == ATTN_DTYPE_F32 ? P->o.count : P->o16.count;
    float *ow = xmalloc(ocount * sizeof(float));
    if (d->o_type == ATTN_DTYPE_F32)
        memcpy(ow, P->o.base, ocount * sizeof(float));
    else if (attn_dtype_decode(d->o_type, P->o16.base, ow, (int64_t)ocount) != ATTN_OK)
        FAIL("attn_dtype_decode of O failed");
    float *dO = xmalloc(nq * (size_t)dv * sizeof(float));
    float *lse = xmalloc(nq * sizeof(float));
    for (size_t i = 0; i < nq * (size_t)dv; i++)
        dO[i] = 0.5f;
    for (size_t i = 0; i < nq; i++)
        lse[i] = 0.0f;
    const size_t gn[3] = { nq * (size_t)dk, nk * (size_t)dk, nk * (size_t)dv };
    float *g[3];
    for (int t = 0; t < 3; t++) {
        g[t] = xmalloc(gn[t] * sizeof(float));
        for (size_t i = 0; i < gn[t]; i++)
            g[t][i] = sentinel();
    }
    attn_sdpa_bwd_args a;
    attn_sdpa_bwd_args_init(&a);
    a.q = P->refa && P->refa->q ? P->refa->q : P->a.q;
    a.k = P->a.k;
    a.v = P->a.v;
    a.o = ow + (d->o_type == ATTN_DTYPE_F32 ? P->o.ptr - P->o.base : P->o16.ptr - P->o16.base);
    a.d_o = dO;
    a.lse = d->want_lse ? P->l.ptr : lse;
    a.kv_lens = P->a.kv_lens;
    a.q_lens = P->a.q_lens;
    a.mask = P->a.mask;
    a.bias = P->a.bias;
    a.dq = g[0];
    a.dk = g[1];
    a.dv = g[2];
    attn_status st2 = attn_sdpa_backward(&bd, &a);
    if (st == ATTN_OK) {
        /* a 16-bit plan: args16 is required */
        if (st2 != ATTN_ERR_NULL_ARGUMENT)
            FAIL("attn_sdpa_backward (16-bit Q or O, no args16) returned %s, want "
                 "ATTN_ERR_NULL_ARGUMENT", st_name(st2));
    } else {
        check_status("attn_sdpa_backward (16-bit Q or O)", st2, pe);
        if (st2 != st)
            FAIL("attn_sdpa_backward returned %s, attn_sdpa_bwd_plan_create %s", st_name(st2),
                 st_name(st));
    }
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < gn[t]; i++)
            if (fbits(g[t][i]) != SENT)
                FAIL("attn_sdpa_backward (16-bit Q or O, %s): %s element %zu was written",
                     st_name(st2), bwd_names[t], i);
    counts[N_QO_BWD]++;
    for (int t = 0; t < 3; t++)
        free(g[t]);
    free(ow);
    free(dO);
    free(lse);
}
