/* The BF16 products' portable C table (the reference of the SIMD ones; see
 * bf16.h for the arithmetic), and the run-time choice. */
#include "attn_config.h"
#include "kernels/bf16.h"
#include "kernels/convert.h"
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

static inline float ftz(float x)
{
    return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x;
}

/* A BF16 value with DAZ: a denormal reads as zero of its sign. */
static inline float daz(uint16_t h)
{
    return ftz(attn_bf16_to_f32(h));
}

/* One pair, odd half first, each product added by one fused multiply-add
 * (an underflowing product is not flushed before the addition). */
static inline float pair_step(float s, uint32_t a, uint32_t b)
{
    s = ftz(fmaf(daz((uint16_t)(a >> 16)), daz((uint16_t)(b >> 16)), s));
    return ftz(fmaf(daz((uint16_t)a), daz((uint16_t)b), s));
}

/* Pair p of a row of K BF16 values (the high half 0 past K). */
static inline uint32_t pair_at(const uint16_t *row, int64_t p, int64_t K)
{
    const uint32_t lo = row[2 * p];
    const uint32_t hi = 2 * p + 1 < K ? row[2 * p + 1] : 0u;
    return lo | hi << 16;
}

static void mm_c(int64_t M, int64_t N, int64_t K, float alpha, const float *rs,
                 const uint16_t *a, int64_t lda, const uint32_t *b, int64_t ldb, float *c,
                 int64_t ldc, int acc, attn_ahead *ah)
{
    const int64_t P = (K + 1) / 2;
    for (int64_t r = 0; r < M; r++) {
        if (ah)
            attn_ahead_step(ah);
        const uint16_t *ar = a + r * lda;
        float *cr = c + r * ldc;
        const float al = rs ? rs[r] : alpha;
        for (int64_t j = 0; j < N; j++) {
            float s = 0.0f;
            for (int64_t p = 0; p < P; p++)
                s = pair_step(s, pair_at(ar, p, K), b[p * ldb + j]);
            cr[j] = acc ? fmaf(al, s, cr[j]) : al * s;
        }
    }
}

static void pack_rows_c(const uint16_t *const *rows, int64_t N, int64_t K, uint32_t *bt,
                        int64_t ldt)
{
    const int64_t P = (K + 1) / 2;
    for (int64_t j = 0; j < N; j++)
        for (int64_t p = 0; p < P; p++)
            bt[p * ldt + j] = pair_at(rows[j], p, K);
}

static void pack_pairs_c(const uint16_t *const *rows, int64_t N, int64_t D, uint32_t *vp,
                         int64_t ldp)
{
    for (int64_t q = 0; 2 * q < N; q++) {
        const uint16_t *r0 = rows[2 * q], *r1 = 2 * q + 1 < N ? rows[2 * q + 1] : NULL;
        for (int64_t x = 0; x < D; x++)
            vp[q * ldp + x] = (uint32_t)r0[x] | (r1 ? (uint32_t)r1[x] << 16 : 0u);
    }
}

static void round_c(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        const float x = src[j];   /* read before dst[j] may overwrite it */
        dst[j] = attn_f32_to_bf16(x);
    }
}

static void tr_round_c(const float *src, int64_t lds, int64_t rows, int64_t cols, uint16_t *dst,
                       int64_t ldd)
{
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < rows; r++)
            dst[c * ldd + r] = attn_f32_to_bf16(src[r * lds + c]);
}

static void ds_pack_c(const float *p, const float *dp, int64_t ldp, const float *d, int64_t rows,
                      int64_t cols, uint32_t *pp, uint32_t *sp, int64_t ldq, uint16_t *s16,
                      int64_t lds)
{
    for (int64_t q = 0; 2 * q < rows; q++)
        for (int64_t j = 0; j < cols; j++) {
            uint32_t pw = 0, sw = 0;
            for (int64_t e = 0; e < 2 && 2 * q + e < rows; e++) {
                const int64_t r = 2 * q + e;
                const float pv = p[r * ldp + j], dv = dp[r * ldp + j];
                const float ds = d ? pv * (dv - d[r]) : dv;
                const uint16_t sh = attn_f32_to_bf16(ds);
                pw |= (uint32_t)attn_f32_to_bf16(pv) << (16 * e);
                sw |= (uint32_t)sh << (16 * e);
                s16[r * lds + j] = sh;
            }
            pp[q * ldq + j] = pw;
            sp[q * ldq + j] = sw;
        }
}

const attn_bf16_kernels attn_bf16_scalar = { "scalar", mm_c, pack_rows_c, pack_pairs_c,
                                             round_c, tr_round_c, ds_pack_c };

#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AMX
/* Built at run time, not listed field by field: a field added to the
 * struct later is the avx512bf16 table's here too. */
static attn_bf16_kernels amx_table;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_table_build(void)
{
    amx_table = attn_bf16_avx512bf16;
    amx_table.name = "amx";
    amx_table.mm = attn_bf16_mm_amx;
}
#endif

#if ATTN_HAVE_X86_KERNELS
/* mm on AVX2 (bf16_avx2.c), the rest the C table's. */
static const attn_bf16_kernels avx2_table = { "avx2", attn_bf16_mm_avx2, pack_rows_c,
                                              pack_pairs_c, round_c, tr_round_c, ds_pack_c };
#endif

const attn_bf16_kernels *attn_bf16_avx2(void)
{
#if ATTN_HAVE_X86_KERNELS
    return &avx2_table;
#else
    return NULL;
#endif
}

const attn_bf16_kernels *attn_bf16_amx(void)
{
#if ATTN_HAVE_X86_KERNELS && ATTN_HAVE_AMX
    if (attn_cpu_flags() & ATTN_CPU_AMXBF16) {
        pthread_once(&amx_once, amx_table_build);
        return &amx_table;
    }
#endif
    return NULL;
}

const attn_bf16_kernels *attn_bf16_at(int level)
{
    if (level >= ATTN_SIMD_AMX) {
        const attn_bf16_kernels *amx = attn_bf16_amx();
        if (amx)
            return amx;
        /* the best below AMX that this CPU runs */
        const int cpu = attn_cpu_level();
        level = cpu < ATTN_SIMD_AVX512BF16 ? cpu : ATTN_SIMD_AVX512BF16;
    }
#if ATTN_HAVE_X86_KERNELS
#if ATTN_HAVE_AVX512BF16
    if (level >= ATTN_SIMD_AVX512BF16)
        return &attn_bf16_avx512bf16;
#endif
    if (level >= ATTN_SIMD_AVX512)
        return &attn_bf16_avx512;
    if (level >= ATTN_SIMD_AVX2)
        return attn_bf16_avx2();
#endif
    (void)level;
    return &attn_bf16_scalar;
}
