/* A C model of the AMX tile unit, and lib/kernels/bf16_amx.c compiled on
 * it (amx_emu.h).  Compiled with AVX-512 F/BW/VL (the kernel's copies and
 * its combine are AVX-512), without AMX: call it only where the CPU has
 * AVX-512.
 *
 * The model (Intel SDM, AMX): LDTILECFG checks its 64 bytes as the
 * instruction would (palette 1, start_row and the reserved bytes 0, at
 * most 16 rows of at most 64 bytes for tmm0-7, nothing for the names past
 * them, rows and bytes both 0 or both not) and zeroes the tiles;
 * TILELOADD reads exactly rows x colsb bytes, row r at base + r * stride
 * (the rest of the tile 0); TILESTORED writes exactly those; TILEZERO;
 * TDPBF16PS with its shape rules (dst.rows = src1.rows, src1.colsb / 4 =
 * src2.rows, src2.colsb = dst.colsb, three different tiles) in one of two
 * orders (amx_emu.h), each step an fp32 FMA or addition with DAZ and FTZ;
 * TILERELEASE returns to the initial state, in which any tile instruction
 * is an error.  Errors are counted, not fatal: the test reports them. */
#include "amx_emu.h"
#include <math.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct emu_tile {
    int rows, colsb;
    unsigned char d[16][64];
} emu_tile;

static _Thread_local struct {
    int configured;
    emu_tile t[8];
} emu;
static _Thread_local int emu_order;
static long emu_errs, emu_dps;
static char emu_first[200];

static void emu_error(const char *fmt, ...)
{
    if (!emu_errs++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(emu_first, sizeof emu_first, fmt, ap);
        va_end(ap);
    }
}

long amx_emu_errors(const char **first)
{
    if (first)
        *first = emu_errs ? emu_first : "";
    return emu_errs;
}

long amx_emu_dp_count(void)
{
    return emu_dps;
}

/* amx_emu_fence's regions */
typedef struct emu_region {
    const unsigned char *base;
    size_t bytes;
    int64_t stride, rows, row_bytes;
} emu_region;
static emu_region fence[2];

void amx_emu_fence(const void *a, size_t a_bytes, int64_t a_stride, int64_t a_rows,
                   int64_t a_row_bytes, const void *b, size_t b_bytes, int64_t b_stride,
                   int64_t b_rows, int64_t b_row_bytes)
{
    const emu_region ra = { a, a ? a_bytes : 0, a_stride, a_rows, a_row_bytes };
    const emu_region rb = { b, b ? b_bytes : 0, b_stride, b_rows, b_row_bytes };
    fence[0] = ra;
    fence[1] = rb;
}

/* n bytes read at p: each one inside a fenced buffer must be an element */
static void fence_check(const unsigned char *p, size_t n)
{
    for (int f = 0; f < 2; f++) {
        const emu_region *g = &fence[f];
        if (!g->bytes || p + n <= g->base || p >= g->base + g->bytes)
            continue;
        for (size_t i = 0; i < n; i++) {
            if (p + i < g->base || p + i >= g->base + g->bytes)
                continue;
            const int64_t o = (int64_t)(p + i - g->base);
            if (!g->stride || o / g->stride >= g->rows || o % g->stride >= g->row_bytes) {
                emu_error("TILELOADD read byte %lld of %s (row %lld, byte %lld of the row): "
                          "outside the product", (long long)o, f ? "B" : "A",
                          (long long)(g->stride ? o / g->stride : 0),
                          (long long)(g->stride ? o % g->stride : o));
                return;
            }
        }
    }
}

static void emu_init_state(void)
{
    memset(&emu, 0, sizeof emu);
}

static void emu_config(const void *p)
{
    unsigned char b[64];
    memcpy(b, p, sizeof b);
    if (b[0] == 0) { /* palette 0: the initial state */
        emu_init_state();
        return;
    }
    if (b[0] != 1) {
        emu_error("LDTILECFG: palette %d", b[0]);
        return;
    }
    for (int i = 1; i < 16; i++)
        if (b[i])
            emu_error("LDTILECFG: byte %d (start_row / reserved) is %d", i, b[i]);
    for (int i = 32; i < 48; i++)
        if (b[i])
            emu_error("LDTILECFG: byte %d (colsb of a name past tmm7) is %d", i, b[i]);
    for (int i = 56; i < 64; i++)
        if (b[i])
            emu_error("LDTILECFG: byte %d (rows of a name past tmm7) is %d", i, b[i]);
    emu_init_state();
    for (int t = 0; t < 8; t++) {
        const int colsb = b[16 + 2 * t] | b[17 + 2 * t] << 8, rows = b[48 + t];
        if (colsb > 64 || rows > 16 || (!colsb) != (!rows))
            emu_error("LDTILECFG: tmm%d %d rows x %d bytes", t, rows, colsb);
        emu.t[t].rows = rows;
        emu.t[t].colsb = colsb;
    }
    emu.configured = 1;
}

static emu_tile *emu_use(int t, const char *op)
{
    if (!emu.configured || t < 0 || t > 7 || !emu.t[t].rows) {
        emu_error("%s tmm%d: %s", op, t,
                  emu.configured ? "tile not configured" : "no configuration");
        return NULL;
    }
    return &emu.t[t];
}

static void emu_zero(int t)
{
    emu_tile *x = emu_use(t, "TILEZERO");
    if (x)
        memset(x->d, 0, sizeof x->d);
}

static void emu_load(int t, const void *base, long stride)
{
    emu_tile *x = emu_use(t, "TILELOADD");
    if (!x)
        return;
    memset(x->d, 0, sizeof x->d);
    for (int r = 0; r < x->rows; r++) {
        const unsigned char *row = (const unsigned char *)base + (long)r * stride;
        fence_check(row, (size_t)x->colsb);
        memcpy(x->d[r], row, (size_t)x->colsb);
    }
}

static void emu_store(int t, void *base, long stride)
{
    emu_tile *x = emu_use(t, "TILESTORED");
    if (!x)
        return;
    for (int r = 0; r < x->rows; r++)
        memcpy((unsigned char *)base + (long)r * stride, x->d[r], (size_t)x->colsb);
}

static void emu_release(void)
{
    emu_init_state();
}

static float ftz(float x)
{
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* an fp32 FMA with DAZ and FTZ (a and b are BF16 values, exact in fp32) */
static float fma_df(float a, float b, float c)
{
    return ftz(fmaf(ftz(a), ftz(b), ftz(c)));
}

static float add_df(float x, float y)
{
    return ftz(ftz(x) + ftz(y));
}

static float bf_at(const emu_tile *x, int r, int e)
{
    uint16_t h;
    memcpy(&h, x->d[r] + 2 * e, sizeof h);
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float f32_at(const emu_tile *x, int r, int n)
{
    float f;
    memcpy(&f, x->d[r] + 4 * n, sizeof f);
    return f;
}

static void emu_dp(int tc, int ta, int tb)
{
    emu_tile *c = emu_use(tc, "TDPBF16PS dst"), *a = emu_use(ta, "TDPBF16PS src1"),
             *b = emu_use(tb, "TDPBF16PS src2");
    if (!c || !a || !b)
        return;
    if (tc == ta || tc == tb || ta == tb || c->rows != a->rows || a->colsb % 4 ||
        c->colsb % 4 || a->colsb / 4 != b->rows || b->colsb != c->colsb) {
        emu_error("TDPBF16PS tmm%d (%dx%d), tmm%d (%dx%d), tmm%d (%dx%d): invalid", tc, c->rows,
                  c->colsb, ta, a->rows, a->colsb, tb, b->rows, b->colsb);
        return;
    }
    emu_dps++;
    const int kp = a->colsb / 4, nn = c->colsb / 4;
    for (int m = 0; m < c->rows; m++) {
        float tmp[32];
        if (emu_order == AMX_EMU_SDM) {
            for (int i = 0; i < 2 * nn; i++)
                tmp[i] = 0.0f;
            for (int k = 0; k < kp; k++)
                for (int n = 0; n < nn; n++) {
                    tmp[2 * n] = fma_df(bf_at(a, m, 2 * k), bf_at(b, k, 2 * n), tmp[2 * n]);
                    tmp[2 * n + 1] =
                        fma_df(bf_at(a, m, 2 * k + 1), bf_at(b, k, 2 * n + 1), tmp[2 * n + 1]);
                }
            for (int n = 0; n < nn; n++) {
                const float s = add_df(tmp[2 * n], tmp[2 * n + 1]);
                const float v = add_df(f32_at(c, m, n), s);
                memcpy(c->d[m] + 4 * n, &v, sizeof v);
            }
        } else {
            for (int n = 0; n < nn; n++)
                tmp[n] = f32_at(c, m, n);
            for (int k = 0; k < kp; k++)
                for (int n = 0; n < nn; n++) {
                    tmp[n] = fma_df(bf_at(a, m, 2 * k), bf_at(b, k, 2 * n), tmp[n]);
                    tmp[n] = fma_df(bf_at(a, m, 2 * k + 1), bf_at(b, k, 2 * n + 1), tmp[n]);
                }
            for (int n = 0; n < nn; n++)
                memcpy(c->d[m] + 4 * n, &tmp[n], sizeof tmp[n]);
        }
    }
}

/* bf16_amx.c on the model */
#define BF16_AMX_EMULATED 1
#define TILE_CONFIG(p) emu_config(p)
#define TILE_LOAD(t, p, stride) emu_load(t, p, (long)(stride))
#define TILE_STORE(t, p, stride) emu_store(t, p, (long)(stride))
#define TILE_ZERO(t) emu_zero(t)
#define TILE_DP(c, a, b) emu_dp(c, a, b)
#define TILE_RELEASE() emu_release()
#define MM_AMX mm_amx_emulated
void mm_amx_emulated(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                     const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                     int64_t ldc, int acc, attn_ahead *ah);
#include "kernels/bf16_amx.c"

void amx_emu_mm(int order, int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                int64_t ldc, int acc, attn_ahead *ah)
{
    emu_order = order;
    mm_amx_emulated(M, N, K, alpha, rs, a, lda, b, ldb, c, ldc, acc, ah);
    if (emu.configured)
        emu_error("the tile state is still configured after mm (no TILERELEASE)");
}
