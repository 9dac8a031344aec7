/*
 * cuda_oneshot.cu - exact one-shot all-reduce over peer memory with
 * self-validating packets (no flag round trip).
 *
 * Algorithm (world W, any 2..8, one generic path):
 *   1. push: every thread takes 16-byte words of its input and stores each,
 *      with one st.volatile.v4, into slot [me] of every peer's one-shot region
 *      (half `parity` = epoch & 1 of it);
 *   2. reduce: for each word, the thread polls the W-1 peers' words in its own
 *      local region with ld.volatile until no element is the all-ones
 *      sentinel, re-stores the sentinel there (so the region is clean for the
 *      launch after next), and sums all W terms in fp32 in rank order 0..W-1
 *      (its own term read from its input), rounding once to the dtype.
 *   Every rank computes the same sum in the same order: outputs are bitwise
 *   identical on every rank.
 *
 * Why no flag: the packet is its own ready marker (the "Lamport" trick). The
 * region starts all-ones (cudaMemset 0xff at init) and every reader restores
 * all-ones after use. An all-ones bf16/fp16/fp32 element is a NaN; a sender
 * replaces such an input element by the canonical quiet NaN, so payload
 * never looks like the sentinel (the sum is NaN either way). A 16-byte store
 * may land in pieces, but never splits an element, so a word is complete once
 * none of its elements is all-ones.
 *
 * Reuse safety: a rank in launch e reads half e&1 of its region; a peer can
 * only be writing launch e+1 (half (e+1)&1) until it has this rank's data of
 * e+1, which this rank sends after launch e (including its clears) finished.
 * Waits are bounded: past timeout_ns a thread records TPM_ERR_TIMEOUT in the
 * host-mapped error words and stops waiting (the communicator is then dead).
 *
 * Epochs. Variant 0 (tpm_cuda_variant): the launch epoch of cuda_sync.h
 * (ctl[0] read by thread 0 before any push, the last CTA to leave stores it
 * after an atomic exit count). Variant 1: one epoch per CTA index b in
 * ctl[kCtaEpoch + b], read by every thread of CTA b while its first input
 * word is in flight and stored back by CTA b after a __syncthreads at its
 * end: no global atomic, no dependent read before the first load. This is
 * safe because word i is always handled by CTA (i / kBlock) mod G (G = the
 * launch grid when one pass covers the message, else the fixed cap
 * min(a.grid, kMaxCtas), the same in every launch of a communicator), so the
 * counter that picks word i's half has the same history on every rank, and
 * the reuse argument above holds per counter: a peer writes word i in the
 * half of my counter value k again only in its launch with value k+2, which
 * needs my data of value k+1, pushed after my launch of value k finished.
 * Variants 2 / 3 (oneshot2_kernel, 3 with programmatic dependent launch) and
 * 4 (variant 3 up to 256 KB, else 1) use the same map and epoch words, so
 * calls of variants 1-4 may follow each other on one communicator.
 */
#include "core/cuda_preload.h"
#include "comm/cuda_sync.h"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

constexpr int kUnroll = 4;
constexpr int kBlock = 256;
/* Variant 1: per-CTA epochs in ctl words [kCtaEpoch, kCtaEpoch + kMaxCtas). */
constexpr int kCtaEpoch = 64;
constexpr int kMaxCtas = (int)(TPM_CUDA_CTL_BYTES / 4) - kCtaEpoch;

template <int DT, int V, bool PDL = false>
__global__ void __launch_bounds__(kBlock) oneshot_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    using Wd = Word<DT>;
    if (PDL) { /* variant 5: launched with programmatic dependent launch */
        pdl_wait();
        pdl_trigger();
    }
    const size_t nwords = (a.count + Wd::kElems - 1) / Wd::kElems;
    const bool in_al = ((uintptr_t)a.in & 15u) == 0, out_al = ((uintptr_t)a.out & 15u) == 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 first = make_uint4(0, 0, 0, 0);
    uint32_t epoch;
    if (V == 1) {
        if (tid < nwords) first = Wd::load(a.in, tid, a.count, in_al);
        epoch = *(volatile uint32_t *)&a.ctl[kCtaEpoch + blockIdx.x] + 1u;
    } else {
        epoch = epoch_begin(a);
    }
    const size_t half = (size_t)a.world * a.ll_slot;
    const size_t par = (size_t)(epoch & 1u) * half;

    /* 1. push my words to every peer */
    for (size_t i = tid; i < nwords; i += stride) {
        uint4 w = Wd::sanitize(V == 1 && i == tid ? first : Wd::load(a.in, i, a.count, in_al));
        for (int d = 1; d < a.world; d++) {
            int p = a.rank + d < a.world ? a.rank + d : a.rank + d - a.world;
            st_volatile16(a.ll[p] + par + (size_t)a.rank * a.ll_slot + i * 16, w);
        }
    }

    /* 2. reduce in rank order, kUnroll words in flight per thread */
    uint8_t *mine = a.ll[a.rank] + par;
    bool alive = true;
    for (size_t base = tid; base < nwords; base += (size_t)kUnroll * stride) {
        float acc[kUnroll][Wd::kElems];
        for (int r = 0; r < a.world; r++) {
            uint4 w[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                size_t i = base + (size_t)u * stride;
                if (i >= nwords) continue;
                if (r == a.rank)
                    w[u] = Wd::load(a.in, i, a.count, in_al);
                else
                    w[u] = ld_volatile16(mine + (size_t)r * a.ll_slot + i * 16);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                size_t i = base + (size_t)u * stride;
                if (i >= nwords) continue;
                if (r != a.rank) {
                    uint8_t *slot = mine + (size_t)r * a.ll_slot + i * 16;
                    Spin s;
                    while (alive && !Wd::valid(w[u])) {
                        if (!s.tick(a, 1, r)) alive = false;
                        w[u] = ld_volatile16(slot);
                    }
                    *(uint4 *)slot = make_uint4(~0u, ~0u, ~0u, ~0u);
                }
                float f[Wd::kElems];
                Wd::to_f32(w[u], f);
#pragma unroll
                for (int k = 0; k < Wd::kElems; k++) acc[u][k] = r == 0 ? f[k] : acc[u][k] + f[k];
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            size_t i = base + (size_t)u * stride;
            if (i < nwords) Wd::store(a.out, i, a.count, out_al, Wd::from_f32(acc[u]));
        }
    }
    if (V == 1) {
        __syncthreads(); /* every thread of this CTA has read the old epoch */
        if (threadIdx.x == 0) *(volatile uint32_t *)&a.ctl[kCtaEpoch + blockIdx.x] = epoch;
    } else {
        epoch_end(a, epoch);
    }
}

/* Variant 2 / 3 (PDL): same words-to-CTA map and per-CTA epochs as variant
 * 1; the first kUnroll words of every thread are loaded before the epoch
 * read and the first push, pushed with plain 16-byte stores (the copy
 * probe's), and kept in registers as the own term of the reduction; later
 * words are loaded kUnroll at a time before their pushes. */
template <int DT, bool PDL, bool VOL = false>
__global__ void __launch_bounds__(kBlock) oneshot2_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    using Wd = Word<DT>;
    if (PDL) {
        pdl_wait();
        pdl_trigger();
    }
    const size_t nwords = (a.count + Wd::kElems - 1) / Wd::kElems;
    const bool in_al = ((uintptr_t)a.in & 15u) == 0, out_al = ((uintptr_t)a.out & 15u) == 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t step = (size_t)kUnroll * stride;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint4 own[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
        size_t i = tid + (size_t)u * stride;
        own[u] = i < nwords ? Wd::load(a.in, i, a.count, in_al) : make_uint4(0, 0, 0, 0);
    }
    const uint32_t epoch = *(volatile uint32_t *)&a.ctl[kCtaEpoch + blockIdx.x] + 1u;
    const size_t half = (size_t)a.world * a.ll_slot;
    const size_t par = (size_t)(epoch & 1u) * half;
    const size_t me_off = par + (size_t)a.rank * a.ll_slot;

    /* 1. push: batch 0 from registers, later batches loaded before stored */
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
        size_t i = tid + (size_t)u * stride;
        if (i >= nwords) break;
        uint4 w = Wd::sanitize(own[u]);
        for (int d = 1; d < a.world; d++) {
            int p = a.rank + d < a.world ? a.rank + d : a.rank + d - a.world;
            if (VOL) st_volatile16(a.ll[p] + me_off + i * 16, w);
            else *(uint4 *)(a.ll[p] + me_off + i * 16) = w;
        }
    }
    for (size_t base = tid + step; base < nwords; base += step) {
        uint4 w[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            size_t i = base + (size_t)u * stride;
            if (i < nwords) w[u] = Wd::sanitize(Wd::load(a.in, i, a.count, in_al));
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            size_t i = base + (size_t)u * stride;
            if (i >= nwords) break;
            for (int d = 1; d < a.world; d++) {
                int p = a.rank + d < a.world ? a.rank + d : a.rank + d - a.world;
                if (VOL) st_volatile16(a.ll[p] + me_off + i * 16, w[u]);
                else *(uint4 *)(a.ll[p] + me_off + i * 16) = w[u];
            }
        }
    }

    /* 2. reduce in rank order (own term: registers in batch 0). The loop repeats
     * oneshot_kernel's on purpose: a shared inline helper taking `own` made ptxas
     * spill 16 bytes in three instantiations of this kernel (checked with -Xptxas -v). */
    uint8_t *mine = a.ll[a.rank] + par;
    bool alive = true;
    for (size_t base = tid; base < nwords; base += step) {
        float acc[kUnroll][Wd::kElems];
        for (int r = 0; r < a.world; r++) {
            uint4 w[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                size_t i = base + (size_t)u * stride;
                w[u] = make_uint4(0, 0, 0, 0);
                if (i >= nwords) continue;
                if (r == a.rank)
                    w[u] = base == tid ? own[u] : Wd::load(a.in, i, a.count, in_al);
                else
                    w[u] = ld_volatile16(mine + (size_t)r * a.ll_slot + i * 16);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
                size_t i = base + (size_t)u * stride;
                if (i >= nwords) continue;
                if (r != a.rank) {
                    uint8_t *slot = mine + (size_t)r * a.ll_slot + i * 16;
                    Spin s;
                    while (alive && !Wd::valid(w[u])) {
                        if (!s.tick(a, 1, r)) alive = false;
                        w[u] = ld_volatile16(slot);
                    }
                    *(uint4 *)slot = make_uint4(~0u, ~0u, ~0u, ~0u);
                }
                float f[Wd::kElems];
                Wd::to_f32(w[u], f);
#pragma unroll
                for (int k = 0; k < Wd::kElems; k++) acc[u][k] = r == 0 ? f[k] : acc[u][k] + f[k];
            }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            size_t i = base + (size_t)u * stride;
            if (i < nwords) Wd::store(a.out, i, a.count, out_al, Wd::from_f32(acc[u]));
        }
    }
    __syncthreads(); /* every thread of this CTA has read the old epoch */
    if (threadIdx.x == 0) *(volatile uint32_t *)&a.ctl[kCtaEpoch + blockIdx.x] = epoch;
}

/* V: 0..3 the variants of cuda_sync.h; 5 = variant 1's kernel with PDL,
 * 6 = variant 2's kernel with st.volatile pushes and PDL. */
template <int DT> void launch_dt(const tpm_cuda_ar_args *a, int V, int grid, cudaStream_t s) {
    switch (V) {
    case 0: oneshot_kernel<DT, 0><<<grid, kBlock, 0, s>>>(*a); break;
    case 1: oneshot_kernel<DT, 1><<<grid, kBlock, 0, s>>>(*a); break;
    case 2: launch_ar(oneshot2_kernel<DT, false>, grid, kBlock, s, false, *a); break;
    case 3: launch_ar(oneshot2_kernel<DT, true>, grid, kBlock, s, true, *a); break;
    case 5: launch_ar(oneshot_kernel<DT, 1, true>, grid, kBlock, s, true, *a); break;
    default: launch_ar(oneshot2_kernel<DT, true, true>, grid, kBlock, s, true, *a); break;
    }
}

void launch_v(const tpm_cuda_ar_args *a, int V, int grid, cudaStream_t s) {
    switch (a->dtype) {
    case TPM_DTYPE_BF16: launch_dt<0>(a, V, grid, s); break;
    case TPM_DTYPE_FP16: launch_dt<1>(a, V, grid, s); break;
    default: launch_dt<2>(a, V, grid, s); break;
    }
}

} /* namespace */
} /* namespace tpm_cuda */

extern "C" size_t tpm_cuda_oneshot_max_count(const tpm_cuda_ar_args *a) {
    size_t esize = a->dtype == TPM_DTYPE_FP32 ? 4 : 2;
    return (a->ll_slot / 16) * (16 / esize);
}

extern "C" int tpm_cuda_oneshot_launch(const tpm_cuda_ar_args *a, void *stream) {
    using namespace tpm_cuda;
    size_t epw = a->dtype == TPM_DTYPE_FP32 ? 4 : 8;
    size_t nwords = (a->count + epw - 1) / epw;
    size_t want = (nwords + kBlock - 1) / kBlock;
    int v = tpm_cuda_variant(a);
    if (v >= 4) { /* the fastest measured per size (cuda_sync.h); 5 / 6 / 7 / 8 above the cut */
        const bool small = a->count * (a->dtype == TPM_DTYPE_FP32 ? 4 : 2) <= TPM_CUDA_V4_ONESHOT_PDL_MAX;
        v = small ? 3 : v == 4 ? 1 : v >= 7 ? 5 : v;
    }
    size_t cap = (size_t)a->grid;
    if (v >= 1 && cap > (size_t)kMaxCtas) cap = (size_t)kMaxCtas; /* one epoch word per CTA */
    int grid = (int)(want < cap ? want : cap);
    if (grid < 1) grid = 1;
    launch_v(a, v, grid, (cudaStream_t)stream);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(oneshot, (tpm_cuda::oneshot_kernel<0, 0>))
