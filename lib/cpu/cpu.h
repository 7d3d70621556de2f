/* The one place that decides the machine (dav1d's src/cpu.c).
 *
 * - The CPU's features are read once per process (pthread_once) and folded
 *   into instruction-set levels, each defined here and nowhere else:
 *     ATTN_SIMD_AVX2    AVX2, FMA and F16C (every AVX2 table: the softmax
 *                       rows, the tile engine, the decode kernels, the
 *                       conversions);
 *     ATTN_SIMD_AVX512  the AVX2 level plus AVX-512 F, BW and VL;
 *     ATTN_SIMD_AVX512BF16  the AVX-512 level plus AVX512_BF16 (VDPBF16PS
 *                       for the BF16 products, VCVTNEPS2BF16);
 *     ATTN_SIMD_AMX     the AVX512_BF16 level plus AMX-BF16: the BF16
 *                       products on the tile unit (TDPBF16PS), everything
 *                       else as at ATTN_SIMD_AVX512BF16;
 *   so that ATTN_SIMD=avx512 runs the AVX-512 tables without the BF16
 *   unit on a CPU that has it (the tests hold one to the other), and
 *   ATTN_SIMD=avx512bf16 keeps the BF16 products off the tile unit.
 * - AMX needs the operating system as well as the CPU: the tile state is
 *   a dynamically enabled XSAVE feature that Linux grants a process on
 *   request (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
 *   Documentation/arch/x86/xstate.rst).  The detection asks once per
 *   process; the permission then holds for every thread of the process
 *   (and its forks), and a sigaltstack too small for the larger signal
 *   frame is refused from then on (the request itself fails, and the
 *   level stays below AMX, when one already installed is too small).
 * - The ATTN_* environment (ATTN_SIMD, ATTN_ENGINE, ATTN_DECODE) is read
 *   here only, by attn_settings_read, which every plan creator calls once
 *   (through attn_exec_init, core/exec.c): a program may change the
 *   variables between plans (the tests do), never during one.
 * cpu/ is the leaf of the library: it depends on nothing else in attn. */
#ifndef ATTN_CPU_H
#define ATTN_CPU_H

#include "attn_config.h"

enum {
    ATTN_SIMD_SCALAR = 0,
    ATTN_SIMD_AVX2 = 1,
    ATTN_SIMD_AVX512 = 2,
    ATTN_SIMD_AVX512BF16 = 3,  /* the AVX-512 level plus AVX512_BF16 */
    ATTN_SIMD_AMX = 4,         /* the AVX512_BF16 level plus AMX-BF16 */
    ATTN_SIMD_TOP = ATTN_SIMD_AMX
};

/* Feature bits of attn_cpu_flags(). */
enum {
    ATTN_CPU_AVX2 = 1 << 0,        /* the AVX2 level (AVX2 + FMA + F16C) */
    ATTN_CPU_AVX512 = 1 << 1,      /* the AVX-512 level (+ F, BW, VL) */
    ATTN_CPU_AVX512BF16 = 1 << 2,  /* AVX512_BF16 (VCVTNEPS2BF16, VDPBF16PS) */
    ATTN_CPU_AMXBF16 = 1 << 3,     /* AMX-TILE + AMX-BF16 usable here: CPUID
                                      (leaf 7 EDX bits 24, 22), XCR0's
                                      XTILECFG and XTILEDATA (bits 17, 18)
                                      and Linux's permission granted to
                                      this process; only with
                                      ATTN_CPU_AVX512BF16, only in a build
                                      with the kernel (ATTN_HAVE_AMX) */
    ATTN_CPU_AVX512VNNI = 1 << 4,  /* AVX512_VNNI (VPDPBUSD), with
                                      ATTN_CPU_AVX512, in a build with the
                                      kernel (ATTN_HAVE_VNNI): not a level
                                      but a unit the integer Q K^T uses
                                      from the AVX-512 level up */
};

/* The features of this CPU (once per process; the same answer after). */
unsigned attn_cpu_flags(void);

/* The highest level this CPU runs (no cap applied). */
int attn_cpu_level(void);

/* Why ATTN_CPU_AMXBF16 is set or not (a constant string, for the tests'
 * and tools' output): "usable", or the first check that failed. */
const char *attn_cpu_amx_note(void);

/* What the environment asks for, read once per plan. */
typedef struct attn_settings {
    int simd_cap;     /* ATTN_SIMD=scalar|avx2|avx512|avx512bf16|amx
                         (unset or unknown: ATTN_SIMD_TOP, i.e. no cap) */
    int level;        /* min(simd_cap, attn_cpu_level()): the level every
                         table of the plan is chosen at */
    int engine;       /* ATTN_ENGINE: 0 auto (unset or unknown), 1 blas,
                         2 tile (the values of attn_engine) */
    int decode;       /* ATTN_DECODE: 0 when it is "0", else 1 */
} attn_settings;

void attn_settings_read(attn_settings *s);

/* Only the level of the current settings (ATTN_SIMD and the CPU): what a
 * call without a plan (a conversion, a dropout mask, a query) picks its
 * table by. */
int attn_settings_level(void);

#endif
