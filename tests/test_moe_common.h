/*
 * test_moe_common.h - helpers of the MoE tests (static, header only):
 * a seeded RNG, random layer weights built here (independent of the
 * generator in src/model, so the golden files only depend on this code),
 * and error metrics.
 */
#ifndef TEST_MOE_COMMON_H
#define TEST_MOE_COMMON_H

#include "model/moe_weights.h"
#include "numeric.h"
#include "tpmoe.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct trng {
    uint64_t s;
} trng;

static inline uint64_t trng_next(trng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double trng_uniform(trng *r) {
    return (double)(trng_next(r) >> 11) * 0x1.0p-53;
}

static inline double trng_normal(trng *r) {
    double u1 = trng_uniform(r), u2 = trng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* n values, mean 0 and standard deviation scale (uniform: cheap under ASan),
 * rounded to bf16 as in a bf16 checkpoint. */
static inline float *trand_bf16(trng *r, size_t n, double scale) {
    float *p = malloc(n * sizeof *p);
    const double a = 1.7320508075688772 * scale * 0x1.0p-31;
    for (size_t i = 0; i < n; i++) {
        uint64_t u = trng_next(r);
        p[i] = tpm_bf16_to_f32(tpm_f32_to_bf16((float)((double)(int32_t)(uint32_t)u * a)));
    }
    return p;
}

static inline void tfill_expert(trng *r, tpm_expert_weights *e, int H, int I, int bias) {
    e->gate_up = trand_bf16(r, 2 * (size_t)I * (size_t)H, 1.5 / sqrt((double)H));
    e->down = trand_bf16(r, (size_t)H * (size_t)I, 1.0 / sqrt((double)I));
    e->gate_up_bias = bias ? trand_bf16(r, 2 * (size_t)I, 0.5) : NULL;
    e->down_bias = bias ? trand_bf16(r, (size_t)H, 0.1) : NULL;
}

/* Random weights of one layer of preset p (fp32 values exact in bf16). */
static inline void tmake_weights(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w) {
    trng r = {seed * 0x9e3779b97f4a7c15ull + 12345};
    memset(w, 0, sizeof *w);
    w->preset = p;
    w->hidden = p->hidden;
    w->n_experts = p->n_experts;
    w->inter = p->inter;
    w->n_shared = p->n_shared;
    w->shared_inter = p->shared_inter;
    w->interleaved = p->act == TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    w->router =
        trand_bf16(&r, (size_t)p->n_experts * (size_t)p->hidden, 1.0 / sqrt((double)p->hidden));
    if (p->router != TPM_ROUTER_SOFTMAX_TOPK)
        w->router_bias = trand_bf16(&r, (size_t)p->n_experts, 0.05);
    w->experts = calloc((size_t)p->n_experts, sizeof *w->experts);
    for (int e = 0; e < p->n_experts; e++)
        tfill_expert(&r, &w->experts[e], p->hidden, p->inter, p->expert_bias);
    if (p->n_shared) {
        w->shared = calloc((size_t)p->n_shared, sizeof *w->shared);
        for (int s = 0; s < p->n_shared; s++)
            tfill_expert(&r, &w->shared[s], p->hidden, p->shared_inter, p->expert_bias);
    }
}

static inline void tfree_expert(tpm_expert_weights *e) {
    free(e->gate_up);
    free(e->down);
    free(e->gate_up_bias);
    free(e->down_bias);
}

static inline void tfree_weights(tpm_moe_weights *w) {
    for (int e = 0; e < w->n_experts; e++)
        tfree_expert(&w->experts[e]);
    for (int s = 0; s < w->n_shared && w->shared; s++)
        tfree_expert(&w->shared[s]);
    free(w->experts);
    free(w->shared);
    free(w->router);
    free(w->router_bias);
    memset(w, 0, sizeof *w);
}

/* x [n] ~ N(0,1) stored in dtype. */
static inline void *trand_input(uint64_t seed, size_t n, tpm_dtype dt) {
    trng r = {seed};
    void *x = malloc(n * tpm_dtype_size(dt));
    for (size_t i = 0; i < n; i++)
        tpm_store_f32(x, (int)dt, i, (float)trng_normal(&r));
    return x;
}

/* Relative RMS error of a (dtype) against ref (fp64 or another dtype array). */
static inline double trel_rms_vs_f64(const void *a, tpm_dtype dt, const double *ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)tpm_load_f32(a, (int)dt, i) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1.0));
}

static inline double trel_rms(const void *a, const void *b, tpm_dtype dt, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double x = tpm_load_f32(a, (int)dt, i), y = tpm_load_f32(b, (int)dt, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    return sqrt(num / (den > 0 ? den : 1.0));
}

static inline double tmax_abs(const void *a, const void *b, tpm_dtype dt, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)tpm_load_f32(a, (int)dt, i) - (double)tpm_load_f32(b, (int)dt, i));
        if (!(d <= m)) m = d; /* NaN wins */
    }
    return m;
}

#endif /* TEST_MOE_COMMON_H */
