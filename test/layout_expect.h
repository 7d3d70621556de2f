/*
 * layout_expect.h -- constructions of the block layouts of attn.h's layout
 * builders (attn_layout_build_bigbird, _strided, _fixed), written from the
 * definitions in attn.h a different way than lib/sdpa/layout.c (marking
 * from each block outwards instead of testing each (I, J); BigBird's random
 * blocks by removal from an explicit list of hidden blocks).  Used by the
 * sparse tests (test_sdpa.c) and the fuzz target (test/fuzz/fuzz_layout.c).
 * Each fills e[nb][mb] with 1 (visible) and 0 for valid arguments.
 */
#ifndef ATTN_TEST_LAYOUT_EXPECT_H
#define ATTN_TEST_LAYOUT_EXPECT_H

#include <stdint.h>

/* Returns 0, or -1 when memory ran out (e is then incomplete). */
int expect_bigbird(uint8_t *e, int64_t nb, int64_t mb, int64_t w, int64_t gb, int64_t r,
                   uint64_t seed);
void expect_strided(uint8_t *e, int64_t nb, int64_t mb, int64_t l, int causal);
void expect_fixed(uint8_t *e, int64_t nb, int64_t mb, int64_t l, int64_t c, int causal);

#endif
