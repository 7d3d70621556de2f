/* The SDPA plan: what plan.c resolves once and forward.c executes. */
#ifndef ATTN_SDPA_H
#define ATTN_SDPA_H

#include "core/core.h"
#include "core/exec.h"
#include "core/view.h"
#include "sdpa/visible.h"
#include "kernels/kernels.h"
#include "kernels/decode.h"
#include "kernels/convert.h"
#include "kernels/quant.h"
#include "kernels/gemm.h"

/* Blocking.  Fixed by the shape only (never by the thread count), which is
 * what makes results bitwise identical for any number of threads. */
#define ATTN_BLOCK_Q 512     /* query rows per work item */
#define ATTN_TILE_K 512      /* keys per score tile */
#define ATTN_SUB_Q 64        /* rows per GEMM on tiles the rows see unevenly
                                (causal diagonal, window edges) */
#define ATTN_TILE_SUB_Q 16   /* the same on the tile engine, whose kernels
                                lose little on 16 rows: each sub-block
                                computes less of the masked triangle (S2
                                1.04x against 64, 32 1.02x; 8 no faster) */
#define ATTN_TILE_ROWS 96    /* tile engine: rows from Q K^T to P V at a time */
#define ATTN_STACK_MAX 512   /* most rows of a GQA group stacked in a GEMM */
#define ATTN_SPLIT_ITEMS 16  /* split the keys of short queries until there
                                are this many work items */
#define ATTN_SPLIT_MIN_KEYS 512
#define ATTN_SPLIT_MAX_BYTES ((size_t)16 << 20)
#define ATTN_DECODE_MAX_Q 16 /* most queries of a plan on the decode path */
#define ATTN_DECODE_TILE 1024 /* most keys per score tile on the decode path */
#define ATTN_DECODE_TILE_MIN 256 /* fewest (plan.c: decode_tile) */
#define ATTN_DECODE_RUN_ITEMS 4 /* decode items a thread takes at once (forward.c) */
#define ATTN_DECODE_SCORE_BYTES ((uint64_t)64 << 10)  /* a decode tile's score rows */
#define ATTN_DECODE_TILE_VALUES ((uint64_t)128 << 10)  /* a decode tile's K or V rows */
#define ATTN_AHEAD_MIN_KV (64 << 10)  /* the tile engine's look-ahead runs when a
                                         (batch, head)'s K and V take this many
                                         bytes or more, */
#define ATTN_AHEAD_MIN_ALL (32 << 20) /* or Q, K, V and O together do (smaller
                                         ones come from cache: S7's 16 KiB
                                         items ran 0.90-0.93x with it at B = 32,
                                         8 MiB, and 1.07-1.11x at B = 128) */

/* Dropout (dropout.c): attn_dropout (kernels.h) from (p, seed, offset);
 * the rows go through the plan's kernel table (dropout_row,
 * dropout_bwd_row, dropout_keep_row). */
void attn_dropout_init(attn_dropout *dr, double p, uint64_t seed, uint64_t offset);

/* Sparse attention (sparse.c): global tokens and block layouts.  A sparse
 * plan runs its own item loop; a plan without them runs forward.c's path
 * unchanged. */
#define ATTN_SPARSE_ROWS 64  /* most query rows per sparse work item */
#define ATTN_GATHER_SHORT 16 /* segments shorter than this are gathered */
#define ATTN_GATHER_MAX_DIM 1024

static inline int attn_sdpa_is_sparse(const attn_sdpa_desc *d)
{
    return d->use_global_k || d->use_global_q || d->block_size != 0;
}

/* Rows of a sparse work item: min(block_size, 64) with a layout (so that
 * an item lies in one block row), 64 otherwise. */
static inline int64_t attn_sparse_rows(const attn_sdpa_desc *d)
{
    return d->block_size && d->block_size < ATTN_SPARSE_ROWS ? d->block_size : ATTN_SPARSE_ROWS;
}

/* The dense forward's products {Q K^T, P V} of one engine (forward.c):
 * the decode kernels, the tile engine or the BLAS, chosen at plan time. */
typedef struct attn_sdpa_products attn_sdpa_products;
const attn_sdpa_products *attn_sdpa_products_for(int decode, int tile, int bf, int qk8);

struct attn_sdpa_plan {
    attn_sdpa_desc d;
    attn_exec x;              /* kernels, engine, BLAS hooks, threads (core/exec.h) */
    float scale;              /* resolved */
    int64_t window_left;      /* clamped to [-1, n + m] */
    int64_t window_right;
    int64_t group;            /* g = Hq / Hkv */

    /* What the forward does (decided at plan time, never per call). */
    int dropout;              /* dropout_p > 0 (p = 0 runs the plain path) */
    attn_dropout drop;
    int64_t qpos, kpos;       /* the global position of row 0 and key 0
                               * (positions; else 0): dropout's (i, j) */
    int softmax_only;         /* no bias, mask, dropout or probabilities: rows that see
                               * a whole tile go through kern->softmax_rows */
    int alike;                /* every work item costs about the same (no window,
                               * no lengths): contiguous runs per thread */
    int ahead;                /* tile engine: each tile asks for the next tile's
                               * rows as it computes, an item's last tile for
                               * the next item's first (attn_ahead) */
    int tile;                 /* x.tile off the decode path: the products run on
                               * the tile's K transposed (ws.kt, dk x ldt) */
    int decode;               /* the decode kernels run the products */
    int kv_copy;              /* the sgemm path with F16/BF16 or paged K/V widens
                               * (gathers) each tile into ws.kbuf / ws.vbuf
                               * (sparse: the segments of a tile) */
    int bf;                   /* BF16 products (Q, K, V all BF16 on the tile
                               * engine): K and V packed in pairs (ws.kt,
                               * ws.vbuf), P rounded to BF16 in place */
    int qw;                   /* 16-bit Q otherwise (or the decode path's
                               * fp32 Q that would not stack): an item's Q
                               * rows widened into ws.qbuf ([g][rows][dk]) */
    int ow;                   /* 16-bit O (or the decode path's fp32 O that
                               * would not stack): an item's O rows
                               * accumulated in ws.obuf ([g][rows][dv]),
                               * rounded (copied) at its end */
    int sparse;               /* global tokens or a layout: sparse.c's items */
    const attn_sdpa_products *prod;   /* attn_sdpa_products_for(decode, tile, bf, qk_int8) */

    /* Blocking, fixed by the shape only. */
    int64_t bq, bk;           /* query block rows, key tile columns */
    int64_t nqblocks;         /* ceil(n / bq) */
    int64_t nchunks;          /* key chunks (split-K for short queries) */
    int64_t chunk;            /* keys per chunk */
    int64_t nitems;           /* B * Hkv * nqblocks * nchunks */
    /* Stacking the g query heads of a group as the rows of one GEMM: the
     * leading dimensions of Q and O seen that way (0 = not possible). */
    int64_t stack_ldq, stack_ldo;
    int64_t vrows;            /* virtual rows per item: g * min(n, bq) */
    int64_t srows;            /* rows of the score tile */
    int64_t lds, ldt;         /* leading dims of the score tile and of K^T */

    /* Sparse plans (sparse.c): items (b, query head, block of rows rows),
     * run heaviest first from an order built per execute.  Items [0, nreg)
     * are the ordinary ones, B * Hq * nrb; with global queries as many
     * global-query items follow (nitems = 2 nreg), whose gathered rows'
     * indices (bq int64 after the ranges), Q rows (rows x dk) and O rows
     * (rows x dv, at ws.qg) live in the thread's slice.  Short segments
     * (scattered global keys) are gathered into a copy of their K and V
     * rows (bk x dk and bk x dv floats at ws.kbuf and ws.vbuf) when dk +
     * dv <= ATTN_GATHER_MAX_DIM (gather).  16-bit tensors are widened
     * (qw, ow, kv_copy): a group's Q rows into ws.qbuf, its O rows
     * accumulated in ws.obuf, and every segment's K (V) rows, when K (V)
     * is 16-bit, into ws.kbuf (ws.vbuf) at their tile columns. */
    struct {
        int64_t rows, nrb, nb, mb, nreg;
        int gather;
    } sp;

    /* The workspace (laid out with core's attn_carve): per thread a slice
     * of `thread` bytes at tid * thread (the score tile at 0, then the
     * offsets below), then the shared parts after every slice. */
    struct {
        size_t thread;        /* bytes per thread's slice */
        size_t ranges;        /* the rows' visible ranges */
        size_t state;         /* the rows' running max, sum, correction */
        size_t kbuf, vbuf;    /* kv_copy: the tile's K and V as floats (sparse:
                               * also the gathered short segments) */
        size_t kt;            /* tile engine: K^T of the tile (BF16: pairs) */
        size_t qbuf, obuf;    /* qw, ow: the item's Q and O rows in fp32 */
        size_t seg;           /* sparse: the tile's segments */
        size_t qg;            /* sparse: the global queries' Q and O rows */
        size_t order;         /* sparse: offset of the shared item order */
        size_t part;          /* split-K: bytes of the partial results (shared) */
        size_t bytes;         /* the whole workspace */
    } ws;
};

/* Execute-time accessors shared by the dense and the sparse forward: batch
 * b's geometry (its query and key lengths within the call, the diagonal's
 * shift; visible.h), and the rows of O, P and the logsumexp. */
static inline attn_geom attn_sdpa_geom(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                       int64_t b)
{
    return attn_geom_of(&p->d, a->q_lens, a->kv_lens, b);
}

static inline int64_t attn_sdpa_q_len(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                      int64_t b)
{
    return attn_sdpa_geom(p, a, b).qlen;
}

static inline int64_t attn_sdpa_kv_len(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                       int64_t b)
{
    return attn_sdpa_geom(p, a, b).kvlen;
}

static inline float *attn_sdpa_o_row(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                     int64_t b, int64_t h, int64_t i)
{
    return ATTN_VIEW_AT(a->o, p->d.o, b, h, i);
}

/* Row (b, h, i) of O from its fp32 values: rounded to a 16-bit O (F16 by
 * the conversion table, BF16 by the BF16 table's rounding), copied to an
 * fp32 one (forward.c; sparse.c uses it too). */
void attn_sdpa_store_orow(const attn_sdpa_plan *p, const attn_sdpa_args *a, int64_t b, int64_t h,
                          int64_t i, const float *row);

static inline float *attn_sdpa_probs_row(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                         int64_t b, int64_t h, int64_t i)
{
    return ATTN_VIEW_AT(a->probs, p->d.probs, b, h, i);
}

static inline float *attn_sdpa_lse_at(const attn_sdpa_plan *p, const attn_sdpa_args *a,
                                      int64_t b, int64_t h, int64_t i)
{
    return ATTN_VIEW_AT(a->lse, p->d.lse, b, h, i);
}

/* The sparse forward (sparse.c): execute's work for a sparse plan. */
void attn_sparse_forward(const attn_sdpa_plan *p, const attn_sdpa_args *a, void *ws);

/* Plan-time checks shared by the forward and backward plans (plan.c). */
attn_status attn_sdpa_validate(const attn_sdpa_desc *d);
/* The K/V part of those checks (shapes, views, storage types, paging),
 * shared with attn_kv_append. */
attn_status attn_kv_validate(const attn_sdpa_desc *d);

/* Bytes of one stored element of F32, F16 or BF16. */
static inline int64_t attn_dtype_size(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 ? 4 : 2;
}

#endif
