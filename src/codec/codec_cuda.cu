/*
 * codec_cuda.cu - standalone GPU encoder / decoder of the codec wire format
 * (codec_format.h: planar run of nblk blocks, codes then bf16 scales, zero
 * padding to 16 bytes). One thread per block of 32 domain values, through
 * BlockCodec (codec_cuda.h), the same per-value arithmetic as the CPU
 * reference, so the bytes equal tpm_codec_quantize's (tests compare them
 * with the golden vectors). No synchronisation: every thread writes only
 * its block's codes and scale; thread 0 of block 0 writes the padding.
 */
#include "codec/codec_cuda.h"

#include <cuda_runtime.h>

namespace tpm_cuda {
namespace {

constexpr int kThreads = 128;

template <int FMT>
__global__ void quantize_kernel(const float *dom, size_t nblk, uint8_t *wire) {
    using F = FmtCodec<FMT>;
    const size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b == 0) {
        size_t used = nblk * (F::kCodeBytes + TPM_CODEC_SCALE_BYTES);
        for (size_t i = used; i < tpm_fmt_wire_bytes(FMT, nblk); i++) wire[i] = 0;
    }
    if (b >= nblk) return;
    float v[32];
    const float4 *src = (const float4 *)(dom + b * 32);
#pragma unroll
    for (int q = 0; q < 8; q++) {
        float4 x = src[q];
        v[4 * q] = x.x, v[4 * q + 1] = x.y, v[4 * q + 2] = x.z, v[4 * q + 3] = x.w;
    }
    Codes c;
    uint16_t sb = F::quant(v, c);
    uint32_t *dst = (uint32_t *)(wire + b * F::kCodeBytes); /* 8-byte aligned at least */
#pragma unroll
    for (int k = 0; k < F::kCodeBytes / 4; k++) dst[k] = c.w[k];
    tpm_codec_put_scale(wire + tpm_fmt_scale_offset(FMT, nblk) + b * TPM_CODEC_SCALE_BYTES, sb);
}

template <int FMT>
__global__ void dequantize_kernel(const uint8_t *wire, size_t nblk, float *dom) {
    using F = FmtCodec<FMT>;
    const size_t b = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    Codes c;
    const uint32_t *src = (const uint32_t *)(wire + b * F::kCodeBytes);
#pragma unroll
    for (int k = 0; k < 8; k++) c.w[k] = k < F::kCodeBytes / 4 ? src[k] : 0u;
    uint16_t sb =
        tpm_codec_get_scale(wire + tpm_fmt_scale_offset(FMT, nblk) + b * TPM_CODEC_SCALE_BYTES);
    float v[32];
    F::dequant(c, sb, v);
    float4 *dst = (float4 *)(dom + b * 32);
#pragma unroll
    for (int q = 0; q < 8; q++) dst[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
}

int grid_for(size_t nblk) { return (int)((nblk + kThreads - 1) / kThreads); }

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
