/*
 * test_proc.h - helpers for the tests that run ranks as forked processes over
 * a rendezvous directory: a private temporary directory, counting what is
 * left in it, memory shared with the children, fork and reap, and the CPU
 * communicator config of one rank.
 */
#ifndef TPM_TEST_PROC_H
#define TPM_TEST_PROC_H

#include "tpmoe.h"

#include <stddef.h>
#include <sys/types.h>

/* mkdtemp of "/tmp/tpmoe-<tag>-XXXXXX" into buf (mode 0700); returns buf,
 * or NULL on failure. */
char *tu_mkdtemp(char *buf, size_t len, const char *tag);

/* Number of entries in dir besides . and ..; -1 if it cannot be opened. */
int tu_count_entries(const char *dir);

/* MAP_SHARED | MAP_ANONYMOUS memory, zeroed, that children forked afterwards
 * share; NULL on failure. */
void *tu_shared_alloc(size_t bytes);
void tu_shared_free(void *p, size_t bytes);

/* Flush stdio, then fork n children; child i runs child(arg, i), which ends
 * with _exit() (the helper _exit(0)s if it returns). Returns 0, or -1 when a
 * fork fails (the children forked before it keep running). */
int tu_spawn(int n, void (*child)(const void *arg, int i), const void *arg, pid_t *pids);

/* waitpid every pids[i], pids[last] after all the others (last -1: in
 * order), so a killed rank stays a zombie while the others look at it.
 * Returns 0 if every wait succeeded. */
int tu_reap(const pid_t *pids, int n, int last);

/* A CPU-backend config for rank of world over the rendezvous directory dir
 * (NULL: none) with the given timeout; everything else is TPM_CONFIG_INIT. */
tpm_config tu_cpu_config(int rank, int world, const char *dir, int timeout_ms);

#endif /* TPM_TEST_PROC_H */
