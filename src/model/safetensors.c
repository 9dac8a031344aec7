/*
 * safetensors.c - safetensors reader (validating header parse with jansson,
 * data mmapped read-only), fp32 conversion of BF16/F16/F32/F8_E4M3 tensors
 * (with optional E8M0 1x32 block scales) and the scalar FP8 formats. The
 * writer is in st_writer.c.
 *
 * Validation (every failure is TPM_ERR_IO naming the file and the tensor):
 * the header length fits the file and TPM_ST_MAX_HEADER; the header is one
 * JSON object without duplicate keys; each tensor has a known dtype, a shape
 * of <= 8 non-negative dims, data_offsets [begin, end] with begin <= end,
 * end - begin == numel * dtype size and end within the data section; sorted
 * by offset, the tensors tile the data section exactly (no overlap, no hole,
 * nothing after the last one), as the format requires.
 */
#include "model/safetensors.h"

#include "internal.h"
#include "numeric.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct tpm_st_file {
    char *label;             /* path or caller's name, for messages */
    const uint8_t *base;     /* the whole file image */
    size_t len;
    int mapped;              /* base is our mmap (unmap on close) */
    const uint8_t *data;     /* data section */
    size_t data_len;
    tpm_st_tensor *tensors;  /* by data offset */
    size_t n;
    size_t *by_name;         /* indices sorted by name, for tpm_st_find */
    char **meta_key, **meta_val;
    size_t n_meta;
};

/* MARK: dtypes */
static const struct {
    const char *name;
    size_t size;
} dtype_info[TPM_ST_DTYPE_COUNT_] = {
    [TPM_ST_F32] = {"F32", 4},     [TPM_ST_F16] = {"F16", 2},       [TPM_ST_BF16] = {"BF16", 2},
    [TPM_ST_F8_E4M3] = {"F8_E4M3", 1}, [TPM_ST_F8_E5M2] = {"F8_E5M2", 1}, [TPM_ST_F64] = {"F64", 8},
    [TPM_ST_U8] = {"U8", 1},       [TPM_ST_I8] = {"I8", 1},         [TPM_ST_U16] = {"U16", 2},
    [TPM_ST_I16] = {"I16", 2},     [TPM_ST_U32] = {"U32", 4},       [TPM_ST_I32] = {"I32", 4},
    [TPM_ST_U64] = {"U64", 8},     [TPM_ST_I64] = {"I64", 8},       [TPM_ST_BOOL] = {"BOOL", 1},
};

const char *tpm_st_dtype_name(tpm_st_dtype d) {
    return ((unsigned)d < TPM_ST_DTYPE_COUNT_) ? dtype_info[d].name : NULL;
}

size_t tpm_st_dtype_size(tpm_st_dtype d) {
    return ((unsigned)d < TPM_ST_DTYPE_COUNT_) ? dtype_info[d].size : 0;
}

tpm_status tpm_st_dtype_parse(const char *s, tpm_st_dtype *out) {
    TPM_ARG_CHECK(s && out, "tpm_st_dtype_parse: null argument");
    for (int d = 0; d < TPM_ST_DTYPE_COUNT_; d++) {
        if (!strcmp(s, dtype_info[d].name)) {
            *out = (tpm_st_dtype)d;
            return TPM_OK;
        }
    }
    return tpm_err(TPM_ERR_INVALID_ARG, "unknown safetensors dtype '%s'", s);
}

/* MARK: scalar formats (bit manipulation; no libm in the per-element path) */
/* 2^n for n in [-149, 127], exact. */
static float pow2f(int n) {
    return tpm_bits_f32(n >= -126 ? (uint32_t)(n + 127) << 23 : 1u << (n + 149));
}

float tpm_st_e4m3_to_f32(uint8_t v) {
    uint32_t sign = (uint32_t)(v & 0x80) << 24, e = (v >> 3) & 0xf, m = v & 7;
    if (e == 15 && m == 7) return tpm_bits_f32(sign | 0x7fc00000u);
    if (e == 0) { /* subnormal: m * 2^-9 */
        float a = (float)m * 0.001953125f;
        return sign ? -a : a;
    }
    return tpm_bits_f32(sign | ((e + 120u) << 23) | (m << 20));
}

uint8_t tpm_st_f32_to_e4m3(float f) {
    uint32_t u = tpm_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return 0x7f;                 /* NaN */
    if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7e); /* >= 448: saturate (no Inf in e4m3fn) */
    if (a < 0x3c800000u) {                            /* below 2^-6: subnormal grid 2^-9 */
        float q = rintf(tpm_bits_f32(a) * 512.0f);    /* exact scaling; 0..8, 8 = smallest normal */
        return (uint8_t)(sign | (uint8_t)q);
    }
    /* Round the 23-bit mantissa to 3 bits, nearest even; a carry bumps the exponent. */
    uint32_t r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20;
    r -= 120u << 3; /* rebias 127 -> 7 */
    if (r > 0x7e) r = 0x7e;
    return (uint8_t)(sign | r);
}

float tpm_st_e8m0_to_f32(uint8_t e) { return e == 0xff ? NAN : pow2f((int)e - 127); }

void tpm_st_quantize_mx_e4m3(const float *in, size_t n, uint8_t *codes, uint8_t *scales) {
    for (size_t b = 0; b < n / 32; b++) {
        const float *x = in + b * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) {
            float a = fabsf(x[i]);
            if (a > amax && isfinite(a)) amax = a; /* NaN/Inf: encoded as NaN / saturated */
        }
        int k = -127;
        if (amax > 0.0f) {
            int ex;
            (void)frexpf(amax / 448.0f, &ex);
            k = ex; /* amax/448 < 2^ex: amax / 2^k < 448 */
            while (k > -127 && ldexpf(amax, -(k - 1)) <= 448.0f) k--;
            while (k < 127 && ldexpf(amax, -k) > 448.0f) k++;
        }
        scales[b] = (uint8_t)(k + 127);
        /* x * 2^-k (k in [-127, 127]): exact unless the product is subnormal. */
        float inv = pow2f(-k);
        for (int i = 0; i < 32; i++) codes[b * 32 + (size_t)i] = tpm_st_f32_to_e4m3(x[i] * inv);
    }
}

/* MARK: reader */
static tpm_status st_fail(const tpm_st_file *f, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tpm_status st_fail(const tpm_st_file *f, const char *tensor, const char *fmt, ...) {
    char msg[TPM_ERRMSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (tensor)
        return tpm_err(TPM_ERR_IO, "safetensors %s: tensor '%.200s': %s", f->label, tensor, msg);
    return tpm_err(TPM_ERR_IO, "safetensors %s: %s", f->label, msg);
}

static int cmp_offset(const void *a, const void *b) {
    const tpm_st_tensor *x = a, *y = b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* qsort_r is a GNU extension; sort name indices with a small merge sort. */
static void sort_by_name(const tpm_st_tensor *t, size_t *idx, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_by_name(t, idx, tmp, h);
    sort_by_name(t, idx + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = strcmp(t[idx[i]].name, t[idx[j]].name) <= 0 ? idx[i++] : idx[j++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

static tpm_status parse_metadata(tpm_st_file *f, json_t *meta) {
    if (!json_is_object(meta)) return st_fail(f, NULL, "__metadata__ is not an object");
    size_t n = json_object_size(meta);
    f->meta_key = calloc(n ? n : 1, sizeof *f->meta_key);
    f->meta_val = calloc(n ? n : 1, sizeof *f->meta_val);
    if (!f->meta_key || !f->meta_val) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
    const char *key;
    json_t *v;
    json_object_foreach(meta, key, v) {
        if (!json_is_string(v))
            return st_fail(f, NULL, "__metadata__ value of '%.200s' is not a string", key);
        f->meta_key[f->n_meta] = strdup(key);
        f->meta_val[f->n_meta] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta_key[f->n_meta - 1] || !f->meta_val[f->n_meta - 1])
            return tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
    }
    return TPM_OK;
}

static int json_u64(json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static tpm_status parse_tensor(tpm_st_file *f, const char *name, json_t *obj, tpm_st_tensor *t,
                               uint64_t *begin_out) {
    if (!json_is_object(obj)) return st_fail(f, name, "entry is not an object");
    json_t *jd = json_object_get(obj, "dtype"), *js = json_object_get(obj, "shape"),
           *jo = json_object_get(obj, "data_offsets");
    if (!json_is_string(jd)) return st_fail(f, name, "missing or non-string \"dtype\"");
    if (!json_is_array(js)) return st_fail(f, name, "missing or non-array \"shape\"");
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return st_fail(f, name, "\"data_offsets\" is not an array of two integers");
    const char *ds = json_string_value(jd);
    int d;
    for (d = 0; d < TPM_ST_DTYPE_COUNT_; d++)
        if (!strcmp(ds, dtype_info[d].name)) break;
    if (d == TPM_ST_DTYPE_COUNT_) return st_fail(f, name, "unknown dtype '%.40s'", ds);
    t->dtype = (tpm_st_dtype)d;
    size_t nd = json_array_size(js);
    if (nd > TPM_ST_MAX_DIMS) return st_fail(f, name, "%zu dimensions (at most %d)", nd, TPM_ST_MAX_DIMS);
    t->ndim = (int)nd;
    size_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t v;
        if (json_u64(json_array_get(js, i), &v) || v > (uint64_t)INT64_MAX)
            return st_fail(f, name, "shape[%zu] is not a non-negative integer", i);
        t->shape[i] = (int64_t)v;
        if (__builtin_mul_overflow(numel, (size_t)v, &numel))
            return st_fail(f, name, "shape overflows the element count");
    }
    t->numel = numel;
    if (__builtin_mul_overflow(numel, dtype_info[d].size, &t->nbytes))
        return st_fail(f, name, "shape overflows the byte count");
    uint64_t b, e;
    if (json_u64(json_array_get(jo, 0), &b) || json_u64(json_array_get(jo, 1), &e))
        return st_fail(f, name, "\"data_offsets\" are not non-negative integers");
    if (b > e) return st_fail(f, name, "data_offsets begin %llu > end %llu", (unsigned long long)b,
                              (unsigned long long)e);
    if (e - b != t->nbytes)
        return st_fail(f, name, "data_offsets span %llu bytes but shape and dtype %s need %zu",
                       (unsigned long long)(e - b), dtype_info[d].name, t->nbytes);
    if (e > f->data_len)
        return st_fail(f, name, "data out of range: bytes [%llu, %llu) but the data section has %zu "
                                "(file truncated?)",
                       (unsigned long long)b, (unsigned long long)e, f->data_len);
    t->data = f->data + b;
    *begin_out = b;
    return TPM_OK;
}

static tpm_status parse_header(tpm_st_file *f) {
    if (f->len < 8) return st_fail(f, NULL, "%zu bytes: too short for the header length", f->len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | f->base[i];
    if (hlen > TPM_ST_MAX_HEADER)
        return st_fail(f, NULL, "header length %llu exceeds the %u byte limit", (unsigned long long)hlen,
                       TPM_ST_MAX_HEADER);
    if (hlen > f->len - 8)
        return st_fail(f, NULL, "header length %llu exceeds the file (%zu bytes after the length)",
                       (unsigned long long)hlen, f->len - 8);
    f->data = f->base + 8 + hlen;
    f->data_len = f->len - 8 - (size_t)hlen;

    json_error_t jerr;
    json_t *root = json_loadb((const char *)f->base + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return st_fail(f, NULL, "bad header JSON at line %d column %d: %s", jerr.line, jerr.column,
                       jerr.text);
    tpm_status st = TPM_OK;
    if (!json_is_object(root)) {
        st = st_fail(f, NULL, "header is not a JSON object");
        goto fail;
    }
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    uint64_t *begins = calloc(n ? n : 1, sizeof *begins);
    if (!f->tensors || !begins) {
        free(begins);
        st = tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
        goto fail;
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            st = parse_metadata(f, v);
        } else {
            tpm_st_tensor *t = &f->tensors[f->n];
            t->name = strdup(key);
            if (!t->name) {
                st = tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
            } else {
                f->n++;
                st = parse_tensor(f, key, v, t, &begins[f->n - 1]);
            }
        }
        if (st != TPM_OK) break;
    }
    free(begins);
    if (st != TPM_OK) goto fail;

    /* The tensors must tile the data section: no overlap, no hole. */
    qsort(f->tensors, f->n, sizeof *f->tensors, cmp_offset);
    size_t pos = 0;
    for (size_t i = 0; i < f->n; i++) {
        const tpm_st_tensor *t = &f->tensors[i];
        size_t b = (size_t)((const uint8_t *)t->data - f->data);
        if (b < pos) {
            st = st_fail(f, t->name, "data [%zu, %zu) overlaps tensor '%.200s'", b, b + t->nbytes,
                         f->tensors[i - 1].name);
            goto fail;
        }
        if (b > pos) {
            st = st_fail(f, t->name, "hole in the data section: bytes [%zu, %zu) belong to no tensor",
                         pos, b);
            goto fail;
        }
        pos = b + t->nbytes;
    }
    if (pos != f->data_len) {
        st = st_fail(f, NULL, "%zu bytes after the last tensor's data", f->data_len - pos);
        goto fail;
    }

    f->by_name = malloc((f->n ? f->n : 1) * sizeof *f->by_name);
    size_t *tmp = malloc((f->n ? f->n : 1) * sizeof *tmp);
    if (!f->by_name || !tmp) {
        free(tmp);
        st = tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
        goto fail;
    }
    for (size_t i = 0; i < f->n; i++) f->by_name[i] = i;
    sort_by_name(f->tensors, f->by_name, tmp, f->n);
    free(tmp);
fail:
    json_decref(root);
    return st;
}

static tpm_status st_new(const char *label, tpm_st_file **out) {
    tpm_st_file *f = calloc(1, sizeof *f);
    if (!f) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
    f->label = strdup(label);
    if (!f->label) {
        free(f);
        return tpm_err(TPM_ERR_NO_MEMORY, "safetensors: out of memory");
    }
    *out = f;
    return TPM_OK;
}

tpm_status tpm_st_open_buffer(const void *buf, size_t len, const char *name, tpm_st_file **out) {
    TPM_ARG_CHECK(out, "tpm_st_open_buffer: null out");
    *out = NULL;
    TPM_ARG_CHECK(buf || len == 0, "tpm_st_open_buffer: null buffer");
    tpm_st_file *f = NULL;
    TPM_TRY(st_new(name ? name : "<buffer>", &f));
    static const uint8_t empty[1] = {0};
    f->base = buf ? buf : empty;
    f->len = len;
    tpm_status st = parse_header(f);
    if (st != TPM_OK) {
        tpm_st_close(f);
        return st;
    }
    *out = f;
    return TPM_OK;
}

tpm_status tpm_st_open(const char *path, tpm_st_file **out) {
    TPM_ARG_CHECK(out, "tpm_st_open: null out");
    *out = NULL;
    TPM_ARG_CHECK(path, "tpm_st_open: null path");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tpm_err(TPM_ERR_IO, "safetensors %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    errno = 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        return tpm_err(TPM_ERR_IO, "safetensors %s: not a regular file%s%s", path, e ? ": " : "",
                       e ? strerror(e) : "");
    }
    tpm_st_file *f = NULL;
    tpm_status st = st_new(path, &f);
    if (st != TPM_OK) {
        close(fd);
        return st;
    }
    f->len = (size_t)sb.st_size;
    if (f->len > 0) {
        void *p = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            st = tpm_err(TPM_ERR_IO, "safetensors %s: mmap failed: %s", path, strerror(errno));
            close(fd);
            tpm_st_close(f);
            return st;
        }
        f->base = p;
        f->mapped = 1;
    } else {
        static const uint8_t empty[1] = {0};
        f->base = empty;
    }
    close(fd);
    st = parse_header(f);
    if (st != TPM_OK) {
        tpm_st_close(f);
        return st;
    }
    *out = f;
    return TPM_OK;
}

void tpm_st_close(tpm_st_file *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) free((void *)(uintptr_t)f->tensors[i].name);
    for (size_t i = 0; i < f->n_meta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->meta_key);
    free(f->meta_val);
    free(f->tensors);
    free(f->by_name);
    if (f->mapped) munmap((void *)(uintptr_t)f->base, f->len);
    free(f->label);
    free(f);
}

size_t tpm_st_count(const tpm_st_file *f) { return f ? f->n : 0; }

const tpm_st_tensor *tpm_st_at(const tpm_st_file *f, size_t i) {
    return (f && i < f->n) ? &f->tensors[i] : NULL;
}

const tpm_st_tensor *tpm_st_find(const tpm_st_file *f, const char *name) {
    if (!f || !name || !f->by_name) return NULL;
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[f->by_name[mid]].name, name);
        if (c == 0) return &f->tensors[f->by_name[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *tpm_st_metadata(const tpm_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta_key[i], key)) return f->meta_val[i];
    return NULL;
}

size_t tpm_st_metadata_count(const tpm_st_file *f) { return f ? f->n_meta : 0; }

tpm_status tpm_st_metadata_at(const tpm_st_file *f, size_t i, const char **key, const char **value) {
    TPM_ARG_CHECK(f && key && value, "tpm_st_metadata_at: null argument");
    TPM_ARG_CHECK(i < f->n_meta, "tpm_st_metadata_at: index %zu out of range (%zu entries)", i, f->n_meta);
    *key = f->meta_key[i];
    *value = f->meta_val[i];
    return TPM_OK;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

static void mask_str(char *buf, size_t len, uint32_t mask) {
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 0; d < TPM_ST_DTYPE_COUNT_ && k < len; d++)
        if (mask & TPM_ST_MASK(d)) k += (size_t)snprintf(buf + k, len - k, k ? "|%s" : "%s", dtype_info[d].name);
}

tpm_status tpm_st_get(const tpm_st_file *f, const char *name, uint32_t dtype_mask, int ndim,
                      const int64_t *shape, const tpm_st_tensor **out) {
    TPM_ARG_CHECK(f && name && out, "tpm_st_get: null argument");
    TPM_ARG_CHECK(ndim >= -1 && ndim <= TPM_ST_MAX_DIMS, "tpm_st_get: bad ndim %d", ndim);
    *out = NULL;
    const tpm_st_tensor *t = tpm_st_find(f, name);
    if (!t) return st_fail(f, name, "missing");
    if (!(dtype_mask & TPM_ST_MASK(t->dtype))) {
        char want[128];
        mask_str(want, sizeof want, dtype_mask);
        return st_fail(f, name, "dtype %s, expected %s", dtype_info[t->dtype].name, want);
    }
    int bad = (ndim >= 0 && t->ndim != ndim);
    for (int i = 0; !bad && shape && ndim >= 0 && i < ndim; i++) bad = shape[i] >= 0 && t->shape[i] != shape[i];
    if (bad) {
        char got[160], want[160];
        shape_str(got, sizeof got, t->ndim, t->shape);
        if (shape && ndim >= 0)
            shape_str(want, sizeof want, ndim, shape);
        else
            snprintf(want, sizeof want, "%d dimensions", ndim);
        return st_fail(f, name, "shape %s, expected %s", got, want);
    }
    *out = t;
    return TPM_OK;
}

/* MARK: conversion */
static float load_elem(const tpm_st_tensor *t, size_t i) {
    const uint8_t *p = t->data;
    uint16_t h;
    float v;
    switch (t->dtype) {
    case TPM_ST_F32: memcpy(&v, p + 4 * i, 4); return v;
    case TPM_ST_BF16: memcpy(&h, p + 2 * i, 2); return tpm_bf16_to_f32(h);
    case TPM_ST_F16: memcpy(&h, p + 2 * i, 2); return tpm_fp16_to_f32(h);
    default: return tpm_st_e4m3_to_f32(p[i]);
    }
}

/* The file is little-endian; so is every host this builds for. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors needs a little-endian host");

/* Messages name the tensor, and the file when known (pre = "safetensors F: "). */
static tpm_status to_f32(const char *pre, const tpm_st_tensor *t, const tpm_st_tensor *scale, float *out,
                         size_t count) {
    const char *name = t->name ? t->name : "?";
    if (!(TPM_ST_MASK_FLOAT & TPM_ST_MASK(t->dtype)))
        return tpm_err(TPM_ERR_IO, "%stensor '%.200s': dtype %s cannot be converted to F32", pre, name,
                       tpm_st_dtype_name(t->dtype) ? tpm_st_dtype_name(t->dtype) : "?");
    if (count != t->numel)
        return tpm_err(TPM_ERR_INVALID_ARG, "%stensor '%.200s': %zu elements, caller expects %zu", pre, name,
                       t->numel, count);
    if (scale && t->dtype != TPM_ST_F8_E4M3)
        return tpm_err(TPM_ERR_IO, "%stensor '%.200s': a block scale applies to F8_E4M3 only, not %s", pre,
                       name, tpm_st_dtype_name(t->dtype));
    if (!scale) {
        for (size_t i = 0; i < count; i++) out[i] = load_elem(t, i);
        return TPM_OK;
    }
    const char *sname = scale->name ? scale->name : "?";
    int64_t cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    if (scale->dtype != TPM_ST_U8)
        return tpm_err(TPM_ERR_IO, "%stensor '%.200s': scale dtype %s, expected U8 (E8M0)", pre, sname,
                       tpm_st_dtype_name(scale->dtype) ? tpm_st_dtype_name(scale->dtype) : "?");
    int ok = t->ndim >= 1 && scale->ndim == t->ndim && cols % 32 == 0 && scale->shape[t->ndim - 1] == cols / 32;
    for (int i = 0; ok && i < t->ndim - 1; i++) ok = scale->shape[i] == t->shape[i];
    if (!ok) {
        char got[160], want[160];
        int64_t ws[TPM_ST_MAX_DIMS];
        memcpy(ws, t->shape, sizeof ws);
        if (t->ndim >= 1) ws[t->ndim - 1] = cols / 32;
        shape_str(got, sizeof got, scale->ndim, scale->shape);
        shape_str(want, sizeof want, t->ndim, ws);
        return tpm_err(TPM_ERR_IO, "%stensor '%.200s': scale shape %s, expected %s (1x32 blocks of '%.200s'%s)",
                       pre, sname, got, want, name,
                       cols % 32 ? ", whose last dimension is not a multiple of 32" : "");
    }
    const uint8_t *codes = t->data, *sc = scale->data;
    for (size_t i = 0; i < count; i++) out[i] = tpm_st_e4m3_to_f32(codes[i]) * tpm_st_e8m0_to_f32(sc[i / 32]);
    return TPM_OK;
}

tpm_status tpm_st_to_f32(const tpm_st_tensor *t, const tpm_st_tensor *scale, float *out, size_t count) {
    TPM_ARG_CHECK(t && (out || count == 0), "tpm_st_to_f32: null argument");
    return to_f32("", t, scale, out, count);
}

tpm_status tpm_st_load_f32(const tpm_st_file *f, const char *name, int ndim, const int64_t *shape,
                           float *out) {
    TPM_ARG_CHECK(f && name && out, "tpm_st_load_f32: null argument");
    const tpm_st_tensor *t, *scale = NULL;
    TPM_TRY(tpm_st_get(f, name, TPM_ST_MASK_FLOAT, ndim, shape, &t));
    if (t->dtype == TPM_ST_F8_E4M3) {
        char sname[512];
        if ((size_t)snprintf(sname, sizeof sname, "%s_scale", name) < sizeof sname) scale = tpm_st_find(f, sname);
    }
    char pre[300];
    snprintf(pre, sizeof pre, "safetensors %.250s: ", f->label);
    return to_f32(pre, t, scale, out, t->numel);
}
