/* test_config.c - policy: precedence api > env > default, invalid values,
 * per-model and parallelism rules, the config hash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tpmoe.h"

static const char *const all_env[] = {
    "TPMOE_BACKEND", "TPMOE_RANK", "TPMOE_WORLD_SIZE", "TPMOE_RENDEZVOUS", "TPMOE_ALLREDUCE",
    "TPMOE_QUICK_REDUCE_QUANTIZATION", "TPMOE_QUICK_REDUCE_MIN_BYTES", "TPMOE_QUICK_REDUCE_MAX_BYTES",
    "TPMOE_ALGO", "TPMOE_ONESHOT_MAX_BYTES", "TPMOE_CUSTOM_MAX_BYTES", "TPMOE_BUFFER_BYTES",
    "TPMOE_TIMEOUT_MS", "TPMOE_FUSE_SHARED_EXPERTS", "TPMOE_CUDA_AR_VARIANT", "TPMOE_NODE_ID"};

static int clean_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof all_env / sizeof all_env[0]; i++) unsetenv(all_env[i]);
    return 0;
}

static void defaults(void **state) {
    (void)state;
    tpm_resolved_config r;
    char rep[4096];
    assert_int_equal(tpm_config_resolve(NULL, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_NONE); /* lossy codecs are opt-in */
    assert_int_equal(r.allreduce, TPM_AR_AUTO);
    assert_int_equal(r.world_size, 1);
    assert_int_equal(r.timeout_ms, 30000);
    assert_true(r.quant_max_bytes >= r.quant_min_bytes);
    assert_non_null(strstr(rep, "opt-in"));
}

static void env_and_api_precedence(void **state) {
    (void)state;
    setenv("TPMOE_QUICK_REDUCE_QUANTIZATION", "int8", 1);
    setenv("TPMOE_WORLD_SIZE", "4", 1);
    setenv("TPMOE_TIMEOUT_MS", "1234", 1);
    setenv("TPMOE_QUICK_REDUCE_MIN_BYTES", "64K", 1);
    tpm_config cfg = TPM_CONFIG_INIT;
    tpm_resolved_config r;
    assert_int_equal(tpm_config_resolve(&cfg, &r, NULL, 0), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_INT8);
    assert_int_equal(r.world_size, 4);
    assert_int_equal(r.timeout_ms, 1234);
    assert_int_equal(r.quant_min_bytes, 65536);
    cfg.codec = TPM_CODEC_INT4; /* API wins */
    cfg.timeout_ms = 99;
    char rep[4096];
    assert_int_equal(tpm_config_resolve(&cfg, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_INT4);
    assert_int_equal(r.timeout_ms, 99);
    assert_non_null(strstr(rep, "(api"));
}

/* name=value alone makes the resolve fail with TPM_ERR_CONFIG; the message
 * holds each non-NULL needle. The variable is unset again. */
static void expect_bad_env(const char *name, const char *value, const char *needle1,
                           const char *needle2) {
    tpm_resolved_config r;
    setenv(name, value, 1);
    assert_int_equal(tpm_config_resolve(NULL, &r, NULL, 0), TPM_ERR_CONFIG);
    if (needle1) assert_non_null(strstr(tpm_last_error(), needle1));
    if (needle2) assert_non_null(strstr(tpm_last_error(), needle2));
    unsetenv(name);
}

static void invalid_env_names_variable(void **state) {
    (void)state;
    tpm_resolved_config r;
    expect_bad_env("TPMOE_QUICK_REDUCE_QUANTIZATION", "INT5", "TPMOE_QUICK_REDUCE_QUANTIZATION",
                   "INT4");
    expect_bad_env("TPMOE_ALLREDUCE", "fast", "TPMOE_ALLREDUCE", NULL);
    expect_bad_env("TPMOE_FUSE_SHARED_EXPERTS", "yes", "TPMOE_FUSE_SHARED_EXPERTS", NULL);
    expect_bad_env("TPMOE_TIMEOUT_MS", "-5", NULL, NULL);
    expect_bad_env("TPMOE_WORLD_SIZE", "9", "TPMOE_WORLD_SIZE", "spans nodes"); /* no tcp rendezvous */
    expect_bad_env("TPMOE_WORLD_SIZE", "257", "TPMOE_WORLD_SIZE", NULL);
    expect_bad_env("TPMOE_CUDA_AR_VARIANT", "20", "TPMOE_CUDA_AR_VARIANT", NULL);
    expect_bad_env("TPMOE_CUDA_AR_VARIANT", "fast", "TPMOE_CUDA_AR_VARIANT", NULL);
    setenv("TPMOE_QUICK_REDUCE_MIN_BYTES", "2M", 1);
    setenv("TPMOE_QUICK_REDUCE_MAX_BYTES", "1M", 1);
    assert_int_equal(tpm_config_resolve(NULL, &r, NULL, 0), TPM_ERR_CONFIG);
}

static void invalid_api_fields(void **state) {
    (void)state;
    tpm_resolved_config r;
    tpm_config cfg = TPM_CONFIG_INIT;
    assert_int_equal(tpm_config_resolve(&cfg, NULL, NULL, 0), TPM_ERR_INVALID_ARG);
    cfg.struct_size = 8;
    assert_int_equal(tpm_config_resolve(&cfg, &r, NULL, 0), TPM_ERR_INVALID_ARG);
    tpm_config c2 = TPM_CONFIG_INIT;
    c2.world_size = 0;
    assert_int_equal(tpm_config_resolve(&c2, &r, NULL, 0), TPM_ERR_INVALID_ARG);
    c2.world_size = 9;
    assert_int_equal(tpm_config_resolve(&c2, &r, NULL, 0), TPM_ERR_INVALID_ARG);
    c2.world_size = 2;
    c2.rank = 2;
    assert_int_equal(tpm_config_resolve(&c2, &r, NULL, 0), TPM_ERR_INVALID_ARG);
    tpm_config c3 = TPM_CONFIG_INIT;
    c3.codec = (tpm_codec)42;
    assert_int_equal(tpm_config_resolve(&c3, &r, NULL, 0), TPM_ERR_INVALID_ARG);
    tpm_config c4 = TPM_CONFIG_INIT;
    c4.model = "no-such-model";
    assert_int_equal(tpm_config_resolve(&c4, &r, NULL, 0), TPM_ERR_CONFIG);
    assert_non_null(strstr(tpm_last_error(), "no-such-model"));
}

static void fuse_shared_rules(void **state) {
    (void)state;
    tpm_resolved_config r;
    char rep[4096];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.model = "m3";
    cfg.world_size = 2;
    cfg.tp = 2;
    assert_int_equal(tpm_config_resolve(&cfg, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.fuse_shared, 1);
    cfg.ep = 2;
    cfg.tp = 1;
    assert_int_equal(tpm_config_resolve(&cfg, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.fuse_shared, 0);
    assert_non_null(strstr(rep, "expert parallelism"));
    cfg.fuse_shared = 1; /* explicit: the token-partitioned EP scheme */
    assert_int_equal(tpm_config_resolve(&cfg, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.fuse_shared, 1);
    tpm_config g = TPM_CONFIG_INIT;
    g.model = "gpt-oss";
    g.fuse_shared = 1;
    assert_int_equal(tpm_config_resolve(&g, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.fuse_shared, 0);
    assert_non_null(strstr(rep, "no shared expert"));
    setenv("TPMOE_FUSE_SHARED_EXPERTS", "0", 1);
    tpm_config m = TPM_CONFIG_INIT;
    m.model = "m3";
    assert_int_equal(tpm_config_resolve(&m, &r, NULL, 0), TPM_OK);
    assert_int_equal(r.fuse_shared, 0);
}

static void codec_rules(void **state) {
    (void)state;
    tpm_resolved_config r;
    char rep[4096];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.codec = TPM_CODEC_INT4;
    cfg.world_size = 1;
    cfg.tp = 1;
    assert_int_equal(tpm_config_resolve(&cfg, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_NONE); /* world 1: nothing to reduce */
    assert_non_null(strstr(rep, "world 1"));
    tpm_config g = TPM_CONFIG_INIT;
    g.model = "gpt-oss";
    g.world_size = 2;
    g.codec = TPM_CODEC_INT4;
    assert_int_equal(tpm_config_resolve(&g, &r, rep, sizeof rep), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_INT6);
    assert_non_null(strstr(rep, "gpt-oss"));
    g.codec = TPM_CODEC_INT8; /* better than the cap: untouched */
    assert_int_equal(tpm_config_resolve(&g, &r, NULL, 0), TPM_OK);
    assert_int_equal(r.codec, TPM_CODEC_INT8);
}

static void hash_covers_agreement_fields(void **state) {
    (void)state;
    tpm_resolved_config a, b;
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.world_size = 2;
    assert_int_equal(tpm_config_resolve(&cfg, &a, NULL, 0), TPM_OK);
    cfg.rank = 1; /* rank is not part of the agreement */
    assert_int_equal(tpm_config_resolve(&cfg, &b, NULL, 0), TPM_OK);
    assert_true(a.hash == b.hash);
    cfg.codec = TPM_CODEC_INT8;
    assert_int_equal(tpm_config_resolve(&cfg, &b, NULL, 0), TPM_OK);
    assert_true(a.hash != b.hash);
    /* the CUDA kernel set: ranks on different sets would disagree on epochs */
    cfg.codec = TPM_CODEC_DEFAULT;
    assert_int_equal(a.cuda_kernels, 10);
    setenv("TPMOE_CUDA_AR_VARIANT", "1", 1);
    assert_int_equal(tpm_config_resolve(&cfg, &b, NULL, 0), TPM_OK);
    unsetenv("TPMOE_CUDA_AR_VARIANT");
    assert_int_equal(b.cuda_kernels, 1);
    assert_true(a.hash != b.hash);
}

static void names_and_parsing(void **state) {
    (void)state;
    tpm_codec c;
    assert_int_equal(tpm_codec_parse("int6", &c), TPM_OK);
    assert_int_equal(c, TPM_CODEC_INT6);
    assert_int_equal(tpm_codec_parse("INT4_H", &c), TPM_OK);
    assert_int_equal(c, TPM_CODEC_INT4_H);
    assert_int_equal(tpm_codec_parse("int5", &c), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_codec_parse(NULL, &c), TPM_ERR_INVALID_ARG);
    tpm_dtype d;
    assert_int_equal(tpm_dtype_parse("bfloat16", &d), TPM_OK);
    assert_int_equal(d, TPM_DTYPE_BF16);
    assert_int_equal(tpm_dtype_parse("int8", &d), TPM_ERR_INVALID_ARG);
    assert_string_equal(tpm_status_string(TPM_ERR_TIMEOUT), "timeout");
    assert_string_equal(tpm_status_string((tpm_status)999), "unknown status");
    assert_int_equal(tpm_dtype_size(TPM_DTYPE_FP32), 4);
    assert_int_equal(tpm_dtype_size((tpm_dtype)7), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(defaults, clean_env),
        cmocka_unit_test_setup(env_and_api_precedence, clean_env),
        cmocka_unit_test_setup(invalid_env_names_variable, clean_env),
        cmocka_unit_test_setup(invalid_api_fields, clean_env),
        cmocka_unit_test_setup(fuse_shared_rules, clean_env),
        cmocka_unit_test_setup(codec_rules, clean_env),
        cmocka_unit_test_setup(hash_covers_agreement_fields, clean_env),
        cmocka_unit_test_setup(names_and_parsing, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
