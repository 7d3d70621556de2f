/*
 * fuzz_mha16.c -- the element types of the MHA layer (byte 0 bit 7 with
 * bit 0, SEL_QO; fuzz_mha.c and fuzz_mha_train.c call the stages below).
 * Bit 7 was clear in every committed MHA input when it got this meaning
 * (the decoder ignored it), so the corpus decodes as before.
 *
 * decode_mha16: x_type and w_type F32, F16 or BF16 each (a quarter of the
 * inputs one 16-bit type for both, so that BF16 products are common) and
 * one planted field of its own (XB_*, fuzz_mha.h) besides byte 1's BAD_*
 * and, in training, the backward's MB_*.  Every pool element a 16-bit
 * region reads is rounded to its type first (to 0 where one element is
 * read at F16 and at BF16 and no value is exact in both), so the float
 * pool holds the widened values the reference and the fp32 twin read; the
 * call reads the 16-bit twins of the pool (px at x_type, pw at w_type, the
 * same offsets, NaN where never read) through args16 and weights16 and
 * writes Y into a 16-bit buffer of sentinels laid out as the float one.
 *
 * Checks (besides the fp32 path's): the statuses of the 16-bit rules
 * (expect_mha16; the backward's grads16 in fuzz_mha_train.c); on error
 * nothing written (Y, the weights, the gradients, nor through a planted
 * float pointer); Y and the gradients (widened) within the float64
 * reference on the widened values (mref_mha_typed /
 * mref_mha_backward_typed with the BF16 products' roundings, plus each
 * output's own rounding to its type); the sentinel in the gaps and
 * around; bitwise the same for another thread count; and, where the types
 * widen (not BF16 products), bitwise the fp32 layer (forward: Y and the
 * weights; training: every gradient, and accumulate = 1 as round(old + g))
 * on the widened values with each output rounded to its type
 * (attn.h, "Multi-head attention layer: element types").
 */
#include "fuzz_kv.h"
#include "fuzz_mha.h"

void decode_mha16(rd *r, mha_case *C)
{
    mha16_cfg *c = &C->ty;
    const unsigned x = u8(r), z = u8(r);
    if (x >= 192) {
        c->xt = c->wt = (x & 1) ? ATTN_DTYPE_F16 : ATTN_DTYPE_BF16;
    } else {
        c->xt = (attn_dtype)(x % 3);
        c->wt = (attn_dtype)(x / 3 % 3);
    }
    c->bad = z < 160 ? XB_NONE : 1 + (z - 160) % (XB_COUNT_ - 1);
    C->d.x_type = c->xt;
    C->d.w_type = c->wt;
}

/* An invalid element type: 3 and 4 (ATTN_ERR_BAD_OPTION before 1.2, the
 * quantized K/V types Q8_0 and Q4_0 since: ATTN_ERR_UNSUPPORTED_TYPE, see
 * expect_mha_plan) or unknown values; the table is unchanged so that the
 * committed inputs decode as before. */
void mha16_plant_type(rd *r, mha_case *C)
{
    static const int bad_t[6] = { 3, 4, -1, 255, INT_MAX, INT_MIN };
    const int v = bad_t[pick(r, 6)];
    if (u8(r) & 1)
        C->d.x_type = (attn_dtype)v;
    else
        C->d.w_type = (attn_dtype)v;
}

int mha16_bf(const attn_mha_desc *d)
{
    attn_engine e = ATTN_ENGINE_BLAS;
    if (attn_engine_resolve(d->engine, &e) != ATTN_OK)
        FAIL("attn_engine_resolve(%d) failed", (int)d->engine);
    return d->x_type == ATTN_DTYPE_BF16 && d->w_type == ATTN_DTYPE_BF16 &&
           e == ATTN_ENGINE_TILE && !d->use_global_k && !d->use_global_q && !d->block_size;
}

/* The roundings the types add (test/mha_case.c, minst_round). */
void mha16_round(const attn_mha_desc *d, mref_round *rnd)
{
    memset(rnd, 0, sizeof *rnd);
    if (mha16_bf(d))
        rnd->q = rnd->k = rnd->v = rnd->p = rnd->o = dtype_u2(ATTN_DTYPE_BF16);
    rnd->y = dtype_u2(d->x_type);
    rnd->y_abs = d->x_type == ATTN_DTYPE_F16 ? 0x1p-24 : 0.0;
}

float widen16(attn_dtype t, uint16_t h)
{
    float f;
    if (attn_dtype_decode(t, &h, &f, 1) != ATTN_OK)
        FAIL("attn_dtype_decode failed");
    return f;
}
uint16_t narrow16(attn_dtype t, float f)
{
    uint16_t h;
    if (attn_dtype_encode(t, &f, &h, 1) != ATTN_OK)
        FAIL("attn_dtype_encode failed");
    return h;
}
static float round16(attn_dtype t, float f) { return widen16(t, narrow16(t, f)); }

static uint16_t *encode_pool(attn_dtype t, const float *pool, size_t n)
{
    if (t == ATTN_DTYPE_F32)
        return NULL;
    uint16_t *h = xmalloc(n * sizeof(uint16_t));
    if (attn_dtype_encode(t, pool, h, (int64_t)n) != ATTN_OK)
        FAIL("attn_dtype_encode of the pool failed");
    return h;
}

static int is_x_region(const mha_case *C, int i) { return i == C->ix || i == C->ik || i == C->iv; }

void mha16_pools(mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    if (d->x_type == ATTN_DTYPE_F32 && d->w_type == ATTN_DTYPE_F32)
        return;
    uint8_t *ty = calloc(C->pool_len + 1, 1); /* bit t: read at type t */
    if (!ty)
        abort();
    for (int i = 0; i < C->nr; i++) {
        const mha_reg *g = &C->rg[i];
        const unsigned t = is_x_region(C, i) ? d->x_type : d->w_type;
        for (int64_t row = 0; t && row < g->rows; row++)
            for (int64_t x = 0; x < g->width; x++)
                ty[g->off + (size_t)(row * g->stride + x)] |= (uint8_t)(1u << t);
    }
    for (size_t i = 0; i < C->pool_len; i++) {
        float v = C->pool[i];
        if (ty[i] & (1u << ATTN_DTYPE_BF16))
            v = round16(ATTN_DTYPE_BF16, v);
        if (ty[i] & (1u << ATTN_DTYPE_F16))
            v = round16(ATTN_DTYPE_F16, v);
        if ((ty[i] & 6) == 6 && fbits(round16(ATTN_DTYPE_BF16, v)) != fbits(v))
            v = 0.0f;
        C->pool[i] = v;
    }
    free(ty);
    C->px = encode_pool(d->x_type, C->pool, C->pool_len);
    C->pw = encode_pool(d->w_type, C->pool, C->pool_len);
}

int mha16_pools_same(const mha_case *C)
{
    uint16_t *px = encode_pool(C->d.x_type, C->pool, C->pool_len);
    uint16_t *pw = encode_pool(C->d.w_type, C->pool, C->pool_len);
    const size_t n = C->pool_len * sizeof(uint16_t);
    const int same = (!px || !memcmp(px, C->px, n)) && (!pw || !memcmp(pw, C->pw, n));
    free(px);
    free(pw);
    return same;
}

/* The weights' pointers in struct order, float and 16-bit. */
static void w_slots(attn_mha_weights *w, const float **f[10])
{
    const float **t[10] = { &w->in_proj_weight, &w->in_proj_bias, &w->q_weight, &w->k_weight,
                            &w->v_weight, &w->q_bias, &w->k_bias, &w->v_bias,
                            &w->out_weight, &w->out_bias };
    memcpy(f, t, sizeof t);
}
static void w16_slots(attn_mha_weights16 *h, const uint16_t **f[10])
{
    const uint16_t **t[10] = { &h->in_proj_weight, &h->in_proj_bias, &h->q_weight,
                               &h->k_weight, &h->v_weight, &h->q_bias, &h->k_bias,
                               &h->v_bias, &h->out_weight, &h->out_bias };
    memcpy(f, t, sizeof t);
}

void mha16_args(mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    C->wf = C->w;
    C->af = C->a;
    if (d->w_type != ATTN_DTYPE_F32) {
        const float **f[10];
        const uint16_t **h[10];
        attn_mha_weights16_init(&C->w16);
        w_slots(&C->w, f);
        w16_slots(&C->w16, h);
        for (int k = 0; k < 10; k++)
            if (*f[k]) {
                *h[k] = C->pw + (*f[k] - C->pool);
                *f[k] = NULL;
            }
        C->w.weights16 = &C->w16;
    }
    if (d->x_type != ATTN_DTYPE_F32) {
        attn_mha_args *a = &C->a;
        attn_mha_args16 *h = &C->a16;
        attn_mha_args16_init(h);
        h->x = C->px + (a->x - C->pool);
        if (a->key) {
            h->key = C->px + (a->key - C->pool);
            h->value = C->px + (a->value - C->pool);
        }
        obuf16_like(&C->ob16, &C->ob);
        h->out = C->ob16.ptr;
        a->x = a->key = a->value = NULL;
        a->out = NULL;
        a->args16 = h;
    }
}

static int ptrs_set(void *const *p, int n)
{
    for (int i = 0; i < n; i++)
        if (p[i])
            return 1;
    return 0;
}

size_t expect_mha16(expect *e, const attn_mha_desc *d, const attn_mha_weights *w,
                    const attn_mha_args *a, int outputs, ptr_use *f, size_t nf)
{
    static attn_mha_weights16 no_w16;
    static const attn_mha_args16 no_a16;
    const int x16 = d->x_type != ATTN_DTYPE_F32, w16 = d->w_type != ATTN_DTYPE_F32;
    const ptr_use s[2] = { { w16, w->weights16 }, { x16, a->args16 } };
    expect_call(e, s, 2, 0, NULL, 0, NULL, 0, NULL, 0, 0);
    if ((w->weights16 && ptrs_set(w->weights16->reserved, 8)) ||
        (a->args16 && ptrs_set(a->args16->reserved, 8)))
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
    attn_mha_weights16 h = w->weights16 ? *w->weights16 : no_w16;
    const attn_mha_args16 *g = a->args16 ? a->args16 : &no_a16;
    const uint16_t **hs[10];
    w16_slots(&h, hs);
    const void *x16p[4] = { g->x, g->key, g->value, outputs ? g->out : NULL };
    for (size_t i = 0; i < 14; i++) {
        const int is16 = i < 10 ? w16 : x16;
        f[nf++] = (ptr_use){ f[i].used && is16, i < 10 ? (const void *)*hs[i] : x16p[i - 10] };
        f[i].used = f[i].used && !is16;
    }
    return nf;
}

/* Pointers a call must refuse (never written). */
static float junk_f[64];

void mha16_junk_untouched(const char *what)
{
    for (int x = 0; x < 64; x++)
        if (fbits(junk_f[x]) != 0)
            FAIL("%s wrote through a float pointer given besides (or for) a 16-bit one", what);
}

void mha16_plant(rd *r, const attn_mha_desc *d, unsigned bad, const mha16_site *s)
{
    static const attn_mha_weights16 no_w16;
    static const attn_mha_args16 no_a16;
    static const attn_mha_grads16 no_g16;
    const int x16 = d->x_type != ATTN_DTYPE_F32, w16 = d->w_type != ATTN_DTYPE_F32;
    if (bad == XB_NONE || bad == XB_TYPE) /* (XB_TYPE: at plan time) */
        return;
    const int bwd = s->g != NULL;
    const unsigned c = u8(r), k = (c >> 1) % (bwd ? 3 : 2);
    switch (bad) {
    case XB_STRUCT:
        if (k == 0) s->w->weights16 = w16 ? NULL : &no_w16;
        else if (k == 1) s->a->args16 = x16 ? NULL : &no_a16;
        else s->g->grads16 = x16 || w16 ? NULL : &no_g16;
        break;
    case XB_FLOAT:
    case XB_SWAP:
    case XB_PTR16_NULL: {
        /* one tensor of the x side (X, Y; backward: X, dY, dX) or of the w
         * side (W_o, the first input weight; backward: W_o, dW_o) */
        const void **fp, **hp;
        if ((c & 1) && x16) {
            const void **xf[3] = { (const void **)&s->a->x,
                                   bwd ? (const void **)s->dy : (const void **)&s->a->out,
                                   bwd ? (const void **)&s->g->dx : NULL };
            const void **xh[3] = { (const void **)&s->a16->x,
                                   bwd ? (const void **)&s->g16->dy : (const void **)&s->a16->out,
                                   bwd ? (const void **)&s->g16->dx : NULL };
            fp = xf[k], hp = xh[k];
        } else if (!(c & 1) && w16) {
            const int pk = d->packed_in_proj;
            const void **wf[2] = { (const void **)&s->w->out_weight,
                                   bwd ? (const void **)&s->g->d_out_weight
                                       : pk ? (const void **)&s->w->in_proj_weight
                                            : (const void **)&s->w->q_weight };
            const void **wh[2] = { (const void **)&s->w16->out_weight,
                                   bwd ? (const void **)&s->g16->d_out_weight
                                       : pk ? (const void **)&s->w16->in_proj_weight
                                            : (const void **)&s->w16->q_weight };
            fp = wf[k % 2], hp = wh[k % 2];
        } else {
            break;
        }
        if (bad != XB_PTR16_NULL)
            *fp = junk_f;
        if (bad != XB_FLOAT)
            *hp = NULL;
        break;
    }
    case XB_RESERVED: {
        /* a reserved pointer of one struct (attached where its type is F32) */
        void *const junk = junk_f;
        const unsigned at = pick(r, 8);
        if (k == 0) { s->w16->reserved[at] = junk; s->w->weights16 = s->w16; }
        else if (k == 1) { s->a16->reserved[at] = junk; s->a->args16 = s->a16; }
        else { s->g16->reserved[at] = junk; s->g->grads16 = s->g16; }
        break;
    }
    default: break;
    }
}

void mha16_rounded(const uint16_t *b, const float *f, const uint8_t *inview, size_t count,
                   attn_dtype t, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (inview[i] && narrow16(t, f[i]) != b[i])
            FAIL("%s element %zu: 0x%04x, the fp32 layer on the widened values gives %.9g "
                 "(0x%08x), rounded 0x%04x", name, i, (unsigned)b[i], (double)f[i], fbits(f[i]),
                 (unsigned)narrow16(t, f[i]));
}

/* A float buffer laid out as b, sentinel-filled; *view its view's origin. */
static float *like(const obuf *b, float **view)
{
    if (!b->base)
        return *view = NULL;
    float *f = xmalloc(b->count * sizeof(float));
    const float s = sentinel();
    for (size_t i = 0; i < b->count; i++)
        f[i] = s;
    *view = f + (b->ptr - b->base);
    return f;
}

void mha16_twin(const mha_case *C)
{
    const attn_mha_desc *d = &C->d;
    if (mha16_bf(d) || (d->x_type == ATTN_DTYPE_F32 && d->w_type == ATTN_DTYPE_F32))
        return;
    attn_mha_desc d32 = *d;
    d32.x_type = d32.w_type = ATTN_DTYPE_F32;
    attn_mha_args a = C->af;
    float *to = like(&C->ob, &a.out), *tw = like(&C->ow, &a.weights);
    attn_mha_plan *plan = NULL;
    attn_status st = attn_mha_plan_create(&plan, &d32);
    if (st == ATTN_OK)
        st = attn_mha_execute(plan, &C->wf, &a, NULL, 0);
    attn_mha_plan_destroy(plan);
    if (st != ATTN_OK)
        FAIL("the fp32 layer on the widened values: %s", st_name(st));
    if (d->x_type != ATTN_DTYPE_F32)
        mha16_rounded(C->ob16.base, to, C->ob.inview, C->ob.count, d->x_type, "MHA out");
    else if (memcmp(to, C->ob.base, C->ob.count * sizeof(float)))
        FAIL("MHA out (F32, w_type %d) not bitwise the fp32 layer on the widened weights",
             (int)d->w_type);
    if (tw && memcmp(tw, C->ow.base, C->ow.count * sizeof(float)))
        FAIL("MHA weights not bitwise the fp32 layer's on the widened values");
    counts[N_MHA16_TWIN]++;
    free(to);
    free(tw);
}
