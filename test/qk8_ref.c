/* qk8_ref.h: attn.h's rounding of Q for integer scores. */
#include "qk8_ref.h"

#include <float.h>
#include <math.h>

float qk8_ref_round(const float *x, int q[32])
{
    float amax = 0.0f;
    int bad = 0;
    for (int i = 0; i < 32; i++) {
        if (isnan(x[i]) || isinf(x[i]))
            bad = 1;
        else if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    }
    const float s = amax / 127.0f;
    for (int i = 0; i < 32; i++)
        q[i] = 0;
    if (bad)
        return NAN;
    if (s < FLT_MIN)
        return 0.0f;
    const float id = 1.0f / s;
    for (int i = 0; i < 32; i++) {
        const float v = x[i] * id;   /* one fp32 multiply */
        const double a = floor(fabs((double)v) + 0.5);
        q[i] = (int)(v < 0 ? -a : a);
    }
    return s;
}

void qk8_ref_round_view(float *q0, const attn_view *v, int64_t B, int64_t H, int64_t n,
                        int64_t d)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < n; i++)
                qk8_ref_round_row(q0 + b * v->batch + h * v->head + i * v->seq, d);
}

void qk8_ref_round_row(float *x, long long d)
{
    int q[32];
    for (long long b = 0; b < d / 32; b++) {
        const float s = qk8_ref_round(x + 32 * b, q);
        for (int i = 0; i < 32; i++)
            x[32 * b + i] = (float)((double)q[i] * (double)s);
    }
}
