/* test_proc.c - see test_proc.h. */
#include "util/test_proc.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

char *tu_mkdtemp(char *buf, size_t len, const char *tag) {
    int n = snprintf(buf, len, "/tmp/tpmoe-%s-XXXXXX", tag);
    if (n < 0 || (size_t)n >= len) return NULL;
    return mkdtemp(buf);
}

int tu_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

void *tu_shared_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void tu_shared_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes);
}

int tu_spawn(int n, void (*child)(const void *arg, int i), const void *arg, pid_t *pids) {
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) return -1;
        if (p == 0) {
            child(arg, i);
            _exit(0);
        }
        pids[i] = p;
    }
    return 0;
}

int tu_reap(const pid_t *pids, int n, int last) {
    int rc = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            if ((i == last) != (pass == 1)) continue;
            int ws;
            if (waitpid(pids[i], &ws, 0) != pids[i]) rc = -1;
        }
    return rc;
}

tpm_config tu_cpu_config(int rank, int world, const char *dir, int timeout_ms) {
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.rank = rank;
    cfg.world_size = world;
    cfg.rendezvous = dir;
    cfg.timeout_ms = timeout_ms;
    return cfg;
}
