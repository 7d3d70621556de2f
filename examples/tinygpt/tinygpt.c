/*
 * tinygpt: a small GPT trained by attn, generating through attn's decode
 * path (the model: gpt.h; the guide: docs/TINYGPT.md).
 *
 *   tinygpt --data FILE... [options]
 *
 * The files are read in order and concatenated; the first 90% train, the
 * last 10% (if it holds 8 contexts, else the whole text) evaluate.
 *
 * Model:    --layers N (2) --width N (64) --heads N (4) --context N (64)
 * Training: --steps N (200) --batch N (8) --lr X (1e-3) --dropout P (0)
 *           --seed S (1: the initial parameters; batches come from 7)
 *           --threads N (OpenMP's default) --log FILE (step, loss, ms)
 *           --save CKPT --load CKPT (its sizes replace the model options)
 * Checks:   --check            gradients against central differences
 *           --generate N       N bytes after --prompt STR ("The "), with
 *                              --temperature X (0.8) --top-k K (40): through
 *                              the paged F16 KV cache, then the logits of
 *                              every position against a full forward
 *           --heads-report     every head's mean weight on the previous
 *                              token, the first token and itself over
 *                              evaluation text; --expect-prev X exits 1
 *                              unless some head reaches X
 *
 * Every run ends with "eval loss" on 8 fixed evaluation batches (seed 99)
 * and the unigram baseline on the same bytes, in nats and bits per byte.
 */
#define _POSIX_C_SOURCE 200809L
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint8_t *read_files(char **paths, int n, size_t *len)
{
    size_t cap = 1 << 20, used = 0;
    uint8_t *buf = malloc(cap);
    for (int f = 0; f < n && buf; f++) {
        FILE *fp = fopen(paths[f], "rb");
        if (!fp) {
            fprintf(stderr, "tinygpt: cannot open %s\n", paths[f]);
            free(buf);
            return NULL;
        }
        for (;;) {
            if (used == cap) {
                uint8_t *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = nb;
            }
            size_t r = fread(buf + used, 1, cap - used, fp);
            used += r;
            if (r == 0)
                break;
        }
        fclose(fp);
    }
    *len = used;
    return buf;
}

static int gradcheck(gpt_model *M, const uint8_t *tok)
{
    gpt_forward(M, tok, 1);
    gpt_backward(M, tok);
    const gpt_layout *l = &M->l;
    size_t idx[] = { l->wte + 5, l->wpe + 3, l->lnf_g + 1, l->ln1_g + 2, l->in_w + 7,
                     l->in_b + 100 % (3 * M->c.E), l->out_w + 11, l->ln2_b + 4, l->fc1_w + 13,
                     l->fc2_w + 17, l->fc2_b + 1 };
    int bad = 0;
    for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
        size_t i = idx[k];
        float w0 = M->w[i], h = 1e-2f;
        M->w[i] = w0 + h;
        double lp = gpt_forward(M, tok, 1);   /* step 1 again: the same dropout mask */
        M->w[i] = w0 - h;
        double lm = gpt_forward(M, tok, 1);
        M->w[i] = w0;
        double num = (lp - lm) / (2 * h), an = M->g[i];
        double rel = fabs(num - an) / fmax(1e-6, fabs(num) + fabs(an));
        printf("param %zu: analytic %.6e numeric %.6e rel %.2e\n", i, an, num, rel);
        bad += rel > 5e-2 && fabs(num - an) > 1e-5;
    }
    return bad;
}

/* Generates n bytes after the prompt through the KV cache, then compares
 * the logits of every position with one full forward over the text. */
static int generate(const gpt_config *c, const float *w, const char *prompt, int n, float temp,
                    int top_k, uint64_t seed)
{
    int np = (int)strlen(prompt);
    if (np < 1 || np + n > c->T) {
        fprintf(stderr, "tinygpt: prompt (%d bytes) + %d generated must be 1..%d bytes (the context)\n",
                np, n, c->T);
        return 2;
    }
    int total = np + n;
    uint8_t *text = malloc((size_t)total);
    float *gl = malloc((size_t)total * GPT_V * sizeof(float));
    float *fl = malloc((size_t)total * GPT_V * sizeof(float));
    memcpy(text, prompt, (size_t)np);
    gpt_gen *G = gpt_gen_create(c, w);
    double t0 = now();
    int rc = gpt_gen_feed(G, text, np, gl);
    uint64_t s = seed;
    for (int i = np; i < total && rc == 0; i++) {
        double u = (gpt_rng_next(&s) >> 11) * (1.0 / 9007199254740992.0);
        text[i] = (uint8_t)gpt_sample(gl + (size_t)(i - 1) * GPT_V, temp, top_k, u);
        if (i + 1 < total)      /* the last token's logits are not needed */
            rc = gpt_gen_feed(G, text + i, 1, gl + (size_t)i * GPT_V);
    }
    double dt = now() - t0;
    gpt_gen_free(G);
    if (rc == 0)
        rc = gpt_logits(c, w, text, total - 1, fl, NULL);
    if (rc == 0) {
        printf("generated (%d bytes, %.2f ms/token through the paged F16 cache):\n", n,
               1e3 * dt / (n > 0 ? n : 1));
        fwrite(text, 1, (size_t)total, stdout);
        printf("\n");
        /* The cache holds K and V rounded to F16 (a relative error up to
         * 2^-11 each), which moves every later activation by about that
         * much relative, once per layer: the bound is 2e-3 of the largest
         * |logit| (4 x 2^-11: K and V, two layers), at least 2e-3
         * absolute.  Measured on the default model: 2.7e-4 of it after
         * 2000 steps, 3.0e-4 after 30000 (logits up to 34). */
        double maxd = 0, maxl = 0;
        int agree = 0;
        for (int i = 0; i < total - 1; i++) {
            int ag = 0, af = 0;
            for (int k = 0; k < GPT_V; k++) {
                float a = gl[(size_t)i * GPT_V + k], b = fl[(size_t)i * GPT_V + k];
                maxd = fmax(maxd, fabs((double)a - b));
                maxl = fmax(maxl, fabs((double)b));
                if (a > gl[(size_t)i * GPT_V + ag])
                    ag = k;
                if (b > fl[(size_t)i * GPT_V + af])
                    af = k;
            }
            agree += ag == af;
        }
        const double tol = 2e-3 * fmax(1.0, maxl);
        printf("generation check: %d positions, max |logit(cache) - logit(full forward)| = %.3e "
               "= %.2e of the largest |logit| %.2f (tolerance 2e-3 of it), same argmax at %d/%d\n",
               total - 1, maxd, maxd / fmax(1.0, maxl), maxl, agree, total - 1);
        rc = maxd <= tol ? 0 : 1;
        if (rc)
            printf("FAILED: the decode path's logits differ from the full forward\n");
    }
    free(text);
    free(gl);
    free(fl);
    return rc < 0 ? 1 : rc;
}

/* The mean weight on i - 1 over rows i = 1..n-1 of uniform causal
 * attention: (1/2 + 1/3 + ... + 1/n) / (n - 1). */
static double uniform_prev(int n)
{
    double s = 0;
    for (int i = 1; i < n; i++)
        s += 1.0 / (i + 1);
    return s / (n - 1);
}

/* Every head's mean attention weight on the previous token (i - 1, over
 * rows i >= 1), on the first token (over rows i >= 1) and on itself, over
 * 8 evaluation windows of the context's length. */
static int heads_report(const gpt_config *c, const float *w, const uint8_t *text, size_t len,
                        double expect_prev)
{
    int n = c->T, LH = c->L * c->H;
    float *aw = malloc((size_t)LH * n * n * sizeof(float));
    double *prev = calloc((size_t)LH, sizeof(double)), *first = calloc((size_t)LH, sizeof(double));
    double *self = calloc((size_t)LH, sizeof(double)), *top = calloc((size_t)LH, sizeof(double));
    uint64_t s = 99;
    const int windows = 8;
    int rc = 0;
    for (int k = 0; k < windows; k++) {
        size_t o = gpt_rng_next(&s) % (len - (size_t)n);
        if (gpt_logits(c, w, text + o, n, NULL, aw)) {
            rc = 1;
            break;
        }
        for (int h = 0; h < LH; h++) {
            const float *a = aw + (size_t)h * n * n;
            for (int i = 1; i < n; i++) {
                prev[h] += a[(size_t)i * n + i - 1] / ((n - 1.0) * windows);
                first[h] += a[(size_t)i * n] / ((n - 1.0) * windows);
                int m = 0;      /* the key with the largest weight (the first of ties) */
                for (int j = 1; j <= i; j++)
                    if (a[(size_t)i * n + j] > a[(size_t)i * n + m])
                        m = j;
                top[h] += (m == i - 1) / ((n - 1.0) * windows);
            }
            for (int i = 0; i < n; i++)
                self[h] += a[(size_t)i * n + i] / ((double)n * windows);
        }
    }
    if (rc)     /* gpt_logits said why */
        goto out;
    int best = 0;
    printf("head     previous  first   self   (mean weight over %d windows of %d bytes);"
           " rows whose largest weight is on the previous byte\n", windows, n);
    for (int h = 0; h < LH; h++) {
        printf("L%d H%d   %7.3f %7.3f %7.3f   %5.1f%%\n", h / c->H + 1, h % c->H + 1, prev[h],
               first[h], self[h], 100 * top[h]);
        if (prev[h] > prev[best])
            best = h;
    }
    printf("previous-token head: L%d H%d, mean weight %.3f on i-1 (uniform causal attention: "
           "%.3f), its largest weight on i-1 in %.1f%% of rows\n", best / c->H + 1, best % c->H + 1,
           prev[best], uniform_prev(n), 100 * top[best]);
    if (expect_prev > 0 && !(prev[best] >= expect_prev)) {
        printf("FAILED: no head puts a mean weight >= %.2f on the previous token\n", expect_prev);
        rc = 1;
    }
out:
    free(aw);
    free(prev);
    free(first);
    free(self);
    free(top);
    return rc;
}

/* Cross-entropy of the byte frequencies of train (add-one) on eval bytes. */
static double unigram_loss(const uint8_t *train, size_t ntrain, const uint8_t *eval, size_t neval)
{
    double cnt[GPT_V];
    for (int k = 0; k < GPT_V; k++)
        cnt[k] = 1;
    for (size_t i = 0; i < ntrain; i++)
        cnt[train[i]] += 1;
    double tot = (double)ntrain + GPT_V, loss = 0;
    for (size_t i = 0; i < neval; i++)
        loss -= log(cnt[eval[i]] / tot);
    return loss / (double)neval;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: tinygpt --data FILE... [--layers N] [--width N] [--heads N] [--context N]\n"
            "         [--steps N] [--batch N] [--lr X] [--dropout P] [--seed S] [--threads N]\n"
            "         [--log FILE] [--save CKPT] [--load CKPT] [--check]\n"
            "         [--generate N [--prompt STR] [--temperature X] [--top-k K]]\n"
            "         [--heads-report [--expect-prev X]]\n");
    return 2;
}

/* A whole number in [lo, hi] from s, or exit 2. */
static long arg_int(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "tinygpt: %s wants a whole number in [%ld, %ld], not '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

static double arg_real(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "tinygpt: %s wants a number in [%g, %g], not '%s'\n", opt, lo, hi, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    gpt_config c = { 2, 64, 4, 64, 8, 0.0f, 0 };
    long steps = 200;
    int check = 0, nfiles = 0, gen = -1, top_k = 40, report = 0;
    double lr = 1e-3, temp = 0.8, expect_prev = 0;
    uint64_t seed = 1;
    const char *save = NULL, *load = NULL, *logpath = NULL, *prompt = "The ";
    char *files[64];
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int more = i + 1 < argc;
#define VAL (more ? argv[++i] : (fprintf(stderr, "tinygpt: %s needs a value\n", o), exit(2), ""))
        if (!strcmp(o, "--steps"))
            steps = arg_int(o, VAL, 0, 100000000);
        else if (!strcmp(o, "--layers"))
            c.L = (int)arg_int(o, VAL, 0, 64);
        else if (!strcmp(o, "--width"))
            c.E = (int)arg_int(o, VAL, 1, 4096);
        else if (!strcmp(o, "--heads"))
            c.H = (int)arg_int(o, VAL, 1, 4096);
        else if (!strcmp(o, "--context"))
            c.T = (int)arg_int(o, VAL, 2, 65536);
        else if (!strcmp(o, "--batch"))
            c.B = (int)arg_int(o, VAL, 1, 65536);
        else if (!strcmp(o, "--lr"))
            lr = arg_real(o, VAL, 0, 1);
        else if (!strcmp(o, "--dropout"))
            c.dropout = (float)arg_real(o, VAL, 0, 0.99);
        else if (!strcmp(o, "--seed"))
            seed = (uint64_t)arg_int(o, VAL, 0, 2147483647);
        else if (!strcmp(o, "--threads"))
            c.threads = (int)arg_int(o, VAL, 1, 1024);
        else if (!strcmp(o, "--log"))
            logpath = VAL;
        else if (!strcmp(o, "--check"))
            check = 1;
        else if (!strcmp(o, "--save"))
            save = VAL;
        else if (!strcmp(o, "--load"))
            load = VAL;
        else if (!strcmp(o, "--generate"))
            gen = (int)arg_int(o, VAL, 0, 65536);
        else if (!strcmp(o, "--prompt"))
            prompt = VAL;
        else if (!strcmp(o, "--temperature"))
            temp = arg_real(o, VAL, 0, 100);
        else if (!strcmp(o, "--top-k"))
            top_k = (int)arg_int(o, VAL, 0, GPT_V);
        else if (!strcmp(o, "--heads-report"))
            report = 1;
        else if (!strcmp(o, "--expect-prev"))
            expect_prev = arg_real(o, VAL, 0, 1);
        else if (!strcmp(o, "--data")) {
            while (i + 1 < argc && argv[i + 1][0] != '-' && nfiles < 64)
                files[nfiles++] = argv[++i];
        } else
            return usage();
#undef VAL
    }
    if (!nfiles) {
        fprintf(stderr, "tinygpt: --data FILE... is required\n");
        return usage();
    }
    if (c.E % c.H) {
        fprintf(stderr, "tinygpt: --heads (%d) must divide --width (%d)\n", c.H, c.E);
        return 2;
    }
#ifdef _OPENMP
    if (c.threads)
        omp_set_num_threads(c.threads);
#endif
    size_t len;
    uint8_t *text = read_files(files, nfiles, &len);
    if (!text)
        return 2;
    if (check) {
        /* a small model, so that the check runs in seconds under valgrind;
         * with dropout, so that the mask is differentiated too */
        gpt_config small = { 2, 32, 2, 16, 2, 0.1f, c.threads };
        c = small;
    }
    float *loaded = NULL;
    if (load && gpt_load(load, &c, &loaded)) {
        free(text);
        return 1;
    }
    if (len < 2 * ((size_t)c.T + 2)) {
        fprintf(stderr, "tinygpt: the data (%zu bytes) is shorter than two contexts\n", len);
        free(text);
        free(loaded);
        return 2;
    }
    /* train on the first 90%, evaluate on the rest when it holds 8
     * contexts (else on the whole text) */
    size_t ntrain = len, eval0 = 0;
    if (len / 10 >= 8 * ((size_t)c.T + 1)) {
        ntrain = len - len / 10;
        eval0 = ntrain;
    }
    const uint8_t *etext = text + eval0;
    size_t elen = len - eval0;

    gpt_model M;
    if (gpt_init(&M, &c, seed)) {
        free(text);
        free(loaded);
        return 1;
    }
    if (loaded) {
        memcpy(M.w, loaded, M.l.total * sizeof(float));
        free(loaded);
        printf("loaded %s\n", load);
    }
    uint8_t *tok = malloc((size_t)c.B * (c.T + 1));
    uint64_t s = 7;
    int rc = 0;
    if (check) {
        gpt_batch(text, ntrain, &c, &s, tok);
        rc = gradcheck(&M, tok) ? 1 : 0;
        goto done;
    }
    printf("tinygpt: %zu parameters, L %d E %d H %d T %d B %d, dropout %g; %zu bytes of text "
           "(%zu train, %zu eval)\n",
           M.l.total, c.L, c.E, c.H, c.T, c.B, c.dropout, len, ntrain, elen);
    FILE *logf = NULL;
    if (logpath && !(logf = fopen(logpath, "w"))) {
        fprintf(stderr, "tinygpt: cannot write %s\n", logpath);
        rc = 1;
        goto done;
    }
    if (logf)
        fprintf(logf, "step\tloss\tms\tattn_ms\n");
    double t_all = 0, t_attn = 0;
    for (long step = 1; step <= steps; step++) {
        gpt_batch(text, ntrain, &c, &s, tok);
        double t0 = now(), a0 = M.attn_seconds;
        double loss = gpt_forward(&M, tok, step);
        gpt_backward(&M, tok);
        gpt_adamw(&M, step, (float)lr, 0.01f, 1.0f);
        double dt = now() - t0, da = M.attn_seconds - a0;
        t_all += dt;
        t_attn += da;
        if (logf)
            fprintf(logf, "%ld\t%.6f\t%.3f\t%.3f\n", step, loss, 1e3 * dt, 1e3 * da);
        if (step == 1 || step % 100 == 0 || step == steps)
            printf("step %5ld loss %.4f (%.3f bits/byte)\n", step, loss, loss / log(2.0));
    }
    if (logf)
        fclose(logf);
    if (steps > 0)
        printf("%.2f ms/step, attention (attn's MHA forward + backward) %.2f ms/step = %.0f%%\n",
               1e3 * t_all / steps, 1e3 * t_attn / steps, 100 * t_attn / t_all);
    /* The same 8 evaluation batches (seed 99) every time: a loaded
     * checkpoint gives the loss its training run printed. */
    {
        if (gpt_set_dropout(&M, 0)) {
            rc = 1;
            goto done;
        }
        uint64_t es = 99;
        double eval = 0;
        for (int k = 0; k < 8; k++) {
            gpt_batch(etext, elen, &c, &es, tok);
            eval += gpt_forward(&M, tok, 0) / 8;
        }
        double uni = unigram_loss(text, ntrain, etext, elen);
        printf("eval loss %.6f (%.4f bits/byte); unigram baseline %.4f (%.4f bits/byte)\n", eval,
               eval / log(2.0), uni, uni / log(2.0));
    }
    if (save && gpt_save(&M.c, M.w, save))
        rc = 1;
    if (!rc && report)
        rc = heads_report(&c, M.w, etext, elen, expect_prev);
    if (!rc && gen >= 0)
        rc = generate(&c, M.w, prompt, gen, (float)temp, top_k, seed + 12345);
done:
    gpt_free(&M);
    free(tok);
    free(text);
    return rc;
}
