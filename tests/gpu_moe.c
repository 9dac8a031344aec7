/*
 * gpu_moe.c - the CUDA MoE layer against an fp64 host reference (router,
 * top-k variants, swiglu-oai / SiLU-GLU, biases, fused shared expert) for
 * every structure preset (mini sizes), both paths (decode GEMV, prefill
 * cuBLAS), fused == unfused, TP 2 == TP 1 (two GPUs), EP ranks (simulated on one
 * GPU) summing to the reference, NaN logits, empty and
 * overfull experts, token counts 1..16384 (odd ones too), run-to-run bit
 * reproducibility and bad arguments. Exits 77 (skipped) without CUDA or GPU.
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

#include "model/moe_weights.h"
#include "model/presets.h"
#include "moe/moe_cuda.h"
#include "moe/moe_math.h"
#include "numeric.h"

#include <cuda_runtime_api.h>
#include <math.h>

/* MARK: host weights and reference */
static uint64_t rng_s;
static double urand(void) { /* [-1, 1) */
    rng_s += 0x9e3779b97f4a7c15ull;
    uint64_t z = rng_s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}
static float bfr(double v) { return tpm_bf16_to_f32(tpm_f32_to_bf16((float)v)); }

static float *fill(size_t n, double scale, int bf) {
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = bf ? bfr(urand() * scale) : (float)(urand() * scale);
    return a;
}

static void make_weights(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w) {
    rng_s = seed;
    memset(w, 0, sizeof *w);
    const int H = p->hidden, I = p->inter, E = p->n_experts;
    w->preset = p;
    w->hidden = H;
    w->n_experts = E;
    w->inter = I;
    w->n_shared = p->n_shared;
    w->shared_inter = p->shared_inter;
    w->interleaved = p->act == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    w->router = fill((size_t)E * H, 1.0 / sqrt(H), 0);
    w->router_bias = p->router == TPM_ROUTER_SOFTMAX_TOPK ? NULL : fill((size_t)E, 0.05, 0);
    w->experts = calloc((size_t)E, sizeof *w->experts);
    w->shared = p->n_shared ? calloc(1, sizeof *w->shared) : NULL;
    for (int e = 0; e < E + p->n_shared; e++) {
        tpm_expert_weights *x = e < E ? &w->experts[e] : &w->shared[0];
        x->gate_up = fill((size_t)2 * I * H, 2.0 / sqrt(H), 1);
        x->down = fill((size_t)H * I, 2.0 / sqrt(I), 1);
        if (p->expert_bias) {
            x->gate_up_bias = fill((size_t)2 * I, 0.1, 0);
            x->down_bias = fill((size_t)H, 0.1, 0);
        }
    }
}

static void free_weights(tpm_moe_weights *w) {
    for (int e = 0; e < w->n_experts + w->n_shared; e++) {
        tpm_expert_weights *x = e < w->n_experts ? &w->experts[e] : &w->shared[0];
        free(x->gate_up);
        free(x->down);
        free(x->gate_up_bias);
        free(x->down_bias);
    }
    free(w->experts);
    free(w->shared);
    free(w->router);
    free(w->router_bias);
    memset(w, 0, sizeof *w);
}



static void expert_ref(const tpm_moe_weights *w, const tpm_expert_weights *x, const uint16_t *in, double wt,
                       double *y) {
    const int H = w->hidden, I = w->inter;
    double *a = malloc(sizeof(double) * I);
    for (int i = 0; i < I; i++) {
        const int gi = w->interleaved ? 2 * i : i, ui = w->interleaved ? 2 * i + 1 : I + i;
        double g = x->gate_up_bias ? x->gate_up_bias[gi] : 0, u = x->gate_up_bias ? x->gate_up_bias[ui] : 0;
        for (int h = 0; h < H; h++) {
            g += (double)x->gate_up[(size_t)gi * H + h] * tpm_bf16_to_f32(in[h]);
            u += (double)x->gate_up[(size_t)ui * H + h] * tpm_bf16_to_f32(in[h]);
        }
        a[i] = tpm_act_f64_preset(w->preset, g, u);
    }
    for (int h = 0; h < H; h++) {
        double v = x->down_bias ? x->down_bias[h] : 0;
        for (int i = 0; i < I; i++) v += (double)x->down[(size_t)h * I + i] * a[i];
        y[h] += wt * v;
    }
    free(a);
}

/* MARK: GPU runner */
/* Tuning overrides of the next run_gpu calls (-1: the layer's default). */
static int tune_decode_kernel = -1, tune_route_gemm_min = -1, tune_route_legacy = -1;
static int tune_shared_split_min = -1, tune_prefill_gemm = -1, tune_pdl = -1, tune_prefill_cluster = -1;
static int tune_prefill_band = -1;
static int tune_prefill_split_min = -1, tune_prefill_split_max = -1, tune_route_experts = -1, tune_route_tc_min = -1, tune_route_tc_max = -1;
static int tune_route_tc_loads = -1;
static int last_plan = -1;       /* tpm_cuda_moe_shared_plan of the last run_gpu call */
static int last_route_mode = -1; /* tpm_cuda_moe_route_mode of the last run_gpu call */

typedef struct gpu_run {
    int T, K;
    uint16_t *y;  /* [T x H] */
    int32_t *sel; /* [T x K] */
    float *wts;
} gpu_run;

/* A fresh layer on GPU 0 with w uploaded, on the given path; *tu: its tuning, to change and set. */
static tpm_cuda_moe *new_layer(const tpm_moe_weights *w, int T, int fused, tpm_moe_path path,
                               tpm_cuda_moe_tuning *tu) {
    tpm_cuda_moe_desc d = {w->preset, 0, 1, 0, fused, T, NULL, 1, 0};
    tpm_cuda_moe *m = NULL;
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_OK);
    assert_int_equal(tpm_cuda_moe_upload(m, w), TPM_OK);
    assert_int_equal(tpm_cuda_moe_set_path(m, path), TPM_OK);
    assert_int_equal(tpm_cuda_moe_get_tuning(m, tu), TPM_OK);
    return m;
}

static void run_gpu(const tpm_moe_weights *w, const uint16_t *x, int T, int fused, tpm_moe_path path, gpu_run *r) {
    const tpm_preset *p = w->preset;
    const int H = p->hidden;
    tpm_cuda_moe_tuning tu;
    tpm_cuda_moe *m = new_layer(w, T, fused, path, &tu);
    if (tune_decode_kernel >= 0) tu.decode_kernel = tune_decode_kernel;
    if (tune_route_gemm_min >= 0) tu.route_gemm_min = tune_route_gemm_min;
    if (tune_route_legacy >= 0) tu.route_legacy = tune_route_legacy;
    if (tune_shared_split_min >= 0) tu.shared_split_min = tune_shared_split_min;
    if (tune_prefill_gemm >= 0) tu.prefill_gemm = tune_prefill_gemm;
    if (tune_pdl >= 0) tu.pdl = tune_pdl;
    if (tune_prefill_cluster >= 0) tu.prefill_cluster = tune_prefill_cluster;
    if (tune_prefill_band >= 0) tu.prefill_band = tune_prefill_band;
    if (tune_prefill_split_min >= 0) tu.prefill_split_min = tune_prefill_split_min;
    if (tune_prefill_split_max >= 0) tu.prefill_split_max = tune_prefill_split_max;
    if (tune_route_experts >= 0) tu.route_experts = tune_route_experts;
    if (tune_route_tc_min >= 0) tu.route_tc_min = tune_route_tc_min;
    if (tune_route_tc_max >= 0) tu.route_tc_max = tune_route_tc_max;
    if (tune_route_tc_loads >= 0) tu.route_tc_loads = tune_route_tc_loads;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    last_plan = tpm_cuda_moe_shared_plan(m, T);
    last_route_mode = tpm_cuda_moe_route_mode(m, T);
    void *dx = NULL, *dy = NULL;
    assert_int_equal(cudaMalloc(&dx, (size_t)T * H * 2), cudaSuccess);
    assert_int_equal(cudaMalloc(&dy, (size_t)T * H * 2), cudaSuccess);
    assert_int_equal(cudaMemcpy(dx, x, (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemset(dy, 0xff, (size_t)T * H * 2), cudaSuccess); /* poison (NaN) */
    assert_int_equal(tpm_cuda_moe_forward(m, dx, T, dy, NULL), TPM_OK);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(tpm_cuda_moe_check(m), TPM_OK); /* no bounded wait ran out */
    r->T = T;
    r->K = tpm_cuda_moe_slots(m);
    r->y = malloc((size_t)T * H * 2);
    r->sel = malloc(sizeof(int32_t) * (size_t)T * r->K);
    r->wts = malloc(sizeof(float) * (size_t)T * r->K);
    assert_int_equal(cudaMemcpy(r->y, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    {   /* the per-expert counts are the histogram of the selections */
        const int E1 = p->n_experts + p->n_shared; /* slot E stays 0 when not fused */
        int32_t *cnt = malloc(sizeof(int32_t) * (size_t)E1), *hist = calloc((size_t)E1, sizeof(int32_t));
        assert_int_equal(tpm_cuda_moe_get_routing(m, T, r->sel, r->wts, cnt), TPM_OK);
        for (size_t i = 0; i < (size_t)T * r->K; i++) {
            assert_true(r->sel[i] >= 0 && r->sel[i] < E1);
            hist[r->sel[i]]++;
        }
        assert_memory_equal(cnt, hist, sizeof(int32_t) * (size_t)E1);
        free(cnt);
        free(hist);
    }
    /* a second run gives the same bits (no order-dependent atomics) */
    uint16_t *y2 = malloc((size_t)T * H * 2);
    assert_int_equal(cudaMemset(dy, 0xff, (size_t)T * H * 2), cudaSuccess);
    assert_int_equal(tpm_cuda_moe_forward(m, dx, T, dy, NULL), TPM_OK);
    assert_int_equal(cudaMemcpy(y2, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_memory_equal(y2, r->y, (size_t)T * H * 2);
    free(y2);
    cudaFree(dx);
    cudaFree(dy);
    tpm_cuda_moe_destroy(m);
}

static void free_run(gpu_run *r) {
    free(r->y);
    free(r->sel);
    free(r->wts);
}

static uint16_t *make_x(int T, int H, uint64_t seed) {
    rng_s = seed;
    uint16_t *x = malloc((size_t)T * H * 2);
    for (size_t i = 0; i < (size_t)T * H; i++) x[i] = tpm_f32_to_bf16((float)(urand() * 1.7));
    return x;
}

/* Check the selections are valid (in range, distinct, shared slot last) and
 * agree with the fp64 reference except at near-ties; outputs of up to
 * `sample` tokens within tol. Returns the worst relative error. */
static double check_run(const tpm_moe_weights *w, const uint16_t *x, const gpu_run *r, int fused, int sample,
                        double tol) {
    const tpm_preset *p = w->preset;
    const int H = p->hidden, k = p->top_k, E = p->n_experts;
    for (int t = 0; t < r->T; t++) {
        for (int s = 0; s < k; s++) {
            const int e = r->sel[(size_t)t * r->K + s];
            assert_true(e >= 0 && e < E);
            for (int s2 = 0; s2 < s; s2++) assert_int_not_equal(e, r->sel[(size_t)t * r->K + s2]);
        }
        if (fused && p->n_shared) {
            assert_int_equal(r->sel[(size_t)t * r->K + k], E);
            assert_true(r->wts[(size_t)t * r->K + k] == 1.0f);
        }
        for (size_t h = 0; h < (size_t)H; h++) assert_false(isnan(tpm_bf16_to_f32(r->y[(size_t)t * H + h])));
    }
    double worst = 0;
    const int n = sample < r->T ? sample : r->T;
    double *y = malloc(sizeof(double) * H), c[256], wt[16];
    int sel[16];
    for (int i = 0; i < n; i++) {
        const int t = n == 1 ? 0 : (int)((int64_t)i * (r->T - 1) / (n - 1));
        const uint16_t *xt = x + (size_t)t * H;
        assert_int_equal(tpm_router_route_f64(w->preset, w->router, w->router_bias, xt, sel, wt, c),
                         TPM_OK);
        memset(y, 0, sizeof(double) * H);
        for (int s = 0; s < k; s++) {
            const int g = r->sel[(size_t)t * r->K + s];
            if (g != sel[s]) { /* only a near-tie may differ */
                assert_true(fabs(c[g] - c[sel[s]]) < 1e-5 * (1 + fabs(c[g])));
                wt[s] = r->wts[(size_t)t * r->K + s];
            }
            expert_ref(w, &w->experts[g], xt, wt[s], y);
        }
        if (p->n_shared) expert_ref(w, &w->shared[0], xt, 1.0, y);
        double num = 0, den = 0;
        for (int h = 0; h < H; h++) {
            const double g = tpm_bf16_to_f32(r->y[(size_t)t * H + h]);
            num += (g - y[h]) * (g - y[h]);
            den += y[h] * y[h];
        }
        const double rel = sqrt(num / (den > 0 ? den : 1));
        if (!(rel <= worst)) worst = rel;
    }
    free(y);
    if (!(worst <= tol)) fprintf(stderr, "  %s T=%d fused=%d: rel err %.3e > %.1e\n", p->name, r->T, fused, worst, tol);
    assert_true(worst <= tol);
    return worst;
}

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
 * straight into registers or through the shared-memory ring; a NaN router row is never
 * selected by any mode; 1500 tokens take k_select's separate row scatter (T*K > 4096). */
static void variants_vs_reference(void **state) {
    (void)state;
    const char *names[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(names[pi]);
        tpm_moe_weights w;
        make_weights(p, 300 + pi, &w);
        for (int h = 0; h < p->hidden; h++) w.router[(size_t)5 * p->hidden + h] = NAN;
        const int Ts[] = {1, 5, 8, 17, 32, 100, 300, 1500};
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
                gpu_run rm[5]; /* modes 0 .. 3, then mode 3 with the ring loads */
                const int nrun = re != 8 ? 2 : T > 256 ? 3 : 5;
                for (int run = 0; run < nrun; run++) {
                    const int mode = run < 4 ? run : 3;
                    tune_route_legacy = mode == 0;
                    tune_route_gemm_min = mode == 2 ? 1 : 1 << 20;
                    tune_route_experts = re;
                    tune_route_tc_min = 1;
                    tune_route_tc_max = mode == 3 ? 256 : 0;
                    tune_route_tc_loads = run == 4 ? 0 : 1;
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
                           run == 4 ? " (ring)" : "", re, e);
                }
                const size_t nk = (size_t)T * rm[0].K;
                assert_memory_equal(rm[0].sel, rm[1].sel, nk * sizeof(int32_t));
                assert_memory_equal(rm[0].wts, rm[1].wts, nk * sizeof(float));
                if (nrun == 5) { /* mode 3: direct loads and the ring, the same bits */
                    assert_memory_equal(rm[3].sel, rm[4].sel, nk * sizeof(int32_t));
                    assert_memory_equal(rm[3].wts, rm[4].wts, nk * sizeof(float));
                    assert_memory_equal(rm[3].y, rm[4].y, (size_t)T * p->hidden * 2);
                }
                for (int run = 0; run < nrun; run++) free_run(&rm[run]);
            }
            free(x);
        }
        free_weights(&w);
    }
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
}

static double rel_diff(const uint16_t *a, const uint16_t *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = tpm_bf16_to_f32(a[i]), y = tpm_bf16_to_f32(b[i]);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return sqrt(num / (den > 0 ? den : 1));
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

/* The split plan of a fused layer (shared slot as dense cuBLAS GEMMs, routed
 * experts in the GEMV launches) against the reference and against the slot
 * plan; the plan query says which one ran; kernel 1 never splits. */
/* The own wgmma prefill GEMM (and its split plan) exists on a 9.0 device. */
static int sm90_device(void) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major == 9 && minor == 0;
}

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
    tu.shared_overlap = 2;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_ERR_INVALID_ARG);
    tu.shared_overlap = 1;
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
enum { PDL_VARIANTS = 15 };
static int pdl_variant_graph(int v) { return v == 3 || v == 5 || v == 7 || v == 8 || v == 11 || v == 13; }
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
    tu->shared_overlap = v > 0; /* the reference runs the shared MLP after the routing */
}

/* Decode kernel set 2 with programmatic dependent launch on a non-blocking
 * stream, eager and as a CUDA graph replayed twice (route -> gate_up ->
 * down -> combine, the shared slot's gate_up overlapping the routing): the
 * same bits as set 2 without it and as set 0, for the slot and split plans,
 * fused and unfused, with the output poisoned before every run. Set 0 runs
 * the split / unfused shared MLP after the routing, the others beside it on
 * a side stream (shared_overlap), captured into the graph too. */
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
                           "1 and 2 gate/up row pairs per warp, per-expert wait, gate_up in 2 stages) == set 0\n", p->name, T, fused,
                           split);
                    for (int v = 0; v < PDL_VARIANTS; v++) free(out[v]);
                }
            }
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

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        printf("gpu_moe: skipped (no GPU)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),        cmocka_unit_test(presets_vs_reference),
        cmocka_unit_test(variants_vs_reference), cmocka_unit_test(m2_like_structure),
        cmocka_unit_test(fused_equals_unfused),
        cmocka_unit_test(nan_logits_and_overfull), cmocka_unit_test(tp2_equals_tp1),
        cmocka_unit_test(shared_split_plan),    cmocka_unit_test(prefill_gemm_modes),
        cmocka_unit_test(pdl_equals_plain),     cmocka_unit_test(prefill_overlap_equals_serial),
        cmocka_unit_test(ep_ranks_sum_to_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
