/*
 * full_sm_kernel.cu - a test kernel whose CTAs each need a whole SM and all
 * of which must be resident at once (GPU tests only, CUDA builds).
 *
 * Each CTA asks for the largest dynamic shared memory a block may have, so
 * with the per-CTA reservation it fills an SM's shared memory and no other
 * CTA (a spinning all-reduce's, say) can sit on the same SM. Thread 0 of
 * every CTA then counts itself in and waits until all gridDim.x CTAs have:
 * the launch completes only where that many SMs are free together. The wait
 * is bounded (%globaltimer): past timeout_ns the CTA sets *failed and
 * leaves, so the kernel never hangs a test.
 */
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

__global__ void full_sm_barrier(unsigned *arrived, unsigned *failed, unsigned long long timeout_ns) {
    extern __shared__ unsigned char fill[];
    if (threadIdx.x != 0) return;
    fill[0] = 1; /* the memory is the point; touch it */
    atomicAdd(arrived, 1u);
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    while (*(volatile unsigned *)arrived < gridDim.x) {
        __nanosleep(200);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 > timeout_ns) {
            atomicExch(failed, 1u);
            return;
        }
    }
}

} /* namespace */

/* Enqueue full_sm_barrier with nblocks CTAs on stream; arrived and failed
 * are device words the caller zeroed. Returns 0, or -1 if the launch failed. */
extern "C" int test_full_sm_barrier_launch(int nblocks, unsigned *arrived, unsigned *failed,
                                           unsigned long long timeout_ns, void *stream) {
    int dev = 0, smem = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
        cudaFuncSetAttribute(full_sm_barrier, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return -1;
    full_sm_barrier<<<nblocks, 32, (size_t)smem, (cudaStream_t)stream>>>(arrived, failed, timeout_ns);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
