/*
 * test_codec_accuracy.c - the codecs' error, measured: single round-trip
 * relative RMS error per codec on Gaussian and heavy-tailed (Student-t, 3
 * degrees of freedom) data, and a simulation of the two-shot quantized
 * all-reduce (issue 7) on 2 and 8 ranks built from the codec functions only:
 * every non-owner rank's contribution is quantized, the owner sums in fp32 in
 * rank order in the codec domain, re-quantizes, every rank decodes.
 *
 * The bounds asserted here are the ones docs/codecs.md states.
 * TPMOE_CODEC_SIM_N=1048576 prints the full table of docs/codecs.md (every
 * codec, three data sets, 2 and 8 ranks) for that many values per rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/codec.h"
#include "codec/codec_format.h"
#include "util/splitmix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tpm_codec k_lossy[] = {TPM_CODEC_INT8, TPM_CODEC_INT6,   TPM_CODEC_INT4,
                                    TPM_CODEC_FP8,  TPM_CODEC_INT4_H, TPM_CODEC_INT6_H};
#define N_LOSSY (sizeof k_lossy / sizeof k_lossy[0])

/* MARK: data */
enum { DATA_GAUSS, DATA_T3, DATA_OUTLIER, DATA_COUNT };
static const char *const k_data_names[] = {"Gaussian", "Student-t(3)", "Gaussian, every 97th x30"};

/* world * n values of a data set (n per rank), rounded to bf16 as
 * activations are. Outlier channels are the same on every rank. */
static void make_data(int kind, uint64_t *s, float *x, size_t n, int world) {
    for (size_t i = 0; i < n * (size_t)world; i++) {
        double v = kind == DATA_T3 ? tu_sm_t3(s) : tu_sm_gauss(s);
        if (kind == DATA_OUTLIER && (i % n) % 97 == 0) v *= 30.0;
        x[i] = tpm_bf16_to_f32(tpm_f32_to_bf16((float)v));
    }
}

/* MARK: measurements */
/* Relative RMS error of one encode/decode (public API, bf16 in and out). */
static double roundtrip_error(tpm_codec c, const float *x, size_t n) {
    uint16_t *in = malloc(n * 2), *out = malloc(n * 2);
    size_t wb = tpm_codec_encoded_bytes(c, n);
    uint8_t *wire = malloc(wb);
    assert_true(in && out && wire);
    for (size_t i = 0; i < n; i++) in[i] = tpm_f32_to_bf16(x[i]);
    assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_BF16, in, n, wire, wb), TPM_OK);
    assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_BF16, wire, wb, n, out), TPM_OK);
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)tpm_bf16_to_f32(out[i]) - x[i];
        e += d * d;
        r += (double)x[i] * x[i];
    }
    free(in);
    free(out);
    free(wire);
    return sqrt(e / r);
}

/* Two-shot all-reduce of world ranks' data x[r*n + i] (n a multiple of 32):
 * relative RMS error of the fp32 result against the exact (fp64) sum. */
static double twoshot_error(tpm_codec c, int world, const float *x, size_t n) {
    size_t nblk = n / 32, seg = (nblk + (size_t)world - 1) / (size_t)world;
    float *dom = malloc(n * (size_t)world * 4), *acc = malloc(n * 4), *tmp = malloc(seg * 32 * 4);
    float *out = malloc(n * 4);
    uint8_t *wire = malloc(tpm_codec_wire_bytes(c, seg));
    assert_true(dom && acc && tmp && out && wire);
    for (int r = 0; r < world; r++) tpm_codec_to_domain(c, x + (size_t)r * n, TPM_DTYPE_FP32, n, dom + (size_t)r * n);
    for (int o = 0; o < world; o++) { /* segment o, owned by rank o */
        size_t b0 = (size_t)o * seg, nb = b0 >= nblk ? 0 : (nblk - b0 < seg ? nblk - b0 : seg);
        if (nb == 0) continue;
        float *a = acc + b0 * 32;
        for (size_t i = 0; i < nb * 32; i++) a[i] = 0.0f;
        for (int r = 0; r < world; r++) {
            const float *part = dom + (size_t)r * n + b0 * 32;
            if (r != o) { /* a peer's payload goes over the wire */
                tpm_codec_quantize(c, part, nb, wire);
                tpm_codec_dequantize(c, wire, nb, tmp);
                part = tmp;
            }
            for (size_t i = 0; i < nb * 32; i++) a[i] = a[i] + part[i];
        }
        tpm_codec_quantize(c, a, nb, wire); /* the reduced segment, re-encoded */
        tpm_codec_dequantize(c, wire, nb, a);
    }
    tpm_codec_from_domain(c, acc, n, out, TPM_DTYPE_FP32);
    double e = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        double ref = 0;
        for (int r = 0; r < world; r++) ref += x[(size_t)r * n + i];
        e += (out[i] - ref) * (out[i] - ref);
        s2 += ref * ref;
    }
    free(dom);
    free(acc);
    free(tmp);
    free(out);
    free(wire);
    return sqrt(e / s2);
}

/* MARK: bounds (docs/codecs.md states the same numbers) */
/* Round trip, relative RMS, on 64K bf16 values: {Gaussian, Student-t(3)}. */
static const double k_roundtrip_bound[N_LOSSY][2] = {
    {0.0070, 0.0115}, /* INT8 */
    {0.027, 0.043},   /* INT6 */
    {0.108, 0.155},   /* INT4 */
    {0.030, 0.024},   /* FP8 */
    {0.108, 0.100},   /* INT4_H */
    {0.027, 0.0245},  /* INT6_H */
};

static void test_roundtrip_error(void **state) {
    (void)state;
    enum { N = 65536 };
    float *x = malloc(N * 4);
    assert_non_null(x);
    for (int d = DATA_GAUSS; d <= DATA_T3; d++) {
        uint64_t s = 1000 + (uint64_t)d;
        make_data(d, &s, x, N, 1);
        for (size_t k = 0; k < N_LOSSY; k++) {
            double e = roundtrip_error(k_lossy[k], x, N);
            printf("  round trip %-6s %-12s rel RMS %.4f%% (bound %.2f%%)\n", tpm_codec_name(k_lossy[k]),
                   k_data_names[d], 100 * e, 100 * k_roundtrip_bound[k][d]);
            assert_true(e <= k_roundtrip_bound[k][d]);
            assert_true(e > k_roundtrip_bound[k][d] / 4); /* a codec that stopped quantizing */
        }
    }
    free(x);
}

/* Issue 7's target: rotated INT4 error <= 0.7x plain INT4 on heavy-tailed
 * and outlier-channel data, 2 and 8 ranks (64K values per rank here; the
 * 1M-value numbers are in docs/codecs.md). Also every codec's all-reduce
 * error stays within tpm_codec_allreduce_error_bound(). */
static void test_twoshot_rotation_target(void **state) {
    (void)state;
    enum { N = 65536 };
    static const int worlds[] = {2, 8};
    float *x = malloc((size_t)N * 8 * 4);
    assert_non_null(x);
    for (int d = DATA_GAUSS; d < DATA_COUNT; d++) {
        for (size_t w = 0; w < 2; w++) {
            int world = worlds[w];
            uint64_t s = 2000 + (uint64_t)(d * 10 + world);
            make_data(d, &s, x, N, world);
            double e4 = twoshot_error(TPM_CODEC_INT4, world, x, N);
            double e4h = twoshot_error(TPM_CODEC_INT4_H, world, x, N);
            printf("  two-shot world %d %-24s int4 %.2f%% int4_h %.2f%% ratio %.3f\n", world,
                   k_data_names[d], 100 * e4, 100 * e4h, e4h / e4);
            if (d != DATA_GAUSS) assert_true(e4h <= 0.7 * e4);
            assert_true(e4 <= tpm_codec_allreduce_error_bound(TPM_CODEC_INT4));
            assert_true(e4h <= tpm_codec_allreduce_error_bound(TPM_CODEC_INT4_H));
        }
    }
    free(x);
}

/* The other codecs' all-reduce error against the bound, 8 ranks (the worst),
 * smaller data so it stays quick under ASan. */
static void test_twoshot_bounds(void **state) {
    (void)state;
    enum { N = 16384, W = 8 };
    float *x = malloc((size_t)N * W * 4);
    assert_non_null(x);
    for (int d = DATA_GAUSS; d < DATA_COUNT; d++) {
        uint64_t s = 3000 + (uint64_t)d;
        make_data(d, &s, x, N, W);
        for (size_t k = 0; k < N_LOSSY; k++) {
            double e = twoshot_error(k_lossy[k], W, x, N);
            assert_true(e <= tpm_codec_allreduce_error_bound(k_lossy[k]));
            assert_true(e > tpm_codec_allreduce_error_bound(k_lossy[k]) / 20);
        }
    }
    free(x);
}

/* TPMOE_CODEC_SIM_N=n: print docs/codecs.md's table for n values per rank. */
static int print_table(size_t n) {
    static const int worlds[] = {2, 8};
    n = (n + 31) / 32 * 32;
    float *x = malloc(n * 8 * 4);
    if (!x) return 1;
    printf("| data | ranks |");
    for (size_t k = 0; k < N_LOSSY; k++) printf(" %s |", tpm_codec_name(k_lossy[k]));
    printf("\n| --- | --- |");
    for (size_t k = 0; k < N_LOSSY; k++) printf(" --- |");
    printf("\n");
    for (int d = DATA_GAUSS; d < DATA_COUNT; d++) {
        for (size_t w = 0; w < 2; w++) {
            uint64_t s = 2000 + (uint64_t)(d * 10 + worlds[w]);
            make_data(d, &s, x, n, worlds[w]);
            printf("| %s | %d |", k_data_names[d], worlds[w]);
            for (size_t k = 0; k < N_LOSSY; k++)
                printf(" %.2f%% |", 100 * twoshot_error(k_lossy[k], worlds[w], x, n));
            printf("\n");
            fflush(stdout);
        }
    }
    printf("\nround trip (one encode/decode), %zu values:\n", n);
    for (int d = DATA_GAUSS; d < DATA_COUNT; d++) {
        uint64_t s = 1000 + (uint64_t)d;
        make_data(d, &s, x, n, 1);
        printf("| %s |", k_data_names[d]);
        for (size_t k = 0; k < N_LOSSY; k++) printf(" %.3f%% |", 100 * roundtrip_error(k_lossy[k], x, n));
        printf("\n");
    }
    free(x);
    return 0;
}

int main(void) {
    const char *sim = getenv("TPMOE_CODEC_SIM_N");
    if (sim && *sim) return print_table((size_t)strtoull(sim, NULL, 0));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_error),
        cmocka_unit_test(test_twoshot_rotation_target),
        cmocka_unit_test(test_twoshot_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
