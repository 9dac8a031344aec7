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
 * per step (twoshot2_kernel, below). Set 9 at world 2, and the
 * default set 10 for exact / INT8 / INT6 launches from 16 MiB, run A, B and
 * C in different warps instead (cuda_twoshot_ws.cu). The pieces every
 * kernel shares (payload layout, context, stages) are in cuda_twoshot.cuh.
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
#include "core/cuda_preload.h"
#include "comm/cuda_twoshot.cuh"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

template <int DT, int C, int V>
__global__ void __launch_bounds__(kCol, 2) twoshot_kernel(const __grid_constant__ tpm_cuda_ar_args a) {
    int mine;
    const Ctx x = Ctx::begin(a, mine);
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
    int mine;
    const Ctx x = Ctx::begin(a, mine);
    const int me = a.rank, q = 1 - a.rank, t = threadIdx.x, G = (int)gridDim.x;
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
                uint16_t sc = S::quant_in(v, c);
                IO::put(x.slot(q, kRs, me) + offa, t, c, sc);
            }
            if (vb) {
                float acc[32];
                Codes c;
                rb.template dom<BCd::kRotate>(x, bg0 + t, acc);
                BCd::dequant_raw(cpb, spb, v);
#pragma unroll
                for (int i = 0; i < 32; i++) acc[i] = me == 0 ? acc[i] + v[i] : v[i] + acc[i];
                uint16_t sc = BCd::quant(acc, c);
                IO::put(x.slot(q, kAg, me) + offb, t, c, sc);
                BCd::dequant_raw(c, sc, v);
                IO::store_codec(x, bg0 + t, v, sc);
            }
            if (vc) {
                BCd::dequant_raw(cpc, spc, v);
                IO::store_codec(x, cg0 + t, v, spc);
            }
        }
        /* 5. release */
        __syncthreads();
        if (t == 0 && doA) st_release_sys(x.flag(q, kRs, me, ca), x.epoch);
        if (t == 1 && doB) st_release_sys(x.flag(q, kAg, me, cb), x.epoch);
    }
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
    if (v == TPM_CUDA_LL_SET) { /* every world, dtype and codec */
        twoshot_ll_launch(a, grid, s);
        return;
    }
    if (v >= 2 && a->world == 2 && (C != TPM_CODEC_NONE || a->dtype != TPM_DTYPE_FP32)) {
        if (v == 7)
            launch_v<C, 7>(a, grid, s);
        else if (v == 9 && twoshot_ws_launch(a, grid, s, 9) == 0)
            ; /* cuda_twoshot_ws.cu, every two-shot size */
        else if ((v == 10 || v == 11 || v == 12 || v >= 14) && ws_pays(a) && twoshot_ws_launch(a, grid, s, 9) == 0)
            ; /* 11, 12, 14-18: retired, = 10 */
        else if (v == 13 && ws_pays(a) && twoshot_ws_launch(a, grid, s, 13) == 0)
            ;
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
    const bool ll = a->variant == TPM_CUDA_LL_SET;
    const size_t pb = ll ? tpm_cuda::twoshot_ll_payload_bytes(a->dtype, a->codec)
                         : tpm_cuda::payload_bytes(a->dtype, a->codec);
    size_t cols = (ll ? TPM_CUDA_TL_SLOT(a->ts_slot) : a->ts_slot) / pb;
    if (cols > TPM_CUDA_TS_MAX_COLS) cols = TPM_CUDA_TS_MAX_COLS;
    /* every owner segment (<= ceil(ngrp/W) groups) must fit in cols columns */
    return cols * tpm_cuda::kCol * 32 * (size_t)a->world - 32 * (size_t)a->world;
}

/* Set 10's codec calls on the flag-free kernel (set 19), where it measured
 * faster than set 10's flag kernels once the codec arithmetic of
 * codec_fast.h made each GPU's work shorter (bench/results/r60, 2 x H200,
 * bf16, us, set 10 flag kernels / flag-free): INT4 2 MB 11.62 / 11.08, 8 MB
 * 19.55 / 15.82, 32 MB 57.76 / 44.47, 96 MB 145.38 / 128.52; INT6 8 MB
 * 21.82 / 18.58, 32 MB 62.95 / 56.53, 96 MB 162.36 / 161.32; INT8 2 MB
 * 12.53 / 14.38, 8 MB 24.28 / 22.46, 32 MB 68.84 / 67.40, 96 MB 177.24 /
 * 192.67; FP8 slower everywhere (32 MB 99.50 / 109.59). So: INT4, INT6 and
 * their rotated forms at every size, INT8 from 4 MB; world 2 and 16-bit
 * dtypes only (what was measured). INT8 was below 64 MB only until the
 * flag-free kernel's world-2 codec path became a pipeline (r71, us, flag /
 * flag-free: 64 MB 124.2 / 117.8, 96 MB 179.4 / 169.6). The rule looks at
 * the whole call, so all its launches run one kernel. */
extern "C" int tpm_cuda_twoshot_set(const tpm_cuda_ar_args *a, size_t count) {
    if (a->variant != 10 || a->world != 2 || a->dtype == TPM_DTYPE_FP32) return a->variant;
    const size_t bytes = count * 2;
    switch (a->codec) {
    case TPM_CODEC_INT4:
    case TPM_CODEC_INT6:
    case TPM_CODEC_INT4_H:
    case TPM_CODEC_INT6_H: return TPM_CUDA_LL_SET;
    case TPM_CODEC_INT8: return bytes >= ((size_t)4 << 20) ? TPM_CUDA_LL_SET : 10;
    default: return 10;
    }
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

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(twoshot, (tpm_cuda::twoshot_reg_kernel<0>))
