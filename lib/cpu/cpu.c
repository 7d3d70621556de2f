/* CPU features (once per process) and the ATTN_* settings (once per plan). */
#include "cpu/cpu.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if ATTN_HAVE_X86_KERNELS && (!ATTN_HAVE_CPU_SUPPORTS_F16C || ATTN_HAVE_AMX)
#include <cpuid.h>
#endif
#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AMX && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_DETECT 1
#else
#define AMX_DETECT 0
#endif

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static unsigned cpu_flags;
static const char *amx_note = "not built (the compiler lacks AMX, or not x86-64 Linux)";

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

#if AMX_DETECT
/* Linux's arch_prctl codes (asm/prctl.h, 5.16 and later) and the XSAVE
 * components of the tile state; spelled out for older headers. */
#define AMX_ARCH_GET_XCOMP_PERM 0x1022
#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILECFG 17
#define AMX_XFEATURE_XTILEDATA 18

/* XCR0 (XGETBV with ECX = 0; the caller has checked OSXSAVE). */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    return (uint64_t)hi << 32 | lo;
}

/* Whether this process may run the AMX kernel (bf16_amx.c: 8 tiles of 16
 * rows x 64 bytes, palette 1, TDPBF16PS); sets amx_note either way. */
static int amx_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {
        amx_note = "no OSXSAVE (XGETBV)";
        return 0;
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 22))) {
        amx_note = "CPUID: no AMX-TILE or no AMX-BF16";
        return 0;
    }
    const uint64_t tile =
        (uint64_t)1 << AMX_XFEATURE_XTILECFG | (uint64_t)1 << AMX_XFEATURE_XTILEDATA;
    if ((xcr0() & tile) != tile) {
        amx_note = "XCR0: the OS has not enabled XTILECFG and XTILEDATA";
        return 0;
    }
    /* Palette 1 (the only one): at least 8 tiles of 16 rows of 64 bytes
     * (leaf 0x1D: subleaf 0 EAX the highest palette; subleaf 1 EAX[31:16]
     * bytes per tile, EBX[15:0] bytes per row, EBX[31:16] tiles, ECX[15:0]
     * rows). */
    if (!__get_cpuid_count(0x1d, 0, &a, &b, &c, &d) || a < 1 ||
        !__get_cpuid_count(0x1d, 1, &a, &b, &c, &d) || (a >> 16) < 1024 ||
        (b & 0xffff) < 64 || (b >> 16) < 8 || (c & 0xffff) < 16) {
        amx_note = "CPUID 0x1D: no palette 1 of 8 tiles of 16 rows x 64 bytes";
        return 0;
    }
    /* The permission, for the whole process; then read back. */
    if (syscall(SYS_arch_prctl, AMX_ARCH_REQ_XCOMP_PERM, AMX_XFEATURE_XTILEDATA) != 0) {
        amx_note = "Linux refused ARCH_REQ_XCOMP_PERM for XTILEDATA (kernel before 5.16, or a "
                   "sigaltstack too small for the tile state)";
        return 0;
    }
    uint64_t perm = 0;
    if (syscall(SYS_arch_prctl, AMX_ARCH_GET_XCOMP_PERM, &perm) != 0 ||
        !(perm & ((uint64_t)1 << AMX_XFEATURE_XTILEDATA))) {
        amx_note = "ARCH_GET_XCOMP_PERM does not show XTILEDATA";
        return 0;
    }
    amx_note = "usable";
    return 1;
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
#if ATTN_HAVE_VNNI
            if (__builtin_cpu_supports("avx512vnni"))
                f |= ATTN_CPU_AVX512VNNI;
#endif
#if ATTN_HAVE_AVX512BF16
            if (__builtin_cpu_supports("avx512bf16")) {
                f |= ATTN_CPU_AVX512BF16;
#if AMX_DETECT
                if (amx_usable())
                    f |= ATTN_CPU_AMXBF16;
#endif
            }
#endif
        }
    }
#endif
#if AMX_DETECT
    if (!(f & ATTN_CPU_AVX512BF16))
        amx_note = "no AVX512_BF16 level (the AMX table extends it)";
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
        return f & ATTN_CPU_AMXBF16      ? ATTN_SIMD_AMX
             : f & ATTN_CPU_AVX512BF16   ? ATTN_SIMD_AVX512BF16
                                         : ATTN_SIMD_AVX512;
    return f & ATTN_CPU_AVX2 ? ATTN_SIMD_AVX2 : ATTN_SIMD_SCALAR;
}

const char *attn_cpu_amx_note(void)
{
    pthread_once(&cpu_once, cpu_detect);
    return amx_note;
}

static int simd_cap(void)
{
    const char *simd = getenv("ATTN_SIMD");
    return simd && !strcmp(simd, "scalar")     ? ATTN_SIMD_SCALAR
         : simd && !strcmp(simd, "avx2")       ? ATTN_SIMD_AVX2
         : simd && !strcmp(simd, "avx512")     ? ATTN_SIMD_AVX512
         : simd && !strcmp(simd, "avx512bf16") ? ATTN_SIMD_AVX512BF16
         : simd && !strcmp(simd, "amx")        ? ATTN_SIMD_AMX
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
