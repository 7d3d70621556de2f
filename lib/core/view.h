/* Tensor views (attn.h, "Tensor views"): the plan-time rules every path
 * checks its views with, and the address of a row.  core/ only. */
#ifndef ATTN_CORE_VIEW_H
#define ATTN_CORE_VIEW_H

#include "attn.h"
#include <stdint.h>

/* How a view is used: mask and bias broadcast (0 strides), outputs must be
 * nested (attn.h, Tensor views), and the logsumexp is a vector, not a BLAS
 * matrix (no leading-dimension rule on its seq stride). */
enum { VIEW_BROADCAST = 1, VIEW_OUTPUT = 2, VIEW_VECTOR = 4 };
attn_status attn_check_view(const attn_view *v, int64_t B, int64_t H, int64_t S, int64_t D,
                            int how);

/* Row (b, h, i) of a view over base (in elements of base's type): what
 * `x + b * v.batch + h * v.head + i * v.seq` spells out. */
#define ATTN_VIEW_AT(base, v, b, h, i) \
    ((base) + (b) * (v).batch + (h) * (v).head + (i) * (v).seq)
/* The (b, h) slice of a view: its row 0. */
#define ATTN_VIEW_HEAD(base, v, b, h) ((base) + (b) * (v).batch + (h) * (v).head)

#endif
