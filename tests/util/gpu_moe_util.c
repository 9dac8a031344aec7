/*
 * gpu_moe_util.c - the CUDA MoE layer tests' shared part (util/gpu_moe_util.h): random host
 * weights of a preset, the fp64 reference of the layer's outputs, and the runner that builds a
 * layer on GPU 0 with the tuning overrides and returns its outputs. Linked into every test
 * program (tests/CMakeLists.txt); compiled to nothing without CUDA.
 */
#ifdef TPMOE_HAVE_CUDA
#include "util/gpu_moe_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

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

void make_weights(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w) {
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

void free_weights(tpm_moe_weights *w) {
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
int tune_decode_kernel = -1, tune_route_gemm_min = -1, tune_route_legacy = -1;
int tune_shared_split_min = -1, tune_prefill_gemm = -1, tune_pdl = -1, tune_prefill_cluster = -1;
int tune_prefill_band = -1;
int tune_prefill_split_min = -1, tune_prefill_split_max = -1, tune_route_experts = -1, tune_route_tc_min = -1, tune_route_tc_max = -1;
int tune_route_tc_loads = -1, tune_route_wide = -1, tune_shared_mma = -1, tune_route_perm_min = -1;
int tune_route_poll = -1;
int tune_route_cl_min = -1, tune_route_cl_max = -1, tune_route_cl_size = -1, tune_route_cluster_meet = -1;
int tune_route_tc_wide = -1, tune_route_tc_clusters = -1, tune_route_tc_fit = -1, tune_route_tc_split = -1;
int last_plan = -1;       /* tpm_cuda_moe_shared_plan of the last run_gpu call */
int last_route_mode = -1; /* tpm_cuda_moe_route_mode of the last run_gpu call */
int last_route_tc_shape[4];

/* A fresh layer on GPU 0 with w uploaded, on the given path; *tu: its tuning, to change and set. */
tpm_cuda_moe *new_layer(const tpm_moe_weights *w, int T, int fused, tpm_moe_path path,
                        tpm_cuda_moe_tuning *tu) {
    tpm_cuda_moe_desc d = {w->preset, 0, 1, 0, fused, T, NULL, 1, 0};
    tpm_cuda_moe *m = NULL;
    assert_int_equal(tpm_cuda_moe_create(&d, &m), TPM_OK);
    assert_int_equal(tpm_cuda_moe_upload(m, w), TPM_OK);
    assert_int_equal(tpm_cuda_moe_set_path(m, path), TPM_OK);
    assert_int_equal(tpm_cuda_moe_get_tuning(m, tu), TPM_OK);
    return m;
}

void run_gpu(const tpm_moe_weights *w, const uint16_t *x, int T, int fused, tpm_moe_path path, gpu_run *r) {
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
    if (tune_route_wide >= 0) tu.route_wide = tune_route_wide;
    if (tune_shared_mma >= 0) tu.shared_mma = tune_shared_mma;
    if (tune_route_perm_min >= 0) tu.route_perm_min = tune_route_perm_min;
    if (tune_route_poll >= 0) tu.route_poll = tune_route_poll;
    /* a test that picks a routing mode with the knobs of modes 0-3 gets it: mode 4 (which comes
     * before them) off unless the test sets its own range */
    if (tune_route_cl_max < 0 && (tune_route_tc_min >= 0 || tune_route_tc_max >= 0 || tune_route_gemm_min >= 0 ||
                                  tune_route_legacy >= 0))
        tu.route_cl_max = 0;
    if (tune_route_cl_min >= 0) tu.route_cl_min = tune_route_cl_min;
    if (tune_route_cl_max >= 0) tu.route_cl_max = tune_route_cl_max;
    if (tune_route_cl_size >= 0) tu.route_cl_size = tune_route_cl_size;
    if (tune_route_cluster_meet >= 0) tu.route_cluster_meet = tune_route_cluster_meet;
    if (tune_route_tc_wide >= 0) tu.route_tc_wide = tune_route_tc_wide;
    if (tune_route_tc_clusters >= 0) tu.route_tc_clusters = tune_route_tc_clusters;
    if (tune_route_tc_fit >= 0) tu.route_tc_fit = tune_route_tc_fit;
    if (tune_route_tc_split >= 0) tu.route_tc_split = tune_route_tc_split;
    assert_int_equal(tpm_cuda_moe_set_tuning(m, &tu), TPM_OK);
    last_plan = tpm_cuda_moe_shared_plan(m, T);
    last_route_mode = tpm_cuda_moe_route_mode(m, T);
    if (!tpm_cuda_moe_route_tc_shape(m, T, last_route_tc_shape)) memset(last_route_tc_shape, 0, sizeof last_route_tc_shape);
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

void free_run(gpu_run *r) {
    free(r->y);
    free(r->sel);
    free(r->wts);
}

uint16_t *make_x(int T, int H, uint64_t seed) {
    rng_s = seed;
    uint16_t *x = malloc((size_t)T * H * 2);
    for (size_t i = 0; i < (size_t)T * H; i++) x[i] = tpm_f32_to_bf16((float)(urand() * 1.7));
    return x;
}

/* Check the selections are valid (in range, distinct, shared slot last) and
 * agree with the fp64 reference except at near-ties; outputs of up to
 * `sample` tokens within tol. Returns the worst relative error. */
double check_run(const tpm_moe_weights *w, const uint16_t *x, const gpu_run *r, int fused, int sample,
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

double rel_diff(const uint16_t *a, const uint16_t *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = tpm_bf16_to_f32(a[i]), y = tpm_bf16_to_f32(b[i]);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return sqrt(num / (den > 0 ? den : 1));
}

void forward_host(tpm_cuda_moe *m, void *dx, void *dy, int H, const uint16_t *x, int T, uint16_t *y) {
    assert_int_equal(cudaMemcpy(dx, x, (size_t)T * H * 2, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemset(dy, 0xff, (size_t)T * H * 2), cudaSuccess); /* poison (NaN) */
    assert_int_equal(tpm_cuda_moe_forward(m, dx, T, dy, NULL), TPM_OK);
    assert_int_equal(cudaMemcpy(y, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost), cudaSuccess);
}

/* The own wgmma prefill GEMM (and its split plan) exists on a 9.0 device. */
int sm90_device(void) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
    return major == 9 && minor == 0;
}


void replay_two_call_graph(tpm_cuda_moe *m, int H, const uint16_t *xa, int Ta, const uint16_t *ya,
                           const uint16_t *xb, int Tb, const uint16_t *yb, int reps) {
    void *dxa = NULL, *dya = NULL, *dxb = NULL, *dyb = NULL;
    const size_t na = (size_t)Ta * H * 2, nb = (size_t)Tb * H * 2;
    uint16_t *y = malloc(na > nb ? na : nb);
    assert_non_null(y);
    assert_int_equal(cudaMalloc(&dxa, na), cudaSuccess);
    assert_int_equal(cudaMalloc(&dya, na), cudaSuccess);
    assert_int_equal(cudaMalloc(&dxb, nb), cudaSuccess);
    assert_int_equal(cudaMalloc(&dyb, nb), cudaSuccess);
    assert_int_equal(cudaMemcpy(dxa, xa, na, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(dxb, xb, nb, cudaMemcpyHostToDevice), cudaSuccess);
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    assert_int_equal(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    assert_int_equal(tpm_cuda_moe_forward(m, dxa, Ta, dya, s), TPM_OK);
    assert_int_equal(tpm_cuda_moe_forward(m, dxb, Tb, dyb, s), TPM_OK);
    assert_int_equal(cudaStreamEndCapture(s, &g), cudaSuccess);
    assert_int_equal(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    for (int rep = 0; rep < reps; rep++) {
        assert_int_equal(cudaMemset(dya, 0xff, na), cudaSuccess); /* poison (NaN) */
        assert_int_equal(cudaMemset(dyb, 0xff, nb), cudaSuccess);
        assert_int_equal(cudaGraphLaunch(ge, s), cudaSuccess);
        assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
        assert_int_equal(cudaMemcpy(y, dya, na, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_memory_equal(y, ya, na);
        assert_int_equal(cudaMemcpy(y, dyb, nb, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_memory_equal(y, yb, nb);
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    cudaFree(dxa);
    cudaFree(dya);
    cudaFree(dxb);
    cudaFree(dyb);
    free(y);
}

#endif
