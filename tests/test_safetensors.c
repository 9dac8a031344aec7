/*
 * test_safetensors.c - the safetensors reader and writer: round trips of
 * every dtype with metadata, streaming writes, every malformed-file case
 * (error naming the tensor), a truncation/corruption fuzz loop over a valid
 * file (run under ASan: exact-size heap copies catch any over-read), the
 * E4M3/E8M0 formats bit-exact, and fp32 conversion with block scales.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "model/safetensors.h"
#include "numeric.h"
#include "util/test_util.h"

static uint64_t g_seed;

/* MARK: helpers */
/* An exact-size file image: 8-byte length, header text, data. */
static uint8_t *make_image(const char *header, const void *data, size_t data_len, size_t *len) {
    size_t h = strlen(header);
    *len = 8 + h + data_len;
    uint8_t *img = malloc(*len);
    assert_non_null(img);
    for (int i = 0; i < 8; i++) img[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(img + 8, header, h);
    if (data_len) memcpy(img + 8 + h, data, data_len);
    return img;
}

/* Open an image: on failure the status must be IO and the message must
 * contain `want` (e.g. the tensor's name). */
static void expect_open_error(const char *header, size_t data_len, const char *want) {
    uint8_t *data = calloc(1, data_len + 1);
    size_t len;
    uint8_t *img = make_image(header, data, data_len, &len);
    tpm_st_file *f = (tpm_st_file *)0x1;
    tpm_status st = tpm_st_open_buffer(img, len, "case", &f);
    if (st == TPM_OK || !strstr(tpm_last_error(), want))
        fprintf(stderr, "header %s: status %d, message '%s', want '%s'\n", header, st, tpm_last_error(), want);
    assert_int_equal(st, TPM_ERR_IO);
    assert_null(f);
    assert_non_null(strstr(tpm_last_error(), want));
    free(img);
    free(data);
}

typedef struct rt_tensor {
    const char *name;
    tpm_st_dtype dt;
    int ndim;
    int64_t shape[TPM_ST_MAX_DIMS];
} rt_tensor;

static const rt_tensor rt_set[] = {
    {"a.f32", TPM_ST_F32, 2, {3, 5}},        {"b.f16", TPM_ST_F16, 1, {7}},
    {"c.bf16", TPM_ST_BF16, 3, {2, 3, 4}},   {"d.e4m3", TPM_ST_F8_E4M3, 2, {2, 64}},
    {"d.e4m3_scale", TPM_ST_U8, 2, {2, 2}},  {"e.e5m2", TPM_ST_F8_E5M2, 1, {9}},
    {"f.f64", TPM_ST_F64, 1, {3}},           {"g.i8", TPM_ST_I8, 1, {5}},
    {"h.i16", TPM_ST_I16, 1, {5}},           {"i.u16", TPM_ST_U16, 1, {5}},
    {"j.i32", TPM_ST_I32, 2, {2, 2}},        {"k.u32", TPM_ST_U32, 1, {1}},
    {"l.i64", TPM_ST_I64, 1, {4}},           {"m.u64", TPM_ST_U64, 1, {2}},
    {"n.bool", TPM_ST_BOOL, 1, {3}},         {"o.scalar", TPM_ST_F32, 0, {0}},
    {"p.empty", TPM_ST_BF16, 2, {0, 16}},    {"q.8d", TPM_ST_U8, 8, {1, 2, 1, 2, 1, 2, 1, 3}},
};
#define RT_N (sizeof rt_set / sizeof *rt_set)

static size_t rt_numel(const rt_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

/* Write rt_set with random contents to path; the contents go to bufs. */
static void write_rt_file(const char *path, tu_rng *r, uint8_t **bufs) {
    tpm_st_writer *w;
    assert_int_equal(tpm_st_writer_create(&w), TPM_OK);
    assert_int_equal(tpm_st_writer_metadata(w, "format", "pt"), TPM_OK);
    assert_int_equal(tpm_st_writer_metadata(w, "note", "replaced"), TPM_OK);
    assert_int_equal(tpm_st_writer_metadata(w, "note", "round \"trip\" \xc3\xa9"), TPM_OK);
    for (size_t i = 0; i < RT_N; i++) {
        size_t nb = rt_numel(&rt_set[i]) * tpm_st_dtype_size(rt_set[i].dt);
        bufs[i] = malloc(nb + 1);
        tu_fill_bytes(r, bufs[i], nb);
        assert_int_equal(tpm_st_writer_add(w, rt_set[i].name, rt_set[i].dt, rt_set[i].ndim, rt_set[i].shape, bufs[i]),
                         TPM_OK);
    }
    assert_int_equal(tpm_st_writer_write(w, path), TPM_OK);
    tpm_st_writer_destroy(w);
}

static void check_rt_file(const tpm_st_file *f, uint8_t *const *bufs) {
    assert_int_equal(tpm_st_count(f), RT_N);
    assert_string_equal(tpm_st_metadata(f, "format"), "pt");
    assert_string_equal(tpm_st_metadata(f, "note"), "round \"trip\" \xc3\xa9");
    assert_null(tpm_st_metadata(f, "absent"));
    assert_int_equal(tpm_st_metadata_count(f), 2);
    const char *k, *v;
    assert_int_equal(tpm_st_metadata_at(f, 0, &k, &v), TPM_OK);
    assert_string_equal(k, "format");
    assert_int_equal(tpm_st_metadata_at(f, 2, &k, &v), TPM_ERR_INVALID_ARG);
    for (size_t i = 0; i < RT_N; i++) {
        const tpm_st_tensor *t = tpm_st_find(f, rt_set[i].name);
        assert_non_null(t);
        assert_ptr_equal(t, tpm_st_at(f, i)); /* data order == declaration order */
        assert_string_equal(t->name, rt_set[i].name);
        assert_int_equal(t->dtype, rt_set[i].dt);
        assert_int_equal(t->ndim, rt_set[i].ndim);
        for (int d = 0; d < t->ndim; d++) assert_int_equal(t->shape[d], rt_set[i].shape[d]);
        assert_int_equal(t->numel, rt_numel(&rt_set[i]));
        assert_int_equal(t->nbytes, t->numel * tpm_st_dtype_size(t->dtype));
        if (t->nbytes) assert_memory_equal(t->data, bufs[i], t->nbytes);
    }
    assert_null(tpm_st_at(f, RT_N));
    assert_null(tpm_st_find(f, "nope"));
    assert_null(tpm_st_find(f, "a.f3"));
}

/* write_rt_file, then its bytes (caller frees) and the header length they
 * start with. */
static uint8_t *rt_image(const char *path, tu_rng *r, uint8_t **bufs, size_t *len, uint64_t *hlen) {
    write_rt_file(path, r, bufs);
    uint8_t *img = tu_read_file(path, len);
    assert_non_null(img);
    *hlen = 0;
    for (int i = 7; i >= 0; i--) *hlen = (*hlen << 8) | img[i];
    return img;
}

/* MARK: round trip */
static void test_round_trip(void **state) {
    (void)state;
    tu_rng r = {g_seed};
    uint8_t *bufs[RT_N];
    char *path = tu_tmp_path("st_rt");
    size_t len;
    uint64_t h;
    uint8_t *img = rt_image(path, &r, bufs, &len, &h);
    assert_int_equal(h % 8, 0); /* data section 8-byte aligned */
    assert_int_equal(img[8], '{');
    assert_memory_equal(img + 8, "{\"__metadata__\"", 15); /* metadata first */

    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    check_rt_file(f, bufs);
    tpm_st_close(f);
    assert_int_equal(tpm_st_open_buffer(img, len, "mem", &f), TPM_OK);
    check_rt_file(f, bufs);
    tpm_st_close(f);

    /* Deterministic: the same tensors give the same bytes. */
    tpm_st_writer *w;
    assert_int_equal(tpm_st_writer_create(&w), TPM_OK);
    assert_int_equal(tpm_st_writer_metadata(w, "format", "pt"), TPM_OK);
    assert_int_equal(tpm_st_writer_metadata(w, "note", "round \"trip\" \xc3\xa9"), TPM_OK);
    for (size_t i = 0; i < RT_N; i++)
        assert_int_equal(tpm_st_writer_add(w, rt_set[i].name, rt_set[i].dt, rt_set[i].ndim, rt_set[i].shape, NULL),
                         TPM_OK);
    char *path2 = tu_tmp_path("st_rt2");
    /* Streaming, in odd-sized pieces across tensor boundaries. */
    size_t total = 0;
    for (size_t i = 0; i < RT_N; i++) total += rt_numel(&rt_set[i]) * tpm_st_dtype_size(rt_set[i].dt);
    uint8_t *all = malloc(total), *p = all;
    for (size_t i = 0; i < RT_N; i++) {
        size_t nb = rt_numel(&rt_set[i]) * tpm_st_dtype_size(rt_set[i].dt);
        memcpy(p, bufs[i], nb);
        p += nb;
    }
    assert_int_equal(tpm_st_writer_begin(w, path2), TPM_OK);
    for (size_t off = 0; off < total;) {
        size_t take = 1 + tu_below(&r, 13);
        if (take > total - off) take = total - off;
        assert_int_equal(tpm_st_writer_put(w, all + off, take), TPM_OK);
        off += take;
    }
    assert_int_equal(tpm_st_writer_end(w), TPM_OK);
    tpm_st_writer_destroy(w);
    size_t len2;
    uint8_t *img2 = tu_read_file(path2, &len2);
    assert_non_null(img2);
    assert_int_equal(len, len2);
    assert_memory_equal(img, img2, len);

    for (size_t i = 0; i < RT_N; i++) free(bufs[i]);
    free(all);
    free(img);
    free(img2);
    unlink(path);
    unlink(path2);
    free(path);
    free(path2);
}

/* MARK: tpm_st_get */
static void test_get_checks(void **state) {
    (void)state;
    tu_rng r = {g_seed + 1};
    uint8_t *bufs[RT_N];
    char *path = tu_tmp_path("st_get");
    write_rt_file(path, &r, bufs);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    const tpm_st_tensor *t = NULL;
    int64_t ok_shape[2] = {3, 5}, any_rows[2] = {-1, 5}, bad_shape[2] = {5, 3};
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK(TPM_ST_F32), 2, ok_shape, &t), TPM_OK);
    assert_string_equal(t->name, "a.f32");
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, 2, any_rows, &t), TPM_OK);
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, -1, NULL, &t), TPM_OK);

    assert_int_equal(tpm_st_get(f, "missing.weight", TPM_ST_MASK_FLOAT, 2, ok_shape, &t), TPM_ERR_IO);
    assert_null(t);
    assert_non_null(strstr(tpm_last_error(), "'missing.weight'"));
    assert_non_null(strstr(tpm_last_error(), "missing"));
    assert_non_null(strstr(tpm_last_error(), path));

    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK(TPM_ST_BF16) | TPM_ST_MASK(TPM_ST_F16), 2, ok_shape, &t),
                     TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'a.f32'"));
    assert_non_null(strstr(tpm_last_error(), "dtype F32, expected F16|BF16"));

    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, 2, bad_shape, &t), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'a.f32'"));
    assert_non_null(strstr(tpm_last_error(), "shape [3, 5], expected [5, 3]"));
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, 1, ok_shape, &t), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "expected [3]"));

    /* Conversion: non-float dtypes refused; count mismatch refused. */
    float out[64];
    assert_int_equal(tpm_st_get(f, "j.i32", TPM_ST_MASK(TPM_ST_I32), -1, NULL, &t), TPM_OK);
    assert_int_equal(tpm_st_to_f32(t, NULL, out, 4), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'j.i32'"));
    assert_int_equal(tpm_st_load_f32(f, "j.i32", -1, NULL, out), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'j.i32'"));
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, -1, NULL, &t), TPM_OK);
    assert_int_equal(tpm_st_to_f32(t, NULL, out, 14), TPM_ERR_INVALID_ARG);

    /* Null arguments. */
    assert_int_equal(tpm_st_get(NULL, "a.f32", TPM_ST_MASK_FLOAT, -1, NULL, &t), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_get(f, NULL, TPM_ST_MASK_FLOAT, -1, NULL, &t), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, -1, NULL, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_get(f, "a.f32", TPM_ST_MASK_FLOAT, 9, NULL, &t), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_to_f32(NULL, NULL, out, 1), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_load_f32(f, "a.f32", -1, NULL, NULL), TPM_ERR_INVALID_ARG);
    tpm_st_file *h = (tpm_st_file *)0x1;
    assert_int_equal(tpm_st_open(NULL, &h), TPM_ERR_INVALID_ARG);
    assert_null(h);
    assert_int_equal(tpm_st_count(NULL), 0);
    assert_null(tpm_st_find(NULL, "x"));
    assert_null(tpm_st_metadata(NULL, "x"));
    tpm_st_close(NULL);
    tpm_st_close(f);

    tpm_st_file *g = (tpm_st_file *)0x1;
    assert_int_equal(tpm_st_open("/nonexistent/dir/x.safetensors", &g), TPM_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(tpm_last_error(), "/nonexistent/dir/x.safetensors"));
    assert_int_equal(tpm_st_open("/tmp", &g), TPM_ERR_IO); /* a directory */
    assert_non_null(strstr(tpm_last_error(), "not a regular file"));
    for (size_t i = 0; i < RT_N; i++) free(bufs[i]);
    unlink(path);
    free(path);
}

/* MARK: malformed files */
static void test_malformed(void **state) {
    (void)state;
    /* Too short for the length field, and an empty file on disk. */
    uint8_t four[4] = {1, 2, 3, 4};
    tpm_st_file *f;
    assert_int_equal(tpm_st_open_buffer(four, 4, "short", &f), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "too short"));
    char *path = tu_tmp_path("st_empty");
    assert_int_equal(tu_write_file(path, "", 0), 0);
    assert_int_equal(tpm_st_open(path, &f), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "too short"));
    unlink(path);
    free(path);

    /* Header length beyond the file and beyond the limit. */
    uint8_t big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    assert_int_equal(tpm_st_open_buffer(big, sizeof big, "huge", &f), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "limit"));
    uint8_t over[16] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    assert_int_equal(tpm_st_open_buffer(over, sizeof over, "over", &f), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "exceeds the file"));

    /* The smallest valid files. */
    uint8_t empty_obj[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    assert_int_equal(tpm_st_open_buffer(empty_obj, sizeof empty_obj, "empty", &f), TPM_OK);
    assert_int_equal(tpm_st_count(f), 0);
    tpm_st_close(f);

#define T "\"w.0\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}"
    expect_open_error("{" T, 16, "bad header JSON");
    expect_open_error("[1,2]", 0, "not a JSON object");
    expect_open_error("{" T "," T "}", 16, "duplicate object key near '\"w.0\"'");
    expect_open_error("{" T "}", 15, "'w.0': data out of range");               /* truncated data */
    expect_open_error("{" T "}", 17, "1 bytes after the last tensor");         /* trailing bytes */
    expect_open_error("{\"w.1\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w.1': unknown dtype 'F33'");
    expect_open_error("{\"w.2\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'w.2': missing or non-string \"dtype\"");
    expect_open_error("{\"w.3\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "'w.3': missing or non-array \"shape\"");
    expect_open_error("{\"w.4\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "'w.4': \"data_offsets\"");
    expect_open_error("{\"w.5\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "'w.5': shape[0]");
    expect_open_error("{\"w.6\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "'w.6': shape[0]");
    expect_open_error("{\"w.7\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                      "'w.7': 9 dimensions");
    expect_open_error("{\"w.8\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "'w.8': data_offsets begin 8 > end 0");
    expect_open_error("{\"w.9\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "'w.9': data_offsets span 8 bytes");
    expect_open_error("{\"w.10\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8, "'w.10': \"data_offsets\" are not");
    expect_open_error("{\"w.11\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                      "'w.11': shape overflows");
    expect_open_error("{\"w.12\":7}", 0, "'w.12': entry is not an object");
    expect_open_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "'b': data [4, 12) overlaps tensor 'a'");
    expect_open_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "'b': hole in the data section");
    expect_open_error("{\"__metadata__\":{\"k\":1}," T "}", 16, "__metadata__ value of 'k'");
    expect_open_error("{\"__metadata__\":[]," T "}", 16, "__metadata__ is not an object");
#undef T

    /* Shape mismatch of a scale tensor names the scale. */
    tpm_st_writer *w;
    uint8_t codes[2 * 64] = {0x38}, scales[4] = {127, 127, 127, 127};
    int64_t shape[2] = {2, 64}, sshape[2] = {4, 1};
    assert_int_equal(tpm_st_writer_create(&w), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "x.weight", TPM_ST_F8_E4M3, 2, shape, codes), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "x.weight_scale", TPM_ST_U8, 2, sshape, scales), TPM_OK);
    path = tu_tmp_path("st_scale");
    assert_int_equal(tpm_st_writer_write(w, path), TPM_OK);
    tpm_st_writer_destroy(w);
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    float out[128];
    assert_int_equal(tpm_st_load_f32(f, "x.weight", 2, shape, out), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "'x.weight_scale': scale shape [4, 1], expected [2, 2]"));
    tpm_st_close(f);
    unlink(path);
    free(path);
}

/* MARK: writer errors */
static void test_writer_errors(void **state) {
    (void)state;
    tpm_st_writer *w;
    float v[4] = {1, 2, 3, 4};
    int64_t shape[1] = {4}, neg[1] = {-1};
    assert_int_equal(tpm_st_writer_create(NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_create(&w), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "a", TPM_ST_F32, 1, shape, v), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "a", TPM_ST_F32, 1, shape, v), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "duplicate tensor 'a'"));
    assert_int_equal(tpm_st_writer_add(w, "__metadata__", TPM_ST_F32, 1, shape, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "", TPM_ST_F32, 1, shape, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "b", TPM_ST_DTYPE_COUNT_, 1, shape, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "b", TPM_ST_F32, 9, shape, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "b", TPM_ST_F32, 1, neg, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "b", TPM_ST_F32, 1, NULL, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_add(w, "s", TPM_ST_F32, 1, shape, NULL), TPM_OK); /* streamed */
    assert_int_equal(tpm_st_writer_metadata(w, NULL, "x"), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_put(w, v, 4), TPM_ERR_INVALID_ARG); /* not begun */

    char *path = tu_tmp_path("st_werr");
    /* write() refuses a tensor without data. */
    assert_int_equal(tpm_st_writer_write(w, path), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "'s'"));
    /* Too few bytes: end fails and removes the file. */
    assert_int_equal(tpm_st_writer_begin(w, path), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "late", TPM_ST_F32, 1, shape, v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_st_writer_put(w, v, 8), TPM_OK);
    assert_int_equal(tpm_st_writer_end(w), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "'s' has 8 of 16 bytes"));
    assert_int_equal(access(path, F_OK), -1);
    /* Too many bytes. */
    assert_int_equal(tpm_st_writer_begin(w, path), TPM_OK);
    assert_int_equal(tpm_st_writer_put(w, v, 16), TPM_OK);
    assert_int_equal(tpm_st_writer_put(w, v, 1), TPM_ERR_INVALID_ARG);
    assert_int_equal(access(path, F_OK), -1);
    /* Unwritable path. */
    assert_int_equal(tpm_st_writer_begin(w, "/nonexistent/dir/x.safetensors"), TPM_ERR_IO);
    assert_non_null(strstr(tpm_last_error(), "/nonexistent/dir/x.safetensors"));
    /* And a good one at the end. */
    assert_int_equal(tpm_st_writer_begin(w, path), TPM_OK);
    assert_int_equal(tpm_st_writer_put(w, v, 16), TPM_OK);
    assert_int_equal(tpm_st_writer_end(w), TPM_OK);
    tpm_st_writer_destroy(w);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    float out[4];
    tu_poison_f32(out, 4);
    assert_int_equal(tpm_st_load_f32(f, "s", 1, shape, out), TPM_OK);
    assert_memory_equal(out, v, sizeof v);
    tpm_st_close(f);
    unlink(path);
    free(path);
    tpm_st_writer_destroy(NULL);
}

/* MARK: fuzz */
/* Every tensor a successful open reports must lie inside the image. */
static void check_inside(const tpm_st_file *f, const uint8_t *img, size_t len) {
    for (size_t i = 0; i < tpm_st_count(f); i++) {
        const tpm_st_tensor *t = tpm_st_at(f, i);
        const uint8_t *d = t->data;
        assert_true(d >= img && d + t->nbytes <= img + len);
        assert_ptr_equal(tpm_st_find(f, t->name), t);
        /* touch every byte (ASan) */
        unsigned sum = 0;
        for (size_t k = 0; k < t->nbytes; k++) sum += d[k];
        (void)sum;
    }
}

static void test_fuzz(void **state) {
    (void)state;
    tu_rng r = {g_seed + 2};
    uint8_t *bufs[RT_N];
    char *path = tu_tmp_path("st_fuzz");
    size_t len;
    uint64_t hlen;
    uint8_t *img = rt_image(path, &r, bufs, &len, &hlen);

    /* Every truncation fails cleanly (the tensors tile the data exactly). */
    size_t fails = 0;
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *t = malloc(cut ? cut : 1);
        memcpy(t, img, cut);
        tpm_st_file *f = NULL;
        tpm_status st = tpm_st_open_buffer(t, cut, "trunc", &f);
        assert_int_equal(st, TPM_ERR_IO);
        assert_null(f);
        if (cut > 8 + hlen) assert_non_null(strstr(tpm_last_error(), "data out of range"));
        fails++;
        free(t);
    }
    assert_int_equal(fails, len);

    /* Random corruption of 1-4 bytes (mostly in the header). Either a clean
     * error or a file whose tensors lie inside the image. */
    int opened = 0, refused = 0;
    for (int it = 0; it < 4000; it++) {
        uint8_t *c = malloc(len);
        memcpy(c, img, len);
        int k = 1 + (int)tu_below(&r, 4);
        for (int j = 0; j < k; j++) {
            size_t pos = tu_below(&r, 8) == 0 ? tu_below(&r, (uint32_t)len) : tu_below(&r, (uint32_t)(8 + hlen));
            uint8_t choices[] = {'0', '9', '"', ',', ']', '}', '{', ' ', '-', 0, 0xff, (uint8_t)tu_next(&r)};
            c[pos] = choices[tu_below(&r, sizeof choices)];
        }
        tpm_st_file *f = NULL;
        tpm_status st = tpm_st_open_buffer(c, len, "corrupt", &f);
        if (st == TPM_OK) {
            check_inside(f, c, len);
            tpm_st_close(f);
            opened++;
        } else {
            assert_int_equal(st, TPM_ERR_IO);
            assert_null(f);
            assert_true(strlen(tpm_last_error()) > 0);
            refused++;
        }
        free(c);
    }
    fprintf(stderr, "fuzz: %zu truncations refused; corruption: %d opened, %d refused\n", fails, opened, refused);
    assert_true(refused > 1000);

    /* Same through the file path (mmap) for a few truncations. */
    for (size_t cut = 0; cut < len; cut += len / 7 + 1) {
        assert_int_equal(tu_write_file(path, img, cut), 0);
        tpm_st_file *f = NULL;
        assert_int_equal(tpm_st_open(path, &f), TPM_ERR_IO);
        assert_null(f);
    }
    for (size_t i = 0; i < RT_N; i++) free(bufs[i]);
    free(img);
    unlink(path);
    free(path);
}

/* MARK: formats */
static float e4m3_ref(uint8_t v) { /* from the definition, in double */
    int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7) return NAN;
    double a = e == 0 ? (m / 8.0) * pow(2.0, -6) : (1.0 + m / 8.0) * pow(2.0, e - 7);
    return (float)(s ? -a : a);
}

static void test_e4m3(void **state) {
    (void)state;
    for (int c = 0; c < 256; c++) {
        float v = tpm_st_e4m3_to_f32((uint8_t)c), ref = e4m3_ref((uint8_t)c);
        if (isnan(ref)) {
            assert_true(isnan(v));
            continue;
        }
        assert_memory_equal(&v, &ref, 4);
        assert_int_equal(tpm_st_f32_to_e4m3(v), c); /* round trip, -0 included */
    }
    assert_true(tpm_st_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(tpm_st_e4m3_to_f32(0x01) == ldexpf(1.0f, -9));
    assert_true(tpm_st_e4m3_to_f32(0x38) == 1.0f);
    assert_int_equal(tpm_st_f32_to_e4m3(NAN), 0x7f);
    assert_int_equal(tpm_st_f32_to_e4m3(INFINITY), 0x7e);
    assert_int_equal(tpm_st_f32_to_e4m3(-INFINITY), 0xfe);
    assert_int_equal(tpm_st_f32_to_e4m3(1e30f), 0x7e);
    assert_int_equal(tpm_st_f32_to_e4m3(464.0f), 0x7e);
    assert_int_equal(tpm_st_f32_to_e4m3(1e-30f), 0x00);
    assert_int_equal(tpm_st_f32_to_e4m3(ldexpf(1.0f, -10)), 0x00); /* tie to even: 0 */
    assert_int_equal(tpm_st_f32_to_e4m3(3 * ldexpf(1.0f, -10)), 0x02); /* 1.5 ulp: to even 2 */
    assert_int_equal(tpm_st_f32_to_e4m3(1.0625f), 0x38);  /* tie between 1 and 1.125 -> even */
    assert_int_equal(tpm_st_f32_to_e4m3(1.1875f), 0x3a);  /* tie between 1.125 and 1.25 -> even */

    /* Random values against brute-force nearest-even over all finite codes. */
    tu_rng r = {g_seed + 3};
    for (int it = 0; it < 20000; it++) {
        float x = (float)(tu_normal(&r) * pow(2.0, (double)tu_below(&r, 24) - 12.0));
        uint8_t got = tpm_st_f32_to_e4m3(x);
        float ax = fabsf(x);
        int best = 0;
        double bd = INFINITY;
        for (int c = 0; c <= 0x7e; c++) {
            double d = fabs((double)e4m3_ref((uint8_t)c) - ax);
            if (d < bd || (d == bd && !(c & 1))) {
                bd = d;
                best = c;
            }
        }
        if (ax > 448.0f) best = 0x7e;
        if (signbit(x)) best |= 0x80;
        if (got != best) fprintf(stderr, "x=%.9g got %#x want %#x\n", (double)x, got, best);
        assert_int_equal(got, best);
    }
}

static void test_e8m0_mx(void **state) {
    (void)state;
    assert_true(tpm_st_e8m0_to_f32(127) == 1.0f);
    assert_true(tpm_st_e8m0_to_f32(128) == 2.0f);
    assert_true(tpm_st_e8m0_to_f32(0) == ldexpf(1.0f, -127));
    assert_true(tpm_st_e8m0_to_f32(254) == ldexpf(1.0f, 127));
    assert_true(isnan(tpm_st_e8m0_to_f32(255)));

    tu_rng r = {g_seed + 4};
    float x[96], y[96];
    uint8_t codes[96], sc[3];
    for (int it = 0; it < 500; it++) {
        float sd = (float)pow(2.0, (double)tu_below(&r, 40) - 20.0);
        tu_fill_normal(&r, x, 96, sd);
        if (it % 50 == 0) memset(x + 32, 0, 32 * sizeof(float)); /* an all-zero block */
        tpm_st_quantize_mx_e4m3(x, 96, codes, sc);
        for (int b = 0; b < 3; b++) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
            float s = tpm_st_e8m0_to_f32(sc[b]);
            if (amax == 0) {
                assert_int_equal(sc[b], 0);
                continue;
            }
            assert_true(amax / s <= 448.0f);        /* no saturation */
            assert_true(amax / (s * 0.5f) > 448.0f); /* and the smallest such scale */
        }
        for (int i = 0; i < 96; i++) {
            y[i] = tpm_st_e4m3_to_f32(codes[i]) * tpm_st_e8m0_to_f32(sc[i / 32]);
            float s = tpm_st_e8m0_to_f32(sc[i / 32]);
            /* relative step 2^-3 in the normal range, absolute 2^-9 * s below */
            assert_true(fabsf(y[i] - x[i]) <= fabsf(x[i]) * 0.0625f + s * ldexpf(1.0f, -10));
        }
    }

    /* tpm_st_load_f32 applies <name>_scale; tpm_st_to_f32 without a scale gives raw codes. */
    float w[2 * 64];
    tu_fill_normal(&r, w, 2 * 64, 0.05f);
    uint8_t wc[2 * 64], ws[4];
    for (int row = 0; row < 2; row++) tpm_st_quantize_mx_e4m3(w + row * 64, 64, wc + row * 64, ws + row * 2);
    tpm_st_writer *wr;
    int64_t shape[2] = {2, 64}, sshape[2] = {2, 2};
    assert_int_equal(tpm_st_writer_create(&wr), TPM_OK);
    assert_int_equal(tpm_st_writer_add(wr, "q.weight", TPM_ST_F8_E4M3, 2, shape, wc), TPM_OK);
    assert_int_equal(tpm_st_writer_add(wr, "q.weight_scale", TPM_ST_U8, 2, sshape, ws), TPM_OK);
    char *path = tu_tmp_path("st_mx");
    assert_int_equal(tpm_st_writer_write(wr, path), TPM_OK);
    tpm_st_writer_destroy(wr);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    float out[128], raw[128];
    tu_poison_f32(out, 128);
    assert_int_equal(tpm_st_load_f32(f, "q.weight", 2, shape, out), TPM_OK);
    const tpm_st_tensor *t;
    assert_int_equal(tpm_st_get(f, "q.weight", TPM_ST_MASK(TPM_ST_F8_E4M3), 2, shape, &t), TPM_OK);
    assert_int_equal(tpm_st_to_f32(t, NULL, raw, 128), TPM_OK);
    for (int i = 0; i < 128; i++) {
        float want = tpm_st_e4m3_to_f32(wc[i]) * ldexpf(1.0f, ws[i / 32] - 127);
        assert_memory_equal(&out[i], &want, 4);
        assert_true(raw[i] == tpm_st_e4m3_to_f32(wc[i]));
    }
    assert_true(tu_compare_f32("mx", out, w, 128, 1e-4f, 0.0625f, NULL) == 0);
    /* A scale given to a non-F8 tensor is refused. */
    const tpm_st_tensor *s;
    assert_int_equal(tpm_st_get(f, "q.weight_scale", TPM_ST_MASK(TPM_ST_U8), 2, sshape, &s), TPM_OK);
    assert_int_equal(tpm_st_to_f32(s, s, out, 4), TPM_ERR_IO);
    tpm_st_close(f);
    unlink(path);
    free(path);
}

static void test_f16_bf16_convert(void **state) {
    (void)state;
    tu_rng r = {g_seed + 5};
    enum { N = 1000 };
    float src[N], out[N];
    uint16_t bf[N], hf[N];
    tu_fill_normal(&r, src, N, 3.0f);
    for (int i = 0; i < N; i++) {
        bf[i] = tpm_f32_to_bf16(src[i]);
        hf[i] = tpm_f32_to_fp16(src[i]);
    }
    int64_t shape[1] = {N};
    tpm_st_writer *w;
    assert_int_equal(tpm_st_writer_create(&w), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "bf", TPM_ST_BF16, 1, shape, bf), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "hf", TPM_ST_F16, 1, shape, hf), TPM_OK);
    assert_int_equal(tpm_st_writer_add(w, "f", TPM_ST_F32, 1, shape, src), TPM_OK);
    char *path = tu_tmp_path("st_conv");
    assert_int_equal(tpm_st_writer_write(w, path), TPM_OK);
    tpm_st_writer_destroy(w);
    tpm_st_file *f;
    assert_int_equal(tpm_st_open(path, &f), TPM_OK);
    tu_poison_f32(out, N);
    assert_int_equal(tpm_st_load_f32(f, "bf", 1, shape, out), TPM_OK);
    for (int i = 0; i < N; i++) assert_true(out[i] == tpm_bf16_to_f32(bf[i]));
    tu_poison_f32(out, N);
    assert_int_equal(tpm_st_load_f32(f, "hf", 1, shape, out), TPM_OK);
    for (int i = 0; i < N; i++) assert_true(out[i] == tpm_fp16_to_f32(hf[i]));
    tu_poison_f32(out, N);
    assert_int_equal(tpm_st_load_f32(f, "f", 1, shape, out), TPM_OK);
    assert_true(tu_equal_bits_f32("f32", out, src, N));
    tpm_st_close(f);
    unlink(path);
    free(path);

    /* dtype names */
    for (int d = 0; d < TPM_ST_DTYPE_COUNT_; d++) {
        tpm_st_dtype p;
        assert_int_equal(tpm_st_dtype_parse(tpm_st_dtype_name((tpm_st_dtype)d), &p), TPM_OK);
        assert_int_equal(p, d);
        assert_true(tpm_st_dtype_size((tpm_st_dtype)d) >= 1);
    }
    tpm_st_dtype p;
    assert_int_equal(tpm_st_dtype_parse("bf16", &p), TPM_ERR_INVALID_ARG);
    assert_null(tpm_st_dtype_name(TPM_ST_DTYPE_COUNT_));
    assert_int_equal(tpm_st_dtype_size(TPM_ST_DTYPE_COUNT_), 0);
}

int main(void) {
    g_seed = tu_seed();
    tpm_log_set_level(TPM_LOG_NONE);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),  cmocka_unit_test(test_get_checks),
        cmocka_unit_test(test_malformed),   cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_fuzz),        cmocka_unit_test(test_e4m3),
        cmocka_unit_test(test_e8m0_mx),     cmocka_unit_test(test_f16_bf16_convert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
