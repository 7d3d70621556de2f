/*
 * mha_table.h -- the table of cases of the multi-head attention layer tests:
 * every row is a family name, the checks that apply beyond the ones every
 * row gets, and one mcase (see mha_table.c for the rows, test_mha.c for the
 * checks).
 */
#ifndef ATTN_TEST_MHA_TABLE_H
#define ATTN_TEST_MHA_TABLE_H

#include <stddef.h>

#include "mha_case.h"

/* Checks beyond those every row gets (forward against the reference, 2
 * threads with a NaN-filled caller workspace bitwise). */
enum {
    CK_THREADS = 1u,   /* threads 1, 2, 3, 4 and 0 (default) bitwise */
    CK_WORKSPACE = 2u, /* caller workspaces: fills, reuse, offset, NULL with a size */
    CK_WEIGHTS = 4u,   /* out bitwise the same whatever weights mode is asked */
    CK_GAPS = 8u,      /* finite values instead of NaN in the input row gaps:
                          bitwise the same (set by mha_rows on every row with
                          a row stride of x, key or value) */
    CK_BACKWARD = 16u, /* train_forward and backward: Y bitwise execute's,
                          gradients against the float64 reference,
                          accumulate = 1 exactly old + overwrite, threads
                          1, 2, 3, 4 bitwise (set by mha_rows on every fp32
                          row) */
    CK_TYPES = 32u,    /* 16-bit rows (set by mha_rows on each): where the
                          types widen (not BF16 products; BF16 rows run
                          again on the BLAS engine), out and weights bitwise
                          the fp32 layer's on the rounded inputs and
                          weights, Y rounded to x_type; the training calls
                          and sizes ATTN_ERR_UNSUPPORTED_TYPE */
};

/* The family of the dropout rows (dropout_p > 0). */
#define MHA_DROPOUT_FAMILY "dropout p = 0.1 / 0.5"

typedef struct mrow {
    const char *family;  /* the "[accuracy]" line the row counts in */
    unsigned checks;     /* CK_* bits */
    int slow;            /* 1: left out under ATTN_TEST_QUICK=1 */
    mcase c;
} mrow;

/* The rows in order (rows of a family are contiguous), with the slow ones
 * already left out under ATTN_TEST_QUICK=1.  Built on the first call. */
const mrow *mha_rows(size_t *count);

#endif
