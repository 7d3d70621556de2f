/* The MHA layer's plan: defaults, validation, the projections' and the
 * SDPA plans, and the workspace and context layouts (mha.h). */
#include "mha/mha.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_status attn_mha_desc_init(attn_mha_desc *desc)
{
    if (!desc)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(desc, 0, sizeof *desc);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    desc->mask = desc->bias = unset;
    desc->has_bias = 1;
    desc->scale = NAN;
    desc->align = ATTN_ALIGN_TOP_LEFT;
    desc->window_left = desc->window_right = -1;
    desc->mask_mode = ATTN_MASK_NONE;
    desc->key_padding_mode = ATTN_MASK_NONE;
    desc->weights = ATTN_WEIGHTS_NONE;
    return ATTN_OK;
}

/* Row stride of a [rows][width] matrix: 0 means width. */
static attn_status row_stride(int64_t stride, int64_t width, int64_t rows, int64_t *out)
{
    if (stride == 0)
        stride = width;
    if (stride < width)
        return ATTN_ERR_BAD_STRIDE;
    if (stride > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    uint64_t ext;
    if (__builtin_mul_overflow((uint64_t)(rows - 1), (uint64_t)stride, &ext) ||
        __builtin_add_overflow(ext, (uint64_t)width, &ext) ||
        ext > SIZE_MAX / sizeof(float) / 4)
        return ATTN_ERR_TOO_LARGE;
    *out = stride;
    return ATTN_OK;
}

/* Q, K, V of elements of es bytes in a carver: one [B*L][3E] block when
 * fused (K and V E and 2E elements into its rows), else [B*L][E] and two
 * [B*S][Hkv*dh]. */
static void carve_qkv(const attn_mha_plan *p, attn_carver *c, size_t es, size_t *q, size_t *k,
                      size_t *v, int *ok)
{
    const uint64_t BL = (uint64_t)p->B * (uint64_t)p->L, BS = (uint64_t)p->B * (uint64_t)p->S;
    const uint64_t E = (uint64_t)p->E;
    if (p->fused_qkv) {
        *q = attn_carve(c, attn_size_mul(BL, 3 * E, ok), es);
        *k = *q + (size_t)p->E * es;
        *v = *q + 2 * (size_t)p->E * es;
    } else {
        *q = attn_carve(c, attn_size_mul(BL, E, ok), es);
        *k = attn_carve(c, attn_size_mul(BS, (uint64_t)p->kvE, ok), es);
        *v = attn_carve(c, attn_size_mul(BS, (uint64_t)p->kvE, ok), es);
    }
}

/* The 16-bit backward's blocks (mha.h), after the fp32 backward's. */
static void carve_bwd16(attn_mha_plan *p, attn_carver *bw, int *ok)
{
    const attn_mha_desc *d = &p->d;
    const uint64_t BL = (uint64_t)p->B * (uint64_t)p->L, BS = (uint64_t)p->B * (uint64_t)p->S;
    const uint64_t E = (uint64_t)p->E, kvE = (uint64_t)p->kvE;
    const int cross = !d->self_attention;
    if (p->bf) {
        p->bw_do16 = attn_carve(bw, attn_size_mul(BL, E, ok), sizeof(uint16_t));
        carve_qkv(p, bw, sizeof(uint16_t), &p->bw_q16, &p->bw_k16, &p->bw_v16, ok);
        p->bw_o32 = attn_carve(bw, attn_size_mul(BL, E, ok), sizeof(float));
    }
    if (p->x16) {
        const uint64_t rows[3] = { BL, cross ? BS : 0, cross ? BS : 0 };
        const uint64_t width[3] = { E, (uint64_t)p->kdim, (uint64_t)p->vdim };
        for (int t = 0; t < 3; t++) {
            p->bw_x[t] = attn_carve(bw, attn_size_mul(rows[t], width[t], ok), sizeof(float));
            p->bw_gx[t] = attn_carve(bw, attn_size_mul(rows[t], width[t], ok), sizeof(float));
        }
        p->bw_dy = attn_carve(bw, attn_size_mul(BL, E, ok), sizeof(float));
    }
    if (p->w16) {
        /* as the forward widens them: in_proj as one block when packed */
        const int packed = d->packed_in_proj;
        const uint64_t count[4] = { attn_size_mul(packed ? 3 * E : E, E, ok),
                                    packed ? 0 : attn_size_mul(kvE, (uint64_t)p->kdim, ok),
                                    packed ? 0 : attn_size_mul(kvE, (uint64_t)p->vdim, ok),
                                    attn_size_mul(E, E, ok) };
        for (int m = 0; m < 4; m++) {
            p->bw_w[m] = attn_carve(bw, count[m], sizeof(float));
            p->bw_gw[m] = attn_carve(bw, count[m], sizeof(float));
        }
        p->bw_gb = attn_carve(bw, d->has_bias ? 2 * E + 2 * kvE : 0, sizeof(float));
    }
}

/* The context and backward workspace layouts, and the SDPA plans of
 * training: the forward's with the logsumexp, and the backward's (the
 * forward's views; dO, dQ, dK, dV laid out as O, Q, K, V). */
static attn_status plan_training(attn_mha_plan *p, const attn_sdpa_desc *sd)
{
    int ok = 1;
    const uint64_t BL = (uint64_t)p->B * (uint64_t)p->L;
    const uint64_t E = (uint64_t)p->E;
    /* Q, K, V, O of the context: BF16 with BF16 products, else fp32. */
    const size_t es = p->bf ? sizeof(uint16_t) : sizeof(float);
    attn_carver cx = ATTN_CARVER_INIT, bw = ATTN_CARVER_INIT;
    carve_qkv(p, &cx, es, &p->cx_q, &p->cx_k, &p->cx_v, &ok);
    carve_qkv(p, &bw, sizeof(float), &p->bw_q, &p->bw_k, &p->bw_v, &ok);
    p->cx_o = attn_carve(&cx, attn_size_mul(BL, E, &ok), es);
    p->cx_lse = attn_carve(&cx, attn_size_mul(BL, (uint64_t)p->H, &ok), sizeof(float));
    p->bw_do = attn_carve(&bw, attn_size_mul(BL, E, &ok), sizeof(float));
    if (p->combine)
        p->bw_mask = attn_carve(&bw, attn_size_mul(attn_size_mul(BL, (uint64_t)p->S, &ok),
                                                  (uint64_t)p->mask_heads, &ok), 1);
    if (!ok || !cx.ok || !bw.ok)
        return ATTN_ERR_TOO_LARGE;

    attn_sdpa_desc tr = *sd;
    tr.want_probs = 0;
    tr.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    tr.want_lse = 1;
    tr.lse = (attn_view){ p->H * p->L, p->L, 1 };
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = tr;
    bd.d_o = sd->o;
    bd.dq = sd->q;
    bd.dk = sd->k;
    bd.dv = sd->v;
    /* The training forward's SDPA: the forward's, with the logsumexp. */
    tr.want_probs = sd->want_probs;
    tr.probs = sd->probs;
    attn_status st = attn_sdpa_plan_create(&p->sdpa_train, &tr);
    if (st != ATTN_OK)
        return st;
    if ((st = attn_sdpa_bwd_plan_create(&p->sdpa_bwd, &bd)) != ATTN_OK)
        return st;
    size_t sws;
    attn_sdpa_bwd_workspace_size(p->sdpa_bwd, &sws);
    p->bw_sdpa = attn_carve(&bw, sws, 1);
    /* Scratch per thread: a block of ATTN_MHA_ROWS rows of an input
     * gradient, or ATTN_MHA_WROWS rows of a weight gradient and its bias. */
    int64_t feat = p->E > p->kdim ? p->E : p->kdim;
    feat = feat > p->vdim ? feat : p->vdim;
    p->bw_thread = (size_t)attn_size_align(
        attn_size_mul(attn_size_mul(ATTN_MHA_ROWS, (uint64_t)feat, &ok), sizeof(float), &ok), &ok);
    p->bw_scratch = attn_carve(&bw, attn_size_mul(p->bw_thread, (uint64_t)p->x.nthreads, &ok), 1);
    carve_bwd16(p, &bw, &ok);
    if (!ok || !cx.ok || !bw.ok)
        return ATTN_ERR_TOO_LARGE;
    p->cx_bytes = (size_t)cx.size;
    p->bw_bytes = (size_t)bw.size;
    return ATTN_OK;
}

static attn_status validate(const attn_mha_desc *d)
{
    if (!attn_reserved_zero(d->reserved, sizeof d->reserved / sizeof d->reserved[0]) ||
        d->reserved_pad != 0 || !attn_engine_valid(d->engine))
        return ATTN_ERR_BAD_OPTION;
    /* (the quantized K/V types are the SDPA forward's only) */
    const attn_dtype types[2] = { d->x_type, d->w_type };
    const attn_status tst = attn_dtypes_check(types, 2);
    if (tst != ATTN_OK)
        return tst;
    if ((d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        !attn_mask_mode_valid(d->mask_mode) || !attn_mask_mode_valid(d->key_padding_mode) ||
        (d->weights != ATTN_WEIGHTS_NONE && d->weights != ATTN_WEIGHTS_PER_HEAD &&
         d->weights != ATTN_WEIGHTS_AVERAGED))
        return ATTN_ERR_BAD_OPTION;
    if (d->embed_dim <= 0 || d->num_heads <= 0 || d->num_kv_heads < 0 || d->kdim < 0 ||
        d->vdim < 0 || d->batch <= 0 || d->q_len <= 0 || d->kv_len <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (d->embed_dim % d->num_heads != 0)
        return ATTN_ERR_BAD_SIZE;
    if (d->self_attention && d->kv_len != d->q_len)
        return ATTN_ERR_BAD_SIZE;
    if (d->embed_dim > INT32_MAX || d->kdim > INT32_MAX || d->vdim > INT32_MAX ||
        d->q_len > INT32_MAX || d->kv_len > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    const int64_t Hkv = d->num_kv_heads ? d->num_kv_heads : d->num_heads;
    if (d->num_heads % Hkv != 0)
        return ATTN_ERR_HEAD_RATIO;
    const int64_t E = d->embed_dim;
    const int64_t kdim = d->kdim ? d->kdim : E, vdim = d->vdim ? d->vdim : E;
    if (d->packed_in_proj && (kdim != E || vdim != E || Hkv != d->num_heads))
        return ATTN_ERR_BAD_OPTION;
    if (d->self_attention && (kdim != E || vdim != E))
        return ATTN_ERR_BAD_OPTION;
    /* key_stride and value_stride are not used (and not checked) in
     * self-attention, as the key and value pointers are not. */
    if (d->x_stride < 0 || d->out_stride < 0 ||
        (!d->self_attention && (d->key_stride < 0 || d->value_stride < 0)))
        return ATTN_ERR_BAD_STRIDE;
    if (isinf(d->scale))
        return ATTN_ERR_BAD_SCALE;
    if (d->threads < 0 || d->threads > ATTN_MAX_THREADS)
        return ATTN_ERR_BAD_THREADS;
    if (!(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))  /* NaN too */
        return ATTN_ERR_BAD_OPTION;
    /* (the SDPA plan checks the rest of the sparse options) */
    if (d->reserved_flags != 0)
        return ATTN_ERR_BAD_OPTION;
    return ATTN_OK;
}

attn_status attn_mha_plan_create(attn_mha_plan **plan, const attn_mha_desc *desc)
{
    if (!plan || !desc)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = validate(desc);
    if (st != ATTN_OK)
        return st;
    const attn_mha_desc *d = desc;
    attn_mha_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ATTN_ERR_OUT_OF_MEMORY;
    p->d = *d;
    p->E = d->embed_dim;
    p->H = d->num_heads;
    p->Hkv = d->num_kv_heads ? d->num_kv_heads : d->num_heads;
    p->dh = p->E / p->H;
    p->kvE = p->Hkv * p->dh;
    p->kdim = d->kdim ? d->kdim : p->E;
    p->vdim = d->vdim ? d->vdim : p->E;
    p->B = d->batch;
    p->L = d->q_len;
    p->S = d->kv_len;
    /* Token counts, and the weights' byte counts (never formed elsewhere,
     * but a caller's weights must be representable). */
    int ok = 1;
    const uint64_t BL = attn_size_mul((uint64_t)p->B, (uint64_t)p->L, &ok);
    const uint64_t BS = attn_size_mul((uint64_t)p->B, (uint64_t)p->S, &ok);
    const uint64_t E = (uint64_t)p->E;
    attn_size_mul(attn_size_mul(3 * E, E, &ok), sizeof(float), &ok);
    attn_size_mul(attn_size_mul(E, (uint64_t)p->kdim, &ok), sizeof(float), &ok);
    attn_size_mul(attn_size_mul(E, (uint64_t)p->vdim, &ok), sizeof(float), &ok);
    if (!ok) {
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }
    if ((st = row_stride(d->x_stride, p->E, (int64_t)BL, &p->xs)) != ATTN_OK ||
        (st = row_stride(d->out_stride, p->E, (int64_t)BL, &p->os)) != ATTN_OK ||
        (!d->self_attention &&
         ((st = row_stride(d->key_stride, p->kdim, (int64_t)BS, &p->ks)) != ATTN_OK ||
          (st = row_stride(d->value_stride, p->vdim, (int64_t)BS, &p->vs)) != ATTN_OK))) {
        free(p);
        return st;
    }
    attn_exec_init(&p->x, d->engine, d->threads);
    p->fused_qkv = d->self_attention && d->packed_in_proj;
    p->combine = d->mask_mode != ATTN_MASK_NONE && d->key_padding_mode != ATTN_MASK_NONE;
    p->mask_heads = p->combine && d->mask.head != 0 ? p->H : 1;
    /* Element types: BF16 products when X and the weights are BF16 on the
     * tile engine (the SDPA takes no 16-bit Q with the sparse options);
     * otherwise 16-bit values are widened to fp32. */
    p->x16 = d->x_type != ATTN_DTYPE_F32;
    p->w16 = d->w_type != ATTN_DTYPE_F32;
    p->bf = d->x_type == ATTN_DTYPE_BF16 && d->w_type == ATTN_DTYPE_BF16 && p->x.tile &&
            !d->use_global_k && !d->use_global_q && d->block_size == 0;
    const uint64_t es = p->bf ? sizeof(uint16_t) : sizeof(float);

    /* Workspace: Q, K, V (one [B*L][3E] buffer when fused), O (BF16 with
     * BF16 products, else fp32), per-head weights to average, the combined
     * mask, the prepared weights and biases and the threads' scratch of
     * 16-bit types, then the SDPA workspace. */
    attn_carver total = ATTN_CARVER_INIT;
    if (p->fused_qkv) {
        p->ldq = p->ldk = p->ldv = 3 * p->E;
        p->off_q = attn_carve(&total, attn_size_mul(BL, 3 * E, &ok), es);
        p->off_k = p->off_q + (size_t)p->E * (size_t)es;
        p->off_v = p->off_q + 2 * (size_t)p->E * (size_t)es;
    } else {
        p->ldq = p->E;
        p->ldk = p->ldv = p->kvE;
        p->off_q = attn_carve(&total, attn_size_mul(BL, E, &ok), es);
        p->off_k = attn_carve(&total, attn_size_mul(BS, (uint64_t)p->kvE, &ok), es);
        p->off_v = attn_carve(&total, attn_size_mul(BS, (uint64_t)p->kvE, &ok), es);
    }
    p->off_o = attn_carve(&total, attn_size_mul(BL, E, &ok), es);
    /* Attention weights per head, [B][H][L][S]: the caller's output, or
     * the workspace block averaged from. */
    const uint64_t lsz = attn_size_mul(BL, (uint64_t)p->S, &ok);
    uint64_t hlsz = 0;
    if (d->weights != ATTN_WEIGHTS_NONE) {
        hlsz = attn_size_mul(lsz, (uint64_t)p->H, &ok);
        attn_size_mul(hlsz, sizeof(float), &ok);
    }
    if (d->weights == ATTN_WEIGHTS_AVERAGED)
        p->off_p = attn_carve(&total, hlsz, sizeof(float));
    if (p->combine)
        p->off_mask = attn_carve(&total, attn_size_mul(lsz, (uint64_t)p->mask_heads, &ok), 1);
    /* The weights as a call prepares them: W_q (or in_proj), W_k, W_v, W_o
     * ([rows][K] each); BF16 products: pair panels of ATTN_MHA_STRIP
     * columns per strip, ceil(K / 2) x STRIP pairs each (in_proj as one
     * panel of 3E rows when fused, else as three); widened: fp32 rows
     * (in_proj as one block whenever packed). */
    const uint64_t kvE = (uint64_t)p->kvE;
    const uint64_t wrows[4] = { p->fused_qkv ? 3 * E : E, p->fused_qkv ? 0 : kvE,
                                p->fused_qkv ? 0 : kvE, E };
    const uint64_t wk[4] = { E, (uint64_t)p->kdim, (uint64_t)p->vdim, E };
    for (int m = 0; m < 4; m++) {
        uint64_t count = 0, elem = sizeof(float);
        if (p->bf) {
            const uint64_t strips = (wrows[m] + ATTN_MHA_STRIP - 1) / ATTN_MHA_STRIP;
            count = attn_size_mul(attn_size_mul(strips, (wk[m] + 1) / 2, &ok), ATTN_MHA_STRIP,
                                  &ok);
            elem = sizeof(uint32_t);
        } else if (p->w16) {
            if (m == 0 && d->packed_in_proj)
                count = attn_size_mul(3 * E, E, &ok);
            else if (!(d->packed_in_proj && (m == 1 || m == 2)))
                count = attn_size_mul(wrows[m], wk[m], &ok);
        }
        p->off_w[m] = attn_carve(&total, count, elem);
    }
    p->off_b = attn_carve(&total, p->w16 && d->has_bias ? 2 * E + 2 * kvE : 0, sizeof(float));
    {
        uint64_t feat = (uint64_t)(p->kdim > p->vdim ? p->kdim : p->vdim);
        feat = feat > E ? feat : E;
        const uint64_t cols = p->bf ? ATTN_MHA_STRIP : p->x16 ? feat : 0;
        p->scr_thread = (size_t)attn_size_align(
            attn_size_mul(attn_size_mul(ATTN_MHA_ROWS, cols, &ok), sizeof(float), &ok), &ok);
        p->off_scr = attn_carve(&total, (uint64_t)p->x.nthreads, p->scr_thread);
    }
    if (!ok || !total.ok) {
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }

    attn_sdpa_desc sd;
    attn_sdpa_desc_init(&sd);
    sd.batch = p->B;
    sd.q_heads = p->H;
    sd.kv_heads = p->Hkv;
    sd.q_len = p->L;
    sd.kv_len = p->S;
    sd.qk_dim = sd.v_dim = p->dh;
    sd.q = (attn_view){ p->L * p->ldq, p->dh, p->ldq };
    sd.k = (attn_view){ p->S * p->ldk, p->dh, p->ldk };
    sd.v = (attn_view){ p->S * p->ldv, p->dh, p->ldv };
    sd.o = (attn_view){ p->L * p->E, p->dh, p->E };
    sd.scale = d->scale;
    sd.align = d->align;
    sd.window_left = d->window_left;
    sd.window_right = d->window_right;
    sd.use_kv_lens = d->use_kv_lens;
    sd.use_q_lens = d->use_q_lens;
    if (p->combine) {
        sd.mask_mode = ATTN_MASK_KEEP_NONZERO;
        sd.mask = (attn_view){ p->mask_heads * p->L * p->S, p->mask_heads > 1 ? p->L * p->S : 0, p->S };
    } else if (d->mask_mode != ATTN_MASK_NONE) {
        sd.mask_mode = d->mask_mode;
        sd.mask = d->mask;
    } else if (d->key_padding_mode != ATTN_MASK_NONE) {
        sd.mask_mode = d->key_padding_mode;
        sd.mask = (attn_view){ p->S, 0, 0 };
    }
    sd.use_bias = d->use_bias;
    sd.bias = d->bias;
    if (d->weights != ATTN_WEIGHTS_NONE) {
        sd.want_probs = 1;
        sd.probs = attn_view_bhsd(p->H, p->L, p->S);
    }
    sd.threads = p->x.nthreads;
    sd.engine = d->engine;
    /* Dropout: in this desc, so in the training forward's and (as its fwd)
     * the backward's, which regenerates the same keep mask. */
    sd.dropout_p = d->dropout_p;
    sd.dropout_seed = d->dropout_seed;
    sd.dropout_offset = d->dropout_offset;
    /* Sparse attention: global tokens and the layout, as given. */
    sd.use_global_k = d->use_global_k;
    sd.use_global_q = d->use_global_q;
    sd.block_size = d->block_size;
    sd.layout_per_head = d->layout_per_head;
    /* BF16 products: the SDPA reads Q, K, V and writes O as BF16. */
    if (p->bf)
        sd.q_type = sd.k_type = sd.v_type = sd.o_type = ATTN_DTYPE_BF16;
    /* The user's mask strides are checked here, by SDPA's own rules. */
    if (p->combine) {
        attn_sdpa_desc chk = sd;
        chk.mask_mode = d->mask_mode;
        chk.mask = d->mask;
        attn_sdpa_plan *tmp = NULL;
        st = attn_sdpa_plan_create(&tmp, &chk);
        attn_sdpa_plan_destroy(tmp);
        if (st != ATTN_OK) {
            free(p);
            return st;
        }
    }
    st = attn_sdpa_plan_create(&p->sdpa, &sd);
    if (st != ATTN_OK) {
        free(p);
        return st;
    }
    size_t sws;
    attn_sdpa_workspace_size(p->sdpa, &sws);
    p->off_sdpa = attn_carve(&total, sws, 1);
    if (!ok || !total.ok) {
        attn_sdpa_plan_destroy(p->sdpa);
        free(p);
        return ATTN_ERR_TOO_LARGE;
    }
    p->ws_bytes = (size_t)total.size;
    if ((st = plan_training(p, &sd)) != ATTN_OK) {
        attn_sdpa_bwd_plan_destroy(p->sdpa_bwd);
        attn_sdpa_plan_destroy(p->sdpa_train);
        p->sdpa_bwd = NULL;
        p->sdpa_train = NULL;
        /* A forward that fits stays usable; the training calls then
         * return ATTN_ERR_TOO_LARGE. */
        if (st != ATTN_ERR_TOO_LARGE) {
            attn_sdpa_plan_destroy(p->sdpa);
            free(p);
            return st;
        }
        p->no_training = 1;
    }
    /* The projections run on the engine the layer's attention runs on. */
    *plan = p;
    return ATTN_OK;
}

attn_status attn_mha_plan_destroy(attn_mha_plan *plan)
{
    if (plan) {
        attn_sdpa_bwd_plan_destroy(plan->sdpa_bwd);
        attn_sdpa_plan_destroy(plan->sdpa_train);
        attn_sdpa_plan_destroy(plan->sdpa);
        free(plan);
    }
    return ATTN_OK;
}

attn_status attn_mha_workspace_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    *bytes = plan->ws_bytes;
    return ATTN_OK;
}

attn_status attn_mha_context_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    if (plan->no_training)
        return ATTN_ERR_TOO_LARGE;
    *bytes = plan->cx_bytes;
    return ATTN_OK;
}

attn_status attn_mha_bwd_workspace_size(const attn_mha_plan *plan, size_t *bytes)
{
    if (!plan || !bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    if (plan->no_training)
        return ATTN_ERR_TOO_LARGE;
    *bytes = plan->bw_bytes;
    return ATTN_OK;
}
