/*
 * moe_weights.h - one MoE layer's weights as plain fp32 arrays, loaded from a
 * safetensors file (names in docs/weights.md) or generated from a seed.
 *
 * Layout (row-major, y = W x with W [out x in]):
 *   router       [E x H]           gate.weight (fp32 logits)
 *   router_bias  [E] or NULL       e_score_correction_bias (selection only)
 *   per expert (routed and shared, each its own arrays, never stacked):
 *     gate_up    [2I x H]          uninterleaved presets: rows 0..I-1 gate
 *                                  (w1), rows I..2I-1 up (w3). Interleaved
 *                                  presets (gpt-oss): row 2i gate_i, row
 *                                  2i+1 up_i.
 *     gate_up_bias [2I] or NULL    same row order as gate_up (gpt-oss)
 *     down       [H x I]           w2
 *     down_bias  [H] or NULL       (gpt-oss)
 * Values are fp32 converted from the file dtype; gen-weights writes values
 * that are exact in the file dtype, so tpm_moe_weights_random() with the same
 * preset, seed, layer and format gives bit-identical arrays.
 */
#ifndef TPM_MOE_WEIGHTS_H
#define TPM_MOE_WEIGHTS_H

#include "model/presets.h"
#include "model/safetensors.h"
#include "tpmoe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpm_expert_weights {
    float *gate_up;      /* [2I x H] */
    float *gate_up_bias; /* [2I] or NULL */
    float *down;         /* [H x I] */
    float *down_bias;    /* [H] or NULL */
} tpm_expert_weights;

typedef struct tpm_moe_weights {
    const tpm_preset *preset;
    int layer;
    int hidden, n_experts, inter, n_shared, shared_inter;
    int interleaved;              /* gate_up rows interleaved (see above) */
    float *router;                /* [E x H] */
    float *router_bias;           /* [E] or NULL */
    tpm_expert_weights *experts;  /* [n_experts] */
    tpm_expert_weights *shared;   /* [n_shared] or NULL */
} tpm_moe_weights;

/* Tensor name of layer `layer`: part is "gate.weight",
 * "e_score_correction_bias", "experts.{e}.w1.weight", ... (see
 * docs/weights.md). Returns TPM_ERR_INVALID_ARG if buf is too small. */
tpm_status tpm_moe_tensor_name(char *buf, size_t len, int layer, const char *part);

/* Load layer `layer` (all experts) from f; checks every name, dtype and
 * shape against the preset (TPM_ERR_IO naming the tensor on mismatch).
 * *w is overwritten; free with tpm_moe_weights_free. */
tpm_status tpm_moe_weights_load(const tpm_st_file *f, const tpm_preset *p, int layer,
                                tpm_moe_weights *w);

/* The weights gen-weights writes for (preset, seed, layer) in file format
 * fmt, as the loader would return them. _random is layer 0, preset's
 * routed_format. */
tpm_status tpm_moe_weights_random(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w);
tpm_status tpm_moe_weights_random_layer(const tpm_preset *p, uint64_t seed, int layer,
                                        tpm_weight_format fmt, tpm_moe_weights *w);

/* Frees the arrays and zeroes *w (safe on a zeroed or freed struct). */
void tpm_moe_weights_free(tpm_moe_weights *w);

/* MARK: generation (used by gen-weights and _random) */
/* Bytes of one layer in format fmt (weights, scales, router, biases). */
uint64_t tpm_moe_layer_bytes(const tpm_preset *p, tpm_weight_format fmt);

/* Write n_layers random layers (0..n_layers-1) of preset p to path,
 * streaming one tensor at a time (peak memory ~ one expert matrix). progress
 * (optional) is called after each tensor with the bytes written so far and
 * the total. Metadata: format=pt, tpmoe_preset, tpmoe_seed, tpmoe_dtype,
 * tpmoe_layers. */
typedef void (*tpm_progress_fn)(uint64_t done, uint64_t total, void *user);
tpm_status tpm_moe_weights_generate(const tpm_preset *p, uint64_t seed, int n_layers,
                                    tpm_weight_format fmt, const char *path,
                                    tpm_progress_fn progress, void *user);

#ifdef __cplusplus
}
#endif
#endif /* TPM_MOE_WEIGHTS_H */
