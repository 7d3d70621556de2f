/* The block types of a quantized KV cache, Q8_0 and Q4_0 (ggml's layouts;
 * attn.h, "Quantized KV caches"): the scalar rules of quantizing and
 * de-quantizing, which every kernel reproduces bit for bit. */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum {
    ATTN_QBLOCK = 32,          /* values per block */
    ATTN_Q8_0_BYTES = 34,      /* binary16 scale + 32 int8 */
    ATTN_Q4_0_BYTES = 18       /* binary16 scale + 16 bytes of nibbles */
};

/* Bytes of n values (n a multiple of 32 for the block types) of storage
 * type st (attn_dtype's values). */
static inline int64_t attn_st_bytes(int st, int64_t n)
{
    switch (st) {
    case 0: return n * 4;
    case 1: case 2: return n * 2;
    case 3: return n / ATTN_QBLOCK * ATTN_Q8_0_BYTES;
    default: return n / ATTN_QBLOCK * ATTN_Q4_0_BYTES;
    }
}

/* n values (a multiple of 32) into n / 32 blocks, by ggml's reference
 * rules (quantize_row_q8_0_ref, quantize_row_q4_0_ref), with a block
 * holding a NaN or an infinity stored as a NaN scale (attn.h). */
void attn_quantize_q8_0(const float *src, void *dst, int64_t n);
void attn_quantize_q4_0(const float *src, void *dst, int64_t n);
/* n / 32 blocks into n floats (exact). */
void attn_dequantize_q8_0(const void *src, float *dst, int64_t n);
void attn_dequantize_q4_0(const void *src, float *dst, int64_t n);

/* n values of storage type st (any attn_dtype) from or to fp32: F32 a
 * copy, F16/BF16 through the conversion table cvt, the block types by the
 * functions above (n a multiple of 32).  What attn_quantize and
 * attn_dequantize do, and the paths that store or widen K/V rows. */
struct attn_cvt_kernels;
void attn_store_values(const struct attn_cvt_kernels *cvt, int st, const float *src, void *dst,
                       int64_t n);
void attn_load_values(const struct attn_cvt_kernels *cvt, int st, const void *src, float *dst,
                      int64_t n);

/* The 65536 binary16 values widened to fp32 (entry h: the value of the
 * bits h, as VCVTPH2PS gives it, NaNs made quiet).  The decode kernels
 * read a block's scale from it: a scalar load that the multiply
 * broadcasts from memory, where VPBROADCASTW and VCVTPH2PS took three
 * vector uops per block (docs/DESIGN.md); a cache's scales are of a few
 * magnitudes, so the lines it touches are few.  attn_f16_table builds it
 * once per process (pthread_once; until then 256 KiB of zero pages) and
 * returns it: every kernel that reads attn_f16_values calls it first, at
 * its entry. */
extern float attn_f16_values[65536];
const float *attn_f16_table(void);

#endif
