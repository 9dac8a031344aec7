/*
 * codec_fast.h - the INT codecs' per-block arithmetic (INT8 / INT6 / INT4)
 * in fewer instructions than codec_format.h's value-by-value functions, with
 * the same bits. Valid C11 and CUDA C++, like codec_format.h: the GPU
 * two-shots run these functions (codec_cuda.h, FastIntCodec), and
 * tests/test_codec_fast.c checks them against the CPU reference on every
 * kind of block (ties, zeros of both signs, NaN/Inf, subnormals, extremes)
 * in CI, where no GPU exists.
 *
 * Why: Nsight Compute put one rank's INT4 two-shot at ~2750 instructions per
 * group for scatter + reduce + gather (bench/results/r57), about a third of
 * them in the extreme scan (4 per value), the clamp and pack (3 per value),
 * the unpack (2-3 per value) and the poison fill. The tricks, each exact:
 *  - extreme: one signed and one unsigned integer max over the raw bits
 *    (2 per value instead of 4). The signed max is the largest positive
 *    value (if any has sign 0), the unsigned max the negative value of
 *    largest magnitude (if any has sign 1). The larger magnitude of the two
 *    is the extreme; only a tie between +a and -a needs the first index, and
 *    takes a scan for the first |v[i]| == a (2 per value; a two-shot's sums
 *    tie in ~3% of blocks, enough that r67 found 63% of warps in it). A NaN
 *    or Inf of either sign wins its max, so the block is finite iff the
 *    extreme's magnitude is below 0x7f800000.
 *  - quantize: t = bits(y + (1.5*2^23 + QNEG)) = 0x4B400000 | code (the
 *    FastIntCodec trick: the sum's ulp is 1, so the add rounds half to
 *    even); the codes are packed by ADDING t << shift into the words (one
 *    shift-add per value instead of mask, shift, or) and subtracting the
 *    same sum of the constant 0x4B400000 << shift once per word (the parts
 *    never overlap, so the sum of them is their OR, modulo 2^32).
 *  - no lower clamp: |x| <= |m| = QNEG * a (a = |m| / QNEG, exact), and
 *    s = bf16(a) rounds a down by less than half a bf16 ulp, so a / s <
 *    1 + 2^-8 when s is a power of two (then inv = 1/s and y = x * inv are
 *    exact: |y| < QNEG + QNEG / 256 <= QNEG + 0.5) and a / s < 1 + 2^-8 /
 *    (1 + 2^-7) otherwise (|y| < 128.4962 + 2 roundings of 2^-24 relative,
 *    for INT8 too). So rint(y) >= -QNEG always and the clamp at -QNEG never
 *    acts (test_codec_fast's clamp_edges builds the worst m for every
 *    mantissa). The upper clamp at QNEG-1 stays (a later -m maps to QNEG).
 *  - dequantize: PRMT puts a code byte under the exponent byte 0x4B, so
 *    (2^23 + code) - (2^23 + QNEG) = code - QNEG exactly, then the same
 *    multiply by s; INT4 first splits a word into its even and odd nibbles.
 *    tpm_fast_dequant_int does not look at the scale: a poisoned block's
 *    values come out NaN or Inf (not the canonical 0x7FC00000); callers that
 *    store them replace them (FastIntCodec::dequant, GroupIO::store_codec).
 */
#ifndef TPM_CODEC_FAST_H
#define TPM_CODEC_FAST_H

#include "codec_format.h"

#if defined(__CUDA_ARCH__) /* the device pass (the host compiler would warn) */
#define TPM_UNROLL _Pragma("unroll")
#else
#define TPM_UNROLL
#endif

/* CUDA's __byte_perm (selectors 0-7, no sign mode). */
TPM_HD uint32_t tpm_prmt(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
    return __byte_perm(x, y, s);
#else
    const uint64_t xy = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)((xy >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
    return r;
#endif
}

TPM_HD int tpm_fast_bits(int fmt) { return fmt == TPM_FMT_INT8 ? 8 : fmt == TPM_FMT_INT6 ? 6 : 4; }

/* The reference's extreme: the first value of largest magnitude. */
TPM_HD float tpm_fast_first_extreme(const float *v) {
    float m = v[0];
    TPM_UNROLL
    for (int i = 1; i < TPM_CODEC_BLOCK; i++)
        if (tpm_codec_amax_better(v[i], m)) m = v[i];
    return m;
}

/* The first of +a and -a in v, for a tie between them (a finite, >= 0): the
 * same value as tpm_fast_first_extreme there, in two instructions per value
 * (a compare of |v[i]| with a, which a float compare takes as an operand
 * modifier, and a select), scanning from the end so the first match wins.
 * Float equality is bit equality here: a is finite and no value is NaN
 * (a NaN would have won one of the integer maxes), and +0 / -0 compare
 * equal exactly when their magnitude bits do. */
TPM_HD float tpm_fast_first_of_tie(const float *v, float a) {
    float m = a;
    TPM_UNROLL
    for (int i = TPM_CODEC_BLOCK - 1; i >= 0; i--) m = fabsf(v[i]) == a ? v[i] : m;
    return m;
}

/* 1 and *m = the extreme (tpm_codec_quantize_block's m) for a finite block;
 * 0 if any value is NaN or Inf. */
TPM_HD int tpm_fast_extreme(const float *v, float *m) {
    int32_t p = (int32_t)tpm_f32_bits(v[0]);
    uint32_t n = tpm_f32_bits(v[0]);
    TPM_UNROLL
    for (int i = 1; i < TPM_CODEC_BLOCK; i++) {
        const uint32_t u = tpm_f32_bits(v[i]);
        p = (int32_t)u > p ? (int32_t)u : p;
        n = u > n ? u : n;
    }
    const uint32_t an = n & 0x7fffffffu, ap = (uint32_t)p;
    uint32_t best;
    if (!(n >> 31)) best = ap;   /* no sign bit set: n == p */
    else if (p < 0) best = n;    /* no value with sign 0 */
    else if (ap > an) best = ap; /* both signs: the larger magnitude */
    else if (an > ap) best = n;
    else { /* +a and -a: the first one */
        if (ap >= 0x7f800000u) return 0;
        *m = tpm_fast_first_of_tie(v, tpm_bits_f32(ap));
        return 1;
    }
    if ((best & 0x7fffffffu) >= 0x7f800000u) return 0;
    *m = tpm_bits_f32(best);
    return 1;
}

/* The same for values whose low 5 bits are zero (bf16 or fp16 inputs
 * widened to f32, as a two-shot's scatter quantizes them): the index key
 * 31 - i goes into those bits, so each max also keeps the first of equal
 * values, and a +a / -a tie is decided by the two keys, without the scan
 * (bf16 inputs tie often: 8-bit mantissas; r62 measured the scan on ~86% of
 * warps' scatter groups). */
TPM_HD int tpm_fast_extreme_lz(const float *v, float *m) {
    int32_t p = (int32_t)(tpm_f32_bits(v[0]) | 31u);
    uint32_t n = tpm_f32_bits(v[0]) | 31u;
    TPM_UNROLL
    for (int i = 1; i < TPM_CODEC_BLOCK; i++) {
        const uint32_t u = tpm_f32_bits(v[i]) | (uint32_t)(31 - i);
        p = (int32_t)u > p ? (int32_t)u : p;
        n = u > n ? u : n;
    }
    const uint32_t an = n & 0x7fffffe0u, ap = (uint32_t)p & 0x7fffffe0u;
    uint32_t best;
    if (!(n >> 31)) best = ap;
    else if (p < 0) best = n;
    else if (ap != an) best = ap > an ? ap : n;
    else best = ((uint32_t)p & 31u) > (n & 31u) ? ap : n; /* the larger key is the lower index */
    best &= ~31u;
    if ((best & 0x7fffffffu) >= 0x7f800000u) return 0;
    *m = tpm_bits_f32(best);
    return 1;
}

/* Packed codes (codec_format.h's little-endian words, bits(fmt) of them) of
 * a finite block given inv from tpm_codec_scale (0 for a zero block). */
TPM_HD void tpm_fast_quant_int(int fmt, const float *v, float inv, uint32_t *w) {
    const int bits = tpm_fast_bits(fmt), qneg = 1 << (bits - 1);
    const float hi = (float)(qneg - 1);
    const float cq = 12582912.0f + (float)qneg; /* 1.5 * 2^23 + QNEG */
    uint32_t acc[8], gar[8];
    TPM_UNROLL
    for (int k = 0; k < 8; k++) acc[k] = 0, gar[k] = 0;
    TPM_UNROLL
    for (int i = 0; i < TPM_CODEC_BLOCK; i++) {
        float y = v[i] * inv;
        y = y > hi ? hi : y;
        const uint32_t t = tpm_f32_bits(y + cq); /* 0x4B400000 | code */
        const int b = i * bits, k = b / 32, s = b % 32;
        acc[k] += t << s;
        gar[k] += 0x4B400000u << s;
        if (s + bits > 32) {
            acc[k + 1] += t >> (32 - s);
            gar[k + 1] += 0x4B400000u >> (32 - s);
        }
    }
    TPM_UNROLL
    for (int k = 0; k < bits; k++) w[k] = acc[k] - gar[k];
}

/* Quantize one block: tpm_codec_quantize_block's scale bits and code words
 * (all zero for a poisoned block). lz: every value's low 5 bits are zero
 * (tpm_fast_extreme_lz; a constant where it is called). */
TPM_HD uint16_t tpm_fast_quant_block(int fmt, int lz, const float *v, uint32_t *w) {
    float m = 0.0f, inv;
    if (!(lz ? tpm_fast_extreme_lz(v, &m) : tpm_fast_extreme(v, &m))) {
        TPM_UNROLL
        for (int k = 0; k < tpm_fast_bits(fmt); k++) w[k] = 0;
        return (uint16_t)TPM_CODEC_SCALE_POISON;
    }
    const uint16_t sb = tpm_codec_scale(fmt, m, &inv);
    tpm_fast_quant_int(fmt, v, inv, w);
    return sb;
}

/* Values of a block's code words with scale s (finite: the reference's
 * values; non-finite: NaN or Inf, see the top comment). */
TPM_HD float tpm_fast_code_value(uint32_t t, float cq, float s) { return (tpm_bits_f32(t) - cq) * s; }

/* mg = 0x4B000000 (tpm_fast_dequant_int); a GPU caller passes it from
 * constant memory (codec_cuda.h, tpm_cuda_magic) so that ptxas keeps it in
 * one register and codes the PRMT selectors as immediates. */
TPM_HD void tpm_fast_dequant_int_mg(int fmt, const uint32_t *w, float s, float *v, uint32_t mg) {
    const int bits = tpm_fast_bits(fmt), qneg = 1 << (bits - 1);
    const float cq = 8388608.0f + (float)qneg; /* 2^23 + QNEG */
    if (fmt == TPM_FMT_INT8) {
        TPM_UNROLL
        for (int i = 0; i < TPM_CODEC_BLOCK; i++)
            v[i] = tpm_fast_code_value(tpm_prmt(w[i / 4], mg, 0x7650u | (uint32_t)(i % 4)), cq, s);
    } else if (fmt == TPM_FMT_INT4) {
        TPM_UNROLL
        for (int k = 0; k < 4; k++) {
            const uint32_t e = w[k] & 0x0f0f0f0fu, o = (w[k] >> 4) & 0x0f0f0f0fu;
            TPM_UNROLL
            for (int b = 0; b < 4; b++) {
                v[8 * k + 2 * b] = tpm_fast_code_value(tpm_prmt(e, mg, 0x7650u | (uint32_t)b), cq, s);
                v[8 * k + 2 * b + 1] = tpm_fast_code_value(tpm_prmt(o, mg, 0x7650u | (uint32_t)b), cq, s);
            }
        }
    } else {
        TPM_UNROLL
        for (int i = 0; i < TPM_CODEC_BLOCK; i++) {
            const int b = i * bits, k = b / 32, sh = b % 32;
            uint32_t u = w[k] >> sh;
            if (sh + bits > 32) u |= w[k + 1] << (32 - sh);
            v[i] = tpm_fast_code_value(mg | (u & ((1u << bits) - 1u)), cq, s);
        }
    }
}

TPM_HD void tpm_fast_dequant_int(int fmt, const uint32_t *w, float s, float *v) {
    tpm_fast_dequant_int_mg(fmt, w, s, v, 0x4B000000u);
}

#endif /* TPM_CODEC_FAST_H */
