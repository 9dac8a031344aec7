/*
 * gpu_route_cl.c - routing mode 4 (moe_cuda_route_cl.cu: the whole routing of up to 64 tokens by
 * one cluster of 16 or 8 CTAs) against the fp64 host reference on the three mini presets with
 * E <= 128 (sigmoid + bias, grouped sigmoid, softmax top-k), with a NaN router row that must
 * never be selected; both cluster sizes; run-to-run bits; calls of changing token counts on one
 * layer and a replayed CUDA graph against fresh layers' bits; and the tuning checks. Exits 77
 * (skipped) without CUDA or GPU; prints a visible line where the device has no such cluster
 * (before 9.0).
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
    printf("gpu_route_cl: skipped (this build has no CUDA)\n");
    return 77;
}
#else

#include "util/gpu_moe_util.h"
#include "moe/moe_cuda_defaults.h"

#include <cuda_runtime_api.h>
#include <math.h>

static int g_have_cl = -1; /* mode 4 runs on this device (m3-mini, 32 tokens) */

/* Forced mode 4 at T tokens with clusters of cl (0: the layer's choice) into *r; 0 if another
 * mode ran (the device has no such cluster). */
static int run_cl(const tpm_moe_weights *w, const uint16_t *x, int T, int cl, gpu_run *r) {
    tune_route_cl_min = 1;
    tune_route_cl_max = 64;
    tune_route_cl_size = cl;
    run_gpu(w, x, T, 1, TPM_MOE_PATH_AUTO, r);
    tune_route_cl_min = tune_route_cl_max = tune_route_cl_size = -1;
    if (last_route_mode != 4) {
        free_run(r);
        return 0;
    }
    return 1;
}

static void vs_reference(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    const int Ts[] = {1, 7, 9, 16, 17, 31, 32, 33, 50, 64};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        assert_non_null(p);
        tpm_moe_weights w;
        make_weights(p, 700 + pi, &w);
        for (int h = 0; h < p->hidden; h++) w.router[(size_t)5 * p->hidden + h] = NAN;
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, p->hidden, 710 + T);
            for (int cl = 8; cl <= 16; cl += 8) {
                gpu_run a, b;
                if (!run_cl(&w, x, T, cl, &a)) {
                    printf("  %-17s T=%-3d clusters of %d: mode 4 not available here (mode %d ran)\n", p->name, T,
                           cl, last_route_mode);
                    if (pi == 0 && T == 32) g_have_cl = 0;
                    continue;
                }
                if (pi == 0 && T == 32 && g_have_cl < 0) g_have_cl = 1;
                for (int t = 0; t < T; t++)
                    for (int sl = 0; sl < p->top_k; sl++) assert_int_not_equal(a.sel[(size_t)t * a.K + sl], 5);
                const double e = check_run(&w, x, &a, 1, 6, 1e-2);
                assert_true(run_cl(&w, x, T, cl, &b)); /* a fresh layer: the same bits */
                assert_memory_equal(a.sel, b.sel, sizeof(int32_t) * (size_t)T * a.K);
                assert_memory_equal(a.wts, b.wts, sizeof(float) * (size_t)T * a.K);
                assert_memory_equal(a.y, b.y, (size_t)T * p->hidden * 2);
                printf("  %-17s T=%-3d route mode 4, clusters of %2d: rel err %.2e, bits reproduced\n", p->name, T,
                       cl, e);
                free_run(&a);
                free_run(&b);
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* M3's router shape (128 experts, top-4, sigmoid + bias, one shared) at hidden 4096 (small
 * experts): 8 or 16 chunks per CTA, so with clusters of 8 the ring refills (more chunks than
 * slots); both sizes against the reference and run to run. */
static void m3_router_ring(void **state) {
    (void)state;
    tpm_preset p = *tpm_preset_find("m3-mini");
    p.hidden = 4096;
    p.n_experts = 128;
    p.inter = 32;
    p.shared_inter = 32;
    tpm_moe_weights w;
    make_weights(&p, 750, &w);
    const int Ts[] = {20, 64};
    for (int ti = 0; ti < 2; ti++) {
        const int T = Ts[ti];
        uint16_t *x = make_x(T, p.hidden, 760 + T);
        for (int cl = 8; cl <= 16; cl += 8) {
            gpu_run a, b;
            if (!run_cl(&w, x, T, cl, &a)) {
                printf("  m3 router T=%-3d clusters of %d: mode 4 not available here\n", T, cl);
                continue;
            }
            const double e = check_run(&w, x, &a, 1, 6, 1e-2);
            assert_true(run_cl(&w, x, T, cl, &b));
            assert_memory_equal(a.sel, b.sel, sizeof(int32_t) * (size_t)T * a.K);
            assert_memory_equal(a.y, b.y, (size_t)T * p.hidden * 2);
            printf("  m3 router, hidden 4096, T=%-3d clusters of %2d: rel err %.2e, bits reproduced\n", T, cl, e);
            free_run(&a);
            free_run(&b);
        }
        free(x);
    }
    free_weights(&w);
}

/* Calls of changing token counts on one layer (mode 4 and, in between, modes 1 and 3), then a
 * captured graph of two mode 4 calls replayed: every output the bits of a fresh layer's call. */
static void sequence_and_graph(void **state) {
    (void)state;
    if (g_have_cl == 0) {
        printf("  mode 4 not available here: skipped\n");
        return;
    }
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 720, &w);
    const int H = p->hidden;
    const int Ts[] = {32, 9, 64, 1, 17, 64, 33, 40};
    enum { N = sizeof Ts / sizeof Ts[0] };
    gpu_run ref[N];
    uint16_t *xs[N];
    for (int i = 0; i < N; i++) {
        xs[i] = make_x(Ts[i], H, 730 + i);
        assert_true(run_cl(&w, xs[i], Ts[i], 0, &ref[i]));
    }
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(&w, 64, 1, TPM_MOE_PATH_AUTO, &tu);
    void *dx = NULL, *dy = NULL;
    assert_int_equal(cudaMalloc(&dx, (size_t)64 * H * 2), cudaSuccess);
    assert_int_equal(cudaMalloc(&dy, (size_t)64 * H * 2), cudaSuccess);
    uint16_t *y = malloc((size_t)64 * H * 2);
    for (int i = 0; i < N; i++) {
        const int T = Ts[i];
        /* every third call: mode 4 off (modes 1 / 3 run, their own bits), then on again */
        tu.route_cl_min = 1;
        tu.route_cl_max = i % 3 == 2 ? 0 : 64;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        forward_host(m, dx, dy, H, xs[i], T, y);
        if (i % 3 != 2) assert_memory_equal(y, ref[i].y, (size_t)T * H * 2);
    }
    tu.route_cl_max = 64;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    assert_int_equal(tpm_cuda_moe_route_mode(m, 32), 4);
    if (tpm_cuda_moe_capturable(m, 32) && tpm_cuda_moe_capturable(m, 9)) {
        replay_two_call_graph(m, H, xs[0], 32, ref[0].y, xs[1], 9, ref[1].y, 5);
        printf("  mode 4: %d calls of 1-64 tokens (modes 1 / 3 between) and 5 replays of a two-call graph: "
               "fresh layers' bits\n",
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
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 740, &w);
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(&w, 64, 1, TPM_MOE_PATH_AUTO, &tu);
    assert_int_equal(tu.route_cl_min, TPM_MOE_ROUTE_CL_MIN);
    assert_int_equal(tu.route_cl_max, TPM_MOE_ROUTE_CL_MAX);
    assert_int_equal(tu.route_cl_size, 0);
    tu.route_cl_size = 4;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_cl_size = 16;
    tu.route_cl_min = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_cl_min = 1;
    tu.route_cl_max = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_cl_max = 64;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    /* never above 64 tokens, whatever the range */
    tu.route_cl_max = 1000;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    assert_int_not_equal(tpm_cuda_moe_route_mode(m, 65), 4);
    int shape[4];
    assert_int_equal(tpm_cuda_moe_route_cl_shape(m, 65, shape), 0);
    assert_int_equal(tpm_cuda_moe_route_cl_shape(NULL, 8, shape), 0);
    if (tpm_cuda_moe_route_cl_shape(m, 32, shape)) {
        assert_true(shape[0] == 8 || shape[0] == 16);
        assert_true(shape[1] >= 1 && shape[2] >= 1);
        printf("  mode 4 at 32 tokens: %d CTAs, %d ring slots, %d chunks, %d bytes of shared memory\n", shape[0],
               shape[1], shape[2], shape[3]);
    }
    tpm_cuda_moe_destroy(m);
    free_weights(&w);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("gpu_route_cl: skipped (no GPU)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tuning_checks),
        cmocka_unit_test(vs_reference),
        cmocka_unit_test(sequence_and_graph),
        cmocka_unit_test(m3_router_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
