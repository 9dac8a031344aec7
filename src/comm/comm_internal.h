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
    /* NULL (calls are synchronous, errors already returned) or the error an
     * asynchronous kernel of this communicator recorded (CUDA) */
    tpm_status (*poll)(struct tpm_comm *c);
} tpm_comm_ops;

struct tpm_comm {
    const tpm_comm_ops *ops;
    tpm_resolved_config cfg;
    int rank, world;
    char last_error[TPM_ERRMSG_LEN];
    void *impl; /* backend state */
    /* cfg->nccl_comm as given (not part of the resolved config): an
     * ncclComm_t for tpm_comm_init, an array of n ncclComm_t (rank i at
     * index i) for tpm_comm_init_all; NULL: the CUDA backend creates its own. */
    void *nccl_comm;
    /* set by the CUDA backend when its kernels cannot run (peer-to-peer not proven, or ranks
     * on several nodes): every call and plan is NCCL, exact */
    int nccl_only;
    /* set by the CUDA backend when it has no NCCL (ranks sharing a GPU, TPMOE_CUDA_SHARE_GPU):
     * plans never pick NCCL, an explicit NCCL call is TPM_ERR_UNSUPPORTED */
    int no_nccl;
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
/* All-gather on a CPU comm: every rank contributes `bytes` bytes from in;
 * out (world * bytes) receives them in rank order on every rank. in may be
 * out + rank * bytes (in place); other overlaps are TPM_ERR_INVALID_ARG.
 * bytes == 0 is a no-op (every rank must agree). Any size (chunked through
 * the arena). Waits bounded like the all-reduce: TPM_ERR_TIMEOUT,
 * TPM_ERR_PEER (dead or aborted peer), TPM_ERR_MISMATCH (ranks in different
 * calls / sizes); a failure aborts the comm. Not a CPU comm: INVALID_ARG. */
tpm_status tpm_cpu_comm_allgather(struct tpm_comm *c, const void *in, size_t bytes, void *out);

/* Bootstrap (src/comm/cpu_boot.c): a small CPU communicator (or, with a tcp://
 * rendezvous, the TCP star of tcp_boot.c) for exchanging
 * bytes (CUDA IPC handles, the NCCL unique id) before a backend's buffers
 * exist. Processes: the same rendezvous as tpm_comm_init (cfg->rendezvous
 * directory with its 0700 checks, cfg->rank / world_size, handshake on dtype,
 * codec and config hash, cfg->timeout_ms, dead-peer detection) but on the
 * socket <dir>/boot, so it coexists with a CPU comm (<dir>/sock) over the
 * same directory; one bootstrap init at a time per directory. Its arena is
 * W * 64 KiB whatever cfg->buffer_bytes is. World 1 needs no rendezvous.
 * Each handle is used by one thread. Allgather: as tpm_cpu_comm_allgather.
 * Barrier: all ranks arrive before any returns. destroy(NULL) is a no-op. */
tpm_status tpm_cpu_bootstrap_init(const tpm_resolved_config *cfg, void **boot);
/* n ranks in one process (threads): boots[i] is rank i, driven by its own
 * thread; cfg->rank / world_size / rendezvous are ignored. */
tpm_status tpm_cpu_bootstrap_init_all(const tpm_resolved_config *cfg, int n, void **boots);
tpm_status tpm_cpu_bootstrap_allgather(void *boot, const void *in, size_t bytes, void *out);
tpm_status tpm_cpu_bootstrap_barrier(void *boot);
/* This rank failed outside a bootstrap call (msg says why): the peers'
 * pending and later bootstrap calls fail with TPM_ERR_PEER at once instead
 * of waiting for the timeout. NULL is a no-op. */
void tpm_cpu_bootstrap_abort(void *boot, const char *msg);
void tpm_cpu_bootstrap_destroy(void *boot);

/* The bootstrap over TCP (src/comm/tcp_boot.c), used by tpm_cpu_bootstrap_init when the
 * rendezvous is "tcp://HOST:PORT" (rank 0 listens there): communicators that span nodes.
 * Same contract as the directory bootstrap above (handshake on the config hash, bounded
 * waits, TPM_ERR_PEER for a dead or aborting rank), up to TPM_TCP_MAX_WORLD ranks. */
#define TPM_TCP_MAX_WORLD 256
typedef struct tpm_tcp_boot tpm_tcp_boot;
tpm_status tpm_tcp_boot_init(const tpm_resolved_config *cfg, tpm_tcp_boot **out);
tpm_status tpm_tcp_boot_allgather(tpm_tcp_boot *b, const void *in, size_t bytes, void *out);
tpm_status tpm_tcp_boot_barrier(tpm_tcp_boot *b);
void tpm_tcp_boot_abort(tpm_tcp_boot *b, const char *msg);
void tpm_tcp_boot_destroy(tpm_tcp_boot *b);
/* 1 if the rendezvous string names a TCP endpoint (tcp://...). */
int tpm_rendezvous_is_tcp(const char *rendezvous);

#ifdef TPMOE_HAVE_CUDA
tpm_status tpm_cuda_comm_init(struct tpm_comm *c);
tpm_status tpm_cuda_comm_init_all(struct tpm_comm **comms, int n, const int *devices);
int tpm_cuda_device_count(void); /* 0 when no GPU/driver */
#endif

#ifdef __cplusplus
}
#endif
#endif /* TPM_COMM_INTERNAL_H */
