/*
 * test_cli_plot.c - cli_run_plot (tools/cli_util.c), the step behind `bench moe --png` and
 * `bench allreduce --png`: the script named by $TPMOE_PLOT_SCRIPT runs with the JSON and PNG
 * paths in the order the script wants; a script that fails, a missing script and a path holding
 * a quote each return 1 without running anything else. A stand-in script (python3) records its
 * arguments. Skips (77) where python3 is missing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../tools/cli_util.c"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[64], g_script[128], g_log[128];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/tpmoe_plot_%d", (int)getpid());
    if (mkdir(g_dir, 0700) && errno != EEXIST) return -1;
    snprintf(g_script, sizeof g_script, "%s/fake_plot.py", g_dir);
    snprintf(g_log, sizeof g_log, "%s/args.txt", g_dir);
    FILE *f = fopen(g_script, "w");
    if (!f) return -1;
    fprintf(f, "import os, sys\n"
               "open(os.environ['PLOT_LOG'], 'w').write(' '.join(sys.argv[1:]))\n"
               "sys.exit(int(os.environ.get('PLOT_RC', '0')))\n");
    fclose(f);
    setenv("TPMOE_PLOT_SCRIPT", g_script, 1);
    setenv("PLOT_LOG", g_log, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(g_log);
    unlink(g_script);
    rmdir(g_dir);
    return 0;
}

/* The stand-in's recorded arguments ("" where it did not run). */
static const char *logged(void) {
    static char buf[512];
    buf[0] = '\0';
    FILE *f = fopen(g_log, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void argument_order(void **state) {
    (void)state;
    unsetenv("PLOT_RC");
    unlink(g_log);
    assert_int_equal(cli_run_plot("test", "fake_plot.py", "/tmp/r.json", "/tmp/o.png", 1), 0);
    assert_string_equal(logged(), "/tmp/o.png /tmp/r.json"); /* plot_moe.py: OUT.png JSON */
    unlink(g_log);
    assert_int_equal(cli_run_plot("test", "fake_plot.py", "/tmp/r.json", "/tmp/o.png", 0), 0);
    assert_string_equal(logged(), "/tmp/r.json /tmp/o.png"); /* plot_allreduce.py: JSON OUT.png */
}

static void failing_script(void **state) {
    (void)state;
    setenv("PLOT_RC", "3", 1);
    unlink(g_log);
    assert_int_equal(cli_run_plot("test", "fake_plot.py", "/tmp/r.json", "/tmp/o.png", 1), 1);
    assert_string_equal(logged(), "/tmp/o.png /tmp/r.json"); /* it ran, and its failure counts */
    unsetenv("PLOT_RC");
}

static void quote_refused(void **state) {
    (void)state;
    unlink(g_log);
    assert_int_equal(cli_run_plot("test", "fake_plot.py", "/tmp/it's.json", "/tmp/o.png", 1), 1);
    assert_string_equal(logged(), ""); /* nothing ran */
}

static void missing_script(void **state) {
    (void)state;
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no_such_plot.py", g_dir);
    setenv("TPMOE_PLOT_SCRIPT", missing, 1);
    unlink(g_log);
    /* neither $TPMOE_PLOT_SCRIPT, ./bench/ (ctest's folder has none) nor <exe>/../bench/ has it */
    assert_int_equal(cli_run_plot("test", "no_such_plot.py", "/tmp/r.json", "/tmp/o.png", 1), 1);
    assert_string_equal(logged(), "");
    setenv("TPMOE_PLOT_SCRIPT", g_script, 1);
}

int main(void) {
    if (system("python3 -c 'pass' >/dev/null 2>&1") != 0) {
        printf("test_cli_plot: skipped: no python3\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(argument_order),
        cmocka_unit_test(failing_script),
        cmocka_unit_test(quote_refused),
        cmocka_unit_test(missing_script),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
