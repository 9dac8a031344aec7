/*
 * cuda_probe.cu - the peer-bandwidth probe: a plain 16-byte-vector copy
 * kernel whose source or destination may be a peer GPU's memory. The
 * benchmark times it to get the floor (bytes over the measured peer
 * bandwidth) in the same run; the communicator uses it to prove P2P with a
 * real write and read-back at init. No synchronisation: one stream-ordered
 * launch, every thread copies its own 16-byte words. copy2 runs a write
 * stream and a read stream of the same link at once (even / odd CTAs).
 */
#include "core/cuda_preload.h"
#include "comm/cuda_sync.h"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

/* Words i, i + stride, ... below n of src into dst, 4 loads in flight. */
__device__ __forceinline__ void copy_words(uint4 *dst, const uint4 *src, size_t n, size_t i, size_t stride) {
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 x0 = ld_stream16(src + i), x1 = ld_stream16(src + i + stride);
        uint4 x2 = ld_stream16(src + i + 2 * stride), x3 = ld_stream16(src + i + 3 * stride);
        dst[i] = x0;
        dst[i + stride] = x1;
        dst[i + 2 * stride] = x2;
        dst[i + 3 * stride] = x3;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void copy_kernel(uint4 *dst, const uint4 *src, size_t n) {
    copy_words(dst, src, n, (size_t)blockIdx.x * blockDim.x + threadIdx.x, (size_t)gridDim.x * blockDim.x);
}

/* Even CTAs copy a -> b, odd CTAs c -> d (the link probe's write + read). */
__global__ void copy2_kernel(uint4 *b, const uint4 *a, uint4 *d, const uint4 *c, size_t n) {
    const bool odd = blockIdx.x & 1u;
    copy_words(odd ? d : b, odd ? c : a, n, (size_t)(blockIdx.x / 2) * blockDim.x + threadIdx.x,
               (size_t)(gridDim.x / 2) * blockDim.x);
}

} /* namespace */
} /* namespace tpm_cuda */

extern "C" int tpm_cuda_copy_launch(void *dst, const void *src, size_t bytes, int grid,
                                    void *stream) {
    tpm_cuda::copy_kernel<<<grid, 512, 0, (cudaStream_t)stream>>>((uint4 *)dst, (const uint4 *)src,
                                                                   bytes / 16);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int tpm_cuda_copy2_launch(void *push_dst, const void *push_src, void *pull_dst,
                                     const void *pull_src, size_t bytes, int grid, void *stream) {
    grid += grid & 1;
    tpm_cuda::copy2_kernel<<<grid, 512, 0, (cudaStream_t)stream>>>(
        (uint4 *)push_dst, (const uint4 *)push_src, (uint4 *)pull_dst, (const uint4 *)pull_src, bytes / 16);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(probe, (tpm_cuda::copy_kernel))
