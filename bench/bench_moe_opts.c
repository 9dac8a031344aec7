/*
 * bench_moe_opts.c - `tpmoe bench moe`'s usage, option parsing and the
 * tuning options applied to a layer (bench/bench_moe_opts.h).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#ifdef TPMOE_HAVE_CUDA

#include "bench_moe_opts.h"
#include "internal.h"

#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: tpmoe bench moe [--preset P] [--tokens LIST] [--tp N] [--ep M] [--allreduce tpmoe|nccl]\n"
            "                       [--shard N] [--fuse-shared 0|1|both|0,1]\n"
            "                       [--path auto|decode|prefill] [--decode-kernel 0|1] [--decode-max N]\n"
            "                       [--route-gemm-min N] [--route-legacy 0|1] [--route-experts 0|8|16|32] [--route-wide N]\n"
            "                       [--route-perm-min N] [--route-poll 0..63] [--route-tc MIN:MAX] [--route-tc-clusters N]\n"
            "                       [--route-cl MIN:MAX] [--route-cl-size 0|8|16] [--route-cluster-meet N]\n"
            "                       [--route-tc-wide N] [--route-tc-fit 0|1] [--route-tc-split 1|2|4]\n"
            "                       [--route-tc-loads ring|direct|pipe|pipef32] [--expert-wait 0|1] [--route-fence 0|1] [--trace N]\n"
            "                       [--trace-route N]\n"
            "                       [--shared-plan auto|slot|split] [--prefill-gemm loop|grouped|streams|wgmma] [--flush write|read|none] [--pdl 0|1]\n"
            "                       [--down-kernel 0..4] [--gate-up-pairs 1|2] [--gate-up-pipe 0|1] [--shared-overlap 0|1] [--prefill-cluster -1..3] [--prefill-band N] [--prefill-early N]\n"
            "                       [--shared-mma N]\n"
            "                       [--prefill-down-early N]\n"
            "                       [--reps N] [--check N] [--gemm-hold S]\n"
            "                       [--seed S] [--json FILE] [--png FILE]\n"
            "  --preset P        model preset (default m3)\n"
            "  --tokens LIST     comma list of token counts (default 1,8,32,128,1024,8192)\n"
            "  --tp N            tensor-parallel GPUs, one host thread each (default 1)\n"
            "  --ep M            expert-parallel groups of tp GPUs (default 1): tp x ep GPUs,\n"
            "                    rank r = TP rank r %% tp of EP rank r / tp on GPU r; the memory floor\n"
            "                    is the busiest rank's touched bytes\n"
            "  --shard N         one GPU: TP rank 0's share of a TP N layer (inter / N rows per expert,\n"
            "                    the same kernels and plans as that rank), without the all-reduce; the\n"
            "                    check holds it to the fp64 share over rank 0's intermediate rows\n"
            "  --allreduce X     TP sum: tpmoe's exact all-reduce (default) or ncclAllReduce (nccl)\n"
            "  --fuse-shared X   shared expert fused as slot E (1), dense beside it (0), or both (default:\n"
            "                    the fused layer first; 1,0 the same, 0,1 the unfused layer first)\n"
            "  --path X          force the decode (<= %d tokens) or prefill path (default auto)\n"
            "  --decode-kernel K decode kernels: 0 two scalar GEMV launches, 1 one persistent\n"
            "                    tensor-core launch, 2 the GEMV launches of set 2 (default: the layer's)\n"
            "  --pdl B           decode kernel 2: programmatic dependent launch on (1) or off (0)\n"
            "  --down-kernel K   decode kernel 2, <= 8 tokens: down rows through registers, 2 rows x 4\n"
            "                    chunks per warp (0), 4 x 2 (2), 1 x 8 (3), 8 x 1 (4), or a\n"
            "                    cp.async.bulk shared-memory ring (1) (default: the layer's)\n"
            "  --gate-up-pairs P decode kernel 2, <= 8 tokens: gate/up row pairs per warp, 1 (x 4\n"
            "                    chunks) or 2 (x 2) (default: the layer's, by size)\n"
            "  --route-stop N    diagnostic: the routing launch stops after its logits (1), slice\n"
            "                    sums (2) or selection (3); results invalid, phase times by difference\n"
            "  --decode-max N    path auto: decode up to N tokens (default: the layer's)\n"
            "  --route-gemm-min N  router as a tensor-core GEMM from N tokens, one fused launch below\n"
            "  --route-legacy B  1: the older two-launch routing (for comparison)\n"
            "  --route-experts N router experts per logits block, 8, 16 or 32; 0 = by size (default: the layer's)\n"
            "  --route-wide N    mode 1 from 9 up to N <= 16 tokens in one row of 16-token blocks (0 = never;\n"
            "                    default: the layer's)\n"
            "  --route-perm-min N  routing modes 1 (several 8-token tiles) and 3: from N tokens every\n"
            "                    selecting block writes its group's permutation rows (0 = never;\n"
            "                    default: the layer's)\n"
            "  --route-poll M    partial logits polled by the block that sums them instead of a fenced ticket:\n"
            "                    bit 0 mode 1's one row of blocks (1-8 tokens, the wide form), bit 1 mode 3's\n"
            "                    groups, bit 2 mode 1's several rows (0 = tickets; default: the layer's);\n"
            "                    bit 3: mode 3's partial tiles pushed into the summing rank (st.async);\n"
            "                    bit 4: mode 3's polled cluster sums spread over every rank (tiles of <= 64\n"
            "                    tokens); bit 5: with the cluster meeting, its poll spread over the last\n"
            "                    cluster's ranks; the same bits\n"
            "  --route-tc MIN:MAX  one-launch tensor-core routing (mode 3) from MIN to MAX tokens\n"
            "                    (0:0 = off; default: the layer's)\n"
            "  --route-cl MIN:MAX  one-cluster tensor-core routing (mode 4) from MIN to MAX tokens, before\n"
            "                    mode 3 (0:0 = off; default: the layer's)\n"
            "  --route-cl-size N  mode 4: CTAs per cluster, 8 or 16 (0: the largest that fits)\n"
            "  --route-cluster-meet N  mode 3, one token tile: up to N tokens the selecting blocks meet\n"
            "                    at a cluster barrier, above at the global counter (0 = never; default:\n"
            "                    the layer's)\n"
            "  --route-tc-wide N  mode 3 in 128-token tiles (the x slice in shared memory) from N\n"
            "                    tokens where they can run (0 = never; default: the layer's)\n"
            "  --route-tc-fit 0|1  mode 3 on the layer's clusters: 1 = the fewest per token tile\n"
            "                    that keep the most chunks per CTA, 0 = all resident (default: the layer's)\n"
            "  --route-tc-split G  mode 3's 128-token tiles with the experts split in G groups (1, 2, 4;\n"
            "                    E 128; default: the layer's)\n"
            "  --route-tc-clusters N  mode 3: spread over N clusters of 8 CTAs (default 0: as many\n"
            "                    as are resident at once)\n"
            "  --route-tc-loads X  mode 3: fragments straight into registers (direct), through a\n"
            "                    cp.async ring in shared memory (ring), or straight into registers\n"
            "                    in a pipeline of register stages (pipe), or that pipeline on the fp32\n"
            "                    router, split in registers (pipef32) (default: the layer's)\n"
            "  --prefill-early N fused slot plan, prefill: up to N tokens the shared slot's gate_up items\n"
            "                    start before the routing ends (0 = never; default: the layer's)\n"
            "  --prefill-down-early N  wgmma prefill, persistent forms: up to N tokens the down launch\n"
            "                    is chained to gate_up, waiting per expert (0 = never; default: the layer's)\n"
            "  --route-fence B   routing tickets: every thread fences (1) or one acq_rel atomic (0)\n"
            "  --gate-up-pipe B  decode kernel 2, <= 2 tokens: gate_up weight loads in two register\n"
            "                    stages (1) or one (0) (default: the layer's)\n"
            "  --trace N         decode path, one GPU, a -DTPMOE_MOE_TRACE=ON build: the layer's\n"
            "                    timeline (each kernel's first start, first block past its wait,\n"
            "                    last end), medians of N replays\n"
            "  --trace-route N   one GPU, a -DTPMOE_MOE_TRACE=ON build: the routing alone (modes 1\n"
            "                    and 3), its tail's steps (ticket, slice sums, selection, permutation)\n"
            "  --expert-wait B   decode kernel 2, down kernel 2: each down item waits for its own\n"
            "                    expert's gate_up (1) or for the whole gate_up launch (0)\n"
            "  --shared-plan X   fused layer, decode path and wgmma prefill: shared slot inside the\n"
            "                    routed launches (slot), as dense cuBLAS GEMMs (split), or the layer's\n"
            "                    per-call plan (auto)\n"
            "  --prefill-gemm X  prefill expert GEMMs: one cuBLAS call per expert (loop), one grouped\n"
            "                    call per matrix (grouped), the loop over several streams (streams), or\n"
            "                    tpmoe's own wgmma/TMA grouped kernel (wgmma; the default where it runs)\n"
            "  --prefill-cluster C wgmma prefill: by size (-1), one CTA per tile (0), 2-CTA clusters\n"
            "                    sharing each weight tile by multicast (1), persistent 2-CTA\n"
            "                    clusters (2), persistent CTAs (3) (default: the layer's)\n"
            "  --prefill-band N   wgmma prefill: a large expert's row tiles in bands of N (0: one band)\n"
            "                    (default: the layer's)\n"
            "  --shared-overlap B split / unfused shared plan: the shared MLP beside the\n"
            "                    routing on a side stream (1), after it (0), or on the decode path\n"
            "                    beside the routed kernels (2) (default: the layer's)\n"
            "  --shared-mma N    fused slot plan, decode kernel set 2: the shared slot on tensor\n"
            "                    cores from N tokens (0: never) (default: the layer's)\n"
            "  --flush X         L2 flush before every replay: read 256 MB (default: clean lines, as\n"
            "                    after another layer's weights) or write them (dirty lines first\n"
            "                    written back: the rounds 1-4 default);\n"
            "                    none: a 50 us wait instead (weights warm in L2 where they fit)\n"
            "  --reps N          timed replays per phase, median reported (default 20)\n"
            "  --check N         sample tokens validated against the fp64 reference (default 3, max 8)\n"
            "  --seed S          weight seed (default 1)\n"
            "  --gemm-hold S     also time cuBLAS's 8192^3 GEMM back to back for S s, the rate at the\n"
            "                    board's power cap (x_held column; default 3, 0: off)\n"
            "  --json FILE       write every row as JSON\n"
            "  --png FILE        with --json: plot that JSON (time per layer vs tokens, fused and\n"
            "                    unfused, and the floors) by bench/plot_moe.py (needs matplotlib)\n",
            TPM_MOE_DECODE_MAX_NT);
}

/* An integer option in [lo, hi] into *out; 1 (after the usage message) if bad. */
static int int_opt(const char *opt, const char *v, long long lo, long long hi, int *out) {
    long long n;
    if (cli_parse_int(v, lo, hi, &n)) {
        cli_usage_error("bench moe", "%s: bad value '%s'", opt, v);
        return 1;
    }
    *out = (int)n;
    return 0;
}

int bench_moe_parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->p = tpm_preset_find("m3");
    const int64_t def[] = {1, 8, 32, 128, 1024, 8192};
    memcpy(o->tokens, def, sizeof def);
    o->nt = 6;
    o->tp = o->ep = o->shard = 1;
    o->reps = 20;
    o->check = 3;
    o->seed = 1;
    o->fuse[0] = 1;
    o->fuse[1] = 0;
    o->nfuse = 2;
    o->path = TPM_MOE_PATH_AUTO;
    o->decode_kernel = o->decode_max = o->route_gemm_min = o->route_legacy = -1;
    o->down_kernel = -1;
    o->route_stop = -1;
    o->route_experts = -1;
    o->route_wide = -1;
    o->route_perm_min = -1;
    o->route_poll = -1;
    o->route_tc_min = o->route_tc_max = o->route_tc_clusters = o->route_tc_loads = o->expert_wait = o->route_fence = -1;
    o->route_cl_min = o->route_cl_max = o->route_cl_size = o->route_cluster_meet = o->route_tc_wide = o->route_tc_fit = o->route_tc_split = -1;
    o->prefill_early = -1;
    o->prefill_down_early = -1;
    o->gate_up_pipe = -1;
    o->gate_up_pairs = -1;
    o->ar_tpmoe = 1;
    o->gemm_hold = 3;
    o->flush = 1; /* read: L2 full of clean lines, as after the previous layer's weights streamed */
    o->shared_split_min = o->prefill_gemm = o->pdl = o->shared_overlap = -1;
    o->prefill_cluster = -2; /* -2: the layer's default (-1 is "by size") */
    o->prefill_split_min = o->prefill_split_max = o->prefill_band = -1;
    o->shared_mma = -1;
    o->trace = 0;
    o->trace_route = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) return cli_usage_error("bench moe", "option %s needs a value (or unknown option)", a);
        i++;
        if (!strcmp(a, "--preset")) {
            o->p = tpm_preset_find(v);
            if (!o->p) return cli_usage_error("bench moe", "--preset: unknown preset '%s'", v);
        } else if (!strcmp(a, "--tokens")) {
            o->nt = cli_parse_size_list(v, o->tokens, MAX_T);
            if (o->nt <= 0)
                return cli_usage_error("bench moe", "--tokens: bad list '%s' (1 to %d sizes, each >= 1)", v, MAX_T);
            for (int t = 0; t < o->nt; t++)
                if (o->tokens[t] < 1 || o->tokens[t] > 65536)
                    return cli_usage_error("bench moe", "--tokens: %lld outside 1..65536", (long long)o->tokens[t]);
        } else if (!strcmp(a, "--tp")) {
            if (int_opt(a, v, 1, MAX_TP, &o->tp)) return 2;
        } else if (!strcmp(a, "--ep")) {
            if (int_opt(a, v, 1, MAX_TP, &o->ep)) return 2;
        } else if (!strcmp(a, "--shard")) {
            if (int_opt(a, v, 1, MAX_TP, &o->shard)) return 2;
        } else if (!strcmp(a, "--reps")) {
            if (int_opt(a, v, 1, 1000, &o->reps)) return 2;
        } else if (!strcmp(a, "--check")) {
            if (int_opt(a, v, 0, 8, &o->check)) return 2;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, (long long)1 << 62, &n)) return cli_usage_error("bench moe", "--seed: bad value '%s'", v);
            o->seed = (uint64_t)n;
        } else if (!strcmp(a, "--fuse-shared")) {
            if (!strcmp(v, "both") || !strcmp(v, "1,0")) o->nfuse = 2, o->fuse[0] = 1, o->fuse[1] = 0;
            else if (!strcmp(v, "0,1")) o->nfuse = 2, o->fuse[0] = 0, o->fuse[1] = 1;
            else if (!strcmp(v, "1")) o->nfuse = 1, o->fuse[0] = 1;
            else if (!strcmp(v, "0")) o->nfuse = 1, o->fuse[0] = 0;
            else return cli_usage_error("bench moe", "--fuse-shared: '%s' is not 0, 1, both, 1,0 or 0,1", v);
        } else if (!strcmp(a, "--path")) {
            if (!strcmp(v, "auto")) o->path = TPM_MOE_PATH_AUTO;
            else if (!strcmp(v, "decode")) o->path = TPM_MOE_PATH_DECODE;
            else if (!strcmp(v, "prefill")) o->path = TPM_MOE_PATH_PREFILL;
            else return cli_usage_error("bench moe", "--path: '%s' is not auto, decode or prefill", v);
        } else if (!strcmp(a, "--decode-kernel")) {
            if (int_opt(a, v, 0, 2, &o->decode_kernel)) return 2;
        } else if (!strcmp(a, "--allreduce")) {
            if (!strcmp(v, "tpmoe")) o->ar_tpmoe = 1;
            else if (!strcmp(v, "nccl")) o->ar_tpmoe = 0;
            else return cli_usage_error("bench moe", "--allreduce: '%s' is not tpmoe or nccl", v);
        } else if (!strcmp(a, "--route-stop")) {
            if (int_opt(a, v, 0, 6, &o->route_stop)) return 2; /* 5, 6: trace builds (the layer checks) */
        } else if (!strcmp(a, "--down-kernel")) {
            if (int_opt(a, v, 0, 4, &o->down_kernel)) return 2;
        } else if (!strcmp(a, "--gate-up-pairs")) {
            if (int_opt(a, v, 1, 2, &o->gate_up_pairs)) return 2;
        } else if (!strcmp(a, "--decode-max")) {
            if (int_opt(a, v, 0, TPM_MOE_DECODE_MAX_NT, &o->decode_max)) return 2;
        } else if (!strcmp(a, "--route-experts")) {
            if (int_opt(a, v, 0, 32, &o->route_experts)) return 2;
        } else if (!strcmp(a, "--route-wide")) {
            if (int_opt(a, v, 0, 16, &o->route_wide)) return 2;
        } else if (!strcmp(a, "--route-poll")) {
            if (int_opt(a, v, 0, 63, &o->route_poll)) return 2;
        } else if (!strcmp(a, "--route-perm-min")) {
            if (int_opt(a, v, 0, 1 << 20, &o->route_perm_min)) return 2;
        } else if (!strcmp(a, "--route-tc")) {
            if (sscanf(v, "%d:%d", &o->route_tc_min, &o->route_tc_max) != 2 || o->route_tc_min < 0 ||
                o->route_tc_max < 0) {
                fprintf(stderr, "tpmoe bench moe: --route-tc wants MIN:MAX, got '%s'\n", v);
                return 2;
            }
            if (o->route_tc_min == 0) o->route_tc_min = 1, o->route_tc_max = 0; /* 0:0 = off */
        } else if (!strcmp(a, "--route-cl")) {
            if (sscanf(v, "%d:%d", &o->route_cl_min, &o->route_cl_max) != 2 || o->route_cl_min < 0 ||
                o->route_cl_max < 0) {
                fprintf(stderr, "tpmoe bench moe: --route-cl wants MIN:MAX, got '%s'\n", v);
                return 2;
            }
            if (o->route_cl_min == 0) o->route_cl_min = 1, o->route_cl_max = 0; /* 0:0 = off */
        } else if (!strcmp(a, "--route-cl-size")) {
            if (int_opt(a, v, 0, 16, &o->route_cl_size)) return 2;
            if (o->route_cl_size != 0 && o->route_cl_size != 8 && o->route_cl_size != 16) {
                fprintf(stderr, "tpmoe bench moe: --route-cl-size wants 0, 8 or 16, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--route-cluster-meet")) {
            if (int_opt(a, v, 0, 1 << 20, &o->route_cluster_meet)) return 2;
        } else if (!strcmp(a, "--route-tc-wide")) {
            if (int_opt(a, v, 0, 1 << 20, &o->route_tc_wide)) return 2;
        } else if (!strcmp(a, "--route-tc-fit")) {
            if (int_opt(a, v, 0, 1, &o->route_tc_fit)) return 2;
        } else if (!strcmp(a, "--route-tc-split")) {
            if (int_opt(a, v, 1, 4, &o->route_tc_split)) return 2;
        } else if (!strcmp(a, "--route-tc-loads")) {
            if (!strcmp(v, "ring")) o->route_tc_loads = 0;
            else if (!strcmp(v, "direct")) o->route_tc_loads = 1;
            else if (!strcmp(v, "pipe")) o->route_tc_loads = 2;
            else if (!strcmp(v, "pipef32")) o->route_tc_loads = 3;
            else {
                fprintf(stderr, "tpmoe bench moe: --route-tc-loads wants ring, direct, pipe or pipef32, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--prefill-early")) {
            if (int_opt(a, v, 0, 1 << 20, &o->prefill_early)) return 2;
        } else if (!strcmp(a, "--prefill-down-early")) {
            if (int_opt(a, v, 0, 1 << 20, &o->prefill_down_early)) return 2;
        } else if (!strcmp(a, "--route-fence")) {
            if (int_opt(a, v, 0, 1, &o->route_fence)) return 2;
        } else if (!strcmp(a, "--expert-wait")) {
            if (int_opt(a, v, 0, 1, &o->expert_wait)) return 2;
        } else if (!strcmp(a, "--route-tc-clusters")) {
            if (int_opt(a, v, 0, 64, &o->route_tc_clusters)) return 2;
        } else if (!strcmp(a, "--route-gemm-min")) {
            if (int_opt(a, v, 1, 1 << 20, &o->route_gemm_min)) return 2;
        } else if (!strcmp(a, "--gate-up-pipe")) {
            if (int_opt(a, v, 0, 1, &o->gate_up_pipe)) return 2;
        } else if (!strcmp(a, "--trace")) {
            if (int_opt(a, v, 0, 1000, &o->trace)) return 2;
        } else if (!strcmp(a, "--trace-route")) {
            if (int_opt(a, v, 0, 1000, &o->trace_route)) return 2;
        } else if (!strcmp(a, "--route-legacy")) {
            if (int_opt(a, v, 0, 1, &o->route_legacy)) return 2;
        } else if (!strcmp(a, "--shared-plan")) {
            if (!strcmp(v, "auto")) o->shared_split_min = o->prefill_split_min = o->prefill_split_max = -1;
            else if (!strcmp(v, "slot")) o->shared_split_min = o->prefill_split_min = 1 << 20, o->prefill_split_max = 0;
            else if (!strcmp(v, "split")) o->shared_split_min = o->prefill_split_min = 1, o->prefill_split_max = -1;
            else return cli_usage_error("bench moe", "--shared-plan: '%s' is not auto, slot or split", v);
        } else if (!strcmp(a, "--prefill-gemm")) {
            if (!strcmp(v, "loop")) o->prefill_gemm = TPM_MOE_GEMM_LOOP;
            else if (!strcmp(v, "grouped")) o->prefill_gemm = TPM_MOE_GEMM_GROUPED;
            else if (!strcmp(v, "streams")) o->prefill_gemm = TPM_MOE_GEMM_STREAMS;
            else if (!strcmp(v, "wgmma")) o->prefill_gemm = TPM_MOE_GEMM_WGMMA;
            else return cli_usage_error("bench moe", "--prefill-gemm: '%s' is not loop, grouped, streams or wgmma", v);
        } else if (!strcmp(a, "--prefill-cluster")) {
            if (int_opt(a, v, -1, 3, &o->prefill_cluster)) return 2;
        } else if (!strcmp(a, "--prefill-band")) {
            if (int_opt(a, v, 0, 1 << 20, &o->prefill_band)) return 2;
        } else if (!strcmp(a, "--shared-overlap")) {
            if (int_opt(a, v, 0, 2, &o->shared_overlap)) return 2;
        } else if (!strcmp(a, "--shared-mma")) {
            if (int_opt(a, v, 0, 1 << 20, &o->shared_mma)) return 2;
        } else if (!strcmp(a, "--pdl")) {
            if (int_opt(a, v, 0, 1, &o->pdl)) return 2;
        } else if (!strcmp(a, "--flush")) {
            if (!strcmp(v, "write")) o->flush = 0;
            else if (!strcmp(v, "read")) o->flush = 1;
            else if (!strcmp(v, "none")) o->flush = 2;
            else return cli_usage_error("bench moe", "--flush: '%s' is not write, read or none", v);
        } else if (!strcmp(a, "--gemm-hold")) {
            if (int_opt(a, v, 0, 60, &o->gemm_hold)) return 2;
        } else if (!strcmp(a, "--json")) {
            o->json = v;
        } else if (!strcmp(a, "--png")) {
            o->png = v;
        } else {
            return cli_usage_error("bench moe", "unknown option '%s'", a);
        }
    }
    if (o->png && !o->json) return cli_usage_error("bench moe", "--png needs --json");
    if (o->p->n_shared == 0) o->nfuse = 1; /* nothing to fuse */
    return -1;
}

tpm_status bench_moe_apply_tuning(tpm_cuda_moe *m, const opts *o) {
    tpm_cuda_moe_tuning t;
    TPM_TRY(tpm_cuda_moe_get_tuning(m, &t));
    if (o->decode_kernel >= 0) t.decode_kernel = o->decode_kernel;
    if (o->decode_max >= 0) t.decode_max_tokens = o->decode_max;
    if (o->route_gemm_min >= 0) t.route_gemm_min = o->route_gemm_min;
    if (o->route_legacy >= 0) t.route_legacy = o->route_legacy;
    if (o->route_experts >= 0) t.route_experts = o->route_experts;
    if (o->route_wide >= 0) t.route_wide = o->route_wide;
    if (o->route_perm_min >= 0) t.route_perm_min = o->route_perm_min;
    if (o->route_poll >= 0) t.route_poll = o->route_poll;
    if (o->route_tc_min >= 0) t.route_tc_min = o->route_tc_min;
    if (o->route_tc_max >= 0) t.route_tc_max = o->route_tc_max;
    if (o->route_tc_clusters >= 0) t.route_tc_clusters = o->route_tc_clusters;
    if (o->route_tc_loads >= 0) t.route_tc_loads = o->route_tc_loads;
    if (o->route_cl_min >= 0) t.route_cl_min = o->route_cl_min;
    if (o->route_cl_max >= 0) t.route_cl_max = o->route_cl_max;
    if (o->route_cl_size >= 0) t.route_cl_size = o->route_cl_size;
    if (o->route_cluster_meet >= 0) t.route_cluster_meet = o->route_cluster_meet;
    if (o->route_tc_wide >= 0) t.route_tc_wide = o->route_tc_wide;
    if (o->route_tc_fit >= 0) t.route_tc_fit = o->route_tc_fit;
    if (o->route_tc_split >= 0) t.route_tc_split = o->route_tc_split;
    if (o->prefill_early >= 0) t.prefill_early = o->prefill_early;
    if (o->prefill_down_early >= 0) t.prefill_down_early = o->prefill_down_early;
    if (o->expert_wait >= 0) t.expert_wait = o->expert_wait;
    if (o->route_fence >= 0) t.route_fence = o->route_fence;
    if (o->gate_up_pipe >= 0) t.gate_up_pipe = o->gate_up_pipe;
    if (o->gate_up_pairs >= 0) t.gate_up_pairs = o->gate_up_pairs;
    if (o->shared_split_min >= 0) t.shared_split_min = o->shared_split_min;
    if (o->prefill_split_min >= 0) t.prefill_split_min = o->prefill_split_min;
    if (o->prefill_split_max >= 0) t.prefill_split_max = o->prefill_split_max;
    if (o->prefill_gemm >= 0) t.prefill_gemm = o->prefill_gemm;
    if (o->pdl >= 0) t.pdl = o->pdl;
    if (o->down_kernel >= 0) t.down_kernel = o->down_kernel;
    if (o->shared_overlap >= 0) t.shared_overlap = o->shared_overlap;
    if (o->prefill_cluster >= -1) t.prefill_cluster = o->prefill_cluster;
    if (o->prefill_band >= 0) t.prefill_band = o->prefill_band;
    if (o->shared_mma >= 0) t.shared_mma = o->shared_mma;
    return tpm_cuda_moe_set_tuning(m, &t);
}

#endif
