/*
 * gpu_moe_paths.c - the CUDA MoE layer's execution plans against the reference and against
 * each other: the fused layer's shared plans (slot / split), the prefill GEMM forms (cuBLAS
 * ways, the own wgmma kernel and its cluster forms), and the stream variants (programmatic
 * dependent launch, the shared MLP beside the routing, the prefill's early shared items), eager
 * and replayed from CUDA graphs, bit for bit. Helpers in util/gpu_moe_util.c. Exits 77
 * (skipped) without CUDA or GPU.
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
    printf("gpu_moe_paths: skipped (this build has no CUDA)\n");
    return 77;
}
#else

#include "util/gpu_moe_util.h"

#include "moe/moe_math.h"
#include "numeric.h"

#include <cuda_runtime_api.h>
#include <math.h>

/* The split plan of a fused layer (shared slot as dense cuBLAS GEMMs, routed
 * experts in the GEMV launches) against the reference and against the slot
 * plan; the plan query says which one ran; kernel 1 never splits. */
static void shared_split_plan(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini"};
    for (size_t pi = 0; pi < 2; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        tpm_moe_weights w;
        make_weights(p, 700 + pi, &w);
        const int Ts[] = {1, 2, 5, 8, 13, 32};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, p->hidden, 900 + T);
            gpu_run a, b;
            tune_shared_split_min = 1 << 20;
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_DECODE, &a);
            assert_int_equal(last_plan, TPM_MOE_SHARED_SLOT);
            tune_shared_split_min = 1;
            tune_decode_kernel = 0;
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_DECODE, &b);
            assert_int_equal(last_plan, TPM_MOE_SHARED_SPLIT);
            const double e = check_run(&w, x, &b, 1, 4, 1e-2);
            const double dd = rel_diff(b.y, a.y, (size_t)T * p->hidden);
            printf("  %-17s T=%-3d split plan rel err %.2e, vs slot plan %.2e\n", p->name, T, e, dd);
            assert_true(dd < 1e-2);
            assert_memory_equal(a.sel, b.sel, sizeof(int32_t) * (size_t)T * a.K);
            free_run(&b);
            tune_decode_kernel = 1; /* the tensor-core kernel keeps the slot */
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_DECODE, &b);
            assert_int_equal(last_plan, TPM_MOE_SHARED_SLOT);
            free_run(&b);
            tune_decode_kernel = -1;
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_PREFILL, &b); /* prefill, default: split up to 16 tokens (9.0) */
            assert_int_equal(last_plan, sm90_device() && T <= 16 ? TPM_MOE_SHARED_SPLIT : TPM_MOE_SHARED_SLOT);
            free_run(&b);
            tune_prefill_split_max = 0; /* prefill: the slot below prefill_split_min */
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_PREFILL, &b);
            tune_prefill_split_max = -1;
            assert_int_equal(last_plan, TPM_MOE_SHARED_SLOT);
            free_run(&b);
            tune_prefill_split_min = 1; /* the wgmma prefill's split plan (a 9.0 device), else the slot */
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_PREFILL, &b);
            tune_prefill_split_min = -1;
            assert_int_equal(last_plan, sm90_device() ? TPM_MOE_SHARED_SPLIT : TPM_MOE_SHARED_SLOT);
            const double e2 = check_run(&w, x, &b, 1, 4, 1e-2);
            const double d2 = rel_diff(b.y, a.y, (size_t)T * p->hidden);
            printf("  %-17s T=%-3d prefill plan %d rel err %.2e, vs slot plan %.2e\n", p->name, T, last_plan, e2, d2);
            assert_true(d2 < 1e-2);
            free_run(&b);
            tune_shared_split_min = -1;
            free_run(&a);
            free(x);
        }
        free_weights(&w);
    }
}

/* The ways of issuing the prefill GEMMs (cuBLAS loop, grouped, streams;
 * tpmoe's own wgmma kernel, which a 9.0 device must offer for these shapes)
 * against the reference and against each other, including odd sizes,
 * a single token and experts left empty. */

static void prefill_gemm_modes(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "gpt-oss-mini", "m3-mini"};
    /* the third: m3-mini with hidden 768 and inter 384, so both GEMMs have an odd count of
     * weight blocks (3 of 128 gate rows, 3 of 256 down rows): the persistent clustered
     * kernel's last odd item has a CTA without a block */
    tpm_preset odd = *tpm_preset_find("m3-mini");
    odd.name = "m3-mini-odd";
    odd.hidden = 768;
    odd.inter = odd.shared_inter = 384;
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = pi == 2 ? &odd : tpm_preset_find(names[pi]);
        tpm_moe_weights w;
        make_weights(p, 800 + pi, &w);
        const int Ts[] = {1, 9, 33, 300, 2049, 5000};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, p->hidden, 1000 + T);
            /* 0-2: cuBLAS; 3: wgmma (the default); 4-7: wgmma with prefill_cluster 0-3 (one CTA
             * per tile, clusters, persistent clusters, persistent CTAs) and no bands; 8-10:
             * prefill_cluster 0, 2, 3 in bands of 2 / 2 / 3 row tiles (T = 5000: the shared slot's
             * 40 row tiles and the routed experts' ~5 in several bands, the last one partial) */
            gpu_run r[11];
            const int ng = sm90_device() ? 11 : 3;
            static const int bcl[3] = {0, 2, 3}, bband[3] = {2, 2, 3};
            for (int g = 0; g < ng; g++) {
                tune_prefill_gemm = g < 3 ? g : 3;
                tune_prefill_cluster = g < 4 ? -1 : g < 8 ? g - 4 : bcl[g - 8];
                tune_prefill_band = g < 4 ? -1 : g < 8 ? 0 : bband[g - 8];
                run_gpu(&w, x, T, 1, TPM_MOE_PATH_PREFILL, &r[g]);
                const double e = check_run(&w, x, &r[g], 1, 4, 1e-2);
                printf("  %-17s T=%-5d prefill gemm %d rel err %.2e\n", p->name, T, g, e);
            }
            tune_prefill_gemm = -1;
            tune_prefill_cluster = -1;
            tune_prefill_band = -1;
            /* the own kernel gives the same bits in every form and tile order */
            for (int g = 4; g < ng; g++) assert_memory_equal(r[g].y, r[3].y, (size_t)T * p->hidden * 2);
            for (int g = 1; g < ng; g++) assert_true(rel_diff(r[g].y, r[0].y, (size_t)T * p->hidden) < 1e-2);
            for (int g = 0; g < ng; g++) free_run(&r[g]);
            free(x);
        }
        free_weights(&w);
    }
}

typedef void (*tune_fn)(tpm_cuda_moe_tuning *tu, int v, int split);

/* One layer on a non-blocking stream with the tuning f(v, split): a forward eager, or captured
 * and replayed twice (the same bits asserted), the output poisoned before every run. Returns y
 * [T x H] (malloc'd); *ovl: whether the layer issued its shared MLP beside the routing. */
static uint16_t *run_stream(const tpm_moe_weights *w, const uint16_t *x, int T, int fused, tpm_moe_path path,
                            tune_fn f, int v, int split, int graph, int *ovl) {
    const int H = w->preset->hidden;
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(w, T, fused, path, &tu);
    f(&tu, v, split);
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    if (ovl) *ovl = tpm_cuda_moe_overlaps_shared(m, T);
    cudaStream_t s = NULL;
    void *dx = NULL, *dy = NULL;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaMalloc(&dx, (size_t)T * H * 2), cudaSuccess);
    assert_int_equal(cudaMalloc(&dy, (size_t)T * H * 2), cudaSuccess);
    assert_int_equal(cudaMemcpy(dx, x, (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
    /* the copy ran on the legacy stream, which s does not wait for */
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    uint16_t *out = malloc((size_t)T * H * 2);
    const int reps = graph ? 2 : 1;
    cudaGraphExec_t ge = NULL;
    if (graph) {
        cudaGraph_t g = NULL;
        assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        assert_int_equal(tpm_cuda_moe_forward(m, dx, T, dy, s), TPM_OK);
        assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
        assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
        cudaGraphDestroy(g);
    }
    for (int r = 0; r < reps; r++) {
        assert_int_equal(cudaMemsetAsync(dy, 0xff, (size_t)T * H * 2, s), cudaSuccess);
        if (ge) assert_int_equal(cudaGraphLaunch(ge, s), cudaSuccess);
        else assert_int_equal(tpm_cuda_moe_forward(m, dx, T, dy, s), TPM_OK);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        uint16_t *o = r == 0 ? out : malloc((size_t)T * H * 2);
        assert_int_equal(cudaMemcpy(o, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        if (r > 0) {
            assert_memory_equal(o, out, (size_t)T * H * 2);
            free(o);
        }
    }
    assert_int_equal(tpm_cuda_moe_check(m), TPM_OK); /* no bounded wait ran out */
    if (ge) cudaGraphExecDestroy(ge);
    cudaFree(dx);
    cudaFree(dy);
    cudaStreamDestroy(s);
    tpm_cuda_moe_destroy(m);
    return out;
}

/* pdl_equals_plain's variants: set 0, set 2 plain, set 2 pdl eager, set 2 pdl graph, then the
 * last two with the streaming down kernel (k_down4), then pdl eager and graph with k_down2's
 * other shapes (down_kernel 2, 3), then 2 gate/up row pairs per warp with down_kernel 4 (graph)
 * and 2 (eager), then down_kernel 2 with the per-expert wait: pdl eager, pdl graph (replayed:
 * the counters reset), plain, then the gate_up loads in two register stages (gate_up_pipe) with
 * 2 row pairs per warp (pdl graph) and 1 (pdl eager). */
enum { PDL_VARIANTS = 17 };
static int pdl_variant_graph(int v) { return v == 3 || v == 5 || v == 7 || v == 8 || v == 11 || v == 13 || v == 15; }
static void tune_pdl_variant(tpm_cuda_moe_tuning *tu, int v, int split) {
    tu->decode_kernel = v == 0 ? 0 : 2;
    tu->pdl = v >= 2;
    tu->down_kernel = v < 4 ? 0 : v < 6 ? 1 : v < 8 ? v - 4 : v == 8 ? 4 : 2;
    tu->gate_up_pairs = v >= 8 ? 2 : 1;
    tu->expert_wait = v >= 10 && v <= 12;
    tu->gate_up_pipe = v >= 13;
    if (v == 14) tu->gate_up_pairs = 1;
    if (v == 12) tu->pdl = 0;
    tu->shared_split_min = split ? 1 : 1 << 20;
    tu->shared_mma = 0; /* the scalar shared slot: set 0's bits (shared_mma_forms checks the other) */
    tu->shared_overlap = v > 0; /* the reference runs the shared MLP after the routing */
    if (v >= 15) { /* the shared MLP beside the routed decode kernels (round 35), graph / eager */
        tu->shared_overlap = 2;
        tu->expert_wait = 1;
    }
}

/* Decode kernel set 2 with programmatic dependent launch on a non-blocking
 * stream, eager and as a CUDA graph replayed twice (route -> gate_up ->
 * down -> combine, the shared slot's gate_up overlapping the routing): the
 * same bits as set 2 without it and as set 0, for the slot and split plans,
 * fused and unfused, with the output poisoned before every run. Set 0 runs
 * the split / unfused shared MLP after the routing, the others beside it on
 * a side stream (shared_overlap 1), captured into the graph too; variants 15
 * and 16 beside the routed decode kernels instead (shared_overlap 2). */
static void pdl_equals_plain(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "gpt-oss-mini"};
    for (size_t pi = 0; pi < 2; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        const int H = p->hidden;
        tpm_moe_weights w;
        make_weights(p, 1100 + pi, &w);
        const int Ts[] = {1, 2, 3, 5, 8, 13};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, H, 1200 + T);
            for (int fused = 0; fused <= (p->n_shared ? 1 : 0); fused++) {
                for (int split = 0; split <= 1; split++) {
                    if (split && !fused) continue;
                    uint16_t *out[PDL_VARIANTS];
                    for (int v = 0; v < PDL_VARIANTS; v++)
                        out[v] = run_stream(&w, x, T, fused, TPM_MOE_PATH_DECODE, tune_pdl_variant, v, split,
                                            pdl_variant_graph(v), NULL);
                    for (int v = 1; v < PDL_VARIANTS; v++) assert_memory_equal(out[v], out[0], (size_t)T * H * 2);
                    printf("  %-17s T=%-3d fused %d split %d: set 2 (plain, pdl, pdl graph; down kernels 0..4, "
                           "1 and 2 gate/up row pairs per warp, per-expert wait, gate_up in 2 stages, the shared "
                           "MLP beside the routing or the routed kernels) == set 0\n", p->name, T, fused,
                           split);
                    for (int v = 0; v < PDL_VARIANTS; v++) free(out[v]);
                }
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* shared_mma_forms' variants (set 2, the slot plan, the shared slot on tensor cores): plain,
 * pdl eager, pdl graph, down_kernel 2 (eager) and 3, 4 (graph), the per-expert wait (graph),
 * one gate/up row pair per warp (eager). */
enum { SMMA_VARIANTS = 8 };
static int smma_variant_graph(int v) { return v == 2 || v == 4 || v == 5 || v == 6; }
static void tune_smma_variant(tpm_cuda_moe_tuning *tu, int v, int on) {
    tu->decode_kernel = 2;
    tu->shared_split_min = 1 << 20;
    tu->shared_mma = on ? 3 : 0;
    tu->pdl = v >= 1;
    tu->down_kernel = v == 3 ? 2 : v == 4 ? 3 : v == 5 ? 4 : v == 6 ? 2 : 0;
    tu->expert_wait = v == 6;
    tu->gate_up_pairs = v == 7 ? 1 : 2;
}

/* The fused shared slot on tensor cores (tuning.shared_mma, decode kernel set 2): within 1e-2
 * of the fp64 reference and of the scalar shared slot, and the same bits in every launch form
 * (plain, pdl eager, pdl graph replayed twice, k_down2's shapes, the per-expert wait); 1-2 tokens
 * keep the scalar slot; 3-32 tokens (one or two m-tiles of 16 tokens). */
static void shared_mma_forms(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini"};
    for (size_t pi = 0; pi < 2; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        const int H = p->hidden;
        tpm_moe_weights w;
        make_weights(p, 1500 + pi, &w);
        const int Ts[] = {2, 3, 5, 8, 13, 17, 32};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, H, 1600 + T);
            /* the reference check and the plan: run_gpu with the same tuning */
            gpu_run r;
            tune_decode_kernel = 2;
            tune_shared_split_min = 1 << 20;
            tune_shared_mma = 3;
            run_gpu(&w, x, T, 1, TPM_MOE_PATH_DECODE, &r);
            tune_decode_kernel = tune_shared_split_min = tune_shared_mma = -1;
            assert_int_equal(last_plan, TPM_MOE_SHARED_SLOT);
            const double e = check_run(&w, x, &r, 1, 4, 1e-2);
            uint16_t *plain = run_stream(&w, x, T, 1, TPM_MOE_PATH_DECODE, tune_smma_variant, 0, 0, 0, NULL);
            uint16_t *out[SMMA_VARIANTS];
            for (int v = 0; v < SMMA_VARIANTS; v++)
                out[v] = run_stream(&w, x, T, 1, TPM_MOE_PATH_DECODE, tune_smma_variant, v, 1, smma_variant_graph(v),
                                    NULL);
            assert_memory_equal(out[0], r.y, (size_t)T * H * 2);
            for (int v = 1; v < SMMA_VARIANTS; v++) assert_memory_equal(out[v], out[0], (size_t)T * H * 2);
            const double dd = rel_diff(out[0], plain, (size_t)T * H);
            if (T < 3) assert_memory_equal(out[0], plain, (size_t)T * H * 2); /* below 3 tokens: scalar */
            else assert_true(dd < 1e-2 && dd > 0.0); /* another summation order: near, not equal */
            printf("  %-17s T=%-3d shared slot on tensor cores: rel err %.2e, vs the scalar slot %.2e; "
                   "%d launch forms bit-equal\n", p->name, T, e, dd, SMMA_VARIANTS);
            for (int v = 0; v < SMMA_VARIANTS; v++) free(out[v]);
            free(plain);
            free_run(&r);
            free(x);
        }
        free_weights(&w);
    }
}

/* prefill_overlap_equals_serial's variants: the shared MLP after the routing (0), beside it
 * eager (1) and in a graph (2); the split plan from 1 token when split is set; v 3, 4: the
 * cuBLAS streams prefill (not capturable) after / beside the routing. */
static void tune_overlap_variant(tpm_cuda_moe_tuning *tu, int v, int split) {
    tu->shared_overlap = v == 1 || v == 2 || v == 4;
    if (split) tu->prefill_split_min = 1;
    if (v >= 3) tu->prefill_gemm = TPM_MOE_GEMM_STREAMS;
}

/* The prefill's shared MLP (the fused split plan on the wgmma GEMM, or the unfused layer) issued
 * beside the routing on a side stream gives the bits of the MLP run after it, eager and in a
 * CUDA graph replayed twice. */
static void prefill_overlap_equals_serial(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini"};
    for (size_t pi = 0; pi < 2; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        const int H = p->hidden;
        tpm_moe_weights w;
        make_weights(p, 1300 + pi, &w);
        const int Ts[] = {20, 77, 300};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, H, 1400 + T);
            for (int fused = 0; fused <= 1; fused++) {
                /* fused: the split plan, on the wgmma GEMM only (a 9.0 device) */
                if (fused && !sm90_device()) continue;
                uint16_t *out[5];
                int ovl[5];
                const int nv = fused ? 3 : 5;
                for (int v = 0; v < nv; v++)
                    out[v] = run_stream(&w, x, T, fused, TPM_MOE_PATH_PREFILL, tune_overlap_variant, v, fused,
                                        v == 2, &ovl[v]);
                for (int v = 0; v < nv; v++) {
                    assert_int_equal(ovl[v], v == 1 || v == 2 || v == 4);
                    assert_memory_equal(out[v], out[v < 3 ? 0 : 3], (size_t)T * H * 2);
                }
                for (int v = 0; v < nv; v++) free(out[v]);
                printf("  %-17s T=%-3d %s: the shared MLP beside the routing (eager, graph) == after it\n",
                       p->name, T, fused ? "fused split" : "unfused (wgmma / cuBLAS prefill)");
            }
            free(x);
        }
        free_weights(&w);
    }
}

/* prefill_early_equals_plain's variants: the early shared gate_up items and the chained down
 * launch off (0); early items on, eager (1) and in a graph (2); both on, eager (3) and in a graph
 * (4); the chained down alone, eager (5); the slot plan at every size below prefill_split_min. */
static void tune_early_variant(tpm_cuda_moe_tuning *tu, int v, int split) {
    (void)split;
    tu->prefill_early = v > 0 && v < 5 ? 1 << 20 : 0;
    tu->prefill_down_early = v >= 3 ? 1 << 20 : 0;
    tu->prefill_split_max = 0;
}

/* The fused slot plan's prefill with the shared slot's gate_up items started before the
 * routing ends (the gather, the tile table and gate_up chained by programmatic dependent
 * launch, tuning.prefill_early), and with the down launch chained to gate_up (waiting per
 * expert, tuning.prefill_down_early), gives the bits of the plain chain, eager and in a CUDA
 * graph replayed twice (the launches reset their own counters between replays). Routing mode 3
 * (9, 100 tokens) and mode 2 with the separate row scatter (1500, 4100, 4500); the persistent
 * CTAs up to 1500 tokens, the persistent 2-CTA clusters from 4096 (the shared slot's 33 row
 * tiles at 4100: 16 pairs and an odd item, 36 at 4500: pairs only; bands of 8 pairs). */
static void prefill_early_equals_plain(void **state) {
    (void)state;
    if (!sm90_device()) {
        printf("  no 9.0 device: the own prefill GEMM does not run here\n");
        return;
    }
    const char *names[] = {"m3-mini", "deepseek-v3-mini"};
    for (size_t pi = 0; pi < 2; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        const int H = p->hidden;
        tpm_moe_weights w;
        make_weights(p, 1500 + pi, &w);
        const int Ts[] = {9, 100, 1500, 4100, 4500};
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            const int T = Ts[ti];
            uint16_t *x = make_x(T, H, 1600 + T);
            uint16_t *out[6];
            for (int v = 0; v < 6; v++)
                out[v] = run_stream(&w, x, T, 1, TPM_MOE_PATH_PREFILL, tune_early_variant, v, 0, v == 2 || v == 4,
                                    NULL);
            for (int v = 1; v < 6; v++) assert_memory_equal(out[v], out[0], (size_t)T * H * 2);
            for (int v = 0; v < 6; v++) free(out[v]);
            printf("  %-17s T=%-4d the early shared gate_up items, the chained down (eager, graph) == the "
                   "plain chain\n",
                   p->name, T);
            free(x);
        }
        free_weights(&w);
    }
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("gpu_moe_paths: skipped (no GPU)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_split_plan),
        cmocka_unit_test(prefill_gemm_modes),
        cmocka_unit_test(pdl_equals_plain),
        cmocka_unit_test(shared_mma_forms),
        cmocka_unit_test(prefill_overlap_equals_serial),
        cmocka_unit_test(prefill_early_equals_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
