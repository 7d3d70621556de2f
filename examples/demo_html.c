/*
 * demo_html.c -- attn-demo --html: the interactive attention view (see
 * demo_html.h and docs/VIEW.md).
 *
 * The C side tokenizes the sentence, builds the toy model's Q, K and V
 * (demo_model.h), runs attn_sdpa with want_probs once per pattern for both
 * heads, and writes the page: a fixed HTML/CSS/JS template (demo_view.inc)
 * around a JSON block holding the tokens, the model's inputs and every
 * weight.  The page's script only draws what that block holds.
 */
#include "demo_html.h"
#include "demo_model.h"

#include <attn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The page template: DEMO_VIEW_HEAD (up to and inside <title>),
 * DEMO_VIEW_BODY (up to the sentence's <q>), DEMO_VIEW_DATA (up to the
 * JSON block) and DEMO_VIEW_TAIL (the script). */
#include "demo_view.inc"

#ifdef ATTN_DEMO_GPT
#include "tinygpt/gpt.h"
#endif

static const char default_sentence[] = "The cat sat on the mat";

/* The patterns: every combination of three toggles. */
enum { P_CAUSAL = 1, P_WINDOW = 2, P_GLOBAL = 4, N_PATTERNS = 8 };

typedef struct token { const char *text; size_t len; } token;

/* ------------------------------------------------------------ tokenizer */

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if there is
 * none (overlong forms, surrogates and code points past U+10FFFF are
 * invalid). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if ((s[0] & 0xe0) == 0xc0) { len = 2; cp = s[0] & 0x1fu; min = 0x80; }
    else if ((s[0] & 0xf0) == 0xe0) { len = 3; cp = s[0] & 0x0fu; min = 0x800; }
    else if ((s[0] & 0xf8) == 0xf0) { len = 4; cp = s[0] & 0x07u; min = 0x10000; }
    else return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

static int is_word_byte(unsigned char c)
{
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z');
}

/* Words are runs of ASCII letters and digits and of non-ASCII characters;
 * every other printable ASCII character is a token of its own; white space
 * and control characters separate.  Returns the token count, or -1 for
 * invalid UTF-8 (with *bad its byte offset); stops counting past max. */
static int tokenize(const char *text, token *out, int max, size_t *bad)
{
    const unsigned char *s = (const unsigned char *)text;
    const size_t n = strlen(text);
    int count = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(s + i, n - i);
        if (!l) {
            *bad = i;
            return -1;
        }
        if (is_word_byte(s[i])) {
            size_t j = i;
            while (j < n && is_word_byte(s[j])) {
                size_t lj = utf8_seq(s + j, n - j);
                if (!lj) {
                    *bad = j;
                    return -1;
                }
                j += lj;
            }
            if (count < max)
                out[count] = (token){ text + i, j - i };
            count++;
            i = j;
        } else if (s[i] > 0x20 && s[i] < 0x7f) {
            if (count < max)
                out[count] = (token){ text + i, 1 };
            count++;
            i++;
        } else {
            i++;
        }
    }
    return count;
}

/* ------------------------------------------------------------ the model */

/* x [n][DEMO_DMODEL]: lexicon features for the demo's own words, hashed
 * ones for any other token, then the position code. */
static void embed(const token *tok, int n, float *x)
{
    for (int i = 0; i < n; i++) {
        float *xi = x + (size_t)i * DEMO_DMODEL;
        char lower[16];
        int known = 0;
        if (tok[i].len < sizeof lower) {
            for (size_t c = 0; c < tok[i].len; c++) {
                char ch = tok[i].text[c];
                lower[c] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
            }
            lower[tok[i].len] = '\0';
            known = demo_lexicon(lower, xi);
        }
        if (!known)
            demo_hashed_features(tok[i].text, tok[i].len, xi);
        demo_position(i, xi + F_POS0);
    }
}

/* y [n][DEMO_DMODEL] = x w, summed in double. */
static void project(const float *x, int n, float w[DEMO_DMODEL][DEMO_DMODEL], float *y)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < DEMO_DMODEL; j++) {
            double s = 0.0;
            for (int k = 0; k < DEMO_DMODEL; k++)
                s += (double)x[(size_t)i * DEMO_DMODEL + k] * w[k][j];
            y[(size_t)i * DEMO_DMODEL + j] = (float)s;
        }
}

static void pattern_name(int p, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s", p ? "" : "dense", p & P_CAUSAL ? "causal" : "",
             (p & P_WINDOW) ? ((p & P_CAUSAL) ? "+window" : "window") : "",
             (p & P_GLOBAL) ? ((p & (P_CAUSAL | P_WINDOW)) ? "+global" : "global") : "");
}

/* Visibility of key j to query i under pattern p, as the desc below asks
 * attn for it (attn.h, "Sparse attention"): (window OR global key OR
 * global query); only for the data block, attn decides on its own. */
static int visible(int p, int i, int j, int window, const uint8_t *global)
{
    int in = 1;
    if (p & P_WINDOW)
        in = j >= i - window && j <= i + window;
    if (p & P_CAUSAL)
        in = in && j <= i;
    return in || ((p & P_GLOBAL) && (global[j] || global[i]));
}

/* P [DEMO_NHEAD][n][n] of pattern p. */
static attn_status run_pattern(int p, int n, const float *q, const float *k, const float *v,
                               float *o, float *probs, int window, const uint8_t *global,
                               int threads)
{
    attn_sdpa_desc d;
    attn_status st = attn_sdpa_desc_init(&d);
    if (st != ATTN_OK)
        return st;
    d.batch = 1;
    d.q_heads = d.kv_heads = DEMO_NHEAD;
    d.q_len = d.kv_len = n;
    d.qk_dim = d.v_dim = DEMO_DHEAD;
    d.q = d.k = d.v = d.o = attn_view_bshd(DEMO_NHEAD, n, DEMO_DHEAD);
    d.want_probs = 1;
    d.probs = attn_view_bhsd(DEMO_NHEAD, n, n);
    d.threads = threads;
    d.align = ATTN_ALIGN_TOP_LEFT;
    if (p & P_WINDOW)
        d.window_left = d.window_right = window;
    if (p & P_CAUSAL)
        d.window_right = 0;
    attn_sdpa_args a = { .q = q, .k = k, .v = v, .o = o, .probs = probs };
    if (p & P_GLOBAL) {
        d.use_global_k = d.use_global_q = 1;
        a.global_k = a.global_q = global;
    }
    return attn_sdpa(&d, &a);
}

/* ----------------------------------------------------------------- JSON */

/* A JSON string that is also safe inside an HTML <script> element: '<',
 * '>' and '&' as \u escapes (no "</script>" or "<!--" can appear), and
 * U+2028/U+2029 escaped for older JavaScript parsers.  The text is valid
 * UTF-8 (checked by the tokenizer). */
static void json_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&')
            fprintf(f, "\\u%04x", c);
        else if (c == 0xe2 && i + 2 < len && (unsigned char)s[i + 1] == 0x80 &&
                 ((unsigned char)s[i + 2] == 0xa8 || (unsigned char)s[i + 2] == 0xa9)) {
            fprintf(f, "\\u%04x", (unsigned char)s[i + 2] == 0xa8 ? 0x2028 : 0x2029);
            i += 2;
        } else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A float, shortest form that reads back as the same float. */
static void json_float(FILE *f, float x)
{
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)x);
        if (strtof(buf, NULL) == x)
            break;
    }
    fputs(buf, f);
}

static void json_matrix(FILE *f, const float *m, int rows, int cols)
{
    fputc('[', f);
    for (int i = 0; i < rows; i++) {
        fputs(i ? ",\n  [" : "[", f);
        for (int j = 0; j < cols; j++) {
            if (j)
                fputc(',', f);
            json_float(f, m[(size_t)i * cols + j]);
        }
        fputc(']', f);
    }
    fputc(']', f);
}

typedef struct view_data {
    const char *sentence;
    const token *tok;
    int n, window, n_global;
    const int *global_idx;
    const uint8_t *global;
    const float *x;
    float wq[DEMO_DMODEL][DEMO_DMODEL], wk[DEMO_DMODEL][DEMO_DMODEL],
        wv[DEMO_DMODEL][DEMO_DMODEL];
    const float *probs;     /* [N_PATTERNS][DEMO_NHEAD][n][n]; a trained
                               model's: [layers][heads][n][n], causal */
    const char *model_note;
    /* A trained model (tinygpt checkpoint): layers > 0 */
    int layers, d_model, heads, context;
    size_t params;
    const char *checkpoint;     /* the file's base name */
    const unsigned char *bytes; /* the sentence's n bytes, one per token */
} view_data;

/* The rest of a trained model's data block, after the tokens: the model,
 * the bytes, and one pattern, "causal", with weights [layers * heads][n][n]
 * (layer-major: entry l * heads + h is layer l's head h). */
static void write_model_json(FILE *f, const view_data *vd)
{
    const int n = vd->n;
    fputs("\"model\":{\"kind\":\"tinygpt\",\"checkpoint\":", f);
    json_string(f, vd->checkpoint, strlen(vd->checkpoint));
    fprintf(f, ",\"layers\":%d,\"d_model\":%d,\"heads\":%d,\"context\":%d,\"params\":%zu},\n",
            vd->layers, vd->d_model, vd->heads, vd->context, vd->params);
    fputs("\"bytes\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", (unsigned)vd->bytes[i]);
    fprintf(f, "],\n\"layers\":%d,\"d_model\":%d,\"heads\":%d,\"head_dim\":%d,\"scale\":",
            vd->layers, vd->d_model, vd->heads, vd->d_model / vd->heads);
    json_float(f, (float)(1.0 / sqrt((double)(vd->d_model / vd->heads))));
    fputs(",\n\"patterns\":[\n{\"name\":\"causal\",\"causal\":true,\"window\":false,"
          "\"global\":false,\n\"visible\":[", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",[" : "[", f);
        for (int j = 0; j < n; j++)
            fprintf(f, "%s%d", j ? "," : "", j <= i);
        fputc(']', f);
    }
    fputs("],\n\"weights\":[", f);
    for (int h = 0; h < vd->layers * vd->heads; h++) {
        fputs(h ? ",\n " : "", f);
        json_matrix(f, vd->probs + (size_t)h * n * n, n, n);
    }
    fputs("]}]}\n", f);
}

static void write_json(FILE *f, const view_data *vd)
{
    const int n = vd->n;
    fprintf(f, "{\"format\":\"attn-view 1\",\"attn\":");
    json_string(f, attn_version(), strlen(attn_version()));
    fputs(",\n\"model_note\":", f);
    json_string(f, vd->model_note, strlen(vd->model_note));
    fputs(",\n\"sentence\":", f);
    json_string(f, vd->sentence, strlen(vd->sentence));
    fputs(",\n\"tokens\":[", f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputc(',', f);
        json_string(f, vd->tok[i].text, vd->tok[i].len);
    }
    if (vd->layers > 0) {
        fputs("],\n", f);
        write_model_json(f, vd);
        return;
    }
    fprintf(f, "],\n\"d_model\":%d,\"heads\":%d,\"head_dim\":%d,\"scale\":", DEMO_DMODEL,
            DEMO_NHEAD, DEMO_DHEAD);
    json_float(f, (float)(1.0 / sqrt((double)DEMO_DHEAD)));
    fprintf(f, ",\"window\":%d,\"global\":[", vd->window);
    for (int g = 0; g < vd->n_global; g++)
        fprintf(f, "%s%d", g ? "," : "", vd->global_idx[g]);
    fputs("],\n\"x\":", f);
    json_matrix(f, vd->x, n, DEMO_DMODEL);
    fputs(",\n\"wq\":", f);
    json_matrix(f, &vd->wq[0][0], DEMO_DMODEL, DEMO_DMODEL);
    fputs(",\n\"wk\":", f);
    json_matrix(f, &vd->wk[0][0], DEMO_DMODEL, DEMO_DMODEL);
    fputs(",\n\"patterns\":[", f);
    for (int p = 0; p < N_PATTERNS; p++) {
        char name[32];
        pattern_name(p, name, sizeof name);
        fprintf(f, "%s\n{\"name\":\"%s\",\"causal\":%s,\"window\":%s,\"global\":%s,\n\"visible\":[",
                p ? "," : "", name, p & P_CAUSAL ? "true" : "false",
                p & P_WINDOW ? "true" : "false", p & P_GLOBAL ? "true" : "false");
        for (int i = 0; i < n; i++) {
            fputs(i ? "," : "", f);
            fputc('[', f);
            for (int j = 0; j < n; j++)
                fprintf(f, "%s%d", j ? "," : "", visible(p, i, j, vd->window, vd->global));
            fputc(']', f);
        }
        fputs("],\n\"weights\":[", f);
        for (int h = 0; h < DEMO_NHEAD; h++) {
            fputs(h ? ",\n " : "", f);
            json_matrix(f, vd->probs + ((size_t)p * DEMO_NHEAD + h) * n * n, n, n);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
}

/* ----------------------------------------------------------------- HTML */

static void html_text(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
}

static void write_html(FILE *f, const view_data *vd)
{
    fputs(DEMO_VIEW_HEAD, f);
    html_text(f, vd->sentence);
    fputs(DEMO_VIEW_BODY, f);
    html_text(f, vd->sentence);
    fputs(DEMO_VIEW_DATA, f);
    write_json(f, vd);
    fputs(DEMO_VIEW_TAIL, f);
}

static int write_file(const char *path, void (*write)(FILE *, const view_data *),
                      const view_data *vd)
{
    const int to_stdout = !strcmp(path, "-");
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "attn-demo: cannot open '%s' for writing\n", path);
        return 1;
    }
    write(f, vd);
    int err = ferror(f);
    if (to_stdout)
        err |= fflush(f) != 0;
    else
        err |= fclose(f) != 0;
    if (err) {
        fprintf(stderr, "attn-demo: writing '%s' failed\n", path);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------ a trained model */

#ifdef ATTN_DEMO_GPT

/* The label of byte i of the sentence s (valid UTF-8) in buf (>= 16
 * bytes): a printable ASCII character itself, a space as U+2423 (an open
 * box), \n, \t, \r and other control bytes as escapes (\x01), the first
 * byte of a multi-byte character as the whole character, and a
 * continuation byte as U+00B7 (a middle dot) and its hex value ("·A9"). */
static size_t byte_label(const unsigned char *s, size_t n, size_t i, char *buf)
{
    const unsigned char c = s[i];
    if (c > 0x20 && c < 0x7f) {
        buf[0] = (char)c;
        return 1;
    }
    if (c == ' ')
        return (size_t)snprintf(buf, 16, "\xe2\x90\xa3");
    if (c == '\n' || c == '\t' || c == '\r')
        return (size_t)snprintf(buf, 16, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
    if (c < 0x80)
        return (size_t)snprintf(buf, 16, "\\x%02X", c);
    if ((c & 0xc0) == 0x80)
        return (size_t)snprintf(buf, 16, "\xc2\xb7%02X", c);
    const size_t l = utf8_seq(s + i, n - i);   /* >= 2: the text is valid */
    memcpy(buf, s + i, l);
    return l;
}

/* 1234567 as "1,234,567" */
static void thousands(size_t v, char *buf, size_t size)
{
    char digits[32];
    const int nd = snprintf(digits, sizeof digits, "%zu", v);
    size_t k = 0;
    for (int i = 0; i < nd && k + 2 < size; i++) {
        if (i && (nd - i) % 3 == 0)
            buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = '\0';
}

static int run_model(const demo_html_opts *o, const char *sentence)
{
    const unsigned char *s = (const unsigned char *)sentence;
    const size_t len = strlen(sentence);
    for (size_t i = 0; i < len;) {
        const size_t l = utf8_seq(s + i, len - i);
        if (!l) {
            fprintf(stderr, "attn-demo: the sentence is not valid UTF-8 (byte %zu)\n", i);
            return 2;
        }
        i += l;
    }
    if (len == 0) {
        fprintf(stderr, "attn-demo: the sentence is empty (the model's tokens are its bytes)\n");
        return 2;
    }
    if (o->pattern_options) {
        fprintf(stderr, "attn-demo: --window and --global are the toy model's patterns; a "
                        "trained model's page shows the model's own causal attention\n");
        return 2;
    }
    gpt_config c;
    memset(&c, 0, sizeof c);
    float *w = NULL;
    if (gpt_load(o->model_path, &c, &w)) {
        fprintf(stderr, "attn-demo: cannot use '%s' as the model: it is not a valid tinygpt "
                        "checkpoint (above)\n", o->model_path);
        return 2;
    }
    if (c.L < 1) {
        fprintf(stderr, "attn-demo: the checkpoint '%s' has no layers: no attention to show\n",
                o->model_path);
        free(w);
        return 2;
    }
    const int max = c.T < DEMO_HTML_MAX_BYTES ? c.T : DEMO_HTML_MAX_BYTES;
    if (len > (size_t)max) {
        fprintf(stderr, "attn-demo: the sentence is %zu bytes; with this model the view takes at "
                        "most %d (the model's tokens are bytes, a non-ASCII character is 2 to 4; "
                        "its context is %d, the view's limit %d)\n",
                len, max, c.T, (int)DEMO_HTML_MAX_BYTES);
        free(w);
        return 2;
    }
    const int n = (int)len;
    c.B = 1;
    c.threads = o->threads;
    const size_t per = (size_t)n * n, LH = (size_t)c.L * c.H;
    float *attw = malloc(sizeof(float) * LH * per);
    token *tok = malloc(sizeof(token) * (size_t)n);
    char *labels = malloc((size_t)n * 16);
    if (!attw || !tok || !labels) {
        fprintf(stderr, "attn-demo: out of memory\n");
        free(w);
        free(attw);
        free(tok);
        free(labels);
        return 1;
    }
    int rc = 0;
    if (gpt_logits(&c, w, s, n, NULL, attw)) {
        fprintf(stderr, "attn-demo: the model's forward pass failed\n");
        rc = 1;
    }
    if (!rc) {
        for (int i = 0; i < n; i++) {
            char *b = labels + (size_t)i * 16;
            tok[i] = (token){ b, byte_label(s, len, (size_t)i, b) };
        }
        const gpt_layout lay = gpt_make_layout(&c);
        const char *base = strrchr(o->model_path, '/');
        base = base ? base + 1 : o->model_path;
        char params[40], note[1024];
        thousands(lay.total, params, sizeof params);
        snprintf(note, sizeof note,
                 "Trained model: a byte-level GPT trained by tinygpt (examples/tinygpt), "
                 "checkpoint %s: %d %s, d_model %d, %d heads of %d per layer, context %d bytes, "
                 "%s parameters. Each token is one byte of the sentence's UTF-8 (a multi-byte "
                 "character's first byte shows the character, its continuation bytes \xc2\xb7 "
                 "and their hex value); the weights are the model's own causal attention, "
                 "every layer and head, from its forward pass through attn's MHA layer.",
                 base, c.L, c.L == 1 ? "layer" : "layers", c.E, c.H, c.E / c.H, c.T, params);
        view_data vd;
        memset(&vd, 0, sizeof vd);
        vd.sentence = sentence;
        vd.tok = tok;
        vd.n = n;
        vd.probs = attw;
        vd.model_note = o->model_note ? o->model_note : note;
        vd.layers = c.L;
        vd.d_model = c.E;
        vd.heads = c.H;
        vd.context = c.T;
        vd.params = lay.total;
        vd.checkpoint = base;
        vd.bytes = s;
        rc = write_file(o->html_path, write_html, &vd);
        if (!rc && o->json_path)
            rc = write_file(o->json_path, write_json, &vd);
    }
    free(w);
    free(attw);
    free(tok);
    free(labels);
    return rc;
}
#endif

/* ----------------------------------------------------------------- main */

int demo_html_run(const demo_html_opts *o)
{
    const char *sentence = o->sentence ? o->sentence : default_sentence;
    if (o->model_path) {
#ifdef ATTN_DEMO_GPT
        return run_model(o, sentence);
#else
        fprintf(stderr, "attn-demo: --model is not available in this build (the tinygpt model "
                        "needs the BLAS's cblas.h, which the build did not find)\n");
        return 2;
#endif
    }
    token tok[DEMO_HTML_MAX_TOKENS];
    size_t bad = 0;
    const int n = tokenize(sentence, tok, DEMO_HTML_MAX_TOKENS, &bad);
    if (n < 0) {
        fprintf(stderr, "attn-demo: the sentence is not valid UTF-8 (byte %zu)\n", bad);
        return 2;
    }
    if (n == 0) {
        fprintf(stderr, "attn-demo: the sentence has no tokens\n");
        return 2;
    }
    if (n > DEMO_HTML_MAX_TOKENS) {
        fprintf(stderr, "attn-demo: the sentence has %d tokens; the view takes at most %d "
                        "(words, and punctuation marks each count as one)\n",
                n, DEMO_HTML_MAX_TOKENS);
        return 2;
    }
    uint8_t global[DEMO_HTML_MAX_TOKENS] = { 0 };
    for (int g = 0; g < o->n_global; g++) {
        if (o->global[g] < 0 || o->global[g] >= n) {
            fprintf(stderr, "attn-demo: global token %d is past the sentence's %d tokens\n",
                    o->global[g], n);
            return 2;
        }
        global[o->global[g]] = 1;
    }

    view_data vd;
    memset(&vd, 0, sizeof vd);      /* layers 0: the toy model */
    const size_t nd = (size_t)n * DEMO_DMODEL;
    float *buf = malloc(sizeof(float) * (5 * nd + (size_t)N_PATTERNS * DEMO_NHEAD * n * n));
    if (!buf) {
        fprintf(stderr, "attn-demo: out of memory\n");
        return 1;
    }
    float *x = buf, *q = x + nd, *k = q + nd, *v = k + nd, *out = v + nd, *probs = out + nd;
    embed(tok, n, x);
    demo_weights(vd.wq, vd.wk, vd.wv);
    project(x, n, vd.wq, q);
    project(x, n, vd.wk, k);
    project(x, n, vd.wv, v);
    for (int p = 0; p < N_PATTERNS; p++) {
        attn_status st = run_pattern(p, n, q, k, v, out,
                                     probs + (size_t)p * DEMO_NHEAD * n * n, o->window, global,
                                     o->threads);
        if (st != ATTN_OK) {
            fprintf(stderr, "attn-demo: attn_sdpa failed: %s\n", attn_status_str(st));
            free(buf);
            return 1;
        }
    }

    vd.sentence = sentence;
    vd.tok = tok;
    vd.n = n;
    vd.window = o->window;
    vd.n_global = o->n_global;
    vd.global_idx = o->global;
    vd.global = global;
    vd.x = x;
    vd.probs = probs;
    vd.model_note = o->model_note ? o->model_note : DEMO_MODEL_NOTE;
    int rc = write_file(o->html_path, write_html, &vd);
    if (!rc && o->json_path)
        rc = write_file(o->json_path, write_json, &vd);
    free(buf);
    return rc;
}
