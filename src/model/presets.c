/*
 * presets.c - the model shape presets (see presets.h and
 * shared/reference/minimax-m3.md). The "-mini" presets keep a model's
 * structure (router kind, activation, shared expert, biases, groups) at
 * sizes where one layer of 64 tokens runs in a fraction of a second on two
 * CPU cores in fp32.
 */
#include "model/presets.h"

#include <string.h>

/* MiniMax-M3: 60 layers (3 dense), 128 experts top-4, 1 shared expert of
 * the routed size (fusion-compatible), sigmoid + correction bias, rsf 2.0,
 * swiglu-oai uninterleaved. */
static const tpm_preset preset_m3 = {
    .name = "m3",
    .description = "MiniMax-M3: hidden 6144, 128 experts top-4, inter 3072, 1 shared (3072), "
                   "sigmoid+bias, rsf 2.0, swiglu-oai",
    .hidden = 6144, .n_experts = 128, .top_k = 4, .inter = 3072, .n_shared = 1, .shared_inter = 3072,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_SIGMOID_BIAS, .n_groups = 1, .topk_groups = 1,
    .routed_scaling_factor = 2.0f,
    .act = TPM_ACT_SWIGLU_OAI, .act_alpha = 1.702f, .act_limit = 7.0f, .act_beta = 1.0f,
    .expert_bias = 0, .layers = 60, .dense_layers = 3,
};

static const tpm_preset preset_m3_mini = {
    .name = "m3-mini",
    .description = "m3 structure scaled down: hidden 512, 32 experts top-4, inter 256, 1 shared (256)",
    .hidden = 512, .n_experts = 32, .top_k = 4, .inter = 256, .n_shared = 1, .shared_inter = 256,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_SIGMOID_BIAS, .n_groups = 1, .topk_groups = 1,
    .routed_scaling_factor = 2.0f,
    .act = TPM_ACT_SWIGLU_OAI, .act_alpha = 1.702f, .act_limit = 7.0f, .act_beta = 1.0f,
    .expert_bias = 0, .layers = 8, .dense_layers = 1,
};

/* DeepSeek-V3: 61 layers (3 dense), 256 experts top-8 in 8 groups (top-4
 * groups), 1 shared expert of 2048, rsf 2.5, SiLU-GLU. */
static const tpm_preset preset_dsv3 = {
    .name = "deepseek-v3",
    .description = "DeepSeek-V3: hidden 7168, 256 experts top-8, 8 groups top-4, inter 2048, "
                   "1 shared (2048), rsf 2.5, SiLU-GLU",
    .hidden = 7168, .n_experts = 256, .top_k = 8, .inter = 2048, .n_shared = 1, .shared_inter = 2048,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_GROUPED_SIGMOID, .n_groups = 8, .topk_groups = 4,
    .routed_scaling_factor = 2.5f,
    .act = TPM_ACT_SILU_GLU, .act_alpha = 1.0f, .act_limit = 0.0f, .act_beta = 0.0f,
    .expert_bias = 0, .layers = 61, .dense_layers = 3,
};

static const tpm_preset preset_dsv3_mini = {
    .name = "deepseek-v3-mini",
    .description = "deepseek-v3 structure scaled down: hidden 512, 64 experts top-8, 8 groups top-4, "
                   "inter 128, 1 shared (128)",
    .hidden = 512, .n_experts = 64, .top_k = 8, .inter = 128, .n_shared = 1, .shared_inter = 128,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_GROUPED_SIGMOID, .n_groups = 8, .topk_groups = 4,
    .routed_scaling_factor = 2.5f,
    .act = TPM_ACT_SILU_GLU, .act_alpha = 1.0f, .act_limit = 0.0f, .act_beta = 0.0f,
    .expert_bias = 0, .layers = 8, .dense_layers = 1,
};

/* gpt-oss-120b: 36 layers, 128 experts top-4, inter 2880, softmax over the
 * top-k logits, swiglu-oai interleaved, biases on gate_up and down, no
 * shared expert. The router's own logit bias is not modelled. */
static const tpm_preset preset_gpt_oss = {
    .name = "gpt-oss",
    .description = "gpt-oss-120b: hidden 2880, 128 experts top-4, inter 2880, softmax top-k, "
                   "swiglu-oai interleaved, expert biases, no shared",
    .hidden = 2880, .n_experts = 128, .top_k = 4, .inter = 2880, .n_shared = 0, .shared_inter = 0,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_SOFTMAX_TOPK, .n_groups = 1, .topk_groups = 1,
    .routed_scaling_factor = 1.0f,
    .act = TPM_ACT_SWIGLU_OAI_INTERLEAVED, .act_alpha = 1.702f, .act_limit = 7.0f, .act_beta = 1.0f,
    .expert_bias = 1, .layers = 36, .dense_layers = 0,
};

static const tpm_preset preset_gpt_oss_mini = {
    .name = "gpt-oss-mini",
    .description = "gpt-oss structure scaled down: hidden 512, 32 experts top-4, inter 512, "
                   "interleaved, expert biases, no shared",
    .hidden = 512, .n_experts = 32, .top_k = 4, .inter = 512, .n_shared = 0, .shared_inter = 0,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_SOFTMAX_TOPK, .n_groups = 1, .topk_groups = 1,
    .routed_scaling_factor = 1.0f,
    .act = TPM_ACT_SWIGLU_OAI_INTERLEAVED, .act_alpha = 1.702f, .act_limit = 7.0f, .act_beta = 1.0f,
    .expert_bias = 1, .layers = 8, .dense_layers = 0,
};

/* MiniMax-M2: 62 layers, 256 experts top-8, inter 1536, sigmoid + bias, no
 * shared expert, SiLU-GLU. The public config gives no routed scaling factor
 * (the reference code applies none): 1.0. */
static const tpm_preset preset_m2 = {
    .name = "m2",
    .description = "MiniMax-M2: hidden 3072, 256 experts top-8, inter 1536, sigmoid+bias, no shared, "
                   "rsf 1.0 (none in the public config)",
    .hidden = 3072, .n_experts = 256, .top_k = 8, .inter = 1536, .n_shared = 0, .shared_inter = 0,
    .routed_format = TPM_WFMT_BF16, .shared_format = TPM_WFMT_BF16,
    .router = TPM_ROUTER_SIGMOID_BIAS, .n_groups = 1, .topk_groups = 1,
    .routed_scaling_factor = 1.0f,
    .act = TPM_ACT_SILU_GLU, .act_alpha = 1.0f, .act_limit = 0.0f, .act_beta = 0.0f,
    .expert_bias = 0, .layers = 62, .dense_layers = 0,
};

static const tpm_preset *const presets[] = {
    &preset_m3,     &preset_m3_mini,      &preset_dsv3, &preset_dsv3_mini,
    &preset_gpt_oss, &preset_gpt_oss_mini, &preset_m2,   NULL,
};

const tpm_preset *tpm_preset_find(const char *name) {
    if (!name) return NULL;
    for (const tpm_preset *const *p = presets; *p; p++)
        if (!strcmp((*p)->name, name)) return *p;
    return NULL;
}

const tpm_preset *const *tpm_preset_list(void) { return presets; }
