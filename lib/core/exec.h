/* The execution context of a plan: every choice that depends on the
 * machine or the ATTN_* environment, made once by attn_exec_init (which
 * every plan creator calls) and read by execute.  A path never tests the
 * CPU or the environment itself; a new element type or engine adds a table
 * here, not a branch in every path. */
#ifndef ATTN_CORE_EXEC_H
#define ATTN_CORE_EXEC_H

#include "attn_config.h"
#include "attn.h"
#include "blas/blas.h"
#include "cpu/cpu.h"
#include "kernels/kernels.h"
#include "kernels/gemm.h"
#include "kernels/bf16.h"
#include "kernels/decode.h"
#include "kernels/convert.h"

typedef struct attn_exec {
    attn_settings set;             /* the environment, read at plan time */
    const attn_kernels *kern;      /* softmax and dropout rows */
    /* The products' engine: the tile kernels, or NULL for the BLAS (what
     * attn_gemm takes as gk); tile says which. */
    int tile;
    const attn_gemm_kernels *gk;
    const attn_bf16_kernels *bf;   /* the tile engine's BF16 products */
    const attn_dec_kernels *dec;   /* the decode path's streaming kernels */
    attn_dec_qk_fn qk8;            /* the integer Q K^T (desc.qk_int8) */
    const attn_cvt_kernels *cvt;   /* fp32 <-> F16 / BF16 */
    const attn_blas_hooks *blas;   /* the loaded BLAS's thread controls */
    int nthreads;                  /* resolved, >= 1 */
} attn_exec;

/* Fill x for a plan whose desc asks for engine and threads (0 = the
 * OpenMP default; validated by the caller). */
void attn_exec_init(attn_exec *x, attn_engine engine, int threads);

#endif
