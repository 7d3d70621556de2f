/*
 * fuzz_layout.c -- the layout builders attn_layout_build_bigbird, _strided and
 * _fixed (byte 0 bit 5 set, bit 4 clear): one call with decoded arguments
 * (sizes 1..40, or 0, negative, huge; parameters in and out of their
 * ranges; NULL).
 *
 * Contract: the status is one of the rules broken (attn.h: NULL_ARGUMENT,
 * BAD_SIZE, TOO_LARGE, BAD_OPTION) and nothing is written on error (the
 * buffer keeps its sentinel); a valid layout equals the independent
 * construction of test/layout_expect.c byte for byte.
 */
#include "../layout_expect.h"
#include "fuzz_common.h"

static int64_t layout_dim(rd *r)
{
    static const int64_t special[8] = { 0, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 32,
                                        ((int64_t)1 << 31) + 1, (int64_t)1 << 62,
                                        3037000500 };
    const unsigned c = u8(r);
    return (c & 0xe0) == 0xe0 ? special[c & 7] : 1 + (int64_t)(c % 40);
}

/* A decoded builder call: the function, sizes, parameters, the seed, NULL,
 * and the statuses its broken rules allow. */
typedef struct layout_case {
    unsigned fn;                 /* 0 bigbird, 1 strided, 2 fixed */
    int64_t nb, mb, p1, p2, p3;
    int causal, null;
    uint64_t seed;
    expect e;
} layout_case;

static void layout_decode(rd *r, layout_case *L)
{
    static const int64_t wv[12] = { 0, 1, 3, 5, 7, 41, 1, 3, -1, 2, INT64_MIN, (int64_t)1 << 40 };
    static const int64_t gv[8] = { 0, 1, 2, 3, 40, INT64_MAX, 0, -1 };
    static const int64_t rv[10] = { 0, 1, 2, 3, 5, 100, INT64_MAX, 1, -1, INT64_MIN };
    static const int64_t lv[10] = { 1, 2, 3, 4, 7, 50, INT64_MAX, 0, -1, INT64_MIN };
    static const int cv[8] = { 0, 1, 0, 1, 0, 1, 2, -1 };
    memset(L, 0, sizeof *L);
    L->fn = pick(r, 3);
    L->nb = layout_dim(r);
    L->mb = layout_dim(r);
    const unsigned c = u8(r);
    L->null = (c & 15) == 15;
    L->seed = (uint64_t)u32(r) | (uint64_t)u8(r) << 32;
    expect *e = &L->e;
    if (L->fn == 0) {
        L->p1 = wv[pick(r, 12)];
        L->p2 = gv[pick(r, 8)];
        L->p3 = rv[pick(r, 10)];
        if (L->p1 < 0 || L->p2 < 0 || L->p3 < 0 || (L->p1 > 0 && L->p1 % 2 == 0))
            e->must |= BIT(ATTN_ERR_BAD_OPTION);
    } else {
        L->p1 = lv[pick(r, 10)];
        L->causal = cv[pick(r, 8)];
        if (L->p1 < 1 || (L->causal != 0 && L->causal != 1))
            e->must |= BIT(ATTN_ERR_BAD_OPTION);
        if (L->fn == 2) {
            static const int64_t cs[8] = { 1, 1, 2, 3, 0, -1, INT64_MAX, 2 };
            const int64_t p1 = L->p1;
            const unsigned k = pick(r, 10);
            L->p2 = k < 8 ? cs[k] : k == 8 ? p1 : p1 < INT64_MAX ? p1 + 1 : 0; /* c: 1..l, or not */
            if (L->p2 < 1 || L->p2 > p1)
                e->must |= BIT(ATTN_ERR_BAD_OPTION);
        }
    }
    if (L->null)
        e->must |= BIT(ATTN_ERR_NULL_ARGUMENT);
    int64_t cells = 0;
    const int64_t nb = L->nb, mb = L->mb;
    if (nb <= 0 || mb <= 0) {
        e->must |= BIT(ATTN_ERR_BAD_SIZE);
    } else if (__builtin_mul_overflow(nb, mb, &cells)) {
        e->must |= BIT(ATTN_ERR_TOO_LARGE);
    } else if (nb > ((int64_t)1 << 32) || mb > ((int64_t)1 << 32) || cells > ((int64_t)1 << 40)) {
        /* representable, but scratch per row (bigbird) may not be */
        e->maybe |= BIT(ATTN_ERR_TOO_LARGE) | BIT(ATTN_ERR_OUT_OF_MEMORY);
    }
    if (verbose)
        fprintf(stderr, "LAYOUT fn=%u nb=%lld mb=%lld p=%lld/%lld/%lld causal=%d seed=%llx null=%d\n",
                L->fn, (long long)nb, (long long)mb, (long long)L->p1, (long long)L->p2,
                (long long)L->p3, L->causal, (unsigned long long)L->seed, L->null);
}

/* A valid layout against the construction of test/layout_expect.c. */
static void layout_check(const layout_case *L, const uint8_t *buf, size_t cnt)
{
    const unsigned fn = L->fn;
    const int64_t nb = L->nb, mb = L->mb, p1 = L->p1, p2 = L->p2, p3 = L->p3;
    uint8_t *want = xmalloc(cnt);
    /* the constructions loop over the band and the stride: the same
     * layout with them cut to what the shape can hold */
    const int64_t far = nb + mb + 1;
    if (fn == 0) {
        if (expect_bigbird(want, nb, mb, p1 > 2 * far + 1 ? 2 * far + 1 : p1, p2, p3, L->seed))
            abort();
    } else if (fn == 1) {
        expect_strided(want, nb, mb, p1 > far ? far : p1, L->causal);
    } else {
        expect_fixed(want, nb, mb, p1, p2, L->causal);
    }
    for (size_t i = 0; i < cnt; i++)
        if (buf[i] != want[i])
            FAIL("layout builder %u (nb=%lld mb=%lld p=%lld/%lld/%lld causal=%d): block "
                 "(%lld, %lld) is %u, the construction %u",
                 fn, (long long)nb, (long long)mb, (long long)p1, (long long)p2,
                 (long long)p3, L->causal, (long long)(i / (size_t)mb),
                 (long long)(i % (size_t)mb), buf[i], want[i]);
    free(want);
}

void fuzz_layout(rd *r)
{
    layout_case L;
    layout_decode(r, &L);
    /* a valid call writes nb x mb bytes: only for small layouts */
    const int64_t nb = L.nb, mb = L.mb;
    const int small = nb > 0 && mb > 0 && nb <= 64 && mb <= 64;
    if (L.e.must == 0 && !small)
        return;
    const size_t cnt = small ? (size_t)(nb * mb) : 64;
    uint8_t *buf = xmalloc(cnt);
    memset(buf, 0xEE, cnt);
    uint8_t *lay = L.null ? NULL : buf;
    const unsigned fn = L.fn;
    attn_status st = fn == 0   ? attn_layout_build_bigbird(lay, nb, mb, L.p1, L.p2, L.p3, L.seed)
                     : fn == 1 ? attn_layout_build_strided(lay, nb, mb, L.p1, L.causal)
                               : attn_layout_build_fixed(lay, nb, mb, L.p1, L.p2, L.causal);
    check_status(fn == 0 ? "attn_layout_build_bigbird" : fn == 1 ? "attn_layout_build_strided" : "attn_layout_build_fixed",
                 st, L.e);
    if (st != ATTN_OK) {
        for (size_t i = 0; i < cnt; i++)
            if (buf[i] != 0xEE)
                FAIL("layout builder %u: %s, but byte %zu was written", fn, st_name(st), i);
        counts[N_LAYOUT_ERROR]++;
    } else {
        layout_check(&L, buf, cnt);
        counts[N_LAYOUT_CHECKED]++;
    }
    free(buf);
}
