/*
 * test_comm_cli.c - `tpmoe allreduce` end to end: exit codes (0 ok, 1 run
 * failed, 2 usage), its report (rank agreement, error table), threads and
 * processes. Runs the tool named by TPMOE_TOOL (set by ctest); skips
 * without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char g_out[65536];

/* Run "$TPMOE_TOOL <args>" with optional env prefix; output in g_out. */
static int tool(const char *env, const char *args) {
    const char *t = getenv("TPMOE_TOOL");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", env ? env : "", t, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(g_out, 1, sizeof g_out - 1, p);
    g_out[n] = '\0';
    int ws = pclose(p);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
}

static void expect(const char *env, const char *args, int rc, const char *needle) {
    int got = tool(env, args);
    if (got != rc || (needle && !strstr(g_out, needle)))
        fail_msg("tpmoe %s: rc %d (want %d), want '%s' in:\n%s", args, got, rc,
                 needle ? needle : "", g_out);
}

static void test_usage(void **state) {
    (void)state;
    expect(NULL, "allreduce --help", 0, "usage: tpmoe allreduce");
    expect(NULL, "--help", 0, "allreduce");
    expect(NULL, "allreduce --ranks 9", 2, "--ranks 9");
    expect(NULL, "allreduce --ranks 0", 2, "--ranks 0");
    expect(NULL, "allreduce --codec int5", 2, "--codec int5");
    expect(NULL, "allreduce --dtype int8", 2, "--dtype int8");
    expect(NULL, "allreduce --bytes 3", 2, "not a multiple");
    expect(NULL, "allreduce --bytes 0", 2, "--bytes 0");
    expect(NULL, "allreduce --algo ring", 2, "--algo ring");
    expect(NULL, "allreduce --algo oneshot --codec int4", 2, "exact only");
    expect(NULL, "allreduce --backend cuda", 2, "--backend cuda");
    expect(NULL, "allreduce --frobnicate 1", 2, "--frobnicate");
    expect(NULL, "allreduce --ranks", 2, "needs a value");
    expect(NULL, "allreduce --data pareto", 2, "--data pareto");
    expect(NULL, "allreduce --iters 0", 2, "--iters 0");
}

static void test_issue_commands(void **state) {
    (void)state;
    /* the issue's acceptance commands (fewer iterations under sanitizers) */
    expect(NULL,
           "allreduce --backend cpu --ranks 8 --codec int4 --dtype bf16 --bytes 1048576 --iters 2",
           0, "identical");
    assert_non_null(strstr(g_out, "int4     twoshot"));
    assert_non_null(strstr(g_out, "PASS"));
    expect(NULL,
           "allreduce --backend cpu --ranks 8 --processes --codec int4 --bytes 1048576 --iters 2",
           0, "identical");
    assert_non_null(strstr(g_out, "processes"));
    expect(NULL, "allreduce --ranks 3 --algo oneshot --dtype fp16 --bytes 10002 --iters 3", 0,
           "oneshot");
    expect(NULL, "allreduce --ranks 4 --algo twoshot --dtype fp32 --bytes 4K --iters 3", 0,
           "twoshot");
}

static void test_data_table(void **state) {
    (void)state;
    expect(NULL, "allreduce --ranks 2 --codec none,int8 --bytes 1M --iters 1 --data all", 0,
           "side by side");
    assert_non_null(strstr(g_out, "heavy"));
    assert_non_null(strstr(g_out, "outlier"));
    assert_non_null(strstr(g_out, "int8     twoshot  outlier"));
}

static void test_env_codec(void **state) {
    (void)state;
    expect("TPMOE_QUICK_REDUCE_QUANTIZATION=INT8 TPMOE_QUICK_REDUCE_MIN_BYTES=1M",
           "allreduce --ranks 2 --bytes 1M --iters 1", 0, "int8");
    /* a codec from the environment obeys the quantization window (default
     * from 8 MiB): below it the call is exact, and says so */
    expect("TPMOE_QUICK_REDUCE_QUANTIZATION=INT8", "allreduce --ranks 2 --bytes 64K --iters 1", 0,
           "\nnone ");
    /* a codec named on the command line applies at every size */
    expect(NULL, "allreduce --ranks 2 --codec int8 --bytes 64K --iters 1", 0, "int8");
    /* an invalid environment fails the run (exit 1) naming the variable */
    expect("TPMOE_QUICK_REDUCE_QUANTIZATION=INT5", "allreduce --ranks 2 --bytes 4K --iters 1", 1,
           "TPMOE_QUICK_REDUCE_QUANTIZATION");
}

int main(void) {
    if (!getenv("TPMOE_TOOL")) {
        printf("TPMOE_TOOL is not set (ctest sets it): skipping\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_issue_commands),
        cmocka_unit_test(test_data_table),
        cmocka_unit_test(test_env_codec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
