/* test_moe_math.c - the MoE scalar math against hand-computed cases: the
 * fixed-order dot product, the sigmoid+bias router (renormalize, rsf
 * folded, ties), grouped top-k, softmax top-k, NaN/Inf logits, the
 * activations (limit clamps, beta, interleaved) and one expert vs fp64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "moe/moe_math.h"
#include "test_moe_common.h"

static tpm_router_params sig_params(int E, int k, float rsf) {
    tpm_router_params p;
    memset(&p, 0, sizeof p);
    p.kind = TPM_ROUTER_SIGMOID_BIAS;
    p.n_experts = E;
    p.top_k = k;
    p.n_groups = 1;
    p.topk_groups = 1;
    p.routed_scaling_factor = rsf;
    return p;
}

static double sigm(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* Poison, select, and check the invariants every selection must keep. */
static void select_checked(const tpm_router_params *p, const float *logits, const float *bias,
                           int32_t *ids, float *w) {
    float scratch[2 * 64];
    for (int j = 0; j < p->top_k; j++) {
        ids[j] = -7;
        w[j] = NAN;
    }
    tpm_router_select(p, logits, bias, ids, w, scratch);
    double sum = 0.0;
    for (int j = 0; j < p->top_k; j++) {
        assert_true(ids[j] >= 0 && ids[j] < p->n_experts);
        for (int i = 0; i < j; i++)
            assert_int_not_equal(ids[i], ids[j]);
        assert_true(isfinite(w[j]) && w[j] >= 0.0f);
        sum += w[j];
    }
    assert_true(fabs(sum - p->routed_scaling_factor) < 1e-5 * p->routed_scaling_factor);
}

static void dot_fixed_order(void **state) {
    (void)state;
    trng r = {1};
    float a[45], b[45];
    for (int i = 0; i < 45; i++) {
        a[i] = (float)trng_normal(&r);
        b[i] = (float)trng_normal(&r) * 1e3f;
    }
    for (size_t n = 0; n <= 45; n++) {
        float l[8] = {0};
        for (size_t i = 0; i < n; i++)
            l[i % 8] += a[i] * b[i];
        float want = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        float got = tpm_dot_f32(a, b, n);
        assert_memory_equal(&got, &want, sizeof got); /* bitwise */
    }
}

static void router_sigmoid_hand(void **state) {
    (void)state;
    tpm_router_params p = sig_params(8, 2, 2.0f);
    const float logits[8] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -2.0f, 3.0f, 0.0f};
    float bias[8] = {0};
    int32_t ids[2];
    float w[2];
    /* no bias: experts 6 (3.0) and 3 (2.0) */
    select_checked(&p, logits, bias, ids, w);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 3);
    double s6 = sigm(3.0), s3 = sigm(2.0);
    assert_true(fabs(w[0] - 2.0 * s6 / (s6 + s3)) < 1e-6);
    assert_true(fabs(w[1] - 2.0 * s3 / (s6 + s3)) < 1e-6);
    /* the bias selects (expert 2 jumps to the top) but the weight uses s,
     * not s + bias */
    bias[2] = 1.0f;
    select_checked(&p, logits, bias, ids, w);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 6);
    double s2 = sigm(-1.0);
    assert_true(fabs(w[0] - 2.0 * s2 / (s2 + s6)) < 1e-6);
    assert_true(fabs(w[1] - 2.0 * s6 / (s2 + s6)) < 1e-6);
    /* a negative bias removes an expert from the top */
    bias[2] = 0.0f;
    bias[6] = -0.5f;
    select_checked(&p, logits, bias, ids, w);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 1); /* sigm(1)=.731 > sigm(3)-.5=.453 */
}

static void router_ties_lower_index(void **state) {
    (void)state;
    tpm_router_params p = sig_params(6, 3, 2.5f);
    float logits[6] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    int32_t ids[3];
    float w[3];
    select_checked(&p, logits, NULL, ids, w);
    for (int j = 0; j < 3; j++) {
        assert_int_equal(ids[j], j);
        assert_true(fabs(w[j] - 2.5 / 3.0) < 1e-6);
    }
    const float l2[6] = {0.5f, 2.0f, 2.0f, 0.5f, 2.0f, 0.5f};
    select_checked(&p, l2, NULL, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 4);
    /* a tie made by the bias, on the selection score only */
    const float l3[6] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const float b3[6] = {0.0f, 0.25f, 0.0f, 0.25f, 0.25f, 0.0f};
    select_checked(&p, l3, b3, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 4);
}

static void router_nan_inf(void **state) {
    (void)state;
    tpm_router_params p = sig_params(8, 4, 2.0f);
    int32_t ids[4];
    float w[4];
    float l[8] = {NAN, 1.0f, NAN, -INFINITY, INFINITY, NAN, 0.0f, -1.0f};
    select_checked(&p, l, NULL, ids, w);
    /* +Inf (s=1) first, then 1.0, 0.0, -1.0; NaN never while numbers remain */
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 6);
    assert_int_equal(ids[3], 7);
    /* all NaN: the lowest indices, uniform weights */
    for (int e = 0; e < 8; e++)
        l[e] = NAN;
    select_checked(&p, l, NULL, ids, w);
    for (int j = 0; j < 4; j++) {
        assert_int_equal(ids[j], j);
        assert_true(fabs(w[j] - 0.5f) < 1e-6);
    }
    /* all -Inf: every s is 0, uniform; a NaN logit counts as -Inf (s = 0) */
    for (int e = 0; e < 8; e++)
        l[e] = -INFINITY;
    l[0] = NAN;
    select_checked(&p, l, NULL, ids, w);
    for (int j = 0; j < 4; j++)
        assert_int_equal(ids[j], j);
    /* all NaN with a bias: the keys are the biases (the GPU router's rule) */
    const float b1[8] = {0.0f, 0.3f, 0.1f, 0.5f, 0.2f, 0.4f, 0.0f, 0.0f};
    for (int e = 0; e < 8; e++)
        l[e] = NAN;
    select_checked(&p, l, b1, ids, w);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], 1);
    assert_int_equal(ids[3], 4);
    for (int j = 0; j < 4; j++)
        assert_true(fabs(w[j] - 0.5f) < 1e-6);
    /* NaN bias: that expert is out */
    const float l2[8] = {5.0f, 4.0f, 3.0f, 2.0f, 1.0f, 0.0f, -1.0f, -2.0f};
    const float b2[8] = {NAN, 0, 0, 0, 0, 0, 0, 0};
    select_checked(&p, l2, b2, ids, w);
    assert_int_equal(ids[0], 1);
    /* fuzz: random mixtures keep the invariants, for every router kind */
    trng r = {99};
    for (int it = 0; it < 2000; it++) {
        tpm_router_params q = sig_params(16, 1 + (int)(trng_next(&r) % 6), 1.5f);
        q.kind = (tpm_router_kind)(trng_next(&r) % 3);
        if (q.kind == TPM_ROUTER_GROUPED_SIGMOID) {
            q.n_groups = 4;
            q.topk_groups = 2;
        }
        float lg[16], bs[16];
        for (int e = 0; e < 16; e++) {
            uint64_t c = trng_next(&r) % 6;
            lg[e] = c == 0 ? NAN : c == 1 ? INFINITY : c == 2 ? -INFINITY : (float)trng_normal(&r);
            bs[e] = (trng_next(&r) % 10 == 0) ? NAN : (float)trng_normal(&r) * 0.1f;
        }
        int32_t id[8];
        float ww[8];
        select_checked(&q, lg, (it & 1) ? bs : NULL, id, ww);
    }
}

static void router_grouped(void **state) {
    (void)state;
    tpm_router_params p = sig_params(16, 4, 2.5f);
    p.kind = TPM_ROUTER_GROUPED_SIGMOID;
    p.n_groups = 4;
    p.topk_groups = 2;
    assert_int_equal(tpm_router_params_check(&p), TPM_OK);
    float l[16];
    for (int e = 0; e < 16; e++)
        l[e] = -3.0f;
    /* group 0: the single best expert, but a weak second: top-2 sum low */
    l[0] = 4.0f;
    /* group 1: two good experts (sum beats group 0) */
    l[4] = 2.0f;
    l[5] = 2.0f;
    /* group 2: three fair experts */
    l[8] = 1.5f;
    l[9] = 1.5f;
    l[10] = 1.4f;
    /* group 3: nothing */
    int32_t ids[4];
    float w[4];
    select_checked(&p, l, NULL, ids, w);
    /* group sums: g0 = s(4)+s(-3) = 1.03, g1 = 2 s(2) = 1.76, g2 = 2 s(1.5) =
     * 1.63, g3 = 0.09 -> keep groups 1 and 2; expert 0 is masked */
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], 8);
    assert_int_equal(ids[3], 9);
    double s2 = sigm(2.0), s15 = sigm(1.5), sum = 2 * s2 + 2 * s15;
    assert_true(fabs(w[0] - 2.5 * s2 / sum) < 1e-6);
    assert_true(fabs(w[2] - 2.5 * s15 / sum) < 1e-6);
    /* ungrouped, expert 0 would win */
    p.kind = TPM_ROUTER_SIGMOID_BIAS;
    select_checked(&p, l, NULL, ids, w);
    assert_int_equal(ids[0], 0);
    /* bad group parameters */
    p.kind = TPM_ROUTER_GROUPED_SIGMOID;
    p.n_groups = 3;
    assert_int_equal(tpm_router_params_check(&p), TPM_ERR_INVALID_ARG);
    p.n_groups = 8;
    p.topk_groups = 1; /* 1 group of 2 cannot hold k = 4 */
    assert_int_equal(tpm_router_params_check(&p), TPM_ERR_INVALID_ARG);
    p.topk_groups = 9;
    assert_int_equal(tpm_router_params_check(&p), TPM_ERR_INVALID_ARG);
    p = sig_params(16, 17, 1.0f);
    assert_int_equal(tpm_router_params_check(&p), TPM_ERR_INVALID_ARG);
    p = sig_params(16, 2, 0.0f);
    assert_int_equal(tpm_router_params_check(&p), TPM_ERR_INVALID_ARG);
}

static void router_softmax_topk(void **state) {
    (void)state;
    tpm_router_params p = sig_params(5, 2, 1.0f);
    p.kind = TPM_ROUTER_SOFTMAX_TOPK;
    const float l[5] = {1.0f, 2.0f, 3.0f, 0.0f, 3.0f};
    int32_t ids[2];
    float w[2];
    select_checked(&p, l, NULL, ids, w);
    assert_int_equal(ids[0], 2); /* tie 3.0 / 3.0 -> lower index first */
    assert_int_equal(ids[1], 4);
    assert_true(fabs(w[0] - 0.5) < 1e-7 && fabs(w[1] - 0.5) < 1e-7);
    const float l2[5] = {1.0f, 2.0f, 3.0f, 0.0f, -1.0f};
    select_checked(&p, l2, NULL, ids, w);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 1);
    double e1 = exp(-1.0);
    assert_true(fabs(w[0] - 1.0 / (1.0 + e1)) < 1e-6);
    assert_true(fabs(w[1] - e1 / (1.0 + e1)) < 1e-6);
    /* a logit bias (the router's linear bias) shifts the selection */
    const float b[5] = {0.0f, 0.0f, 0.0f, 5.0f, 0.0f};
    select_checked(&p, l2, b, ids, w);
    assert_int_equal(ids[0], 3);
    assert_int_equal(ids[1], 2);
    /* +Inf logits share the weight; NaN is last */
    const float l3[5] = {NAN, INFINITY, 1.0f, INFINITY, 2.0f};
    select_checked(&p, l3, NULL, ids, w);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_true(w[0] == 0.5f && w[1] == 0.5f);
    const float l4[5] = {NAN, NAN, NAN, NAN, NAN};
    select_checked(&p, l4, NULL, ids, w);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
}

static void activations_hand(void **state) {
    (void)state;
    const float a = 1.702f, lim = 7.0f, beta = 1.0f;
    /* no clamp */
    double want = 1.0 * sigm(1.702) * (2.0 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(1.0f, 2.0f, a, lim, beta) - want) < 1e-6 * want);
    /* gate clamped from above only: g = 10 -> 7; a very negative g is kept */
    want = 7.0 * sigm(1.702 * 7.0) * (0.5 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(10.0f, 0.5f, a, lim, beta) - want) < 1e-6 * want);
    want = -9.0 * sigm(1.702 * -9.0) * (0.5 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(-9.0f, 0.5f, a, lim, beta) - want) < 1e-5 * fabs(want));
    /* up clamped both ways, then + beta (the +1 is load-bearing) */
    want = 1.0 * sigm(1.702) * (-7.0 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(1.0f, -9.0f, a, lim, beta) - want) < 1e-6 * fabs(want));
    want = 1.0 * sigm(1.702) * (7.0 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(1.0f, 100.0f, a, lim, beta) - want) < 1e-6 * want);
    want = 2.0 * sigm(1.702 * 2.0) * (0.0 + 1.0);
    assert_true(fabs(tpm_act_swiglu_oai(2.0f, 0.0f, a, lim, beta) - want) < 1e-6 * want);
    /* NaN propagates (a fminf clamp would turn it into the limit) */
    assert_true(isnan(tpm_act_swiglu_oai(NAN, 1.0f, a, lim, beta)));
    assert_true(isnan(tpm_act_swiglu_oai(1.0f, NAN, a, lim, beta)));
    /* SiLU-GLU */
    want = 2.0 / (1.0 + exp(-2.0)) * 3.0;
    assert_true(fabs(tpm_act_silu_glu(2.0f, 3.0f) - want) < 1e-6 * want);
    assert_true(fabs(tpm_act_silu_glu(20.0f, 1.0f) - 20.0) < 1e-5);

    /* layouts: [gate | up] vs interleaved pairs give the same outputs */
    tpm_act_params ap = {TPM_ACT_SWIGLU_OAI, a, lim, beta};
    const float g[4] = {1.0f, 10.0f, -3.0f, 0.25f}, u[4] = {2.0f, 0.5f, -9.0f, 8.0f};
    float hu[8], hi[8], ou[4], oi[4];
    for (int i = 0; i < 4; i++) {
        hu[i] = g[i];
        hu[4 + i] = u[i];
        hi[2 * i] = g[i];
        hi[2 * i + 1] = u[i];
    }
    tpm_act_apply(&ap, hu, 4, ou);
    ap.kind = TPM_ACT_SWIGLU_OAI_INTERLEAVED;
    tpm_act_apply(&ap, hi, 4, oi);
    for (int i = 0; i < 4; i++) {
        float want_i = tpm_act_swiglu_oai(g[i], u[i], a, lim, beta);
        assert_memory_equal(&ou[i], &want_i, sizeof want_i);
        assert_memory_equal(&oi[i], &want_i, sizeof want_i);
    }
    ap.kind = TPM_ACT_SILU_GLU;
    tpm_act_apply(&ap, hu, 4, ou);
    for (int i = 0; i < 4; i++)
        assert_true(ou[i] == tpm_act_silu_glu(g[i], u[i]));
    /* no limit: preset limit 0 -> +Inf */
    tpm_preset pr;
    memset(&pr, 0, sizeof pr);
    pr.act = TPM_ACT_SILU_GLU;
    pr.act_limit = 0.0f;
    tpm_act_params_from_preset(&pr, &ap);
    assert_true(isinf(ap.limit));
}

/* One expert (with biases, both layouts) against an fp64 evaluation. */
static void expert_vs_f64(void **state) {
    (void)state;
    const int H = 40, I = 12, n = 5;
    trng r = {7};
    for (int kind = 0; kind < 3; kind++) {
        tpm_expert_weights ew;
        tfill_expert(&r, &ew, H, I, 1);
        tpm_expert_view v = {ew.gate_up, ew.gate_up_bias, ew.down, ew.down_bias};
        tpm_act_params ap = {(tpm_act_kind)kind, 1.702f, 7.0f, 1.0f};
        float *x = trand_bf16(&r, (size_t)n * H, 4.0);
        float *h = malloc((size_t)n * 3 * I * sizeof *h),
              *out = malloc((size_t)n * H * sizeof *out);
        for (int i = 0; i < n * H; i++)
            out[i] = NAN;
        tpm_expert_forward(&ap, &v, H, I, x, (size_t)n, h, out);
        int clamped = 0;
        for (int t = 0; t < n; t++) {
            double hh[24], a[12];
            for (int rr = 0; rr < 2 * I; rr++) {
                double s = ew.gate_up_bias[rr];
                for (int i = 0; i < H; i++)
                    s += (double)ew.gate_up[rr * H + i] * x[t * H + i];
                hh[rr] = s;
            }
            for (int i = 0; i < I; i++) {
                double gg = kind == 1 ? hh[2 * i] : hh[i],
                       uu = kind == 1 ? hh[2 * i + 1] : hh[I + i];
                clamped += gg > 7.0 || fabs(uu) > 7.0;
                a[i] = kind == 2 ? tpm_act_silu_glu_f64(gg, uu)
                                 : tpm_act_swiglu_oai_f64(gg, uu, 1.702f, 7.0, 1.0);
            }
            for (int o = 0; o < H; o++) {
                double s = ew.down_bias[o];
                for (int i = 0; i < I; i++)
                    s += (double)ew.down[o * I + i] * a[i];
                assert_true(fabs(out[t * H + o] - s) < 1e-4 * (1.0 + fabs(s)));
            }
        }
        if (kind != 2) assert_true(clamped > 0); /* the data exercises the clamps */
        free(x);
        free(h);
        free(out);
        tfree_expert(&ew);
    }
}

/* The batched expert (weight rows against four tokens at once, then one by one) gives bitwise the
 * single-token tpm_dot_f32 results, at lengths that leave a tail after the 8-lane steps (H 21,
 * inter 11) and a token count that leaves singles after the groups of four (7). */
static void expert_batched_bitwise(void **state) {
    (void)state;
    const int H = 21, I = 11, n = 7;
    trng r = {11};
    tpm_expert_weights ew;
    tfill_expert(&r, &ew, H, I, 1);
    tpm_expert_view v = {ew.gate_up, ew.gate_up_bias, ew.down, ew.down_bias};
    tpm_act_params ap = {TPM_ACT_SWIGLU_OAI, 1.702f, 7.0f, 1.0f};
    float *x = trand_bf16(&r, (size_t)n * H, 4.0);
    float *h = malloc((size_t)n * 3 * I * sizeof *h), *out = malloc((size_t)n * H * sizeof *out);
    for (int i = 0; i < n * H; i++)
        out[i] = NAN;
    tpm_expert_forward(&ap, &v, H, I, x, (size_t)n, h, out);
    for (int t = 0; t < n; t++) {
        float hh[22], a[11];
        for (int rr = 0; rr < 2 * I; rr++)
            hh[rr] = tpm_dot_f32(ew.gate_up + rr * H, x + t * H, (size_t)H) + ew.gate_up_bias[rr];
        tpm_act_apply(&ap, hh, I, a);
        for (int o = 0; o < H; o++) {
            float want = tpm_dot_f32(ew.down + o * I, a, (size_t)I) + ew.down_bias[o];
            assert_memory_equal(&out[t * H + o], &want, sizeof want); /* bitwise */
        }
    }
    free(x);
    free(h);
    free(out);
    tfree_expert(&ew);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dot_fixed_order),         cmocka_unit_test(router_sigmoid_hand),
        cmocka_unit_test(router_ties_lower_index), cmocka_unit_test(router_nan_inf),
        cmocka_unit_test(router_grouped),          cmocka_unit_test(router_softmax_topk),
        cmocka_unit_test(activations_hand),        cmocka_unit_test(expert_vs_f64),
        cmocka_unit_test(expert_batched_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
