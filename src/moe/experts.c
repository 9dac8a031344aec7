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

float tpm_dot_f32(const float *a, const float *b, size_t n) {
    float l[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            l[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++)
        l[j] += a[i] * b[i];
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* Four dot products of one weight row with four vectors, each in exactly the
 * order of tpm_dot_f32 (same lanes, same final tree): bitwise the same
 * results, with four independent accumulator chains for the CPU to overlap. */
static void dot4_f32(const float *w, const float *x0, const float *x1, const float *x2,
                     const float *x3, size_t n, float *out) {
    float l0[8] = {0}, l1[8] = {0}, l2[8] = {0}, l3[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            float a = w[i + j];
            l0[j] += a * x0[i + j];
            l1[j] += a * x1[i + j];
            l2[j] += a * x2[i + j];
            l3[j] += a * x3[i + j];
        }
    for (int j = 0; i < n; i++, j++) {
        l0[j] += w[i] * x0[i];
        l1[j] += w[i] * x1[i];
        l2[j] += w[i] * x2[i];
        l3[j] += w[i] * x3[i];
    }
    float *ls[4] = {l0, l1, l2, l3};
    for (int k = 0; k < 4; k++) {
        const float *l = ls[k];
        out[k] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
    }
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
