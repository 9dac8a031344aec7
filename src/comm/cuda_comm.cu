/*
 * cuda_comm.cu - the CUDA backend of tpm_comm_t: peer buffers, P2P proof,
 * NCCL fallback, and the host side of tpm_allreduce on a cudaStream_t.
 *
 * One process driving all local GPUs (tpm_cuda_comm_init_all): every rank
 * allocates one buffer (layout in cuda_comm.h) on its GPU; peer access is
 * enabled between all pairs and peers' buffers are addressed directly (UVA).
 * P2P is then proven by a real kernel write into every peer's buffer and a
 * read-back; if any pair fails, the custom kernels are disabled and every
 * call goes to NCCL (created with ncclCommInitAll). The buffers of a group
 * are freed when its last communicator is destroyed, since peers write into
 * each other's memory.
 *
 * Hot path: no device-wide sync, no allocation; one kernel launch per piece
 * (a message larger than one launch's buffer slot is cut into pieces). A
 * kernel that gave up waiting wrote TPM_ERR_TIMEOUT into host-mapped words;
 * the next call returns it (the communicator is dead after a timeout).
 *
 * One process per GPU (tpm_cuda_comm_init) needs the CPU bootstrap to swap
 * CUDA IPC handles and is not available yet: it returns TPM_ERR_UNSUPPORTED.
 */
#include "comm/comm_internal.h"
#include "comm/cuda_comm.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <pthread.h>
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
    Group *group;
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

void free_impl(Impl *im) {
    if (!im) return;
    int prev = -1;
    cudaGetDevice(&prev);
    cudaSetDevice(im->dev);
    if (im->nccl && im->own_nccl) ncclCommDestroy(im->nccl);
    if (im->buf) cudaFree(im->buf);
    if (im->err_host) cudaFreeHost(im->err_host);
    if (prev >= 0) cudaSetDevice(prev);
    free(im);
}

/* Allocate and initialise rank r's buffer (world n, B bytes per launch). */
tpm_status alloc_rank(Impl *im, int r, int n, int64_t B, int32_t timeout_ms) {
    tpm_status st = TPM_OK;
    size_t ll_slot = round_up((size_t)B, 16);
    size_t ts_slot = round_up((size_t)B / (size_t)n, 32768) + 32768;
    size_t ll_off = TPM_CUDA_CTL_BYTES + TPM_CUDA_FLAG_BYTES;
    size_t ts_off = ll_off + 2 * (size_t)n * ll_slot;
    size_t bytes = ts_off + 4 * (size_t)n * ts_slot;
    void *d = NULL;
    cudaDeviceProp prop;
    CUDA_TRY(cudaSetDevice(im->dev));
    CUDA_TRY(cudaGetDeviceProperties(&prop, im->dev));
    im->sms = prop.multiProcessorCount;
    CUDA_TRY(cudaMalloc(&d, bytes));
    im->buf = (uint8_t *)d;
    im->buf_bytes = bytes;
    CUDA_TRY(cudaMemset(im->buf, 0, ll_off));
    CUDA_TRY(cudaMemset(im->buf + ll_off, 0xff, ts_off - ll_off));
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

/* Prove i -> j P2P: a kernel on i writes a pattern into j's two-shot region
 * and reads it back; the host compares. Peer-access queries can lie. */
tpm_status probe_pair(Impl *a, Impl *b, int *ok) {
    enum { kBytes = 65536 };
    tpm_status st = TPM_OK;
    uint8_t *pat = (uint8_t *)malloc(kBytes), *back = (uint8_t *)malloc(kBytes);
    uint8_t *src = a->base.ts[a->base.rank], *dst = b->base.ts[b->base.rank];
    uint8_t *chk = src + kBytes;
    *ok = 0;
    if (!pat || !back) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "P2P probe: out of host memory");
        goto fail;
    }
    for (int i = 0; i < kBytes; i++) pat[i] = (uint8_t)(i * 131 + a->base.rank * 17 + b->base.rank + 1);
    CUDA_TRY(cudaSetDevice(a->dev));
    CUDA_TRY(cudaMemcpy(src, pat, kBytes, cudaMemcpyHostToDevice));
    if (tpm_cuda_copy_launch(dst, src, kBytes, 8, NULL) ||
        tpm_cuda_copy_launch(chk, dst, kBytes, 8, NULL)) {
        st = cuda_fail(cudaGetLastError(), "P2P probe launch");
        goto fail;
    }
    CUDA_TRY(cudaMemcpy(back, chk, kBytes, cudaMemcpyDeviceToHost));
    *ok = memcmp(pat, back, kBytes) == 0;
fail:
    free(pat);
    free(back);
    return st;
}

tpm_status check_error_words(struct tpm_comm *c, Impl *im) {
    volatile uint32_t *e = im->err_host;
    if (e[TPM_CUDA_ERR_CODE] == 0) return TPM_OK;
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
    if (r != ncclSuccess) return tpm_err(TPM_ERR_NCCL, "ncclAllReduce: %s", ncclGetErrorString(r));
    return TPM_OK;
}

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
    if (cudaGetDevice(&cur) != cudaSuccess || cur != im->dev) {
        cudaError_t e = cudaSetDevice(im->dev);
        if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    }
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
    a.grid = im->sms * 2; /* co-resident: 2 CTAs of 256 threads per SM */
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
    pthread_mutex_lock(&g->mu);
    int last = --g->live == 0;
    pthread_mutex_unlock(&g->mu);
    if (!last) return;
    for (int i = 0; i < g->n; i++) free_impl(g->impl[i]);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

const tpm_comm_ops kCudaOps = {"cuda", cuda_allreduce, cuda_destroy};

} /* namespace */

extern "C" int tpm_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" tpm_status tpm_cuda_comm_init(struct tpm_comm *c) {
    (void)c;
    return tpm_err(TPM_ERR_UNSUPPORTED,
                   "CUDA one-process-per-GPU communicator needs the CPU bootstrap for CUDA IPC "
                   "handles, not built yet; use tpm_comm_init_all or the NCCL path");
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
    Group *g = (Group *)calloc(1, sizeof *g);
    if (!g) return tpm_err(TPM_ERR_NO_MEMORY, "CUDA init_all: out of memory");
    pthread_mutex_init(&g->mu, NULL);
    g->n = n;
    cudaGetDevice(&prev);
    for (int i = 0; i < n; i++) {
        devs[i] = devices ? devices[i] : i;
        if (devs[i] < 0 || devs[i] >= ndev) {
            st = tpm_err(TPM_ERR_INVALID_ARG, "CUDA init_all: device %d of rank %d not present "
                                              "(%d GPUs)", devs[i], i, ndev);
            goto fail;
        }
        for (int j = 0; j < i; j++)
            if (devs[j] == devs[i]) {
                st = tpm_err(TPM_ERR_INVALID_ARG, "CUDA init_all: ranks %d and %d share GPU %d",
                             j, i, devs[i]);
                goto fail;
            }
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
    }
    /* peer access between all pairs, then direct pointers */
    for (int i = 0; i < n; i++) {
        CUDA_TRY(cudaSetDevice(devs[i]));
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            int can = 0;
            CUDA_TRY(cudaDeviceCanAccessPeer(&can, devs[i], devs[j]));
            if (!can) continue;
            cudaError_t e = cudaDeviceEnablePeerAccess(devs[j], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
            else if (e != cudaSuccess) (void)cudaGetLastError();
        }
        for (int j = 0; j < n; j++) set_peer(g->impl[i], j, g->impl[j]->buf, n);
    }
    {
        int all_ok = 1;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                if (i == j) continue;
                int can = 0, ok = 0;
                CUDA_TRY(cudaDeviceCanAccessPeer(&can, devs[i], devs[j]));
                if (can) TPM_TRY_GOTO(probe_pair(g->impl[i], g->impl[j], &ok));
                if (!ok) {
                    TPM_LOG_W("GPU %d -> GPU %d: peer write/read-back failed; custom "
                              "all-reduce disabled, NCCL only", devs[i], devs[j]);
                    all_ok = 0;
                }
            }
        for (int i = 0; i < n; i++) g->impl[i]->p2p_ok = all_ok;
    }
    {
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
    }
    g->live = n;
    if (prev >= 0) cudaSetDevice(prev);
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
