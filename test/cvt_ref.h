/* An independent reference of the fp32 <-> F16 / BF16 conversions of attn.h
 * (attn_convert_*), written with double arithmetic on the values, not with
 * the bit tricks of the library: decoding is ldexp(significand, exponent);
 * encoding finds the quantum of the value's binade, rounds the exact
 * quotient to the nearest integer with ties to even, and rebuilds the bit
 * pattern from the rounded value.  Every double operation here is exact,
 * so the result does not depend on the rounding mode; call it with the
 * default floating-point environment (DAZ would flush f32 denormals). */
#ifndef ATTN_TEST_CVT_REF_H
#define ATTN_TEST_CVT_REF_H

#include <stdint.h>

/* The value of a 16-bit pattern (NaN for NaNs); bf16 = 0 for F16. */
double cvt_ref_value(int bf16, uint16_t h);
/* The fp32 bits attn_dtype_decode must give: the value as a float; a
 * NaN keeps sign and payload, made quiet for F16 (VCVTPH2PS), unchanged
 * for BF16 (a shift). */
uint32_t cvt_ref_to_f32(int bf16, uint16_t h);
/* The 16-bit pattern attn_dtype_encode must give for fp32 bits x. */
uint16_t cvt_ref_from_f32(int bf16, uint32_t x);

#endif
