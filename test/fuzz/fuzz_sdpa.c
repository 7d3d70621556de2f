/*
 * fuzz_sdpa.c -- the SDPA forward (attn_sdpa_plan_create/execute and the
 * one-shot attn_sdpa): byte 0 with bits 0, 4 and 5 clear.  The input
 * decodes into one whole problem (sizes, layouts and strides, packed QKV,
 * broadcast and overlapping input views, window, lengths, masks, bias,
 * optional outputs P and logsumexp, engine, threads, workspace) with, on
 * demand, one or two invalid fields (BAD_*, byte 1); bit 3 adds the sparse
 * fields (fuzz_sparse.c), bit 6 K/V storage types and the paged cache
 * (fuzz_kv.c), bit 7 the element types of Q and O (fuzz_qo.c).
 *
 * Contract: the status is one expect_sdpa_plan / expect_sdpa_exec allow
 * (ATTN_OK when valid); on error every output holds the sentinel and the
 * inputs are unchanged; on success O, P and lse are within the float64
 * reference's bounds (test/reference.h) in the views, the sentinel
 * outside, the inputs unchanged, and a second run with another thread
 * count and workspace choice is bitwise identical.  Every input position
 * attn.h says is never read (gaps between rows, padded query rows, K/V
 * rows no query sees through lengths, window and the sparse candidate
 * sets, mask and bias entries hidden by them) holds NaN (garbage for the
 * mask).  Too large problems are planned only (and the one-shot called on
 * dummy buffers when invalid).
 *
 * Bit 1 of the first byte adds dropout to the desc: dropout_p (0, -0,
 * tiny, small, large, 1, or invalid: negative, past 1, NaN, -inf),
 * dropout_seed and dropout_offset (0, small, near 2^64, any).  The float64
 * references apply the keep mask of the public attn_dropout_mask_fill
 * (test_dropout.c checks that call against its own Philox4x32-10), scaled
 * by 1 / (1 - p), in the forward, the SDPA backward (the mask held fixed)
 * and the MHA layer's forward and backward; p = 0 with a seed or offset is
 * checked bitwise against the same desc without them by the rerun.
 *
 * After a valid problem with plain K/V passed these checks its bytes go on
 * to the backward (fuzz_sdpa_bwd.c); with 16-bit Q or O its statuses are
 * checked (sdpa_bwd_qo16: it plans, with the sparse options too, and
 * needs args16).
 */
#include "../reference.h"
#include "fuzz_sdpa.h"

/* --------------------------------------------------- expected statuses */

expect expect_sdpa_plan(const attn_sdpa_desc *d)
{
    expect e = { 0, 0 };
    if (reserved_nonzero(d->reserved, (int)(sizeof d->reserved / sizeof d->reserved[0])) ||
        (d->use_positions != 0 && d->use_positions != 1) ||
        (!d->use_positions && (d->q_pos0 != 0 || d->kv_pos0 != 0)) || !engine_ok(d->engine) ||
        (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        !mask_mode_ok(d->mask_mode) || !(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (!sparse_fields_ok(d->reserved_flags, d->layout_per_head, d->block_size))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    expect_kv_options(&e, d);
    expect_qo_options(&e, d);
    /* the paged cache does not combine with the sparse options; the
     * storage types do (widened, as 16-bit Q and O) */
    if (d->kv_block_size != 0 && (d->use_global_k || d->use_global_q || d->block_size != 0))
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
    /* "With p > 0, batch and q_heads past 2^32 are ATTN_ERR_TOO_LARGE" */
    if (d->dropout_p > 0.0 &&
        (d->batch > ((int64_t)1 << 32) || d->q_heads > ((int64_t)1 << 32)))
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len;
    expect_view_es(&e, &d->q, B, Hq, n, d->qk_dim, VK_INPUT, d->q_type != ATTN_DTYPE_F32);
    expect_kv_views(&e, d);
    expect_kv_blocks(&e, d, 1);
    expect_view_es(&e, &d->o, B, Hq, n, d->v_dim, VK_OUTPUT, d->o_type != ATTN_DTYPE_F32);
    if (mask_mode_ok(d->mask_mode) && d->mask_mode != ATTN_MASK_NONE)
        expect_view(&e, &d->mask, B, Hq, n, m, VK_BCAST);
    if (d->use_bias)
        expect_view(&e, &d->bias, B, Hq, n, m, VK_BCAST);
    if (d->want_probs)
        expect_view(&e, &d->probs, B, Hq, n, m, VK_OUTPUT);
    if (d->want_lse)
        expect_view(&e, &d->lse, B, Hq, n, 1, VK_LSE);
    if (isinf(d->scale))
        e.must |= BIT(ATTN_ERR_BAD_SCALE);
    if (d->threads < 0 || d->threads > 1024)
        e.must |= BIT(ATTN_ERR_BAD_THREADS);
    return e;
}

static expect expect_sdpa_exec(const attn_sdpa_desc *d, const attn_sdpa_args *a,
                               const void *ws, size_t ws_bytes, size_t need)
{
    expect e = { 0, 0 };
    /* Q, K, V and O: args.q / k / v / o for F32, else args.q16 / k16 /
     * v16 / o16 (K and V of a block type: args.kq / vq) with the other
     * pointers NULL */
    expect_kv_pointers(&e, d, a);
    expect_qo_pointers(&e, d, a);
    const ptr_use f[] = {
        { d->kv_block_size > 0, a->block_table },
        { d->use_kv_lens, a->kv_lens },  { d->use_q_lens, a->q_lens },
        { d->mask_mode != ATTN_MASK_NONE, a->mask }, { d->use_bias, a->bias },
        { d->want_probs, a->probs },     { d->want_lse, a->lse },
        { d->use_global_k != 0, a->global_k }, { d->use_global_q != 0, a->global_q },
        { d->block_size != 0, a->layout },
    };
    expect_call(&e, f, sizeof f / sizeof f[0], d->batch, d->use_kv_lens ? a->kv_lens : NULL,
                d->kv_len, d->use_q_lens ? a->q_lens : NULL, d->q_len, ws, ws_bytes, need);
    /* the table entries of the blocks holding tokens [0, kv_lens[b]) */
    if (d->kv_block_size > 0 && a->block_table) {
        const int64_t bs = d->kv_block_size;
        for (int64_t b = 0; b < d->batch; b++) {
            int64_t klen = d->kv_len;
            if (d->use_kv_lens) {
                if (!a->kv_lens || a->kv_lens[b] < 0 || a->kv_lens[b] > d->kv_len) {
                    e.maybe |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
                    continue;
                }
                klen = a->kv_lens[b];
            }
            for (int64_t J = 0; J < (klen + bs - 1) / bs; J++) {
                const int32_t id = a->block_table[b * d->kv_max_blocks + J];
                if (id < 0 || id >= d->kv_num_blocks)
                    e.must |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
            }
        }
    }
    return e;
}

/* ----------------------------------------------------- printing, checks */

static void print_sdpa(const attn_sdpa_desc *d, const unsigned bad[2], int t2)
{
    fprintf(stderr, "SDPA B=%lld Hq=%lld Hkv=%lld n=%lld m=%lld dk=%lld dv=%lld", (long long)d->batch,
            (long long)d->q_heads, (long long)d->kv_heads, (long long)d->q_len,
            (long long)d->kv_len, (long long)d->qk_dim, (long long)d->v_dim);
    print_view("q", &d->q);
    print_view("k", &d->k);
    print_view("v", &d->v);
    print_view("o", &d->o);
    fprintf(stderr, " scale=%g align=%d win=[%lld,%lld] lens=%d/%d mask=%d", d->scale,
            (int)d->align, (long long)d->window_left, (long long)d->window_right,
            d->use_kv_lens, d->use_q_lens, (int)d->mask_mode);
    if (d->mask_mode)
        print_view("", &d->mask);
    fprintf(stderr, " bias=%d", d->use_bias);
    if (d->use_bias)
        print_view("", &d->bias);
    fprintf(stderr, " P=%d", d->want_probs);
    if (d->want_probs)
        print_view("", &d->probs);
    fprintf(stderr, " lse=%d", d->want_lse);
    if (d->want_lse)
        print_view("", &d->lse);
    if (d->dropout_p != 0.0 || d->dropout_seed || d->dropout_offset)
        fprintf(stderr, " dropout=%g/%llx/%llx", d->dropout_p,
                (unsigned long long)d->dropout_seed, (unsigned long long)d->dropout_offset);
    print_sparse(d->use_global_k, d->use_global_q, d->layout_per_head, d->reserved_flags,
                 d->block_size);
    if (!kv_plain(d) || d->kv_num_blocks || d->kv_max_blocks)
        fprintf(stderr, " kv=k%d/v%d/bs%lld/nb%lld/mb%lld", (int)d->k_type, (int)d->v_type,
                (long long)d->kv_block_size, (long long)d->kv_num_blocks,
                (long long)d->kv_max_blocks);
    if (d->q_type != ATTN_DTYPE_F32 || d->o_type != ATTN_DTYPE_F32)
        fprintf(stderr, " qo=q%d/o%d", (int)d->q_type, (int)d->o_type);
    fprintf(stderr, " engine=%d threads=%d/%d bad=%u,%u\n", (int)d->engine, d->threads, t2,
            bad[0], bad[1]);
}

void sdpa_check_results(const sdpa_prob *P, int nodecode)
{
    const attn_sdpa_desc *d = P->refd ? P->refd : &P->d;
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len, dv = d->v_dim;
    ref_out ro;
    if (ref_sdpa_alloc(d, P->refa ? P->refa : &P->a, &ro))
        abort();
    /* with dropout the reference's O and P are of P' = P keep / (1 - p) */
    const double drel = ref_dropout_rel(d);
    /* 16-bit O and BF16 products (the types are the call's, P->d's) */
    const attn_dtype ot = P->d.o_type;
    const int bf16 = qo_bf16_products(&P->d, nodecode);
    double oadd, oabs;
    qo_tolerance(&P->d, bf16, &oadd, &oabs);
    if (bf16)
        counts[N_QO_BF16]++;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const size_t row = (size_t)((b * Hq + h) * n + i);
                double prel, orel, ltol;
                ref_row_tolerance(d->qk_dim, ro.nvis[row], ro.s_abs[row], ro.lse[row], &prel,
                                  &orel, &ltol);
                prel += drel;
                orel += drel + oadd;
                const int64_t at = b * d->o.batch + h * d->o.head + i * d->o.seq;
                for (int64_t x = 0; x < dv; x++) {
                    float Ox;
                    if (ot == ATTN_DTYPE_F32)
                        Ox = P->o.ptr[at + x];
                    else if (attn_dtype_decode(ot, P->o16.ptr + at + x, &Ox, 1) != ATTN_OK)
                        FAIL("attn_dtype_decode of O failed");
                    double ref = ro.o[row * (size_t)dv + (size_t)x];
                    double tol = orel * ro.o_abs[row * (size_t)dv + (size_t)x] + oabs + REF_TINY;
                    if (!(fabs((double)Ox - ref) <= tol))
                        FAIL("O[b=%lld h=%lld i=%lld d=%lld] = %.9g (o_type %d%s), reference "
                             "%.9g, tol %.3g", (long long)b, (long long)h, (long long)i,
                             (long long)x, (double)Ox, (int)ot, bf16 ? ", BF16 products" : "",
                             ref, tol);
                }
                if (d->want_probs) {
                    const float *Pr = P->p.ptr + b * d->probs.batch + h * d->probs.head +
                                      i * d->probs.seq;
                    for (int64_t j = 0; j < m; j++) {
                        double ref = ro.p[row * (size_t)m + (size_t)j];
                        double tol = prel * ref + REF_TINY;
                        if (!(fabs((double)Pr[j] - ref) <= tol))
                            FAIL("P[b=%lld h=%lld i=%lld j=%lld] = %.9g, reference %.9g, tol %.3g",
                                 (long long)b, (long long)h, (long long)i, (long long)j,
                                 (double)Pr[j], ref, tol);
                    }
                }
                if (d->want_lse) {
                    const float L = P->l.ptr[b * d->lse.batch + h * d->lse.head + i * d->lse.seq];
                    double ref = ro.lse[row];
                    if (ref == -INFINITY ? !((double)L == -INFINITY)
                                         : !(fabs((double)L - ref) <= ltol))
                        FAIL("lse[b=%lld h=%lld i=%lld] = %.9g, reference %.9g, tol %.3g",
                             (long long)b, (long long)h, (long long)i, (double)L, ref, ltol);
                }
            }
    if (ot == ATTN_DTYPE_F32)
        obuf_outside(&P->o, "O");
    else
        obuf16_outside(&P->o16, "O");
    if (d->want_probs)
        obuf_outside(&P->p, "P");
    if (d->want_lse)
        obuf_outside(&P->l, "lse");
    ref_out_free(&ro);
}

void sdpa_clear(sdpa_prob *P)
{
    obuf_clear(&P->o);
    obuf16_clear(&P->o16);
    if (P->p.base)
        obuf_clear(&P->p);
    if (P->l.base)
        obuf_clear(&P->l);
}

static void sdpa_untouched(const sdpa_prob *P, const char *when)
{
    obuf_untouched(&P->o, "O", when);
    obuf16_untouched(&P->o16, "O", when);
    if (P->p.base)
        obuf_untouched(&P->p, "P", when);
    if (P->l.base)
        obuf_untouched(&P->l, "lse", when);
}

/* -------------------------------------------------------------- decode */

/* The planted fields (byte 1), the sizes and the shape (past a key tile,
 * many queries, several sparse blocks), the sparse fields. */
static void sdpa_decode_sizes(rd *r, unsigned sel, sdpa_case *C)
{
    attn_sdpa_desc *d = &C->P.d;
    attn_sdpa_desc_init(d);
    C->bad[0] = C->bad[1] = BAD_NONE;
    decode_bad(r, u8(r), BAD_COUNT_, C->bad);

    int64_t B = 1 + pick(r, 3), Hkv = 1 + pick(r, 2), g = 1 + pick(r, 3);
    int64_t n = 1 + pick(r, 6), m = 1 + pick(r, 9), dk = 1 + pick(r, 6), dv = 1 + pick(r, 6);
    unsigned shape = u8(r);
    d->engine = engine_of(shape >> 4);
    shape %= 16;
    C->sparse = !!(sel & SEL_SPARSE);
    sparse_cfg *sc = &C->sc;
    if (C->sparse)
        decode_sparse(r, sc);
    if (C->sparse && shape == 0 && (sc->fill & 0x300) == 0x300) {
        /* several blocks of 16 (the shapes below have them too) */
        B = 1;
        n = 1 + pick(r, 34);
        m = 1 + pick(r, 40);
        dk = 1 + pick(r, 3);
        dv = 1 + pick(r, 3);
    } else if (shape == 1) { /* past a key tile, and split keys for short queries */
        B = 1;
        n = 1 + pick(r, 2);
        m = 500 + pick(r, 250) * 3;
        dk = 1 + pick(r, 3);
        dv = 1 + pick(r, 3);
    } else if (shape == 2) { /* more query rows than a GEMM sub-block */
        n = 60 + pick(r, 16);
        m = 1 + pick(r, 6);
        B = 1;
    }
    d->batch = B;
    d->kv_heads = Hkv;
    d->q_heads = Hkv * g;
    d->q_len = n;
    d->kv_len = m;
    d->qk_dim = dk;
    d->v_dim = dv;
    d->use_global_k = sc->gk;
    d->use_global_q = sc->gq;
    d->layout_per_head = sc->lph;
    d->block_size = sc->bs;
    C->B = B;
    C->Hkv = Hkv;
    C->Hq = d->q_heads;
    C->n = n;
    C->m = m;
    C->dk = dk;
    C->dv = dv;
}

/* Scale, alignment, window, lengths, mask, bias, P, lse, threads,
 * dropout, the lengths' values and the K/V storage. */
static void sdpa_decode_options(rd *r, unsigned sel, sdpa_case *C)
{
    attn_sdpa_desc *d = &C->P.d;
    const int64_t B = C->B, n = C->n, m = C->m;
    unsigned opt = u8(r);
    static const float scales[] = { 1.0f, 0.0f, -0.5f, 0.125f, 3.0f, 1e-3f, 12.0f };
    if (opt & 1)
        d->scale = scales[pick(r, 7)];
    d->align = (opt & 2) ? ATTN_ALIGN_BOTTOM_RIGHT : ATTN_ALIGN_TOP_LEFT;
    if (opt & 4) {
        unsigned w = u8(r);
        const int64_t far = n + m + 2;
        d->window_left = (w & 3) == 0 ? -1 : (w & 3) == 1 ? INT64_MAX : (int64_t)(w >> 2) % far;
        w = u8(r);
        d->window_right = (w & 3) == 0 ? -1 : (w & 3) == 1 ? INT64_MIN : (int64_t)(w >> 2) % far;
    }
    d->use_kv_lens = !!(opt & 8);
    d->use_q_lens = !!(opt & 16);
    d->mask_mode = (attn_mask_mode)pick(r, 3);
    d->use_bias = !!(opt & 32);
    d->want_probs = !!(opt & 64);
    d->want_lse = !!(opt & 128);
    unsigned tsel = u8(r);
    d->threads = (tsel & 7) == 7 ? 0 : 1 + (int)(tsel % 4);
    C->t2 = threads_other(d->threads, tsel >> 3);
    if (sel & SEL_DROPOUT)
        decode_dropout(r, &d->dropout_p, &d->dropout_seed, &d->dropout_offset);
    for (int64_t b = 0; b < B; b++) {
        C->P.kv_lens[b] = (int32_t)pick(r, (unsigned)(m < 255 ? m + 1 : 255));
        if (m >= 255 && (u8(r) & 1))
            C->P.kv_lens[b] = (int32_t)m - (int32_t)pick(r, 8);
        C->P.q_lens[b] = (int32_t)pick(r, (unsigned)n + 1);
    }
    if (sel & SEL_KV)
        decode_kv(r, &C->kv, B, m);
    if (sel & SEL_QO) {
        decode_qo(r, &C->qo, &C->kv);
        d->q_type = C->qo.qt;
        d->o_type = C->qo.ot;
    }
    if (sel & SEL_KV) {
        /* Q8_0 / Q4_0: their types and dims (after decode_qo's types) */
        kv_apply_q(&C->kv, &C->dk, &C->dv);
        d->qk_dim = C->dk;
        d->v_dim = C->dv;
        d->k_type = C->kv.kt;
        d->v_type = C->kv.vt;
        /* integer scores: only where they are valid (fuzz_kv.c) */
        d->qk_int8 = C->kv.q.on && C->kv.q.int8 && dtype_block(C->kv.kt) && !C->kv.q.odd &&
                     !C->kv.q.badst && C->kv.bad == KB_NONE && d->q_type == ATTN_DTYPE_F32;
    }
}

/* The views: Q, K, V (or packed QKV), O, the paged pools, mask and bias
 * (sharing strides half of the time, broadcast dims), P and lse. */
static void sdpa_decode_views(rd *r, sdpa_case *C)
{
    attn_sdpa_desc *d = &C->P.d;
    kv_cfg *kv = &C->kv;
    const int64_t B = C->B, Hkv = C->Hkv, Hq = C->Hq, n = C->n, m = C->m, dk = C->dk,
                  dv = C->dv;
    const int64_t *szq = C->szq;
    C->szq[0] = B, C->szq[1] = Hq, C->szq[2] = n;
    C->szk[0] = B, C->szk[1] = Hkv, C->szk[2] = m;
    C->szkp[0] = kv->nb, C->szkp[1] = Hkv, C->szkp[2] = kv->bs;
    unsigned lay = u8(r);
    if ((lay & 7) == 7 && n == m && dk == dv && !kv->paged && !kv->q.on) {
        /* packed QKV [B][S][Hq + 2 Hkv][D] */
        C->packed = 1;
        const int64_t W = (Hq + 2 * Hkv) * dk + (lay >> 3) % 3;
        d->q = (attn_view){ n * W, dk, W };
        d->k = d->v = (attn_view){ n * W, dk, W };
    } else {
        d->q = gen_view(r, szq, dk);
        d->k = kvq_view(r, &kv->q, 0, C->szk, dk, !kv->paged);
        d->v = kvq_view(r, &kv->q, 1, C->szk, dv, !kv->paged);
    }
    d->o = gen_view(r, szq, dv);
    /* SEL_KV: the contiguous views stay for the reference and the
     * contiguous run; paged, d->k and d->v become views of the pools */
    kv->kcv = d->k;
    kv->vcv = d->v;
    if (kv->paged) {
        d->k = kvq_view(r, &kv->q, 0, C->szkp, dk, 1);
        d->v = kvq_view(r, &kv->q, 1, C->szkp, dv, 1);
        d->kv_block_size = kv->bs;
        d->kv_num_blocks = kv->nb;
        d->kv_max_blocks = kv->mb;
    }
    if (d->mask_mode || d->use_bias) {
        /* mask and bias share decoded strides half of the time */
        attn_view mv = gen_view(r, szq, m);
        unsigned bc = u8(r);
        if (bc & 1) mv.batch = 0;
        if (bc & 2) mv.head = 0;
        if (bc & 4) mv.seq = 0;
        attn_view bv = mv;
        if (bc & 8) {
            bv = gen_view(r, szq, m);
            if (bc & 16) bv.batch = 0;
            if (bc & 32) bv.head = 0;
            if (bc & 64) bv.seq = 0;
        }
        if (d->mask_mode)
            d->mask = mv;
        if (d->use_bias)
            d->bias = bv;
    }
    if (d->want_probs)
        d->probs = gen_view(r, szq, m);
    if (d->want_lse) {
        d->lse = gen_view(r, szq, 1);
        unsigned z = u8(r);
        if (n == 1 && (z & 7) == 1)
            d->lse.seq = 0; /* attn.h: 0 is fine on a size-1 dimension */
    }
}

/* --------------------------------------------------------------- plant */

/* BAD_SIZE_HUGE: a huge size, with compact (wrapping) strides as a caller
 * would compute them or the shape of known bug (1). */
static void sdpa_plant_huge(rd *r, attn_sdpa_desc *d)
{
    int64_t *s[] = { &d->batch, &d->q_heads, &d->kv_heads, &d->q_len, &d->kv_len, &d->qk_dim, &d->v_dim };
    unsigned which = pick(r, 7);
    *s[which] = huge_sizes[pick(r, 8)];
    if (which == 2) d->q_heads = d->kv_heads; /* keep the ratio */
    /* compact strides, as a caller would compute them (unsigned:
     * they may wrap, which the library must catch) */
    if (u8(r) & 1) {
        uint64_t hq = (uint64_t)d->q_heads, hk = (uint64_t)d->kv_heads;
        uint64_t nn = (uint64_t)d->q_len, mm = (uint64_t)d->kv_len;
        uint64_t ek = (uint64_t)d->qk_dim, ev = (uint64_t)d->v_dim;
        d->q = (attn_view){ (int64_t)(hq * nn * ek & INT64_MAX), (int64_t)(nn * ek & INT64_MAX), (int64_t)ek };
        d->k = (attn_view){ (int64_t)(hk * mm * ek & INT64_MAX), (int64_t)(mm * ek & INT64_MAX), (int64_t)ek };
        d->v = (attn_view){ (int64_t)(hk * mm * ev & INT64_MAX), (int64_t)(mm * ev & INT64_MAX), (int64_t)ev };
        d->o = (attn_view){ (int64_t)(hq * nn * ev & INT64_MAX), (int64_t)(nn * ev & INT64_MAX), (int64_t)ev };
    } else if (which == 1) {
        /* the shape of known bug (1): one query, split keys */
        d->batch = d->kv_heads = d->q_len = d->qk_dim = d->v_dim = 1;
        d->kv_len = 513 + (int64_t)u8(r) * 64;
        d->q = d->o = (attn_view){ 0, 1, 1 };
        d->k = d->v = (attn_view){ 0, 0, 1 };
    }
}

/* BAD_STRIDE_UNSET: a stride unset, or a feature enabled without strides. */
static void sdpa_plant_unset(rd *r, attn_sdpa_desc *d, int64_t *sp)
{
    if (u8(r) & 1) *sp = ATTN_STRIDE_UNSET;
    else { /* enable a feature without strides */
        unsigned f = pick(r, 4);
        if (f == 0 && !d->mask_mode) { d->mask_mode = ATTN_MASK_KEEP_NONZERO; d->mask = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
        if (f == 1 && !d->use_bias) { d->use_bias = 1; d->bias = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
        if (f == 2 && !d->want_probs) { d->want_probs = 1; d->probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
        if (f == 3 && !d->want_lse) { d->want_lse = 1; d->lse = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
    }
}

/* One plan-time invalid field of kind bad (the view and stride it may hit
 * are decoded first, whatever the kind). */
static void sdpa_plant_plan1(rd *r, sdpa_case *C, unsigned bad)
{
    attn_sdpa_desc *d = &C->P.d;
    attn_view *views[] = { &d->q, &d->k, &d->v, &d->o, &d->mask, &d->bias, &d->probs, &d->lse };
    attn_view *vw = views[pick(r, 8)];
    int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
    switch (bad) {
    case BAD_RESERVED: {
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse(r, 1, &d->reserved_flags, &d->layout_per_head, &d->block_size);
            break;
        }
        /* a reserved field, a position without use_positions, a
         * use_positions not 0 or 1, or a dropout probability outside
         * [0, 1] */
        const unsigned nr = (unsigned)(sizeof d->reserved / sizeof d->reserved[0]);
        unsigned at = pick(r, nr + 4);
        int64_t val = (int64_t)u8(r) - 128;
        if (at < nr) {
            d->reserved[at] = val ? val : INT64_MIN;
        } else if (at == nr) {
            d->q_pos0 = val ? val : INT64_MIN;
        } else if (at == nr + 1) {
            d->kv_pos0 = val ? val : INT64_MAX;
        } else if (at == nr + 2) {
            d->use_positions = val == 0 || val == 1 ? 2 : (int)val;
        } else {
            static const double badp[] = { -0.25, 1.5, NAN, -INFINITY, INFINITY };
            d->dropout_p = badp[pick(r, 5)];
        }
        break;
    }
    case BAD_ENUM:
        if (C->sparse && (u8(r) & 1))
            plant_sparse(r, 0, &d->reserved_flags, &d->layout_per_head, &d->block_size);
        else if (u8(r) & 1) d->align = (attn_align)(2 + (int)pick(r, 3) - (u8(r) & 1) * 5);
        else d->mask_mode = (attn_mask_mode)(3 + (int)pick(r, 200));
        break;
    case BAD_SIZE_NONPOS: {
        int64_t *s[] = { &d->batch, &d->q_heads, &d->kv_heads, &d->q_len, &d->kv_len, &d->qk_dim, &d->v_dim };
        *s[pick(r, 7)] = (u8(r) & 1) ? 0 : -(int64_t)1 - (int64_t)u8(r);
        break;
    }
    case BAD_SIZE_HUGE:
        sdpa_plant_huge(r, d);
        C->huge = 1;
        break;
    case BAD_HEAD_RATIO:
        d->kv_heads = d->q_heads < ((int64_t)1 << 40) ? d->q_heads + 1 + pick(r, 3) : 7;
        break;
    case BAD_STRIDE_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
    case BAD_STRIDE_ZERO: *sp = 0; break;
    case BAD_STRIDE_SHORT: vw->seq = pick(r, 3) ? (vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0) : 0; break;
    case BAD_STRIDE_UNSET: sdpa_plant_unset(r, d, sp); break;
    case BAD_OUT_OVERLAP: {
        attn_view *ov[] = { &d->o, &d->probs, &d->lse };
        unsigned w = pick(r, 3);
        if ((w == 1 && !d->want_probs) || (w == 2 && !d->want_lse)) w = 0;
        int64_t *s = pick(r, 2) ? &ov[w]->head : &ov[w]->batch;
        *s = (int64_t)pick(r, 4) + (s == &ov[w]->head ? 0 : 1);
        if (u8(r) & 1) ov[w]->seq = ov[w]->head; /* rows shared by two heads */
        break;
    }
    case BAD_SCALE_INF: d->scale = (u8(r) & 1) ? INFINITY : -INFINITY; break;
    case BAD_THREADS_: {
        static const int tv[] = { -1, 1025, INT_MAX, INT_MIN, 100000 };
        d->threads = tv[pick(r, 5)];
        break;
    }
    case BAD_STRIDE_HUGE:
        if (u8(r) & 1) vw->seq = (int64_t)INT32_MAX + 1 + pick(r, 4);
        else *sp = (int64_t)1 << (52 + pick(r, 11));
        break;
    default: break;
    }
}

/* The plan-time invalid fields, then the plan's expected status. */
static void sdpa_plant_plan(rd *r, sdpa_case *C)
{
    for (int k = 0; k < 2; k++)
        sdpa_plant_plan1(r, C, C->bad[k]);
    /* reading the rest of the exec-time fields happens below */
    C->pe = expect_sdpa_plan(&C->P.d);
    if (C->huge)
        C->pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_sdpa(&C->P.d, C->bad, C->t2);
}

/* ---------------------------------------------------- extents, plan only */

/* The views' extents; 1 when the problem is small enough to allocate and
 * compute (its sizes as decoded). */
static int sdpa_extents(sdpa_case *C)
{
    const attn_sdpa_desc *d = &C->P.d;
    const kv_cfg *kv = &C->kv;
    const int64_t *szq = C->szq, *szk = C->szk;
    const int64_t m = C->m, dk = C->dk, dv = C->dv;
    C->eq = view_extent(&d->q, szq, dk);
    C->ek = view_extent(&d->k, kv->paged ? C->szkp : szk, dk);
    C->ev = view_extent(&d->v, kv->paged ? C->szkp : szk, dv);
    C->eo = view_extent(&d->o, szq, dv);
    C->em = d->mask_mode ? view_extent(&d->mask, szq, m) : 0;
    C->eb = d->use_bias ? view_extent(&d->bias, szq, m) : 0;
    C->ep = d->want_probs ? view_extent(&d->probs, szq, m) : 0;
    C->el = d->want_lse ? view_extent(&d->lse, szq, 1) : 0;
    const int small = !C->huge && C->eq >= 0 && C->ek >= 0 && C->ev >= 0 && C->eo >= 0 &&
                      C->em >= 0 && C->eb >= 0 && C->ep >= 0 && C->el >= 0 &&
                      d->batch == C->B && d->q_heads == C->Hq && d->kv_heads == C->Hkv &&
                      d->q_len == C->n && d->kv_len == m && d->qk_dim == dk &&
                      d->v_dim == dv && mask_mode_ok(d->mask_mode) &&
                      (!kv->paged || (view_extent(&kv->kcv, szk, dk) >= 0 &&
                                      view_extent(&kv->vcv, szk, dv) >= 0));
    /* the K and V views of the float pool: the contiguous ones when paged */
    C->kvw = kv->paged ? &kv->kcv : &d->k;
    C->vvw = kv->paged ? &kv->vcv : &d->v;
    C->ekc = kv->paged ? view_extent(C->kvw, szk, dk) : C->ek;
    C->evc = kv->paged ? view_extent(C->vvw, szk, dv) : C->ev;
    return small;
}

/* A problem too large to allocate: plan only (and the one-shot call on
 * dummy buffers when invalid). */
static void sdpa_plan_only(const sdpa_case *C)
{
    const attn_sdpa_desc *d = &C->P.d;
    attn_sdpa_plan *plan = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, d);
    check_status("attn_sdpa_plan_create", st, C->pe);
    counts[N_PLAN_ONLY]++;
    if (st == ATTN_OK) {
        size_t ws = 0;
        if (attn_sdpa_workspace_size(plan, &ws) != ATTN_OK)
            FAIL("attn_sdpa_workspace_size failed");
        attn_sdpa_plan_destroy(plan);
        return;
    }
    if (plan)
        FAIL("plan set on error");
    float dummy[64];
    for (int i = 0; i < 64; i++)
        dummy[i] = sentinel();
    const float in[64] = { 0 };
    attn_sdpa_args a = { .q = in, .k = in, .v = in, .o = dummy };
    attn_status st2 = attn_sdpa(d, &a);
    if (st2 != st)
        FAIL("attn_sdpa returned %s, plan_create %s", st_name(st2), st_name(st));
    for (int i = 0; i < 64; i++)
        if (fbits(dummy[i]) != SENT)
            FAIL("attn_sdpa wrote its output on error");
}

/* -------------------------------------------------------------- inputs */

/* One float pool for Q, K, V and bias (views may overlap), one byte pool
 * for the mask: the decoded places, no tail (a read past the last view's
 * end is outside the allocation). */
static void sdpa_place_inputs(rd *r, sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    const int64_t Hq = C->Hq, Hkv = C->Hkv, dk = C->dk;
    size_t len = 0;
    if (C->packed) {
        /* the views may have been changed by a planted invalid stride */
        int64_t span = C->eq;
        if (C->ek + Hq * dk > span) span = C->ek + Hq * dk;
        if (C->ev + (Hq + Hkv) * dk > span) span = C->ev + (Hq + Hkv) * dk;
        C->oq = place(r, &len, (size_t)span, 0);
        C->okk = C->oq + (size_t)(Hq * dk);
        C->ov = C->okk + (size_t)(Hkv * dk);
    } else {
        C->oq = place(r, &len, (size_t)C->eq, 1);
        C->okk = place(r, &len, (size_t)C->ekc, 1);
        C->ov = place(r, &len, (size_t)C->evc, 1);
    }
    if (d->use_bias)
        C->ob = place(r, &len, (size_t)C->eb, 1);
    size_t mlen = 0;
    if (d->mask_mode)
        C->om = place(r, &mlen, (size_t)C->em, 0);
    P->pool_len = len;
    P->pool = xmalloc(P->pool_len * sizeof(float));
    P->mpool_len = mlen;
    P->mpool = xmalloc(P->mpool_len);
}

/* Is key j of batch b read by some query row (lengths and window only)? */
static int key_seen(const attn_sdpa_desc *d, int64_t klen, int64_t qlen, int64_t j)
{
    if (j >= klen)
        return 0;
    for (int64_t i = 0; i < qlen; i++)
        if (ref_window_visible(d, klen, qlen, i, j))
            return 1;
    return 0;
}

/* What may be read: need 1 = Q/K/V, 2 = bias, mneed the mask; with
 * sparse attention, the K and V rows of the candidate sets (attn.h: rows
 * only in hidden blocks or outside every candidate set may hold NaN).
 * dn and an: the desc and args with the sparse fields as decoded. */
static void sdpa_mark_read(const sdpa_case *C, const attn_sdpa_desc *dn,
                           const attn_sdpa_args *an, uint8_t *need, uint8_t *mneed)
{
    const sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    const attn_view *kvw = C->kvw, *vvw = C->vvw;
    const int64_t B = C->B, Hq = C->Hq, Hkv = C->Hkv, n = C->n, m = C->m, dk = C->dk,
                  dv = C->dv;
    const int sparse = C->sparse;
    const size_t oq = C->oq, okk = C->okk, ov = C->ov, ob = C->ob, om = C->om;
    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? P->kv_lens[b] : m;
        const int64_t qlen = d->use_q_lens ? P->q_lens[b] : n;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < qlen; i++) {
                for (int64_t x = 0; x < dk; x++)
                    need[oq + (size_t)(b * d->q.batch + h * d->q.head + i * d->q.seq + x)] |= 1;
                for (int64_t j = 0; j < klen; j++) {
                    if (!ref_candidate(dn, an, b, h, i, j, klen, qlen))
                        continue;
                    if (d->use_bias)
                        need[ob + (size_t)(b * d->bias.batch + h * d->bias.head + i * d->bias.seq + j)] |= 2;
                    if (d->mask_mode)
                        mneed[om + (size_t)(b * d->mask.batch + h * d->mask.head + i * d->mask.seq + j)] = 1;
                    if (sparse) {
                        const int64_t hk = h / (Hq / Hkv);
                        for (int64_t x = 0; x < dk; x++)
                            need[okk + (size_t)(b * kvw->batch + hk * kvw->head + j * kvw->seq + x)] |= 1;
                        for (int64_t x = 0; x < dv; x++)
                            need[ov + (size_t)(b * vvw->batch + hk * vvw->head + j * vvw->seq + x)] |= 1;
                    }
                }
            }
        for (int64_t hk = 0; hk < Hkv && !sparse; hk++)
            for (int64_t j = 0; j < m; j++) {
                if (!key_seen(d, klen, qlen, j))
                    continue;
                for (int64_t x = 0; x < dk; x++)
                    need[okk + (size_t)(b * kvw->batch + hk * kvw->head + j * kvw->seq + x)] |= 1;
                for (int64_t x = 0; x < dv; x++)
                    need[ov + (size_t)(b * vvw->batch + hk * vvw->head + j * vvw->seq + x)] |= 1;
            }
    }
}

/* The values: random where read (-inf in some bias entries, mask entries
 * of a decoded density), NaN where never read, garbage in unread mask
 * entries (often the value that would hide or show everything); the
 * sparse flags and layout as decoded (a planted invalid sparse field
 * fails the plan: what is read follows the decoded ones). */
static void sdpa_fill_inputs(rd *r, sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    uint8_t *need = calloc(P->pool_len + 1, 1);
    uint8_t *mneed = calloc(P->mpool_len + 1, 1);
    if (!need || !mneed)
        abort();
    prng gv = { u32(r) };
    unsigned vopt = u8(r);
    static const double mags[] = { 1.0, 4.0, 0.25, 16.0 };
    const double mag = mags[vopt & 3];
    const double keep = (vopt >> 2 & 3) == 0 ? 1.0 : (vopt >> 2 & 3) * 0.3;
    const double ninf = (vopt >> 4 & 1) ? 0.25 : 0.0;
    unsigned garbage = vopt >> 5;

    attn_sdpa_desc dn = *d;
    attn_sdpa_args an;
    memset(&an, 0, sizeof an);
    if (C->sparse) {
        const sparse_cfg *sc = &C->sc;
        prng gs = { u32(r) ^ 0x2545f4914f6cdd1dull };
        sparse_make(&P->sb, sc, &gs, C->B, C->Hq, C->n, C->m);
        P->sparse = 1;
        dn.use_global_k = sc->gk;
        dn.use_global_q = sc->gq;
        dn.layout_per_head = sc->lph;
        dn.block_size = sc->bs;
        an.global_k = P->sb.gk;
        an.global_q = P->sb.gq;
        an.layout = P->sb.lay;
    }
    sdpa_mark_read(C, &dn, &an, need, mneed);
    for (size_t i = 0; i < P->pool_len; i++) {
        if (!need[i])
            P->pool[i] = NAN;
        else if (need[i] == 2 && ninf > 0 && pr_unit(&gv) < ninf)
            P->pool[i] = -INFINITY;
        else
            P->pool[i] = pr_val(&gv, mag);
    }
    const int keepv = d->mask_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (size_t i = 0; i < P->mpool_len; i++) {
        if (mneed[i]) {
            int vis = pr_unit(&gv) < keep;
            P->mpool[i] = (uint8_t)((vis == keepv) ? 1 + pr_next(&gv) % 255 : 0);
        } else {
            /* garbage, often the value that would hide (or show) everything */
            P->mpool[i] = garbage == 0 ? (uint8_t)(keepv ? 0 : 0xff) : garbage == 1 ? (uint8_t)(keepv ? 0xff : 0) : (uint8_t)pr_next(&gv);
        }
    }
    free(need);
    free(mneed);
}

/* The args: inputs in the pools, the used lengths and sparse buffers, the
 * outputs in sentinel-filled buffers at decoded offsets. */
static void sdpa_make_args(rd *r, sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    attn_sdpa_args *a = &P->a;
    a->q = P->pool + C->oq;
    a->k = P->pool + C->okk;
    a->v = P->pool + C->ov;
    if (d->use_bias)
        a->bias = P->pool + C->ob;
    if (d->mask_mode)
        a->mask = P->mpool + C->om;
    if (d->use_kv_lens)
        a->kv_lens = P->kv_lens;
    if (d->use_q_lens)
        a->q_lens = P->q_lens;
    if (d->use_global_k)
        a->global_k = P->sb.gk;
    if (d->use_global_q)
        a->global_q = P->sb.gq;
    if (d->block_size)
        a->layout = P->sb.lay;
    if (d->o_type == ATTN_DTYPE_F32) {
        obuf_make(&P->o, r, &d->o, C->szq, C->dv, C->eo);
        a->o = P->o.ptr;
    } else {
        obuf16_make(&P->o16, r, &d->o, C->szq, C->dv, C->eo);
        a->o16 = P->o16.ptr;
    }
    if (d->want_probs) {
        obuf_make(&P->p, r, &d->probs, C->szq, C->m, C->ep);
        a->probs = P->p.ptr;
    }
    if (d->want_lse) {
        obuf_make(&P->l, r, &d->lse, C->szq, 1, C->el);
        a->lse = P->l.ptr;
    }
}

/* ------------------------------------------------- exec-time plants */

/* One exec-time invalid field of kind bad: a pointer NULL or given for an
 * unused feature, a length out of range, the workspace, NULL at the top. */
static void sdpa_plant_exec1(rd *r, sdpa_case *C, unsigned bad)
{
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[8];
    static float junk_f[8];
    sdpa_prob *P = &C->P;
    attn_sdpa_desc *d = &P->d;
    attn_sdpa_args *a = &P->a;
    switch (bad) {
    case BAD_PTR_NULL: {
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse_null(r, &a->global_k, &a->global_q, &a->layout);
            break;
        }
        const void **p[] = { (const void **)&a->q, (const void **)&a->k, (const void **)&a->v,
                             (const void **)&a->o, (const void **)&a->kv_lens, (const void **)&a->q_lens,
                             (const void **)&a->mask, (const void **)&a->bias,
                             (const void **)&a->probs, (const void **)&a->lse };
        *p[pick(r, 10)] = NULL;
        break;
    }
    case BAD_PTR_EXTRA:
        if (C->sparse && (u8(r) & 1)) {
            plant_sparse_extra(r, d->use_global_k, d->use_global_q, d->block_size, junk_u8,
                               &a->global_k, &a->global_q, &a->layout);
            break;
        }
        switch (pick(r, 6)) {
        /* only pointers of features the plan does not use */
        case 0: if (!d->use_kv_lens) a->kv_lens = zero_lens; break;
        case 1: if (!d->use_q_lens) a->q_lens = zero_lens; break;
        case 2: if (!d->mask_mode) a->mask = junk_u8; break;
        case 3: if (!d->use_bias) a->bias = junk_f; break;
        case 4: if (!d->want_probs) a->probs = junk_f; break;
        default: if (!d->want_lse) a->lse = junk_f; break;
        }
        break;
    case BAD_LENGTH_: {
        unsigned b = pick(r, (unsigned)C->B);
        if (u8(r) & 1) { P->kv_lens[b] = bad_length(r, C->m); if (!a->kv_lens) { d->use_kv_lens = 1; a->kv_lens = P->kv_lens; } }
        else { P->q_lens[b] = bad_length(r, C->n); if (!a->q_lens) { d->use_q_lens = 1; a->q_lens = P->q_lens; } }
        break;
    }
    case BAD_WS_SMALL: C->ws_small = 1; break;
    case BAD_WS_MISALIGNED: C->ws_mis = 1; break;
    case BAD_NULL_TOP: C->null_top = 1 + (int)pick(r, 3); break;
    default: break;
    }
}

/* The exec-time invalid fields and the KV one, then the plan's expected
 * status again (BAD_LENGTH_ may have enabled lengths). */
static void sdpa_plant_exec(rd *r, sdpa_case *C)
{
    attn_sdpa_desc *d = &C->P.d;
    for (int k = 0; k < 2; k++)
        sdpa_plant_exec1(r, C, C->bad[k]);
    if (C->kv.on && C->kv.bad) {
        kv_plant(r, &C->kv, &C->KS, d, &C->P.a);
        if (verbose)
            fprintf(stderr, "  kv bad=%u\n", C->kv.bad);
    }
    if (C->qo.on && C->qo.bad) {
        qo_plant(r, C);
        if (verbose)
            fprintf(stderr, "  qo bad=%u\n", C->qo.bad);
    }
    if (verbose && (C->bad[0] >= BAD_PTR_NULL || C->bad[1] >= BAD_PTR_NULL || C->kv.bad ||
                    C->qo.bad))
        print_sdpa(d, C->bad, C->t2);
    /* after BAD_LENGTH_ may have enabled lengths: the plan desc changed */
    C->pe = expect_sdpa_plan(d);
}

/* ------------------------------------------------------------------ run */

/* NULL plan, desc or args (a valid desc otherwise): ATTN_ERR_NULL_ARGUMENT
 * and nothing written. */
static void sdpa_run_null_top(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    attn_status st;
    attn_sdpa_plan *plan = NULL;
    if (C->null_top == 1) {
        st = attn_sdpa_plan_create(&plan, NULL);
    } else {
        st = attn_sdpa_plan_create(&plan, &P->d);
        check_status("attn_sdpa_plan_create", st, C->pe);
        st = C->null_top == 2 ? attn_sdpa_execute(NULL, &P->a, NULL, 0) : attn_sdpa_execute(plan, NULL, NULL, 0);
        attn_sdpa_plan_destroy(plan);
    }
    if (st != ATTN_ERR_NULL_ARGUMENT)
        FAIL("NULL plan/desc/args: got %s", st_name(st));
    sdpa_untouched(P, "NULL argument");
}

/* The call: the one-shot attn_sdpa, or plan, workspace (decoded choice or
 * planted) and execute; each status checked against its expectation. */
static attn_status sdpa_run(sdpa_case *C)
{
    const attn_sdpa_desc *d = &C->P.d;
    const attn_sdpa_args *a = &C->P.a;
    const expect pe = C->pe;
    const int oneshot = (C->wsel & 3) == 3 && !C->ws_small && !C->ws_mis;
    attn_status st;
    if (oneshot) {
        expect x = pe.must ? pe : expect_sdpa_exec(d, a, NULL, 0, 0);
        if (!pe.must)
            x.maybe |= pe.maybe;
        st = attn_sdpa(d, a);
        check_status("attn_sdpa", st, x);
        return st;
    }
    attn_sdpa_plan *plan = NULL;
    st = attn_sdpa_plan_create(&plan, d);
    check_status("attn_sdpa_plan_create", st, pe);
    if (st != ATTN_OK)
        return st;
    size_t need_ws = 0;
    if (attn_sdpa_workspace_size(plan, &need_ws) != ATTN_OK)
        FAIL("attn_sdpa_workspace_size failed");
    wsp w1;
    wsp_make(&w1, C->wsel & 3, need_ws, C->ws_small, C->ws_mis);
    expect ee = expect_sdpa_exec(d, a, w1.ptr, w1.bytes, need_ws);
    if (C->ws_small && need_ws == 0)
        ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    st = attn_sdpa_execute(plan, a, w1.ptr, w1.bytes);
    check_status("attn_sdpa_execute", st, ee);
    attn_sdpa_plan_destroy(plan);
    free(w1.raw);
    return st;
}

/* ---------------------------------------------------------------- check */

/* After the call: the inputs unchanged; on error nothing written (0);
 * on success the outputs within the reference's bounds (1). */
static int sdpa_check(sdpa_case *C, attn_status st)
{
    sdpa_prob *P = &C->P;
    const attn_sdpa_desc *d = &P->d;
    if (memcmp(C->inputs_copy, P->pool, P->pool_len * sizeof(float)) ||
        memcmp(C->mask_copy, P->mpool, P->mpool_len) ||
        (C->QS.q16 && memcmp(C->QS.q16_copy, C->QS.q16, (size_t)C->QS.eq * sizeof(uint16_t))))
        FAIL("an input was modified");
    if (st != ATTN_OK) {
        sdpa_untouched(P, st_name(st));
        counts[N_ERROR]++;
        if (C->kv.on)
            counts[N_KV_ERROR]++;
        if (C->kv.q.on)
            counts[N_KVQ_ERROR]++;
        if (C->qo.on)
            counts[N_QO_ERROR]++;
        return 0;
    }
    counts[N_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_CHECKED]++;
    if (C->sparse)
        counts[N_SPARSE_CHECKED]++;
    if (C->kv.on) {
        counts[N_KV_CHECKED]++;
        if (C->kv.q.on)
            counts[N_KVQ_CHECKED]++;
        kv_reference(C);
    }
    if (C->qo.on) {
        counts[N_QO_CHECKED]++;
        qo_reference(C);
    }
    sdpa_check_results(P, 0);
    return 1;
}

/* Again with another thread count and workspace: bitwise equal. */
static void sdpa_rerun(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    attn_sdpa_desc *d = &P->d;
    const int t2 = C->t2;
    attn_status st;
    float *so = obuf_snap(&P->o), *sp = obuf_snap(&P->p), *sl = obuf_snap(&P->l);
    uint16_t *so16 = obuf16_snap(&P->o16);
    const int t1 = d->threads;
    const uint64_t seed1 = d->dropout_seed, off1 = d->dropout_offset;
    const char *note = drop_zero_reset(d->dropout_p, &d->dropout_seed, &d->dropout_offset);
    d->threads = t2;
    sdpa_clear(P);
    attn_sdpa_plan *plan = NULL;
    st = attn_sdpa_plan_create(&plan, d);
    if (st != ATTN_OK)
        FAIL("plan with %d threads: %s", t2, st_name(st));
    size_t need_ws = 0;
    attn_sdpa_workspace_size(plan, &need_ws);
    wsp w2;
    wsp_make(&w2, (C->wsel >> 2) % 3, need_ws, 0, 0);
    st = attn_sdpa_execute(plan, &P->a, w2.ptr, w2.bytes);
    if (st != ATTN_OK)
        FAIL("execute with %d threads: %s", t2, st_name(st));
    attn_sdpa_plan_destroy(plan);
    free(w2.raw);
    obuf_same(&P->o, so, "O", t1, t2, note);
    obuf16_same(&P->o16, so16, "O", t1, t2, note);
    obuf_same(&P->p, sp, "P", t1, t2, note);
    obuf_same(&P->l, sl, "lse", t1, t2, note);
    free(so16);
    free(so);
    free(sp);
    free(sl);
    d->threads = t1;
    d->dropout_seed = seed1;
    d->dropout_offset = off1;
}

static void sdpa_case_free(sdpa_case *C)
{
    sdpa_prob *P = &C->P;
    free(C->inputs_copy);
    free(C->mask_copy);
    free(C->kv_qpool);
    free(P->pool);
    free(P->mpool);
    obuf_free(&P->o);
    obuf16_free(&P->o16);
    obuf_free(&P->p);
    obuf_free(&P->l);
    sparse_free(&P->sb);
    kv_store_free(&C->KS);
    qo_store_free(&C->QS);
}

/* ----------------------------------------------------------------- kind */

void fuzz_sdpa(rd *r, unsigned sel)
{
    sdpa_case *C = xmalloc(sizeof *C);
    memset(C, 0, sizeof *C);
    /* decode */
    sdpa_decode_sizes(r, sel, C);
    sdpa_decode_options(r, sel, C);
    sdpa_decode_views(r, C);
    /* plant (plan-time fields) */
    sdpa_plant_plan(r, C);
    if (!sdpa_extents(C)) {
        sdpa_plan_only(C);
        free(C);
        return;
    }
    /* plant (NaN where never read), the buffers, exec-time fields */
    sdpa_place_inputs(r, C);
    sdpa_fill_inputs(r, C);
    sdpa_make_args(r, C);
    if (C->kv.on)
        kv_make_store(r, C);
    if (C->qo.on)
        qo_make_store(C);
    sdpa_plant_exec(r, C);
    /* run */
    C->wsel = u8(r);
    sdpa_prob *P = &C->P;
    C->inputs_copy = xmalloc(P->pool_len * sizeof(float));
    memcpy(C->inputs_copy, P->pool, P->pool_len * sizeof(float));
    C->mask_copy = xmalloc(P->mpool_len);
    memcpy(C->mask_copy, P->mpool, P->mpool_len);
    sdpa_clear(P);
    if (C->null_top && C->pe.must == 0) {
        sdpa_run_null_top(C);
    } else {
        const attn_status st = sdpa_run(C);
        /* check */
        if (sdpa_check(C, st)) {
            sdpa_rerun(C);
            if (C->kv.on || C->qo.on) {
                qo_twin(C);
                kv_recheck(C);
            }
            if (kv_plain(&P->d) && !qo_16(&P->d))
                fuzz_sdpa_bwd(r, P, C->t2);
            else if (kv_plain(&P->d))
                sdpa_bwd_qo16(P);
        }
    }
    sdpa_case_free(C);
    free(C);
}
