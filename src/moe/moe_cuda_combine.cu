/*
 * moe_cuda_combine.cu - the elementwise kernels around the expert GEMMs.
 *
 * k_combine: y[t][h] = sum over slots s in slot order of
 *   wts[t][s] * (row[inv[t][s]][h] + b2[sel[t][s]][h])   (+ unfused shared[t][h])
 * rounded once to bf16. One thread owns 4 (fp32 rows, k_combine_f32) or 8
 * (bf16 rows, k_combine_bf16) consecutive h of one token; the order of the
 * sum is fixed, so results are bit-reproducible (no atomics). The bf16 form
 * (the prefill) is bound by its row loads in flight, so it is capped at 32
 * registers for 64 warps per SM (round 24).
 * After decode kernel set 2 it is launched with programmatic dependent
 * launch and starts with griddepcontrol.wait (a no-op in a plain launch).
 * The down bias is added by TP rank 0 only (the all-reduce sums the ranks).
 * With EP, the pairs whose row is past the local row total offsets[E1] (other
 * ranks' experts) are skipped: this rank's y is its partial sum. A fused
 * layer's split plan (d.shared_dense) adds sh_out like the unfused layer,
 * after the routed slots (without EP its shared slot k is skipped: the
 * unfused layer's sum, bit for bit).
 * k_gather: xp[r] = x[perm_tok[r]] (rows grouped by expert for the GEMMs), by
 *    token: each 16-byte piece of x is read once and written to the K rows
 *    inv[t][0..K-1] below the row bound (round 14: by row, x was read K times,
 *    ~1 GB of HBM traffic instead of ~0.6 at 8192 tokens). In the early gate_up
 *    chain (moe_cuda_gemm_sm90a.cu) it is launched with programmatic dependent
 *    launch: it lets its dependent launch at once and waits for the routing.
 * k_act: act[r][i] = act(h[r][i] + b13, h[r][Il+i] + b13) in fp32 -> bf16.
 * Kernels over permuted rows stop at the device-side row total offsets[E1].
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"

namespace {

__device__ __forceinline__ float bf(uint16_t v) { return __uint_as_float((uint32_t)v << 16); }

/* V consecutive values of a row: fp32 4 (one 16-byte load), bf16 4 or 8 (one
 * 8- or 16-byte load). */
template <typename RowT, int V>
__device__ __forceinline__ void load_v(const RowT *p, float (&v)[V]);
template <>
__device__ __forceinline__ void load_v<float, 4>(const float *p, float (&v)[4]) {
    const float4 a = *reinterpret_cast<const float4 *>(p);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
}
template <>
__device__ __forceinline__ void load_v<uint16_t, 4>(const uint16_t *p, float (&v)[4]) {
    const uint2 a = *reinterpret_cast<const uint2 *>(p);
    v[0] = __uint_as_float(a.x << 16), v[1] = __uint_as_float(a.x & 0xffff0000u);
    v[2] = __uint_as_float(a.y << 16), v[3] = __uint_as_float(a.y & 0xffff0000u);
}
template <>
__device__ __forceinline__ void load_v<uint16_t, 8>(const uint16_t *p, float (&v)[8]) {
    const uint4 a = *reinterpret_cast<const uint4 *>(p);
    const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(u[i] << 16);
        v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
}

/* v += the down bias of expert `slot` at h .. h + V - 1. */
template <int V>
__device__ __forceinline__ void add_bias(const tpm_moe_dev &d, int slot, int h, float (&v)[V]) {
    const float4 *b = reinterpret_cast<const float4 *>(d.b2 + (size_t)slot * d.H + h);
#pragma unroll
    for (int i = 0; i < V / 4; i++) {
        const float4 bb = b[i];
        v[4 * i] += bb.x;
        v[4 * i + 1] += bb.y;
        v[4 * i + 2] += bb.z;
        v[4 * i + 3] += bb.w;
    }
}

/* One thread owns V consecutive h of one token (V = 8 for bf16 rows, the
 * prefill path: 16-byte loads, half the instructions of V = 4). Every value
 * is summed in the same order whatever V, so V changes no bit. */
template <typename RowT, int V>
__device__ __forceinline__ void combine_body(const tpm_moe_dev d, const RowT *__restrict__ rows,
                                             uint16_t *__restrict__ y, int T) {
    TPM_TRACE_MARK(d, 3, 0, (int)blockIdx.x);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched early (programmatic dependent launch after k_down2): wait for it; a no-op otherwise */
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    TPM_TRACE_MARK(d, 3, 1, (int)blockIdx.x);
    const int HV = d.H / V;
    const size_t gid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gid >= (size_t)T * HV) return;
    const int t = (int)(gid / HV), h = (int)(gid - (size_t)t * HV) * V;
    const bool bias = d.b2 && d.rank == 0;
    const int local = d.ep > 1 ? __ldg(d.offsets + d.E1) : 0; /* EP: rows from here are other ranks' */
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; i++) acc[i] = 0.0f;
    if constexpr (V == 8) { /* bf16 rows (prefill, bandwidth-bound): one slot at a time (all K row
                             * loads first: 72 registers, 20% slower from 1024 tokens, round 19) */
        for (int s = 0; s < d.K; s++) {
            const int p = t * d.K + s;
            const float w = d.wts[p];
            const int r = d.inv[p];
            if (d.ep > 1 && r >= local) continue;
            float v[V];
            load_v<RowT, V>(rows + (size_t)r * d.H + h, v);
            if (bias) add_bias<V>(d, d.ep > 1 ? d.perm_exp[r] : d.sel[p], h, v);
#pragma unroll
            for (int i = 0; i < V; i++) acc[i] += w * v[i];
        }
    } else {
        /* fp32 rows (the decode path: a few thousand threads, latency-bound): every load of a
         * chunk of C slots issued before the first sum, the sums in slot order. One slot at a
         * time made a token's K rows K round trips in a row (r88, r89: the combine 6.4-7.0 ->
         * 4.8-5.2 us at 1-8 tokens; the same chunks on the prefill's bf16 rows cost registers
         * and occupancy, 8192 tokens 200 -> 293 us, so that path keeps the loop above) */
        constexpr int C = 8;
        for (int s0 = 0; s0 < d.K; s0 += C) {
            int r[C];
            float w[C];
            bool ok[C];
#pragma unroll
            for (int j = 0; j < C; j++) {
                const int p = t * d.K + s0 + j;
                ok[j] = s0 + j < d.K && !(d.shared_dense && d.ep == 1 && s0 + j == d.k);
                r[j] = ok[j] ? d.inv[p] : 0;
                w[j] = ok[j] ? d.wts[p] : 0.0f;
                if (d.ep > 1 && r[j] >= local) ok[j] = false;
            }
            float v[C][V];
#pragma unroll
            for (int j = 0; j < C; j++) {
                if (!ok[j]) continue;
                load_v<RowT, V>(rows + (size_t)r[j] * d.H + h, v[j]);
                if (bias) add_bias<V>(d, d.ep > 1 ? d.perm_exp[r[j]] : d.sel[t * d.K + s0 + j], h, v[j]);
            }
#pragma unroll
            for (int j = 0; j < C; j++) {
                if (!ok[j]) continue;
#pragma unroll
                for (int i = 0; i < V; i++) acc[i] += w[j] * v[j][i];
            }
        }
    }
    if ((!d.fused || d.shared_dense) && d.sh_out) { /* the dense shared MLP (unfused, or the split plan) */
        float v[V];
        load_v<uint16_t, V>(d.sh_out + (size_t)t * d.H + h, v);
#pragma unroll
        for (int i = 0; i < V; i++) acc[i] += v[i];
    }
    uint32_t o[V / 2];
#pragma unroll
    for (int i = 0; i < V / 2; i++)
        o[i] = (uint32_t)tpm_f32_to_bf16(acc[2 * i]) | ((uint32_t)tpm_f32_to_bf16(acc[2 * i + 1]) << 16);
    if constexpr (V == 8)
        *reinterpret_cast<uint4 *>(y + (size_t)t * d.H + h) = make_uint4(o[0], o[1], o[2], o[3]);
    else
        *reinterpret_cast<uint2 *>(y + (size_t)t * d.H + h) = make_uint2(o[0], o[1]);
    TPM_TRACE_MARK(d, 3, 2, (int)blockIdx.x);
}

/* The decode path's fp32 rows: a few thousand threads, latency-bound. */
__global__ void k_combine_f32(tpm_moe_dev d, const float *__restrict__ rows, uint16_t *__restrict__ y, int T) {
    combine_body<float, 4>(d, rows, y, T);
}
/* The prefill's bf16 rows, bound by the row loads in flight: capped at 32 registers, so 8 blocks
 * of 256 fit an SM (64 warps; uncapped, 44 registers left 40). Round 24 (r158): 8192 tokens 199
 * -> 173 us, 4096 103 -> 91, 1024 27-28 -> 26-27 (a cap of 39 registers: 181, 93, 25-26). */
__global__ void __launch_bounds__(256, 8)
    k_combine_bf16(tpm_moe_dev d, const uint16_t *__restrict__ rows, uint16_t *__restrict__ y, int T) {
    combine_body<uint16_t, 8>(d, rows, y, T);
}

__global__ void k_gather(tpm_moe_dev d, const uint16_t *__restrict__ x, int T, int nrows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched with programmatic dependent launch (the early gate_up chain): let the next
     * grid launch, then wait for the routing (both no-ops in a plain launch) */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const int n8 = d.H / 8, K = d.K;
    const int total = __ldcg(d.offsets + d.E1), lim = nrows < total ? nrows : total;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)T * n8;
         i += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / n8), c = (int)(i - (size_t)t * n8);
        const uint4 v = reinterpret_cast<const uint4 *>(x + (size_t)t * d.H)[c];
        for (int sl = 0; sl < K; sl++) {
            const int r = __ldcg(d.inv + (size_t)t * K + sl);
            if (r < lim) reinterpret_cast<uint4 *>(d.xp)[(size_t)r * n8 + c] = v;
        }
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
    TPM_ASSERT(d.H % 8 == 0);
    const int V = rows_bf16 ? 8 : 4;
    const size_t n = (size_t)T * (d.H / V);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)((n + 255) / 256));
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    if (rows_bf16) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_combine_bf16, d, (const uint16_t *)d.rows_bf, y, T));
    else TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_combine_f32, d, (const float *)d.rows_f32, y, T));
    return TPM_OK;
}

tpm_status tpm_moe_launch_gather(const tpm_moe_dev &d, const uint16_t *x, int T, int nrows, int pdl, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)grid_for((size_t)T * (d.H / 8), 256, d.sm_count));
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_gather, d, x, T, nrows));
    return TPM_OK;
}

tpm_status tpm_moe_launch_act(const tpm_moe_dev &d, const uint16_t *h, uint16_t *act, int nrows,
                              int fixed_expert, cudaStream_t s) {
    k_act<<<grid_for((size_t)nrows * d.Il, 256, d.sm_count), 256, 0, s>>>(d, h, act, nrows, fixed_expert);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_combine, (k_gather))
