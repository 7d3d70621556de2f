/*
 * sdpa_cases.h -- the table of attn_sdpa test cases (sdpa_cases.c) and the
 * checks that test_sdpa.c runs over it.
 *
 * A row is one case (a tcase of harness.h: shape, layouts, GQA, masks,
 * windows, lengths, bias, options, threads, seed) plus the columns below.
 * Rows come in families; a family is a name, the meson test (suite) it
 * belongs to, a generator emitting its rows (usually a cross product of
 * short lists, or a literal list) and the checks its rows get by default.
 * Every row is run once (threads as in the row) and checked against the
 * float64 reference; that result is the base the other checks compare with
 * bitwise.
 *
 * To add a row: emit it from a family's generator (or write a new family
 * and add it to tfamilies).  To add a column: a field in tcase (harness.h,
 * when tinst_build must know it) or in trow (when only the checks do).  To
 * add a check: a CHK_ bit here, a function and a line in test_sdpa.c's
 * check table, and the bit on the families or rows it applies to.
 */
#ifndef ATTN_TEST_SDPA_CASES_H
#define ATTN_TEST_SDPA_CASES_H

#include "harness.h"

/* Checks beyond the reference check every row gets (test_sdpa.c). */
enum {
    CHK_THREADS = 1u << 0,  /* thread counts of `thr` give the base bits */
    CHK_OPTIONAL = 1u << 1, /* every other want_probs/want_lse combination:
                               reference check, O bitwise the base's */
    CHK_POISON = 1u << 2,   /* poison toggled: same bits (rows that hide
                               something by lengths or window) */
    CHK_PLAN = 1u << 3,     /* plan (desc wiped) + execute with NULL, exact,
                               larger garbage workspace, reuse: same bits */
    CHK_PTHREADS = 1u << 4, /* one plan executed from several pthreads */
    CHK_OPENMP = 1u << 5,   /* one plan executed inside an OpenMP region */
    CHK_DENSE = 1u << 7,    /* sparse rows: the dense twin (harness.h,
                               dense_twin) agrees to float tolerance */
    CHK_BWD = 1u << 6,      /* the backward (sdpa_bwd.c): against
                               ref_sdpa_bwd, threads 1-4 bitwise, poisoned
                               twin bitwise, sentinels, exact zeros */
    CHK_WIDENED = 1u << 8,  /* 16-bit sparse rows (the types suite),
                               always on the widened products: the
                               fp32 call on the same rounded inputs, its O
                               rounded to the type, gives the same bits
                               (O, P, lse) */
};

/* Changes to the desc after tinst_build (views tinst_build cannot make). */
enum {
    TW_NONE = 0,
    TW_ZERO_STRIDES,    /* stride 0 on every size-1 batch / kv-head dim
                           (needs B = 1, Hkv = 1) */
    TW_INTERLEAVED_OUT, /* O, P, lse interleaved as [S][H][B] in their
                           dense buffers (needs OUT_BHSD) */
    TW_FLIP_MASK,       /* the mask bytes read with the other polarity */
};

/* Thread counts for CHK_THREADS: prefixes of {1, 2, 4, 3, 0}. */
enum {
    THR_124 = 0,        /* 1, 2, 4   (quick: 1, 2) */
    THR_ALL,            /* 1, 2, 4, 3, 0   (quick: 1, 2, 4) */
};

typedef struct trow {
    tcase c;
    int tweak;          /* TW_* */
    unsigned checks;    /* CHK_* bits */
    int thr;            /* THR_* */
    int quick;          /* in the ATTN_TEST_QUICK=1 (valgrind) set */
} trow;

/* Rows being generated: the generator sets `next` (columns of the rows it
 * emits next; reset to the family's defaults before it starts) and calls
 * trows_add. */
typedef struct trows {
    trow *v;
    int n, cap;
    trow next;
} trows;

void trows_add(trows *rs, const tcase *c);

typedef struct tfamily {
    const char *name;   /* CMocka test name and "[accuracy]" label */
    const char *suite;  /* meson test: sdpa, threads, paths, random */
    void (*gen)(trows *rs);
    unsigned checks;    /* default CHK_* of its rows */
    int thr;            /* default THR_* */
    void (*special)(void **state); /* instead of gen: a hand-written test */
} tfamily;

extern const tfamily tfamilies[];
extern const int tfamily_count;

/* The rows of a family (free with trows_free).  Returns 0 or -1. */
int trows_generate(trows *rs, const tfamily *f);
void trows_free(trows *rs);

/* Build the instance of case c (a row's case, or a variant of it) with the
 * row's tweak applied.  Returns 0 or -1. */
int trow_build(const trow *r, const tcase *c, tinst *t);

/* The backward check (sdpa_bwd.c) and the rows it applies to (not too
 * large for the float64 reference). */
int check_bwd(const trow *r, tinst *t, const tsnap *base, tstats *st);
int bwd_applies(const trow *r);

/* The hand-written tests (test_sdpa.c). */
void test_visibility_table(void **state);
void test_nan_visible(void **state);
void test_layout_builders(void **state);
void test_sparse_dropout(void **state);
void test_bwd_types(void **state);
void test_sparse_nan_visible(void **state);
void test_sparse_mixed_types(void **state);

#endif
