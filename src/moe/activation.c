/*
 * activation.c - the expert activations in fp32 (CPU ground truth).
 *
 *   swiglu-oai: gate = min(g, limit); up = clamp(u, -limit, limit);
 *               out  = (gate * sigmoid(alpha * gate)) * (up + beta)
 *   SiLU-GLU:   out  = (g / (1 + exp(-g))) * u
 *
 * sigmoid(z) = 1 / (1 + expf(-z)). The clamps are written as comparisons so
 * a NaN input stays NaN (fminf/fmaxf would turn it into the limit), as
 * torch.clamp does. The gate_up output comes uninterleaved ([gate | up],
 * inter values each) or interleaved (gate_i at 2i, up_i at 2i+1).
 */
#include "moe/moe_math.h"

#include <math.h>

void tpm_act_params_from_preset(const tpm_preset *p, tpm_act_params *ap) {
    ap->kind = p->act;
    ap->alpha = p->act_alpha;
    ap->beta = p->act_beta;
    /* No limit: +Inf, so the comparisons never clamp. */
    ap->limit = (p->act_limit > 0.0f) ? p->act_limit : INFINITY;
}

float tpm_act_swiglu_oai(float g, float u, float alpha, float limit, float beta) {
    float gate = g > limit ? limit : g;
    float up = u > limit ? limit : (u < -limit ? -limit : u);
    float sig = 1.0f / (1.0f + expf(-(alpha * gate)));
    return (gate * sig) * (up + beta);
}

float tpm_act_silu_glu(float g, float u) {
    return (g / (1.0f + expf(-g))) * u;
}

double tpm_act_swiglu_oai_f64(double g, double u, double alpha, double limit, double beta) {
    double gate = g > limit ? limit : g;
    double up = u > limit ? limit : (u < -limit ? -limit : u);
    return gate / (1.0 + exp(-(alpha * gate))) * (up + beta);
}

double tpm_act_silu_glu_f64(double g, double u) {
    return g / (1.0 + exp(-g)) * u;
}

void tpm_act_apply(const tpm_act_params *ap, const float *h, int inter, float *out) {
    switch (ap->kind) {
    case TPM_ACT_SWIGLU_OAI:
        for (int i = 0; i < inter; i++)
            out[i] = tpm_act_swiglu_oai(h[i], h[inter + i], ap->alpha, ap->limit, ap->beta);
        break;
    case TPM_ACT_SWIGLU_OAI_INTERLEAVED:
        for (int i = 0; i < inter; i++)
            out[i] = tpm_act_swiglu_oai(h[2 * i], h[2 * i + 1], ap->alpha, ap->limit, ap->beta);
        break;
    case TPM_ACT_SILU_GLU:
    default:
        for (int i = 0; i < inter; i++)
            out[i] = tpm_act_silu_glu(h[i], h[inter + i]);
        break;
    }
}
