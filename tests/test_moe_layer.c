/* test_moe_layer.c - the CPU MoE layer: against an fp64 evaluation, fused ==
 * unfused, TP 2/4 == TP 1, EP 2 == EP 1 (fused on and off), empty experts,
 * the routing record, bad arguments. Ranks here are handles driven in turn;
 * their partials are rounded to the activation dtype and summed in fp32 in
 * rank order (what the exact all-reduce does). test_moe_comm.c runs the
 * same layer through real thread communicators. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "moe/moe_internal.h"
#include "test_moe_common.h"

#define T_TOKENS 4

static tpm_moe_config mk_cfg(const char *preset, int tp, int tp_rank, int ep, int ep_rank, int fuse,
                             tpm_dtype dt) {
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = preset;
    c.tp_size = tp;
    c.tp_rank = tp_rank;
    c.ep_size = ep;
    c.ep_rank = ep_rank;
    c.fuse_shared = fuse;
    c.dtype = dt;
    c.backend = TPM_BACKEND_CPU;
    return c;
}

/* y = layer(x) over tp x ep ranks (hand all-reduce). Returns 0 on success. */
static void run_world(const char *preset, const tpm_moe_weights *w, int tp, int ep, int fuse,
                      tpm_dtype dt, const void *x, size_t T, void *y, tpm_moe_stats *rank_stats) {
    const size_t H = (size_t)w->hidden, n = T * H;
    int world = tp * ep;
    float *sum = calloc(n, sizeof *sum), *part = malloc(n * sizeof *part);
    void *rounded = malloc(n * tpm_dtype_size(dt));
    for (int r = 0; r < world; r++) {
        tpm_moe_config c = mk_cfg(preset, tp, r % tp, ep, r / tp, fuse, dt);
        tpm_moe_t m = NULL;
        assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, w), TPM_OK);
        if (world == 1) {
            assert_int_equal(tpm_moe_forward(m, NULL, x, y, T, dt, NULL), TPM_OK);
        } else {
            for (size_t i = 0; i < n; i++)
                part[i] = NAN;
            assert_int_equal(tpm_moe_cpu_partial(m, x, T, part), TPM_OK);
            for (size_t i = 0; i < n; i++)
                tpm_store_f32(rounded, (int)dt, i, part[i]);
            for (size_t i = 0; i < n; i++)
                sum[i] += tpm_load_f32(rounded, (int)dt, i);
        }
        if (rank_stats) assert_int_equal(tpm_moe_last_stats(m, &rank_stats[r]), TPM_OK);
        tpm_moe_destroy(m);
    }
    if (world > 1)
        for (size_t i = 0; i < n; i++)
            tpm_store_f32(y, (int)dt, i, sum[i]);
    free(sum);
    free(part);
    free(rounded);
}

static void *poisoned(size_t n, tpm_dtype dt) {
    void *p = malloc(n * tpm_dtype_size(dt));
    for (size_t i = 0; i < n; i++)
        tpm_store_f32(p, (int)dt, i, NAN);
    return p;
}

static const char *const mini_presets[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};

/* TP 1 against fp64, fp32 and bf16 activations; routing record checked. */
static void layer_vs_f64(void **state) {
    (void)state;
    for (int pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(mini_presets[pi]);
        assert_non_null(p);
        tpm_moe_weights w;
        tmake_weights(p, 11 + (uint64_t)pi, &w);
        const size_t T = T_TOKENS, H = (size_t)p->hidden, k = (size_t)p->top_k;
        for (int d = 0; d < 2; d++) {
            tpm_dtype dt = d ? TPM_DTYPE_BF16 : TPM_DTYPE_FP32;
            void *x = trand_input(100 + (uint64_t)pi, T * H, dt), *y = poisoned(T * H, dt);
            tpm_moe_config c = mk_cfg(p->name, 1, 0, 1, 0, -1, dt);
            tpm_moe_t m = NULL;
            assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, &w), TPM_OK);
            assert_int_equal(tpm_moe_forward(m, NULL, x, y, T, dt, NULL), TPM_OK);
            int32_t ids[T_TOKENS * 8], counts[80];
            float wts[T_TOKENS * 8];
            assert_int_equal(tpm_moe_last_routing(m, ids, wts, counts, T), TPM_OK);
            int64_t total = 0;
            for (int e = 0; e < p->n_experts; e++)
                total += counts[e];
            assert_int_equal(total, (int64_t)(T * k));
            if (p->n_shared) assert_int_equal(counts[p->n_experts], (int)T);
            tpm_expert_view ev[64], sv[1];
            tpm_moe_ref_layer L;
            tpm_moe_ref_layer_from_weights(&w, ev, sv, &L);
            double *ref = malloc(T * H * sizeof *ref), rw[T_TOKENS * 8];
            assert_int_equal(tpm_moe_reference_f64(&m->rp, &m->ap, &L, x, dt, T, ids, ref, rw),
                             TPM_OK);
            double err = trel_rms_vs_f64(y, dt, ref, T * H);
            print_message("  %-17s %s: rel rms vs fp64 %.3g\n", p->name, tpm_dtype_name(dt), err);
            assert_true(err < (d ? 6e-3 : 2e-6));
            for (size_t i = 0; i < T * k; i++)
                assert_true(fabs(wts[i] - rw[i]) < 1e-5 * (1 + rw[i]));
            /* the routing of the fp32 router is the top-k of its own scores */
            tpm_moe_stats st;
            assert_int_equal(tpm_moe_last_stats(m, &st), TPM_OK);
            assert_int_equal(st.ntokens, T);
            assert_true(st.distinct_experts >= (int)k && st.distinct_experts <= p->n_experts);
            free(ref);
            free(x);
            free(y);
            tpm_moe_destroy(m);
        }
        tfree_weights(&w);
    }
}

static void fused_equals_unfused(void **state) {
    (void)state;
    for (int pi = 0; pi < 2; pi++) { /* presets with a shared expert */
        const tpm_preset *p = tpm_preset_find(mini_presets[pi]);
        tpm_moe_weights w;
        tmake_weights(p, 21, &w);
        const size_t n = T_TOKENS * (size_t)p->hidden;
        for (int d = 0; d < 2; d++) {
            tpm_dtype dt = d ? TPM_DTYPE_BF16 : TPM_DTYPE_FP32;
            void *x = trand_input(5, n, dt), *yf = poisoned(n, dt), *yu = poisoned(n, dt);
            for (int tp = 1; tp <= 2 - (pi == 1); tp++) {
                run_world(p->name, &w, tp, 1, 1, dt, x, T_TOKENS, yf, NULL);
                run_world(p->name, &w, tp, 1, 0, dt, x, T_TOKENS, yu, NULL);
                /* the same operations in the same order (weight 1.0 is exact):
                 * bitwise equal without EP */
                assert_true(tmax_abs(yf, yu, dt, n) == 0.0);
            }
            free(x);
            free(yf);
            free(yu);
        }
        tfree_weights(&w);
    }
}

static void tp_equals_tp1(void **state) {
    (void)state;
    for (int pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(mini_presets[pi]);
        tpm_moe_weights w;
        tmake_weights(p, 31, &w);
        const size_t n = T_TOKENS * (size_t)p->hidden;
        for (int d = pi == 0 ? 0 : 1; d < 2; d++) {
            tpm_dtype dt = d ? TPM_DTYPE_BF16 : TPM_DTYPE_FP32;
            void *x = trand_input(6, n, dt), *y1 = poisoned(n, dt), *yt = poisoned(n, dt);
            run_world(p->name, &w, 1, 1, -1, dt, x, T_TOKENS, y1, NULL);
            for (int tp = 2; tp <= 4; tp *= 2) {
                run_world(p->name, &w, tp, 1, -1, dt, x, T_TOKENS, yt, NULL);
                double e = trel_rms(yt, y1, dt, n);
                print_message("  %-17s %s tp %d vs tp 1: rel rms %.3g\n", p->name,
                              tpm_dtype_name(dt), tp, e);
                assert_true(e < (d ? 8e-3 : 1e-6));
            }
            free(x);
            free(y1);
            free(yt);
        }
        tfree_weights(&w);
    }
}

static void ep_equals_ep1(void **state) {
    (void)state;
    for (int pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(mini_presets[pi]);
        tpm_moe_weights w;
        tmake_weights(p, 41, &w);
        const size_t n = T_TOKENS * (size_t)p->hidden;
        tpm_dtype dt = TPM_DTYPE_FP32;
        void *x = trand_input(7, n, dt), *y1 = poisoned(n, dt), *ye = poisoned(n, dt);
        run_world(p->name, &w, 1, 1, 0, dt, x, T_TOKENS, y1, NULL);
        const int shapes[3][2] = {{1, 2}, {2, 2}, {1, 4}}; /* tp, ep */
        for (int s = 0; s < (pi == 0 ? 3 : 2); s++)
            for (int fuse = 0; fuse <= 1; fuse++) {
                tpm_moe_stats st[8];
                run_world(p->name, &w, shapes[s][0], shapes[s][1], fuse, dt, x, T_TOKENS, ye, st);
                double e = trel_rms(ye, y1, dt, n);
                print_message("  %-17s tp %d ep %d fuse %d vs tp 1 ep 1: rel rms %.3g\n", p->name,
                              shapes[s][0], shapes[s][1], fuse, e);
                assert_true(e < 1e-6);
                /* every (token, slot) pair ran exactly once per TP rank */
                int64_t pairs = 0;
                for (int r = 0; r < shapes[s][0] * shapes[s][1]; r++)
                    if (r % shapes[s][0] == 0) pairs += st[r].local_pairs;
                int64_t want = (int64_t)T_TOKENS * p->top_k;
                if (p->n_shared)
                    want += fuse ? T_TOKENS
                                 : (int64_t)T_TOKENS * shapes[s][1]; /* unfused: every rank */
                assert_int_equal(pairs, want);
            }
        free(x);
        free(y1);
        free(ye);
        tfree_weights(&w);
    }
}

/* One token: most experts get nothing; and a router bias that sends every
 * token to the first half, so EP rank 1 has no routed work at all. */
static void empty_experts(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    tmake_weights(p, 51, &w);
    const size_t H = (size_t)p->hidden, E = (size_t)p->n_experts;
    tpm_dtype dt = TPM_DTYPE_FP32;
    void *x = trand_input(8, 4 * H, dt), *y1 = poisoned(4 * H, dt), *y2 = poisoned(4 * H, dt);
    run_world(p->name, &w, 1, 1, 1, dt, x, 1, y1, NULL);
    run_world(p->name, &w, 1, 2, 1, dt, x, 1, y2, NULL);
    assert_true(trel_rms(y2, y1, dt, H) < 1e-6);
    for (size_t e = 0; e < E; e++)
        w.router_bias[e] = e < E / 2 ? 10.0f : -10.0f;
    for (int fuse = 0; fuse <= 1; fuse++) {
        tpm_moe_stats st[2];
        run_world(p->name, &w, 1, 1, fuse, dt, x, 4, y1, NULL);
        run_world(p->name, &w, 1, 2, fuse, dt, x, 4, y2, st);
        assert_true(trel_rms(y2, y1, dt, 4 * H) < 1e-6);
        /* rank 1: no routed pairs; only its share of the shared work */
        assert_int_equal(st[1].local_pairs, fuse ? 2 : 4);
        assert_int_equal(st[0].local_pairs, 4 * p->top_k + (fuse ? 2 : 4));
        assert_true(st[0].distinct_experts <= (int)E / 2);
    }
    free(x);
    free(y1);
    free(y2);
    tfree_weights(&w);
}

static void bad_arguments(void **state) {
    (void)state;
    const tpm_preset *p = tpm_preset_find("m3-mini");
    tpm_moe_weights w;
    tmake_weights(p, 61, &w);
    tpm_moe_t m = (tpm_moe_t)(uintptr_t)1;
    tpm_moe_config c = mk_cfg("m3-mini", 1, 0, 1, 0, -1, TPM_DTYPE_BF16);
    assert_int_equal(tpm_moe_create_from_weights(&m, NULL, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_null(m);
    assert_int_equal(tpm_moe_create_from_weights(NULL, &c, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_create(&m, NULL, NULL), TPM_ERR_INVALID_ARG);
    tpm_moe_config b = c;
    b.struct_size = 8;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "TPM_MOE_CONFIG_INIT"));
    b = c;
    b.preset = "m4";
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "m3-mini"));
    b = c;
    b.preset = NULL;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.tp_size = 3; /* 256 % 3 */
    b.tp_rank = 0;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "tp_size 3"));
    b = c;
    b.ep_size = 3; /* 32 experts % 3 */
    b.ep_rank = 0;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "ep_size 3"));
    b = c;
    b.tp_size = 2;
    b.tp_rank = 2;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.tp_size = 0;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.fuse_shared = 2;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.dtype = (tpm_dtype)7;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.layer = -1;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    b = c;
    b.codec = (tpm_codec)42;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    /* weights of another preset */
    b = c;
    b.preset = "deepseek-v3-mini";
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "do not match"));
    /* unfused shared under tp 2 x ep 4 = 8 ranks: 256 % 8 == 0 works */
    b = mk_cfg("m3-mini", 2, 1, 4, 3, 0, TPM_DTYPE_BF16);
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_OK);
    tpm_moe_info info;
    assert_int_equal(tpm_moe_get_info(m, &info), TPM_OK);
    assert_int_equal(info.expert_begin, 24);
    assert_int_equal(info.expert_end, 32);
    assert_int_equal(info.inter_local, 128);
    assert_int_equal(info.local_experts, 8);
    assert_int_equal(info.fuse_shared, 0);
    tpm_moe_destroy(m);
    /* auto under EP > 1 is off (policy) and says why; fused adds a slot */
    b = mk_cfg("m3-mini", 1, 0, 2, 1, -1, TPM_DTYPE_BF16);
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_OK);
    assert_int_equal(tpm_moe_get_info(m, &info), TPM_OK);
    assert_int_equal(info.fuse_shared, 0);
    assert_non_null(strstr(info.fuse_reason, "off"));
    tpm_moe_destroy(m);
    b.fuse_shared = 1;
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_OK);
    assert_int_equal(tpm_moe_get_info(m, &info), TPM_OK);
    assert_int_equal(info.fuse_shared, 1);
    assert_int_equal(info.local_experts, 17);
    assert_int_equal(info.slots_per_token, 5);
    tpm_moe_destroy(m);

    /* forward */
    assert_int_equal(tpm_moe_create_from_weights(&m, &c, NULL, &w), TPM_OK);
    const size_t n = 2 * (size_t)p->hidden;
    void *x = trand_input(9, n, TPM_DTYPE_BF16), *y = poisoned(n, TPM_DTYPE_BF16);
    assert_int_equal(tpm_moe_forward(NULL, NULL, x, y, 2, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_forward(m, NULL, NULL, y, 2, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_moe_last_error(m), "NULL"));
    assert_int_equal(tpm_moe_forward(m, NULL, x, NULL, 2, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, 2, TPM_DTYPE_FP16, NULL), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_moe_last_error(m), "dtype"));
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, 0, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, 2, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_moe_last_routing(m, NULL, NULL, NULL, 3), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_last_routing(m, NULL, NULL, NULL, 2), TPM_OK);
    assert_int_equal(tpm_moe_get_info(m, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_last_stats(NULL, NULL), TPM_ERR_INVALID_ARG);
    /* in place: x == y gives the same result */
    void *xi = malloc(n * 2);
    memcpy(xi, x, n * 2);
    assert_int_equal(tpm_moe_forward(m, NULL, xi, xi, 2, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_memory_equal(xi, y, n * 2);
    tpm_moe_destroy(m);
    /* a layer of 2 ranks needs a comm */
    b = mk_cfg("m3-mini", 2, 0, 1, 0, -1, TPM_DTYPE_BF16);
    assert_int_equal(tpm_moe_create_from_weights(&m, &b, NULL, &w), TPM_OK);
    assert_int_equal(tpm_moe_forward(m, NULL, x, y, 2, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_moe_last_error(m), "comm"));
    tpm_moe_destroy(m);
    assert_int_equal(tpm_moe_destroy(NULL), TPM_OK);
    free(x);
    free(xi);
    free(y);
    tfree_weights(&w);
}

int main(void) {
    unsetenv("TPMOE_FUSE_SHARED_EXPERTS");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_vs_f64),  cmocka_unit_test(fused_equals_unfused),
        cmocka_unit_test(tp_equals_tp1), cmocka_unit_test(ep_equals_ep1),
        cmocka_unit_test(empty_experts), cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
