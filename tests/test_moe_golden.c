/* test_moe_golden.c - golden outputs of a small seeded layer per mini preset
 * (tests/golden/moe_<preset>.txt): the expert ids, the routing weights (fp32
 * bits) and the bf16 output bits of 8 tokens at TP 1. Weights come from
 * test_moe_common.h's generator (seed 71 + preset index), x ~ N(0,1) in bf16
 * (seed 72). The check: ids exact, weights within 2 fp32 ulps, y within 1
 * bf16 ulp (a libm expf that rounds differently may move the last bit).
 * Regenerate (after an intended change of the math) with
 *   TPMOE_REGEN_GOLDEN=1 ./build/tests/test_moe_golden
 * and say why in the commit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "moe/moe_internal.h"
#include "test_moe_common.h"

#define GT 8

static const char *const presets[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};

static void golden_path(char *buf, size_t len, const char *preset) {
    snprintf(buf, len, "%s/tests/golden/moe_%s.txt", TPMOE_SOURCE_DIR, preset);
}

static int64_t ulp_dist32(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return llabs((long long)ia - (long long)ib);
}

static int bf16_dist(uint16_t a, uint16_t b) {
    int ia = (a & 0x8000) ? -(int)(a & 0x7fff) : (int)a,
        ib = (b & 0x8000) ? -(int)(b & 0x7fff) : (int)b;
    return abs(ia - ib);
}

static void run_preset(int pi) {
    const tpm_preset *p = tpm_preset_find(presets[pi]);
    assert_non_null(p);
    tpm_moe_weights w;
    tmake_weights(p, 71 + (uint64_t)pi, &w);
    const size_t H = (size_t)p->hidden, k = (size_t)p->top_k;
    uint16_t *x = trand_input(72, GT * H, TPM_DTYPE_BF16), *y = malloc(GT * H * 2);
    memset(y, 0xff, GT * H * 2);
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = p->name;
    c.backend = TPM_BACKEND_CPU;
    c.fuse_shared = 1;
    tpm_moe_t m = NULL;
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, &w), TPM_OK);
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, GT, TPM_DTYPE_BF16, NULL), TPM_OK);
    int32_t ids[GT * 8];
    float wts[GT * 8];
    assert_int_equal(tpm_moe_last_routing(m, ids, wts, NULL, GT), TPM_OK);

    char path[1024];
    golden_path(path, sizeof path, p->name);
    const char *regen = getenv("TPMOE_REGEN_GOLDEN");
    if (regen && *regen && strcmp(regen, "0")) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f,
                "# tpmoe MoE golden: preset %s, tokens %d, bf16, tp 1, fused; see "
                "tests/test_moe_golden.c\n",
                p->name, GT);
        for (size_t i = 0; i < GT * k; i++)
            fprintf(f, "%d%c", ids[i], (i + 1) % k ? ' ' : '\n');
        for (size_t i = 0; i < GT * k; i++) {
            uint32_t b;
            memcpy(&b, &wts[i], 4);
            fprintf(f, "%08x%c", b, (i + 1) % k ? ' ' : '\n');
        }
        for (size_t i = 0; i < GT * H; i++)
            fprintf(f, "%04x%c", y[i], (i + 1) % 16 ? ' ' : '\n');
        fclose(f);
        print_message("  wrote %s\n", path);
    } else {
        FILE *f = fopen(path, "r");
        if (!f) fail_msg("missing %s (TPMOE_REGEN_GOLDEN=1 writes it)", path);
        char line[512];
        assert_non_null(fgets(line, sizeof line, f));
        assert_true(line[0] == '#');
        int exact = 0, off1 = 0;
        for (size_t i = 0; i < GT * k; i++) {
            int v;
            assert_int_equal(fscanf(f, "%d", &v), 1);
            assert_int_equal(v, ids[i]);
        }
        for (size_t i = 0; i < GT * k; i++) {
            unsigned b;
            float g;
            assert_int_equal(fscanf(f, "%x", &b), 1);
            uint32_t b32 = b;
            memcpy(&g, &b32, 4);
            assert_true(ulp_dist32(g, wts[i]) <= 2);
        }
        for (size_t i = 0; i < GT * H; i++) {
            unsigned b;
            assert_int_equal(fscanf(f, "%x", &b), 1);
            int d = bf16_dist((uint16_t)b, y[i]);
            if (d > 1) fail_msg("%s: y[%zu] = %04x, golden %04x", p->name, i, y[i], b);
            exact += d == 0;
            off1 += d == 1;
        }
        fclose(f);
        print_message("  %-17s ids and weights match; y: %d exact, %d off by 1 ulp\n", p->name,
                      exact, off1);
    }
    tpm_moe_destroy(m);
    free(x);
    free(y);
    tfree_weights(&w);
}

static void golden_layers(void **state) {
    (void)state;
    for (int pi = 0; pi < 3; pi++)
        run_preset(pi);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(golden_layers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
