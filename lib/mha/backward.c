/* The MHA layer's backward (attn_mha_bwd_execute): dY through the output
 * projection, the SDPA backward from the saved context, and the input and
 * weight gradients of the projections (mha.h). */
#include "mha/mha.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Work items of the backward, in two kinds, each cut into fixed blocks:
 *
 * - an input gradient (BJ_INPUT): C[M][N] (row stride ldc) = sum over
 *   terms t of A_t[M][K_t] W_t[K_t][N] (the weights as stored, row stride
 *   N), in blocks of ATTN_MHA_ROWS rows: the terms add up in order in the
 *   thread's scratch, which then replaces or adds into C;
 * - a weight gradient (BJ_WEIGHT): dW[N][K] = dZ[M][N]^T A[M][K] and
 *   db[N] = sum of dZ rows, in blocks of ATTN_MHA_WROWS rows of dW, each one
 *   GEMM over all M tokens (in chunks of ATTN_MHA_TOKENS, added in order)
 *   and sums in token order, into the scratch, then stored or added.
 *
 * No two blocks write the same element and each computes in an order fixed
 * by the shape, so any thread count gives the same bits, and accumulate
 * gives exactly old + (what overwriting writes). */
enum { BJ_INPUT, BJ_WEIGHT };

typedef struct bterm {
    const float *a;
    int64_t lda;
    const float *w;
    int64_t K;
} bterm;

typedef struct bjob {
    int kind, nterms, acc;
    bterm t[3];          /* BJ_INPUT */
    float *c;            /* BJ_INPUT: C; BJ_WEIGHT: dW */
    int64_t ldc;
    const float *dz;     /* BJ_WEIGHT */
    int64_t ldz;
    const float *x;
    int64_t ldx;
    float *db;
    int64_t M, N, K;
} bjob;

typedef struct bjobs_ctx {
    const attn_gemm_kernels *gk;
    const bjob *jobs;
    int64_t blocks[8];
    int njobs;
    int64_t total;
    char *scratch;
    size_t per_thread;
} bjobs_ctx;

static void store(float *dst, const float *src, int64_t n, int acc)
{
    if (acc)
        for (int64_t i = 0; i < n; i++)
            dst[i] += src[i];
    else
        memcpy(dst, src, (size_t)n * sizeof(float));
}

static void run_input_block(const attn_gemm_kernels *gk, const bjob *j, int64_t r0, float *s)
{
    const int64_t rows = j->M - r0 < ATTN_MHA_ROWS ? j->M - r0 : ATTN_MHA_ROWS;
    for (int t = 0; t < j->nterms; t++)
        attn_gemm(gk, 0, (int)rows, (int)j->N, (int)j->t[t].K, 1.0f,
                  j->t[t].a + r0 * j->t[t].lda, (int)j->t[t].lda, j->t[t].w, (int)j->N,
                  t ? 1.0f : 0.0f, s, (int)j->N);
    for (int64_t r = 0; r < rows; r++)
        store(j->c + (r0 + r) * j->ldc, s + r * j->N, j->N, j->acc);
}

/* A weight gradient stays on the BLAS on either engine: its product sums
 * over every token (K = B x L), so the tile kernels would stream a
 * 4096 x 32 panel of X from L3 for each block of rows, where the BLAS packs
 * it once (measured: T3's backward 20% slower on the tile kernels, while
 * the projections and input gradients run 1.8x faster on them). */
static void run_weight_block(const bjob *j, int64_t n0, float *s)
{
    const int64_t nb = j->N - n0 < ATTN_MHA_WROWS ? j->N - n0 : ATTN_MHA_WROWS;
    for (int64_t t0 = 0; t0 < j->M; t0 += ATTN_MHA_TOKENS) {
        const int64_t tk = j->M - t0 < ATTN_MHA_TOKENS ? j->M - t0 : ATTN_MHA_TOKENS;
        attn_gemm_tn(NULL, (int)nb, (int)j->K, (int)tk, 1.0f, j->dz + t0 * j->ldz + n0,
                     (int)j->ldz, j->x + t0 * j->ldx, (int)j->ldx, t0 ? 1.0f : 0.0f, s,
                     (int)j->K);
    }
    store(j->c + n0 * j->K, s, nb * j->K, j->acc);
    if (j->db) {
        float *sb = s + nb * j->K;
        for (int64_t n = 0; n < nb; n++)
            sb[n] = 0.0f;
        for (int64_t t = 0; t < j->M; t++) {
            const float *z = j->dz + t * j->ldz + n0;
            for (int64_t n = 0; n < nb; n++)
                sb[n] += z[n];
        }
        store(j->db + n0, sb, nb, j->acc);
    }
}

static void bjobs_body(void *arg, int tid)
{
    const bjobs_ctx *c = arg;
    float *s = (float *)(void *)(c->scratch + (size_t)tid * c->per_thread);
#if ATTN_HAVE_OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int64_t it = 0; it < c->total; it++) {
        int64_t k = it;
        int j = 0;
        while (k >= c->blocks[j])
            k -= c->blocks[j++];
        if (c->jobs[j].kind == BJ_INPUT)
            run_input_block(c->gk, &c->jobs[j], k * ATTN_MHA_ROWS, s);
        else
            run_weight_block(&c->jobs[j], k * ATTN_MHA_WROWS, s);
    }
}

static void run_bjobs(const attn_mha_plan *p, const bjob *jobs, int njobs, char *scratch)
{
    bjobs_ctx ctx = { p->x.gk, jobs, { 0 }, njobs, 0, scratch, p->bw_thread };
    for (int i = 0; i < njobs; i++) {
        const int64_t per = jobs[i].kind == BJ_INPUT ? ATTN_MHA_ROWS : ATTN_MHA_WROWS;
        const int64_t n = jobs[i].kind == BJ_INPUT ? jobs[i].M : jobs[i].N;
        ctx.blocks[i] = (n + per - 1) / per;
        ctx.total += ctx.blocks[i];
    }
    attn_parallel(p->x.blas, p->x.nthreads, ctx.total, bjobs_body, (void *)&ctx);
}

static bjob input_job(float *c, int64_t ldc, int64_t M, int64_t N, int acc)
{
    bjob j;
    memset(&j, 0, sizeof j);
    j.kind = BJ_INPUT;
    j.c = c;
    j.ldc = ldc;
    j.M = M;
    j.N = N;
    j.acc = acc;
    return j;
}

static void add_term(bjob *j, const float *a, int64_t lda, const float *w, int64_t K)
{
    j->t[j->nterms++] = (bterm){ a, lda, w, K };
}

static bjob weight_job(float *dw, float *db, const float *dz, int64_t ldz, const float *x,
                       int64_t ldx, int64_t M, int64_t N, int64_t K, int acc)
{
    bjob j;
    memset(&j, 0, sizeof j);
    j.kind = BJ_WEIGHT;
    j.c = dw;
    j.db = db;
    j.dz = dz;
    j.ldz = ldz;
    j.x = x;
    j.ldx = ldx;
    j.M = M;
    j.N = N;
    j.K = K;
    j.acc = acc;
    return j;
}

static attn_status check_bwd_args(const attn_mha_plan *p, const attn_mha_weights *w,
                                  const attn_mha_args *a, const float *dy,
                                  const attn_mha_grads *g)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, bias = d->has_bias, cross = !d->self_attention;
    /* grads16: present exactly when a type is 16-bit */
    const attn_pointer_use gs = { p->x16 || p->w16, g->grads16 };
    attn_status st = attn_check_pointers(&gs, 1);
    if (st != ATTN_OK)
        return st;
    if (g->grads16 && !ATTN_RESERVED_NULL(g->grads16))
        return ATTN_ERR_BAD_OPTION;
    static const attn_mha_grads16 no_g16;
    const attn_mha_grads16 *q = g->grads16 ? g->grads16 : &no_g16;
    /* dY and each gradient: the pointer of its tensor's type, the other
     * NULL (after the weights' and the inputs'). */
    const int wf = !p->w16, ws = p->w16, xf = !p->x16, xs = p->x16;
    const attn_pointer_use grads[] = {
        { xf, dy }, { xs, q->dy },
        { xf, g->dx }, { xs, q->dx }, { cross && xf, g->dkey }, { cross && xs, q->dkey },
        { cross && xf, g->dvalue }, { cross && xs, q->dvalue },
        { packed && wf, g->d_in_proj_weight }, { packed && ws, q->d_in_proj_weight },
        { packed && bias && wf, g->d_in_proj_bias }, { packed && bias && ws, q->d_in_proj_bias },
        { !packed && wf, g->d_q_weight }, { !packed && ws, q->d_q_weight },
        { !packed && wf, g->d_k_weight }, { !packed && ws, q->d_k_weight },
        { !packed && wf, g->d_v_weight }, { !packed && ws, q->d_v_weight },
        { !packed && bias && wf, g->d_q_bias }, { !packed && bias && ws, q->d_q_bias },
        { !packed && bias && wf, g->d_k_bias }, { !packed && bias && ws, q->d_k_bias },
        { !packed && bias && wf, g->d_v_bias }, { !packed && bias && ws, q->d_v_bias },
        { wf, g->d_out_weight }, { ws, q->d_out_weight },
        { bias && wf, g->d_out_bias }, { bias && ws, q->d_out_bias },
    };
    return attn_mha_check_args(p, w, a, 0, grads, sizeof grads / sizeof grads[0]);
}

ATTN_DEFINE_ZERO_INIT(attn_mha_grads_init, attn_mha_grads)
ATTN_DEFINE_ZERO_INIT(attn_mha_grads16_init, attn_mha_grads16)

/* The fp32 tensors of one backward: the caller's, or (16-bit types) the
 * workspace's widened copies and fp32 sums.  lx, lk, lv: the row strides of
 * X, Xk, Xv and of their gradients (the same in either case). */
typedef struct bwd_io {
    const float *x, *xk, *xv, *dy;
    int64_t lx, lk, lv, ldy;
    const float *wq, *wk, *wv, *wo;
    float *dx, *dxk, *dxv;
    float *dwq, *dwk, *dwv, *dwo, *dbq, *dbk, *dbv, *dbo;
} bwd_io;

static void io_f32(const attn_mha_plan *p, const attn_mha_weights *w, const attn_mha_args *a,
                   const float *dy, const attn_mha_grads *g, bwd_io *io)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, self = d->self_attention;
    const int64_t E = p->E;
    io->x = a->x;
    io->xk = self ? a->x : a->key;
    io->xv = self ? a->x : a->value;
    io->lx = p->xs;
    io->lk = self ? p->xs : p->ks;
    io->lv = self ? p->xs : p->vs;
    io->dy = dy;
    io->ldy = p->os;
    io->wq = packed ? w->in_proj_weight : w->q_weight;
    /* (16-bit weights or gradients: the float pointers are NULL, io_16
     * replaces them; no offset is applied to NULL) */
    io->wk = packed && w->in_proj_weight ? w->in_proj_weight + E * E : w->k_weight;
    io->wv = packed && w->in_proj_weight ? w->in_proj_weight + 2 * E * E : w->v_weight;
    io->wo = w->out_weight;
    io->dx = g->dx;
    io->dxk = g->dkey;
    io->dxv = g->dvalue;
    io->dwq = packed ? g->d_in_proj_weight : g->d_q_weight;
    io->dwk = packed && g->d_in_proj_weight ? g->d_in_proj_weight + E * E : g->d_k_weight;
    io->dwv = packed && g->d_in_proj_weight ? g->d_in_proj_weight + 2 * E * E : g->d_v_weight;
    io->dbq = packed ? g->d_in_proj_bias : g->d_q_bias;
    io->dbk = packed && g->d_in_proj_bias ? g->d_in_proj_bias + E : g->d_k_bias;
    io->dbv = packed && g->d_in_proj_bias ? g->d_in_proj_bias + 2 * E : g->d_v_bias;
    io->dwo = g->d_out_weight;
    io->dbo = g->d_out_bias;
}

/* One 16-bit tensor and its fp32 copy in the workspace: rows x width, row
 * strides ldh (16-bit) and width (fp32). */
typedef struct xfer {
    uint16_t *h;
    int64_t ldh;
    float *f;
    int64_t rows, width;
    attn_dtype t;
} xfer;

/* to_f32: f = h widened, else h = f rounded to nearest even. */
static void run_xfers(const attn_mha_plan *p, const xfer *x, int n, int to_f32)
{
    for (int k = 0; k < n; k++) {
        const xfer *z = &x[k];
        const attn_cvt_kernels *cvt = p->x.cvt;
        const int f16 = z->t == ATTN_DTYPE_F16;
#if ATTN_HAVE_OPENMP
#pragma omp parallel for num_threads(p->x.nthreads) schedule(static) if (p->x.nthreads > 1 && z->rows > 1)
#endif
        for (int64_t r = 0; r < z->rows; r++) {
            uint16_t *h = z->h + r * z->ldh;
            float *f = z->f + r * z->width;
            if (to_f32)
                (f16 ? cvt->f16_to_f32 : cvt->bf16_to_f32)(h, f, z->width);
            else
                (f16 ? cvt->f32_to_f16 : cvt->f32_to_bf16)(f, h, z->width);
        }
    }
}

/* A weight or bias as one row (ld its width). */
static xfer mat(attn_dtype t, const uint16_t *h, float *f, int64_t rows, int64_t width)
{
    return (xfer){ (uint16_t *)(uintptr_t)h, width, f, rows, width, t };
}

/* The 16-bit backward's io: the fp32 tensors of the call that are fp32,
 * the workspace's copies of the 16-bit ones.  in[]: the 16-bit inputs
 * (widened before the backward), out[]: the 16-bit gradients and their
 * sums (widened first with accumulate, rounded into after). */
static void io_16(const attn_mha_plan *p, const attn_mha_weights *w, const attn_mha_args *a,
                  const float *dy, const attn_mha_grads *g, char *ws, bwd_io *io, xfer *in,
                  int *nin, xfer *out, int *nout)
{
    const attn_mha_desc *d = &p->d;
    const int packed = d->packed_in_proj, cross = !d->self_attention, bias = d->has_bias;
    const int64_t E = p->E, kvE = p->kvE, BL = p->B * p->L, BS = p->B * p->S;
    io_f32(p, w, a, dy, g, io);
    const attn_mha_grads16 *q = g->grads16;
    *nin = *nout = 0;
#define WS(off) ((float *)(void *)(ws + (off)))
    if (p->x16) {
        const attn_dtype t = d->x_type;
        const attn_mha_args16 *x = a->args16;
        in[(*nin)++] = (xfer){ (uint16_t *)(uintptr_t)x->x, p->xs, WS(p->bw_x[0]), BL, E, t };
        out[(*nout)++] = (xfer){ q->dx, p->xs, WS(p->bw_gx[0]), BL, E, t };
        in[(*nin)++] = (xfer){ (uint16_t *)(uintptr_t)q->dy, p->os, WS(p->bw_dy), BL, E, t };
        io->x = io->xk = io->xv = WS(p->bw_x[0]);
        io->lx = io->lk = io->lv = E;
        io->dy = WS(p->bw_dy);
        io->ldy = E;
        io->dx = WS(p->bw_gx[0]);
        if (cross) {
            in[(*nin)++] = (xfer){ (uint16_t *)(uintptr_t)x->key, p->ks, WS(p->bw_x[1]), BS,
                                   p->kdim, t };
            in[(*nin)++] = (xfer){ (uint16_t *)(uintptr_t)x->value, p->vs, WS(p->bw_x[2]), BS,
                                   p->vdim, t };
            out[(*nout)++] = (xfer){ q->dkey, p->ks, WS(p->bw_gx[1]), BS, p->kdim, t };
            out[(*nout)++] = (xfer){ q->dvalue, p->vs, WS(p->bw_gx[2]), BS, p->vdim, t };
            io->xk = WS(p->bw_x[1]);
            io->xv = WS(p->bw_x[2]);
            io->lk = p->kdim;
            io->lv = p->vdim;
            io->dxk = WS(p->bw_gx[1]);
            io->dxv = WS(p->bw_gx[2]);
        }
    }
    if (p->w16) {
        const attn_dtype t = d->w_type;
        const attn_mha_weights16 *h = w->weights16;
        float *gb = WS(p->bw_gb);
        if (packed) {
            in[(*nin)++] = mat(t, h->in_proj_weight, WS(p->bw_w[0]), 3 * E, E);
            out[(*nout)++] = mat(t, q->d_in_proj_weight, WS(p->bw_gw[0]), 3 * E, E);
            if (bias)
                out[(*nout)++] = mat(t, q->d_in_proj_bias, gb, 1, 3 * E);
        } else {
            in[(*nin)++] = mat(t, h->q_weight, WS(p->bw_w[0]), E, E);
            in[(*nin)++] = mat(t, h->k_weight, WS(p->bw_w[1]), kvE, p->kdim);
            in[(*nin)++] = mat(t, h->v_weight, WS(p->bw_w[2]), kvE, p->vdim);
            out[(*nout)++] = mat(t, q->d_q_weight, WS(p->bw_gw[0]), E, E);
            out[(*nout)++] = mat(t, q->d_k_weight, WS(p->bw_gw[1]), kvE, p->kdim);
            out[(*nout)++] = mat(t, q->d_v_weight, WS(p->bw_gw[2]), kvE, p->vdim);
            if (bias) {
                out[(*nout)++] = mat(t, q->d_q_bias, gb, 1, E);
                out[(*nout)++] = mat(t, q->d_k_bias, gb + E, 1, kvE);
                out[(*nout)++] = mat(t, q->d_v_bias, gb + E + kvE, 1, kvE);
            }
        }
        in[(*nin)++] = mat(t, h->out_weight, WS(p->bw_w[3]), E, E);
        out[(*nout)++] = mat(t, q->d_out_weight, WS(p->bw_gw[3]), E, E);
        if (bias)
            out[(*nout)++] = mat(t, q->d_out_bias, gb + E + 2 * kvE, 1, E);
        const float *w0 = WS(p->bw_w[0]);
        io->wq = w0;
        io->wk = packed ? w0 + E * E : WS(p->bw_w[1]);
        io->wv = packed ? w0 + 2 * E * E : WS(p->bw_w[2]);
        io->wo = WS(p->bw_w[3]);
        float *g0 = WS(p->bw_gw[0]);
        io->dwq = g0;
        io->dwk = packed ? g0 + E * E : WS(p->bw_gw[1]);
        io->dwv = packed ? g0 + 2 * E * E : WS(p->bw_gw[2]);
        io->dwo = WS(p->bw_gw[3]);
        io->dbq = bias ? gb : NULL;
        io->dbk = bias ? gb + E : NULL;
        io->dbv = bias ? gb + E + kvE : NULL;
        io->dbo = bias ? gb + E + 2 * kvE : NULL;
    }
#undef WS
}

attn_status attn_mha_bwd_execute(const attn_mha_plan *p, const attn_mha_weights *w,
                              const attn_mha_args *a, const float *dy, const void *context,
                              size_t context_bytes, attn_mha_grads *g, int accumulate,
                              void *workspace, size_t workspace_bytes)
{
    if (!p || !w || !a || !g)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(w) || !ATTN_RESERVED_NULL(a) || !ATTN_RESERVED_NULL(g))
        return ATTN_ERR_BAD_OPTION;
    if (p->no_training)
        return ATTN_ERR_TOO_LARGE;
    attn_status st = check_bwd_args(p, w, a, dy, g);
    if (st != ATTN_OK || (st = attn_mha_check_context(p, context, context_bytes)) != ATTN_OK)
        return st;
    if (accumulate != 0 && accumulate != 1)
        return ATTN_ERR_BAD_OPTION;
    void *wsv;
    if ((st = attn_workspace_acquire(workspace, workspace_bytes, p->bw_bytes, &wsv)) != ATTN_OK)
        return st;
    char *ws = wsv;
    const char *cx = context;
    const attn_mha_desc *d = &p->d;
    const int64_t E = p->E, BL = p->B * p->L, BS = p->B * p->S;
    const int acc = accumulate;
    bwd_io io;
    xfer in[8], out[12];
    int nin = 0, nout = 0;
    if (p->x16 || p->w16) {
        io_16(p, w, a, dy, g, ws, &io, in, &nin, out, &nout);
        run_xfers(p, in, nin, 1);
        if (acc)
            run_xfers(p, out, nout, 1);
    } else {
        io_f32(p, w, a, dy, g, &io);
    }
    const float *q = (const float *)(const void *)(cx + p->cx_q);
    const float *k = (const float *)(const void *)(cx + p->cx_k);
    const float *v = (const float *)(const void *)(cx + p->cx_v);
    const float *o = (const float *)(const void *)(cx + p->cx_o);
    const float *lse = (const float *)(const void *)(cx + p->cx_lse);
    float *dout = (float *)(void *)(ws + p->bw_do);
    float *dq = (float *)(void *)(ws + p->bw_q);
    float *dk = (float *)(void *)(ws + p->bw_k);
    float *dv = (float *)(void *)(ws + p->bw_v);
    char *scratch = ws + p->bw_scratch;

    /* dO = dY W_o (into the workspace: no gradient is written before the
     * SDPA backward has succeeded). */
    bjob jobs[8];
    jobs[0] = input_job(dout, E, BL, E, 0);
    add_term(&jobs[0], io.dy, io.ldy, io.wo, E);
    run_bjobs(p, jobs, 1, scratch);

    /* dQ, dK, dV: the SDPA backward under the forward's masks. */
    uint8_t *keep = NULL;
    if (p->combine) {
        keep = (uint8_t *)(ws + p->bw_mask);
        attn_mha_build_mask(p, a, keep);
    }
    attn_sdpa_bwd_args sa = {
        .lse = lse, .kv_lens = a->kv_lens, .q_lens = a->q_lens,
        .mask = p->combine ? keep : d->mask_mode != ATTN_MASK_NONE ? a->mask : a->key_padding_mask,
        .bias = a->bias, .dbias = NULL,
        .global_k = a->global_k, .global_q = a->global_q, .layout = a->layout,
    };
    attn_sdpa_bwd_args16 s16;
    if (p->bf) {
        /* The BF16 SDPA backward on the context's BF16 Q, K, V, O, with dO
         * rounded to BF16; dQ, dK, dV (BF16) and O widened afterwards. */
        uint16_t *do16 = (uint16_t *)(void *)(ws + p->bw_do16);
        xfer r = { do16, E, dout, BL, E, ATTN_DTYPE_BF16 };
        run_xfers(p, &r, 1, 0);
        attn_sdpa_bwd_args16_init(&s16);
        s16.q = (const uint16_t *)(const void *)q;
        s16.k = (const uint16_t *)(const void *)k;
        s16.v = (const uint16_t *)(const void *)v;
        s16.o = (const uint16_t *)(const void *)o;
        s16.d_o = do16;
        s16.dq = (uint16_t *)(void *)(ws + p->bw_q16);
        s16.dk = (uint16_t *)(void *)(ws + p->bw_k16);
        s16.dv = (uint16_t *)(void *)(ws + p->bw_v16);
        sa.args16 = &s16;
    } else {
        sa.q = q;
        sa.k = k;
        sa.v = v;
        sa.o = o;
        sa.d_o = dout;
        sa.dq = dq;
        sa.dk = dk;
        sa.dv = dv;
    }
    st = attn_sdpa_bwd_execute(p->sdpa_bwd, &sa, ws + p->bw_sdpa, p->bw_bytes - p->bw_sdpa);
    if (st == ATTN_OK && p->bf) {
        /* dense blocks: [B*L][3E] when fused, else Q's, K's and V's */
        const int64_t nq = p->fused_qkv ? 3 * E : E, nkv = p->fused_qkv ? 0 : p->kvE;
        const xfer wide[4] = {
            { s16.dq, nq, dq, BL, nq, ATTN_DTYPE_BF16 },
            { s16.dk, nkv, dk, BS, nkv, ATTN_DTYPE_BF16 },
            { s16.dv, nkv, dv, BS, nkv, ATTN_DTYPE_BF16 },
            { (uint16_t *)(uintptr_t)s16.o, E, (float *)(void *)(ws + p->bw_o32), BL, E,
              ATTN_DTYPE_BF16 },
        };
        run_xfers(p, wide, 4, 1);
        o = (const float *)(const void *)(ws + p->bw_o32);
    }

    if (st == ATTN_OK) {
        /* The projections' gradients, in the weights' layout. */
        int n = 0;
        /* dW_o = dY^T O, db_o = sum of dY rows. */
        jobs[n++] = weight_job(io.dwo, io.dbo, io.dy, io.ldy, o, E, BL, E, E, acc);
        jobs[n] = input_job(io.dx, io.lx, BL, E, acc);
        add_term(&jobs[n], dq, p->ldq, io.wq, E);
        if (d->self_attention) {
            add_term(&jobs[n], dk, p->ldk, io.wk, p->kvE);
            add_term(&jobs[n], dv, p->ldv, io.wv, p->kvE);
            n++;
        } else {
            n++;
            jobs[n] = input_job(io.dxk, io.lk, BS, p->kdim, acc);
            add_term(&jobs[n++], dk, p->ldk, io.wk, p->kvE);
            jobs[n] = input_job(io.dxv, io.lv, BS, p->vdim, acc);
            add_term(&jobs[n++], dv, p->ldv, io.wv, p->kvE);
        }
        jobs[n++] = weight_job(io.dwq, io.dbq, dq, p->ldq, io.x, io.lx, BL, E, E, acc);
        jobs[n++] = weight_job(io.dwk, io.dbk, dk, p->ldk, io.xk, io.lk, BS, p->kvE, p->kdim, acc);
        jobs[n++] = weight_job(io.dwv, io.dbv, dv, p->ldv, io.xv, io.lv, BS, p->kvE, p->vdim, acc);
        run_bjobs(p, jobs, n, scratch);
        run_xfers(p, out, nout, 0);
    }
    if (!workspace)
        free(ws);
    return st;
}
