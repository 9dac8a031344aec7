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
    *boot = c;
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
    for (int i = 0; i < n; i++) {
        if (st == TPM_OK)
            boots[i] = cs[i];
        else
            free(cs[i]);
    }
    return st;
}

tpm_status tpm_cpu_bootstrap_allgather(void *boot, const void *in, size_t bytes, void *out) {
    TPM_ARG_CHECK(boot, "tpm_cpu_bootstrap_allgather: boot is NULL");
    return tpm_cpu_comm_allgather((struct tpm_comm *)boot, in, bytes, out);
}

tpm_status tpm_cpu_bootstrap_barrier(void *boot) {
    TPM_ARG_CHECK(boot, "tpm_cpu_bootstrap_barrier: boot is NULL");
    return tpm_cpu_comm_barrier((struct tpm_comm *)boot);
}

void tpm_cpu_bootstrap_abort(void *boot, const char *msg) {
    if (boot) tpm_cpu_comm_abort((struct tpm_comm *)boot, msg);
}

void tpm_cpu_bootstrap_destroy(void *boot) {
    struct tpm_comm *c = (struct tpm_comm *)boot;
    if (!c) return;
    if (c->ops && c->ops->destroy) c->ops->destroy(c);
    free(c);
}
