/*
 * cuda_comm.h - internal interface of the CUDA all-reduce backend (not
 * installed). Plain C: included by the host code in cuda_comm.cu, by the
 * kernel files (cuda_oneshot.cu, cuda_twoshot.cu), by the GPU tests and by
 * the benchmark.
 *
 * Memory of one rank (one cudaMalloc, its peers map it through peer access
 * or CUDA IPC):
 *
 *   [ctl]   4 KB   local control words: [0] launch sequence, [1] CTA exit
 *                  counter, [2] the two-shots' work counter (the flag-free
 *                  kernel's units, the warp-specialized one's columns; zero
 *                  between launches), [64 ..] the one-shot's per-CTA epochs
 *   [flags] 1 MB   two-shot ready flags [kind rs/ag][parity][src][column]
 *   [ll]    2 parities x W slots x ll_slot bytes: one-shot packets, every
 *                  word pre-set to the all-ones sentinel (see cuda_oneshot.cu)
 *   [ts]    2 parities x (W rs slots + W ag slots) x ts_slot bytes:
 *                  the flag two-shots' reduce-scatter and all-gather
 *                  payloads (they leave their payload behind)
 *   [tl]    the same shape with TPM_CUDA_TL_SLOT(ts_slot) bytes per slot:
 *                  the flag-free two-shot's payloads (cuda_twoshot_ll.cu,
 *                  set 19, and set 10's codec calls, tpm_cuda_twoshot_set),
 *                  all-ones between launches (its readers put the sentinel
 *                  back), so the two kinds of kernel never share a slot and
 *                  may follow each other in any order
 *
 * Every launch takes epoch = ctl.seq + 1 from device memory and the last CTA
 * to finish stores it back (so CUDA-graph replays advance it); parity =
 * epoch & 1 selects the half of every region the launch uses. A rank can be
 * at most one launch ahead of a peer (it needs the peer's data of launch e
 * to finish e), so two halves never race.
 */
#ifndef TPM_CUDA_COMM_H
#define TPM_CUDA_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "tpmoe.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPM_CUDA_MAX_WORLD 8
/* The kernel set whose two-shot is cuda_twoshot_ll.cu's (flag-free). */
#define TPM_CUDA_LL_SET 19
/* Bytes per slot of the flag-free two-shot's region [tl] (half a flag
 * slot: its codec payloads are at most 36 / 64 of the bf16 bytes). */
#define TPM_CUDA_TL_SLOT(ts_slot) ((((size_t)(ts_slot) / 2) + 32767) & ~(size_t)32767)
/* Two-shot: elements per column (one CTA step) and columns per segment. */
#define TPM_CUDA_TS_COL_ELEMS 8192
#define TPM_CUDA_TS_MAX_COLS 8192
#define TPM_CUDA_CTL_BYTES 4096u
/* CTAs of every collective launch where ranks share a GPU (TPMOE_CUDA_SHARE_GPU,
 * cuda_comm.cu says why so few) */
#define TPM_CUDA_SHARE_GRID 2
#define TPM_CUDA_FLAG_BYTES                                                                        \
    ((size_t)2 * 2 * TPM_CUDA_MAX_WORLD * TPM_CUDA_TS_MAX_COLS * sizeof(uint32_t))

/* Error word layout (host-mapped, written by a kernel that gave up). */
enum {
    TPM_CUDA_ERR_CODE = 0,  /* 0 ok, else a tpm_status (TPM_ERR_TIMEOUT) */
    TPM_CUDA_ERR_STAGE = 1, /* 1 one-shot wait, 2 two-shot rs wait, 3 ag wait */
    TPM_CUDA_ERR_PEER = 2,  /* the rank waited for */
    TPM_CUDA_ERR_WORDS = 4
};

/* Everything a kernel needs, passed by value. Pointers in ll/ts/flags are
 * rank p's buffers as mapped in this rank's address space. */
typedef struct tpm_cuda_ar_args {
    const void *in;
    void *out;
    size_t count;  /* elements in this launch */
    int dtype;     /* tpm_dtype */
    int codec;     /* tpm_codec (two-shot) */
    int rank, world;
    int grid, block;
    uint8_t *ll[TPM_CUDA_MAX_WORLD];
    uint8_t *ts[TPM_CUDA_MAX_WORLD];
    uint32_t *flags[TPM_CUDA_MAX_WORLD];
    size_t ll_slot; /* bytes per source slot of the one-shot region */
    size_t ts_slot; /* bytes per source slot of the two-shot region */
    uint32_t *ctl;  /* this rank's control words (device memory) */
    uint32_t *err;  /* host-mapped error words (device pointer) */
    uint64_t timeout_ns;
    int variant;    /* kernel set 0..19 (cuda_sync.h), the resolved cuda_kernels */
    int no_pdl;     /* ranks share a GPU (TPMOE_CUDA_SHARE_GPU): launches without PDL */
    /* registered buffers (set 8): every rank's input and output of this
     * call as mapped here (tpm_cuda_comm_register_io) */
    const void *peer_in[TPM_CUDA_MAX_WORLD];
    void *peer_out[TPM_CUDA_MAX_WORLD];
} tpm_cuda_ar_args;

/* Launchers (cuda_oneshot.cu / cuda_twoshot.cu). stream is a cudaStream_t.
 * They only enqueue; a launch error comes back as TPM_ERR_CUDA. */
int tpm_cuda_oneshot_launch(const tpm_cuda_ar_args *a, void *stream);
int tpm_cuda_twoshot_launch(const tpm_cuda_ar_args *a, void *stream);
/* Largest element count one launch can take (buffer slot limits). */
size_t tpm_cuda_oneshot_max_count(const tpm_cuda_ar_args *a);
size_t tpm_cuda_twoshot_max_count(const tpm_cuda_ar_args *a);
/* The kernel set a two-shot call of count elements (all launches of it)
 * runs under a->variant: set 10 (the default) sends the codecs for which
 * the flag-free kernel measured faster to set 19 (cuda_twoshot.cu has the
 * rule and the measurements); every other set is itself. */
int tpm_cuda_twoshot_set(const tpm_cuda_ar_args *a, size_t count);
/* Set 8, world 2, exact: the two-shot over registered buffers (a->peer_in /
 * peer_out): each rank reads its peer's input half directly and writes the
 * sums into both outputs; one launch for any count. */
int tpm_cuda_twoshot_reg_launch(const tpm_cuda_ar_args *a, void *stream);

/* TPM_OK, or the error a kernel of this communicator recorded (a bounded
 * wait ran out: TPM_ERR_TIMEOUT). Host-only read of mapped memory. */
struct tpm_comm;
tpm_status tpm_cuda_comm_poll(struct tpm_comm *c);

/* Switch a CUDA communicator's kernel set (0..19, cuda_sync.h) for the
 * benchmark's --variants; only where every rank's stream is idle. Returns 0,
 * or -1 for a communicator that is not CUDA or a variant out of range. */
int tpm_cuda_comm_set_variant(struct tpm_comm *c, int variant);
/* Register this call's buffers of every rank, for kernel set 8: ins[r] /
 * outs[r] are rank r's input and output (bytes each), all addressable from
 * this rank's GPU (one process driving all GPUs with peer access, i.e.
 * tpm_comm_init_all). A later call whose in/out are this rank's registered
 * pair and fit in bytes runs the registered two-shot (world 2, exact);
 * anything else runs set 5. NULL ins clears. Returns 0, or -1 for a
 * communicator that is not CUDA or not proven peer-to-peer. Measurement
 * support for the benchmark; one process per GPU would need the buffers'
 * IPC handles (not implemented). */
int tpm_cuda_comm_register_io(struct tpm_comm *c, const void *const *ins, void *const *outs, size_t bytes);

/* Peer-bandwidth probe for the benchmark floor: copy bytes from src to dst
 * (either may be a peer's memory) with a 16-byte-vector kernel. */
int tpm_cuda_copy_launch(void *dst, const void *src, size_t bytes, int grid, void *stream);
/* Both directions of one link at once from one GPU: even CTAs copy
 * push_src -> push_dst, odd CTAs pull_src -> pull_dst, bytes each. */
int tpm_cuda_copy2_launch(void *push_dst, const void *push_src, void *pull_dst,
                          const void *pull_src, size_t bytes, int grid, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* TPM_CUDA_COMM_H */
