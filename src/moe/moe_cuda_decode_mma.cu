/*
 * moe_cuda_decode_mma.cu - the memory-bound expert path (few tokens per
 * expert) in ONE persistent launch on tensor cores: gate_up + activation and
 * down of every touched expert, each weight byte read from HBM once.
 *
 * Work items, handed out by an atomic ticket (ctr[3]) in this order: the
 * gate_up tiles of every touched expert (16 gate rows + the 16 matching up
 * rows), heaviest expert first (the shared slot, which has every token),
 * then the down tiles (16 output rows) in the same expert order. A block of
 * 8 warps splits an item's K dimension over its warps (32-wide chunks,
 * interleaved); each warp multiplies with mma.sync m16n8k16 (bf16 in, fp32
 * accumulate): A = 16 weight rows, B = the expert's tokens (n-tiles of 8,
 * NT / 8 of them). The weights are read straight from global memory with
 * 16-byte streaming loads: lane (g = lane / 4, q = lane % 4) loads elements
 * 8q..8q+7 of a 32-wide chunk of rows g and g + 8, and the same 8 elements
 * of its token's x row, and uses elements 4s..4s+3 as the fragment k-pairs
 * (2q, 2q+1) and (2q+8, 2q+9) of k-step s = 0, 1: a fixed permutation of k
 * applied to A and B alike, so the product is unchanged and no shared
 * memory staging is needed. The warps' partial tiles are summed in shared
 * memory in warp order (deterministic), then the epilogue: gate_up applies
 * the biases and swiglu-oai / SiLU-GLU in fp32 into act_f32; down writes
 * rows_f32 (the combine applies the routing weight and bias in slot order).
 * down's B operand is act in fp32 split into bf16 hi + lo (two mma): ~16
 * bits of the activation kept, as close to the fp32 scalar path as needed.
 *
 * Synchronisation: a down tile of expert e needs every gate_up tile of e.
 * Every thread of a gate_up item fences (__threadfence) its act stores, the
 * block syncs, then one thread adds 1 to done[e]. A down item's thread 0
 * spins (bounded, with __nanosleep) on an acquire load of done[e] until it
 * reaches Il / 16; a block remembers the experts it has seen complete. The
 * gate_up tiles of e were all handed out before any down tile of e, to
 * blocks that are running and never wait, so the wait always ends. act is
 * read with ld.global.cg (L2). The ticket of the next item is taken while
 * the current one streams. The last block to leave (exit ticket ctr[4])
 * zeroes ctr[3], ctr[4] and done[], so the launch replays in a CUDA graph;
 * a wait that runs out of bound sets ctr[5] (never expected).
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"
#include "moe_cuda_decode_smma.cuh" /* ld_stream, the mma and bf16 helpers */

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;         /* rows of one item (the mma M) */
constexpr int kChunk = 32;        /* k elements per warp step (two mma k-steps) */
constexpr int kSpinBound = 1 << 22; /* x ~64 ns: ~0.3 s */
constexpr int kMaxReadyWords = 9;   /* bitmask of experts seen complete: E1 <= 288 */

__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

struct item_t {
    int e, off, n, tile, down;
};

/* Decode ticket `it` into an item; stages the expert's tokens in s_tok. */
template <int NT>
__device__ __forceinline__ bool decode_item(const tpm_moe_dev &d, int it, int nact, int t13, int t2, int *s_tok,
                                            item_t &w) {
    const int n13 = nact * t13;
    if (it >= n13 + nact * t2) return false;
    int a;
    if (it < n13) {
        a = it / t13;
        w.tile = it - a * t13;
        w.down = 0;
    } else {
        a = (it - n13) / t2;
        w.tile = it - n13 - a * t2;
        w.down = 1;
    }
    w.e = d.active[nact - 1 - a]; /* highest expert first: the shared slot (E), the heaviest */
    w.off = d.offsets[w.e];
    w.n = min(d.offsets[w.e + 1] - w.off, NT);
    if (threadIdx.x < w.n) s_tok[threadIdx.x] = d.perm_tok[w.off + threadIdx.x];
    return true;
}

template <int NT, int U1, int U2>
__global__ void __launch_bounds__(kThreads, 2) k_decode_mma(tpm_moe_dev d, const uint16_t *__restrict__ x) {
    constexpr int NTL = NT / 8; /* n-tiles of 8 tokens */
    __shared__ float red[kWarps][2][NTL * 4][32];
    __shared__ int s_tok[NT];
    __shared__ int s_next, s_last;
    __shared__ uint32_t s_ready[kMaxReadyWords];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, q = lane & 3;
    const int H = d.H, Il = d.Il;
    const int t13 = Il / kRows, t2 = H / kRows;
    const int nact = __ldcg(d.n_active);
    for (int i = threadIdx.x; i < kMaxReadyWords; i += kThreads) s_ready[i] = 0u;
    if (threadIdx.x == 0) s_next = atomicAdd(d.ctr + 3, 1);
    __syncthreads();
    int it = s_next;
    item_t w;
    while (decode_item<NT>(d, it, nact, t13, t2, s_tok, w)) {
        __syncthreads(); /* s_tok visible; s_next read by everyone */
        if (threadIdx.x == 0) s_next = atomicAdd(d.ctr + 3, 1); /* next ticket while this item streams */
        if (!w.down) {
            /* gate_up: rows i0 + g (+8) of gate and up, K = H */
            const int i0 = w.tile * kRows;
            const uint4 *gl = reinterpret_cast<const uint4 *>(d.w13 + ((size_t)w.e * 2 * Il + i0 + g) * H);
            const uint4 *gh = gl + (size_t)8 * (H / 8);
            const uint4 *ul = gl + (size_t)Il * (H / 8);
            const uint4 *uh = ul + (size_t)8 * (H / 8);
            const uint4 *xr[NTL];
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
                xr[nt] = nt * 8 + g < w.n ? reinterpret_cast<const uint4 *>(x + (size_t)s_tok[nt * 8 + g] * H)
                                          : nullptr;
            float cg[NTL][4], cu[NTL][4];
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int r = 0; r < 4; r++) cg[nt][r] = cu[nt][r] = 0.0f;
            const int nc = H / kChunk;
            for (int c0 = warp; c0 < nc; c0 += kWarps * U1) {
                uint4 a[U1][4];
#pragma unroll
                for (int u = 0; u < U1; u++) {
                    const int c = c0 + u * kWarps;
                    if (c < nc) {
                        const int o = 4 * c + q;
                        a[u][0] = ld_stream(gl + o);
                        a[u][1] = ld_stream(gh + o);
                        a[u][2] = ld_stream(ul + o);
                        a[u][3] = ld_stream(uh + o);
                    }
                }
#pragma unroll
                for (int u = 0; u < U1; u++) {
                    const int c = c0 + u * kWarps;
                    if (c < nc) {
#pragma unroll
                        for (int nt = 0; nt < NTL; nt++) {
                            const uint4 b = xr[nt] ? __ldg(xr[nt] + 4 * c + q) : make_uint4(0u, 0u, 0u, 0u);
                            mma_chunk_t(cg[nt], a[u][0], a[u][1], b);
                            mma_chunk_t(cu[nt], a[u][2], a[u][3], b);
                        }
                    }
                }
            }
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    red[warp][0][nt * 4 + r][lane] = cg[nt][r];
                    red[warp][1][nt * 4 + r][lane] = cu[nt][r];
                }
            __syncthreads();
            for (int idx = threadIdx.x; idx < NTL * 4 * 32; idx += kThreads) {
                const int ln = idx & 31, r = (idx >> 5) & 3, nt = idx >> 7;
                const int tok = nt * 8 + (ln & 3) * 2 + (r & 1);
                if (tok < w.n) {
                    float gs = 0.0f, us = 0.0f;
#pragma unroll
                    for (int ww = 0; ww < kWarps; ww++) { /* warp order: deterministic */
                        gs += red[ww][0][nt * 4 + r][ln];
                        us += red[ww][1][nt * 4 + r][ln];
                    }
                    const int row = i0 + (ln >> 2) + (r & 2 ? 8 : 0);
                    if (d.b13) {
                        gs += d.b13[(size_t)w.e * 2 * Il + row];
                        us += d.b13[(size_t)w.e * 2 * Il + Il + row];
                    }
                    d.act_f32[(size_t)(w.off + tok) * Il + row] = tpm_moe_act(d.act, gs, us, d.alpha, d.limit, d.beta);
                }
            }
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) atomicAdd(d.done + w.e, 1);
        } else {
            /* down: output rows h0 + g (+8), K = Il; act of expert e must be complete */
            const int h0 = w.tile * kRows;
            if (threadIdx.x == 0 && !((s_ready[w.e >> 5] >> (w.e & 31)) & 1u)) {
                int spins = 0;
                while (ld_acquire(d.done + w.e) < t13) {
                    if (++spins > kSpinBound) {
                        atomicExch(d.ctr + 5, 1);
                        break;
                    }
                    __nanosleep(64);
                }
                s_ready[w.e >> 5] |= 1u << (w.e & 31);
            }
            __syncthreads();
            const uint4 *wl = reinterpret_cast<const uint4 *>(d.w2 + ((size_t)w.e * H + h0 + g) * Il);
            const uint4 *wh = wl + (size_t)8 * (Il / 8);
            const float *ar[NTL];
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
                ar[nt] = nt * 8 + g < w.n ? d.act_f32 + (size_t)(w.off + nt * 8 + g) * Il : nullptr;
            float cc[NTL][4];
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int r = 0; r < 4; r++) cc[nt][r] = 0.0f;
            const int nc = Il / kChunk;
            for (int c0 = warp; c0 < nc; c0 += kWarps * U2) {
                uint4 a[U2][2];
#pragma unroll
                for (int u = 0; u < U2; u++) {
                    const int c = c0 + u * kWarps;
                    if (c < nc) {
                        a[u][0] = ld_stream(wl + 4 * c + q);
                        a[u][1] = ld_stream(wh + 4 * c + q);
                    }
                }
#pragma unroll
                for (int u = 0; u < U2; u++) {
                    const int c = c0 + u * kWarps;
                    if (c < nc) {
#pragma unroll
                        for (int nt = 0; nt < NTL; nt++) {
                            uint4 bh = make_uint4(0u, 0u, 0u, 0u), bl = bh;
                            if (ar[nt]) {
                                const float4 *p = reinterpret_cast<const float4 *>(ar[nt] + c * kChunk + 8 * q);
                                split_hi_lo(__ldcg(p), __ldcg(p + 1), bh, bl);
                            }
                            mma_chunk_t(cc[nt], a[u][0], a[u][1], bh);
                            mma_chunk_t(cc[nt], a[u][0], a[u][1], bl);
                        }
                    }
                }
            }
#pragma unroll
            for (int nt = 0; nt < NTL; nt++)
#pragma unroll
                for (int r = 0; r < 4; r++) red[warp][0][nt * 4 + r][lane] = cc[nt][r];
            __syncthreads();
            for (int idx = threadIdx.x; idx < NTL * 4 * 32; idx += kThreads) {
                const int ln = idx & 31, r = (idx >> 5) & 3, nt = idx >> 7;
                const int tok = nt * 8 + (ln & 3) * 2 + (r & 1);
                if (tok < w.n) {
                    float v = 0.0f;
#pragma unroll
                    for (int ww = 0; ww < kWarps; ww++) v += red[ww][0][nt * 4 + r][ln];
                    const int row = h0 + (ln >> 2) + (r & 2 ? 8 : 0);
                    d.rows_f32[(size_t)(w.off + tok) * H + row] = v;
                }
            }
        }
        __syncthreads(); /* red, s_tok reused; s_next written */
        it = s_next;
    }
    /* leave: the last block resets the counters for the next launch */
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        s_last = atomicAdd(d.ctr + 4, 1) == (int)gridDim.x - 1;
    }
    __syncthreads();
    if (s_last) {
        for (int e = threadIdx.x; e < d.E1; e += kThreads) d.done[e] = 0;
        if (threadIdx.x == 0) {
            d.ctr[3] = 0;
            d.ctr[4] = 0;
        }
    }
}

template <int NT, int U1, int U2>
tpm_status launch(const tpm_moe_dev &d, const uint16_t *x, cudaStream_t s) {
    int b = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, k_decode_mma<NT, U1, U2>, kThreads, 0));
    k_decode_mma<NT, U1, U2><<<d.sm_count * (b > 0 ? b : 1), kThreads, 0, s>>>(d, x);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

} // namespace

int tpm_moe_decode_mma_ok(const tpm_moe_dev &d) {
    return d.H % kChunk == 0 && d.Il % kChunk == 0 && d.E1 <= 32 * kMaxReadyWords;
}

tpm_status tpm_moe_launch_decode_mma(const tpm_moe_dev &d, const uint16_t *x, int T, cudaStream_t s) {
    TPM_ASSERT(tpm_moe_decode_mma_ok(d));
    if (T <= 8) return launch<8, 4, 4>(d, x, s);
    if (T <= 16) return launch<16, 2, 4>(d, x, s);
    if (T <= 32) return launch<32, 2, 2>(d, x, s);
    return tpm_err(TPM_ERR_INVALID_ARG, "decode path takes at most %d tokens (got %d)", TPM_MOE_DECODE_MAX_NT, T);
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_decode_mma, (k_decode_mma<16, 2, 4>))
