/*
 * gpu_moe_api.c - the CUDA backend of the public MoE API (tpm_moe_*) against
 * the CPU backend (ctest label gpu). Exit 77 (skipped) with a printed reason
 * where the build has no CUDA or the machine no GPU; with one GPU only the
 * TP 1 parts run.
 *
 * For m3-mini, deepseek-v3-mini and gpt-oss-mini, fused and unfused shared
 * expert, TP 1, TP 2 and EP 2 (a CUDA communicator from tpm_comm_init_all over two
 * GPUs, one host thread per rank), a decode-sized and a prefill-sized batch:
 * the same weights (tpm_moe_create from one seed) and the same bf16 inputs
 * go through the CPU backend (TP 1, the reference) and the CUDA backend.
 * Asserted: the routing is the CPU's except at near-ties (where the ids
 * differ, the selected experts' selection scores, recomputed in fp64, agree
 * to 1e-4), the routing weights agree, the outputs of the tokens routed alike
 * are within bf16 tolerance (relative RMS <= 1e-2), every rank's output and
 * routing are bitwise the same, an in-place call (x == y) gives the same
 * bits, the stats are filled. A batch of 8200 tokens (two chunks of the GPU
 * layer) equals its chunks run as two calls, bit for bit. Bad arguments: dtype fp32 on CUDA is
 * UNSUPPORTED, a host pointer, a dtype mismatch, a CPU comm and a wrong routing size
 * are INVALID_ARG. And `tpmoe moe --backend cuda --check` (TP 2 and EP 2 when two GPUs; TP 2 x
 * EP 2 at 256 tokens with four ranks where they share one GPU) passes its fp64 check. EP 2 (two GPUs: each rank half the routed experts, every other token's fused
 * shared slot, or the unfused shared MLP on EP rank 0) is held to the same CPU reference, and the
 * (token, slot) pairs the ranks report add up to every pair once.
 */
#include <stdio.h>

#ifndef TPMOE_HAVE_CUDA
int main(void) {
    printf("gpu_moe_api: skipped: this build has no CUDA (TPMOE_CUDA=OFF or no nvcc)\n");
    return 77;
}
#else

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "model/moe_weights.h"
#include "numeric.h"
#include "tpmoe.h"
#include "util/test_util.h"

#define SEED 41
#define NT 2 /* batches per configuration */
static const size_t k_tokens[NT] = {5, 77}; /* decode path, prefill path */
static int g_ndev;
static int g_ranks; /* TP 2 / EP 2 parts: 2 where two GPUs exist or ranks share one */
static int g_share; /* one GPU, ranks sharing it (TPMOE_CUDA_SHARE_GPU=1) */

#define CK(x) assert_int_equal((int)(x), (int)cudaSuccess)

static tpm_moe_config cfg_for(const char *preset, tpm_backend b, int fuse) {
    tpm_moe_config c = TPM_MOE_CONFIG_INIT;
    c.preset = preset;
    c.backend = b;
    c.seed = SEED;
    c.layer = 0;
    c.fuse_shared = fuse;
    return c;
}

/* One forward's results on the host. */
typedef struct result {
    uint16_t *y; /* [T x H] bf16 */
    int32_t *ids;
    float *wts; /* [T x k] */
    int32_t *counts;
    tpm_moe_stats stats;
} result;

static void result_alloc(result *r, size_t T, const tpm_preset *p) {
    r->y = malloc(T * (size_t)p->hidden * 2);
    r->ids = malloc(T * (size_t)p->top_k * sizeof *r->ids);
    r->wts = malloc(T * (size_t)p->top_k * sizeof *r->wts);
    r->counts = malloc((size_t)(p->n_experts + p->n_shared) * sizeof *r->counts);
    assert_true(r->y && r->ids && r->wts && r->counts);
    memset(r->y, 0xff, T * (size_t)p->hidden * 2);
}

static void result_free(result *r) {
    free(r->y);
    free(r->ids);
    free(r->wts);
    free(r->counts);
    memset(r, 0, sizeof *r);
}

static void fetch_routing(tpm_moe_t m, size_t T, result *r) {
    assert_int_equal(tpm_moe_last_routing(m, r->ids, r->wts, r->counts, T), TPM_OK);
    assert_int_equal(tpm_moe_last_stats(m, &r->stats), TPM_OK);
}

/* MARK: CUDA ranks as threads */

typedef struct rank_job {
    const tpm_preset *p;
    int fuse, tp, ep, rank; /* tp x ep ranks: TP 2 (tp 2, ep 1) or EP 2 (tp 1, ep 2) */
    tpm_comm_t comm;       /* NULL for one rank */
    const uint16_t *x[NT]; /* host inputs */
    result res[NT];
    int inplace_ok; /* TP 1: x == y gave the same bits */
    tpm_status st;
    char err[512];
    const char *where;
    /* one process drives both ranks: every layer is created (creation waits for the device:
     * allocations, the warm-up's first cuBLAS uses) before either rank's forward can spin in an
     * all-reduce, and destroyed only after both ranks are done (include/tpmoe.h, tpm_moe_create) */
    pthread_barrier_t *created, *done;
} rank_job;

#define JOB_TRY(what, expr)                                                                        \
    do {                                                                                           \
        if ((j->st = (expr)) != TPM_OK) {                                                          \
            j->where = what;                                                                       \
            snprintf(j->err, sizeof j->err, "%s", m ? tpm_moe_last_error(m) : tpm_last_error());   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
#define JOB_CUDA(expr)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            j->st = TPM_ERR_CUDA;                                                                  \
            j->where = #expr;                                                                      \
            snprintf(j->err, sizeof j->err, "%s", cudaGetErrorString(e_));                         \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

static void *rank_main(void *arg) {
    rank_job *j = arg;
    tpm_moe_t m = NULL;
    void *dx = NULL, *dy = NULL;
    cudaStream_t s = NULL;
    const size_t H = (size_t)j->p->hidden;
    tpm_moe_config c = cfg_for(j->p->name, TPM_BACKEND_CUDA, j->fuse);
    if (!j->comm) c.device = 0; /* two ranks: the device comes from the comm */
    if (j->ep > 1) {
        c.tp_size = 1;
        c.ep_size = j->ep;
        c.ep_rank = j->rank;
    }
    j->st = tpm_moe_create(&m, &c, j->comm);
    if (j->st != TPM_OK) {
        j->where = "create";
        snprintf(j->err, sizeof j->err, "%s", tpm_last_error());
    }
    pthread_barrier_wait(j->created);
    if (j->st != TPM_OK) goto out;
    JOB_CUDA(cudaSetDevice(j->rank % g_ndev)); /* the comm's rule */
    JOB_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    JOB_CUDA(cudaMalloc(&dx, k_tokens[NT - 1] * H * 2));
    JOB_CUDA(cudaMalloc(&dy, k_tokens[NT - 1] * H * 2));
    for (int b = 0; b < NT; b++) {
        const size_t T = k_tokens[b], bytes = T * H * 2;
        result_alloc(&j->res[b], T, j->p);
        /* on s: a non-blocking stream does not wait for the legacy one */
        JOB_CUDA(cudaMemcpyAsync(dx, j->x[b], bytes, cudaMemcpyHostToDevice, s));
        JOB_CUDA(cudaMemsetAsync(dy, 0xff, bytes, s)); /* poison: bf16 NaN */
        JOB_TRY("forward", tpm_moe_forward(m, j->comm, dx, dy, T, TPM_DTYPE_BF16, s));
        JOB_TRY("routing",
                tpm_moe_last_routing(m, j->res[b].ids, j->res[b].wts, j->res[b].counts, T));
        JOB_TRY("stats", tpm_moe_last_stats(m, &j->res[b].stats));
        JOB_CUDA(cudaStreamSynchronize(s));
        JOB_CUDA(cudaMemcpy(j->res[b].y, dy, bytes, cudaMemcpyDeviceToHost));
        if (j->tp * j->ep == 1 && b == NT - 1) { /* in place: x == y */
            uint16_t *again = malloc(bytes);
            JOB_TRY("in-place forward", tpm_moe_forward(m, NULL, dx, dx, T, TPM_DTYPE_BF16, s));
            JOB_CUDA(cudaStreamSynchronize(s));
            JOB_CUDA(cudaMemcpy(again, dx, bytes, cudaMemcpyDeviceToHost));
            j->inplace_ok = again && !memcmp(again, j->res[b].y, bytes);
            free(again);
        }
    }
out:
    if (j->st != TPM_OK && !j->where) j->where = "?";
    pthread_barrier_wait(j->done);
    tpm_moe_destroy(m);
    cudaFree(dx);
    cudaFree(dy);
    if (s) cudaStreamDestroy(s);
    return NULL;
}

/* MARK: routing scores (fp64, for the near-tie rule) */

/* Selection score of expert e for token x: sigmoid(logit) + bias, or the
 * logit (softmax top-k). */
static double sel_score(const tpm_moe_weights *w, const tpm_preset *p, const uint16_t *x, int e) {
    double l = 0.0;
    for (int h = 0; h < w->hidden; h++)
        l += (double)w->router[(size_t)e * (size_t)w->hidden + (size_t)h] *
             (double)tpm_bf16_to_f32(x[h]);
    if (p->router == TPM_ROUTER_SOFTMAX_TOPK) return l;
    return 1.0 / (1.0 + exp(-l)) + (w->router_bias ? (double)w->router_bias[e] : 0.0);
}

/* Compare a CUDA result with the CPU's; returns the tokens routed alike. */
static size_t compare(const char *label, const tpm_moe_weights *w, const tpm_preset *p,
                      const uint16_t *x, size_t T, const result *cpu, const result *gpu, int ep) {
    const size_t H = (size_t)p->hidden, k = (size_t)p->top_k;
    size_t alike = 0, ties = 0;
    double num = 0.0, den = 0.0;
    for (size_t t = 0; t < T; t++) {
        const int32_t *a = cpu->ids + t * k, *b = gpu->ids + t * k;
        int same = !memcmp(a, b, k * sizeof *a);
        if (!same) {
            ties++;
            for (size_t j = 0; j < k; j++) {
                assert_true(b[j] >= 0 && b[j] < p->n_experts);
                double sa = sel_score(w, p, x + t * H, a[j]), sb = sel_score(w, p, x + t * H, b[j]);
                if (!(fabs(sa - sb) <= 1e-4 * (1.0 + fabs(sa))))
                    fail_msg("%s token %zu slot %zu: CPU expert %d (score %.9g), CUDA expert %d "
                             "(score %.9g): not a near-tie",
                             label, t, j, a[j], sa, b[j], sb);
            }
            continue;
        }
        alike++;
        for (size_t j = 0; j < k; j++) {
            float wa = cpu->wts[t * k + j], wb = gpu->wts[t * k + j];
            if (!(fabsf(wa - wb) <= 1e-4f * fabsf(wa) + 1e-6f))
                fail_msg("%s token %zu slot %zu: routing weight CPU %.9g CUDA %.9g", label, t, j,
                         (double)wa, (double)wb);
        }
        for (size_t h = 0; h < H; h++) {
            double r = tpm_bf16_to_f32(cpu->y[t * H + h]), g = tpm_bf16_to_f32(gpu->y[t * H + h]);
            assert_false(isnan(g));
            num += (g - r) * (g - r);
            den += r * r;
        }
    }
    double rel = sqrt(num / (den > 0 ? den : 1.0));
    printf("  %-34s T=%-3zu routed alike %zu/%zu (near-ties %zu), rel RMS vs CPU %.2e, "
           "%.1f us (route %.1f, experts %.1f, combine %.1f, all-reduce %.1f)\n",
           label, T, alike, T, ties, rel, gpu->stats.t_total * 1e6, gpu->stats.t_router * 1e6,
           gpu->stats.t_experts * 1e6, gpu->stats.t_combine * 1e6, gpu->stats.t_allreduce * 1e6);
    assert_true(rel <= 1e-2);
    assert_true(ties <= 1 + T / 16); /* near-ties are rare with random data */
    /* counts: exact when every token routed alike; always T*k in all */
    int64_t sum = 0;
    for (int e = 0; e < p->n_experts; e++) {
        sum += gpu->counts[e];
        if (!ties) assert_int_equal(gpu->counts[e], cpu->counts[e]);
    }
    assert_int_equal(sum, (int64_t)(T * k));
    for (int s = 0; s < p->n_shared; s++)
        assert_int_equal(gpu->counts[p->n_experts + s], (int32_t)T);
    /* stats */
    const tpm_moe_stats *st = &gpu->stats;
    assert_int_equal(st->ntokens, T);
    if (ep == 1) assert_int_equal(st->local_pairs, (int64_t)(T * (k + (size_t)p->n_shared)));
    if (!ties) assert_int_equal(st->distinct_experts, cpu->stats.distinct_experts);
    assert_true(st->t_total > 0.0);
    assert_true(st->t_router + st->t_experts + st->t_combine + st->t_allreduce <=
                st->t_total * 1.001 + 1e-5);
    return alike;
}

/* MARK: tests */

static void cuda_vs_cpu(void **state) {
    (void)state;
    const char *presets[] = {"m3-mini", "deepseek-v3-mini", "gpt-oss-mini"};
    tu_rng rng = {tu_seed()};
    tpm_comm_t comms[2] = {NULL, NULL}; /* TP 2: one CUDA communicator for every layer */
    if (g_ranks >= 2) {
        tpm_config cc = TPM_CONFIG_INIT;
        cc.backend = TPM_BACKEND_CUDA;
        cc.dtype = TPM_DTYPE_BF16;
        assert_int_equal(tpm_comm_init_all(comms, 2, NULL, &cc), TPM_OK);
    }
    for (size_t pi = 0; pi < 3; pi++) {
        const tpm_preset *p = tpm_preset_find(presets[pi]);
        assert_non_null(p);
        const size_t H = (size_t)p->hidden;
        tpm_moe_weights w; /* the router, for the scores of near-ties */
        assert_int_equal(tpm_moe_weights_random(p, SEED, &w), TPM_OK);
        uint16_t *x[NT];
        for (int b = 0; b < NT; b++) {
            x[b] = malloc(k_tokens[b] * H * 2);
            assert_non_null(x[b]);
            for (size_t i = 0; i < k_tokens[b] * H; i++)
                x[b][i] = tpm_f32_to_bf16((float)tu_normal(&rng));
        }
        for (int fuse = 0; fuse <= 1; fuse++) {
            if (fuse == 0 && p->n_shared == 0) continue; /* nothing to fuse */
            /* the reference: the CPU backend, TP 1 */
            tpm_moe_config c = cfg_for(p->name, TPM_BACKEND_CPU, fuse);
            tpm_moe_t cm = NULL;
            assert_int_equal(tpm_moe_create(&cm, &c, NULL), TPM_OK);
            result cpu[NT];
            for (int b = 0; b < NT; b++) {
                result_alloc(&cpu[b], k_tokens[b], p);
                assert_int_equal(
                    tpm_moe_forward(cm, NULL, x[b], cpu[b].y, k_tokens[b], TPM_DTYPE_BF16, NULL),
                    TPM_OK);
                fetch_routing(cm, k_tokens[b], &cpu[b]);
            }
            tpm_moe_destroy(cm);
            for (int cf = 0; cf < 3; cf++) { /* TP 1, TP 2, EP 2 */
                const int tp = cf == 0 ? 1 : 2, ep = cf == 2 ? 2 : 1; /* tp: ranks here */
                if (tp > g_ranks) {
                    printf("  %s fuse %d %s 2: skipped (%d GPU)\n", p->name, fuse, ep > 1 ? "EP" : "TP", g_ndev);
                    continue;
                }
                rank_job jobs[2];
                pthread_t th[2];
                pthread_barrier_t created, done;
                memset(jobs, 0, sizeof jobs);
                assert_int_equal(pthread_barrier_init(&created, NULL, (unsigned)tp), 0);
                assert_int_equal(pthread_barrier_init(&done, NULL, (unsigned)tp), 0);
                for (int r = 0; r < tp; r++) {
                    jobs[r].created = &created;
                    jobs[r].done = &done;
                    jobs[r].p = p;
                    jobs[r].fuse = fuse;
                    jobs[r].tp = tp / ep;
                    jobs[r].ep = ep;
                    jobs[r].rank = r;
                    jobs[r].comm = tp > 1 ? comms[r] : NULL;
                    for (int b = 0; b < NT; b++)
                        jobs[r].x[b] = x[b];
                    assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
                }
                for (int r = 0; r < tp; r++)
                    pthread_join(th[r], NULL);
                pthread_barrier_destroy(&created);
                pthread_barrier_destroy(&done);
                for (int r = 0; r < tp; r++)
                    if (jobs[r].st != TPM_OK)
                        fail_msg("%s fuse %d %s %d rank %d: %s: %s (%s)", p->name, fuse, ep > 1 ? "EP" : "TP", tp, r,
                                 jobs[r].where, tpm_status_string(jobs[r].st), jobs[r].err);
                for (int b = 0; b < NT; b++) {
                    char label[96];
                    snprintf(label, sizeof label, "%s %s %s %d", p->name,
                             p->n_shared == 0 ? "no shared"
                             : fuse           ? "fused"
                                              : "unfused",
                             ep > 1 ? "EP" : "TP", tp);
                    compare(label, &w, p, x[b], k_tokens[b], &cpu[b], &jobs[0].res[b], ep);
                    if (ep > 1) { /* EP: every (token, slot) pair ran on exactly one rank */
                        int64_t pairs = 0;
                        for (int r = 0; r < tp; r++) pairs += jobs[r].res[b].stats.local_pairs;
                        assert_int_equal(pairs, (int64_t)(k_tokens[b] * (size_t)(p->top_k + p->n_shared)));
                    }
                    for (int r = 1; r < tp; r++) { /* every rank: the same bits */
                        const size_t T = k_tokens[b];
                        assert_memory_equal(jobs[r].res[b].y, jobs[0].res[b].y, T * H * 2);
                        assert_memory_equal(jobs[r].res[b].ids, jobs[0].res[b].ids,
                                            T * (size_t)p->top_k * sizeof(int32_t));
                        assert_memory_equal(jobs[r].res[b].wts, jobs[0].res[b].wts,
                                            T * (size_t)p->top_k * sizeof(float));
                    }
                }
                if (tp == 1) assert_true(jobs[0].inplace_ok);
                for (int r = 0; r < tp; r++)
                    for (int b = 0; b < NT; b++)
                        result_free(&jobs[r].res[b]);
            }
            for (int b = 0; b < NT; b++)
                result_free(&cpu[b]);
        }
        for (int b = 0; b < NT; b++)
            free(x[b]);
        tpm_moe_weights_free(&w);
    }
    for (int r = 0; r < 2; r++)
        if (comms[r]) tpm_comm_destroy(comms[r]);
}

/* A batch above the GPU layer's 8192-token buffers runs in chunks: the same
 * bits and routing as the chunks run as separate calls (the same paths and
 * GEMM shapes per chunk). */
static void chunked_batch(void **state) {
    (void)state;
    const size_t A = 8192, B = 8, T = A + B;
    tpm_moe_config c = cfg_for("m3-mini", TPM_BACKEND_CUDA, 1);
    c.device = 0;
    tpm_moe_t m = NULL;
    assert_int_equal(tpm_moe_create(&m, &c, NULL), TPM_OK);
    tpm_moe_info info;
    assert_int_equal(tpm_moe_get_info(m, &info), TPM_OK);
    const size_t H = (size_t)info.hidden, k = (size_t)info.top_k, n = T * H;
    const size_t nc = (size_t)(info.n_experts + info.n_shared);
    uint16_t *hx = malloc(n * 2), *y1 = malloc(n * 2), *y2 = malloc(n * 2);
    int32_t *ids1 = malloc(T * k * 4), *ids2 = malloc(T * k * 4);
    int32_t *c1 = calloc(nc, 4), *c2 = calloc(nc, 4), *ca = calloc(nc, 4);
    assert_true(hx && y1 && y2 && ids1 && ids2 && c1 && c2 && ca);
    tu_rng rng = {tu_seed()};
    for (size_t i = 0; i < n; i++)
        hx[i] = tpm_f32_to_bf16((float)tu_normal(&rng));
    void *dx = NULL, *dy = NULL;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dy, n * 2));
    CK(cudaMemcpy(dx, hx, n * 2, cudaMemcpyHostToDevice));
    /* one call */
    CK(cudaMemset(dy, 0xff, n * 2));
    assert_int_equal(tpm_moe_forward(m, NULL, dx, dy, T, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_moe_last_routing(m, ids1, NULL, c1, T), TPM_OK);
    tpm_moe_stats st;
    assert_int_equal(tpm_moe_last_stats(m, &st), TPM_OK);
    assert_int_equal(st.ntokens, T);
    CK(cudaMemcpy(y1, dy, n * 2, cudaMemcpyDeviceToHost));
    /* the chunks as two calls */
    CK(cudaMemset(dy, 0xff, n * 2));
    assert_int_equal(tpm_moe_forward(m, NULL, dx, dy, A, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_moe_last_routing(m, ids2, NULL, ca, A), TPM_OK);
    assert_int_equal(tpm_moe_forward(m, NULL, (const uint16_t *)dx + A * H, (uint16_t *)dy + A * H,
                                     B, TPM_DTYPE_BF16, NULL),
                     TPM_OK);
    assert_int_equal(tpm_moe_last_routing(m, ids2 + A * k, NULL, c2, B), TPM_OK);
    CK(cudaMemcpy(y2, dy, n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        assert_false(isnan(tpm_bf16_to_f32(y1[i])));
    assert_memory_equal(y1, y2, n * 2);
    assert_memory_equal(ids1, ids2, T * k * 4);
    for (int e = 0; e < info.n_experts; e++)
        assert_int_equal(c1[e], ca[e] + c2[e]);
    assert_int_equal(c1[info.n_experts], (int32_t)T); /* the shared expert: every token */
    printf("  m3-mini T=%zu in one call == %zu + %zu in two calls (bits, routing)\n", T, A, B);
    tpm_moe_destroy(m);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    free(hx);
    free(y1);
    free(y2);
    free(ids1);
    free(ids2);
    free(c1);
    free(c2);
    free(ca);
}

static void bad_args(void **state) {
    (void)state;
    tpm_moe_t m = (tpm_moe_t)(uintptr_t)1;
    /* create: what the CUDA backend cannot run */
    tpm_moe_config c = cfg_for("m3-mini", TPM_BACKEND_CUDA, -1);
    c.dtype = TPM_DTYPE_FP32;
    assert_int_equal(tpm_moe_create(&m, &c, NULL), TPM_ERR_UNSUPPORTED);
    assert_null(m);
    assert_non_null(strstr(tpm_last_error(), "bf16"));
    /* a CPU communicator cannot sum device buffers */
    tpm_comm_t cpu[2] = {NULL, NULL};
    tpm_config cc = TPM_CONFIG_INIT;
    cc.backend = TPM_BACKEND_CPU;
    assert_int_equal(tpm_comm_init_all(cpu, 2, NULL, &cc), TPM_OK);
    c = cfg_for("m3-mini", TPM_BACKEND_CUDA, -1);
    assert_int_equal(tpm_moe_create(&m, &c, cpu[0]), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "CUDA communicator"));
    tpm_comm_destroy(cpu[0]);
    tpm_comm_destroy(cpu[1]);

    /* forward: pointers, dtype, sizes */
    c = cfg_for("gpt-oss-mini", TPM_BACKEND_CUDA, -1);
    c.device = 0;
    assert_int_equal(tpm_moe_create(&m, &c, NULL), TPM_OK);
    tpm_moe_info info;
    assert_int_equal(tpm_moe_get_info(m, &info), TPM_OK);
    assert_int_equal(info.backend, TPM_BACKEND_CUDA);
    const size_t T = 3, n = T * (size_t)info.hidden;
    uint16_t *hx = malloc(n * 2);
    assert_non_null(hx);
    tu_rng rng = {tu_seed()};
    for (size_t i = 0; i < n; i++)
        hx[i] = tpm_f32_to_bf16((float)tu_normal(&rng));
    void *dx = NULL, *dy = NULL;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&dx, n * 2));
    CK(cudaMalloc(&dy, n * 2));
    CK(cudaMemcpy(dx, hx, n * 2, cudaMemcpyHostToDevice));
    assert_int_equal(tpm_moe_forward(m, NULL, hx, dy, T, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_moe_last_error(m), "host memory"));
    assert_int_equal(tpm_moe_forward(m, NULL, dx, hx, T, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_forward(m, NULL, NULL, dy, T, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_forward(m, NULL, dx, dy, T, TPM_DTYPE_FP16, NULL),
                     TPM_ERR_INVALID_ARG);
    /* a good call, then a routing query of the wrong size */
    CK(cudaMemset(dy, 0xff, n * 2));
    assert_int_equal(tpm_moe_forward(m, NULL, dx, dy, T, TPM_DTYPE_BF16, NULL), TPM_OK);
    int32_t ids[3 * 16];
    assert_int_equal(tpm_moe_last_routing(m, ids, NULL, NULL, T + 1), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_moe_last_routing(m, ids, NULL, NULL, T), TPM_OK);
    for (size_t i = 0; i < T * (size_t)info.top_k; i++)
        assert_true(ids[i] >= 0 && ids[i] < info.n_experts);
    /* zero tokens: nothing to do, an empty routing record */
    assert_int_equal(tpm_moe_forward(m, NULL, NULL, NULL, 0, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_moe_last_routing(m, NULL, NULL, NULL, 0), TPM_OK);
    tpm_moe_destroy(m);
    CK(cudaFree(dx));
    CK(cudaFree(dy));
    free(hx);
}

/* `tpmoe moe --backend cuda --check` (TPMOE_TOOL, set by ctest): runs, the
 * ranks agree and the output is within the fp64 check's bound. */
static void cli_cuda(void **state) {
    (void)state;
    const char *tool = getenv("TPMOE_TOOL");
    if (!tool) {
        printf("  cli: skipped (TPMOE_TOOL not set)\n");
        return;
    }
    const char *presets[] = {"m3-mini", "gpt-oss-mini", "m3-mini", "m3-mini", "m3-mini"};
    for (int i = 0; i < 5; i++) {
        char cmd[1024], out[16384];
        if ((i == 2 || i == 4) && g_ranks < 2) {
            printf("  cli EP 2: skipped (one GPU)\n");
            continue;
        }
        if (i == 3 && !g_share) {
            printf("  cli TP 2 x EP 2: skipped (four ranks need one shared GPU here)\n");
            continue;
        }
        /* the third: EP 2 (one routed half and every other token's shared slot per GPU; only EP
         * rank 0 calls cuBLAS: in a fresh process its first use deadlocked beside EP rank 1's
         * all-reduce until the layer warmed up at create, bench/results/r117); the fourth: TP 2 x
         * EP 2 at 256 tokens, four ranks on one GPU, which timed out in 5 of 6 runs while the
         * spinning all-reduce grids were sized by the SM count (bench/results/r134, r135); the
         * fifth: EP 2 unfused at 300 tokens, EP rank 0's dense shared MLP beside the prefill's
         * routing on the side stream's cuBLAS handle (round 17) */
        const int tp = i == 2 || i == 4 ? 1 : i == 3 ? 2 : g_ranks, ep = i >= 2 ? 2 : 1;
        snprintf(cmd, sizeof cmd,
                 "%s moe --backend cuda --preset %s --tp %d --ep %d --tokens %d --iters 2 --check%s 2>&1",
                 tool, presets[i], tp, ep, i == 3 ? 256 : i == 4 ? 300 : 40, i == 4 ? " --fuse-shared 0" : "");
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        size_t len = fread(out, 1, sizeof out - 1, f);
        out[len] = '\0';
        int rc = pclose(f);
        printf("  %s\n", cmd);
        if (rc != 0 || !strstr(out, "backend cuda") ||
            !strstr(out, "ranks agree (routing and "
                         "output bits): yes") ||
            !strstr(out, ": ok (bound"))
            fail_msg("rc %d, output:\n%s", rc, out);
    }
}

int main(void) {
    /* kernels loaded at start: a lazily loaded kernel's first launch may wait for the device,
     * which, where the ranks share a GPU, runs the other rank's all-reduce spinning for this one */
    if (!getenv("CUDA_MODULE_LOADING")) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    /* and as many hardware queues as CUDA has: two ranks' streams on one queue serialize */
    if (!getenv("CUDA_DEVICE_MAX_CONNECTIONS")) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
    if (cudaGetDeviceCount(&g_ndev) != cudaSuccess || g_ndev < 1) {
        printf("gpu_moe_api: skipped: no CUDA device is visible\n");
        return 77;
    }
    if (g_ndev > 2) g_ndev = 2;
    unsetenv("TPMOE_FUSE_SHARED_EXPERTS");
    unsetenv("TPMOE_QUICK_REDUCE_QUANTIZATION");
    /* one GPU: the TP 2 / EP 2 parts run their two ranks on it (checked, not timed) */
    if (g_ndev == 1 && !getenv("TPMOE_CUDA_SHARE_GPU")) setenv("TPMOE_CUDA_SHARE_GPU", "1", 1);
    const char *sg = getenv("TPMOE_CUDA_SHARE_GPU");
    const int share = g_ndev == 1 && sg && !strcmp(sg, "1");
    g_share = share;
    g_ranks = g_ndev >= 2 || share ? 2 : 1;
    printf("gpu_moe_api: %d GPU(s)%s\n", g_ndev,
           share         ? " (TP 2 / EP 2: both ranks on GPU 0, TPMOE_CUDA_SHARE_GPU=1)"
           : g_ranks < 2 ? " (TP 2 parts skipped)"
                         : "");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cuda_vs_cpu),
        cmocka_unit_test(chunked_batch),
        cmocka_unit_test(bad_args),
        cmocka_unit_test(cli_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif /* TPMOE_HAVE_CUDA */
