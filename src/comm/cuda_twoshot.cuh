/*
 * cuda_twoshot.cuh - the pieces the two-shot kernels share (CUDA only,
 * included by cuda_twoshot.cu and cuda_twoshot_ws.cu): the column payload
 * layout, the per-launch context (owner ranges, slots, flags), the codec
 * group I/O, the stages A / B / C of one column, and a group's raw input
 * words. cuda_twoshot.cu's top comment has the algorithm and the
 * synchronisation; everything here sits in an anonymous namespace, so each
 * translation unit has its own copy (only the launchers cross files).
 */
#ifndef TPM_CUDA_TWOSHOT_CUH
#define TPM_CUDA_TWOSHOT_CUH

#include "codec/codec_cuda.h"
#include "comm/cuda_sync.h"

#include <cuda_runtime.h>

#include <type_traits>

namespace tpm_cuda {
namespace {

constexpr int kCol = 256; /* groups per column = threads per CTA */
static_assert(kCol * 32 == TPM_CUDA_TS_COL_ELEMS, "column size mismatch");

constexpr int kWU = 4; /* exact: 16-byte words per thread in flight */

enum { kRs = 0, kAg = 1 };

/* Bytes of one column's payload. */
template <int DT, int C> struct Payload {
    static constexpr size_t kBytes = (size_t)kCol * 32 * (DT == 2 ? 4 : 2);
};
template <int DT> struct Payload<DT, TPM_CODEC_INT6> {
    static constexpr int kUnit = 8, kUnits = 3;
    static constexpr size_t kBytes = (size_t)kCol * (24 + 2);
};
template <int DT> struct Payload<DT, TPM_CODEC_INT6_H> : Payload<DT, TPM_CODEC_INT6> {};
template <int DT> struct Payload<DT, TPM_CODEC_INT4> {
    static constexpr int kUnit = 16, kUnits = 1;
    static constexpr size_t kBytes = (size_t)kCol * (16 + 2);
};
template <int DT> struct Payload<DT, TPM_CODEC_INT4_H> : Payload<DT, TPM_CODEC_INT4> {};
template <int DT> struct Payload<DT, TPM_CODEC_INT8> {
    static constexpr int kUnit = 16, kUnits = 2;
    static constexpr size_t kBytes = (size_t)kCol * (32 + 2);
};
template <int DT> struct Payload<DT, TPM_CODEC_FP8> : Payload<DT, TPM_CODEC_INT8> {};

struct Ctx {
    const tpm_cuda_ar_args &a; /* the __grid_constant__ kernel parameter */
    uint32_t epoch;
    int par;
    size_t ngrp, sblk;
    bool in_al, out_al;

    /* The launch's context (epoch_begin: a CTA-wide barrier) and how many
     * columns this CTA runs: b, b + grid, ... below the segment's columns. */
    static __device__ Ctx begin(const tpm_cuda_ar_args &a, int &mine) {
        Ctx x{a, 0, 0, 0, 0, false, false};
        x.epoch = epoch_begin(a);
        x.par = (int)(x.epoch & 1u);
        x.ngrp = (a.count + 31) / 32;
        x.in_al = ((uintptr_t)a.in & 15u) == 0;
        x.out_al = ((uintptr_t)a.out & 15u) == 0;
        x.sblk = (x.ngrp + a.world - 1) / a.world;
        const int ncol = x.ncols();
        mine = (int)blockIdx.x < ncol ? (ncol - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
        return x;
    }
    /* Columns of one owner's segment (of count elements over world ranks). */
    __device__ int ncols() const { return (int)((sblk + kCol - 1) / kCol); }
    static __device__ int ncols_of(size_t count, int world) {
        const size_t ngrp = (count + 31) / 32, sblk = (ngrp + world - 1) / world;
        return (int)((sblk + kCol - 1) / kCol);
    }
    /* Owner r's first group: segments of sblk = ceil(ngrp/W) groups, like the
     * CPU communicator (the last ones may be short or empty). */
    __device__ size_t glo(int r) const {
        size_t g = (size_t)r * sblk;
        return g < ngrp ? g : ngrp;
    }
    __device__ uint8_t *slot(int rank, int kind, int src) const {
        return a.ts[rank] + ((size_t)par * 2 * a.world + (size_t)kind * a.world + src) * a.ts_slot;
    }
    __device__ uint32_t *flag(int rank, int kind, int src, int col) const {
        return a.flags[rank] +
               (((size_t)kind * 2 + par) * TPM_CUDA_MAX_WORLD + src) * TPM_CUDA_TS_MAX_COLS + col;
    }
    /* Release flag (kind, src=me, col) at every peer, after the CTA's stores. */
    __device__ void signal(int kind, int col) const {
        __syncthreads();
        if (threadIdx.x < (unsigned)a.world - 1) {
            int q = (a.rank + 1 + (int)threadIdx.x) % a.world;
            st_release_sys(flag(q, kind, a.rank, col), epoch);
        }
    }
    /* Acquire flag (kind, src, col) of every peer in my memory. */
    __device__ bool wait_all(int kind, int col) const {
        bool ok = true;
        if (threadIdx.x < (unsigned)a.world - 1) {
            int src = (a.rank + 1 + (int)threadIdx.x) % a.world;
            ok = wait_flag(a, flag(a.rank, kind, src, col), epoch, kind == kRs ? 2 : 3, src);
        }
        return __syncthreads_and(ok) != 0;
    }
};

/* Two floats as one 32-bit word of bf16 (DT 0) or fp16 (DT 1), lo first,
 * rounded to nearest even. */
template <int DT> __device__ __forceinline__ uint32_t cvt_pack2(float lo, float hi) {
    uint32_t r;
    if (DT == 0) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* MARK: codec groups (one thread = one block of 32) */
template <int DT, int C> struct GroupIO {
    using P = Payload<DT, C>;
    using BC = BlockCodec<C>;
    static_assert(P::kUnits * P::kUnit == BC::kCodeBytes, "payload units cover the codes");

    static __device__ __forceinline__ void load_dom(const Ctx &x, size_t g, float *v) {
        if (x.in_al && (g + 1) * 32 <= x.a.count) { /* the whole group: one bounds check */
            const uint4 *p = (const uint4 *)((const uint8_t *)x.a.in + g * 32 * (DT == 2 ? 4 : 2));
            uint4 u[DT == 2 ? 8 : 4];
#pragma unroll
            for (int k = 0; k < (DT == 2 ? 8 : 4); k++) u[k] = p[k];
#pragma unroll
            for (int k = 0; k < (DT == 2 ? 8 : 4); k++) Word<DT>::to_f32(u[k], v + k * Word<DT>::kElems);
        } else {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                F8 f = load8<DT>(x.a.in, g * 32 + 8 * q, x.a.count, x.in_al);
#pragma unroll
                for (int k = 0; k < 8; k++) v[8 * q + k] = f.v[k];
            }
        }
        if constexpr (BC::kRotate) tpm_hadamard32(v);
    }
    template <bool CS = false> static __device__ __forceinline__ void store_dom(const Ctx &x, size_t g, float *v) {
        if constexpr (BC::kRotate) tpm_hadamard32(v);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            F8 f;
#pragma unroll
            for (int k = 0; k < 8; k++) f.v[k] = v[8 * q + k];
            store8<DT, CS>(x.a.out, g * 32 + 8 * q, x.a.count, x.out_al, f);
        }
    }
    /* Store a group decoded by dequant_raw with scale bits sb. A whole,
     * aligned group of 16-bit outputs converts with cvt.rn.{bf16,f16}x2 (two
     * values per instruction; round to nearest even like tpm_f32_to_bf16 /
     * tpm_f32_to_fp16, which agree on every non-NaN value, and a decoded
     * block that is not poisoned has no NaN); a poisoned block gets the
     * canonical NaN that dequant writes, then the generic store. */
    template <bool CS = false>
    static __device__ __forceinline__ void store_codec(const Ctx &x, size_t g, float *v, uint16_t sb) {
        const bool bad = tpm_codec_scale_poisoned(sb);
        if constexpr (!BC::kRotate && DT != 2) {
            if (!bad && x.out_al && (g + 1) * 32 <= x.a.count) {
                uint4 *p = (uint4 *)((uint16_t *)x.a.out + g * 32);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    uint32_t w[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) w[k] = cvt_pack2<DT>(v[8 * q + 2 * k], v[8 * q + 2 * k + 1]);
                    const uint4 u = make_uint4(w[0], w[1], w[2], w[3]);
                    if (CS) __stcs(p + q, u);
                    else p[q] = u;
                }
                return;
            }
        }
        if (bad) {
#pragma unroll
            for (int i = 0; i < 32; i++) v[i] = __uint_as_float(TPM_CODEC_NAN_BITS);
        }
        store_dom<CS>(x, g, v);
    }
    static __device__ __forceinline__ void put(uint8_t *col, int t, const Codes &c, uint16_t s) {
#pragma unroll
        for (int k = 0; k < P::kUnits; k++) {
            if (P::kUnit == 16)
                *(uint4 *)(col + ((size_t)k * kCol + t) * 16) =
                    make_uint4(c.w[4 * k], c.w[4 * k + 1], c.w[4 * k + 2], c.w[4 * k + 3]);
            else
                *(uint2 *)(col + ((size_t)k * kCol + t) * 8) = make_uint2(c.w[2 * k], c.w[2 * k + 1]);
        }
        *(uint16_t *)(col + (size_t)P::kUnits * kCol * P::kUnit + (size_t)t * 2) = s;
    }
    static __device__ __forceinline__ uint16_t get(const uint8_t *col, int t, Codes &c) {
#pragma unroll
        for (int k = 0; k < P::kUnits; k++) {
            if (P::kUnit == 16) {
                uint4 u = __ldcg((const uint4 *)(col + ((size_t)k * kCol + t) * 16));
                c.w[4 * k] = u.x, c.w[4 * k + 1] = u.y, c.w[4 * k + 2] = u.z, c.w[4 * k + 3] = u.w;
            } else {
                uint2 u = __ldcg((const uint2 *)(col + ((size_t)k * kCol + t) * 8));
                c.w[2 * k] = u.x, c.w[2 * k + 1] = u.y;
            }
        }
        return __ldcg((const unsigned short *)(col + (size_t)P::kUnits * kCol * P::kUnit +
                                               (size_t)t * 2));
    }
};

template <int DT, int C, int V> struct Stages {
    /* V = 0: FmtCodec arithmetic, 1: FastCodec (same bits, no conversion-pipe ops) */
    using BCd = typename std::conditional<V == 1, FastBlockCodec<C>, BlockCodec<C>>::type;
    using P = Payload<DT, C>;
    using Wd = Word<DT>;
    using IO = GroupIO<DT, C>;
    static constexpr bool kExact = C == TPM_CODEC_NONE;

    /* Quantize a group of my input (the scatter): 16-bit inputs widened to
     * f32 have their low 5 bits zero (unless rotated), so quant_lz. */
    static __device__ __forceinline__ uint16_t quant_in(const float *v, Codes &c) {
        if constexpr (DT != 2 && !BCd::kRotate) return BCd::quant_lz(v, c);
        else return BCd::quant(v, c);
    }

    /* Word range [w0, w1) (exact) or group range [g0, g1) of (owner, col). */
    static __device__ void range(const Ctx &x, int owner, int col, size_t &g0, size_t &g1) {
        size_t lo = x.glo(owner), hi = x.glo(owner + 1);
        g0 = lo + (size_t)col * kCol;
        g1 = g0 + kCol < hi ? g0 + kCol : hi;
    }
    static __device__ void words(const Ctx &x, size_t g0, size_t g1, size_t &w0, size_t &w1) {
        size_t e1 = g1 * 32 < x.a.count ? g1 * 32 : x.a.count;
        w0 = g0 * 32 / Wd::kElems;
        w1 = (e1 + Wd::kElems - 1) / Wd::kElems;
        if (w1 < w0) w1 = w0;
    }

    static __device__ void stage_a(const Ctx &x, int col) {
        const int t = threadIdx.x;
        for (int d = 1; d < x.a.world; d++) {
            int s = (x.a.rank + d) % x.a.world;
            size_t g0, g1;
            range(x, s, col, g0, g1);
            uint8_t *dst = x.slot(s, kRs, x.a.rank) + (size_t)col * P::kBytes;
            if constexpr (kExact) {
                size_t w0, w1;
                words(x, g0, g1, w0, w1);
                for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        size_t w = b + (size_t)k * kCol;
                        if (w < w1) u[k] = Wd::load(x.a.in, w, x.a.count, x.in_al);
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        size_t w = b + (size_t)k * kCol;
                        if (w < w1) *(uint4 *)(dst + (w - w0) * 16) = u[k];
                    }
                }
            } else {
                if (g0 + t < g1) {
                    float v[32];
                    IO::load_dom(x, g0 + t, v);
                    Codes c;
                    uint16_t sc = quant_in(v, c);
                    IO::put(dst, t, c, sc);
                }
            }
        }
        x.signal(kRs, col);
    }

    static __device__ bool stage_b(const Ctx &x, int col) {
        const int t = threadIdx.x, me = x.a.rank;
        if (!x.wait_all(kRs, col)) return false;
        size_t g0, g1;
        range(x, me, col, g0, g1);
        const size_t off = (size_t)col * P::kBytes;
        if constexpr (kExact) {
            size_t w0, w1;
            words(x, g0, g1, w0, w1);
            for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                float acc[kWU][Wd::kElems];
                for (int r = 0; r < x.a.world; r++) {
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        size_t w = b + (size_t)k * kCol;
                        u[k] = make_uint4(0, 0, 0, 0);
                        if (w >= w1) continue;
                        u[k] = r == me ? Wd::load(x.a.in, w, x.a.count, x.in_al)
                                       : __ldcg((const uint4 *)(x.slot(me, kRs, r) + off +
                                                                (w - w0) * 16));
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        float f[Wd::kElems];
                        Wd::to_f32(u[k], f);
#pragma unroll
                        for (int e = 0; e < Wd::kElems; e++)
                            acc[k][e] = r == 0 ? f[e] : acc[k][e] + f[e];
                    }
                }
#pragma unroll
                for (int k = 0; k < kWU; k++) {
                    size_t w = b + (size_t)k * kCol;
                    if (w >= w1) continue;
                    uint4 res = Wd::from_f32(acc[k]);
                    for (int d = 1; d < x.a.world; d++) {
                        int q = (me + d) % x.a.world;
                        *(uint4 *)(x.slot(q, kAg, me) + off + (w - w0) * 16) = res;
                    }
                    Wd::store(x.a.out, w, x.a.count, x.out_al, res);
                }
            }
        } else if (g0 + t < g1) {
            reduce_group(x, g0 + t, off);
        }
        x.signal(kAg, col);
        return true;
    }

    /* acc += v, the world-2 sum of a codec group: a + b == b + a in IEEE
     * arithmetic, so adding the peer's term to mine gives the rank-order
     * sum's bits on both ranks (cuda_twoshot_ll.cu's world-2 path). */
    static __device__ __forceinline__ void sum2(float *acc, const float *v) {
#pragma unroll
        for (int k = 0; k < 32; k++) acc[k] += v[k];
    }

    /* Stage B of one codec group: sum, re-quantize, push, decode my own. */
    static __device__ void reduce_group(const Ctx &x, size_t g, size_t off) {
        const int t = threadIdx.x, me = x.a.rank;
        {
            float acc[32], v[32];
            Codes c;
            for (int r = 0; r < x.a.world; r++) {
                if (r == me) {
                    IO::load_dom(x, g, v);
                } else {
                    uint16_t sc = IO::get(x.slot(me, kRs, r) + off, t, c);
                    BCd::dequant_raw(c, sc, v);
                }
#pragma unroll
                for (int k = 0; k < 32; k++) acc[k] = r == 0 ? v[k] : acc[k] + v[k];
            }
            uint16_t sc = BCd::quant(acc, c);
            for (int d = 1; d < x.a.world; d++) {
                int q = (me + d) % x.a.world;
                IO::put(x.slot(q, kAg, me) + off, t, c, sc);
            }
            BCd::dequant_raw(c, sc, v);
            IO::store_codec(x, g, v, sc);
        }
    }

    static __device__ bool stage_c(const Ctx &x, int col) {
        const int t = threadIdx.x;
        if (!x.wait_all(kAg, col)) return false;
        const size_t off = (size_t)col * P::kBytes;
        for (int d = 1; d < x.a.world; d++) {
            int s = (x.a.rank + d) % x.a.world;
            size_t g0, g1;
            range(x, s, col, g0, g1);
            const uint8_t *src = x.slot(x.a.rank, kAg, s) + off;
            if constexpr (kExact) {
                size_t w0, w1;
                words(x, g0, g1, w0, w1);
                for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        size_t w = b + (size_t)k * kCol;
                        if (w < w1) u[k] = __ldcg((const uint4 *)(src + (w - w0) * 16));
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        size_t w = b + (size_t)k * kCol;
                        if (w < w1) Wd::store(x.a.out, w, x.a.count, x.out_al, u[k]);
                    }
                }
            } else if (g0 + t < g1) {
                Codes c;
                float v[32];
                uint16_t sc = IO::get(src, t, c);
                BCd::dequant_raw(c, sc, v);
                IO::store_codec(x, g0 + t, v, sc);
            }
        }
        return true;
    }
};


/* A group of 32 input elements as raw 16-byte words, loaded early; fast =
 * aligned and whole (else the compute falls back to load_dom). */
template <int DT> struct RawGroup {
    static constexpr int kN = DT == 2 ? 8 : 4;
    uint4 w[kN];
    bool fast;
    template <bool CS = false> __device__ __forceinline__ void load(const Ctx &x, size_t g, bool valid) {
        fast = valid && x.in_al && (g + 1) * 32 <= x.a.count;
        if (!fast) return;
        const uint4 *p = (const uint4 *)((const uint8_t *)x.a.in + g * 32 * (DT == 2 ? 4 : 2));
#pragma unroll
        for (int k = 0; k < kN; k++) w[k] = CS ? __ldcs(p + k) : p[k];
    }
    template <bool kRotate> __device__ __forceinline__ void dom(const Ctx &x, size_t g, float *v) const {
        if (!fast) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                F8 f = load8<DT>(x.a.in, g * 32 + 8 * q, x.a.count, x.in_al);
#pragma unroll
                for (int k = 0; k < 8; k++) v[8 * q + k] = f.v[k];
            }
        } else {
#pragma unroll
            for (int k = 0; k < kN; k++) Word<DT>::to_f32(w[k], v + k * Word<DT>::kElems);
        }
        if constexpr (kRotate) tpm_hadamard32(v);
    }
};

} /* namespace */

/* The warp-specialized two-shot (cuda_twoshot_ws.cu) for set `set` (9 or
 * 13) at world 2: 0 on a launch, -1 for a set it does not run. */
int twoshot_ws_launch(const tpm_cuda_ar_args *a, int grid, cudaStream_t s, int set);
/* The flag-free two-shot of set 19 (cuda_twoshot_ll.cu), any world, dtype and
 * codec: 0 on a launch. Its column payload is larger for the codecs (one
 * tagged word more per group): twoshot_ll_payload_bytes. */
int twoshot_ll_launch(const tpm_cuda_ar_args *a, int grid, cudaStream_t s);
size_t twoshot_ll_payload_bytes(int dtype, int codec);

} /* namespace tpm_cuda */
#endif /* TPM_CUDA_TWOSHOT_CUH */
