/* test_moe_api.c - tpm_moe_create through its public inputs: random weights
 * from a seed equal the generator's arrays, a weights file written by the
 * generator gives the same layer, bad files fail with TPM_ERR_IO naming the
 * problem, fp16 activations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "moe/moe_internal.h"
#include "test_moe_common.h"

#define NT 3

static tpm_moe_config cfg_for(const char *preset, tpm_dtype dt) {
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = preset;
    c.backend = TPM_BACKEND_CPU;
    c.dtype = dt;
    c.seed = 17;
    c.layer = 1;
    return c;
}

static void *forward(tpm_moe_t m, const void *x, size_t n, tpm_dtype dt) {
    void *y = malloc(n * tpm_dtype_size(dt));
    memset(y, 0xff, n * tpm_dtype_size(dt));
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, NT, dt, NULL), TPM_OK);
    return y;
}

static void create_random_and_file(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    const size_t n = NT * (size_t)p->hidden;
    tpm_dtype dt = TPM_DTYPE_BF16;
    void *x = trand_input(3, n, dt);
    /* public create, random weights (seed 17, layer 1) */
    tpm_moe_config c = cfg_for(p->name, dt);
    tpm_moe_t a = NULL, b = NULL, f = NULL;
    assert_int_equal(tpm_moe_create(&a, &c, NULL), TPM_OK);
    void *ya = forward(a, x, n, dt);
    /* the same arrays handed in */
    tpm_moe_weights w;
    assert_int_equal(tpm_moe_weights_random_layer(p, 17, 1, p->routed_format, &w), TPM_OK);
    assert_int_equal(tpm_moe_create_from_weights(&b, &c, NULL, &w), TPM_OK);
    void *yb = forward(b, x, n, dt);
    assert_memory_equal(ya, yb, n * 2);
    /* a file written by the generator (2 layers), layer 1 */
    char path[] = "/tmp/tpmoe_moe_api_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(tpm_moe_weights_generate(p, 17, 2, p->routed_format, path, NULL, NULL),
                     TPM_OK);
    c.weights = path;
    assert_int_equal(tpm_moe_create(&f, &c, NULL), TPM_OK);
    void *yf = forward(f, x, n, dt);
    assert_memory_equal(ya, yf, n * 2);
    /* and the result is the layer: fp64 check */
    int32_t ids[NT * 4];
    assert_int_equal(tpm_moe_last_routing(f, ids, NULL, NULL, NT), TPM_OK);
    tpm_expert_view ev[32], sv[1];
    tpm_moe_ref_layer L;
    tpm_moe_ref_layer_from_weights(&w, ev, sv, &L);
    double *ref = malloc(n * sizeof *ref);
    assert_int_equal(tpm_moe_reference_f64(&f->rp, &f->ap, &L, x, dt, NT, ids, ref, NULL), TPM_OK);
    assert_true(trel_rms_vs_f64(yf, dt, ref, n) < 6e-3);
    free(ref);
    /* a missing layer, a truncated file, a missing file: TPM_ERR_IO, no handle */
    tpm_moe_t bad = (tpm_moe_t)(uintptr_t)1;
    c.layer = 2;
    assert_int_equal(tpm_moe_create(&bad, &c, NULL), TPM_ERR_IO);
    assert_null(bad);
    assert_non_null(strstr(tpm_last_error(), "model.layers.2."));
    c.layer = 1;
    assert_int_equal(truncate(path, 4096), 0);
    assert_int_equal(tpm_moe_create(&bad, &c, NULL), TPM_ERR_IO);
    unlink(path);
    assert_int_equal(tpm_moe_create(&bad, &c, NULL), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), path));
    /* backend cuda: not in a CPU build, needs a GPU, and takes bf16 only */
    c = cfg_for(p->name, TPM_DTYPE_FP32);
    c.backend = TPM_BACKEND_CUDA;
    assert_int_equal(tpm_moe_create(&bad, &c, NULL), TPM_ERR_UNSUPPORTED);
    tpm_moe_destroy(a);
    tpm_moe_destroy(b);
    tpm_moe_destroy(f);
    tpm_moe_weights_free(&w);
    free(x);
    free(ya);
    free(yb);
    free(yf);
}

/* fp16 activations: against fp64 within fp16's output rounding. */
static void fp16_activations(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("gpt-oss-mini");
    const size_t n = NT * (size_t)p->hidden;
    tpm_moe_weights w;
    tmake_weights(p, 5, &w);
    void *x = trand_input(4, n, TPM_DTYPE_FP16);
    tpm_moe_config c = cfg_for(p->name, TPM_DTYPE_FP16);
    tpm_moe_t m = NULL;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, &w), TPM_OK);
    void *y = forward(m, x, n, TPM_DTYPE_FP16);
    int32_t ids[NT * 4];
    assert_int_equal(tpm_moe_last_routing(m, ids, NULL, NULL, NT), TPM_OK);
    tpm_expert_view ev[32];
    tpm_moe_ref_layer L;
    tpm_moe_ref_layer_from_weights(&w, ev, NULL, &L);
    double *ref = malloc(n * sizeof *ref);
    assert_int_equal(
        tpm_moe_reference_f64(&m->rp, &m->ap, &L, x, TPM_DTYPE_FP16, NT, ids, ref, NULL), TPM_OK);
    double e = trel_rms_vs_f64(y, TPM_DTYPE_FP16, ref, n);
    print_message("  gpt-oss-mini fp16: rel rms vs fp64 %.3g\n", e);
    assert_true(e < 1e-3);
    free(ref);
    free(x);
    free(y);
    tpm_moe_destroy(m);
    tfree_weights(&w);
}

int main(void) {
    unsetenv("TPMOE_FUSE_SHARED_EXPERTS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_random_and_file),
        cmocka_unit_test(fp16_activations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
