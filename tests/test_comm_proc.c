/*
 * test_comm_proc.c - the CPU communicator with ranks as forked processes
 * (tpm_comm_init over POSIX shared memory + Unix-socket rendezvous): results
 * against the independent reference at worlds 2 and 4, a rank killed with
 * SIGKILL mid-run, handshake mismatches, duplicate ranks, unsafe rendezvous
 * directories and rendezvous timeouts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "comm/cpu_comm.h"
#include "test_comm_ref.h"
#include "util/test_proc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAXW 8
#define MSG 512
#define MAXCALLS 64

typedef struct pcall {
    size_t count;
    tpm_dtype dt;
    tpm_codec codec;
    tpm_algo algo;
    int inplace;
} pcall;

/* Shared with the children (MAP_SHARED | MAP_ANONYMOUS before fork). */
typedef struct pshared {
    int32_t init_status[MAXW];
    int32_t status[MAXW]; /* of the last call */
    int32_t calls_done[MAXW];
    int32_t dir_entries_after_init[MAXW];
    char msg[MAXW][MSG];
} pshared;

typedef struct pspec {
    int W;
    const char *dir;
    const pcall *calls;
    int ncalls;
    int loop; /* repeat the calls until one fails (kill test) */
    int64_t buffer_bytes;
    int timeout_ms;
    int use_env; /* rank/world/rendezvous through TPMOE_* */
    tpm_codec cfg_codec[MAXW];
    int rank_of[MAXW]; /* child i claims rank rank_of[i] */
    pshared *sh;
    uint8_t *out; /* [call][rank][max_bytes] */
    size_t max_bytes;
} pspec;

static char g_dir[64];

static int setup(void **state) {
    (void)state;
    assert_non_null(tu_mkdtemp(g_dir, sizeof g_dir, "test"));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char p[128];
    snprintf(p, sizeof p, "%s/sock", g_dir);
    unlink(p);
    rmdir(g_dir);
    return 0;
}

static uint64_t pseed(int call, int rank) {
    return 7777u + (uint64_t)call * 131u + (uint64_t)rank;
}

static void child(const void *arg, int idx) {
    const pspec *s = arg;
    int rank = s->rank_of[idx];
    tpm_config cfg = TPM_CONFIG_INIT;
    cfg.backend = TPM_BACKEND_CPU;
    cfg.buffer_bytes = s->buffer_bytes;
    cfg.timeout_ms = s->timeout_ms;
    cfg.codec = s->cfg_codec[idx];
    if (s->use_env) {
        char v[16];
        snprintf(v, sizeof v, "%d", rank);
        setenv("TPMOE_RANK", v, 1);
        snprintf(v, sizeof v, "%d", s->W);
        setenv("TPMOE_WORLD_SIZE", v, 1);
        setenv("TPMOE_RENDEZVOUS", s->dir, 1);
    } else {
        cfg.rank = rank;
        cfg.world_size = s->W;
        cfg.rendezvous = s->dir;
    }
    tpm_comm_t c = NULL;
    tpm_status st = tpm_comm_init(&c, &cfg);
    s->sh->init_status[idx] = st;
    if (st != TPM_OK) {
        snprintf(s->sh->msg[idx], MSG, "%s", tpm_last_error());
        _exit(1);
    }
    s->sh->dir_entries_after_init[idx] = tu_count_entries(s->dir);
    uint8_t *in = malloc(s->max_bytes), *tmp = malloc(s->max_bytes);
    for (long it = 0;; it++) {
        int k = (int)(it % s->ncalls);
        if (!s->loop && it >= s->ncalls) break;
        if (it > 200000) break;
        const pcall *p = &s->calls[k];
        size_t bytes = p->count * tpm_dtype_size(p->dt);
        uint8_t *out =
            s->loop ? tmp : s->out + ((size_t)k * (size_t)s->W + (size_t)rank) * s->max_bytes;
        tr_fill(in, p->dt, p->count, pseed(k, rank));
        memset(out, 0x5a, bytes);
        if (p->inplace) memcpy(out, in, bytes);
        st = tpm_allreduce_ex(c, p->inplace ? out : in, out, p->count, p->dt, p->codec, p->algo,
                              NULL);
        s->sh->status[idx] = st;
        if (st != TPM_OK) {
            snprintf(s->sh->msg[idx], MSG, "%s", tpm_comm_last_error(c));
            break;
        }
        __atomic_store_n(&s->sh->calls_done[idx], (int32_t)(it + 1), __ATOMIC_RELEASE);
    }
    free(in);
    free(tmp);
    tpm_comm_destroy(c);
    _exit(0);
}

static void spawn(pspec *s, pid_t *pids) {
    assert_int_equal(tu_spawn(s->W, child, s, pids), 0);
}

static void reap(const pspec *s, const pid_t *pids) {
    assert_int_equal(tu_reap(pids, s->W, -1), 0);
}

static pspec make_spec(int W, const pcall *calls, int ncalls) {
    pspec s;
    memset(&s, 0, sizeof s);
    s.W = W;
    s.dir = g_dir;
    s.calls = calls;
    s.ncalls = ncalls;
    s.buffer_bytes = 1 << 16;
    s.timeout_ms = 20000;
    for (int i = 0; i < MAXW; i++) {
        s.rank_of[i] = i;
        s.cfg_codec[i] = TPM_CODEC_NONE;
    }
    for (int k = 0; k < ncalls; k++) {
        size_t b = calls[k].count * tpm_dtype_size(calls[k].dt);
        if (b > s.max_bytes) s.max_bytes = b;
    }
    void *mem = tu_shared_alloc(sizeof(pshared) + (size_t)ncalls * (size_t)W * s.max_bytes);
    assert_non_null(mem);
    s.sh = (pshared *)mem;
    s.out = (uint8_t *)mem + sizeof(pshared);
    for (int i = 0; i < MAXW; i++)
        s.sh->init_status[i] = s.sh->status[i] = -1;
    return s;
}

static void free_spec(pspec *s) {
    tu_shared_free(s->sh, sizeof(pshared) + (size_t)s->ncalls * (size_t)s->W * s->max_bytes);
}

/* MARK: results */
static void check_results(const pspec *s) {
    for (int i = 0; i < s->W; i++) {
        if (s->sh->init_status[i] != TPM_OK)
            fail_msg("rank %d init: %d: %s", i, s->sh->init_status[i], s->sh->msg[i]);
        if (s->sh->status[i] != TPM_OK)
            fail_msg("rank %d: %d: %s", i, s->sh->status[i], s->sh->msg[i]);
        assert_int_equal(s->sh->calls_done[i], s->ncalls);
        assert_int_equal(s->sh->dir_entries_after_init[i],
                         0); /* socket removed; shm is not in the dir */
    }
    size_t region, off, total;
    tpm_cpu_arena_layout(s->W, s->buffer_bytes, &region, &off, &total);
    for (int k = 0; k < s->ncalls; k++) {
        const pcall *p = &s->calls[k];
        size_t bytes = p->count * tpm_dtype_size(p->dt);
        void *in[MAXW];
        for (int r = 0; r < s->W; r++) {
            in[r] = malloc(bytes);
            tr_fill(in[r], p->dt, p->count, pseed(k, r));
        }
        void *ref = malloc(bytes);
        tr_ref((const void *const *)in, s->W, p->count, p->dt, p->codec,
               tpm_cpu_chunk_elems(TPM_ALGO_TWOSHOT, p->codec, p->dt, s->W, region / 2), ref);
        for (int r = 0; r < s->W; r++) {
            const uint8_t *o = s->out + ((size_t)k * (size_t)s->W + (size_t)r) * s->max_bytes;
            long d = tr_first_diff(o, ref, p->count, p->dt);
            if (d >= 0)
                fail_msg("W=%d call %d (count %zu %s %s %s) rank %d differs at %ld", s->W, k,
                         p->count, tpm_dtype_name(p->dt), tpm_codec_name(p->codec),
                         tpm_algo_name(p->algo), r, d);
        }
        for (int r = 0; r < s->W; r++)
            free(in[r]);
        free(ref);
    }
}

static const pcall g_calls[] = {
    {1, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 0},
    {33, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 1},
    {1000, TPM_DTYPE_FP32, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 0},
    {12345, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0},
    {12345, TPM_DTYPE_FP16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 1},
    {31, TPM_DTYPE_BF16, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, 0},
    {1000, TPM_DTYPE_FP16, TPM_CODEC_INT6, TPM_ALGO_TWOSHOT, 0},
    {12345, TPM_DTYPE_BF16, TPM_CODEC_INT4, TPM_ALGO_TWOSHOT, 1},
    {12345, TPM_DTYPE_BF16, TPM_CODEC_FP8, TPM_ALGO_TWOSHOT, 0},
    {5000, TPM_DTYPE_FP16, TPM_CODEC_INT4_H, TPM_ALGO_TWOSHOT, 0},
    {3001, TPM_DTYPE_FP32, TPM_CODEC_INT8, TPM_ALGO_TWOSHOT, 1},
    {40000, TPM_DTYPE_BF16, TPM_CODEC_INT6_H, TPM_ALGO_TWOSHOT, 0},
    {40000, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0},
};
#define NCALLS ((int)(sizeof g_calls / sizeof g_calls[0]))

static void run_world(int W, int use_env) {
    pspec s = make_spec(W, g_calls, NCALLS);
    s.use_env = use_env;
    pid_t pids[MAXW];
    spawn(&s, pids);
    reap(&s, pids);
    check_results(&s);
    free_spec(&s);
}

static void test_proc_world2(void **state) {
    (void)state;
    run_world(2, 0);
}

static void test_proc_world4_env(void **state) {
    (void)state;
    run_world(4, 1);
}

/* MARK: a rank killed mid-run */
static void test_proc_kill(void **state) {
    (void)state;
    static const pcall loop_calls[] = {{20000, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_TWOSHOT, 0},
                                       {3000, TPM_DTYPE_BF16, TPM_CODEC_NONE, TPM_ALGO_ONESHOT, 0}};
    pspec s = make_spec(4, loop_calls, 2);
    s.loop = 1;
    s.timeout_ms = 10000;
    pid_t pids[MAXW];
    spawn(&s, pids);
    /* let everyone get going, then kill rank 2 */
    for (int spin = 0; spin < 20000; spin++) {
        int ready = 1;
        for (int i = 0; i < 4; i++)
            if (__atomic_load_n(&s.sh->calls_done[i], __ATOMIC_ACQUIRE) < 5) ready = 0;
        if (ready) break;
        usleep(1000);
    }
    double t0 = tpm_now_s();
    assert_int_equal(kill(pids[2], SIGKILL), 0);
    /* reap the survivors first so the killed one stays a zombie meanwhile */
    assert_int_equal(tu_reap(pids, 4, 2), 0);
    double dt = tpm_now_s() - t0;
    assert_true(dt < 10.0);
    for (int i = 0; i < 4; i++) {
        if (i == 2) continue;
        if (s.sh->status[i] != TPM_ERR_PEER)
            fail_msg("rank %d: status %d: %s", i, s.sh->status[i], s.sh->msg[i]);
        if (!strstr(s.sh->msg[i], "rank 2")) fail_msg("rank %d: %s", i, s.sh->msg[i]);
    }
    free_spec(&s);
}

/* MARK: handshake */
static void test_proc_codec_mismatch(void **state) {
    (void)state;
    pspec s = make_spec(2, g_calls, 1);
    s.cfg_codec[1] = TPM_CODEC_INT4;
    pid_t pids[MAXW];
    spawn(&s, pids);
    reap(&s, pids);
    for (int i = 0; i < 2; i++) {
        if (s.sh->init_status[i] != TPM_ERR_MISMATCH)
            fail_msg("rank %d: init status %d: %s", i, s.sh->init_status[i], s.sh->msg[i]);
        assert_non_null(strstr(s.sh->msg[i], "codec int4"));
        assert_non_null(strstr(s.sh->msg[i], "codec none"));
    }
    free_spec(&s);
}

static void test_proc_duplicate_rank(void **state) {
    (void)state;
    pspec s = make_spec(3, g_calls, 1);
    s.rank_of[2] = 1; /* two processes claim rank 1; rank 2 never comes */
    s.timeout_ms = 10000;
    pid_t pids[MAXW];
    double t0 = tpm_now_s();
    spawn(&s, pids);
    reap(&s, pids);
    assert_true(tpm_now_s() - t0 < 9.0);
    assert_int_equal(s.sh->init_status[0], TPM_ERR_MISMATCH);
    assert_non_null(strstr(s.sh->msg[0], "duplicate rank 1"));
    int rejected = 0;
    for (int i = 1; i < 3; i++) {
        assert_int_not_equal(s.sh->init_status[i], TPM_OK);
        if (strstr(s.sh->msg[i], "duplicate rank 1")) rejected++;
    }
    assert_true(rejected >= 1);
    free_spec(&s);
}

static tpm_status init_alone(int rank, int world, const char *dir, int timeout_ms, tpm_comm_t *c) {
    tpm_config cfg = tu_cpu_config(rank, world, dir, timeout_ms);
    *c = NULL;
    return tpm_comm_init(c, &cfg);
}

static void test_proc_rendezvous_errors(void **state) {
    (void)state;
    tpm_comm_t c;
    /* nobody else shows up: bounded by the timeout, naming who is missing */
    double t0 = tpm_now_s();
    assert_int_equal(init_alone(0, 3, g_dir, 200, &c), TPM_ERR_TIMEOUT);
    assert_true(tpm_now_s() - t0 < 3.0);
    assert_non_null(strstr(tpm_last_error(), "ranks 1 2"));
    assert_null(c);
    assert_int_equal(tu_count_entries(g_dir), 0); /* socket cleaned up */
    assert_int_equal(init_alone(1, 2, g_dir, 200, &c), TPM_ERR_TIMEOUT);
    assert_non_null(strstr(tpm_last_error(), "rank 0"));
    /* a group-readable directory is refused on every rank */
    char open_dir[96];
    snprintf(open_dir, sizeof open_dir, "%s/open", g_dir);
    assert_int_equal(mkdir(open_dir, 0700), 0);
    assert_int_equal(chmod(open_dir, 0750), 0);
    assert_int_equal(init_alone(0, 2, open_dir, 200, &c), TPM_ERR_CONFIG);
    assert_non_null(strstr(tpm_last_error(), "0750"));
    assert_int_equal(init_alone(1, 2, open_dir, 200, &c), TPM_ERR_CONFIG);
    rmdir(open_dir);
    /* a file is not a directory */
    char file[96];
    snprintf(file, sizeof file, "%s/file", g_dir);
    int fd = open(file, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(init_alone(0, 2, file, 200, &c), TPM_ERR_CONFIG);
    assert_non_null(strstr(tpm_last_error(), "not a directory"));
    unlink(file);
    /* rank 0 creates a missing directory with mode 0700 */
    char fresh[96];
    snprintf(fresh, sizeof fresh, "%s/fresh", g_dir);
    assert_int_equal(init_alone(0, 2, fresh, 100, &c), TPM_ERR_TIMEOUT);
    struct stat sb;
    assert_int_equal(stat(fresh, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    rmdir(fresh);
    /* no rendezvous at all */
    unsetenv("TPMOE_RENDEZVOUS");
    assert_int_equal(init_alone(0, 2, NULL, 100, &c), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "rendezvous"));
    /* world 1 needs none */
    assert_int_equal(init_alone(0, 1, NULL, 100, &c), TPM_OK);
    uint16_t in[40], out[40];
    tr_fill(in, TPM_DTYPE_BF16, 40, 3);
    assert_int_equal(tpm_allreduce(c, in, out, 40, TPM_DTYPE_BF16, NULL), TPM_OK);
    assert_memory_equal(in, out, sizeof in);
    assert_int_equal(tpm_comm_destroy(c), TPM_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_proc_world2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_world4_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_kill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_codec_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_duplicate_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_rendezvous_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
