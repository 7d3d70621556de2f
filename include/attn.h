/*
 * attn.h -- transformer attention on CPUs.
 *
 * This header is the manual: read it top to bottom.
 *
 * attn computes scaled dot-product attention (SDPA), batched over batch and
 * heads, on head-strided fp32 tensors: as cblas_sgemm calls of the
 * configured BLAS or on attn's own register-blocked tile engine (chosen per
 * plan, see attn_engine), with OpenMP across (batch, head, query block) and
 * a vectorized, masked online softmax in between.  Around that core:
 * - the SDPA backward (dQ, dK, dV, dBias) and dropout with a counter-based
 *   generator, for training;
 * - sparse attention (global tokens, block-sparse layouts and their
 *   builders);
 * - decoding: a streaming path for few queries, K/V stored as F16 or BF16,
 *   a paged KV cache with an append call, and the merge of partial results
 *   computed over shards of the keys;
 * - linear attention, with its recurrent state and backward;
 * - a multi-head attention layer (nn.MultiheadAttention's), forward and
 *   backward;
 * - what the library runs on: the BLAS loaded and the engine a plan takes.
 * Every computation is a plan (made once, executed many times) plus a
 * one-shot call that wraps it.  The formulas of SDPA:
 *
 *   S = scale * Q K^T          (scale defaults to 1/sqrt(dk))
 *   S += bias                  (optional additive bias)
 *   hide invisible positions   (window/causal, key/query lengths, element mask)
 *   P = softmax(S) per row     (over the visible positions only)
 *   O = P V
 *
 * Conventions
 * - Every function returns an attn_status.  On any error nothing is written
 *   to any output (O, P, logsumexp) and nothing leaks.  attn never aborts,
 *   asserts or prints because of user input.
 * - No global mutable state: every call is thread-safe; one plan may be
 *   executed concurrently from several threads (each with its own workspace
 *   or with workspace == NULL), also from inside the caller's OpenMP region.
 * - Results are bitwise identical for any number of threads.
 * - All sizes and strides are int64_t and counted in elements, not bytes.
 * - ABI (1.0): every struct a caller fills has room to grow -- a reserved
 *   tail that must be zero -- and an _init function that sets its
 *   defaults; initialize with it (or with `= {0}` where the defaults are
 *   all zero), never field by field from uninitialized memory.  A nonzero
 *   reserved field is ATTN_ERR_BAD_OPTION.  Fields added in a later 1.x
 *   take reserved slots, so a program built against this header keeps
 *   working with any later 1.x library (docs/API.md says what 1.0
 *   promises).
 */
#ifndef ATTN_H
#define ATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && !defined(ATTN_STATIC)
#  ifdef ATTN_BUILDING
#    define ATTN_API __declspec(dllexport)
#  else
#    define ATTN_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define ATTN_API __attribute__((visibility("default")))
#else
#  define ATTN_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define ATTN_VERSION_MAJOR 1
#define ATTN_VERSION_MINOR 4
#define ATTN_VERSION_PATCH 11
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define ATTN_VERSION (ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + \
                      ATTN_VERSION_PATCH)

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum attn_status {
    ATTN_OK = 0,
    ATTN_ERR_NULL_ARGUMENT,      /* a required pointer is NULL */
    ATTN_ERR_BAD_SIZE,           /* a size (B, Hq, Hkv, n, m, dk, dv) is <= 0 */
    ATTN_ERR_TOO_LARGE,          /* a size or stride exceeds what the BLAS
                                    takes (INT32_MAX), or a count or byte
                                    count exceeds 2^63 - 1 or SIZE_MAX */
    ATTN_ERR_HEAD_RATIO,         /* Hq is not a multiple of Hkv */
    ATTN_ERR_BAD_STRIDE,         /* a stride is negative, zero where no
                                    broadcast is allowed, a row stride is
                                    shorter than its row, or an output view
                                    is not nested (see Tensor views) */
    ATTN_ERR_STRIDES_UNSET,      /* a tensor in use has any of its strides
                                    left at ATTN_STRIDE_UNSET (e.g. a mask
                                    or bias enabled without strides) */
    ATTN_ERR_BAD_SCALE,          /* scale is infinite (NaN means default) */
    ATTN_ERR_BAD_OPTION,         /* an enum field (alignment, mask polarity,
                                    weights mode, feature map, engine,
                                    k_type / v_type) holds an unknown
                                    value; dropout_p is outside [0, 1] or
                                    NaN; block_size is not 0 or a power of
                                    two in [16, 256]; a paging field is
                                    set without paging (kv_block_size 0)
                                    or kv_block_size is negative; linear
                                    attention's eps is negative or
                                    infinite; options do not go together
                                    (see attn_mha_plan_create and
                                    "Decoding and the KV cache"); or a
                                    reserved field is not zero */
    ATTN_ERR_BAD_THREADS,        /* threads < 0 or > 1024 */
    ATTN_ERR_BAD_LENGTH,         /* kv_lens[b] not in [0, m] or q_lens[b]
                                    not in [0, n] (with use_positions:
                                    negative) */
    ATTN_ERR_ARGUMENT_MISMATCH,  /* execute got a pointer for something the
                                    plan does not use (or the reverse) */
    ATTN_ERR_WORKSPACE_TOO_SMALL,/* caller workspace smaller than the size
                                    reported by the plan's workspace_size
                                    function */
    ATTN_ERR_WORKSPACE_ALIGNMENT,/* caller workspace not 64-byte aligned */
    ATTN_ERR_OUT_OF_MEMORY,      /* an allocation failed */
    ATTN_ERR_BAD_BLOCK_TABLE,    /* a paged KV cache's block table names a
                                    block outside [0, kv_num_blocks), or an
                                    append would pass the table's end */
    ATTN_ERR_UNSUPPORTED_TYPE,   /* an element type (q_type, o_type, ...)
                                    this call does not take (see "Element
                                    types of the computation"); never a
                                    silent conversion */
    ATTN_ERR_COMM,               /* a communication call failed (attn_mpi:
                                    an MPI error, returned on every rank
                                    that saw it; 1.3) */
    ATTN_ERR_DESC_MISMATCH       /* the ranks of a communicator were given
                                    different problems (attn_mpi: the
                                    whole-problem descs or the lengths
                                    differ; returned on every rank; 1.3) */
} attn_status;

/* A static English description of the status ("unknown status" for values
 * outside the enum).  Never NULL. */
ATTN_API const char *attn_status_str(attn_status status);

/* The library's version as "MAJOR.MINOR.PATCH" (the run-time twin of the
 * ATTN_VERSION_* macros).  Never NULL. */
ATTN_API const char *attn_version(void);

/* ------------------------------------------------------------------------ */
/* Tensor views                                                              */
/* ------------------------------------------------------------------------ */

/*
 * A tensor is a pointer plus a view of a 4-D fp32 array
 * [batch][head][seq][dim]: element strides for batch, head and seq; the dim
 * stride is always 1.  A (b, h) slice is a row-major matrix whose leading
 * dimension is the seq stride, so BHSD, BSHD, packed QKV and KV-cache slices
 * are all views of the same form and are never copied:
 *
 *   BHSD  [B][H][S][D]:  {batch = H*S*D, head = S*D, seq = D}
 *   BSHD  [B][S][H][D]:  {batch = S*H*D, head = D,   seq = H*D}
 *   packed QKV [B][S][3][H][D] (q at +0, k at +H*D, v at +2*H*D):
 *                        {batch = 3*S*H*D, head = D, seq = 3*H*D}
 *
 * Rules checked at plan time (ATTN_ERR_BAD_STRIDE otherwise):
 * - strides are >= 0; a stride may be 0 only for a dimension of size 1,
 *   except where a field says "broadcast";
 * - the seq stride of Q, K, V, O is >= that tensor's dim and of P >= m,
 *   even when that length is 1 (it is the BLAS leading dimension); that
 *   of the element mask and of the bias is 0 (broadcast over the rows) or
 *   >= m, since they are read a row at a time like P; the
 *   logsumexp is no matrix, so its seq stride follows the first rule only
 *   (0 is fine when n == 1);
 * - output views (O, P, logsumexp) are nested: take the dimensions of size
 *   > 1 in order of increasing stride; each stride must be at least the
 *   extent of everything inside it, starting from the row (dv for O, m for
 *   P, 1 for the logsumexp) and adding (size - 1) * stride per dimension.
 *   BHSD, BSHD and any other permutation with gaps pass; this is sufficient
 *   for no two elements to share an address, but not necessary: views that
 *   interleave without overlapping (head stride 2, seq stride 3 with rows
 *   of 1: rows at {0, 2, 4} and {3, 5, 7}) are rejected too.
 * Input views may overlap (several heads or batches reading the same
 * memory is fine).  Outputs must not overlap inputs or each other (not
 * checked).
 * Products of sizes that attn forms (rows of a GQA group, work items,
 * workspace bytes) must stay below 2^63 and SIZE_MAX; with overlapping
 * input views they can exceed it although every view fits, and the plan
 * then returns ATTN_ERR_TOO_LARGE.
 */
typedef struct attn_view {
    int64_t batch;
    int64_t head;
    int64_t seq;
} attn_view;

/* The value attn_sdpa_desc_init gives every view: a tensor in use whose
 * strides are still unset is an error (ATTN_ERR_STRIDES_UNSET). */
#define ATTN_STRIDE_UNSET INT64_MIN

/* Contiguous [B][H][S][D]. */
static inline attn_view attn_view_bhsd(int64_t heads, int64_t seq, int64_t dim)
{
    attn_view v = { heads * seq * dim, seq * dim, dim };
    return v;
}

/* Contiguous [B][S][H][D] (what the Q/K/V projections produce). */
static inline attn_view attn_view_bshd(int64_t heads, int64_t seq, int64_t dim)
{
    attn_view v = { seq * heads * dim, dim, heads * dim };
    return v;
}

/* ------------------------------------------------------------------------ */
/* SDPA description                                                          */
/* ------------------------------------------------------------------------ */

/* Where the diagonal of the visibility window sits. */
typedef enum attn_align {
    /* d(i) = i: PyTorch's is_causal. */
    ATTN_ALIGN_TOP_LEFT = 0,
    /* d(i) = i + m_b - n_b: FlashAttention's causal, what a KV cache needs
     * (the last query sees the last key).  m_b and n_b are batch b's key and
     * query lengths: kv_lens[b] and q_lens[b] when those are in use, m and
     * n otherwise (as FlashAttention's varlen interface). */
    ATTN_ALIGN_BOTTOM_RIGHT = 1
} attn_align;

/* Element types of tensors: K and V storage (k_type, v_type; see
 * "Decoding and the KV cache"), Q and O (q_type, o_type; see "Element types
 * of the computation"). */
typedef enum attn_dtype {
    ATTN_DTYPE_F32 = 0,          /* float */
    ATTN_DTYPE_F16 = 1,          /* IEEE 754 binary16, as uint16_t */
    ATTN_DTYPE_BF16 = 2,         /* bfloat16 (the upper half of a binary32),
                                    as uint16_t */
    /* Blocks of 32 values with one scale, ggml's layouts (K and V storage
     * only; see "Quantized KV caches", 1.2): */
    ATTN_DTYPE_Q8_0 = 3,         /* 34 bytes per 32 values */
    ATTN_DTYPE_Q4_0 = 4          /* 18 bytes per 32 values */
} attn_dtype;

/* Which engine runs the products of the attention core (see "Engines"
 * in docs/DESIGN.md):
 * - BLAS: cblas_sgemm of the configured BLAS on the score and value tiles;
 *   the reference path, and the one for CPUs without AVX-512.
 * - TILE: attn's own register-blocked kernels (AVX-512, AVX2 or portable
 *   C, as ATTN_SIMD allows) on K tiles packed transposed into the
 *   workspace; on AVX-512 it runs close to the FMA peak where a BLAS
 *   spends much of its time packing small operands.
 * - AUTO (the default): the environment variable ATTN_ENGINE (blas, tile
 *   or auto) when set, else TILE when the CPU has AVX-512F and ATTN_SIMD
 *   allows it, else BLAS.  Decided from the CPU and the settings at plan
 *   time, never from timing, so a plan gives the same bits on every call.
 * The engines agree within rounding, not bitwise; each is bitwise
 * identical for any thread count.  The decode path (few queries) has its
 * own streaming kernels whatever the engine.  An explicit BLAS or TILE in
 * the desc wins over ATTN_ENGINE. */
typedef enum attn_engine {
    ATTN_ENGINE_AUTO = 0,
    ATTN_ENGINE_BLAS = 1,
    ATTN_ENGINE_TILE = 2
} attn_engine;

/* How the uint8 element mask is read.  Never a bare bool: PyTorch's SDPA
 * (True = take part) and nn.MultiheadAttention (True = masked out) disagree. */
typedef enum attn_mask_mode {
    ATTN_MASK_NONE = 0,          /* no element mask */
    ATTN_MASK_KEEP_NONZERO = 1,  /* nonzero = visible, 0 = hidden (SDPA) */
    ATTN_MASK_DROP_NONZERO = 2   /* nonzero = hidden, 0 = visible (MHA) */
} attn_mask_mode;

/*
 * Everything a plan fixes.  Initialize with attn_sdpa_desc_init(), then set
 * the fields you need; fields may be added in the reserved tail in later
 * versions without breaking the ABI.
 *
 * Visibility of key j to query i in batch b (all that apply combine with AND):
 * - window: with d(i) = i (TOP_LEFT) or i + m_b - n_b (BOTTOM_RIGHT, see
 *   attn_align), key j is visible iff
 *   d(i) - window_left <= j <= d(i) + window_right; a negative bound means
 *   unbounded.  Causal attention is window_right = 0.
 * - key lengths (use_kv_lens): j < kv_lens[b].
 * - query lengths (use_q_lens): rows i >= q_lens[b] are padding; their
 *   output and probabilities are 0 and their logsumexp is -INFINITY.
 * - element mask: see attn_mask_mode; [B|1][H|1][n|1][m] uint8 with
 *   broadcast strides.
 * - additive bias: [B|1][H|1][n|1][m] float with broadcast strides; a
 *   -INFINITY entry hides its position.
 * A row with no visible key has output 0, probabilities 0 and logsumexp
 * -INFINITY, never NaN.
 *
 * What is never read, so NaN or garbage there changes no output: Q rows of
 * padded queries (i >= q_lens[b]); K and V rows that no query of the
 * (batch, head) can see through the lengths and the window (j >= kv_lens[b],
 * or outside every row's window); mask and bias entries at positions (i, j)
 * hidden by the lengths or the window.  A V row that some queries see is
 * multiplied by an exact 0 probability for the others, so it must be finite.
 */
typedef struct attn_sdpa_desc {
    /* Shapes.  Hq % Hkv == 0; query head h reads key/value head
     * h / (Hq / Hkv) (GQA; Hkv == 1 is MQA). */
    int64_t batch;       /* B */
    int64_t q_heads;     /* Hq */
    int64_t kv_heads;    /* Hkv */
    int64_t q_len;       /* n, queries */
    int64_t kv_len;      /* m, keys */
    int64_t qk_dim;      /* dk */
    int64_t v_dim;       /* dv */

    /* Views of Q [B][Hq][n][dk], K [B][Hkv][m][dk], V [B][Hkv][m][dv] and
     * O [B][Hq][n][dv].  Required. */
    attn_view q, k, v, o;

    /* Scale of Q K^T.  NaN (the default) means 1/sqrt(dk); any finite value
     * is used as given. */
    float scale;

    /* Window around the diagonal (see above).  Defaults: TOP_LEFT, -1, -1
     * (everything visible). */
    attn_align align;
    int64_t window_left;
    int64_t window_right;

    /* Per-batch lengths, given at execute time as int32_t[B]. */
    int use_kv_lens;
    int use_q_lens;

    /* Element mask: mode and strides over [B][H][n] (the key stride is 1).
     * A batch, head or seq stride of 0 broadcasts over that dimension. */
    attn_mask_mode mask_mode;
    attn_view mask;

    /* Additive bias: enable and strides over [B][H][n] (key stride 1);
     * 0 broadcasts, as for the mask. */
    int use_bias;
    attn_view bias;

    /* Optional outputs: probabilities P [B][Hq][n][m] (key stride 1) and
     * logsumexp [B][Hq][n] (natural log of the sum of exp of the scaled,
     * biased scores over the visible keys; the seq stride is the distance
     * between consecutive rows' values). */
    int want_probs;
    attn_view probs;
    int want_lse;
    attn_view lse;

    /* OpenMP threads for execute: 0 = omp_get_max_threads() at plan time.
     * Without OpenMP support every value >= 0 runs on the calling thread. */
    int threads;

    /* Dropout on the probabilities (PyTorch's dropout_p), 0 <= p <= 1: an
     * entry is kept with probability 1 - p and then scaled by 1 / (1 - p)
     * (p = 1 drops everything: O = 0); p outside [0, 1] or NaN is
     * ATTN_ERR_BAD_OPTION.  Whether (b, h, i, j) is kept is a
     * pure function of (dropout_seed, dropout_offset, b, h, i, j), see
     * attn_dropout_mask_fill; it does not depend on threads, tiles, layout,
     * SIMD level or want_probs, and the backward regenerates it.  The
     * logsumexp is of the undropped scores; the probabilities output is the
     * P that multiplies V (after dropout).  p = 0 (the default) runs exactly
     * the path without dropout.  With p > 0, batch and q_heads past 2^32
     * are ATTN_ERR_TOO_LARGE (the generator's counter holds b, h and i in
     * 32 bits each). */
    double dropout_p;
    uint64_t dropout_seed;
    uint64_t dropout_offset;

    /* Sparse attention (see "Sparse attention" below): global tokens and
     * a block-sparse layout, combined (AND) with every other rule.
     * use_global_k: args.global_k [B][m] uint8 (row stride m), nonzero =
     * key j is global for batch b: every query of b sees it.
     * use_global_q: args.global_q [B][n] uint8 (row stride n), nonzero =
     * query i of batch b is global: it sees every key.  Any nonzero value
     * enables a flag array (as use_bias). */
    int use_global_k;
    int use_global_q;
    /* block_size: 0 = no layout; otherwise a power of two from 16 to 256
     * (anything else is ATTN_ERR_BAD_OPTION) and args.layout is a uint8
     * [H][ceil(n / block_size)][ceil(m / block_size)] block mask, dense
     * row-major, nonzero = visible, with H = q_heads when layout_per_head
     * is 1 and H = 1 (one layout for every head) when it is 0.
     * layout_per_head must be 0 or 1, and 0 without a layout
     * (ATTN_ERR_BAD_OPTION). */
    int layout_per_head;
    int reserved_flags;          /* must be zero */
    int64_t block_size;

    /* Storage of K and V (see "Decoding and the KV cache"): F32 (the
     * default) reads args.k / args.v; F16 or BF16 reads args.k16 /
     * args.v16, and the k / v views count uint16_t elements. */
    attn_dtype k_type;
    attn_dtype v_type;
    /* Paged KV cache: kv_block_size 0 (the default) = K and V are the
     * views above; > 0 = they live in pools of kv_num_blocks blocks of
     * kv_block_size tokens, addressed through args.block_table
     * [B][kv_max_blocks] (see "Decoding and the KV cache"). */
    int64_t kv_block_size;
    int64_t kv_num_blocks;
    int64_t kv_max_blocks;

    /* The engine of the products (see attn_engine); AUTO by default.
     * Anything else is ATTN_ERR_BAD_OPTION.  The backward of a desc uses
     * its fwd's engine. */
    attn_engine engine;
    /* Positions (1.3, in the room of reserved_pad): 0 (the default) or 1,
     * this call computes one block of a longer problem, Q rows from global
     * position q_pos0 and K/V rows from kv_pos0 (below); anything else is
     * ATTN_ERR_BAD_OPTION.  See "Blocks of a longer sequence". */
    int use_positions;

    /* Element types of Q and O (see "Element types of the computation"):
     * F32 (the default) reads args.q and writes args.o; F16 or BF16 reads
     * args.q16 / writes args.o16, and the q / o views count uint16_t
     * elements.  Unknown values are ATTN_ERR_BAD_OPTION; a type a path
     * does not take, ATTN_ERR_UNSUPPORTED_TYPE.  (Added in 1.1 in the
     * room of reserved[0].) */
    attn_dtype q_type;
    attn_dtype o_type;

    /* With use_positions: the global positions of Q row 0 and of K/V row
     * 0, in [0, 2^40] (negative: ATTN_ERR_BAD_SIZE; larger:
     * ATTN_ERR_TOO_LARGE); without, they must be 0.  (1.3, in the room of
     * reserved[0] and reserved[1].) */
    int64_t q_pos0;
    int64_t kv_pos0;

    /* Integer scores (1.4, in the room of reserved[0]; see "Integer
     * scores" below): 0 (the default) or 1, Q K^T against a Q8_0 or Q4_0
     * K rounds each 32-value block of Q to int8 and sums integer products,
     * as ggml's CPU kernels do, at a stated accuracy cost.  Anything but
     * 0 or 1, or 1 with any other k_type, is ATTN_ERR_BAD_OPTION. */
    int qk_int8;
    int reserved_pad2;           /* must be zero */

    /* Must be zero (attn_sdpa_desc_init does it). */
    int64_t reserved[1];
} attn_sdpa_desc;

/* Fill *desc with the defaults: all sizes 0, every view ATTN_STRIDE_UNSET,
 * scale NaN (1/sqrt(dk)), TOP_LEFT with an unbounded window, no lengths,
 * mask, bias, probabilities or logsumexp, threads 0.
 * Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_sdpa_desc_init(attn_sdpa_desc *desc);

/* The per-call pointers.  Pointers for features the plan does not use must
 * be NULL. */
typedef struct attn_sdpa_args {
    const float *q;
    const float *k;
    const float *v;
    float *o;
    const int32_t *kv_lens;   /* [B], when use_kv_lens */
    const int32_t *q_lens;    /* [B], when use_q_lens */
    const uint8_t *mask;      /* when mask_mode != ATTN_MASK_NONE */
    const float *bias;        /* when use_bias */
    float *probs;             /* when want_probs */
    float *lse;               /* when want_lse */
    const uint8_t *global_k;  /* [B][m], row stride m, when use_global_k */
    const uint8_t *global_q;  /* [B][n], row stride n, when use_global_q */
    const uint8_t *layout;    /* [Hq|1][ceil(n/bs)][ceil(m/bs)], when
                                 block_size != 0 */
    const uint16_t *k16;      /* K, when k_type is F16 or BF16 (k NULL) */
    const uint16_t *v16;      /* V, when v_type is F16 or BF16 (v NULL) */
    const int32_t *block_table; /* [B][kv_max_blocks], when kv_block_size */
    const uint16_t *q16;      /* Q, when q_type is F16 or BF16 (q NULL) */
    uint16_t *o16;            /* O, when o_type is F16 or BF16 (o NULL) */
    const void *kq;           /* K, when k_type is Q8_0 or Q4_0 (k, k16
                                 NULL; 1.2) */
    const void *vq;           /* V, when v_type is Q8_0 or Q4_0 (1.2) */
    /* Room to grow: must be NULL (attn_sdpa_args_init does it). */
    void *reserved[4];
} attn_sdpa_args;

/* Every pointer NULL (then set those in use; `attn_sdpa_args a = {0}` or
 * designated initializers do the same).  Returns ATTN_OK or
 * ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_sdpa_args_init(attn_sdpa_args *args);

/* ------------------------------------------------------------------------ */
/* Plan / execute                                                            */
/* ------------------------------------------------------------------------ */

typedef struct attn_sdpa_plan attn_sdpa_plan;

/*
 * Validate *desc and make a plan of it (the desc is copied; it may be freed
 * afterwards).  *plan is set only on success.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT, ATTN_ERR_BAD_SIZE,
 * ATTN_ERR_TOO_LARGE, ATTN_ERR_HEAD_RATIO, ATTN_ERR_BAD_STRIDE,
 * ATTN_ERR_STRIDES_UNSET, ATTN_ERR_BAD_SCALE, ATTN_ERR_BAD_OPTION,
 * ATTN_ERR_BAD_THREADS or ATTN_ERR_OUT_OF_MEMORY.
 */
ATTN_API attn_status attn_sdpa_plan_create(attn_sdpa_plan **plan,
                                           const attn_sdpa_desc *desc);

/* Free a plan; NULL is accepted (returns ATTN_OK). */
ATTN_API attn_status attn_sdpa_plan_destroy(attn_sdpa_plan *plan);

/*
 * Bytes of workspace execute needs with this plan, for a caller that
 * supplies its own.  It grows with threads x block sizes, never with n x m
 * (a sparse plan adds 16 bytes per work item, see "Sparse attention").
 * Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.
 */
ATTN_API attn_status attn_sdpa_workspace_size(const attn_sdpa_plan *plan,
                                              size_t *bytes);

/*
 * Run the plan on the buffers in *args.  workspace may be NULL (attn then
 * allocates and frees it inside the call); otherwise it must be 64-byte
 * aligned, at least attn_sdpa_workspace_size() bytes, and not used by
 * another call at the same time.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (plan, args, q, k, v, o, or the
 * pointer of a feature the plan uses), ATTN_ERR_ARGUMENT_MISMATCH (a
 * pointer for a feature the plan does not use), ATTN_ERR_BAD_LENGTH,
 * ATTN_ERR_BAD_BLOCK_TABLE (paged KV cache), ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_WORKSPACE_ALIGNMENT or
 * ATTN_ERR_OUT_OF_MEMORY.  On error no output is written.
 */
ATTN_API attn_status attn_sdpa_execute(const attn_sdpa_plan *plan,
                                       const attn_sdpa_args *args,
                                       void *workspace, size_t workspace_bytes);

/*
 * One-shot: plan, execute with internal workspace, destroy.  Returns any
 * status of attn_sdpa_plan_create or attn_sdpa_execute.
 */
ATTN_API attn_status attn_sdpa(const attn_sdpa_desc *desc,
                               const attn_sdpa_args *args);

/*
 * The dropout keep mask of rows [i0, i0 + rows) and keys [0, m) of (b, h):
 * keep[r * ld + j] = 1 if (b, h, i0 + r, j) is kept, else 0, exactly as
 * attn_sdpa_execute and attn_sdpa_bwd_execute decide it for a desc with
 * these dropout_p, dropout_seed and dropout_offset.  The generator is
 * Philox4x32-10 (Salmon et al., SC'11, as PyTorch's CUDA generator and
 * FlashAttention use): the key is the first two words of
 * Philox4x32-10(counter = (offset low, offset high, 0, 0), key = (seed low,
 * seed high)); then (b, h, i, j) draws word j % 4 of
 * Philox4x32-10(counter = (j / 4, i, h, b), that key) as u, and is kept iff
 * u < round((1 - p) 2^32).  Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (keep),
 * ATTN_ERR_BAD_OPTION (p outside [0, 1] or NaN), ATTN_ERR_BAD_SIZE (rows
 * or m <= 0, b, h or i0 < 0), ATTN_ERR_TOO_LARGE (b, h, i0 + rows or m
 * past 2^32, or a byte count that overflows) or ATTN_ERR_BAD_STRIDE
 * (ld < m).
 */
ATTN_API attn_status attn_dropout_mask_fill(double p, uint64_t seed, uint64_t offset,
                                            int64_t b, int64_t h, int64_t i0, int64_t rows,
                                            int64_t m, uint8_t *keep, int64_t ld);

/* ------------------------------------------------------------------------ */
/* Sparse attention                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Global tokens and block-sparse layouts (Longformer, BigBird, Sparse
 * Transformer) are options of the same SDPA: exact softmax over a sparse
 * visible set.  With them, query i of batch b and head h sees key j iff
 *
 *   (window(i, j) OR global_k[b][j] OR global_q[b][i])
 *   AND j < kv_lens[b] AND i < q_lens[b] AND the element mask AND bias > -inf
 *   AND layout[h or 0][i / bs][j / bs] != 0        (with a layout)
 *
 * - Global keys (use_global_k) are seen by every query whatever the window;
 *   global queries (use_global_q) see every key whatever the window.  The
 *   lengths, the mask, the bias and the layout still apply to them.  Flags
 *   of padded positions (j >= kv_lens[b], i >= q_lens[b]) are allowed and
 *   never read: padding wins (no error).
 * - The layout: block (I, J) covers queries [I bs, (I + 1) bs) and keys
 *   [J bs, (J + 1) bs) (the last ones cut at n and m), in absolute
 *   positions whatever the alignment and the lengths; a zero entry hides
 *   the whole block.  Broadcast over heads (layout_per_head = 0) or one
 *   layout per query head (1; in GQA each query head has its own).
 * - Rows with nothing visible give O 0, P 0 and logsumexp -INFINITY.
 * - Cost: a query block reads and computes only the keys of its candidate
 *   set (the union of its rows' windows and the global keys, or every key
 *   for global queries, cut to the layout's visible blocks and the key
 *   length), so hidden blocks are never read or computed and the work
 *   follows the number of visible blocks.  K and V rows, mask and bias
 *   entries only in hidden blocks (or outside every candidate set) may
 *   hold NaN.  The workspace stays threads x tile (plus 16 bytes per work
 *   item: B x Hq x ceil(n / min(bs, 64)) items, twice that with global
 *   queries).
 * - Every other feature works with them (views, GQA, n != m, both
 *   alignments, lengths, masks, bias, probabilities, logsumexp, dropout,
 *   the backward with dBias, the MHA layer, 16-bit Q, K, V and O in the
 *   forward, see "Element types of the computation"; not the paged KV
 *   cache), and results are bitwise the same for any thread count.
 *
 * The builders below fill a dense uint8 [nb][mb] layout (1 visible, 0
 * hidden) for one head; copy it per head for layout_per_head = 1.  Block
 * rows I and columns J are in absolute positions (the diagonal is I == J,
 * top-left, also when nb != mb).  Each returns ATTN_OK,
 * ATTN_ERR_NULL_ARGUMENT (layout NULL), ATTN_ERR_BAD_SIZE (nb or mb <= 0),
 * ATTN_ERR_TOO_LARGE (nb x mb bytes not representable) or
 * ATTN_ERR_BAD_OPTION (a parameter outside its range); on error nothing is
 * written.
 */

/*
 * BigBird (Zaheer et al., 2020, ITC): visible(I, J) iff
 * - |I - J| <= (window_blocks - 1) / 2: a band of window_blocks blocks
 *   centred on the diagonal (BigBird's num_sliding_blocks = 3: the block,
 *   its left and right neighbours); window_blocks must be odd, or 0 for no
 *   band;
 * - or I < global_blocks or J < global_blocks: the first global_blocks
 *   block rows see everything and the first global_blocks block columns
 *   are seen by everything (BigBird's num_global_blocks, its global tokens
 *   being the first ones);
 * - or J is one of random_blocks blocks of row I drawn among those still
 *   hidden by the two rules above (BigBird's num_random_blocks; fewer if
 *   fewer are hidden): pick k = 0, 1, ... takes the x-th still-hidden block
 *   of the row in increasing J, x = H(seed, I, k) mod (hidden blocks
 *   left), with mix(z) the SplitMix64 finalizer of z + 0x9E3779B97F4A7C15
 *   and H(seed, I, k) = mix(mix(seed XOR mix(I)) + k) (64-bit
 *   arithmetic).  So the layout is a pure function of the arguments.
 * window_blocks, global_blocks or random_blocks negative, or window_blocks
 * even and > 0: ATTN_ERR_BAD_OPTION.
 */
ATTN_API attn_status attn_layout_build_bigbird(uint8_t *layout, int64_t nb, int64_t mb,
                                         int64_t window_blocks, int64_t global_blocks,
                                         int64_t random_blocks, uint64_t seed);

/*
 * Sparse Transformer (Child et al., 2019), strided pattern, stride l in
 * blocks: visible(I, J) iff |I - J| < l (the local head: the l most recent
 * blocks) or (I - J) is a multiple of l (the strided head), and J <= I when
 * causal.  (The paper's local set {max(0, i - l), ..., i} also holds i - l,
 * which is in the strided set anyway.)  stride < 1 or causal not 0 or 1:
 * ATTN_ERR_BAD_OPTION.
 */
ATTN_API attn_status attn_layout_build_strided(uint8_t *layout, int64_t nb, int64_t mb,
                                         int64_t stride, int causal);

/*
 * Sparse Transformer, fixed pattern, stride l and c summary blocks (in
 * blocks): visible(I, J) iff floor(I / l) == floor(J / l) (the same
 * l-block group) or J mod l >= l - c (the last c blocks of every group),
 * and J <= I when causal.  stride < 1, c outside [1, stride] or causal not
 * 0 or 1: ATTN_ERR_BAD_OPTION.
 */
ATTN_API attn_status attn_layout_build_fixed(uint8_t *layout, int64_t nb, int64_t mb, int64_t stride,
                                       int64_t c, int causal);

/* ------------------------------------------------------------------------ */
/* Blocks of a longer sequence (1.3)                                         */
/* ------------------------------------------------------------------------ */
/*
 * With desc.use_positions = 1 a call computes the block of query rows
 * [q_pos0, q_pos0 + n) against the keys [kv_pos0, kv_pos0 + m) of a longer
 * problem, as context parallelism needs (attn_mpi.h runs it over MPI).
 * Local row i and key j are the global positions I = q_pos0 + i and
 * J = kv_pos0 + j, and every rule that reads a position reads the global
 * one:
 * - the whole problem's lengths: N_b = q_lens[b] and M_b = kv_lens[b]
 *   when use_q_lens / use_kv_lens (global lengths: any value >= 0, not
 *   bounded by n or m), else q_pos0 + n and kv_pos0 + m;
 * - rows with I >= N_b are padding (output 0, logsumexp -INFINITY) and
 *   keys with J >= M_b are hidden;
 * - the window's diagonal is D(I) = I (TOP_LEFT) or I + M_b - N_b
 *   (BOTTOM_RIGHT), and key J is visible iff
 *   D(I) - window_left <= J <= D(I) + window_right;
 * - dropout keeps (b, h, I, J) exactly as the whole problem's call does
 *   (with dropout, q_pos0 + n <= 2^32 and kv_pos0 + m <= 2^34, else
 *   ATTN_ERR_TOO_LARGE).
 * The mask, bias, probabilities and logsumexp stay local views (their row
 * i is row I of the whole problem; point them at the block).  So the
 * whole problem's O and logsumexp are the blocks' partial results merged
 * by attn_partials_merge over every key block, and the backward of each
 * (block, key block) pair, given the merged O and logsumexp, yields that
 * pair's share of dQ, dK and dV, whose sums over the pairs are the whole
 * problem's gradients.  Positions do not go with the sparse options
 * (global tokens, block layouts: ATTN_ERR_BAD_OPTION).  Without
 * use_positions, q_pos0 and kv_pos0 must be 0 (ATTN_ERR_BAD_OPTION) and
 * every rule is the one of "SDPA description".
 */

/* ------------------------------------------------------------------------ */
/* Decoding and the KV cache                                                 */
/* ------------------------------------------------------------------------ */

/*
 * LLM generation is a few queries per sequence (1 token, or up to 16 for a
 * multi-token or speculative step, usually with bottom-right causal
 * alignment) against a long, growing KV cache.  It is bound by the bytes of
 * K and V read, so attn offers three things for it, all options of the same
 * SDPA description (every other option still applies):
 *
 * - The decode path.  A plan with q_len <= 16 (and no sparse options) runs
 *   attn's own streaming kernels instead of sgemm: each K and V row is
 *   read from memory once per call for all the query rows of its GQA group
 *   (the group's heads times q_len), converted from its storage type in
 *   registers.  Few (batch, kv head) pairs are split over the keys, and the
 *   parts are merged by logsumexp in a fixed order, so the result is still
 *   bitwise the same for any thread count.  Chosen by the shape alone; the
 *   environment variable ATTN_DECODE=0 turns it off (the sgemm path then
 *   runs, equal within rounding).
 *
 * - Reduced-precision storage.  k_type and v_type: F32, F16 (IEEE binary16)
 *   or BF16 (bfloat16), per tensor.  Q, O, the probabilities and every
 *   operation stay fp32: a stored value is widened exactly and used as that
 *   float.  F16/BF16 data are passed as args.k16 / args.v16 (uint16_t), with
 *   args.k / args.v NULL, and the views' strides count uint16_t elements.
 *   The decode path widens in registers (F16C or AVX-512F for F16, a shift
 *   for BF16); the sgemm path widens a tile at a time into the workspace.
 *
 * - A paged KV cache (vLLM's layout).  With kv_block_size = bs > 0, K and V
 *   live in pools of kv_num_blocks blocks of [Hkv][bs][d] and sequence b's
 *   token j is row j % bs of block block_table[b * kv_max_blocks + j / bs]
 *   (args.block_table, int32).  The k and v views then describe a pool:
 *   their batch stride is the distance between blocks, the head and seq
 *   strides those inside a block (attn_view_bhsd(Hkv, bs, d) for the
 *   layout [num_blocks][Hkv][bs][d]); they are checked against
 *   [kv_num_blocks][Hkv][bs][d].  kv_len (m) is the longest sequence the
 *   table can hold, at most kv_max_blocks x bs; kv_lens (use_kv_lens) gives
 *   each sequence's length.  Execute checks the table entries of the
 *   blocks holding tokens [0, kv_lens[b]) (ATTN_ERR_BAD_BLOCK_TABLE when one
 *   is outside [0, kv_num_blocks), nothing written) and reads no other
 *   entry, and no block or row it does not need: unused blocks and rows past
 *   kv_lens[b] may hold anything.  Paged results are bitwise those of the
 *   same values stored contiguously (on the sgemm path this needs a BLAS
 *   whose sums do not depend on leading dimension or alignment: OpenBLAS,
 *   BLIS and the reference BLAS; with MKL they agree within rounding).
 *
 * Limits: F16/BF16 storage and the paged cache are forward-only (the
 * backward plan returns ATTN_ERR_BAD_OPTION for them).  F16/BF16 storage
 * combines with the sparse options (global tokens, layouts; widened, see
 * "Element types of the computation"); the paged cache does not
 * (ATTN_ERR_BAD_OPTION).
 * Plan errors: an unknown k_type or v_type, kv_block_size < 0, or
 * kv_num_blocks / kv_max_blocks nonzero without paging, are
 * ATTN_ERR_BAD_OPTION; with paging, kv_num_blocks or kv_max_blocks <= 0,
 * or m > kv_max_blocks x kv_block_size, are ATTN_ERR_BAD_SIZE, and
 * kv_block_size, kv_num_blocks or kv_max_blocks past INT32_MAX
 * ATTN_ERR_TOO_LARGE.
 */

/* ------------------------------------------------------------------------ */
/* Quantized KV caches (1.2)                                                */
/* ------------------------------------------------------------------------ */

/*
 * k_type and v_type may also be ATTN_DTYPE_Q8_0 or ATTN_DTYPE_Q4_0: K or V
 * stored as ggml stores a KV cache of those types (llama.cpp's
 * --cache-type-k q8_0), so a cache an engine already holds is passed in
 * place, contiguous or paged, with any GQA ratio.  Each row of a head (its
 * qk_dim or v_dim values) is a run of blocks of 32 consecutive values:
 *
 *   Q8_0, 34 bytes:  bytes 0-1   the scale d, IEEE binary16, little-endian
 *                    bytes 2-33  q[0] ... q[31], int8 (two's complement)
 *                    value i = q[i] x d
 *   Q4_0, 18 bytes:  bytes 0-1   the scale d, IEEE binary16, little-endian
 *                    bytes 2-17  byte 2 + j holds value j in its low 4 bits
 *                                and value j + 16 in its high 4 bits
 *                                (j < 16), each an unsigned q in [0, 15]
 *                    value i = (q_i - 8) x d
 *
 * (ggml's block_q8_0 and block_q4_0; blocks are packed with no padding and
 * need no alignment.)  Rules:
 * - qk_dim (for K) or v_dim (for V) must be a multiple of 32
 *   (ATTN_ERR_BAD_SIZE); the data are passed as args.kq / args.vq (the
 *   other K or V pointers NULL).
 * - The views still count values: every stride of a quantized tensor's
 *   view must be a multiple of 32 (ATTN_ERR_BAD_STRIDE), and value offset
 *   e lives in block e / 32, at byte (e / 32) x 34 (Q8_0) or x 18 (Q4_0).
 *   ggml's cache of one layer, [kv_size][Hkv x dk] values, is the view
 *   { kv_size x Hkv x dk, dk, Hkv x dk } (batch, head, seq) with batch 1;
 *   a paged pool [num_blocks][Hkv][bs][dk] is attn_view_bhsd(Hkv, bs, dk)
 *   as for every type.
 * - The value of a stored element is exact in fp32 (q x d needs at most
 *   19 significant bits), and every path uses it as that float: the decode
 *   path de-quantizes in registers, the sgemm path (more than 16 query
 *   rows, or ATTN_DECODE=0) a tile at a time into the workspace, and the
 *   result is bitwise that of the same call with F32 K and V holding the
 *   de-quantized values (attn_dequantize's output).
 * - Q8_0 and Q4_0 are K/V storage of the SDPA forward (dense, every mask,
 *   window, length, bias and GQA option; contiguous or paged) and of
 *   attn_kv_append.  As q_type or o_type, with the sparse options, in the
 *   SDPA backward, the MHA layer or linear attention they are
 *   ATTN_ERR_UNSUPPORTED_TYPE.
 *
 * Quantizing (attn_kv_append, attn_quantize) follows ggml's reference
 * quantizers, quantize_row_q8_0_ref and quantize_row_q4_0_ref, operation
 * for operation in fp32 (so an engine mixing its own quantized rows with
 * attn's gets the same bytes for the same floats).  Per block x[0..31]:
 *
 *   Q8_0: amax = max |x_i|;  d = amax / 127;  id = d != 0 ? 1 / d : 0;
 *         q_i = roundf(x_i x id)   (to nearest, ties away from zero);
 *         stored scale = d rounded to binary16 (nearest even).
 *   Q4_0: M = the x_i of largest |x_i| (the first of equals);
 *         d = M / -8;  id = d != 0 ? 1 / d : 0;
 *         q_i = min(15, trunc(x_i x id + 8.5f));
 *         stored scale = d rounded to binary16 (nearest even).
 *
 * Every operation above is one fp32 operation, rounded to nearest even.
 * Where ggml's rule is undefined, attn defines it: a block holding a NaN
 * or an infinity is stored with the scale 0x7E00 (a binary16 NaN) and
 * every q 0 (Q8_0) or 8 (Q4_0), so all 32 of its values read back as NaN
 * (they would poison a softmax as the input would have).  Where 1 / d
 * overflows (0 < |d| <= 2^-128: the largest |x| below about 3.7e-37 for
 * Q8_0, 2.4e-38 for Q4_0), x_i x id is infinite or NaN, whose conversion
 * C leaves undefined: q_i is 0 there for both types (the bytes attn's
 * x86-64 builds stored before this was defined; the scale rounds to a
 * binary16 zero, so the block reads back as zeros).  Finite blocks
 * whose scale passes binary16's range (|x| beyond about 8.3e6 for Q8_0,
 * 5.2e5 for Q4_0) store an infinite scale, as ggml does, and read back as
 * +-Inf or NaN (0 x Inf).  A block of zeros stores d = 0 and all q 0 (Q8_0)
 * or 8 (Q4_0), and reads back as zeros.  The quantization error of a
 * finite block is at most d / 2 per value for Q8_0 and d for Q4_0, d the
 * exact scale (max |x| / 127, or |M| / 8), plus what the scale's rounding
 * to binary16 adds (relative 2^-11 of the value for normal scales; more
 * where the scale falls in binary16's subnormal range, below 6.1e-5).
 * docs/TYPES.md measures the attention error it causes.
 */

/*
 * Integer scores (1.4).  With desc.qk_int8 = 1 and a Q8_0 or Q4_0 K, Q K^T
 * is summed in integers, as ggml's CPU kernels do (vec_dot of a Q row
 * rounded to q8_0): each 32-value block x of a fp32 Q row (a 16-bit Q
 * widened first) is rounded to int8 with its own fp32 scale,
 *
 *   amax = max |x_i|;  s = amax / 127;
 *   s < FLT_MIN (zeros, or values below about 1.5e-36): s = 0, every q_i 0;
 *   a NaN or an infinity in the block: s = NaN, every q_i 0;
 *   otherwise q_i = roundf(x_i x (1 / s))   (ties away from zero),
 *
 * and the score of that row and a key whose blocks have binary16 scales
 * k_b and quants v_b (Q4_0: q - 8) is
 *
 *   a = (float)i_0 x (k_0 x s_0);  a = fmaf((float)i_b, k_b x s_b, a) for b = 1, 2, ...
 *   score = scale x a,   i_b = the exact integer sum of q_i v_i over block b,
 *
 * every step one fp32 operation.  So a score depends only on its Q row and
 * its key: the decode path (AVX512_VNNI's VPDPBUSD where the CPU has it,
 * else AVX2's VPMADDUBSW, else portable C, the same bits), the sgemm path and every paging, tiling
 * and thread count give the same scores, and the rest of the call (the
 * softmax, P V in fp32 on V's de-quantized values) is as without the
 * option.  A row with a NaN or an infinity gets NaN scores.
 *
 * Accuracy: rounding Q moves a score by at most |scale| x sum_b (s_b / 2)
 * x sum_i |v_i k_b| (half a step of Q's grid per value; a block read as
 * zeros loses all of itself), plus fp32 rounding; test/test_qk8.c holds
 * both kernels to it.  For Q of unit size and d 128 that is about 0.4% of
 * sum |q_i k_i|; docs/TYPES.md gives the attention error it causes.  Where
 * it pays: Q K^T costs about half of the fp32 kernel's time on a Xeon with
 * AVX512_VNNI, and a third to a half with AVX2 alone (1.4.1;
 * docs/BENCHMARKS.md); below AVX2 (ATTN_SIMD=scalar) the C version is
 * slower than the fp32 kernels, so leave the option off there.
 */

/*
 * Whole tensors to and from any storage type: attn_quantize rounds n fp32
 * values into dst (F16 and BF16 as attn_dtype_encode, Q8_0 and Q4_0 by the
 * rules above; F32 is a copy), attn_dequantize widens n stored values
 * into fp32 (exactly).  n must be a multiple of 32 for Q8_0 and Q4_0.
 * attn_dtype_bytes sets *bytes to the storage of n values of type.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (src or dst NULL with n > 0, or
 * bytes NULL), ATTN_ERR_BAD_SIZE (n < 0, or not a multiple of 32 for a
 * block type), ATTN_ERR_BAD_OPTION (an unknown type) or ATTN_ERR_TOO_LARGE
 * (the storage's bytes past SIZE_MAX or INT64_MAX; for the conversions,
 * also n x 4, the fp32 side's bytes).  (1.2)
 */
ATTN_API attn_status attn_quantize(attn_dtype type, const float *src, void *dst, int64_t n);
ATTN_API attn_status attn_dequantize(attn_dtype type, const void *src, float *dst, int64_t n);
ATTN_API attn_status attn_dtype_bytes(attn_dtype type, int64_t n, size_t *bytes);

/* ------------------------------------------------------------------------ */
/* Element types of the computation                                         */
/* ------------------------------------------------------------------------ */

/*
 * Q and O, like K and V, may be F32, F16 or BF16, named per tensor in the
 * desc (q_type, o_type, k_type, v_type); 16-bit tensors are passed as
 * uint16_t (args.q16, args.o16, args.k16, args.v16, the other pointer
 * NULL) and their views count uint16_t elements.  The probabilities and
 * the logsumexp stay fp32.  Accumulation, the softmax, the logsumexp and
 * the online rescaling of O are always fp32; O is rounded to o_type once,
 * at the end (round to nearest even, as attn_dtype_encode).  Two kinds of
 * products:
 *
 * - BF16 products: when Q, K and V are all BF16 and the plan runs on the
 *   tile engine off the decode path (q_len > 16 or ATTN_DECODE=0).  Both
 *   products read bfloat16 pairs and accumulate in fp32 with VDPBF16PS's
 *   arithmetic (AVX512_BF16; the same bits from an AVX-512F or a C version
 *   where the CPU lacks the unit, see docs/TYPES.md), or on a CPU with
 *   AMX-BF16 (where Linux grants the process the tile state, requested at
 *   the first call) with TDPBF16PS's, whose order of fp32 additions is its
 *   own (the same worst-case bound; ATTN_SIMD=avx512bf16 keeps
 *   VDPBF16PS): Q K^T over pairs of
 *   the head dimension; then the probabilities of a tile, exp(s - m) in
 *   fp32 as always, are rounded to BF16 for P V (as FlashAttention rounds
 *   P to the input type), over pairs of keys.  The sum l that O is
 *   divided by is of the unrounded fp32 values.
 *
 * - Otherwise (F16 inputs, mixed types, the BLAS engine, the decode path):
 *   each 16-bit value is widened exactly to fp32 as it is read (a tile or an
 *   item's rows at a time into the workspace, or in registers) and the
 *   products are the fp32 ones: the result is bitwise that of the same call
 *   in fp32 on the widened values (then O rounded to o_type), except that
 *   on the engines (more than 16 queries, or ATTN_DECODE=0) a 16-bit Q or
 *   O (held [g][rows][d] in the workspace) can stack a GQA group's heads
 *   into one GEMM where the fp32 views (BSHD, say) do not, and then agrees
 *   within rounding.  The decode path (16 queries or fewer) stacks a group
 *   in every layout (1.3.3), so there the bits are always the fp32 call's.  F16 costs
 *   what fp32 costs and reads half the bytes.  (AVX512_FP16 has no
 *   fp32-accumulating product, so it is not used for F16.)
 *
 * Accuracy against float64 on the same (rounded) inputs is stated and
 * tested per type in docs/TYPES.md.  Results stay bitwise identical for
 * any thread count at every type.
 *
 * The sparse options (global tokens, layouts) take 16-bit Q, K, V and O
 * (1.1), always with the widened products: a group's Q rows and the K and
 * V rows of a tile's segments (only the keys the segments name) are
 * widened into the workspace, O accumulated there in fp32 and rounded once
 * at the group's end; the result is bitwise the fp32 sparse call on the
 * widened values (then O rounded), and the workspace stays threads x tile.
 * Sparse with the paged cache stays ATTN_ERR_BAD_OPTION.  Linear attention
 * takes 16-bit Q, K, V and O in its forward (attn_linear_desc's q_type,
 * k_type, v_type, o_type; widened the same way, the state fp32).  Its
 * backward takes them too (dQ, dK, dV of the types of Q, K, V, dO of
 * o_type, through attn_linear_bwd_args16), widened: each gradient is
 * bitwise the fp32 backward's on the widened values, rounded once.
 *
 * Every path takes 16-bit types; the SDPA backward with the paged cache
 * is ATTN_ERR_BAD_OPTION at every type.
 *
 * The backward (attn_sdpa_bwd_*) takes the same types on dense problems
 * and with the sparse options (1.1; there always widened, below): each
 * gradient has
 * the type of its tensor (dQ q_type, dK k_type, dV v_type) and dO that of
 * O (o_type); the 16-bit ones go through args.args16
 * (attn_sdpa_bwd_args16).  The logsumexp is fp32, D_i = dO_i . O_i is
 * computed in fp32 on the widened values, and every gradient is summed in
 * fp32 (in the workspace) and rounded to its type once, at the end.  The
 * products, as in the forward:
 *
 * - BF16 products: when Q, K, V and O (so dO) are all BF16 and the plan
 *   runs on the tile engine.  The recomputed S = scale Q K^T, dP = dO V^T,
 *   dV += P^T dO, dK += scale dS^T Q and dQ += scale dS K all read
 *   bfloat16 pairs and accumulate in fp32 (VDPBF16PS's arithmetic); P and
 *   dS are computed in fp32 as always and rounded to BF16 where they enter
 *   a product (P for dV, dS for dK and dQ; as FlashAttention rounds them
 *   to the input type), while dS = P (dP - D) uses the unrounded fp32 P.
 *
 * - Otherwise (F16, mixed types, the BLAS engine, the sparse options):
 *   the 16-bit values are widened exactly to fp32 (a block of rows or a
 *   (batch, head)'s keys at a time, into the workspace) and the products
 *   are the fp32 ones: each gradient is bitwise that of the same call in
 *   fp32 on the widened values, rounded once to its type.  With the
 *   sparse options this is always the path (never the BF16 products, as
 *   the sparse forward): bitwise the fp32 sparse backward on the widened
 *   values, each gradient then rounded once.
 *
 * The 16-bit backward keeps, per thread, fp32 sums of dK and dV for the
 * keys of one (batch, key/value head) and the widened or packed K and V
 * (a few times kv_len x (qk_dim + v_dim) x 4 bytes), on top of the fp32
 * backward's tiles; attn_sdpa_bwd_workspace_size says how much.
 */

/*
 * Convert n values between fp32 and a 16-bit storage type (ATTN_DTYPE_F16
 * or ATTN_DTYPE_BF16; F32 is ATTN_ERR_BAD_OPTION).
 * attn_dtype_decode is exact: a NaN stays a NaN of the same sign and
 * payload; an F16 NaN comes out with its quiet bit set (as F16C's
 * VCVTPH2PS sets it), a BF16 NaN is the plain 16-bit shift, so a
 * signaling BF16 NaN stays signaling (0x7F81 -> 0x7F810000).  attn_dtype_encode
 * rounds to nearest,
 * ties to even, with IEEE semantics: denormal inputs and results are kept
 * (never flushed), values past the largest finite F16 become +-Inf, +-Inf
 * stay +-Inf, and a NaN gives a quiet NaN of the same sign that keeps the
 * top bits of its payload (as F16C's VCVTPS2PH does).  The best
 * instructions the CPU has are used (F16C or AVX-512F for F16; AVX-512 BF16
 * for BF16, with its flushed denormals redone exactly), capped by
 * ATTN_SIMD like the other kernels; every level gives the same bits.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (src or dst NULL with n > 0),
 * ATTN_ERR_BAD_SIZE (n < 0) or ATTN_ERR_BAD_OPTION.
 */
ATTN_API attn_status attn_dtype_encode(attn_dtype type, const float *src, uint16_t *dst,
                                           int64_t n);
ATTN_API attn_status attn_dtype_decode(attn_dtype type, const uint16_t *src, float *dst,
                                         int64_t n);

/* The new tokens of one attn_kv_append call. */
typedef struct attn_kv_append_args {
    void *k_cache;              /* K: float * (k_type F32), uint16_t *
                                   (F16, BF16) or the blocks (Q8_0, Q4_0);
                                   the pool when the desc is paged */
    void *v_cache;              /* V, likewise */
    const int32_t *block_table; /* [B][kv_max_blocks] when paged, else NULL */
    int32_t *kv_lens;           /* [B] in: tokens held by each sequence;
                                   out: plus the tokens appended */
    const int32_t *new_lens;    /* [B] tokens to append to each sequence, in
                                   [0, t]; NULL = t for every sequence */
    int64_t t;                  /* rows per (b, h) of k_new and v_new, >= 1 */
    const float *k_new;         /* [B][Hkv][t][dk] with view k_new_view */
    const float *v_new;         /* [B][Hkv][t][dv] with view v_new_view */
    attn_view k_new_view;
    attn_view v_new_view;
    /* Room to grow: must be NULL (attn_kv_append_args_init does it). */
    void *reserved[8];
} attn_kv_append_args;

/* Every pointer NULL, t 0 and both views ATTN_STRIDE_UNSET.  Returns
 * ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_kv_append_args_init(attn_kv_append_args *args);

/*
 * Append tokens to the KV cache described by desc: for every sequence b
 * and kv head h, rows r < new_lens[b] of k_new and v_new become tokens
 * kv_lens[b] + r of K and V (converted to k_type / v_type as
 * attn_quantize does: F16/BF16 rounded as attn_dtype_encode, Q8_0/Q4_0
 * quantized a row's blocks at a time by the rules of "Quantized KV
 * caches"), then kv_lens[b] grows by new_lens[b].  Only
 * the fields of desc that describe K and V are read: batch, kv_heads,
 * kv_len (each sequence's capacity), qk_dim, v_dim, the k and v views,
 * k_type, v_type and the paging fields (checked as attn_sdpa_plan_create
 * checks them); the rest may hold anything.  The cache may be contiguous
 * (kv_block_size 0, block_table NULL) or paged (the blocks holding the new
 * tokens must be in the table: their entries are checked, the others not
 * read).  Everything is checked before anything is written.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT, ATTN_ERR_BAD_SIZE (a size <= 0,
 * t < 1), ATTN_ERR_TOO_LARGE, ATTN_ERR_BAD_STRIDE, ATTN_ERR_STRIDES_UNSET,
 * ATTN_ERR_BAD_OPTION, ATTN_ERR_ARGUMENT_MISMATCH (a block table without
 * paging), ATTN_ERR_BAD_LENGTH (kv_lens[b] < 0, new_lens[b] outside
 * [0, t], or kv_lens[b] + new_lens[b] > kv_len) or
 * ATTN_ERR_BAD_BLOCK_TABLE.
 */
ATTN_API attn_status attn_kv_append(const attn_sdpa_desc *desc, const attn_kv_append_args *args);

/*
 * Merge attention computed over disjoint sets of keys (shards of a long
 * cache, split over threads, processes or machines; FlashAttention's
 * split-KV combine).  Part p gives, for each of `rows` rows, an output
 * O_p (dim floats, already normalized over its keys, as attn_sdpa writes
 * it) and its logsumexp lse_p (as attn_sdpa's want_lse writes it).  Then
 *
 *   lse = log sum_p exp(lse_p),    O = sum_p exp(lse_p - lse) O_p
 *
 * is exactly attention over the union of the keys (up to rounding).  Parts
 * with lse_p = -INFINITY (no visible key) contribute nothing and their O_p
 * is not read (it may hold NaN); a row where every part is -INFINITY gets
 * O = 0 and lse = -INFINITY; a NaN or +INFINITY lse_p (attn_sdpa never
 * writes +INFINITY; it would leave every weight undefined) makes the row's
 * O and lse NaN.  Otherwise, with mx = max_p lse_p, the weights
 * w_p = exp(lse_p - mx), their sum s, lse = mx + log(s) and
 * O = sum_p (w_p / s) O_p are computed in double, in part order, and
 * rounded to float once; so the result depends on the inputs only (and
 * on the C library's exp and log, whose last double bit may differ between
 * libraries), adds about one float rounding to the partials' own error,
 * and with parts = 1 and a finite lse_p is O_p and lse_p bit for bit.  It
 * runs on the calling thread.
 * Layout (element strides): O_p of row r at o_parts + p * o_part_stride +
 * r * o_row_stride, lse_p at lse_parts + p * lse_part_stride + r *
 * lse_row_stride, the result at o + r * o_out_stride and (lse_out may be
 * NULL; lse_out_stride is then not read) lse_out + r * lse_out_stride.
 * Input strides may be 0 (inputs may overlap); o and lse_out may not
 * overlap the inputs or each other (not checked).
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (args, o_parts, lse_parts or o),
 * ATTN_ERR_BAD_OPTION (a reserved field is not zero),
 * ATTN_ERR_BAD_SIZE (parts, rows or dim <= 0), ATTN_ERR_BAD_STRIDE (a
 * negative stride, o_out_stride < dim, or lse_out_stride 0 with rows > 1)
 * or ATTN_ERR_TOO_LARGE (the extent of a buffer, e.g. (parts - 1) *
 * o_part_stride + (rows - 1) * o_row_stride + dim elements, or its byte
 * count past 2^63 - 1 or SIZE_MAX), checked in this order; on error
 * nothing is written.
 */
typedef struct attn_partials_merge_args {
    int64_t parts, rows, dim;
    const float *o_parts;
    int64_t o_part_stride, o_row_stride;
    const float *lse_parts;
    int64_t lse_part_stride, lse_row_stride;
    float *o;
    int64_t o_out_stride;
    float *lse_out;
    int64_t lse_out_stride;
    /* Room to grow (pointers and sizes take 8-byte slots): must be zero
     * (attn_partials_merge_args_init does it). */
    int64_t reserved[8];
} attn_partials_merge_args;

/* Every field zero.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_partials_merge_args_init(attn_partials_merge_args *args);
ATTN_API attn_status attn_partials_merge(const attn_partials_merge_args *args);

/* ------------------------------------------------------------------------ */
/* SDPA backward                                                             */
/* ------------------------------------------------------------------------ */

/*
 * The gradients of SDPA: from Q, K, V, the forward's output O and
 * logsumexp, and dO = dL/dO, compute dQ, dK, dV and optionally dBias, under
 * the same description as the forward (shapes, views, scale, window,
 * lengths, mask, bias, GQA).  With S = scale Q K^T + bias and P = softmax
 * over the visible keys (exp(S - lse), the forward's lse):
 *
 *   D_i  = sum_d dO_id O_id
 *   dV_j = sum_i P_ij dO_i            dP_ij = dO_i . V_j
 *   dS_ij = P_ij (dP_ij - D_i)        dBias_ij = dS_ij
 *   dQ_i = scale sum_j dS_ij K_j      dK_j = scale sum_i dS_ij Q_i
 *
 * P is recomputed tile by tile (FlashAttention-2's scheme, over sgemm), so
 * the workspace grows with threads x tile, never with n x m (16-bit
 * tensors, F16 or BF16, per tensor: see "Element types of the
 * computation"; there also threads x m x head dims).  A key/value
 * head's dK and dV sum over the query heads of its GQA group; dBias is
 * summed over the bias's broadcast dimensions.  Hidden positions contribute
 * exactly 0: padded query rows (i >= q_lens[b]) and rows with no visible
 * key (lse = -INFINITY) get dQ = 0; K/V rows no query sees get dK = dV = 0;
 * hidden (i, j) get dBias = 0.  What the forward never reads, backward
 * never reads either (and also the dO and O rows of padded queries).
 * Results are bitwise identical for any thread count: every sum runs in an
 * order fixed by the shape.
 */
typedef struct attn_sdpa_bwd_desc {
    /* The forward's description.  Its o view is the forward output O (an
     * input here) and its lse view the forward's logsumexp (an input,
     * required: want_lse must be 1).  want_probs must be 0. */
    attn_sdpa_desc fwd;

    /* dO [B][Hq][n][dv] (input), dQ [B][Hq][n][dk], dK [B][Hkv][m][dk],
     * dV [B][Hkv][m][dv] (outputs, every element written).  Output views
     * follow the rules of the forward's outputs (nested, see Tensor views). */
    attn_view d_o, dq, dk, dv;

    /* dBias, when want_dbias (needs fwd.use_bias): the gradient in the
     * bias's own shape [B|1][H|1][n|1][m], where a dimension is 1 exactly
     * when the bias broadcasts over it (its stride in fwd.bias is 0); the
     * strides of those dimensions here are ignored. */
    int want_dbias;
    attn_view dbias;

    /* Must be zero (attn_sdpa_bwd_desc_init does it). */
    int64_t reserved[16];
} attn_sdpa_bwd_desc;

/* fwd as attn_sdpa_desc_init sets it, every other view ATTN_STRIDE_UNSET,
 * no dBias.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_sdpa_bwd_desc_init(attn_sdpa_bwd_desc *desc);

/* The 16-bit tensors of a backward call (see "Element types of the
 * computation"), as uint16_t in the views of the desc (counted in
 * uint16_t elements): each is given here when its type (below) is F16 or
 * BF16, and must be NULL when it is F32 (its float pointer in
 * attn_sdpa_bwd_args is used then).  (Added in 1.1.) */
typedef struct attn_sdpa_bwd_args16 {
    const uint16_t *q;        /* Q, when fwd.q_type is F16 or BF16 */
    const uint16_t *k;        /* K, when fwd.k_type is F16 or BF16 */
    const uint16_t *v;        /* V, when fwd.v_type is F16 or BF16 */
    const uint16_t *o;        /* the forward's output, when fwd.o_type is */
    const uint16_t *d_o;      /* dL/dO, when fwd.o_type is F16 or BF16 */
    uint16_t *dq;             /* dQ (type q_type) */
    uint16_t *dk;             /* dK (type k_type) */
    uint16_t *dv;             /* dV (type v_type) */
    /* Room to grow: must be NULL (attn_sdpa_bwd_args16_init does it). */
    void *reserved[8];
} attn_sdpa_bwd_args16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_sdpa_bwd_args16_init(attn_sdpa_bwd_args16 *args);

/* The per-call pointers; those of features the plan does not use must be
 * NULL. */
typedef struct attn_sdpa_bwd_args {
    const float *q;
    const float *k;
    const float *v;
    const float *o;           /* the forward's output */
    const float *d_o;         /* dL/dO */
    const float *lse;         /* the forward's logsumexp */
    const int32_t *kv_lens;   /* [B], when fwd.use_kv_lens */
    const int32_t *q_lens;    /* [B], when fwd.use_q_lens */
    const uint8_t *mask;      /* when fwd.mask_mode != ATTN_MASK_NONE */
    const float *bias;        /* when fwd.use_bias */
    float *dq;
    float *dk;
    float *dv;
    float *dbias;             /* when want_dbias */
    const uint8_t *global_k;  /* when fwd.use_global_k (as attn_sdpa_args) */
    const uint8_t *global_q;  /* when fwd.use_global_q */
    const uint8_t *layout;    /* when fwd.block_size != 0 */
    /* The 16-bit tensors, when any of fwd.q_type, k_type, v_type, o_type is
     * F16 or BF16 (then q, k, v, o, d_o, dq, dk, dv above are given only
     * for the F32 ones); NULL when every type is F32.  (Added in 1.1 in
     * the room of reserved[0].) */
    const attn_sdpa_bwd_args16 *args16;
    /* Room to grow: must be NULL (attn_sdpa_bwd_args_init does it). */
    void *reserved[7];
} attn_sdpa_bwd_args;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_sdpa_bwd_args_init(attn_sdpa_bwd_args *args);

typedef struct attn_sdpa_bwd_plan attn_sdpa_bwd_plan;

/*
 * Validate *desc and make a backward plan.  Returns ATTN_OK,
 * ATTN_ERR_NULL_ARGUMENT, any status attn_sdpa_plan_create returns for
 * desc->fwd, ATTN_ERR_BAD_OPTION (fwd.want_lse 0, fwd.want_probs 1,
 * want_dbias without fwd.use_bias, a paged K/V cache: fwd.kv_block_size !=
 * 0, a nonzero reserved field), ATTN_ERR_STRIDES_UNSET, ATTN_ERR_BAD_STRIDE or
 * ATTN_ERR_TOO_LARGE for the views of dO, dQ, dK, dV and dBias (and for
 * the workspace), or ATTN_ERR_OUT_OF_MEMORY.  fwd's q_type, k_type, v_type
 * and o_type may each be F32, F16 or BF16 (see "Element types of the
 * computation").
 */
ATTN_API attn_status attn_sdpa_bwd_plan_create(attn_sdpa_bwd_plan **plan,
                                               const attn_sdpa_bwd_desc *desc);

/* Free a plan; NULL is accepted (returns ATTN_OK). */
ATTN_API attn_status attn_sdpa_bwd_plan_destroy(attn_sdpa_bwd_plan *plan);

/* Bytes of workspace execute needs (threads x tiles, never n x m; with a
 * 16-bit type also threads x kv_len x head dims, see "Element types of the
 * computation").  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_sdpa_bwd_workspace_size(const attn_sdpa_bwd_plan *plan,
                                                  size_t *bytes);

/*
 * Compute the gradients.  workspace as for attn_sdpa_execute.  Returns
 * ATTN_OK, ATTN_ERR_NULL_ARGUMENT (a pointer in use is NULL: in args, or
 * in args->args16 for a 16-bit tensor, or args16 itself when some type is
 * 16-bit), ATTN_ERR_ARGUMENT_MISMATCH (a pointer for something the plan
 * does not use: the float pointer of a 16-bit tensor, the 16-bit pointer
 * of an F32 one, args16 when every type is F32), ATTN_ERR_BAD_OPTION (a
 * nonzero reserved pointer of args or args16), ATTN_ERR_BAD_LENGTH,
 * ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_WORKSPACE_ALIGNMENT or
 * ATTN_ERR_OUT_OF_MEMORY.  On error no output is written.
 */
ATTN_API attn_status attn_sdpa_bwd_execute(const attn_sdpa_bwd_plan *plan,
                                           const attn_sdpa_bwd_args *args,
                                           void *workspace, size_t workspace_bytes);

/* One-shot: plan, execute with internal workspace, destroy. */
ATTN_API attn_status attn_sdpa_backward(const attn_sdpa_bwd_desc *desc,
                                        const attn_sdpa_bwd_args *args);

/* ------------------------------------------------------------------------ */
/* Linear attention                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Linear attention (Katharopoulos et al., "Transformers are RNNs", 2020):
 * the softmax of SDPA replaced by a feature map phi applied to Q and K, so
 * the sums over keys factor through a (dk x dv) state and the cost is
 * O(n dk dv) instead of O(n m d).  For query i of (b, h), with kv head
 * hk = h / (Hq / Hkv) and the keys j it sees (below):
 *
 *   S_i = S0 + sum_j phi(k_j) v_j^T        (dk x dv)
 *   z_i = z0 + sum_j phi(k_j)              (dk)
 *   O_i = phi(q_i)^T S_i / (phi(q_i)^T z_i + eps)
 *
 * S0 and z0 are the state passed in (use_state) or 0.  There is no softmax
 * and no scale.  Which keys query i sees:
 * - non-causal: every key j < m_b;
 * - causal: keys j <= d(i) and j < m_b, with SDPA's diagonal:
 *   d(i) = i (ATTN_ALIGN_TOP_LEFT) or i + m_b - n_b (BOTTOM_RIGHT),
 *   where m_b = kv_lens[b] and n_b = q_lens[b] when in use (m and n
 *   otherwise), as in attn_align.
 * Keys j >= kv_lens[b] are excluded; padded query rows (i >= q_lens[b])
 * have O = 0.  A row that sees no key and no state has O = 0 / eps = 0.
 *
 * Feature maps (attn_feature_map), elementwise:
 *   ELU1      phi(x) = elu(x) + 1 = x + 1 (x > 0), exp(x) (x <= 0)  (default)
 *   RELU      phi(x) = max(x, 0)
 *   IDENTITY  phi(x) = x: for features the caller computed (random
 *             features, Performer, ...); then phi(q_i)^T z_i + eps may be
 *             0 or negative, and O follows the formula (inf or NaN when it
 *             is 0).
 *
 * The recurrent form (use_state): the state (S, z) of every (b, hk), dense
 * float arrays state_s [B][Hkv][dk][dv] and state_z [B][Hkv][dk], is read
 * at the start of the call and overwritten at its end.  The keys of this
 * call come after the keys already summed into the state: every query of
 * the call sees the whole state (S0, z0 above; causal rows too), plus the
 * keys of the call the rules above give it.  Afterwards the state holds S0
 * + sum over all valid keys of the call (j < m_b, seen by a query or not)
 * of phi(k_j) v_j^T, and z likewise.  So a long causal sequence fed in
 * pieces of any sizes, each a call with n = m = piece length, gives the
 * outputs and the final state of one causal pass over the whole sequence
 * (equal within float rounding, not bitwise: the sums are grouped
 * differently).  Generation, with plans P (n = m = prompt length) and T
 * (n = m = 1), both causal with use_state:
 *
 *   memset(s, 0, B*Hkv*dk*dv*4); memset(z, 0, B*Hkv*dk*4);  // empty state
 *   args = {q, k, v, o, .state_s = s, .state_z = z};
 *   attn_linear_execute(P, &args, NULL, 0);   // O of the prompt; state =
 *                                             // sums over the prompt
 *   for each new token t:                     // q, k, v: that token's rows
 *       attn_linear_execute(T, &args_t, NULL, 0);  // O of token t; the
 *                                             // state now includes t
 *
 * Each token costs O(dk dv) per (b, h).  A batch entry with kv_lens[b] = 0
 * adds no key (its query still sees the state); one with q_lens[b] = 0
 * gets O = 0 but still adds its valid keys.  One plan serves any number
 * of calls; states of different sequences are different buffers.
 *
 * What is never read: Q rows i >= q_lens[b]; K and V rows j >= kv_lens[b];
 * without use_state, also the K and V rows no query sees (causal, j > d(i)
 * of the last valid row).  A V row some query sees is multiplied by exact
 * zeros for the rows that do not see it (the masked product of a chunk),
 * so it must be finite.
 *
 * Rows are processed in chunks of 64: inside a chunk the masked product
 * (phi(Q_c) phi(K_c)^T, lower-triangular when causal) times V_c, between
 * chunks the running state (S, z), each as sgemm; a work item is one
 * (batch, kv head) pair with the query heads of its group, so results are
 * bitwise identical for any thread count and the workspace is
 * threads x O(chunk x (chunk + dk + dv) + dk dv) floats, never n x m.
 */
typedef enum attn_feature_map {
    ATTN_FEATURE_ELU1 = 0,      /* elu(x) + 1 (the default) */
    ATTN_FEATURE_RELU = 1,      /* max(x, 0) */
    ATTN_FEATURE_IDENTITY = 2   /* x: Q and K already mapped by the caller */
} attn_feature_map;

typedef struct attn_linear_desc {
    /* Shapes, as in attn_sdpa_desc: Hq % Hkv == 0 (GQA; Hkv == 1 is MQA),
     * dk and dv independent. */
    int64_t batch;       /* B */
    int64_t q_heads;     /* Hq */
    int64_t kv_heads;    /* Hkv */
    int64_t q_len;       /* n */
    int64_t kv_len;      /* m */
    int64_t qk_dim;      /* dk */
    int64_t v_dim;       /* dv */

    /* Views of Q [B][Hq][n][dk], K [B][Hkv][m][dk], V [B][Hkv][m][dv] and
     * O [B][Hq][n][dv] (the rules of Tensor views).  Required. */
    attn_view q, k, v, o;

    attn_feature_map feature_map;   /* default ATTN_FEATURE_ELU1 */

    /* Causal (nonzero) or not (0, the default); align places the
     * diagonal of causal rows (default TOP_LEFT; checked even when not
     * causal). */
    int causal;
    attn_align align;

    /* Added to every denominator.  NaN (the default) means 1e-6; any
     * finite value >= 0 is used as given (0: a zero denominator gives
     * inf or NaN). */
    float eps;

    /* Per-batch lengths, given at execute time as int32_t[B]. */
    int use_kv_lens;
    int use_q_lens;

    /* Recurrent form: the state (S, z) is read and written back (see
     * above); args.state_s and args.state_z are then required. */
    int use_state;

    /* OpenMP threads for execute: 0 = omp_get_max_threads() at plan time,
     * as in attn_sdpa_desc. */
    int threads;

    /* The engine of the chunks' products (see attn_engine); AUTO by
     * default, anything else is ATTN_ERR_BAD_OPTION.  The backward uses
     * its fwd's. */
    attn_engine engine;
    int reserved_pad;            /* must be zero */

    /* Element types of Q, K, V and O (1.1, in the room of reserved[0]
     * and reserved[1]): F32 (the default, 0) reads args.q / args.k /
     * args.v and writes args.o; F16 or BF16 reads (writes) the pointer of
     * args.args16 instead, the float pointer NULL, and the view counts
     * uint16_t elements.  Each 16-bit value is widened exactly to fp32 as
     * a chunk's rows are read (into the workspace), the arithmetic is
     * fp32's (bitwise the fp32 call on the widened values) and O is
     * rounded once to o_type at the end (round to nearest even, as
     * attn_dtype_encode).  The state (state_s, state_z) stays fp32.
     * Unknown values are ATTN_ERR_BAD_OPTION.  The backward takes them
     * too (see attn_linear_bwd_desc). */
    attn_dtype q_type, k_type;
    attn_dtype v_type, o_type;

    /* Must be zero (attn_linear_desc_init does it). */
    int64_t reserved[13];
} attn_linear_desc;

/* Fill *desc with the defaults: sizes 0, every view ATTN_STRIDE_UNSET,
 * ELU1, not causal, TOP_LEFT, eps NaN (1e-6), no lengths, no state,
 * threads 0, reserved zero.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_desc_init(attn_linear_desc *desc);

/* The 16-bit tensors of a call (1.1): the pointer of each tensor whose type
 * in the desc is F16 or BF16 (as uint16_t; the views count uint16_t
 * elements); those of F32 tensors must be NULL. */
typedef struct attn_linear_args16 {
    const uint16_t *q;        /* when q_type is F16 or BF16 */
    const uint16_t *k;        /* when k_type is F16 or BF16 */
    const uint16_t *v;        /* when v_type is F16 or BF16 */
    uint16_t *o;              /* when o_type is F16 or BF16 */
    /* Room to grow: must be NULL (attn_linear_args16_init does it). */
    void *reserved[8];
} attn_linear_args16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_linear_args16_init(attn_linear_args16 *args);

/* The per-call pointers; those of features the plan does not use must be
 * NULL. */
typedef struct attn_linear_args {
    const float *q;           /* when q_type is F32 (the default) */
    const float *k;           /* when k_type is F32 */
    const float *v;           /* when v_type is F32 */
    float *o;                 /* when o_type is F32 */
    const int32_t *kv_lens;   /* [B], when use_kv_lens */
    const int32_t *q_lens;    /* [B], when use_q_lens */
    float *state_s;           /* [B][Hkv][dk][dv] dense, in and out, when
                                 use_state */
    float *state_z;           /* [B][Hkv][dk] dense, in and out, when
                                 use_state */
    /* The 16-bit tensors, when some type of the desc is F16 or BF16 (else
     * NULL).  (1.1, in the room of reserved[0].) */
    const attn_linear_args16 *args16;
    /* Room to grow: must be NULL (attn_linear_args_init does it). */
    void *reserved[7];
} attn_linear_args;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_args_init(attn_linear_args *args);

typedef struct attn_linear_plan attn_linear_plan;

/*
 * Validate *desc and make a plan of it (the desc is copied).  *plan is set
 * only on success.  Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT,
 * ATTN_ERR_BAD_OPTION (a nonzero reserved field, an unknown feature_map,
 * align or element type, eps negative or infinite), ATTN_ERR_BAD_SIZE (a size <= 0),
 * ATTN_ERR_TOO_LARGE (n, m, dk or dv > INT32_MAX, a view's extent, the
 * state or the workspace not representable), ATTN_ERR_HEAD_RATIO,
 * ATTN_ERR_STRIDES_UNSET, ATTN_ERR_BAD_STRIDE (the view rules; o is an
 * output), ATTN_ERR_BAD_THREADS or ATTN_ERR_OUT_OF_MEMORY, checked in
 * that order (views in the order q, k, v, o).
 */
ATTN_API attn_status attn_linear_plan_create(attn_linear_plan **plan,
                                             const attn_linear_desc *desc);

/* Free a plan; NULL is accepted (returns ATTN_OK). */
ATTN_API attn_status attn_linear_plan_destroy(attn_linear_plan *plan);

/* Bytes of workspace execute needs: per thread the chunk buffers (64 rows
 * of phi(Q), phi(K), the 64 x 64 masked product, the denominators; with
 * 16-bit tensors 64 widened rows of Q or K and of V) and the running
 * state (dk x dv + dk floats); never n x m.  Returns ATTN_OK or
 * ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_workspace_size(const attn_linear_plan *plan,
                                                size_t *bytes);

/*
 * Run the plan.  workspace as for attn_sdpa_execute (NULL: allocated and
 * freed inside the call; else 64-byte aligned and at least
 * attn_linear_workspace_size() bytes).  Returns ATTN_OK,
 * ATTN_ERR_BAD_OPTION (a reserved pointer of args or of *args.args16 not
 * NULL), ATTN_ERR_NULL_ARGUMENT (plan, args, args16 when some type is
 * 16-bit, q, k, v, o (of args or args16, as the types say), or a pointer
 * the plan uses: kv_lens, q_lens, state_s, state_z),
 * ATTN_ERR_ARGUMENT_MISMATCH (a pointer the plan does not use: args16
 * when every type is F32, the float pointer of a 16-bit tensor or the
 * 16-bit one of an F32 tensor, ...), ATTN_ERR_BAD_LENGTH (kv_lens[b] not in
 * [0, m] or q_lens[b] not in [0, n]), ATTN_ERR_WORKSPACE_TOO_SMALL,
 * ATTN_ERR_WORKSPACE_ALIGNMENT or ATTN_ERR_OUT_OF_MEMORY, checked in that
 * order.  On error nothing is written (neither O nor the state).
 */
ATTN_API attn_status attn_linear_execute(const attn_linear_plan *plan,
                                         const attn_linear_args *args,
                                         void *workspace, size_t workspace_bytes);

/* One-shot: plan, execute with internal workspace, destroy.  Returns any
 * status of attn_linear_plan_create or attn_linear_execute. */
ATTN_API attn_status attn_linear(const attn_linear_desc *desc,
                                 const attn_linear_args *args);

/*
 * The gradients of linear attention: from Q, K, V and dO = dL/dO, compute
 * dQ, dK, dV under the forward's description (without state).  With
 * a_ij = phi(q_i) . phi(k_j) over the keys i sees, D_i = sum_j a_ij + eps,
 * O_i = sum_j a_ij v_j / D_i:
 *
 *   g_i = dO_i / D_i            c_i = -(dO_i . O_i) / D_i
 *   dA_ij = g_i . v_j + c_i
 *   dV_j = sum_i a_ij g_i       (over the queries i that see j)
 *   dQ_i = phi'(q_i) * sum_j dA_ij phi(k_j)
 *   dK_j = phi'(k_j) * sum_i dA_ij phi(q_i)
 *
 * with phi' the derivative of the feature map (ELU1: 1 for x > 0, exp(x)
 * otherwise; RELU: 1 for x > 0, 0 otherwise; IDENTITY: 1).  Computed in
 * chunks as the forward: a forward sweep with the running state (S, z)
 * gives D_i, dO_i . O_i and dQ; a reverse sweep with the running state of
 * the later rows (sum phi(q_i) g_i^T, sum c_i phi(q_i)) gives dK and dV.
 * The workspace is threads x (the chunk buffers, two dk x dv states and two
 * floats per query row of a GQA group: D_i and dO_i . O_i, kept from one
 * sweep to the other as SDPA keeps its logsumexp).  Every element of dQ,
 * dK, dV is written: 0 for padded query rows and for K/V rows no query
 * sees.  What the forward never reads, the backward never reads either
 * (nor the dO rows of padded queries).  A KV head's dK and dV sum over the
 * query heads of its group inside one work item, in a fixed order: bitwise
 * identical for any thread count.
 */
typedef struct attn_linear_bwd_desc {
    /* The forward's description.  use_state must be 0; its o view is not
     * used (its strides are ignored).  Its element types (1.1) may each be
     * F32, F16 or BF16: each gradient has the type of its tensor (dQ
     * q_type, dK k_type, dV v_type) and dO that of O (o_type); 16-bit
     * tensors go through args.args16 (attn_linear_bwd_args16), widened
     * exactly to fp32 as a chunk's rows are read, and every gradient is
     * computed in fp32 and rounded once to its type: bitwise the fp32
     * backward on the widened values, then rounded (round to nearest
     * even, as attn_dtype_encode). */
    attn_linear_desc fwd;

    /* dO [B][Hq][n][dv] (input), dQ [B][Hq][n][dk], dK [B][Hkv][m][dk],
     * dV [B][Hkv][m][dv] (outputs, nested views as O). */
    attn_view d_o, dq, dk, dv;

    /* Must be zero (attn_linear_bwd_desc_init does it). */
    int64_t reserved[16];
} attn_linear_bwd_desc;

/* fwd as attn_linear_desc_init sets it, every other view
 * ATTN_STRIDE_UNSET.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_bwd_desc_init(attn_linear_bwd_desc *desc);

/* The 16-bit tensors of a backward call (1.1), as uint16_t in the views
 * of the desc (counted in uint16_t elements): each is given here when its
 * type (below) is F16 or BF16, and must be NULL when it is F32 (its float
 * pointer in attn_linear_bwd_args is used then).  Each 16-bit input is
 * widened exactly to fp32 (a chunk of 64 rows at a time, into the
 * workspace), the backward runs as in fp32 on the widened values, and
 * each 16-bit gradient, computed in fp32, is rounded once to its type
 * (round to nearest even, as attn_dtype_encode): dQ, dK, dV are bitwise
 * the fp32 backward's on the widened inputs, then rounded. */
typedef struct attn_linear_bwd_args16 {
    const uint16_t *q;        /* Q, when fwd.q_type is F16 or BF16 */
    const uint16_t *k;        /* K, when fwd.k_type is F16 or BF16 */
    const uint16_t *v;        /* V, when fwd.v_type is F16 or BF16 */
    const uint16_t *d_o;      /* dL/dO, when fwd.o_type is F16 or BF16 */
    uint16_t *dq;             /* dQ, when fwd.q_type is (of that type) */
    uint16_t *dk;             /* dK, when fwd.k_type is */
    uint16_t *dv;             /* dV, when fwd.v_type is */
    /* Room to grow: must be NULL (attn_linear_bwd_args16_init does it). */
    void *reserved[8];
} attn_linear_bwd_args16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_linear_bwd_args16_init(attn_linear_bwd_args16 *args);

/* The per-call pointers; those of features the plan does not use must be
 * NULL. */
typedef struct attn_linear_bwd_args {
    const float *q;           /* when fwd.q_type is F32 (the default) */
    const float *k;           /* when fwd.k_type is F32 */
    const float *v;           /* when fwd.v_type is F32 */
    const float *d_o;         /* dL/dO, when fwd.o_type is F32 */
    float *dq;                /* when fwd.q_type is F32 */
    float *dk;                /* when fwd.k_type is F32 */
    float *dv;                /* when fwd.v_type is F32 */
    const int32_t *kv_lens;   /* [B], when fwd.use_kv_lens */
    const int32_t *q_lens;    /* [B], when fwd.use_q_lens */
    /* The 16-bit tensors, when some type of fwd is F16 or BF16 (then q, k,
     * v, d_o, dq, dk, dv above are given only for the F32 ones); NULL
     * when every type is F32.  (1.1, in the room of reserved[0].) */
    const attn_linear_bwd_args16 *args16;
    /* Room to grow: must be NULL (attn_linear_bwd_args_init does it). */
    void *reserved[7];
} attn_linear_bwd_args;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_bwd_args_init(attn_linear_bwd_args *args);

typedef struct attn_linear_bwd_plan attn_linear_bwd_plan;

/*
 * Validate *desc and make a backward plan.  Returns ATTN_OK,
 * ATTN_ERR_NULL_ARGUMENT, ATTN_ERR_BAD_OPTION (a nonzero reserved field
 * here, fwd.use_state set), any status attn_linear_plan_create returns for
 * desc->fwd (its o view aside; an unknown element type is
 * ATTN_ERR_BAD_OPTION), ATTN_ERR_STRIDES_UNSET, ATTN_ERR_BAD_STRIDE
 * or ATTN_ERR_TOO_LARGE for the views of dO, dQ, dK, dV (in that order),
 * or ATTN_ERR_OUT_OF_MEMORY.
 */
ATTN_API attn_status attn_linear_bwd_plan_create(attn_linear_bwd_plan **plan,
                                                 const attn_linear_bwd_desc *desc);

/* Free a plan; NULL is accepted (returns ATTN_OK). */
ATTN_API attn_status attn_linear_bwd_plan_destroy(attn_linear_bwd_plan *plan);

/* Bytes of workspace the backward execute needs (see above; with 16-bit
 * tensors also, per thread, 64 widened rows of each 16-bit Q, K (x qk_dim)
 * and V, dO (x v_dim) floats).  Returns ATTN_OK or
 * ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_linear_bwd_workspace_size(const attn_linear_bwd_plan *plan,
                                                    size_t *bytes);

/*
 * Compute the gradients.  workspace as for attn_linear_execute.  Returns
 * ATTN_OK, ATTN_ERR_BAD_OPTION (a reserved pointer of args or of
 * *args.args16 not NULL), ATTN_ERR_NULL_ARGUMENT (plan, args, args16 when
 * some type is 16-bit, q, k, v, d_o, dq, dk, dv (of args or args16, as the
 * types say), or kv_lens / q_lens when used), ATTN_ERR_ARGUMENT_MISMATCH
 * (a pointer the plan does not use: args16 when every type is F32, the
 * float pointer of a 16-bit tensor or the 16-bit one of an F32 tensor,
 * kv_lens or q_lens not used but given), ATTN_ERR_BAD_LENGTH,
 * ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_WORKSPACE_ALIGNMENT or
 * ATTN_ERR_OUT_OF_MEMORY.  On error no output is written.
 */
ATTN_API attn_status attn_linear_bwd_execute(const attn_linear_bwd_plan *plan,
                                             const attn_linear_bwd_args *args,
                                             void *workspace, size_t workspace_bytes);

/* One-shot: plan, execute with internal workspace, destroy. */
ATTN_API attn_status attn_linear_backward(const attn_linear_bwd_desc *desc,
                                          const attn_linear_bwd_args *args);

/* ------------------------------------------------------------------------ */
/* Multi-head attention layer                                                */
/* ------------------------------------------------------------------------ */

/*
 * torch.nn.MultiheadAttention(batch_first=True) as a plan:
 *
 *   Q = X W_q^T + b_q         X     [B][L][E]      (query input)
 *   K = Xk W_k^T + b_k        Xk    [B][S][kdim]   (key input; X itself for
 *   V = Xv W_v^T + b_v        Xv    [B][S][vdim]    self-attention)
 *   O = SDPA(Q, K, V) per head, scale 1/sqrt(E / H) unless set
 *   Y = O W_o^T + b_o         Y     [B][L][E]
 *
 * Weights follow nn.Linear (y = x W^T + b): W_q [E][E], W_k [Hkv*dh][kdim],
 * W_v [Hkv*dh][vdim], W_o [E][E] with dh = E / H (Hkv = H unless GQA), or a
 * packed in_proj [3E][E] (rows: W_q, then W_k, then W_v) with in_proj_bias
 * [3E], as nn.MultiheadAttention stores them when kdim == vdim == E.
 * The projections write Q, K, V in [B][L|S][H][dh] (BSHD) layout, which the
 * SDPA core reads as head-strided views: nothing is transposed or copied.
 * Every SDPA mask and option applies, with the shapes of SDPA (n = L,
 * m = S, Hq = H); key padding is also accepted as a [B][S] uint8 mask with
 * an explicit polarity (nn.MultiheadAttention's key_padding_mask is
 * ATTN_MASK_DROP_NONZERO: True = ignore).  A query row with no visible key
 * (or a padded one, i >= q_lens[b]) has an attention output of 0, so its Y
 * row is b_o (0 without biases) and its weights are 0: never NaN.
 */
typedef enum attn_weights_mode {
    ATTN_WEIGHTS_NONE = 0,
    ATTN_WEIGHTS_PER_HEAD = 1,   /* [B][H][L][S], contiguous */
    ATTN_WEIGHTS_AVERAGED = 2    /* [B][L][S], contiguous, mean over heads
                                    (average_attn_weights=True) */
} attn_weights_mode;

typedef struct attn_mha_desc {
    int64_t embed_dim;      /* E, a multiple of num_heads */
    int64_t num_heads;      /* H */
    int64_t num_kv_heads;   /* Hkv for GQA; 0 means H.  H % Hkv == 0 */
    int64_t kdim;           /* features of the key input; 0 means E */
    int64_t vdim;           /* features of the value input; 0 means E */
    int64_t batch;          /* B */
    int64_t q_len;          /* L */
    int64_t kv_len;         /* S; must equal L for self-attention */

    int self_attention;     /* keys and values are projected from X */
    int packed_in_proj;     /* weights in in_proj [3E][E]: needs
                               kdim == vdim == E and Hkv == H */
    int has_bias;           /* b_q, b_k, b_v (or in_proj_bias) and b_o */

    /* Distance in elements between consecutive rows (tokens) of X, the key
     * and value inputs and Y; 0 means dense (E, kdim, vdim, E).  Rows of
     * batch b follow those of batch b - 1: row t of batch b is at
     * (b * len + t) * stride. */
    int64_t x_stride, key_stride, value_stride, out_stride;

    /* SDPA options, as in attn_sdpa_desc (n = L, m = S, Hq = H). */
    float scale;                 /* NaN (default): 1/sqrt(E / H) */
    attn_align align;
    int64_t window_left, window_right;
    int use_kv_lens, use_q_lens;
    attn_mask_mode mask_mode;    /* attn_mask as uint8 */
    attn_view mask;
    int use_bias;                /* attn_mask as additive float */
    attn_view bias;
    /* key_padding_mask [B][S] uint8 (row stride S); combines (AND) with the
     * other masks. */
    attn_mask_mode key_padding_mode;

    attn_weights_mode weights;   /* attention weights output */
    int threads;                 /* as in attn_sdpa_desc */

    /* Dropout on the attention weights (nn.MultiheadAttention's dropout),
     * 0 <= p <= 1, applied per head exactly as attn_sdpa_desc applies it:
     * whether (b, h, i, j) is kept (h the query head, i the query, j the
     * key) is the pure function of (dropout_seed, dropout_offset, b, h, i,
     * j) of attn_dropout_mask_fill, and a kept entry is scaled by
     * 1 / (1 - p).  attn_mha_execute and attn_mha_train_execute apply it,
     * attn_mha_bwd_execute regenerates the same mask.  The weights output (per
     * head or averaged) is of the dropped probabilities, the P' that
     * multiplies V, as SDPA's probabilities output (PyTorch returns the
     * weights after dropout too).  p outside [0, 1] or NaN is
     * ATTN_ERR_BAD_OPTION; p = 0 (the default) runs exactly the path
     * without dropout. */
    double dropout_p;
    uint64_t dropout_seed;
    uint64_t dropout_offset;

    /* Sparse attention, as in attn_sdpa_desc (n = L, m = S, Hq = H):
     * global key tokens [B][S] and global query tokens [B][L] (uint8, in
     * attn_mha_args), a block-sparse layout [H|1][ceil(L/bs)][ceil(S/bs)].
     * The same rules and statuses; passed through to the SDPA of
     * attn_mha_execute, attn_mha_train_execute and attn_mha_bwd_execute. */
    int use_global_k;
    int use_global_q;
    int layout_per_head;
    int reserved_flags;          /* must be zero */
    int64_t block_size;

    /* The engine of the layer's products (see attn_engine): the
     * projections, the attention and, in attn_mha_bwd_execute, the input
     * gradients (the weight gradients stay on the BLAS); AUTO by default.
     * Anything else is ATTN_ERR_BAD_OPTION. */
    attn_engine engine;
    int reserved_pad;            /* must be zero */

    /* Element types (see "Multi-head attention layer: element types"
     * below): x_type of the layer's inputs and output (X, the key and
     * value inputs, Y), w_type of its weights and biases.  F32 (the
     * default) reads and writes the float pointers of attn_mha_args and
     * attn_mha_weights; F16 or BF16 the uint16_t pointers of
     * attn_mha_args16 (args.args16) and attn_mha_weights16
     * (weights.weights16), and the row strides then count uint16_t
     * elements.  Unknown values are ATTN_ERR_BAD_OPTION.  (Added in 1.1
     * in the room of reserved[0].) */
    attn_dtype x_type;
    attn_dtype w_type;

    int64_t reserved[8];         /* must be zero */
} attn_mha_desc;

/* Defaults: sizes 0, self_attention 0, packed_in_proj 0, has_bias 1 (as
 * nn.MultiheadAttention), dense strides, scale NaN, an unbounded top-left
 * window, no masks, no weights, threads 0, no dropout (dropout_p,
 * dropout_seed and dropout_offset 0).  Returns ATTN_OK or
 * ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mha_desc_init(attn_mha_desc *desc);

/*
 * Multi-head attention layer: element types.
 *
 * X, Xk, Xv and Y (x_type) and the weights and biases (w_type) may each be
 * F32, F16 or BF16.  A 16-bit tensor is passed through the uint16_t
 * pointers of attn_mha_args16 and attn_mha_weights16 (one struct each,
 * reached through args.args16 and weights.weights16), its float pointer
 * NULL; an F32 tensor through its float pointer, and args.args16
 * (weights.weights16) is NULL when x_type (w_type) is F32.  The attention
 * weights output (args.weights), the additive bias (args.bias) and every
 * other buffer stay as they are (fp32, uint8, int32).  Conversions round
 * to nearest even, as attn_dtype_encode.  Two ways to compute:
 *
 * - BF16 products: x_type == w_type == BF16 on the tile engine (see
 *   attn_engine; not with the sparse options, which take the second way).
 *   Each projection is a product of the BF16 rows of its input, read in
 *   place, and its BF16 weight, packed once per call into the workspace,
 *   with VDPBF16PS's arithmetic and fp32 accumulation (as the SDPA's BF16
 *   products, "Element types of the computation"); the bias is added in
 *   fp32.  The projected Q, K and V are rounded to BF16 into the
 *   workspace and the attention is the SDPA at BF16 Q, K, V and O (its
 *   BF16 products, P rounded to BF16 for P V, off the decode path); its
 *   output O, rounded to BF16 once, is the BF16 input of the output
 *   projection, and Y is rounded to BF16 once.  Rounding Q, K, V, P, O
 *   and Y each costs up to 2^-8 relative; the stated and tested bound is
 *   in test/test_mha.c.
 *
 * - Otherwise (F16, mixed types, the BLAS engine, sparse options): every
 *   16-bit value is widened exactly to fp32 as it is read (the weights
 *   once per call, the input rows a block at a time, into the workspace)
 *   and the layer runs in fp32; Y is rounded to x_type once.  The result
 *   is bitwise that of the same call in fp32 on the widened inputs and
 *   weights, then Y rounded.
 *
 * Both are bitwise identical for any thread count.
 *
 * Training (1.1) takes the same types.  attn_mha_train_execute is
 * attn_mha_execute (the same Y, bitwise) that also keeps Q, K, V and O in
 * the context: BF16 with BF16 products (the context is then half the
 * size), else fp32.  attn_mha_bwd_execute takes dY at x_type (16-bit:
 * grads.grads16->dy, the dy argument NULL) and writes each gradient at the
 * type of its tensor: dX, dXk, dXv at x_type, the weights' and biases'
 * gradients at w_type (16-bit ones through grads.grads16, see
 * attn_mha_grads16).  It widens every 16-bit input (X, Xk, Xv, dY, the
 * weights) exactly to fp32 into its workspace and sums every gradient in
 * fp32, rounding each once at the end (with accumulate = 1: old widened,
 * plus g, rounded once).  The SDPA backward between runs as the forward
 * ran: with BF16 products it is attn's BF16 SDPA backward on the
 * context's BF16 Q, K, V, O, with dO = dY W_o rounded to BF16 and dQ, dK,
 * dV coming out BF16 (then widened for the projections' gradients); else
 * the fp32 one.  So where the types widen the gradients are bitwise those
 * of the fp32 training calls on the widened inputs and weights, each then
 * rounded to its type.
 */

/* The 16-bit inputs and output (x_type F16 or BF16), through
 * attn_mha_args.args16.  Shapes and row strides as x, key, value and out
 * of attn_mha_args, in uint16_t elements. */
typedef struct attn_mha_args16 {
    const uint16_t *x;             /* [B][L][E] */
    const uint16_t *key;           /* [B][S][kdim]; NULL for self-attention */
    const uint16_t *value;         /* [B][S][vdim]; NULL for self-attention */
    uint16_t *out;                 /* [B][L][E] */
    /* Room to grow: must be NULL (attn_mha_args16_init does it). */
    void *reserved[8];
} attn_mha_args16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_mha_args16_init(attn_mha_args16 *args16);

/* The 16-bit weights and biases (w_type F16 or BF16), through
 * attn_mha_weights.weights16: the fields, shapes and rules of
 * attn_mha_weights. */
typedef struct attn_mha_weights16 {
    const uint16_t *in_proj_weight;
    const uint16_t *in_proj_bias;
    const uint16_t *q_weight;
    const uint16_t *k_weight;
    const uint16_t *v_weight;
    const uint16_t *q_bias;
    const uint16_t *k_bias;
    const uint16_t *v_bias;
    const uint16_t *out_weight;
    const uint16_t *out_bias;
    /* Room to grow: must be NULL (attn_mha_weights16_init does it). */
    void *reserved[8];
} attn_mha_weights16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_mha_weights16_init(attn_mha_weights16 *weights16);

/* The layer's parameters (read at execute; pointers the layout does not
 * use must be NULL). */
typedef struct attn_mha_weights {
    const float *in_proj_weight;   /* [3E][E]  when packed_in_proj */
    const float *in_proj_bias;     /* [3E]     when packed_in_proj && has_bias */
    const float *q_weight;         /* [E][E]        otherwise */
    const float *k_weight;         /* [Hkv*dh][kdim] */
    const float *v_weight;         /* [Hkv*dh][vdim] */
    const float *q_bias;           /* [E]      when has_bias */
    const float *k_bias;           /* [Hkv*dh] when has_bias */
    const float *v_bias;           /* [Hkv*dh] when has_bias */
    const float *out_weight;       /* [E][E]   always */
    const float *out_bias;         /* [E]      when has_bias */
    /* The weights and biases when w_type is F16 or BF16 (the float
     * pointers above NULL), else NULL.  (1.1, in reserved room.) */
    const attn_mha_weights16 *weights16;
    /* Room to grow: must be NULL (attn_mha_weights_init does it). */
    void *reserved[7];
} attn_mha_weights;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mha_weights_init(attn_mha_weights *weights);

/* The per-call buffers (pointers for features the plan does not use must be
 * NULL). */
typedef struct attn_mha_args {
    const float *x;                /* [B][L][E] */
    const float *key;              /* [B][S][kdim]; NULL for self-attention */
    const float *value;            /* [B][S][vdim]; NULL for self-attention */
    float *out;                    /* [B][L][E] */
    const int32_t *kv_lens;        /* [B], when use_kv_lens */
    const int32_t *q_lens;         /* [B], when use_q_lens */
    const uint8_t *mask;           /* when mask_mode != ATTN_MASK_NONE */
    const float *bias;             /* when use_bias */
    const uint8_t *key_padding_mask; /* [B][S], when key_padding_mode != NONE */
    float *weights;                /* when weights != ATTN_WEIGHTS_NONE */
    const uint8_t *global_k;       /* [B][S], when use_global_k */
    const uint8_t *global_q;       /* [B][L], when use_global_q */
    const uint8_t *layout;         /* [H|1][ceil(L/bs)][ceil(S/bs)], when
                                      block_size != 0 */
    /* X, key, value and out when x_type is F16 or BF16 (x, key, value and
     * out above NULL), else NULL.  (1.1, in reserved room.) */
    const attn_mha_args16 *args16;
    /* Room to grow: must be NULL (attn_mha_args_init does it). */
    void *reserved[7];
} attn_mha_args;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mha_args_init(attn_mha_args *args);

typedef struct attn_mha_plan attn_mha_plan;

/*
 * Validate *desc and make a plan.  Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT,
 * ATTN_ERR_BAD_SIZE (a size <= 0 where required, E % H != 0, or S != L for
 * self-attention), ATTN_ERR_TOO_LARGE (also when the byte count of a weight
 * matrix, e.g. [3E][E] floats, or of the workspace is not representable),
 * ATTN_ERR_HEAD_RATIO,
 * ATTN_ERR_BAD_STRIDE (a row stride shorter than its row, or negative;
 * key_stride and value_stride are ignored in self-attention),
 * ATTN_ERR_STRIDES_UNSET, ATTN_ERR_BAD_SCALE, ATTN_ERR_BAD_OPTION (unknown
 * enum value, x_type or w_type included, nonzero reserved field,
 * packed_in_proj with kdim or vdim != E
 * or Hkv != H, self_attention with kdim or vdim != E, or dropout_p outside
 * [0, 1] or NaN),
 * ATTN_ERR_BAD_THREADS or ATTN_ERR_OUT_OF_MEMORY.
 */
ATTN_API attn_status attn_mha_plan_create(attn_mha_plan **plan, const attn_mha_desc *desc);

/* Free a plan; NULL is accepted.  Returns ATTN_OK. */
ATTN_API attn_status attn_mha_plan_destroy(attn_mha_plan *plan);

/* Bytes of workspace attn_mha_execute (and attn_mha_train_execute) needs:
 * the projected Q, K, V and the
 * attention output (B x (L + 2 S) x E floats or less; half of that with
 * BF16 products), per-head weights
 * when averaged weights are asked for, a combined mask when both an element
 * mask and key padding are given, and the SDPA workspace.  16-bit types
 * add the weights as the call prepares them (packed BF16 pairs, or widened
 * to fp32 when w_type is 16-bit without BF16 products), the biases in
 * fp32 and a block of rows per thread.  Reusing one
 * workspace across calls avoids any allocation.  Returns ATTN_OK or
 * ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mha_workspace_size(const attn_mha_plan *plan, size_t *bytes);

/*
 * Run the layer: Y = MHA(X, Xk, Xv).  workspace as for attn_sdpa_execute
 * (NULL: allocated and freed inside the call).  Returns ATTN_OK,
 * ATTN_ERR_NULL_ARGUMENT (plan, weights, args, a weight or buffer the plan
 * needs), ATTN_ERR_ARGUMENT_MISMATCH (a pointer the plan does not use),
 * ATTN_ERR_BAD_OPTION (a reserved pointer not NULL), ATTN_ERR_BAD_LENGTH,
 * ATTN_ERR_WORKSPACE_TOO_SMALL, ATTN_ERR_WORKSPACE_ALIGNMENT or
 * ATTN_ERR_OUT_OF_MEMORY.  On error nothing is written to out (or
 * args16->out) or weights.
 * The order of the checks: plan, weights, args NULL; the reserved tails of
 * weights and args; weights.weights16 and args.args16 (required when
 * w_type, x_type is F16 or BF16, NULL otherwise); their reserved tails;
 * then each weight and buffer in the order of the structs, the 16-bit
 * pointer of a tensor right after its float one (of the two, the one of
 * the tensor's type is required when the plan uses the tensor, the other
 * must be NULL); the lengths; the workspace.
 */
ATTN_API attn_status attn_mha_execute(const attn_mha_plan *plan, const attn_mha_weights *weights,
                                      const attn_mha_args *args, void *workspace,
                                      size_t workspace_bytes);

/* ------------------------------------------------------------------------ */
/* Multi-head attention layer: training (forward with saved context,        */
/* backward)                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Training runs in two calls on the same plan:
 *
 *   attn_mha_train_execute   Y = MHA(X, Xk, Xv) bitwise as attn_mha_execute
 *                            (and the attention weights if the plan asks),
 *                            and saves in a caller buffer, the context, what
 *                            the backward needs: the projected Q, K, V (in
 *                            the BSHD layout the plan uses), the attention
 *                            output O (before the output projection) and
 *                            the logsumexp [B][H][L] of every query row;
 *   attn_mha_bwd_execute        from dY = dL/dY and the context, dX (and dXk,
 *                            dXv in cross-attention) and the gradients of
 *                            every weight and bias, in the weights' layout.
 *
 * The backward, with the nn.Linear convention y = x W^T + b (row vectors,
 * sums over all B x L query tokens or B x S key tokens):
 *
 *   dO   = dY W_o            dW_o = dY^T O        db_o = sum of dY rows
 *   dQ, dK, dV = SDPA backward of (Q, K, V, O, lse) at dO, under the same
 *                mask, bias, window, lengths, key padding and GQA as the
 *                forward (attn_sdpa_bwd_*)
 *   dW_q = dQ^T X            db_q = sum of dQ rows
 *   dW_k = dK^T Xk           db_k = sum of dK rows
 *   dW_v = dV^T Xv           db_v = sum of dV rows
 *   dX = dQ W_q (+ dK W_k + dV W_v in self-attention, where Xk = Xv = X)
 *   dXk = dK W_k,  dXv = dV W_v   (cross-attention)
 *
 * With packed weights, d_in_proj_weight [3E][E] holds dW_q, dW_k, dW_v one
 * after the other and d_in_proj_bias [3E] db_q, db_k, db_v, as PyTorch's
 * in_proj_weight.grad.  The gradient of the additive attention bias
 * (attn_mask as float) is not computed: it is an input only (use
 * attn_sdpa_bwd_* with want_dbias for it).
 *
 * Key rows no query sees (padded keys, j >= kv_lens[b], or hidden by every
 * mask) get dK = dV = 0, so their dXk and dXv rows are 0 (in
 * self-attention their dX rows get dQ's part only).  Padded query rows
 * (i >= q_lens[b]) and rows with no visible key have O = 0 and dQ = 0: their
 * dY still reaches db_o (Y = b_o there), and nothing else.
 *
 * accumulate = 0 overwrites every gradient; accumulate = 1 adds into the
 * values already there, as PyTorch accumulates into .grad, for dX, dXk and
 * dXv too: each element becomes old + g with g the value accumulate = 0
 * would have written (one fp32 addition, so exactly that).
 *
 * The row strides of the desc apply to the gradients of the inputs and to
 * dY as to the tensors they belong to: dX rows are x_stride apart, dXk
 * key_stride, dXv value_stride and dY out_stride; elements in the gaps
 * between rows are neither read nor written.
 *
 * Results are bitwise identical for any thread count: the input-gradient
 * GEMMs run in fixed blocks of token rows, each weight gradient in fixed
 * blocks of its rows, each as one GEMM over all tokens (no cross-thread
 * sum), the bias gradients as sums in token order, and the SDPA backward
 * is itself thread-count independent.
 *
 * With dropout_p > 0, train_forward and backward draw the same keep mask
 * (a pure function of the desc's seed and offset and of (b, h, i, j)), so
 * the backward differentiates exactly the dropped forward it follows.
 */

/* The 16-bit side of the backward (1.1), through attn_mha_grads.grads16,
 * required when x_type or w_type is F16 or BF16 and NULL otherwise: dY and
 * the input gradients when x_type is 16-bit (then the dy argument and
 * grads.dx, dkey, dvalue are NULL), the weights' and biases' gradients
 * when w_type is (then grads' float ones are NULL).  Shapes, strides and
 * the rules of which are used as in attn_mha_grads, in uint16_t
 * elements. */
typedef struct attn_mha_grads16 {
    const uint16_t *dy;          /* [B][L][E], row stride out_stride */
    uint16_t *dx;
    uint16_t *dkey;
    uint16_t *dvalue;
    uint16_t *d_in_proj_weight;
    uint16_t *d_in_proj_bias;
    uint16_t *d_q_weight;
    uint16_t *d_k_weight;
    uint16_t *d_v_weight;
    uint16_t *d_q_bias;
    uint16_t *d_k_bias;
    uint16_t *d_v_bias;
    uint16_t *d_out_weight;
    uint16_t *d_out_bias;
    /* Room to grow: must be NULL (attn_mha_grads16_init does it). */
    void *reserved[8];
} attn_mha_grads16;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT.  (1.1) */
ATTN_API attn_status attn_mha_grads16_init(attn_mha_grads16 *grads16);

/* The gradients backward writes; the pointers of the weight layout the
 * plan does not use, of biases without has_bias, and dkey/dvalue in
 * self-attention must be NULL (ATTN_ERR_ARGUMENT_MISMATCH), all others are
 * required (ATTN_ERR_NULL_ARGUMENT).  Shapes as the corresponding weights
 * and inputs. */
typedef struct attn_mha_grads {
    float *dx;                 /* [B][L][E], row stride x_stride */
    float *dkey;               /* [B][S][kdim], key_stride; cross only */
    float *dvalue;             /* [B][S][vdim], value_stride; cross only */
    float *d_in_proj_weight;   /* [3E][E]   when packed_in_proj */
    float *d_in_proj_bias;     /* [3E]      when packed_in_proj && has_bias */
    float *d_q_weight;         /* [E][E]          otherwise */
    float *d_k_weight;         /* [Hkv*dh][kdim] */
    float *d_v_weight;         /* [Hkv*dh][vdim] */
    float *d_q_bias;           /* [E]       when !packed_in_proj && has_bias */
    float *d_k_bias;           /* [Hkv*dh] */
    float *d_v_bias;           /* [Hkv*dh] */
    float *d_out_weight;       /* [E][E]    always */
    float *d_out_bias;         /* [E]       when has_bias */
    /* The 16-bit dY and gradients (x_type or w_type F16 or BF16), else
     * NULL.  (Added in 1.1 in the room of reserved[0].) */
    const attn_mha_grads16 *grads16;
    /* Room to grow: must be NULL (attn_mha_grads_init does it). */
    void *reserved[7];
} attn_mha_grads;

/* Every pointer NULL.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_mha_grads_init(attn_mha_grads *grads);

/* Bytes of the context train_forward fills and backward reads: Q, K, V (one
 * [B*L][3E] block in self-attention with packed weights, else [B*L][E] and
 * two [B*S][Hkv*dh]), O [B*L][E] (floats, or BF16 with BF16 products) and
 * the logsumexp [B][H][L] (floats), each block rounded up to 64 bytes.
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT or
 * ATTN_ERR_TOO_LARGE (a plan whose forward fits but whose context or
 * backward workspace is not representable: every training call of it
 * returns ATTN_ERR_TOO_LARGE). */
ATTN_API attn_status attn_mha_context_size(const attn_mha_plan *plan, size_t *bytes);

/* Bytes of workspace attn_mha_bwd_execute needs: dO, dQ, dK, dV (the sizes of
 * O, Q, K, V), a combined mask as in the forward, the SDPA backward's
 * workspace and per-thread blocks for the gradient GEMMs; with 16-bit
 * types also fp32 copies of what is 16-bit among X, Xk, Xv, dY, the
 * weights and the gradients (and BF16 dO, dQ, dK, dV and an fp32 O with
 * BF16 products).  (train_forward takes the workspace of
 * attn_mha_workspace_size.)  Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT or
 * ATTN_ERR_TOO_LARGE (as attn_mha_context_size). */
ATTN_API attn_status attn_mha_bwd_workspace_size(const attn_mha_plan *plan, size_t *bytes);

/*
 * attn_mha_execute that also fills the context: the same outputs (out
 * bitwise the same, weights if the plan asks), and context receives Q, K,
 * V, O and the logsumexp of the call.  context is required (the caller
 * keeps it until the backward): 64-byte aligned and at least
 * attn_mha_context_size() bytes.  workspace as for attn_mha_execute, of
 * attn_mha_workspace_size() bytes (NULL: allocated inside the call).
 * Returns what attn_mha_execute returns, and ATTN_ERR_TOO_LARGE (see
 * attn_mha_context_size), ATTN_ERR_NULL_ARGUMENT (context NULL), ATTN_ERR_WORKSPACE_TOO_SMALL (context_bytes short) or
 * ATTN_ERR_WORKSPACE_ALIGNMENT (context misaligned).  On error nothing is
 * written to out, weights or the context.
 */
ATTN_API attn_status attn_mha_train_execute(const attn_mha_plan *plan,
                                            const attn_mha_weights *weights,
                                            const attn_mha_args *args, void *context,
                                            size_t context_bytes, void *workspace,
                                            size_t workspace_bytes);

/*
 * The gradients of the layer at dY [B][L][E] (row stride out_stride; NULL
 * when x_type is 16-bit: grads->grads16->dy), from
 * the context a train_forward with this plan filled.  weights and args are
 * those of that train_forward (x, key, value, lengths, masks, bias and key
 * padding mask must hold the same values); args->out and args->weights are
 * ignored, so the forward's args can be passed as they are.  accumulate: 0
 * overwrites the gradients, 1 adds into them (see above).  context as in
 * train_forward (read only); workspace 64-byte aligned and at least
 * attn_mha_bwd_workspace_size() bytes, or NULL (allocated inside).
 * Returns ATTN_OK, ATTN_ERR_NULL_ARGUMENT (plan, weights, args, dy at F32, context,
 * grads, a weight, buffer or gradient the plan needs), ATTN_ERR_BAD_OPTION
 * (accumulate not 0 or 1, a reserved pointer of grads16 not NULL),
 * ATTN_ERR_ARGUMENT_MISMATCH (a pointer the plan
 * does not use, args->out and args->weights excepted (and args16->out);
 * of a tensor's float and 16-bit pointers, the one of the other type),
 * ATTN_ERR_BAD_LENGTH, ATTN_ERR_TOO_LARGE (see attn_mha_context_size),
 * ATTN_ERR_WORKSPACE_TOO_SMALL (workspace or context short), ATTN_ERR_WORKSPACE_ALIGNMENT (workspace or context misaligned) or
 * ATTN_ERR_OUT_OF_MEMORY.  On error no gradient is written.
 */
ATTN_API attn_status attn_mha_bwd_execute(const attn_mha_plan *plan, const attn_mha_weights *weights,
                                       const attn_mha_args *args, const float *dy,
                                       const void *context, size_t context_bytes,
                                       attn_mha_grads *grads, int accumulate, void *workspace,
                                       size_t workspace_bytes);

/* ------------------------------------------------------------------------ */
/* BLAS and CPU information                                                  */
/* ------------------------------------------------------------------------ */

typedef enum attn_blas_threading {
    ATTN_BLAS_THREADING_UNKNOWN = 0,
    ATTN_BLAS_THREADING_SEQUENTIAL = 1,
    ATTN_BLAS_THREADING_PTHREADS = 2,
    ATTN_BLAS_THREADING_OPENMP = 3
} attn_blas_threading;

typedef struct attn_blas_info {
    char backend[16];     /* chosen at build time: "openblas", "blis",
                             "mkl" or "netlib" */
    char loaded[32];      /* found at run time in the process: "openblas",
                             "blis", "mkl", "netlib" or "unknown" */
    char library[256];    /* file of the shared object providing the sgemm
                             attn calls ("" if statically linked) */
    char version[128];    /* the loaded library's own version/config string
                             ("" when it has none) */
    char kernel[64];      /* its kernel: OpenBLAS core name, BLIS
                             architecture, "" otherwise */
    attn_blas_threading threading;
    char simd[16];        /* attn's own softmax kernels: "avx512", "avx2"
                             or "scalar" */
    int openmp;           /* 1 if attn was built with OpenMP */
    int max_threads;      /* omp_get_max_threads() now (1 without OpenMP) */
    char bf16[16];        /* the BF16 products' kernels a plan made now
                             with the AUTO engine runs (see "Element
                             types of the computation"): "amx" (AMX-BF16's
                             TDPBF16PS), "avx512bf16" (VDPBF16PS),
                             "avx512" (the same arithmetic on AVX-512F),
                             "avx2" (on AVX2 + FMA), "scalar", or
                             "widened" when that engine is
                             the BLAS (BF16 read as fp32).  (1.1, in
                             reserved room.) */
    /* Room to grow: attn_blas_query zeroes it (fields added later are
     * filled in it, so a caller built against this header keeps its
     * size). */
    int64_t reserved[14];
} attn_blas_info;

/* Describe the BLAS really loaded at run time (on Debian the library
 * behind libblas.so.3 can change without a rebuild) and attn's own SIMD
 * path.  Returns ATTN_OK or ATTN_ERR_NULL_ARGUMENT. */
ATTN_API attn_status attn_blas_query(attn_blas_info *info);

/* The engine a plan whose desc asks for `requested` runs on, here and now
 * (ATTN_ENGINE_BLAS or ATTN_ENGINE_TILE in *resolved; see attn_engine:
 * AUTO reads ATTN_ENGINE and the CPU, as plan_create does).  Returns
 * ATTN_OK, ATTN_ERR_NULL_ARGUMENT or ATTN_ERR_BAD_OPTION (not an
 * attn_engine value). */
ATTN_API attn_status attn_engine_resolve(attn_engine requested, attn_engine *resolved);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_H */
