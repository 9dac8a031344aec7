/*
 * cuda_preload.cu - load every tpmoe kernel into a device's context before
 * the first collective.
 *
 * Why. CUDA loads a kernel lazily, at its first launch (CUDA_MODULE_LOADING
 * = LAZY, the default since CUDA 12.2), and the load may synchronize the
 * context: it waits until every kernel running there has finished (the CUDA
 * programming guide's lazy-loading hazard for kernels that wait on each
 * other). tpmoe's all-reduce kernels spin on the GPU until the peer ranks'
 * kernels arrive. If a peer's next launch is a first launch into a context
 * that holds such a spinning kernel (ranks sharing one GPU share its primary
 * context), the load waits for the spin, the spin for the peer, the peer
 * for the load: nothing moves until the all-reduce's bounded wait gives up
 * (TPM_ERR_TIMEOUT). tpm_moe_create's warm-up (moe_cuda_layer.cu) covers
 * cuBLAS's first uses; this covers tpmoe's own kernels, every one of them,
 * including the all-reduce variants no warm-up reaches.
 *
 * How. Without separable compilation each .cu file is its own fatbinary,
 * which the runtime registers as a library. Each file names one kernel
 * (TPM_CUDA_ANCHOR); cudaGetKernel gives its handle, cuKernelGetLibrary (a
 * driver entry point fetched through the runtime: no libcuda link) the
 * library, cudaLibraryEnumerateKernels every kernel of it, and
 * cudaFuncGetAttributes on each loads it into the current context (the
 * guide's way to preload). A kernel with no image for the device (the
 * sm_90a file on another architecture) is skipped, and so is one that fails
 * to load for another reason (warned once): the preload is a safeguard, it
 * never fails the communicator or the layer that asks for it. Once per
 * device and process, under a mutex; the caller's current device is kept.
 * Cost (bench/results/r131, one H200): 342 kernels in 0.39-0.55 s under
 * lazy loading, 0.14 s where CUDA_MODULE_LOADING=EAGER already loaded them.
 *
 * No device code here; no synchronization beyond what the loads do.
 */
#include "core/cuda_preload.h"
#include "internal.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <pthread.h>
#include <stdlib.h>

extern "C" {
const void *tpm_cuda_anchor_codec(void);
const void *tpm_cuda_anchor_oneshot(void);
const void *tpm_cuda_anchor_probe(void);
const void *tpm_cuda_anchor_twoshot(void);
const void *tpm_cuda_anchor_twoshot_ll(void);
const void *tpm_cuda_anchor_twoshot_ws(void);
const void *tpm_cuda_anchor_moe_bench(void);
const void *tpm_cuda_anchor_moe_combine(void);
const void *tpm_cuda_anchor_moe_decode(void);
const void *tpm_cuda_anchor_moe_decode_mma(void);
const void *tpm_cuda_anchor_moe_gemm_sm90a(void) __attribute__((weak));
const void *tpm_cuda_anchor_moe_route(void);
const void *tpm_cuda_anchor_moe_route_tc(void);
const void *tpm_cuda_anchor_moe_weights(void);
}

namespace {

typedef const void *(*anchor_fn)(void);
typedef CUresult (*kernel_get_library_fn)(CUlibrary *, CUkernel);

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
unsigned long long g_done; /* bit d: device d's context holds every kernel */
int g_count[64];           /* how many kernels that took */

kernel_get_library_fn driver_kernel_get_library(void) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuKernelGetLibrary", &fn, 12050, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return (kernel_get_library_fn)fn;
}

/* Load one kernel into the current context: 1 loaded, 0 not (no image for
 * this device, or another error: warned once, and the kernel is left to load
 * at its first launch as without the preload; a launch that cannot load it
 * fails there with its own error). */
int load_one(const void *k) {
    static int warned;
    cudaFuncAttributes at;
    cudaError_t e = cudaFuncGetAttributes(&at, k);
    if (e == cudaSuccess) return 1;
    (void)cudaGetLastError();
    if (e != cudaErrorNoKernelImageForDevice && e != cudaErrorInvalidDeviceFunction && !warned) {
        warned = 1; /* under g_mu */
        TPM_LOG_W("preloading kernels: cudaFuncGetAttributes: %s (that kernel loads at its first launch)",
                  cudaGetErrorString(e));
    }
    return 0;
}

/* Every kernel of the library that holds anchor's kernel. */
tpm_status load_library_of(const void *anchor, kernel_get_library_fn get_lib, int *n) {
    cudaKernel_t k = NULL;
    CUlibrary lib = NULL;
    unsigned cnt = 0;
    if (!get_lib || cudaGetKernel(&k, anchor) != cudaSuccess ||
        get_lib(&lib, (CUkernel)k) != CUDA_SUCCESS ||
        cudaLibraryGetKernelCount(&cnt, (cudaLibrary_t)lib) != cudaSuccess || cnt == 0) {
        /* no library view (an old driver): at least the anchor itself */
        (void)cudaGetLastError();
        *n += load_one(anchor);
        return TPM_OK;
    }
    cudaKernel_t *ks = (cudaKernel_t *)malloc(cnt * sizeof *ks);
    if (!ks) return tpm_err(TPM_ERR_NO_MEMORY, "preloading kernels: out of memory");
    if (cudaLibraryEnumerateKernels(ks, cnt, (cudaLibrary_t)lib) != cudaSuccess) {
        (void)cudaGetLastError();
        *n += load_one(anchor);
    } else {
        for (unsigned i = 0; i < cnt; i++)
            *n += load_one((const void *)ks[i]);
    }
    free(ks);
    return TPM_OK;
}

} // namespace

extern "C" tpm_status tpm_cuda_preload_kernels(int dev, int *n_loaded) {
    if (n_loaded) *n_loaded = 0;
    TPM_ARG_CHECK(dev >= 0 && dev < 64, "preloading kernels: device %d is out of range", dev);
    pthread_mutex_lock(&g_mu);
    if (g_done >> dev & 1ull) {
        if (n_loaded) *n_loaded = g_count[dev];
        pthread_mutex_unlock(&g_mu);
        return TPM_OK;
    }
    const anchor_fn anchors[] = {
        tpm_cuda_anchor_codec,         tpm_cuda_anchor_oneshot,        tpm_cuda_anchor_probe,
        tpm_cuda_anchor_twoshot,       tpm_cuda_anchor_twoshot_ll,     tpm_cuda_anchor_twoshot_ws,
        tpm_cuda_anchor_moe_bench,     tpm_cuda_anchor_moe_combine,    tpm_cuda_anchor_moe_decode,
        tpm_cuda_anchor_moe_decode_mma, tpm_cuda_anchor_moe_gemm_sm90a, tpm_cuda_anchor_moe_route,
        tpm_cuda_anchor_moe_route_tc,  tpm_cuda_anchor_moe_weights,
    };
    int prev = -1;
    (void)cudaGetDevice(&prev);
    tpm_status st = TPM_OK;
    int n = 0;
    uint64_t t0 = tpm_now_ns();
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = tpm_err(TPM_ERR_CUDA, "preloading kernels: cudaSetDevice(%d): %s", dev,
                     cudaGetErrorString(e));
    }
    kernel_get_library_fn get_lib = st == TPM_OK ? driver_kernel_get_library() : NULL;
    for (size_t i = 0; i < sizeof anchors / sizeof anchors[0] && st == TPM_OK; i++)
        if (anchors[i]) st = load_library_of(anchors[i](), get_lib, &n);
    if (st == TPM_OK) {
        g_done |= 1ull << dev;
        g_count[dev] = n;
        TPM_LOG_D("GPU %d: %d tpmoe kernels loaded in %.1f ms%s", dev, n,
                  (double)(tpm_now_ns() - t0) * 1e-6,
                  get_lib ? "" : " (no cuKernelGetLibrary: one kernel per file)");
    }
    pthread_mutex_unlock(&g_mu);
    if (prev >= 0 && prev != dev) (void)cudaSetDevice(prev);
    if (n_loaded && st == TPM_OK) *n_loaded = n;
    return st;
}

extern "C" void tpm_cuda_preload_skip_for_test(int dev) {
    if (dev < 0 || dev >= 64) return;
    pthread_mutex_lock(&g_mu);
    g_done |= 1ull << dev;
    g_count[dev] = 0;
    pthread_mutex_unlock(&g_mu);
}
