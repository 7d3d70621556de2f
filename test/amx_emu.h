/* A C model of the AMX tile unit (palette 1, TDPBF16PS) and the amx
 * table's mm (lib/kernels/bf16_amx.c, the same source) run on it: the
 * kernel's blocking, edges, copies and the combine with alpha / rs / C
 * run on every CPU with AVX-512 F/BW/VL, and its tile loads read memory
 * with plain C (every byte of them checked by the sanitizers).  See
 * amx_emu.c. */
#ifndef ATTN_TEST_AMX_EMU_H
#define ATTN_TEST_AMX_EMU_H

#include <stddef.h>
#include <stdint.h>
#include "kernels/bf16.h"

/* TDPBF16PS's order of additions in the model:
 *   AMX_EMU_SDM    the SDM's: per 16 pairs, the even products in one fp32
 *                  sum and the odd ones in another (each an FMA), the two
 *                  added, then added to the tile;
 *   AMX_EMU_CHAIN  the intrinsics guide's: one chain through the tile
 *                  element, even then odd product of each pair.
 * Every step with DAZ, FTZ and round to nearest even. */
enum { AMX_EMU_SDM = 0, AMX_EMU_CHAIN = 1 };

/* bf16_amx.c's mm on the model, in that order (needs AVX-512 F/BW/VL). */
void amx_emu_mm(int order, int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                int64_t ldc, int acc, attn_ahead *ah);

/* Misuses of the unit seen so far (an invalid configuration, a tile used
 * unconfigured, mismatched TDPBF16PS shapes, the state left configured at
 * the end of a call): their count, and the first one's description. */
long amx_emu_errors(const char **first);

/* TDPBF16PS instructions run so far. */
long amx_emu_dp_count(void);

/* The elements of the product in A and B (rows of row_bytes every stride
 * bytes from base, within a buffer of bytes): from now on, a tile load
 * that reads a byte of either buffer outside them is a misuse (the
 * kernel's copies on its stack are outside both).  NULL bases: no fence. */
void amx_emu_fence(const void *a, size_t a_bytes, int64_t a_stride, int64_t a_rows,
                   int64_t a_row_bytes, const void *b, size_t b_bytes, int64_t b_stride,
                   int64_t b_rows, int64_t b_row_bytes);

#endif
