/*
 * log.c - the library's only output: a callback (default: stderr) gated by a
 * level that TPMOE_LOG_LEVEL sets once, at the first message.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The logger is the one process-wide setting, as in ggml: a message can come
 * from code that has no handle. Guarded by atomics; set it before init. */
static _Atomic(tpm_log_fn) g_log_fn = NULL;
static void *_Atomic g_log_user = NULL;
static atomic_int g_log_level = -1; /* -1: not read from the env yet */

/* The level TPMOE_LOG_LEVEL names; -1 (and warn is used) when it is invalid. */
static int level_from_env(void) {
    const char *s = getenv("TPMOE_LOG_LEVEL");
    if (!s || !*s) return TPM_LOG_WARN;
    static const char *const names[] = {"none", "error", "warn", "info", "debug"};
    for (int i = 0; i < 5; i++)
        if (!strcasecmp(s, names[i])) return i;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0') return s[0] - '0';
    return -1;
}

tpm_log_level tpm_log_get_level(void) {
    int l = atomic_load(&g_log_level);
    if (l < 0) {
        int want = level_from_env();
        int expected = -1;
        if (atomic_compare_exchange_strong(&g_log_level, &expected, want < 0 ? TPM_LOG_WARN : want) &&
            want < 0) /* said once, through the logger (the level is set now: no recursion) */
            tpm_log(TPM_LOG_WARN,
                    "TPMOE_LOG_LEVEL='%s' is invalid (accepted: none, error, warn, info, debug or "
                    "0..4); using warn",
                    getenv("TPMOE_LOG_LEVEL"));
        l = atomic_load(&g_log_level);
    }
    return (tpm_log_level)l;
}

void tpm_log_set_level(tpm_log_level level) {
    if ((int)level < TPM_LOG_NONE) level = TPM_LOG_NONE;
    if ((int)level > TPM_LOG_DEBUG) level = TPM_LOG_DEBUG;
    atomic_store(&g_log_level, (int)level);
}

void tpm_log_set(tpm_log_fn fn, void *user) {
    atomic_store(&g_log_user, user);
    atomic_store(&g_log_fn, fn);
}

void tpm_log(tpm_log_level level, const char *fmt, ...) {
    if (level == TPM_LOG_NONE || (int)level > (int)tpm_log_get_level()) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tpm_log_fn fn = atomic_load(&g_log_fn);
    if (fn) {
        fn(level, buf, atomic_load(&g_log_user));
        return;
    }
    static const char *const tags[] = {"", "error", "warn", "info", "debug"};
    fprintf(stderr, "tpmoe %s: %s\n", tags[level], buf);
}
