/*
 * moe_cuda_sync.cuh - shared-memory mbarrier and bulk-copy helpers (sm_90,
 * not 90a-specific) for the moe_cuda_*.cu kernels that stage data with
 * cp.async.bulk. Internal: included by .cu files only; everything sits in an
 * anonymous namespace, so each including file has its own copy.
 *
 * A stage's `full` barrier is initialised with one arrival; the thread that
 * issues the stage's copies arrives with expect_tx(bytes) BEFORE it issues
 * them (so the transaction count never runs below zero), and the phase
 * completes when every byte has landed. Waits poll try_wait inside one asm
 * block (a compiler-visible per-thread loop would make what follows look
 * divergent) and trap past 2^26 polls instead of hanging.
 */
#ifndef TPM_MOE_CUDA_SYNC_CUH
#define TPM_MOE_CUDA_SYNC_CUH

#include <stdint.h>

namespace {

__device__ __forceinline__ uint32_t sync_smem_u32(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void sync_mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sync_smem_u32(b)), "r"(count) : "memory");
}
/* Make the initialised barriers visible to the async proxy and the cluster. */
__device__ __forceinline__ void sync_mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void sync_mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sync_smem_u32(b)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void sync_mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sync_smem_u32(b)) : "memory");
}
/* Poll until the phase of parity `parity` has completed; trap past 2^26 polls. */
__device__ __forceinline__ void sync_mbar_wait(uint64_t *b, uint32_t parity) {
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
                 "}\n" ::"r"(sync_smem_u32(b)),
                 "r"(parity), "n"(1 << 26)
                 : "memory");
}
/* bytes (a multiple of 16, both addresses 16-byte aligned) from global memory into this
 * CTA's shared memory, completing on bar. */
__device__ __forceinline__ void sync_bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     sync_smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(sync_smem_u32(bar))
                 : "memory");
}
#endif

} // namespace

#endif
