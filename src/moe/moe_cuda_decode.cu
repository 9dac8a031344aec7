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
 *
 * Kernel set 2 (k_gate_up2, k_down2; same per-row arithmetic, so the same
 * bits): launched with programmatic dependent launch (pdl), each kernel may
 * start before the previous one ends. k_gate_up2's first items are the
 * fused shared slot (expert E, rows T*k.., tokens in order: independent of
 * the routing), computed before griddepcontrol.wait, i.e. while
 * k_route_fused (which triggers its dependents at its start) still runs;
 * the routed items come after the wait, their routing data read with
 * ld.global.cg. Each block triggers k_down2 right after its own wait, so
 * k_down2 starts only once the routing is complete: it takes its first
 * item and loads that item's first weight chunk group, then waits for
 * k_gate_up2 (act_f32) and triggers the combine. Up to 2 tokens k_gate_up2
 * keeps two register stages of weight chunks (gate_up_pipe, gate_up_rows'
 * PIPE; 2 blocks per SM): a warp's next loads go out before its FMAs. Counters: k_gate_up2's
 * block 0 zeroes ctr[1] (fenced) before any block can trigger; k_down2
 * zeroes ctr[0] after its wait. Without pdl these are plain launches.
 *
 * down_kernel 2 / 3 / 4 (up to 8 tokens): k_down2 with 4 rows x 2 chunks, 1
 * row x 8 or 8 rows x 1 chunk per warp instead of 2 x 4; gate_up_pairs 2:
 * k_gate_up2 with 2 row pairs x 2 chunks per warp instead of 1 x 4 (the
 * same bits: every lane adds its chunks in the same order).
 * Per-expert wait (tuning expert_wait = 1, up to 8 tokens, down_kernel 2):
 * after each item a k_gate_up2 block fences its act rows (lane 0 of each warp
 * wrote them), syncs, and thread 0 fences again and adds 1 to done[e]
 * (release). k_down2 does not wait for the whole k_gate_up2 grid: before
 * each item thread 0 spins on an acquire load of done[e] until it reaches
 * the expert's gate_up tile count (bounded: ctr[5] set, never expected),
 * the block syncs, and act is read with ld.global.cg. The gate_up items of
 * every expert are handed out before any down item and run on resident
 * blocks that never wait, so the wait always ends; the shared slot (the
 * first gate_up and the first down items) starts its down rows while the
 * routed experts' gate_up still streams. At its end k_down2 waits for the
 * k_gate_up2 grid (griddepcontrol.wait), zeroes ctr[0], and its last block
 * out (exit ticket ctr[7]) zeroes done[] for the next launch. The same bits
 * as the grid-wide wait (each row's arithmetic is unchanged).
 * The shared slot on tensor cores (tpm_moe_dev.shared_mma, tuning.shared_mma; 3-32 tokens, the
 * fused slot plan without EP, not with k_down4): the k_gate_up2 / k_down2 instantiations with
 * SM = true run the shared slot's items (k_gate_up2's pre items, k_down2's first items) on
 * mma.sync with the tokens as M (moe_cuda_decode_smma.cuh), 4 row pairs / 8 down
 * rows per warp; the routed items stay the GEMVs. k_down2's per-expert wait counts the shared
 * slot's items in that form. Other bits than the scalar shared slot, the same in every run.
 * k_down4 (tuning down_kernel = 1, up to 8 tokens) replaces k_down2 with a
 * producer warp that copies each item's rows into a shared-memory ring with
 * cp.async.bulk (mbarrier full / empty per stage; see its comment). Same
 * items, counters and bits as k_down2.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"
#include "moe_cuda_decode_smma.cuh"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

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

/* gate rows i0 .. i0+RP-1 and the same up rows of expert e for its n tokens
 * (s_tok), swiglu epilogue into act_f32[off + j][i]; one warp. Every lane
 * adds its chunks lane, lane + 32, ... in order whatever U and RP (so every
 * shape gives the same bits); the x chunk loaded serves all RP row pairs.
 * PIPE: two register stages of U chunks, the next stage's loads issued before
 * the current one's FMAs, so the warp always has loads in flight (without it
 * a warp computing has none); the same order, so the same bits. */
template <int NT, int U, int RP, bool PIPE = false>
__device__ __forceinline__ void gate_up_rows(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int e, int off,
                                             int n, int i0, const int *s_tok, int lane) {
    const int Il = d.Il, H = d.H, n8 = H / 8;
    const uint4 *gw[RP], *uw[RP];
#pragma unroll
    for (int r = 0; r < RP; r++) {
        gw[r] = reinterpret_cast<const uint4 *>(d.w13 + ((size_t)e * 2 * Il + min(i0 + r, Il - 1)) * H);
        uw[r] = gw[r] + (size_t)Il * n8;
    }
    float ag[RP][NT], au[RP][NT];
#pragma unroll
    for (int r = 0; r < RP; r++)
#pragma unroll
        for (int j = 0; j < NT; j++) ag[r][j] = au[r][j] = 0.0f;
    /* the U chunks cb, cb + 32, ... of every row pair; their FMAs for every token */
    auto load = [&](uint4 (&g)[RP][U], uint4 (&u)[RP][U], int cb) {
#pragma unroll
        for (int q = 0; q < U; q++) {
            const int c = cb + q * 32;
#pragma unroll
            for (int r = 0; r < RP; r++)
                if (c < n8) {
                    g[r][q] = ld_stream(gw[r] + c);
                    u[r][q] = ld_stream(uw[r] + c);
                }
        }
    };
    auto fma = [&](const uint4 (&g)[RP][U], const uint4 (&u)[RP][U], int cb) {
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (j < n) {
                const uint4 *xr = reinterpret_cast<const uint4 *>(x + (size_t)s_tok[j] * H);
#pragma unroll
                for (int q = 0; q < U; q++) {
                    const int c = cb + q * 32;
                    if (c < n8) {
                        const uint4 xv = __ldg(xr + c);
#pragma unroll
                        for (int r = 0; r < RP; r++) {
                            ag[r][j] = dot8(g[r][q], xv, ag[r][j]);
                            au[r][j] = dot8(u[r][q], xv, au[r][j]);
                        }
                    }
                }
            }
        }
    };
    if constexpr (PIPE) {
        uint4 ga[RP][U], ua[RP][U], gb[RP][U], ub[RP][U];
        load(ga, ua, lane);
        for (int c0 = lane; c0 < n8; c0 += 64 * U) { /* stage a holds c0, stage b c0 + 32 U */
            load(gb, ub, c0 + 32 * U);
            fma(ga, ua, c0);
            load(ga, ua, c0 + 64 * U);
            fma(gb, ub, c0 + 32 * U);
        }
    } else {
        for (int c0 = lane; c0 < n8; c0 += 32 * U) {
            uint4 g[RP][U], u[RP][U];
            load(g, u, c0);
            fma(g, u, c0);
        }
    }
#pragma unroll
    for (int r = 0; r < RP; r++) {
        const int i = i0 + r;
        if (i >= Il) break;
        const float bg = d.b13 ? d.b13[(size_t)e * 2 * Il + i] : 0.0f;
        const float bu = d.b13 ? d.b13[(size_t)e * 2 * Il + Il + i] : 0.0f;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (j < n) {
                const float gs = warp_sum(ag[r][j]) + bg, us = warp_sum(au[r][j]) + bu;
                if (lane == 0)
                    d.act_f32[(size_t)(off + j) * Il + i] = tpm_moe_act(d.act, gs, us, d.alpha, d.limit, d.beta);
            }
        }
    }
}

/* gate row i and up row i (set 0). */
template <int NT, int U>
__device__ __forceinline__ void gate_up_row(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int e, int off,
                                            int n, int i, const int *s_tok, int lane) {
    gate_up_rows<NT, U, 1>(d, x, e, off, n, i, s_tok, lane);
}

template <int NT, int U>
__global__ void __launch_bounds__(kThreads) k_gate_up(tpm_moe_dev d, const uint16_t *__restrict__ x, int skip) {
    __shared__ int s_item;
    __shared__ int s_tok[NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tiles = (d.Il + kWarps - 1) / kWarps;
    if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[1] = 0;
    int e, off, n, tile;
    while (next_item<NT>(d, d.ctr + 0, tiles, skip, &s_item, s_tok, e, off, n, tile)) {
        const int i = tile * kWarps + warp;
        if (i < d.Il) gate_up_row<NT, U>(d, x, e, off, n, i, s_tok, lane);
        __syncthreads(); /* s_tok / s_item reused by the next item */
    }
}

/* The first chunk group (c0 = lane) of down rows h0 .. h0+RD-1 of expert e. */
template <int U, int RD>
__device__ __forceinline__ void down_load(const tpm_moe_dev &d, int e, int h0, int c0, uint4 (&w)[RD][U]) {
    const int Il = d.Il, H = d.H, n8 = Il / 8;
#pragma unroll
    for (int r = 0; r < RD; r++) {
        const uint4 *row = reinterpret_cast<const uint4 *>(d.w2 + ((size_t)e * H + min(h0 + r, H - 1)) * Il);
#pragma unroll
        for (int q = 0; q < U; q++) {
            const int c = c0 + q * 32;
            if (c < n8) w[r][q] = ld_stream(row + c);
        }
    }
}

/* Down rows h0 .. h0+RD-1 of expert e for its n tokens -> rows_f32[off + j][h];
 * one warp. have0: w already holds the chunk group c0 = lane (loaded early). */
template <int NT, int U, int RD, bool CG = false>
__device__ __forceinline__ void down_rows(const tpm_moe_dev &d, int e, int off, int n, int h0, int lane,
                                          uint4 (&w)[RD][U], bool have0) {
    const int Il = d.Il, H = d.H, n8 = Il / 8;
    float acc[RD][NT];
#pragma unroll
    for (int r = 0; r < RD; r++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[r][j] = 0.0f;
    for (int c0 = lane; c0 < n8; c0 += 32 * U) {
        if (!have0) down_load<U, RD>(d, e, h0, c0, w);
        have0 = false;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (j < n) {
                const float4 *ar = reinterpret_cast<const float4 *>(d.act_f32 + (size_t)(off + j) * Il);
#pragma unroll
                for (int q = 0; q < U; q++) {
                    const int c = c0 + q * 32;
                    if (c < n8) {
                        float4 a0, a1;
                        if constexpr (CG) { /* written in this phase by the other kernel: L2 */
                            a0 = __ldcg(ar + 2 * c);
                            a1 = __ldcg(ar + 2 * c + 1);
                        } else {
                            a0 = __ldg(ar + 2 * c);
                            a1 = __ldg(ar + 2 * c + 1);
                        }
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

template <int NT, int U, int RD>
__global__ void __launch_bounds__(kThreads) k_down(tpm_moe_dev d, int skip) {
    __shared__ int s_item;
    __shared__ int s_tok[NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tiles = (d.H + kWarps * RD - 1) / (kWarps * RD);
    if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[0] = 0;
    int e, off, n, tile;
    while (next_item<NT>(d, d.ctr + 1, tiles, skip, &s_item, s_tok, e, off, n, tile)) {
        const int h0 = (tile * kWarps + warp) * RD;
        if (h0 < d.H) {
            uint4 w[RD][U];
            down_rows<NT, U, RD>(d, e, off, n, h0, lane, w, false);
        }
        __syncthreads();
    }
}

/* MARK: the shared slot on tensor cores: moe_cuda_decode_smma.cuh */
static_assert(kWarps == kSmmaWarps, "moe_cuda_decode_smma.cuh's items assume kWarps warps per block");

/* MARK: kernel set 2 (programmatic dependent launch) */
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* Items 0 .. pre-1: the fused shared slot (expert E, rows T*k .. T*k+T-1,
 * tokens 0..T-1 in order), which needs nothing from the routing and runs
 * before griddepcontrol.wait, i.e. while the routing kernel still runs.
 * Items from pre: the other active slots (active[0 .. n_active-1-nskip], the
 * highest first; nskip = 1 when the shared slot runs as the pre items or
 * dense), read only after the wait, with ld.global.cg. */
template <int NT, int U, int RP, int PIPE = 0, bool SM = false>
__global__ void __launch_bounds__(kThreads, NT <= 2 ? (PIPE ? 2 : 4) : SM ? 2 : 1) k_gate_up2(tpm_moe_dev d, const uint16_t *__restrict__ x, int T,
                                                       int pre, int nskip, int fine) {
    __shared__ int s_item;
    __shared__ int s_tok[NT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tiles = (d.Il + kWarps * RP - 1) / (kWarps * RP);
    TPM_TRACE_MARK(d, 1, 0, (int)blockIdx.x);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        d.ctr[1] = 0; /* k_down2's counter, before k_down2 can launch (after our trigger) */
        __threadfence();
    }
    bool waited = false;
    for (;;) {
        if (threadIdx.x == 0) s_item = atomicAdd(d.ctr + 0, 1);
        __syncthreads();
        const int item = s_item;
        int e, off, n, tile;
        if (item < pre) {
            e = d.Es; /* = E (pre > 0 only without EP) */
            off = T * d.k;
            n = T;
            tile = item;
            if (threadIdx.x < n) s_tok[threadIdx.x] = threadIdx.x;
        } else {
            if (!waited) { /* block-uniform */
                pdl_wait();
                TPM_TRACE_MARK(d, 1, 1, (int)blockIdx.x);
                pdl_trigger();
                waited = true;
            }
            const int nr = __ldcg(d.n_active) - nskip; /* the active slots not run by pre items or dense */
            const int it = item - pre;
            if (it >= nr * tiles) break;
            const int a = it / tiles;
            tile = it - a * tiles;
            e = __ldcg(d.active + nr - 1 - a);
            off = __ldcg(d.offsets + e);
            n = min(__ldcg(d.offsets + e + 1) - off, NT);
            if (threadIdx.x < n) s_tok[threadIdx.x] = __ldcg(d.perm_tok + off + threadIdx.x);
        }
        __syncthreads();
        if (SM && NT >= 4 && item < pre) { /* the shared slot on tensor cores: 4 row pairs per warp */
            const int i0 = (tile * kWarps + warp) * 4;
            if constexpr (SM && NT >= 4)
                if (i0 < d.Il) gate_up_mma<(NT + 15) / 16>(d, x, e, off, n, i0, s_tok, lane);
        } else {
            const int i0 = (tile * kWarps + warp) * RP;
            if (i0 < d.Il) gate_up_rows<NT, U, RP, PIPE != 0>(d, x, e, off, n, i0, s_tok, lane);
        }
        if (fine && lane == 0) __threadfence(); /* the act rows this warp wrote (lane 0 writes them) */
        __syncthreads(); /* s_tok / s_item reused by the next item */
        if (fine && threadIdx.x == 0) { /* release: one more finished gate_up tile of expert e */
            __threadfence();
            atomicAdd(d.done + e, 1);
        }
    }
    TPM_TRACE_MARK(d, 1, 2, (int)blockIdx.x);
}

__device__ __forceinline__ int ld_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

constexpr int kSpinBound = 1 << 26; /* x __nanosleep(64): seconds; a bug, never a hang */

/* k_down2 launches while k_gate_up2 still runs (every k_gate_up2 block has
 * passed its wait, so the routing is complete): it takes its first item and
 * loads that item's first weight chunk group before griddepcontrol.wait, so
 * the weight stream continues across the kernel boundary. act_f32 is read
 * only after the wait. */
template <int NT, int U, int RD, bool FINE, bool SM = false>
__global__ void __launch_bounds__(kThreads, SM ? 2 : 1) k_down2(tpm_moe_dev d, int skip, int gu_tiles) {
    __shared__ int s_item, s_last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tiles = (d.H + kWarps * RD - 1) / (kWarps * RD);
    TPM_TRACE_MARK(d, 2, 0, (int)blockIdx.x);
    const int na = __ldcg(d.n_active) - skip; /* skip = 1: the shared slot (last active) runs dense */
    /* shared_mma: items 0 .. sh-1 are the shared slot's (active[na - 1]) in the tensor-core form,
     * the other experts' scalar items follow */
    const int sh = SM && NT >= 4 ? smma_down_items(d.H) : 0;
    const int total = sh > 0 ? sh + (na - 1) * tiles : na * tiles;
    if (threadIdx.x == 0) s_item = atomicAdd(d.ctr + 1, 1);
    __syncthreads();
    int item = s_item;
    uint4 w[RD][U];
    bool have0 = false;
    if ((!SM || item >= sh) && item < total) {
        const int it = item - sh, a0 = it / tiles, tile = it - a0 * tiles, a = a0 + (sh > 0);
        const int e = __ldcg(d.active + na - 1 - a), h0 = (tile * kWarps + warp) * RD;
        if (h0 < d.H) {
            down_load<U, RD>(d, e, h0, lane, w);
            have0 = true;
        }
    }
    if (!FINE) {
        pdl_wait();
        TPM_TRACE_MARK(d, 2, 1, (int)blockIdx.x);
        if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[0] = 0; /* k_gate_up2 has finished */
    }
    pdl_trigger();
    while (item < total) {
        const bool smma = SM && item < sh;
        int a = 0, tile = item;
        if (!smma) {
            const int it = item - sh;
            a = it / tiles;
            tile = it - a * tiles;
            a += sh > 0;
        }
        const int e = __ldcg(d.active + na - 1 - a);
        const int off = __ldcg(d.offsets + e);
        const int n = min(__ldcg(d.offsets + e + 1) - off, NT);
        const int h0 = (tile * kWarps + warp) * (smma ? 8 : RD);
        if constexpr (FINE) { /* acquire: every gate_up tile of expert e is done */
            if (threadIdx.x == 0) {
                int spins = 0;
                const int need = SM && NT >= 4 && e == d.Es ? smma_gate_up_items(d.Il) : gu_tiles;
                while (ld_acquire(d.done + e) < need) {
                    if (++spins > kSpinBound) {
                        atomicExch(d.ctr + 5, 1);
                        break;
                    }
                    __nanosleep(64);
                }
            }
            __syncthreads();
        }
        if (SM && NT >= 4 && smma) {
            if constexpr (SM && NT >= 4)
                if (h0 < d.H) down_mma<(NT + 15) / 16>(d, e, off, n, h0, lane);
        } else if (h0 < d.H) {
            down_rows<NT, U, RD, FINE>(d, e, off, n, h0, lane, w, have0);
        }
        have0 = false;
        __syncthreads(); /* s_item */
        if (threadIdx.x == 0) s_item = atomicAdd(d.ctr + 1, 1);
        __syncthreads();
        item = s_item;
    }
    TPM_TRACE_MARK(d, 2, 2, (int)blockIdx.x);
    if constexpr (FINE) {
        /* k_gate_up2 has finished (it may still run past our last item's expert): its counter
         * for the next launch; then the last block out zeroes done[] and its exit ticket */
        pdl_wait();
        if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[0] = 0;
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            s_last = atomicAdd(d.ctr + 7, 1) == (int)gridDim.x - 1;
        }
        __syncthreads();
        if (s_last) {
            for (int i = threadIdx.x; i < d.E1; i += kThreads) d.done[i] = 0;
            if (threadIdx.x == 0) d.ctr[7] = 0;
        }
    }
}

/* MARK: k_down4 (bulk-copy pipeline)
 * One block per SM: a producer warp and kWarps consumer warps around a ring
 * of nst stages in shared memory. A stage is one work item of k_down2's
 * kind, 8 consecutive down rows of one touched expert (contiguous in W2:
 * the producer copies them with cp.async.bulk, one bulk copy per row,
 * completing on the stage's `full` mbarrier with the byte count). Items
 * come from the same counter (ctr[1]) as k_down2's, so blocks stream
 * neighbouring rows and the tail is one 8-row item. Consumer warp w
 * computes row w of each stage from shared memory for the expert's tokens
 * (act_f32 through L1), then arrives on the stage's `empty` mbarrier; the
 * producer waits for it before refilling the stage. Up to nst - 1 stages
 * (about 150 KB) are in flight per SM whatever the register budget.
 * Per lane the chunks of a row are visited in the order c = lane, lane + 32,
 * ... with the same fmaf chain and butterfly as down_rows: the same bits as
 * k_down2. The producer starts copying before griddepcontrol.wait (the
 * routing is complete once every k_gate_up2 block has triggered); the
 * consumers read act_f32 only after it. */
constexpr int kD4Rows = kWarps;               /* rows per stage, one per consumer warp */
constexpr int kD4Threads = (kWarps + 1) * 32; /* + the producer warp */
constexpr int kD4MaxStages = 8;
constexpr size_t kD4RingBytes = 196608;

struct D4Meta {
    int e, h0, nrows, off, n;
};

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(tx) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    uint32_t ok = 0;
    while (!ok)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(ok)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
}
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}

template <int NT>
__global__ void __launch_bounds__(kD4Threads, 1) k_down4(tpm_moe_dev d, int skip, int nst) {
    extern __shared__ __align__(128) uint8_t d4_ring[];
    __shared__ __align__(8) uint64_t full[kD4MaxStages], empty[kD4MaxStages];
    __shared__ D4Meta meta[kD4MaxStages];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int Il = d.Il, H = d.H, n8 = Il / 8;
    const uint32_t rowb = (uint32_t)Il * 2u;
    const int tiles = (H + kD4Rows - 1) / kD4Rows;
    if (threadIdx.x == 0) {
        for (int st = 0; st < nst; st++) {
            mbar_init(&full[st], 1);
            mbar_init(&empty[st], kWarps);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (warp == kWarps) { /* producer */
        if (lane != 0) return;
        const int na = __ldcg(d.n_active) - skip; /* skip = 1: the shared slot (last active) runs dense */
        const int total = na * tiles;
        for (int it = 0;; it++) {
            const int st = it % nst;
            if (it >= nst) mbar_wait(&empty[st], (uint32_t)((it / nst) - 1) & 1u);
            const int item = atomicAdd(d.ctr + 1, 1);
            D4Meta m = {0, 0, 0, 0, 0};
            if (item >= total) { /* end of work: an empty stage */
                meta[st] = m;
                mbar_arrive(&full[st]);
                return;
            }
            const int a = item / tiles, tile = item - a * tiles;
            m.e = __ldcg(d.active + na - 1 - a);
            m.h0 = tile * kD4Rows;
            m.nrows = min(kD4Rows, H - m.h0);
            m.off = __ldcg(d.offsets + m.e);
            m.n = min(__ldcg(d.offsets + m.e + 1) - m.off, NT);
            meta[st] = m;
            mbar_expect_tx(&full[st], (uint32_t)m.nrows * rowb);
            const uint8_t *src = reinterpret_cast<const uint8_t *>(d.w2 + ((size_t)m.e * H + m.h0) * Il);
            uint8_t *dst = d4_ring + (size_t)st * kD4Rows * rowb;
            for (int r = 0; r < m.nrows; r++) bulk_g2s(dst + (size_t)r * rowb, src + (size_t)r * rowb, rowb, &full[st]);
        }
    }
    /* consumers */
    pdl_wait();
    if (blockIdx.x == 0 && threadIdx.x == 0) d.ctr[0] = 0; /* k_gate_up2 has finished */
    pdl_trigger();
    for (int it = 0;; it++) {
        const int st = it % nst;
        mbar_wait(&full[st], (uint32_t)(it / nst) & 1u);
        const D4Meta m = meta[st];
        if (m.nrows == 0) break;
        if (warp < m.nrows) {
            const uint4 *row = reinterpret_cast<const uint4 *>(d4_ring + ((size_t)st * kD4Rows + warp) * rowb);
            float acc[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) acc[j] = 0.0f;
#pragma unroll 4
            for (int c = lane; c < n8; c += 32) {
                const uint4 w = row[c];
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    if (j < m.n) {
                        const float4 *ar = reinterpret_cast<const float4 *>(d.act_f32 + (size_t)(m.off + j) * Il);
                        acc[j] = dot8f(w, __ldg(ar + 2 * c), __ldg(ar + 2 * c + 1), acc[j]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (j < m.n) {
                    const float v = warp_sum(acc[j]);
                    if (lane == 0) d.rows_f32[(size_t)(m.off + j) * H + m.h0 + warp] = v;
                }
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[st]);
    }
}

template <typename... P, typename... A>
cudaError_t launch_ex(void (*k)(P...), int grid, bool pdl, cudaStream_t s, A... args) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, args...);
}

template <int NT, int U2, int RD, bool FINE, bool SM>
tpm_status launch_down2_k(const tpm_moe_dev &d, int skip, bool pdl, cudaStream_t s, int gu_tiles) {
    int b2 = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b2, k_down2<NT, U2, RD, FINE, SM>, kThreads, 0));
    TPM_CUDA_TRY(launch_ex(k_down2<NT, U2, RD, FINE, SM>, d.sm_count * (b2 > 0 ? b2 : 1), pdl, s, d, skip, gu_tiles));
    return TPM_OK;
}

/* d.shared_mma (3+ tokens): the instantiation with the shared slot's tensor-core items, its own
 * kernel so that the plain GEMVs keep their registers (and blocks per SM) */
template <int NT, int U2, int RD, bool FINE = false>
tpm_status launch_down2(const tpm_moe_dev &d, int skip, bool pdl, cudaStream_t s, int gu_tiles = 0) {
    if constexpr (NT >= 4)
        if (d.shared_mma && !skip) return launch_down2_k<NT, U2, RD, FINE, true>(d, skip, pdl, s, gu_tiles);
    return launch_down2_k<NT, U2, RD, FINE, false>(d, skip, pdl, s, gu_tiles);
}

template <int NT, int U1, int RP, int PIPE = 0>
tpm_status launch_gate_up2(const tpm_moe_dev &d, const uint16_t *x, int T, int skip, bool pdl, int fine,
                           cudaStream_t s) {
    /* EP: the shared slot holds only this rank's tokens, found by the routing */
    const bool pre_on = d.fused && !skip && d.ep == 1;
    const int nskip = pre_on || skip ? 1 : 0; /* the shared slot: the last active one */
    int b1 = 0;
    if constexpr (NT >= 4 && !PIPE) {
        if (pre_on && d.shared_mma) { /* the shared slot's items on tensor cores */
            auto k = k_gate_up2<NT, U1, RP, PIPE, true>;
            TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b1, k, kThreads, 0));
            TPM_CUDA_TRY(launch_ex(k, d.sm_count * (b1 > 0 ? b1 : 1), pdl, s, d, x, T, smma_gate_up_items(d.Il), nskip,
                                   fine));
            return TPM_OK;
        }
    }
    const int pre = pre_on ? (d.Il + kWarps * RP - 1) / (kWarps * RP) : 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b1, k_gate_up2<NT, U1, RP, PIPE>, kThreads, 0));
    TPM_CUDA_TRY(
        launch_ex(k_gate_up2<NT, U1, RP, PIPE>, d.sm_count * (b1 > 0 ? b1 : 1), pdl, s, d, x, T, pre, nskip, fine));
    return TPM_OK;
}

template <int NT>
tpm_status launch2_nt(const tpm_moe_dev &d, const uint16_t *x, int T, int skip, bool pdl, int down, int gpairs,
                      int wait, cudaStream_t s) {
    constexpr int U1 = NT >= 16 ? 2 : 4;
    constexpr int U2 = NT >= 16 ? 2 : 4;
    constexpr int RD = NT >= 16 ? 1 : 2;
    /* gate_up_pairs 2 (<= 8 tokens): 2 row pairs x 2 chunks per warp, the same bits */
    bool pairs2 = false;
    if constexpr (NT <= 8) pairs2 = gpairs == 2;
    /* expert_wait 1 (<= 8 tokens, down_kernel 2): k_down2 waits per expert (done[e]) instead of
     * for the whole k_gate_up2 grid */
    const int fine = NT <= 8 && down == 2 && wait == 1 ? 1 : 0;
    const int rp = pairs2 ? (NT <= 8 ? 2 : 1) : 1, gu_tiles = (d.Il + kWarps * rp - 1) / (kWarps * rp);
    /* gate_up_pipe (<= 2 tokens): the weight loads in two register stages (same bits). r97: the
     * layer 0.8-1.2 us faster at 1 token, 0-1.3 at 2; from 3 tokens its registers leave one block
     * per SM and it was 8-11% slower, so it stays off there */
    bool piped = false;
    if constexpr (NT <= 2) { /* the two-stage form is built for 1-2 tokens only */
        piped = d.gate_up_pipe != 0;
        if (piped && pairs2) TPM_TRY((launch_gate_up2<NT, 2, 2, 1>(d, x, T, skip, pdl, fine, s)));
        else if (piped) TPM_TRY((launch_gate_up2<NT, U1, 1, 1>(d, x, T, skip, pdl, fine, s)));
    }
    if (!piped && pairs2) TPM_TRY((launch_gate_up2<NT, 2, NT <= 8 ? 2 : 1>(d, x, T, skip, pdl, fine, s)));
    else if (!piped) TPM_TRY((launch_gate_up2<NT, U1, 1>(d, x, T, skip, pdl, fine, s)));
    if constexpr (NT <= 8) {
        const size_t stage = (size_t)kD4Rows * d.Il * 2;
        const int nst = (int)min((size_t)kD4MaxStages, kD4RingBytes / stage);
        if (down == 1 && nst >= 2 && (d.Il * 2) % 16 == 0) {
            const size_t smem = (size_t)nst * stage;
            TPM_CUDA_TRY(cudaFuncSetAttribute(k_down4<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.gridDim = dim3((unsigned)d.sm_count);
            cfg.blockDim = dim3(kD4Threads);
            cfg.dynamicSmemBytes = smem;
            cfg.stream = s;
            cfg.attrs = at;
            cfg.numAttrs = pdl ? 1 : 0;
            TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_down4<NT>, d, skip, nst));
            return TPM_OK;
        }
    }
    if constexpr (NT <= 8) {
        /* down_kernel 2 / 3 / 4: k_down2 with 4 rows x 2 chunks, 1 x 8 or 8 x 1 per warp
         * (the same 4 KB in flight per warp, items of 32, 8 or 64 rows); every lane
         * still adds its chunks lane, lane + 32, ... in order, so the bits are k_down2's */
        if (down == 2 && fine) return launch_down2<NT, 2, 4, true>(d, skip, pdl, s, gu_tiles);
        if (down == 2) return launch_down2<NT, 2, 4>(d, skip, pdl, s);
        if (down == 3) return launch_down2<NT, 8, 1>(d, skip, pdl, s);
        if (down == 4) return launch_down2<NT, 1, 8>(d, skip, pdl, s);
    }
    return launch_down2<NT, U2, RD>(d, skip, pdl, s);
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

tpm_status tpm_moe_launch_decode2(const tpm_moe_dev &d, const uint16_t *x, int T, int skip_shared, int pdl,
                                  int down, int gpairs, int wait, cudaStream_t s) {
    TPM_ASSERT(d.H % 8 == 0 && d.Il % 8 == 0);
    const int skip = skip_shared ? 1 : 0;
    const bool p = pdl != 0;
    if (T <= 1) return launch2_nt<1>(d, x, T, skip, p, down, gpairs, wait, s);
    if (T <= 2) return launch2_nt<2>(d, x, T, skip, p, down, gpairs, wait, s);
    if (T <= 4) return launch2_nt<4>(d, x, T, skip, p, down, gpairs, wait, s);
    if (T <= 8) return launch2_nt<8>(d, x, T, skip, p, down, gpairs, wait, s);
    if (T <= 16) return launch2_nt<16>(d, x, T, skip, p, down, gpairs, wait, s);
    if (T <= 32) return launch2_nt<32>(d, x, T, skip, p, down, gpairs, wait, s);
    return tpm_err(TPM_ERR_INVALID_ARG, "decode path takes at most %d tokens (got %d)",
                   TPM_MOE_DECODE_MAX_NT, T);
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_decode, (k_down4<1>))
