/*
 * cli.h - the `tpmoe` command-line tool: one function per subcommand.
 * Each returns the process exit code: 0 success, 1 failure (the run or a
 * check failed), 2 bad usage (message on stderr).
 */
#ifndef TPM_CLI_H
#define TPM_CLI_H

#include "tpmoe.h"
#include <stdint.h>
#include <stdio.h>

typedef int (*cli_fn)(int argc, char **argv);

typedef struct cli_command {
    const char *name;
    cli_fn fn;
    const char *summary;
} cli_command;

/* Subcommands (argv[0] is the subcommand's own name). */
int cmd_config(int argc, char **argv);
int cmd_allreduce(int argc, char **argv);
int cmd_moe(int argc, char **argv);
int cmd_gen_weights(int argc, char **argv);
int cmd_accuracy(int argc, char **argv);
int cmd_bench_allreduce(int argc, char **argv);
int cmd_bench_moe(int argc, char **argv);

/* MARK: helpers (tools/cli_util.c) */
/* Print "tpmoe CMD: message" to stderr and return 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "tpmoe CMD: <what>: <status>: <last error>" and return 1. */
int cli_fail(const char *cmd, const char *what, tpm_status st, const char *detail);
/* Parse an integer / a size with K/M/G suffix; 0 on success. */
int cli_parse_int(const char *s, long long lo, long long hi, long long *out);
int cli_parse_size(const char *s, int64_t *out);
/* Parse "A:B" (powers of two from A to B) or "a,b,c" sizes; returns count. */
int cli_parse_size_list(const char *s, int64_t *out, int max);
/* Index of s among names[0..n-1], or -1. */
int cli_parse_choice(const char *s, const char *const *names, int n);
/* auto | oneshot | twoshot (NCCL is not a command-line choice); 0 on success. */
int cli_parse_algo(const char *s, tpm_algo *out);
/* Deterministic PRNG for test data (splitmix64 + Box-Muller). */
typedef struct cli_rng { uint64_t s; } cli_rng;
uint64_t cli_rng_next(cli_rng *r);
double cli_rng_uniform(cli_rng *r);  /* [0,1) */
double cli_rng_normal(cli_rng *r);
/* Median of n doubles (sorts a copy). */
double cli_median(const double *v, int n);
/* Plot a bench JSON into a PNG with the Python script bench/<script> (found through
 * $TPMOE_PLOT_SCRIPT, then ./bench/, then <dir of the tpmoe binary>/../bench/). 0 when the
 * script ran and succeeded; otherwise a message on stderr naming the reason and 1. The bench
 * result stands either way (the plot is a view of the JSON). png_first: the script takes
 * OUT.png JSON (plot_moe.py) rather than JSON OUT.png (plot_allreduce.py). */
int cli_run_plot(const char *cmd, const char *script, const char *json, const char *png,
                 int png_first);

#endif /* TPM_CLI_H */
