/*
 * moe_cuda_gemm_sm90a.cu - tpmoe's own grouped GEMM for the prefill experts on
 * Hopper tensor cores (wgmma + TMA), one launch for every touched expert,
 * the fused shared slot included, with the swiglu-oai activation fused into
 * the gate_up epilogue. Compiled for sm_90a only (wgmma is
 * arch-specific); the layer uses it when the device is 9.0 and the shapes fit
 * (tpm_moe_wgmma_ok), else the cuBLAS paths of moe_cuda_prefill.cu.
 *
 * Problem: the permuted rows of expert e are rows [o_e, o_e + n_e) of the A
 * operand (xp for gate_up, act_bf for down; bf16, K contiguous). For every
 * expert, C_e = A_e . W_e^T with W_e [N x K] (K contiguous) from w13 or w2.
 *   gate_up (ACT): a tile's 128 weight rows are gate rows j0..j0+63 and the
 *     matching up rows Il+j0..; every thread holds gate and up of the same
 *     (row, column) in its accumulators, applies bias + activation in fp32 and
 *     writes act_bf[row][j0 + c] (no h13 round trip, no activation launch);
 *   down: 128 consecutive rows of w2; rows_bf[row][n0 + c] = bf16(acc).
 *
 * Tiles: 256 permuted rows x 128 weight rows, K in steps of 64 (one 128-byte
 * swizzle row of bf16). Tokens are the wgmma M side (two m64 blocks per
 * consumer warpgroup), weights the N side (n128), both operands K-major in
 * shared memory, fp32 accumulation in registers (128 per thread). A tile's
 * rows past its expert's n_e belong to the next expert (or are TMA zero fill
 * past the buffer) and are computed but never stored; an m64 block whose rows
 * are all past n_e is skipped.
 *
 * Clusters of 2 CTAs: both take the same 256 rows and neighbouring weight
 * blocks (2p, 2p+1). Each CTA's producer loads its 128-row half of the A tile
 * with a multicast TMA into both CTAs, and its own B tile: per stage a CTA
 * reads 32 KB from L2 instead of 48 (round 12: the unclustered 128 x 256
 * version ran L2-bound, lts throughput 91% of peak, at a 1.46 GHz SM clock).
 *
 * Tile order: experts from the highest index (the shared slot, the largest)
 * down; within an expert, weight block pair by pair and, inside it, its row
 * tiles, so the CTAs that share a weight block run side by side and read it
 * from HBM once (L2 serves the others). The tile table is a prefix sum of row
 * tiles over the experts, built on the device (k_wg_tiles) from the routing's
 * offsets: no host round trip, so the path is graph-capturable. Clusters past
 * the device total exit (both CTAs alike, before any barrier).
 *
 * Synchronisation (one CTA = 3 warpgroups): warpgroup 0's first thread is the
 * TMA producer, warpgroups 1-2 consume. A 4-stage ring of 48 KB stages (A
 * 2 x 16 KB + B 16 KB) with two mbarriers per stage: full[s] (1 arrival with
 * expect_tx of the stage's 48 KB, completed by the TMA transactions, the
 * other CTA's multicast half included) and empty[s] (16 arrivals: one per
 * consumer warp of BOTH CTAs once its wgmmas reading the stage completed,
 * wgmma.wait_group 1 after the next stage's commit; the remote one through
 * mapa + mbarrier.arrive.release.cluster), since a producer's multicast
 * overwrites the stage in both CTAs. Phases alternate, so the parity of use u
 * of a stage is u & 1. A cluster barrier after the barrier init (before any
 * multicast or remote arrive) and one before exit (no remote arrive lands in
 * an exited CTA). The waits are bounded: past 2^26 polls the kernel traps,
 * which the layer reports as a CUDA error, instead of hanging. Results are
 * deterministic: each output element is one accumulator summed in a fixed k
 * order, the same whichever path the tile took.
 */
#include "moe_cuda_kernels.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string.h>

namespace {

constexpr int BM = 256, BN = 128, BK = 64, ST = 4;      /* rows, weight rows, k per stage, stages */
constexpr int AH_BYTES = 128 * BK * 2;                    /* one CTA's half of the A tile (128 rows) */
constexpr int B_BYTES = BN * BK * 2;
constexpr int STAGE_BYTES = 2 * AH_BYTES + B_BYTES;      /* 48 KB */
constexpr int kThreads = 384;
constexpr int SMEM_BYTES = ST * STAGE_BYTES + 1024; /* + alignment slack (1024-byte swizzle atoms) */

struct wg_args {
    const int32_t *offsets; /* [E1 + 1] permuted row offsets (routing) */
    const int32_t *rtp;     /* [E1 + 1] row tiles before expert E1-1-q (highest expert first) */
    int E1, nb, K;          /* experts, weight blocks per expert (even), reduction length */
    int wrows;              /* weight rows per expert in the B map (2 Il or H) */
    int nb_rows, bhalf;     /* rows between weight blocks; offset of the second 64-row half */
    uint16_t *out;
    int ldo;
    /* gate_up epilogue */
    const float *b13;
    int Il, act;
    float alpha, limit, beta;
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TPM_WG_DEVICE 1
#endif

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#ifdef TPM_WG_DEVICE
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(b)) : "memory");
}
/* Poll until the phase of parity `parity` has completed. The loop is inside the
 * asm (a compiler-visible per-thread loop would make the wgmmas after it look
 * divergent, which serializes them); past 2^26 polls it traps. */
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 ".reg .u32 n;\n"
                 "mov.u32 n, 0;\n"
                 "LAB_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@p bra.uni LAB_DONE;\n"
                 "add.u32 n, n, 1;\n"
                 "setp.lt.u32 p, n, %2;\n"
                 "@p bra.uni LAB_WAIT;\n"
                 "trap;\n"
                 "LAB_DONE:\n"
                 "}\n" ::"r"(smem_u32(b)),
                 "r"(parity), "n"(1 << 26)
                 : "memory");
}
__device__ __forceinline__ void tma_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

/* The same box written at the same offset of both CTAs of the cluster (ctaMask 0b11); each
 * destination CTA's mbarrier at bar's offset receives the transaction bytes. */
__device__ __forceinline__ void tma_2d_mc(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"((uint16_t)3)
                 : "memory");
}
/* Arrive on the mbarrier at b's offset in CTA `rank` of the cluster. */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *b, uint32_t rank) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(smem_u32(b)),
                 "r"(rank)
                 : "memory");
}
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

/* K-major operand in shared memory, 128-byte swizzle: 8-row atoms 1024 bytes apart. */
__device__ __forceinline__ uint64_t desc(const void *p) {
    return (uint64_t)((smem_u32(p) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* D[64 x 128] (+)= A[64 x 16] . B[128 x 16]^T, A and B K-major in shared memory (128-byte
 * swizzle, descriptors da / db); scale_d = 0 overwrites D. Operands generated, not typed. */
__device__ __forceinline__ void wgmma_m64n128k16(float *d, uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d));
}
#endif /* TPM_WG_DEVICE */

__device__ __forceinline__ uint32_t pack_bf16(float a, float b) {
    return (uint32_t)tpm_f32_to_bf16(a) | ((uint32_t)tpm_f32_to_bf16(b) << 16);
}

#ifdef TPM_WG_DEVICE
/* Both consumer-side steps of one stage: MB (1 or 2) m64 blocks of this warpgroup's 128 rows. */
template <int MB>
__device__ __forceinline__ void mma_stage(float (&d)[2][64], const unsigned char *st, int c, int first) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
#pragma unroll
        for (int b = 0; b < MB; b++)
            wgmma_m64n128k16(d[b], desc(st + (128 * c + 64 * b) * 128 + kk * 32),
                             desc(st + 2 * AH_BYTES + kk * 32), !(first && kk == 0));
    wg_commit();
}

/* Release stage s in both CTAs of the cluster (their producers multicast A into both). */
__device__ __forceinline__ void release(uint64_t *empty, int s, uint32_t rank, int lane) {
    if (lane == 0) {
        mbar_arrive(&empty[s]);
        mbar_arrive_cluster(&empty[s], rank ^ 1u);
    }
}

template <bool ACT, int MB>
__device__ __forceinline__ void consume(const wg_args &a, unsigned char *smem, uint64_t *full, uint64_t *empty,
                                        uint32_t rank, int c, int row0, int nvalid, int e, int wb) {
    const int lane = threadIdx.x & 31, w4 = (threadIdx.x >> 5) & 3, KB = a.K / BK;
    float d[2][64];
    for (int kb = 0; kb < KB; kb++) {
        const int s = kb % ST;
        mbar_wait(&full[s], (kb / ST) & 1);
        mma_stage<MB>(d, smem + (size_t)s * STAGE_BYTES, c, kb == 0);
        wg_wait<1>(); /* the previous stage's wgmmas are done: release it */
        if (kb > 0) release(empty, (kb - 1) % ST, rank, lane);
    }
    wg_wait<0>();
#pragma unroll
    for (int b = 0; b < MB; b++)
#pragma unroll
        for (int i = 0; i < 64; i++) asm volatile("" : "+f"(d[b][i])::"memory");
    /* accumulator i of block b: row 128 c + 64 b + 16 w4 + lane/4 + 8 ((i/2) & 1),
     * column 8 (i/4) + 2 (lane & 3) + (i & 1) */
    const int cq = 2 * (lane & 3);
#pragma unroll
    for (int b = 0; b < MB; b++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = 128 * c + 64 * b + 16 * w4 + (lane >> 2) + 8 * h;
            if (r >= nvalid) continue;
            uint16_t *orow = a.out + (size_t)(row0 + r) * a.ldo;
            if (ACT) { /* columns 0..63 gate, 64..127 the matching up */
                const float *bg = a.b13 ? a.b13 + (size_t)e * 2 * a.Il + wb * 64 : nullptr;
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    const int col = 8 * j + cq;
                    float g0 = d[b][4 * j + 2 * h], g1 = d[b][4 * j + 2 * h + 1];
                    float u0 = d[b][32 + 4 * j + 2 * h], u1 = d[b][32 + 4 * j + 2 * h + 1];
                    if (bg) {
                        g0 += bg[col];
                        g1 += bg[col + 1];
                        u0 += bg[a.Il + col];
                        u1 += bg[a.Il + col + 1];
                    }
                    const float a0 = tpm_moe_act(a.act, g0, u0, a.alpha, a.limit, a.beta);
                    const float a1 = tpm_moe_act(a.act, g1, u1, a.alpha, a.limit, a.beta);
                    *reinterpret_cast<uint32_t *>(orow + wb * 64 + col) = pack_bf16(a0, a1);
                }
            } else {
#pragma unroll
                for (int j = 0; j < 16; j++) {
                    const int col = 8 * j + cq;
                    *reinterpret_cast<uint32_t *>(orow + wb * 128 + col) =
                        pack_bf16(d[b][4 * j + 2 * h], d[b][4 * j + 2 * h + 1]);
                }
            }
        }
    }
}

#endif /* TPM_WG_DEVICE */

template <bool ACT>
__global__ void __launch_bounds__(kThreads, 1)
    k_wg_gemm(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const wg_args a) {
#ifdef TPM_WG_DEVICE
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full[ST], empty[ST];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    /* the cluster's tile: highest expert first, then weight block pair, then row tile; CTA
     * rank r of the cluster takes weight block 2 p + r of the pair (the same rows) */
    const uint32_t rank = cluster_rank();
    const int id = blockIdx.x >> 1;
    const int E1 = a.E1, np = a.nb >> 1;
    if (id >= __ldg(a.rtp + E1) * np) return; /* the same for both CTAs, before any barrier */
    int lo = 0, hi = E1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(a.rtp + mid) * np <= id) lo = mid;
        else hi = mid;
    }
    const int q0 = __ldg(a.rtp + lo), rte = __ldg(a.rtp + lo + 1) - q0;
    const int e = E1 - 1 - lo, local = id - q0 * np, pair = local / rte, rt = local - pair * rte;
    const int wb = 2 * pair + (int)rank;
    const int off = __ldg(a.offsets + e), n_e = __ldg(a.offsets + e + 1) - off;
    const int row0 = off + rt * BM, nvalid = min(BM, n_e - rt * BM);
    const int brow0 = e * a.wrows + wb * a.nb_rows, brow1 = brow0 + a.bhalf;
    const int KB = a.K / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 16); /* 8 consumer warps here + 8 in the other CTA */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    cluster_sync(); /* both CTAs' barriers exist before any multicast or remote arrive */

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); /* warp-uniform for the compiler */
    if (wg == 0) { /* producer: this CTA's half of A (multicast to both), its own B */
        if (threadIdx.x == 0) {
            for (int kb = 0; kb < KB; kb++) {
                const int s = kb % ST;
                if (kb >= ST) mbar_wait(&empty[s], ((kb / ST) - 1) & 1);
                unsigned char *st = smem + (size_t)s * STAGE_BYTES;
                mbar_expect_tx(&full[s], STAGE_BYTES);
                tma_2d_mc(st + rank * AH_BYTES, &ta, kb * BK, row0 + 128 * (int)rank, &full[s]);
                tma_2d(st + 2 * AH_BYTES, &tb, kb * BK, brow0, &full[s]);
                tma_2d(st + 2 * AH_BYTES + B_BYTES / 2, &tb, kb * BK, brow1, &full[s]);
            }
        }
        __syncwarp();
    } else { /* consumers: warpgroup c owns rows 128 c .. 128 c + 127 of the tile (two m64 blocks) */
        const int c = wg - 1;
        const int mb = __shfl_sync(0xffffffffu, min(2, max(0, (nvalid - 128 * c + 63) / 64)), 0);
        if (mb == 2) consume<ACT, 2>(a, smem, full, empty, rank, c, row0, nvalid, e, wb);
        else if (mb == 1) consume<ACT, 1>(a, smem, full, empty, rank, c, row0, nvalid, e, wb);
        else { /* none of this warpgroup's rows are stored: release the stages only */
            const int lane = threadIdx.x & 31;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(&full[kb % ST], (kb / ST) & 1);
                release(empty, kb % ST, rank, lane);
            }
        }
    }
    cluster_sync(); /* the other CTA's remote arrives on our barriers are done before we exit */
#else
    (void)ta;
    (void)tb;
    (void)a;
    __trap(); /* built without sm_90a: tpm_moe_wgmma_ok() keeps the layer from launching this */
#endif
}

/* rtp[q] = row tiles of experts E1-1 .. E1-q (highest first); rtp[E1] = total. One block. */
__global__ void k_wg_tiles(const int32_t *__restrict__ offsets, int32_t *__restrict__ rtp, int E1) {
    __shared__ int32_t cnt[1024];
    for (int q = threadIdx.x; q < E1; q += blockDim.x) {
        const int e = E1 - 1 - q;
        cnt[q] = (offsets[e + 1] - offsets[e] + BM - 1) / BM;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int q = 0; q < E1; q++) {
            rtp[q] = acc;
            acc += cnt[q];
        }
        rtp[E1] = acc;
    }
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
    return fn;
}

/* A bf16 row-major [rows x cols] matrix as TMA tiles of box_rows rows x 64 columns, 128-byte swizzle. */
tpm_status make_map(CUtensorMap *m, const void *base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
    if (!fn) return tpm_err(TPM_ERR_CUDA, "cuTensorMapEncodeTiled is not available from the driver");
    const cuuint64_t dims[2] = {cols, rows};
    const cuuint64_t strides[1] = {cols * 2};
    const cuuint32_t box[2] = {BK, box_rows};
    const cuuint32_t es[2] = {1, 1};
    const CUresult r = fn(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void *>(base), dims, strides, box, es,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return tpm_err(TPM_ERR_CUDA, "cuTensorMapEncodeTiled (%llu x %llu): error %d",
                                          (unsigned long long)rows, (unsigned long long)cols, (int)r);
    return TPM_OK;
}

} // namespace

int tpm_moe_wgmma_ok(const tpm_moe_dev &d, int device) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
        return 0;
    return major == 9 && minor == 0 && d.H % 256 == 0 && d.Il % 128 == 0 && d.H % BK == 0 && d.Il % BK == 0 &&
           d.E1 <= 1024 && encode_fn() != nullptr;
}

tpm_status tpm_moe_wgmma_setup(const tpm_moe_dev &d, int max_rows, tpm_moe_wg_ctx *c) {
    static_assert(sizeof(CUtensorMap) == sizeof(c->maps[0]), "tensor map size");
    CUtensorMap m[4];
    TPM_TRY(make_map(&m[0], d.xp, (uint64_t)max_rows, (uint64_t)d.H, 128));           /* A of gate_up */
    TPM_TRY(make_map(&m[1], d.w13, (uint64_t)d.E1 * 2 * d.Il, (uint64_t)d.H, 64));   /* B of gate_up */
    TPM_TRY(make_map(&m[2], d.act_bf, (uint64_t)max_rows, (uint64_t)d.Il, 128));      /* A of down */
    TPM_TRY(make_map(&m[3], d.w2, (uint64_t)d.E1 * d.H, (uint64_t)d.Il, 64));        /* B of down */
    memcpy(c->maps, m, sizeof m);
    TPM_CUDA_TRY(cudaFuncSetAttribute(k_wg_gemm<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    TPM_CUDA_TRY(cudaFuncSetAttribute(k_wg_gemm<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    c->ready = 1;
    return TPM_OK;
}

tpm_status tpm_moe_prefill_wgmma(const tpm_moe_dev &d, const tpm_moe_wg_ctx &c, const uint16_t *x, int T,
                                 cudaStream_t s) {
    TPM_ASSERT(c.ready && c.rtp);
    TPM_TRY(tpm_moe_launch_gather(d, x, T, s));
    k_wg_tiles<<<1, 256, 0, s>>>(d.offsets, c.rtp, d.E1);
    TPM_CUDA_LAUNCHED();
    /* an upper bound of the row tiles (each touched expert adds at most one partial tile) */
    const long long rows = (long long)T * d.K, ub_rt = rows / BM + (rows < d.E1 ? rows : d.E1);
    const CUtensorMap *m = reinterpret_cast<const CUtensorMap *>(c.maps);
    wg_args g = {};
    g.offsets = d.offsets;
    g.rtp = c.rtp;
    g.E1 = d.E1;
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
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = SMEM_BYTES;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    /* gate_up + activation: weight blocks of 64 gate rows (+ the 64 matching up rows) */
    g.nb = d.Il / 64;
    g.K = d.H;
    g.wrows = 2 * d.Il;
    g.nb_rows = 64;
    g.bhalf = d.Il;
    g.out = d.act_bf;
    g.ldo = d.Il;
    cfg.gridDim = dim3((unsigned)(ub_rt * g.nb));
    TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_wg_gemm<true>, m[0], m[1], g));
    /* down: weight blocks of 128 rows of w2 */
    g.nb = d.H / 128;
    g.K = d.Il;
    g.wrows = d.H;
    g.nb_rows = 128;
    g.bhalf = 64;
    g.out = d.rows_bf;
    g.ldo = d.H;
    cfg.gridDim = dim3((unsigned)(ub_rt * g.nb));
    TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, k_wg_gemm<false>, m[2], m[3], g));
    return TPM_OK;
}
