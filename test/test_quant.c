/*
 * test_quant.c -- the quantized K/V storage types Q8_0 and Q4_0 (attn.h,
 * "Quantized KV caches", 1.2), through the public API only.
 *
 * One table of blocks of 32 floats (`blocks`, made by build_blocks): random
 * blocks at magnitudes from 1e-30 to 1e38 and of mixed magnitudes, exact
 * ties of both rounding rules and their fp32 neighbours, zeros, -0.0, a
 * single nonzero, the largest |x| at the negative end, equal |max| of both
 * signs, denormals, scales at the edges of binary16's subnormals and of its
 * range, scales whose reciprocal overflows fp32, NaN and +-Inf.  The checks
 * over it:
 *
 *   quantize    attn_quantize's bytes, bit for bit, against this file's
 *               reference of attn.h's rules (ref_q8_0, ref_q4_0: each step
 *               one fp32 operation stored to a volatile float, ties-away
 *               and truncation done in double, binary16 rounding by
 *               ref_f16), block by block and as one tensor into an
 *               unaligned buffer; hand-computed answers check the
 *               reference itself (test_known_answers);
 *   dequantize  attn_dequantize of those bytes, and of random blocks with
 *               every class of scale (normal, subnormal, +-0, +-Inf, NaN,
 *               the largest), against q x d and (q - 8) x d with d decoded
 *               here: the same float bits (any NaN for a NaN);
 *   round trip  per finite block with a finite stored scale d16 (D the
 *               exact scale, max|x| / 127 or M / -8, in double):
 *               |x - deq| <= |D|/2 + 127 |d16 - D| for Q8_0, |D| +
 *               8 |d16 - D| for Q4_0 (attn.h: d / 2 or d "plus the scale's
 *               rounding", here both roundings, fp32's and binary16's),
 *               each plus 2^-20 max|x| for the roundings of id and x id;
 *               a NaN/Inf block reads
 *               back as 32 NaNs, a block whose scale overflows binary16 as
 *               +-Inf or NaN;
 *   16-bit      attn_quantize / attn_dequantize at F16 and BF16 are
 *               attn_dtype_encode / decode (every 16-bit pattern decoded),
 *               at F32 a copy (NaN payloads kept), at every ATTN_SIMD level;
 *   errors      a table over attn_quantize, attn_dequantize and
 *               attn_dtype_bytes: NULL pointers, n < 0, n not a multiple of
 *               32 for the block types, unknown types (5, 99, -1), counts
 *               past SIZE_MAX; nothing written on error; attn_dtype_bytes
 *               of every type;
 *   kv_append   appends into Q8_0 and Q4_0 caches (F16/BF16/F32 beside
 *               them; contiguous and paged; GQA descs; new_lens; several
 *               appends in a row; strided new rows; views with gaps) hold
 *               exactly attn_quantize's bytes of each row (themselves the
 *               reference's), every other byte keeps its sentinel, kv_lens
 *               grow; then attn_sdpa over the caches (decode and sgemm
 *               paths, every ATTN_SIMD level) is bitwise the call with F32
 *               K and V holding attn_dequantize's values (attn.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

enum { QK = 32, Q8B = 34, Q4B = 18 };

/* ------------------------------------------------------------ helpers */

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next_u64(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(void)
{
    return (double)(next_u64() >> 11) * 0x1p-53;
}

/* uniform in (-mag, mag), as a float */
static float uniform(double mag)
{
    return (float)((2.0 * unit() - 1.0) * mag);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The same float: equal bits, or both NaN (payloads are not compared). */
static int same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || fbits(a) == fbits(b);
}

static const char *tname(attn_dtype t)
{
    switch (t) {
    case ATTN_DTYPE_F32: return "F32";
    case ATTN_DTYPE_F16: return "F16";
    case ATTN_DTYPE_BF16: return "BF16";
    case ATTN_DTYPE_Q8_0: return "Q8_0";
    case ATTN_DTYPE_Q4_0: return "Q4_0";
    default: return "unknown";
    }
}

static int is_block_type(attn_dtype t)
{
    return t == ATTN_DTYPE_Q8_0 || t == ATTN_DTYPE_Q4_0;
}

static size_t block_bytes(attn_dtype t)
{
    return t == ATTN_DTYPE_Q8_0 ? Q8B : Q4B;
}

/* Run body at every ATTN_SIMD level (set before the calls: plans read it),
 * or only at the environment's when it sets one. */
static const char *const simd_levels[] = { "scalar", "avx2", "avx512" };
static int simd_count(int given)
{
    return given ? 1 : 3;
}

static void simd_set(int l, int given)
{
    if (!given)
        setenv("ATTN_SIMD", simd_levels[l], 1);
}

/* ------------------------------------------------- the reference rules */

/*
 * binary16 of a float: round to nearest, ties to even, from the format's
 * definition (sign, 5 exponent bits of bias 15, 10 fraction bits;
 * subnormals in units of 2^-24 below 2^-14; rounding past the largest
 * finite, 65504, to +-Inf), in double where each step here is exact and
 * nearbyint rounds ties to even (the default mode).  Not the library's.
 */
static uint16_t ref_f16(float f)
{
    const uint32_t u = fbits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    const double a = fabs((double)f);
    if (isinf(a))
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x1p-14)      /* 1024 units is 0x0400, the smallest normal: right */
        return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24));
    int e2;
    (void)frexp(a, &e2);  /* a in [2^(e2-1), 2^e2) */
    int e = e2 - 1;
    double m = nearbyint(ldexp(a, 10 - e)); /* in [1024, 2048] */
    if (m == 2048.0) {
        m = 1024.0;
        e++;
    }
    if (e > 15)
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)(m - 1024.0));
}

/* A binary16 value as a float (exact). */
static float ref_f16_to_f32(uint16_t h)
{
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31)
        return m ? NAN : s ? -INFINITY : INFINITY;
    const double v = e ? ldexp(1024.0 + m, e - 25) : ldexp((double)m, -24);
    return (float)(s ? -v : v);
}

static uint16_t scale_of(const uint8_t *blk)
{
    return (uint16_t)(blk[0] | blk[1] << 8);
}

static void put_scale(uint8_t *blk, uint16_t h)
{
    blk[0] = (uint8_t)(h & 0xff);
    blk[1] = (uint8_t)(h >> 8);
}

static int block_finite(const float *x)
{
    for (int i = 0; i < QK; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static int g_ref_bad; /* the reference met a value its rule excludes */

/*
 * Q8_0 (attn.h): amax = max |x_i|; d = amax / 127; id = d != 0 ? 1 / d : 0;
 * q_i = roundf(x_i x id) (ties away from zero); scale = d to binary16.  Each
 * fp32 operation is stored to a volatile float (no contraction, no excess
 * precision).  A block holding a NaN or an infinity: scale 0x7E00, q 0.
 * Where x id is not finite (1 / d overflowed): q 0 (attn.h).  *dout: d.
 */
static void ref_q8_0(const float *x, uint8_t *blk, float *dout)
{
    if (!block_finite(x)) {
        put_scale(blk, 0x7e00);
        memset(blk + 2, 0, QK);
        if (dout)
            *dout = NAN;
        return;
    }
    volatile float amax = 0.0f;
    for (int i = 0; i < QK; i++) {
        volatile float a = fabsf(x[i]);
        if (a > amax)
            amax = a;
    }
    volatile float d = amax / 127.0f;
    volatile float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_scale(blk, ref_f16(d));
    for (int i = 0; i < QK; i++) {
        volatile float p = x[i] * id;
        int q = 0;
        if (isfinite(p)) {
            /* ties away from zero, in double: |p| + 0.5 is exact there */
            const double r = floor(fabs((double)p) + 0.5);
            if (r > 127.0 + (p < 0)) {
                g_ref_bad++;
                printf("REFERENCE: Q8_0 q = %g out of range\n", r);
            }
            q = p < 0 ? -(int)r : (int)r;
        }
        blk[2 + i] = (uint8_t)(int8_t)q;
    }
    if (dout)
        *dout = d;
}

/*
 * Q4_0 (attn.h): M = the x_i of largest |x_i| (the first of equals);
 * d = M / -8; id = d != 0 ? 1 / d : 0; q_i = min(15, trunc(x_i x id +
 * 8.5f)); scale = d to binary16; byte 2 + j holds q_j (low nibble) and
 * q_(j+16) (high).  NaN/Inf block: scale 0x7E00, every q 8.  Where
 * x id + 8.5 is not finite (1 / d overflowed): q 0 (attn.h).
 */
static void ref_q4_0(const float *x, uint8_t *blk, float *dout)
{
    uint8_t q[QK];
    if (!block_finite(x)) {
        put_scale(blk, 0x7e00);
        memset(blk + 2, 0x88, QK / 2);
        if (dout)
            *dout = NAN;
        return;
    }
    volatile float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < QK; i++) {
        volatile float a = fabsf(x[i]);
        if (amax < a) {
            amax = a;
            max = x[i];
        }
    }
    volatile float d = max / -8.0f;
    volatile float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_scale(blk, ref_f16(d));
    for (int i = 0; i < QK; i++) {
        volatile float p = x[i] * id;
        volatile float s = p + 8.5f;
        int v = 0;
        if (isfinite(s)) {
            const double t = trunc((double)s);
            if (t < 0.0 || t > 16.0) {
                g_ref_bad++;
                printf("REFERENCE: Q4_0 trunc = %g out of range\n", t);
            }
            v = t < 15.0 ? (int)t : 15;
        }
        q[i] = (uint8_t)v;
    }
    for (int j = 0; j < QK / 2; j++)
        blk[2 + j] = (uint8_t)(q[j] | q[j + 16] << 4);
    if (dout)
        *dout = d;
}

static void ref_block(attn_dtype t, const float *x, uint8_t *blk, float *d)
{
    if (t == ATTN_DTYPE_Q8_0)
        ref_q8_0(x, blk, d);
    else
        ref_q4_0(x, blk, d);
}

/* q of value i of a block (Q4_0: the nibble, unsigned). */
static int q_of(attn_dtype t, const uint8_t *blk, int i)
{
    if (t == ATTN_DTYPE_Q8_0)
        return (int8_t)blk[2 + i];
    return i < 16 ? blk[2 + i] & 15 : blk[2 + i - 16] >> 4;
}

/* The value formula: q x d (Q8_0), (q - 8) x d (Q4_0); exact in fp32. */
static float value_of(attn_dtype t, const uint8_t *blk, int i)
{
    const float d = ref_f16_to_f32(scale_of(blk));
    const int q = q_of(t, blk, i);
    volatile float v = (float)(t == ATTN_DTYPE_Q8_0 ? q : q - 8) * d;
    return v;
}

/* ------------------------------------------------------ the block table */

#define MAXBLOCKS 400
typedef struct block {
    char name[80];
    float x[QK];
} block;

static block blocks[MAXBLOCKS];
static int nblocks;

static float *add_block(const char *fmt, ...)
{
    assert_true(nblocks < MAXBLOCKS);
    block *b = &blocks[nblocks++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    memset(b->x, 0, sizeof b->x);
    return b->x;
}

static void fill_uniform(float *x, double mag)
{
    for (int i = 0; i < QK; i++)
        x[i] = uniform(mag);
}

/* A block whose Q8_0 scale is exactly d: x[0] = 127 d (exact for the d
 * below, of at most 17 significant bits), the rest inside. */
static void q8_scale_block(const char *what, double d)
{
    float *x = add_block("Q8_0 scale %s (d = %a)", what, d);
    fill_uniform(x, 127.0 * d);
    x[0] = (float)(127.0 * d);
    x[9] = -x[9];
}

/* A block whose Q4_0 scale is exactly d: its signed max -8 d. */
static void q4_scale_block(const char *what, double d)
{
    float *x = add_block("Q4_0 scale %s (d = %a)", what, d);
    fill_uniform(x, 8.0 * fabs(d));
    x[5] = (float)(-8.0 * d);
}

static void build_blocks(void)
{
    if (nblocks)
        return;
    /* random at several magnitudes (through both scale edges and past
     * binary16's range: 1e6 overflows Q4_0's scale, 1e7 Q8_0's) */
    static const double mags[] = { 1e-30, 1e-20, 1e-10, 1e-6, 3e-5, 1e-3, 0.1, 1.0, 10.0,
                                   1e3, 1e5, 5e5, 1e6, 1e7, 1e20, 1e38 };
    for (size_t m = 0; m < sizeof mags / sizeof mags[0]; m++)
        for (int s = 0; s < 6; s++)
            fill_uniform(add_block("random |x| < %g #%d", mags[m], s), mags[m]);
    for (int s = 0; s < 8; s++) {
        float *x = add_block("random, mixed magnitudes #%d", s);
        for (int i = 0; i < QK; i++)
            x[i] = (float)((2.0 * unit() - 1.0) * pow(10.0, -44.0 + 82.0 * unit()));
    }
    for (int s = 0; s < 4; s++) {
        float *x = add_block("random integers, x[0] = 127 (Q8_0 d = 1) #%d", s);
        for (int i = 1; i < QK; i++)
            x[i] = (float)((int)(next_u64() % 255) - 127);
        x[0] = 127.0f;
    }

    /* zeros and signed zeros */
    add_block("zeros");
    {
        float *x = add_block("-0.0 everywhere");
        for (int i = 0; i < QK; i++)
            x[i] = -0.0f;
        x = add_block("0.0 and -0.0 alternating");
        for (int i = 0; i < QK; i++)
            x[i] = i & 1 ? -0.0f : 0.0f;
        x = add_block("-0.0 and one 1.0");
        for (int i = 0; i < QK; i++)
            x[i] = -0.0f;
        x[17] = 1.0f;
    }
    /* a single nonzero */
    {
        static const int pos[] = { 0, 13, 16, 31 };
        static const float val[] = { 1.0f, -1.0f, 3e-3f, -7e4f };
        for (int p = 0; p < 4; p++)
            for (int v = 0; v < 4; v++)
                add_block("single nonzero %g at %d", (double)val[v], pos[p])[pos[p]] = val[v];
    }
    /* the largest |x| negative (Q4_0's signed max), equal |max| of both
     * signs (the first wins), every value equal */
    {
        static const int pos[] = { 0, 9, 31 };
        for (int p = 0; p < 3; p++) {
            float *x = add_block("max at the negative end, x[%d] = -3.5", pos[p]);
            fill_uniform(x, 1.0);
            x[pos[p]] = -3.5f;
        }
        float *x = add_block("equal |max|: x[4] = 2 first, x[21] = -2");
        fill_uniform(x, 1.0);
        x[4] = 2.0f, x[21] = -2.0f;
        x = add_block("equal |max|: x[4] = -2 first, x[21] = 2");
        fill_uniform(x, 1.0);
        x[4] = -2.0f, x[21] = 2.0f;
        x = add_block("equal |max|: -5, 5, -5 at 1, 2, 30");
        fill_uniform(x, 4.0);
        x[1] = -5.0f, x[2] = 5.0f, x[30] = -5.0f;
        x = add_block("every value 0.75");
        for (int i = 0; i < QK; i++)
            x[i] = 0.75f;
        x = add_block("every value -0.75");
        for (int i = 0; i < QK; i++)
            x[i] = -0.75f;
    }

    /* Q8_0 ties: d a power of two, so id is exact and x id = k + 0.5 */
    {
        static const int le[] = { 0, 1, -10, 20 };   /* d = 2^le */
        for (int k = 0; k < 4; k++) {
            const double d = ldexp(1.0, le[k]);
            float *x = add_block("Q8_0 ties, d = 2^%d", le[k]);
            x[0] = (float)(127.0 * d);
            for (int i = 1; i < QK; i++)
                x[i] = (float)(((i - 16) + 0.5) * d);
            x = add_block("Q8_0 ties at the ends, d = 2^%d", le[k]);
            x[0] = (float)(-127.0 * d);
            for (int i = 1; i < QK; i++)
                x[i] = (float)(((i & 1 ? 1 : -1) * (126 - 4 * (i / 2)) + (i & 1 ? 0.5 : -0.5)) * d);
            x = add_block("Q8_0 tie neighbours, d = 2^%d", le[k]);
            x[0] = (float)(127.0 * d);
            for (int i = 1; i < QK; i++) {
                const float t = (float)(((i - 16) + 0.5) * d);
                x[i] = nextafterf(t, i & 1 ? INFINITY : -INFINITY);
            }
        }
    }
    /* Q4_0 ties: d = +-1, 1/4: x id + 8.5 integral (k + 0.5 scaled),
     * including 7.5 (16, clamped to 15) and -M (x id = 8) */
    {
        static const double ds[] = { 1.0, -1.0, 0.25, -0x1p-12 };
        for (int k = 0; k < 4; k++) {
            const double d = ds[k];
            float *x = add_block("Q4_0 ties, d = %g", d);
            x[0] = (float)(-8.0 * d);
            for (int i = 1; i < QK; i++)
                x[i] = (float)(((i % 16) - 8 + 0.5) * d);
            x[20] = (float)(8.0 * d);   /* -M: x id = 8, 16.5, clamped */
            x = add_block("Q4_0 tie neighbours, d = %g", d);
            x[0] = (float)(-8.0 * d);
            for (int i = 1; i < QK; i++) {
                const float t = (float)(((i % 16) - 8 + 0.5) * d);
                x[i] = nextafterf(t, i & 1 ? INFINITY : -INFINITY);
            }
        }
    }

    /* denormal inputs; 1 / d overflowing fp32 (d <= 2^-128) and just not */
    {
        for (int s = 0; s < 3; s++) {
            float *x = add_block("denormals only #%d", s);
            for (int i = 0; i < QK; i++)
                x[i] = bitsf((uint32_t)(next_u64() & 0x807fffffu));
        }
        float *x = add_block("denormals and a 1.0");
        for (int i = 0; i < QK; i++)
            x[i] = bitsf((uint32_t)(next_u64() & 0x807fffffu));
        x[11] = 1.0f;
        x = add_block("the smallest denormal alone");
        x[3] = bitsf(1);
        x = add_block("the smallest denormal, negative, alone");
        x[30] = bitsf(0x80000001u);
        x = add_block("values near FLT_MIN");
        fill_uniform(x, 4.0 * FLT_MIN);
        q8_scale_block("2^-128: 1/d overflows", 0x1p-128);
        q8_scale_block("2^-128 + 2^-145: 1/d finite", 0x1p-128 + 0x1p-145);
        q8_scale_block("2^-126", 0x1p-126);
        q4_scale_block("2^-128: 1/d overflows", 0x1p-128);
        q4_scale_block("-2^-128: 1/d overflows", -0x1p-128);
        q4_scale_block("2^-128 + 2^-145: 1/d finite", 0x1p-128 + 0x1p-145);
    }
    /* scales that underflow binary16 (to 0, or to a subnormal) */
    {
        static const struct { const char *what; double d; } sc[] = {
            { "2^-25, a tie: 0", 0x1p-25 },
            { "2^-25 (1 + 2^-10): 2^-24", 0x1p-25 * (1.0 + 0x1p-10) },
            { "2^-26: 0", 0x1p-26 },
            { "1.5 x 2^-24, a tie: 2 units", 1.5 * 0x1p-24 },
            { "2.5 x 2^-24, a tie: 2 units", 2.5 * 0x1p-24 },
            { "2^-15, subnormal", 0x1p-15 },
            { "2^-14 - 2^-25, a tie: the smallest normal", 0x1p-14 - 0x1p-25 },
            { "2^-14, the smallest normal", 0x1p-14 },
            { "1e-6", 1e-6 },
        };
        for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
            q8_scale_block(sc[k].what, sc[k].d);
            q4_scale_block(sc[k].what, sc[k].d);
        }
    }
    /* scales that overflow binary16: 65504 is its largest, 65520 ties to
     * Inf; the stored scale is +-Inf (ggml's rule, attn.h) */
    {
        static const struct { const char *what; double d; } sc[] = {
            { "65504, the largest", 65504.0 },
            { "65519: 65504", 65519.0 },
            { "65520, a tie: Inf", 65520.0 },
            { "65536: Inf", 65536.0 },
        };
        for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
            q8_scale_block(sc[k].what, sc[k].d);
            q4_scale_block(sc[k].what, sc[k].d);
            q4_scale_block(sc[k].what, -sc[k].d);
        }
        float *x = add_block("FLT_MAX and values near it");
        fill_uniform(x, FLT_MAX);
        x[7] = FLT_MAX;
        x = add_block("-FLT_MAX and zeros");
        x[19] = -FLT_MAX;
    }
    /* NaN and infinities */
    {
        float *x = add_block("NaN at 0");
        fill_uniform(x, 1.0);
        x[0] = NAN;
        x = add_block("NaN at 31");
        fill_uniform(x, 1.0);
        x[31] = NAN;
        x = add_block("-NaN at 16");
        fill_uniform(x, 100.0);
        x[16] = -NAN;
        x = add_block("signaling NaN at 3");
        fill_uniform(x, 1.0);
        x[3] = bitsf(0x7f800001u);
        x = add_block("+Inf at 7");
        fill_uniform(x, 1.0);
        x[7] = INFINITY;
        x = add_block("-Inf at 20");
        fill_uniform(x, 1e30);
        x[20] = -INFINITY;
        x = add_block("+Inf and -Inf");
        x[1] = INFINITY, x[2] = -INFINITY;
        x = add_block("NaN and Inf among zeros");
        x[8] = NAN, x[24] = INFINITY;
        x = add_block("NaN everywhere");
        for (int i = 0; i < QK; i++)
            x[i] = NAN;
    }
}

/* ------------------------------------------------------------ quantize */

static void hexdump(const char *what, const uint8_t *b, size_t n)
{
    printf("    %-4s", what);
    for (size_t i = 0; i < n; i++)
        printf(" %02x", b[i]);
    printf("\n");
}

static const attn_dtype qtypes[2] = { ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0 };

/* Every block alone, then the whole table as one tensor (into a buffer
 * one byte off its alignment): attn_quantize's bytes are the reference's. */
static void test_quantize_table(void **state)
{
    (void)state;
    build_blocks();
    int fails = 0;
    g_ref_bad = 0;
    for (int k = 0; k < 2; k++) {
        const attn_dtype t = qtypes[k];
        const size_t bb = block_bytes(t);
        uint8_t want[Q8B], got[Q8B + 1];
        for (int b = 0; b < nblocks; b++) {
            ref_block(t, blocks[b].x, want, NULL);
            memset(got, 0xA5, sizeof got);
            assert_int_equal(attn_quantize(t, blocks[b].x, got, QK), ATTN_OK);
            if (memcmp(got, want, bb) != 0 || got[bb] != 0xA5) {
                if (fails < 12) {
                    printf("FAIL %s \"%s\": bytes differ from the reference%s\n", tname(t),
                           blocks[b].name, got[bb] != 0xA5 ? " (or written past)" : "");
                    hexdump("got", got, bb);
                    hexdump("want", want, bb);
                }
                fails++;
            }
        }
        /* one call over every block, dst unaligned */
        float *all = malloc((size_t)nblocks * QK * sizeof(float));
        uint8_t *buf = malloc((size_t)nblocks * bb + 2), *ref = malloc((size_t)nblocks * bb);
        assert_true(all && buf && ref);
        for (int b = 0; b < nblocks; b++) {
            memcpy(all + (size_t)b * QK, blocks[b].x, sizeof blocks[b].x);
            ref_block(t, blocks[b].x, ref + (size_t)b * bb, NULL);
        }
        memset(buf, 0x5A, (size_t)nblocks * bb + 2);
        assert_int_equal(attn_quantize(t, all, buf + 1, (int64_t)nblocks * QK), ATTN_OK);
        if (memcmp(buf + 1, ref, (size_t)nblocks * bb) != 0 || buf[0] != 0x5A ||
            buf[(size_t)nblocks * bb + 1] != 0x5A) {
            printf("FAIL %s: the table as one tensor differs from its blocks\n", tname(t));
            fails++;
        }
        free(all);
        free(buf);
        free(ref);
    }
    printf("  %d blocks x 2 types against the reference (and as one tensor), %d wrong\n",
           nblocks, fails);
    assert_int_equal(g_ref_bad, 0);
    assert_int_equal(fails, 0);
}

/* Hand-computed answers: the reference and the library both against
 * numbers worked out from attn.h's text. */
typedef struct known {
    const char *what;
    attn_dtype t;
    float x[QK];
    int nx;                 /* x[0 .. nx) given, the rest 0 */
    uint16_t scale;
    struct { int i, q; } q[8];  /* q of value i (Q4_0: the nibble) */
    int nq;
} known;

static void test_known_answers(void **state)
{
    (void)state;
    static const known ks[] = {
        /* Q8_0: amax 127 gives d = 1 (0x3C00), id 1: q = roundf(x) */
        { "Q8_0 d = 1: ties away from zero", ATTN_DTYPE_Q8_0,
          { 127.0f, 0.5f, -0.5f, 2.5f, -2.5f, 15.5f, -126.5f, 1.4999999f }, 8, 0x3C00,
          { { 0, 127 }, { 1, 1 }, { 2, -1 }, { 3, 3 }, { 4, -3 }, { 5, 16 }, { 6, -127 },
            { 7, 1 } }, 8 },
        /* amax 254: d = 2 (0x4000), id 0.5 */
        { "Q8_0 d = 2", ATTN_DTYPE_Q8_0, { -254.0f, 5.0f, -3.0f, 1.0f, 0.9f }, 5, 0x4000,
          { { 0, -127 }, { 1, 3 }, { 2, -2 }, { 3, 1 }, { 4, 0 } }, 5 },
        /* d = 2^-25 ties to 0 in binary16; 1.5 x 2^-24 to 2 units */
        { "Q8_0 d = 2^-25: scale 0", ATTN_DTYPE_Q8_0, { 127 * 0x1p-25f }, 1, 0x0000,
          { { 0, 127 }, { 1, 0 } }, 2 },
        { "Q8_0 d = 1.5 x 2^-24: scale 2 units", ATTN_DTYPE_Q8_0, { 127 * 0x1.8p-24f }, 1,
          0x0002, { { 0, 127 } }, 1 },
        { "Q8_0 d = 65504: the largest scale", ATTN_DTYPE_Q8_0, { 8319008.0f }, 1, 0x7BFF,
          { { 0, 127 } }, 1 },
        { "Q8_0 d = 65520: scale Inf", ATTN_DTYPE_Q8_0, { -8321040.0f, 65520.0f }, 2, 0x7C00,
          { { 0, -127 }, { 1, 1 } }, 2 },
        { "Q8_0 d = 2^-128: 1/d overflows, q 0", ATTN_DTYPE_Q8_0,
          { 127 * 0x1p-128f, -0x1p-130f }, 2, 0x0000, { { 0, 0 }, { 1, 0 }, { 2, 0 } }, 3 },
        { "Q8_0 zeros", ATTN_DTYPE_Q8_0, { 0.0f }, 1, 0x0000, { { 0, 0 }, { 31, 0 } }, 2 },
        { "Q8_0 NaN", ATTN_DTYPE_Q8_0, { 1.0f, NAN, 3.0f }, 3, 0x7E00,
          { { 0, 0 }, { 1, 0 }, { 2, 0 } }, 3 },
        { "Q8_0 -Inf", ATTN_DTYPE_Q8_0, { 1.0f, -INFINITY }, 2, 0x7E00, { { 0, 0 } }, 1 },
        /* Q4_0: M = -8 gives d = 1, id 1: q = min(15, trunc(x + 8.5)) */
        { "Q4_0 d = 1: x + 8.5 integral", ATTN_DTYPE_Q4_0,
          { -8.0f, -7.5f, -0.5f, 0.5f, 6.5f, 7.5f, 8.0f, -7.5000005f }, 8, 0x3C00,
          { { 0, 0 }, { 1, 1 }, { 2, 8 }, { 3, 9 }, { 4, 15 }, { 5, 15 }, { 6, 15 },
            { 7, 0 } }, 8 },
        /* M = 8 (positive): d = -1 (0xBC00), id -1 */
        { "Q4_0 d = -1", ATTN_DTYPE_Q4_0, { 8.0f, 1.0f, -1.0f, -8.0f }, 4, 0xBC00,
          { { 0, 0 }, { 1, 7 }, { 2, 9 }, { 3, 15 } }, 4 },
        /* equal |max|: the first is M */
        { "Q4_0 equal |max|, -4 first", ATTN_DTYPE_Q4_0, { 1.0f, -4.0f, 4.0f }, 3, 0x3800,
          { { 0, 10 }, { 1, 0 }, { 2, 15 } }, 3 },
        { "Q4_0 equal |max|, 4 first", ATTN_DTYPE_Q4_0, { 1.0f, 4.0f, -4.0f }, 3, 0xB800,
          { { 0, 6 }, { 1, 0 }, { 2, 15 } }, 3 },
        /* zeros: d = 0 / -8 = -0 (0x8000), id 0, q 8 */
        { "Q4_0 zeros", ATTN_DTYPE_Q4_0, { 0.0f }, 1, 0x8000, { { 0, 8 }, { 31, 8 } }, 2 },
        { "Q4_0 d = 65520: scale -Inf", ATTN_DTYPE_Q4_0, { 524160.0f }, 1, 0xFC00,
          { { 0, 0 }, { 1, 8 } }, 2 },
        { "Q4_0 d = 2^-128: 1/d overflows, q 0", ATTN_DTYPE_Q4_0, { -0x1p-125f, 0x1p-127f }, 2,
          0x0000, { { 0, 0 }, { 1, 0 }, { 2, 0 } }, 3 },
        { "Q4_0 NaN", ATTN_DTYPE_Q4_0, { 1.0f, 2.0f, NAN }, 3, 0x7E00,
          { { 0, 8 }, { 2, 8 }, { 31, 8 } }, 3 },
        { "Q4_0 +Inf", ATTN_DTYPE_Q4_0, { INFINITY }, 1, 0x7E00, { { 0, 8 }, { 16, 8 } }, 2 },
    };
    int fails = 0;
    for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
        const known *c = &ks[k];
        float x[QK] = { 0 };
        memcpy(x, c->x, (size_t)c->nx * sizeof(float));
        uint8_t lib[Q8B], ref[Q8B];
        assert_int_equal(attn_quantize(c->t, x, lib, QK), ATTN_OK);
        ref_block(c->t, x, ref, NULL);
        for (int w = 0; w < 2; w++) {
            const uint8_t *b = w ? ref : lib;
            int bad = scale_of(b) != c->scale;
            for (int j = 0; j < c->nq; j++)
                bad |= q_of(c->t, b, c->q[j].i) != c->q[j].q;
            if (bad) {
                printf("FAIL %s (%s): scale 0x%04x (want 0x%04x)", c->what,
                       w ? "reference" : "attn_quantize", scale_of(b), c->scale);
                for (int j = 0; j < c->nq; j++)
                    printf(", q[%d] %d (want %d)", c->q[j].i, q_of(c->t, b, c->q[j].i),
                           c->q[j].q);
                printf("\n");
                fails++;
            }
        }
    }
    /* the binary16 rounding of the reference, on its own landmarks */
    static const struct { float f; uint16_t h; } h16[] = {
        { 1.0f, 0x3C00 }, { -2.0f, 0xC000 }, { 65504.0f, 0x7BFF }, { 65519.996f, 0x7BFF },
        { 65520.0f, 0x7C00 }, { 0x1p-24f, 0x0001 }, { 0x1p-25f, 0x0000 },
        { 0x1.000002p-25f, 0x0001 }, { 0x1.8p-24f, 0x0002 }, { 0x1.4p-23f, 0x0002 },
        { 0x1p-14f, 0x0400 }, { 0x1.ff8p-15f, 0x03FF }, { 0x1.ffcp-15f, 0x0400 },
        { 0x1.ffep-15f, 0x0400 },
        { 1.0009766f, 0x3C01 }, { 0x1.002p0f, 0x3C00 }, { 0x1.006p0f, 0x3C02 },
        { -0.0f, 0x8000 }, { 0x1p-149f, 0x0000 }, { -FLT_MAX, 0xFC00 },
    };
    for (size_t k = 0; k < sizeof h16 / sizeof h16[0]; k++)
        if (ref_f16(h16[k].f) != h16[k].h) {
            printf("FAIL reference binary16 of %a: 0x%04x, want 0x%04x\n", (double)h16[k].f,
                   ref_f16(h16[k].f), h16[k].h);
            fails++;
        }
    printf("  %zu hand-computed blocks, %zu binary16 landmarks\n", sizeof ks / sizeof ks[0],
           sizeof h16 / sizeof h16[0]);
    assert_int_equal(fails, 0);
}

/* ---------------------------------------------------------- dequantize */

/* attn_dequantize of the table's bytes and of random bytes against the
 * value formula; the round trip within its bound. */
static void test_dequantize(void **state)
{
    (void)state;
    build_blocks();
    int fails = 0, checked_rt = 0, nan_blocks = 0, inf_blocks = 0;
    double worst[2] = { 0, 0 };   /* max err / bound per type */
    int worst_at[2] = { 0, 0 };
    for (int k = 0; k < 2; k++) {
        const attn_dtype t = qtypes[k];
        for (int b = 0; b < nblocks; b++) {
            const float *x = blocks[b].x;
            uint8_t blk[Q8B + 2];
            float d = 0.0f, y[QK + 1];
            ref_block(t, x, blk, &d);
            y[QK] = 12345.0f;
            assert_int_equal(attn_dequantize(t, blk, y, QK), ATTN_OK);
            int bad = y[QK] != 12345.0f;
            for (int i = 0; i < QK; i++)
                bad |= !same_float(y[i], value_of(t, blk, i));
            if (bad) {
                printf("FAIL %s \"%s\": attn_dequantize is not q x d\n", tname(t),
                       blocks[b].name);
                fails++;
                continue;
            }
            const float d16 = ref_f16_to_f32(scale_of(blk));
            if (!block_finite(x)) {
                /* every value NaN */
                nan_blocks++;
                for (int i = 0; i < QK; i++)
                    if (!isnan(y[i])) {
                        printf("FAIL %s \"%s\": value %d is %g, want NaN\n", tname(t),
                               blocks[b].name, i, (double)y[i]);
                        fails++;
                        break;
                    }
                continue;
            }
            if (isinf(d16)) {
                /* the scale overflowed binary16: +-Inf, or NaN where q x d
                 * is 0 x Inf */
                inf_blocks++;
                for (int i = 0; i < QK; i++) {
                    const int q = q_of(t, blk, i) - (t == ATTN_DTYPE_Q4_0 ? 8 : 0);
                    if (q ? !isinf(y[i]) : !isnan(y[i])) {
                        printf("FAIL %s \"%s\": value %d (q %d) is %g with an infinite "
                               "scale\n", tname(t), blocks[b].name, i, q, (double)y[i]);
                        fails++;
                        break;
                    }
                }
                continue;
            }
            /* the round trip: the stated bound, with D the exact scale
             * (max|x| / 127, M / -8) and d16 - D both of its roundings */
            double amax = 0.0, M = 0.0;
            for (int i = 0; i < QK; i++)
                if (fabs((double)x[i]) > amax) {
                    amax = fabs((double)x[i]);
                    M = (double)x[i];
                }
            const double D = t == ATTN_DTYPE_Q8_0 ? amax / 127.0 : M / -8.0;
            const double ds = fabs((double)d16 - D);
            const double bound = t == ATTN_DTYPE_Q8_0 ? 0.5 * fabs(D) + 127.0 * ds + 0x1p-20 * amax
                                                      : fabs(D) + 8.0 * ds + 0x1p-20 * amax;
            checked_rt++;
            for (int i = 0; i < QK; i++) {
                const double err = fabs((double)x[i] - (double)y[i]);
                if (!(err <= bound)) {
                    printf("FAIL %s \"%s\": |x - deq| = %g at %d, bound %g (d %g, d16 %g)\n",
                           tname(t), blocks[b].name, err, i, bound, (double)d, (double)d16);
                    fails++;
                    break;
                }
                if (bound > 0.0 && err / bound > worst[k]) {
                    worst[k] = err / bound;
                    worst_at[k] = b;
                }
            }
        }
    }
    /* random bytes: each class of scale, random q */
    int nrand = 0;
    for (int k = 0; k < 2; k++) {
        const attn_dtype t = qtypes[k];
        const size_t bb = block_bytes(t);
        enum { NR = 256 };
        uint8_t *src = malloc(NR * bb + 1);
        float *y = malloc(NR * QK * sizeof(float));
        assert_true(src && y);
        for (int r = 0; r < NR; r++) {
            uint8_t *blk = src + 1 + (size_t)r * bb;  /* unaligned, as ggml's */
            const uint16_t sign = (uint16_t)((next_u64() & 1) << 15);
            uint16_t h;
            switch (r % 8) {
            case 1: h = (uint16_t)(1 + next_u64() % 1023); break;       /* subnormal */
            case 2: h = 0; break;                                       /* zero */
            case 3: h = 0x7C00; break;                                  /* Inf */
            case 4: h = (uint16_t)(0x7C00 | (1 + next_u64() % 1023)); break; /* NaN */
            case 5: h = 0x7BFF; break;                                  /* the largest */
            default: h = (uint16_t)((1 + next_u64() % 30) << 10 | (next_u64() & 1023)); break;
            }
            put_scale(blk, (uint16_t)(h | sign));
            for (size_t i = 2; i < bb; i++)
                blk[i] = (uint8_t)next_u64();
        }
        assert_int_equal(attn_dequantize(t, src + 1, y, (int64_t)NR * QK), ATTN_OK);
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = src + 1 + (size_t)r * bb;
            for (int i = 0; i < QK; i++)
                if (!same_float(y[r * QK + i], value_of(t, blk, i))) {
                    printf("FAIL %s random block %d (scale 0x%04x) value %d: %a, want %a\n",
                           tname(t), r, scale_of(blk), i, (double)y[r * QK + i],
                           (double)value_of(t, blk, i));
                    fails++;
                    break;
                }
        }
        nrand += NR;
        free(src);
        free(y);
    }
    printf("  %d table blocks x 2 types and %d random blocks against q x d; %d round trips "
           "within the bound (worst err/bound: Q8_0 %.4f \"%s\", Q4_0 %.4f \"%s\"); %d NaN "
           "blocks, %d infinite scales\n", nblocks, nrand, checked_rt, worst[0],
           blocks[worst_at[0]].name, worst[1], blocks[worst_at[1]].name, nan_blocks,
           inf_blocks);
    assert_int_equal(fails, 0);
}

/* ---------------------------------------------- F16, BF16, F32 agree */

static void test_plain_types(void **state)
{
    (void)state;
    build_blocks();
    /* the table's values, then random bit patterns (any NaN payload) */
    const int64_t n = (int64_t)nblocks * QK + 4099;   /* not a multiple of 32 */
    float *src = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *w = malloc((size_t)n * sizeof(float));
    uint16_t *a16 = malloc((size_t)n * 2), *b16 = malloc((size_t)n * 2);
    assert_true(src && y && w && a16 && b16);
    for (int b = 0; b < nblocks; b++)
        memcpy(src + (size_t)b * QK, blocks[b].x, sizeof blocks[b].x);
    for (int64_t i = (int64_t)nblocks * QK; i < n; i++)
        src[i] = bitsf((uint32_t)next_u64());
    uint16_t *all16 = malloc(65536 * 2);
    float *d1 = malloc(65536 * sizeof(float)), *d2 = malloc(65536 * sizeof(float));
    assert_true(all16 && d1 && d2);
    for (uint32_t h = 0; h < 65536; h++)
        all16[h] = (uint16_t)h;
    const int given = getenv("ATTN_SIMD") != NULL;
    int fails = 0, calls = 0;
    for (int l = 0; l < simd_count(given); l++) {
        simd_set(l, given);
        const attn_dtype t16[2] = { ATTN_DTYPE_F16, ATTN_DTYPE_BF16 };
        for (int k = 0; k < 2; k++) {
            const attn_dtype t = t16[k];
            const int64_t ns[] = { n, 1, 31, 33 };
            for (size_t c = 0; c < 4; c++) {
                memset(a16, 0xA5, (size_t)n * 2);
                memset(b16, 0xA5, (size_t)n * 2);
                assert_int_equal(attn_quantize(t, src, a16, ns[c]), ATTN_OK);
                assert_int_equal(attn_dtype_encode(t, src, b16, ns[c]), ATTN_OK);
                calls++;
                if (memcmp(a16, b16, (size_t)n * 2) != 0) {
                    printf("FAIL attn_quantize(%s, n %lld) is not attn_dtype_encode\n",
                           tname(t), (long long)ns[c]);
                    fails++;
                }
            }
            memset(d1, 0xA5, 65536 * sizeof(float));
            memset(d2, 0x5A, 65536 * sizeof(float));
            assert_int_equal(attn_dequantize(t, all16, d1, 65536), ATTN_OK);
            assert_int_equal(attn_dtype_decode(t, all16, d2, 65536), ATTN_OK);
            calls++;
            if (memcmp(d1, d2, 65536 * sizeof(float)) != 0) {
                printf("FAIL attn_dequantize(%s) of every pattern is not attn_dtype_decode\n",
                       tname(t));
                fails++;
            }
        }
        /* F32: a copy both ways, bit for bit (signaling NaNs too) */
        memset(y, 0xA5, (size_t)n * sizeof(float));
        assert_int_equal(attn_quantize(ATTN_DTYPE_F32, src, y, n), ATTN_OK);
        memset(w, 0x5A, (size_t)n * sizeof(float));
        assert_int_equal(attn_dequantize(ATTN_DTYPE_F32, src, w, n - 1), ATTN_OK);
        calls += 2;
        if (memcmp(y, src, (size_t)n * sizeof(float)) != 0 ||
            memcmp(w, src, (size_t)(n - 1) * sizeof(float)) != 0 ||
            fbits(w[n - 1]) != 0x5A5A5A5Au) {
            printf("FAIL F32 attn_quantize / attn_dequantize is not a copy\n");
            fails++;
        }
    }
    if (!given)
        unsetenv("ATTN_SIMD");
    printf("  %d calls at F16, BF16 and F32 over %d ATTN_SIMD level(s)\n", calls,
           simd_count(given));
    free(src), free(y), free(w), free(a16), free(b16), free(all16), free(d1), free(d2);
    assert_int_equal(fails, 0);
}

/* -------------------------------------------------------------- errors */

enum { FN_Q, FN_D, FN_B };
static const char *const fn_name[] = { "attn_quantize", "attn_dequantize", "attn_dtype_bytes" };

typedef struct erow {
    const char *what;
    int fns;          /* bit FN_*: the functions the row applies to */
    int type;
    int64_t n;
    int src_null, dst_null;   /* FN_B: dst_null = bytes NULL */
    attn_status want;
    int want2;        /* also accepted (-1: none): see the huge counts */
} erow;

#define FQ (1 << FN_Q)
#define FD (1 << FN_D)
#define FB (1 << FN_B)
#define FALL (FQ | FD | FB)
static const int64_t P62 = (int64_t)1 << 62;
static const int64_t TOP = INT64_MAX & ~(int64_t)31;

static const erow erows[] = {
    /* controls */
    { "F32 n 1", FALL, ATTN_DTYPE_F32, 1, 0, 0, ATTN_OK, -1 },
    { "F16 n 33", FALL, ATTN_DTYPE_F16, 33, 0, 0, ATTN_OK, -1 },
    { "BF16 n 7", FALL, ATTN_DTYPE_BF16, 7, 0, 0, ATTN_OK, -1 },
    { "Q8_0 n 64", FALL, ATTN_DTYPE_Q8_0, 64, 0, 0, ATTN_OK, -1 },
    { "Q4_0 n 32", FALL, ATTN_DTYPE_Q4_0, 32, 0, 0, ATTN_OK, -1 },
    { "Q8_0 n 0, src and dst NULL", FQ | FD, ATTN_DTYPE_Q8_0, 0, 1, 1, ATTN_OK, -1 },
    { "Q4_0 n 0, src and dst NULL", FQ | FD, ATTN_DTYPE_Q4_0, 0, 1, 1, ATTN_OK, -1 },
    { "F16 n 0, src NULL", FQ | FD, ATTN_DTYPE_F16, 0, 1, 0, ATTN_OK, -1 },
    { "F32 n 0, dst NULL", FQ | FD, ATTN_DTYPE_F32, 0, 0, 1, ATTN_OK, -1 },
    { "Q4_0 n 0", FB, ATTN_DTYPE_Q4_0, 0, 0, 0, ATTN_OK, -1 },
    /* NULL pointers with n > 0 */
    { "Q8_0 src NULL", FQ | FD, ATTN_DTYPE_Q8_0, 32, 1, 0, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "Q4_0 dst NULL", FQ | FD, ATTN_DTYPE_Q4_0, 32, 0, 1, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "F16 src NULL", FQ | FD, ATTN_DTYPE_F16, 5, 1, 0, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "BF16 dst NULL", FQ | FD, ATTN_DTYPE_BF16, 5, 0, 1, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "F32 src and dst NULL", FQ | FD, ATTN_DTYPE_F32, 1, 1, 1, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "bytes NULL", FB, ATTN_DTYPE_Q8_0, 32, 0, 1, ATTN_ERR_NULL_ARGUMENT, -1 },
    { "bytes NULL, n 0", FB, ATTN_DTYPE_F32, 0, 0, 1, ATTN_ERR_NULL_ARGUMENT, -1 },
    /* n < 0; n not a multiple of 32 for the block types */
    { "F32 n -1", FALL, ATTN_DTYPE_F32, -1, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q8_0 n -32", FALL, ATTN_DTYPE_Q8_0, -32, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "BF16 n INT64_MIN", FALL, ATTN_DTYPE_BF16, INT64_MIN, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q8_0 n 1", FALL, ATTN_DTYPE_Q8_0, 1, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q8_0 n 31", FALL, ATTN_DTYPE_Q8_0, 31, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q8_0 n 33", FALL, ATTN_DTYPE_Q8_0, 33, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q4_0 n 16", FALL, ATTN_DTYPE_Q4_0, 16, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    { "Q4_0 n 48", FALL, ATTN_DTYPE_Q4_0, 48, 0, 0, ATTN_ERR_BAD_SIZE, -1 },
    /* unknown types */
    { "type 5", FALL, 5, 32, 0, 0, ATTN_ERR_BAD_OPTION, -1 },
    { "type 99", FALL, 99, 32, 0, 0, ATTN_ERR_BAD_OPTION, -1 },
    { "type -1", FALL, -1, 32, 0, 0, ATTN_ERR_BAD_OPTION, -1 },
    { "type INT_MAX", FALL, INT_MAX, 1, 0, 0, ATTN_ERR_BAD_OPTION, -1 },
    /* counts past SIZE_MAX: 2^62 fp32 values are 2^64 bytes (the src of
     * attn_quantize, the dst of attn_dequantize, for every type) */
    { "F32 n 2^62", FALL, ATTN_DTYPE_F32, P62, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    { "F16 n 2^62", FQ | FD, ATTN_DTYPE_F16, P62, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    { "BF16 n INT64_MAX", FQ | FD, ATTN_DTYPE_BF16, INT64_MAX, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    { "Q8_0 n 2^62", FQ | FD, ATTN_DTYPE_Q8_0, P62, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    { "Q4_0 n 2^63 - 32", FQ | FD, ATTN_DTYPE_Q4_0, TOP, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    { "F32 n 2^63 - 32", FB, ATTN_DTYPE_F32, TOP, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    /* the storage of 2^63 - 32 F16 values, 2^64 - 64 bytes, is past
     * 2^63 - 1 (the library's bound on byte counts, attn_status_str) */
    { "F16 n 2^63 - 32", FB, ATTN_DTYPE_F16, TOP, 0, 0, ATTN_ERR_TOO_LARGE, -1 },
    /* Storage that fits in a size_t (and in 2^63 - 1) while 4 n does not:
     * attn.h says ATTN_ERR_TOO_LARGE for "bytes past SIZE_MAX", the
     * library bounds n x 4 for every type (lib/core/dtype.c block_check).
     * Either is accepted here; ATTN_OK must give the exact count. */
    { "Q4_0 n 2^62 (storage 2^57 x 18)", FB, ATTN_DTYPE_Q4_0, P62, 0, 0, ATTN_ERR_TOO_LARGE,
      ATTN_OK },
    { "Q8_0 n 2^62 (storage 2^57 x 34)", FB, ATTN_DTYPE_Q8_0, P62, 0, 0, ATTN_ERR_TOO_LARGE,
      ATTN_OK },
};

/* The storage of n values: from the layouts' definitions. */
static uint64_t storage_bytes(int type, int64_t n)
{
    switch (type) {
    case ATTN_DTYPE_F32: return (uint64_t)n * 4;
    case ATTN_DTYPE_F16: case ATTN_DTYPE_BF16: return (uint64_t)n * 2;
    case ATTN_DTYPE_Q8_0: return (uint64_t)n / 32 * 34;
    default: return (uint64_t)n / 32 * 18;
    }
}

static void test_errors(void **state)
{
    (void)state;
    enum { CAP = 4096 };
    float *src = malloc(CAP * sizeof(float));
    unsigned char *srcq = malloc(CAP), *dst = malloc(CAP + 64);
    assert_true(src && srcq && dst);
    for (int i = 0; i < CAP; i++)
        src[i] = (float)(i % 13) - 6.0f;
    memset(srcq, 0x3C, CAP);
    int fails = 0, checked = 0, either = 0;
    for (size_t r = 0; r < sizeof erows / sizeof erows[0]; r++) {
        const erow *e = &erows[r];
        for (int fn = 0; fn < 3; fn++) {
            if (!(e->fns & (1 << fn)))
                continue;
            memset(dst, 0xA5, CAP + 64);
            size_t bytes = (size_t)0xA5A5A5A5u;
            attn_status s;
            if (fn == FN_Q)
                s = attn_quantize((attn_dtype)e->type, e->src_null ? NULL : src,
                                  e->dst_null ? NULL : dst, e->n);
            else if (fn == FN_D)
                s = attn_dequantize((attn_dtype)e->type, e->src_null ? NULL : srcq,
                                    e->dst_null ? NULL : (float *)(void *)dst, e->n);
            else
                s = attn_dtype_bytes((attn_dtype)e->type, e->n, e->dst_null ? NULL : &bytes);
            checked++;
            const int ok = s == e->want || (e->want2 >= 0 && s == (attn_status)e->want2);
            if (!ok) {
                printf("FAIL %s, %s: %s, want %s\n", fn_name[fn], e->what, attn_status_str(s),
                       attn_status_str(e->want));
                fails++;
                continue;
            }
            if (e->want2 >= 0) {
                either++;
                printf("  note: %s, %s: %s\n", fn_name[fn], e->what, attn_status_str(s));
            }
            if (s != ATTN_OK) {
                int touched = fn == FN_B ? bytes != (size_t)0xA5A5A5A5u : 0;
                for (int i = 0; i < CAP + 64; i++)
                    touched |= dst[i] != 0xA5;
                if (touched) {
                    printf("FAIL %s, %s: written on error\n", fn_name[fn], e->what);
                    fails++;
                }
                continue;
            }
            if (fn == FN_B && (uint64_t)bytes != storage_bytes(e->type, e->n)) {
                printf("FAIL %s, %s: %zu bytes, want %llu\n", fn_name[fn], e->what, bytes,
                       (unsigned long long)storage_bytes(e->type, e->n));
                fails++;
            }
            if (fn != FN_B) {
                /* exactly the storage written (the output's bytes) */
                const uint64_t out = fn == FN_Q ? storage_bytes(e->type, e->n)
                                                : (uint64_t)e->n * 4;
                int past = 0;
                for (uint64_t i = out; i < CAP + 64; i++)
                    past |= dst[i] != 0xA5;
                if (past && !e->dst_null) {
                    printf("FAIL %s, %s: written past %llu bytes\n", fn_name[fn], e->what,
                           (unsigned long long)out);
                    fails++;
                }
            }
        }
    }
    /* attn_dtype_bytes of every type */
    static const struct { attn_dtype t; int64_t n; uint64_t bytes; } sizes[] = {
        { ATTN_DTYPE_F32, 0, 0 },     { ATTN_DTYPE_F32, 1, 4 },      { ATTN_DTYPE_F32, 33, 132 },
        { ATTN_DTYPE_F16, 1, 2 },     { ATTN_DTYPE_F16, 7, 14 },     { ATTN_DTYPE_BF16, 5, 10 },
        { ATTN_DTYPE_BF16, 0, 0 },    { ATTN_DTYPE_Q8_0, 0, 0 },     { ATTN_DTYPE_Q8_0, 32, 34 },
        { ATTN_DTYPE_Q8_0, 64, 68 },  { ATTN_DTYPE_Q8_0, 4096, 4352 },
        { ATTN_DTYPE_Q4_0, 32, 18 },  { ATTN_DTYPE_Q4_0, 96, 54 },
        { ATTN_DTYPE_Q4_0, (int64_t)1 << 40, ((uint64_t)1 << 35) * 18 },
        { ATTN_DTYPE_Q8_0, (int64_t)1 << 40, ((uint64_t)1 << 35) * 34 },
        { ATTN_DTYPE_F32, (int64_t)1 << 40, (uint64_t)1 << 42 },
    };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t b = 7;
        const attn_status s = attn_dtype_bytes(sizes[k].t, sizes[k].n, &b);
        checked++;
        if (s != ATTN_OK || (uint64_t)b != sizes[k].bytes) {
            printf("FAIL attn_dtype_bytes(%s, %lld): %s, %zu bytes, want %llu\n",
                   tname(sizes[k].t), (long long)sizes[k].n, attn_status_str(s), b,
                   (unsigned long long)sizes[k].bytes);
            fails++;
        }
    }
    printf("  %d error-table calls (%d where two statuses are accepted)\n", checked, either);
    free(src), free(srcq), free(dst);
    assert_int_equal(fails, 0);
}

/* ----------------------------------------------------------- kv_append */

#define MAXB 4

typedef struct qcase {
    const char *name;
    int B, H, Hq, dk, dv;
    attn_dtype kt, vt;
    int bs;           /* 0: contiguous */
    int layout;       /* of the cache (cache_view) */
    int src_layout;   /* of k_new / v_new: 0 BHSD, 1 BSHD with gaps */
    int t;
    int per_seq;      /* new_lens given (else NULL) */
    int steps;
} qcase;

static const qcase qcases[] = {
    { "contig Q8_0 bhsd t1", 2, 2, 4, 32, 64, ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q8_0, 0, 0, 0, 1, 0,
      3 },
    { "contig Q4_0 bshd src-gaps t3 per-seq", 3, 2, 6, 64, 32, ATTN_DTYPE_Q4_0,
      ATTN_DTYPE_Q4_0, 0, 1, 1, 3, 1, 3 },
    { "contig Q8_0/Q4_0 gaps t5 per-seq", 2, 1, 3, 32, 32, ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0,
      0, 2, 1, 5, 1, 2 },
    { "contig Q4_0/F16 gaps t2", 2, 2, 2, 32, 40, ATTN_DTYPE_Q4_0, ATTN_DTYPE_F16, 0, 2, 0, 2,
      0, 3 },
    { "contig d 32 t1, six appends", 1, 1, 1, 32, 32, ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, 0, 0,
      0, 1, 0, 6 },
    { "paged bs1 Q8_0 bhsd t3 per-seq", 2, 2, 2, 32, 32, ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q8_0, 1,
      0, 0, 3, 1, 3 },
    { "paged bs3 Q4_0 bshd src-gaps t4", 2, 2, 4, 32, 64, ATTN_DTYPE_Q4_0, ATTN_DTYPE_Q4_0, 3,
      1, 1, 4, 0, 3 },
    { "paged bs16 Q8_0/Q4_0 gaps t17 per-seq", 3, 2, 8, 64, 32, ATTN_DTYPE_Q8_0,
      ATTN_DTYPE_Q4_0, 16, 2, 0, 17, 1, 3 },
    { "paged bs16 Q4_0/Q8_0 bhsd src-gaps t16", 1, 4, 4, 128, 128, ATTN_DTYPE_Q4_0,
      ATTN_DTYPE_Q8_0, 16, 0, 1, 16, 0, 2 },
    { "paged bs5 Q8_0/BF16 bshd t7 per-seq", 2, 1, 2, 32, 24, ATTN_DTYPE_Q8_0, ATTN_DTYPE_BF16,
      5, 1, 1, 7, 1, 3 },
    { "paged bs4 F32/Q4_0 gaps t6", 2, 2, 4, 16, 32, ATTN_DTYPE_F32, ATTN_DTYPE_Q4_0, 4, 2, 0,
      6, 0, 2 },
};

/* Strides of a [outer][H][S][d] cache: 0 [outer][H][S][d], 1
 * [outer][S][H][d], 2 [outer][H][S][d] with gaps (every stride a multiple
 * of 32 when d is, as the block types require). */
static attn_view cache_view(int layout, int64_t H, int64_t S, int64_t d)
{
    attn_view v;
    if (layout == 0) {
        v = attn_view_bhsd(H, S, d);
    } else if (layout == 1) {
        v.head = d;
        v.seq = H * d;
        v.batch = S * H * d;
    } else {
        v.seq = d + 32;
        v.head = S * v.seq + 64;
        v.batch = H * v.head + 96;
    }
    return v;
}

static int64_t extent(const attn_view *v, int64_t outer, int64_t H, int64_t S, int64_t d)
{
    return (outer - 1) * v->batch + (H - 1) * v->head + (S - 1) * v->seq + d;
}

/* Bytes of the first n values of a tensor of type t (n a multiple of 32
 * for the block types: every offset here is). */
static size_t nbytes(attn_dtype t, int64_t n)
{
    size_t b = 0;
    assert_int_equal(attn_dtype_bytes(t, n, &b), ATTN_OK);
    return b;
}

/* A new K/V value: mostly ordinary, sometimes a special (a NaN or an
 * infinity poisons its block; denormals; values past binary16's range). */
static float new_value(void)
{
    static const uint32_t special[] = {
        0x7fc00001u, 0xff800000u, 0x00000001u, 0x80400000u, 0x80000000u, 0x4b7ff000u,
        0xcb000000u, 0x3f000000u, 0x00800000u,
    };
    const uint64_t z = next_u64();
    if (z % 61 == 0)
        return bitsf(special[(z >> 8) % (sizeof special / sizeof special[0])]);
    const double mag = z % 5 == 0 ? 1e-3 : z % 7 == 0 ? 300.0 : 4.0;
    return (float)((2.0 * unit() - 1.0) * mag);
}

typedef struct fixture {
    attn_sdpa_desc desc;
    int64_t m, maxb, nblocks;
    unsigned char *kc, *vc, *ke, *ve;
    size_t kbytes, vbytes;
    int64_t kext, vext;            /* values the cache views span */
    int32_t *perm, *table;
    int32_t lens[MAXB], want_lens[MAXB], new_lens[MAXB];
    float *kn, *vn;
    attn_view knv, vnv;
    int64_t kn_count, vn_count;
} fixture;

static int64_t step_len(const qcase *c, int b, int s)
{
    return c->per_seq ? (b * 3 + s * 5 + 1) % (c->t + 1) : c->t;
}

static void fixture_build(fixture *f, const qcase *c)
{
    memset(f, 0, sizeof *f);
    int64_t longest = 0;
    for (int b = 0; b < c->B; b++) {
        int64_t len = (b * 5 + 1) % (c->bs ? 2 * c->bs + 1 : 7);
        f->lens[b] = f->want_lens[b] = (int32_t)len;
        for (int s = 0; s < c->steps; s++)
            len += step_len(c, b, s);
        if (len > longest)
            longest = len;
    }
    f->m = longest + 2;
    attn_sdpa_desc *d = &f->desc;
    assert_int_equal(attn_sdpa_desc_init(d), ATTN_OK);
    d->batch = c->B;
    d->q_heads = c->Hq;   /* GQA: not read by attn_kv_append */
    d->kv_heads = c->H;
    d->kv_len = f->m;
    d->qk_dim = c->dk;
    d->v_dim = c->dv;
    d->k_type = c->kt;
    d->v_type = c->vt;
    int64_t outer = c->B, S = f->m;
    if (c->bs) {
        f->maxb = (f->m + c->bs - 1) / c->bs + 1;
        f->nblocks = c->B * f->maxb + 3;
        d->kv_block_size = c->bs;
        d->kv_max_blocks = f->maxb;
        d->kv_num_blocks = f->nblocks;
        outer = f->nblocks;
        S = c->bs;
        f->perm = malloc((size_t)f->nblocks * sizeof *f->perm);
        f->table = malloc((size_t)(c->B * f->maxb) * sizeof *f->table);
        assert_true(f->perm && f->table);
        for (int64_t i = 0; i < f->nblocks; i++)
            f->perm[i] = (int32_t)i;
        for (int64_t i = f->nblocks - 1; i > 0; i--) {
            const int64_t j = (int64_t)(next_u64() % (uint64_t)(i + 1));
            const int32_t tmp = f->perm[i];
            f->perm[i] = f->perm[j];
            f->perm[j] = tmp;
        }
    }
    d->k = cache_view(c->layout, c->H, S, c->dk);
    d->v = cache_view(c->layout, c->H, S, c->dv);
    f->kext = extent(&d->k, outer, c->H, S, c->dk);
    f->vext = extent(&d->v, outer, c->H, S, c->dv);
    f->kbytes = nbytes(c->kt, f->kext);
    f->vbytes = nbytes(c->vt, f->vext);
    f->kc = malloc(f->kbytes);
    f->vc = malloc(f->vbytes);
    f->ke = malloc(f->kbytes);
    f->ve = malloc(f->vbytes);
    assert_true(f->kc && f->vc && f->ke && f->ve);
    for (size_t i = 0; i < f->kbytes; i++)
        f->kc[i] = f->ke[i] = (unsigned char)(0xA5 ^ (i * 7));
    for (size_t i = 0; i < f->vbytes; i++)
        f->vc[i] = f->ve[i] = (unsigned char)(0x5A ^ (i * 11));
    if (c->src_layout == 0) {
        f->knv = attn_view_bhsd(c->H, c->t, c->dk);
        f->vnv = attn_view_bhsd(c->H, c->t, c->dv);
    } else {
        f->knv = (attn_view){ c->t * c->H * (c->dk + 3) + 1, c->dk + 3, c->H * (c->dk + 3) };
        f->vnv = (attn_view){ c->t * c->H * (c->dv + 5) + 2, c->dv + 5, c->H * (c->dv + 5) };
    }
    f->kn_count = (c->B - 1) * f->knv.batch + (c->H - 1) * f->knv.head + (c->t - 1) * f->knv.seq +
                  c->dk;
    f->vn_count = (c->B - 1) * f->vnv.batch + (c->H - 1) * f->vnv.head + (c->t - 1) * f->vnv.seq +
                  c->dv;
    f->kn = malloc((size_t)f->kn_count * sizeof *f->kn);
    f->vn = malloc((size_t)f->vn_count * sizeof *f->vn);
    assert_true(f->kn && f->vn);
}

static void fixture_free(fixture *f)
{
    free(f->kc), free(f->vc), free(f->ke), free(f->ve);
    free(f->perm), free(f->table), free(f->kn), free(f->vn);
}

/* This step's table: the permutation's entries for the blocks receiving a
 * token, garbage in every other one (never read). */
static void step_table(fixture *f, const qcase *c, const int64_t *nl)
{
    static const int32_t garbage[] = { -1, INT32_MAX, 0 };
    for (int b = 0; b < c->B; b++)
        for (int64_t J = 0; J < f->maxb; J++) {
            const int64_t first = J * c->bs, last = first + c->bs - 1;
            const int touched =
                nl[b] > 0 && last >= f->want_lens[b] && first < f->want_lens[b] + nl[b];
            const int32_t g = garbage[(b + J) % 3] ? garbage[(b + J) % 3]
                                                   : (int32_t)f->nblocks;
            f->table[b * f->maxb + J] = touched ? f->perm[b * f->maxb + J] : g;
        }
}

/* The expected rows of one tensor: attn_quantize of each new row at the
 * byte offset of its first value; for the block types the bytes are also
 * checked against the reference here. */
static int expect_tensor(fixture *f, const qcase *c, unsigned char *exp, attn_dtype t,
                         const attn_view *cv, const float *src, const attn_view *sv,
                         int64_t dim, const int64_t *nl)
{
    int bad = 0;
    unsigned char row[4 * 128 * 4], ref[Q8B];
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int64_t r = 0; r < nl[b]; r++) {
                const int64_t j = f->want_lens[b] + r;
                const int64_t off = c->bs ? (int64_t)f->perm[b * f->maxb + j / c->bs] * cv->batch +
                                                h * cv->head + (j % c->bs) * cv->seq
                                          : b * cv->batch + h * cv->head + j * cv->seq;
                const float *x = src + b * sv->batch + h * sv->head + r * sv->seq;
                const size_t rb = nbytes(t, dim);
                assert_true(rb <= sizeof row);
                assert_int_equal(attn_quantize(t, x, row, dim), ATTN_OK);
                if (is_block_type(t))
                    for (int64_t q = 0; q < dim / QK; q++) {
                        ref_block(t, x + q * QK, ref, NULL);
                        bad |= memcmp(row + q * (int64_t)block_bytes(t), ref, block_bytes(t)) != 0;
                    }
                memcpy(exp + nbytes(t, off), row, rb);
            }
    return bad;
}

/* attn_sdpa over the caches (kv_lens the final lengths; paged: the whole
 * permutation as the table) against the same call with F32 K and V
 * holding attn_dequantize's values of the whole cache (the same views):
 * the same bits, with q_len 1 (the decode path) and 20 (the sgemm path),
 * at every ATTN_SIMD level. */
static int forward_check(fixture *f, const qcase *c, int *calls)
{
    int bad = 0;
    float *kf = malloc((size_t)f->kext * sizeof(float));
    float *vf = malloc((size_t)f->vext * sizeof(float));
    assert_true(kf && vf);
    assert_int_equal(attn_dequantize(c->kt, f->kc, kf, f->kext), ATTN_OK);
    assert_int_equal(attn_dequantize(c->vt, f->vc, vf, f->vext), ATTN_OK);
    int32_t *table = NULL;
    if (c->bs) {
        table = malloc((size_t)(c->B * f->maxb) * sizeof *table);
        assert_non_null(table);
        memcpy(table, f->perm, (size_t)(c->B * f->maxb) * sizeof *table);
    }
    attn_blas_info info;
    assert_int_equal(attn_blas_query(&info), ATTN_OK);
    const int mkl = strstr(info.loaded, "mkl") != NULL;
    const int given = getenv("ATTN_SIMD") != NULL;
    static const int64_t qlens[] = { 1, 20 };
    for (int l = 0; l < simd_count(given); l++) {
        simd_set(l, given);
        for (int ql = 0; ql < 2; ql++) {
            const int64_t n = qlens[ql];
            attn_sdpa_desc d = f->desc;
            d.q_len = n;
            d.q = attn_view_bhsd(c->Hq, n, c->dk);
            d.o = attn_view_bhsd(c->Hq, n, c->dv);
            d.use_kv_lens = 1;
            d.threads = 1;
            const int64_t nq = c->B * c->Hq * n * c->dk, no = c->B * c->Hq * n * c->dv;
            float *q = malloc((size_t)nq * sizeof(float));
            float *o1 = malloc((size_t)no * sizeof(float)), *o2 = malloc((size_t)no * sizeof(float));
            assert_true(q && o1 && o2);
            for (int64_t i = 0; i < nq; i++)
                q[i] = uniform(1.0);
            memset(o1, 0xA5, (size_t)no * sizeof(float));
            memset(o2, 0x5A, (size_t)no * sizeof(float));
            int32_t lens[MAXB];
            memcpy(lens, f->want_lens, sizeof lens);
            attn_sdpa_args a;
            attn_sdpa_args_init(&a);
            a.q = q, a.o = o1, a.kv_lens = lens, a.block_table = table;
            if (c->kt == ATTN_DTYPE_F32) a.k = (const float *)(const void *)f->kc;
            else if (is_block_type(c->kt)) a.kq = f->kc;
            else a.k16 = (const uint16_t *)(const void *)f->kc;
            if (c->vt == ATTN_DTYPE_F32) a.v = (const float *)(const void *)f->vc;
            else if (is_block_type(c->vt)) a.vq = f->vc;
            else a.v16 = (const uint16_t *)(const void *)f->vc;
            attn_sdpa_desc d2 = d;
            d2.k_type = d2.v_type = ATTN_DTYPE_F32;
            attn_sdpa_args a2;
            attn_sdpa_args_init(&a2);
            a2.q = q, a2.o = o2, a2.kv_lens = lens, a2.block_table = table;
            a2.k = kf, a2.v = vf;
            const attn_status s1 = attn_sdpa(&d, &a), s2 = attn_sdpa(&d2, &a2);
            *calls += 2;
            if (s1 != ATTN_OK || s2 != ATTN_OK) {
                printf("FAIL %s, q_len %lld, ATTN_SIMD %s: attn_sdpa %s / %s\n", c->name,
                       (long long)n, getenv("ATTN_SIMD"), attn_status_str(s1),
                       attn_status_str(s2));
                bad = 1;
            } else if (memcmp(o1, o2, (size_t)no * sizeof(float)) != 0) {
                if (mkl && n > 16) {
                    printf("  note: %s, q_len %lld: MKL's sgemm depends on the leading "
                           "dimension; not compared\n", c->name, (long long)n);
                } else {
                    int64_t i = 0;
                    while (fbits(o1[i]) == fbits(o2[i]))
                        i++;
                    printf("FAIL %s, q_len %lld, ATTN_SIMD %s: O[%lld] %a, F32 twin %a\n",
                           c->name, (long long)n, getenv("ATTN_SIMD"), (long long)i,
                           (double)o1[i], (double)o2[i]);
                    bad = 1;
                }
            }
            free(q), free(o1), free(o2);
        }
    }
    if (!given)
        unsetenv("ATTN_SIMD");
    free(kf), free(vf), free(table);
    return bad;
}

static void test_kv_append(void **state)
{
    (void)state;
    int fails = 0, appends = 0, calls = 0;
    for (size_t ci = 0; ci < sizeof qcases / sizeof qcases[0]; ci++) {
        const qcase *c = &qcases[ci];
        fixture f;
        fixture_build(&f, c);
        for (int s = 0; s < c->steps; s++) {
            int64_t nl[MAXB];
            for (int b = 0; b < c->B; b++) {
                nl[b] = step_len(c, b, s);
                f.new_lens[b] = (int32_t)nl[b];
            }
            for (int64_t i = 0; i < f.kn_count; i++)
                f.kn[i] = new_value();
            for (int64_t i = 0; i < f.vn_count; i++)
                f.vn[i] = new_value();
            if (c->bs)
                step_table(&f, c, nl);
            attn_kv_append_args a;
            attn_kv_append_args_init(&a);
            a.k_cache = f.kc, a.v_cache = f.vc, a.block_table = c->bs ? f.table : NULL;
            a.kv_lens = f.lens, a.new_lens = c->per_seq ? f.new_lens : NULL, a.t = c->t;
            a.k_new = f.kn, a.v_new = f.vn, a.k_new_view = f.knv, a.v_new_view = f.vnv;
            const attn_status st = attn_kv_append(&f.desc, &a);
            appends++;
            if (st != ATTN_OK) {
                printf("FAIL %s step %d: %s\n", c->name, s, attn_status_str(st));
                fails++;
                break;
            }
            if (expect_tensor(&f, c, f.ke, c->kt, &f.desc.k, f.kn, &f.knv, c->dk, nl) |
                expect_tensor(&f, c, f.ve, c->vt, &f.desc.v, f.vn, &f.vnv, c->dv, nl)) {
                printf("FAIL %s step %d: attn_quantize's rows differ from the reference\n",
                       c->name, s);
                fails++;
            }
            for (int b = 0; b < c->B; b++) {
                f.want_lens[b] = (int32_t)(f.want_lens[b] + nl[b]);
                if (f.lens[b] != f.want_lens[b]) {
                    printf("FAIL %s step %d: kv_lens[%d] = %d, want %d\n", c->name, s, b,
                           f.lens[b], f.want_lens[b]);
                    fails++;
                }
            }
            if (memcmp(f.kc, f.ke, f.kbytes) != 0 || memcmp(f.vc, f.ve, f.vbytes) != 0) {
                int shown = 0;
                for (size_t i = 0; i < f.kbytes && shown < 5; i++)
                    if (f.kc[i] != f.ke[i] && ++shown)
                        printf("FAIL %s step %d: K byte %zu is 0x%02x, want 0x%02x\n", c->name,
                               s, i, f.kc[i], f.ke[i]);
                for (size_t i = 0; i < f.vbytes && shown < 10; i++)
                    if (f.vc[i] != f.ve[i] && ++shown)
                        printf("FAIL %s step %d: V byte %zu is 0x%02x, want 0x%02x\n", c->name,
                               s, i, f.vc[i], f.ve[i]);
                fails++;
            }
        }
        if (!fails)
            fails += forward_check(&f, c, &calls);
        fixture_free(&f);
    }
    printf("  %zu append cases, %d appends, %d attn_sdpa calls against their F32 twins\n",
           sizeof qcases / sizeof qcases[0], appends, calls);
    assert_int_equal(fails, 0);
}

/* The stride and size rules of attn_kv_append for the block types (the
 * rest of its errors: test_kvappend.c), nothing written. */
static void test_kv_append_errors(void **state)
{
    (void)state;
    enum { B = 2, H = 2, DK = 64, DV = 32, M = 8, T = 2 };
    static const struct {
        const char *what;
        attn_dtype kt, vt;
        int64_t dk, dv;
        attn_view k, v;     /* zero: dense BHSD */
        attn_status want;
    } rows[] = {
        { "control: Q8_0 K, Q4_0 V", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK, DV, { 0, 0, 0 },
          { 0, 0, 0 }, ATTN_OK },
        { "Q8_0 K, qk_dim 48", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, 48, DV, { 0, 0, 0 }, { 0, 0, 0 },
          ATTN_ERR_BAD_SIZE },
        { "Q4_0 V, v_dim 16", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK, 16, { 0, 0, 0 }, { 0, 0, 0 },
          ATTN_ERR_BAD_SIZE },
        { "Q8_0 K, seq stride 80", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK, DV,
          { 2 * 8 * 80, 8 * 80, 80 }, { 0, 0, 0 }, ATTN_ERR_BAD_STRIDE },
        { "Q8_0 K, head stride 528", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK, DV,
          { 1056, 528, 64 }, { 0, 0, 0 }, ATTN_ERR_BAD_STRIDE },
        { "Q4_0 V, batch stride 528", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK, DV, { 0, 0, 0 },
          { 528, 256, 32 }, ATTN_ERR_BAD_STRIDE },
        { "control: F16 V, batch stride 528", ATTN_DTYPE_Q8_0, ATTN_DTYPE_F16, DK, DV,
          { 0, 0, 0 }, { 528, 256, 32 }, ATTN_OK },
        { "control: Q4_0 V, gapped strides 64 / 544 / 1088", ATTN_DTYPE_Q8_0, ATTN_DTYPE_Q4_0, DK,
          DV, { 0, 0, 0 }, { 1088, 544, 64 }, ATTN_OK },
    };
    int fails = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        attn_sdpa_desc d;
        attn_sdpa_desc_init(&d);
        d.batch = B, d.kv_heads = H, d.kv_len = M, d.qk_dim = rows[r].dk, d.v_dim = rows[r].dv;
        d.k_type = rows[r].kt, d.v_type = rows[r].vt;
        d.k = rows[r].k.seq ? rows[r].k : attn_view_bhsd(H, M, rows[r].dk);
        d.v = rows[r].v.seq ? rows[r].v : attn_view_bhsd(H, M, rows[r].dv);
        /* room for any of the views above, at 4 bytes a value */
        enum { CAPV = 4 * B * H * M * 128 };
        unsigned char *kc = malloc(CAPV), *vc = malloc(CAPV), *k0 = malloc(CAPV),
                      *v0 = malloc(CAPV);
        float kn[B * H * T * DK], vn[B * H * T * DK];
        assert_true(kc && vc && k0 && v0);
        for (int i = 0; i < CAPV; i++)
            kc[i] = k0[i] = (unsigned char)(i * 5), vc[i] = v0[i] = (unsigned char)(i * 3);
        for (size_t i = 0; i < sizeof kn / sizeof kn[0]; i++)
            kn[i] = uniform(2.0), vn[i] = uniform(2.0);
        int32_t lens[B] = { 3, 5 };
        attn_kv_append_args a;
        attn_kv_append_args_init(&a);
        a.k_cache = kc, a.v_cache = vc, a.kv_lens = lens, a.t = T, a.k_new = kn, a.v_new = vn;
        a.k_new_view = attn_view_bhsd(H, T, rows[r].dk);
        a.v_new_view = attn_view_bhsd(H, T, rows[r].dv);
        const attn_status s = attn_kv_append(&d, &a);
        const int changed = memcmp(kc, k0, CAPV) || memcmp(vc, v0, CAPV) || lens[0] != 3 ||
                            lens[1] != 5;
        if (s != rows[r].want || (s != ATTN_OK && changed) || (s == ATTN_OK && !changed)) {
            printf("FAIL kv_append %s: %s (want %s)%s\n", rows[r].what, attn_status_str(s),
                   attn_status_str(rows[r].want),
                   s != ATTN_OK && changed ? ", written on error" : "");
            fails++;
        }
        free(kc), free(vc), free(k0), free(v0);
    }
    printf("  %zu attn_kv_append rows of the block types' rules\n", sizeof rows / sizeof rows[0]);
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_quantize_table),
        cmocka_unit_test(test_dequantize),
        cmocka_unit_test(test_plain_types),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_kv_append),
        cmocka_unit_test(test_kv_append_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
