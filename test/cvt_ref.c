#include "cvt_ref.h"
#include <math.h>
#include <string.h>

/* The two formats: significand bits p (with the implicit one), exponent
 * bits, bias; emin = 1 - bias. */
typedef struct { int p, ebits, bias; } fmt16;
static const fmt16 F16 = { 11, 5, 15 }, BF16 = { 8, 8, 127 };

static double max_finite(const fmt16 *f)
{
    /* (2 - 2^(1-p)) * 2^emax, emax = bias */
    return ldexp(2.0 - ldexp(1.0, 1 - f->p), f->bias);
}

double cvt_ref_value(int bf16, uint16_t h)
{
    const fmt16 *f = bf16 ? &BF16 : &F16;
    const int mbits = f->p - 1;
    const unsigned e = (h >> mbits) & ((1u << f->ebits) - 1), m = h & ((1u << mbits) - 1);
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == (1u << f->ebits) - 1)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp((double)m, 1 - f->bias - mbits);
    return s * ldexp((double)(m | (1u << mbits)), (int)e - f->bias - mbits);
}

uint32_t cvt_ref_to_f32(int bf16, uint16_t h)
{
    const double v = cvt_ref_value(bf16, h);
    if (v != v) {
        if (bf16)
            return (uint32_t)h << 16;
        return ((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | ((uint32_t)(h & 0x3ff) << 13);
    }
    const float fv = (float)v;   /* exact: both formats are subsets of fp32 */
    uint32_t u;
    memcpy(&u, &fv, sizeof u);
    return u;
}

/* The pattern of a nonnegative value of the format (or +Inf). */
static uint16_t encode(const fmt16 *f, double v)
{
    const int mbits = f->p - 1, emin = 1 - f->bias;
    if (isinf(v))
        return (uint16_t)(((1u << f->ebits) - 1) << mbits);
    if (v < ldexp(1.0, emin))
        return (uint16_t)(v / ldexp(1.0, emin - mbits));     /* denormal or 0 */
    int e;
    frexp(v, &e);                                             /* v in [2^(e-1), 2^e) */
    const double frac = v / ldexp(1.0, e - 1) - 1.0;          /* in [0, 1) */
    return (uint16_t)(((unsigned)(e - 1 + f->bias) << mbits) | (unsigned)(frac * (1u << mbits)));
}

uint16_t cvt_ref_from_f32(int bf16, uint32_t x)
{
    const fmt16 *f = bf16 ? &BF16 : &F16;
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    float fx;
    memcpy(&fx, &x, sizeof fx);
    if (fx != fx) {
        if (bf16)
            return (uint16_t)((x >> 16) | 0x0040u);
        return (uint16_t)(sign | 0x7e00u | ((x & 0x7fffffu) >> 13));
    }
    double a = fabs((double)fx);
    if (isinf(a))
        return (uint16_t)(sign | encode(f, a));
    /* The quantum of a's binade in the format, denormals included. */
    const int emin = 1 - f->bias;
    int e;
    frexp(a, &e);
    if (a == 0.0 || e - 1 < emin)
        e = emin + 1;
    const double q = ldexp(1.0, e - 1 - (f->p - 1));
    const double k = a / q, r = floor(k), d = k - r;
    double n = r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) == 1.0))
        n = r + 1.0;
    double v = n * q;
    /* Rounding with an unbounded exponent, then overflow to Inf. */
    if (v > max_finite(f))
        v = INFINITY;
    return (uint16_t)(sign | encode(f, v));
}
