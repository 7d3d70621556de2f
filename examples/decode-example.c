/* decode-example: a small GQA decoder generating tokens with attn's decode
 * path and a paged Q8_0 KV cache (ggml's 8-bit blocks: 34 bytes per 32
 * values; `decode-example f16` (or bf16, q4_0, f32) stores it otherwise).
 *
 * Two layers of random weights (d_model 256, 8 query heads, 2 key/value
 * heads of dim 32), a vocabulary of 64 random embeddings.  The prompt (16
 * tokens) is prefilled in one causal call per layer; then each step
 * appends the new token's K and V to every layer's paged cache (quantized
 * or rounded to the storage type by attn_kv_append; block 16,
 * blocks handed out in a scrambled order, as a cache manager would), runs
 * attention for one query against the cache and picks the next token
 * greedily.  Each step's attention output is checked against a full
 * recompute in double precision from the values the cache holds (read
 * back with attn_dequantize); the
 * program prints the tokens, tokens per second and the largest error, and
 * exits 1 if an error exceeds 1e-4.
 */
/* clock_gettime and CLOCK_MONOTONIC under -std=c11 (POSIX.1b) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <attn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LAYERS = 2, E = 256, HQ = 8, HKV = 2, D = 32, VOCAB = 64, PROMPT = 16, GEN = 48,
       MAXLEN = PROMPT + GEN, BS = 16, MAXB = (MAXLEN + BS - 1) / BS, NBLK = MAXB + 3 };

static uint64_t rng = 0x243F6A8885A308D3ull;
static float frand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *randv(size_t n, float s)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * s;
    return p;
}

/* y[r][o] = sum_i x[r][i] w[o][i] (nn.Linear without bias) */
static void linear(const float *x, int rows, const float *w, int in, int out, float *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < out; o++) {
            float s = 0.0f;
            for (int i = 0; i < in; i++)
                s += x[r * in + i] * w[o * in + i];
            y[r * out + o] = s;
        }
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define CHECK(call)                                                                  \
    do {                                                                             \
        attn_status st_ = (call);                                                    \
        if (st_ != ATTN_OK) {                                                        \
            fprintf(stderr, "%s: %s\n", #call, attn_status_str(st_));                \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

typedef struct layer {
    float *wq, *wk, *wv, *wo;
    void *kpool, *vpool;  /* [NBLK][HKV][BS][D] values of the storage type */
} layer;

static attn_dtype cache_type = ATTN_DTYPE_Q8_0;

/* The address of value offset `values` of a pool (a whole number of blocks
 * for the block types). */
static const void *at(const void *pool, size_t values)
{
    size_t bytes;
    CHECK(attn_dtype_bytes(cache_type, (int64_t)values, &bytes));
    return (const char *)pool + bytes;
}

/* The cache and attention of every layer share one description. */
static attn_sdpa_desc cache_desc(int n)
{
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = 1;
    d.q_heads = HQ;
    d.kv_heads = HKV;
    d.q_len = n;
    d.kv_len = MAXLEN;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bshd(HQ, n, D);       /* the projections' layout */
    d.k_type = d.v_type = cache_type;
    d.kv_block_size = BS;
    d.kv_num_blocks = NBLK;
    d.kv_max_blocks = MAXB;
    d.k = d.v = attn_view_bhsd(HKV, BS, D);      /* a pool block: [HKV][BS][D] */
    d.align = ATTN_ALIGN_BOTTOM_RIGHT;           /* causal against the cache */
    d.window_right = 0;
    d.use_kv_lens = 1;
    return d;
}

/* Attention of query row i (of n) of head h, in double, from the cache. */
static double check_row(const layer *L, const int32_t *table, int len, const float *q, int n,
                        int i, int h, const float *o)
{
    const int hk = h / (HQ / HKV), last = len - n + i;   /* bottom-right causal */
    double mx = -INFINITY, l = 0.0, acc[D] = { 0 };
    float kr[D], vr[D];
    double s[MAXLEN];
    for (int j = 0; j <= last; j++) {
        const size_t row = ((size_t)table[j / BS] * HKV + hk) * BS + j % BS;
        CHECK(attn_dequantize(cache_type, at(L->kpool, row * D), kr, D));
        double dot = 0.0;
        for (int x = 0; x < D; x++)
            dot += (double)q[(i * HQ + h) * D + x] * kr[x];
        s[j] = dot / sqrt((double)D);
        if (s[j] > mx)
            mx = s[j];
    }
    for (int j = 0; j <= last; j++) {
        const size_t row = ((size_t)table[j / BS] * HKV + hk) * BS + j % BS;
        CHECK(attn_dequantize(cache_type, at(L->vpool, row * D), vr, D));
        const double p = exp(s[j] - mx);
        l += p;
        for (int x = 0; x < D; x++)
            acc[x] += p * vr[x];
    }
    double err = 0.0;
    for (int x = 0; x < D; x++)
        err = fmax(err, fabs(acc[x] / l - o[(i * HQ + h) * D + x]));
    return err;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; attn_dtype type; } types[] = {
        { "q8_0", ATTN_DTYPE_Q8_0 }, { "q4_0", ATTN_DTYPE_Q4_0 }, { "f16", ATTN_DTYPE_F16 },
        { "bf16", ATTN_DTYPE_BF16 }, { "f32", ATTN_DTYPE_F32 },
    };
    const char *type_name = argc > 1 ? argv[1] : "q8_0";
    int known = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(type_name, types[i].name)) {
            cache_type = types[i].type;
            known = 1;
        }
    if (!known || argc > 2) {
        fprintf(stderr, "usage: decode-example [q8_0|q4_0|f16|bf16|f32]  (the KV cache's storage)\n");
        return 2;
    }
    size_t pool_bytes;
    CHECK(attn_dtype_bytes(cache_type, (int64_t)NBLK * HKV * BS * D, &pool_bytes));
    float *emb = randv((size_t)VOCAB * E, 1.0f);
    layer L[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        L[l].wq = randv((size_t)HQ * D * E, 0.0625f);
        L[l].wk = randv((size_t)HKV * D * E, 0.0625f);
        L[l].wv = randv((size_t)HKV * D * E, 0.0625f);
        L[l].wo = randv((size_t)E * HQ * D, 0.0625f);
        L[l].kpool = calloc(pool_bytes, 1);
        L[l].vpool = calloc(pool_bytes, 1);
    }
    /* the block table: the sequence's blocks, scrambled over the pool */
    int32_t table[MAXB];
    for (int b = 0; b < MAXB; b++)
        table[b] = (int32_t)((b * 5 + 2) % NBLK);

    int tokens[MAXLEN];
    for (int t = 0; t < PROMPT; t++)
        tokens[t] = (t * 7 + 3) % VOCAB;
    int32_t len[LAYERS] = { 0 };
    double max_err = 0.0, t_gen = 0.0, t_check = 0.0;
    float *x = malloc((size_t)PROMPT * E * sizeof(float)), *h = malloc((size_t)PROMPT * E * sizeof(float));
    float *q = malloc((size_t)PROMPT * HQ * D * sizeof(float));
    float *k = malloc((size_t)PROMPT * HKV * D * sizeof(float));
    float *v = malloc((size_t)PROMPT * HKV * D * sizeof(float));
    float *o = malloc((size_t)PROMPT * HQ * D * sizeof(float));

    printf("prompt:");
    for (int t = 0; t < PROMPT; t++)
        printf(" %d", tokens[t]);
    printf("\ngenerated:");
    for (int pos = 0; pos < MAXLEN - 1;) {
        /* the new tokens: the whole prompt first, then one at a time */
        const int n = pos == 0 ? PROMPT : 1;
        const double t0 = now_s();
        t_check = 0.0;
        for (int r = 0; r < n; r++)
            memcpy(x + (size_t)r * E, emb + (size_t)tokens[pos + r] * E, E * sizeof(float));
        for (int l = 0; l < LAYERS; l++) {
            linear(x, n, L[l].wq, E, HQ * D, q);
            linear(x, n, L[l].wk, E, HKV * D, k);
            linear(x, n, L[l].wv, E, HKV * D, v);
            attn_sdpa_desc d = cache_desc(n);
            /* append K and V ([n][HKV][D] rows: a BSHD view), quantized
             * (or rounded) to the cache's type */
            attn_kv_append_args ap = { 0 };
            ap.k_cache = L[l].kpool;
            ap.v_cache = L[l].vpool;
            ap.block_table = table;
            ap.kv_lens = &len[l];
            ap.t = n;
            ap.k_new = k;
            ap.v_new = v;
            ap.k_new_view = ap.v_new_view = attn_view_bshd(HKV, n, D);
            CHECK(attn_kv_append(&d, &ap));
            attn_sdpa_args a = { 0 };
            a.q = q;
            a.o = o;
            if (cache_type == ATTN_DTYPE_Q8_0 || cache_type == ATTN_DTYPE_Q4_0) {
                a.kq = L[l].kpool;
                a.vq = L[l].vpool;
            } else if (cache_type == ATTN_DTYPE_F32) {
                a.k = L[l].kpool;
                a.v = L[l].vpool;
            } else {
                a.k16 = L[l].kpool;
                a.v16 = L[l].vpool;
            }
            a.block_table = table;
            a.kv_lens = &len[l];
            CHECK(attn_sdpa(&d, &a));
            const double c0 = now_s();   /* the check is not timed */
            for (int i = 0; i < n; i++)
                for (int hh = 0; hh < HQ; hh++)
                    max_err = fmax(max_err, check_row(&L[l], table, len[l], q, n, i, hh, o));
            t_check += now_s() - c0;
            linear(o, n, L[l].wo, HQ * D, E, h);
            for (size_t i = 0; i < (size_t)n * E; i++)
                x[i] += h[i];
        }
        /* the next token: the embedding nearest to what the layers added to
         * the last row (the row itself is dominated by its own token) */
        float *last = x + (size_t)(n - 1) * E;
        const float *own = emb + (size_t)tokens[pos + n - 1] * E;
        for (int i = 0; i < E; i++)
            last[i] -= own[i];
        int best = 0;
        float bs = -INFINITY;
        for (int c = 0; c < VOCAB; c++) {
            float s = 0.0f;
            for (int i = 0; i < E; i++)
                s += last[i] * emb[(size_t)c * E + i];
            if (s > bs) {
                bs = s;
                best = c;
            }
        }
        pos += n;
        tokens[pos] = best;
        if (n == 1)
            t_gen += now_s() - t0 - t_check;
        printf(" %d", best);
    }
    printf("\n%d tokens generated at %.0f tokens/s (%d layers, paged %s cache of %d tokens, "
           "%zu bytes per layer and tensor), max |attn - float64 recompute| = %.2e\n",
           MAXLEN - PROMPT, (MAXLEN - PROMPT - 1) / t_gen, LAYERS, type_name, MAXLEN, pool_bytes,
           max_err);
    for (int l = 0; l < LAYERS; l++) {
        free(L[l].wq); free(L[l].wk); free(L[l].wv); free(L[l].wo);
        free(L[l].kpool); free(L[l].vpool);
    }
    free(emb); free(x); free(h); free(q); free(k); free(v); free(o);
    return max_err <= 1e-4 ? 0 : 1;
}
