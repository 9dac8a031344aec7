/*
 * fence_probe.cu - what a system-scope release per column costs a stream of
 * peer pushes (two GPUs of one host, both pushing to each other at once).
 *
 * Question (docs/allreduce_cuda_rounds.md, round 9): the codec two-shots move 4.6-9
 * KB per column and CTA and then release a flag with st.release.sys, whose
 * MEMBAR.ALL.SYS waits for the CTA's (or the SM's) remote stores to land.
 * If that wait is what bounds them, a push stream with one release per
 * small chunk runs far under the link rate, and the rate recovers with
 * larger chunks or without the fence.
 *
 * Kernel: every CTA pushes its share of `bytes` to the peer in chunks of
 * `chunk` bytes (16-byte stores of a register pattern: no HBM reads), and
 * after each chunk, by mode:
 *   0  nothing (the raw push rate);
 *   1  __syncthreads, thread 0 st.release.sys of a flag, __syncthreads (the
 *      two-shot's pattern: the CTA waits for the release);
 *   2  __syncthreads, thread 0 st.release.sys, no second barrier (only
 *      thread 0's warp waits; the others push the next chunk);
 *   3  __syncthreads, thread 0 st.relaxed.sys of the flag, __syncthreads
 *      (the barriers without the fence);
 *   4  __syncthreads, thread 0 fence.acq_rel.sys, then the flag store with
 *      st.relaxed.sys, __syncthreads (mode 1 spelled as a fence);
 *   5, 6  as 0 with 4-byte / 8-byte stores (a warp's stores contiguous).
 * Nobody waits on the flags: this measures the sender's side only.
 * Timing: events around 20 back-to-back launches per GPU, median of 15
 * repetitions, both GPUs started together; GB/s = bytes per GPU per second.
 * Build: nvcc -O3 -arch=sm_90 -o fence_probe bench/fence_probe.cu
 * Run:   ./fence_probe [json]
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "cuda_check.h"

__global__ void __launch_bounds__(256) push(uint4 *dst, unsigned *flag, size_t per_cta, int chunk, int mode,
                                            unsigned epoch) {
    uint4 *base = dst + (size_t)blockIdx.x * (per_cta / 16);
    const int words = chunk / 16;
    const uint4 v = make_uint4(threadIdx.x, blockIdx.x, epoch, 0x5a5a5a5au);
    for (size_t c0 = 0; c0 < per_cta / 16; c0 += words) {
        if (mode == 5) { /* 4-byte stores, a warp's 32 contiguous (128 bytes) */
            uint32_t *b4 = reinterpret_cast<uint32_t *>(base + c0);
            for (int w = threadIdx.x; w < 4 * words; w += blockDim.x) b4[w] = v.x ^ (uint32_t)w;
            continue;
        }
        if (mode == 6) { /* 8-byte stores */
            uint2 *b8 = reinterpret_cast<uint2 *>(base + c0);
            for (int w = threadIdx.x; w < 2 * words; w += blockDim.x) b8[w] = make_uint2(v.x, (uint32_t)w);
            continue;
        }
        for (int w = threadIdx.x; w < words; w += blockDim.x) base[c0 + w] = v;
        if (mode == 0) continue;
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned *f = flag + blockIdx.x;
            if (mode == 1 || mode == 2) {
                asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(f), "r"(epoch) : "memory");
            } else if (mode == 3) {
                asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(f), "r"(epoch) : "memory");
            } else {
                asm volatile("fence.acq_rel.sys;" ::: "memory");
                asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(f), "r"(epoch) : "memory");
            }
        }
        if (mode != 2) __syncthreads();
    }
}

int main(int argc, char **argv) {
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    if (n < 2) {
        printf("fence_probe: needs 2 GPUs (found %d)\n", n);
        return 0;
    }
    const size_t bytes = 32u << 20;
    uint4 *buf[2];
    unsigned *flg[2];
    cudaStream_t st[2];
    cudaEvent_t e0[2], e1[2];
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int d = 0; d < 2; d++) {
        CK(cudaSetDevice(d));
        CK(cudaDeviceEnablePeerAccess(1 - d, 0));
        CK(cudaMalloc(&buf[d], bytes));
        CK(cudaMalloc(&flg[d], 4096 * 4));
        CK(cudaStreamCreateWithFlags(&st[d], cudaStreamNonBlocking));
        CK(cudaEventCreate(&e0[d]));
        CK(cudaEventCreate(&e1[d]));
    }
    FILE *js = argc > 1 ? fopen(argv[1], "w") : nullptr;
    if (js) fprintf(js, "{\"bench\": \"fence_probe\", \"bytes_per_gpu\": %zu, \"sms\": %d, \"rows\": [\n", bytes, sms);
    const int chunks[] = {2048, 4096, 8192, 16384, 32768, 65536};
    const int occs[] = {1, 2};
    const char *names[] = {"none", "rel+bar", "rel", "bar", "fence+bar", "none-st4", "none-st8"};
    printf("%-10s %4s %7s %10s %8s\n", "mode", "occ", "chunk", "us", "GB/s");
    bool first = true;
    unsigned epoch = 1;
    for (int occ : occs)
        for (int chunk : chunks)
            for (int mode = 0; mode < 7; mode++) {
                if (mode >= 5 && chunk != 16384) continue;
                const int grid = sms * occ;
                const size_t per_cta = bytes / grid / (size_t)chunk * chunk;
                if (per_cta == 0) continue;
                std::vector<float> t;
                for (int rep = 0; rep < 16; rep++) {
                    for (int d = 0; d < 2; d++) {
                        CK(cudaSetDevice(d));
                        CK(cudaEventRecord(e0[d], st[d]));
                        for (int i = 0; i < 20; i++)
                            push<<<grid, 256, 0, st[d]>>>(buf[1 - d], flg[1 - d], per_cta, chunk, mode, epoch++);
                        CK(cudaGetLastError());
                        CK(cudaEventRecord(e1[d], st[d]));
                    }
                    float ms = 0.f;
                    for (int d = 0; d < 2; d++) {
                        CK(cudaSetDevice(d));
                        CK(cudaEventSynchronize(e1[d]));
                        float m = 0.f;
                        CK(cudaEventElapsedTime(&m, e0[d], e1[d]));
                        ms = std::max(ms, m);
                    }
                    if (rep > 0) t.push_back(ms * 1000.f / 20.f); /* first: warm-up */
                }
                std::sort(t.begin(), t.end());
                const float us = t[t.size() / 2];
                const double moved = (double)per_cta * grid;
                printf("%-10s %4d %7d %10.2f %8.1f\n", names[mode], occ, chunk, us, moved / us / 1e3);
                if (js)
                    fprintf(js, "%s  {\"mode\": \"%s\", \"ctas_per_sm\": %d, \"chunk\": %d, \"us\": %.3f, \"gbps\": %.2f}",
                            first ? "" : ",\n", names[mode], occ, chunk, us, moved / us / 1e3);
                first = false;
            }
    if (js) {
        fprintf(js, "\n]}\n");
        fclose(js);
    }
    return 0;
}
