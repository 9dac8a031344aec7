/*
 * moe_cuda_weights.cu - the synthetic layer generated on the GPU.
 *
 * k_gen_w13 / k_gen_w2 write this rank's shard of every expert slot straight
 * in the device layout (moe_cuda_kernels.h; with EP the local slots are the
 * logical experts e0 .. e0+Eloc-1 and the shared one E), one thread per 8 bf16 values
 * (one 16-byte store), each value tpm_gen_bf16() of its logical (slot,
 * matrix, row, col): a TP shard is exactly its part of the unsharded layer,
 * and the host recomputes any element bit for bit. Expert biases (presets
 * with expert_bias) are generated the same way in fp32. No synchronisation
 * beyond stream order.
 */
#include "core/cuda_preload.h"
#include "moe/moe_cuda_gen.h"
#include "moe_cuda_kernels.h"

namespace {

/* The logical (generator) slot of local slot e: routed e0 + e, or the shared
 * one E (+ i) after them (identity when ep = 1). */
__device__ __forceinline__ uint32_t gslot(int e, int e0, int Eloc, int E) {
    return (uint32_t)(e < Eloc ? e0 + e : E + (e - Eloc));
}

__global__ void k_gen_w13(uint16_t *w13, int E1, int Il, int H, int rank, uint64_t seed, float scale, int e0, int Eloc,
                          int E) {
    const size_t n8 = (size_t)E1 * 2 * Il * (H / 8);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (H / 8); /* e * 2Il + local row */
        const int c0 = (int)(i - row * (H / 8)) * 8;
        const int e = (int)(row / (2 * Il)), rl = (int)(row - (size_t)e * 2 * Il);
        const uint32_t mat = rl < Il ? TPM_GEN_GATE : TPM_GEN_UP, g = gslot(e, e0, Eloc, E);
        const uint64_t lrow = (uint64_t)rank * Il + (rl < Il ? rl : rl - Il);
        uint32_t v[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = tpm_gen_bf16(seed, g, mat, lrow, c0 + 2 * q, H, scale) |
                   ((uint32_t)tpm_gen_bf16(seed, g, mat, lrow, c0 + 2 * q + 1, H, scale) << 16);
        reinterpret_cast<uint4 *>(w13)[i] = make_uint4(v[0], v[1], v[2], v[3]);
    }
}

__global__ void k_gen_w2(uint16_t *w2, int E1, int Il, int I, int H, int rank, uint64_t seed, float scale, int e0,
                         int Eloc, int E) {
    const size_t n8 = (size_t)E1 * H * (Il / 8);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / (Il / 8); /* e * H + h */
        const int c0 = (int)(i - row * (Il / 8)) * 8 + rank * Il;
        const int e = (int)(row / H), h = (int)(row - (size_t)e * H);
        const uint32_t g = gslot(e, e0, Eloc, E);
        uint32_t v[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            v[q] = tpm_gen_bf16(seed, g, TPM_GEN_DOWN, h, c0 + 2 * q, I, scale) |
                   ((uint32_t)tpm_gen_bf16(seed, g, TPM_GEN_DOWN, h, c0 + 2 * q + 1, I, scale) << 16);
        reinterpret_cast<uint4 *>(w2)[i] = make_uint4(v[0], v[1], v[2], v[3]);
    }
}

__global__ void k_gen_bias(float *b13, float *b2, int E1, int Il, int H, int rank, uint64_t seed, int e0, int Eloc,
                           int E) {
    const size_t n13 = (size_t)E1 * 2 * Il, n2 = (size_t)E1 * H;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n13 + n2;
         i += (size_t)gridDim.x * blockDim.x) {
        if (i < n13) {
            const int e = (int)(i / (2 * Il)), rl = (int)(i - (size_t)e * 2 * Il);
            const uint32_t mat = rl < Il ? TPM_GEN_GATE_BIAS : TPM_GEN_UP_BIAS;
            const uint64_t lrow = (uint64_t)rank * Il + (rl < Il ? rl : rl - Il);
            b13[i] = tpm_gen_uniform(seed, gslot(e, e0, Eloc, E), mat, lrow) * TPM_GEN_EXPERT_BIAS_SCALE;
        } else {
            const size_t j = i - n13;
            const int e = (int)(j / H), h = (int)(j - (size_t)e * H);
            b2[j] = tpm_gen_uniform(seed, gslot(e, e0, Eloc, E), TPM_GEN_DOWN_BIAS, h) * TPM_GEN_EXPERT_BIAS_SCALE;
        }
    }
}

} // namespace

tpm_status tpm_moe_launch_generate(const tpm_moe_dev &d, const tpm_preset *p, uint64_t seed, cudaStream_t s) {
    const int grid = d.sm_count * 8;
    k_gen_w13<<<grid, 256, 0, s>>>(d.w13, d.E1, d.Il, d.H, d.rank, seed, tpm_gen_scale(d.H), d.e0, d.Eloc, d.E);
    TPM_CUDA_LAUNCHED();
    k_gen_w2<<<grid, 256, 0, s>>>(d.w2, d.E1, d.Il, p->inter, d.H, d.rank, seed, tpm_gen_scale(p->inter), d.e0, d.Eloc,
                                   d.E);
    TPM_CUDA_LAUNCHED();
    if (d.b13 && d.b2) {
        k_gen_bias<<<grid, 256, 0, s>>>(d.b13, d.b2, d.E1, d.Il, d.H, d.rank, seed, d.e0, d.Eloc, d.E);
        TPM_CUDA_LAUNCHED();
    }
    return TPM_OK;
}

void tpm_cuda_moe_gen_router(const tpm_preset *p, uint64_t seed, float *router, float *bias) {
    const float sc = tpm_gen_scale(p->hidden);
    for (size_t i = 0; i < (size_t)p->n_experts * p->hidden; i++)
        router[i] = tpm_gen_uniform(seed, 0, TPM_GEN_ROUTER, i) * sc;
    if (bias)
        for (int e = 0; e < p->n_experts; e++)
            bias[e] = tpm_gen_uniform(seed, 0, TPM_GEN_ROUTER_BIAS, e) * TPM_GEN_ROUTER_BIAS_SCALE;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_weights, (k_gen_w13))
