/*
 * st_writer.c - safetensors writer (see safetensors.h).
 *
 * The header is built with jansson in a fixed order (__metadata__ first,
 * then the tensors in declaration order, which is also their data order),
 * dumped compactly and padded with spaces to a multiple of 8 bytes so the
 * data section starts aligned. Tensors given with data are copied; the
 * others are streamed with tpm_st_writer_put between _begin and _end, which
 * lets gen-weights write files far larger than memory. A failed write
 * removes the partial file.
 */
#include "model/safetensors.h"

#include "internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_entry {
    char *name;
    tpm_st_dtype dtype;
    int ndim;
    int64_t shape[TPM_ST_MAX_DIMS];
    size_t nbytes;
    void *data; /* owned copy, or NULL: streamed */
} st_entry;

struct tpm_st_writer {
    st_entry *e;
    size_t n, cap;
    json_t *names; /* set of the names added, for the duplicate check */
    char **meta_key, **meta_val;
    size_t n_meta, meta_cap;
    /* streaming state */
    FILE *fp;
    char *path;
    size_t cur;         /* entry being written */
    size_t cur_done;    /* its bytes written so far */
};

tpm_status tpm_st_writer_create(tpm_st_writer **out) {
    TPM_ARG_CHECK(out, "tpm_st_writer_create: null out");
    *out = calloc(1, sizeof **out);
    if (!*out) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    return TPM_OK;
}

static void abort_file(tpm_st_writer *w) {
    if (w->fp) {
        fclose(w->fp);
        w->fp = NULL;
        if (w->path) remove(w->path);
    }
    free(w->path);
    w->path = NULL;
}

void tpm_st_writer_destroy(tpm_st_writer *w) {
    if (!w) return;
    abort_file(w);
    for (size_t i = 0; i < w->n; i++) {
        free(w->e[i].name);
        free(w->e[i].data);
    }
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta_key[i]);
        free(w->meta_val[i]);
    }
    free(w->e);
    json_decref(w->names);
    free(w->meta_key);
    free(w->meta_val);
    free(w);
}

tpm_status tpm_st_writer_metadata(tpm_st_writer *w, const char *key, const char *value) {
    TPM_ARG_CHECK(w && key && value, "tpm_st_writer_metadata: null argument");
    TPM_ARG_CHECK(!w->fp, "tpm_st_writer_metadata: the header is already written");
    for (size_t i = 0; i < w->n_meta; i++) {
        if (!strcmp(w->meta_key[i], key)) {
            char *v = strdup(value);
            if (!v) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
            free(w->meta_val[i]);
            w->meta_val[i] = v;
            return TPM_OK;
        }
    }
    if (w->n_meta == w->meta_cap) {
        size_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
        char **k = realloc(w->meta_key, cap * sizeof *k);
        if (!k) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
        w->meta_key = k;
        char **v = realloc(w->meta_val, cap * sizeof *v);
        if (!v) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
        w->meta_val = v;
        w->meta_cap = cap;
    }
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    }
    w->meta_key[w->n_meta] = k;
    w->meta_val[w->n_meta] = v;
    w->n_meta++;
    return TPM_OK;
}

tpm_status tpm_st_writer_add(tpm_st_writer *w, const char *name, tpm_st_dtype dtype, int ndim,
                             const int64_t *shape, const void *data) {
    TPM_ARG_CHECK(w && name, "tpm_st_writer_add: null argument");
    TPM_ARG_CHECK(!w->fp, "tpm_st_writer_add: '%.200s' added after the header was written", name);
    TPM_ARG_CHECK(name[0] && strcmp(name, "__metadata__"), "tpm_st_writer_add: invalid tensor name '%.200s'",
                  name);
    TPM_ARG_CHECK((unsigned)dtype < TPM_ST_DTYPE_COUNT_, "tpm_st_writer_add: '%.200s': bad dtype %d", name,
                  (int)dtype);
    TPM_ARG_CHECK(ndim >= 0 && ndim <= TPM_ST_MAX_DIMS && (shape || ndim == 0),
                  "tpm_st_writer_add: '%.200s': bad ndim %d", name, ndim);
    if (!w->names && !(w->names = json_object()))
        return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    TPM_ARG_CHECK(!json_object_get(w->names, name), "tpm_st_writer_add: duplicate tensor '%.200s'", name);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        TPM_ARG_CHECK(shape[i] >= 0, "tpm_st_writer_add: '%.200s': negative dimension", name);
        TPM_ARG_CHECK(!__builtin_mul_overflow(numel, (size_t)shape[i], &numel),
                      "tpm_st_writer_add: '%.200s': shape overflows", name);
    }
    size_t nbytes;
    TPM_ARG_CHECK(!__builtin_mul_overflow(numel, tpm_st_dtype_size(dtype), &nbytes),
                  "tpm_st_writer_add: '%.200s': shape overflows", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        st_entry *e = realloc(w->e, cap * sizeof *e);
        if (!e) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
        w->e = e;
        w->cap = cap;
    }
    st_entry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    if (!e->name) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    if (data) {
        e->data = malloc(nbytes ? nbytes : 1);
        if (!e->data) {
            free(e->name);
            return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory for '%.200s' (%zu bytes)",
                           name, nbytes);
        }
        memcpy(e->data, data, nbytes);
    }
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->nbytes = nbytes;
    if (json_object_set_new(w->names, name, json_null())) {
        free(e->name);
        free(e->data);
        return tpm_err(TPM_ERR_INVALID_ARG, "tpm_st_writer_add: tensor name '%.200s' is not valid UTF-8", name);
    }
    w->n++;
    return TPM_OK;
}

/* The header text, padded with spaces to a multiple of 8 (malloc'ed). */
static tpm_status build_header(const tpm_st_writer *w, char **out, size_t *len) {
    tpm_status st = TPM_OK;
    json_t *root = json_object();
    if (!root) return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    int bad = 0;
    if (w->n_meta) {
        json_t *meta = json_object();
        bad |= !meta || json_object_set_new(root, "__metadata__", meta);
        for (size_t i = 0; !bad && i < w->n_meta; i++)
            bad |= json_object_set_new(meta, w->meta_key[i], json_string(w->meta_val[i]));
    }
    uint64_t off = 0;
    for (size_t i = 0; !bad && i < w->n; i++) {
        const st_entry *e = &w->e[i];
        json_t *t = json_object(), *shape = json_array(), *offs = json_array();
        bad |= !t || !shape || !offs;
        if (bad) {
            json_decref(t);
            json_decref(shape);
            json_decref(offs);
            break;
        }
        for (int d = 0; d < e->ndim; d++) bad |= json_array_append_new(shape, json_integer(e->shape[d]));
        bad |= json_array_append_new(offs, json_integer((json_int_t)off));
        off += e->nbytes;
        bad |= json_array_append_new(offs, json_integer((json_int_t)off));
        bad |= json_object_set_new(t, "dtype", json_string(tpm_st_dtype_name(e->dtype)));
        bad |= json_object_set_new(t, "shape", shape);
        bad |= json_object_set_new(t, "data_offsets", offs);
        bad |= json_object_set_new(root, e->name, t);
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return tpm_err(TPM_ERR_IO, "safetensors writer: cannot build the header (invalid UTF-8 in a "
                                          "name or metadata, or out of memory)");
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *buf = malloc(padded + 1);
    if (!buf) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    } else {
        memcpy(buf, text, n);
        memset(buf + n, ' ', padded - n);
        buf[padded] = '\0';
        *out = buf;
        *len = padded;
    }
    free(text);
    return st;
}

static tpm_status write_bytes(tpm_st_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->fp) != n) /* the caller aborts the file */
        return tpm_err(TPM_ERR_IO, "safetensors %s: write failed: %s", w->path, strerror(errno));
    return TPM_OK;
}

/* Write the pending tensors that carry their own data. */
static tpm_status flush_owned(tpm_st_writer *w) {
    while (w->cur < w->n && (w->e[w->cur].data || w->e[w->cur].nbytes == 0)) {
        if (w->e[w->cur].data) TPM_TRY(write_bytes(w, w->e[w->cur].data, w->e[w->cur].nbytes));
        w->cur++;
        w->cur_done = 0;
    }
    return TPM_OK;
}

tpm_status tpm_st_writer_begin(tpm_st_writer *w, const char *path) {
    TPM_ARG_CHECK(w && path, "tpm_st_writer_begin: null argument");
    TPM_ARG_CHECK(!w->fp, "tpm_st_writer_begin: a file is already open");
    char *hdr = NULL;
    size_t hlen = 0;
    TPM_TRY(build_header(w, &hdr, &hlen));
    w->path = strdup(path);
    if (!w->path) {
        free(hdr);
        return tpm_err(TPM_ERR_NO_MEMORY, "safetensors writer: out of memory");
    }
    w->fp = fopen(path, "wb");
    if (!w->fp) {
        tpm_status st = tpm_err(TPM_ERR_IO, "safetensors %s: cannot create: %s", path, strerror(errno));
        free(hdr);
        free(w->path);
        w->path = NULL;
        return st;
    }
    w->cur = 0;
    w->cur_done = 0;
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    tpm_status st = write_bytes(w, lenbuf, 8);
    if (st == TPM_OK) st = write_bytes(w, hdr, hlen);
    free(hdr);
    if (st == TPM_OK) st = flush_owned(w);
    if (st != TPM_OK) abort_file(w);
    return st;
}

tpm_status tpm_st_writer_put(tpm_st_writer *w, const void *data, size_t nbytes) {
    TPM_ARG_CHECK(w && (data || nbytes == 0), "tpm_st_writer_put: null argument");
    TPM_ARG_CHECK(w->fp, "tpm_st_writer_put: no file open (call tpm_st_writer_begin)");
    const uint8_t *p = data;
    while (nbytes) {
        if (w->cur >= w->n) {
            abort_file(w);
            return tpm_err(TPM_ERR_INVALID_ARG, "tpm_st_writer_put: %zu bytes more than the tensors declared",
                           nbytes);
        }
        st_entry *e = &w->e[w->cur];
        size_t take = e->nbytes - w->cur_done;
        if (take > nbytes) take = nbytes;
        tpm_status st = write_bytes(w, p, take);
        if (st != TPM_OK) {
            abort_file(w);
            return st;
        }
        p += take;
        nbytes -= take;
        w->cur_done += take;
        if (w->cur_done == e->nbytes) {
            w->cur++;
            w->cur_done = 0;
            st = flush_owned(w);
            if (st != TPM_OK) {
                abort_file(w);
                return st;
            }
        }
    }
    return TPM_OK;
}

tpm_status tpm_st_writer_end(tpm_st_writer *w) {
    TPM_ARG_CHECK(w, "tpm_st_writer_end: null writer");
    TPM_ARG_CHECK(w->fp, "tpm_st_writer_end: no file open");
    if (w->cur < w->n) {
        tpm_status st = tpm_err(TPM_ERR_INVALID_ARG,
                                "tpm_st_writer_end: tensor '%.200s' has %zu of %zu bytes written",
                                w->e[w->cur].name, w->cur_done, w->e[w->cur].nbytes);
        abort_file(w);
        return st;
    }
    int rc = fclose(w->fp);
    w->fp = NULL;
    if (rc != 0) {
        tpm_status st = tpm_err(TPM_ERR_IO, "safetensors %s: close failed: %s", w->path, strerror(errno));
        remove(w->path);
        free(w->path);
        w->path = NULL;
        return st;
    }
    free(w->path);
    w->path = NULL;
    return TPM_OK;
}

tpm_status tpm_st_writer_write(tpm_st_writer *w, const char *path) {
    TPM_ARG_CHECK(w && path, "tpm_st_writer_write: null argument");
    for (size_t i = 0; i < w->n; i++)
        TPM_ARG_CHECK(w->e[i].data || w->e[i].nbytes == 0,
                      "tpm_st_writer_write: tensor '%.200s' has no data (use begin/put/end)", w->e[i].name);
    TPM_TRY(tpm_st_writer_begin(w, path));
    return tpm_st_writer_end(w);
}
