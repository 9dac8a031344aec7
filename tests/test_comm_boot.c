/*
 * test_comm_boot.c - the bootstrap all-gather (src/comm/cpu_boot.c) and the
 * CPU comm's all-gather / barrier: forked processes at worlds 2 and 4
 * exchanging seeded random bytes (sizes 1 .. larger than the bootstrap arena,
 * in place and not, repeated), next to a CPU comm over the same rendezvous
 * directory; a killed peer (TPM_ERR_PEER), a rank that never calls
 * (TPM_ERR_TIMEOUT), ranks as threads (including all-gather interleaved with
 * all-reduce on one comm, and mismatched calls), world 1 and bad arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "comm/cpu_comm.h"
#include "util/splitmix.h"
#include "util/test_proc.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXW 8
#define MSG 512

static const size_t g_sizes[] = {1, 64, 200, 4096, 100000, 300000};
#define NSIZES ((int)(sizeof g_sizes / sizeof g_sizes[0]))
#define REPS 3 /* rep 2 is in place */
#define NCALLS (NSIZES * REPS)
#define MAXBYTES 300000

enum { MODE_OK, MODE_KILL, MODE_SILENT };

/* Shared with the children (MAP_SHARED | MAP_ANONYMOUS before fork). */
typedef struct bshared {
    int32_t init_status[MAXW];
    int32_t status[MAXW]; /* of the failing call, or TPM_OK */
    int32_t after_status[MAXW];
    int32_t calls_done[MAXW];
    int32_t dir_entries[MAXW];
    int32_t release; /* MODE_SILENT: the silent rank may go */
    char msg[MAXW][MSG];
} bshared;

typedef struct bspec {
    int W, mode, victim, timeout_ms;
    bshared *sh;
    uint8_t *out; /* [call][rank][W * MAXBYTES] */
} bspec;

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "boot"));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    assert_int_equal(tu_count_entries(g_dir), 0); /* nothing left behind */
    rmdir(g_dir);
    return 0;
}

/* MARK: data */
static void fill_bytes(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 12345;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(tu_sm_next(&s) >> 56);
}

static uint64_t bseed(int call, int rank) {
    return 4242u + (uint64_t)call * 977u + (uint64_t)rank * 31u;
}

/* What every rank must receive in call k: the W contributions in rank order. */
static void expected(int k, int W, uint8_t *exp) {
    size_t b = g_sizes[k % NSIZES];
    for (int r = 0; r < W; r++)
        fill_bytes(exp + (size_t)r * b, b, bseed(k, r));
}

static size_t slot_bytes(int W) {
    return (size_t)W * MAXBYTES;
}

static tpm_status resolve(int rank, int W, const char *dir, int timeout_ms,
                          tpm_resolved_config *rc) {
    tpm_config cfg = tu_cpu_config(rank, W, dir, timeout_ms);
    cfg.buffer_bytes = 1 << 20; /* the bootstrap arena ignores it */
    return tpm_config_resolve(&cfg, rc, NULL, 0);
}

/* One all-gather call k on rank `rank`: poisoned output (every byte differs
 * from the expected one), in place on rep 2. */
static tpm_status do_call(void *boot, int k, int rank, int W, uint8_t *out, uint8_t *in,
                          uint8_t *exp) {
    size_t b = g_sizes[k % NSIZES];
    expected(k, W, exp);
    for (size_t i = 0; i < (size_t)W * b; i++)
        out[i] = (uint8_t)~exp[i];
    int inplace = k / NSIZES == 2;
    uint8_t *src = inplace ? out + (size_t)rank * b : in;
    fill_bytes(src, b, bseed(k, rank));
    return tpm_cpu_bootstrap_allgather(boot, src, b, out);
}

/* MARK: processes */
static void child(const void *arg, int rank) {
    const bspec *s = arg;
    bshared *sh = s->sh;
    tpm_resolved_config rc;
    tpm_status st = resolve(rank, s->W, g_dir, s->timeout_ms, &rc);
    /* A CPU comm and a bootstrap over the same directory, both alive. */
    tpm_comm_t comm = NULL;
    tpm_config cc = tu_cpu_config(rank, s->W, g_dir, s->timeout_ms);
    if (st == TPM_OK && s->mode == MODE_OK) st = tpm_comm_init(&comm, &cc);
    void *boot = NULL;
    if (st == TPM_OK) st = tpm_cpu_bootstrap_init(&rc, &boot);
    sh->init_status[rank] = st;
    if (st != TPM_OK) {
        snprintf(sh->msg[rank], MSG, "%s", tpm_last_error());
        _exit(1);
    }
    sh->dir_entries[rank] = tu_count_entries(g_dir);
    uint8_t *in = malloc(MAXBYTES), *exp = malloc(slot_bytes(s->W));
    sh->status[rank] = TPM_OK;
    for (int k = 0; k < NCALLS; k++) {
        if (s->mode != MODE_OK && k == 1) {
            if (rank == s->victim && s->mode == MODE_KILL) raise(SIGKILL);
            if (rank == s->victim && s->mode == MODE_SILENT) {
                /* alive but never calls, until the others are done */
                for (int w = 0; w < 20000 && !__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE); w++)
                    usleep(1000);
                break;
            }
        }
        uint8_t *out = s->out + ((size_t)k * (size_t)s->W + (size_t)rank) * slot_bytes(s->W);
        st = do_call(boot, k, rank, s->W, out, in, exp);
        if (st != TPM_OK) {
            sh->status[rank] = st;
            snprintf(sh->msg[rank], MSG, "%s", tpm_last_error());
            /* an aborted bootstrap stays failed */
            sh->after_status[rank] = tpm_cpu_bootstrap_barrier(boot);
            break;
        }
        if (s->mode != MODE_OK) {
            __atomic_store_n(&sh->calls_done[rank], k + 1, __ATOMIC_RELEASE);
            continue;
        }
        /* interleave: a barrier, and an all-reduce on the CPU comm */
        if (k % 4 == 1) st = tpm_cpu_bootstrap_barrier(boot);
        if (st == TPM_OK && k % 4 == 2) {
            float a[100], o[100];
            for (int i = 0; i < 100; i++)
                a[i] = (float)(rank + 1) * (float)(i + 1);
            st = tpm_allreduce(comm, a, o, 100, TPM_DTYPE_FP32, NULL);
            float tri = (float)(s->W * (s->W + 1) / 2);
            for (int i = 0; i < 100 && st == TPM_OK; i++)
                if (o[i] != tri * (float)(i + 1)) st = TPM_ERR_INTERNAL;
        }
        if (st != TPM_OK) {
            sh->status[rank] = st;
            snprintf(sh->msg[rank], MSG, "interleaved call %d: %s", k, tpm_last_error());
            break;
        }
        __atomic_store_n(&sh->calls_done[rank], k + 1, __ATOMIC_RELEASE);
    }
    free(in);
    free(exp);
    tpm_cpu_bootstrap_destroy(boot);
    if (comm) tpm_comm_destroy(comm);
    _exit(0);
}

static bspec make_spec(int W, int mode) {
    bspec s;
    memset(&s, 0, sizeof s);
    s.W = W;
    s.mode = mode;
    s.victim = -1;
    s.timeout_ms = 20000;
    void *mem = tu_shared_alloc(sizeof(bshared) + (size_t)NCALLS * (size_t)W * slot_bytes(W));
    assert_non_null(mem);
    s.sh = (bshared *)mem;
    s.out = (uint8_t *)mem + sizeof(bshared);
    for (int i = 0; i < MAXW; i++)
        s.sh->init_status[i] = s.sh->status[i] = s.sh->after_status[i] = -1;
    return s;
}

static void free_spec(bspec *s) {
    tu_shared_free(s->sh, sizeof(bshared) + (size_t)NCALLS * (size_t)s->W * slot_bytes(s->W));
}

static void spawn(const bspec *s, pid_t *pids) {
    assert_int_equal(tu_spawn(s->W, child, s, pids), 0);
}

/* Reap the victim last, so it stays a zombie while the others look at it. */
static void reap(const bspec *s, const pid_t *pids) {
    assert_int_equal(tu_reap(pids, s->W, s->victim), 0);
}

static void run_world(int W) {
    bspec s = make_spec(W, MODE_OK);
    pid_t pids[MAXW];
    spawn(&s, pids);
    reap(&s, pids);
    for (int r = 0; r < W; r++) {
        if (s.sh->init_status[r] != TPM_OK)
            fail_msg("rank %d init: %d: %s", r, s.sh->init_status[r], s.sh->msg[r]);
        if (s.sh->status[r] != TPM_OK)
            fail_msg("rank %d: %d: %s", r, s.sh->status[r], s.sh->msg[r]);
        assert_int_equal(s.sh->calls_done[r], NCALLS);
        assert_int_equal(s.sh->dir_entries[r], 0); /* both sockets removed */
    }
    uint8_t *exp = malloc(slot_bytes(W));
    for (int k = 0; k < NCALLS; k++) {
        size_t b = g_sizes[k % NSIZES];
        expected(k, W, exp);
        for (int r = 0; r < W; r++) {
            const uint8_t *o = s.out + ((size_t)k * (size_t)W + (size_t)r) * slot_bytes(W);
            if (memcmp(o, exp, (size_t)W * b) != 0)
                fail_msg("W=%d call %d (%zu bytes%s): rank %d's output differs", W, k, b,
                         k / NSIZES == 2 ? ", in place" : "", r);
        }
    }
    free(exp);
    free_spec(&s);
}

static void test_boot_world2(void **state) {
    (void)state;
    run_world(2);
}

static void test_boot_world4(void **state) {
    (void)state;
    run_world(4);
}

static void test_boot_kill(void **state) {
    (void)state;
    bspec s = make_spec(3, MODE_KILL);
    s.victim = 2;
    s.timeout_ms = 10000;
    pid_t pids[MAXW];
    double t0 = tpm_now_s();
    spawn(&s, pids);
    reap(&s, pids);
    assert_true(tpm_now_s() - t0 < 8.0);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(s.sh->init_status[r], TPM_OK);
        assert_int_equal(s.sh->calls_done[r], 1);
        if (s.sh->status[r] != TPM_ERR_PEER)
            fail_msg("rank %d: status %d: %s", r, s.sh->status[r], s.sh->msg[r]);
        assert_non_null(strstr(s.sh->msg[r], "rank 2"));
        assert_int_equal(s.sh->after_status[r], TPM_ERR_PEER);
    }
    free_spec(&s);
}

static void test_boot_silent(void **state) {
    (void)state;
    bspec s = make_spec(2, MODE_SILENT);
    s.victim = 1;
    s.timeout_ms = 1500;
    pid_t pids[MAXW];
    spawn(&s, pids);
    int ws;
    assert_int_equal(waitpid(pids[0], &ws, 0), pids[0]);
    __atomic_store_n(&s.sh->release, 1, __ATOMIC_RELEASE);
    assert_int_equal(waitpid(pids[1], &ws, 0), pids[1]);
    if (s.sh->init_status[0] != TPM_OK || s.sh->init_status[1] != TPM_OK)
        fail_msg("init: %s / %s", s.sh->msg[0], s.sh->msg[1]);
    assert_int_equal(s.sh->calls_done[0], 1);
    if (s.sh->status[0] != TPM_ERR_TIMEOUT)
        fail_msg("rank 0: status %d: %s", s.sh->status[0], s.sh->msg[0]);
    assert_non_null(strstr(s.sh->msg[0], "waiting for rank 1"));
    assert_non_null(strstr(s.sh->msg[0], "all-gather"));
    assert_int_equal(s.sh->after_status[0], TPM_ERR_PEER);
    free_spec(&s);
}

/* MARK: threads */
typedef struct targ {
    void *boot;
    struct tpm_comm *comm;
    int rank, W, scenario;
    tpm_status st[4];
    char msg[MSG];
} targ;

static void *thread_main(void *p) {
    targ *a = (targ *)p;
    uint8_t *in = malloc(MAXBYTES), *out = malloc((size_t)a->W * MAXBYTES),
            *exp = malloc((size_t)a->W * MAXBYTES);
    if (a->scenario == 0) { /* every size, in place and not */
        a->st[0] = TPM_OK;
        for (int k = 0; k < NCALLS && a->st[0] == TPM_OK; k++) {
            a->st[0] = do_call(a->boot, k, a->rank, a->W, out, in, exp);
            if (a->st[0] == TPM_OK && memcmp(out, exp, (size_t)a->W * g_sizes[k % NSIZES]))
                a->st[0] = TPM_ERR_INTERNAL;
            if (a->st[0] == TPM_OK) a->st[0] = tpm_cpu_bootstrap_barrier(a->boot);
        }
    } else if (a->scenario == 1) { /* all-gather and all-reduce on one CPU comm */
        a->st[0] = TPM_OK;
        for (int k = 0; k < 8 && a->st[0] == TPM_OK; k++) {
            size_t b = g_sizes[k % NSIZES];
            expected(k, a->W, exp);
            fill_bytes(in, b, bseed(k, a->rank));
            memset(out, 0x5a, (size_t)a->W * b);
            a->st[0] = tpm_cpu_comm_allgather(a->comm, in, b, out);
            if (a->st[0] == TPM_OK && memcmp(out, exp, (size_t)a->W * b))
                a->st[0] = TPM_ERR_INTERNAL;
            float f[64], g[64];
            for (int i = 0; i < 64; i++)
                f[i] = (float)(a->rank + 1);
            if (a->st[0] == TPM_OK)
                a->st[0] = tpm_allreduce(a->comm, f, g, 64, TPM_DTYPE_FP32, NULL);
            if (a->st[0] == TPM_OK && g[7] != (float)(a->W * (a->W + 1) / 2))
                a->st[0] = TPM_ERR_INTERNAL;
        }
    } else if (a->scenario == 2) { /* rank 0 gathers 64 bytes, the others 200 */
        memset(in, 1, 200);
        a->st[0] = tpm_cpu_bootstrap_allgather(a->boot, in, a->rank == 0 ? 64 : 200, out);
        snprintf(a->msg, MSG, "%s", tpm_last_error());
        a->st[1] = tpm_cpu_bootstrap_barrier(a->boot); /* aborted: stays failed */
    } else { /* rank 1 in a barrier, the others in an all-gather */
        memset(in, 1, 64);
        a->st[0] = a->rank == 1 ? tpm_cpu_bootstrap_barrier(a->boot)
                                : tpm_cpu_bootstrap_allgather(a->boot, in, 64, out);
        snprintf(a->msg, MSG, "%s", tpm_last_error());
    }
    free(in);
    free(out);
    free(exp);
    return NULL;
}

static void run_threads(targ *args, int W) {
    pthread_t th[MAXW];
    for (int r = 0; r < W; r++)
        assert_int_equal(pthread_create(&th[r], NULL, thread_main, &args[r]), 0);
    for (int r = 0; r < W; r++)
        pthread_join(th[r], NULL);
}

static void boot_threads(int W, int scenario, targ *args) {
    tpm_resolved_config rc;
    assert_int_equal(resolve(0, W, NULL, 5000, &rc), TPM_OK);
    void *boots[MAXW];
    assert_int_equal(tpm_cpu_bootstrap_init_all(&rc, W, boots), TPM_OK);
    memset(args, 0, sizeof(targ) * (size_t)W);
    for (int r = 0; r < W; r++) {
        args[r].boot = boots[r];
        args[r].rank = r;
        args[r].W = W;
        args[r].scenario = scenario;
        args[r].st[0] = args[r].st[1] = -1;
    }
    run_threads(args, W);
    for (int r = 0; r < W; r++)
        tpm_cpu_bootstrap_destroy(boots[r]);
}

static void test_boot_threads(void **state) {
    (void)state;
    targ args[MAXW];
    boot_threads(3, 0, args);
    for (int r = 0; r < 3; r++)
        if (args[r].st[0] != TPM_OK) fail_msg("rank %d: %d", r, args[r].st[0]);

    /* the comm-level all-gather interleaved with all-reduces */
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.buffer_bytes = 8192; /* 100000+ byte all-gathers take many chunks */
    tpm_comm_t comms[4];
    assert_int_equal(tpm_comm_init_all(comms, 4, NULL, &cfg), TPM_OK);
    memset(args, 0, sizeof args);
    for (int r = 0; r < 4; r++) {
        args[r].comm = comms[r];
        args[r].rank = r;
        args[r].W = 4;
        args[r].scenario = 1;
    }
    run_threads(args, 4);
    for (int r = 0; r < 4; r++) {
        if (args[r].st[0] != TPM_OK) fail_msg("comm rank %d: %d", r, args[r].st[0]);
        tpm_comm_destroy(comms[r]);
    }
}

static void test_boot_mismatch(void **state) {
    (void)state;
    targ args[MAXW];
    boot_threads(3, 2, args);
    for (int r = 0; r < 3; r++) {
        assert_int_not_equal(args[r].st[0], TPM_OK);
        assert_int_equal(args[r].st[1], TPM_ERR_PEER);
    }
    /* each rank either finds the mismatch itself or is aborted by one that
     * did (TPM_ERR_PEER quoting it); either way the message names both sizes */
    for (int r = 0; r < 3; r++) {
        if (args[r].st[0] != TPM_ERR_MISMATCH && args[r].st[0] != TPM_ERR_PEER)
            fail_msg("rank %d: %d: %s", r, args[r].st[0], args[r].msg);
        assert_non_null(strstr(args[r].msg, "bytes per rank 64"));
        assert_non_null(strstr(args[r].msg, "bytes per rank 200"));
    }
    boot_threads(3, 3, args);
    for (int r = 0; r < 3; r++) {
        if (args[r].st[0] != TPM_ERR_MISMATCH && args[r].st[0] != TPM_ERR_PEER)
            fail_msg("rank %d: %d: %s", r, args[r].st[0], args[r].msg);
        assert_non_null(strstr(args[r].msg, r == 1 ? "rank 1 is in a barrier" : "is in a barrier"));
    }
}

/* MARK: world 1 and bad arguments */
static void test_boot_world1_and_args(void **state) {
    (void)state;
    tpm_resolved_config rc;
    void *b = (void *)&rc;
    assert_int_equal(resolve(0, 1, NULL, 1000, &rc), TPM_OK);
    assert_int_equal(tpm_cpu_bootstrap_init(&rc, &b), TPM_OK);
    uint8_t in[200], out[400];
    fill_bytes(in, sizeof in, 9);
    memset(out, 0x33, sizeof out);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, in, 200, out), TPM_OK);
    assert_memory_equal(in, out, 200);
    assert_int_equal(out[200], 0x33); /* nothing written past world * bytes */
    assert_int_equal(tpm_cpu_bootstrap_barrier(b), TPM_OK);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, NULL, 0, NULL), TPM_OK); /* no-op */
    /* bad arguments of the all-gather */
    assert_int_equal(tpm_cpu_bootstrap_allgather(NULL, in, 4, out), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, NULL, 4, out), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, in, 4, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, in, SIZE_MAX, out), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, out + 2, 8, out), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "overlaps"));
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, out, 8, out), TPM_OK); /* in place */
    assert_int_equal(tpm_cpu_bootstrap_barrier(NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_comm_allgather(NULL, in, 4, out), TPM_ERR_INVALID_ARG);
    tpm_cpu_bootstrap_destroy(b);
    tpm_cpu_bootstrap_destroy(NULL);

    /* bad arguments of the init: boot is cleared on failure */
    b = (void *)&rc;
    assert_int_equal(tpm_cpu_bootstrap_init(NULL, &b), TPM_ERR_INVALID_ARG);
    assert_null(b);
    assert_int_equal(tpm_cpu_bootstrap_init(&rc, NULL), TPM_ERR_INVALID_ARG);
    tpm_resolved_config bad = rc;
    bad.world_size = 0;
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    bad.world_size = 9;
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    bad = rc;
    bad.world_size = 2;
    bad.rank = 2;
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    bad.rank = -1;
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    bad.rank = 0;
    bad.rendezvous[0] = '\0';
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "rendezvous"));
    memset(bad.rendezvous, 'x', sizeof bad.rendezvous);
    assert_int_equal(tpm_cpu_bootstrap_init(&bad, &b), TPM_ERR_INVALID_ARG);
    void *bs[MAXW];
    assert_int_equal(tpm_cpu_bootstrap_init_all(&rc, 0, bs), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_init_all(&rc, 2, NULL), TPM_ERR_INVALID_ARG);
    assert_int_equal(tpm_cpu_bootstrap_init_all(NULL, 2, bs), TPM_ERR_INVALID_ARG);
    assert_null(b);

    /* the directory checks apply; a lone rank times out naming who is missing */
    char open_dir[96];
    snprintf(open_dir, sizeof open_dir, "%s/open", g_dir);
    assert_int_equal(mkdir(open_dir, 0750), 0);
    assert_int_equal(chmod(open_dir, 0750), 0);
    assert_int_equal(resolve(1, 2, open_dir, 200, &rc), TPM_OK);
    assert_int_equal(tpm_cpu_bootstrap_init(&rc, &b), TPM_ERR_CONFIG);
    assert_non_null(strstr(tpm_last_error(), "0750"));
    rmdir(open_dir);
    assert_int_equal(resolve(0, 2, g_dir, 200, &rc), TPM_OK);
    double t0 = tpm_now_s();
    assert_int_equal(tpm_cpu_bootstrap_init(&rc, &b), TPM_ERR_TIMEOUT);
    assert_true(tpm_now_s() - t0 < 3.0);
    assert_non_null(strstr(tpm_last_error(), "/boot"));
    assert_null(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_boot_world2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_world4, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_silent, setup, teardown),
        cmocka_unit_test(test_boot_threads),
        cmocka_unit_test(test_boot_mismatch),
        cmocka_unit_test_setup_teardown(test_boot_world1_and_args, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
