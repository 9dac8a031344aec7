/*
 * moe_cuda_decode_smma.cuh - decode kernel set 2's fused shared slot on tensor cores
 * (tpm_moe_dev.shared_mma, tuning.shared_mma): the per-warp gate_up and down items that
 * moe_cuda_decode.cu's k_gate_up2 / k_down2 run for the shared slot in their SM = true
 * instantiations, and the helpers they share with the decode kernels (ld_stream, the streaming
 * 16-byte load) and with moe_cuda_decode_mma.cu (mma16816, mma_chunk_t, split_hi_lo). Internal:
 * included by those two .cu files only.
 *
 * The fused shared slot holds every token, so on the scalar GEMVs of moe_cuda_decode.cu its items are bound by
 * instruction issue from a few tokens on (per 16-byte weight load, NT x loads and 8 NT FMAs). Its
 * items here run on mma.sync m16n8k16 (bf16 in, fp32 accumulate) with the TOKENS as M (16 per
 * m-tile, rows past n are zero) and 8 weight rows as N, so a warp's 32-element chunk of its 8 rows
 * is ONE 16-byte load per lane and two mma. Lane (g, q) loads elements 8q..8q+7 of a chunk of
 * weight row g (the B operand's column g) and the same elements of token g's (and g + 8's) x row;
 * k-step s takes elements 8q + 4s + (0, 1) as the fragment's k-pair (2q, 2q+1) and 8q + 4s + (2, 3)
 * as (2q+8, 2q+9): a fixed permutation of k applied to both operands, so the product is unchanged
 * (moe_cuda_decode_mma.cu uses the same). The weight loads run in two register stages of kSmU
 * chunks (the next stage's loads go out before the current stage's mma). Each output is one fp32
 * accumulator summed over k in a fixed order: the same bits in every run and every launch form.
 * gate_up: N column 2j is gate row i0 + j, column 2j + 1 up row i0 + j (4 row pairs per warp), so
 * lane (g, q)'s accumulators c0, c1 hold gate and up of row i0 + q for token g: the activation is
 * lane-local. down: 8 output rows per warp; the activation (fp32) enters as bf16 hi + lo, two mma
 * (~16 bits of it kept, as moe_cuda_decode_mma.cu), rows_f32 gets float2 stores. */
#ifndef TPM_MOE_CUDA_DECODE_SMMA_CUH
#define TPM_MOE_CUDA_DECODE_SMMA_CUH

#include "moe_cuda_kernels.h"

namespace {

constexpr int kSmmaWarps = 8; /* warps per block of k_gate_up2 / k_down2 */

__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
}

/* Chunks per register stage. The tensor-core instantiations keep 2 blocks per SM (launch bounds):
 * r217 (one H100, fused layer, 3-8 tokens) had 2 chunks a tie with 4 (0.3-0.8 us faster at 5-8
 * tokens, 1.5-2 us slower at 3-4), and 3 blocks per SM at 4 tokens (the plain GEMVs' occupancy
 * there; 24-56 bytes of spills) 30-48 us slower at 3-4 tokens. */
constexpr int kSmU = 2;

__device__ __forceinline__ void mma16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* c += A (tokens g, g + 8: xa, xb; 8 elements each) . B (weight row g: w) over one 32-chunk */
__device__ __forceinline__ void mma_chunk_t(float (&c)[4], const uint4 &xa, const uint4 &xb, const uint4 &w) {
    mma16816(c, xa.x, xb.x, xa.y, xb.y, w.x, w.y);
    mma16816(c, xa.z, xb.z, xa.w, xb.w, w.z, w.w);
}

__device__ __forceinline__ uint32_t pack_bf16x2(float a, float b) { /* a in the low half */
    return (uint32_t)tpm_f32_to_bf16(a) | ((uint32_t)tpm_f32_to_bf16(b) << 16);
}
__device__ __forceinline__ float bf16_round(float a) { return tpm_bf16_to_f32(tpm_f32_to_bf16(a)); }

/* 8 fp32 activations as bf16 hi + lo pairs (elements 0..7 of a chunk, in load order) */
__device__ __forceinline__ void split_hi_lo(const float4 &a, const float4 &b, uint4 &hi, uint4 &lo) {
    hi = make_uint4(pack_bf16x2(a.x, a.y), pack_bf16x2(a.z, a.w), pack_bf16x2(b.x, b.y), pack_bf16x2(b.z, b.w));
    lo = make_uint4(pack_bf16x2(a.x - bf16_round(a.x), a.y - bf16_round(a.y)),
                    pack_bf16x2(a.z - bf16_round(a.z), a.w - bf16_round(a.w)),
                    pack_bf16x2(b.x - bf16_round(b.x), b.y - bf16_round(b.y)),
                    pack_bf16x2(b.z - bf16_round(b.z), b.w - bf16_round(b.w)));
}

/* The chunks 0 .. nc-1 of a lane's weight row (wr: its first 16 bytes; chunk c at wr + 4c) in two
 * register stages of kSmU: the next stage's loads go out before the current stage's chunks run
 * f(w, c), so the warp always has loads in flight; chunks in increasing order. */
template <class F>
__device__ __forceinline__ void stream_chunks(const uint4 *wr, int nc, F f) {
    auto load = [&](uint4 (&w)[kSmU], int cb) {
#pragma unroll
        for (int u = 0; u < kSmU; u++)
            if (cb + u < nc) w[u] = ld_stream(wr + 4 * (cb + u));
    };
    auto run = [&](const uint4 (&w)[kSmU], int cb) {
#pragma unroll
        for (int u = 0; u < kSmU; u++)
            if (cb + u < nc) f(w[u], cb + u);
    };
    uint4 wa[kSmU], wb[kSmU];
    load(wa, 0);
    for (int c0 = 0; c0 < nc; c0 += 2 * kSmU) { /* stage a holds c0, stage b c0 + kSmU */
        load(wb, c0 + kSmU);
        run(wa, c0);
        load(wa, c0 + 2 * kSmU);
        run(wb, c0 + kSmU);
    }
}

/* gate rows i0 .. i0+3 and the same up rows of expert e for its n tokens (s_tok), swiglu epilogue
 * into act_f32[off + j][i]; one warp; MT m-tiles of 16 tokens. Needs H % 32 == 0. */
template <int MT>
__device__ __forceinline__ void gate_up_mma(const tpm_moe_dev &d, const uint16_t *__restrict__ x, int e, int off,
                                            int n, int i0, const int *s_tok, int lane) {
    const int Il = d.Il, H = d.H, nc = H / 32;
    const int g = lane >> 2, q = lane & 3;
    const int wi = min(i0 + (g >> 1), Il - 1);
    const uint4 *wr = reinterpret_cast<const uint4 *>(d.w13 + ((size_t)e * 2 * Il + (size_t)(g & 1) * Il + wi) * H) + q;
    const uint4 *xr[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int j = 16 * m + 8 * h + g;
            xr[m][h] = j < n ? reinterpret_cast<const uint4 *>(x + (size_t)s_tok[j] * H) + q : nullptr;
        }
    float c[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) c[m][0] = c[m][1] = c[m][2] = c[m][3] = 0.0f;
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    stream_chunks(wr, nc, [&](const uint4 &w, int ch) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
            const uint4 xa = xr[m][0] ? __ldg(xr[m][0] + 4 * ch) : z;
            const uint4 xb = xr[m][1] ? __ldg(xr[m][1] + 4 * ch) : z;
            mma_chunk_t(c[m], xa, xb, w);
        }
    });
    const int i = i0 + q;
    if (i >= Il) return;
    const float bg = d.b13 ? d.b13[(size_t)e * 2 * Il + i] : 0.0f;
    const float bu = d.b13 ? d.b13[(size_t)e * 2 * Il + Il + i] : 0.0f;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int j = 16 * m + 8 * h + g;
            if (j < n)
                d.act_f32[(size_t)(off + j) * Il + i] =
                    tpm_moe_act(d.act, c[m][2 * h] + bg, c[m][2 * h + 1] + bu, d.alpha, d.limit, d.beta);
        }
}

/* Down rows h0 .. h0+7 of expert e for its n tokens (rows off .. off+n-1) -> rows_f32; one warp;
 * act_f32 read through L2 (written by k_gate_up2 in this forward). Needs Il % 32 == 0. */
template <int MT>
__device__ __forceinline__ void down_mma(const tpm_moe_dev &d, int e, int off, int n, int h0, int lane) {
    const int Il = d.Il, H = d.H, nc = Il / 32;
    const int g = lane >> 2, q = lane & 3;
    const uint4 *wr = reinterpret_cast<const uint4 *>(d.w2 + ((size_t)e * H + min(h0 + g, H - 1)) * Il) + q;
    const float4 *ar[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int j = 16 * m + 8 * h + g;
            ar[m][h] = j < n ? reinterpret_cast<const float4 *>(d.act_f32 + (size_t)(off + j) * Il) + 2 * q : nullptr;
        }
    float c[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) c[m][0] = c[m][1] = c[m][2] = c[m][3] = 0.0f;
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    stream_chunks(wr, nc, [&](const uint4 &w, int ch) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
            uint4 ha = z, la = z, hb = z, lb = z;
            if (ar[m][0]) split_hi_lo(__ldcg(ar[m][0] + 8 * ch), __ldcg(ar[m][0] + 8 * ch + 1), ha, la);
            if (ar[m][1]) split_hi_lo(__ldcg(ar[m][1] + 8 * ch), __ldcg(ar[m][1] + 8 * ch + 1), hb, lb);
            mma_chunk_t(c[m], ha, hb, w);
            mma_chunk_t(c[m], la, lb, w);
        }
    });
    const int h = h0 + 2 * q;
    if (h >= H) return;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int j = 16 * m + 8 * hh + g;
            if (j < n) {
                float *o = d.rows_f32 + (size_t)(off + j) * H + h;
                if (h + 1 < H) *reinterpret_cast<float2 *>(o) = make_float2(c[m][2 * hh], c[m][2 * hh + 1]);
                else *o = c[m][2 * hh];
            }
        }
}

/* Work items of the shared slot in its tensor-core form: 4 gate / up row pairs per warp, 8 down
 * rows per warp (kSmmaWarps warps per item). */
__device__ __host__ __forceinline__ int smma_gate_up_items(int Il) { return (Il + 4 * kSmmaWarps - 1) / (4 * kSmmaWarps); }
__device__ __host__ __forceinline__ int smma_down_items(int H) { return (H + 8 * kSmmaWarps - 1) / (8 * kSmmaWarps); }

} // namespace

#endif /* TPM_MOE_CUDA_DECODE_SMMA_CUH */
