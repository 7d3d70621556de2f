/*
 * demo_html.h -- attn-demo --html: the interactive attention view.
 *
 * Writes one self-contained HTML page (inline SVG, CSS and JavaScript,
 * nothing fetched) for a sentence: the attention weights attn_sdpa returns
 * for every head and every pattern (dense, causal, a sliding window,
 * global tokens, and their combinations), embedded as a JSON data block,
 * drawn as beams from a selected query token to the keys it attends to and
 * as the full weight matrix.  With a tinygpt checkpoint (model_path), the
 * page instead shows that trained model's causal attention over the
 * sentence's bytes, every layer and head.  docs/VIEW.md describes the page
 * and its data.
 */
#ifndef ATTN_DEMO_HTML_H
#define ATTN_DEMO_HTML_H

/* The longest sentence the view takes: in tokens for the toy model, in
 * bytes (and at most the checkpoint's context) for a trained one. */
enum { DEMO_HTML_MAX_TOKENS = 64, DEMO_HTML_MAX_GLOBAL = 8, DEMO_HTML_MAX_BYTES = 128 };

typedef struct demo_html_opts {
    const char *html_path;      /* the page ("-" = stdout) */
    const char *json_path;      /* also write the data block here, or NULL */
    const char *sentence;       /* NULL = "The cat sat on the mat" */
    int window;                 /* the window pattern: this many tokens on
                                   each side (>= 0) */
    int global[DEMO_HTML_MAX_GLOBAL];   /* global token indices */
    int n_global;               /* >= 1 */
    int threads;                /* attn's threads (0 = all) */
    const char *model_note;     /* what the page says about the model the
                                   weights come from (shown above the view,
                                   "model_note" in the data); NULL = the toy
                                   model's DEMO_MODEL_NOTE; a trained
                                   model's page writes its own */
    const char *model_path;     /* a tinygpt checkpoint (examples/tinygpt):
                                   the page shows that model's attention
                                   over the sentence's bytes, every layer
                                   and head, instead of the toy model's;
                                   NULL = the toy model */
    int pattern_options;        /* --window or --global was given (the toy
                                   model's patterns; refused with a model) */
} demo_html_opts;

/* Tokenize, compute, write.  Prints what went wrong to stderr and returns
 * 2 for bad input (invalid UTF-8, no token, too many tokens, a global token
 * past the end; with model_path: a checkpoint that cannot be read or is
 * not a valid tinygpt checkpoint, a sentence longer than its context,
 * --window or --global given, or a build without the model (no cblas.h)),
 * 1 when attn or a file fails, 0 on success. */
int demo_html_run(const demo_html_opts *opts);

#endif
