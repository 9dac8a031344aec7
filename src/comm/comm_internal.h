/*
 * comm_internal.h - the communicator object shared by the CPU and CUDA
 * backends (not installed).
 *
 * src/comm/comm.c owns the public tpm_comm_* / tpm_allreduce* entry points:
 * it validates arguments, resolves the plan (algorithm, codec) through the
 * dispatch table, and calls the backend's ops. Backends never see an
 * invalid argument. Every public call copies the thread's error message into
 * comm->last_error on failure.
 */
#ifndef TPM_COMM_INTERNAL_H
#define TPM_COMM_INTERNAL_H

#include "internal.h"
#include "tpmoe.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tpm_comm;

typedef struct tpm_comm_ops {
    const char *name; /* "cpu-threads", "cpu-shm", "cuda" */
    /* algo is ONESHOT, TWOSHOT or NCCL; codec already reduced by the
     * min/max size rule. in/out may alias. */
    tpm_status (*allreduce)(struct tpm_comm *c, const void *in, void *out, size_t count,
                            tpm_dtype dt, tpm_codec codec, tpm_algo algo, void *stream);
    void (*destroy)(struct tpm_comm *c);
} tpm_comm_ops;

struct tpm_comm {
    const tpm_comm_ops *ops;
    tpm_resolved_config cfg;
    int rank, world;
    char last_error[TPM_ERRMSG_LEN];
    void *impl; /* backend state */
};

/* Dispatch (src/comm/dispatch.c): one table of measured thresholds per
 * (backend, world, dtype, codec). */
typedef struct tpm_dispatch_entry {
    tpm_backend backend;
    int world;          /* 0: any */
    tpm_dtype dtype;    /* TPM_DTYPE_COUNT_: any */
    tpm_codec codec;    /* TPM_CODEC_DEFAULT: any */
    int64_t oneshot_max_bytes; /* <=: one-shot (exact only) */
    int64_t custom_max_bytes;  /* >: NCCL (CUDA); -1: no limit */
    const char *source;        /* where the numbers come from (bench run) */
} tpm_dispatch_entry;
/* custom_max_bytes value meaning "the peer buffer" (cfg->buffer_bytes). */
#define TPM_DISPATCH_PEER_BUFFER (-2)

/* Plan one call: applies the codec min/max rule, the one-shot/two-shot/NCCL
 * thresholds (env TPMOE_ONESHOT_MAX_BYTES / TPMOE_CUSTOM_MAX_BYTES override),
 * the peer-buffer size and the backend's capabilities. */
tpm_status tpm_dispatch_plan(const tpm_resolved_config *cfg, tpm_backend backend, int world,
                             size_t bytes, tpm_dtype dt, tpm_codec codec_req, tpm_algo algo_req,
                             int nccl_available, tpm_algo *algo, tpm_codec *codec);
/* Human-readable table for `tpmoe config` (writes at most len bytes). */
void tpm_dispatch_describe(const tpm_resolved_config *cfg, char *buf, size_t len);

/* Backend constructors. cfg is already resolved. */
tpm_status tpm_cpu_comm_init(struct tpm_comm *c);                       /* one rank, processes */
tpm_status tpm_cpu_comm_init_all(struct tpm_comm **comms, int n);        /* n ranks, threads */
#ifdef TPMOE_HAVE_CUDA
tpm_status tpm_cuda_comm_init(struct tpm_comm *c);
tpm_status tpm_cuda_comm_init_all(struct tpm_comm **comms, int n, const int *devices);
int tpm_cuda_device_count(void); /* 0 when no GPU/driver */
#endif

#ifdef __cplusplus
}
#endif
#endif /* TPM_COMM_INTERNAL_H */
