/*
 * test_model_weights.c - MoE layer weights: a file written by the generator
 * loads to exactly tpm_moe_weights_random() (mini presets, every dtype,
 * several layers), the interleaved layout, realistic scales, loader errors
 * naming the tensor, and the `tpmoe gen-weights` exit codes (through
 * TPMOE_TOOL, set by ctest).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "model/moe_weights.h"
#include "numeric.h"
#include "util/test_util.h"

static uint64_t g_seed;

static int experts_equal(const char *what, const tpm_expert_weights *a, const tpm_expert_weights *b, size_t H,
                         size_t I, int bias) {
    int ok = tu_equal_bits_f32(what, a->gate_up, b->gate_up, 2 * I * H) &&
             tu_equal_bits_f32(what, a->down, b->down, H * I);
    if (bias)
        ok = ok && tu_equal_bits_f32(what, a->gate_up_bias, b->gate_up_bias, 2 * I) &&
             tu_equal_bits_f32(what, a->down_bias, b->down_bias, H);
    else
        ok = ok && !a->gate_up_bias && !a->down_bias && !b->gate_up_bias && !b->down_bias;
    return ok;
}

static int weights_equal(const tpm_moe_weights *a, const tpm_moe_weights *b) {
    const tpm_preset *p = a->preset;
    size_t H = (size_t)p->hidden, E = (size_t)p->n_experts;
    if (a->hidden != b->hidden || a->n_experts != b->n_experts || a->inter != b->inter ||
        a->n_shared != b->n_shared || a->interleaved != b->interleaved)
        return 0;
    if (!tu_equal_bits_f32("router", a->router, b->router, E * H)) return 0;
    if ((a->router_bias == NULL) != (b->router_bias == NULL)) return 0;
    if (a->router_bias && !tu_equal_bits_f32("bias", a->router_bias, b->router_bias, E)) return 0;
    for (size_t e = 0; e < E; e++)
        if (!experts_equal("expert", &a->experts[e], &b->experts[e], H, (size_t)p->inter, p->expert_bias)) return 0;
    for (int s = 0; s < p->n_shared; s++)
        if (!experts_equal("shared", &a->shared[s], &b->shared[s], H, (size_t)p->shared_inter, p->expert_bias))
            return 0;
    return 1;
}

static double stddev(const float *x, size_t n) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    return sqrt(s2 / (double)n - (s / (double)n) * (s / (double)n));
}

/* Small presets of each structure, to cover every dtype quickly. */
static tpm_preset tiny_preset(const char *base, const char *name) {
    tpm_preset t = *tpm_preset_find(base);
    t.name = name;
    t.hidden = 96;
    t.n_experts = 8;
    t.top_k = 2;
    t.inter = 64;
    t.shared_inter = t.n_shared ? 64 : 0;
    if (t.n_groups > 1) {
        t.n_groups = 4;
        t.topk_groups = 2;
    }
    return t;
}

/* Generate a file, load each layer, compare with _random bit for bit. */
static void round_trip_p(const tpm_preset *p, tpm_weight_format fmt, int layers, uint64_t seed) {
    const char *preset = p->name;
    char *path = tu_tmp_path("mw");
    assert_int_equal(tpm_moe_weights_generate(p, seed, layers, fmt, path, NULL, NULL), TPM_OK);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    assert_string_equal(tpm_st_metadata(f, "format"), "pt");
    assert_string_equal(tpm_st_metadata(f, "tpmoe_preset"), preset);
    char sbuf[32];
    snprintf(sbuf, sizeof sbuf, "%llu", (unsigned long long)seed);
    assert_string_equal(tpm_st_metadata(f, "tpmoe_seed"), sbuf);
    /* file size matches the layer byte count */
    size_t data = 0;
    for (size_t i = 0; i < tpm_st_count(f); i++) data += tpm_st_at(f, i)->nbytes;
    assert_int_equal(data, tpm_moe_layer_bytes(p, fmt) * (uint64_t)layers);
    for (int l = 0; l < layers; l++) {
        tpm_moe_weights a, b;
        memset(&a, 0xA5, sizeof a); /* poison: the loader must overwrite */
        assert_int_equal(tpm_moe_weights_load(f, p, l, &a), TPM_OK);
        assert_int_equal(tpm_moe_weights_random_layer(p, seed, l, fmt, &b), TPM_OK);
        assert_int_equal(a.layer, l);
        if (!weights_equal(&a, &b)) fprintf(stderr, "%s fmt %d layer %d differs\n", preset, (int)fmt, l);
        assert_true(weights_equal(&a, &b));
        tpm_moe_weights_free(&a);
        tpm_moe_weights_free(&b);
        assert_null(a.router);
    }
    /* The layer after the last is missing, by name. */
    tpm_moe_weights c;
    assert_int_equal(tpm_moe_weights_load(f, p, layers, &c), TPM_ERR_IO);
    char want[96];
    snprintf(want, sizeof want, "'model.layers.%d.block_sparse_moe.gate.weight': missing", layers);
    assert_non_null(strstr(tpm_last_error(), want));
    assert_null(c.router);
    tpm_st_close(f);
    unlink(path);
    free(path);
}

static void test_round_trip_minis(void **state) {
    (void)state;
    /* deepseek-v3-mini (fp8) goes through the CLI in test_cli. */
    round_trip_p(tpm_preset_find("m3-mini"), TPM_WFMT_BF16, 1, g_seed);
    round_trip_p(tpm_preset_find("gpt-oss-mini"), TPM_WFMT_BF16, 1, g_seed + 2);
}

/* Every dtype, on small presets of each structure. */
static void test_round_trip_dtypes(void **state) {
    (void)state;
    const char *bases[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    const tpm_weight_format fmts[] = {TPM_WFMT_BF16, TPM_WFMT_FP16, TPM_WFMT_FP32, TPM_WFMT_FP8_E4M3};
    for (int b = 0; b < 3; b++) {
        tpm_preset t = tiny_preset(bases[b], "tiny");
        for (int f = 0; f < 4; f++) round_trip_p(&t, fmts[f], 2, g_seed + 10 + (uint64_t)(4 * b + f));
    }
}

/* Layout, scales and determinism of the generated values. */
static void test_values(void **state) {
    (void)state;
    tpm_preset mid = *tpm_preset_find("m3-mini"); /* big enough for the statistics */
    mid.hidden = 256;
    mid.n_experts = 64;
    mid.inter = mid.shared_inter = 128;
    const tpm_preset *p = &mid;
    size_t H = (size_t)p->hidden, I = (size_t)p->inter, E = (size_t)p->n_experts;
    tpm_moe_weights a, b, c;
    assert_int_equal(tpm_moe_weights_random(p, g_seed, &a), TPM_OK);
    tpm_preset t = tiny_preset("m3-mini", "tiny");
    tpm_moe_weights d;
    assert_int_equal(tpm_moe_weights_random(&t, g_seed, &b), TPM_OK);
    assert_int_equal(tpm_moe_weights_random_layer(&t, g_seed, 0, TPM_WFMT_BF16, &d), TPM_OK);
    assert_true(weights_equal(&b, &d)); /* _random == layer 0 in the preset's format */
    tpm_moe_weights_free(&d);
    assert_int_equal(tpm_moe_weights_random_layer(&t, g_seed, 0, TPM_WFMT_BF16, &c), TPM_OK);
    assert_int_equal(tpm_moe_weights_random_layer(&t, g_seed + 1, 0, TPM_WFMT_BF16, &d), TPM_OK);
    assert_int_equal(memcmp(c.router, d.router, 8 * 96 * sizeof(float)) != 0, 1);     /* seed matters */
    assert_int_equal(memcmp(c.experts[0].down, d.experts[0].down, 96 * 64 * sizeof(float)) != 0, 1);
    tpm_moe_weights_free(&d);
    assert_int_equal(tpm_moe_weights_random_layer(&t, g_seed, 1, TPM_WFMT_BF16, &d), TPM_OK);
    assert_int_equal(memcmp(c.router, d.router, 8 * 96 * sizeof(float)) != 0, 1);     /* layer matters */
    tpm_moe_weights_free(&d);
    assert_false(a.interleaved);
    assert_non_null(a.router_bias);
    assert_int_equal(a.n_shared, 1);
    assert_non_null(a.shared);
    assert_null(a.experts[0].gate_up_bias);
    /* scales: weights 1/sqrt(fan_in), router 1/sqrt(H), bias 0.01 */
    assert_true(fabs(stddev(a.experts[3].gate_up, 2 * I * H) * sqrt((double)H) - 1.0) < 0.02);
    assert_true(fabs(stddev(a.experts[3].down, H * I) * sqrt((double)I) - 1.0) < 0.02);
    assert_true(fabs(stddev(a.shared[0].down, H * I) * sqrt((double)I) - 1.0) < 0.02);
    assert_true(fabs(stddev(a.router, E * H) * sqrt((double)H) - 1.0) < 0.05);
    assert_true(stddev(a.router_bias, E) < 0.03 && stddev(a.router_bias, E) > 0.003);
    /* bf16-exact weights, fp32 router (not all bf16-exact) */
    int router_not_bf16 = 0;
    for (size_t i = 0; i < 2 * I * H; i++)
        assert_true(a.experts[1].gate_up[i] == tpm_bf16_to_f32(tpm_f32_to_bf16(a.experts[1].gate_up[i])));
    for (size_t i = 0; i < E * H; i++)
        router_not_bf16 += a.router[i] != tpm_bf16_to_f32(tpm_f32_to_bf16(a.router[i]));
    assert_true(router_not_bf16 > (int)(E * H / 2));
    /* Expert matrices are distinct. */
    assert_false(!memcmp(a.experts[0].gate_up, a.experts[1].gate_up, H * sizeof(float)));
    assert_false(!memcmp(a.experts[0].gate_up, a.experts[0].gate_up + I * H, H * sizeof(float))); /* gate != up */
    tpm_moe_weights_free(&a);
    tpm_moe_weights_free(&b);
    tpm_moe_weights_free(&c);
    tpm_moe_weights_free(&c); /* twice is safe */
    tpm_moe_weights_free(NULL);

    /* gpt-oss structure: interleaved rows, biases, no correction bias, no shared. */
    tpm_preset gt = tiny_preset("gpt-oss-mini", "tiny-gpt-oss");
    const tpm_preset *g = &gt;
    H = (size_t)g->hidden;
    I = (size_t)g->inter;
    char *path = tu_tmp_path("mw_il");
    assert_int_equal(tpm_moe_weights_generate(g, g_seed, 1, TPM_WFMT_BF16, path, NULL, NULL), TPM_OK);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    assert_int_equal(tpm_moe_weights_load(f, g, 0, &a), TPM_OK);
    assert_true(a.interleaved);
    assert_null(a.router_bias);
    assert_null(a.shared);
    assert_int_equal(a.n_shared, 0);
    float *w1 = malloc(I * H * sizeof(float)), *w3 = malloc(I * H * sizeof(float));
    float *b1 = malloc(I * sizeof(float)), *b3 = malloc(I * sizeof(float));
    int64_t shape[2] = {(int64_t)I, (int64_t)H};
    assert_int_equal(tpm_st_load_f32(f, "model.layers.0.block_sparse_moe.experts.5.w1.weight", 2, shape, w1), TPM_OK);
    assert_int_equal(tpm_st_load_f32(f, "model.layers.0.block_sparse_moe.experts.5.w3.weight", 2, shape, w3), TPM_OK);
    assert_int_equal(tpm_st_load_f32(f, "model.layers.0.block_sparse_moe.experts.5.w1.bias", 1, shape, b1), TPM_OK);
    assert_int_equal(tpm_st_load_f32(f, "model.layers.0.block_sparse_moe.experts.5.w3.bias", 1, shape, b3), TPM_OK);
    for (size_t i = 0; i < I; i++) {
        assert_memory_equal(a.experts[5].gate_up + 2 * i * H, w1 + i * H, H * sizeof(float));
        assert_memory_equal(a.experts[5].gate_up + (2 * i + 1) * H, w3 + i * H, H * sizeof(float));
        assert_true(a.experts[5].gate_up_bias[2 * i] == b1[i]);
        assert_true(a.experts[5].gate_up_bias[2 * i + 1] == b3[i]);
    }
    assert_true(stddev(a.experts[5].down_bias, H) > 0.01 && stddev(a.experts[5].down_bias, H) < 0.04);
    free(w1);
    free(w3);
    free(b1);
    free(b3);
    tpm_moe_weights_free(&a);
    tpm_st_close(f);
    unlink(path);
    free(path);
}

/* A file that lacks one tensor / has one of the wrong shape or dtype. */
static void test_load_errors(void **state) {
    (void)state;
    tpm_preset tp = tiny_preset("m3-mini", "tiny"), td = tp;
    td.n_experts = 16;
    const tpm_preset *p = &tp, *d = &td;
    char *path = tu_tmp_path("mw_err");
    assert_int_equal(tpm_moe_weights_generate(p, g_seed, 1, TPM_WFMT_BF16, path, NULL, NULL), TPM_OK);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    tpm_moe_weights w;
    /* Another preset's shapes. */
    assert_int_equal(tpm_moe_weights_load(f, d, 0, &w), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'model.layers.0.block_sparse_moe.gate.weight': shape [8, 96], "
                                             "expected [16, 96]"));
    assert_null(w.router);
    /* Rewrite the file without one tensor, with one wrong dtype, one wrong shape. */
    const char *drop = "model.layers.0.block_sparse_moe.experts.7.w3.weight";
    const char *bad_dt = "model.layers.0.block_sparse_moe.experts.3.w2.weight";
    const char *bad_shape = "model.layers.0.block_sparse_moe.shared_experts.w1.weight";
    const char *no_scale = "model.layers.0.block_sparse_moe.experts.2.w1.weight";
    for (int which = 0; which < 4; which++) {
        tpm_st_writer *wr;
        assert_int_equal(tpm_st_writer_create(&wr), TPM_OK);
        for (size_t i = 0; i < tpm_st_count(f); i++) {
            const tpm_st_tensor *t = tpm_st_at(f, i);
            if (which == 0 && !strcmp(t->name, drop)) continue;
            if (which == 1 && !strcmp(t->name, bad_dt)) {
                assert_int_equal(tpm_st_writer_add(wr, t->name, TPM_ST_I16, t->ndim, t->shape, t->data), TPM_OK);
                continue;
            }
            if (which == 3 && !strcmp(t->name, no_scale)) { /* E4M3 codes without the _scale tensor */
                assert_int_equal(tpm_st_writer_add(wr, t->name, TPM_ST_F8_E4M3, t->ndim, t->shape, NULL), TPM_OK);
                continue;
            }
            if (which == 2 && !strcmp(t->name, bad_shape)) {
                int64_t s[2] = {t->shape[1], t->shape[0]};
                assert_int_equal(tpm_st_writer_add(wr, t->name, t->dtype, 2, s, t->data), TPM_OK);
                continue;
            }
            assert_int_equal(tpm_st_writer_add(wr, t->name, t->dtype, t->ndim, t->shape, t->data), TPM_OK);
        }
        char *p2 = tu_tmp_path("mw_err2");
        if (which == 3) { /* stream: the F8 tensor's bytes come from the bf16 tensor's first half */
            assert_int_equal(tpm_st_writer_begin(wr, p2), TPM_OK);
            const tpm_st_tensor *src = tpm_st_find(f, no_scale);
            assert_int_equal(tpm_st_writer_put(wr, src->data, src->numel), TPM_OK);
            assert_int_equal(tpm_st_writer_end(wr), TPM_OK);
        } else {
            assert_int_equal(tpm_st_writer_write(wr, p2), TPM_OK);
        }
        tpm_st_writer_destroy(wr);
        tpm_st_file *g;
        assert_int_equal(tpm_st_open(p2, &g), TPM_OK);
        memset(&w, 0x5A, sizeof w);
        assert_int_equal(tpm_moe_weights_load(g, p, 0, &w), TPM_ERR_IO);
        const char *want = which == 0 ? drop : which == 1 ? bad_dt : which == 2 ? bad_shape : no_scale;
        fprintf(stderr, "expected error: %s\n", tpm_last_error());
        assert_non_null(strstr(tpm_last_error(), want));
        assert_non_null(strstr(tpm_last_error(), which == 0 ? "missing" : which == 1 ? "dtype I16" : which == 2 ? "shape [96, 64]" : "_scale' (U8 E8M0"));
        assert_null(w.router); /* freed and zeroed on failure */
        tpm_st_close(g);
        unlink(p2);
        free(p2);
    }
    /* Bad arguments. */
    assert_int_equal(tpm_moe_weights_load(NULL, p, 0, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_load(f, NULL, 0, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_load(f, p, -1, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_random(NULL, 1, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_random_layer(p, 1, 0, (tpm_weight_format)9, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_generate(p, 1, 0, TPM_WFMT_BF16, path, NULL, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_weights_generate(p, 1, 1, TPM_WFMT_BF16, "/nonexistent/dir/w.safetensors", NULL, NULL),
                     TPM_ERR_IO);
    char name[16];
    assert_int_equal(tpm_moe_tensor_name(name, sizeof name, 0, "gate.weight"), TPM_ERR_INVALID_ARG);
    tpm_st_close(f);
    unlink(path);
    free(path);
}

/* MARK: CLI */
static int run_tool(const char *args, char *out, size_t outlen) {
    const char *tool = getenv("TPMOE_TOOL");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", tool, args);
    FILE *fp = popen(cmd, "r");
    assert_non_null(fp);
    size_t n = fread(out, 1, outlen - 1, fp);
    out[n] = '\0';
    int rc = pclose(fp);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_cli(void **state) {
    (void)state;
    if (!getenv("TPMOE_TOOL")) skip();
    char out[4096];
    char *path = tu_tmp_path("mw_cli");
    char args[512];
    assert_int_equal(run_tool("gen-weights --help", out, sizeof out), 0);
    assert_non_null(strstr(out, "--preset"));
    assert_int_equal(run_tool("gen-weights --preset nosuch -o /tmp/x.safetensors", out, sizeof out), 2);
    assert_non_null(strstr(out, "unknown preset 'nosuch'"));
    assert_non_null(strstr(out, "m3-mini"));
    assert_int_equal(run_tool("gen-weights -o /tmp/x.safetensors", out, sizeof out), 2);
    assert_non_null(strstr(out, "--preset"));
    assert_int_equal(run_tool("gen-weights --preset m3-mini", out, sizeof out), 2);
    assert_int_equal(run_tool("gen-weights --preset m3-mini -o x --dtype int3", out, sizeof out), 2);
    assert_non_null(strstr(out, "int3"));
    assert_int_equal(run_tool("gen-weights --preset m3-mini -o x --layers 0", out, sizeof out), 2);
    assert_int_equal(run_tool("gen-weights --preset m3-mini -o x --frob 1", out, sizeof out), 2);
    assert_non_null(strstr(out, "--frob"));
    assert_int_equal(run_tool("gen-weights --preset m3-mini -o /nonexistent/dir/w.safetensors", out, sizeof out), 1);
    assert_non_null(strstr(out, "/nonexistent/dir/w.safetensors"));

    snprintf(args, sizeof args, "gen-weights --preset deepseek-v3-mini --seed 42 --dtype fp8 -o %s", path);
    assert_int_equal(run_tool(args, out, sizeof out), 0);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    assert_string_equal(tpm_st_metadata(f, "tpmoe_seed"), "42");
    assert_string_equal(tpm_st_metadata(f, "tpmoe_dtype"), "fp8");
    const tpm_preset *p = tpm_preset_find("deepseek-v3-mini");
    tpm_moe_weights a, b;
    assert_int_equal(tpm_moe_weights_load(f, p, 0, &a), TPM_OK);
    assert_int_equal(tpm_moe_weights_random_layer(p, 42, 0, TPM_WFMT_FP8_E4M3, &b), TPM_OK);
    assert_true(weights_equal(&a, &b));
    tpm_moe_weights_free(&a);
    tpm_moe_weights_free(&b);
    tpm_st_close(f);
    unlink(path);
    free(path);
}

int main(void) {
    g_seed = tu_seed();
    tpm_log_set_level(TPM_LOG_NONE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_minis), cmocka_unit_test(test_round_trip_dtypes),
        cmocka_unit_test(test_values),             cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
