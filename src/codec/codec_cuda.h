/*
 * codec_cuda.h - GPU side of the block codecs.
 *
 * Host part (plain C): launchers of the standalone GPU encoder/decoder that
 * write / read exactly the wire format of the CPU reference (codec.h), so
 * tests can compare bytes with tpm_codec_quantize and the golden vectors.
 *
 * Device part (CUDA only), two implementations of the same per-block
 * arithmetic as the CPU reference, so every code, scale and dequantized value
 * has the same bits (the build uses --fmad=false, IEEE division and no fast
 * math):
 *  - FmtCodec<FMT> / BlockCodec<C>: one thread owns one block of 32 domain
 *    values; fused into the two-shot all-reduce (its payload stores are
 *    16-byte units, which measured faster, see docs/allreduce_cuda.md);
 *    FastCodec<FMT> / FastBlockCodec<C>: the same bits for the INT formats
 *    without conversion-pipe instructions (the two-shot's variant 1, the
 *    default);
 *  - QuadCodec<FMT> + quad_hadamard: four lanes of a warp own one block (8
 *    values each, the extreme and the rotation through shuffles); used by
 *    the standalone encoders (golden-vector tests check its bytes).
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
#include "codec/codec_fast.h"
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

    static __device__ __forceinline__ void dequant_raw(const Codes &c, uint16_t sb, float *v) { dequant(c, sb, v); }
    static __device__ __forceinline__ uint16_t quant_lz(const float *v, Codes &c) { return quant(v, c); }
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

/* FastCodec<FMT>: the same bytes and values as FmtCodec<FMT> for the INT
 * formats, with no conversion-pipe instructions (F2I/I2F/FRND run at a
 * quarter of the FP32 rate on sm_90) and fewer instructions per value: the
 * arithmetic of codec_fast.h (its top comment has each trick and why it is
 * exact; tests/test_codec_fast.c checks it against the CPU reference).
 * dequant_raw leaves a poisoned block's values NaN or Inf without writing
 * the canonical NaN: for sums (which then poison the next quantization) and
 * for GroupIO::store_codec, which writes the canonical NaN itself.
 * FP8 keeps FmtCodec (its e4m3 conversion has no such shortcut). */
template <int FMT> struct FastCodec : FmtCodec<FMT> {};
/* 0x4B000000, the exponent byte under which tpm_fast_dequant_int_mg's PRMT
 * puts a code byte. From constant memory, not as a literal: with the
 * literal, ptxas under the two-shots' register pressure coded it as the
 * PRMT's immediate and re-made the selector in a register before every
 * PRMT (an IMAD.U32 per decoded value, 32 per group and decode:
 * bench/results/r67); a value it cannot fold stays in one register and the
 * selectors become immediates. */
static __constant__ uint32_t tpm_cuda_magic = 0x4B000000u;

template <int FMT> struct FastIntCodec {
    static constexpr int kBits = FMT == TPM_FMT_INT6 ? 6 : FMT == TPM_FMT_INT4 ? 4 : 8;
    static constexpr int kCodeBytes = 32 * kBits / 8;

    static __device__ __forceinline__ uint16_t quant(const float *v, Codes &c) {
        return tpm_fast_quant_block(FMT, 0, v, c.w);
    }
    /* Values whose low 5 bits are zero (16-bit inputs widened): no tie scan. */
    static __device__ __forceinline__ uint16_t quant_lz(const float *v, Codes &c) {
        return tpm_fast_quant_block(FMT, 1, v, c.w);
    }
    static __device__ __forceinline__ void dequant_raw(const Codes &c, uint16_t sb, float *v) {
        tpm_fast_dequant_int_mg(FMT, c.w, tpm_bf16_to_f32(sb), v, tpm_cuda_magic);
    }
    static __device__ __forceinline__ void dequant(const Codes &c, uint16_t sb, float *v) {
        dequant_raw(c, sb, v);
        if (tpm_codec_scale_poisoned(sb)) {
#pragma unroll
            for (int i = 0; i < 32; i++) v[i] = __uint_as_float(TPM_CODEC_NAN_BITS);
        }
    }
};
template <> struct FastCodec<TPM_FMT_INT8> : FastIntCodec<TPM_FMT_INT8> {};
template <> struct FastCodec<TPM_FMT_INT6> : FastIntCodec<TPM_FMT_INT6> {};
template <> struct FastCodec<TPM_FMT_INT4> : FastIntCodec<TPM_FMT_INT4> {};

/* MARK: quad codec (4 lanes per block)
 * Four consecutive lanes of a warp (a "quad", lanes 4q..4q+3) own one block:
 * lane j = lane & 3 holds values 8j..8j+7 in v[0..7]. Same arithmetic as
 * tpm_codec_quantize_block, value by value, spread over the quad:
 *  - finiteness: AND over the quad (two xor shuffles);
 *  - extreme: each lane scans its 8 values in index order (strictly larger
 *    magnitude wins, so the lowest index wins ties), then two xor shuffles
 *    keep (magnitude, index) pairs, larger magnitude first, on equal
 *    magnitude the lower index: the CPU's first maximum;
 *  - the scale and every code come from the same TPM_HD functions.
 * A lane's 8 codes are 8 * bits = 64 / 48 / 32 bits starting at byte
 * bits*j of the block's packed codes (byte-aligned), returned as lo (bytes
 * 0..3) and hi (bytes 4..7; INT6 uses 2 of them, INT4 none).
 * Every lane of the warp must call these (full-mask shuffles); lanes whose
 * block is out of range compute on zeros and do not store. */
template <int FMT> struct QuadCodec {
    static constexpr int kBits = FMT == TPM_FMT_INT6 ? 6 : FMT == TPM_FMT_INT4 ? 4 : 8;
    static constexpr int kLaneBytes = kBits; /* 8 codes of kBits bits */
    static constexpr int kCodeBytes = 4 * kLaneBytes;

    static __device__ __forceinline__ uint16_t quant(const float *v, int j, uint32_t &lo,
                                                      uint32_t &hi) {
        float m = v[0];
        int mi = 0, finite = 1;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            finite &= tpm_codec_is_finite(v[k]);
            if (tpm_codec_amax_better(v[k], m)) m = v[k], mi = k;
        }
        int idx = 8 * j + mi;
#pragma unroll
        for (int o = 1; o <= 2; o <<= 1) {
            finite &= __shfl_xor_sync(0xffffffffu, finite, o);
            const float pm = __shfl_xor_sync(0xffffffffu, m, o);
            const int pi = __shfl_xor_sync(0xffffffffu, idx, o);
            const uint32_t a = __float_as_uint(m) & 0x7fffffffu, b = __float_as_uint(pm) & 0x7fffffffu;
            if (b > a || (b == a && pi < idx)) m = pm, idx = pi;
        }
        lo = hi = 0;
        if (!finite) return (uint16_t)TPM_CODEC_SCALE_POISON;
        float inv;
        const uint16_t sb = tpm_codec_scale(FMT, m, &inv);
        uint64_t w = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            uint32_t u = sb ? tpm_codec_quantize_value(FMT, v[k], inv) : tpm_fmt_zero_code(FMT);
            w |= (uint64_t)(u & ((1u << kBits) - 1u)) << (k * kBits);
        }
        lo = (uint32_t)w;
        hi = (uint32_t)(w >> 32);
        return sb;
    }

    static __device__ __forceinline__ void dequant(uint32_t lo, uint32_t hi, uint16_t sb, float *v) {
        if (tpm_codec_scale_poisoned(sb)) {
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = __uint_as_float(TPM_CODEC_NAN_BITS);
            return;
        }
        const float s = tpm_bf16_to_f32(sb);
        const uint64_t w = (uint64_t)lo | ((uint64_t)hi << 32);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const uint32_t u = (uint32_t)(w >> (k * kBits)) & ((1u << kBits) - 1u);
            v[k] = tpm_codec_dequantize_value(FMT, (uint8_t)u, s);
        }
    }
};

/* tpm_hadamard32 over a quad: stages h = 1, 2, 4 inside the lane, h = 8, 16
 * with the lane j ^ 1, j ^ 2 (the lane whose bit is clear computes
 * mine + partner, the other partner - mine: the CPU's lo + hi / lo - hi),
 * in the order 1, 2, 4, 8, 16, then every value times 1/sqrt(32). */
__device__ __forceinline__ void quad_hadamard(float *v, int j) {
#pragma unroll
    for (int h = 1; h < 8; h <<= 1) {
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (k & h) continue;
            const float lo = v[k], hi = v[k + h];
            v[k] = lo + hi;
            v[k + h] = lo - hi;
        }
    }
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {
        const bool upper = (j & o) != 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float p = __shfl_xor_sync(0xffffffffu, v[k], o);
            v[k] = upper ? p - v[k] : v[k] + p;
        }
    }
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = v[k] * TPM_HADAMARD_SCALE;
}

/* Wire format of a tpm_codec value, usable as a template argument. */
constexpr int tpm_codec_fmt_c(int c) {
    return c == TPM_CODEC_INT8 ? TPM_FMT_INT8
         : c == TPM_CODEC_INT6 || c == TPM_CODEC_INT6_H ? TPM_FMT_INT6
         : c == TPM_CODEC_INT4 || c == TPM_CODEC_INT4_H ? TPM_FMT_INT4
         : c == TPM_CODEC_FP8 ? TPM_FMT_FP8 : TPM_FMT_NONE;
}

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

/* The same per tpm_codec value with FastCodec's arithmetic (identical bits). */
template <int C> struct FastBlockCodec : FastCodec<tpm_codec_fmt_c(C)> {
    static constexpr bool kRotate = C == TPM_CODEC_INT4_H || C == TPM_CODEC_INT6_H;
};

} /* namespace tpm_cuda */
#endif /* __CUDACC__ */
#endif /* TPM_CODEC_CUDA_H */
