/* The integer Q K^T's rounding of Q (attn.h, "Integer scores"), written
 * from attn.h's words for the tests (test_qk8.c, test_decode.c), apart
 * from the library's: the nearest integer, ties away from zero, taken in
 * double (where |x| x (1 / s) + 0.5 is exact), not with roundf. */
#ifndef ATTN_TEST_QK8_REF_H
#define ATTN_TEST_QK8_REF_H

#include "attn.h"

/* Block x[0..31]: returns s (0 for a block read as zeros, NaN for one
 * with a NaN or an infinity) and the rounded integers in q. */
float qk8_ref_round(const float *x, int q[32]);

/* A row of d values (d a multiple of 32) replaced by the values the
 * integer Q K^T uses, q_i x s of each block (in float: a tolerance's
 * worth off the exact product, which the float64 checks allow). */
void qk8_ref_round_row(float *x, long long d);

/* Every row of a [B][H][n][d] Q placed by view v from q0 (the batch,
 * head and seq strides; d contiguous), rounded as qk8_ref_round_row. */
void qk8_ref_round_view(float *q0, const attn_view *v, int64_t B, int64_t H, int64_t n,
                        int64_t d);

#endif
