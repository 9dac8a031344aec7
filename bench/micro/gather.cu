/*
 * gather.cu - the prefill gather (xp[r] = x[t] for each of token t's K permuted rows r) in three
 * forms against a copy of the same bytes, on random routing, inside CUDA graphs (a stand-alone
 * micro-benchmark: it does not link the library; g0 is moe_cuda_combine.cu's k_gather as of
 * round 43, without the programmatic-launch lines).
 *   g0  grid-stride over 16-byte pieces of x (grid capped at 16 blocks per SM); each piece's
 *       thread loads the piece, then the token's K rows one at a time, and stores K times;
 *   g1  one block of 256 threads per token (grid-stride over tokens, 8 blocks per SM): each warp
 *       loads the token's K rows once (lane s row s, shuffled out), every thread loads its
 *       pieces of x first (up to 4, all in flight together), then stores them to the K rows;
 *   g2  g1 with streaming cache hints (ld.global.cs on x, st.global.cs on xp);
 *   cp  the floor: xp[t K + s] = x[t] (the same bytes read and written, rows in token order).
 * Every form's xp is checked bit-equal to g0's (xp poisoned with 0xff before each form).
 * Timing: a graph of 10 launches, replayed 20 times after 2 warm-ups, median per launch.
 * Output: a table on stdout and JSON (argv[1], default gather.json).
 * Build: nvcc -O3 -std=c++17 -arch=sm_90a bench/micro/gather.cu -o gather
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));       \
            return 1;                                                                                \
        }                                                                                            \
    } while (0)

/* inv and xp without __restrict__, as the library's (members of tpm_moe_dev): each inv load waits
 * for the store before it */
__global__ void g0(const uint16_t *__restrict__ x, const int *inv, uint16_t *xp, int T, int H, int K, int lim) {
    const int n8 = H / 8;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)T * n8;
         i += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / n8), c = (int)(i - (size_t)t * n8);
        const uint4 v = reinterpret_cast<const uint4 *>(x + (size_t)t * H)[c];
        for (int sl = 0; sl < K; sl++) {
            const int r = __ldcg(inv + (size_t)t * K + sl);
            if (r < lim) reinterpret_cast<uint4 *>(xp)[(size_t)r * n8 + c] = v;
        }
    }
}

/* g1 (CS = false) is the form a library change would take (any H % 8 == 0, K <= 33). */
template <bool CS>
__global__ void __launch_bounds__(256) g1(const uint16_t *__restrict__ x, const int *inv, uint16_t *xp_, int T,
                                          int H, int K, int lim) {
    const int n8 = H / 8, lane = threadIdx.x & 31;
    uint4 *xp = reinterpret_cast<uint4 *>(xp_);
    for (int t = blockIdx.x; t < T; t += gridDim.x) {
        const int *it = inv + (size_t)t * K;
        const int rl = lane < K ? __ldcg(it + lane) : 0; /* this warp's copy of the token's rows */
        const uint4 *src = reinterpret_cast<const uint4 *>(x + (size_t)t * H);
        for (int c0 = 0; c0 < n8; c0 += 4 * 256) {
            uint4 v[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = c0 + (int)threadIdx.x + 256 * j;
                if (c < n8) v[j] = CS ? __ldcs(src + c) : src[c];
            }
            for (int sl = 0; sl < K; sl++) {
                const int r = sl < 32 ? __shfl_sync(0xffffffffu, rl, sl) : __ldcg(it + sl);
                if (r >= lim) continue;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int c = c0 + (int)threadIdx.x + 256 * j;
                    if (c < n8) {
                        if (CS) __stcs(xp + (size_t)r * n8 + c, v[j]);
                        else xp[(size_t)r * n8 + c] = v[j];
                    }
                }
            }
        }
    }
}

__global__ void cp(const uint16_t *__restrict__ x, uint16_t *__restrict__ xp, int T, int H, int K) {
    const int n8 = H / 8;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)T * n8;
         i += (size_t)gridDim.x * blockDim.x) {
        const int t = (int)(i / n8), c = (int)(i - (size_t)t * n8);
        const uint4 v = reinterpret_cast<const uint4 *>(x + (size_t)t * H)[c];
        for (int sl = 0; sl < K; sl++) reinterpret_cast<uint4 *>(xp)[((size_t)t * K + sl) * n8 + c] = v;
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "gather.json";
    const int H = 6144, E = 128;
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device %s, %d SMs\n", prop.name, sms);
    FILE *jf = fopen(json, "w");
    if (!jf) return 1;
    fprintf(jf, "{\"device\": \"%s\", \"rows\": [", prop.name);
    printf("%6s %2s %-4s %9s %9s %8s %s\n", "tokens", "K", "form", "us", "GB/s", "x_cp", "equal");
    const int Ts[] = {1024, 4096, 8192}, Ks[] = {4, 5};
    int first = 1, bad = 0;
    for (int T : Ts)
        for (int K : Ks) {
            /* random routing: K - 1 (K = 5: the shared slot last, expert E) or K distinct experts */
            const int kr = K == 5 ? 4 : K;
            std::vector<int> sel((size_t)T * K), cnt(E + 1, 0), off(E + 2, 0), inv((size_t)T * K);
            for (int t = 0; t < T; t++) {
                for (int s = 0; s < kr; s++) {
                    int e;
                    bool dup;
                    do {
                        e = (int)(rnd() % E);
                        dup = false;
                        for (int q = 0; q < s; q++) dup |= sel[(size_t)t * K + q] == e;
                    } while (dup);
                    sel[(size_t)t * K + s] = e;
                }
                if (K == 5) sel[(size_t)t * K + 4] = E;
                for (int s = 0; s < K; s++) cnt[sel[(size_t)t * K + s]]++;
            }
            for (int e = 0; e <= E; e++) off[e + 1] = off[e] + cnt[e];
            std::vector<int> fill(off.begin(), off.end() - 1);
            for (int t = 0; t < T; t++)
                for (int s = 0; s < K; s++) inv[(size_t)t * K + s] = fill[sel[(size_t)t * K + s]]++;
            const int rows = T * K;
            std::vector<uint16_t> hx((size_t)T * H);
            for (auto &v : hx) v = (uint16_t)rnd();
            uint16_t *x, *xp;
            int *dinv;
            CK(cudaMalloc(&x, hx.size() * 2));
            CK(cudaMalloc(&xp, (size_t)rows * H * 2));
            CK(cudaMalloc(&dinv, inv.size() * 4));
            CK(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dinv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
            std::vector<uint16_t> ref((size_t)rows * H), got((size_t)rows * H);
            cudaStream_t st;
            CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
            cudaEvent_t e0, e1;
            CK(cudaEventCreate(&e0));
            CK(cudaEventCreate(&e1));
            double cp_us = 0;
            const char *names[] = {"cp", "g0", "g1", "g2"};
            for (int f = 0; f < 4; f++) {
                auto launch = [&](cudaStream_t s) {
                    const int n8 = H / 8;
                    if (f == 0) cp<<<std::min((T * n8 + 255) / 256, sms * 16), 256, 0, s>>>(x, xp, T, H, K);
                    else if (f == 1) g0<<<std::min((T * n8 + 255) / 256, sms * 16), 256, 0, s>>>(x, dinv, xp, T, H, K, rows);
                    else if (f == 2) g1<false><<<std::min(T, sms * 8), 256, 0, s>>>(x, dinv, xp, T, H, K, rows);
                    else g1<true><<<std::min(T, sms * 8), 256, 0, s>>>(x, dinv, xp, T, H, K, rows);
                };
                CK(cudaMemsetAsync(xp, 0xff, (size_t)rows * H * 2, st));
                launch(st);
                CK(cudaGetLastError());
                CK(cudaStreamSynchronize(st));
                bool eq = true;
                if (f == 1) CK(cudaMemcpy(ref.data(), xp, ref.size() * 2, cudaMemcpyDeviceToHost));
                if (f >= 2) {
                    CK(cudaMemcpy(got.data(), xp, got.size() * 2, cudaMemcpyDeviceToHost));
                    eq = memcmp(got.data(), ref.data(), got.size() * 2) == 0;
                }
                if (f == 1) { /* g0 against the host's gather */
                    for (int t = 0; t < T && eq; t++)
                        for (int s = 0; s < K; s++)
                            eq &= memcmp(&ref[(size_t)inv[(size_t)t * K + s] * H], &hx[(size_t)t * H], H * 2) == 0;
                }
                if (!eq) bad++;
                cudaGraph_t g;
                cudaGraphExec_t ge;
                CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                for (int i = 0; i < 10; i++) launch(st);
                CK(cudaStreamEndCapture(st, &g));
                CK(cudaGraphInstantiate(&ge, g, 0));
                std::vector<float> ms;
                for (int rep = 0; rep < 22; rep++) {
                    CK(cudaEventRecord(e0, st));
                    CK(cudaGraphLaunch(ge, st));
                    CK(cudaEventRecord(e1, st));
                    CK(cudaEventSynchronize(e1));
                    float m;
                    CK(cudaEventElapsedTime(&m, e0, e1));
                    if (rep >= 2) ms.push_back(m);
                }
                std::sort(ms.begin(), ms.end());
                const double us = ms[ms.size() / 2] * 100.0; /* ms per 10 launches -> us per launch */
                if (f == 0) cp_us = us;
                const double gbs = ((double)T * H * 2 + (double)rows * H * 2) / (us * 1e3);
                printf("%6d %2d %-4s %9.1f %9.0f %8.2f %s\n", T, K, names[f], us, gbs, us / cp_us,
                       f == 0 ? "-" : (eq ? "yes" : "NO"));
                fprintf(jf, "%s\n {\"tokens\": %d, \"K\": %d, \"form\": \"%s\", \"us\": %.2f, \"GBps\": %.1f, \"equal\": %s}",
                        first ? "" : ",", T, K, names[f], us, gbs, eq ? "true" : "false");
                first = 0;
                CK(cudaGraphExecDestroy(ge));
                CK(cudaGraphDestroy(g));
            }
            CK(cudaFree(x));
            CK(cudaFree(xp));
            CK(cudaFree(dinv));
            CK(cudaStreamDestroy(st));
        }
    fprintf(jf, "\n], \"mismatches\": %d}\n", bad);
    fclose(jf);
    printf("%s\n", bad ? "MISMATCH" : "all forms equal");
    return bad ? 1 : 0;
}
