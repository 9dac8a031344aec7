/*
 * moe_cuda_gen.h - the deterministic synthetic weights of the CUDA MoE
 * benchmark, one function shared by the GPU generator kernel and the host.
 *
 * Full-size layers (m3: 128 experts x 113 MB bf16) are generated on the GPU,
 * never built on the host. Each value is a pure function of (seed, slot,
 * matrix, row, col) in the *logical* (unsharded, uninterleaved) layout, so a
 * TP shard generates exactly its part of the same layer and the host can
 * recompute any element bit for bit (integer hash + one exact scaling +
 * round-to-nearest-even to bf16). Valid C11 and CUDA C++.
 */
#ifndef TPM_MOE_CUDA_GEN_H
#define TPM_MOE_CUDA_GEN_H

#include "numeric.h"

#include <stdint.h>

/* Matrices of one expert slot (gate/up rows of gate_up, down). */
enum {
    TPM_GEN_GATE = 0,
    TPM_GEN_UP = 1,
    TPM_GEN_DOWN = 2,
    TPM_GEN_ROUTER = 3,      /* fp32, slot 0, idx e*H + h */
    TPM_GEN_ROUTER_BIAS = 4, /* fp32, slot 0, idx e */
    TPM_GEN_GATE_BIAS = 5,   /* fp32, idx = logical gate row */
    TPM_GEN_UP_BIAS = 6,
    TPM_GEN_DOWN_BIAS = 7,
    TPM_GEN_X = 8            /* benchmark inputs */
};
/* Scales of the fp32 vectors (powers of two). */
#define TPM_GEN_ROUTER_BIAS_SCALE 0.03125f
#define TPM_GEN_EXPERT_BIAS_SCALE 0.0625f

TPM_HD uint64_t tpm_gen_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 24 random bits (exact in fp32). */
TPM_HD float tpm_gen_uniform(uint64_t seed, uint32_t slot, uint32_t mat, uint64_t idx) {
    uint64_t h = tpm_gen_mix(seed ^ tpm_gen_mix(((uint64_t)slot << 8 | mat) + 0x9e3779b97f4a7c15ull));
    h = tpm_gen_mix(h + idx * 0x9e3779b97f4a7c15ull);
    int32_t v = (int32_t)(h >> 40) - (1 << 23);
    return (float)v * (1.0f / 8388608.0f);
}

/* bf16 bits of logical element (row, col) of matrix mat of expert slot
 * `slot` with ncols columns, scaled by `scale` (a power of two keeps the
 * scaling exact). */
TPM_HD uint16_t tpm_gen_bf16(uint64_t seed, uint32_t slot, uint32_t mat, uint64_t row, uint64_t col,
                             uint64_t ncols, float scale) {
    return tpm_f32_to_bf16(tpm_gen_uniform(seed, slot, mat, row * ncols + col) * scale);
}

/* Scale of a weight matrix with fan-in n: the power of two nearest
 * 1/sqrt(n) (so activations keep unit-ish size through the layer). */
TPM_HD float tpm_gen_scale(int fan_in) {
    float s = 1.0f;
    while (s * s * (float)fan_in > 2.0f) s *= 0.5f;
    return s;
}

#endif /* TPM_MOE_CUDA_GEN_H */
