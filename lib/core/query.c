/* attn_blas_query: the BLAS really loaded (blas/runtime.c), the SIMD table
 * and the threads attn would use. */
#include "core/core.h"
#include "kernels/kernels.h"
#include <stdio.h>

attn_status attn_blas_query(attn_blas_info *info)
{
    if (!info)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_blas_identify(info);
    snprintf(info->simd, sizeof info->simd, "%s", attn_kernels_select()->name);
    info->openmp = ATTN_HAVE_OPENMP;
    info->max_threads = attn_max_threads();
    return ATTN_OK;
}
