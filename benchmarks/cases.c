/* attn-bench's case table, the one place the cases are written (cases.h
 * says what each field means).  `attn-bench --list [--json]` prints it. */
#include "cases.h"

#include <string.h>

#define SHAPE(b, hq, hkv, n_, m_, d_) .B = b, .Hq = hq, .Hkv = hkv, .n = n_, .m = m_, .d = d_
#define ROW(label, type, paged) { label, ATTN_DTYPE_##type, paged }
#define ROWI(label, type, paged) { label, ATTN_DTYPE_##type, paged, 1 }

/* long sequences (B = 1, H = 8, d = 64; only when named, --case L1 naming
 * every L1-*): causal linear attention; window 256 + 256 and the first 32
 * tokens global; BigBird, block 64, 3 window + 2 global + 3 random blocks */
#define L1(id_, n_) { .id = id_, .name = "linear-causal", .kind = K_LINEAR, \
                      SHAPE(1, 8, 8, n_, n_, 64), .causal = 1, .extra = 1, .group = "L1" }
#define X1(id_, n_) { .id = id_, .name = "longformer", .kind = K_GLOBAL, \
                      SHAPE(1, 8, 8, n_, n_, 64), .extra = 1, .group = "X1", \
                      .window = 256, .global = 32 }
#define X2(id_, n_) { .id = id_, .name = "bigbird", .kind = K_BIGBIRD, \
                      SHAPE(1, 8, 8, n_, n_, 64), .extra = 1, .group = "X2", .block = 64, \
                      .bb_window = 3, .bb_global = 2, .bb_random = 3, .seed = 2020 }
/* S5 over cache lengths, F32 and F16 (--case DL: the data of
 * docs/bench-decode.svg, benchmarks/plot-decode.py) */
#define DL(id_, m_) { .id = id_, .name = "decode-len", .kind = K_DECODE, \
                      SHAPE(1, 32, 8, 1, m_, 128), .extra = 1, .group = "DL", \
                      .rows = { ROW("f32", F32, 0), ROW("f16", F16, 0) } }

const bench_case bench_cases[] = {
    /* the dense forward cases (run by default) */
    { .id = "S1", .name = "bert-base", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64), .ort = "mha" },
    { .id = "S2", .name = "gpt2-causal", .kind = K_DENSE, SHAPE(4, 12, 12, 1024, 1024, 64),
      .causal = 1, .ort = "mha" },
    { .id = "S3", .name = "long-causal", .kind = K_DENSE, SHAPE(1, 8, 8, 4096, 4096, 64),
      .causal = 1, .ort = "mha" },
    { .id = "S4", .name = "cross", .kind = K_DENSE, SHAPE(8, 8, 8, 128, 1024, 64), .ort = "mha" },
    { .id = "S5", .name = "decode-gqa", .kind = K_DENSE, SHAPE(1, 32, 8, 1, 4096, 128) },
    { .id = "S6", .name = "mha-module", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64), .mha = 1 },
    { .id = "S7", .name = "tiny", .kind = K_DENSE, SHAPE(32, 8, 8, 64, 64, 32), .ort = "mha" },
    { .id = "S8", .name = "vit", .kind = K_DENSE, SHAPE(8, 12, 12, 197, 197, 64), .quick = 1,
      .ort = "mha" },
    { .id = "S9", .name = "padded", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64), .padded = 1,
      .ort = "mha" },
    /* S2 and S3 without their mask: what causality saves */
    { .id = "S2n", .name = "gpt2-nomask", .kind = K_DENSE, SHAPE(4, 12, 12, 1024, 1024, 64),
      .extra = 1 },
    { .id = "S3n", .name = "long-nomask", .kind = K_DENSE, SHAPE(1, 8, 8, 4096, 4096, 64),
      .extra = 1 },
    /* training: forward with logsumexp, then the backward (dQ, dK, dV) */
    { .id = "T1", .name = "train-bert", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64), .train = 1 },
    { .id = "T1d", .name = "train-bert-p.1", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64),
      .train = 1, .dropout = 0.1 },
    { .id = "T2", .name = "train-gpt2", .kind = K_DENSE, SHAPE(4, 12, 12, 1024, 1024, 64),
      .causal = 1, .train = 1 },
    /* the whole layer: train_forward (saving the context), then backward */
    { .id = "T3", .name = "train-mha", .kind = K_DENSE, SHAPE(8, 12, 12, 512, 512, 64), .mha = 1,
      .train = 1 },
    /* the cost of a plan on a tiny problem: create + destroy, the one-shot
     * attn_sdpa, and the execute of a reused plan (attn-bench.c) */
    { .id = "P1", .name = "plan-cost", .kind = K_PLAN, SHAPE(1, 1, 1, 4, 4, 8), .quick = 1 },
    /* long sequences (long.c) */
    L1("L1-1k", 1024), L1("L1-4k", 4096), L1("L1-16k", 16384), L1("L1-64k", 65536),
    X1("X1-4k", 4096), X1("X1-16k", 16384), X1("X1-64k", 65536),
    X2("X2-4k", 4096), X2("X2-16k", 16384),
    /* decoding (only when named; --case D names S5, D1-D3): one or a few
     * queries against a KV cache far larger than the L3 (decode.c).  This
     * S5 is the decode table's S5 row; the dense S5 above stays in the
     * default run. */
    { .id = "S5", .name = "decode-f32", .kind = K_DECODE, SHAPE(1, 32, 8, 1, 4096, 128),
      .extra = 1, .group = "D", .rows = { ROW("f32", F32, 0) }, .ort = "gqa" },
    { .id = "D1", .name = "decode-f16/bf16", .kind = K_DECODE, SHAPE(1, 32, 8, 1, 4096, 128),
      .extra = 1, .group = "D",
      .rows = { ROW("f32", F32, 0), ROW("f16", F16, 0), ROW("bf16", BF16, 0),
                ROW("q8_0", Q8_0, 0), ROW("q4_0", Q4_0, 0),
                ROWI("q8_0-int8", Q8_0, 0), ROWI("q4_0-int8", Q4_0, 0) } },
    /* kv lengths 512, 1024, ..., 4096; a paged cache (block 16), the same
     * values contiguous, and the pool's blocks in order (diagnostic) */
    { .id = "D2", .name = "decode-paged", .kind = K_DECODE, SHAPE(8, 32, 8, 1, 4096, 128),
      .padded = 1, .extra = 1, .group = "D",
      .rows = { ROW("f16-paged", F16, 1), ROW("f16-contig", F16, 0), ROW("f16-pg-ord", F16, 2),
                ROW("f32-paged", F32, 1), ROW("f32-contig", F32, 0),
                ROW("bf16-paged", BF16, 1), ROW("bf16-contig", BF16, 0),
                ROW("q8_0-paged", Q8_0, 1), ROW("q8_0-contig", Q8_0, 0),
                ROW("q4_0-paged", Q4_0, 1), ROW("q4_0-contig", Q4_0, 0),
                ROWI("q8_0-int8-paged", Q8_0, 1), ROWI("q4_0-int8-paged", Q4_0, 1) } },
    /* 4 queries, bottom-right causal */
    { .id = "D3", .name = "decode-4q-causal", .kind = K_DECODE, SHAPE(1, 32, 8, 4, 4096, 128),
      .causal = 1, .extra = 1, .group = "D",
      .rows = { ROW("f32", F32, 0), ROW("f16", F16, 0), ROW("q8_0", Q8_0, 0), ROW("q4_0", Q4_0, 0),
                ROWI("q8_0-int8", Q8_0, 0), ROWI("q4_0-int8", Q4_0, 0) },
      .ort = "gqa" },
    DL("DL-512", 512), DL("DL-1k", 1024), DL("DL-2k", 2048), DL("DL-4k", 4096),
    DL("DL-8k", 8192), DL("DL-16k", 16384), DL("DL-32k", 32768),
};
const int bench_ncases = (int)(sizeof bench_cases / sizeof bench_cases[0]);

int64_t case_kv_len(const bench_case *c, int64_t b)
{
    if (!c->padded)
        return c->m;
    return c->kind == K_DECODE ? (b + 1) * (c->m / c->B) : c->m - b * (c->m / c->B);
}

int case_named(const bench_case *c, const char *want)
{
    return !strcmp(want, c->id) || (c->group && !strcmp(want, c->group));
}

const char *case_kind_name(int kind)
{
    static const char *const names[] = { "dense", "linear", "global", "bigbird", "decode", "plan" };
    return kind >= 0 && kind < (int)(sizeof names / sizeof names[0]) ? names[kind] : "?";
}

static const char *dtype_name(attn_dtype t)
{
    return t == ATTN_DTYPE_F32 ? "f32" : t == ATTN_DTYPE_F16 ? "f16" : "bf16";
}

/* When it runs: by default, with --quick, or only when named. */
static const char *when(const bench_case *c)
{
    return c->extra ? "named" : c->quick ? "default,quick" : "default";
}

static void str_or_null(FILE *f, const char *s)
{
    if (s)
        fprintf(f, "\"%s\"", s);
    else
        fprintf(f, "null");
}

static void print_json(FILE *f, const bench_case *c)
{
    fprintf(f, "{\"id\":\"%s\",\"name\":\"%s\",\"kind\":\"%s\",\"B\":%lld,\"Hq\":%lld,"
               "\"Hkv\":%lld,\"n\":%lld,\"m\":%lld,\"d\":%lld,\"causal\":%s,",
            c->id, c->name, case_kind_name(c->kind), (long long)c->B, (long long)c->Hq,
            (long long)c->Hkv, (long long)c->n, (long long)c->m, (long long)c->d,
            c->causal ? "true" : "false");
    if (c->causal)
        fprintf(f, "\"align\":\"%s\",", c->kind == K_DECODE ? "bottom-right" : "top-left");
    fprintf(f, "\"padded\":%s,", c->padded ? "true" : "false");
    if (c->padded) {
        fprintf(f, "\"kv_lens\":[");
        for (int64_t b = 0; b < c->B; b++)
            fprintf(f, "%s%lld", b ? "," : "", (long long)case_kv_len(c, b));
        fprintf(f, "],");
    }
    fprintf(f, "\"mha\":%s,\"train\":%s,\"dropout\":%g,\"extra\":%s,\"quick\":%s,\"group\":",
            c->mha ? "true" : "false", c->train ? "true" : "false", c->dropout,
            c->extra ? "true" : "false", c->quick ? "true" : "false");
    str_or_null(f, c->group);
    if (c->kind == K_GLOBAL)
        fprintf(f, ",\"window\":%lld,\"global\":%lld", (long long)c->window, (long long)c->global);
    if (c->kind == K_BIGBIRD)
        fprintf(f, ",\"block\":%lld,\"bigbird\":{\"window\":%lld,\"global\":%lld,\"random\":%lld,"
                   "\"seed\":%llu}",
                (long long)c->block, (long long)c->bb_window, (long long)c->bb_global,
                (long long)c->bb_random, (unsigned long long)c->seed);
    if (c->kind == K_DECODE) {
        fprintf(f, ",\"rows\":[");
        for (int r = 0; c->rows[r].label; r++)
            fprintf(f, "%s{\"label\":\"%s\",\"dtype\":\"%s\",\"paged\":%d}", r ? "," : "",
                    c->rows[r].label, dtype_name(c->rows[r].type), c->rows[r].paged);
        fprintf(f, "]");
    }
    fprintf(f, ",\"ort\":");
    str_or_null(f, c->ort);
    fprintf(f, "}");
}

static void print_text(FILE *f, const bench_case *c)
{
    char what[96] = "";
    size_t k = 0;
#define ADD(...) (k += (size_t)snprintf(what + k, k < sizeof what ? sizeof what - k : 0, __VA_ARGS__))
    if (c->causal)
        ADD("%s ", c->kind == K_DECODE ? "causal(bottom-right)" : "causal");
    if (c->padded)
        ADD("kv_lens %lld..%lld ", (long long)case_kv_len(c, 0), (long long)case_kv_len(c, c->B - 1));
    if (c->mha)
        ADD("layer ");
    if (c->train)
        ADD("train ");
    if (c->dropout > 0)
        ADD("dropout %g ", c->dropout);
    if (c->kind == K_GLOBAL)
        ADD("window %lld, %lld global ", (long long)c->window, (long long)c->global);
    if (c->kind == K_BIGBIRD)
        ADD("block %lld, %lld/%lld/%lld blocks ", (long long)c->block, (long long)c->bb_window,
            (long long)c->bb_global, (long long)c->bb_random);
    for (int r = 0; c->kind == K_DECODE && c->rows[r].label; r++)
        ADD("%s%s", r ? "," : "rows ", c->rows[r].label);
#undef ADD
    while (k > 0 && k < sizeof what && what[k - 1] == ' ')
        what[--k] = '\0';
    fprintf(f, "%-7s %-17s %-8s %3lld %4lld %4lld %6lld %6lld %4lld  %-14s %-6s %s\n", c->id, c->name,
            case_kind_name(c->kind), (long long)c->B, (long long)c->Hq, (long long)c->Hkv,
            (long long)c->n, (long long)c->m, (long long)c->d, when(c), c->group ? c->group : "-",
            what);
}

void cases_print(FILE *f, int json)
{
    if (json) {
        fprintf(f, "[\n");
        for (int i = 0; i < bench_ncases; i++) {
            fprintf(f, "  ");
            print_json(f, &bench_cases[i]);
            fprintf(f, "%s\n", i + 1 < bench_ncases ? "," : "");
        }
        fprintf(f, "]\n");
        return;
    }
    fprintf(f, "%-7s %-17s %-8s %3s %4s %4s %6s %6s %4s  %-14s %-6s %s\n", "case", "name", "kind",
            "B", "Hq", "Hkv", "n", "m", "d", "when", "group", "options");
    for (int i = 0; i < bench_ncases; i++)
        print_text(f, &bench_cases[i]);
    fprintf(f, "\nwhen: default = with no --case, quick = with --quick and no --case, named = only "
               "when named with --case (its id or its group).\n");
}
