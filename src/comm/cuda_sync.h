/*
 * cuda_sync.h - device-side helpers shared by the all-reduce kernels (CUDA
 * only): system-scope release/acquire flags, volatile 16-byte accesses,
 * bounded spins on %globaltimer that end by writing the host-mapped error
 * word, the launch epoch, and bf16/fp16/fp32 vectors of 8 values.
 *
 * Memory ordering used by the kernels:
 *  - flags: writers store payload, __syncthreads(), then one thread issues
 *    st.release.sys (cumulative over the CTA's stores that the barrier
 *    ordered before it); readers spin with ld.acquire.sys, then
 *    __syncthreads() before any thread reads the payload.
 *  - packets (one-shot): every 16-byte word carries its own validity (no
 *    all-ones element); readers poll with ld.volatile, no fence needed.
 */
#ifndef TPM_CUDA_SYNC_H
#define TPM_CUDA_SYNC_H

#ifndef __CUDACC__
#error "cuda_sync.h is CUDA-only"
#endif

#include "comm/cuda_comm.h"
#include "numeric.h"
#include "tpmoe.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

/* The default kernel set (src/core/config.c) is 5, the fastest measured
 * kernel per size range: variant 3's kernels everywhere except the
 * one-shot above 256 KB, where variant 1's kernel launched with PDL is
 * faster (bench/results/r5/bench_allreduce_vars.log; round 4 chose 4, the
 * same without PDL there; round 3's default was 1). Variants 4-6: one-shot
 * messages up to this many bytes use variant 3's kernel. */
#define TPM_CUDA_V4_ONESHOT_PDL_MAX (256u * 1024u)

namespace tpm_cuda {

/* MARK: raw accesses */
__device__ __forceinline__ uint64_t globaltimer() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *p) {
    uint32_t v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release_sys(uint32_t *p, uint32_t v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ uint4 ld_volatile16(const void *p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}

__device__ __forceinline__ void st_volatile16(void *p, uint4 v) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w)
                 : "memory");
}

/* Streaming 16-byte load of data read once (input, local payload). */
__device__ __forceinline__ uint4 ld_stream16(const void *p) {
    uint4 v;
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* MARK: bounded waits */
/* A spin that gives up after timeout_ns: tick() returns false once expired
 * and records the failure in the host-mapped error words. */
struct Spin {
    uint64_t start;
    uint32_t n;
    __device__ __forceinline__ Spin() : start(0), n(0) {}
    __device__ __forceinline__ bool tick(const tpm_cuda_ar_args &a, int stage, int peer) {
        if ((++n & 255u) != 0) return true;
        uint64_t now = globaltimer();
        volatile uint32_t *e = a.err;
        if (start == 0) {
            /* a kernel of this rank already gave up (the communicator is unusable): the
             * launches queued behind it (a graph's, say) leave at once instead of each
             * waiting out the timeout again */
            if (e[TPM_CUDA_ERR_CODE] != 0) return false;
            start = now;
        }
        if (now - start <= a.timeout_ns) return true;
        e[TPM_CUDA_ERR_STAGE] = (uint32_t)stage;
        e[TPM_CUDA_ERR_PEER] = (uint32_t)peer;
        __threadfence_system();
        e[TPM_CUDA_ERR_CODE] = (uint32_t)TPM_ERR_TIMEOUT;
        __threadfence_system();
        return false;
    }
};

/* Wait until *flag reaches epoch (flags only grow; wrap-safe compare). */
__device__ __forceinline__ bool wait_flag(const tpm_cuda_ar_args &a, const uint32_t *flag,
                                          uint32_t epoch, int stage, int peer) {
    Spin s;
    while ((int32_t)(ld_acquire_sys(flag) - epoch) < 0)
        if (!s.tick(a, stage, peer)) return false;
    return true;
}

/* MARK: launch epoch */
/* Every CTA reads the sequence at entry; the last CTA to leave stores the
 * new value, so the next launch (stream-ordered after this one) sees it. */
__device__ __forceinline__ uint32_t epoch_begin(const tpm_cuda_ar_args &a) {
    __shared__ uint32_t e;
    if (threadIdx.x == 0) e = *(volatile uint32_t *)&a.ctl[0] + 1u;
    __syncthreads();
    return e;
}

/* reset (optional): a control word of this launch that the last CTA out
 * zeroes for the next one (the two-shots' work counter, ctl[2]). */
__device__ __forceinline__ void epoch_end(const tpm_cuda_ar_args &a, uint32_t epoch, uint32_t *reset = nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(&a.ctl[1], 1u) == gridDim.x - 1) {
            a.ctl[1] = 0;
            if (reset) *reset = 0;
            *(volatile uint32_t *)&a.ctl[0] = epoch;
            __threadfence();
        }
    }
}

/* MARK: kernel variant */
/* Which kernels the launchers enqueue (a.variant = the communicator's
 * resolved cuda_kernels, from TPMOE_CUDA_AR_VARIANT; config.c is the one
 * reader of the environment and the value is in the config hash, so every
 * rank runs the same set): 0 = the round-2 kernels, 1 = round 3 (FastCodec
 * arithmetic in the codec two-shot, per-CTA epochs in the one-shot), 2 =
 * round 4 (one-shot: all of a thread's first words loaded before the first
 * push, own words kept in registers, plain stores; two-shot at world 2:
 * every load of a pipeline step issued before its compute, one barrier per
 * step), 3 = variant 2 launched with programmatic dependent launch, 4 = per
 * size the fastest of those measured (variant 3, except the one-shot above
 * TPM_CUDA_V4_ONESHOT_PDL_MAX: variant 1), 5 = 4 with variant 1's one-shot
 * also launched with PDL, 6 = 4 with variant 2's one-shot pushing with
 * st.volatile (as variant 1) and PDL above that size, 7 = 5 with the world-2
 * two-shot's reduce and gather two pipeline steps behind its scatter
 * (cuda_twoshot.cu, LAG), 8 = 5 with the world-2 exact two-shot over
 * registered buffers where the call's in/out are registered
 * (tpm_cuda_comm_register_io; twoshot_reg_kernel), 9 = 5 with the world-2
 * two-shot's scatter, reduce and gather in warp-specialized roles of one
 * CTA per SM (cuda_twoshot_ws.cu), 10 = 5 with set 9's two-shot where it
 * measured faster (exact, INT8, INT6 over bf16 / fp16 from
 * TPM_CUDA_WS_MIN_BYTES; cuda_twoshot.cu ws_pays) and, at world 2, the
 * codec calls for which set 19's kernel measured faster on that kernel
 * (tpm_cuda_twoshot_set: INT4, INT6, their rotated forms, INT8 from 4 MB;
 * the default), 11, 12 and
 * 14-18 = 10 (retired experiments of rounds 6-8 in docs/allreduce_cuda_rounds.md,
 * measured slower or no faster; cuda_twoshot_ws.cu and the docs say what
 * they were), 13 =
 * 10 with streaming cache hints (ld.global.cs on the input, st.global.cs on
 * the output) in set 9's kernel (measured no gain), 19 = 10 with every
 * two-shot launch (any world, dtype, codec) on the flag-free kernel of
 * cuda_twoshot_ll.cu (payload words carry their own ready marker; no
 * system-scope release per column). Variants 1-19 share the
 * one-shot's per-CTA epochs and word-to-CTA map, so a process may
 * switch between them (tpm_cuda_comm_set_variant) at a point where every
 * rank's stream is idle (the benchmark's --variants does: every packet slot
 * is back to all-ones then). A diagnostic switch for the benchmark and the
 * GPU tests, not a tuning knob. */
inline int tpm_cuda_variant(const tpm_cuda_ar_args *a) { return a->variant; }

/* Set 10: a launch of at least this many bytes (16-bit dtypes) runs set 9's
 * two-shot. Measured (bench/results/r40, bf16, set 9 / set 5 two-shot, us):
 * exact 8 MB 33.7 / 33.0, 16 MB 55.6 / 59.9; INT8 8 MB 26.4 / 24.7, 16 MB
 * 40.8 / 42.8; INT6 8 MB 22.9 / 21.7, 16 MB 38.1 / 38.7. */
#define TPM_CUDA_WS_MIN_BYTES ((size_t)16 << 20)

/* MARK: programmatic dependent launch (variant 3) */
/* A kernel launched with programmatic stream serialization (launch_pdl)
 * may start while the kernel before it on the stream is still running:
 * pdl_wait() blocks until that kernel has finished and its memory is
 * visible (call it before touching anything: input, control words);
 * pdl_trigger() lets the next kernel start its launch now. */
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

/* Launch k<<<grid, block, 0, s>>>(a), with programmatic stream
 * serialization when pdl (the kernel must then start with pdl_wait()) and
 * the ranks do not share a GPU (a.no_pdl: one launch per rank resident at a
 * time, so every rank's launch fits beside the others'; without the
 * attribute griddepcontrol.wait returns at once). */
template <typename K>
inline cudaError_t launch_ar(K k, int grid, int block, cudaStream_t s, bool pdl,
                             const tpm_cuda_ar_args &a) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)block);
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl && !a.no_pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, a);
}

/* MARK: 8-value vectors */
struct F8 {
    float v[8];
};

/* Load elements [i, i+8) of a dtype array as floats; elements >= n read 0.
 * aligned: the whole 8-element group may be read with vector loads. */
template <int DT>
__device__ __forceinline__ F8 load8(const void *p, size_t i, size_t n, bool aligned) {
    F8 r;
    if (aligned && i + 8 <= n) {
        if (DT == 2) {
            const float4 *q = (const float4 *)((const float *)p + i);
            float4 x = q[0], y = q[1];
            r.v[0] = x.x; r.v[1] = x.y; r.v[2] = x.z; r.v[3] = x.w;
            r.v[4] = y.x; r.v[5] = y.y; r.v[6] = y.z; r.v[7] = y.w;
        } else {
            uint4 x = *(const uint4 *)((const uint16_t *)p + i);
            uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint16_t lo = (uint16_t)(w[k] & 0xffffu), hi = (uint16_t)(w[k] >> 16);
                r.v[2 * k] = DT == 0 ? tpm_bf16_to_f32(lo) : tpm_fp16_to_f32(lo);
                r.v[2 * k + 1] = DT == 0 ? tpm_bf16_to_f32(hi) : tpm_fp16_to_f32(hi);
            }
        }
        return r;
    }
#pragma unroll
    for (int k = 0; k < 8; k++) r.v[k] = (i + k < n) ? tpm_load_f32(p, DT, i + k) : 0.0f;
    return r;
}

template <int DT, bool CS = false>
__device__ __forceinline__ void store8(void *p, size_t i, size_t n, bool aligned, const F8 &r) {
    if (aligned && i + 8 <= n) {
        if (DT == 2) {
            float4 *q = (float4 *)((float *)p + i);
            if (CS) {
                __stcs(q, make_float4(r.v[0], r.v[1], r.v[2], r.v[3]));
                __stcs(q + 1, make_float4(r.v[4], r.v[5], r.v[6], r.v[7]));
            } else {
                q[0] = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
                q[1] = make_float4(r.v[4], r.v[5], r.v[6], r.v[7]);
            }
        } else {
            uint32_t w[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                uint16_t lo = DT == 0 ? tpm_f32_to_bf16(r.v[2 * k]) : tpm_f32_to_fp16(r.v[2 * k]);
                uint16_t hi = DT == 0 ? tpm_f32_to_bf16(r.v[2 * k + 1])
                                      : tpm_f32_to_fp16(r.v[2 * k + 1]);
                w[k] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
            if (CS)
                __stcs((uint4 *)((uint16_t *)p + i), make_uint4(w[0], w[1], w[2], w[3]));
            else
                *(uint4 *)((uint16_t *)p + i) = make_uint4(w[0], w[1], w[2], w[3]);
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (i + k < n) tpm_store_f32(p, DT, i + k, r.v[k]);
}

/* MARK: 16-byte words of raw dtype elements */
/* Elements of dtype DT per 16-byte word. */
template <int DT> struct Word {
    static constexpr int kElems = DT == 2 ? 4 : 8;
    static constexpr int kSize = DT == 2 ? 4 : 2;

    /* True when no element is the all-ones sentinel. */
    static __device__ __forceinline__ bool valid(uint4 w) {
        uint32_t x[4] = {w.x, w.y, w.z, w.w};
        bool ok = true;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (DT == 2)
                ok &= x[k] != 0xffffffffu;
            else
                ok &= (x[k] & 0xffffu) != 0xffffu && (x[k] >> 16) != 0xffffu;
        }
        return ok;
    }

    static __device__ __forceinline__ uint4 sanitize(uint4 w) {
        uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (DT == 2) {
                if (x[k] == 0xffffffffu) x[k] = 0x7fc00000u;
            } else {
                const uint32_t qnan = DT == 0 ? 0x7fc0u : 0x7e00u;
                if ((x[k] & 0xffffu) == 0xffffu) x[k] = (x[k] & 0xffff0000u) | qnan;
                if ((x[k] >> 16) == 0xffffu) x[k] = (x[k] & 0xffffu) | (qnan << 16);
            }
        }
        return make_uint4(x[0], x[1], x[2], x[3]);
    }

    static __device__ __forceinline__ void to_f32(uint4 w, float *f) {
        uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (DT == 2) {
                f[k] = __uint_as_float(x[k]);
            } else {
                uint16_t lo = (uint16_t)(x[k] & 0xffffu), hi = (uint16_t)(x[k] >> 16);
                f[2 * k] = DT == 0 ? tpm_bf16_to_f32(lo) : tpm_fp16_to_f32(lo);
                f[2 * k + 1] = DT == 0 ? tpm_bf16_to_f32(hi) : tpm_fp16_to_f32(hi);
            }
        }
    }

    static __device__ __forceinline__ uint4 from_f32(const float *f) {
        uint32_t x[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            if (DT == 2) {
                x[k] = __float_as_uint(f[k]);
            } else {
                uint16_t lo = DT == 0 ? tpm_f32_to_bf16(f[2 * k]) : tpm_f32_to_fp16(f[2 * k]);
                uint16_t hi =
                    DT == 0 ? tpm_f32_to_bf16(f[2 * k + 1]) : tpm_f32_to_fp16(f[2 * k + 1]);
                x[k] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
        }
        return make_uint4(x[0], x[1], x[2], x[3]);
    }

    /* Word i of an array of n elements; elements past n read as zero. */
    /* CS: streaming cache hint (ld.global.cs / st.global.cs) on the vector path */
    template <bool CS = false>
    static __device__ __forceinline__ uint4 load(const void *p, size_t i, size_t n, bool aligned) {
        size_t e0 = i * kElems;
        if (aligned && e0 + kElems <= n) return CS ? __ldcs((const uint4 *)p + i) : *((const uint4 *)p + i);
        uint32_t x[4] = {0, 0, 0, 0};
#pragma unroll
        for (int k = 0; k < kElems; k++) {
            if (e0 + k >= n) break;
            if (DT == 2)
                x[k] = ((const uint32_t *)p)[e0 + k];
            else
                x[k / 2] |= (uint32_t)((const uint16_t *)p)[e0 + k] << (16 * (k & 1));
        }
        return make_uint4(x[0], x[1], x[2], x[3]);
    }

    template <bool CS = false>
    static __device__ __forceinline__ void store(void *p, size_t i, size_t n, bool aligned,
                                                 uint4 w) {
        size_t e0 = i * kElems;
        if (aligned && e0 + kElems <= n) {
            if (CS)
                __stcs((uint4 *)p + i, w);
            else
                *((uint4 *)p + i) = w;
            return;
        }
        uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < kElems; k++) {
            if (e0 + k >= n) break;
            if (DT == 2)
                ((uint32_t *)p)[e0 + k] = x[k];
            else
                ((uint16_t *)p)[e0 + k] = (uint16_t)(x[k / 2] >> (16 * (k & 1)));
        }
    }
};

} /* namespace tpm_cuda */
#endif /* TPM_CUDA_SYNC_H */
