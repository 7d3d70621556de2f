/* The online-softmax step of the forward for a block of score rows that
 * need nothing but the softmax (no bias, mask, dropout or probabilities;
 * a row that sees only part of the n columns comes with -inf on the
 * rest): one call per slice instead of two indirect calls and the driver's
 * bookkeeping per row.  The C table instantiates attn_softmax_rows_with
 * below with its row_max and exp_sum; the AVX tables take 8 or 16 rows at
 * a time around attn_softmax_row_begin and _end.  Per row every table
 * takes the steps of attn_softmax_row_step, as the forward's and the
 * sparse forward's general loops do, so the bits are the same:
 *   mt = max(s_r), m' = max(m[r], mt);
 *   NaN in mt or m[r]: s_r = 0, m[r] = l[r] = corr[r] = NaN;
 *   m' = -inf (nothing visible yet): s_r = 0, corr[r] = 1;
 *   else c = (m[r] = -inf ? 0 : exp(m[r] - m')), s_r = exp(s_r - m'),
 *        l[r] = l[r] c + sum(s_r), m[r] = m', corr[r] = c. */
#ifndef ATTN_SOFTMAX_ROWS_H
#define ATTN_SOFTMAX_ROWS_H

#include "kernels/kernels.h"
#include "kernels/convert.h"
#include <math.h>
#include <string.h>

/* One row's online-softmax step, once its visible scores' max mt is known
 * (the steps above, on the n scores at sr), in two halves so that a table
 * may run the exps of several rows between them (softmax_rows_avx512 sums
 * 16 rows at once).  begin: returns 1 when the row is to be turned into
 * exp(s_r - m') (m' and c in *mnew and *c), 0 when it was cleared (NaN or
 * nothing visible yet; m, l and corr are then final). */
static inline __attribute__((always_inline)) int
attn_softmax_row_begin(float *sr, int64_t n, float mt, float *m, float *l, float *corr,
                       float *mnew, float *c)
{
    const float mold = *m;
    *mnew = mt > mold ? mt : mold;
    if (mt != mt || mold != mold) {
        /* NaN in a visible score: the row's result is NaN. */
        memset(sr, 0, (size_t)n * sizeof(float));
        *m = *l = *corr = NAN;
        return 0;
    }
    if (*mnew == -INFINITY) {
        /* Nothing visible yet: contributes nothing. */
        memset(sr, 0, (size_t)n * sizeof(float));
        *corr = 1.0f;
        return 0;
    }
    *c = mold == -INFINITY ? 0.0f : attn_exp_scalar(mold - *mnew);
    return 1;
}

/* end: the row's exps summed to sum. */
static inline __attribute__((always_inline)) void
attn_softmax_row_end(float *m, float *l, float *corr, float mnew, float c, float sum)
{
    *l = *l * c + sum;
    *m = mnew;
    *corr = c;
}

/* Both halves around exp_sum: returns 1 when the row was turned into
 * exp(s_r - m'), 0 when it was cleared.  Shared by softmax_rows and the
 * forward's and sparse forward's general loops, so every path takes the
 * same steps. */
static inline __attribute__((always_inline)) int
attn_softmax_row_step(float (*exp_sum)(float *, int64_t, float), float *sr, int64_t n, float mt,
                      float *m, float *l, float *corr)
{
    float mnew, c;
    if (!attn_softmax_row_begin(sr, n, mt, m, l, corr, &mnew, &c))
        return 0;
    attn_softmax_row_end(m, l, corr, mnew, c, exp_sum(sr, n, mnew));
    return 1;
}

static inline __attribute__((always_inline)) void
attn_softmax_rows_with(float (*row_max)(const float *, int64_t),
                       float (*exp_sum)(float *, int64_t, float), float *s, int64_t lds,
                       int64_t R, int64_t n, float *m, float *l, float *corr)
{
    for (int64_t r = 0; r < R; r++) {
        float *sr = s + r * lds;
        attn_softmax_row_step(exp_sum, sr, n, row_max(sr, n), m + r, l + r, corr + r);
    }
}

/* Rows of n fp32 values rounded to BF16 in place, front to back (the
 * portable tables' softmax_rows_p16 after their softmax_rows). */
static inline void attn_rows_to_bf16(float *s, int64_t lds, int64_t R, int64_t n)
{
    for (int64_t r = 0; r < R; r++) {
        float *row = s + r * lds;
        uint16_t *h = (uint16_t *)(void *)row;
        for (int64_t j = 0; j < n; j++) {
            const float x = row[j];   /* read before h[j] may overwrite it */
            h[j] = attn_f32_to_bf16(x);
        }
    }
}

#endif
