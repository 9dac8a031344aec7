/*
 * cmd_moe.c - `tpmoe moe`: run one MoE layer of a preset over tp x ep ranks
 * (threads, one communicator each; with --backend cuda one GPU per rank, x
 * uploaded to each and y copied back), print the routing summary and the
 * per-phase timings, optionally check against an fp64 evaluation and write
 * the result to a safetensors file (format in docs/moe.md).
 */
#include "cli.h"
#include "internal.h"
#include "model/moe_weights.h"
#include "model/safetensors.h"
#include "moe/moe_internal.h"
#include "numeric.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TPMOE_HAVE_CUDA
#include "comm/comm_internal.h"

#include <cuda_runtime_api.h>
#endif

#define CMD "moe"
#define MAX_RANKS 64

static void help(void) {
    printf("usage: tpmoe moe [options]\n"
           "Run one MoE layer with tp x ep ranks as threads (CPU; or one GPU per rank with\n"
           "--backend cuda: bf16).\n\n"
           "  --preset P          model preset (default m3-mini)\n"
           "  --tokens B          tokens (default 64; with --input: the file's)\n"
           "  --backend B         cpu (default) | auto (cuda when a GPU is visible) | cuda\n"
           "  --tp N --ep M       tensor / expert parallel sizes (default 1, 1)\n"
           "  --fuse-shared F     auto (default) | 0 | 1\n"
           "  --weights FILE      safetensors weights (default: random, --seed)\n"
           "  --layer L           layer index (default 0)\n"
           "  --seed S            random weights and input (default 1)\n"
           "  --input FILE        safetensors with x [B, H] (bf16/f16/f32)\n"
           "  --output FILE       write x, y, topk_ids, topk_weights\n"
           "  --dtype D           bf16 (default) | fp16 | fp32 (without --input)\n"
           "  --codec C           all-reduce codec (none, int8, int6, int4, fp8, int4_h, int6_h);\n"
           "                      a lossy codec is forced on (two-shot) unless --algo is given\n"
           "  --algo A            auto | oneshot | twoshot\n"
           "  --iters N           timed forwards (default 5; median reported)\n"
           "  --check             compare with an fp64 evaluation (exit 1 above the bound)\n");
}

typedef struct opts {
    const char *preset, *weights, *input, *output;
    long long tokens, tp, ep, layer, seed, iters;
    int fuse, check, tokens_set, layer_set;
    tpm_backend backend;
    tpm_dtype dtype;
    tpm_codec codec;
    tpm_algo algo;
    int algo_set;
} opts;

static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->preset = "m3-mini";
    o->tokens = 64;
    o->tp = o->ep = 1;
    o->seed = 1;
    o->iters = 5;
    o->fuse = -1;
    o->backend = TPM_BACKEND_CPU;
    o->dtype = TPM_DTYPE_BF16;
    o->codec = TPM_CODEC_DEFAULT;
    o->algo = TPM_ALGO_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return -1;
        }
        if (!strcmp(a, "--check")) {
            o->check = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_usage_error(CMD, "%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--preset"))
            o->preset = v;
        else if (!strcmp(a, "--weights"))
            o->weights = v;
        else if (!strcmp(a, "--input"))
            o->input = v;
        else if (!strcmp(a, "--output"))
            o->output = v;
        else if (!strcmp(a, "--tokens")) {
            if (cli_parse_int(v, 1, 1 << 20, &o->tokens))
                return cli_usage_error(CMD, "--tokens '%s': want 1..1048576", v);
            o->tokens_set = 1;
        } else if (!strcmp(a, "--tp")) {
            if (cli_parse_int(v, 1, MAX_RANKS, &o->tp))
                return cli_usage_error(CMD, "--tp '%s': want 1..%d", v, MAX_RANKS);
        } else if (!strcmp(a, "--ep")) {
            if (cli_parse_int(v, 1, MAX_RANKS, &o->ep))
                return cli_usage_error(CMD, "--ep '%s': want 1..%d", v, MAX_RANKS);
        } else if (!strcmp(a, "--layer")) {
            if (cli_parse_int(v, 0, 1000000, &o->layer))
                return cli_usage_error(CMD, "--layer '%s': want >= 0", v);
            o->layer_set = 1;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_int(v, 0, INT64_MAX, &o->seed))
                return cli_usage_error(CMD, "--seed '%s': want >= 0", v);
        } else if (!strcmp(a, "--iters")) {
            if (cli_parse_int(v, 1, 100000, &o->iters))
                return cli_usage_error(CMD, "--iters '%s': want >= 1", v);
        } else if (!strcmp(a, "--fuse-shared")) {
            static const char *const fuse_names[] = {"auto", "0", "1"}; /* -1, 0, 1 */
            int k = cli_parse_choice(v, fuse_names, 3);
            if (k < 0) return cli_usage_error(CMD, "--fuse-shared '%s': want auto, 0 or 1", v);
            o->fuse = k - 1;
        } else if (!strcmp(a, "--backend")) {
            static const char *const backend_names[] = {"auto", "cpu", "cuda"}; /* tpm_backend */
            int k = cli_parse_choice(v, backend_names, 3);
            if (k < 0) return cli_usage_error(CMD, "--backend '%s': want cpu, cuda or auto", v);
            o->backend = (tpm_backend)k;
        } else if (!strcmp(a, "--dtype")) {
            if (tpm_dtype_parse(v, &o->dtype) != TPM_OK)
                return cli_usage_error(CMD, "--dtype '%s': want bf16, fp16 or fp32", v);
        } else if (!strcmp(a, "--codec")) {
            if (tpm_codec_parse(v, &o->codec) != TPM_OK)
                return cli_usage_error(
                    CMD, "--codec '%s': want none, int8, int6, int4, fp8, int4_h or int6_h", v);
        } else if (!strcmp(a, "--algo")) {
            if (cli_parse_algo(v, &o->algo))
                return cli_usage_error(CMD, "--algo '%s': want auto, oneshot or twoshot", v);
            o->algo_set = 1;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        }
    }
    return 0;
}

/* MARK: input / output files */

static int load_input(const opts *o, const tpm_preset *p, void **x, size_t *T, tpm_dtype *dt) {
    tpm_st_file *f = NULL;
    tpm_status st = tpm_st_open(o->input, &f);
    if (st != TPM_OK) return cli_usage_error(CMD, "--input: %s", tpm_last_error());
    int64_t shape[2] = {-1, p->hidden};
    const tpm_st_tensor *t = NULL;
    st = tpm_st_get(f, "x",
                    TPM_ST_MASK(TPM_ST_BF16) | TPM_ST_MASK(TPM_ST_F16) | TPM_ST_MASK(TPM_ST_F32), 2,
                    shape, &t);
    if (st != TPM_OK) {
        tpm_st_close(f);
        return cli_usage_error(CMD, "--input: %s (want x [B, %d] bf16/f16/f32)", tpm_last_error(),
                               p->hidden);
    }
    if (o->tokens_set && t->shape[0] != o->tokens) {
        long long rows = (long long)t->shape[0];
        tpm_st_close(f);
        return cli_usage_error(CMD, "--tokens %lld but --input x has %lld rows", o->tokens, rows);
    }
    *dt = t->dtype == TPM_ST_BF16  ? TPM_DTYPE_BF16
          : t->dtype == TPM_ST_F16 ? TPM_DTYPE_FP16
                                   : TPM_DTYPE_FP32;
    *T = (size_t)t->shape[0];
    *x = malloc(t->nbytes);
    if (*x) memcpy(*x, t->data, t->nbytes);
    tpm_st_close(f);
    if (!*x || *T == 0) {
        free(*x); /* x with 0 rows: malloc(0) may have returned a pointer */
        *x = NULL;
        return cli_usage_error(CMD, "--input: x is empty or too large");
    }
    return 0;
}

static tpm_status write_output(const opts *o, const tpm_preset *p, const tpm_moe_info *info,
                               const void *x, const void *y, const int32_t *ids, const float *w,
                               size_t T, tpm_dtype dt) {
    tpm_st_writer *wr = NULL;
    tpm_status st = tpm_st_writer_create(&wr);
    if (st != TPM_OK) return st;
    tpm_st_dtype sd = dt == TPM_DTYPE_BF16   ? TPM_ST_BF16
                      : dt == TPM_DTYPE_FP16 ? TPM_ST_F16
                                             : TPM_ST_F32;
    int64_t sx[2] = {(int64_t)T, p->hidden}, sk[2] = {(int64_t)T, p->top_k};
    char buf[64];
    st = tpm_st_writer_metadata(wr, "tpmoe_preset", p->name);
    snprintf(buf, sizeof buf, "%d", info->tp_size);
    if (st == TPM_OK) st = tpm_st_writer_metadata(wr, "tpmoe_tp", buf);
    snprintf(buf, sizeof buf, "%d", info->ep_size);
    if (st == TPM_OK) st = tpm_st_writer_metadata(wr, "tpmoe_ep", buf);
    snprintf(buf, sizeof buf, "%d", info->fuse_shared);
    if (st == TPM_OK) st = tpm_st_writer_metadata(wr, "tpmoe_fuse_shared", buf);
    snprintf(buf, sizeof buf, "%lld", o->layer);
    if (st == TPM_OK) st = tpm_st_writer_metadata(wr, "tpmoe_layer", buf);
    snprintf(buf, sizeof buf, "%lld", o->seed);
    if (st == TPM_OK) st = tpm_st_writer_metadata(wr, "tpmoe_seed", buf);
    if (st == TPM_OK)
        st = tpm_st_writer_metadata(wr, "tpmoe_weights", o->weights ? o->weights : "random");
    if (st == TPM_OK)
        st = tpm_st_writer_metadata(
            wr, "tpmoe_codec",
            tpm_codec_name(info->codec == TPM_CODEC_DEFAULT ? TPM_CODEC_NONE : info->codec));
    if (st == TPM_OK) st = tpm_st_writer_add(wr, "x", sd, 2, sx, x);
    if (st == TPM_OK) st = tpm_st_writer_add(wr, "y", sd, 2, sx, y);
    if (st == TPM_OK) st = tpm_st_writer_add(wr, "topk_ids", TPM_ST_I32, 2, sk, ids);
    if (st == TPM_OK) st = tpm_st_writer_add(wr, "topk_weights", TPM_ST_F32, 2, sk, w);
    if (st == TPM_OK) st = tpm_st_writer_write(wr, o->output);
    tpm_st_writer_destroy(wr);
    return st;
}

/* MARK: ranks as threads */

typedef struct rank_job {
    tpm_moe_t moe;
    tpm_comm_t comm;
    const void *x; /* host, or device memory of this rank's GPU (cuda) */
    void *y;
    void *stream; /* cudaStream_t (cuda), NULL (cpu) */
    size_t T;
    tpm_dtype dt;
    int iters;
    tpm_moe_stats *stats; /* [iters + 1], [0] = warm-up */
    tpm_status st;
    char err[TPM_ERRMSG_LEN];
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    for (int it = 0; it <= j->iters; it++) {
        j->st = tpm_moe_forward(j->moe, j->comm, j->x, j->y, j->T, j->dt, j->stream);
        if (j->st != TPM_OK) {
            snprintf(j->err, sizeof j->err, "%s", tpm_moe_last_error(j->moe));
            break;
        }
        j->st = tpm_moe_last_stats(j->moe, &j->stats[it]); /* cuda: waits for the forward */
        if (j->st != TPM_OK) {
            snprintf(j->err, sizeof j->err, "%s", tpm_moe_last_error(j->moe));
            break;
        }
        /* the forward has finished: did its all-reduce complete, or give up waiting? */
        if (j->comm && (j->st = tpm_comm_get_async_error(j->comm)) != TPM_OK) {
            snprintf(j->err, sizeof j->err, "%s", tpm_comm_last_error(j->comm));
            break;
        }
    }
    return NULL;
}

/* MARK: GPU buffers (--backend cuda): per rank x, y and a stream on GPU r */

typedef struct gpu_bufs {
    int n;
    void *x[MAX_RANKS], *y[MAX_RANKS], *stream[MAX_RANKS];
} gpu_bufs;

#ifdef TPMOE_HAVE_CUDA
static tpm_status gpu_fail(cudaError_t e, const char *what) {
    (void)cudaGetLastError();
    return tpm_err(TPM_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}
#define GPU_CK(expr)                                                                               \
    do {                                                                                           \
        cudaError_t gpu_ck_ = (expr);                                                              \
        if (gpu_ck_ != cudaSuccess) return gpu_fail(gpu_ck_, #expr);                               \
    } while (0)

/* Rank r's GPU, the comm's rule: r, or r mod the GPU count where ranks share GPUs
 * (TPMOE_CUDA_SHARE_GPU=1, a test mode). */
static int rank_dev(int r) {
    int n = tpm_cuda_device_count();
    return n > 0 ? r % n : r;
}

/* Rank r: x copied to its GPU, y poisoned (bf16 NaN), a non-blocking stream. */
static tpm_status gpu_setup(gpu_bufs *g, int r, const void *x, size_t bytes) {
    GPU_CK(cudaSetDevice(rank_dev(r)));
    g->n = r + 1;
    GPU_CK(cudaMalloc(&g->x[r], bytes));
    GPU_CK(cudaMalloc(&g->y[r], bytes));
    GPU_CK(cudaMemcpy(g->x[r], x, bytes, cudaMemcpyHostToDevice));
    GPU_CK(cudaMemset(g->y[r], 0xff, bytes));
    cudaStream_t s = NULL;
    GPU_CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g->stream[r] = s;
    /* the copies above ran on the legacy stream, which s does not wait for */
    GPU_CK(cudaStreamSynchronize(cudaStreamLegacy));
    return TPM_OK;
}

static tpm_status gpu_fetch(const gpu_bufs *g, int r, void *y, size_t bytes) {
    GPU_CK(cudaSetDevice(rank_dev(r)));
    GPU_CK(cudaStreamSynchronize((cudaStream_t)g->stream[r]));
    GPU_CK(cudaMemcpy(y, g->y[r], bytes, cudaMemcpyDeviceToHost));
    return TPM_OK;
}

static void gpu_free(gpu_bufs *g) {
    if (g->n == 0) return;
    for (int r = 0; r < g->n; r++) {
        if (cudaSetDevice(rank_dev(r)) != cudaSuccess) continue;
        if (g->stream[r]) cudaStreamDestroy((cudaStream_t)g->stream[r]);
        cudaFree(g->x[r]);
        cudaFree(g->y[r]);
    }
    (void)cudaGetLastError();
    memset(g, 0, sizeof *g);
}
#else
static tpm_status gpu_setup(gpu_bufs *g, int r, const void *x, size_t bytes) {
    (void)g, (void)r, (void)x, (void)bytes;
    return tpm_err(TPM_ERR_UNSUPPORTED, "backend cuda: this build has no CUDA (TPMOE_CUDA=OFF)");
}
static tpm_status gpu_fetch(const gpu_bufs *g, int r, void *y, size_t bytes) {
    (void)g, (void)r, (void)y, (void)bytes;
    return tpm_err(TPM_ERR_UNSUPPORTED, "backend cuda: this build has no CUDA (TPMOE_CUDA=OFF)");
}
static void gpu_free(gpu_bufs *g) {
    (void)g;
}
static int rank_dev(int r) {
    return r;
}
#endif

static double median_field(const tpm_moe_stats *s, int n, size_t off) {
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!v) return NAN;
    for (int i = 0; i < n; i++)
        v[i] = *(const double *)((const char *)&s[i] + off);
    double m = cli_median(v, n);
    free(v);
    return m;
}

static void print_routing(const tpm_preset *p, const int32_t *counts, size_t T,
                          const tpm_moe_info *info) {
    const int E = p->n_experts;
    int distinct = 0, mn = INT32_MAX, mx = 0;
    for (int e = 0; e < E; e++) {
        distinct += counts[e] > 0;
        if (counts[e] < mn) mn = counts[e];
        if (counts[e] > mx) mx = counts[e];
    }
    double expect = E * (1.0 - pow(1.0 - (double)p->top_k / E, (double)T));
    printf("routing: %zu tokens x top-%d over %d experts: %d distinct experts touched (uniform "
           "routing "
           "would touch %.1f); tokens per expert min %d, mean %.2f, max %d\n",
           T, p->top_k, E, distinct, expect, mn, (double)T * p->top_k / E, mx);
    printf("tokens per expert:\n");
    for (int e = 0; e < E; e += 16) {
        printf("  %4d:", e);
        for (int i = e; i < E && i < e + 16; i++)
            printf(" %4d", counts[i]);
        printf("\n");
    }
    if (p->n_shared == 0)
        printf("shared expert: none in preset %s\n", p->name);
    else if (info->fuse_shared)
        printf("shared expert: fused as slot %d (%d slots per token, %zu tokens)%s\n", E,
               info->slots_per_token, (size_t)counts[E],
               info->ep_size > 1 ? ", token t on EP rank t % ep" : "");
    else
        printf("shared expert: unfused dense MLP on all %zu tokens, sharded over %d ranks\n",
               (size_t)counts[E], info->tp_size * info->ep_size);
    printf("  fusion: %s\n", info->fuse_reason);
}

/* fp64 check of rank 0's result; returns 1 when above the bound. */
static int check_f64(const tpm_moe_t m0, const tpm_moe_weights *w, const void *x, const void *y,
                     const int32_t *ids, size_t T, tpm_dtype dt, tpm_codec codec) {
    const size_t H = (size_t)w->hidden, n = T * H;
    tpm_expert_view *ev = calloc((size_t)w->n_experts + 1, sizeof *ev);
    tpm_expert_view sv[8];
    double *ref = malloc(n * sizeof *ref);
    if (!ev || !ref || w->n_shared > 8) {
        free(ev);
        free(ref);
        fprintf(stderr, "tpmoe moe: --check: out of memory\n");
        return 1;
    }
    tpm_moe_ref_layer L;
    tpm_moe_ref_layer_from_weights(w, ev, sv, &L);
    double t0 = tpm_now_s();
    tpm_status st = tpm_moe_reference_f64(&m0->rp, &m0->ap, &L, x, dt, T, ids, ref, NULL);
    double t1 = tpm_now_s();
    int bad = 0;
    if (st != TPM_OK) {
        fprintf(stderr, "tpmoe moe: --check: %s\n", tpm_last_error());
        bad = 1;
    } else {
        double num = 0, den = 0, maxabs = 0, maxref = 0;
        size_t nonfinite = 0;
        for (size_t i = 0; i < n; i++) {
            double v = tpm_load_f32(y, (int)dt, i), d = fabs(v - ref[i]);
            if (!isfinite(v)) nonfinite++;
            num += d * d;
            den += ref[i] * ref[i];
            if (d > maxabs) maxabs = d;
            if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        /* bound: a few output roundings of the activation dtype, more for a
         * lossy all-reduce codec (docs/moe.md) */
        double bound = dt == TPM_DTYPE_FP32 ? 1e-5 : dt == TPM_DTYPE_FP16 ? 2e-3 : 1e-2;
        if (codec == TPM_CODEC_INT8)
            bound += 2e-2;
        else if (codec == TPM_CODEC_INT6 || codec == TPM_CODEC_INT6_H)
            bound += 6e-2;
        else if (codec != TPM_CODEC_NONE && codec != TPM_CODEC_DEFAULT)
            bound += 0.25;
        bad = !(rel <= bound) || nonfinite > 0;
        printf("check vs fp64 (same expert ids, fp64 weights and math; %.2f s): relative RMS %.3e, "
               "max abs %.3e (max |ref| %.3g), non-finite %zu: %s (bound %.1e)\n",
               t1 - t0, rel, maxabs, maxref, nonfinite, bad ? "FAIL" : "ok", bound);
    }
    free(ev);
    free(ref);
    return bad;
}

int cmd_moe(int argc, char **argv) {
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const tpm_preset *p = tpm_preset_find(o.preset);
    if (!p) {
        char names[256] = "";
        for (const tpm_preset *const *q = tpm_preset_list(); *q; q++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", (*q)->name,
                     q[1] ? ", " : "");
        return cli_usage_error(CMD, "--preset '%s': unknown (known: %s)", o.preset, names);
    }
    if (!o.layer_set) o.layer = 0;
    if (o.backend == TPM_BACKEND_AUTO) {
#ifdef TPMOE_HAVE_CUDA
        o.backend = tpm_cuda_device_count() > 0 ? TPM_BACKEND_CUDA : TPM_BACKEND_CPU;
#else
        o.backend = TPM_BACKEND_CPU;
#endif
    }
    const int cuda = o.backend == TPM_BACKEND_CUDA;
    const int world = (int)(o.tp * o.ep);
    if (world > MAX_RANKS)
        return cli_usage_error(CMD, "--tp x --ep = %d ranks > %d", world, MAX_RANKS);
    if (p->inter % o.tp)
        return cli_usage_error(CMD, "--tp %lld does not divide the expert intermediate %d of %s",
                               o.tp, p->inter, p->name);
    if (p->n_experts % o.ep)
        return cli_usage_error(CMD, "--ep %lld does not divide the %d experts of %s", o.ep,
                               p->n_experts, p->name);
    tpm_codec codec = o.codec;
    tpm_algo algo = o.algo;
    if (codec != TPM_CODEC_DEFAULT && codec != TPM_CODEC_NONE && !o.algo_set)
        algo = TPM_ALGO_TWOSHOT;

    /* input */
    void *x = NULL;
    size_t T = (size_t)o.tokens;
    tpm_dtype dt = o.dtype;
    if (o.input) {
        rc = load_input(&o, p, &x, &T, &dt);
        if (rc) return rc;
    } else {
        x = malloc(T * (size_t)p->hidden * tpm_dtype_size(dt));
        if (!x) return cli_fail(CMD, "input", TPM_ERR_NO_MEMORY, "");
        cli_rng r = {(uint64_t)o.seed ^ 0x5eed0f1a7e5ull};
        for (size_t i = 0; i < T * (size_t)p->hidden; i++)
            tpm_store_f32(x, (int)dt, i, (float)cli_rng_normal(&r));
    }
    const size_t n = T * (size_t)p->hidden;

    /* The CPU layer keeps one full fp32 copy of the layer plus the rank shards
     * (another copy in all; cuda: the full copy only, uploaded to the GPUs):
     * refuse what cannot fit instead of being killed. */
    double layer_gb = 4.0 *
                      ((double)p->n_experts * 3.0 * p->hidden * p->inter +
                       (double)p->n_shared * 3.0 * p->hidden * p->shared_inter +
                       (double)p->n_experts * p->hidden) /
                      1e9;
    double mem_gb = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / 1e9;
    const double copies = cuda ? 1.0 : 2.0;
    if (copies * layer_gb > 0.8 * mem_gb) {
        free(x);
        return cli_usage_error(CMD,
                               "preset %s: one layer is %.1f GB in fp32 and the %s backend needs "
                               "~%.1f GB of host memory; this machine has %.1f GB (use a -mini "
                               "preset)",
                               p->name, layer_gb, cuda ? "cuda" : "cpu", copies * layer_gb, mem_gb);
    }

    /* weights (once, shared by the rank threads) */
    tpm_moe_weights w;
    memset(&w, 0, sizeof w);
    double tw0 = tpm_now_s();
    tpm_status st;
    if (o.weights) {
        tpm_st_file *f = NULL;
        st = tpm_st_open(o.weights, &f);
        if (st == TPM_OK) st = tpm_moe_weights_load(f, p, (int)o.layer, &w);
        tpm_st_close(f);
        if (st != TPM_OK) {
            free(x);
            return cli_usage_error(CMD, "--weights %s: %s", o.weights, tpm_last_error());
        }
    } else {
        st = tpm_moe_weights_random_layer(p, (uint64_t)o.seed, (int)o.layer, p->routed_format, &w);
        if (st != TPM_OK) {
            free(x);
            return cli_fail(CMD, "random weights", st, tpm_last_error());
        }
    }
    double tw1 = tpm_now_s();

    tpm_comm_t comms[MAX_RANKS] = {0};
    tpm_moe_t moes[MAX_RANKS] = {0};
    rank_job jobs[MAX_RANKS];
    pthread_t th[MAX_RANKS];
    gpu_bufs gb;
    memset(&gb, 0, sizeof gb);
    void **ys = calloc((size_t)world, sizeof *ys);
    tpm_moe_stats *stats = calloc((size_t)world * (size_t)(o.iters + 1), sizeof *stats);
    int32_t *ids = NULL, *counts = NULL;
    float *wts = NULL;
    int ret = 1, ncomm = 0;
    memset(jobs, 0, sizeof jobs);
    if (!ys || !stats) goto done;
    if (world > 1) {
        tpm_config cfg = TPM_CONFIG_INIT;
        cfg.backend = cuda ? TPM_BACKEND_CUDA : TPM_BACKEND_CPU;
        cfg.dtype = dt;
        cfg.model = p->name;
        cfg.tp = (int32_t)o.tp;
        cfg.ep = (int32_t)o.ep;
        if (codec != TPM_CODEC_DEFAULT) cfg.codec = codec;
        st = tpm_comm_init_all(comms, world, NULL, &cfg);
        if (st != TPM_OK) {
            ret = cli_fail(CMD, "communicator init", st, tpm_last_error());
            goto done;
        }
        ncomm = world;
    }
    for (int r = 0; r < world; r++) {
        tpm_moe_config mc = TPM_MOE_CONFIG_INIT;
        mc.preset = p->name;
        mc.layer = (int32_t)o.layer;
        mc.tp_size = (int32_t)o.tp;
        mc.ep_size = (int32_t)o.ep;
        mc.tp_rank = r % (int)o.tp;
        mc.ep_rank = r / (int)o.tp;
        mc.fuse_shared = o.fuse;
        mc.backend = o.backend;
        mc.dtype = dt;
        mc.codec = codec;
        mc.algo = algo;
        if (cuda) mc.device = rank_dev((int)r); /* like the comm's */
        st = tpm_moe_create_from_weights(&moes[r], &mc, comms[r], &w);
        if (st != TPM_OK) {
            ret = cli_fail(CMD, "MoE layer create", st, tpm_last_error());
            goto done;
        }
        ys[r] = malloc(n * tpm_dtype_size(dt));
        if (!ys[r]) goto done;
        memset(ys[r], 0xff, n * tpm_dtype_size(dt)); /* poison: NaN */
        if (cuda && (st = gpu_setup(&gb, r, x, n * tpm_dtype_size(dt))) != TPM_OK) {
            ret = cli_fail(CMD, "GPU buffers", st, tpm_last_error());
            goto done;
        }
        jobs[r] = (rank_job){moes[r],
                             comms[r],
                             cuda ? gb.x[r] : x,
                             cuda ? gb.y[r] : ys[r],
                             cuda ? gb.stream[r] : NULL,
                             T,
                             dt,
                             (int)o.iters,
                             stats + (size_t)r * (size_t)(o.iters + 1),
                             TPM_OK,
                             ""};
    }
    tpm_moe_info info;
    tpm_moe_get_info(moes[0], &info);
    printf("moe: preset %s (hidden %d, %d experts top-%d, inter %d, shared %d), layer %lld, %zu "
           "tokens "
           "%s, %s weights (%.2f s)\n",
           p->name, p->hidden, p->n_experts, p->top_k, p->inter, p->n_shared, o.layer, T,
           tpm_dtype_name(dt), o.weights ? o.weights : "random", tw1 - tw0);
    printf("ranks: tp %lld x ep %lld = %d (threads%s), backend %s, all-reduce codec %s, algo %s\n",
           o.tp, o.ep, world, cuda ? ", rank r on GPU r mod the GPU count" : "", cuda ? "cuda" : "cpu",
           codec == TPM_CODEC_DEFAULT ? "from config" : tpm_codec_name(codec), tpm_algo_name(algo));

    for (int r = 0; r < world; r++)
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    for (int r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < world; r++)
        if (jobs[r].st != TPM_OK) {
            ret = cli_fail(CMD, "forward", jobs[r].st, jobs[r].err);
            goto done;
        }
    for (int r = 0; r < world && cuda; r++)
        if ((st = gpu_fetch(&gb, r, ys[r], n * tpm_dtype_size(dt))) != TPM_OK) {
            ret = cli_fail(CMD, "copy y back", st, tpm_last_error());
            goto done;
        }

    size_t nk = T * (size_t)p->top_k;
    ids = malloc(nk * sizeof *ids);
    wts = malloc(nk * sizeof *wts);
    counts = malloc((size_t)(p->n_experts + p->n_shared) * sizeof *counts);
    if (!ids || !wts || !counts) goto done;
    tpm_moe_last_routing(moes[0], ids, wts, counts, T);
    print_routing(p, counts, T, &info);

    /* ranks agree: same routing, bitwise equal outputs */
    int agree = 1;
    int32_t *ids_r = malloc(nk * sizeof *ids_r);
    for (int r = 1; r < world && ids_r; r++) {
        tpm_moe_last_routing(moes[r], ids_r, NULL, NULL, T);
        if (memcmp(ids_r, ids, nk * sizeof *ids) || memcmp(ys[r], ys[0], n * tpm_dtype_size(dt)))
            agree = 0;
    }
    free(ids_r);

    int ni = (int)o.iters;
    printf("time per forward (median of %d, after 1 warm-up), per rank [ms]:\n", ni);
    printf("  rank  tp ep   active  pairs   router  experts  combine  allreduce    total\n");
    double tot_max = 0;
    for (int r = 0; r < world; r++) {
        const tpm_moe_stats *s = stats + (size_t)r * (size_t)(ni + 1) + 1;
        double tr = median_field(s, ni, offsetof(tpm_moe_stats, t_router));
        double te = median_field(s, ni, offsetof(tpm_moe_stats, t_experts));
        double tc = median_field(s, ni, offsetof(tpm_moe_stats, t_combine));
        double ta = median_field(s, ni, offsetof(tpm_moe_stats, t_allreduce));
        double tt = median_field(s, ni, offsetof(tpm_moe_stats, t_total));
        if (tt > tot_max) tot_max = tt;
        printf("  %4d  %2d %2d  %7d %6lld %8.3f %8.3f %8.3f %10.3f %8.3f\n", r, r % (int)o.tp,
               r / (int)o.tp, s[0].local_active_experts, (long long)s[0].local_pairs, tr * 1e3,
               te * 1e3, tc * 1e3, ta * 1e3, tt * 1e3);
    }
    printf(
        "layer: %.3f ms per forward (slowest rank), %.0f tokens/s; ranks agree (routing and output "
        "bits): %s\n",
        tot_max * 1e3, tot_max > 0 ? (double)T / tot_max : 0.0, agree ? "yes" : "NO");
    ret = agree ? 0 : 1;
    if (o.check) {
        /* the bound follows the codec the layer's all-reduce really applied:
         * an explicit codec with an explicit algorithm always applies; else
         * the dispatch decides (config codec, quant window) */
        tpm_codec applied = TPM_CODEC_NONE;
        if (world > 1) {
            tpm_algo pa = TPM_ALGO_AUTO;
            if (codec != TPM_CODEC_DEFAULT && algo != TPM_ALGO_AUTO)
                applied = codec;
            else if (tpm_allreduce_plan(comms[0], T * (size_t)p->hidden, dt, codec, &pa, &applied) != TPM_OK)
                applied = codec == TPM_CODEC_DEFAULT ? TPM_CODEC_INT4 : codec; /* unknown: the loosest bound */
        }
        if (check_f64(moes[0], &w, x, ys[0], ids, T, dt, applied)) ret = 1;
    }
    if (o.output) {
        st = write_output(&o, p, &info, x, ys[0], ids, wts, T, dt);
        if (st != TPM_OK)
            ret = cli_fail(CMD, "--output", st, tpm_last_error());
        else
            printf("wrote %s (x, y [%zu, %d] %s; topk_ids i32, topk_weights f32 [%zu, %d])\n",
                   o.output, T, p->hidden, tpm_dtype_name(dt), T, p->top_k);
    }

done:
    for (int r = 0; r < world; r++) {
        tpm_moe_destroy(moes[r]);
        if (ys) free(ys[r]);
    }
    gpu_free(&gb);
    for (int r = 0; r < ncomm; r++)
        tpm_comm_destroy(comms[r]);
    free(ys);
    free(stats);
    free(ids);
    free(wts);
    free(counts);
    free(x);
    tpm_moe_weights_free(&w);
    return ret;
}
