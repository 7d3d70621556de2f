/* Conversions between fp32 and the 16-bit storage types of K and V (F16 =
 * IEEE binary16, BF16 = the upper half of a binary32), one table per
 * instruction set, chosen at run time (attn_cvt_select) like the softmax
 * kernels.  Semantics (attn.h, attn_dtype_encode), the same bits at
 * every level and whatever the MXCSR rounding mode, FTZ and DAZ:
 * - to fp32: exact.  A NaN keeps its sign and payload; an F16 NaN comes
 *   out quiet (bit 22 set), as F16C's VCVTPH2PS gives it, a BF16 NaN is
 *   the plain shift (left as it is).
 * - from fp32: round to nearest, ties to even; denormal inputs and results
 *   kept; F16 overflow (|x| >= 65520 after rounding) gives +-Inf; a NaN
 *   gives a quiet NaN of its sign with the top payload bits, as VCVTPS2PH
 *   does: sign | 0x7E00 | (mantissa >> 13) for F16, and the upper 16 bits
 *   | 0x0040 for BF16. */
#ifndef ATTN_CONVERT_H
#define ATTN_CONVERT_H

#include "attn_config.h"
#include "cpu/cpu.h"
#include <stdint.h>

typedef struct attn_cvt_kernels {
    const char *name;
    void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, int64_t n);
} attn_cvt_kernels;

/* The table of a level (cpu/cpu.h; with AVX512_BF16 inside the AVX-512
 * level when the CPU has it), and the one of the current settings. */
const attn_cvt_kernels *attn_cvt_at(int level);
const attn_cvt_kernels *attn_cvt_select(void);

/* Exact scalar conversions (the reference of the tables; also usable inline). */
float attn_f16_to_f32(uint16_t h);
float attn_bf16_to_f32(uint16_t h);
uint16_t attn_f32_to_f16(float f);
uint16_t attn_f32_to_bf16(float f);

/* The tables (for the tests; everyone else goes through attn_cvt_select).
 * avx2 needs AVX2 and F16C; avx512 AVX-512F (and F16C); avx512bf16 also
 * AVX512_BF16 and exists only when the compiler can build it. */
extern const attn_cvt_kernels attn_cvt_scalar;
#if ATTN_HAVE_X86_KERNELS
extern const attn_cvt_kernels attn_cvt_avx2;
extern const attn_cvt_kernels attn_cvt_avx512;
#if ATTN_HAVE_AVX512BF16
extern const attn_cvt_kernels attn_cvt_avx512bf16;
#endif
#endif

#endif
