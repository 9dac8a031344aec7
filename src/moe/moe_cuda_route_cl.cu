/*
 * moe_cuda_route_cl.cu - routing mode 4: the whole routing in ONE launch, each
 * token tile's logits summed over all of H inside ONE cluster (k_route_cl).
 *
 * Why: modes 1 and 3 split H over more CTAs than a cluster holds, so their
 * partial logits meet in global memory: a block-done ticket, then the
 * selection, then a second ticket for the permutation: each such hop is a
 * dependent chain of ~2-3 us (bench/results/r91: 16 tokens, mode 3: logits
 * 6.2 us, + slice sums 2.9, + selection 1.9, + permutation 2.5). Here a
 * cluster of CS = 16 CTAs (non-portable size; fewer when H has fewer than 16
 * chunks) owns a tile of TC <= 64 tokens and ALL of H, so the slice sums
 * are distributed-shared-memory reads and the selection follows in the same
 * CTA; one cluster barrier later the permutation starts (one tile), or one
 * global ticket across the clusters (several tiles).
 *
 * Logits: logit[t][e] = sum_h x[t][h] * wr[e][h], wr fp32, x bf16, on tensor
 * cores (mma.sync m16n8k16, fp32 accumulators) against the exact 3-way bf16
 * split wr = hi + mid + lo (the split of k_split_router: round to nearest at
 * each step; a non-finite weight stays in hi alone), made in registers from
 * the fp32 weights (2/3 of the bytes of a stored split; the L2 traffic of
 * several tiles is what limits 256 tokens). wrf holds wr in fragment order
 * (k_router_frag): chunk c (32 h) of m-tile m (16 experts) is 2 KB, part p
 * (0: row g, h 8q..8q+3; 1: row g, 8q+4..+7; 2 / 3: row g+8) then lane,
 * float4: each lane reads its A fragments with conflict-free 16-byte loads,
 * and a CTA's chunks are one contiguous block (one bulk copy per chunk).
 * k-step s of a chunk takes h = 8q + 4s + {0,1} (logical k 2q, 2q+1) and
 * 8q + 4s + {2,3} (logical 2q+8, 2q+9), for A and B alike, so the lane's 16
 * bytes of an x row (h 8q .. 8q+7) are both k-steps' B fragments.
 *
 * Grid: (CS, ceil(T/TC)), cluster (CS, 1, 1), 8 warps. CTA r of cluster c:
 * tokens c*TC .. +TC-1, chunks [r*NC/CS, (r+1)*NC/CS) of H (NC = H/32).
 *  1. Warp 0 issues every copy at once: the tile's x rows (one bulk copy per
 *     token row, row stride padded to 64 mod 128 bytes: conflict-free B
 *     loads) on one mbarrier, and the first S weight chunks, a stage and an
 *     mbarrier each (S = every chunk when they fit in shared memory: 12 x 16
 *     KB for M3; else a ring whose stages warp 0 refills after all 8 warps
 *     released them on the stage's `empty` mbarrier).
 *  2. Warp w computes m-tile w (and w + 8 when E > 128) x the tile's n-tiles
 *     chunk by chunk as stages land: per chunk and k-step, hi, mid, lo; the
 *     n-tiles innermost (consecutive mma independent).
 *  3. The partial tile [TC][Ep + 4] fp32 goes to shared memory (over the
 *     stages, after a CTA barrier); cluster barrier (release / acquire).
 *     Warp w of CTA r sums token r + CS*w over the CS CTAs' tiles in rank
 *     order (distributed shared memory, float4) and selects it
 *     (select_token).
 *  4. Cluster barrier again (the peers are done reading our tile, and the
 *     cluster's selections are written and released at cluster scope). One
 *     tile: CTA 0 builds the permutation (build_permutation_small, reading
 *     the selections through L2). Several: CTA 0 of each cluster takes a
 *     ticket on ctr[2] (acq_rel at gpu scope: it releases what it acquired
 *     from its cluster) and the last one builds it, then zeroes the ticket
 *     (graph replays).
 * Every sum has a fixed order (chunks in order inside a CTA, CTAs in rank
 * order), so every run gives the same bits. The logits are not modes 1 / 2
 * / 3's bits (another summation order): selections agree with the reference
 * except on near ties, as theirs. Nothing waits on another cluster, so the
 * launch needs no co-residency beyond the cluster's own (guaranteed). Waits
 * on the copies are bounded (moe_cuda_sync.cuh). The launch triggers its
 * dependents at its start (programmatic dependent launch, like modes 1 / 3).
 */
#include "moe_cuda_kernels.h"
#include "moe_cuda_route_sel.cuh"
#include "moe_cuda_sync.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kClThreads = 256; /* 8 warps */
constexpr int kClWarps = kClThreads / 32;
constexpr int kClMaxCS = 16;    /* CTAs per cluster (non-portable size) */
constexpr int kClMaxTC = 64;    /* tokens per cluster: 8 n-tiles */
constexpr int kClMaxStages = 16;

/* bf16x2 of (lo, hi), each rounded to nearest even (lo in the low half). */
__device__ __forceinline__ uint32_t pack_rn(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* The 3-way split of the weight pair (f0, f1): f = hi + mid + lo per element, each part
 * bf16 rounded to nearest (k_split_router's arithmetic); a non-finite weight stays in hi. */
__device__ __forceinline__ void split3(float f0, float f1, uint32_t &hi, uint32_t &mid, uint32_t &lo) {
    hi = pack_rn(f0, f1);
    float r0 = f0 - __uint_as_float(hi << 16), r1 = f1 - __uint_as_float(hi & 0xffff0000u);
    r0 = isfinite(f0) ? r0 : 0.0f;
    r1 = isfinite(f1) ? r1 : 0.0f;
    mid = pack_rn(r0, r1);
    r0 -= __uint_as_float(mid << 16);
    r1 -= __uint_as_float(mid & 0xffff0000u);
    lo = pack_rn(r0, r1);
}

/* The layout of the dynamic shared memory after the logits (over the stages and x). */
struct cl_post {
    int lg, sc, gsc, bits, off, end; /* byte offsets; P (the partial tile) at 0 */
};
__host__ __device__ __forceinline__ cl_post cl_post_layout(int TC, int Ep) {
    cl_post p;
    p.lg = TC * (Ep + 4) * 4;
    p.sc = p.lg + kClWarps * Ep * 4;
    p.gsc = p.sc + kClWarps * 256 * 4;
    p.bits = p.gsc + kClWarps * 32 * 4;
    p.off = p.bits + kPermSmemWords * 4;
    p.end = p.off + (kMaxE1 + 1) * 4;
    return p;
}

template <int MT>
__global__ void __launch_bounds__(kClThreads, 1) k_route_cl(tpm_moe_dev d, const uint16_t *__restrict__ x, int T,
                                                            int TC, int S, int xstride, int stop) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(128) unsigned char cl_smem[];
    __shared__ __align__(8) uint64_t full[kClMaxStages], empty[kClMaxStages], xbar;
    __shared__ float s_br[256];
    __shared__ int s_last;
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    cg::cluster_group cluster = cg::this_cluster();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int CS = (int)gridDim.x, r = (int)blockIdx.x, t_base = (int)blockIdx.y * TC;
    const int E = d.E, H = d.H, Ep = (E + 15) / 16 * 16;
    const int NC = H / 32, c_begin = r * NC / CS, nc = (r + 1) * NC / CS - c_begin;
    const int ntok = min(TC, T - t_base), ntile = (ntok + 7) / 8;
    const uint32_t SB = (uint32_t)Ep * 128u; /* one chunk of every expert, fp32 */
    unsigned char *xs = cl_smem + (size_t)S * SB;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            sync_mbar_init(&full[s], 1);
            sync_mbar_init(&empty[s], kClWarps);
        }
        sync_mbar_init(&xbar, 1);
        sync_mbar_init_fence();
    }
    if (d.br && (int)threadIdx.x < E) s_br[threadIdx.x] = __ldg(d.br + threadIdx.x);
    if (threadIdx.x == 32 && r == 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(d.ctr + 2));
    __syncthreads();

    /* 1. every copy at once: x rows, then the first S weight chunks */
    if (warp == 0) {
        if (lane == 0) sync_mbar_expect_tx(&xbar, (uint32_t)(ntok * nc * 64));
        __syncwarp();
        for (int i = lane; i < ntok; i += 32)
            sync_bulk_g2s(xs + (size_t)i * xstride, x + (size_t)(t_base + i) * H + (size_t)c_begin * 32,
                          (uint32_t)nc * 64u, &xbar);
        if (lane < S && lane < nc) {
            sync_mbar_expect_tx(&full[lane], SB);
            sync_bulk_g2s(cl_smem + (size_t)lane * SB, d.wrf + (size_t)(c_begin + lane) * Ep * 32, SB, &full[lane]);
        }
    }

    /* 2. the CTA's partial logits, chunk by chunk */
    float acc[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][j][i] = 0.0f;
    sync_mbar_wait(&xbar, 0);
    for (int c = 0; c < nc; c++) {
        const int s = c % S;
        sync_mbar_wait(&full[s], (uint32_t)(c / S) & 1u);
        const float4 *wst = reinterpret_cast<const float4 *>(cl_smem + (size_t)s * SB);
        uint4 b[8];
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < ntile)
                b[j] = *reinterpret_cast<const uint4 *>(xs + (size_t)(8 * j + g) * xstride + c * 64 + q * 16);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int m = warp + 8 * mt;
            if (m * 16 >= Ep) break; /* warp-uniform */
            const float4 p0 = wst[(m * 4 + 0) * 32 + lane], p1 = wst[(m * 4 + 1) * 32 + lane];
            const float4 p2 = wst[(m * 4 + 2) * 32 + lane], p3 = wst[(m * 4 + 3) * 32 + lane];
            uint32_t a[2][3][4]; /* [k-step][hi, mid, lo][a0..a3] */
            split3(p0.x, p0.y, a[0][0][0], a[0][1][0], a[0][2][0]); /* row g,   h 8q+0, +1 */
            split3(p2.x, p2.y, a[0][0][1], a[0][1][1], a[0][2][1]); /* row g+8, h 8q+0, +1 */
            split3(p0.z, p0.w, a[0][0][2], a[0][1][2], a[0][2][2]); /* row g,   h 8q+2, +3 */
            split3(p2.z, p2.w, a[0][0][3], a[0][1][3], a[0][2][3]); /* row g+8, h 8q+2, +3 */
            split3(p1.x, p1.y, a[1][0][0], a[1][1][0], a[1][2][0]); /* the same at h + 4 */
            split3(p3.x, p3.y, a[1][0][1], a[1][1][1], a[1][2][1]);
            split3(p1.z, p1.w, a[1][0][2], a[1][1][2], a[1][2][2]);
            split3(p3.z, p3.w, a[1][0][3], a[1][1][3], a[1][2][3]);
#pragma unroll
            for (int ks = 0; ks < 2; ks++)
#pragma unroll
                for (int sp = 0; sp < 3; sp++)
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        if (j >= ntile) break; /* block-uniform */
                        mma_bf16(acc[mt][j], a[ks][sp][0], a[ks][sp][1], a[ks][sp][2], a[ks][sp][3],
                                 ks == 0 ? b[j].x : b[j].z, ks == 0 ? b[j].y : b[j].w);
                    }
        }
        if (S < nc) { /* a ring: release the stage; warp 0 refills it with chunk c + S */
            __syncwarp();
            if (lane == 0) sync_mbar_arrive(&empty[s]);
            if (threadIdx.x == 0 && c + S < nc) {
                sync_mbar_wait(&empty[s], (uint32_t)(c / S) & 1u);
                sync_mbar_expect_tx(&full[s], SB);
                sync_bulk_g2s(cl_smem + (size_t)s * SB, d.wrf + (size_t)(c_begin + c + S) * Ep * 32, SB, &full[s]);
            }
            __syncwarp(); /* warp 0 converged again before its next mma.sync */
        }
    }
    __syncthreads(); /* every warp is done with the stages and x: the region becomes P */

    /* 3. the partial tile, the cluster's sums, the selection */
    float *P = reinterpret_cast<float *>(cl_smem);
    const int PS = Ep + 4; /* row stride (floats): no bank conflicts */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int m0 = (warp + 8 * mt) * 16;
        if (m0 >= Ep) break;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= ntile) break;
            const int t = 8 * j + 2 * q;
            P[t * PS + m0 + g] = acc[mt][j][0];
            P[(t + 1) * PS + m0 + g] = acc[mt][j][1];
            P[t * PS + m0 + g + 8] = acc[mt][j][2];
            P[(t + 1) * PS + m0 + g + 8] = acc[mt][j][3];
        }
    }
    cluster.sync();
    if (stop == 1) return; /* diagnostic stops (tuning.route_stop): results invalid */
    const cl_post L = cl_post_layout(TC, Ep);
    float *s_lg = reinterpret_cast<float *>(cl_smem + L.lg) + warp * Ep;
    const int tl = r + CS * warp; /* this warp's token of the tile */
    if (tl < ntok) {
        for (int e4 = lane; e4 < Ep / 4; e4 += 32) {
            float4 v[kClMaxCS];
#pragma unroll
            for (int k = 0; k < kClMaxCS; k++)
                if (k < CS) v[k] = *reinterpret_cast<const float4 *>(cluster.map_shared_rank(P, k) + tl * PS + 4 * e4);
            float4 sum = v[0];
#pragma unroll
            for (int k = 1; k < kClMaxCS; k++) {
                if (k < CS) {
                    sum.x += v[k].x;
                    sum.y += v[k].y;
                    sum.z += v[k].z;
                    sum.w += v[k].w;
                }
            }
            *reinterpret_cast<float4 *>(s_lg + 4 * e4) = sum;
        }
        __syncwarp();
        if (stop != 2)
            select_token(d, t_base + tl, s_lg, 0, 0, d.br ? s_br : nullptr,
                         reinterpret_cast<float *>(cl_smem + L.sc) + warp * 256,
                         reinterpret_cast<float *>(cl_smem + L.gsc) + warp * 32, nullptr);
    }
    /* 4. the peers are done with our tile; the cluster's selections are released to CTA 0 */
    cluster.sync();
    if (stop != 0 || r != 0) return;
    if (gridDim.y > 1 && !block_ticket(d.ctr + 2, (int)gridDim.y, d.route_fence, &s_last)) return;
    build_permutation_small(d, T, reinterpret_cast<uint32_t *>(cl_smem + L.bits), reinterpret_cast<int *>(cl_smem + L.off));
    if (threadIdx.x == 0 && gridDim.y > 1) d.ctr[2] = 0; /* for the next replay */
#endif
}

/* wrf from wr: element o = ((c * Ep/16 + m) * 4 + p) * 128 + lane * 4 + i holds wr[e][h] with
 * e = 16m + lane/4 + 8 (p >= 2), h = 32c + 8 (lane % 4) + 4 (p & 1) + i; 0 for e >= E. */
__global__ void k_router_frag(const float *__restrict__ wr, float *__restrict__ wrf, int E, int H, int Ep) {
    const size_t n = (size_t)H * Ep;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += (size_t)gridDim.x * blockDim.x) {
        const size_t blk = o / 128;
        const int in = (int)(o % 128), lane = in / 4, i = in % 4;
        const int p = (int)(blk % 4), m = (int)((blk / 4) % (Ep / 16)), c = (int)(blk / 4 / (Ep / 16));
        const int e = 16 * m + lane / 4 + (p >= 2 ? 8 : 0), h = 32 * c + 8 * (lane % 4) + 4 * (p & 1) + i;
        wrf[o] = e < E ? wr[(size_t)e * H + h] : 0.0f;
    }
}

struct cl_geom {
    int CS, TC, ncl, S, MT, Ep, xstride;
    size_t smem;
};

/* The launch shape for T tokens (tokens: the wanted tokens per cluster; stages: at most this
 * many weight stages, 0 = as many as fit), or 0 if mode 4 cannot take them. */
int cl_geometry(const tpm_moe_dev &d, int T, int tokens, int stages, cl_geom *g) {
    const int NC = d.H / 32;
    if (T < 1 || !d.wrf || d.E % 4 != 0 || d.E > 256 || d.H % 32 != 0 || NC < 2 || d.E1 > kMaxE1) return 0;
    if (tokens < 8 || tokens > kClMaxTC || tokens % 8 != 0) return 0;
    g->Ep = (d.E + 15) / 16 * 16;
    g->MT = g->Ep > 128 ? 2 : 1;
    if (d.cl_clusters[g->MT - 1] < 1) return 0;
    g->CS = NC < kClMaxCS ? NC : kClMaxCS;
    /* clusters resident at once (the query was for 16 CTAs: smaller clusters fit about as many CTAs) */
    const int resident = d.cl_clusters[g->MT - 1] * kClMaxCS / g->CS;
    int TC = tokens;
    if ((T + TC - 1) / TC > resident) TC = ((T + resident - 1) / resident + 7) / 8 * 8;
    if (TC > kClMaxTC) return 0;
    if (TC > (T + 7) / 8 * 8) TC = (T + 7) / 8 * 8;
    g->TC = TC;
    g->ncl = (T + TC - 1) / TC;
    const int Kc = (NC + g->CS - 1) / g->CS; /* chunks per CTA, at most */
    g->xstride = Kc * 64 + ((Kc * 64) % 128 == 0 ? 64 : 0);
    const size_t SB = (size_t)g->Ep * 128, xb = (size_t)TC * g->xstride;
    if (xb + 2 * SB > (size_t)d.cl_smem_max && xb + Kc * SB > (size_t)d.cl_smem_max) return 0;
    size_t S = ((size_t)d.cl_smem_max - xb) / SB;
    if (S > (size_t)Kc) S = Kc;
    if (S > (size_t)kClMaxStages) S = kClMaxStages;
    if (stages > 0 && S > (size_t)stages) S = stages;
    g->S = (int)S;
    const size_t post = (size_t)cl_post_layout(TC, g->Ep).end;
    g->smem = S * SB + xb > post ? S * SB + xb : post;
    const int nb = d.E1 + (d.ep > 1 ? 1 : 0);
    if (g->smem > (size_t)d.cl_smem_max || nb * ((T + 31) / 32) > kPermSmemWords) return 0;
    return 1;
}

template <int MT> cudaError_t cl_setup_one(tpm_moe_dev &d, int optin) {
    cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, k_route_cl<MT>);
    if (e != cudaSuccess) return e;
    const int dyn = optin - (int)fa.sharedSizeBytes;
    if ((e = cudaFuncSetAttribute(k_route_cl<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn)) != cudaSuccess)
        return e;
    if ((e = cudaFuncSetAttribute(k_route_cl<MT>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)) != cudaSuccess)
        return e;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = kClMaxCS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(kClMaxCS, 8, 1);
    cfg.blockDim = dim3(kClThreads, 1, 1);
    cfg.dynamicSmemBytes = (size_t)dyn;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int n = 0;
    if ((e = cudaOccupancyMaxActiveClusters(&n, k_route_cl<MT>, &cfg)) != cudaSuccess) return e;
    d.cl_clusters[MT - 1] = n;
    d.cl_smem_max = dyn;
    return cudaSuccess;
}

} // namespace

tpm_status tpm_moe_route_cl_setup(tpm_moe_dev &d, int device) {
    d.cl_clusters[0] = d.cl_clusters[1] = 0;
    d.cl_smem_max = 0;
    int major = 0, optin = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9 ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return TPM_OK; /* clusters, bulk copies: 9.0 and later; mode 4 stays off */
    }
    if (cl_setup_one<2>(d, optin) != cudaSuccess || cl_setup_one<1>(d, optin) != cudaSuccess) {
        (void)cudaGetLastError();
        d.cl_clusters[0] = d.cl_clusters[1] = 0;
        tpm_log(TPM_LOG_WARN, "moe: routing mode 4 unavailable (cluster occupancy query failed)");
    }
    return TPM_OK;
}

int tpm_moe_route_cl_ok(const tpm_moe_dev &d, const void *x, int T, int tokens, int stages) {
    cl_geom g;
    return x && ((uintptr_t)x & 15) == 0 && cl_geometry(d, T, tokens, stages, &g);
}

int tpm_moe_route_cl_shape(const tpm_moe_dev &d, int T, int tokens, int stages, int shape[4]) {
    cl_geom g;
    if (!cl_geometry(d, T, tokens, stages, &g)) return 0;
    shape[0] = g.CS;
    shape[1] = g.ncl;
    shape[2] = g.TC;
    shape[3] = g.S;
    return 1;
}

tpm_status tpm_moe_launch_route_cl(const tpm_moe_dev &d, const uint16_t *x, int T, int tokens, int stages,
                                   int stop, cudaStream_t s) {
    cl_geom g;
    TPM_ASSERT(tpm_moe_route_cl_ok(d, x, T, tokens, stages) && cl_geometry(d, T, tokens, stages, &g));
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)g.CS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)g.CS, (unsigned)g.ncl, 1);
    cfg.blockDim = dim3(kClThreads, 1, 1);
    cfg.dynamicSmemBytes = g.smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (g.MT == 1) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<1>, d, x, T, g.TC, g.S, g.xstride, stop));
    else TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<2>, d, x, T, g.TC, g.S, g.xstride, stop));
    return TPM_OK;
}

tpm_status tpm_moe_launch_router_frag(const tpm_moe_dev &d, cudaStream_t s) {
    if (!d.wrf) return TPM_OK;
    k_router_frag<<<d.sm_count * 4, 256, 0, s>>>(d.wr, d.wrf, d.E, d.H, (d.E + 15) / 16 * 16);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}
