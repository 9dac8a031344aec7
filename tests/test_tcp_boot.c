/*
 * test_tcp_boot.c - the bootstrap over TCP (src/comm/tcp_boot.c), the one a
 * communicator spanning nodes uses (rendezvous tcp://HOST:PORT): forked
 * processes on 127.0.0.1 at worlds 2, 5 and 12 (more than one node holds)
 * exchanging seeded random bytes (1 byte .. 1 MB, in place and not) with
 * barriers between; a rank killed mid-run (TPM_ERR_PEER naming it, quickly);
 * a rank that never calls (TPM_ERR_TIMEOUT); a rank missing at init; ranks
 * with different configurations (TPM_ERR_MISMATCH naming the hash); a rank
 * that aborts (the others get its message); bad URLs; and the configuration
 * rules: more than 8 ranks or a tcp rendezvous need the CUDA backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "comm/comm_internal.h"
#include "util/splitmix.h"
#include "util/test_proc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXW 12
#define MSG 512

static const size_t g_sizes[] = {1, 100, 4096, 65537, 1 << 20};
#define NSIZES ((int)(sizeof g_sizes / sizeof g_sizes[0]))
#define NCALLS (2 * NSIZES) /* the second round in place */

enum { MODE_OK, MODE_KILL, MODE_SILENT, MODE_ABSENT, MODE_HASH, MODE_ABORT };

typedef struct tshared {
    int32_t init_status[MAXW], status[MAXW], after[MAXW], calls_done[MAXW], bad[MAXW];
    int32_t release;
    char msg[MAXW][MSG];
} tshared;

typedef struct tspec {
    int W, mode, victim, timeout_ms;
    char url[64];
    tshared *sh;
} tspec;

/* A port nobody listens on right now (bound to 0 then released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void fill_bytes(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 77;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(tu_sm_next(&s) >> 56);
}

static uint64_t seed_of(int call, int rank) { return 1000u + (uint64_t)call * 131u + (uint64_t)rank * 7u; }

/* The resolved config of a rank: the CUDA backend (the one that spans nodes), a tcp rendezvous. */
static tpm_status resolve(int rank, int W, const char *url, int timeout_ms, int codec, tpm_resolved_config *rc) {
    tpm_config cfg = tu_cpu_config(rank, W, url, timeout_ms);
    cfg.backend = TPM_BACKEND_CUDA;
    if (codec >= 0) cfg.codec = (tpm_codec)codec;
    return tpm_config_resolve(&cfg, rc, NULL, 0);
}

static void child(const void *arg, int rank) {
    const tspec *s = arg;
    tshared *sh = s->sh;
    if (s->mode == MODE_ABSENT && rank == s->victim) _exit(0);
    tpm_resolved_config rc;
    int codec = s->mode == MODE_HASH && rank == s->victim ? TPM_CODEC_INT8 : -1;
    tpm_status st = resolve(rank, s->W, s->url, s->timeout_ms, codec, &rc);
    void *boot = NULL;
    if (st == TPM_OK) st = tpm_cpu_bootstrap_init(&rc, &boot);
    sh->init_status[rank] = st;
    if (st != TPM_OK) {
        snprintf(sh->msg[rank], MSG, "%s", tpm_last_error());
        _exit(1);
    }
    const size_t maxb = g_sizes[NSIZES - 1];
    uint8_t *in = malloc(maxb), *out = malloc((size_t)s->W * maxb), *exp = malloc((size_t)s->W * maxb);
    sh->status[rank] = TPM_OK;
    for (int k = 0; k < NCALLS; k++) {
        if (k == 1 && rank == s->victim) {
            if (s->mode == MODE_KILL) raise(SIGKILL);
            if (s->mode == MODE_ABORT) {
                tpm_cpu_bootstrap_abort(boot, "this rank's GPU fell off the bus");
                sh->after[rank] = tpm_cpu_bootstrap_barrier(boot); /* stays failed */
                break;
            }
            if (s->mode == MODE_SILENT) {
                for (int w = 0; w < 20000 && !__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE); w++) usleep(1000);
                break;
            }
        }
        const size_t b = g_sizes[k % NSIZES];
        for (int r = 0; r < s->W; r++) fill_bytes(exp + (size_t)r * b, b, seed_of(k, r));
        for (size_t i = 0; i < (size_t)s->W * b; i++) out[i] = (uint8_t)~exp[i]; /* poison */
        uint8_t *src = k >= NSIZES ? out + (size_t)rank * b : in;
        fill_bytes(src, b, seed_of(k, rank));
        st = tpm_cpu_bootstrap_allgather(boot, src, b, out);
        if (st == TPM_OK && memcmp(out, exp, (size_t)s->W * b)) sh->bad[rank]++;
        if (st == TPM_OK) st = tpm_cpu_bootstrap_barrier(boot);
        if (st != TPM_OK) {
            sh->status[rank] = st;
            snprintf(sh->msg[rank], MSG, "%s", tpm_last_error());
            sh->after[rank] = tpm_cpu_bootstrap_barrier(boot);
            break;
        }
        __atomic_store_n(&sh->calls_done[rank], k + 1, __ATOMIC_RELEASE);
    }
    free(in);
    free(out);
    free(exp);
    tpm_cpu_bootstrap_destroy(boot);
    _exit(0);
}

static tspec make_spec(int W, int mode, int victim, int timeout_ms) {
    tspec s;
    memset(&s, 0, sizeof s);
    s.W = W;
    s.mode = mode;
    s.victim = victim;
    s.timeout_ms = timeout_ms;
    snprintf(s.url, sizeof s.url, "tcp://127.0.0.1:%d", free_port());
    s.sh = tu_shared_alloc(sizeof(tshared));
    assert_non_null(s.sh);
    for (int i = 0; i < MAXW; i++) s.sh->init_status[i] = s.sh->status[i] = s.sh->after[i] = -1;
    return s;
}

static void run(tspec *s) {
    pid_t pids[MAXW];
    assert_int_equal(tu_spawn(s->W, child, s, pids), 0);
    if (s->mode == MODE_SILENT) { /* let the silent rank go once the others have given up */
        int ws;
        for (int r = 0; r < s->W; r++)
            if (r != s->victim) assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        __atomic_store_n(&s->sh->release, 1, __ATOMIC_RELEASE);
        assert_int_equal(waitpid(pids[s->victim], &ws, 0), pids[s->victim]);
        return;
    }
    assert_int_equal(tu_reap(pids, s->W, s->mode == MODE_KILL ? s->victim : -1), 0);
}

static void world(int W) {
    tspec s = make_spec(W, MODE_OK, -1, 20000);
    run(&s);
    for (int r = 0; r < W; r++) {
        if (s.sh->init_status[r] != TPM_OK) fail_msg("W=%d rank %d init: %s", W, r, s.sh->msg[r]);
        if (s.sh->status[r] != TPM_OK) fail_msg("W=%d rank %d: %s", W, r, s.sh->msg[r]);
        assert_int_equal(s.sh->calls_done[r], NCALLS);
        assert_int_equal(s.sh->bad[r], 0);
    }
    tu_shared_free(s.sh, sizeof(tshared));
}

static void test_tcp_worlds(void **state) {
    (void)state;
    world(2);
    world(5);
    world(12); /* more ranks than one node holds */
}

static void test_tcp_kill(void **state) {
    (void)state;
    tspec s = make_spec(3, MODE_KILL, 2, 10000);
    double t0 = tpm_now_s();
    run(&s);
    assert_true(tpm_now_s() - t0 < 8.0); /* noticed, not waited out */
    for (int r = 0; r < 2; r++) {
        assert_int_equal(s.sh->init_status[r], TPM_OK);
        assert_int_equal(s.sh->calls_done[r], 1);
        if (s.sh->status[r] != TPM_ERR_PEER) fail_msg("rank %d: %d: %s", r, s.sh->status[r], s.sh->msg[r]);
        assert_non_null(strstr(s.sh->msg[r], "rank 2"));
        assert_int_equal(s.sh->after[r], TPM_ERR_PEER);
    }
    tu_shared_free(s.sh, sizeof(tshared));
}

static void test_tcp_abort(void **state) {
    (void)state;
    tspec s = make_spec(4, MODE_ABORT, 3, 10000);
    run(&s);
    assert_int_equal(s.sh->after[3], TPM_ERR_PEER);
    for (int r = 0; r < 3; r++) {
        if (s.sh->status[r] != TPM_ERR_PEER) fail_msg("rank %d: %d: %s", r, s.sh->status[r], s.sh->msg[r]);
        assert_non_null(strstr(s.sh->msg[r], "fell off the bus"));
    }
    tu_shared_free(s.sh, sizeof(tshared));
}

static void test_tcp_silent_and_absent(void **state) {
    (void)state;
    tspec s = make_spec(2, MODE_SILENT, 1, 1500);
    run(&s);
    assert_int_equal(s.sh->calls_done[0], 1);
    if (s.sh->status[0] != TPM_ERR_TIMEOUT) fail_msg("rank 0: %d: %s", s.sh->status[0], s.sh->msg[0]);
    assert_non_null(strstr(s.sh->msg[0], "rank 1"));
    tu_shared_free(s.sh, sizeof(tshared));

    /* rank 0 waits for a rank that never comes; rank 1 for a rank 0 that never listens */
    s = make_spec(3, MODE_ABSENT, 2, 1200);
    run(&s);
    for (int r = 0; r < 2; r++)
        if (s.sh->init_status[r] != TPM_ERR_TIMEOUT && s.sh->init_status[r] != TPM_ERR_PEER)
            fail_msg("rank %d init: %d: %s", r, s.sh->init_status[r], s.sh->msg[r]);
    assert_int_equal(s.sh->init_status[0], TPM_ERR_TIMEOUT);
    assert_non_null(strstr(s.sh->msg[0], "did not connect"));
    tu_shared_free(s.sh, sizeof(tshared));
    s = make_spec(2, MODE_ABSENT, 0, 800);
    run(&s);
    assert_int_equal(s.sh->init_status[1], TPM_ERR_TIMEOUT);
    assert_non_null(strstr(s.sh->msg[1], "could not connect"));
    tu_shared_free(s.sh, sizeof(tshared));
}

static void test_tcp_mismatch(void **state) {
    (void)state;
    tspec s = make_spec(3, MODE_HASH, 2, 5000);
    run(&s);
    for (int r = 0; r < 3; r++) {
        if (s.sh->init_status[r] != TPM_ERR_MISMATCH) fail_msg("rank %d: %d: %s", r, s.sh->init_status[r], s.sh->msg[r]);
        assert_non_null(strstr(s.sh->msg[r], "config hash"));
    }
    tu_shared_free(s.sh, sizeof(tshared));
}

static void test_tcp_args_and_config(void **state) {
    (void)state;
    tpm_resolved_config rc;
    void *b = (void *)&rc;
    /* bad URLs */
    const char *bad[] = {"tcp://", "tcp://host", "tcp://:80", "tcp://host:", "tcp://host:0", "tcp://host:70000",
                         "tcp://host:12ab"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(resolve(1, 2, bad[i], 500, -1, &rc), TPM_OK);
        assert_int_equal(tpm_cpu_bootstrap_init(&rc, &b), TPM_ERR_CONFIG);
        assert_null(b);
        assert_non_null(strstr(tpm_last_error(), "rendezvous"));
    }
    /* world 1 needs nobody */
    assert_int_equal(resolve(0, 1, "tcp://127.0.0.1:9", 500, -1, &rc), TPM_OK);
    assert_int_equal(tpm_cpu_bootstrap_init(&rc, &b), TPM_OK);
    uint8_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, in, 8, out), TPM_OK);
    assert_memory_equal(in, out, 8);
    assert_int_equal(tpm_cpu_bootstrap_barrier(b), TPM_OK);
    assert_int_equal(tpm_cpu_bootstrap_allgather(b, NULL, 4, out), TPM_ERR_INVALID_ARG);
    tpm_cpu_bootstrap_destroy(b);

    /* configuration: more than 8 ranks only across nodes (tcp rendezvous, CUDA backend) */
    tpm_config cfg = tu_cpu_config(3, 16, "/tmp/somewhere", 500);
    cfg.backend = TPM_BACKEND_CUDA;
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_ERR_INVALID_ARG);
    assert_non_null(strstr(tpm_last_error(), "spans nodes"));
    cfg.rendezvous = "tcp://10.0.0.1:29500";
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_OK);
    assert_int_equal(rc.world_size, 16);
    assert_true(rc.node[0] != '\0');
    cfg.backend = TPM_BACKEND_CPU;
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_ERR_INVALID_ARG);
    cfg.world_size = 2;
    cfg.rank = 1;
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_ERR_INVALID_ARG); /* CPU + tcp */
    assert_non_null(strstr(tpm_last_error(), "CPU backend"));
    cfg.world_size = TPM_MAX_WORLD + 1;
    cfg.backend = TPM_BACKEND_CUDA;
    assert_int_not_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_OK);
    /* the CPU communicator refuses a tcp rendezvous with a clear error */
    tpm_config cc = tu_cpu_config(0, 2, "tcp://127.0.0.1:9", 500);
    tpm_comm_t comm = NULL;
    assert_int_not_equal(tpm_comm_init(&comm, &cc), TPM_OK);
    assert_null(comm);
    /* the node name: TPMOE_NODE_ID, else the host name */
    setenv("TPMOE_NODE_ID", "rack3-node7", 1);
    cfg = tu_cpu_config(0, 2, "tcp://127.0.0.1:9", 500);
    cfg.backend = TPM_BACKEND_CUDA;
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_OK);
    assert_string_equal(rc.node, "rack3-node7");
    const uint64_t h1 = rc.hash;
    setenv("TPMOE_NODE_ID", "rack3-node8", 1);
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_OK);
    assert_int_equal(rc.hash, h1); /* not part of what the ranks must agree on */
    setenv("TPMOE_NODE_ID", "", 1); /* empty = unset, as every TPMOE_ variable: the host name */
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_OK);
    assert_true(rc.node[0] != '\0');
    char longid[100];
    memset(longid, 'n', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    setenv("TPMOE_NODE_ID", longid, 1);
    assert_int_equal(tpm_config_resolve(&cfg, &rc, NULL, 0), TPM_ERR_CONFIG);
    assert_non_null(strstr(tpm_last_error(), "TPMOE_NODE_ID"));
    unsetenv("TPMOE_NODE_ID");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_worlds),
        cmocka_unit_test(test_tcp_kill),
        cmocka_unit_test(test_tcp_abort),
        cmocka_unit_test(test_tcp_silent_and_absent),
        cmocka_unit_test(test_tcp_mismatch),
        cmocka_unit_test(test_tcp_args_and_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
