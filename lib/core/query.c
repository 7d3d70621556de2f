/* attn_blas_query: the BLAS really loaded (blas/runtime.c), the SIMD table
 * and the threads attn would use; attn_engine_resolve: the engine a plan
 * would run on. */
#include "core/core.h"
#include "kernels/kernels.h"
#include "kernels/gemm.h"
#include "kernels/bf16.h"
#include <stdio.h>

attn_status attn_blas_query(attn_blas_info *info)
{
    if (!info)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_blas_identify(info);
    snprintf(info->simd, sizeof info->simd, "%s", attn_kernels_select()->name);
    /* (the BLAS engine widens BF16 instead) */
    snprintf(info->bf16, sizeof info->bf16, "%s",
             attn_gemm_use_tile(0) ? attn_bf16_at(attn_settings_level())->name : "widened");
    info->openmp = ATTN_HAVE_OPENMP;
    info->max_threads = attn_max_threads();
    return ATTN_OK;
}

attn_status attn_engine_resolve(attn_engine requested, attn_engine *resolved)
{
    if (!resolved)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!attn_engine_valid(requested))
        return ATTN_ERR_BAD_OPTION;
    *resolved = attn_gemm_use_tile((int)requested) ? ATTN_ENGINE_TILE : ATTN_ENGINE_BLAS;
    return ATTN_OK;
}
