/* attn_exec_init: the one place a plan's kernels, engine and threads are
 * chosen (core/exec.h). */
#include "core/exec.h"
#include "core/core.h"

void attn_exec_init(attn_exec *x, attn_engine engine, int threads)
{
    attn_settings_read(&x->set);
    const int level = x->set.level;
    x->kern = attn_kernels_at(level);
    x->tile = attn_gemm_tile_at(&x->set, (int)engine);
    x->gk = x->tile ? attn_gemm_at(level) : NULL;
    x->bf = attn_bf16_at(level);
    x->dec = attn_dec_at(level);
    x->qk8 = attn_dec_qk8_at(level);
    x->cvt = attn_cvt_at(level);
    x->blas = attn_blas_hooks_get();
    x->nthreads = attn_resolve_threads(threads);
}
