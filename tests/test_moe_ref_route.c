/* test_moe_ref_route.c - the fp64 routing reference of the GPU checks
 * (tpm_router_route_f64) against the CPU router (tpm_router_route): the
 * same experts up to near-ties, the same weights, for every router kind;
 * NaN logits never select a duplicate or out-of-range expert. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/moe_weights.h"
#include "model/presets.h"
#include "moe/moe_math.h"
#include "numeric.h"
#include "util/test_util.h"

static void check_preset_p(const tpm_preset *p, uint64_t seed) {
    assert_non_null(p);
    tpm_moe_weights w;
    assert_int_equal(tpm_moe_weights_random(p, seed, &w), TPM_OK);
    tpm_router_params rp;
    assert_int_equal(tpm_router_params_from_preset(p, &rp), TPM_OK);
    const int H = p->hidden, E = p->n_experts, k = p->top_k, T = 64;
    uint16_t *x = malloc(sizeof(uint16_t) * (size_t)T * H);
    float *xf = malloc(sizeof(float) * (size_t)H);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)T * k);
    float *wts = malloc(sizeof(float) * (size_t)T * k);
    float *scratch = malloc(sizeof(float) * (size_t)(H + 3 * E));
    double *c = malloc(sizeof(double) * (size_t)E);
    assert_true(x && xf && ids && wts && scratch && c);
    tu_rng r = {tu_seed()};
    for (size_t i = 0; i < (size_t)T * H; i++) x[i] = tpm_f32_to_bf16((float)tu_normal(&r));
    tpm_router_route(&rp, x, TPM_DTYPE_BF16, (size_t)T, H, w.router, w.router_bias, ids, wts, scratch);
    int flips = 0;
    for (int t = 0; t < T; t++) {
        int sel[32];
        double wd[32];
        assert_int_equal(tpm_router_route_f64(p, w.router, w.router_bias, x + (size_t)t * H, sel, wd, c),
                         TPM_OK);
        for (int j = 0; j < k; j++) {
            const int g = ids[(size_t)t * k + j];
            if (g != sel[j]) { /* only a near-tie may differ (fp32 vs fp64 scores) */
                assert_true(fabs(c[g] - c[sel[j]]) < 1e-5 * (1 + fabs(c[g])));
                flips++;
                continue;
            }
            assert_true(fabs(wd[j] - wts[(size_t)t * k + j]) <= 1e-5 * (1 + fabs(wd[j])));
        }
    }
    assert_true(flips <= T * k / 50); /* near-ties are rare on random data */
    /* NaN activations: k distinct in-range experts, finite weights */
    for (int h = 0; h < H; h++) x[h] = 0x7fc0;
    int sel[32];
    double wd[32];
    assert_int_equal(tpm_router_route_f64(p, w.router, w.router_bias, x, sel, wd, NULL), TPM_OK);
    for (int j = 0; j < k; j++) {
        assert_true(sel[j] >= 0 && sel[j] < E);
        assert_true(isfinite(wd[j]));
        for (int i = 0; i < j; i++) assert_int_not_equal(sel[i], sel[j]);
    }
    assert_int_equal(tpm_router_route_f64(NULL, w.router, NULL, x, sel, wd, NULL), TPM_ERR_INVALID_ARG);
    free(x);
    free(xf);
    free(ids);
    free(wts);
    free(scratch);
    free(c);
    tpm_moe_weights_free(&w);
}

static void check_preset(const char *name, uint64_t seed) { check_preset_p(tpm_preset_find(name), seed); }

static void sigmoid_bias(void **state) {
    (void)state;
    check_preset("m3-mini", 11);
}
static void grouped(void **state) {
    (void)state;
    check_preset("deepseek-v3-mini", 12);
}
/* Groups of one expert: the group score is the expert's own biased score
 * (the top min(2, group size) summed), in the reference as in the router. */
static void grouped_single_expert_groups(void **state) {
    (void)state;
    tpm_preset q = *tpm_preset_find("deepseek-v3-mini");
    q.n_groups = q.n_experts;
    q.topk_groups = q.n_experts / 2;
    check_preset_p(&q, 14);
}
static void softmax_topk(void **state) {
    (void)state;
    check_preset("gpt-oss-mini", 13);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sigmoid_bias),
        cmocka_unit_test(grouped),
        cmocka_unit_test(grouped_single_expert_groups),
        cmocka_unit_test(softmax_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
