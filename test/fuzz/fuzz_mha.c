/*
 * fuzz_mha.c -- the MHA layer (attn_mha_plan_create, attn_mha_execute;
 * with byte 0 bit 2 attn_mha_train_execute, then fuzz_mha_train.c): byte
 * 0 bit 0 set, bits 4 to 6 clear.  Decoded: heads, head dim, GQA, self or
 * cross attention, packed in-projection, biases, kdim and vdim, batch and
 * lengths, row strides, scale, alignment, window, lengths, attention mask,
 * bias, key padding mask, averaged or per-head weights, engine, threads,
 * dropout (byte 0 bit 1, as fuzz_sdpa.c's), sparse fields (bit 3,
 * fuzz_sparse.c), the element types x_type and w_type (bit 7,
 * fuzz_mha16.c), one or two invalid fields (BAD_*, byte 1).
 *
 * Contract: the status (expect_mha_plan, expect_mha_call; for training
 * expect_context too); on error out and weights hold the sentinel, the
 * inputs (and the context) are unchanged; on success out and weights are
 * within the float64 reference's bounds (test/mha_reference.h), the
 * sentinel outside, and attn_mha_execute with another thread count and
 * workspace is bitwise the same (also after train_forward: "Y bitwise as
 * attn_mha_execute").  Positions never read (row gaps, mask and bias
 * entries hidden by lengths, window or the sparse fields) hold NaN or
 * garbage.  Invalid or too large problems are planned only.
 *
 * Training: attn_mha_train_execute with a decoded context (exact or
 * larger; or NULL, short, misaligned) checked as execute is (and the
 * context untouched on error), whose rerun is attn_mha_execute (bitwise
 * the same out and weights), then attn_mha_bwd_execute (fuzz_mha_train.c).
 */
#include "fuzz_kv.h"
#include "fuzz_mha.h"

/* --------------------------------------------------- expected statuses */

/* The layer's element types: F32, F16 or BF16 each; the quantized K/V
 * types Q8_0 and Q4_0 (1.2) are the SDPA forward's only, so as x_type or
 * w_type ATTN_ERR_UNSUPPORTED_TYPE; any other value ATTN_ERR_BAD_OPTION.
 * (The planted 3 and 4 of inputs older than 1.2, fuzz_mha16.c, now test
 * the former.)  Local, not fuzz_kv.c's dtype_ok: K and V take more. */
static int mha_type_known(int t) { return t >= ATTN_DTYPE_F32 && t <= ATTN_DTYPE_Q4_0; }
static int mha_type_quant(int t) { return t == ATTN_DTYPE_Q8_0 || t == ATTN_DTYPE_Q4_0; }

static expect expect_mha_plan(const attn_mha_desc *d)
{
    expect e = { 0, 0 };
    if (!mha_type_known(d->x_type) || !mha_type_known(d->w_type))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    else if (mha_type_quant(d->x_type) || mha_type_quant(d->w_type))
        e.must |= BIT(ATTN_ERR_UNSUPPORTED_TYPE);
    if (reserved_nonzero(d->reserved, (int)(sizeof d->reserved / sizeof d->reserved[0])) ||
        d->reserved_pad != 0 || !engine_ok(d->engine) ||
        (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        !mask_mode_ok(d->mask_mode) || !mask_mode_ok(d->key_padding_mode) ||
        (d->weights != ATTN_WEIGHTS_NONE && d->weights != ATTN_WEIGHTS_PER_HEAD &&
         d->weights != ATTN_WEIGHTS_AVERAGED))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (!sparse_fields_ok(d->reserved_flags, d->layout_per_head, d->block_size))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (d->embed_dim <= 0 || d->num_heads <= 0 || d->num_kv_heads < 0 || d->kdim < 0 ||
        d->vdim < 0 || d->batch <= 0 || d->q_len <= 0 || d->kv_len <= 0) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        e.maybe = ~0u & ~1u;
        return e;
    }
    if (d->embed_dim % d->num_heads || (d->self_attention && d->kv_len != d->q_len))
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
    if (d->embed_dim > INT32_MAX || d->kdim > INT32_MAX || d->vdim > INT32_MAX ||
        d->q_len > INT32_MAX || d->kv_len > INT32_MAX)
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    const int64_t E = d->embed_dim, H = d->num_heads;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : H;
    if (H % Hkv)
        e.must |= BIT(ATTN_ERR_HEAD_RATIO);
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    if (d->packed_in_proj && (kdim != E || vdim != E || Hkv != H))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (d->self_attention && (kdim != E || vdim != E))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    const struct { int64_t s, w; int used; } rs[] = {
        { d->x_stride, E, 1 }, { d->out_stride, E, 1 },
        { d->key_stride, kdim, !d->self_attention }, { d->value_stride, vdim, !d->self_attention },
    };
    for (int i = 0; i < 4; i++) {
        if (!rs[i].used)
            continue;
        if (rs[i].s < 0 || (rs[i].s != 0 && rs[i].s < rs[i].w))
            e.must |= BIT(ATTN_ERR_BAD_STRIDE);
        if (rs[i].s > INT32_MAX)
            e.must |= BIT(ATTN_ERR_TOO_LARGE);
    }
    if (mask_mode_ok(d->mask_mode) && d->mask_mode != ATTN_MASK_NONE)
        expect_view(&e, &d->mask, d->batch, H, d->q_len, d->kv_len, VK_BCAST);
    if (d->use_bias)
        expect_view(&e, &d->bias, d->batch, H, d->q_len, d->kv_len, VK_BCAST);
    if (isinf(d->scale))
        e.must |= BIT(ATTN_ERR_BAD_SCALE);
    if (d->threads < 0 || d->threads > 1024)
        e.must |= BIT(ATTN_ERR_BAD_THREADS);
    if (!(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    /* the layer's SDPA refuses B or H past 2^32 with dropout (its counter);
     * the MHA section of attn.h does not say so: tolerated */
    if (d->dropout_p > 0.0 &&
        (d->batch > ((int64_t)1 << 32) || d->num_heads > ((int64_t)1 << 32)))
        e.maybe |= BIT(ATTN_ERR_TOO_LARGE);
    return e;
}

/* The pointer, length and workspace rules of attn_mha_execute and
 * attn_mha_train_execute (outputs 1) and of attn_mha_bwd_execute (outputs 0:
 * it ignores args->out and args->weights). */
expect expect_mha_call(const attn_mha_desc *d, const attn_mha_weights *w, const attn_mha_args *a,
                       int outputs, const void *ws, size_t ws_bytes, size_t need)
{
    expect e = { 0, 0 };
    const int pk = d->packed_in_proj, hb = d->has_bias;
    /* the weights, then x, key, value and out (expect_mha16's 14) */
    ptr_use f[64] = {
        { pk, w->in_proj_weight },     { pk && hb, w->in_proj_bias },
        { !pk, w->q_weight },          { !pk, w->k_weight },
        { !pk, w->v_weight },          { !pk && hb, w->q_bias },
        { !pk && hb, w->k_bias },      { !pk && hb, w->v_bias },
        { 1, w->out_weight },          { hb, w->out_bias },
        { 1, a->x },                   { !d->self_attention, a->key },
        { !d->self_attention, a->value }, { outputs, outputs ? a->out : NULL },
        { d->use_kv_lens, a->kv_lens },  { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->key_padding_mode != ATTN_MASK_NONE, a->key_padding_mask },
        { outputs && d->weights != ATTN_WEIGHTS_NONE, outputs ? a->weights : NULL },
        { d->use_global_k != 0, a->global_k }, { d->use_global_q != 0, a->global_q },
        { d->block_size != 0, a->layout },
    };
    const size_t nf = expect_mha16(&e, d, w, a, outputs, f, 23);
    expect_call(&e, f, nf, d->batch, d->use_kv_lens ? a->kv_lens : NULL,
                d->kv_len, d->use_q_lens ? a->q_lens : NULL, d->q_len, ws, ws_bytes, need);
    return e;
}

static expect expect_mha_exec(const attn_mha_desc *d, const attn_mha_weights *w,
                              const attn_mha_args *a, const void *ws, size_t ws_bytes,
                              size_t need)
{
    return expect_mha_call(d, w, a, 1, ws, ws_bytes, need);
}

/* The training context: required, attn_mha_context_size bytes, 64-byte
 * aligned (attn_mha_train_execute and attn_mha_bwd_execute). */
void expect_context(expect *e, const void *cx, size_t bytes, size_t need)
{
    if (!cx) {
        e->must |= BIT(ATTN_ERR_NULL_ARGUMENT);
        return;
    }
    if (bytes < need)
        e->must |= BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    if ((uintptr_t)cx % 64)
        e->must |= BIT(ATTN_ERR_WORKSPACE_ALIGNMENT);
}

static void print_mha(const attn_mha_desc *d, const unsigned bad[2], int t2, int train)
{
    fprintf(stderr, "MHA E=%lld H=%lld Hkv=%lld kdim=%lld vdim=%lld B=%lld L=%lld S=%lld self=%d "
            "packed=%d has_bias=%d strides=%lld/%lld/%lld/%lld scale=%g align=%d win=[%lld,%lld] "
            "lens=%d/%d mask=%d",
            (long long)d->embed_dim, (long long)d->num_heads, (long long)d->num_kv_heads,
            (long long)d->kdim, (long long)d->vdim, (long long)d->batch, (long long)d->q_len,
            (long long)d->kv_len, d->self_attention, d->packed_in_proj, d->has_bias,
            (long long)d->x_stride, (long long)d->key_stride, (long long)d->value_stride,
            (long long)d->out_stride, d->scale, (int)d->align, (long long)d->window_left,
            (long long)d->window_right, d->use_kv_lens, d->use_q_lens, (int)d->mask_mode);
    if (d->mask_mode)
        print_view("", &d->mask);
    fprintf(stderr, " bias=%d", d->use_bias);
    if (d->use_bias)
        print_view("", &d->bias);
    if (d->dropout_p != 0.0 || d->dropout_seed || d->dropout_offset)
        fprintf(stderr, " dropout=%g/%llx/%llx", d->dropout_p,
                (unsigned long long)d->dropout_seed, (unsigned long long)d->dropout_offset);
    print_sparse(d->use_global_k, d->use_global_q, d->layout_per_head, d->reserved_flags,
                 d->block_size);
    fprintf(stderr, " kpm=%d weights=%d engine=%d threads=%d/%d types=%d/%d bad=%u,%u%s\n",
            (int)d->key_padding_mode, (int)d->weights, (int)d->engine, d->threads, t2,
            (int)d->x_type, (int)d->w_type, bad[0], bad[1], train ? " train" : "");
}

/* -------------------------------------------------------------- decode */

/* The planted fields (byte 1), heads, dims, self/cross, packing, biases,
 * batch and lengths (several sparse blocks), the sparse fields, strides. */
static void mha_decode_sizes(rd *r, unsigned sel, mha_case *C)
{
    attn_mha_desc *d = &C->d;
    attn_mha_desc_init(d);
    C->train = !!(sel & SEL_TRAIN);
    C->bad[0] = C->bad[1] = BAD_NONE;
    decode_bad(r, u8(r), BAD_COUNT_, C->bad);
    if (sel & SEL_QO)
        decode_mha16(r, C);
    const int64_t H = 1 + pick(r, 4), dh = 1 + pick(r, 4), E = H * dh;
    int64_t Hkv = H;
    {
        int64_t divs[4], nd = 0;
        for (int64_t x = 1; x <= H; x++)
            if (H % x == 0)
                divs[nd++] = x;
        Hkv = divs[pick(r, (unsigned)nd)];
    }
    unsigned f = u8(r);
    d->embed_dim = E;
    d->num_heads = H;
    d->num_kv_heads = (Hkv == H && (f & 1)) ? 0 : Hkv;
    d->self_attention = !!(f & 2);
    d->packed_in_proj = (f & 4) && Hkv == H;
    d->has_bias = !!(f & 8);
    const int cross_dims = !d->self_attention && !d->packed_in_proj;
    d->kdim = cross_dims && (f & 16) ? 1 + pick(r, 7) : (f & 32) ? E : 0;
    d->vdim = cross_dims && (f & 64) ? 1 + pick(r, 7) : (f & 128) ? E : 0;
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    int64_t B = 1 + pick(r, 3), L = 1 + pick(r, 5);
    int64_t S = d->self_attention ? L : 1 + pick(r, 7);
    C->sparse = !!(sel & SEL_SPARSE);
    sparse_cfg *sc = &C->sc;
    if (C->sparse) {
        decode_sparse(r, sc);
        if ((sc->fill & 0x300) == 0x300) { /* several blocks of 16 */
            B = 1;
            L = 1 + pick(r, 24);
            S = d->self_attention ? L : 1 + pick(r, 34);
        }
    }
    d->use_global_k = sc->gk;
    d->use_global_q = sc->gq;
    d->layout_per_head = sc->lph;
    d->block_size = sc->bs;
    d->batch = B;
    d->q_len = L;
    d->kv_len = S;
    unsigned sg = u8(r);
    d->x_stride = (sg & 3) == 0 ? 0 : E + (sg & 3) - 1;
    d->key_stride = (sg >> 2 & 3) == 0 ? 0 : kdim + (sg >> 2 & 3) - 1;
    d->value_stride = (sg >> 4 & 3) == 0 ? 0 : vdim + (sg >> 4 & 3) - 1;
    d->out_stride = (sg >> 6 & 3) == 0 ? 0 : E + (sg >> 6 & 3) - 1;
    C->H = H, C->dh = dh, C->E = E, C->Hkv = Hkv, C->kdim = kdim, C->vdim = vdim;
    C->B = B, C->L = L, C->S = S;
}

/* Scale, alignment, window, lengths, masks, bias, weights, engine,
 * threads, dropout, the lengths' values, the mask and bias views. */
static void mha_decode_options(rd *r, unsigned sel, mha_case *C)
{
    attn_mha_desc *d = &C->d;
    const int64_t B = C->B, L = C->L, S = C->S;
    unsigned opt = u8(r);
    static const float scales[] = { 1.0f, 0.0f, -0.5f, 0.125f, 3.0f };
    if (opt & 1)
        d->scale = scales[pick(r, 5)];
    d->align = (opt & 2) ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    if (opt & 4) {
        const int64_t far = L + S + 2;
        unsigned w = u8(r);
        d->window_left = (w & 3) == 0 ? -1 : (int64_t)(w >> 2) % far;
        w = u8(r);
        d->window_right = (w & 3) == 0 ? -1 : (int64_t)(w >> 2) % far;
    }
    d->use_kv_lens = !!(opt & 8);
    d->use_q_lens = !!(opt & 16);
    d->use_bias = !!(opt & 32);
    d->mask_mode = (attn_mask_mode)pick(r, 3);
    d->key_padding_mode = (attn_mask_mode)pick(r, 3);
    const unsigned wb = u8(r);
    d->weights = (attn_weights_mode)(wb % 3);
    d->engine = engine_of(wb / 3);
    unsigned tsel = u8(r);
    d->threads = (tsel & 7) == 7 ? 0 : 1 + (int)(tsel % 4);
    C->t2 = threads_other(d->threads, tsel >> 3);
    if (sel & SEL_DROPOUT)
        decode_dropout(r, &d->dropout_p, &d->dropout_seed, &d->dropout_offset);
    for (int64_t b = 0; b < B; b++) {
        C->kv_lens[b] = (int32_t)pick(r, (unsigned)S + 1);
        C->q_lens[b] = (int32_t)pick(r, (unsigned)L + 1);
    }
    C->szm[0] = B, C->szm[1] = C->H, C->szm[2] = L;
    if (d->mask_mode) {
        d->mask = gen_view(r, C->szm, S);
        unsigned bc = u8(r);
        if (bc & 1) d->mask.batch = 0;
        if (bc & 2) d->mask.head = 0;
        if (bc & 4) d->mask.seq = 0;
    }
    if (d->use_bias) {
        d->bias = gen_view(r, C->szm, S);
        unsigned bc = u8(r);
        if (bc & 1) d->bias.batch = 0;
        if (bc & 2) d->bias.head = 0;
        if (bc & 4) d->bias.seq = 0;
    }
}

/* --------------------------------------------------------------- plant */

/* One plan-time invalid field of kind bad. */
static void mha_plant_plan1(rd *r, mha_case *C, unsigned bad)
{
    attn_mha_desc *d = &C->d;
    const int64_t E = C->E, H = C->H, S = C->S, kdim = C->kdim, vdim = C->vdim;
    int64_t *strides[] = { &d->x_stride, &d->key_stride, &d->value_stride, &d->out_stride };
    switch (bad) {
    case BAD_RESERVED:
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse(r, 1, &d->reserved_flags, &d->layout_per_head, &d->block_size);
            break;
        }
        d->reserved[pick(r, (unsigned)(sizeof d->reserved / sizeof d->reserved[0]))] =
            -1 - (int64_t)u8(r);
        break;
    case BAD_ENUM:
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse(r, 0, &d->reserved_flags, &d->layout_per_head, &d->block_size);
            break;
        }
        switch (pick(r, 4)) {
        case 0: d->align = (attn_align)(2 + pick(r, 9)); break;
        case 1: d->mask_mode = (attn_mask_mode)(3 + pick(r, 9)); break;
        case 2: d->key_padding_mode = (attn_mask_mode)(-1 - (int)pick(r, 9)); break;
        default: d->weights = (attn_weights_mode)(3 + pick(r, 9)); break;
        }
        break;
    case BAD_SIZE_NONPOS: {
        int64_t *s[] = { &d->embed_dim, &d->num_heads, &d->num_kv_heads, &d->kdim, &d->vdim, &d->batch, &d->q_len, &d->kv_len };
        *s[pick(r, 8)] = -(int64_t)pick(r, 3);
        if (u8(r) & 1) d->embed_dim = E + 1 + pick(r, (unsigned)H); /* E % H (maybe) */
        break;
    }
    case BAD_SIZE_HUGE: {
        int64_t *s[] = { &d->embed_dim, &d->kdim, &d->vdim, &d->batch, &d->q_len, &d->kv_len };
        unsigned which = pick(r, 6);
        *s[which] = huge_sizes[pick(r, 8)];
        if (which == 0) { d->num_heads = 1; d->num_kv_heads = 0; }
        if (which == 4 && d->self_attention) d->kv_len = d->q_len;
        C->huge = 1;
        break;
    }
    case BAD_HEAD_RATIO: d->num_kv_heads = d->num_heads < 64 ? d->num_heads + 1 + pick(r, 3) : 7; break;
    case BAD_STRIDE_NEG: *strides[pick(r, 4)] = -1 - (int64_t)u8(r); break;
    case BAD_STRIDE_ZERO: /* zero on a size > 1 mask/bias dim is broadcast (valid); packed/self mismatch instead */
        if (u8(r) & 1) d->packed_in_proj = 1; else d->self_attention = 1;
        break;
    case BAD_STRIDE_SHORT: {
        int64_t *s = strides[pick(r, 4)];
        int64_t w = s == &d->key_stride ? kdim : s == &d->value_stride ? vdim : E;
        if (w > 1 || pick(r, 2)) *s = w - 1 > 0 ? w - 1 : 0;
        if (*s == 0 && d->mask_mode) d->mask.seq = S > 1 ? S - 1 : d->mask.seq;
        break;
    }
    case BAD_STRIDE_UNSET:
        if (!d->use_bias && (u8(r) & 1)) d->use_bias = 1;
        else if (!d->mask_mode) d->mask_mode = ATTN_MASK_DROP_NONZERO;
        if (d->use_bias) d->bias.seq = ATTN_STRIDE_UNSET; else d->mask.head = ATTN_STRIDE_UNSET;
        break;
    case BAD_SCALE_INF: d->scale = (u8(r) & 1) ? INFINITY : -INFINITY; break;
    case BAD_THREADS_: d->threads = (u8(r) & 1) ? -1 - (int)pick(r, 5) : 1025 + (int)u8(r); break;
    case BAD_STRIDE_HUGE: *strides[pick(r, 4)] = (int64_t)INT32_MAX + 1 + (int64_t)u8(r) * (u8(r) & 1 ? 1 : (int64_t)1 << 30); break;
    case BAD_OUT_OVERLAP: /* no output views in MHA: nonzero key padding etc. */
        d->kv_len = S + 1 + pick(r, 2);
        break;
    default: break;
    }
}

/* The plan-time plants and the plan's expected status; 1 when the
 * problem is valid and small (its sizes as decoded). */
static int mha_plant_plan(rd *r, mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const int64_t E = C->E, H = C->H;
    for (int k = 0; k < 2; k++)
        mha_plant_plan1(r, C, C->bad[k]);
    if (C->ty.bad == XB_TYPE)
        mha16_plant_type(r, C);
    C->pe = expect_mha_plan(d);
    if (C->huge)
        C->pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_mha(d, C->bad, C->t2, C->train);
    return C->pe.must == 0 && !C->huge && d->embed_dim == E && d->batch == C->B &&
           d->num_heads == H && (d->num_kv_heads ? d->num_kv_heads : H) == C->Hkv &&
           d->q_len == C->L && d->kv_len == C->S && (d->kdim ? d->kdim : E) == C->kdim &&
           (d->vdim ? d->vdim : E) == C->vdim;
}

/* An invalid or too large problem: plan only (with the training sizes). */
static void mha_plan_only(const mha_case *C)
{
    attn_mha_plan *plan = NULL;
    attn_status st = attn_mha_plan_create(&plan, &C->d);
    check_status("attn_mha_plan_create", st, C->pe);
    counts[N_MHA_PLAN_ONLY]++;
    if (st == ATTN_OK) {
        size_t ws = 0;
        if (attn_mha_workspace_size(plan, &ws) != ATTN_OK)
            FAIL("attn_mha_workspace_size failed");
        if (C->train) {
            /* TOO_LARGE: "a plan whose forward fits but whose context
             * or backward workspace is not representable" (both) */
            size_t cxb = 0, bwb = 0;
            const attn_status s1 = attn_mha_context_size(plan, &cxb);
            const attn_status s2 = attn_mha_bwd_workspace_size(plan, &bwb);
            if ((s1 != ATTN_OK && !(C->huge && s1 == ATTN_ERR_TOO_LARGE)) || s2 != s1)
                FAIL("attn_mha_context_size %s, attn_mha_bwd_workspace_size %s",
                     st_name(s1), st_name(s2));
        }
    } else if (plan) {
        FAIL("plan set on error");
    }
    attn_mha_plan_destroy(plan);
}

/* -------------------------------------------------------------- inputs */

/* A region of rows x width at stride, placed in the pool (may overlap). */
static int mha_region(rd *r, mha_case *C, size_t *len, int64_t rows, int64_t width,
                      int64_t stride)
{
    C->rg[C->nr] = (mha_reg){ place(r, len, (size_t)((rows - 1) * stride + width), 1), rows,
                              width, stride };
    return C->nr++;
}

/* Every float input in one pool, regions may overlap (no tail, as for
 * SDPA): x, key, value, the projections and biases, the bias. */
static void mha_place_inputs(rd *r, mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const int64_t B = C->B, L = C->L, S = C->S, E = C->E, kdim = C->kdim, vdim = C->vdim;
    const int64_t kvE = C->Hkv * C->dh;
    const int64_t xs = d->x_stride ? d->x_stride : E, ks = d->key_stride ? d->key_stride : kdim,
                  vs = d->value_stride ? d->value_stride : vdim;
    size_t len = 0;
    C->ix = mha_region(r, C, &len, B * L, E, xs);
    C->ik = C->iv = -1;
    if (!d->self_attention) {
        C->ik = mha_region(r, C, &len, B * S, kdim, ks);
        C->iv = mha_region(r, C, &len, B * S, vdim, vs);
    }
    C->iw1 = C->iw2 = C->ib0 = C->ib1 = C->ib2 = C->ibo = -1;
    if (d->packed_in_proj) {
        C->iw0 = mha_region(r, C, &len, 3 * E, E, E);
        if (d->has_bias)
            C->ib0 = mha_region(r, C, &len, 1, 3 * E, 3 * E);
    } else {
        C->iw0 = mha_region(r, C, &len, E, E, E);
        C->iw1 = mha_region(r, C, &len, kvE, kdim, kdim);
        C->iw2 = mha_region(r, C, &len, kvE, vdim, vdim);
        if (d->has_bias) {
            C->ib0 = mha_region(r, C, &len, 1, E, E);
            C->ib1 = mha_region(r, C, &len, 1, kvE, kvE);
            C->ib2 = mha_region(r, C, &len, 1, kvE, kvE);
        }
    }
    C->iwo = mha_region(r, C, &len, E, E, E);
    if (d->has_bias)
        C->ibo = mha_region(r, C, &len, 1, E, E);
    int64_t ebias = d->use_bias ? view_extent(&d->bias, C->szm, S) : 0;
    if (d->use_bias)
        C->bias_off = place(r, &len, (size_t)ebias, 1);
    C->pool_len = len;
    C->pool = xmalloc(C->pool_len * sizeof(float));
}

/* What is read: every region's rows (need 1), the bias and mask entries
 * a query sees through lengths, window and the sparse fields (need 2,
 * mneed). */
static void mha_mark_read(const mha_case *C, uint8_t *need, uint8_t *mneed)
{
    const attn_mha_desc *d = &C->d;
    const sparse_buf *sb = &C->sb;
    const int64_t B = C->B, L = C->L, S = C->S;
    for (int i = 0; i < C->nr; i++)
        for (int64_t row = 0; row < C->rg[i].rows; row++)
            for (int64_t x = 0; x < C->rg[i].width; x++)
                need[C->rg[i].off + (size_t)(row * C->rg[i].stride + x)] |= 1;
    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? C->kv_lens[b] : S;
        const int64_t qlen = d->use_q_lens ? C->q_lens[b] : L;
        for (int64_t h = 0; h < C->H; h++)
            for (int64_t i = 0; i < qlen; i++)
                for (int64_t j = 0; j < klen; j++) {
                    int64_t diag = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? i + klen - qlen : i;
                    int vis = !((d->window_left >= 0 && diag - j > d->window_left) ||
                                (d->window_right >= 0 && j - diag > d->window_right));
                    /* attn.h, "Sparse attention" (global tokens, layout) */
                    if ((sb->gk && sb->gk[b * S + j]) || (sb->gq && sb->gq[b * L + i]))
                        vis = 1;
                    if (vis && sb->lay)
                        vis = sb->lay[((C->sc.lph ? h : 0) * sb->nb + i / C->sc.bs) * sb->mb + j / C->sc.bs] != 0;
                    if (!vis)
                        continue;
                    if (d->use_bias)
                        need[C->bias_off + (size_t)(b * d->bias.batch + h * d->bias.head + i * d->bias.seq + j)] |= 2;
                    if (d->mask_mode)
                        mneed[(size_t)(b * d->mask.batch + h * d->mask.head + i * d->mask.seq + j)] = 1;
                }
    }
}

/* The values: random where read (-inf in some bias entries), NaN where
 * never read; the masks of a decoded density, garbage where unread; the
 * sparse flags and layout (a valid plan: as decoded). */
static void mha_fill_inputs(rd *r, mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const int64_t B = C->B, S = C->S;
    uint8_t *need = calloc(C->pool_len + 1, 1);
    if (!need)
        abort();
    int64_t emask = d->mask_mode ? view_extent(&d->mask, C->szm, S) : 0;
    C->mlen = (size_t)emask;
    C->mpool = xmalloc(C->mlen);
    uint8_t *mneed = calloc(C->mlen + 1, 1);
    if (!mneed)
        abort();
    if (C->sparse) {
        prng gs = { u32(r) ^ 0x2545f4914f6cdd1dull };
        sparse_make(&C->sb, &C->sc, &gs, B, C->H, C->L, S);
    }
    mha_mark_read(C, need, mneed);
    prng gv = { u32(r) };
    unsigned vopt = u8(r);
    const double mag = (vopt & 1) ? 2.0 : 0.5;
    const double ninf = (vopt & 2) ? 0.25 : 0.0;
    const double keep = (vopt >> 2 & 3) == 0 ? 1.0 : (vopt >> 2 & 3) * 0.3;
    for (size_t i = 0; i < C->pool_len; i++) {
        if (!need[i])
            C->pool[i] = NAN;
        else if (need[i] == 2 && pr_unit(&gv) < ninf)
            C->pool[i] = -INFINITY;
        else
            C->pool[i] = pr_val(&gv, mag);
    }
    const int keepv = d->mask_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (size_t i = 0; i < C->mlen; i++) {
        if (mneed[i]) {
            int vis = pr_unit(&gv) < keep;
            C->mpool[i] = (uint8_t)((vis == keepv) ? 1 + pr_next(&gv) % 255 : 0);
        } else {
            C->mpool[i] = (uint8_t)pr_next(&gv);
        }
    }
    C->kpm = xmalloc((size_t)(B * S)); /* exact size, for ASan */
    const int kkeep = d->key_padding_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (int64_t i = 0; i < B * S; i++) {
        int vis = pr_unit(&gv) < (keep < 1.0 ? 0.8 : 1.0);
        C->kpm[i] = (uint8_t)((vis == kkeep) ? 1 + pr_next(&gv) % 255 : 0);
    }
    free(need);
    free(mneed);
}

/* The weights and args into the pool, out (and weights) in
 * sentinel-filled buffers. */
static void mha_make_args(rd *r, mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const int64_t B = C->B, L = C->L, S = C->S, E = C->E, H = C->H;
    const int64_t os = d->out_stride ? d->out_stride : E;
    float *pool = C->pool;
    const mha_reg *rg = C->rg;
    attn_mha_weights *w = &C->w;
    attn_mha_args *a = &C->a;
    memset(w, 0, sizeof *w);
    if (d->packed_in_proj) {
        w->in_proj_weight = pool + rg[C->iw0].off;
        if (d->has_bias)
            w->in_proj_bias = pool + rg[C->ib0].off;
    } else {
        w->q_weight = pool + rg[C->iw0].off;
        w->k_weight = pool + rg[C->iw1].off;
        w->v_weight = pool + rg[C->iw2].off;
        if (d->has_bias) {
            w->q_bias = pool + rg[C->ib0].off;
            w->k_bias = pool + rg[C->ib1].off;
            w->v_bias = pool + rg[C->ib2].off;
        }
    }
    w->out_weight = pool + rg[C->iwo].off;
    if (d->has_bias)
        w->out_bias = pool + rg[C->ibo].off;
    memset(a, 0, sizeof *a);
    a->x = pool + rg[C->ix].off;
    if (!d->self_attention) {
        a->key = pool + rg[C->ik].off;
        a->value = pool + rg[C->iv].off;
    }
    if (d->use_kv_lens)
        a->kv_lens = C->kv_lens;
    if (d->use_q_lens)
        a->q_lens = C->q_lens;
    if (d->mask_mode)
        a->mask = C->mpool;
    if (d->use_bias)
        a->bias = pool + C->bias_off;
    if (d->key_padding_mode)
        a->key_padding_mask = C->kpm;
    a->global_k = C->sb.gk;
    a->global_q = C->sb.gq;
    a->layout = C->sb.lay;
    {
        const int64_t sz[3] = { 1, 1, B * L };
        attn_view v = { 0, 0, os };
        obuf_make(&C->ob, r, &v, sz, E, (B * L - 1) * os + E);
        a->out = C->ob.ptr;
    }
    if (d->weights) {
        const int64_t hh = d->weights == ATTN_WEIGHTS_PER_HEAD ? H : 1;
        const int64_t sz[3] = { B, hh, L };
        attn_view v = { hh * L * S, L * S, S };
        C->ow.count = 0;
        obuf_make(&C->ow, r, &v, sz, S, B * hh * L * S);
        /* the weights are contiguous: no offset */
        a->weights = C->ow.ptr;
    }
}

/* One exec-time invalid field of kind bad (train_forward: the
 * workspace's, or the context's, as decoded). */
static void mha_plant_exec1(rd *r, mha_case *C, unsigned bad)
{
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[64];
    static float junk_f[64];
    attn_mha_desc *d = &C->d;
    attn_mha_weights *w = &C->w;
    attn_mha_args *a = &C->a;
    const int train = C->train;
    switch (bad) {
    case BAD_PTR_NULL: {
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse_null(r, &a->global_k, &a->global_q, &a->layout);
            break;
        }
        const void **p[] = { (const void **)&w->in_proj_weight, (const void **)&w->in_proj_bias,
                             (const void **)&w->q_weight, (const void **)&w->k_weight,
                             (const void **)&w->v_weight, (const void **)&w->q_bias,
                             (const void **)&w->k_bias, (const void **)&w->v_bias,
                             (const void **)&w->out_weight, (const void **)&w->out_bias,
                             (const void **)&a->x, (const void **)&a->key, (const void **)&a->value,
                             (const void **)&a->out, (const void **)&a->kv_lens, (const void **)&a->q_lens,
                             (const void **)&a->mask, (const void **)&a->bias,
                             (const void **)&a->key_padding_mask, (const void **)&a->weights };
        *p[pick(r, 20)] = NULL;
        break;
    }
    case BAD_PTR_EXTRA:
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse_extra(r, d->use_global_k, d->use_global_q, d->block_size, junk_u8,
                               &a->global_k, &a->global_q, &a->layout);
            break;
        }
        switch (pick(r, 8)) {
        /* only pointers the plan does not use */
        case 0: if (!d->use_kv_lens) a->kv_lens = zero_lens; break;
        case 1: if (d->self_attention) a->key = junk_f; break;
        case 2: if (!d->mask_mode) a->mask = junk_u8; break;
        case 3: if (!d->key_padding_mode) a->key_padding_mask = junk_u8; break;
        case 4: if (!d->weights) a->weights = junk_f; break;
        case 5: if (!d->packed_in_proj) w->in_proj_weight = junk_f; break;
        case 6: if (d->packed_in_proj || !d->has_bias) w->q_bias = junk_f; break;
        default: if (!d->has_bias) w->out_bias = junk_f; break;
        }
        break;
    case BAD_LENGTH_: {
        unsigned b = pick(r, (unsigned)C->B);
        if (u8(r) & 1) { C->kv_lens[b] = bad_length(r, C->S); if (!a->kv_lens) { d->use_kv_lens = 1; a->kv_lens = C->kv_lens; } }
        else { C->q_lens[b] = bad_length(r, C->L); if (!a->q_lens) { d->use_q_lens = 1; a->q_lens = C->q_lens; } }
        break;
    }
    case BAD_WS_SMALL:
        if (train && (u8(r) & 1)) C->cx_small = 1; else C->ws_small = 1;
        break;
    case BAD_WS_MISALIGNED:
        if (train && (u8(r) & 1)) C->cx_mis = 1; else C->ws_mis = 1;
        break;
    case BAD_NULL_TOP:
        C->null_top = 1 + (int)pick(r, 4);
        if (train && C->null_top == 4) { /* NULL context instead of a NULL desc */
            C->cx_null = 1;
            C->null_top = 0;
        }
        break;
    default: break;
    }
}

/* ------------------------------------------------------------------ run */

/* The plan (valid), the workspace size and the training context (exact
 * or larger, NaN-filled, or bad), copies of the inputs. */
static void mha_prepare(rd *r, mha_case *C)
{
    C->inputs_copy = xmalloc(C->pool_len * sizeof(float));
    memcpy(C->inputs_copy, C->pool, C->pool_len * sizeof(float));
    C->mcopy = xmalloc(C->mlen);
    memcpy(C->mcopy, C->mpool, C->mlen);
    C->wsel = u8(r);
    obuf_clear(&C->ob);
    if (C->ow.base)
        obuf_clear(&C->ow);
    attn_status st = attn_mha_plan_create(&C->plan, &C->d);
    check_status("attn_mha_plan_create", st, C->pe);
    if (st != ATTN_OK)
        FAIL("valid MHA plan failed: %s", st_name(st));
    if (attn_mha_workspace_size(C->plan, &C->need_ws) != ATTN_OK)
        FAIL("attn_mha_workspace_size failed");
    /* train_forward's context: exact or larger, NaN-filled (or bad) */
    if (C->train) {
        if (attn_mha_context_size(C->plan, &C->need_cx) != ATTN_OK)
            FAIL("attn_mha_context_size failed on a small plan");
        wsp_make(&C->cx, 1 + (C->wsel >> 4 & 1), C->need_cx, C->cx_small, C->cx_mis);
        C->cx_copy = xmalloc(C->cx.alloc);
        memcpy(C->cx_copy, C->cx.raw, C->cx.alloc);
    }
}

/* The call: NULL plan, weights, args or desc; else attn_mha_execute or
 * attn_mha_train_execute with a workspace choice, the status checked. */
static attn_status mha_run(mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const attn_mha_plan *plan = C->plan;
    const attn_mha_weights *w = &C->w;
    const attn_mha_args *a = &C->a;
    const wsp *cx = &C->cx;
    attn_status st;
    if (C->null_top) {
        const int null_top = C->null_top;
        if (C->train)
            st = null_top == 1 ? attn_mha_train_execute(NULL, w, a, cx->ptr, cx->bytes, NULL, 0)
               : null_top == 2 ? attn_mha_train_execute(plan, NULL, a, cx->ptr, cx->bytes, NULL, 0)
                               : attn_mha_train_execute(plan, w, NULL, cx->ptr, cx->bytes, NULL, 0);
        else
            st = null_top == 1 ? attn_mha_execute(NULL, w, a, NULL, 0)
               : null_top == 2 ? attn_mha_execute(plan, NULL, a, NULL, 0)
               : null_top == 3 ? attn_mha_execute(plan, w, NULL, NULL, 0)
                               : attn_mha_plan_create(NULL, d);
        if (st != ATTN_ERR_NULL_ARGUMENT)
            FAIL("NULL plan/weights/args: got %s", st_name(st));
        return st;
    }
    wsp w1;
    wsp_make(&w1, C->wsel & 3, C->need_ws, C->ws_small, C->ws_mis);
    expect ee = expect_mha_exec(d, w, a, w1.ptr, w1.bytes, C->need_ws);
    if (C->ws_small && C->need_ws == 0)
        ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    if (C->train) {
        void *cxp = C->cx_null ? NULL : cx->ptr;
        expect_context(&ee, cxp, cx->bytes, C->need_cx);
        st = attn_mha_train_execute(plan, w, a, cxp, cx->bytes, w1.ptr, w1.bytes);
        check_status("attn_mha_train_execute", st, ee);
    } else {
        st = attn_mha_execute(plan, w, a, w1.ptr, w1.bytes);
        check_status("attn_mha_execute", st, ee);
    }
    free(w1.raw);
    return st;
}

/* ---------------------------------------------------------------- check */

/* out and weights against the float64 reference; the sentinel outside. */
static void mha_check_results(const mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const attn_mha_args *a = &C->a;
    const int64_t B = C->B, L = C->L, S = C->S, E = C->E, H = C->H;
    const int64_t os = d->out_stride ? d->out_stride : E;
    mref_out mo;
    memset(&mo, 0, sizeof mo);
    const size_t ny = (size_t)(B * L * E), np = (size_t)(B * H * L * S);
    mo.y = xmalloc(ny * sizeof(double));
    mo.y_tol = xmalloc(ny * sizeof(double));
    if (d->weights == ATTN_WEIGHTS_PER_HEAD) {
        mo.p = xmalloc(np * sizeof(double));
        mo.p_tol = xmalloc(np * sizeof(double));
    } else if (d->weights == ATTN_WEIGHTS_AVERAGED) {
        mo.avg = xmalloc((size_t)(B * L * S) * sizeof(double));
        mo.avg_tol = xmalloc((size_t)(B * L * S) * sizeof(double));
    }
    mref_round rnd;
    mha16_round(d, &rnd);
    if (mref_mha_typed(d, &C->wf, &C->af, &mo, &rnd))
        abort();
    const uint16_t *o16 = C->ob16.ptr;
    for (int64_t row = 0; row < B * L; row++)
        for (int64_t e = 0; e < E; e++) {
            const int64_t at = row * os + e;
            const double y = o16 ? widen16(d->x_type, o16[at]) : a->out[at];
            const double ref = mo.y[row * E + e];
            if (!(fabs(y - ref) <= mo.y_tol[row * E + e]))
                FAIL("MHA out[row %lld][%lld] = %.9g, reference %.9g, tol %.3g", (long long)row,
                     (long long)e, y, ref, mo.y_tol[row * E + e]);
        }
    const double *ref = mo.p ? mo.p : mo.avg, *tol = mo.p ? mo.p_tol : mo.avg_tol;
    const size_t nw = mo.p ? np : (size_t)(B * L * S);
    for (size_t i = 0; ref && i < nw; i++)
        if (!(fabs((double)a->weights[i] - ref[i]) <= tol[i]))
            FAIL("MHA weights[%zu] = %.9g, reference %.9g, tol %.3g", i, (double)a->weights[i],
                 ref[i], tol[i]);
    obuf_outside(&C->ob, "out");
    if (o16)
        obuf16_outside(&C->ob16, "out");
    if (C->ow.base)
        obuf_outside(&C->ow, "weights");
    free(mo.y);
    free(mo.y_tol);
    free(mo.p);
    free(mo.p_tol);
    free(mo.avg);
    free(mo.avg_tol);
}

/* After the call: the inputs unchanged; on error nothing written, nor the
 * context (0); on success the reference's bounds (1). */
static int mha_check(mha_case *C, attn_status st)
{
    const attn_mha_desc *d = &C->d;
    if (memcmp(C->inputs_copy, C->pool, C->pool_len * sizeof(float)) ||
        memcmp(C->mcopy, C->mpool, C->mlen) || !mha16_pools_same(C))
        FAIL("an MHA input was modified");
    mha16_junk_untouched("attn_mha_execute");
    const int typed = d->x_type || d->w_type;
    if (st != ATTN_OK) {
        counts[C->train ? N_TRAIN_ERROR : N_MHA_ERROR]++;
        counts[N_MHA16_ERROR] += typed;
        obuf_untouched(&C->ob, "out", st_name(st));
        if (C->ob16.base)
            obuf16_untouched(&C->ob16, "out", st_name(st));
        if (C->ow.base)
            obuf_untouched(&C->ow, "weights", st_name(st));
        if (C->train && memcmp(C->cx_copy, C->cx.raw, C->cx.alloc))
            FAIL("attn_mha_train_execute: %s, but the context was written", st_name(st));
        return 0;
    }
    counts[C->train ? N_TRAIN_CHECKED : N_MHA_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_MHA_CHECKED]++;
    if (C->sparse)
        counts[N_SPARSE_MHA_CHECKED]++;
    counts[N_MHA16_CHECKED] += typed;
    counts[N_MHA16_BF16] += mha16_bf(d);
    mha_check_results(C);
    return 1;
}

/* Another thread count, another workspace: bitwise equal (execute, also
 * after train_forward: "Y bitwise as attn_mha_execute"). */
static void mha_rerun(mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    const int t2 = C->t2;
    attn_status st;
    float *so = obuf_snap(&C->ob), *sw = obuf_snap(&C->ow);
    uint16_t *so16 = obuf16_snap(&C->ob16);
    attn_mha_desc d2 = *d;
    d2.threads = t2;
    char note[256];
    snprintf(note, sizeof note, "%s%s",
             C->train ? " (attn_mha_train_execute, then attn_mha_execute)" : "",
             drop_zero_reset(d2.dropout_p, &d2.dropout_seed, &d2.dropout_offset));
    obuf_clear(&C->ob);
    if (C->ow.base)
        obuf_clear(&C->ow);
    if (so16)
        obuf16_clear(&C->ob16);
    attn_mha_plan *plan2 = NULL;
    if ((st = attn_mha_plan_create(&plan2, &d2)) != ATTN_OK)
        FAIL("MHA plan with %d threads: %s", t2, st_name(st));
    size_t need2 = 0;
    attn_mha_workspace_size(plan2, &need2);
    wsp w2;
    wsp_make(&w2, (C->wsel >> 2) % 3, need2, 0, 0);
    if ((st = attn_mha_execute(plan2, &C->w, &C->a, w2.ptr, w2.bytes)) != ATTN_OK)
        FAIL("MHA execute with %d threads: %s", t2, st_name(st));
    attn_mha_plan_destroy(plan2);
    free(w2.raw);
    obuf_same(&C->ob, so, "out", d->threads, t2, note);
    if (C->ow.base)
        obuf_same(&C->ow, sw, "weights", d->threads, t2, note);
    obuf16_same(&C->ob16, so16, "out", d->threads, t2, note);
    free(so);
    free(sw);
    free(so16);
}

static void mha_case_free(mha_case *C)
{
    attn_mha_plan_destroy(C->plan);
    free(C->cx.raw);
    free(C->cx_copy);
    free(C->inputs_copy);
    free(C->mcopy);
    free(C->pool);
    free(C->mpool);
    free(C->kpm);
    sparse_free(&C->sb);
    obuf_free(&C->ob);
    obuf_free(&C->ow);
    obuf16_free(&C->ob16);
    free(C->px);
    free(C->pw);
}

/* ----------------------------------------------------------------- kind */

void fuzz_mha(rd *r, unsigned sel)
{
    mha_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    /* decode */
    mha_decode_sizes(r, sel, C);
    mha_decode_options(r, sel, C);
    /* plant (plan-time fields) */
    if (!mha_plant_plan(r, C)) {
        mha_plan_only(C);
        free(C);
        return;
    }
    /* plant (NaN where never read), the buffers, exec-time fields */
    mha_place_inputs(r, C);
    mha_fill_inputs(r, C);
    mha16_pools(C);
    mha_make_args(r, C);
    mha16_args(C);
    for (int k = 0; k < 2; k++)
        mha_plant_exec1(r, C, C->bad[k]);
    if (!C->train) { /* (training: in the backward) */
        const mha16_site s = { &C->w, &C->a, &C->w16, &C->a16, NULL, NULL, NULL };
        mha16_plant(r, &C->d, C->ty.bad, &s);
    }
    /* run */
    mha_prepare(r, C);
    const attn_status st = mha_run(C);
    /* check */
    if (mha_check(C, st)) {
        mha_rerun(C);
        mha16_twin(C);
        if (C->train) {
            const mha_prob M = { &C->d, &C->w, &C->a, &C->wf, &C->af, C, C->pool, C->pool_len,
                                 C->mpool, C->mlen, &C->ob, &C->ow, &C->ob16, C->cx.ptr,
                                 C->cx.bytes, C->need_cx, C->t2, C->sparse };
            fuzz_mha_train(r, &M, C->plan);
        }
    }
    mha_case_free(C);
    free(C);
}
