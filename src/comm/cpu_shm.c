/*
 * cpu_shm.c - the process transport of the CPU communicator: rendezvous over
 * a Unix stream socket and one POSIX shared-memory arena (tpm_comm_init).
 *
 * Rendezvous directory <dir> (cfg.rendezvous / TPMOE_RENDEZVOUS): rank 0
 * creates it with mode 0700 if missing; if it exists it must be a directory
 * (not a symlink) owned by this user with no group/other access, on every
 * rank, else the init fails naming the problem.
 *
 * Handshake (everything bounded by cfg.timeout_ms):
 *  1. rank 0 creates the arena: shm_open("/tpmoe-<pid>-<random>", O_CREAT |
 *     O_EXCL, 0600), ftruncate, mmap, formats the header; listens on
 *     <dir>/sock (the communicator) or <dir>/boot (the bootstrap of
 *     cpu_boot.c, so a CUDA comm's bootstrap and a CPU comm can share one
 *     directory; the same checks apply).
 *  2. every other rank connects (retrying until rank 0 listens) and sends a
 *     hello {magic, protocol version, rank, world, dtype, codec, config
 *     hash, pid}. Rank 0 checks each field against its own; a mismatch or a
 *     duplicate rank is answered with a message naming the field and both
 *     values (the peer fails with TPM_ERR_MISMATCH, and so does rank 0,
 *     after telling the peers already accepted).
 *  3. with all W-1 peers accepted, rank 0 records their pids in the header
 *     and sends each the shm name; each peer maps it, checks the header and
 *     acks; rank 0 then shm_unlinks the name and the socket (nothing is left
 *     in the file system once init returns) and sends a final go / fail.
 */
#include "cpu_comm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SHM_MSG_LEN 320

typedef struct shm_hello {
    uint64_t magic;
    uint32_t proto;
    int32_t rank, world, dtype, codec, pid;
    uint64_t hash;
} shm_hello;

typedef struct shm_reply {
    uint64_t magic;
    int32_t status; /* tpm_status */
    int32_t pad;
    uint64_t arena_bytes;
    char shm_name[64];
    char msg[SHM_MSG_LEN];
} shm_reply;

typedef struct shm_ctx {
    struct tpm_comm *c;
    uint64_t deadline; /* tpm_now_ns() limit */
    char dir[256];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
} shm_ctx;

/* MARK: small I/O helpers */
static int ms_left(const shm_ctx *x) {
    uint64_t now = tpm_now_ns();
    if (now >= x->deadline) return 0;
    uint64_t ms = (x->deadline - now) / 1000000u + 1;
    return ms > 1000000 ? 1000000 : (int)ms;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Send or receive exactly n bytes before the deadline. */
static tpm_status io_full(const shm_ctx *x, int fd, void *buf, size_t n, int sending,
                          const char *what) {
    uint8_t *p = (uint8_t *)buf;
    while (n) {
        struct pollfd pfd = {fd, (short)(sending ? POLLOUT : POLLIN), 0};
        int left = ms_left(x);
        if (left == 0)
            return tpm_err(TPM_ERR_TIMEOUT, "rank %d: rendezvous timed out (%d ms) while %s",
                           x->c->rank, x->c->cfg.timeout_ms, what);
        int r = poll(&pfd, 1, left);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return tpm_err(TPM_ERR_SYSTEM, "rank %d: poll while %s: %s", x->c->rank, what,
                           strerror(errno));
        if (r == 0) continue;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k < 0)
            return tpm_err(TPM_ERR_PEER, "rank %d: socket error while %s: %s", x->c->rank, what,
                           strerror(errno));
        if (k == 0)
            return tpm_err(TPM_ERR_PEER, "rank %d: the peer closed the socket while %s", x->c->rank,
                           what);
        p += k;
        n -= (size_t)k;
    }
    return TPM_OK;
}

static void reply_init(shm_reply *r, tpm_status st, const char *msg) {
    memset(r, 0, sizeof *r);
    r->magic = TPM_CPU_MAGIC;
    r->status = (int32_t)st;
    if (msg) snprintf(r->msg, sizeof r->msg, "%s", msg);
}

/* MARK: rendezvous directory */
static tpm_status check_dir(const shm_ctx *x, int create) {
    struct stat sb;
    if (lstat(x->dir, &sb) != 0) {
        if (errno == ENOENT && create) {
            if (mkdir(x->dir, 0700) == 0 || errno == EEXIST) return check_dir(x, 0);
            /* mkdir failed (e.g. a missing parent): a real error for rank 0 */
            return tpm_err(TPM_ERR_SYSTEM, "rank %d: cannot create rendezvous directory '%s': %s",
                           x->c->rank, x->dir, strerror(errno));
        }
        /* a peer that finds no directory yet retries until its timeout */
        return tpm_err(errno == ENOENT ? TPM_ERR_TIMEOUT : TPM_ERR_SYSTEM,
                       "rank %d: rendezvous directory '%s': %s", x->c->rank, x->dir,
                       strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode))
        return tpm_err(TPM_ERR_CONFIG, "rendezvous path '%s' is not a directory (or is a symlink)",
                       x->dir);
    if (sb.st_uid != geteuid())
        return tpm_err(TPM_ERR_CONFIG,
                       "rendezvous directory '%s' is owned by uid %u, not by this user (%u)",
                       x->dir, (unsigned)sb.st_uid, (unsigned)geteuid());
    if (sb.st_mode & 077)
        return tpm_err(
            TPM_ERR_CONFIG,
            "rendezvous directory '%s' has mode %04o: it must not be group/other accessible "
            "(chmod 700 it or use a fresh mkdtemp directory)",
            x->dir, (unsigned)(sb.st_mode & 07777));
    return TPM_OK;
}

/* MARK: rank 0 */
static tpm_status create_arena(struct tpm_comm *c, char *name, size_t name_len, cpu_hdr **hdr,
                               size_t *bytes) {
    size_t region, off, total;
    tpm_cpu_arena_layout(c->world, c->cfg.buffer_bytes, &region, &off, &total);
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            rnd = tpm_now_ns() ^ ((uint64_t)getpid() << 32);
        snprintf(name, name_len, "/tpmoe-%d-%016llx", (int)getpid(), (unsigned long long)rnd);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return tpm_err(TPM_ERR_SYSTEM, "rank 0: shm_open(%s): %s", name, strerror(errno));
    if (ftruncate(fd, (off_t)total) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(name);
        return tpm_err(TPM_ERR_SYSTEM, "rank 0: sizing the %zu-byte shared arena: %s", total,
                       strerror(e));
    }
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (mem == MAP_FAILED) {
        shm_unlink(name);
        return tpm_err(TPM_ERR_SYSTEM, "rank 0: mapping the %zu-byte shared arena: %s", total,
                       strerror(e));
    }
    tpm_cpu_arena_format((cpu_hdr *)mem, c->world, region, off, total);
    ((cpu_hdr *)mem)->pid[0] = (int32_t)getpid();
    *hdr = (cpu_hdr *)mem;
    *bytes = total;
    return TPM_OK;
}

/* Compare a peer's hello with rank 0's view; on mismatch write the message. */
static tpm_status check_hello(const struct tpm_comm *c, const shm_hello *h, const int *seen,
                              char *msg, size_t len) {
    const tpm_resolved_config *k = &c->cfg;
    if (h->magic != TPM_CPU_MAGIC) {
        snprintf(msg, len, "handshake: a connection without the tpmoe magic (got 0x%016llx)",
                 (unsigned long long)h->magic);
        return TPM_ERR_MISMATCH;
    }
    if (h->proto != TPM_CPU_PROTO_VERSION) {
        snprintf(msg, len, "handshake: rank %d speaks protocol version %u, rank 0 speaks %u",
                 h->rank, h->proto, TPM_CPU_PROTO_VERSION);
        return TPM_ERR_MISMATCH;
    }
    if (h->world != c->world) {
        snprintf(msg, len, "handshake: rank %d has world size %d, rank 0 has world size %d",
                 h->rank, h->world, c->world);
        return TPM_ERR_MISMATCH;
    }
    if (h->rank < 1 || h->rank >= c->world) {
        snprintf(msg, len, "handshake: a peer claims rank %d, outside 1..%d", h->rank,
                 c->world - 1);
        return TPM_ERR_MISMATCH;
    }
    if (seen[h->rank]) {
        snprintf(msg, len, "handshake: duplicate rank %d (pids %d and %d)", h->rank, seen[h->rank],
                 h->pid);
        return TPM_ERR_MISMATCH;
    }
    if (h->dtype != (int32_t)k->dtype) {
        snprintf(msg, len, "handshake: rank %d has dtype %s, rank 0 has dtype %s", h->rank,
                 tpm_dtype_name((tpm_dtype)h->dtype), tpm_dtype_name(k->dtype));
        return TPM_ERR_MISMATCH;
    }
    if (h->codec != (int32_t)k->codec) {
        snprintf(msg, len, "handshake: rank %d has codec %s, rank 0 has codec %s", h->rank,
                 tpm_codec_name((tpm_codec)h->codec), tpm_codec_name(k->codec));
        return TPM_ERR_MISMATCH;
    }
    if (h->hash != k->hash) {
        snprintf(msg, len,
                 "handshake: rank %d has config hash 0x%016llx, rank 0 has 0x%016llx (the ranks "
                 "resolved "
                 "different configurations: compare their TPMOE_* environments)",
                 h->rank, (unsigned long long)h->hash, (unsigned long long)k->hash);
        return TPM_ERR_MISMATCH;
    }
    return TPM_OK;
}

static tpm_status rank0_init(shm_ctx *x) {
    struct tpm_comm *c = x->c;
    const int W = c->world;
    int fds[TPM_CPU_MAX_WORLD], seen[TPM_CPU_MAX_WORLD] = {0};
    for (int i = 0; i < W; i++)
        fds[i] = -1;
    int lfd = -1, unlinked = 0;
    char name[64] = "";
    cpu_hdr *h = NULL;
    size_t bytes = 0;
    char msg[SHM_MSG_LEN] = "";
    tpm_status st = check_dir(x, 1);
    if (st != TPM_OK) return st;
    TPM_TRY(create_arena(c, name, sizeof name, &h, &bytes));

    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        st = tpm_err(TPM_ERR_SYSTEM, "rank 0: socket: %s", strerror(errno));
        goto fail;
    }
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, x->sock, strlen(x->sock) + 1);
    unlink(x->sock); /* a stale socket of an earlier run in our private directory */
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(lfd, TPM_CPU_MAX_WORLD) != 0) {
        st = tpm_err(TPM_ERR_SYSTEM, "rank 0: listening on %s: %s", x->sock, strerror(errno));
        goto fail;
    }

    /* Accept W-1 peers; each hello is checked as it arrives. */
    shm_hello hello[TPM_CPU_MAX_WORLD];
    int accepted = 0;
    while (accepted < W - 1) {
        struct pollfd pfd = {lfd, POLLIN, 0};
        int left = ms_left(x);
        if (left == 0) {
            char missing[64] = "";
            for (int r = 1; r < W; r++)
                if (!seen[r])
                    snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %d", r);
            st = tpm_err(TPM_ERR_TIMEOUT,
                         "rank 0: rendezvous timed out after %d ms: ranks%s never connected to %s",
                         c->cfg.timeout_ms, missing, x->sock);
            goto fail;
        }
        int r = poll(&pfd, 1, left);
        if (r <= 0) continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        shm_hello hl;
        if (io_full(x, fd, &hl, sizeof hl, 0, "reading a peer's hello") != TPM_OK) {
            close(fd); /* a broken connection is not a rank; keep accepting */
            continue;
        }
        tpm_status bad = check_hello(c, &hl, seen, msg, sizeof msg);
        if (bad != TPM_OK) {
            shm_reply rep;
            reply_init(&rep, bad, msg);
            (void)io_full(x, fd, &rep, sizeof rep, 1, "rejecting a peer");
            close(fd);
            st = tpm_err(bad, "%s", msg);
            goto fail;
        }
        seen[hl.rank] = hl.pid > 0 ? hl.pid : 1;
        hello[hl.rank] = hl;
        fds[hl.rank] = fd;
        accepted++;
    }

    /* Everyone is here: publish pids, hand out the arena, collect the acks. */
    for (int r = 1; r < W; r++)
        h->pid[r] = hello[r].pid;
    for (int r = 1; r < W; r++) {
        shm_reply rep;
        reply_init(&rep, TPM_OK, NULL);
        rep.arena_bytes = bytes;
        snprintf(rep.shm_name, sizeof rep.shm_name, "%s", name);
        TPM_TRY_GOTO(io_full(x, fds[r], &rep, sizeof rep, 1, "sending the arena name"));
    }
    for (int r = 1; r < W; r++) {
        shm_reply ack;
        TPM_TRY_GOTO(
            io_full(x, fds[r], &ack, sizeof ack, 0, "waiting for a peer to map the arena"));
        if (ack.magic != TPM_CPU_MAGIC || ack.status != TPM_OK) {
            snprintf(msg, sizeof msg, "rank %d could not map the arena: %.200s", r, ack.msg);
            st = tpm_err(TPM_ERR_PEER, "%s", msg);
            goto fail;
        }
    }
    shm_unlink(name);
    unlink(x->sock);
    unlinked = 1;
    for (int r = 1; r < W; r++) {
        shm_reply go;
        reply_init(&go, TPM_OK, NULL);
        TPM_TRY_GOTO(io_full(x, fds[r], &go, sizeof go, 1, "sending go"));
        close(fds[r]);
        fds[r] = -1;
    }
    close(lfd);
    st = tpm_cpu_attach(c, h, 1);
    if (st != TPM_OK) munmap(h, bytes);
    return st;

fail:
    /* Tell the peers already accepted why the communicator is not formed. */
    for (int r = 1; r < W; r++) {
        if (fds[r] < 0) continue;
        shm_reply rep;
        reply_init(&rep, st == TPM_ERR_MISMATCH ? TPM_ERR_MISMATCH : TPM_ERR_PEER, tpm_err_msg());
        int keep_errno = errno;
        char saved[TPM_ERRMSG_LEN];
        snprintf(saved, sizeof saved, "%s", tpm_err_msg());
        (void)io_full(x, fds[r], &rep, sizeof rep, 1, "sending the failure");
        tpm_err(st, "%s", saved);
        errno = keep_errno;
        close(fds[r]);
    }
    if (lfd >= 0) close(lfd);
    if (!unlinked) {
        unlink(x->sock);
        shm_unlink(name);
    }
    if (h) munmap(h, bytes);
    return st;
}

/* MARK: ranks 1..W-1 */
static tpm_status peer_connect(shm_ctx *x, int *out_fd) {
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, x->sock, strlen(x->sock) + 1);
    int nap = 1;
    for (;;) {
        tpm_status st = check_dir(x, 0);
        if (st == TPM_OK) {
            int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
                return tpm_err(TPM_ERR_SYSTEM, "rank %d: socket: %s", x->c->rank, strerror(errno));
            if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
                *out_fd = fd;
                return TPM_OK;
            }
            int e = errno;
            close(fd);
            if (e != ENOENT && e != ECONNREFUSED && e != EAGAIN)
                return tpm_err(TPM_ERR_SYSTEM, "rank %d: connect(%s): %s", x->c->rank, x->sock,
                               strerror(e));
        } else if (st != TPM_ERR_TIMEOUT) {
            return st; /* the directory exists but is unsafe */
        }
        if (ms_left(x) == 0)
            return tpm_err(TPM_ERR_TIMEOUT,
                           "rank %d: rendezvous timed out after %d ms: no rank 0 listening at %s",
                           x->c->rank, x->c->cfg.timeout_ms, x->sock);
        sleep_ms(nap);
        if (nap < 20) nap *= 2;
    }
}

static tpm_status peer_init(shm_ctx *x) {
    struct tpm_comm *c = x->c;
    int fd = -1;
    cpu_hdr *h = NULL;
    size_t bytes = 0;
    tpm_status st;
    TPM_TRY(peer_connect(x, &fd));
    shm_hello hl;
    memset(&hl, 0, sizeof hl);
    hl.magic = TPM_CPU_MAGIC;
    hl.proto = TPM_CPU_PROTO_VERSION;
    hl.rank = c->rank;
    hl.world = c->world;
    hl.dtype = (int32_t)c->cfg.dtype;
    hl.codec = (int32_t)c->cfg.codec;
    hl.pid = (int32_t)getpid();
    hl.hash = c->cfg.hash;
    TPM_TRY_GOTO(io_full(x, fd, &hl, sizeof hl, 1, "sending the hello"));
    shm_reply rep;
    TPM_TRY_GOTO(io_full(x, fd, &rep, sizeof rep, 0, "waiting for rank 0's answer"));
    rep.msg[sizeof rep.msg - 1] = '\0';
    rep.shm_name[sizeof rep.shm_name - 1] = '\0';
    if (rep.magic != TPM_CPU_MAGIC) {
        st = tpm_err(TPM_ERR_MISMATCH, "rank %d: rank 0's answer lacks the tpmoe magic", c->rank);
        goto fail;
    }
    if (rep.status != TPM_OK) {
        st = tpm_err((tpm_status)rep.status, "rank %d rejected by rank 0: %s", c->rank, rep.msg);
        goto fail;
    }

    /* Map the arena and check it, then ack (with a message on failure). */
    shm_reply ack;
    reply_init(&ack, TPM_OK, NULL);
    int sfd = shm_open(rep.shm_name, O_RDWR, 0);
    if (sfd >= 0) {
        void *mem = mmap(NULL, (size_t)rep.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
        close(sfd);
        if (mem != MAP_FAILED) {
            h = (cpu_hdr *)mem;
            bytes = (size_t)rep.arena_bytes;
        }
    }
    if (!h) {
        st = tpm_err(TPM_ERR_SYSTEM, "rank %d: mapping the shared arena %s: %s", c->rank,
                     rep.shm_name, strerror(errno));
    } else if (h->magic != TPM_CPU_MAGIC || h->world != (uint32_t)c->world ||
               h->total_bytes != bytes) {
        st = tpm_err(TPM_ERR_MISMATCH, "rank %d: the shared arena %s has an unexpected header",
                     c->rank, rep.shm_name);
    } else {
        st = TPM_OK;
    }
    if (st != TPM_OK) reply_init(&ack, st, tpm_err_msg());
    tpm_status io = io_full(x, fd, &ack, sizeof ack, 1, "acknowledging the arena");
    if (st != TPM_OK) goto fail;
    TPM_TRY_GOTO(io);
    shm_reply go;
    TPM_TRY_GOTO(io_full(x, fd, &go, sizeof go, 0, "waiting for rank 0's go"));
    if (go.status != TPM_OK) {
        go.msg[sizeof go.msg - 1] = '\0';
        st = tpm_err((tpm_status)go.status, "rank %d: rank 0 gave up: %s", c->rank, go.msg);
        goto fail;
    }
    close(fd);
    st = tpm_cpu_attach(c, h, 1);
    if (st != TPM_OK) munmap(h, bytes);
    return st;

fail:
    if (fd >= 0) close(fd);
    if (h) munmap(h, bytes);
    return st;
}

/* MARK: entry points */
tpm_status tpm_cpu_shm_init(struct tpm_comm *c, const char *sock_name) {
    TPM_ASSERT(c && c->world >= 2 && c->world <= TPM_CPU_MAX_WORLD && c->rank >= 0 &&
               c->rank < c->world && sock_name && sock_name[0] && !strchr(sock_name, '/'));
    shm_ctx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    int tmo = c->cfg.timeout_ms > 0 ? c->cfg.timeout_ms : 1;
    x.deadline = tpm_now_ns() + (uint64_t)tmo * 1000000ull;
    if (!c->cfg.rendezvous[0])
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "rank %d of %d: a multi-process communicator needs a rendezvous directory "
                       "(cfg.rendezvous or TPMOE_RENDEZVOUS)",
                       c->rank, c->world);
    size_t dl = strlen(c->cfg.rendezvous), nl = strlen(sock_name);
    while (dl > 1 && c->cfg.rendezvous[dl - 1] == '/')
        dl--;
    if (dl >= sizeof x.dir || dl + 1 + nl + 1 > sizeof x.sock)
        return tpm_err(TPM_ERR_INVALID_ARG,
                       "rendezvous path '%s' is too long for a Unix socket (max %zu)",
                       c->cfg.rendezvous, sizeof x.sock - 2 - nl);
    memcpy(x.dir, c->cfg.rendezvous, dl);
    x.dir[dl] = '\0';
    memcpy(x.sock, x.dir, dl);
    x.sock[dl] = '/';
    memcpy(x.sock + dl + 1, sock_name, nl + 1);
    return c->rank == 0 ? rank0_init(&x) : peer_init(&x);
}

tpm_status tpm_cpu_comm_init(struct tpm_comm *c) {
    TPM_ASSERT(c && c->world >= 1 && c->world <= TPM_CPU_MAX_WORLD && c->rank >= 0 &&
               c->rank < c->world);
    if (c->world == 1) {
        struct tpm_comm *one[1] = {c};
        return tpm_cpu_comm_init_all(one, 1);
    }
    return tpm_cpu_shm_init(c, "sock");
}
