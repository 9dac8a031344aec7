/*
 * test_codec_fast.c - codec_fast.h (the GPU two-shots' INT arithmetic)
 * against the CPU reference of codec_format.h, bit for bit, on blocks built
 * to hit every branch: Gaussian and heavy-tailed values over many binades,
 * +a/-a ties at random positions (the first one wins), zeros of both signs,
 * a NaN or Inf of either sign anywhere, subnormals, values near FLT_MAX,
 * bf16-exact inputs, and values whose scaled code sits exactly on .5.
 * Checked: the extreme and finiteness, the scale bits, every code word, and
 * every dequantized value (non-poisoned blocks: same bits; poisoned: NaN or
 * Inf, which callers replace, see codec_fast.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/codec_fast.h"
#include "util/splitmix.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const int k_fmts[] = {TPM_FMT_INT8, TPM_FMT_INT6, TPM_FMT_INT4};

/* A random block of kind `kind` (0..9). */
static void gen_block(uint64_t *s, int kind, float *v) {
    const int e = (int)(tu_sm_next(s) % 200) - 100; /* binade of the block */
    const double sc = ldexp(1.0, e);
    for (int i = 0; i < 32; i++) v[i] = (float)(tu_sm_gauss(s) * sc);
    const int i0 = (int)(tu_sm_next(s) % 32), i1 = (int)(tu_sm_next(s) % 32);
    switch (kind) {
    case 0: break; /* Gaussian */
    case 1:        /* heavy tails */
        for (int i = 0; i < 32; i++) v[i] = (float)(tu_sm_t3(s) * sc);
        break;
    case 2: { /* +a and -a of the largest magnitude, in random order */
        float a = 0.0f;
        for (int i = 0; i < 32; i++) a = fabsf(v[i]) > a ? fabsf(v[i]) : a;
        a = a * 2.0f;
        v[i0] = (tu_sm_next(s) & 1) ? a : -a;
        v[i1] = i1 == i0 ? v[i0] : -v[i0];
        break;
    }
    case 3: /* zeros of both signs, sometimes one nonzero value */
        for (int i = 0; i < 32; i++) v[i] = (tu_sm_next(s) & 1) ? -0.0f : 0.0f;
        if (tu_sm_next(s) & 1) v[i0] = (float)(tu_sm_gauss(s) * sc);
        break;
    case 4: { /* one NaN or Inf, either sign */
        static const uint32_t bad[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                                       0xffffffffu};
        uint32_t u = bad[tu_sm_next(s) % 6];
        memcpy(&v[i0], &u, 4);
        break;
    }
    case 5: /* subnormals and tiny values */
        for (int i = 0; i < 32; i++) v[i] = (float)(tu_sm_gauss(s) * ldexp(1.0, -140 + (int)(tu_sm_next(s) % 20)));
        break;
    case 6: /* near FLT_MAX */
        for (int i = 0; i < 32; i++) v[i] = (float)(tu_sm_gauss(s) * 1e38);
        v[i0] = (tu_sm_next(s) & 1) ? 3.4028235e38f : -3.4028235e38f;
        break;
    case 7: /* bf16-exact values (what the two-shot's scatter quantizes) */
        for (int i = 0; i < 32; i++) v[i] = tpm_bf16_to_f32(tpm_f32_to_bf16(v[i]));
        break;
    case 8: { /* codes exactly on .5: v = (k + 0.5) * s for the block's scale */
        float m = (float)ldexp(1.0, e) * -8.0f;
        v[0] = m;
        const float sv = m / -8.0f;
        for (int i = 1; i < 32; i++) v[i] = ((float)((int)(tu_sm_next(s) % 15) - 7) + 0.5f) * sv;
        break;
    }
    default: /* repeated equal values, one sign */
        for (int i = 0; i < 32; i++) v[i] = (tu_sm_next(s) & 1) ? v[i0] : v[i1];
        break;
    }
}

/* 1 if magnitude bits mag appear in v with both signs (a +a / -a tie). */
static int has_tie(const float *v, uint32_t mag) {
    int pos = 0, neg = 0;
    for (int i = 0; i < 32; i++)
        if ((tpm_f32_bits(v[i]) & 0x7fffffffu) == mag) {
            if (tpm_f32_bits(v[i]) >> 31) neg = 1;
            else pos = 1;
        }
    return pos && neg;
}

static void check_block(int fmt, const float *v, long *n_poison, long *n_tie) {
    uint8_t ref_codes[32];
    const uint16_t ref_sb = tpm_codec_quantize_block(fmt, v, ref_codes);
    uint32_t w[8];
    memset(w, 0xa5, sizeof w); /* poisoned, must be overwritten */
    const uint16_t sb = tpm_fast_quant_block(fmt, 0, v, w);
    assert_int_equal(sb, ref_sb);
    const int nb = tpm_fmt_code_bytes(fmt);
    uint8_t got[32];
    for (int k = 0; k < nb / 4; k++)
        for (int b = 0; b < 4; b++) got[4 * k + b] = (uint8_t)(w[k] >> (8 * b));
    if (memcmp(got, ref_codes, (size_t)nb) != 0) {
        fprintf(stderr, "fmt %d sb %04x: codes differ\n", fmt, sb);
        for (int i = 0; i < 32; i++) fprintf(stderr, " %08x", tpm_f32_bits(v[i]));
        fprintf(stderr, "\n");
        fail();
    }
    float m = 0.0f;
    const int fin = tpm_fast_extreme(v, &m);
    assert_int_equal(fin, !tpm_codec_scale_poisoned(ref_sb));
    if (fin) assert_int_equal(tpm_f32_bits(m), tpm_f32_bits(tpm_fast_first_extreme(v)));
    /* dequantize */
    float ref[32], out[32];
    tpm_codec_dequantize_block(fmt, ref_codes, ref_sb, ref);
    for (int i = 0; i < 32; i++) out[i] = -12345.0f;
    tpm_fast_dequant_int(fmt, w, tpm_bf16_to_f32(sb), out);
    if (tpm_codec_scale_poisoned(sb)) {
        (*n_poison)++;
        for (int i = 0; i < 32; i++) assert_false(isfinite(out[i]));
        return;
    }
    for (int i = 0; i < 32; i++) {
        if (tpm_f32_bits(out[i]) != tpm_f32_bits(ref[i])) {
            fprintf(stderr, "fmt %d value %d: %08x vs %08x\n", fmt, i, tpm_f32_bits(out[i]), tpm_f32_bits(ref[i]));
            fail();
        }
    }
    /* a tie between +a and -a took the scan */
    uint32_t best = 0;
    for (int i = 0; i < 32; i++) best = (tpm_f32_bits(v[i]) & 0x7fffffffu) > best ? tpm_f32_bits(v[i]) & 0x7fffffffu : best;
    *n_tie += has_tie(v, best);
}

static void test_fast_vs_reference(void **state) {
    (void)state;
    uint64_t s = 0x5eed0fa57c0dec5ull;
    for (size_t f = 0; f < sizeof k_fmts / sizeof k_fmts[0]; f++) {
        long n_poison = 0, n_tie = 0, n = 0;
        for (int kind = 0; kind < 10; kind++) {
            for (int r = 0; r < 20000; r++, n++) {
                float v[32];
                gen_block(&s, kind, v);
                check_block(k_fmts[f], v, &n_poison, &n_tie);
            }
        }
        printf("fmt %d: %ld blocks, %ld poisoned, %ld +a/-a ties\n", k_fmts[f], n, n_poison, n_tie);
        assert_true(n_poison >= 15000); /* the NaN/Inf kind (and overflowing ones) ran */
        assert_true(n_tie >= 15000);    /* the tie kind reached the scan */
    }
}

/* tpm_fast_quant_block with lz on the same kinds of block rounded to bf16 and to
 * fp16 (what a scatter of 16-bit inputs quantizes): scale, codes and the
 * extreme equal the reference's. */
static void check_lz(int fmt, const float *v, long *n_tie) {
    uint8_t ref_codes[32];
    const uint16_t ref_sb = tpm_codec_quantize_block(fmt, v, ref_codes);
    uint32_t w[8];
    memset(w, 0xa5, sizeof w);
    assert_int_equal(tpm_fast_quant_block(fmt, 1, v, w), ref_sb);
    const int nb = tpm_fmt_code_bytes(fmt);
    for (int i = 0; i < nb; i++) assert_int_equal((uint8_t)(w[i / 4] >> (8 * (i % 4))), ref_codes[i]);
    float m = 0.0f;
    const int fin = tpm_fast_extreme_lz(v, &m);
    assert_int_equal(fin, !tpm_codec_scale_poisoned(ref_sb));
    if (!fin) return;
    assert_int_equal(tpm_f32_bits(m), tpm_f32_bits(tpm_fast_first_extreme(v)));
    *n_tie += has_tie(v, tpm_f32_bits(m) & 0x7fffffffu);
}

static void test_fast_lz_16bit_inputs(void **state) {
    (void)state;
    uint64_t s = 0x1e55b175u;
    for (size_t f = 0; f < sizeof k_fmts / sizeof k_fmts[0]; f++) {
        long n_tie = 0;
        for (int kind = 0; kind < 10; kind++) {
            for (int r = 0; r < 20000; r++) {
                float v[32], b[32], h[32];
                gen_block(&s, kind, v);
                for (int i = 0; i < 32; i++) {
                    b[i] = tpm_bf16_to_f32(tpm_f32_to_bf16(v[i]));
                    h[i] = tpm_fp16_to_f32(tpm_f32_to_fp16(v[i]));
                }
                check_lz(k_fmts[f], b, &n_tie);
                check_lz(k_fmts[f], h, &n_tie);
            }
        }
        printf("fmt %d: 400000 16-bit blocks, %ld +a/-a ties\n", k_fmts[f], n_tie);
        assert_true(n_tie >= 30000);
    }
}

/* The scaled value reaching QNEG * (1 + 2^-8): the INT4 / INT6 lower clamp
 * really is a no-op, and INT8's is needed. */
static void test_clamp_edges(void **state) {
    (void)state;
    for (size_t f = 0; f < sizeof k_fmts / sizeof k_fmts[0]; f++) {
        const int fmt = k_fmts[f];
        /* m whose m / -QNEG rounds to bf16 by up to half an ulp either way */
        static const uint32_t low[] = {0x7fffu, 0x7ffeu, 0x8000u, 0x8001u, 0x0001u, 0xffffu, 0x0000u};
        for (uint32_t k = 0; k < 128u * 7u; k++) {
            float v[32];
            const float m = tpm_bits_f32(0xbf800000u | ((k / 7u) << 16) | low[k % 7u]); /* -[1, 2) */
            for (int i = 0; i < 32; i++) v[i] = m * (float)(31 - i) / 31.0f;
            v[5] = -m; /* +|m| later: maps to +QNEG, clamps to QNEG-1 */
            long a = 0, b = 0;
            check_block(fmt, v, &a, &b);
        }
    }
}

static void test_prmt(void **state) {
    (void)state;
    assert_int_equal(tpm_prmt(0x44332211u, 0x88776655u, 0x7650u), 0x88776611u);
    assert_int_equal(tpm_prmt(0x44332211u, 0x4B000000u, 0x7653u), 0x4B000044u);
    assert_int_equal(tpm_prmt(0x44332211u, 0x88776655u, 0x3210u), 0x44332211u);
    assert_int_equal(tpm_prmt(0x44332211u, 0x88776655u, 0x7654u), 0x88776655u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prmt),
        cmocka_unit_test(test_fast_vs_reference),
        cmocka_unit_test(test_clamp_edges),
        cmocka_unit_test(test_fast_lz_16bit_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
