/* attn from CMake: one small GQA attn_sdpa call (2 query heads on 1 KV head,
 * n != m, dk != dv, bottom-right causal) checked against a float64 loop, and
 * attn_version() against the version find_package reported.  Exit code 0
 * only if both hold. */
#include <attn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

enum { B = 2, HQ = 2, HKV = 1, N = 3, M = 5, DK = 4, DV = 3 };

int main(void)
{
    static float q[B][HQ][N][DK], k[B][HKV][M][DK], v[B][HKV][M][DV], o[B][HQ][N][DV];
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < N; i++)
                for (int c = 0; c < DK; c++)
                    q[b][h][i][c] = 0.25f * (float)((b + 2 * h + 3 * i + c) % 7) - 0.7f;
        for (int j = 0; j < M; j++) {
            for (int c = 0; c < DK; c++)
                k[b][0][j][c] = 0.3f * (float)((5 * j + c + b) % 6) - 0.8f;
            for (int c = 0; c < DV; c++)
                v[b][0][j][c] = (float)(j + 1) + 0.1f * (float)(c - b);
        }
    }

    attn_sdpa_desc desc;
    if (attn_sdpa_desc_init(&desc) != ATTN_OK)
        return 1;
    desc.batch = B; desc.q_heads = HQ; desc.kv_heads = HKV;
    desc.q_len = N; desc.kv_len = M; desc.qk_dim = DK; desc.v_dim = DV;
    desc.q = attn_view_bhsd(HQ, N, DK);
    desc.k = attn_view_bhsd(HKV, M, DK);
    desc.v = attn_view_bhsd(HKV, M, DV);
    desc.o = attn_view_bhsd(HQ, N, DV);
    desc.align = ATTN_ALIGN_BOTTOM_RIGHT;      /* query i sees keys j <= i + M - N */
    desc.window_right = 0;
    attn_sdpa_args args = { .q = &q[0][0][0][0], .k = &k[0][0][0][0],
                            .v = &v[0][0][0][0], .o = &o[0][0][0][0] };
    attn_status st = attn_sdpa(&desc, &args);
    if (st != ATTN_OK) {
        fprintf(stderr, "attn_sdpa: %s\n", attn_status_str(st));
        return 1;
    }

    double worst = 0.0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < HQ; h++)
            for (int i = 0; i < N; i++) {
                int last = i + M - N;
                double s[M], mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= last; j++) {
                    s[j] = 0.0;
                    for (int c = 0; c < DK; c++)
                        s[j] += (double)q[b][h][i][c] * (double)k[b][0][j][c];
                    s[j] /= sqrt((double)DK);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j <= last; j++)
                    sum += exp(s[j] - mx);
                for (int c = 0; c < DV; c++) {
                    double ref = 0.0;
                    for (int j = 0; j <= last; j++)
                        ref += exp(s[j] - mx) / sum * (double)v[b][0][j][c];
                    double err = fabs(ref - (double)o[b][h][i][c]);
                    worst = err > worst || err != err ? err : worst;
                }
            }
    printf("attn %s: largest difference from float64 %.2e\n", attn_version(), worst);
    if (strcmp(attn_version(), EXPECT_VERSION) != 0) {
        fprintf(stderr, "attn_version() is %s, find_package found %s\n",
                attn_version(), EXPECT_VERSION);
        return 1;
    }
    return worst <= 1e-5 ? 0 : 1;
}
