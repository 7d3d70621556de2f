/* The public element conversions, attn_dtype_encode and attn_dtype_decode
 * (fp32 <-> F16 / BF16), over the conversion table of the current settings
 * (kernels/convert.h).  No plan: each call looks the table up. */
#include "core/core.h"
#include "kernels/convert.h"

static attn_status convert_check(attn_dtype type, const void *src, const void *dst, int64_t n)
{
    if (n < 0)
        return ATTN_ERR_BAD_SIZE;
    if (type != ATTN_DTYPE_F16 && type != ATTN_DTYPE_BF16)
        return ATTN_ERR_BAD_OPTION;
    if (n > 0 && (!src || !dst))
        return ATTN_ERR_NULL_ARGUMENT;
    return ATTN_OK;
}

attn_status attn_dtype_encode(attn_dtype type, const float *src, uint16_t *dst, int64_t n)
{
    attn_status st = convert_check(type, src, dst, n);
    if (st != ATTN_OK || n == 0)
        return st;
    const attn_cvt_kernels *cvt = attn_cvt_select();
    (type == ATTN_DTYPE_F16 ? cvt->f32_to_f16 : cvt->f32_to_bf16)(src, dst, n);
    return ATTN_OK;
}

attn_status attn_dtype_decode(attn_dtype type, const uint16_t *src, float *dst, int64_t n)
{
    attn_status st = convert_check(type, src, dst, n);
    if (st != ATTN_OK || n == 0)
        return st;
    const attn_cvt_kernels *cvt = attn_cvt_select();
    (type == ATTN_DTYPE_F16 ? cvt->f16_to_f32 : cvt->bf16_to_f32)(src, dst, n);
    return ATTN_OK;
}
