/*
 * codec_format.h - the wire format of the block codecs, declared once for the
 * CPU reference (C11) and the CUDA kernels (C++): named constants with static
 * asserts on their relations, and the per-block scalar functions (scale,
 * quantize, dequantize, INT6/INT4 packing, e4m3 conversions, the 32-point
 * Walsh-Hadamard transform). Both sides call these functions, so the CPU and
 * GPU encoders write identical bytes. docs/codecs.md explains the format.
 *
 * A run of nblk blocks on the wire ("planar"):
 *   [nblk * code_bytes codes][nblk * 2 bytes bf16 scales][zero pad to 16 B]
 * Floating point: every operation is written out in a fixed order; compile
 * with -ffp-contract=off (C) / --fmad=false (CUDA), no fast-math, no FTZ.
 */
#ifndef TPM_CODEC_FORMAT_H
#define TPM_CODEC_FORMAT_H

#include "../core/numeric.h"

#include <stddef.h>
#include <stdint.h>
#if !defined(__CUDACC__)
#include <math.h> /* rintf */
#endif

#if defined(__cplusplus)
#define TPM_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define TPM_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* MARK: constants */
#define TPM_CODEC_BLOCK 32        /* values per block */
#define TPM_CODEC_SCALE_BYTES 2   /* one bf16 scale per block */
#define TPM_CODEC_WIRE_ALIGN 16   /* a run of blocks is padded to this */
#define TPM_CODEC_SCALE_POISON 0x7FC0u /* bf16 quiet NaN: block had NaN/Inf */
#define TPM_CODEC_NAN_BITS 0x7FC00000u /* what a poisoned block decodes to */

/* Wire formats. The rotated codecs (INT4_H, INT6_H) use the INT4 / INT6
 * format on rotated values. Numbering is internal (not the tpm_codec enum). */
#define TPM_FMT_NONE 0
#define TPM_FMT_INT8 1
#define TPM_FMT_INT6 2
#define TPM_FMT_INT4 3
#define TPM_FMT_FP8 4

#define TPM_INT8_BITS 8
#define TPM_INT8_CODE_BYTES 32
#define TPM_INT8_QNEG 128 /* most negative code is -QNEG, most positive QNEG-1 */
#define TPM_INT8_BIAS 128

#define TPM_INT6_BITS 6
#define TPM_INT6_CODE_BYTES 24
#define TPM_INT6_QNEG 32
#define TPM_INT6_BIAS 32

#define TPM_INT4_BITS 4
#define TPM_INT4_CODE_BYTES 16
#define TPM_INT4_QNEG 8
#define TPM_INT4_BIAS 8

#define TPM_FP8_BITS 8
#define TPM_FP8_CODE_BYTES 32
#define TPM_FP8_MAX 448.0f      /* largest finite e4m3 */
#define TPM_FP8_MAX_CODE 0x7Eu  /* +448; 0xFE is -448 */
#define TPM_FP8_NAN_CODE 0x7Fu  /* never written for finite input */

#define TPM_HADAMARD_SCALE 0.17677669529663688f /* 1/sqrt(32) */

TPM_STATIC_ASSERT(TPM_INT8_CODE_BYTES * 8 == TPM_CODEC_BLOCK * TPM_INT8_BITS, "INT8 code bytes");
TPM_STATIC_ASSERT(TPM_INT6_CODE_BYTES * 8 == TPM_CODEC_BLOCK * TPM_INT6_BITS, "INT6 code bytes");
TPM_STATIC_ASSERT(TPM_INT4_CODE_BYTES * 8 == TPM_CODEC_BLOCK * TPM_INT4_BITS, "INT4 code bytes");
TPM_STATIC_ASSERT(TPM_FP8_CODE_BYTES * 8 == TPM_CODEC_BLOCK * TPM_FP8_BITS, "FP8 code bytes");
TPM_STATIC_ASSERT(TPM_INT8_QNEG == 1 << (TPM_INT8_BITS - 1) && TPM_INT8_BIAS == TPM_INT8_QNEG, "INT8 range");
TPM_STATIC_ASSERT(TPM_INT6_QNEG == 1 << (TPM_INT6_BITS - 1) && TPM_INT6_BIAS == TPM_INT6_QNEG, "INT6 range");
TPM_STATIC_ASSERT(TPM_INT4_QNEG == 1 << (TPM_INT4_BITS - 1) && TPM_INT4_BIAS == TPM_INT4_QNEG, "INT4 range");
TPM_STATIC_ASSERT(TPM_CODEC_BLOCK == 32, "the Hadamard transform and INT6 packing assume 32");
TPM_STATIC_ASSERT(TPM_CODEC_BLOCK % 4 == 0, "INT6 packs 4 codes into 3 bytes");
TPM_STATIC_ASSERT(TPM_CODEC_WIRE_ALIGN % TPM_CODEC_SCALE_BYTES == 0, "scales stay aligned");
TPM_STATIC_ASSERT(TPM_INT6_CODE_BYTES % TPM_CODEC_SCALE_BYTES == 0, "INT6 scales start aligned");

/* MARK: per-format parameters */
/* Wire format of a tpm_codec value (passed as int so CUDA code can use it). */
TPM_HD int tpm_codec_fmt(int codec) {
    switch (codec) {
    case 1: return TPM_FMT_INT8;  /* TPM_CODEC_INT8 */
    case 2: return TPM_FMT_INT6;  /* TPM_CODEC_INT6 */
    case 3: return TPM_FMT_INT4;  /* TPM_CODEC_INT4 */
    case 4: return TPM_FMT_FP8;   /* TPM_CODEC_FP8 */
    case 5: return TPM_FMT_INT4;  /* TPM_CODEC_INT4_H */
    case 6: return TPM_FMT_INT6;  /* TPM_CODEC_INT6_H */
    default: return TPM_FMT_NONE;
    }
}

/* Whether a tpm_codec value applies the Hadamard rotation. */
TPM_HD int tpm_codec_fmt_rotates(int codec) { return codec == 5 || codec == 6; }

TPM_HD int tpm_fmt_code_bytes(int fmt) {
    return fmt == TPM_FMT_INT8 ? TPM_INT8_CODE_BYTES
         : fmt == TPM_FMT_INT6 ? TPM_INT6_CODE_BYTES
         : fmt == TPM_FMT_INT4 ? TPM_INT4_CODE_BYTES
         : fmt == TPM_FMT_FP8  ? TPM_FP8_CODE_BYTES : 0;
}

/* -QNEG (most negative integer code) of an INT format; 0 for FP8. */
TPM_HD int tpm_fmt_qneg(int fmt) {
    return fmt == TPM_FMT_INT8 ? TPM_INT8_QNEG
         : fmt == TPM_FMT_INT6 ? TPM_INT6_QNEG
         : fmt == TPM_FMT_INT4 ? TPM_INT4_QNEG : 0;
}

/* The (unpacked) code of a zero value: the bias for INT, 0 for FP8. */
TPM_HD uint8_t tpm_fmt_zero_code(int fmt) { return (uint8_t)tpm_fmt_qneg(fmt); }

/* Bytes of a run of nblk blocks: codes + scales, padded to 16 bytes. */
TPM_HD size_t tpm_fmt_wire_bytes(int fmt, size_t nblk) {
    size_t cb = (size_t)tpm_fmt_code_bytes(fmt);
    if (cb == 0) return 0;
    size_t raw = nblk * (cb + TPM_CODEC_SCALE_BYTES);
    return (raw + TPM_CODEC_WIRE_ALIGN - 1) / TPM_CODEC_WIRE_ALIGN * TPM_CODEC_WIRE_ALIGN;
}

/* Offset of the scales in a run of nblk blocks (they follow all codes). */
TPM_HD size_t tpm_fmt_scale_offset(int fmt, size_t nblk) {
    return nblk * (size_t)tpm_fmt_code_bytes(fmt);
}

/* Scales are stored little-endian. */
TPM_HD void tpm_codec_put_scale(uint8_t *p, uint16_t sb) {
    p[0] = (uint8_t)(sb & 0xffu);
    p[1] = (uint8_t)(sb >> 8);
}

TPM_HD uint16_t tpm_codec_get_scale(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

/* MARK: e4m3 */
/* f32 -> e4m3 (bias 7, no Inf, 0x7F/0xFF NaN), round to nearest even,
 * saturating: |f| >= 448 (Inf included) gives +-448. NaN gives 0x7F|sign.
 * Same results as CUDA's cvt.rn.satfinite.e4m3x2.f32. */
TPM_HD uint8_t tpm_f32_to_e4m3(float f) {
    uint32_t u = tpm_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint8_t)(sign | TPM_FP8_NAN_CODE);
    if (a >= 0x43e00000u) return (uint8_t)(sign | TPM_FP8_MAX_CODE); /* >= 448 */
    if (a < 0x3c800000u) { /* below 2^-6: subnormal result, units of 2^-9 */
        if (a <= 0x3a800000u) return sign; /* <= 2^-10 (half the smallest): 0 */
        uint32_t e = a >> 23;                       /* 117..120 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 141u - e;                  /* 21..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++; /* may carry to 0x08 */
        return (uint8_t)(sign | r);
    }
    uint32_t r = a - 0x3c000000u; /* rebias 127 -> 7 (120 << 23) */
    r += 0x7ffffu + ((r >> 20) & 1u);
    return (uint8_t)(sign | (r >> 20)); /* < 448 so at most 0x7E */
}

TPM_HD float tpm_e4m3_to_f32(uint8_t c) {
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t e = (c >> 3) & 0xfu;
    uint32_t m = c & 7u;
    if (e == 15u && m == 7u) return tpm_bits_f32(sign | TPM_CODEC_NAN_BITS);
    if (e == 0u) { /* subnormal: m * 2^-9, exact */
        float v = (float)m * 0.001953125f;
        return sign ? -v : v;
    }
    return tpm_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

/* MARK: Hadamard */
/* In-place normalized 32-point Walsh-Hadamard transform (its own inverse up
 * to rounding). Butterflies h = 1,2,4,8,16 in this order: for i with
 * (i & h) == 0: x[i], x[i+h] = x[i] + x[i+h], x[i] - x[i+h]; then every
 * value times 1/sqrt(32). A warp does the same with lane i and partner i^h
 * (lane with (i & h) == 0 computes mine + partner, the other partner - mine). */
TPM_HD void tpm_hadamard32(float *x) {
    for (int h = 1; h < TPM_CODEC_BLOCK; h <<= 1) {
        for (int i = 0; i < TPM_CODEC_BLOCK; i++) {
            if (i & h) continue;
            float lo = x[i], hi = x[i + h];
            x[i] = lo + hi;
            x[i + h] = lo - hi;
        }
    }
    for (int i = 0; i < TPM_CODEC_BLOCK; i++) x[i] = x[i] * TPM_HADAMARD_SCALE;
}

/* MARK: scale */
TPM_HD int tpm_codec_is_finite(float v) {
    return (tpm_f32_bits(v) & 0x7f800000u) != 0x7f800000u;
}

/* Whether |v| beats the running extreme |best| (strictly: on ties the lower
 * index, scanned first, wins). A parallel reduction keeps (value, index)
 * pairs and on equal magnitude keeps the lower index. */
TPM_HD int tpm_codec_amax_better(float v, float best) {
    return (tpm_f32_bits(v) & 0x7fffffffu) > (tpm_f32_bits(best) & 0x7fffffffu);
}

/* The bf16 scale bits for a finite block whose extreme (signed) value is m,
 * and the reciprocal used to quantize. INT: s = bf16(m / -QNEG), so m maps
 * to the most negative code; FP8: s = bf16(|m| / 448). A scale that rounds
 * to zero or to a bf16 subnormal is flushed to 0 (inv = 0): the block is
 * stored as zeros (1/s would overflow). */
TPM_HD uint16_t tpm_codec_scale(int fmt, float m, float *inv) {
    float s;
    if (fmt == TPM_FMT_FP8) {
        float am = tpm_bits_f32(tpm_f32_bits(m) & 0x7fffffffu);
        s = am / TPM_FP8_MAX;
    } else {
        s = m / (float)(-tpm_fmt_qneg(fmt));
    }
    uint16_t sb = tpm_f32_to_bf16(s);
    if ((sb & 0x7f80u) == 0) { /* zero or subnormal */
        *inv = 0.0f;
        return 0;
    }
    *inv = 1.0f / tpm_bf16_to_f32(sb);
    return sb;
}

/* MARK: quantize / dequantize one value */
/* Unpacked code of x given inv = 1/scale: INT rint(x*inv) clamped and biased
 * (round half to even), FP8 e4m3(x*inv). */
TPM_HD uint8_t tpm_codec_quantize_value(int fmt, float x, float inv) {
    float y = x * inv;
    if (fmt == TPM_FMT_FP8) return tpm_f32_to_e4m3(y);
    int qneg = tpm_fmt_qneg(fmt);
    float q = rintf(y);
    float lo = (float)(-qneg), hi = (float)(qneg - 1);
    q = q < lo ? lo : q;
    q = q > hi ? hi : q;
    return (uint8_t)((int)q + qneg);
}

/* Value of an unpacked code with scale s (finite): one fp32 multiply. */
TPM_HD float tpm_codec_dequantize_value(int fmt, uint8_t code, float s) {
    if (fmt == TPM_FMT_FP8) return tpm_e4m3_to_f32(code) * s;
    return (float)((int)code - tpm_fmt_qneg(fmt)) * s;
}

TPM_HD int tpm_codec_scale_poisoned(uint16_t sb) { return (sb & 0x7f80u) == 0x7f80u; }

/* MARK: packing */
/* Pack 32 unpacked codes into the format's code bytes (INT8/FP8: as is;
 * INT6: a little-endian 192-bit stream, code k at bits [6k, 6k+6);
 * INT4: code 2i in the low nibble of byte i, 2i+1 in the high nibble). */
TPM_HD void tpm_codec_pack(int fmt, const uint8_t *c, uint8_t *out) {
    if (fmt == TPM_FMT_INT6) {
        for (int g = 0; g < TPM_CODEC_BLOCK / 4; g++) {
            const uint8_t *q = c + 4 * g;
            uint8_t *o = out + 3 * g;
            o[0] = (uint8_t)((q[0] & 63u) | (q[1] << 6));
            o[1] = (uint8_t)(((q[1] & 63u) >> 2) | (q[2] << 4));
            o[2] = (uint8_t)(((q[2] & 63u) >> 4) | (q[3] << 2));
        }
    } else if (fmt == TPM_FMT_INT4) {
        for (int i = 0; i < TPM_CODEC_BLOCK / 2; i++)
            out[i] = (uint8_t)((c[2 * i] & 15u) | (c[2 * i + 1] << 4));
    } else {
        for (int i = 0; i < TPM_CODEC_BLOCK; i++) out[i] = c[i];
    }
}

TPM_HD void tpm_codec_unpack(int fmt, const uint8_t *in, uint8_t *c) {
    if (fmt == TPM_FMT_INT6) {
        for (int g = 0; g < TPM_CODEC_BLOCK / 4; g++) {
            const uint8_t *b = in + 3 * g;
            uint8_t *q = c + 4 * g;
            q[0] = (uint8_t)(b[0] & 63u);
            q[1] = (uint8_t)((b[0] >> 6) | ((b[1] & 15u) << 2));
            q[2] = (uint8_t)((b[1] >> 4) | ((b[2] & 3u) << 4));
            q[3] = (uint8_t)(b[2] >> 2);
        }
    } else if (fmt == TPM_FMT_INT4) {
        for (int i = 0; i < TPM_CODEC_BLOCK / 2; i++) {
            c[2 * i] = (uint8_t)(in[i] & 15u);
            c[2 * i + 1] = (uint8_t)(in[i] >> 4);
        }
    } else {
        for (int i = 0; i < TPM_CODEC_BLOCK; i++) c[i] = in[i];
    }
}

/* MARK: one block */
/* Quantize the 32 values x of one block: packed codes into `codes`
 * (code_bytes), bf16 scale bits returned. A block with any NaN or Inf is
 * poisoned: scale TPM_CODEC_SCALE_POISON, all code bytes 0. */
TPM_HD uint16_t tpm_codec_quantize_block(int fmt, const float *x, uint8_t *codes) {
    uint8_t c[TPM_CODEC_BLOCK];
    float m = x[0];
    int finite = 1;
    for (int i = 0; i < TPM_CODEC_BLOCK; i++) {
        finite &= tpm_codec_is_finite(x[i]);
        if (tpm_codec_amax_better(x[i], m)) m = x[i];
    }
    if (!finite) {
        for (int i = 0; i < tpm_fmt_code_bytes(fmt); i++) codes[i] = 0;
        return (uint16_t)TPM_CODEC_SCALE_POISON;
    }
    float inv;
    uint16_t sb = tpm_codec_scale(fmt, m, &inv);
    for (int i = 0; i < TPM_CODEC_BLOCK; i++)
        c[i] = sb ? tpm_codec_quantize_value(fmt, x[i], inv) : tpm_fmt_zero_code(fmt);
    tpm_codec_pack(fmt, c, codes);
    return sb;
}

/* Dequantize one block: a poisoned scale (exponent all ones) gives 32
 * canonical quiet NaNs (0x7FC00000). */
TPM_HD void tpm_codec_dequantize_block(int fmt, const uint8_t *codes, uint16_t sb, float *x) {
    uint8_t c[TPM_CODEC_BLOCK];
    if (tpm_codec_scale_poisoned(sb)) {
        for (int i = 0; i < TPM_CODEC_BLOCK; i++) x[i] = tpm_bits_f32(TPM_CODEC_NAN_BITS);
        return;
    }
    float s = tpm_bf16_to_f32(sb);
    tpm_codec_unpack(fmt, codes, c);
    for (int i = 0; i < TPM_CODEC_BLOCK; i++) x[i] = tpm_codec_dequantize_value(fmt, c[i], s);
}

#endif /* TPM_CODEC_FORMAT_H */
