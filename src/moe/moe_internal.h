/*
 * moe_internal.h - the MoE layer object shared by the backends (not
 * installed).
 *
 * moe_layer.c owns the public tpm_moe_* entry points: it validates the
 * config, resolves the fusion policy, loads the weights and cuts this rank's
 * shard (host fp32, the layout below), then calls the backend's ops. The CPU
 * backend (moe_cpu.c) computes on the shard directly; a CUDA backend converts
 * and uploads it in its init. Backends never see an invalid argument.
 * The CUDA backend (moe_cuda_backend.c) uploads the full host weights
 * straight to the GPU layer (src/moe/moe_cuda.h): its host stacks below keep
 * only their shapes (n, inter) and no arrays.
 *
 * Shard layout (this rank): n_slots expert slots stacked in one array each,
 * slot i < n_local_routed is routed expert expert_begin + i, the fused shared
 * experts (when fused) follow. Per slot, the TP shard of the intermediate:
 *   gate_up [2*inter_local x hidden]  uninterleaved: local gate rows then local
 *                                     up rows; interleaved: local pairs
 *   gate_up_bias [2*inter_local]      or NULL
 *   down [hidden x inter_local]       the matching columns of down
 *   down_bias [hidden]                or NULL; only on tp_rank 0 (it must be
 *                                     added once per expert)
 * The unfused shared experts are kept apart, sharded on their intermediate
 * over all world ranks (shard index = global rank).
 */
#ifndef TPM_MOE_INTERNAL_H
#define TPM_MOE_INTERNAL_H

#include "internal.h"
#include "model/moe_weights.h"
#include "model/presets.h"
#include "moe/moe_math.h"
#include "tpmoe.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tpm_moe;

typedef struct tpm_moe_ops {
    const char *name; /* "cpu", "cuda" */
    /* Arguments already validated (dtype is the layer's, comm matches). */
    tpm_status (*forward)(struct tpm_moe *m, tpm_comm_t comm, const void *x, void *y,
                          size_t ntokens, void *stream);
    void (*destroy)(struct tpm_moe *m);
    /* Bring the last forward's routing record and stats to the host (waits
     * for it); NULL when forward fills them itself (CPU). Called by
     * tpm_moe_last_stats and tpm_moe_last_routing. */
    tpm_status (*collect)(struct tpm_moe *m);
} tpm_moe_ops;

/* A stack of expert slots, all with the same intermediate shard. */
typedef struct tpm_moe_stack {
    int n;                                            /* slots */
    int inter;                                        /* per slot intermediate (local shard) */
    float *gate_up, *gate_up_bias, *down, *down_bias; /* see above */
} tpm_moe_stack;

/* The view of slot i of a stack. */
static inline tpm_expert_view tpm_moe_stack_view(const tpm_moe_stack *s, int hidden, int i) {
    size_t gu = 2 * (size_t)s->inter * (size_t)hidden, dn = (size_t)hidden * (size_t)s->inter;
    tpm_expert_view v;
    v.gate_up = s->gate_up + (size_t)i * gu;
    v.gate_up_bias = s->gate_up_bias ? s->gate_up_bias + (size_t)i * 2 * (size_t)s->inter : NULL;
    v.down = s->down + (size_t)i * dn;
    v.down_bias = s->down_bias ? s->down_bias + (size_t)i * (size_t)hidden : NULL;
    return v;
}

struct tpm_moe {
    const tpm_moe_ops *ops;
    const tpm_preset *preset;
    tpm_router_params rp;
    tpm_act_params ap;
    int hidden, n_experts, top_k, inter, n_shared, shared_inter;
    int tp_rank, tp_size, ep_rank, ep_size, rank, world;
    int fuse; /* shared experts fused as slots */
    char fuse_reason[512];
    tpm_dtype dtype;
    tpm_backend backend;
    tpm_codec codec;
    tpm_algo algo;
    int device;

    /* Weights (host fp32). */
    float *router;                /* [E x H], replicated */
    float *router_bias;           /* [E] or NULL */
    int expert_begin, expert_end; /* routed experts of this EP rank */
    tpm_moe_stack experts;        /* routed local slots + fused shared slots */
    tpm_moe_stack shared;         /* unfused shared experts (n = 0 when fused) */

    /* The last forward. */
    size_t last_ntokens, routing_cap;
    int32_t *last_ids;   /* [cap x k] */
    float *last_weights; /* [cap x k] */
    int32_t *counts;     /* [E + n_shared] */
    tpm_moe_stats stats;

    char last_error[TPM_ERRMSG_LEN];
    void *impl; /* backend state */
};

/* Create one rank's layer from weights already in memory (the CLI loads a
 * file once for all its thread ranks; the CUDA tests hand in their own). w is
 * only read; cfg->weights and cfg->seed are ignored. */
tpm_status tpm_moe_create_from_weights(tpm_moe_t *moe, const tpm_moe_config *cfg, tpm_comm_t comm,
                                       const tpm_moe_weights *w);

/* Grow the routing record to hold ntokens tokens. */
tpm_status tpm_moe_reserve_routing(struct tpm_moe *m, size_t ntokens);

/* CPU backend: this rank's partial output in fp32 ([ntokens x hidden]),
 * before the all-reduce; fills the routing record and the stats' router,
 * experts and combine times. The tests sum these over ranks by hand. */
tpm_status tpm_moe_cpu_partial(struct tpm_moe *m, const void *x, size_t ntokens, float *partial);

/* Backend constructors (moe_cpu.c, moe_cuda_backend.c). */
tpm_status tpm_moe_cpu_init(struct tpm_moe *m);
#ifdef TPMOE_HAVE_CUDA
/* Backend AUTO: the comm's backend when comm is given, else CUDA when a GPU
 * is visible, else CPU. */
tpm_backend tpm_moe_cuda_auto_backend(tpm_comm_t comm);
/* Before the weights are loaded: refuse what the CUDA backend cannot run
 * (dtype other than bf16, ep_size > 1, no GPU, shapes the kernels do not
 * take, a non-CUDA comm) and resolve m->device (config, else the comm's
 * device: tpm_comm_init_all's devices[rank], tpm_comm_init's cfg.device or
 * rank % GPUs; else the current device). */
tpm_status tpm_moe_cuda_check(struct tpm_moe *m, tpm_comm_t comm);
/* Build this rank's GPU layer from the full host weights w (only read). */
tpm_status tpm_moe_cuda_init(struct tpm_moe *m, const tpm_moe_weights *w);
#endif

/* The fp64 reference over full weights (unsharded), for --check and tests:
 * views into w. experts: [n_experts], shared: [n_shared] arrays owned by the
 * caller. */
void tpm_moe_ref_layer_from_weights(const tpm_moe_weights *w, tpm_expert_view *experts,
                                    tpm_expert_view *shared, tpm_moe_ref_layer *L);

#ifdef __cplusplus
}
#endif
#endif /* TPM_MOE_INTERNAL_H */
