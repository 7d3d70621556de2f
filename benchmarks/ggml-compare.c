/*
 * ggml-compare: attn's decode path against ggml's ggml_flash_attn_ext (its
 * CPU backend) on attn-bench's decode shapes, with the K/V cache stored
 * F16, Q8_0 and Q4_0, in one process.  Built only when Meson is given
 * -Dggml_prefix=DIR (an installed ggml; benchmarks/README.md says how to
 * build one in a temporary folder); ggml's code is never part of attn.
 *
 *   ggml-compare [--case S5|D2|D3 ...] [--type f16|q8_0|q4_0 ...]
 *                [--threads 1 --threads 2] [--runs 20] [--kv-mib M]
 *                [--bw-mib M] [--int8-scores]
 *
 * --int8-scores runs attn's Q8_0 and Q4_0 rows with desc.qk_int8 (attn.h,
 * "Integer scores"): Q rounded to int8 per block and integer dot
 * products, the arithmetic of ggml's own Q K^T on those types.
 *
 * The shapes are attn-bench's case table (cases.c):
 *
 *   S5  B 1, Hq 32, Hkv 8, n 1, m 4096, d 128; no mask for ggml
 *   D2  B 8, Hq 32, Hkv 8, n 1, kv lengths 512, 1024, ..., 4096, two rows:
 *       contig  ggml: one batch-8 call, K/V [d, 4096, Hkv, 8] (each
 *               sequence padded to 4096 rows) and an F16 mask
 *               [4096, 1, 1, 8] (ne33 = 8: one mask row per sequence)
 *               that is -inf past the sequence's length; ggml skips a key
 *               whose mask is -inf before reading it.  attn: the same bytes
 *               as a contiguous [B][Hkv][4096][d] cache with kv_lens.
 *       paged   llama.cpp's unified cache: one tensor of cells
 *               [cells][Hkv][d], each sequence owning blocks of 16 cells
 *               scattered in a random order; ggml sees the 8 sequences'
 *               queries as q [d, 8, Hq, 1] (its n dimension) and a mask
 *               [cells, 8] that is 0 on the row's own cells and -inf
 *               elsewhere, as llama.cpp decodes several sequences in one
 *               batch; attn reads the same bytes as a paged pool
 *               (kv_block_size 16, the block table from the same
 *               placement, kv_lens), as attn-bench's D2 paged row.
 *   D3  B 1, n 4, m 4096, bottom-right causal: ggml's mask [4096, 4, 1, 1]
 *       is -inf at j > m - n + i (window_right 0 for attn).
 *
 * For each case and type: K and V are drawn once (uniform [-1, 1), as
 * attn-bench), quantized once with ggml's own quantizer
 * (ggml_quantize_chunk; ggml_fp32_to_fp16_row for F16), and both libraries
 * read the SAME bytes: block_q8_0 / block_q4_0 are attn's Q8_0 / Q4_0
 * (attn.h, "Quantized KV caches"), and ggml's [d, m, Hkv, B] tensor is
 * attn's view attn_view_bhsd(Hkv, m, d), strides in values.  attn_quantize
 * is run on the same floats too and its bytes compared with ggml's.  The
 * cache is copied R times, R x the bytes a call reads >= 4 x L3 (at least
 * 256 MiB; --kv-mib), and every call reads the next copy, round-robin, so
 * K and V come from memory (as attn-bench's decode cases).  The ggml graph
 * is built once per case and type (a no_alloc context whose tensors point
 * at these buffers; a call sets K's and V's data to the next copy), planned
 * once per thread count with a ggml threadpool (ggml_graph_plan, then
 * ggml_graph_compute each call), the work buffer allocated once; attn's
 * plan is made once per thread count (desc.threads) with its workspace.
 *
 * Timing: after one pass over every copy (attn, the first read of a page
 * after the copies were written is slower), for each thread count the two
 * libraries alternate in 2 rounds of 3 warm-up + runs/2 timed calls each;
 * median and min of the timed calls.  GB/s counts the K/V bytes a call
 * must read (sum of kv lengths x Hkv x 2 rows x the row's bytes: 2 d for
 * F16, 34 d / 32 for Q8_0, 18 d / 32 for Q4_0), the same for both.
 *
 * Checks (after the timing, on copy 0): max |ggml - attn| over the whole
 * output, and each one's largest error against float64 on 4 query heads of
 * every sequence from the stored (de-quantized) values.  They are not
 * bitwise equal: ggml rounds Q to its K type's vec_dot type first (F16 for
 * an F16 cache, Q8_0 blocks for a Q8_0 or Q4_0 cache) and, with an F16 V,
 * accumulates the output rows in F16 (ggml_vec_mad_f16); attn keeps Q and
 * every sum in fp32 and uses each stored value exactly.
 */
#include "attn.h"
#include "cases.h"
#include "harness.h"

#include <ggml-cpu.h>
#include <ggml.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    BLOCK = 16,          /* D2 paged: cells per block (attn's kv_block_size) */
    SAMPLE_HEADS = 4,    /* query heads per sequence checked against float64 */
    ROUNDS = 2,          /* ggml and attn alternate this many times */
    WARM = 3,            /* untimed calls before each round's timed ones */
    MAX_THREADS = 8,
    MAX_ROWS = 64,
};

enum { LAY_CONTIG, LAY_PAGED };
static const char *const layout_name[] = { "contig", "paged" };
static int int8_scores;   /* --int8-scores: desc.qk_int8 on the block types */

typedef struct ktype {
    const char *name;
    enum ggml_type g;
    attn_dtype a;
} ktype;
static const ktype ktypes[] = {
    { "f16", GGML_TYPE_F16, ATTN_DTYPE_F16 },
    { "q8_0", GGML_TYPE_Q8_0, ATTN_DTYPE_Q8_0 },
    { "q4_0", GGML_TYPE_Q4_0, ATTN_DTYPE_Q4_0 },
};
enum { NTYPES = sizeof ktypes / sizeof ktypes[0] };

/* ---- buffers ------------------------------------------------------------- */

/* Zero-filled pages, present only where written or prefaulted (a
 * contiguous D2 copy's rows past a sequence's length are never touched). */
static void *big_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

/* Makes the pages of [p, p + bytes) present at once (a fault per page costs
 * about 3 ms per MiB on the VMs this runs on). */
static void prefault(void *p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = (uintptr_t)p + bytes;
    if (bytes)
        (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

static void die(const char *what)
{
    fprintf(stderr, "ggml-compare: %s\n", what);
    exit(1);
}

/* ---- one case and type: the cache, the ggml graph, attn's plans ---------- */

typedef struct setup {
    const bench_case *c;
    int layout;
    const ktype *t;
    int64_t B, Hq, Hkv, n, m, d;
    int32_t kvl[64];
    size_t row_bytes;            /* one d-long row as stored */
    /* paged: the cells, BLOCK per block, block_table[b][lb] */
    int64_t maxb, nblocks;
    int32_t *table;
    /* the stored rows, logical [B][Hkv][m] (rows < kv_len written) */
    char *km, *vm;
    size_t master_bytes;
    /* R copies in the case's layout */
    char *kc, *vc;
    size_t copy_bytes;
    int R, next;
    double kv_bytes;             /* K/V bytes one call must read */
    float *q;                    /* ggml's q tensor's data */
    uint16_t *mask;              /* ggml's mask (F16), or NULL */
    float *og, *oa;              /* outputs, ggml's layout [B][n][Hq][d] */
    int64_t q_rows;              /* B x n x Hq */
    /* ggml */
    struct ggml_context *ctx;
    struct ggml_cgraph *gf;
    struct ggml_tensor *gk, *gv, *gk_base, *gv_base;
    /* attn */
    attn_sdpa_desc desc;
    attn_sdpa_args args;
} setup;

/* Byte offset of logical row (b, h, j) in one copy of the cache. */
static size_t row_off(const setup *s, int64_t b, int64_t h, int64_t j)
{
    if (s->layout == LAY_CONTIG)
        return (size_t)((b * s->Hkv + h) * s->m + j) * s->row_bytes;
    const int64_t cell = (int64_t)s->table[b * s->maxb + j / BLOCK] * BLOCK + j % BLOCK;
    return (size_t)(cell * s->Hkv + h) * s->row_bytes;
}

/* Index of query (b, h, i) in ggml's q data: [B][Hq][n][d] (q [d, n, Hq,
 * B]), or for the paged row [Hq][B][d] (q [d, B, Hq, 1], n = 1). */
static size_t q_at(const setup *s, int64_t b, int64_t h, int64_t i)
{
    if (s->layout == LAY_PAGED)
        return (size_t)((h * s->B + b) * s->d);
    return (size_t)(((b * s->Hq + h) * s->n + i) * s->d);
}

/* Index of output (b, h, i) in ggml's result: [d, Hq, n, B], i.e. [B][n][Hq][d]
 * (the paged row: [d, Hq, B, 1], the same with n = 1). */
static size_t o_at(const setup *s, int64_t b, int64_t h, int64_t i)
{
    return (size_t)(((b * s->n + i) * s->Hq + h) * s->d);
}

/* Rows of copies r0 .. r1 - 1 from the stored rows. */
static void copies_fill(setup *s, int r0, int r1)
{
    for (int r = r0; r < r1; r++) {
        char *kd = s->kc + (size_t)r * s->copy_bytes, *vd = s->vc + (size_t)r * s->copy_bytes;
        if (s->layout == LAY_PAGED) {
            prefault(kd, s->copy_bytes);
            prefault(vd, s->copy_bytes);
        }
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t h = 0; h < s->Hkv; h++) {
                const size_t src = (size_t)((b * s->Hkv + h) * s->m) * s->row_bytes;
                if (s->layout == LAY_CONTIG) {
                    const size_t len = (size_t)s->kvl[b] * s->row_bytes;
                    prefault(kd + src, len);
                    prefault(vd + src, len);
                    memcpy(kd + src, s->km + src, len);
                    memcpy(vd + src, s->vm + src, len);
                    continue;
                }
                for (int64_t j = 0; j < s->kvl[b]; j++) {
                    const size_t dst = row_off(s, b, h, j), o = src + (size_t)j * s->row_bytes;
                    memcpy(kd + dst, s->km + o, s->row_bytes);
                    memcpy(vd + dst, s->vm + o, s->row_bytes);
                }
            }
    }
}

/* Random values for rows < kv_len, stored with ggml's quantizer; the
 * number of rows whose attn_quantize bytes differ from ggml's goes to
 * *mismatch. */
static void master_fill(setup *s, int64_t *mismatch)
{
    const int64_t d = s->d;
    float *x = malloc(sizeof(float) * (size_t)(s->m * d));
    char *mine = malloc(s->row_bytes * (size_t)s->m);
    if (!x || !mine)
        die("out of memory");
    *mismatch = 0;
    for (int kv = 0; kv < 2; kv++) {
        char *dst0 = kv ? s->vm : s->km;
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t h = 0; h < s->Hkv; h++) {
                const int64_t rows = s->kvl[b];
                char *dst = dst0 + (size_t)((b * s->Hkv + h) * s->m) * s->row_bytes;
                for (int64_t i = 0; i < rows * d; i++)
                    x[i] = frand();
                prefault(dst, (size_t)rows * s->row_bytes);
                if (s->t->g == GGML_TYPE_F16)
                    ggml_fp32_to_fp16_row(x, (ggml_fp16_t *)dst, rows * d);
                else
                    ggml_quantize_chunk(s->t->g, x, dst, 0, rows, d, NULL);
                if (attn_quantize(s->t->a, x, mine, rows * d) != ATTN_OK)
                    die("attn_quantize failed");
                for (int64_t j = 0; j < rows; j++)
                    *mismatch += memcmp(mine + (size_t)j * s->row_bytes,
                                        dst + (size_t)j * s->row_bytes, s->row_bytes) != 0;
            }
    }
    free(x);
    free(mine);
}

/* The F16 mask of ggml (0 visible, -inf hidden), or NULL for S5. */
static void mask_fill(setup *s)
{
    const uint16_t vis = 0x0000, hid = 0xFC00;   /* binary16 +0 and -inf */
    const bench_case *c = s->c;
    if (s->layout == LAY_PAGED) {   /* [cells][B]: each query row its own cells */
        const int64_t cells = s->nblocks * BLOCK;
        s->mask = malloc(sizeof(uint16_t) * (size_t)(cells * s->B));
        if (!s->mask)
            die("out of memory");
        for (int64_t i = 0; i < cells * s->B; i++)
            s->mask[i] = hid;
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t j = 0; j < s->kvl[b]; j++)
                s->mask[b * cells + s->table[b * s->maxb + j / BLOCK] * BLOCK + j % BLOCK] = vis;
        return;
    }
    if (!c->causal && !c->padded)
        return;
    /* [B or 1][n][m] */
    const int64_t mb = c->padded ? s->B : 1;
    s->mask = malloc(sizeof(uint16_t) * (size_t)(mb * s->n * s->m));
    if (!s->mask)
        die("out of memory");
    for (int64_t b = 0; b < mb; b++)
        for (int64_t i = 0; i < s->n; i++)
            for (int64_t j = 0; j < s->m; j++) {
                const int64_t len = s->kvl[b];
                const int64_t lim = c->causal ? len - s->n + i + 1 : len;
                s->mask[(b * s->n + i) * s->m + j] = j < lim ? vis : hid;
            }
}

static void ggml_build(setup *s)
{
    const struct ggml_init_params ip = {
        .mem_size = ggml_tensor_overhead() * 16 + ggml_graph_overhead() + 4096,
        .mem_buffer = NULL,
        .no_alloc = true,
    };
    if (!(s->ctx = ggml_init(ip)))
        die("ggml_init failed");
    const int64_t d = s->d, Hq = s->Hq, Hkv = s->Hkv;
    struct ggml_tensor *q, *k, *v, *mask = NULL;
    if (s->layout == LAY_PAGED) {
        const int64_t cells = s->nblocks * BLOCK;
        q = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F32, d, s->B, Hq, 1);
        s->gk_base = ggml_new_tensor_2d(s->ctx, s->t->g, d * Hkv, cells);
        s->gv_base = ggml_new_tensor_2d(s->ctx, s->t->g, d * Hkv, cells);
        s->gk_base->data = s->kc;
        s->gv_base->data = s->vc;
        /* llama.cpp's view of a layer's cache: [d, cells, Hkv], rows of a
         * head Hkv x d values apart */
        k = ggml_view_3d(s->ctx, s->gk_base, d, cells, Hkv, ggml_row_size(s->t->g, d * Hkv),
                         ggml_row_size(s->t->g, d), 0);
        v = ggml_view_3d(s->ctx, s->gv_base, d, cells, Hkv, ggml_row_size(s->t->g, d * Hkv),
                         ggml_row_size(s->t->g, d), 0);
        mask = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F16, cells, s->B, 1, 1);
    } else {
        q = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F32, d, s->n, Hq, s->B);
        k = ggml_new_tensor_4d(s->ctx, s->t->g, d, s->m, Hkv, s->B);
        v = ggml_new_tensor_4d(s->ctx, s->t->g, d, s->m, Hkv, s->B);
        if (s->mask)
            mask = ggml_new_tensor_4d(s->ctx, GGML_TYPE_F16, s->m, s->n, 1,
                                      s->c->padded ? s->B : 1);
    }
    q->data = s->q;
    k->data = s->kc;
    v->data = s->vc;
    if (mask)
        mask->data = s->mask;
    struct ggml_tensor *out = ggml_flash_attn_ext(s->ctx, q, k, v, mask,
                                                  1.0f / sqrtf((float)d), 0.0f, 0.0f);
    out->data = s->og;
    s->gk = k;
    s->gv = v;
    s->gf = ggml_new_graph(s->ctx);
    ggml_build_forward_expand(s->gf, out);
}

static void attn_build(setup *s)
{
    attn_sdpa_desc *dd = &s->desc;
    attn_sdpa_desc_init(dd);
    const int64_t d = s->d, Hq = s->Hq, Hkv = s->Hkv;
    dd->batch = s->B;
    dd->q_heads = Hq;
    dd->kv_heads = Hkv;
    dd->q_len = s->n;
    dd->kv_len = s->m;
    dd->qk_dim = dd->v_dim = d;
    dd->scale = 1.0f / sqrtf((float)d);
    dd->k_type = dd->v_type = s->t->a;
    dd->qk_int8 = int8_scores && s->t->a != ATTN_DTYPE_F16;
    /* the output in ggml's layout [B][n][Hq][d] */
    dd->o = attn_view_bshd(Hq, s->n, d);
    if (s->layout == LAY_PAGED) {
        dd->q = (attn_view){ d, s->B * d, d };           /* [Hq][B][d] */
        dd->k = dd->v = (attn_view){ BLOCK * Hkv * d, d, Hkv * d };   /* [cells][Hkv][d] */
        dd->kv_block_size = BLOCK;
        dd->kv_num_blocks = s->nblocks;
        dd->kv_max_blocks = s->maxb;
    } else {
        dd->q = attn_view_bhsd(Hq, s->n, d);
        dd->k = dd->v = attn_view_bhsd(Hkv, s->m, d);
    }
    if (s->c->causal) {
        dd->align = ATTN_ALIGN_BOTTOM_RIGHT;
        dd->window_right = 0;
    }
    dd->use_kv_lens = s->c->padded;
    attn_sdpa_args_init(&s->args);
    s->args.q = s->q;
    s->args.o = s->oa;
    s->args.kv_lens = s->c->padded ? s->kvl : NULL;
    s->args.block_table = s->layout == LAY_PAGED ? s->table : NULL;
}

static void setup_make(setup *s, const bench_case *c, int layout, const ktype *t,
                       size_t target, int64_t *mismatch)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->layout = layout;
    s->t = t;
    s->B = c->B;
    s->Hq = c->Hq;
    s->Hkv = c->Hkv;
    s->n = c->n;
    s->m = c->m;
    s->d = c->d;
    if (s->B > 64 || s->d % 32 || s->m % BLOCK)
        die("a case this program cannot take (B > 64, d % 32, m % 16)");
    if (layout == LAY_PAGED && s->n != 1)
        die("the paged row takes one query per sequence");
    s->row_bytes = ggml_row_size(t->g, s->d);
    int64_t rows = 0;
    for (int64_t b = 0; b < s->B; b++)
        rows += s->kvl[b] = (int32_t)case_kv_len(c, b);
    s->kv_bytes = (double)rows * (double)s->Hkv * 2.0 * (double)s->row_bytes;

    /* the paged placement: the pool's blocks in a random permutation, each
     * sequence's logical blocks taking the next ones (as attn-bench) */
    if (layout == LAY_PAGED) {
        s->maxb = s->m / BLOCK;
        for (int64_t b = 0; b < s->B; b++)
            s->nblocks += (s->kvl[b] + BLOCK - 1) / BLOCK;
        s->table = calloc((size_t)(s->B * s->maxb), sizeof(int32_t));
        int32_t *perm = malloc(sizeof(int32_t) * (size_t)s->nblocks);
        if (!s->table || !perm)
            die("out of memory");
        for (int64_t i = 0; i < s->nblocks; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = s->nblocks - 1; i > 0; i--) {
            const int64_t r = (int64_t)((frand() * 0.5f + 0.5f) * (float)(i + 1)) % (i + 1);
            const int32_t tmp = perm[i];
            perm[i] = perm[r];
            perm[r] = tmp;
        }
        int64_t next = 0;
        for (int64_t b = 0; b < s->B; b++)
            for (int64_t lb = 0; lb < (s->kvl[b] + BLOCK - 1) / BLOCK; lb++)
                s->table[b * s->maxb + lb] = perm[next++];
        free(perm);
    }

    s->q_rows = s->B * s->n * s->Hq;
    s->q = alloc_fill((size_t)(s->q_rows * s->d), 1);
    s->og = alloc_fill((size_t)(s->q_rows * s->d), 0);
    s->oa = alloc_fill((size_t)(s->q_rows * s->d), 0);
    s->master_bytes = (size_t)(s->B * s->Hkv * s->m) * s->row_bytes;
    s->km = big_alloc(s->master_bytes);
    s->vm = big_alloc(s->master_bytes);
    if (!s->q || !s->og || !s->oa || !s->km || !s->vm)
        die("out of memory");
    master_fill(s, mismatch);
    mask_fill(s);

    const size_t copy = layout == LAY_PAGED ? (size_t)(s->nblocks * BLOCK * s->Hkv) * s->row_bytes
                                            : s->master_bytes;
    s->copy_bytes = (copy + 4095) / 4096 * 4096;
    s->R = (int)ceil((double)target / s->kv_bytes);
    if (s->R < 2)
        s->R = 2;
    s->kc = big_alloc(s->copy_bytes * (size_t)s->R);
    s->vc = big_alloc(s->copy_bytes * (size_t)s->R);
    if (!s->kc || !s->vc)
        die("out of memory (K/V copies)");
    copies_fill(s, 0, s->R);
    ggml_build(s);
    attn_build(s);
}

static void setup_free(setup *s)
{
    ggml_free(s->ctx);
    big_free(s->kc, s->copy_bytes * (size_t)s->R);
    big_free(s->vc, s->copy_bytes * (size_t)s->R);
    big_free(s->km, s->master_bytes);
    big_free(s->vm, s->master_bytes);
    free(s->q);
    free(s->og);
    free(s->oa);
    free(s->mask);
    free(s->table);
}

/* ---- the calls ------------------------------------------------------------ */

typedef struct runner {
    setup *s;
    struct ggml_cplan cplan;
    struct ggml_threadpool *tp;
    attn_sdpa_plan *plan;
    void *ws;
    size_t ws_bytes;
} runner;

static void runner_make(runner *x, setup *s, int threads)
{
    memset(x, 0, sizeof *x);
    x->s = s;
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    if (!(x->tp = ggml_threadpool_new(&tpp)))
        die("ggml_threadpool_new failed");
    x->cplan = ggml_graph_plan(s->gf, threads, x->tp);
    if (x->cplan.work_size && !(x->cplan.work_data = malloc(x->cplan.work_size)))
        die("out of memory");
    s->desc.threads = threads;
    attn_status st = attn_sdpa_plan_create(&x->plan, &s->desc);
    if (st != ATTN_OK) {
        fprintf(stderr, "ggml-compare: attn plan: %s\n", attn_status_str(st));
        exit(1);
    }
    attn_sdpa_workspace_size(x->plan, &x->ws_bytes);
    if (!(x->ws = aligned_alloc(64, (x->ws_bytes + 63) / 64 * 64 + 64)))
        die("out of memory");
}

static void runner_free(runner *x)
{
    free(x->cplan.work_data);
    ggml_threadpool_free(x->tp);
    attn_sdpa_plan_destroy(x->plan);
    free(x->ws);
}

static void call_ggml(runner *x, int r)
{
    setup *s = x->s;
    char *kp = s->kc + (size_t)r * s->copy_bytes, *vp = s->vc + (size_t)r * s->copy_bytes;
    s->gk->data = kp;
    s->gv->data = vp;
    if (s->gk_base) {
        s->gk_base->data = kp;
        s->gv_base->data = vp;
    }
    if (ggml_graph_compute(s->gf, &x->cplan) != GGML_STATUS_SUCCESS)
        die("ggml_graph_compute failed");
}

static void call_attn(runner *x, int r)
{
    setup *s = x->s;
    const char *kp = s->kc + (size_t)r * s->copy_bytes, *vp = s->vc + (size_t)r * s->copy_bytes;
    if (s->t->a == ATTN_DTYPE_F16) {
        s->args.k16 = (const uint16_t *)kp;
        s->args.v16 = (const uint16_t *)vp;
    } else {
        s->args.kq = kp;
        s->args.vq = vp;
    }
    attn_status st = attn_sdpa_execute(x->plan, &s->args, x->ws, x->ws_bytes);
    if (st != ATTN_OK) {
        fprintf(stderr, "ggml-compare: attn execute: %s\n", attn_status_str(st));
        exit(1);
    }
}

/* calls of one library: WARM untimed, then count timed into t[] */
static void timed(runner *x, int lib, int count, double *t)
{
    setup *s = x->s;
    for (int i = 0; i < WARM + count; i++) {
        const int r = s->next;
        s->next = (s->next + 1) % s->R;
        const double t0 = now_ms();
        if (lib == 0)
            call_ggml(x, r);
        else
            call_attn(x, r);
        if (i >= WARM)
            t[i - WARM] = now_ms() - t0;
    }
}

/* ---- checks ----------------------------------------------------------------- */

/* Largest |o - float64| over SAMPLE_HEADS query heads of every sequence. */
static double sampled_error(const setup *s, const float *o)
{
    const int64_t d = s->d, g = s->Hq / s->Hkv;
    double *sc = malloc(sizeof(double) * (size_t)s->m), *acc = malloc(sizeof(double) * (size_t)d);
    float *kr = malloc(sizeof(float) * (size_t)(s->m * d));
    float *vr = malloc(sizeof(float) * (size_t)(s->m * d));
    double err = 0;
    if (!sc || !acc || !kr || !vr)
        die("out of memory");
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t hs = 0; hs < SAMPLE_HEADS; hs++) {
            const int64_t h = hs * (s->Hq - 1) / (SAMPLE_HEADS - 1), hk = h / g, len = s->kvl[b];
            const size_t off = (size_t)((b * s->Hkv + hk) * s->m) * s->row_bytes;
            if (attn_dequantize(s->t->a, s->km + off, kr, len * d) != ATTN_OK ||
                attn_dequantize(s->t->a, s->vm + off, vr, len * d) != ATTN_OK)
                die("attn_dequantize failed");
            for (int64_t i = 0; i < s->n; i++) {
                const float *qi = s->q + q_at(s, b, h, i);
                const int64_t lim = s->c->causal ? len - s->n + i + 1 : len;
                double mx = -INFINITY, den = 0;
                for (int64_t j = 0; j < lim; j++) {
                    double dot = 0;
                    for (int64_t t = 0; t < d; t++)
                        dot += (double)qi[t] * kr[j * d + t];
                    sc[j] = dot / sqrt((double)d);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                memset(acc, 0, sizeof(double) * (size_t)d);
                for (int64_t j = 0; j < lim; j++) {
                    const double w = exp(sc[j] - mx);
                    den += w;
                    for (int64_t t = 0; t < d; t++)
                        acc[t] += w * vr[j * d + t];
                }
                const float *oi = o + o_at(s, b, h, i);
                for (int64_t t = 0; t < d; t++) {
                    const double e = fabs((double)oi[t] - acc[t] / den);
                    if (!(e <= err))
                        err = e;
                }
            }
        }
    free(sc);
    free(acc);
    free(kr);
    free(vr);
    return err;
}

/* ---- the run ---------------------------------------------------------------- */

typedef struct row {
    const char *case_id, *layout, *type;
    int threads;
    double g_med, g_min, a_med, a_min, g_gbs, a_gbs, diff, g_err, a_err, out_max;
} row;
static row rows_done[MAX_ROWS];
static int nrows;

static void run_one(setup *s, const int *threads, int nthreads, int runs, const double *bw)
{
    const int half = (runs + ROUNDS - 1) / ROUNDS;
    double *tg = malloc(sizeof(double) * (size_t)(half * ROUNDS));
    double *ta = malloc(sizeof(double) * (size_t)(half * ROUNDS));
    if (!tg || !ta)
        die("out of memory");
    for (int ti = 0; ti < nthreads; ti++) {
        runner x;
        runner_make(&x, s, threads[ti]);
        if (ti == 0) {   /* one pass over every copy: the first reads are slower */
            for (int r = 0; r < s->R; r++)
                call_attn(&x, r);
            s->next = 0;
        }
        for (int round = 0; round < ROUNDS; round++) {
            timed(&x, 0, half, tg + round * half);
            timed(&x, 1, half, ta + round * half);
        }
        /* the outputs of copy 0 */
        call_ggml(&x, 0);
        call_attn(&x, 0);
        double diff = 0, omax = 0;
        for (size_t i = 0; i < (size_t)(s->q_rows * s->d); i++) {
            const double e = fabs((double)s->og[i] - s->oa[i]);
            if (!(e <= diff))
                diff = e;
            if (fabs(s->oa[i]) > omax)
                omax = fabs(s->oa[i]);
        }
        row r = { .case_id = s->c->id, .layout = layout_name[s->layout], .type = s->t->name,
                  .threads = threads[ti] };
        r.g_med = median_sorted(tg, half * ROUNDS);
        r.g_min = tg[0];
        r.a_med = median_sorted(ta, half * ROUNDS);
        r.a_min = ta[0];
        r.g_gbs = s->kv_bytes / (r.g_med * 1e6);
        r.a_gbs = s->kv_bytes / (r.a_med * 1e6);
        r.diff = diff;
        r.out_max = omax;
        r.g_err = sampled_error(s, s->og);
        r.a_err = sampled_error(s, s->oa);
        printf("%-4s %-6s %-5s %3d %8.3f %8.3f %8.3f %8.3f %7.2fx %7.1f %7.1f %5.0f%% %5.0f%% "
               "%9.2e %9.2e %9.2e\n",
               r.case_id, r.layout, r.type, r.threads, r.g_med, r.g_min, r.a_med, r.a_min,
               r.g_med / r.a_med, r.g_gbs, r.a_gbs, bw[ti] > 0 ? 100.0 * r.g_gbs / bw[ti] : 0,
               bw[ti] > 0 ? 100.0 * r.a_gbs / bw[ti] : 0, r.diff, r.g_err, r.a_err);
        fflush(stdout);
        if (nrows < MAX_ROWS)
            rows_done[nrows++] = r;
        runner_free(&x);
    }
    free(tg);
    free(ta);
}

static const bench_case *find_case(const char *id)
{
    for (int i = 0; i < bench_ncases; i++)
        if (bench_cases[i].kind == K_DECODE && !strcmp(bench_cases[i].id, id))
            return &bench_cases[i];
    return NULL;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    const char *want_case[8];
    int nwant = 0, threads[MAX_THREADS], nthreads = 0, runs = 20, want_type[NTYPES] = { 0 };
    int any_type = 0;
    long kv_mib = 0, bw_mib = 1024;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--case") && i + 1 < argc && nwant < 8)
            want_case[nwant++] = argv[++i];
        else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
            const char *t = argv[++i];
            int found = 0;
            for (int k = 0; k < NTYPES; k++)
                if (!strcmp(t, ktypes[k].name))
                    want_type[k] = found = any_type = 1;
            if (!found)
                die("--type takes f16, q8_0 or q4_0");
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc && nthreads < MAX_THREADS)
            threads[nthreads++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv-mib") && i + 1 < argc)
            kv_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--bw-mib") && i + 1 < argc)
            bw_mib = atol(argv[++i]);
        else if (!strcmp(argv[i], "--int8-scores"))
            int8_scores = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--case S5|D2|D3 ...] [--type f16|q8_0|q4_0 ...] "
                    "[--threads N ...] [--runs N] [--kv-mib M] [--bw-mib M (0: skip)] "
                    "[--int8-scores]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!nwant) {
        want_case[nwant++] = "S5";
        want_case[nwant++] = "D2";
        want_case[nwant++] = "D3";
    }
    if (!any_type)
        for (int k = 0; k < NTYPES; k++)
            want_type[k] = 1;
    if (!nthreads) {
        threads[nthreads++] = 1;
        threads[nthreads++] = 2;
    }
    if (runs < 2)
        runs = 2;
    for (int i = 0; i < nthreads; i++)
        if (threads[i] < 1)
            die("--threads takes a count >= 1");
    for (int w = 0; w < nwant; w++)
        if (!find_case(want_case[w]))
            die("--case takes S5, D2 or D3 (attn-bench's decode cases)");

    ggml_log_set(quiet_log, NULL);
    ggml_cpu_init();
    const size_t MiB = (size_t)1 << 20, l3 = l3_size();
    size_t target = 4 * l3 > 256 * MiB ? 4 * l3 : 256 * MiB;
    if (kv_mib > 0)
        target = (size_t)kv_mib * MiB;
    double bw[MAX_THREADS] = { 0 };
    for (int i = 0; i < nthreads && bw_mib > 0; i++)
        bw[i] = read_bandwidth(threads[i], (size_t)bw_mib * MiB);

    attn_blas_info info;
    const int have_info = attn_blas_query(&info) == ATTN_OK;
    printf("ggml-compare: ggml %s (commit %s, CPU backend) vs attn %s (SIMD %s)\n",
           ggml_version(), ggml_commit(), attn_version(), have_info ? info.simd : "?");
    if (int8_scores)
        printf("attn's Q8_0 and Q4_0 rows with integer scores (desc.qk_int8)\n");
    double load[3] = { 0, 0, 0 };
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = NAN;
    printf("load average %.2f %.2f %.2f (the machine is shared: a load above the thread count "
           "slows the 2-thread rows most)\n", load[0], load[1], load[2]);
    printf("L3 %.1f MiB; K/V copies of at least %.0f MiB per case and type, a different copy "
           "each call; %d timed calls per library and thread count (%d rounds, alternating)\n",
           l3 / (double)MiB, target / (double)MiB, ((runs + ROUNDS - 1) / ROUNDS) * ROUNDS, ROUNDS);
    if (bw_mib > 0) {
        printf("streaming read bandwidth (%ld MiB):", bw_mib);
        for (int i = 0; i < nthreads; i++)
            printf(" %.1f GB/s at %d thread%s", bw[i], threads[i], threads[i] > 1 ? "s" : "");
        printf("\n");
    }
    printf("\n%-4s %-6s %-5s %3s %8s %8s %8s %8s %8s %7s %7s %6s %6s %9s %9s %9s\n", "case",
           "layout", "type", "thr", "ggml med", "ggml min", "attn med", "attn min", "ggml/attn",
           "ggml GB/s", "attn GB/s", "g %bw", "a %bw", "max|g-a|", "err ggml", "err attn");
    printf("%-4s %-6s %-5s %3s %8s %8s %8s %8s\n", "", "", "", "", "ms", "ms", "ms", "ms");
    fflush(stdout);

    for (int w = 0; w < nwant; w++) {
        const bench_case *c = find_case(want_case[w]);
        const int nlay = c->padded ? 2 : 1;
        for (int lay = 0; lay < nlay; lay++)
            for (int k = 0; k < NTYPES; k++) {
                if (!want_type[k])
                    continue;
                setup s;
                int64_t mismatch = 0;
                setup_make(&s, c, lay, &ktypes[k], target, &mismatch);
                if (mismatch)
                    printf("  (%s %s: attn_quantize differs from ggml's quantizer on %lld of "
                           "the rows)\n", c->id, ktypes[k].name, (long long)mismatch);
                run_one(&s, threads, nthreads, runs, bw);
                setup_free(&s);
            }
    }

    /* the ratios against the target */
    const double target_ratio = 1.5;
    printf("\nggml / attn (median ms; target >= %.1f: attn at least 1.5x faster on the same "
           "cache type and shape):\n", target_ratio);
    for (int ti = 0; ti < nthreads; ti++) {
        double lg = 0, lo = INFINITY, hi = 0;
        int cnt = 0, met = 0;
        printf("  %d thread%s:", threads[ti], threads[ti] > 1 ? "s" : "");
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows_done[i];
            if (r->threads != threads[ti])
                continue;
            const double ratio = r->g_med / r->a_med;
            lg += log(ratio);
            lo = ratio < lo ? ratio : lo;
            hi = ratio > hi ? ratio : hi;
            cnt++;
            met += ratio >= target_ratio;
        }
        if (cnt)
            printf(" %d of %d rows met; min %.2fx, geometric mean %.2fx, max %.2fx\n", met, cnt,
                   lo, exp(lg / cnt), hi);
        else
            printf(" no rows\n");
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows_done[i];
            if (r->threads == threads[ti] && r->g_med / r->a_med < target_ratio)
                printf("    not met: %s %s %s %.2fx\n", r->case_id, r->layout, r->type,
                       r->g_med / r->a_med);
        }
    }
    printf("\nerr: largest |o - float64| on %d query heads of every sequence, from the stored "
           "values; max|g-a|: over the whole output (|o| up to about %.2g here).\n",
           SAMPLE_HEADS, nrows ? rows_done[0].out_max : 0.0);
    return 0;
}
