/*
 * moe_cuda_route.cu - MoE routing on the GPU in two launches.
 *
 * 1. k_logits: logits[t][e] = x[t] . Wr[e] in fp32 (x bf16 widened, Wr fp32).
 *    Grid (E/32, ceil(T/8), S): a warp owns 4 experts x 8 tokens of one of S
 *    slices of H (S chosen so the grid fills the GPU: decode batches are
 *    latency-bound otherwise); each lane accumulates a strided part with
 *    fmaf, the warp reduces with a fixed xor butterfly and k_select adds the
 *    S slices in slice order. A logit has the same bits in every run and
 *    identical router rows give identical logits (exact ties stay ties).
 * 2. k_select: one warp per token. Scores are sanitized (NaN -> -inf), then k
 *    rounds of a warp arg-max over (eligible, value, lower index wins): an
 *    expert can never be picked twice or out of range. Variants: sigmoid +
 *    bias (bias for selection only), grouped (group score = sum of the top-2
 *    biased scores, top groups kept), softmax over the top-k logits. Weights
 *    are renormalized over the routed experts with the routed scaling factor
 *    folded in; the fused shared expert is appended as slot k, weight 1.0.
 *    The last block to finish (atomic ticket after __threadfence) builds the
 *    permutation: a bitmap [expert][token/32] -> per-word prefix popcounts ->
 *    counts, offsets, the list of touched experts, and for every (token,
 *    slot) its row: offset[e] + #(earlier tokens on e). The result is stable
 *    (tokens increasing inside an expert) and independent of block timing.
 *    Data written inside the launch is read back with ld.global.cg (L2),
 *    never through a possibly stale L1 line. The last block zeroes the
 *    ticket again, so the launch replays inside a CUDA graph.
 */
#include "moe_cuda_kernels.h"

#include <float.h>
#include <math.h>

namespace {

constexpr int kLogitWarps = 8;   /* warps per block */
constexpr int kLogitEpw = 4;     /* experts per warp */
constexpr int kLogitTokens = 8;  /* tokens per block */
constexpr int kLogitExperts = kLogitWarps * kLogitEpw;
constexpr int kMaxSplits = 16;
constexpr int kSelThreads = 1024; /* the last block builds the permutation with all of them */
constexpr int kMaxPerLane = 8; /* E <= 256 */

/* Partial logits of a (32 experts x 8 tokens x H-slice) tile: each lane keeps
 * 4 x 8 accumulators over float4 chunks c = lane, lane + 32, ... of its
 * slice, the warp reduces with a fixed butterfly, k_select sums the slices
 * in slice order. */
__global__ void __launch_bounds__(kLogitWarps * 32) k_logits(const uint16_t *__restrict__ x,
                                                             const float *__restrict__ wr,
                                                             float *__restrict__ part, int T,
                                                             int H, int E) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int e0 = blockIdx.x * kLogitExperts + warp * kLogitEpw;
    const int t0 = blockIdx.y * kLogitTokens;
    const int split = blockIdx.z, nsplit = gridDim.z;
    const int n4 = H / 4;
    const int cb = (int)((int64_t)n4 * split / nsplit), ce = (int)((int64_t)n4 * (split + 1) / nsplit);
    const int nt = min(kLogitTokens, T - t0);
    float acc[kLogitEpw][kLogitTokens];
#pragma unroll
    for (int i = 0; i < kLogitEpw; i++)
#pragma unroll
        for (int j = 0; j < kLogitTokens; j++) acc[i][j] = 0.0f;
    for (int c = cb + lane; c < ce; c += 32) {
        float4 w[kLogitEpw];
#pragma unroll
        for (int i = 0; i < kLogitEpw; i++)
            w[i] = e0 + i < E ? __ldg(reinterpret_cast<const float4 *>(wr + (size_t)(e0 + i) * H) + c)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int j = 0; j < kLogitTokens; j++) {
            if (j < nt) {
                const uint2 xv = __ldg(reinterpret_cast<const uint2 *>(x + (size_t)(t0 + j) * H) + c);
                const float x0 = __uint_as_float(xv.x << 16), x1 = __uint_as_float(xv.x & 0xffff0000u);
                const float x2 = __uint_as_float(xv.y << 16), x3 = __uint_as_float(xv.y & 0xffff0000u);
#pragma unroll
                for (int i = 0; i < kLogitEpw; i++) {
                    acc[i][j] = fmaf(w[i].x, x0, acc[i][j]);
                    acc[i][j] = fmaf(w[i].y, x1, acc[i][j]);
                    acc[i][j] = fmaf(w[i].z, x2, acc[i][j]);
                    acc[i][j] = fmaf(w[i].w, x3, acc[i][j]);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < kLogitEpw; i++)
#pragma unroll
        for (int j = 0; j < kLogitTokens; j++) {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], o);
            if (lane == i * kLogitTokens + j && j < nt && e0 + i < E)
                part[((size_t)split * T + t0 + j) * E + e0 + i] = acc[i][j];
        }
}

/* Warp arg-max of (ok, v, lower index): returns the winning index, or -1. */
__device__ __forceinline__ int warp_argmax(bool ok, float v, int idx) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const int ook = __shfl_xor_sync(0xffffffffu, (int)ok, o);
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        bool take;
        if (ook != (int)ok) take = ook;
        else if (ov != v) take = ov > v;
        else take = oi < idx;
        if (take) {
            ok = ook;
            v = ov;
            idx = oi;
        }
    }
    return ok ? idx : -1;
}

__device__ __forceinline__ float sanitize(float v) { return isnan(v) ? -INFINITY : v; }

/* The permutation, run by the last block of k_select. */
__device__ void build_permutation(const tpm_moe_dev &d, int T) {
    const int K = d.K, E1 = d.E1, Wt = (T + 31) / 32;
    const int tid = threadIdx.x, nth = blockDim.x;
    for (int i = tid; i < E1 * Wt; i += nth) d.bits[i] = 0u;
    __syncthreads();
    for (int p = tid; p < T * K; p += nth) {
        const int t = p / K, e = __ldcg(d.sel + p);
        atomicOr(d.bits + (size_t)e * Wt + (t >> 5), 1u << (t & 31));
    }
    __syncthreads();
    for (int e = tid; e < E1; e += nth) {
        int run = 0;
#pragma unroll 8
        for (int w = 0; w < Wt; w++) {
            d.bitpre[(size_t)e * Wt + w] = (uint32_t)run;
            run += __popc(__ldcg(d.bits + (size_t)e * Wt + w));
        }
        d.counts[e] = run;
    }
    __syncthreads();
    if (tid < 32) { /* warp 0: exclusive scan of counts, list of touched experts */
        int base = 0, nact = 0;
        for (int e0 = 0; e0 < E1; e0 += 32) {
            const int e = e0 + tid;
            const int c = e < E1 ? __ldcg(d.counts + e) : 0;
            int inc = c;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(0xffffffffu, inc, o);
                if (tid >= o) inc += v;
            }
            if (e < E1) d.offsets[e] = base + inc - c;
            const unsigned m = __ballot_sync(0xffffffffu, c > 0);
            if (c > 0) d.active[nact + __popc(m & ((1u << tid) - 1u))] = e;
            nact += __popc(m);
            base += __shfl_sync(0xffffffffu, inc, 31);
        }
        if (tid == 0) {
            d.offsets[E1] = base;
            *d.n_active = nact;
        }
    }
    __syncthreads();
    for (int p = tid; p < T * K; p += nth) {
        const int t = p / K, e = __ldcg(d.sel + p), w = t >> 5;
        const uint32_t word = __ldcg(d.bits + (size_t)e * Wt + w);
        const int pos = __ldcg(d.offsets + e) + (int)__ldcg(d.bitpre + (size_t)e * Wt + w) +
                        __popc(word & ((1u << (t & 31)) - 1u));
        d.perm_tok[pos] = t;
        d.perm_exp[pos] = e;
        d.inv[p] = pos;
    }
    if (tid == 0) d.ctr[2] = 0; /* ticket, for the next replay */
}

__global__ void __launch_bounds__(kSelThreads) k_select(tpm_moe_dev d, int T, int nsplit) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int t = blockIdx.x * (kSelThreads / 32) + warp;
    const int E = d.E, k = d.k;
    if (t < T) {
        const float *lg = d.logits + (size_t)t * E; /* slice s at + s * T * E */
        const size_t sstride = (size_t)T * E;
        float s[kMaxPerLane], c[kMaxPerLane];
        bool ok[kMaxPerLane];
#pragma unroll
        for (int j = 0; j < kMaxPerLane; j++) {
            const int e = lane + 32 * j;
            ok[j] = e < E;
            float l = -INFINITY;
            if (ok[j]) {
                l = lg[e];
                for (int sp = 1; sp < nsplit; sp++) l += lg[e + sp * sstride]; /* slice order */
                l = sanitize(l);
            }
            if (d.router == TPM_ROUTER_SOFTMAX_TOPK) { /* finite, so exp(l - max) is defined */
                s[j] = fminf(fmaxf(l, -FLT_MAX), FLT_MAX);
                c[j] = s[j];
            } else {
                s[j] = 1.0f / (1.0f + expf(-l));
                c[j] = s[j] + (d.br && ok[j] ? d.br[e] : 0.0f);
            }
        }
        if (d.router == TPM_ROUTER_GROUPED_SIGMOID && d.n_groups > 1) {
            /* group score = sum of the two largest biased scores of the group */
            const int gs = E / d.n_groups;
            __shared__ float sc[kSelThreads / 32][256];
            __shared__ float gsc[kSelThreads / 32][32];
#pragma unroll
            for (int j = 0; j < kMaxPerLane; j++)
                if (ok[j]) sc[warp][lane + 32 * j] = c[j];
            __syncwarp();
            if (lane < d.n_groups) {
                float b1 = -INFINITY, b2 = -INFINITY;
                int i1 = -1;
                for (int i = 0; i < gs; i++) { /* top-1 (lower index on ties) */
                    const float v = sc[warp][lane * gs + i];
                    if (i1 < 0 || v > b1) {
                        b1 = v;
                        i1 = i;
                    }
                }
                for (int i = 0; i < gs; i++) {
                    const float v = sc[warp][lane * gs + i];
                    if (i != i1 && (v > b2 || b2 == -INFINITY)) b2 = v;
                }
                gsc[warp][lane] = b1 + b2;
            }
            __syncwarp();
            bool gok = lane < d.n_groups, keep = false;
            float gv = gok ? sanitize(gsc[warp][lane]) : -INFINITY;
            for (int r = 0; r < d.topk_groups; r++) {
                const int g = warp_argmax(gok, gv, lane);
                if (g == lane) {
                    keep = true;
                    gok = false;
                }
            }
            const unsigned kept = __ballot_sync(0xffffffffu, keep);
#pragma unroll
            for (int j = 0; j < kMaxPerLane; j++)
                if (ok[j] && !((kept >> ((lane + 32 * j) / gs)) & 1u)) ok[j] = false;
        }
        /* top-k: k rounds of arg-max over the remaining eligible experts */
        int idx_mine = -1;
        float wsel = 0.0f;
        float wk[16];
        for (int r = 0; r < k; r++) {
            bool bok = false;
            float bv = -INFINITY;
            int bi = 0x7fffffff;
#pragma unroll
            for (int j = 0; j < kMaxPerLane; j++) {
                const int e = lane + 32 * j;
                if (ok[j] && (!bok || c[j] > bv)) {
                    bok = true;
                    bv = c[j];
                    bi = e;
                }
            }
            const int win = warp_argmax(bok, bv, bi);
            float wv = 0.0f;
#pragma unroll
            for (int j = 0; j < kMaxPerLane; j++) {
                if (lane + 32 * j == win) {
                    ok[j] = false;
                    wv = s[j];
                }
            }
            /* broadcast the winner's score from its owner lane */
            const int owner = win >= 0 ? (win & 31) : 0;
            wv = __shfl_sync(0xffffffffu, wv, owner);
            if (r < 16) wk[r] = wv;
            if (lane == r) {
                idx_mine = win;
                wsel = wv;
            }
        }
        /* weights, in slot order (same order on every lane) */
        float sum = 0.0f;
        if (d.router == TPM_ROUTER_SOFTMAX_TOPK) {
            const float mx = wk[0]; /* slot 0 has the largest logit */
            for (int r = 0; r < k; r++) sum += expf(wk[r] - mx);
            wsel = expf(wsel - mx) / sum * d.rsf;
        } else {
            for (int r = 0; r < k; r++) sum += wk[r];
            wsel = (sum > 0.0f && isfinite(sum)) ? wsel / sum * d.rsf : d.rsf / (float)k;
        }
        if (lane < k) {
            d.sel[(size_t)t * d.K + lane] = idx_mine < 0 ? 0 : idx_mine;
            d.wts[(size_t)t * d.K + lane] = wsel;
        }
        if (d.fused && lane == 0) {
            d.sel[(size_t)t * d.K + k] = E; /* the shared expert slot */
            d.wts[(size_t)t * d.K + k] = 1.0f;
        }
    }
    /* last block builds the permutation */
    __shared__ int s_last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = (atomicAdd(d.ctr + 2, 1) == (int)gridDim.x - 1);
    __syncthreads();
    if (s_last) {
        __threadfence();
        build_permutation(d, T);
    }
}

} // namespace

tpm_status tpm_moe_launch_route(const tpm_moe_dev &d, const uint16_t *x, int T, cudaStream_t s) {
    TPM_ASSERT(d.E <= 32 * kMaxPerLane && d.k <= 16 && d.k <= 32);
    /* split H so that the grid fills the GPU about twice; slices of >= 128 floats */
    const int tiles = ((d.E + kLogitExperts - 1) / kLogitExperts) * ((T + kLogitTokens - 1) / kLogitTokens);
    int nsplit = (2 * d.sm_count + tiles - 1) / tiles;
    nsplit = max(1, min(min(nsplit, d.logit_rows / T), min(kMaxSplits, d.H / 128)));
    dim3 g1((d.E + kLogitExperts - 1) / kLogitExperts, (T + kLogitTokens - 1) / kLogitTokens, nsplit);
    k_logits<<<g1, kLogitWarps * 32, 0, s>>>(x, d.wr, d.logits, T, d.H, d.E);
    TPM_CUDA_LAUNCHED();
    const int tpb = kSelThreads / 32;
    k_select<<<(T + tpb - 1) / tpb, kSelThreads, 0, s>>>(d, T, nsplit);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}
