/*
 * moe_cuda_gemm_swap_sm90a.cu - the prefill experts' grouped GEMM with the wgmma sides swapped
 * (tuning.prefill_cluster 4): the weights are the M side and the tokens the N side, so an
 * expert's rows are covered in steps of 8 instead of 64. Hopper only (wgmma, TMA multicast,
 * setmaxnreg): built for sm_90a alone, launched by moe_cuda_gemm_sm90a.cu's
 * tpm_moe_prefill_wgmma after its gather and tile table.
 *
 * Why. In the tokens-as-M kernel (moe_cuda_gemm_sm90a.cu) a tile is 128 permuted rows x 256
 * weight rows. At 8192 tokens an expert has 256 +- 16 rows, so half the experts end in a
 * third row tile holding a few rows (an odd item of the persistent clusters), which still
 * streams the whole weight block through the SM: ~15% of the launch's time for ~5% of its
 * FLOPs (round 12's ncu; docs/moe_cuda.md, Known gaps).
 *
 * Problem: as there, for every expert e, C_e = A_e . W_e^T, A_e the rows [o_e, o_e + n_e) of
 * xp (gate_up) or act_bf (down), W_e [N x K] from w13 or w2, K contiguous in both.
 *
 * Items: (expert, pass, weight block). A pass is up to SW_PASS = 320 rows of one expert; an
 * item runs on a 2-CTA cluster, rank 0 taking the pass's first n0 = min(m, 8 ceil(m / 16))
 * rows and rank 1 the rest (m rows in the pass). The weight tile is 256 rows x K (gate_up:
 * gate rows 128 wb .. +127 and the matching up rows; down: w2 rows 256 wb .. +255); each CTA's
 * producer loads one 128-row half per stage and multicasts it into both CTAs, and loads its own
 * token rows (8-row granules, 32-row and 8-row TMA boxes). So at 8192 tokens each expert's
 * weights pass through the SMs once per weight block, with no partial row tiles. Items in the
 * order of the tokens-as-M kernel: experts from the highest index down, an expert's items in
 * bands of `band` passes (band_tile), weight block by weight block inside a band.
 *
 * Mainloop: a 4-stage ring of 52 KB stages (weights 32 KB + tokens 160 x 64 x 2 = 20 KB),
 * 128-byte swizzle, full / empty mbarriers as in the tokens-as-M kernel's clustered form
 * (full[s]: one arrival with expect_tx of the CTA's bytes, the partner's multicast half
 * included; empty[s]: the 16 consumer warps of BOTH CTAs, since both producers write every
 * stage of both). Consumer warpgroup c holds two accumulator sets of 64 weight rows x N tokens
 * (N = the CTA's rows rounded up to a tier of gen_wgmma_ss.py: 8 .. 160; fp32, N / 2 + N / 2
 * registers): gate_up: gate rows 64 c .. +63 and the matching up rows; down: w2 rows
 * 128 c .. +127 as two m64 halves. Per 64-k stage each warpgroup issues 4 x 2
 * wgmma.m64nNk16. The producer warpgroup gives its registers to the consumers (setmaxnreg 40
 * / 232).
 *
 * Epilogue: accumulator i of a thread is weight row 16 w + lane / 4 + 8 ((i / 2) & 1) and token
 * 8 (i / 4) + 2 (lane & 3) + (i & 1); gate_up applies bias + activation in fp32 to the gate and
 * up values of the same (row, token), as the other kernel does. The output is row-major by
 * token, so lanes l and l ^ 4 (adjacent weight rows) swap one value each and every lane stores
 * two adjacent columns of one token (4 bytes; the other kernel's stores are as wide). Tokens
 * past the CTA's rows are computed (stale or another expert's rows in shared memory; each
 * output column depends on its own token row only) and never stored.
 *
 * Item queue: rank 0's producer thread takes each item with an atomicAdd on the launch's
 * counter (zeroed by k_wg_tiles, stream-ordered before the launch) and publishes it in a
 * two-slot queue in both CTAs (put_cluster), exactly as the tokens-as-M kernel's persistent
 * clusters do; one entry past the end stops every reader. Waits are bounded (trap).
 *
 * Bits: each output element is one fp32 accumulator over the same k order as in the other
 * kernel, with the operands' roles swapped inside each wgmma; gpu_moe_paths'
 * prefill_gemm_modes compares this form's outputs with the other forms' bit for bit.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_wgmma.cuh"
#include "moe_cuda_wgmma_ss.cuh"

#include <string.h>

namespace {

constexpr int SW_NMAX = TPM_MOE_SW_PASS / 2;     /* token rows per CTA per pass (the largest tier) */
constexpr int SW_ST = 4;                         /* stages */
constexpr int SW_W_BYTES = 256 * BK * 2;         /* the weight tile of a stage */
constexpr int SW_WH_BYTES = SW_W_BYTES / 2;      /* one producer's 128-row half */
constexpr int SW_T_BYTES = SW_NMAX * BK * 2;     /* the CTA's token rows */
constexpr int SW_STAGE = SW_W_BYTES + SW_T_BYTES;
constexpr int SW_THREADS = 384;
constexpr int SW_SMEM = SW_ST * SW_STAGE + 1024; /* + alignment slack */
static_assert(SW_NMAX == 160, "the largest tier of gen_wgmma_ss.py");
static_assert(SW_W_BYTES % 1024 == 0 && SW_STAGE % 1024 == 0, "stage parts start on 1024-byte swizzle atoms");
static_assert(SW_SMEM <= 227 * 1024, "the ring fits in shared memory");

struct sw_args {
    const int32_t *offsets; /* [E1 + 1] permuted row offsets (routing) */
    const int32_t *rtp;     /* [E1 + 1] passes before expert E1-1-q (highest first); [E1] total */
    int *ctr;               /* this launch's item counter (zeroed by k_wg_tiles) */
    int E1, nb, K;          /* experts, weight blocks per expert, reduction length */
    int wrows, nb_rows, bhalf; /* weight rows per expert, between blocks, to the second half */
    int band;               /* passes per band (0: one band) */
    uint16_t *out;
    int ldo;
    const float *b13; /* gate_up epilogue */
    int Il, act;
    float alpha, limit, beta;
};

struct sw_item {
    int e, wb;    /* expert, weight block */
    int row0, nv; /* this CTA's permuted rows [row0, row0 + nv); nv may be 0 (rank 1) */
};

__device__ __forceinline__ long long sw_items_before(const sw_args &a, int q) {
    return (long long)a.nb * __ldcg(a.rtp + q);
}

__device__ __forceinline__ sw_item sw_decode(const sw_args &a, long long it, uint32_t rank) {
    int lo = 0, hi = a.E1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (sw_items_before(a, mid) <= it) lo = mid;
        else hi = mid;
    }
    const int local = (int)(it - sw_items_before(a, lo));
    sw_item r;
    r.e = a.E1 - 1 - lo;
    const int off = __ldcg(a.offsets + r.e), n_e = __ldcg(a.offsets + r.e + 1) - off;
    int p;
    band_tile(local, (n_e + TPM_MOE_SW_PASS - 1) / TPM_MOE_SW_PASS, a.band, a.nb, &r.wb, &p);
    const int m = min(TPM_MOE_SW_PASS, n_e - p * TPM_MOE_SW_PASS);
    const int n0 = min(m, (((m + 1) >> 1) + 7) & ~7);
    r.row0 = off + p * TPM_MOE_SW_PASS + (rank ? n0 : 0);
    r.nv = rank ? m - n0 : n0;
    return r;
}

#ifdef TPM_WG_DEVICE
__device__ __forceinline__ void sw_release(uint64_t *empty, int s, uint32_t rank, int lane) {
    if (lane == 0) {
        mbar_arrive(&empty[s]);
        mbar_arrive_cluster(&empty[s], rank ^ 1u);
    }
}

/* v (this thread's accumulators of 64 weight rows x N tokens) as bf16 into out[row0 + token]
 * [col0 + weight row] for tokens < nv: lanes l and l ^ 4 hold adjacent weight rows and swap one
 * value each, so each lane writes two adjacent columns of one token. */
template <int N>
__device__ __forceinline__ void sw_store(const float (&v)[N / 2], uint16_t *out, int ldo, int row0, int nv, int col0) {
    const int lane = threadIdx.x & 31, w4 = (threadIdx.x >> 5) & 3, q = lane >> 2, t = lane & 3;
    const bool odd = (q & 1) != 0;
#pragma unroll
    for (int j = 0; j < N / 8; j++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float v0 = v[4 * j + 2 * h], v1 = v[4 * j + 2 * h + 1]; /* tokens c0, c0 + 1 */
            const float recv = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, 4);
            const int c0 = 8 * j + 2 * t, tok = odd ? c0 + 1 : c0;
            const int rr = 16 * w4 + 8 * h + (q & ~1); /* the even row of the pair */
            if (tok < nv)
                *reinterpret_cast<uint32_t *>(out + (size_t)(row0 + tok) * ldo + col0 + rr) =
                    odd ? pack_bf16(recv, v1) : pack_bf16(v0, recv);
        }
    }
}

/* One item's mainloop and epilogue for consumer warpgroup c with N token columns. */
template <bool ACT, int N>
__device__ __forceinline__ void sw_consume(const sw_args &a, unsigned char *smem, uint64_t *full, uint64_t *empty,
                                           uint32_t rank, int c, const sw_item &w, int g0) {
    const int lane = threadIdx.x & 31, KB = a.K / BK;
    const int rA0 = ACT ? 64 * c : 128 * c, rA1 = ACT ? 128 + 64 * c : 128 * c + 64; /* rows in the tile */
    /* defined before the loop (the first wgmma overwrites them anyway): an undefined array would
     * stay live around the persistent loop, every tier's at once (ptxas then spills them all) */
    float d0[N / 2], d1[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; i++) d0[i] = d1[i] = 0.f;
    for (int kb = 0; kb < KB; kb++) {
        const int g = g0 + kb, s = g % SW_ST;
        mbar_wait(&full[s], (g / SW_ST) & 1);
        unsigned char *st = smem + (size_t)s * SW_STAGE;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const uint64_t db = desc(st + SW_W_BYTES + kk * 32);
            wgmma_ss(d0, desc(st + rA0 * 128 + kk * 32), db, (kb | kk) != 0);
            wgmma_ss(d1, desc(st + rA1 * 128 + kk * 32), db, (kb | kk) != 0);
        }
        wg_commit();
        wg_wait<1>(); /* the previous stage's wgmmas are done: release it */
        if (kb > 0) sw_release(empty, (g - 1) % SW_ST, rank, lane);
    }
    wg_wait<0>();
    sw_release(empty, (g0 + KB - 1) % SW_ST, rank, lane);
#pragma unroll
    for (int i = 0; i < N / 2; i++) asm volatile("" : "+f"(d0[i]), "+f"(d1[i])::"memory");

    if (ACT) { /* d0 gate, d1 up of the same (row, token): act into d0 */
        const int w4 = (threadIdx.x >> 5) & 3, q = lane >> 2;
        const int col0 = w.wb * 128 + 64 * c; /* the activation's first column (gate row) */
        float bg[2] = {0.f, 0.f}, bu[2] = {0.f, 0.f};
        const float *b = a.b13 ? a.b13 + (size_t)w.e * 2 * a.Il : nullptr;
        if (b) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                bg[h] = b[col0 + 16 * w4 + q + 8 * h];
                bu[h] = b[a.Il + col0 + 16 * w4 + q + 8 * h];
            }
        }
#pragma unroll
        for (int i = 0; i < N / 2; i++) {
            const int h = (i >> 1) & 1;
            float gv = d0[i], uv = d1[i];
            if (b) {
                gv += bg[h];
                uv += bu[h];
            }
            d0[i] = tpm_moe_act(a.act, gv, uv, a.alpha, a.limit, a.beta);
        }
        sw_store<N>(d0, a.out, a.ldo, w.row0, w.nv, col0);
    } else {
        const int col0 = w.wb * 256 + 128 * c;
        sw_store<N>(d0, a.out, a.ldo, w.row0, w.nv, col0);
        sw_store<N>(d1, a.out, a.ldo, w.row0, w.nv, col0 + 64);
    }
}

/* The tiers of gen_wgmma_ss.py: the smallest N >= nv. */
#define TPM_SW_TIERS(X) X(8) X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(120) X(128) X(136) X(144) X(152) X(160)

template <bool ACT>
__device__ __forceinline__ void sw_dispatch(const sw_args &a, unsigned char *smem, uint64_t *full, uint64_t *empty,
                                            uint32_t rank, int c, const sw_item &w, int g0) {
#define TPM_SW_CASE(n)                                                                                      \
    if (w.nv <= n) {                                                                                        \
        sw_consume<ACT, n>(a, smem, full, empty, rank, c, w, g0);                                           \
        return;                                                                                             \
    }
    TPM_SW_TIERS(TPM_SW_CASE)
#undef TPM_SW_CASE
}
#endif /* TPM_WG_DEVICE */

template <bool ACT>
__global__ void __launch_bounds__(SW_THREADS, 1)
    k_sw_gemm(const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tt32,
              const __grid_constant__ CUtensorMap tt8, const sw_args a) {
#ifdef TPM_WG_DEVICE
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full[SW_ST], empty[SW_ST], qfull[2], qempty[2];
    __shared__ int item_q[2];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t rank = cluster_rank();
    const long long total = sw_items_before(a, a.E1);
    if (total == 0) return; /* the same for both CTAs, before any barrier */
    const int KB = a.K / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < SW_ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 16); /* the consumer warps of both CTAs */
        }
        for (int i = 0; i < 2; i++) {
            mbar_init(&qfull[i], 1);
            mbar_init(&qempty[i], 17); /* rank 0's: both CTAs' consumer warps and rank 1's producer */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    cluster_sync();

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
    if (wg == 0) { /* producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 56;" ::: "memory");
        if (threadIdx.x == 0) {
            int g = 0;
            for (int n = 0;; n++) {
                const int slot = n & 1;
                long long it;
                if (rank == 0) {
                    if (n >= 2) mbar_wait_cl(&qempty[slot], ((n >> 1) - 1) & 1);
                    it = atomicAdd(a.ctr, 1);
                    if (it >= total) it = -1; /* the end, for every reader */
                    item_q[slot] = (int)it;
                    put_cluster(&item_q[slot], (int)it, &qfull[slot], 1u);
                    mbar_arrive(&qfull[slot]);
                } else {
                    mbar_wait_cl(&qfull[slot], (n >> 1) & 1);
                    it = item_q[slot];
                    arrive_cluster_rel(&qempty[slot], 0u);
                }
                if (it < 0) break;
                const sw_item w = sw_decode(a, it, rank);
                const int brow = w.e * a.wrows + w.wb * a.nb_rows + (rank ? a.bhalf : 0);
                const int nt = (w.nv + 7) & ~7;
                for (int kb = 0; kb < KB; kb++, g++) {
                    const int s = g % SW_ST;
                    if (g >= SW_ST) mbar_wait(&empty[s], ((g / SW_ST) - 1) & 1);
                    unsigned char *st = smem + (size_t)s * SW_STAGE;
                    mbar_expect_tx(&full[s], (uint32_t)(SW_W_BYTES + nt * BK * 2));
                    tma_2d_mc(st + rank * SW_WH_BYTES, &tw, kb * BK, brow, &full[s]);
                    for (int r = 0; r < nt;) {
                        const bool big = nt - r >= 32;
                        tma_2d(st + SW_W_BYTES + r * BK * 2, big ? &tt32 : &tt8, kb * BK, w.row0 + r, &full[s]);
                        r += big ? 32 : 8;
                    }
                }
            }
        }
        __syncwarp();
    } else { /* consumers */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 224;" ::: "memory");
        const int c = wg - 1, lane = threadIdx.x & 31;
        int g = 0;
        for (int n = 0;; n++, g += KB) {
            const int slot = n & 1;
            mbar_wait_cl(&qfull[slot], (n >> 1) & 1);
            const long long it = item_q[slot];
            __syncwarp();
            if (lane == 0) arrive_cluster_rel(&qempty[slot], 0u);
            if (it < 0) break;
            const sw_item w = sw_decode(a, it, rank);
            if (w.nv > 0) {
                sw_dispatch<ACT>(a, smem, full, empty, rank, c, w, g);
            } else { /* no rows here: the stages are still written (the partner's half), release them */
                for (int kb = 0; kb < KB; kb++) {
                    mbar_wait(&full[(g + kb) % SW_ST], ((g + kb) / SW_ST) & 1);
                    sw_release(empty, (g + kb) % SW_ST, rank, lane);
                }
            }
        }
    }
    cluster_sync(); /* the partner's remote arrives on our barriers are done before we exit */
#else
    (void)tw;
    (void)tt32;
    (void)tt8;
    (void)a;
    __trap(); /* built without sm_90a: tpm_moe_wgmma_ok() keeps the layer from launching this */
#endif
}

} // namespace

tpm_status tpm_moe_swap_setup(const tpm_moe_dev &d, int max_rows, tpm_moe_wg_ctx *c) {
    CUtensorMap m[4];
    TPM_TRY(make_map(&m[0], d.xp, (uint64_t)max_rows, (uint64_t)d.H, 32)); /* tokens of gate_up */
    TPM_TRY(make_map(&m[1], d.xp, (uint64_t)max_rows, (uint64_t)d.H, 8));
    TPM_TRY(make_map(&m[2], d.act_bf, (uint64_t)max_rows, (uint64_t)d.Il, 32)); /* tokens of down */
    TPM_TRY(make_map(&m[3], d.act_bf, (uint64_t)max_rows, (uint64_t)d.Il, 8));
    memcpy(c->sw_maps, m, sizeof m);
    TPM_CUDA_TRY(cudaFuncSetAttribute(k_sw_gemm<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SW_SMEM));
    TPM_CUDA_TRY(cudaFuncSetAttribute(k_sw_gemm<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SW_SMEM));
    int dev = 0, nsm = 0;
    TPM_CUDA_TRY(cudaGetDevice(&dev));
    TPM_CUDA_TRY(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)(2 * (nsm / 2)));
    cfg.blockDim = dim3(SW_THREADS);
    cfg.dynamicSmemBytes = SW_SMEM;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int ncl = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveClusters(&ncl, (const void *)k_sw_gemm<true>, &cfg));
    c->grid_sc = 2 * (ncl > 0 ? ncl : 1);
    return TPM_OK;
}

tpm_status tpm_moe_swap_launch(const tpm_moe_dev &d, const tpm_moe_wg_ctx &c, int mat, int band, cudaStream_t s) {
    const CUtensorMap *m = reinterpret_cast<const CUtensorMap *>(c.maps);
    const CUtensorMap *t = reinterpret_cast<const CUtensorMap *>(c.sw_maps) + 2 * mat;
    sw_args g = {};
    g.offsets = d.offsets;
    g.rtp = c.rtp;
    g.ctr = c.rtp + 2 * (d.E1 + 1) + mat;
    g.E1 = d.E1;
    g.band = band;
    if (mat == 0) { /* gate_up + activation: blocks of 128 gate rows + the matching 128 up rows */
        g.nb = d.Il / 128;
        g.K = d.H;
        g.wrows = 2 * d.Il;
        g.nb_rows = 128;
        g.bhalf = d.Il;
        g.out = d.act_bf;
        g.ldo = d.Il;
    } else { /* down: blocks of 256 rows of w2 */
        g.nb = d.H / 256;
        g.K = d.Il;
        g.wrows = d.H;
        g.nb_rows = 256;
        g.bhalf = 128;
        g.out = d.rows_bf;
        g.ldo = d.H;
    }
    g.b13 = d.b13;
    g.Il = d.Il;
    g.act = d.act;
    g.alpha = d.alpha;
    g.limit = d.limit;
    g.beta = d.beta;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)c.grid_sc);
    cfg.blockDim = dim3(SW_THREADS);
    cfg.dynamicSmemBytes = SW_SMEM;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, mat ? k_sw_gemm<false> : k_sw_gemm<true>, m[2 * mat + 1], t[0], t[1], g));
    return TPM_OK;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_gemm_swap_sm90a, (k_sw_gemm<true>))
