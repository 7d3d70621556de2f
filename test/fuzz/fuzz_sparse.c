/*
 * fuzz_sparse.c -- the sparse fields of an SDPA or MHA problem (byte 0 bit
 * 3, SEL_SPARSE; fuzz_sdpa.c, fuzz_mha.c and their backwards use them).
 *
 * decode_sparse: global keys and queries (any nonzero enables), block size
 * 0 or 16..256, layout_per_head; the flags (decoded density) and the
 * layout (all visible, all hidden, random, hidden block rows, or from the
 * builders; one style or one per head) in exact-size buffers; the callers
 * decode shapes of several blocks.  Invalid sparse fields ride on the
 * existing kinds when the input is sparse (an extra byte picks them):
 * BAD_RESERVED (reserved_flags), BAD_ENUM (block size, layout_per_head),
 * BAD_PTR_NULL and BAD_PTR_EXTRA (global_k, global_q, layout), and in the
 * backward BB_FWD, BB_PTR_NULL and BB_PTR_EXTRA, in the MHA backward
 * MB_PTR_NULL and MB_PTR_EXTRA.  NaN goes where no candidate set reaches
 * (ref_candidate), the references apply flags and layout.
 */
#include "fuzz_sparse.h"

/* attn.h, "Sparse attention" and the desc's fields: reserved_flags zero,
 * block_size 0 or a power of two from 16 to 256, layout_per_head 0 or 1
 * and 0 without a layout; else ATTN_ERR_BAD_OPTION. */
static int block_size_ok(int64_t bs)
{
    return bs == 0 || (bs >= 16 && bs <= 256 && (bs & (bs - 1)) == 0);
}
int sparse_fields_ok(int reserved_flags, int layout_per_head, int64_t bs)
{
    return reserved_flags == 0 && block_size_ok(bs) &&
           (layout_per_head == 0 || (layout_per_head == 1 && bs != 0));
}

void decode_sparse(rd *r, sparse_cfg *c)
{
    static const int64_t sizes[8] = { 0, 16, 16, 16, 32, 64, 128, 256 };
    static const int on[4] = { 1, 1, 2, -1 };
    const unsigned x = u8(r);
    c->gk = (x & 1) ? on[x >> 6] : 0;
    c->gq = (x & 2) ? on[(x >> 6) ^ 2] : 0;
    c->bs = sizes[(x >> 2) & 7];
    c->lph = c->bs != 0 && (x & 32);
    c->fill = u8(r);
    c->fill |= u8(r) << 8;
}

/* A planted invalid sparse field (BAD_RESERVED, BAD_ENUM and BB_FWD with
 * sparse): reserved_flags nonzero, a block size that is no power of two in
 * [16, 256], layout_per_head not 0 or 1, or 1 without a layout. */
void plant_sparse(rd *r, int reserved, int *rf, int *lph, int64_t *bs)
{
    static const int64_t bad_bs[12] = { 1, 8, 15, 17, 24, 48, 255, 257, 512, -16, INT64_MIN,
                                        (int64_t)1 << 40 };
    static const int bad_lph[3] = { 2, -1, INT_MAX };
    if (reserved) {
        *rf = (u8(r) & 1) ? 1 + (int)u8(r) : INT_MIN;
        return;
    }
    switch (pick(r, 3)) {
    case 0: *bs = bad_bs[pick(r, 12)]; break;
    case 1: *lph = bad_lph[pick(r, 3)]; break;
    default: *lph = 1; *bs = 0; break;
    }
}

/* BAD_PTR_NULL, BB_PTR_NULL and MB_PTR_NULL of a sparse problem: one of
 * the three sparse pointers NULL. */
void plant_sparse_null(rd *r, const uint8_t **gk, const uint8_t **gq, const uint8_t **lay)
{
    const uint8_t **sp3[] = { gk, gq, lay };
    *sp3[pick(r, 3)] = NULL;
}

/* BAD_PTR_EXTRA, BB_PTR_EXTRA and MB_PTR_EXTRA of a sparse problem: junk
 * for one sparse pointer the desc does not use. */
void plant_sparse_extra(rd *r, int use_gk, int use_gq, int64_t bs, const uint8_t *junk,
                        const uint8_t **gk, const uint8_t **gq, const uint8_t **lay)
{
    switch (pick(r, 3)) {
    case 0: if (!use_gk) *gk = junk; break;
    case 1: if (!use_gq) *gq = junk; break;
    default: if (!bs) *lay = junk; break;
    }
}

static void layout_fill(uint8_t *L, int64_t nb, int64_t mb, unsigned style, prng *g)
{
    const size_t cnt = (size_t)(nb * mb);
    switch (style) {
    case 0: /* everything visible (any nonzero value) */
        for (size_t i = 0; i < cnt; i++)
            L[i] = (uint8_t)(1 + pr_next(g) % 255);
        break;
    case 1: memset(L, 0, cnt); break; /* everything hidden */
    case 2:
    case 7:
        for (size_t i = 0; i < cnt; i++)
            L[i] = pr_unit(g) < (style == 2 ? 0.5 : 0.25) ? (uint8_t)(1 + pr_next(g) % 255) : 0;
        break;
    case 3: /* mostly visible, whole block rows hidden */
        for (int64_t I = 0; I < nb; I++) {
            const int hide = pr_unit(g) < 0.4;
            for (int64_t J = 0; J < mb; J++)
                L[I * mb + J] = !hide && pr_unit(g) < 0.75;
        }
        break;
    case 4: {
        static const int64_t ws[4] = { 0, 1, 3, 5 };
        const attn_status st = attn_layout_build_bigbird(L, nb, mb, ws[pr_next(g) % 4],
                                                   (int64_t)(pr_next(g) % 3),
                                                   (int64_t)(pr_next(g) % 3), pr_next(g));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_bigbird: %s", st_name(st));
        break;
    }
    case 5: {
        const attn_status st = attn_layout_build_strided(L, nb, mb, 1 + (int64_t)(pr_next(g) % 3),
                                                   (int)(pr_next(g) & 1));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_strided: %s", st_name(st));
        break;
    }
    default: {
        const int64_t l = 1 + (int64_t)(pr_next(g) % 3);
        const attn_status st = attn_layout_build_fixed(L, nb, mb, l, 1 + (int64_t)(pr_next(g) % (uint64_t)l),
                                                 (int)(pr_next(g) & 1));
        if (st != ATTN_OK)
            FAIL("attn_layout_build_fixed: %s", st_name(st));
        break;
    }
    }
}

void sparse_make(sparse_buf *S, const sparse_cfg *c, prng *g, int64_t B, int64_t H, int64_t n,
                 int64_t m)
{
    static const double dens[4] = { 0.0, 0.125, 0.5, 1.0 };
    memset(S, 0, sizeof *S);
    const unsigned f = c->fill;
    if (c->gk) {
        S->gk = xmalloc((size_t)(B * m));
        for (int64_t i = 0; i < B * m; i++)
            S->gk[i] = pr_unit(g) < dens[f & 3] ? (uint8_t)(1 + pr_next(g) % 255) : 0;
    }
    if (c->gq) {
        S->gq = xmalloc((size_t)(B * n));
        for (int64_t i = 0; i < B * n; i++)
            S->gq[i] = pr_unit(g) < dens[(f >> 2) & 3] ? (uint8_t)(1 + pr_next(g) % 255) : 0;
    }
    if (c->bs) {
        S->nb = (n + c->bs - 1) / c->bs;
        S->mb = (m + c->bs - 1) / c->bs;
        const int64_t hl = c->lph ? H : 1;
        S->lay = xmalloc((size_t)(hl * S->nb * S->mb));
        /* one style, or (bit 7) a style per head */
        for (int64_t h = 0; h < hl; h++)
            layout_fill(S->lay + h * S->nb * S->mb, S->nb, S->mb,
                        (f & 0x80) ? (unsigned)(pr_next(g) % 8) : (f >> 4) & 7, g);
    }
}

void sparse_free(sparse_buf *S)
{
    free(S->gk);
    free(S->gq);
    free(S->lay);
    memset(S, 0, sizeof *S);
}

void print_sparse(int gk, int gq, int lph, int rf, int64_t bs)
{
    if (gk || gq || lph || rf || bs)
        fprintf(stderr, " sparse=gk%d/gq%d/bs%lld/lph%d/rf%d", gk, gq, (long long)bs, lph, rf);
}
