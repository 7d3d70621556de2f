/*
 * fuzz_merge.c -- attn_partials_merge (byte 0 bits 4 and 5 together,
 * SEL_MERGE; attn.h, "Decoding and the KV cache").
 *
 * Decoded: parts 1..6, rows 1..12, dim 1..40 or 250..265 (across the
 * library's column chunks), the partial O and lse laid out part-major,
 * interleaved, broadcast over parts or rows (stride 0), with overlapping
 * rows (a row stride below dim) or all in one place, with gaps; a padded
 * output and lse_out NULL or strided (0 for one row); lse_p finite of a
 * decoded magnitude (up to FLT_MAX), -INFINITY (whole rows of it too), NaN
 * or +INFINITY at decoded rates; O_p finite (down to denormals), NaN in
 * every element only -INFINITY parts (or no part) point at.  Then one or
 * two invalid fields (GB_*).
 *
 * Contract: the status must be the one attn.h's rules, read in their
 * documented order, give (expect_merge, exact); on error the outputs are
 * untouched; on success every row matches a float64 merge written here
 * (NaN rows, O 0 and lse -INFINITY for empty rows, one contributing part
 * bit for bit, else within a rounding of the double result), gaps and
 * tails keep the sentinel, inputs never change and a second call gives
 * the same bits.  Calls the rules accept but whose extents or work are too
 * large to allocate or run here are skipped.
 */
#include "fuzz_common.h"

enum {
    GB_NONE = 0,
    GB_ARGS_NULL,    /* args itself NULL */
    GB_PTR_NULL,     /* o_parts, lse_parts or o NULL */
    GB_SIZE,         /* parts, rows or dim 0 or negative */
    GB_NEG_STRIDE,   /* one of the seven strides negative */
    GB_OUT_SHORT,    /* o_out_stride < dim */
    GB_LSE_OUT_ZERO, /* lse_out_stride 0: an error with rows > 1 and lse_out */
    GB_HUGE_STRIDE,  /* a stride near or past 2^61 (or at the boundary) */
    GB_HUGE_SIZE,    /* parts, rows or dim huge */
    GB_LSE_OUT_NULL, /* lse_out NULL with a junk stride: valid */
    GB_COUNT
};

typedef unsigned __int128 u128;

/* Elements spanned by (count - 1) * stride + tail, exact (no overflow for
 * int64 operands; count - 1 formed unsigned: count may be INT64_MIN, when
 * the size rule fails first and the span is not used). */
static u128 merge_span(int64_t count, int64_t stride, u128 tail)
{
    return (u128)((uint64_t)count - 1u) * (u128)(uint64_t)stride + tail;
}

static int merge_fits(u128 elems)
{
    const u128 lim = (uint64_t)INT64_MAX < (uint64_t)SIZE_MAX ? (u128)INT64_MAX : (u128)SIZE_MAX;
    return elems <= lim && elems * sizeof(float) <= lim;
}

/* The four extents of an args whose sizes and strides passed their rules. */
static void merge_extents(const attn_partials_merge_args *a, u128 ext[4])
{
    ext[0] = merge_span(a->parts, a->o_part_stride,
                        merge_span(a->rows, a->o_row_stride, (u128)a->dim));
    ext[1] = merge_span(a->parts, a->lse_part_stride, merge_span(a->rows, a->lse_row_stride, 1));
    ext[2] = merge_span(a->rows, a->o_out_stride, (u128)a->dim);
    ext[3] = a->lse_out ? merge_span(a->rows, a->lse_out_stride, 1) : 0;
}

/* attn.h's rules in their order: the one status the call must return. */
static attn_status expect_merge(const attn_partials_merge_args *a)
{
    if (!a || !a->o_parts || !a->lse_parts || !a->o)
        return ATTN_ERR_NULL_ARGUMENT;
    if (a->parts <= 0 || a->rows <= 0 || a->dim <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (a->o_part_stride < 0 || a->o_row_stride < 0 || a->lse_part_stride < 0 ||
        a->lse_row_stride < 0 || a->o_out_stride < a->dim)
        return ATTN_ERR_BAD_STRIDE;
    if (a->lse_out && (a->lse_out_stride < 0 || (a->lse_out_stride == 0 && a->rows > 1)))
        return ATTN_ERR_BAD_STRIDE;
    u128 ext[4];
    merge_extents(a, ext);
    for (int k = 0; k < 4; k++)
        if (!merge_fits(ext[k]))
            return ATTN_ERR_TOO_LARGE;
    return ATTN_OK;
}

static int64_t *merge_stride_field(attn_partials_merge_args *a, unsigned k, int64_t *count)
{
    switch (k % 6) {
    case 0: *count = a->parts; return &a->o_part_stride;
    case 1: *count = a->rows; return &a->o_row_stride;
    case 2: *count = a->parts; return &a->lse_part_stride;
    case 3: *count = a->rows; return &a->lse_row_stride;
    case 4: *count = a->rows; return &a->o_out_stride;
    default: *count = a->rows; return &a->lse_out_stride;
    }
}

static void merge_plant(rd *r, unsigned kind, attn_partials_merge_args *a, int *args_null)
{
    static const int64_t bad_sizes[4] = { 0, -1, INT64_MIN, -7 };
    static const int64_t neg[3] = { -1, INT64_MIN, -40 };
    static const int64_t huge[8] = { INT64_MAX, INT64_MAX / 2 + 1, (int64_t)1 << 61,
                                     ((int64_t)1 << 61) - 1, (int64_t)1 << 62,
                                     (int64_t)1 << 60, (int64_t)1 << 40, (int64_t)1 << 31 };
    int64_t *sz[3] = { &a->parts, &a->rows, &a->dim };
    int64_t count;
    switch (kind) {
    case GB_ARGS_NULL:
        *args_null = 1;
        break;
    case GB_PTR_NULL: {
        const unsigned k = pick(r, 3);
        if (k == 0)
            a->o_parts = NULL;
        else if (k == 1)
            a->lse_parts = NULL;
        else
            a->o = NULL;
        break;
    }
    case GB_SIZE:
        *sz[pick(r, 3)] = bad_sizes[pick(r, 4)];
        break;
    case GB_NEG_STRIDE:
        *merge_stride_field(a, pick(r, 6), &count) = neg[pick(r, 3)];
        break;
    case GB_OUT_SHORT: {
        const unsigned k = pick(r, 3);
        /* dim may hold an earlier plant's INT64_MIN: no dim - 1 there */
        a->o_out_stride = k == 0 ? 0 : k == 1 ? (a->dim > 0 ? a->dim - 1 : 0) : a->dim / 2;
        break;
    }
    case GB_LSE_OUT_ZERO:
        a->lse_out_stride = 0;
        break;
    case GB_HUGE_STRIDE: {
        const unsigned f = u8(r), v = u8(r);
        int64_t *s = merge_stride_field(a, f, &count);
        if (v & 8 && count > 1) {
            /* the smallest stride whose extent reaches 2^61 (bytes past
             * 2^63) or 2^61 - 1: the boundary of TOO_LARGE */
            u128 ext[4];
            const int64_t old = *s;
            *s = 0;
            merge_extents(a, ext);
            const u128 rest = ext[(f % 6) < 2 ? 0 : (f % 6) < 4 ? 1 : (f % 6) == 4 ? 2 : 3];
            const u128 target = ((u128)1 << 61) - (v & 1);
            *s = rest >= target ? old
                                : (int64_t)((target - rest + (u128)(count - 2)) / (u128)(count - 1));
        } else {
            *s = huge[v % 8];
        }
        break;
    }
    case GB_HUGE_SIZE: {
        const unsigned k = pick(r, 3), v = u8(r);
        *sz[k] = huge[v % 8];
        if (k == 2 && (v & 8))
            a->o_out_stride = a->dim;   /* past the stride rule, to the extents */
        break;
    }
    case GB_LSE_OUT_NULL: {
        static const int64_t junk[4] = { -5, INT64_MIN, INT64_MAX, 0 };
        a->lse_out = NULL;
        a->lse_out_stride = junk[pick(r, 4)];
        break;
    }
    default:
        break;
    }
}

static void print_merge(const attn_partials_merge_args *a, const unsigned bad[2], int args_null)
{
    fprintf(stderr,
            "MERGE parts=%lld rows=%lld dim=%lld o_parts=%s %lld/%lld lse_parts=%s %lld/%lld "
            "o=%s %lld lse_out=%s %lld bad=%u,%u%s\n",
            (long long)a->parts, (long long)a->rows, (long long)a->dim, a->o_parts ? "p" : "NULL",
            (long long)a->o_part_stride, (long long)a->o_row_stride,
            a->lse_parts ? "p" : "NULL", (long long)a->lse_part_stride,
            (long long)a->lse_row_stride, a->o ? "p" : "NULL", (long long)a->o_out_stride,
            a->lse_out ? "p" : "NULL", (long long)a->lse_out_stride, bad[0], bad[1],
            args_null ? " args=NULL" : "");
}

/* Strides of a partial buffer (O when tail = dim, lse when tail = 1). */
static void merge_layout(unsigned c, int64_t parts, int64_t rows, int64_t tail, int64_t *ps,
                         int64_t *rs)
{
    const int64_t pad = (c >> 4) & 3, extra = c >> 6;
    switch (c & 7) {
    case 0:
    case 1: /* part-major */
        *rs = tail + pad;
        *ps = rows * *rs + extra;
        break;
    case 2:
    case 3: /* interleaved within each row */
        *ps = tail + pad;
        *rs = parts * *ps + extra;
        break;
    case 4: /* one O_p for every part of a row */
        *ps = 0;
        *rs = tail + pad;
        break;
    case 5: /* one row for all rows of a part */
        *rs = 0;
        *ps = tail + pad;
        break;
    case 6: /* rows overlapping (stride below the row when tail > 1) */
        *rs = 1 + pad;
        *ps = rows * *rs + tail + extra;
        break;
    default: /* everything at one place */
        *ps = 0;
        *rs = 0;
        break;
    }
}

/* A successful call's outputs against a float64 merge of its inputs: per
 * row, NaN when an lse_p is NaN or +INFINITY; O 0 and lse -INFINITY when
 * every lse_p is -INFINITY; O_p and lse_p themselves (O bit for bit) when
 * one part contributes (its weight is exactly 1); otherwise within a
 * float rounding of the double result plus the double sums' error.
 * Everything outside the rows keeps the sentinel (and all of lout when
 * lse_out is NULL), and a second call writes the same bits. */
static void merge_check(const attn_partials_merge_args *a, const float *out, size_t n_out,
                        const float *lout, size_t n_lout)
{
    const int64_t P = a->parts, R = a->rows, D = a->dim;
    unsigned char *wo = calloc(n_out, 1), *wl = calloc(n_lout, 1);
    if (!wo || !wl)
        abort();
    for (int64_t i = 0; i < R; i++) {
        const float *got = out + i * a->o_out_stride;
        memset(wo + i * a->o_out_stride, 1, (size_t)D);
        float gl = 0.0f;
        if (a->lse_out) {
            gl = lout[i * a->lse_out_stride];
            wl[i * a->lse_out_stride] = 1;
        }
        double mx = -INFINITY;
        int nan = 0, nf = 0;
        int64_t pf = 0;
        for (int64_t p = 0; p < P; p++) {
            const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
            if (l != l || l == INFINITY) {
                nan = 1;
            } else if (l != -INFINITY) {
                nf++;
                pf = p;
                mx = l > mx ? l : mx;
            }
        }
        if (nan) {
            for (int64_t j = 0; j < D; j++)
                if (!isnan(got[j]))
                    FAIL("merge row %lld: an lse_p is NaN or +inf, O[%lld] = %g", (long long)i,
                         (long long)j, got[j]);
            if (a->lse_out && !isnan(gl))
                FAIL("merge row %lld: an lse_p is NaN or +inf, lse = %g", (long long)i, gl);
            continue;
        }
        if (nf == 0) {
            for (int64_t j = 0; j < D; j++)
                if (got[j] != 0.0f)
                    FAIL("merge row %lld: every part empty, O[%lld] = %g", (long long)i,
                         (long long)j, got[j]);
            if (a->lse_out && gl != -INFINITY)
                FAIL("merge row %lld: every part empty, lse = %g", (long long)i, gl);
            continue;
        }
        const float *o1 = a->o_parts + pf * a->o_part_stride + i * a->o_row_stride;
        const float l1 = a->lse_parts[pf * a->lse_part_stride + i * a->lse_row_stride];
        if (nf == 1) {
            if (memcmp(got, o1, (size_t)D * sizeof(float)))
                FAIL("merge row %lld: one contributing part (%lld), O not bitwise O_p",
                     (long long)i, (long long)pf);
            if (a->lse_out && gl != l1)
                FAIL("merge row %lld: one contributing part, lse %.9g, lse_p %.9g", (long long)i,
                     gl, l1);
            continue;
        }
        double s = 0.0;
        for (int64_t p = 0; p < P; p++) {
            const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
            if (l != -INFINITY)
                s += exp((double)l - mx);
        }
        const double lref = mx + log(s);
        const double tol_l = 0x1p-24 * fabs(lref) + 0x1p-50 * (fabs(mx) + log(s)) + 1e-300;
        if (a->lse_out && !(fabs((double)gl - lref) <= tol_l))
            FAIL("merge row %lld: lse %.9g, float64 %.17g (tolerance %.3g)", (long long)i, gl,
                 lref, tol_l);
        for (int64_t j = 0; j < D; j++) {
            double ref = 0.0, mag = 0.0;
            for (int64_t p = 0; p < P; p++) {
                const float l = a->lse_parts[p * a->lse_part_stride + i * a->lse_row_stride];
                if (l == -INFINITY)
                    continue;
                const double c = exp((double)l - mx) / s;
                const double v = a->o_parts[p * a->o_part_stride + i * a->o_row_stride + j];
                ref += c * v;
                mag += c * fabs(v);
            }
            const double tol = 0x1p-24 * fabs(ref) + 0x1p-48 * mag + 0x1p-149;
            if (!(fabs((double)got[j] - ref) <= tol))
                FAIL("merge row %lld col %lld: %.9g, float64 %.17g (tolerance %.3g)",
                     (long long)i, (long long)j, got[j], ref, tol);
        }
    }
    for (size_t x = 0; x < n_out; x++)
        if (!wo[x] && fbits(out[x]) != SENT)
            FAIL("merge: O element %zu outside the rows was written", x);
    for (size_t x = 0; x < n_lout; x++)
        if (!wl[x] && fbits(lout[x]) != SENT)
            FAIL("merge: lse element %zu outside the rows was written", x);
    /* The same call again into fresh buffers: the same bits everywhere. */
    float *out2 = xmalloc(n_out * sizeof(float)), *lout2 = xmalloc(n_lout * sizeof(float));
    const float sent = sentinel();
    for (size_t x = 0; x < n_out; x++)
        out2[x] = sent;
    for (size_t x = 0; x < n_lout; x++)
        lout2[x] = sent;
    attn_partials_merge_args a2 = *a;
    a2.o = out2;
    a2.lse_out = a->lse_out ? lout2 : NULL;
    if (attn_partials_merge(&a2) != ATTN_OK)
        FAIL("merge: the second call failed");
    if (memcmp(out, out2, n_out * sizeof(float)) || memcmp(lout, lout2, n_lout * sizeof(float)))
        FAIL("merge: a second call gave other bits");
    free(out2);
    free(lout2);
    free(wo);
    free(wl);
}
/* The merge call's state from stage to stage. */
typedef struct merge_case {
    attn_partials_merge_args a;
    unsigned bad[2];                      /* GB_* */
    int args_null;
    float *oin, *lin, *out, *lout;        /* O_p, lse_p, O, lse */
    size_t n_oin, n_lin, n_out, n_lout;
    float *oin_copy, *lin_copy;
} merge_case;

/* The valid problem's sizes and layouts, its buffers: inputs NaN
 * wherever nothing that is read lands, outputs the sentinel with a tail;
 * the lse_p and O_p values of decoded magnitudes and rates. */
static void merge_decode(rd *r, merge_case *C)
{
    static const double lse_mag[8] = { 1.0, 5.0, 30.0, 100.0, 1e4, 1e30, 3.4e38, 0.0 };
    static const double o_mag[4] = { 1.0, 1e-3, 1e30, 1e-40 };
    C->bad[0] = C->bad[1] = GB_NONE;
    decode_bad(r, u8(r), GB_COUNT, C->bad);
    const int64_t parts = 1 + pick(r, 6), rows = 1 + pick(r, 12);
    const unsigned dc = u8(r);
    const int64_t dim = dc >= 240 ? 250 + (dc - 240) : 1 + dc % 40;
    int64_t ops, ors, lps, lrs;
    merge_layout(u8(r), parts, rows, dim, &ops, &ors);
    merge_layout(u8(r), parts, rows, 1, &lps, &lrs);
    const unsigned oc = u8(r);
    const int64_t oos = dim + (oc & 3);
    const unsigned lo_kind = (oc >> 2) & 3;
    const int64_t los = lo_kind == 1 ? 1 : lo_kind == 2 ? 2 + ((oc >> 4) & 3) : rows == 1 ? 0 : 1;
    const unsigned vc = u8(r), sc = u8(r);
    prng g = { (uint64_t)u32(r) * 0x9e3779b97f4a7c15ull + 0x5eed };

    attn_partials_merge_args *a = &C->a;
    *a = (attn_partials_merge_args){
        .parts = parts, .rows = rows, .dim = dim,
        .o_part_stride = ops, .o_row_stride = ors,
        .lse_part_stride = lps, .lse_row_stride = lrs,
        .o_out_stride = oos, .lse_out_stride = los,
    };
    float lse_dummy;
    a->lse_out = lo_kind ? &lse_dummy : NULL;   /* for the extents only */
    u128 ext[4];
    merge_extents(a, ext);
    C->n_oin = (size_t)ext[0], C->n_lin = (size_t)ext[1];
    C->n_out = (size_t)ext[2] + TAILN, C->n_lout = (size_t)ext[3] + TAILN;
    float *oin = C->oin = xmalloc(C->n_oin * sizeof(float));
    float *lin = C->lin = xmalloc(C->n_lin * sizeof(float));
    C->out = xmalloc(C->n_out * sizeof(float));
    C->lout = xmalloc(C->n_lout * sizeof(float));
    for (size_t x = 0; x < C->n_oin; x++)
        oin[x] = NAN;
    for (size_t x = 0; x < C->n_lin; x++)
        lin[x] = NAN;
    const double lm = lse_mag[vc & 7], om = o_mag[(vc >> 3) & 3];
    const double p_ninf = (double)(sc & 7) / 8.0;
    const double p_nan = (sc & 8) ? 1.0 / 32.0 : 0.0, p_pinf = (sc & 16) ? 1.0 / 32.0 : 0.0;
    const int empty_rows = (sc >> 5) & 3;   /* every (4 - k)-th row all -inf; 0: none */
    for (int64_t p = 0; p < parts; p++)
        for (int64_t i = 0; i < rows; i++) {
            const double u = pr_unit(&g);
            float v;
            if ((empty_rows && i % (4 - empty_rows) == 0) || u < p_ninf)
                v = -INFINITY;
            else if (u < p_ninf + p_nan)
                v = NAN;
            else if (u < p_ninf + p_nan + p_pinf)
                v = INFINITY;
            else
                v = (vc & 0x40) && pr_unit(&g) < 0.25 ? -0.0f : pr_val(&g, lm);
            lin[p * lps + i * lrs] = v;
        }
    /* O_p rows of the parts that are read (lse_p as it ended up, views
     * may share it) get finite values; -0 and denormals with vc bit 7. */
    for (int64_t p = 0; p < parts; p++)
        for (int64_t i = 0; i < rows; i++) {
            if (lin[p * lps + i * lrs] == -INFINITY)
                continue;
            float *row = oin + p * ops + i * ors;
            for (int64_t j = 0; j < dim; j++)
                row[j] = (vc & 0x80) && pr_unit(&g) < 0.1 ? -0.0f : pr_val(&g, om);
        }
    C->oin_copy = xmalloc(C->n_oin * sizeof(float));
    C->lin_copy = xmalloc(C->n_lin * sizeof(float));
    memcpy(C->oin_copy, oin, C->n_oin * sizeof(float));
    memcpy(C->lin_copy, lin, C->n_lin * sizeof(float));
    const float sent = sentinel();
    for (size_t x = 0; x < C->n_out; x++)
        C->out[x] = sent;
    for (size_t x = 0; x < C->n_lout; x++)
        C->lout[x] = sent;
    a->o_parts = oin;
    a->lse_parts = lin;
    a->o = C->out;
    a->lse_out = lo_kind ? C->lout : NULL;
}

/* Sizes or strides a plant changed but the rules accept: only what fits
 * the buffers and a bounded amount of work is called. */
static int merge_skip(const merge_case *C)
{
    const attn_partials_merge_args *a = &C->a;
    u128 e2[4];
    merge_extents(a, e2);
    return e2[0] > C->n_oin || e2[1] > C->n_lin || e2[2] > C->n_out - TAILN ||
           (a->lse_out && e2[3] > C->n_lout - TAILN) ||
           (u128)(uint64_t)a->parts * (uint64_t)a->rows * (uint64_t)a->dim > ((u128)1 << 22);
}

/* The call and its checks: the exact status, the inputs unchanged,
 * nothing written on error, else merge_check. */
static void merge_run(const merge_case *C, attn_status want)
{
    const attn_status st = attn_partials_merge(C->args_null ? NULL : &C->a);
    expect e = { want == ATTN_OK ? 0u : BIT(want), 0u };
    check_status("attn_partials_merge", st, e);
    if (st != want)
        FAIL("attn_partials_merge returned %s, the rules say %s", st_name(st),
             st_name(want));
    if (memcmp(C->oin, C->oin_copy, C->n_oin * sizeof(float)) ||
        memcmp(C->lin, C->lin_copy, C->n_lin * sizeof(float)))
        FAIL("attn_partials_merge changed its inputs");
    if (st != ATTN_OK) {
        for (size_t x = 0; x < C->n_out; x++)
            if (fbits(C->out[x]) != SENT)
                FAIL("attn_partials_merge: %s, but O element %zu was written", st_name(st), x);
        for (size_t x = 0; x < C->n_lout; x++)
            if (fbits(C->lout[x]) != SENT)
                FAIL("attn_partials_merge: %s, but lse element %zu was written", st_name(st),
                     x);
        counts[N_MERGE_ERROR]++;
    } else {
        merge_check(&C->a, C->out, C->n_out, C->lout, C->n_lout);
        counts[N_MERGE_CHECKED]++;
    }
}

void fuzz_merge(rd *r)
{
    merge_case C;
    memset(&C, 0, sizeof C);
    /* decode */
    merge_decode(r, &C);
    /* plant */
    merge_plant(r, C.bad[0], &C.a, &C.args_null);
    merge_plant(r, C.bad[1], &C.a, &C.args_null);
    const attn_status want = expect_merge(C.args_null ? NULL : &C.a);
    if (verbose)
        print_merge(&C.a, C.bad, C.args_null);
    /* run, check */
    if (want == ATTN_OK && merge_skip(&C))
        counts[N_MERGE_SKIPPED]++;
    else
        merge_run(&C, want);
    free(C.oin);
    free(C.lin);
    free(C.out);
    free(C.lout);
    free(C.oin_copy);
    free(C.lin_copy);
}
