/*
 * cuda_twoshot_ws.cu - the warp-specialized two-shot all-reduce at world 2
 * (kernel sets 9 and 13; set 10, the default, runs it for exact, INT8
 * and INT6 launches from TPM_CUDA_WS_MIN_BYTES). The column layout, the
 * flags and the per-group arithmetic are cuda_twoshot.cu's (its top comment
 * has the protocol; the shared pieces are in cuda_twoshot.cuh), so every
 * output is bitwise that of set 5's kernel. What differs is who runs the
 * stages (below, "warp-specialized roles") and, from kWsTakeMinCols columns
 * per CTA, which CTA runs a column (taken from a counter, see there).
 */
#include "core/cuda_preload.h"
#include "comm/cuda_twoshot.cuh"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

/* MARK: warp-specialized roles (sets 9, 13)
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

/* Which CTA runs a column. Static: column b + k G to CTA b (k = 0, 1, ...).
 * Taken (launches of at least kWsTakeMinCols columns per CTA): CTA b runs
 * column b, then its scatter role's thread 0 takes each next column from
 * the per-launch counter ctl[2] (one relaxed atomic while the current
 * column is scattered; the last CTA out zeroes it, epoch_end) and
 * publishes it in the CTA's list in shared memory, where the reduce and
 * gather roles read their k-th column: entry k >= 1 is kColPending until
 * published, -1 after the last. A CTA can take every column but the other
 * G - 1 first ones: at most TPM_CUDA_TS_MAX_COLS entries, plus the -1.
 * Progress as before: the scatter role never waits (the counter and the
 * list never block it), so every rank's columns are all taken and
 * scattered; a reduce or gather wait is for a column the peer has taken or
 * will take, whose stages there wait only on this rank's scatter (reduce)
 * or on a reduce that does.
 * Why (r75: the flag-free kernel's CTAs progress at different rates and
 * its launch waited for the slowest; the same holds here): r78, exact bf16,
 * release (static) / taken, three passes, us: 64 MB 198.7-200.9 / 197.3-
 * 198.4, 96 MB 291.6-296.0 / 289.5-290.3, 128 MB 385.2-386.2 / 381.5-381.6;
 * but 32 MB 104.8-105.2 / 105.6-106.0 and 16 MB 56.2-56.5 / 57.9-58.1 (3.9
 * and 7.8 columns per CTA: the take's latency shows, the balance gains
 * little): taken from 12 columns per CTA (~50 MB of bf16 at 132 CTAs). */
constexpr int kWsTakeMinCols = 12;
constexpr int kColPending = -2;
constexpr int kColList = TPM_CUDA_TS_MAX_COLS + 2;

template <int DT, int C, bool CS = false> struct Roles {
    using S = Stages<DT, C, 1>;
    using BCd = typename S::BCd;
    using IO = GroupIO<DT, C>;
    using P = Payload<DT, C>;
    using Wd = Word<DT>;
    static constexpr bool kExact = S::kExact;
    static constexpr int kColWords = kCol * 32 / Wd::kElems; /* exact: 16-byte words per column */
    static_assert(kColWords % 256 == 0, "a column's words split evenly over the role threads");

    template <int R> static __device__ void scatter(const Ctx &x, int t, volatile int *cols, bool dyn) {
        const int me = x.a.rank, q = 1 - me, G = (int)gridDim.x, ncol = x.ncols();
        int c = (int)blockIdx.x;
        for (int k = 0; c >= 0; k++) {
            /* dyn: take column k + 1 now; its id is published at this column's end */
            uint32_t next = (uint32_t)(c + G);
            if (dyn && t == 0) next = (uint32_t)G + atomicAdd(x.a.ctl + 2, 1u);
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
                    uint16_t sc = S::quant_in(v, cd);
                    IO::put(dst, t + j * R, cd, sc);
                }
            }
            if (dyn && t == 0) cols[k + 1] = next < (uint32_t)ncol ? (int)next : -1;
            role_bar(1, R);
            if (t == 0) st_release_sys(x.flag(q, kRs, me, c), x.epoch);
            c = !dyn ? (next < (uint32_t)ncol ? (int)next : -1) : cols[k + 1];
        }
    }

    /* Column k of this CTA for the reduce and gather roles (-1: no more):
     * static, blockIdx.x + k G; dyn: k = 0 is blockIdx.x, later ones wait for
     * the scatter role to publish them (it never waits, so this ends;
     * bounded all the same). */
    static __device__ __forceinline__ int col_at(const Ctx &x, const volatile int *cols, int k, int stage, bool dyn) {
        if (!dyn) {
            const int c = (int)blockIdx.x + k * (int)gridDim.x;
            return c < x.ncols() ? c : -1;
        }
        if (k == 0) return (int)blockIdx.x;
        int c = cols[k];
        Spin sp;
        while (c == kColPending) {
            if (!sp.tick(x.a, stage, 1 - x.a.rank)) return -1;
            c = cols[k];
        }
        return c;
    }

    template <int R> static __device__ void reduce(const Ctx &x, int t, const volatile int *cols, bool dyn) {
        const int me = x.a.rank, q = 1 - me;
        constexpr int bar = 2; /* 1 and 3: scatter and gather */
        for (int k = 0;; k++) {
            const int c = col_at(x, cols, k, 2, dyn);
            if (c < 0) break;
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
                    BCd::dequant_raw(cp, sp, v);
#pragma unroll
                    for (int i = 0; i < 32; i++) acc[i] = me == 0 ? acc[i] + v[i] : v[i] + acc[i];
                    const uint16_t sc = BCd::quant(acc, cd);
                    IO::put(dst, t + j * R, cd, sc);
                    BCd::dequant_raw(cd, sc, v);
                    IO::template store_codec<CS>(x, g, v, sc);
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
            BCd::dequant_raw(cp[j], sp[j], v);
            IO::template store_codec<CS>(x, g, v, sp[j]);
        }
    }

    template <int R> static __device__ void gather(const Ctx &x, int t, const volatile int *cols, bool dyn) {
        const int me = x.a.rank, q = 1 - me;
        for (int k = 0;; k++) {
            const int c = col_at(x, cols, k, 3, dyn);
            if (c < 0) break;
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
 * Measured and dropped (docs/allreduce_cuda_rounds.md, rounds 6 and 7):
 *  - bench/results/r41, code in commit 223a8f0: two reduce roles on alternate
 *    columns (exact; slower: 32 MB 110.7 us vs 104.1) and the reduce role's
 *    own-output decode moved to the gather role (codecs; slower: INT4 32 MB
 *    67.5 vs 60.6);
 *  - r43, commit 29ed014 (set 14): the exact reduce role loading the next
 *    column's input during the current one (no gain: 96 MB 294.2 vs 293.0);
 *  - r47, commit a4f3122 (set 15): the same roles at half the threads in two
 *    CTAs per SM (slower everywhere: INT4 32 MB 71.9 vs 59.9, exact 106.2 vs
 *    104.2);
 *  - r48, commit ca53df6 (sets 16, 17): decoupled releases (per-column
 *    mbarriers, one releaser warp per column, per-warp flag waits; slower:
 *    set 17 INT4 32 MB 75.4, exact 111.6 vs 104.9);
 *  - r49, commit 5a80725 (set 18): the codec arithmetic with shorter chains
 *    per block (within +-2.6% of set 10, faster at <= 32 MB, slower above). */
template <int RA, int RB, int RC> struct WsShape {
    static constexpr int kA = RA, kB = RB, kC = RC, kThreads = RA + RB + RC;
    static_assert(RA % 32 == 0 && RB % 32 == 0 && RC % 32 == 0, "roles are whole warps");
    static_assert(kCol % RA == 0 && kCol % RB == 0 && kCol % RC == 0, "a role's threads split a column evenly");
};
using WsOne = WsShape<128, 256, 128>; /* one CTA per SM */

template <int DT, int C, bool CS, class W, int MINB>
__global__ void __launch_bounds__(W::kThreads, MINB) twoshot_ws_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    __shared__ int cols[kColList];
    pdl_wait();
    pdl_trigger();
    const size_t ncol = (size_t)Ctx::ncols_of(a.count, a.world); /* Ctx::ncols(), before Ctx::begin */
    const bool dyn = ncol >= (size_t)kWsTakeMinCols * gridDim.x; /* launch-uniform */
    if (dyn) { /* the entries this launch can reach start pending (Ctx::begin's barrier publishes them) */
        const size_t n = ncol + 2 > gridDim.x + (size_t)kColList ? (size_t)kColList : ncol + 2 - gridDim.x;
        for (size_t i = 1 + threadIdx.x; i < n; i += blockDim.x) cols[i] = kColPending;
    }
    int mine;
    const Ctx x = Ctx::begin(a, mine);
    const int t = (int)threadIdx.x;
    if (t < W::kA)
        Roles<DT, C, CS>::template scatter<W::kA>(x, t, cols, dyn);
    else if (t < W::kA + W::kB)
        Roles<DT, C, CS>::template reduce<W::kB>(x, t - W::kA, cols, dyn);
    else
        Roles<DT, C, CS>::template gather<W::kC>(x, t - W::kA - W::kB, cols, dyn);
    epoch_end(a, x.epoch, a.ctl + 2); /* the column counter, zeroed for the next launch */
}

template <int C, bool CS, class W, int MINB> void launch_ws(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    switch (a->dtype) {
    case TPM_DTYPE_BF16: launch_ar(twoshot_ws_kernel<0, C, CS, W, MINB>, grid, W::kThreads, s, true, *a); break;
    case TPM_DTYPE_FP16: launch_ar(twoshot_ws_kernel<1, C, CS, W, MINB>, grid, W::kThreads, s, true, *a); break;
    default: launch_ar(twoshot_ws_kernel<2, C, CS, W, MINB>, grid, W::kThreads, s, true, *a); break;
    }
}

/* grid = min(columns, a->grid); a->grid is two CTAs per SM. */
template <int C> void launch_set(const tpm_cuda_ar_args *a, int grid, cudaStream_t s, int set) {
    const int one = grid < a->grid / 2 ? grid : (a->grid / 2 > 0 ? a->grid / 2 : 1);
    if (set == 13)
        launch_ws<C, true, WsOne, 1>(a, one, s);
    else
        launch_ws<C, false, WsOne, 1>(a, one, s);
}

} /* namespace */

int twoshot_ws_launch(const tpm_cuda_ar_args *a, int grid, cudaStream_t s, int set) {
    if (a->world != 2 || (set != 9 && set != 13)) return -1;
    if (a->codec == TPM_CODEC_NONE && a->dtype == TPM_DTYPE_FP32) return -1; /* 16-bit exact payloads only */
    switch (a->codec) {
    case TPM_CODEC_NONE: launch_set<TPM_CODEC_NONE>(a, grid, s, set); break;
    case TPM_CODEC_INT8: launch_set<TPM_CODEC_INT8>(a, grid, s, set); break;
    case TPM_CODEC_INT6: launch_set<TPM_CODEC_INT6>(a, grid, s, set); break;
    case TPM_CODEC_INT4: launch_set<TPM_CODEC_INT4>(a, grid, s, set); break;
    case TPM_CODEC_FP8: launch_set<TPM_CODEC_FP8>(a, grid, s, set); break;
    case TPM_CODEC_INT4_H: launch_set<TPM_CODEC_INT4_H>(a, grid, s, set); break;
    case TPM_CODEC_INT6_H: launch_set<TPM_CODEC_INT6_H>(a, grid, s, set); break;
    default: return -1;
    }
    return 0;
}

} /* namespace tpm_cuda */

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(twoshot_ws, (tpm_cuda::twoshot_ws_kernel<0, TPM_CODEC_NONE, false, tpm_cuda::WsOne, 1>))
