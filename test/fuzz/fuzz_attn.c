/*
 * fuzz_attn.c -- libFuzzer target: the input bytes decode into one whole
 * SDPA (then its backward) or MHA problem (sizes, layouts and strides,
 * broadcast and overlapping input views, window, lengths, masks, bias,
 * optional outputs, engine, threads, workspace) with, on demand, one or two deliberately invalid
 * fields.  The contract of attn.h is checked and any violation abort()s:
 *
 * - the status: an independent reading of attn.h's rules (expect_*) says
 *   which statuses are allowed; a valid problem must return ATTN_OK and an
 *   invalid one one of the statuses of the rules it breaks;
 * - on error, every output buffer is bitwise untouched (all of it holds the
 *   sentinel) and the inputs are unchanged;
 * - on success, every output element in a view is within the float64
 *   reference's bounds (test/reference.h, test/mha_reference.h), every
 *   element outside the views still holds the sentinel, the inputs are
 *   unchanged, and a second run with another thread count (and another
 *   workspace choice) is bitwise identical;
 * - every input position attn.h says is never read (gaps between rows,
 *   padded query rows, K/V rows no query sees through lengths and window,
 *   mask and bias entries hidden by lengths or window) holds NaN (garbage
 *   for the mask), so reading one shows in the outputs; the test BLAS
 *   (plain_sgemm.c) and AddressSanitizer catch reads outside the buffers.
 *
 * After a valid SDPA problem passed these checks, its bytes go on to the
 * SDPA backward (fuzz_sdpa_bwd; skipped for a quarter of the inputs): the
 * forward's O and logsumexp (a want_lse run when the problem had none) as
 * inputs, dO from the input's seed in a decoded view (NaN in its gaps and
 * in padded query rows, whose O rows are set to NaN too: never read),
 * dQ, dK, dV and, with a bias, mostly dBias in decoded views (BHSD, BSHD,
 * any order with gaps; garbage in dBias's strides of the dimensions the
 * bias broadcasts over, which attn.h says are ignored), one or two planted
 * invalid backward fields (BB_*: want_lse 0, want_probs 1, dBias without
 * bias, reserved, unset, negative, zero, short, non-nested or huge
 * strides, a field of fwd, NULL or extra pointers, lengths, workspace,
 * NULL plan/desc/args), plan/execute with a workspace choice or the
 * one-shot.  The same contract is checked: the status (expect_bwd_*),
 * outputs untouched and inputs unchanged on error; on success
 * test/bwd_check.c (shared with the SDPA table's backward check: every
 * gradient within ref_sdpa_bwd's bounds, the exact zeros, the sentinel
 * outside the views) and a rerun with another thread count, bitwise.
 *
 * Bit 1 of the first byte adds dropout to the SDPA or MHA desc: dropout_p
 * (0, -0, tiny, small, large, 1, or invalid: negative, past 1, NaN, -inf),
 * dropout_seed and dropout_offset (0, small, near 2^64, any).  The float64
 * references apply the keep mask of the public attn_dropout_mask_fill
 * (test_dropout.c checks that call against its own Philox4x32-10), scaled
 * by 1 / (1 - p), in the forward, the SDPA backward (the mask held fixed)
 * and the MHA layer's forward and backward; p = 0 with a seed or offset is
 * checked bitwise against the same desc without them by the rerun.
 *
 * Bit 2 of the first byte, for MHA, runs the training calls instead of
 * attn_mha_execute: attn_mha_train_execute with a decoded context (exact or
 * larger; or NULL, short, misaligned) checked as execute is (and the
 * context untouched on error), whose rerun is attn_mha_execute (bitwise the
 * same out and weights), then attn_mha_bwd_execute (fuzz_mha_train): dY with
 * NaN in its row gaps, every gradient in its own sentinel-filled buffer
 * (the packed ones in one), one or two planted invalid fields (MB_*:
 * NULL plan, weights, args, dY, grads or context, short or misaligned
 * context or workspace, accumulate not 0 or 1, gradient, weight and input
 * pointers NULL when needed or given when not, lengths), args->out and
 * args->weights NULL or junk (ignored).  On success every gradient is
 * within mref_mha_backward's bound, and a plan with the other thread count
 * runs train_forward (out bitwise the same) and the backward again,
 * overwriting (bitwise the same) or accumulating onto decoded values
 * (exactly old + g).  Inputs, dY and the context never change.
 *
 * Bit 3 of the first byte adds sparse attention to the SDPA or MHA desc
 * (decode_sparse): global keys and queries (any nonzero enables), block
 * size 0 or 16..256, layout_per_head; the flags (decoded density) and the
 * layout (all visible, all hidden, random, hidden block rows, or from the
 * builders; one style or one per head) in exact-size buffers; shapes of
 * several blocks.  Invalid sparse fields ride on the existing kinds when
 * the input is sparse (an extra byte picks them): BAD_RESERVED
 * (reserved_flags), BAD_ENUM (block size, layout_per_head), BAD_PTR_NULL
 * and BAD_PTR_EXTRA (global_k, global_q, layout), and in the backward
 * BB_FWD, BB_PTR_NULL and BB_PTR_EXTRA, in the MHA backward MB_PTR_NULL
 * and MB_PTR_EXTRA.  NaN goes where no candidate set
 * reaches (ref_candidate), the references apply flags and layout.
 *
 * Bit 4 decodes a linear attention problem instead (fuzz_linear; bit 1:
 * its backward): sizes incl. GQA and past a chunk of 64 rows, views,
 * feature map, causal and alignment, eps, lengths, the recurrent state,
 * threads, one or two invalid fields (LB_*); checked against
 * test/linear_ref.c (O, state, dQ, dK, dV within its bounds, exact zeros),
 * outputs and state untouched on error, inputs unchanged, bitwise equal
 * with another thread count and workspace.
 *
 * Bit 5 calls a layout builder instead (fuzz_layout) with decoded sizes
 * and parameters, valid or not, NULL: the status of a broken rule and
 * nothing written, or the layout of test/layout_expect.c byte for byte.
 *
 * Bits 4 and 5 together call attn_partials_merge instead (fuzz_merge):
 * decoded sizes, partial layouts (part-major, interleaved, broadcast,
 * overlapping), lse values with -INFINITY, NaN and +INFINITY, one or two
 * invalid fields (GB_*); the exact status of attn.h's ordered rules,
 * nothing written on error, else a float64 merge written here.
 *
 * Bit 6 (SEL_KV) adds K/V storage and the paged cache to an SDPA problem
 * (decode_kv): k_type and v_type F32, F16 or BF16 each, and mostly a
 * paged cache (block size 1, 2, 3 or 16; a pool with extra blocks in
 * random order, decoded pool views, NaN, +Inf or random bits in unused
 * blocks, rows past the lengths and gaps; garbage table entries past each
 * sequence's last block: out of range, another sequence's block, random),
 * with one planted invalid KV field of its own (KB_*: a needed table entry
 * out of range, table NULL or unexpected, the K/V pointer of the storage
 * type NULL or the other one given, an unknown type, paging fields, a
 * sparse option with them, K/V views) besides byte 1's.  The reference
 * reads the stored values widened (attn_dtype_decode) from contiguous
 * F32 buffers; a paged problem is rerun contiguously (bitwise equal), and
 * one with q_len <= 16 with ATTN_DECODE=0 (the sgemm path, within the
 * reference's bounds).  Bits 6 and 0 together call attn_kv_append instead
 * (fuzz_kv_append): contiguous or paged caches of any storage types,
 * lengths, new_lens or NULL, decoded views of the new rows, the desc's
 * unread fields garbage, invalid fields (AB_*); the cache must become the
 * model written here byte for byte, or stay untouched with kv_lens on
 * error.  Bit 6 was cleared in every committed input before it got this
 * meaning (the decoder ignored it).
 *
 * Inputs whose first byte has bits 1 to 6 clear decode as they did before
 * those bits existed (the committed corpus and regressions have bits 3 to
 * 6 clear: they decode as before the sparse, linear, layout and KV kinds;
 * none has bits 4 and 5 both set, as the merge seeds do).
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
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <attn.h>

/* The number of statuses (the last one + 1; attn.h keeps no count in its
 * enum, so that adding a status changes no value a program holds). */
#define N_STATUS (ATTN_ERR_BAD_BLOCK_TABLE + 1)

#include "../mha_reference.h"
#include "../bwd_check.h"
#include "../reference.h"
#include "../layout_expect.h"
#include "../linear_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SENT 0x7fc0deadu   /* bit pattern of every output element before a call */
#define TAILN 8            /* sentinel elements after each output view */
#define POOL_MAX (1 << 20) /* largest input pool (floats) we allocate */
#define BIT(s) (1u << (s))

static int verbose;

/* FUZZ_STATS=1: at exit, how many inputs ended where (replay and tuning). */
enum { N_PLAN_ONLY, N_ERROR, N_CHECKED, N_MHA_PLAN_ONLY, N_MHA_ERROR, N_MHA_CHECKED,
       N_BWD_ERROR, N_BWD_CHECKED, N_TRAIN_ERROR, N_TRAIN_CHECKED, N_MBWD_ERROR,
       N_MBWD_CHECKED, N_DROP_CHECKED, N_DROP_BWD_CHECKED, N_DROP_MHA_CHECKED,
       N_DROP_MBWD_CHECKED, N_SPARSE_CHECKED, N_SPARSE_BWD_CHECKED, N_SPARSE_MHA_CHECKED,
       N_SPARSE_MBWD_CHECKED, N_LIN_PLAN_ONLY, N_LIN_ERROR, N_LIN_CHECKED, N_LIN_BWD_ERROR, N_LIN_BWD_CHECKED,
       N_LAYOUT_ERROR, N_LAYOUT_CHECKED, N_MERGE_ERROR, N_MERGE_CHECKED, N_MERGE_SKIPPED,
       N_KV_ERROR, N_KV_CHECKED, N_KV_PAGED_SAME, N_KV_NODECODE, N_APPEND_ERROR,
       N_APPEND_CHECKED, N_COUNT };
static long counts[N_COUNT];
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
}

/* FUZZ_TIME=1: at exit, the inputs and seconds spent per kind (tuning). */
static int timing;
static double kind_sec[10];
static long kind_runs[10];
static void print_times(void)
{
    static const char *names[10] = { "SDPA", "SDPA sparse", "MHA", "MHA sparse", "linear",
                                     "linear backward", "layout builders", "merge",
                                     "SDPA K/V storage", "kv_append" };
    for (int k = 0; k < 10; k++)
        fprintf(stderr, "fuzz_attn: %-16s %8ld inputs %8.3f s %7.3f ms each\n", names[k],
                kind_runs[k], kind_sec[k], kind_runs[k] ? 1e3 * kind_sec[k] / (double)kind_runs[k] : 0.0);
}

#define FAIL(...)                                                           \
    do {                                                                    \
        fprintf(stderr, "fuzz_attn: CONTRACT VIOLATION: " __VA_ARGS__);     \
        fputc('\n', stderr);                                                \
        abort();                                                            \
    } while (0)

/* ------------------------------------------------------------- reader */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd;

static unsigned u8(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static unsigned pick(rd *r, unsigned k) { return k ? u8(r) % k : 0; }
static uint32_t u32(rd *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)u8(r) << (8 * i);
    return v;
}

/* Values: a PRNG seeded from the input, so libFuzzer mutates structure. */
typedef struct prng {
    uint64_t s;
} prng;
static uint64_t pr_next(prng *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double pr_unit(prng *g) { return (double)(pr_next(g) >> 11) * 0x1p-53; }
static float pr_val(prng *g, double mag) { return (float)((2.0 * pr_unit(g) - 1.0) * mag); }

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float sentinel(void)
{
    uint32_t u = SENT;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "fuzz_attn: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

/* --------------------------------------------------- expected statuses */

/* must: statuses of the rules the problem breaks (nonzero: an error is
 * required and must be one of must | maybe); maybe: statuses also
 * tolerated (ambiguities of the header, known bugs, huge sizes). */
typedef struct expect {
    unsigned must, maybe;
} expect;

static const char *st_name(attn_status s) { return attn_status_str(s); }

static void check_status(const char *what, attn_status st, expect e)
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

enum { VK_INPUT, VK_OUTPUT, VK_LSE, VK_BCAST, VK_DBIAS };

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
static void expect_view_es(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S,
                           int64_t D, int kind, int es16);
static void expect_view(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S,
                        int64_t D, int kind)
{
    expect_view_es(e, v, B, H, S, D, kind, 0);
}
/* es16: a K or V view of F16/BF16 storage (uint16_t elements).  attn.h
 * does not say whether its byte limit counts 2 or 4 bytes an element:
 * extents between the two limits are tolerated either way. */
static void expect_view_es(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S,
                           int64_t D, int kind, int es16)
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

static int reserved_nonzero(const int64_t *r, int n)
{
    for (int i = 0; i < n; i++)
        if (r[i])
            return 1;
    return 0;
}

/* The engine from spare bits of a decoded byte: AUTO, BLAS, TILE, AUTO. */
static attn_engine engine_of(unsigned bits)
{
    static const attn_engine e[4] = { ATTN_ENGINE_AUTO, ATTN_ENGINE_BLAS, ATTN_ENGINE_TILE,
                                      ATTN_ENGINE_AUTO };
    return e[bits & 3];
}
static int engine_ok(int e) { return e == ATTN_ENGINE_AUTO || e == ATTN_ENGINE_BLAS || e == ATTN_ENGINE_TILE; }
static int mask_mode_ok(int m) { return m == ATTN_MASK_NONE || m == ATTN_MASK_KEEP_NONZERO || m == ATTN_MASK_DROP_NONZERO; }

/* attn.h, "Sparse attention" and the desc's fields: reserved_flags zero,
 * block_size 0 or a power of two from 16 to 256, layout_per_head 0 or 1
 * and 0 without a layout; else ATTN_ERR_BAD_OPTION. */
static int block_size_ok(int64_t bs)
{
    return bs == 0 || (bs >= 16 && bs <= 256 && (bs & (bs - 1)) == 0);
}
static int sparse_fields_ok(int reserved_flags, int layout_per_head, int64_t bs)
{
    return reserved_flags == 0 && block_size_ok(bs) &&
           (layout_per_head == 0 || (layout_per_head == 1 && bs != 0));
}

/* attn.h, "Decoding and the KV cache": k_type and v_type F32, F16 or
 * BF16; kv_block_size >= 0, and kv_num_blocks / kv_max_blocks zero without
 * paging (else ATTN_ERR_BAD_OPTION); storage types and paging do not
 * combine with the sparse options (ATTN_ERR_BAD_OPTION). */
static int dtype_ok(int t)
{
    return t == ATTN_DTYPE_F32 || t == ATTN_DTYPE_F16 || t == ATTN_DTYPE_BF16;
}
static int kv_plain(const attn_sdpa_desc *d)
{
    return d->k_type == ATTN_DTYPE_F32 && d->v_type == ATTN_DTYPE_F32 && d->kv_block_size == 0;
}
static void expect_kv_options(expect *e, const attn_sdpa_desc *d)
{
    if (!dtype_ok(d->k_type) || !dtype_ok(d->v_type))
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
    if (d->kv_block_size < 0 ||
        (d->kv_block_size == 0 && (d->kv_num_blocks != 0 || d->kv_max_blocks != 0)))
        e->must |= BIT(ATTN_ERR_BAD_OPTION);
}
/* The paging sizes and the K and V views (batch, kv_heads, kv_len, qk_dim
 * and v_dim known positive): with paging, kv_num_blocks or kv_max_blocks
 * <= 0 or m > kv_max_blocks x kv_block_size are ATTN_ERR_BAD_SIZE, any of
 * the three past INT32_MAX ATTN_ERR_TOO_LARGE, and the views are checked
 * against [kv_num_blocks][Hkv][bs][d]; without, [B][Hkv][m][d]. */
static void expect_kv_views(expect *e, const attn_sdpa_desc *d)
{
    const int64_t B = d->batch, Hkv = d->kv_heads, m = d->kv_len, bs = d->kv_block_size,
                  nb = d->kv_num_blocks, mb = d->kv_max_blocks;
    const int k16 = d->k_type != ATTN_DTYPE_F32, v16 = d->v_type != ATTN_DTYPE_F32;
    if (bs <= 0) {
        expect_view_es(e, &d->k, B, Hkv, m, d->qk_dim, VK_INPUT, k16);
        expect_view_es(e, &d->v, B, Hkv, m, d->v_dim, VK_INPUT, v16);
        return;
    }
    if (nb <= 0 || mb <= 0) {
        e->must |= BIT(ATTN_ERR_BAD_SIZE);
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_BAD_STRIDE) |
                    BIT(ATTN_ERR_STRIDES_UNSET);
        return;
    }
    if (bs > INT32_MAX || nb > INT32_MAX || mb > INT32_MAX) {
        e->must |= BIT(ATTN_ERR_TOO_LARGE);
        e->maybe |= BIT(ATTN_ERR_BAD_SIZE);
    } else if (m > mb * bs) {
        e->must |= BIT(ATTN_ERR_BAD_SIZE);
    }
    int64_t t;
    if (__builtin_mul_overflow(B, mb, &t) || t > INT64_MAX / 4)
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE); /* the table's bytes: not in attn.h */
    expect_view_es(e, &d->k, nb, Hkv, bs, d->qk_dim, VK_INPUT, k16);
    expect_view_es(e, &d->v, nb, Hkv, bs, d->v_dim, VK_INPUT, v16);
}

static expect expect_sdpa_plan(const attn_sdpa_desc *d)
{
    expect e = { 0, 0 };
    if (reserved_nonzero(d->reserved, (int)(sizeof d->reserved / sizeof d->reserved[0])) ||
        d->reserved_pad != 0 || !engine_ok(d->engine) ||
        (d->align != ATTN_ALIGN_TOP_LEFT && d->align != ATTN_ALIGN_BOTTOM_RIGHT) ||
        !mask_mode_ok(d->mask_mode) || !(d->dropout_p >= 0.0 && d->dropout_p <= 1.0))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    if (!sparse_fields_ok(d->reserved_flags, d->layout_per_head, d->block_size))
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    expect_kv_options(&e, d);
    if (!kv_plain(d) && (d->use_global_k || d->use_global_q || d->block_size != 0))
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
    expect_view(&e, &d->q, B, Hq, n, d->qk_dim, VK_INPUT);
    expect_kv_views(&e, d);
    expect_view(&e, &d->o, B, Hq, n, d->v_dim, VK_OUTPUT);
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

/* ------------------------------------------------------------- views */

/* Strides of a non-overlapping view of [sz0][sz1][sz2][D]: the three dims
 * in a decoded order (outer to inner) with decoded gaps. */
static attn_view gen_view(rd *r, const int64_t sz[3], int64_t D)
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
static int64_t view_extent(const attn_view *v, const int64_t sz[3], int64_t D)
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
static size_t place(rd *r, size_t *len, size_t ext, int overlap_ok)
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

/* An output buffer: the view at a small offset, sentinel everywhere, and a
 * map of the elements inside the view. */
typedef struct obuf {
    float *base;
    uint8_t *inview;
    size_t count;
    float *ptr; /* view origin */
} obuf;

static void obuf_make(obuf *b, rd *r, const attn_view *v, const int64_t sz[3], int64_t D,
                      int64_t ext)
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
static void obuf_clear(obuf *b)
{
    const float s = sentinel();
    for (size_t i = 0; i < b->count; i++)
        b->base[i] = s;
}
static void obuf_free(obuf *b)
{
    free(b->base);
    free(b->inview);
    memset(b, 0, sizeof *b);
}
static void obuf_untouched(const obuf *b, const char *name, const char *when)
{
    for (size_t i = 0; i < b->count; i++)
        if (fbits(b->base[i]) != SENT)
            FAIL("%s: output %s element %zu was written (bits 0x%08x)", when, name, i,
                 fbits(b->base[i]));
}
static void obuf_outside(const obuf *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (!b->inview[i] && fbits(b->base[i]) != SENT)
            FAIL("output %s element %zu outside the view was written (bits 0x%08x)", name, i,
                 fbits(b->base[i]));
}
static float *obuf_snap(const obuf *b)
{
    if (!b->base)
        return NULL;
    float *s = xmalloc(b->count * sizeof(float));
    memcpy(s, b->base, b->count * sizeof(float));
    return s;
}
/* note: what else differed between the two runs ("" if nothing) */
static void obuf_same(const obuf *b, const float *snap, const char *name, int t1, int t2,
                      const char *note)
{
    if (b->base && memcmp(b->base, snap, b->count * sizeof(float)))
        FAIL("output %s differs bitwise between %d and %d threads%s", name, t1, t2, note);
}

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

/* Invalid fields the decoder can plant (one or two per input). */
enum {
    BAD_NONE = 0,
    BAD_RESERVED,
    BAD_ENUM,
    BAD_SIZE_NONPOS,
    BAD_SIZE_HUGE,
    BAD_HEAD_RATIO,
    BAD_STRIDE_NEG,
    BAD_STRIDE_ZERO,
    BAD_STRIDE_SHORT,
    BAD_STRIDE_UNSET,
    BAD_OUT_OVERLAP,
    BAD_SCALE_INF,
    BAD_THREADS_,
    BAD_STRIDE_HUGE,
    BAD_PTR_NULL,
    BAD_PTR_EXTRA,
    BAD_LENGTH_,
    BAD_WS_SMALL,
    BAD_WS_MISALIGNED,
    BAD_NULL_TOP,
    BAD_COUNT_
};

static const int64_t huge_sizes[] = {
    (int64_t)INT32_MAX,        (int64_t)INT32_MAX + 1, (int64_t)1 << 40,
    INT64_MAX,                 (int64_t)1537228672809129302, (int64_t)1 << 62,
    (int64_t)UINT32_MAX,       (int64_t)1 << 31 | 1,
};

static int32_t bad_length(rd *r, int64_t lim)
{
    switch (pick(r, 4)) {
    case 0: return -1;
    case 1: return (int32_t)lim + 1;
    case 2: return INT32_MIN;
    default: return INT32_MAX;
    }
}

/* Caller workspace: NULL, exact, larger, NaN-filled; or deliberately bad. */
typedef struct wsp {
    void *raw;
    void *ptr;
    size_t bytes;
    size_t alloc; /* bytes at raw */
} wsp;
static void wsp_make(wsp *w, unsigned choice, size_t need, int small, int misaligned)
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

/* Byte 0 of an input: bit 0 the API (SDPA or MHA); bit 1 decodes the
 * dropout fields (decode_dropout) into the SDPA or MHA desc; bit 2, for MHA,
 * runs the training calls (attn_mha_train_execute, then fuzz_mha_train).
 * Inputs with bits 1 and 2 clear decode as they did before those existed. */
enum { SEL_MHA = 1, SEL_DROPOUT = 2, SEL_TRAIN = 4, SEL_SPARSE = 8, SEL_LINEAR = 16,
       SEL_LAYOUT = 32, SEL_KV = 64 };
/* Bit 6 (SEL_KV): an SDPA problem with K/V storage types and a paged
 * cache (decode_kv); with bit 0, one attn_kv_append call (fuzz_kv_append).
 * Bit 6 was cleared in every committed input first (the decoder ignored
 * it), so they decode as before. */
/* Bits 4 and 5 together: attn_partials_merge (fuzz_merge).  They decoded
 * as a layout builder call before; no committed input has both set. */
#define SEL_MERGE (SEL_LINEAR | SEL_LAYOUT)

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

static void decode_dropout(rd *r, double *p, uint64_t *seed, uint64_t *offset)
{
    const unsigned c = u8(r);
    *p = (c & 0x80) ? (double)(c & 0x7f) / 127.0 : drop_ps[c % 32];
    const unsigned f = u8(r);
    *seed = drop_word(r, f);
    *offset = drop_word(r, f >> 2);
}

/* p = 0 runs exactly the path without dropout: the bitwise rerun resets a
 * seed and offset set with p = 0, and says so if the bits differ. */
static const char *drop_zero_reset(double p, uint64_t *seed, uint64_t *offset)
{
    if (p != 0.0 || (*seed == 0 && *offset == 0))
        return "";
    *seed = 0;
    *offset = 0;
    return " (dropout_p = 0: the first run with a dropout seed and offset, the second "
           "without)";
}


/* ------------------------------------------------------------- sparse */

/* Bit 3 of the first byte (SEL_SPARSE) decodes the sparse fields of the
 * SDPA or MHA desc (attn.h, "Sparse attention"): global keys and queries
 * (enabled by 1, 2 or -1: any nonzero), a block size (0: no layout, 16 to
 * 256) and layout_per_head, then what fills the flags and the layout. */
typedef struct sparse_cfg {
    int gk, gq, lph;
    int64_t bs;
    unsigned fill;
} sparse_cfg;

static void decode_sparse(rd *r, sparse_cfg *c)
{
    static const int64_t sizes[8] = { 0, 16, 16, 16, 32, 64, 128, 256 };
    static const int on[4] = { 1, 1, 2, -1 };
    const unsigned x = u8(r);
    c->gk = (x & 1) ? on[x >> 6] : 0;
    c->gq = (x & 2) ? on[(x >> 6) ^ 2] : 0;
    c->bs = sizes[(x >> 2) & 7];
    c->lph = c->bs != 0 && (x & 32);
    c->fill = u8(r);
    c->fill |= u8(r) << 8;
}

/* A planted invalid sparse field (BAD_RESERVED, BAD_ENUM and BB_FWD with
 * sparse): reserved_flags nonzero, a block size that is no power of two in
 * [16, 256], layout_per_head not 0 or 1, or 1 without a layout. */
static void plant_sparse(rd *r, int reserved, int *rf, int *lph, int64_t *bs)
{
    static const int64_t bad_bs[12] = { 1, 8, 15, 17, 24, 48, 255, 257, 512, -16, INT64_MIN,
                                        (int64_t)1 << 40 };
    static const int bad_lph[3] = { 2, -1, INT_MAX };
    if (reserved) {
        *rf = (u8(r) & 1) ? 1 + (int)u8(r) : INT_MIN;
        return;
    }
    switch (pick(r, 3)) {
    case 0: *bs = bad_bs[pick(r, 12)]; break;
    case 1: *lph = bad_lph[pick(r, 3)]; break;
    default: *lph = 1; *bs = 0; break;
    }
}

/* The flag arrays and the layout, exact sizes (ASan sees any read past
 * them): global_k [B][m], global_q [B][n], layout [H|1][nb][mb]. */
typedef struct sparse_buf {
    uint8_t *gk, *gq, *lay;
    int64_t nb, mb;
} sparse_buf;

static void layout_fill(uint8_t *L, int64_t nb, int64_t mb, unsigned style, prng *g)
{
    const size_t cnt = (size_t)(nb * mb);
    switch (style) {
    case 0: /* everything visible (any nonzero value) */
        for (size_t i = 0; i < cnt; i++)
            L[i] = (uint8_t)(1 + pr_next(g) % 255);
        break;
    case 1: memset(L, 0, cnt); break; /* everything hidden */
    case 2:
    case 7:
        for (size_t i = 0; i < cnt; i++)
            L[i] = pr_unit(g) < (style == 2 ? 0.5 : 0.25) ? (uint8_t)(1 + pr_next(g) % 255) : 0;
        break;
    case 3: /* mostly visible, whole block rows hidden */
        for (int64_t I = 0; I < nb; I++) {
            const int hide = pr_unit(g) < 0.4;
            for (int64_t J = 0; J < mb; J++)
                L[I * mb + J] = !hide && pr_unit(g) < 0.75;
        }
        break;
    case 4: {
        static const int64_t ws[4] = { 0, 1, 3, 5 };
        const attn_status st = attn_layout_build_bigbird(L, nb, mb, ws[pr_next(g) % 4],
                                                   (int64_t)(pr_next(g) % 3),
                                                   (int64_t)(pr_next(g) % 3), pr_next(g));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_bigbird: %s", st_name(st));
        break;
    }
    case 5: {
        const attn_status st = attn_layout_build_strided(L, nb, mb, 1 + (int64_t)(pr_next(g) % 3),
                                                   (int)(pr_next(g) & 1));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_strided: %s", st_name(st));
        break;
    }
    default: {
        const int64_t l = 1 + (int64_t)(pr_next(g) % 3);
        const attn_status st = attn_layout_build_fixed(L, nb, mb, l, 1 + (int64_t)(pr_next(g) % (uint64_t)l),
                                                 (int)(pr_next(g) & 1));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_fixed: %s", st_name(st));
        break;
    }
    }
}

static void sparse_make(sparse_buf *S, const sparse_cfg *c, prng *g, int64_t B, int64_t H,
                        int64_t n, int64_t m)
{
    static const double dens[4] = { 0.0, 0.125, 0.5, 1.0 };
    memset(S, 0, sizeof *S);
    const unsigned f = c->fill;
    if (c->gk) {
        S->gk = xmalloc((size_t)(B * m));
        for (int64_t i = 0; i < B * m; i++)
            S->gk[i] = pr_unit(g) < dens[f & 3] ? (uint8_t)(1 + pr_next(g) % 255) : 0;
    }
    if (c->gq) {
        S->gq = xmalloc((size_t)(B * n));
        for (int64_t i = 0; i < B * n; i++)
            S->gq[i] = pr_unit(g) < dens[(f >> 2) & 3] ? (uint8_t)(1 + pr_next(g) % 255) : 0;
    }
    if (c->bs) {
        S->nb = (n + c->bs - 1) / c->bs;
        S->mb = (m + c->bs - 1) / c->bs;
        const int64_t hl = c->lph ? H : 1;
        S->lay = xmalloc((size_t)(hl * S->nb * S->mb));
        /* one style, or (bit 7) a style per head */
        for (int64_t h = 0; h < hl; h++)
            layout_fill(S->lay + h * S->nb * S->mb, S->nb, S->mb,
                        (f & 0x80) ? (unsigned)(pr_next(g) % 8) : (f >> 4) & 7, g);
    }
}

static void sparse_free(sparse_buf *S)
{
    free(S->gk);
    free(S->gq);
    free(S->lay);
    memset(S, 0, sizeof *S);
}

static void print_sparse(int gk, int gq, int lph, int rf, int64_t bs)
{
    if (gk || gq || lph || rf || bs)
        fprintf(stderr, " sparse=gk%d/gq%d/bs%lld/lph%d/rf%d", gk, gq, (long long)bs, lph, rf);
}

/* ------------------------------------------------------------------ SDPA */

typedef struct sdpa_prob {
    attn_sdpa_desc d;
    attn_sdpa_args a;
    int32_t kv_lens[8], q_lens[8];
    float *pool;     /* Q, K, V and bias, possibly overlapping */
    size_t pool_len;
    uint8_t *mpool;  /* the mask */
    size_t mpool_len;
    obuf o, p, l;
    int sparse;      /* SEL_SPARSE: the flags and layout below */
    sparse_buf sb;
    /* SEL_KV: what the float64 reference reads instead of d and a (F32,
     * contiguous, the stored values widened); NULL: d and a */
    const attn_sdpa_desc *refd;
    const attn_sdpa_args *refa;
} sdpa_prob;

static void print_view(const char *name, const attn_view *v)
{
    fprintf(stderr, " %s{%lld,%lld,%lld}", name, (long long)v->batch, (long long)v->head,
            (long long)v->seq);
}

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
    fprintf(stderr, " engine=%d threads=%d/%d bad=%u,%u\n", (int)d->engine, d->threads, t2,
            bad[0], bad[1]);
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

/* The plan-independent part of execute's contract. */
/* What execute must say of its pointers (used ones non-NULL, unused ones
 * NULL), the per-batch lengths in use, and a caller workspace. */
typedef struct ptr_use { int used; const void *p; } ptr_use;
static void expect_call(expect *e, const ptr_use *f, size_t nf, int64_t batch,
                        const int32_t *kv_lens, int64_t m, const int32_t *q_lens, int64_t n,
                        const void *ws, size_t ws_bytes, size_t need)
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

static expect expect_sdpa_exec(const attn_sdpa_desc *d, const attn_sdpa_args *a,
                               const void *ws, size_t ws_bytes, size_t need)
{
    expect e = { 0, 0 };
    /* K and V: args.k / args.v for F32, else args.k16 / args.v16 with the
     * other pointer NULL */
    const int k16 = d->k_type != ATTN_DTYPE_F32, v16 = d->v_type != ATTN_DTYPE_F32;
    const void *kp = k16 ? (const void *)a->k16 : (const void *)a->k;
    const void *vp = v16 ? (const void *)a->v16 : (const void *)a->v;
    if (!a->q || !kp || !vp || !a->o)
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    if ((k16 ? (const void *)a->k : (const void *)a->k16) ||
        (v16 ? (const void *)a->v : (const void *)a->v16))
        e.must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
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

static void sdpa_check_results(const sdpa_prob *P)
{
    const attn_sdpa_desc *d = P->refd ? P->refd : &P->d;
    const int64_t B = d->batch, Hq = d->q_heads, n = d->q_len, m = d->kv_len, dv = d->v_dim;
    ref_out ro;
    if (ref_sdpa_alloc(d, P->refa ? P->refa : &P->a, &ro))
        abort();
    /* with dropout the reference's O and P are of P' = P keep / (1 - p) */
    const double drel = ref_dropout_rel(d);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < n; i++) {
                const size_t row = (size_t)((b * Hq + h) * n + i);
                double prel, orel, ltol;
                ref_row_tolerance(d->qk_dim, ro.nvis[row], ro.s_abs[row], ro.lse[row], &prel,
                                  &orel, &ltol);
                prel += drel;
                orel += drel;
                const float *O = P->o.ptr + b * d->o.batch + h * d->o.head + i * d->o.seq;
                for (int64_t x = 0; x < dv; x++) {
                    double ref = ro.o[row * (size_t)dv + (size_t)x];
                    double tol = orel * ro.o_abs[row * (size_t)dv + (size_t)x] + REF_TINY;
                    if (!(fabs((double)O[x] - ref) <= tol))
                        FAIL("O[b=%lld h=%lld i=%lld d=%lld] = %.9g, reference %.9g, tol %.3g",
                             (long long)b, (long long)h, (long long)i, (long long)x,
                             (double)O[x], ref, tol);
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
    obuf_outside(&P->o, "O");
    if (d->want_probs)
        obuf_outside(&P->p, "P");
    if (d->want_lse)
        obuf_outside(&P->l, "lse");
    ref_out_free(&ro);
}

static void sdpa_clear(sdpa_prob *P)
{
    obuf_clear(&P->o);
    if (P->p.base)
        obuf_clear(&P->p);
    if (P->l.base)
        obuf_clear(&P->l);
}

static void sdpa_untouched(const sdpa_prob *P, const char *when)
{
    obuf_untouched(&P->o, "O", when);
    if (P->p.base)
        obuf_untouched(&P->p, "P", when);
    if (P->l.base)
        obuf_untouched(&P->l, "lse", when);
}

static int threads_other(int t, unsigned c)
{
    int t2 = 1 + (int)(c % 4);
    if (t2 == t)
        t2 = t % 4 + 1;
    return t2;
}


/* ------------------------------------------------------------ KV cache */

/* Invalid fields of a SEL_KV SDPA problem (its own byte, besides byte 1's
 * BAD_*): a table entry of a needed block out of range, the table NULL
 * when paged or given when not, the K/V pointer of the storage type NULL
 * or the other one given, an unknown storage type, invalid paging fields,
 * a sparse option with them, an invalid K/V (pool) view. */
enum { KB_NONE, KB_TABLE_RANGE, KB_TABLE_NULL, KB_TABLE_EXTRA, KB_PTR_NULL, KB_PTR_EXTRA,
       KB_TYPE, KB_PAGING, KB_SPARSE, KB_VIEW, KB_COUNT_ };

typedef struct kv_cfg {
    int on;               /* SEL_KV */
    attn_dtype kt, vt;    /* storage of K and V */
    int paged;
    int64_t bs, nb, mb;   /* block size, pool blocks, table columns */
    unsigned garb;        /* what unused pool rows and table entries hold */
    unsigned bad;         /* KB_* */
    attn_view kcv, vcv;   /* K and V stored contiguously ([B][Hkv][m][d]) */
} kv_cfg;

static void decode_kv(rd *r, kv_cfg *c, int64_t B, int64_t m)
{
    static const int64_t bss[4] = { 1, 2, 3, 16 };
    const unsigned x = u8(r), y = u8(r), z = u8(r);
    c->on = 1;
    c->kt = (attn_dtype)(x % 3);
    c->vt = (attn_dtype)(x / 3 % 3);
    c->paged = (x / 9) % 4 != 0;
    c->bs = bss[y & 3];
    const int64_t per = (m + c->bs - 1) / c->bs; /* blocks of the longest sequence */
    c->mb = per + (int64_t)((y >> 2) & 3);
    c->nb = B * per + (int64_t)((y >> 4) & 3);
    c->garb = y >> 6;
    c->bad = z < 128 ? KB_NONE : 1 + (z - 128) % (KB_COUNT_ - 1);
}

static const uint16_t nan16[3] = { 0, 0x7e00, 0x7fc0 }; /* quiet NaN of F16, BF16 */

/* The storage of K (t = 0) and V (t = 1): contiguous in the decoded type
 * (c16: F16/BF16, with w its exact widening, what the reference reads;
 * F32 stays in the float pool) and, paged, the pool (float or uint16_t,
 * exactly its view's extent) with the table. */
typedef struct kv_store {
    uint16_t *c16[2];
    float *w[2];
    float *cf[2];         /* paged F32: the contiguous values, own copy */
    void *pool[2];
    int32_t *table;
    int64_t nbl[8];       /* blocks holding each sequence's tokens */
} kv_store;

static void kv_store_free(kv_store *S)
{
    for (int t = 0; t < 2; t++) {
        free(S->c16[t]);
        free(S->w[t]);
        free(S->cf[t]);
        free(S->pool[t]);
    }
    free(S->table);
    memset(S, 0, sizeof *S);
}

/* One tensor: src the float pool at the contiguous view's origin (ext
 * elements), cv that view, pv the pool view of pext elements. */
static void kv_store_tensor(kv_store *S, int t, const kv_cfg *c, attn_dtype ty, const float *src,
                            int64_t ext, const attn_view *cv, const attn_view *pv, int64_t pext,
                            int64_t B, int64_t Hkv, int64_t D, const int32_t *klens, prng *g)
{
    if (ty != ATTN_DTYPE_F32) {
        S->c16[t] = xmalloc((size_t)ext * sizeof(uint16_t));
        S->w[t] = xmalloc((size_t)ext * sizeof(float));
        if (attn_dtype_encode(ty, src, S->c16[t], ext) != ATTN_OK ||
            attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK)
            FAIL("attn_convert of the K/V values failed");
    }
    if (!c->paged)
        return;
    const size_t es = ty == ATTN_DTYPE_F32 ? sizeof(float) : sizeof(uint16_t);
    S->pool[t] = xmalloc((size_t)pext * es);
    /* unused blocks, rows past the lengths and gaps: NaN, +Inf or random */
    for (int64_t i = 0; i < pext; i++) {
        uint32_t bits = c->garb == 2 ? (uint32_t)pr_next(g) : c->garb == 3 ? 0x7f800000u : 0x7fc00000u;
        if (ty == ATTN_DTYPE_F32)
            memcpy((float *)S->pool[t] + i, &bits, 4);
        else
            ((uint16_t *)S->pool[t])[i] = c->garb == 2 ? (uint16_t)bits
                                          : c->garb == 3 ? (ty == ATTN_DTYPE_F16 ? 0x7c00 : 0x7f80)
                                                         : nan16[ty];
    }
    /* The rows, those holding a NaN first: a pool view may overlap itself
     * (a valid input view), and then the finite rows win.  Then the
     * contiguous values are gathered back from the pool, so that the
     * reference and the contiguous twin read what the paged call reads. */
    if (ty == ATTN_DTYPE_F32) {
        S->cf[t] = xmalloc((size_t)ext * sizeof(float));
        memcpy(S->cf[t], src, (size_t)ext * sizeof(float));
    }
    for (int pass = 0; pass < 3; pass++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t J = 0; J < S->nbl[b]; J++) {
                const int64_t blk = S->table[b * c->mb + J];
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t jj = 0; jj < c->bs && J * c->bs + jj < klens[b]; jj++) {
                        const int64_t j = J * c->bs + jj;
                        const int64_t so = b * cv->batch + h * cv->head + j * cv->seq;
                        const int64_t po = blk * pv->batch + h * pv->head + jj * pv->seq;
                        void *prow = ty == ATTN_DTYPE_F32 ? (void *)((float *)S->pool[t] + po)
                                                          : (void *)((uint16_t *)S->pool[t] + po);
                        void *crow = ty == ATTN_DTYPE_F32 ? (void *)(S->cf[t] + so)
                                                          : (void *)(S->c16[t] + so);
                        const size_t bytes = (size_t)D * es;
                        if (pass == 2) {
                            memcpy(crow, prow, bytes);
                            continue;
                        }
                        int has_nan = 0;
                        for (int64_t x = 0; x < D; x++)
                            if (isnan(ty == ATTN_DTYPE_F32 ? (double)S->cf[t][so + x]
                                                           : (double)S->w[t][so + x]))
                                has_nan = 1;
                        if (has_nan == (pass == 0))
                            memcpy(prow, crow, bytes);
                    }
            }
    if (ty != ATTN_DTYPE_F32 &&
        attn_dtype_decode(ty, S->c16[t], S->w[t], ext) != ATTN_OK)
        FAIL("attn_convert of the K/V values failed");
}

/* The block table: the blocks holding tokens [0, klens[b]) of every
 * sequence get distinct pool blocks in random order; entries past them
 * hold garbage (out of range, another sequence's block, random). */
static void kv_table(kv_store *S, const kv_cfg *c, int64_t B, const int32_t *klens, prng *g)
{
    int32_t *perm = xmalloc((size_t)c->nb * sizeof(int32_t));
    for (int64_t i = 0; i < c->nb; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = c->nb - 1; i > 0; i--) {
        const int64_t k = (int64_t)(pr_next(g) % (uint64_t)(i + 1));
        const int32_t x = perm[i];
        perm[i] = perm[k];
        perm[k] = x;
    }
    S->table = xmalloc((size_t)(B * c->mb) * sizeof(int32_t));
    int64_t used = 0;
    for (int64_t b = 0; b < B; b++) {
        S->nbl[b] = (klens[b] + c->bs - 1) / c->bs;
        for (int64_t J = 0; J < c->mb; J++) {
            int32_t id;
            if (J < S->nbl[b]) {
                id = perm[used++];
            } else {
                switch (pr_next(g) % 6) {
                case 0: id = -1; break;
                case 1: id = (int32_t)c->nb; break;
                case 2: id = INT32_MAX; break;
                case 3: id = INT32_MIN; break;
                case 4: id = perm[pr_next(g) % (uint64_t)c->nb]; break;
                default: id = (int32_t)pr_next(g); break;
                }
            }
            S->table[b * c->mb + J] = id;
        }
    }
    free(perm);
}

/* A planted KB_* field (after the buffers exist: they follow the decoded,
 * valid configuration). */
static void kv_plant(rd *r, const kv_cfg *c, kv_store *S, attn_sdpa_desc *d, attn_sdpa_args *a)
{
    static const int32_t junk_table[8];
    static const uint16_t junk16[8];
    static const float junkf[8];
    switch (c->bad) {
    case KB_TABLE_RANGE: {
        if (!S->table)
            break;
        const int64_t b0 = pick(r, (unsigned)d->batch);
        for (int64_t k = 0; k < d->batch; k++) {
            const int64_t b = (b0 + k) % d->batch;
            if (S->nbl[b] == 0)
                continue;
            static const int32_t bad_id[5] = { -1, 0, INT32_MAX, INT32_MIN, -2 };
            const unsigned w = pick(r, 5);
            S->table[b * c->mb + pick(r, (unsigned)S->nbl[b])] =
                w == 1 ? (int32_t)c->nb + (int32_t)pick(r, 3) : bad_id[w];
            break;
        }
        break;
    }
    case KB_TABLE_NULL: a->block_table = NULL; break;
    case KB_TABLE_EXTRA: if (!a->block_table) a->block_table = junk_table; break;
    case KB_PTR_NULL:
        if (u8(r) & 1) {
            if (d->k_type != ATTN_DTYPE_F32) a->k16 = NULL; else a->k = NULL;
        } else {
            if (d->v_type != ATTN_DTYPE_F32) a->v16 = NULL; else a->v = NULL;
        }
        break;
    case KB_PTR_EXTRA:
        if (u8(r) & 1) {
            if (d->k_type != ATTN_DTYPE_F32) a->k = junkf; else a->k16 = junk16;
        } else {
            if (d->v_type != ATTN_DTYPE_F32) a->v = junkf; else a->v16 = junk16;
        }
        break;
    case KB_TYPE: {
        static const int bad_t[4] = { 3, 4, -1, 255 };
        const int v = bad_t[pick(r, 4)];
        if (u8(r) & 1) d->k_type = (attn_dtype)v; else d->v_type = (attn_dtype)v;
        break;
    }
    case KB_PAGING: {
        const unsigned w = pick(r, 6);
        if (!c->paged) {
            if (w < 2) d->kv_num_blocks = 1 + (int64_t)u8(r);
            else if (w < 4) d->kv_max_blocks = (u8(r) & 1) ? -1 : 1 + (int64_t)u8(r);
            else if (w == 4) d->kv_block_size = -1 - (int64_t)u8(r);
            else d->kv_block_size = 1 + pick(r, 16); /* paged with no blocks */
            break;
        }
        static const int64_t huge32[3] = { (int64_t)INT32_MAX + 1, (int64_t)1 << 40, INT64_MAX };
        switch (w) {
        case 0: d->kv_block_size = (u8(r) & 1) ? -1 : INT64_MIN; break;
        case 1: d->kv_num_blocks = -(int64_t)pick(r, 3); break;
        case 2: d->kv_max_blocks = -(int64_t)pick(r, 3); break;
        case 3: d->kv_max_blocks = (d->kv_len - 1) / d->kv_block_size; /* m > mb x bs */
                if (d->kv_max_blocks == 0) d->kv_max_blocks = -1;
                break;
        case 4: d->kv_num_blocks = huge32[pick(r, 3)]; break;
        default:
            if (u8(r) & 1) d->kv_max_blocks = huge32[pick(r, 3)];
            else d->kv_block_size = huge32[pick(r, 3)];
            break;
        }
        break;
    }
    case KB_SPARSE:
        /* A decoded layout keeps its block size: the layout array was
         * sized by it (a plant of 16 over 256 made a valid plan read a
         * 4-byte layout as 62 bytes; CI's fuzz run). */
        if (u8(r) & 1) d->use_global_k = 1; else if (!d->block_size) d->block_size = 16;
        break;
    case KB_VIEW: {
        attn_view *v = (u8(r) & 1) ? &d->k : &d->v;
        switch (pick(r, 4)) {
        case 0: v->seq = (v == &d->k ? d->qk_dim : d->v_dim) - 1; break;
        case 1: v->batch = -1 - (int64_t)u8(r); break;
        case 2: v->head = ATTN_STRIDE_UNSET; break;
        default: v->seq = (int64_t)1 << 61; break;
        }
        break;
    }
    default: break;
    }
}

/* Run desc/args into P's outputs (cleared first); ATTN_DECODE=0 when
 * nodecode (read at plan time: the sgemm path). */
static attn_status kv_run(sdpa_prob *P, const attn_sdpa_desc *d, const attn_sdpa_args *a,
                          int nodecode)
{
    sdpa_clear(P);
    const char *old = getenv("ATTN_DECODE");
    char *saved = old ? strdup(old) : NULL;
    if (nodecode)
        setenv("ATTN_DECODE", "0", 1);
    attn_sdpa_plan *plan = NULL;
    attn_status st = attn_sdpa_plan_create(&plan, d);
    if (nodecode) {
        if (saved)
            setenv("ATTN_DECODE", saved, 1);
        else
            unsetenv("ATTN_DECODE");
    }
    free(saved);
    if (st != ATTN_OK)
        return st;
    st = attn_sdpa_execute(plan, a, NULL, 0);
    attn_sdpa_plan_destroy(plan);
    return st;
}

static void fuzz_sdpa_bwd(rd *r, sdpa_prob *P, int t2);

static void fuzz_sdpa(rd *r, unsigned sel)
{
    sdpa_prob P;
    memset(&P, 0, sizeof P);
    attn_sdpa_desc *d = &P.d;
    attn_sdpa_desc_init(d);
    unsigned bad[2] = { BAD_NONE, BAD_NONE };
    unsigned bb = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (BAD_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, BAD_COUNT_ - 1);
    }

    /* sizes */
    int64_t B = 1 + pick(r, 3), Hkv = 1 + pick(r, 2), g = 1 + pick(r, 3);
    int64_t n = 1 + pick(r, 6), m = 1 + pick(r, 9), dk = 1 + pick(r, 6), dv = 1 + pick(r, 6);
    unsigned shape = u8(r);
    d->engine = engine_of(shape >> 4);
    shape %= 16;
    const int sparse = !!(sel & SEL_SPARSE);
    sparse_cfg sc = { 0, 0, 0, 0, 0 };
    if (sparse)
        decode_sparse(r, &sc);
    if (sparse && shape == 0 && (sc.fill & 0x300) == 0x300) {
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
    d->use_global_k = sc.gk;
    d->use_global_q = sc.gq;
    d->layout_per_head = sc.lph;
    d->block_size = sc.bs;
    const int64_t Hq = d->q_heads;

    /* options */
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
    const int t2 = threads_other(d->threads, tsel >> 3);
    if (sel & SEL_DROPOUT)
        decode_dropout(r, &d->dropout_p, &d->dropout_seed, &d->dropout_offset);
    for (int64_t b = 0; b < B; b++) {
        P.kv_lens[b] = (int32_t)pick(r, (unsigned)(m < 255 ? m + 1 : 255));
        if (m >= 255 && (u8(r) & 1))
            P.kv_lens[b] = (int32_t)m - (int32_t)pick(r, 8);
        P.q_lens[b] = (int32_t)pick(r, (unsigned)n + 1);
    }
    kv_cfg kv;
    memset(&kv, 0, sizeof kv);
    if (sel & SEL_KV) {
        decode_kv(r, &kv, B, m);
        d->k_type = kv.kt;
        d->v_type = kv.vt;
    }

    /* views */
    const int64_t szq[3] = { B, Hq, n }, szk[3] = { B, Hkv, m }, szl[3] = { B, Hq, n };
    int packed = 0;
    unsigned lay = u8(r);
    if ((lay & 7) == 7 && n == m && dk == dv && !kv.paged) {
        /* packed QKV [B][S][Hq + 2 Hkv][D] */
        packed = 1;
        const int64_t W = (Hq + 2 * Hkv) * dk + (lay >> 3) % 3;
        d->q = (attn_view){ n * W, dk, W };
        d->k = d->v = (attn_view){ n * W, dk, W };
    } else {
        d->q = gen_view(r, szq, dk);
        d->k = gen_view(r, szk, dk);
        d->v = gen_view(r, szk, dv);
    }
    d->o = gen_view(r, szq, dv);
    /* SEL_KV: the contiguous views stay for the reference and the
     * contiguous run; paged, d->k and d->v become views of the pools */
    kv.kcv = d->k;
    kv.vcv = d->v;
    const int64_t szkp[3] = { kv.nb, Hkv, kv.bs };
    if (kv.paged) {
        d->k = gen_view(r, szkp, dk);
        d->v = gen_view(r, szkp, dv);
        d->kv_block_size = kv.bs;
        d->kv_num_blocks = kv.nb;
        d->kv_max_blocks = kv.mb;
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
        d->lse = gen_view(r, szl, 1);
        unsigned z = u8(r);
        if (n == 1 && (z & 7) == 1)
            d->lse.seq = 0; /* attn.h: 0 is fine on a size-1 dimension */
    }

    /* invalid fields */
    int huge = 0;
    for (int k = 0; k < 2; k++) {
        attn_view *views[] = { &d->q, &d->k, &d->v, &d->o, &d->mask, &d->bias, &d->probs, &d->lse };
        attn_view *vw = views[pick(r, 8)];
        int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
        switch (bad[k]) {
        case BAD_RESERVED: {
            if (sparse && (u8(r) & 1)) {
                plant_sparse(r, 1, &d->reserved_flags, &d->layout_per_head, &d->block_size);
                break;
            }
            /* a reserved field, or a dropout probability outside [0, 1] */
            unsigned at = pick(r, (unsigned)(sizeof d->reserved / sizeof d->reserved[0]) + 1);
            int64_t val = (int64_t)u8(r) - 128;
            if (at < sizeof d->reserved / sizeof d->reserved[0]) {
                d->reserved[at] = val ? val : INT64_MIN;
            } else {
                static const double badp[] = { -0.25, 1.5, NAN, -INFINITY, INFINITY };
                d->dropout_p = badp[pick(r, 5)];
            }
            break;
        }
        case BAD_ENUM:
            if (sparse && (u8(r) & 1))
                plant_sparse(r, 0, &d->reserved_flags, &d->layout_per_head, &d->block_size);
            else if (u8(r) & 1) d->align = (attn_align)(2 + (int)pick(r, 3) - (u8(r) & 1) * 5);
            else d->mask_mode = (attn_mask_mode)(3 + (int)pick(r, 200));
            break;
        case BAD_SIZE_NONPOS: {
            int64_t *s[] = { &d->batch, &d->q_heads, &d->kv_heads, &d->q_len, &d->kv_len, &d->qk_dim, &d->v_dim };
            *s[pick(r, 7)] = (u8(r) & 1) ? 0 : -(int64_t)1 - (int64_t)u8(r);
            break;
        }
        case BAD_SIZE_HUGE: {
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
            huge = 1;
            break;
        }
        case BAD_HEAD_RATIO:
            d->kv_heads = d->q_heads < ((int64_t)1 << 40) ? d->q_heads + 1 + pick(r, 3) : 7;
            break;
        case BAD_STRIDE_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
        case BAD_STRIDE_ZERO: *sp = 0; break;
        case BAD_STRIDE_SHORT: vw->seq = pick(r, 3) ? (vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0) : 0; break;
        case BAD_STRIDE_UNSET:
            if (u8(r) & 1) *sp = ATTN_STRIDE_UNSET;
            else { /* enable a feature without strides */
                unsigned f = pick(r, 4);
                if (f == 0 && !d->mask_mode) { d->mask_mode = ATTN_MASK_KEEP_NONZERO; d->mask = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
                if (f == 1 && !d->use_bias) { d->use_bias = 1; d->bias = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
                if (f == 2 && !d->want_probs) { d->want_probs = 1; d->probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
                if (f == 3 && !d->want_lse) { d->want_lse = 1; d->lse = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET }; }
            }
            break;
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
    /* reading the rest of the exec-time fields happens below */
    expect pe = expect_sdpa_plan(d);
    if (huge)
        pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_sdpa(d, bad, t2);


    /* extents and buffers (only for small, computable problems) */
    int64_t eq = view_extent(&d->q, szq, dk), ek = view_extent(&d->k, kv.paged ? szkp : szk, dk),
            ev = view_extent(&d->v, kv.paged ? szkp : szk, dv), eo = view_extent(&d->o, szq, dv);
    int64_t em = d->mask_mode ? view_extent(&d->mask, szq, m) : 0;
    int64_t eb = d->use_bias ? view_extent(&d->bias, szq, m) : 0;
    int64_t ep = d->want_probs ? view_extent(&d->probs, szq, m) : 0;
    int64_t el = d->want_lse ? view_extent(&d->lse, szl, 1) : 0;
    const int small = !huge && eq >= 0 && ek >= 0 && ev >= 0 && eo >= 0 && em >= 0 && eb >= 0 &&
                      ep >= 0 && el >= 0 && d->batch == B && d->q_heads == Hq &&
                      d->kv_heads == Hkv && d->q_len == n && d->kv_len == m &&
                      d->qk_dim == dk && d->v_dim == dv && mask_mode_ok(d->mask_mode) &&
                      (!kv.paged || (view_extent(&kv.kcv, szk, dk) >= 0 &&
                                     view_extent(&kv.vcv, szk, dv) >= 0));
    /* the K and V views of the float pool: the contiguous ones when paged */
    const attn_view *kvw = kv.paged ? &kv.kcv : &d->k, *vvw = kv.paged ? &kv.vcv : &d->v;
    const int64_t ekc = kv.paged ? view_extent(kvw, szk, dk) : ek,
                  evc = kv.paged ? view_extent(vvw, szk, dv) : ev;

    if (!small) {
        /* plan only (and the one-shot call on dummy buffers when invalid) */
        attn_sdpa_plan *plan = NULL;
        attn_status st = attn_sdpa_plan_create(&plan, d);
        check_status("attn_sdpa_plan_create", st, pe);
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
        return;
    }

    /* inputs: one float pool for Q, K, V and bias, views may overlap */
    size_t len = 0, oq, okk, ov, ob = 0;
    if (packed) {
        /* the views may have been changed by a planted invalid stride */
        int64_t span = eq;
        if (ek + Hq * dk > span) span = ek + Hq * dk;
        if (ev + (Hq + Hkv) * dk > span) span = ev + (Hq + Hkv) * dk;
        oq = place(r, &len, (size_t)span, 0);
        okk = oq + (size_t)(Hq * dk);
        ov = okk + (size_t)(Hkv * dk);
    } else {
        oq = place(r, &len, (size_t)eq, 1);
        okk = place(r, &len, (size_t)ekc, 1);
        ov = place(r, &len, (size_t)evc, 1);
    }
    if (d->use_bias)
        ob = place(r, &len, (size_t)eb, 1);
    size_t mlen = 0, om = 0;
    if (d->mask_mode)
        om = place(r, &mlen, (size_t)em, 0);
    /* no tail: a read past the last view's end is outside the allocation */
    P.pool_len = len;
    P.pool = xmalloc(P.pool_len * sizeof(float));
    uint8_t *need = calloc(P.pool_len + 1, 1);
    P.mpool_len = mlen;
    P.mpool = xmalloc(P.mpool_len);
    uint8_t *mneed = calloc(P.mpool_len + 1, 1);
    if (!need || !mneed)
        abort();
    prng gv = { u32(r) };
    unsigned vopt = u8(r);
    static const double mags[] = { 1.0, 4.0, 0.25, 16.0 };
    const double mag = mags[vopt & 3];
    const double keep = (vopt >> 2 & 3) == 0 ? 1.0 : (vopt >> 2 & 3) * 0.3;
    const double ninf = (vopt >> 4 & 1) ? 0.25 : 0.0;
    unsigned garbage = vopt >> 5;

    /* the flags and the layout, as decoded (a planted invalid sparse field
     * fails the plan: what is read follows the decoded ones) */
    attn_sdpa_desc dn = *d;
    attn_sdpa_args an;
    memset(&an, 0, sizeof an);
    if (sparse) {
        prng gs = { u32(r) ^ 0x2545f4914f6cdd1dull };
        sparse_make(&P.sb, &sc, &gs, B, Hq, n, m);
        P.sparse = 1;
        dn.use_global_k = sc.gk;
        dn.use_global_q = sc.gq;
        dn.layout_per_head = sc.lph;
        dn.block_size = sc.bs;
        an.global_k = P.sb.gk;
        an.global_q = P.sb.gq;
        an.layout = P.sb.lay;
    }
    /* what may be read: 1 = Q/K/V, 2 = bias; with sparse attention, the
     * K and V rows of the candidate sets (attn.h: rows only in hidden
     * blocks or outside every candidate set may hold NaN) */
    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? P.kv_lens[b] : m;
        const int64_t qlen = d->use_q_lens ? P.q_lens[b] : n;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < qlen; i++) {
                for (int64_t x = 0; x < dk; x++)
                    need[oq + (size_t)(b * d->q.batch + h * d->q.head + i * d->q.seq + x)] |= 1;
                for (int64_t j = 0; j < klen; j++) {
                    if (!ref_candidate(&dn, &an, b, h, i, j, klen, qlen))
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
    for (size_t i = 0; i < P.pool_len; i++) {
        if (!need[i])
            P.pool[i] = NAN;
        else if (need[i] == 2 && ninf > 0 && pr_unit(&gv) < ninf)
            P.pool[i] = -INFINITY;
        else
            P.pool[i] = pr_val(&gv, mag);
    }
    const int keepv = d->mask_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (size_t i = 0; i < P.mpool_len; i++) {
        if (mneed[i]) {
            int vis = pr_unit(&gv) < keep;
            P.mpool[i] = (uint8_t)((vis == keepv) ? 1 + pr_next(&gv) % 255 : 0);
        } else {
            /* garbage, often the value that would hide (or show) everything */
            P.mpool[i] = garbage == 0 ? (uint8_t)(keepv ? 0 : 0xff) : garbage == 1 ? (uint8_t)(keepv ? 0xff : 0) : (uint8_t)pr_next(&gv);
        }
    }
    free(need);
    free(mneed);

    attn_sdpa_args *a = &P.a;
    a->q = P.pool + oq;
    a->k = P.pool + okk;
    a->v = P.pool + ov;
    if (d->use_bias)
        a->bias = P.pool + ob;
    if (d->mask_mode)
        a->mask = P.mpool + om;
    if (d->use_kv_lens)
        a->kv_lens = P.kv_lens;
    if (d->use_q_lens)
        a->q_lens = P.q_lens;
    if (d->use_global_k)
        a->global_k = P.sb.gk;
    if (d->use_global_q)
        a->global_q = P.sb.gq;
    if (d->block_size)
        a->layout = P.sb.lay;
    obuf_make(&P.o, r, &d->o, szq, dv, eo);
    a->o = P.o.ptr;
    if (d->want_probs) {
        obuf_make(&P.p, r, &d->probs, szq, m, ep);
        a->probs = P.p.ptr;
    }
    if (d->want_lse) {
        obuf_make(&P.l, r, &d->lse, szl, 1, el);
        a->lse = P.l.ptr;
    }

    /* SEL_KV: K and V in their storage types, contiguous or paged */
    kv_store KS;
    memset(&KS, 0, sizeof KS);
    attn_sdpa_desc kv_refd, kv_cd;
    attn_sdpa_args kv_refa, kv_ca;
    int32_t klens[8];
    if (kv.on) {
        prng gk = { u32(r) ^ 0x9e3779b97f4a7c15ull };
        for (int64_t b = 0; b < B; b++)
            klens[b] = d->use_kv_lens ? P.kv_lens[b] : (int32_t)m;
        if (kv.paged)
            kv_table(&KS, &kv, B, klens, &gk);
        kv_store_tensor(&KS, 0, &kv, kv.kt, P.pool + okk, ekc, kvw, &d->k, ek, B, Hkv, dk, klens, &gk);
        kv_store_tensor(&KS, 1, &kv, kv.vt, P.pool + ov, evc, vvw, &d->v, ev, B, Hkv, dv, klens, &gk);
        if (kv.paged) {
            a->k = kv.kt == ATTN_DTYPE_F32 ? (const float *)KS.pool[0] : NULL;
            a->v = kv.vt == ATTN_DTYPE_F32 ? (const float *)KS.pool[1] : NULL;
            a->k16 = kv.kt != ATTN_DTYPE_F32 ? (const uint16_t *)KS.pool[0] : NULL;
            a->v16 = kv.vt != ATTN_DTYPE_F32 ? (const uint16_t *)KS.pool[1] : NULL;
            a->block_table = KS.table;
        } else {
            if (KS.c16[0]) { a->k = NULL; a->k16 = KS.c16[0]; }
            if (KS.c16[1]) { a->v = NULL; a->v16 = KS.c16[1]; }
        }
    }

    /* exec-time invalid fields */
    int ws_small = 0, ws_mis = 0, null_top = 0;
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[8];
    static float junk_f[8];
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case BAD_PTR_NULL: {
            if (sparse && (u8(r) & 1)) {
                const void **sp3[] = { (const void **)&a->global_k, (const void **)&a->global_q,
                                       (const void **)&a->layout };
                *sp3[pick(r, 3)] = NULL;
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
            if (sparse && (u8(r) & 1)) {
                switch (pick(r, 3)) {
                case 0: if (!d->use_global_k) a->global_k = junk_u8; break;
                case 1: if (!d->use_global_q) a->global_q = junk_u8; break;
                default: if (!d->block_size) a->layout = junk_u8; break;
                }
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
            unsigned b = pick(r, (unsigned)B);
            if (u8(r) & 1) { P.kv_lens[b] = bad_length(r, m); if (!a->kv_lens) { d->use_kv_lens = 1; a->kv_lens = P.kv_lens; } }
            else { P.q_lens[b] = bad_length(r, n); if (!a->q_lens) { d->use_q_lens = 1; a->q_lens = P.q_lens; } }
            break;
        }
        case BAD_WS_SMALL: ws_small = 1; break;
        case BAD_WS_MISALIGNED: ws_mis = 1; break;
        case BAD_NULL_TOP: null_top = 1 + (int)pick(r, 3); break;
        default: break;
        }
    }
    if (kv.on && kv.bad) {
        kv_plant(r, &kv, &KS, d, a);
        if (verbose)
            fprintf(stderr, "  kv bad=%u\n", kv.bad);
    }
    if (verbose && (bad[0] >= BAD_PTR_NULL || bad[1] >= BAD_PTR_NULL || kv.bad))
        print_sdpa(d, bad, t2);
    /* after BAD_LENGTH_ may have enabled lengths: the plan desc changed */
    pe = expect_sdpa_plan(d);

    unsigned wsel = u8(r);
    const int oneshot = (wsel & 3) == 3 && !ws_small && !ws_mis;
    float *inputs_copy = xmalloc(P.pool_len * sizeof(float));
    memcpy(inputs_copy, P.pool, P.pool_len * sizeof(float));
    uint8_t *mask_copy = xmalloc(P.mpool_len);
    memcpy(mask_copy, P.mpool, P.mpool_len);

    attn_status st;
    wsp w1 = { 0 };
    expect ee = { 0, 0 };
    sdpa_clear(&P);
    if (null_top && pe.must == 0) {
        attn_sdpa_plan *plan = NULL;
        if (null_top == 1) {
            st = attn_sdpa_plan_create(&plan, NULL);
        } else {
            st = attn_sdpa_plan_create(&plan, d);
            check_status("attn_sdpa_plan_create", st, pe);
            st = null_top == 2 ? attn_sdpa_execute(NULL, a, NULL, 0) : attn_sdpa_execute(plan, NULL, NULL, 0);
            attn_sdpa_plan_destroy(plan);
        }
        if (st != ATTN_ERR_NULL_ARGUMENT)
            FAIL("NULL plan/desc/args: got %s", st_name(st));
        sdpa_untouched(&P, "NULL argument");
        goto out;
    }
    if (oneshot) {
        expect x = pe.must ? pe : expect_sdpa_exec(d, a, NULL, 0, 0);
        if (!pe.must)
            x.maybe |= pe.maybe;
        ee = x;
        st = attn_sdpa(d, a);
        check_status("attn_sdpa", st, x);
    } else {
        attn_sdpa_plan *plan = NULL;
        st = attn_sdpa_plan_create(&plan, d);
        check_status("attn_sdpa_plan_create", st, pe);
        if (st != ATTN_OK) {
            ee = pe;
        } else {
            size_t need_ws = 0;
            if (attn_sdpa_workspace_size(plan, &need_ws) != ATTN_OK)
                FAIL("attn_sdpa_workspace_size failed");
            wsp_make(&w1, wsel & 3, need_ws, ws_small, ws_mis);
            ee = expect_sdpa_exec(d, a, w1.ptr, w1.bytes, need_ws);
            if (ws_small && need_ws == 0)
                ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
            st = attn_sdpa_execute(plan, a, w1.ptr, w1.bytes);
            check_status("attn_sdpa_execute", st, ee);
            attn_sdpa_plan_destroy(plan);
        }
    }
    free(w1.raw);
    if (memcmp(inputs_copy, P.pool, P.pool_len * sizeof(float)) ||
        memcmp(mask_copy, P.mpool, P.mpool_len))
        FAIL("an input was modified");
    if (st != ATTN_OK) {
        sdpa_untouched(&P, st_name(st));
        counts[N_ERROR]++;
        if (kv.on)
            counts[N_KV_ERROR]++;
        goto out;
    }
    counts[N_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_CHECKED]++;
    if (sparse)
        counts[N_SPARSE_CHECKED]++;
    (void)ee;
    if (kv.on) {
        counts[N_KV_CHECKED]++;
        /* the reference reads F32, contiguous: the stored values widened */
        kv_refd = *d;
        kv_refd.k = *kvw; /* contiguous: the final views (a planted stride may */
        kv_refd.v = *vvw; /* have changed them, validly, before the buffers)   */
        kv_refd.k_type = kv_refd.v_type = ATTN_DTYPE_F32;
        kv_refd.kv_block_size = kv_refd.kv_num_blocks = kv_refd.kv_max_blocks = 0;
        kv_refa = *a;
        kv_refa.k = KS.w[0] ? KS.w[0] : KS.cf[0] ? KS.cf[0] : P.pool + okk;
        kv_refa.v = KS.w[1] ? KS.w[1] : KS.cf[1] ? KS.cf[1] : P.pool + ov;
        kv_refa.k16 = kv_refa.v16 = NULL;
        kv_refa.block_table = NULL;
        P.refd = &kv_refd;
        P.refa = &kv_refa;
    }
    sdpa_check_results(&P);

    /* again with another thread count and workspace: bitwise equal */
    {
        float *so = obuf_snap(&P.o), *sp = obuf_snap(&P.p), *sl = obuf_snap(&P.l);
        const int t1 = d->threads;
        const uint64_t seed1 = d->dropout_seed, off1 = d->dropout_offset;
        const char *note = drop_zero_reset(d->dropout_p, &d->dropout_seed, &d->dropout_offset);
        d->threads = t2;
        sdpa_clear(&P);
        attn_sdpa_plan *plan = NULL;
        st = attn_sdpa_plan_create(&plan, d);
        if (st != ATTN_OK)
            FAIL("plan with %d threads: %s", t2, st_name(st));
        size_t need_ws = 0;
        attn_sdpa_workspace_size(plan, &need_ws);
        wsp w2;
        wsp_make(&w2, (wsel >> 2) % 3, need_ws, 0, 0);
        st = attn_sdpa_execute(plan, a, w2.ptr, w2.bytes);
        if (st != ATTN_OK)
            FAIL("execute with %d threads: %s", t2, st_name(st));
        attn_sdpa_plan_destroy(plan);
        free(w2.raw);
        obuf_same(&P.o, so, "O", t1, t2, note);
        obuf_same(&P.p, sp, "P", t1, t2, note);
        obuf_same(&P.l, sl, "lse", t1, t2, note);
        free(so);
        free(sp);
        free(sl);
        d->threads = t1;
        d->dropout_seed = seed1;
        d->dropout_offset = off1;
    }
    if (kv.on) {
        float *so = obuf_snap(&P.o), *sp = obuf_snap(&P.p), *sl = obuf_snap(&P.l);
        if (kv.paged) {
            /* the same values stored contiguously: bitwise the same */
            kv_cd = *d;
            kv_cd.k = kv.kcv;
            kv_cd.v = kv.vcv;
            kv_cd.kv_block_size = kv_cd.kv_num_blocks = kv_cd.kv_max_blocks = 0;
            kv_ca = *a;
            kv_ca.block_table = NULL;
            kv_ca.k = KS.c16[0] ? NULL : KS.cf[0];
            kv_ca.v = KS.c16[1] ? NULL : KS.cf[1];
            kv_ca.k16 = KS.c16[0];
            kv_ca.v16 = KS.c16[1];
            st = kv_run(&P, &kv_cd, &kv_ca, 0);
            if (st != ATTN_OK)
                FAIL("the contiguous twin of a paged problem: %s", st_name(st));
            obuf_same(&P.o, so, "O", d->threads, d->threads, " (paged vs contiguous)");
            obuf_same(&P.p, sp, "P", d->threads, d->threads, " (paged vs contiguous)");
            obuf_same(&P.l, sl, "lse", d->threads, d->threads, " (paged vs contiguous)");
            counts[N_KV_PAGED_SAME]++;
        }
        if (d->q_len <= 16) {
            /* the sgemm path (ATTN_DECODE=0): the reference's bounds too */
            st = kv_run(&P, d, a, 1);
            if (st != ATTN_OK)
                FAIL("ATTN_DECODE=0: %s", st_name(st));
            sdpa_check_results(&P);
            counts[N_KV_NODECODE]++;
        }
        if (memcmp(inputs_copy, P.pool, P.pool_len * sizeof(float)))
            FAIL("an input was modified");
        /* the first run's outputs back (the backward reads O) */
        memcpy(P.o.base, so, P.o.count * sizeof(float));
        if (sp)
            memcpy(P.p.base, sp, P.p.count * sizeof(float));
        if (sl)
            memcpy(P.l.base, sl, P.l.count * sizeof(float));
        free(so);
        free(sp);
        free(sl);
    }
    if (kv_plain(d))
        fuzz_sdpa_bwd(r, &P, t2);
out:
    free(inputs_copy);
    free(mask_copy);
    free(P.pool);
    free(P.mpool);
    obuf_free(&P.o);
    obuf_free(&P.p);
    obuf_free(&P.l);
    sparse_free(&P.sb);
    kv_store_free(&KS);
}

/* --------------------------------------------------------- SDPA backward */

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

/* An output buffer for view v, or for the valid view v0 when v (planted)
 * spans nothing allocatable; the plan must refuse such a view anyway. */
static int unalloc; /* a view spanned too much: obuf_make2 took v0 */
static attn_view obuf_make2(obuf *b, rd *r, const attn_view *v, const attn_view *v0,
                            const int64_t sz[3], int64_t D)
{
    int64_t ext = view_extent(v, sz, D);
    if (ext < 0) {
        unalloc = 1;
        v = v0;
        ext = view_extent(v, sz, D);
    }
    obuf_make(b, r, v, sz, D, ext);
    return *v;
}

static void bwd_clear(obuf *o[4])
{
    for (int k = 0; k < 4; k++)
        if (o[k]->base)
            obuf_clear(o[k]);
}

/* The backward on the problem of P, whose forward (O, and the logsumexp
 * when it wanted one) has just been checked. */
static void fuzz_sdpa_bwd(rd *r, sdpa_prob *P, int t2)
{
    const attn_sdpa_desc *d = &P->d;
    unsigned ctl = u8(r);
    if ((ctl & 3) == 3)
        return;
    unsigned bad[2] = { BB_NONE, BB_NONE };
    unsigned bb = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (BB_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, BB_COUNT_ - 1);
    }
    const int64_t B = d->batch, Hq = d->q_heads, Hkv = d->kv_heads, n = d->q_len,
                  m = d->kv_len, dk = d->qk_dim, dv = d->v_dim;
    const int64_t szq[3] = { B, Hq, n }, szk[3] = { B, Hkv, m };

    /* the forward's logsumexp: its own output, or a run with want_lse */
    const float *lse = P->l.ptr;
    attn_view lv = d->lse;
    float *own_lse = NULL;
    if (!d->want_lse) {
        attn_sdpa_desc d2 = *d;
        d2.want_probs = 0;
        d2.want_lse = 1;
        d2.lse = attn_view_bhsd(Hq, n, 1);
        own_lse = xmalloc((size_t)(B * Hq * n) * sizeof(float));
        float *so = obuf_snap(&P->o);
        attn_sdpa_args a2 = P->a;
        a2.probs = NULL;
        a2.lse = own_lse;
        attn_status st = attn_sdpa(&d2, &a2);
        if (st != ATTN_OK)
            FAIL("forward with want_lse for the backward: %s", st_name(st));
        if (memcmp(so, P->o.base, P->o.count * sizeof(float)))
            FAIL("want_lse changed the bits of O");
        free(so);
        lse = own_lse;
        lv = d2.lse;
    }
    /* O rows of padded queries are never read: NaN (the gaps hold the
     * sentinel, a NaN, already) */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = d->use_q_lens ? P->q_lens[b] : n; i < n; i++)
                for (int64_t x = 0; x < dv; x++)
                    P->o.ptr[b * d->o.batch + h * d->o.head + i * d->o.seq + x] = NAN;

    /* the desc: views of dO, dQ, dK, dV and (with a bias, mostly) dBias */
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = *d;
    bd.fwd.want_probs = 0;
    bd.fwd.probs = (attn_view){ ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    bd.fwd.want_lse = 1;
    bd.fwd.lse = lv;
    bd.d_o = gen_view(r, szq, dv);
    bd.dq = gen_view(r, szq, dk);
    bd.dk = gen_view(r, szk, dk);
    bd.dv = gen_view(r, szk, dv);
    int64_t szb[3];
    dbias_shape(d, szb);
    if (d->use_bias && !(ctl & 4)) {
        bd.want_dbias = 1;
        bd.dbias = gen_view(r, szb, m);
        /* garbage in the strides attn.h says are ignored */
        static const int64_t junk[] = { ATTN_STRIDE_UNSET, -1, 0, INT64_MAX, 3, -77777 };
        unsigned jb = u8(r);
        if (!d->bias.batch) bd.dbias.batch = junk[jb % 6];
        if (!d->bias.head) bd.dbias.head = junk[(jb >> 2) % 6];
        if (!d->bias.seq) bd.dbias.seq = junk[(jb >> 4) % 6];
    }
    const attn_sdpa_bwd_desc valid = bd;

    /* plan-time invalid fields */
    for (int k = 0; k < 2; k++) {
        attn_view *views[] = { &bd.d_o, &bd.dq, &bd.dk, &bd.dv, &bd.dbias };
        unsigned wv = pick(r, 5);
        if (wv == 4 && !bd.want_dbias)
            wv = 1;
        attn_view *vw = views[wv];
        int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
        switch (bad[k]) {
        case BB_LSE_OFF: bd.fwd.want_lse = 0; break;
        case BB_PROBS_ON:
            bd.fwd.want_probs = 1;
            if (u8(r) & 1) bd.fwd.probs = attn_view_bhsd(Hq, n, m);
            break;
        case BB_DBIAS_NOBIAS:
            if (!bd.want_dbias) {
                bd.want_dbias = 1;
                bd.dbias = attn_view_bhsd(Hq, n, m);
            }
            bd.fwd.use_bias = 0;
            break;
        case BB_RESERVED: {
            const int64_t val = (int64_t)u8(r) - 128;
            bd.reserved[pick(r, 16)] = val ? val : INT64_MIN;
            break;
        }
        case BB_VIEW_UNSET: *sp = ATTN_STRIDE_UNSET; break;
        case BB_VIEW_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
        case BB_VIEW_ZERO: *sp = 0; break;
        case BB_VIEW_SHORT: vw->seq = vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0; if (vw->seq < 0) vw->seq = 0; break;
        case BB_VIEW_OVERLAP: {
            if (wv == 0)
                vw = &bd.dq; /* dO is an input: overlapping is fine there */
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
            if (P->sparse && (u8(r) & 1)) {
                plant_sparse(r, pick(r, 2) == 0, &bd.fwd.reserved_flags,
                             &bd.fwd.layout_per_head, &bd.fwd.block_size);
                break;
            }
            switch (pick(r, 4)) {
            case 0: bd.fwd.scale = (u8(r) & 1) ? INFINITY : -INFINITY; break;
            case 1: bd.fwd.threads = (u8(r) & 1) ? -1 : 1025; break;
            case 2:
                bd.fwd.reserved[pick(r, (unsigned)(sizeof bd.fwd.reserved / sizeof bd.fwd.reserved[0]))] =
                    1 + (int64_t)u8(r);
                break;
            default: bd.fwd.dropout_p = (u8(r) & 1) ? NAN : -0.5; break;
            }
            break;
        default: break;
        }
    }
    expect pe = expect_bwd_plan(&bd);

    /* buffers: dO (NaN in gaps and padded rows), sentinel-filled outputs */
    unalloc = 0;
    obuf go = { 0 }, gq = { 0 }, gk = { 0 }, gv = { 0 }, gb = { 0 };
    const attn_view gov = obuf_make2(&go, r, &bd.d_o, &valid.d_o, szq, dv);
    {
        prng g = { u32(r) ^ 0x5851f42d4c957f2dull };
        for (size_t i = 0; i < go.count; i++)
            go.base[i] = NAN;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < (d->use_q_lens ? P->q_lens[b] : n); i++)
                    for (int64_t x = 0; x < dv; x++)
                        go.ptr[b * gov.batch + h * gov.head + i * gov.seq + x] =
                            pr_val(&g, 1.0);
    }
    obuf_make2(&gq, r, &bd.dq, &valid.dq, szq, dk);
    obuf_make2(&gk, r, &bd.dk, &valid.dk, szk, dk);
    obuf_make2(&gv, r, &bd.dv, &valid.dv, szk, dv);
    attn_view dbv = dbias_eff(&bd);
    if (bd.want_dbias) {
        attn_view dbv0 = dbias_eff(&valid);
        if (!valid.want_dbias)
            dbv0 = attn_view_bhsd(Hq, n, m);
        dbv = obuf_make2(&gb, r, &dbv, &dbv0, szb, m);
    }
    obuf *outs[4] = { &gq, &gk, &gv, &gb };

    attn_sdpa_bwd_args a = { 0 };
    a.q = P->a.q;
    a.k = P->a.k;
    a.v = P->a.v;
    a.o = P->a.o;
    a.d_o = go.ptr;
    a.lse = lse;
    a.kv_lens = P->a.kv_lens;
    a.q_lens = P->a.q_lens;
    a.mask = P->a.mask;
    a.bias = P->a.bias;
    a.dq = gq.ptr;
    a.dk = gk.ptr;
    a.dv = gv.ptr;
    a.dbias = bd.want_dbias ? gb.ptr : NULL;
    a.global_k = P->a.global_k;
    a.global_q = P->a.global_q;
    a.layout = P->a.layout;

    /* execute-time invalid fields */
    int ws_small = 0, ws_mis = 0, null_top = 0;
    int32_t kvl[8], ql[8];
    memcpy(kvl, P->kv_lens, sizeof kvl);
    memcpy(ql, P->q_lens, sizeof ql);
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[8];
    static float junk_f[8];
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case BB_PTR_NULL: {
            if (P->sparse && (u8(r) & 1)) {
                const void **sp3[] = { (const void **)&a.global_k, (const void **)&a.global_q,
                                       (const void **)&a.layout };
                *sp3[pick(r, 3)] = NULL;
                break;
            }
            const void **p[] = { (const void **)&a.q, (const void **)&a.k, (const void **)&a.v,
                                 (const void **)&a.o, (const void **)&a.d_o, (const void **)&a.lse,
                                 (const void **)&a.kv_lens, (const void **)&a.q_lens,
                                 (const void **)&a.mask, (const void **)&a.bias,
                                 (const void **)&a.dq, (const void **)&a.dk,
                                 (const void **)&a.dv, (const void **)&a.dbias };
            *p[pick(r, 14)] = NULL;
            break;
        }
        case BB_PTR_EXTRA:
            if (P->sparse && (u8(r) & 1)) {
                switch (pick(r, 3)) {
                case 0: if (!bd.fwd.use_global_k) a.global_k = junk_u8; break;
                case 1: if (!bd.fwd.use_global_q) a.global_q = junk_u8; break;
                default: if (!bd.fwd.block_size) a.layout = junk_u8; break;
                }
                break;
            }
            switch (pick(r, 5)) {
            case 0: if (!bd.fwd.use_kv_lens) a.kv_lens = zero_lens; break;
            case 1: if (!bd.fwd.use_q_lens) a.q_lens = zero_lens; break;
            case 2: if (!bd.fwd.mask_mode) a.mask = junk_u8; break;
            case 3: if (!bd.fwd.use_bias) a.bias = junk_f; break;
            default: if (!bd.want_dbias) a.dbias = junk_f; break;
            }
            break;
        case BB_LENGTH: {
            unsigned b = pick(r, (unsigned)B);
            if (u8(r) & 1) { kvl[b] = bad_length(r, m); bd.fwd.use_kv_lens = 1; a.kv_lens = kvl; }
            else { ql[b] = bad_length(r, n); bd.fwd.use_q_lens = 1; a.q_lens = ql; }
            break;
        }
        case BB_WS_SMALL: ws_small = 1; break;
        case BB_WS_MISALIGNED: ws_mis = 1; break;
        case BB_NULL_TOP: null_top = 1 + (int)pick(r, 6); break;
        default: break;
        }
    }
    if (verbose)
        fprintf(stderr, "  bwd: dO{%lld,%lld,%lld} dQ{%lld,%lld,%lld} dK{%lld,%lld,%lld} "
                "dV{%lld,%lld,%lld} dbias=%d{%lld,%lld,%lld} lse{%lld,%lld,%lld} bad=%u,%u "
                "threads=%d/%d\n",
                (long long)bd.d_o.batch, (long long)bd.d_o.head, (long long)bd.d_o.seq,
                (long long)bd.dq.batch, (long long)bd.dq.head, (long long)bd.dq.seq,
                (long long)bd.dk.batch, (long long)bd.dk.head, (long long)bd.dk.seq,
                (long long)bd.dv.batch, (long long)bd.dv.head, (long long)bd.dv.seq,
                bd.want_dbias, (long long)bd.dbias.batch, (long long)bd.dbias.head,
                (long long)bd.dbias.seq, (long long)lv.batch, (long long)lv.head,
                (long long)lv.seq, bad[0], bad[1], bd.fwd.threads, t2);
    pe = expect_bwd_plan(&bd); /* BB_LENGTH may have enabled lengths */

    /* inputs, to see that none changes */
    float *pool_copy = xmalloc(P->pool_len * sizeof(float));
    memcpy(pool_copy, P->pool, P->pool_len * sizeof(float));
    float *o_copy = obuf_snap(&P->o), *do_copy = obuf_snap(&go);
    const size_t l_bytes = own_lse ? (size_t)(B * Hq * n) * sizeof(float) : P->l.count * sizeof(float);
    const void *l_base = own_lse ? (const void *)own_lse : (const void *)P->l.base;
    float *l_copy = xmalloc(l_bytes);
    memcpy(l_copy, l_base, l_bytes);

    unsigned wsel = u8(r);
    const int oneshot = (wsel & 3) == 3 && !ws_small && !ws_mis;
    attn_status st;
    bwd_clear(outs);
    if (unalloc && pe.must == 0) {
        /* a planted view that may be valid but spans more than we
         * allocate: plan only */
        attn_sdpa_bwd_plan *plan = NULL;
        st = attn_sdpa_bwd_plan_create(&plan, &bd);
        check_status("attn_sdpa_bwd_plan_create", st, pe);
        attn_sdpa_bwd_plan_destroy(plan);
        goto done;
    }
    if (null_top && pe.must == 0) {
        attn_sdpa_bwd_plan *plan = NULL;
        size_t bytes = 0;
        st = ATTN_OK;
        switch (null_top) {
        case 1: st = attn_sdpa_bwd_plan_create(&plan, NULL); break;
        case 2: st = attn_sdpa_bwd_plan_create(NULL, &bd); break;
        case 3: st = attn_sdpa_backward(NULL, &a); break;
        case 4: st = attn_sdpa_backward(&bd, NULL); break;
        default:
            st = attn_sdpa_bwd_plan_create(&plan, &bd);
            check_status("attn_sdpa_bwd_plan_create", st, pe);
            st = null_top == 5 ? attn_sdpa_bwd_execute(NULL, &a, NULL, 0)
               : (u8(r) & 1)   ? attn_sdpa_bwd_execute(plan, NULL, NULL, 0)
                               : attn_sdpa_bwd_workspace_size(plan, NULL);
            attn_sdpa_bwd_plan_destroy(plan);
            plan = NULL;
            break;
        }
        if (plan)
            FAIL("backward plan set on error");
        if (st != ATTN_ERR_NULL_ARGUMENT)
            FAIL("backward: NULL plan/desc/args: got %s", st_name(st));
        (void)bytes;
        for (int k = 0; k < 4; k++)
            if (outs[k]->base)
                obuf_untouched(outs[k], k == 0 ? "dQ" : k == 1 ? "dK" : k == 2 ? "dV" : "dBias",
                               "NULL argument");
        goto done;
    }
    wsp w1 = { 0 };
    if (oneshot) {
        expect x = pe.must ? pe : expect_bwd_exec(&bd, &a, NULL, 0, 0);
        if (!pe.must)
            x.maybe |= pe.maybe;
        st = attn_sdpa_backward(&bd, &a);
        check_status("attn_sdpa_backward", st, x);
    } else {
        attn_sdpa_bwd_plan *plan = NULL;
        st = attn_sdpa_bwd_plan_create(&plan, &bd);
        check_status("attn_sdpa_bwd_plan_create", st, pe);
        if (st != ATTN_OK) {
            if (plan)
                FAIL("backward plan set on error");
        } else {
            size_t need_ws = 0;
            if (attn_sdpa_bwd_workspace_size(plan, &need_ws) != ATTN_OK)
                FAIL("attn_sdpa_bwd_workspace_size failed");
            wsp_make(&w1, wsel & 3, need_ws, ws_small, ws_mis);
            expect ee = expect_bwd_exec(&bd, &a, w1.ptr, w1.bytes, need_ws);
            if (ws_small && need_ws == 0)
                ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
            st = attn_sdpa_bwd_execute(plan, &a, w1.ptr, w1.bytes);
            check_status("attn_sdpa_bwd_execute", st, ee);
            attn_sdpa_bwd_plan_destroy(plan);
        }
    }
    free(w1.raw);
    if (memcmp(pool_copy, P->pool, P->pool_len * sizeof(float)) ||
        memcmp(o_copy, P->o.base, P->o.count * sizeof(float)) ||
        memcmp(do_copy, go.base, go.count * sizeof(float)) || memcmp(l_copy, l_base, l_bytes))
        FAIL("backward: an input was modified");
    if (st != ATTN_OK) {
        for (int k = 0; k < 4; k++)
            if (outs[k]->base)
                obuf_untouched(outs[k], k == 0 ? "dQ" : k == 1 ? "dK" : k == 2 ? "dV" : "dBias",
                               st_name(st));
        counts[N_BWD_ERROR]++;
        goto done;
    }
    counts[N_BWD_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_BWD_CHECKED]++;
    if (P->sparse)
        counts[N_SPARSE_BWD_CHECKED]++;
    {
        /* against the float64 reference (with dropout, that of the keep
         * mask of attn_dropout_mask_fill held fixed); sentinels outside */
        const bwd_buf bq = bwd_buf_of(&gq, &bd.dq, szq, dk), bk = bwd_buf_of(&gk, &bd.dk, szk, dk),
                      bv = bwd_buf_of(&gv, &bd.dv, szk, dv), bdb = bwd_buf_of(&gb, &dbv, szb, m);
        bwd_err err = { 0, 0, 0, 0, 0 };
        bwd_check(d, &P->a, go.ptr, bd.d_o, &bq, &bk, &bv, bd.want_dbias ? &bdb : NULL, SENT,
                  bwd_report, NULL, &err);
        for (int k = 0; k < 4; k++)
            if (outs[k]->base)
                obuf_outside(outs[k], k == 0 ? "dQ" : k == 1 ? "dK" : k == 2 ? "dV" : "dBias");
    }
    /* again with another thread count and workspace: bitwise equal */
    {
        float *snap[4];
        for (int k = 0; k < 4; k++)
            snap[k] = obuf_snap(outs[k]);
        const int t1 = bd.fwd.threads;
        const char *note =
            drop_zero_reset(bd.fwd.dropout_p, &bd.fwd.dropout_seed, &bd.fwd.dropout_offset);
        bd.fwd.threads = t2;
        bwd_clear(outs);
        attn_sdpa_bwd_plan *plan = NULL;
        st = attn_sdpa_bwd_plan_create(&plan, &bd);
        if (st != ATTN_OK)
            FAIL("backward plan with %d threads: %s", t2, st_name(st));
        size_t need_ws = 0;
        attn_sdpa_bwd_workspace_size(plan, &need_ws);
        wsp w2;
        wsp_make(&w2, (wsel >> 2) % 3, need_ws, 0, 0);
        st = attn_sdpa_bwd_execute(plan, &a, w2.ptr, w2.bytes);
        if (st != ATTN_OK)
            FAIL("backward execute with %d threads: %s", t2, st_name(st));
        attn_sdpa_bwd_plan_destroy(plan);
        free(w2.raw);
        for (int k = 0; k < 4; k++) {
            obuf_same(outs[k], snap[k], k == 0 ? "dQ" : k == 1 ? "dK" : k == 2 ? "dV" : "dBias",
                      t1, t2, note);
            free(snap[k]);
        }
    }
done:
    free(pool_copy);
    free(o_copy);
    free(do_copy);
    free(l_copy);
    free(own_lse);
    obuf_free(&go);
    obuf_free(&gq);
    obuf_free(&gk);
    obuf_free(&gv);
    obuf_free(&gb);
}

/* ------------------------------------------------------------------- MHA */

static expect expect_mha_plan(const attn_mha_desc *d)
{
    expect e = { 0, 0 };
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
static expect expect_mha_call(const attn_mha_desc *d, const attn_mha_weights *w,
                              const attn_mha_args *a, int outputs, const void *ws,
                              size_t ws_bytes, size_t need)
{
    expect e = { 0, 0 };
    const int pk = d->packed_in_proj, hb = d->has_bias;
    const ptr_use f[] = {
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
    expect_call(&e, f, sizeof f / sizeof f[0], d->batch, d->use_kv_lens ? a->kv_lens : NULL,
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
static void expect_context(expect *e, const void *cx, size_t bytes, size_t need)
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
    fprintf(stderr, " kpm=%d weights=%d engine=%d threads=%d/%d bad=%u,%u%s\n",
            (int)d->key_padding_mode, (int)d->weights, (int)d->engine, d->threads, t2, bad[0],
            bad[1], train ? " train" : "");
}

/* ------------------------------------------------------- MHA training */

/* A valid MHA problem whose attn_mha_train_execute (plan of d, d->threads)
 * has just been checked: out (and weights) hold its result, the context
 * its saved state. */
typedef struct mha_prob {
    const attn_mha_desc *d;
    const attn_mha_weights *w;
    const attn_mha_args *a;
    const float *pool;       /* every float input, to see that none changes */
    size_t pool_len;
    const uint8_t *mpool;
    size_t mlen;
    obuf *ob, *ow;           /* out and weights */
    const void *cx;          /* the context train_forward filled */
    size_t cx_bytes, cx_need;
    int t2;                  /* the other thread count */
    int sparse;              /* SEL_SPARSE */
} mha_prob;

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
static void grads_clear(obuf gb[MG_COUNT])
{
    for (int k = 0; k < MG_COUNT; k++)
        if (gb[k].base)
            obuf_clear(&gb[k]);
}

/*
 * attn_mha_bwd_execute after the train_forward of M (plan: its plan): dY
 * (NaN in the row gaps), the gradients in sentinel-filled buffers (dX,
 * dXk, dXv with the inputs' row strides, the weight gradients dense, the
 * packed ones in one [3E][E] and one [3E] buffer), one or two planted
 * invalid fields (MB_*) and args->out / args->weights NULL or junk (attn.h:
 * ignored).  An error: its status (expect_mha_call, expect_context), every
 * gradient buffer untouched.  Success: every gradient within the float64
 * reference's bound (mref_mha_backward, the keep mask of dropout held
 * fixed), the sentinel in the row gaps and around; then a plan with the
 * other thread count, its train_forward (out bitwise the same) and a
 * backward with accumulate 0 (bitwise the same gradients) or 1 onto decoded
 * values (each element exactly old + g in fp32).  Inputs, dY and the
 * context never change.
 */
static void fuzz_mha_train(rd *r, const mha_prob *M, const attn_mha_plan *plan)
{
    const attn_mha_desc *d = M->d;
    const int64_t E = d->embed_dim, B = d->batch, L = d->q_len;
    const int64_t os = d->out_stride ? d->out_stride : E;
    unsigned bad[2] = { MB_NONE, MB_NONE };
    const unsigned bb = u8(r), ctl = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (MB_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, MB_COUNT_ - 1);
    }

    /* dY: rows of E at out_stride, NaN between them */
    const size_t ndy = (size_t)((B * L - 1) * os + E);
    float *dy = xmalloc(ndy * sizeof(float));
    {
        prng g = { u32(r) ^ 0x2545f4914f6cdd1dull };
        for (size_t i = 0; i < ndy; i++)
            dy[i] = NAN;
        for (int64_t t = 0; t < B * L; t++)
            for (int64_t e = 0; e < E; e++)
                dy[t * os + e] = pr_val(&g, 1.0);
    }

    /* the gradient buffers */
    obuf gb[MG_COUNT];
    memset(gb, 0, sizeof gb);
    float *gview[MG_COUNT] = { 0 };
    int64_t grows[MG_COUNT], gwid[MG_COUNT], gld[MG_COUNT];
    const int packed = d->packed_in_proj;
    for (int k = 0; k < MG_COUNT; k++) {
        mref_grad_shape(d, k, &grows[k], &gwid[k]);
        gld[k] = k == MG_DX ? (d->x_stride ? d->x_stride : E)
               : k == MG_DKEY ? (d->key_stride ? d->key_stride : gwid[k])
               : k == MG_DVALUE ? (d->value_stride ? d->value_stride : gwid[k]) : gwid[k];
        if (!grows[k])
            continue;
        if (packed && (k == MG_DWK || k == MG_DWV || k == MG_DBK || k == MG_DBV)) {
            const int base = k == MG_DWK || k == MG_DWV ? MG_DWQ : MG_DBQ;
            const int64_t part = k == MG_DWK || k == MG_DBK ? 1 : 2;
            gview[k] = gview[base] + part * grows[base] * gwid[base];
            continue;
        }
        const int64_t rows = grows[k] * (packed && (k == MG_DWQ || k == MG_DBQ) ? 3 : 1);
        const int64_t sz[3] = { 1, 1, rows };
        const attn_view v = { 0, 0, gld[k] };
        obuf_make(&gb[k], r, &v, sz, gwid[k], (rows - 1) * gld[k] + gwid[k]);
        gview[k] = gb[k].ptr;
    }
    grads_clear(gb);
    attn_mha_grads g0;
    memset(&g0, 0, sizeof g0);
    g0.dx = gview[MG_DX];
    g0.dkey = gview[MG_DKEY];
    g0.dvalue = gview[MG_DVALUE];
    if (packed) {
        g0.d_in_proj_weight = gview[MG_DWQ];
        g0.d_in_proj_bias = gview[MG_DBQ];
    } else {
        g0.d_q_weight = gview[MG_DWQ];
        g0.d_k_weight = gview[MG_DWK];
        g0.d_v_weight = gview[MG_DWV];
        g0.d_q_bias = gview[MG_DBQ];
        g0.d_k_bias = gview[MG_DBK];
        g0.d_v_bias = gview[MG_DBV];
    }
    g0.d_out_weight = gview[MG_DWO];
    g0.d_out_bias = gview[MG_DBO];

    /* the call's arguments, and the planted invalid fields */
    attn_mha_weights w = *M->w;
    attn_mha_args a = *M->a;
    attn_mha_grads g = g0;
    static float junk_f[64];
    static const uint8_t junk_u8[64];
    static const int32_t zero_lens[8];
    switch (ctl & 3) { /* ignored by the backward */
    case 1: a.out = NULL; break;
    case 2: a.weights = junk_f; break;
    case 3: a.out = NULL; a.weights = NULL; break;
    default: break;
    }
    int32_t kvl[8], ql[8];
    if (a.kv_lens)
        memcpy(kvl, a.kv_lens, (size_t)B * sizeof *kvl);
    if (a.q_lens)
        memcpy(ql, a.q_lens, (size_t)B * sizeof *ql);
    const void *cxp = M->cx;
    size_t cxb = M->cx_bytes;
    unsigned char *cx_mis = NULL;
    int ws_small = 0, ws_mis = 0, null_top = 0, acc = 0;
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case MB_NULL_TOP: null_top = 1 + (int)pick(r, 5); break;
        case MB_CX_NULL: cxp = NULL; break;
        case MB_CX_SHORT:
            cxb = M->cx_need - 1 - (M->cx_need > 64 ? pick(r, 64) : 0);
            break;
        case MB_CX_MISALIGNED:
            if (!cx_mis) {
                const size_t off = 4 * (1 + pick(r, 15));
                cx_mis = aligned_alloc(64, (M->cx_need + off + 63) / 64 * 64);
                if (!cx_mis)
                    abort();
                memcpy(cx_mis + off, M->cx, M->cx_need);
                cxp = cx_mis + off;
                cxb = M->cx_need;
            }
            break;
        case MB_WS_SMALL: ws_small = 1; break;
        case MB_WS_MISALIGNED: ws_mis = 1; break;
        case MB_ACCUMULATE: {
            static const int av[] = { 2, -1, INT_MAX, INT_MIN };
            acc = av[pick(r, 4)];
            break;
        }
        case MB_GRAD_NULL:
        case MB_GRAD_EXTRA: {
            float **slot[MHA_NGRAD];
            int used[MHA_NGRAD];
            grad_slots(&g, slot);
            grad_used(d, used);
            const unsigned x = pick(r, MHA_NGRAD);
            if (bad[k] == MB_GRAD_NULL && used[x])
                *slot[x] = NULL;
            else if (bad[k] == MB_GRAD_EXTRA && !used[x])
                *slot[x] = junk_f;
            break;
        }
        case MB_PTR_NULL: {
            if (M->sparse && (u8(r) & 1)) {
                const void **sp3[] = { (const void **)&a.global_k, (const void **)&a.global_q,
                                       (const void **)&a.layout };
                *sp3[pick(r, 3)] = NULL;
                break;
            }
            const void **p[] = { (const void **)&w.in_proj_weight, (const void **)&w.in_proj_bias,
                                 (const void **)&w.q_weight, (const void **)&w.k_weight,
                                 (const void **)&w.v_weight, (const void **)&w.q_bias,
                                 (const void **)&w.k_bias, (const void **)&w.v_bias,
                                 (const void **)&w.out_weight, (const void **)&w.out_bias,
                                 (const void **)&a.x, (const void **)&a.key, (const void **)&a.value,
                                 (const void **)&a.kv_lens, (const void **)&a.q_lens,
                                 (const void **)&a.mask, (const void **)&a.bias,
                                 (const void **)&a.key_padding_mask };
            *p[pick(r, 18)] = NULL;
            break;
        }
        case MB_PTR_EXTRA:
            if (M->sparse && (u8(r) & 1)) {
                switch (pick(r, 3)) {
                case 0: if (!d->use_global_k) a.global_k = junk_u8; break;
                case 1: if (!d->use_global_q) a.global_q = junk_u8; break;
                default: if (!d->block_size) a.layout = junk_u8; break;
                }
                break;
            }
            switch (pick(r, 8)) {
            case 0: if (!d->use_kv_lens) a.kv_lens = zero_lens; break;
            case 1: if (d->self_attention) a.value = junk_f; break;
            case 2: if (!d->mask_mode) a.mask = junk_u8; break;
            case 3: if (!d->key_padding_mode) a.key_padding_mask = junk_u8; break;
            case 4: if (!d->use_q_lens) a.q_lens = zero_lens; break;
            case 5: if (!packed) w.in_proj_weight = junk_f; break;
            case 6: if (packed || !d->has_bias) w.k_bias = junk_f; break;
            default: if (!d->use_bias) a.bias = junk_f; break;
            }
            break;
        case MB_LENGTH: {
            /* only lengths the plan uses (the forward's must not change) */
            const unsigned b = pick(r, (unsigned)B);
            if ((u8(r) & 1) && d->use_kv_lens) {
                kvl[b] = bad_length(r, d->kv_len);
                a.kv_lens = kvl;
            } else if (d->use_q_lens) {
                ql[b] = bad_length(r, L);
                a.q_lens = ql;
            }
            break;
        }
        default: break;
        }
    }
    const unsigned wsel = u8(r);
    size_t need_bws = 0;
    if (attn_mha_bwd_workspace_size(plan, &need_bws) != ATTN_OK)
        FAIL("attn_mha_bwd_workspace_size failed on a small plan");
    wsp ws;
    wsp_make(&ws, wsel & 3, need_bws, ws_small, ws_mis);
    expect e = expect_mha_call(d, &w, &a, 0, ws.ptr, ws.bytes, need_bws);
    if (ws_small && need_bws == 0)
        e.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
    expect_context(&e, cxp, cxb, M->cx_need);
    if (acc != 0 && acc != 1)
        e.must |= BIT(ATTN_ERR_BAD_OPTION);
    {
        float **slot[MHA_NGRAD];
        int used[MHA_NGRAD];
        ptr_use u[MHA_NGRAD];
        grad_slots(&g, slot);
        grad_used(d, used);
        for (int x = 0; x < MHA_NGRAD; x++)
            u[x] = (ptr_use){ used[x], *slot[x] };
        expect_call(&e, u, MHA_NGRAD, 0, NULL, 0, NULL, 0, NULL, 0, 0);
    }
    if (null_top) /* the rest may be checked first or not at all */
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    if (verbose)
        fprintf(stderr, "  mha bwd: bad=%u,%u null_top=%d acc=%d ctl=%u ws=%u\n", bad[0], bad[1],
                null_top, acc, ctl, wsel);

    float *pool_copy = xmalloc(M->pool_len * sizeof(float));
    memcpy(pool_copy, M->pool, M->pool_len * sizeof(float));
    uint8_t *m_copy = xmalloc(M->mlen);
    memcpy(m_copy, M->mpool, M->mlen);
    float *dy_copy = xmalloc(ndy * sizeof(float));
    memcpy(dy_copy, dy, ndy * sizeof(float));
    unsigned char *cx_copy = xmalloc(M->cx_bytes);
    memcpy(cx_copy, M->cx, M->cx_bytes);

    attn_status st = attn_mha_bwd_execute(null_top == 1 ? NULL : plan, null_top == 2 ? NULL : &w,
                                       null_top == 3 ? NULL : &a, null_top == 4 ? NULL : dy, cxp,
                                       cxb, null_top == 5 ? NULL : &g, acc, ws.ptr, ws.bytes);
    check_status("attn_mha_bwd_execute", st, e);
    free(ws.raw);
    for (int x = 0; x < 64; x++) /* args->weights (ignored), unused pointers */
        if (fbits(junk_f[x]) != 0)
            FAIL("attn_mha_bwd_execute wrote through a pointer it must ignore or refuse");
    if (memcmp(pool_copy, M->pool, M->pool_len * sizeof(float)) ||
        memcmp(m_copy, M->mpool, M->mlen) || memcmp(dy_copy, dy, ndy * sizeof(float)) ||
        memcmp(cx_copy, M->cx, M->cx_bytes))
        FAIL("attn_mha_bwd_execute: an input, dY or the context was modified");
    if (st != ATTN_OK) {
        counts[N_MBWD_ERROR]++;
        for (int k = 0; k < MG_COUNT; k++)
            if (gb[k].base)
                obuf_untouched(&gb[k], mref_grad_name[k], st_name(st));
        goto done;
    }
    counts[N_MBWD_CHECKED]++;
    if (M->sparse)
        counts[N_SPARSE_MBWD_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_MBWD_CHECKED]++;

    /* against the float64 reference */
    {
        mref_grads rg;
        memset(&rg, 0, sizeof rg);
        for (int k = 0; k < MG_COUNT; k++) {
            if (!grows[k])
                continue;
            rg.g[k] = xmalloc((size_t)(grows[k] * gwid[k]) * sizeof(double));
            rg.tol[k] = xmalloc((size_t)(grows[k] * gwid[k]) * sizeof(double));
        }
        if (mref_mha_backward(d, M->w, M->a, dy, &rg))
            abort();
        for (int k = 0; k < MG_COUNT; k++) {
            for (int64_t i = 0; i < grows[k]; i++)
                for (int64_t x = 0; x < gwid[k]; x++) {
                    const double v = gview[k][i * gld[k] + x], ref = rg.g[k][i * gwid[k] + x],
                                 tol = rg.tol[k][i * gwid[k] + x];
                    if (!(fabs(v - ref) <= tol))
                        FAIL("MHA backward %s[%lld][%lld] = %.9g, reference %.9g, tol %.3g",
                             mref_grad_name[k], (long long)i, (long long)x, v, ref, tol);
                }
            free(rg.g[k]);
            free(rg.tol[k]);
        }
        for (int k = 0; k < MG_COUNT; k++)
            if (gb[k].base)
                obuf_outside(&gb[k], mref_grad_name[k]);
    }

    /* another thread count: train_forward (out bitwise the same), then the
     * backward overwriting (bitwise the same) or accumulating onto decoded
     * values (exactly old + g in fp32) */
    {
        float *g1[MG_COUNT], *old[MG_COUNT];
        for (int k = 0; k < MG_COUNT; k++)
            g1[k] = obuf_snap(&gb[k]);
        attn_mha_desc d2 = *d;
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
        wsp_make(&fws, (wsel >> 2) % 3, need_fws, 0, 0);
        wsp_make(&bws, (wsel >> 4) % 3, need2, 0, 0);
        float *so = obuf_snap(M->ob), *sw = obuf_snap(M->ow);
        obuf_clear(M->ob);
        if (M->ow->base)
            obuf_clear(M->ow);
        if ((st = attn_mha_train_execute(plan2, M->w, M->a, cx2.ptr, cx2.bytes, fws.ptr,
                                         fws.bytes)) != ATTN_OK)
            FAIL("attn_mha_train_execute with %d threads: %s", M->t2, st_name(st));
        obuf_same(M->ob, so, "out", d->threads, M->t2, note);
        if (M->ow->base)
            obuf_same(M->ow, sw, "weights", d->threads, M->t2, note);
        free(so);
        free(sw);
        const int accumulate = (ctl >> 2) & 1;
        grads_clear(gb);
        if (accumulate) {
            prng gv = { u32(r) ^ 0x9fb21c651e98df25ull };
            for (int k = 0; k < MG_COUNT; k++)
                for (size_t i = 0; i < gb[k].count; i++)
                    if (gb[k].inview[i])
                        gb[k].base[i] = pr_val(&gv, 2.0);
        }
        for (int k = 0; k < MG_COUNT; k++)
            old[k] = obuf_snap(&gb[k]);
        if ((st = attn_mha_bwd_execute(plan2, M->w, M->a, dy, cx2.ptr, cx2.bytes, &g0, accumulate,
                                    bws.ptr, bws.bytes)) != ATTN_OK)
            FAIL("attn_mha_bwd_execute with %d threads: %s", M->t2, st_name(st));
        for (int k = 0; k < MG_COUNT; k++) {
            if (!gb[k].base)
                continue;
            if (!accumulate) {
                obuf_same(&gb[k], g1[k], mref_grad_name[k], d->threads, M->t2, note);
                continue;
            }
            for (size_t i = 0; i < gb[k].count; i++) {
                const float want = gb[k].inview[i] ? old[k][i] + g1[k][i] : old[k][i];
                if (fbits(want) != fbits(gb[k].base[i]))
                    FAIL("MHA backward, accumulate = 1 with %d threads (overwrite with %d)%s: "
                         "%s element %zu = %.9g (0x%08x), want %.9g + %.9g = %.9g",
                         M->t2, d->threads, note, mref_grad_name[k], i, (double)gb[k].base[i],
                         fbits(gb[k].base[i]), (double)old[k][i], (double)g1[k][i],
                         (double)want);
            }
        }
        for (int k = 0; k < MG_COUNT; k++) {
            free(g1[k]);
            free(old[k]);
        }
        free(cx2.raw);
        free(fws.raw);
        free(bws.raw);
        attn_mha_plan_destroy(plan2);
    }
done:
    free(pool_copy);
    free(m_copy);
    free(dy_copy);
    free(cx_copy);
    free(cx_mis);
    free(dy);
    for (int k = 0; k < MG_COUNT; k++)
        obuf_free(&gb[k]);
}

static void fuzz_mha(rd *r, unsigned sel)
{
    const int train = !!(sel & SEL_TRAIN);
    attn_mha_desc dd, *d = &dd;
    attn_mha_desc_init(d);
    unsigned bad[2] = { BAD_NONE, BAD_NONE };
    unsigned bb = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (BAD_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, BAD_COUNT_ - 1);
    }
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
    const int sparse = !!(sel & SEL_SPARSE);
    sparse_cfg sc = { 0, 0, 0, 0, 0 };
    if (sparse) {
        decode_sparse(r, &sc);
        if ((sc.fill & 0x300) == 0x300) { /* several blocks of 16 */
            B = 1;
            L = 1 + pick(r, 24);
            S = d->self_attention ? L : 1 + pick(r, 34);
        }
    }
    d->use_global_k = sc.gk;
    d->use_global_q = sc.gq;
    d->layout_per_head = sc.lph;
    d->block_size = sc.bs;
    d->batch = B;
    d->q_len = L;
    d->kv_len = S;
    unsigned sg = u8(r);
    d->x_stride = (sg & 3) == 0 ? 0 : E + (sg & 3) - 1;
    d->key_stride = (sg >> 2 & 3) == 0 ? 0 : kdim + (sg >> 2 & 3) - 1;
    d->value_stride = (sg >> 4 & 3) == 0 ? 0 : vdim + (sg >> 4 & 3) - 1;
    d->out_stride = (sg >> 6 & 3) == 0 ? 0 : E + (sg >> 6 & 3) - 1;
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
    const int t2 = threads_other(d->threads, tsel >> 3);
    if (sel & SEL_DROPOUT)
        decode_dropout(r, &d->dropout_p, &d->dropout_seed, &d->dropout_offset);
    int32_t kv_lens[8], q_lens[8];
    for (int64_t b = 0; b < B; b++) {
        kv_lens[b] = (int32_t)pick(r, (unsigned)S + 1);
        q_lens[b] = (int32_t)pick(r, (unsigned)L + 1);
    }
    const int64_t szm[3] = { B, H, L };
    if (d->mask_mode) {
        d->mask = gen_view(r, szm, S);
        unsigned bc = u8(r);
        if (bc & 1) d->mask.batch = 0;
        if (bc & 2) d->mask.head = 0;
        if (bc & 4) d->mask.seq = 0;
    }
    if (d->use_bias) {
        d->bias = gen_view(r, szm, S);
        unsigned bc = u8(r);
        if (bc & 1) d->bias.batch = 0;
        if (bc & 2) d->bias.head = 0;
        if (bc & 4) d->bias.seq = 0;
    }

    /* plan-time invalid fields */
    int huge = 0;
    for (int k = 0; k < 2; k++) {
        int64_t *strides[] = { &d->x_stride, &d->key_stride, &d->value_stride, &d->out_stride };
        switch (bad[k]) {
        case BAD_RESERVED:
            if (sparse && (u8(r) & 1)) {
                plant_sparse(r, 1, &d->reserved_flags, &d->layout_per_head, &d->block_size);
                break;
            }
            d->reserved[pick(r, (unsigned)(sizeof d->reserved / sizeof d->reserved[0]))] =
                -1 - (int64_t)u8(r);
            break;
        case BAD_ENUM:
            if (sparse && (u8(r) & 1)) {
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
            huge = 1;
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
    expect pe = expect_mha_plan(d);
    if (huge)
        pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_mha(d, bad, t2, train);

    const int small = pe.must == 0 && !huge && d->embed_dim == E && d->batch == B &&
                      d->num_heads == H && (d->num_kv_heads ? d->num_kv_heads : H) == Hkv &&
                      d->q_len == L && d->kv_len == S && (d->kdim ? d->kdim : E) == kdim &&
                      (d->vdim ? d->vdim : E) == vdim;
    if (!small) {
        attn_mha_plan *plan = NULL;
        attn_status st = attn_mha_plan_create(&plan, d);
        check_status("attn_mha_plan_create", st, pe);
        counts[N_MHA_PLAN_ONLY]++;
        if (st == ATTN_OK) {
            size_t ws = 0;
            if (attn_mha_workspace_size(plan, &ws) != ATTN_OK)
                FAIL("attn_mha_workspace_size failed");
            if (train) {
                /* TOO_LARGE: "a plan whose forward fits but whose context
                 * or backward workspace is not representable" (both) */
                size_t cxb = 0, bwb = 0;
                const attn_status s1 = attn_mha_context_size(plan, &cxb);
                const attn_status s2 = attn_mha_bwd_workspace_size(plan, &bwb);
                if ((s1 != ATTN_OK && !(huge && s1 == ATTN_ERR_TOO_LARGE)) || s2 != s1)
                    FAIL("attn_mha_context_size %s, attn_mha_bwd_workspace_size %s",
                         st_name(s1), st_name(s2));
            }
        } else if (plan) {
            FAIL("plan set on error");
        }
        attn_mha_plan_destroy(plan);
        return;
    }

    /* inputs in one pool, regions may overlap */
    const int64_t kvE = Hkv * dh;
    const int64_t xs = d->x_stride ? d->x_stride : E, ks = d->key_stride ? d->key_stride : kdim,
                  vs = d->value_stride ? d->value_stride : vdim, os = d->out_stride ? d->out_stride : E;
    size_t len = 0;
    struct reg { size_t off; int64_t rows, width, stride; } rg[12];
    int nr = 0;
#define REG(ROWS, W, ST, OVL) (rg[nr] = (struct reg){ place(r, &len, (size_t)(((ROWS) - 1) * (ST) + (W)), OVL), ROWS, W, ST }, nr++)
    const int ix = REG(B * L, E, xs, 1);
    int ik = -1, iv = -1;
    if (!d->self_attention) {
        ik = REG(B * S, kdim, ks, 1);
        iv = REG(B * S, vdim, vs, 1);
    }
    int iw0, iw1 = -1, iw2 = -1, ib0 = -1, ib1 = -1, ib2 = -1, ibo = -1;
    if (d->packed_in_proj) {
        iw0 = REG(3 * E, E, E, 1);
        if (d->has_bias)
            ib0 = REG(1, 3 * E, 3 * E, 1);
    } else {
        iw0 = REG(E, E, E, 1);
        iw1 = REG(kvE, kdim, kdim, 1);
        iw2 = REG(kvE, vdim, vdim, 1);
        if (d->has_bias) {
            ib0 = REG(1, E, E, 1);
            ib1 = REG(1, kvE, kvE, 1);
            ib2 = REG(1, kvE, kvE, 1);
        }
    }
    const int iwo = REG(E, E, E, 1);
    if (d->has_bias)
        ibo = REG(1, E, E, 1);
    size_t bias_off = 0;
    int64_t ebias = d->use_bias ? view_extent(&d->bias, szm, S) : 0;
    if (d->use_bias)
        bias_off = place(r, &len, (size_t)ebias, 1);
#undef REG
    const size_t pool_len = len; /* no tail, as for SDPA */
    float *pool = xmalloc(pool_len * sizeof(float));
    uint8_t *need = calloc(pool_len + 1, 1);
    if (!need)
        abort();
    for (int i = 0; i < nr; i++)
        for (int64_t row = 0; row < rg[i].rows; row++)
            for (int64_t x = 0; x < rg[i].width; x++)
                need[rg[i].off + (size_t)(row * rg[i].stride + x)] |= 1;
    int64_t emask = d->mask_mode ? view_extent(&d->mask, szm, S) : 0;
    const size_t mlen = (size_t)emask;
    uint8_t *mpool = xmalloc(mlen), *mneed = calloc(mlen + 1, 1);
    if (!mneed)
        abort();
    /* the flags and the layout (a valid plan: as decoded) */
    sparse_buf sb;
    memset(&sb, 0, sizeof sb);
    if (sparse) {
        prng gs = { u32(r) ^ 0x2545f4914f6cdd1dull };
        sparse_make(&sb, &sc, &gs, B, H, L, S);
    }
    for (int64_t b = 0; b < B; b++) {
        const int64_t klen = d->use_kv_lens ? kv_lens[b] : S;
        const int64_t qlen = d->use_q_lens ? q_lens[b] : L;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < qlen; i++)
                for (int64_t j = 0; j < klen; j++) {
                    int64_t diag = d->align == ATTN_ALIGN_BOTTOM_RIGHT ? i + klen - qlen : i;
                    int vis = !((d->window_left >= 0 && diag - j > d->window_left) ||
                                (d->window_right >= 0 && j - diag > d->window_right));
                    /* attn.h, "Sparse attention" (global tokens, layout) */
                    if ((sb.gk && sb.gk[b * S + j]) || (sb.gq && sb.gq[b * L + i]))
                        vis = 1;
                    if (vis && sb.lay)
                        vis = sb.lay[((sc.lph ? h : 0) * sb.nb + i / sc.bs) * sb.mb + j / sc.bs] != 0;
                    if (!vis)
                        continue;
                    if (d->use_bias)
                        need[bias_off + (size_t)(b * d->bias.batch + h * d->bias.head + i * d->bias.seq + j)] |= 2;
                    if (d->mask_mode)
                        mneed[(size_t)(b * d->mask.batch + h * d->mask.head + i * d->mask.seq + j)] = 1;
                }
    }
    prng gv = { u32(r) };
    unsigned vopt = u8(r);
    const double mag = (vopt & 1) ? 2.0 : 0.5;
    const double ninf = (vopt & 2) ? 0.25 : 0.0;
    const double keep = (vopt >> 2 & 3) == 0 ? 1.0 : (vopt >> 2 & 3) * 0.3;
    for (size_t i = 0; i < pool_len; i++) {
        if (!need[i])
            pool[i] = NAN;
        else if (need[i] == 2 && pr_unit(&gv) < ninf)
            pool[i] = -INFINITY;
        else
            pool[i] = pr_val(&gv, mag);
    }
    const int keepv = d->mask_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (size_t i = 0; i < mlen; i++) {
        if (mneed[i]) {
            int vis = pr_unit(&gv) < keep;
            mpool[i] = (uint8_t)((vis == keepv) ? 1 + pr_next(&gv) % 255 : 0);
        } else {
            mpool[i] = (uint8_t)pr_next(&gv);
        }
    }
    uint8_t *kpm = xmalloc((size_t)(B * S)); /* exact size, for ASan */
    const int kkeep = d->key_padding_mode == ATTN_MASK_DROP_NONZERO ? 0 : 1;
    for (int64_t i = 0; i < B * S; i++) {
        int vis = pr_unit(&gv) < (keep < 1.0 ? 0.8 : 1.0);
        kpm[i] = (uint8_t)((vis == kkeep) ? 1 + pr_next(&gv) % 255 : 0);
    }
    free(need);
    free(mneed);

    attn_mha_weights w;
    memset(&w, 0, sizeof w);
    if (d->packed_in_proj) {
        w.in_proj_weight = pool + rg[iw0].off;
        if (d->has_bias)
            w.in_proj_bias = pool + rg[ib0].off;
    } else {
        w.q_weight = pool + rg[iw0].off;
        w.k_weight = pool + rg[iw1].off;
        w.v_weight = pool + rg[iw2].off;
        if (d->has_bias) {
            w.q_bias = pool + rg[ib0].off;
            w.k_bias = pool + rg[ib1].off;
            w.v_bias = pool + rg[ib2].off;
        }
    }
    w.out_weight = pool + rg[iwo].off;
    if (d->has_bias)
        w.out_bias = pool + rg[ibo].off;
    attn_mha_args a;
    memset(&a, 0, sizeof a);
    a.x = pool + rg[ix].off;
    if (!d->self_attention) {
        a.key = pool + rg[ik].off;
        a.value = pool + rg[iv].off;
    }
    if (d->use_kv_lens)
        a.kv_lens = kv_lens;
    if (d->use_q_lens)
        a.q_lens = q_lens;
    if (d->mask_mode)
        a.mask = mpool;
    if (d->use_bias)
        a.bias = pool + bias_off;
    if (d->key_padding_mode)
        a.key_padding_mask = kpm;
    a.global_k = sb.gk;
    a.global_q = sb.gq;
    a.layout = sb.lay;
    obuf ob, ow;
    memset(&ow, 0, sizeof ow);
    {
        const int64_t sz[3] = { 1, 1, B * L };
        attn_view v = { 0, 0, os };
        obuf_make(&ob, r, &v, sz, E, (B * L - 1) * os + E);
        a.out = ob.ptr;
    }
    if (d->weights) {
        const int64_t hh = d->weights == ATTN_WEIGHTS_PER_HEAD ? H : 1;
        const int64_t sz[3] = { B, hh, L };
        attn_view v = { hh * L * S, L * S, S };
        ow.count = 0;
        obuf_make(&ow, r, &v, sz, S, B * hh * L * S);
        /* the weights are contiguous: no offset */
        a.weights = ow.ptr;
    }

    /* exec-time invalid fields (train_forward: the workspace's, or the
     * context's, as decoded) */
    int ws_small = 0, ws_mis = 0, null_top = 0, cx_small = 0, cx_mis = 0, cx_null = 0;
    static const int32_t zero_lens[8];
    static const uint8_t junk_u8[64];
    static float junk_f[64];
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case BAD_PTR_NULL: {
            if (sparse && (u8(r) & 1)) {
                const void **sp3[] = { (const void **)&a.global_k, (const void **)&a.global_q,
                                       (const void **)&a.layout };
                *sp3[pick(r, 3)] = NULL;
                break;
            }
            const void **p[] = { (const void **)&w.in_proj_weight, (const void **)&w.in_proj_bias,
                                 (const void **)&w.q_weight, (const void **)&w.k_weight,
                                 (const void **)&w.v_weight, (const void **)&w.q_bias,
                                 (const void **)&w.k_bias, (const void **)&w.v_bias,
                                 (const void **)&w.out_weight, (const void **)&w.out_bias,
                                 (const void **)&a.x, (const void **)&a.key, (const void **)&a.value,
                                 (const void **)&a.out, (const void **)&a.kv_lens, (const void **)&a.q_lens,
                                 (const void **)&a.mask, (const void **)&a.bias,
                                 (const void **)&a.key_padding_mask, (const void **)&a.weights };
            *p[pick(r, 20)] = NULL;
            break;
        }
        case BAD_PTR_EXTRA:
            if (sparse && (u8(r) & 1)) {
                switch (pick(r, 3)) {
                case 0: if (!d->use_global_k) a.global_k = junk_u8; break;
                case 1: if (!d->use_global_q) a.global_q = junk_u8; break;
                default: if (!d->block_size) a.layout = junk_u8; break;
                }
                break;
            }
            switch (pick(r, 8)) {
            /* only pointers the plan does not use */
            case 0: if (!d->use_kv_lens) a.kv_lens = zero_lens; break;
            case 1: if (d->self_attention) a.key = junk_f; break;
            case 2: if (!d->mask_mode) a.mask = junk_u8; break;
            case 3: if (!d->key_padding_mode) a.key_padding_mask = junk_u8; break;
            case 4: if (!d->weights) a.weights = junk_f; break;
            case 5: if (!d->packed_in_proj) w.in_proj_weight = junk_f; break;
            case 6: if (d->packed_in_proj || !d->has_bias) w.q_bias = junk_f; break;
            default: if (!d->has_bias) w.out_bias = junk_f; break;
            }
            break;
        case BAD_LENGTH_: {
            unsigned b = pick(r, (unsigned)B);
            if (u8(r) & 1) { kv_lens[b] = bad_length(r, S); if (!a.kv_lens) { d->use_kv_lens = 1; a.kv_lens = kv_lens; } }
            else { q_lens[b] = bad_length(r, L); if (!a.q_lens) { d->use_q_lens = 1; a.q_lens = q_lens; } }
            break;
        }
        case BAD_WS_SMALL:
            if (train && (u8(r) & 1)) cx_small = 1; else ws_small = 1;
            break;
        case BAD_WS_MISALIGNED:
            if (train && (u8(r) & 1)) cx_mis = 1; else ws_mis = 1;
            break;
        case BAD_NULL_TOP:
            null_top = 1 + (int)pick(r, 4);
            if (train && null_top == 4) { /* NULL context instead of a NULL desc */
                cx_null = 1;
                null_top = 0;
            }
            break;
        default: break;
        }
    }
    float *inputs_copy = xmalloc(pool_len * sizeof(float));
    memcpy(inputs_copy, pool, pool_len * sizeof(float));
    uint8_t *mcopy = xmalloc(mlen);
    memcpy(mcopy, mpool, mlen);
    unsigned wsel = u8(r);
    attn_status st;
    obuf_clear(&ob);
    if (ow.base)
        obuf_clear(&ow);
    attn_mha_plan *plan = NULL;
    st = attn_mha_plan_create(&plan, d);
    check_status("attn_mha_plan_create", st, pe);
    if (st != ATTN_OK)
        FAIL("valid MHA plan failed: %s", st_name(st));
    size_t need_ws = 0, need_cx = 0;
    if (attn_mha_workspace_size(plan, &need_ws) != ATTN_OK)
        FAIL("attn_mha_workspace_size failed");
    /* train_forward's context: exact or larger, NaN-filled (or bad) */
    wsp cx = { 0 };
    unsigned char *cx_copy = NULL;
    if (train) {
        if (attn_mha_context_size(plan, &need_cx) != ATTN_OK)
            FAIL("attn_mha_context_size failed on a small plan");
        wsp_make(&cx, 1 + (wsel >> 4 & 1), need_cx, cx_small, cx_mis);
        cx_copy = xmalloc(cx.alloc);
        memcpy(cx_copy, cx.raw, cx.alloc);
    }
    if (null_top) {
        if (train)
            st = null_top == 1 ? attn_mha_train_execute(NULL, &w, &a, cx.ptr, cx.bytes, NULL, 0)
               : null_top == 2 ? attn_mha_train_execute(plan, NULL, &a, cx.ptr, cx.bytes, NULL, 0)
                               : attn_mha_train_execute(plan, &w, NULL, cx.ptr, cx.bytes, NULL, 0);
        else
            st = null_top == 1 ? attn_mha_execute(NULL, &w, &a, NULL, 0)
               : null_top == 2 ? attn_mha_execute(plan, NULL, &a, NULL, 0)
               : null_top == 3 ? attn_mha_execute(plan, &w, NULL, NULL, 0)
                               : attn_mha_plan_create(NULL, d);
        if (st != ATTN_ERR_NULL_ARGUMENT)
            FAIL("NULL plan/weights/args: got %s", st_name(st));
    } else {
        wsp w1;
        wsp_make(&w1, wsel & 3, need_ws, ws_small, ws_mis);
        expect ee = expect_mha_exec(d, &w, &a, w1.ptr, w1.bytes, need_ws);
        if (ws_small && need_ws == 0)
            ee.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
        if (train) {
            void *cxp = cx_null ? NULL : cx.ptr;
            expect_context(&ee, cxp, cx.bytes, need_cx);
            st = attn_mha_train_execute(plan, &w, &a, cxp, cx.bytes, w1.ptr, w1.bytes);
            check_status("attn_mha_train_execute", st, ee);
        } else {
            st = attn_mha_execute(plan, &w, &a, w1.ptr, w1.bytes);
            check_status("attn_mha_execute", st, ee);
        }
        free(w1.raw);
    }
    if (memcmp(inputs_copy, pool, pool_len * sizeof(float)) || memcmp(mcopy, mpool, mlen))
        FAIL("an MHA input was modified");
    if (st != ATTN_OK) {
        counts[train ? N_TRAIN_ERROR : N_MHA_ERROR]++;
        obuf_untouched(&ob, "out", st_name(st));
        if (ow.base)
            obuf_untouched(&ow, "weights", st_name(st));
        if (train && memcmp(cx_copy, cx.raw, cx.alloc))
            FAIL("attn_mha_train_execute: %s, but the context was written", st_name(st));
        goto out;
    }

    counts[train ? N_TRAIN_CHECKED : N_MHA_CHECKED]++;
    if (d->dropout_p > 0.0)
        counts[N_DROP_MHA_CHECKED]++;
    if (sparse)
        counts[N_SPARSE_MHA_CHECKED]++;
    /* against the reference */
    {
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
        if (mref_mha(d, &w, &a, &mo))
            abort();
        for (int64_t row = 0; row < B * L; row++)
            for (int64_t e = 0; e < E; e++) {
                const double y = a.out[row * os + e], ref = mo.y[row * E + e];
                if (!(fabs(y - ref) <= mo.y_tol[row * E + e]))
                    FAIL("MHA out[row %lld][%lld] = %.9g, reference %.9g, tol %.3g", (long long)row,
                         (long long)e, y, ref, mo.y_tol[row * E + e]);
            }
        const double *ref = mo.p ? mo.p : mo.avg, *tol = mo.p ? mo.p_tol : mo.avg_tol;
        const size_t nw = mo.p ? np : (size_t)(B * L * S);
        for (size_t i = 0; ref && i < nw; i++)
            if (!(fabs((double)a.weights[i] - ref[i]) <= tol[i]))
                FAIL("MHA weights[%zu] = %.9g, reference %.9g, tol %.3g", i, (double)a.weights[i],
                     ref[i], tol[i]);
        obuf_outside(&ob, "out");
        if (ow.base)
            obuf_outside(&ow, "weights");
        free(mo.y);
        free(mo.y_tol);
        free(mo.p);
        free(mo.p_tol);
        free(mo.avg);
        free(mo.avg_tol);
    }
    /* another thread count, another workspace: bitwise equal (execute,
     * also after train_forward: "Y bitwise as attn_mha_execute") */
    {
        float *so = obuf_snap(&ob), *sw = obuf_snap(&ow);
        attn_mha_desc d2 = *d;
        d2.threads = t2;
        char note[256];
        snprintf(note, sizeof note, "%s%s",
                 train ? " (attn_mha_train_execute, then attn_mha_execute)" : "",
                 drop_zero_reset(d2.dropout_p, &d2.dropout_seed, &d2.dropout_offset));
        obuf_clear(&ob);
        if (ow.base)
            obuf_clear(&ow);
        attn_mha_plan *plan2 = NULL;
        if ((st = attn_mha_plan_create(&plan2, &d2)) != ATTN_OK)
            FAIL("MHA plan with %d threads: %s", t2, st_name(st));
        size_t need2 = 0;
        attn_mha_workspace_size(plan2, &need2);
        wsp w2;
        wsp_make(&w2, (wsel >> 2) % 3, need2, 0, 0);
        if ((st = attn_mha_execute(plan2, &w, &a, w2.ptr, w2.bytes)) != ATTN_OK)
            FAIL("MHA execute with %d threads: %s", t2, st_name(st));
        attn_mha_plan_destroy(plan2);
        free(w2.raw);
        obuf_same(&ob, so, "out", d->threads, t2, note);
        if (ow.base)
            obuf_same(&ow, sw, "weights", d->threads, t2, note);
        free(so);
        free(sw);
    }
    if (train) {
        const mha_prob M = { d, &w, &a, pool, pool_len, mpool, mlen, &ob, &ow, cx.ptr, cx.bytes,
                             need_cx, t2, sparse };
        fuzz_mha_train(r, &M, plan);
    }
out:
    attn_mha_plan_destroy(plan);
    free(cx.raw);
    free(cx_copy);
    free(inputs_copy);
    free(mcopy);
    free(pool);
    free(mpool);
    free(kpm);
    sparse_free(&sb);
    obuf_free(&ob);
    obuf_free(&ow);
}


/* ------------------------------------------------------- layout builders */

/* Bit 5 of the first byte (SEL_LAYOUT): one call of attn_layout_build_bigbird,
 * _strided or _fixed with decoded arguments (sizes 1..40, or 0, negative,
 * huge; parameters in and out of their ranges; NULL).  The status must be
 * one of the rules broken (attn.h: NULL_ARGUMENT, BAD_SIZE, TOO_LARGE,
 * BAD_OPTION; nothing written on error: the buffer keeps its sentinel);
 * a valid layout must equal the independent construction of
 * test/layout_expect.c byte for byte. */
static int64_t layout_dim(rd *r)
{
    static const int64_t special[8] = { 0, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 32,
                                        ((int64_t)1 << 31) + 1, (int64_t)1 << 62,
                                        3037000500 };
    const unsigned c = u8(r);
    return (c & 0xe0) == 0xe0 ? special[c & 7] : 1 + (int64_t)(c % 40);
}

static void fuzz_layout(rd *r)
{
    static const int64_t wv[12] = { 0, 1, 3, 5, 7, 41, 1, 3, -1, 2, INT64_MIN, (int64_t)1 << 40 };
    static const int64_t gv[8] = { 0, 1, 2, 3, 40, INT64_MAX, 0, -1 };
    static const int64_t rv[10] = { 0, 1, 2, 3, 5, 100, INT64_MAX, 1, -1, INT64_MIN };
    static const int64_t lv[10] = { 1, 2, 3, 4, 7, 50, INT64_MAX, 0, -1, INT64_MIN };
    static const int cv[8] = { 0, 1, 0, 1, 0, 1, 2, -1 };
    const unsigned fn = pick(r, 3);
    const int64_t nb = layout_dim(r), mb = layout_dim(r);
    const unsigned c = u8(r);
    const int null = (c & 15) == 15;
    int64_t p1 = 0, p2 = 0, p3 = 0;
    int causal = 0;
    const uint64_t seed = (uint64_t)u32(r) | (uint64_t)u8(r) << 32;
    expect e = { 0, 0 };
    if (fn == 0) {
        p1 = wv[pick(r, 12)];
        p2 = gv[pick(r, 8)];
        p3 = rv[pick(r, 10)];
        if (p1 < 0 || p2 < 0 || p3 < 0 || (p1 > 0 && p1 % 2 == 0))
            e.must |= BIT(ATTN_ERR_BAD_OPTION);
    } else {
        p1 = lv[pick(r, 10)];
        causal = cv[pick(r, 8)];
        if (p1 < 1 || (causal != 0 && causal != 1))
            e.must |= BIT(ATTN_ERR_BAD_OPTION);
        if (fn == 2) {
            static const int64_t cs[8] = { 1, 1, 2, 3, 0, -1, INT64_MAX, 2 };
            const unsigned k = pick(r, 10);
            p2 = k < 8 ? cs[k] : k == 8 ? p1 : p1 < INT64_MAX ? p1 + 1 : 0; /* c: 1..l, or not */
            if (p2 < 1 || p2 > p1)
                e.must |= BIT(ATTN_ERR_BAD_OPTION);
        }
    }
    if (null)
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    int64_t cells = 0;
    if (nb <= 0 || mb <= 0) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
    } else if (__builtin_mul_overflow(nb, mb, &cells)) {
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    } else if (nb > ((int64_t)1 << 32) || mb > ((int64_t)1 << 32) || cells > ((int64_t)1 << 40)) {
        /* representable, but scratch per row (bigbird) may not be */
        e.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    }
    if (verbose)
        fprintf(stderr, "LAYOUT fn=%u nb=%lld mb=%lld p=%lld/%lld/%lld causal=%d seed=%llx null=%d\n",
                fn, (long long)nb, (long long)mb, (long long)p1, (long long)p2, (long long)p3,
                causal, (unsigned long long)seed, null);
    /* a valid call writes nb x mb bytes: only for small layouts */
    const int small = nb > 0 && mb > 0 && nb <= 64 && mb <= 64;
    if (e.must == 0 && !small)
        return;
    const size_t cnt = small ? (size_t)(nb * mb) : 64;
    uint8_t *buf = xmalloc(cnt), *want = xmalloc(cnt);
    memset(buf, 0xEE, cnt);
    uint8_t *L = null ? NULL : buf;
    attn_status st = fn == 0   ? attn_layout_build_bigbird(L, nb, mb, p1, p2, p3, seed)
                     : fn == 1 ? attn_layout_build_strided(L, nb, mb, p1, causal)
                               : attn_layout_build_fixed(L, nb, mb, p1, p2, causal);
    check_status(fn == 0 ? "attn_layout_build_bigbird" : fn == 1 ? "attn_layout_build_strided" : "attn_layout_build_fixed",
                 st, e);
    if (st != ATTN_OK) {
        for (size_t i = 0; i < cnt; i++)
            if (buf[i] != 0xEE)
                FAIL("layout builder %u: %s, but byte %zu was written", fn, st_name(st), i);
        counts[N_LAYOUT_ERROR]++;
    } else {
        /* the constructions loop over the band and the stride: the same
         * layout with them cut to what the shape can hold */
        const int64_t far = nb + mb + 1;
        if (fn == 0) {
            if (expect_bigbird(want, nb, mb, p1 > 2 * far + 1 ? 2 * far + 1 : p1, p2, p3, seed))
                abort();
        } else if (fn == 1) {
            expect_strided(want, nb, mb, p1 > far ? far : p1, causal);
        } else {
            expect_fixed(want, nb, mb, p1, p2, causal);
        }
        for (size_t i = 0; i < cnt; i++)
            if (buf[i] != want[i])
                FAIL("layout builder %u (nb=%lld mb=%lld p=%lld/%lld/%lld causal=%d): block "
                     "(%lld, %lld) is %u, the construction %u",
                     fn, (long long)nb, (long long)mb, (long long)p1, (long long)p2,
                     (long long)p3, causal, (long long)(i / (size_t)mb),
                     (long long)(i % (size_t)mb), buf[i], want[i]);
        counts[N_LAYOUT_CHECKED]++;
    }
    free(buf);
    free(want);
}

/* ----------------------------------------------------------- linear */

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

static void fuzz_linear(rd *r, unsigned sel)
{
    const int bwd = !!(sel & SEL_DROPOUT);
    unsigned bad[2] = { LB_NONE, LB_NONE };
    unsigned bb = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (LB_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, LB_COUNT_ - 1);
    }
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
    attn_linear_bwd_desc bd;
    attn_linear_bwd_desc_init(&bd);
    attn_linear_desc *d = &bd.fwd;
    d->engine = engine;
    d->batch = B;
    d->kv_heads = Hkv;
    d->q_heads = Hkv * g;
    d->q_len = n;
    d->kv_len = m;
    d->qk_dim = dk;
    d->v_dim = dv;
    const int64_t Hq = d->q_heads;
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
    const int t2 = threads_other(d->threads, tsel >> 3);
    int32_t kv_lens[8], q_lens[8];
    for (int64_t b = 0; b < B; b++) {
        kv_lens[b] = (int32_t)pick(r, (unsigned)(m + 1));
        q_lens[b] = (int32_t)pick(r, (unsigned)(n + 1));
    }
    const int64_t szq[3] = { B, Hq, n }, szk[3] = { B, Hkv, m };
    d->q = gen_view(r, szq, dk);
    d->k = gen_view(r, szk, dk);
    d->v = gen_view(r, szk, dv);
    d->o = gen_view(r, szq, dv);
    if (bwd) {
        bd.d_o = gen_view(r, szq, dv);
        bd.dq = gen_view(r, szq, dk);
        bd.dk = gen_view(r, szk, dk);
        bd.dv = gen_view(r, szk, dv);
        /* fwd.o is not used by the backward: garbage (ignored) */
        static const int64_t junk[4] = { ATTN_STRIDE_UNSET, -1, 0, INT64_MAX };
        const unsigned j = u8(r);
        if (j & 1)
            d->o = (attn_view){ junk[(j >> 1) & 3], junk[(j >> 3) & 3], junk[(j >> 5) & 3] };
    }

    /* plan-time invalid fields */
    int huge = 0;
    for (int k = 0; k < 2; k++) {
        attn_view *views[8] = { &d->q, &d->k, &d->v, bwd ? &bd.d_o : &d->o,
                                bwd ? &bd.dq : &d->o, bwd ? &bd.dk : &d->q,
                                bwd ? &bd.dv : &d->k, bwd ? &bd.dq : &d->v };
        attn_view *vw = views[pick(r, 8)];
        int64_t *sp = pick(r, 3) == 0 ? &vw->batch : (u8(r) & 1) ? &vw->head : &vw->seq;
        switch (bad[k]) {
        case LB_RESERVED: {
            const int64_t val = (int64_t)u8(r) - 128;
            if (bwd && (u8(r) & 1))
                bd.reserved[pick(r, (unsigned)(sizeof bd.reserved / sizeof bd.reserved[0]))] =
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
        case LB_SIZE_HUGE: {
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
                    bd.d_o = bd.dv = d->o; /* dV's shape differs: whatever it says */
                    bd.dq = d->q;
                    bd.dk = d->k;
                }
            }
            huge = 1;
            break;
        }
        case LB_HEAD_RATIO: d->kv_heads = d->q_heads + 1 + pick(r, 3); break;
        case LB_STRIDE_NEG: *sp = -1 - (int64_t)u8(r) * (int64_t)(u8(r) + 1); break;
        case LB_STRIDE_ZERO: *sp = 0; break;
        case LB_STRIDE_SHORT: vw->seq = vw->seq > 0 ? vw->seq - 1 - pick(r, 2) : 0; if (vw->seq < 0) vw->seq = 0; break;
        case LB_STRIDE_UNSET: *sp = ATTN_STRIDE_UNSET; break;
        case LB_OUT_OVERLAP: {
            attn_view *ov = bwd ? (pick(r, 3) == 0 ? &bd.dq : (u8(r) & 1) ? &bd.dk : &bd.dv) : &d->o;
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
    expect pe = bwd ? expect_linear_bwd_plan(&bd) : expect_linear_plan(d, 1);
    if (huge)
        pe.maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    if (verbose)
        print_linear(d, bad, t2, bwd);

    int64_t eq = view_extent(&d->q, szq, dk), ek = view_extent(&d->k, szk, dk),
            ev = view_extent(&d->v, szk, dv);
    int64_t eo = bwd ? 0 : view_extent(&d->o, szq, dv);
    int64_t edo = bwd ? view_extent(&bd.d_o, szq, dv) : 0, edq = bwd ? view_extent(&bd.dq, szq, dk) : 0,
            edk = bwd ? view_extent(&bd.dk, szk, dk) : 0, edv = bwd ? view_extent(&bd.dv, szk, dv) : 0;
    const int small = !huge && eq >= 0 && ek >= 0 && ev >= 0 && eo >= 0 && edo >= 0 &&
                      edq >= 0 && edk >= 0 && edv >= 0 && d->batch == B && d->q_heads == Hq &&
                      d->kv_heads == Hkv && d->q_len == n && d->kv_len == m &&
                      d->qk_dim == dk && d->v_dim == dv;
    if (!small) {
        /* plan only (and the one-shot call on dummy buffers when invalid) */
        attn_status st;
        float dummy[64];
        for (int i = 0; i < 64; i++)
            dummy[i] = sentinel();
        const float in[64] = { 0 };
        if (bwd) {
            attn_linear_bwd_plan *plan = NULL;
            st = attn_linear_bwd_plan_create(&plan, &bd);
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
                const attn_status st2 = attn_linear_backward(&bd, &a);
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
                                       .kv_lens = d->use_kv_lens ? kv_lens : NULL,
                                       .q_lens = d->use_q_lens ? q_lens : NULL,
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
        return;
    }

    /* inputs: Q, K, V (and dO) in one pool, views may overlap */
    size_t len = 0;
    const size_t oq = place(r, &len, (size_t)eq, 1), okk = place(r, &len, (size_t)ek, 1),
                 ov = place(r, &len, (size_t)ev, 1);
    const size_t odo = bwd ? place(r, &len, (size_t)edo, 1) : 0;
    const size_t pool_len = len;
    float *pool = xmalloc(pool_len * sizeof(float));
    uint8_t *need = calloc(pool_len + 1, 1);
    if (!need)
        abort();
    const lref_shape shp = { B, Hq, Hkv, n, m, dk, dv, (int)d->feature_map, d->causal != 0,
                             (int)d->align, isnan(d->eps) ? 1e-6 : (double)d->eps,
                             d->use_kv_lens ? kv_lens : NULL, d->use_q_lens ? q_lens : NULL };
    /* what is read (attn.h): Q rows i < q_lens[b]; K, V rows j < kv_lens[b]
     * that some query sees, or all of them with the state; dO rows of
     * the queries.  1 = Q, 2 = K, 4 = V, 8 = dO */
    for (int64_t b = 0; b < B; b++) {
        const int64_t qlen = d->use_q_lens ? q_lens[b] : n;
        const int64_t klen = d->use_kv_lens ? kv_lens[b] : m;
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < qlen; i++) {
                for (int64_t x = 0; x < dk; x++)
                    need[oq + (size_t)(b * d->q.batch + h * d->q.head + i * d->q.seq + x)] |= 1;
                for (int64_t x = 0; bwd && x < dv; x++)
                    need[odo + (size_t)(b * bd.d_o.batch + h * bd.d_o.head + i * bd.d_o.seq + x)] |= 8;
            }
        for (int64_t j = 0; j < klen; j++) {
            int seen = d->use_state;
            for (int64_t i = 0; i < qlen && !seen; i++)
                seen = lref_visible(&shp, b, i, j);
            for (int64_t hk = 0; seen && hk < Hkv; hk++) {
                for (int64_t x = 0; x < dk; x++)
                    need[okk + (size_t)(b * d->k.batch + hk * d->k.head + j * d->k.seq + x)] |= 2;
                for (int64_t x = 0; x < dv; x++)
                    need[ov + (size_t)(b * d->v.batch + hk * d->v.head + j * d->v.seq + x)] |= 4;
            }
        }
    }
    prng gv = { u32(r) };
    const unsigned vopt = u8(r);
    static const double mags[4] = { 1.0, 4.0, 0.25, 2.0 };
    const double mag = mags[vopt & 3];
    /* IDENTITY: the caller's features, positive (as test_linear's rows) */
    const int positive = d->feature_map == ATTN_FEATURE_IDENTITY;
    for (size_t i = 0; i < pool_len; i++) {
        if (!need[i])
            pool[i] = NAN;
        else if (positive && (need[i] & 3) && !(need[i] & 12))
            pool[i] = (float)(0.05 + pr_unit(&gv) * mag);
        else
            pool[i] = pr_val(&gv, mag);
    }
    free(need);
    float *pool_copy = xmalloc(pool_len * sizeof(float));
    memcpy(pool_copy, pool, pool_len * sizeof(float));
    /* the state: dense, exact sizes; z > 0 (a sum of features) */
    const size_t ns = (size_t)(B * Hkv * dk * dv), nz = (size_t)(B * Hkv * dk);
    float *st_s = NULL, *st_z = NULL, *s0 = NULL, *z0 = NULL;
    if (d->use_state) {
        st_s = xmalloc(ns * sizeof(float));
        st_z = xmalloc(nz * sizeof(float));
        for (size_t i = 0; i < ns; i++)
            st_s[i] = pr_val(&gv, mag * 3.0);
        for (size_t i = 0; i < nz; i++)
            st_z[i] = (float)(0.05 + pr_unit(&gv) * mag * 3.0);
        s0 = xmalloc(ns * sizeof(float));
        z0 = xmalloc(nz * sizeof(float));
        memcpy(s0, st_s, ns * sizeof(float));
        memcpy(z0, st_z, nz * sizeof(float));
    }
    obuf oo = { 0 }, gq = { 0 }, gk = { 0 }, gvb = { 0 };
    if (bwd) {
        obuf_make(&gq, r, &bd.dq, szq, dk, edq);
        obuf_make(&gk, r, &bd.dk, szk, dk, edk);
        obuf_make(&gvb, r, &bd.dv, szk, dv, edv);
    } else {
        obuf_make(&oo, r, &d->o, szq, dv, eo);
    }
    obuf *outs[3] = { bwd ? &gq : &oo, &gk, &gvb };
    attn_linear_args a;
    memset(&a, 0, sizeof a);
    attn_linear_bwd_args ba;
    memset(&ba, 0, sizeof ba);
    if (bwd) {
        ba.q = pool + oq;
        ba.k = pool + okk;
        ba.v = pool + ov;
        ba.d_o = pool + odo;
        ba.dq = gq.ptr;
        ba.dk = gk.ptr;
        ba.dv = gvb.ptr;
        ba.kv_lens = d->use_kv_lens ? kv_lens : NULL;
        ba.q_lens = d->use_q_lens ? q_lens : NULL;
    } else {
        a.q = pool + oq;
        a.k = pool + okk;
        a.v = pool + ov;
        a.o = oo.ptr;
        a.kv_lens = d->use_kv_lens ? kv_lens : NULL;
        a.q_lens = d->use_q_lens ? q_lens : NULL;
        a.state_s = st_s;
        a.state_z = st_z;
    }

    /* exec-time invalid fields */
    int ws_small = 0, ws_mis = 0, null_top = 0;
    static const int32_t zero_lens[8];
    static float junk_f[64];
    int32_t kvl[8], ql[8];
    memcpy(kvl, kv_lens, sizeof kvl);
    memcpy(ql, q_lens, sizeof ql);
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case LB_PTR_NULL:
            if (bwd) {
                const void **p[] = { (const void **)&ba.q, (const void **)&ba.k,
                                     (const void **)&ba.v, (const void **)&ba.d_o,
                                     (const void **)&ba.dq, (const void **)&ba.dk,
                                     (const void **)&ba.dv, (const void **)&ba.kv_lens,
                                     (const void **)&ba.q_lens };
                *p[pick(r, 9)] = NULL;
            } else {
                const void **p[] = { (const void **)&a.q, (const void **)&a.k,
                                     (const void **)&a.v, (const void **)&a.o,
                                     (const void **)&a.kv_lens, (const void **)&a.q_lens,
                                     (const void **)&a.state_s, (const void **)&a.state_z };
                *p[pick(r, 8)] = NULL;
            }
            break;
        case LB_PTR_EXTRA:
            switch (pick(r, 4)) {
            case 0:
                if (!d->use_kv_lens) { if (bwd) ba.kv_lens = zero_lens; else a.kv_lens = zero_lens; }
                break;
            case 1:
                if (!d->use_q_lens) { if (bwd) ba.q_lens = zero_lens; else a.q_lens = zero_lens; }
                break;
            case 2: if (!bwd && !d->use_state) a.state_s = junk_f; break;
            default: if (!bwd && !d->use_state) a.state_z = junk_f; break;
            }
            break;
        case LB_LENGTH: {
            const unsigned b = pick(r, (unsigned)B);
            if (u8(r) & 1) {
                kvl[b] = bad_length(r, m);
                d->use_kv_lens = 1;
                if (bwd) ba.kv_lens = kvl; else a.kv_lens = kvl;
            } else {
                ql[b] = bad_length(r, n);
                d->use_q_lens = 1;
                if (bwd) ba.q_lens = ql; else a.q_lens = ql;
            }
            break;
        }
        case LB_WS_SMALL: ws_small = 1; break;
        case LB_WS_MISALIGNED: ws_mis = 1; break;
        case LB_NULL_TOP: null_top = 1 + (int)pick(r, 6); break;
        default: break;
        }
    }
    pe = bwd ? expect_linear_bwd_plan(&bd) : expect_linear_plan(d, 1); /* lengths */
    const unsigned wsel = u8(r);
    const int oneshot = (wsel & 3) == 3 && !ws_small && !ws_mis;
    for (int k = 0; k < 3; k++)
        if (outs[k]->base)
            obuf_clear(outs[k]);
    attn_status st = ATTN_OK;
    wsp w1 = { 0 };
    if (null_top && pe.must == 0) {
        if (bwd) {
            attn_linear_bwd_plan *plan = NULL;
            switch (null_top) {
            case 1: st = attn_linear_bwd_plan_create(&plan, NULL); break;
            case 2: st = attn_linear_bwd_plan_create(NULL, &bd); break;
            case 3: st = attn_linear_backward(NULL, &ba); break;
            case 4: st = attn_linear_backward(&bd, NULL); break;
            default:
                st = attn_linear_bwd_plan_create(&plan, &bd);
                check_status("attn_linear_bwd_plan_create", st, pe);
                st = null_top == 5 ? attn_linear_bwd_execute(NULL, &ba, NULL, 0)
                   : (wsel & 4)    ? attn_linear_bwd_execute(plan, NULL, NULL, 0)
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
            case 3: st = attn_linear(NULL, &a); break;
            case 4: st = attn_linear(d, NULL); break;
            default:
                st = attn_linear_plan_create(&plan, d);
                check_status("attn_linear_plan_create", st, pe);
                st = null_top == 5 ? attn_linear_execute(NULL, &a, NULL, 0)
                   : (wsel & 4)    ? attn_linear_execute(plan, NULL, NULL, 0)
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
    } else if (bwd) {
        if (oneshot) {
            expect x = pe;
            if (!pe.must) {
                const ptr_use u[] = { { 1, ba.q }, { 1, ba.k }, { 1, ba.v }, { 1, ba.d_o },
                                      { 1, ba.dq }, { 1, ba.dk }, { 1, ba.dv },
                                      { d->use_kv_lens, ba.kv_lens }, { d->use_q_lens, ba.q_lens } };
                expect_call(&x, u, 9, B, d->use_kv_lens ? ba.kv_lens : NULL, m,
                            d->use_q_lens ? ba.q_lens : NULL, n, NULL, 0, 0);
            }
            st = attn_linear_backward(&bd, &ba);
            check_status("attn_linear_backward", st, x);
        } else {
            attn_linear_bwd_plan *plan = NULL;
            st = attn_linear_bwd_plan_create(&plan, &bd);
            check_status("attn_linear_bwd_plan_create", st, pe);
            if (st == ATTN_OK) {
                size_t need_ws = 0;
                if (attn_linear_bwd_workspace_size(plan, &need_ws) != ATTN_OK)
                    FAIL("attn_linear_bwd_workspace_size failed");
                wsp_make(&w1, wsel & 3, need_ws, ws_small, ws_mis);
                expect x = { 0, 0 };
                const ptr_use u[] = { { 1, ba.q }, { 1, ba.k }, { 1, ba.v }, { 1, ba.d_o },
                                      { 1, ba.dq }, { 1, ba.dk }, { 1, ba.dv },
                                      { d->use_kv_lens, ba.kv_lens }, { d->use_q_lens, ba.q_lens } };
                expect_call(&x, u, 9, B, d->use_kv_lens ? ba.kv_lens : NULL, m,
                            d->use_q_lens ? ba.q_lens : NULL, n, w1.ptr, w1.bytes, need_ws);
                if (ws_small && need_ws == 0)
                    x.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
                st = attn_linear_bwd_execute(plan, &ba, w1.ptr, w1.bytes);
                check_status("attn_linear_bwd_execute", st, x);
                attn_linear_bwd_plan_destroy(plan);
            } else if (plan) {
                FAIL("linear backward plan set on error");
            }
        }
    } else {
        const ptr_use u[] = { { 1, a.q }, { 1, a.k }, { 1, a.v }, { 1, a.o },
                              { d->use_kv_lens, a.kv_lens }, { d->use_q_lens, a.q_lens },
                              { d->use_state, a.state_s }, { d->use_state, a.state_z } };
        if (oneshot) {
            expect x = pe;
            if (!pe.must)
                expect_call(&x, u, 8, B, d->use_kv_lens ? a.kv_lens : NULL, m,
                            d->use_q_lens ? a.q_lens : NULL, n, NULL, 0, 0);
            st = attn_linear(d, &a);
            check_status("attn_linear", st, x);
        } else {
            attn_linear_plan *plan = NULL;
            st = attn_linear_plan_create(&plan, d);
            check_status("attn_linear_plan_create", st, pe);
            if (st == ATTN_OK) {
                size_t need_ws = 0;
                if (attn_linear_workspace_size(plan, &need_ws) != ATTN_OK)
                    FAIL("attn_linear_workspace_size failed");
                wsp_make(&w1, wsel & 3, need_ws, ws_small, ws_mis);
                expect x = { 0, 0 };
                expect_call(&x, u, 8, B, d->use_kv_lens ? a.kv_lens : NULL, m,
                            d->use_q_lens ? a.q_lens : NULL, n, w1.ptr, w1.bytes, need_ws);
                if (ws_small && need_ws == 0)
                    x.must &= ~BIT(ATTN_ERR_WORKSPACE_TOO_SMALL);
                st = attn_linear_execute(plan, &a, w1.ptr, w1.bytes);
                check_status("attn_linear_execute", st, x);
                attn_linear_plan_destroy(plan);
            } else if (plan) {
                FAIL("linear plan set on error");
            }
        }
    }
    free(w1.raw);
    if (memcmp(pool_copy, pool, pool_len * sizeof(float)))
        FAIL("linear: an input was modified");
    if (st != ATTN_OK) {
        for (int k = 0; k < 3; k++)
            if (outs[k]->base)
                obuf_untouched(outs[k], k == 0 ? (bwd ? "dQ" : "O") : k == 1 ? "dK" : "dV",
                               st_name(st));
        if (st_s && (memcmp(st_s, s0, ns * sizeof(float)) || memcmp(st_z, z0, nz * sizeof(float))))
            FAIL("linear: %s, but the state was written", st_name(st));
        counts[bwd ? N_LIN_BWD_ERROR : N_LIN_ERROR]++;
        goto out;
    }
    counts[bwd ? N_LIN_BWD_CHECKED : N_LIN_CHECKED]++;
    {
        /* against the float64 reference, with its bounds */
        double *rq = to_dense(pool + oq, &d->q, B, Hq, n, dk);
        double *rk = to_dense(pool + okk, &d->k, B, Hkv, m, dk);
        double *rv = to_dense(pool + ov, &d->v, B, Hkv, m, dv);
        if (bwd) {
            double *rdo = to_dense(pool + odo, &bd.d_o, B, Hq, n, dv);
            const size_t nq = (size_t)(B * Hq * n * dk), nk = (size_t)(B * Hkv * m * dk),
                         nv = (size_t)(B * Hkv * m * dv);
            double *x[6] = { xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8),
                             xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8) };
            if (lref_backward(&shp, rq, rk, rv, rdo, x[0], x[1], x[2], x[3], x[4], x[5]))
                abort();
            lin_check_view("dQ", &gq, &bd.dq, B, Hq, n, dk, x[0], x[3]);
            lin_check_view("dK", &gk, &bd.dk, B, Hkv, m, dk, x[1], x[4]);
            lin_check_view("dV", &gvb, &bd.dv, B, Hkv, m, dv, x[2], x[5]);
            for (int k = 0; k < 6; k++)
                free(x[k]);
            free(rdo);
        } else {
            const size_t no = (size_t)(B * Hq * n * dv);
            double *ro = xmalloc(no * 8), *rt = xmalloc(no * 8);
            double *rs0 = NULL, *rz0 = NULL, *s1 = NULL, *z1 = NULL, *s1t = NULL, *z1t = NULL;
            if (d->use_state) {
                rs0 = xmalloc(ns * 8);
                rz0 = xmalloc(nz * 8);
                for (size_t i = 0; i < ns; i++)
                    rs0[i] = (double)s0[i];
                for (size_t i = 0; i < nz; i++)
                    rz0[i] = (double)z0[i];
                s1 = xmalloc(ns * 8);
                z1 = xmalloc(nz * 8);
                s1t = xmalloc(ns * 8);
                z1t = xmalloc(nz * 8);
            }
            if (lref_forward(&shp, rq, rk, rv, rs0, rz0, ro, rt, s1, z1, s1t, z1t))
                abort();
            lin_check_view("O", &oo, &d->o, B, Hq, n, dv, ro, rt);
            for (size_t i = 0; s1 && i < ns; i++)
                lin_check("state S", st_s + i, s1, s1t, (int64_t)i);
            for (size_t i = 0; z1 && i < nz; i++)
                lin_check("state z", st_z + i, z1, z1t, (int64_t)i);
            free(ro); free(rt); free(rs0); free(rz0); free(s1); free(z1); free(s1t); free(z1t);
        }
        free(rq);
        free(rk);
        free(rv);
    }
    /* again with another thread count and workspace (the state reset to
     * its value before the call): bitwise equal */
    {
        float *snap[3], *ss = NULL, *sz = NULL;
        for (int k = 0; k < 3; k++) {
            snap[k] = obuf_snap(outs[k]);
            if (outs[k]->base)
                obuf_clear(outs[k]);
        }
        if (st_s) {
            ss = xmalloc(ns * sizeof(float));
            sz = xmalloc(nz * sizeof(float));
            memcpy(ss, st_s, ns * sizeof(float));
            memcpy(sz, st_z, nz * sizeof(float));
            memcpy(st_s, s0, ns * sizeof(float));
            memcpy(st_z, z0, nz * sizeof(float));
        }
        const int t1 = d->threads;
        d->threads = t2;
        size_t need_ws = 0;
        wsp w2;
        if (bwd) {
            attn_linear_bwd_plan *plan = NULL;
            if ((st = attn_linear_bwd_plan_create(&plan, &bd)) != ATTN_OK)
                FAIL("linear backward plan with %d threads: %s", t2, st_name(st));
            attn_linear_bwd_workspace_size(plan, &need_ws);
            wsp_make(&w2, (wsel >> 3) % 3, need_ws, 0, 0);
            if ((st = attn_linear_bwd_execute(plan, &ba, w2.ptr, w2.bytes)) != ATTN_OK)
                FAIL("linear backward with %d threads: %s", t2, st_name(st));
            attn_linear_bwd_plan_destroy(plan);
        } else {
            attn_linear_plan *plan = NULL;
            if ((st = attn_linear_plan_create(&plan, d)) != ATTN_OK)
                FAIL("linear plan with %d threads: %s", t2, st_name(st));
            attn_linear_workspace_size(plan, &need_ws);
            wsp_make(&w2, (wsel >> 3) % 3, need_ws, 0, 0);
            if ((st = attn_linear_execute(plan, &a, w2.ptr, w2.bytes)) != ATTN_OK)
                FAIL("linear execute with %d threads: %s", t2, st_name(st));
            attn_linear_plan_destroy(plan);
        }
        free(w2.raw);
        for (int k = 0; k < 3; k++) {
            obuf_same(outs[k], snap[k], k == 0 ? (bwd ? "dQ" : "O") : k == 1 ? "dK" : "dV", t1,
                      t2, " (linear)");
            free(snap[k]);
        }
        if (ss && (memcmp(ss, st_s, ns * sizeof(float)) || memcmp(sz, st_z, nz * sizeof(float))))
            FAIL("linear state differs bitwise between %d and %d threads", t1, t2);
        free(ss);
        free(sz);
        d->threads = t1;
    }
    if (memcmp(pool_copy, pool, pool_len * sizeof(float)))
        FAIL("linear: an input was modified");
out:
    free(pool);
    free(pool_copy);
    free(st_s);
    free(st_z);
    free(s0);
    free(z0);
    obuf_free(&oo);
    obuf_free(&gq);
    obuf_free(&gk);
    obuf_free(&gvb);
}

/* ------------------------------------------------------------ merge */

/* Bits 4 and 5 of the first byte together (SEL_MERGE): one call of
 * attn_partials_merge (attn.h, "Decoding and the KV cache").  Decoded:
 * parts 1..6, rows 1..12, dim 1..40 or 250..265 (across the library's
 * column chunks), the partial O and lse laid out part-major, interleaved,
 * broadcast over parts or rows (stride 0), with overlapping rows (a row
 * stride below dim) or all in one place, with gaps; a padded output and
 * lse_out NULL or strided (0 for one row); lse_p finite of a decoded
 * magnitude (up to FLT_MAX), -INFINITY (whole rows of it too), NaN or
 * +INFINITY at decoded rates; O_p finite (down to denormals), NaN in
 * every element only -INFINITY parts (or no part) point at.  Then one or
 * two invalid fields (GB_*).  The status must be the one attn.h's rules,
 * read in their documented order, give (expect_merge, exact); on error
 * the outputs are untouched; on success every row matches a float64
 * merge written here (NaN rows, O 0 and lse -INFINITY for empty rows, one
 * contributing part bit for bit, else within a rounding of the double
 * result), gaps and tails keep the sentinel, inputs never change and a
 * second call gives the same bits.  Calls the rules accept but whose
 * extents or work are too large to allocate or run here are skipped. */
enum {
    GB_NONE = 0,
    GB_ARGS_NULL,    /* args itself NULL */
    GB_PTR_NULL,     /* o_parts, lse_parts or o NULL */
    GB_SIZE,         /* parts, rows or dim 0 or negative */
    GB_NEG_STRIDE,   /* one of the seven strides negative */
    GB_OUT_SHORT,    /* o_out_stride < dim */
    GB_LSE_OUT_ZERO, /* lse_out_stride 0: an error with rows > 1 and lse_out */
    GB_HUGE_STRIDE,  /* a stride near or past 2^61 (or at the boundary) */
    GB_HUGE_SIZE,    /* parts, rows or dim huge */
    GB_LSE_OUT_NULL, /* lse_out NULL with a junk stride: valid */
    GB_COUNT
};

typedef unsigned __int128 u128;

/* Elements spanned by (count - 1) * stride + tail, exact (no overflow for
 * int64 operands; count - 1 formed unsigned: count may be INT64_MIN, when
 * the size rule fails first and the span is not used). */
static u128 merge_span(int64_t count, int64_t stride, u128 tail)
{
    return (u128)((uint64_t)count - 1u) * (u128)(uint64_t)stride + tail;
}

static int merge_fits(u128 elems)
{
    const u128 lim = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (u128)INT64_MAX : (u128)SIZE_MAX;
    return elems <= lim && elems * sizeof(float) <= lim;
}

/* The four extents of an args whose sizes and strides passed their rules. */
static void merge_extents(const attn_partials_merge_args *a, u128 ext[4])
{
    ext[0] = merge_span(a->parts, a->o_part_stride,
                        merge_span(a->rows, a->o_row_stride, (u128)a->dim));
    ext[1] = merge_span(a->parts, a->lse_part_stride, merge_span(a->rows, a->lse_row_stride, 1));
    ext[2] = merge_span(a->rows, a->o_out_stride, (u128)a->dim);
    ext[3] = a->lse_out ? merge_span(a->rows, a->lse_out_stride, 1) : 0;
}

/* attn.h's rules in their order: the one status the call must return. */
static attn_status expect_merge(const attn_partials_merge_args *a)
{
    if (!a || !a->o_parts || !a->lse_parts || !a->o)
        return ATTN_ERR_NULL_ARGUMENT;
    if (a->parts <= 0 || a->rows <= 0 || a->dim <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (a->o_part_stride < 0 || a->o_row_stride < 0 || a->lse_part_stride < 0 ||
        a->lse_row_stride < 0 || a->o_out_stride < a->dim)
        return ATTN_ERR_BAD_STRIDE;
    if (a->lse_out && (a->lse_out_stride < 0 || (a->lse_out_stride == 0 && a->rows > 1)))
        return ATTN_ERR_BAD_STRIDE;
    u128 ext[4];
    merge_extents(a, ext);
    for (int k = 0; k < 4; k++)
        if (!merge_fits(ext[k]))
            return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

static int64_t *merge_stride_field(attn_partials_merge_args *a, unsigned k, int64_t *count)
{
    switch (k % 6) {
    case 0: *count = a->parts; return &a->o_part_stride;
    case 1: *count = a->rows; return &a->o_row_stride;
    case 2: *count = a->parts; return &a->lse_part_stride;
    case 3: *count = a->rows; return &a->lse_row_stride;
    case 4: *count = a->rows; return &a->o_out_stride;
    default: *count = a->rows; return &a->lse_out_stride;
    }
}

static void merge_plant(rd *r, unsigned kind, attn_partials_merge_args *a, int *args_null)
{
    static const int64_t bad_sizes[4] = { 0, -1, INT64_MIN, -7 };
    static const int64_t neg[3] = { -1, INT64_MIN, -40 };
    static const int64_t huge[8] = { INT64_MAX, INT64_MAX / 2 + 1, (int64_t)1 << 61,
                                     ((int64_t)1 << 61) - 1, (int64_t)1 << 62,
                                     (int64_t)1 << 60, (int64_t)1 << 40, (int64_t)1 << 31 };
    int64_t *sz[3] = { &a->parts, &a->rows, &a->dim };
    int64_t count;
    switch (kind) {
    case GB_ARGS_NULL:
        *args_null = 1;
        break;
    case GB_PTR_NULL: {
        const unsigned k = pick(r, 3);
        if (k == 0)
            a->o_parts = NULL;
        else if (k == 1)
            a->lse_parts = NULL;
        else
            a->o = NULL;
        break;
    }
    case GB_SIZE:
        *sz[pick(r, 3)] = bad_sizes[pick(r, 4)];
        break;
    case GB_NEG_STRIDE:
        *merge_stride_field(a, pick(r, 6), &count) = neg[pick(r, 3)];
        break;
    case GB_OUT_SHORT: {
        const unsigned k = pick(r, 3);
        /* dim may hold an earlier plant's INT64_MIN: no dim - 1 there */
        a->o_out_stride = k == 0 ? 0 : k == 1 ? (a->dim > 0 ? a->dim - 1 : 0) : a->dim / 2;
        break;
    }
    case GB_LSE_OUT_ZERO:
        a->lse_out_stride = 0;
        break;
    case GB_HUGE_STRIDE: {
        const unsigned f = u8(r), v = u8(r);
        int64_t *s = merge_stride_field(a, f, &count);
        if (v & 8 && count > 1) {
            /* the smallest stride whose extent reaches 2^61 (bytes past
             * 2^63) or 2^61 - 1: the boundary of TOO_LARGE */
            u128 ext[4];
            const int64_t old = *s;
            *s = 0;
            merge_extents(a, ext);
            const u128 rest = ext[(f % 6) < 2 ? 0 : (f % 6) < 4 ? 1 : (f % 6) == 4 ? 2 : 3];
            const u128 target = ((u128)1 << 61) - (v & 1);
            *s = rest >= target ? old
                                : (int64_t)((target - rest + (u128)(count - 2)) / (u128)(count - 1));
        } else {
            *s = huge[v % 8];
        }
        break;
    }
    case GB_HUGE_SIZE: {
        const unsigned k = pick(r, 3), v = u8(r);
        *sz[k] = huge[v % 8];
        if (k == 2 && (v & 8))
            a->o_out_stride = a->dim;   /* past the stride rule, to the extents */
        break;
    }
    case GB_LSE_OUT_NULL: {
        static const int64_t junk[4] = { -5, INT64_MIN, INT64_MAX, 0 };
        a->lse_out = NULL;
        a->lse_out_stride = junk[pick(r, 4)];
        break;
    }
    default:
        break;
    }
}

static void print_merge(const attn_partials_merge_args *a, const unsigned bad[2], int args_null)
{
    fprintf(stderr,
            "MERGE parts=%lld rows=%lld dim=%lld o_parts=%s %lld/%lld lse_parts=%s %lld/%lld "
            "o=%s %lld lse_out=%s %lld bad=%u,%u%s\n",
            (long long)a->parts, (long long)a->rows, (long long)a->dim, a->o_parts ? "p" : "NULL",
            (long long)a->o_part_stride, (long long)a->o_row_stride,
            a->lse_parts ? "p" : "NULL", (long long)a->lse_part_stride,
            (long long)a->lse_row_stride, a->o ? "p" : "NULL", (long long)a->o_out_stride,
            a->lse_out ? "p" : "NULL", (long long)a->lse_out_stride, bad[0], bad[1],
            args_null ? " args=NULL" : "");
}

/* Strides of a partial buffer (O when tail = dim, lse when tail = 1). */
static void merge_layout(unsigned c, int64_t parts, int64_t rows, int64_t tail, int64_t *ps,
                         int64_t *rs)
{
    const int64_t pad = (c >> 4) & 3, extra = c >> 6;
    switch (c & 7) {
    case 0:
    case 1: /* part-major */
        *rs = tail + pad;
        *ps = rows * *rs + extra;
        break;
    case 2:
    case 3: /* interleaved within each row */
        *ps = tail + pad;
        *rs = parts * *ps + extra;
        break;
    case 4: /* one O_p for every part of a row */
        *ps = 0;
        *rs = tail + pad;
        break;
    case 5: /* one row for all rows of a part */
        *rs = 0;
        *ps = tail + pad;
        break;
    case 6: /* rows overlapping (stride below the row when tail > 1) */
        *rs = 1 + pad;
        *ps = rows * *rs + tail + extra;
        break;
    default: /* everything at one place */
        *ps = 0;
        *rs = 0;
        break;
    }
}

/* A successful call's outputs against a float64 merge of its inputs: per
 * row, NaN when an lse_p is NaN or +INFINITY; O 0 and lse -INFINITY when
 * every lse_p is -INFINITY; O_p and lse_p themselves (O bit for bit) when
 * one part contributes (its weight is exactly 1); otherwise within a
 * float rounding of the double result plus the double sums' error.
 * Everything outside the rows keeps the sentinel (and all of lout when
 * lse_out is NULL), and a second call writes the same bits. */
static void merge_check(const attn_partials_merge_args *a, const float *out, size_t n_out,
                        const float *lout, size_t n_lout)
{
    const int64_t P = a->parts, R = a->rows, D = a->dim;
    unsigned char *wo = calloc(n_out, 1), *wl = calloc(n_lout, 1);
    if (!wo || !wl)
        abort();
    for (int64_t i = 0; i < R; i++) {
        const float *got = out + i * a->o_out_stride;
        memset(wo + i * a->o_out_stride, 1, (size_t)D);
        float gl = 0.0f;
        if (a->lse_out) {
            gl = lout[i * a->lse_out_stride];
            wl[i * a->lse_out_stride] = 1;
        }
        double mx = -INFINITY;
        int nan = 0, nf = 0;
        int64_t pf = 0;
        for (int64_t p = 0; p < P; p++) {
            const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
            if (l != l || l == INFINITY) {
                nan = 1;
            } else if (l != -INFINITY) {
                nf++;
                pf = p;
                mx = l > mx ? l : mx;
            }
        }
        if (nan) {
            for (int64_t j = 0; j < D; j++)
                if (!isnan(got[j]))
                    FAIL("merge row %lld: an lse_p is NaN or +inf, O[%lld] = %g", (long long)i,
                         (long long)j, got[j]);
            if (a->lse_out && !isnan(gl))
                FAIL("merge row %lld: an lse_p is NaN or +inf, lse = %g", (long long)i, gl);
            continue;
        }
        if (nf == 0) {
            for (int64_t j = 0; j < D; j++)
                if (got[j] != 0.0f)
                    FAIL("merge row %lld: every part empty, O[%lld] = %g", (long long)i,
                         (long long)j, got[j]);
            if (a->lse_out && gl != -INFINITY)
                FAIL("merge row %lld: every part empty, lse = %g", (long long)i, gl);
            continue;
        }
        const float *o1 = a->o_parts + pf * a->o_part_stride + i * a->o_row_stride;
        const float l1 = a->lse_parts[pf * a->lse_part_stride + i * a->lse_row_stride];
        if (nf == 1) {
            if (memcmp(got, o1, (size_t)D * sizeof(float)))
                FAIL("merge row %lld: one contributing part (%lld), O not bitwise O_p",
                     (long long)i, (long long)pf);
            if (a->lse_out && gl != l1)
                FAIL("merge row %lld: one contributing part, lse %.9g, lse_p %.9g", (long long)i,
                     gl, l1);
            continue;
        }
        double s = 0.0;
        for (int64_t p = 0; p < P; p++) {
            const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
            if (l != -INFINITY)
                s += exp((double)l - mx);
        }
        const double lref = mx + log(s);
        const double tol_l = 0x1p-24 * fabs(lref) + 0x1p-50 * (fabs(mx) + log(s)) + 1e-300;
        if (a->lse_out && !(fabs((double)gl - lref) <= tol_l))
            FAIL("merge row %lld: lse %.9g, float64 %.17g (tolerance %.3g)", (long long)i, gl,
                 lref, tol_l);
        for (int64_t j = 0; j < D; j++) {
            double ref = 0.0, mag = 0.0;
            for (int64_t p = 0; p < P; p++) {
                const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
                if (l == -INFINITY)
                    continue;
                const double c = exp((double)l - mx) / s;
                const double v = a->o_parts[p * a->o_part_stride + i * a->o_row_stride + j];
                ref += c * v;
                mag += c * fabs(v);
            }
            const double tol = 0x1p-24 * fabs(ref) + 0x1p-48 * mag + 0x1p-149;
            if (!(fabs((double)got[j] - ref) <= tol))
                FAIL("merge row %lld col %lld: %.9g, float64 %.17g (tolerance %.3g)",
                     (long long)i, (long long)j, got[j], ref, tol);
        }
    }
    for (size_t x = 0; x < n_out; x++)
        if (!wo[x] && fbits(out[x]) != SENT)
            FAIL("merge: O element %zu outside the rows was written", x);
    for (size_t x = 0; x < n_lout; x++)
        if (!wl[x] && fbits(lout[x]) != SENT)
            FAIL("merge: lse element %zu outside the rows was written", x);
    /* The same call again into fresh buffers: the same bits everywhere. */
    float *out2 = xmalloc(n_out * sizeof(float)), *lout2 = xmalloc(n_lout * sizeof(float));
    const float sent = sentinel();
    for (size_t x = 0; x < n_out; x++)
        out2[x] = sent;
    for (size_t x = 0; x < n_lout; x++)
        lout2[x] = sent;
    attn_partials_merge_args a2 = *a;
    a2.o = out2;
    a2.lse_out = a->lse_out ? lout2 : NULL;
    if (attn_partials_merge(&a2) != ATTN_OK)
        FAIL("merge: the second call failed");
    if (memcmp(out, out2, n_out * sizeof(float)) || memcmp(lout, lout2, n_lout * sizeof(float)))
        FAIL("merge: a second call gave other bits");
    free(out2);
    free(lout2);
    free(wo);
    free(wl);
}

static void fuzz_merge(rd *r)
{
    static const double lse_mag[8] = { 1.0, 5.0, 30.0, 100.0, 1e4, 1e30, 3.4e38, 0.0 };
    static const double o_mag[4] = { 1.0, 1e-3, 1e30, 1e-40 };
    const unsigned b1 = u8(r);
    unsigned bad[2] = { b1 ? 1 + (b1 - 1) % (GB_COUNT - 1) : GB_NONE, 0 };
    if (b1 >= 128)
        bad[1] = 1 + u8(r) % (GB_COUNT - 1);
    const int64_t parts = 1 + pick(r, 6), rows = 1 + pick(r, 12);
    const unsigned dc = u8(r);
    const int64_t dim = dc >= 240 ? 250 + (dc - 240) : 1 + dc % 40;
    int64_t ops, ors, lps, lrs;
    merge_layout(u8(r), parts, rows, dim, &ops, &ors);
    merge_layout(u8(r), parts, rows, 1, &lps, &lrs);
    const unsigned oc = u8(r);
    const int64_t oos = dim + (oc & 3);
    const unsigned lo_kind = (oc >> 2) & 3;
    const int64_t los = lo_kind == 1 ? 1 : lo_kind == 2 ? 2 + ((oc >> 4) & 3) : rows == 1 ? 0 : 1;
    const unsigned vc = u8(r), sc = u8(r);
    prng g = { (uint64_t)u32(r) * 0x9e3779b97f4a7c15ull + 0x5eed };

    /* Buffers of the valid problem: inputs NaN wherever nothing that is
     * read lands, outputs the sentinel with a tail. */
    attn_partials_merge_args a = {
        .parts = parts, .rows = rows, .dim = dim,
        .o_part_stride = ops, .o_row_stride = ors,
        .lse_part_stride = lps, .lse_row_stride = lrs,
        .o_out_stride = oos, .lse_out_stride = los,
    };
    float lse_dummy;
    a.lse_out = lo_kind ? &lse_dummy : NULL;   /* for the extents only */
    u128 ext[4];
    merge_extents(&a, ext);
    const size_t n_oin = (size_t)ext[0], n_lin = (size_t)ext[1];
    const size_t n_out = (size_t)ext[2] + TAILN, n_lout = (size_t)ext[3] + TAILN;
    float *oin = xmalloc(n_oin * sizeof(float)), *lin = xmalloc(n_lin * sizeof(float));
    float *out = xmalloc(n_out * sizeof(float)), *lout = xmalloc(n_lout * sizeof(float));
    for (size_t x = 0; x < n_oin; x++)
        oin[x] = NAN;
    for (size_t x = 0; x < n_lin; x++)
        lin[x] = NAN;
    const double lm = lse_mag[vc & 7], om = o_mag[(vc >> 3) & 3];
    const double p_ninf = (double)(sc & 7) / 8.0;
    const double p_nan = (sc & 8) ? 1.0 / 32.0 : 0.0, p_pinf = (sc & 16) ? 1.0 / 32.0 : 0.0;
    const int empty_rows = (sc >> 5) & 3;   /* every (4 - k)-th row all -inf; 0: none */
    for (int64_t p = 0; p < parts; p++)
        for (int64_t i = 0; i < rows; i++) {
            const double u = pr_unit(&g);
            float v;
            if ((empty_rows && i % (4 - empty_rows) == 0) || u < p_ninf)
                v = -INFINITY;
            else if (u < p_ninf + p_nan)
                v = NAN;
            else if (u < p_ninf + p_nan + p_pinf)
                v = INFINITY;
            else
                v = (vc & 0x40) && pr_unit(&g) < 0.25 ? -0.0f : pr_val(&g, lm);
            lin[p * lps + i * lrs] = v;
        }
    /* O_p rows of the parts that are read (lse_p as it ended up, views
     * may share it) get finite values; -0 and denormals with vc bit 7. */
    for (int64_t p = 0; p < parts; p++)
        for (int64_t i = 0; i < rows; i++) {
            if (lin[p * lps + i * lrs] == -INFINITY)
                continue;
            float *row = oin + p * ops + i * ors;
            for (int64_t j = 0; j < dim; j++)
                row[j] = (vc & 0x80) && pr_unit(&g) < 0.1 ? -0.0f : pr_val(&g, om);
        }
    float *oin_copy = xmalloc(n_oin * sizeof(float)), *lin_copy = xmalloc(n_lin * sizeof(float));
    memcpy(oin_copy, oin, n_oin * sizeof(float));
    memcpy(lin_copy, lin, n_lin * sizeof(float));
    const float sent = sentinel();
    for (size_t x = 0; x < n_out; x++)
        out[x] = sent;
    for (size_t x = 0; x < n_lout; x++)
        lout[x] = sent;
    a.o_parts = oin;
    a.lse_parts = lin;
    a.o = out;
    a.lse_out = lo_kind ? lout : NULL;

    int args_null = 0;
    merge_plant(r, bad[0], &a, &args_null);
    merge_plant(r, bad[1], &a, &args_null);
    const attn_status want = expect_merge(args_null ? NULL : &a);
    if (verbose)
        print_merge(&a, bad, args_null);
    int skip = 0;
    if (want == ATTN_OK) {
        /* sizes or strides a plant changed but the rules accept: only
         * what fits the buffers and a bounded amount of work is called */
        u128 e2[4];
        merge_extents(&a, e2);
        skip = e2[0] > n_oin || e2[1] > n_lin || e2[2] > n_out - TAILN ||
               (a.lse_out && e2[3] > n_lout - TAILN) ||
               (u128)(uint64_t)a.parts * (uint64_t)a.rows * (uint64_t)a.dim > ((u128)1 << 22);
    }
    if (skip) {
        counts[N_MERGE_SKIPPED]++;
    } else {
        const attn_status st = attn_partials_merge(args_null ? NULL : &a);
        expect e = { want == ATTN_OK ? 0u : BIT(want), 0u };
        check_status("attn_partials_merge", st, e);
        if (st != want)
            FAIL("attn_partials_merge returned %s, the rules say %s", st_name(st),
                 st_name(want));
        if (memcmp(oin, oin_copy, n_oin * sizeof(float)) ||
            memcmp(lin, lin_copy, n_lin * sizeof(float)))
            FAIL("attn_partials_merge changed its inputs");
        if (st != ATTN_OK) {
            for (size_t x = 0; x < n_out; x++)
                if (fbits(out[x]) != SENT)
                    FAIL("attn_partials_merge: %s, but O element %zu was written", st_name(st), x);
            for (size_t x = 0; x < n_lout; x++)
                if (fbits(lout[x]) != SENT)
                    FAIL("attn_partials_merge: %s, but lse element %zu was written", st_name(st),
                         x);
            counts[N_MERGE_ERROR]++;
        } else {
            merge_check(&a, out, n_out, lout, n_lout);
            counts[N_MERGE_CHECKED]++;
        }
    }
    free(oin);
    free(lin);
    free(out);
    free(lout);
    free(oin_copy);
    free(lin_copy);
}

/* ------------------------------------------------------- attn_kv_append */

/* Bits 6 and 0 of the first byte: one attn_kv_append call.  After the
 * kind byte: the planted fields (AB_*; >= 128 plants a second), sizes,
 * storage types and paging, lengths, the new rows' views and values, the
 * desc's unread fields.  The expected cache is written here: the initial
 * bytes, then every new row converted with attn_dtype_encode (F32:
 * copied) at its token's place (through the table when paged). */
enum { AB_NONE, AB_NULL_TOP, AB_PTR_NULL, AB_TABLE, AB_T, AB_LENGTH, AB_TABLE_RANGE, AB_TYPE,
       AB_PAGING, AB_NEW_VIEW, AB_CACHE_VIEW, AB_SIZE, AB_COUNT_ };

static expect expect_append(const attn_sdpa_desc *d, const attn_kv_append_args *a)
{
    expect e = { 0, 0 };
    expect_kv_options(&e, d);
    if (d->batch <= 0 || d->kv_heads <= 0 || d->kv_len <= 0 || d->qk_dim <= 0 || d->v_dim <= 0) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        e.maybe = ~0u & ~1u;
        return e;
    }
    if (d->kv_len > INT32_MAX || d->qk_dim > INT32_MAX || d->v_dim > INT32_MAX)
        e.must |= BIT(ATTN_ERR_TOO_LARGE);
    expect_kv_views(&e, d);
    const int paged = d->kv_block_size > 0;
    if (!a->k_cache || !a->v_cache || !a->kv_lens || !a->k_new || !a->v_new ||
        (paged && !a->block_table))
        e.must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    if (!paged && a->block_table)
        e.must |= BIT(ATTN_ERR_ARGUMENT_MISMATCH);
    if (a->t < 1) {
        e.must |= BIT(ATTN_ERR_BAD_SIZE);
        /* the new rows' views and new_lens in [0, t] cannot be judged */
        e.maybe |= BIT(ATTN_ERR_BAD_STRIDE) | BIT(ATTN_ERR_STRIDES_UNSET) |
                   BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_BAD_LENGTH) |
                   BIT(ATTN_ERR_BAD_BLOCK_TABLE);
        return e;
    }
    if (a->t > INT32_MAX)
        e.maybe |= BIT(ATTN_ERR_TOO_LARGE);
    expect_view(&e, &a->k_new_view, d->batch, d->kv_heads, a->t, d->qk_dim, VK_INPUT);
    expect_view(&e, &a->v_new_view, d->batch, d->kv_heads, a->t, d->v_dim, VK_INPUT);
    if (!a->kv_lens || d->batch > 8) {
        e.maybe |= BIT(ATTN_ERR_BAD_LENGTH) | BIT(ATTN_ERR_BAD_BLOCK_TABLE);
        return e;
    }
    int lens_ok = 1;
    for (int64_t b = 0; b < d->batch; b++) {
        const int64_t len = a->kv_lens[b], nl = a->new_lens ? a->new_lens[b] : a->t;
        if (len < 0 || nl < 0 || nl > a->t || len + nl > d->kv_len) {
            e.must |= BIT(ATTN_ERR_BAD_LENGTH);
            lens_ok = 0;
        }
    }
    if (paged && a->block_table && !lens_ok)
        e.maybe |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
    if (paged && a->block_table && lens_ok && d->kv_max_blocks > 0) {
        const int64_t bs = d->kv_block_size;
        for (int64_t b = 0; b < d->batch; b++) {
            const int64_t len = a->kv_lens[b], nl = a->new_lens ? a->new_lens[b] : a->t;
            for (int64_t j = len; j < len + nl; j++) {
                const int32_t id = a->block_table[b * d->kv_max_blocks + j / bs];
                if (id < 0 || id >= d->kv_num_blocks)
                    e.must |= BIT(ATTN_ERR_BAD_BLOCK_TABLE);
            }
        }
    }
    return e;
}

/* Store n floats as type ty (the model of one appended row). */
static void put_row(attn_dtype ty, void *dst, const float *src, int64_t n)
{
    if (ty == ATTN_DTYPE_F32)
        memcpy(dst, src, (size_t)n * sizeof(float));
    else if (attn_dtype_encode(ty, src, dst, n) != ATTN_OK)
        FAIL("attn_dtype_encode failed");
}

static void fuzz_kv_append(rd *r)
{
    unsigned bad[2] = { AB_NONE, AB_NONE };
    const unsigned bb = u8(r);
    if (bb) {
        bad[0] = 1 + (bb - 1) % (AB_COUNT_ - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, AB_COUNT_ - 1);
    }
    static const int64_t bss[4] = { 1, 2, 3, 16 };
    const int64_t B = 1 + pick(r, 3), Hkv = 1 + pick(r, 2), dk = 1 + pick(r, 6),
                  dv = 1 + pick(r, 6), m = 1 + pick(r, 24), t = 1 + pick(r, 5);
    const unsigned x = u8(r), y = u8(r);
    const attn_dtype kt = (attn_dtype)(x % 3), vt = (attn_dtype)(x / 3 % 3);
    const int paged = (x / 9) % 4 != 0;
    const int64_t bs = bss[y & 3], per = (m + bs - 1) / bs;
    const int64_t mb = per + (int64_t)((y >> 2) & 3), nb = B * per + (int64_t)((y >> 4) & 3);

    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = B;
    d.kv_heads = Hkv;
    d.kv_len = m;
    d.qk_dim = dk;
    d.v_dim = dv;
    d.k_type = kt;
    d.v_type = vt;
    const int64_t szc[3] = { paged ? nb : B, Hkv, paged ? bs : m }, szn[3] = { B, Hkv, t };
    d.k = gen_view(r, szc, dk);
    d.v = gen_view(r, szc, dv);
    if (paged) {
        d.kv_block_size = bs;
        d.kv_num_blocks = nb;
        d.kv_max_blocks = mb;
    }
    if (y & 0x40) {
        /* the fields attn_kv_append does not read: anything */
        d.q_heads = -3;
        d.q_len = 0;
        d.scale = INFINITY;
        d.threads = -1;
        d.mask_mode = (attn_mask_mode)77;
        d.use_global_k = 1;
        d.block_size = 5;
        d.dropout_p = NAN;
        d.reserved[0] = 1;
        d.o = (attn_view){ -1, -1, -1 };
    }

    /* lengths: each sequence holds len tokens, gets nl more */
    int32_t kv_lens[8], new_lens[8];
    const int use_new = !!(y & 0x80);
    for (int64_t b = 0; b < B; b++) {
        kv_lens[b] = (int32_t)pick(r, (unsigned)m + 1);
        const int64_t room = m - kv_lens[b];
        if (!use_new && room < t)
            kv_lens[b] = (int32_t)(m > t ? m - t - (int64_t)pick(r, (unsigned)(m - t + 1)) : 0);
        const int64_t room2 = m - kv_lens[b];
        new_lens[b] = (int32_t)pick(r, (unsigned)((room2 < t ? room2 : t) + 1));
    }
    int ok_t = 1; /* every sequence has room for t rows when new_lens is NULL */
    for (int64_t b = 0; b < B; b++)
        if (kv_lens[b] + t > m)
            ok_t = 0;
    const int32_t *nlp = use_new || !ok_t ? new_lens : NULL;

    attn_kv_append_args a;
    memset(&a, 0, sizeof a);
    a.t = t;
    a.k_new_view = gen_view(r, szn, dk);
    a.v_new_view = gen_view(r, szn, dv);
    a.kv_lens = kv_lens;
    a.new_lens = nlp;

    /* buffers: the caches (exact extents), the table, the new rows */
    const int64_t eck = view_extent(&d.k, szc, dk), ecv = view_extent(&d.v, szc, dv);
    const int64_t enk = view_extent(&a.k_new_view, szn, dk), env = view_extent(&a.v_new_view, szn, dv);
    if (eck < 0 || ecv < 0 || enk < 0 || env < 0)
        return; /* (cannot happen: small sizes) */
    const size_t esk = kt == ATTN_DTYPE_F32 ? 4 : 2, esv = vt == ATTN_DTYPE_F32 ? 4 : 2;
    const size_t ck_bytes = (size_t)eck * esk, cv_bytes = (size_t)ecv * esv;
    uint8_t *kc = xmalloc(ck_bytes), *vc = xmalloc(cv_bytes);
    prng g = { u32(r) };
    for (size_t i = 0; i < ck_bytes; i++)
        kc[i] = (uint8_t)pr_next(&g);
    for (size_t i = 0; i < cv_bytes; i++)
        vc[i] = (uint8_t)pr_next(&g);
    int32_t *table = NULL;
    if (paged) {
        /* distinct blocks in random order for every block a sequence's
         * tokens [0, len + nl) reach, garbage past them */
        int32_t *perm = xmalloc((size_t)nb * sizeof(int32_t));
        for (int64_t i = 0; i < nb; i++)
            perm[i] = (int32_t)i;
        for (int64_t i = nb - 1; i > 0; i--) {
            const int64_t k = (int64_t)(pr_next(&g) % (uint64_t)(i + 1));
            const int32_t tmp = perm[i];
            perm[i] = perm[k];
            perm[k] = tmp;
        }
        table = xmalloc((size_t)(B * mb) * sizeof(int32_t));
        int64_t used = 0;
        for (int64_t b = 0; b < B; b++) {
            const int64_t end = kv_lens[b] + (nlp ? nlp[b] : t);
            for (int64_t J = 0; J < mb; J++) {
                const uint64_t z = pr_next(&g);
                table[b * mb + J] = J < (end + bs - 1) / bs ? perm[used++]
                                    : (z & 3) == 0 ? -1 : (z & 3) == 1 ? (int32_t)nb
                                    : (z & 3) == 2 ? perm[(z >> 8) % (uint64_t)nb]
                                    : (int32_t)(z >> 32);
            }
        }
        free(perm);
    }
    /* the new rows: values of decoded magnitude (past F16's range, F16
     * and F32 denormals), some Inf and NaN; NaN in gaps and unread rows */
    static const double mags[4] = { 1.0, 1e5, 1e-6, 1e-40 };
    const unsigned vo = u8(r);
    const double mag = mags[vo & 3];
    const int specials = !!(vo & 4);
    float *kn = xmalloc((size_t)enk * sizeof(float)), *vn = xmalloc((size_t)env * sizeof(float));
    for (int64_t i = 0; i < enk; i++)
        kn[i] = NAN;
    for (int64_t i = 0; i < env; i++)
        vn[i] = NAN;
    for (int tn = 0; tn < 2; tn++) {
        float *buf = tn ? vn : kn;
        const attn_view *nv = tn ? &a.v_new_view : &a.k_new_view;
        const int64_t D = tn ? dv : dk;
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t rr = 0; rr < (nlp ? nlp[b] : t); rr++)
                    for (int64_t c = 0; c < D; c++) {
                        float v = pr_val(&g, mag);
                        if (specials) {
                            const uint64_t z = pr_next(&g) % 16;
                            v = z == 0 ? INFINITY : z == 1 ? -NAN : z == 2 ? 65520.0f : z == 3 ? -0.0f : v;
                        }
                        buf[b * nv->batch + h * nv->head + rr * nv->seq + c] = v;
                    }
    }
    a.k_cache = kc;
    a.v_cache = vc;
    a.block_table = table;
    a.k_new = kn;
    a.v_new = vn;

    /* the model: expected caches and lengths (from the valid arguments) */
    uint8_t *ek = xmalloc(ck_bytes), *ev = xmalloc(cv_bytes);
    memcpy(ek, kc, ck_bytes);
    memcpy(ev, vc, cv_bytes);
    int32_t want_lens[8];
    for (int64_t b = 0; b < B; b++) {
        const int64_t nl = nlp ? nlp[b] : t;
        want_lens[b] = kv_lens[b] + (int32_t)nl;
        for (int tn = 0; tn < 2; tn++) {
            const attn_view *cv = tn ? &d.v : &d.k, *nv = tn ? &a.v_new_view : &a.k_new_view;
            const attn_dtype ty = tn ? vt : kt;
            const size_t es = tn ? esv : esk;
            uint8_t *cache = tn ? ev : ek;
            const float *src = tn ? vn : kn;
            const int64_t D = tn ? dv : dk;
            for (int64_t h = 0; h < Hkv; h++)
                for (int64_t rr = 0; rr < nl; rr++) {
                    const int64_t j = kv_lens[b] + rr;
                    const int64_t off = paged ? table[b * mb + j / bs] * cv->batch + h * cv->head +
                                                    (j % bs) * cv->seq
                                              : b * cv->batch + h * cv->head + j * cv->seq;
                    put_row(ty, cache + (size_t)off * es,
                            src + b * nv->batch + h * nv->head + rr * nv->seq, D);
                }
        }
    }

    /* planted invalid fields */
    int null_top = 0;
    static const int32_t junk_table[4];
    for (int k = 0; k < 2; k++) {
        switch (bad[k]) {
        case AB_NULL_TOP: null_top = 1 + (int)pick(r, 2); break;
        case AB_PTR_NULL: {
            void **p[5] = { &a.k_cache, &a.v_cache, (void **)&a.kv_lens, (void **)&a.k_new,
                            (void **)&a.v_new };
            *p[pick(r, 5)] = NULL;
            break;
        }
        case AB_TABLE:
            if (paged) a.block_table = NULL;
            else a.block_table = junk_table;
            break;
        case AB_T: a.t = (u8(r) & 1) ? 0 : -1 - (int64_t)u8(r); break;
        case AB_LENGTH: {
            const unsigned b = pick(r, (unsigned)B);
            switch (pick(r, 4)) {
            case 0: kv_lens[b] = (u8(r) & 1) ? -1 : INT32_MIN; break;
            case 1: kv_lens[b] = (int32_t)m - new_lens[b] + 1 + (int32_t)pick(r, 3);
                    a.new_lens = new_lens; break;
            case 2: new_lens[b] = -1; a.new_lens = new_lens; break;
            default: new_lens[b] = (int32_t)t + 1 + (int32_t)pick(r, 3); a.new_lens = new_lens; break;
            }
            break;
        }
        case AB_TABLE_RANGE:
            if (paged) {
                const int64_t b = pick(r, (unsigned)B);
                const int64_t nl = a.new_lens ? a.new_lens[b] : t;
                if (nl > 0 && nl <= t && kv_lens[b] >= 0 && kv_lens[b] + nl <= m) {
                    const int64_t j = kv_lens[b] + pick(r, (unsigned)nl);
                    static const int32_t bid[4] = { -1, INT32_MIN, INT32_MAX, 0 };
                    const unsigned w = pick(r, 4);
                    table[b * mb + j / bs] = w == 3 ? (int32_t)nb : bid[w];
                }
            }
            break;
        case AB_TYPE: {
            static const int bt[3] = { 3, -1, 100 };
            if (u8(r) & 1) d.k_type = (attn_dtype)bt[pick(r, 3)];
            else d.v_type = (attn_dtype)bt[pick(r, 3)];
            break;
        }
        case AB_PAGING:
            switch (pick(r, 5)) {
            case 0: d.kv_block_size = -1; break;
            case 1: if (paged) d.kv_num_blocks = 0; else d.kv_num_blocks = 1 + pick(r, 4); break;
            case 2: if (paged) d.kv_max_blocks = -1; else d.kv_max_blocks = 1; break;
            case 3: if (paged) d.kv_max_blocks = (m - 1) / bs ? (m - 1) / bs : -1;
                    else d.kv_block_size = 4; /* paged with no blocks */
                    break;
            default: if (paged) d.kv_num_blocks = (int64_t)INT32_MAX + 1; else d.kv_max_blocks = 3; break;
            }
            break;
        case AB_NEW_VIEW: {
            attn_view *v = (u8(r) & 1) ? &a.k_new_view : &a.v_new_view;
            switch (pick(r, 4)) {
            case 0: v->seq = (v == &a.k_new_view ? dk : dv) - 1; break;
            case 1: v->head = -1; break;
            case 2: v->batch = ATTN_STRIDE_UNSET; break;
            default: v->seq = 0; if (t == 1) v->seq = -5; break;
            }
            break;
        }
        case AB_CACHE_VIEW: {
            attn_view *v = (u8(r) & 1) ? &d.k : &d.v;
            switch (pick(r, 3)) {
            case 0: v->seq = (v == &d.k ? dk : dv) - 1; break;
            case 1: v->batch = -7; break;
            default: v->head = ATTN_STRIDE_UNSET; break;
            }
            break;
        }
        case AB_SIZE: {
            int64_t *s[5] = { &d.batch, &d.kv_heads, &d.kv_len, &d.qk_dim, &d.v_dim };
            const unsigned w = pick(r, 5);
            *s[w] = (u8(r) & 1) ? 0 : w >= 2 ? (int64_t)INT32_MAX + 1 : -2;
            break;
        }
        default: break;
        }
    }
    if (verbose)
        fprintf(stderr, "KV_APPEND B=%lld Hkv=%lld m=%lld dk=%lld dv=%lld t=%lld kt=%d vt=%d "
                "paged=%d bs=%lld nb=%lld mb=%lld new_lens=%d junk=%d bad=%u,%u null_top=%d\n",
                (long long)d.batch, (long long)d.kv_heads, (long long)d.kv_len,
                (long long)d.qk_dim, (long long)d.v_dim, (long long)a.t, (int)d.k_type,
                (int)d.v_type, paged, (long long)d.kv_block_size, (long long)d.kv_num_blocks,
                (long long)d.kv_max_blocks, a.new_lens != NULL, !!(y & 0x40), bad[0], bad[1],
                null_top);

    int32_t lens_in[8];
    memcpy(lens_in, kv_lens, sizeof lens_in);
    uint8_t *kc0 = xmalloc(ck_bytes), *vc0 = xmalloc(cv_bytes);
    memcpy(kc0, kc, ck_bytes);
    memcpy(vc0, vc, cv_bytes);
    float *kn0 = xmalloc((size_t)enk * sizeof(float)), *vn0 = xmalloc((size_t)env * sizeof(float));
    memcpy(kn0, kn, (size_t)enk * sizeof(float));
    memcpy(vn0, vn, (size_t)env * sizeof(float));

    attn_status st;
    expect e;
    if (null_top) {
        st = null_top == 1 ? attn_kv_append(NULL, &a) : attn_kv_append(&d, NULL);
        e = (expect){ BIT(ATTN_ERR_NULL_ARGUMENT), 0 };
    } else {
        e = expect_append(&d, &a);
        st = attn_kv_append(&d, &a);
    }
    check_status("attn_kv_append", st, e);
    if (memcmp(kn0, kn, (size_t)enk * sizeof(float)) || memcmp(vn0, vn, (size_t)env * sizeof(float)))
        FAIL("attn_kv_append changed k_new or v_new");
    if (st != ATTN_OK) {
        if (memcmp(kc0, kc, ck_bytes) || memcmp(vc0, vc, cv_bytes))
            FAIL("attn_kv_append: %s, but the cache was written", st_name(st));
        if (memcmp(lens_in, kv_lens, sizeof lens_in))
            FAIL("attn_kv_append: %s, but kv_lens changed", st_name(st));
        counts[N_APPEND_ERROR]++;
    } else {
        for (size_t i = 0; i < ck_bytes; i++)
            if (kc[i] != ek[i])
                FAIL("attn_kv_append: K cache byte %zu is 0x%02x, expected 0x%02x", i, kc[i], ek[i]);
        for (size_t i = 0; i < cv_bytes; i++)
            if (vc[i] != ev[i])
                FAIL("attn_kv_append: V cache byte %zu is 0x%02x, expected 0x%02x", i, vc[i], ev[i]);
        for (int64_t b = 0; b < B; b++)
            if (kv_lens[b] != want_lens[b])
                FAIL("attn_kv_append: kv_lens[%lld] = %d, expected %d", (long long)b,
                     kv_lens[b], want_lens[b]);
        counts[N_APPEND_CHECKED]++;
    }
    free(kc);
    free(vc);
    free(kc0);
    free(vc0);
    free(ek);
    free(ev);
    free(kn);
    free(vn);
    free(kn0);
    free(vn0);
    free(table);
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
