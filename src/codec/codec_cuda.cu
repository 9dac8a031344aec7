/*
 * codec_cuda.cu - standalone GPU encoder / decoder of the codec wire format
 * (codec_format.h: planar run of nblk blocks, codes then bf16 scales, zero
 * padding to 16 bytes). Four lanes per block of 32 domain values, through
 * QuadCodec (codec_cuda.h, the code the two-shot all-reduce fuses), the same
 * per-value arithmetic as the CPU reference, so the bytes equal
 * tpm_codec_quantize's (tests compare them with the golden vectors). No
 * synchronisation beyond the quad's shuffles: every lane writes only its
 * block's codes (lane 0 of the quad the scale); thread 0 the padding.
 */
#include "core/cuda_preload.h"
#include "codec/codec_cuda.h"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

constexpr int kThreads = 128;

/* Lane unit of block b, lane j: INT8/FP8 8 bytes, INT4 4, INT6 6 (only
 * 2-byte aligned: three 16-bit accesses). */
template <int FMT> __device__ __forceinline__ void put_lane(uint8_t *p, uint32_t lo, uint32_t hi) {
    if (FMT == TPM_FMT_INT4) {
        *(uint32_t *)p = lo;
    } else if (FMT == TPM_FMT_INT6) {
        uint16_t *q = (uint16_t *)p;
        q[0] = (uint16_t)lo, q[1] = (uint16_t)(lo >> 16), q[2] = (uint16_t)hi;
    } else {
        *(uint2 *)p = make_uint2(lo, hi);
    }
}

template <int FMT> __device__ __forceinline__ void get_lane(const uint8_t *p, uint32_t &lo, uint32_t &hi) {
    if (FMT == TPM_FMT_INT4) {
        lo = *(const uint32_t *)p, hi = 0;
    } else if (FMT == TPM_FMT_INT6) {
        const uint16_t *q = (const uint16_t *)p;
        lo = (uint32_t)q[0] | ((uint32_t)q[1] << 16), hi = q[2];
    } else {
        uint2 u = *(const uint2 *)p;
        lo = u.x, hi = u.y;
    }
}

template <int FMT>
__global__ void quantize_kernel(const float *dom, size_t nblk, uint8_t *wire) {
    using Q = QuadCodec<FMT>;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t b = tid >> 2;
    const int j = (int)(tid & 3);
    if (tid == 0) {
        size_t used = nblk * (Q::kCodeBytes + TPM_CODEC_SCALE_BYTES);
        for (size_t i = used; i < tpm_fmt_wire_bytes(FMT, nblk); i++) wire[i] = 0;
    }
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (b < nblk) {
        const float4 *src = (const float4 *)(dom + b * 32 + 8 * j);
        float4 x = src[0], y = src[1];
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
        v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    }
    uint32_t lo, hi;
    const uint16_t sb = Q::quant(v, j, lo, hi); /* every lane: shuffles */
    if (b >= nblk) return;
    put_lane<FMT>(wire + b * Q::kCodeBytes + (size_t)j * Q::kLaneBytes, lo, hi);
    if (j == 0)
        tpm_codec_put_scale(wire + tpm_fmt_scale_offset(FMT, nblk) + b * TPM_CODEC_SCALE_BYTES, sb);
}

template <int FMT>
__global__ void dequantize_kernel(const uint8_t *wire, size_t nblk, float *dom) {
    using Q = QuadCodec<FMT>;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t b = tid >> 2;
    const int j = (int)(tid & 3);
    if (b >= nblk) return; /* no shuffles in the decoder */
    uint32_t lo, hi;
    get_lane<FMT>(wire + b * Q::kCodeBytes + (size_t)j * Q::kLaneBytes, lo, hi);
    const uint16_t sb =
        tpm_codec_get_scale(wire + tpm_fmt_scale_offset(FMT, nblk) + b * TPM_CODEC_SCALE_BYTES);
    float v[8];
    Q::dequant(lo, hi, sb, v);
    float4 *dst = (float4 *)(dom + b * 32 + 8 * j);
    dst[0] = make_float4(v[0], v[1], v[2], v[3]);
    dst[1] = make_float4(v[4], v[5], v[6], v[7]);
}

int grid_for(size_t nblk) { return (int)((4 * nblk + kThreads - 1) / kThreads); }

} /* namespace */
} /* namespace tpm_cuda */

extern "C" int tpm_cuda_codec_quantize(tpm_codec c, const float *dom, size_t nblk, uint8_t *wire,
                                       void *stream) {
    using namespace tpm_cuda;
    cudaStream_t s = (cudaStream_t)stream;
    int g = grid_for(nblk) > 0 ? grid_for(nblk) : 1;
    switch (tpm_codec_fmt((int)c)) {
    case TPM_FMT_INT8: quantize_kernel<TPM_FMT_INT8><<<g, kThreads, 0, s>>>(dom, nblk, wire); break;
    case TPM_FMT_INT6: quantize_kernel<TPM_FMT_INT6><<<g, kThreads, 0, s>>>(dom, nblk, wire); break;
    case TPM_FMT_INT4: quantize_kernel<TPM_FMT_INT4><<<g, kThreads, 0, s>>>(dom, nblk, wire); break;
    case TPM_FMT_FP8: quantize_kernel<TPM_FMT_FP8><<<g, kThreads, 0, s>>>(dom, nblk, wire); break;
    default: return -1;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int tpm_cuda_codec_dequantize(tpm_codec c, const uint8_t *wire, size_t nblk, float *dom,
                                         void *stream) {
    using namespace tpm_cuda;
    cudaStream_t s = (cudaStream_t)stream;
    int g = grid_for(nblk) > 0 ? grid_for(nblk) : 1;
    switch (tpm_codec_fmt((int)c)) {
    case TPM_FMT_INT8: dequantize_kernel<TPM_FMT_INT8><<<g, kThreads, 0, s>>>(wire, nblk, dom); break;
    case TPM_FMT_INT6: dequantize_kernel<TPM_FMT_INT6><<<g, kThreads, 0, s>>>(wire, nblk, dom); break;
    case TPM_FMT_INT4: dequantize_kernel<TPM_FMT_INT4><<<g, kThreads, 0, s>>>(wire, nblk, dom); break;
    case TPM_FMT_FP8: dequantize_kernel<TPM_FMT_FP8><<<g, kThreads, 0, s>>>(wire, nblk, dom); break;
    default: return -1;
    }
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(codec, (tpm_cuda::quantize_kernel<TPM_FMT_INT8>))
