/*
 * test_comm_cpu.c - the CPU communicator with ranks as threads
 * (tpm_comm_init_all): every world 1..8 shape we care about, one-shot and
 * two-shot, every codec, bf16/fp16/fp32, odd counts, aliasing, chunking,
 * long call sequences, per-call mismatch, timeouts, bad arguments and the
 * dispatch rules. Outputs are checked bit for bit against the independent
 * reference in test_comm_ref.h, on every rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "comm/comm_internal.h"
#include "comm/cpu_comm.h"
#include "test_comm_ref.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXW 8

typedef struct call_spec {
    size_t count;
    tpm_dtype dt;
    tpm_codec codec; /* argument */
    tpm_algo algo;   /* argument */
    int inplace;
} call_spec;

typedef struct harness {
    int W;
    tpm_comm_t comm[MAXW];
    const call_spec *calls;
    int ncalls;
    uint64_t seed;
    void **out;     /* [call * W + rank] */
    tpm_status *st; /* [call * W + rank] */
    char (*msg)[TPM_ERRMSG_LEN];
    int skip_rank;       /* this rank makes no calls (-1: none) */
    int count_bias_rank; /* this rank adds 1 to every count (-1: none) */
    int call_div;        /* calls k and k' share inputs when k/call_div == k'/call_div */
} harness;

typedef struct rank_arg {
    harness *h;
    int rank;
} rank_arg;

static uint64_t input_seed(const harness *h, int call, int rank) {
    return h->seed * 1000003u + (uint64_t)(call / h->call_div) * 131u + (uint64_t)rank;
}

static void *rank_main(void *p) {
    rank_arg *a = (rank_arg *)p;
    harness *h = a->h;
    if (a->rank == h->skip_rank) return NULL;
    for (int k = 0; k < h->ncalls; k++) {
        const call_spec *c = &h->calls[k];
        size_t n = c->count + (a->rank == h->count_bias_rank ? 1 : 0);
        size_t bytes = n * tpm_dtype_size(c->dt);
        void *in = malloc(bytes + 1);
        tr_fill(in, c->dt, n, input_seed(h, k, a->rank));
        void *out = h->out[k * h->W + a->rank];
        memset(out, 0xa5, bytes); /* poison */
        if (c->inplace) memcpy(out, in, bytes);
        tpm_status st = tpm_allreduce_ex(h->comm[a->rank], c->inplace ? out : in, out, n, c->dt,
                                         c->codec, c->algo, NULL);
        free(in);
        h->st[k * h->W + a->rank] = st;
        if (st != TPM_OK) {
            snprintf(h->msg[k * h->W + a->rank], TPM_ERRMSG_LEN, "%s",
                     tpm_comm_last_error(h->comm[a->rank]));
            break;
        }
    }
    return NULL;
}

static void harness_init(harness *h, int W, int64_t buffer_bytes, int timeout_ms,
                         const call_spec *calls, int ncalls, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->W = W;
    h->calls = calls;
    h->ncalls = ncalls;
    h->seed = seed;
    h->skip_rank = -1;
    h->count_bias_rank = -1;
    h->call_div = 1;
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.buffer_bytes = buffer_bytes;
    cfg.timeout_ms = timeout_ms;
    cfg.codec = TPM_CODEC_NONE;
    assert_int_equal(tpm_comm_init_all(h->comm, W, NULL, &cfg), TPM_OK);
    h->out = calloc((size_t)ncalls * (size_t)W, sizeof *h->out);
    h->st = calloc((size_t)ncalls * (size_t)W, sizeof *h->st);
    h->msg = calloc((size_t)ncalls * (size_t)W, sizeof *h->msg);
    for (int k = 0; k < ncalls; k++)
        for (int r = 0; r < W; r++)
            h->out[k * W + r] = malloc((calls[k].count + 1) * tpm_dtype_size(calls[k].dt));
    for (int i = 0; i < ncalls * W; i++)
        h->st[i] = (tpm_status)-1;
}

static void harness_run(harness *h) {
    pthread_t th[MAXW];
    rank_arg args[MAXW];
    for (int r = 0; r < h->W; r++) {
        args[r].h = h;
        args[r].rank = r;
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < h->W; r++)
        pthread_join(th[r], NULL);
}

static void harness_free(harness *h) {
    for (int r = 0; r < h->W; r++)
        assert_int_equal(tpm_comm_destroy(h->comm[r]), TPM_OK);
    for (int i = 0; i < h->ncalls * h->W; i++)
        free(h->out[i]);
    free(h->out);
    free(h->st);
    free(h->msg);
}

/* Every call succeeded on every rank and matches the reference bit for bit. */
static void harness_check(harness *h) {
    tpm_resolved_config rc;
    assert_int_equal(tpm_comm_get_config(h->comm[0], &rc), TPM_OK);
    size_t region, off, total;
    tpm_cpu_arena_layout(h->W, rc.buffer_bytes, &region, &off, &total);
    for (int k = 0; k < h->ncalls; k++) {
        const call_spec *c = &h->calls[k];
        size_t bytes = c->count * tpm_dtype_size(c->dt);
        tpm_algo algo;
        tpm_codec codec;
        assert_int_equal(tpm_dispatch_plan(&rc, TPM_BACKEND_CPU, h->W, bytes, c->dt, c->codec,
                                           c->algo, 0, &algo, &codec),
                         TPM_OK);
        void *in[MAXW];
        for (int r = 0; r < h->W; r++) {
            in[r] = malloc(bytes);
            tr_fill(in[r], c->dt, c->count, input_seed(h, k, r));
        }
        void *ref = malloc(bytes);
        tr_ref((const void *const *)in, h->W, c->count, c->dt, codec,
               tpm_cpu_chunk_elems(TPM_ALGO_TWOSHOT, codec, c->dt, h->W, region / 2), ref);
        for (int r = 0; r < h->W; r++) {
            if (h->st[k * h->W + r] != TPM_OK)
                fail_msg("call %d (W=%d count=%zu %s %s %s) rank %d: status %d: %s", k, h->W,
                         c->count, tpm_dtype_name(c->dt), tpm_codec_name(codec),
                         tpm_algo_name(algo), r, (int)h->st[k * h->W + r], h->msg[k * h->W + r]);
            long d = tr_first_diff(h->out[k * h->W + r], ref, c->count, c->dt);
            if (d >= 0)
                fail_msg("call %d (W=%d count=%zu %s %s %s inplace=%d) rank %d differs from the "
                         "reference at "
                         "%ld: %g vs %g",
                         k, h->W, c->count, tpm_dtype_name(c->dt), tpm_codec_name(codec),
                         tpm_algo_name(algo), c->inplace, r, d,
                         (double)tpm_load_f32(h->out[k * h->W + r], (int)c->dt, (size_t)d),
                         (double)tpm_load_f32(ref, (int)c->dt, (size_t)d));
        }
        for (int r = 0; r < h->W; r++)
            free(in[r]);
        free(ref);
    }
}

static void run_calls(int W, int64_t buffer_bytes, const call_spec *calls, int ncalls,
                      uint64_t seed) {
    harness h;
    harness_init(&h, W, buffer_bytes, 20000, calls, ncalls, seed);
    harness_run(&h);
    harness_check(&h);
    harness_free(&h);
}

static const size_t odd_counts[] = {1, 31, 33, 1000, 12345};
#define NCOUNTS (sizeof odd_counts / sizeof odd_counts[0])
static const tpm_codec lossy[] = {TPM_CODEC_INT8, TPM_CODEC_INT6,   TPM_CODEC_INT4,
                                  TPM_CODEC_FP8,  TPM_CODEC_INT4_H, TPM_CODEC_INT6_H};
#define NLOSSY (sizeof lossy / sizeof lossy[0])

/* MARK: exact, every world */
static void test_exact_worlds(void **state) {
    (void)state;
    static const int worlds[] = {1, 2, 3, 4, 8};
    call_spec calls[2 * 3 * NCOUNTS];
    int n = 0;
    for (int a = 0; a < 2; a++)
        for (int d = 0; d < 3; d++)
            for (size_t i = 0; i < NCOUNTS; i++, n++) {
                calls[n].count = odd_counts[i];
                calls[n].dt = (tpm_dtype)d;
                calls[n].codec = TPM_CODEC_NONE;
                calls[n].algo = a ? TPM_ALGO_TWOSHOT : TPM_ALGO_ONESHOT;
                calls[n].inplace = (n % 3) == 1;
            }
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        run_calls(worlds[w], 1 << 20, calls, n, 11 + w);
}

/* One-shot and two-shot give the same bits for exact calls. */
static void test_oneshot_equals_twoshot(void **state) {
    (void)state;
    call_spec calls[6];
    for (int i = 0; i < 6; i++) {
        calls[i].count = 4099;
        calls[i].dt = (tpm_dtype)(i / 2);
        calls[i].codec = TPM_CODEC_NONE;
        calls[i].algo = (i & 1) ? TPM_ALGO_TWOSHOT : TPM_ALGO_ONESHOT;
        calls[i].inplace = 0;
    }
    harness h;
    harness_init(&h, 5, 1 << 20, 20000, calls, 6, 99);
    h.call_div = 2; /* calls 2i and 2i+1 get the same inputs */
    harness_run(&h);
    harness_check(&h);
    for (int i = 0; i < 6; i += 2)
        for (int r = 0; r < 5; r++)
            assert_memory_equal(h.out[i * 5 + r], h.out[(i + 1) * 5 + r],
                                4099 * tpm_dtype_size(calls[i].dt));
    harness_free(&h);
}

/* MARK: codecs */
static void test_codecs_worlds(void **state) {
    (void)state;
    static const int worlds[] = {1, 2, 3, 4, 8};
    static const size_t counts[] = {1, 33, 1000, 12345};
    enum { NC = 4 };
    call_spec calls[NLOSSY * 3 * NC];
    int n = 0;
    for (size_t c = 0; c < NLOSSY; c++)
        for (int d = 0; d < 3; d++)
            for (int i = 0; i < NC; i++, n++) {
                calls[n].count = counts[i];
                calls[n].dt = (tpm_dtype)d;
                calls[n].codec = lossy[c];
                calls[n].algo = TPM_ALGO_TWOSHOT;
                calls[n].inplace = (n % 4) == 3;
            }
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
        run_calls(worlds[w], 1 << 20, calls, n, 21 + w);
}

/* MARK: chunking: a buffer far smaller than the message */
static void test_chunking(void **state) {
    (void)state;
    call_spec calls[] = {
        {12345, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 0},
        {12345, TPM_DTYPE_FP32, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 1},
        {12345, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0},
        {12345, TPM_DTYPE_BF16, TPM_CODEC_INT4, TPM_ALGO_TWOSHOT, 0},
        {12345, TPM_DTYPE_BF16, TPM_CODEC_INT6_H, TPM_ALGO_TWOSHOT, 1},
        {70001, TPM_DTYPE_FP16, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, 0},
    };
    int n = (int)(sizeof calls / sizeof calls[0]);
    run_calls(3, 4096, calls, n, 31);
    run_calls(8, 4096, calls, n, 32);
    run_calls(2, 5000, calls, n, 33); /* not a multiple of the line size */
}

/* MARK: many consecutive calls, alternating sizes, algorithms and codecs */
static void test_many_calls(void **state) {
    (void)state;
    enum { N = 240 };
    static const size_t sizes[] = {1, 5000, 33, 40000, 777};
    call_spec *calls = calloc(N, sizeof *calls);
    for (int i = 0; i < N; i++) {
        calls[i].count = sizes[i % 5];
        calls[i].dt = (tpm_dtype)(i % 3 == 2 ? TPM_DTYPE_FP16 : TPM_DTYPE_BF16);
        calls[i].algo = (i % 4 == 0)   ? TPM_ALGO_ONESHOT
                        : (i % 4 == 1) ? TPM_ALGO_AUTO
                                       : TPM_ALGO_TWOSHOT;
        calls[i].codec = (i % 4 == 3) ? lossy[(i / 4) % NLOSSY] : TPM_CODEC_DEFAULT;
        calls[i].inplace = i % 7 == 0;
    }
    run_calls(4, 32 * 1024, calls, N, 41);
    free(calls);
}

/* MARK: failures */
static void test_count_mismatch(void **state) {
    (void)state;
    call_spec calls[] = {{1000, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0},
                         {1000, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0}};
    harness h;
    harness_init(&h, 3, 1 << 16, 5000, calls, 2, 51);
    h.count_bias_rank = 1;
    harness_run(&h);
    int mismatches = 0;
    for (int r = 0; r < 3; r++) {
        tpm_status st = h.st[r];
        assert_true(st == TPM_ERR_MISMATCH || st == TPM_ERR_PEER);
        if (st == TPM_ERR_MISMATCH) {
            mismatches++;
            assert_non_null(strstr(h.msg[r], "count"));
        }
        /* the communicator stays aborted */
        assert_int_equal(h.st[3 + r], (tpm_status)-1);
    }
    assert_true(mismatches >= 1);
    short buf[4] = {1, 2, 3, 4};
    assert_int_equal(tpm_allreduce(h.comm[0], buf, buf, 4, TPM_DTYPE_BF16, NULL), TPM_ERR_PEER);
    assert_non_null(strstr(tpm_comm_last_error(h.comm[0]), "aborted"));
    harness_free(&h);
}

static void test_timeout(void **state) {
    (void)state;
    call_spec calls[] = {{500, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 0}};
    harness h;
    harness_init(&h, 3, 1 << 16, 200, calls, 1, 61);
    h.skip_rank = 2;
    double t0 = tpm_now_s();
    harness_run(&h);
    double dt = tpm_now_s() - t0;
    assert_true(dt < 5.0);
    int timeouts = 0;
    for (int r = 0; r < 2; r++) {
        assert_true(h.st[r] == TPM_ERR_TIMEOUT || h.st[r] == TPM_ERR_PEER);
        if (h.st[r] == TPM_ERR_TIMEOUT) {
            timeouts++;
            assert_non_null(strstr(h.msg[r], "rank 2"));
            assert_non_null(strstr(h.msg[r], "one-shot"));
        }
    }
    assert_true(timeouts >= 1);
    /* the rank that never called finds the communicator aborted */
    short buf[4] = {1, 2, 3, 4};
    assert_int_equal(tpm_allreduce(h.comm[2], buf, buf, 4, TPM_DTYPE_BF16, NULL), TPM_ERR_PEER);
    /* CPU calls are synchronous: the errors came back from the calls, none is pending */
    for (int r = 0; r < 3; r++)
        assert_int_equal(tpm_comm_get_async_error(h.comm[r]), TPM_OK);
    harness_free(&h);
}

/* MARK: bad arguments */
static void test_bad_args(void **state) {
    (void)state;
    tpm_comm_t c[MAXW + 1];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    assert_int_equal(tpm_comm_init_all(NULL, 2, NULL, &cfg), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_init_all(c, 0, NULL, &cfg), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_init_all(c, 9, NULL, &cfg), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "9"));
    assert_int_equal(tpm_comm_init(NULL, &cfg), TPM_ERR_INVALID_ARG);

    tpm_config bad = cfg;
    bad.world_size = 0;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    assert_null(c[0]);
    assert_non_null(strstr(tpm_last_error(), "world size 0"));
    bad.world_size = 9;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "world size 9"));
    bad.world_size = 2;
    bad.rank = 2;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    bad = cfg;
    bad.dtype = (tpm_dtype)7;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    bad = cfg;
    bad.struct_size = 12;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "struct_size"));
    bad = cfg;
    bad.version = 99;
    assert_int_equal(tpm_comm_init(&c[0], &bad), TPM_ERR_INVALID_ARG);
    bad = cfg;
    bad.world_size = 3;
    assert_int_equal(tpm_comm_init_all(c, 2, NULL, &bad), TPM_ERR_INVALID_ARG);

    /* no config at all: the defaults (world 1 without TPMOE_WORLD_SIZE) */
    if (!getenv("TPMOE_WORLD_SIZE")) {
        tpm_comm_t d = NULL;
        assert_int_equal(tpm_comm_init(&d, NULL), TPM_OK);
        assert_int_equal(tpm_comm_destroy(d), TPM_OK);
    }

    /* a world-1 comm for the per-call checks */
    cfg.world_size = 1;
    cfg.rank = 0;
    tpm_comm_t one = NULL;
    assert_int_equal(tpm_comm_init(&one, &cfg), TPM_OK);
    int v = -1;
    assert_int_equal(tpm_comm_rank(one, &v), TPM_OK);
    assert_int_equal(v, 0);
    assert_int_equal(tpm_comm_world_size(one, &v), TPM_OK);
    assert_int_equal(v, 1);
    assert_int_equal(tpm_comm_rank(one, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_rank(NULL, &v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_world_size(NULL, &v), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_get_config(one, NULL), TPM_ERR_INVALID_ARG);
    uint16_t in[64], out[64];
    tr_fill(in, TPM_DTYPE_BF16, 64, 5);
    assert_int_equal(tpm_allreduce(NULL, in, out, 64, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(one, NULL, out, 64, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_comm_last_error(one), "in"));
    assert_int_equal(tpm_allreduce(one, in, NULL, 64, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(one, NULL, NULL, 0, TPM_DTYPE_BF16, NULL), TPM_OK); /* no-op */
    assert_int_equal(tpm_allreduce(one, in, out, 64, (tpm_dtype)3, NULL), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_comm_last_error(one), "dtype 3"));
    assert_int_equal(tpm_allreduce(one, in, out, 64, (tpm_dtype)-1, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(
        tpm_allreduce_ex(one, in, out, 64, TPM_DTYPE_BF16, (tpm_codec)42, TPM_ALGO_AUTO, NULL),
        TPM_ERR_INVALID_ARG);
    assert_int_equal(
        tpm_allreduce_ex(one, in, out, 64, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)9, NULL),
        TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(one, in, out, SIZE_MAX / 2, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_comm_last_error(one), "overflow"));
    assert_int_equal(
        tpm_allreduce_ex(one, in, out, 64, TPM_DTYPE_BF16, TPM_CODEC_INT4, TPM_ALGO_ONESHOT, NULL),
        TPM_ERR_UNSUPPORTED);
    assert_non_null(strstr(tpm_comm_last_error(one), "one-shot"));
    assert_int_equal(
        tpm_allreduce_ex(one, in, out, 64, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_NCCL, NULL),
        TPM_ERR_UNSUPPORTED);
    tpm_algo a;
    tpm_codec cd;
    assert_int_equal(tpm_allreduce_plan(one, 64, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, NULL, &cd),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce_plan(NULL, 64, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, &a, &cd),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce_plan(one, 64, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, &a, &cd),
                     TPM_OK);
    assert_int_equal(cd, TPM_CODEC_NONE);
    /* still works after all that */
    memset(out, 0xff, sizeof out);
    assert_int_equal(tpm_allreduce(one, in, out, 64, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_memory_equal(in, out, sizeof in);
    assert_int_equal(tpm_comm_get_async_error(one), TPM_OK);
    assert_int_equal(tpm_comm_get_async_error(NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_comm_destroy(one), TPM_OK);
    assert_int_equal(tpm_comm_destroy(NULL), TPM_ERR_INVALID_ARG);
    assert_non_null(tpm_comm_last_error(NULL));
}

/* MARK: dispatch rules */
static tpm_resolved_config base_cfg(void) {
    tpm_resolved_config rc;
    memset(&rc, 0, sizeof rc);
    rc.backend = TPM_BACKEND_CPU;
    rc.world_size = 4;
    rc.allreduce = TPM_AR_AUTO;
    rc.codec = TPM_CODEC_INT8;
    rc.quant_min_bytes = 1024;
    rc.quant_max_bytes = 1 << 20;
    rc.algo = TPM_ALGO_AUTO;
    rc.buffer_bytes = 1 << 20;
    rc.oneshot_max_bytes = -1;
    rc.custom_max_bytes = -1;
    return rc;
}

static void plan(const tpm_resolved_config *rc, tpm_backend b, size_t bytes, tpm_codec c,
                 tpm_algo a, int nccl, tpm_algo want_a, tpm_codec want_c) {
    tpm_algo ga = (tpm_algo)-1;
    tpm_codec gc = (tpm_codec)-2;
    assert_int_equal(
        tpm_dispatch_plan(rc, b, rc->world_size, bytes, TPM_DTYPE_BF16, c, a, nccl, &ga, &gc),
        TPM_OK);
    if (ga != want_a || gc != want_c)
        fail_msg("plan(%zu bytes, codec %s, algo %s): got %s/%s, want %s/%s", bytes,
                 tpm_codec_name(c), tpm_algo_name(a), tpm_algo_name(ga), tpm_codec_name(gc),
                 tpm_algo_name(want_a), tpm_codec_name(want_c));
}

static void test_dispatch(void **state) {
    (void)state;
    tpm_resolved_config rc = base_cfg();
    const tpm_backend CPU = TPM_BACKEND_CPU, CUDA = TPM_BACKEND_CUDA;
    const tpm_codec DEF = TPM_CODEC_DEFAULT, NONE = TPM_CODEC_NONE, I8 = TPM_CODEC_INT8,
                    I4 = TPM_CODEC_INT4;
    const tpm_algo AUTO = TPM_ALGO_AUTO, ONE = TPM_ALGO_ONESHOT, TWO = TPM_ALGO_TWOSHOT,
                   NCCL = TPM_ALGO_NCCL;
    /* quant window: exact below min and above max, lossy two-shot inside */
    plan(&rc, CPU, 512, DEF, AUTO, 0, ONE, NONE);
    plan(&rc, CPU, 64 * 1024, DEF, AUTO, 0, TWO, I8);
    plan(&rc, CPU, (2 << 20), DEF, AUTO, 0, TWO, NONE);
    /* explicit codec obeys the window unless the algo is explicit too */
    plan(&rc, CPU, 512, I4, AUTO, 0, ONE, NONE);
    plan(&rc, CPU, 512, I4, TWO, 0, TWO, I4);
    /* one-shot is exact only */
    tpm_algo ga;
    tpm_codec gc;
    assert_int_equal(
        tpm_dispatch_plan(&rc, CPU, 4, 64 * 1024, TPM_DTYPE_BF16, I4, ONE, 0, &ga, &gc),
        TPM_ERR_UNSUPPORTED);
    plan(&rc, CPU, 64 * 1024, DEF, ONE, 0, ONE,
         NONE); /* config codec yields to the explicit algo */
    rc.algo = ONE;
    plan(&rc, CPU, 64 * 1024, I8, AUTO, 0, TWO, I8); /* explicit codec beats the configured algo */
    rc = base_cfg();
    rc.codec = NONE;
    /* thresholds: table, then the config override */
    plan(&rc, CPU, 1024, DEF, AUTO, 0, ONE, NONE);
    plan(&rc, CPU, 8 << 20, DEF, AUTO, 0, TWO, NONE);
    rc.oneshot_max_bytes = 0;
    plan(&rc, CPU, 1024, DEF, AUTO, 0, TWO, NONE);
    rc.oneshot_max_bytes = 16 << 20;
    plan(&rc, CPU, 8 << 20, DEF, AUTO, 0, ONE, NONE);
    rc = base_cfg();
    rc.codec = NONE;
    /* NCCL: mode nccl on the CPU is the plain exact two-shot */
    rc.allreduce = TPM_AR_NCCL;
    plan(&rc, CPU, 1024, DEF, AUTO, 0, TWO, NONE);
    plan(&rc, CUDA, 1024, DEF, AUTO, 1, NCCL, NONE);
    assert_int_equal(tpm_dispatch_plan(&rc, CPU, 4, 1024, TPM_DTYPE_BF16, DEF, NCCL, 0, &ga, &gc),
                     TPM_ERR_UNSUPPORTED);
    rc.allreduce = TPM_AR_AUTO;
    rc.algo = NCCL; /* TPMOE_ALGO=nccl on the CPU: the plain exact two-shot */
    plan(&rc, CPU, 1024, DEF, AUTO, 0, TWO, NONE);
    plan(&rc, CUDA, 1024, DEF, AUTO, 1, NCCL, NONE);
    rc.algo = AUTO;
    /* CUDA mode auto: NCCL above custom_max (the peer buffer), custom below */
    rc.allreduce = TPM_AR_AUTO;
    plan(&rc, CUDA, 4 << 20, DEF, AUTO, 1, NCCL, NONE);
    plan(&rc, CUDA, 256 << 10, DEF, AUTO, 1, ONE, NONE);
    plan(&rc, CUDA, 768 << 10, DEF, AUTO, 1, TWO, NONE);
    rc.allreduce = TPM_AR_CUSTOM;
    plan(&rc, CUDA, 4 << 20, DEF, AUTO, 1, TWO, NONE);
    rc.allreduce = TPM_AR_AUTO;
    rc.custom_max_bytes = 8 << 20;
    plan(&rc, CUDA, 4 << 20, DEF, AUTO, 1, TWO, NONE);
    char buf[4096];
    tpm_dispatch_describe(&rc, buf, sizeof buf);
    assert_non_null(strstr(buf, "provisional"));
    assert_non_null(strstr(buf, "cpu"));
    tpm_dispatch_describe(&rc, buf, 40); /* truncation is safe */
    assert_true(strlen(buf) < 40);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_worlds),  cmocka_unit_test(test_oneshot_equals_twoshot),
        cmocka_unit_test(test_codecs_worlds), cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_many_calls),    cmocka_unit_test(test_count_mismatch),
        cmocka_unit_test(test_timeout),       cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
