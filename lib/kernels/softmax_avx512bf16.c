/* softmax_rows_p16 of the AVX512-BF16 level: the AVX-512 table's, with
 * P rounded to BF16 by VCVTNEPS2BF16 (softmax_avx512.h). */
#include "attn_config.h"
#define ATTN_SOFTMAX_BF16_UNIT 1
#include "kernels/softmax_avx512.h"

void attn_softmax_rows_p16_avx512bf16(float *s, int64_t lds, int64_t R, int64_t n, float *m,
                                      float *l, float *corr)
{
    softmax_rows_to(s, lds, R, n, m, l, corr, 1);
}
