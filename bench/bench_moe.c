/*
 * bench_moe.c - `tpmoe bench moe`: the CUDA MoE layer (fused shared expert)
 * validated against an fp64 host reference on a sample of tokens, then timed.
 *
 *   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 [--tp 2] [--ep 2] [--shard N]
 *                   [--fuse-shared 0|1|both|0,1] [--path auto|decode|prefill]
 *                   [--decode-kernel 0|1|2] [--pdl 0|1] [--decode-max N] [--route-gemm-min N]
 *                   [--route-legacy 0|1] [--route-experts 8|16|32] [--route-tc MIN:MAX]
 *                   [--shared-plan auto|slot|split]
 *                   [--prefill-gemm loop|grouped|streams] [--flush write|read|none] [--reps N]
 *                   [--check N] [--seed S] [--gemm-hold S] [--json FILE] [--png FILE]
 *
 * Weights are generated on the GPU (moe_cuda_gen.h), never on the host; the
 * reference reads back only the experts the sample tokens touch. Per token
 * count: per-phase times (routing, experts, combine, all-reduce) as medians
 * of CUDA-graph replays (prefill calls, which read counts back to the host,
 * are timed eagerly with events), the L2 flushed before every replay (the
 * flush is queued right before the start event and the graph, so the
 * host's launch latency hides behind it, as in a serving loop that runs
 * ahead of the GPU); the
 * memory floor (bytes of the experts this batch touched / HBM read bandwidth
 * measured in this run) and the compute floor (FLOPs / cuBLAS bf16 GEMM rate
 * measured in this run; also the same GEMM held back to back for --gemm-hold
 * seconds, the rate at the board's power cap, printed beside it as x_held:
 * x_flr stays against the burst rate, the floor). TP runs one host thread per GPU; the layer ends with tpmoe's exact
 * all-reduce (tpm_allreduce_ex, as tpm_moe_forward; --allreduce nccl: the
 * layer's ncclAllReduce). Each
 * row names the shared-expert plan that ran (slot: fused into the routed
 * launches; split: fused layer, shared slot as dense GEMMs for this call;
 * dense: unfused layer) and the prefill GEMM issue mode. The L2 flush
 * reads 256 MB (default: clean lines) or writes them (--flush write: the L2
 * is then full of dirty lines that every timed graph first writes back);
 * the harness's fixed cost, an empty captured kernel after the same flush,
 * is printed and written as null_kernel_us. The default flush is the read
 * (since round 5): before an MoE layer a serving loop's L2 holds mostly the
 * previous layers' weights, i.e. clean lines; 256 MB of dirty lines whose
 * write-back every timed graph pays is the pessimistic case (--flush write).
 * --shard N times TP rank 0's share of a TP N layer alone on one GPU (no
 * all-reduce; checked against the fp64 share). Options: bench_moe_opts.c.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#ifndef TPMOE_HAVE_CUDA
int cmd_bench_moe(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: tpmoe bench moe [options] (needs a CUDA build)\n");
            return 0;
        }
    fprintf(stderr, "tpmoe bench moe: this build has no CUDA (configure with -DTPMOE_CUDA=ON)\n");
    return 1;
}
#else

#include "internal.h"
#include "model/presets.h"
#include "moe/moe_cuda.h"
#include "moe/moe_cuda_gen.h"
#include "moe/moe_math.h"
#include "numeric.h"

#include <cuda_runtime_api.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "bench_moe_opts.h"


typedef struct phase_times {
    double route, experts, combine, allreduce, total;
} phase_times;

/* One (fuse, T) measurement. */
typedef struct row {
    int fused, T, path, n_active, decode_kernel, pdl, down_kernel, gate_up_pairs, route_mode, shared_plan, prefill_gemm;
    int prefill_form; /* the own GEMM's form (prefill_cluster 0..3), -1 where it does not run */
    int shared_overlap; /* the shared MLP ran beside the routing (1, plan printed with a '+') or
                         * beside the routed decode kernels (2, '~') */
    int shared_mma;     /* the shared slot on tensor cores (tuning.shared_mma; plan printed "slotm") */
    double bytes, flops, mem_floor_us, flop_floor_us, flop_floor_held_us;
    phase_times t;
    double max_rel_err;
    int sel_mismatch, sel_near_tie, checked;
} row;

typedef struct shared_state {
    const opts *o;
    int fused;
    pthread_barrier_t bar;
    void *nccl[MAX_TP];
    int nact[MAX_TP]; /* touched slots of each rank (EP: they differ) */
    tpm_comm_t ar[MAX_TP]; /* tpmoe's CUDA communicators (--allreduce tpmoe) */
    tpm_cuda_moe *moe[MAX_TP];
    uint16_t *hx; /* host x [Tmax x H] */
    int T;
    /* reference: assembled expert being checked */
    uint16_t *g13, *g2; /* [2I x H], [H x I] */
    int cur_slot;
    row r;
    row *rows;
    int nrows;
    tpm_status st[MAX_TP];
    double hbm_gbps, gemm_tflops, gemm_tflops_held, null_us;
} shared_state;

/* MARK: host reference (fp64) */


/* y += w * E(x) for the assembled expert in g13/g2 (full, unsharded) of logical
 * (generator) slot gslot. Presets with expert biases (gpt-oss): the gate / up
 * biases are added before the activation and the down bias to the expert's
 * output, before the routing weight (src/moe/experts.c); they are recomputed
 * from the generator (moe_cuda_gen.h), not read back from the GPU. */
static void ref_expert(const tpm_preset *p, uint64_t seed, uint32_t gslot, const uint16_t *g13, const uint16_t *g2,
                       const uint16_t *x, double w, double *y) {
    const int H = p->hidden, I = p->inter;
    const double bs = TPM_GEN_EXPERT_BIAS_SCALE;
    double *a = (double *)malloc(sizeof(double) * I);
    for (int i = 0; i < I; i++) {
        double g = 0, u = 0;
        const uint16_t *gr = g13 + (size_t)i * H, *ur = g13 + (size_t)(I + i) * H;
        for (int h = 0; h < H; h++) {
            const double xv = tpm_bf16_to_f32(x[h]);
            g += tpm_bf16_to_f32(gr[h]) * xv;
            u += tpm_bf16_to_f32(ur[h]) * xv;
        }
        if (p->expert_bias) {
            g += (double)tpm_gen_uniform(seed, gslot, TPM_GEN_GATE_BIAS, (uint64_t)i) * bs;
            u += (double)tpm_gen_uniform(seed, gslot, TPM_GEN_UP_BIAS, (uint64_t)i) * bs;
        }
        a[i] = tpm_act_f64_preset(p, g, u);
    }
    for (int h = 0; h < H; h++) {
        double v = 0;
        const uint16_t *dr = g2 + (size_t)h * I;
        for (int i = 0; i < I; i++) v += tpm_bf16_to_f32(dr[i]) * a[i];
        if (p->expert_bias) v += (double)tpm_gen_uniform(seed, gslot, TPM_GEN_DOWN_BIAS, (uint64_t)h) * bs;
        y[h] += w * v;
    }
    free(a);
}

/* MARK: per-rank thread */
typedef struct rank_arg {
    shared_state *S;
    int rank;
} rank_arg;

static double median_of(double *v, int n) { return cli_median(v, n); }
static const char *flush_name(int f) { return f == 0 ? "write" : f == 1 ? "read" : "none"; }

/* Replay fn (graph or eager) reps times with an L2 flush before each; median ms. */
typedef struct timer {
    cudaStream_t s;
    cudaEvent_t a, b;
    void *flush;
    size_t flush_bytes;
    int flush_mode;
    pthread_barrier_t *bar; /* TP: ranks start every replay together */
    tpm_comm_t ar;          /* TP: tpmoe's all-reduce (NULL: the layer's NCCL one) */
    int no_ar;              /* --shard: one rank's share alone, the layer ends at its combine */
    int H;
} timer;

static tpm_status time_graph(timer *tm, cudaGraphExec_t g, int reps, double *ms) {
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!v) return tpm_err(TPM_ERR_NO_MEMORY, "oom");
    for (int r = -2; r < reps; r++) {
        cudaStreamSynchronize(tm->s);
        if (tm->bar) pthread_barrier_wait(tm->bar);
        /* flush, start event and graph queued together: the graph starts when the flush ends */
        TPM_TRY(tpm_cuda_bench_flush(tm->flush, tm->flush_bytes, tm->flush_mode, tm->s));
        cudaEventRecord(tm->a, tm->s);
        cudaGraphLaunch(g, tm->s);
        cudaEventRecord(tm->b, tm->s);
        if (cudaEventSynchronize(tm->b) != cudaSuccess) {
            free(v);
            return tpm_err(TPM_ERR_CUDA, "graph replay: %s", cudaGetErrorString(cudaGetLastError()));
        }
        float f = 0;
        cudaEventElapsedTime(&f, tm->a, tm->b);
        if (r >= 0) v[r] = f;
    }
    *ms = median_of(v, reps);
    free(v);
    return TPM_OK;
}

enum { PH_ROUTE, PH_EXPERTS, PH_COMBINE, PH_ALLREDUCE, PH_ALL, PH_N, PH_NULL = PH_N };

/* The layer's all-reduce: tpmoe's (exact, dispatched algorithm) when the
 * rank has a tpmoe communicator, else the layer's ncclAllReduce. */
static tpm_status layer_allreduce(tpm_cuda_moe *m, const timer *tm, void *y, int T, cudaStream_t s) {
    if (!tm->ar) return tpm_cuda_moe_allreduce(m, y, T, s);
    return tpm_allreduce_ex(tm->ar, y, y, (size_t)T * (size_t)tm->H, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                            TPM_ALGO_AUTO, s);
}

static tpm_status layer_forward(tpm_cuda_moe *m, const timer *tm, const void *x, void *y, int T, cudaStream_t s) {
    if (tm->no_ar) {
        TPM_TRY(tpm_cuda_moe_route(m, x, T, s));
        TPM_TRY(tpm_cuda_moe_experts(m, x, T, s));
        return tpm_cuda_moe_combine(m, T, y, s);
    }
    if (!tm->ar) return tpm_cuda_moe_forward(m, x, T, y, s);
    TPM_TRY(tpm_cuda_moe_route(m, x, T, s));
    TPM_TRY(tpm_cuda_moe_experts(m, x, T, s));
    TPM_TRY(tpm_cuda_moe_combine(m, T, y, s));
    return layer_allreduce(m, tm, y, T, s);
}

static tpm_status run_phase(tpm_cuda_moe *m, const timer *tm, int ph, const void *x, void *y, int T,
                            cudaStream_t s) {
    switch (ph) {
    case PH_NULL: return tpm_cuda_bench_null(s);
    case PH_ROUTE: return tpm_cuda_moe_route(m, x, T, s);
    case PH_EXPERTS: return tpm_cuda_moe_experts(m, x, T, s);
    case PH_COMBINE: return tpm_cuda_moe_combine(m, T, y, s);
    case PH_ALLREDUCE: return layer_allreduce(m, tm, y, T, s);
    default: return layer_forward(m, tm, x, y, T, s);
    }
}

static tpm_status time_phase(timer *tm, tpm_cuda_moe *m, int ph, const void *x, void *y, int T, int reps,
                             double *ms) {
    if (ph == PH_NULL || tpm_cuda_moe_capturable(m, T)) {
        cudaGraph_t g = NULL;
        cudaGraphExec_t ge = NULL;
        if (cudaStreamBeginCapture(tm->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
            return tpm_err(TPM_ERR_CUDA, "begin capture");
        tpm_status st = run_phase(m, tm, ph, x, y, T, tm->s);
        cudaError_t ce = cudaStreamEndCapture(tm->s, &g);
        if (st != TPM_OK) return st;
        if (ce != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)
            return tpm_err(TPM_ERR_CUDA, "capture failed: %s", cudaGetErrorString(ce));
        st = time_graph(tm, ge, reps, ms);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        return st;
    }
    double *v = (double *)malloc(sizeof(double) * (size_t)reps);
    if (!v) return tpm_err(TPM_ERR_NO_MEMORY, "oom");
    for (int r = -2; r < reps; r++) {
        cudaStreamSynchronize(tm->s);
        if (tm->bar) pthread_barrier_wait(tm->bar);
        TPM_TRY(tpm_cuda_bench_flush(tm->flush, tm->flush_bytes, tm->flush_mode, tm->s));
        cudaEventRecord(tm->a, tm->s);
        tpm_status st = run_phase(m, tm, ph, x, y, T, tm->s);
        cudaEventRecord(tm->b, tm->s);
        cudaEventSynchronize(tm->b);
        if (st != TPM_OK) {
            free(v);
            return st;
        }
        float f = 0;
        cudaEventElapsedTime(&f, tm->a, tm->b);
        if (r >= 0) v[r] = f;
    }
    *ms = median_of(v, reps);
    free(v);
    return TPM_OK;
}

/* The decode path's timeline (a TPM_MOE_TRACE build): the whole layer captured with the marks
 * on, replayed n times after the same flush as the timing; per event the median over the
 * replays, us from the routing's first block start (tpm_cuda_moe_trace_events). */
static tpm_status trace_layer(tpm_cuda_moe *m, timer *tm, int ph, const void *x, void *y, int T, int n,
                              double med[TPM_MOE_TRACE_EVENTS]) {
    TPM_TRY(tpm_cuda_moe_set_trace(m, 1));
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    double *v = (double *)malloc(sizeof(double) * (size_t)n * TPM_MOE_TRACE_EVENTS);
    tpm_status st = v ? TPM_OK : tpm_err(TPM_ERR_NO_MEMORY, "oom");
    if (st == TPM_OK && cudaStreamBeginCapture(tm->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        st = tpm_err(TPM_ERR_CUDA, "begin capture");
    if (st == TPM_OK) {
        st = run_phase(m, tm, ph, x, y, T, tm->s);
        const cudaError_t ce = cudaStreamEndCapture(tm->s, &g);
        if (st == TPM_OK && (ce != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess))
            st = tpm_err(TPM_ERR_CUDA, "trace capture failed: %s", cudaGetErrorString(ce));
    }
    for (int r = -2; st == TPM_OK && r < n; r++) {
        double ev[TPM_MOE_TRACE_EVENTS];
        if ((st = tpm_cuda_moe_trace_reset(m, tm->s)) != TPM_OK ||
            (st = tpm_cuda_bench_flush(tm->flush, tm->flush_bytes, tm->flush_mode, tm->s)) != TPM_OK)
            break;
        if (cudaGraphLaunch(ge, tm->s) != cudaSuccess || cudaStreamSynchronize(tm->s) != cudaSuccess) {
            st = tpm_err(TPM_ERR_CUDA, "trace replay: %s", cudaGetErrorString(cudaGetLastError()));
            break;
        }
        if ((st = tpm_cuda_moe_trace_events(m, ev)) != TPM_OK) break;
        if (r >= 0)
            for (int e = 0; e < TPM_MOE_TRACE_EVENTS; e++) v[(size_t)e * n + r] = ev[e];
    }
    if (st == TPM_OK)
        for (int e = 0; e < TPM_MOE_TRACE_EVENTS; e++) med[e] = median_of(v + (size_t)e * n, n);
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    free(v);
    const tpm_status st2 = tpm_cuda_moe_set_trace(m, 0);
    return st != TPM_OK ? st : st2;
}

static void *rank_main(void *argp) {
    rank_arg *ra = (rank_arg *)argp;
    shared_state *S = ra->S;
    const opts *o = S->o;
    const int rank = ra->rank, world = o->world, tp_rank = rank % o->tp, ep_rank = rank / o->tp;
    const tpm_preset *p = o->p;
    const int H = p->hidden, I = p->inter;
    tpm_status st = TPM_OK;
    tpm_cuda_moe *m = S->moe[rank];
    int Tmax = 0;
    for (int i = 0; i < o->nt; i++) Tmax = (int)(o->tokens[i] > Tmax ? o->tokens[i] : Tmax);
    timer tm = {0};
    void *dx = NULL, *dy = NULL;
    uint16_t *hy = NULL, *l13 = NULL, *l2 = NULL;
    int32_t *sel = NULL, *counts = NULL;
    float *wts = NULL;
    cudaSetDevice(rank);
    const int K = tpm_cuda_moe_slots(m), Il = tpm_cuda_moe_local_inter(m), E1 = p->n_experts + p->n_shared;
    tm.flush_bytes = (size_t)256 << 20;
    tm.flush_mode = o->flush;
    tm.bar = world > 1 ? &S->bar : NULL;
    tm.ar = S->ar[rank];
    tm.no_ar = o->shard > 1;
    tm.H = H;
    if (cudaStreamCreateWithFlags(&tm.s, cudaStreamNonBlocking) || cudaEventCreate(&tm.a) ||
        cudaEventCreate(&tm.b) || cudaMalloc(&tm.flush, tm.flush_bytes) ||
        cudaMalloc(&dx, (size_t)Tmax * H * 2) || cudaMalloc(&dy, (size_t)Tmax * H * 2)) {
        st = tpm_err(TPM_ERR_CUDA, "rank %d: setup failed", rank);
        goto done;
    }
    hy = (uint16_t *)malloc((size_t)Tmax * H * 2);
    l13 = (uint16_t *)malloc((size_t)2 * Il * H * 2);
    l2 = (uint16_t *)malloc((size_t)H * Il * 2);
    sel = (int32_t *)malloc(sizeof(int32_t) * (size_t)Tmax * K);
    wts = (float *)malloc(sizeof(float) * (size_t)Tmax * K);
    counts = (int32_t *)malloc(sizeof(int32_t) * (size_t)E1);
    if (!hy || !l13 || !l2 || !sel || !wts || !counts) {
        st = tpm_err(TPM_ERR_NO_MEMORY, "rank %d: out of host memory", rank);
        goto done;
    }
    if (rank == 0) { /* the harness's fixed cost: an empty captured kernel after the same flush */
        double ms = 0;
        pthread_barrier_t *bar = tm.bar;
        tm.bar = NULL; /* rank 0 alone */
        st = time_phase(&tm, m, PH_NULL, NULL, NULL, 1, o->reps, &ms);
        tm.bar = bar;
        if (st != TPM_OK) goto done;
        S->null_us = ms * 1e3;
    }
    for (int ti = 0; ti < o->nt; ti++) {
        const int T = (int)o->tokens[ti];
        pthread_barrier_wait(&S->bar);
        /* on tm.s: a non-blocking stream does not wait for the legacy one (a pageable
         * cudaMemcpy may return before its DMA lands: r47m's first unfused call read a
         * half-copied x) */
        if (cudaMemcpyAsync(dx, S->hx, (size_t)T * H * 2, cudaMemcpyHostToDevice, tm.s) ||
            cudaMemsetAsync(dy, 0xff, (size_t)T * H * 2, tm.s)) { /* poison: NaN bf16 */
            st = tpm_err(TPM_ERR_CUDA, "copy x");
            goto done;
        }
        if ((st = layer_forward(m, &tm, dx, dy, T, tm.s)) != TPM_OK) goto done;
        if (cudaStreamSynchronize(tm.s) != cudaSuccess) {
            st = tpm_err(TPM_ERR_CUDA, "forward: %s", cudaGetErrorString(cudaGetLastError()));
            goto done;
        }
        if ((st = tpm_cuda_moe_get_routing(m, T, sel, wts, counts)) != TPM_OK) goto done;
        cudaMemcpy(hy, dy, (size_t)T * H * 2, cudaMemcpyDeviceToHost);
        /* validation: rank 0 computes the reference, every rank fills its shard */
        const int nchk = o->check < T ? o->check : T;
        int chk[8];
        for (int c = 0; c < nchk; c++) chk[c] = nchk == 1 ? 0 : (int)((int64_t)c * (T - 1) / (nchk - 1));
        double *yref = rank == 0 ? (double *)calloc((size_t)nchk * H, sizeof(double)) : NULL;
        int sel_ref[8][16];
        double w_ref[8][16];
        if (rank == 0) {
            float *wr = (float *)malloc((size_t)p->n_experts * H * 4), *br = (float *)malloc((size_t)p->n_experts * 4);
            double *cv = (double *)malloc(sizeof(double) * p->n_experts);
            if (wr && br) tpm_cuda_moe_gen_router(p, o->seed, wr, br);
            S->r.sel_mismatch = S->r.sel_near_tie = 0;
            for (int c = 0; c < nchk; c++) {
                const uint16_t *x = S->hx + (size_t)chk[c] * H;
                if (!wr || !br || !cv ||
                    tpm_router_route_f64(p, wr, p->router == TPM_ROUTER_SOFTMAX_TOPK ? NULL : br, x,
                                         sel_ref[c], w_ref[c], cv) != TPM_OK) {
                    /* no reference: the row fails validation (the other ranks
                     * still meet rank 0 at the barriers below) */
                    for (int r = 0; r < p->top_k; r++) {
                        sel_ref[c][r] = sel[(size_t)chk[c] * K + r];
                        w_ref[c][r] = NAN;
                    }
                    S->r.sel_mismatch++;
                    continue;
                }
                for (int r = 0; r < p->top_k; r++) {
                    const int g = sel[(size_t)chk[c] * K + r];
                    if (g != sel_ref[c][r]) {
                        const double gap = fabs(cv[g] - cv[sel_ref[c][r]]);
                        if (gap < 1e-5) S->r.sel_near_tie++;
                        else S->r.sel_mismatch++;
                    }
                }
            }
            free(wr);
            free(br);
            free(cv);
        }
        /* experts of the sample: GPU's selection (+ shared), assembled from the TP
         * shards of the EP rank that holds it (the shared one: EP rank 0's copy) */
        const int Eloc = p->n_experts / o->ep;
        for (int c = 0; c < nchk; c++) {
            for (int s = 0; s < p->top_k + p->n_shared; s++) {
                const int slot = s < p->top_k ? sel[(size_t)chk[c] * K + s] : p->n_experts;
                const int owner = slot < p->n_experts ? slot / Eloc : 0;
                const int lslot = slot < p->n_experts ? slot - owner * Eloc : Eloc;
                pthread_barrier_wait(&S->bar);
                if (ep_rank == owner) {
                    if ((st = tpm_cuda_moe_get_expert(m, lslot, l13, l2)) != TPM_OK) goto done;
                    for (int i = 0; i < Il; i++) {
                        memcpy(S->g13 + (size_t)(tp_rank * Il + i) * H, l13 + (size_t)i * H, (size_t)H * 2);
                        memcpy(S->g13 + (size_t)(I + tp_rank * Il + i) * H, l13 + (size_t)(Il + i) * H,
                               (size_t)H * 2);
                    }
                    for (int h = 0; h < H; h++)
                        memcpy(S->g2 + (size_t)h * I + tp_rank * Il, l2 + (size_t)h * Il, (size_t)Il * 2);
                }
                pthread_barrier_wait(&S->bar);
                if (rank == 0) {
                    /* fp64 weight where the selections agree, the GPU's at a near-tie */
                    double w = 1.0;
                    if (s < p->top_k)
                        w = sel_ref[c][s] == slot ? w_ref[c][s] : (double)wts[(size_t)chk[c] * K + s];
                    ref_expert(p, o->seed, (uint32_t)slot, S->g13, S->g2, S->hx + (size_t)chk[c] * H, w,
                               yref + (size_t)c * H);
                }
            }
        }
        { /* the slots this rank streams (EP: its own; the floor is the busiest rank's) */
            int nact = 0;
            for (int e = 0; e < Eloc + p->n_shared; e++) nact += counts[e] > 0;
            /* the dense shared MLP reads its weights too (unfused, or the fused EP split plan) */
            if (p->n_shared && ep_rank == 0 &&
                (!S->fused || (o->ep > 1 && tpm_cuda_moe_shared_plan(m, T) == TPM_MOE_SHARED_SPLIT)))
                nact++;
            S->nact[rank] = nact;
        }
        pthread_barrier_wait(&S->bar);
        if (rank == 0) {
            double worst = 0;
            for (int c = 0; c < nchk; c++) {
                double num = 0, den = 0;
                for (int h = 0; h < H; h++) {
                    const double g = tpm_bf16_to_f32(hy[(size_t)chk[c] * H + h]), r = yref[(size_t)c * H + h];
                    num += (g - r) * (g - r);
                    den += r * r;
                }
                const double rel = sqrt(num / (den > 0 ? den : 1));
                if (!(rel <= worst)) worst = rel; /* NaN sticks */
            }
            S->r.max_rel_err = worst;
            S->r.checked = nchk;
            int nact = 0;
            for (int r = 0; r < world; r++) nact = S->nact[r] > nact ? S->nact[r] : nact;
            S->r.n_active = nact;
            S->r.bytes = (double)nact * (double)tpm_cuda_moe_expert_bytes(m);
            S->r.flops = 2.0 * 3.0 * H * (double)Il * T * (p->top_k + p->n_shared) / o->ep;
            S->r.mem_floor_us = S->r.bytes / (S->hbm_gbps * 1e9) * 1e6;
            S->r.flop_floor_us = S->r.flops / (S->gemm_tflops * 1e12) * 1e6;
            S->r.flop_floor_held_us =
                S->gemm_tflops_held > 0 ? S->r.flops / (S->gemm_tflops_held * 1e12) * 1e6 : 0.0;
            S->r.T = T;
            S->r.fused = S->fused;
            S->r.path = tpm_cuda_moe_path_for(m, T);
            tpm_cuda_moe_tuning tu;
            tpm_cuda_moe_get_tuning(m, &tu);
            S->r.decode_kernel = tu.decode_kernel;
            S->r.pdl = tu.decode_kernel == 2 ? tu.pdl : 0;
            S->r.down_kernel = tu.decode_kernel == 2 && T <= 8 ? tu.down_kernel : 0;
            S->r.gate_up_pairs = tu.decode_kernel == 2 && T <= 8 ? tpm_cuda_moe_gate_up_pairs_for(m, T) : 1;
            S->r.route_mode = tpm_cuda_moe_route_mode(m, T);
            int shp[4];
            if (S->r.route_mode == 3 && tpm_cuda_moe_route_tc_shape(m, T, shp))
                printf("# T=%d: routing mode 3 on %d x %d CTAs (%d-token tiles; %d clusters of 8 resident), <= %d "
                       "chunks of 32 h each\n",
                       T, shp[0], shp[1],
                       tu.route_tc_wide > 0 && T >= tu.route_tc_wide && shp[1] == (T + 127) / 128 ? 128 : 64, shp[2],
                       shp[3]);
            if (S->r.route_mode == 4 && tpm_cuda_moe_route_cl_shape(m, T, shp))
                printf("# T=%d: routing mode 4 on one cluster of %d CTAs, a ring of %d chunk slots, <= %d chunks "
                       "of 32 h each, %d bytes of shared memory\n",
                       T, shp[0], shp[1], shp[2], shp[3]);
            S->r.shared_plan = tpm_cuda_moe_shared_plan(m, T);
            S->r.shared_mma = tpm_cuda_moe_shared_mma(m, T);
            S->r.prefill_gemm = tu.prefill_gemm;
            S->r.prefill_form = tpm_cuda_moe_prefill_form(m, T);
            S->r.shared_overlap = tpm_cuda_moe_overlaps_shared(m, T);
            /* 2: the decode path's shared MLP beside the routed kernels (plan printed with a '~') */
            if (!S->r.shared_overlap && tu.shared_overlap == 2 && S->r.path == TPM_MOE_PATH_DECODE &&
                tu.decode_kernel != 1 && (S->r.shared_plan == TPM_MOE_SHARED_SPLIT || !S->r.fused))
                S->r.shared_overlap = 2;
            free(yref);
        }
        /* timing: every rank runs the same sequence (NCCL calls match) */
        double ms[PH_N] = {0};
        for (int ph = 0; ph < PH_N; ph++) {
            if (ph == PH_ALLREDUCE && world == 1) continue;
            pthread_barrier_wait(&S->bar);
            /* The routing phase is the routing alone: a shared MLP the layer issues beside it
             * (shared_overlap) is timed in the experts phase, which runs it when the routing call
             * did not. --route-stop: the routing phase alone stops early (its outputs are
             * invalid, so only this timing uses it). */
            tpm_cuda_moe_tuning tr, tr0;
            const int alone = ph == PH_ROUTE && (o->route_stop > 0 || S->r.shared_overlap == 1);
            if (alone) {
                if ((st = tpm_cuda_moe_get_tuning(m, &tr0)) != TPM_OK) goto done;
                tr = tr0;
                if (o->route_stop > 0) tr.route_stop = o->route_stop;
                tr.shared_overlap = 0;
                if ((st = tpm_cuda_moe_set_tuning(m, &tr)) != TPM_OK) goto done;
            }
            st = time_phase(&tm, m, ph, dx, dy, T, o->reps, &ms[ph]);
            if (alone) {
                tpm_status st2 = tpm_cuda_moe_set_tuning(m, &tr0);
                if (st == TPM_OK) st = st2;
            }
            if (st != TPM_OK) goto done;
        }
        if (o->trace > 0 && world == 1 && S->r.path == TPM_MOE_PATH_DECODE) {
            double ev[TPM_MOE_TRACE_EVENTS];
            if ((st = trace_layer(m, &tm, PH_ALL, dx, dy, T, o->trace, ev)) != TPM_OK) goto done;
            const int S7 = TPM_MOE_TRACE_EVENT_SLOTS;
            const double *r = ev, *g = ev + S7, *dn = ev + 2 * S7, *c = ev + 3 * S7;
            printf("# T=%d fused=%d timeline (us from the routing's first block, medians of %d replays):\n"
                   "#   routing     start %6.1f  logits done %6.1f  end %6.1f\n"
                   "#   k_gate_up2  start %6.1f  first past wait %6.1f  end %6.1f\n"
                   "#   k_down2     start %6.1f  first past wait %6.1f  end %6.1f\n"
                   "#   combine     start %6.1f  first past wait %6.1f  end %6.1f\n",
                   T, S->r.fused, o->trace, r[0], r[1], r[2], g[0], g[1], g[2], dn[0], dn[1], dn[2], c[0], c[1],
                   c[2]);
        }
        if (o->trace_route > 0 && world == 1) {
            /* the routing phase alone (no shared MLP beside it), its tail step by step */
            double ev[TPM_MOE_TRACE_EVENTS];
            tpm_cuda_moe_tuning tr, tr0;
            if ((st = tpm_cuda_moe_get_tuning(m, &tr0)) != TPM_OK) goto done;
            tr = tr0;
            tr.shared_overlap = 0;
            if (o->route_stop > 0) tr.route_stop = o->route_stop;
            if ((st = tpm_cuda_moe_set_tuning(m, &tr)) != TPM_OK) goto done;
            st = trace_layer(m, &tm, PH_ROUTE, dx, dy, T, o->trace_route, ev);
            const tpm_status st2 = tpm_cuda_moe_set_tuning(m, &tr0);
            if (st == TPM_OK) st = st2;
            if (st != TPM_OK) goto done;
            printf("# T=%d fused=%d routing mode %d, us from its first block (medians of %d replays): logits "
                   "done %.2f  ticket won %.2f  sums done %.2f  warp 0 selected %.2f  permutation start %.2f  "
                   "end %.2f\n",
                   T, S->r.fused, S->r.route_mode, o->trace_route, ev[1], ev[3], ev[4], ev[5], ev[6], ev[2]);
            if (S->r.route_mode == 3) { /* mode 3's extra marks: the latest / earliest block */
                const double *l = ev + TPM_MOE_TRACE_EVENT_SLOTS, *f = ev + 2 * TPM_MOE_TRACE_EVENT_SLOTS;
                printf("# T=%d   mode 3, first / last block: start %.2f / %.2f  logits %.2f / %.2f  cluster "
                       "sync %.2f / %.2f  cluster sums stored - / %.2f  arrive - / %.2f  ticket won %.2f / %.2f  "
                       "sums done %.2f / %.2f\n",
                       T, ev[0], l[5], f[3], ev[1], f[6], l[3], l[4], l[6], f[4], ev[3], f[5], ev[4]);
            }
            /* one block runs the whole tail (mode 1, one tile): its SM's cycles between the marks */
            if (S->r.route_mode == 1 && T <= 8)
                printf("# T=%d   the tail's SM cycles after the ticket: sums done %.0f  warp 0 selected %.0f  "
                       "permutation start %.0f  end %.0f\n",
                       T, ev[4 * TPM_MOE_TRACE_EVENT_SLOTS + 4], ev[4 * TPM_MOE_TRACE_EVENT_SLOTS + 5],
                       ev[4 * TPM_MOE_TRACE_EVENT_SLOTS + 6], ev[4 * TPM_MOE_TRACE_EVENT_SLOTS + 2]);
        }
        if (rank == 0) {
            S->r.t.route = ms[PH_ROUTE] * 1e3;
            S->r.t.experts = ms[PH_EXPERTS] * 1e3;
            S->r.t.combine = ms[PH_COMBINE] * 1e3;
            S->r.t.allreduce = ms[PH_ALLREDUCE] * 1e3;
            S->r.t.total = ms[PH_ALL] * 1e3;
            S->rows[S->nrows++] = S->r;
        }
    }
done:
    S->st[rank] = st;
    if (st != TPM_OK) fprintf(stderr, "tpmoe bench moe: rank %d: %s\n", rank, tpm_err_msg());
    if (tm.s) cudaStreamDestroy(tm.s);
    if (tm.a) cudaEventDestroy(tm.a);
    if (tm.b) cudaEventDestroy(tm.b);
    if (tm.flush) cudaFree(tm.flush);
    if (dx) cudaFree(dx);
    if (dy) cudaFree(dy);
    free(hy);
    free(l13);
    free(l2);
    free(sel);
    free(wts);
    free(counts);
    return NULL;
}


/* The floor at the held (power-capped) GEMM rate; the burst floor where none was measured. */
static double held_floor(const row *r) {
    const double f = r->flop_floor_held_us > 0 ? r->flop_floor_held_us : r->flop_floor_us;
    return r->mem_floor_us > f ? r->mem_floor_us : f;
}

static const char *path_name(int p) { return p == TPM_MOE_PATH_PREFILL ? "prefill" : "decode"; }
static const char *route_name(int m) {
    return m == 0 ? "legacy" : m == 1 ? "fused" : m == 2 ? "gemm" : m == 3 ? "tc" : "cl";
}
static const char *plan_name(int p) {
    return p == TPM_MOE_SHARED_SLOT ? "slot" : p == TPM_MOE_SHARED_SPLIT ? "split" : p == TPM_MOE_SHARED_DENSE ? "dense" : "none";
}
static const char *gemm_name(int g) {
    return g == TPM_MOE_GEMM_GROUPED ? "grouped" : g == TPM_MOE_GEMM_STREAMS ? "streams" : g == TPM_MOE_GEMM_WGMMA ? "wgmma" : "loop";
}


/* MARK: command */
int cmd_bench_moe(int argc, char **argv) {
    opts o;
    int rc = bench_moe_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    o.world = o.tp * o.ep;
    if (o.shard > 1 && o.world > 1)
        return cli_usage_error("bench moe", "--shard times one rank alone: not with --tp / --ep");
    if (o.shard > 1 && o.p->inter % (8 * o.shard))
        return cli_usage_error("bench moe", "--shard %d does not divide the intermediate %d of %s", o.shard,
                               o.p->inter, o.p->name);
    if (o.world > MAX_TP) return cli_usage_error("bench moe", "--tp x --ep = %d GPUs > %d", o.world, MAX_TP);
    if (o.p->n_experts % o.ep)
        return cli_usage_error("bench moe", "--ep %d does not divide the %d experts", o.ep, o.p->n_experts);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < o.world) {
        fprintf(stderr, "tpmoe bench moe: needs %d GPU(s), found %d\n", o.world, ndev);
        return 1;
    }
    const tpm_preset *p = o.p;
    const int H = p->hidden;
    int Tmax = 0;
    for (int i = 0; i < o.nt; i++) Tmax = (int)(o.tokens[i] > Tmax ? o.tokens[i] : Tmax);
    shared_state S;
    memset(&S, 0, sizeof S);
    S.o = &o;
    int fail = 0;
    tpm_status st;
    /* ceilings, measured on GPU 0 in this run */
    if ((st = tpm_cuda_bench_read_bw(0, (size_t)4 << 30, 10, &S.hbm_gbps)) != TPM_OK ||
        (st = tpm_cuda_bench_gemm_rate(0, 8192, 8192, 8192, 10, &S.gemm_tflops)) != TPM_OK ||
        (o.gemm_hold > 0 &&
         (st = tpm_cuda_bench_gemm_rate_held(0, 8192, 8192, 8192, o.gemm_hold, &S.gemm_tflops_held)) != TPM_OK))
        return cli_fail("bench moe", "ceilings", st, tpm_err_msg());
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("# device %s x%d, HBM read %.0f GB/s, cuBLAS bf16 %.0f TFLOP/s (8192^3)\n", prop.name, o.world,
           S.hbm_gbps, S.gemm_tflops);
    if (o.shard > 1)
        printf("# --shard %d: TP rank 0's share of a TP %d layer alone on GPU 0 (inter %d / %d per expert),\n"
               "# no all-reduce; the check compares it with the fp64 share of rank 0's intermediate rows\n",
               o.shard, o.shard, p->inter, o.shard);
    if (o.gemm_hold > 0)
        printf("# cuBLAS bf16 held back to back for %d s (the power cap): %.0f TFLOP/s; x_held = total / max(memfl,\n"
               "# FLOPs at that rate) (x_flr, the floor of record, divides by the burst rate above)\n",
               o.gemm_hold, S.gemm_tflops_held);
    S.hx = (uint16_t *)malloc((size_t)Tmax * H * 2);
    /* zeroed: with --shard the other ranks' rows stay 0, so the reference is rank 0's share */
    S.g13 = (uint16_t *)calloc((size_t)2 * p->inter * H, 2);
    S.g2 = (uint16_t *)calloc((size_t)H * p->inter, 2);
    S.rows = (row *)calloc((size_t)o.nt * 2, sizeof(row));
    if (!S.hx || !S.g13 || !S.g2 || !S.rows) return cli_fail("bench moe", "host memory", TPM_ERR_NO_MEMORY, "");
    cli_rng rng = {o.seed * 7919u + 17u};
    for (size_t i = 0; i < (size_t)Tmax * H; i++) S.hx[i] = tpm_f32_to_bf16((float)cli_rng_normal(&rng));
    if (o.world > 1) {
        int devs[MAX_TP];
        for (int r = 0; r < o.world; r++) devs[r] = r;
        if ((st = tpm_cuda_nccl_init_all(o.world, devs, S.nccl)) != TPM_OK)
            return cli_fail("bench moe", "NCCL init", st, tpm_err_msg());
        if (o.ar_tpmoe) { /* the product's all-reduce, as tpm_moe_forward uses it */
            tpm_config cfg = TPM_CONFIG_INIT;
            cfg.backend = TPM_BACKEND_CUDA;
            if ((st = tpm_comm_init_all(S.ar, o.world, devs, &cfg)) != TPM_OK)
                return cli_fail("bench moe", "tpmoe communicator init", st, tpm_err_msg());
        }
    }
    for (int f = 0; f < o.nfuse && !fail; f++) {
        S.fused = o.fuse[f] && p->n_shared;
        for (int r = 0; r < o.world; r++) { /* rank r: TP rank r % tp of EP rank r / tp */
            /* --shard: TP rank 0 of a TP `shard` layer; its NCCL comm is never called (the
             * timer's no_ar), the marker only satisfies the layer's check */
            static int shard_marker;
            tpm_cuda_moe_desc d = {p, r, o.shard > 1 ? o.shard : o.tp, r % o.tp, S.fused, Tmax,
                                   o.shard > 1 ? (void *)&shard_marker : S.nccl[r], o.ep, r / o.tp};
            if ((st = tpm_cuda_moe_create(&d, &S.moe[r])) != TPM_OK ||
                (st = tpm_cuda_moe_generate(S.moe[r], o.seed)) != TPM_OK ||
                (st = tpm_cuda_moe_set_path(S.moe[r], o.path)) != TPM_OK ||
                (st = bench_moe_apply_tuning(S.moe[r], &o)) != TPM_OK) {
                fail = 1;
                cli_fail("bench moe", "layer setup", st, tpm_err_msg());
                break;
            }
        }
        if (fail) break;
        pthread_barrier_init(&S.bar, NULL, (unsigned)o.world);
        pthread_t th[MAX_TP];
        rank_arg ra[MAX_TP];
        for (int r = 0; r < o.world; r++) {
            ra[r].S = &S;
            ra[r].rank = r;
            pthread_create(&th[r], NULL, rank_main, &ra[r]);
        }
        for (int r = 0; r < o.world; r++) pthread_join(th[r], NULL);
        pthread_barrier_destroy(&S.bar);
        for (int r = 0; r < o.world; r++) {
            if (S.st[r] != TPM_OK) fail = 1;
            tpm_cuda_moe_destroy(S.moe[r]);
            S.moe[r] = NULL;
        }
    }
    /* table */
    if (o.world > 1) printf("# TP / EP all-reduce: %s\n", o.ar_tpmoe ? "tpmoe (exact, dispatched algorithm)" : "ncclAllReduce");
    printf("# harness: empty captured kernel after the %s flush %.1f us (included in every phase time;\n"
           "# route_net = route_us - that: the routing launch's own time; a shared MLP the layer runs\n"
           "# beside the routing, plan '+', is timed in expert_us)\n", flush_name(o.flush), S.null_us);
    printf("\n%-6s %-5s %-7s %-6s %-7s %3s %-6s %5s %4s %9s %9s %9s %9s %9s %9s %9s %9s %6s %9s %5s %6s\n", "tokens", "fused", "path", "plan", "gemm",
           "dk", "route", "tpxep", "exp", "route_us", "rnet_us", "expert_us", "comb_us", "ar_us", "total_us", "memfl_us", "flopfl_us",
           "x_flr", "rel_err", "sel!", "x_held");
    for (int i = 0; i < S.nrows; i++) {
        const row *r = &S.rows[i];
        const double floor = r->mem_floor_us > r->flop_floor_us ? r->mem_floor_us : r->flop_floor_us;
        char dk[24], plan[8];
        snprintf(dk, sizeof dk, "%d%s%s%s", r->decode_kernel, r->pdl ? "p" : "",
                 r->down_kernel == 1 ? "s" : r->down_kernel == 2 ? "w" : r->down_kernel == 3 ? "n" : r->down_kernel == 4 ? "x" : "",
                 r->gate_up_pairs == 2 ? "g" : "");
        snprintf(plan, sizeof plan, "%s%s%s", plan_name(r->shared_plan), r->shared_mma ? "m" : "",
                 r->shared_overlap == 1 ? "+" : r->shared_overlap == 2 ? "~" : "");
        char gemm[32]; /* the own GEMM with its form where it runs: wgmma2 = persistent clusters */
        if (r->prefill_form >= 0) snprintf(gemm, sizeof gemm, "%s%d", gemm_name(r->prefill_gemm), r->prefill_form);
        else snprintf(gemm, sizeof gemm, "%s", gemm_name(r->prefill_gemm));
        char tpep[16];
        if (o.shard > 1) snprintf(tpep, sizeof tpep, "r0/%d", o.shard); /* rank 0's share of TP shard */
        else snprintf(tpep, sizeof tpep, "%dx%d", o.tp, o.ep);
        printf("%-6d %-5d %-7s %-6s %-7s %3s %-6s %5s %4d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6.2f %9.2e %5d %6.2f\n", r->T,
               r->fused, path_name(r->path), plan, gemm, dk, route_name(r->route_mode), tpep, r->n_active, r->t.route, r->t.route - S.null_us, r->t.experts, r->t.combine, r->t.allreduce,
               r->t.total, r->mem_floor_us, r->flop_floor_us, r->t.total / floor, r->max_rel_err, r->sel_mismatch, r->t.total / held_floor(r));
        if (!(r->max_rel_err <= 1e-2) || r->sel_mismatch > 0) fail = 1;
    }
    if (o.json) {
        json_t *root = json_object(), *arr = json_array();
        json_object_set_new(root, "bench", json_string("moe"));
        json_object_set_new(root, "device", json_string(prop.name));
        json_object_set_new(root, "preset", json_string(p->name));
        json_object_set_new(root, "tp", json_integer(o.tp));
        json_object_set_new(root, "ep", json_integer(o.ep));
        if (o.shard > 1) json_object_set_new(root, "shard_of_tp", json_integer(o.shard));
        json_object_set_new(root, "allreduce", json_string(o.world > 1 ? (o.ar_tpmoe ? "tpmoe" : "nccl") : "none"));
        json_object_set_new(root, "hbm_read_gbps", json_real(S.hbm_gbps));
        json_object_set_new(root, "gemm_bf16_tflops", json_real(S.gemm_tflops));
        if (o.gemm_hold > 0) {
            json_object_set_new(root, "gemm_bf16_tflops_held", json_real(S.gemm_tflops_held));
            json_object_set_new(root, "gemm_hold_s", json_integer(o.gemm_hold));
        }
        json_object_set_new(root, "reps", json_integer(o.reps));
        json_object_set_new(root, "timing",
                            json_string("median of CUDA-graph replays (prefill: eager calls incl. host sync), "
                                        "L2 flushed (mode in 'flush') right before the start event"));
        json_object_set_new(root, "seed", json_integer((json_int_t)o.seed));
        json_object_set_new(root, "flush", json_string(flush_name(o.flush)));
        json_object_set_new(root, "null_kernel_us", json_real(S.null_us));
        char cmd[1024] = "tpmoe bench";
        for (int i = 0; i < argc; i++) {
            strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
            strncat(cmd, argv[i], sizeof cmd - strlen(cmd) - 1);
        }
        json_object_set_new(root, "command", json_string(cmd));
        for (int i = 0; i < S.nrows; i++) {
            const row *r = &S.rows[i];
            const double floor = r->mem_floor_us > r->flop_floor_us ? r->mem_floor_us : r->flop_floor_us;
            json_t *j = json_object();
            json_object_set_new(j, "tokens", json_integer(r->T));
            json_object_set_new(j, "fused", json_integer(r->fused));
            json_object_set_new(j, "path", json_string(path_name(r->path)));
            json_object_set_new(j, "decode_kernel", json_integer(r->decode_kernel));
            json_object_set_new(j, "pdl", json_integer(r->pdl));
            json_object_set_new(j, "down_kernel", json_integer(r->down_kernel));
            json_object_set_new(j, "gate_up_pairs", json_integer(r->gate_up_pairs));
            json_object_set_new(j, "route_mode", json_string(route_name(r->route_mode)));
            json_object_set_new(j, "shared_plan", json_string(plan_name(r->shared_plan)));
            json_object_set_new(j, "shared_overlap", json_integer(r->shared_overlap));
            json_object_set_new(j, "shared_mma", json_integer(r->shared_mma));
            json_object_set_new(j, "prefill_gemm", json_string(gemm_name(r->prefill_gemm)));
            json_object_set_new(j, "prefill_form", json_integer(r->prefill_form));
            json_object_set_new(j, "experts_touched", json_integer(r->n_active));
            json_object_set_new(j, "bytes", json_real(r->bytes));
            json_object_set_new(j, "flops", json_real(r->flops));
            json_object_set_new(j, "mem_floor_us", json_real(r->mem_floor_us));
            json_object_set_new(j, "flop_floor_us", json_real(r->flop_floor_us));
            if (r->flop_floor_held_us > 0) {
                json_object_set_new(j, "flop_floor_held_us", json_real(r->flop_floor_held_us));
                json_object_set_new(j, "x_floor_held", json_real(r->t.total / held_floor(r)));
            }
            json_object_set_new(j, "floor_us", json_real(floor));
            json_object_set_new(j, "route_us", json_real(r->t.route));
            /* the routing launch's own time: route_us less the harness's fixed cost
             * (an empty kernel in the same position after the same flush) */
            json_object_set_new(j, "route_net_us", json_real(r->t.route - S.null_us));
            json_object_set_new(j, "experts_us", json_real(r->t.experts));
            json_object_set_new(j, "combine_us", json_real(r->t.combine));
            json_object_set_new(j, "allreduce_us", json_real(r->t.allreduce));
            json_object_set_new(j, "total_us", json_real(r->t.total));
            json_object_set_new(j, "x_floor", json_real(r->t.total / floor));
            json_object_set_new(j, "max_rel_err", json_real(r->max_rel_err));
            json_object_set_new(j, "checked_tokens", json_integer(r->checked));
            json_object_set_new(j, "sel_mismatch", json_integer(r->sel_mismatch));
            json_object_set_new(j, "sel_near_tie", json_integer(r->sel_near_tie));
            json_array_append_new(arr, j);
        }
        json_object_set_new(root, "rows", arr);
        if (json_dump_file(root, o.json, JSON_INDENT(1)) != 0) {
            fprintf(stderr, "tpmoe bench moe: cannot write %s\n", o.json);
            fail = 1;
        } else if (o.png) {
            cli_run_plot("bench moe", "plot_moe.py", o.json, o.png, 1);
        }
        json_decref(root);
    }
    for (int r = 0; r < o.world; r++) {
        if (S.ar[r]) tpm_comm_destroy(S.ar[r]);
        tpm_cuda_nccl_destroy(S.nccl[r]);
    }
    free(S.hx);
    free(S.g13);
    free(S.g2);
    free(S.rows);
    if (fail) fprintf(stderr, "tpmoe bench moe: FAILED (validation or run error)\n");
    return fail ? 1 : 0;
}
#endif
