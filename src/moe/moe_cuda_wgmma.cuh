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

/* The same box written at the same offset of both CTAs of the cluster (ctaMask 0b11); each
 * destination CTA's mbarrier at bar's offset receives the transaction bytes. */
__device__ __forceinline__ void tma_2d_mc(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"((uint16_t)3)
                 : "memory");
}
/* tma_2d / tma_2d_mc with an L2 eviction priority for the loaded lines (pol: createpolicy) */
__device__ __forceinline__ void tma_2d_h(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar,
                                         uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ void tma_2d_mc_h(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar,
                                            uint64_t pol) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5, %6;" ::"r"(smem_u32(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"((uint16_t)3),
                 "l"(pol)
                 : "memory");
}
/* Prefetch a box of the map into L2 (no shared memory, no barrier) */
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap *map, int c0, int c1) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(c0), "r"(c1)
                 : "memory");
}
/* L2 policies: every line the access touches first in line for eviction / last */
__device__ __forceinline__ uint64_t policy_evict_first() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t policy_evict_last() {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}
/* A load with or without a policy (pol 0: none): the hints of tuning.prefill_hints */
__device__ __forceinline__ void tma_ld(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar, uint64_t pol) {
    if (pol) tma_2d_h(dst, map, c0, c1, bar, pol);
    else tma_2d(dst, map, c0, c1, bar);
}
__device__ __forceinline__ void tma_ld_mc(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar,
                                          uint64_t pol) {
    if (pol) tma_2d_mc_h(dst, map, c0, c1, bar, pol);
    else tma_2d_mc(dst, map, c0, c1, bar);
}
/* A 4-byte output store: plain, or CS: cache streaming (st.global.cs: evict-first in L2, for
 * output read once, later) */
template <bool CS>
__device__ __forceinline__ void st_out(uint16_t *p, uint32_t v) {
    if (CS) asm volatile("st.global.cs.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else *reinterpret_cast<uint32_t *>(p) = v;
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

/* bf16(a) in the low half, bf16(b) in the high half: the bits of tpm_f32_to_bf16 (round to
 * nearest even, subnormals kept, a NaN quieted with its payload's top bits). One hardware
 * conversion for both (cvt.rn.bf16x2.f32 rounds the same way for every non-NaN input), the
 * software form only where a NaN is present: the integer rounding of both values cost ~10
 * instructions per pair in every epilogue (round 39). */
__device__ __forceinline__ uint32_t pack_bf16(float a, float b) {
#ifdef TPM_WG_DEVICE
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a)); /* first operand: the high half */
    if (__builtin_expect(isnan(a) || isnan(b), 0))
        r = (uint32_t)tpm_f32_to_bf16(a) | ((uint32_t)tpm_f32_to_bf16(b) << 16);
    return r;
#else
    return (uint32_t)tpm_f32_to_bf16(a) | ((uint32_t)tpm_f32_to_bf16(b) << 16);
#endif
}
#ifdef TPM_WG_DEVICE
/* pack_bf16 for a and b known not to be NaN (the caller checked a whole row at once) */
__device__ __forceinline__ uint32_t pack_bf16_num(float a, float b) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
    return r;
}
/* 1 when any of the 64 accumulators of row half h (d[4 j + 2 h], d[4 j + 2 h + 1], j < 32) is a
 * NaN: one predicated setp per pair (the compiler kept 32 flags in a register for a C loop) */
__device__ __forceinline__ int row_has_nan(const float (&d)[128], int h) {
    uint32_t r;
    if (h == 0) {
        asm("{\n.reg .pred p;\nsetp.nan.f32 p, %1, %2;\n"
            "setp.nan.or.f32 p, %3, %4, p;\n"
            "setp.nan.or.f32 p, %5, %6, p;\n"
            "setp.nan.or.f32 p, %7, %8, p;\n"
            "setp.nan.or.f32 p, %9, %10, p;\n"
            "setp.nan.or.f32 p, %11, %12, p;\n"
            "setp.nan.or.f32 p, %13, %14, p;\n"
            "setp.nan.or.f32 p, %15, %16, p;\n"
            "setp.nan.or.f32 p, %17, %18, p;\n"
            "setp.nan.or.f32 p, %19, %20, p;\n"
            "setp.nan.or.f32 p, %21, %22, p;\n"
            "setp.nan.or.f32 p, %23, %24, p;\n"
            "setp.nan.or.f32 p, %25, %26, p;\n"
            "setp.nan.or.f32 p, %27, %28, p;\n"
            "setp.nan.or.f32 p, %29, %30, p;\n"
            "setp.nan.or.f32 p, %31, %32, p;\n"
            "setp.nan.or.f32 p, %33, %34, p;\n"
            "setp.nan.or.f32 p, %35, %36, p;\n"
            "setp.nan.or.f32 p, %37, %38, p;\n"
            "setp.nan.or.f32 p, %39, %40, p;\n"
            "setp.nan.or.f32 p, %41, %42, p;\n"
            "setp.nan.or.f32 p, %43, %44, p;\n"
            "setp.nan.or.f32 p, %45, %46, p;\n"
            "setp.nan.or.f32 p, %47, %48, p;\n"
            "setp.nan.or.f32 p, %49, %50, p;\n"
            "setp.nan.or.f32 p, %51, %52, p;\n"
            "setp.nan.or.f32 p, %53, %54, p;\n"
            "setp.nan.or.f32 p, %55, %56, p;\n"
            "setp.nan.or.f32 p, %57, %58, p;\n"
            "setp.nan.or.f32 p, %59, %60, p;\n"
            "setp.nan.or.f32 p, %61, %62, p;\n"
            "setp.nan.or.f32 p, %63, %64, p;\n"
            "selp.u32 %0, 1, 0, p;\n}"
            : "=r"(r)
            : "f"(d[0]), "f"(d[1]), "f"(d[4]), "f"(d[5]), "f"(d[8]), "f"(d[9]), "f"(d[12]), "f"(d[13]),
              "f"(d[16]), "f"(d[17]), "f"(d[20]), "f"(d[21]), "f"(d[24]), "f"(d[25]), "f"(d[28]), "f"(d[29]),
              "f"(d[32]), "f"(d[33]), "f"(d[36]), "f"(d[37]), "f"(d[40]), "f"(d[41]), "f"(d[44]), "f"(d[45]),
              "f"(d[48]), "f"(d[49]), "f"(d[52]), "f"(d[53]), "f"(d[56]), "f"(d[57]), "f"(d[60]), "f"(d[61]),
              "f"(d[64]), "f"(d[65]), "f"(d[68]), "f"(d[69]), "f"(d[72]), "f"(d[73]), "f"(d[76]), "f"(d[77]),
              "f"(d[80]), "f"(d[81]), "f"(d[84]), "f"(d[85]), "f"(d[88]), "f"(d[89]), "f"(d[92]), "f"(d[93]),
              "f"(d[96]), "f"(d[97]), "f"(d[100]), "f"(d[101]), "f"(d[104]), "f"(d[105]), "f"(d[108]), "f"(d[109]),
              "f"(d[112]), "f"(d[113]), "f"(d[116]), "f"(d[117]), "f"(d[120]), "f"(d[121]), "f"(d[124]), "f"(d[125]));
    } else {
        asm("{\n.reg .pred p;\nsetp.nan.f32 p, %1, %2;\n"
            "setp.nan.or.f32 p, %3, %4, p;\n"
            "setp.nan.or.f32 p, %5, %6, p;\n"
            "setp.nan.or.f32 p, %7, %8, p;\n"
            "setp.nan.or.f32 p, %9, %10, p;\n"
            "setp.nan.or.f32 p, %11, %12, p;\n"
            "setp.nan.or.f32 p, %13, %14, p;\n"
            "setp.nan.or.f32 p, %15, %16, p;\n"
            "setp.nan.or.f32 p, %17, %18, p;\n"
            "setp.nan.or.f32 p, %19, %20, p;\n"
            "setp.nan.or.f32 p, %21, %22, p;\n"
            "setp.nan.or.f32 p, %23, %24, p;\n"
            "setp.nan.or.f32 p, %25, %26, p;\n"
            "setp.nan.or.f32 p, %27, %28, p;\n"
            "setp.nan.or.f32 p, %29, %30, p;\n"
            "setp.nan.or.f32 p, %31, %32, p;\n"
            "setp.nan.or.f32 p, %33, %34, p;\n"
            "setp.nan.or.f32 p, %35, %36, p;\n"
            "setp.nan.or.f32 p, %37, %38, p;\n"
            "setp.nan.or.f32 p, %39, %40, p;\n"
            "setp.nan.or.f32 p, %41, %42, p;\n"
            "setp.nan.or.f32 p, %43, %44, p;\n"
            "setp.nan.or.f32 p, %45, %46, p;\n"
            "setp.nan.or.f32 p, %47, %48, p;\n"
            "setp.nan.or.f32 p, %49, %50, p;\n"
            "setp.nan.or.f32 p, %51, %52, p;\n"
            "setp.nan.or.f32 p, %53, %54, p;\n"
            "setp.nan.or.f32 p, %55, %56, p;\n"
            "setp.nan.or.f32 p, %57, %58, p;\n"
            "setp.nan.or.f32 p, %59, %60, p;\n"
            "setp.nan.or.f32 p, %61, %62, p;\n"
            "setp.nan.or.f32 p, %63, %64, p;\n"
            "selp.u32 %0, 1, 0, p;\n}"
            : "=r"(r)
            : "f"(d[2]), "f"(d[3]), "f"(d[6]), "f"(d[7]), "f"(d[10]), "f"(d[11]), "f"(d[14]), "f"(d[15]),
              "f"(d[18]), "f"(d[19]), "f"(d[22]), "f"(d[23]), "f"(d[26]), "f"(d[27]), "f"(d[30]), "f"(d[31]),
              "f"(d[34]), "f"(d[35]), "f"(d[38]), "f"(d[39]), "f"(d[42]), "f"(d[43]), "f"(d[46]), "f"(d[47]),
              "f"(d[50]), "f"(d[51]), "f"(d[54]), "f"(d[55]), "f"(d[58]), "f"(d[59]), "f"(d[62]), "f"(d[63]),
              "f"(d[66]), "f"(d[67]), "f"(d[70]), "f"(d[71]), "f"(d[74]), "f"(d[75]), "f"(d[78]), "f"(d[79]),
              "f"(d[82]), "f"(d[83]), "f"(d[86]), "f"(d[87]), "f"(d[90]), "f"(d[91]), "f"(d[94]), "f"(d[95]),
              "f"(d[98]), "f"(d[99]), "f"(d[102]), "f"(d[103]), "f"(d[106]), "f"(d[107]), "f"(d[110]), "f"(d[111]),
              "f"(d[114]), "f"(d[115]), "f"(d[118]), "f"(d[119]), "f"(d[122]), "f"(d[123]), "f"(d[126]), "f"(d[127]));
    }
    return (int)r;
}
#endif

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
