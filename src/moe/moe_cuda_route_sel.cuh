/*
 * moe_cuda_route_sel.cuh - the routing's per-token selection and the small-T
 * permutation builder, shared by moe_cuda_route.cu (modes 0-2),
 * moe_cuda_route_tc.cu (mode 3) and moe_cuda_route_cl.cu (mode 4).
 * Internal: included by .cu files only.
 *
 * select_token: one warp selects one token's top-k from its logits (NaN ->
 * -inf, order-preserving integer keys, lower index wins ties), sigmoid +
 * bias / grouped / softmax routers, renormalized weights, the shared slot
 * appended. build_permutation_direct: the permutation of up to a few hundred
 * (token, slot) pairs in shared memory by counting over them (stable: tokens
 * increasing inside an expert); build_permutation_gathered: the same for the
 * selections other blocks wrote, up to kDirectPairs of them, else
 * build_permutation_small: T <= a few hundred tokens by one block with a
 * bitmap in shared memory; build_permutation_groups (round 49): each block
 * that selected 8 tokens writes their rows itself, after every such block
 * has arrived on a counter (a bounded wait). They read data other blocks of
 * the same launch wrote with ld.global.cg (L2), after the caller's ticket or
 * that wait.
 */
#ifndef TPM_MOE_CUDA_ROUTE_SEL_CUH
#define TPM_MOE_CUDA_ROUTE_SEL_CUH

#include "moe_cuda_kernels.h"

#include <float.h>
#include <limits.h>
#include <math.h>

namespace {

constexpr int kMaxPerLane = 8; /* E <= 256 */
constexpr int kPermSmemWords = 4096; /* route_fused: bitmap [E1][ceil(T/32)] in shared memory */
constexpr int kMaxE1 = 257;
/* build_permutation_gathered's largest T*K for the direct count: at m3's 16 tokens (80 pairs) it
 * beat the bitmap by 0.3-0.6 us, from 20 tokens (100) it lost 0.4-1.0 (bench/results/r181) */
constexpr int kDirectPairs = 80;

/* The expert slot of token t's selection e (a global id; E = the fused
 * shared expert): e itself without EP; with EP the local slot, or the drop
 * bucket E1 for another rank's expert or another rank's shared token (every
 * shared token when the call runs the shared expert dense: d.shared_dense). */
__device__ __forceinline__ int slot_of(const tpm_moe_dev &d, int e, int t) {
    if (d.ep == 1) return e;
    if (e == d.E) return !d.shared_dense && t % d.ep == d.ep_rank ? d.Es : d.E1;
    const int l = e - d.e0;
    return (unsigned)l < (unsigned)d.Eloc ? l : d.E1;
}

/* Polled partial logits (tuning.route_poll, round 50: routing mode 1's one row, mode 3's groups). */
constexpr unsigned kPollSentinel = 0xffffffffu; /* a NaN no logit is stored as (logits_tile's canon) */
constexpr int kPollBound = 1 << 22;             /* polls of L2 (~0.5-1 us each): seconds; a bug, never a hang */

__device__ __forceinline__ unsigned ld_relaxed_u32(const int32_t *p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float4 ld_relaxed_f4(const float4 *p) {
    float4 v;
    asm volatile("ld.relaxed.gpu.global.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p));
    return v;
}
/* Whether any of the four values is still the sentinel (each float is one 4-byte store). */
__device__ __forceinline__ bool poll_pending(const float4 &v) {
    return (__float_as_uint(v.x) == kPollSentinel) | (__float_as_uint(v.y) == kPollSentinel) |
           (__float_as_uint(v.z) == kPollSentinel) | (__float_as_uint(v.w) == kPollSentinel);
}

/* The sum, in order, of n <= N partials at src + k st4 (k < n) in a buffer of sentinels: every
 * load at once, then the pending ones again until none holds the sentinel (bounded: past
 * kPollBound it sets *err and goes on with what it has). The same adds as a ticket's sums. */
template <int N>
__device__ __forceinline__ float4 poll_sum(int32_t *err, const float4 *src, size_t st4, int n) {
    float4 v[N];
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = k < n ? ld_relaxed_f4(src + k * st4) : make_float4(0.f, 0.f, 0.f, 0.f);
    for (int it = 0;; it++) {
        bool miss = false;
#pragma unroll
        for (int k = 0; k < N; k++) miss |= k < n && poll_pending(v[k]);
        if (!miss) break;
        if (it >= kPollBound) {
            atomicExch(err, 1);
            break;
        }
#pragma unroll
        for (int k = 0; k < N; k++)
            if (k < n && poll_pending(v[k])) v[k] = ld_relaxed_f4(src + k * st4);
    }
    float4 s = v[0];
#pragma unroll
    for (int k = 1; k < N; k++) {
        if (k < n) {
            s.x += v[k].x;
            s.y += v[k].y;
            s.z += v[k].z;
            s.w += v[k].w;
        }
    }
    return s;
}

/* A block-done ticket on *ctr: true in the last of n blocks to arrive (uniform in the block;
 * s_flag: a shared int). Every thread's earlier writes are released with it, and the last block
 * acquires the others': a barrier, then thread 0's atom.acq_rel.gpu (the pattern of a CUTLASS
 * barrier's arrive); the caller's threads read the others' data after it with ld.global.cg.
 * fence (d.route_fence = 1): each thread also runs __threadfence() before, and the winner after
 * (the earlier form; the same results). */
__device__ __forceinline__ bool block_ticket(int *ctr, int n, int fence, int *s_flag) {
    if (fence) __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int old;
        asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(ctr) : "memory");
        *s_flag = old == n - 1;
    }
    __syncthreads();
    const bool last = *s_flag != 0;
    if (last && fence) __threadfence();
    return last;
}

/* Whether the permutation builders take the shared slot's pairs as implied (build_permutation_direct's
 * imp): a fused layer without EP, whose shared slot E is every token's last pair. */
__device__ __forceinline__ bool shared_implicit(const tpm_moe_dev &d) { return d.fused && d.ep == 1; }

/* Buckets of the permutation: the E1 slots, plus the drop bucket with EP. */
__device__ __forceinline__ int n_buckets(const tpm_moe_dev &d) { return d.E1 + (d.ep > 1 ? 1 : 0); }

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

/* An unsigned key with the order of the float v (v not NaN; -0 and +0 equal,
 * as the float compare has them), >= 1 even for -inf, so 0 can mean "not
 * eligible". */
__device__ __forceinline__ unsigned order_key(float v) {
    if (isnan(v)) v = -INFINITY;
    const unsigned u = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Warp 0 of a permutation builder: the exclusive scan of the NB bucket
 * counts in cnt (shared memory, replaced by the offsets), offsets[0 .. E1]
 * (the drop bucket E1, with EP, is the last: its offset is the local row
 * total), the touched-slot list in increasing order and its length. */
__device__ void scan_buckets(const tpm_moe_dev &d, int NB, int *cnt) {
    const int lane = threadIdx.x & 31, E1 = d.E1;
    int base = 0, nact = 0;
    for (int e0 = 0; e0 < NB; e0 += 32) {
        const int e = e0 + lane;
        const int c = e < NB ? cnt[e] : 0;
        int inc = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += v;
        }
        __syncwarp();
        if (e < NB) {
            cnt[e] = base + inc - c;
            if (e <= E1) d.offsets[e] = base + inc - c;
        }
        const bool act = c > 0 && e < E1;
        const unsigned m = __ballot_sync(0xffffffffu, act);
        if (act) d.active[nact + __popc(m & ((1u << lane) - 1u))] = e;
        nact += __popc(m);
        base += __shfl_sync(0xffffffffu, inc, 31);
    }
    if (lane == 0) {
        if (NB == E1) d.offsets[E1] = base;
        *d.n_active = nact;
    }
}


/* build_permutation_small's row of pair p (token t, slot e): e's offset plus the tokens before t
 * on e (the bitmap's lower bits) */
__device__ __forceinline__ void bitmap_row(const tpm_moe_dev &d, const uint32_t *bits, const int *s_off, int Wt, int p,
                                           int t, int e) {
    const int w = t >> 5;
    int pos = s_off[e] + __popc(bits[e * Wt + w] & ((1u << (t & 31)) - 1u));
    for (int w2 = 0; w2 < w; w2++) pos += __popc(bits[e * Wt + w2]);
    d.perm_tok[pos] = t;
    d.perm_exp[pos] = e;
    d.inv[p] = pos;
}

/* The permutation for small T (several tiles), run by the last block of
 * k_route_fused: the bitmap lives in shared memory (E1 * ceil(T/32) <=
 * kPermSmemWords) and the per-word prefixes are recomputed (at most a few
 * words per expert). */
__device__ void build_permutation_small(const tpm_moe_dev &d, int T, uint32_t *bits, int *s_off) {
    const int K = d.K, E1 = d.E1, NB = n_buckets(d), Wt = (T + 31) / 32, TK = T * K;
    const int tid = threadIdx.x, nth = blockDim.x;
    /* A thread's first kHeld pairs (p = tid + i nth): their selections loaded once, all before the
     * bitmap is cleared (their L2 trip overlaps the clearing and its barrier) and kept for the
     * rows below. Round 30: the loop of loads and atomics went to L2 once per pass, and the rows
     * loaded the selections again. The clamped index keeps the loads in one basic block. */
    constexpr int kHeld = 4;
    int held[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; i++) {
        const int p = tid + i * nth;
        held[i] = __ldcg(d.sel + (p < TK ? p : 0));
    }
    for (int i = tid; i < NB * Wt; i += nth) bits[i] = 0u;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kHeld; i++) {
        const int p = tid + i * nth, t = p / K;
        if (p < TK) {
            held[i] = slot_of(d, held[i], t);
            atomicOr(bits + held[i] * Wt + (t >> 5), 1u << (t & 31));
        }
    }
    for (int p = tid + kHeld * nth; p < TK; p += nth) {
        const int t = p / K, e = slot_of(d, __ldcg(d.sel + p), t);
        atomicOr(bits + e * Wt + (t >> 5), 1u << (t & 31));
    }
    __syncthreads();
    for (int e = tid; e < NB; e += nth) {
        int run = 0;
        for (int w = 0; w < Wt; w++) run += __popc(bits[e * Wt + w]);
        s_off[e] = run; /* count for now */
        if (e < E1) d.counts[e] = run;
    }
    __syncthreads();
    if (tid < 32) scan_buckets(d, NB, s_off); /* s_off: counts -> offsets */
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kHeld; i++) {
        const int p = tid + i * nth;
        if (p < TK) bitmap_row(d, bits, s_off, Wt, p, p / K, held[i]);
    }
    for (int p = tid + kHeld * nth; p < TK; p += nth) bitmap_row(d, bits, s_off, Wt, p, p / K, slot_of(d, __ldcg(d.sel + p), p / K));
}

/* The permutation of TK = T*K <= kDirectPairs selections in shared memory, by one
 * block (k_route_fused's one-tile path, and via build_permutation_gathered the last tile of its
 * several-tile path and mode 3's last group up to kDirectPairs / K tokens), so every
 * result is a count over them (no bitmap, no scan): row of pair p =
 * #{q : sel[q] < sel[p]} + #{q < p : sel[q] == sel[p]} (within a token the
 * experts are distinct, so q < p on the same expert is an earlier token: the
 * bitmap version's stable order); offsets[e] = #{q : sel[q] < e}, counts[e] =
 * #{q : sel[q] == e}. sel_s is 16-byte aligned and padded with INT_MAX up to a
 * multiple of 4 entries (no pair's expert, nor below one), so the counts read
 * 4 entries per load, all in flight. The rows run on threads 0, 1, ..; the
 * buckets 0 .. E1 on the block's last warps, 32 consecutive buckets per warp
 * and pass: a ballot of the touched ones per 32 (s_mask, ceil((E1 + 1) / 32)
 * words), one named barrier among those warps, and each touched bucket's place
 * in the active list from the masks' popcounts. No block barrier and no shared
 * atomics (round 28: the earlier form's touched bitmap, its barrier and the
 * loops over its words took 1297 cycles at 1 token, 1933 at 8:
 * bench/results/r177).
 * imp (a fused layer without EP: shared_implicit): sel_s holds the T k routed selections only
 * (pair t k + s of sel_s is pair t K + s), padded at T k. The shared slot E sorts after every
 * routed expert and each token has one pair on it, so its rows are T k + t, its count T and its
 * offset T k: written without counting, and the routed pairs' counts skip its T entries
 * (round 48: r257 had the fused routing 0.1-0.3 us slower than the unfused one in its
 * permutation at 1-8 tokens). The same outputs as the full list. */
__device__ void build_permutation_direct(const tpm_moe_dev &d, int T, int *sel_s, uint32_t *s_mask, bool imp = false) {
    const int K = d.K, E1 = d.E1, TK = T * K, kr = imp ? d.k : K, TS = T * kr, nq = (TS + 3) / 4;
    const int tid = threadIdx.x, nth = blockDim.x, W = nth >> 5, warp = tid >> 5, lane = tid & 31;
    const int4 *s4 = reinterpret_cast<const int4 *>(sel_s);
    if (d.ep > 1) { /* selections -> slots (the drop bucket E1 sorts last) */
        for (int p = tid; p < TK; p += nth) sel_s[p] = slot_of(d, sel_s[p], p / K);
        __syncthreads();
    }
    for (int p = tid; p < TS + (imp ? T : 0); p += nth) {
        if (p >= TS) { /* imp: token p - TS's shared pair, the row after every routed one */
            const int t = p - TS;
            d.perm_tok[p] = t;
            d.perm_exp[p] = d.E;
            d.inv[t * K + d.k] = p;
            continue;
        }
        const int e = sel_s[p];
        int pos = 0;
#pragma unroll 4
        for (int q4 = 0; q4 < nq; q4++) {
            const int4 v = s4[q4];
            const int q = 4 * q4;
            pos += (v.x < e) | ((v.x == e) & (q < p));
            pos += (v.y < e) | ((v.y == e) & (q + 1 < p));
            pos += (v.z < e) | ((v.z == e) & (q + 2 < p));
            pos += (v.w < e) | ((v.w == e) & (q + 3 < p));
        }
        const int t = p / kr;
        d.perm_tok[pos] = t;
        d.perm_exp[pos] = e;
        d.inv[imp ? p + t : p] = pos; /* imp: pair t k + s of sel_s is pair t K + s = (t k + s) + t */
    }
    constexpr int kMaxChunks = (kMaxE1 + 1 + 31) / 32;
    const int nch = (E1 + 1 + 31) / 32, now = min(nch, W), w0 = W - now;
    if (warp < w0) return;
    for (int c = warp - w0; c < nch; c += now) { /* warp-uniform */
        const int e = 32 * c + lane;
        int cnt = 0, less = 0;
        if (imp && e >= d.E) { /* the shared slot E (T rows after the T k routed ones), then E1 */
            cnt = e == d.E ? T : 0;
            less = e == d.E ? TS : TK;
            if (e < E1) d.counts[e] = cnt;
            if (e <= E1) d.offsets[e] = less;
        } else if (e <= E1) { /* offsets[E1]: the local row total */
#pragma unroll 4
            for (int q4 = 0; q4 < nq; q4++) {
                const int4 v = s4[q4];
                cnt += (v.x == e) + (v.y == e) + (v.z == e) + (v.w == e);
                less += (v.x < e) + (v.y < e) + (v.z < e) + (v.w < e);
            }
            if (e < E1) d.counts[e] = cnt;
            d.offsets[e] = less;
        }
        const unsigned m = __ballot_sync(0xffffffffu, e < E1 && cnt > 0);
        if (lane == 0) s_mask[c] = m;
    }
    asm volatile("bar.sync 1, %0;" ::"r"(32 * now) : "memory"); /* the last now warps: s_mask complete */
    for (int c = warp - w0; c < nch; c += now) {
        const uint32_t m = s_mask[c];
        if ((m >> lane) & 1u) {
            int idx = __popc(m & ((1u << lane) - 1u));
#pragma unroll
            for (int i = 0; i < kMaxChunks; i++)
                if (i < c) idx += __popc(s_mask[i]);
            d.active[idx] = 32 * c + lane;
        }
    }
    if (tid == nth - 1) {
        int n = 0;
#pragma unroll
        for (int i = 0; i < kMaxChunks; i++)
            if (i < nch) n += __popc(s_mask[i]);
        *d.n_active = n;
    }
}

/* The permutation of T tokens by the last block of a launch whose blocks wrote their selections
 * to d.sel (read after the caller's ticket, through L2): up to kDirectPairs (token, slot) pairs
 * copied into s_sel (kDirectPairs + 4 ints, 16-byte aligned) for build_permutation_direct, more
 * by build_permutation_small's bitmap. Round 28 (bench/results/r174): the bitmap form took ~2.3 us
 * of mode 1's 9-24 token routing (after its ticket) and 2.6-4.4 us of mode 3's. */
__device__ void build_permutation_gathered(const tpm_moe_dev &d, int T, int *s_sel, uint32_t *bits, int *s_off) {
    const int TK = T * d.K;
    if (TK > kDirectPairs) {
        build_permutation_small(d, T, bits, s_off);
        return;
    }
    const bool imp = shared_implicit(d); /* then the routed pairs only: pair t k + s is d.sel's t K + s */
    const int k = d.k, TS = imp ? T * k : TK;
    for (int p = threadIdx.x; p < TS + 4; p += blockDim.x)
        s_sel[p] = p < TS ? __ldcg(d.sel + (imp ? p + p / k : p)) : INT_MAX;
    __syncthreads();
    build_permutation_direct(d, T, s_sel, bits, imp);
}

/* Shared memory of build_permutation_groups, in ints: the bucket totals, the counts before the
 * group and the group's tokens on each bucket (kMaxE1 + 1 each), the group's slots (8 tokens x
 * K <= 17), the scan's chunk totals and touched masks (kScanChunks each). */
constexpr int kScanChunks = (kMaxE1 + 1 + 31) / 32;
constexpr int kGroupPermInts = 3 * (kMaxE1 + 1) + 8 * 17 + 2 * kScanChunks;
constexpr int kGroupSpinBound = 1 << 22; /* polls of an L2 line (~0.5 us each): seconds; a bug, never a hang */

/* scan_buckets by every warp of the block (at most two 32-bucket chunks per warp): each chunk's
 * inclusive scan and touched mask, a block barrier, then each chunk adds the totals of the chunks
 * before it. cnt: counts in, offsets out; emit: also offsets[0 .. E1], counts[e < E1] and the
 * touched list with its length, as scan_buckets. s_ct / s_cm: kScanChunks ints each. */
__device__ void scan_buckets_all(const tpm_moe_dev &d, int NB, int *cnt, int *s_ct, uint32_t *s_cm, bool emit) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, W = blockDim.x >> 5, E1 = d.E1;
    const int nch = (NB + 31) / 32;
    int cown[2], iown[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int ch = warp + i * W, e = 32 * ch + lane;
        const int c = ch < nch && e < NB ? cnt[e] : 0;
        int inc = c;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += v;
        }
        const unsigned m = __ballot_sync(0xffffffffu, c > 0 && e < E1);
        if (ch < nch && lane == 31) s_ct[ch] = inc;
        if (ch < nch && lane == 0) s_cm[ch] = m;
        cown[i] = c;
        iown[i] = inc;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int ch = warp + i * W, e = 32 * ch + lane;
        if (ch >= nch) break; /* warp-uniform */
        int base = 0, na = 0;
#pragma unroll
        for (int c2 = 0; c2 < kScanChunks; c2++)
            if (c2 < ch) {
                base += s_ct[c2];
                na += __popc(s_cm[c2]);
            }
        const int off = base + iown[i] - cown[i];
        if (e < NB) cnt[e] = off;
        if (emit) {
            if (e <= E1) d.offsets[e] = off;
            if (e < E1) d.counts[e] = cown[i];
            const uint32_t m = s_cm[ch];
            if ((m >> lane) & 1u) d.active[na + __popc(m & ((1u << lane) - 1u))] = e;
        }
    }
    if (emit && threadIdx.x == 0) {
        int tot = 0, na = 0;
        for (int c2 = 0; c2 < nch; c2++) {
            tot += s_ct[c2];
            na += __popc(s_cm[c2]);
        }
        if (NB == E1) d.offsets[E1] = tot;
        *d.n_active = na;
    }
}

/* build_permutation_groups' step 2 counts cleared (before a barrier that precedes place_group_rows). */
__device__ __forceinline__ void clear_group_counts(const tpm_moe_dev &d, int *s_cnt) {
    const int NB = n_buckets(d);
    for (int b = threadIdx.x; b < NB; b += blockDim.x) {
        s_cnt[b] = 0;
        s_cnt[kMaxE1 + 1 + b] = 0;
        s_cnt[2 * (kMaxE1 + 1) + b] = 0;
    }
}
__device__ void place_group_rows(const tpm_moe_dev &d, int T, int t0, int ntok, int *s_cnt);

/* The permutation written by the blocks that selected the tokens (tuning.route_perm_min; mode 3,
 * and mode 1 from two 8-token tiles), instead of by the last of them after a second ticket:
 * each block that selected the group [t0, t0 + 8) (its selections stored in d.sel) writes that
 * group's rows.
 *  1. A barrier over the groups' blocks on one of two counters, ctr[8 + par], par = ctr[10]
 *     (launches alternate): thread 0 reads par, then arrives (after a block barrier, one acq_rel
 *     atomic, as block_ticket: its threads' selections are released with it). The others wait
 *     with acquire loads until the counter reaches ngroups (bounded: past kGroupSpinBound polls
 *     it sets ctr[5], which tpm_cuda_moe_check reports, and goes on; the results are then
 *     invalid). The last to arrive zeroes the other counter (the previous launch's, done) and
 *     flips par for the next launch, both without waiting; par is read before the arrival, so
 *     it is this launch's in every block. Round 49's first form zeroed one counter after a second
 *     atomic (departures) that every block waited on; a generation count bumped by the last
 *     arrival cost the waiters a second L2 hop (r265: 0.3-0.5 us at 32-64 tokens).
 *  2. It reads all T K selections through L2 (slot_of: with EP, local slots and the drop bucket)
 *     and counts them per bucket in shared memory: tot[b] over every pair, pre[b] over the pairs
 *     of the tokens before t0, and the group's tokens on b as a bit mask. The block's warps scan
 *     tot into the offsets (scan_buckets_all); group 0's block also writes counts, offsets and
 *     the touched-slot list.
 *  3. The group's pair q (token t0 + w, w = q / K) goes to row offsets[b] + pre[b] + the group's
 *     tokens before w on b: tokens increasing inside a bucket, the rows of
 *     build_permutation_small and build_permutation_direct (a token has one pair per expert; the
 *     drop bucket, which nothing reads, gets a token's pairs on one row, as the bitmap does).
 * Progress: the wait needs every group's selecting block to run. At most ngroups (<= 32) blocks
 * wait, the others leave, and the waiting ones have already done all their work but this, so no
 * waiting block holds anything a missing one needs. s_cnt: kGroupPermInts ints of shared memory.
 * lin (trace builds): the block's trace index, marked at slot 6 once the wait is over. */
__device__ void build_permutation_groups(const tpm_moe_dev &d, int T, int t0, int ngroups, int *s_cnt, int lin = -1) {
    (void)lin;
    const int tid = threadIdx.x;
    clear_group_counts(d, s_cnt);
    if (d.route_fence) __threadfence();
    __syncthreads(); /* every warp's selections stored, the counts cleared */
    if (tid == 0) {
        int par, old;
        asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(par) : "l"(d.ctr + 10) : "memory");
        par &= 1;
        int *cnt = d.ctr + 8 + par;
        asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(old) : "l"(cnt) : "memory");
        if (old == ngroups - 1) {
            asm volatile("st.relaxed.gpu.global.s32 [%0], 0;" ::"l"(d.ctr + 9 - par) : "memory");
            asm volatile("st.relaxed.gpu.global.s32 [%0], %1;" ::"l"(d.ctr + 10), "r"(par ^ 1) : "memory");
        } else {
            int v = 0, spins = 0;
            do {
                asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
                if (++spins > kGroupSpinBound) {
                    atomicExch(d.ctr + 5, 1);
                    break;
                }
            } while (v < ngroups);
        }
    }
    __syncthreads();
    if (d.route_fence) __threadfence();
    if (lin >= 0) TPM_TRACE_MARK_CLK(d, 6, lin);
    place_group_rows(d, T, t0, min(8, T - t0), s_cnt);
}

/* Steps 2 and 3 of build_permutation_groups for the group of ntok (<= 8) tokens from t0, once
 * every selection of the launch is visible to this block (read through L2) and the counts are
 * cleared (clear_group_counts, then a barrier): the counts, the offsets (the group at t0 = 0
 * also writes counts, offsets and the touched list) and the group's own rows. Also routing mode
 * 4's placement (moe_cuda_route_cl.cu), after a cluster barrier. s_cnt: kGroupPermInts ints of
 * shared memory. */
__device__ void place_group_rows(const tpm_moe_dev &d, int T, int t0, int ntok, int *s_cnt) {
    const int K = d.K, NB = n_buckets(d), TK = T * K, tid = threadIdx.x, nth = blockDim.x;
    const int p0 = t0 * K, np = ntok * K;
    int *s_tot = s_cnt, *s_pre = s_cnt + kMaxE1 + 1, *s_own = s_cnt + 3 * (kMaxE1 + 1);
    uint32_t *s_msk = reinterpret_cast<uint32_t *>(s_cnt + 2 * (kMaxE1 + 1));
    int *s_ct = s_own + 8 * 17;
    uint32_t *s_cm = reinterpret_cast<uint32_t *>(s_ct + kScanChunks);
    /* every selection: a thread's first kHeld loads all in flight before the first atomic */
    constexpr int kHeld = 8;
    int held[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; i++) {
        const int p = tid + i * nth;
        held[i] = __ldcg(d.sel + (p < TK ? p : 0));
    }
#pragma unroll
    for (int i = 0; i < kHeld; i++) {
        const int p = tid + i * nth;
        if (p < TK) {
            const int b = slot_of(d, held[i], p / K);
            atomicAdd(s_tot + b, 1);
            if (p < p0) {
                atomicAdd(s_pre + b, 1);
            } else if (p < p0 + np) {
                s_own[p - p0] = b;
                atomicOr(s_msk + b, 1u << ((p - p0) / K));
            }
        }
    }
    for (int p = tid + kHeld * nth; p < TK; p += nth) {
        const int b = slot_of(d, __ldcg(d.sel + p), p / K);
        atomicAdd(s_tot + b, 1);
        if (p < p0) {
            atomicAdd(s_pre + b, 1);
        } else if (p < p0 + np) {
            s_own[p - p0] = b;
            atomicOr(s_msk + b, 1u << ((p - p0) / K));
        }
    }
    __syncthreads();
    scan_buckets_all(d, NB, s_tot, s_ct, s_cm, t0 == 0); /* s_tot: totals -> offsets */
    __syncthreads();
    for (int q = tid; q < np; q += nth) {
        const int b = s_own[q], w = q / K;
        const int row = s_tot[b] + s_pre[b] + __popc(s_msk[b] & ((1u << w) - 1u));
        d.perm_tok[row] = t0 + w;
        d.perm_exp[row] = b;
        d.inv[p0 + q] = row;
    }
}

/* One top-k round of a warp over its lanes' PL keys each (order_key of expert lane + 32 j; 0 = not
 * eligible): this lane's best (the lowest index on equal keys: j increases with e), then the warp's
 * largest key and the lowest index holding it (two redux.sync instead of a 5-step shuffle
 * butterfly). Returns the winner (-1: none left), clears its key, and sets *wv to s of the winner
 * on its owner lane (0 on the others). */
template <int PL>
__device__ __forceinline__ int topk_round(unsigned (&key)[PL], const float (&s)[PL], int lane, float *wv) {
    unsigned bkey = 0u;
    int bi = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < PL; j++)
        if (key[j] > bkey) {
            bkey = key[j];
            bi = lane + 32 * j;
        }
    const unsigned mkey = __reduce_max_sync(0xffffffffu, bkey);
    const int win = mkey == 0u ? -1 : (int)__reduce_min_sync(0xffffffffu, bkey == mkey ? (unsigned)bi : 0xffffffffu);
    float v = 0.0f;
#pragma unroll
    for (int j = 0; j < PL; j++) {
        if (lane + 32 * j == win) {
            key[j] = 0u;
            v = s[j];
        }
    }
    *wv = v;
    return win;
}

/* Selection of token t by one warp. The logit of expert e is the sum, in
 * slice order, of lg[e + s * sstride] for s < nsplit (lg = row of t in
 * global memory); nsplit = 0: lg is the row of summed logits in shared
 * memory. br: the selection bias (d.br, or its copy in shared memory; NULL:
 * none). sel_s (optional): the token's first sk selections (-1: all K) also written there. sc_w
 * [256] / gsc_w [32] are this warp's shared scratch (grouped router).
 * PL: experts per lane the code is built for (E <= 32 PL); select_token
 * below picks 4 when E <= 128 (half the unrolled work of 8; the same bits). */
template <int PL>
__device__ void select_token_pl(const tpm_moe_dev &d, int t, const float *lg, size_t sstride, int nsplit,
                                const float *br, float *sc_w, float *gsc_w, int *sel_s, int sk = -1) {
    if (sk < 0) sk = d.K;
    constexpr int kMaxPerLane = PL; /* shadows the file's maximum inside this function */
    const int lane = threadIdx.x & 31;
    const int E = d.E, k = d.k;
    float s[kMaxPerLane], c[kMaxPerLane];
    bool ok[kMaxPerLane];
    /* Up to 3 slices in global memory (k_select after the router GEMM: hi, mid, lo): every
     * slice load of every expert, and the bias, issued before the first add. The runtime slice
     * loop put each load behind the previous add, 3 x PL dependent L2 trips per token
     * (bench/results/r138, r139). The sums keep slice order: the same bits. */
    constexpr int kPre = 3;
    const bool pre = nsplit >= 1 && nsplit <= kPre;
    float v[kMaxPerLane][kPre], bv[kMaxPerLane];
#pragma unroll
    for (int j = 0; j < kMaxPerLane; j++) {
        const int e = lane + 32 * j;
#pragma unroll
        for (int sp = 0; sp < kPre; sp++) v[j][sp] = pre && sp < nsplit && e < E ? __ldcg(lg + e + sp * sstride) : 0.0f;
        bv[j] = br && e < E ? br[e] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kMaxPerLane; j++) {
        const int e = lane + 32 * j;
        ok[j] = e < E;
        float l = -INFINITY;
        if (ok[j]) {
            if (nsplit == 0) { /* lg: the summed logits in shared memory */
                l = lg[e];
            } else if (pre) {
                l = v[j][0];
#pragma unroll
                for (int sp = 1; sp < kPre; sp++)
                    if (sp < nsplit) l += v[j][sp]; /* slice order */
            } else {
                l = __ldcg(lg + e);
                for (int sp = 1; sp < nsplit; sp++) l += __ldcg(lg + e + sp * sstride); /* slice order */
            }
            l = sanitize(l);
        }
        if (d.router == TPM_ROUTER_SOFTMAX_TOPK) { /* finite, so exp(l - max) is defined */
            s[j] = fminf(fmaxf(l, -FLT_MAX), FLT_MAX);
            c[j] = s[j];
        } else {
            s[j] = 1.0f / (1.0f + expf(-l));
            c[j] = s[j] + (br && ok[j] ? bv[j] : 0.0f);
        }
    }
    if (d.router == TPM_ROUTER_GROUPED_SIGMOID && d.n_groups > 1) {
        /* group score = sum of the two largest biased scores of the group */
        const int gs = E / d.n_groups;
#pragma unroll
        for (int j = 0; j < kMaxPerLane; j++)
            if (ok[j]) sc_w[lane + 32 * j] = c[j];
        __syncwarp();
        if (lane < d.n_groups) {
            float b1 = -INFINITY, b2 = -INFINITY;
            int i1 = -1;
            for (int i = 0; i < gs; i++) { /* top-1 (lower index on ties) */
                const float v = sc_w[lane * gs + i];
                if (i1 < 0 || v > b1) {
                    b1 = v;
                    i1 = i;
                }
            }
            for (int i = 0; i < gs; i++) {
                const float v = sc_w[lane * gs + i];
                if (i != i1 && (v > b2 || b2 == -INFINITY)) b2 = v;
            }
            gsc_w[lane] = gs >= 2 ? b1 + b2 : b1; /* the top min(2, group size), as the CPU router */
        }
        __syncwarp();
        bool gok = lane < d.n_groups, keep = false;
        float gv = gok ? sanitize(gsc_w[lane]) : -INFINITY;
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
    /* the weights' normalizer, summed in slot order as the winners come
     * (the same order on every lane; registers only) */
    const bool soft = d.router == TPM_ROUTER_SOFTMAX_TOPK;
    float sum = 0.0f, mx = 0.0f;
    unsigned key[kMaxPerLane]; /* order-preserving integer keys of c: 0 = not eligible */
#pragma unroll
    for (int j = 0; j < kMaxPerLane; j++) key[j] = ok[j] ? order_key(c[j]) : 0u;
    for (int r = 0; r < k; r++) {
        float wv;
        const int win = topk_round<kMaxPerLane>(key, s, lane, &wv);
        /* broadcast the winner's score from its owner lane */
        const int owner = win >= 0 ? (win & 31) : 0;
        wv = __shfl_sync(0xffffffffu, wv, owner);
        if (r == 0) mx = wv; /* softmax: slot 0 has the largest logit */
        sum += soft ? expf(wv - mx) : wv;
        if (lane == r) {
            idx_mine = win;
            wsel = wv;
        }
    }
    /* weights */
    if (soft)
        wsel = expf(wsel - mx) / sum * d.rsf;
    else
        wsel = (sum > 0.0f && isfinite(sum)) ? wsel / sum * d.rsf : d.rsf / (float)k;
    /* lanes 0 .. k-1 the routed slots, lane k the fused shared expert's (weight 1.0): one store
     * per array for the token's K slots (r257: the shared slot's stores after the routed ones, from
     * lane 0, cost the fused 8-token selection 0.2-0.3 us) */
    const bool sh = d.fused && lane == k;
    const int sv = sh ? E : idx_mine < 0 ? 0 : idx_mine;
    if (lane < k || sh) {
        d.sel[(size_t)t * d.K + lane] = sv;
        d.wts[(size_t)t * d.K + lane] = sh ? 1.0f : wsel;
        if (sel_s && lane < sk) sel_s[lane] = sv;
    }
}

/* 1.0f / x for x >= 1, bit for bit: the reciprocal's fast path as ptxas expands rcp.rn.f32
 * (MUFU.RCP, one Newton step) without its branch; *slow set where that path does not hold
 * (x >= 2^126 but finite: a denormal result; NaN); x = inf gives 0 exactly. */
__device__ __forceinline__ float rcp_ge1(float x, bool *slow) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    const float e = __fmaf_rn(-x, r, 1.0f);
    r = __fmaf_rn(r, e, r);
    *slow |= !(x < 0x1p126f) && x != INFINITY;
    return x == INFINITY ? 0.0f : r;
}

/* select_token_pl<4>'s arithmetic for the M3 router shape (round 51): sigmoid scores (+ bias), no
 * groups, E <= 128, top-4, the same bits. Its four sigmoids have no branch (select_token_pl's
 * 1.0f / x puts each behind a slow-path test ptxas does not interleave; here the rare slow case
 * is one warp vote and the division), and its four rounds are unrolled, so the winners'
 * broadcasts overlap the next round. */
__device__ void select_token_sig4(const tpm_moe_dev &d, int t, const float *lg, size_t sstride, int nsplit,
                                  const float *br, int *sel_s, int sk) {
    if (sk < 0) sk = d.K;
    constexpr int PL = 4, K = 4, kPre = 3;
    const int lane = threadIdx.x & 31, E = d.E;
    const bool pre = nsplit >= 1 && nsplit <= kPre;
    float v[PL][kPre], bv[PL], x[PL], s[PL];
    bool ok[PL], slow = false;
#pragma unroll
    for (int j = 0; j < PL; j++) {
        const int e = lane + 32 * j;
#pragma unroll
        for (int sp = 0; sp < kPre; sp++) v[j][sp] = pre && sp < nsplit && e < E ? __ldcg(lg + e + sp * sstride) : 0.0f;
        bv[j] = br && e < E ? br[e] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < PL; j++) {
        const int e = lane + 32 * j;
        ok[j] = e < E;
        float l = -INFINITY;
        if (ok[j]) {
            if (nsplit == 0) {
                l = lg[e];
            } else if (pre) {
                l = v[j][0];
#pragma unroll
                for (int sp = 1; sp < kPre; sp++)
                    if (sp < nsplit) l += v[j][sp]; /* slice order */
            } else {
                l = __ldcg(lg + e);
                for (int sp = 1; sp < nsplit; sp++) l += __ldcg(lg + e + sp * sstride); /* slice order */
            }
            l = sanitize(l);
        }
        x[j] = 1.0f + expf(-l);
        s[j] = rcp_ge1(x[j], &slow);
    }
    if (__any_sync(0xffffffffu, slow)) {
#pragma unroll
        for (int j = 0; j < PL; j++) s[j] = 1.0f / x[j];
    }
    unsigned key[PL];
#pragma unroll
    for (int j = 0; j < PL; j++) key[j] = ok[j] ? order_key(s[j] + (br && ok[j] ? bv[j] : 0.0f)) : 0u;
    int idx_mine = -1;
    float wsel = 0.0f, sum = 0.0f;
#pragma unroll
    for (int r = 0; r < K; r++) { /* select_token_pl's rounds */
        float wv;
        const int win = topk_round<PL>(key, s, lane, &wv);
        wv = __shfl_sync(0xffffffffu, wv, win >= 0 ? (win & 31) : 0);
        sum += wv;
        if (lane == r) {
            idx_mine = win;
            wsel = wv;
        }
    }
    wsel = (sum > 0.0f && isfinite(sum)) ? wsel / sum * d.rsf : d.rsf / (float)K;
    const bool sh = d.fused && lane == K;
    const int sv = sh ? E : idx_mine < 0 ? 0 : idx_mine;
    if (lane < K || sh) {
        d.sel[(size_t)t * d.K + lane] = sv;
        d.wts[(size_t)t * d.K + lane] = sh ? 1.0f : wsel;
        if (sel_s && lane < sk) sel_s[lane] = sv;
    }
}

__device__ __forceinline__ void select_token(const tpm_moe_dev &d, int t, const float *lg, size_t sstride, int nsplit,
                                             const float *br, float *sc_w, float *gsc_w, int *sel_s, int sk = -1) {
    if (d.E <= 128 && d.k == 4 && d.router != TPM_ROUTER_SOFTMAX_TOPK &&
        !(d.router == TPM_ROUTER_GROUPED_SIGMOID && d.n_groups > 1))
        select_token_sig4(d, t, lg, sstride, nsplit, br, sel_s, sk);
    else if (d.E <= 128) select_token_pl<4>(d, t, lg, sstride, nsplit, br, sc_w, gsc_w, sel_s, sk);
    else select_token_pl<8>(d, t, lg, sstride, nsplit, br, sc_w, gsc_w, sel_s, sk);
}

} // namespace

#endif
