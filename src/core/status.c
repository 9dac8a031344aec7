/*
 * status.c - status strings, the per-thread error message, small utilities
 * (clock, hash, number parsing) and the enum names of the public API.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static _Thread_local char tls_err[TPM_ERRMSG_LEN];

const char *tpm_status_string(tpm_status s) {
    switch (s) {
    case TPM_OK: return "ok";
    case TPM_ERR_INVALID_ARG: return "invalid argument";
    case TPM_ERR_UNSUPPORTED: return "unsupported";
    case TPM_ERR_NO_MEMORY: return "out of memory";
    case TPM_ERR_TIMEOUT: return "timeout";
    case TPM_ERR_PEER: return "peer failure";
    case TPM_ERR_MISMATCH: return "rank mismatch";
    case TPM_ERR_SYSTEM: return "system error";
    case TPM_ERR_CUDA: return "CUDA error";
    case TPM_ERR_NCCL: return "NCCL error";
    case TPM_ERR_IO: return "I/O or format error";
    case TPM_ERR_CONFIG: return "invalid configuration";
    case TPM_ERR_INTERNAL: return "internal error";
    default: return "unknown status";
    }
}

tpm_status tpm_err(tpm_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_err, sizeof tls_err, fmt, ap);
    va_end(ap);
    tpm_log(TPM_LOG_DEBUG, "error (%s): %s", tpm_status_string(s), tls_err);
    return s;
}

const char *tpm_err_msg(void) { return tls_err; }
void tpm_err_clear(void) { tls_err[0] = '\0'; }
const char *tpm_last_error(void) { return tls_err; }

uint64_t tpm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double tpm_now_s(void) { return (double)tpm_now_ns() * 1e-9; }

uint64_t tpm_hash64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int tpm_parse_i64(const char *s, int64_t *out) {
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10); /* decimal: "010" is ten, not eight */
    if (errno || end == s || *end) return -1;
    *out = (int64_t)v;
    return 0;
}

int tpm_parse_size(const char *s, int64_t *out) {
    if (!s || !*s) return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0)) return -1; /* also rejects NaN */
    double mul = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mul = 1024.0; break;
        case 'M': mul = 1024.0 * 1024; break;
        case 'G': mul = 1024.0 * 1024 * 1024; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I') end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end) return -1;
    }
    double r = v * mul;
    if (r > 9.0e18) return -1;
    *out = (int64_t)r;
    if ((double)*out != r) return -1; /* fractional bytes */
    return 0;
}

/* MARK: enum names */
static const char *const dtype_names[] = {"bf16", "fp16", "fp32"};
static const char *const codec_names[] = {"none", "int8", "int6", "int4", "fp8", "int4_h", "int6_h"};
static const char *const algo_names[] = {"auto", "oneshot", "twoshot", "nccl"};

const char *tpm_dtype_name(tpm_dtype t) {
    return ((unsigned)t < TPM_DTYPE_COUNT_) ? dtype_names[t] : "invalid";
}

size_t tpm_dtype_size(tpm_dtype t) {
    switch (t) {
    case TPM_DTYPE_BF16:
    case TPM_DTYPE_FP16: return 2;
    case TPM_DTYPE_FP32: return 4;
    default: return 0;
    }
}

const char *tpm_codec_name(tpm_codec c) {
    if (c == TPM_CODEC_DEFAULT) return "default";
    return ((unsigned)c < TPM_CODEC_COUNT_) ? codec_names[c] : "invalid";
}

const char *tpm_algo_name(tpm_algo a) {
    return ((unsigned)a < TPM_ALGO_COUNT_) ? algo_names[a] : "invalid";
}

tpm_status tpm_codec_parse(const char *s, tpm_codec *out) {
    TPM_ARG_CHECK(s && out, "tpm_codec_parse: null argument");
    for (int i = 0; i < TPM_CODEC_COUNT_; i++)
        if (!strcasecmp(s, codec_names[i])) {
            *out = (tpm_codec)i;
            return TPM_OK;
        }
    if (!strcasecmp(s, "fp8_e4m3") || !strcasecmp(s, "e4m3")) {
        *out = TPM_CODEC_FP8;
        return TPM_OK;
    }
    return tpm_err(TPM_ERR_INVALID_ARG,
                   "unknown codec '%s' (accepted: NONE, INT8, INT6, INT4, FP8, INT4_H, INT6_H)", s);
}

tpm_status tpm_dtype_parse(const char *s, tpm_dtype *out) {
    TPM_ARG_CHECK(s && out, "tpm_dtype_parse: null argument");
    for (int i = 0; i < TPM_DTYPE_COUNT_; i++)
        if (!strcasecmp(s, dtype_names[i])) {
            *out = (tpm_dtype)i;
            return TPM_OK;
        }
    if (!strcasecmp(s, "bfloat16")) { *out = TPM_DTYPE_BF16; return TPM_OK; }
    if (!strcasecmp(s, "float16") || !strcasecmp(s, "half")) { *out = TPM_DTYPE_FP16; return TPM_OK; }
    if (!strcasecmp(s, "float32") || !strcasecmp(s, "float")) { *out = TPM_DTYPE_FP32; return TPM_OK; }
    return tpm_err(TPM_ERR_INVALID_ARG, "unknown dtype '%s' (accepted: bf16, fp16, fp32)", s);
}
