/*
 * cpu_comm.c - the CPU all-reduce: one-shot and two-shot over a shared arena,
 * for ranks that are threads (tpm_comm_init_all, this file) or processes
 * (tpm_comm_init, the transport in cpu_shm.c). Same code for both.
 *
 * MARK: algorithms (per chunk of at most tpm_cpu_chunk_elems elements)
 *  one-shot: each rank copies its input chunk into its own region, publishes,
 *    and every rank sums all W regions in fp32 in rank order 0..W-1 and
 *    rounds once to the dtype. Exact only.
 *  two-shot: the chunk is nblk blocks of 32 values; owner j gets segment j of
 *    sblk = ceil(nblk/W) blocks. (A) every rank r converts segment j != r to
 *    the codec domain and quantizes it into owner j's receive slot r (codec
 *    NONE: the raw dtype values); (B) the owner sums slot 0..W-1 in fp32 in
 *    rank order (its own term exact, the others dequantized), re-quantizes
 *    the sum (NONE: rounds it to the dtype) and writes it into gather slot j
 *    of every rank, itself included; (C) every rank dequantizes its gather
 *    slots into its output. Every rank decodes the same bytes, so outputs are
 *    bitwise identical for every codec; with NONE one-shot and two-shot give
 *    the same bits (same fp32 sums, one rounding).
 *  all-gather (tpm_cpu_comm_allgather, bytes per rank; the bootstrap of
 *    cpu_boot.c): a one-shot chunk without the sum: each rank copies bytes
 *    [off, off+n) of its contribution (n <= half) into its own region half,
 *    publishes, waits for all, and copies region i's n bytes to
 *    out + i*bytes + off for every i. One publish per chunk.
 *  barrier (tpm_cpu_comm_barrier): one publish and a wait for all; no data.
 *
 * MARK: synchronisation
 *  Each rank owns one 32-bit counter (its own cache line) that only grows:
 *  one-shot publishes one step per chunk, two-shot two (after A, after B).
 *  A publish is a store after the rank's data writes (seq_cst, so also a
 *  release); a waiter loads peers' counters (acquire) until each is >= the
 *  target (wrap-safe: (int32_t)(v - target) >= 0). Waits spin briefly, then
 *  sched_yield, then futex_wait (shared futexes for processes) with a short
 *  timeout so they re-check the abort flag, the peers' pids and the deadline
 *  (cfg.timeout_ms -> TPM_ERR_TIMEOUT naming the rank and phase). A writer
 *  calls futex_wake only when its counter's waiter count is nonzero (Dekker
 *  pairing: waiters++ then re-load the counter / store then load waiters,
 *  all seq_cst, so no wake-up is lost; the futex timeout bounds it anyway).
 *
 *  Buffer reuse: region halves alternate with the parity of the global chunk
 *  number k. Every chunk contains a wait for all ranks' first publish of that
 *  chunk, and a rank publishes in chunk k only after it finished every read
 *  of chunk k-1. So when rank r starts chunk k it has seen all ranks publish
 *  in chunk k-1, i.e. all ranks finished chunk k-2, the last user of this
 *  half. Inside a two-shot chunk, receive slots are written in A and read in
 *  B after the wait on step A; gather slots are written in B and read in C
 *  after the wait on step B; neither is written again before chunk k+2.
 *
 *  A barrier publishes a step but reads no half, so it only adds waits.
 *
 *  Per-call check: before its first publish of call n a rank writes
 *  {seq, count, dtype, codec, algo, op} into its descriptor n%2 (op: all-
 *  reduce, all-gather or barrier; count: elements, or bytes per rank); after
 *  the first wait every rank compares all descriptors with its own
 *  (TPM_ERR_MISMATCH, before any output is written). Descriptor n%2 is
 *  rewritten only in call n+2, which no rank can reach before every rank
 *  finished call n. All-reduce, all-gather and barrier calls share the one
 *  call sequence and the one counter per rank, in any order.
 *
 *  Failure: a rank whose wait fails (timeout, dead peer, mismatch) sets the
 *  shared abort flag with its message and wakes every counter; waiting ranks
 *  then fail fast with TPM_ERR_PEER. An aborted communicator stays failed.
 */
#include "cpu_comm.h"

#include "codec/codec.h"
#include "numeric.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Polls before yielding, yields before sleeping, futex sleep per round. */
#define CPU_SPIN_POLLS 64
#define CPU_YIELD_POLLS 64
#define CPU_FUTEX_SLEEP_NS 2000000L
/* fp32 staging tile of the one-shot sum (elements). */
#define CPU_TILE 1024

typedef struct cpu_rank {
    cpu_hdr *hdr;
    uint8_t *data;
    int is_process;
    int rank, world;
    int timeout_ms;
    size_t region_bytes, half_bytes;
    uint32_t step;      /* value of my counter */
    uint64_t call_seq;  /* calls made */
    uint64_t chunk_seq; /* chunks done (selects the region half) */
    float *dom, *acc;   /* scratch, scratch_n floats each */
    size_t scratch_n;
} cpu_rank;

/* MARK: layout */
static size_t round_up(size_t x, size_t a) {
    return (x + a - 1) / a * a;
}

void tpm_cpu_arena_layout(int world, int64_t buffer_bytes, size_t *region_bytes,
                          size_t *data_offset, size_t *total_bytes) {
    size_t r = buffer_bytes > 0 ? (size_t)buffer_bytes : 0;
    if (r < TPM_CPU_MIN_REGION) r = TPM_CPU_MIN_REGION;
    r = round_up(r, 2 * TPM_CPU_LINE);
    size_t off = round_up(sizeof(cpu_hdr), 4096);
    *region_bytes = r;
    *data_offset = off;
    *total_bytes = off + (size_t)world * r;
}

void tpm_cpu_arena_format(cpu_hdr *h, int world, size_t region_bytes, size_t data_offset,
                          size_t total_bytes) {
    memset(h, 0, sizeof *h);
    h->magic = TPM_CPU_MAGIC;
    h->version = TPM_CPU_PROTO_VERSION;
    h->world = (uint32_t)world;
    h->region_bytes = region_bytes;
    h->data_offset = data_offset;
    h->total_bytes = total_bytes;
}

size_t tpm_cpu_slot_stride(tpm_codec codec, tpm_dtype dt, size_t sblk) {
    size_t b = codec == TPM_CODEC_NONE ? sblk * 32 * tpm_dtype_size(dt)
                                       : tpm_codec_wire_bytes(codec, sblk);
    return round_up(b, TPM_CPU_LINE);
}

size_t tpm_cpu_chunk_elems(tpm_algo algo, tpm_codec codec, tpm_dtype dt, int world,
                           size_t half_bytes) {
    size_t es = tpm_dtype_size(dt);
    if (algo == TPM_ALGO_ONESHOT) return half_bytes / es / 32 * 32;
    /* Largest sblk with 2*W slots fitting in a half (binary search). */
    size_t lo = 0, hi = half_bytes / 32 + 1;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (2 * (size_t)world * tpm_cpu_slot_stride(codec, dt, mid) <= half_bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo * 32 * (size_t)world;
}

/* MARK: regions */
static uint8_t *region(const cpu_rank *R, int rank, int parity) {
    return R->data + (size_t)rank * R->region_bytes + (size_t)parity * R->half_bytes;
}

/* Two-shot: receive slot `from` and gather slot `seg` inside rank's half. */
static uint8_t *recv_slot(const cpu_rank *R, int rank, int parity, int from, size_t stride) {
    return region(R, rank, parity) + (size_t)from * stride;
}
static uint8_t *gather_slot(const cpu_rank *R, int rank, int parity, int seg, size_t stride) {
    return region(R, rank, parity) + (size_t)(R->world + seg) * stride;
}

/* MARK: waiting */
static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
    return syscall(SYS_futex, (uint32_t *)(uintptr_t)addr, op, val, ts, NULL, 0);
}

static int reached(uint32_t v, uint32_t target) {
    return (int32_t)(v - target) >= 0;
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Shared futexes for processes; private ones (cheaper) for threads. A wake
 * must use the same kind as the wait. */
static void wake_counter(const cpu_rank *R, cpu_counter *ctr) {
    futex(&ctr->value, R->is_process ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}

static void publish(cpu_rank *R, uint32_t v) {
    cpu_counter *ctr = &R->hdr->counter[R->rank];
    atomic_store_explicit(&ctr->value, v, memory_order_seq_cst);
    if (atomic_load_explicit(&ctr->waiters, memory_order_seq_cst) != 0) wake_counter(R, ctr);
    R->step = v;
}

/* A peer process is gone: kill() says so, or it is a zombie nobody reaped. */
static int peer_dead(int pid) {
    if (pid <= 0) return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static tpm_status abort_error(const cpu_rank *R) {
    const cpu_hdr *h = R->hdr;
    int who = atomic_load_explicit(&h->abort_rank, memory_order_acquire) - 1;
    /* the aborting rank writes its message right after winning abort_rank: give it up to
     * ~10 ms (it may be descheduled in between; a rank that died there leaves none) */
    int ready = atomic_load_explicit(&h->abort_msg_ready, memory_order_acquire);
    for (int i = 0; !ready && i < 10000; i++) {
        if (i < 1000) cpu_relax();
        else sched_yield();
        ready = atomic_load_explicit(&h->abort_msg_ready, memory_order_acquire);
    }
    const char *msg = ready ? h->abort_msg : "(no message)";
    return tpm_err(TPM_ERR_PEER, "rank %d: the communicator was aborted by rank %d: %s", R->rank,
                   who, msg);
}

/* Record this rank's failure in the shared header (first one wins) and wake
 * every sleeper so the others fail fast. */
static void set_abort(cpu_rank *R, const char *msg) {
    cpu_hdr *h = R->hdr;
    int32_t expected = 0;
    if (atomic_compare_exchange_strong(&h->abort_rank, &expected, R->rank + 1)) {
        snprintf(h->abort_msg, sizeof h->abort_msg, "%s", msg);
        atomic_store_explicit(&h->abort_msg_ready, 1, memory_order_release);
    }
    for (int i = 0; i < R->world; i++)
        wake_counter(R, &h->counter[i]);
}

/* Wait until every rank's counter reached target. */
static tpm_status wait_all(cpu_rank *R, uint32_t target, const char *phase) {
    cpu_hdr *h = R->hdr;
    uint64_t start = 0;
    for (int i = 0; i < R->world; i++) {
        cpu_counter *ctr = &h->counter[i];
        for (unsigned polls = 0;; polls++) {
            uint32_t v = atomic_load_explicit(&ctr->value, memory_order_acquire);
            if (reached(v, target)) break;
            if (atomic_load_explicit(&h->abort_rank, memory_order_acquire)) return abort_error(R);
            if (polls < CPU_SPIN_POLLS) {
                cpu_relax();
                continue;
            }
            if (polls < CPU_SPIN_POLLS + CPU_YIELD_POLLS) {
                sched_yield();
                continue;
            }
            uint64_t now = tpm_now_ns();
            if (!start) start = now;
            if (now - start >= (uint64_t)R->timeout_ms * 1000000ull)
                return tpm_err(
                    TPM_ERR_TIMEOUT,
                    "rank %d: timed out after %d ms waiting for rank %d in %s of call %llu "
                    "(counter %u, want %u; TPMOE_TIMEOUT_MS sets the limit)",
                    R->rank, R->timeout_ms, i, phase, (unsigned long long)R->call_seq, v, target);
            if (R->is_process && i != R->rank && peer_dead(h->pid[i])) {
                /* v was read before the check: a peer that published, finished the call
                 * and exited in between is done, not dead mid-call. Its publish precedes
                 * its exit, so a fresh read after seeing it dead is final. */
                if (reached(atomic_load_explicit(&ctr->value, memory_order_acquire), target)) break;
                return tpm_err(TPM_ERR_PEER,
                               "rank %d: rank %d (pid %d) died during %s of call %llu", R->rank, i,
                               (int)h->pid[i], phase, (unsigned long long)R->call_seq);
            }
            atomic_fetch_add_explicit(&ctr->waiters, 1, memory_order_seq_cst);
            v = atomic_load_explicit(&ctr->value, memory_order_seq_cst);
            if (!reached(v, target) &&
                !atomic_load_explicit(&h->abort_rank, memory_order_seq_cst)) {
                struct timespec ts = {0, CPU_FUTEX_SLEEP_NS};
                futex(&ctr->value, R->is_process ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, v, &ts);
            }
            atomic_fetch_sub_explicit(&ctr->waiters, 1, memory_order_seq_cst);
        }
    }
    return TPM_OK;
}

/* MARK: per-call descriptor check */
static const char *op_name(int32_t op) {
    switch (op) {
    case TPM_CPU_OP_ALLREDUCE:
        return "an all-reduce";
    case TPM_CPU_OP_ALLGATHER:
        return "an all-gather";
    case TPM_CPU_OP_BARRIER:
        return "a barrier";
    default:
        return "an unknown operation";
    }
}

static const char *count_name(int32_t op) {
    return op == TPM_CPU_OP_ALLREDUCE ? "count" : "bytes per rank";
}

/* Start call number call_seq+1: write my descriptor before my first publish. */
static void begin_call(cpu_rank *R, int32_t op, uint64_t count, int32_t dt, int32_t codec,
                       int32_t algo) {
    R->call_seq++;
    cpu_desc *d = &R->hdr->desc[R->rank][R->call_seq & 1];
    d->seq = R->call_seq;
    d->count = count;
    d->dtype = dt;
    d->codec = codec;
    d->algo = algo;
    d->op = op;
}

static tpm_status check_descriptors(const cpu_rank *R) {
    const cpu_desc *me = &R->hdr->desc[R->rank][R->call_seq & 1];
    for (int i = 0; i < R->world; i++) {
        if (i == R->rank) continue;
        const cpu_desc *d = &R->hdr->desc[i][R->call_seq & 1];
        if (d->seq != me->seq)
            return tpm_err(
                TPM_ERR_MISMATCH, "rank %d is in %s call %llu but rank %d is in call %llu", R->rank,
                op_name(me->op), (unsigned long long)me->seq, i, (unsigned long long)d->seq);
        if (d->op != me->op)
            return tpm_err(TPM_ERR_MISMATCH, "call %llu: rank %d is in %s, rank %d is in %s",
                           (unsigned long long)me->seq, R->rank, op_name(me->op), i,
                           op_name(d->op));
        if (d->count != me->count)
            return tpm_err(TPM_ERR_MISMATCH, "call %llu: rank %d has %s %llu, rank %d has %s %llu",
                           (unsigned long long)me->seq, R->rank, count_name(me->op),
                           (unsigned long long)me->count, i, count_name(d->op),
                           (unsigned long long)d->count);
        if (d->dtype != me->dtype)
            return tpm_err(
                TPM_ERR_MISMATCH, "call %llu: rank %d has dtype %s, rank %d has dtype %s",
                (unsigned long long)me->seq, R->rank, tpm_dtype_name((tpm_dtype)me->dtype), i,
                tpm_dtype_name((tpm_dtype)d->dtype));
        if (d->codec != me->codec)
            return tpm_err(
                TPM_ERR_MISMATCH, "call %llu: rank %d uses codec %s, rank %d uses codec %s",
                (unsigned long long)me->seq, R->rank, tpm_codec_name((tpm_codec)me->codec), i,
                tpm_codec_name((tpm_codec)d->codec));
        if (d->algo != me->algo)
            return tpm_err(TPM_ERR_MISMATCH,
                           "call %llu: rank %d uses algo %s, rank %d uses algo %s",
                           (unsigned long long)me->seq, R->rank, tpm_algo_name((tpm_algo)me->algo),
                           i, tpm_algo_name((tpm_algo)d->algo));
    }
    return TPM_OK;
}

/* MARK: one-shot */
static void load_tile(const void *src, tpm_dtype dt, size_t n, float *dst) {
    if (dt == TPM_DTYPE_FP32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t k = 0; k < n; k++)
        dst[k] = tpm_load_f32(src, (int)dt, k);
}

static void store_tile(const float *src, size_t n, void *dst, tpm_dtype dt) {
    if (dt == TPM_DTYPE_FP32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t k = 0; k < n; k++)
        tpm_store_f32(dst, (int)dt, k, src[k]);
}

static tpm_status oneshot_chunk(cpu_rank *R, const uint8_t *in, uint8_t *out, size_t n,
                                tpm_dtype dt, int first) {
    size_t es = tpm_dtype_size(dt);
    int p = (int)(R->chunk_seq & 1);
    memcpy(region(R, R->rank, p), in, n * es);
    uint32_t s1 = R->step + 1;
    publish(R, s1);
    TPM_TRY(wait_all(R, s1, "the one-shot exchange"));
    if (first) TPM_TRY(check_descriptors(R));
    float *acc = R->acc, *tmp = R->dom;
    for (size_t e0 = 0; e0 < n; e0 += CPU_TILE) {
        size_t m = n - e0 < CPU_TILE ? n - e0 : CPU_TILE;
        load_tile(region(R, 0, p) + e0 * es, dt, m, acc);
        for (int i = 1; i < R->world; i++) {
            load_tile(region(R, i, p) + e0 * es, dt, m, tmp);
            for (size_t k = 0; k < m; k++)
                acc[k] += tmp[k];
        }
        store_tile(acc, m, out + e0 * es, dt);
    }
    return TPM_OK;
}

/* MARK: two-shot */
typedef struct seg_range {
    size_t e0, n, nblk; /* first element, elements, blocks */
} seg_range;

static seg_range segment(size_t n, size_t sblk, int j) {
    seg_range s;
    size_t a = (size_t)j * sblk * 32, b = a + sblk * 32;
    if (a > n) a = n;
    if (b > n) b = n;
    s.e0 = a;
    s.n = b - a;
    s.nblk = tpm_codec_nblocks(s.n);
    return s;
}

static tpm_status twoshot_chunk(cpu_rank *R, const uint8_t *in, uint8_t *out, size_t n,
                                tpm_dtype dt, tpm_codec codec, int first) {
    const int W = R->world, me = R->rank;
    const size_t es = tpm_dtype_size(dt);
    const int p = (int)(R->chunk_seq & 1);
    const size_t sblk = (tpm_codec_nblocks(n) + (size_t)W - 1) / (size_t)W;
    const size_t stride = tpm_cpu_slot_stride(codec, dt, sblk);

    /* (A) reduce-scatter: my segment j goes to owner j's receive slot `me`. */
    for (int t = 1; t < W; t++) {
        int j = (me + t) % W;
        seg_range s = segment(n, sblk, j);
        if (!s.n) continue;
        uint8_t *dst = recv_slot(R, j, p, me, stride);
        if (codec == TPM_CODEC_NONE) {
            memcpy(dst, in + s.e0 * es, s.n * es);
        } else {
            tpm_codec_to_domain(codec, in + s.e0 * es, dt, s.n, R->dom);
            tpm_codec_quantize(codec, R->dom, s.nblk, dst);
        }
    }
    uint32_t s1 = R->step + 1;
    publish(R, s1);
    TPM_TRY(wait_all(R, s1, "the two-shot reduce-scatter"));
    if (first) TPM_TRY(check_descriptors(R));

    /* (B) reduce my segment in rank order, re-encode, write to every rank. */
    seg_range s = segment(n, sblk, me);
    if (s.n) {
        uint8_t *mine = gather_slot(R, me, p, me, stride);
        size_t nv = codec == TPM_CODEC_NONE ? s.n : s.nblk * 32;
        for (int i = 0; i < W; i++) {
            float *term = i == 0 ? R->acc : R->dom;
            if (codec == TPM_CODEC_NONE)
                load_tile(i == me ? in + s.e0 * es : recv_slot(R, me, p, i, stride), dt, s.n, term);
            else if (i == me)
                tpm_codec_to_domain(codec, in + s.e0 * es, dt, s.n, term);
            else
                tpm_codec_dequantize(codec, recv_slot(R, me, p, i, stride), s.nblk, term);
            if (i > 0)
                for (size_t k = 0; k < nv; k++)
                    R->acc[k] += term[k];
        }
        size_t bytes;
        if (codec == TPM_CODEC_NONE) {
            store_tile(R->acc, s.n, mine, dt);
            bytes = s.n * es;
        } else {
            tpm_codec_quantize(codec, R->acc, s.nblk, mine);
            bytes = tpm_codec_wire_bytes(codec, s.nblk);
        }
        for (int t = 1; t < W; t++)
            memcpy(gather_slot(R, (me + t) % W, p, me, stride), mine, bytes);
    }
    uint32_t s2 = R->step + 1;
    publish(R, s2);
    TPM_TRY(wait_all(R, s2, "the two-shot all-gather"));

    /* (C) decode every gather slot into the output. */
    for (int j = 0; j < W; j++) {
        seg_range g = segment(n, sblk, j);
        if (!g.n) continue;
        const uint8_t *src = gather_slot(R, me, p, j, stride);
        if (codec == TPM_CODEC_NONE) {
            memcpy(out + g.e0 * es, src, g.n * es);
        } else {
            tpm_codec_dequantize(codec, src, g.nblk, R->dom);
            tpm_codec_from_domain(codec, R->dom, g.n, out + g.e0 * es, dt);
        }
    }
    return TPM_OK;
}

/* MARK: the backend op */
static tpm_status ensure_scratch(cpu_rank *R, size_t n) {
    if (n <= R->scratch_n) return TPM_OK;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    if (!a || !b) {
        free(a);
        free(b);
        return tpm_err(TPM_ERR_NO_MEMORY, "cpu all-reduce: cannot allocate %zu bytes of scratch",
                       2 * n * sizeof(float));
    }
    free(R->dom);
    free(R->acc);
    R->dom = a;
    R->acc = b;
    R->scratch_n = n;
    return TPM_OK;
}

static tpm_status cpu_allreduce(struct tpm_comm *c, const void *in, void *out, size_t count,
                                tpm_dtype dt, tpm_codec codec, tpm_algo algo, void *stream) {
    (void)stream;
    cpu_rank *R = (cpu_rank *)c->impl;
    if (atomic_load_explicit(&R->hdr->abort_rank, memory_order_acquire)) return abort_error(R);
    if (algo != TPM_ALGO_ONESHOT && algo != TPM_ALGO_TWOSHOT)
        return tpm_err(TPM_ERR_INTERNAL, "cpu all-reduce: algo %s reached the backend",
                       tpm_algo_name(algo));
    if (algo == TPM_ALGO_ONESHOT && codec != TPM_CODEC_NONE)
        return tpm_err(TPM_ERR_INTERNAL,
                       "cpu all-reduce: one-shot with codec %s reached the backend",
                       tpm_codec_name(codec));
    size_t chunk = tpm_cpu_chunk_elems(algo, codec, dt, R->world, R->half_bytes);
    if (chunk == 0)
        return tpm_err(TPM_ERR_INTERNAL, "cpu all-reduce: buffer too small for one block");
    size_t scratch = algo == TPM_ALGO_ONESHOT ? CPU_TILE : chunk / (size_t)R->world;
    if (scratch < CPU_TILE) scratch = CPU_TILE;
    tpm_status st = ensure_scratch(R, scratch);
    if (st != TPM_OK) {
        set_abort(R, tpm_err_msg()); /* the others would wait for us in vain */
        return st;
    }

    begin_call(R, TPM_CPU_OP_ALLREDUCE, count, dt, codec, algo);

    const size_t es = tpm_dtype_size(dt);
    const uint8_t *src = (const uint8_t *)in;
    uint8_t *dst = (uint8_t *)out;
    for (size_t off = 0; off < count; off += chunk) {
        size_t n = count - off < chunk ? count - off : chunk;
        st = algo == TPM_ALGO_ONESHOT
                 ? oneshot_chunk(R, src + off * es, dst + off * es, n, dt, off == 0)
                 : twoshot_chunk(R, src + off * es, dst + off * es, n, dt, codec, off == 0);
        if (st != TPM_OK) break;
        R->chunk_seq++;
    }
    /* Any failure aborts the communicator (the first message wins), so ranks
     * waiting on us or on a rank that waits on us fail fast too. */
    if (st != TPM_OK) set_abort(R, tpm_err_msg());
    return st;
}

static void cpu_destroy(struct tpm_comm *c) {
    cpu_rank *R = (cpu_rank *)c->impl;
    if (!R) return;
    cpu_hdr *h = R->hdr;
    size_t bytes = (size_t)h->total_bytes;
    if (R->is_process || atomic_fetch_sub(&h->refs, 1) == 1) munmap(h, bytes);
    free(R->dom);
    free(R->acc);
    free(R);
    c->impl = NULL;
}

static const tpm_comm_ops cpu_threads_ops = {"cpu-threads", cpu_allreduce, cpu_destroy, NULL};
static const tpm_comm_ops cpu_shm_ops = {"cpu-shm", cpu_allreduce, cpu_destroy, NULL};

tpm_status tpm_cpu_attach(struct tpm_comm *c, cpu_hdr *h, int is_process) {
    cpu_rank *R = calloc(1, sizeof *R);
    if (!R) return tpm_err(TPM_ERR_NO_MEMORY, "cpu comm: out of memory");
    R->hdr = h;
    R->data = (uint8_t *)h + h->data_offset;
    R->is_process = is_process;
    R->rank = c->rank;
    R->world = c->world;
    R->timeout_ms = c->cfg.timeout_ms > 0 ? c->cfg.timeout_ms : 1;
    R->region_bytes = (size_t)h->region_bytes;
    R->half_bytes = R->region_bytes / 2;
    R->step = atomic_load(&h->counter[c->rank].value);
    c->impl = R;
    c->ops = is_process ? &cpu_shm_ops : &cpu_threads_ops;
    return TPM_OK;
}

/* MARK: all-gather and barrier */
static tpm_status cpu_check_comm(const struct tpm_comm *c, const char *fn) {
    TPM_ARG_CHECK(c, "%s: comm is NULL", fn);
    TPM_ARG_CHECK(c->impl && (c->ops == &cpu_threads_ops || c->ops == &cpu_shm_ops),
                  "%s: not a CPU communicator (backend %s)", fn, c->ops ? c->ops->name : "none");
    return TPM_OK;
}

/* One all-gather chunk: bytes [off, off+n) of every rank's contribution.
 * Same shape as a one-shot chunk: copy into my half, publish, wait for all,
 * read all halves; one publish per chunk, so the buffer-reuse argument of the
 * top comment applies unchanged. */
static tpm_status allgather_chunk(cpu_rank *R, const uint8_t *in, uint8_t *out, size_t bytes,
                                  size_t off, size_t n, int first) {
    int p = (int)(R->chunk_seq & 1);
    memcpy(region(R, R->rank, p), in + off, n);
    uint32_t s1 = R->step + 1;
    publish(R, s1);
    TPM_TRY(wait_all(R, s1, "the all-gather"));
    if (first) TPM_TRY(check_descriptors(R));
    for (int i = 0; i < R->world; i++)
        memcpy(out + (size_t)i * bytes + off, region(R, i, p), n);
    return TPM_OK;
}

tpm_status tpm_cpu_comm_allgather(struct tpm_comm *c, const void *in, size_t bytes, void *out) {
    TPM_TRY(cpu_check_comm(c, "tpm_cpu_comm_allgather"));
    cpu_rank *R = (cpu_rank *)c->impl;
    TPM_ARG_CHECK(bytes <= (size_t)PTRDIFF_MAX / (size_t)R->world,
                  "tpm_cpu_comm_allgather: %zu bytes times world %d is too large", bytes, R->world);
    if (bytes == 0) return TPM_OK; /* like count 0: no communication, every rank must agree */
    TPM_ARG_CHECK(in && out, "tpm_cpu_comm_allgather: %s is NULL", !in ? "in" : "out");
    uintptr_t i0 = (uintptr_t)in, o0 = (uintptr_t)out, total = (uintptr_t)bytes * R->world;
    TPM_ARG_CHECK(i0 + bytes <= o0 || o0 + total <= i0 || i0 == o0 + (uintptr_t)R->rank * bytes,
                  "tpm_cpu_comm_allgather: in overlaps out other than as out + rank * bytes "
                  "(the in-place form)");
    if (atomic_load_explicit(&R->hdr->abort_rank, memory_order_acquire)) return abort_error(R);
    begin_call(R, TPM_CPU_OP_ALLGATHER, bytes, 0, 0, 0);
    size_t chunk = R->half_bytes;
    tpm_status st = TPM_OK;
    for (size_t off = 0; off < bytes && st == TPM_OK; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        st = allgather_chunk(R, (const uint8_t *)in, (uint8_t *)out, bytes, off, n, off == 0);
        if (st == TPM_OK) R->chunk_seq++;
    }
    if (st != TPM_OK) set_abort(R, tpm_err_msg());
    return st;
}

tpm_status tpm_cpu_comm_barrier(struct tpm_comm *c) {
    TPM_TRY(cpu_check_comm(c, "tpm_cpu_comm_barrier"));
    cpu_rank *R = (cpu_rank *)c->impl;
    if (atomic_load_explicit(&R->hdr->abort_rank, memory_order_acquire)) return abort_error(R);
    begin_call(R, TPM_CPU_OP_BARRIER, 0, 0, 0, 0);
    uint32_t s1 = R->step + 1;
    publish(R, s1);
    tpm_status st = wait_all(R, s1, "the barrier");
    if (st == TPM_OK) st = check_descriptors(R);
    if (st != TPM_OK) set_abort(R, tpm_err_msg());
    return st;
}

void tpm_cpu_comm_abort(struct tpm_comm *c, const char *msg) {
    if (cpu_check_comm(c, "tpm_cpu_comm_abort") != TPM_OK) return;
    set_abort((cpu_rank *)c->impl, msg && *msg ? msg : "(no message)");
}

/* MARK: threads transport */
tpm_status tpm_cpu_comm_init_all(struct tpm_comm **comms, int n) {
    TPM_ASSERT(comms && n >= 1 && n <= TPM_CPU_MAX_WORLD);
    size_t region, off, total;
    tpm_cpu_arena_layout(n, comms[0]->cfg.buffer_bytes, &region, &off, &total);
    void *mem = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return tpm_err(TPM_ERR_NO_MEMORY, "cpu comm: cannot map a %zu-byte arena for %d ranks: %s",
                       total, n, strerror(errno));
    cpu_hdr *h = (cpu_hdr *)mem;
    tpm_cpu_arena_format(h, n, region, off, total);
    atomic_store(&h->refs, n);
    for (int i = 0; i < n; i++) {
        tpm_status st = tpm_cpu_attach(comms[i], h, 0);
        if (st != TPM_OK) {
            for (int k = 0; k < i; k++) {
                cpu_rank *R = (cpu_rank *)comms[k]->impl;
                free(R);
                comms[k]->impl = NULL;
            }
            munmap(mem, total);
            return st;
        }
    }
    return TPM_OK;
}
