/*
 * cpu_comm.h - internals of the CPU communicator (not installed).
 *
 * One algorithm (cpu_comm.c) runs over one shared arena, whatever the
 * transport: threads of one process share a private anonymous mapping
 * (tpm_cpu_comm_init_all), processes share a POSIX shared-memory object that
 * rank 0 creates and hands out over a Unix-socket rendezvous (cpu_shm.c).
 *
 * Arena layout (all offsets multiples of 64 bytes; the header is the same
 * for both transports):
 *
 *   cpu_hdr                      magic, world, pids, abort flag + message,
 *                                one counter per rank (own cache line),
 *                                two call descriptors per rank (seq parity:
 *                                {seq, count, dtype, codec, algo, op})
 *   region[0] .. region[W-1]     region_bytes each, two halves (parity of
 *                                the chunk sequence number)
 *
 * The protocol and its buffer-reuse argument are described at the top of
 * cpu_comm.c and in docs/allreduce.md.
 */
#ifndef TPM_CPU_COMM_H
#define TPM_CPU_COMM_H

#include "comm_internal.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPM_CPU_MAX_WORLD 8
#define TPM_CPU_MAGIC 0x3152414d4f4d5054ull /* "TPMOMAR1" little endian */
/* 2: descriptors carry the operation (all-reduce / all-gather / barrier). */
#define TPM_CPU_PROTO_VERSION 2u
#define TPM_CPU_LINE 64
/* Smallest region per rank: each half must hold 2*W slots of one block of
 * fp32 (2 * 8 * 128 bytes). Smaller buffer_bytes are raised to this. */
#define TPM_CPU_MIN_REGION 4096
#define TPM_CPU_ABORT_MSG_LEN 384
/* buffer_bytes of a bootstrap (cpu_boot.c): its arena is W * 64 KiB whatever
 * cfg.buffer_bytes (the CUDA peer buffer) says; larger all-gathers chunk. */
#define TPM_CPU_BOOT_BUFFER (64 * 1024)

/* The operation of a call, in its descriptor: ranks in different operations
 * fail with TPM_ERR_MISMATCH like ranks with different counts. */
enum { TPM_CPU_OP_ALLREDUCE = 0, TPM_CPU_OP_ALLGATHER = 1, TPM_CPU_OP_BARRIER = 2 };

_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
               "the shared-memory protocol needs lock-free 32-bit atomics");

/* One rank's counter: the number of protocol steps it has published. Only
 * grows (mod 2^32). waiters counts sleepers in futex_wait, so a publish
 * makes a futex_wake syscall only when someone sleeps. */
typedef struct cpu_counter {
    _Alignas(TPM_CPU_LINE) _Atomic uint32_t value;
    _Atomic uint32_t waiters;
} cpu_counter;
_Static_assert(sizeof(cpu_counter) == TPM_CPU_LINE, "one counter per cache line");

/* What a rank is doing in call number seq; written before the rank's first
 * publish of the call, read by the others after they observe it. */
typedef struct cpu_desc {
    uint64_t seq;
    uint64_t count;                 /* elements (all-reduce), bytes per rank (all-gather) */
    int32_t dtype, codec, algo, op; /* op: TPM_CPU_OP_*; all-gather/barrier: 0 0 0 */
} cpu_desc;

typedef struct cpu_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t world;
    uint64_t region_bytes; /* per rank (two halves) */
    uint64_t data_offset;  /* of region 0 from the arena start */
    uint64_t total_bytes;
    int32_t pid[TPM_CPU_MAX_WORLD]; /* 0 for the threads transport */
    _Atomic int32_t refs;           /* threads transport: live comms */
    _Atomic int32_t abort_rank;     /* 0: none, else rank+1 of the first aborter */
    _Atomic int32_t abort_msg_ready;
    char abort_msg[TPM_CPU_ABORT_MSG_LEN];
    cpu_counter counter[TPM_CPU_MAX_WORLD];
    _Alignas(TPM_CPU_LINE) cpu_desc desc[TPM_CPU_MAX_WORLD][2];
} cpu_hdr;

/* Sizes of an arena for world ranks with buffer_bytes per rank. */
void tpm_cpu_arena_layout(int world, int64_t buffer_bytes, size_t *region_bytes,
                          size_t *data_offset, size_t *total_bytes);
/* Write a fresh header into zeroed memory. */
void tpm_cpu_arena_format(cpu_hdr *h, int world, size_t region_bytes, size_t data_offset,
                          size_t total_bytes);
/* Attach comm c (cfg, rank, world set) to a formatted arena. is_process: the
 * arena is a shared-memory mapping (unmapped at destroy, peers' pids are
 * checked while waiting); else it is the threads transport's private
 * mapping, released by the last comm (hdr->refs). */
tpm_status tpm_cpu_attach(struct tpm_comm *c, cpu_hdr *h, int is_process);
/* The process transport (cpu_shm.c): rendezvous on the socket
 * <cfg.rendezvous>/<sock_name> and attach c (cfg, rank, world set, world >=
 * 2). tpm_cpu_comm_init uses "sock", the bootstrap "boot", so both can be
 * formed over the same directory. */
tpm_status tpm_cpu_shm_init(struct tpm_comm *c, const char *sock_name);
/* One barrier on a CPU comm (a single publish + wait; TPM_CPU_OP_BARRIER). */
tpm_status tpm_cpu_comm_barrier(struct tpm_comm *c);
/* Mark the communicator failed with msg (first failure wins) and wake every
 * waiter: the other ranks' pending and later calls return TPM_ERR_PEER
 * naming this rank and msg. */
void tpm_cpu_comm_abort(struct tpm_comm *c, const char *msg);

/* Elements per chunk for a call: the chunking every rank applies, exposed
 * so tests can build an independent reference. half_bytes = region/2. */
size_t tpm_cpu_chunk_elems(tpm_algo algo, tpm_codec codec, tpm_dtype dt, int world,
                           size_t half_bytes);
/* Bytes of one two-shot slot holding sblk blocks (64-byte aligned). */
size_t tpm_cpu_slot_stride(tpm_codec codec, tpm_dtype dt, size_t sblk);

#ifdef __cplusplus
}
#endif
#endif /* TPM_CPU_COMM_H */
