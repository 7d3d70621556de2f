/* The view rules of attn.h ("Tensor views"), shared by every path. */
#include "core/view.h"
#include <stdint.h>

/* One dimension of a view: its size and stride. */
typedef struct { int64_t size, stride; } dim_t_;

static int view_unset(const attn_view *v)
{
    return v->batch == ATTN_STRIDE_UNSET || v->head == ATTN_STRIDE_UNSET ||
           v->seq == ATTN_STRIDE_UNSET;
}

/*
 * Check a view of [B][H][S][D] (dim stride 1).  The seq stride of a matrix
 * is the BLAS leading dimension: at least D even for a single row (0 only
 * when broadcast).  An output passes the nesting rule of attn.h: its
 * dimensions of size > 1, sorted by stride, each have a stride at least the
 * extent of everything inside them.  That is sufficient for no two
 * elements to share an address; views that interleave without overlapping
 * (rows at {0, 2, 4} and {3, 5, 7}) fail it and are rejected, as attn.h
 * says.
 */
attn_status attn_check_view(const attn_view *v, int64_t B, int64_t H, int64_t S,
                            int64_t D, int how)
{
    const int broadcast = how & VIEW_BROADCAST;
    if (view_unset(v))
        return ATTN_ERR_STRIDES_UNSET;
    dim_t_ dims[3] = { { B, v->batch }, { H, v->head }, { S, v->seq } };
    for (int i = 0; i < 3; i++) {
        if (dims[i].stride < 0)
            return ATTN_ERR_BAD_STRIDE;
        if (dims[i].stride == 0 && dims[i].size > 1 && !broadcast)
            return ATTN_ERR_BAD_STRIDE;
    }
    if (!(how & VIEW_VECTOR) && v->seq < D && !(broadcast && v->seq == 0))
        return ATTN_ERR_BAD_STRIDE;
    if (v->seq > INT32_MAX)
        return ATTN_ERR_TOO_LARGE;
    /* Extent in elements and bytes must fit (int64 and size_t). */
    uint64_t ext = (uint64_t)D, t;
    for (int i = 0; i < 3; i++) {
        if (__builtin_mul_overflow((uint64_t)(dims[i].size - 1), (uint64_t)dims[i].stride, &t) ||
            __builtin_add_overflow(ext, t, &ext))
            return ATTN_ERR_TOO_LARGE;
    }
    if (ext > (uint64_t)INT64_MAX / sizeof(float) || ext > SIZE_MAX / sizeof(float))
        return ATTN_ERR_TOO_LARGE;
    if (how & VIEW_OUTPUT) {
        dim_t_ s[3];
        int k = 0;
        for (int i = 0; i < 3; i++)
            if (dims[i].size > 1)
                s[k++] = dims[i];
        for (int i = 1; i < k; i++)
            for (int j = i; j > 0 && s[j].stride < s[j - 1].stride; j--) {
                dim_t_ tmp = s[j]; s[j] = s[j - 1]; s[j - 1] = tmp;
            }
        uint64_t inner = (uint64_t)D;
        for (int i = 0; i < k; i++) {
            if ((uint64_t)s[i].stride < inner)
                return ATTN_ERR_BAD_STRIDE;
            inner += (uint64_t)(s[i].size - 1) * (uint64_t)s[i].stride;
        }
    }
    return ATTN_OK;
}
