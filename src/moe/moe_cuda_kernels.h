/*
 * moe_cuda_kernels.h - device state and kernel launchers shared by the
 * moe_cuda_*.cu files (CUDA C++ only, not installed).
 *
 * Data layout on one rank (Il = local intermediate = inter / tp, E1 = E +
 * n_shared slots; the shared expert is slot E):
 *   w13 bf16 [E1][2*Il][H]   rows 0..Il-1 gate, Il..2Il-1 up (uninterleaved)
 *   w2  bf16 [E1][H][Il]
 *   b13 fp32 [E1][2*Il] or NULL, b2 fp32 [E1][H] or NULL (rank 0 only adds b2)
 *   wr  fp32 [E][H], br fp32 [E] or NULL
 * Routing state (K slots per token; K = k + 1 when the shared expert is fused):
 *   sel/wts [T][K], counts/offsets by expert slot, perm_tok/perm_exp [T*K]
 *   (token and expert of each permuted row, rows grouped by expert in
 *   increasing expert order, tokens increasing inside an expert), inv [T][K]
 *   (permuted row of each (token, slot)), active [n_active] (touched experts
 *   in increasing order), ctr[4] work counters of the persistent kernels.
 */
#ifndef TPM_MOE_CUDA_KERNELS_H
#define TPM_MOE_CUDA_KERNELS_H

#include "internal.h"
#include "moe/moe_cuda.h"
#include "numeric.h"
#include "model/presets.h"

#include <cuda_runtime.h>
#include <stdint.h>

#define TPM_MOE_MAX_SLOTS 257 /* E1 = experts (<= 256) + shared (<= 1) */

/* routing mode 1's polled partials (tpm_moe_dev.pl): slices of H and tokens per plane (the most
 * slices logit_splits gives; the most tokens polled: three rows of 8-token tiles, mode 3's start) */
#define TPM_MOE_POLL_S 16
#define TPM_MOE_POLL_T 24

struct tpm_moe_dev {
    /* shapes and math */
    int H, E, E1, k, K, Il, tp, rank;
    /* expert parallelism: slots 0 .. Eloc-1 hold routed experts e0 .. e0+Eloc-1,
     * slot Es = Eloc the shared expert (E1 = Eloc + n_shared); ep = 1: Eloc = E,
     * e0 = 0, Es = E (slot = expert id). The routing's sel keeps global ids (the
     * shared one is E); the permutation maps them to slots, and with ep > 1
     * the pairs of other ranks go to a drop bucket E1 whose rows start at
     * offsets[E1] (the local row total) and are never computed or combined. */
    int ep, ep_rank, Eloc, e0, Es;
    int fused;
    int route_perm;          /* this call: the permutation by every selecting block (routing modes
                              * 1 and 3 with several 8-token groups; build_permutation_groups); 2:
                              * the same, and in mode 3 with one token tile and polled partials the
                              * selecting blocks (one cluster's) meet at a cluster barrier instead of
                              * the global counter (tuning.route_cluster_meet: up to that many tokens;
                              * round 52) */
    int route_poll;          /* this call: bit 0, routing mode 1's one-row form polls the partials
                              * (pl); bit 1, mode 3's group sums poll the cluster partials (pl3);
                              * bit 2, mode 1's several rows poll theirs (pl); bit 3, mode 3's partial
                              * tiles pushed (st.async) into the summing rank */
    int route_fence;         /* routing tickets: 1 = every thread fences (fence.sc) around the
                              * ticket, 0 = barrier + one acq_rel atomic (block_ticket) */
    unsigned long long *trace; /* diagnostic (TPM_MOE_TRACE builds, tpm_cuda_moe_set_trace): [kernel]
                              * [slot][block] %globaltimer marks of the decode path's launches */
    int gate_up_pipe;        /* this call, decode kernel 2 up to 2 tokens: k_gate_up2's weight loads
                              * in two register stages (tuning.gate_up_pipe) */
    int shared_mma;          /* this call, decode kernel set 2 (k_down2), the fused slot plan without
                              * EP, 3 or more tokens (tuning.shared_mma): the shared slot's gate_up and
                              * down items on tensor cores (mma.sync, tokens as M) instead of the GEMVs */
    int shared_dense;        /* this call, fused layer's split plan (decode path, or EP): the shared
                              * expert runs as a dense MLP into sh_out (with EP on EP rank 0), added
                              * by the combine after the routed slots; with EP the routing sends
                              * every shared slot to the drop bucket, without EP the combine skips
                              * slot k */
    int router, n_groups, topk_groups, act;
    float rsf, alpha, limit, beta;
    /* weights */
    uint16_t *w13, *w2;
    float *b13, *b2, *wr, *br;
    uint16_t *wr3;           /* [3][E][H] bf16: wr = hi + mid + lo exactly (router GEMM on tensor cores) */
    uint16_t *wr3f;          /* wr3 in mma operand order (routing mode 3's pipelined loads), null where
                              * mode 3 cannot run: [H/32][Ep/16][3][2 k-steps][32 lanes] x 16 bytes,
                              * Ep = E padded to 16 (zeros); moe_cuda_route.cu, k_frag_router */
    float *wrf;              /* wr (fp32) in mma operand order (routing mode 3's loads 3: split into hi /
                              * mid / lo in registers), null where mode 3 cannot run: [H/32][Ep/16][4]
                              * [32 lanes] x 16 bytes; moe_cuda_route.cu, k_frag_router_f32 */
    /* routing state */
    float *logits;           /* [S][T][E] partial logits of S slices of H */
    int logit_rows;          /* capacity of logits in rows of E (S * T <= it) */
    float *pl;               /* [2][TPM_MOE_POLL_S][TPM_MOE_POLL_T][E] routing mode 1's polled
                              * partials (route_poll): plane ctr[11] & 1 is this launch's, the other
                              * one is refilled with the sentinel (all ones, never a value) for the
                              * next launch */
    float *pl3;              /* [pl3_rows][E] routing mode 3's polled cluster partials [SC][T][E]
                              * (route_poll bit 1): the sentinel between launches (each group's
                              * poller refills what it read); null where mode 3 cannot run */
    int pl3_rows;
    int32_t *sel;            /* [T][K] */
    float *wts;              /* [T][K] */
    int32_t *counts, *offsets; /* [E1], [E1+1] */
    int32_t *perm_tok, *perm_exp, *inv; /* [T*K] */
    int32_t *active, *n_active; /* [E1], [1] */
    uint32_t *bits, *bitpre; /* [E1 + 1][ceil(T/32)] (row E1: the drop bucket, ep > 1) */
    int32_t *ctr;            /* [16]: 0, 1 scalar decode item counters, 2 route ticket, 3 decode_mma
                              * item counter, 4 its exit counter, 5 its (and k_down2's per-expert
                              * wait's, and build_permutation_groups' wait's) error flag, 7 k_down2's
                              * exit ticket (per-expert wait), 8 and 9 build_permutation_groups'
                              * arrival counters (launches alternate), 10 which one is next, 11
                              * the plane of pl the next polled routing launch writes */
    int32_t *done;           /* [E1] decode_mma / k_down2 with expert_wait: finished gate_up tiles
                              * per expert (zero between launches) */
    int32_t *tile_ctr;       /* [tile_cap] route_fused: finished logit blocks per 8-token tile */
    int tile_cap;
    /* decode buffers */
    float *act_f32;          /* [T*K][Il] */
    int route_tc_wide;       /* this call: mode 3 in 128-token tiles where it can (tuning.route_tc_wide),
                              * 1 or the expert groups of the split forms (2, 4: tuning.route_tc_split) */
    int route_tc_fit;        /* mode 3 on the fewest clusters for its most chunks per CTA (tuning.route_tc_fit) */
    float *rows_f32;         /* [T*K][H] */
    /* prefill buffers (bf16) */
    uint16_t *xp, *h13, *act_bf, *rows_bf; /* [T*K][H], [T*K][2Il], [T*K][Il], [T*K][H] */
    /* unfused shared expert */
    uint16_t *sh_h13, *sh_act, *sh_out;     /* [T][2Il], [T][Il], [T][H]; fused layer: sh_h13 and
                                             * sh_act only, [Td][..] for the split plan (Td = decode rows) */
    int sm_count;
    int tc_clusters[8];      /* route mode 3: clusters of 8 resident at once, [4 (Ep > 128) + loads
                              * (0 ring, 1 direct, 2 pipelined, 3 pipelined fp32)]; 0 = off */
    int tc_wide_clusters;    /* route mode 3's 128-token tiles: the same (0 = off) */
    int cl_ok[2];            /* route mode 4: a cluster of 8 / 16 CTAs with cl_smem_max bytes of shared
                              * memory each fits on the device (0 = not that size) */
    int cl_smem_max;         /* route mode 4: dynamic shared memory per CTA set up (0 = mode 4 off) */
};

/* Prefill on several streams / grouped GEMM: the extra state the layer owns. */
struct tpm_moe_prefill_ctx {
    int mode;                          /* tpm_moe_prefill_gemm */
    void *blas_aux[TPM_MOE_GEMM_NSTREAMS]; /* cublasHandle_t, one per aux stream (own workspace) */
    void *ws_aux[TPM_MOE_GEMM_NSTREAMS];
    cudaStream_t aux[TPM_MOE_GEMM_NSTREAMS];
    cudaEvent_t ev_fork, ev_join[TPM_MOE_GEMM_NSTREAMS];
    cudaEvent_t ev_ptrs;               /* after the last copy of h_ptrs (waited before rewriting it) */
    void **h_ptrs, **d_ptrs;           /* pinned host / device [6][E1] GEMM pointer arrays */
};

/* The own Hopper grouped GEMM of the prefill path (moe_cuda_gemm_sm90a.cu). */
struct tpm_moe_wg_ctx {
    alignas(64) unsigned char maps[7][128]; /* CUtensorMap: xp, w13, act_bf, w2; xp, act_bf, rows_bf in
                                             * 64-row boxes */
    int32_t *rtp;                           /* [2 (E1 + 1) + 4 + E1 + 1] device tile prefixes, two
                                             * item counters, the early gate_up launch's item and exit
                                             * counters, gate_up's stored tiles per expert and the
                                             * down CTAs done (prefill_down_early) */
    int grid_p, grid_pc;                    /* persistent grids: resident CTAs, CTAs of resident 2-clusters */
    int ready;
};

/* Diagnostic timeline of the decode path (compiled in with -DTPM_MOE_TRACE only; a no-op
 * otherwise): thread 0 of block b of kernel k writes %globaltimer (ns) to
 * trace[(k * TPM_MOE_TRACE_SLOTS + slot) * TPM_MOE_TRACE_BLOCKS + b] when d.trace is set.
 * Kernels: 0 routing (modes 1 and 3; slots: 0 start, 1 logits done, 2 last block's end, and in
 * the blocks that run the tail 3 ticket won, 4 slice sums done, 5 warp 0's selection done, 6
 * permutation start), 1 k_gate_up2 (start, after its griddepcontrol.wait, end), 2 k_down2 (the
 * same), 3 the combine (the same), 4 the routing's slots again in SM cycles (%clock64, written
 * beside kernel 0's by TPM_TRACE_MARK_CLK). */
#define TPM_MOE_TRACE_KERNELS 5
#define TPM_MOE_TRACE_SLOTS TPM_MOE_TRACE_EVENT_SLOTS
#define TPM_MOE_TRACE_BLOCKS 2048
#ifdef TPM_MOE_TRACE
#define TPM_TRACE_MARK(d, k, slot, block)                                                            \
    do {                                                                                          \
        if ((d).trace && threadIdx.x == 0 && (block) < TPM_MOE_TRACE_BLOCKS) {                    \
            unsigned long long tpm_tr_;                                                           \
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(tpm_tr_));                          \
            (d).trace[((k) * TPM_MOE_TRACE_SLOTS + (slot)) * TPM_MOE_TRACE_BLOCKS + (block)] = tpm_tr_; \
        }                                                                                         \
    } while (0)
#define TPM_TRACE_MARK_CLK(d, slot, block)                                                        \
    do {                                                                                          \
        TPM_TRACE_MARK(d, 0, slot, block);                                                        \
        if ((d).trace && threadIdx.x == 0 && (block) < TPM_MOE_TRACE_BLOCKS)                      \
            (d).trace[(4 * TPM_MOE_TRACE_SLOTS + (slot)) * TPM_MOE_TRACE_BLOCKS + (block)] =      \
                (unsigned long long)clock64();                                                    \
    } while (0)
#else
#define TPM_TRACE_MARK(d, k, slot, block) \
    do {                                  \
    } while (0)
#define TPM_TRACE_MARK_CLK(d, slot, block) \
    do {                                   \
    } while (0)
#endif

/* The timeline's buffer (moe_cuda_trace.cu): allocate (on = 1, zeroed) or free it, zero it on a
 * stream, read and reduce it into TPM_MOE_TRACE_EVENTS events (tpm_cuda_moe_trace_events). */
tpm_status tpm_moe_trace_set(unsigned long long **trace, int on);
tpm_status tpm_moe_trace_zero(unsigned long long *trace, cudaStream_t s);
tpm_status tpm_moe_trace_read(const unsigned long long *trace, double *ev);

/* Record a CUDA error as a tpm status (clears the sticky-free error). */
#define TPM_CUDA_TRY(expr)                                                                 \
    do {                                                                                   \
        cudaError_t tpm_ce_ = (expr);                                                      \
        if (tpm_ce_ != cudaSuccess)                                                        \
            return tpm_err(TPM_ERR_CUDA, "%s: %s (%s:%d)", #expr, cudaGetErrorString(tpm_ce_), \
                           __FILE__, __LINE__);                                            \
    } while (0)
#define TPM_CUDA_LAUNCHED() TPM_CUDA_TRY(cudaGetLastError())

/* moe_cuda_route.cu: logits, top-k (+ shared slot), counts/offsets/permutation.
 * mode 0: legacy two launches (k_logits, k_select); 1: one launch (route_fused,
 * small T); 2: router GEMM on tensor cores (cuBLAS, blas bound to s) + k_select;
 * 3: tpm_moe_launch_route_tc below (the layer calls it directly).
 * stop (mode 1, diagnostic): 0, or the phase after which the launch stops
 * (tpm_cuda_moe_tuning.route_stop); epw: router experts per warp of the
 * logits blocks (1, 2 or 4; tpm_cuda_moe_tuning.route_experts / 8); wide: mode 1 takes 9 up to
 * this many tokens (<= 16) in one block row of 16-token blocks (tpm_cuda_moe_tuning.route_wide;
 * 0 = never). */
tpm_status tpm_moe_launch_route(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T, int mode,
                                int stop, int epw, int wide, cudaStream_t s);
/* 1 if route mode 1 (one launch) can take T tokens. */
int tpm_moe_route_fused_ok(const tpm_moe_dev &d, int T);
/* moe_cuda_route_tc.cu, mode 3: the whole routing of up to 256 tokens in one launch, the
 * router on tensor cores (clusters of 8 CTAs; a 9.0 device). setup (at layer creation, the
 * device current): kernel attributes and resident clusters (d.tc_clusters; 0 = mode 3 off).
 * stop as mode 1's. */
tpm_status tpm_moe_route_tc_setup(tpm_moe_dev &d, int device);
int tpm_moe_route_tc_ok(const tpm_moe_dev &d, const void *x, int T);
/* clusters: clusters of 8 to spread the work over (0: as many as are resident at once);
 * loads: router and x fragments through a cp.async ring in shared memory (0), straight into
 * registers (1), or straight into registers from wr3f, the next chunks' loads in flight during
 * a chunk's mma (2), or that pipeline from wrf, split in registers (3); the same bits. wide: 128-token
 * tiles where they can run (tuning.route_tc_wide; the launch takes d.route_tc_wide). shape: grid
 * x, token tiles, resident clusters, chunks of 32 h per CTA (at most); 0 if mode 3 cannot take T
 * tokens. */
int tpm_moe_route_tc_shape(const tpm_moe_dev &d, int T, int clusters, int loads, int wide, int shape[4]);
tpm_status tpm_moe_launch_route_tc(const tpm_moe_dev &d, const uint16_t *x, int T, int clusters, int loads,
                                   int stop, cudaStream_t s);
/* moe_cuda_route_cl.cu, mode 4: the whole routing of up to 64 tokens by one cluster of 16 (or 8)
 * CTAs, the router on tensor cores, every meeting a cluster barrier (a 9.0 device, E <= 128,
 * hidden % 32 == 0, wrf). setup (at layer creation, the device current): kernel attributes and
 * the cluster sizes that fit (d.cl_ok; none = mode 4 off). cl: CTAs per cluster, 8 or 16 (0: the
 * largest that fits). shape: CTAs, ring slots, chunks of 32 h per CTA (at most), shared memory
 * bytes; 0 if mode 4 cannot take T tokens. stop as mode 3's. */
tpm_status tpm_moe_route_cl_setup(tpm_moe_dev &d, int device);
int tpm_moe_route_cl_ok(const tpm_moe_dev &d, const void *x, int T, int cl);
int tpm_moe_route_cl_shape(const tpm_moe_dev &d, int T, int cl, int shape[4]);
tpm_status tpm_moe_launch_route_cl(const tpm_moe_dev &d, const uint16_t *x, int T, int cl, int stop,
                                   cudaStream_t s);
/* wr3 = the 3-way bf16 split of wr, and wr3f / wrf (wr3's and wr's mma operand orders) where
 * allocated (after wr changed). */
tpm_status tpm_moe_launch_split_router(const tpm_moe_dev &d, cudaStream_t s);
/* moe_cuda_decode.cu: gate_up + activation, then down (persistent, one pass over weights).
 * skip_shared: leave the fused shared slot (the last touched expert, E) out (split plan). */
tpm_status tpm_moe_launch_decode(const tpm_moe_dev &d, const uint16_t *x, int T, int skip_shared,
                                 cudaStream_t s);
/* moe_cuda_decode.cu, kernel set 2: the same GEMVs; the fused shared slot's
 * gate_up items run before griddepcontrol.wait (overlapping the routing
 * kernel), k_down2 loads its first weights before its wait; pdl: launch both
 * with programmatic dependent launch (else plain launches, same results).
 * down = 1 (T <= 8): k_down4, the down rows through a shared-memory ring
 * filled by cp.async.bulk, instead of k_down2; 2 / 3 / 4: k_down2 with 4 x 2,
 * 1 x 8 or 8 x 1 rows x chunks per warp (0: 2 x 4); gpairs 2 (T <= 8):
 * k_gate_up2 with 2 row pairs x 2 chunks per warp (1: 1 x 4). The same bits.
 * wait 1 (T <= 8, down 2): k_down2's items wait for their expert's gate_up tiles
 * (per-expert counters done[]) instead of the whole k_gate_up2 grid. */
tpm_status tpm_moe_launch_decode2(const tpm_moe_dev &d, const uint16_t *x, int T, int skip_shared, int pdl,
                                  int down, int gpairs, int wait, cudaStream_t s);
/* moe_cuda_decode_mma.cu: the same in one persistent launch on tensor cores (mma.sync);
 * needs H % 32 == 0 and Il % 32 == 0. */
int tpm_moe_decode_mma_ok(const tpm_moe_dev &d);
tpm_status tpm_moe_launch_decode_mma(const tpm_moe_dev &d, const uint16_t *x, int T, cudaStream_t s);
/* moe_cuda_combine.cu: y[t] = sum_s wts[t][s] * (row(t,s) + b2) (+ unfused shared), bf16 out. */
tpm_status tpm_moe_launch_combine(const tpm_moe_dev &d, int T, int rows_bf16, int pdl, uint16_t *y,
                                  cudaStream_t s);
/* moe_cuda_combine.cu: elementwise helpers of the prefill path. */
/* xp's permuted rows below nrows (and below the routing's row total) from the T tokens of x. */
tpm_status tpm_moe_launch_gather(const tpm_moe_dev &d, const uint16_t *x, int T, int nrows, int pdl, cudaStream_t s);
/* act[r][i] = swiglu(h[r][i] + b, h[r][Il+i] + b) for rows r < nrows_max with expert
 * perm_exp[r] (or fixed_expert >= 0); rows past the device total are skipped
 * when use_total. */
tpm_status tpm_moe_launch_act(const tpm_moe_dev &d, const uint16_t *h, uint16_t *act, int nrows,
                              int fixed_expert, cudaStream_t s);
/* moe_cuda_prefill.cu: grouped GEMMs on tensor cores (cuBLAS), one pair per touched
 * expert; h_offsets are the offsets read back to the host (E1 + 1 entries).
 * blas is a cublasHandle_t already bound to the stream. */
tpm_status tpm_moe_prefill_experts(const tpm_moe_dev &d, void *blas, const tpm_moe_prefill_ctx &c,
                                   const uint16_t *x, int T, const int32_t *h_offsets, cudaStream_t s);
/* moe_cuda_gemm_sm90a.cu: the same experts in two launches of tpmoe's own wgmma/TMA
 * grouped GEMM (activation fused into gate_up), no host round trip (capturable).
 * ok: a 9.0 device, H % 256 == 0, Il % 128 == 0, E1 <= 512, the driver's TMA
 * encoder available. setup: the four tensor maps over the layer's buffers
 * (max_rows = the rows capacity of xp / act_bf). */
int tpm_moe_wgmma_ok(const tpm_moe_dev &d, int device);
tpm_status tpm_moe_wgmma_setup(const tpm_moe_dev &d, int max_rows, tpm_moe_wg_ctx *c);
/* down_early (persistent forms 2 and 3): the down launch is chained to gate_up by programmatic
 * dependent launch and each of its producers waits for gate_up's stored tiles of an expert (a
 * counter per expert) before it loads that expert's rows, so down starts on the SMs gate_up's
 * last tiles leave idle.
 * cluster: 0 = one CTA per tile, 1 = 2-CTA clusters sharing the weight tile (multicast),
 * 2 = persistent 2-CTA clusters (pairs sharing B, odd tiles sharing A), 3 = persistent, no clusters.
 * band: row tiles per band of a large expert's tile order (0: none; clusters 1: ignored).
 * skip_shared: the fused shared slot (expert E, the last T rows) is left out
 * (prefill split plan: tpm_moe_shared_split_prefill wrote its rows).
 * early (cluster 2 or 3, fused slot plan, no EP, x 16-byte aligned; else ignored): the gather, the
 * tile table and the gate_up launch are chained by programmatic dependent launch, and the
 * gate_up launch runs the shared slot's items (A from x) before it waits for the routing. */
tpm_status tpm_moe_prefill_wgmma(const tpm_moe_dev &d, const tpm_moe_wg_ctx &c, const uint16_t *x, int T,
                                 int cluster, int band, int skip_shared, int early, int down_early,
                                 cudaStream_t s);
/* The shared expert as a dense MLP over all T tokens -> sh_out (bf16): the unfused layer, and
 * the decode-path split plan of a fused layer (d.shared_dense). */
tpm_status tpm_moe_shared_dense(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T,
                                cudaStream_t s);
/* Prefill split plan of a fused layer: the shared slot's MLP over all T tokens as dense
 * cuBLAS GEMMs (bf16, activation kernel between), its act and output rows written where the
 * slot's permuted rows are (rows T*k .. T*k+T-1 of act_bf and rows_bf). */
tpm_status tpm_moe_shared_split_prefill(const tpm_moe_dev &d, void *blas, const uint16_t *x, int T,
                                        cudaStream_t s);
/* moe_cuda_weights.cu: synthetic weights (moe_cuda_gen.h) of this shard. */
tpm_status tpm_moe_launch_generate(const tpm_moe_dev &d, const tpm_preset *p, uint64_t seed,
                                   cudaStream_t s);

/* sigmoid(z) = 1 / (1 + exp(-z)) in fp32. On the device two MUFU operations, ex2.approx and
 * rcp.approx with flush to zero: relative error below 2^-17.9 (mostly the rounding of z log2(e),
 * about |z| 2^-24 ln 2: 3.7e-6 at |z| = 87), far below the bf16 rounding (2^-9) that every GPU
 * consumer of an activation applies; a sigmoid below 2^-126 (z < -87.3) is flushed to zero. The
 * precise expf and IEEE divide cost the wgmma gate_up 2.6-3.5% at locked clocks (round 41,
 * r236). Every GPU path (decode kernel sets, the activation kernel, the wgmma
 * epilogue) uses this one form, so they agree with each other; the CPU backend (activation.c)
 * keeps expf and the divide; tests/gpu_act.cu holds the two to that bound. Large -z: ex2 gives
 * inf, rcp 0, as the precise form. */
__host__ __device__ __forceinline__ float tpm_moe_sigmoid(float z) {
#ifdef __CUDA_ARCH__
    float e, r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * -1.44269504088896341f));
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
    return r;
#else
    return 1.0f / (1.0f + expf(-z));
#endif
}

/* swiglu-oai / SiLU-GLU in fp32 (device and host). With kind a compile-time constant the
 * branch folds away (the wgmma epilogue instantiates one loop per kind). The clamps are
 * comparisons, as in activation.c, so a NaN gate or up stays NaN (fminf / fmaxf would turn it
 * into the limit, a finite output from a NaN row; round 41). */
__host__ __device__ __forceinline__ float tpm_moe_act(int kind, float g, float u, float alpha,
                                                      float limit, float beta) {
    if (kind == TPM_ACT_SILU_GLU) return g * tpm_moe_sigmoid(g) * u;
    g = g > limit ? limit : g;
    u = u > limit ? limit : (u < -limit ? -limit : u);
    return g * tpm_moe_sigmoid(alpha * g) * (u + beta);
}

#endif /* TPM_MOE_CUDA_KERNELS_H */
