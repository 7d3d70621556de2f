#include "core/core.h"

const char *attn_status_str(attn_status status)
{
    switch (status) {
    case ATTN_OK: return "success";
    case ATTN_ERR_NULL_ARGUMENT: return "a required pointer is NULL";
    case ATTN_ERR_BAD_SIZE: return "a size (batch, heads, sequence length or head dim) is not positive";
    case ATTN_ERR_TOO_LARGE: return "a size or stride exceeds INT32_MAX, or a count or byte count exceeds 2^63 - 1 or SIZE_MAX";
    case ATTN_ERR_HEAD_RATIO: return "the number of query heads is not a multiple of the number of key/value heads";
    case ATTN_ERR_BAD_STRIDE: return "a stride is negative, zero where no broadcast is allowed, shorter than its row, or makes an output view not nested";
    case ATTN_ERR_STRIDES_UNSET: return "a tensor in use has no strides (still ATTN_STRIDE_UNSET)";
    case ATTN_ERR_BAD_SCALE: return "the scale is infinite";
    case ATTN_ERR_BAD_OPTION: return "an option holds an unknown value, options do not go together, or a reserved field is not zero";
    case ATTN_ERR_BAD_THREADS: return "the thread count is negative or too large";
    case ATTN_ERR_BAD_LENGTH: return "a per-batch key or query length is out of range";
    case ATTN_ERR_ARGUMENT_MISMATCH: return "a pointer was given for a feature the plan does not use";
    case ATTN_ERR_WORKSPACE_TOO_SMALL: return "the workspace is smaller than attn_sdpa_workspace_size() reports";
    case ATTN_ERR_WORKSPACE_ALIGNMENT: return "the workspace is not 64-byte aligned";
    case ATTN_ERR_OUT_OF_MEMORY: return "out of memory";
    case ATTN_ERR_BAD_BLOCK_TABLE: return "a KV cache block table entry is outside [0, kv_num_blocks)";
    case ATTN_ERR_UNSUPPORTED_TYPE: return "an element type this call does not take";
    case ATTN_ERR_COMM: return "a communication (MPI) call failed";
    case ATTN_ERR_DESC_MISMATCH: return "the ranks were given different problems";
    }
    return "unknown status";
}

const char *attn_version(void)
{
    return ATTN_VERSION_STRING;
}
