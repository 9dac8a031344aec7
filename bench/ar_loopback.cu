/*
 * ar_loopback.cu - both ranks of a world-2 two-shot all-reduce on ONE GPU
 * (a diagnostic, not a product path): each rank's buffer (control words,
 * flags, two-shot slots, laid out as cuda_comm.cu's alloc_rank does) is a
 * separate allocation on the same GPU, the two ranks' kernels run
 * concurrently on two streams (grid = one CTA per SM each, so both are
 * co-resident), and the "link" is this GPU's own memory.
 *
 * Question (docs/allreduce_cuda_rounds.md, rounds 8-9): are the codec two-shots
 * bound by something local to a GPU (arithmetic, latency, its memory) or by
 * the link? Here one GPU does both ranks' work with the same SMs and HBM
 * but no NVLink: a local-bound kernel takes about twice its two-GPU time, a
 * link-bound one much less.
 *
 * For each (kernel set, codec, size): 20 timed runs after 3 warm-ups,
 * median of max(rank 0, rank 1) by events; outputs compared bitwise between
 * the ranks and against the first set's; error words checked.
 * Build (against the library built in build-prebuilt):
 *   nvcc -O3 -arch=sm_90 -I src -I include -o prebuilt/ar_loopback bench/ar_loopback.cu \
 *        build-prebuilt/libtpmoe.a -lcuda
 * Run: ./ar_loopback [json]
 * LOOPBACK_ONLY=codec,bytes,set (e.g. 3,33554432,5) runs that one point, its
 * last timed iteration between cudaProfilerStart / Stop, for
 *   ncu --replay-mode app-range --clock-control none ... ./ar_loopback
 * LOOPBACK_SOLO=codec,bytes,set (set 19 only) runs rank 0's kernel ALONE:
 * before every launch rank 0's two-shot slots are filled with 0x11 bytes,
 * which set 19 reads as payload that has arrived (no element or word is
 * all-ones), so its polls succeed at once and nothing waits for rank 1: the
 * time and the profile (ncu kernel replay restores the slots every pass) of
 * one rank's local work on the whole GPU; the output values are not
 * checked. */
#include "comm/cuda_comm.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "cuda_check.h"

static uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

int main(int argc, char **argv) {
    const size_t maxb = (size_t)128 << 20; /* largest message, bytes */
    const int n = 2;
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    /* flag slots twice the largest owner segment, so the flag-free kernel's
     * slots (half a flag slot, cuda_comm.h [tl]) hold it too */
    const size_t ll_slot = 16, ts_slot = (2 * maxb / n + 32767) / 32768 * 32768 + 32768;
    const size_t tl_slot = TPM_CUDA_TL_SLOT(ts_slot);
    const size_t ll_off = TPM_CUDA_CTL_BYTES + TPM_CUDA_FLAG_BYTES;
    const size_t ts_off = ll_off + 2 * n * ll_slot, bytes = ts_off + 4 * n * (ts_slot + tl_slot);
    uint8_t *buf[2];
    uint16_t *in[2], *out[2];
    cudaStream_t st[2];
    cudaEvent_t e0, e1[2];
    uint32_t *err_h, *err_d;
    CK(cudaHostAlloc((void **)&err_h, 64, cudaHostAllocMapped));
    memset(err_h, 0, 64);
    CK(cudaHostGetDevicePointer((void **)&err_d, err_h, 0));
    std::vector<uint16_t> h(maxb / 2);
    for (int r = 0; r < 2; r++) {
        CK(cudaMalloc(&buf[r], bytes));
        CK(cudaMemset(buf[r], 0, ll_off));
        CK(cudaMemset(buf[r] + ll_off, 0xff, bytes - ll_off));
        CK(cudaMalloc(&in[r], maxb));
        CK(cudaMalloc(&out[r], maxb));
        uint64_t s = 0x9e3779b97f4a7c15ull * (r + 1);
        for (size_t i = 0; i < h.size(); i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            h[i] = f2bf((float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0));
        }
        CK(cudaMemcpy(in[r], h.data(), maxb, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
        CK(cudaEventCreate(&e1[r]));
    }
    CK(cudaEventCreate(&e0));
    tpm_cuda_ar_args a[2];
    for (int r = 0; r < 2; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].rank = r;
        a[r].world = n;
        a[r].dtype = TPM_DTYPE_BF16;
        a[r].in = in[r];
        a[r].out = out[r];
        a[r].grid = sms; /* one CTA per SM per rank: both ranks co-resident */
        a[r].block = 256;
        for (int p = 0; p < n; p++) {
            a[r].flags[p] = (uint32_t *)(buf[p] + TPM_CUDA_CTL_BYTES);
            a[r].ll[p] = buf[p] + ll_off;
            a[r].ts[p] = buf[p] + ts_off;
        }
        a[r].ll_slot = ll_slot;
        a[r].ts_slot = ts_slot;
        a[r].ctl = (uint32_t *)buf[r];
        a[r].err = err_d;
        a[r].timeout_ns = 2000000000ull;
    }
    if (const char *o = getenv("LOOPBACK_SOLO")) {
        int c = 0, set = 0;
        size_t sz = 0;
        if (sscanf(o, "%d,%zu,%d", &c, &sz, &set) != 3 || set != 19 || sz > maxb) {
            fprintf(stderr, "LOOPBACK_SOLO=codec,bytes,19\n");
            return 1;
        }
        a[0].codec = c;
        a[0].count = sz / 2;
        a[0].variant = set;
        a[0].grid = 2 * sms; /* what the communicator gives a rank */
        std::vector<float> t;
        for (int it = 0; it < 23; it++) {
            CK(cudaMemsetAsync(buf[0] + ts_off + 4 * n * ts_slot, 0x11, 4 * n * tl_slot, st[0]));
            CK(cudaEventRecord(e0, st[0]));
            if (tpm_cuda_twoshot_launch(&a[0], st[0])) return 1;
            CK(cudaEventRecord(e1[0], st[0]));
            CK(cudaStreamSynchronize(st[0]));
            float m = 0;
            CK(cudaEventElapsedTime(&m, e0, e1[0]));
            if (it >= 3) t.push_back(m * 1000.f);
        }
        std::sort(t.begin(), t.end());
        printf("solo rank 0: codec %d, %zu bytes, set %d: %.2f us (median of %zu)%s\n", c, sz, set,
               t[t.size() / 2], t.size(), err_h[TPM_CUDA_ERR_CODE] ? " TIMEOUT" : "");
        return err_h[TPM_CUDA_ERR_CODE] ? 1 : 0;
    }
    FILE *js = argc > 1 ? fopen(argv[1], "w") : nullptr;
    if (js) fprintf(js, "{\"bench\": \"ar_loopback\", \"sms\": %d, \"rows\": [\n", sms);
    const int sets[] = {5, 19};
    const int codecs[] = {TPM_CODEC_NONE, TPM_CODEC_INT8, TPM_CODEC_INT4};
    const char *cname[] = {"none", "int8", "int6", "int4"};
    const size_t sizes[] = {(size_t)8 << 20, (size_t)32 << 20, (size_t)96 << 20};
    std::vector<uint16_t> ref(maxb / 2), o0(maxb / 2), o1(maxb / 2);
    printf("%-6s %-5s %10s %10s %s\n", "codec", "set", "bytes", "us", "check");
    bool first = true;
    int bad = 0;
    int only_c = -1, only_set = -1;
    size_t only_sz = 0;
    if (const char *o = getenv("LOOPBACK_ONLY")) sscanf(o, "%d,%zu,%d", &only_c, &only_sz, &only_set);
    for (int c : codecs)
        for (size_t sz : sizes)
            for (int si = 0; si < 2; si++) {
                const int set = sets[si];
                if (only_c >= 0 && (c != only_c || sz != only_sz || set != only_set)) continue;
                for (int r = 0; r < 2; r++) {
                    a[r].codec = c;
                    a[r].count = sz / 2;
                    a[r].variant = set;
                    CK(cudaMemsetAsync(out[r], 0xA5, sz, st[r]));
                }
                CK(cudaDeviceSynchronize());
                std::vector<float> t;
                for (int it = 0; it < 23; it++) {
                    const bool prof = only_c >= 0 && it == 22;
                    if (prof) CK(cudaProfilerStart());
                    CK(cudaEventRecord(e0, st[0]));
                    CK(cudaStreamWaitEvent(st[1], e0, 0));
                    for (int r = 0; r < 2; r++) {
                        if (tpm_cuda_twoshot_launch(&a[r], st[r])) {
                            fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
                            return 1;
                        }
                        CK(cudaEventRecord(e1[r], st[r]));
                    }
                    CK(cudaDeviceSynchronize());
                    if (prof) CK(cudaProfilerStop());
                    float m0 = 0, m1 = 0;
                    CK(cudaEventElapsedTime(&m0, e0, e1[0]));
                    CK(cudaEventElapsedTime(&m1, e0, e1[1]));
                    if (it >= 3) t.push_back(std::max(m0, m1) * 1000.f);
                }
                std::sort(t.begin(), t.end());
                const float us = t[t.size() / 2];
                CK(cudaMemcpy(o0.data(), out[0], sz, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(o1.data(), out[1], sz, cudaMemcpyDeviceToHost));
                const bool agree = !memcmp(o0.data(), o1.data(), sz);
                if (si == 0) memcpy(ref.data(), o0.data(), sz);
                const bool same = only_c >= 0 || !memcmp(ref.data(), o0.data(), sz);
                const bool ok = agree && same && err_h[TPM_CUDA_ERR_CODE] == 0;
                bad += !ok;
                printf("%-6s %-5d %10zu %10.2f %s\n", cname[c], set, sz, us,
                       ok ? "ok" : err_h[TPM_CUDA_ERR_CODE] ? "TIMEOUT" : !agree ? "RANKS DIFFER" : "DIFFERS FROM SET 5");
                if (js)
                    fprintf(js, "%s  {\"codec\": \"%s\", \"set\": %d, \"bytes\": %zu, \"us\": %.3f, \"ok\": %d}",
                            first ? "" : ",\n", cname[c], set, sz, us, ok ? 1 : 0);
                first = false;
                if (err_h[TPM_CUDA_ERR_CODE]) return 1;
            }
    if (js) {
        fprintf(js, "\n]}\n");
        fclose(js);
    }
    printf("%d bad\n", bad);
    return bad ? 1 : 0;
}
