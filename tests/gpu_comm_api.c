/*
 * gpu_comm_api.c - the CUDA communicator through the PUBLIC API (ctest label
 * gpu): tpm_comm_init (one process per GPU, CUDA IPC over the rendezvous
 * bootstrap), tpm_comm_init_all (one process, threads), tpm_allreduce /
 * tpm_allreduce_ex / tpm_allreduce_plan. Exit 77 with a printed reason where
 * the build has no CUDA or fewer than 2 GPUs are visible.
 *
 * Processes: the parent forks 2 children BEFORE any CUDA call of its own
 * (the GPU count is probed in a forked child too); each child drives one GPU
 * and writes its outputs into a shared anonymous mapping; the parent checks
 * them. Threads: after the fork tests the parent itself drives 2 GPUs.
 *
 * Checked: every dtype x (one-shot exact, two-shot exact, two-shot with
 * every codec) x odd-tail sizes: outputs bitwise identical on both ranks AND
 * bitwise equal to the CPU communicator's output on the same inputs
 * (tpm_comm_init_all, backend CPU, world 2, same codec, same explicit algo).
 * Rule for the codec cases: the CPU and GPU two-shot must cut the message
 * into the same owner segments, i.e. neither may split it into chunks; the
 * GPU does not for counts up to tpm_cuda_twoshot_max_count (millions of
 * elements with an 8 MB peer buffer), and the CPU comm's buffer is sized so
 * tpm_cpu_chunk_elems(...) >= count (asserted per case). Exact cases are
 * independent of the cut (fp32 sum in rank order, rounded once).
 * NCCL (explicit algo, TPMOE_ALGO=nccl, an injected nccl_comm): ranks bitwise
 * identical, CPU result within a tolerance (NCCL's order is its own). A peer
 * that stops calling or dies: TPM_ERR_TIMEOUT / TPM_ERR_PEER, never a hang
 * (the parent kills children after a deadline and fails). Bad arguments.
 * Ranks on several nodes (test_nodes): a tcp:// rendezvous and TPMOE_NODE_ID
 * per rank: NCCL only, sums within a bf16 rounding of fp64, ranks bitwise
 * equal; the same with one node id proves peer-to-peer and plans one-shot.
 */
#include <stdio.h>

#ifndef TPMOE_HAVE_CUDA
int main(void) {
    printf("gpu_comm_api: skipped: this build has no CUDA (TPMOE_CUDA=OFF or no nvcc)\n");
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
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "comm/comm_internal.h"
#include "comm/cpu_comm.h"
#include "numeric.h"

#define W 2
#define GPU_BUFFER (8 << 20)
#define CPU_BUFFER (32 << 20)

/* MARK: cases */
enum { PH_MAIN = 0, PH_ENV_NCCL = 1, PH_INJECT = 2, PH_COUNT };

typedef struct tcase {
    int phase;
    tpm_dtype dt;
    tpm_codec codec; /* TPM_CODEC_DEFAULT with algo AUTO: plain tpm_allreduce */
    tpm_algo algo;
    size_t n, off; /* off: elements of misalignment of in/out */
    int inplace;
    size_t out_off; /* byte offset of this case's output in a rank's area */
} tcase;

#define MAXCASES 256
typedef struct plan {
    tcase c[MAXCASES];
    int n;
    size_t area;      /* bytes of outputs per rank */
    size_t max_bytes; /* largest (n + off) * elem */
} plan;

static void add(plan *p, int ph, tpm_dtype dt, tpm_codec codec, tpm_algo algo, size_t n,
                size_t off, int inplace) {
    assert_true(p->n < MAXCASES);
    size_t es = tpm_dtype_size(dt);
    tcase *c = &p->c[p->n++];
    *c = (tcase){ph, dt, codec, algo, n, off, inplace, p->area};
    p->area += (n * es + 63) / 64 * 64;
    if ((n + off) * es > p->max_bytes) p->max_bytes = (n + off) * es;
}

static void make_plan(plan *p) {
    static const size_t sizes[] = {1, 33, 4097, 65539, 300001};
    memset(p, 0, sizeof *p);
    for (int dt = 0; dt < TPM_DTYPE_COUNT_; dt++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            add(p, PH_MAIN, (tpm_dtype)dt, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, sizes[k], 0, 0);
            add(p, PH_MAIN, (tpm_dtype)dt, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, sizes[k], 0, 0);
            for (int c = TPM_CODEC_INT8; c < TPM_CODEC_COUNT_; c++)
                add(p, PH_MAIN, (tpm_dtype)dt, (tpm_codec)c, TPM_ALGO_TWOSHOT, sizes[k], 0, 0);
            add(p, PH_MAIN, (tpm_dtype)dt, TPM_CODEC_NONE, TPM_ALGO_NCCL, sizes[k], 0, 0);
        }
    /* in place, and pointers off 16-byte alignment */
    add(p, PH_MAIN, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 70001, 1, 1);
    add(p, PH_MAIN, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 70001, 3, 0);
    add(p, PH_MAIN, TPM_DTYPE_BF16, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, 70001, 1, 1);
    /* the default path (dispatch): small, medium, over the peer buffer (NCCL) */
    add(p, PH_MAIN, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, 6143, 0, 0);
    add(p, PH_MAIN, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, 1000003, 0, 0);
    add(p, PH_MAIN, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, 5000011, 0, 0);
    /* TPMOE_ALGO=nccl: the default call goes to NCCL */
    add(p, PH_ENV_NCCL, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, TPM_ALGO_AUTO, 65539, 0, 0);
    /* an injected ncclComm_t: NCCL, and the custom kernels still work */
    add(p, PH_INJECT, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_NCCL, 65539, 0, 0);
    add(p, PH_INJECT, TPM_DTYPE_BF16, TPM_CODEC_INT4, TPM_ALGO_TWOSHOT, 65539, 0, 0);
}

/* MARK: inputs */
static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill_input(void *p, tpm_dtype dt, size_t n, int k, int rank) {
    uint64_t s = 0x5eed0000ull + (uint64_t)k * 977 + (uint64_t)rank;
    for (size_t i = 0; i < n; i++) {
        double u1 = ((double)(rng_next(&s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = (double)(rng_next(&s) >> 11) * (1.0 / 9007199254740992.0);
        double g = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        tpm_store_f32(p, (int)dt, i, (float)(g * (i % 97 == 0 ? 30.0 : 1.0)));
    }
}

/* MARK: one rank runs its cases (a child process or a thread) */
typedef struct rank_ctx {
    tpm_comm_t c;
    int rank;
    const plan *p;
    int phase;
    uint8_t *area; /* this rank's outputs */
    int *planned;  /* per case: the algorithm the call ran (plan for AUTO) */
    tpm_status st;
    char msg[TPM_ERRMSG_LEN + 128];
} rank_ctx;

static int ctx_fail(rank_ctx *x, tpm_status st, int k, const char *what) {
    x->st = st == TPM_OK ? TPM_ERR_INTERNAL : st;
    snprintf(x->msg, sizeof x->msg, "rank %d case %d: %s: %s", x->rank, k, what,
             x->c ? tpm_comm_last_error(x->c) : tpm_last_error());
    return -1;
}

static int run_cases(rank_ctx *x) {
    const plan *p = x->p;
    size_t cap = p->max_bytes + 64;
    uint8_t *din = NULL, *dout = NULL, *h = malloc(cap);
    cudaStream_t s = NULL;
    tpm_resolved_config rc;
    x->st = TPM_OK;
    x->msg[0] = '\0';
    if (!h) return ctx_fail(x, TPM_ERR_NO_MEMORY, -1, "malloc");
    if (tpm_comm_get_config(x->c, &rc) != TPM_OK) return ctx_fail(x, TPM_OK, -1, "get_config");
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (cudaSetDevice(rc.device >= 0 ? rc.device : x->rank % ndev) != cudaSuccess ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&din, cap) != cudaSuccess || cudaMalloc((void **)&dout, cap) != cudaSuccess) {
        free(h);
        return ctx_fail(x, TPM_ERR_CUDA, -1, "cuda setup");
    }
    int rc_ = 0;
    for (int k = 0; k < p->n && rc_ == 0; k++) {
        const tcase *c = &p->c[k];
        if (c->phase != x->phase) continue;
        size_t es = tpm_dtype_size(c->dt), bytes = c->n * es;
        fill_input(h, c->dt, c->n, k, x->rank);
        uint8_t *in = din + c->off * es, *out = (c->inplace ? din : dout) + c->off * es;
        /* poison and input on the call's stream: a pageable cudaMemcpy may
         * return before its DMA lands, and s does not wait for the legacy
         * stream (the kernels read the input more than once) */
        if (cudaMemsetAsync(dout, 0xA5, cap, s) != cudaSuccess ||
            cudaMemcpyAsync(in, h, bytes, cudaMemcpyHostToDevice, s) != cudaSuccess) {
            rc_ = ctx_fail(x, TPM_ERR_CUDA, k, "memcpy in");
            break;
        }
        tpm_status st;
        x->planned[k] = c->algo;
        if (c->algo == TPM_ALGO_AUTO) {
            tpm_codec pc;
            tpm_algo pa = TPM_ALGO_AUTO;
            if (tpm_allreduce_plan(x->c, c->n, c->dt, c->codec, &pa, &pc) != TPM_OK) {
                rc_ = ctx_fail(x, TPM_ERR_INTERNAL, k, "plan");
                break;
            }
            x->planned[k] = pa;
        }
        if (c->algo == TPM_ALGO_AUTO && c->codec == TPM_CODEC_DEFAULT)
            st = tpm_allreduce(x->c, in, out, c->n, c->dt, s);
        else
            st = tpm_allreduce_ex(x->c, in, out, c->n, c->dt, c->codec, c->algo, s);
        if (st != TPM_OK) {
            rc_ = ctx_fail(x, st, k, "allreduce");
            break;
        }
        if (cudaStreamSynchronize(s) != cudaSuccess ||
            cudaMemcpy(x->area + c->out_off, out, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
            rc_ = ctx_fail(x, TPM_ERR_CUDA, k, "sync / memcpy out");
            break;
        }
    }
    /* a kernel that gave up shows in the next call: a tiny exact one */
    if (rc_ == 0) {
        tpm_status st = tpm_allreduce_ex(x->c, din, dout, 8, TPM_DTYPE_FP32, TPM_CODEC_NONE,
                                         TPM_ALGO_ONESHOT, s);
        if (st != TPM_OK || cudaStreamSynchronize(s) != cudaSuccess)
            rc_ = ctx_fail(x, st, -1, "final call");
    }
    cudaFree(din);
    cudaFree(dout);
    cudaStreamDestroy(s);
    free(h);
    return rc_;
}

static void *run_cases_thread(void *a) {
    run_cases((rank_ctx *)a);
    return NULL;
}

/* MARK: the parent's check against the CPU communicator */
typedef struct cpu_job {
    tpm_comm_t c;
    const void *in;
    void *out;
    size_t n;
    tpm_dtype dt;
    tpm_codec codec;
    tpm_algo algo;
    tpm_status st;
} cpu_job;

static void *cpu_job_run(void *a) {
    cpu_job *j = (cpu_job *)a;
    j->st = tpm_allreduce_ex(j->c, j->in, j->out, j->n, j->dt, j->codec, j->algo, NULL);
    return NULL;
}

static void check_phase(const plan *p, int phase, uint8_t *const area[W], const int *planned) {
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.buffer_bytes = CPU_BUFFER;
    cfg.timeout_ms = 20000;
    tpm_comm_t cpu[W];
    assert_int_equal(tpm_comm_init_all(cpu, W, NULL, &cfg), TPM_OK);
    size_t cap = p->max_bytes + 64;
    uint8_t *in[W], *ref[W];
    for (int r = 0; r < W; r++) {
        in[r] = malloc(cap);
        ref[r] = malloc(cap);
        assert_true(in[r] && ref[r]);
    }
    int checked = 0;
    for (int k = 0; k < p->n; k++) {
        const tcase *c = &p->c[k];
        if (c->phase != phase) continue;
        size_t es = tpm_dtype_size(c->dt), bytes = c->n * es;
        int lossy = c->codec != TPM_CODEC_NONE && c->codec != TPM_CODEC_DEFAULT;
        tpm_algo ca = c->algo == TPM_ALGO_ONESHOT ? TPM_ALGO_ONESHOT : TPM_ALGO_TWOSHOT;
        tpm_codec cc = lossy ? c->codec : TPM_CODEC_NONE;
        /* the no-chunk rule: one CPU chunk holds the whole message */
        if (lossy) assert_true(tpm_cpu_chunk_elems(ca, cc, c->dt, W, CPU_BUFFER / 2) >= c->n);
        cpu_job j[W];
        pthread_t th[W];
        for (int r = 0; r < W; r++) {
            fill_input(in[r], c->dt, c->n, k, r);
            memset(ref[r], 0x5A, bytes);
            j[r] = (cpu_job){cpu[r], in[r], ref[r], c->n, c->dt, cc, ca, TPM_OK};
            assert_int_equal(pthread_create(&th[r], NULL, cpu_job_run, &j[r]), 0);
        }
        for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
        for (int r = 0; r < W; r++) assert_int_equal(j[r].st, TPM_OK);
        for (int r = 1; r < W; r++)
            if (memcmp(area[r] + c->out_off, area[0] + c->out_off, bytes)) {
                fprintf(stderr, "case %d (%s %s algo %s n %zu): ranks 0 and %d differ\n", k,
                        tpm_dtype_name(c->dt), tpm_codec_name(cc), tpm_algo_name(c->algo), c->n, r);
                fail();
            }
        const uint8_t *g = area[0] + c->out_off;
        int nccl = planned[k] == TPM_ALGO_NCCL;
        if (phase == PH_ENV_NCCL) assert_int_equal(planned[k], TPM_ALGO_NCCL);
        if (c->algo == TPM_ALGO_AUTO && bytes > GPU_BUFFER) /* over the peer buffer */
            assert_int_equal(planned[k], TPM_ALGO_NCCL);
        if (nccl) {
            double e2 = 0, r2 = 0;
            for (size_t i = 0; i < c->n; i++) {
                double a = tpm_load_f32(g, (int)c->dt, i), b = tpm_load_f32(ref[0], (int)c->dt, i);
                e2 += (a - b) * (a - b);
                r2 += b * b;
            }
            if (!(e2 <= 1e-4 * r2 + 1e-30)) {
                fprintf(stderr, "case %d (NCCL, %s n %zu): error %g of %g\n", k,
                        tpm_dtype_name(c->dt), c->n, e2, r2);
                fail();
            }
        } else if (memcmp(g, ref[0], bytes)) {
            size_t i = 0;
            while (i < c->n && !memcmp(g + i * es, ref[0] + i * es, es)) i++;
            fprintf(stderr, "case %d (%s %s algo %s n %zu off %zu%s): GPU differs from the CPU "
                    "comm at %zu: %g vs %g\n", k, tpm_dtype_name(c->dt), tpm_codec_name(cc),
                    tpm_algo_name(c->algo), c->n, c->off, c->inplace ? " in place" : "", i,
                    (double)tpm_load_f32(g, (int)c->dt, i), (double)tpm_load_f32(ref[0], (int)c->dt, i));
            fail();
        }
        checked++;
    }
    assert_true(checked > 0);
    printf("phase %d: %d cases bitwise equal on both ranks and to the CPU comm (NCCL: tolerance)\n",
           phase, checked);
    for (int r = 0; r < W; r++) {
        free(in[r]);
        free(ref[r]);
        tpm_comm_destroy(cpu[r]);
    }
}

/* MARK: processes */
typedef struct shared {
    _Atomic int nccl_id_ready;
    ncclUniqueId nccl_id;
    char msg[W][2 * TPM_ERRMSG_LEN + 256];
    int planned[W][MAXCASES];
} shared;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Wait for children with a deadline; kill the ones still running. Returns
 * the number of children that did not exit with 0. */
static int reap(pid_t *pid, int n, double limit_s, const char *what) {
    int bad = 0, left = n, st;
    double t0 = now_s();
    int done[W] = {0};
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (done[i]) continue;
            pid_t r = waitpid(pid[i], &st, WNOHANG);
            if (r == pid[i]) {
                done[i] = 1;
                left--;
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                    fprintf(stderr, "%s: child %d %s %d\n", what, i,
                            WIFEXITED(st) ? "exited with" : "killed by signal",
                            WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
                    bad++;
                }
            }
        }
        if (left > 0 && now_s() - t0 > limit_s) {
            for (int i = 0; i < n; i++)
                if (!done[i]) {
                    fprintf(stderr, "%s: child %d still running after %.0f s: killed (a hang)\n",
                            what, i, limit_s);
                    kill(pid[i], SIGKILL);
                    waitpid(pid[i], &st, 0);
                    done[i] = 1;
                    bad++;
                    left--;
                }
        }
        if (left > 0) usleep(2000);
    }
    return bad;
}

static void base_cfg(tpm_config *cfg, int rank, const char *dir, int timeout_ms) {
    *cfg = (tpm_config)TPM_CONFIG_INIT;
    cfg->backend = TPM_BACKEND_CUDA;
    cfg->rank = rank;
    cfg->world_size = W;
    cfg->rendezvous = dir;
    cfg->buffer_bytes = GPU_BUFFER;
    cfg->timeout_ms = timeout_ms;
}

static int child_phase(shared *sh, uint8_t *area, const plan *p, int rank, int phase,
                       const tpm_config *cfg) {
    rank_ctx x = {.rank = rank, .p = p, .phase = phase, .area = area, .planned = sh->planned[rank]};
    tpm_status st = tpm_comm_init(&x.c, cfg);
    if (st != TPM_OK) {
        snprintf(sh->msg[rank], sizeof sh->msg[rank], "phase %d init: %s", phase, tpm_last_error());
        return 10 + phase;
    }
    if (phase == PH_ENV_NCCL) {
        tpm_algo a;
        tpm_codec cd;
        if (tpm_allreduce_plan(x.c, 4097, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, &a, &cd) != TPM_OK ||
            a != TPM_ALGO_NCCL) {
            snprintf(sh->msg[rank], sizeof sh->msg[rank], "TPMOE_ALGO=nccl: plan is not NCCL");
            tpm_comm_destroy(x.c);
            return 20;
        }
    }
    int rc = run_cases(&x);
    if (rc) snprintf(sh->msg[rank], sizeof sh->msg[rank], "phase %d: %s", phase, x.msg);
    tpm_comm_destroy(x.c);
    return rc ? 30 + phase : 0;
}

static int child_main(shared *sh, uint8_t *area, const plan *p, int rank, const char *dir) {
    tpm_config cfg;
    base_cfg(&cfg, rank, dir, 20000);
    int rc = child_phase(sh, area, p, rank, PH_MAIN, &cfg);
    if (rc) return rc;
    setenv("TPMOE_ALGO", "nccl", 1);
    rc = child_phase(sh, area, p, rank, PH_ENV_NCCL, &cfg);
    unsetenv("TPMOE_ALGO");
    if (rc) return rc;
    /* an engine's NCCL comm, handed in */
    if (cudaSetDevice(rank) != cudaSuccess) return 40;
    if (rank == 0) {
        if (ncclGetUniqueId(&sh->nccl_id) != ncclSuccess) return 41;
        atomic_store(&sh->nccl_id_ready, 1);
    } else {
        double t0 = now_s();
        while (!atomic_load(&sh->nccl_id_ready)) {
            if (now_s() - t0 > 30) return 42;
            usleep(1000);
        }
    }
    ncclComm_t nc;
    if (ncclCommInitRank(&nc, W, sh->nccl_id, rank) != ncclSuccess) return 43;
    cfg.nccl_comm = nc;
    rc = child_phase(sh, area, p, rank, PH_INJECT, &cfg);
    if (rc) return rc;
    /* tpmoe did not destroy it: it still works */
    int cnt = 0;
    float *d = NULL;
    if (ncclCommCount(nc, &cnt) != ncclSuccess || cnt != W) return 44;
    if (cudaMalloc((void **)&d, 64) != cudaSuccess) return 45;
    if (ncclAllReduce(d, d, 16, ncclFloat, ncclSum, nc, NULL) != ncclSuccess) return 46;
    if (cudaDeviceSynchronize() != cudaSuccess) return 47;
    cudaFree(d);
    ncclCommDestroy(nc);
    return 0;
}

static char *make_dir(void) {
    static char tmpl[64];
    snprintf(tmpl, sizeof tmpl, "/tmp/tpmoe-gpuapi-XXXXXX");
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return d;
}

static void test_processes(void **state) {
    (void)state;
    plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    make_plan(p);
    size_t total = sizeof(shared) + (size_t)W * p->area + 4096;
    uint8_t *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    shared *sh = (shared *)m;
    uint8_t *area[W];
    for (int r = 0; r < W; r++) area[r] = m + 4096 * ((sizeof(shared) + 4095) / 4096) + r * p->area;
    char *dir = make_dir();
    fflush(NULL);
    double t0 = now_s();
    pid_t pid[W];
    for (int r = 0; r < W; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            int rc = child_main(sh, area[r], p, r, dir);
            if (rc) fprintf(stderr, "rank %d: exit %d: %s\n", r, rc, sh->msg[r]);
            fflush(NULL);
            _exit(rc);
        }
    }
    int bad = reap(pid, W, 240, "processes");
    printf("processes: children done in %.1f s\n", now_s() - t0);
    rmdir(dir);
    assert_int_equal(bad, 0);
    for (int ph = 0; ph < PH_COUNT; ph++) check_phase(p, ph, area, sh->planned[0]);
    munmap(m, total);
    free(p);
}

/* A peer that stops calling (mode 0) or dies (mode 1) after init: rank 0's
 * kernel gives up; the next call says TPM_ERR_TIMEOUT (or TPM_ERR_PEER);
 * destroy returns. Exit codes of rank 0: 0 pass, else which step failed. */
static int child_peer_fail(int rank, const char *dir, int mode) {
    tpm_config cfg;
    base_cfg(&cfg, rank, dir, 4000);
    tpm_comm_t c;
    if (tpm_comm_init(&c, &cfg) != TPM_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, tpm_last_error());
        return 2;
    }
    if (rank == 1) {
        sleep(1); /* rank 0's init is surely done */
        if (mode == 1) _exit(0); /* dies without a word */
        sleep(5);                /* alive, never calls */
        tpm_comm_destroy(c);
        return 0;
    }
    usleep(mode ? 2000000 : 200000); /* mode 1: the peer is dead before the call */
    void *d = NULL;
    cudaStream_t s;
    if (cudaMalloc(&d, 1 << 20) != cudaSuccess || cudaMemset(d, 0x3c, 1 << 20) != cudaSuccess ||
        cudaStreamCreate(&s) != cudaSuccess)
        return 3;
    double t0 = now_s();
    int rc = 0;
    for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_TWOSHOT && !rc; a++) {
        tpm_status st = tpm_allreduce_ex(c, d, d, 200000, TPM_DTYPE_BF16, TPM_CODEC_NONE,
                                         (tpm_algo)a, s);
        cudaError_t e = cudaStreamSynchronize(s);
        if (st == TPM_OK && e == cudaSuccess)
            st = tpm_allreduce_ex(c, d, d, 16, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)a, s);
        printf("peer %s, %s: status %s (%s), cuda %s, %.2f s\n", mode ? "died" : "stopped",
               tpm_algo_name((tpm_algo)a), tpm_status_string(st), tpm_comm_last_error(c),
               cudaGetErrorString(e), now_s() - t0);
        if (e != cudaSuccess) rc = 4;
        else if (st != TPM_ERR_TIMEOUT && st != TPM_ERR_PEER) rc = 5;
        if (a == TPM_ALGO_ONESHOT) break; /* the comm is dead after a timeout */
    }
    if (now_s() - t0 > 15) rc = 6;
    double t1 = now_s();
    tpm_comm_destroy(c);
    printf("peer %s: destroy took %.2f s\n", mode ? "died" : "stopped", now_s() - t1);
    cudaFree(d);
    return rc;
}

static void peer_fail(int mode) {
    char *dir = make_dir();
    fflush(NULL);
    pid_t pid[W];
    for (int r = 0; r < W; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            int rc = child_peer_fail(r, dir, mode);
            fflush(NULL);
            _exit(rc);
        }
    }
    int bad = reap(pid, W, 60, mode ? "peer dies" : "peer stops");
    rmdir(dir);
    assert_int_equal(bad, 0);
}

static void test_peer_stops(void **state) {
    (void)state;
    peer_fail(0);
}

static void test_peer_dies(void **state) {
    (void)state;
    peer_fail(1);
}

/* MARK: threads (the parent drives both GPUs; after the fork tests) */
static void threads_phase(const plan *p, int phase, const tpm_config *cfg, uint8_t *area[W],
                          int (*planned)[MAXCASES]) {
    tpm_comm_t c[W];
    tpm_status st = tpm_comm_init_all(c, W, NULL, cfg);
    if (st != TPM_OK) fprintf(stderr, "init_all: %s\n", tpm_last_error());
    assert_int_equal(st, TPM_OK);
    if (phase == PH_ENV_NCCL) {
        tpm_algo a;
        tpm_codec cd;
        assert_int_equal(tpm_allreduce_plan(c[0], 4097, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, &a, &cd),
                         TPM_OK);
        assert_int_equal(a, TPM_ALGO_NCCL);
    }
    rank_ctx x[W];
    pthread_t th[W];
    for (int r = 0; r < W; r++) {
        x[r] = (rank_ctx){.c = c[r], .rank = r, .p = p, .phase = phase, .area = area[r],
                          .planned = planned[r]};
        assert_int_equal(pthread_create(&th[r], NULL, run_cases_thread, &x[r]), 0);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < W; r++) {
        if (x[r].st != TPM_OK) fprintf(stderr, "%s\n", x[r].msg);
        assert_int_equal(x[r].st, TPM_OK);
    }
    for (int r = 0; r < W; r++) assert_int_equal(tpm_comm_destroy(c[r]), TPM_OK);
}

static void test_threads(void **state) {
    (void)state;
    plan *p = calloc(1, sizeof *p);
    assert_non_null(p);
    make_plan(p);
    uint8_t *area[W];
    for (int r = 0; r < W; r++) {
        area[r] = malloc(p->area);
        assert_non_null(area[r]);
    }
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CUDA;
    cfg.buffer_bytes = GPU_BUFFER;
    cfg.timeout_ms = 20000;
    static int planned[W][MAXCASES];
    threads_phase(p, PH_MAIN, &cfg, area, planned);
    setenv("TPMOE_ALGO", "nccl", 1);
    threads_phase(p, PH_ENV_NCCL, &cfg, area, planned);
    unsetenv("TPMOE_ALGO");
    /* injected comms: init_all takes an array, rank i at index i */
    ncclComm_t nc[W];
    int devs[W] = {0, 1};
    assert_int_equal(ncclCommInitAll(nc, W, devs), ncclSuccess);
    ncclComm_t swapped[W] = {nc[1], nc[0]};
    tpm_config bad = cfg;
    bad.nccl_comm = swapped;
    tpm_comm_t c[W];
    assert_int_equal(tpm_comm_init_all(c, W, NULL, &bad), TPM_ERR_INVALID_ARG);
    printf("swapped nccl comms: %s\n", tpm_last_error());
    cfg.nccl_comm = nc;
    threads_phase(p, PH_INJECT, &cfg, area, planned);
    for (int r = 0; r < W; r++) { /* not destroyed by tpmoe */
        int cnt = 0, rk = -1;
        assert_int_equal(ncclCommCount(nc[r], &cnt), ncclSuccess);
        assert_int_equal(ncclCommUserRank(nc[r], &rk), ncclSuccess);
        assert_int_equal(cnt, W);
        assert_int_equal(rk, r);
        assert_int_equal(ncclCommDestroy(nc[r]), ncclSuccess);
    }
    for (int ph = 0; ph < PH_COUNT; ph++) check_phase(p, ph, area, planned[0]);
    for (int r = 0; r < W; r++) free(area[r]);
    free(p);
}

/* MARK: ranks on several nodes (a tcp:// rendezvous) */
/* A port nobody listens on right now (bound to 0 then released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &len)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

#define NODE_SIZES 3
static const size_t node_n[NODE_SIZES] = {1, 4097, 300001};

/* Child of test_nodes: rank r with TPMOE_NODE_ID "node<r>" (split: every rank its own node)
 * or "node0" (one node), the tcp rendezvous, bf16 sums of node_n elements into out (its area);
 * the plan of a 4097-element bf16 call into *plan. Returns 0 or the failing step. */
static int child_nodes(int rank, const char *url, int split, uint16_t *out, int32_t *plan_algo, char *msg) {
    char node[16];
    snprintf(node, sizeof node, "node%d", split ? rank : 0);
    setenv("TPMOE_NODE_ID", node, 1);
    tpm_config cfg;
    base_cfg(&cfg, rank, url, 20000);
    cfg.device = rank;
    tpm_comm_t c = NULL;
    if (tpm_comm_init(&c, &cfg) != TPM_OK) {
        snprintf(msg, 256, "init: %s", tpm_last_error());
        return 2;
    }
    tpm_algo a;
    tpm_codec cd;
    if (tpm_allreduce_plan(c, 4097, TPM_DTYPE_BF16, TPM_CODEC_DEFAULT, &a, &cd) != TPM_OK) return 3;
    *plan_algo = (int32_t)a;
    size_t off = 0;
    for (int k = 0; k < NODE_SIZES; k++) {
        const size_t n = node_n[k];
        uint16_t *h = malloc(n * 2);
        void *d = NULL;
        fill_input(h, TPM_DTYPE_BF16, n, 900 + k, rank);
        if (!h || cudaMalloc(&d, n * 2) != cudaSuccess || cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice) != cudaSuccess)
            return 4;
        if (tpm_allreduce(c, d, d, n, TPM_DTYPE_BF16, NULL) != TPM_OK) {
            snprintf(msg, 256, "allreduce %zu: %s", n, tpm_comm_last_error(c));
            return 5;
        }
        if (cudaMemcpy(out + off, d, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return 6;
        off += n;
        cudaFree(d);
        free(h);
    }
    if (tpm_comm_destroy(c) != TPM_OK) return 7;
    return 0;
}

/* Two processes over a tcp://127.0.0.1 rendezvous, as ranks of different nodes (TPMOE_NODE_ID
 * differs): the communicator comes up without trying CUDA IPC, every plan is NCCL, and sums
 * match fp64 (NCCL's order) with both ranks bitwise equal; then the same rendezvous with one
 * node id: peer-to-peer is proven again and the plan is tpmoe's own kernel. */
static void test_nodes(void **state) {
    (void)state;
    size_t total = 0;
    for (int k = 0; k < NODE_SIZES; k++) total += node_n[k];
    const size_t bytes = 4096 + (size_t)W * total * 2;
    for (int split = 1; split >= 0; split--) {
        uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(m != MAP_FAILED);
        int32_t *plan_algo = (int32_t *)m;
        char *msg = (char *)m + 64;
        uint16_t *out = (uint16_t *)(m + 4096);
        char url[64];
        const int port = free_port();
        assert_true(port > 0);
        snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
        fflush(NULL);
        pid_t pid[W];
        for (int r = 0; r < W; r++) {
            pid[r] = fork();
            assert_true(pid[r] >= 0);
            if (pid[r] == 0) {
                int rc = child_nodes(r, url, split, out + (size_t)r * total, plan_algo + r, msg + 1024 * r);
                if (rc) fprintf(stderr, "nodes rank %d: exit %d: %s\n", r, rc, msg + 1024 * r);
                fflush(NULL);
                _exit(rc);
            }
        }
        assert_int_equal(reap(pid, W, 120, split ? "two nodes" : "one node"), 0);
        for (int r = 0; r < W; r++)
            assert_int_equal(plan_algo[r], split ? TPM_ALGO_NCCL : TPM_ALGO_ONESHOT);
        assert_memory_equal(out, out + total, total * 2); /* both ranks bitwise equal */
        size_t off = 0;
        double worst = 0;
        for (int k = 0; k < NODE_SIZES; k++) {
            const size_t n = node_n[k];
            uint16_t *h0 = malloc(n * 2), *h1 = malloc(n * 2);
            fill_input(h0, TPM_DTYPE_BF16, n, 900 + k, 0);
            fill_input(h1, TPM_DTYPE_BF16, n, 900 + k, 1);
            for (size_t i = 0; i < n; i++) {
                const double ref = (double)tpm_load_f32(h0, TPM_DTYPE_BF16, i) + (double)tpm_load_f32(h1, TPM_DTYPE_BF16, i);
                const double got = (double)tpm_load_f32(out + off, TPM_DTYPE_BF16, i);
                const double e = fabs(got - ref) / (fabs(ref) + 1e-2);
                if (e > worst) worst = e;
            }
            off += n;
            free(h0);
            free(h1);
        }
        printf("%s over tcp: plan %s, worst relative error %.2e\n", split ? "two nodes" : "one node",
               tpm_algo_name((tpm_algo)plan_algo[0]), worst);
        assert_true(worst < 1e-2); /* one bf16 rounding of the sum */
        munmap(m, bytes);
    }
}

/* World 1 through tpm_comm_init (bootstrap of one, no rendezvous), a device
 * that does not exist, and bad call arguments on a live GPU communicator. */
static void test_world1_and_bad_args(void **state) {
    (void)state;
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CUDA;
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.buffer_bytes = 1 << 20;
    cfg.device = 99;
    tpm_comm_t c = NULL;
    assert_int_equal(tpm_comm_init(&c, &cfg), TPM_ERR_INVALID_ARG);
    assert_null(c);
    printf("device 99: %s\n", tpm_last_error());
    cfg.device = 1;
    assert_int_equal(tpm_comm_init(&c, &cfg), TPM_OK);
    size_t n = 10007;
    uint16_t *h = malloc(n * 2), *o = malloc(n * 2);
    assert_true(h && o);
    fill_input(h, TPM_DTYPE_BF16, n, 4242, 0);
    void *d = NULL, *e = NULL;
    assert_int_equal(cudaSetDevice(1), cudaSuccess);
    assert_int_equal(cudaMalloc(&d, n * 2 + 64), cudaSuccess);
    assert_int_equal(cudaMalloc(&e, n * 2 + 64), cudaSuccess);
    assert_int_equal(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice), cudaSuccess);
    for (int a = TPM_ALGO_ONESHOT; a <= TPM_ALGO_NCCL; a++) {
        cudaMemset(e, 0xA5, n * 2);
        assert_int_equal(tpm_allreduce_ex(c, d, e, n, TPM_DTYPE_BF16, TPM_CODEC_NONE, (tpm_algo)a,
                                          NULL),
                         TPM_OK);
        assert_int_equal(cudaMemcpy(o, e, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        assert_memory_equal(o, h, n * 2); /* a sum over one rank is the input */
    }
    /* bad arguments: documented errors, nothing enqueued */
    assert_int_equal(tpm_allreduce(c, (uint8_t *)d + 1, e, 10, TPM_DTYPE_BF16, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(c, d, (uint8_t *)e + 2, 10, TPM_DTYPE_FP32, NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(c, NULL, e, 10, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce(c, d, e, 10, (tpm_dtype)7, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce_ex(c, d, e, 10, TPM_DTYPE_BF16, (tpm_codec)42, TPM_ALGO_AUTO,
                                      NULL),
                     TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_allreduce_ex(c, d, e, 10, TPM_DTYPE_BF16, TPM_CODEC_INT8,
                                      TPM_ALGO_ONESHOT, NULL),
                     TPM_ERR_UNSUPPORTED);
    assert_int_equal(tpm_allreduce(c, d, e, 0, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_int_equal(tpm_allreduce(NULL, d, e, 10, TPM_DTYPE_BF16, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    assert_int_equal(tpm_comm_destroy(c), TPM_OK);
    /* world 2 without a rendezvous directory: a clear error, no wait */
    cfg.world_size = 2;
    cfg.device = -1;
    unsetenv("TPMOE_RENDEZVOUS");
    assert_int_not_equal(tpm_comm_init(&c, &cfg), TPM_OK);
    printf("world 2 without rendezvous: %s\n", tpm_last_error());
    cudaFree(d);
    cudaFree(e);
    free(h);
    free(o);
}

int main(void) {
    /* Count GPUs in a child: the parent must not touch CUDA before forking. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
        _exit(n > 100 ? 100 : n);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 1;
    int ndev = WEXITSTATUS(st);
    if (ndev < 2) {
        printf("gpu_comm_api: skipped: %d CUDA GPU(s) visible, the test needs 2\n", ndev);
        return 77;
    }
    printf("gpu_comm_api: %d GPUs (using 2)\n", ndev);
    const struct CMUnitTest tests[] = {
        /* fork tests first: the parent has not touched CUDA yet */
        cmocka_unit_test(test_processes),
        cmocka_unit_test(test_peer_stops),
        cmocka_unit_test(test_peer_dies),
        cmocka_unit_test(test_nodes),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_world1_and_bad_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* TPMOE_HAVE_CUDA */
