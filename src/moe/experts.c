/*
 * experts.c - one expert on a batch of tokens in fp32 (CPU ground truth):
 *   h = gate_up . x (+ gate_up_bias)   [2*inter] per token
 *   a = act(h)                          [inter], fp32, never rounded
 *   o = down . a (+ down_bias)          [hidden]
 * and the fixed-order dot product every projection uses. The weighted
 * combine over a token's slots lives in moe_cpu.c.
 *
 * Loop order: weight row outer, token inner, so one weight row is read once
 * from memory per batch and reused from cache for every token.
 */
#include "moe/moe_math.h"

#include <string.h>

/* Eight fp32 lanes: lane j sums the products a[i + j] * b[i + j], i = 0, 8, 16, ... in order,
 * exactly as a scalar loop over float l[8] would. The lanes live in two 4-wide vectors (lo: lanes
 * 0-3, hi: 4-7), the SSE registers of every x86-64, so the compiler keeps them in registers
 * (the scalar float[8] form was spilled to the stack on every step: docs/moe.md, Experts).
 * -ffp-contract=off keeps every multiply and add separately rounded: the same bits. */
typedef float v4f __attribute__((vector_size(16)));
/* the same vector at any float's address (an unaligned load; may alias the float arrays) */
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));
#define ld4(p) (*(const v4f_u *)(p))

/* The fixed final tree over the eight lanes, after the scalar tail (lanes 0, 1, ... again). */
static inline float lanes_sum(const v4f *lo, const v4f *hi, const float *a, const float *b, size_t i,
                              size_t n) {
    float f[8];
    memcpy(f, lo, 4 * sizeof(float));
    memcpy(f + 4, hi, 4 * sizeof(float));
    for (int j = 0; i < n; i++, j++)
        f[j] += a[i] * b[i];
    return ((f[0] + f[4]) + (f[2] + f[6])) + ((f[1] + f[5]) + (f[3] + f[7]));
}

float tpm_dot_f32(const float *a, const float *b, size_t n) {
    v4f lo = {0.0f, 0.0f, 0.0f, 0.0f}, hi = lo;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        lo += ld4(a + i) * ld4(b + i);
        hi += ld4(a + i + 4) * ld4(b + i + 4);
    }
    return lanes_sum(&lo, &hi, a, b, i, n);
}

/* Four dot products of one weight row with four vectors, each in exactly the
 * order of tpm_dot_f32 (same lanes, same final tree): bitwise the same
 * results, with four independent accumulator chains for the CPU to overlap. */
static void dot4_f32(const float *w, const float *x0, const float *x1, const float *x2,
                     const float *x3, size_t n, float *out) {
    const v4f z = {0.0f, 0.0f, 0.0f, 0.0f};
    v4f l0 = z, h0 = z, l1 = z, h1 = z, l2 = z, h2 = z, l3 = z, h3 = z;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const v4f a = ld4(w + i), b = ld4(w + i + 4);
        l0 += a * ld4(x0 + i);
        h0 += b * ld4(x0 + i + 4);
        l1 += a * ld4(x1 + i);
        h1 += b * ld4(x1 + i + 4);
        l2 += a * ld4(x2 + i);
        h2 += b * ld4(x2 + i + 4);
        l3 += a * ld4(x3 + i);
        h3 += b * ld4(x3 + i + 4);
    }
    out[0] = lanes_sum(&l0, &h0, w, x0, i, n);
    out[1] = lanes_sum(&l1, &h1, w, x1, i, n);
    out[2] = lanes_sum(&l2, &h2, w, x2, i, n);
    out[3] = lanes_sum(&l3, &h3, w, x3, i, n);
}

/* out[t * stride] = dot(w, x + t * n) for t < nt (groups of four, then one by one). */
static void row_dots(const float *w, const float *x, size_t n, size_t nt, float *out,
                     size_t stride) {
    size_t t = 0;
    for (; t + 4 <= nt; t += 4) {
        float o[4];
        dot4_f32(w, x + t * n, x + (t + 1) * n, x + (t + 2) * n, x + (t + 3) * n, n, o);
        for (int k = 0; k < 4; k++)
            out[(t + (size_t)k) * stride] = o[k];
    }
    for (; t < nt; t++)
        out[t * stride] = tpm_dot_f32(w, x + t * n, n);
}

void tpm_expert_forward(const tpm_act_params *ap, const tpm_expert_view *e, int hidden, int inter,
                        const float *x, size_t n, float *h_scratch, float *out) {
    const size_t H = (size_t)hidden, I = (size_t)inter, I2 = 2 * I;
    float *h = h_scratch;          /* [n x 2I] */
    float *a = h_scratch + n * I2; /* [n x I] */
    for (size_t r = 0; r < I2; r++) {
        row_dots(e->gate_up + r * H, x, H, n, h + r, I2);
        if (e->gate_up_bias)
            for (size_t t = 0; t < n; t++)
                h[t * I2 + r] += e->gate_up_bias[r];
    }
    for (size_t t = 0; t < n; t++)
        tpm_act_apply(ap, h + t * I2, inter, a + t * I);
    for (size_t o = 0; o < H; o++) {
        row_dots(e->down + o * I, a, I, n, out + o, H);
        if (e->down_bias)
            for (size_t t = 0; t < n; t++)
                out[t * H + o] += e->down_bias[o];
    }
}
