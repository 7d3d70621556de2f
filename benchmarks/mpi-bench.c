/* attn-bench-mpi: the ring (attn_mpi) against one process, in the same run.
 *
 *   mpirun -n P attn-bench-mpi [--case S3|C1-32k ...] [--runs R]
 *                              [--threads T] [--no-bwd] [--no-single]
 *                              [--decode M]
 *
 * For each case every rank holds only its rows (attn_mpi_rows; zigzag under
 * a causal mask), generated from their global positions, so its memory is
 * O(n / P).  The ring forward and backward are timed (median of R, after a
 * warm-up), with attn_mpi_plan_stats' compute and wait times and bytes
 * sent.  Then the same bytes go round the ring with nothing computed (the
 * communication alone), and the fraction of it hidden behind compute is
 * 1 - wait / alone.  Then rank 0 alone runs attn_sdpa / the backward on the
 * whole problem with P x T threads (the other ranks sleep in a polled
 * barrier, so they leave their cores to it, and rank 0 unbinds itself from
 * the core mpirun gave it): the one-process figures the
 * ring is compared with, and the reference its results are checked against
 * (every rank's rows gathered to rank 0).  Peak RSS per rank is read after
 * the ring runs and before the one-process run allocates the whole problem.
 * --decode M: a decode step (S5's shape) over an F16 cache of M positions
 * sharded over the ranks, with each merge (allgather, allreduce), against
 * one process over the whole cache.
 */
#include <attn.h>
#include <attn_mpi.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

typedef struct bcase {
    const char *id;
    int64_t H, n, d;
    int causal;
} bcase;

static const bcase cases[] = {
    { "S3", 8, 4096, 64, 1 },        /* = C1 at 4k */
    { "C1-32k", 8, 32768, 64, 1 },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static int rank, nranks;

static void die(const char *what, attn_status st)
{
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, attn_status_str(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A value in [-1, 1) from (tensor, head, global row, column): every rank
 * generates its own rows of the same whole problem. */
static float val(uint64_t t, uint64_t h, uint64_t row, uint64_t x)
{
    uint64_t z = (t << 58) ^ (h << 48) ^ (row << 12) ^ x ^ 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((z >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* Rows of tensor t, [H][rows][d], the rows being the global rows of the
 * runs (start, count). */
static float *rows_of(uint64_t t, int64_t H, int64_t d, const int64_t *start,
                      const int64_t *count, int64_t *nrows)
{
    const int64_t r = count[0] + count[1];
    float *p = malloc((size_t)(H * (r ? r : 1) * d) * sizeof(float));
    if (!p)
        die("malloc", ATTN_ERR_OUT_OF_MEMORY);
    for (int64_t h = 0; h < H; h++) {
        int64_t l = 0;
        for (int u = 0; u < 2; u++)
            for (int64_t i = 0; i < count[u]; i++, l++)
                for (int64_t x = 0; x < d; x++)
                    p[(h * r + l) * d + x] = val(t, (uint64_t)h, (uint64_t)(start[u] + i), (uint64_t)x);
    }
    *nrows = r;
    return p;
}

static double now(void)
{
    return MPI_Wtime();
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Wait for the others without spinning: MPI_Ibarrier polled every ms. */
static void idle_barrier(void)
{
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done)
            break;
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
}

/* The ring's bytes with nothing computed: steps exchanges of `bytes` with
 * the neighbours, as the ring posts them (Isend to r + 1, Irecv from r - 1). */
static double comm_alone(size_t bytes, int steps, int runs)
{
    if (nranks == 1 || steps == 0)
        return 0.0;
    char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double *t = malloc((size_t)runs * sizeof *t);
    for (int k = -1; k < runs; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (int s = 0; s < steps; s++) {
            MPI_Request rq[2];
            MPI_Irecv(b, (int)bytes, MPI_BYTE, (rank + nranks - 1) % nranks, 7, MPI_COMM_WORLD,
                      &rq[0]);
            MPI_Isend(a, (int)bytes, MPI_BYTE, (rank + 1) % nranks, 7, MPI_COMM_WORLD, &rq[1]);
            MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
            char *x = a; a = b; b = x;
        }
        if (k >= 0)
            t[k] = now() - t0;
    }
    double m = median(t, runs);
    free(a); free(b); free(t);
    return m;
}

/* mpirun binds each rank to a core: the one-process runs take every CPU
 * (threads made afterwards inherit it); *saved gets the binding back.
 * Returns whether there was one to save. */
static int unbind_all(cpu_set_t *saved)
{
    cpu_set_t every;
    const int have = sched_getaffinity(0, sizeof *saved, saved) == 0;
    CPU_ZERO(&every);
    for (long cpu = 0; cpu < sysconf(_SC_NPROCESSORS_ONLN) && cpu < CPU_SETSIZE; cpu++)
        CPU_SET((int)cpu, &every);
    sched_setaffinity(0, sizeof every, &every);
    return have;
}

/* F16 rows of tensor t, [H][rows][d], global rows from `first`. */
static void fill16(uint64_t t, int64_t H, int64_t rows, int64_t d, int64_t first, uint16_t *out,
                   float *tmp)
{
    for (int64_t h = 0; h < H; h++)
        for (int64_t j = 0; j < rows; j++) {
            for (int64_t x = 0; x < d; x++)
                tmp[x] = val(t, (uint64_t)h, (uint64_t)(first + j), (uint64_t)x);
            attn_dtype_encode(ATTN_DTYPE_F16, tmp, out + (h * rows + j) * d, d);
        }
}

/* The forward's and the backward's args over one set of tensors. */
static void make_args(float *q, float *k, float *v, float *o, float *lse, float *dO, float *dq,
                      float *dk, float *dv, attn_sdpa_args *a, attn_sdpa_bwd_args *g)
{
    attn_sdpa_args_init(a);
    a->q = q; a->k = k; a->v = v; a->o = o; a->lse = lse;
    attn_sdpa_bwd_args_init(g);
    g->q = q; g->k = k; g->v = v; g->o = o; g->lse = lse; g->d_o = dO;
    g->dq = dq; g->dk = dk; g->dv = dv;
}

static long peak_rss_kib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static void run_case(const bcase *c, int runs, int threads, int bwd, int single)
{
    const int64_t H = c->H, n = c->n, d = c->d;
    const attn_mpi_split split = c->causal ? ATTN_MPI_SPLIT_ZIGZAG : ATTN_MPI_SPLIT_CONTIGUOUS;
    int64_t st[2], ct[2], nl;
    attn_status s = attn_mpi_rows(split, n, nranks, rank, st, ct);
    if (s != ATTN_OK)
        die("attn_mpi_rows", s);
    float *q = rows_of(1, H, d, st, ct, &nl);
    float *k = rows_of(2, H, d, st, ct, &nl);
    float *v = rows_of(3, H, d, st, ct, &nl);
    float *dO = rows_of(4, H, d, st, ct, &nl);
    const int64_t R = nl ? nl : 1;
    float *o = malloc((size_t)(H * R * d) * 4), *lse = malloc((size_t)(H * R) * 4);
    float *dq = malloc((size_t)(H * R * d) * 4), *dk = malloc((size_t)(H * R * d) * 4);
    float *dv = malloc((size_t)(H * R * d) * 4);

    attn_mpi_desc md;
    attn_mpi_desc_init(&md);
    attn_sdpa_desc *sd = &md.sdpa;
    sd->batch = 1; sd->q_heads = sd->kv_heads = H;
    sd->q_len = sd->kv_len = n; sd->qk_dim = sd->v_dim = d;
    sd->q = sd->k = sd->v = sd->o = attn_view_bhsd(H, R, d);
    sd->want_lse = 1;
    sd->lse = attn_view_bhsd(H, R, 1);
    if (c->causal)
        sd->window_right = 0;
    sd->threads = threads;
    md.split = split;
    attn_mpi_plan *plan;
    if ((s = attn_mpi_plan_create(&plan, &md, MPI_COMM_WORLD)) != ATTN_OK)
        die("attn_mpi_plan_create", s);

    attn_sdpa_args a;
    attn_sdpa_bwd_args g;
    make_args(q, k, v, o, lse, dO, dq, dk, dv, &a, &g);

    double *tf = malloc((size_t)runs * sizeof(double)), *tb = malloc((size_t)runs * sizeof(double));
    attn_mpi_stats fs, bs;
    memset(&bs, 0, sizeof bs);
    for (int r = -1; r < runs; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if ((s = attn_mpi_forward(plan, &a)) != ATTN_OK)
            die("attn_mpi_forward", s);
        MPI_Barrier(MPI_COMM_WORLD);
        if (r >= 0)
            tf[r] = now() - t0;
        attn_mpi_plan_stats(plan, &fs);
        if (bwd) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
            if ((s = attn_mpi_backward(plan, &g)) != ATTN_OK)
                die("attn_mpi_backward", s);
            MPI_Barrier(MPI_COMM_WORLD);
            if (r >= 0)
                tb[r] = now() - t0;
            attn_mpi_plan_stats(plan, &bs);
        }
    }
    const double fmed = median(tf, runs), bmed = bwd ? median(tb, runs) : 0.0;
    const long rss = peak_rss_kib();

    /* the communication alone: the shard bytes of each step */
    int64_t smax = nl;
    MPI_Allreduce(MPI_IN_PLACE, &smax, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    const size_t kvb = (size_t)(2 * H * smax * d) * sizeof(float);
    const double fcomm = comm_alone(kvb, nranks - 1, runs);
    const double bcomm = bwd ? comm_alone(2 * kvb, nranks, runs) : 0.0;

    /* per-rank figures to rank 0 */
    double mine[8] = { fs.seconds_compute, fs.seconds_wait, (double)fs.bytes_sent,
                       bs.seconds_compute, bs.seconds_wait, (double)bs.bytes_sent, (double)rss,
                       (double)fs.blocks_computed };
    double *all = rank == 0 ? malloc((size_t)nranks * sizeof mine) : NULL;
    MPI_Gather(mine, 8, MPI_DOUBLE, all, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    /* gather O and dQ rows (with their global row numbers) to rank 0 */
    int cnt = (int)(H * nl * d);
    int *counts = NULL, *displs = NULL;
    float *Og = NULL, *dQg = NULL;
    int64_t *rowsg = NULL;
    int *rcounts = NULL, *rdispl = NULL;
    int64_t *myrows = malloc((size_t)(nl ? nl : 1) * sizeof(int64_t));
    for (int64_t i = 0, l = 0; i < 2; i++)
        for (int64_t j = 0; j < ct[i]; j++)
            myrows[l++] = st[i] + j;
    if (rank == 0) {
        counts = malloc((size_t)nranks * sizeof(int));
        displs = malloc((size_t)nranks * sizeof(int));
        rcounts = malloc((size_t)nranks * sizeof(int));
        rdispl = malloc((size_t)nranks * sizeof(int));
    }
    int nli = (int)nl;
    MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(&nli, 1, MPI_INT, rcounts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int tot = 0, rt = 0;
        for (int r = 0; r < nranks; r++) {
            displs[r] = tot;
            tot += counts[r];
            rdispl[r] = rt;
            rt += rcounts[r];
        }
        Og = malloc((size_t)tot * 4);
        dQg = malloc((size_t)tot * 4);
        rowsg = malloc((size_t)rt * sizeof(int64_t));
    }
    MPI_Gatherv(o, cnt, MPI_FLOAT, Og, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Gatherv(dq, cnt, MPI_FLOAT, dQg, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Gatherv(myrows, nli, MPI_INT64_T, rowsg, rcounts, rdispl, MPI_INT64_T, 0,
                MPI_COMM_WORLD);
    attn_mpi_plan_destroy(plan);
    free(q); free(k); free(v); free(dO); free(o); free(lse); free(dq); free(dk); free(dv);
    free(myrows);

    /* one process, P x T threads, on the whole problem */
    double sf = 0, sb = 0, eo = 0, eq = 0;
    if (rank == 0 && single) {
        cpu_set_t saved;
        const int have_mask = unbind_all(&saved);
        const int64_t all_c[2] = { n, 0 }, zero[2] = { 0, 0 };
        int64_t nn;
        float *Q = rows_of(1, H, d, zero, all_c, &nn), *K = rows_of(2, H, d, zero, all_c, &nn);
        float *V = rows_of(3, H, d, zero, all_c, &nn), *DO = rows_of(4, H, d, zero, all_c, &nn);
        float *O = malloc((size_t)(H * n * d) * 4), *L = malloc((size_t)(H * n) * 4);
        float *DQ = malloc((size_t)(H * n * d) * 4), *DK = malloc((size_t)(H * n * d) * 4);
        float *DV = malloc((size_t)(H * n * d) * 4);
        attn_sdpa_desc w = *sd;
        w.q = w.k = w.v = w.o = attn_view_bhsd(H, n, d);
        w.lse = attn_view_bhsd(H, n, 1);
        w.threads = threads * nranks;
        attn_sdpa_plan *p1;
        if ((s = attn_sdpa_plan_create(&p1, &w)) != ATTN_OK)
            die("attn_sdpa_plan_create", s);
        attn_sdpa_bwd_desc bd;
        attn_sdpa_bwd_desc_init(&bd);
        bd.fwd = w;
        bd.d_o = bd.dq = bd.dk = bd.dv = w.q;
        attn_sdpa_bwd_plan *p2;
        if ((s = attn_sdpa_bwd_plan_create(&p2, &bd)) != ATTN_OK)
            die("attn_sdpa_bwd_plan_create", s);
        attn_sdpa_args wa;
        attn_sdpa_bwd_args wg;
        make_args(Q, K, V, O, L, DO, DQ, DK, DV, &wa, &wg);
        for (int r = -1; r < runs; r++) {
            double t0 = now();
            if ((s = attn_sdpa_execute(p1, &wa, NULL, 0)) != ATTN_OK)
                die("attn_sdpa_execute", s);
            if (r >= 0)
                tf[r] = now() - t0;
            if (bwd) {
                t0 = now();
                if ((s = attn_sdpa_bwd_execute(p2, &wg, NULL, 0)) != ATTN_OK)
                    die("attn_sdpa_bwd_execute", s);
                if (r >= 0)
                    tb[r] = now() - t0;
            }
        }
        sf = median(tf, runs);
        sb = bwd ? median(tb, runs) : 0.0;
        /* the ring's rows against the one process's */
        for (int r = 0, l = 0; r < nranks; r++) {
            const int64_t rr = rcounts[r];
            for (int64_t li = 0; li < rr; li++, l++) {
                const int64_t gi = rowsg[l];
                for (int64_t h = 0; h < H; h++)
                    for (int64_t x = 0; x < d; x++) {
                        const size_t at = (size_t)displs[r] + (size_t)((h * rr + li) * d + x);
                        const size_t ref = (size_t)((h * n + gi) * d + x);
                        eo = fmax(eo, fabs(Og[at] - O[ref]));
                        if (bwd)
                            eq = fmax(eq, fabs(dQg[at] - DQ[ref]));
                    }
            }
        }
        attn_sdpa_plan_destroy(p1);
        attn_sdpa_bwd_plan_destroy(p2);
        if (have_mask)
            sched_setaffinity(0, sizeof saved, &saved);
        free(Q); free(K); free(V); free(DO); free(O); free(L); free(DQ); free(DK); free(DV);
    }
    if (single) {
        /* (a blocking barrier never matches the others' MPI_Ibarrier: rank
         * 0 waits on a nonblocking one too) */
        if (rank == 0) {
            MPI_Request r;
            MPI_Ibarrier(MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            idle_barrier();
        }
    }

    if (rank == 0) {
        double fc = 0, fw = 0, bc = 0, bw = 0, fbytes = 0, bbytes = 0, rmax = 0;
        for (int r = 0; r < nranks; r++) {
            fc = fmax(fc, all[8 * r]); fw = fmax(fw, all[8 * r + 1]);
            fbytes = fmax(fbytes, all[8 * r + 2]);
            bc = fmax(bc, all[8 * r + 3]); bw = fmax(bw, all[8 * r + 4]);
            bbytes = fmax(bbytes, all[8 * r + 5]);
            rmax = fmax(rmax, all[8 * r + 6]);
        }
        const double fh = fcomm > 0 ? fmax(0.0, 1.0 - fw / fcomm) : 1.0;
        const double bh = bcomm > 0 ? fmax(0.0, 1.0 - bw / bcomm) : 1.0;
        printf("%-7s %-6s P=%d x %dT  fwd %9.2f ms (compute %8.2f, wait %7.2f, comm alone %7.2f: "
               "%3.0f%% hidden)  %8.1f MiB sent/rank",
               c->id, c->causal ? "causal" : "full", nranks, threads, fmed * 1e3, fc * 1e3,
               fw * 1e3, fcomm * 1e3, 100 * fh, fbytes / 1048576.0);
        if (single)
            printf("  | 1 process x %dT: %9.2f ms  ring/one %.2f  max|O err| %.1e", threads * nranks,
                   sf * 1e3, fmed / sf, eo);
        printf("\n");
        if (bwd) {
            printf("%-7s %-6s P=%d x %dT  bwd %9.2f ms (compute %8.2f, wait %7.2f, comm alone %7.2f: "
                   "%3.0f%% hidden)  %8.1f MiB sent/rank",
                   c->id, c->causal ? "causal" : "full", nranks, threads, bmed * 1e3, bc * 1e3,
                   bw * 1e3, bcomm * 1e3, 100 * bh, bbytes / 1048576.0);
            if (single)
                printf("  | 1 process x %dT: %9.2f ms  ring/one %.2f  max|dQ err| %.1e",
                       threads * nranks, sb * 1e3, bmed / sb, eq);
            printf("\n");
        }
        printf("%-7s        peak RSS per rank (ring, before the one-process run): max %.1f MiB;"
               " this rank's Q, K, V, O, dO, dQ, dK, dV: %.1f MiB\n",
               c->id, rmax / 1024.0, 8.0 * (double)(H * nl * d) * 4 / 1048576.0);
        fflush(stdout);
        free(all); free(counts); free(displs); free(rcounts); free(rdispl);
        free(Og); free(dQg); free(rowsg);
    }
    free(tf); free(tb);
}

/* Sharded-cache decode: S5's shape (1 query, 32 query heads, 8 K/V heads
 * of 128) against a context of m positions in F16, split contiguously over
 * the ranks; one step timed with each merge, then rank 0 alone over the
 * whole cache with P x T threads. */
static void run_decode(int64_t m, int runs, int threads)
{
    const int64_t Hq = 32, Hkv = 8, d = 128;
    int64_t st[2], ct[2];
    attn_mpi_rows(ATTN_MPI_SPLIT_CONTIGUOUS, m, nranks, rank, st, ct);
    const int64_t ml = ct[0] > 0 ? ct[0] : 1;
    uint16_t *k = malloc((size_t)(Hkv * ml * d) * 2), *v = malloc((size_t)(Hkv * ml * d) * 2);
    float *tmp = malloc((size_t)d * 4), *q = malloc((size_t)(Hq * d) * 4);
    float *o = malloc((size_t)(Hq * d) * 4);
    fill16(2, Hkv, ml, d, st[0], k, tmp);
    fill16(3, Hkv, ml, d, st[0], v, tmp);
    for (int64_t x = 0; x < Hq * d; x++)
        q[x] = val(1, 0, (uint64_t)m, (uint64_t)x);
    double t[2] = { 0, 0 };
    double *ts = malloc((size_t)runs * sizeof(double));
    for (int mg = 0; mg < 2; mg++) {
        attn_mpi_decode_desc dd;
        attn_mpi_decode_desc_init(&dd);
        attn_sdpa_desc *l = &dd.local;
        l->batch = 1; l->q_heads = Hq; l->kv_heads = Hkv; l->q_len = 1; l->kv_len = ml;
        l->qk_dim = l->v_dim = d;
        l->q = l->o = attn_view_bhsd(Hq, 1, d);
        l->k = l->v = attn_view_bhsd(Hkv, ml, d);
        l->k_type = l->v_type = ATTN_DTYPE_F16;
        l->use_positions = 1;
        l->q_pos0 = m - 1;
        l->kv_pos0 = st[0];
        l->threads = threads;
        dd.merge = mg ? ATTN_MPI_MERGE_ALLREDUCE : ATTN_MPI_MERGE_ALLGATHER;
        attn_mpi_plan *p;
        attn_status s = attn_mpi_decode_plan_create(&p, &dd, MPI_COMM_WORLD);
        if (s != ATTN_OK)
            die("attn_mpi_decode_plan_create", s);
        attn_sdpa_args a;
        attn_sdpa_args_init(&a);
        a.q = q; a.o = o; a.k16 = k; a.v16 = v;
        for (int r = -3; r < runs; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            if ((s = attn_mpi_decode(p, &a)) != ATTN_OK)
                die("attn_mpi_decode", s);
            if (r >= 0)
                ts[r] = now() - t0;
        }
        t[mg] = median(ts, runs);
        attn_mpi_plan_destroy(p);
    }
    double one = 0;
    if (rank == 0) {
        /* the whole cache in one process */
        uint16_t *K = malloc((size_t)(Hkv * m * d) * 2), *V = malloc((size_t)(Hkv * m * d) * 2);
        fill16(2, Hkv, m, d, 0, K, tmp);
        fill16(3, Hkv, m, d, 0, V, tmp);
        cpu_set_t saved;
        const int have_mask = unbind_all(&saved);
        attn_sdpa_desc w;
        attn_sdpa_desc_init(&w);
        w.batch = 1; w.q_heads = Hq; w.kv_heads = Hkv; w.q_len = 1; w.kv_len = m;
        w.qk_dim = w.v_dim = d;
        w.q = w.o = attn_view_bhsd(Hq, 1, d);
        w.k = w.v = attn_view_bhsd(Hkv, m, d);
        w.k_type = w.v_type = ATTN_DTYPE_F16;
        w.threads = threads * nranks;
        attn_sdpa_plan *p1;
        attn_status s = attn_sdpa_plan_create(&p1, &w);
        if (s != ATTN_OK)
            die("attn_sdpa_plan_create", s);
        attn_sdpa_args a;
        attn_sdpa_args_init(&a);
        a.q = q; a.o = o; a.k16 = K; a.v16 = V;
        for (int r = -3; r < runs; r++) {
            double t0 = now();
            attn_sdpa_execute(p1, &a, NULL, 0);
            if (r >= 0)
                ts[r] = now() - t0;
        }
        one = median(ts, runs);
        attn_sdpa_plan_destroy(p1);
        if (have_mask)
            sched_setaffinity(0, sizeof saved, &saved);
        free(K); free(V);
        printf("decode  S5 shape, F16 cache of %lld positions split over %d ranks x %dT: step "
               "%.3f ms (allgather) / %.3f ms (allreduce) | 1 process x %dT: %.3f ms  "
               "ring/one %.2f / %.2f\n",
               (long long)m, nranks, threads, t[0] * 1e3, t[1] * 1e3, threads * nranks,
               one * 1e3, t[0] / one, t[1] / one);
        fflush(stdout);
    }
    idle_barrier();   /* (the same barrier on every rank: Ibarrier) */
    free(k); free(v); free(tmp); free(q); free(o); free(ts);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int runs = 3, threads = 1, bwd = 1, single = 1, picked[NCASES] = { 0 }, any = 0;
    long decode_m = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-bwd"))
            bwd = 0;
        else if (!strcmp(argv[i], "--no-single"))
            single = 0;
        else if (!strcmp(argv[i], "--decode") && i + 1 < argc)
            decode_m = atol(argv[++i]);
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) {
            const char *id = argv[++i];
            int found = 0;
            for (int c = 0; c < NCASES; c++)
                if (!strcmp(cases[c].id, id))
                    picked[c] = found = any = 1;
            if (!found) {
                if (rank == 0)
                    fprintf(stderr, "unknown case %s (S3, C1-32k)\n", id);
                MPI_Finalize();
                return 2;
            }
        } else {
            if (rank == 0)
                fprintf(stderr,
                        "usage: mpirun -n P attn-bench-mpi [--case S3|C1-32k ...] "
                        "[--runs R] [--threads T] [--no-bwd] [--no-single] [--decode M]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (runs < 1)
        runs = 1;
    if (rank == 0) {
        printf("attn %s | attn-bench-mpi | %d ranks x %d threads | runs %d (median, after a "
               "warm-up)\n", attn_version(), nranks, threads, runs);
        printf("ring: zigzag split under the causal mask; 'wait' is the communication not "
               "hidden by compute (the slowest rank's); 'comm alone' the same bytes round the "
               "ring with nothing computed; hidden = 1 - wait / alone\n");
    }
    for (int c = 0; c < NCASES; c++)
        if (picked[c] || (!any && !decode_m && c == 0))
            run_case(&cases[c], runs, threads, bwd, single);
    if (decode_m > 0)
        run_decode(decode_m, runs < 5 ? 20 : runs, threads);
    MPI_Finalize();
    return 0;
}
