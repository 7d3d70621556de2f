/* The BF16 products on AVX-512F alone (CPUs without AVX512_BF16: Skylake-X,
 * Ice Lake): VDPBF16PS's arithmetic as fused multiply-adds (bf16.h). */
#include "attn_config.h"
#define BF16_NATIVE 0
#define BF16_NAME(x) x##_avx512
#define BF16_TABLE_NAME "avx512"
#define table_avx512 attn_bf16_avx512
#include "kernels/bf16_mm.inc"
