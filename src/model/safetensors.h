/*
 * safetensors.h - read and write safetensors files (the Hugging Face format).
 *
 * File layout: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]},
 *  ..., "__metadata__": {"key": "string value"}}, then the data section
 * (offsets are relative to its start).
 *
 * Reader: the header is parsed with jansson and validated (length, JSON,
 * dtypes, shapes, offsets inside the data section, nbytes == numel * size, no
 * overlap, no duplicates); the data is mmapped read-only. Every error is
 * TPM_ERR_IO with a message naming the file and the tensor. Writer: collects
 * tensors, writes an 8-byte-aligned header (space padded, keys in insertion
 * order, __metadata__ first) and the data in declaration order; data can be
 * given up front or streamed tensor by tensor (for files larger than memory).
 */
#ifndef TPM_SAFETENSORS_H
#define TPM_SAFETENSORS_H

#include "tpmoe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpm_st_dtype {
    TPM_ST_F32 = 0,
    TPM_ST_F16 = 1,
    TPM_ST_BF16 = 2,
    TPM_ST_F8_E4M3 = 3, /* "F8_E4M3" (e4m3fn: bias 7, no Inf, max 448) */
    TPM_ST_F8_E5M2 = 4,
    TPM_ST_F64 = 5,
    TPM_ST_U8 = 6,
    TPM_ST_I8 = 7,
    TPM_ST_U16 = 8,
    TPM_ST_I16 = 9,
    TPM_ST_U32 = 10,
    TPM_ST_I32 = 11,
    TPM_ST_U64 = 12,
    TPM_ST_I64 = 13,
    TPM_ST_BOOL = 14,
    TPM_ST_DTYPE_COUNT_
} tpm_st_dtype;

/* Bit masks for tpm_st_get's accepted dtype set. */
#define TPM_ST_MASK(d) (1u << (d))
#define TPM_ST_MASK_FLOAT                                                                  \
    (TPM_ST_MASK(TPM_ST_F32) | TPM_ST_MASK(TPM_ST_F16) | TPM_ST_MASK(TPM_ST_BF16) |         \
     TPM_ST_MASK(TPM_ST_F8_E4M3))

#define TPM_ST_MAX_DIMS 8
/* Header size limit (the reader refuses larger headers). */
#define TPM_ST_MAX_HEADER (100u * 1024u * 1024u)

typedef struct tpm_st_tensor {
    const char *name;
    tpm_st_dtype dtype;
    int ndim;                         /* 0 (scalar) .. TPM_ST_MAX_DIMS */
    int64_t shape[TPM_ST_MAX_DIMS];
    size_t numel;                     /* product of shape (1 for a scalar) */
    size_t nbytes;                    /* numel * dtype size */
    const void *data;                 /* into the read-only mapping */
} tpm_st_tensor;

typedef struct tpm_st_file tpm_st_file;

/* "F32", "BF16", ... as in the format; NULL for an invalid value. */
const char *tpm_st_dtype_name(tpm_st_dtype d);
/* Bytes per element; 0 for an invalid value. */
size_t tpm_st_dtype_size(tpm_st_dtype d);
/* Parse a format dtype name (exact, as written by the format). */
tpm_status tpm_st_dtype_parse(const char *s, tpm_st_dtype *out);

/* MARK: reader */
tpm_status tpm_st_open(const char *path, tpm_st_file **out);
/* Parse a file image already in memory (not copied: buf must outlive the
 * handle). name is used in error messages. */
tpm_status tpm_st_open_buffer(const void *buf, size_t len, const char *name, tpm_st_file **out);
void tpm_st_close(tpm_st_file *f);

/* Tensors in data-offset order. */
size_t tpm_st_count(const tpm_st_file *f);
const tpm_st_tensor *tpm_st_at(const tpm_st_file *f, size_t i);
/* NULL if absent. */
const tpm_st_tensor *tpm_st_find(const tpm_st_file *f, const char *name);
/* __metadata__ (string values only). tpm_st_metadata: NULL if absent. */
const char *tpm_st_metadata(const tpm_st_file *f, const char *key);
size_t tpm_st_metadata_count(const tpm_st_file *f);
tpm_status tpm_st_metadata_at(const tpm_st_file *f, size_t i, const char **key, const char **value);

/* Look a tensor up and check it: dtype in dtype_mask (TPM_ST_MASK bits),
 * ndim (or -1: any) and shape (NULL: any; entry -1: any). On failure
 * TPM_ERR_IO with a message naming the tensor and what is wrong. */
tpm_status tpm_st_get(const tpm_st_file *f, const char *name, uint32_t dtype_mask, int ndim,
                      const int64_t *shape, const tpm_st_tensor **out);

/* MARK: conversion to fp32
 * Convert a F32/F16/BF16/F8_E4M3 tensor to count == numel floats. For
 * F8_E4M3, scale (optional) is the U8 E8M0 tensor [rows, cols/32] of 1x32
 * blocks along the last dimension: value = e4m3(x) * 2^(e - 127); E8M0 0xFF
 * is NaN. Without a scale the raw E4M3 values are returned. */
tpm_status tpm_st_to_f32(const tpm_st_tensor *t, const tpm_st_tensor *scale, float *out, size_t count);
/* tpm_st_get (float dtypes, ndim and shape) + tpm_st_to_f32, using
 * "<name>_scale" as the scale for F8_E4M3 tensors when it exists. out holds
 * the tensor's numel floats. */
tpm_status tpm_st_load_f32(const tpm_st_file *f, const char *name, int ndim, const int64_t *shape,
                           float *out);

/* Scalar formats (bit-exact). f32 -> e4m3 rounds to nearest even and
 * saturates to +-448; NaN -> 0x7F. */
float tpm_st_e4m3_to_f32(uint8_t v);
uint8_t tpm_st_f32_to_e4m3(float f);
float tpm_st_e8m0_to_f32(uint8_t e);
/* Quantize one row of n values (n % 32 == 0) to E4M3 codes + E8M0 scales
 * (n/32): per 32-block, e = ceil(log2(amax / 448)) (+127 bias), so no code
 * saturates; an all-zero block gets scale 2^-127 (byte 0). */
void tpm_st_quantize_mx_e4m3(const float *in, size_t n, uint8_t *codes, uint8_t *scales);

/* MARK: writer */
typedef struct tpm_st_writer tpm_st_writer;

tpm_status tpm_st_writer_create(tpm_st_writer **out);
void tpm_st_writer_destroy(tpm_st_writer *w);
/* A __metadata__ entry (string value). A repeated key replaces the value. */
tpm_status tpm_st_writer_metadata(tpm_st_writer *w, const char *key, const char *value);
/* Declare a tensor. data (numel * dtype size bytes) is copied; data == NULL
 * means the bytes will be streamed with tpm_st_writer_put. */
tpm_status tpm_st_writer_add(tpm_st_writer *w, const char *name, tpm_st_dtype dtype, int ndim,
                             const int64_t *shape, const void *data);
/* Write the whole file in one go (every tensor must have data). */
tpm_status tpm_st_writer_write(tpm_st_writer *w, const char *path);
/* Streaming: begin writes the header; put appends bytes of the tensors in
 * declaration order (a tensor may take several puts; tensors added with
 * data are written by begin/put as they come up); end checks every byte was
 * written and closes. On any failure the partial file is removed. */
tpm_status tpm_st_writer_begin(tpm_st_writer *w, const char *path);
tpm_status tpm_st_writer_put(tpm_st_writer *w, const void *data, size_t nbytes);
tpm_status tpm_st_writer_end(tpm_st_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* TPM_SAFETENSORS_H */
