/*
 * cuda_comm.cu - the CUDA backend of tpm_comm_t: peer buffers, P2P proof,
 * NCCL fallback, and the host side of tpm_allreduce on a cudaStream_t.
 *
 * One process driving all local GPUs (tpm_cuda_comm_init_all): every rank
 * allocates one buffer (layout in cuda_comm.h) on its GPU; peer access is
 * enabled between all pairs and peers' buffers are addressed directly (UVA).
 * P2P is then proven by a real kernel write into every peer's buffer and a
 * read-back; if any pair fails, the custom kernels are disabled and every
 * call goes to NCCL (created with ncclCommInitAll, or the engine's comms from
 * cfg.nccl_comm). The buffers of a group are freed when its last
 * communicator is destroyed, since peers write into each other's memory.
 *
 * One process per GPU (tpm_cuda_comm_init): a CPU bootstrap over the
 * rendezvous directory (comm_internal.h, <dir>/boot) carries the setup; with
 * a tcp://HOST:PORT rendezvous the TCP bootstrap (tcp_boot.c) does, and the
 * ranks may sit on several nodes.
 *   1. device = cfg.device, or rank % device count; allocate the buffer (more
 *      than TPM_CUDA_MAX_WORLD ranks: several nodes for sure, a placeholder).
 *   2. all-gather {IPC handle of the allocation base, sizes, PCI bus id, node
 *      name (cfg.node), whether an nccl_comm was handed in and is valid}:
 *      ranks on the same GPU of one node, different layouts or a rejected
 *      nccl_comm fail on every rank. Ranks on several nodes skip 3-4: an IPC
 *      handle means nothing on another node; every call runs on NCCL
 *      (struct tpm_comm.nccl_only, so the plan says so too).
 *   3. cudaIpcOpenMemHandle every peer's handle (lazy peer access); write a
 *      64 KB pattern into each peer's buffer from a kernel and read it back
 *      through the opened pointer (rank r uses bytes [r*64K, (r+1)*64K) of
 *      the peer's two-shot region, so concurrent probes never overlap).
 *   4. all-gather the per-rank verdict: the custom kernels run only if every
 *      rank proved every peer; otherwise all ranks use NCCL.
 *   5. NCCL: the handed-in comm (rank, size and device checked; never
 *      destroyed by us) or a new one: rank 0's ncclGetUniqueId is all-gathered
 *      and every rank calls ncclCommInitRankConfig non-blocking, polled
 *      against cfg.timeout_ms (a missing peer gives TPM_ERR_TIMEOUT, not a
 *      hang; the comm is then aborted).
 * Destroy: synchronize the device (our kernels into peers are done), a
 * bootstrap barrier (every rank's kernels are done, nobody writes into our
 * buffer any more), close the IPC mappings, then free. A failed barrier (dead
 * peer) or an earlier kernel timeout aborts our NCCL comm instead of
 * destroying it.
 *
 * Hot path: no device-wide sync, no allocation; one kernel launch per piece
 * (a message larger than one launch's buffer slot is cut into pieces). A
 * kernel that gave up waiting wrote TPM_ERR_TIMEOUT into host-mapped words;
 * the next call returns it (the communicator is dead after a timeout).
 */
#include "comm/comm_internal.h"
#include "comm/cuda_comm.h"
#include "core/cuda_preload.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace {

struct Group; /* the ranks created together by one init_all */

struct Impl {
    int dev;
    int sms;
    uint8_t *buf;      /* my buffer (device memory) */
    size_t buf_bytes;
    uint32_t *err_host; /* host-mapped error words */
    tpm_cuda_ar_args base;
    ncclComm_t nccl;
    int own_nccl;
    int p2p_ok;
    int warned_fallback;
    int broken;            /* a kernel timed out or a peer failed: abort NCCL */
    Group *group;          /* init_all; NULL for one process per GPU */
    void *boot;            /* one process per GPU: the CPU bootstrap */
    void *ipc[TPM_CUDA_MAX_WORLD]; /* peers' buffers opened through CUDA IPC */
    /* registered buffers (kernel set 8, tpm_cuda_comm_register_io) */
    const void *reg_in[TPM_CUDA_MAX_WORLD];
    void *reg_out[TPM_CUDA_MAX_WORLD];
    size_t reg_bytes;
};

struct Group {
    int n;
    int live;
    pthread_mutex_t mu;
    Impl *impl[TPM_CUDA_MAX_WORLD];
};

tpm_status cuda_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError(); /* clear a non-sticky error */
    return tpm_err(TPM_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

#define CUDA_TRY(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            st = cuda_fail(e_, #call);                                                             \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

ncclDataType_t nccl_type(tpm_dtype dt) {
    return dt == TPM_DTYPE_BF16 ? ncclBfloat16 : dt == TPM_DTYPE_FP16 ? ncclHalf : ncclFloat;
}

/* Wait for a non-blocking NCCL comm's pending operation (init or an
 * enqueue that returned ncclInProgress), bounded by timeout_ms. */
tpm_status nccl_wait(ncclComm_t comm, int32_t timeout_ms, const char *what) {
    uint64_t deadline = tpm_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    for (;;) {
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(comm, &ar);
        if (r != ncclSuccess)
            return tpm_err(TPM_ERR_NCCL, "%s: ncclCommGetAsyncError: %s", what,
                           ncclGetErrorString(r));
        if (ar == ncclSuccess) return TPM_OK;
        if (ar != ncclInProgress)
            return tpm_err(TPM_ERR_NCCL, "%s: %s", what, ncclGetErrorString(ar));
        if (tpm_now_ns() > deadline)
            return tpm_err(TPM_ERR_TIMEOUT, "%s: not done after %d ms (a peer is missing?)", what,
                           (int)timeout_ms);
        sched_yield();
    }
}

void free_impl(Impl *im) {
    if (!im) return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(im->dev);
    for (int p = 0; p < TPM_CUDA_MAX_WORLD; p++)
        if (im->ipc[p]) cudaIpcCloseMemHandle(im->ipc[p]);
    if (im->nccl && im->own_nccl) {
        if (!im->broken && !im->group) {
            /* ours is non-blocking: finalize bounded by the timeout (a peer
             * that is gone must not hang us), then destroy; else abort */
            ncclResult_t r = ncclCommFinalize(im->nccl);
            if ((r != ncclSuccess && r != ncclInProgress) ||
                nccl_wait(im->nccl, (int32_t)(im->base.timeout_ns / 1000000ull),
                          "ncclCommFinalize") != TPM_OK)
                im->broken = 1;
        }
        if (im->broken) ncclCommAbort(im->nccl);
        else ncclCommDestroy(im->nccl);
    }
    if (im->buf) cudaFree(im->buf);
    if (im->err_host) cudaFreeHost(im->err_host);
    if (prev >= 0) cudaSetDevice(prev);
    tpm_cpu_bootstrap_destroy(im->boot);
    free(im);
}

/* Allocate and initialise rank r's buffer (world n, B bytes per launch). */
tpm_status alloc_rank(Impl *im, int r, int n, int64_t B, int32_t timeout_ms) {
    tpm_status st = TPM_OK;
    size_t ll_slot = round_up((size_t)B, 16);
    size_t ts_slot = round_up((size_t)B / (size_t)n, 32768) + 32768;
    size_t ll_off = TPM_CUDA_CTL_BYTES + TPM_CUDA_FLAG_BYTES;
    size_t ts_off = ll_off + 2 * (size_t)n * ll_slot;
    size_t bytes = ts_off + 4 * (size_t)n * (ts_slot + TPM_CUDA_TL_SLOT(ts_slot));
    void *d = NULL;
    cudaDeviceProp prop;
    CUDA_TRY(cudaSetDevice(im->dev));
    /* every kernel loaded before the first collective (core/cuda_preload.cu says why) */
    st = tpm_cuda_preload_kernels(im->dev, NULL);
    if (st != TPM_OK) goto fail;
    CUDA_TRY(cudaGetDeviceProperties(&prop, im->dev));
    im->sms = prop.multiProcessorCount;
    CUDA_TRY(cudaMalloc(&d, bytes));
    im->buf = (uint8_t *)d;
    im->buf_bytes = bytes;
    CUDA_TRY(cudaMemset(im->buf, 0, ll_off));
    /* the one-shot packets and the two-shot slots start as the all-ones
     * sentinel (the flag-free two-shot reads its [tl] words as their own
     * ready markers; the flag two-shots overwrite whatever is in [ts]) */
    CUDA_TRY(cudaMemset(im->buf + ll_off, 0xff, bytes - ll_off));
    CUDA_TRY(cudaHostAlloc((void **)&im->err_host, TPM_CUDA_ERR_WORDS * sizeof(uint32_t),
                           cudaHostAllocMapped | cudaHostAllocPortable));
    memset(im->err_host, 0, TPM_CUDA_ERR_WORDS * sizeof(uint32_t));
    memset(&im->base, 0, sizeof im->base);
    CUDA_TRY(cudaHostGetDevicePointer((void **)&im->base.err, im->err_host, 0));
    im->base.rank = r;
    im->base.world = n;
    im->base.ll_slot = ll_slot;
    im->base.ts_slot = ts_slot;
    im->base.ctl = (uint32_t *)im->buf;
    im->base.timeout_ns = (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    CUDA_TRY(cudaDeviceSynchronize());
    return TPM_OK;
fail:
    return st;
}

void set_peer(Impl *im, int p, uint8_t *peer_buf, int n) {
    size_t ll_off = TPM_CUDA_CTL_BYTES + TPM_CUDA_FLAG_BYTES;
    im->base.flags[p] = (uint32_t *)(peer_buf + TPM_CUDA_CTL_BYTES);
    im->base.ll[p] = peer_buf + ll_off;
    im->base.ts[p] = peer_buf + ll_off + 2 * (size_t)n * im->base.ll_slot;
}

/* Prove a -> peer p P2P: a kernel on a's GPU writes a pattern into p's
 * two-shot region (bytes [rank*64K, (rank+1)*64K) of it, so concurrent
 * probes by different ranks never overlap) and copies it back into a's own
 * region (past the W slots peers write); the host compares. Peer-access
 * queries can lie. */
tpm_status probe_peer(Impl *a, int p, int *ok) {
    enum { kBytes = 65536 };
    tpm_status st = TPM_OK;
    const int me = a->base.rank, n = a->base.world;
    uint8_t *pat = (uint8_t *)malloc(kBytes), *back = (uint8_t *)malloc(kBytes);
    uint8_t *dst = a->base.ts[p] + (size_t)me * kBytes;
    uint8_t *chk = a->base.ts[me] + (size_t)n * kBytes, *src = chk + kBytes;
    *ok = 0;
    if (!pat || !back) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "P2P probe: out of host memory");
        goto fail;
    }
    for (int i = 0; i < kBytes; i++) pat[i] = (uint8_t)(i * 131 + me * 17 + p + 1);
    CUDA_TRY(cudaSetDevice(a->dev));
    CUDA_TRY(cudaMemcpy(src, pat, kBytes, cudaMemcpyHostToDevice));
    if (tpm_cuda_copy_launch(dst, src, kBytes, 8, NULL) ||
        tpm_cuda_copy_launch(chk, dst, kBytes, 8, NULL)) {
        st = cuda_fail(cudaGetLastError(), "P2P probe launch");
        goto fail;
    }
    CUDA_TRY(cudaMemcpy(back, chk, kBytes, cudaMemcpyDeviceToHost));
    *ok = memcmp(pat, back, kBytes) == 0;
    /* put the sentinel back into both regions (set 19's two-shot needs every
     * slot word all-ones); done before the verdict exchange, after which no
     * rank writes into another's buffer outside a launch */
    CUDA_TRY(cudaMemset(src, 0xff, kBytes));
    if (*ok && tpm_cuda_copy_launch(dst, src, kBytes, 8, NULL)) {
        st = cuda_fail(cudaGetLastError(), "P2P probe cleanup launch");
        goto fail;
    }
    CUDA_TRY(cudaMemset(chk, 0xff, kBytes));
    CUDA_TRY(cudaDeviceSynchronize());
fail:
    free(pat);
    free(back);
    return st;
}

tpm_status check_error_words(struct tpm_comm *c, Impl *im) {
    volatile uint32_t *e = im->err_host;
    if (e[TPM_CUDA_ERR_CODE] == 0) return TPM_OK;
    im->broken = 1;
    static const char *stage[] = {"?", "one-shot packets", "two-shot reduce-scatter flag",
                                  "two-shot all-gather flag"};
    uint32_t s = e[TPM_CUDA_ERR_STAGE];
    return tpm_err((tpm_status)e[TPM_CUDA_ERR_CODE],
                   "rank %d: a kernel gave up after %d ms waiting for rank %u (%s); the "
                   "communicator is unusable, destroy it",
                   c->rank, (int)(im->base.timeout_ns / 1000000ull), e[TPM_CUDA_ERR_PEER],
                   stage[s < 4 ? s : 0]);
}

tpm_status nccl_allreduce(Impl *im, const void *in, void *out, size_t count, tpm_dtype dt,
                          cudaStream_t s) {
    if (!im->nccl) return tpm_err(TPM_ERR_UNSUPPORTED, "no NCCL communicator");
    ncclResult_t r = ncclAllReduce(in, out, count, nccl_type(dt), ncclSum, im->nccl, s);
    if (r == ncclInProgress) { /* a non-blocking comm (ours, or handed in) */
        tpm_status st = nccl_wait(im->nccl, (int32_t)(im->base.timeout_ns / 1000000ull),
                                  "ncclAllReduce");
        if (st != TPM_OK) im->broken = 1;
        return st;
    }
    if (r != ncclSuccess) return tpm_err(TPM_ERR_NCCL, "ncclAllReduce: %s", ncclGetErrorString(r));
    return TPM_OK;
}

tpm_status cuda_allreduce_here(struct tpm_comm *c, Impl *im, const void *in, void *out, size_t count,
                               tpm_dtype dt, tpm_codec codec, tpm_algo algo, cudaStream_t s);

tpm_status cuda_allreduce(struct tpm_comm *c, const void *in, void *out, size_t count,
                          tpm_dtype dt, tpm_codec codec, tpm_algo algo, void *stream) {
    Impl *im = (Impl *)c->impl;
    cudaStream_t s = (cudaStream_t)stream;
    size_t esize = tpm_dtype_size(dt);
    TPM_TRY(check_error_words(c, im));
    if (((uintptr_t)in | (uintptr_t)out) % esize)
        return tpm_err(TPM_ERR_INVALID_ARG, "in/out must be aligned to the %zu-byte element", esize);
    if (count == 0) return TPM_OK;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        cur = -1;
    }
    if (cur != im->dev) {
        cudaError_t e = cudaSetDevice(im->dev);
        if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    }
    tpm_status st = cuda_allreduce_here(c, im, in, out, count, dt, codec, algo, s);
    if (cur >= 0 && cur != im->dev) cudaSetDevice(cur); /* the caller's device stays current */
    return st;
}

/* cuda_allreduce with im->dev current. */
tpm_status cuda_allreduce_here(struct tpm_comm *c, Impl *im, const void *in, void *out, size_t count,
                               tpm_dtype dt, tpm_codec codec, tpm_algo algo, cudaStream_t s) {
    size_t esize = tpm_dtype_size(dt);
    if (algo != TPM_ALGO_NCCL && !im->p2p_ok) {
        if (!im->warned_fallback)
            TPM_LOG_W("rank %d: peer-to-peer unavailable, all-reduce runs on NCCL", c->rank);
        im->warned_fallback = 1;
        algo = TPM_ALGO_NCCL;
    }
    if (algo == TPM_ALGO_NCCL) return nccl_allreduce(im, in, out, count, dt, s);
    if (algo == TPM_ALGO_ONESHOT && codec != TPM_CODEC_NONE)
        return tpm_err(TPM_ERR_UNSUPPORTED, "one-shot is exact only (codec %s needs two-shot)",
                       tpm_codec_name(codec));
    if (algo != TPM_ALGO_ONESHOT && algo != TPM_ALGO_TWOSHOT)
        return tpm_err(TPM_ERR_INVALID_ARG, "algorithm %d is not a backend algorithm", (int)algo);

    tpm_cuda_ar_args a = im->base;
    a.dtype = (int)dt;
    a.codec = (int)codec;
    int oneshot = algo == TPM_ALGO_ONESHOT;
    if (a.variant == 8 && a.world == 2 && !oneshot && codec == TPM_CODEC_NONE && im->reg_bytes &&
        in == im->reg_in[a.rank] && out == im->reg_out[a.rank] && count * esize <= im->reg_bytes) {
        for (int p = 0; p < a.world; p++) {
            a.peer_in[p] = im->reg_in[p];
            a.peer_out[p] = im->reg_out[p];
        }
        a.in = in;
        a.out = out;
        a.count = count;
        a.grid = im->sms * 2;
        if (tpm_cuda_twoshot_reg_launch(&a, s)) return cuda_fail(cudaGetLastError(), "registered two-shot launch");
        return TPM_OK;
    }
    a.grid = im->sms * 2; /* co-resident: 2 CTAs of 256 threads per SM */
    if (!oneshot) a.variant = tpm_cuda_twoshot_set(&a, count);
    size_t maxc = oneshot ? tpm_cuda_oneshot_max_count(&a) : tpm_cuda_twoshot_max_count(&a);
    maxc -= maxc % 32;
    for (size_t off = 0; off < count; off += maxc) {
        a.in = (const uint8_t *)in + off * esize;
        a.out = (uint8_t *)out + off * esize;
        a.count = count - off < maxc ? count - off : maxc;
        int rc = oneshot ? tpm_cuda_oneshot_launch(&a, s) : tpm_cuda_twoshot_launch(&a, s);
        if (rc) return cuda_fail(cudaGetLastError(), oneshot ? "one-shot launch" : "two-shot launch");
    }
    return TPM_OK;
}

void cuda_destroy(struct tpm_comm *c) {
    Impl *im = (Impl *)c->impl;
    if (!im) return;
    c->impl = NULL;
    Group *g = im->group;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(im->dev);
    cudaDeviceSynchronize(); /* our own kernels into peers are done */
    if (prev >= 0) cudaSetDevice(prev);
    if (!g) { /* one process per GPU: wait until no peer kernel can write to us */
        if (im->boot && tpm_cpu_bootstrap_barrier(im->boot) != TPM_OK) {
            TPM_LOG_W("rank %d: destroy barrier failed (%s); freeing anyway", c->rank,
                      tpm_err_msg());
            im->broken = 1;
        }
        free_impl(im);
        return;
    }
    pthread_mutex_lock(&g->mu);
    int last = --g->live == 0;
    pthread_mutex_unlock(&g->mu);
    if (!last) return;
    for (int i = 0; i < g->n; i++) free_impl(g->impl[i]);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* Use an engine's ncclComm_t: it must have our rank, world and device. */
tpm_status adopt_nccl(Impl *im, void *handle, int rank, int world) {
    ncclComm_t nc = (ncclComm_t)handle;
    int nr = -1, nn = -1, nd = -1;
    ncclResult_t r = ncclCommUserRank(nc, &nr);
    if (r == ncclSuccess) r = ncclCommCount(nc, &nn);
    if (r == ncclSuccess) r = ncclCommCuDevice(nc, &nd);
    if (r != ncclSuccess)
        return tpm_err(TPM_ERR_INVALID_ARG, "cfg.nccl_comm of rank %d: %s", rank,
                       ncclGetErrorString(r));
    if (nr != rank || nn != world || nd != im->dev)
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "cfg.nccl_comm of rank %d is rank %d of %d on GPU %d; this communicator "
                       "is rank %d of %d on GPU %d",
                       rank, nr, nn, nd, rank, world, im->dev);
    im->nccl = nc;
    im->own_nccl = 0;
    return TPM_OK;
}

/* tpm_comm_get_async_error: our kernels' error words, then NCCL's own
 * asynchronous error where we hold a communicator. */
tpm_status cuda_poll(struct tpm_comm *c) {
    Impl *im = (Impl *)c->impl;
    TPM_TRY(check_error_words(c, im));
    if (im->nccl) {
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(im->nccl, &ar);
        if (r != ncclSuccess)
            return tpm_err(TPM_ERR_NCCL, "ncclCommGetAsyncError: %s", ncclGetErrorString(r));
        if (ar != ncclSuccess && ar != ncclInProgress) {
            im->broken = 1;
            return tpm_err(TPM_ERR_NCCL, "rank %d: NCCL reports an asynchronous error: %s",
                           c->rank, ncclGetErrorString(ar));
        }
    }
    return TPM_OK;
}

const tpm_comm_ops kCudaOps = {"cuda", cuda_allreduce, cuda_destroy, cuda_poll};

} /* namespace */

extern "C" int tpm_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

namespace {

/* What every rank publishes at step 2 of the one-process-per-GPU init. */
struct Hello {
    cudaIpcMemHandle_t handle; /* of the allocation holding the buffer */
    uint64_t offset;           /* of the buffer from the allocation base */
    uint64_t buf_bytes, ll_slot, ts_slot;
    char bus[32];       /* PCI bus id of the GPU */
    int32_t injected;   /* 1: cfg.nccl_comm given */
    int32_t nccl_ok;    /* 0: the given nccl_comm was rejected */
    int32_t ipc_ok;     /* 0: cudaIpcGetMemHandle failed */
    int32_t pad;
    char node[64];      /* cfg.node: ranks on different nodes never try CUDA IPC */
};

/* Step 3-4: open the peers' buffers and prove them; *all_ok is the verdict
 * of every rank (all-gathered). Fails only on errors that are not a "no". */
tpm_status proc_peers(Impl *im, const Hello *h, int me, int n, int *all_ok) {
    int ok = h[me].ipc_ok;
    for (int p = 0; p < n && ok; p++) {
        if (p == me) continue;
        if (!h[p].ipc_ok) {
            ok = 0;
            break;
        }
        void *ptr = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&ptr, h[p].handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            TPM_LOG_W("rank %d: cudaIpcOpenMemHandle of rank %d: %s", me, p,
                      cudaGetErrorString(e));
            ok = 0;
            break;
        }
        im->ipc[p] = ptr;
        set_peer(im, p, (uint8_t *)ptr + h[p].offset, n);
    }
    for (int p = 0; p < n && ok; p++) {
        if (p == me) continue;
        int good = 0;
        TPM_TRY(probe_peer(im, p, &good));
        if (!good) {
            TPM_LOG_W("rank %d (GPU %d) -> rank %d: peer write/read-back failed", me, im->dev, p);
            ok = 0;
        }
    }
    int32_t v = ok, all[TPM_CUDA_MAX_WORLD]; /* n <= TPM_CUDA_MAX_WORLD on one node */
    TPM_TRY(tpm_cpu_bootstrap_allgather(im->boot, &v, sizeof v, all));
    *all_ok = 1;
    for (int p = 0; p < n; p++)
        if (!all[p]) {
            if (p != me)
                TPM_LOG_W("rank %d: rank %d could not prove peer-to-peer", me, p);
            *all_ok = 0;
        }
    return TPM_OK;
}

/* Step 5 without a handed-in comm: rank 0's unique id, non-blocking init. */
tpm_status proc_nccl(Impl *im, int me, int n, int32_t timeout_ms) {
    ncclUniqueId id, root;
    memset(&id, 0, sizeof id);
    if (me == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) /* the others get TPM_ERR_PEER from the bootstrap */
            return tpm_err(TPM_ERR_NCCL, "ncclGetUniqueId: %s", ncclGetErrorString(r));
    }
    {
        ncclUniqueId *all = (ncclUniqueId *)malloc(sizeof(ncclUniqueId) * (size_t)n);
        if (!all) return tpm_err(TPM_ERR_NO_MEMORY, "CUDA init: out of memory");
        tpm_status xs = tpm_cpu_bootstrap_allgather(im->boot, &id, sizeof id, all);
        root = all[0];
        free(all);
        TPM_TRY(xs);
    }
    cudaError_t e = cudaSetDevice(im->dev); /* NCCL binds the current device */
    if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    ncclConfig_t nc = NCCL_CONFIG_INITIALIZER;
    nc.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, root, me, &nc);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (comm) ncclCommAbort(comm);
        return tpm_err(TPM_ERR_NCCL, "ncclCommInitRankConfig: %s", ncclGetErrorString(r));
    }
    tpm_status st = nccl_wait(comm, timeout_ms, "ncclCommInitRankConfig");
    if (st != TPM_OK) {
        ncclCommAbort(comm);
        return st;
    }
    im->nccl = comm;
    im->own_nccl = 1;
    return TPM_OK;
}

} /* namespace */

extern "C" tpm_status tpm_cuda_comm_init(struct tpm_comm *c) {
    tpm_status st = TPM_OK;
    const int me = c->rank, n = c->world;
    TPM_ARG_CHECK(n >= 1 && n <= TPM_MAX_WORLD && me >= 0 && me < n,
                  "CUDA init: rank %d of world %d is out of range (world 1..%d)", me, n, TPM_MAX_WORLD);
    /* more ranks than one node holds: several nodes for sure, NCCL only, and the peer
     * buffer is a placeholder no kernel uses */
    const int wide = n > TPM_CUDA_MAX_WORLD;
    int ndev = tpm_cuda_device_count();
    if (ndev < 1) return tpm_err(TPM_ERR_UNSUPPORTED, "CUDA init: no CUDA device is visible");
    int dev = c->cfg.device >= 0 ? c->cfg.device : me % ndev;
    TPM_ARG_CHECK(dev < ndev, "CUDA init: rank %d: device %d not present (%d GPUs visible)", me,
                  dev, ndev);
    Impl *im = (Impl *)calloc(1, sizeof *im);
    Hello *h = (Hello *)calloc((size_t)n, sizeof *h);
    Hello mine;
    int all_ok = 0;
    int multi = 0; /* ranks on several nodes (cfg.node differs) */
    if (!im || !h) {
        free(im);
        free(h);
        return tpm_err(TPM_ERR_NO_MEMORY, "CUDA init: out of memory");
    }
    im->dev = dev;
    c->cfg.device = dev; /* tpm_comm_get_config reports the GPU this rank drives */
    int64_t B = c->cfg.buffer_bytes > 0 ? c->cfg.buffer_bytes : (64 << 20);
    /* rendezvous first: a rank that fails after it tells its peers at once
     * (bootstrap abort in the fail path) instead of leaving them to time out */
    TPM_TRY_GOTO(tpm_cpu_bootstrap_init(&c->cfg, &im->boot));
    if (wide) {
        TPM_TRY_GOTO(alloc_rank(im, 0, 1, 4096, c->cfg.timeout_ms));
    } else {
        TPM_TRY_GOTO(alloc_rank(im, me, n, B, c->cfg.timeout_ms));
        for (int p = 0; p < n; p++) set_peer(im, p, im->buf, n); /* own slot; peers below */
    }
    im->base.variant = c->cfg.cuda_kernels;

    /* 2: exchange handles, layouts, bus ids and the nccl_comm verdict */
    memset(&mine, 0, sizeof mine);
    mine.buf_bytes = im->buf_bytes;
    mine.ll_slot = im->base.ll_slot;
    mine.ts_slot = im->base.ts_slot;
    mine.ipc_ok = 1;
    snprintf(mine.node, sizeof mine.node, "%s", c->cfg.node);
    if (n > 1 && !wide) {
        /* im->buf is our own cudaMalloc, i.e. the allocation base: offset 0.
         * (No driver-API call: the library must load where no driver is.) */
        mine.offset = 0;
        cudaError_t e = cudaIpcGetMemHandle(&mine.handle, im->buf);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            TPM_LOG_W("rank %d: cudaIpcGetMemHandle: %s", me, cudaGetErrorString(e));
            mine.ipc_ok = 0;
        }
    }
    CUDA_TRY(cudaDeviceGetPCIBusId(mine.bus, (int)sizeof mine.bus, dev));
    mine.injected = c->nccl_comm != NULL;
    mine.nccl_ok = 1;
    if (c->nccl_comm && adopt_nccl(im, c->nccl_comm, me, n) != TPM_OK) {
        st = TPM_ERR_INVALID_ARG; /* message already set; tell the peers first */
        mine.nccl_ok = 0;
    }
    {
        tpm_status xs = tpm_cpu_bootstrap_allgather(im->boot, &mine, sizeof mine, h);
        if (st != TPM_OK) goto fail;
        TPM_TRY_GOTO(xs);
    }
    for (int p = 0; p < n; p++) multi |= strncmp(h[p].node, mine.node, sizeof mine.node) != 0;
    if (wide && !multi) {
        st = tpm_err(TPM_ERR_CONFIG, "CUDA init: %d ranks all on node '%s': one node holds at most %d (set "
                     "TPMOE_NODE_ID / run them on several nodes)", n, mine.node, TPM_CUDA_MAX_WORLD);
        goto fail;
    }
    for (int p = 0; p < n; p++) {
        if (!h[p].nccl_ok) {
            st = tpm_err(TPM_ERR_PEER, "CUDA init: rank %d rejected its cfg.nccl_comm", p);
            goto fail;
        }
        if (h[p].injected != mine.injected) {
            st = tpm_err(TPM_ERR_MISMATCH,
                         "CUDA init: rank %d %s cfg.nccl_comm, rank %d %s; all or none", p,
                         h[p].injected ? "gave" : "did not give", me,
                         mine.injected ? "gave" : "did not give");
            goto fail;
        }
        if (h[p].buf_bytes != mine.buf_bytes || h[p].ll_slot != mine.ll_slot ||
            h[p].ts_slot != mine.ts_slot) {
            st = tpm_err(TPM_ERR_MISMATCH,
                         "CUDA init: rank %d has a %llu-byte peer buffer, rank %d %llu", p,
                         (unsigned long long)h[p].buf_bytes, me,
                         (unsigned long long)mine.buf_bytes);
            goto fail;
        }
        for (int q = 0; q < p; q++)
            if (!strncmp(h[p].bus, h[q].bus, sizeof h[p].bus) && !strncmp(h[p].node, h[q].node, sizeof h[p].node)) {
                st = tpm_err(TPM_ERR_CONFIG,
                             "CUDA init: ranks %d and %d are on the same GPU (%.32s); set "
                             "cfg.device / CUDA_VISIBLE_DEVICES so every rank has its own",
                             q, p, h[p].bus);
                goto fail;
            }
    }
    /* 3-4: open, prove, agree (one node only: an IPC handle means nothing on another node) */
    if (!multi) TPM_TRY_GOTO(proc_peers(im, h, me, n, &all_ok));
    im->p2p_ok = all_ok;
    c->nccl_only = !all_ok && n > 1;
    /* 5: NCCL */
    if (!im->nccl) TPM_TRY_GOTO(proc_nccl(im, me, n, c->cfg.timeout_ms));
    c->ops = &kCudaOps;
    c->impl = im;
    free(h);
    if (me == 0)
        TPM_LOG_I("CUDA communicator: %d processes%s, peer-to-peer %s, %zu MB buffer per GPU, "
                  "NCCL %s", n, multi ? " on several nodes" : "",
                  all_ok ? "proven" : multi ? "off (several nodes: NCCL only)" : "unavailable (NCCL only)",
                  im->buf_bytes >> 20, im->own_nccl ? "created" : "handed in");
    return TPM_OK;
fail:
    /* Peers may still write into our buffer only during the probe, which
     * every rank finishes before the verdict all-gather; after a failed
     * exchange nobody has our pointer yet. The peers learn of the failure
     * now (their bootstrap calls return TPM_ERR_PEER with our message). */
    im->broken = 1;
    if (im->boot) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", tpm_err_msg());
        tpm_cpu_bootstrap_abort(im->boot, msg);
        tpm_err(st, "%s", msg); /* keep this rank's own message */
    }
    free_impl(im);
    free(h);
    return st;
}

extern "C" int tpm_cuda_comm_set_variant(struct tpm_comm *c, int variant) {
    if (!c || c->ops != &kCudaOps || !c->impl || variant < 0 || variant > TPM_CUDA_LL_SET) return -1;
    Impl *im = (Impl *)c->impl;
    im->base.variant = variant;
    c->cfg.cuda_kernels = variant;
    return 0;
}

extern "C" int tpm_cuda_comm_register_io(struct tpm_comm *c, const void *const *ins, void *const *outs,
                                         size_t bytes) {
    if (!c || c->ops != &kCudaOps || !c->impl) return -1;
    Impl *im = (Impl *)c->impl;
    if (!im->p2p_ok) return -1;
    memset(im->reg_in, 0, sizeof im->reg_in);
    memset(im->reg_out, 0, sizeof im->reg_out);
    im->reg_bytes = 0;
    if (!ins || !outs) return 0;
    for (int p = 0; p < c->world; p++) {
        if (!ins[p] || !outs[p]) return -1;
        im->reg_in[p] = ins[p];
        im->reg_out[p] = outs[p];
    }
    im->reg_bytes = bytes;
    return 0;
}

extern "C" tpm_status tpm_cuda_comm_poll(struct tpm_comm *c) {
    if (!c || !c->impl) return tpm_err(TPM_ERR_INVALID_ARG, "not a CUDA communicator");
    return check_error_words(c, (Impl *)c->impl);
}

extern "C" tpm_status tpm_cuda_comm_init_all(struct tpm_comm **comms, int n, const int *devices) {
    tpm_status st = TPM_OK;
    TPM_ARG_CHECK(comms && n >= 1 && n <= TPM_CUDA_MAX_WORLD,
                  "CUDA init_all: need 1..%d communicators (got %d)", TPM_CUDA_MAX_WORLD, n);
    int ndev = tpm_cuda_device_count();
    int prev = -1;
    ncclComm_t ncomms[TPM_CUDA_MAX_WORLD] = {0};
    int devs[TPM_CUDA_MAX_WORLD];
    unsigned char enabled[TPM_CUDA_MAX_WORLD][TPM_CUDA_MAX_WORLD] = {{0}};
    Group *g = (Group *)calloc(1, sizeof *g);
    if (!g) return tpm_err(TPM_ERR_NO_MEMORY, "CUDA init_all: out of memory");
    pthread_mutex_init(&g->mu, NULL);
    g->n = n;
    cudaGetDevice(&prev);
    /* TPMOE_CUDA_SHARE_GPU=1 (a test switch): ranks may share a GPU, rank i on GPU i % count
     * when no devices are given. Their kernels then share the SMs (each rank's grids are cut
     * to fit beside the others', see below), their times mean nothing, and NCCL (which
     * refuses two ranks on one GPU) is not created: every call runs the custom kernels. */
    const int share = comms[0]->cfg.cuda_share_gpu == 1;
    int shared = 0;
    for (int i = 0; i < n; i++) {
        devs[i] = devices ? devices[i] : (share && ndev > 0 ? i % ndev : i);
        if (devs[i] < 0 || devs[i] >= ndev) {
            st = tpm_err(TPM_ERR_INVALID_ARG, "CUDA init_all: device %d of rank %d not present "
                                              "(%d GPUs%s)", devs[i], i, ndev,
                         !share && ndev > 0 && n > ndev ? "; TPMOE_CUDA_SHARE_GPU=1 lets ranks share "
                                                          "them, for tests" : "");
            goto fail;
        }
        for (int j = 0; j < i; j++)
            if (devs[j] == devs[i]) {
                if (!share) {
                    st = tpm_err(TPM_ERR_INVALID_ARG, "CUDA init_all: ranks %d and %d share GPU %d "
                                                      "(TPMOE_CUDA_SHARE_GPU=1 allows it, for tests)",
                                 j, i, devs[i]);
                    goto fail;
                }
                shared = 1;
            }
    }
    if (shared && comms[0]->nccl_comm) {
        st = tpm_err(TPM_ERR_INVALID_ARG, "CUDA init_all: ranks that share a GPU cannot use an "
                                          "engine's NCCL comms");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        Impl *im = (Impl *)calloc(1, sizeof *im);
        if (!im) {
            st = tpm_err(TPM_ERR_NO_MEMORY, "CUDA init_all: out of memory");
            goto fail;
        }
        g->impl[i] = im;
        im->dev = devs[i];
        im->group = g;
        int64_t B = comms[i]->cfg.buffer_bytes > 0 ? comms[i]->cfg.buffer_bytes : (64 << 20);
        TPM_TRY_GOTO(alloc_rank(im, i, n, B, comms[i]->cfg.timeout_ms));
        im->base.variant = comms[i]->cfg.cuda_kernels;
    }
    if (shared) {
        /* Ranks sharing a GPU (a test mode: checked, never timed) run every collective on a
         * grid of 2 CTAs, launched without PDL (one launch per rank in flight). A rank's
         * collective spins on the GPU until its peers arrive, and a peer may still be running
         * its earlier work then. The earlier rule (2 CTAs per SM of each rank's share of the
         * SMs: 32 per rank with four ranks on an H200) let the spinning grids hold SMs that
         * work needed: TP 2 x EP 2 of the MoE layer, four ranks on one H200, stalled until the
         * timeout in 5 of 6 runs (bench/results/r134). Two CTAs per rank leave all but 2 x
         * ranks SMs free, and every rank gets the same grid (the kernels deal columns by CTA
         * index, and any grid of at least one CTA covers a launch). */
        for (int i = 0; i < n; i++) {
            g->impl[i]->sms = TPM_CUDA_SHARE_GRID / 2; /* a.grid = 2 x sms */
            g->impl[i]->base.no_pdl = 1;                /* one launch per rank in flight (cuda_sync.h) */
        }
    }
    /* peer access between all pairs, then direct pointers; a pair whose
     * enable failed is never touched by a kernel (no probe, NCCL only) */
    for (int i = 0; i < n; i++) {
        CUDA_TRY(cudaSetDevice(devs[i]));
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            if (devs[j] == devs[i]) { /* the same GPU: plain device pointers */
                enabled[i][j] = 1;
                continue;
            }
            int can = 0;
            CUDA_TRY(cudaDeviceCanAccessPeer(&can, devs[i], devs[j]));
            if (!can) continue;
            cudaError_t e = cudaDeviceEnablePeerAccess(devs[j], 0);
            if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) {
                enabled[i][j] = 1;
            } else {
                TPM_LOG_W("GPU %d -> GPU %d: cudaDeviceEnablePeerAccess: %s", devs[i], devs[j],
                          cudaGetErrorString(e));
            }
            (void)cudaGetLastError();
        }
        for (int j = 0; j < n; j++) set_peer(g->impl[i], j, g->impl[j]->buf, n);
    }
    {
        int all_ok = 1;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                if (i == j) continue;
                int ok = 0;
                if (enabled[i][j]) TPM_TRY_GOTO(probe_peer(g->impl[i], j, &ok));
                if (!ok) {
                    TPM_LOG_W("GPU %d -> GPU %d: peer write/read-back failed; custom "
                              "all-reduce disabled, NCCL only", devs[i], devs[j]);
                    all_ok = 0;
                }
            }
        if (!all_ok && shared) {
            st = tpm_err(TPM_ERR_PEER, "CUDA init_all: peer write/read-back failed and ranks "
                                       "that share a GPU have no NCCL to fall back on");
            goto fail;
        }
        for (int i = 0; i < n; i++) {
            g->impl[i]->p2p_ok = all_ok;
            comms[i]->nccl_only = !all_ok && n > 1;
            comms[i]->no_nccl = shared;
        }
    }
    if (shared) {
        /* no NCCL: ncclCommInitAll refuses two ranks on one GPU */
    } else if (comms[0]->nccl_comm) { /* the engine's comms: an array, rank i at [i] */
        ncclComm_t *given = (ncclComm_t *)comms[0]->nccl_comm;
        for (int i = 0; i < n; i++) TPM_TRY_GOTO(adopt_nccl(g->impl[i], given[i], i, n));
    } else {
        ncclResult_t r = ncclCommInitAll(ncomms, n, devs);
        if (r != ncclSuccess) {
            st = tpm_err(TPM_ERR_NCCL, "ncclCommInitAll: %s", ncclGetErrorString(r));
            goto fail;
        }
        for (int i = 0; i < n; i++) {
            g->impl[i]->nccl = ncomms[i];
            g->impl[i]->own_nccl = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        comms[i]->ops = &kCudaOps;
        comms[i]->impl = g->impl[i];
        comms[i]->rank = i;
        comms[i]->world = n;
        comms[i]->cfg.device = devs[i];
    }
    g->live = n;
    if (prev >= 0) cudaSetDevice(prev);
    if (shared)
        TPM_LOG_I("CUDA communicator: %d ranks sharing GPUs (TPMOE_CUDA_SHARE_GPU: a test mode, "
                  "%d CTAs per collective launch, no NCCL), %zu MB buffer per rank", n, 2 * g->impl[0]->sms,
                  g->impl[0]->buf_bytes >> 20);
    else
        TPM_LOG_I("CUDA communicator: %d GPUs, peer-to-peer %s, %zu MB buffer per GPU", n,
                  g->impl[0]->p2p_ok ? "proven" : "unavailable", g->impl[0]->buf_bytes >> 20);
    return TPM_OK;
fail:
    for (int i = 0; i < n; i++) free_impl(g->impl[i]);
    pthread_mutex_destroy(&g->mu);
    free(g);
    if (prev >= 0) cudaSetDevice(prev);
    return st;
}
