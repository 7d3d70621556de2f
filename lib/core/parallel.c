/* attn's one parallel region, run by SDPA, the MHA projections and the
 * benchmark, and the thread counts plans resolve. */
#include "core/core.h"
#if ATTN_HAVE_OPENMP
#include <omp.h>
#endif

int attn_max_threads(void)
{
#if ATTN_HAVE_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int attn_resolve_threads(int requested)
{
#if ATTN_HAVE_OPENMP
    int nt = requested ? requested : omp_get_max_threads();
    return nt < 1 ? 1 : nt;
#else
    (void)requested;
    return 1;
#endif
}

void attn_parallel(const attn_blas_hooks *hooks, int nthreads, int64_t nitems,
                   void (*body)(void *ctx, int tid), void *ctx)
{
    attn_blas_scope scope;
    attn_blas_scope_enter(hooks, &scope);
#if ATTN_HAVE_OPENMP
    if ((nthreads <= 1 || nitems <= 1) && omp_get_num_threads() == 1) {
        /* One thread, called outside any team of several: no region.  A
         * serialized one (if (0)) still builds and frees a team in libgomp,
         * which was most of a small call (2.9 us of a 4 x 4 problem; malloc
         * trimming made syscalls).  The bodies' orphaned worksharing
         * loops then bind to the caller's team of one, as they would to
         * the serialized region; inside a caller's team of several they
         * would bind to it, hence the region below there.  The BLAS sees
         * one thread through this thread's ICV, set and restored around
         * the body. */
        int icv = omp_get_max_threads();
        omp_set_num_threads(1);
        int saved = attn_blas_thread_enter(&scope);
        body(ctx, 0);
        attn_blas_thread_leave(&scope, saved);
        omp_set_num_threads(icv);
        attn_blas_scope_leave(&scope);
        return;
    }
#pragma omp parallel num_threads(nthreads) if (nthreads > 1 && nitems > 1)
#endif
    {
        int tid = 0;
#if ATTN_HAVE_OPENMP
        /* Per-task ICV: the BLAS (OpenBLAS's OpenMP build) sees one thread
         * here; no effect outside this region. */
        omp_set_num_threads(1);
        tid = omp_get_thread_num();
#endif
        int saved = attn_blas_thread_enter(&scope);
        body(ctx, tid);
        attn_blas_thread_leave(&scope, saved);
    }
    attn_blas_scope_leave(&scope);
}
