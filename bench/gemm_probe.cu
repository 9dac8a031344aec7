/*
 * gemm_probe.cu - a device probe, not part of the library: how fast cuBLAS
 * runs the prefill expert GEMMs of M3 (128 experts, ~256 rows each at 8192
 * tokens) issued as one GEMM per expert (the loop), as one batched GEMM over
 * every expert padded to the same row count, and as one big GEMM (the upper
 * bound). Prints TFLOP/s on the useful FLOPs (2 * rows * N * K).
 * Build: nvcc -O2 -arch=sm_90 bench/gemm_probe.cu -lcublas -o gemm_probe
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            printf("cuda %s at %d\n", cudaGetErrorString(e_), __LINE__);                                      \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)
#define CB(x)                                                                                                  \
    do {                                                                                                       \
        cublasStatus_t s_ = (x);                                                                               \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                     \
            printf("cublas %s at %d\n", cublasGetStatusString(s_), __LINE__);                                 \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

__global__ void k_fill(uint16_t *p, size_t n, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        const float f = ((h & 0xffff) / 65536.0f - 0.5f) * 0.1f;
        p[i] = (uint16_t)(__float_as_uint(f) >> 16);
    }
}

static int E = 128, ROWS = 256;

struct Case {
    const char *name;
    int N, K;
};

int main(int argc, char **argv) {
    if (argc > 1) ROWS = atoi(argv[1]);
    cublasHandle_t h;
    CB(cublasCreate(&h));
    void *ws;
    CK(cudaMalloc(&ws, 64 << 20));
    CB(cublasSetWorkspace(h, ws, 64 << 20));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CB(cublasSetStream(h, s));
    const Case cases[2] = {{"gate_up", 6144, 6144}, {"down", 6144, 3072}};
    const int pads[] = {256, 272, 288, 304, 320, 384};
    printf("# probe: %d experts, %d useful rows each\n", E, ROWS);
    printf("%-8s %-22s %10s %10s\n", "gemm", "issue", "us", "TFLOP/s");
    for (const Case &c : cases) {
        const int N = c.N, K = c.K, nmax = 384;
        uint16_t *W, *X, *C;
        CK(cudaMalloc(&W, (size_t)E * N * K * 2));
        CK(cudaMalloc(&X, (size_t)E * nmax * K * 2));
        CK(cudaMalloc(&C, (size_t)E * nmax * N * 2));
        k_fill<<<1024, 256>>>(W, (size_t)E * N * K, 1);
        k_fill<<<1024, 256>>>(X, (size_t)E * nmax * K, 2);
        CK(cudaDeviceSynchronize());
        const double useful = 2.0 * E * ROWS * (double)N * K;
        const float one = 1.f, zero = 0.f;
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        auto timeit = [&](auto fn, const char *label) -> int {
            std::vector<float> t;
            for (int it = 0; it < 12; it++) {
                CK(cudaEventRecord(a, s));
                if (fn()) return 1;
                CK(cudaEventRecord(b, s));
                CK(cudaEventSynchronize(b));
                float ms;
                CK(cudaEventElapsedTime(&ms, a, b));
                if (it >= 2) t.push_back(ms);
            }
            std::sort(t.begin(), t.end());
            const double us = t[t.size() / 2] * 1e3;
            printf("%-8s %-22s %10.1f %10.1f\n", c.name, label, us, useful / us * 1e-6);
            return 0;
        };
        /* loop: one GEMM per expert, ROWS rows */
        if (timeit(
                [&]() -> int {
                    for (int e = 0; e < E; e++)
                        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, ROWS, K, &one, W + (size_t)e * N * K,
                                        CUDA_R_16BF, K, X + (size_t)e * nmax * K, CUDA_R_16BF, K, &zero,
                                        C + (size_t)e * nmax * N, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT));
                    return 0;
                },
                "loop"))
            return 1;
        /* one big GEMM over every row (no per-expert weights: the upper bound) */
        if (timeit(
                [&]() -> int {
                    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, E * ROWS, K, &one, W, CUDA_R_16BF, K, X,
                                    CUDA_R_16BF, K, &zero, C, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
                    return 0;
                },
                "one big"))
            return 1;
        for (int p : pads) {
            if (p < ROWS) continue;
            char label[64];
            snprintf(label, sizeof label, "strided-batched n=%d", p);
            if (timeit(
                    [&]() -> int {
                        CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, p, K, &one, W, CUDA_R_16BF,
                                                      K, (long long)N * K, X, CUDA_R_16BF, K,
                                                      (long long)nmax * K, &zero, C, CUDA_R_16BF, N,
                                                      (long long)nmax * N, E, CUBLAS_COMPUTE_32F,
                                                      CUBLAS_GEMM_DEFAULT));
                        return 0;
                    },
                    label))
                return 1;
        }
        /* batched over pointer arrays (what a layer with untouched experts would use) */
        std::vector<void *> hp(3 * E);
        for (int e = 0; e < E; e++) {
            hp[e] = W + (size_t)e * N * K;
            hp[E + e] = X + (size_t)e * nmax * K;
            hp[2 * E + e] = C + (size_t)e * nmax * N;
        }
        void **dp;
        CK(cudaMalloc(&dp, sizeof(void *) * 3 * E));
        CK(cudaMemcpy(dp, hp.data(), sizeof(void *) * 3 * E, cudaMemcpyHostToDevice));
        for (int p : {ROWS, 288, 304}) {
            if (p < ROWS) continue;
            char label[64];
            snprintf(label, sizeof label, "ptr-batched n=%d", p);
            if (timeit(
                    [&]() -> int {
                        CB(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, p, K, &one, (const void **)dp,
                                               CUDA_R_16BF, K, (const void **)(dp + E), CUDA_R_16BF, K, &zero,
                                               dp + 2 * E, CUDA_R_16BF, N, E, CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
                        return 0;
                    },
                    label))
                return 1;
        }
        CK(cudaFree(dp));
        CK(cudaFree(W));
        CK(cudaFree(X));
        CK(cudaFree(C));
    }
    return 0;
}
