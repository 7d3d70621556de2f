/*
 * fuzz_common.h -- what every file of the fuzz target shares: the input
 * reader and value generator, output buffers with sentinels, caller
 * workspaces, the expected-status rules common to the APIs (views,
 * pointers, lengths, workspace), the invalid-field kinds of SDPA and MHA,
 * dropout decoding, printing and the counters.  fuzz_common.c holds the
 * overview of the target and LLVMFuzzerTestOneInput's dispatch on the
 * first byte (SEL_*).
 *
 * Adding an API (a new element type, a quantized KV cache, ...): add a
 * file and a kind, do not grow an existing function.  Write fuzz_<api>.c
 * with a comment on what it fuzzes and its contract and a
 * `void fuzz_<api>(rd *r, unsigned sel)` cut into decode, plant, run and
 * check stages that pass a small state struct; declare it below; give it
 * a kind in LLVMFuzzerTestOneInput (a byte-0 combination no committed
 * input uses, so that the corpus decodes as before; docs/BUILDING.md,
 * "Fuzzing") with a FUZZ_TIME slot (print_times); add its N_* counters
 * (and print_counts); list the file in fuzz_target_sources
 * (meson.build); write its seeds in gen_seeds.py.
 */
#ifndef ATTN_FUZZ_COMMON_H
#define ATTN_FUZZ_COMMON_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

/* The number of statuses (the last one + 1; attn.h keeps no count in its
 * enum, so that adding a status changes no value a program holds). */
#define N_STATUS (ATTN_ERR_DESC_MISMATCH + 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SENT 0x7fc0deadu   /* bit pattern of every output element before a call */
#define TAILN 8            /* sentinel elements after each output view */
#define POOL_MAX (1 << 20) /* largest input pool (floats) we allocate */
#define BIT(s) (1u << (s))

#define FAIL(...)                                                           \
    do {                                                                    \
        fprintf(stderr, "fuzz_attn: CONTRACT VIOLATION: " __VA_ARGS__);     \
        fputc('\n', stderr);                                                \
        abort();                                                            \
    } while (0)

/* FUZZ_VERBOSE=1: print each decoded problem. */
extern int verbose;

/* FUZZ_STATS=1: at exit, how many inputs ended where (replay and tuning). */
enum { N_PLAN_ONLY, N_ERROR, N_CHECKED, N_MHA_PLAN_ONLY, N_MHA_ERROR, N_MHA_CHECKED,
       N_BWD_ERROR, N_BWD_CHECKED, N_TRAIN_ERROR, N_TRAIN_CHECKED, N_MBWD_ERROR,
       N_MBWD_CHECKED, N_DROP_CHECKED, N_DROP_BWD_CHECKED, N_DROP_MHA_CHECKED,
       N_DROP_MBWD_CHECKED, N_SPARSE_CHECKED, N_SPARSE_BWD_CHECKED, N_SPARSE_MHA_CHECKED,
       N_SPARSE_MBWD_CHECKED, N_LIN_PLAN_ONLY, N_LIN_ERROR, N_LIN_CHECKED, N_LIN_BWD_ERROR, N_LIN_BWD_CHECKED,
       N_LAYOUT_ERROR, N_LAYOUT_CHECKED, N_MERGE_ERROR, N_MERGE_CHECKED, N_MERGE_SKIPPED,
       N_KV_ERROR, N_KV_CHECKED, N_KV_PAGED_SAME, N_KV_NODECODE, N_APPEND_ERROR,
       N_APPEND_CHECKED, N_QO_ERROR, N_QO_CHECKED, N_QO_BF16, N_QO_NODECODE, N_QO_TWIN,
       N_QO_BWD, N_MHA16_ERROR, N_MHA16_CHECKED, N_MHA16_BF16, N_MHA16_TWIN, N_MBWD16_ERROR,
       N_MBWD16_CHECKED, N_MBWD16_TWIN, N_KVQ_ERROR, N_KVQ_CHECKED, N_KV_NODECODE_TWIN, N_KV_INT8,
       N_APPENDQ_ERROR, N_APPENDQ_CHECKED, N_COUNT };
extern long counts[N_COUNT];

/* Byte 0 of an input selects the kind (LLVMFuzzerTestOneInput): bit 0 the
 * API (SDPA or MHA); bit 1 the dropout fields (decode_dropout) in the SDPA
 * or MHA desc, for linear attention its backward; bit 2, for MHA, the
 * training calls (fuzz_mha_train); bit 3 the sparse fields (fuzz_sparse.c);
 * bit 4 linear attention (fuzz_linear.c); bit 5 a layout builder
 * (fuzz_layout.c); bits 4 and 5 together attn_partials_merge
 * (fuzz_merge.c); bit 6 K/V storage types and the paged cache in the SDPA
 * problem (fuzz_kv.c), with bit 0 one attn_kv_append call
 * (fuzz_kv_append.c); bit 7 the element types of Q and O in the SDPA
 * problem (fuzz_qo.c), with bit 0 the element types of the MHA layer
 * (fuzz_mha16.c; ignored by the other kinds).  Inputs with the newer
 * bits clear decode as they did before those bits existed. */
enum { SEL_MHA = 1, SEL_DROPOUT = 2, SEL_TRAIN = 4, SEL_SPARSE = 8, SEL_LINEAR = 16,
       SEL_LAYOUT = 32, SEL_KV = 64, SEL_QO = 128 };
#define SEL_MERGE (SEL_LINEAR | SEL_LAYOUT)

/* ------------------------------------------------------------- reader */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd;

static inline unsigned u8(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static inline unsigned pick(rd *r, unsigned k) { return k ? u8(r) % k : 0; }
static inline uint32_t u32(rd *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)u8(r) << (8 * i);
    return v;
}

/* The planted invalid fields of an API with count kinds (count - 1 and
 * none): the byte bb (already read) picks the first, >= 128 a second. */
static inline void decode_bad(rd *r, unsigned bb, unsigned count, unsigned bad[2])
{
    if (bb) {
        bad[0] = 1 + (bb - 1) % (count - 1);
        if (bb >= 128)
            bad[1] = 1 + pick(r, count - 1);
    }
}

/* Values: a PRNG seeded from the input, so libFuzzer mutates structure. */
typedef struct prng {
    uint64_t s;
} prng;
static inline uint64_t pr_next(prng *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline double pr_unit(prng *g) { return (double)(pr_next(g) >> 11) * 0x1p-53; }
static inline float pr_val(prng *g, double mag) { return (float)((2.0 * pr_unit(g) - 1.0) * mag); }

uint32_t fbits(float f);
float sentinel(void);
void *xmalloc(size_t bytes);

/* ------------------------------------------------------ the kinds */

void fuzz_sdpa(rd *r, unsigned sel);      /* fuzz_sdpa.c (then fuzz_sdpa_bwd.c) */
void fuzz_mha(rd *r, unsigned sel);       /* fuzz_mha.c (training: fuzz_mha_train.c) */
void fuzz_linear(rd *r, unsigned sel);    /* fuzz_linear.c */
void fuzz_layout(rd *r);                  /* fuzz_layout.c */
void fuzz_merge(rd *r);                   /* fuzz_merge.c */
void fuzz_kv_append(rd *r);               /* fuzz_kv_append.c */

/* --------------------------------------------------- expected statuses */

/* must: statuses of the rules the problem breaks (nonzero: an error is
 * required and must be one of must | maybe); maybe: statuses also
 * tolerated (ambiguities of the header, known bugs, huge sizes). */
typedef struct expect {
    unsigned must, maybe;
} expect;

static inline const char *st_name(attn_status s) { return attn_status_str(s); }

void check_status(const char *what, attn_status st, expect e);

enum { VK_INPUT, VK_OUTPUT, VK_LSE, VK_BCAST, VK_DBIAS };

/* The view rules of attn.h ("Tensor views" and the field comments) for a
 * view of [B][H][S][D] with unit dim stride; es16: a K or V view of
 * F16/BF16 storage. */
void expect_view(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D,
                 int kind);
void expect_view_es(expect *e, const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D,
                    int kind, int es16);
int reserved_nonzero(const int64_t *r, int n);
attn_engine engine_of(unsigned bits);
int engine_ok(int e);
int mask_mode_ok(int m);

/* What a call must say of its pointers (used ones non-NULL, unused ones
 * NULL), the per-batch lengths in use, and a caller workspace. */
typedef struct ptr_use { int used; const void *p; } ptr_use;
void expect_call(expect *e, const ptr_use *f, size_t nf, int64_t batch, const int32_t *kv_lens,
                 int64_t m, const int32_t *q_lens, int64_t n, const void *ws, size_t ws_bytes,
                 size_t need);

/* ------------------------------------------------------------- views */

attn_view gen_view(rd *r, const int64_t sz[3], int64_t D);
int64_t view_extent(const attn_view *v, const int64_t sz[3], int64_t D);
size_t place(rd *r, size_t *len, size_t ext, int overlap_ok);
void print_view(const char *name, const attn_view *v);

/* An output buffer: the view at a small offset, sentinel everywhere, and a
 * map of the elements inside the view. */
typedef struct obuf {
    float *base;
    uint8_t *inview;
    size_t count;
    float *ptr; /* view origin */
} obuf;

void obuf_make(obuf *b, rd *r, const attn_view *v, const int64_t sz[3], int64_t D, int64_t ext);
void obuf_clear(obuf *b);
void obuf_free(obuf *b);
void obuf_untouched(const obuf *b, const char *name, const char *when);
void obuf_outside(const obuf *b, const char *name);
float *obuf_snap(const obuf *b);
void obuf_same(const obuf *b, const float *snap, const char *name, int t1, int t2,
               const char *note);

/* The same for an output of 16-bit elements (F16 or BF16: O with o_type
 * not F32): the sentinel is SENT16, a NaN in both types that no rounding
 * of the library's produces. */
#define SENT16 0x7fa5u
typedef struct obuf16 {
    uint16_t *base;
    uint8_t *inview;
    size_t count;
    uint16_t *ptr; /* view origin */
} obuf16;

void obuf16_make(obuf16 *b, rd *r, const attn_view *v, const int64_t sz[3], int64_t D,
                 int64_t ext);
/* The 16-bit twin of a float output buffer: its count, view and offset. */
void obuf16_like(obuf16 *b, const obuf *f);
void obuf16_clear(obuf16 *b);
void obuf16_free(obuf16 *b);
void obuf16_untouched(const obuf16 *b, const char *name, const char *when);
void obuf16_outside(const obuf16 *b, const char *name);
uint16_t *obuf16_snap(const obuf16 *b);
void obuf16_same(const obuf16 *b, const uint16_t *snap, const char *name, int t1, int t2,
                 const char *note);

/* Caller workspace: NULL, exact, larger, NaN-filled; or deliberately bad. */
typedef struct wsp {
    void *raw;
    void *ptr;
    size_t bytes;
    size_t alloc; /* bytes at raw */
} wsp;
void wsp_make(wsp *w, unsigned choice, size_t need, int small, int misaligned);

int threads_other(int t, unsigned c);

/* -------------------------------------- invalid fields of SDPA and MHA */

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

extern const int64_t huge_sizes[8];
int32_t bad_length(rd *r, int64_t lim);

/* ------------------------------------------------------------ dropout */

void decode_dropout(rd *r, double *p, uint64_t *seed, uint64_t *offset);
const char *drop_zero_reset(double p, uint64_t *seed, uint64_t *offset);

#endif
