/*
 * route_tail.cu - a diagnostic microbenchmark and equality check (not part of the library or its
 * tests) of mode 1's tail steps, run by one block with nothing else on the GPU:
 *  - select_token (one warp per token): the library's dispatcher against select_token_pl, the
 *    reference form, on 4096 tokens per router shape (random, tied, NaN, infinite, very negative,
 *    denormal logits; with and without a bias; the smem form of modes 1 / 3 and the global 3-slice
 *    form of k_select): selections and weights must be bit-equal (round 28 ran two other forms
 *    through it, bench/results/r180 and r182; today the dispatcher calls select_token_pl itself);
 *  - build_permutation_direct (one block of 256 threads) against round 27's form (copied below as
 *    perm_direct_r27) on random selections, T = 1 .. 51 with T * K <= 256: every output
 *    bit-equal;
 *  - the latency of each, in SM cycles (clock64), first call and the median of 63 more.
 * It includes moe_cuda_route.cu itself, so it runs the library's own device code. Build (from the
 * repository root, after a CUDA build in build-prebuilt):
 *   nvcc -O3 -arch=sm_90 --fmad=false --expt-relaxed-constexpr -DTPMOE_BUILDING=1 -DTPMOE_HAVE_CUDA=1 \
 *     -D_GNU_SOURCE --options-file build-prebuilt/CMakeFiles/tpmoe_obj.dir/includes_CUDA.rsp \
 *     bench/micro/route_tail.cu build-prebuilt/libtpmoe.a -lcublas -lcublasLt -lnccl -lcuda -o route_tail
 * Exit status 1 if any output differs.
 */
#include "moe/moe_cuda_route.cu"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

namespace {

constexpr int kReps = 64;
constexpr int kMicroPairs = 256; /* the permutation tests' largest T*K (the library gathers up to kDirectPairs) */

/* round 27's build_permutation_direct (touched bitmap, shared atomics, two barriers), the reference */
__device__ void perm_direct_r27(const tpm_moe_dev &d, int T, int *sel_s, uint32_t *touched) {
    const int K = d.K, E1 = d.E1, TK = T * K, nq = (TK + 3) / 4;
    const int tid = threadIdx.x, nth = blockDim.x;
    const int4 *s4 = reinterpret_cast<const int4 *>(sel_s);
    if (d.ep > 1) { /* selections -> slots (the drop bucket E1 sorts last) */
        for (int p = tid; p < TK; p += nth) sel_s[p] = slot_of(d, sel_s[p], p / K);
        __syncthreads();
    }
    for (int p = tid; p < TK; p += nth) {
        const int e = sel_s[p];
        int pos = 0;
#pragma unroll 4
        for (int q4 = 0; q4 < nq; q4++) {
            const int4 v = s4[q4];
            const int q = 4 * q4;
            pos += (v.x < e) | ((v.x == e) & (q < p));
            pos += (v.y < e) | ((v.y == e) & (q + 1 < p));
            pos += (v.z < e) | ((v.z == e) & (q + 2 < p));
            pos += (v.w < e) | ((v.w == e) & (q + 3 < p));
        }
        d.perm_tok[pos] = p / K;
        d.perm_exp[pos] = e;
        d.inv[p] = pos;
        if (e < E1) atomicOr(touched + (e >> 5), 1u << (e & 31));
    }
    for (int e = nth - 1 - tid; e <= E1; e += nth) { /* offsets[E1]: the local row total */
        int cnt = 0, less = 0;
#pragma unroll 4
        for (int q4 = 0; q4 < nq; q4++) {
            const int4 v = s4[q4];
            cnt += (v.x == e) + (v.y == e) + (v.z == e) + (v.w == e);
            less += (v.x < e) + (v.y < e) + (v.z < e) + (v.w < e);
        }
        if (e < E1) d.counts[e] = cnt;
        d.offsets[e] = less;
    }
    __syncthreads();
    for (int e = tid; e < E1; e += nth) {
        const uint32_t w = touched[e >> 5];
        if ((w >> (e & 31)) & 1u) {
            int idx = __popc(w & ((1u << (e & 31)) - 1u));
            for (int i = 0; i < (e >> 5); i++) idx += __popc(touched[i]);
            d.active[idx] = e;
        }
    }
    if (tid == 0) {
        int n = 0;
        for (int i = 0; i < (E1 + 31) / 32; i++) n += __popc(touched[i]);
        *d.n_active = n;
    }
}


/* one warp per token; form 0: the token's logits copied to shared memory (modes 1, 3), form 1:
 * three global slices (k_select after the router GEMM) */
template <bool NEW>
__global__ void k_sel_cmp(tpm_moe_dev d, const float *lg, int T, int form) {
    __shared__ float s_lg[8][256], sc[8][256], gsc[8][32], s_br[256];
    __shared__ int s_sel[8][17];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = blockIdx.x * 8 + warp;
    for (int i = threadIdx.x; i < d.E; i += blockDim.x) s_br[i] = d.br ? d.br[i] : 0.0f;
    __syncthreads();
    if (t >= T) return;
    const float *br = d.br ? s_br : nullptr;
    if (form == 0) {
        for (int e = lane; e < d.E; e += 32) s_lg[warp][e] = lg[(size_t)t * d.E + e];
        __syncwarp();
        if (NEW) select_token(d, t, s_lg[warp], 0, 0, br, sc[warp], gsc[warp], s_sel[warp]);
        else if (d.E <= 128) select_token_pl<4>(d, t, s_lg[warp], 0, 0, br, sc[warp], gsc[warp], s_sel[warp]);
        else select_token_pl<8>(d, t, s_lg[warp], 0, 0, br, sc[warp], gsc[warp], s_sel[warp]);
    } else {
        const float *row = lg + (size_t)t * 3 * d.E;
        if (NEW) select_token(d, t, row, (size_t)d.E, 3, br, sc[warp], gsc[warp], s_sel[warp]);
        else if (d.E <= 128) select_token_pl<4>(d, t, row, (size_t)d.E, 3, br, sc[warp], gsc[warp], s_sel[warp]);
        else select_token_pl<8>(d, t, row, (size_t)d.E, 3, br, sc[warp], gsc[warp], s_sel[warp]);
    }
}

template <bool NEW>
__global__ void k_perm_cmp(tpm_moe_dev d, int T, const int *sel) {
    __shared__ __align__(16) int s_sel[kMicroPairs + 4];
    __shared__ uint32_t scratch[16];
    for (int i = threadIdx.x; i < T * d.K; i += blockDim.x) s_sel[i] = sel[i];
    if (threadIdx.x < 4) s_sel[T * d.K + threadIdx.x] = INT_MAX;
    if (threadIdx.x < 16) scratch[threadIdx.x] = 0u;
    __syncthreads();
    if (NEW) build_permutation_direct(d, T, s_sel, scratch);
    else perm_direct_r27(d, T, s_sel, scratch);
}

template <bool NEW>
__global__ void k_sel_time(tpm_moe_dev d, const float *lg, long long *cyc) {
    __shared__ float s_lg[256], s_br[256], sc[8][256], gsc[8][32];
    __shared__ int s_sel[32];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        s_lg[i] = i < d.E ? lg[i] : 0.0f;
        s_br[i] = i < d.E && d.br ? d.br[i] : 0.0f;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    for (int r = 0; r < kReps; r++) {
        __syncwarp();
        const long long t0 = clock64();
        if (NEW) select_token(d, 0, s_lg, 0, 0, s_br, sc[0], gsc[0], s_sel);
        else select_token_pl<4>(d, 0, s_lg, 0, 0, s_br, sc[0], gsc[0], s_sel);
        __syncwarp();
        const long long t1 = clock64();
        if (threadIdx.x == 0) cyc[r] = t1 - t0;
    }
}

template <bool NEW>
__global__ void k_perm_time(tpm_moe_dev d, int T, const int *sel, long long *cyc) {
    __shared__ __align__(16) int s_sel[kMicroPairs + 4];
    __shared__ uint32_t scratch[16];
    for (int r = 0; r < kReps; r++) {
        for (int i = threadIdx.x; i < T * d.K; i += blockDim.x) s_sel[i] = sel[i];
        if (threadIdx.x < 4) s_sel[T * d.K + threadIdx.x] = INT_MAX;
        if (threadIdx.x < 16) scratch[threadIdx.x] = 0u;
        __syncthreads();
        const long long t0 = clock64();
        if (NEW) build_permutation_direct(d, T, s_sel, scratch);
        else perm_direct_r27(d, T, s_sel, scratch);
        __syncthreads();
        const long long t1 = clock64();
        if (threadIdx.x == 0) cyc[r] = t1 - t0;
    }
}

long long med(const long long *h) {
    std::vector<long long> v(h + 1, h + kReps);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f;
}

} // namespace

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)

struct bufs {
    float *lg, *br;
    int *sel;
    long long *cyc;
};

static void dev_alloc(tpm_moe_dev &d, int T, int K, int E1) {
    CK(cudaMalloc(&d.sel, (size_t)T * K * 4));
    CK(cudaMalloc(&d.wts, (size_t)T * K * 4));
    CK(cudaMalloc(&d.perm_tok, (size_t)T * K * 4));
    CK(cudaMalloc(&d.perm_exp, (size_t)T * K * 4));
    CK(cudaMalloc(&d.inv, (size_t)T * K * 4));
    CK(cudaMalloc(&d.counts, (E1 + 2) * 4));
    CK(cudaMalloc(&d.offsets, (E1 + 2) * 4));
    CK(cudaMalloc(&d.active, (E1 + 2) * 4));
    CK(cudaMalloc(&d.n_active, 4));
}

static void dev_poison(tpm_moe_dev &d, int T, int K, int E1) {
    CK(cudaMemset(d.sel, 0xa5, (size_t)T * K * 4));
    CK(cudaMemset(d.wts, 0xa5, (size_t)T * K * 4));
    CK(cudaMemset(d.perm_tok, 0xa5, (size_t)T * K * 4));
    CK(cudaMemset(d.perm_exp, 0xa5, (size_t)T * K * 4));
    CK(cudaMemset(d.inv, 0xa5, (size_t)T * K * 4));
    CK(cudaMemset(d.counts, 0xa5, (E1 + 2) * 4));
    CK(cudaMemset(d.offsets, 0xa5, (E1 + 2) * 4));
    CK(cudaMemset(d.active, 0xa5, (E1 + 2) * 4));
    CK(cudaMemset(d.n_active, 0xa5, 4));
}

static std::vector<unsigned char> grab(const void *p, size_t n) {
    std::vector<unsigned char> h(n);
    CK(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost));
    return h;
}

/* logits of token t by kind t % 8: uniform, ties, NaN, +-inf, very negative (slow reciprocals),
 * all equal, signed zeros and denormals, large */
static float gen_logit(unsigned *s, int t, int e) {
    const float u = frand(s);
    switch (t % 8) {
    case 1: return (float)((int)(u * 4.0f)) * 0.5f - 1.0f;
    case 2: return u < 0.1f ? NAN : u * 8.0f - 4.0f;
    case 3: return u < 0.05f ? INFINITY : u < 0.15f ? -INFINITY : u * 8.0f - 4.0f;
    case 4: return -80.0f - u * 40.0f;
    case 5: return 0.25f;
    case 6: return u < 0.3f ? -0.0f : u < 0.6f ? 0.0f : (u - 0.6f) * 1e-40f;
    case 7: return 50.0f + u * 100.0f;
    default: return u * 8.0f - 4.0f;
    }
    (void)e;
}

int main() {
    int bad = 0;
    const int T = 4096;
    struct cfg {
        int E, k, router, fused, bias, groups, topk_groups;
    } cfgs[] = {
        {128, 4, TPM_ROUTER_SIGMOID_BIAS, 1, 1, 0, 0},  {128, 4, TPM_ROUTER_SIGMOID_BIAS, 0, 0, 0, 0},
        {128, 4, TPM_ROUTER_SOFTMAX_TOPK, 0, 0, 0, 0},  {256, 8, TPM_ROUTER_SIGMOID_BIAS, 1, 1, 0, 0},
        {96, 4, TPM_ROUTER_SIGMOID_BIAS, 0, 1, 0, 0},   {200, 6, TPM_ROUTER_SOFTMAX_TOPK, 1, 0, 0, 0},
        {32, 16, TPM_ROUTER_SIGMOID_BIAS, 1, 1, 0, 0},  {256, 8, TPM_ROUTER_GROUPED_SIGMOID, 1, 1, 8, 4},
        {160, 5, TPM_ROUTER_GROUPED_SIGMOID, 0, 1, 1, 1}, {32, 4, TPM_ROUTER_SIGMOID_BIAS, 1, 1, 0, 0},
        {128, 4, TPM_ROUTER_GROUPED_SIGMOID, 1, 1, 1, 1},
    };
    for (const cfg &c : cfgs) {
        tpm_moe_dev d;
        memset(&d, 0, sizeof d);
        d.H = 6144, d.E = c.E, d.E1 = c.E + (c.fused ? 1 : 0), d.k = c.k, d.K = c.k + (c.fused ? 1 : 0), d.ep = 1;
        d.Eloc = c.E, d.Es = c.E, d.fused = c.fused, d.router = c.router, d.rsf = 2.5f;
        d.n_groups = c.groups, d.topk_groups = c.topk_groups;
        dev_alloc(d, T, d.K, d.E1);
        unsigned seed = 12345u + (unsigned)c.E * 7u + (unsigned)c.k;
        std::vector<float> hl((size_t)T * c.E), h3((size_t)T * 3 * c.E), hb(c.E);
        for (int t = 0; t < T; t++)
            for (int e = 0; e < c.E; e++) hl[(size_t)t * c.E + e] = gen_logit(&seed, t, e);
        for (int t = 0; t < T; t++) /* three slices whose sum (in order) is some value */
            for (int sp = 0; sp < 3; sp++)
                for (int e = 0; e < c.E; e++)
                    h3[((size_t)t * 3 + sp) * c.E + e] = sp == 0 ? hl[(size_t)t * c.E + e] : (frand(&seed) - 0.5f) * 1e-3f;
        for (int e = 0; e < c.E; e++) hb[e] = (e % 5 == 0) ? 0.0f : (frand(&seed) - 0.5f) * 0.2f;
        float *lg, *l3;
        CK(cudaMalloc(&lg, hl.size() * 4));
        CK(cudaMalloc(&l3, h3.size() * 4));
        CK(cudaMemcpy(lg, hl.data(), hl.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(l3, h3.data(), h3.size() * 4, cudaMemcpyHostToDevice));
        if (c.bias) {
            CK(cudaMalloc(&d.br, c.E * 4));
            CK(cudaMemcpy(d.br, hb.data(), c.E * 4, cudaMemcpyHostToDevice));
        }
        for (int form = 0; form < 2; form++) {
            std::vector<unsigned char> r[2][2];
            for (int nw = 0; nw < 2; nw++) {
                dev_poison(d, T, d.K, d.E1);
                if (nw) k_sel_cmp<true><<<T / 8, 256>>>(d, form ? l3 : lg, T, form);
                else k_sel_cmp<false><<<T / 8, 256>>>(d, form ? l3 : lg, T, form);
                CK(cudaDeviceSynchronize());
                r[nw][0] = grab(d.sel, (size_t)T * d.K * 4);
                r[nw][1] = grab(d.wts, (size_t)T * d.K * 4);
            }
            int diff = 0;
            for (int t = 0; t < T; t++)
                if (memcmp(&r[0][0][(size_t)t * d.K * 4], &r[1][0][(size_t)t * d.K * 4], d.K * 4) ||
                    memcmp(&r[0][1][(size_t)t * d.K * 4], &r[1][1][(size_t)t * d.K * 4], d.K * 4))
                    diff++;
            printf("select E=%3d k=%2d router=%d fused=%d bias=%d groups=%d form=%d: %d of %d tokens differ\n", c.E,
                   c.k, c.router, c.fused, c.bias, c.groups, form, diff, T);
            bad += diff != 0;
        }
        /* the permutation: selections of real shape (k distinct routed experts, then the shared slot) */
        if (c.router != TPM_ROUTER_GROUPED_SIGMOID) {
            int *sel;
            CK(cudaMalloc(&sel, (kMicroPairs + 4) * 4));
            static const int Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 28, 32, 51};
            for (int rep = 0; rep < 90; rep++) {
                const int Tp = Ts[rep % 15];
                if (Tp * d.K > kMicroPairs) continue;
                std::vector<int> hs((size_t)Tp * d.K);
                for (int t = 0; t < Tp; t++) {
                    for (int j = 0; j < c.k; j++) {
                        int e;
                        bool dup;
                        do { /* a few experts only in some reps: heavy collisions */
                            e = (int)(frand(&seed) * (rep % 3 == 0 ? 6 : c.E)) % c.E;
                            dup = false;
                            for (int i = 0; i < j; i++) dup |= hs[(size_t)t * d.K + i] == e;
                        } while (dup && c.k <= (rep % 3 == 0 ? 6 : c.E));
                        hs[(size_t)t * d.K + j] = e;
                    }
                    if (c.fused) hs[(size_t)t * d.K + c.k] = c.E;
                }
                if (rep % 3 == 0 && c.k > 6) continue;
                CK(cudaMemcpy(sel, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
                std::vector<unsigned char> r[2][6];
                for (int nw = 0; nw < 2; nw++) {
                    dev_poison(d, T, d.K, d.E1);
                    if (nw) k_perm_cmp<true><<<1, 256>>>(d, Tp, sel);
                    else k_perm_cmp<false><<<1, 256>>>(d, Tp, sel);
                    CK(cudaDeviceSynchronize());
                    int na = 0;
                    CK(cudaMemcpy(&na, d.n_active, 4, cudaMemcpyDeviceToHost));
                    r[nw][0] = grab(d.perm_tok, (size_t)Tp * d.K * 4);
                    r[nw][1] = grab(d.perm_exp, (size_t)Tp * d.K * 4);
                    r[nw][2] = grab(d.inv, (size_t)Tp * d.K * 4);
                    r[nw][3] = grab(d.counts, (size_t)d.E1 * 4);
                    r[nw][4] = grab(d.offsets, (size_t)(d.E1 + 1) * 4);
                    r[nw][5] = grab(d.active, (size_t)(na > 0 && na <= d.E1 ? na : 1) * 4);
                    r[nw][5].push_back((unsigned char)na);
                }
                for (int i = 0; i < 6; i++)
                    if (r[0][i] != r[1][i]) {
                        printf("permutation E=%d K=%d T=%d: output %d differs\n", c.E, d.K, Tp, i);
                        bad++;
                        break;
                    }
            }
            printf("permutation E=%3d K=%2d T=1..51 (T*K <= %d): checked\n", c.E, d.K, kMicroPairs);
            CK(cudaFree(sel));
        }
        if (c.E == 128 && c.k == 4 && c.fused && c.router == TPM_ROUTER_SIGMOID_BIAS) { /* m3: the timings */
            long long *cyc, h[kReps];
            int *sel;
            CK(cudaMalloc(&cyc, kReps * 8));
            CK(cudaMalloc(&sel, (kMicroPairs + 4) * 4));
            std::vector<int> hs(24 * 5);
            for (int t = 0; t < 24; t++) {
                for (int j = 0; j < 4; j++) hs[t * 5 + j] = (t * 37 + j * 29) % 128;
                hs[t * 5 + 4] = 128;
            }
            CK(cudaMemcpy(sel, hs.data(), hs.size() * 4, cudaMemcpyHostToDevice));
            for (int nw = 0; nw < 2; nw++) {
                if (nw) k_sel_time<true><<<1, 256>>>(d, lg, cyc);
                else k_sel_time<false><<<1, 256>>>(d, lg, cyc);
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost));
                printf("cycles %s select_token (1 warp, 1 token, m3): first %lld, median %lld\n", nw ? "library" : "select_token_pl",
                       h[0], med(h));


                for (int Tp : {1, 8, 24}) {
                    if (nw) k_perm_time<true><<<1, 256>>>(d, Tp, sel, cyc);
                    else k_perm_time<false><<<1, 256>>>(d, Tp, sel, cyc);
                    CK(cudaDeviceSynchronize());
                    CK(cudaMemcpy(h, cyc, sizeof h, cudaMemcpyDeviceToHost));
                    printf("cycles %s build_permutation_direct T=%d (256 threads): first %lld, median %lld\n",
                           nw ? "library" : "r27", Tp, h[0], med(h));
                }
            }
        }
    }
    printf("%s\n", bad ? "FAILED: outputs differ" : "all outputs equal");
    return bad ? 1 : 0;
}
