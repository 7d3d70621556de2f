/* The public element conversions, attn_dtype_encode and attn_dtype_decode
 * (fp32 <-> F16 / BF16), over the conversion table of the current settings
 * (kernels/convert.h).  No plan: each call looks the table up. */
#include "core/core.h"
#include "kernels/convert.h"
#include "kernels/quant.h"
#include <string.h>

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

/* attn_quantize / attn_dequantize / attn_dtype_bytes: every storage type. */
static attn_status block_check(attn_dtype type, int64_t n)
{
    if (n < 0)
        return ATTN_ERR_BAD_SIZE;
    if (!attn_dtype_known(type))
        return ATTN_ERR_BAD_OPTION;
    const int block = attn_dtype_is_block(type);
    if (block && n % ATTN_QBLOCK != 0)
        return ATTN_ERR_BAD_SIZE;
    /* The storage's bytes must be a size_t and an int64_t: units of one
     * value (or one block) of `per` bytes. */
    const int64_t unit = block ? ATTN_QBLOCK : 1;
    const uint64_t per = (uint64_t)attn_st_bytes((int)type, unit);
    const uint64_t units = (uint64_t)(n / unit);
    if (units > SIZE_MAX / per || units > (uint64_t)INT64_MAX / per)
        return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

/* The conversions also address n floats. */
static attn_status convert_size_check(attn_dtype type, int64_t n)
{
    attn_status st = block_check(type, n);
    if (st == ATTN_OK && ((uint64_t)n > SIZE_MAX / 4 || (uint64_t)n > (uint64_t)INT64_MAX / 4))
        return ATTN_ERR_TOO_LARGE;
    return st;
}

attn_status attn_dtype_bytes(attn_dtype type, int64_t n, size_t *bytes)
{
    if (!bytes)
        return ATTN_ERR_NULL_ARGUMENT;
    attn_status st = block_check(type, n);
    if (st == ATTN_OK)
        *bytes = (size_t)attn_st_bytes((int)type, n);
    return st;
}

/* The checks both directions share; ATTN_OK with n == 0 means nothing to
 * do (*go 0). */
static attn_status convert_args(attn_dtype type, const void *src, const void *dst, int64_t n,
                                int *go)
{
    attn_status st = convert_size_check(type, n);
    *go = 0;
    if (st != ATTN_OK)
        return st;
    if (n > 0 && (!src || !dst))
        return ATTN_ERR_NULL_ARGUMENT;
    *go = n > 0;
    return ATTN_OK;
}

attn_status attn_quantize(attn_dtype type, const float *src, void *dst, int64_t n)
{
    int go;
    attn_status st = convert_args(type, src, dst, n, &go);
    if (go)
        attn_store_values(attn_cvt_select(), (int)type, src, dst, n);
    return st;
}

attn_status attn_dequantize(attn_dtype type, const void *src, float *dst, int64_t n)
{
    int go;
    attn_status st = convert_args(type, src, dst, n, &go);
    if (go)
        attn_load_values(attn_cvt_select(), (int)type, src, dst, n);
    return st;
}
