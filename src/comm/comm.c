/*
 * comm.c - the public communicator API: tpm_comm_* and tpm_allreduce*.
 *
 * Every entry point validates its arguments, so backends never see an invalid
 * one; resolves the configuration once at init (tpm_config_resolve, logged at
 * INFO by rank 0); picks the backend (CPU, or CUDA where built and a GPU
 * exists); plans each call through the dispatch table (dispatch.c) and calls
 * the backend's op. On failure the thread's error message is copied into the
 * handle's last_error (tpm_comm_last_error); without a handle it stays in
 * tpm_last_error().
 */
#include "comm_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMM_MAX_WORLD TPM_MAX_WORLD /* tpm_comm_init; init_all: TPM_MAX_LOCAL_WORLD */
#define COMM_REPORT_LEN 8192

static tpm_status comm_status(struct tpm_comm *c, tpm_status st) {
    if (c && st != TPM_OK) snprintf(c->last_error, sizeof c->last_error, "%s", tpm_err_msg());
    return st;
}

/* MARK: config */
static tpm_status check_config(const tpm_config *cfg, const char *fn) {
    TPM_ARG_CHECK(
        cfg->struct_size == sizeof(tpm_config),
        "%s: cfg->struct_size is %u, this library expects %zu (initialize the config with "
        "TPM_CONFIG_INIT and build against the matching tpmoe.h)",
        fn, cfg->struct_size, sizeof(tpm_config));
    TPM_ARG_CHECK(cfg->version == TPM_CONFIG_VERSION,
                  "%s: cfg->version is %u, this library expects %u (TPM_CONFIG_INIT)", fn,
                  cfg->version, TPM_CONFIG_VERSION);
    TPM_ARG_CHECK((unsigned)cfg->backend < TPM_BACKEND_COUNT_,
                  "%s: cfg->backend %d is out of range", fn, (int)cfg->backend);
    TPM_ARG_CHECK(cfg->world_size == -1 ||
                      (cfg->world_size >= 1 && cfg->world_size <= COMM_MAX_WORLD),
                  "%s: world size %d is out of range (1..%d, or -1 for TPMOE_WORLD_SIZE)", fn,
                  (int)cfg->world_size, COMM_MAX_WORLD);
    TPM_ARG_CHECK(cfg->rank >= -1, "%s: rank %d is negative", fn, (int)cfg->rank);
    TPM_ARG_CHECK(cfg->world_size == -1 || cfg->rank < cfg->world_size,
                  "%s: rank %d is not below the world size %d", fn, (int)cfg->rank,
                  (int)cfg->world_size);
    TPM_ARG_CHECK(cfg->allreduce >= TPM_AR_UNSET && cfg->allreduce <= TPM_AR_NCCL,
                  "%s: cfg->allreduce %d is out of range", fn, (int)cfg->allreduce);
    TPM_ARG_CHECK(cfg->codec == TPM_CODEC_DEFAULT || (unsigned)cfg->codec < TPM_CODEC_COUNT_,
                  "%s: cfg->codec %d is out of range", fn, (int)cfg->codec);
    TPM_ARG_CHECK((unsigned)cfg->algo < TPM_ALGO_COUNT_, "%s: cfg->algo %d is out of range", fn,
                  (int)cfg->algo);
    TPM_ARG_CHECK((unsigned)cfg->dtype < TPM_DTYPE_COUNT_, "%s: cfg->dtype %d is out of range", fn,
                  (int)cfg->dtype);
    return TPM_OK;
}

/* Log the resolution report line by line (the logger truncates long lines). */
static void log_report(const char *report) {
    if (tpm_log_get_level() < TPM_LOG_INFO) return;
    const char *p = report;
    while (*p) {
        const char *e = strchr(p, '\n');
        int n = e ? (int)(e - p) : (int)strlen(p);
        if (n > 0) TPM_LOG_I("config: %.*s", n, p);
        p += n + (e ? 1 : 0);
    }
}

static tpm_status resolve(const tpm_config *cfg, tpm_resolved_config *rc, int log, const char *fn) {
    char *report = log ? malloc(COMM_REPORT_LEN) : NULL;
    if (report) report[0] = '\0';
    tpm_status st = tpm_config_resolve(cfg, rc, report, report ? COMM_REPORT_LEN : 0);
    if (st == TPM_OK && (rc->world_size < 1 || rc->world_size > COMM_MAX_WORLD))
        st = tpm_err(TPM_ERR_INVALID_ARG, "%s: world size %d is out of range (1..%d)", fn,
                     (int)rc->world_size, COMM_MAX_WORLD);
    if (st == TPM_OK && (rc->rank < 0 || rc->rank >= rc->world_size))
        st = tpm_err(TPM_ERR_INVALID_ARG, "%s: rank %d is out of range for world size %d", fn,
                     (int)rc->rank, (int)rc->world_size);
    if (st == TPM_OK && report && rc->rank == 0) log_report(report);
    free(report);
    return st;
}

static tpm_status pick_backend(const tpm_resolved_config *rc, tpm_backend *out) {
    switch (rc->backend) {
    case TPM_BACKEND_CPU:
        *out = TPM_BACKEND_CPU;
        return TPM_OK;
    case TPM_BACKEND_CUDA:
#ifdef TPMOE_HAVE_CUDA
        if (tpm_cuda_device_count() > 0) {
            *out = TPM_BACKEND_CUDA;
            return TPM_OK;
        }
        return tpm_err(TPM_ERR_UNSUPPORTED, "backend cuda: no CUDA device is visible");
#else
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "backend cuda: this build has no CUDA backend (TPMOE_CUDA=OFF)");
#endif
    default:
#ifdef TPMOE_HAVE_CUDA
        *out = tpm_cuda_device_count() > 0 ? TPM_BACKEND_CUDA : TPM_BACKEND_CPU;
#else
        *out = TPM_BACKEND_CPU;
#endif
        return TPM_OK;
    }
}

/* MARK: init / destroy */
TPM_API tpm_status tpm_comm_init(tpm_comm_t *comm, const tpm_config *cfg) {
    TPM_ARG_CHECK(comm, "tpm_comm_init: comm is NULL");
    *comm = NULL;
    tpm_config defaults = TPM_CONFIG_INIT;
    if (!cfg) cfg = &defaults;
    TPM_TRY(check_config(cfg, "tpm_comm_init"));
    tpm_resolved_config rc;
    TPM_TRY(resolve(cfg, &rc, 1, "tpm_comm_init"));
    tpm_backend be = TPM_BACKEND_CPU;
    TPM_TRY(pick_backend(&rc, &be));
    TPM_ARG_CHECK(be != TPM_BACKEND_CPU || (rc.world_size <= TPM_MAX_LOCAL_WORLD && !tpm_rendezvous_is_tcp(rc.rendezvous)),
                  "tpm_comm_init: the CPU backend runs on one node (at most %d ranks, a rendezvous directory); "
                  "world %d, rendezvous '%s' need the CUDA backend", TPM_MAX_LOCAL_WORLD, (int)rc.world_size,
                  rc.rendezvous);
    struct tpm_comm *c = calloc(1, sizeof *c);
    if (!c) return tpm_err(TPM_ERR_NO_MEMORY, "tpm_comm_init: out of memory");
    c->cfg = rc;
    c->cfg.backend = be;
    c->rank = rc.rank;
    c->world = rc.world_size;
    c->nccl_comm = cfg->nccl_comm;
    tpm_status st;
#ifdef TPMOE_HAVE_CUDA
    if (be == TPM_BACKEND_CUDA)
        st = tpm_cuda_comm_init(c);
    else
#endif
        st = tpm_cpu_comm_init(c);
    if (st != TPM_OK) {
        free(c);
        return st;
    }
    TPM_LOG_D("rank %d/%d: communicator up (%s)", c->rank, c->world, c->ops->name);
    *comm = c;
    return TPM_OK;
}

TPM_API tpm_status tpm_comm_init_all(tpm_comm_t *comms, int n, const int *devices,
                                     const tpm_config *cfg) {
    TPM_ARG_CHECK(comms, "tpm_comm_init_all: comms is NULL");
    TPM_ARG_CHECK(n >= 1 && n <= TPM_MAX_LOCAL_WORLD,
                  "tpm_comm_init_all: n = %d is out of range (1..%d)", n, TPM_MAX_LOCAL_WORLD);
    for (int i = 0; i < n; i++)
        comms[i] = NULL;
    tpm_config local = TPM_CONFIG_INIT;
    if (cfg) {
        TPM_TRY(check_config(cfg, "tpm_comm_init_all"));
        TPM_ARG_CHECK(cfg->world_size == -1 || cfg->world_size == n,
                      "tpm_comm_init_all: cfg->world_size %d differs from n = %d",
                      (int)cfg->world_size, n);
        local = *cfg;
    }
    local.world_size = n;
    local.rank = 0;
    tpm_resolved_config rc;
    TPM_TRY(resolve(&local, &rc, 1, "tpm_comm_init_all"));
    tpm_backend be = TPM_BACKEND_CPU;
    TPM_TRY(pick_backend(&rc, &be));
    struct tpm_comm *cs[TPM_MAX_LOCAL_WORLD] = {0};
    tpm_status st = TPM_OK;
    for (int i = 0; i < n; i++) {
        cs[i] = calloc(1, sizeof *cs[i]);
        if (!cs[i]) {
            st = tpm_err(TPM_ERR_NO_MEMORY, "tpm_comm_init_all: out of memory");
            goto fail;
        }
        cs[i]->cfg = rc;
        cs[i]->cfg.backend = be;
        cs[i]->cfg.rank = i;
        cs[i]->rank = i;
        cs[i]->world = n;
        cs[i]->nccl_comm = cfg ? cfg->nccl_comm : NULL;
    }
#ifdef TPMOE_HAVE_CUDA
    if (be == TPM_BACKEND_CUDA) {
        st = tpm_cuda_comm_init_all(cs, n, devices); /* sets each rank's cfg.device */
    } else
#endif
        st = tpm_cpu_comm_init_all(cs, n);
    (void)devices; /* the CPU backend has no devices */
    if (st != TPM_OK) goto fail;
    for (int i = 0; i < n; i++)
        comms[i] = cs[i];
    return TPM_OK;
fail:
    for (int i = 0; i < n; i++)
        free(cs[i]);
    return st;
}

TPM_API tpm_status tpm_comm_destroy(tpm_comm_t comm) {
    TPM_ARG_CHECK(comm, "tpm_comm_destroy: comm is NULL");
    if (comm->ops && comm->ops->destroy) comm->ops->destroy(comm);
    free(comm);
    return TPM_OK;
}

/* MARK: queries */
TPM_API tpm_status tpm_comm_rank(tpm_comm_t comm, int *rank) {
    TPM_ARG_CHECK(comm, "tpm_comm_rank: comm is NULL");
    if (!rank)
        return comm_status(comm, tpm_err(TPM_ERR_INVALID_ARG, "tpm_comm_rank: rank is NULL"));
    *rank = comm->rank;
    return TPM_OK;
}

TPM_API tpm_status tpm_comm_world_size(tpm_comm_t comm, int *world) {
    TPM_ARG_CHECK(comm, "tpm_comm_world_size: comm is NULL");
    if (!world)
        return comm_status(comm,
                           tpm_err(TPM_ERR_INVALID_ARG, "tpm_comm_world_size: world is NULL"));
    *world = comm->world;
    return TPM_OK;
}

TPM_API tpm_status tpm_comm_get_config(tpm_comm_t comm, tpm_resolved_config *out) {
    TPM_ARG_CHECK(comm, "tpm_comm_get_config: comm is NULL");
    if (!out)
        return comm_status(comm, tpm_err(TPM_ERR_INVALID_ARG, "tpm_comm_get_config: out is NULL"));
    *out = comm->cfg;
    return TPM_OK;
}

TPM_API tpm_status tpm_comm_get_async_error(tpm_comm_t comm) {
    TPM_ARG_CHECK(comm, "tpm_comm_get_async_error: comm is NULL");
    if (!comm->ops || !comm->ops->poll) return TPM_OK;
    return comm_status(comm, comm->ops->poll(comm));
}

TPM_API const char *tpm_comm_last_error(tpm_comm_t comm) {
    return comm ? comm->last_error : "tpm_comm_last_error: comm is NULL";
}

/* MARK: all-reduce */
static tpm_status check_call(const char *fn, size_t count, tpm_dtype dtype, tpm_codec codec,
                             tpm_algo algo, size_t *bytes) {
    TPM_ARG_CHECK((unsigned)dtype < TPM_DTYPE_COUNT_,
                  "%s: dtype %d is out of range (bf16, fp16, fp32)", fn, (int)dtype);
    TPM_ARG_CHECK(codec == TPM_CODEC_DEFAULT || (unsigned)codec < TPM_CODEC_COUNT_,
                  "%s: codec %d is out of range", fn, (int)codec);
    TPM_ARG_CHECK((unsigned)algo < TPM_ALGO_COUNT_, "%s: algo %d is out of range", fn, (int)algo);
    size_t es = tpm_dtype_size(dtype);
    TPM_ARG_CHECK(count <= (size_t)INT64_MAX / es, "%s: count %zu of %s overflows the byte size",
                  fn, count, tpm_dtype_name(dtype));
    *bytes = count * es;
    return TPM_OK;
}

static int nccl_available(const struct tpm_comm *c) {
    /* The CUDA backend falls back to NCCL (unless its ranks share a GPU); the CPU backend
     * has none. */
    return c->cfg.backend == TPM_BACKEND_CUDA && !c->no_nccl;
}

static tpm_status allreduce_impl(struct tpm_comm *c, const void *in, void *out, size_t count,
                                 tpm_dtype dtype, tpm_codec codec, tpm_algo algo, void *stream) {
    size_t bytes = 0;
    TPM_TRY(check_call("tpm_allreduce", count, dtype, codec, algo, &bytes));
    if (count == 0) return TPM_OK;
    TPM_ARG_CHECK(in && out, "tpm_allreduce: %s is NULL", !in ? "in" : "out");
    tpm_algo a;
    tpm_codec cd;
    TPM_TRY(tpm_dispatch_plan(&c->cfg, c->cfg.backend, c->world, bytes, dtype, codec, algo,
                              nccl_available(c), &a, &cd));
    if (c->nccl_only) a = TPM_ALGO_NCCL, cd = TPM_CODEC_NONE;
    return c->ops->allreduce(c, in, out, count, dtype, cd, a, stream);
}

TPM_API tpm_status tpm_allreduce_ex(tpm_comm_t comm, const void *in, void *out, size_t count,
                                    tpm_dtype dtype, tpm_codec codec, tpm_algo algo, void *stream) {
    TPM_ARG_CHECK(comm, "tpm_allreduce: comm is NULL");
    return comm_status(comm, allreduce_impl(comm, in, out, count, dtype, codec, algo, stream));
}

TPM_API tpm_status tpm_allreduce(tpm_comm_t comm, const void *in, void *out, size_t count,
                                 tpm_dtype dtype, void *stream) {
    return tpm_allreduce_ex(comm, in, out, count, dtype, TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, stream);
}

static tpm_status plan_impl(struct tpm_comm *c, size_t count, tpm_dtype dtype, tpm_codec codec,
                            tpm_algo *algo_out, tpm_codec *codec_out) {
    TPM_ARG_CHECK(algo_out && codec_out, "tpm_allreduce_plan: %s is NULL",
                  !algo_out ? "algo_out" : "codec_out");
    size_t bytes = 0;
    TPM_TRY(check_call("tpm_allreduce_plan", count, dtype, codec, TPM_ALGO_AUTO, &bytes));
    TPM_TRY(tpm_dispatch_plan(&c->cfg, c->cfg.backend, c->world, bytes, dtype, codec, TPM_ALGO_AUTO,
                              nccl_available(c), algo_out, codec_out));
    if (c->nccl_only) *algo_out = TPM_ALGO_NCCL, *codec_out = TPM_CODEC_NONE;
    return TPM_OK;
}

TPM_API tpm_status tpm_allreduce_plan(tpm_comm_t comm, size_t count, tpm_dtype dtype,
                                      tpm_codec codec, tpm_algo *algo_out, tpm_codec *codec_out) {
    TPM_ARG_CHECK(comm, "tpm_allreduce_plan: comm is NULL");
    return comm_status(comm, plan_impl(comm, count, dtype, codec, algo_out, codec_out));
}
