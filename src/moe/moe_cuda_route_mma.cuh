/*
 * moe_cuda_route_mma.cuh - the router projection's tensor-core pieces shared by routing mode 3
 * (moe_cuda_route_tc.cu) and mode 4 (moe_cuda_route_cl.cu): one mma.sync m16n8k16 (bf16 in,
 * fp32 accumulators), one 32-h chunk of a warp's 16 router rows x NT 8-token n-tiles from
 * operands in wr3f's order, and the in-register split of wrf's fp32 words into those operands
 * (hi + mid + lo = w exactly). Internal: included by .cu files only.
 */
#ifndef TPM_MOE_CUDA_ROUTE_MMA_CUH
#define TPM_MOE_CUDA_ROUTE_MMA_CUH

#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    /* not volatile: the compiler may interleave independent mma (a volatile asm keeps
     * source order, and each accumulator's chain then stalls on the mma latency) */
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* The mma of one chunk (mode 3's loads 2 and 3, mode 4): f[sp][s] = the A operand of split sp at
 * k-step s as stored in wr3f (four registers in operand order: no moves before the mma), NT
 * n-tiles, no branches (the n-tiles past the tile's tokens hold zeros and are never stored). The
 * same order per accumulator as mode 3's mma_chunk: k-step 0 of hi, mid, lo, then k-step 1. */
template <int NT>
__device__ __forceinline__ void mma_chunk_f(float (&acc)[8][4], const uint4 (&f)[3][2], const uint4 (&b)[8]) {
#pragma unroll
    for (int st = 0; st < 6; st++) {
        const uint4 &A = f[st % 3][st / 3];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            if (st < 3) mma_bf16(acc[j], A.x, A.y, A.z, A.w, b[j].x, b[j].y);
            else mma_bf16(acc[j], A.x, A.y, A.z, A.w, b[j].z, b[j].w);
        }
    }
}

/* k_split_router's split of the fp32 pair (a, b), a at the lower h: the bf16x2 words hi, mid
 * and lo with w = hi + mid + lo, each rounded to nearest (cvt.rn.bf16x2.f32, subnormals kept, as
 * tpm_f32_to_bf16); mid = lo = 0 where w is not finite (hi alone carries a NaN / inf). */
__device__ __forceinline__ uint32_t bf16x2_rn(float lo_h, float hi_h) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_h), "f"(lo_h));
    return r;
}
__device__ __forceinline__ void split3(float a, float b, uint32_t &hi, uint32_t &mid, uint32_t &lo) {
    hi = bf16x2_rn(a, b);
    float ra = a - __uint_as_float(hi << 16), rb = b - __uint_as_float(hi & 0xffff0000u);
    ra = fabsf(a) < INFINITY ? ra : 0.0f;
    rb = fabsf(b) < INFINITY ? rb : 0.0f;
    mid = bf16x2_rn(ra, rb);
    lo = bf16x2_rn(ra - __uint_as_float(mid << 16), rb - __uint_as_float(mid & 0xffff0000u));
}

/* A chunk's fp32 words r[hf][s] (rows g + 8 hf at k-step s, as stored in wrf) split into wr3f's
 * operands f[split][s] (the same words). */
__device__ __forceinline__ void split_chunk_f32(const uint4 (&r)[2][2], uint4 (&f)[3][2]) {
#pragma unroll
    for (int s = 0; s < 2; s++) {
        const float4 u = *reinterpret_cast<const float4 *>(&r[0][s]), v = *reinterpret_cast<const float4 *>(&r[1][s]);
        uint4 h, m, l;
        split3(u.x, u.y, h.x, m.x, l.x);
        split3(v.x, v.y, h.y, m.y, l.y);
        split3(u.z, u.w, h.z, m.z, l.z);
        split3(v.z, v.w, h.w, m.w, l.w);
        f[0][s] = h;
        f[1][s] = m;
        f[2][s] = l;
    }
}

/* The mma of one chunk from fp32 words (mode 3's loads 3, mode 4): r as split_chunk_f32's, split,
 * then mma_chunk_f. */
template <int NT>
__device__ __forceinline__ void mma_chunk_f32(float (&acc)[8][4], const uint4 (&r)[2][2], const uint4 (&b)[8]) {
    uint4 f[3][2];
    split_chunk_f32(r, f);
    mma_chunk_f<NT>(acc, f, b);
}

} // namespace

#endif
