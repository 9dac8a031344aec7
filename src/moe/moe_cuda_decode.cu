/*
 * moe_cuda_decode.cu - the memory-bound expert path (few tokens per expert):
 * two persistent kernels that stream each touched expert's weights from HBM
 * exactly once.
 *
 * Work: the touched experts (the fused shared expert is one more, slot E)
 * are listed by the routing kernel. k_gate_up's work items are (touched
 * expert, tile of 8 row pairs); a block of 8 warps takes items from an
 * atomic counter (dynamic, so the shared expert's heavier rows balance out)
 * (the shared slot, which has every token, is handed out first, so the
 * heaviest items never form the tail) and each warp computes gate row i and up row i of its expert for all the
 * expert's tokens at once: 16-byte streaming loads of both weight rows
 * (ld.global.nc, no L1 allocation), U chunks in flight per lane, x read
 * through L1, fp32 fmaf accumulation, a fixed xor-butterfly warp reduction,
 * then the swiglu-oai / SiLU-GLU epilogue in fp32 (bias added first) into
 * act_f32[row][i] (row = the permuted (token, slot) row). k_down's items are
 * (touched expert, tile of 8*RD output rows): each warp reads RD rows of
 * down [H x Il] once and writes rows_f32[row][h] (no routing weight, no
 * bias: the combine applies both in slot order). Nothing is accumulated
 * with atomics, so the result has the same bits in every run.
 *
 * Split shared plan (skip_shared): the fused shared expert, always the last
 * touched expert (slot E, highest index), is left out of both item lists;
 * the layer runs it as a dense cuBLAS MLP that writes the same fp32 rows.
 *
 * Synchronisation: stream order only. Work counters: k_gate_up uses ctr[0]
 * and zeroes ctr[1] (block 0) before k_down starts; k_down uses ctr[1] and
 * zeroes ctr[0] for the next forward (k_gate_up has finished by then). So
 * each kernel can be replayed inside a CUDA graph.
 */
#include "moe_cuda_kernels.h"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

__device__ __forceinline__ float lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

/* acc += w . x over 8 bf16 pairs, in element order */
__device__ __forceinline__ float dot8(const uint4 &w, const uint4 &x, float acc) {
    acc = fmaf(lo(w.x), lo(x.x), acc);
    acc = fmaf(hi(w.x), hi(x.x), acc);
    acc = fmaf(lo(w.y), lo(x.y), acc);
    acc = fmaf(hi(w.y), hi(x.y), acc);
    acc = fmaf(lo(w.z), lo(x.z), acc);
    acc = fmaf(hi(w.z), hi(x.z), acc);
    acc = fmaf(lo(w.w), lo(x.w), acc);
    acc = fmaf(hi(w.w), hi(x.w), acc);
    return acc;
}

/* acc += w . a over 8 bf16 weights and 8 fp32 activations */
__device__ __forceinline__ float dot8f(const uint4 &w, const float4 &a, const float4 &b, float acc) {
    acc = fmaf(lo(w.x), a.x, acc);
    acc = fmaf(hi(w.x), a.y, acc);
    acc = fmaf(lo(w.y), a.z, acc);
    acc = fmaf(hi(w.y), a.w, acc);
    acc = fmaf(lo(w.z), b.x, acc);
    acc = fmaf(hi(w.z), b.y, acc);
    acc = fmaf(lo(w.w), b.z, acc);
    acc = fmaf(hi(w.w), b.w, acc);
    return acc;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Next work item of the block (one atomic per block), plus the expert's
 * token rows staged in shared memory. Returns false when the work is done. */
template <int NT>
__device__ __forceinline__ bool next_item(const tpm_moe_dev &d, int *ctr, int tiles, int skip, int *s_item,
                                          int *s_tok, int &e, int &off, int &n, int &tile) {
    const int na = __ldcg(d.n_active) - skip; /* skip = 1: the shared slot (last active) runs dense */
    const int total = na * tiles;
    if (threadIdx.x == 0) *s_item = atomicAdd(ctr, 1);
    __syncthreads();
    const int item = *s_item;
    if (item >= total) return false;
    const int a = item / tiles;
    tile = item - a * tiles;
    e = d.active[na - 1 - a]; /* highest expert first: the shared slot (E), the heaviest */
    off = d.offsets[e];
    n = min(d.offsets[e + 1] - off, NT);
    if (threadIdx.x < n) s_tok[threadIdx.x] = d.perm_tok[off + threadIdx.x];
    __syncthreads();
    return true;
}

template <int NT, int U>
__global__ void __launch_bounds__(kThreads) k_gate_up(tpm_moe_dev d, const uint16_t *__restrict__ x, int skip) {
    __shared__ int s_item;
    __shared__ int s_tok[NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int Il = d.Il, H = d.H, n8 = H / 8;
    const int tiles = (Il + kWarps - 1) / kWarps;
    if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[1] = 0;
    int e, off, n, tile;
    while (next_item<NT>(d, d.ctr + 0, tiles, skip, &s_item, s_tok, e, off, n, tile)) {
        const int i = tile * kWarps + warp;
        if (i < Il) {
            const uint4 *gw = reinterpret_cast<const uint4 *>(d.w13 + ((size_t)e * 2 * Il + i) * H);
            const uint4 *uw = gw + (size_t)Il * n8;
            float ag[NT], au[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) ag[j] = au[j] = 0.0f;
            for (int c0 = lane; c0 < n8; c0 += 32 * U) {
                uint4 g[U], u[U];
#pragma unroll
                for (int q = 0; q < U; q++) {
                    const int c = c0 + q * 32;
                    if (c < n8) {
                        g[q] = ld_stream(gw + c);
                        u[q] = ld_stream(uw + c);
                    }
                }
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if (j < n) {
                        const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)s_tok[j] * H);
#pragma unroll
                        for (int q = 0; q < U; q++) {
                            const int c = c0 + q * 32;
                            if (c < n8) {
                                const uint4 xv = __ldg(xr + c);
                                ag[j] = dot8(g[q], xv, ag[j]);
                                au[j] = dot8(u[q], xv, au[j]);
                            }
                        }
                    }
                }
            }
            const float bg = d.b13 ? d.b13[(size_t)e * 2 * Il + i] : 0.0f;
            const float bu = d.b13 ? d.b13[(size_t)e * 2 * Il + Il + i] : 0.0f;
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (j < n) {
                    const float gs = warp_sum(ag[j]) + bg, us = warp_sum(au[j]) + bu;
                    if (lane == 0)
                        d.act_f32[(size_t)(off + j) * Il + i] =
                            tpm_moe_act(d.act, gs, us, d.alpha, d.limit, d.beta);
                }
            }
        }
        __syncthreads(); /* s_tok / s_item reused by the next item */
    }
}

template <int NT, int U, int RD>
__global__ void __launch_bounds__(kThreads) k_down(tpm_moe_dev d, int skip) {
    __shared__ int s_item;
    __shared__ int s_tok[NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int Il = d.Il, H = d.H, n8 = Il / 8;
    const int tiles = (H + kWarps * RD - 1) / (kWarps * RD);
    if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[0] = 0;
    int e, off, n, tile;
    while (next_item<NT>(d, d.ctr + 1, tiles, skip, &s_item, s_tok, e, off, n, tile)) {
        const int h0 = (tile * kWarps + warp) * RD;
        if (h0 < H) {
            const uint4 *wrow[RD];
#pragma unroll
            for (int r = 0; r < RD; r++)
                wrow[r] = reinterpret_cast<const uint4 *>(d.w2 + ((size_t)e * H + min(h0 + r, H - 1)) * Il);
            float acc[RD][NT];
#pragma unroll
            for (int r = 0; r < RD; r++)
#pragma unroll
                for (int j = 0; j < NT; j++) acc[r][j] = 0.0f;
            for (int c0 = lane; c0 < n8; c0 += 32 * U) {
                uint4 w[RD][U];
#pragma unroll
                for (int q = 0; q < U; q++) {
                    const int c = c0 + q * 32;
#pragma unroll
                    for (int r = 0; r < RD; r++)
                        if (c < n8) w[r][q] = ld_stream(wrow[r] + c);
                }
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if (j < n) {
                        const float4 *ar = reinterpret_cast<const float4 *>(d.act_f32 + (size_t)(off + j) * Il);
#pragma unroll
                        for (int q = 0; q < U; q++) {
                            const int c = c0 + q * 32;
                            if (c < n8) {
                                const float4 a0 = __ldg(ar + 2 * c), a1 = __ldg(ar + 2 * c + 1);
#pragma unroll
                                for (int r = 0; r < RD; r++) acc[r][j] = dot8f(w[r][q], a0, a1, acc[r][j]);
                            }
                        }
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (j < n) {
#pragma unroll
                    for (int r = 0; r < RD; r++) {
                        const float v = warp_sum(acc[r][j]);
                        if (lane == r && h0 + r < H) d.rows_f32[(size_t)(off + j) * H + h0 + r] = v;
                    }
                }
            }
        }
        __syncthreads();
    }
}

template <int NT>
tpm_status launch_nt(const tpm_moe_dev &d, const uint16_t *x, int skip, cudaStream_t s) {
    constexpr int U1 = NT >= 16 ? 2 : 4;
    constexpr int U2 = NT >= 16 ? 2 : 4;
    constexpr int RD = NT >= 16 ? 1 : 2;
    int b1 = 0, b2 = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b1, k_gate_up<NT, U1>, kThreads, 0));
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b2, k_down<NT, U2, RD>, kThreads, 0));
    k_gate_up<NT, U1><<<d.sm_count * (b1 > 0 ? b1 : 1), kThreads, 0, s>>>(d, x, skip);
    TPM_CUDA_LAUNCHED();
    k_down<NT, U2, RD><<<d.sm_count * (b2 > 0 ? b2 : 1), kThreads, 0, s>>>(d, skip);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

} // namespace

tpm_status tpm_moe_launch_decode(const tpm_moe_dev &d, const uint16_t *x, int T, int skip_shared,
                                  cudaStream_t s) {
    TPM_ASSERT(d.H % 8 == 0 && d.Il % 8 == 0);
    const int skip = skip_shared ? 1 : 0;
    if (T <= 1) return launch_nt<1>(d, x, skip, s);
    if (T <= 2) return launch_nt<2>(d, x, skip, s);
    if (T <= 4) return launch_nt<4>(d, x, skip, s);
    if (T <= 8) return launch_nt<8>(d, x, skip, s);
    if (T <= 16) return launch_nt<16>(d, x, skip, s);
    if (T <= 32) return launch_nt<32>(d, x, skip, s);
    return tpm_err(TPM_ERR_INVALID_ARG, "decode path takes at most %d tokens (got %d)",
                   TPM_MOE_DECODE_MAX_NT, T);
}
