/*
 * test_alloc.c -- allocation failure: every allocation attn makes (plans,
 * internal workspace, the MHA plan's inner SDPA plan) is made to fail in
 * turn (and the SDPA backward, the MHA training calls and linear attention's
 * forward and backward); each call must
 * return ATTN_ERR_OUT_OF_MEMORY, leave *plan and
 * every output untouched, and leak nothing: every block allocated during
 * the failing call must have been freed when it returns.
 *
 * This executable defines calloc, aligned_alloc and free, which the
 * library's own calls bind to, and forwards to the C library's.  Where the
 * allocator belongs to a tool (AddressSanitizer, valgrind) the hooks are
 * not reached and the tests are skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attn.h>

#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_HOOKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOC_HOOKS 0
#endif
#endif
#ifndef ALLOC_HOOKS
#define ALLOC_HOOKS 1
#endif

#if ALLOC_HOOKS
/* While armed, calloc number fail_calloc (counting from 0) or aligned_alloc
 * number fail_aligned fails (-1: none).  attn allocates its plans with
 * calloc and workspaces with aligned_alloc. */
static int armed, n_calloc, n_aligned, fail_calloc = -1, fail_aligned = -1;

/* Blocks handed out while armed and not yet freed. */
#define MAXLIVE 256
static void *live[MAXLIVE];
static int nlive, overflow;

static void arm(int at_calloc, int at_aligned)
{
    n_calloc = n_aligned = 0;
    fail_calloc = at_calloc;
    fail_aligned = at_aligned;
    nlive = overflow = 0;
    armed = 1;
}

/* Disarm; returns the number of blocks the armed call left allocated. */
static int disarm(void)
{
    armed = 0;
    return overflow ? MAXLIVE : nlive;
}

static void *track(void *ptr)
{
    if (ptr && armed) {
        if (nlive < MAXLIVE)
            live[nlive++] = ptr;
        else
            overflow = 1;
    }
    return ptr;
}

void free(void *ptr)
{
    static void (*real)(void *);
    if (!real)
        real = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    for (int i = 0; i < nlive; i++)
        if (live[i] == ptr) {
            live[i] = live[--nlive];
            break;
        }
    real(ptr);
}

void *calloc(size_t n, size_t size)
{
    static void *(*real)(size_t, size_t);
    if (!real) {
        /* dlsym may itself call calloc: answer that one from a static
         * buffer (it is never freed). */
        static char boot[256];
        static int booting;
        if (booting)
            return memset(boot, 0, sizeof boot);
        booting = 1;
        real = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
        booting = 0;
    }
    return armed && n_calloc++ == fail_calloc ? NULL : track(real(n, size));
}

void *aligned_alloc(size_t alignment, size_t size)
{
    static void *(*real)(size_t, size_t);
    if (!real)
        real = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    return armed && n_aligned++ == fail_aligned ? NULL : track(real(alignment, size));
}
#endif

/* 1 when this executable's allocator hooks are the ones in use. */
static int hooks_active(void)
{
#if ALLOC_HOOKS
    void *(*volatile cal)(size_t, size_t) = calloc;
    arm(0, -1);
    void *p = cal(1, 16);
    disarm();
    free(p);
    return p == NULL;
#else
    return 0;
#endif
}

enum { B = 2, H = 4, HKV = 2, N = 40, M = 1200, D = 16 };

static void fill(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++)
        x[i] = s * (float)((int)(i * 37 % 101) - 50) / 50.0f;
}

static int bits_equal(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

static void sdpa_oom(int sparse);

static void test_sdpa_oom(void **state)
{
    (void)state;
#if !ALLOC_HOOKS
    skip();
#else
    if (!hooks_active())
        skip();
    sdpa_oom(0);
    sdpa_oom(1);
#endif
}

static void sdpa_oom(int sparse)
{
#if ALLOC_HOOKS
    static float q[B * H * N * D], k[B * HKV * M * D], v[B * HKV * M * D];
    static float o[B * H * N * D], p[B * H * N * M], lse[B * H * N];
    static float o0[B * H * N * D], p0[B * H * N * M], lse0[B * H * N];
    fill(q, sizeof q / sizeof *q, 1.0f);
    fill(k, sizeof k / sizeof *k, 0.5f);
    fill(v, sizeof v / sizeof *v, 1.0f);
    attn_sdpa_desc d;
    attn_sdpa_desc_init(&d);
    d.batch = B; d.q_heads = H; d.kv_heads = HKV; d.q_len = N; d.kv_len = M;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bhsd(H, N, D);
    d.k = d.v = attn_view_bhsd(HKV, M, D);
    d.want_probs = 1; d.probs = attn_view_bhsd(H, N, M);
    d.want_lse = 1; d.lse = attn_view_bhsd(H, N, 1);
    d.threads = 2;
    attn_sdpa_args a = { .q = q, .k = k, .v = v, .o = o, .probs = p, .lse = lse };
    /* the second pass: a sparse plan (global keys and queries, a layout),
     * whose plan and workspace are allocated the same way */
    static uint8_t gk[B * M], gq[B * N], lay[256];
    if (sparse) {
        for (size_t i = 0; i < sizeof gk; i++) gk[i] = i % 5 == 0;
        for (size_t i = 0; i < sizeof gq; i++) gq[i] = i % 7 == 0;
        for (size_t i = 0; i < sizeof lay; i++) lay[i] = i % 3 != 1;
        d.use_global_k = d.use_global_q = 1;
        d.block_size = 16;
        d.window_left = 3;
        a.global_k = gk;
        a.global_q = gq;
        a.layout = lay;
        _Static_assert(((N + 15) / 16) * ((M + 15) / 16) <= 256, "layout fits");
    }

    for (size_t i = 0; i < sizeof o / sizeof *o; i++) o[i] = o0[i] = NAN;
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) p[i] = p0[i] = NAN;
    for (size_t i = 0; i < sizeof lse / sizeof *lse; i++) lse[i] = lse0[i] = NAN;

    /* The plan's own allocation. */
    attn_sdpa_plan *plan = (attn_sdpa_plan *)(uintptr_t)0x1;
    arm(0, -1);
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_ptr_equal(plan, (attn_sdpa_plan *)(uintptr_t)0x1);

    /* Execute with internal workspace: its allocation fails, nothing written. */
    plan = NULL;
    assert_int_equal(attn_sdpa_plan_create(&plan, &d), ATTN_OK);
    arm(-1, 0);
    assert_int_equal(attn_sdpa_execute(plan, &a, NULL, 0), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_true(bits_equal(o, o0, sizeof o / sizeof *o));
    assert_true(bits_equal(p, p0, sizeof p / sizeof *p));
    assert_true(bits_equal(lse, lse0, sizeof lse / sizeof *lse));

    /* One-shot: its plan, then its workspace. */
    for (int at = 0; at < 2; at++) {
        arm(at == 0 ? 0 : -1, at == 1 ? 0 : -1);
        assert_int_equal(attn_sdpa(&d, &a), ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_true(bits_equal(o, o0, sizeof o / sizeof *o));
    }
    /* and with none failing it runs */
    assert_int_equal(attn_sdpa_execute(plan, &a, NULL, 0), ATTN_OK);
    assert_false(isnan(o[0]));
    attn_sdpa_plan_destroy(plan);

    /* The backward on the same problem (the forward's O and lse as inputs):
     * its plan, its internal workspace, and the one-shot's two. */
    static float d_o[B * H * N * D], dq[B * H * N * D], dk[B * HKV * M * D], dv[B * HKV * M * D];
    static float dq0[B * H * N * D], dk0[B * HKV * M * D], dv0[B * HKV * M * D];
    fill(d_o, sizeof d_o / sizeof *d_o, 1.0f);
    for (size_t i = 0; i < sizeof dq / sizeof *dq; i++) dq[i] = dq0[i] = NAN;
    for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) dk[i] = dk0[i] = dv[i] = dv0[i] = NAN;
    attn_sdpa_bwd_desc bd;
    attn_sdpa_bwd_desc_init(&bd);
    bd.fwd = d;
    bd.fwd.want_probs = 0;
    bd.d_o = bd.dq = d.q;
    bd.dk = bd.dv = d.k;
    attn_sdpa_bwd_args ba = { .q = q, .k = k, .v = v, .o = o, .d_o = d_o, .lse = lse,
                              .dq = dq, .dk = dk, .dv = dv, .global_k = a.global_k,
                              .global_q = a.global_q, .layout = a.layout };
    attn_sdpa_bwd_plan *bp = (attn_sdpa_bwd_plan *)(uintptr_t)0x1;
    arm(0, -1);
    assert_int_equal(attn_sdpa_bwd_plan_create(&bp, &bd), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_ptr_equal(bp, (attn_sdpa_bwd_plan *)(uintptr_t)0x1);
    bp = NULL;
    assert_int_equal(attn_sdpa_bwd_plan_create(&bp, &bd), ATTN_OK);
    for (int at = 0; at < 3; at++) {
        arm(at == 1 ? 0 : -1, at == 1 ? -1 : 0);
        attn_status bs = at == 0 ? attn_sdpa_bwd_execute(bp, &ba, NULL, 0)
                                 : attn_sdpa_backward(&bd, &ba);
        assert_int_equal(bs, ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_true(bits_equal(dq, dq0, sizeof dq / sizeof *dq));
        assert_true(bits_equal(dk, dk0, sizeof dk / sizeof *dk));
        assert_true(bits_equal(dv, dv0, sizeof dv / sizeof *dv));
    }
    assert_int_equal(attn_sdpa_bwd_execute(bp, &ba, NULL, 0), ATTN_OK);
    assert_false(isnan(dq[0]) || isnan(dk[0]) || isnan(dv[0]));
    attn_sdpa_bwd_plan_destroy(bp);
#endif
}

static void test_mha_oom(void **state)
{
    (void)state;
#if !ALLOC_HOOKS
    skip();
#else
    if (!hooks_active())
        skip();
    enum { E = 16, MH = 4, L = 9 };
    static float x[B * L * E], inw[3 * E * E], inb[3 * E], ow[E * E], ob[E];
    static float out[B * L * E], w[B * L * L], out0[B * L * E], w0[B * L * L];
    fill(x, sizeof x / sizeof *x, 1.0f);
    fill(inw, sizeof inw / sizeof *inw, 0.2f);
    fill(inb, sizeof inb / sizeof *inb, 0.1f);
    fill(ow, sizeof ow / sizeof *ow, 0.2f);
    fill(ob, sizeof ob / sizeof *ob, 0.1f);
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) out[i] = out0[i] = NAN;
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) w[i] = w0[i] = NAN;
    attn_mha_desc d;
    attn_mha_desc_init(&d);
    d.embed_dim = E; d.num_heads = MH; d.batch = B; d.q_len = d.kv_len = L;
    d.self_attention = 1; d.packed_in_proj = 1; d.weights = ATTN_WEIGHTS_AVERAGED;
    d.threads = 2;
    attn_mha_weights wt = { .in_proj_weight = inw, .in_proj_bias = inb,
                            .out_weight = ow, .out_bias = ob };
    attn_mha_args a = { .x = x, .out = out, .weights = w };

    /* plan_create makes the MHA plan and an SDPA plan: fail each in turn */
    for (int at = 0; at < 2; at++) {
        attn_mha_plan *plan = (attn_mha_plan *)(uintptr_t)0x1;
        arm(at, -1);
        assert_int_equal(attn_mha_plan_create(&plan, &d), ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_ptr_equal(plan, (attn_mha_plan *)(uintptr_t)0x1);
    }
    attn_mha_plan *plan = NULL;
    assert_int_equal(attn_mha_plan_create(&plan, &d), ATTN_OK);
    arm(-1, 0);
    assert_int_equal(attn_mha_execute(plan, &wt, &a, NULL, 0), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_true(bits_equal(out, out0, sizeof out / sizeof *out));
    assert_true(bits_equal(w, w0, sizeof w / sizeof *w));
    assert_int_equal(attn_mha_execute(plan, &wt, &a, NULL, 0), ATTN_OK);
    assert_false(isnan(out[0]));
    attn_mha_plan_destroy(plan);
#endif
}

/* Training: plan_create makes the MHA plan and three SDPA plans (forward,
 * forward with logsumexp, backward); train_forward and backward allocate
 * their workspace when given none.  Each allocation fails in turn. */
static void test_mha_train_oom(void **state)
{
    (void)state;
#if !ALLOC_HOOKS
    skip();
#else
    if (!hooks_active())
        skip();
    enum { E = 16, MH = 4, L = 9 };
    static float x[B * L * E], inw[3 * E * E], inb[3 * E], ow[E * E], ob[E];
    static float out[B * L * E], out0[B * L * E], dy[B * L * E];
    static float dx[B * L * E], dinw[3 * E * E], dinb[3 * E], dow[E * E], dob[E];
    fill(x, sizeof x / sizeof *x, 1.0f);
    fill(inw, sizeof inw / sizeof *inw, 0.2f);
    fill(inb, sizeof inb / sizeof *inb, 0.1f);
    fill(ow, sizeof ow / sizeof *ow, 0.2f);
    fill(ob, sizeof ob / sizeof *ob, 0.1f);
    fill(dy, sizeof dy / sizeof *dy, 0.3f);
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) out[i] = out0[i] = NAN;
    attn_mha_desc d;
    attn_mha_desc_init(&d);
    d.embed_dim = E; d.num_heads = MH; d.batch = B; d.q_len = d.kv_len = L;
    d.self_attention = 1; d.packed_in_proj = 1; d.threads = 2;
    attn_mha_weights wt = { .in_proj_weight = inw, .in_proj_bias = inb,
                            .out_weight = ow, .out_bias = ob };
    attn_mha_args a = { .x = x, .out = out };
    attn_mha_grads g = { .dx = dx, .d_in_proj_weight = dinw, .d_in_proj_bias = dinb,
                         .d_out_weight = dow, .d_out_bias = dob };

    for (int at = 0; at < 4; at++) {
        attn_mha_plan *plan = (attn_mha_plan *)(uintptr_t)0x1;
        arm(at, -1);
        assert_int_equal(attn_mha_plan_create(&plan, &d), ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_ptr_equal(plan, (attn_mha_plan *)(uintptr_t)0x1);
    }
    attn_mha_plan *plan = NULL;
    assert_int_equal(attn_mha_plan_create(&plan, &d), ATTN_OK);
    size_t cb = 0;
    assert_int_equal(attn_mha_context_size(plan, &cb), ATTN_OK);
    unsigned char *cx = aligned_alloc(64, (cb + 63) / 64 * 64);
    assert_non_null(cx);
    memset(cx, 0x5A, cb);
    arm(-1, 0);
    assert_int_equal(attn_mha_train_execute(plan, &wt, &a, cx, cb, NULL, 0),
                     ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_true(bits_equal(out, out0, sizeof out / sizeof *out));
    for (size_t i = 0; i < cb; i++)
        assert_int_equal(cx[i], 0x5A);
    assert_int_equal(attn_mha_train_execute(plan, &wt, &a, cx, cb, NULL, 0), ATTN_OK);
    assert_false(isnan(out[0]));

    static float *const gs[] = { dx, dinw, dinb, dow, dob };
    static const size_t gn[] = { B * L * E, 3 * E * E, 3 * E, E * E, E };
    for (size_t k = 0; k < 5; k++)
        for (size_t i = 0; i < gn[k]; i++)
            gs[k][i] = NAN;
    arm(-1, 0);
    assert_int_equal(attn_mha_bwd_execute(plan, &wt, &a, dy, cx, cb, &g, 0, NULL, 0),
                     ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    for (size_t k = 0; k < 5; k++)
        for (size_t i = 0; i < gn[k]; i++)
            assert_true(isnan(gs[k][i]));
    assert_int_equal(attn_mha_bwd_execute(plan, &wt, &a, dy, cx, cb, &g, 0, NULL, 0), ATTN_OK);
    assert_false(isnan(dx[0]));
    assert_false(isnan(dinw[0]));
    free(cx);
    attn_mha_plan_destroy(plan);
#endif
}

/* Linear attention (forward with state, and backward): each plan's
 * allocation, the internal workspace, and the one-shot's two fail in
 * turn; O, the state and the gradients stay untouched. */
static void test_linear_oom(void **state)
{
    (void)state;
#if !ALLOC_HOOKS
    skip();
#else
    if (!hooks_active())
        skip();
    enum { LN = 70, LM = 90 };
    static float q[B * H * LN * D], k[B * HKV * LM * D], v[B * HKV * LM * D];
    static float o[B * H * LN * D], o0[B * H * LN * D];
    static float s[B * HKV * D * D], s0[B * HKV * D * D], z[B * HKV * D], z0[B * HKV * D];
    fill(q, sizeof q / sizeof *q, 1.0f);
    fill(k, sizeof k / sizeof *k, 0.5f);
    fill(v, sizeof v / sizeof *v, 1.0f);
    fill(s, sizeof s / sizeof *s, 2.0f);
    fill(z, sizeof z / sizeof *z, 0.0f);
    for (size_t i = 0; i < sizeof z / sizeof *z; i++) z[i] = 1.0f + (float)i;
    memcpy(s0, s, sizeof s);
    memcpy(z0, z, sizeof z);
    for (size_t i = 0; i < sizeof o / sizeof *o; i++) o[i] = o0[i] = NAN;
    attn_linear_desc d;
    attn_linear_desc_init(&d);
    d.batch = B; d.q_heads = H; d.kv_heads = HKV; d.q_len = LN; d.kv_len = LM;
    d.qk_dim = d.v_dim = D;
    d.q = d.o = attn_view_bhsd(H, LN, D);
    d.k = d.v = attn_view_bhsd(HKV, LM, D);
    d.causal = 1;
    d.use_state = 1;
    d.threads = 2;
    attn_linear_args a = { .q = q, .k = k, .v = v, .o = o, .state_s = s, .state_z = z };

    attn_linear_plan *plan = (attn_linear_plan *)(uintptr_t)0x1;
    arm(0, -1);
    assert_int_equal(attn_linear_plan_create(&plan, &d), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_ptr_equal(plan, (attn_linear_plan *)(uintptr_t)0x1);
    plan = NULL;
    assert_int_equal(attn_linear_plan_create(&plan, &d), ATTN_OK);
    for (int at = 0; at < 3; at++) {
        arm(at == 1 ? 0 : -1, at == 1 ? -1 : 0);
        attn_status st = at == 0 ? attn_linear_execute(plan, &a, NULL, 0) : attn_linear(&d, &a);
        assert_int_equal(st, ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_true(bits_equal(o, o0, sizeof o / sizeof *o));
        assert_true(bits_equal(s, s0, sizeof s / sizeof *s));
        assert_true(bits_equal(z, z0, sizeof z / sizeof *z));
    }
    assert_int_equal(attn_linear_execute(plan, &a, NULL, 0), ATTN_OK);
    assert_false(isnan(o[0]));
    assert_false(bits_equal(s, s0, sizeof s / sizeof *s));
    attn_linear_plan_destroy(plan);

    static float d_o[B * H * LN * D], dq[B * H * LN * D], dk[B * HKV * LM * D],
        dv[B * HKV * LM * D];
    static float dq0[B * H * LN * D], dk0[B * HKV * LM * D], dv0[B * HKV * LM * D];
    fill(d_o, sizeof d_o / sizeof *d_o, 1.0f);
    for (size_t i = 0; i < sizeof dq / sizeof *dq; i++) dq[i] = dq0[i] = NAN;
    for (size_t i = 0; i < sizeof dk / sizeof *dk; i++) dk[i] = dk0[i] = dv[i] = dv0[i] = NAN;
    attn_linear_bwd_desc bd;
    attn_linear_bwd_desc_init(&bd);
    bd.fwd = d;
    bd.fwd.use_state = 0;
    bd.d_o = bd.dq = d.q;
    bd.dk = bd.dv = d.k;
    attn_linear_bwd_args ba = { .q = q, .k = k, .v = v, .d_o = d_o, .dq = dq, .dk = dk,
                                .dv = dv };
    attn_linear_bwd_plan *bp = (attn_linear_bwd_plan *)(uintptr_t)0x1;
    arm(0, -1);
    assert_int_equal(attn_linear_bwd_plan_create(&bp, &bd), ATTN_ERR_OUT_OF_MEMORY);
    assert_int_equal(disarm(), 0);
    assert_ptr_equal(bp, (attn_linear_bwd_plan *)(uintptr_t)0x1);
    bp = NULL;
    assert_int_equal(attn_linear_bwd_plan_create(&bp, &bd), ATTN_OK);
    for (int at = 0; at < 3; at++) {
        arm(at == 1 ? 0 : -1, at == 1 ? -1 : 0);
        attn_status bs = at == 0 ? attn_linear_bwd_execute(bp, &ba, NULL, 0)
                                 : attn_linear_backward(&bd, &ba);
        assert_int_equal(bs, ATTN_ERR_OUT_OF_MEMORY);
        assert_int_equal(disarm(), 0);
        assert_true(bits_equal(dq, dq0, sizeof dq / sizeof *dq));
        assert_true(bits_equal(dk, dk0, sizeof dk / sizeof *dk));
        assert_true(bits_equal(dv, dv0, sizeof dv / sizeof *dv));
    }
    assert_int_equal(attn_linear_bwd_execute(bp, &ba, NULL, 0), ATTN_OK);
    assert_false(isnan(dq[0]) || isnan(dk[0]) || isnan(dv[0]));
    attn_linear_bwd_plan_destroy(bp);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdpa_oom),
        cmocka_unit_test(test_mha_oom),
        cmocka_unit_test(test_mha_train_oom),
        cmocka_unit_test(test_linear_oom),
    };
    return cmocka_run_group_tests_name("alloc", tests, NULL, NULL);
}
