/*
 * moe_cuda_route_tc.cu - routing mode 3: the whole routing of up to 256 tokens
 * in ONE launch, the router projection on tensor cores (k_route_tc).
 *
 * Logits: logit[t][e] = sum_h x[t][h] * wr[e][h], wr fp32, x bf16. wr3 holds
 * the exact 3-way bf16 split wr = hi + mid + lo (moe_cuda_route.cu), so each
 * product x * hi / mid / lo is exact in fp32, and the sum of the three is the
 * fp32 product as far as the accumulation keeps it (the same arithmetic as
 * mode 2's cuBLAS GEMM; the accumulation order differs from modes 0 / 1, so
 * the logits are not their bits: selections agree with the reference except
 * on near ties, as mode 2's). NaN / inf weights sit in hi alone.
 *
 * Grid: (X, ceil(T/64)) CTAs of 8 warps in clusters of 8 along x. CTA (cx,
 * tile) owns tokens tile*64 .. +63, every expert (padded to Ep, a multiple of
 * 16) and the 32-wide chunks of H [cx*NC/X, (cx+1)*NC/X) (NC = H/32).
 *  1. Warp w computes experts 16w..16w+15 (and 16(w+8).. when Ep > 128) x the
 *     tile's 8-token n-tiles with mma.sync m16n8k16 (bf16 in, fp32
 *     accumulators; per chunk and k-step: hi, mid, lo). Lane q of a row reads
 *     the 16 bytes h = 8q .. 8q+7; A and B use the same k-permutation (k-step
 *     s: logical k 2q, 2q+1 <-> h 8q+4s, +1 and 2q+8, 2q+9 <-> 8q+4s+2, +3),
 *     so every h is summed once. Three ways to load the fragments, the same
 *     bits (tuning.route_tc_loads): 1 (the default until round 31; faster
 *     than 0: r33) straight from global memory into registers, two chunks
 *     in flight per warp (one when Ep > 128), then their mma; 0 through a
 *     4-stage (Ep > 128: 3) cp.async ring in shared memory (rows: hi, mid, lo
 *     of every expert, then the tile's 64 x rows; 64 bytes per row and stage,
 *     zero-filled past E, T and H); 2 (the default from round 31, r194, to round 50)
 *     straight into registers in a software pipeline of kTcPipe one-chunk
 *     register stages (Ep > 128, round 32: kTcPipe2, a stage holding both
 *     m-tiles' fragments; 254 registers, no spills): the loads of
 *     the next stages' chunks are in flight during a chunk's mma (with
 *     1 and 0 each round of loads waits a full round trip: round 13 found the
 *     warps stalled on their loads), and the router fragments come from wr3f,
 *     wr3 in operand order: each lane's 16-byte load is the four registers of
 *     one mma's A operand (with wr3's rows, ptxas moved the two rows' words
 *     into place before every mma: 4 moves, a branch and a nop per mma, ~8
 *     instructions per mma in all, r193), one 512-byte run per warp load, a
 *     CTA's chunks one contiguous range; the mma of a full n-tile set has no
 *     branches (4 or 8 n-tiles, by the tile's tokens). 3 (the default since
 *     round 51, r278): strategy 2's pipeline on wrf, the fp32 router in
 *     operand order (a lane's rows g and g + 8, h = 8q .. 8q+7: four 16-byte
 *     loads, 512 contiguous bytes per warp load), split into hi / mid / lo in
 *     registers as k_split_router does (cvt.rn.bf16x2.f32): wr3f's words from
 *     two thirds of its bytes.
 *     Wide tiles (tuning.route_tc_wide, the default since round 53; loads 3, Ep <= 128, polled,
 *     at least two clusters per tile, at most kWideMaxC chunks per CTA): 128 tokens per CTA
 *     (grid (X, ceil(T/128)), 16 n-tiles), so at 65-256 tokens a CTA reads half the router
 *     bytes of the 64-token tiles at the same clusters. The CTA's x slice goes to shared memory
 *     first by cp.async (xs[chunk][token][16 bytes]: a warp's B fragments of an n-tile are 512
 *     contiguous bytes), in flight with the first router fragments; the register stages then
 *     hold router fragments alone (16 registers instead of 48), four n-tiles' B fragments are
 *     read from shared memory per step. The same chunks, and per accumulator the same mma order,
 *     as the 64-token tiles: the same bits at the same X. Rank r sums tokens 16r .. 16r+15 in
 *     step 2; in step 3 a tile of more than 64 tokens has its group 2r + h selected by rank r
 *     of cluster SC - 1 - h (one group per CTA), else by rank r of the last cluster.
 *     Expert-split wide tiles (tuning.route_tc_split EG = 2 or 4, round 54; E = 128): cluster scx
 *     holds expert group scx / SCG (Ep / EG experts) over the H slices of its kcl-th cluster of
 *     SCG = SC / EG (so a CTA runs EG times the chunks, at most kWideMaxCS); warp w computes the
 *     group's m-tile w % (8 / EG) over the w / (8 / EG)-th of EG equal runs of the CTA's chunks,
 *     the runs' tiles are added in shared memory in run order, and step 2 sums tiles of Ep / EG
 *     experts (1 / EG of the distributed shared memory reads), always spread over the 8 ranks,
 *     into partial row kcl of the group's columns: each 8-token group polls SCG partials. Other
 *     sums than the 64-token tiles: its own bits, the same in every run.
 *  2. The CTA's partial tile [64][Ep] (fp32) goes to shared memory; cluster
 *     barrier; CTA rank r sums tokens 8r..8r+7 of the tile over the 8 CTAs'
 *     tiles (distributed shared memory, rank order) and writes that cluster's
 *     partial logits[sc][t][e] (sc = cx / 8, SC = X / 8 clusters along H).
 *     Cluster barrier arrive, relaxed (the peers may read our tile until they
 *     arrive; every CTA waits on it before it exits). Push form (route_poll
 *     bit 3, round 51, direct loads; slower in r278, off by default): each
 *     CTA sends n-tile j's partial from its accumulators into rank j's
 *     shared memory with st.async, counted on rank j's mbarrier (armed before
 *     a cluster arrive the senders wait on), and rank j sums its own shared
 *     memory: the same sums in the same order.
 *  3. Ticket per 8-token group (tile_ctr[t/8], block_ticket): the last
 *     of the SC CTAs that wrote the group's partials sums them in sc order
 *     (ld.global.cg) and selects the group's tokens, one warp per token
 *     (select_token). Polled form (tuning.route_poll bit 1, round 50): the
 *     cluster partials go with strong stores (a NaN as 0x7fffffff) to pl3,
 *     which holds the sentinel 0xffffffff between launches; the group's CTA
 *     of the last cluster along H (scx = SC - 1; every CTA is resident at
 *     once) loads all SC partials at once and again those still holding
 *     the sentinel (bounded: past kPollBound, ctr[5]), so the data come with
 *     the poll (no fence, no ticket round trip), sums them in sc order (the
 *     ticket's bits) and writes the sentinel back where it read. Then the
 *     permutation, by T (tuning.route_perm_min):
 *     every selecting CTA writes its group's rows (build_permutation_groups:
 *     the groups arrive on a counter, each waits for the others, counts every
 *     selection in shared memory and places its own pairs; round 49), or a
 *     ticket ctr[2] over the ceil(T/8) groups and the last one builds the
 *     permutation (build_permutation_gathered: counted over the selections
 *     in shared memory up to 80 (token, slot) pairs, else
 *     build_permutation_small's bitmap). Each last CTA zeroes the counters
 *     it won, so the launch replays inside a CUDA graph. Cluster meeting
 *     (round 52; d.route_perm 2, one token tile, polled): the selecting CTAs
 *     are ranks 0 .. ceil(T/8) - 1 of the last cluster along H, so instead of
 *     the groups' global counter that cluster passes a second barrier phase
 *     (its end wait first, then arrive.release / wait.acquire: every group's
 *     selections stored) and each group's CTA places its rows
 *     (place_group_rows, the selections read through L2). Spread poll (route_poll
 *     bit 5, round 55, with the meeting): the tile's items are polled by all 8
 *     ranks of that cluster, each sum stored into the selecting CTA's shared
 *     memory, then the end wait and one more phase before the selection.
 * Every sum has a fixed order, so every run gives the same bits. The host
 * side chooses X so that all clusters are resident at once (the occupancy
 * query at setup); the tickets need no co-residency, only the cluster
 * barriers do (guaranteed for a cluster).
 * The launch triggers its dependents at its start (programmatic dependent
 * launch, like mode 1), so a decode kernel that waits on it may start early.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"
#include "moe_cuda_route_mma.cuh"
#include "moe_cuda_route_sel.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kTcThreads = 256;  /* 8 warps */
constexpr int kTcTokens = 64;    /* tokens per tile: 8 n-tiles of 8 */
constexpr int kTcCluster = 8;    /* CTAs per cluster (along H) */
constexpr int kTcMaxT = 256;
constexpr int kTcMaxSC = 16;     /* clusters along H: partials per token */
constexpr int kTcPipe = 3;       /* loads 2, Ep <= 128: one-chunk register stages (2 chunks in flight per mma) */
constexpr int kTcPipe2 = 2;      /* loads 2, Ep > 128: two m-tiles per warp, a stage twice the registers */
/* loads 3: its register stages (4 + 8 uint4 per m-tile, 2's 6 + 8), Ep <= 128 / Ep > 128; four
 * stages at Ep <= 128 also fit (250 registers, no spills) but were not measured */
constexpr int kTcPipe3 = 3, kTcPipe3_2 = 2;
/* the wide tiles (tuning.route_tc_wide, round 53): 128 tokens (16 n-tiles) per CTA, the x slice of
 * at most kWideMaxC chunks in shared memory, kWideP one-chunk register stages of router fragments */
constexpr int kWideTokens = 128, kWideMaxC = 4, kWideP = 4;
/* the wide tile's expert-split forms (tuning.route_tc_split 2 / 4, round 54): at most this many
 * chunks per CTA (the x slice: 64 KB) */
constexpr int kWideMaxCS = 8;

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int src_bytes) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Stage one chunk (32 h = 64 bytes per row) of every row into a ring slot:
 * rows [0, 3Ep) the router splits (sp = row / Ep, expert row % Ep), rows
 * [3Ep, 3Ep + 64) the tile's tokens; zero-filled past E, T, or the CTA's
 * chunks (h0 < 0). */
__device__ __forceinline__ void stage_chunk(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int T, int Ep,
                                            int t_base, int h0, uint4 *slot) {
    const int rows = 3 * Ep + kTcTokens, E = d.E, H = d.H;
    for (int i = threadIdx.x; i < rows * 4; i += kTcThreads) {
        const int r = i >> 2, q = i & 3;
        const uint16_t *src;
        bool ok;
        if (r < 3 * Ep) {
            const int sp = r / Ep, e = r - sp * Ep;
            ok = e < E && h0 >= 0;
            src = d.wr3 + ((size_t)sp * E + (ok ? e : 0)) * H + (ok ? h0 : 0) + q * 8;
        } else {
            const int t = t_base + r - 3 * Ep;
            ok = t < T && h0 >= 0;
            src = x + (size_t)(ok ? t : 0) * H + (ok ? h0 : 0) + q * 8;
        }
        cp_async16(slot + r * 4 + q, src, ok ? 16 : 0);
    }
}

/* cp.async ring depth (chunks of 32 h): 4 stages of 28 KB at Ep = 128, 3 of 53 KB at Ep = 256 */
template <int MT> constexpr int tc_stages() { return MT == 1 ? 4 : 3; }

/* One chunk (32 h, two k-steps) of a warp's m-tile: a[sp][0 / 1] = rows g / g + 8 of split
 * sp, b[j] = token g of n-tile j, each the 16 bytes h = 8q .. 8q+7. Per accumulator: k-step
 * 0 (hi, mid, lo), then k-step 1; the n-tiles innermost, so consecutive mma are independent. */
__device__ __forceinline__ void mma_chunk(float (&acc)[8][4], const uint4 (&a)[3][2], const uint4 (&b)[8],
                                          int nt_valid) {
#pragma unroll
    for (int sp = 0; sp < 6; sp++) {
        const uint4 &a0 = a[sp % 3][0], &a1 = a[sp % 3][1];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= nt_valid) break; /* block-uniform */
            if (sp < 3) mma_bf16(acc[j], a0.x, a1.x, a0.y, a1.y, b[j].x, b[j].y);
            else mma_bf16(acc[j], a0.z, a1.z, a0.w, a1.w, b[j].z, b[j].w);
        }
    }
}

/* Load strategy 1 (direct): every fragment straight from global memory into registers, CPI
 * chunks' loads in flight per warp before their mma (x rows through L1: the 8 warps read the
 * same ones). No staging in shared memory. */
template <int MT, int CPI>
__device__ __forceinline__ void logits_direct(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int T, int Ep,
                                              int t_base, int c_begin, int nc, int nt_valid, float (&acc)[MT][8][4]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int E = d.E, H = d.H;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int c0 = 0; c0 < nc; c0 += CPI) {
        uint4 a[CPI][MT][3][2], b[CPI][8];
#pragma unroll
        for (int ci = 0; ci < CPI; ci++) {
            const bool cv = c0 + ci < nc;
            const int h = (c_begin + c0 + ci) * 32 + 8 * q;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int m0 = (warp + 8 * mt) * 16;
#pragma unroll
                for (int sp = 0; sp < 3; sp++)
#pragma unroll
                    for (int hf = 0; hf < 2; hf++) {
                        const int e = m0 + g + 8 * hf;
                        a[ci][mt][sp][hf] = cv && e < E ? __ldg(reinterpret_cast<const uint4 *>(
                                                              d.wr3 + ((size_t)sp * E + e) * H + h))
                                                        : zero;
                    }
            }
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int t = t_base + 8 * j + g;
                b[ci][j] = cv && j < nt_valid && t < T ? __ldg(reinterpret_cast<const uint4 *>(x + (size_t)t * H + h))
                                                       : zero;
            }
        }
#pragma unroll
        for (int ci = 0; ci < CPI; ci++) {
            if (c0 + ci >= nc) break;
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                if ((warp + 8 * mt) * 16 >= Ep) break; /* warp-uniform */
                mma_chunk(acc[mt], a[ci][mt], b[ci], nt_valid);
            }
        }
    }
}

/* Load strategy 2: chunk c's fragments of this warp into one register stage, the router's
 * from wr3f (per m-tile 6 loads of 512 contiguous bytes per warp; warp w owns m-tiles w and,
 * when Ep > 128, w + 8), the x rows' of NT n-tiles as strategy 1; zeros where the chunk is
 * past the CTA's range (cv) or the warp has no such m-tile. */
template <int MT, int NT, int LOADS, int NA = LOADS == 3 ? 2 : 3>
__device__ __forceinline__ void pipe_load(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int T, int Ep,
                                          int t_base, int c, bool cv, uint4 (&f)[MT][NA][2], uint4 (&b)[8]) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, H = d.H;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int m = warp + 8 * mt;
        const bool av = cv && m * 16 < Ep;
        /* 2: wr3f, [split][k-step]; 3: wrf, [row half][k-step] (4 loads instead of 6) */
        const uint4 *af = (LOADS == 3 ? reinterpret_cast<const uint4 *>(d.wrf)
                                      : reinterpret_cast<const uint4 *>(d.wr3f)) +
                          ((size_t)c * (Ep / 16) + m) * (2 * NA) * 32 + lane;
#pragma unroll
        for (int sp = 0; sp < NA; sp++)
#pragma unroll
            for (int ks = 0; ks < 2; ks++) f[mt][sp][ks] = av ? __ldg(af + (2 * sp + ks) * 32) : zero;
    }
    const int h = c * 32 + 8 * q;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        const int t = t_base + 8 * j + g;
        b[j] = cv && t < T ? __ldg(reinterpret_cast<const uint4 *>(x + (size_t)t * H + h)) : zero;
    }
}

/* Strategy 2's pipeline: P register stages of one chunk (P = kTcPipe for one m-tile per warp,
 * kTcPipe2 for two: the registers of a stage double); step c refills the stage step c - 1
 * used with chunk c + P - 1, then runs chunk c's mma (the stage indices static: the loop
 * unrolled P times). The same chunks in the same order per accumulator as strategy 1. NT:
 * the n-tiles computed (4 when the tile holds <= 32 tokens, else 8). */
template <int MT, int NT, int LOADS>
__device__ __forceinline__ void logits_pipe(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int T, int Ep,
                                            int t_base, int c_begin, int nc, float (&acc)[MT][8][4]) {
    constexpr int P = LOADS == 3 ? (MT == 1 ? kTcPipe3 : kTcPipe3_2) : MT == 1 ? kTcPipe : kTcPipe2;
    constexpr int NA = LOADS == 3 ? 2 : 3;
    const int warp = threadIdx.x >> 5;
    uint4 f[P][MT][NA][2], b[P][8];
#pragma unroll
    for (int i = 0; i < P - 1; i++) pipe_load<MT, NT, LOADS>(d, x, T, Ep, t_base, c_begin + i, i < nc, f[i], b[i]);
    for (int c0 = 0; c0 < nc; c0 += P) {
#pragma unroll
        for (int i = 0; i < P; i++) {
            const int c = c0 + i, cn = c + P - 1, sn = (i + P - 1) % P;
            pipe_load<MT, NT, LOADS>(d, x, T, Ep, t_base, c_begin + cn, cn < nc, f[sn], b[sn]);
            if (c < nc) {
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if ((warp + 8 * mt) * 16 >= Ep) continue; /* warp-uniform */
                    if constexpr (LOADS == 3) mma_chunk_f32<NT>(acc[mt], f[i][mt], b[i]);
                    else mma_chunk_f<NT>(acc[mt], f[i][mt], b[i]);
                }
            }
        }
    }
}

/* The wide tile's x slice into shared memory by cp.async (one commit group): xs[cl][t][q] = the
 * 16 bytes h = 32 (c_begin + cl) + 8q .. +7 of token t_base + t (zeros past T); a warp's B
 * fragments of one n-tile are then 512 contiguous bytes. */
__device__ __forceinline__ void stage_x_wide(const uint16_t *__restrict__ x, int T, int H, int t_base, int c_begin,
                                             int nc, uint4 *xs) {
    for (int i = threadIdx.x; i < nc * kWideTokens * 4; i += kTcThreads) {
        const int q = i & 3, t = (i >> 2) & (kWideTokens - 1), cl = i >> 9;
        const bool ok = t_base + t < T;
        cp_async16(xs + i, x + (size_t)(ok ? t_base + t : 0) * H + (c_begin + cl) * 32 + q * 8, ok ? 16 : 0);
    }
    static_assert(kWideTokens * 4 == 512, "xs index: cl = i >> 9");
    cp_async_commit();
}

/* One chunk of the wide tile: wrf's words r split as mma_chunk_f32 does, the B fragments from
 * the chunk's x slice xc in shared memory, four n-tiles at a time (ngrp groups of 4 hold tokens);
 * per accumulator the order of mma_chunk_f: the same bits as the 64-token tiles. */
__device__ __forceinline__ void mma_chunk_wide(float (&acc)[16][4], const uint4 (&r)[2][2], const uint4 *xc,
                                               int ngrp) {
    const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    uint4 f[3][2];
    split_chunk_f32(r, f);
#pragma unroll
    for (int jg = 0; jg < 4; jg++) {
        if (jg >= ngrp) break; /* block-uniform */
        uint4 b[4];
#pragma unroll
        for (int jj = 0; jj < 4; jj++) b[jj] = xc[(8 * (4 * jg + jj) + g) * 4 + q];
#pragma unroll
        for (int st = 0; st < 6; st++) {
            const uint4 &A = f[st % 3][st / 3];
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                if (st < 3) mma_bf16(acc[4 * jg + jj], A.x, A.y, A.z, A.w, b[jj].x, b[jj].y);
                else mma_bf16(acc[4 * jg + jj], A.x, A.y, A.z, A.w, b[jj].z, b[jj].w);
            }
        }
    }
}

/* The wide tile's logits (one m-tile per warp: Ep <= 128): the x slice staged first (in flight
 * with the first kWideP - 1 chunks' router fragments), then loads 3's register pipeline over the
 * router alone (a stage is 16 registers instead of loads 3's 48: the x fragments come from shared
 * memory), the same chunks in the same order. */
template <int EG>
__device__ __forceinline__ void logits_wide(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int T, int Ep,
                                            int t_base, int c_begin, int nc, int ngrp, int eg, uint4 *xs,
                                            float (&acc)[16][4]) {
    constexpr int P = kWideP, MTG = 8 / EG;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* the warp's router m-tile and its share of the CTA's chunks: every chunk (EG 1), or with the
     * experts split in EG groups (Ep 128) m-tile eg MTG + warp % MTG over the warp / MTG-th of
     * EG equal runs of the chunks */
    const int wm = EG == 1 ? warp : eg * MTG + warp % MTG, kq = EG == 1 ? 0 : warp / MTG;
    const int w0 = kq * nc / EG, wn = (kq + 1) * nc / EG - w0;
    const bool wv = wm * 16 < Ep; /* warp-uniform: the warp has router rows */
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    uint4 f[P][2][2];
    auto load = [&](int c, bool cv, uint4(&r)[2][2]) {
        const uint4 *af = reinterpret_cast<const uint4 *>(d.wrf) + ((size_t)(c_begin + w0 + c) * (Ep / 16) + wm) * 4 * 32 + lane;
#pragma unroll
        for (int sp = 0; sp < 2; sp++)
#pragma unroll
            for (int ks = 0; ks < 2; ks++) r[sp][ks] = cv && wv ? __ldg(af + (2 * sp + ks) * 32) : zero;
    };
#pragma unroll
    for (int i = 0; i < P - 1; i++) load(i, i < wn, f[i]);
    stage_x_wide(x, T, d.H, t_base, c_begin, nc, xs);
    cp_async_wait<0>();
    __syncthreads(); /* the x slice landed for every thread */
    for (int c0 = 0; c0 < wn; c0 += P) {
#pragma unroll
        for (int i = 0; i < P; i++) {
            const int c = c0 + i, cn = c + P - 1;
            load(cn, cn < wn, f[(i + P - 1) % P]);
            if (c < wn && wv) mma_chunk_wide(acc, f[i], xs + (size_t)(w0 + c) * kWideTokens * 4, ngrp);
        }
    }
}

/* The push form's cluster stage (route_poll bit 3): shared::cluster addresses, the mbarrier. */
__device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ unsigned mapa_u32(unsigned a, int rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
/* one float into a peer's (or our own) shared memory, counted on its mbarrier mb */
__device__ __forceinline__ void st_async_f32(unsigned a, float v, unsigned mb) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(a),
                 "r"(__float_as_uint(v)), "r"(mb)
                 : "memory");
}
/* wait for phase 0 of the mbarrier mb (bounded: past kPollBound tries it sets *err and goes on) */
__device__ __forceinline__ void mbar_wait0(unsigned mb, int32_t *err) {
    for (int it = 0;; it++) {
        unsigned ok;
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(ok)
                     : "r"(mb)
                     : "memory");
        if (ok) return;
        if (it >= kPollBound) {
            atomicExch(err, 1);
            return;
        }
    }
}

template <int MT, int LOADS, int TT = kTcTokens, int EG = 1>
__global__ void __launch_bounds__(kTcThreads, 1) k_route_tc(tpm_moe_dev d, const uint16_t *__restrict__ x, int T,
                                                            int Ep, int stop, int flags) {
    constexpr bool WIDE = TT == kWideTokens; /* 128-token tiles: MT 1, LOADS 3, polled, no push */
    static_assert(!WIDE || (MT == 1 && LOADS == 3), "the wide tile: one m-tile per warp, loads 3");
    static_assert(EG == 1 || (WIDE && (EG == 2 || EG == 4)), "the expert-split forms: wide tiles, 2 or 4 groups");
    constexpr int TPR = TT / kTcCluster; /* tokens per rank in the cluster's sums: 8 or 16 */
    constexpr int kTcStages = tc_stages<MT>();
    extern __shared__ __align__(16) uint4 ring[];
    __shared__ float sc[kTcThreads / 32][256];
    __shared__ float gsc[kTcThreads / 32][32];
    __shared__ uint32_t bits[kPermSmemWords]; /* also build_permutation_groups' counts */
    static_assert(kGroupPermInts <= kPermSmemWords, "build_permutation_groups' counts fit in bits");
    __shared__ __align__(16) int s_sel[kDirectPairs + 4]; /* build_permutation_gathered */
    __shared__ int s_off[kMaxE1 + 1];
    __shared__ __align__(16) float s_lg[8][32 * kMaxPerLane];
    __shared__ float s_br[32 * kMaxPerLane];
    __shared__ int s_last;
    __shared__ __align__(8) unsigned long long s_mb; /* push: the partial tiles' arrival */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    cg::cluster_group cluster = cg::this_cluster();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int X = (int)gridDim.x, cx = (int)blockIdx.x, tile = (int)blockIdx.y, t_base = tile * TT;
    const int poll = flags & 1;
    /* cluster meeting (flags bit 2, one token tile, polled, the permutation by every group's
     * block): the selecting CTAs are all in the last cluster along H (rank r: group r), so they
     * meet at a cluster barrier (release / acquire: their selections are visible) instead of the
     * global counter of build_permutation_groups; cluster-uniform */
    const bool cmeet = (flags & 4) && (int)blockIdx.x / kTcCluster == (int)gridDim.x / kTcCluster - 1;
    /* push (flags bit 1, direct loads only: the ring is free during the logits): each CTA sends its
     * partial of n-tile j straight from its accumulators into rank j's shared memory (st.async,
     * counted on rank j's mbarrier), so the rank sums its own shared memory: no release fence and
     * barrier after the logits, no remote reads. The mbarrier is set up before a cluster arrive
     * that every sender waits on before its first store. */
    const bool push = LOADS != 0 && !WIDE && (flags & 2);
    if (push) {
        const int rk = (int)cluster.block_rank();
        if (threadIdx.x == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&s_mb)) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
            if (t_base + 8 * rk < T) /* a summing rank: 8 senders x 8 tokens x Ep floats */
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(&s_mb)),
                             "r"(256 * Ep)
                             : "memory");
        }
        asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    }
    const int lin = tile * X + cx; /* trace marks */
    (void)lin;
    TPM_TRACE_MARK_CLK(d, 0, lin);
    TPM_TRACE_MARK(d, 1, 5, lin); /* mode 3's extra marks (kernel 1 slots 3-6: max, kernel 2: min) */
    /* off the critical path, with the first weight loads: the selection bias into shared
     * memory (read after the barriers below), and the lines of the two tickets this CTA may
     * take into L2, so the atomics later do not wait on HBM */
    if (d.br && (int)threadIdx.x < d.E) s_br[threadIdx.x] = __ldg(d.br + threadIdx.x);
    if (threadIdx.x == 0) {
        const int grp = (t_base + 8 * (int)(cx % kTcCluster)) / 8;
        if (grp * 8 < T) asm volatile("prefetch.global.L2 [%0];" ::"l"(d.tile_ctr + grp));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(d.ctr + 2));
    }
    /* clusters along H (SC), and with the experts split in EG groups (Ep 128, round 54): cluster scx
     * holds group eg = scx / SCG's experts over the H slices of its kcl-th cluster of SCG, the CTA
     * the kx-th of the group's Xg along H */
    const int SC = X / kTcCluster, scx = cx / kTcCluster, SCG = SC / EG, eg = scx / SCG, kcl = scx - eg * SCG;
    const int Xg = X / EG, kx = cx - eg * Xg;
    const int NC = d.H / 32, c_begin = (int)((int64_t)kx * NC / Xg), nc = (int)((int64_t)(kx + 1) * NC / Xg) - c_begin;
    const int rows = 3 * Ep + kTcTokens, slot_u4 = rows * 4;
    const int nt_valid = min(TT / 8, (T - t_base + 7) / 8); /* n-tiles holding tokens (>= 1) */

    /* 1. logits of the CTA's chunks */
    float acc[MT][TT / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < TT / 8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][j][i] = 0.0f;
    constexpr bool DIRECT = LOADS != 0;
    if constexpr (WIDE) {
        logits_wide<EG>(d, x, T, Ep, t_base, c_begin, nc, (nt_valid + 3) / 4, eg, ring, acc[0]);
    } else {
    if constexpr (LOADS >= 2) {
        if (nt_valid > 4) logits_pipe<MT, 8, LOADS>(d, x, T, Ep, t_base, c_begin, nc, acc);
        else logits_pipe<MT, 4, LOADS>(d, x, T, Ep, t_base, c_begin, nc, acc);
    }
    else if (DIRECT) logits_direct<MT, MT == 1 ? 2 : 1>(d, x, T, Ep, t_base, c_begin, nc, nt_valid, acc);
#pragma unroll
    for (int s = 0; s < kTcStages - 1; s++) {
        if (DIRECT) break;
        if (s < nc) stage_chunk(d, x, T, Ep, t_base, (c_begin + s) * 32, ring + s * slot_u4);
        cp_async_commit();
    }
    for (int c = 0; c < (DIRECT ? 0 : nc); c++) {
        cp_async_wait<kTcStages - 2>();
        __syncthreads(); /* chunk c landed for every thread; slot (c - 1) % kTcStages is free */
        {
            const int cn = c + kTcStages - 1;
            if (cn < nc) stage_chunk(d, x, T, Ep, t_base, (c_begin + cn) * 32, ring + (cn % kTcStages) * slot_u4);
            cp_async_commit();
        }
        const uint4 *slot = ring + (c % kTcStages) * slot_u4;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int m0 = (warp + 8 * mt) * 16;
            if (m0 >= Ep) break; /* warp-uniform */
            uint4 a[3][2], b[8];
#pragma unroll
            for (int sp = 0; sp < 3; sp++) {
                a[sp][0] = slot[(sp * Ep + m0 + g) * 4 + q];
                a[sp][1] = slot[(sp * Ep + m0 + g + 8) * 4 + q];
            }
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j < nt_valid) b[j] = slot[(3 * Ep + 8 * j + g) * 4 + q];
            mma_chunk(acc[mt], a, b, nt_valid);
        }
    }
    if (!DIRECT) cp_async_wait<0>();
    }
    __syncthreads(); /* every warp is done with the ring (the wide tile's x slice): it becomes the partial tile */
    TPM_TRACE_MARK_CLK(d, 1, lin);
    TPM_TRACE_MARK(d, 2, 3, lin);

    /* 2. the partial tile P[t][e] (row stride Ep + 4 floats: no bank conflicts), then the
     * cluster's sum of 8 tokens per CTA through distributed shared memory */
    float *P = reinterpret_cast<float *>(ring);
    constexpr int MTG = 8 / EG;
    const int EGW = EG == 1 ? Ep : Ep / EG; /* the tile's experts: all, or the group's */
    const int PS = EGW + 4;
    const int rank = (int)cluster.block_rank();
    if (push) { /* into rank j's slot [rank][8 tokens][PS] for n-tile j */
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); /* every mbarrier is set up */
        const unsigned mb = smem_u32(&s_mb), base = smem_u32(P) + (unsigned)(8 * rank * PS) * 4u;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= nt_valid) break;
            const unsigned rb = mapa_u32(base, j), rmb = mapa_u32(mb, j);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                const int m0 = (warp + 8 * mt) * 16;
                if (m0 >= Ep) break;
                const unsigned a = rb + (unsigned)((2 * q) * PS + m0 + g) * 4u;
                st_async_f32(a, acc[mt][j][0], rmb);
                st_async_f32(a + PS * 4u, acc[mt][j][1], rmb);
                st_async_f32(a + 32u, acc[mt][j][2], rmb);
                st_async_f32(a + PS * 4u + 32u, acc[mt][j][3], rmb);
            }
        }
    } else {
        /* the expert-split forms (EG > 1): the EG warps of an m-tile hold partials of EG runs of
         * chunks; run kq goes to tile kq of P (the group's columns), then the whole CTA adds tiles
         * 1 .. EG-1 to tile 0 in run order, a float4 per thread and step (r291: run 0's warps
         * adding them alone, scalar, took 1.0-1.3 us more at 128 tokens) */
        float *Pk = EG == 1 ? P : P + (size_t)(warp / MTG) * TT * PS;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int m0 = EG == 1 ? (warp + 8 * mt) * 16 : (warp % MTG) * 16;
            if (m0 >= Ep) break;
#pragma unroll
            for (int j = 0; j < TT / 8; j++) {
                if (j >= nt_valid) break;
                const int t = 8 * j + 2 * q;
                Pk[t * PS + m0 + g] = acc[mt][j][0];
                Pk[(t + 1) * PS + m0 + g] = acc[mt][j][1];
                Pk[t * PS + m0 + g + 8] = acc[mt][j][2];
                Pk[(t + 1) * PS + m0 + g + 8] = acc[mt][j][3];
            }
        }
        if constexpr (EG > 1) {
            __syncthreads();
            const int C4 = EGW / 4;
            for (int i = threadIdx.x; i < 8 * nt_valid * C4; i += kTcThreads) {
                const int tl = i / C4, off = tl * PS + 4 * (i - tl * C4);
                float4 v = *reinterpret_cast<const float4 *>(P + off);
#pragma unroll
                for (int s2 = 1; s2 < EG; s2++) {
                    const float4 u = *reinterpret_cast<const float4 *>(P + (size_t)s2 * TT * PS + off);
                    v.x += u.x;
                    v.y += u.y;
                    v.z += u.z;
                    v.w += u.w;
                }
                *reinterpret_cast<float4 *>(P + off) = v;
            }
        }
        cluster.sync();
    }
    TPM_TRACE_MARK(d, 1, 3, lin);
    TPM_TRACE_MARK(d, 2, 6, lin);
    /* the items (token tl of the tile, 4 experts e4) this CTA sums: TPR tokens from TPR rank, or
     * spread (flags bit 3, polled, not push, a tile of at most 64 tokens; round 54) the tile's
     * items split evenly over the 8 ranks, so a partial tile (25-64 tokens of a 128-token tile:
     * two to four ranks had all the sums) spreads its distributed shared memory reads over every
     * rank (r291: -0.7 us at 25 tokens, -0.3 at 32-48, level at 64; +0.2..0.4 at 65-96, hence
     * not above 64). The same sums in the same order: the same bits; the polled groups' CTAs
     * take the partials from whichever rank wrote. */
    const int E = d.E, E4 = E / 4;
    const int S4 = EG == 1 ? E4 : EGW / 4, col0 = EG == 1 ? 0 : eg * EGW; /* the items' 4-expert columns */
    const bool spread = poll && !push && (EG > 1 || ((flags & 8) && T - t_base <= 64));
    const int nitems = min(TT, T - t_base) * S4;
    const int i_begin = spread ? rank * nitems / kTcCluster : TPR * rank * S4;
    const int i_end = spread ? (rank + 1) * nitems / kTcCluster : min(TPR * (rank + 1) * S4, nitems);
    if (i_begin < i_end) {
        const float *Pr[kTcCluster]; /* Pr[k] + tl PS: rank k's partial of the tile's token tl */
        if (push) mbar_wait0(smem_u32(&s_mb), d.ctr + 5);
#pragma unroll
        for (int k = 0; k < kTcCluster; k++) Pr[k] = push ? P + 8 * (k - rank) * PS : cluster.map_shared_rank(P, k);
        for (int i = i_begin + (int)threadIdx.x; i < i_end; i += kTcThreads) {
            const int tl = i / S4, e4 = i - tl * S4, t = t_base + tl;
            const int off = tl * PS + 4 * e4;
            float4 s = *reinterpret_cast<const float4 *>(Pr[0] + off);
#pragma unroll
            for (int k = 1; k < kTcCluster; k++) {
                const float4 v = *reinterpret_cast<const float4 *>(Pr[k] + off);
                s.x += v.x;
                s.y += v.y;
                s.z += v.z;
                s.w += v.w;
            }
            if (poll) { /* the polled buffer: strong stores, never the sentinel (a NaN as 0x7fffffff) */
                const float cn = __uint_as_float(0x7fffffffu);
                s.x = isnan(s.x) ? cn : s.x;
                s.y = isnan(s.y) ? cn : s.y;
                s.z = isnan(s.z) ? cn : s.z;
                s.w = isnan(s.w) ? cn : s.w;
                asm volatile("st.relaxed.gpu.global.v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(
                                 d.pl3 + ((size_t)kcl * T + t) * E + col0 + 4 * e4),
                             "f"(s.x), "f"(s.y), "f"(s.z), "f"(s.w)
                             : "memory");
            } else {
                *reinterpret_cast<float4 *>(d.logits + ((size_t)kcl * T + t) * E + col0 + 4 * e4) = s;
            }
        }
        TPM_TRACE_MARK(d, 1, 4, lin);
    }
    /* our tile may still be read by the peers until they arrive; wait before exiting. Relaxed
     * (round 51): the arrive only keeps the tiles alive, every read of a peer's tile has returned
     * (its sum is stored) before it issues, and the partials need no release (polled, or released
     * by the group ticket's own acq_rel atomic); with .release ptxas put a MEMBAR.ALL.GPU here,
     * waiting for the partials' stores before the poll could start (r278: with the selection's
     * change, 0.5-1.5 us faster at 25-256 tokens). */
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    TPM_TRACE_MARK(d, 1, 6, lin);

    /* 3. the group's selection by the last of its SC CTAs, then the permutation by the last group */
    /* poll: the group's block of the last cluster along H polls the SC partials instead of a
     * ticket (every CTA is resident at once: the host's X), and refills them with the sentinel
     * once read (so the buffer is all sentinel between launches); it runs even at stop 1 */
    /* group tgs / 8 (8 tokens from tgs) by rank r: tgs = t_base + 8 r. The wide tile (always
     * polled) with more than 64 tokens: its up to 16 groups' CTAs are ranks of the last two
     * clusters along H, group 2 r + h of the tile by cluster SC - 1 - h (the host keeps SC >= 2),
     * one group per CTA as build_permutation_groups needs; with at most 64 tokens the ranks of the
     * last cluster, as the 64-token tile's (so the cluster meeting applies) */
    const bool sel2 = WIDE && T - t_base > 64;
    const int hsel = SC - 1 - scx, tgs = sel2 ? t_base + 8 * (2 * rank + hsel) : t_base + 8 * rank;
    /* the spread poll (flags bit 4 with the cluster meeting; round 55): the tile's (token, 4-expert)
     * items split evenly over the last cluster's 8 ranks, each polled and summed as the group's
     * CTA would (poll_sum, sc order: the same bits), the sentinel written back, and the sum stored
     * into s_lg of the token's group's rank (distributed shared memory). So a tile of fewer than 64
     * tokens spreads its poll's L2 reads (SCG x 16 bytes per item) over all 8 SMs, not its
     * ceil(T / 8) groups' alone. Then the cluster's end wait and one more barrier phase (release /
     * acquire: every sum stored) before the groups select. Cluster-uniform (cmeet is). */
    const bool spoll = cmeet && (flags & 16);
    if (spoll) {
        TPM_TRACE_MARK_CLK(d, 3, lin);
        const int nit = (T - t_base) * E4, ib = rank * nit / kTcCluster, ie = (rank + 1) * nit / kTcCluster;
        const size_t st4 = (size_t)T * E4;
        for (int i = ib + (int)threadIdx.x; i < ie; i += kTcThreads) {
            const int tl = i / E4, e4 = i - tl * E4, t = t_base + tl;
            const float4 *src = reinterpret_cast<const float4 *>(d.pl3 + (size_t)t * E) + e4;
            const float4 sum = poll_sum<kTcMaxSC>(d.ctr + 5, src, st4, SCG);
            float *dst_lg = cluster.map_shared_rank(&s_lg[tl & 7][4 * e4], tl >> 3);
            *reinterpret_cast<float4 *>(dst_lg) = sum;
            const float4 sent = make_float4(__uint_as_float(kPollSentinel), __uint_as_float(kPollSentinel),
                                            __uint_as_float(kPollSentinel), __uint_as_float(kPollSentinel));
            float4 *dst = const_cast<float4 *>(src);
#pragma unroll
            for (int k = 0; k < kTcMaxSC; k++)
                if (k < SCG) dst[k * st4] = sent;
        }
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        TPM_TRACE_MARK_CLK(d, 4, lin);
    }
    if ((!sel2 || hsel <= 1) && tgs < T && (stop != 1 || poll)) {
        const int grp = tgs / 8, ngroups = (T + 7) / 8;
        if (sel2 || (poll ? scx == SC - 1 : block_ticket(d.tile_ctr + grp, SC, d.route_fence, &s_last))) {
            if (!spoll) TPM_TRACE_MARK_CLK(d, 3, lin);
            TPM_TRACE_MARK(d, 2, 4, lin);
            for (int i = threadIdx.x; poll && !spoll && i < 8 * E4; i += kTcThreads) {
                const int tl = i / E4, e4 = i - tl * E4, t = tgs + tl;
                if (t >= T) continue;
                const float4 *src = reinterpret_cast<const float4 *>(d.pl3 + (size_t)t * E) + e4;
                const size_t st4 = (size_t)T * E4;
                /* cluster order; the expert-split forms: SCG partials, each written by EG clusters */
                const float4 sum = poll_sum<kTcMaxSC>(d.ctr + 5, src, st4, SCG);
                *reinterpret_cast<float4 *>(&s_lg[tl][4 * e4]) = sum;
                /* the sentinel back where this thread read (r273: written instead by the other
                 * threads while thread 0 waits in the permutation's group barrier, the routing
                 * was 0.5-1.7 us slower at 32-128 tokens) */
                const float4 sent = make_float4(__uint_as_float(kPollSentinel), __uint_as_float(kPollSentinel),
                                                __uint_as_float(kPollSentinel), __uint_as_float(kPollSentinel));
                float4 *dst = const_cast<float4 *>(src);
#pragma unroll
                for (int k = 0; k < kTcMaxSC; k++)
                    if (k < SCG) dst[k * st4] = sent;
            }
            for (int i = threadIdx.x; !poll && i < 8 * E4; i += kTcThreads) {
                const int tl = i / E4, e4 = i - tl * E4, t = tgs + tl;
                if (t >= T) continue;
                const float4 *src = reinterpret_cast<const float4 *>(d.logits + (size_t)t * E) + e4;
                float4 v[kTcMaxSC];
#pragma unroll
                for (int k = 0; k < kTcMaxSC; k++) /* past SC: partial 0 again, never added */
                    v[k] = __ldcg(src + (size_t)(k < SC ? k : 0) * T * E4);
                /* Every load unconditional, then a fence ptxas does not move loads across (no
                 * instruction at CTA scope on sm_90): all SC loads go out before the first add.
                 * With a load per branch, ptxas interleaved them with the adds, one L2 round trip
                 * after another: ~0.17 us per partial, 2.7 us of the tail at 32 tokens (round
                 * 30, the SASS). */
                asm volatile("fence.acq_rel.cta;" ::: "memory");
                float4 s = v[0];
#pragma unroll
                for (int k = 1; k < kTcMaxSC; k++) {
                    if (k < SC) {
                        s.x += v[k].x;
                        s.y += v[k].y;
                        s.z += v[k].z;
                        s.w += v[k].w;
                    }
                }
                *reinterpret_cast<float4 *>(&s_lg[tl][4 * e4]) = s;
            }
            __syncthreads();
            if (!spoll) TPM_TRACE_MARK_CLK(d, 4, lin);
            TPM_TRACE_MARK(d, 2, 5, lin);
            if (stop != 1 && stop != 2 && tgs + warp < T)
                select_token(d, tgs + warp, s_lg[warp], 0, 0, d.br ? s_br : nullptr, sc[warp], gsc[warp], nullptr);
            TPM_TRACE_MARK_CLK(d, 5, lin);
            if (threadIdx.x == 0) d.tile_ctr[grp] = 0; /* for the next replay */
            if (cmeet) {
                clear_group_counts(d, reinterpret_cast<int *>(bits)); /* placed after the meeting */
            } else if (stop == 0 && d.route_perm) { /* every group's CTA its own rows (round 49) */
                build_permutation_groups(d, T, tgs, ngroups, reinterpret_cast<int *>(bits), lin);
                TPM_TRACE_MARK_CLK(d, 2, lin);
            } else if (stop == 0) {
                if (block_ticket(d.ctr + 2, ngroups, d.route_fence, &s_last)) {
                    TPM_TRACE_MARK_CLK(d, 6, lin);
                    build_permutation_gathered(d, T, s_sel, bits, s_off);
                    if (threadIdx.x == 0) d.ctr[2] = 0;
                    TPM_TRACE_MARK_CLK(d, 2, lin);
                }
            }
        }
    }
    if (!spoll) asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    if (cmeet) { /* the second phase: every group's selections stored (release), then this group's rows */
        asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        TPM_TRACE_MARK_CLK(d, 6, lin);
        if (tgs < T) place_group_rows(d, T, tgs, min(8, T - tgs), reinterpret_cast<int *>(bits));
        TPM_TRACE_MARK_CLK(d, 2, lin);
    }
}

struct tc_geom {
    int Ep, MT, X, tiles, loads, wide;
    size_t smem;
};

/* the wide tile's shared memory: the x slice, then the partial tile in the same bytes (the
 * expert-split forms, EG groups: EG tiles of the group's experts, one per run of chunks) */
size_t tc_wide_smem(int Ep, int EG) {
    const size_t xb = (size_t)(EG == 1 ? kWideMaxC : kWideMaxCS) * kWideTokens * 64;
    const size_t tileb = (size_t)EG * kWideTokens * (Ep / EG + 4) * 4;
    return xb > tileb ? xb : tileb;
}

size_t tc_smem(int Ep, int stages) { /* stages 0: direct loads, the partial tile only */
    const size_t ringb = (size_t)stages * (3 * Ep + kTcTokens) * 64, tileb = (size_t)kTcTokens * (Ep + 4) * 4;
    return ringb > tileb ? ringb : tileb;
}

/* Clusters per token tile: cpt, or with d.route_tc_fit (and the clusters the layer's choice) the
 * fewest that keep the most chunks per CTA that cpt gives (round 53): the slowest CTA's logits are
 * as long, and each group polls fewer partials (m3 at 32-128 tokens: 12 clusters, not 15). */
int tc_fit(const tpm_moe_dev &d, int cpt, int clusters) {
    if (clusters > 0 || !d.route_tc_fit || cpt < 1) return cpt;
    const int NC = d.H / 32, per = (NC + kTcCluster * cpt - 1) / (kTcCluster * cpt);
    return (NC + kTcCluster * per - 1) / (kTcCluster * per);
}

/* The polled group sums fit pl3 (route_poll bit 1): mode 3's default, the wide tile's condition. */
int tc_polled(const tpm_moe_dev &d, int T, int X) {
    return (d.route_poll & 2) && d.pl3 && (size_t)(X / kTcCluster) * T <= (size_t)d.pl3_rows;
}

/* The launch shape for T tokens, or 0 if mode 3 cannot take them. clusters: the clusters
 * of 8 to spread over (0: the resident maximum from the occupancy query). loads 2 takes the
 * direct form's clusters where it holds more (the same H slices: the same bits). wide: 128-token
 * tiles where they can run (loads 3, Ep <= 128, polled, >= 2 clusters per tile, <= kWideMaxC
 * chunks per CTA), else the 64-token tiles (g->wide says which). */
int tc_geometry(const tpm_moe_dev &d, int T, int clusters, int loads, tc_geom *g, int wide = 0) {
    /* wide: 1, or the expert groups of the split forms (2, 4: E 128, round 54), each group's
     * clusters along H the fewest that keep its most chunks per CTA; where a split form does not
     * fit (more than kWideMaxCS chunks per CTA), the next fewer groups */
    for (int EG = wide == 2 || wide == 4 ? wide : 1; wide && EG >= 1; EG /= 2) {
        if (loads != 3 || d.E > 128 || d.tc_wide_clusters < 1 || T > kTcMaxT || d.E % 4 != 0 || d.H % 32 != 0 ||
            !d.wrf || (EG > 1 && d.E != 128))
            continue;
        const int maxc = clusters > 0 ? clusters : min(d.tc_wide_clusters, min(d.tc_clusters[1], d.tc_clusters[3]));
        const int tiles = (T + kWideTokens - 1) / kWideTokens;
        const int cpg = tc_fit(d, min(min(maxc / tiles, kTcMaxSC) / EG, d.H / 32 / kTcCluster), clusters);
        const int cpt = cpg * EG, X = cpt * kTcCluster;
        const int nb = d.E1 + (d.ep > 1 ? 1 : 0);
        if (cpg >= 1 && cpt >= 2 && (d.H / 32 + X / EG - 1) / (X / EG) <= (EG == 1 ? kWideMaxC : kWideMaxCS) &&
            tc_polled(d, T, X) &&
            (size_t)cpt * T <= (size_t)d.logit_rows && (T + 7) / 8 <= d.tile_cap && d.E1 <= kMaxE1 &&
            nb * ((T + 31) / 32) <= kPermSmemWords) {
            g->Ep = (d.E + 15) / 16 * 16;
            g->MT = 1;
            g->X = X;
            g->tiles = tiles;
            g->loads = 3;
            g->wide = EG;
            g->smem = tc_wide_smem(g->Ep, EG);
            return 1;
        }
    }
    g->wide = 0;
    if (T < 1 || T > kTcMaxT || d.E % 4 != 0 || d.E > 256 || d.H % 32 != 0 || d.H / 32 < kTcCluster) return 0;
    if (loads < 0 || loads > 3 || (loads == 2 && !d.wr3f) || (loads == 3 && !d.wrf)) return 0;
    g->Ep = (d.E + 15) / 16 * 16;
    g->MT = g->Ep > 128 ? 2 : 1;
    const int v = 4 * (g->MT - 1) + loads;
    if (d.tc_clusters[v] < 1) return 0;
    int res = d.tc_clusters[v];
    if (loads >= 2) res = min(res, d.tc_clusters[4 * (g->MT - 1) + 1]);
    const int maxc = clusters > 0 ? clusters : res;
    g->loads = loads;
    g->tiles = (T + kTcTokens - 1) / kTcTokens;
    int cpt = maxc / g->tiles; /* clusters per tile: all resident at once when possible */
    cpt = tc_fit(d, max(1, min(min(cpt, kTcMaxSC), d.H / 32 / kTcCluster)), clusters);
    g->X = cpt * kTcCluster;
    g->smem = tc_smem(g->Ep, loads ? 0 : g->MT == 1 ? tc_stages<1>() : tc_stages<2>());
    const int nb = d.E1 + (d.ep > 1 ? 1 : 0);
    if ((size_t)cpt * T > (size_t)d.logit_rows || (T + 7) / 8 > d.tile_cap || d.E1 > kMaxE1 ||
        nb * ((T + 31) / 32) > kPermSmemWords)
        return 0;
    return 1;
}

/* A launch config of clusters of kTcCluster CTAs along x (at: its one attribute). */
cudaLaunchConfig_t tc_config(dim3 grid, size_t smem, cudaStream_t s, cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg = {};
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = kTcCluster;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kTcThreads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cfg;
}

template <int MT, int LOADS, int TT = kTcTokens, int EG = 1> cudaError_t tc_setup_one(tpm_moe_dev &d) {
    const size_t smem = TT == kWideTokens ? tc_wide_smem(128, EG) : tc_smem(MT * 128, LOADS ? 0 : tc_stages<MT>());
    cudaError_t e =
        cudaFuncSetAttribute(k_route_tc<MT, LOADS, TT, EG>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = tc_config(dim3(kTcCluster * 16, 1, 1), smem, 0, at);
    int n = 0;
    e = cudaOccupancyMaxActiveClusters(&n, k_route_tc<MT, LOADS, TT, EG>, &cfg);
    if (e != cudaSuccess) return e;
    /* the wide tiles: the fewest of their forms' (the split forms hold as many) */
    if (TT == kWideTokens) d.tc_wide_clusters = EG == 1 ? n : min(d.tc_wide_clusters, n);
    else d.tc_clusters[4 * (MT - 1) + LOADS] = n;
    return cudaSuccess;
}

} // namespace

tpm_status tpm_moe_route_tc_setup(tpm_moe_dev &d, int device) {
    for (int i = 0; i < 8; i++) d.tc_clusters[i] = 0;
    d.tc_wide_clusters = 0;
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9)
        return TPM_OK; /* clusters and distributed shared memory: 9.0 and later; mode 3 stays off */
    /* sized for the largest Ep of each variant (128 / 256), so any Ep fits */
    if (tc_setup_one<1, 0>(d) != cudaSuccess || tc_setup_one<2, 0>(d) != cudaSuccess ||
        tc_setup_one<1, 1>(d) != cudaSuccess || tc_setup_one<2, 1>(d) != cudaSuccess ||
        tc_setup_one<1, 2>(d) != cudaSuccess || tc_setup_one<2, 2>(d) != cudaSuccess ||
        tc_setup_one<1, 3>(d) != cudaSuccess || tc_setup_one<2, 3>(d) != cudaSuccess ||
        tc_setup_one<1, 3, kWideTokens>(d) != cudaSuccess || tc_setup_one<1, 3, kWideTokens, 2>(d) != cudaSuccess ||
        tc_setup_one<1, 3, kWideTokens, 4>(d) != cudaSuccess) {
        (void)cudaGetLastError();
        for (int i = 0; i < 8; i++) d.tc_clusters[i] = 0;
        d.tc_wide_clusters = 0;
        tpm_log(TPM_LOG_WARN, "moe: routing mode 3 unavailable (cluster occupancy query failed)");
    }
    return TPM_OK;
}

int tpm_moe_route_tc_ok(const tpm_moe_dev &d, const void *x, int T) {
    tc_geom g;
    return x && ((uintptr_t)x & 15) == 0 && tc_geometry(d, T, 0, 0, &g) && tc_geometry(d, T, 0, 1, &g);
}

int tpm_moe_route_tc_shape(const tpm_moe_dev &d, int T, int clusters, int loads, int wide, int shape[4]) {
    tc_geom g;
    if (loads == 3 && !d.wrf) loads = 2;
    if (loads == 2 && !d.wr3f) loads = 1;
    if (!tc_geometry(d, T, clusters, loads, &g, wide)) return 0;
    shape[0] = g.X;
    shape[1] = g.tiles;
    shape[2] = d.tc_clusters[4 * (g.MT - 1) + g.loads];
    const int xg = g.X / (g.wide > 1 ? g.wide : 1); /* CTAs along H over one group's experts */
    shape[3] = (d.H / 32 + xg - 1) / xg;
    return 1;
}

tpm_status tpm_moe_launch_route_tc(const tpm_moe_dev &d, const uint16_t *x, int T, int clusters, int loads,
                                   int stop, cudaStream_t s) {
    tc_geom g;
    if (loads == 3 && !d.wrf) loads = 2; /* no operand-order copy: the next form */
    if (loads == 2 && !d.wr3f) loads = 1;
    TPM_ASSERT(tpm_moe_route_tc_ok(d, x, T) && tc_geometry(d, T, clusters, loads, &g, d.route_tc_wide));
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = tc_config(dim3((unsigned)g.X, (unsigned)g.tiles, 1), g.smem, s, at);
    /* the group sums poll the cluster partials (round 50) where pl3 holds them (the wide tile: always) */
    const int poll = tc_polled(d, T, g.X);
    /* the cluster stage by push (round 51) with the direct loads (not the wide tile) */
    /* the selecting CTAs' meeting at a cluster barrier (round 52) where one cluster selects all */
    const int cmeet = d.route_perm == 2 && poll && g.tiles == 1 && stop == 0 && (!g.wide || T <= 64);
    const int push = (d.route_poll & 8) && g.loads != 0 && !g.wide;
    /* the cluster sums spread over every rank (route_poll bit 4, round 54): polled, not push */
    const int spread = (d.route_poll & 16) && poll && !push;
    /* the spread poll (route_poll bit 5, round 55): with the cluster meeting */
    const int spoll = (d.route_poll & 32) && cmeet;
    const int flags = poll | (push ? 2 : 0) | (cmeet ? 4 : 0) | (spread ? 8 : 0) | (spoll ? 16 : 0);
    if (g.wide == 4)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 3, kWideTokens, 4>, d, x, T, g.Ep, stop, flags));
    else if (g.wide == 2)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 3, kWideTokens, 2>, d, x, T, g.Ep, stop, flags));
    else if (g.wide)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 3, kWideTokens>, d, x, T, g.Ep, stop, flags));
    else if (g.MT == 1 && g.loads == 3)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 3>, d, x, T, g.Ep, stop, flags));
    else if (g.MT == 1 && g.loads == 2)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 2>, d, x, T, g.Ep, stop, flags));
    else if (g.MT == 1 && g.loads == 1)
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 1>, d, x, T, g.Ep, stop, flags));
    else if (g.MT == 1) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<1, 0>, d, x, T, g.Ep, stop, flags));
    else if (g.loads == 3) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<2, 3>, d, x, T, g.Ep, stop, flags));
    else if (g.loads == 2) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<2, 2>, d, x, T, g.Ep, stop, flags));
    else if (g.loads == 1) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<2, 1>, d, x, T, g.Ep, stop, flags));
    else TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_tc<2, 0>, d, x, T, g.Ep, stop, flags));
    return TPM_OK;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_route_tc, (k_route_tc<1, 0>))
