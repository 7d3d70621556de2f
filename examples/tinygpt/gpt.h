/*
 * gpt.h -- the small GPT of examples/tinygpt, trained and run by attn.
 *
 * The model: byte tokens (a vocabulary of 256), a learned token embedding
 * wte [256][E] and position embedding wpe [T][E], L pre-LayerNorm blocks
 *
 *     x = x + MHA(LN1(x))          attn's MHA layer, causal, packed in_proj
 *     x = x + W2 GELU(W1 LN2(x))   E -> 4E -> E, GELU's tanh form, cblas_sgemm
 *
 * a final LayerNorm and logits = LN_f(x) wte^T (the output layer tied to the
 * token embedding).  LayerNorm eps 1e-5.  Training: mean cross-entropy of
 * the next byte, AdamW (beta1 0.9, beta2 0.95, eps 1e-8, decoupled weight
 * decay on every parameter), global gradient-norm clipping, dropout on the
 * attention weights (attn's keep mask; see gpt_forward).
 *
 * The parameters are one float array in the layout of gpt_layout; a
 * checkpoint is that array with a header (gpt_save).  docs/TINYGPT.md
 * describes the program; examples/tinygpt/twin.py is the PyTorch twin that
 * reads the same checkpoints.
 */
#ifndef TINYGPT_GPT_H
#define TINYGPT_GPT_H

#include <attn.h>
#include <stddef.h>
#include <stdint.h>

enum { GPT_V = 256 };

typedef struct gpt_config {
    int L, E, H, T;     /* layers, width, heads, context (positions) */
    int B;              /* training batch (sequences per step) */
    float dropout;      /* attention-weight dropout in training, [0, 1) */
    int threads;        /* attn's threads (0 = OpenMP's default) */
} gpt_config;

/* Offsets into the parameter array; a layer's are relative to
 * layer0 + l * per_layer (gpt_layer_params). */
typedef struct gpt_layout {
    size_t wte, wpe, lnf_g, lnf_b;
    size_t ln1_g, ln1_b, in_w, in_b, out_w, out_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
    size_t per_layer, total;
} gpt_layout;

gpt_layout gpt_make_layout(const gpt_config *c);

typedef struct gpt_acts gpt_acts;

typedef struct gpt_model {
    gpt_config c;
    gpt_layout l;
    float *w, *g, *m, *v;       /* parameters, gradients, AdamW moments */
    uint64_t seed;              /* the dropout seeds derive from it */
    attn_mha_plan **plans;      /* one per layer (training shapes) */
    size_t ctx_bytes, ws_bytes, bws_bytes;
    void *ws, *bws;
    gpt_acts *a;
    double attn_seconds;        /* time inside attn's MHA calls (training) */
} gpt_model;

/* A model with fresh parameters from seed (normal(0, 0.02) weights, the
 * residual projections' scaled by 1/sqrt(2L), zero biases, unit gains). */
int gpt_init(gpt_model *M, const gpt_config *c, uint64_t seed);
void gpt_free(gpt_model *M);

/* The training forward over tok [B][T + 1] (inputs tok[b][0..T), targets
 * tok[b][1..T]): the mean cross-entropy in nats, activations kept for
 * gpt_backward.  With dropout > 0, layer l of step `step` drops attention
 * weights with attn's keep mask of seed = splitmix(seed ^ (step * L + l)),
 * offset 0 (one plan per layer per step). */
double gpt_forward(gpt_model *M, const uint8_t *tok, long step);
/* Sets the dropout of later gpt_forward calls (0: evaluation, with the
 * training shapes) and makes the layers' plans again.  Returns 0, or -1
 * after a message (a plan fails, or needs more workspace than gpt_init's
 * dropout gave). */
int gpt_set_dropout(gpt_model *M, float p);
/* The gradients of the last gpt_forward into M->g (overwritten). */
int gpt_backward(gpt_model *M, const uint8_t *tok);
/* One AdamW step (step counts from 1) after clipping the global gradient
 * norm to clip; returns that norm before clipping. */
float gpt_adamw(gpt_model *M, long step, float lr, float wd, float clip);

/* Inference over one sequence tok[0..n), n <= T, no dropout: logits
 * [n][256] (NULL = not wanted), and when attw is not NULL every layer's
 * attention weights [L][H][n][n] (causal: zeros above the diagonal).
 * Returns 0, or -1 after a message. */
int gpt_logits(const gpt_config *c, const float *w, const uint8_t *tok, int n, float *logits,
               float *attw);

/* Token-by-token generation through attn's decode path: every layer keeps
 * K and V in a paged F16 cache (block size 16, blocks of a pool handed out
 * through a block table), filled by attn_kv_append; each call runs the
 * new tokens' attention against the cache with attn_sdpa (one query: the
 * decode path). */
typedef struct gpt_gen gpt_gen;
gpt_gen *gpt_gen_create(const gpt_config *c, const float *w);
void gpt_gen_free(gpt_gen *G);
/* Appends tok[0..n) at the next positions (a prompt at once, or one
 * token) and writes the logits [n][256] of those positions.  Returns 0,
 * or -1 when the context (T) would overflow or attn fails. */
int gpt_gen_feed(gpt_gen *G, const uint8_t *tok, int n, float *logits);
int gpt_gen_len(const gpt_gen *G);

/* Sampling from logits [256]: temperature (0 = greedy), top-k (0 = all),
 * u uniform in [0, 1). */
int gpt_sample(const float *logits, float temperature, int top_k, double u);

/*
 * Checkpoints, little-endian: 8-byte magic "ATTNGPT\0", uint32 version (1),
 * int32 L, E, H, T, V (256), uint64 n (the parameter count these sizes
 * give), n float32 parameters in the layout of gpt_make_layout, uint64
 * FNV-1a (64-bit) of those parameter bytes.  gpt_load checks every field,
 * the file's exact size and the checksum: any mismatch is a message and
 * -1, never a crash.  It sets c->L, E, H, T (B, dropout and threads
 * untouched) and *w to a fresh array (free it).
 */
int gpt_save(const gpt_config *c, const float *w, const char *path);
int gpt_load(const char *path, gpt_config *c, float **w);

/* SplitMix64, the generator of the batches and of the initialisation. */
uint64_t gpt_rng_next(uint64_t *s);

/* A batch tok [B][T + 1]: for each sequence, offset = next(s) mod
 * (len - T - 1) and the T + 1 bytes from there. */
void gpt_batch(const uint8_t *text, size_t len, const gpt_config *c, uint64_t *s, uint8_t *tok);

#endif
