/*
 * mha-example -- the attn_mha layer as a tiny encoder-decoder would use it.
 *
 * 1. Encoder self-attention: a batch of two source sequences (5 and 3
 *    tokens, the second padded to 5), E = 16, H = 4, one packed in_proj
 *    [3E][E] with its bias (nn.MultiheadAttention's layout), and a key
 *    padding mask that hides the padding (True = ignore, as in PyTorch).
 * 2. Decoder cross-attention: 3 decoder tokens per batch entry query the
 *    encoder output (kdim = vdim = E), with separate W_q, W_k, W_v, the
 *    same key padding mask, and the attention weights averaged over heads.
 *
 * The weights are deterministic (no files, no randomness).  Every status is
 * checked; the program exits 0 when everything worked and the averaged
 * weights look right (rows sum to 1, padded keys get 0).
 */
#include <attn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum {
    B = 2,          /* batch */
    L_SRC = 5,      /* source (encoder) length, after padding */
    L_TGT = 3,      /* decoder length */
    E = 16,         /* embed_dim */
    H = 4           /* num_heads (head dim 4) */
};

/* Real source lengths: the second sequence has 2 padding tokens. */
static const int src_len[B] = { 5, 3 };

#define CHECK(call)                                                          \
    do {                                                                     \
        attn_status st_ = (call);                                            \
        if (st_ != ATTN_OK) {                                                \
            fprintf(stderr, "mha-example: %s failed: %s\n", #call,           \
                    attn_status_str(st_));                                   \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

/* Deterministic "parameters": a smooth pattern, different for each tensor
 * (seed), scaled like a default PyTorch init (about 1/sqrt(fan_in)). */
static void fill(float *p, int rows, int cols, float seed, float scale)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            p[i * cols + j] = scale * sinf(1.37f * (float)i + 0.71f * (float)j + seed);
}

static void print_rows(const char *name, const float *y, int rows, int stride)
{
    printf("%s (first 4 of %d features):\n", name, E);
    for (int r = 0; r < rows; r++)
        printf("  [b=%d t=%d] % .4f % .4f % .4f % .4f ...\n", r / (rows / B), r % (rows / B),
               y[r * stride + 0], y[r * stride + 1], y[r * stride + 2], y[r * stride + 3]);
}

int main(void)
{
    /* ---- inputs: embeddings of the source and target tokens ---- */
    static float src[B][L_SRC][E], tgt[B][L_TGT][E];
    fill(&src[0][0][0], B * L_SRC, E, 0.3f, 1.0f);
    fill(&tgt[0][0][0], B * L_TGT, E, 2.1f, 1.0f);
    /* key_padding_mask [B][S]: nonzero = padding (ignored), PyTorch's
     * bool convention -> ATTN_MASK_DROP_NONZERO */
    static uint8_t pad[B][L_SRC];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < L_SRC; j++)
            pad[b][j] = j >= src_len[b];

    const float init = 1.0f / sqrtf((float)E);

    /* ---- 1. encoder self-attention, packed in_proj ---- */
    static float in_proj[3 * E][E], in_bias[3 * E], enc_wo[E][E], enc_bo[E];
    fill(&in_proj[0][0], 3 * E, E, 0.0f, init);
    fill(in_bias, 1, 3 * E, 0.5f, 0.1f);
    fill(&enc_wo[0][0], E, E, 1.0f, init);
    fill(enc_bo, 1, E, 1.5f, 0.1f);

    attn_mha_desc enc;
    CHECK(attn_mha_desc_init(&enc));      /* has_bias = 1, dense rows */
    enc.embed_dim = E;
    enc.num_heads = H;
    enc.batch = B;
    enc.q_len = enc.kv_len = L_SRC;
    enc.self_attention = 1;               /* keys and values from X */
    enc.packed_in_proj = 1;               /* in_proj_weight [3E][E] */
    enc.key_padding_mode = ATTN_MASK_DROP_NONZERO;

    attn_mha_plan *enc_plan = NULL;
    CHECK(attn_mha_plan_create(&enc_plan, &enc));
    const attn_mha_weights enc_w = {
        .in_proj_weight = &in_proj[0][0], .in_proj_bias = in_bias,
        .out_weight = &enc_wo[0][0], .out_bias = enc_bo,
    };
    static float memory[B][L_SRC][E];     /* the encoder output */
    const attn_mha_args enc_a = {
        .x = &src[0][0][0], .out = &memory[0][0][0], .key_padding_mask = &pad[0][0],
    };
    CHECK(attn_mha_execute(enc_plan, &enc_w, &enc_a, NULL, 0));
    CHECK(attn_mha_plan_destroy(enc_plan));
    print_rows("encoder self-attention output", &memory[0][0][0], B * L_SRC, E);

    /* ---- 2. decoder cross-attention over the encoder output ---- */
    static float wq[E][E], wk[E][E], wv[E][E], bq[E], bk[E], bv[E], dec_wo[E][E], dec_bo[E];
    fill(&wq[0][0], E, E, 3.0f, init);
    fill(&wk[0][0], E, E, 4.0f, init);
    fill(&wv[0][0], E, E, 5.0f, init);
    fill(bq, 1, E, 6.0f, 0.1f);
    fill(bk, 1, E, 6.5f, 0.1f);
    fill(bv, 1, E, 7.0f, 0.1f);
    fill(&dec_wo[0][0], E, E, 8.0f, init);
    fill(dec_bo, 1, E, 9.0f, 0.1f);

    attn_mha_desc dec;
    CHECK(attn_mha_desc_init(&dec));
    dec.embed_dim = E;
    dec.num_heads = H;                    /* kdim = vdim = 0: both E */
    dec.batch = B;
    dec.q_len = L_TGT;                    /* L: decoder tokens */
    dec.kv_len = L_SRC;                   /* S: encoder tokens */
    dec.key_padding_mode = ATTN_MASK_DROP_NONZERO;
    dec.weights = ATTN_WEIGHTS_AVERAGED;  /* [B][L][S], mean over heads */

    attn_mha_plan *dec_plan = NULL;
    CHECK(attn_mha_plan_create(&dec_plan, &dec));
    size_t ws_bytes = 0;
    CHECK(attn_mha_workspace_size(dec_plan, &ws_bytes));
    const attn_mha_weights dec_w = {
        .q_weight = &wq[0][0], .k_weight = &wk[0][0], .v_weight = &wv[0][0],
        .q_bias = bq, .k_bias = bk, .v_bias = bv,
        .out_weight = &dec_wo[0][0], .out_bias = dec_bo,
    };
    static float y[B][L_TGT][E], attn_w[B][L_TGT][L_SRC];
    const attn_mha_args dec_a = {
        .x = &tgt[0][0][0], .key = &memory[0][0][0], .value = &memory[0][0][0],
        .out = &y[0][0][0], .key_padding_mask = &pad[0][0], .weights = &attn_w[0][0][0],
    };
    CHECK(attn_mha_execute(dec_plan, &dec_w, &dec_a, NULL, 0));
    CHECK(attn_mha_plan_destroy(dec_plan));
    print_rows("decoder cross-attention output", &y[0][0][0], B * L_TGT, E);
    printf("(the cross-attention plan needs %zu bytes of workspace; NULL lets attn "
           "allocate it)\n", ws_bytes);

    /* ---- averaged attention weights of the cross-attention ---- */
    int ok = 1;
    printf("cross-attention weights, averaged over %d heads [b][decoder token][source token]:\n",
           H);
    for (int b = 0; b < B; b++) {
        printf("  batch %d (%d real source tokens)\n", b, src_len[b]);
        for (int i = 0; i < L_TGT; i++) {
            double sum = 0.0;
            printf("    t=%d:", i);
            for (int j = 0; j < L_SRC; j++) {
                printf(" %.4f", attn_w[b][i][j]);
                sum += attn_w[b][i][j];
                if (j >= src_len[b] && attn_w[b][i][j] != 0.0f)
                    ok = 0;            /* padding must get exactly 0 */
            }
            printf("   (sum %.6f)\n", sum);
            if (fabs(sum - 1.0) > 1e-5)
                ok = 0;
        }
    }
    if (!ok) {
        fprintf(stderr, "mha-example: unexpected attention weights\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
