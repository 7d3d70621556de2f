/* The online-softmax step of the forward for a block of score rows that
 * need nothing but the softmax (no bias, mask, dropout or probabilities;
 * every row sees all n columns), written once and instantiated in each
 * table's file with that table's row_max and exp_sum inlined: one call per
 * slice instead of two indirect calls and the driver's bookkeeping per
 * row.  Per row it does exactly what the forward's general loop does, in
 * the same order, so the bits are the same:
 *   mt = max(s_r), m' = max(m[r], mt);
 *   NaN in mt or m[r]: s_r = 0, m[r] = l[r] = corr[r] = NaN;
 *   m' = -inf (nothing visible yet): s_r = 0, corr[r] = 1;
 *   else c = (m[r] = -inf ? 0 : exp(m[r] - m')), s_r = exp(s_r - m'),
 *        l[r] = l[r] c + sum(s_r), m[r] = m', corr[r] = c. */
#ifndef ATTN_SOFTMAX_ROWS_H
#define ATTN_SOFTMAX_ROWS_H

#include "kernels/kernels.h"
#include <math.h>
#include <string.h>

static inline __attribute__((always_inline)) void
attn_softmax_rows_with(float (*row_max)(const float *, int64_t),
                       float (*exp_sum)(float *, int64_t, float), float *s, int64_t lds,
                       int64_t R, int64_t n, float *m, float *l, float *corr)
{
    for (int64_t r = 0; r < R; r++) {
        float *sr = s + r * lds;
        const float mt = row_max(sr, n), mold = m[r];
        const float mnew = mt > mold ? mt : mold;
        if (mt != mt || mold != mold) {
            memset(sr, 0, (size_t)n * sizeof(float));
            m[r] = l[r] = corr[r] = NAN;
            continue;
        }
        if (mnew == -INFINITY) {
            memset(sr, 0, (size_t)n * sizeof(float));
            corr[r] = 1.0f;
            continue;
        }
        const float c = mold == -INFINITY ? 0.0f : attn_exp_scalar(mold - mnew);
        const float sum = exp_sum(sr, n, mnew);
        l[r] = l[r] * c + sum;
        m[r] = mnew;
        corr[r] = c;
    }
}

#endif
