/*
 * fuzz_common.c -- the libFuzzer target's shared part: the first input
 * byte selects a kind (LLVMFuzzerTestOneInput, SEL_* in fuzz_common.h),
 * the rest decodes into one whole problem of that API (sizes, layouts and
 * strides, broadcast and overlapping views, options, optional outputs,
 * engine, threads, workspace) with, on demand, one or two deliberately
 * invalid fields.  One file per API holds its decoder and checks:
 *
 *   fuzz_sdpa.c       SDPA forward (dense; fuzz_sparse.c: sparse fields)
 *   fuzz_kv.c         K/V storage types and the paged cache of an SDPA problem
 *   fuzz_qo.c         the element types of Q and O of an SDPA problem
 *   fuzz_sdpa_bwd.c   SDPA backward, after a checked forward
 *   fuzz_mha.c        the MHA layer (attn_mha_execute, attn_mha_train_execute)
 *   fuzz_mha_train.c  attn_mha_bwd_execute, after a checked train_forward
 *   fuzz_mha16.c      the element types of the MHA layer (x_type, w_type)
 *   fuzz_linear.c     linear attention, forward or backward
 *   fuzz_layout.c     the layout builders
 *   fuzz_merge.c      attn_partials_merge
 *   fuzz_kv_append.c  attn_kv_append
 *
 * The contract of attn.h is checked and any violation abort()s:
 *
 * - the status: an independent reading of attn.h's rules (expect_*) says
 *   which statuses are allowed; a valid problem must return ATTN_OK and an
 *   invalid one one of the statuses of the rules it breaks;
 * - on error, every output buffer is bitwise untouched (all of it holds the
 *   sentinel) and the inputs are unchanged;
 * - on success, every output element in a view is within the float64
 *   reference's bounds (test/reference.h, test/mha_reference.h, ...), every
 *   element outside the views still holds the sentinel, the inputs are
 *   unchanged, and a second run with another thread count (and another
 *   workspace choice) is bitwise identical;
 * - every input position attn.h says is never read holds NaN (garbage for
 *   masks), so reading one shows in the outputs; the test BLAS
 *   (plain_sgemm.c) and AddressSanitizer catch reads outside the buffers.
 *
 * Inputs whose first byte has bits 1 to 7 clear decode as they did before
 * those bits existed (the committed corpus and regressions had bits 3 to
 * 7 clear when each got its meaning: they decode as before the sparse,
 * linear, layout, KV and Q/O kinds; none has bits 4 and 5 both set, as
 * the merge seeds do).
 *
 * Decoding never fails: a short input reads as zeros, which is a small
 * valid problem (its backward included).  FUZZ_VERBOSE=1 prints each
 * decoded problem; FUZZ_STATS=1 counts where inputs ended; FUZZ_TIME=1
 * the time per kind.
 *
 * Library bugs it found are fixed; their reproducers are in regressions/
 * (the replay test runs them) and each has a row in test_errors.c or
 * test_mha.c.
 */
#include <time.h>

#include "fuzz_common.h"

int verbose;
long counts[N_COUNT];

static void print_counts(void)
{
    fprintf(stderr, "fuzz_attn: SDPA plan-only %ld, error %ld, checked %ld; "
            "MHA plan-only %ld, error %ld, checked %ld; SDPA backward error %ld, checked %ld; "
            "MHA train_forward error %ld, checked %ld; MHA backward error %ld, checked %ld; "
            "checked with dropout p > 0: SDPA %ld, SDPA backward %ld, MHA %ld, "
            "MHA backward %ld; checked sparse: SDPA %ld, SDPA backward %ld, MHA %ld, "
            "MHA backward %ld; "
            "linear plan-only %ld, error %ld, checked %ld; linear backward error %ld, "
            "checked %ld; layout builders error %ld, checked %ld; merge error %ld, "
            "checked %ld, skipped %ld\n",
            counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6],
            counts[7], counts[8], counts[9], counts[10], counts[11], counts[12], counts[13],
            counts[14], counts[15], counts[16], counts[17], counts[18], counts[19], counts[20],
            counts[21], counts[22], counts[23], counts[24], counts[25], counts[26],
            counts[27], counts[28], counts[29]);
    fprintf(stderr, "fuzz_attn: SDPA with K/V storage or paging: error %ld, checked %ld "
            "(paged = contiguous %ld, ATTN_DECODE=0 %ld); attn_kv_append error %ld, "
            "checked %ld\n", counts[N_KV_ERROR], counts[N_KV_CHECKED], counts[N_KV_PAGED_SAME],
            counts[N_KV_NODECODE], counts[N_APPEND_ERROR], counts[N_APPEND_CHECKED]);
    fprintf(stderr, "fuzz_attn: K/V stored in another type, ATTN_DECODE=0 bitwise the F32 "
            "call on the stored values %ld; Q8_0/Q4_0 K or V: SDPA error %ld, checked %ld; "
            "attn_kv_append error %ld, checked %ld\n", counts[N_KV_NODECODE_TWIN],
            counts[N_KVQ_ERROR], counts[N_KVQ_CHECKED], counts[N_APPENDQ_ERROR],
            counts[N_APPENDQ_CHECKED]);
    fprintf(stderr, "fuzz_attn: integer scores (qk_int8) checked against the rounded Q %ld\n",
            counts[N_KV_INT8]);
    fprintf(stderr, "fuzz_attn: SDPA with Q/O element types: error %ld, checked %ld (BF16 "
            "products %ld, ATTN_DECODE=0 %ld, bitwise the fp32 call on the widened values %ld, "
            "backward statuses %ld)\n", counts[N_QO_ERROR], counts[N_QO_CHECKED],
            counts[N_QO_BF16], counts[N_QO_NODECODE], counts[N_QO_TWIN], counts[N_QO_BWD]);
    fprintf(stderr, "fuzz_attn: MHA with x/w element types: error %ld, checked %ld (BF16 "
            "products %ld, bitwise the fp32 layer %ld); backward error %ld, checked %ld "
            "(bitwise the fp32 training %ld)\n", counts[N_MHA16_ERROR], counts[N_MHA16_CHECKED],
            counts[N_MHA16_BF16], counts[N_MHA16_TWIN], counts[N_MBWD16_ERROR],
            counts[N_MBWD16_CHECKED], counts[N_MBWD16_TWIN]);
}

/* FUZZ_TIME=1: at exit, the inputs and seconds spent per kind (tuning). */
static int timing;
#define N_KINDS 11
static double kind_sec[N_KINDS];
static long kind_runs[N_KINDS];
static void print_times(void)
{
    static const char *names[N_KINDS] = { "SDPA", "SDPA sparse", "MHA", "MHA sparse", "linear",
                                          "linear backward", "layout builders", "merge",
                                          "SDPA K/V storage", "kv_append", "SDPA Q/O types" };
    for (int k = 0; k < N_KINDS; k++)
        fprintf(stderr, "fuzz_attn: %-16s %8ld inputs %8.3f s %7.3f ms each\n", names[k],
                kind_runs[k], kind_sec[k], kind_runs[k] ? 1e3 * kind_sec[k] / (double)kind_runs[k] : 0.0);
}

uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
float sentinel(void)
{
    uint32_t u = SENT;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "fuzz_attn: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

/* --------------------------------------------------- expected statuses */

void check_status(const char *what, attn_status st, expect e)
{
    if ((unsigned)st >= N_STATUS)
        FAIL("%s returned %d, not a status", what, (int)st);
    if (e.must == 0) {
        if (st != ATTN_OK && !(BIT(st) & e.maybe))
            FAIL("%s: valid problem, got %s (%d)", what, st_name(st), (int)st);
        return;
    }
    if (st == ATTN_OK)
        FAIL("%s: invalid problem (expected status mask 0x%x), got ATTN_OK", what, e.must);
    if (!(BIT(st) & (e.must | e.maybe)))
        FAIL("%s: got %s (%d), expected one of mask 0x%x (or 0x%x)", what, st_name(st),
             (int)st, e.must, e.maybe);
}

/* Exact self-overlap of an output view (rows of D elements): 1 overlapping,
 * 0 not, -1 too many rows to tell. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static int view_overlaps(const int64_t sz[3], const int64_t st[3], int64_t D)
{
    uint64_t rows = 1;
    for (int i = 0; i < 3; i++) {
        if (sz[i] > 4096)
            return -1;
        rows *= (uint64_t)sz[i];
    }
    if (rows > 4096)
        return -1;
    uint64_t *a = xmalloc(rows * sizeof *a), k = 0;
    for (int64_t x = 0; x < sz[0]; x++)
        for (int64_t y = 0; y < sz[1]; y++)
            for (int64_t z = 0; z < sz[2]; z++)
                a[k++] = (uint64_t)x * (uint64_t)st[0] + (uint64_t)y * (uint64_t)st[1] +
                         (uint64_t)z * (uint64_t)st[2];
    qsort(a, rows, sizeof *a, cmp_u64);
    int bad = 0;
    for (uint64_t i = 1; i < rows && !bad; i++)
        if (a[i] - a[i - 1] < (uint64_t)D)
            bad = 1;
    free(a);
    return bad;
}

/* The rule attn.h states for output views: dims of size > 1 sorted by
 * stride, each stride clears the extent of everything inside it.  It is
 * sufficient, not necessary, for no overlap. */
static int nested_ok(const int64_t sz[3], const int64_t st[3], int64_t D)
{
    int64_t s[3], z[3];
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (sz[i] > 1) {
            s[k] = st[i];
            z[k++] = sz[i];
        }
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            int64_t t = s[j]; s[j] = s[j - 1]; s[j - 1] = t;
            t = z[j]; z[j] = z[j - 1]; z[j - 1] = t;
        }
    uint64_t inner = (uint64_t)D;
    for (int i = 0; i < k; i++) {
        if ((uint64_t)s[i] < inner)
            return 0;
        inner += (uint64_t)(z[i] - 1) * (uint64_t)s[i];
    }
    return 1;
}

/* The view rules of attn.h ("Tensor views" and the field comments) for a
 * view of [B][H][S][D] with unit dim stride. */
void expect_view(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D,
                 int kind)
{
    expect_view_es(e, v, B, H, S, D, kind, 0);
}
/* es16: a K or V view of F16/BF16 storage (uint16_t elements).  attn.h
 * does not say whether its byte limit counts 2 or 4 bytes an element:
 * extents between the two limits are tolerated either way. */
void expect_view_es(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D,
                    int kind, int es16)
{
    const int64_t st[3] = { v->batch, v->head, v->seq }, sz[3] = { B, H, S };
    int unset = 0, neg = 0;
    for (int i = 0; i < 3; i++) {
        if (st[i] == ATTN_STRIDE_UNSET)
            unset = 1;
        else if (st[i] < 0)
            neg = 1;
    }
    if (unset)
        e->must |= BIT(ATTN_ERR_STRIDES_UNSET);
    if (neg)
        e->must |= BIT(ATTN_ERR_BAD_STRIDE);
    if (unset || neg) {
        /* the other rules cannot be evaluated: any view error will do */
        e->maybe |= BIT(ATTN_ERR_BAD_STRIDE) | BIT(ATTN_ERR_STRIDES_UNSET) |
                    BIT(ATTN_ERR_TOO_LARGE);
        return;
    }
    for (int i = 0; i < 3; i++)
        if (st[i] == 0 && sz[i] > 1 && kind != VK_BCAST)
            e->must |= BIT(ATTN_ERR_BAD_STRIDE);
    /* "the seq stride of Q, K, V, O is >= that tensor's dim and of P >= m,
     * even when that length is 1"; a mask or bias row is m long too ("a
     * row stride is shorter than its row"), 0 broadcasting.  logsumexp has
     * no row: only the size-1 rule applies to it. */
    if (kind != VK_LSE && v->seq < D && !(kind == VK_BCAST && v->seq == 0)) {
        /* dBias: "output views follow the rules of the forward's outputs",
         * but it is no BLAS operand and its own header line does not say
         * whether a single row (S == 1) needs a row stride: tolerated
         * (nesting refuses a short stride when S > 1) */
        if (kind == VK_DBIAS)
            e->maybe |= BIT(ATTN_ERR_BAD_STRIDE);
        else
            e->must |= BIT(ATTN_ERR_BAD_STRIDE);
    }
    if (v->seq > INT32_MAX) {
        /* the BLAS leading dimension; the mask, bias and logsumexp are not
         * BLAS operands, so the header does not say (tolerated) */
        if (kind == VK_INPUT || kind == VK_OUTPUT)
            e->must |= BIT(ATTN_ERR_TOO_LARGE);
        else
            e->maybe |= BIT(ATTN_ERR_TOO_LARGE);
    }
    uint64_t ext = (uint64_t)D, t;
    int ovf = 0;
    for (int i = 0; i < 3; i++)
        if (__builtin_mul_overflow((uint64_t)(sz[i] - 1), (uint64_t)st[i], &t) ||
            __builtin_add_overflow(ext, t, &ext))
            ovf = 1;
    if (es16 && !ovf && ext > (uint64_t)INT64_MAX / sizeof(float) &&
        ext <= (uint64_t)INT64_MAX / sizeof(uint16_t))
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE);
    else if (ovf || ext > (uint64_t)INT64_MAX / sizeof(float))
        e->must |= BIT(ATTN_ERR_TOO_LARGE);
    else if (ext > ((uint64_t)1 << 58))
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE);
    if (kind == VK_OUTPUT || kind == VK_LSE || kind == VK_DBIAS) {
        if (!nested_ok(sz, st, D)) {
            e->must |= BIT(ATTN_ERR_BAD_STRIDE);
        } else if (!ovf && ext <= (uint64_t)INT64_MAX / sizeof(float) &&
                   view_overlaps(sz, st, D) > 0) {
            /* the documented rule must be sufficient (checked when the
             * extent fits: the row offsets are formed mod 2^64) */
            fprintf(stderr, "CONTRACT VIOLATION: a nested output view overlaps itself: "
                    "sizes %lld %lld %lld, strides %lld %lld %lld, row %lld\n",
                    (long long)sz[0], (long long)sz[1], (long long)sz[2], (long long)st[0],
                    (long long)st[1], (long long)st[2], (long long)D);
            abort();
        }
    }
}

int reserved_nonzero(const int64_t *r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i])
            return 1;
    return 0;
}

/* The engine from spare bits of a decoded byte: AUTO, BLAS, TILE, AUTO. */
attn_engine engine_of(unsigned bits)
{
    static const attn_engine e[4] = { ATTN_ENGINE_AUTO, ATTN_ENGINE_BLAS, ATTN_ENGINE_TILE,
                                      ATTN_ENGINE_AUTO };
    return e[bits & 3];
}
int engine_ok(int e) { return e == ATTN_ENGINE_AUTO || e == ATTN_ENGINE_BLAS || e == ATTN_ENGINE_TILE; }
int mask_mode_ok(int m) { return m == ATTN_MASK_NONE || m == ATTN_MASK_KEEP_NONZERO || m == ATTN_MASK_DROP_NONZERO; }

/* What execute must say of its pointers (used ones non-NULL, unused ones
 * NULL), the per-batch lengths in use, and a caller workspace. */
void expect_call(expect *e, const ptr_use *f, size_t nf, int64_t batch, const int32_t *kv_lens,
                 int64_t m, const int32_t *q_lens, int64_t n, const void *ws, size_t ws_bytes,
                 size_t need)
{
    for (size_t i = 0; i < nf; i++) {
        if (f[i].used && !f[i].p)
            e->must |= BIT(ATTN_ERR_NULL_ARGUMENT);
        if (!f[i].used && f[i].p)
            e->must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
    }
    for (int64_t b = 0; b < batch; b++) {
        if (kv_lens && (kv_lens[b] < 0 || kv_lens[b] > m))
            e->must |= BIT(ATTN_ERR_BAD_LENGTH);
        if (q_lens && (q_lens[b] < 0 || q_lens[b] > n))
            e->must |= BIT(ATTN_ERR_BAD_LENGTH);
    }
    if (ws) {
        if (ws_bytes < need)
            e->must |= BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
        if ((uintptr_t)ws % 64)
            e->must |= BIT(ATTN_ERR_WORKSPACE_ALIGNMENT);
    }
}

/* ------------------------------------------------------------- views */

/* Strides of a non-overlapping view of [sz0][sz1][sz2][D]: the three dims
 * in a decoded order (outer to inner) with decoded gaps. */
attn_view gen_view(rd *r, const int64_t sz[3], int64_t D)
{
    static const int perms[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 },
                                     { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
    unsigned kind = pick(r, 4);
    const int *ord = perms[kind == 1 ? 1 : kind >= 2 ? pick(r, 6) : 0];
    int64_t st[3], ext = D;
    for (int k = 2; k >= 0; k--) {
        const int d = ord[k];
        const int64_t gap = kind == 3 ? pick(r, 4) : 0;
        st[d] = ext + gap;
        ext = st[d] * sz[d];
    }
    /* size-1 dims: any stride (0 too, except the seq stride, >= D) */
    unsigned mod = u8(r);
    for (int d = 0; d < 3; d++)
        if (sz[d] == 1 && (mod >> (2 * d) & 3))
            st[d] = d == 2 ? D + (int64_t)((mod >> (2 * d)) & 3) * 7
                           : ((mod >> (2 * d)) & 3) == 1 ? 0 : (int64_t)u8(r);
    attn_view v = { st[0], st[1], st[2] };
    return v;
}

/* Elements spanned by a valid view (the last row's end); -1 if huge. */
int64_t view_extent(const attn_view *v, const int64_t sz[3], int64_t D)
{
    const int64_t st[3] = { v->batch, v->head, v->seq };
    uint64_t ext = (uint64_t)D, t;
    for (int i = 0; i < 3; i++) {
        if (st[i] < 0 || sz[i] <= 0)
            return -1;
        if (__builtin_mul_overflow((uint64_t)(sz[i] - 1), (uint64_t)st[i], &t) ||
            __builtin_add_overflow(ext, t, &ext) || ext > POOL_MAX)
            return -1;
    }
    return (int64_t)ext;
}

/* Place a region of ext elements in a pool: after what is there (with a
 * small gap) or, for inputs, overlapping what is there. */
size_t place(rd *r, size_t *len, size_t ext, int overlap_ok)
{
    unsigned c = u8(r);
    size_t off;
    if (overlap_ok && (c & 3) == 3 && *len > 0)
        off = (c >> 2) % *len;
    else
        off = *len + (c >> 2) % 3;
    if (off + ext > *len)
        *len = off + ext;
    return off;
}


void obuf_make(obuf *b, rd *r, const attn_view *v, const int64_t sz[3], int64_t D, int64_t ext)
{
    size_t off = pick(r, 3);
    b->count = off + (size_t)ext + TAILN;
    b->base = xmalloc(b->count * sizeof(float));
    b->inview = calloc(b->count, 1);
    if (!b->inview)
        abort();
    b->ptr = b->base + off;
    for (int64_t x = 0; x < sz[0]; x++)
        for (int64_t y = 0; y < sz[1]; y++)
            for (int64_t z = 0; z < sz[2]; z++)
                for (int64_t d = 0; d < D; d++)
                    b->inview[off + (size_t)(x * v->batch + y * v->head + z * v->seq + d)] = 1;
}
void obuf_clear(obuf *b)
{
    const float s = sentinel();
    for (size_t i = 0; i < b->count; i++)
        b->base[i] = s;
}
void obuf_free(obuf *b)
{
    free(b->base);
    free(b->inview);
    memset(b, 0, sizeof *b);
}
void obuf_untouched(const obuf *b, const char *name, const char *when)
{
    for (size_t i = 0; i < b->count; i++)
        if (fbits(b->base[i]) != SENT)
            FAIL("%s: output %s element %zu was written (bits 0x%08x)", when, name, i,
                 fbits(b->base[i]));
}
void obuf_outside(const obuf *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (!b->inview[i] && fbits(b->base[i]) != SENT)
            FAIL("output %s element %zu outside the view was written (bits 0x%08x)", name, i,
                 fbits(b->base[i]));
}
float *obuf_snap(const obuf *b)
{
    if (!b->base)
        return NULL;
    float *s = xmalloc(b->count * sizeof(float));
    memcpy(s, b->base, b->count * sizeof(float));
    return s;
}
/* note: what else differed between the two runs ("" if nothing) */
void obuf_same(const obuf *b, const float *snap, const char *name, int t1, int t2,
               const char *note)
{
    if (b->base && memcmp(b->base, snap, b->count * sizeof(float)))
        FAIL("output %s differs bitwise between %d and %d threads%s", name, t1, t2, note);
}

void obuf16_make(obuf16 *b, rd *r, const attn_view *v, const int64_t sz[3], int64_t D,
                 int64_t ext)
{
    size_t off = pick(r, 3);
    b->count = off + (size_t)ext + TAILN;
    b->base = xmalloc(b->count * sizeof(uint16_t));
    b->inview = calloc(b->count, 1);
    if (!b->inview)
        abort();
    b->ptr = b->base + off;
    for (int64_t x = 0; x < sz[0]; x++)
        for (int64_t y = 0; y < sz[1]; y++)
            for (int64_t z = 0; z < sz[2]; z++)
                for (int64_t d = 0; d < D; d++)
                    b->inview[off + (size_t)(x * v->batch + y * v->head + z * v->seq + d)] = 1;
}
void obuf16_like(obuf16 *b, const obuf *f)
{
    b->count = f->count;
    b->base = xmalloc(b->count * sizeof(uint16_t));
    b->inview = xmalloc(b->count);
    memcpy(b->inview, f->inview, b->count);
    b->ptr = b->base + (f->ptr - f->base);
    obuf16_clear(b);
}
void obuf16_clear(obuf16 *b)
{
    for (size_t i = 0; i < b->count; i++)
        b->base[i] = SENT16;
}
void obuf16_free(obuf16 *b)
{
    free(b->base);
    free(b->inview);
    memset(b, 0, sizeof *b);
}
void obuf16_untouched(const obuf16 *b, const char *name, const char *when)
{
    for (size_t i = 0; i < b->count; i++)
        if (b->base[i] != SENT16)
            FAIL("%s: 16-bit output %s element %zu was written (bits 0x%04x)", when, name, i,
                 (unsigned)b->base[i]);
}
void obuf16_outside(const obuf16 *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (!b->inview[i] && b->base[i] != SENT16)
            FAIL("16-bit output %s element %zu outside the view was written (bits 0x%04x)",
                 name, i, (unsigned)b->base[i]);
}
uint16_t *obuf16_snap(const obuf16 *b)
{
    if (!b->base)
        return NULL;
    uint16_t *s = xmalloc(b->count * sizeof(uint16_t));
    memcpy(s, b->base, b->count * sizeof(uint16_t));
    return s;
}
void obuf16_same(const obuf16 *b, const uint16_t *snap, const char *name, int t1, int t2,
                 const char *note)
{
    if (b->base && memcmp(b->base, snap, b->count * sizeof(uint16_t)))
        FAIL("16-bit output %s differs bitwise between %d and %d threads%s", name, t1, t2, note);
}

void print_view(const char *name, const attn_view *v)
{
    fprintf(stderr, " %s{%lld,%lld,%lld}", name, (long long)v->batch, (long long)v->head,
            (long long)v->seq);
}

int threads_other(int t, unsigned c)
{
    int t2 = 1 + (int)(c % 4);
    if (t2 == t)
        t2 = t % 4 + 1;
    return t2;
}

/* ------------------------------------------------------------ workspaces */

void wsp_make(wsp *w, unsigned choice, size_t need, int small, int misaligned)
{
    memset(w, 0, sizeof *w);
    if (!choice && !small && !misaligned)
        return;
    size_t bytes = need + (choice == 2 ? 192 : 0);
    if (small)
        bytes = need ? need - 1 - (need > 64 ? choice * 8 % 64 : 0) : 0;
    size_t alloc = (bytes + 64 + 63) / 64 * 64 + 64;
    w->raw = aligned_alloc(64, alloc);
    if (!w->raw)
        abort();
    w->alloc = alloc;
    const float nan = NAN;
    for (size_t i = 0; i + 4 <= alloc; i += 4)
        memcpy((char *)w->raw + i, &nan, 4);
    w->ptr = (char *)w->raw + (misaligned ? 4 + 4 * (choice % 8) : 0);
    w->bytes = bytes;
}

/* -------------------------------------- invalid fields of SDPA and MHA */

const int64_t huge_sizes[8] = {
    (int64_t)INT32_MAX,        (int64_t)INT32_MAX + 1, (int64_t)1 << 40,
    INT64_MAX,                 (int64_t)1537228672809129302, (int64_t)1 << 62,
    (int64_t)UINT32_MAX,       (int64_t)1 << 31 | 1,
};

int32_t bad_length(rd *r, int64_t lim)
{
    switch (pick(r, 4)) {
    case 0: return -1;
    case 1: return (int32_t)lim + 1;
    case 2: return INT32_MIN;
    default: return INT32_MAX;
    }
}

/* ------------------------------------------------------------ dropout */

/* dropout_p: 0 (with a seed and offset: the path without dropout, checked
 * bitwise by the rerun), -0, tiny (keeps everything), small, large, 1
 * (drops everything), and outside [0, 1] or NaN (ATTN_ERR_BAD_OPTION); or
 * k / 127 for k = 0..127. */
static const double drop_ps[32] = {
    0.0, 0.0, -0.0, 1e-12, 0.01, 0.05, 0.1, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.5, 0.5, 0.6,
    0.7, 0.75, 0.8, 0.9, 0.9, 0.95, 0.99, 1.0, 1.0, 0.125,
    -0.1, -1e-300, 1.0000001, 2.0, NAN, -INFINITY,
};

/* A 64-bit dropout seed or offset: 0, a byte, near 2^64, or any. */
static uint64_t drop_word(rd *r, unsigned how)
{
    switch (how & 3) {
    case 0: return 0;
    case 1: return u8(r);
    case 2: return UINT64_MAX - u8(r);
    default: {
        const uint64_t lo = u32(r);
        return (uint64_t)u32(r) << 32 | lo;
    }
    }
}

void decode_dropout(rd *r, double *p, uint64_t *seed, uint64_t *offset)
{
    const unsigned c = u8(r);
    *p = (c & 0x80) ? (double)(c & 0x7f) / 127.0 : drop_ps[c % 32];
    const unsigned f = u8(r);
    *seed = drop_word(r, f);
    *offset = drop_word(r, f >> 2);
}

/* p = 0 runs exactly the path without dropout: the bitwise rerun resets a
 * seed and offset set with p = 0, and says so if the bits differ. */
const char *drop_zero_reset(double p, uint64_t *seed, uint64_t *offset)
{
    if (p != 0.0 || (*seed == 0 && *offset == 0))
        return "";
    *seed = 0;
    *offset = 0;
    return " (dropout_p = 0: the first run with a dropout seed and offset, the second "
           "without)";
}


/* ------------------------------------------------------------ dispatch */

static void set_quiet_omp(void)
{
    /* idle OpenMP workers must not spin on the shared cores */
    setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("KMP_BLOCKTIME", "0", 0);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    set_quiet_omp();
    const char *e = getenv("FUZZ_VERBOSE");
    verbose = e && atoi(e) != 0;
    e = getenv("FUZZ_STATS");
    if (e && atoi(e) != 0)
        atexit(print_counts);
    e = getenv("FUZZ_TIME");
    timing = e && atoi(e) != 0;
    if (timing)
        atexit(print_times);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = { data, size, 0 };
    const unsigned sel = u8(&r);
    struct timespec t0;
    if (timing)
        timespec_get(&t0, TIME_UTC);
    if ((sel & SEL_MERGE) == SEL_MERGE)
        fuzz_merge(&r);
    else if (sel & SEL_LAYOUT)
        fuzz_layout(&r);
    else if (sel & SEL_LINEAR)
        fuzz_linear(&r, sel);
    else if ((sel & (SEL_KV | SEL_MHA)) == (SEL_KV | SEL_MHA))
        fuzz_kv_append(&r);
    else if (sel & SEL_MHA)
        fuzz_mha(&r, sel);
    else
        fuzz_sdpa(&r, sel);
    if (timing) {
        struct timespec t1;
        timespec_get(&t1, TIME_UTC);
        const int k = (sel & SEL_MERGE) == SEL_MERGE ? 7 : (sel & SEL_LAYOUT) ? 6
                    : (sel & SEL_LINEAR) ? 4 + !!(sel & SEL_DROPOUT)
                    : (sel & (SEL_KV | SEL_MHA)) == (SEL_KV | SEL_MHA) ? 9
                    : (sel & SEL_QO) && !(sel & SEL_MHA) ? 10
                    : (sel & SEL_KV) ? 8 + (sel & SEL_MHA)
                    : 2 * (sel & SEL_MHA) + !!(sel & SEL_SPARSE);
        kind_sec[k] += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        kind_runs[k]++;
    }
    return 0;
}

/* In a -fsanitize=undefined build, a UBSan report stops the run (libFuzzer
 * then saves the input) instead of scrolling by. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }
