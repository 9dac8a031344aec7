/*
 * cpu_boot.c - the bootstrap: a small CPU communicator that exchanges bytes
 * between the ranks of a communicator before its backend exists (the CUDA
 * backend's one-process-per-GPU init swaps cudaIpcMemHandle_t's and the NCCL
 * unique id through it).
 *
 * A bootstrap handle is a struct tpm_comm of the CPU backend with
 * buffer_bytes = TPM_CPU_BOOT_BUFFER: processes rendezvous through
 * tpm_cpu_shm_init on <dir>/boot (cpu_shm.c: same directory checks,
 * handshake and timeouts as tpm_comm_init, which uses <dir>/sock), threads
 * share a private arena (tpm_cpu_comm_init_all). The all-gather and barrier
 * are the CPU comm's (cpu_comm.c), so waits, dead-peer detection and aborts
 * behave as in the all-reduce.
 */
#include "cpu_comm.h"

#include <stdlib.h>
#include <string.h>

/* A bootstrap handle: the directory bootstrap's CPU comm, or the TCP star (tcp_boot.c) when
 * the rendezvous is tcp://HOST:PORT. */
typedef struct boot_h {
    struct tpm_comm *cpu;
    tpm_tcp_boot *tcp;
} boot_h;

static void *wrap(struct tpm_comm *cpu, tpm_tcp_boot *tcp) {
    boot_h *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->cpu = cpu;
    h->tcp = tcp;
    return h;
}

static void destroy_cpu(struct tpm_comm *c) {
    if (!c) return;
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}

static tpm_status check_cfg(const tpm_resolved_config *cfg, int world, const char *fn) {
    TPM_ARG_CHECK(cfg, "%s: cfg is NULL", fn);
    TPM_ARG_CHECK(world >= 1 && world <= TPM_CPU_MAX_WORLD,
                  "%s: world size %d is out of range (1..%d)", fn, world, TPM_CPU_MAX_WORLD);
    TPM_ARG_CHECK(memchr(cfg->rendezvous, '\0', sizeof cfg->rendezvous),
                  "%s: cfg->rendezvous is not NUL-terminated", fn);
    return TPM_OK;
}

static struct tpm_comm *boot_alloc(const tpm_resolved_config *cfg, int rank, int world) {
    struct tpm_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg; /* the hash stays: the handshake compares the callers' configs */
    c->cfg.buffer_bytes = TPM_CPU_BOOT_BUFFER;
    c->cfg.rank = rank;
    c->cfg.world_size = world;
    c->rank = rank;
    c->world = world;
    return c;
}

tpm_status tpm_cpu_bootstrap_init(const tpm_resolved_config *cfg, void **boot) {
    TPM_ARG_CHECK(boot, "tpm_cpu_bootstrap_init: boot is NULL");
    *boot = NULL;
    TPM_ARG_CHECK(cfg, "tpm_cpu_bootstrap_init: cfg is NULL");
    TPM_ARG_CHECK(memchr(cfg->rendezvous, '\0', sizeof cfg->rendezvous),
                  "tpm_cpu_bootstrap_init: cfg->rendezvous is not NUL-terminated");
    if (tpm_rendezvous_is_tcp(cfg->rendezvous)) {
        tpm_tcp_boot *t = NULL;
        TPM_TRY(tpm_tcp_boot_init(cfg, &t));
        if (!(*boot = wrap(NULL, t))) {
            tpm_tcp_boot_destroy(t);
            return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cpu_bootstrap_init: out of memory");
        }
        return TPM_OK;
    }
    TPM_TRY(check_cfg(cfg, cfg ? cfg->world_size : 0, "tpm_cpu_bootstrap_init"));
    TPM_ARG_CHECK(cfg->rank >= 0 && cfg->rank < cfg->world_size,
                  "tpm_cpu_bootstrap_init: rank %d is out of range for world size %d",
                  (int)cfg->rank, (int)cfg->world_size);
    struct tpm_comm *c = boot_alloc(cfg, cfg->rank, cfg->world_size);
    if (!c) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cpu_bootstrap_init: out of memory");
    tpm_status st;
    if (c->world == 1) {
        struct tpm_comm *one[1] = {c};
        st = tpm_cpu_comm_init_all(one, 1);
    } else {
        st = tpm_cpu_shm_init(c, "boot");
    }
    if (st != TPM_OK) {
        free(c);
        return st;
    }
    if (!(*boot = wrap(c, NULL))) {
        destroy_cpu(c);
        return tpm_err(TPM_ERR_NO_MEMORY, "tpm_cpu_bootstrap_init: out of memory");
    }
    return TPM_OK;
}

tpm_status tpm_cpu_bootstrap_init_all(const tpm_resolved_config *cfg, int n, void **boots) {
    TPM_ARG_CHECK(boots, "tpm_cpu_bootstrap_init_all: boots is NULL");
    TPM_TRY(check_cfg(cfg, n, "tpm_cpu_bootstrap_init_all"));
    struct tpm_comm *cs[TPM_CPU_MAX_WORLD] = {0};
    tpm_status st = TPM_OK;
    for (int i = 0; i < n; i++) {
        boots[i] = NULL;
        cs[i] = boot_alloc(cfg, i, n);
        if (!cs[i]) st = tpm_err(TPM_ERR_NO_MEMORY, "tpm_cpu_bootstrap_init_all: out of memory");
    }
    if (st == TPM_OK) st = tpm_cpu_comm_init_all(cs, n);
    for (int i = 0; i < n && st == TPM_OK; i++)
        if (!(boots[i] = wrap(cs[i], NULL))) st = tpm_err(TPM_ERR_NO_MEMORY, "tpm_cpu_bootstrap_init_all: out of memory");
    if (st != TPM_OK) {
        int inited = cs[0] && cs[0]->ops;
        for (int i = 0; i < n; i++) {
            free(boots[i]);
            boots[i] = NULL;
            if (inited) destroy_cpu(cs[i]);
            else free(cs[i]);
        }
    }
    return st;
}

tpm_status tpm_cpu_bootstrap_allgather(void *boot, const void *in, size_t bytes, void *out) {
    TPM_ARG_CHECK(boot, "tpm_cpu_bootstrap_allgather: boot is NULL");
    boot_h *h = (boot_h *)boot;
    return h->tcp ? tpm_tcp_boot_allgather(h->tcp, in, bytes, out) : tpm_cpu_comm_allgather(h->cpu, in, bytes, out);
}

tpm_status tpm_cpu_bootstrap_barrier(void *boot) {
    TPM_ARG_CHECK(boot, "tpm_cpu_bootstrap_barrier: boot is NULL");
    boot_h *h = (boot_h *)boot;
    return h->tcp ? tpm_tcp_boot_barrier(h->tcp) : tpm_cpu_comm_barrier(h->cpu);
}

void tpm_cpu_bootstrap_abort(void *boot, const char *msg) {
    boot_h *h = (boot_h *)boot;
    if (!h) return;
    if (h->tcp) tpm_tcp_boot_abort(h->tcp, msg);
    else tpm_cpu_comm_abort(h->cpu, msg);
}

void tpm_cpu_bootstrap_destroy(void *boot) {
    boot_h *h = (boot_h *)boot;
    if (!h) return;
    if (h->tcp) tpm_tcp_boot_destroy(h->tcp);
    else destroy_cpu(h->cpu);
    free(h);
}
