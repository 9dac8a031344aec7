/*
 * moe_cuda_backend.c - the CUDA backend of the public MoE layer (tpm_moe_t):
 * one rank = one GPU, driving the CUDA MoE layer of moe_cuda.h.
 *
 * Create: moe_layer.c has resolved the rank layout and the fusion; here the
 * GPU layer is made for this rank's TP shard (tp_rank of tp_size, the
 * intermediate dimension of every expert split like the CPU backend's) and
 * the same full host weights the CPU backend would shard are uploaded
 * (rounded to bf16; routers and biases stay fp32). No host shard is kept.
 *
 * Forward (x, y: bf16 device arrays on the layer's GPU, everything enqueued
 * on the caller's stream; the host waits only where the GPU layer's prefill
 * path reads its per-expert offsets back, and once per extra chunk):
 *   route -> experts -> combine per chunk of at most MOE_CUDA_CHUNK tokens
 *   (the GPU layer's buffers are sized for one chunk), then, when tp > 1,
 *   tpm_allreduce_ex(comm, y, y, T*H, bf16, codec, algo, stream): tpmoe's
 *   quick all-reduce with the layer's codec and algorithm (not the GPU
 *   layer's own NCCL all-reduce, which this backend never calls).
 * A call of more than one chunk reads each chunk's routing back before the
 * next chunk overwrites it (one host sync per chunk; the prefill path of such
 * sizes syncs once per chunk anyway).
 *
 * Routing and stats are collected lazily (ops.collect, on tpm_moe_last_stats
 * / tpm_moe_last_routing): the routing of the last chunk comes back through
 * tpm_cuda_moe_read_routing after the chunk's event (a device sync where the
 * forward was captured) and the phase times from CUDA
 * events recorded around each phase (route, experts, combine, all-reduce,
 * total). While the stream is being captured into a CUDA graph no events are
 * recorded and the times read 0; collect only after the capture has ended.
 *
 * Expert parallelism (ep_size > 1): the GPU layer holds this rank's routed
 * experts only (n_experts / ep_size, each split over the TP ranks), token t
 * of a chunk runs its fused shared slot on EP rank t % ep_size (unfused, and
 * the fused layer's split plan at 4-8 tokens: the dense shared MLP on EP rank
 * 0); the all-reduce over all tp x ep ranks sums
 * the partial outputs, as with TP alone.
 *
 * Not supported (TPM_ERR_UNSUPPORTED at create): activations other than
 * bf16, more than one shared expert or a shared expert of another size (the
 * GPU layer's limits).
 */
#include "moe/moe_internal.h"

#ifdef TPMOE_HAVE_CUDA

#include "comm/comm_internal.h"
#include "moe/moe_cuda.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

/* Tokens per GPU-layer call (its buffers' size). */
#define MOE_CUDA_CHUNK 8192

/* The GPU layer asks for an NCCL communicator when tp > 1, for its own
 * all-reduce. This backend sums with tpm_allreduce instead and never calls
 * tpm_cuda_moe_allreduce / _forward, so it hands in this marker, which is
 * never dereferenced. */
static const int k_no_nccl_marker = 0;
#define NO_NCCL_COMM ((void *)(uintptr_t)&k_no_nccl_marker)

/* CUDA events of one forward. */
enum { EV_START, EV_CHUNK, EV_ROUTED, EV_EXPERTS, EV_COMBINED, EV_END, EV_COUNT };

typedef struct cuda_state {
    tpm_cuda_moe *gl; /* the GPU layer */
    int slots;        /* per token in its routing: top_k (+ 1 fused shared) */
    int32_t *sel;     /* host [MOE_CUDA_CHUNK x slots] */
    float *wts;       /* host [MOE_CUDA_CHUNK x slots] */
    int32_t *cnt;     /* host [E + n_shared] */
    cudaEvent_t ev[EV_COUNT];
    /* the last forward */
    size_t T;
    int timed;                             /* events were recorded */
    int pending;                           /* its last chunk and times are not collected yet */
    size_t pend_off, pend_n;               /* that chunk */
    double t_router, t_experts, t_combine; /* collected chunks, seconds */
    int64_t local_pairs, local_shared;     /* EP: routed / fused shared pairs this rank ran */
} cuda_state;

static tpm_status cuda_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* clear a non-sticky error */
    return tpm_err(TPM_ERR_CUDA, "moe cuda: %s: %s", what, cudaGetErrorString(e));
}

#define MOE_CK(expr)                                                                               \
    do {                                                                                           \
        cudaError_t moe_ck_ = (expr);                                                              \
        if (moe_ck_ != cudaSuccess) return cuda_fail(moe_ck_, #expr);                              \
    } while (0)

/* MARK: create */

tpm_backend tpm_moe_cuda_auto_backend(tpm_comm_t comm) {
    tpm_resolved_config rc;
    if (comm && tpm_comm_get_config(comm, &rc) == TPM_OK)
        return rc.backend == TPM_BACKEND_CUDA ? TPM_BACKEND_CUDA : TPM_BACKEND_CPU;
    return tpm_cuda_device_count() > 0 ? TPM_BACKEND_CUDA : TPM_BACKEND_CPU;
}

/* A comm the forward can sum device buffers with: a CUDA one on our GPU. */
static tpm_status check_comm(const struct tpm_moe *m, tpm_comm_t comm, const char *fn) {
    tpm_resolved_config rc;
    TPM_TRY(tpm_comm_get_config(comm, &rc));
    if (rc.backend != TPM_BACKEND_CUDA)
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "%s: the CUDA MoE backend sums device buffers and needs a CUDA "
                       "communicator (tpm_comm_init_all with backend cuda); this one is cpu",
                       fn);
    if (rc.device >= 0 && m->device >= 0 && rc.device != m->device)
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "%s: the comm's rank %d is on GPU %d, the layer on GPU %d", fn, rc.rank,
                       (int)rc.device, m->device);
    return TPM_OK;
}

tpm_status tpm_moe_cuda_check(struct tpm_moe *m, tpm_comm_t comm) {
    const tpm_preset *p = m->preset;
    if (m->dtype != TPM_DTYPE_BF16)
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "tpm_moe_create: the CUDA MoE backend takes bf16 activations only (dtype "
                       "%s): use dtype bf16 or backend cpu",
                       tpm_dtype_name(m->dtype));
    int ndev = tpm_cuda_device_count();
    if (ndev <= 0)
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "tpm_moe_create: backend cuda: no CUDA device is visible; use backend cpu");
    if (p->n_shared > 1 || (p->n_shared == 1 && p->shared_inter != p->inter))
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "tpm_moe_create: preset %s: the CUDA MoE layer takes at most one shared "
                       "expert of the routed experts' size (%d shared, inter %d vs %d)",
                       p->name, p->n_shared, p->shared_inter, p->inter);
    if (p->inter % (8 * m->tp_size) != 0 || p->hidden % 8 != 0)
        return tpm_err(TPM_ERR_UNSUPPORTED,
                       "tpm_moe_create: preset %s: the CUDA MoE kernels need hidden (%d) and "
                       "inter / tp_size (%d / %d) to be multiples of 8",
                       p->name, p->hidden, p->inter, m->tp_size);
    if (comm && m->world > 1) TPM_TRY(check_comm(m, comm, "tpm_moe_create"));
    int dev = m->device;
    if (dev < 0 && comm) {
        tpm_resolved_config rc;
        TPM_TRY(tpm_comm_get_config(comm, &rc));
        dev = rc.device;
        /* tpm_comm_init without cfg.device: the CUDA comm's rule */
        if (dev < 0 && rc.backend == TPM_BACKEND_CUDA) dev = rc.rank % ndev;
    }
    if (dev < 0) MOE_CK(cudaGetDevice(&dev));
    if (dev >= ndev)
        return tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_create: device %d is not present (%d GPUs)",
                       dev, ndev);
    m->device = dev;
    return TPM_OK;
}

static void cuda_destroy(struct tpm_moe *m) {
    cuda_state *s = m->impl;
    if (!s) return;
    if (m->device >= 0) (void)cudaSetDevice(m->device);
    for (int i = 0; i < EV_COUNT; i++)
        if (s->ev[i]) (void)cudaEventDestroy(s->ev[i]);
    tpm_cuda_moe_destroy(s->gl);
    free(s->sel);
    free(s->wts);
    free(s->cnt);
    free(s);
    m->impl = NULL;
}

static tpm_status cuda_forward(struct tpm_moe *m, tpm_comm_t comm, const void *x, void *y, size_t T,
                               void *stream);
static tpm_status cuda_collect(struct tpm_moe *m);

static const tpm_moe_ops cuda_ops = {"cuda", cuda_forward, cuda_destroy, cuda_collect};

tpm_status tpm_moe_cuda_init(struct tpm_moe *m, const tpm_moe_weights *w) {
    cuda_state *s = calloc(1, sizeof *s);
    if (!s) return tpm_err(TPM_ERR_NO_MEMORY, "moe cuda: out of memory");
    m->impl = s;
    m->ops = &cuda_ops; /* from here on, destroy frees what was made */
    /* the shapes of this rank's share, as the CPU backend would hold it */
    const int per = m->n_experts / m->ep_size;
    m->expert_begin = m->ep_rank * per;
    m->expert_end = m->expert_begin + per;
    m->experts.n = per + (m->fuse ? m->n_shared : 0);
    m->experts.inter = m->inter / m->tp_size;
    /* unfused: the GPU layer runs the dense shared MLP on EP rank 0, split over its TP ranks */
    m->shared.n = m->fuse || m->ep_rank != 0 ? 0 : m->n_shared;
    m->shared.inter = m->shared.n ? m->shared_inter / m->tp_size : 0;

    tpm_cuda_moe_desc d;
    memset(&d, 0, sizeof d);
    d.preset = m->preset;
    d.device = m->device;
    d.tp = m->tp_size;
    d.rank = m->tp_rank;
    d.fuse_shared = m->fuse;
    d.max_tokens = MOE_CUDA_CHUNK;
    d.nccl_comm = m->world > 1 ? NO_NCCL_COMM : NULL;
    d.ep = m->ep_size;
    d.ep_rank = m->ep_rank;
    TPM_TRY(tpm_cuda_moe_create(&d, &s->gl));
    TPM_TRY(tpm_cuda_moe_upload(s->gl, w));
    s->slots = tpm_cuda_moe_slots(s->gl);
    if (s->slots != m->top_k + (m->fuse ? m->n_shared : 0))
        return tpm_err(TPM_ERR_INTERNAL, "moe cuda: the GPU layer has %d slots per token, want %d",
                       s->slots, m->top_k + (m->fuse ? m->n_shared : 0));
    const size_t R = (size_t)MOE_CUDA_CHUNK * (size_t)s->slots;
    s->sel = malloc(R * sizeof *s->sel);
    s->wts = malloc(R * sizeof *s->wts);
    s->cnt = malloc((size_t)(m->n_experts + m->n_shared) * sizeof *s->cnt);
    if (!s->sel || !s->wts || !s->cnt) return tpm_err(TPM_ERR_NO_MEMORY, "moe cuda: out of memory");
    MOE_CK(cudaSetDevice(m->device));
    for (int i = 0; i < EV_COUNT; i++)
        MOE_CK(cudaEventCreate(&s->ev[i]));
    /* the upload's copies went through the legacy stream: finish them before
     * any forward on a stream that does not wait for it (that stream only: not
     * the other ranks' all-reduces where ranks share a GPU) */
    MOE_CK(cudaStreamSynchronize(cudaStreamLegacy));
    /* every first library use here, not in a forward beside another rank's spinning all-reduce */
    return tpm_cuda_moe_warm(s->gl);
}

/* MARK: forward */

/* x / y must be memory the layer's GPU reads directly. */
static tpm_status check_ptr(const struct tpm_moe *m, const void *p, const char *what) {
    struct cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_forward: %s: %s", what, cudaGetErrorString(e));
    }
    if (a.type == cudaMemoryTypeUnregistered)
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "tpm_moe_forward: %s is host memory; the CUDA backend takes device "
                       "pointers on GPU %d",
                       what, m->device);
    if (a.type == cudaMemoryTypeDevice && a.device != m->device)
        return tpm_err(TPM_ERR_INVALID_ARG, "tpm_moe_forward: %s is on GPU %d, the layer on GPU %d",
                       what, a.device, m->device);
    return TPM_OK;
}

static tpm_status record(cuda_state *s, int ev, cudaStream_t st) {
    if (s->timed) MOE_CK(cudaEventRecord(s->ev[ev], st));
    return TPM_OK;
}

static double elapsed_s(const cuda_state *s, int a, int b) {
    float ms = 0.0f;
    if (!s->timed || cudaEventElapsedTime(&ms, s->ev[a], s->ev[b]) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0.0;
    }
    return (double)ms * 1e-3;
}

/* Bring chunk [off, off + n)'s routing and phase times to the host (waits
 * for the device). Must run before the next chunk's route. */
static tpm_status collect_chunk(struct tpm_moe *m, cuda_state *s, size_t off, size_t n) {
    if (s->timed) { /* the chunk's combine event: this forward's stream only */
        MOE_CK(cudaEventSynchronize(s->ev[EV_COMBINED]));
        TPM_TRY(tpm_cuda_moe_read_routing(s->gl, (int)n, s->sel, s->wts, s->cnt));
    } else { /* captured: the replays' stream is not known here */
        TPM_TRY(tpm_cuda_moe_get_routing(s->gl, (int)n, s->sel, s->wts, s->cnt));
    }
    TPM_TRY(tpm_cuda_moe_check(s->gl)); /* a bounded wait that ran out: TPM_ERR_TIMEOUT */
    const size_t k = (size_t)m->top_k, K = (size_t)s->slots;
    for (size_t t = 0; t < n; t++) {
        for (size_t j = 0; j < k; j++) {
            m->last_ids[(off + t) * k + j] = s->sel[t * K + j];
            m->last_weights[(off + t) * k + j] = s->wts[t * K + j];
        }
    }
    if (m->ep_size == 1) {
        for (int e = 0; e < m->n_experts; e++)
            m->counts[e] += s->cnt[e];
    } else { /* the layer's counts are by local slot: count the global ids */
        for (size_t t = 0; t < n; t++)
            for (size_t j = 0; j < k; j++)
                m->counts[s->sel[t * K + j]]++;
        for (int e = m->expert_begin; e < m->expert_end; e++)
            s->local_pairs += s->cnt[e - m->expert_begin];
        if (m->fuse && m->n_shared) {
            if (tpm_cuda_moe_shared_plan(s->gl, (int)n) == TPM_MOE_SHARED_SPLIT) /* dense on EP rank 0 */
                s->local_shared += m->ep_rank == 0 ? (int64_t)n : 0;
            else /* the slot: this rank's tokens t % ep */
                s->local_shared += s->cnt[m->expert_end - m->expert_begin];
        }
    }
    s->t_router += elapsed_s(s, EV_CHUNK, EV_ROUTED);
    s->t_experts += elapsed_s(s, EV_ROUTED, EV_EXPERTS);
    s->t_combine += elapsed_s(s, EV_EXPERTS, EV_COMBINED);
    return TPM_OK;
}

static tpm_status cuda_forward(struct tpm_moe *m, tpm_comm_t comm, const void *x, void *y, size_t T,
                               void *stream) {
    cuda_state *s = m->impl;
    cudaStream_t st = (cudaStream_t)stream;
    s->pending = 0;
    s->T = 0;
    s->t_router = s->t_experts = s->t_combine = 0.0;
    s->local_pairs = s->local_shared = 0;
    m->last_ntokens = 0;
    memset(&m->stats, 0, sizeof m->stats);
    memset(m->counts, 0, (size_t)(m->n_experts + m->n_shared) * sizeof *m->counts);
    if (T == 0) return TPM_OK;
    if (m->world > 1) TPM_TRY(check_comm(m, comm, "tpm_moe_forward"));
    TPM_TRY(check_ptr(m, x, "x"));
    TPM_TRY(check_ptr(m, y, "y"));
    TPM_TRY(tpm_moe_reserve_routing(m, T));
    MOE_CK(cudaSetDevice(m->device));
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(st, &cap) != cudaSuccess) {
        (void)cudaGetLastError();
        cap = cudaStreamCaptureStatusNone;
    }
    s->timed = cap == cudaStreamCaptureStatusNone;

    const size_t H = (size_t)m->hidden;
    const uint16_t *xb = x;
    uint16_t *yb = y;
    TPM_TRY(record(s, EV_START, st));
    for (size_t off = 0; off < T; off += MOE_CUDA_CHUNK) {
        const size_t n = T - off < MOE_CUDA_CHUNK ? T - off : MOE_CUDA_CHUNK;
        if (off > 0) TPM_TRY(collect_chunk(m, s, s->pend_off, s->pend_n));
        /* x == y: this chunk's rows of x are read by route and experts
         * before combine writes the same rows of y (stream order) */
        TPM_TRY(record(s, EV_CHUNK, st));
        TPM_TRY(tpm_cuda_moe_route(s->gl, xb + off * H, (int)n, stream));
        TPM_TRY(record(s, EV_ROUTED, st));
        TPM_TRY(tpm_cuda_moe_experts(s->gl, xb + off * H, (int)n, stream));
        TPM_TRY(record(s, EV_EXPERTS, st));
        TPM_TRY(tpm_cuda_moe_combine(s->gl, (int)n, yb + off * H, stream));
        TPM_TRY(record(s, EV_COMBINED, st));
        s->pend_off = off;
        s->pend_n = n;
    }
    if (m->world > 1)
        TPM_TRY(tpm_allreduce_ex(comm, y, y, T * H, TPM_DTYPE_BF16, m->codec, m->algo, stream));
    TPM_TRY(record(s, EV_END, st));
    s->T = T;
    s->pending = 1;
    m->last_ntokens = T;
    return TPM_OK;
}

/* MARK: routing and stats */

static tpm_status cuda_collect(struct tpm_moe *m) {
    cuda_state *s = m->impl;
    if (!s->pending) return TPM_OK;
    s->pending = 0; /* once, even on failure: never count a chunk twice */
    MOE_CK(cudaSetDevice(m->device));
    TPM_TRY(collect_chunk(m, s, s->pend_off, s->pend_n));
    if (s->timed) MOE_CK(cudaEventSynchronize(s->ev[EV_END])); /* the all-reduce's time */
    const size_t T = s->T;
    for (int sh = 0; sh < m->n_shared; sh++)
        m->counts[m->n_experts + sh] = (int32_t)T;
    int distinct = 0;
    for (int e = 0; e < m->n_experts; e++)
        distinct += m->counts[e] > 0;
    m->stats.ntokens = T;
    m->stats.distinct_experts = distinct;
    if (m->ep_size == 1) {
        /* every expert runs here: the touched routed ones and the shared one(s), fused or not */
        m->stats.local_active_experts = distinct + m->n_shared;
        m->stats.local_pairs = (int64_t)T * (int64_t)(m->top_k + m->n_shared);
    } else {
        /* this EP rank's touched experts, its fused shared tokens (t % ep_size of each
         * chunk), or the dense shared MLP on EP rank 0 */
        int mine = 0;
        for (int e = m->expert_begin; e < m->expert_end; e++)
            mine += m->counts[e] > 0;
        const int64_t sh_pairs = m->fuse ? s->local_shared : (m->shared.n ? (int64_t)T : 0);
        m->stats.local_active_experts = mine + (m->fuse ? (s->local_shared > 0) : m->shared.n);
        m->stats.local_pairs = s->local_pairs + sh_pairs;
    }
    m->stats.t_router = s->t_router;
    m->stats.t_experts = s->t_experts;
    m->stats.t_combine = s->t_combine;
    m->stats.t_allreduce = elapsed_s(s, EV_COMBINED, EV_END);
    m->stats.t_total = elapsed_s(s, EV_START, EV_END);
    return TPM_OK;
}

#endif /* TPMOE_HAVE_CUDA */
