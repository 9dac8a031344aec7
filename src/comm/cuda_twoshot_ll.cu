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
 * column c of every segment run by CTA c % grid on every rank, one group
 * (codecs) or kWU 16-byte words (exact) per thread and column. Every CTA
 * runs, for its columns b, b + grid, ...:
 *   A  for every owner s != me: my input of (s, c) [quantize] -> s's rs
 *      slot [me];
 *   B  for my own (me, c): poll the W-1 rs slots until my words are there,
 *      put the sentinel back, sum the W terms in fp32 in rank order 0..W-1
 *      (my own term from my input) [re-quantize], push the result into
 *      every peer's ag slot [me], write my output from the pushed bits;
 *   C  for every owner s != me: poll my ag slot [s], put the sentinel back,
 *      [decode], write my output.
 * A for all of a CTA's columns first (it never waits), then B, then C: a
 * thread waits only for words its partner thread on the peer (same CTA
 * index, same thread) pushes in an earlier phase that never waits, so every
 * wait ends while the grid is co-resident (grid <= 2 CTAs per SM, the
 * launcher's cap), or times out (bounded like every wait: TPM_ERR_TIMEOUT in
 * the host-mapped error words, stage 2 / 3).
 *
 * Ready markers (every slot word starts as the all-ones sentinel: the
 * region is set to 0xff at init and after the P2P probe, and whenever a
 * communicator switches to this set; every reader restores what it read):
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
 */
#include "comm/cuda_twoshot.cuh"

#include <cuda_runtime.h>

namespace tpm_cuda {
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
#pragma unroll
        for (int k = 0; k < P::kNt; k++) {
            Spin sp;
            while (alive && w[k] == 0xffffffffu) {
                if (!sp.tick(x.a, stage, peer)) alive = false;
                w[k] = ld_volatile4(col + ((size_t)k * kCol + t) * 4);
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
            uint8_t *dst = x.slot(s, kRs, me) + (size_t)col * P::kBytes;
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
                const uint16_t sc = BCd::quant(v, cd);
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
                    uint8_t *src = x.slot(me, kRs, r) + off;
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
                        *(uint4 *)(x.slot(q, kAg, me) + off + (w - w0) * 16) = res;
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
                    const uint16_t sc = get(x, x.slot(me, kRs, r) + off, t, c, 2, r, alive);
                    BCd::dequant(c, sc, v);
                }
#pragma unroll
                for (int k = 0; k < 32; k++) acc[k] = r == 0 ? v[k] : acc[k] + v[k];
            }
            const uint16_t sc = BCd::quant(acc, c);
            for (int d = 1; d < W; d++) {
                const int q = me + d < W ? me + d : me + d - W;
                put(x.slot(q, kAg, me) + off, t, c, sc);
            }
            BCd::dequant(c, sc, v);
            IO::store_dom(x, g0 + t, v);
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
            uint8_t *src = x.slot(me, kAg, s) + off;
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
                BCd::dequant(c, sc, v);
                IO::store_dom(x, g0 + t, v);
            }
        }
    }
};

/* MARK: quad groups (INT8 / INT4 / INT4_H; kernel twoshot_llq_kernel)
 * Four lanes of a warp own one group (lane j = lane & 3 holds values
 * 8j..8j+7), so a thread keeps 8 values instead of 32: 64 registers, four
 * CTAs of 256 threads per SM instead of two, and a group's longest chain is
 * 8 compares and two shuffles instead of 31 compares. Same arithmetic as
 * FastIntCodec value by value (the first maximum: each lane's first strict
 * maximum, then pairs keep the larger magnitude, on a tie the lower index;
 * the same scale; the same per-value quantize / dequantize), so the same
 * codes, scales and outputs. Lane j's 8 codes are code word j (INT4) or
 * words 2j, 2j+1 (INT8) of the group. Slot layout (per column): the code
 * words group-major (word k of group g at (g * kNc + k) * 4: a warp's 8
 * groups are 128 / 256 contiguous bytes), then one tagged scale word per
 * group at (kNc * kCol + g) * 4, as in Ll. A column's 256 groups take four
 * passes of 64 groups per CTA. Every lane calls the shuffles and ballots
 * (full mask); a lane past the segment computes on zeros and neither polls
 * nor stores. */
template <int FMT> struct FastQuad {
    static constexpr int kBits = FMT == TPM_FMT_INT4 ? 4 : 8;
    static constexpr int kL = kBits == 8 ? 2 : 1; /* code words per lane */
    static constexpr int kQneg = 1 << (kBits - 1);

    static __device__ __forceinline__ uint16_t quant(const float *v, int j, uint32_t *w) {
        uint32_t best = __float_as_uint(v[0]) & 0x7fffffffu;
        float m = v[0];
        int mi = 0;
#pragma unroll
        for (int k = 1; k < 8; k++) {
            const uint32_t a = __float_as_uint(v[k]) & 0x7fffffffu;
            if (a > best) best = a, m = v[k], mi = k;
        }
        int idx = 8 * j + mi;
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1) {
            const float pm = __shfl_xor_sync(0xffffffffu, m, o);
            const int pi = __shfl_xor_sync(0xffffffffu, idx, o);
            const uint32_t pb = __float_as_uint(pm) & 0x7fffffffu;
            if (pb > best || (pb == best && pi < idx)) best = pb, m = pm, idx = pi;
        }
#pragma unroll
        for (int i = 0; i < kL; i++) w[i] = 0;
        if (best >= 0x7f800000u) return (uint16_t)TPM_CODEC_SCALE_POISON;
        float inv;
        const uint16_t sb = tpm_codec_scale(FMT, m, &inv);
        const float lo = (float)(-kQneg), hi = (float)(kQneg - 1);
        const float cq = 12582912.0f + (float)kQneg;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float y = v[k] * inv;
            y = fminf(fmaxf(y, lo), hi);
            const uint32_t u = __float_as_uint(__fadd_rn(y, cq)) & ((1u << kBits) - 1u);
            w[(k * kBits) / 32] |= u << ((k * kBits) % 32);
        }
        return sb;
    }
    static __device__ __forceinline__ void dequant(const uint32_t *w, uint16_t sb, float *v) {
        if (tpm_codec_scale_poisoned(sb)) {
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = __uint_as_float(TPM_CODEC_NAN_BITS);
            return;
        }
        const float s = tpm_bf16_to_f32(sb);
        const float cq = 8388608.0f + (float)kQneg;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t u = (w[(k * kBits) / 32] >> ((k * kBits) % 32)) & ((1u << kBits) - 1u);
            v[k] = __fmul_rn(__fsub_rn(__uint_as_float(0x4b000000u | u), cq), s);
        }
    }
};

/* Bit j of a 4-bit nibble -> bit 2j. */
__device__ __forceinline__ uint32_t spread4(uint32_t x) {
    return (x & 1u) | ((x & 2u) << 1) | ((x & 4u) << 2) | ((x & 8u) << 3);
}

template <int DT, int C> struct LlQuad {
    using S = Stages<DT, C, 1>;
    using Q = FastQuad<tpm_codec_fmt_c(C)>;
    using P = LlPayload<DT, C>;
    static constexpr bool kRotate = C == TPM_CODEC_INT4_H;
    static constexpr int kL = Q::kL, kNc = P::kNc;
    static_assert(kNc == 4 * kL, "a quad covers the group's code words");
    static constexpr int kPass = kCol / 64; /* 64 groups per CTA pass */

    static __device__ __forceinline__ void load(const Ctx &x, size_t g, int j, bool ok, float *v) {
        if (ok) {
            const F8 f = load8<DT>(x.a.in, g * 32 + 8 * j, x.a.count, x.in_al);
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = f.v[k];
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = 0.0f;
        }
        if constexpr (kRotate) quad_hadamard(v, j);
    }
    static __device__ __forceinline__ void store(const Ctx &x, size_t g, int j, bool ok, float *v) {
        if constexpr (kRotate) quad_hadamard(v, j);
        if (!ok) return;
        F8 f;
#pragma unroll
        for (int k = 0; k < 8; k++) f.v[k] = v[k];
        store8<DT>(x.a.out, g * 32 + 8 * j, x.a.count, x.out_al, f);
    }
    /* Tagged words of group gl (column-local) into col: lane j's code words
     * with bit 31 cleared, lane 0 the scale word with the quad's top bits. */
    static __device__ __forceinline__ void put(uint8_t *col, int gl, int j, bool ok, const uint32_t *w, uint16_t sb) {
        const int lane = threadIdx.x & 31, q0 = lane & ~3;
        uint32_t tops;
        if constexpr (kL == 1) {
            tops = (__ballot_sync(0xffffffffu, (w[0] >> 31) != 0) >> q0) & 15u;
        } else {
            const uint32_t t0 = (__ballot_sync(0xffffffffu, (w[0] >> 31) != 0) >> q0) & 15u;
            const uint32_t t1 = (__ballot_sync(0xffffffffu, (w[1] >> 31) != 0) >> q0) & 15u;
            tops = spread4(t0) | (spread4(t1) << 1);
        }
        if (!ok) return;
        uint32_t *cw = (uint32_t *)col + (size_t)gl * kNc + kL * j;
        if constexpr (kL == 1) cw[0] = w[0] & 0x7fffffffu;
        else *(uint2 *)cw = make_uint2(w[0] & 0x7fffffffu, w[1] & 0x7fffffffu);
        if (j == 0) ((uint32_t *)col)[(size_t)kNc * kCol + gl] = (uint32_t)sb | (tops << 16);
    }
    /* Poll group gl's words (lane j its code words, lane 0 also the scale
     * word) until none is all-ones, put the sentinel back, unpack. */
    static __device__ __forceinline__ uint16_t get(const Ctx &x, uint8_t *col, int gl, int j, bool ok, uint32_t *w,
                                                   int stage, int peer, bool &alive) {
        uint32_t *cw = (uint32_t *)col + (size_t)gl * kNc + kL * j;
        uint32_t *sw_p = (uint32_t *)col + (size_t)kNc * kCol + gl;
        uint32_t sw = 0;
#pragma unroll
        for (int i = 0; i < kL; i++) w[i] = 0;
        if (ok) {
#pragma unroll
            for (int i = 0; i < kL; i++) w[i] = ld_volatile4(cw + i);
            if (j == 0) sw = ld_volatile4(sw_p);
            Spin sp;
#pragma unroll
            for (int i = 0; i < kL; i++)
                while (alive && w[i] == 0xffffffffu) {
                    if (!sp.tick(x.a, stage, peer)) alive = false;
                    w[i] = ld_volatile4(cw + i);
                }
            while (j == 0 && alive && sw == 0xffffffffu) {
                if (!sp.tick(x.a, stage, peer)) alive = false;
                sw = ld_volatile4(sw_p);
            }
#pragma unroll
            for (int i = 0; i < kL; i++) cw[i] = 0xffffffffu;
            if (j == 0) *sw_p = 0xffffffffu;
        }
        sw = __shfl_sync(0xffffffffu, sw, (threadIdx.x & 31) & ~3);
#pragma unroll
        for (int i = 0; i < kL; i++) w[i] |= ((sw >> (16 + kL * j + i)) & 1u) << 31;
        return (uint16_t)(sw & 0xffffu);
    }

    static __device__ void scatter(const Ctx &x, int col) {
        const int me = x.a.rank, W = x.a.world, j = threadIdx.x & 3;
        for (int d = 1; d < W; d++) {
            const int s = me + d < W ? me + d : me + d - W;
            size_t g0, g1;
            S::range(x, s, col, g0, g1);
            uint8_t *dst = x.slot(s, kRs, me) + (size_t)col * P::kBytes;
            for (int p = 0; p < kPass; p++) {
                const int gl = p * 64 + (threadIdx.x >> 2);
                const bool ok = g0 + gl < g1;
                float v[8];
                uint32_t w[kL];
                load(x, g0 + gl, j, ok, v);
                const uint16_t sb = Q::quant(v, j, w);
                put(dst, gl, j, ok, w, sb);
            }
        }
    }

    static __device__ void reduce(const Ctx &x, int col, bool &alive) {
        const int me = x.a.rank, W = x.a.world, j = threadIdx.x & 3;
        size_t g0, g1;
        S::range(x, me, col, g0, g1);
        const size_t off = (size_t)col * P::kBytes;
        for (int p = 0; p < kPass; p++) {
            const int gl = p * 64 + (threadIdx.x >> 2);
            const bool ok = g0 + gl < g1;
            float acc[8], v[8];
            uint32_t w[kL];
            for (int r = 0; r < W; r++) {
                if (r == me) {
                    load(x, g0 + gl, j, ok, v);
                } else {
                    const uint16_t sb = get(x, x.slot(me, kRs, r) + off, gl, j, ok, w, 2, r, alive);
                    Q::dequant(w, sb, v);
                }
#pragma unroll
                for (int k = 0; k < 8; k++) acc[k] = r == 0 ? v[k] : acc[k] + v[k];
            }
            const uint16_t sb = Q::quant(acc, j, w);
            for (int d = 1; d < W; d++) {
                const int q = me + d < W ? me + d : me + d - W;
                put(x.slot(q, kAg, me) + off, gl, j, ok, w, sb);
            }
            Q::dequant(w, sb, v);
            store(x, g0 + gl, j, ok, v);
        }
    }

    static __device__ void gather(const Ctx &x, int col, bool &alive) {
        const int me = x.a.rank, W = x.a.world, j = threadIdx.x & 3;
        const size_t off = (size_t)col * P::kBytes;
        for (int d = 1; d < W; d++) {
            const int s = me + d < W ? me + d : me + d - W;
            size_t g0, g1;
            S::range(x, s, col, g0, g1);
            uint8_t *src = x.slot(me, kAg, s) + off;
            for (int p = 0; p < kPass; p++) {
                const int gl = p * 64 + (threadIdx.x >> 2);
                const bool ok = g0 + gl < g1;
                float v[8];
                uint32_t w[kL];
                const uint16_t sb = get(x, src, gl, j, ok, w, 3, s, alive);
                Q::dequant(w, sb, v);
                store(x, g0 + gl, j, ok, v);
            }
        }
    }
};

template <int DT, int C>
__global__ void __launch_bounds__(kCol, 4) twoshot_llq_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    int mine;
    const Ctx x = Ctx::begin(a, mine);
    using L = LlQuad<DT, C>;
    const int G = (int)gridDim.x, b = (int)blockIdx.x;
    bool alive = true;
    for (int k = 0; k < mine; k++) L::scatter(x, b + k * G);
    for (int k = 0; k < mine; k++) L::reduce(x, b + k * G, alive);
    for (int k = 0; k < mine; k++) L::gather(x, b + k * G, alive);
    epoch_end(a, x.epoch);
}

template <int DT, int C>
__global__ void __launch_bounds__(kCol, 2) twoshot_ll_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    int mine;
    const Ctx x = Ctx::begin(a, mine);
    using L = Ll<DT, C>;
    const int G = (int)gridDim.x, b = (int)blockIdx.x;
    bool alive = true;
    for (int k = 0; k < mine; k++) L::scatter(x, b + k * G);
    for (int k = 0; k < mine; k++) L::reduce(x, b + k * G, alive);
    for (int k = 0; k < mine; k++) L::gather(x, b + k * G, alive);
    epoch_end(a, x.epoch);
}

/* INT8, INT4 and INT4_H run the quad kernel (four CTAs per SM: grid up to
 * twice the launcher's two per SM), the others one thread per group. */
template <int C> void launch_c(const tpm_cuda_ar_args *a, int grid, cudaStream_t s) {
    constexpr bool kQuad = C == TPM_CODEC_INT8 || C == TPM_CODEC_INT4 || C == TPM_CODEC_INT4_H;
    if constexpr (kQuad) {
        const size_t ngrp = (a->count + 31) / 32, seg = (ngrp + a->world - 1) / a->world;
        const size_t ncol = (seg + kCol - 1) / kCol, cap = 2 * (size_t)a->grid;
        const int gq = (int)(ncol < cap ? ncol : cap);
        switch (a->dtype) {
        case TPM_DTYPE_BF16: twoshot_llq_kernel<0, C><<<gq, kCol, 0, s>>>(*a); break;
        case TPM_DTYPE_FP16: twoshot_llq_kernel<1, C><<<gq, kCol, 0, s>>>(*a); break;
        default: twoshot_llq_kernel<2, C><<<gq, kCol, 0, s>>>(*a); break;
        }
        (void)grid;
    } else {
        switch (a->dtype) {
        case TPM_DTYPE_BF16: twoshot_ll_kernel<0, C><<<grid, kCol, 0, s>>>(*a); break;
        case TPM_DTYPE_FP16: twoshot_ll_kernel<1, C><<<grid, kCol, 0, s>>>(*a); break;
        default: twoshot_ll_kernel<2, C><<<grid, kCol, 0, s>>>(*a); break;
        }
    }
}

} /* namespace */

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
