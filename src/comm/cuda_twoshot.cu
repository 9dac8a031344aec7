/*
 * cuda_twoshot.cu - two-shot all-reduce over peer memory: reduce-scatter to
 * segment owners, then all-gather, exact (bf16/fp16/fp32) or with a block
 * codec (INT8/INT6/INT4/FP8/INT4_H/INT6_H) fused into the transfers.
 *
 * Work split: the message is cut into groups of 32 elements (= codec
 * blocks); owner r gets groups [r*ngrp/W, (r+1)*ngrp/W). Each owner segment
 * is cut into columns of kCol groups (one CTA step, one group per thread;
 * exact payloads move as 16-byte words, kWU = 4 per thread loaded before the
 * first is stored);
 * column c of every segment is handled by CTA c % gridDim on every rank. A
 * CTA runs its columns as a three-stage software pipeline:
 *   A(c)   for every owner s != me: my input of (s, c) -> [rotate, quantize]
 *          -> owner s's rs slot [me]; then release flag rs[me][c] at s.
 *   B(c-1) I own (me, c-1): acquire rs flags of all peers; sum the W terms in
 *          fp32 in rank order 0..W-1 (my own term exact, the peers' terms
 *          dequantized); [re-quantize]; push the result into every peer's ag
 *          slot [me]; release ag flag [me][c-1] at each peer; write my own
 *          output from the pushed bytes ([dequantize, rotate back]).
 *   C(c-2) acquire ag flags of every owner; read the owners' results from my
 *          ag slots; [dequantize, rotate back]; write my output.
 * Codec arithmetic: BlockCodec (variant 0) or FastBlockCodec (variants
 * 1-4; tpm_cuda_variant in cuda_sync.h), identical bits. Variants 2-4 at
 * world 2 run the same pipeline with a step's loads first and one barrier
 * per step (twoshot2_kernel, below). Set 9 at world 2, and the default set
 * 10 for exact / INT8 / INT6 launches from 16 MiB, run A, B and C in
 * different warps of one CTA per SM instead (twoshot_ws_kernel, below).
 * Every rank decodes the same bytes with the same code, so outputs are
 * bitwise identical on every rank and equal to the CPU communicator, whose
 * per-block arithmetic (codec_cuda.h) is the same.
 *
 * Payload layout in a slot (internal; not the public wire format): per
 * column, the code words of the kCol groups unit-major (unit k of group g at
 * (k*kCol + g)*U, U = 16 or 8 bytes, so a warp's stores are contiguous), then
 * the kCol bf16 scales. Exact payloads are the raw dtype words.
 *
 * Synchronisation: flags hold the launch epoch and only grow (no reset); a
 * writer CTA stores its payload, __syncthreads(), then one thread per
 * destination issues st.release.sys; a reader thread spins with
 * ld.acquire.sys (bounded by %globaltimer, TPM_ERR_TIMEOUT into the
 * host-mapped error words), then __syncthreads() before the CTA reads.
 * Halves of every region alternate with the epoch parity (see cuda_comm.h).
 */
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

/* MARK: codec groups (one thread = one block of 32) */
template <int DT, int C> struct GroupIO {
    using P = Payload<DT, C>;
    using BC = BlockCodec<C>;
    static_assert(P::kUnits * P::kUnit == BC::kCodeBytes, "payload units cover the codes");

    static __device__ __forceinline__ void load_dom(const Ctx &x, size_t g, float *v) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            F8 f = load8<DT>(x.a.in, g * 32 + 8 * q, x.a.count, x.in_al);
#pragma unroll
            for (int k = 0; k < 8; k++) v[8 * q + k] = f.v[k];
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
                    uint16_t sc = BCd::quant(v, c);
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
                    BCd::dequant(c, sc, v);
                }
#pragma unroll
                for (int k = 0; k < 32; k++) acc[k] = r == 0 ? v[k] : acc[k] + v[k];
            }
            uint16_t sc = BCd::quant(acc, c);
            for (int d = 1; d < x.a.world; d++) {
                int q = (me + d) % x.a.world;
                IO::put(x.slot(q, kAg, me) + off, t, c, sc);
            }
            BCd::dequant(c, sc, v);
            IO::store_dom(x, g, v);
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
                BCd::dequant(c, sc, v);
                IO::store_dom(x, g0 + t, v);
            }
        }
        return true;
    }
};

template <int DT, int C, int V>
__global__ void __launch_bounds__(kCol, 2) twoshot_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    Ctx x{a, 0, 0, 0, 0, false, false};
    x.epoch = epoch_begin(a);
    x.par = (int)(x.epoch & 1u);
    x.ngrp = (a.count + 31) / 32;
    x.in_al = ((uintptr_t)a.in & 15u) == 0;
    x.out_al = ((uintptr_t)a.out & 15u) == 0;
    x.sblk = (x.ngrp + a.world - 1) / a.world;
    const int ncol = (int)((x.sblk + kCol - 1) / kCol);
    const int mine = (int)blockIdx.x < ncol ? (ncol - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    using S = Stages<DT, C, V>;
    for (int k = 0; k < mine + 2; k++) {
        if (k < mine) S::stage_a(x, (int)blockIdx.x + k * (int)gridDim.x);
        if (k >= 1 && k - 1 < mine && !S::stage_b(x, (int)blockIdx.x + (k - 1) * (int)gridDim.x))
            break;
        if (k >= 2 && k - 2 < mine && !S::stage_c(x, (int)blockIdx.x + (k - 2) * (int)gridDim.x))
            break;
    }
    epoch_end(a, x.epoch);
}

/* MARK: variant 2 / 3: world 2, every load of a step first
 * One loop step k of CTA b handles A(ca) B(cb) C(cc) (ca = b + k*grid, cb =
 * ca - grid, cc = cb - grid) of the same pipeline as above, in this order:
 *   1. load my input of (peer, ca) and of (me, cb) (no wait needed);
 *   2. threads 0 / 1 wait for rs flag cb / ag flag cc, one barrier;
 *   3. load the peer's rs payload of cb and its ag payload of cc;
 *   4. compute and push A, compute B (push, own output), compute C;
 *   5. one barrier, then thread 0 releases rs flag ca and thread 1 ag flag
 *      cb at the peer.
 * So a step has two exposed memory latencies instead of one per stage, and
 * two barriers instead of five. LAG = 2 (variant 7): B and C run two steps
 * behind A instead of one (cb = ca - 2G, cc = cb - 2G), so the flags a step
 * waits for were released a whole step before (every column has its own
 * slot and flag, so any lag is safe); two more pipeline steps per CTA.
 * A's release moves from after A to the end of the step; the peer waits for
 * it one step later, so nothing stalls on it. Same arithmetic, same payloads, same flags: bitwise the result of
 * variant 1. Exact payloads: 16-bit dtypes only (one column = kWU words per
 * thread); fp32 exact and worlds other than 2 launch variant 1's kernel. */

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

template <int DT, int C, bool PDL, int LAG = 1>
__global__ void __launch_bounds__(kCol, 2) twoshot2_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    if (PDL) {
        pdl_wait();
        pdl_trigger();
    }
    using S = Stages<DT, C, 1>;
    using BCd = typename S::BCd;
    using IO = GroupIO<DT, C>;
    using P = Payload<DT, C>;
    using Wd = Word<DT>;
    constexpr bool kExact = S::kExact;
    Ctx x{a, 0, 0, 0, 0, false, false};
    x.epoch = epoch_begin(a);
    x.par = (int)(x.epoch & 1u);
    x.ngrp = (a.count + 31) / 32;
    x.in_al = ((uintptr_t)a.in & 15u) == 0;
    x.out_al = ((uintptr_t)a.out & 15u) == 0;
    x.sblk = (x.ngrp + 1) / 2;
    const int me = a.rank, q = 1 - a.rank, t = threadIdx.x, G = (int)gridDim.x;
    const int ncol = (int)((x.sblk + kCol - 1) / kCol);
    const int mine = (int)blockIdx.x < ncol ? (ncol - 1 - (int)blockIdx.x) / G + 1 : 0;
    bool alive = true;
    for (int k = 0; k < mine + 2 * LAG && alive; k++) {
        const bool doA = k < mine, doB = k >= LAG && k - LAG < mine, doC = k >= 2 * LAG && k - 2 * LAG < mine;
        const int ca = (int)blockIdx.x + k * G, cb = ca - LAG * G, cc = cb - LAG * G;
        size_t ag0 = 0, ag1 = 0, bg0 = 0, bg1 = 0, cg0 = 0, cg1 = 0;
        if (doA) S::range(x, q, ca, ag0, ag1);
        if (doB) S::range(x, me, cb, bg0, bg1);
        if (doC) S::range(x, q, cc, cg0, cg1);
        const size_t offa = (size_t)ca * P::kBytes, offb = (size_t)cb * P::kBytes,
                     offc = (size_t)cc * P::kBytes;
        if constexpr (kExact) {
            size_t aw0 = 0, aw1 = 0, bw0 = 0, bw1 = 0, cw0 = 0, cw1 = 0;
            if (doA) S::words(x, ag0, ag1, aw0, aw1);
            if (doB) S::words(x, bg0, bg1, bw0, bw1);
            if (doC) S::words(x, cg0, cg1, cw0, cw1);
            uint4 ua[kWU], ub[kWU], pb[kWU], uc[kWU];
            /* 1. inputs */
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                size_t wa = aw0 + t + (size_t)j * kCol, wb = bw0 + t + (size_t)j * kCol;
                ua[j] = doA && wa < aw1 ? Wd::load(x.a.in, wa, x.a.count, x.in_al) : make_uint4(0, 0, 0, 0);
                ub[j] = doB && wb < bw1 ? Wd::load(x.a.in, wb, x.a.count, x.in_al) : make_uint4(0, 0, 0, 0);
            }
            /* 2. flags */
            bool ok = true;
            if (t == 0 && doB) ok = wait_flag(a, x.flag(me, kRs, q, cb), x.epoch, 2, q);
            if (t == 1 && doC) ok = wait_flag(a, x.flag(me, kAg, q, cc), x.epoch, 3, q);
            if (!__syncthreads_and(ok)) break;
            /* 3. payloads */
            const uint8_t *rsb = x.slot(me, kRs, q) + offb, *agc = x.slot(me, kAg, q) + offc;
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                size_t wb = bw0 + t + (size_t)j * kCol, wc = cw0 + t + (size_t)j * kCol;
                pb[j] = doB && wb < bw1 ? __ldcg((const uint4 *)(rsb + (wb - bw0) * 16)) : make_uint4(0, 0, 0, 0);
                uc[j] = doC && wc < cw1 ? __ldcg((const uint4 *)(agc + (wc - cw0) * 16)) : make_uint4(0, 0, 0, 0);
            }
            /* 4. A push, B reduce + push + own output, C output */
            uint8_t *dsta = x.slot(q, kRs, me) + offa, *dstb = x.slot(q, kAg, me) + offb;
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                size_t wa = aw0 + t + (size_t)j * kCol;
                if (doA && wa < aw1) *(uint4 *)(dsta + (wa - aw0) * 16) = ua[j];
            }
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                size_t wb = bw0 + t + (size_t)j * kCol;
                if (!(doB && wb < bw1)) continue;
                float f0[Wd::kElems], f1[Wd::kElems];
                Wd::to_f32(me == 0 ? ub[j] : pb[j], f0);
                Wd::to_f32(me == 0 ? pb[j] : ub[j], f1);
#pragma unroll
                for (int e = 0; e < Wd::kElems; e++) f0[e] = f0[e] + f1[e];
                uint4 res = Wd::from_f32(f0);
                *(uint4 *)(dstb + (wb - bw0) * 16) = res;
                Wd::store(x.a.out, wb, x.a.count, x.out_al, res);
            }
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                size_t wc = cw0 + t + (size_t)j * kCol;
                if (doC && wc < cw1) Wd::store(x.a.out, wc, x.a.count, x.out_al, uc[j]);
            }
        } else {
            const bool va = doA && ag0 + t < ag1, vb = doB && bg0 + t < bg1, vc = doC && cg0 + t < cg1;
            RawGroup<DT> ra, rb;
            ra.load(x, ag0 + t, va);
            rb.load(x, bg0 + t, vb);
            bool ok = true;
            if (t == 0 && doB) ok = wait_flag(a, x.flag(me, kRs, q, cb), x.epoch, 2, q);
            if (t == 1 && doC) ok = wait_flag(a, x.flag(me, kAg, q, cc), x.epoch, 3, q);
            if (!__syncthreads_and(ok)) break;
            Codes cpb, cpc;
            uint16_t spb = 0, spc = 0;
            if (vb) spb = IO::get(x.slot(me, kRs, q) + offb, t, cpb);
            if (vc) spc = IO::get(x.slot(me, kAg, q) + offc, t, cpc);
            float v[32];
            if (va) {
                Codes c;
                ra.template dom<BCd::kRotate>(x, ag0 + t, v);
                uint16_t sc = BCd::quant(v, c);
                IO::put(x.slot(q, kRs, me) + offa, t, c, sc);
            }
            if (vb) {
                float acc[32];
                Codes c;
                rb.template dom<BCd::kRotate>(x, bg0 + t, acc);
                BCd::dequant(cpb, spb, v);
#pragma unroll
                for (int i = 0; i < 32; i++) acc[i] = me == 0 ? acc[i] + v[i] : v[i] + acc[i];
                uint16_t sc = BCd::quant(acc, c);
                IO::put(x.slot(q, kAg, me) + offb, t, c, sc);
                BCd::dequant(c, sc, v);
                IO::store_dom(x, bg0 + t, v);
            }
            if (vc) {
                BCd::dequant(cpc, spc, v);
                IO::store_dom(x, cg0 + t, v);
            }
        }
        /* 5. release */
        __syncthreads();
        if (t == 0 && doA) st_release_sys(x.flag(q, kRs, me, ca), x.epoch);
        if (t == 1 && doB) st_release_sys(x.flag(q, kAg, me, cb), x.epoch);
    }
    epoch_end(a, x.epoch);
}

/* MARK: set 9: world 2, warp-specialized roles
 * The three stages of a column run in different warps of one CTA (one CTA
 * per SM, RA + RB + RC threads): role A scatters, role B reduces, role C
 * gathers, each in its own loop over the CTA's columns b, b + G, ...
 * Inside a role the threads meet at a named barrier (bar.sync / bar.red
 * with the role's id and thread count), never at a CTA-wide one; across
 * ranks they use the same flags as sets 1-7:
 *   A(c): load my input of (peer, c) [quantize], push it into the peer's rs
 *         slot, role barrier, release rs flag c at the peer. A never waits.
 *   B(c): load my input of (me, c); one thread acquires the peer's rs flag
 *         c (role-wide AND of the result); read the payload, sum in rank
 *         order [re-quantize], push into the peer's ag slot, write my own
 *         output; role barrier; release ag flag c at the peer.
 *   C(c): one thread acquires the peer's ag flag c; read, [decode], store.
 * Sets 2-7 run A, B and C of a step in turn behind CTA-wide barriers, so a
 * CTA's loads, arithmetic and pushes alternate; here one role's arithmetic
 * overlaps the other roles' loads and pushes, and A runs ahead at its own
 * pace. Per group the arithmetic, payload bytes and flags are those of
 * sets 1-7: bitwise the same outputs.
 * Progress: A waits for nothing; B(c) waits for the peer's A(c); C(c) for
 * the peer's B(c), which waits only for my A(c): every wait ends (or times
 * out, bounded like every other; a role that times out stops, the others
 * finish or time out, and the CTA reaches epoch_end). A rank still finishes
 * a launch only after reading the peer's ag flags of that launch, so it is
 * at most one launch ahead of its peer and the epoch-parity halves hold.
 * Exact payloads: 16-bit dtypes only (fp32 exact runs set 1's kernel). */
__device__ __forceinline__ void role_bar(int id, int n) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ bool role_and(int id, int n, bool p) {
    uint32_t r;
    asm volatile("{\n\t.reg .pred pa, pb;\n\tsetp.ne.u32 pa, %1, 0;\n\t"
                 "bar.red.and.pred pb, %2, %3, pa;\n\tselp.u32 %0, 1, 0, pb;\n\t}"
                 : "=r"(r)
                 : "r"((uint32_t)p), "r"(id), "r"(n)
                 : "memory");
    return r != 0;
}

template <int DT, int C, bool CS = false> struct Roles {
    using S = Stages<DT, C, 1>;
    using BCd = typename S::BCd;
    using IO = GroupIO<DT, C>;
    using P = Payload<DT, C>;
    using Wd = Word<DT>;
    static constexpr bool kExact = S::kExact;
    static constexpr int kColWords = kCol * 32 / Wd::kElems; /* exact: 16-byte words per column */
    static_assert(kColWords % 256 == 0, "a column's words split evenly over the role threads");

    template <int R> static __device__ void scatter(const Ctx &x, int t, int mine) {
        const int me = x.a.rank, q = 1 - me, G = (int)gridDim.x;
        for (int k = 0; k < mine; k++) {
            const int c = (int)blockIdx.x + k * G;
            size_t g0, g1;
            S::range(x, q, c, g0, g1);
            uint8_t *dst = x.slot(q, kRs, me) + (size_t)c * P::kBytes;
            if constexpr (kExact) {
                constexpr int N = kColWords / R;
                size_t w0, w1;
                S::words(x, g0, g1, w0, w1);
                uint4 u[N];
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    u[j] = w < w1 ? Wd::template load<CS>(x.a.in, w, x.a.count, x.in_al) : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    if (w < w1) *(uint4 *)(dst + (w - w0) * 16) = u[j];
                }
            } else {
                constexpr int N = kCol / R;
                RawGroup<DT> r[N];
#pragma unroll
                for (int j = 0; j < N; j++) r[j].template load<CS>(x, g0 + t + j * R, g0 + t + j * R < g1);
#pragma unroll
                for (int j = 0; j < N; j++) {
                    const size_t g = g0 + t + j * R;
                    if (g >= g1) continue;
                    float v[32];
                    Codes cd;
                    r[j].template dom<BCd::kRotate>(x, g, v);
                    uint16_t sc = BCd::quant(v, cd);
                    IO::put(dst, t + j * R, cd, sc);
                }
            }
            role_bar(1, R);
            if (t == 0) st_release_sys(x.flag(q, kRs, me, c), x.epoch);
        }
    }

    template <int R> static __device__ void reduce(const Ctx &x, int t, int mine) {
        const int me = x.a.rank, q = 1 - me, G = (int)gridDim.x;
        constexpr int bar = 2; /* 1 and 3: scatter and gather */
        for (int k = 0; k < mine; k++) {
            const int c = (int)blockIdx.x + k * G;
            size_t g0, g1;
            S::range(x, me, c, g0, g1);
            const size_t off = (size_t)c * P::kBytes;
            const uint8_t *src = x.slot(me, kRs, q) + off;
            uint8_t *dst = x.slot(q, kAg, me) + off;
            if constexpr (kExact) {
                constexpr int N = kColWords / R;
                size_t w0, w1;
                S::words(x, g0, g1, w0, w1);
                uint4 u[N], p[N];
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    u[j] = w < w1 ? Wd::template load<CS>(x.a.in, w, x.a.count, x.in_al) : make_uint4(0, 0, 0, 0);
                }
                bool ok = true;
                if (t == 0) ok = wait_flag(x.a, x.flag(me, kRs, q, c), x.epoch, 2, q);
                if (!role_and(bar, R, ok)) return;
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    p[j] = w < w1 ? __ldcg((const uint4 *)(src + (w - w0) * 16)) : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    if (w >= w1) continue;
                    float f0[Wd::kElems], f1[Wd::kElems];
                    Wd::to_f32(me == 0 ? u[j] : p[j], f0);
                    Wd::to_f32(me == 0 ? p[j] : u[j], f1);
#pragma unroll
                    for (int e = 0; e < Wd::kElems; e++) f0[e] = f0[e] + f1[e];
                    uint4 res = Wd::from_f32(f0);
                    *(uint4 *)(dst + (w - w0) * 16) = res;
                    Wd::template store<CS>(x.a.out, w, x.a.count, x.out_al, res);
                }
            } else {
                constexpr int N = kCol / R;
                RawGroup<DT> r[N];
#pragma unroll
                for (int j = 0; j < N; j++) r[j].template load<CS>(x, g0 + t + j * R, g0 + t + j * R < g1);
                bool ok = true;
                if (t == 0) ok = wait_flag(x.a, x.flag(me, kRs, q, c), x.epoch, 2, q);
                if (!role_and(bar, R, ok)) return;
#pragma unroll
                for (int j = 0; j < N; j++) {
                    const size_t g = g0 + t + j * R;
                    if (g >= g1) continue;
                    Codes cp, cd;
                    const uint16_t sp = IO::get(src, t + j * R, cp);
                    float acc[32], v[32];
                    r[j].template dom<BCd::kRotate>(x, g, acc);
                    BCd::dequant(cp, sp, v);
#pragma unroll
                    for (int i = 0; i < 32; i++) acc[i] = me == 0 ? acc[i] + v[i] : v[i] + acc[i];
                    const uint16_t sc = BCd::quant(acc, cd);
                    IO::put(dst, t + j * R, cd, sc);
                    BCd::dequant(cd, sc, v);
                    IO::template store_dom<CS>(x, g, v);
                }
            }
            role_bar(bar, R);
            if (t == 0) st_release_sys(x.flag(q, kAg, me, c), x.epoch);
        }
    }

    /* Decode one column's payload (owner's groups [g0, g1)) into my output. */
    template <int R> static __device__ void decode_col(const Ctx &x, int t, const uint8_t *src, size_t g0, size_t g1) {
        constexpr int N = kCol / R;
        Codes cp[N];
        uint16_t sp[N];
#pragma unroll
        for (int j = 0; j < N; j++)
            if (g0 + t + j * R < g1) sp[j] = IO::get(src, t + j * R, cp[j]);
#pragma unroll
        for (int j = 0; j < N; j++) {
            const size_t g = g0 + t + j * R;
            if (g >= g1) continue;
            float v[32];
            BCd::dequant(cp[j], sp[j], v);
            IO::template store_dom<CS>(x, g, v);
        }
    }

    template <int R> static __device__ void gather(const Ctx &x, int t, int mine) {
        const int me = x.a.rank, q = 1 - me, G = (int)gridDim.x;
        for (int k = 0; k < mine; k++) {
            const int c = (int)blockIdx.x + k * G;
            size_t g0, g1;
            S::range(x, q, c, g0, g1);
            const uint8_t *src = x.slot(me, kAg, q) + (size_t)c * P::kBytes;
            bool ok = true;
            if (t == 0) ok = wait_flag(x.a, x.flag(me, kAg, q, c), x.epoch, 3, q);
            if (!role_and(3, R, ok)) return;
            if constexpr (kExact) {
                constexpr int N = kColWords / R;
                size_t w0, w1;
                S::words(x, g0, g1, w0, w1);
                uint4 u[N];
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    u[j] = w < w1 ? __ldcg((const uint4 *)(src + (w - w0) * 16)) : make_uint4(0, 0, 0, 0);
                }
#pragma unroll
                for (int j = 0; j < N; j++) {
                    size_t w = w0 + t + (size_t)j * R;
                    if (w < w1) Wd::template store<CS>(x.a.out, w, x.a.count, x.out_al, u[j]);
                }
            } else {
                decode_col<R>(x, t, src, g0, g1);
            }
            /* no release: nothing waits for C; the next column has its own slot */
        }
    }
};

/* Role threads: 128 scatter, 256 reduce (twice the work of either other
 * role), 128 gather: 512 threads, one CTA per SM at <= 128 registers.
 * Measured and dropped (bench/results/r41, code in commit 223a8f0): two
 * reduce roles on alternate columns (exact; slower: 32 MB 110.7 us vs
 * 104.1) and the reduce role's own-output decode moved to the gather role
 * (codecs; slower: INT4 32 MB 67.5 vs 60.6); set 14 (r43, code in commit
 * 29ed014): the exact reduce role loading the next column's input during
 * the current one (no gain: 96 MB 294.2 vs 293.0 us). */
constexpr int kWsA = 128, kWsB = 256, kWsC = 128;

template <int DT, int C, bool CS>
__global__ void __launch_bounds__(kWsA + kWsB + kWsC, 1) twoshot_ws_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    pdl_wait();
    pdl_trigger();
    Ctx x{a, 0, 0, 0, 0, false, false};
    x.epoch = epoch_begin(a);
    x.par = (int)(x.epoch & 1u);
    x.ngrp = (a.count + 31) / 32;
    x.in_al = ((uintptr_t)a.in & 15u) == 0;
    x.out_al = ((uintptr_t)a.out & 15u) == 0;
    x.sblk = (x.ngrp + 1) / 2;
    const int G = (int)gridDim.x;
    const int ncol = (int)((x.sblk + kCol - 1) / kCol);
    const int mine = (int)blockIdx.x < ncol ? (ncol - 1 - (int)blockIdx.x) / G + 1 : 0;
    const int t = (int)threadIdx.x;
    if (t < kWsA)
        Roles<DT, C, CS>::template scatter<kWsA>(x, t, mine);
    else if (t < kWsA + kWsB)
        Roles<DT, C, CS>::template reduce<kWsB>(x, t - kWsA, mine);
    else
        Roles<DT, C, CS>::template gather<kWsC>(x, t - kWsA - kWsB, mine);
    epoch_end(a, x.epoch);
}

/* MARK: set 8: world 2, exact, registered buffers
 * Both ranks' inputs and outputs are addressable (tpm_cuda_comm_register_io),
 * so nothing is staged: rank r owns words [r*half, (r+1)*half) (half =
 * ceil(words/2)); for each owned word it loads its own input and the peer's
 * input (a remote read), sums in fp32 in rank order, rounds once (the bits
 * of every other exact path) and stores the result into its own output and
 * the peer's output (a remote write). Per-CTA handshakes (CTA b of one rank
 * with CTA b of the other; flags of kind rs/ag at column b, this launch's
 * epoch, which only grows across all two-shot launches of the comm):
 *   start: release "my input is ready" (the kernel runs, so everything before
 *          it on my stream is done), acquire the peer's;
 *   done:  after the CTA's stores, release "done with your input and
 *          output", acquire the peer's before leaving, so neither kernel
 *          ends while the other still reads its input or writes its output.
 * Waits are bounded like every other (TPM_ERR_TIMEOUT into the error words). */
template <int DT>
__global__ void __launch_bounds__(kCol, 2) twoshot_reg_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    pdl_wait();
    pdl_trigger();
    using Wd = Word<DT>;
    const uint32_t epoch = epoch_begin(a);
    const int par = (int)(epoch & 1u), me = a.rank, q = 1 - a.rank, t = threadIdx.x, b = blockIdx.x;
    auto flag = [&](int rank, int kind, int src) {
        return a.flags[rank] + (((size_t)kind * 2 + par) * TPM_CUDA_MAX_WORLD + src) * TPM_CUDA_TS_MAX_COLS + b;
    };
    bool ok = true;
    if (t == 0) {
        st_release_sys(flag(q, kRs, me), epoch);
        ok = wait_flag(a, flag(me, kRs, q), epoch, 2, q);
    }
    if (__syncthreads_and(ok)) {
        const size_t nw = (a.count + Wd::kElems - 1) / Wd::kElems, half = (nw + 1) / 2;
        const size_t w0 = me == 0 ? 0 : half, w1 = me == 0 ? half : nw;
        const void *pin = a.peer_in[q];
        void *pout = a.peer_out[q];
        const bool al_in = ((uintptr_t)a.in & 15u) == 0, al_out = ((uintptr_t)a.out & 15u) == 0;
        const bool al_pin = ((uintptr_t)pin & 15u) == 0, al_pout = ((uintptr_t)pout & 15u) == 0;
        const size_t stride = (size_t)gridDim.x * kCol;
        for (size_t base = w0 + (size_t)b * kCol + t; base < w1; base += stride * kWU) {
            uint4 u[kWU], v[kWU];
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                const size_t w = base + (size_t)j * stride;
                if (w < w1) {
                    u[j] = Wd::load(a.in, w, a.count, al_in);
                    v[j] = Wd::load(pin, w, a.count, al_pin);
                }
            }
#pragma unroll
            for (int j = 0; j < kWU; j++) {
                const size_t w = base + (size_t)j * stride;
                if (w >= w1) continue;
                float f0[Wd::kElems], f1[Wd::kElems];
                Wd::to_f32(me == 0 ? u[j] : v[j], f0);
                Wd::to_f32(me == 0 ? v[j] : u[j], f1);
#pragma unroll
                for (int e = 0; e < Wd::kElems; e++) f0[e] = f0[e] + f1[e];
                const uint4 res = Wd::from_f32(f0);
                Wd::store(pout, w, a.count, al_pout, res);
                Wd::store(a.out, w, a.count, al_out, res);
            }
        }
        __syncthreads();
        if (t == 0) {
            st_release_sys(flag(q, kAg, me), epoch);
            ok = wait_flag(a, flag(me, kAg, q), epoch, 3, q);
        }
        __syncthreads();
    }
    epoch_end(a, epoch);
}

template <int C, int V> void launch_v(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    if constexpr (V == 9 || V == 13) { /* warp-specialized roles, one CTA per SM (a->grid = 2 per SM) */
        const int g = grid < a->grid / 2 ? grid : (a->grid / 2 > 0 ? a->grid / 2 : 1);
        constexpr bool kCS = V == 13;
        constexpr int kT = kWsA + kWsB + kWsC;
        switch (a->dtype) {
        case TPM_DTYPE_BF16: launch_ar(twoshot_ws_kernel<0, C, kCS>, g, kT, s, true, *a); break;
        case TPM_DTYPE_FP16: launch_ar(twoshot_ws_kernel<1, C, kCS>, g, kT, s, true, *a); break;
        default: launch_ar(twoshot_ws_kernel<2, C, kCS>, g, kT, s, true, *a); break;
        }
        return;
    }
    if constexpr (V == 7) { /* variant 3's kernel, B and C two steps behind A */
        switch (a->dtype) {
        case TPM_DTYPE_BF16: launch_ar(twoshot2_kernel<0, C, true, 2>, grid, kCol, s, true, *a); break;
        case TPM_DTYPE_FP16: launch_ar(twoshot2_kernel<1, C, true, 2>, grid, kCol, s, true, *a); break;
        default: launch_ar(twoshot2_kernel<2, C, true, 2>, grid, kCol, s, true, *a); break;
        }
        return;
    }
    if constexpr (V >= 2 && V <= 3) {
        const bool pdl = V == 3;
        switch (a->dtype) {
        case TPM_DTYPE_BF16:
            launch_ar(pdl ? twoshot2_kernel<0, C, true> : twoshot2_kernel<0, C, false>, grid, kCol, s, pdl, *a);
            break;
        case TPM_DTYPE_FP16:
            launch_ar(pdl ? twoshot2_kernel<1, C, true> : twoshot2_kernel<1, C, false>, grid, kCol, s, pdl, *a);
            break;
        default:
            launch_ar(pdl ? twoshot2_kernel<2, C, true> : twoshot2_kernel<2, C, false>, grid, kCol, s, pdl, *a);
            break;
        }
        return;
    }
    switch (a->dtype) {
    case TPM_DTYPE_BF16: twoshot_kernel<0, C, V><<<grid, kCol, 0, s>>>(*a); break;
    case TPM_DTYPE_FP16: twoshot_kernel<1, C, V><<<grid, kCol, 0, s>>>(*a); break;
    default: twoshot_kernel<2, C, V><<<grid, kCol, 0, s>>>(*a); break;
    }
}

/* Set 10: where set 9's warp-specialized kernel measured faster than set
 * 5's (bench/results/r40): exact and INT8 / INT6 over 16-bit dtypes from
 * TPM_CUDA_WS_MIN_BYTES per launch. INT4, INT4_H and FP8 stay on set 5's
 * kernel (set 9 measured 3-50% slower for them: its reduce role has half the
 * CTA's warps for the heaviest arithmetic); fp32 was not measured. */
inline bool ws_pays(const tpm_cuda_ar_args *a) {
    if (a->dtype == TPM_DTYPE_FP32) return false;
    if (a->codec != TPM_CODEC_NONE && a->codec != TPM_CODEC_INT8 && a->codec != TPM_CODEC_INT6) return false;
    return a->count * 2 >= TPM_CUDA_WS_MIN_BYTES;
}

/* Exact payloads have one kernel; codecs one per variant (tpm_cuda_variant). */
template <int C> void launch_dt(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    const int v = tpm_cuda_variant(a);
    if (v >= 2 && a->world == 2 && (C != TPM_CODEC_NONE || a->dtype != TPM_DTYPE_FP32)) {
        if (v == 7)
            launch_v<C, 7>(a, grid, s);
        else if (v == 9 || ((v == 10 || v == 11 || v == 12 || v == 14) && ws_pays(a))) /* 11, 12, 14: retired, = 10 */
            launch_v<C, 9>(a, grid, s);
        else if (v == 13 && ws_pays(a))
            launch_v<C, 13>(a, grid, s);
        else if (v >= 3) /* 4-6, 8, 10, 13: variant 3's two-shot (cuda_sync.h) */
            launch_v<C, 3>(a, grid, s);
        else
            launch_v<C, 2>(a, grid, s);
        return;
    }
    if constexpr (C != TPM_CODEC_NONE) {
        if (v >= 1) {
            launch_v<C, 1>(a, grid, s);
            return;
        }
    }
    launch_v<C, 0>(a, grid, s);
}

size_t payload_bytes(int dtype, int codec) {
    switch (codec) {
    case TPM_CODEC_NONE: return Payload<0, TPM_CODEC_NONE>::kBytes * (dtype == TPM_DTYPE_FP32 ? 2 : 1);
    case TPM_CODEC_INT6:
    case TPM_CODEC_INT6_H: return Payload<0, TPM_CODEC_INT6>::kBytes;
    case TPM_CODEC_INT4:
    case TPM_CODEC_INT4_H: return Payload<0, TPM_CODEC_INT4>::kBytes;
    default: return Payload<0, TPM_CODEC_INT8>::kBytes;
    }
}

} /* namespace */
} /* namespace tpm_cuda */

extern "C" size_t tpm_cuda_twoshot_max_count(const tpm_cuda_ar_args *a) {
    size_t cols = a->ts_slot / tpm_cuda::payload_bytes(a->dtype, a->codec);
    if (cols > TPM_CUDA_TS_MAX_COLS) cols = TPM_CUDA_TS_MAX_COLS;
    /* every owner segment (<= ceil(ngrp/W) groups) must fit in cols columns */
    return cols * tpm_cuda::kCol * 32 * (size_t)a->world - 32 * (size_t)a->world;
}

extern "C" int tpm_cuda_twoshot_launch(const tpm_cuda_ar_args *a, void *stream) {
    using namespace tpm_cuda;
    size_t ngrp = (a->count + 31) / 32;
    size_t seg = (ngrp + a->world - 1) / a->world;
    size_t ncol = (seg + kCol - 1) / kCol;
    int grid = (int)(ncol < (size_t)a->grid ? ncol : (size_t)a->grid);
    if (grid < 1) grid = 1;
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->codec) {
    case TPM_CODEC_NONE: launch_dt<TPM_CODEC_NONE>(a, grid, s); break;
    case TPM_CODEC_INT8: launch_dt<TPM_CODEC_INT8>(a, grid, s); break;
    case TPM_CODEC_INT6: launch_dt<TPM_CODEC_INT6>(a, grid, s); break;
    case TPM_CODEC_INT4: launch_dt<TPM_CODEC_INT4>(a, grid, s); break;
    case TPM_CODEC_FP8: launch_dt<TPM_CODEC_FP8>(a, grid, s); break;
    case TPM_CODEC_INT4_H: launch_dt<TPM_CODEC_INT4_H>(a, grid, s); break;
    case TPM_CODEC_INT6_H: launch_dt<TPM_CODEC_INT6_H>(a, grid, s); break;
    default: return -1;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int tpm_cuda_twoshot_reg_launch(const tpm_cuda_ar_args *a, void *stream) {
    using namespace tpm_cuda;
    if (a->world != 2 || a->codec != TPM_CODEC_NONE) return -1;
    const size_t nw = (a->count + (a->dtype == TPM_DTYPE_FP32 ? 4 : 8) - 1) / (a->dtype == TPM_DTYPE_FP32 ? 4 : 8);
    const size_t want = ((nw + 1) / 2 + kCol - 1) / kCol;
    int grid = (int)(want < (size_t)a->grid ? want : (size_t)a->grid);
    if (grid < 1) grid = 1;
    if (grid > TPM_CUDA_TS_MAX_COLS) grid = TPM_CUDA_TS_MAX_COLS;
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->dtype) {
    case TPM_DTYPE_BF16: launch_ar(twoshot_reg_kernel<0>, grid, kCol, s, true, *a); break;
    case TPM_DTYPE_FP16: launch_ar(twoshot_reg_kernel<1>, grid, kCol, s, true, *a); break;
    default: launch_ar(twoshot_reg_kernel<2>, grid, kCol, s, true, *a); break;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
