/*
 * moe_cuda.h - the CUDA MoE layer (one rank = one GPU), internal API used by
 * the benchmark, the GPU tests and (later) the tpm_moe_t CUDA backend.
 *
 * One layer instance owns one GPU's shard of one MoE layer: every expert
 * (the shared one included, stored as slot E) is sharded on its
 * intermediate dimension over `tp` ranks. forward = route -> experts ->
 * combine -> all-reduce (TP > 1), all on one stream; with the decode path the
 * whole block is capturable in one CUDA graph. The prefill path reads the
 * per-expert counts back to the host once per call (cuBLAS needs host sizes)
 * and is therefore not capturable; tpm_cuda_moe_capturable() says which.
 *
 * Conventions (identical to the CPU reference, shared/reference/minimax-m3.md):
 * routed scaling factor folded into the routed weights; the fused shared
 * expert is slot k of every token with weight 1.0; the down bias (gpt-oss) is
 * added by rank 0 only; slots are summed in slot order (deterministic).
 * Tensors: x and y are bf16 [T x H] row-major device arrays.
 */
#ifndef TPM_MOE_CUDA_H
#define TPM_MOE_CUDA_H

#include "model/moe_weights.h"
#include "model/presets.h"
#include "tpmoe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpm_cuda_moe tpm_cuda_moe;

typedef enum tpm_moe_path {
    TPM_MOE_PATH_AUTO = 0,    /* decode up to tuning.decode_max_tokens, else prefill */
    TPM_MOE_PATH_DECODE = 1,  /* persistent decode kernels (<= TPM_MOE_DECODE_MAX_NT tokens) */
    TPM_MOE_PATH_PREFILL = 2  /* grouped cuBLAS GEMMs on tensor cores */
} tpm_moe_path;

/* Largest batch the decode kernels take (tokens per expert, the shared slot
 * gets all of them). */
#define TPM_MOE_DECODE_MAX_NT 32

typedef struct tpm_cuda_moe_desc {
    const tpm_preset *preset;
    int device;      /* CUDA device of this rank */
    int tp, rank;    /* intermediate-dimension shard rank of tp */
    int fuse_shared; /* 1: shared expert = slot E of the grouped launch; 0: dense MLP beside it */
    int max_tokens;  /* largest T of any call */
    void *nccl_comm; /* ncclComm_t for the all-reduce over tp x ep ranks (required when tp * ep > 1) */
    int ep, ep_rank; /* expert parallelism (0 or 1: none): this rank holds routed experts
                      * [ep_rank * E/ep, (ep_rank + 1) * E/ep) (each split over tp on its
                      * intermediate); fused shared expert: token t's shared slot runs on EP
                      * rank t % ep; unfused: the dense shared MLP runs on EP rank 0 */
} tpm_cuda_moe_desc;

tpm_status tpm_cuda_moe_create(const tpm_cuda_moe_desc *d, tpm_cuda_moe **out);
void tpm_cuda_moe_destroy(tpm_cuda_moe *m);

/* Upload this rank's shard of host fp32 weights (rounded to bf16; routers
 * and biases stay fp32). Interleaved gate_up rows are de-interleaved. */
tpm_status tpm_cuda_moe_upload(tpm_cuda_moe *m, const tpm_moe_weights *w);
/* Generate this rank's shard of the synthetic layer of moe_cuda_gen.h on the
 * GPU (no host copy of the experts). */
tpm_status tpm_cuda_moe_generate(tpm_cuda_moe *m, uint64_t seed);
/* The router weight [E x H] / bias [E] the generator uses (host fp32). */
void tpm_cuda_moe_gen_router(const tpm_preset *p, uint64_t seed, float *router, float *bias);

tpm_status tpm_cuda_moe_set_path(tpm_cuda_moe *m, tpm_moe_path path);

/* Implementation choices. The defaults are the measured best
 * (docs/moe_cuda_rounds.md); the benchmark can force each one to compare them. */
typedef struct tpm_cuda_moe_tuning {
    int decode_kernel;     /* 0: two scalar GEMV kernels (round 3);
                            * 1: one persistent tensor-core kernel (measured slower);
                            * 2 (default, measured fastest): the GEMV kernels of set 2 (shared
                            *    slot's gate_up items start before the routing finishes, down's
                            *    first loads before gate_up finishes; needs `pdl` to overlap) */
    int decode_max_tokens; /* path AUTO: decode up to this many tokens (1..TPM_MOE_DECODE_MAX_NT) */
    int route_legacy;      /* 1: the old two-launch routing (for comparison) */
    int route_gemm_min;    /* routing: one fused launch below this many tokens, the router GEMM
                            * (3 x bf16 on tensor cores, exact fp32 products) + select at and above */
    int shared_split_min;  /* fused layer, decode path with kernel 0: from this many tokens the
                            * shared slot runs as a dense cuBLAS MLP over the same weight memory
                            * (TPM_MOE_SHARED_SPLIT), below it inside the GEMV launches
                            * (TPM_MOE_SHARED_SLOT); > TPM_MOE_DECODE_MAX_NT: never split */
    int prefill_gemm;      /* prefill expert GEMMs: TPM_MOE_GEMM_LOOP, _GROUPED, _STREAMS or _WGMMA */
    int pdl;               /* decode kernel 2: 1 = launch gate_up, down and the combine with
                            * programmatic dependent launch (not on the legacy NULL stream) */
    int route_stop;        /* diagnostic (benchmark only; results invalid when > 0): the fused
                            * routing launch stops after its logits (1), after the slice sums
                            * (2) or after the selection (3); times each phase by difference.
                            * TPM_MOE_TRACE builds also take 5 / 6: mode 1's one-tile tail runs
                            * its selection / permutation twice (results valid), slot 6 of the
                            * trace between the two */
    int down_kernel;       /* decode kernel 2 up to 8 tokens: 0 = k_down2 (work items of 16
                            * rows from a counter, weights through registers), 1 = k_down4
                            * (8-row items copied with cp.async.bulk into a shared-memory ring
                            * by a producer warp), 2 / 3 / 4 = k_down2 with 4 rows x 2 chunks /
                            * 1 row x 8 / 8 rows x 1 per warp (2 x 4 in 0); all the same bits */
    int shared_overlap;    /* split or unfused (dense) shared plan: 1 = the routing
                            * call also issues the shared expert's dense MLP on a side stream,
                            * joined right after the routing launch, so the two overlap (the
                            * routing call then includes the shared MLP and the experts call
                            * skips it); 0 = after it; 2 = on the decode path the experts call
                            * issues it on the side stream beside the routed decode kernels
                            * (joined before it returns; round 35), on the prefill path as 1 */
    int prefill_cluster;   /* prefill_gemm 3: -1 = by size (default: 3 below 4096 tokens, 2 from
                            * it, measured), 0 = one CTA per tile, 1 = 2-CTA clusters sharing
                            * each weight tile by multicast TMA (no faster), 2 = persistent
                            * 2-CTA clusters (row-tile pairs sharing the weight tile, odd last
                            * row tiles sharing the A tile), 3 = persistent CTAs; both persistent
                            * forms take their tiles from a counter; all the same bits */
    int prefill_split_min; /* fused layer, prefill with prefill_gemm 3: from this many tokens the
                            * shared slot runs as dense cuBLAS GEMMs (TPM_MOE_SHARED_SPLIT),
                            * its rows where the slot's would be, the routed experts in the
                            * own kernel; below it the slot is one more expert of that kernel */
    int prefill_split_max; /* fused layer, prefill with prefill_gemm 3: the split plan also up to
                            * this many tokens (0: never below prefill_split_min) */
    int prefill_band;      /* prefill_gemm 3 (clusters 0, 2, 3): an expert with more row tiles
                            * than this runs them in bands of this many, each band's weight
                            * blocks one after the other (its A rows stay in L2); 0 = one band */
    int gate_up_pairs;     /* decode kernel 2 up to 8 tokens: gate/up row pairs per warp of
                            * k_gate_up2, 1 (x 4 chunks per lane) or 2 (x 2); 0 (default) = by
                            * size (tpm_cuda_moe_gate_up_pairs_for); the same bits */
    int route_experts;     /* routing modes 0 and 1: router experts per logits block (8, 16 or
                            * 32; with up to 16 slices of H the grid has E/route_experts x
                            * ceil(T/8) x slices blocks); 0 (default) = by size
                            * (tpm_cuda_moe_route_experts_for) */
    int route_tc_min, route_tc_max; /* routing mode 3 (one launch, router on tensor cores, clusters;
                            * a 9.0 device, E <= 256, hidden % 32 == 0, T <= 256) for
                            * route_tc_min <= T <= route_tc_max; 0 = never; else modes 1 / 2 */
    int route_tc_clusters; /* mode 3: clusters of 8 CTAs the work is spread over (0 = as many as
                            * the device holds at once, from the occupancy query) */
    int route_tc_loads;    /* mode 3: router / x fragments straight from global memory into
                            * registers (1), through a cp.async ring in shared memory (0), or
                            * straight into registers in a pipeline of register stages, the
                            * router's from its operand-order copy (2), or the same pipeline from
                            * the fp32 router's operand-order copy, split into hi / mid / lo in
                            * registers (3, the default since round 51: two thirds of 2's router
                            * bytes); the same bits */
    int gate_up_pipe;      /* decode kernel 2 up to 2 tokens: 1 = k_gate_up2 keeps two register
                            * stages of weight chunks, the next stage's loads issued before the
                            * current one's FMAs (2 blocks per SM instead of 4); the same bits */
    int route_fence;       /* routing's block-done tickets: 1 = every thread __threadfence()s
                            * around the ticket, 0 = a barrier and one acq_rel atomic; the same
                            * results */
    int expert_wait;       /* decode kernel 2 up to 8 tokens with down_kernel 2: 1 = each down
                            * item waits for its own expert's gate_up tiles (per-expert counters,
                            * acquire / release), 0 = for the whole gate_up grid (griddepcontrol);
                            * the same bits */
    int prefill_early;     /* fused layer, slot plan, prefill_gemm 3 in a persistent form (CTAs or
                            * 2-CTA clusters), no EP, pdl: up to this many tokens the gather, the
                            * tile table and the gate_up launch are chained by programmatic
                            * dependent launch and the shared slot's gate_up items (A from x) run
                            * before the launch waits for the routing (0 = never; default 8192,
                            * measured); the same bits */
    int prefill_down_early; /* prefill_gemm 3 in a persistent form, pdl: up to this many tokens
                            * the down launch is chained to gate_up by programmatic dependent
                            * launch and waits per expert for gate_up's stored tiles (a device
                            * counter), so it starts on the SMs gate_up's last tiles leave idle
                            * (0 = never; default 8192, measured); the same bits */
    int shared_mma;        /* fused layer, decode kernel set 2, the slot plan without EP (down_kernel
                            * other than 1): from this many tokens (at least 3) the shared slot's
                            * gate_up and down items run on tensor cores (mma.sync, tokens as M;
                            * moe_cuda_decode.cu) instead of the scalar GEMVs, whose multi-token
                            * items are bound by instruction issue; 0 = never. Other bits than the
                            * GEMVs (another summation order), the same in every run */
    int route_wide;        /* routing mode 1 from 9 up to this many tokens (at most 16): both
                            * 8-token tiles in one row of 512-thread blocks (one ticket; 16 warps
                            * select; the one-tile permutation) instead of two rows of 256-thread
                            * blocks and a second ticket (only while that grid is one wave);
                            * 0 = never; default 11 (measured); the same bits */
    int route_perm_min;    /* routing modes 1 (two or more 8-token tiles) and 3: from this many
                            * tokens every block that selected an 8-token group writes that
                            * group's rows of the permutation (all groups wait for each other,
                            * bounded), instead of the last group's block building all of them
                            * after a second ticket; 0 = never; default 25 (measured); never
                            * above 256 tokens; the same outputs (round 49) */
    int route_poll;        /* partial logits that land in a buffer of sentinels, polled
                            * (bounded) by the block that sums them, instead of a fenced ticket
                            * after which the last block reads them; bit 0: routing mode 1 with
                            * one row of logits blocks (1-8 tokens, and the wide form); bit 1:
                            * mode 3's cluster partials, each 8-token group's by its block of the
                            * last cluster; bit 2: mode 1's several rows (9-24 tokens), each row's
                            * by its last block (not with route_perm_min's permutation); 0 =
                            * tickets; bit 3 (round 51): mode 3's CTAs push their partial tiles
                            * into the summing rank's shared memory (st.async on its mbarrier;
                            * direct loads) instead of it reading theirs after a cluster barrier;
                            * bit 4 (round 54): mode 3's polled cluster sums of a tile of at
                            * most 64 tokens split evenly over the cluster's 8 ranks (a tile of
                            * fewer tokens than its size had them on its first ranks alone);
                            * bit 5 (round 55): with the cluster meeting (route_cluster_meet),
                            * the groups' poll of the cluster partials split evenly over the
                            * last cluster's 8 ranks, the sums stored into the selecting CTAs'
                            * shared memory; default 23 (measured); the same bits (round 50) */
    int route_cl_min, route_cl_max; /* routing mode 4 (round 52: one launch of ONE cluster of 16
                            * CTAs, or 8, the router on tensor cores, every meeting a cluster
                            * barrier; a 9.0 device, E <= 128, hidden % 32 == 0, T <= 64) for
                            * route_cl_min <= T <= route_cl_max (before mode 3's range); 0 =
                            * never. Other H slices than mode 3: its own bits, the same in every run */
    int route_cl_size;     /* mode 4: CTAs per cluster, 8 or 16 (0 = the largest the device fits) */
    int route_cluster_meet; /* mode 3 with one token tile (T <= 64), polled partials and the
                            * permutation by every group's block (route_perm_min): up to this
                            * many tokens the selecting blocks (all in the last cluster along H)
                            * meet at a cluster barrier, above it at build_permutation_groups'
                            * global counter (0 = never; default 32, measured); the same outputs
                            * (round 52) */
    int route_tc_wide;     /* mode 3 from this many tokens (0 = never) in 128-token tiles, the x
                            * slice staged in shared memory (round 53): each CTA reads half the
                            * router bytes of the 64-token tiles' CTAs at the same token count.
                            * Fp32 router fragments (route_tc_loads 3), E <= 128, polled partials
                            * (route_poll bit 1), at least two clusters per tile, at most 4 chunks
                            * of 32 h per CTA; else the 64-token tiles. The same bits as the
                            * 64-token tiles over the same H slices (route_tc_clusters); default 1
                            * (measured: wherever mode 3 runs) */
    int route_tc_fit;      /* mode 3 with route_tc_clusters 0: 1 = on the fewest clusters per token
                            * tile that keep the most chunks of 32 h per CTA of the resident maximum
                            * (each group then polls fewer partials; other H slices, their own bits);
                            * 0 = the resident maximum; default 1 (measured; round 53) */
    int route_tc_split;    /* mode 3's 128-token tiles with the experts split in this many groups
                            * (1, 2 or 4; round 54): each cluster computes one group's experts over
                            * EG times the H slices, its warps split the chunks EG ways and add
                            * their tiles in shared memory, so each cluster's sums read 1/EG of
                            * the bytes through distributed shared memory and each 8-token group
                            * polls 1/EG of the partials. E = 128 only (else 1); its own bits,
                            * the same in every run; default 1 */
} tpm_cuda_moe_tuning;

/* How the shared expert runs in one call (tpm_cuda_moe_shared_plan). */
typedef enum tpm_moe_shared_plan {
    TPM_MOE_SHARED_NONE = 0,  /* the preset has no shared expert */
    TPM_MOE_SHARED_SLOT = 1,  /* fused: slot E of the routed launches (decode) or GEMMs (prefill) */
    TPM_MOE_SHARED_SPLIT = 2, /* fused layer, split for this call: dense cuBLAS MLP over slot E's
                               * weights, its fp32 rows land where the slot's would (same combine) */
    TPM_MOE_SHARED_DENSE = 3  /* unfused layer (fuse_shared = 0): dense MLP, added by the combine */
} tpm_moe_shared_plan;

/* Prefill expert GEMMs (tuning.prefill_gemm). */
typedef enum tpm_moe_prefill_gemm {
    TPM_MOE_GEMM_LOOP = 0,    /* one cublasGemmEx per touched expert, on the caller's stream */
    TPM_MOE_GEMM_GROUPED = 1, /* one cublasGemmGroupedBatchedEx for gate_up, one for down */
    TPM_MOE_GEMM_STREAMS = 2, /* the loop spread round-robin over TPM_MOE_GEMM_NSTREAMS streams */
    TPM_MOE_GEMM_WGMMA = 3    /* tpmoe's own grouped wgmma/TMA kernel, activation fused, no host
                               * round trip (capturable); a 9.0 device and fitting shapes only */
} tpm_moe_prefill_gemm;
#define TPM_MOE_GEMM_NSTREAMS 4
tpm_status tpm_cuda_moe_set_tuning(tpm_cuda_moe *m, const tpm_cuda_moe_tuning *t);
tpm_status tpm_cuda_moe_get_tuning(const tpm_cuda_moe *m, tpm_cuda_moe_tuning *t);
/* Path AUTO picks for T tokens; 1 if that call can be captured in a graph. */
tpm_moe_path tpm_cuda_moe_path_for(const tpm_cuda_moe *m, int T);
int tpm_cuda_moe_capturable(const tpm_cuda_moe *m, int T);
/* The routing mode a call with T tokens (16-byte aligned input) runs: 0 legacy, 1 one launch,
 * 2 router GEMM + select, 3 one launch on tensor cores, 4 one cluster on tensor cores. */
int tpm_cuda_moe_route_mode(const tpm_cuda_moe *m, int T);
/* The bounded waits inside the decode kernels (decode_kernel 1, expert_wait 1) and the routing
 * (route_perm_min: each token group's block for the others) never hang: a
 * wait past its bound (seconds) sets a device flag. This reads it (a synchronous copy, after
 * the calls it covers): TPM_ERR_TIMEOUT when set (the outputs since the last check are
 * invalid; the flag is cleared), else TPM_OK. */
tpm_status tpm_cuda_moe_check(tpm_cuda_moe *m);
/* Runs the layer's route / experts / combine once per token-count bucket (1..8, then steps of
 * 1.33-1.5x up to max_tokens), and on EP rank 0 the dense shared MLP at every bucket of its staged
 * row count, on private streams, and waits for them: every library call site has had its first
 * use (cuBLASLt loads kernel libraries then, which waits for the device) before a forward can run
 * beside another rank's all-reduce (bench/results/r117, r120). The public backend calls it after
 * the upload. */
tpm_status tpm_cuda_moe_warm(tpm_cuda_moe *m);
/* Diagnostic timeline of the decode path (builds with -DTPM_MOE_TRACE, cmake
 * -DTPMOE_MOE_TRACE=ON; else TPM_ERR_UNSUPPORTED): on = 1 allocates the marks and every later
 * launch (and graph captured after it) records %globaltimer at its blocks' start, after their
 * griddepcontrol.wait and at their end; 0 frees them. trace_reset zeroes them on stream;
 * trace_events reads them (synchronous) as us from the routing's first block start:
 * ev[7k + s] for kernel k = routing (modes 1 and 3), k_gate_up2, k_down2, combine and s = 0
 * first start, 1 (routing: last block's logits done; others: the first block past its wait), 2
 * last end, and for the routing's tail (the latest block): 3 ticket won, 4 slice sums done, 5
 * warp 0's selection done, 6 permutation start; -1 where nothing was recorded. ev[28 + s]: the
 * routing's slots s in SM cycles after slot 3 (the latest block's %clock64; meaningful where one
 * block runs the whole tail: mode 1 up to 8 tokens). Slots 3-6 of kernels 1 and 2 (unused by the
 * decode kernels): mode 3's extra marks, the latest block (kernel 1: 3 cluster barrier passed, 4
 * cluster sums stored, 5 start, 6 cluster arrive) and the earliest (kernel 2: 3 logits done, 4
 * group ticket won, 5 slice sums done, 6 cluster barrier passed). */
#define TPM_MOE_TRACE_EVENT_SLOTS 7 /* events per kernel: ev[TPM_MOE_TRACE_EVENT_SLOTS * k + s] */
#define TPM_MOE_TRACE_EVENTS (5 * TPM_MOE_TRACE_EVENT_SLOTS)
tpm_status tpm_cuda_moe_set_trace(tpm_cuda_moe *m, int on);
tpm_status tpm_cuda_moe_trace_reset(tpm_cuda_moe *m, void *stream);
tpm_status tpm_cuda_moe_trace_events(tpm_cuda_moe *m, double ev[TPM_MOE_TRACE_EVENTS]);
/* Mode 3's launch for T tokens: shape = {grid x (CTAs along H), token tiles, clusters of 8
 * resident at once, chunks of 32 h per CTA}; 0 if mode 3 cannot take T tokens. */
int tpm_cuda_moe_route_tc_shape(const tpm_cuda_moe *m, int T, int shape[4]);
/* Mode 4's launch for T tokens: CTAs, ring slots, chunks of 32 h per CTA, shared memory bytes;
 * 0 if mode 4 cannot take T tokens. */
int tpm_cuda_moe_route_cl_shape(const tpm_cuda_moe *m, int T, int shape[4]);
/* Whether a call with T tokens runs the shared slot on tensor cores (tuning.shared_mma). */
int tpm_cuda_moe_shared_mma(const tpm_cuda_moe *m, int T);
/* The shared-expert plan a call with T tokens runs (tpm_moe_shared_plan). */
int tpm_cuda_moe_shared_plan(const tpm_cuda_moe *m, int T);
/* Whether a call of T tokens issues its shared MLP (split or unfused plan) beside the routing
 * (tuning.shared_overlap 1, or 2 on the prefill path; not on the legacy NULL stream). */
int tpm_cuda_moe_overlaps_shared(const tpm_cuda_moe *m, int T);
/* The gate/up row pairs per warp k_gate_up2 runs with at T tokens: the tuning's 1 or 2, or by
 * size (0): 1 where this rank's experts have at most TPM_MOE_GUP1_MAX_ROWS (384) gate rows and
 * T is 2..4, else 2 (bench/results/r127, r128). */
int tpm_cuda_moe_gate_up_pairs_for(const tpm_cuda_moe *m, int T);
/* Router experts per logits block of routing modes 0 / 1 for T tokens: the tuning's, or by size
 * when it is 0 (32 up to 2 tokens, 8 at 3-4, 16 above). */
int tpm_cuda_moe_route_experts_for(const tpm_cuda_moe *m, int T);
/* The form of the own prefill GEMM a call with T tokens runs (prefill_cluster 0..3, the
 * by-size default resolved); -1 when the call does not run it (decode path, cuBLAS prefill). */
int tpm_cuda_moe_prefill_form(const tpm_cuda_moe *m, int T);

/* The whole block. stream is a cudaStream_t (NULL: legacy default). */
tpm_status tpm_cuda_moe_forward(tpm_cuda_moe *m, const void *x, int T, void *y, void *stream);
/* Its phases, for per-phase timing (each needs the previous ones to have
 * run with the same x and T). */
tpm_status tpm_cuda_moe_route(tpm_cuda_moe *m, const void *x, int T, void *stream);
tpm_status tpm_cuda_moe_experts(tpm_cuda_moe *m, const void *x, int T, void *stream);
tpm_status tpm_cuda_moe_combine(tpm_cuda_moe *m, int T, void *y, void *stream);
tpm_status tpm_cuda_moe_allreduce(tpm_cuda_moe *m, void *y, int T, void *stream);

/* MARK: inspection (synchronous) */
int tpm_cuda_moe_slots(const tpm_cuda_moe *m);     /* slots per token in the grouped launch */
int tpm_cuda_moe_local_inter(const tpm_cuda_moe *m);
/* Routing of the last route() call: sel/wts [T x slots] (global expert ids, the
 * fused shared expert = E), counts by slot [E1] (E1 = E/ep + n_shared: with EP
 * the counts of this rank's local slots, the shared slot counting its tokens). */
tpm_status tpm_cuda_moe_get_routing(tpm_cuda_moe *m, int T, int32_t *sel, float *wts,
                                    int32_t *counts);
/* The same without the device sync: the caller has waited for the stream that ran the
 * routing (an event after it), so other streams of the GPU (other ranks' where ranks share
 * it, an engine's) are not waited for. */
tpm_status tpm_cuda_moe_read_routing(tpm_cuda_moe *m, int T, int32_t *sel, float *wts,
                                     int32_t *counts);
/* bf16 bits of this rank's shard of expert slot e (a local slot: with EP, slot
 * s < E/ep is expert ep_rank * E/ep + s and slot E/ep the shared expert): gate_up [2*Il x H]
 * (rows 0..Il-1 gate, Il..2Il-1 up, uninterleaved), down [H x Il]. */
tpm_status tpm_cuda_moe_get_expert(tpm_cuda_moe *m, int slot, uint16_t *gate_up, uint16_t *down);
/* Bytes of one expert slot's weights on this rank. */
uint64_t tpm_cuda_moe_expert_bytes(const tpm_cuda_moe *m);

/* MARK: measurement helpers (moe_cuda_bench.cu), for the floors of the benchmark */
/* HBM read bandwidth (GB/s) of a 16-byte-load read kernel over `bytes`, median of reps. */
tpm_status tpm_cuda_bench_read_bw(int device, size_t bytes, int reps, double *gbps);
/* bf16 GEMM rate (TFLOP/s) of cuBLAS on random m x n x k, median of reps. */
tpm_status tpm_cuda_bench_gemm_rate(int device, int m, int n, int k, int reps, double *tflops);
/* The same GEMM queued back to back for hold_s seconds (the board at its power
 * cap, as during a long benchmark); median of the second half. */
tpm_status tpm_cuda_bench_gemm_rate_held(int device, int m, int n, int k, double hold_s, double *tflops);
/* Evict the L2 (enqueued on stream): mode 0 writes `bytes` of scratch (leaves
 * the L2 full of dirty lines), mode 1 reads them (leaves clean lines); mode
 * 2 evicts nothing (a 50 us wait, so the host's launch latency still hides). */
tpm_status tpm_cuda_bench_flush(void *scratch, size_t bytes, int mode, void *stream);
/* One empty kernel on stream (the harness's fixed cost of a captured launch). */
tpm_status tpm_cuda_bench_null(void *stream);

/* MARK: NCCL helpers for TP inside one process (one host thread per GPU). */
tpm_status tpm_cuda_nccl_init_all(int n, const int *devices, void **comms);
void tpm_cuda_nccl_destroy(void *comm);
/* ncclGroupStart (begin != 0) / ncclGroupEnd, for one thread driving several ranks. */
tpm_status tpm_cuda_nccl_group(int begin);

#ifdef __cplusplus
}
#endif
#endif /* TPM_MOE_CUDA_H */
