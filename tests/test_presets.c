/*
 * test_presets.c - the model presets: lookup, the m3 numbers from the
 * reference page, structural sanity of every preset, and each -mini preset
 * keeping its full preset's structure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "model/presets.h"

static void test_lookup(void **state) {
    (void)state;
    const char *names[] = {"m3", "m3-mini", "deepseek-v3", "deepseek-v3-mini", "gpt-oss", "gpt-oss-mini", "m2"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const tpm_preset *p = tpm_preset_find(names[i]);
        assert_non_null(p);
        assert_string_equal(p->name, names[i]);
    }
    assert_null(tpm_preset_find("m4"));
    assert_null(tpm_preset_find(""));
    assert_null(tpm_preset_find(NULL));
    assert_null(tpm_preset_find("M3")); /* names are exact */
    size_t n = 0;
    for (const tpm_preset *const *p = tpm_preset_list(); *p; p++) {
        assert_ptr_equal(tpm_preset_find((*p)->name), *p);
        n++;
    }
    assert_int_equal(n, sizeof names / sizeof *names);
}

static void test_m3_numbers(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3");
    assert_int_equal(p->hidden, 6144);
    assert_int_equal(p->n_experts, 128);
    assert_int_equal(p->top_k, 4);
    assert_int_equal(p->inter, 3072);
    assert_int_equal(p->n_shared, 1);
    assert_int_equal(p->shared_inter, 3072);
    assert_int_equal(p->router, TPM_ROUTER_SIGMOID_BIAS);
    assert_true(p->routed_scaling_factor == 2.0f);
    assert_int_equal(p->act, TPM_ACT_SWIGLU_OAI);
    assert_true(p->act_alpha == 1.702f && p->act_limit == 7.0f && p->act_beta == 1.0f);
    assert_int_equal(p->routed_format, TPM_WFMT_BF16);
    assert_int_equal(p->layers, 60);
    assert_int_equal(p->dense_layers, 3);
    assert_int_equal(p->expert_bias, 0);

    const tpm_preset *d = tpm_preset_find("deepseek-v3");
    assert_int_equal(d->hidden, 7168);
    assert_int_equal(d->n_experts, 256);
    assert_int_equal(d->top_k, 8);
    assert_int_equal(d->n_groups, 8);
    assert_int_equal(d->topk_groups, 4);
    assert_true(d->routed_scaling_factor == 2.5f);
    assert_int_equal(d->act, TPM_ACT_SILU_GLU);

    const tpm_preset *g = tpm_preset_find("gpt-oss");
    assert_int_equal(g->hidden, 2880);
    assert_int_equal(g->inter, 2880);
    assert_int_equal(g->router, TPM_ROUTER_SOFTMAX_TOPK);
    assert_int_equal(g->act, TPM_ACT_SWIGLU_OAI_INTERLEAVED);
    assert_int_equal(g->expert_bias, 1);
    assert_int_equal(g->n_shared, 0);

    const tpm_preset *m2 = tpm_preset_find("m2");
    assert_int_equal(m2->hidden, 3072);
    assert_int_equal(m2->n_experts, 256);
    assert_int_equal(m2->inter, 1536);
    assert_int_equal(m2->n_shared, 0);
}

static void test_sanity(void **state) {
    (void)state;
    for (const tpm_preset *const *pp = tpm_preset_list(); *pp; pp++) {
        const tpm_preset *p = *pp;
        assert_non_null(p->description);
        assert_true(p->hidden > 0 && p->inter > 0);
        assert_true(p->top_k >= 1 && p->top_k <= p->n_experts);
        assert_true(p->n_shared == 0 || p->n_shared == 1);
        /* Fusion of the shared expert needs the routed shape and format. */
        if (p->n_shared) {
            assert_int_equal(p->shared_inter, p->inter);
            assert_int_equal(p->shared_format, p->routed_format);
        }
        /* fp8 1x32 blocks along both matrix dims. */
        assert_int_equal(p->hidden % 32, 0);
        assert_int_equal(p->inter % 32, 0);
        assert_true(p->routed_scaling_factor > 0.0f);
        assert_true(p->layers > p->dense_layers && p->dense_layers >= 0);
        if (p->router == TPM_ROUTER_GROUPED_SIGMOID) {
            assert_true(p->n_groups > 1 && p->n_experts % p->n_groups == 0);
            assert_true(p->topk_groups >= 1 && p->topk_groups <= p->n_groups);
            /* enough experts in the kept groups, and >= 2 per group (top-2 group score) */
            assert_true(p->top_k <= p->topk_groups * (p->n_experts / p->n_groups));
            assert_true(p->n_experts / p->n_groups >= 2);
        } else {
            assert_int_equal(p->n_groups, 1);
        }
        if (p->act != TPM_ACT_SILU_GLU) assert_true(p->act_alpha > 0.0f && p->act_limit > 0.0f);
        if (p->expert_bias) assert_int_equal(p->router, TPM_ROUTER_SOFTMAX_TOPK);
    }
}

/* A -mini keeps its full preset's structure and is small enough for the CPU. */
static void test_minis(void **state) {
    (void)state;
    const char *pairs[][2] = {{"m3", "m3-mini"}, {"deepseek-v3", "deepseek-v3-mini"}, {"gpt-oss", "gpt-oss-mini"}};
    for (size_t i = 0; i < 3; i++) {
        const tpm_preset *f = tpm_preset_find(pairs[i][0]), *m = tpm_preset_find(pairs[i][1]);
        assert_int_equal(m->router, f->router);
        assert_int_equal(m->act, f->act);
        assert_int_equal(m->n_shared, f->n_shared);
        assert_int_equal(m->expert_bias, f->expert_bias);
        assert_int_equal(m->top_k, f->top_k);
        assert_int_equal(m->n_groups, f->n_groups);
        assert_int_equal(m->topk_groups, f->topk_groups);
        assert_true(m->routed_scaling_factor == f->routed_scaling_factor);
        assert_true(m->act_alpha == f->act_alpha && m->act_limit == f->act_limit && m->act_beta == f->act_beta);
        assert_true(m->hidden < f->hidden && m->n_experts <= f->n_experts);
        /* one layer of 64 tokens: (top_k + shared) * 3 * H * I MACs per token */
        double macs = 64.0 * (m->top_k + m->n_shared) * 3.0 * m->hidden * m->inter;
        assert_true(macs < 0.5e9);
        /* the whole layer's fp32 weights fit comfortably in memory */
        double params = (double)(m->n_experts + m->n_shared) * 3.0 * m->hidden * m->inter;
        assert_true(params * 4 < 256e6);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_m3_numbers),
        cmocka_unit_test(test_sanity),
        cmocka_unit_test(test_minis),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
