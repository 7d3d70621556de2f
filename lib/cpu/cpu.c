/* CPU features (once per process) and the ATTN_* settings (once per plan). */
#include "cpu/cpu.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if ATTN_HAVE_X86_KERNELS && !ATTN_HAVE_CPU_SUPPORTS_F16C
#include <cpuid.h>
#endif

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static unsigned cpu_flags;

#if ATTN_HAVE_X86_KERNELS
/* F16C uses the AVX register state, whose support by the OS
 * __builtin_cpu_supports("avx2") already implies.  clang 14 does not know
 * __builtin_cpu_supports("f16c"): read CPUID then. */
static int has_f16c(void)
{
#if ATTN_HAVE_CPU_SUPPORTS_F16C
    return __builtin_cpu_supports("f16c");
#else
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
#endif
}
#endif

static void cpu_detect(void)
{
    unsigned f = 0;
#if ATTN_HAVE_X86_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c()) {
        f |= ATTN_CPU_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl")) {
            f |= ATTN_CPU_AVX512;
#if ATTN_HAVE_AVX512BF16
            if (__builtin_cpu_supports("avx512bf16"))
                f |= ATTN_CPU_AVX512BF16;
#endif
        }
    }
#endif
    cpu_flags = f;
}

unsigned attn_cpu_flags(void)
{
    pthread_once(&cpu_once, cpu_detect);
    return cpu_flags;
}

int attn_cpu_level(void)
{
    const unsigned f = attn_cpu_flags();
    if (f & ATTN_CPU_AVX512)
        return f & ATTN_CPU_AVX512BF16 ? ATTN_SIMD_AVX512BF16 : ATTN_SIMD_AVX512;
    return f & ATTN_CPU_AVX2 ? ATTN_SIMD_AVX2 : ATTN_SIMD_SCALAR;
}

static int simd_cap(void)
{
    const char *simd = getenv("ATTN_SIMD");
    return simd && !strcmp(simd, "scalar") ? ATTN_SIMD_SCALAR
         : simd && !strcmp(simd, "avx2")   ? ATTN_SIMD_AVX2
         : simd && !strcmp(simd, "avx512") ? ATTN_SIMD_AVX512
                                           : ATTN_SIMD_TOP;
}

static int level_under(int cap)
{
    const int cpu = attn_cpu_level();
    return cap < cpu ? cap : cpu;
}

int attn_settings_level(void)
{
    return level_under(simd_cap());
}

void attn_settings_read(attn_settings *s)
{
    s->simd_cap = simd_cap();
    s->level = level_under(s->simd_cap);
    const char *engine = getenv("ATTN_ENGINE");
    s->engine = engine && !strcmp(engine, "blas") ? 1 : engine && !strcmp(engine, "tile") ? 2 : 0;
    const char *decode = getenv("ATTN_DECODE");
    s->decode = !(decode && !strcmp(decode, "0"));
}
