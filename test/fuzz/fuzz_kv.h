/*
 * fuzz_kv.h -- K/V storage types and the paged cache (fuzz_kv.c): the
 * rules of attn.h's "Decoding and the KV cache" and "Quantized KV caches"
 * (shared by the SDPA problem and attn_kv_append) and the storage of an
 * SDPA problem's K and V (byte 0 bit 6, SEL_KV).
 */
#ifndef ATTN_FUZZ_KV_H
#define ATTN_FUZZ_KV_H

#include "fuzz_common.h"

/* attn.h, "Decoding and the KV cache": the storage types, the paging
 * fields and the K and V views.  dtype_ok: the element types of the
 * computation (F32, F16, BF16); kv_dtype_ok: K/V storage (those and the
 * block types Q8_0 and Q4_0, dtype_block). */
int dtype_ok(int t);
int kv_dtype_ok(int t);
int dtype_block(int t);
/* Bytes of n stored values of a K/V storage type (block types: n rounded
 * up to whole blocks of 32). */
size_t kv_bytes(int t, int64_t n);
/* Twice the unit roundoff of a 16-bit type (2^-8 BF16, 2^-10 F16; 0 F32):
 * the error bound of one rounding to it, with slack. */
double dtype_u2(attn_dtype t);
int kv_plain(const attn_sdpa_desc *d);
void expect_kv_options(expect *e, const attn_sdpa_desc *d);
void expect_kv_views(expect *e, const attn_sdpa_desc *d);
/* "Quantized KV caches": a block-type K or V needs its dim and every
 * stride of its view multiples of 32 (ATTN_ERR_BAD_SIZE, BAD_STRIDE); in
 * an SDPA problem (sdpa) not with the sparse options (UNSUPPORTED_TYPE). */
void expect_kv_blocks(expect *e, const attn_sdpa_desc *d, int sdpa);
/* The K and V pointers of an SDPA call: args.k / k16 / kq by the storage
 * type, the other two NULL. */
void expect_kv_pointers(expect *e, const attn_sdpa_desc *d, const attn_sdpa_args *a);

/* Q8_0 / Q4_0 in a problem (the SDPA problem's KV bytes, attn_kv_append's
 * types byte): decode_kvq reads one byte (two with a bad stride): which
 * of K and V are of which block type (the other keeps its decoded type),
 * and whether the problem stays valid, gets a dim not a multiple of 32
 * (odd) or a view stride off 32 (badst: stride st of the K (0) or V (1)
 * view the call gets, plus off). */
typedef struct kv_q {
    int on;
    attn_dtype qt[2];     /* block type of K, V (F32: not quantized) */
    int odd, badst, which, st;
    int64_t off;
    int int8;             /* bit 6: integer scores where valid (sdpa_decode) */
} kv_q;

void decode_kvq(rd *r, kv_q *q);
/* The dims of a quantized problem: 32 x the decoded dim (1 to 6), or odd
 * (never a multiple of 32) for the tensor of which. */
void kvq_dims(const kv_q *q, int64_t *dk, int64_t *dv);
/* The view of tensor t (0 K, 1 V) of [sz][D]: gen_view's, of D / 32
 * blocks with every stride x 32, when t is of a block type and D a
 * multiple of 32, plus the bad stride when call (the view the call
 * gets); else gen_view's. */
attn_view kvq_view(rd *r, const kv_q *q, int t, const int64_t sz[3], int64_t D, int call);

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
    kv_q q;               /* Q8_0 / Q4_0 (z & 0x0b == 0x0b: one more byte) */
    int paged;
    int64_t bs, nb, mb;   /* block size, pool blocks, table columns */
    unsigned garb;        /* what unused pool rows and table entries hold */
    unsigned bad;         /* KB_* */
    attn_view kcv, vcv;   /* K and V stored contiguously ([B][Hkv][m][d]) */
} kv_cfg;

void decode_kv(rd *r, kv_cfg *c, int64_t B, int64_t m);
/* After decode_qo (whose one-type choice covers the tensors not
 * quantized): the block types into kt / vt and the dims. */
void kv_apply_q(kv_cfg *c, int64_t *dk, int64_t *dv);

/* The storage of K (t = 0) and V (t = 1): contiguous in the decoded type
 * (c16: F16/BF16, cq: Q8_0/Q4_0 blocks, with w their exact widening, what
 * the reference reads; F32 stays in the float pool) and, paged, the pool
 * (float, uint16_t or blocks, exactly its view's extent) with the table. */
typedef struct kv_store {
    uint16_t *c16[2];
    uint8_t *cq[2];
    float *w[2];
    float *cf[2];         /* paged F32: the contiguous values, own copy */
    void *pool[2];
    int32_t *table;
    int64_t nbl[8];       /* blocks holding each sequence's tokens */
} kv_store;

void kv_store_free(kv_store *S);

#endif
