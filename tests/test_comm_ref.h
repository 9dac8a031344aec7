/*
 * test_comm_ref.h - helpers shared by the communicator tests: seeded inputs
 * and an independent CPU reference of the all-reduce (written from the
 * specification, not from src/comm/cpu_comm.c).
 *
 * Reference: exact = fp32 sum in rank order 0..W-1, one rounding. Lossy =
 * the two-shot over chunks of `chunk` values (0: one chunk): per segment of
 * ceil(nblk/W) blocks owned by rank j, the owner's own term is exact and the
 * others are quantize+dequantize'd, the fp32 sum in rank order is quantized
 * once more and every rank decodes it.
 */
#ifndef TEST_COMM_REF_H
#define TEST_COMM_REF_H

#include "codec/codec.h"
#include "numeric.h"
#include "tpmoe.h"
#include "util/splitmix.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Roughly Gaussian nonzero values (sum of 4 uniforms), a few larger ones. */
static void tr_fill(void *buf, tpm_dtype dt, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
    for (size_t i = 0; i < n; i++) {
        double v = 0;
        for (int k = 0; k < 4; k++)
            v += (double)(tu_sm_next(&s) >> 11) * (1.0 / 9007199254740992.0) - 0.5;
        if (v == 0) v = 0.125;
        if (i % 61 == 7) v *= 8;
        tpm_store_f32(buf, (int)dt, i, (float)v);
    }
}

static void tr_ref_exact(const void *const *in, int W, size_t n, tpm_dtype dt, void *out) {
    for (size_t i = 0; i < n; i++) {
        float acc = tpm_load_f32(in[0], (int)dt, i);
        for (int r = 1; r < W; r++)
            acc += tpm_load_f32(in[r], (int)dt, i);
        tpm_store_f32(out, (int)dt, i, acc);
    }
}

static void tr_ref_lossy(const void *const *in, int W, size_t count, tpm_dtype dt, tpm_codec c,
                         size_t chunk, void *out) {
    size_t es = tpm_dtype_size(dt);
    if (chunk == 0) chunk = count;
    size_t maxblk = tpm_codec_nblocks(chunk) + 1;
    float *acc = malloc(maxblk * 32 * sizeof(float));
    float *term = malloc(maxblk * 32 * sizeof(float));
    uint8_t *wire = malloc(tpm_codec_wire_bytes(c, maxblk) + 64);
    for (size_t off = 0; off < count; off += chunk) {
        size_t n = count - off < chunk ? count - off : chunk;
        size_t nblk = tpm_codec_nblocks(n), sblk = (nblk + (size_t)W - 1) / (size_t)W;
        for (int j = 0; j < W; j++) {
            size_t e0 = (size_t)j * sblk * 32, e1 = e0 + sblk * 32;
            if (e0 > n) e0 = n;
            if (e1 > n) e1 = n;
            size_t sn = e1 - e0, sb = tpm_codec_nblocks(sn);
            if (!sn) continue;
            for (int r = 0; r < W; r++) {
                const uint8_t *src = (const uint8_t *)in[r] + (off + e0) * es;
                float *t = r == 0 ? acc : term;
                tpm_codec_to_domain(c, src, dt, sn, t);
                if (r != j) {
                    tpm_codec_quantize(c, t, sb, wire);
                    tpm_codec_dequantize(c, wire, sb, t);
                }
                if (r > 0)
                    for (size_t k = 0; k < sb * 32; k++)
                        acc[k] += term[k];
            }
            tpm_codec_quantize(c, acc, sb, wire);
            tpm_codec_dequantize(c, wire, sb, term);
            tpm_codec_from_domain(c, term, sn, (uint8_t *)out + (off + e0) * es, dt);
        }
    }
    free(acc);
    free(term);
    free(wire);
}

/* The reference for one call (chunk only matters for lossy codecs). */
static void tr_ref(const void *const *in, int W, size_t n, tpm_dtype dt, tpm_codec c, size_t chunk,
                   void *out) {
    if (c == TPM_CODEC_NONE)
        tr_ref_exact(in, W, n, dt, out);
    else
        tr_ref_lossy(in, W, n, dt, c, chunk, out);
}

/* Index of the first differing element, or -1. NaNs compare by bits. */
static long tr_first_diff(const void *a, const void *b, size_t n, tpm_dtype dt) {
    size_t es = tpm_dtype_size(dt);
    for (size_t i = 0; i < n; i++)
        if (memcmp((const uint8_t *)a + i * es, (const uint8_t *)b + i * es, es)) return (long)i;
    return -1;
}

#endif /* TEST_COMM_REF_H */
