#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn_config.h"
#include "attn.h"
#include "kernels.h"
#include <stddef.h>
#include <stdint.h>

#define ATTN_ALIGNMENT 64

/* Blocking.  Fixed by the shape only (never by the thread count), which is
 * what makes results bitwise identical for any number of threads. */
#define ATTN_BLOCK_Q 128   /* query rows per work item */
#define ATTN_TILE_K 512    /* keys per score tile */

struct attn_sdpa_plan {
    attn_sdpa_desc d;
    float scale;              /* resolved */
    int64_t window_left;      /* clamped to [-1, n + m] */
    int64_t window_right;
    int nthreads;             /* resolved, >= 1 */
    int64_t group;            /* Hq / Hkv */
    int64_t bq, bk;           /* query block rows, key tile columns */
    int64_t nqblocks;         /* ceil(n / bq) */
    int64_t nitems;           /* B * Hq * nqblocks */
    size_t ws_thread;         /* workspace bytes per thread (x64) */
    size_t ws_bytes;          /* nthreads * ws_thread */
    const attn_kernels *kern;
};

int attn_max_threads(void);

#endif
