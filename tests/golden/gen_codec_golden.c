/*
 * gen_codec_golden.c - writes the codec golden vectors of tests/golden/:
 * one file per (lossy codec, input dtype) holding the input bytes, the bytes
 * tpm_codec_encode writes for them and the bytes tpm_codec_decode gives back.
 * tests/test_codec.c (CPU) and the CUDA codec test hold the encoders and
 * decoders to these bytes. File format and build command: README.md here.
 *
 * The input is deterministic (splitmix64 + Box-Muller, tests/util/splitmix.h);
 * it is stored in the files, so the checks never depend on regenerating it.
 */
#include "tpmoe.h"
#include "codec/codec_format.h"
#include "../util/splitmix.h" /* the generator the tests share */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBLK_FULL 17
#define N_TAIL 13
#define N_VALUES (NBLK_FULL * 32 + N_TAIL) /* 557 */

/* A block of values on exact rounding midpoints of an INT format with
 * most-negative code -q: x[0] = -q*u sets the scale to u, the others are
 * (k + 0.5) * u. */
static void int_midpoints(uint64_t *s, float *x, int q, int kmax) {
    const float u = 0.0625f;
    x[0] = (float)(-q) * u;
    for (int i = 1; i < 32; i++) {
        int k = (int)(tu_sm_next(s) % (uint64_t)(2 * kmax)) - kmax;
        x[i] = ((float)k + 0.5f) * u;
    }
}

/* The test input, as f32 (converted to each dtype afterwards). */
static void make_input(float *x) {
    uint64_t s = 20261130;
    float *b;
    for (int i = 0; i < 64; i++) x[i] = (float)tu_sm_gauss(&s); /* blocks 0-1 */
    for (int i = 64; i < 128; i++) x[i] = (float)tu_sm_t3(&s);  /* blocks 2-3 */
    b = x + 4 * 32; /* outlier channels x30 */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * (i % 7 == 3 ? 30.0 : 1.0));
    b = x + 5 * 32; /* all zero, both signs */
    for (int i = 0; i < 32; i++) b[i] = (i & 1) ? -0.0f : 0.0f;
    b = x + 6 * 32; /* NaN block */
    for (int i = 0; i < 32; i++) b[i] = (float)tu_sm_gauss(&s);
    b[5] = NAN;
    b = x + 7 * 32; /* Inf block */
    for (int i = 0; i < 32; i++) b[i] = (float)tu_sm_gauss(&s);
    b[3] = INFINITY;
    b[20] = -INFINITY;
    b = x + 8 * 32; /* tiny: fp16 subnormals, normal in bf16 */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * 0x1p-18);
    b = x + 9 * 32; /* tinier: bf16 subnormals (scale flushes to 0), 0 in fp16 */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * 1e-38);
    b = x + 10 * 32; /* extreme tie, +a first */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * 0.5);
    b[3] = 3.0f;
    b[20] = -3.0f;
    b = x + 11 * 32; /* extreme tie, -a first */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * 0.5);
    b[2] = -2.5f;
    b[30] = 2.5f;
    int_midpoints(&s, x + 12 * 32, 128, 64); /* INT8 ties (|k+0.5| fits bf16) */
    int_midpoints(&s, x + 13 * 32, 32, 32);  /* INT6 ties */
    int_midpoints(&s, x + 14 * 32, 8, 8);    /* INT4 ties */
    b = x + 15 * 32; /* FP8 ties: scale 0.25, midpoints between e4m3 values */
    b[0] = 448.0f * 0.25f;
    for (int i = 1; i < 32; i++) {
        uint8_t c = (uint8_t)(tu_sm_next(&s) % 0x7e); /* 0x00..0x7d: c+1 finite */
        float mid = (tpm_e4m3_to_f32(c) + tpm_e4m3_to_f32((uint8_t)(c + 1))) * 0.5f;
        b[i] = ((i & 1) ? -mid : mid) * 0.25f;
    }
    b = x + 16 * 32; /* large values */
    for (int i = 0; i < 32; i++) b[i] = (float)(tu_sm_gauss(&s) * 100.0);
    for (int i = NBLK_FULL * 32; i < N_VALUES; i++) x[i] = (float)tu_sm_gauss(&s); /* tail */
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int write_one(const char *dir, tpm_codec c, tpm_dtype dt, const float *x) {
    size_t es = tpm_dtype_size(dt);
    size_t in_bytes = N_VALUES * es, wire_bytes = tpm_codec_encoded_bytes(c, N_VALUES);
    unsigned char hdr[32];
    unsigned char *in = malloc(in_bytes), *wire = malloc(wire_bytes), *out = malloc(in_bytes);
    int rc = 1;
    if (!in || !wire || !out) goto done;
    for (size_t i = 0; i < N_VALUES; i++) tpm_store_f32(in, (int)dt, i, x[i]);
    if (tpm_codec_encode(c, dt, in, N_VALUES, wire, wire_bytes) != TPM_OK ||
        tpm_codec_decode(c, dt, wire, wire_bytes, N_VALUES, out) != TPM_OK) {
        fprintf(stderr, "encode/decode failed: %s\n", tpm_last_error());
        goto done;
    }
    memcpy(hdr, "TPMGOLD1", 8);
    put_u32(hdr + 8, (uint32_t)c);
    put_u32(hdr + 12, (uint32_t)dt);
    put_u32(hdr + 16, N_VALUES);
    put_u32(hdr + 20, (uint32_t)in_bytes);
    put_u32(hdr + 24, (uint32_t)wire_bytes);
    put_u32(hdr + 28, (uint32_t)in_bytes);
    char path[1024];
    snprintf(path, sizeof path, "%s/codec_%s_%s.bin", dir, tpm_codec_name(c), tpm_dtype_name(dt));
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        goto done;
    }
    int ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr && fwrite(in, 1, in_bytes, f) == in_bytes &&
             fwrite(wire, 1, wire_bytes, f) == wire_bytes && fwrite(out, 1, in_bytes, f) == in_bytes;
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "%s: write failed\n", path);
        goto done;
    }
    printf("wrote %s (%zu bytes)\n", path, sizeof hdr + 2 * in_bytes + wire_bytes);
    rc = 0;
done:
    free(in);
    free(wire);
    free(out);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTPUT_DIR (normally tests/golden)\n", argv[0]);
        return 2;
    }
    float x[N_VALUES];
    make_input(x);
    for (int c = TPM_CODEC_INT8; c < TPM_CODEC_COUNT_; c++)
        for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++)
            if (write_one(argv[1], (tpm_codec)c, (tpm_dtype)dt, x)) return 1;
    return 0;
}
