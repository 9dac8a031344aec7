/*
 * gpu_moe_util.h - the CUDA MoE layer tests' shared part (gpu_moe.c, gpu_moe_paths.c): random
 * host weights of a preset, the fp64 reference of the layer's outputs (check_run), and run_gpu,
 * which builds a layer on GPU 0 with the tune_* overrides below and returns its outputs. CUDA
 * builds only (TPMOE_HAVE_CUDA). The asserts are cmocka's: call these from a cmocka test.
 */
#ifndef TPM_GPU_MOE_UTIL_H
#define TPM_GPU_MOE_UTIL_H
#ifdef TPMOE_HAVE_CUDA

#include "model/moe_weights.h"
#include "model/presets.h"
#include "moe/moe_cuda.h"

#include <stddef.h>
#include <stdint.h>

/* Tuning overrides of the next run_gpu calls (-1: the layer's default). */
extern int tune_decode_kernel, tune_route_gemm_min, tune_route_legacy;
extern int tune_shared_split_min, tune_prefill_gemm, tune_pdl, tune_prefill_cluster;
extern int tune_prefill_band;
extern int tune_prefill_split_min, tune_prefill_split_max, tune_route_experts, tune_route_tc_min, tune_route_tc_max;
extern int tune_route_tc_loads, tune_route_wide, tune_shared_mma, tune_route_perm_min, tune_route_poll;
/* mode 4 (one cluster): its range and size; -1 = the layer's, but off where a test sets a mode 0-3 knob
 * (tune_route_tc_min / max, tune_route_gemm_min, tune_route_legacy) */
extern int tune_route_cl_min, tune_route_cl_max, tune_route_cl_size;
extern int tune_route_cluster_meet; /* mode 3's selecting blocks at a cluster barrier up to this many tokens */
extern int tune_route_tc_wide;      /* mode 3 in 128-token tiles from this many tokens (0 = never) */
extern int tune_route_tc_clusters;  /* mode 3's clusters of 8 (0 = as many as are resident) */
extern int tune_route_tc_split;     /* mode 3's wide tiles in this many expert groups (1, 2, 4) */
extern int tune_route_tc_fit;       /* mode 3 on the fewest clusters for its most chunks per CTA (0 / 1) */
extern int last_plan;       /* tpm_cuda_moe_shared_plan of the last run_gpu call */
extern int last_route_mode; /* tpm_cuda_moe_route_mode of the last run_gpu call */
extern int last_route_tc_shape[4]; /* tpm_cuda_moe_route_tc_shape of the last run_gpu call (zeros: none) */

typedef struct gpu_run {
    int T, K;
    uint16_t *y;  /* [T x H] */
    int32_t *sel; /* [T x K] */
    float *wts;
} gpu_run;

/* Random weights of preset p (bf16-representable expert weights, fp32 router and biases). */
void make_weights(const tpm_preset *p, uint64_t seed, tpm_moe_weights *w);
void free_weights(tpm_moe_weights *w);
/* T x H random bf16 inputs (malloc'd). */
uint16_t *make_x(int T, int H, uint64_t seed);
/* A fresh layer on GPU 0 with w uploaded, on the given path; *tu: its tuning, to change and set. */
tpm_cuda_moe *new_layer(const tpm_moe_weights *w, int T, int fused, tpm_moe_path path, tpm_cuda_moe_tuning *tu);
/* One forward of T tokens with the tune_* overrides on a fresh layer: the output poisoned
 * first, the per-expert counts checked against the selections, a second forward asserted
 * bit-equal; outputs, selections and weights into *r (free_run). */
void run_gpu(const tpm_moe_weights *w, const uint16_t *x, int T, int fused, tpm_moe_path path, gpu_run *r);
void free_run(gpu_run *r);
/* Check the selections are valid (in range, distinct, shared slot last) and agree with the
 * fp64 reference except at near-ties; outputs of up to `sample` tokens within tol. Returns the
 * worst relative error. */
double check_run(const tpm_moe_weights *w, const uint16_t *x, const gpu_run *r, int fused, int sample,
                 double tol);
/* The relative L2 difference of two bf16 vectors. */
double rel_diff(const uint16_t *a, const uint16_t *b, size_t n);
/* 1 on a 9.0 device (the own wgmma prefill GEMM and its split plan exist there). */
int sm90_device(void);
/* One forward of layer m on T tokens of host input x through its device buffers dx / dy (the
 * output poisoned first), the output into host y. */
void forward_host(tpm_cuda_moe *m, void *dx, void *dy, int H, const uint16_t *x, int T, uint16_t *y);
/* Two calls of layer m (Ta tokens xa, then Tb tokens xb; host inputs) captured into one CUDA
 * graph on a stream of its own and replayed reps times, the outputs poisoned before each replay:
 * every replay's outputs are ya and yb bit for bit. */
void replay_two_call_graph(tpm_cuda_moe *m, int H, const uint16_t *xa, int Ta, const uint16_t *ya,
                           const uint16_t *xb, int Tb, const uint16_t *yb, int reps);

#endif
#endif
