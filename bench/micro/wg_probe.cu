/*
 * wg_probe.cu - a diagnostic microbenchmark (not part of the library or its tests): where the own
 * wgmma/TMA grouped GEMM of the prefill path (moe_cuda_gemm_sm90a.cu) loses its tensor-core rate
 * at M3's shapes (hidden 6144, expert intermediate 3072). It runs the library's own kernels
 * (the .cu is included here, its entry points renamed, so a variant file can be probed beside it:
 * -DWG_SRC='"path"') on synthetic expert layouts with the same FLOPs where possible:
 *   dense1     one expert of 40960 rows (the 8192-token layer's rows, every weight row reused
 *              40960 times: the GEMM without the MoE's weight traffic);
 *   m3u        128 experts of 256 rows + one shared of 8192 (the 8192-token layer, uniform: no
 *              partial row tiles);
 *   m3r        the same with each of 32768 routed rows sent to a random expert (partial tiles);
 *   m3rr       m3r's routed experts alone (the 8192-token layer's split plan: its shared expert
 *              runs as dense cuBLAS GEMMs);
 *   routed     the 128 experts of m3u alone (every weight block read from HBM for 2 row tiles);
 *   thin, even routed's rows, half the experts with a third row tile: 257 / 255 rows (a 1-row odd
 *              tile) and 320 / 192 (a 64-row odd tile, no padded rows);
 *   shared     the shared expert of m3u alone (8192 rows);
 *   dense8     8 experts of 5120 rows;
 *   m3r4k, m3r1k  16384 / 4096 routed rows sent to random experts + one shared of 4096 / 1024 (the
 *              4096- and 1024-token layers' slot plan; m3r1k's experts are all one partial tile).
 * Each layout runs the persistent 2-CTA clusters (form 2, the layer's default at 8192 tokens) and
 * the persistent CTAs (form 3), band 16, no early launches; cuBLAS runs the dense1 GEMMs as the
 * reference. Per row: the median of 15 timed calls (CUDA events; each call = gather + tile table
 * + gate_up + down; the gather's own median is printed and subtracted), useful TFLOP/s
 * (2 * rows * N * K), the FLOPs the 64-row wgmma granularity issues, and a fingerprint of the
 * output rows (poisoned before each form's calls; every variant of the kernel must print the
 * same fingerprints).
 * Build (from the repository root, after `cmake --build build-crel`):
 *   nvcc -O3 -std=c++17 -arch=sm_90a --fmad=false --expt-relaxed-constexpr -DTPMOE_BUILDING=1 \
 *     -DTPMOE_HAVE_CUDA=1 -D_GNU_SOURCE -Iinclude -Isrc -Isrc/core bench/micro/wg_probe.cu \
 *     build-crel/libtpmoe.a -lcublas -lcublasLt -lnccl -lcuda -o wg_probe
 *   (a variant file outside src/moe: add -Isrc/moe '-DWG_SRC="/path/variant.cu"')
 * Usage: wg_probe [--json FILE] [--layout NAME [--form F] [--reps N]] (one layout, one form, N
 * timed calls after 2 warm-up ones, no cuBLAS: a profiler's run). Exit status 1 on a CUDA or
 * library error or an unknown layout.
 * Timing: the 15 calls of a layout take ~0.13 s, inside the board's power ramp (an H100 at its
 * 700 W cap falls from 1980 to ~1400 MHz within ~0.5 s: r231), so their medians depend on what ran
 * before; compare layouts with --layout L --reps 200 (or under a profiler at locked clocks).
 */
#include "core/cuda_preload.h"
#undef TPM_CUDA_ANCHOR
#define TPM_CUDA_ANCHOR(name, kernel)
#define tpm_moe_wgmma_ok probe_wgmma_ok
#define tpm_moe_wgmma_setup probe_wgmma_setup
#define tpm_moe_prefill_wgmma probe_prefill_wgmma
#ifndef WG_SRC
#define WG_SRC "moe/moe_cuda_gemm_sm90a.cu"
#endif
#include WG_SRC

#include <cublas_v2.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "cuda %s at line %d\n", cudaGetErrorString(e_), __LINE__);                         \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)
#define CT(x)                                                                                                  \
    do {                                                                                                       \
        if ((x) != TPM_OK) {                                                                                   \
            fprintf(stderr, "tpmoe: %s at line %d\n", tpm_last_error(), __LINE__);                             \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

namespace {

constexpr int H = 6144, IL = 3072, MAXR = 40960 + 128, REPS = 15;

__global__ void k_fill(uint16_t *p, size_t n, uint32_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        const float f = ((h & 0xffff) / 65536.0f - 0.5f) * scale;
        p[i] = (uint16_t)(__float_as_uint(f) >> 16);
    }
}

__global__ void k_iota(int32_t *p, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

/* an order-free fingerprint of n bf16 values: sum of v[i] * (odd weight of i) mod 2^64 */
__global__ void k_hash(const uint16_t *p, size_t n, unsigned long long *h) {
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc += (unsigned long long)p[i] * (2 * (unsigned long long)i * 0x9E3779B97F4A7C15ull + 1);
    atomicAdd(h, acc);
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct layout {
    const char *name;
    std::vector<int> rows; /* per expert slot */
};

} // namespace

int main(int argc, char **argv) {
    const char *json = nullptr, *only = nullptr;
    int only_form = 0, reps = REPS;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = argv[i + 1];
        if (!strcmp(argv[i], "--layout")) only = argv[i + 1];
        if (!strcmp(argv[i], "--form")) only_form = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (reps < 1) reps = 1;
    std::vector<layout> L;
    {
        layout a{"dense1", {40960}};
        layout u{"m3u", std::vector<int>(128, 256)};
        u.rows.push_back(8192);
        layout r{"m3r", std::vector<int>(128, 0)};
        uint32_t s = 12345u;
        for (int i = 0; i < 32768; i++) {
            s = s * 1664525u + 1013904223u; /* the high bits: full period */
            r.rows[s >> 25]++;
        }
        layout rr{"m3rr", r.rows}; /* m3r's routed experts alone: the 8192-token layer's split plan */
        r.rows.push_back(8192);
        /* the 4096- and 1024-token layers' layouts (slot plan), drawn the same way */
        layout r4{"m3r4k", std::vector<int>(128, 0)}, r1{"m3r1k", std::vector<int>(128, 0)};
        for (int i = 0; i < 16384; i++) {
            s = s * 1664525u + 1013904223u;
            r4.rows[s >> 25]++;
            if (i < 4096) r1.rows[s >> 25]++;
        }
        r4.rows.push_back(4096);
        r1.rows.push_back(1024);
        layout ro{"routed", std::vector<int>(128, 256)};
        /* the routed rows of `routed` (32768) split so that half the experts have a third row tile:
         * thin: 257 / 255 rows (a 1-row odd tile; 63 padded rows each), even: 320 / 192 (a 64-row
         * odd tile; no padded rows) */
        layout th{"thin", std::vector<int>(128, 0)}, ev{"even", std::vector<int>(128, 0)};
        for (int e = 0; e < 128; e++) {
            th.rows[e] = e & 1 ? 255 : 257;
            ev.rows[e] = e & 1 ? 192 : 320;
        }
        layout sh{"shared", {8192}};
        layout d8{"dense8", std::vector<int>(8, 5120)};
        L = {a, u, r, rr, ro, th, ev, sh, d8, r4, r1};
    }
    int dev = 0, nsm = 0;
    CK(cudaSetDevice(dev));
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device %s, %d SMs\n", prop.name, nsm);

    const int EMAX = 129;
    uint16_t *w13, *w2, *x, *xp, *act, *rows;
    int32_t *offsets, *inv, *rtp;
    CK(cudaMalloc(&w13, (size_t)EMAX * 2 * IL * H * 2));
    CK(cudaMalloc(&w2, (size_t)EMAX * H * IL * 2));
    CK(cudaMalloc(&x, (size_t)MAXR * H * 2));
    CK(cudaMalloc(&xp, (size_t)MAXR * H * 2));
    CK(cudaMalloc(&act, (size_t)MAXR * IL * 2));
    CK(cudaMalloc(&rows, (size_t)MAXR * H * 2));
    CK(cudaMalloc(&offsets, (EMAX + 1) * 4));
    CK(cudaMalloc(&inv, MAXR * 4));
    const size_t rtp_n = 2 * (EMAX + 1) + 4 + EMAX + 1;
    CK(cudaMalloc(&rtp, rtp_n * 4));
    unsigned long long *hsum;
    CK(cudaMalloc(&hsum, 8));
    k_fill<<<1024, 256>>>(w13, (size_t)EMAX * 2 * IL * H, 1u, 0.05f);
    k_fill<<<1024, 256>>>(w2, (size_t)EMAX * H * IL, 2u, 0.05f);
    k_fill<<<1024, 256>>>(x, (size_t)MAXR * H, 3u, 2.0f);
    k_iota<<<160, 256>>>(inv, MAXR);
    CK(cudaDeviceSynchronize());

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    FILE *jf = json ? fopen(json, "w") : nullptr;
    if (jf) fprintf(jf, "{\"device\": \"%s\", \"rows\": [\n", prop.name);
    bool first = true;

    printf("%-8s %4s %6s %6s %9s %9s %9s %9s %8s %8s %16s\n", "layout", "form", "slots", "rows", "call_ms", "gath_ms",
           "gemm_ms", "TFLOP/s", "issued", "pad%", "out_hash");
    int matched = 0;
    for (const layout &l : L) {
        if (only && strcmp(only, l.name)) continue;
        matched++;
        const int E1 = (int)l.rows.size();
        std::vector<int32_t> off(E1 + 1, 0);
        long long issued_rows = 0;
        for (int e = 0; e < E1; e++) {
            off[e + 1] = off[e] + l.rows[e];
            issued_rows += (l.rows[e] + 63) / 64 * 64LL;
        }
        const int T = off[E1];
        CK(cudaMemcpy(offsets, off.data(), (E1 + 1) * 4, cudaMemcpyHostToDevice));
        CK(cudaMemset(rtp, 0, rtp_n * 4));
        tpm_moe_dev d;
        memset(&d, 0, sizeof d);
        d.H = H, d.E = E1, d.E1 = E1, d.k = 1, d.K = 1, d.Il = IL, d.tp = 1, d.ep = 1, d.Eloc = E1, d.Es = E1;
        d.act = TPM_ACT_SWIGLU_OAI, d.alpha = 1.702f, d.limit = 7.0f, d.beta = 1.0f;
        d.w13 = w13, d.w2 = w2, d.offsets = offsets, d.inv = inv, d.xp = xp, d.act_bf = act, d.rows_bf = rows;
        d.sm_count = nsm;
        if (!probe_wgmma_ok(d, dev)) {
            fprintf(stderr, "the wgmma GEMM does not run here\n");
            return 1;
        }
        tpm_moe_wg_ctx c;
        memset(&c, 0, sizeof c);
        c.rtp = rtp;
        CT(probe_wgmma_setup(d, MAXR, &c));
        const double flops = 2.0 * T * (2.0 * IL * H + (double)H * IL);
        const double iflops = 2.0 * issued_rows * (2.0 * IL * H + (double)H * IL);
        /* the gather alone */
        std::vector<float> tg;
        for (int i = 0; i < reps + 2; i++) {
            CK(cudaEventRecord(e0, st));
            CT(tpm_moe_launch_gather(d, x, T, T, 0, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 2) tg.push_back(ms);
        }
        const float gms = median(tg);
        for (int form = 2; form <= 3; form++) {
            if (only_form && form != only_form) continue;
            CK(cudaMemset(rows, 0xff, (size_t)T * H * 2)); /* poison: every output row must be written */
            std::vector<float> tv;
            for (int i = 0; i < reps + 2; i++) {
                CK(cudaEventRecord(e0, st));
                CT(probe_prefill_wgmma(d, c, x, T, form, 16, 0, 0, 0, st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i >= 2) tv.push_back(ms);
            }
            CK(cudaGetLastError());
            unsigned long long hv = 0;
            CK(cudaMemset(hsum, 0, 8));
            k_hash<<<264, 256, 0, st>>>(rows, (size_t)T * H, hsum);
            CK(cudaMemcpyAsync(&hv, hsum, 8, cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            const float ms = median(tv), gemm = ms - gms;
            const double tf = flops / (gemm * 1e-3) / 1e12, itf = iflops / (gemm * 1e-3) / 1e12;
            printf("%-8s %4d %6d %6d %9.3f %9.3f %9.3f %9.1f %8.1f %8.1f %016llx\n", l.name, form, E1, T, ms, gms, gemm,
                   tf, itf, 100.0 * (iflops / flops - 1.0), hv);
            if (jf) {
                fprintf(jf,
                        "%s  {\"layout\": \"%s\", \"form\": %d, \"slots\": %d, \"rows\": %d, \"call_ms\": %.4f, "
                        "\"gather_ms\": %.4f, \"gemm_ms\": %.4f, \"tflops\": %.2f, \"issued_tflops\": %.2f, "
                        "\"out_hash\": \"%016llx\"}",
                        first ? "" : ",\n", l.name, form, E1, T, ms, gms, gemm, tf, itf, hv);
                first = false;
            }
        }
    }

    if (only && !matched) {
        fprintf(stderr, "wg_probe: no layout named '%s'\n", only);
        return 1;
    }
    if (only) { /* one layout (a profiler's run): no cuBLAS */
        if (jf) fprintf(jf, "\n]}\n"), fclose(jf);
        return 0;
    }
    /* cuBLAS on dense1's two GEMMs (row-major C[M x N] = A[M x K] . W[N x K]^T) */
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasSetStream(h, st);
    void *ws;
    CK(cudaMalloc(&ws, 64 << 20));
    cublasSetWorkspace(h, ws, 64 << 20);
    const float one = 1.0f, zero = 0.0f;
    struct g {
        const char *name;
        int M, N, K;
        const uint16_t *A, *W;
        uint16_t *C;
    } gs[2] = {{"gate_up", 40960, 2 * IL, H, x, w13, rows}, {"down", 40960, H, IL, act, w2, rows}};
    float tot = 0;
    for (const g &q : gs) {
        std::vector<float> tv;
        for (int i = 0; i < REPS + 2; i++) {
            CK(cudaEventRecord(e0, st));
            if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, q.N, q.M, q.K, &one, q.W, CUDA_R_16BF, q.K, q.A, CUDA_R_16BF,
                             q.K, &zero, q.C, CUDA_R_16BF, q.N, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
                fprintf(stderr, "cublasGemmEx failed\n");
                return 1;
            }
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 2) tv.push_back(ms);
        }
        const float ms = median(tv);
        tot += ms;
        printf("cublas %-8s %6d x %5d x %5d %9.3f ms %9.1f TFLOP/s\n", q.name, q.M, q.N, q.K, ms,
               2.0 * q.M * q.N * q.K / (ms * 1e-3) / 1e12);
    }
    const double fl = 2.0 * 40960 * 3.0 * IL * H;
    printf("cublas dense1 both  %9.3f ms %9.1f TFLOP/s\n", tot, fl / (tot * 1e-3) / 1e12);
    if (jf) {
        fprintf(jf, ",\n  {\"layout\": \"dense1\", \"form\": \"cublas\", \"gemm_ms\": %.4f, \"tflops\": %.2f}\n]}\n", tot,
                fl / (tot * 1e-3) / 1e12);
        fclose(jf);
    }
    return 0;
}
