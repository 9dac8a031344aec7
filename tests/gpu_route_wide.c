/*
 * gpu_route_wide.c - routing mode 3 in 128-token tiles (tuning.route_tc_wide; the x slice staged
 * in shared memory, moe_cuda_route_tc.cu) against the 64-token tiles over the same H slices (the
 * same bits: selections, weights and the layer's output), against the fp64 host reference, with
 * a NaN router row that must never be selected; on the mini presets with E <= 128 and on M3's
 * router shape (128 experts) at hidden 1536 and 2048 (3 and 4 chunks per CTA: the register
 * pipeline's every step), each with the cluster sums spread over every rank (route_poll bit 4) or
 * not, and the cluster meeting's poll spread over its ranks (bit 5) or not (the same bits); calls of changing token counts on one layer and a replayed CUDA graph
 * against fresh layers' bits; the tuning checks. Exits 77 (skipped) without CUDA or GPU; prints
 * a visible line where mode 3 cannot run (before 9.0).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#ifndef TPMOE_HAVE_CUDA
int main(void) {
    printf("gpu_route_wide: skipped (this build has no CUDA)\n");
    return 77;
}
#else

#include "util/gpu_moe_util.h"
#include "moe/moe_cuda_defaults.h"

#include <cuda_runtime_api.h>
#include <math.h>

static int g_have_tc = -1; /* mode 3 runs on this device */

/* Forced mode 3 at T tokens, wide (128-token tiles from 1 token) or not, on `clusters` clusters of
 * 8 (0: the layer's choice) into *r; 0 if mode 3 did not run (no 9.0 device). The wide tiles
 * without the expert split unless the caller set tune_route_tc_split. */
static int run_tc(const tpm_moe_weights *w, const uint16_t *x, int T, int wide, int clusters, gpu_run *r) {
    const int pin = tune_route_tc_split < 0;
    if (pin) tune_route_tc_split = 1;
    tune_route_gemm_min = 1 << 20;
    tune_route_tc_min = 1;
    tune_route_tc_max = 256;
    tune_route_tc_loads = 3;
    tune_route_tc_wide = wide ? 1 : 0;
    tune_route_tc_clusters = clusters;
    run_gpu(w, x, T, 1, TPM_MOE_PATH_AUTO, r);
    tune_route_gemm_min = tune_route_tc_min = tune_route_tc_max = tune_route_tc_loads = -1;
    tune_route_tc_wide = tune_route_tc_clusters = -1;
    if (pin) tune_route_tc_split = -1;
    if (last_route_mode != 3) {
        free_run(r);
        if (g_have_tc < 0) g_have_tc = 0;
        return 0;
    }
    g_have_tc = 1;
    return 1;
}

/* The wide tiles against the 64-token tiles at the same H slices (c clusters per token tile: the
 * 64-token form gets c x its tiles), and against the reference; where the preset cannot take the
 * wide tile (fewer than 16 chunks of 32 h: one cluster per tile) the wide request falls back to the
 * 64-token tiles (checked by the launch shape). */
static void compare_preset(const tpm_preset *p, uint64_t seed, const int *Ts, int nT) {
    tpm_moe_weights w;
    make_weights(p, seed, &w);
    for (int h = 0; h < p->hidden; h++) w.router[(size_t)5 * p->hidden + h] = NAN;
    const int c = 2, wide_ok = p->hidden / 32 / 8 >= 2;
    for (int ti = 0; ti < nT; ti++) {
        const int T = Ts[ti], t64 = (T + 63) / 64, t128 = (T + 127) / 128;
        uint16_t *x = make_x(T, p->hidden, seed + 17 + T);
        gpu_run a, b;
        if (!run_tc(&w, x, T, 0, c * t64, &a)) {
            printf("  %-17s T=%-3d mode 3 not available here (mode %d ran)\n", p->name, T, last_route_mode);
            free(x);
            continue;
        }
        assert_int_equal(last_route_tc_shape[0], 8 * c);
        assert_int_equal(last_route_tc_shape[1], t64);
        assert_true(run_tc(&w, x, T, 1, c * t128, &b));
        assert_int_equal(last_route_tc_shape[0], 8 * c);
        assert_int_equal(last_route_tc_shape[1], wide_ok ? t128 : t64);
        for (int t = 0; t < T; t++)
            for (int sl = 0; sl < p->top_k; sl++) assert_int_not_equal(b.sel[(size_t)t * b.K + sl], 5);
        const double e = check_run(&w, x, &b, 1, 6, 1e-2);
        assert_memory_equal(a.sel, b.sel, sizeof(int32_t) * (size_t)T * a.K);
        assert_memory_equal(a.wts, b.wts, sizeof(float) * (size_t)T * a.K);
        assert_memory_equal(a.y, b.y, (size_t)T * p->hidden * 2);
        /* both tiles with the cluster sums spread over every rank or not (route_poll bit 4, the
         * other way from the default), and with the cluster meeting up to 64 tokens, its poll
         * spread over the last cluster's ranks or not (route_poll bit 5): the same bits */
        for (int v = 0; v < 4; v++) {
            gpu_run s;
            const int wd = v & 1;
            tune_route_poll = v < 2 ? TPM_MOE_ROUTE_POLL ^ 16 : TPM_MOE_ROUTE_POLL ^ 32;
            if (v >= 2) tune_route_cluster_meet = 64;
            const int ran = run_tc(&w, x, T, wd, c * (wd ? t128 : t64), &s);
            tune_route_poll = tune_route_cluster_meet = -1;
            assert_true(ran);
            assert_memory_equal(a.sel, s.sel, sizeof(int32_t) * (size_t)T * a.K);
            assert_memory_equal(a.wts, s.wts, sizeof(float) * (size_t)T * a.K);
            assert_memory_equal(a.y, s.y, (size_t)T * p->hidden * 2);
            free_run(&s);
        }
        printf("  %-17s hidden %-4d T=%-3d %s: %d CTAs x %d tiles, rel err %.2e, the 64-token tiles' bits\n",
               p->name, p->hidden, T, wide_ok ? "128-token tiles" : "no wide tile (64-token tiles)",
               last_route_tc_shape[0], last_route_tc_shape[1], e);
        free_run(&a);
        free_run(&b);
        free(x);
    }
    free_weights(&w);
}

static void vs_64_token_tiles(void **state) {
    (void)state;
    const int Ts[] = {1, 25, 64, 65, 100, 128, 129, 200, 256};
    const char *names[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        assert_non_null(p);
        compare_preset(p, 800 + 50 * pi, Ts, (int)(sizeof Ts / sizeof Ts[0]));
        if (g_have_tc == 0) return;
    }
}

/* M3's router (128 experts top-4, sigmoid + bias, one shared) at hidden 1536 and 2048 with small
 * experts: with two clusters per tile a CTA runs 3 or 4 chunks (the register pipeline's depth). */
static void m3_router_chunks(void **state) {
    (void)state;
    tpm_preset p = *tpm_preset_find("m3-mini");
    p.n_experts = 128;
    p.inter = 32;
    p.shared_inter = 32;
    const int Ts[] = {33, 96, 128, 160, 256};
    for (int hi = 0; hi < 2; hi++) {
        p.hidden = hi ? 2048 : 1536;
        compare_preset(&p, 900 + hi, Ts, 5);
        if (g_have_tc == 0) return;
    }
}

/* The expert-split forms (route_tc_split 2 and 4: each cluster one group's experts over EG times
 * the H slices, the warps' runs of chunks added in shared memory) on M3's router shape (128
 * experts) at hidden 1536, 2048 and 6144, on the layer's clusters and on EG clusters per tile:
 * against the fp64 reference (a NaN router row never selected), the same bits on a fresh layer,
 * and the launch shape (clusters a multiple of EG, the chunks per CTA over one group's CTAs). At
 * hidden 6144 on EG clusters per tile (24 chunks per CTA) and over two tiles the split forms may
 * not fit: the next fewer groups, down to the 64-token tiles. */
static void split_experts(void **state) {
    (void)state;
    if (g_have_tc == 0) {
        printf("  mode 3 not available here: skipped\n");
        return;
    }
    tpm_preset p = *tpm_preset_find("m3-mini");
    p.n_experts = 128;
    p.inter = 32;
    p.shared_inter = 32;
    const int hs[] = {1536, 2048, 6144};
    const int Ts[] = {1, 25, 33, 64, 96, 128, 160, 256};
    for (int hi = 0; hi < 3; hi++) {
        p.hidden = hs[hi];
        const int NC = p.hidden / 32;
        tpm_moe_weights w;
        make_weights(&p, 950 + hi, &w);
        for (int h = 0; h < p.hidden; h++) w.router[(size_t)77 * p.hidden + h] = NAN;
        for (int ti = 0; ti < 8; ti++) {
            const int T = Ts[ti], t128 = (T + 127) / 128;
            uint16_t *x = make_x(T, p.hidden, 960 + 10 * hi + ti);
            for (int EG = 2; EG <= 4; EG *= 2) {
                for (int cl = 0; cl < 2; cl++) {
                    const int clusters = cl ? EG * t128 : 0;
                    gpu_run a, b;
                    tune_route_tc_split = EG;
                    const int ran = run_tc(&w, x, T, 1, clusters, &a);
                    const int X = last_route_tc_shape[0], tiles = last_route_tc_shape[1], ch = last_route_tc_shape[3];
                    const int ran2 = ran && run_tc(&w, x, T, 1, clusters, &b);
                    tune_route_tc_split = -1;
                    assert_true(ran && ran2);
                    int eg = EG; /* the form that ran: the shape's chunks per CTA over one group's CTAs */
                    while (eg > 1 && (X % (8 * eg) != 0 || ch != (NC + X / eg - 1) / (X / eg) || ch > 8)) eg /= 2;
                    /* hidden 6144: EG clusters per tile, or 15 resident over two tiles, leave a split
                     * form too many chunks per CTA */
                    if (hi < 2 || (cl == 0 && t128 == 1)) assert_int_equal(eg, EG);
                    if (eg > 1) assert_int_equal(tiles, t128);
                    for (int t = 0; t < T; t++)
                        for (int sl = 0; sl < p.top_k; sl++) assert_int_not_equal(a.sel[(size_t)t * a.K + sl], 77);
                    const double e = check_run(&w, x, &a, 1, 6, 1e-2);
                    assert_memory_equal(a.sel, b.sel, sizeof(int32_t) * (size_t)T * a.K);
                    assert_memory_equal(a.wts, b.wts, sizeof(float) * (size_t)T * a.K);
                    assert_memory_equal(a.y, b.y, (size_t)T * p.hidden * 2);
                    printf("  hidden %-4d T=%-3d split %d on %s: %3d CTAs x %d tiles, %d chunks each (%d groups ran), "
                           "rel err %.2e, run to run the same bits\n",
                           p.hidden, T, EG, cl ? "EG clusters" : "the layer's clusters", X, tiles, ch, eg, e);
                    free_run(&a);
                    free_run(&b);
                }
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* Calls of changing token counts on one layer, the wide tile on and off in turn, then a captured
 * graph of two wide calls replayed: every output the bits of a fresh layer's call. */
static void sequence_and_graph(void **state) {
    (void)state;
    if (g_have_tc == 0) {
        printf("  mode 3 not available here: skipped\n");
        return;
    }
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 820, &w);
    const int H = p->hidden;
    const int Ts[] = {128, 65, 256, 25, 200, 100, 129, 77};
    enum { N = sizeof Ts / sizeof Ts[0] };
    gpu_run ref[N];
    uint16_t *xs[N];
    for (int i = 0; i < N; i++) {
        xs[i] = make_x(Ts[i], H, 830 + i);
        assert_true(run_tc(&w, xs[i], Ts[i], 1, 0, &ref[i]));
    }
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(&w, 256, 1, TPM_MOE_PATH_AUTO, &tu);
    void *dx = NULL, *dy = NULL;
    assert_int_equal(cudaMalloc(&dx, (size_t)256 * H * 2), cudaSuccess);
    assert_int_equal(cudaMalloc(&dy, (size_t)256 * H * 2), cudaSuccess);
    uint16_t *y = malloc((size_t)256 * H * 2);
    tu.route_gemm_min = 1 << 20;
    tu.route_tc_min = 1;
    tu.route_tc_max = 256;
    tu.route_tc_loads = 3;
    tu.route_cl_max = 0;
    tu.route_tc_split = 1; /* the references' form (m3-mini's 32 experts: never split anyway) */
    for (int i = 0; i < N; i++) {
        const int T = Ts[i];
        /* every third call: the 64-token tiles (the layer's clusters: other H slices, their own
         * bits), then the wide tiles again */
        tu.route_tc_wide = i % 3 == 2 ? 0 : 1;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        assert_int_equal(tpm_cuda_moe_route_mode(m, T), 3);
        forward_host(m, dx, dy, H, xs[i], T, y);
        if (i % 3 != 2) assert_memory_equal(y, ref[i].y, (size_t)T * H * 2);
    }
    tu.route_tc_wide = 1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    if (tpm_cuda_moe_capturable(m, 128) && tpm_cuda_moe_capturable(m, 200)) {
        replay_two_call_graph(m, H, xs[0], 128, ref[0].y, xs[4], 200, ref[4].y, 5);
        printf("  wide tiles: %d calls of 25-256 tokens (64-token tiles between) and 5 replays of a two-call "
               "graph: fresh layers' bits\n",
               (int)N);
    }
    assert_int_equal(tpm_cuda_moe_check(m), TPM_OK); /* no bounded wait ran out */
    tpm_cuda_moe_destroy(m);
    cudaFree(dx);
    cudaFree(dy);
    free(y);
    for (int i = 0; i < N; i++) {
        free_run(&ref[i]);
        free(xs[i]);
    }
    free_weights(&w);
}

static void tuning_checks(void **state) {
    (void)state;
    tpm_preset p = *tpm_preset_find("m3-mini");
    p.n_experts = 128;
    p.hidden = 2048;
    p.inter = 32;
    p.shared_inter = 32;
    tpm_moe_weights w;
    make_weights(&p, 840, &w);
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(&w, 256, 1, TPM_MOE_PATH_AUTO, &tu);
    assert_int_equal(tu.route_tc_wide, TPM_MOE_ROUTE_TC_WIDE);
    tu.route_tc_wide = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_tc_wide = TPM_MOE_ROUTE_TC_WIDE;
    assert_int_equal(tu.route_tc_split, TPM_MOE_ROUTE_TC_SPLIT);
    for (int bad = 0; bad < 6; bad += 3) { /* 0 and 3: not 1, 2 or 4 */
        tu.route_tc_split = bad;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    }
    tu.route_tc_split = 1; /* the shapes below: the wide tiles without the expert split */
    tu.route_tc_wide = 0;
    tu.route_tc_clusters = 4; /* 2 clusters per 128-token tile at 256 tokens */
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    int s64[4], s128[4];
    if (tpm_cuda_moe_route_tc_shape(m, 256, s64)) {
        assert_int_equal(s64[1], 4); /* 64-token tiles: one cluster each */
        assert_int_equal(s64[0], 8);
        tu.route_tc_wide = 129;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        assert_int_equal(tpm_cuda_moe_route_tc_shape(m, 128, s128), 1);
        assert_int_equal(s128[1], 2); /* below route_tc_wide: 64-token tiles */
        assert_int_equal(tpm_cuda_moe_route_tc_shape(m, 256, s128), 1);
        assert_int_equal(s128[1], 2);
        assert_int_equal(s128[0], 16);
        assert_int_equal(s128[3], 4); /* 64 chunks over 16 CTAs */
        /* one cluster per tile cannot take the wide tile: the 64-token tiles */
        tu.route_tc_clusters = 2;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        assert_int_equal(tpm_cuda_moe_route_tc_shape(m, 256, s128), 1);
        assert_int_equal(s128[1], 4);
        printf("  256 tokens on 4 clusters: 2 wide tiles of 16 CTAs; on 2 clusters: 4 tiles of 64 tokens\n");
        /* the layer's clusters with route_tc_fit: the fewest per tile for the most chunks per CTA */
        assert_int_equal(tu.route_tc_fit, TPM_MOE_ROUTE_TC_FIT);
        tu.route_tc_fit = 2;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
        tu.route_tc_clusters = 0;
        tu.route_tc_wide = 1;
        const int NC = p.hidden / 32;
        for (int T = 32; T <= 256; T *= 2) {
            int s0[4], s1[4];
            tu.route_tc_fit = 0;
            assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
            assert_int_equal(tpm_cuda_moe_route_tc_shape(m, T, s0), 1);
            tu.route_tc_fit = 1;
            assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
            assert_int_equal(tpm_cuda_moe_route_tc_shape(m, T, s1), 1);
            assert_int_equal(s1[1], s0[1]);
            assert_int_equal(s1[3], s0[3]); /* the most chunks per CTA kept */
            assert_int_equal(s1[0], 8 * ((NC + 8 * s0[3] - 1) / (8 * s0[3])));
            assert_true(s1[0] <= s0[0]);
            printf("  %3d tokens, the layer's clusters: %d CTAs per tile, fitted %d (<= %d chunks each)\n", T, s0[0],
                   s1[0], s1[3]);
        }
    } else {
        printf("  mode 3 not available here\n");
    }
    tpm_cuda_moe_destroy(m);
    free_weights(&w);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("gpu_route_wide: skipped (no GPU)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tuning_checks),
        cmocka_unit_test(vs_64_token_tiles),
        cmocka_unit_test(m3_router_chunks),
        cmocka_unit_test(sequence_and_graph),
        cmocka_unit_test(split_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
