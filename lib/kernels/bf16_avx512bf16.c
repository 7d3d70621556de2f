/* The BF16 products on AVX512_BF16's VDPBF16PS (built only when the
 * compiler has the intrinsics; chosen at run time on CPUs that have the
 * unit). */
#include "attn_config.h"
#define BF16_NATIVE 1
#define BF16_NAME(x) x##_avx512bf16
#define BF16_TABLE_NAME "avx512bf16"
#define table_avx512bf16 attn_bf16_avx512bf16
#include "kernels/bf16_mm.inc"
