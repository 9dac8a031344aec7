/*
 * tpmoe.c - the `tpmoe` command-line tool: dispatches to one subcommand.
 * Build: part of the CMake build (target tpmoe_cli, binary `tpmoe`).
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add one row per subcommand; the function lives in tools/cmd_<name>.c. */
static const cli_command commands[] = {
    {"config", cmd_config, "print the resolved configuration, its reasons and the dispatch table"},
    {"allreduce", cmd_allreduce, "run + validate the CPU all-reduce across ranks (threads or processes)"},
    {"gen-weights", cmd_gen_weights, "write random MoE weights of a preset (safetensors)"},
    {"moe", cmd_moe, "run one MoE layer over tp x ep rank threads (routing, timings, --check)"},
    {"accuracy", cmd_accuracy, "residual MoE stack: codec error per layer vs the exact run"},
    {NULL, NULL, NULL},
};

static const cli_command bench_commands[] = {
    {"moe", cmd_bench_moe, "CUDA MoE layer (fused shared expert): validate, time phases, floors"},
    {"allreduce", cmd_bench_allreduce, "time the CUDA all-reduce against NCCL (graphs, JSON, plot)"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f) {
    fprintf(f, "tpmoe %d.%d.%d - quick all-reduce and fused-shared-expert MoE for tensor-parallel "
               "MoE serving\n\nusage: tpmoe <command> [options]   (tpmoe <command> --help)\n\n"
               "commands:\n",
            TPM_VERSION_MAJOR, TPM_VERSION_MINOR, TPM_VERSION_PATCH);
    for (const cli_command *c = commands; c->name; c++) fprintf(f, "  %-14s %s\n", c->name, c->summary);
    for (const cli_command *c = bench_commands; c->name; c++)
        fprintf(f, "  bench %-8s %s\n", c->name, c->summary);
}

static int run_table(const cli_command *table, const char *what, int argc, char **argv) {
    for (const cli_command *c = table; c->name; c++)
        if (!strcmp(argv[0], c->name)) return c->fn(argc, argv);
    fprintf(stderr, "tpmoe: unknown %s '%s'\n\n", what, argv[0]);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv) {
    /* ranks sharing a GPU (TPMOE_CUDA_SHARE_GPU=1, a test mode): load every kernel at start,
     * since a lazily loaded kernel's first launch may wait for the device while another
     * rank's all-reduce spins there for this rank */
    const char *share = getenv("TPMOE_CUDA_SHARE_GPU");
    if (share && !strcmp(share, "1") && !getenv("CUDA_MODULE_LOADING"))
        setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    /* and as many hardware queues as CUDA has (8 by default): two ranks' streams on one queue
     * serialize, so one rank's work could wait behind another's all-reduce spinning for it */
    if (share && !strcmp(share, "1") && !getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
        setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tpmoe %d.%d.%d\n", TPM_VERSION_MAJOR, TPM_VERSION_MINOR, TPM_VERSION_PATCH);
        return 0;
    }
    if (!strcmp(argv[1], "bench")) {
        if (argc < 3 || !strcmp(argv[2], "--help") || !strcmp(argv[2], "-h")) {
            usage(argc < 3 ? stderr : stdout);
            return argc < 3 ? 2 : 0;
        }
        return run_table(bench_commands, "benchmark", argc - 2, argv + 2);
    }
    return run_table(commands, "command", argc - 1, argv + 1);
}
