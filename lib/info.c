/* attn_blas_query: what the build chose and what the process really runs.
 * On Debian the library behind libblas.so.3 / libopenblas.so.0 is chosen by
 * update-alternatives and can change without a rebuild, so the loaded object
 * is found with dladdr() on the symbol attn calls and identified by the
 * extension functions it exports. */
#include "internal.h"
#include "blas.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *identify(void *handle)
{
    static const struct { const char *symbol, *name; } probes[] = {
        { "openblas_get_config", "openblas" },
        { "bli_info_get_version_str", "blis" },
        { "mkl_get_version_string", "mkl" },
        { "MKL_Get_Version_String", "mkl" },
    };
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        if (dlsym(handle, probes[i].symbol))
            return probes[i].name;
    return NULL;
}

attn_status attn_blas_query(attn_blas_info *info)
{
    if (!info)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(info, 0, sizeof *info);
    snprintf(info->backend, sizeof info->backend, "%s", ATTN_BLAS_BACKEND);
    snprintf(info->loaded, sizeof info->loaded, "unknown");

    Dl_info dl, self;
    const char *name = NULL;
    if (dladdr(attn_blas_entry_point(), &dl) && dl.dli_fname) {
        /* "" when the BLAS is linked into the same object as attn. */
        int same = dladdr((void *)(uintptr_t)&attn_blas_query, &self) &&
                   self.dli_fbase == dl.dli_fbase;
        if (!same) {
            snprintf(info->library, sizeof info->library, "%s", dl.dli_fname);
            void *h = dlopen(dl.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
            if (h) {
                name = identify(h);
                dlclose(h);
            }
        }
    }
    if (!name)
        name = identify(RTLD_DEFAULT);
    if (!name && strstr(info->library, "/blas/libblas"))
        name = "netlib";
    if (!name && !strcmp(ATTN_BLAS_BACKEND, "netlib"))
        name = "netlib";   /* statically linked reference BLAS */
    if (name)
        snprintf(info->loaded, sizeof info->loaded, "%s", name);

    attn_blas_describe(info);
    const attn_kernels *k = attn_kernels_select();
    snprintf(info->simd, sizeof info->simd, "%s", k->name);
    info->openmp = ATTN_HAVE_OPENMP;
    info->max_threads = attn_max_threads();
    return ATTN_OK;
}
