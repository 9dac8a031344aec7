/*
 * moe_cuda_route.cu - MoE routing on the GPU: logits, top-k, counts, offsets
 * and the token permutation. Modes 0-2 here (moe_cuda_kernels.h); mode 3
 * (tensor cores, clusters) in moe_cuda_route_tc.cu; select_token and
 * build_permutation_small, used by both files, in moe_cuda_route_sel.cuh.
 *
 * mode 1, small T (one launch), k_route_fused<EPW, TOK, TW>: grid (E/B,
 *    ceil(T/8), S), B = tuning.route_experts experts per block, 8 warps of
 *    EPW experts x TOK tokens: TOK = 1 / 2 / 4 when T <= 1 / 2 / 4 (EPW =
 *    B/8); above 4 tokens with B = 8 or 16 two 4-token parts of the tile (TW =
 *    2, EPW = B/4: round 27); with B = 32, TOK = 8. The same bits in every form.
 *    Every block computes partial logits of B experts x 8 tokens x one
 *    of S slices of H (logits_tile below). Block-done tickets then chain the
 *    rest inside the same launch: the last block of an 8-token tile (atomic
 *    ticket on tile_ctr[tile], block_ticket) sums the S slices of the
 *    tile's (token, expert) logits into shared memory (one thread per four
 *    experts of a token, one 16-byte load per slice, all in flight, added in
 *    slice order; one thread per pair where E % 4 != 0),
 *    selects for those 8 tokens (one warp per token, select_token below).
 *    One tile (T <= 8): that block also builds the permutation by counting
 *    over the tile's selections in shared memory (build_permutation_direct,
 *    moe_cuda_route_sel.cuh: no block barrier since round 28; a fused layer
 *    without EP counts the routed ones, the shared slot's rows implied: round
 *    48). Several tiles: a ticket on ctr[2]; the last tile copies the T*K
 *    selections (the T k routed ones, as above) into shared memory and counts
 *    the same way up to 80 pairs (build_permutation_gathered:
 *    m3 up to 16 tokens), above that with a shared-memory bitmap (build_permutation_small).
 *    Wide form (TT = 2, 9 .. tuning.route_wide <= 16 tokens (default 11), 8 or 16 experts per
 *    block, a grid of one wave): both 8-token tiles in one row of 512-thread blocks (warps
 *    8i .. 8i+7 compute tile i's logits, the same slices and arithmetic), so the last block of
 *    the row takes all T tokens: one ticket, 16 warps select, and the one-tile permutation; no
 *    second ticket (round 29).
 *    Polled form (tuning.route_poll, the default; one row of blocks: T <= 8 or
 *    the wide form; round 50): no ticket. The partials go with strong relaxed
 *    stores to plane par = ctr[11] of the buffer pl, laid out [slice][24][E]
 *    (the ticket's layout with 24 token rows per slice), which holds
 *    the sentinel 0xffffffff (a NaN; logits_tile stores NaN as 0x7fffffff)
 *    wherever nothing was written. The last block of the row (in launch
 *    order, so every other block has started) loads its threads' slices at
 *    once and loads the ones still holding the sentinel again until none
 *    does (bounded: past kPollBound, ctr[5]), so the data arrive with the
 *    poll: no fence before a ticket, no ticket round trip, no second trip for
 *    the data. It adds the slices in slice order (the ticket's bits) and flips
 *    ctr[11]; every block first refills its share of the other plane (the
 *    previous launch's, read by then) with the sentinel for the next launch.
 *    Every block reads par before it stores, and the poller flips it only
 *    after every partial has landed, so no block sees the flip. Several rows
 *    (9-24 tokens, route_poll bit 2): each row's last block
 *    polls its row's partials (24 token rows per slice hold three tiles:
 *    TPM_MOE_POLL_T 24), and the winner of the ticket over the rows (ctr[2])
 *    flips par once every row has polled.
 *    Data written inside the launch is read
 *    with ld.global.cg (L2), never through a possibly stale L1 line. Each
 *    last block zeroes the ticket it won, so the launch replays inside a
 *    CUDA graph.
 * mode 2, large T: logits = x . wr3^T as ONE cuBLAS bf16 GEMM with fp32
 *    output, wr3 = [hi; mid; lo] the exact 3-way bf16 split of the fp32
 *    router (x is bf16, so every product is exact in fp32 and the sum is an
 *    fp32 accumulation, as with fmaf; tensor cores instead of 2.8 ms of FMA
 *    at 8192 tokens), then k_select adds hi + mid + lo and selects.
 * mode 0 (legacy, kept for comparison): k_logits then k_select.
 *
 * k_select (modes 0, 2): one warp per token, 32 tokens per block; block b
 *    writes word b of every expert's token bitmap (bits[e][b], from a
 *    shared-memory copy: no global atomics, nothing to clear); the last
 *    block (ticket on ctr[2]) computes the per-expert word prefixes with one
 *    thread per (expert, segment of words) up to 1024 tokens, one warp per
 *    expert above, counts, offsets and the touched list, and the rows up to
 *    kScatterInBlock of them; above that
 *    k_perm_scatter (one block per word) writes the rows.
 *
 * k_logits / logits_tile: a warp owns EPW experts x 8 tokens of its slice;
 *    each lane accumulates a strided part with fmaf (the weight and x loads
 *    of 3 chunks issued before their FMAs), the warp reduces with a
 *    fixed xor tree (distances 16 .. 1; transposed, so each lane keeps a
 *    part of the values), the selection adds the S slices in slice order. A
 *    logit has the same bits in every run; identical router rows give
 *    identical logits (exact ties stay ties).
 * select_token (moe_cuda_route_sel.cuh; one warp per token): scores sanitized (NaN -> -inf), k rounds
 *    of arg-max over (eligible, value, lower index wins), each round two
 *    redux.sync on order-preserving integer keys: an expert is never picked
 *    twice or out of range. Variants: sigmoid + bias (bias for selection
 *    only), grouped (group score = sum of the top-2 biased scores, top groups
 *    kept), softmax over the top-k logits. Weights are renormalized over the
 *    routed experts, the routed scaling factor folded in; the fused shared
 *    expert is appended as slot k, weight 1.0.
 * Permutation: for every (token, slot) its row offset[e] + #(earlier tokens
 *    on e): stable (tokens increasing inside an expert) and independent of
 *    block timing.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"
#include "moe_cuda_route_sel.cuh"

#include <cublas_v2.h>
#include <float.h>
#include <limits.h>
#include <math.h>

namespace {

constexpr int kLogitWarps = 8;   /* warps per block */
constexpr int kLogitTokens = 8;  /* tokens per block */
constexpr int kLogitChunks = 3;  /* 16-byte chunks per lane whose loads are issued together */
constexpr int kMaxSplits = 16;
constexpr int kSelThreads = 1024; /* the last block builds the permutation with all of them */
constexpr int kScatterInBlock = 4096; /* k_select: rows the last block scatters itself */

/* The warp's sums of V values per lane over the 32 lanes (logits_tile): while N > 1 values are
 * left, at xor distance O a lane keeps half of them (the upper half where its O bit is set) and
 * adds the partner's copy of that half; then a plain butterfly over the distances left. A
 * template recursion, so that every index is a constant before the loops are unrolled (a runtime
 * loop over the halvings, even unrolled, left the array in local memory). */
template <int V, int N, int O>
__device__ __forceinline__ void xor_tree_sum(float (&vals)[V], int lane) {
    if constexpr (N > 1) {
        const bool upper = (lane & O) != 0;
#pragma unroll
        for (int q = 0; q < N / 2; q++) {
            const float keep = upper ? vals[q + N / 2] : vals[q];
            const float send = upper ? vals[q] : vals[q + N / 2];
            vals[q] = keep + __shfl_xor_sync(0xffffffffu, send, O);
        }
        xor_tree_sum<V, N / 2, O / 2>(vals, lane);
    } else if constexpr (O > 0) {
        vals[0] += __shfl_xor_sync(0xffffffffu, vals[0], O);
        xor_tree_sum<V, 1, O / 2>(vals, lane);
    }
}

/* Partial logits of a (8 EPW / TW experts x 8 tokens x H-slice) tile: warp w
 * owns EPW experts (group w / TW) x TOK tokens (part w % TW of the tile: TW =
 * 1, TOK <= 8; TW = 2, TOK = 4); each lane keeps EPW x TOK accumulators over
 * float4 chunks c = lane, lane + 32, ... of its slice, the warp reduces with a
 * fixed xor tree, the selection sums the slices in slice order. A logit's
 * arithmetic does not depend on EPW, TOK or TW: the same bits in every form. */
template <int kLogitEpw, int TOK = kLogitTokens, int TW = 1, int TT = 1>
__device__ __forceinline__ void logits_tile(const uint16_t *__restrict__ x, const float *__restrict__ wr,
                                            float *__restrict__ part, int T, int H, int E, bool poll) {
    static_assert(TW == 1 || (TW == 2 && TOK == 4), "logits_tile: TW 2 takes 4 tokens per warp");
    /* TT 8-token tiles per block (k_route_fused's wide form): warps 8i .. 8i+7 take tile i */
    const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int warp = TT == 1 ? wid : wid % kLogitWarps, sub = TT == 1 ? 0 : wid / kLogitWarps;
    const int e0 = blockIdx.x * (kLogitWarps / TW * kLogitEpw) + (warp / TW) * kLogitEpw;
    const int t0 = (blockIdx.y * TT + sub) * kLogitTokens + (warp % TW) * TOK;
    const int split = blockIdx.z, nsplit = gridDim.z;
    const int n4 = H / 4;
    const int cb = (int)((int64_t)n4 * split / nsplit), ce = (int)((int64_t)n4 * (split + 1) / nsplit);
    const int nt = min(TOK, T - t0);
    float acc[kLogitEpw][TOK];
#pragma unroll
    for (int i = 0; i < kLogitEpw; i++)
#pragma unroll
        for (int j = 0; j < TOK; j++) acc[i][j] = 0.0f;
    /* Row pointers once, clamped into the tensors: token rows past T repeat row T-1 and expert
     * rows past E repeat row E-1 (their sums are computed and never stored). So a load's only
     * predicate is its chunk's (one per u), and no load needs a 64-bit row product of its own:
     * with a predicate per (u, token) and per (u, expert), the 8-token form spent ~300
     * instructions per warp on addresses and saved predicates before its first x load
     * (bench/results/r166, r167). */
    const uint2 *xr[TOK];
    const float4 *wrow[kLogitEpw];
#pragma unroll
    for (int j = 0; j < TOK; j++) xr[j] = reinterpret_cast<const uint2 *>(x + (size_t)min(t0 + j, T - 1) * H);
#pragma unroll
    for (int i = 0; i < kLogitEpw; i++) wrow[i] = reinterpret_cast<const float4 *>(wr + (size_t)min(e0 + i, E - 1) * H);
    /* groups of kLogitChunks chunks per lane: every weight and x load of a
     * group is issued before its first FMA (x rows are read once per block,
     * so an x load after an FMA would be one more dependent trip to L2/HBM per
     * token); each accumulator still takes its chunks in increasing c */
    for (int c00 = cb; c00 < ce; c00 += 32 * kLogitChunks) { /* uniform in the warp */
        const int c0 = c00 + lane;
        float4 w[kLogitChunks][kLogitEpw];
        uint2 xv[kLogitChunks][TOK];
#pragma unroll
        for (int u = 0; u < kLogitChunks; u++) {
            const int c = c0 + 32 * u;
#pragma unroll
            for (int i = 0; i < kLogitEpw; i++) w[u][i] = c < ce ? __ldg(wrow[i] + c) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int j = 0; j < TOK; j++) xv[u][j] = c < ce ? __ldg(xr[j] + c) : make_uint2(0u, 0u);
        }
        /* A chunk past the slice adds zeros (its loads give 0) instead of a branch per chunk:
         * with a break before chunk u's FMAs, the compiler put chunk u's loads after chunk
         * u-1's FMAs, one more dependent trip to memory per chunk. fmaf(0, 0, acc) = acc (an
         * accumulator starts at +0 and is -0 only after a negative sum underflowed; 0 * 0 is no
         * NaN where x or w is inf). The branch below is taken only by a warp whose 4-token part
         * lies past T (TW = 2, the last tile), which stores nothing; it ends the basic block, so
         * that the scheduler, which trades latency for registers inside a block, cannot move FMAs
         * in between the group's loads (with 8 tokens it did, making 3 trips of 1). */
        if (nt <= 0) continue;
#pragma unroll
        for (int u = 0; u < kLogitChunks; u++) {
#pragma unroll
            for (int j = 0; j < TOK; j++) {
                const float x0 = __uint_as_float(xv[u][j].x << 16), x1 = __uint_as_float(xv[u][j].x & 0xffff0000u);
                const float x2 = __uint_as_float(xv[u][j].y << 16), x3 = __uint_as_float(xv[u][j].y & 0xffff0000u);
#pragma unroll
                for (int i = 0; i < kLogitEpw; i++) {
                    acc[i][j] = fmaf(w[u][i].x, x0, acc[i][j]);
                    acc[i][j] = fmaf(w[u][i].y, x1, acc[i][j]);
                    acc[i][j] = fmaf(w[u][i].z, x2, acc[i][j]);
                    acc[i][j] = fmaf(w[u][i].w, x3, acc[i][j]);
                }
            }
        }
    }
    /* the warp's V = EPW x TOK sums (xor_tree_sum): V - 1 + (5 - log2 V) shuffles instead of the
     * plain butterfly's 5 V. Every value is still summed over the same lane pairs at distances
     * 16, 8, 4, 2, 1 in that order, each add (own + partner) as in the plain butterfly (float add
     * commutes): the same bits. Value v = i TOK + j ends on the lanes whose top log2 V bits are v. */
    constexpr int V = kLogitEpw * TOK;
    static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "logits_tile: EPW x TOK a power of two <= 32");
    constexpr int kLog2V = V >= 32 ? 5 : V >= 16 ? 4 : V >= 8 ? 3 : V >= 4 ? 2 : V >= 2 ? 1 : 0;
    float vals[V];
#pragma unroll
    for (int i = 0; i < kLogitEpw; i++)
#pragma unroll
        for (int j = 0; j < TOK; j++) vals[i * TOK + j] = acc[i][j];
    xor_tree_sum<V, V, 16>(vals, lane);
    const int v = lane >> (5 - kLog2V), i = v / TOK, j = v - i * TOK;
    if ((lane & ((32 >> kLog2V) - 1)) == 0 && j < nt && e0 + i < E) {
        if (poll) { /* the polled layout [slice][TPM_MOE_POLL_T][E] (poll_sums); a strong store, as
                     * the poller's loads are (no data race in the PTX memory model) */
            const float o = isnan(vals[0]) ? __uint_as_float(0x7fffffffu) : vals[0]; /* never the sentinel */
            float *dst = part + ((size_t)split * TPM_MOE_POLL_T + t0 + j) * E + e0 + i;
            asm volatile("st.relaxed.gpu.global.f32 [%0], %1;" ::"l"(dst), "f"(o) : "memory");
        } else {
            part[((size_t)split * T + t0 + j) * E + e0 + i] = vals[0];
        }
    }
}

template <int kLogitEpw>
__global__ void __launch_bounds__(kLogitWarps * 32) k_logits(const uint16_t *__restrict__ x,
                                                             const float *__restrict__ wr,
                                                             float *__restrict__ part, int T, int H, int E) {
    logits_tile<kLogitEpw>(x, wr, part, T, H, E, false);
}

/* build_permutation's prefixes with few words per expert: one thread per (expert, segment). */
__device__ void build_prefixes_seg(const tpm_moe_dev &d, int Wt, int *seg, int *s_cnt) {
    const int E1 = d.E1, NB = n_buckets(d), tid = threadIdx.x, nth = blockDim.x;
    const int nseg = max(1, nth / NB), L = (Wt + nseg - 1) / nseg;
    const bool mine = tid < NB * nseg;
    const int e = tid / nseg, w0 = (tid % nseg) * L, w1 = min(Wt, w0 + L);
    if (mine) {
        int run = 0;
#pragma unroll 8
        for (int w = w0; w < w1; w++) run += __popc(__ldcg(d.bits + (size_t)e * Wt + w));
        seg[tid] = run;
    }
    __syncthreads();
    if (tid < NB) { /* exclusive scan of the expert's segments */
        int run = 0;
        for (int g = 0; g < nseg; g++) {
            const int v = seg[tid * nseg + g];
            seg[tid * nseg + g] = run;
            run += v;
        }
        if (tid < E1) d.counts[tid] = run;
        s_cnt[tid] = run;
    }
    __syncthreads();
    if (mine) {
        int run = seg[tid];
#pragma unroll 8
        for (int w = w0; w < w1; w++) {
            d.bitpre[(size_t)e * Wt + w] = (uint32_t)run;
            run += __popc(__ldcg(d.bits + (size_t)e * Wt + w));
        }
    }
}

/* The permutation's per-expert prefixes, run by the last block of k_select
 * (every block has written its word bits[e][b] of every expert). Up to
 * kSegWords words per expert (T <= 1024): the words of an expert are cut
 * into nseg segments, one thread per (expert, segment), so the L2 loads of
 * all experts' words are in flight together. More words: one warp per
 * expert reads them coalesced, kPreWords 32-word chunks per lane in flight,
 * and a warp scan of their popcounts gives the per-word prefixes (round 14,
 * r104-r107: the segment loops read one 4-byte word per 32-byte sector per
 * lane, and at 8192 tokens took ~75 of the launch's 93 us in this one
 * block; the warp form is slower with few words, where a warp's experts
 * follow one another). Then counts, offsets and the touched list (warp 0);
 * then, when scatter is set, the rows themselves (else k_perm_scatter does
 * them, one block per word). */
constexpr int kSegWords = 32;
constexpr int kPreWords = 8;
__device__ void build_permutation(const tpm_moe_dev &d, int T, bool scatter, int *seg, int *s_cnt) {
    const int K = d.K, E1 = d.E1, NB = n_buckets(d), Wt = (T + 31) / 32;
    const int tid = threadIdx.x, nth = blockDim.x;
    if (Wt > kSegWords) {
        const int lane = tid & 31;
        for (int e = tid >> 5; e < NB; e += nth >> 5) {
            const uint32_t *src = d.bits + (size_t)e * Wt;
            uint32_t *pre = d.bitpre + (size_t)e * Wt;
            int run = 0;
            for (int base = 0; base < Wt; base += 32 * kPreWords) {
                int c[kPreWords];
#pragma unroll
                for (int j = 0; j < kPreWords; j++) {
                    const int w = base + 32 * j + lane;
                    c[j] = w < Wt ? __popc(__ldcg(src + w)) : 0;
                }
#pragma unroll
                for (int j = 0; j < kPreWords; j++) {
                    int inc = c[j];
#pragma unroll
                    for (int o = 1; o < 32; o <<= 1) {
                        const int v = __shfl_up_sync(0xffffffffu, inc, o);
                        if (lane >= o) inc += v;
                    }
                    const int w = base + 32 * j + lane;
                    if (w < Wt) pre[w] = (uint32_t)(run + inc - c[j]);
                    run += __shfl_sync(0xffffffffu, inc, 31);
                }
            }
            if (lane == 0) {
                s_cnt[e] = run;
                if (e < E1) d.counts[e] = run;
            }
        }
        __syncthreads(); /* s_cnt complete */
    } else {
        build_prefixes_seg(d, Wt, seg, s_cnt);
    }
    if (tid < 32) scan_buckets(d, NB, s_cnt); /* s_cnt: counts -> offsets */
    if (tid == 0) d.ctr[2] = 0; /* ticket, for the next replay */
    if (!scatter) return;
    __syncthreads();
    for (int p = tid; p < T * K; p += nth) {
        const int t = p / K, ex = slot_of(d, __ldcg(d.sel + p), t), w = t >> 5;
        const uint32_t word = __ldcg(d.bits + (size_t)ex * Wt + w);
        const int pos = s_cnt[ex] + (int)__ldcg(d.bitpre + (size_t)ex * Wt + w) + __popc(word & ((1u << (t & 31)) - 1u));
        d.perm_tok[pos] = t;
        d.perm_exp[pos] = ex;
        d.inv[p] = pos;
    }
}

/* The rows of the permutation for large T: block b takes the (token, slot)
 * pairs of tokens 32b .. 32b+31 (word b of the bitmap). */
__global__ void __launch_bounds__(256) k_perm_scatter(tpm_moe_dev d, int T) {
    const int K = d.K, Wt = (T + 31) / 32, b = blockIdx.x;
    const int p0 = b * 32 * K, p1 = min(T, 32 * b + 32) * K;
    for (int p = p0 + (int)threadIdx.x; p < p1; p += blockDim.x) {
        const int t = p / K, e = slot_of(d, d.sel[p], t);
        const uint32_t word = d.bits[(size_t)e * Wt + b];
        const int pos = d.offsets[e] + (int)d.bitpre[(size_t)e * Wt + b] + __popc(word & ((1u << (t & 31)) - 1u));
        d.perm_tok[pos] = t;
        d.perm_exp[pos] = e;
        d.inv[p] = pos;
    }
}

/* One warp per token, 32 tokens per block; logits of (t, e) = sum over
 * s < nsplit of logits[t * rstride + s * sstride + e]. Block b writes word b
 * of every expert's token bitmap (no global atomics, nothing to clear), the
 * last block builds the permutation (the rows too when scatter is set). */
__global__ void __launch_bounds__(kSelThreads) k_select(tpm_moe_dev d, int T, int nsplit, int rstride,
                                                        int sstride, int scatter) {
    __shared__ float sc[kSelThreads / 32][256];
    __shared__ float gsc[kSelThreads / 32][32];
    __shared__ int s_sel[(kSelThreads / 32) * 17];
    __shared__ uint32_t s_word[kMaxE1 + 1];
    __shared__ int s_seg[kSelThreads];
    __shared__ int s_cnt[kMaxE1 + 1];
    __shared__ int s_last;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* a kernel launched after it with programmatic dependent launch (the decode kernels, the
     * early prefill chain's gather) may start now: each waits for this grid before it reads
     * any routing output */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const int warp = threadIdx.x >> 5, K = d.K, NB = n_buckets(d), Wt = (T + 31) / 32;
    const int t = blockIdx.x * (kSelThreads / 32) + warp;
    if ((int)threadIdx.x < NB) s_word[threadIdx.x] = 0u;
    if (t < T)
        select_token(d, t, d.logits + (size_t)t * rstride, (size_t)sstride, nsplit, d.br, sc[warp], gsc[warp],
                     s_sel + warp * K);
    __syncthreads();
    const int nt = min(kSelThreads / 32, T - (int)blockIdx.x * (kSelThreads / 32));
    for (int p = threadIdx.x; p < nt * K; p += blockDim.x)
        atomicOr(s_word + slot_of(d, s_sel[p], (int)blockIdx.x * (kSelThreads / 32) + p / K), 1u << (p / K));
    __syncthreads();
    if ((int)threadIdx.x < NB) d.bits[(size_t)threadIdx.x * Wt + blockIdx.x] = s_word[threadIdx.x];
    /* last block builds the permutation */
    if (block_ticket(d.ctr + 2, (int)gridDim.x, d.route_fence, &s_last))
        build_permutation(d, T, scatter != 0, s_seg, s_cnt);
}

/* Mode 1's polled partials (tuning.route_poll, round 50; see the top of the file; the loads and
 * the sentinel in moe_cuda_route_sel.cuh). */
static_assert(TPM_MOE_POLL_S >= kMaxSplits && TPM_MOE_POLL_T >= 2 * kLogitTokens, "pl holds every slice and token");

/* Block b of nb's share of a plane of n floats (n % 4 == 0) back to the sentinel. */
__device__ __forceinline__ void poll_refill(float *plane, size_t n, int b, int nb) {
    uint4 *p = reinterpret_cast<uint4 *>(plane);
    const size_t n4 = n / 4, i0 = n4 * b / nb, i1 = n4 * (b + 1) / nb;
    const uint4 ones = make_uint4(kPollSentinel, kPollSentinel, kPollSentinel, kPollSentinel);
    for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) p[i] = ones;
}

/* The polling block's slice sums (E % 4 == 0): four experts of one token per thread (a warp's
 * 16-byte loads of one slice side by side: with each thread's slices side by side instead, every
 * load of a warp touched 32 sectors and the poll at 8 tokens took 2.8 us, r270), polled and added
 * in slice order by poll_sum (moe_cuda_route_sel.cuh): the ticket's bits. */
__device__ __forceinline__ void poll_sums(const tpm_moe_dev &d, const float *plane, int T, int ns, float *s_lg_row0,
                                          int lgs) {
    const int E = d.E, np = T * E, nth = (int)blockDim.x;
    for (int q = threadIdx.x; q < np / 4; q += nth) {
        const int j = 4 * q / E, e = 4 * q - j * E;
        const float4 *src = reinterpret_cast<const float4 *>(plane + (size_t)j * E + e);
        const size_t st4 = (size_t)TPM_MOE_POLL_T * E / 4;
        const float4 l = poll_sum<kMaxSplits>(d.ctr + 5, src, st4, ns); /* slice order */
        float *row = s_lg_row0 + (size_t)j * lgs;
        row[e] = l.x;
        row[e + 1] = l.y;
        row[e + 2] = l.z;
        row[e + 3] = l.w;
    }
}

/* Mode 1: the whole routing in one launch (see the top of the file);
 * kLogitEpw experts x TOK tokens per warp, TW token parts per 8-token tile, TT tiles per block
 * (8 TT warps). TT = 2 (the wide form, 9-16 tokens: tuning.route_wide) runs only as one block row
 * (gridDim.y == 1): one ticket, 16 warps select, the one-tile permutation. */
/* POLL (the polled partials): two blocks per SM where the logits fit 128 registers (no spills);
 * the ticket's forms keep the compiler's choice (0: unspecified) */
template <int kLogitEpw, int TOK, int TW = 1, int TT = 1, bool POLL = false>
__global__ void __launch_bounds__(kLogitWarps * 32 * TT, POLL && TT == 1 && kLogitEpw * TOK <= 16 ? 2 : 0)
    k_route_fused(tpm_moe_dev d, const uint16_t *__restrict__ x, int T, int stop) {
    static_assert(TT == 1 || TT == 2, "k_route_fused: one or two 8-token tiles per block");
    constexpr int kW = kLogitWarps * TT, kTileTok = kLogitTokens * TT;
    __shared__ float sc[kW][256];
    __shared__ float gsc[kW][32];
    /* the bitmap of build_permutation_small (TT = 1, several tiles); else the direct count's masks */
    __shared__ uint32_t bits[TT == 1 ? kPermSmemWords : 32];
    __shared__ int s_off[kMaxE1 + 1];
    __shared__ float s_lg[kTileTok][32 * kMaxPerLane];
    __shared__ float s_br[32 * kMaxPerLane];
    /* the selections (one tile: the tile's, K <= 17; several: all, build_permutation_gathered), padded */
    __shared__ __align__(16) int s_sel[(kDirectPairs > kTileTok * 17 ? kDirectPairs : kTileTok * 17) + 4];
    __shared__ int s_last;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* a decode kernel launched with programmatic dependent launch may start now
     * (it waits for this grid before it reads any routing output) */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    const int lin = (int)((blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x); /* trace marks */
    (void)lin;
    TPM_TRACE_MARK_CLK(d, 0, lin);
    /* the selection bias, loaded with the logits' loads (only the last block
     * uses it: it lands in shared memory there, off the selection's path) */
    const float my_br = d.br && (int)threadIdx.x < d.E ? __ldg(d.br + threadIdx.x) : 0.0f;
    /* the lines of the tickets into L2 now, so the atomics after the logits do not wait on HBM */
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.z == 0) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(d.tile_ctr + blockIdx.y));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(d.ctr + 2));
    }
    /* with route_poll the partials go to plane par of the polled buffer (par = ctr[11], read before
     * any block can flip it: it is flipped only once every block's partials, stored after this
     * read, have landed: by the poller of one row of blocks, or with several rows (route_poll bit
     * 2) by the winner of the ticket over the rows, after every row's poll) */
    constexpr bool poll = POLL; /* the host's choice: E % 4 == 0, T <= TPM_MOE_POLL_T */
    const size_t plane_n = (size_t)TPM_MOE_POLL_S * TPM_MOE_POLL_T * d.E;
    const unsigned par = poll ? ld_relaxed_u32(d.ctr + 11) & 1u : 0u;
    float *const part = poll ? d.pl + par * plane_n : d.logits;
    logits_tile<kLogitEpw, TOK, TW, TT>(x, d.wr, part, T, d.H, d.E, poll);
    TPM_TRACE_MARK_CLK(d, 1, lin);
    const int tile = blockIdx.y, per_tile = (int)(gridDim.x * gridDim.z);
    if (poll) {
        /* the other plane (the last launch's, read by then) back to the sentinel for the next
         * launch; each row's last block (in launch order: every other block of its row has
         * started before it) then polls the row's partials, the others are done */
        poll_refill(d.pl + (par ^ 1u) * plane_n, plane_n, lin, per_tile * (int)gridDim.y);
        /* the row's last block in launch order: x, then y, then z */
        if (blockIdx.x != gridDim.x - 1 || blockIdx.z != gridDim.z - 1) return;
    } else {
        if (stop == 1) return; /* diagnostic stops (tuning.route_stop): results invalid */
        if (!block_ticket(d.tile_ctr + tile, per_tile, d.route_fence, &s_last)) return;
    }
    TPM_TRACE_MARK_CLK(d, 3, lin);
    if ((int)threadIdx.x < d.E) s_br[threadIdx.x] = my_br; /* read after the barrier below */
    if (poll) {
        const int t0 = tile * kTileTok;
        poll_sums(d, d.pl + par * plane_n + (size_t)t0 * d.E, min(kTileTok, T - t0), (int)gridDim.z, &s_lg[0][0],
                  32 * kMaxPerLane);
        __syncthreads(); /* every partial of the row landed */
        if (gridDim.y == 1) { /* every partial landed: no block reads ctr[11] any more */
            if (threadIdx.x == 0) d.ctr[11] = (int)(par ^ 1u);
            if (stop == 1) return; /* after the flip, so the next launch starts on a clean plane */
        }
    } else
    /* sum the tile's slices: every (token, expert) of the tile by one thread,
     * two pairs per pass with all their slice loads in flight, added in slice
     * order (the same bits as select_token's own loop, without its chain of
     * dependent L2 round trips) */
    {
        const int t0 = tile * kTileTok, nt = min(kTileTok, T - t0), E = d.E, ns = (int)gridDim.z;
        const size_t sstride = (size_t)T * E;
        const int np = nt * E, nth = (int)blockDim.x;
        /* E % 4 == 0: four experts of one token per thread, one 16-byte load per slice (the
         * scalar form below spent ~20 instructions of address arithmetic per 4-byte load:
         * bench/results/r138, r139) */
        for (int q = threadIdx.x; (E & 3) == 0 && q < np / 4; q += nth) {
            const int j = 4 * q / E, e = 4 * q - j * E;
            const float4 *src = reinterpret_cast<const float4 *>(d.logits + (size_t)(t0 + j) * E + e);
            const size_t st4 = sstride / 4;
            float4 v[kMaxSplits];
#pragma unroll
            for (int sp = 0; sp < kMaxSplits; sp++) v[sp] = __ldcg(src + (sp < ns ? sp : 0) * st4); /* past ns: never added */
            /* every load unconditional, then a fence ptxas does not move loads across (no
             * instruction at CTA scope on sm_90): every slice's load goes out before the first
             * add; with a load per branch, ptxas interleaved them with the adds in up to three
             * dependent L2 round trips (round 30, the SASS) */
            asm volatile("fence.acq_rel.cta;" ::: "memory");
            float4 l = v[0];
#pragma unroll
            for (int sp = 1; sp < kMaxSplits; sp++) /* slice order, as the scalar form */
                if (sp < ns) {
                    l.x += v[sp].x;
                    l.y += v[sp].y;
                    l.z += v[sp].z;
                    l.w += v[sp].w;
                }
            s_lg[j][e] = l.x;
            s_lg[j][e + 1] = l.y;
            s_lg[j][e + 2] = l.z;
            s_lg[j][e + 3] = l.w;
        }
        for (int p0 = threadIdx.x; (E & 3) != 0 && p0 < np; p0 += 2 * nth) {
            float v[2][kMaxSplits];
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int p = p0 + u * nth, j = p / E, e = p - j * E;
                const float *src = d.logits + (size_t)(t0 + j) * E + e;
#pragma unroll
                for (int sp = 0; sp < kMaxSplits; sp++) v[u][sp] = p < np && sp < ns ? __ldcg(src + sp * sstride) : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int p = p0 + u * nth, j = p / E, e = p - j * E;
                float l = v[u][0];
#pragma unroll
                for (int sp = 1; sp < kMaxSplits; sp++)
                    if (sp < ns) l += v[u][sp];
                if (p < np) s_lg[j][e] = l;
            }
        }
        __syncthreads();
    }
    TPM_TRACE_MARK_CLK(d, 4, lin);
    if (stop == 2) {
        if (threadIdx.x == 0) d.tile_ctr[tile] = 0;
        return;
    }
    const int warp = threadIdx.x >> 5, t = tile * kTileTok + warp;
    /* the one-tile permutation's list: with the shared slot implied, the routed selections only */
    const bool imp = (TT > 1 || gridDim.y == 1) && shared_implicit(d);
    const int sk = imp ? d.k : d.K;
    if (t < T) select_token(d, t, s_lg[warp], 0, 0, d.br ? s_br : nullptr, sc[warp], gsc[warp], s_sel + warp * sk, sk);
    TPM_TRACE_MARK_CLK(d, 5, lin);
#ifdef TPM_MOE_TRACE
    if (stop == 5) { /* trace diagnostic: the selection again, from warm caches; slot 6 after it */
        if (t < T)
            select_token(d, t, s_lg[warp], 0, 0, d.br ? s_br : nullptr, sc[warp], gsc[warp], s_sel + warp * sk, sk);
        TPM_TRACE_MARK_CLK(d, 6, lin);
    }
#endif
    if (threadIdx.x == 0) d.tile_ctr[tile] = 0; /* for the next replay */
    if (stop == 3) return;
    if (TT > 1 || gridDim.y == 1) { /* one tile: this block is the last; its selections are in s_sel */
        if (threadIdx.x < 4) s_sel[T * sk + threadIdx.x] = INT_MAX; /* build_permutation_direct's padding */
        __syncthreads();
        if (stop < 5) TPM_TRACE_MARK_CLK(d, 6, lin);
        build_permutation_direct(d, T, s_sel, bits, imp);
#ifdef TPM_MOE_TRACE
        if (stop == 6) { /* trace diagnostic: the permutation again (the same results); slot 6 between */
            __syncthreads();
            TPM_TRACE_MARK_CLK(d, 6, lin);
            build_permutation_direct(d, T, s_sel, bits, imp);
        }
#endif
        if (threadIdx.x == 0) d.ctr[2] = 0;
        TPM_TRACE_MARK_CLK(d, 2, 0);
        return;
    }
    if constexpr (TT == 1) {
        if constexpr (TOK == kLogitTokens && TW == 1) { /* the only forms that run several tiles */
            if (d.route_perm) { /* every tile's block its own rows (round 49) */
                build_permutation_groups(d, T, tile * kTileTok, (int)gridDim.y, reinterpret_cast<int *>(bits), lin);
                TPM_TRACE_MARK_CLK(d, 2, 0);
                return;
            }
        }
        if (!block_ticket(d.ctr + 2, (int)gridDim.y, d.route_fence, &s_last)) return;
        TPM_TRACE_MARK_CLK(d, 6, lin);
        if (poll && threadIdx.x == 0) d.ctr[11] = (int)(par ^ 1u); /* every row polled: every partial landed */
        build_permutation_gathered(d, T, s_sel, bits, s_off);
    }
    if (threadIdx.x == 0) d.ctr[2] = 0;
    TPM_TRACE_MARK_CLK(d, 2, 0);
}

/* wr3[0..2][e][h]: hi, mid, lo with wr = hi + mid + lo (each rounded to nearest). */
__global__ void k_split_router(const float *__restrict__ wr, uint16_t *__restrict__ wr3, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float w = wr[i];
        const uint16_t h = tpm_f32_to_bf16(w);
        const float r1 = w - tpm_bf16_to_f32(h);
        const uint16_t m = tpm_f32_to_bf16(r1);
        const float r2 = r1 - tpm_bf16_to_f32(m);
        wr3[i] = h;
        const bool fin = isfinite(w); /* NaN / inf: hi carries it alone */
        wr3[n + i] = fin ? m : (uint16_t)0;
        wr3[2 * n + i] = fin ? tpm_f32_to_bf16(r2) : (uint16_t)0;
    }
}

/* wr3f (routing mode 3's pipelined loads): wr3 in mma operand order, one uint4 per thread:
 * [c][m][sp][s][lane] = the A operand of lane 4g + q at k-step s of split sp, m-tile m, chunk c:
 * {w(g, 2s), w(g + 8, 2s), w(g, 2s + 1), w(g + 8, 2s + 1)}, w(r, i) = the bf16 pair of wr3[sp]
 * [16m + r][32c + 8q + 2i, +1] as one word, zeros past E (moe_cuda_route_tc.cu). */
__global__ void k_frag_router(const uint16_t *__restrict__ wr3, uint4 *__restrict__ wr3f, int E, int H, int Ep) {
    const int mt = Ep / 16;
    const size_t n = (size_t)(H / 32) * mt * 6 * 32;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int lane = (int)(i & 31);
        size_t r = i >> 5;
        const int ks = (int)(r % 2);
        r /= 2;
        const int sp = (int)(r % 3);
        r /= 3;
        const int m = (int)(r % mt), c = (int)(r / mt);
        const int e0 = 16 * m + (lane >> 2), h = 32 * c + 8 * (lane & 3) + 4 * ks;
        uint32_t v[4];
        for (int k = 0; k < 4; k++) { /* k: row g (even) or g + 8 (odd), word 2s (k < 2) or 2s + 1 */
            const int e = e0 + 8 * (k & 1), hh = h + 2 * (k >> 1);
            v[k] = e < E ? *reinterpret_cast<const uint32_t *>(wr3 + ((size_t)sp * E + e) * H + hh) : 0u;
        }
        wr3f[i] = make_uint4(v[0], v[1], v[2], v[3]);
    }
}

/* wrf (routing mode 3's loads 3): wr (fp32) in mma operand order, one float4 per thread:
 * [c][m][j][lane] = wr[16m + g + 8 (j >> 1)][32c + 8q + 4 (j & 1) .. +3] (g = lane / 4, q =
 * lane % 4), zeros past E: the fp32 values of wr3f's words at k-step j & 1, row g (j < 2) or
 * g + 8, before their split. */
__global__ void k_frag_router_f32(const float *__restrict__ wr, float4 *__restrict__ wrf, int E, int H, int Ep) {
    const int mt = Ep / 16;
    const size_t n = (size_t)(H / 32) * mt * 4 * 32;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int lane = (int)(i & 31);
        size_t r = i >> 5;
        const int j = (int)(r % 4);
        r /= 4;
        const int m = (int)(r % mt), c = (int)(r / mt);
        const int e = 16 * m + (lane >> 2) + 8 * (j >> 1), h = 32 * c + 8 * (lane & 3) + 4 * (j & 1);
        wrf[i] = e < E ? *reinterpret_cast<const float4 *>(wr + (size_t)e * H + h) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

int logit_splits(const tpm_moe_dev &d, int T, int epw) {
    /* split H so that the grid fills the GPU about twice; slices of >= 128 floats */
    const int bx = kLogitWarps * epw;
    const int tiles = ((d.E + bx - 1) / bx) * ((T + kLogitTokens - 1) / kLogitTokens);
    const int nsplit = (2 * d.sm_count + tiles - 1) / tiles;
    return max(1, min(min(nsplit, d.logit_rows / T), min(kMaxSplits, d.H / 128)));
}

/* The logits grid with epw experts per warp (1, 2 or 4). */
dim3 logit_grid(const tpm_moe_dev &d, int T, int epw) {
    const int bx = kLogitWarps * epw;
    return dim3((d.E + bx - 1) / bx, (T + kLogitTokens - 1) / kLogitTokens, logit_splits(d, T, epw));
}

/* k_route_fused with the polled partials (one row of blocks) or the ticket. */
template <int EPW, int TOK, int TW = 1, int TT = 1>
void launch_fused(bool poll, dim3 g, int nth, const tpm_moe_dev &d, const uint16_t *x, int T, int stop,
                  cudaStream_t s) {
    if (poll) k_route_fused<EPW, TOK, TW, TT, true><<<g, nth, 0, s>>>(d, x, T, stop);
    else k_route_fused<EPW, TOK, TW, TT, false><<<g, nth, 0, s>>>(d, x, T, stop);
}

tpm_status launch_scatter(const tpm_moe_dev &d, int T, cudaStream_t s) {
    k_perm_scatter<<<(T + 31) / 32, 256, 0, s>>>(d, T);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

} // namespace

int tpm_moe_route_fused_ok(const tpm_moe_dev &d, int T) {
    const int nb = d.E1 + (d.ep > 1 ? 1 : 0);
    return d.E1 <= kMaxE1 && nb * ((T + 31) / 32) <= kPermSmemWords &&
           (T + kLogitTokens - 1) / kLogitTokens <= d.tile_cap;
}

tpm_status tpm_moe_launch_split_router(const tpm_moe_dev &d, cudaStream_t s) {
    k_split_router<<<d.sm_count * 4, 256, 0, s>>>(d.wr, d.wr3, (size_t)d.E * d.H);
    TPM_CUDA_LAUNCHED();
    if (d.wr3f) {
        k_frag_router<<<d.sm_count * 4, 256, 0, s>>>(d.wr3, reinterpret_cast<uint4 *>(d.wr3f), d.E, d.H,
                                                     (d.E + 15) / 16 * 16);
        TPM_CUDA_LAUNCHED();
    }
    if (d.wrf) {
        k_frag_router_f32<<<d.sm_count * 4, 256, 0, s>>>(d.wr, reinterpret_cast<float4 *>(d.wrf), d.E, d.H,
                                                         (d.E + 15) / 16 * 16);
        TPM_CUDA_LAUNCHED();
    }
    return TPM_OK;
}

tpm_status tpm_moe_launch_route(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T, int mode,
                                int stop, int epw, int wide, cudaStream_t s) {
    TPM_ASSERT(d.E <= 32 * kMaxPerLane && d.k <= 16 && d.k <= 32);
    TPM_ASSERT(epw == 1 || epw == 2 || epw == 4);
    const int tpb = kSelThreads / 32;
    /* up to kScatterInBlock rows the last block of k_select scatters them, above
     * it one more launch with a block per 32 tokens */
    const int scatter = (size_t)T * d.K <= (size_t)kScatterInBlock;
    if (mode == 1 && tpm_moe_route_fused_ok(d, T)) {
        dim3 g = logit_grid(d, T, epw);
        /* 5-8 tokens with 8 or 16 experts per block: two 4-token parts per block (logits_tile's TW),
         * ~30% fewer instructions per warp than one 8-token part (r168: -0.3 us) */
        const bool tw2 = T > 4;
        /* one row of blocks (T <= 8, or the wide form below) polls its partials (round 50); several
         * rows with route_poll bit 2, where the ticket over the rows flips the planes (not with the
         * permutation by groups, nor with a diagnostic stop, which skip that ticket) */
        bool poll = (d.route_poll & 1) && d.E % 4 == 0;
        const bool poll_rows = (d.route_poll & 4) && d.E % 4 == 0 && !d.route_perm && stop == 0;
        /* the wide form (9 .. wide <= 16 tokens): both 8-token tiles in one block row of 512-thread
         * blocks, so one ticket and one block's 16 warps do what two tiles' tickets, selections and
         * a second ticket did; the same H slices as the 8-token tiles (logit_grid), so the same bits */
        if (T > kLogitTokens && T <= wide && T <= 2 * kLogitTokens && epw <= 2 && (int)(g.x * g.z) <= d.sm_count) {
            /* not with 32 experts per block (epw 4): at 512 threads (128 registers) its 8-token
             * warps spill; and only while the grid is one wave (one 512-thread block per SM):
             * with 256 blocks (8 experts per block) or deepseek-v3's 144 it routed 4-8 us slower
             * (bench/results/r185) */
            g.y = 1;
            const int nth = 2 * kLogitWarps * 32;
            if (epw == 1) launch_fused<2, 4, 2, 2>(poll, g, nth, d, x, T, stop, s);
            else launch_fused<4, 4, 2, 2>(poll, g, nth, d, x, T, stop, s);
            TPM_CUDA_LAUNCHED();
            return TPM_OK;
        }
        /* up to 1 / 2 / 4 tokens: the logits blocks keep that many tokens' accumulators and x
         * loads instead of 8 (fewer registers; the same bits) */
        const int nth = kLogitWarps * 32;
        poll = g.y == 1 ? poll : poll_rows;
        if (T == 1 && epw == 4) launch_fused<4, 1>(poll, g, nth, d, x, T, stop, s);
        else if (T == 2 && epw == 4) launch_fused<4, 2>(poll, g, nth, d, x, T, stop, s);
        else if (T <= 4 && epw == 4) launch_fused<4, 4>(poll, g, nth, d, x, T, stop, s);
        else if (T == 1 && epw == 2) launch_fused<2, 1>(poll, g, nth, d, x, T, stop, s);
        else if (T == 2 && epw == 2) launch_fused<2, 2>(poll, g, nth, d, x, T, stop, s);
        else if (T <= 4 && epw == 2) launch_fused<2, 4>(poll, g, nth, d, x, T, stop, s);
        else if (T == 1 && epw == 1) launch_fused<1, 1>(poll, g, nth, d, x, T, stop, s);
        else if (T == 2 && epw == 1) launch_fused<1, 2>(poll, g, nth, d, x, T, stop, s);
        else if (T <= 4 && epw == 1) launch_fused<1, 4>(poll, g, nth, d, x, T, stop, s);
        else if (epw == 1 && tw2) launch_fused<2, 4, 2>(poll, g, nth, d, x, T, stop, s);
        else if (epw == 2 && tw2) launch_fused<4, 4, 2>(poll, g, nth, d, x, T, stop, s);
        else if (epw == 1) launch_fused<1, kLogitTokens>(poll, g, nth, d, x, T, stop, s);
        else if (epw == 2) launch_fused<2, kLogitTokens>(poll, g, nth, d, x, T, stop, s);
        else launch_fused<4, kLogitTokens>(poll, g, nth, d, x, T, stop, s);
        TPM_CUDA_LAUNCHED();
        return TPM_OK;
    }
    if (mode == 2 && blas && (size_t)d.logit_rows >= (size_t)3 * T) {
        /* logits [T][3E] = x [T x H] . wr3^T: column-major C^T [3E x T] = wr3 [H x 3E]^T . x^T */
        const float one = 1.0f, zero = 0.0f;
        const cublasStatus_t st = cublasGemmEx(static_cast<cublasHandle_t>(blas), CUBLAS_OP_T, CUBLAS_OP_N, 3 * d.E,
                                               T, d.H, &one, d.wr3, CUDA_R_16BF, d.H, x, CUDA_R_16BF, d.H, &zero,
                                               d.logits, CUDA_R_32F, 3 * d.E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return tpm_err(TPM_ERR_CUDA, "router cublasGemmEx (%d x %d x %d): %s", T, 3 * d.E, d.H,
                           cublasGetStatusString(st));
        k_select<<<(T + tpb - 1) / tpb, kSelThreads, 0, s>>>(d, T, 3, 3 * d.E, d.E, scatter);
        TPM_CUDA_LAUNCHED();
        return scatter ? TPM_OK : launch_scatter(d, T, s);
    }
    const dim3 g1 = logit_grid(d, T, epw);
    if (epw == 1) k_logits<1><<<g1, kLogitWarps * 32, 0, s>>>(x, d.wr, d.logits, T, d.H, d.E);
    else if (epw == 2) k_logits<2><<<g1, kLogitWarps * 32, 0, s>>>(x, d.wr, d.logits, T, d.H, d.E);
    else k_logits<4><<<g1, kLogitWarps * 32, 0, s>>>(x, d.wr, d.logits, T, d.H, d.E);
    TPM_CUDA_LAUNCHED();
    k_select<<<(T + tpb - 1) / tpb, kSelThreads, 0, s>>>(d, T, (int)g1.z, d.E, T * d.E, scatter);
    TPM_CUDA_LAUNCHED();
    return scatter ? TPM_OK : launch_scatter(d, T, s);
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_route, (k_split_router))
