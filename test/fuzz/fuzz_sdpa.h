/*
 * fuzz_sdpa.h -- the SDPA problem shared by the forward (fuzz_sdpa.c),
 * its K/V storage and paging (fuzz_kv.c), the element types of Q and O
 * (fuzz_qo.c) and the backward (fuzz_sdpa_bwd.c).
 */
#ifndef ATTN_FUZZ_SDPA_H
#define ATTN_FUZZ_SDPA_H

#include "fuzz_common.h"
#include "fuzz_kv.h"
#include "fuzz_qo.h"
#include "fuzz_sparse.h"

/* A decoded SDPA problem: desc, args and the buffers they point to. */
typedef struct sdpa_prob {
    attn_sdpa_desc d;
    attn_sdpa_args a;
    int32_t kv_lens[8], q_lens[8];
    float *pool;     /* Q, K, V and bias, possibly overlapping */
    size_t pool_len;
    uint8_t *mpool;  /* the mask */
    size_t mpool_len;
    obuf o, p, l;    /* o: an F32 O */
    obuf16 o16;      /* an F16 or BF16 O (o_type) */
    int sparse;      /* SEL_SPARSE: the flags and layout below */
    sparse_buf sb;
    /* SEL_KV, SEL_QO: what the float64 reference reads instead of d and a
     * (F32, contiguous, the stored values widened); NULL: d and a */
    const attn_sdpa_desc *refd;
    const attn_sdpa_args *refa;
} sdpa_prob;

/* The forward's state from stage to stage (fuzz_sdpa): the problem, what
 * was decoded for it and where its inputs lie. */
typedef struct sdpa_case {
    sdpa_prob P;
    unsigned bad[2];                   /* BAD_* */
    int64_t B, Hkv, Hq, n, m, dk, dv;  /* the decoded sizes (the desc's may be planted) */
    int64_t szq[3], szk[3], szkp[3];   /* [B][Hq][n], [B][Hkv][m], pool [nb][Hkv][bs] */
    int sparse, packed, huge, t2;
    sparse_cfg sc;
    kv_cfg kv;
    kv_store KS;
    qo_cfg qo;
    qo_store QS;
    expect pe;                         /* the plan's expected status */
    int64_t eq, ek, ev, eo, em, eb, ep, el; /* extents of the desc's views */
    int64_t ekc, evc;                  /* of K and V in the float pool */
    const attn_view *kvw, *vvw;        /* K and V views of the float pool */
    size_t oq, okk, ov, ob, om;        /* view origins in the pools */
    int ws_small, ws_mis, null_top;    /* exec-time plants */
    unsigned wsel;                     /* workspace choices */
    float *inputs_copy;
    uint8_t *mask_copy;
    attn_sdpa_desc kv_refd;            /* SEL_KV, SEL_QO: what the reference reads */
    attn_sdpa_args kv_refa;
    float *kv_qpool;                   /* integer scores: the pool with Q rounded */
} sdpa_case;

expect expect_sdpa_plan(const attn_sdpa_desc *d);
/* nodecode: the outputs are of a plan made with ATTN_DECODE=0 */
void sdpa_check_results(const sdpa_prob *P, int nodecode);
void sdpa_clear(sdpa_prob *P);

/* fuzz_kv.c: the SEL_KV stages of the forward */
void kv_make_store(rd *r, sdpa_case *C);
void kv_plant(rd *r, const kv_cfg *c, kv_store *S, attn_sdpa_desc *d, attn_sdpa_args *a);
void kv_reference(sdpa_case *C);
void kv_recheck(sdpa_case *C);

/* fuzz_qo.c: the SEL_QO stages of the forward */
void qo_make_store(sdpa_case *C);
void qo_plant(rd *r, sdpa_case *C);
void qo_reference(sdpa_case *C);
void qo_twin(sdpa_case *C);

/* fuzz_sdpa_bwd.c: the backward of a checked forward; with 16-bit Q or O,
 * its statuses (a plan; without args16 ATTN_ERR_NULL_ARGUMENT) and nothing
 * written */
void fuzz_sdpa_bwd(rd *r, sdpa_prob *P, int t2);
void sdpa_bwd_qo16(const sdpa_prob *P);

#endif
