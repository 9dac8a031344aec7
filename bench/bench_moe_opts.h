/*
 * bench_moe_opts.h - the options of `tpmoe bench moe` (bench/bench_moe_opts.c
 * parses them and applies the tuning ones to a layer; bench/bench_moe.c runs
 * the benchmark). CUDA builds only.
 */
#ifndef TPM_BENCH_MOE_OPTS_H
#define TPM_BENCH_MOE_OPTS_H

#include "model/presets.h"
#include "moe/moe_cuda.h"

#include <stdint.h>

#define MAX_T 16
#define MAX_TP 8

typedef struct opts {
    const tpm_preset *p;
    int64_t tokens[MAX_T];
    int nt, tp, ep, world, reps, check; /* world = tp x ep GPUs, rank r on GPU r */
    int shard; /* > 1: TP rank 0's share of a TP `shard` layer, alone on GPU 0 (no all-reduce) */
    int fuse[2], nfuse;
    tpm_moe_path path;
    int decode_kernel, decode_max, route_gemm_min, route_legacy; /* -1: the layer's default */
    int down_kernel, route_stop, route_experts, route_wide, route_perm_min, route_poll, gate_up_pairs, route_tc_min, route_tc_max, route_tc_clusters, route_tc_loads, route_cl_min, route_cl_max, route_cl_size, route_cluster_meet, route_tc_wide, route_tc_fit, route_tc_split, expert_wait, route_fence,
        gate_up_pipe, prefill_early, prefill_down_early;
    int ar_tpmoe; /* TP all-reduce: 1 tpmoe's (default), 0 NCCL */
    int shared_split_min, prefill_gemm, pdl, shared_overlap, prefill_cluster, prefill_split_min, prefill_split_max; /* -1: the layer's default */
    int prefill_band;
    int shared_mma;                                                /* -1: the layer's default */
    int trace;                                                     /* decode timeline replays (TPM_MOE_TRACE builds) */
    int trace_route;                                               /* routing-alone timeline replays (the same) */
    int flush;                                                     /* 0 write, 1 read */
    int gemm_hold;                                                 /* s of back-to-back cuBLAS GEMMs (0: off) */
    uint64_t seed;
    const char *json;
    const char *png; /* with json: the plot (bench/plot_moe.py) */
} opts;

/* Parse argv into o (defaults first): -1 to go on, else the exit code (usage printed). */
int bench_moe_parse(int argc, char **argv, opts *o);
/* Every tuning option that was given, applied to layer m. */
tpm_status bench_moe_apply_tuning(tpm_cuda_moe *m, const opts *o);

#endif
