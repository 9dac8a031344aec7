/*
 * moe_cuda_combine.cu - the elementwise kernels around the expert GEMMs.
 *
 * k_combine: y[t][h] = sum over slots s in slot order of
 *   wts[t][s] * (row[inv[t][s]][h] + b2[sel[t][s]][h])   (+ unfused shared[t][h])
 * rounded once to bf16. One thread owns 4 consecutive h of one token; the
 * order of the sum is fixed, so results are bit-reproducible (no atomics).
 * After decode kernel set 2 it is launched with programmatic dependent
 * launch and starts with griddepcontrol.wait (a no-op in a plain launch).
 * The down bias is added by TP rank 0 only (the all-reduce sums the ranks).
 * With EP, the pairs whose row is past the local row total offsets[E1] (other
 * ranks' experts) are skipped: this rank's y is its partial sum.
 * k_gather: xp[r] = x[perm_tok[r]] (rows grouped by expert for the GEMMs).
 * k_act: act[r][i] = act(h[r][i] + b13, h[r][Il+i] + b13) in fp32 -> bf16.
 * Kernels over permuted rows stop at the device-side row total offsets[E1].
 */
#include "moe_cuda_kernels.h"

namespace {

__device__ __forceinline__ float bf(uint16_t v) { return __uint_as_float((uint32_t)v << 16); }

template <typename RowT>
__device__ __forceinline__ float4 load4(const RowT *p);
template <>
__device__ __forceinline__ float4 load4<float>(const float *p) {
    return *reinterpret_cast<const float4 *>(p);
}
template <>
__device__ __forceinline__ float4 load4<uint16_t>(const uint16_t *p) {
    const uint2 v = *reinterpret_cast<const uint2 *>(p);
    return make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u),
                       __uint_as_float(v.y << 16), __uint_as_float(v.y & 0xffff0000u));
}

template <typename RowT>
__global__ void k_combine(tpm_moe_dev d, const RowT *__restrict__ rows, uint16_t *__restrict__ y, int T) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched early (programmatic dependent launch after k_down2): wait for it; a no-op otherwise */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const int H4 = d.H / 4;
    const size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid >= (size_t)T * H4) return;
    const int t = (int)(gid / H4), h = (int)(gid - (size_t)t * H4) * 4;
    const bool bias = d.b2 && d.rank == 0;
    const int local = d.ep > 1 ? __ldg(d.offsets + d.E1) : 0; /* EP: rows from here are other ranks' */
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < d.K; s++) {
        const int p = t * d.K + s;
        const float w = d.wts[p];
        const int r = d.inv[p];
        if (d.ep > 1 && r >= local) continue;
        float4 v = load4<RowT>(rows + (size_t)r * d.H + h);
        if (bias) {
            const int slot = d.ep > 1 ? d.perm_exp[r] : d.sel[p];
            const float4 b = *reinterpret_cast<const float4 *>(d.b2 + (size_t)slot * d.H + h);
            v.x += b.x;
            v.y += b.y;
            v.z += b.z;
            v.w += b.w;
        }
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
    }
    if (!d.fused && d.sh_out) {
        const float4 v = load4<uint16_t>(d.sh_out + (size_t)t * d.H + h);
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
    }
    uint2 o;
    o.x = (uint32_t)tpm_f32_to_bf16(acc.x) | ((uint32_t)tpm_f32_to_bf16(acc.y) << 16);
    o.y = (uint32_t)tpm_f32_to_bf16(acc.z) | ((uint32_t)tpm_f32_to_bf16(acc.w) << 16);
    *reinterpret_cast<uint2 *>(y + (size_t)t * d.H + h) = o;
}

__global__ void k_gather(tpm_moe_dev d, const uint16_t *__restrict__ x, int nrows) {
    const int n8 = d.H / 8;
    const int total = __ldg(d.offsets + d.E1);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)nrows * n8;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / n8), c = (int)(i - (size_t)r * n8);
        if (r >= total) return;
        reinterpret_cast<uint4 *>(d.xp)[i] =
            reinterpret_cast<const uint4 *>(x + (size_t)d.perm_tok[r] * d.H)[c];
    }
}

__global__ void k_act(tpm_moe_dev d, const uint16_t *__restrict__ h, uint16_t *__restrict__ act, int nrows,
                      int fixed_expert) {
    const int Il = d.Il;
    const int total = fixed_expert >= 0 ? nrows : __ldg(d.offsets + d.E1);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)nrows * Il;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / Il), c = (int)(i - (size_t)r * Il);
        if (r >= total) return;
        const int e = fixed_expert >= 0 ? fixed_expert : d.perm_exp[r];
        float g = bf(h[(size_t)r * 2 * Il + c]), u = bf(h[(size_t)r * 2 * Il + Il + c]);
        if (d.b13) {
            g += d.b13[(size_t)e * 2 * Il + c];
            u += d.b13[(size_t)e * 2 * Il + Il + c];
        }
        act[i] = tpm_f32_to_bf16(tpm_moe_act(d.act, g, u, d.alpha, d.limit, d.beta));
    }
}

int grid_for(size_t n, int per_block, int sm_count) {
    size_t g = (n + per_block - 1) / per_block;
    const size_t cap = (size_t)sm_count * 16;
    return (int)(g < 1 ? 1 : (g > cap ? cap : g));
}

} // namespace

tpm_status tpm_moe_launch_combine(const tpm_moe_dev &d, int T, int rows_bf16, int pdl, uint16_t *y,
                                  cudaStream_t s) {
    TPM_ASSERT(d.H % 4 == 0);
    const size_t n = (size_t)T * (d.H / 4);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)((n + 255) / 256));
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    if (rows_bf16)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_combine<uint16_t>, d, (const uint16_t *)d.rows_bf, y, T));
    else
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_combine<float>, d, (const float *)d.rows_f32, y, T));
    return TPM_OK;
}

tpm_status tpm_moe_launch_gather(const tpm_moe_dev &d, const uint16_t *x, int nrows, cudaStream_t s) {
    k_gather<<<grid_for((size_t)nrows * (d.H / 8), 256, d.sm_count), 256, 0, s>>>(d, x, nrows);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

tpm_status tpm_moe_launch_act(const tpm_moe_dev &d, const uint16_t *h, uint16_t *act, int nrows,
                              int fixed_expert, cudaStream_t s) {
    k_act<<<grid_for((size_t)nrows * d.Il, 256, d.sm_count), 256, 0, s>>>(d, h, act, nrows, fixed_expert);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}
