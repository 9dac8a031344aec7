/*
 * moe_cuda_bench.cu - the two ceilings the MoE benchmark divides by,
 * measured in the same run: HBM read bandwidth (a grid-stride kernel of
 * 16-byte loads folded into one xor per thread, so nothing is written but a
 * guard value) and the bf16 GEMM rate of cuBLAS on random operands (never on
 * zeros: a product of zeros runs faster). Both are medians of CUDA-event
 * timed repetitions after a warm-up. Also the benchmark's L2 flush (a write
 * of scratch, or a read of it that leaves clean lines) and an empty kernel.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_kernels.h"

#include <cublas_v2.h>
#include <stdlib.h>

namespace {

__global__ void k_read(const uint4 *__restrict__ p, size_t n, uint32_t *sink) {
    uint32_t acc = 0;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) { /* four independent loads in flight */
        const uint4 v0 = __ldcs(p + i), v1 = __ldcs(p + i + stride), v2 = __ldcs(p + i + 2 * stride),
                    v3 = __ldcs(p + i + 3 * stride);
        acc ^= v0.x ^ v0.y ^ v0.z ^ v0.w ^ v1.x ^ v1.y ^ v1.z ^ v1.w;
        acc ^= v2.x ^ v2.y ^ v2.z ^ v2.w ^ v3.x ^ v3.y ^ v3.z ^ v3.w;
    }
    for (; i < n; i += stride) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc; /* keeps the loads alive */
}

__global__ void k_fill(uint32_t *p, size_t n, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9e3779b1u ^ seed;
        h ^= h >> 15;
        h *= 0x2c1b3c6du;
        h ^= h >> 12;
        /* two bf16 in [-1, 1): sign, exponent 0x3f0..0x3f7, random mantissa */
        const uint32_t a = 0x3f00u | (h & 0x807fu), b = 0x3f00u | ((h >> 16) & 0x807fu);
        p[i] = a | (b << 16);
    }
}

int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* The read flush: plain L2-cached loads (normal eviction priority; __ldcs's
 * evict-first lines would displace each other instead of the cached data). */
__global__ void k_flush_read(const uint4 *__restrict__ p, size_t n, uint32_t *sink) {
    uint32_t acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void k_null(void) {}

/* The warm "flush": a 50 us wait that touches no memory (L2 and TLBs keep
 * what the last replay left), so the host's launch latency still hides. */
__global__ void k_wait(void) {
    const unsigned long long t0 = clock64();
    while (clock64() - t0 < 100000ull) __nanosleep(1000);
}

} // namespace

tpm_status tpm_cuda_bench_flush(void *scratch, size_t bytes, int mode, void *stream) {
    TPM_ARG_CHECK(scratch && bytes >= 64 && mode >= 0 && mode <= 2, "tpm_cuda_bench_flush: bad argument");
    if (mode == 2) {
        k_wait<<<1, 32, 0, (cudaStream_t)stream>>>();
        TPM_CUDA_LAUNCHED();
        return TPM_OK;
    }
    if (mode == 0) {
        TPM_CUDA_TRY(cudaMemsetAsync(scratch, 0x5a, bytes, (cudaStream_t)stream));
        return TPM_OK;
    }
    int dev = 0, sms = 0;
    TPM_CUDA_TRY(cudaGetDevice(&dev));
    TPM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    /* sink = the first word of scratch (written only if the xor hits the magic value) */
    k_flush_read<<<sms * 4, 512, 0, (cudaStream_t)stream>>>((const uint4 *)scratch + 4, bytes / 16 - 4,
                                                             (uint32_t *)scratch);
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

tpm_status tpm_cuda_bench_null(void *stream) {
    k_null<<<1, 32, 0, (cudaStream_t)stream>>>();
    TPM_CUDA_LAUNCHED();
    return TPM_OK;
}

tpm_status tpm_cuda_bench_read_bw(int device, size_t bytes, int reps, double *gbps) {
    TPM_ARG_CHECK(gbps && bytes >= 16 && reps >= 1 && reps <= 1000, "tpm_cuda_bench_read_bw: bad argument");
    TPM_CUDA_TRY(cudaSetDevice(device));
    int sms = 0;
    TPM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    void *buf = NULL;
    uint32_t *sink = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float *ms = (float *)malloc(sizeof(float) * (size_t)reps);
    tpm_status st = TPM_OK;
    const size_t n = bytes / 16;
    if (!ms || cudaMalloc(&buf, n * 16) || cudaMalloc((void **)&sink, 4) || cudaEventCreate(&a) ||
        cudaEventCreate(&b)) {
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_bench_read_bw: allocation failed");
        goto done;
    }
    k_fill<<<sms * 8, 256>>>((uint32_t *)buf, n * 4, 1u);
    for (int r = -2; r < reps; r++) {
        cudaEventRecord(a);
        k_read<<<sms * 4, 512>>>((const uint4 *)buf, n, sink);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        if (r >= 0) cudaEventElapsedTime(&ms[r], a, b);
    }
    if (cudaGetLastError() != cudaSuccess) {
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_bench_read_bw: kernel failed");
        goto done;
    }
    *gbps = (double)(n * 16) / (median(ms, reps) * 1e-3) / 1e9;
done:
    if (buf) cudaFree(buf);
    if (sink) cudaFree(sink);
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    free(ms);
    return st;
}

/* cuBLAS bf16 GEMM rate on random operands. hold_s = 0: reps GEMMs, each
 * synchronized by the host (a burst: the board starts cool between them).
 * hold_s > 0: GEMMs queued back to back for hold_s seconds (no host sync, so
 * the board reaches its power cap as a long benchmark does), the second half
 * of them timed between consecutive events. Median per GEMM. */
static tpm_status gemm_rate(int device, int m, int n, int k, int reps, double hold_s, double *tflops) {
    TPM_ARG_CHECK(tflops && m > 0 && n > 0 && k > 0 && reps >= 1 && reps <= 1000 && hold_s >= 0 && hold_s <= 60,
                  "tpm_cuda_bench_gemm_rate: bad argument");
    TPM_CUDA_TRY(cudaSetDevice(device));
    int sms = 0;
    TPM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    uint16_t *A = NULL, *B = NULL, *C = NULL;
    cublasHandle_t h = NULL;
    enum { kMaxEv = 1001 };
    cudaEvent_t ev[kMaxEv] = {NULL};
    float *ms = (float *)malloc(sizeof(float) * kMaxEv);
    tpm_status st = TPM_OK;
    const float one = 1.0f, zero = 0.0f;
    int nev = 0;
    /* one GEMM on the default stream; its status goes to st */
    auto gemm_once = [&]() -> bool {
        const cublasStatus_t cs = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_16BF, k, B,
                                               CUDA_R_16BF, k, &zero, C, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT);
        if (cs != CUBLAS_STATUS_SUCCESS) st = tpm_err(TPM_ERR_CUDA, "cublasGemmEx: %s", cublasGetStatusString(cs));
        return cs == CUBLAS_STATUS_SUCCESS;
    };
    if (!ms || cudaMalloc((void **)&A, (size_t)m * k * 2) || cudaMalloc((void **)&B, (size_t)n * k * 2) ||
        cudaMalloc((void **)&C, (size_t)m * n * 2) || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_bench_gemm_rate: setup failed");
        goto done;
    }
    for (; nev < kMaxEv; nev++)
        if (cudaEventCreate(&ev[nev]) != cudaSuccess) {
            st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_bench_gemm_rate: event setup failed");
            goto done;
        }
    k_fill<<<sms * 8, 256>>>((uint32_t *)A, (size_t)m * k / 2, 2u);
    k_fill<<<sms * 8, 256>>>((uint32_t *)B, (size_t)n * k / 2, 3u);
    for (int r = -3; r < reps; r++) { /* burst: one GEMM at a time */
        cudaEventRecord(ev[0]);
        if (!gemm_once()) goto done;
        cudaEventRecord(ev[1]);
        cudaEventSynchronize(ev[1]);
        if (r >= 0) cudaEventElapsedTime(&ms[r], ev[0], ev[1]);
    }
    if (hold_s > 0) {
        const double one_s = median(ms, reps) * 1e-3;
        long total = (long)(hold_s / one_s);
        long timed = total / 2 < kMaxEv - 1 ? total / 2 : kMaxEv - 1;
        if (timed < 1) timed = 1;
        for (long i = 0; i < total - timed; i++) /* reach the power cap */
            if (!gemm_once()) goto done;
        for (long i = 0; i < timed; i++) {
            cudaEventRecord(ev[i]);
            if (!gemm_once()) goto done;
        }
        cudaEventRecord(ev[timed]);
        cudaEventSynchronize(ev[timed]);
        for (long i = 0; i < timed; i++) cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]);
        reps = (int)timed;
    }
    if (cudaGetLastError() != cudaSuccess) {
        st = tpm_err(TPM_ERR_CUDA, "tpm_cuda_bench_gemm_rate: kernel failed");
        goto done;
    }
    *tflops = 2.0 * m * n * (double)k / (median(ms, reps) * 1e-3) / 1e12;
done:
    if (A) cudaFree(A);
    if (B) cudaFree(B);
    if (C) cudaFree(C);
    if (h) cublasDestroy(h);
    for (int i = 0; i < nev; i++) cudaEventDestroy(ev[i]);
    free(ms);
    return st;
}

tpm_status tpm_cuda_bench_gemm_rate(int device, int m, int n, int k, int reps, double *tflops) {
    return gemm_rate(device, m, n, k, reps, 0.0, tflops);
}

tpm_status tpm_cuda_bench_gemm_rate_held(int device, int m, int n, int k, double hold_s, double *tflops) {
    TPM_ARG_CHECK(hold_s > 0, "tpm_cuda_bench_gemm_rate_held: hold_s must be > 0");
    return gemm_rate(device, m, n, k, 5, hold_s, tflops);
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_bench, (k_null))
