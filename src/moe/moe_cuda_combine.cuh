/*
 * moe_cuda_combine.cuh - the combine's per-value arithmetic, shared by the
 * combine kernel (moe_cuda_combine.cu) and the decode path's down kernel,
 * which runs it itself for each finished tile of output rows
 * (moe_cuda_decode.cu, tuning combine_fused). One function, so both give
 * the same bits:
 *   y[t][h..h+V) = bf16( sum over slots s in slot order of
 *                  wts[t][s] * (row[inv[t][s]][h] + b2[slot][h])  (+ shared[t][h]) )
 * The down bias is added by TP rank 0 only; with EP, pairs whose row is past
 * the local row total offsets[E1] belong to other ranks and are skipped.
 * CG: read the rows and the routing through L2 (ld.global.cg), for rows
 * written by other blocks of the same kernel.
 */
#ifndef TPM_MOE_CUDA_COMBINE_CUH
#define TPM_MOE_CUDA_COMBINE_CUH

#include "moe_cuda_kernels.h"

namespace tpm_moe_comb {

template <bool CG, typename T> __device__ __forceinline__ T ld(const T *p) {
    if constexpr (CG) return __ldcg(p);
    else return *p;
}

/* V consecutive values of a row: fp32 4 (one 16-byte load), bf16 4 or 8 (one
 * 8- or 16-byte load). */
template <typename RowT, int V, bool CG> struct LoadV;
template <bool CG> struct LoadV<float, 4, CG> {
    static __device__ __forceinline__ void run(const float *p, float (&v)[4]) {
        const float4 a = ld<CG>(reinterpret_cast<const float4 *>(p));
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    }
};
template <bool CG> struct LoadV<uint16_t, 4, CG> {
    static __device__ __forceinline__ void run(const uint16_t *p, float (&v)[4]) {
        const uint2 a = ld<CG>(reinterpret_cast<const uint2 *>(p));
        v[0] = __uint_as_float(a.x << 16), v[1] = __uint_as_float(a.x & 0xffff0000u);
        v[2] = __uint_as_float(a.y << 16), v[3] = __uint_as_float(a.y & 0xffff0000u);
    }
};
template <bool CG> struct LoadV<uint16_t, 8, CG> {
    static __device__ __forceinline__ void run(const uint16_t *p, float (&v)[8]) {
        const uint4 a = ld<CG>(reinterpret_cast<const uint4 *>(p));
        const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __uint_as_float(u[i] << 16);
            v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        }
    }
};

/* y[t][h .. h+V) from the K rows of token t (h % V == 0, h + V <= H). */
template <typename RowT, int V, bool CG>
__device__ __forceinline__ void combine_vec(const tpm_moe_dev &d, const RowT *__restrict__ rows,
                                            uint16_t *__restrict__ y, int t, int h) {
    const bool bias = d.b2 && d.rank == 0;
    const int local = d.ep > 1 ? ld<CG>(d.offsets + d.E1) : 0; /* EP: rows from here are other ranks' */
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; i++) acc[i] = 0.0f;
    for (int s = 0; s < d.K; s++) {
        const int p = t * d.K + s;
        const float w = ld<CG>(d.wts + p);
        const int r = ld<CG>(d.inv + p);
        if (d.ep > 1 && r >= local) continue;
        float v[V];
        LoadV<RowT, V, CG>::run(rows + (size_t)r * d.H + h, v);
        if (bias) {
            const int slot = d.ep > 1 ? ld<CG>(d.perm_exp + r) : ld<CG>(d.sel + p);
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
#pragma unroll
        for (int i = 0; i < V; i++) acc[i] += w * v[i];
    }
    if ((!d.fused || d.shared_dense) && d.sh_out) { /* the dense shared MLP (unfused, or EP split plan) */
        float v[V];
        LoadV<uint16_t, V, CG>::run(d.sh_out + (size_t)t * d.H + h, v);
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
}

} // namespace tpm_moe_comb

#endif /* TPM_MOE_CUDA_COMBINE_CUH */
