/*
 * fuzz_sparse.h -- the sparse fields of an SDPA or MHA problem (byte 0 bit
 * 3, SEL_SPARSE): decoding, planting and the flag and layout buffers
 * (fuzz_sparse.c).
 */
#ifndef ATTN_FUZZ_SPARSE_H
#define ATTN_FUZZ_SPARSE_H

#include "fuzz_common.h"

/* The decoded sparse fields: global keys and queries, block size,
 * layout_per_head, and what fills the flags and the layout. */
typedef struct sparse_cfg {
    int gk, gq, lph;
    int64_t bs;
    unsigned fill;
} sparse_cfg;

/* The flag arrays and the layout, exact sizes (ASan sees any read past
 * them): global_k [B][m], global_q [B][n], layout [H|1][nb][mb]. */
typedef struct sparse_buf {
    uint8_t *gk, *gq, *lay;
    int64_t nb, mb;
} sparse_buf;

int sparse_fields_ok(int reserved_flags, int layout_per_head, int64_t bs);
void decode_sparse(rd *r, sparse_cfg *c);
void plant_sparse(rd *r, int reserved, int *rf, int *lph, int64_t *bs);
void plant_sparse_null(rd *r, const uint8_t **gk, const uint8_t **gq, const uint8_t **lay);
void plant_sparse_extra(rd *r, int use_gk, int use_gq, int64_t bs, const uint8_t *junk,
                        const uint8_t **gk, const uint8_t **gq, const uint8_t **lay);
void sparse_make(sparse_buf *S, const sparse_cfg *c, prng *g, int64_t B, int64_t H, int64_t n,
                 int64_t m);
void sparse_free(sparse_buf *S);
void print_sparse(int gk, int gq, int lph, int rf, int64_t bs);

#endif
