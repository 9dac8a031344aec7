/*
 * gpu_moe.c - the CUDA MoE layer against an fp64 host reference (router,
 * top-k variants, swiglu-oai / SiLU-GLU, biases, fused shared expert) for
 * every structure preset (mini sizes), fused == unfused, TP 2 == TP 1 (two GPUs), EP ranks
 * (simulated on one GPU) summing to the reference, NaN logits, empty and
 * overfull experts, token counts 1..16384 (odd ones too), run-to-run bit
 * reproducibility and bad arguments. The shared plans, the prefill GEMM forms and the
 * stream / graph variants are in gpu_moe_paths.c; the helpers in util/gpu_moe_util.c.
 * Exits 77 (skipped) without CUDA or GPU.
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
    printf("gpu_moe: skipped (this build has no CUDA)\n");
    return 77;
}
#else

#include "util/gpu_moe_util.h"
#include "moe/moe_cuda_defaults.h"

#include "moe/moe_math.h"
#include "numeric.h"

#include <cuda_runtime_api.h>
#include <math.h>

/* MARK: tests */
static const int token_counts[] = {1, 2, 7, 31, 32, 33, 100, 513, 4097};

static void presets_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        assert_non_null(p);
        tpm_moe_weights w;
        make_weights(p, 100 + pi, &w);
        for (size_t ti = 0; ti < sizeof token_counts / sizeof token_counts[0]; ti++) {
            const int T = token_counts[ti];
            uint16_t *x = make_x(T, p->hidden, 7 + T);
            for (int path = TPM_MOE_PATH_AUTO; path <= TPM_MOE_PATH_PREFILL; path++) {
                if (path == TPM_MOE_PATH_DECODE && T > TPM_MOE_DECODE_MAX_NT) continue;
                gpu_run r;
                run_gpu(&w, x, T, 1, (tpm_moe_path)path, &r);
                const double e = check_run(&w, x, &r, 1, 6, 1e-2);
                printf("  %-17s T=%-5d path=%d rel err %.2e\n", p->name, T, path, e);
                free_run(&r);
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* The three decode kernel sets (scalar GEMV, persistent tensor-core, GEMV set 2) and the four
 * routing modes (legacy two launches, one fused launch, router GEMM, one launch on tensor
 * cores up to 256 tokens) against the reference, the first two with 8, 16 and 32 router
 * experts per logits block; for each block size the fused launch gives the legacy routing
 * bit for bit (same arithmetic), and mode 3 gives the same bits with its fragments loaded
 * straight into registers, through the shared-memory ring, or in the register pipeline (from wr3f
 * or from wrf, split in registers); a NaN router row is never
 * selected by any mode; 1500 tokens take k_select's separate row scatter (T*K > 4096); at 10 and
 * 16 tokens mode 1's wide form (one row of 16-token blocks) gives the bits of its two rows of
 * 8-token tiles. */
static void variants_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        tpm_moe_weights w;
        make_weights(p, 300 + pi, &w);
        for (int h = 0; h < p->hidden; h++) w.router[(size_t)5 * p->hidden + h] = NAN;
        const int Ts[] = {1, 5, 8, 10, 16, 17, 32, 100, 300, 1500};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, p->hidden, 500 + T);
            if (T <= TPM_MOE_DECODE_MAX_NT) {
                for (int dk = 0; dk <= 2; dk++) {
                    gpu_run r;
                    tune_decode_kernel = dk;
                    run_gpu(&w, x, T, 1, TPM_MOE_PATH_DECODE, &r);
                    tune_decode_kernel = -1;
                    const double e = check_run(&w, x, &r, 1, 4, 1e-2);
                    printf("  %-17s T=%-4d decode kernel %d rel err %.2e\n", p->name, T, dk, e);
                    free_run(&r);
                }
            }
            for (int re = 8; re <= 32; re *= 2) {
                gpu_run rm[8]; /* modes 0 .. 3, then mode 3 with the ring loads, the pipelined loads
                                * and the fp32 pipelined loads, then (below) mode 1's other form */
                const int nrun = re != 8 ? 2 : T > 256 ? 3 : 7;
                for (int run = 0; run < nrun; run++) {
                    const int mode = run < 4 ? run : 3;
                    tune_route_legacy = mode == 0;
                    tune_route_gemm_min = mode == 2 ? 1 : 1 << 20;
                    tune_route_experts = re;
                    tune_route_tc_min = 1;
                    tune_route_tc_max = mode == 3 ? 256 : 0;
                    tune_route_tc_loads = run == 4 ? 0 : run == 5 ? 2 : run == 6 ? 3 : 1;
                    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rm[run]);
                    if (mode == 3 && last_route_mode != 3) { /* no 9.0 device: mode 3 cannot run */
                        printf("  %-17s T=%-4d route mode 3 not available here (mode %d ran)\n", p->name, T,
                               last_route_mode);
                    } else {
                        assert_int_equal(last_route_mode, mode);
                    }
                    tune_route_legacy = tune_route_gemm_min = tune_route_experts = -1;
                    tune_route_tc_min = tune_route_tc_max = tune_route_tc_loads = -1;
                    for (int t = 0; t < T; t++)
                        for (int sl = 0; sl < p->top_k; sl++)
                            assert_int_not_equal(rm[run].sel[(size_t)t * rm[run].K + sl], 5);
                    const double e = check_run(&w, x, &rm[run], 1, 4, 1e-2);
                    printf("  %-17s T=%-4d route mode %d%s, %2d experts per block: rel err %.2e\n", p->name, T, mode,
                           run == 4 ? " (ring)" : run == 5 ? " (pipe)" : run == 6 ? " (pipe fp32)" : "", re, e);
                }
                const size_t nk = (size_t)T * rm[0].K;
                assert_memory_equal(rm[0].sel, rm[1].sel, nk * sizeof(int32_t));
                assert_memory_equal(rm[0].wts, rm[1].wts, nk * sizeof(float));
                const int wide = T > 8 && T <= 16; /* mode 1's two forms here give the same bits: */
                if (wide) { /* the other one than the default's (wide up to 11 tokens) */
                    tune_route_gemm_min = 1 << 20;
                    tune_route_experts = re;
                    tune_route_tc_min = 1;
                    tune_route_tc_max = 0;
                    tune_route_wide = T <= 11 ? 0 : 16;
                    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rm[7]);
                    assert_int_equal(last_route_mode, 1);
                    tune_route_gemm_min = tune_route_experts = tune_route_tc_min = tune_route_tc_max = -1;
                    tune_route_wide = -1;
                    const double e = check_run(&w, x, &rm[7], 1, 4, 1e-2);
                    printf("  %-17s T=%-4d route mode 1 (%s), %2d experts per block: rel err %.2e\n", p->name, T,
                           T <= 11 ? "8-token tiles" : "wide", re, e);
                    assert_memory_equal(rm[1].sel, rm[7].sel, nk * sizeof(int32_t));
                    assert_memory_equal(rm[1].wts, rm[7].wts, nk * sizeof(float));
                    assert_memory_equal(rm[1].y, rm[7].y, (size_t)T * p->hidden * 2);
                    free_run(&rm[7]);
                }
                for (int rp = 0; T <= 24 && rp <= 7; rp += 7) { /* mode 1's tickets (0) and every row polled
                                                                  * (7): the default's bits (round 50) */
                    gpu_run rq;
                    tune_route_gemm_min = 1 << 20;
                    tune_route_experts = re;
                    tune_route_tc_min = 1;
                    tune_route_tc_max = 0;
                    tune_route_poll = rp;
                    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rq);
                    assert_int_equal(last_route_mode, 1);
                    tune_route_gemm_min = tune_route_experts = tune_route_tc_min = tune_route_tc_max = -1;
                    tune_route_poll = -1;
                    assert_memory_equal(rm[1].sel, rq.sel, nk * sizeof(int32_t));
                    assert_memory_equal(rm[1].wts, rq.wts, nk * sizeof(float));
                    assert_memory_equal(rm[1].y, rq.y, (size_t)T * p->hidden * 2);
                    printf("  %-17s T=%-4d route mode 1, %2d experts per block, route_poll %d: the default's bits\n",
                           p->name, T, re, rp);
                    free_run(&rq);
                }
                for (int rp = 1; re == 8 && T <= 256 && last_route_mode >= 0 && rp <= 15; rp += rp == 1 ? 8 : 6) {
                    /* mode 3's tickets instead of its polled cluster partials (route_poll 1), and the
                     * partial tiles pushed into the summing rank (bit 3) with tickets (9) and polled
                     * (15): the same bits */
                    gpu_run rq;
                    tune_route_gemm_min = 1 << 20;
                    tune_route_tc_min = 1;
                    tune_route_tc_max = 256;
                    tune_route_poll = rp;
                    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rq);
                    const int ran = last_route_mode;
                    tune_route_gemm_min = tune_route_tc_min = tune_route_tc_max = tune_route_poll = -1;
                    if (ran == 3) {
                        assert_memory_equal(rm[3].sel, rq.sel, nk * sizeof(int32_t));
                        assert_memory_equal(rm[3].wts, rq.wts, nk * sizeof(float));
                        assert_memory_equal(rm[3].y, rq.y, (size_t)T * p->hidden * 2);
                        printf("  %-17s T=%-4d route mode 3, route_poll %d: the default's bits\n", p->name, T, rp);
                    }
                    free_run(&rq);
                }
                for (int run = 4; run < nrun; run++) { /* mode 3: direct, ring, pipelined and fp32 pipelined
                                                        * loads, the same bits */
                    assert_memory_equal(rm[3].sel, rm[run].sel, nk * sizeof(int32_t));
                    assert_memory_equal(rm[3].wts, rm[run].wts, nk * sizeof(float));
                    assert_memory_equal(rm[3].y, rm[run].y, (size_t)T * p->hidden * 2);
                }
                /* the permutation by every selecting block (route_perm_min 1) and by the last one
                 * (0), modes 1 and 3: the default's bits either way (round 49); every selecting
                 * block with mode 3's blocks meeting at the global counter instead of a cluster
                 * barrier (pm 2, route_cluster_meet 0) and at the barrier up to 64 tokens (pm 3;
                 * round 52) */
                for (int mode = 1; re == 8 && T <= 256 && mode <= 3; mode += 2) {
                    for (int pm = 0; pm <= (mode == 3 ? 3 : 1); pm++) {
                        gpu_run rp;
                        tune_route_gemm_min = 1 << 20;
                        tune_route_experts = re;
                        tune_route_tc_min = 1;
                        tune_route_tc_max = mode == 3 ? 256 : 0;
                        tune_route_perm_min = pm ? 1 : 0;
                        tune_route_cluster_meet = pm == 2 ? 0 : pm == 3 ? 64 : -1;
                        run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rp);
                        const int ran = last_route_mode;
                        tune_route_gemm_min = tune_route_experts = tune_route_tc_min = tune_route_tc_max = -1;
                        tune_route_perm_min = tune_route_cluster_meet = -1;
                        if (ran == mode) {
                            assert_memory_equal(rm[mode].sel, rp.sel, nk * sizeof(int32_t));
                            assert_memory_equal(rm[mode].wts, rp.wts, nk * sizeof(float));
                            assert_memory_equal(rm[mode].y, rp.y, (size_t)T * p->hidden * 2);
                            printf("  %-17s T=%-4d route mode %d, permutation by %s: the default's bits\n", p->name,
                                   T, mode,
                                   pm == 3 ? "every selecting block (cluster barrier up to 64)"
                                   : pm == 2 ? "every selecting block (global counter)"
                                   : pm    ? "every selecting block"
                                           : "the last block");
                        }
                        free_run(&rp);
                    }
                }
                for (int run = 0; run < nrun; run++) free_run(&rm[run]);
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* Routing mode 1's polled partials across the calls of one layer (round 50): the token count
 * changes from call to call (one row of blocks, the wide form, two rows of tiles), the ticket is
 * switched on and off in between, and a captured CUDA graph is replayed; every call gives the
 * bits of a fresh layer's call with the ticket, and no bounded wait runs out. */
static void route_poll_sequence(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 77, &w);
    const int H = p->hidden, kMax = 24;
    enum { NT = 25 };
    gpu_run ref[NT];
    uint16_t *xs[NT];
    for (int T = 1; T <= kMax; T++) { /* references: fresh layers, the ticket */
        xs[T] = make_x(T, H, 900 + T);
        tune_route_gemm_min = 1 << 20;
        tune_route_tc_min = 1;
        tune_route_tc_max = 0;
        tune_route_poll = 0;
        run_gpu(&w, xs[T], T, 1, TPM_MOE_PATH_AUTO, &ref[T]);
        assert_int_equal(last_route_mode, 1);
        tune_route_gemm_min = tune_route_tc_min = tune_route_tc_max = tune_route_poll = -1;
    }
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(&w, kMax, 1, TPM_MOE_PATH_AUTO, &tu);
    tu.route_gemm_min = 1 << 20;
    tu.route_tc_min = 1;
    tu.route_tc_max = 0;
    tu.route_cl_max = 0;
    assert_int_equal(tu.route_poll, TPM_MOE_ROUTE_POLL); /* the default */
    void *dx = NULL, *dy = NULL;
    assert_int_equal(cudaMalloc(&dx, (size_t)kMax * H * 2), cudaSuccess);
    assert_int_equal(cudaMalloc(&dy, (size_t)kMax * H * 2), cudaSuccess);
    uint16_t *y = malloc((size_t)kMax * H * 2);
    int32_t *sel = malloc(sizeof(int32_t) * (size_t)kMax * 8);
    float *wts = malloc(sizeof(float) * (size_t)kMax * 8);
    const int Ts[] = {8, 3, 1, 11, 8, 16, 5, 24, 2, 8, 10, 17, 8, 13, 1, 7, 20, 7, 4, 12};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        const int T = Ts[i];
        tu.route_poll = i % 5 == 3 ? 0 : i % 5 == 1 ? 3 : 7; /* the tickets now and then */
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        forward_host(m, dx, dy, H, xs[T], T, y);
        assert_int_equal(tpm_cuda_moe_get_routing(m, T, sel, wts, NULL), TPM_OK);
        assert_memory_equal(y, ref[T].y, (size_t)T * H * 2);
        assert_memory_equal(sel, ref[T].sel, sizeof(int32_t) * (size_t)T * ref[T].K);
        assert_memory_equal(wts, ref[T].wts, sizeof(float) * (size_t)T * ref[T].K);
    }
    /* a graph of two calls (8 and 3 tokens), replayed: the parity of the polled buffer moves on
     * inside the graph as it does outside */
    tu.route_poll = 1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    if (tpm_cuda_moe_capturable(m, 8) && tpm_cuda_moe_capturable(m, 3)) {
        replay_two_call_graph(m, H, xs[8], 8, ref[8].y, xs[3], 3, ref[3].y, 5);
        printf("  route_poll: 20 calls of 1-24 tokens and 5 replays of a two-call graph: fresh layers' bits\n");
    }
    assert_int_equal(tpm_cuda_moe_check(m), TPM_OK); /* no bounded wait ran out */
    tpm_cuda_moe_destroy(m);
    cudaFree(dx);
    cudaFree(dy);
    for (int T = 1; T <= kMax; T++) {
        free_run(&ref[T]);
        free(xs[T]);
    }
    /* mode 3 (forced from 1 token): its polled cluster partials across calls of 9-256 tokens,
     * the tickets now and then */
    const int T3[] = {32, 100, 25, 256, 64, 9, 200, 32, 256, 57};
    enum { N3 = sizeof T3 / sizeof T3[0] };
    gpu_run ref3[N3];
    uint16_t *x3[N3];
    for (int i = 0; i < N3; i++) {
        x3[i] = make_x(T3[i], H, 950 + i);
        tune_route_gemm_min = 1 << 20;
        tune_route_tc_min = 1;
        tune_route_tc_max = 256;
        tune_route_poll = 0;
        run_gpu(&w, x3[i], T3[i], 1, TPM_MOE_PATH_AUTO, &ref3[i]);
        const int ran = last_route_mode;
        tune_route_gemm_min = tune_route_tc_min = tune_route_tc_max = tune_route_poll = -1;
        if (ran != 3) { /* no 9.0 device */
            for (int j = 0; j <= i; j++) {
                free_run(&ref3[j]);
                free(x3[j]);
            }
            printf("  route_poll: mode 3 not available here\n");
            goto done3;
        }
    }
    m = new_layer(&w, 256, 1, TPM_MOE_PATH_AUTO, &tu);
    tu.route_gemm_min = 1 << 20;
    tu.route_tc_min = 1;
    tu.route_tc_max = 256;
    tu.route_cl_max = 0;
    {
        void *dx3 = NULL, *dy3 = NULL;
        uint16_t *y3 = malloc((size_t)256 * H * 2);
        assert_int_equal(cudaMalloc(&dx3, (size_t)256 * H * 2), cudaSuccess);
        assert_int_equal(cudaMalloc(&dy3, (size_t)256 * H * 2), cudaSuccess);
        for (int i = 0; i < N3; i++) {
            const int T = T3[i];
            static const int rp3[] = {3, 11, 1, 9}; /* polled / tickets, pulled / pushed tiles */
            tu.route_poll = rp3[i % 4];
            assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
            assert_int_equal(tpm_cuda_moe_route_mode(m, T), 3);
            assert_int_equal(cudaMemcpy(dx3, x3[i], (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
            assert_int_equal(cudaMemset(dy3, 0xff, (size_t)T * H * 2), cudaSuccess);
            assert_int_equal(tpm_cuda_moe_forward(m, dx3, T, dy3, NULL), TPM_OK);
            assert_int_equal(cudaMemcpy(y3, dy3, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
            assert_memory_equal(y3, ref3[i].y, (size_t)T * H * 2);
        }
        assert_int_equal(tpm_cuda_moe_check(m), TPM_OK);
        printf("  route_poll: mode 3, %d calls of 9-256 tokens: fresh layers' bits\n", (int)N3);
        cudaFree(dx3);
        cudaFree(dy3);
        free(y3);
    }
    tpm_cuda_moe_destroy(m);
    for (int i = 0; i < N3; i++) {
        free_run(&ref3[i]);
        free(x3[i]);
    }
done3:
    free(y);
    free(sel);
    free(wts);
    free_weights(&w);
}

static void m2_like_structure(void **state) {
    (void)state;
    /* MiniMax-M2's structure (256 experts top-8, sigmoid+bias, no shared, SiLU-GLU) at small sizes */
    tpm_preset p = *tpm_preset_find("m2");
    p.hidden = 256;
    p.inter = 128;
    tpm_moe_weights w;
    make_weights(&p, 5, &w);
    const int Ts[] = {1, 9, 200};
    for (int i = 0; i < 3; i++) {
        uint16_t *x = make_x(Ts[i], p.hidden, 3 + i);
        gpu_run r;
        run_gpu(&w, x, Ts[i], 1, TPM_MOE_PATH_AUTO, &r);
        check_run(&w, x, &r, 1, 4, 1e-2);
        free_run(&r);
        free(x);
    }
    free_weights(&w);
    /* routing mode 3 at Ep = 256 (two m-tiles per warp): the ring, direct, pipelined and fp32 pipelined loads
     * (and those with the partial tiles pushed) give the same bits, and they match the reference; hidden 1024: 32 chunks, so every CTA
     * of the launch runs several chunks through each form's pipeline */
    p.hidden = 1024;
    make_weights(&p, 6, &w);
    const int Tm[] = {25, 64, 200, 256};
    for (int i = 0; i < 4; i++) {
        const int T = Tm[i];
        uint16_t *x = make_x(T, p.hidden, 30 + i);
        gpu_run rm[5]; /* loads 0 .. 3, then 3 with the partial tiles pushed (route_poll 15) */
        for (int ld = 0; ld < 5; ld++) {
            tune_route_gemm_min = 1 << 20;
            tune_route_tc_min = 1;
            tune_route_tc_max = 256;
            tune_route_tc_loads = ld < 4 ? ld : 3;
            tune_route_poll = ld == 4 ? 15 : -1;
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &rm[ld]);
            const int mode = last_route_mode;
            tune_route_gemm_min = tune_route_tc_min = tune_route_tc_max = tune_route_tc_loads = tune_route_poll = -1;
            const double e = check_run(&w, x, &rm[ld], 1, 4, 1e-2);
            printf("  m2-like T=%-4d route mode %d, %s loads: rel err %.2e\n", T, mode,
                   ld == 0   ? "ring"
                   : ld == 1 ? "direct"
                   : ld == 2 ? "pipelined"
                   : ld == 3 ? "fp32 pipelined"
                             : "fp32 pipelined, tiles pushed",
                   e);
            if (mode != 3) { /* no 9.0 device */
                for (int k = 0; k <= ld; k++) free_run(&rm[k]);
                goto next;
            }
        }
        for (int ld = 1; ld < 5; ld++) {
            const size_t nk = (size_t)T * rm[0].K;
            assert_memory_equal(rm[0].sel, rm[ld].sel, nk * sizeof(int32_t));
            assert_memory_equal(rm[0].wts, rm[ld].wts, nk * sizeof(float));
            assert_memory_equal(rm[0].y, rm[ld].y, (size_t)T * p.hidden * 2);
        }
        for (int ld = 0; ld < 5; ld++) free_run(&rm[ld]);
    next:
        free(x);
    }
    free_weights(&w);
}

static void fused_equals_unfused(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 11, &w);
    const int Ts[] = {1, 8, 32, 300};
    for (int i = 0; i < 4; i++) {
        uint16_t *x = make_x(Ts[i], p->hidden, 40 + i);
        gpu_run a, b;
        run_gpu(&w, x, Ts[i], 1, TPM_MOE_PATH_AUTO, &a);
        const int plan_a = last_plan;
        run_gpu(&w, x, Ts[i], 0, TPM_MOE_PATH_AUTO, &b);
        check_run(&w, x, &b, 0, 4, 1e-2);
        const double d = rel_diff(a.y, b.y, (size_t)Ts[i] * p->hidden);
        printf("  fused (plan %d) vs unfused T=%d: rel diff %.2e\n", plan_a, Ts[i], d);
        assert_true(d < 1e-2);
        /* the decode path's split plan runs the unfused layer's shared MLP and sum: the same bits */
        if (plan_a == TPM_MOE_SHARED_SPLIT && Ts[i] <= TPM_MOE_DECODE_MAX_NT)
            assert_memory_equal(a.y, b.y, (size_t)Ts[i] * p->hidden * 2);
        free_run(&a);
        free_run(&b);
        free(x);
    }
    free_weights(&w);
}

static void nan_logits_and_overfull(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 12, &w);
    const int H = p->hidden, T = 16384;
    /* expert 3 is overfull (huge bias), expert 5 always NaN (router row NaN) */
    w.router_bias[3] = 100.0f;
    for (int h = 0; h < H; h++) w.router[5 * H + h] = NAN;
    uint16_t *x = make_x(T, H, 99);
    for (int h = 0; h < H; h++) x[(size_t)17 * H + h] = 0x7fc0; /* token 17: all logits NaN */
    gpu_run r;
    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &r);
    for (int t = 0; t < T; t++) {
        if (t == 17) continue;
        int has3 = 0;
        for (int s = 0; s < p->top_k; s++) {
            has3 |= r.sel[(size_t)t * r.K + s] == 3;
            assert_int_not_equal(r.sel[(size_t)t * r.K + s], 5);
        }
        assert_true(has3);
    }
    /* all-NaN token: the lowest indices after the sanitized order, all distinct, in range */
    for (int s = 0; s < p->top_k; s++) {
        const int e = r.sel[(size_t)17 * r.K + s];
        assert_true(e >= 0 && e < p->n_experts);
        for (int s2 = 0; s2 < s; s2++) assert_int_not_equal(e, r.sel[(size_t)17 * r.K + s2]);
    }
    free_run(&r);
    free(x);
    free_weights(&w);
}

static void tp2_equals_tp1(void **state) {
    (void)state;
    int n = 0;
    cudaGetDeviceCount(&n);
    if (n < 2) {
        printf("  tp2: skipped (one GPU)\n");
        return;
    }
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    make_weights(p, 13, &w);
    const int H = p->hidden, T = 37;
    uint16_t *x = make_x(T, H, 5);
    gpu_run ref;
    run_gpu(&w, x, T, 1, TPM_MOE_PATH_AUTO, &ref);
    void *comms[2] = {NULL, NULL};
    int devs[2] = {0, 1};
    assert_int_equal(tpm_cuda_nccl_init_all(2, devs, comms), TPM_OK);
    for (int path = TPM_MOE_PATH_DECODE; path <= TPM_MOE_PATH_PREFILL; path++) {
        const int Tp = path == TPM_MOE_PATH_DECODE ? 32 : T;
        tpm_cuda_moe *m[2];
        void *dx[2], *dy[2];
        for (int r = 0; r < 2; r++) {
            tpm_cuda_moe_desc d = {p, r, 2, r, 1, T, comms[r], 1, 0};
            assert_int_equal(tpm_cuda_moe_create(&d, &m[r]), TPM_OK);
            assert_int_equal(tpm_cuda_moe_upload(m[r], &w), TPM_OK);
            assert_int_equal(tpm_cuda_moe_set_path(m[r], (tpm_moe_path)path), TPM_OK);
            assert_int_equal(cudaMalloc(&dx[r], (size_t)T * H * 2), cudaSuccess);
            assert_int_equal(cudaMalloc(&dy[r], (size_t)T * H * 2), cudaSuccess);
            assert_int_equal(cudaMemcpy(dx[r], x, (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
        }
        /* one thread drives both ranks: the experts, then the all-reduces as one NCCL group */
        for (int r = 0; r < 2; r++) {
            cudaSetDevice(r);
            assert_int_equal(tpm_cuda_moe_route(m[r], dx[r], Tp, NULL), TPM_OK);
            assert_int_equal(tpm_cuda_moe_experts(m[r], dx[r], Tp, NULL), TPM_OK);
            assert_int_equal(tpm_cuda_moe_combine(m[r], Tp, dy[r], NULL), TPM_OK);
        }
        assert_int_equal(tpm_cuda_nccl_group(1), TPM_OK);
        for (int r = 0; r < 2; r++) assert_int_equal(tpm_cuda_moe_allreduce(m[r], dy[r], Tp, NULL), TPM_OK);
        assert_int_equal(tpm_cuda_nccl_group(0), TPM_OK);
        uint16_t *y = malloc((size_t)T * H * 2), *y1 = malloc((size_t)T * H * 2);
        for (int r = 0; r < 2; r++) {
            cudaSetDevice(r);
            assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
        }
        assert_int_equal(cudaMemcpy(y, dy[0], (size_t)Tp * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_int_equal(cudaMemcpy(y1, dy[1], (size_t)Tp * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_memory_equal(y, y1, (size_t)Tp * H * 2); /* both ranks hold the same sum */
        const double d = rel_diff(y, ref.y, (size_t)Tp * H);
        printf("  tp2 vs tp1 path=%d: rel diff %.2e\n", path, d);
        assert_true(d < 1e-2);
        free(y);
        free(y1);
        for (int r = 0; r < 2; r++) {
            cudaFree(dx[r]);
            cudaFree(dy[r]);
            tpm_cuda_moe_destroy(m[r]);
        }
    }
    cudaSetDevice(0);
    tpm_cuda_nccl_destroy(comms[0]);
    tpm_cuda_nccl_destroy(comms[1]);
    free_run(&ref);
    free(x);
    free_weights(&w);
}

/* Expert parallelism on one GPU: ep layers (EP ranks 0 .. ep-1, each with its
 * E/ep routed experts and its share of the shared expert) run on the same
 * input; their partial outputs summed on the host (in fp32, what the
 * all-reduce does) match the fp64 reference; every rank routes alike; the
 * per-slot counts of the ranks add up to the routing's histogram. Fused and
 * unfused, decode (kernel sets 0, 1, 2) and prefill (own wgmma GEMM where it
 * runs, cuBLAS streams), one tile, several tiles, the router GEMM with the
 * in-block and the separate row scatter. The fused layer's split plan (5 and
 * 8 tokens) routes no shared row under EP: the shared expert runs dense on EP
 * rank 0 and its combine adds it. */
static void ep_ranks_sum_to_reference(void **state) {
    (void)state;
    static const int marker = 0; /* a communicator the test never uses (no forward / allreduce) */
    const char *names[] = {"m3-mini", "gpt-oss-mini", "deepseek-v3-mini"};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        tpm_moe_weights w;
        make_weights(p, 900 + pi, &w);
        const int H = p->hidden, E = p->n_experts;
        const int Ts[] = {1, 5, 8, 33, 300, 1500};
        for (int ep = 2; ep <= 4; ep += 2) {
            for (int fused = 1; fused >= (p->n_shared ? 0 : 1); fused--) {
                for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                    const int T = Ts[ti];
                    uint16_t *x = make_x(T, H, 40 + T);
                    float *acc = calloc((size_t)T * H, sizeof(float));
                    uint16_t *yr = malloc((size_t)T * H * 2);
                    gpu_run r = {T, 0, malloc((size_t)T * H * 2), NULL, NULL};
                    int64_t *hist = calloc((size_t)E + 1, sizeof(int64_t)), local_rows = 0;
                    void *dx = NULL, *dy = NULL;
                    assert_int_equal(cudaMalloc(&dx, (size_t)T * H * 2), cudaSuccess);
                    assert_int_equal(cudaMalloc(&dy, (size_t)T * H * 2), cudaSuccess);
                    assert_int_equal(cudaMemcpy(dx, x, (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
                    for (int er = 0; er < ep; er++) {
                        tpm_cuda_moe_desc d = {p, 0, 1, 0, fused, T, (void *)&marker, ep, er};
                        tpm_cuda_moe *m = NULL;
                        assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_OK);
                        assert_int_equal(tpm_cuda_moe_upload(m, &w), TPM_OK);
                        { /* the other kernel sets too: T = 1 decode kernel 1 (tensor cores), T = 5
                           * kernel 0, T = 300 the cuBLAS prefill over streams */
                            tpm_cuda_moe_tuning tu;
                            assert_int_equal(tpm_cuda_moe_get_tuning(m, &tu), TPM_OK);
                            if (T == 1) tu.decode_kernel = 1;
                            if (T == 5) tu.decode_kernel = 0;
                            if (T == 300) tu.prefill_gemm = TPM_MOE_GEMM_STREAMS;
                            assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
                        }
                        assert_int_equal(cudaMemset(dy, 0xff, (size_t)T * H * 2), cudaSuccess); /* poison */
                        assert_int_equal(tpm_cuda_moe_route(m, dx, T, NULL), TPM_OK);
                        assert_int_equal(tpm_cuda_moe_experts(m, dx, T, NULL), TPM_OK);
                        assert_int_equal(tpm_cuda_moe_combine(m, T, dy, NULL), TPM_OK);
                        assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
                        assert_int_equal(cudaMemcpy(yr, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
                        for (size_t i = 0; i < (size_t)T * H; i++) acc[i] += tpm_bf16_to_f32(yr[i]);
                        const int K = tpm_cuda_moe_slots(m), Eloc = E / ep;
                        int32_t *sel = malloc(sizeof(int32_t) * (size_t)T * K), cnt[300];
                        float *wts = malloc(sizeof(float) * (size_t)T * K);
                        assert_int_equal(tpm_cuda_moe_get_routing(m, T, sel, wts, cnt), TPM_OK);
                        if (er == 0) {
                            r.K = K;
                            r.sel = sel;
                            r.wts = wts;
                            for (size_t i = 0; i < (size_t)T * K; i++) hist[sel[i]]++;
                        } else { /* every EP rank routes the same */
                            assert_memory_equal(sel, r.sel, sizeof(int32_t) * (size_t)T * K);
                            assert_memory_equal(wts, r.wts, sizeof(float) * (size_t)T * K);
                            free(sel);
                            free(wts);
                        }
                        for (int e = 0; e < Eloc; e++) assert_int_equal(cnt[e], hist[er * Eloc + e]);
                        if (fused && p->n_shared && tpm_cuda_moe_shared_plan(m, T) == TPM_MOE_SHARED_SPLIT) {
                            /* the EP split plan: no shared rows routed, the dense MLP on EP rank 0 */
                            assert_int_equal(cnt[Eloc], 0);
                            if (er == 0) local_rows += T;
                        } else if (fused && p->n_shared) { /* tokens t % ep == er */
                            assert_int_equal(cnt[Eloc], (T - er + ep - 1) / ep);
                            local_rows += cnt[Eloc];
                        }
                        for (int e = 0; e < Eloc; e++) local_rows += cnt[e];
                        tpm_cuda_moe_destroy(m);
                    }
                    assert_int_equal(local_rows, (int64_t)T * r.K); /* every pair ran exactly once */
                    for (size_t i = 0; i < (size_t)T * H; i++) r.y[i] = tpm_f32_to_bf16(acc[i]);
                    const double e = check_run(&w, x, &r, fused, 4, 1e-2);
                    printf("  %-17s ep=%d fused=%d T=%-5d rel err vs fp64 %.2e\n", p->name, ep, fused, T, e);
                    free_run(&r);
                    free(hist);
                    free(acc);
                    free(yr);
                    free(x);
                    cudaFree(dx);
                    cudaFree(dy);
                }
            }
        }
        free_weights(&w);
    }
}

static void bad_arguments(void **state) {
    (void)state;
    tpm_cuda_moe *m = NULL;
    assert_int_equal(tpm_cuda_moe_create(NULL, &m), TPM_ERR_INVALID_ARG);
    tpm_cuda_moe_desc d = {NULL, 0, 1, 0, 1, 8, NULL, 1, 0};
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.preset = tpm_preset_find("m3-mini");
    d.tp = 2; /* no communicator */
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.tp = 1;
    d.ep = 2; /* no communicator */
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.nccl_comm = &d;
    d.ep_rank = 2; /* outside 0..ep-1 */
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.ep = 3; /* does not divide the experts */
    d.ep_rank = 0;
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.ep = 0;
    d.nccl_comm = NULL;
    d.max_tokens = 0;
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_ERR_INVALID_ARG);
    d.max_tokens = 8;
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_OK);
    void *dx = NULL;
    assert_int_equal(cudaMalloc(&dx, (size_t)16 * 512 * 2), cudaSuccess);
    assert_int_equal(tpm_cuda_moe_forward(m, dx, 0, dx, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_forward(m, dx, 9, dx, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_forward(m, NULL, 1, dx, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_upload(m, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_get_expert(m, 33, NULL, NULL), TPM_ERR_INVALID_ARG);
    tpm_cuda_moe_tuning tu;
    assert_int_equal(tpm_cuda_moe_get_tuning(m, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_set_tuning(m, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cuda_moe_get_tuning(m, &tu), TPM_OK);
    /* gate/up row pairs by size (the default): 1 for small experts at 2-4 tokens, else 2 */
    assert_int_equal(tu.gate_up_pairs, 0);
    {
        const int small = tpm_cuda_moe_local_inter(m) <= 384;
        assert_int_equal(tpm_cuda_moe_gate_up_pairs_for(m, 1), 2);
        for (int t = 2; t <= 4; t++) assert_int_equal(tpm_cuda_moe_gate_up_pairs_for(m, t), small ? 1 : 2);
        assert_int_equal(tpm_cuda_moe_gate_up_pairs_for(m, 5), 2);
        tu.gate_up_pairs = 2; /* forced */
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
        assert_int_equal(tpm_cuda_moe_gate_up_pairs_for(m, 3), 2);
        tu.gate_up_pairs = 0;
        assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    }
    /* router experts per logits block by size (the default): 32 up to 2 tokens (16 on a TP >= 2 rank),
     * 8 at 3-8, 16 at 9-24 */
    assert_int_equal(tu.route_experts, 0);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 1), 32);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 2), 32);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 3), 8);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 4), 8);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 5), 8);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 8), 8);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 9), 16);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 24), 16);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 25), 32);
    assert_int_equal(tu.route_tc_min, 25); /* mode 1 up to 24 tokens (round 27) */
    for (int tp = 2; tp <= 8; tp *= 4) {
        /* a rank of TP 2 or 8 (rank 0 alone here; its communicator is never called) takes 16 up to
         * 2 tokens (rounds 46 and 47: r253's TP 2 and TP 8 shares), then the TP 1 rule */
        static int marker;
        tpm_cuda_moe *m2 = NULL;
        tpm_cuda_moe_desc d2 = {tpm_preset_find("m3-mini"), 0, tp, 0, 1, 8, (void *)&marker, 1, 0};
        assert_int_equal(tpm_cuda_moe_create(&d2, &m2), TPM_OK);
        assert_int_equal(tpm_cuda_moe_route_experts_for(m2, 1), 16);
        assert_int_equal(tpm_cuda_moe_route_experts_for(m2, 2), 16);
        assert_int_equal(tpm_cuda_moe_route_experts_for(m2, 3), 8);
        assert_int_equal(tpm_cuda_moe_route_experts_for(m2, 9), 16);
        assert_int_equal(tpm_cuda_moe_route_experts_for(m2, 25), 32);
        tpm_cuda_moe_destroy(m2);
    }
    tu.route_experts = 32; /* forced */
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    assert_int_equal(tpm_cuda_moe_route_experts_for(m, 3), 32);
    tu.route_experts = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    tu.decode_kernel = 3;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.decode_kernel = 2;
    tu.pdl = 2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.pdl = 1;
    tu.decode_kernel = 1;
    tu.decode_max_tokens = TPM_MOE_DECODE_MAX_NT + 1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.decode_max_tokens = 8;
    tu.route_gemm_min = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_gemm_min = 64;
    tu.shared_split_min = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.shared_split_min = 4;
    tu.prefill_gemm = 4;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_gemm = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_gemm = TPM_MOE_GEMM_LOOP;
    tu.decode_kernel = 2;
    tu.down_kernel = 1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    tu.down_kernel = 5;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.down_kernel = 0;
    tu.gate_up_pairs = 3;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.gate_up_pairs = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.gate_up_pairs = 1;
    tu.shared_overlap = 3;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.shared_overlap = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.shared_overlap = 2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    tu.shared_overlap = 1;
    tu.shared_mma = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.shared_mma = 5;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    tu.prefill_cluster = 4;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_cluster = -2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_cluster = 0;
    tu.prefill_band = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_band = 0;
    tu.prefill_split_min = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_split_min = 4096;
    tu.route_experts = 12;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_experts = 16;
    assert_int_equal(tu.route_wide, 11); /* mode 1's wide form at 9-11 tokens (round 29) */
    tu.route_wide = 8;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_wide = 17;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_wide = 0;
    assert_int_equal(tu.route_perm_min, 25); /* the permutation by every selecting block (round 49) */
    tu.route_perm_min = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_perm_min = 0;
    assert_int_equal(tu.route_poll, TPM_MOE_ROUTE_POLL); /* polled partials (round 50) */
    assert_int_equal(tu.route_cluster_meet, 32); /* mode 3's groups at a cluster barrier (round 52) */
    tu.route_cluster_meet = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_cluster_meet = 0;
    tu.route_poll = 64; /* bits 0-5 */
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_poll = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_poll = 1;
    assert_int_equal(tu.route_tc_loads, 3); /* mode 3's pipelined fp32 loads (round 51) */
    assert_int_equal(tu.route_tc_max, 256);
    tu.route_tc_loads = 4;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_tc_loads = 2;
    tu.route_tc_min = 0;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_tc_min = 9;
    tu.route_tc_max = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.route_tc_max = 0; /* mode 3 off */
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    tu.gate_up_pipe = 2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.gate_up_pipe = 0;
    tu.prefill_early = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_early = 0;
    tu.prefill_down_early = -1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.prefill_down_early = 0;
    tu.expert_wait = 2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.expert_wait = 1;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    assert_int_not_equal(tpm_cuda_moe_route_mode(m, 8), 3);
    assert_int_equal(tpm_cuda_moe_route_mode(NULL, 8), -1);
    assert_int_equal(tpm_cuda_moe_shared_plan(NULL, 1), TPM_MOE_SHARED_NONE);
    assert_int_equal(tpm_cuda_moe_check(NULL), TPM_ERR_INVALID_ARG);
    cudaFree(dx);
    tpm_cuda_moe_destroy(m);
}

/* The tuning of variant v of a stream test (tune_pdl_variant, tune_overlap_variant). */

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("gpu_moe: skipped (no GPU)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(presets_vs_reference),
        cmocka_unit_test(variants_vs_reference),
        cmocka_unit_test(m2_like_structure),
        cmocka_unit_test(route_poll_sequence),
        cmocka_unit_test(fused_equals_unfused),
        cmocka_unit_test(nan_logits_and_overfull),
        cmocka_unit_test(tp2_equals_tp1),
        cmocka_unit_test(ep_ranks_sum_to_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
