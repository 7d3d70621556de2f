/*
 * test_random.c -- randomized cases over every option and their
 * combinations (fixed seeds, own PRNG), checked against the float64
 * reference with the tolerances documented in test_sdpa.c / reference.c:
 *   |P - p| <= p_rel p + 1e-30, |O - o| <= o_rel sum_j p_j |v_j| + 1e-30,
 *   |lse - ref| <= lse_abs, p_rel/o_rel/lse_abs worst-case fp32 bounds that
 *   scale with dk, the number of visible keys and the logit magnitude.
 * Every fourth case is also run with the optional outputs toggled (O must
 * not change bitwise) and every fifth through plan + execute with a caller
 * workspace (same bits as attn_sdpa).
 *
 * ATTN_TEST_CASES=<n> sets the number of cases (default 400);
 * ATTN_TEST_QUICK=1 (the valgrind setup) makes the default 40.
 * ATTN_TEST_SEED=<s> changes the base seed (default 20240601).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <attn.h>

#include "harness.h"

static int64_t pick_len(trng *r, int64_t n)
{
    /* favour 0 and the full length */
    int k = (int)trng_int(r, 0, 5);
    if (k == 0)
        return 0;
    if (k <= 2)
        return n;
    return trng_int(r, 0, n);
}

static tcase random_case(uint64_t seed)
{
    trng r;
    trng_seed(&r, seed);
    const int64_t B = trng_int(&r, 1, 3);
    const int64_t Hkv = trng_int(&r, 1, 3);
    const int64_t Hq = Hkv * trng_int(&r, 1, 3);
    int64_t n, m;
    if (trng_bool(&r, 0.8)) {
        n = trng_int(&r, 1, 40);
        m = trng_int(&r, 1, 40);
    } else {
        n = trng_int(&r, 1, 150);
        m = trng_int(&r, 1, 300);
    }
    int64_t dk = trng_bool(&r, 0.9) ? trng_int(&r, 1, 80) : trng_int(&r, 81, 260);
    int64_t dv = trng_bool(&r, 0.9) ? trng_int(&r, 1, 80) : trng_int(&r, 81, 260);
    int layout = (int)trng_int(&r, 0, LAY_COUNT_ - 1);
    if (layout == LAY_PACKED) {
        m = n;
        dv = dk;
    }
    tcase c = tcase_default(B, Hq, Hkv, n, m, dk, dv);
    c.layout = layout;
    c.out_layout = (int)trng_int(&r, 0, OUT_COUNT_ - 1);
    c.misalign = trng_bool(&r, 0.3);
    int sk = (int)trng_int(&r, 0, 5);
    c.scale = sk <= 2 ? NAN : sk == 3 ? 0.0f : (float)trng_uniform(&r, -2.0, 2.0);
    c.align = (int)trng_int(&r, 0, 1);
    int wk = (int)trng_int(&r, 0, 4);
    c.wl = wk == 0 || wk == 3 ? trng_int(&r, 0, m) : wk == 4 ? -trng_int(&r, 1, 9) : -1;
    wk = (int)trng_int(&r, 0, 4);
    c.wr = wk == 0 ? 0 : wk == 1 || wk == 3 ? trng_int(&r, 0, m) : -1;
    c.use_kv_lens = trng_bool(&r, 0.4);
    c.use_q_lens = trng_bool(&r, 0.4);
    for (int64_t b = 0; b < B; b++) {
        c.kv_lens[b] = (int32_t)pick_len(&r, m);
        c.q_lens[b] = (int32_t)pick_len(&r, n);
    }
    c.mask_mode = (int)trng_int(&r, 0, 2);
    c.mask_bcast = (int)trng_int(&r, 0, 7);
    c.mask_keep = trng_uniform(&r, 0.2, 1.0);
    c.use_bias = trng_bool(&r, 0.5);
    c.bias_bcast = (int)trng_int(&r, 0, 7);
    int bk = (int)trng_int(&r, 0, 3);
    c.bias_ninf = bk == 0 ? 0.0 : bk == 1 ? 0.1 : bk == 2 ? 0.5 : 0.02;
    c.bias_mag = trng_bool(&r, 0.8) ? 1.0 : 8.0;
    c.want_probs = trng_bool(&r, 0.5);
    c.want_lse = trng_bool(&r, 0.5);
    c.in_mag = trng_bool(&r, 0.85) ? 1.0 : 10.0;
    c.poison = trng_bool(&r, 0.5);
    c.threads = 1;
    c.seed = seed;
    return c;
}

static long env_long(const char *name, long def)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return def;
    return strtol(e, NULL, 0);
}

static void test_random(void **state)
{
    (void)state;
    const long count = env_long("ATTN_TEST_CASES", tquick() ? 40 : 400);
    const uint64_t base = (uint64_t)env_long("ATTN_TEST_SEED", 20240601);
    tstats st;
    tstats_init(&st, "random");
    long fails = 0;
    for (long k = 0; k < count; k++) {
        const uint64_t seed = base * 1000003u + (uint64_t)k;
        tcase c = random_case(seed);
        tinst t;
        if (tinst_build(&t, &c)) {
            printf("FAIL: could not build case %ld: %s\n", k, tcase_str(&c));
            tinst_free(&t);
            fails++;
            continue;
        }
        attn_status s = tinst_run(&t);
        if (s != ATTN_OK) {
            printf("FAIL case %ld: attn_sdpa returned %s: %s\n", k, attn_status_str(s),
                   tcase_str(&c));
            tinst_free(&t);
            fails++;
            continue;
        }
        int bad = tinst_check(&t, &st) != 0;
        if (bad)
            printf("  (random case %ld)\n", k);
        tsnap one;
        tsnap_take(&one, &t);

        if (!bad && k % 4 == 0) {
            tcase c2 = c;
            c2.want_probs = !c.want_probs;
            c2.want_lse = !c.want_lse;
            tinst t2;
            if (tinst_build(&t2, &c2) == 0 && tinst_run(&t2) == ATTN_OK) {
                tsnap two;
                tsnap_take(&two, &t2);
                if (!tsnap_equal_o(&one, &two)) {
                    printf("FAIL case %ld: O changes bitwise with want_probs=%d "
                           "want_lse=%d: %s\n", k, c2.want_probs, c2.want_lse,
                           tcase_str(&c));
                    bad = 1;
                }
                tsnap_free(&two);
            } else {
                printf("FAIL case %ld: toggled outputs variant failed\n", k);
                bad = 1;
            }
            tinst_free(&t2);
        }
        if (!bad && k % 5 == 0) {
            attn_sdpa_plan *plan = NULL;
            size_t ws = 0;
            if (attn_sdpa_plan_create(&plan, &t.desc) != ATTN_OK ||
                attn_sdpa_workspace_size(plan, &ws) != ATTN_OK) {
                printf("FAIL case %ld: plan_create/workspace_size\n", k);
                bad = 1;
            } else {
                size_t cap = (ws + 63) / 64 * 64 + 64;
                void *buf = aligned_alloc(64, cap);
                tinst_clear_outputs(&t);
                if (!buf || attn_sdpa_execute(plan, &t.args, buf, ws) != ATTN_OK) {
                    printf("FAIL case %ld: execute with workspace\n", k);
                    bad = 1;
                } else {
                    tsnap x;
                    tsnap_take(&x, &t);
                    if (!tsnap_equal(&one, &x)) {
                        printf("FAIL case %ld: plan+workspace differs bitwise from "
                               "attn_sdpa: %s\n", k, tcase_str(&c));
                        bad = 1;
                    }
                    tsnap_free(&x);
                }
                free(buf);
            }
            attn_sdpa_plan_destroy(plan);
        }
        tsnap_free(&one);
        tinst_free(&t);
        fails += bad;
    }
    tstats_print(&st);
    if (fails)
        fail_msg("%ld of %ld random cases failed", fails, count);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
