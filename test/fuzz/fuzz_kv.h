/*
 * fuzz_kv.h -- K/V storage types and the paged cache (fuzz_kv.c): the
 * rules of attn.h's "Decoding and the KV cache" (shared by the SDPA
 * problem and attn_kv_append) and the storage of an SDPA problem's K and V
 * (byte 0 bit 6, SEL_KV).
 */
#ifndef ATTN_FUZZ_KV_H
#define ATTN_FUZZ_KV_H

#include "fuzz_common.h"

/* attn.h, "Decoding and the KV cache": the storage types, the paging
 * fields and the K and V views. */
int dtype_ok(int t);
/* Twice the unit roundoff of a 16-bit type (2^-8 BF16, 2^-10 F16; 0 F32):
 * the error bound of one rounding to it, with slack. */
double dtype_u2(attn_dtype t);
int kv_plain(const attn_sdpa_desc *d);
void expect_kv_options(expect *e, const attn_sdpa_desc *d);
void expect_kv_views(expect *e, const attn_sdpa_desc *d);

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

void decode_kv(rd *r, kv_cfg *c, int64_t B, int64_t m);

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

void kv_store_free(kv_store *S);

#endif
