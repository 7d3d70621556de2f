/* ring-example: one long causal sequence spread over the ranks of
 * MPI_COMM_WORLD, its attention forward and backward computed by attn_mpi's
 * ring, checked against one process.
 *
 *   mpirun -n 4 ring-example [n]        (n: sequence length, default 2048)
 *
 * Each rank holds only its rows of Q, K, V and dO (the zigzag split, which
 * balances a causal mask: attn_mpi_rows says which), generated from their
 * global positions.  The ring passes K/V shards round the ranks, merges the
 * partial results by logsumexp, and in the backward returns every shard's
 * dK/dV to its owner.  Then every rank runs the whole problem in one
 * attn_sdpa / attn_sdpa_backward call (a check only: it needs the whole
 * sequence) and compares its own rows.  Prints the largest differences and
 * the ring's statistics; exits 1 if a difference exceeds 1e-4.
 */
#include <attn.h>
#include <attn_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { H = 4, D = 32 };

/* a value in [-1, 1) for (tensor, head, global row, column) */
static float val(unsigned t, long h, long row, long x)
{
    unsigned long long z = ((unsigned long long)t << 60) ^ ((unsigned long long)h << 50) ^
                           ((unsigned long long)row << 12) ^ (unsigned long long)x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (float)((z >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* [H][rows][D] holding the global rows of the runs (start, count); global
 * = 1: all n rows. */
static float *fill(unsigned t, const int64_t *start, const int64_t *count, int64_t rows)
{
    float *p = malloc((size_t)(H * rows * D) * sizeof(float));
    for (long h = 0; h < H; h++) {
        int64_t l = 0;
        for (int u = 0; u < 2; u++)
            for (int64_t i = 0; i < count[u]; i++, l++)
                for (long x = 0; x < D; x++)
                    p[(h * rows + l) * D + x] = val(t, h, (long)(start[u] + i), x);
    }
    return p;
}

static int check(attn_status st, const char *what, int rank)
{
    if (st != ATTN_OK)
        fprintf(stderr, "rank %d: %s: %s\n", rank, what, attn_status_str(st));
    return st != ATTN_OK;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, P;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    const int64_t n = argc > 1 ? atol(argv[1]) : 2048;

    /* which rows this rank holds, and its local tensors */
    int64_t start[2], count[2];
    if (check(attn_mpi_rows(ATTN_MPI_SPLIT_ZIGZAG, n, P, rank, start, count), "rows", rank))
        MPI_Abort(MPI_COMM_WORLD, 1);
    const int64_t rows = count[0] + count[1], r1 = rows ? rows : 1;
    float *q = fill(1, start, count, r1), *k = fill(2, start, count, r1);
    float *v = fill(3, start, count, r1), *dO = fill(4, start, count, r1);
    float *o = malloc((size_t)(H * r1 * D) * 4), *lse = malloc((size_t)(H * r1) * 4);
    float *dq = malloc((size_t)(H * r1 * D) * 4), *dk = malloc((size_t)(H * r1 * D) * 4);
    float *dv = malloc((size_t)(H * r1 * D) * 4);

    /* the whole problem: causal self-attention over n positions; the views
     * are this rank's [H][rows][D] tensors */
    attn_mpi_desc md;
    attn_mpi_desc_init(&md);
    md.split = ATTN_MPI_SPLIT_ZIGZAG;
    md.sdpa.batch = 1;
    md.sdpa.q_heads = md.sdpa.kv_heads = H;
    md.sdpa.q_len = md.sdpa.kv_len = n;
    md.sdpa.qk_dim = md.sdpa.v_dim = D;
    md.sdpa.q = md.sdpa.k = md.sdpa.v = md.sdpa.o = attn_view_bhsd(H, r1, D);
    md.sdpa.window_right = 0;               /* causal */
    md.sdpa.want_lse = 1;                   /* the backward needs it */
    md.sdpa.lse = attn_view_bhsd(H, r1, 1);
    md.sdpa.threads = 1;

    attn_mpi_plan *plan;
    int bad = check(attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD), "plan", rank);
    if (bad)
        MPI_Abort(MPI_COMM_WORLD, 1);
    attn_sdpa_args a = { .q = q, .k = k, .v = v, .o = o, .lse = lse };
    attn_sdpa_bwd_args g = { .q = q, .k = k, .v = v, .o = o, .lse = lse, .d_o = dO,
                             .dq = dq, .dk = dk, .dv = dv };
    attn_mpi_stats fs, bs;
    bad |= check(attn_mpi_forward(plan, &a), "forward", rank);
    attn_mpi_plan_stats(plan, &fs);
    bad |= check(attn_mpi_backward(plan, &g), "backward", rank);
    attn_mpi_plan_stats(plan, &bs);

    /* the check: the whole problem in one process, this rank's rows */
    const int64_t all[2] = { n, 0 }, zero[2] = { 0, 0 };
    float *Q = fill(1, zero, all, n), *K = fill(2, zero, all, n), *V = fill(3, zero, all, n);
    float *DO = fill(4, zero, all, n);
    float *O = malloc((size_t)(H * n * D) * 4), *L = malloc((size_t)(H * n) * 4);
    float *DQ = malloc((size_t)(H * n * D) * 4), *DK = malloc((size_t)(H * n * D) * 4);
    float *DV = malloc((size_t)(H * n * D) * 4);
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = md.sdpa;
    bd.fwd.q = bd.fwd.k = bd.fwd.v = bd.fwd.o = attn_view_bhsd(H, n, D);
    bd.fwd.lse = attn_view_bhsd(H, n, 1);
    bd.d_o = bd.dq = bd.dk = bd.dv = bd.fwd.q;
    attn_sdpa_args wa = { .q = Q, .k = K, .v = V, .o = O, .lse = L };
    attn_sdpa_bwd_args wg = { .q = Q, .k = K, .v = V, .o = O, .lse = L, .d_o = DO,
                              .dq = DQ, .dk = DK, .dv = DV };
    bad |= check(attn_sdpa(&bd.fwd, &wa), "one-process forward", rank);
    bad |= check(attn_sdpa_backward(&bd, &wg), "one-process backward", rank);

    double err[4] = { 0, 0, 0, 0 };   /* O, dQ, dK, dV */
    for (long h = 0; h < H; h++) {
        int64_t l = 0;
        for (int u = 0; u < 2; u++)
            for (int64_t i = 0; i < count[u]; i++, l++)
                for (long x = 0; x < D; x++) {
                    const size_t loc = (size_t)((h * r1 + l) * D + x);
                    const size_t glo = (size_t)((h * n + start[u] + i) * D + x);
                    err[0] = fmax(err[0], fabs(o[loc] - O[glo]));
                    err[1] = fmax(err[1], fabs(dq[loc] - DQ[glo]));
                    err[2] = fmax(err[2], fabs(dk[loc] - DK[glo]));
                    err[3] = fmax(err[3], fabs(dv[loc] - DV[glo]));
                }
    }
    MPI_Allreduce(MPI_IN_PLACE, err, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const int ok = !bad && err[0] <= 1e-4 && err[1] <= 1e-4 && err[2] <= 1e-4 && err[3] <= 1e-4;
    if (rank == 0) {
        printf("ring-example: causal attention over %lld positions, %d heads of %d, on %d "
               "ranks (zigzag)\n", (long long)n, H, D, P);
        printf("rank 0 holds rows [%lld, %lld) and [%lld, %lld); computed %lld blocks, skipped "
               "%lld; sent %.2f MiB (forward) + %.2f MiB (backward)\n",
               (long long)start[0], (long long)(start[0] + count[0]), (long long)start[1],
               (long long)(start[1] + count[1]), (long long)fs.blocks_computed,
               (long long)fs.blocks_skipped, fs.bytes_sent / 1048576.0,
               bs.bytes_sent / 1048576.0);
        printf("largest |ring - one process|: O %.1e, dQ %.1e, dK %.1e, dV %.1e: %s\n", err[0],
               err[1], err[2], err[3], ok ? "ok" : "FAILED");
    }
    attn_mpi_plan_destroy(plan);
    free(q); free(k); free(v); free(dO); free(o); free(lse); free(dq); free(dk); free(dv);
    free(Q); free(K); free(V); free(DO); free(O); free(L); free(DQ); free(DK); free(DV);
    MPI_Finalize();
    return ok ? 0 : 1;
}
