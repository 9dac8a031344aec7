/*
 * moe_math.h - the MoE layer's scalar math on the CPU (not installed): the
 * router, the activations and one expert, in fp32 with a fixed operation
 * order. These functions are the ground truth the CUDA MoE is held to; the
 * rules they implement are written out in docs/moe.md.
 *
 *  - router.c:     logits, sigmoid + correction bias (optionally grouped) and
 *                  softmax-over-top-k routing, NaN/Inf sanitation.
 *  - activation.c: swiglu-oai (uninterleaved and interleaved) and SiLU-GLU.
 *  - experts.c:    the fixed-order dot product, one expert on a batch of
 *                  tokens (gate_up -> act -> down), the weighted combine.
 *  - reference.c:  an fp64 evaluation of a whole layer, for --check and the
 *                  tests.
 */
#ifndef TPM_MOE_MATH_H
#define TPM_MOE_MATH_H

#include "model/presets.h"
#include "tpmoe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MARK: router */
typedef struct tpm_router_params {
    tpm_router_kind kind;
    int n_experts;               /* routed experts E */
    int top_k;                   /* routed slots per token, 1..E (<= TPM_MOE_MAX_TOPK) */
    int n_groups;                /* grouped kind: E % n_groups == 0; else 1 */
    int topk_groups;             /* grouped kind: groups kept, topk_groups*E/n_groups >= k */
    float routed_scaling_factor; /* folded into the routed weights */
} tpm_router_params;

#define TPM_MOE_MAX_TOPK 32
#define TPM_MOE_MAX_EXPERTS 4096

/* Fill router params from a preset and check them (TPM_ERR_INVALID_ARG
 * naming the bad field). */
tpm_status tpm_router_params_from_preset(const tpm_preset *p, tpm_router_params *rp);
tpm_status tpm_router_params_check(const tpm_router_params *rp);

/* Router logits of one token: logits[e] = dot(x, wr[e*H .. e*H+H-1]) with
 * the fixed-order fp32 dot product of tpm_dot_f32. x is fp32 (widened). */
void tpm_router_logits(const float *x, const float *wr, int hidden, int n_experts, float *logits);

/* Select top_k experts of one token from its fp32 logits. bias: [E] or NULL
 * (sigmoid kinds: selection only; softmax kind: added to the logits).
 * ids[k] come out in selection order (best first, ties -> lower index),
 * always distinct and in [0, E); weights[k] follow docs/moe.md (renormalized,
 * rsf folded in). scratch holds at least 2*E floats. Never fails on NaN/Inf
 * input. */
void tpm_router_select(const tpm_router_params *rp, const float *logits, const float *bias,
                       int32_t *ids, float *weights, float *scratch);

/* Route ntokens tokens of x ([ntokens x hidden] in dtype dt): widen a row to
 * fp32, logits, select. scratch: at least hidden + 3*E floats. */
void tpm_router_route(const tpm_router_params *rp, const void *x, tpm_dtype dt, size_t ntokens,
                      int hidden, const float *wr, const float *bias, int32_t *ids, float *weights,
                      float *scratch);

/* MARK: activation */
typedef struct tpm_act_params {
    tpm_act_kind kind;
    float alpha, limit, beta; /* swiglu-oai; limit <= 0 or +Inf: no clamp */
} tpm_act_params;

void tpm_act_params_from_preset(const tpm_preset *p, tpm_act_params *ap);

/* h: one token's gate_up output, 2*inter floats in the kind's layout
 * ([gate | up], or interleaved gate/up pairs); out: inter floats. fp32,
 * NaN propagates (the clamps are comparisons, not fminf). */
void tpm_act_apply(const tpm_act_params *ap, const float *h, int inter, float *out);

/* Scalar forms (documented formulas, used by the tests and the fp64 check). */
float tpm_act_swiglu_oai(float g, float u, float alpha, float limit, float beta);
float tpm_act_silu_glu(float g, float u);
double tpm_act_swiglu_oai_f64(double g, double u, double alpha, double limit, double beta);
double tpm_act_silu_glu_f64(double g, double u);

/* MARK: experts */
/* Fixed-order fp32 dot product: 8 lanes, lane j accumulates a[i]*b[i] for
 * i % 8 == j in increasing i (products rounded, then added), then the lanes
 * are combined as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). */
float tpm_dot_f32(const float *a, const float *b, size_t n);

/* One expert's weights as this rank sees them (an intermediate shard). */
typedef struct tpm_expert_view {
    const float *gate_up;      /* [2*inter x hidden], the act kind's row layout */
    const float *gate_up_bias; /* [2*inter] or NULL */
    const float *down;         /* [hidden x inter] */
    const float *down_bias;    /* [hidden] or NULL (added on one TP rank only) */
} tpm_expert_view;

/* out[t*hidden + o] = E(x_t)[o] for the n tokens x ([n x hidden] fp32):
 * h = gate_up . x (+ gate_up_bias), a = act(h) (fp32, not rounded),
 * out = down . a (+ down_bias). h_scratch: at least n*3*inter floats. */
void tpm_expert_forward(const tpm_act_params *ap, const tpm_expert_view *e, int hidden, int inter,
                        const float *x, size_t n, float *h_scratch, float *out);

/* MARK: fp64 reference */
/* Full (unsharded) weights of one layer for the fp64 evaluation. */
typedef struct tpm_moe_ref_layer {
    int hidden, n_experts, inter, n_shared, shared_inter;
    const float *router;            /* [E x H] */
    const float *router_bias;       /* [E] or NULL */
    const tpm_expert_view *experts; /* [E] */
    const tpm_expert_view *shared;  /* [n_shared] or NULL */
} tpm_moe_ref_layer;

/* y[t] = sum_j w_j E_{ids_j}(x_t) + sum_s Shared_s(x_t) in fp64, with the
 * expert ids given (the fp32 router's choice, so a near-tie cannot flip the
 * comparison) and the weights recomputed in fp64 from fp64 logits. x in
 * dtype dt. weights_out (optional, [n x k]) receives the fp64 weights. */
tpm_status tpm_moe_reference_f64(const tpm_router_params *rp, const tpm_act_params *ap,
                                 const tpm_moe_ref_layer *L, const void *x, tpm_dtype dt,
                                 size_t ntokens, const int32_t *ids, double *y,
                                 double *weights_out);

/* fp64 routing of one token (bf16 activations x [hidden]) for the GPU
 * checks: logits and scores in fp64, NaN logits -> -inf, (grouped) top-k on
 * the biased scores with ties to the lower index, weights renormalized
 * (uniform rsf/k when the sum is not positive) and scaled by rsf. bias may
 * be NULL; c (optional, [n_experts]) receives the selection scores. */
tpm_status tpm_router_route_f64(const tpm_preset *p, const float *router, const float *bias,
                                const uint16_t *x, int *sel, double *w, double *c);
/* The preset's activation in fp64. */
double tpm_act_f64_preset(const tpm_preset *p, double g, double u);

#ifdef __cplusplus
}
#endif
#endif /* TPM_MOE_MATH_H */
