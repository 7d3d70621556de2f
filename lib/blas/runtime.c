/* What the loaded BLAS is, and how to keep its threads out of attn's
 * parallel region.  The library is the one holding the sgemm attn calls
 * (dladdr), identified by the extension functions it exports:
 * - OpenBLAS, OpenMP flavour: it sees attn's parallel region (and the
 *   per-task thread count of 1 the driver sets) by itself;
 * - OpenBLAS, pthreads flavour: openblas_set_num_threads(1), process-wide,
 *   restored afterwards (concurrent callers share that setting);
 * - MKL, threaded layer: MKL_Set_Num_Threads_Local(1) in each worker;
 * - BLIS is called through bli_sgemm_ex with a one-thread runtime object;
 * - the reference BLAS and MKL's sequential layer have no threads.
 * Without OpenMP attn runs on the calling thread and leaves the BLAS's
 * threading as the user configured it. */
#include "attn_config.h"
#include "blas/blas.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef int (*int_fn)(void);
typedef char *(*str_fn)(void);

/* dlopen handle of the object holding the sgemm (NULL if unknown); the
 * caller dlcloses it.  *fname gets its path. */
static void *blas_handle(const char **fname)
{
    Dl_info dl;
    if (!dladdr(attn_blas_entry_point(), &dl) || !dl.dli_fname)
        return NULL;
    if (fname)
        *fname = dl.dli_fname;
    return dlopen(dl.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

static void *sym(void *handle, const char *name)
{
    void *f = handle ? dlsym(handle, name) : NULL;
    return f ? f : dlsym(RTLD_DEFAULT, name);
}

static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static attn_blas_hooks hooks_found;

static void hooks_find(void)
{
    attn_blas_hooks *hooks = &hooks_found;
    memset(hooks, 0, sizeof *hooks);
#if ATTN_HAVE_OPENMP
    void *h = blas_handle(NULL);
    hooks->openblas_get_parallel = (int_fn)sym(h, "openblas_get_parallel");
    hooks->openblas_get_num_threads = (int_fn)sym(h, "openblas_get_num_threads");
    hooks->openblas_set_num_threads = (void (*)(int))sym(h, "openblas_set_num_threads");
    /* MKL: the C entry point (the lower-case name is the Fortran one, by
     * reference); a no-op with the sequential layer. */
    hooks->mkl_set_num_threads_local = (int (*)(int))sym(h, "MKL_Set_Num_Threads_Local");
    if (h)
        dlclose(h);
#endif
}

const attn_blas_hooks *attn_blas_hooks_get(void)
{
    pthread_once(&hooks_once, hooks_find);
    return &hooks_found;
}

void attn_blas_scope_enter(const attn_blas_hooks *hooks, attn_blas_scope *scope)
{
    scope->hooks = hooks;
    scope->saved = 0;
    scope->active = 0;
    if (hooks->openblas_get_parallel && hooks->openblas_get_num_threads &&
        hooks->openblas_set_num_threads && hooks->openblas_get_parallel() == 1) {
        scope->saved = hooks->openblas_get_num_threads();
        if (scope->saved != 1) {
            hooks->openblas_set_num_threads(1);
            scope->active = 1;
        }
    }
}

void attn_blas_scope_leave(const attn_blas_scope *scope)
{
    if (scope->active)
        scope->hooks->openblas_set_num_threads(scope->saved);
}

int attn_blas_thread_enter(const attn_blas_scope *scope)
{
    return scope->hooks->mkl_set_num_threads_local ? scope->hooks->mkl_set_num_threads_local(1) : 0;
}

void attn_blas_thread_leave(const attn_blas_scope *scope, int saved)
{
    if (scope->hooks->mkl_set_num_threads_local)
        scope->hooks->mkl_set_num_threads_local(saved);
}

/* Is a library of that soname in the process? */
static int loaded(const char *soname)
{
    void *h = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

static void copy(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

void attn_blas_identify(attn_blas_info *info)
{
    memset(info, 0, sizeof *info);
    copy(info->backend, sizeof info->backend, ATTN_BLAS_BACKEND);
    copy(info->loaded, sizeof info->loaded, "unknown");
    info->threading = ATTN_BLAS_THREADING_UNKNOWN;

    const char *fname = NULL;
    void *h = blas_handle(&fname);
    Dl_info self;
    /* "" when the BLAS is linked into the same object as attn. */
    if (fname && !(dladdr((void *)(uintptr_t)&attn_blas_query, &self) && self.dli_fname &&
                   !strcmp(self.dli_fname, fname)))
        copy(info->library, sizeof info->library, fname);

    str_fn ob_config = (str_fn)sym(h, "openblas_get_config");
    str_fn blis_version = (str_fn)sym(h, "bli_info_get_version_str");
    void (*mkl_version)(char *, int) = (void (*)(char *, int))sym(h, "mkl_get_version_string");
    if (ob_config) {
        copy(info->loaded, sizeof info->loaded, "openblas");
        copy(info->version, sizeof info->version, ob_config());
        str_fn core = (str_fn)sym(h, "openblas_get_corename");
        copy(info->kernel, sizeof info->kernel, core ? core() : "");
        int_fn par = (int_fn)sym(h, "openblas_get_parallel");
        int mode = par ? par() : -1;
        info->threading = mode == 0 ? ATTN_BLAS_THREADING_SEQUENTIAL
                        : mode == 1 ? ATTN_BLAS_THREADING_PTHREADS
                        : mode == 2 ? ATTN_BLAS_THREADING_OPENMP
                        : ATTN_BLAS_THREADING_UNKNOWN;
    } else if (blis_version) {
        copy(info->loaded, sizeof info->loaded, "blis");
        snprintf(info->version, sizeof info->version, "BLIS %s", blis_version());
        int (*arch_id)(void) = (int_fn)sym(h, "bli_arch_query_id");
        char *(*arch_name)(int) = (char *(*)(int))sym(h, "bli_arch_string");
        copy(info->kernel, sizeof info->kernel, arch_id && arch_name ? arch_name(arch_id()) : "");
        long (*omp)(void) = (long (*)(void))sym(h, "bli_info_get_enable_openmp");
        long (*pth)(void) = (long (*)(void))sym(h, "bli_info_get_enable_pthreads");
        info->threading = omp && omp() ? ATTN_BLAS_THREADING_OPENMP
                        : pth && pth() ? ATTN_BLAS_THREADING_PTHREADS
                        : ATTN_BLAS_THREADING_SEQUENTIAL;
    } else if (mkl_version) {
        char buf[198] = "";
        mkl_version(buf, (int)sizeof buf);
        copy(info->loaded, sizeof info->loaded, "mkl");
        size_t len = strlen(buf);
        while (len && buf[len - 1] == ' ')
            buf[--len] = '\0';
        snprintf(info->version, sizeof info->version, "%.127s", buf);
        info->threading = loaded("libmkl_sequential.so") ? ATTN_BLAS_THREADING_SEQUENTIAL
                        : loaded("libmkl_gnu_thread.so") || loaded("libmkl_intel_thread.so")
                              ? ATTN_BLAS_THREADING_OPENMP
                        : loaded("libmkl_tbb_thread.so") ? ATTN_BLAS_THREADING_PTHREADS
                        : ATTN_BLAS_THREADING_UNKNOWN;   /* mkl_rt: chosen by its environment */
    } else if (fname && strstr(fname, "/blas/libblas")) {
        copy(info->loaded, sizeof info->loaded, "netlib");
        info->threading = ATTN_BLAS_THREADING_SEQUENTIAL;
    } else if (!strcmp(ATTN_BLAS_BACKEND, "netlib") && !info->library[0]) {
        copy(info->loaded, sizeof info->loaded, "netlib");   /* linked statically */
        info->threading = ATTN_BLAS_THREADING_SEQUENTIAL;
    }
    if (h)
        dlclose(h);
}
