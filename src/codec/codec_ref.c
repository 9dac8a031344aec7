/*
 * codec_ref.c - the CPU reference of the block codecs: the internal
 * domain/wire interface of codec.h and the public tpm_codec_* calls.
 *
 * Everything per block is done by the scalar functions of codec_format.h
 * (shared with the CUDA kernels); this file only loops over blocks, converts
 * dtypes, lays out the planar wire (codes, then scales, then zero padding)
 * and validates the public arguments. docs/codecs.md describes the format.
 */
#include "codec/codec.h"
#include "codec/codec_format.h"
#include "internal.h"

#include <string.h>

/* n above this is rejected (keeps every byte count far from overflow). */
#define CODEC_MAX_N (SIZE_MAX / 4)

/* MARK: internal interface (codec.h) */
int tpm_codec_is_lossy(tpm_codec c) { return tpm_codec_fmt((int)c) != TPM_FMT_NONE; }

int tpm_codec_rotates(tpm_codec c) { return tpm_codec_fmt_rotates((int)c); }

size_t tpm_codec_wire_bytes(tpm_codec c, size_t nblk) {
    return tpm_fmt_wire_bytes(tpm_codec_fmt((int)c), nblk);
}

/* Values of block b (zero-padded past n), rotated if the codec rotates. */
static void load_block(tpm_codec c, const void *in, tpm_dtype dt, size_t n, size_t b, float *x) {
    size_t base = b * TPM_CODEC_BLOCK;
    size_t cnt = n - base < TPM_CODEC_BLOCK ? n - base : TPM_CODEC_BLOCK;
    for (size_t i = 0; i < cnt; i++) x[i] = tpm_load_f32(in, (int)dt, base + i);
    for (size_t i = cnt; i < TPM_CODEC_BLOCK; i++) x[i] = 0.0f;
    if (tpm_codec_rotates(c)) tpm_hadamard32(x);
}

/* Rotate block b back if needed and store its first values (up to n). */
static void store_block(tpm_codec c, const float *dom, size_t n, size_t b, void *out, tpm_dtype dt) {
    float x[TPM_CODEC_BLOCK];
    size_t base = b * TPM_CODEC_BLOCK;
    size_t cnt = n - base < TPM_CODEC_BLOCK ? n - base : TPM_CODEC_BLOCK;
    memcpy(x, dom, sizeof x);
    if (tpm_codec_rotates(c)) tpm_hadamard32(x);
    for (size_t i = 0; i < cnt; i++) tpm_store_f32(out, (int)dt, base + i, x[i]);
}

/* Quantize block b of a run of nblk blocks into the planar wire. */
static void put_block(int fmt, const float *x, size_t nblk, size_t b, uint8_t *wire) {
    size_t cb = (size_t)tpm_fmt_code_bytes(fmt);
    uint16_t sb = tpm_codec_quantize_block(fmt, x, wire + b * cb);
    tpm_codec_put_scale(wire + tpm_fmt_scale_offset(fmt, nblk) + b * TPM_CODEC_SCALE_BYTES, sb);
}

static void get_block(int fmt, const uint8_t *wire, size_t nblk, size_t b, float *x) {
    size_t cb = (size_t)tpm_fmt_code_bytes(fmt);
    uint16_t sb =
        tpm_codec_get_scale(wire + tpm_fmt_scale_offset(fmt, nblk) + b * TPM_CODEC_SCALE_BYTES);
    tpm_codec_dequantize_block(fmt, wire + b * cb, sb, x);
}

static void zero_pad(int fmt, size_t nblk, uint8_t *wire) {
    size_t used = nblk * ((size_t)tpm_fmt_code_bytes(fmt) + TPM_CODEC_SCALE_BYTES);
    size_t total = tpm_fmt_wire_bytes(fmt, nblk);
    if (total > used) memset(wire + used, 0, total - used);
}

void tpm_codec_to_domain(tpm_codec c, const void *in, tpm_dtype dt, size_t n, float *dom) {
    size_t nblk = tpm_codec_nblocks(n);
    for (size_t b = 0; b < nblk; b++) load_block(c, in, dt, n, b, dom + b * TPM_CODEC_BLOCK);
}

void tpm_codec_from_domain(tpm_codec c, const float *dom, size_t n, void *out, tpm_dtype dt) {
    size_t nblk = tpm_codec_nblocks(n);
    for (size_t b = 0; b < nblk; b++) store_block(c, dom + b * TPM_CODEC_BLOCK, n, b, out, dt);
}

void tpm_codec_quantize(tpm_codec c, const float *dom, size_t nblk, uint8_t *wire) {
    int fmt = tpm_codec_fmt((int)c);
    if (fmt == TPM_FMT_NONE) return;
    for (size_t b = 0; b < nblk; b++) put_block(fmt, dom + b * TPM_CODEC_BLOCK, nblk, b, wire);
    zero_pad(fmt, nblk, wire);
}

void tpm_codec_dequantize(tpm_codec c, const uint8_t *wire, size_t nblk, float *dom) {
    int fmt = tpm_codec_fmt((int)c);
    if (fmt == TPM_FMT_NONE) return;
    for (size_t b = 0; b < nblk; b++) get_block(fmt, wire, nblk, b, dom + b * TPM_CODEC_BLOCK);
}

/* Measured maxima over the data sets of docs/codecs.md (1M values per rank,
 * 2 and 8 ranks) times about 1.25. */
double tpm_codec_allreduce_error_bound(tpm_codec c) {
    switch (c) {
    case TPM_CODEC_NONE: return 0.0;
    case TPM_CODEC_INT8: return 0.021;   /* measured <= 1.65% */
    case TPM_CODEC_INT6: return 0.082;   /* 6.54% */
    case TPM_CODEC_INT4: return 0.20;    /* 16.22% */
    case TPM_CODEC_FP8: return 0.042;    /* 3.29% */
    case TPM_CODEC_INT4_H: return 0.15;  /* 11.78% */
    case TPM_CODEC_INT6_H: return 0.037; /* 2.92% */
    default: return 1.0;
    }
}

/* MARK: public API */
size_t tpm_codec_encoded_bytes(tpm_codec codec, size_t n) {
    if (n > CODEC_MAX_N) return 0;
    return tpm_codec_wire_bytes(codec, tpm_codec_nblocks(n));
}

/* Common argument checks of encode/decode; wire_bytes (named wire_name in
 * the message) is the size of the encoded side. */
static tpm_status check_args(const char *fn, tpm_codec codec, tpm_dtype dtype, const void *in,
                             const void *out, size_t n, const char *wire_name, size_t wire_bytes) {
    TPM_ARG_CHECK(in && out, "%s: null %s pointer", fn, in ? "output" : "input");
    TPM_ARG_CHECK((int)codec >= 0 && codec < TPM_CODEC_COUNT_,
                  "%s: invalid codec %d (accepted: INT8, INT6, INT4, FP8, INT4_H, INT6_H)", fn,
                  (int)codec);
    if (!tpm_codec_is_lossy(codec))
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "%s: codec NONE has no wire format (the all-reduce sends raw elements)", fn);
    TPM_ARG_CHECK((int)dtype >= 0 && dtype < TPM_DTYPE_COUNT_,
                  "%s: invalid dtype %d (accepted: bf16, fp16, fp32)", fn, (int)dtype);
    TPM_ARG_CHECK(n <= CODEC_MAX_N, "%s: n = %zu values is too large", fn, n);
    size_t need = tpm_codec_encoded_bytes(codec, n);
    TPM_ARG_CHECK(wire_bytes >= need, "%s: %s = %zu, %s needs %zu for %zu values", fn, wire_name,
                  wire_bytes, tpm_codec_name(codec), need, n);
    return TPM_OK;
}

tpm_status tpm_codec_encode(tpm_codec codec, tpm_dtype dtype, const void *in, size_t n, void *out,
                            size_t out_bytes) {
    TPM_TRY(check_args("tpm_codec_encode", codec, dtype, in, out, n, "out_bytes", out_bytes));
    int fmt = tpm_codec_fmt((int)codec);
    size_t nblk = tpm_codec_nblocks(n);
    uint8_t *wire = (uint8_t *)out;
    float x[TPM_CODEC_BLOCK];
    for (size_t b = 0; b < nblk; b++) {
        load_block(codec, in, dtype, n, b, x);
        put_block(fmt, x, nblk, b, wire);
    }
    zero_pad(fmt, nblk, wire);
    return TPM_OK;
}

tpm_status tpm_codec_decode(tpm_codec codec, tpm_dtype dtype, const void *in, size_t in_bytes,
                            size_t n, void *out) {
    TPM_TRY(check_args("tpm_codec_decode", codec, dtype, in, out, n, "in_bytes", in_bytes));
    int fmt = tpm_codec_fmt((int)codec);
    size_t nblk = tpm_codec_nblocks(n);
    float x[TPM_CODEC_BLOCK];
    for (size_t b = 0; b < nblk; b++) {
        get_block(fmt, (const uint8_t *)in, nblk, b, x);
        store_block(codec, x, n, b, out, dtype);
    }
    return TPM_OK;
}
