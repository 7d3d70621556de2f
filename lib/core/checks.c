/* Argument checks shared by every plan (SDPA, MHA): reserved fields, mask
 * modes, pointer use and per-batch lengths, and the workspace. */
#include "core/core.h"
#include <stdlib.h>

int attn_reserved_zero(const int64_t *reserved, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (reserved[i] != 0)
            return 0;
    return 1;
}

int attn_reserved_null(void *const *reserved, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (reserved[i] != NULL)
            return 0;
    return 1;
}

int attn_mask_mode_valid(attn_mask_mode mode)
{
    return mode == ATTN_MASK_NONE || mode == ATTN_MASK_KEEP_NONZERO ||
           mode == ATTN_MASK_DROP_NONZERO;
}

int attn_engine_valid(attn_engine engine)
{
    return engine == ATTN_ENGINE_AUTO || engine == ATTN_ENGINE_BLAS ||
           engine == ATTN_ENGINE_TILE;
}

attn_status attn_check_pointers(const attn_pointer_use *list, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (list[i].used && !list[i].ptr)
            return ATTN_ERR_NULL_ARGUMENT;
        if (!list[i].used && list[i].ptr)
            return ATTN_ERR_ARGUMENT_MISMATCH;
    }
    return ATTN_OK;
}

attn_status attn_check_lengths(int64_t batch, const int32_t *kv_lens, int64_t m,
                               const int32_t *q_lens, int64_t n)
{
    for (int64_t b = 0; b < batch; b++) {
        if (kv_lens && (kv_lens[b] < 0 || kv_lens[b] > m))
            return ATTN_ERR_BAD_LENGTH;
        if (q_lens && (q_lens[b] < 0 || q_lens[b] > n))
            return ATTN_ERR_BAD_LENGTH;
    }
    return ATTN_OK;
}

attn_status attn_workspace_acquire(void *workspace, size_t bytes, size_t need, void **ws)
{
    if (workspace) {
        if (bytes < need)
            return ATTN_ERR_WORKSPACE_TOO_SMALL;
        if ((uintptr_t)workspace % ATTN_ALIGNMENT)
            return ATTN_ERR_WORKSPACE_ALIGNMENT;
        *ws = workspace;
        return ATTN_OK;
    }
    *ws = aligned_alloc(ATTN_ALIGNMENT, need);
    return *ws ? ATTN_OK : ATTN_ERR_OUT_OF_MEMORY;
}
