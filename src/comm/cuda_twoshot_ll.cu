/*
 * cuda_twoshot_ll.cu - the two-shot all-reduce without flags (kernel set
 * 19): every payload word carries its own ready marker, as the one-shot's
 * packets do, so no column ever waits for a system-scope release.
 *
 * Why: a column of the flag two-shots ends with a barrier and one thread's
 * st.release.sys (MEMBAR.ALL.SYS), which waits until the CTA's remote stores
 * have landed. bench/results/r51 (bench/fence_probe.cu) timed a push stream
 * with one such release per chunk and CTA: 183 GB/s at 4 KB chunks, 243 at
 * 8 KB, 289 at 16 KB, against 357 GB/s without; a codec column moves 4.6-9
 * KB, an exact bf16 column 16 KB. Here nothing is released: the reader
 * polls the payload itself.
 *
 * Work split: as the flag two-shots (cuda_twoshot.cu): groups of 32
 * elements, owner r's segment [r*ceil(ngrp/W), ...), columns of kCol groups,
 * one group (codecs) or kWU 16-byte words (exact) per thread and column.
 * World 2 with a codec (Ll::run2): every warp takes work units (its 32
 * groups of a column) from a per-launch counter and runs them as a
 * pipeline (below and at run2). Otherwise column c of every segment is run
 * by CTA c % grid on every rank, which runs, for its columns b, b + grid, ...:
 *   A  for every owner s != me: my input of (s, c) [quantize] -> s's rs
 *      slot [me];
 *   B  for my own (me, c): poll the W-1 rs slots until my words are there,
 *      put the sentinel back, sum the W terms in fp32 in rank order 0..W-1
 *      (my own term from my input) [re-quantize], push the result into
 *      every peer's ag slot [me], write my output from the pushed bits;
 *   C  for every owner s != me: poll my ag slot [s], put the sentinel back,
 *      [decode], write my output.
 Order:
 *  - world 2 with a codec (Ll::run2, which has the measurements and its own
 *    progress argument): a software pipeline per warp over the units it
 *    takes, step j running A(j), then B(j-1), then C(j-2), so C's local
 *    work (loads, decodes, output stores) overlaps later units' pushes
 *    instead of running after all of them with the link idle;
 *  - otherwise (every rank's CTA b runs the same sequence of stage items
 *    over its columns k = 0, 1, ...) all the A items, then all the B, then
 *    all the C (the same pipeline made exact bf16 slower: r71, 96 MB 337-340
 *    us against 320.8 in phase order, r52). B(k) waits only for the peers'
 *    A(k) and C(k) for the peers' B(k), items that sit earlier in the
 *    sequence (A never waits), so by induction on the
 * position every wait ends while the grid is co-resident (grid <=
 * kLlCtasPerSm CTAs per SM, the launcher's cap, within the kernel's launch
 * bounds), or times out (bounded like every wait: TPM_ERR_TIMEOUT in the
 * host-mapped error words, stage 2 / 3).
 *
 * Slots: this kernel's own region [tl] after the flag kernels' [ts]
 * (cuda_comm.h), so set 10 can run its codec calls here and its other calls
 * on the flag kernels, in any order, without a reset in between.
 * Ready markers (every slot word starts as the all-ones sentinel: the
 * region is set to 0xff at init and after the P2P probe; every reader
 * restores what it read):
 *  - exact: 16-byte words of dtype elements, each element != all-ones (a
 *    pushed all-ones element, a NaN, becomes the canonical quiet NaN, as in
 *    the one-shot); a word is there when none of its elements is all-ones
 *    (a store may land in pieces but never splits an element);
 *  - codecs: a group's packed codes (4 / 6 / 8 32-bit words for INT4 /
 *    INT6 / INT8-FP8) with bit 31 cleared, plus one word holding the bf16
 *    scale in bits 0-15 and the codes' cleared top bits in bits 16-23: no
 *    word has bit 31 set, so none is all-ones, and each is its own marker.
 *    One 32-bit word more per group than the flag two-shot's payload
 *    (INT4 20 bytes instead of 18, INT6 28 / 26, INT8 36 / 34); the codes
 *    and scales, hence every output bit, are the flag two-shots'.
 * Pushes are plain stores (the one-shot's default, measured faster than
 * st.volatile); polls are ld.volatile of my own memory.
 *
 * Reuse: a rank in launch e reads half e&1 of its slots and leaves every
 * word it read all-ones before the launch ends. A peer writes that half
 * again only in launch e+2, which it starts after finishing e+1, which
 * needs this rank's data of e+1 (its B and C wait for them), pushed after
 * this rank's launch e (restores included) finished. Every word a peer
 * writes in launch e is read in launch e, so the half is clean at its end.
 * The epoch is the flag two-shots' (epoch_begin / epoch_end).
 *
 * Measured (docs/allreduce_cuda_rounds.md, rounds 9 and 11; bench/results/r52,
 * r53, r60): the same bits as the flag kernels. With the old codec
 * arithmetic no faster where it mattered (r52: INT4 32 MB 58.1 us against
 * 60.9; exact 32 MB 109.1 against 104.1, 96 MB 320.8 against 292.0). With
 * codec_fast.h's (r60) each GPU's work is shorter, and without flags that
 * shows: INT4 32 MB 44.5 against 57.8, 96 MB 128.5 against 145.4; INT8 32
 * MB 67.4 against 68.8. So the default set 10 runs its codec calls here
 * where that measured faster (tpm_cuda_twoshot_set in cuda_twoshot.cu);
 * exact stays on the flag kernels. A quad version for INT8 / INT4 / INT4_H
 * (four lanes per group, 64 registers, four CTAs per SM; commit fee3f51)
 * was slower (r53) and was removed. Round 12 (r67-r72): the world-2 codec
 * path as a pipeline (Ll::run2), INT4 96 MB 127 -> 103 us, and set 10's
 * INT8 calls here from 4 MB up. Round 13 (r75-r77): run2's units taken
 * per warp from a counter instead of whole columns dealt to CTAs, INT4 96
 * MB 103-105 -> 99 us, INT4_H 125-126 -> 119.
 */
#include "core/cuda_preload.h"
#include "comm/cuda_twoshot.cuh"

#include <cuda_runtime.h>

namespace tpm_cuda {

#ifdef TPM_LL_TRACE
/* Diagnostic build only (-DTPM_LL_TRACE, bench/diag/ll_trace.c): thread 0 of every
 * CTA of Ll::run2 (so warp 0's pipeline) writes %globaltimer at its entry,
 * after Ctx::begin, at the start of every pipeline step and after each of
 * its A, B and C, and at its end: row b, [0] = {entry, begun, end, units
 * run}, [1 + j] = {step j start, after A, after B, after C}. The last
 * launch's values stay. */
constexpr int kTrCtas = 512, kTrSteps = 40;
__device__ unsigned long long ll_trace[kTrCtas][kTrSteps + 1][4];
#endif

namespace {

__device__ __forceinline__ uint32_t ld_volatile4(const void *p) {
    uint32_t v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* One column's tagged payload. */
template <int DT, int C> struct LlPayload {
    static constexpr bool kExact = C == TPM_CODEC_NONE;
    static constexpr int kNc = kExact ? 0 : BlockCodec<C>::kCodeBytes / 4; /* code words */
    static constexpr int kNt = kNc + 1;                                    /* + scale/tops */
    static constexpr size_t kBytes = kExact ? Payload<DT, C>::kBytes : (size_t)kCol * kNt * 4;
};

/* Slot (rank, kind, src) of this launch's parity in the flag-free region
 * [tl], which follows the flag kernels' [ts] (cuda_comm.h). */
__device__ __forceinline__ uint8_t *lslot(const Ctx &x, int rank, int kind, int src) {
    const size_t tl = TPM_CUDA_TL_SLOT(x.a.ts_slot);
    return x.a.ts[rank] + 4 * (size_t)x.a.world * x.a.ts_slot +
           ((size_t)x.par * 2 * x.a.world + (size_t)kind * x.a.world + src) * tl;
}

template <int DT, int C> struct Ll {
    using S = Stages<DT, C, 1>;
    using BCd = typename S::BCd;
    using IO = GroupIO<DT, C>;
    using Wd = Word<DT>;
    using P = LlPayload<DT, C>;
    static constexpr bool kExact = P::kExact;

    /* MARK: codec groups: word k of group t at (k * kCol + t) * 4 */
    static __device__ __forceinline__ void put(uint8_t *col, int t, const Codes &c, uint16_t s) {
        uint32_t top = 0;
#pragma unroll
        for (int k = 0; k < P::kNc; k++) {
            *(uint32_t *)(col + ((size_t)k * kCol + t) * 4) = c.w[k] & 0x7fffffffu;
            top |= (c.w[k] >> 31) << k;
        }
        *(uint32_t *)(col + ((size_t)P::kNc * kCol + t) * 4) = (uint32_t)s | (top << 16);
    }
    /* Poll group t's words until none is all-ones (or the wait times out:
     * alive = false), put the sentinel back, unpack. */
    static __device__ __forceinline__ uint16_t get(const Ctx &x, uint8_t *col, int t, Codes &c, int stage,
                                                   int peer, bool &alive) {
        uint32_t w[P::kNt];
#pragma unroll
        for (int k = 0; k < P::kNt; k++) w[k] = ld_volatile4(col + ((size_t)k * kCol + t) * 4);
        bool ready = true;
#pragma unroll
        for (int k = 0; k < P::kNt; k++) ready = ready && w[k] != 0xffffffffu;
        if (!ready) { /* the spin loops only where a word is missing */
#pragma unroll
            for (int k = 0; k < P::kNt; k++) {
                Spin sp;
                while (alive && w[k] == 0xffffffffu) {
                    if (!sp.tick(x.a, stage, peer)) alive = false;
                    w[k] = ld_volatile4(col + ((size_t)k * kCol + t) * 4);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < P::kNt; k++) *(uint32_t *)(col + ((size_t)k * kCol + t) * 4) = 0xffffffffu;
        const uint32_t last = w[P::kNc];
#pragma unroll
        for (int k = 0; k < P::kNc; k++) c.w[k] = w[k] | (((last >> (16 + k)) & 1u) << 31);
        return (uint16_t)(last & 0xffffu);
    }

    /* MARK: exact words: poll, restore */
    static __device__ __forceinline__ uint4 get_word(const Ctx &x, uint8_t *p, uint4 w, int stage, int peer,
                                                     bool &alive) {
        Spin sp;
        while (alive && !Wd::valid(w)) {
            if (!sp.tick(x.a, stage, peer)) alive = false;
            w = ld_volatile16(p);
        }
        *(uint4 *)p = make_uint4(~0u, ~0u, ~0u, ~0u);
        return w;
    }

    /* A(c): my input of every other owner's column c into its rs slot [me]. */
    static __device__ void scatter(const Ctx &x, int col) {
        const int t = threadIdx.x, me = x.a.rank, W = x.a.world;
        for (int d = 1; d < W; d++) {
            const int s = me + d < W ? me + d : me + d - W;
            size_t g0, g1;
            S::range(x, s, col, g0, g1);
            uint8_t *dst = lslot(x, s, kRs, me) + (size_t)col * P::kBytes;
            if constexpr (kExact) {
                size_t w0, w1;
                S::words(x, g0, g1, w0, w1);
                for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        if (w < w1) u[k] = Wd::sanitize(Wd::load(x.a.in, w, x.a.count, x.in_al));
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        if (w < w1) *(uint4 *)(dst + (w - w0) * 16) = u[k];
                    }
                }
            } else if (g0 + t < g1) {
                float v[32];
                Codes cd;
                IO::load_dom(x, g0 + t, v);
                const uint16_t sc = S::quant_in(v, cd);
                put(dst, t, cd, sc);
            }
        }
    }

    /* B(c): sum my column c over the ranks, push it, write my output. */
    static __device__ void reduce(const Ctx &x, int col, bool &alive) {
        const int t = threadIdx.x, me = x.a.rank, W = x.a.world;
        size_t g0, g1;
        S::range(x, me, col, g0, g1);
        const size_t off = (size_t)col * P::kBytes;
        if constexpr (kExact) {
            size_t w0, w1;
            S::words(x, g0, g1, w0, w1);
            for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                float acc[kWU][Wd::kElems];
                for (int r = 0; r < W; r++) {
                    uint8_t *src = lslot(x, me, kRs, r) + off;
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        u[k] = make_uint4(0, 0, 0, 0);
                        if (w < w1)
                            u[k] = r == me ? Wd::load(x.a.in, w, x.a.count, x.in_al)
                                           : ld_volatile16(src + (w - w0) * 16);
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        if (r != me && w < w1) u[k] = get_word(x, src + (w - w0) * 16, u[k], 2, r, alive);
                        float f[Wd::kElems];
                        Wd::to_f32(u[k], f);
#pragma unroll
                        for (int e = 0; e < Wd::kElems; e++) acc[k][e] = r == 0 ? f[e] : acc[k][e] + f[e];
                    }
                }
#pragma unroll
                for (int k = 0; k < kWU; k++) {
                    const size_t w = b + (size_t)k * kCol;
                    if (w >= w1) continue;
                    const uint4 res = Wd::sanitize(Wd::from_f32(acc[k]));
                    for (int d = 1; d < W; d++) {
                        const int q = me + d < W ? me + d : me + d - W;
                        *(uint4 *)(lslot(x, q, kAg, me) + off + (w - w0) * 16) = res;
                    }
                    Wd::store(x.a.out, w, x.a.count, x.out_al, res);
                }
            }
        } else if (g0 + t < g1) {
            float acc[32], v[32];
            Codes c;
            for (int r = 0; r < W; r++) {
                if (r == me) {
                    IO::load_dom(x, g0 + t, v);
                } else {
                    const uint16_t sc = get(x, lslot(x, me, kRs, r) + off, t, c, 2, r, alive);
                    BCd::dequant_raw(c, sc, v);
                }
#pragma unroll
                for (int k = 0; k < 32; k++) acc[k] = r == 0 ? v[k] : acc[k] + v[k];
            }
            const uint16_t sc = BCd::quant(acc, c);
            for (int d = 1; d < W; d++) {
                const int q = me + d < W ? me + d : me + d - W;
                put(lslot(x, q, kAg, me) + off, t, c, sc);
            }
            BCd::dequant_raw(c, sc, v);
            IO::store_codec(x, g0 + t, v, sc);
        }
    }

    /* C(c): every other owner's result of column c into my output. */
    static __device__ void gather(const Ctx &x, int col, bool &alive) {
        const int t = threadIdx.x, me = x.a.rank, W = x.a.world;
        const size_t off = (size_t)col * P::kBytes;
        for (int d = 1; d < W; d++) {
            const int s = me + d < W ? me + d : me + d - W;
            size_t g0, g1;
            S::range(x, s, col, g0, g1);
            uint8_t *src = lslot(x, me, kAg, s) + off;
            if constexpr (kExact) {
                size_t w0, w1;
                S::words(x, g0, g1, w0, w1);
                for (size_t b = w0 + t; b < w1; b += (size_t)kWU * kCol) {
                    uint4 u[kWU];
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        if (w < w1) u[k] = ld_volatile16(src + (w - w0) * 16);
                    }
#pragma unroll
                    for (int k = 0; k < kWU; k++) {
                        const size_t w = b + (size_t)k * kCol;
                        if (w >= w1) continue;
                        u[k] = get_word(x, src + (w - w0) * 16, u[k], 3, s, alive);
                        Wd::store(x.a.out, w, x.a.count, x.out_al, u[k]);
                    }
                }
            } else if (g0 + t < g1) {
                Codes c;
                float v[32];
                const uint16_t sc = get(x, src, t, c, 3, s, alive);
                BCd::dequant_raw(c, sc, v);
                IO::store_codec(x, g0 + t, v, sc);
            }
        }
    }

    /* MARK: world 2, codecs
     * The same groups, slots, stores and bits as scatter / reduce / gather,
     * in a different order: a software pipeline over this CTA's columns
     * b + k*G (k < mine), slot j running A(j), then B(j-1), then C(j-2):
     *   A0 | A1 B0 | A2 B1 C0 | A3 B2 C1 | ... | B(n-1) C(n-2) | C(n-1).
     * Why: with every A first, then every B, then every C (this kernel's
     * order until r70), the link carried the scatter's pushes during A and
     * the results' during B and nothing during C, whose loads, decodes and
     * output stores then ran with the link idle (r69: 32% fewer instructions
     * per group left INT4 32 MB at 45 us). Interleaved, C(k-2)'s local work
     * overlaps A(k)'s and B(k-1)'s pushes. r70 (2 x H200, bf16, us, this
     * path / the phase order, same run): INT4 32 MB 41.8 / 44.9, 96 MB
     * 103.0 / 127.2; INT4_H 96 MB 124.9 / 157.6; INT6 96 MB 137.3 / 158.8.
     * Progress: see the top comment. r71: with this pipeline INT8 runs
     * faster here than on the flag kernels at 64 and 96 MB too (117.8 /
     * 169.6 us against 124.2 / 179.4), so set 10 routes every INT8 call
     * from 4 MB here (tpm_cuda_twoshot_set).
     * Also: each stage's owner range and slot base are computed once per
     * launch (the generic path redoes range() / lslot()'s 64-bit arithmetic
     * per column, ~50 instructions per group and stage), and B loads my term
     * straight into the sum (Stages::sum2: in the rank loop ptxas hoisted
     * load_dom's fallback bounds checks, ~210 instructions per group, and
     * copied the sum through 32 moves per term; bench/results/r67). */
    struct Two {
        size_t lo_p, hi_p, lo_m, hi_m; /* group ranges: peer's, mine */
        uint8_t *rs_out, *rs_in, *ag_out, *ag_in; /* slot bases, column 0 */
    };
    /* Group slot t (0 .. kCol-1) of column col; the three stages as scatter /
     * reduce / gather, for one group per thread. */
    static __device__ __forceinline__ void a2(const Ctx &x, const Two &w, size_t col, int t) {
        const size_t g = w.lo_p + col * kCol + t;
        if (g >= w.hi_p) return;
        float v[32];
        Codes cd;
        IO::load_dom(x, g, v);
        const uint16_t sc = S::quant_in(v, cd);
        put(w.rs_out + col * P::kBytes, t, cd, sc);
    }
    static __device__ __forceinline__ void b2(const Ctx &x, const Two &w, size_t col, int t, bool &alive) {
        const size_t g = w.lo_m + col * kCol + t;
        if (g >= w.hi_m) return;
        float acc[32], v[32];
        Codes c;
        IO::load_dom(x, g, acc);
        const uint16_t sp = get(x, w.rs_in + col * P::kBytes, t, c, 2, 1 - x.a.rank, alive);
        BCd::dequant_raw(c, sp, v);
        S::sum2(acc, v);
        const uint16_t sc = BCd::quant(acc, c);
        put(w.ag_out + col * P::kBytes, t, c, sc);
        BCd::dequant_raw(c, sc, v);
        IO::store_codec(x, g, v, sc);
    }
    static __device__ __forceinline__ void c2(const Ctx &x, const Two &w, size_t col, int t, bool &alive) {
        const size_t g = w.lo_p + col * kCol + t;
        if (g >= w.hi_p) return;
        Codes c;
        float v[32];
        const uint16_t sc = get(x, w.ag_in + col * P::kBytes, t, c, 3, 1 - x.a.rank, alive);
        BCd::dequant_raw(c, sc, v);
        IO::store_codec(x, g, v, sc);
    }
    /* Work units: a warp's share of a column, unit u = (column u / U, slot
     * u % U) with U = kUnitsPerCol = kCol / 32, groups lo + (u / U) * kCol +
     * (u % U) * 32 + lane (the same groups, slot words and bits as one group
     * per thread of a column). Every warp runs its own pipeline over the
     * units it takes, with no barrier: warp w of CTA b (global warp gw =
     * b * U + w of Gw) starts with units gw and gw + Gw, then takes 2 Gw +
     * (ctr++) (ctr = ctl[2], zeroed by the last CTA out), lane 0's atomic
     * issued at the start of a step and its result used at the end of the
     * next one (the latency hides behind two steps), broadcast with a shuffle.
     * Why (r75, bench/diag/ll_trace.c: the static deal of whole columns,
     * column b + k*G to CTA b): CTAs progress at different rates (INT4 96 MB: the third
     * step starts 6.3-18.1 us into the launch; the CTAs end 66-97 us, median
     * 88), and the launch waits for its slowest CTA. r76 took whole columns
     * per CTA from the counter (a barrier per step): 96 MB INT4 103 -> 100
     * us, INT4_H 126 -> 122, but 32 MB INT4_H 51 -> 54.5 (the barrier) and
     * still a column's step (~7 us) of tail at the end.
     * Progress (no deadlock): each rank's units are taken in increasing
     * order (static ones first), and a warp runs its units' stages in taking
     * order. Take the smallest unit m any blocked wait is for. If a warp of
     * rank X waits in B(m) for the peer's A(m): were m taken on the peer by a
     * warp Q, Q would have done A(m) unless blocked on an earlier, smaller
     * unit of its own; were m not taken yet, every peer warp would be blocked
     * on a unit below the peer's counter, hence below m; either way a smaller
     * blocked unit. If it waits in C(m) for the peer's B(m): Q did A(m), and
     * B(m) follows with only smaller units' stages between and waits for my
     * A(m), done. So no wait is blocked forever while the grid is
     * co-resident (the launcher's cap), or it times out (bounded). */
    static __device__ void run2(const Ctx &x, int ncol, bool &alive, uint32_t *ctr) {
        const int me = x.a.rank, peer = 1 - me;
        const Two w{x.glo(peer), x.glo(peer + 1), x.glo(me), x.glo(me + 1),
                    lslot(x, peer, kRs, me), lslot(x, me, kRs, peer),
                    lslot(x, peer, kAg, me), lslot(x, me, kAg, peer)};
        constexpr int kUnitsPerCol = kCol / 32;
        const int lane = (int)threadIdx.x & 31, nunit = ncol * kUnitsPerCol;
        const int Gw = (int)gridDim.x * kUnitsPerCol;
        const int gw = (int)blockIdx.x * kUnitsPerCol + ((int)threadIdx.x >> 5);
#ifdef TPM_LL_TRACE
        const bool tr = threadIdx.x == 0 && blockIdx.x < (unsigned)kTrCtas;
        const int b = (int)blockIdx.x;
#define TPM_LL_MARK(j, k) \
    if (tr && (j) < kTrSteps) ll_trace[b][1 + (j)][k] = globaltimer()
#else
#define TPM_LL_MARK(j, k)
#endif
        /* this step's A, B, C units and the next A (nunit: none) */
        int ua = gw < nunit ? gw : nunit, ub = nunit, uc = nunit;
        int un = gw + Gw < nunit ? gw + Gw : nunit;
        int j = 0;
        for (;; j++) {
            const bool take = un < nunit; /* warp-uniform */
            uint32_t got = 0;
            if (take && lane == 0) got = (uint32_t)(2 * Gw) + atomicAdd(ctr, 1u);
            TPM_LL_MARK(j, 0);
            if (ua < nunit) a2(x, w, (size_t)(ua / kUnitsPerCol), (ua % kUnitsPerCol) * 32 + lane);
            TPM_LL_MARK(j, 1);
            if (ub < nunit) b2(x, w, (size_t)(ub / kUnitsPerCol), (ub % kUnitsPerCol) * 32 + lane, alive);
            TPM_LL_MARK(j, 2);
            if (uc < nunit) c2(x, w, (size_t)(uc / kUnitsPerCol), (uc % kUnitsPerCol) * 32 + lane, alive);
            TPM_LL_MARK(j, 3);
            uc = ub;
            ub = ua;
            ua = un;
            un = nunit;
            if (take) {
                const uint32_t u = __shfl_sync(0xffffffffu, got, 0);
                un = u < (uint32_t)nunit ? (int)u : nunit;
            }
            if (ua >= nunit && ub >= nunit && uc >= nunit) break;
        }
#ifdef TPM_LL_TRACE
        if (tr) ll_trace[b][0][3] = (unsigned long long)(j - 1); /* units run by warp 0 (steps - 2) */
#endif
#undef TPM_LL_MARK
    }
};

/* CTAs per SM: two, as the flag kernels (<= 128 registers). Three (<= 80
 * registers, 24-48 bytes of spills in the codec kernels; commit 7089819)
 * measured no faster for INT4 / INT8 (bench/results/r64, back to back with
 * two: INT4 32 MB 45.4-46.1 us against 44.8-45.1, INT8 68.6-71.1 against
 * 67.3-67.7) and 2-4% faster only for the rotated codecs at 96 MB. */
constexpr int kLlCtasPerSm = 2;

template <int DT, int C>
__global__ void __launch_bounds__(kCol, kLlCtasPerSm) twoshot_ll_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
#ifdef TPM_LL_TRACE
    const unsigned long long t_entry = globaltimer();
#endif
    using L = Ll<DT, C>;
    bool alive = true;
    if constexpr (C != TPM_CODEC_NONE) {
        if (a.world == 2) {
            int mine;
            const Ctx x = Ctx::begin(a, mine);
#ifdef TPM_LL_TRACE
            if (threadIdx.x == 0 && blockIdx.x < (unsigned)kTrCtas) {
                ll_trace[blockIdx.x][0][0] = t_entry;
                ll_trace[blockIdx.x][0][1] = globaltimer();
            }
#endif
            L::run2(x, x.ncols(), alive, a.ctl + 2); /* ctl[2]: the unit counter (cuda_comm.h) */
#ifdef TPM_LL_TRACE
            if (threadIdx.x == 0 && blockIdx.x < (unsigned)kTrCtas) ll_trace[blockIdx.x][0][2] = globaltimer();
#endif
            epoch_end(a, x.epoch, a.ctl + 2);
            return;
        }
    }
    int mine;
    const Ctx x = Ctx::begin(a, mine);
    const int G = (int)gridDim.x, b = (int)blockIdx.x;
    for (int k = 0; k < mine; k++) L::scatter(x, b + k * G);
    for (int k = 0; k < mine; k++) L::reduce(x, b + k * G, alive);
    for (int k = 0; k < mine; k++) L::gather(x, b + k * G, alive);
    epoch_end(a, x.epoch);
}

template <int C> void launch_c(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    switch (a->dtype) {
    case TPM_DTYPE_BF16: twoshot_ll_kernel<0, C><<<grid, kCol, 0, s>>>(*a); break;
    case TPM_DTYPE_FP16: twoshot_ll_kernel<1, C><<<grid, kCol, 0, s>>>(*a); break;
    default: twoshot_ll_kernel<2, C><<<grid, kCol, 0, s>>>(*a); break;
    }
}

} /* namespace */

#ifdef TPM_LL_TRACE
/* Copy the current device's trace (kTrCtas x (kTrSteps + 1) x 4 values) to host. */
extern "C" int tpm_ll_trace_read(unsigned long long *host, int *ctas, int *steps) {
    *ctas = kTrCtas;
    *steps = kTrSteps;
    return cudaMemcpyFromSymbol(host, ll_trace, sizeof ll_trace) == cudaSuccess ? 0 : -1;
}
#endif

size_t twoshot_ll_payload_bytes(int dtype, int codec) {
    switch (codec) {
    case TPM_CODEC_NONE: return LlPayload<0, TPM_CODEC_NONE>::kBytes * (dtype == TPM_DTYPE_FP32 ? 2 : 1);
    case TPM_CODEC_INT6:
    case TPM_CODEC_INT6_H: return LlPayload<0, TPM_CODEC_INT6>::kBytes;
    case TPM_CODEC_INT4:
    case TPM_CODEC_INT4_H: return LlPayload<0, TPM_CODEC_INT4>::kBytes;
    default: return LlPayload<0, TPM_CODEC_INT8>::kBytes;
    }
}

int twoshot_ll_launch(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    /* a->grid is two CTAs per SM: this kernel's cap is kLlCtasPerSm per SM,
     * all co-resident (its waits need every CTA of both ranks running) */
    const size_t ngrp = (a->count + 31) / 32, seg = (ngrp + a->world - 1) / a->world;
    const size_t ncol = (seg + kCol - 1) / kCol, cap = (size_t)(a->grid / 2) * kLlCtasPerSm;
    grid = (int)(ncol < cap ? ncol : cap);
    if (grid < 1) grid = 1;
    switch (a->codec) {
    case TPM_CODEC_NONE: launch_c<TPM_CODEC_NONE>(a, grid, s); break;
    case TPM_CODEC_INT8: launch_c<TPM_CODEC_INT8>(a, grid, s); break;
    case TPM_CODEC_INT6: launch_c<TPM_CODEC_INT6>(a, grid, s); break;
    case TPM_CODEC_INT4: launch_c<TPM_CODEC_INT4>(a, grid, s); break;
    case TPM_CODEC_FP8: launch_c<TPM_CODEC_FP8>(a, grid, s); break;
    case TPM_CODEC_INT4_H: launch_c<TPM_CODEC_INT4_H>(a, grid, s); break;
    case TPM_CODEC_INT6_H: launch_c<TPM_CODEC_INT6_H>(a, grid, s); break;
    default: return -1;
    }
    return 0;
}

} /* namespace tpm_cuda */

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(twoshot_ll, (tpm_cuda::twoshot_ll_kernel<0, TPM_CODEC_NONE>))
