/*
 * fuzz_linear.c -- linear attention (attn_linear_* and attn_linear_bwd_*):
 * byte 0 bit 4 set, bit 5 clear; bit 1 runs the backward instead of the
 * forward.  Decoded: sizes incl. GQA and past a chunk of 64 rows, views,
 * feature map, causal and alignment, eps, lengths, the recurrent state,
 * engine, threads, workspace, one or two invalid fields (LB_*).
 *
 * Contract: the status (expect_linear_plan, expect_linear_bwd_plan,
 * expect_call); on error the outputs and the state untouched, the inputs
 * unchanged; on success O, the state, dQ, dK, dV within the bounds of
 * test/linear_ref.c (exact zeros too), the sentinel outside the views, the
 * inputs unchanged, and bitwise equal with another thread count and
 * workspace.  Positions never read (gaps, padded rows, keys no query sees
 * without the state) hold NaN.  Too large problems are planned only (and
 * the one-shot called on dummy buffers when invalid).
 */
#include "../linear_ref.h"
#include "fuzz_common.h"

/* Bit 4 of the first byte (SEL_LINEAR): one linear attention problem
 * (attn.h, "Linear attention"); bit 1 then runs the backward
 * (attn_linear_bwd_*) instead of the forward.  Invalid fields (one or
 * two, as the SDPA's): */
enum {
    LB_NONE = 0,
    LB_RESERVED,     /* fwd reserved, or (backward) the bwd desc's */
    LB_ENUM,         /* feature_map, align */
    LB_EPS,          /* negative or infinite */
    LB_SIZE_NONPOS,
    LB_SIZE_HUGE,
    LB_HEAD_RATIO,
    LB_STRIDE_NEG,
    LB_STRIDE_ZERO,
    LB_STRIDE_SHORT,
    LB_STRIDE_UNSET,
    LB_OUT_OVERLAP,  /* O, or dQ / dK / dV, not nested */
    LB_STRIDE_HUGE,
    LB_THREADS,
    LB_STATE,        /* backward: fwd.use_state set (forward: nothing) */
    LB_PTR_NULL,
    LB_PTR_EXTRA,
    LB_LENGTH,
    LB_WS_SMALL,
    LB_WS_MISALIGNED,
    LB_NULL_TOP,
    LB_COUNT_
};

static expect expect_linear_plan(const attn_linear_desc *d, int with_o)
{
    expect e = { 0, 0 };
    if (reserved_nonzero(d->reserved, (int)(sizeof d->reserved / sizeof d->reserved[0])) ||
        d->reserved_pad != 0 || !engine_ok(d->engine) ||
        (d->feature_map != ATTN_FEATURE_ELU1 && d->feature_map != ATTN_FEATURE_RELU &&
         d->feature_map != ATTN_FEATURE_IDENTITY) ||
        (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        d->eps < 0.0f || isinf(d->eps))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (d->batch <= 0 || d->q_heads <= 0 || d->kv_heads <= 0 || d->q_len <= 0 ||
        d->kv_len <= 0 || d->qk_dim <= 0 || d->v_dim <= 0) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        e.maybe = ~0u & ~1u;
        return e;
    }
    if (d->q_len > INT32_MAX || d->kv_len > INT32_MAX || d->qk_dim > INT32_MAX ||
        d->v_dim > INT32_MAX)
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    if (d->q_heads % d->kv_heads)
        e.must |= BIT(ATTN_ERR_HEAD_RATIO);
    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len;
    expect_view(&e, &d->q, B, Hq, n, d->qk_dim, VK_INPUT);
    expect_view(&e, &d->k, B, Hkv, m, d->qk_dim, VK_INPUT);
    expect_view(&e, &d->v, B, Hkv, m, d->v_dim, VK_INPUT);
    if (with_o)
        expect_view(&e, &d->o, B, Hq, n, d->v_dim, VK_OUTPUT);
    if (d->threads < 0 || d->threads > 1024)
        e.must |= BIT(ATTN_ERR_BAD_THREADS);
    return e;
}

static expect expect_linear_bwd_plan(const attn_linear_bwd_desc *bd)
{
    const attn_linear_desc *f = &bd->fwd;
    expect e = expect_linear_plan(f, 0);
    if (reserved_nonzero(bd->reserved, (int)(sizeof bd->reserved / sizeof bd->reserved[0])) ||
        f->use_state)
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (e.maybe == (~0u & ~1u))
        return e;
    const int64_t B = f->batch, Hq = f->q_heads, Hkv = f->kv_heads, n = f->q_len,
                  m = f->kv_len;
    expect_view(&e, &bd->d_o, B, Hq, n, f->v_dim, VK_INPUT);
    expect_view(&e, &bd->dq, B, Hq, n, f->qk_dim, VK_OUTPUT);
    expect_view(&e, &bd->dk, B, Hkv, m, f->qk_dim, VK_OUTPUT);
    expect_view(&e, &bd->dv, B, Hkv, m, f->v_dim, VK_OUTPUT);
    return e;
}

static void print_linear(const attn_linear_desc *d, const unsigned bad[2], int t2, int bwd)
{
    fprintf(stderr, "LINEAR%s B=%lld Hq=%lld Hkv=%lld n=%lld m=%lld dk=%lld dv=%lld",
            bwd ? " backward" : "", (long long)d->batch, (long long)d->q_heads,
            (long long)d->kv_heads, (long long)d->q_len, (long long)d->kv_len,
            (long long)d->qk_dim, (long long)d->v_dim);
    print_view("q", &d->q);
    print_view("k", &d->k);
    print_view("v", &d->v);
    print_view("o", &d->o);
    fprintf(stderr, " fmap=%d causal=%d align=%d eps=%g lens=%d/%d state=%d engine=%d "
            "threads=%d/%d bad=%u,%u\n", (int)d->feature_map, d->causal, (int)d->align,
            (double)d->eps, d->use_kv_lens, d->use_q_lens, d->use_state, (int)d->engine,
            d->threads, t2, bad[0], bad[1]);
}

/* A float view into dense double [B][H][S][D], with 0 where the library
 * sees NaN (positions attn.h says are never read: the reference may read
 * some of them, e.g. for the exact 0 of a key no query sees; reading one in
 * the library shows as NaN in its results). */
static double *to_dense(const float *base, const attn_view *v, int64_t B, int64_t H, int64_t S,
                        int64_t D)
{
    double *x = xmalloc((size_t)(B * H * S * D) * sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t e = 0; e < D; e++)
                {
                    const float f = base[b * v->batch + h * v->head + s * v->seq + e];
                    x[((b * H + h) * S + s) * D + e] = isnan(f) ? 0.0 : (double)f;
                }
    return x;
}

/* A result within the reference's bound: tol 0 means exactly 0; a NaN or
 * infinite reference (a zero denominator with eps = 0: "O follows the
 * formula") must be matched. */
static void lin_check(const char *name, const float *got, const double *ref, const double *tol,
                      int64_t idx)
{
    const double g = (double)*got;
    int ok;
    if (isnan(ref[idx]))
        ok = isnan(g);
    else if (isinf(ref[idx]))
        ok = g == ref[idx];
    else if (tol[idx] == 0.0)
        ok = g == 0.0;
    else
        ok = fabs(g - ref[idx]) <= tol[idx];
    if (!ok)
        FAIL("linear %s[%lld] = %.9g, reference %.9g, tol %.3g", name, (long long)idx, g,
             ref[idx], tol[idx]);
}

static void lin_check_view(const char *name, const obuf *o, const attn_view *v, int64_t B,
                           int64_t H, int64_t S, int64_t D, const double *ref, const double *tol)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t e = 0; e < D; e++)
                    lin_check(name, o->ptr + b * v->batch + h * v->head + s * v->seq + e, ref,
                              tol, ((b * H + h) * S + s) * D + e);
    obuf_outside(o, name);
}

/* The linear problem's state from stage to stage. */
typedef struct lin_case {
    attn_linear_bwd_desc bd;              /* the forward's desc is bd.fwd */
    int bwd, huge, t2;
    unsigned bad[2];                      /* LB_* */
    int64_t B, Hkv, Hq, n, m, dk, dv;     /* as decoded (the desc's may be planted) */
    int64_t szq[3], szk[3];
    int32_t kv_lens[8], q_lens[8];
    expect pe;
    int64_t eq, ek, ev, eo, edo, edq, edk, edv; /* the views' extents */
    size_t oq, okk, ov, odo;              /* their origins in the pool */
    float *pool, *pool_copy;              /* Q, K, V (and dO), may overlap */
    size_t pool_len;
    lref_shape shp;                       /* what the reference computes */
    size_t ns, nz;                        /* the state's S and z */
    float *st_s, *st_z, *s0, *z0;         /* s0, z0: before the call */
    obuf oo, gq, gk, gvb;                 /* O, or dQ, dK, dV */
    obuf *outs[3];
    attn_linear_args a;
    attn_linear_bwd_args ba;
    int32_t kvl[8], ql[8];                /* planted lengths */
    int ws_small, ws_mis, null_top;
    unsigned wsel;
} lin_case;

static const char *lin_out_name(const lin_case *C, int k)
{
    return k == 0 ? (C->bwd ? "dQ" : "O") : k == 1 ? "dK" : "dV";
}

/* -------------------------------------------------------------- decode */

/* The planted fields (byte 1), the sizes and the shape (past a chunk of 64
 * rows, decoding after a prompt, self-attention), the engine. */
static void lin_decode_sizes(rd *r, lin_case *C)
{
    C->bad[0] = C->bad[1] = LB_NONE;
    decode_bad(r, u8(r), LB_COUNT_, C->bad);
    int64_t B = 1 + pick(r, 3), Hkv = 1 + pick(r, 2), g = 1 + pick(r, 3);
    int64_t n = 1 + pick(r, 8), m = 1 + pick(r, 10), dk = 1 + pick(r, 6), dv = 1 + pick(r, 6);
    const unsigned shape = u8(r);
    attn_engine engine = engine_of(shape >> 3);
    switch (shape % 8) {
    case 1: /* past a chunk of 64 rows */
        B = 1;
        Hkv = 1;
        g = 1 + pick(r, 2);
        n = 56 + pick(r, 24);
        m = (u8(r) & 1) ? n : 56 + pick(r, 24);
        dk = 1 + pick(r, 3);
        dv = 1 + pick(r, 3);
        break;
    case 2: /* a few queries, many keys (decoding after a prompt) */
        n = 1 + pick(r, 3);
        m = 60 + pick(r, 20);
        B = 1;
        break;
    case 3: /* self-attention shape */
        m = n = 1 + pick(r, 20);
        break;
    default: break;
    }
    attn_linear_bwd_desc_init(&C->bd);
    attn_linear_desc *d = &C->bd.fwd;
    d->engine = engine;
    d->batch = B;
    d->kv_heads = Hkv;
    d->q_heads = Hkv * g;
    d->q_len = n;
    d->kv_len = m;
    d->qk_dim = dk;
    d->v_dim = dv;
    C->B = B, C->Hkv = Hkv, C->Hq = d->q_heads, C->n = n, C->m = m, C->dk = dk, C->dv = dv;
    C->szq[0] = B, C->szq[1] = C->Hq, C->szq[2] = n;
    C->szk[0] = B, C->szk[1] = Hkv, C->szk[2] = m;
}

/* Feature map, causal, alignment, lengths, state, eps, threads, the
 * lengths' values, the views (the backward's too; garbage in fwd.o). */
static void lin_decode_options(rd *r, lin_case *C)
{
    attn_linear_bwd_desc *bd = &C->bd;
    attn_linear_desc *d = &bd->fwd;
    const int bwd = C->bwd;
    const int64_t *szq = C->szq, *szk = C->szk;
    const unsigned opt = u8(r);
    d->feature_map = (attn_feature_map)((opt & 3) == 3 ? 0 : opt & 3);
    if ((opt & 3) == 3 && (u8(r) & 1))
        d->feature_map = ATTN_FEATURE_ELU1; /* explicitly, vs the default */
    d->causal = (opt >> 2) & 1 ? ((opt & 0x80) ? -7 : 1) : 0; /* any nonzero is causal */
    d->align = (opt >> 3) & 1 ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    d->use_kv_lens = (opt >> 4) & 1;
    d->use_q_lens = (opt >> 5) & 1;
    d->use_state = !bwd && ((opt >> 6) & 1);
    {
        /* eps: NaN (1e-6), given, 0 (a zero denominator is inf or NaN:
         * forward only, the backward of such a row is NaN anyway) */
        static const float epss[10] = { NAN, NAN, 1e-6f, 0.5f, 1.0f, 1e-3f, 4.0f, 1e-30f,
                                        0.0f, -0.0f };
        const unsigned k = pick(r, 10);
        d->eps = epss[k >= 8 && bwd ? 0 : k];
    }
    const unsigned tsel = u8(r);
    d->threads = (tsel & 7) == 7 ? 0 : 1 + (int)(tsel % 4);
    C->t2 = threads_other(d->threads, tsel >> 3);
    for (int64_t b = 0; b < C->B; b++) {
        C->kv_lens[b] = (int32_t)pick(r, (unsigned)(C->m + 1));
        C->q_lens[b] = (int32_t)pick(r, (unsigned)(C->n + 1));
    }
    d->q = gen_view(r, szq, C->dk);
    d->k = gen_view(r, szk, C->dk);
    d->v = gen_view(r, szk, C->dv);
    d->o = gen_view(r, szq, C->dv);
    if (bwd) {
        bd->d_o = gen_view(r, szq, C->dv);
        bd->dq = gen_view(r, szq, C->dk);
        bd->dk = gen_view(r, szk, C->dk);
        bd->dv = gen_view(r, szk, C->dv);
        /* fwd.o is not used by the backward: garbage (ignored) */
        static const int64_t junk[4] = { ATTN_STRIDE_UNSET, -1, 0, INT64_MAX };
        const unsigned j = u8(r);
        if (j & 1)
            d->o = (attn_view){ junk[(j >> 1) & 3], junk[(j >> 3) & 3], junk[(j >> 5) & 3] };
    }
}

/* --------------------------------------------------------------- plant */

/* LB_SIZE_HUGE: a huge size, mostly with compact strides wrapping as a
 * caller's would. */
static void lin_plant_huge(rd *r, attn_linear_bwd_desc *bd, int bwd)
{
    attn_linear_desc *d = &bd->fwd;
    int64_t *s[] = { &d->batch, &d->q_heads, &d->kv_heads, &d->q_len, &d->kv_len,
                     &d->qk_dim, &d->v_dim };
    const unsigned which = pick(r, 7);
    *s[which] = huge_sizes[pick(r, 8)];
    if (which == 2)
        d->q_heads = d->kv_heads;
    if (u8(r) & 1) { /* compact strides, wrapping as a caller's would */
        const uint64_t hq = (uint64_t)d->q_heads, hk = (uint64_t)d->kv_heads;
        const uint64_t nn = (uint64_t)d->q_len, mm = (uint64_t)d->kv_len;
        const uint64_t ek = (uint64_t)d->qk_dim, ev = (uint64_t)d->v_dim;
        d->q = (attn_view){ (int64_t)(hq * nn * ek & INT64_MAX), (int64_t)(nn * ek & INT64_MAX), (int64_t)ek };
        d->k = (attn_view){ (int64_t)(hk * mm * ek & INT64_MAX), (int64_t)(mm * ek & INT64_MAX), (int64_t)ek };
        d->v = (attn_view){ (int64_t)(hk * mm * ev & INT64_MAX), (int64_t)(mm * ev & INT64_MAX), (int64_t)ev };
        d->o = (attn_view){ (int64_t)(hq * nn * ev & INT64_MAX), (int64_t)(nn * ev & INT64_MAX), (int64_t)ev };
        if (bwd) {
            bd->d_o = bd->dv = d->o; /* dV's shape differs: whatever it says */
            bd->dq = d->q;
            bd->dk = d->k;
        }
    }
}

/* One plan-time invalid field of kind bad (the view and stride it may hit
 * are decoded first, whatever the kind). */
static void lin_plant_plan1(rd *r, lin_case *C, unsigned bad)
{
    attn_linear_bwd_desc *bd = &C->bd;
    attn_linear_desc *d = &bd->fwd;
    const int bwd = C->bwd;
    attn_view *views[8] = { &d->q, &d->k, &d->v, bwd ? &bd->d_o : &d->o,
                            bwd ? &bd->dq : &d->o, bwd ? &bd->dk : &d->q,
                            bwd ? &bd->dv : &d->k, bwd ? &bd->dq : &d->v };
    attn_view *vw = views[pick(r, 8)];
    int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
    switch (bad) {
    case LB_RESERVED: {
        const int64_t val = (int64_t)u8(r) - 128;
        if (bwd && (u8(r) & 1))
            bd->reserved[pick(r, (unsigned)(sizeof bd->reserved / sizeof bd->reserved[0]))] =
                val ? val : INT64_MIN;
        else   /* (15 slots since the engine took one) */
            d->reserved[pick(r, (unsigned)(sizeof d->reserved / sizeof d->reserved[0]))] =
                val ? val : INT64_MIN;
        break;
    }
    case LB_ENUM:
        if (u8(r) & 1)
            d->feature_map = (attn_feature_map)((u8(r) & 1) ? 3 + (int)pick(r, 100) : -1);
        else
            d->align = (attn_align)((u8(r) & 1) ? 2 + (int)pick(r, 3) : -1);
        break;
    case LB_EPS: {
        static const float be[5] = { -1e-6f, -1.0f, INFINITY, -INFINITY, -1e-38f };
        d->eps = be[pick(r, 5)];
        break;
    }
    case LB_SIZE_NONPOS: {
        int64_t *s[] = { &d->batch, &d->q_heads, &d->kv_heads, &d->q_len, &d->kv_len,
                         &d->qk_dim, &d->v_dim };
        *s[pick(r, 7)] = (u8(r) & 1) ? 0 : -(int64_t)1 - (int64_t)u8(r);
        break;
    }
    case LB_SIZE_HUGE:
        lin_plant_huge(r, bd, bwd);
        C->huge = 1;
        break;
    case LB_HEAD_RATIO:
        /* more KV heads than Q heads, or (q_heads near INT64_MAX, from
         * another plant: q_heads + 1 would overflow) one fewer, which
         * does not divide it either */
        d->kv_heads = d->q_heads <= INT64_MAX - 4 ? d->q_heads + 1 + pick(r, 3) : d->q_heads - 1;
        break;
    case LB_STRIDE_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
    case LB_STRIDE_ZERO: *sp = 0; break;
    case LB_STRIDE_SHORT: vw->seq = vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0; if (vw->seq < 0) vw->seq = 0; break;
    case LB_STRIDE_UNSET: *sp = ATTN_STRIDE_UNSET; break;
    case LB_OUT_OVERLAP: {
        attn_view *ov = bwd ? (pick(r, 3) == 0 ? &bd->dq : (u8(r) & 1) ? &bd->dk : &bd->dv) : &d->o;
        int64_t *s = pick(r, 2) ? &ov->head : &ov->batch;
        *s = (int64_t)pick(r, 4) + (s == &ov->head ? 0 : 1);
        if (u8(r) & 1) ov->seq = ov->head;
        break;
    }
    case LB_STRIDE_HUGE:
        if (u8(r) & 1) vw->seq = (int64_t)INT32_MAX + 1 + pick(r, 4);
        else *sp = (int64_t)1 << (52 + pick(r, 11));
        break;
    case LB_THREADS: {
        static const int tv[] = { -1, 1025, INT_MAX, INT_MIN };
        d->threads = tv[pick(r, 4)];
        break;
    }
    case LB_STATE: if (bwd) d->use_state = 1 + (int)pick(r, 3); break;
    default: break;
    }
}

/* The views' extents; 1 when small enough to allocate (sizes as decoded). */
static int lin_extents(lin_case *C)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const attn_linear_desc *d = &bd->fwd;
    const int bwd = C->bwd;
    const int64_t *szq = C->szq, *szk = C->szk, dk = C->dk, dv = C->dv;
    C->eq = view_extent(&d->q, szq, dk);
    C->ek = view_extent(&d->k, szk, dk);
    C->ev = view_extent(&d->v, szk, dv);
    C->eo = bwd ? 0 : view_extent(&d->o, szq, dv);
    C->edo = bwd ? view_extent(&bd->d_o, szq, dv) : 0;
    C->edq = bwd ? view_extent(&bd->dq, szq, dk) : 0;
    C->edk = bwd ? view_extent(&bd->dk, szk, dk) : 0;
    C->edv = bwd ? view_extent(&bd->dv, szk, dv) : 0;
    return !C->huge && C->eq >= 0 && C->ek >= 0 && C->ev >= 0 && C->eo >= 0 && C->edo >= 0 &&
           C->edq >= 0 && C->edk >= 0 && C->edv >= 0 && d->batch == C->B &&
           d->q_heads == C->Hq && d->kv_heads == C->Hkv && d->q_len == C->n &&
           d->kv_len == C->m && d->qk_dim == dk && d->v_dim == dv;
}

/* A problem too large to allocate: plan only (and the one-shot call on
 * dummy buffers when invalid). */
static void lin_plan_only(lin_case *C)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const attn_linear_desc *d = &bd->fwd;
    const expect pe = C->pe;
    attn_status st;
    float dummy[64];
    for (int i = 0; i < 64; i++)
        dummy[i] = sentinel();
    const float in[64] = { 0 };
    if (C->bwd) {
        attn_linear_bwd_plan *plan = NULL;
        st = attn_linear_bwd_plan_create(&plan, bd);
        check_status("attn_linear_bwd_plan_create", st, pe);
        if (st == ATTN_OK) {
            size_t ws = 0;
            if (attn_linear_bwd_workspace_size(plan, &ws) != ATTN_OK)
                FAIL("attn_linear_bwd_workspace_size failed");
            attn_linear_bwd_plan_destroy(plan);
        } else {
            if (plan)
                FAIL("linear backward plan set on error");
            attn_linear_bwd_args a = { .q = in, .k = in, .v = in, .d_o = in, .dq = dummy,
                                       .dk = dummy, .dv = dummy };
            const attn_status st2 = attn_linear_backward(bd, &a);
            if (st2 != st)
                FAIL("attn_linear_backward returned %s, plan_create %s", st_name(st2),
                     st_name(st));
        }
    } else {
        attn_linear_plan *plan = NULL;
        st = attn_linear_plan_create(&plan, d);
        check_status("attn_linear_plan_create", st, pe);
        if (st == ATTN_OK) {
            size_t ws = 0;
            if (attn_linear_workspace_size(plan, &ws) != ATTN_OK)
                FAIL("attn_linear_workspace_size failed");
            attn_linear_plan_destroy(plan);
        } else {
            if (plan)
                FAIL("linear plan set on error");
            attn_linear_args a = { .q = in, .k = in, .v = in, .o = dummy,
                                   .kv_lens = d->use_kv_lens ? C->kv_lens : NULL,
                                   .q_lens = d->use_q_lens ? C->q_lens : NULL,
                                   .state_s = d->use_state ? dummy : NULL,
                                   .state_z = d->use_state ? dummy : NULL };
            const attn_status st2 = attn_linear(d, &a);
            if (st2 != st)
                FAIL("attn_linear returned %s, plan_create %s", st_name(st2), st_name(st));
        }
    }
    for (int i = 0; i < 64; i++)
        if (fbits(dummy[i]) != SENT)
            FAIL("linear: an output was written on error");
    counts[N_LIN_PLAN_ONLY]++;
}

/* -------------------------------------------------------------- inputs */

/* What is read (attn.h): Q rows i < q_lens[b]; K, V rows j < kv_lens[b]
 * that some query sees, or all of them with the state; dO rows of the
 * queries.  1 = Q, 2 = K, 4 = V, 8 = dO */
static void lin_mark_read(const lin_case *C, uint8_t *need)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const attn_linear_desc *d = &bd->fwd;
    const int bwd = C->bwd;
    const int64_t Hq = C->Hq, Hkv = C->Hkv, dk = C->dk, dv = C->dv;
    const size_t oq = C->oq, okk = C->okk, ov = C->ov, odo = C->odo;
    for (int64_t b = 0; b < C->B; b++) {
        const int64_t qlen = d->use_q_lens ? C->q_lens[b] : C->n;
        const int64_t klen = d->use_kv_lens ? C->kv_lens[b] : C->m;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < qlen; i++) {
                for (int64_t x = 0; x < dk; x++)
                    need[oq + (size_t)(b * d->q.batch + h * d->q.head + i * d->q.seq + x)] |= 1;
                for (int64_t x = 0; bwd && x < dv; x++)
                    need[odo + (size_t)(b * bd->d_o.batch + h * bd->d_o.head + i * bd->d_o.seq + x)] |= 8;
            }
        for (int64_t j = 0; j < klen; j++) {
            int seen = d->use_state;
            for (int64_t i = 0; i < qlen && !seen; i++)
                seen = lref_visible(&C->shp, b, i, j);
            for (int64_t hk = 0; seen && hk < Hkv; hk++) {
                for (int64_t x = 0; x < dk; x++)
                    need[okk + (size_t)(b * d->k.batch + hk * d->k.head + j * d->k.seq + x)] |= 2;
                for (int64_t x = 0; x < dv; x++)
                    need[ov + (size_t)(b * d->v.batch + hk * d->v.head + j * d->v.seq + x)] |= 4;
            }
        }
    }
}

/* Q, K, V (and dO) in one pool, views may overlap: random where read
 * (IDENTITY: the caller's features, positive), NaN where never read; the
 * state dense with exact sizes, z > 0 (a sum of features). */
static void lin_fill_inputs(rd *r, lin_case *C)
{
    const attn_linear_desc *d = &C->bd.fwd;
    size_t len = 0;
    C->oq = place(r, &len, (size_t)C->eq, 1);
    C->okk = place(r, &len, (size_t)C->ek, 1);
    C->ov = place(r, &len, (size_t)C->ev, 1);
    C->odo = C->bwd ? place(r, &len, (size_t)C->edo, 1) : 0;
    C->pool_len = len;
    C->pool = xmalloc(C->pool_len * sizeof(float));
    uint8_t *need = calloc(C->pool_len + 1, 1);
    if (!need)
        abort();
    C->shp = (lref_shape){ C->B, C->Hq, C->Hkv, C->n, C->m, C->dk, C->dv, (int)d->feature_map,
                           d->causal != 0, (int)d->align, isnan(d->eps) ? 1e-6 : (double)d->eps,
                           d->use_kv_lens ? C->kv_lens : NULL, d->use_q_lens ? C->q_lens : NULL };
    lin_mark_read(C, need);
    prng gv = { u32(r) };
    const unsigned vopt = u8(r);
    static const double mags[4] = { 1.0, 4.0, 0.25, 2.0 };
    const double mag = mags[vopt & 3];
    const int positive = d->feature_map == ATTN_FEATURE_IDENTITY;
    for (size_t i = 0; i < C->pool_len; i++) {
        if (!need[i])
            C->pool[i] = NAN;
        else if (positive && (need[i] & 3) && !(need[i] & 12))
            C->pool[i] = (float)(0.05 + pr_unit(&gv) * mag);
        else
            C->pool[i] = pr_val(&gv, mag);
    }
    free(need);
    C->pool_copy = xmalloc(C->pool_len * sizeof(float));
    memcpy(C->pool_copy, C->pool, C->pool_len * sizeof(float));
    C->ns = (size_t)(C->B * C->Hkv * C->dk * C->dv);
    C->nz = (size_t)(C->B * C->Hkv * C->dk);
    if (d->use_state) {
        C->st_s = xmalloc(C->ns * sizeof(float));
        C->st_z = xmalloc(C->nz * sizeof(float));
        for (size_t i = 0; i < C->ns; i++)
            C->st_s[i] = pr_val(&gv, mag * 3.0);
        for (size_t i = 0; i < C->nz; i++)
            C->st_z[i] = (float)(0.05 + pr_unit(&gv) * mag * 3.0);
        C->s0 = xmalloc(C->ns * sizeof(float));
        C->z0 = xmalloc(C->nz * sizeof(float));
        memcpy(C->s0, C->st_s, C->ns * sizeof(float));
        memcpy(C->z0, C->st_z, C->nz * sizeof(float));
    }
}

/* The outputs (sentinel-filled) and the args of the forward or the
 * backward. */
static void lin_make_args(rd *r, lin_case *C)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const attn_linear_desc *d = &bd->fwd;
    const int64_t *szq = C->szq, *szk = C->szk;
    if (C->bwd) {
        obuf_make(&C->gq, r, &bd->dq, szq, C->dk, C->edq);
        obuf_make(&C->gk, r, &bd->dk, szk, C->dk, C->edk);
        obuf_make(&C->gvb, r, &bd->dv, szk, C->dv, C->edv);
    } else {
        obuf_make(&C->oo, r, &d->o, szq, C->dv, C->eo);
    }
    C->outs[0] = C->bwd ? &C->gq : &C->oo;
    C->outs[1] = &C->gk;
    C->outs[2] = &C->gvb;
    attn_linear_args *a = &C->a;
    attn_linear_bwd_args *ba = &C->ba;
    memset(a, 0, sizeof *a);
    memset(ba, 0, sizeof *ba);
    if (C->bwd) {
        ba->q = C->pool + C->oq;
        ba->k = C->pool + C->okk;
        ba->v = C->pool + C->ov;
        ba->d_o = C->pool + C->odo;
        ba->dq = C->gq.ptr;
        ba->dk = C->gk.ptr;
        ba->dv = C->gvb.ptr;
        ba->kv_lens = d->use_kv_lens ? C->kv_lens : NULL;
        ba->q_lens = d->use_q_lens ? C->q_lens : NULL;
    } else {
        a->q = C->pool + C->oq;
        a->k = C->pool + C->okk;
        a->v = C->pool + C->ov;
        a->o = C->oo.ptr;
        a->kv_lens = d->use_kv_lens ? C->kv_lens : NULL;
        a->q_lens = d->use_q_lens ? C->q_lens : NULL;
        a->state_s = C->st_s;
        a->state_z = C->st_z;
    }
}

/* One exec-time invalid field of kind bad. */
static void lin_plant_exec1(rd *r, lin_case *C, unsigned bad)
{
    static const int32_t zero_lens[8];
    static float junk_f[64];
    attn_linear_desc *d = &C->bd.fwd;
    attn_linear_args *a = &C->a;
    attn_linear_bwd_args *ba = &C->ba;
    const int bwd = C->bwd;
    switch (bad) {
    case LB_PTR_NULL:
        if (bwd) {
            const void **p[] = { (const void **)&ba->q, (const void **)&ba->k,
                                 (const void **)&ba->v, (const void **)&ba->d_o,
                                 (const void **)&ba->dq, (const void **)&ba->dk,
                                 (const void **)&ba->dv, (const void **)&ba->kv_lens,
                                 (const void **)&ba->q_lens };
            *p[pick(r, 9)] = NULL;
        } else {
            const void **p[] = { (const void **)&a->q, (const void **)&a->k,
                                 (const void **)&a->v, (const void **)&a->o,
                                 (const void **)&a->kv_lens, (const void **)&a->q_lens,
                                 (const void **)&a->state_s, (const void **)&a->state_z };
            *p[pick(r, 8)] = NULL;
        }
        break;
    case LB_PTR_EXTRA:
        switch (pick(r, 4)) {
        case 0:
            if (!d->use_kv_lens) { if (bwd) ba->kv_lens = zero_lens; else a->kv_lens = zero_lens; }
            break;
        case 1:
            if (!d->use_q_lens) { if (bwd) ba->q_lens = zero_lens; else a->q_lens = zero_lens; }
            break;
        case 2: if (!bwd && !d->use_state) a->state_s = junk_f; break;
        default: if (!bwd && !d->use_state) a->state_z = junk_f; break;
        }
        break;
    case LB_LENGTH: {
        const unsigned b = pick(r, (unsigned)C->B);
        if (u8(r) & 1) {
            C->kvl[b] = bad_length(r, C->m);
            d->use_kv_lens = 1;
            if (bwd) ba->kv_lens = C->kvl; else a->kv_lens = C->kvl;
        } else {
            C->ql[b] = bad_length(r, C->n);
            d->use_q_lens = 1;
            if (bwd) ba->q_lens = C->ql; else a->q_lens = C->ql;
        }
        break;
    }
    case LB_WS_SMALL: C->ws_small = 1; break;
    case LB_WS_MISALIGNED: C->ws_mis = 1; break;
    case LB_NULL_TOP: C->null_top = 1 + (int)pick(r, 6); break;
    default: break;
    }
}

/* ------------------------------------------------------------------ run */

/* NULL plan, desc, args or bytes (a valid desc otherwise). */
static attn_status lin_run_null_top(const lin_case *C)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const attn_linear_desc *d = &bd->fwd;
    const int null_top = C->null_top;
    attn_status st = ATTN_OK;
    if (C->bwd) {
        attn_linear_bwd_plan *plan = NULL;
        switch (null_top) {
        case 1: st = attn_linear_bwd_plan_create(&plan, NULL); break;
        case 2: st = attn_linear_bwd_plan_create(NULL, bd); break;
        case 3: st = attn_linear_backward(NULL, &C->ba); break;
        case 4: st = attn_linear_backward(bd, NULL); break;
        default:
            st = attn_linear_bwd_plan_create(&plan, bd);
            check_status("attn_linear_bwd_plan_create", st, C->pe);
            st = null_top == 5     ? attn_linear_bwd_execute(NULL, &C->ba, NULL, 0)
               : (C->wsel & 4)     ? attn_linear_bwd_execute(plan, NULL, NULL, 0)
                                   : attn_linear_bwd_workspace_size(plan, NULL);
            attn_linear_bwd_plan_destroy(plan);
            plan = NULL;
            break;
        }
        if (plan)
            FAIL("linear backward plan set on error");
    } else {
        attn_linear_plan *plan = NULL;
        switch (null_top) {
        case 1: st = attn_linear_plan_create(&plan, NULL); break;
        case 2: st = attn_linear_plan_create(NULL, d); break;
        case 3: st = attn_linear(NULL, &C->a); break;
        case 4: st = attn_linear(d, NULL); break;
        default:
            st = attn_linear_plan_create(&plan, d);
            check_status("attn_linear_plan_create", st, C->pe);
            st = null_top == 5     ? attn_linear_execute(NULL, &C->a, NULL, 0)
               : (C->wsel & 4)     ? attn_linear_execute(plan, NULL, NULL, 0)
                                   : attn_linear_workspace_size(plan, NULL);
            attn_linear_plan_destroy(plan);
            plan = NULL;
            break;
        }
        if (plan)
            FAIL("linear plan set on error");
    }
    if (st != ATTN_ERR_NULL_ARGUMENT)
        FAIL("linear: NULL plan/desc/args/bytes: got %s", st_name(st));
    return st;
}

/* The pointer, length and workspace rules of the backward's call. */
static void lin_expect_bwd_call(const lin_case *C, expect *x, const void *ws, size_t ws_bytes,
                                size_t need)
{
    const attn_linear_desc *d = &C->bd.fwd;
    const attn_linear_bwd_args *ba = &C->ba;
    const ptr_use u[] = { { 1, ba->q }, { 1, ba->k }, { 1, ba->v }, { 1, ba->d_o },
                          { 1, ba->dq }, { 1, ba->dk }, { 1, ba->dv },
                          { d->use_kv_lens, ba->kv_lens }, { d->use_q_lens, ba->q_lens } };
    expect_call(x, u, 9, C->B, d->use_kv_lens ? ba->kv_lens : NULL, C->m,
                d->use_q_lens ? ba->q_lens : NULL, C->n, ws, ws_bytes, need);
}

/* ... and of the forward's. */
static void lin_expect_fwd_call(const lin_case *C, expect *x, const void *ws, size_t ws_bytes,
                                size_t need)
{
    const attn_linear_desc *d = &C->bd.fwd;
    const attn_linear_args *a = &C->a;
    const ptr_use u[] = { { 1, a->q }, { 1, a->k }, { 1, a->v }, { 1, a->o },
                          { d->use_kv_lens, a->kv_lens }, { d->use_q_lens, a->q_lens },
                          { d->use_state, a->state_s }, { d->use_state, a->state_z } };
    expect_call(x, u, 8, C->B, d->use_kv_lens ? a->kv_lens : NULL, C->m,
                d->use_q_lens ? a->q_lens : NULL, C->n, ws, ws_bytes, need);
}

/* The backward: the one-shot, or plan, workspace and execute. */
static attn_status lin_run_bwd(lin_case *C, int oneshot)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const expect pe = C->pe;
    attn_status st;
    if (oneshot) {
        expect x = pe;
        if (!pe.must)
            lin_expect_bwd_call(C, &x, NULL, 0, 0);
        st = attn_linear_backward(bd, &C->ba);
        check_status("attn_linear_backward", st, x);
        return st;
    }
    attn_linear_bwd_plan *plan = NULL;
    st = attn_linear_bwd_plan_create(&plan, bd);
    check_status("attn_linear_bwd_plan_create", st, pe);
    if (st == ATTN_OK) {
        size_t need_ws = 0;
        if (attn_linear_bwd_workspace_size(plan, &need_ws) != ATTN_OK)
            FAIL("attn_linear_bwd_workspace_size failed");
        wsp w1;
        wsp_make(&w1, C->wsel & 3, need_ws, C->ws_small, C->ws_mis);
        expect x = { 0, 0 };
        lin_expect_bwd_call(C, &x, w1.ptr, w1.bytes, need_ws);
        if (C->ws_small && need_ws == 0)
            x.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
        st = attn_linear_bwd_execute(plan, &C->ba, w1.ptr, w1.bytes);
        check_status("attn_linear_bwd_execute", st, x);
        attn_linear_bwd_plan_destroy(plan);
        free(w1.raw);
    } else if (plan) {
        FAIL("linear backward plan set on error");
    }
    return st;
}

/* The forward: the one-shot, or plan, workspace and execute. */
static attn_status lin_run_fwd(lin_case *C, int oneshot)
{
    const attn_linear_desc *d = &C->bd.fwd;
    const expect pe = C->pe;
    attn_status st;
    if (oneshot) {
        expect x = pe;
        if (!pe.must)
            lin_expect_fwd_call(C, &x, NULL, 0, 0);
        st = attn_linear(d, &C->a);
        check_status("attn_linear", st, x);
        return st;
    }
    attn_linear_plan *plan = NULL;
    st = attn_linear_plan_create(&plan, d);
    check_status("attn_linear_plan_create", st, pe);
    if (st == ATTN_OK) {
        size_t need_ws = 0;
        if (attn_linear_workspace_size(plan, &need_ws) != ATTN_OK)
            FAIL("attn_linear_workspace_size failed");
        wsp w1;
        wsp_make(&w1, C->wsel & 3, need_ws, C->ws_small, C->ws_mis);
        expect x = { 0, 0 };
        lin_expect_fwd_call(C, &x, w1.ptr, w1.bytes, need_ws);
        if (C->ws_small && need_ws == 0)
            x.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
        st = attn_linear_execute(plan, &C->a, w1.ptr, w1.bytes);
        check_status("attn_linear_execute", st, x);
        attn_linear_plan_destroy(plan);
        free(w1.raw);
    } else if (plan) {
        FAIL("linear plan set on error");
    }
    return st;
}

/* The call, after the plan's expected status again (lengths) and the
 * workspace choices. */
static attn_status lin_run(rd *r, lin_case *C)
{
    C->pe = C->bwd ? expect_linear_bwd_plan(&C->bd) : expect_linear_plan(&C->bd.fwd, 1); /* lengths */
    C->wsel = u8(r);
    const int oneshot = (C->wsel & 3) == 3 && !C->ws_small && !C->ws_mis;
    for (int k = 0; k < 3; k++)
        if (C->outs[k]->base)
            obuf_clear(C->outs[k]);
    if (C->null_top && C->pe.must == 0)
        return lin_run_null_top(C);
    return C->bwd ? lin_run_bwd(C, oneshot) : lin_run_fwd(C, oneshot);
}

/* ---------------------------------------------------------------- check */

/* dQ, dK, dV against the float64 reference, with its bounds. */
static void lin_check_bwd(const lin_case *C, const double *rq, const double *rk,
                          const double *rv)
{
    const attn_linear_bwd_desc *bd = &C->bd;
    const int64_t B = C->B, Hq = C->Hq, Hkv = C->Hkv, n = C->n, m = C->m, dk = C->dk,
                  dv = C->dv;
    double *rdo = to_dense(C->pool + C->odo, &bd->d_o, B, Hq, n, dv);
    const size_t nq = (size_t)(B * Hq * n * dk), nk = (size_t)(B * Hkv * m * dk),
                 nv = (size_t)(B * Hkv * m * dv);
    double *x[6] = { xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8),
                     xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8) };
    if (lref_backward(&C->shp, rq, rk, rv, rdo, x[0], x[1], x[2], x[3], x[4], x[5]))
        abort();
    lin_check_view("dQ", &C->gq, &bd->dq, B, Hq, n, dk, x[0], x[3]);
    lin_check_view("dK", &C->gk, &bd->dk, B, Hkv, m, dk, x[1], x[4]);
    lin_check_view("dV", &C->gvb, &bd->dv, B, Hkv, m, dv, x[2], x[5]);
    for (int k = 0; k < 6; k++)
        free(x[k]);
    free(rdo);
}

/* O and the state against the float64 reference, with its bounds. */
static void lin_check_fwd(const lin_case *C, const double *rq, const double *rk,
                          const double *rv)
{
    const attn_linear_desc *d = &C->bd.fwd;
    const size_t ns = C->ns, nz = C->nz;
    const size_t no = (size_t)(C->B * C->Hq * C->n * C->dv);
    double *ro = xmalloc(no * 8), *rt = xmalloc(no * 8);
    double *rs0 = NULL, *rz0 = NULL, *s1 = NULL, *z1 = NULL, *s1t = NULL, *z1t = NULL;
    if (d->use_state) {
        rs0 = xmalloc(ns * 8);
        rz0 = xmalloc(nz * 8);
        for (size_t i = 0; i < ns; i++)
            rs0[i] = (double)C->s0[i];
        for (size_t i = 0; i < nz; i++)
            rz0[i] = (double)C->z0[i];
        s1 = xmalloc(ns * 8);
        z1 = xmalloc(nz * 8);
        s1t = xmalloc(ns * 8);
        z1t = xmalloc(nz * 8);
    }
    if (lref_forward(&C->shp, rq, rk, rv, rs0, rz0, ro, rt, s1, z1, s1t, z1t))
        abort();
    lin_check_view("O", &C->oo, &d->o, C->B, C->Hq, C->n, C->dv, ro, rt);
    for (size_t i = 0; s1 && i < ns; i++)
        lin_check("state S", C->st_s + i, s1, s1t, (int64_t)i);
    for (size_t i = 0; z1 && i < nz; i++)
        lin_check("state z", C->st_z + i, z1, z1t, (int64_t)i);
    free(ro); free(rt); free(rs0); free(rz0); free(s1); free(z1); free(s1t); free(z1t);
}

/* After the call: the inputs unchanged; on error the outputs and the
 * state untouched (0); on success the reference's bounds (1). */
static int lin_check_result(const lin_case *C, attn_status st)
{
    const attn_linear_desc *d = &C->bd.fwd;
    if (memcmp(C->pool_copy, C->pool, C->pool_len * sizeof(float)))
        FAIL("linear: an input was modified");
    if (st != ATTN_OK) {
        for (int k = 0; k < 3; k++)
            if (C->outs[k]->base)
                obuf_untouched(C->outs[k], lin_out_name(C, k), st_name(st));
        if (C->st_s && (memcmp(C->st_s, C->s0, C->ns * sizeof(float)) ||
                        memcmp(C->st_z, C->z0, C->nz * sizeof(float))))
            FAIL("linear: %s, but the state was written", st_name(st));
        counts[C->bwd ? N_LIN_BWD_ERROR : N_LIN_ERROR]++;
        return 0;
    }
    counts[C->bwd ? N_LIN_BWD_CHECKED : N_LIN_CHECKED]++;
    double *rq = to_dense(C->pool + C->oq, &d->q, C->B, C->Hq, C->n, C->dk);
    double *rk = to_dense(C->pool + C->okk, &d->k, C->B, C->Hkv, C->m, C->dk);
    double *rv = to_dense(C->pool + C->ov, &d->v, C->B, C->Hkv, C->m, C->dv);
    if (C->bwd)
        lin_check_bwd(C, rq, rk, rv);
    else
        lin_check_fwd(C, rq, rk, rv);
    free(rq);
    free(rk);
    free(rv);
    return 1;
}

/* Again with another thread count and workspace (the state reset to its
 * value before the call): bitwise equal; the inputs still unchanged. */
static void lin_rerun(lin_case *C)
{
    attn_linear_desc *d = &C->bd.fwd;
    const int t2 = C->t2;
    const size_t ns = C->ns, nz = C->nz;
    attn_status st;
    float *snap[3], *ss = NULL, *sz = NULL;
    for (int k = 0; k < 3; k++) {
        snap[k] = obuf_snap(C->outs[k]);
        if (C->outs[k]->base)
            obuf_clear(C->outs[k]);
    }
    if (C->st_s) {
        ss = xmalloc(ns * sizeof(float));
        sz = xmalloc(nz * sizeof(float));
        memcpy(ss, C->st_s, ns * sizeof(float));
        memcpy(sz, C->st_z, nz * sizeof(float));
        memcpy(C->st_s, C->s0, ns * sizeof(float));
        memcpy(C->st_z, C->z0, nz * sizeof(float));
    }
    const int t1 = d->threads;
    d->threads = t2;
    size_t need_ws = 0;
    wsp w2;
    if (C->bwd) {
        attn_linear_bwd_plan *plan = NULL;
        if ((st = attn_linear_bwd_plan_create(&plan, &C->bd)) != ATTN_OK)
            FAIL("linear backward plan with %d threads: %s", t2, st_name(st));
        attn_linear_bwd_workspace_size(plan, &need_ws);
        wsp_make(&w2, (C->wsel >> 3) % 3, need_ws, 0, 0);
        if ((st = attn_linear_bwd_execute(plan, &C->ba, w2.ptr, w2.bytes)) != ATTN_OK)
            FAIL("linear backward with %d threads: %s", t2, st_name(st));
        attn_linear_bwd_plan_destroy(plan);
    } else {
        attn_linear_plan *plan = NULL;
        if ((st = attn_linear_plan_create(&plan, d)) != ATTN_OK)
            FAIL("linear plan with %d threads: %s", t2, st_name(st));
        attn_linear_workspace_size(plan, &need_ws);
        wsp_make(&w2, (C->wsel >> 3) % 3, need_ws, 0, 0);
        if ((st = attn_linear_execute(plan, &C->a, w2.ptr, w2.bytes)) != ATTN_OK)
            FAIL("linear execute with %d threads: %s", t2, st_name(st));
        attn_linear_plan_destroy(plan);
    }
    free(w2.raw);
    for (int k = 0; k < 3; k++) {
        obuf_same(C->outs[k], snap[k], lin_out_name(C, k), t1, t2, " (linear)");
        free(snap[k]);
    }
    if (ss && (memcmp(ss, C->st_s, ns * sizeof(float)) || memcmp(sz, C->st_z, nz * sizeof(float))))
        FAIL("linear state differs bitwise between %d and %d threads", t1, t2);
    free(ss);
    free(sz);
    d->threads = t1;
    if (memcmp(C->pool_copy, C->pool, C->pool_len * sizeof(float)))
        FAIL("linear: an input was modified");
}

static void lin_case_free(lin_case *C)
{
    free(C->pool);
    free(C->pool_copy);
    free(C->st_s);
    free(C->st_z);
    free(C->s0);
    free(C->z0);
    obuf_free(&C->oo);
    obuf_free(&C->gq);
    obuf_free(&C->gk);
    obuf_free(&C->gvb);
}

/* ----------------------------------------------------------------- kind */

void fuzz_linear(rd *r, unsigned sel)
{
    lin_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    C->bwd = !!(sel & SEL_DROPOUT);
    /* decode */
    lin_decode_sizes(r, C);
    lin_decode_options(r, C);
    /* plant (plan-time fields) */
    for (int k = 0; k < 2; k++)
        lin_plant_plan1(r, C, C->bad[k]);
    C->pe = C->bwd ? expect_linear_bwd_plan(&C->bd) : expect_linear_plan(&C->bd.fwd, 1);
    if (C->huge)
        C->pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_linear(&C->bd.fwd, C->bad, C->t2, C->bwd);
    if (!lin_extents(C)) {
        lin_plan_only(C);
        free(C);
        return;
    }
    /* plant (NaN where never read), the buffers, exec-time fields */
    lin_fill_inputs(r, C);
    lin_make_args(r, C);
    memcpy(C->kvl, C->kv_lens, sizeof C->kvl);
    memcpy(C->ql, C->q_lens, sizeof C->ql);
    for (int k = 0; k < 2; k++)
        lin_plant_exec1(r, C, C->bad[k]);
    /* run */
    const attn_status st = lin_run(r, C);
    /* check */
    if (lin_check_result(C, st))
        lin_rerun(C);
    lin_case_free(C);
    free(C);
}
