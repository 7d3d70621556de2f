/*
 * demo_model.h -- the toy attention model of attn-demo: word features, a
 * sinusoidal position code and the fixed projections W_q, W_k, W_v of two
 * heads.  The terminal heatmaps and the HTML view (demo_html.c) share it.
 */
#ifndef ATTN_DEMO_MODEL_H
#define ATTN_DEMO_MODEL_H

#include <stddef.h>

enum { DEMO_DMODEL = 12, DEMO_NHEAD = 2, DEMO_DHEAD = DEMO_DMODEL / DEMO_NHEAD };

/* Embedding dimensions 0..7 are word features, 8..11 the position code. */
enum { F_DET, F_NOUN, F_VERB, F_PREP, F_RHYME, F_ANIMATE, F_PLACE, F_WORD,
       F_POS0 = 8, DEMO_NFEAT = 8 };

/* What the attention view says about this model (docs/VIEW.md): it is not
 * trained, so its weights show what attn computes, not learned structure. */
#define DEMO_MODEL_NOTE                                                                    \
    "Untrained toy model: these weights come from attn-demo's small built-in model "      \
    "(d_model 12, 2 heads of 6), not from a trained language model. Its projections "     \
    "were set by hand for the five words of \"The cat sat on the mat\"; every other "   \
    "word gets pseudo-random features (a hash of its text) and the values are random, "   \
    "so for any other sentence the patterns are those of random weights, not of "         \
    "anything learned."

/* The hand-made features of the words of "The cat sat on the mat", looked
 * up by the lowercased word; returns 1 and fills f, or 0 if the word is not
 * one of them. */
int demo_lexicon(const char *lower, float f[DEMO_NFEAT]);

/* Features of any other token, a pure function of its bytes: a 64-bit
 * FNV-1a hash of the word (ASCII letters lowercased) seeds SplitMix64, and
 * features 0..6 are (z >> 40) / 2^24 of its first seven outputs, in [0, 1);
 * feature 7 (F_WORD) is 1 when the token starts with a letter, a digit or
 * a non-ASCII byte, 0 for punctuation.  docs/VIEW.md states this too. */
void demo_hashed_features(const char *word, size_t len, float f[DEMO_NFEAT]);

/* The position code of token i: (sin, cos) of i w at w = pi/3 and pi/6,
 * rounded to float. */
void demo_position(int i, float code[4]);

/* The projections, [in][out] row-major: y = x W. */
void demo_weights(float wq[DEMO_DMODEL][DEMO_DMODEL], float wk[DEMO_DMODEL][DEMO_DMODEL],
                  float wv[DEMO_DMODEL][DEMO_DMODEL]);

#endif
