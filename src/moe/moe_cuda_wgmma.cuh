/*
 * moe_cuda_wgmma.cuh - the Hopper pieces of tpmoe's own grouped GEMM (moe_cuda_gemm_sm90a.cu)
 * that are not the GEMM itself: mbarrier, TMA and cluster primitives, the shared-memory operand
 * descriptor, the band order of a large expert's items, and the host's tensor-map encoder. For
 * *_sm90a.cu files only (CUDA C++, not installed); everything is in an anonymous namespace, one
 * copy per including file. (Round 21's kernel with the wgmma sides swapped, commit 957fa1f,
 * included it too.)
 *
 * Operands in shared memory are bf16, K-major, in 64-column (128-byte) rows with the
 * 128-byte swizzle: 8-row atoms of 1024 bytes, so every operand tile starts 1024-aligned.
 * The waits are bounded: past 2^26 polls a wait traps, which the layer reports as a CUDA
 * error, instead of hanging.
 */
#ifndef TPM_MOE_CUDA_WGMMA_CUH
#define TPM_MOE_CUDA_WGMMA_CUH

#include "moe_cuda_kernels.h"

#include <cuda.h>
#include <cudaTypedefs.h>

namespace {

constexpr int BK = 64; /* k per stage: one 128-byte swizzle row of bf16 */

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
 * divergent, which serializes them); past 2^26 polls it traps. TRY_WAIT is the
 * try_wait form: acquire at CTA scope (the default) or at cluster scope. */
#define TPM_MBAR_WAIT_ASM(TRY_WAIT)                                                        \
    asm volatile("{\n"                                                                    \
                 ".reg .pred p;\n"                                                        \
                 ".reg .u32 n;\n"                                                         \
                 "mov.u32 n, 0;\n"                                                        \
                 "LAB_WAIT:\n" TRY_WAIT " p, [%0], %1;\n"                                 \
                 "@p bra.uni LAB_DONE;\n"                                                 \
                 "add.u32 n, n, 1;\n"                                                     \
                 "setp.lt.u32 p, n, %2;\n"                                                \
                 "@p bra.uni LAB_WAIT;\n"                                                 \
                 "trap;\n"                                                                \
                 "LAB_DONE:\n"                                                            \
                 "}\n" ::"r"(smem_u32(b)),                                                \
                 "r"(parity), "n"(1 << 26)                                                 \
                 : "memory")
__device__ __forceinline__ void mbar_wait(uint64_t *b, uint32_t parity) {
    TPM_MBAR_WAIT_ASM("mbarrier.try_wait.parity.shared::cta.b64");
}
/* The same with acquire at cluster scope (what another CTA of the cluster released). */
__device__ __forceinline__ void mbar_wait_cl(uint64_t *b, uint32_t parity) {
    TPM_MBAR_WAIT_ASM("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64");
}
__device__ __forceinline__ void tma_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
                 : "memory");
}

/* TMA store of one box from shared memory (the async proxy reads it; the writing threads fence
 * their generic writes with tma_store_fence first) into the bulk group of this thread. */
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_store_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
/* this thread's bulk stores have read their shared memory (it may be rewritten) */
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
/* this thread's bulk stores are complete (written to global memory) */
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

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
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(smem_u32(b)),
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
#endif /* TPM_WG_DEVICE */

__device__ __forceinline__ uint32_t pack_bf16(float a, float b) {
    return (uint32_t)tpm_f32_to_bf16(a) | ((uint32_t)tpm_f32_to_bf16(b) << 16);
}

/* Item `local` of an expert with rtc row tiles and nb weight blocks, in bands of `band`
 * row tiles (0: one band): band by band, inside a band weight block by weight block, then
 * the band's row tiles. Every band but the last is full, so band = local / (band nb). With
 * one band this is the order of round 6 (the CTAs that share a weight block side by side);
 * bands keep a large expert's A rows (the shared slot's: 100 MB at 8192 tokens) in L2 while
 * its weight blocks stream past, instead of re-reading all of A for every weight block. */
__device__ __forceinline__ void band_tile(int local, int rtc, int band, int nb, int *wb, int *rt) {
    if (band <= 0 || rtc <= band) {
        *wb = local / rtc;
        *rt = local - *wb * rtc;
        return;
    }
    const int nbands = (rtc + band - 1) / band;
    const int b = min(local / (band * nb), nbands - 1), l = local - b * band * nb;
    const int rb = min(band, rtc - b * band);
    *wb = l / rb;
    *rt = b * band + (l - *wb * rb);
}

#ifdef TPM_WG_DEVICE
/* Write v at p's offset in CTA `rank`, then arrive on the mbarrier at b's offset there,
 * releasing the write at cluster scope. */
__device__ __forceinline__ void put_cluster(int *p, int v, uint64_t *b, uint32_t rank) {
    asm volatile("{\n.reg .b32 ra, rb;\nmapa.shared::cluster.u32 ra, %0, %2;\nmapa.shared::cluster.u32 rb, %1, %2;\n"
                 "st.shared::cluster.u32 [ra], %3;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [rb];\n}\n" ::"r"(smem_u32(p)),
                 "r"(smem_u32(b)), "r"(rank), "r"(v)
                 : "memory");
}
/* Arrive on the mbarrier at b's offset in CTA `rank`, releasing at cluster scope: the item
 * queue's readers, whose slot another CTA overwrites next. (The stage barriers' remote arrive,
 * mbar_arrive_cluster, keeps the default CTA-scope release: cluster scope there made the
 * clustered kernel 35% slower in round 14, and the TMA writes need no release.) */
__device__ __forceinline__ void arrive_cluster_rel(uint64_t *b, uint32_t rank) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(smem_u32(b)),
                 "r"(rank)
                 : "memory");
}
#endif

#ifdef TPM_WG_DEVICE
/* Wait for the grids this launch depends on (programmatic dependent launch; a no-op after a
 * plain launch) and make their writes visible. */
__device__ __forceinline__ void grid_dep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#endif

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
tpm_status make_map(CUtensorMap *m, const void *base, uint64_t rows, uint64_t cols, uint32_t box_rows = 128) {
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

#endif /* TPM_MOE_CUDA_WGMMA_CUH */
