/*
 * tcp_boot.c - the bootstrap over TCP, for communicators that span nodes
 * (rendezvous "tcp://HOST:PORT"; comm_internal.h). It carries what the
 * directory bootstrap carries on one node (cpu_boot.c): the CUDA backend's
 * hello (IPC handle, bus id, node name) and the NCCL unique id.
 *
 * Topology: a star. Rank 0 binds HOST:PORT (HOST must name an address of
 * rank 0's machine that the others reach) and accepts the W-1 others; every
 * other rank connects, retrying while nobody listens yet. Everything is
 * bounded by cfg.timeout_ms.
 *
 * Frames: {magic, type, length} (16 bytes, host byte order: every node runs
 * the same build) then length bytes.
 *  HELLO  rank -> 0: {proto, rank, world, config hash}. Rank 0 checks each
 *         against its own (a different hash: the ranks resolved different
 *         configurations) and for duplicate ranks, then answers every rank
 *         with ACK {status, message}: all go, or all fail with the reason.
 *  GATHER rank -> 0: the rank's bytes; rank 0 waits for every rank's (they
 *         must all have the same length), then sends RESULT (W x bytes, in
 *         rank order) to each. A barrier is an all-gather of one byte.
 *  ABORT  either way: {message}. A rank that fails outside a bootstrap call
 *         sends it to rank 0, which forwards it to every other rank the next
 *         time it waits on them; rank 0 failing sends it to all.
 * A closed connection (dead process) is TPM_ERR_PEER naming the rank; a
 * wait past the timeout TPM_ERR_TIMEOUT; lengths that disagree
 * TPM_ERR_MISMATCH. After any failure the handle is dead: later calls return
 * the same error at once. Writes use MSG_NOSIGNAL (no SIGPIPE).
 */
#include "comm_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TCP_MAGIC 0x746d70626f6f7431ull /* "tmpboot1" */
#define TCP_PROTO 1u
#define TCP_MSG 256

enum { F_HELLO = 1, F_ACK = 2, F_GATHER = 3, F_RESULT = 4, F_ABORT = 5 };

typedef struct frame {
    uint64_t magic;
    uint32_t type, pad;
    uint64_t len;
} frame;

typedef struct hello_msg {
    uint32_t proto;
    int32_t rank, world, pad;
    uint64_t hash;
} hello_msg;

typedef struct ack_msg {
    int32_t status, pad;
    char msg[TCP_MSG];
} ack_msg;

struct tpm_tcp_boot {
    int rank, world, timeout_ms;
    int *fd;        /* rank 0: fd[p] for p >= 1; others: fd[0], the link to rank 0 */
    tpm_status dead; /* TPM_OK while usable */
    char why[TCP_MSG];
};

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Parse "tcp://HOST:PORT" (HOST may be [v6]). */
static tpm_status parse_url(const char *url, char *host, size_t hlen, char *port, size_t plen) {
    if (strncmp(url, "tcp://", 6)) return tpm_err(TPM_ERR_CONFIG, "rendezvous '%s' is not tcp://HOST:PORT", url);
    const char *h = url + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h || !colon[1])
        return tpm_err(TPM_ERR_CONFIG, "rendezvous '%s': want tcp://HOST:PORT", url);
    size_t n = (size_t)(colon - h);
    if (h[0] == '[' && n >= 2 && h[n - 1] == ']') h++, n -= 2;
    if (n >= hlen || strlen(colon + 1) >= plen)
        return tpm_err(TPM_ERR_CONFIG, "rendezvous '%s': host or port too long", url);
    memcpy(host, h, n);
    host[n] = '\0';
    strcpy(port, colon + 1);
    char *end;
    long pv = strtol(port, &end, 10);
    if (*end || pv < 1 || pv > 65535) return tpm_err(TPM_ERR_CONFIG, "rendezvous '%s': bad port '%s'", url, port);
    return TPM_OK;
}

/* Wait until fd is readable (events POLLIN) or writable, up to the deadline. */
static tpm_status wait_fd(tpm_tcp_boot *b, int fd, short events, int64_t deadline, int peer, const char *what) {
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return tpm_err(TPM_ERR_TIMEOUT, "bootstrap rank %d: %s rank %d: no answer within %d ms", b->rank, what,
                           peer, b->timeout_ms);
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r > 0) return TPM_OK; /* readable, writable, or an error the next read / write reports */
        if (r < 0 && errno != EINTR)
            return tpm_err(TPM_ERR_PEER, "bootstrap rank %d: poll: %s", b->rank, strerror(errno));
    }
}

static tpm_status send_all(tpm_tcp_boot *b, int fd, const void *p, size_t n, int64_t deadline, int peer) {
    const char *c = (const char *)p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            TPM_TRY(wait_fd(b, fd, POLLOUT, deadline, peer, "sending to"));
            continue;
        }
        return tpm_err(TPM_ERR_PEER, "bootstrap rank %d: rank %d closed its connection (%s)", b->rank, peer,
                       w < 0 ? strerror(errno) : "send");
    }
    return TPM_OK;
}

static tpm_status recv_all(tpm_tcp_boot *b, int fd, void *p, size_t n, int64_t deadline, int peer) {
    char *c = (char *)p;
    while (n) {
        ssize_t r = recv(fd, c, n, MSG_DONTWAIT);
        if (r > 0) {
            c += r;
            n -= (size_t)r;
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            TPM_TRY(wait_fd(b, fd, POLLIN, deadline, peer, "waiting for"));
            continue;
        }
        return tpm_err(TPM_ERR_PEER, "bootstrap rank %d: rank %d closed its connection (%s)", b->rank, peer,
                       r < 0 ? strerror(errno) : "the process ended or aborted");
    }
    return TPM_OK;
}

static tpm_status send_frame(tpm_tcp_boot *b, int fd, uint32_t type, const void *p, size_t n, int64_t deadline,
                             int peer) {
    frame f = {TCP_MAGIC, type, 0, n};
    TPM_TRY(send_all(b, fd, &f, sizeof f, deadline, peer));
    return n ? send_all(b, fd, p, n, deadline, peer) : TPM_OK;
}

/* Receive a frame of the wanted type into buf (exactly want bytes; want < 0: any length up to
 * -want, its length in *got). An ABORT is TPM_ERR_PEER with the sender's message. */
static tpm_status recv_frame(tpm_tcp_boot *b, int fd, uint32_t type, void *buf, int64_t want, size_t *got,
                             int64_t deadline, int peer) {
    frame f;
    TPM_TRY(recv_all(b, fd, &f, sizeof f, deadline, peer));
    if (f.magic != TCP_MAGIC)
        return tpm_err(TPM_ERR_PEER, "bootstrap rank %d: rank %d sent a frame that is not tpmoe's", b->rank, peer);
    if (f.type == F_ABORT) {
        char msg[TCP_MSG] = {0};
        size_t n = f.len < sizeof msg - 1 ? (size_t)f.len : sizeof msg - 1;
        if (recv_all(b, fd, msg, n, deadline, peer) != TPM_OK) msg[0] = '\0';
        return tpm_err(TPM_ERR_PEER, "bootstrap: rank %d aborted: %s", peer, msg[0] ? msg : "(no message)");
    }
    if (f.type != type)
        return tpm_err(TPM_ERR_MISMATCH, "bootstrap rank %d: rank %d is in another call (frame %u, expected %u)",
                       b->rank, peer, f.type, type);
    if ((want >= 0 && f.len != (uint64_t)want) || (want < 0 && f.len > (uint64_t)-want))
        return tpm_err(TPM_ERR_MISMATCH, "bootstrap rank %d: rank %d sent %llu bytes, this rank %lld", b->rank, peer,
                       (unsigned long long)f.len, (long long)(want < 0 ? -want : want));
    if (got) *got = (size_t)f.len;
    return recv_all(b, fd, buf, (size_t)f.len, deadline, peer);
}

/* Kill the handle: remember the error, tell the peers (best effort, short deadline). */
static tpm_status die(tpm_tcp_boot *b, tpm_status st) {
    if (b->dead != TPM_OK) return st;
    b->dead = st;
    snprintf(b->why, sizeof b->why, "%s", tpm_err_msg());
    const int64_t dl = now_ms() + 200;
    const size_t n = strlen(b->why);
    if (b->rank == 0) {
        for (int p = 1; p < b->world; p++)
            if (b->fd[p] >= 0) (void)send_frame(b, b->fd[p], F_ABORT, b->why, n, dl, p);
    } else if (b->fd[0] >= 0) {
        (void)send_frame(b, b->fd[0], F_ABORT, b->why, n, dl, 0);
    }
    tpm_err(st, "%s", b->why); /* keep our message as the thread's last error */
    return st;
}

static void set_sockopts(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static tpm_status listen_on(tpm_tcp_boot *b, const char *host, const char *port, int *out) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) return tpm_err(TPM_ERR_CONFIG, "bootstrap rank 0: %s:%s: %s", host, port, gai_strerror(rc));
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, b->world) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return tpm_err(TPM_ERR_CONFIG, "bootstrap rank 0: cannot listen on %s:%s: %s", host, port,
                       strerror(err ? err : EADDRNOTAVAIL));
    *out = fd;
    return TPM_OK;
}

static tpm_status connect_to(tpm_tcp_boot *b, const char *host, const char *port, int64_t deadline, int *out) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) return tpm_err(TPM_ERR_CONFIG, "bootstrap rank %d: %s:%s: %s", b->rank, host, port, gai_strerror(rc));
    int last = 0;
    for (;;) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                freeaddrinfo(res);
                set_sockopts(fd);
                *out = fd;
                return TPM_OK;
            }
            last = errno;
            close(fd);
        }
        if (now_ms() >= deadline) break;
        struct timespec ts = {0, 20 * 1000 * 1000}; /* rank 0 may not listen yet */
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(res);
    return tpm_err(TPM_ERR_TIMEOUT, "bootstrap rank %d: could not connect to rank 0 at %s:%s within %d ms (%s)",
                   b->rank, host, port, b->timeout_ms, strerror(last ? last : ETIMEDOUT));
}

/* Rank 0's side of the handshake: accept W-1 ranks, check their hellos, answer all. */
static tpm_status accept_all(tpm_tcp_boot *b, int lfd, uint64_t hash, int64_t deadline) {
    tpm_status st = TPM_OK;
    char why[TCP_MSG] = "";
    int *pending = calloc((size_t)b->world, sizeof *pending);
    if (!pending) return tpm_err(TPM_ERR_NO_MEMORY, "bootstrap: out of memory");
    for (int k = 1; k < b->world; k++) {
        tpm_status ws = wait_fd(b, lfd, POLLIN, deadline, -1, "accepting");
        if (ws != TPM_OK) {
            if (st != TPM_OK) break; /* keep the mismatch as the reason */
            int missing = 0;
            for (int p = 1; p < b->world; p++) missing += b->fd[p] < 0;
            st = tpm_err(TPM_ERR_TIMEOUT, "bootstrap rank 0: %d of %d ranks did not connect within %d ms", missing,
                         b->world - 1, b->timeout_ms);
            snprintf(why, sizeof why, "%s", tpm_err_msg());
            break;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            k--;
            continue;
        }
        set_sockopts(fd);
        hello_msg h;
        tpm_status hs = recv_frame(b, fd, F_HELLO, &h, sizeof h, NULL, deadline, -1);
        if (hs != TPM_OK) { /* not one of ours, or it went away: drop it and keep accepting */
            close(fd);
            k--;
            continue;
        }
        if (st == TPM_OK && !why[0]) {
            if (h.proto != TCP_PROTO)
                snprintf(why, sizeof why, "rank %d speaks bootstrap protocol %u, rank 0 %u", h.rank, h.proto,
                         TCP_PROTO);
            else if (h.world != b->world)
                snprintf(why, sizeof why, "rank %d has world size %d, rank 0 has %d", h.rank, h.world, b->world);
            else if (h.rank < 1 || h.rank >= b->world || b->fd[h.rank] >= 0)
                snprintf(why, sizeof why, "rank %d is out of range or connected twice", h.rank);
            else if (h.hash != hash)
                snprintf(why, sizeof why,
                         "rank %d has config hash 0x%016llx, rank 0 has 0x%016llx (the ranks resolved different "
                         "configurations: compare `tpmoe config` on both)",
                         h.rank, (unsigned long long)h.hash, (unsigned long long)hash);
            if (why[0]) {
                st = tpm_err(TPM_ERR_MISMATCH, "bootstrap handshake: %s", why);
                snprintf(why, sizeof why, "%s", tpm_err_msg());
            }
        }
        if (h.rank >= 1 && h.rank < b->world && b->fd[h.rank] < 0) b->fd[h.rank] = fd;
        else pending[k] = fd + 1; /* answered with the failure below, then closed */
        /* after a mismatch keep accepting until every rank is in (or the deadline), so
         * each learns the reason instead of finding a closed socket */
    }
    ack_msg a;
    memset(&a, 0, sizeof a);
    a.status = st;
    if (st != TPM_OK) snprintf(a.msg, sizeof a.msg, "%s", why); /* the reason, whatever failed since */
    for (int p = 1; p < b->world; p++) {
        if (b->fd[p] >= 0) (void)send_frame(b, b->fd[p], F_ACK, &a, sizeof a, now_ms() + 1000, p);
        if (pending[p]) {
            (void)send_frame(b, pending[p] - 1, F_ACK, &a, sizeof a, now_ms() + 1000, -1);
            close(pending[p] - 1);
        }
    }
    free(pending);
    if (st != TPM_OK) tpm_err(st, "%s", a.msg);
    return st;
}

tpm_status tpm_tcp_boot_init(const tpm_resolved_config *cfg, tpm_tcp_boot **out) {
    TPM_ARG_CHECK(cfg && out, "tpm_tcp_boot_init: null argument");
    *out = NULL;
    TPM_ARG_CHECK(cfg->world_size >= 1 && cfg->world_size <= TPM_TCP_MAX_WORLD && cfg->rank >= 0 &&
                      cfg->rank < cfg->world_size,
                  "tcp bootstrap: rank %d of world %d is out of range (world 1..%d)", (int)cfg->rank,
                  (int)cfg->world_size, TPM_TCP_MAX_WORLD);
    char host[200], port[16];
    TPM_TRY(parse_url(cfg->rendezvous, host, sizeof host, port, sizeof port));
    tpm_tcp_boot *b = calloc(1, sizeof *b);
    int *fd = calloc((size_t)cfg->world_size, sizeof *fd);
    if (!b || !fd) {
        free(b);
        free(fd);
        return tpm_err(TPM_ERR_NO_MEMORY, "tcp bootstrap: out of memory");
    }
    for (int p = 0; p < cfg->world_size; p++) fd[p] = -1;
    b->rank = cfg->rank;
    b->world = cfg->world_size;
    b->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 1;
    b->fd = fd;
    const int64_t deadline = now_ms() + b->timeout_ms;
    tpm_status st = TPM_OK;
    if (b->world == 1) {
        /* nothing to exchange */
    } else if (b->rank == 0) {
        int lfd = -1;
        st = listen_on(b, host, port, &lfd);
        if (st == TPM_OK) {
            st = accept_all(b, lfd, cfg->hash, deadline);
            close(lfd); /* every rank is in (or it failed): nothing else may connect */
        }
    } else {
        st = connect_to(b, host, port, deadline, &b->fd[0]);
        if (st == TPM_OK) {
            hello_msg h = {TCP_PROTO, b->rank, b->world, 0, cfg->hash};
            st = send_frame(b, b->fd[0], F_HELLO, &h, sizeof h, deadline, 0);
        }
        if (st == TPM_OK) {
            ack_msg a;
            st = recv_frame(b, b->fd[0], F_ACK, &a, sizeof a, NULL, deadline, 0);
            if (st == TPM_OK && a.status != TPM_OK) {
                a.msg[sizeof a.msg - 1] = '\0';
                st = tpm_err((tpm_status)a.status, "%s", a.msg);
            }
        }
    }
    if (st != TPM_OK) {
        tpm_tcp_boot_destroy(b);
        return st;
    }
    *out = b;
    return TPM_OK;
}

tpm_status tpm_tcp_boot_allgather(tpm_tcp_boot *b, const void *in, size_t bytes, void *out) {
    TPM_ARG_CHECK(b && (bytes == 0 || (in && out)), "tcp bootstrap allgather: null argument");
    if (b->dead != TPM_OK) return tpm_err(b->dead, "%s", b->why);
    if (bytes == 0) return TPM_OK;
    char *o = (char *)out;
    const int64_t deadline = now_ms() + b->timeout_ms;
    if (in != o + (size_t)b->rank * bytes) memmove(o + (size_t)b->rank * bytes, in, bytes);
    if (b->world == 1) return TPM_OK;
    tpm_status st = TPM_OK;
    if (b->rank == 0) {
        for (int p = 1; p < b->world && st == TPM_OK; p++)
            st = recv_frame(b, b->fd[p], F_GATHER, o + (size_t)p * bytes, (int64_t)bytes, NULL, deadline, p);
        for (int p = 1; p < b->world && st == TPM_OK; p++)
            st = send_frame(b, b->fd[p], F_RESULT, o, (size_t)b->world * bytes, deadline, p);
    } else {
        st = send_frame(b, b->fd[0], F_GATHER, o + (size_t)b->rank * bytes, bytes, deadline, 0);
        if (st == TPM_OK)
            st = recv_frame(b, b->fd[0], F_RESULT, o, (int64_t)((size_t)b->world * bytes), NULL, deadline, 0);
    }
    return st == TPM_OK ? TPM_OK : die(b, st);
}

tpm_status tpm_tcp_boot_barrier(tpm_tcp_boot *b) {
    TPM_ARG_CHECK(b, "tcp bootstrap barrier: null argument");
    char one = 1, *all = calloc((size_t)b->world, 1);
    if (!all) return tpm_err(TPM_ERR_NO_MEMORY, "tcp bootstrap barrier: out of memory");
    tpm_status st = tpm_tcp_boot_allgather(b, &one, 1, all);
    free(all);
    return st;
}

void tpm_tcp_boot_abort(tpm_tcp_boot *b, const char *msg) {
    if (!b || b->dead != TPM_OK) return;
    tpm_err(TPM_ERR_PEER, "rank %d: %s", b->rank, msg ? msg : "aborted");
    (void)die(b, TPM_ERR_PEER);
}

void tpm_tcp_boot_destroy(tpm_tcp_boot *b) {
    if (!b) return;
    for (int p = 0; p < b->world; p++)
        if (b->fd[p] >= 0) close(b->fd[p]);
    free(b->fd);
    free(b);
}

int tpm_rendezvous_is_tcp(const char *rendezvous) { return rendezvous && !strncmp(rendezvous, "tcp://", 6); }
