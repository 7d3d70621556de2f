/* The KV cache's write side: attn_kv_append (contiguous or paged, any
 * storage type).  Appending is a
 * copy of a few rows per call, so it runs on the calling thread; every
 * check is done before the first write, as for every other call. */
#include "kernels/convert.h"
#include "sdpa/sdpa.h"
#include <string.h>

/* Rows to append to sequence b. */
static int64_t new_len(const attn_kv_append_args *a, int64_t b)
{
    return a->new_lens ? a->new_lens[b] : a->t;
}

static attn_status append_check(const attn_sdpa_desc *d, const attn_kv_append_args *a)
{
    attn_status st = attn_kv_validate(d);
    if (st != ATTN_OK)
        return st;
    const int paged = d->kv_block_size > 0;
    if (!a->k_cache || !a->v_cache || !a->kv_lens || !a->k_new || !a->v_new)
        return ATTN_ERR_NULL_ARGUMENT;
    if (paged && !a->block_table)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!paged && a->block_table)
        return ATTN_ERR_ARGUMENT_MISMATCH;
    if (a->t < 1)
        return ATTN_ERR_BAD_SIZE;
    if ((st = attn_check_view(&a->k_new_view, d->batch, d->kv_heads, a->t, d->qk_dim, 0)) !=
        ATTN_OK)
        return st;
    if ((st = attn_check_view(&a->v_new_view, d->batch, d->kv_heads, a->t, d->v_dim, 0)) !=
        ATTN_OK)
        return st;
    /* Lengths first, for every sequence: the table check below needs them.
     * kv_len <= INT32_MAX (attn_kv_validate), so the sums cannot overflow. */
    for (int64_t b = 0; b < d->batch; b++) {
        const int64_t len = a->kv_lens[b], nl = new_len(a, b);
        if (len < 0 || nl < 0 || nl > a->t || len + nl > d->kv_len)
            return ATTN_ERR_BAD_LENGTH;
    }
    if (!paged)
        return ATTN_OK;
    /* Only the entries of blocks receiving a token are read.  len + nl <=
     * kv_len <= kv_max_blocks x bs, so no index passes the table's row. */
    const int64_t bs = d->kv_block_size;
    for (int64_t b = 0; b < d->batch; b++) {
        const int64_t len = a->kv_lens[b], nl = new_len(a, b);
        if (nl == 0)
            continue;
        const int32_t *row = a->block_table + b * d->kv_max_blocks;
        for (int64_t J = len / bs; J <= (len + nl - 1) / bs; J++)
            if (row[J] < 0 || row[J] >= d->kv_num_blocks)
                return ATTN_ERR_BAD_BLOCK_TABLE;
    }
    return ATTN_OK;
}

/* count rows of dim values: src rows src_ld floats apart, dst rows dst_ld
 * elements of type apart (a whole number of blocks for the block types);
 * one call when both are dense. */
static void put_rows(const attn_cvt_kernels *cvt, attn_dtype type, void *dst, int64_t dst_ld,
                     const float *src, int64_t src_ld, int64_t dim, int64_t count)
{
    if (dst_ld == dim && src_ld == dim) {
        dim *= count;
        count = 1;
    }
    for (int64_t r = 0; r < count; r++) {
        const float *s = src + r * src_ld;
        attn_store_values(cvt, (int)type, s, (char *)dst + attn_st_bytes(type, r * dst_ld), dim);
    }
}

/* Element pointer into a cache of the given storage type. */
static void *elem(void *base, attn_dtype type, int64_t off)
{
    return (char *)base + attn_st_bytes(type, off);
}

/* Sequence b's new rows of one tensor (K or V) for every head: runs of rows
 * that stay in one block (paged) or all of them (contiguous).  Every offset
 * lies inside a view attn_check_view accepted, so none overflows. */
static void append_tensor(const attn_sdpa_desc *d, const attn_kv_append_args *a,
                          const attn_cvt_kernels *cvt, attn_dtype type, void *cache,
                          const attn_view *cv, const float *src, const attn_view *sv,
                          int64_t dim, int64_t b)
{
    const int64_t len = a->kv_lens[b], nl = new_len(a, b), bs = d->kv_block_size;
    for (int64_t h = 0; h < d->kv_heads; h++) {
        const float *s = ATTN_VIEW_HEAD(src, *sv, b, h);
        for (int64_t r = 0; r < nl;) {
            const int64_t j = len + r;
            int64_t run = nl - r, off;
            if (bs > 0) {
                const int64_t blk = a->block_table[b * d->kv_max_blocks + j / bs];
                if (run > bs - j % bs)
                    run = bs - j % bs;
                off = blk * cv->batch + h * cv->head + (j % bs) * cv->seq;
            } else {
                off = b * cv->batch + h * cv->head + j * cv->seq;
            }
            put_rows(cvt, type, elem(cache, type, off), cv->seq, s + r * sv->seq, sv->seq, dim,
                     run);
            r += run;
        }
    }
}

attn_status attn_kv_append_args_init(attn_kv_append_args *args)
{
    if (!args)
        return ATTN_ERR_NULL_ARGUMENT;
    memset(args, 0, sizeof *args);
    const attn_view unset = { ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET, ATTN_STRIDE_UNSET };
    args->k_new_view = args->v_new_view = unset;
    return ATTN_OK;
}

attn_status attn_kv_append(const attn_sdpa_desc *desc, const attn_kv_append_args *args)
{
    if (!desc || !args)
        return ATTN_ERR_NULL_ARGUMENT;
    if (!ATTN_RESERVED_NULL(args))
        return ATTN_ERR_BAD_OPTION;
    attn_status st = append_check(desc, args);
    if (st != ATTN_OK)
        return st;
    const attn_cvt_kernels *cvt = attn_cvt_select();
    for (int64_t b = 0; b < desc->batch; b++) {
        append_tensor(desc, args, cvt, desc->k_type, args->k_cache, &desc->k, args->k_new,
                      &args->k_new_view, desc->qk_dim, b);
        append_tensor(desc, args, cvt, desc->v_type, args->v_cache, &desc->v, args->v_new,
                      &args->v_new_view, desc->v_dim, b);
    }
    /* Last, once every row of every sequence is in. */
    for (int64_t b = 0; b < desc->batch; b++)
        args->kv_lens[b] = (int32_t)(args->kv_lens[b] + new_len(args, b));
    return ATTN_OK;
}
