/*
 * demo_model.c -- attn-demo's toy model (see demo_model.h).
 */
#include "demo_model.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define DEMO_PI 3.14159265358979323846
/* Position code: (sin, cos) of i*w at two frequencies. */
static const double pos_freq[2] = { DEMO_PI / 3.0, DEMO_PI / 6.0 };

static const struct {
    const char *word;
    float f[DEMO_NFEAT];
} lexicon[] = {
    /*            det  noun verb prep -at  anim place word */
    { "the", { 1,   0,   0,   0,   0,   0,   0,    1 } },
    { "cat", { 0,   1,   0,   0,   1,   1,   0,    1 } },
    { "sat", { 0,   0,   1,   0,   1,   0,   0,    1 } },
    { "on",  { 0,   0,   0,   1,   0,   0,   0,    1 } },
    { "mat", { 0,   1,   0,   0,   1,   0,   1,    1 } },
};

int demo_lexicon(const char *lower, float f[DEMO_NFEAT])
{
    for (size_t w = 0; w < sizeof lexicon / sizeof lexicon[0]; w++)
        if (!strcmp(lower, lexicon[w].word)) {
            memcpy(f, lexicon[w].f, sizeof lexicon[w].f);
            return 1;
        }
    return 0;
}

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void demo_hashed_features(const char *word, size_t len, float f[DEMO_NFEAT])
{
    uint64_t h = 0xcbf29ce484222325u;   /* FNV-1a, 64 bits */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)word[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        h = (h ^ c) * 0x100000001b3u;
    }
    for (int k = 0; k < F_WORD; k++)
        f[k] = (float)((double)(splitmix64(&h) >> 40) / (double)(1u << 24));
    const unsigned char c0 = len ? (unsigned char)word[0] : 0;
    f[F_WORD] = (c0 >= 0x80 || (c0 >= '0' && c0 <= '9') || (c0 >= 'a' && c0 <= 'z') ||
                 (c0 >= 'A' && c0 <= 'Z')) ? 1.0f : 0.0f;
}

void demo_position(int i, float code[4])
{
    for (int f = 0; f < 2; f++) {
        code[2 * f] = (float)sin(i * pos_freq[f]);
        code[2 * f + 1] = (float)cos(i * pos_freq[f]);
    }
}

/*
 * The projections are mostly zero, so they are written as rules: query
 * channel c of head h reads feature f with weight wq, and key channel c of
 * head h reads feature g with weight wk, so that the score of query i and
 * key j gains wq * wk * x_i[f] * x_j[g].
 */
typedef struct rule { int head, chan, qf; float wq; int kf; float wk; } rule;

static const rule rules[] = {
    /* head 0, "noun phrase": determiners and nouns look at nouns, the
     * "-at" words at each other, the cat at the place and the place at
     * the cat. */
    { 0, 0, F_NOUN, 2.2f, F_NOUN, 2.2f },
    { 0, 0, F_DET, 2.2f, F_NOUN, 0.0f },
    { 0, 1, F_RHYME, 1.0f, F_RHYME, 1.0f },
    { 0, 4, F_ANIMATE, 2.0f, F_PLACE, 2.0f },
    { 0, 5, F_PLACE, 2.0f, F_ANIMATE, 2.0f },
    /* head 1, "relations": the verb looks at the preposition and back, the
     * preposition at the place, the subject at the verb, determiners at
     * determiners. */
    { 1, 0, F_VERB, 2.5f, F_PREP, 2.5f },
    { 1, 1, F_PREP, 2.5f, F_VERB, 2.5f },
    { 1, 2, F_PREP, 2.0f, F_PLACE, 2.0f },
    { 1, 3, F_ANIMATE, 2.0f, F_VERB, 2.0f },
    { 1, 4, F_DET, 2.0f, F_DET, 2.0f },
    { 1, 5, F_PLACE, 1.5f, F_PREP, 1.5f },
};

void demo_weights(float wq[DEMO_DMODEL][DEMO_DMODEL], float wk[DEMO_DMODEL][DEMO_DMODEL],
                  float wv[DEMO_DMODEL][DEMO_DMODEL])
{
    memset(wq, 0, sizeof(float) * DEMO_DMODEL * DEMO_DMODEL);
    memset(wk, 0, sizeof(float) * DEMO_DMODEL * DEMO_DMODEL);
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const rule *u = &rules[r];
        wq[u->qf][u->head * DEMO_DHEAD + u->chan] += u->wq;
        wk[u->kf][u->head * DEMO_DHEAD + u->chan] += u->wk;
    }
    /* Head 0, channels 2-3: the query is the position code of i + 1, the key
     * that of j, so their product is cos(w (j - i - 1)): "look at the next
     * token" (each determiner finds its noun). */
    const double w = pos_freq[0], a = 1.5;
    wq[F_POS0 + 0][2] = (float)(a * cos(w));
    wq[F_POS0 + 1][2] = (float)(a * sin(w));
    wq[F_POS0 + 0][3] = (float)(-a * sin(w));
    wq[F_POS0 + 1][3] = (float)(a * cos(w));
    wk[F_POS0 + 0][2] = (float)a;
    wk[F_POS0 + 1][3] = (float)a;
    /* Values: small pseudo-random weights in [-0.5, 0.5) (SplitMix64 from
     * 42). */
    uint64_t state = 42;
    for (int i = 0; i < DEMO_DMODEL; i++)
        for (int j = 0; j < DEMO_DMODEL; j++)
            wv[i][j] = 0.5f * (float)((double)(splitmix64(&state) >> 40) /
                                      (double)(1u << 23) - 1.0);
}
