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
#include "codec/codec_format.h"

namespace tpm_cuda {

/* Codes of one block held in registers: up to 32 bytes, the packed code
 * bytes of codec_format.h read as little-endian words (INT8/FP8: byte i is
 * code i; INT6/INT4: code k at bits [k*bits, (k+1)*bits) of the stream). */
struct Codes {
    uint32_t w[8];
};

/* Per-block quantizer of wire format FMT: the arithmetic of
 * tpm_codec_quantize_block / tpm_codec_dequantize_block, value by value
 * through the same TPM_HD scalar functions, with the codes packed in
 * registers instead of a byte array (identical bytes). */
template <int FMT> struct FmtCodec {
    static constexpr int kBits = FMT == TPM_FMT_INT6 ? 6 : FMT == TPM_FMT_INT4 ? 4 : 8;
    static constexpr int kCodeBytes = 32 * kBits / 8;

    /* Returns the bf16 scale bits (TPM_CODEC_SCALE_POISON for NaN/Inf). */
    static __device__ __forceinline__ uint16_t quant(const float *v, Codes &c) {
        float m = v[0];
        int finite = 1;
#pragma unroll
        for (int i = 0; i < 32; i++) {
            finite &= tpm_codec_is_finite(v[i]);
            if (tpm_codec_amax_better(v[i], m)) m = v[i];
        }
#pragma unroll
        for (int k = 0; k < 8; k++) c.w[k] = 0;
        if (!finite) return (uint16_t)TPM_CODEC_SCALE_POISON;
        float inv;
        uint16_t sb = tpm_codec_scale(FMT, m, &inv);
#pragma unroll
        for (int i = 0; i < 32; i++) {
            uint32_t u = sb ? tpm_codec_quantize_value(FMT, v[i], inv) : tpm_fmt_zero_code(FMT);
            u &= (1u << kBits) - 1u;
            const int bit = i * kBits;
            c.w[bit / 32] |= u << (bit % 32);
            if ((bit % 32) + kBits > 32) c.w[bit / 32 + 1] |= u >> (32 - bit % 32);
        }
        return sb;
    }

    static __device__ __forceinline__ void dequant(const Codes &c, uint16_t sb, float *v) {
        if (tpm_codec_scale_poisoned(sb)) {
#pragma unroll
            for (int i = 0; i < 32; i++) v[i] = __uint_as_float(TPM_CODEC_NAN_BITS);
            return;
        }
        const float s = tpm_bf16_to_f32(sb);
#pragma unroll
        for (int i = 0; i < 32; i++) {
            const int bit = i * kBits;
            uint32_t u = c.w[bit / 32] >> (bit % 32);
            if ((bit % 32) + kBits > 32) u |= c.w[bit / 32 + 1] << (32 - bit % 32);
            u &= (1u << kBits) - 1u;
            v[i] = tpm_codec_dequantize_value(FMT, (uint8_t)u, s);
        }
    }
};

/* Per tpm_codec value: its wire format and whether it rotates. */
template <int C> struct BlockCodec : FmtCodec<TPM_FMT_NONE> {};
#define TPM_BLOCK_CODEC(C, FMT, ROT)                                                               \
    template <> struct BlockCodec<C> : FmtCodec<FMT> {                                             \
        static constexpr bool kRotate = ROT;                                                       \
    }
TPM_BLOCK_CODEC(TPM_CODEC_INT8, TPM_FMT_INT8, false);
TPM_BLOCK_CODEC(TPM_CODEC_INT6, TPM_FMT_INT6, false);
TPM_BLOCK_CODEC(TPM_CODEC_INT4, TPM_FMT_INT4, false);
TPM_BLOCK_CODEC(TPM_CODEC_FP8, TPM_FMT_FP8, false);
TPM_BLOCK_CODEC(TPM_CODEC_INT4_H, TPM_FMT_INT4, true);
TPM_BLOCK_CODEC(TPM_CODEC_INT6_H, TPM_FMT_INT6, true);
#undef TPM_BLOCK_CODEC

} /* namespace tpm_cuda */
#endif /* __CUDACC__ */
#endif /* TPM_CODEC_CUDA_H */
