/*
 * cmd_config.c - `tpmoe config`: print the resolved configuration (every
 * value with its source, every rule with its reason) and the dispatch table.
 */
#include "cli.h"
#include "comm/comm_internal.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void config_help(FILE *f) {
    fprintf(f,
            "usage: tpmoe config [--preset P] [--tp N] [--ep M] [--world W] [--backend auto|cpu|cuda]\n"
            "                    [--codec C] [--fuse-shared auto|0|1] [--dtype bf16|fp16|fp32]\n\n"
            "Prints the configuration tpmoe resolves from the API fields given here, the\n"
            "environment (TPMOE_*) and the per-model rules, with the source of every value\n"
            "and the reason for every rule, then the all-reduce dispatch table.\n"
            "World defaults to tp*ep. An invalid environment value exits 2 naming it.\n");
}

int cmd_config(int argc, char **argv) {
    static const struct option opts[] = {
        {"preset", required_argument, 0, 'p'}, {"tp", required_argument, 0, 't'},
        {"ep", required_argument, 0, 'e'},     {"world", required_argument, 0, 'w'},
        {"backend", required_argument, 0, 'b'}, {"codec", required_argument, 0, 'c'},
        {"fuse-shared", required_argument, 0, 'f'}, {"dtype", required_argument, 0, 'd'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    tpm_config cfg = TPM_CONFIG_INIT;
    long long v;
    int world = -1;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': cfg.model = optarg; break;
        case 't':
            if (cli_parse_int(optarg, 1, 8, &v)) return cli_usage_error("config", "--tp '%s' is invalid (1..8)", optarg);
            cfg.tp = (int32_t)v;
            break;
        case 'e':
            if (cli_parse_int(optarg, 1, 8, &v)) return cli_usage_error("config", "--ep '%s' is invalid (1..8)", optarg);
            cfg.ep = (int32_t)v;
            break;
        case 'w':
            if (cli_parse_int(optarg, 1, 8, &v)) return cli_usage_error("config", "--world '%s' is invalid (1..8)", optarg);
            world = (int)v;
            break;
        case 'b':
            if (!strcmp(optarg, "auto")) cfg.backend = TPM_BACKEND_AUTO;
            else if (!strcmp(optarg, "cpu")) cfg.backend = TPM_BACKEND_CPU;
            else if (!strcmp(optarg, "cuda")) cfg.backend = TPM_BACKEND_CUDA;
            else return cli_usage_error("config", "--backend '%s' is invalid (auto, cpu, cuda)", optarg);
            break;
        case 'c':
            if (tpm_codec_parse(optarg, &cfg.codec) != TPM_OK) return cli_usage_error("config", "--codec: %s", tpm_last_error());
            break;
        case 'f':
            if (!strcmp(optarg, "auto")) cfg.fuse_shared = -1;
            else if (!strcmp(optarg, "0")) cfg.fuse_shared = 0;
            else if (!strcmp(optarg, "1")) cfg.fuse_shared = 1;
            else return cli_usage_error("config", "--fuse-shared '%s' is invalid (auto, 0, 1)", optarg);
            break;
        case 'd':
            if (tpm_dtype_parse(optarg, &cfg.dtype) != TPM_OK) return cli_usage_error("config", "--dtype: %s", tpm_last_error());
            break;
        case 'h': config_help(stdout); return 0;
        default: return cli_usage_error("config", "unknown option");
        }
    }
    if (optind < argc) return cli_usage_error("config", "unexpected argument '%s'", argv[optind]);
    int tp = cfg.tp > 0 ? cfg.tp : 1, ep = cfg.ep > 0 ? cfg.ep : 1;
    if (tp * ep > 8) return cli_usage_error("config", "tp %d x ep %d = %d ranks exceeds one node (8)", tp, ep, tp * ep);
    cfg.world_size = world > 0 ? world : tp * ep;
    cfg.rank = 0;
    if (cfg.tp < 0) cfg.tp = tp;

    char report[8192];
    tpm_resolved_config r;
    tpm_status st = tpm_config_resolve(&cfg, &r, report, sizeof report);
    if (st == TPM_ERR_CONFIG || st == TPM_ERR_INVALID_ARG) {
        fprintf(stderr, "tpmoe config: %s\n", tpm_last_error());
        return 2;
    }
    if (st != TPM_OK) return cli_fail("config", "resolve", st, tpm_last_error());
    printf("# tpmoe resolved configuration (precedence: api > env > default; then rules)\n%s", report);
    char table[8192];
    tpm_dispatch_describe(&r, table, sizeof table);
    printf("\n# all-reduce dispatch (per call: algorithm by size; codec only inside the quant window)\n%s",
           table);
    return 0;
}
