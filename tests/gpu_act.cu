/*
 * gpu_act.cu - the GPU's expert activation arithmetic against the CPU backend's (ctest label
 * gpu; exit 77, skipped, where the machine has no GPU; built only in CUDA builds).
 *
 * tpm_moe_act / tpm_moe_sigmoid (src/moe/moe_cuda_kernels.h) are what every GPU path applies
 * (decode kernel sets, the activation kernel, the wgmma gate_up epilogue); on the device the
 * sigmoid is ex2.approx + rcp.approx (round 41). The CPU backend (src/moe/activation.c) uses
 * expf and an IEEE divide. A kernel evaluates the device form on 2^20 (gate, up) pairs, the
 * output poisoned first (a finite pattern, so an unwritten value fails), for swiglu-oai (m3's
 * alpha 1.702, limit 7, beta 1) and SiLU-GLU:
 *   - fresh random pairs over gate in [-120, 30] (through the sigmoid's overflow and the
 *     flush-to-zero window below 2^-126) and up in [-1e4, 1e4], plus a grid of gate values:
 *     every output within the bound below of the CPU's;
 *   - special values: a NaN gate or up gives NaN on both (the clamps are comparisons), +-inf
 *     gates and ups give the CPU's class (NaN / +-inf / finite) and value.
 * The bound: 2^-17 relative (ex2.approx of z log2(e) rounded to fp32 is off by up to about
 * |z| 2^-24 ln 2 relative, 3.7e-6 at |z| = 87.3, below which the sigmoid is normal), plus
 * 2^-126 |gate x up factor| absolute (the device flushes a sigmoid below 2^-126 to zero; the
 * up factor is u for SiLU-GLU, the clamped up + beta for swiglu-oai).
 * The largest relative error seen is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
extern "C" {
#include <cmocka.h>
}

#include "moe/moe_cuda_kernels.h"
#include "moe/moe_math.h"
#include "util/splitmix.h"

namespace {

__global__ void k_eval_act(int kind, const float *g, const float *u, float *o, int n, float alpha, float limit,
                           float beta) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) o[i] = tpm_moe_act(kind, g[i], u[i], alpha, limit, beta);
}

uint64_t g_rng = 0x5eed0ac7ull;
float urand(float lo, float hi) { return (float)(lo + (hi - lo) * tu_sm_unif(&g_rng)); }

/* the device form on n pairs -> o (host) */
void run_device(int kind, const float *g, const float *u, float *o, int n, float alpha, float limit, float beta) {
    float *dg = nullptr, *du = nullptr, *dout = nullptr;
    assert_int_equal(cudaMalloc(&dg, sizeof(float) * n), cudaSuccess);
    assert_int_equal(cudaMalloc(&du, sizeof(float) * n), cudaSuccess);
    assert_int_equal(cudaMalloc(&dout, sizeof(float) * n), cudaSuccess);
    assert_int_equal(cudaMemcpy(dg, g, sizeof(float) * n, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemcpy(du, u, sizeof(float) * n, cudaMemcpyHostToDevice), cudaSuccess);
    assert_int_equal(cudaMemset(dout, 0x5a, sizeof(float) * n), cudaSuccess); /* poison: 1.5e16 */
    k_eval_act<<<(n + 255) / 256, 256>>>(kind, dg, du, dout, n, alpha, limit, beta);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaMemcpy(o, dout, sizeof(float) * n, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dg);
    cudaFree(du);
    cudaFree(dout);
}

float cpu_act(int kind, float g, float u, float alpha, float limit, float beta) {
    return kind == TPM_ACT_SILU_GLU ? tpm_act_silu_glu(g, u) : tpm_act_swiglu_oai(g, u, alpha, limit, beta);
}

/* |gpu - cpu| allowed for a finite CPU value (see the top comment) */
double act_bound(int kind, float g, float u, float limit, float beta, float ref) {
    double gate = g, up = u;
    if (kind != TPM_ACT_SILU_GLU) {
        gate = g > limit ? limit : g;
        up = (u > limit ? limit : (u < -limit ? -limit : u)) + (double)beta;
    }
    return ldexp(fabs((double)ref), -17) + ldexp(fabs(gate * up), -126);
}

struct act_case {
    const char *name;
    int kind;
    float alpha, limit, beta;
};
const act_case k_cases[] = {{"swiglu-oai", TPM_ACT_SWIGLU_OAI, 1.702f, 7.0f, 1.0f},
                            {"silu-glu", TPM_ACT_SILU_GLU, 1.0f, INFINITY, 0.0f}};

void sweep_within_tolerance(void **state) {
    (void)state;
    const int n = 1 << 20;
    float *g = (float *)malloc(sizeof(float) * n), *u = (float *)malloc(sizeof(float) * n);
    float *o = (float *)malloc(sizeof(float) * n);
    for (const act_case &c : k_cases) {
        for (int i = 0; i < n; i++) {
            /* the first quarter: a grid of gates over [-120, 30) with random ups; the rest random */
            g[i] = i < n / 4 ? -120.0f + 150.0f * (float)i / (float)(n / 4) : urand(-120.0f, 30.0f);
            u[i] = urand(-1e4f, 1e4f);
            if (i % 7 == 0) u[i] = urand(-8.0f, 8.0f); /* around the clamp */
        }
        run_device(c.kind, g, u, o, n, c.alpha, c.limit, c.beta);
        double worst = 0.0;
        int bad = 0;
        for (int i = 0; i < n; i++) {
            const float ref = cpu_act(c.kind, g[i], u[i], c.alpha, c.limit, c.beta);
            const double err = fabs((double)o[i] - (double)ref);
            if (!(err <= act_bound(c.kind, g[i], u[i], c.limit, c.beta, ref))) {
                if (bad++ < 5)
                    printf("  %s: g %.9g u %.9g: gpu %.9g cpu %.9g\n", c.name, g[i], u[i], o[i], ref);
            }
            if (fabs(ref) > 1e-30) worst = fmax(worst, err / fabs((double)ref));
        }
        printf("  %-10s %d pairs, worst relative error %.3g (2^%.1f), %d outside tolerance\n", c.name, n, worst,
               worst > 0 ? log2(worst) : -INFINITY, bad);
        assert_int_equal(bad, 0);
    }
    free(g);
    free(u);
    free(o);
}

int fp_class(float v) { return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : -1) : 2; }

void special_values(void **state) {
    (void)state;
    const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 7.0f, -7.0f, 1e-40f, -1e-40f, 3.0e38f, -3.0e38f,
                        -51.5f, -87.5f, -100.0f, 1.0f};
    const int m = (int)(sizeof sp / sizeof sp[0]), n = m * m;
    float g[n], u[n], o[n];
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++) g[i * m + j] = sp[i], u[i * m + j] = sp[j];
    for (const act_case &c : k_cases) {
        run_device(c.kind, g, u, o, n, c.alpha, c.limit, c.beta);
        int checked = 0;
        for (int i = 0; i < n; i++) {
            const float ref = cpu_act(c.kind, g[i], u[i], c.alpha, c.limit, c.beta);
            if (c.kind == TPM_ACT_SILU_GLU && !isnan(g[i]) && !isnan(u[i]) && isinf(u[i]) && g[i] < -87.0f &&
                g[i] > -89.0f)
                continue; /* an infinite up times a sigmoid the device flushes to zero: NaN against inf */
            if (isnan(g[i]) || isnan(u[i])) assert_true(isnan(o[i])); /* a NaN stays NaN */
            if (fp_class(o[i]) != fp_class(ref) ||
                (fp_class(ref) == 2 && !(fabs((double)o[i] - ref) <= act_bound(c.kind, g[i], u[i], c.limit, c.beta, ref)))) {
                printf("  %s: g %g u %g: gpu %.9g cpu %.9g\n", c.name, g[i], u[i], o[i], ref);
                fail();
            }
            checked++;
        }
        printf("  %-10s %d special pairs, the CPU's class and value\n", c.name, checked);
    }
}

} // namespace

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("gpu_act: skipped: no CUDA device\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sweep_within_tolerance),
        cmocka_unit_test(special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
