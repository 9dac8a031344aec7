/*
 * tpmoe.h - the public C API of tpmoe.
 *
 * tpmoe makes tensor-parallel mixture-of-experts serving fast on one node of
 * GPUs: a quick all-reduce over peer memory (exact, or with opt-in
 * block-quantized codecs) and an MoE layer with the shared expert fused into
 * the grouped expert launch. A CPU backend (ranks as threads or processes over
 * shared memory) is the ground truth for every GPU kernel and runs where no
 * GPU exists.
 *
 * Conventions: every call returns a tpm_status; tpm_status_string() names it
 * and tpm_comm_last_error() / tpm_last_error() give the message of the last
 * failure. Handles are opaque. The library never exits and never prints,
 * except through the logging callback.
 */
#ifndef TPMOE_H
#define TPMOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TPM_API
#else
#define TPM_API __attribute__((visibility("default")))
#endif

#define TPM_VERSION_MAJOR 0
#define TPM_VERSION_MINOR 1
#define TPM_VERSION_PATCH 0
/* The config struct layout version; bump when tpm_config changes. */
#define TPM_CONFIG_VERSION 1u

/* MARK: status */
typedef enum tpm_status {
    TPM_OK = 0,
    TPM_ERR_INVALID_ARG = 1,  /* null pointer, bad size, bad enum value */
    TPM_ERR_UNSUPPORTED = 2,  /* valid request this build/backend cannot do */
    TPM_ERR_NO_MEMORY = 3,
    TPM_ERR_TIMEOUT = 4,      /* a bounded wait ran out (TPMOE_TIMEOUT_MS) */
    TPM_ERR_PEER = 5,         /* a peer died, aborted or disconnected */
    TPM_ERR_MISMATCH = 6,     /* ranks disagree (handshake or per-call args) */
    TPM_ERR_SYSTEM = 7,       /* an OS call failed (errno in the message) */
    TPM_ERR_CUDA = 8,
    TPM_ERR_NCCL = 9,
    TPM_ERR_IO = 10,          /* file read/parse (weights, tensors) */
    TPM_ERR_CONFIG = 11,      /* invalid environment or config value */
    TPM_ERR_INTERNAL = 12,
    TPM_STATUS_COUNT_
} tpm_status;

TPM_API const char *tpm_status_string(tpm_status s);
/* Message of the last failure of a call that has no handle (per thread). */
TPM_API const char *tpm_last_error(void);

/* MARK: logging */
typedef enum tpm_log_level {
    TPM_LOG_NONE = 0,
    TPM_LOG_ERROR = 1,
    TPM_LOG_WARN = 2,
    TPM_LOG_INFO = 3,
    TPM_LOG_DEBUG = 4
} tpm_log_level;

typedef void (*tpm_log_fn)(tpm_log_level level, const char *msg, void *user);
/* fn == NULL restores the default (stderr). The level defaults to
 * TPMOE_LOG_LEVEL (none|error|warn|info|debug or 0..4), else WARN. */
TPM_API void tpm_log_set(tpm_log_fn fn, void *user);
TPM_API void tpm_log_set_level(tpm_log_level level);
TPM_API tpm_log_level tpm_log_get_level(void);

/* MARK: types */
typedef enum tpm_dtype {
    TPM_DTYPE_BF16 = 0,
    TPM_DTYPE_FP16 = 1,
    TPM_DTYPE_FP32 = 2,
    TPM_DTYPE_COUNT_
} tpm_dtype;

/* All-reduce payload codecs. NONE is exact; the others are lossy and opt-in.
 * *_H apply a 32-point Walsh-Hadamard rotation per block before quantizing. */
typedef enum tpm_codec {
    TPM_CODEC_DEFAULT = -1, /* unset: take it from the resolved config */
    TPM_CODEC_NONE = 0,
    TPM_CODEC_INT8 = 1,
    TPM_CODEC_INT6 = 2,
    TPM_CODEC_INT4 = 3,
    TPM_CODEC_FP8 = 4,     /* e4m3 */
    TPM_CODEC_INT4_H = 5,
    TPM_CODEC_INT6_H = 6,
    TPM_CODEC_COUNT_
} tpm_codec;

typedef enum tpm_algo {
    TPM_ALGO_AUTO = 0,
    TPM_ALGO_ONESHOT = 1,
    TPM_ALGO_TWOSHOT = 2,
    TPM_ALGO_NCCL = 3,
    TPM_ALGO_COUNT_
} tpm_algo;

typedef enum tpm_backend {
    TPM_BACKEND_AUTO = 0,  /* CUDA where a GPU and the CUDA build exist */
    TPM_BACKEND_CPU = 1,
    TPM_BACKEND_CUDA = 2,
    TPM_BACKEND_COUNT_
} tpm_backend;

typedef enum tpm_allreduce_mode {
    TPM_AR_UNSET = -1,
    TPM_AR_AUTO = 0,   /* custom kernels where they win, NCCL elsewhere */
    TPM_AR_CUSTOM = 1, /* custom kernels wherever they can run */
    TPM_AR_NCCL = 2    /* always NCCL (GPU) / the plain path (CPU) */
} tpm_allreduce_mode;

TPM_API const char *tpm_dtype_name(tpm_dtype t);
TPM_API size_t tpm_dtype_size(tpm_dtype t);
TPM_API const char *tpm_codec_name(tpm_codec c);
TPM_API const char *tpm_algo_name(tpm_algo a);
/* Case-insensitive parse of a name as printed by the *_name functions. */
TPM_API tpm_status tpm_codec_parse(const char *s, tpm_codec *out);
TPM_API tpm_status tpm_dtype_parse(const char *s, tpm_dtype *out);

/* MARK: config
 * A versioned config struct. Always start from TPM_CONFIG_INIT: fields left
 * at their "unset" value (-1 / NULL / AUTO) are taken from the environment,
 * then from defaults; a field set here wins over the environment. */
typedef struct tpm_config {
    uint32_t struct_size;     /* sizeof(tpm_config), set by TPM_CONFIG_INIT */
    uint32_t version;         /* TPM_CONFIG_VERSION */
    tpm_backend backend;
    int32_t rank;             /* -1: TPMOE_RANK */
    int32_t world_size;       /* -1: TPMOE_WORLD_SIZE */
    const char *rendezvous;   /* NULL: TPMOE_RENDEZVOUS (a directory path on one node, or
                               * tcp://HOST:PORT where rank 0 listens: ranks on several nodes) */
    int32_t device;           /* CUDA device; -1: rank % device count */
    tpm_allreduce_mode allreduce; /* TPM_AR_UNSET: TPMOE_ALLREDUCE */
    tpm_codec codec;          /* TPM_CODEC_DEFAULT: TPMOE_QUICK_REDUCE_QUANTIZATION */
    int64_t quant_min_bytes;  /* -1: TPMOE_QUICK_REDUCE_MIN_BYTES */
    int64_t quant_max_bytes;  /* -1: TPMOE_QUICK_REDUCE_MAX_BYTES */
    tpm_algo algo;            /* AUTO: dispatch table (TPMOE_ALGO overrides) */
    int64_t buffer_bytes;     /* peer buffer per rank; -1: TPMOE_BUFFER_BYTES */
    int32_t timeout_ms;       /* -1: TPMOE_TIMEOUT_MS (default 30000) */
    tpm_dtype dtype;          /* activation dtype; checked at the handshake */
    const char *model;        /* preset name for per-model rules, or NULL */
    int32_t fuse_shared;      /* -1: TPMOE_FUSE_SHARED_EXPERTS (auto) */
    int32_t tp;               /* tensor-parallel size for policy; -1: world */
    int32_t ep;               /* expert-parallel size for policy; -1: 1 */
    void *nccl_comm;          /* optional existing ncclComm_t for fallback */
    int64_t oneshot_max_bytes; /* -1: TPMOE_ONESHOT_MAX_BYTES, else table */
    int64_t custom_max_bytes;  /* -1: TPMOE_CUSTOM_MAX_BYTES, else table */
} tpm_config;

#define TPM_CONFIG_INIT                                                      \
    {                                                                        \
        sizeof(tpm_config), TPM_CONFIG_VERSION, TPM_BACKEND_AUTO, -1, -1,    \
            NULL, -1, TPM_AR_UNSET, TPM_CODEC_DEFAULT, -1, -1,                \
            TPM_ALGO_AUTO, -1, -1, TPM_DTYPE_BF16, NULL, -1, -1, -1, NULL,   \
            -1, -1                                                           \
    }

/* The configuration after environment, API fields and per-model rules. */
typedef struct tpm_resolved_config {
    tpm_backend backend;
    int32_t rank, world_size, device;
    tpm_allreduce_mode allreduce;
    tpm_codec codec;
    int64_t quant_min_bytes, quant_max_bytes;
    tpm_algo algo;
    int64_t buffer_bytes;
    int32_t timeout_ms;
    tpm_dtype dtype;
    int32_t fuse_shared; /* 0 or 1 after rules */
    int32_t tp, ep;
    int64_t oneshot_max_bytes; /* -1: from the dispatch table */
    int64_t custom_max_bytes;  /* -1: from the dispatch table */
    char rendezvous[256];      /* "" when none; a directory (one node) or tcp://HOST:PORT */
    char node[64];             /* this rank's node: TPMOE_NODE_ID, else the host name; ranks
                                * whose names differ are on different nodes (not hashed) */
    char model[64];            /* "" when none */
    int32_t cuda_kernels;      /* CUDA all-reduce kernel set, 0..19 (TPMOE_CUDA_AR_VARIANT;
                                * a diagnostic switch, docs/allreduce_cuda.md) */
    int32_t cuda_share_gpu;    /* 1: tpm_comm_init_all may put several ranks on one GPU
                                * (TPMOE_CUDA_SHARE_GPU; a test switch: the kernels run and
                                * are checked, their times mean nothing, no NCCL) */
    uint64_t hash;       /* over the fields every rank must agree on */
} tpm_resolved_config;

/* Ranks: at most TPM_MAX_LOCAL_WORLD on one node (tpm_comm_init_all, the CPU backend, the
 * custom all-reduce kernels, the MoE layer's tp x ep); a tpm_comm_init communicator with a
 * "tcp://HOST:PORT" rendezvous and the CUDA backend may span nodes, up to TPM_MAX_WORLD ranks
 * (every call then runs on NCCL). */
#define TPM_MAX_LOCAL_WORLD 8
#define TPM_MAX_WORLD 256

/* Unlimited quant_max_bytes / custom_max_bytes. */
#define TPM_BYTES_UNLIMITED INT64_MAX

/* Resolve a config (env + fields + rules) without creating anything.
 * report (optional) receives a human-readable multi-line text of every
 * value with where it came from and every rule with its reason. */
TPM_API tpm_status tpm_config_resolve(const tpm_config *cfg,
                                      tpm_resolved_config *out, char *report,
                                      size_t report_len);

/* MARK: communicator */
typedef struct tpm_comm *tpm_comm_t;

/* One rank of a multi-process communicator (rank/world/rendezvous from the
 * config or TPMOE_RANK / TPMOE_WORLD_SIZE / TPMOE_RENDEZVOUS). World 1 needs
 * no rendezvous. */
TPM_API tpm_status tpm_comm_init(tpm_comm_t *comm, const tpm_config *cfg);
/* n communicators in one process, one per rank (like ncclCommInitAll). CPU
 * backend: each comm must then be driven by its own thread. CUDA backend:
 * devices[i] is rank i's GPU (NULL: 0..n-1). One process driving several
 * GPUs (as with NCCL): an all-reduce kernel waits on its GPU for the other
 * ranks' calls, and a CUDA call that waits for the device (cudaMalloc /
 * cudaFree, a library's first use, which loads kernels: cuBLAS, a graph's
 * first launch) made for one rank meanwhile can wait for it in turn, until
 * the timeout. So do such work for every rank before any rank's first
 * collective (tpm_moe_create does its own, including a warm-up of its cuBLAS
 * calls), and tear down after every rank's last one (bench/results/r117).
 * tpmoe's own kernels are all loaded into each GPU's context at init, once
 * per device and process (0.4-0.6 s under CUDA's lazy loading, r131), so no
 * first launch of one waits for the device. */
TPM_API tpm_status tpm_comm_init_all(tpm_comm_t *comms, int n,
                                     const int *devices, const tpm_config *cfg);
TPM_API tpm_status tpm_comm_destroy(tpm_comm_t comm);
TPM_API tpm_status tpm_comm_rank(tpm_comm_t comm, int *rank);
TPM_API tpm_status tpm_comm_world_size(tpm_comm_t comm, int *world);
TPM_API tpm_status tpm_comm_get_config(tpm_comm_t comm,
                                       tpm_resolved_config *out);
/* Message of the last failure on this handle ("" if none). */
TPM_API const char *tpm_comm_last_error(tpm_comm_t comm);
/* The error of an all-reduce that failed after its call had returned (like
 * ncclCommGetAsyncError). CUDA: a kernel whose bounded wait for a peer ran
 * out records TPM_ERR_TIMEOUT in host-mapped memory; its output is then
 * garbage and the communicator is unusable (destroy it). Synchronize the
 * stream, then call this to know whether the enqueued collectives (or the
 * forwards that contain them) completed; the next tpm_allreduce* /
 * tpm_moe_forward on the comm returns the same error. CPU: every call is
 * synchronous and already returned its error, so this is TPM_OK. */
TPM_API tpm_status tpm_comm_get_async_error(tpm_comm_t comm);

/* Sum count elements of in over all ranks into out (in == out allowed).
 * The codec and algorithm come from the resolved config and the dispatch
 * table. stream is a cudaStream_t on the CUDA backend, ignored on the CPU. */
TPM_API tpm_status tpm_allreduce(tpm_comm_t comm, const void *in, void *out,
                                 size_t count, tpm_dtype dtype, void *stream);
/* The same with an explicit codec (TPM_CODEC_DEFAULT: from config) and
 * algorithm (TPM_ALGO_AUTO: dispatch). An explicit codec still obeys the
 * min/max size rule unless algo is given explicitly too. */
TPM_API tpm_status tpm_allreduce_ex(tpm_comm_t comm, const void *in, void *out,
                                    size_t count, tpm_dtype dtype,
                                    tpm_codec codec, tpm_algo algo,
                                    void *stream);
/* What tpm_allreduce would do for this call (algo, codec), without doing it. */
TPM_API tpm_status tpm_allreduce_plan(tpm_comm_t comm, size_t count,
                                      tpm_dtype dtype, tpm_codec codec,
                                      tpm_algo *algo_out, tpm_codec *codec_out);

/* MARK: codecs (CPU reference; the GPU encoders write identical bytes) */
/* Bytes of the wire format for n values (codes + scales). */
TPM_API size_t tpm_codec_encoded_bytes(tpm_codec codec, size_t n);
TPM_API tpm_status tpm_codec_encode(tpm_codec codec, tpm_dtype dtype,
                                    const void *in, size_t n, void *out,
                                    size_t out_bytes);
TPM_API tpm_status tpm_codec_decode(tpm_codec codec, tpm_dtype dtype,
                                    const void *in, size_t in_bytes, size_t n,
                                    void *out);

/* MARK: moe
 * One MoE layer (router, routed experts, shared expert) of a preset, sharded
 * over tp_size x ep_size ranks: global rank = ep_rank * tp_size + tp_rank.
 * Every expert (shared included) is split on its intermediate dimension
 * across the TP ranks; each EP rank owns n_experts / ep_size routed experts;
 * the router is replicated and tokens are replicated on every rank. The
 * partial outputs of all ranks are summed by one tpm_allreduce over the
 * communicator. The routed scaling factor is folded into the routed
 * weights, so the shared expert's weight is 1.0 (docs/moe.md).
 *
 * Shared expert: fused (one more slot, weights stacked with the routed
 * experts, top-k + 1) or unfused (a separate dense MLP). Under EP, fused
 * gives token t's shared work to EP rank t % ep_size; unfused shards the
 * shared MLP over all ranks (CPU backend) or runs it on EP rank 0, split
 * over its TP ranks (CUDA backend). Auto (-1) follows the policy
 * (TPMOE_FUSE_SHARED_EXPERTS; off under EP > 1).
 *
 * Backends: CPU (host arrays, synchronous) and CUDA (one GPU per rank,
 * device arrays, asynchronous on the caller's stream; bf16 activations; the
 * sum is tpm_allreduce over a CUDA communicator). */
#define TPM_MOE_CONFIG_VERSION 1u

typedef struct tpm_moe *tpm_moe_t;

typedef struct tpm_moe_config {
    uint32_t struct_size;    /* sizeof(tpm_moe_config), set by TPM_MOE_CONFIG_INIT */
    uint32_t version;        /* TPM_MOE_CONFIG_VERSION */
    const char *preset;      /* "m3", "m3-mini", "deepseek-v3", "gpt-oss", ... */
    const char *weights;     /* safetensors path; NULL: random weights from seed */
    uint64_t seed;           /* random weights: those gen-weights --seed writes */
    int32_t layer;           /* layer index in the file / of the random weights */
    int32_t tp_rank, tp_size; /* -1: from the comm given to create (or 0 / 1) */
    int32_t ep_rank, ep_size; /* -1: ep_size 1, ep_rank from the comm */
    int32_t fuse_shared;     /* -1 auto (policy), 0 unfused, 1 fused */
    tpm_backend backend;     /* AUTO: the comm's backend when a comm is given, else
                              * CUDA where built and a GPU is visible, else CPU */
    tpm_dtype dtype;         /* activation dtype of forward's x and y */
    tpm_codec codec;         /* all-reduce codec; TPM_CODEC_DEFAULT: the comm's */
    tpm_algo algo;           /* all-reduce algorithm; AUTO: the comm's dispatch */
    int32_t device;          /* CUDA device; -1: the comm's (tpm_comm_init_all:
                              * devices[rank]), else the current device */
} tpm_moe_config;

#define TPM_MOE_CONFIG_INIT                                                  \
    {                                                                        \
        sizeof(tpm_moe_config), TPM_MOE_CONFIG_VERSION, NULL, NULL, 0, 0,    \
            -1, -1, -1, -1, -1, TPM_BACKEND_AUTO, TPM_DTYPE_BF16,            \
            TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, -1                             \
    }

/* What a created layer is (shapes, this rank's share, the fusion decision). */
typedef struct tpm_moe_info {
    char preset[32];
    tpm_backend backend;
    tpm_dtype dtype;
    tpm_codec codec;              /* all-reduce codec (TPM_CODEC_DEFAULT: the comm's) */
    tpm_algo algo;
    int32_t hidden, n_experts, top_k, inter, n_shared, shared_inter;
    int32_t tp_rank, tp_size, ep_rank, ep_size;
    int32_t fuse_shared;          /* resolved: 0 or 1 */
    int32_t slots_per_token;      /* top_k (+ n_shared when fused) */
    int32_t expert_begin, expert_end; /* routed experts of this EP rank */
    int32_t local_experts;        /* expert slots stacked here (routed + fused shared) */
    int32_t inter_local;          /* per expert intermediate on this TP rank */
    char fuse_reason[512];        /* why fusion is on or off */
} tpm_moe_info;

/* What the last forward did (on this rank). Times in seconds (CUDA: GPU
 * time between CUDA events around each phase). */
typedef struct tpm_moe_stats {
    size_t ntokens;
    int32_t distinct_experts;     /* routed experts that got >= 1 token (all ranks) */
    int32_t local_active_experts; /* expert slots run on this rank (shared included) */
    int64_t local_pairs;          /* (token, slot) pairs computed on this rank */
    double t_router, t_experts, t_combine, t_allreduce, t_total;
} tpm_moe_stats;

/* Create one rank's layer: loads (or generates) the weights and keeps this
 * rank's shard. comm (may be NULL) fills the unset rank fields and the
 * device. CUDA: it also runs the layer once per token-count bucket (about
 * 0.1 s of GPU time at m3 shapes), so no forward is a library's first use;
 * where one process drives several ranks, create every rank's layer before
 * any rank's first forward (tpm_comm_init_all). */
TPM_API tpm_status tpm_moe_create(tpm_moe_t *moe, const tpm_moe_config *cfg, tpm_comm_t comm);
TPM_API tpm_status tpm_moe_destroy(tpm_moe_t moe);
/* y = MoE(x): x and y [ntokens x hidden] of dtype (the config's), x == y
 * allowed. comm: world tp_size*ep_size with this rank's global rank; NULL
 * for a world of 1. Every rank must call with the same x.
 * CPU backend: x and y are host memory; the call is synchronous; stream is
 * ignored. CUDA backend: x and y are DEVICE memory on the layer's GPU (host
 * memory is TPM_ERR_INVALID_ARG); the work is enqueued on stream (a
 * cudaStream_t on that GPU, NULL: the legacy default stream); decode-sized
 * batches return without waiting (larger ones wait for the stream once to
 * size the expert GEMMs, and once per 8192 tokens);
 * tpm_moe_last_stats / tpm_moe_last_routing wait for it (call them after
 * a graph capture has ended; a captured forward records no times). An
 * all-reduce of the forward that gave up waiting for a peer after the call
 * returned is reported by tpm_comm_get_async_error once the stream has been
 * synchronized, and by the next forward. */
TPM_API tpm_status tpm_moe_forward(tpm_moe_t moe, tpm_comm_t comm, const void *x, void *y,
                                   size_t ntokens, tpm_dtype dtype, void *stream);
/* Change the all-reduce codec (TPM_CODEC_DEFAULT: the comm's) and algorithm
 * (AUTO: the comm's dispatch, which applies a lossy codec only between the
 * policy's min and max sizes; an explicit algorithm forces the codec) used
 * by the following forwards. Every rank must use the same. */
TPM_API tpm_status tpm_moe_set_allreduce(tpm_moe_t moe, tpm_codec codec, tpm_algo algo);
TPM_API tpm_status tpm_moe_get_info(tpm_moe_t moe, tpm_moe_info *info);
TPM_API tpm_status tpm_moe_last_stats(tpm_moe_t moe, tpm_moe_stats *stats);
/* The last forward's routing: topk_ids / topk_weights [ntokens x top_k]
 * (selection order; the weights include the routed scaling factor) and the
 * tokens per expert [n_experts + n_shared] (the shared experts count every
 * token). Any output may be NULL; ntokens must match the last forward. */
TPM_API tpm_status tpm_moe_last_routing(tpm_moe_t moe, int32_t *topk_ids, float *topk_weights,
                                        int32_t *tokens_per_expert, size_t ntokens);
/* Message of the last failure on this handle ("" if none). */
TPM_API const char *tpm_moe_last_error(tpm_moe_t moe);

#ifdef __cplusplus
}
#endif
#endif /* TPMOE_H */
