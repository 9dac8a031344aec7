/*
 * internal.h - helpers shared by every part of the library (not installed).
 *
 * Error handling: internal functions return tpm_status and record a message
 * with tpm_err(); public entry points copy it into the handle's last-error
 * buffer (or the thread-local one when there is no handle). Check macros
 * jump to a `fail:` label for cleanup, NCCL style.
 */
#ifndef TPM_INTERNAL_H
#define TPM_INTERNAL_H

#include "tpmoe.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPM_ERRMSG_LEN 512

/* Record a formatted error message for the calling thread and return s. */
tpm_status tpm_err(tpm_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last recorded message. */
const char *tpm_err_msg(void);
void tpm_err_clear(void);

/* Logging through the user's callback (or stderr), gated by the level. */
void tpm_log(tpm_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define TPM_LOG_E(...) tpm_log(TPM_LOG_ERROR, __VA_ARGS__)
#define TPM_LOG_W(...) tpm_log(TPM_LOG_WARN, __VA_ARGS__)
#define TPM_LOG_I(...) tpm_log(TPM_LOG_INFO, __VA_ARGS__)
#define TPM_LOG_D(...) tpm_log(TPM_LOG_DEBUG, __VA_ARGS__)

/* Argument check: on failure record the message and return. */
#define TPM_ARG_CHECK(cond, ...)                                               \
    do {                                                                       \
        if (!(cond)) return tpm_err(TPM_ERR_INVALID_ARG, __VA_ARGS__);         \
    } while (0)

/* Propagate a status (message already recorded by the callee). */
#define TPM_TRY(expr)                                                          \
    do {                                                                       \
        tpm_status tpm_try_s_ = (expr);                                        \
        if (tpm_try_s_ != TPM_OK) return tpm_try_s_;                           \
    } while (0)

/* Propagate to a `fail:` label; the status lands in `st`. */
#define TPM_TRY_GOTO(expr)                                                     \
    do {                                                                       \
        st = (expr);                                                           \
        if (st != TPM_OK) goto fail;                                           \
    } while (0)

/* Internal invariant: never for user input. */
#define TPM_ASSERT(cond)                                                       \
    do {                                                                       \
        if (!(cond))                                                           \
            return tpm_err(TPM_ERR_INTERNAL, "internal invariant failed: %s (%s:%d)", #cond, \
                           __FILE__, __LINE__);                                \
    } while (0)

/* Monotonic clock in nanoseconds / seconds. */
uint64_t tpm_now_ns(void);
double tpm_now_s(void);

/* 64-bit FNV-1a, for config hashes. */
uint64_t tpm_hash64(uint64_t h, const void *data, size_t n);
#define TPM_HASH_SEED 0xcbf29ce484222325ull

/* Parse helpers used by the environment reader and the CLI. Return 0 on
 * success. Sizes accept K/M/G suffixes (powers of 1024). */
int tpm_parse_i64(const char *s, int64_t *out);
int tpm_parse_size(const char *s, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif /* TPM_INTERNAL_H */
