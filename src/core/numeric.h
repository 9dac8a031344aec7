/*
 * numeric.h - scalar conversions shared by the CPU reference and CUDA code.
 *
 * Valid C11 and CUDA C++. Conversions are bit-exact and round to nearest
 * even, so a value converted on the CPU and on the GPU has the same bits.
 * NaN stays NaN (quiet), Inf stays Inf.
 */
#ifndef TPM_NUMERIC_H
#define TPM_NUMERIC_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define TPM_HD __host__ __device__ __forceinline__
#else
#define TPM_HD static inline
#endif

TPM_HD uint32_t tpm_f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

TPM_HD float tpm_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* bf16 <-> f32 */
TPM_HD float tpm_bf16_to_f32(uint16_t h) { return tpm_bits_f32((uint32_t)h << 16); }

TPM_HD uint16_t tpm_f32_to_bf16(float f) {
    uint32_t u = tpm_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* fp16 <-> f32 (IEEE binary16), round to nearest even, subnormals kept. */
TPM_HD float tpm_fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);
    } else {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return tpm_bits_f32(u);
}

TPM_HD uint16_t tpm_f32_to_fp16(float f) {
    uint32_t u = tpm_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) { /* result subnormal or zero: below 2^-14 */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to 0 */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 (112 << 23) */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

/* Load element i of a bf16/fp16/fp32 array as f32; dtype as tpm_dtype. */
TPM_HD float tpm_load_f32(const void *p, int dtype, size_t i) {
    if (dtype == 0) return tpm_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dtype == 1) return tpm_fp16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

TPM_HD void tpm_store_f32(void *p, int dtype, size_t i, float v) {
    if (dtype == 0)
        ((uint16_t *)p)[i] = tpm_f32_to_bf16(v);
    else if (dtype == 1)
        ((uint16_t *)p)[i] = tpm_f32_to_fp16(v);
    else
        ((float *)p)[i] = v;
}

#endif /* TPM_NUMERIC_H */
