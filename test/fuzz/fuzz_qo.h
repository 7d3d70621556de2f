/*
 * fuzz_qo.h -- the element types of Q and O in the SDPA problem (byte 0
 * bit 7, SEL_QO; fuzz_qo.c): attn.h's "Element types of the computation"
 * for q_type and o_type (K and V storage types are fuzz_kv.c's).
 */
#ifndef ATTN_FUZZ_QO_H
#define ATTN_FUZZ_QO_H

#include "fuzz_common.h"
#include "fuzz_kv.h"

/* Invalid fields of a SEL_QO SDPA problem (its own byte, besides byte 1's
 * BAD_* and the KV byte's KB_*): an unknown q_type or o_type, 16-bit Q or
 * O with a sparse option, the pointer of Q's or O's type NULL, the other
 * pointer given too, or only the other pointer given. */
enum { QB_NONE, QB_TYPE, QB_SPARSE, QB_PTR_NULL, QB_PTR_EXTRA, QB_PTR_SWAP, QB_COUNT_ };

typedef struct qo_cfg {
    int on;              /* SEL_QO */
    attn_dtype qt, ot;   /* the decoded (valid) types of Q and O */
    unsigned bad;        /* QB_* */
} qo_cfg;

/* Q in its 16-bit type: exactly the Q view's extent (ASan sees a read
 * past it), its exact widening (what the reference reads) and a copy (to
 * see that no call writes it). */
typedef struct qo_store {
    uint16_t *q16, *q16_copy;
    float *qw;
    int64_t eq;
} qo_store;

void decode_qo(rd *r, qo_cfg *c, kv_cfg *kv);
void qo_store_free(qo_store *S);

/* attn.h's rules: q_type and o_type F32, F16 or BF16 (else
 * ATTN_ERR_BAD_OPTION at plan time), with the sparse options too (1.1,
 * forward and backward); execute reads args.q16 / writes args.o16 for
 * F16 and BF16 (args.q / args.o NULL), args.q / args.o for F32 (args.q16 /
 * args.o16 NULL): a NULL pointer of the type is ATTN_ERR_NULL_ARGUMENT,
 * the other one given ATTN_ERR_ARGUMENT_MISMATCH. */
int qo_16(const attn_sdpa_desc *d);
void expect_qo_options(expect *e, const attn_sdpa_desc *d);
void expect_qo_pointers(expect *e, const attn_sdpa_desc *d, const attn_sdpa_args *a);

/* Does a plan of d take BF16 products (Q, K and V BF16, the tile engine,
 * off the decode path: q_len > 16 or ATTN_DECODE=0; nodecode: the plan was
 * made with ATTN_DECODE=0)? */
int qo_bf16_products(const attn_sdpa_desc *d, int nodecode);

/* What a 16-bit O (o_type) and BF16 products add to the fp32 bound's
 * o_rel (relative to o_abs) and its absolute term: 2 u_t for O's rounding
 * (u_t = 2^-9 BF16, 2^-11 F16: twice the rounding error, for slack), as
 * much again for P's rounding to BF16 in BF16 products; F16's subnormals
 * 2^-24 absolute. */
void qo_tolerance(const attn_sdpa_desc *d, int bf16, double *orel_add, double *oabs);

#endif
