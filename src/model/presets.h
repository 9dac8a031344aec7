/*
 * presets.h - model shape presets (m3, m3-mini, deepseek-v3, gpt-oss, ...).
 * The numbers follow shared/reference/minimax-m3.md. Used by the MoE layer,
 * the weight generator/loader and the policy rules (src/core/config.c).
 */
#ifndef TPM_PRESETS_H
#define TPM_PRESETS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpm_router_kind {
    TPM_ROUTER_SIGMOID_BIAS = 0,   /* M3 / M2: sigmoid + e_score_correction_bias */
    TPM_ROUTER_GROUPED_SIGMOID = 1, /* DeepSeek-V3: + group top-k */
    TPM_ROUTER_SOFTMAX_TOPK = 2     /* gpt-oss: softmax over the top-k logits */
} tpm_router_kind;

typedef enum tpm_act_kind {
    TPM_ACT_SWIGLU_OAI = 0,        /* uninterleaved [gate | up] */
    TPM_ACT_SWIGLU_OAI_INTERLEAVED = 1, /* gate even, up odd columns */
    TPM_ACT_SILU_GLU = 2           /* plain silu(gate) * up, uninterleaved */
} tpm_act_kind;

typedef enum tpm_weight_format {
    TPM_WFMT_BF16 = 0,
    TPM_WFMT_FP16 = 1,
    TPM_WFMT_FP32 = 2,
    TPM_WFMT_FP8_E4M3 = 3
} tpm_weight_format;

typedef struct tpm_preset {
    const char *name;
    const char *description;
    int hidden;
    int n_experts;        /* routed */
    int top_k;
    int inter;            /* per routed expert intermediate */
    int n_shared;         /* shared experts (0 or 1 here) */
    int shared_inter;     /* shared expert intermediate */
    tpm_weight_format routed_format, shared_format;
    tpm_router_kind router;
    int n_groups, topk_groups; /* grouped router only */
    float routed_scaling_factor;
    tpm_act_kind act;
    float act_alpha, act_limit, act_beta; /* swiglu-oai */
    int expert_bias;      /* gpt-oss: biases on gate_up and down */
    int layers, dense_layers;
} tpm_preset;

/* NULL if unknown. tpm_preset_list gives all, NULL-terminated. */
const tpm_preset *tpm_preset_find(const char *name);
const tpm_preset *const *tpm_preset_list(void);

#ifdef __cplusplus
}
#endif
#endif /* TPM_PRESETS_H */
