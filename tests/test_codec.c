/*
 * test_codec.c - the block codecs' format and CPU reference: e4m3
 * conversion (all 256 codes, rounding), INT6/INT4 packing, the Hadamard
 * transform, scales (extremes, ties, zero, tiny, NaN/Inf), tails, dtypes,
 * public API vs the domain path, bad arguments, and the golden byte vectors
 * of tests/golden/. Error bounds and the all-reduce simulation are in
 * test_codec_accuracy.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/codec.h"
#include "codec/codec_format.h"
#include "internal.h"
#include "util/splitmix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tpm_codec k_lossy[] = {TPM_CODEC_INT8, TPM_CODEC_INT6,   TPM_CODEC_INT4,
                                    TPM_CODEC_FP8,  TPM_CODEC_INT4_H, TPM_CODEC_INT6_H};
#define N_LOSSY (sizeof k_lossy / sizeof k_lossy[0])

/* MARK: helpers */
/* n Gaussian values stored as dtype dt (scale sigma). */
static void fill(uint64_t *s, void *p, tpm_dtype dt, size_t n, double sigma) {
    for (size_t i = 0; i < n; i++) tpm_store_f32(p, (int)dt, i, (float)(tu_sm_gauss(s) * sigma));
}

static int same_bits(float a, float b) { return tpm_f32_bits(a) == tpm_f32_bits(b); }

/* Unpacked code i of block b of a wire run of nblk blocks. */
static int wire_code(tpm_codec c, const uint8_t *wire, size_t b, int i) {
    int fmt = tpm_codec_fmt((int)c);
    uint8_t codes[TPM_CODEC_BLOCK];
    tpm_codec_unpack(fmt, wire + b * (size_t)tpm_fmt_code_bytes(fmt), codes);
    return codes[i];
}

static uint16_t wire_scale(tpm_codec c, const uint8_t *wire, size_t nblk, size_t b) {
    int fmt = tpm_codec_fmt((int)c);
    return tpm_codec_get_scale(wire + tpm_fmt_scale_offset(fmt, nblk) + 2 * b);
}

/* MARK: format constants */
static void test_wire_sizes(void **state) {
    (void)state;
    static const struct {
        tpm_codec c;
        size_t one, eight;
        double bits;
    } t[] = {{TPM_CODEC_INT8, 48, 272, 8.5}, {TPM_CODEC_INT6, 32, 208, 6.5},
             {TPM_CODEC_INT4, 32, 144, 4.5}, {TPM_CODEC_FP8, 48, 272, 8.5},
             {TPM_CODEC_INT4_H, 32, 144, 4.5}, {TPM_CODEC_INT6_H, 32, 208, 6.5}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        assert_int_equal(tpm_codec_wire_bytes(t[i].c, 1), t[i].one);
        assert_int_equal(tpm_codec_wire_bytes(t[i].c, 8), t[i].eight);
        assert_true(fabs((double)tpm_codec_wire_bytes(t[i].c, 1024) * 8 / (1024 * 32) - t[i].bits) < 1e-12);
        assert_int_equal(tpm_codec_encoded_bytes(t[i].c, 33), tpm_codec_wire_bytes(t[i].c, 2));
        assert_int_equal(tpm_codec_encoded_bytes(t[i].c, 0), 0);
        assert_true(tpm_codec_is_lossy(t[i].c));
        assert_int_equal(tpm_codec_rotates(t[i].c),
                         t[i].c == TPM_CODEC_INT4_H || t[i].c == TPM_CODEC_INT6_H);
    }
    assert_int_equal(tpm_codec_wire_bytes(TPM_CODEC_NONE, 4), 0);
    assert_int_equal(tpm_codec_wire_bytes((tpm_codec)99, 4), 0);
    assert_int_equal(tpm_codec_encoded_bytes(TPM_CODEC_DEFAULT, 64), 0);
    assert_int_equal(tpm_codec_encoded_bytes(TPM_CODEC_INT4, SIZE_MAX), 0);
    assert_false(tpm_codec_is_lossy(TPM_CODEC_NONE));
    assert_false(tpm_codec_rotates(TPM_CODEC_NONE));
}

/* MARK: e4m3 */
static void test_e4m3_all_codes(void **state) {
    (void)state;
    for (int c = 0; c < 256; c++) {
        float v = tpm_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f) {
            assert_true(isnan(v));
            assert_int_equal(tpm_f32_to_e4m3(v), c | 0x7f); /* NaN stays NaN */
            continue;
        }
        assert_true(isfinite(v));
        assert_int_equal(tpm_f32_to_e4m3(v), c); /* decode -> encode is identity */
        assert_int_equal(signbit(v) != 0, (c & 0x80) != 0);
    }
    /* A few anchors of the format. */
    assert_true(tpm_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(tpm_e4m3_to_f32(0xfe) == -448.0f);
    assert_true(tpm_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(tpm_e4m3_to_f32(0x08) == 0x1p-6f);
    assert_true(tpm_e4m3_to_f32(0x38) == 1.0f);
    /* Midpoints between neighbouring codes round to the even code; a hair
     * above / below goes up / down. */
    for (int c = 0; c < 0x7e; c++) {
        float lo = tpm_e4m3_to_f32((uint8_t)c), hi = tpm_e4m3_to_f32((uint8_t)(c + 1));
        float mid = (lo + hi) * 0.5f;
        assert_true((double)mid == ((double)lo + (double)hi) / 2); /* exact */
        int even = (c & 1) ? c + 1 : c;
        assert_int_equal(tpm_f32_to_e4m3(mid), even);
        assert_int_equal(tpm_f32_to_e4m3(-mid), even | 0x80);
        assert_int_equal(tpm_f32_to_e4m3(nextafterf(mid, 1000.0f)), c + 1);
        assert_int_equal(tpm_f32_to_e4m3(nextafterf(mid, 0.0f)), c);
    }
    /* Saturation: never the NaN code for finite or infinite input. */
    assert_int_equal(tpm_f32_to_e4m3(464.0f), 0x7e);
    assert_int_equal(tpm_f32_to_e4m3(1e30f), 0x7e);
    assert_int_equal(tpm_f32_to_e4m3(-3.4e38f), 0xfe);
    assert_int_equal(tpm_f32_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(tpm_f32_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(tpm_f32_to_e4m3(0x1p-10f), 0x00);  /* half the smallest: even */
    assert_int_equal(tpm_f32_to_e4m3(-0x1p-12f), 0x80); /* underflow keeps the sign */
    assert_int_equal(tpm_f32_to_e4m3(1e-40f), 0x00);    /* f32 subnormal */
}

/* Nearest e4m3 code by brute force (ties: even code), saturating. */
static int e4m3_brute(float f) {
    int sign = signbit(f) ? 0x80 : 0;
    double a = fabs((double)f);
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c <= 0x7e; c++) {
        double d = fabs((double)tpm_e4m3_to_f32((uint8_t)c) - a);
        if (d < bd || (d == bd && !(c & 1))) {
            bd = d;
            best = c;
        }
    }
    return sign | best;
}

static void test_e4m3_random(void **state) {
    (void)state;
    uint64_t s = 77;
    for (int i = 0; i < 20000; i++) {
        /* log-uniform magnitudes over 2^-14 .. 2^10, both signs */
        double e = -14.0 + 24.0 * tu_sm_unif(&s);
        float f = (float)(exp2(e) * (tu_sm_next(&s) & 1 ? -1.0 : 1.0));
        if (tpm_f32_to_e4m3(f) != e4m3_brute(f)) fail_msg("e4m3(%a) = %#x, want %#x", (double)f,
                                                          tpm_f32_to_e4m3(f), e4m3_brute(f));
    }
}

/* MARK: packing */
static void test_int6_packing(void **state) {
    (void)state;
    for (int j = 0; j < 64; j++) { /* every code at every position */
        uint8_t c[32], back[32], packed[TPM_INT6_CODE_BYTES];
        for (int k = 0; k < 32; k++) c[k] = (uint8_t)((k * 7 + j) % 64);
        memset(packed, 0xAA, sizeof packed);
        tpm_codec_pack(TPM_FMT_INT6, c, packed);
        /* little-endian bit stream: code k at bits [6k, 6k+6) */
        for (int k = 0; k < 32; k++) {
            int v = 0;
            for (int bit = 0; bit < 6; bit++) {
                int p = 6 * k + bit;
                v |= ((packed[p / 8] >> (p % 8)) & 1) << bit;
            }
            assert_int_equal(v, c[k]);
        }
        memset(back, 0xFF, sizeof back);
        tpm_codec_unpack(TPM_FMT_INT6, packed, back);
        assert_memory_equal(back, c, 32);
    }
    /* The documented 4-codes-to-3-bytes example. */
    uint8_t c[32] = {0x3f, 0x01, 0x22, 0x15}, p[24];
    tpm_codec_pack(TPM_FMT_INT6, c, p);
    assert_int_equal(p[0], (0x3f | (0x01 << 6)) & 0xff);
    assert_int_equal(p[1], ((0x01 >> 2) | (0x22 << 4)) & 0xff);
    assert_int_equal(p[2], ((0x22 >> 4) | (0x15 << 2)) & 0xff);
}

static void test_int4_packing(void **state) {
    (void)state;
    for (int j = 0; j < 16; j++) {
        uint8_t c[32], back[32], packed[TPM_INT4_CODE_BYTES];
        for (int k = 0; k < 32; k++) c[k] = (uint8_t)((k * 5 + j) % 16);
        tpm_codec_pack(TPM_FMT_INT4, c, packed);
        for (int i = 0; i < 16; i++) assert_int_equal(packed[i], c[2 * i] | (c[2 * i + 1] << 4));
        memset(back, 0xFF, sizeof back);
        tpm_codec_unpack(TPM_FMT_INT4, packed, back);
        assert_memory_equal(back, c, 32);
    }
}

/* MARK: Hadamard */
static void test_hadamard(void **state) {
    (void)state;
    /* Column j of the transform is (-1)^popcount(i&j) / sqrt(32). */
    for (int j = 0; j < 32; j++) {
        float x[32] = {0};
        x[j] = 1.0f;
        tpm_hadamard32(x);
        for (int i = 0; i < 32; i++) {
            float want = (__builtin_popcount((unsigned)(i & j)) & 1) ? -TPM_HADAMARD_SCALE : TPM_HADAMARD_SCALE;
            assert_true(same_bits(x[i], want));
        }
    }
    /* Orthonormal: norm kept, applying it twice gives x back (to rounding). */
    uint64_t s = 5;
    for (int rep = 0; rep < 100; rep++) {
        float x[32], y[32];
        double n0 = 0, n1 = 0, err = 0;
        for (int i = 0; i < 32; i++) x[i] = y[i] = (float)tu_sm_gauss(&s);
        tpm_hadamard32(y);
        for (int i = 0; i < 32; i++) {
            n0 += (double)x[i] * x[i];
            n1 += (double)y[i] * y[i];
        }
        assert_true(fabs(n1 / n0 - 1.0) < 1e-5);
        tpm_hadamard32(y);
        for (int i = 0; i < 32; i++) err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        assert_true(sqrt(err / n0) < 1e-6);
    }
}

/* MARK: scales and special blocks */
/* Random bf16 blocks, non-rotated INT codecs: the block extreme maps to the
 * most negative code (0 biased) and decodes exactly (m / -QNEG is exact in
 * bf16 because QNEG is a power of two). */
static void test_extreme_exact(void **state) {
    (void)state;
    enum { NB = 64, N = NB * 32 };
    static const tpm_codec cs[] = {TPM_CODEC_INT8, TPM_CODEC_INT6, TPM_CODEC_INT4};
    uint16_t *in = malloc(N * 2), *out = malloc(N * 2);
    uint8_t *wire = malloc(tpm_codec_encoded_bytes(TPM_CODEC_INT8, N));
    assert_non_null(in);
    assert_non_null(out);
    assert_non_null(wire);
    uint64_t s = 11;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        fill(&s, in, TPM_DTYPE_BF16, N, 3.0);
        memset(out, 0xEE, N * 2);
        assert_int_equal(tpm_codec_encode(cs[k], TPM_DTYPE_BF16, in, N, wire,
                                          tpm_codec_encoded_bytes(cs[k], N)), TPM_OK);
        assert_int_equal(tpm_codec_decode(cs[k], TPM_DTYPE_BF16, wire,
                                          tpm_codec_encoded_bytes(cs[k], N), N, out), TPM_OK);
        for (size_t b = 0; b < NB; b++) {
            int im = 0;
            for (int i = 1; i < 32; i++)
                if (fabsf(tpm_bf16_to_f32(in[b * 32 + i])) > fabsf(tpm_bf16_to_f32(in[b * 32 + im]))) im = i;
            assert_int_equal(wire_code(cs[k], wire, b, im), 0);
            assert_int_equal(out[b * 32 + im], in[b * 32 + im]);
        }
    }
    /* FP8: the extreme maps to +-448 and decodes exactly when |m|/448 is a
     * bf16 value: m = 448 * 2^-3 * 1.5 = 84. */
    float x[32], y[32];
    uint8_t codes[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(tu_sm_gauss(&s) * 10.0);
    x[17] = -84.0f;
    uint16_t sb = tpm_codec_quantize_block(TPM_FMT_FP8, x, codes);
    assert_int_equal(sb, tpm_f32_to_bf16(0.1875f));
    assert_int_equal(codes[17], 0xfe);
    tpm_codec_dequantize_block(TPM_FMT_FP8, codes, sb, y);
    assert_true(y[17] == -84.0f);
    free(in);
    free(out);
    free(wire);
}

/* +a and -a both extreme: the lower index decides the scale's sign. */
static void test_extreme_ties(void **state) {
    (void)state;
    static const int fmts[] = {TPM_FMT_INT8, TPM_FMT_INT6, TPM_FMT_INT4};
    for (size_t k = 0; k < 3; k++) {
        int fmt = fmts[k], q = tpm_fmt_qneg(fmt);
        for (int first_neg = 0; first_neg < 2; first_neg++) {
            float x[32], y[32];
            uint8_t packed[32], c[32];
            for (int i = 0; i < 32; i++) x[i] = (float)(i % 5) * 0.25f - 0.5f;
            x[4] = first_neg ? -2.0f : 2.0f;
            x[9] = -x[4];
            uint16_t sb = tpm_codec_quantize_block(fmt, x, packed);
            assert_true(tpm_bf16_to_f32(sb) == x[4] / (float)(-q));
            tpm_codec_unpack(fmt, packed, c);
            assert_int_equal(c[4], 0);         /* -QNEG */
            assert_int_equal(c[9], 2 * q - 1); /* +QNEG clamps to QNEG-1 */
            tpm_codec_dequantize_block(fmt, packed, sb, y);
            assert_true(y[4] == x[4]);
        }
    }
}

/* Values on exact midpoints between two codes round to the even code. */
static void test_int_rounding_ties(void **state) {
    (void)state;
    static const int fmts[] = {TPM_FMT_INT8, TPM_FMT_INT6, TPM_FMT_INT4};
    uint64_t s = 3;
    for (size_t k = 0; k < 3; k++) {
        int fmt = fmts[k], q = tpm_fmt_qneg(fmt);
        float x[32];
        int want[32];
        uint8_t packed[32], c[32];
        x[0] = (float)(-q) * 0.0625f; /* scale 1/16: x * inv is exactly k + 0.5 */
        want[0] = 0;
        for (int i = 1; i < 32; i++) {
            int j = (int)(tu_sm_next(&s) % (uint64_t)(2 * q - 1)) - q; /* -q .. q-2 */
            x[i] = ((float)j + 0.5f) * 0.0625f;
            want[i] = ((j & 1) ? j + 1 : j) + q; /* the even neighbour, biased */
        }
        assert_int_equal(tpm_codec_quantize_block(fmt, x, packed), tpm_f32_to_bf16(0.0625f));
        tpm_codec_unpack(fmt, packed, c);
        for (int i = 0; i < 32; i++) assert_int_equal(c[i], want[i]);
    }
}

/* All-zero blocks, signed zeros and scales that flush to zero. */
static void test_zero_and_tiny_blocks(void **state) {
    (void)state;
    for (size_t k = 0; k < N_LOSSY; k++) {
        tpm_codec c = k_lossy[k];
        int fmt = tpm_codec_fmt((int)c);
        enum { N = 3 * 32 };
        float in[N], out[N];
        uint8_t wire[512];
        uint64_t s = 100 + k;
        fill(&s, in, TPM_DTYPE_FP32, N, 1.0);
        for (int i = 32; i < 64; i++) in[i] = (i & 1) ? -0.0f : 0.0f;
        size_t wb = tpm_codec_encoded_bytes(c, N);
        assert_true(wb <= sizeof wire);
        assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, in, N, wire, wb), TPM_OK);
        assert_int_equal(wire_scale(c, wire, 3, 1), 0);
        for (int i = 0; i < 32; i++) assert_int_equal(wire_code(c, wire, 1, i), tpm_fmt_zero_code(fmt));
        for (int i = 0; i < N; i++) out[i] = NAN;
        assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_FP32, wire, wb, N, out), TPM_OK);
        for (int i = 32; i < 64; i++) assert_true(out[i] == 0.0f);
        for (int i = 0; i < 32; i++) assert_true(isfinite(out[i]));
        /* Tiny values whose scale would be a bf16 subnormal: flushed, zeros. */
        for (int i = 32; i < 64; i++) in[i] = (float)(tu_sm_gauss(&s) * 1e-38);
        assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, in, N, wire, wb), TPM_OK);
        assert_int_equal(wire_scale(c, wire, 3, 1), 0);
        assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_FP32, wire, wb, N, out), TPM_OK);
        for (int i = 32; i < 64; i++) assert_true(out[i] == 0.0f);
        /* Small but normal scales still quantize (fp16 subnormal inputs). */
        for (int i = 32; i < 64; i++) in[i] = (float)(tu_sm_gauss(&s) * 0x1p-20);
        assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, in, N, wire, wb), TPM_OK);
        assert_int_not_equal(wire_scale(c, wire, 3, 1), 0);
    }
}

/* NaN / Inf poison their own block only, for every codec and dtype. */
static void test_nonfinite_containment(void **state) {
    (void)state;
    enum { NB = 5, N = NB * 32 - 7 };
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    uint64_t s = 9;
    for (size_t k = 0; k < N_LOSSY; k++) {
        tpm_codec c = k_lossy[k];
        size_t wb = tpm_codec_encoded_bytes(c, N);
        for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++) {
            for (size_t v = 0; v < 3; v++) {
                float in[N];
                uint8_t in_dt[N * 4], wire_ok[512], wire[512];
                fill(&s, in, TPM_DTYPE_FP32, N, 2.0);
                size_t pb = (k + v + (size_t)dt) % NB; /* poisoned block (maybe the tail) */
                size_t pi = pb * 32 + (size_t)(tu_sm_next(&s) % (pb == NB - 1 ? 25 : 32));
                for (size_t i = 0; i < N; i++) tpm_store_f32(in_dt, dt, i, in[i]);
                assert_int_equal(tpm_codec_encode(c, (tpm_dtype)dt, in_dt, N, wire_ok, wb), TPM_OK);
                tpm_store_f32(in_dt, dt, pi, bad[v]);
                memset(wire, 0x5A, sizeof wire);
                assert_int_equal(tpm_codec_encode(c, (tpm_dtype)dt, in_dt, N, wire, wb), TPM_OK);
                assert_int_equal(wire_scale(c, wire, NB, pb), TPM_CODEC_SCALE_POISON);
                int cb = tpm_fmt_code_bytes(tpm_codec_fmt((int)c));
                for (int i = 0; i < cb; i++) assert_int_equal(wire[pb * (size_t)cb + (size_t)i], 0);
                for (size_t b = 0; b < NB; b++) {
                    if (b == pb) continue;
                    assert_memory_equal(wire + b * (size_t)cb, wire_ok + b * (size_t)cb, (size_t)cb);
                    assert_int_equal(wire_scale(c, wire, NB, b), wire_scale(c, wire_ok, NB, b));
                }
                uint8_t out_dt[N * 4], ref_dt[N * 4];
                memset(out_dt, 0, sizeof out_dt);
                assert_int_equal(tpm_codec_decode(c, (tpm_dtype)dt, wire_ok, wb, N, ref_dt), TPM_OK);
                assert_int_equal(tpm_codec_decode(c, (tpm_dtype)dt, wire, wb, N, out_dt), TPM_OK);
                for (size_t i = 0; i < N; i++) {
                    float y = tpm_load_f32(out_dt, dt, i), r = tpm_load_f32(ref_dt, dt, i);
                    if (i / 32 == pb)
                        assert_true(isnan(y) && (dt != TPM_DTYPE_FP32 || tpm_f32_bits(y) == TPM_CODEC_NAN_BITS));
                    else
                        assert_true(same_bits(y, r) && isfinite(y));
                }
            }
        }
    }
}

/* MARK: sizes, dtypes, the two paths */
/* n not a multiple of 32: the tail is zero-padded, decode writes exactly n
 * values, the padding bytes of the wire are zero. */
static void test_tail_sizes(void **state) {
    (void)state;
    static const size_t ns[] = {1, 31, 32, 33, 1000};
    uint64_t s = 21;
    for (size_t k = 0; k < N_LOSSY; k++) {
        tpm_codec c = k_lossy[k];
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            size_t n = ns[t], nblk = tpm_codec_nblocks(n), np = nblk * 32;
            size_t wb = tpm_codec_encoded_bytes(c, n);
            assert_int_equal(wb, tpm_codec_wire_bytes(c, nblk));
            float *in = calloc(np, 4), *out = malloc((np + 8) * 4);
            uint8_t *wire = malloc(wb + 16), *wire_pad = malloc(wb);
            assert_true(in && out && wire && wire_pad);
            fill(&s, in, TPM_DTYPE_FP32, n, 1.0);
            memset(wire, 0xC3, wb + 16);
            assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, in, n, wire, wb), TPM_OK);
            assert_int_equal(wire[wb], 0xC3); /* nothing written past wb */
            int cb = tpm_fmt_code_bytes(tpm_codec_fmt((int)c));
            for (size_t i = nblk * (size_t)(cb + 2); i < wb; i++) assert_int_equal(wire[i], 0);
            /* Same bytes as encoding the explicitly zero-padded array. */
            assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, in, np, wire_pad, wb), TPM_OK);
            assert_memory_equal(wire, wire_pad, wb);
            for (size_t i = 0; i < np + 8; i++) out[i] = -7.0f;
            assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_FP32, wire, wb, n, out), TPM_OK);
            for (size_t i = 0; i < n; i++) assert_true(isfinite(out[i]) && out[i] != -7.0f);
            for (size_t i = n; i < np + 8; i++) assert_true(out[i] == -7.0f);
            free(in);
            free(out);
            free(wire);
            free(wire_pad);
        }
    }
}

/* bf16, fp16 and fp32 inputs: equal values give equal bytes, and decoding to
 * a 16-bit dtype is the fp32 decode rounded. */
static void test_dtypes(void **state) {
    (void)state;
    enum { N = 32 * 9 + 5 };
    uint64_t s = 31;
    for (size_t k = 0; k < N_LOSSY; k++) {
        tpm_codec c = k_lossy[k];
        size_t wb = tpm_codec_encoded_bytes(c, N);
        uint16_t h[N], back[N];
        float f[N], out32[N];
        uint8_t w16[1024], w32[1024];
        for (int dt = TPM_DTYPE_BF16; dt <= TPM_DTYPE_FP16; dt++) {
            fill(&s, h, (tpm_dtype)dt, N, 4.0);
            for (size_t i = 0; i < N; i++) f[i] = tpm_load_f32(h, dt, i);
            assert_int_equal(tpm_codec_encode(c, (tpm_dtype)dt, h, N, w16, wb), TPM_OK);
            assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_FP32, f, N, w32, wb), TPM_OK);
            assert_memory_equal(w16, w32, wb);
            memset(out32, 0xEE, sizeof out32);
            memset(back, 0xEE, sizeof back);
            assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_FP32, w16, wb, N, out32), TPM_OK);
            assert_int_equal(tpm_codec_decode(c, (tpm_dtype)dt, w16, wb, N, back), TPM_OK);
            for (size_t i = 0; i < N; i++) {
                uint16_t want = dt == TPM_DTYPE_BF16 ? tpm_f32_to_bf16(out32[i]) : tpm_f32_to_fp16(out32[i]);
                assert_int_equal(back[i], want);
            }
        }
    }
}

/* tpm_codec_encode/decode == to_domain + quantize / dequantize + from_domain. */
static void test_api_matches_domain_path(void **state) {
    (void)state;
    enum { N = 32 * 40 + 17, NB = 41 };
    uint64_t s = 41;
    uint16_t in[N], out_api[N], out_dom[N];
    float dom[NB * 32], dom2[NB * 32];
    uint8_t w_api[2048], w_dom[2048];
    for (size_t k = 0; k < N_LOSSY; k++) {
        tpm_codec c = k_lossy[k];
        size_t wb = tpm_codec_encoded_bytes(c, N);
        assert_true(wb <= sizeof w_api);
        fill(&s, in, TPM_DTYPE_BF16, N, 1.5);
        in[100] = tpm_f32_to_bf16(NAN);
        memset(w_dom, 0x77, sizeof w_dom);
        memset(w_api, 0x66, sizeof w_api);
        memset(out_api, 0x55, sizeof out_api);
        memset(out_dom, 0x44, sizeof out_dom);
        assert_int_equal(tpm_codec_encode(c, TPM_DTYPE_BF16, in, N, w_api, wb), TPM_OK);
        tpm_codec_to_domain(c, in, TPM_DTYPE_BF16, N, dom);
        for (size_t i = N; i < NB * 32; i++)
            if (!tpm_codec_rotates(c)) assert_true(dom[i] == 0.0f); /* zero tail */
        tpm_codec_quantize(c, dom, NB, w_dom);
        assert_memory_equal(w_api, w_dom, wb);
        assert_int_equal(tpm_codec_decode(c, TPM_DTYPE_BF16, w_api, wb, N, out_api), TPM_OK);
        tpm_codec_dequantize(c, w_dom, NB, dom2);
        tpm_codec_from_domain(c, dom2, N, out_dom, TPM_DTYPE_BF16);
        assert_memory_equal(out_api, out_dom, sizeof out_api);
    }
}

static void test_bad_args(void **state) {
    (void)state;
    float in[64] = {1.0f};
    uint8_t wire[256];
    float out[64];
    size_t wb = tpm_codec_encoded_bytes(TPM_CODEC_INT4, 64);
    tpm_err_clear();
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, TPM_DTYPE_FP32, NULL, 64, wire, wb), TPM_ERR_INVALID_ARG);
    assert_true(strstr(tpm_last_error(), "null") != NULL);
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, TPM_DTYPE_FP32, in, 64, NULL, wb), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_INT4, TPM_DTYPE_FP32, NULL, wb, 64, out), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_INT4, TPM_DTYPE_FP32, wire, wb, 64, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_codec_encode(TPM_CODEC_NONE, TPM_DTYPE_FP32, in, 64, wire, wb), TPM_ERR_UNSUPPORTED);
    assert_true(strstr(tpm_last_error(), "NONE") != NULL);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_NONE, TPM_DTYPE_FP32, wire, wb, 64, out), TPM_ERR_UNSUPPORTED);
    static const int bad_codecs[] = {TPM_CODEC_DEFAULT, TPM_CODEC_COUNT_, 99, -5};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(tpm_codec_encode((tpm_codec)bad_codecs[i], TPM_DTYPE_FP32, in, 64, wire, wb),
                         TPM_ERR_INVALID_ARG);
        assert_true(strstr(tpm_last_error(), "codec") != NULL);
        assert_int_equal(tpm_codec_decode((tpm_codec)bad_codecs[i], TPM_DTYPE_FP32, wire, wb, 64, out),
                         TPM_ERR_INVALID_ARG);
    }
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, (tpm_dtype)3, in, 64, wire, wb), TPM_ERR_INVALID_ARG);
    assert_true(strstr(tpm_last_error(), "dtype") != NULL);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_INT4, (tpm_dtype)-1, wire, wb, 64, out), TPM_ERR_INVALID_ARG);
    /* Too small buffers: nothing is written. */
    memset(wire, 0xAB, sizeof wire);
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, TPM_DTYPE_FP32, in, 64, wire, wb - 1), TPM_ERR_INVALID_ARG);
    assert_true(strstr(tpm_last_error(), "out_bytes") != NULL);
    assert_int_equal(wire[0], 0xAB);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_INT4, TPM_DTYPE_FP32, wire, wb - 1, 64, out), TPM_ERR_INVALID_ARG);
    assert_true(strstr(tpm_last_error(), "in_bytes") != NULL);
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, TPM_DTYPE_FP32, in, SIZE_MAX / 2, wire, SIZE_MAX),
                     TPM_ERR_INVALID_ARG);
    /* n = 0 is a valid empty call. */
    assert_int_equal(tpm_codec_encode(TPM_CODEC_INT4, TPM_DTYPE_FP32, in, 0, wire, 0), TPM_OK);
    assert_int_equal(tpm_codec_decode(TPM_CODEC_INT4, TPM_DTYPE_FP32, wire, 0, 0, out), TPM_OK);
}

/* MARK: golden vectors */
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz)) != NULL) {
            if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
                free(buf);
                buf = NULL;
            }
            *len = (size_t)sz;
        }
    }
    fclose(f);
    return buf;
}

/* Index of the first differing byte, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

static void test_golden(void **state) {
    (void)state;
    int checked = 0;
    for (size_t k = 0; k < N_LOSSY; k++) {
        for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++) {
            tpm_codec c = k_lossy[k];
            char path[1024];
            snprintf(path, sizeof path, "%s/tests/golden/codec_%s_%s.bin", TPMOE_SOURCE_DIR,
                     tpm_codec_name(c), tpm_dtype_name((tpm_dtype)dt));
            size_t len = 0;
            uint8_t *g = read_all(path, &len);
            if (!g) fail_msg("%s: cannot read (regenerate: see tests/golden/README.md)", path);
            assert_true(len >= 32 && memcmp(g, "TPMGOLD1", 8) == 0);
            uint32_t gc = get_u32(g + 8), gdt = get_u32(g + 12), n = get_u32(g + 16);
            uint32_t in_b = get_u32(g + 20), wire_b = get_u32(g + 24), out_b = get_u32(g + 28);
            assert_int_equal(gc, c);
            assert_int_equal(gdt, dt);
            assert_int_equal(in_b, n * tpm_dtype_size((tpm_dtype)dt));
            assert_int_equal(out_b, in_b);
            assert_int_equal(wire_b, tpm_codec_encoded_bytes(c, n));
            assert_int_equal(len, 32u + in_b + wire_b + out_b);
            const uint8_t *gin = g + 32, *gwire = gin + in_b, *gout = gwire + wire_b;
            /* What the README promises, checked independently of the encoder:
             * block 5 all zero, blocks 6 and 7 poisoned, decoded as NaN. */
            size_t nblk = tpm_codec_nblocks(n);
            assert_int_equal(wire_scale(c, gwire, nblk, 5), 0);
            assert_int_equal(wire_scale(c, gwire, nblk, 6), TPM_CODEC_SCALE_POISON);
            assert_int_equal(wire_scale(c, gwire, nblk, 7), TPM_CODEC_SCALE_POISON);
            assert_true(isnan(tpm_load_f32(gout, dt, 6 * 32)) && isnan(tpm_load_f32(gout, dt, 7 * 32 + 31)));
            assert_true(tpm_load_f32(gout, dt, 5 * 32 + 1) == 0.0f);
            uint8_t *wire = malloc(wire_b), *out = malloc(out_b);
            assert_true(wire && out);
            memset(wire, 0xEE, wire_b);
            memset(out, 0xEE, out_b);
            assert_int_equal(tpm_codec_encode(c, (tpm_dtype)dt, gin, n, wire, wire_b), TPM_OK);
            long d = first_diff(wire, gwire, wire_b);
            if (d >= 0) fail_msg("%s: encoded byte %ld is %#x, golden %#x", path, d, wire[d], gwire[d]);
            assert_int_equal(tpm_codec_decode(c, (tpm_dtype)dt, gwire, wire_b, n, out), TPM_OK);
            d = first_diff(out, gout, out_b);
            if (d >= 0) fail_msg("%s: decoded byte %ld is %#x, golden %#x", path, d, out[d], gout[d]);
            free(wire);
            free(out);
            free(g);
            checked++;
        }
    }
    assert_int_equal(checked, (int)N_LOSSY * TPM_DTYPE_COUNT_);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_sizes),
        cmocka_unit_test(test_e4m3_all_codes),
        cmocka_unit_test(test_e4m3_random),
        cmocka_unit_test(test_int6_packing),
        cmocka_unit_test(test_int4_packing),
        cmocka_unit_test(test_hadamard),
        cmocka_unit_test(test_extreme_exact),
        cmocka_unit_test(test_extreme_ties),
        cmocka_unit_test(test_int_rounding_ties),
        cmocka_unit_test(test_zero_and_tiny_blocks),
        cmocka_unit_test(test_nonfinite_containment),
        cmocka_unit_test(test_tail_sizes),
        cmocka_unit_test(test_dtypes),
        cmocka_unit_test(test_api_matches_domain_path),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_golden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
