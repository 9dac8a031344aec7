/*
 * moe_cuda_route_cl.cu - routing mode 4: the whole routing of up to 64 tokens by ONE cluster
 * (16 CTAs where the device holds such a cluster, else 8), the router projection on tensor
 * cores (k_route_cl).
 *
 * Why: mode 3 spreads the router over every SM (up to 16 clusters of 8), so its partial logits
 * meet through global memory (polled partials), and its 8-token groups meet again through a
 * global counter before the permutation: two L2 hops of 2-3 us each after the logits (round
 * 50's traces). Here one cluster does everything and every meeting is a cluster barrier and
 * distributed shared memory. The price is fewer SMs for the logits: each CTA streams its whole
 * slice of the router (192 KB for m3 with 16 CTAs) with bulk copies, all in flight at once, and
 * the tensor-core work (3 x the mma of a bf16 GEMM: hi / mid / lo) is T / 64 of mode 3's one
 * tile on 1/8 of the SMs, so the form pays up to a few dozen tokens (measured: tuning.route_cl).
 *
 * Grid: CL CTAs of 8 warps, one cluster. CTA r owns the 32-wide chunks of H [r NC / CL,
 * (r + 1) NC / CL) (NC = H / 32), every expert (Ep = E padded to 16, <= 128: warp w computes
 * experts 16w .. 16w + 15) and every token (NT 8-token n-tiles, NT = 1, 2, 4 or 8).
 *  1. Copies, thread 0 / lanes of warp 0: the CTA's slice of every x row (one bulk copy per
 *     token, nc x 64 bytes) into xs (rows padded so the B fragments' 16-byte reads hit every
 *     bank once; rows past T zeroed), completing on xfull; the router chunks (wrf, the fp32
 *     router in mma operand order: a chunk is Ep x 128 contiguous bytes) into a ring of S
 *     slots, chunk c on full[c % S]. S = every chunk where shared memory holds them (m3, T <=
 *     32), else the ring refills: each warp arrives on empty[s] after its fragments of the slot
 *     are in registers, and thread 0 waits for all of them before it copies chunk c + S.
 *  2. Logits: per chunk the A fragments of the warp's rows from the slot (four 16-byte loads a
 *     lane, split in registers into hi / mid / lo: mode 3's loads 3), the B fragments from xs,
 *     and mode 3's mma_chunk_f32 (the same per-chunk arithmetic). Chunks in order, so a CTA's
 *     partial is the sum over its chunks in h order.
 *  3. The partial tile P[t][e] (fp32) into shared memory (the ring's space), a cluster barrier
 *     (release / acquire), and CTA r sums its tokens [r tpc, (r + 1) tpc) (tpc = ceil(T / CL))
 *     over the CL partials in rank order through distributed shared memory: fixed order, so
 *     every run gives the same bits (not mode 3's: other H slices).
 *  4. One warp per token selects (select_token: the reference's rules, ties to the lower index,
 *     NaN-safe, the shared slot appended) into d.sel / d.wts.
 *  5. A second cluster barrier (release / acquire at cluster scope: every CTA's selections are
 *     visible), then every CTA with tokens places its own pairs (place_group_rows: counts over
 *     all T K selections read through L2, the scan, its rows; the CTA of token 0 writes counts,
 *     offsets and the touched list). Nothing reads another CTA's shared memory after that
 *     barrier, so the CTAs leave without a third.
 * The waits on the copies are bounded: past kPollBound polls a wait sets the layer's error flag
 * (ctr[5], tpm_cuda_moe_check) and goes on. No counters or tickets: nothing to reset between
 * launches, so the launch replays inside a CUDA graph. The launch triggers its dependents at
 * its start (programmatic dependent launch), as modes 1 and 3 do.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"
#include "moe_cuda_route_mma.cuh"
#include "moe_cuda_route_sel.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

namespace {

constexpr int kClThreads = 256; /* 8 warps: one 16-expert m-tile each (Ep <= 128) */
constexpr int kClMaxT = 64;     /* 8 n-tiles of 8 tokens */
constexpr int kClMaxS = 16;     /* ring slots */
constexpr int kClMaxCL = 16;
/* after the logits, in the ring's space: P [64][Ep + 4], s_lg [8][128], sc [8][256], gsc [8][32],
 * the placement's counts */
constexpr size_t kClScratch = (size_t)kClMaxT * (128 + 4) * 4 + 8 * 128 * 4 + 8 * 256 * 4 + 8 * 32 * 4 +
                              (size_t)kGroupPermInts * 4;

__device__ __forceinline__ uint32_t cl_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cl_mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(cl_smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void cl_mbar_expect_tx(uint64_t *b, uint32_t tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(cl_smem_u32(b)), "r"(tx)
                 : "memory");
}
__device__ __forceinline__ void cl_mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(cl_smem_u32(b)) : "memory");
}
/* wait for the phase of parity par (bounded: past kPollBound polls it sets *err and goes on) */
__device__ __forceinline__ void cl_mbar_wait(uint64_t *b, uint32_t par, int32_t *err) {
    for (int it = 0;; it++) {
        uint32_t ok;
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(ok)
                     : "r"(cl_smem_u32(b)), "r"(par)
                     : "memory");
        if (ok) return;
        if (it >= kPollBound) {
            atomicExch(err, 1);
            return;
        }
    }
}
__device__ __forceinline__ void cl_bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     cl_smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(cl_smem_u32(bar))
                 : "memory");
}

/* xs row stride in bytes for nc chunks: nc x 64 rounded up to 128, + 64 (16 words mod 32 banks:
 * the two rows of a quarter warp's 16-byte reads land on different banks) */
__host__ __device__ __forceinline__ int cl_xstride(int ncmax) { return (ncmax * 64 + 127) / 128 * 128 + 64; }

template <int NT>
__global__ void __launch_bounds__(kClThreads, 1) k_route_cl(tpm_moe_dev d, const uint16_t *__restrict__ x, int T,
                                                            int Ep, int S, int ncmax, int stop) {
    extern __shared__ __align__(128) uint8_t cl_smem[];
    __shared__ __align__(8) uint64_t full[kClMaxS], empty[kClMaxS], xfull;
    __shared__ float s_br[128];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    cg::cluster_group cluster = cg::this_cluster();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    const int CL = (int)cluster.num_blocks(), rank = (int)cluster.block_rank();
    const int NC = d.H / 32, c_begin = (int)((int64_t)rank * NC / CL);
    const int nc = (int)((int64_t)(rank + 1) * NC / CL) - c_begin;
    const int mtiles = Ep / 16; /* warps with rows (<= 8) */
    const uint32_t slot_b = (uint32_t)Ep * 128u, xrow_b = (uint32_t)nc * 64u;
    const int xstride = cl_xstride(ncmax), xrows = 8 * NT;
    uint8_t *ring = cl_smem;
    const size_t ring_b = (size_t)S * slot_b > kClScratch ? (size_t)S * slot_b : kClScratch;
    uint8_t *xs = cl_smem + ring_b;
    TPM_TRACE_MARK_CLK(d, 0, rank);

    /* 1. barriers, then the copies (x first: small, needed by chunk 0) */
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; s++) {
            cl_mbar_init(&full[s], 1);
            cl_mbar_init(&empty[s], mtiles);
        }
        cl_mbar_init(&xfull, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    for (int i = threadIdx.x; i < (xrows - T) * (xstride / 16); i += kClThreads) /* rows past T: zeros */
        reinterpret_cast<uint4 *>(xs + (size_t)T * xstride)[i] = make_uint4(0u, 0u, 0u, 0u);
    if (d.br && (int)threadIdx.x < d.E) s_br[threadIdx.x] = __ldg(d.br + threadIdx.x);
    __syncthreads();
    if (warp == 0) {
        if (lane == 0) cl_mbar_expect_tx(&xfull, (uint32_t)T * xrow_b);
        __syncwarp();
        for (int t = lane; t < T; t += 32)
            cl_bulk_g2s(xs + (size_t)t * xstride, x + (size_t)t * d.H + (size_t)c_begin * 32, xrow_b, &xfull);
        if (lane == 0) {
            const uint8_t *wsrc = reinterpret_cast<const uint8_t *>(d.wrf) + (size_t)c_begin * slot_b;
            for (int s = 0; s < S && s < nc; s++) {
                cl_mbar_expect_tx(&full[s], slot_b);
                cl_bulk_g2s(ring + (size_t)s * slot_b, wsrc + (size_t)s * slot_b, slot_b, &full[s]);
            }
        }
    }

    /* 2. logits of the CTA's chunks */
    float acc[8][4];
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
    if (warp < mtiles) {
        cl_mbar_wait(&xfull, 0, d.ctr + 5);
        for (int c = 0; c < nc; c++) {
            const int s = c % S;
            const uint32_t par = (uint32_t)(c / S) & 1u;
            cl_mbar_wait(&full[s], par, d.ctr + 5);
            const uint4 *af = reinterpret_cast<const uint4 *>(ring + (size_t)s * slot_b) + warp * 128 + lane;
            uint4 r[2][2], b[8];
#pragma unroll
            for (int hf = 0; hf < 2; hf++)
#pragma unroll
                for (int ks = 0; ks < 2; ks++) r[hf][ks] = af[(2 * hf + ks) * 32];
#pragma unroll
            for (int j = 0; j < NT; j++)
                b[j] = *reinterpret_cast<const uint4 *>(xs + (size_t)(8 * j + g) * xstride + c * 64 + q * 16);
            mma_chunk_f32<NT>(acc, r, b);
            if (c + S < nc) { /* the ring refills: this warp is done with slot s */
                __syncwarp();
                if (lane == 0) cl_mbar_arrive(&empty[s]);
                if (threadIdx.x == 0) {
                    cl_mbar_wait(&empty[s], par, d.ctr + 5);
                    cl_mbar_expect_tx(&full[s], slot_b);
                    cl_bulk_g2s(ring + (size_t)s * slot_b,
                                reinterpret_cast<const uint8_t *>(d.wrf) + (size_t)(c_begin + c + S) * slot_b, slot_b,
                                &full[s]);
                }
                __syncwarp(); /* the warp together again before the next mma */
            }
        }
    }
    __syncthreads(); /* every copy landed and was read: the ring's space becomes the partial tile */
    TPM_TRACE_MARK_CLK(d, 1, rank);

    /* 3. the partial tile, the cluster barrier, the sums of this CTA's tokens over the CL tiles */
    const int PS = Ep + 4;
    float *P = reinterpret_cast<float *>(ring);
    float *s_lg = P + kClMaxT * (128 + 4); /* [8][128] */
    float *s_sc = s_lg + 8 * 128;          /* [8][256] */
    float *s_gsc = s_sc + 8 * 256;         /* [8][32] */
    int *s_cnt = reinterpret_cast<int *>(s_gsc + 8 * 32);
    if (warp < mtiles) {
        const int m0 = warp * 16;
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const int t = 8 * j + 2 * q;
            P[t * PS + m0 + g] = acc[j][0];
            P[(t + 1) * PS + m0 + g] = acc[j][1];
            P[t * PS + m0 + g + 8] = acc[j][2];
            P[(t + 1) * PS + m0 + g + 8] = acc[j][3];
        }
    }
    clear_group_counts(d, s_cnt);
    cluster.sync();
    TPM_TRACE_MARK_CLK(d, 3, rank);
    const int tpc = (T + CL - 1) / CL, t0 = rank * tpc, ntok = max(0, min(tpc, T - t0));
    const int E = d.E, E4 = E / 4;
    if (ntok > 0) {
        const float *Pr[kClMaxCL];
#pragma unroll
        for (int k = 0; k < kClMaxCL; k++) Pr[k] = cluster.map_shared_rank(P, k < CL ? k : 0);
        for (int i = threadIdx.x; i < ntok * E4; i += kClThreads) {
            const int tl = i / E4, e4 = i - tl * E4;
            const int off = (t0 + tl) * PS + 4 * e4;
            float4 v[kClMaxCL];
#pragma unroll
            for (int k = 0; k < kClMaxCL; k++) /* every load out before the first add */
                if (k < CL) v[k] = *reinterpret_cast<const float4 *>(Pr[k] + off);
            float4 s = v[0];
#pragma unroll
            for (int k = 1; k < kClMaxCL; k++) {
                if (k < CL) { /* rank order */
                    s.x += v[k].x;
                    s.y += v[k].y;
                    s.z += v[k].z;
                    s.w += v[k].w;
                }
            }
            *reinterpret_cast<float4 *>(&s_lg[tl * 128 + 4 * e4]) = s;
        }
        __syncthreads();
        TPM_TRACE_MARK_CLK(d, 4, rank);
        /* 4. one warp per token */
        if (stop != 1 && stop != 2 && warp < ntok)
            select_token(d, t0 + warp, s_lg + warp * 128, 0, 0, d.br ? s_br : nullptr, s_sc + warp * 256,
                         s_gsc + warp * 32, nullptr);
        TPM_TRACE_MARK_CLK(d, 5, rank);
    }
    /* 5. every selection visible in the cluster (and every peer's partial read: P is not read
     * after this), then this CTA's rows */
    cluster.sync();
    TPM_TRACE_MARK_CLK(d, 6, rank);
    if (ntok > 0 && stop == 0) place_group_rows(d, T, t0, ntok, s_cnt);
    TPM_TRACE_MARK_CLK(d, 2, rank);
}

struct cl_geom {
    int CL, Ep, NT, S, ncmax;
    size_t smem;
};

/* The launch shape for T tokens with clusters of CL (0: the largest the device holds), or 0. */
int cl_geometry(const tpm_moe_dev &d, int T, int CL, cl_geom *g) {
    if (T < 1 || T > kClMaxT || d.E % 4 != 0 || d.E > 128 || d.H % 32 != 0 || !d.wrf || d.E1 > kMaxE1 ||
        d.K > 17)
        return 0;
    if (CL == 0) CL = d.cl_ok[1] ? 16 : 8;
    if ((CL != 8 && CL != 16) || !d.cl_ok[CL == 16] || d.H / 32 < CL) return 0;
    g->CL = CL;
    g->Ep = (d.E + 15) / 16 * 16;
    g->NT = T <= 8 ? 1 : T <= 16 ? 2 : T <= 32 ? 4 : 8;
    g->ncmax = (d.H / 32 + CL - 1) / CL;
    const size_t xb = (size_t)8 * g->NT * cl_xstride(g->ncmax), slot = (size_t)g->Ep * 128;
    if (xb + kClScratch > (size_t)d.cl_smem_max) return 0;
    int S = (int)(((size_t)d.cl_smem_max - xb) / slot);
    S = S < g->ncmax ? S : g->ncmax;
    S = S < kClMaxS ? S : kClMaxS;
    if (S < 1) return 0;
    g->S = S;
    const size_t ring = (size_t)S * slot > kClScratch ? (size_t)S * slot : kClScratch;
    g->smem = ring + xb;
    return g->smem <= (size_t)d.cl_smem_max;
}

cudaLaunchConfig_t cl_config(int CL, size_t smem, cudaStream_t s, cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg = {};
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)CL;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)CL, 1, 1);
    cfg.blockDim = dim3(kClThreads, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cfg;
}

template <int NT> cudaError_t cl_attrs(int smem) {
    cudaError_t e = cudaFuncSetAttribute(k_route_cl<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_route_cl<NT>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e;
}

} // namespace

tpm_status tpm_moe_route_cl_setup(tpm_moe_dev &d, int device) {
    d.cl_ok[0] = d.cl_ok[1] = 0;
    d.cl_smem_max = 0;
    int major = 0, optin = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9 ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
        return TPM_OK; /* clusters, bulk copies: 9.0 and later; mode 4 stays off */
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, k_route_cl<8>) != cudaSuccess) {
        (void)cudaGetLastError();
        return TPM_OK;
    }
    const int smem = optin - (int)fa.sharedSizeBytes - 1024; /* the static barriers; a margin */
    if (smem < (int)kClScratch || cl_attrs<1>(smem) != cudaSuccess || cl_attrs<2>(smem) != cudaSuccess ||
        cl_attrs<4>(smem) != cudaSuccess || cl_attrs<8>(smem) != cudaSuccess) {
        (void)cudaGetLastError();
        tpm_log(TPM_LOG_WARN, "moe: routing mode 4 unavailable (kernel attributes)");
        return TPM_OK;
    }
    for (int i = 0; i < 2; i++) { /* 8, then 16 (non-portable) */
        cudaLaunchAttribute at[1];
        cudaLaunchConfig_t cfg = cl_config(i ? 16 : 8, (size_t)smem, 0, at);
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, k_route_cl<8>, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        d.cl_ok[i] = n >= 1;
    }
    d.cl_smem_max = smem;
    return TPM_OK;
}

int tpm_moe_route_cl_ok(const tpm_moe_dev &d, const void *x, int T, int cl) {
    cl_geom g;
    return x && ((uintptr_t)x & 15) == 0 && cl_geometry(d, T, cl, &g);
}

int tpm_moe_route_cl_shape(const tpm_moe_dev &d, int T, int cl, int shape[4]) {
    cl_geom g;
    if (!cl_geometry(d, T, cl, &g)) return 0;
    shape[0] = g.CL;
    shape[1] = g.S;
    shape[2] = g.ncmax;
    shape[3] = (int)g.smem;
    return 1;
}

tpm_status tpm_moe_launch_route_cl(const tpm_moe_dev &d, const uint16_t *x, int T, int cl, int stop,
                                   cudaStream_t s) {
    cl_geom g;
    TPM_ASSERT(tpm_moe_route_cl_ok(d, x, T, cl) && cl_geometry(d, T, cl, &g));
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = cl_config(g.CL, g.smem, s, at);
    if (g.NT == 1) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<1>, d, x, T, g.Ep, g.S, g.ncmax, stop));
    else if (g.NT == 2) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<2>, d, x, T, g.Ep, g.S, g.ncmax, stop));
    else if (g.NT == 4) TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<4>, d, x, T, g.Ep, g.S, g.ncmax, stop));
    else TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_route_cl<8>, d, x, T, g.Ep, g.S, g.ncmax, stop));
    return TPM_OK;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_route_cl, (k_route_cl<1>))
