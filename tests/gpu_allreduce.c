/*
 * gpu_allreduce.c - GPU tests of the CUDA all-reduce backend and the GPU
 * codec encoders (ctest label gpu). Exit 77 (skipped) with a printed reason
 * where the build has no CUDA or the machine no GPU.
 *
 * Ranks are host threads, one per GPU, each with its own stream (like one
 * process per GPU). Every check draws fresh seeded random inputs, poisons the
 * outputs, and asserts: bitwise agreement of all ranks, bitwise equality with
 * the host reference of the CPU communicator's arithmetic (fp32 sums in rank
 * order; two-shot codecs through the CPU codec functions with the same
 * segments), GPU encoder bytes equal to the golden vectors, 100k CUDA-graph
 * replays with alternating sizes, TPM_ERR_TIMEOUT when a peer never comes,
 * ranks sharing a GPU with a kernel that needs nearly every SM between their
 * calls, and documented errors for bad arguments.
 *
 * On a machine with ONE GPU the multi-rank tests run worlds 2..8 on it
 * (TPMOE_CUDA_SHARE_GPU=1, set here unless the environment says otherwise):
 * every protocol, codec and world size is checked for bits, agreement,
 * graphs and timeouts; nothing is timed and the NCCL case is skipped (NCCL
 * refuses two ranks on one GPU).
 */
#include <stdio.h>

#ifndef TPMOE_HAVE_CUDA
int main(void) {
    printf("gpu_allreduce: skipped: this build has no CUDA (TPMOE_CUDA=OFF or no nvcc)\n");
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

#include "codec/codec.h"
#include "codec/codec_cuda.h"
#include "comm/comm_internal.h"
#include "comm/cuda_comm.h"
#include "numeric.h"

#define MAXW TPM_CUDA_MAX_WORLD
#define CK(x) assert_int_equal((int)(x), (int)cudaSuccess)

static int g_ndev;
static int g_share; /* ranks share the GPUs (TPMOE_CUDA_SHARE_GPU=1) */
static int g_wmax;  /* the largest world the multi-rank tests run */
#define DEV(r) ((r) % g_ndev)

/* MARK: helpers */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_normal(uint64_t *s) {
    double u1 = ((double)(rng_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill_random(void *p, tpm_dtype dt, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        float v = (float)(rng_normal(&seed) * (i % 97 == 0 ? 30.0 : 1.0));
        tpm_store_f32(p, (int)dt, i, v);
    }
}

typedef struct comms {
    int n;
    struct tpm_comm *c[MAXW];
    cudaStream_t s[MAXW];
} comms;

static void comms_make(comms *cs, int n, int64_t buffer_bytes, int timeout_ms) {
    cs->n = n;
    for (int i = 0; i < n; i++) {
        cs->c[i] = calloc(1, sizeof(struct tpm_comm));
        assert_non_null(cs->c[i]);
        /* environment and defaults (the kernel set: TPMOE_CUDA_AR_VARIANT) */
        assert_int_equal(tpm_config_resolve(NULL, &cs->c[i]->cfg, NULL, 0), TPM_OK);
        cs->c[i]->cfg.buffer_bytes = buffer_bytes;
        cs->c[i]->cfg.timeout_ms = timeout_ms;
        cs->c[i]->cfg.world_size = n;
        cs->c[i]->cfg.rank = i;
    }
    tpm_status st = tpm_cuda_comm_init_all(cs->c, n, NULL);
    if (st != TPM_OK) fprintf(stderr, "init_all: %s\n", tpm_err_msg());
    assert_int_equal(st, TPM_OK);
    for (int i = 0; i < n; i++) {
        CK(cudaSetDevice(DEV(i)));
        CK(cudaStreamCreateWithFlags(&cs->s[i], cudaStreamNonBlocking));
    }
}

static void comms_free(comms *cs) {
    for (int i = 0; i < cs->n; i++) {
        cudaSetDevice(DEV(i));
        cudaStreamDestroy(cs->s[i]);
        cs->c[i]->ops->destroy(cs->c[i]);
        free(cs->c[i]);
    }
}

typedef struct job {
    struct tpm_comm *c;
    int dev;
    cudaStream_t s;
    const void *in;
    void *out;
    size_t count;
    tpm_dtype dt;
    tpm_codec codec;
    tpm_algo algo;
    int reps;
    tpm_status st;
    char msg[TPM_ERRMSG_LEN];
} job;

static void *job_run(void *p) {
    job *j = (job *)p;
    cudaSetDevice(j->dev);
    j->st = TPM_OK;
    for (int r = 0; r < j->reps && j->st == TPM_OK; r++)
        j->st = j->c->ops->allreduce(j->c, j->in, j->out, j->count, j->dt, j->codec, j->algo, j->s);
    if (j->st != TPM_OK) snprintf(j->msg, sizeof j->msg, "%s", tpm_err_msg());
    if (cudaStreamSynchronize(j->s) != cudaSuccess) j->st = TPM_ERR_CUDA;
    return NULL;
}

static void run_all(job *jobs, int n) {
    pthread_t th[MAXW];
    for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&th[i], NULL, job_run, &jobs[i]), 0);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

/* Host reference of the CPU communicator (cpu_comm.c): exact = fp32 sum in
 * rank order rounded once; codecs = two-shot with owner segments of
 * ceil(nblk/W) blocks, the owner's term exact, others through the codec. */
static void reference(tpm_codec codec, tpm_dtype dt, int W, void *const *in, size_t n, void *out) {
    if (codec == TPM_CODEC_NONE) {
        for (size_t i = 0; i < n; i++) {
            float acc = tpm_load_f32(in[0], (int)dt, i);
            for (int r = 1; r < W; r++) acc = acc + tpm_load_f32(in[r], (int)dt, i);
            tpm_store_f32(out, (int)dt, i, acc);
        }
        return;
    }
    size_t es = tpm_dtype_size(dt), nblk = tpm_codec_nblocks(n);
    size_t sblk = (nblk + (size_t)W - 1) / (size_t)W;
    float *acc = malloc(sblk * 32 * 4), *term = malloc(sblk * 32 * 4);
    uint8_t *wire = malloc(tpm_codec_wire_bytes(codec, sblk) + 16);
    assert_true(acc && term && wire);
    for (int o = 0; o < W; o++) {
        size_t e0 = (size_t)o * sblk * 32, e1 = e0 + sblk * 32;
        if (e0 > n) e0 = n;
        if (e1 > n) e1 = n;
        size_t sn = e1 - e0, nb = tpm_codec_nblocks(sn);
        if (!sn) continue;
        for (int r = 0; r < W; r++) {
            float *t = r == 0 ? acc : term;
            tpm_codec_to_domain(codec, (const uint8_t *)in[r] + e0 * es, dt, sn, t);
            if (r != o) {
                tpm_codec_quantize(codec, t, nb, wire);
                tpm_codec_dequantize(codec, wire, nb, t);
            }
            if (r > 0)
                for (size_t k = 0; k < nb * 32; k++) acc[k] = acc[k] + term[k];
        }
        tpm_codec_quantize(codec, acc, nb, wire);
        tpm_codec_dequantize(codec, wire, nb, acc);
        tpm_codec_from_domain(codec, acc, sn, (uint8_t *)out + e0 * es, dt);
    }
    free(acc);
    free(term);
    free(wire);
}

/* One all-reduce on every rank; checks rank agreement and the reference.
 * offset_elems shifts in/out off 16-byte alignment; inplace uses in == out. */
static void check_case(comms *cs, tpm_dtype dt, tpm_codec codec, tpm_algo algo, size_t n,
                       size_t offset_elems, int inplace, uint64_t seed) {
    int W = cs->n;
    size_t es = tpm_dtype_size(dt), bytes = (n + offset_elems) * es;
    void *hin[MAXW] = {0}, *hout[MAXW] = {0}, *din[MAXW] = {0}, *dout[MAXW] = {0};
    void *ref = malloc(n * es + 1);
    job jobs[MAXW];
    assert_non_null(ref);
    for (int r = 0; r < W; r++) {
        hin[r] = malloc(n * es + 1);
        hout[r] = malloc(n * es + 1);
        assert_true(hin[r] && hout[r]);
        fill_random(hin[r], dt, n, seed * 131 + (uint64_t)r);
        CK(cudaSetDevice(DEV(r)));
        CK(cudaMalloc(&din[r], bytes));
        dout[r] = din[r];
        if (!inplace) CK(cudaMalloc(&dout[r], bytes));
        CK(cudaMemcpy((uint8_t *)din[r] + offset_elems * es, hin[r], n * es, cudaMemcpyHostToDevice));
        if (!inplace) CK(cudaMemset(dout[r], 0xA5, bytes)); /* poison */
        CK(cudaDeviceSynchronize()); /* the legacy stream's copies land before s runs */
        jobs[r] = (job){cs->c[r], DEV(r), cs->s[r], (uint8_t *)din[r] + offset_elems * es,
                        (uint8_t *)dout[r] + offset_elems * es, n, dt, codec, algo, 1, TPM_OK, ""};
    }
    run_all(jobs, W);
    reference(codec, dt, W, hin, n, ref);
    for (int r = 0; r < W; r++) {
        if (jobs[r].st != TPM_OK) fprintf(stderr, "rank %d: %s\n", r, jobs[r].msg);
        assert_int_equal(jobs[r].st, TPM_OK);
        CK(cudaSetDevice(DEV(r)));
        CK(cudaMemcpy(hout[r], (uint8_t *)dout[r] + offset_elems * es, n * es, cudaMemcpyDeviceToHost));
        if (memcmp(hout[r], hout[0], n * es) != 0) {
            fprintf(stderr, "ranks 0 and %d disagree (%s %s algo %d n %zu)\n", r, tpm_dtype_name(dt),
                    tpm_codec_name(codec), (int)algo, n);
            fail();
        }
    }
    if (algo == TPM_ALGO_NCCL) { /* NCCL's summation order is its own: tolerance */
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < n; i++) {
            double d = (double)tpm_load_f32(hout[0], (int)dt, i) - (double)tpm_load_f32(ref, (int)dt, i);
            e2 += d * d;
            r2 += (double)tpm_load_f32(ref, (int)dt, i) * (double)tpm_load_f32(ref, (int)dt, i);
        }
        assert_true(e2 <= 1e-4 * r2);
    } else if (memcmp(hout[0], ref, n * es) != 0) {
        size_t i = 0;
        while (i < n && !memcmp((uint8_t *)hout[0] + i * es, (uint8_t *)ref + i * es, es)) i++;
        fprintf(stderr, "differs from the reference at %zu of %zu (%s %s algo %d W %d): %g vs %g\n",
                i, n, tpm_dtype_name(dt), tpm_codec_name(codec), (int)algo, W,
                (double)tpm_load_f32(hout[0], (int)dt, i), (double)tpm_load_f32(ref, (int)dt, i));
        fail();
    }
    for (int r = 0; r < W; r++) {
        cudaSetDevice(DEV(r));
        cudaFree(din[r]);
        if (!inplace) cudaFree(dout[r]);
        free(hin[r]);
        free(hout[r]);
    }
    free(ref);
}

/* MARK: tests */
static const size_t kSizes[] = {1, 3, 31, 32, 33, 1000, 4097, 6144, 65539, 393221, 1200007};

static void exact_world(int W) {
    comms cs;
    comms_make(&cs, W, 8 << 20, 10000);
    uint64_t seed = 1;
    for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++)
        for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT; a++)
            for (size_t k = 0; k < sizeof kSizes / sizeof kSizes[0]; k++)
                check_case(&cs, (tpm_dtype)dt, TPM_CODEC_NONE, (tpm_algo)a, kSizes[k], 0, 0, seed++);
    /* pieces: larger than one launch's slot (8 MB) */
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, (9u << 20) + 5, 0, 0, seed++);
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, (9u << 20) + 5, 0, 0, seed++);
    /* NCCL path: rank agreement and a tolerance (ranks sharing a GPU have no NCCL) */
    if (!g_share || W == 1)
        check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_NCCL, 100003, 0, 0, seed++);
    comms_free(&cs);
}

/* Launches of 16 MiB and more: the default kernel set runs its
 * warp-specialized two-shot there (exact, INT8, INT6 over 16-bit dtypes;
 * cuda_sync.h TPM_CUDA_WS_MIN_BYTES), which the 8 MB buffers above never
 * reach. A 64 MB buffer holds a 24 MB message in one launch, a 160 MB one
 * a 64 MB message. */
static void test_large_launches(void **state) {
    (void)state;
    if (g_wmax < 2) skip();
    comms cs;
    comms_make(&cs, 2, 64 << 20, 10000);
    const size_t n = (12u << 20) + 37; /* 24 MB of bf16, a ragged last group */
    uint64_t seed = 7001;
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, n, 0, 0, seed++);
    check_case(&cs, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, n, 3, 0, seed++); /* unaligned */
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, n, 0, 0, seed++);
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_INT6, TPM_ALGO_TWOSHOT, n, 0, 1, seed++); /* in place */
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_INT4, TPM_ALGO_TWOSHOT, n, 0, 0, seed++);
    /* the flag-free kernel's warps take their units from a counter (~3 each here): back to
     * back, a rotated codec, unaligned and in place */
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_INT4_H, TPM_ALGO_TWOSHOT, n, 5, 1, seed++);
    check_case(&cs, TPM_DTYPE_FP16, TPM_CODEC_INT4, TPM_ALGO_TWOSHOT, n - 40, 0, 0, seed++);
    comms_free(&cs);
    /* 64 MB of bf16 in one launch: the warp-specialized exact kernel takes its columns from
     * the counter there (>= kWsTakeMinCols per CTA, cuda_twoshot_ws.cu), a ragged tail */
    comms_make(&cs, 2, 160 << 20, 10000);
    const size_t nb = (32u << 20) + 1001;
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, nb, 0, 0, seed++);
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, nb - 5000, 1, 1, seed++);
    comms_free(&cs);
}

static void test_exact_world1(void **state) {
    (void)state;
    exact_world(1);
}

static void test_exact_all_gpus(void **state) {
    (void)state;
    if (g_wmax < 2) skip();
    for (int W = 2; W <= g_wmax; W++) exact_world(W);
}

static void test_codecs(void **state) {
    (void)state;
    int W = g_wmax;
    static const size_t sizes[] = {1, 33, 1000, 8192 * 3 + 17, 300001};
    comms cs;
    comms_make(&cs, W, 8 << 20, 10000);
    uint64_t seed = 1000;
    for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++)
        for (int c = TPM_CODEC_INT8; c < TPM_CODEC_COUNT_; c++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
                check_case(&cs, (tpm_dtype)dt, (tpm_codec)c, TPM_ALGO_TWOSHOT, sizes[k], 0, 0, seed++);
    comms_free(&cs);
}

static void test_inplace_and_unaligned(void **state) {
    (void)state;
    int W = g_wmax;
    comms cs;
    comms_make(&cs, W, 8 << 20, 10000);
    for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT; a++) {
        check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)a, 70001, 0, 1, 7);
        check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)a, 70001, 1, 0, 8);
        check_case(&cs, TPM_DTYPE_FP32, TPM_CODEC_NONE, (tpm_algo)a, 5001, 3, 1, 9);
    }
    check_case(&cs, TPM_DTYPE_BF16, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, 70001, 1, 1, 10);
    check_case(&cs, TPM_DTYPE_FP16, TPM_CODEC_INT4_H, TPM_ALGO_TWOSHOT, 70001, 3, 0, 11);
    comms_free(&cs);
}

static void test_bad_args(void **state) {
    (void)state;
    comms cs;
    comms_make(&cs, 1, 1 << 20, 1000);
    void *d = NULL;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&d, 4096));
    struct tpm_comm *c = cs.c[0];
    assert_int_equal(c->ops->allreduce(c, (uint8_t *)d + 1, d, 10, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                       TPM_ALGO_ONESHOT, cs.s[0]),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(c->ops->allreduce(c, d, (uint8_t *)d + 2, 10, TPM_DTYPE_FP32, TPM_CODEC_NONE,
                                       TPM_ALGO_TWOSHOT, cs.s[0]),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(c->ops->allreduce(c, d, d, 10, TPM_DTYPE_BF16, TPM_CODEC_INT8,
                                       TPM_ALGO_ONESHOT, cs.s[0]),
                     TPM_ERR_UNSUPPORTED);
    assert_int_equal(c->ops->allreduce(c, d, d, 0, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                       TPM_ALGO_ONESHOT, cs.s[0]),
                     TPM_OK);
    CK(cudaStreamSynchronize(cs.s[0]));
    cudaFree(d);
    comms_free(&cs);
    struct tpm_comm *bad[1] = {NULL};
    assert_int_equal(tpm_cuda_comm_init_all(bad, 0, NULL), TPM_ERR_INVALID_ARG);
    int dev = g_ndev + 3;
    struct tpm_comm one;
    memset(&one, 0, sizeof one);
    struct tpm_comm *pone = &one;
    assert_int_equal(tpm_cuda_comm_init_all(&pone, 1, &dev), TPM_ERR_INVALID_ARG);
    /* two ranks on one GPU: refused without TPMOE_CUDA_SHARE_GPU; with it, an engine's NCCL
     * comms are refused (NCCL cannot put two ranks on one GPU) */
    struct tpm_comm two[2], *ptwo[2] = {&two[0], &two[1]};
    int same[2] = {0, 0};
    for (int share = 0; share <= 1; share++) {
        memset(two, 0, sizeof two);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(tpm_config_resolve(NULL, &two[i].cfg, NULL, 0), TPM_OK);
            two[i].cfg.buffer_bytes = 1 << 20;
            two[i].cfg.cuda_share_gpu = share;
            two[i].nccl_comm = share ? (void *)&two[0] : NULL; /* never dereferenced */
        }
        assert_int_equal(tpm_cuda_comm_init_all(ptwo, 2, same), TPM_ERR_INVALID_ARG);
        assert_non_null(strstr(tpm_err_msg(), share ? "NCCL" : "TPMOE_CUDA_SHARE_GPU"));
    }
}

/* Ranks sharing a GPU (TPMOE_CUDA_SHARE_GPU, src/comm/cuda_comm.cu): rank 0's
 * all-reduce is enqueued first and spins for rank 1; rank 1's stream then runs
 * a kernel that needs all but four SMs, each whole and all at once
 * (tests/util/full_sm_kernel.cu), before its own all-reduce. Rank 0's spinning
 * grid must leave that many SMs free (TPM_CUDA_SHARE_GRID CTAs; the earlier
 * grid, 66 CTAs on an H200, would hold at least 33 SMs until its timeout: by
 * that count, not run). Both sums right, no timeout. */
int test_full_sm_barrier_launch(int nblocks, unsigned *arrived, unsigned *failed,
                                unsigned long long timeout_ns, void *stream);
static void test_share_full_gpu(void **state) {
    (void)state;
    if (!g_share || g_ndev != 1) skip(); /* the case of ranks on one GPU */
    int sms = 0;
    CK(cudaSetDevice(0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT; a++) {
        comms cs;
        comms_make(&cs, 2, 8 << 20, 2000);
        const size_t n = (1u << 20) + 5; /* bf16: both algorithms use dozens of CTAs */
        void *h[2], *d[2];
        unsigned *ctl = NULL, hctl[2] = {7, 7};
        CK(cudaMalloc((void **)&ctl, 2 * sizeof *ctl));
        CK(cudaMemset(ctl, 0, 2 * sizeof *ctl));
        for (int r = 0; r < 2; r++) {
            h[r] = malloc(n * 2);
            assert_non_null(h[r]);
            fill_random(h[r], TPM_DTYPE_BF16, n, 7700 + (uint64_t)(10 * a + r));
            CK(cudaMalloc(&d[r], n * 2));
            CK(cudaMemcpy(d[r], h[r], n * 2, cudaMemcpyHostToDevice));
        }
        CK(cudaDeviceSynchronize());
        /* one thread: rank 0's call first, then rank 1's stream: the full-GPU kernel, its call */
        assert_int_equal(cs.c[0]->ops->allreduce(cs.c[0], d[0], d[0], n, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                                 (tpm_algo)a, cs.s[0]),
                         TPM_OK);
        assert_int_equal(test_full_sm_barrier_launch(sms - 4, ctl, ctl + 1, 10000000000ull, cs.s[1]), 0);
        assert_int_equal(cs.c[1]->ops->allreduce(cs.c[1], d[1], d[1], n, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                                 (tpm_algo)a, cs.s[1]),
                         TPM_OK);
        CK(cudaStreamSynchronize(cs.s[0]));
        CK(cudaStreamSynchronize(cs.s[1]));
        CK(cudaMemcpy(hctl, ctl, sizeof hctl, cudaMemcpyDeviceToHost));
        assert_int_equal(hctl[0], (unsigned)(sms - 4)); /* every CTA of it ran */
        assert_int_equal(hctl[1], 0u);                   /* all at once, in time */
        for (int r = 0; r < 2; r++) {
            tpm_status st = tpm_comm_get_async_error(cs.c[r]);
            if (st != TPM_OK) fprintf(stderr, "rank %d: %s\n", r, tpm_comm_last_error(cs.c[r]));
            assert_int_equal(st, TPM_OK);
        }
        void *ref = malloc(n * 2), *got = malloc(n * 2);
        assert_true(ref && got);
        reference(TPM_CODEC_NONE, TPM_DTYPE_BF16, 2, h, n, ref);
        for (int r = 0; r < 2; r++) {
            CK(cudaMemcpy(got, d[r], n * 2, cudaMemcpyDeviceToHost));
            assert_memory_equal(got, ref, n * 2);
        }
        free(ref);
        free(got);
        for (int r = 0; r < 2; r++) {
            cudaFree(d[r]);
            free(h[r]);
        }
        cudaFree(ctl);
        comms_free(&cs);
    }
}

/* A peer that never calls: the waiting kernel gives up, the next call and
 * the poll say TPM_ERR_TIMEOUT. */
static void test_timeout(void **state) {
    (void)state;
    if (g_wmax < 2) skip();
    for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT; a++) {
        comms cs;
        comms_make(&cs, 2, 1 << 20, 300);
        void *d = NULL;
        CK(cudaSetDevice(0));
        CK(cudaMalloc(&d, 1 << 16));
        CK(cudaMemset(d, 0x3c, 1 << 16));
        job j = {cs.c[0], 0, cs.s[0], d, d, 20000, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)a, 1,
                 TPM_OK, ""};
        double t0 = (double)tpm_now_ns();
        job_run(&j);
        double ms = ((double)tpm_now_ns() - t0) * 1e-6;
        assert_int_equal(j.st, TPM_OK); /* the kernel ended by itself */
        assert_true(ms < 5000.0);
        assert_int_equal(tpm_cuda_comm_poll(cs.c[0]), TPM_ERR_TIMEOUT);
        /* the public form, as a caller asks after its stream sync */
        assert_int_equal(tpm_comm_get_async_error(cs.c[0]), TPM_ERR_TIMEOUT);
        assert_non_null(strstr(tpm_comm_last_error(cs.c[0]), "gave up"));
        assert_int_equal(cs.c[0]->ops->allreduce(cs.c[0], d, d, 16, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                                 (tpm_algo)a, cs.s[0]),
                         TPM_ERR_TIMEOUT);
        assert_int_equal(tpm_cuda_comm_poll(cs.c[1]), TPM_OK);
        assert_int_equal(tpm_comm_get_async_error(cs.c[1]), TPM_OK);
        cudaFree(d);
        comms_free(&cs);
    }
}

/* MARK: graphs */
typedef struct gjob {
    pthread_barrier_t *ready; /* every rank's graph instantiated before any replays */
    struct tpm_comm *c;
    int dev;
    cudaStream_t s;
    void *in[3], *out[3];
    size_t n[3];
    tpm_codec codec[3];
    tpm_algo algo[3];
    int calls, replays;
    tpm_status st;
} gjob;

static void *gjob_run(void *p) {
    gjob *g = (gjob *)p;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaSetDevice(g->dev);
    g->st = TPM_ERR_CUDA;
    if (cudaStreamBeginCapture(g->s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return NULL;
    tpm_status st = TPM_OK;
    for (int k = 0; k < g->calls && st == TPM_OK; k++) {
        int v = k % 3;
        st = g->c->ops->allreduce(g->c, g->in[v], g->out[v], g->n[v], TPM_DTYPE_BF16, g->codec[v],
                                  g->algo[v], g->s);
    }
    /* uploaded here, not by the first launch: where ranks share a GPU, one rank's upload,
     * instantiation or lazily loaded kernel may wait for the device while another's replays
     * already spin for it (the same driver wait as a library load, bench/results/r117), so
     * every rank's graph is on the device before any replays, and replays start together */
    int ok = cudaStreamEndCapture(g->s, &graph) == cudaSuccess && st == TPM_OK &&
             cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
             cudaGraphUpload(exec, g->s) == cudaSuccess && cudaStreamSynchronize(g->s) == cudaSuccess;
    pthread_barrier_wait(g->ready);
    if (!ok) return NULL;
    for (int r = 0; r < g->replays; r++)
        if (cudaGraphLaunch(exec, g->s) != cudaSuccess) return NULL;
    if (cudaStreamSynchronize(g->s) != cudaSuccess) return NULL;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    g->st = tpm_cuda_comm_poll(g->c);
    if (g->st != TPM_OK) fprintf(stderr, "graph replays: %s\n", tpm_err_msg());
    return NULL;
}

static void test_graph_replays(void **state) {
    (void)state;
    int W = g_wmax;
    /* GPU_AR_WORLD / GPU_AR_REPLAYS (diagnostics, e.g. under compute-sanitizer): another world
     * (<= the largest), fewer or more replays of the 30-call graph (default 3400: 102000 calls) */
    const char *ew = getenv("GPU_AR_WORLD"), *er = getenv("GPU_AR_REPLAYS");
    if (ew && atoi(ew) >= 2 && atoi(ew) <= g_wmax) W = atoi(ew);
    const int replays = er && atoi(er) > 0 ? atoi(er) : 3400;
    comms cs;
    comms_make(&cs, W, 8 << 20, 10000);
    const size_t n[3] = {6144, 393216 + 77, 150001};
    /* exact two-shot (flag kernels) and INT4 two-shot (set 10 at world 2: the
     * flag-free kernel, its own slots) alternate in one graph */
    const tpm_codec codec[3] = {TPM_CODEC_NONE, TPM_CODEC_NONE, TPM_CODEC_INT4};
    const tpm_algo algo[3] = {TPM_ALGO_ONESHOT, TPM_ALGO_TWOSHOT, TPM_ALGO_TWOSHOT};
    void *hin[3][MAXW] = {{0}}, *ref = malloc(n[1] * 2), *h = malloc(n[1] * 2);
    gjob g[MAXW];
    pthread_t th[MAXW];
    for (int r = 0; r < W; r++) {
        CK(cudaSetDevice(DEV(r)));
        g[r] = (gjob){.c = cs.c[r], .dev = DEV(r), .s = cs.s[r], .calls = 30, .replays = replays};
        for (int v = 0; v < 3; v++) {
            hin[v][r] = malloc(n[v] * 2);
            fill_random(hin[v][r], TPM_DTYPE_BF16, n[v], 77 + (uint64_t)(v * 8 + r));
            CK(cudaMalloc(&g[r].in[v], n[v] * 2));
            CK(cudaMalloc(&g[r].out[v], n[v] * 2));
            CK(cudaMemcpy(g[r].in[v], hin[v][r], n[v] * 2, cudaMemcpyHostToDevice));
            CK(cudaMemset(g[r].out[v], 0xA5, n[v] * 2));
            CK(cudaDeviceSynchronize()); /* before the non-blocking streams use them */
            g[r].n[v] = n[v];
            g[r].codec[v] = codec[v];
            g[r].algo[v] = algo[v];
        }
    }
    pthread_barrier_t ready;
    assert_int_equal(pthread_barrier_init(&ready, NULL, (unsigned)W), 0);
    for (int r = 0; r < W; r++) g[r].ready = &ready;
    double t0 = tpm_now_s();
    for (int r = 0; r < W; r++) assert_int_equal(pthread_create(&th[r], NULL, gjob_run, &g[r]), 0);
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&ready);
    printf("graph: %d calls per rank at world %d in %.2f s\n", 30 * replays, W, tpm_now_s() - t0);
    for (int r = 0; r < W; r++) assert_int_equal(g[r].st, TPM_OK);
    for (int v = 0; v < 3; v++) {
        reference(codec[v], TPM_DTYPE_BF16, W, hin[v], n[v], ref);
        for (int r = 0; r < W; r++) {
            CK(cudaSetDevice(DEV(r)));
            CK(cudaMemcpy(h, g[r].out[v], n[v] * 2, cudaMemcpyDeviceToHost));
            assert_memory_equal(h, ref, n[v] * 2);
        }
    }
    for (int r = 0; r < W; r++)
        for (int v = 0; v < 3; v++) {
            cudaSetDevice(DEV(r));
            cudaFree(g[r].in[v]);
            cudaFree(g[r].out[v]);
            free(hin[v][r]);
        }
    free(ref);
    free(h);
    comms_free(&cs);
}

/* MARK: GPU encoder bytes vs the golden vectors */
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void test_golden_encoders(void **state) {
    (void)state;
    static const char *names[] = {"", "int8", "int6", "int4", "fp8", "int4_h", "int6_h"};
    static const char *dts[] = {"bf16", "fp16", "fp32"};
    CK(cudaSetDevice(0));
    int checked = 0;
    for (int c = 1; c < TPM_CODEC_COUNT_; c++)
        for (int dt = 0; dt < 3; dt++) {
            char path[512];
            snprintf(path, sizeof path, "%s/tests/golden/codec_%s_%s.bin", TPMOE_SOURCE_DIR,
                     names[c], dts[dt]);
            FILE *f = fopen(path, "rb");
            assert_non_null(f);
            uint8_t hdr[32];
            assert_int_equal(fread(hdr, 1, 32, f), 32);
            assert_memory_equal(hdr, "TPMGOLD1", 8);
            size_t n = rd32(hdr + 16), ib = rd32(hdr + 20), wb = rd32(hdr + 24), ob = rd32(hdr + 28);
            uint8_t *buf = malloc(ib + wb + ob);
            assert_int_equal(fread(buf, 1, ib + wb + ob, f), ib + wb + ob);
            fclose(f);
            size_t nblk = tpm_codec_nblocks(n);
            float *dom = malloc(nblk * 32 * 4);
            uint8_t *wire = malloc(wb);
            void *dec = malloc(ob);
            tpm_codec_to_domain((tpm_codec)c, buf, (tpm_dtype)dt, n, dom);
            float *ddom;
            uint8_t *dwire;
            CK(cudaMalloc((void **)&ddom, nblk * 32 * 4));
            CK(cudaMalloc((void **)&dwire, wb));
            CK(cudaMemcpy(ddom, dom, nblk * 32 * 4, cudaMemcpyHostToDevice));
            CK(cudaMemset(dwire, 0xA5, wb));
            assert_int_equal(tpm_cuda_codec_quantize((tpm_codec)c, ddom, nblk, dwire, NULL), 0);
            CK(cudaMemcpy(wire, dwire, wb, cudaMemcpyDeviceToHost));
            assert_memory_equal(wire, buf + ib, wb);
            CK(cudaMemset(ddom, 0xA5, nblk * 32 * 4));
            assert_int_equal(tpm_cuda_codec_dequantize((tpm_codec)c, dwire, nblk, ddom, NULL), 0);
            CK(cudaMemcpy(dom, ddom, nblk * 32 * 4, cudaMemcpyDeviceToHost));
            tpm_codec_from_domain((tpm_codec)c, dom, n, dec, (tpm_dtype)dt);
            assert_memory_equal(dec, buf + ib + wb, ob);
            cudaFree(ddom);
            cudaFree(dwire);
            free(buf);
            free(dom);
            free(wire);
            free(dec);
            checked++;
        }
    assert_int_equal(checked, 18);
}

int main(void) {
    /* kernels loaded at start: a lazily loaded kernel's first launch may wait for the device,
     * which, where ranks share a GPU, runs another rank's kernels spinning for this one */
    if (!getenv("CUDA_MODULE_LOADING")) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    /* and as many hardware queues as CUDA has: two ranks' streams on one queue serialize, so a
     * rank's kernel could wait behind another rank's kernel spinning for it */
    if (!getenv("CUDA_DEVICE_MAX_CONNECTIONS")) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
    g_ndev = tpm_cuda_device_count();
    if (g_ndev < 1) {
        printf("gpu_allreduce: skipped: no CUDA GPU visible on this machine\n");
        return 77;
    }
    if (g_ndev == 1 && !getenv("TPMOE_CUDA_SHARE_GPU")) setenv("TPMOE_CUDA_SHARE_GPU", "1", 1);
    const char *sg = getenv("TPMOE_CUDA_SHARE_GPU");
    g_share = sg && !strcmp(sg, "1");
    g_wmax = g_share ? MAXW : (g_ndev < MAXW ? g_ndev : MAXW);
    printf("gpu_allreduce: %d GPUs%s, worlds up to %d\n", g_ndev,
           g_share ? " shared by the ranks (TPMOE_CUDA_SHARE_GPU=1: checked, not timed, no NCCL)" : "",
           g_wmax);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_encoders),   cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_exact_world1),      cmocka_unit_test(test_exact_all_gpus),
        cmocka_unit_test(test_codecs),            cmocka_unit_test(test_inplace_and_unaligned),
        cmocka_unit_test(test_graph_replays),     cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_large_launches),    cmocka_unit_test(test_share_full_gpu),
    };
    /* GPU_AR_ONLY=<substring>: only the tests whose names contain it (diagnostics) */
    const char *only = getenv("GPU_AR_ONLY");
    if (only && *only) {
        struct CMUnitTest sel[sizeof tests / sizeof tests[0]];
        size_t ns = 0;
        for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++)
            if (strstr(tests[i].name, only)) sel[ns++] = tests[i];
        printf("gpu_allreduce: GPU_AR_ONLY=%s: %zu test(s)\n", only, ns);
        return _cmocka_run_group_tests("gpu_allreduce", sel, ns, NULL, NULL);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* TPMOE_HAVE_CUDA */
