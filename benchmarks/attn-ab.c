/* attn-ab: two builds of libattn timed side by side in one process.
 *
 * A virtual machine's speed can drift by 1.5x within minutes (another
 * tenant on the core's sibling, the host's frequency), so two builds timed
 * one after the other, even alternating runs of attn-bench, cannot show a
 * change of a few per cent.  attn-ab loads both libraries (dlopen,
 * RTLD_LOCAL: each keeps its own symbols), plans the same call in each,
 * and alternates the calls (A B, then B A, ...), each reading the next of
 * `copies` copies of the K/V cache, so both see the same machine at the
 * same moments and K/V from memory.  It prints each build's median and
 * 10th percentile and the ratios B / A.
 *
 * The same library loaded from two files is not timed the same: on the
 * Zen 5 VM of 1.4.5, two byte-identical copies of one build differed by
 * 7% (the faster copy was faster in either slot, so the difference goes
 * with the file, that is with where the kernel placed its pages), while a
 * path given twice (one file, dlopen's one handle) reads 1.000.  So each
 * build is loaded from `--lib-copies` fresh copies of its file (default 6,
 * in a private folder under $TMPDIR or /tmp, removed once they are
 * loaded), the calls
 * go round the copies, and the medians pool them; the spread of the
 * copies' own medians is printed beside, and an A/A run (one library
 * given twice, now also copied) shows the resolution.
 *
 * The shape is attn-bench's S5/D1 (batch 1, 32 query heads, 8 KV heads,
 * d 128, 4096 keys by default); more than one query is D3's bottom-right
 * causal step; --batch 8 --ragged is D2's (sequence b of 8 holding
 * 512 (b + 1) keys, through kv_lens).  Only attn.h's interface is used,
 * through dlsym.
 *
 * Exit status: 0; 1 when a library cannot be loaded or a call fails; 2 for
 * a bad command line. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "attn.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HQ = 32, HKV = 8, BLOCK = 16, LIB_COPIES_MAX = 16 };

typedef struct build {
    const char *path;   /* the library as given */
    char *file;         /* the copy loaded */
    void *h;
    const char *(*version)(void);
    const char *(*status_str)(attn_status);
    void (*desc_init)(attn_sdpa_desc *);
    attn_status (*plan_create)(attn_sdpa_plan **, const attn_sdpa_desc *);
    attn_status (*plan_destroy)(attn_sdpa_plan *);
    attn_status (*workspace_size)(const attn_sdpa_plan *, size_t *);
    attn_status (*execute)(const attn_sdpa_plan *, const attn_sdpa_args *, void *, size_t);
    attn_status (*dtype_bytes)(attn_dtype, int64_t, int64_t *);
    attn_status (*quantize)(attn_dtype, const float *, void *, int64_t);
    attn_sdpa_plan *plan;
    void *ws;
    size_t ws_bytes;
    double *ms;
} build;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: attn-ab LIB_A LIB_B [--type T] [--queries N] [--kv-len M] [--paged]\n"
            "               [--batch B] [--ragged]\n"
            "               [--int8] [--threads T] [--calls N] [--copies C]\n"
            "               [--lib-copies L] [--offset B] [--head-dim D]\n"
            "\n"
            "Times one attn call in two builds of libattn (paths to their shared\n"
            "libraries) loaded side by side, the calls alternating, and prints each\n"
            "build's median and 10th percentile and the ratios B / A (below 1: B is\n"
            "faster).  LIB_B may be LIB_A (an A/A run: the resolution).  Each library\n"
            "is loaded from L fresh copies of its file, used in turn, since where a\n"
            "file's pages lie moves its speed by several per cent.\n"
            "\n"
            "  --type T     K/V storage: f32 (default), f16, bf16, q8_0, q4_0\n"
            "  --queries N  queries per sequence, 1-4096 (default 1; more: bottom-right\n"
            "               causal); 16 or fewer take the decode path\n"
            "  --kv-len M   keys, a multiple of 16, 16-1048576 (default 4096)\n"
            "  --paged      a paged cache: blocks of 16 rows in a random order\n"
            "  --batch B    sequences, 1-64 (default 1), each of M keys\n"
            "  --ragged     sequence b (from 0) holds M (b + 1) / B keys, rounded up\n"
            "               to 16, given as kv_lens (--batch 8 --ragged: D2's shape)\n"
            "  --int8       integer scores (desc.qk_int8; q8_0 and q4_0 only)\n"
            "  --threads T  threads of each call, 1-1024 (default 1)\n"
            "  --calls N    timed calls of each build, 10-1000000 (default 400)\n"
            "  --copies C   copies of the K/V cache, read in turn, 1-64 (default: at\n"
            "               least 256 MiB of them, at most 64)\n"
            "  --lib-copies L  copies of each library's file, 1-16 (default 6)\n"
            "  --offset B   each copy of the cache B bytes past a 4 KiB page boundary,\n"
            "               0-4095 (default 0: page-aligned)\n"
            "  --head-dim D dk = dv, a multiple of 32, 32-256 (default 128)\n"
            "\n"
            "Shape: batch 1 unless --batch, 32 query heads, 8 KV heads, d 128 unless --head-dim\n"
            "(attn-bench's S5/D1; --queries 4 is D3).\n");
}

static int arg_int(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    const long v = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "attn-ab: %s needs an integer in [%ld, %ld]\n", opt, lo, hi);
        return 0;
    }
    *out = v;
    return 1;
}

/* Copies file `from` to `to`; 1 on success. */
static int copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in);
    if (in)
        fclose(in);
    if (out && fclose(out))
        ok = 0;
    if (!ok)
        fprintf(stderr, "attn-ab: cannot copy %s to %s: %s\n", from, to, strerror(errno));
    return ok;
}

static int load(build *b, const char *path, const char *dir, int index)
{
    b->path = path;
    b->file = malloc(strlen(dir) + 32);
    if (!b->file)
        return 0;
    sprintf(b->file, "%s/lib%d.so", dir, index);
    if (!copy_file(path, b->file))
        return 0;
    b->h = dlopen(b->file, RTLD_NOW | RTLD_LOCAL);
    if (!b->h) {
        fprintf(stderr, "attn-ab: %s\n", dlerror());
        return 0;
    }
#define SYM(f, name)                                                                 \
    do {                                                                             \
        *(void **)(&b->f) = dlsym(b->h, name);                                       \
        if (!b->f) {                                                                 \
            fprintf(stderr, "attn-ab: %s has no %s (not libattn?)\n", path, name);   \
            return 0;                                                                \
        }                                                                            \
    } while (0)
    SYM(version, "attn_version");
    SYM(status_str, "attn_status_str");
    SYM(desc_init, "attn_sdpa_desc_init");
    SYM(plan_create, "attn_sdpa_plan_create");
    SYM(plan_destroy, "attn_sdpa_plan_destroy");
    SYM(workspace_size, "attn_sdpa_workspace_size");
    SYM(execute, "attn_sdpa_execute");
    SYM(dtype_bytes, "attn_dtype_bytes");
    SYM(quantize, "attn_quantize");
#undef SYM
    return 1;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A uniform value in [-1, 1) from a 64-bit LCG (the same data every run). */
static float next_value(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 40) / (double)(1ull << 23)) - 1.0f;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "attn-ab: two libraries needed, LIB_A and LIB_B\n\n");
        usage(stderr);
        return 2;
    }
    static const struct { const char *name; attn_dtype t; } types[] = {
        { "f32", ATTN_DTYPE_F32 }, { "f16", ATTN_DTYPE_F16 }, { "bf16", ATTN_DTYPE_BF16 },
        { "q8_0", ATTN_DTYPE_Q8_0 }, { "q4_0", ATTN_DTYPE_Q4_0 },
    };
    const char *tname = "f32";
    attn_dtype type = ATTN_DTYPE_F32;
    long n = 1, m = 4096, threads = 1, calls = 400, copies = 0, lcopies = 6, offset = 0, D = 128;
    long B = 1;
    int paged = 0, int8 = 0, ragged = 0;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--type")) {
            int found = 0;
            for (size_t j = 0; v && j < sizeof types / sizeof types[0]; j++)
                if (!strcmp(v, types[j].name)) {
                    tname = types[j].name;
                    type = types[j].t;
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "attn-ab: --type needs f32, f16, bf16, q8_0 or q4_0\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--queries")) {
            if (!arg_int(a, v, 1, 4096, &n)) return 2;
            i++;
        } else if (!strcmp(a, "--kv-len")) {
            if (!arg_int(a, v, BLOCK, 1048576, &m) || m % BLOCK) {
                if (m % BLOCK) fprintf(stderr, "attn-ab: --kv-len must be a multiple of 16\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--threads")) {
            if (!arg_int(a, v, 1, 1024, &threads)) return 2;
            i++;
        } else if (!strcmp(a, "--calls")) {
            if (!arg_int(a, v, 10, 1000000, &calls)) return 2;
            i++;
        } else if (!strcmp(a, "--copies")) {
            if (!arg_int(a, v, 1, 64, &copies)) return 2;
            i++;
        } else if (!strcmp(a, "--lib-copies")) {
            if (!arg_int(a, v, 1, LIB_COPIES_MAX, &lcopies)) return 2;
            i++;
        } else if (!strcmp(a, "--head-dim")) {
            if (!arg_int(a, v, 32, 256, &D) || D % 32) {
                if (D % 32) fprintf(stderr, "attn-ab: --head-dim must be a multiple of 32\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--offset")) {
            if (!arg_int(a, v, 0, 4095, &offset)) return 2;
            i++;
        } else if (!strcmp(a, "--batch")) {
            if (!arg_int(a, v, 1, 64, &B)) return 2;
            i++;
        } else if (!strcmp(a, "--ragged")) {
            ragged = 1;
        } else if (!strcmp(a, "--paged")) {
            paged = 1;
        } else if (!strcmp(a, "--int8")) {
            int8 = 1;
        } else {
            fprintf(stderr, "attn-ab: unknown option '%s' (attn-ab --help)\n", a);
            return 2;
        }
    }
    if (lcopies > calls)
        lcopies = calls;   /* (every copy timed at least once) */
    if (int8 && type != ATTN_DTYPE_Q8_0 && type != ATTN_DTYPE_Q4_0) {
        fprintf(stderr, "attn-ab: --int8 needs --type q8_0 or q4_0\n");
        return 2;
    }

    /* b[l * lcopies + j]: copy j of library l */
    const int nb = 2 * (int)lcopies;
    build b[2 * LIB_COPIES_MAX];
    memset(b, 0, sizeof b);
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/attn-ab-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "attn-ab: mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int loaded = 1;
    for (int i = 0; i < nb && loaded; i++)
        loaded = load(&b[i], argv[1 + i / (int)lcopies], dir, i);
    /* the copies stay mapped; their names are not needed once loaded */
    for (int i = 0; i < nb; i++)
        if (b[i].file) {
            remove(b[i].file);
            free(b[i].file);
            b[i].file = NULL;
        }
    remove(dir);
    if (!loaded)
        return 1;

    attn_sdpa_desc d;
    b[0].desc_init(&d);
    d.batch = B;
    d.q_heads = HQ;
    d.kv_heads = HKV;
    d.q_len = n;
    d.kv_len = m;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bhsd(HQ, n, D);
    d.k = d.v = attn_view_bhsd(HKV, m, D);
    d.k_type = d.v_type = type;
    d.qk_int8 = int8;
    d.threads = (int)threads;
    if (n > 1) {
        d.align = ATTN_ALIGN_BOTTOM_RIGHT;
        d.window_right = 0;
    }
    const int64_t nblk = m / BLOCK;
    d.use_kv_lens = ragged;
    if (paged) {
        d.kv_block_size = BLOCK;
        d.kv_num_blocks = B * nblk;
        d.kv_max_blocks = nblk;
        d.k = d.v = attn_view_bhsd(HKV, BLOCK, D);   /* a pool block [HKV][16][D] */
    }

    /* The cache: values in [-1, 1) stored as the type, `copies` copies (by
     * default at least 256 MiB of them), one block table (a random order)
     * for all.  Each copy starts `offset` bytes past a page boundary
     * (aligned_alloc(64) put them 64 bytes past one until 1.4.5): on Zen 5
     * D1's paged F16 call took 1.00 ms page-aligned, 1.08 at 64 bytes past,
     * 1.14 at 128 and 0.95 at 4032, the same library in one spell. */
    const int64_t values = B * HKV * m * D;
    int64_t bytes = 0;
    attn_status st = b[0].dtype_bytes(type, values, &bytes);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn-ab: attn_dtype_bytes: %s\n", b[0].status_str(st));
        return 1;
    }
    if (!copies) {
        copies = (256l << 20) / (2 * bytes) + 1;
        copies = copies > 64 ? 64 : copies;
    }
    float *f = malloc((size_t)values * sizeof(float));
    float *q = malloc((size_t)(B * HQ * n * D) * sizeof(float));
    float *o = malloc((size_t)(B * HQ * n * D) * sizeof(float));
    int32_t *table = malloc((size_t)(B * nblk) * sizeof(int32_t));
    int32_t *lens = malloc((size_t)B * sizeof(int32_t));
    void **kv = calloc((size_t)copies * 2, sizeof(void *));
    if (!f || !q || !o || !table || !lens || !kv) {
        fprintf(stderr, "attn-ab: out of memory\n");
        return 1;
    }
    uint64_t seed = 42;
    for (int64_t i = 0; i < values; i++)
        f[i] = next_value(&seed);
    for (int64_t i = 0; i < B * HQ * n * D; i++)
        q[i] = next_value(&seed);
    /* (ragged: at least n keys, as the bottom-right causal rows need) */
    for (long i = 0; i < B; i++) {
        const long len = (m * (i + 1) / B + BLOCK - 1) / BLOCK * BLOCK;
        lens[i] = (int32_t)(ragged ? (len < n ? n : len) : m);
    }
    /* one random order of the pool's blocks, sequence after sequence */
    for (int64_t i = 0; i < B * nblk; i++)
        table[i] = (int32_t)i;
    for (int64_t i = B * nblk - 1; i > 0; i--) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int64_t j = (int64_t)((seed >> 33) % (uint64_t)(i + 1));
        const int32_t t = table[i];
        table[i] = table[j];
        table[j] = t;
    }
    for (long c = 0; c < 2 * copies; c++) {
        char *mem = aligned_alloc(4096, ((size_t)bytes + (size_t)offset + 4095) / 4096 * 4096);
        kv[c] = mem ? mem + offset : NULL;
        if (!kv[c]) {
            fprintf(stderr, "attn-ab: out of memory (%ld copies of %lld bytes)\n", copies,
                    (long long)bytes);
            return 1;
        }
        st = b[0].quantize(type, f, kv[c], values);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn-ab: attn_quantize: %s\n", b[0].status_str(st));
            return 1;
        }
    }
    free(f);

    for (int l = 0; l < nb; l++) {
        st = b[l].plan_create(&b[l].plan, &d);
        if (st == ATTN_OK)
            st = b[l].workspace_size(b[l].plan, &b[l].ws_bytes);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn-ab: %s: plan: %s\n", b[l].path, b[l].status_str(st));
            return 1;
        }
        b[l].ws = aligned_alloc(64, (b[l].ws_bytes + 63) / 64 * 64 + 64);
        b[l].ms = malloc((size_t)calls * sizeof(double));
        if (!b[l].ws || !b[l].ms) {
            fprintf(stderr, "attn-ab: out of memory\n");
            return 1;
        }
    }

    /* Two warm-up rounds over every copy, then the timed ones: A B, B A,
     * A B, ..., round j of a build on its copy j mod lcopies */
    long next = 0;
    for (long r = -2 * lcopies; r < calls; r++)
        for (int i = 0; i < 2; i++) {
            const int l = ((r & 1) ? 1 - i : i) * (int)lcopies + (int)((r + 2 * lcopies) % lcopies);
            attn_sdpa_args a;
            memset(&a, 0, sizeof a);
            a.q = q;
            a.o = o;
            const long c = next++ % copies;
            const void *k = kv[2 * c], *v = kv[2 * c + 1];
            if (type == ATTN_DTYPE_F32) {
                a.k = k;
                a.v = v;
            } else if (type == ATTN_DTYPE_F16 || type == ATTN_DTYPE_BF16) {
                a.k16 = k;
                a.v16 = v;
            } else {
                a.kq = k;
                a.vq = v;
            }
            if (paged)
                a.block_table = table;
            if (ragged)
                a.kv_lens = lens;
            const double t0 = now_ms();
            st = b[l].execute(b[l].plan, &a, b[l].ws, b[l].ws_bytes);
            const double t1 = now_ms();
            if (st != ATTN_OK) {
                fprintf(stderr, "attn-ab: %s: execute: %s\n", b[l].path, b[l].status_str(st));
                return 1;
            }
            if (r >= 0)
                b[l].ms[r / lcopies] = t1 - t0;
        }

    printf("attn-ab: %s%s%s, batch %ld, %ld quer%s, %s%ld keys, d %ld, %ld thread%s; %ld calls "
           "each, alternating, over %ld copies of %.1f MiB (%ld bytes past a page); each library "
           "from %ld copies of its file\n",
           tname, paged ? " paged" : "", int8 ? " int8" : "", B, n, n == 1 ? "y" : "ies",
           ragged ? "up to " : "", m, D,
           threads, threads == 1 ? "" : "s", calls, copies, 2.0 * (double)bytes / 1048576.0,
           offset, lcopies);
    double med[2], p10[2];
    double *all = malloc((size_t)calls * sizeof(double));
    if (!all) {
        fprintf(stderr, "attn-ab: out of memory\n");
        return 1;
    }
    for (int l = 0; l < 2; l++) {
        /* the pooled calls, and each copy's own median */
        long k = 0;
        double lo = 0, hi = 0;
        for (int j = 0; j < lcopies; j++) {
            build *c = &b[l * lcopies + j];
            const long nc = calls / lcopies + (j < calls % lcopies);
            for (long i = 0; i < nc; i++)
                all[k++] = c->ms[i];
            qsort(c->ms, (size_t)nc, sizeof(double), cmp_double);
            const double mc = c->ms[nc / 2];
            lo = j == 0 || mc < lo ? mc : lo;
            hi = j == 0 || mc > hi ? mc : hi;
        }
        qsort(all, (size_t)calls, sizeof(double), cmp_double);
        med[l] = all[calls / 2];
        p10[l] = all[calls / 10];
        printf("%c  attn %-8s median %9.3f ms  p10 %9.3f ms  min %9.3f ms  copies' medians "
               "%.3f-%.3f  %s\n",
               'A' + l, b[l * lcopies].version(), med[l], p10[l], all[0], lo, hi,
               b[l * lcopies].path);
    }
    free(all);
    printf("B / A  median %.3f  p10 %.3f\n", med[1] / med[0], p10[1] / p10[0]);
    for (int l = 0; l < nb; l++) {
        b[l].plan_destroy(b[l].plan);
        free(b[l].ws);
        free(b[l].ms);
    }
    for (long c = 0; c < 2 * copies; c++)
        free((char *)kv[c] - offset);
    free(kv);
    free(q);
    free(o);
    free(table);
    free(lens);
    return 0;
}
