/*
 * fuzz_mha_train.c -- attn_mha_bwd_execute, after an attn_mha_train_execute
 * that fuzz_mha.c has just checked (byte 0 bits 0 and 2, SEL_TRAIN); its
 * bytes follow the forward's.
 *
 * Decoded: dY (NaN in the row gaps), the gradients in sentinel-filled
 * buffers (dX, dXk, dXv with the inputs' row strides, the weight
 * gradients dense, the packed ones in one [3E][E] and one [3E] buffer),
 * one or two planted invalid fields (MB_*: NULL plan, weights, args, dY,
 * grads or context, short or misaligned context or workspace, accumulate
 * not 0 or 1, gradient, weight and input pointers NULL when needed or
 * given when not, lengths) and args->out / args->weights NULL or junk
 * (attn.h: ignored).
 *
 * Contract: an error has its status (expect_mha_call, expect_context) and
 * every gradient buffer untouched.  Success: every gradient within the
 * float64 reference's bound (mref_mha_backward, the keep mask of dropout
 * held fixed), the sentinel in the row gaps and around; then a plan with
 * the other thread count, its train_forward (out bitwise the same) and a
 * backward with accumulate 0 (bitwise the same gradients) or 1 onto
 * decoded values (each element exactly old + g in fp32).  Inputs, dY and
 * the context never change.
 *
 * Element types (byte 0 bit 7, fuzz_mha16.c): dY rounded to x_type and
 * passed through grads16 (the dy argument NULL), each gradient at its
 * tensor's type (16-bit ones in buffers of sentinels laid out as the
 * float ones), the XB_* field planted here (grads16 included); checked
 * against the reference with each gradient's own rounding added, and where
 * the types widen bitwise against the fp32 training calls on the widened
 * values (mtrain_twin; accumulate = 1 then as round(old + g) with g that
 * twin's fp32 gradient; with BF16 products the rerun overwrites).
 */
#include "fuzz_mha.h"
#include "fuzz_kv.h"

/* Invalid fields of attn_mha_bwd_execute (one or two per input). */
enum {
    MB_NONE = 0,
    MB_NULL_TOP,       /* NULL plan, weights, args, dy or grads */
    MB_CX_NULL,
    MB_CX_SHORT,
    MB_CX_MISALIGNED,  /* a misaligned copy of the context */
    MB_WS_SMALL,
    MB_WS_MISALIGNED,
    MB_ACCUMULATE,     /* not 0 or 1 */
    MB_GRAD_NULL,      /* a gradient the plan needs */
    MB_GRAD_EXTRA,     /* a gradient of a layout or bias the plan has not */
    MB_PTR_NULL,       /* a weight or input */
    MB_PTR_EXTRA,      /* an input the plan does not use (not out or weights) */
    MB_LENGTH,
    MB_COUNT_
};

/* The gradient pointers in attn_mha_grads order, and which the plan uses. */
#define MHA_NGRAD 13
static void grad_slots(attn_mha_grads *g, float **s[MHA_NGRAD])
{
    float **t[MHA_NGRAD] = { &g->dx, &g->dkey, &g->dvalue, &g->d_in_proj_weight,
                             &g->d_in_proj_bias, &g->d_q_weight, &g->d_k_weight,
                             &g->d_v_weight, &g->d_q_bias, &g->d_k_bias, &g->d_v_bias,
                             &g->d_out_weight, &g->d_out_bias };
    memcpy(s, t, sizeof t);
}
static void grad_used(const attn_mha_desc *d, int u[MHA_NGRAD])
{
    const int pk = d->packed_in_proj, hb = d->has_bias, cr = !d->self_attention;
    const int t[MHA_NGRAD] = { 1, cr, cr, pk, pk && hb, !pk, !pk, !pk, !pk && hb, !pk && hb,
                               !pk && hb, 1, hb };
    memcpy(u, t, sizeof t);
}
static void grad_slots16(attn_mha_grads16 *g, uint16_t **s[MHA_NGRAD])
{
    uint16_t **t[MHA_NGRAD] = { &g->dx, &g->dkey, &g->dvalue, &g->d_in_proj_weight,
                                &g->d_in_proj_bias, &g->d_q_weight, &g->d_k_weight,
                                &g->d_v_weight, &g->d_q_bias, &g->d_k_bias, &g->d_v_bias,
                                &g->d_out_weight, &g->d_out_bias };
    memcpy(s, t, sizeof t);
}
/* The family (MG_*) of each slot, and its element type. */
static const int slot_fam[MHA_NGRAD] = { MG_DX, MG_DKEY, MG_DVALUE, MG_DWQ, MG_DBQ, MG_DWQ,
                                         MG_DWK, MG_DWV, MG_DBQ, MG_DBK, MG_DBV, MG_DWO,
                                         MG_DBO };
static attn_dtype fam_type(const attn_mha_desc *d, int k)
{
    return k <= MG_DVALUE ? d->x_type : d->w_type;
}

/* The backward's state from stage to stage. */
typedef struct mtrain_case {
    const mha_prob *M;                    /* the checked train_forward */
    const attn_mha_plan *plan;
    unsigned bad[2], ctl;                 /* MB_*; ctl: args->out / weights, accumulate */
    size_t ndy;
    float *dy;
    obuf gb[MG_COUNT];                    /* the gradient buffers */
    float *gview[MG_COUNT];               /* each gradient's origin */
    int64_t grows[MG_COUNT], gwid[MG_COUNT], gld[MG_COUNT];
    attn_mha_grads g0, g;                 /* g0: valid, g: planted */
    attn_mha_grads16 g160, g16;           /* their 16-bit sides */
    attn_mha_weights w;
    attn_mha_args a;
    attn_mha_weights16 w16;               /* the planted copies of the forward's */
    attn_mha_args16 a16;
    const float *dyp;                     /* the dy argument (NULL at a 16-bit x_type) */
    uint16_t *dy16, *dy16_copy;
    obuf16 gb16[MG_COUNT];                /* the 16-bit gradients (laid out as gb) */
    float *tw[MG_COUNT];                  /* the fp32 twin's gradients (laid out as gb) */
    int32_t kvl[8], ql[8];                /* planted lengths */
    const void *cxp;                      /* the context passed, cxb bytes */
    size_t cxb;
    unsigned char *cx_mis;                /* a misaligned copy of it */
    int ws_small, ws_mis, null_top, acc;
    unsigned wsel;
    float *pool_copy, *dy_copy;           /* the inputs, to see that none changes */
    uint8_t *m_copy;
    unsigned char *cx_copy;
} mtrain_case;

/* Pointers the backward must ignore (args->weights) or refuse: never
 * written. */
static float junk_f[64];

static void grads_clear(mtrain_case *C)
{
    for (int k = 0; k < MG_COUNT; k++) {
        if (C->gb[k].base)
            obuf_clear(&C->gb[k]);
        if (C->gb16[k].base)
            obuf16_clear(&C->gb16[k]);
    }
}

/* The buffer a family's view is in (packed: dW_q's, db_q's). */
static int gowner(const mtrain_case *C, int k)
{
    return C->gb[k].base ? k : (k == MG_DWK || k == MG_DWV) ? MG_DWQ : MG_DBQ;
}

/* A grads struct (and its 16-bit side) of the plan's slots: slot x at
 * view[fam] + its offset, in f or in h by its type. */
static void grads_point(const mtrain_case *C, float *const *fb, uint16_t *const *hb,
                        attn_mha_grads *g, attn_mha_grads16 *h)
{
    const attn_mha_desc *d = C->M->d;
    float **slot[MHA_NGRAD];
    uint16_t **slot16[MHA_NGRAD];
    int used[MHA_NGRAD];
    memset(g, 0, sizeof *g);
    attn_mha_grads16_init(h);
    grad_slots(g, slot);
    grad_slots16(h, slot16);
    grad_used(d, used);
    for (int x = 0; x < MHA_NGRAD; x++) {
        const int k = slot_fam[x], o = gowner(C, k);
        if (!used[x] || !C->grows[k])
            continue;
        const ptrdiff_t off = C->gview[k] - C->gb[o].base;
        if (hb && fam_type(d, k))
            *slot16[x] = hb[o] + off;
        else
            *slot[x] = fb[o] + off;
    }
}

/* -------------------------------------------------------------- decode */

/* dY: rows of E at out_stride, NaN between them. */
static void mtrain_make_dy(rd *r, mtrain_case *C)
{
    const attn_mha_desc *d = C->M->d;
    const int64_t E = d->embed_dim, B = d->batch, L = d->q_len;
    const int64_t os = d->out_stride ? d->out_stride : E;
    C->ndy = (size_t)((B * L - 1) * os + E);
    C->dy = xmalloc(C->ndy * sizeof(float));
    prng g = { u32(r) ^ 0x2545f4914f6cdd1dull };
    for (size_t i = 0; i < C->ndy; i++)
        C->dy[i] = NAN;
    for (int64_t t = 0; t < B * L; t++)
        for (int64_t e = 0; e < E; e++)
            C->dy[t * os + e] = pr_val(&g, 1.0);
    C->dyp = C->dy;
    if (d->x_type != ATTN_DTYPE_F32) { /* rounded: the reference sees the same values */
        C->dy16 = xmalloc(C->ndy * sizeof(uint16_t));
        C->dy16_copy = xmalloc(C->ndy * sizeof(uint16_t));
        if (attn_dtype_encode(d->x_type, C->dy, C->dy16, (int64_t)C->ndy) != ATTN_OK ||
            attn_dtype_decode(d->x_type, C->dy16, C->dy, (int64_t)C->ndy) != ATTN_OK)
            FAIL("attn_dtype_encode/decode of dY failed");
        memcpy(C->dy16_copy, C->dy16, C->ndy * sizeof(uint16_t));
        C->dyp = NULL;
    }
}

/* The gradient buffers: dX, dXk, dXv with the inputs' row strides, the
 * weight gradients dense, the packed ones in one [3E][E] and one [3E]
 * buffer; all sentinel-filled. */
static void mtrain_make_grads(rd *r, mtrain_case *C)
{
    const attn_mha_desc *d = C->M->d;
    const int64_t E = d->embed_dim;
    const int packed = d->packed_in_proj;
    for (int k = 0; k < MG_COUNT; k++) {
        mref_grad_shape(d, k, &C->grows[k], &C->gwid[k]);
        C->gld[k] = k == MG_DX ? (d->x_stride ? d->x_stride : E)
                  : k == MG_DKEY ? (d->key_stride ? d->key_stride : C->gwid[k])
                  : k == MG_DVALUE ? (d->value_stride ? d->value_stride : C->gwid[k]) : C->gwid[k];
        if (!C->grows[k])
            continue;
        if (packed && (k == MG_DWK || k == MG_DWV || k == MG_DBK || k == MG_DBV)) {
            const int base = k == MG_DWK || k == MG_DWV ? MG_DWQ : MG_DBQ;
            const int64_t part = k == MG_DWK || k == MG_DBK ? 1 : 2;
            C->gview[k] = C->gview[base] + part * C->grows[base] * C->gwid[base];
            continue;
        }
        const int64_t rows = C->grows[k] * (packed && (k == MG_DWQ || k == MG_DBQ) ? 3 : 1);
        const int64_t sz[3] = { 1, 1, rows };
        const attn_view v = { 0, 0, C->gld[k] };
        obuf_make(&C->gb[k], r, &v, sz, C->gwid[k], (rows - 1) * C->gld[k] + C->gwid[k]);
        C->gview[k] = C->gb[k].ptr;
    }
    float *fb[MG_COUNT];
    uint16_t *hb[MG_COUNT];
    for (int k = 0; k < MG_COUNT; k++) {
        if (C->gb[k].base && fam_type(d, k))
            obuf16_like(&C->gb16[k], &C->gb[k]);
        fb[k] = C->gb[k].base;
        hb[k] = C->gb16[k].base;
    }
    grads_clear(C);
    grads_point(C, fb, hb, &C->g0, &C->g160);
    C->g160.dy = C->dy16;
    if (d->x_type || d->w_type)
        C->g0.grads16 = &C->g160;
}

/* --------------------------------------------------------------- plant */

/* MB_PTR_NULL and MB_PTR_EXTRA: a weight or input NULL, or an input the
 * plan does not use given (not out or weights). */
static void mtrain_plant_ptr(rd *r, mtrain_case *C, unsigned bad)
{
    static const uint8_t junk_u8[64];
    static const int32_t zero_lens[8];
    const attn_mha_desc *d = C->M->d;
    attn_mha_weights *w = &C->w;
    attn_mha_args *a = &C->a;
    if (bad == MB_PTR_NULL) {
        if (C->M->sparse && (u8(r) & 1)) {
            plant_sparse_null(r, &a->global_k, &a->global_q, &a->layout);
            return;
        }
        const void **p[] = { (const void **)&w->in_proj_weight, (const void **)&w->in_proj_bias,
                             (const void **)&w->q_weight, (const void **)&w->k_weight,
                             (const void **)&w->v_weight, (const void **)&w->q_bias,
                             (const void **)&w->k_bias, (const void **)&w->v_bias,
                             (const void **)&w->out_weight, (const void **)&w->out_bias,
                             (const void **)&a->x, (const void **)&a->key, (const void **)&a->value,
                             (const void **)&a->kv_lens, (const void **)&a->q_lens,
                             (const void **)&a->mask, (const void **)&a->bias,
                             (const void **)&a->key_padding_mask };
        *p[pick(r, 18)] = NULL;
        return;
    }
    if (C->M->sparse && (u8(r) & 1)) {
        plant_sparse_extra(r, d->use_global_k, d->use_global_q, d->block_size, junk_u8,
                           &a->global_k, &a->global_q, &a->layout);
        return;
    }
    switch (pick(r, 8)) {
    case 0: if (!d->use_kv_lens) a->kv_lens = zero_lens; break;
    case 1: if (d->self_attention) a->value = junk_f; break;
    case 2: if (!d->mask_mode) a->mask = junk_u8; break;
    case 3: if (!d->key_padding_mode) a->key_padding_mask = junk_u8; break;
    case 4: if (!d->use_q_lens) a->q_lens = zero_lens; break;
    case 5: if (!d->packed_in_proj) w->in_proj_weight = junk_f; break;
    case 6: if (d->packed_in_proj || !d->has_bias) w->k_bias = junk_f; break;
    default: if (!d->use_bias) a->bias = junk_f; break;
    }
}

/* One planted invalid field of kind bad (MB_*). */
static void mtrain_plant1(rd *r, mtrain_case *C, unsigned bad)
{
    const mha_prob *M = C->M;
    const attn_mha_desc *d = M->d;
    switch (bad) {
    case MB_NULL_TOP: C->null_top = 1 + (int)pick(r, 5); break;
    case MB_CX_NULL: C->cxp = NULL; break;
    case MB_CX_SHORT:
        C->cxb = M->cx_need - 1 - (M->cx_need > 64 ? pick(r, 64) : 0);
        break;
    case MB_CX_MISALIGNED:
        if (!C->cx_mis) {
            const size_t off = 4 * (1 + pick(r, 15));
            C->cx_mis = aligned_alloc(64, (M->cx_need + off + 63) / 64 * 64);
            if (!C->cx_mis)
                abort();
            memcpy(C->cx_mis + off, M->cx, M->cx_need);
            C->cxp = C->cx_mis + off;
            C->cxb = M->cx_need;
        }
        break;
    case MB_WS_SMALL: C->ws_small = 1; break;
    case MB_WS_MISALIGNED: C->ws_mis = 1; break;
    case MB_ACCUMULATE: {
        static const int av[] = { 2, -1, INT_MAX, INT_MIN };
        C->acc = av[pick(r, 4)];
        break;
    }
    case MB_GRAD_NULL:
    case MB_GRAD_EXTRA: {
        float **slot[MHA_NGRAD];
        int used[MHA_NGRAD];
        grad_slots(&C->g, slot);
        grad_used(d, used);
        const unsigned x = pick(r, MHA_NGRAD);
        if (bad == MB_GRAD_NULL && used[x])
            *slot[x] = NULL;
        else if (bad == MB_GRAD_EXTRA && !used[x])
            *slot[x] = junk_f;
        break;
    }
    case MB_PTR_NULL:
    case MB_PTR_EXTRA:
        mtrain_plant_ptr(r, C, bad);
        break;
    case MB_LENGTH: {
        /* only lengths the plan uses (the forward's must not change) */
        const unsigned b = pick(r, (unsigned)d->batch);
        if ((u8(r) & 1) && d->use_kv_lens) {
            C->kvl[b] = bad_length(r, d->kv_len);
            C->a.kv_lens = C->kvl;
        } else if (d->use_q_lens) {
            C->ql[b] = bad_length(r, d->q_len);
            C->a.q_lens = C->ql;
        }
        break;
    }
    default: break;
    }
}

/* The call's arguments: the forward's, args->out and args->weights NULL
 * or junk (ignored by the backward), then the planted fields. */
static void mtrain_plant(rd *r, mtrain_case *C)
{
    const mha_prob *M = C->M;
    const int64_t B = M->d->batch;
    C->w = *M->w;
    C->a = *M->a;
    attn_mha_weights16_init(&C->w16);
    attn_mha_args16_init(&C->a16);
    if (C->w.weights16) {
        C->w16 = *C->w.weights16;
        C->w.weights16 = &C->w16;
    }
    if (C->a.args16) {
        C->a16 = *C->a.args16;
        C->a.args16 = &C->a16;
    }
    C->g = C->g0;
    C->g16 = C->g160;
    if (C->g.grads16)
        C->g.grads16 = &C->g16;
    switch (C->ctl & 3) { /* ignored by the backward */
    case 1: C->a.out = NULL; break;
    case 2: C->a.weights = junk_f; break;
    case 3: C->a.out = NULL; C->a.weights = NULL; break;
    default: break;
    }
    if (C->a.kv_lens)
        memcpy(C->kvl, C->a.kv_lens, (size_t)B * sizeof *C->kvl);
    if (C->a.q_lens)
        memcpy(C->ql, C->a.q_lens, (size_t)B * sizeof *C->ql);
    C->cxp = M->cx;
    C->cxb = M->cx_bytes;
    for (int k = 0; k < 2; k++)
        mtrain_plant1(r, C, C->bad[k]);
    if (C->null_top == 4) /* dY NULL: of its type */
        C->dyp = NULL, C->g16.dy = NULL;
    const mha16_site s = { &C->w, &C->a, &C->w16, &C->a16, &C->g, &C->g16, &C->dyp };
    mha16_plant(r, M->d, M->C->ty.bad, &s);
}

/* ------------------------------------------------------------------ run */

/* The expected status: pointers, lengths, workspace, context, accumulate,
 * the gradients the plan needs, NULL at the top. */
static expect mtrain_expect(const mtrain_case *C, const wsp *ws, size_t need_bws)
{
    const attn_mha_desc *d = C->M->d;
    expect e = expect_mha_call(d, &C->w, &C->a, 0, ws->ptr, ws->bytes, need_bws);
    if (C->ws_small && need_bws == 0)
        e.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    expect_context(&e, C->cxp, C->cxb, C->M->cx_need);
    if (C->acc != 0 && C->acc != 1)
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    static const attn_mha_grads16 no_g16;
    float **slot[MHA_NGRAD];
    uint16_t **slot16[MHA_NGRAD];
    int used[MHA_NGRAD];
    ptr_use u[2 * MHA_NGRAD + 3];
    attn_mha_grads g = C->g;
    attn_mha_grads16 h = g.grads16 ? *g.grads16 : no_g16;
    grad_slots(&g, slot);
    grad_slots16(&h, slot16);
    grad_used(d, used);
    for (int x = 0; x < MHA_NGRAD; x++) {
        const int is16 = fam_type(d, slot_fam[x]) != ATTN_DTYPE_F32;
        u[x] = (ptr_use){ used[x] && !is16, *slot[x] };
        u[MHA_NGRAD + x] = (ptr_use){ used[x] && is16, *slot16[x] };
    }
    const int x16 = d->x_type != ATTN_DTYPE_F32;
    u[2 * MHA_NGRAD] = (ptr_use){ !x16, C->dyp };
    u[2 * MHA_NGRAD + 1] = (ptr_use){ x16, h.dy };
    u[2 * MHA_NGRAD + 2] = (ptr_use){ x16 || d->w_type != ATTN_DTYPE_F32, g.grads16 };
    expect_call(&e, u, 2 * MHA_NGRAD + 3, 0, NULL, 0, NULL, 0, NULL, 0, 0);
    for (int x = 0; g.grads16 && x < 8; x++)
        if (g.grads16->reserved[x])
            e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (C->null_top) /* the rest may be checked first or not at all */
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    return e;
}

/* The inputs, dY and the context, to see that none changes. */
static void mtrain_copy_inputs(mtrain_case *C)
{
    const mha_prob *M = C->M;
    C->pool_copy = xmalloc(M->pool_len * sizeof(float));
    memcpy(C->pool_copy, M->pool, M->pool_len * sizeof(float));
    C->m_copy = xmalloc(M->mlen);
    memcpy(C->m_copy, M->mpool, M->mlen);
    C->dy_copy = xmalloc(C->ndy * sizeof(float));
    memcpy(C->dy_copy, C->dy, C->ndy * sizeof(float));
    C->cx_copy = xmalloc(M->cx_bytes);
    memcpy(C->cx_copy, M->cx, M->cx_bytes);
}

/* The inputs, dY and the context unchanged. */
static void mtrain_same_inputs(const mtrain_case *C, const char *what)
{
    const mha_prob *M = C->M;
    if (memcmp(C->pool_copy, M->pool, M->pool_len * sizeof(float)) ||
        memcmp(C->m_copy, M->mpool, M->mlen) || memcmp(C->dy_copy, C->dy, C->ndy * sizeof(float)) ||
        memcmp(C->cx_copy, M->cx, M->cx_bytes) || !mha16_pools_same(M->C) ||
        (C->dy16 && memcmp(C->dy16_copy, C->dy16, C->ndy * sizeof(uint16_t))))
        FAIL("%s: an input, dY or the context was modified", what);
}

/* The workspace (decoded choice or planted) and the call, its status
 * checked; nothing written through the ignored or refused pointers, the
 * inputs, dY and the context unchanged. */
static attn_status mtrain_run(rd *r, mtrain_case *C)
{
    C->wsel = u8(r);
    size_t need_bws = 0;
    if (attn_mha_bwd_workspace_size(C->plan, &need_bws) != ATTN_OK)
        FAIL("attn_mha_bwd_workspace_size failed on a small plan");
    wsp ws;
    wsp_make(&ws, C->wsel & 3, need_bws, C->ws_small, C->ws_mis);
    const expect e = mtrain_expect(C, &ws, need_bws);
    if (verbose)
        fprintf(stderr, "  mha bwd: bad=%u,%u null_top=%d acc=%d ctl=%u ws=%u\n", C->bad[0],
                C->bad[1], C->null_top, C->acc, C->ctl, C->wsel);
    mtrain_copy_inputs(C);
    const int null_top = C->null_top;
    attn_status st = attn_mha_bwd_execute(null_top == 1 ? NULL : C->plan, null_top == 2 ? NULL : &C->w,
                                       null_top == 3 ? NULL : &C->a, C->dyp,
                                       C->cxp, C->cxb, null_top == 5 ? NULL : &C->g, C->acc,
                                       ws.ptr, ws.bytes);
    check_status("attn_mha_bwd_execute", st, e);
    free(ws.raw);
    for (int x = 0; x < 64; x++) /* args->weights (ignored), unused pointers */
        if (fbits(junk_f[x]) != 0)
            FAIL("attn_mha_bwd_execute wrote through a pointer it must ignore or refuse");
    mha16_junk_untouched("attn_mha_bwd_execute");
    mtrain_same_inputs(C, "attn_mha_bwd_execute");
    return st;
}

/* ---------------------------------------------------------------- check */

/* On error every gradient buffer untouched (0); on success every gradient
 * within the float64 reference's bound (mref_mha_backward, the keep mask
 * of dropout held fixed), the sentinel in the row gaps and around (1). */
static int mtrain_check(const mtrain_case *C, attn_status st)
{
    const mha_prob *M = C->M;
    const attn_mha_desc *d = M->d;
    const int typed = d->x_type || d->w_type;
    if (st != ATTN_OK) {
        counts[N_MBWD_ERROR]++;
        counts[N_MBWD16_ERROR] += typed;
        for (int k = 0; k < MG_COUNT; k++) {
            if (C->gb[k].base)
                obuf_untouched(&C->gb[k], mref_grad_name[k], st_name(st));
            if (C->gb16[k].base)
                obuf16_untouched(&C->gb16[k], mref_grad_name[k], st_name(st));
        }
        return 0;
    }
    counts[N_MBWD_CHECKED]++;
    counts[N_MBWD16_CHECKED] += typed;
    if (M->sparse)
        counts[N_SPARSE_MBWD_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_MBWD_CHECKED]++;
    mref_grads rg;
    memset(&rg, 0, sizeof rg);
    for (int k = 0; k < MG_COUNT; k++) {
        if (!C->grows[k])
            continue;
        rg.g[k] = xmalloc((size_t)(C->grows[k] * C->gwid[k]) * sizeof(double));
        rg.tol[k] = xmalloc((size_t)(C->grows[k] * C->gwid[k]) * sizeof(double));
        rg.mag[k] = xmalloc((size_t)(C->grows[k] * C->gwid[k]) * sizeof(double));
    }
    /* on the widened values, with the BF16 products' roundings (the
     * gradient's own rounding added below) */
    mref_round rnd;
    mha16_round(d, &rnd);
    if (mref_mha_backward_typed(d, M->wf, M->af, C->dy, &rg, &rnd))
        abort();
    for (int k = 0; k < MG_COUNT; k++) {
        const attn_dtype t = fam_type(d, k);
        const uint16_t *v16 = t && C->grows[k] ? C->gb16[gowner(C, k)].base +
                                                     (C->gview[k] - C->gb[gowner(C, k)].base)
                                               : NULL;
        for (int64_t i = 0; i < C->grows[k]; i++)
            for (int64_t x = 0; x < C->gwid[k]; x++) {
                const int64_t at = i * C->gld[k] + x, j = i * C->gwid[k] + x;
                const double v = v16 ? widen16(t, v16[at]) : C->gview[k][at], ref = rg.g[k][j];
                const double tol = rg.tol[k][j] + 1.25 * dtype_u2(t) * rg.mag[k][j] +
                                   (t == ATTN_DTYPE_F16 ? 0x1p-24 : 0.0);
                if (!(fabs(v - ref) <= tol))
                    FAIL("MHA backward %s[%lld][%lld] = %.9g, reference %.9g, tol %.3g",
                         mref_grad_name[k], (long long)i, (long long)x, v, ref, tol);
            }
        free(rg.g[k]);
        free(rg.tol[k]);
        free(rg.mag[k]);
    }
    for (int k = 0; k < MG_COUNT; k++) {
        if (C->gb[k].base)
            obuf_outside(&C->gb[k], mref_grad_name[k]);
        if (C->gb16[k].base)
            obuf16_outside(&C->gb16[k], mref_grad_name[k]);
    }
    return 1;
}

/* Where the types widen: the fp32 training calls (the same plan but F32,
 * the same threads) on the widened values into buffers laid out as the
 * gradients' (C->tw, kept for the accumulate check): every gradient is
 * their bits rounded to its type. */
static void mtrain_twin(mtrain_case *C)
{
    const mha_prob *M = C->M;
    const attn_mha_desc *d = M->d;
    if (mha16_bf(d) || !(d->x_type || d->w_type))
        return;
    attn_mha_desc d32 = *d;
    d32.x_type = d32.w_type = ATTN_DTYPE_F32;
    const float s = sentinel();
    for (int k = 0; k < MG_COUNT; k++) {
        if (!C->gb[k].base)
            continue;
        C->tw[k] = xmalloc(C->gb[k].count * sizeof(float));
        for (size_t i = 0; i < C->gb[k].count; i++)
            C->tw[k][i] = s;
    }
    attn_mha_grads g;
    attn_mha_grads16 unused;
    grads_point(C, C->tw, NULL, &g, &unused);
    attn_mha_args a = *M->af;
    float *yo = xmalloc(M->ob->count * sizeof(float));
    float *wo = M->ow->base ? xmalloc(M->ow->count * sizeof(float)) : NULL;
    a.out = yo + (M->ob->ptr - M->ob->base);
    a.weights = wo ? wo + (M->ow->ptr - M->ow->base) : NULL;
    attn_mha_plan *plan = NULL;
    size_t need = 0;
    wsp cx = { 0 };
    attn_status st = attn_mha_plan_create(&plan, &d32);
    if (st == ATTN_OK && (st = attn_mha_context_size(plan, &need)) == ATTN_OK) {
        wsp_make(&cx, 1, need, 0, 0);
        st = attn_mha_train_execute(plan, M->wf, &a, cx.ptr, cx.bytes, NULL, 0);
    }
    if (st == ATTN_OK)
        st = attn_mha_bwd_execute(plan, M->wf, &a, C->dy, cx.ptr, cx.bytes, &g, 0, NULL, 0);
    if (st != ATTN_OK)
        FAIL("the fp32 training on the widened values: %s", st_name(st));
    for (int k = 0; k < MG_COUNT; k++) {
        if (!C->tw[k])
            continue;
        if (fam_type(d, k))
            mha16_rounded(C->gb16[k].base, C->tw[k], C->gb[k].inview, C->gb[k].count,
                          fam_type(d, k), mref_grad_name[k]);
        else if (memcmp(C->tw[k], C->gb[k].base, C->gb[k].count * sizeof(float)))
            FAIL("MHA backward %s (F32) not bitwise the fp32 training on the widened values",
                 mref_grad_name[k]);
    }
    counts[N_MBWD16_TWIN]++;
    attn_mha_plan_destroy(plan);
    free(cx.raw);
    free(yo);
    free(wo);
}

/* The rerun's train_forward with the other thread count: out (and
 * weights) bitwise the same as the first. */
static void mtrain_rerun_forward(const mtrain_case *C, const attn_mha_plan *plan2,
                                 const wsp *cx2, const wsp *fws, const char *note)
{
    const mha_prob *M = C->M;
    attn_status st;
    float *so = obuf_snap(M->ob), *sw = obuf_snap(M->ow);
    uint16_t *so16 = obuf16_snap(M->ob16);
    obuf_clear(M->ob);
    if (M->ow->base)
        obuf_clear(M->ow);
    if (so16)
        obuf16_clear(M->ob16);
    if ((st = attn_mha_train_execute(plan2, M->w, M->a, cx2->ptr, cx2->bytes, fws->ptr,
                                     fws->bytes)) != ATTN_OK)
        FAIL("attn_mha_train_execute with %d threads: %s", M->t2, st_name(st));
    obuf_same(M->ob, so, "out", M->d->threads, M->t2, note);
    if (M->ow->base)
        obuf_same(M->ow, sw, "weights", M->d->threads, M->t2, note);
    obuf16_same(M->ob16, so16, "out", M->d->threads, M->t2, note);
    free(so);
    free(sw);
    free(so16);
}

/* The rerun's backward: overwriting (bitwise the first gradients g1,
 * g16) or accumulating onto decoded values (exactly old + g in fp32; a
 * 16-bit gradient round(old + g) with g the fp32 twin's, so not with BF16
 * products). */
static void mtrain_rerun_backward(rd *r, mtrain_case *C, const attn_mha_plan *plan2,
                                  const wsp *cx2, const wsp *bws, float *const g1[MG_COUNT],
                                  uint16_t *const g16[MG_COUNT], const char *note)
{
    const mha_prob *M = C->M;
    const attn_mha_desc *d = M->d;
    const int t1 = d->threads, t2 = M->t2;
    obuf *gb = C->gb;
    float *old[MG_COUNT];
    uint16_t *old16[MG_COUNT];
    attn_status st;
    const int accumulate = ((C->ctl >> 2) & 1) && !mha16_bf(d);
    grads_clear(C);
    if (accumulate) {
        prng gv = { u32(r) ^ 0x9fb21c651e98df25ull };
        for (int k = 0; k < MG_COUNT; k++)
            for (size_t i = 0; i < gb[k].count; i++)
                if (gb[k].inview[i]) {
                    gb[k].base[i] = pr_val(&gv, 2.0);
                    if (C->gb16[k].base)
                        C->gb16[k].base[i] = narrow16(fam_type(d, k), gb[k].base[i]);
                }
    }
    for (int k = 0; k < MG_COUNT; k++) {
        old[k] = obuf_snap(&gb[k]);
        old16[k] = obuf16_snap(&C->gb16[k]);
    }
    if ((st = attn_mha_bwd_execute(plan2, M->w, M->a, C->dy16 ? NULL : C->dy, cx2->ptr,
                                   cx2->bytes, &C->g0, accumulate, bws->ptr, bws->bytes)) != ATTN_OK)
        FAIL("attn_mha_bwd_execute with %d threads: %s", t2, st_name(st));
    for (int k = 0; k < MG_COUNT; k++) {
        if (!gb[k].base)
            continue;
        const attn_dtype t = fam_type(d, k);
        if (!accumulate) {
            obuf_same(&gb[k], g1[k], mref_grad_name[k], t1, t2, note);
            obuf16_same(&C->gb16[k], g16[k], mref_grad_name[k], t1, t2, note);
            continue;
        }
        for (size_t i = 0; t && i < gb[k].count; i++) {
            const uint16_t want = gb[k].inview[i]
                                      ? narrow16(t, widen16(t, old16[k][i]) + C->tw[k][i])
                                      : old16[k][i];
            if (want != C->gb16[k].base[i])
                FAIL("MHA backward, accumulate = 1 with %d threads%s: %s element %zu = 0x%04x, "
                     "want round(%.9g + %.9g) = 0x%04x", t2, note, mref_grad_name[k], i,
                     (unsigned)C->gb16[k].base[i], (double)widen16(t, old16[k][i]),
                     (double)C->tw[k][i], (unsigned)want);
        }
        if (t) {
            obuf_same(&gb[k], old[k], mref_grad_name[k], t1, t2, " (the unused float buffer)");
            continue;
        }
        for (size_t i = 0; i < gb[k].count; i++) {
            const float want = gb[k].inview[i] ? old[k][i] + g1[k][i] : old[k][i];
            if (fbits(want) != fbits(gb[k].base[i]))
                FAIL("MHA backward, accumulate = 1 with %d threads (overwrite with %d)%s: "
                     "%s element %zu = %.9g (0x%08x), want %.9g + %.9g = %.9g",
                     t2, t1, note, mref_grad_name[k], i, (double)gb[k].base[i],
                     fbits(gb[k].base[i]), (double)old[k][i], (double)g1[k][i],
                     (double)want);
        }
    }
    for (int k = 0; k < MG_COUNT; k++) {
        free(old[k]);
        free(old16[k]);
    }
}

/* Another thread count: a plan, train_forward, then the backward. */
static void mtrain_rerun(rd *r, mtrain_case *C)
{
    const mha_prob *M = C->M;
    attn_status st;
    float *g1[MG_COUNT];
    uint16_t *g16[MG_COUNT];
    for (int k = 0; k < MG_COUNT; k++) {
        g1[k] = obuf_snap(&C->gb[k]);
        g16[k] = obuf16_snap(&C->gb16[k]);
    }
    attn_mha_desc d2 = *M->d;
    d2.threads = M->t2;
    const char *note = drop_zero_reset(d2.dropout_p, &d2.dropout_seed, &d2.dropout_offset);
    attn_mha_plan *plan2 = NULL;
    if ((st = attn_mha_plan_create(&plan2, &d2)) != ATTN_OK)
        FAIL("MHA plan with %d threads: %s", M->t2, st_name(st));
    size_t need_cx = 0, need_fws = 0, need2 = 0;
    if (attn_mha_context_size(plan2, &need_cx) != ATTN_OK ||
        attn_mha_workspace_size(plan2, &need_fws) != ATTN_OK ||
        attn_mha_bwd_workspace_size(plan2, &need2) != ATTN_OK)
        FAIL("MHA training sizes with %d threads failed", M->t2);
    wsp cx2, fws, bws;
    wsp_make(&cx2, 1, need_cx, 0, 0);
    wsp_make(&fws, (C->wsel >> 2) % 3, need_fws, 0, 0);
    wsp_make(&bws, (C->wsel >> 4) % 3, need2, 0, 0);
    mtrain_rerun_forward(C, plan2, &cx2, &fws, note);
    mtrain_rerun_backward(r, C, plan2, &cx2, &bws, g1, g16, note);
    for (int k = 0; k < MG_COUNT; k++) {
        free(g1[k]);
        free(g16[k]);
    }
    free(cx2.raw);
    free(fws.raw);
    free(bws.raw);
    attn_mha_plan_destroy(plan2);
}

static void mtrain_case_free(mtrain_case *C)
{
    free(C->pool_copy);
    free(C->m_copy);
    free(C->dy_copy);
    free(C->cx_copy);
    free(C->cx_mis);
    free(C->dy);
    free(C->dy16);
    free(C->dy16_copy);
    for (int k = 0; k < MG_COUNT; k++) {
        obuf_free(&C->gb[k]);
        obuf16_free(&C->gb16[k]);
        free(C->tw[k]);
    }
}

/* ----------------------------------------------------------------- kind */

void fuzz_mha_train(rd *r, const mha_prob *M, const attn_mha_plan *plan)
{
    mtrain_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    C->M = M;
    C->plan = plan;
    /* decode */
    C->bad[0] = C->bad[1] = MB_NONE;
    const unsigned bb = u8(r);
    C->ctl = u8(r);
    decode_bad(r, bb, MB_COUNT_, C->bad);
    mtrain_make_dy(r, C);
    mtrain_make_grads(r, C);
    /* plant */
    mtrain_plant(r, C);
    /* run */
    const attn_status st = mtrain_run(r, C);
    /* check */
    if (mtrain_check(C, st)) {
        mtrain_twin(C);
        mtrain_rerun(r, C);
    }
    mtrain_case_free(C);
    free(C);
}
