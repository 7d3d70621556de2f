/* attn_partials_merge: the logsumexp combine of attention computed over
 * disjoint key sets (attn.h, "Decoding and the KV cache").
 *
 * Per row, with mx the largest lse_p:
 *
 *   w_p = exp(lse_p - mx)   (w = 1 for the largest part, 0 < w_p <= 1)
 *   s   = sum_p w_p         (1 <= s <= parts)
 *   lse = mx + log(s),      O = sum_p (w_p / s) O_p
 *
 * Everything after the read of the inputs runs in double, in part order,
 * with one rounding to float at the end: the weights and their sum are
 * then exact to about 1e-16, so the merged result is as accurate as the
 * partials it is made of (a float accumulation would add up to `parts`
 * roundings of its own), and the cost is a few exp() per row plus
 * parts x dim multiply-adds, far below the attention that made the parts.
 * No allocation: the double accumulators of a row live on the stack, a
 * chunk of columns at a time.  It runs on the calling thread only and the
 * order of every operation is fixed by the arguments, so the result is a
 * pure function of the inputs. */
#include "core/core.h"
#include <math.h>
#include <string.h>

/* Columns accumulated at a time (2 KiB of doubles on the stack). */
#define MERGE_CHUNK 256

/* Elements spanned by `count` positions `stride` apart plus a last run of
 * `tail` elements: (count - 1) * stride + tail, checked. */
static uint64_t extent(int64_t count, int64_t stride, uint64_t base, int *ok)
{
    return attn_size_add(attn_size_mul((uint64_t)(count - 1), (uint64_t)stride, ok), base, ok);
}

/* The element extent of every buffer must fit an int64_t index and its
 * byte count a size_t (attn_size_*), so that every offset formed below is
 * representable. */
static attn_status check_extents(const attn_partials_merge_args *a)
{
    int ok = 1;
    const uint64_t o_in = extent(a->parts, a->o_part_stride,
                                 extent(a->rows, a->o_row_stride, (uint64_t)a->dim, &ok), &ok);
    const uint64_t lse_in = extent(a->parts, a->lse_part_stride,
                                   extent(a->rows, a->lse_row_stride, 1, &ok), &ok);
    const uint64_t o_out = extent(a->rows, a->o_out_stride, (uint64_t)a->dim, &ok);
    attn_size_mul(o_in, sizeof(float), &ok);
    attn_size_mul(lse_in, sizeof(float), &ok);
    attn_size_mul(o_out, sizeof(float), &ok);
    if (a->lse_out)
        attn_size_mul(extent(a->rows, a->lse_out_stride, 1, &ok), sizeof(float), &ok);
    return ok ? ATTN_OK : ATTN_ERR_TOO_LARGE;
}

static attn_status check_args(const attn_partials_merge_args *a)
{
    if (!a || !a->o_parts || !a->lse_parts || !a->o)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_ZERO(a))
        return ATTN_ERR_BAD_OPTION;
    if (a->parts <= 0 || a->rows <= 0 || a->dim <= 0)
        return ATTN_ERR_BAD_SIZE;
    if (a->o_part_stride < 0 || a->o_row_stride < 0 || a->lse_part_stride < 0 ||
        a->lse_row_stride < 0 || a->o_out_stride < a->dim)
        return ATTN_ERR_BAD_STRIDE;
    /* The merged lse is an output view with rows of one element: its
     * stride may be 0 only when there is a single row (the Tensor views
     * rule for the logsumexp).  Not read when lse_out is NULL. */
    if (a->lse_out && (a->lse_out_stride < 0 || (a->lse_out_stride == 0 && a->rows > 1)))
        return ATTN_ERR_BAD_STRIDE;
    return check_extents(a);
}

/* One output row.  lse_r[p * lse_part_stride] are the row's lse_p and
 * o_r + p * o_part_stride its O_p; returns the merged lse. */
static float merge_row(const attn_partials_merge_args *a, const float *o_r, const float *lse_r,
                       float *out)
{
    const int64_t parts = a->parts, dim = a->dim;
    /* The largest lse_p, and whether the row is NaN: a NaN lse_p, or
     * +INFINITY, which attn_sdpa never writes (a finite max of scores plus
     * the log of a sum in [1, m]) and which leaves every weight exp(x -
     * inf) undefined. */
    float mx = -INFINITY;
    int bad = 0;
    for (int64_t p = 0; p < parts; p++) {
        const float l = lse_r[p * a->lse_part_stride];
        bad |= l != l || l == INFINITY;
        mx = l > mx ? l : mx;
    }
    if (bad) {
        for (int64_t j = 0; j < dim; j++)
            out[j] = NAN;
        return NAN;
    }
    if (mx == -INFINITY) {
        /* No part saw a key: the row of attn_sdpa with nothing visible. */
        for (int64_t j = 0; j < dim; j++)
            out[j] = 0.0f;
        return -INFINITY;
    }
    double sum = 0.0;
    for (int64_t p = 0; p < parts; p++) {
        const float l = lse_r[p * a->lse_part_stride];
        if (l != -INFINITY)
            sum += exp((double)l - (double)mx);
    }
    /* Column chunks; in each, the first part that saw a key initializes
     * the accumulators (c * O, not 0 + c * O, so that parts = 1, where
     * c = 1, reproduces O_p bit for bit, -0 included) and the others add
     * on in part order. */
    for (int64_t j0 = 0; j0 < dim; j0 += MERGE_CHUNK) {
        const int64_t nj = dim - j0 < MERGE_CHUNK ? dim - j0 : MERGE_CHUNK;
        double acc[MERGE_CHUNK];
        int first = 1;
        for (int64_t p = 0; p < parts; p++) {
            const float l = lse_r[p * a->lse_part_stride];
            if (l == -INFINITY)
                continue;   /* O_p is not read: it may hold anything */
            const double c = exp((double)l - (double)mx) / sum;
            const float *op = o_r + p * a->o_part_stride + j0;
            if (first)
                for (int64_t j = 0; j < nj; j++)
                    acc[j] = c * (double)op[j];
            else
                for (int64_t j = 0; j < nj; j++)
                    acc[j] += c * (double)op[j];
            first = 0;
        }
        for (int64_t j = 0; j < nj; j++)
            out[j0 + j] = (float)acc[j];
    }
    /* sum == 1 when no other part weighs in at double precision: then lse
     * is mx itself (mx + 0 would turn an lse of -0 into +0). */
    return sum == 1.0 ? mx : (float)((double)mx + log(sum));
}

ATTN_DEFINE_ZERO_INIT(attn_partials_merge_args_init, attn_partials_merge_args)

attn_status attn_partials_merge(const attn_partials_merge_args *args)
{
    const attn_status st = check_args(args);
    if (st != ATTN_OK)
        return st;
    for (int64_t r = 0; r < args->rows; r++) {
        const float lse = merge_row(args, args->o_parts + r * args->o_row_stride,
                                    args->lse_parts + r * args->lse_row_stride,
                                    args->o + r * args->o_out_stride);
        if (args->lse_out)
            args->lse_out[r * args->lse_out_stride] = lse;
    }
    return ATTN_OK;
}
