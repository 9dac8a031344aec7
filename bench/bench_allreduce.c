/*
 * bench_allreduce.c - `tpmoe bench allreduce`: tpmoe's CUDA all-reduce and
 * NCCL side by side in one process, one host thread per GPU.
 *
 * For every size and codec: validate first (fresh random inputs, output
 * against an fp64 host sum, bitwise agreement of all ranks), then time inside
 * CUDA graphs (a graph of K back-to-back calls, many replays, median per
 * call), for tpmoe (one-shot and two-shot for exact, two-shot for codecs)
 * and NCCL. The floor of each row is the launch time of an empty graph node
 * plus the bytes each direction must carry over the peer bandwidth measured
 * in the same run (a copy kernel writing peer memory, both directions at
 * once). Prints a table and writes JSON (--json); --png runs
 * bench/plot_allreduce.py on the JSON.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TPMOE_HAVE_CUDA
int cmd_bench_allreduce(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: tpmoe bench allreduce [--tp N] [--dtype T] [--codecs LIST] [--sizes A:B]\n"
                   "  (needs a CUDA build; this build has none)\n");
            return 0;
        }
    fprintf(stderr, "tpmoe bench allreduce: this build has no CUDA (configure with nvcc present and "
                    "-DTPMOE_CUDA=ON); the benchmark times the CUDA all-reduce against NCCL\n");
    return 1;
}
#else

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <cuda_runtime_api.h>

#include "codec/codec.h"
#include "comm/comm_internal.h"
#include "comm/cuda_comm.h"
#include "internal.h"
#include "numeric.h"

#define MAXW TPM_CUDA_MAX_WORLD
#define MAXSIZES 64
#define MAXVAR 4

static const char *kCmd = "bench allreduce";

static void usage(FILE *f) {
    fprintf(f,
            "usage: tpmoe bench allreduce [--tp N] [--dtype bf16|fp16|fp32] [--codecs LIST]\n"
            "                             [--sizes A:B|a,b,c] [--iters N] [--variants L]\n"
            "                             [--json FILE] [--png FILE]\n"
            "  --tp N        ranks = GPUs used, one host thread each (default 2)\n"
            "  --dtype T     element type (default bf16)\n"
            "  --codecs L    none,int8,int6,int4,fp8,int4_h,int6_h (default none,int8,int6,int4,fp8)\n"
            "  --sizes S     message bytes per rank: powers of two A..B or a list (default 4K:128M)\n"
            "  --iters N     timed graph replays per point (default 30)\n"
            "  --variants L  kernel variants (TPMOE_CUDA_AR_VARIANT, e.g. 2,1,3) timed at every point\n"
            "                (8: the exact two-shot over registered in/out buffers, which this\n"
            "                benchmark registers; the others copy into the peer buffers)\n"
            "                in this process; each is checked bitwise against the first\n"
            "  --json FILE   write every number as JSON\n"
            "  --png FILE    plot latency and speed-up vs size (runs bench/plot_allreduce.py)\n");
}

/* MARK: per-rank work */
typedef enum { OP_VALIDATE, OP_TIME, OP_PROBE, OP_PROBE_PULL, OP_PROBE_MIXED } op_kind;

typedef struct rank_ctx {
    struct tpm_comm *c;
    int dev;
    cudaStream_t s;
    void *din, *dout, *scratch, *peer_scratch;
    void *hin, *hout;
    cudaEvent_t e0, e1;
} rank_ctx;

typedef struct task {
    rank_ctx *r;
    op_kind op;
    size_t count;
    tpm_dtype dt;
    tpm_codec codec;
    tpm_algo algo;
    int calls, iters;
    size_t probe_bytes;
    double us; /* median per call */
    tpm_status st;
    char msg[256];
} task;

static tpm_status call(task *t) {
    rank_ctx *r = t->r;
    return r->c->ops->allreduce(r->c, r->din, r->dout, t->count, t->dt, t->codec, t->algo, r->s);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Capture `calls` launches of fn into a graph, replay it iters times, and
 * return the median time of one call (us). */
static void time_graph(task *t) {
    rank_ctx *r = t->r;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    double *ms = malloc(sizeof(double) * (size_t)t->iters);
    t->st = TPM_ERR_CUDA;
    if (!ms) return;
    if (cudaStreamBeginCapture(r->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) goto out;
    tpm_status st = TPM_OK;
    for (int k = 0; k < t->calls && st == TPM_OK; k++) {
        if (t->op == OP_PROBE)
            st = tpm_cuda_copy_launch(r->peer_scratch, r->scratch, t->probe_bytes,
                                      t->probe_bytes > 65536 ? 264 : 1, r->s)
                     ? TPM_ERR_CUDA
                     : TPM_OK;
        else if (t->op == OP_PROBE_PULL) /* read the peer: into the upper half of mine */
            st = tpm_cuda_copy_launch((uint8_t *)r->scratch + t->probe_bytes, r->peer_scratch,
                                      t->probe_bytes, 264, r->s)
                     ? TPM_ERR_CUDA
                     : TPM_OK;
        else if (t->op == OP_PROBE_MIXED) /* half the CTAs write the peer, half read it */
            st = tpm_cuda_copy2_launch(r->peer_scratch, r->scratch, (uint8_t *)r->scratch + 2 * t->probe_bytes,
                                       (uint8_t *)r->peer_scratch + t->probe_bytes, t->probe_bytes, 264, r->s)
                     ? TPM_ERR_CUDA
                     : TPM_OK;
        else
            st = call(t);
    }
    if (cudaStreamEndCapture(r->s, &g) != cudaSuccess || st != TPM_OK) {
        snprintf(t->msg, sizeof t->msg, "capture: %s", tpm_err_msg());
        t->st = st != TPM_OK ? st : TPM_ERR_CUDA;
        goto out;
    }
    if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) goto out_g;
    for (int w = 0; w < 3; w++) cudaGraphLaunch(ge, r->s);
    for (int i = 0; i < t->iters; i++) {
        float f = 0;
        cudaEventRecord(r->e0, r->s);
        cudaGraphLaunch(ge, r->s);
        cudaEventRecord(r->e1, r->s);
        cudaEventSynchronize(r->e1);
        cudaEventElapsedTime(&f, r->e0, r->e1);
        ms[i] = f;
    }
    qsort(ms, (size_t)t->iters, sizeof *ms, cmp_d);
    t->us = ms[t->iters / 2] * 1000.0 / t->calls;
    t->st = cudaStreamSynchronize(r->s) == cudaSuccess ? tpm_cuda_comm_poll(r->c) : TPM_ERR_CUDA;
    if (t->st != TPM_OK) snprintf(t->msg, sizeof t->msg, "%s", tpm_err_msg());
    cudaGraphExecDestroy(ge);
out_g:
    cudaGraphDestroy(g);
out:
    free(ms);
}

static void *task_run(void *p) {
    task *t = (task *)p;
    rank_ctx *r = t->r;
    cudaSetDevice(r->dev);
    t->msg[0] = '\0';
    if (t->op == OP_VALIDATE) {
        size_t bytes = t->count * tpm_dtype_size(t->dt);
        /* on r->s: a non-blocking stream does not wait for the legacy one */
        cudaMemcpyAsync(r->din, r->hin, bytes, cudaMemcpyHostToDevice, r->s);
        cudaMemsetAsync(r->dout, 0xA5, bytes, r->s);
        t->st = call(t);
        if (t->st != TPM_OK) snprintf(t->msg, sizeof t->msg, "%s", tpm_err_msg());
        if (cudaStreamSynchronize(r->s) != cudaSuccess) t->st = TPM_ERR_CUDA;
        if (t->st == TPM_OK) t->st = tpm_cuda_comm_poll(r->c);
        cudaMemcpy(r->hout, r->dout, bytes, cudaMemcpyDeviceToHost);
    } else {
        time_graph(t);
    }
    return NULL;
}

static int run_ranks(task *ts, int W) {
    pthread_t th[MAXW];
    for (int i = 0; i < W; i++) pthread_create(&th[i], NULL, task_run, &ts[i]);
    for (int i = 0; i < W; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < W; i++)
        if (ts[i].st != TPM_OK) {
            fprintf(stderr, "tpmoe %s: rank %d: %s: %s\n", kCmd, i, tpm_status_string(ts[i].st),
                    ts[i].msg);
            return -1;
        }
    return 0;
}

/* MARK: validation */
static uint64_t rng(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(void *p, tpm_dtype dt, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        double u1 = ((double)(rng(&seed) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = (double)(rng(&seed) >> 11) * (1.0 / 9007199254740992.0);
        tpm_store_f32(p, (int)dt, i, (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)));
    }
}

/* rel. L2 error of rank 0's output vs the fp64 sum; agree = all ranks equal */
static double validate(rank_ctx *rk, int W, size_t n, tpm_dtype dt, int *agree) {
    size_t es = tpm_dtype_size(dt);
    double e2 = 0, r2 = 0;
    *agree = 1;
    for (int r = 1; r < W; r++)
        if (memcmp(rk[r].hout, rk[0].hout, n * es)) *agree = 0;
    for (size_t i = 0; i < n; i++) {
        double ref = 0;
        for (int r = 0; r < W; r++) ref += tpm_load_f32(rk[r].hin, (int)dt, i);
        double d = tpm_load_f32(rk[0].hout, (int)dt, i) - ref;
        e2 += d * d;
        r2 += ref * ref;
    }
    return r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
}

/* MARK: the command */
typedef struct row {
    size_t bytes;
    tpm_codec codec;
    const char *algo;
    double us, us_oneshot, us_twoshot, nccl_us, floor_us, err;
    int agree, ok;
    double vus[MAXVAR][2]; /* per --variants entry: one-shot, two-shot us */
    int vsame[MAXVAR];     /* outputs bitwise equal to the first variant's */
} row;

/* JSON numbers: jansson has no NaN, so a missing time is left out. */
static void set_num(json_t *o, const char *key, double v) {
    if (isfinite(v)) json_object_set_new(o, key, json_real(v));
}

static int parse_codecs(const char *s, tpm_codec *out, int max) {
    char buf[256];
    int k = 0;
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (k >= max || tpm_codec_parse(tok, &out[k]) != TPM_OK || out[k] == TPM_CODEC_DEFAULT)
            return -1;
        k++;
    }
    return k;
}

int cmd_bench_allreduce(int argc, char **argv) {
    long long tp = 2, iters = 30;
    tpm_dtype dt = TPM_DTYPE_BF16;
    tpm_codec codecs[TPM_CODEC_COUNT_] = {TPM_CODEC_NONE, TPM_CODEC_INT8, TPM_CODEC_INT6,
                                          TPM_CODEC_INT4, TPM_CODEC_FP8};
    int ncodecs = 5;
    int64_t sizes[MAXSIZES];
    int nsizes = cli_parse_size_list("4K:128M", sizes, MAXSIZES);
    const char *json_path = NULL, *png_path = NULL;
    int variants[MAXVAR], nvar = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!v) return cli_usage_error(kCmd, "option %s needs a value", a);
        i++;
        if (!strcmp(a, "--tp")) {
            if (cli_parse_int(v, 1, MAXW, &tp)) return cli_usage_error(kCmd, "--tp: 1..%d", MAXW);
        } else if (!strcmp(a, "--iters")) {
            if (cli_parse_int(v, 3, 100000, &iters)) return cli_usage_error(kCmd, "--iters: 3..100000");
        } else if (!strcmp(a, "--dtype")) {
            if (tpm_dtype_parse(v, &dt) != TPM_OK) return cli_usage_error(kCmd, "--dtype: bad '%s'", v);
        } else if (!strcmp(a, "--codecs")) {
            if ((ncodecs = parse_codecs(v, codecs, TPM_CODEC_COUNT_)) <= 0)
                return cli_usage_error(kCmd, "--codecs: bad list '%s'", v);
        } else if (!strcmp(a, "--sizes")) {
            if ((nsizes = cli_parse_size_list(v, sizes, MAXSIZES)) <= 0)
                return cli_usage_error(kCmd, "--sizes: bad '%s'", v);
        } else if (!strcmp(a, "--variants")) {
            nvar = 0;
            for (const char *p = v; *p;) {
                char *end = NULL;
                long n = strtol(p, &end, 10);
                if (end == p || n < 0 || n > 19 || nvar == MAXVAR || (*end && *end != ','))
                    return cli_usage_error(kCmd, "--variants: up to %d of 0..19, comma separated",
                                           MAXVAR);
                variants[nvar++] = (int)n;
                p = *end ? end + 1 : end;
            }
            if (!nvar) return cli_usage_error(kCmd, "--variants: empty list");
        } else if (!strcmp(a, "--json")) {
            json_path = v;
        } else if (!strcmp(a, "--png")) {
            png_path = v;
        } else {
            return cli_usage_error(kCmd, "unknown option %s", a);
        }
    }
    int W = (int)tp, ndev = tpm_cuda_device_count();
    if (ndev < W) {
        fprintf(stderr, "tpmoe %s: --tp %d needs %d GPUs, %d visible\n", kCmd, W, W, ndev);
        return 1;
    }
    size_t es = tpm_dtype_size(dt), maxb = 0;
    for (int i = 0; i < nsizes; i++) {
        sizes[i] -= sizes[i] % (int64_t)es;
        if ((size_t)sizes[i] > maxb) maxb = (size_t)sizes[i];
    }

    /* communicators and buffers */
    tpm_status st = TPM_OK;
    struct tpm_comm *cs[MAXW];
    rank_ctx rk[MAXW];
    memset(rk, 0, sizeof rk);
    for (int i = 0; i < W; i++) {
        cs[i] = calloc(1, sizeof(struct tpm_comm));
        if (!cs[i]) return cli_fail(kCmd, "allocation", TPM_ERR_NO_MEMORY, "");
        /* environment and defaults (the kernel set: TPMOE_CUDA_AR_VARIANT) */
        st = tpm_config_resolve(NULL, &cs[i]->cfg, NULL, 0);
        if (st != TPM_OK) return cli_fail(kCmd, "config", st, tpm_err_msg());
        cs[i]->cfg.buffer_bytes = (int64_t)maxb;
        cs[i]->cfg.timeout_ms = 20000;
    }
    st = tpm_cuda_comm_init_all(cs, W, NULL);
    if (st != TPM_OK) return cli_fail(kCmd, "init", st, tpm_err_msg());
    size_t probe = 256u << 20;
    for (int i = 0; i < W; i++) {
        rk[i].c = cs[i];
        rk[i].dev = i;
        cudaSetDevice(i);
        cudaStreamCreateWithFlags(&rk[i].s, cudaStreamNonBlocking);
        cudaEventCreate(&rk[i].e0);
        cudaEventCreate(&rk[i].e1);
        if (cudaMalloc(&rk[i].din, maxb) || cudaMalloc(&rk[i].dout, maxb) ||
            cudaMalloc(&rk[i].scratch, probe) || !(rk[i].hin = malloc(maxb)) ||
            !(rk[i].hout = malloc(maxb)))
            return cli_fail(kCmd, "allocation", TPM_ERR_NO_MEMORY, "device or host buffers");
        cudaMemset(rk[i].scratch, 0x3c, probe);
    }
    for (int i = 0; i < W; i++) rk[i].peer_scratch = rk[(i + 1) % W].scratch;
    { /* kernel set 8 (--variants ...8): every rank's in/out registered with every comm */
        const void *ins[MAXW];
        void *outs[MAXW];
        for (int i = 0; i < W; i++) {
            ins[i] = rk[i].din;
            outs[i] = rk[i].dout;
        }
        for (int i = 0; i < W; i++) tpm_cuda_comm_register_io(cs[i], ins, outs, maxb);
    }

    /* peer bandwidth (all ranks write their peer at once) and launch floor */
    task ts[MAXW];
    double bw = 0, launch_us = 0;
    for (int i = 0; i < W; i++)
        ts[i] = (task){.r = &rk[i], .op = OP_PROBE, .calls = 4, .iters = 10, .probe_bytes = probe};
    if (W > 1 && run_ranks(ts, W) == 0) bw = (double)probe / (ts[0].us * 1e-6) / 1e9;
    /* the same link read instead of written, and both at once (each rank
     * writes its peer with half its CTAs and reads it with the other half:
     * every direction carries a write stream and a read stream) */
    double bw_pull = 0, bw_mixed = 0;
    for (int i = 0; i < W; i++)
        ts[i] = (task){.r = &rk[i], .op = OP_PROBE_PULL, .calls = 4, .iters = 10, .probe_bytes = probe / 2};
    if (W > 1 && run_ranks(ts, W) == 0) bw_pull = (double)(probe / 2) / (ts[0].us * 1e-6) / 1e9;
    for (int i = 0; i < W; i++)
        ts[i] = (task){.r = &rk[i], .op = OP_PROBE_MIXED, .calls = 4, .iters = 10, .probe_bytes = probe / 4};
    if (W > 1 && run_ranks(ts, W) == 0) bw_mixed = (double)(probe / 2) / (ts[0].us * 1e-6) / 1e9;
    for (int i = 0; i < W; i++)
        ts[i] = (task){.r = &rk[i], .op = OP_PROBE, .calls = 50, .iters = 20, .probe_bytes = 16};
    if (run_ranks(ts, W) == 0) launch_us = ts[0].us;
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("tpmoe bench allreduce: %d x %s, %s, peer write %.0f GB/s per direction (both at once), "
           "graph-node launch %.2f us\n",
           W, prop.name, tpm_dtype_name(dt), bw, launch_us);
    printf("# link probe per direction, all ranks at once: write %.0f GB/s, read %.0f GB/s, "
           "half write + half read %.0f GB/s\n", bw, bw_pull, bw_mixed);
    printf("%10s %-7s %-8s %9s %9s %9s %8s %9s %9s %9s %s\n", "bytes", "codec", "algo", "tpmoe_us",
           "1shot_us", "2shot_us", "nccl_us", "speedup", "busbw", "floor_us", "rel_err");
    if (nvar > 1)
        printf("(tpmoe/1shot/2shot: variant %d; vN a/b: variant N one-shot/two-shot us, its output "
               "checked bitwise against variant %d's)\n",
               variants[0], variants[0]);

    row *rows = calloc((size_t)nsizes * (size_t)ncodecs, sizeof(row));
    unsigned char *vref = malloc(maxb * (size_t)W);
    if (!rows || !vref) return cli_fail(kCmd, "allocation", TPM_ERR_NO_MEMORY, "rows");
    int nrows = 0, failures = 0;
    uint64_t seed = 12345;
    for (int si = 0; si < nsizes; si++) {
        size_t bytes = (size_t)sizes[si], n = bytes / es;
        int calls = bytes <= (1u << 20) ? 50 : bytes <= (16u << 20) ? 10 : 3;
        double nccl_us = NAN;
        if (W > 1) { /* eager call first: NCCL connects lazily, not inside a capture */
            for (int i = 0; i < W; i++) fill(rk[i].hin, dt, n, seed++);
            for (int i = 0; i < W; i++)
                ts[i] = (task){&rk[i], OP_VALIDATE, n, dt, TPM_CODEC_NONE, TPM_ALGO_NCCL, 1, 1, 0,
                               0, TPM_OK, ""};
            int ok = run_ranks(ts, W) == 0;
            for (int i = 0; i < W && ok; i++)
                ts[i] = (task){&rk[i], OP_TIME, n, dt, TPM_CODEC_NONE, TPM_ALGO_NCCL, calls,
                               (int)iters, 0, 0, TPM_OK, ""};
            if (ok && run_ranks(ts, W) == 0) nccl_us = ts[0].us;
        }
        for (int ci = 0; ci < ncodecs; ci++) {
            tpm_codec codec = codecs[ci];
            row *R = &rows[nrows++];
            R->bytes = bytes;
            R->codec = codec;
            R->nccl_us = nccl_us;
            R->us_oneshot = R->us_twoshot = NAN;
            for (int vi = 0; vi < MAXVAR; vi++) {
                R->vus[vi][0] = R->vus[vi][1] = NAN;
                R->vsame[vi] = 1;
            }
            R->ok = 1;
            double err_max = 0;
            R->agree = 1;
            for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT; a++) {
                if (a == TPM_ALGO_ONESHOT && codec != TPM_CODEC_NONE) continue;
                for (int i = 0; i < W; i++) fill(rk[i].hin, dt, n, seed++);
                for (int vi = 0; vi < (nvar ? nvar : 1); vi++) {
                    for (int i = 0; i < W && nvar; i++) /* no rank thread runs */
                        tpm_cuda_comm_set_variant(cs[i], variants[vi]);
                    double us = NAN;
                    for (int i = 0; i < W; i++)
                        ts[i] = (task){&rk[i], OP_VALIDATE, n, dt, codec, (tpm_algo)a, 1, 1, 0, 0,
                                       TPM_OK, ""};
                    if (run_ranks(ts, W)) {
                        R->ok = 0;
                    } else if (vi == 0) {
                        int agree = 0;
                        double e = validate(rk, W, n, dt, &agree);
                        if (e > err_max) err_max = e;
                        R->agree &= agree;
                        for (int i = 0; i < W && nvar > 1; i++)
                            memcpy(vref + (size_t)i * maxb, rk[i].hout, n * es);
                    } else {
                        int same = 1;
                        for (int i = 0; i < W; i++)
                            same &= !memcmp(vref + (size_t)i * maxb, rk[i].hout, n * es);
                        if (!same) {
                            R->ok = 0;
                            fprintf(stderr, "tpmoe %s: variant %d differs from variant %d\n",
                                    kCmd, variants[vi], variants[0]);
                        }
                        R->vsame[vi] = same;
                    }
                    if (R->ok) {
                        for (int i = 0; i < W; i++)
                            ts[i] = (task){&rk[i], OP_TIME, n, dt, codec, (tpm_algo)a, calls,
                                           (int)iters, 0, 0, TPM_OK, ""};
                        if (run_ranks(ts, W)) {
                            R->ok = 0;
                        } else {
                            us = ts[0].us;
                            for (int i = 1; i < W; i++) us = ts[i].us > us ? ts[i].us : us;
                        }
                    }
                    R->vus[vi][a == TPM_ALGO_ONESHOT ? 0 : 1] = us;
                    if (vi == 0) {
                        if (a == TPM_ALGO_ONESHOT) R->us_oneshot = us;
                        else R->us_twoshot = us;
                    }
                }
            }
            int two = isnan(R->us_oneshot) || R->us_twoshot < R->us_oneshot;
            R->us = two ? R->us_twoshot : R->us_oneshot;
            R->algo = two ? "twoshot" : "oneshot";
            R->err = err_max;
            double bound = codec == TPM_CODEC_NONE ? 1e-2 : tpm_codec_allreduce_error_bound(codec);
            if (!R->agree || !(R->err <= bound)) R->ok = 0;
            double ratio = codec == TPM_CODEC_NONE
                               ? 1.0
                               : (double)tpm_codec_wire_bytes(codec, tpm_codec_nblocks(n)) / (double)bytes;
            double dir_bytes = 2.0 * (W - 1) / W * (double)bytes * ratio;
            R->floor_us = launch_us + (bw > 0 ? dir_bytes / (bw * 1e9) * 1e6 : 0);
            double busbw = 2.0 * (W - 1) / W * (double)bytes / (R->us * 1e-6) / 1e9;
            printf("%10zu %-7s %-8s %9.2f %9.2f %9.2f %8.2f %8.2fx %9.1f %9.2f %9.2e", bytes,
                   tpm_codec_name(codec), R->algo, R->us, R->us_oneshot, R->us_twoshot, nccl_us,
                   nccl_us / R->us, busbw, R->floor_us, R->err);
            for (int vi = 1; vi < nvar; vi++)
                printf(" v%d %.2f/%.2f", variants[vi], R->vus[vi][0], R->vus[vi][1]);
            printf("%s\n", R->ok ? "" : R->agree ? "  FAIL(error)" : "  FAIL(ranks disagree)");
            failures += !R->ok;
            fflush(stdout);
        }
    }

    if (json_path) {
        json_t *root = json_object(), *arr = json_array();
        char cmdline[2048] = "tpmoe";
        for (int i = 0; i < argc; i++) {
            strncat(cmdline, " ", sizeof cmdline - strlen(cmdline) - 1);
            strncat(cmdline, argv[i], sizeof cmdline - strlen(cmdline) - 1);
        }
        json_object_set_new(root, "command", json_string(cmdline));
        json_object_set_new(root, "device", json_string(prop.name));
        json_object_set_new(root, "tp", json_integer(W));
        json_object_set_new(root, "dtype", json_string(tpm_dtype_name(dt)));
        json_object_set_new(root, "iters", json_integer(iters));
        set_num(root, "peer_write_GBps", bw);
        set_num(root, "peer_read_GBps", bw_pull);
        set_num(root, "peer_write_read_GBps", bw_mixed);
        set_num(root, "launch_us", launch_us);
        for (int i = 0; i < nrows; i++) {
            row *R = &rows[i];
            json_t *o = json_object();
            json_object_set_new(o, "bytes", json_integer((json_int_t)R->bytes));
            json_object_set_new(o, "codec", json_string(tpm_codec_name(R->codec)));
            json_object_set_new(o, "algo", json_string(R->algo));
            set_num(o, "us", R->us);
            set_num(o, "oneshot_us", R->us_oneshot);
            set_num(o, "twoshot_us", R->us_twoshot);
            set_num(o, "nccl_us", R->nccl_us);
            set_num(o, "floor_us", R->floor_us);
            set_num(o, "rel_err", R->err);
            json_object_set_new(o, "ranks_agree", json_boolean(R->agree));
            json_object_set_new(o, "valid", json_boolean(R->ok));
            if (nvar) {
                json_t *va = json_object();
                for (int vi = 0; vi < nvar; vi++) {
                    json_t *vo = json_object();
                    char key[4];
                    snprintf(key, sizeof key, "%d", variants[vi]);
                    set_num(vo, "oneshot_us", R->vus[vi][0]);
                    set_num(vo, "twoshot_us", R->vus[vi][1]);
                    json_object_set_new(vo, "same_bits_as_first", json_boolean(R->vsame[vi]));
                    json_object_set_new(va, key, vo);
                }
                json_object_set_new(o, "variants", va);
            }
            json_array_append_new(arr, o);
        }
        json_object_set_new(root, "results", arr);
        if (json_dump_file(root, json_path, JSON_INDENT(1)) != 0)
            fprintf(stderr, "tpmoe %s: cannot write %s\n", kCmd, json_path);
        json_decref(root);
        if (png_path) cli_run_plot(kCmd, "plot_allreduce.py", json_path, png_path, 0);
    } else if (png_path) {
        fprintf(stderr, "tpmoe %s: --png needs --json\n", kCmd);
    }
    for (int i = 0; i < W; i++) {
        cudaSetDevice(i);
        cudaStreamSynchronize(rk[i].s);
        cudaFree(rk[i].din);
        cudaFree(rk[i].dout);
        cudaFree(rk[i].scratch);
        free(rk[i].hin);
        free(rk[i].hout);
    }
    for (int i = 0; i < W; i++) {
        cs[i]->ops->destroy(cs[i]);
        free(cs[i]);
    }
    free(rows);
    free(vref);
    if (failures) fprintf(stderr, "tpmoe %s: %d rows failed validation\n", kCmd, failures);
    return failures ? 1 : 0;
}
#endif /* TPMOE_HAVE_CUDA */
