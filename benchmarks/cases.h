/* attn-bench's case table: every case of every kind, written once
 * (cases.c).  `attn-bench --list` prints it, `--list --json` as JSON, which
 * is how compare-torch.py, compare-ort.mjs and the plot scripts read it
 * (benchmarks/casetable.py).
 *
 * The kinds' runners are declared at the end: each kind's file (long.c,
 * decode.c; the dense and plan kinds in attn-bench.c) includes this and
 * harness.h only, and the driver reaches them through these declarations. */
#ifndef ATTN_BENCH_CASES_H
#define ATTN_BENCH_CASES_H

#include "attn.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>

enum bench_kind {
    K_DENSE,     /* SDPA or the MHA layer, forward or training (S, T cases) */
    K_LINEAR,    /* L1: causal linear attention (elu + 1) */
    K_GLOBAL,    /* X1: window + global tokens (Longformer) */
    K_BIGBIRD,   /* X2: BigBird block layout */
    K_DECODE,    /* S5 (decode table), D1-D3, DL: decode against a large KV cache */
    K_PLAN,      /* P1: the cost of a plan (create, one-shot, reused execute) */
};

/* One row of a decode case: how its K/V cache is stored. */
typedef struct decode_row {
    const char *label;      /* NULL ends the list */
    attn_dtype type;
    int paged;              /* 1: the block table a random permutation; 2: in
                               order (a diagnostic row: attn only, no target) */
    int qk_int8;            /* desc.qk_int8 (the integer Q K^T; block types) */
} decode_row;
enum { MAX_DECODE_ROWS = 13 };

typedef struct bench_case {
    const char *id, *name;
    int kind;                   /* enum bench_kind */
    int64_t B, Hq, Hkv, n, m, d;
    int causal;    /* top-left for the dense and long kinds, bottom-right for decode */
    int padded;    /* per-batch kv lengths: case_kv_len() */
    int mha;       /* the whole layer (d_model = Hq * d), packed in_proj + bias */
    int train;     /* forward (with logsumexp) + backward */
    double dropout;
    int extra;     /* not run unless named with --case (or its group) */
    int quick;     /* run by --quick when no --case is given */
    const char *group;          /* --case GROUP names it too (L1, X1, X2, D, DL) */
    /* K_GLOBAL: keys on each side and global tokens (the first `global`) */
    int64_t window, global;
    /* K_BIGBIRD: block size; window, global and random blocks a row; seed */
    int64_t block, bb_window, bb_global, bb_random;
    uint64_t seed;
    decode_row rows[MAX_DECODE_ROWS + 1];   /* K_DECODE */
    const char *ort;            /* compare-ort.mjs's op for it: "mha", "gqa" (or NULL) */
} bench_case;

extern const bench_case bench_cases[];
extern const int bench_ncases;

/* Keys batch b sees: m, or with `padded` the case's per-batch lengths
 * (dense S9: m, m - m/B, ...; decode D2: m/B, 2 m/B, ..., m). */
int64_t case_kv_len(const bench_case *c, int64_t b);

/* Whether --case `want` names c: its id, or its group. */
int case_named(const bench_case *c, const char *want);

/* The kind's name as --list prints it ("dense", "linear", ...). */
const char *case_kind_name(int kind);

/* The table, readable (json 0) or as one JSON array (json 1). */
void cases_print(FILE *f, int json);

/* ---- each kind's runner ---------------------------------------------------
 * Called in a child process (harness.h: in_child) unless said otherwise. */

/* long.c: impl 0 = attn's linear or sparse path, 1 = attn's dense SDPA. */
void long_run_case(const bench_case *c, int impl, int nthreads, int runs, result *res);
double long_useful_flops(const bench_case *c, int impl);
const char *long_other_name(const bench_case *c);

/* decode.c, called in the driver (each row runs in its own child). */
void decode_print_header(const bench_env *env);
void decode_run_case(const bench_case *c, int nthreads, const bench_env *env);
/* The run sizes (bytes of one head's rows in a pool block) of c's randomly
 * paged rows, at most max; their count. */
int decode_paged_runs(const bench_case *c, size_t *runs, int max);
void decode_print_ratios(int nthreads, const bench_env *env);
void decode_print_notes(void);

#endif
