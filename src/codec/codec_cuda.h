/*
 * codec_cuda.h - GPU side of the block codecs.
 *
 * Host part (plain C): launchers of the standalone GPU encoder/decoder that
 * write / read exactly the wire format of the CPU reference (codec.h), so
 * tests can compare bytes with tpm_codec_quantize and the golden vectors.
 *
 * Device part (CUDA only): BlockCodec<C>, the per-block quantizer used by
 * the encoders and fused into the two-shot all-reduce. One thread owns one
 * block of 32 domain values and calls the same per-block arithmetic as the
 * CPU reference, so every code, scale and dequantized value has the same
 * bits (the build uses --fmad=false, IEEE division and no fast math).
 */
#ifndef TPM_CODEC_CUDA_H
#define TPM_CODEC_CUDA_H

#include "tpmoe.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Quantize nblk blocks of a device domain array (nblk*32 floats) into the
 * device wire buffer (tpm_codec_wire_bytes(c, nblk) bytes). 0 on success. */
int tpm_cuda_codec_quantize(tpm_codec c, const float *dom, size_t nblk, uint8_t *wire,
                            void *stream);
/* Inverse: wire -> nblk*32 floats. */
int tpm_cuda_codec_dequantize(tpm_codec c, const uint8_t *wire, size_t nblk, float *dom,
                              void *stream);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include "numeric.h"

namespace tpm_cuda {

/* Codes of one block held in registers: up to 32 bytes. */
struct Codes {
    uint32_t w[8];
};

/* MARK: 32-point Walsh-Hadamard (orthonormal: scaled by 1/sqrt(32)) */
__device__ __forceinline__ void wht32(float *v) {
#pragma unroll
    for (int h = 1; h < 32; h <<= 1) {
#pragma unroll
        for (int i = 0; i < 32; i++) {
            if (i & h) continue;
            float a = v[i], b = v[i + h];
            v[i] = a + b;
            v[i + h] = a - b;
        }
    }
    const float s = 0.17677669529663687f; /* 1/sqrt(32) */
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = v[i] * s;
}

/* MARK: per-codec block quantizers */
template <int C> struct BlockCodec;

/* Symmetric integer codec with `Q` = 2^(bits-1): scale = signed absmax / -Q,
 * code = clamp(rint(x / scale), -Q, Q-1) + Q. */
template <int BITS> struct IntCodec {
    static constexpr int kBits = BITS;
    static constexpr int kCodeBytes = 32 * BITS / 8;
    static constexpr int kScaleBytes = 4;
    static constexpr int kQ = 1 << (BITS - 1);

    static __device__ __forceinline__ float quant(const float *v, Codes &c) {
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; i++)
            if (fabsf(v[i]) > fabsf(m)) m = v[i];
        float scale = m / (float)-kQ;
#pragma unroll
        for (int k = 0; k < 8; k++) c.w[k] = 0;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            float q = scale != 0.0f ? rintf(v[i] / scale) : 0.0f;
            q = fminf(fmaxf(q, (float)-kQ), (float)(kQ - 1));
            uint32_t u = (uint32_t)((int)q + kQ);
            int bit = i * BITS;
            c.w[bit / 32] |= u << (bit % 32);
            if ((bit % 32) + BITS > 32) c.w[bit / 32 + 1] |= u >> (32 - bit % 32);
        }
        return scale;
    }

    static __device__ __forceinline__ void dequant(const Codes &c, float scale, float *v) {
#pragma unroll
        for (int i = 0; i < 32; i++) {
            int bit = i * BITS;
            uint32_t u = c.w[bit / 32] >> (bit % 32);
            if ((bit % 32) + BITS > 32) u |= c.w[bit / 32 + 1] << (32 - bit % 32);
            u &= (1u << BITS) - 1u;
            v[i] = (float)((int)u - kQ) * scale;
        }
    }
};

/* e4m3 (no inf, max 448): round to nearest even, saturate. */
__device__ __forceinline__ uint32_t f32_to_e4m3(float x) {
    uint32_t u = __float_as_uint(x), sign = (u >> 24) & 0x80u;
    float a = fabsf(x);
    if (!(a == a)) return sign | 0x7fu;
    if (a >= 448.0f) return sign | 0x7eu;
    if (a < 0.015625f) { /* subnormal: multiples of 2^-9 */
        uint32_t m = (uint32_t)rintf(a * 512.0f);
        return sign | m; /* m == 8 is the smallest normal, encoded the same */
    }
    uint32_t b = __float_as_uint(a);
    uint32_t r = b + 0x7ffffu + ((b >> 20) & 1u);
    uint32_t e = (r >> 23) - 120u, m = (r >> 20) & 7u;
    uint32_t code = (e << 3) | m;
    return sign | (code > 0x7eu ? 0x7eu : code);
}

__device__ __forceinline__ float e4m3_to_f32(uint32_t c) {
    uint32_t e = (c >> 3) & 15u, m = c & 7u;
    float a = e == 0 ? (float)m * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (c & 0x80u) ? -a : a;
}

struct Fp8Codec {
    static constexpr int kBits = 8;
    static constexpr int kCodeBytes = 32;
    static constexpr int kScaleBytes = 4;
    static __device__ __forceinline__ float quant(const float *v, Codes &c) {
        float m = 0.0f;
#pragma unroll
        for (int i = 0; i < 32; i++) m = fmaxf(m, fabsf(v[i]));
        float scale = m / 448.0f;
#pragma unroll
        for (int k = 0; k < 8; k++) c.w[k] = 0;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            uint32_t q = scale != 0.0f ? f32_to_e4m3(v[i] / scale) : 0u;
            c.w[i / 4] |= q << (8 * (i % 4));
        }
        return scale;
    }
    static __device__ __forceinline__ void dequant(const Codes &c, float scale, float *v) {
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = e4m3_to_f32((c.w[i / 4] >> (8 * (i % 4))) & 0xffu) * scale;
    }
};

template <> struct BlockCodec<TPM_CODEC_INT8> : IntCodec<8> { static constexpr bool kRotate = false; };
template <> struct BlockCodec<TPM_CODEC_INT6> : IntCodec<6> { static constexpr bool kRotate = false; };
template <> struct BlockCodec<TPM_CODEC_INT4> : IntCodec<4> { static constexpr bool kRotate = false; };
template <> struct BlockCodec<TPM_CODEC_FP8> : Fp8Codec { static constexpr bool kRotate = false; };
template <> struct BlockCodec<TPM_CODEC_INT4_H> : IntCodec<4> { static constexpr bool kRotate = true; };
template <> struct BlockCodec<TPM_CODEC_INT6_H> : IntCodec<6> { static constexpr bool kRotate = true; };

} /* namespace tpm_cuda */
#endif /* __CUDACC__ */
#endif /* TPM_CODEC_CUDA_H */
