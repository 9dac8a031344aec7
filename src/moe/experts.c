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
        for (int j = 0; j < 8; j++) l[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++) l[j] += a[i] * b[i];
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

void tpm_expert_forward(const tpm_act_params *ap, const tpm_expert_view *e, int hidden, int inter,
                        const float *x, size_t n, float *h_scratch, float *out) {
    const size_t H = (size_t)hidden, I = (size_t)inter, I2 = 2 * I;
    float *h = h_scratch;         /* [n x 2I] */
    float *a = h_scratch + n * I2; /* [n x I] */
    for (size_t r = 0; r < I2; r++) {
        const float *w = e->gate_up + r * H;
        for (size_t t = 0; t < n; t++) {
            float v = tpm_dot_f32(w, x + t * H, H);
            h[t * I2 + r] = e->gate_up_bias ? v + e->gate_up_bias[r] : v;
        }
    }
    for (size_t t = 0; t < n; t++) tpm_act_apply(ap, h + t * I2, inter, a + t * I);
    for (size_t o = 0; o < H; o++) {
        const float *w = e->down + o * I;
        for (size_t t = 0; t < n; t++) {
            float v = tpm_dot_f32(w, a + t * I, I);
            out[t * H + o] = e->down_bias ? v + e->down_bias[o] : v;
        }
    }
}
