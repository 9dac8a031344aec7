/*
 * moe_cuda_gemm_sm90a.cu - tpmoe's own grouped GEMM for the prefill experts on
 * Hopper tensor cores (wgmma + TMA), one launch for every touched expert,
 * the fused shared slot included, with the swiglu-oai activation fused into
 * the gate_up epilogue. Compiled for sm_90a only (wgmma and setmaxnreg are
 * arch-specific); the layer uses it when the device is 9.0 and the shapes fit
 * (tpm_moe_wgmma_ok), else the cuBLAS paths of moe_cuda_prefill.cu.
 *
 * Problem: the permuted rows of expert e are rows [o_e, o_e + n_e) of the A
 * operand (xp for gate_up, act_bf for down; bf16, K contiguous). For every
 * expert, C_e = A_e . W_e^T with W_e [N x K] (K contiguous) from w13 or w2.
 *   gate_up (ACT): a tile's 256 weight rows are gate rows j0..j0+127 and the
 *     matching up rows Il+j0..; every thread holds gate and up of the same
 *     (row, column) in its accumulators, applies bias + activation in fp32 and
 *     writes act_bf[row][j0 + c] (no h13 round trip, no activation launch);
 *   down: 256 consecutive rows of w2; rows_bf[row][n0 + c] = bf16(acc).
 *
 * Tiles: 128 permuted rows x 256 weight rows, K in steps of 64 (one 128-byte
 * swizzle row of bf16). Tokens are the wgmma M side (m64 per consumer
 * warpgroup), weights the N side (n256), both operands K-major in shared
 * memory, fp32 accumulation in registers (128 per thread). A tile's rows past
 * its expert's n_e belong to the next expert (or are TMA zero fill past the
 * buffer) and are computed but never stored; a consumer warpgroup whose 64
 * rows are all past n_e skips its wgmmas.
 *
 * Tile order: experts from the highest index (the shared slot, the largest)
 * down; within an expert, weight block by weight block and, inside it, its
 * row tiles, so the CTAs that share a weight block run side by side and read
 * it from HBM once (L2 serves the others); an expert with more than `band`
 * row tiles (the shared slot from 2048 tokens) goes band by band (band_tile),
 * so its A rows stay in L2 while its weight blocks stream past. The tile table
 * is a prefix sum of row tiles over the experts, built on the device
 * (k_wg_tiles) from the routing's offsets: no host round trip, so the path is
 * graph-capturable. CTAs past the device total exit.
 *
 * Forms (tuning.prefill_cluster; the default by size, round 12): below 4096
 * tokens the persistent CTAs of k_wg_gemm_p (3), from 4096 its persistent
 * 2-CTA clusters (2), both taking their tiles from a counter (see the comment
 * at k_wg_gemm_p); k_wg_gemm (one CTA per tile, 0; clusters, 1) stays
 * selectable. At 8192 tokens the layer runs at the board's 700 W cap (~1.5
 * GHz) and its consumer warps wait for their stages ~20% of the time (r81,
 * r83); prefetching the weights into L2 ahead of the loads made it slower
 * (r84), as did running an expert's partial last chunk with the wgmma sides
 * swapped (r82) and the whole kernel with them swapped (round 21, r152: bit-equal, 3-17% slower).
 *
 * Clusters (CL, optional): without them the kernel is L2-bound (round
 * 12: lts throughput 91% of peak at 8192 tokens, SM clock 1.46 GHz), since
 * every CTA pulls 48 KB per stage through L2. With CL, two CTAs of a cluster
 * take row tiles 2p and 2p+1 of the same expert and weight block; each
 * producer loads its own A tile and ONE half of the weight tile, multicast
 * into both CTAs (32 KB per CTA per stage from L2). Only full pairs run
 * clustered; an expert's odd last row tile runs in a second, unclustered
 * launch right after (half-empty pairs cost 14% of the SM time in round 16).
 * Measured (rounds 14-17, docs/moe_cuda_rounds.md): the clustered pairs themselves
 * run at 76% L2 throughput instead of 91%, but the tail launch re-reads the
 * weight blocks of half the experts from HBM (1.6 ms at 8192 tokens), so the
 * whole is slower than one CTA per tile at every batch size (tuning.
 * prefill_cluster = 1 selects it). A remote arrive with cluster-scope release
 * made them 35% slower still (round 14). The persistent clusters (2) keep the
 * odd tiles in the same launch as pairs sharing the A tile instead.
 *
 * Early shared items (tuning.prefill_early; the persistent forms, the fused slot plan, no EP, round
 * 20; the clusters since round 22, by default since round 44): the fused shared slot is the first
 * expert of the item list and its rows, offset (T k) and tile count are known from T alone, so its
 * gate_up items need nothing from the routing. The gather, k_wg_tiles and the gate_up launch are
 * then chained by programmatic dependent launch: each of the first two calls
 * griddepcontrol.launch_dependents at its start and griddepcontrol.wait before it reads a routing
 * output, and the routing kernels trigger at their start, so the gate_up CTAs start while the
 * routing runs. Its takers hand out items [0, early_items) (the shared slot's, A rows from a
 * per-call map over x: the gather skips those rows; CL: its pairs and odd item in the clustered
 * order, the odd item's A halves from a 64-row map over x) without waiting; the first thread to
 * need anything past them (the taker before it decodes the item total, CL: rank 1's producer before
 * it decodes its first routed item, each consumer before its first routed item) runs
 * griddepcontrol.wait, which returns once k_wg_tiles, and through the chain the gather and the
 * routing, have completed and their writes are visible. Since k_wg_tiles may zero the other
 * counters while this launch runs, it takes its items from a counter of its own, which its last CTA
 * to finish taking (a second counter, after a fence) zeroes for the next launch. PDL starts a
 * dependent only once every CTA of its primary has started, so no CTA waiting here holds an SM that
 * a grid it waits for still needs. After the wait the grids' outputs (the offsets, the tile table;
 * in the gather the permutation) are read with ld.global.cg, never through the non-coherent
 * read-only path (__ldg): that path may keep lines from before the writes of grids that ran while
 * this one was already running (r149: with __ldg, outputs of the early chain differed from the
 * plain chain's on the mini presets). The same items and arithmetic: the same bits as the plain
 * chain.
 *
 * The chained down launch (tuning.prefill_down_early; the persistent forms, round 23; by default
 * the persistent CTAs, and since round 44 the clusters up to 8192 tokens too): without it the down
 * launch starts once every gate_up CTA has exited, so the SMs whose CTAs ran out of items idle
 * through gate_up's last tiles. With it the down launch is a programmatic dependent of gate_up,
 * which triggers at its start; its CTAs (one per SM, as gate_up's) take the SMs gate_up's CTAs
 * leave. After each tile, each gate_up consumer warpgroup fences its stores (every thread), meets
 * its warpgroup at a named barrier, and one thread adds 1 to the expert's counter (gdone: 2 per
 * tile). Before it loads any rows of expert e, a down producer waits (ld.acquire.gpu, bounded)
 * until the counter reaches 2 x gate_up's weight blocks x e's row tiles, then fence.proxy.async
 * orders its TMA reads after that acquire. The down CTAs run only once a gate_up CTA has exited,
 * and an exiting CTA has waited for the tile table and the routing (early chain included), so down
 * reads them complete. The last down CTA done taking items (a counter after the E1 per-expert ones)
 * zeroes all of them for the next call. Same items and arithmetic: the same bits.
 *
 * Synchronisation (one CTA = 3 warpgroups): warpgroup 0's first thread is the
 * TMA producer, warpgroups 1-2 consume. A 4-stage ring of 48 KB stages (A
 * 16 KB + B 32 KB) with two mbarriers per stage: full[s] (1 arrival with
 * expect_tx of the stage's bytes, completed by the TMA transactions, CL: the
 * other CTA's multicast half included) and empty[s] (one arrival per
 * consumer warp once its wgmmas reading the stage have completed, i.e.
 * wgmma.wait_group 1 after the next stage's commit; CL: the consumer warps of
 * BOTH CTAs, 16, the remote one through mapa + mbarrier.arrive.shared::cluster,
 * since a producer's multicast overwrites the stage in both). Phases
 * alternate, so the parity of use u of a stage is u & 1. CL: a cluster
 * barrier after the barrier init (before any multicast or remote arrive) and
 * one before exit (no remote arrive lands in an exited CTA). The waits are
 * bounded: past 2^26 polls the kernel traps, which the layer reports as a
 * CUDA error, instead of hanging. Results are deterministic and the same with
 * or without clusters: each output element is one accumulator summed in a
 * fixed k order.
 *
 * down's epilogue (round 42): each consumer warpgroup writes its 64 rows' bf16 results, 256
 * columns in two halves of 128, into its own 16 KB staging buffer past the ring (two 64 x 64
 * boxes of rows_bf's tensor map, 128-byte swizzle); a full 64-row block then leaves by two TMA
 * stores (cp.async.bulk.tensor, one bulk group per warpgroup, issued by its first thread after
 * fence.proxy.async.shared::cta and a warpgroup barrier), so the warpgroup goes on while the rows
 * are written. Before the buffer is written again that thread waits for its group's reads
 * (cp.async.bulk.wait_group.read) and the warpgroup meets at its barrier (named barrier 1 + c);
 * before the CTA exits it waits for the writes. A partial block (rows past n_e belong to the next
 * expert) is stored by the threads from the same buffer, 16 bytes per store along a row. Before,
 * each thread stored 4-byte pairs from the accumulator layout (8 rows x 16 bytes per warp
 * instruction): at locked clocks down's stores cost 12-19% of its compute-alone time (r234), and
 * a23d242's TMA stores took 3-10% off down (and added 1.5% to gate_up, so gate_up keeps its
 * direct stores: its counters for the chained down launch need them anyway). gate_up's launches
 * have no staging buffer.
 */
#include "core/cuda_preload.h"
#include "moe_cuda_wgmma.cuh"

#include <string.h>

namespace {

constexpr int BM = 128, ST = 4; /* rows per tile, stages (BK, k per stage: moe_cuda_wgmma.cuh); 256 weight rows */
constexpr int A_BYTES = BM * BK * 2, BH_BYTES = 128 * BK * 2, STAGE_BYTES = A_BYTES + 2 * BH_BYTES;
constexpr int kThreads = 384;
constexpr int EPI_BYTES = 64 * 256; /* down: one consumer warpgroup's staging buffer, 64 rows x 128 bf16 */
constexpr int SMEM_G = ST * STAGE_BYTES + 1024; /* gate_up: the ring + alignment slack (1024-byte swizzle atoms) */
constexpr int SMEM_D = SMEM_G + 2 * EPI_BYTES;  /* down: + the two staging buffers */

struct wg_args {
    const int32_t *offsets; /* [E1 + 1] permuted row offsets (routing) */
    const int32_t *rtp;     /* [E1 + 1] tiles (CL: pairs) before expert E1-1-q (highest first) */
    int tail;               /* 1: the launch after a clustered one: each expert's odd last row tile */
    int E1, nb, K;          /* experts, weight blocks per expert, reduction length */
    int wrows;              /* weight rows per expert in the B map (2 Il or H) */
    int nb_rows, bhalf;     /* rows between weight blocks; offset of the second 128-row half */
    int band;               /* row tiles per band (0: an expert's row tiles are one band) */
    int *ctr;               /* persistent forms: this launch's item counter (zeroed by k_wg_tiles;
                             * early: by the launch itself, at its end) */
    int *ctr_exit;          /* non-null: the early launch (early_items > 0); its CTAs done taking
                             * items (the last one zeroes both counters) */
    int early_items;        /* > 0 (persistent, no clusters, gate_up): items [0, early_items) are the
                             * fused shared slot's, run before griddepcontrol.wait with A from x */
    int early_off, early_n; /* early: the shared slot's first permuted row (T k) and rows (T) */
    int *gdone;             /* non-null (persistent forms, tuning.prefill_down_early): [E1] gate_up
                             * tiles stored per expert, 2 per tile (one per consumer warpgroup),
                             * and [E1] the down CTAs done taking items: gate_up adds, down waits;
                             * down's last CTA zeroes all E1 + 1 for the next call (the early
                             * gate_up launch may run before anything else of the call could) */
    int gu_nb;              /* down with gdone: gate_up's weight blocks per expert */
    uint16_t *out;
    int ldo;
    /* gate_up epilogue */
    const float *b13;
    int Il, act;
    float alpha, limit, beta;
};

#ifdef TPM_WG_DEVICE
/* D[64 x 256] (+)= A[64 x 16] . B[256 x 16]^T, A and B K-major in shared memory (128-byte
 * swizzle, descriptors da / db); scale_d = 0 overwrites D. Operands generated, not typed. */
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
        "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(scale_d));
}

#endif /* TPM_WG_DEVICE */

#ifdef TPM_WG_DEVICE
/* Release stage s: in this CTA, and with clusters in the other one too (its producer's
 * multicast overwrites the stage in both). */
template <bool CL>
__device__ __forceinline__ void release(uint64_t *empty, int s, uint32_t rank, int lane) {
    if (lane == 0) {
        mbar_arrive(&empty[s]);
        if (CL) mbar_arrive_cluster(&empty[s], rank ^ 1u);
    }
}

/* Barrier `id` of one consumer warpgroup (128 threads); ids 1 and 2, one per warpgroup. */
__device__ __forceinline__ void named_bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

/* The register split of down's persistent CTAs (setmaxnreg; 384 threads launch with 168 each):
 * the producer warpgroup gives back down to 56, the two consumer warpgroups take 224, so the
 * staging epilogue and the persistent loop's state stay out of local memory (at 168 ptxas
 * spilled 116 bytes). 128 x 56 + 256 x 224 = 64512 of the SM's 65536. */
__device__ __forceinline__ void regs_producer() { asm volatile("setmaxnreg.dec.sync.aligned.u32 56;" ::: "memory"); }
__device__ __forceinline__ void regs_consumer() { asm volatile("setmaxnreg.inc.sync.aligned.u32 224;" ::: "memory"); }

/* down's staging buffer (EPI_BYTES per consumer warpgroup): 128 bf16 columns of 64 rows as two
 * TMA boxes of 64 columns (8 KB each, the 128-byte swizzle of the output map): the 16-byte piece
 * q of row r (columns 8 q .. 8 q + 7) at box q / 8, byte r * 128 + 16 ((q & 7) ^ (r & 7)). A
 * warp's 4-byte writes (8 rows x the 4 words of one piece) and its 16-byte reads along a row
 * then hit 32 different banks. */
__device__ __forceinline__ int epi_at(int r, int q) { return (q >> 3) * 8192 + r * 128 + (((q & 7) ^ (r & 7)) << 4); }

/* The buffer -> out rows row0 .. row0 + nrow - 1, columns col0 .. col0 + 127, once the
 * warpgroup's writes are in. A full 64-row block (tma): two TMA stores issued by thread 0 of
 * the warpgroup, which leave while the warpgroup goes on (bulk_wait_read before the buffer is
 * written again, bulk_wait before the CTA exits). Else the threads store: thread t the piece
 * t & 15 of rows t / 16 + 8 i, so each row leaves in two full 128-byte lines. */
__device__ __forceinline__ void epi_out(const unsigned char *buf, uint16_t *out, int ldo, const CUtensorMap *to,
                                        int row0, int col0, int nrow, int t, int bar, bool tma) {
    if (tma) {
        tma_store_fence(); /* every thread's generic writes, before the async proxy reads them */
        named_bar(bar);
        if (t == 0) {
            tma_store_2d(to, buf, col0, row0);
            tma_store_2d(to, buf + 8192, col0 + 64, row0);
            bulk_commit();
        }
        return;
    }
    named_bar(bar);
    const int q = t & 15;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int r = (t >> 4) + 8 * i;
        if (r < nrow)
            *reinterpret_cast<uint4 *>(out + (size_t)(row0 + r) * ldo + col0 + 8 * q) =
                *reinterpret_cast<const uint4 *>(buf + epi_at(r, q));
    }
}

/* gate_up's epilogue for a thread's two rows (accumulators d, see consume): bias, activation,
 * bf16 pairs stored at o (row 0) and o + 8 ldo (row 1); nv = the valid rows from row 0. KIND and
 * BIAS are template arguments so the unrolled loop carries no per-value branch on them (round
 * 41, r235: the run-time kind test inside the loop cost gate_up 3-5% at locked clocks). */
template <int KIND, bool BIAS>
__device__ __forceinline__ void act_store(const wg_args &a, const float *d, int nv, const float *bg, uint16_t *o) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        if (8 * h >= nv) continue;
        uint16_t *orow = o + (size_t)(8 * h) * a.ldo;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            float g0 = d[4 * j + 2 * h], g1 = d[4 * j + 2 * h + 1];
            float u0 = d[64 + 4 * j + 2 * h], u1 = d[64 + 4 * j + 2 * h + 1];
            if (BIAS) {
                g0 += bg[8 * j];
                g1 += bg[8 * j + 1];
                u0 += bg[a.Il + 8 * j];
                u1 += bg[a.Il + 8 * j + 1];
            }
            const float a0 = tpm_moe_act(KIND, g0, u0, a.alpha, a.limit, a.beta);
            const float a1 = tpm_moe_act(KIND, g1, u1, a.alpha, a.limit, a.beta);
            *reinterpret_cast<uint32_t *>(orow + 8 * j) = pack_bf16(a0, a1);
        }
    }
}

/* One tile's mainloop and epilogue for consumer warpgroup c. g0: the ring use of the tile's
 * first stage (0 in the one-tile-per-CTA kernel; the CTA's running count in the persistent
 * one, which also releases the tile's last stage: the producer refills it for the next tile). */
template <bool ACT, bool CL>
__device__ __forceinline__ void consume(const wg_args &a, const CUtensorMap *to, unsigned char *smem, uint64_t *full,
                                        uint64_t *empty, uint32_t rank, int c, int row0, int nvalid, int e, int wb,
                                        int g0 = 0, bool release_last = false) {
    const int lane = threadIdx.x & 31, w4 = (threadIdx.x >> 5) & 3, KB = a.K / BK;
    float d[128];
    for (int kb = 0; kb < KB; kb++) {
        const int g = g0 + kb, s = g % ST;
        mbar_wait(&full[s], (g / ST) & 1);
        unsigned char *st = smem + (size_t)s * STAGE_BYTES;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++)
            wgmma_m64n256k16(d, desc(st + c * 64 * 128 + kk * 32), desc(st + A_BYTES + kk * 32), (kb | kk) != 0);
        wg_commit();
        wg_wait<1>(); /* the previous stage's wgmmas are done: release it */
        if (kb > 0) release<CL>(empty, (g - 1) % ST, rank, lane);
    }
    wg_wait<0>();
    if (release_last) release<CL>(empty, (g0 + KB - 1) % ST, rank, lane);
#pragma unroll
    for (int i = 0; i < 128; i++) asm volatile("" : "+f"(d[i])::"memory");

    /* accumulator i of this thread: row 64 c + 16 w4 + lane/4 + 8 ((i/2) & 1),
     * column 8 (i/4) + 2 (lane & 3) + (i & 1) */
    const int rl = 64 * c + 16 * w4 + (lane >> 2), cq = 2 * (lane & 3);
    if constexpr (ACT) { /* columns 0..127 gate, 128..255 the matching up: one loop per activation and bias */
        const float *bg = a.b13 ? a.b13 + (size_t)e * 2 * a.Il + wb * 128 : nullptr;
        uint16_t *o = a.out + (size_t)(row0 + rl) * a.ldo + wb * 128 + cq;
        const int nv = nvalid - rl;
        if (a.act == TPM_ACT_SILU_GLU) {
            if (bg) act_store<TPM_ACT_SILU_GLU, true>(a, d, nv, bg + cq, o);
            else act_store<TPM_ACT_SILU_GLU, false>(a, d, nv, bg, o);
        } else {
            if (bg) act_store<TPM_ACT_SWIGLU_OAI, true>(a, d, nv, bg + cq, o);
            else act_store<TPM_ACT_SWIGLU_OAI, false>(a, d, nv, bg, o);
        }
    } else { /* down: through the warpgroup's staging buffer, 128 columns at a time (see the top) */
        const int t = threadIdx.x & 127, rw = rl - 64 * c, nrow = min(64, nvalid - 64 * c);
        unsigned char *eb = smem + ST * STAGE_BYTES + c * EPI_BYTES;
#pragma unroll
        for (int hf = 0; hf < 2; hf++) {
            if (t == 0) bulk_wait_read(); /* the stores before have read the buffer */
            named_bar(1 + c);             /* and so have the threads' */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = rw + 8 * h;
                if (r >= nrow) continue;
#pragma unroll
                for (int j = 0; j < 16; j++)
                    *reinterpret_cast<uint32_t *>(eb + epi_at(r, j) + 2 * cq) =
                        pack_bf16(d[4 * (16 * hf + j) + 2 * h], d[4 * (16 * hf + j) + 2 * h + 1]);
            }
            epi_out(eb, a.out, a.ldo, to, row0 + 64 * c, wb * 256 + 128 * hf, nrow, t, 1 + c, nrow == 64);
        }
    }
}
#endif /* TPM_WG_DEVICE */

template <bool ACT, bool CL>
__global__ void __launch_bounds__(kThreads, 1)
    k_wg_gemm(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
              const __grid_constant__ CUtensorMap to, const wg_args a) {
#ifdef TPM_WG_DEVICE
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full[ST], empty[ST];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);

    /* the tile: highest expert first, then weight block, then row tile (CL: row-tile pair,
     * CTA rank r of the cluster taking row tile 2 p + r; tail: the expert's last row tile) */
    const uint32_t rank = CL ? cluster_rank() : 0u;
    const int id = CL ? (int)(blockIdx.x >> 1) : (int)blockIdx.x;
    const int E1 = a.E1, nb = a.nb;
    if (id >= __ldg(a.rtp + E1) * nb) return; /* the same for the whole cluster, before any barrier */
    int lo = 0, hi = E1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (__ldg(a.rtp + mid) * nb <= id) lo = mid;
        else hi = mid;
    }
    const int q0 = __ldg(a.rtp + lo), cnt = __ldg(a.rtp + lo + 1) - q0;
    const int e = E1 - 1 - lo, local = id - q0 * nb;
    int wb, pi;
    band_tile(local, cnt, CL || a.tail ? 0 : a.band, nb, &wb, &pi);
    const int off = __ldg(a.offsets + e), n_e = __ldg(a.offsets + e + 1) - off;
    const int rt = CL ? 2 * pi + (int)rank : a.tail ? (n_e - 1) / BM : pi;
    const int row0 = off + rt * BM, nvalid = min(BM, n_e - rt * BM); /* > 0: pairs are always full */
    const int brow0 = e * a.wrows + wb * a.nb_rows, brow1 = brow0 + a.bhalf;
    const int KB = a.K / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CL ? 16 : 8); /* consumer warps of this CTA (CL: + the other's) */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (CL) cluster_sync(); /* both CTAs' barriers exist before any multicast or remote arrive */

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); /* warp-uniform for the compiler */
    if (wg == 0) { /* producer */
        if (threadIdx.x == 0) {
            for (int kb = 0; kb < KB; kb++) {
                const int s = kb % ST;
                if (kb >= ST) mbar_wait(&empty[s], ((kb / ST) - 1) & 1);
                unsigned char *st = smem + (size_t)s * STAGE_BYTES;
                mbar_expect_tx(&full[s], STAGE_BYTES);
                tma_2d(st, &ta, kb * BK, row0, &full[s]);
                if (CL) { /* this CTA's half of B, into both CTAs */
                    tma_2d_mc(st + A_BYTES + rank * BH_BYTES, &tb, kb * BK, rank ? brow1 : brow0, &full[s]);
                } else {
                    tma_2d(st + A_BYTES, &tb, kb * BK, brow0, &full[s]);
                    tma_2d(st + A_BYTES + BH_BYTES, &tb, kb * BK, brow1, &full[s]);
                }
            }
        }
        __syncwarp();
    } else { /* consumers: warpgroup c owns rows 64 c .. 64 c + 63 of the tile */
        const int c = wg - 1;
        if (nvalid > 64 * c) {
            consume<ACT, CL>(a, &to, smem, full, empty, rank, c, row0, nvalid, e, wb);
            if (!ACT && (threadIdx.x & 127) == 0) bulk_wait(); /* down's TMA stores are written */
        } else { /* none of this warpgroup's rows are stored: release the stages only */
            const int lane = threadIdx.x & 31;
            for (int kb = 0; kb < KB; kb++) {
                mbar_wait(&full[kb % ST], (kb / ST) & 1);
                release<CL>(empty, kb % ST, rank, lane);
            }
        }
    }
    if (CL) cluster_sync(); /* the other CTA's remote arrives on our barriers are done before we exit */
#else
    (void)ta;
    (void)tb;
    (void)to;
    (void)a;
    __trap(); /* built without sm_90a: tpm_moe_wgmma_ok() keeps the layer from launching this */
#endif
}

/* The persistent form (prefill_cluster 2 and 3): a grid of resident CTAs (CL: 2-CTA
 * clusters) takes work items from a per-launch counter, so the producer fills the ring with
 * the next item's stages while the consumers run the previous item's epilogue, and no CTA
 * pays a launch, a barrier init or a pipeline fill per tile. The items in flight stay a
 * window of consecutive list entries (a static deal let CTAs drift apart: r79, 20% slower
 * without clusters).
 * Items, highest expert first as in k_wg_gemm:
 *   !CL: one tile (weight block, row tile) per item, in k_wg_gemm's order (bands included);
 *   CL:  items of two kinds, both keeping both CTAs of the pair busy:
 *     pair  (row tiles 2 p and 2 p + 1, weight block wb): each CTA loads its own A tile and
 *           ONE 128-row half of the weight tile, multicast into both (B shared);
 *     odd   (an expert's odd last row tile, weight blocks 2 j and 2 j + 1): each CTA loads
 *           ONE 64-row half of the A tile, multicast into both, and its own weight block
 *           (A shared; with an odd block count the last odd item's second CTA has no block
 *           and loads only its A half).
 *     Inside an expert (band of band/2 pairs): by weight-block pair j, the pairs of block
 *     2 j, those of 2 j + 1, then (last band) the odd item of (2 j, 2 j + 1), so the odd
 *     item reads blocks its neighbours in the list have just brought into L2.
 *   Both kinds write 48 KB into each CTA's stage (odd without a block: 16 KB) and every
 *   stage is written by both producers, so the stage protocol of k_wg_gemm CL holds
 *   unchanged: full[s] one arrival + the bytes, empty[s] the 16 consumer warps of both CTAs.
 *   A row tile of at most 64 valid rows (both forms; round 45) loads only its first 64 A rows
 *   (pair, !CL: the 64-row map; odd: rank 1 sends no half), 8 KB less in the stage's byte count
 *   (odd: in both CTAs', which know the same n_e); its second consumer warpgroup skips the tile
 *   as before, so no thread reads the rows not loaded and the bits are the same.
 *   The ring position runs on across items (use g of stage g % ST has parity (g / ST) & 1).
 * Item queue (two slots, item_q[i] with mbarriers qfull / qempty): the producer of the CTA
 * (CL: of rank 0) takes the next item with an atomicAdd, writes it into its slot (CL: also
 * into rank 1's, st.shared::cluster) and arrives on qfull (CL: rank 1's with release at
 * cluster scope); the readers (the CTA's 8 consumer warps; CL: rank 1's 8 warps and its
 * producer too, arriving remotely) arrive on the taker's qempty once they have read it. The
 * taker publishes one entry past the end (>= total), which ends every reader's loop. The
 * counter is zeroed by k_wg_tiles, stream-ordered before the launch.
 * The bits are those of k_wg_gemm: each output element is one accumulator over the same
 * k order, whichever CTA computes it. */
struct wg_item {
    int e, rt, wb;   /* expert, this CTA's row tile, this CTA's weight block (-1: none) */
    int arow;        /* first A row this CTA loads (its whole tile, or CL odd: its half) */
    int odd;         /* CL: the A-shared kind */
    int nv;          /* the valid rows of the row tile (1..BM): at most 64, its rows 64.. are not loaded */
};

template <bool CL>
__device__ __forceinline__ long long items_before(const wg_args &a, int q) {
    return CL ? (long long)a.nb * __ldcg(a.rtp + q) + (long long)((a.nb + 1) >> 1) * __ldcg(a.rtp + a.E1 + 1 + q)
              : (long long)a.nb * __ldcg(a.rtp + q);
}

/* Item `local` of expert e (n_e rows from A row off) for CTA `rank`. */
template <bool CL>
__device__ __forceinline__ wg_item item_of(const wg_args &a, int e, int local, int off, int n_e, uint32_t rank) {
    wg_item r;
    r.e = e;
    const int rtc = (n_e + BM - 1) / BM;
    r.odd = 0;
    if (!CL) {
        band_tile(local, rtc, a.band, a.nb, &r.wb, &r.rt);
    } else {
        const int npa = rtc >> 1, bp = a.band >= 2 ? a.band >> 1 : npa; /* pairs, pairs per band */
        const int nbands = npa > bp && bp > 0 ? (npa + bp - 1) / bp : 1;
        const int b = bp > 0 ? min(local / (bp * a.nb), nbands - 1) : 0;
        const int L = local - b * bp * a.nb, last = b == nbands - 1;
        const int np = last ? npa - b * bp : bp, od = last ? rtc & 1 : 0, G = 2 * np + od;
        int j = L / G, q = L - j * G;
        if (j >= (a.nb >> 1)) { /* odd block count: the last group, block nb - 1 only */
            j = a.nb >> 1;
            q = L - j * G;
        }
        if (q < np) {
            r.wb = 2 * j;
            r.rt = 2 * (b * bp + q) + (int)rank;
        } else if (q < 2 * np && 2 * j + 1 < a.nb) {
            r.wb = 2 * j + 1;
            r.rt = 2 * (b * bp + q - np) + (int)rank;
        } else {
            r.odd = 1;
            r.rt = rtc - 1;
            r.wb = 2 * j + (int)rank < a.nb ? 2 * j + (int)rank : -1;
        }
    }
    r.arow = off + r.rt * BM + (r.odd ? 64 * (int)rank : 0);
    r.nv = min(BM, n_e - r.rt * BM);
    return r;
}

template <bool CL>
__device__ __forceinline__ wg_item decode_item(const wg_args &a, long long it, uint32_t rank) {
    int lo = 0, hi = a.E1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) >> 1;
        if (items_before<CL>(a, mid) <= it) lo = mid;
        else hi = mid;
    }
    const int e = a.E1 - 1 - lo, off = __ldcg(a.offsets + e);
    return item_of<CL>(a, e, (int)(it - items_before<CL>(a, lo)), off, __ldcg(a.offsets + e + 1) - off, rank);
}

/* Early items (a.early_items > 0): the fused shared slot's items, decoded without the routing's
 * offsets or the tile table (its rows are known from T alone); arow is a row of x (the tx and
 * tx64 maps). */
template <bool CL>
__device__ __forceinline__ wg_item early_item(const wg_args &a, long long it, uint32_t rank) {
    return item_of<CL>(a, a.E1 - 1, (int)it, 0, a.early_n, rank);
}

#ifdef TPM_WG_DEVICE
/* down with prefill_down_early: wait until gate_up has stored every tile of expert e (2 per tile,
 * acquire at GPU scope), then order this thread's later TMA reads (the async proxy) after it.
 * Bounded: past 2^26 polls it traps. */
__device__ __forceinline__ void wait_gate_up(const wg_args &a, int e) {
    const int off = __ldcg(a.offsets + e), n_e = __ldcg(a.offsets + e + 1) - off;
    const int need = 2 * a.gu_nb * ((n_e + BM - 1) / BM);
    for (uint32_t n = 0;; n++) {
        int v;
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(a.gdone + e) : "memory");
        if (v >= need) break;
        if (n >= (1u << 26)) __trap();
        __nanosleep(128);
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");
}
#endif

template <bool ACT, bool CL>
__global__ void __launch_bounds__(kThreads, 1)
    k_wg_gemm_p(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap ta64,
                const __grid_constant__ CUtensorMap tb, const __grid_constant__ CUtensorMap tx,
                const __grid_constant__ CUtensorMap tx64, const __grid_constant__ CUtensorMap to, const wg_args a) {
#ifdef TPM_WG_DEVICE
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) uint64_t full[ST], empty[ST], qfull[2], qempty[2];
    __shared__ int item_q[2];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t rank = CL ? cluster_rank() : 0u;
    /* early: the item total is known only after the wait (the tile table is built by then) */
    const bool early = ACT && a.ctr_exit != nullptr;
    long long total = early ? -1 : items_before<CL>(a, a.E1);
    if (total == 0) return; /* the same for every CTA, before any barrier */
    /* a down launch chained to this one (prefill_down_early) may launch once every CTA here has
     * started: its CTAs (one per SM, as ours) then take the SMs our CTAs leave as they run out
     * of items, by which time the tile table and the routing's outputs are complete (an exiting
     * CTA has waited for them) */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    const int KB = a.K / BK;
    const bool taker = rank == 0;

    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CL ? 16 : 8);
        }
        for (int i = 0; i < 2; i++) {
            mbar_init(&qfull[i], 1);
            mbar_init(&qempty[i], CL ? 17 : 8); /* CL: rank 0's, read by both CTAs' consumers and rank 1's producer */
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (CL) cluster_sync();

    const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0);
    if (wg == 0) { /* producer */
        if (!ACT) regs_producer();
        if (threadIdx.x == 0) {
            int g = 0;
            bool pwaited = !early; /* CL rank 1: the routing's outputs are visible (it decodes too) */
            for (int n = 0;; n++) {
                const int slot = n & 1;
                long long it;
                if (taker) {
                    if (n >= 2) {
                        if (CL) mbar_wait_cl(&qempty[slot], ((n >> 1) - 1) & 1);
                        else mbar_wait(&qempty[slot], ((n >> 1) - 1) & 1);
                    }
                    it = atomicAdd(a.ctr, 1);
                    if (!early || it >= a.early_items) {
                        if (total < 0) { /* early: the first item past the shared slot's */
                            grid_dep_wait();
                            total = items_before<CL>(a, a.E1);
                        }
                        if (it >= total) it = -1; /* the end, for every reader */
                    }
                    item_q[slot] = (int)it;
                    if (CL) put_cluster(&item_q[slot], (int)it, &qfull[slot], 1u);
                    mbar_arrive(&qfull[slot]);
                } else { /* CL rank 1: the item rank 0 took */
                    mbar_wait_cl(&qfull[slot], (n >> 1) & 1);
                    it = item_q[slot];
                    arrive_cluster_rel(&qempty[slot], 0u);
                    if (!pwaited && it >= a.early_items) { /* early: its first item past the slot's */
                        grid_dep_wait();
                        pwaited = true;
                    }
                }
                if (it < 0) break;
                const bool sh = early && it < a.early_items;
                const wg_item w = sh ? early_item<CL>(a, it, rank) : decode_item<CL>(a, it, rank);
                const CUtensorMap *tam = sh ? &tx : &ta, *tam64 = sh ? &tx64 : &ta64;
                if (!ACT && a.gdone) wait_gate_up(a, w.e);
                const int brow0 = w.wb >= 0 ? w.e * a.wrows + w.wb * a.nb_rows : 0, brow1 = brow0 + a.bhalf;
                /* a row tile of at most 64 valid rows: its second A half (the next expert's rows or
                 * zero fill, which no consumer reads: the second warpgroup skips the tile) is not
                 * loaded; CL odd: rank 1's multicast half, in both CTAs' byte counts */
                const bool ah = w.nv <= 64;
                const uint32_t abytes = ah ? (uint32_t)(A_BYTES / 2) : (uint32_t)A_BYTES;
                const uint32_t bytes = abytes + (CL && w.odd && w.wb < 0 ? 0u : (uint32_t)(2 * BH_BYTES));
                for (int kb = 0; kb < KB; kb++, g++) {
                    const int s = g % ST;
                    if (g >= ST) mbar_wait(&empty[s], ((g / ST) - 1) & 1);
                    unsigned char *st = smem + (size_t)s * STAGE_BYTES;
                    mbar_expect_tx(&full[s], bytes);
                    if (!CL) {
                        tma_2d(st, ah ? tam64 : tam, kb * BK, w.arow, &full[s]);
                        tma_2d(st + A_BYTES, &tb, kb * BK, brow0, &full[s]);
                        tma_2d(st + A_BYTES + BH_BYTES, &tb, kb * BK, brow1, &full[s]);
                    } else if (!w.odd) { /* own A tile; this CTA's half of B into both */
                        tma_2d(st, ah ? tam64 : tam, kb * BK, w.arow, &full[s]);
                        tma_2d_mc(st + A_BYTES + rank * BH_BYTES, &tb, kb * BK, rank ? brow1 : brow0, &full[s]);
                    } else { /* this CTA's half of A into both; own weight block */
                        if (!ah || rank == 0) tma_2d_mc(st + rank * (A_BYTES / 2), tam64, kb * BK, w.arow, &full[s]);
                        if (w.wb >= 0) {
                            tma_2d(st + A_BYTES, &tb, kb * BK, brow0, &full[s]);
                            tma_2d(st + A_BYTES + BH_BYTES, &tb, kb * BK, brow1, &full[s]);
                        }
                    }
                }
            }
            if (!ACT && a.gdone) { /* down: the last CTA done waiting zeroes the counts */
                __threadfence();
                if (atomicAdd(a.gdone + a.E1, 1) == (int)gridDim.x - 1) {
                    for (int q = 0; q <= a.E1; q++) a.gdone[q] = 0;
                    __threadfence();
                }
            }
            if (early) { /* the last CTA done taking items zeroes the counters for the next launch */
                __threadfence();
                if (atomicAdd(a.ctr_exit, 1) == (int)gridDim.x - 1) {
                    *a.ctr = 0;
                    *a.ctr_exit = 0;
                }
            }
        }
        __syncwarp();
    } else { /* consumers */
        if (!ACT) regs_consumer();
        const int c = wg - 1, lane = threadIdx.x & 31;
        int g = 0;
        bool waited = !early;
        for (int n = 0;; n++, g += KB) {
            const int slot = n & 1;
            if (CL) mbar_wait_cl(&qfull[slot], (n >> 1) & 1);
            else mbar_wait(&qfull[slot], (n >> 1) & 1);
            const long long it = item_q[slot];
            __syncwarp();
            if (lane == 0) {
                if (!CL) mbar_arrive(&qempty[slot]);
                else arrive_cluster_rel(&qempty[slot], 0u);
            }
            if (it < 0) break;
            const bool sh = early && it < a.early_items;
            if (!sh && !waited) { /* the routing's offsets and the tile table are read from here on */
                grid_dep_wait();
                waited = true;
            }
            const wg_item w = sh ? early_item<CL>(a, it, rank) : decode_item<CL>(a, it, rank);
            const int off = sh ? a.early_off : __ldcg(a.offsets + w.e);
            const int n_e = sh ? a.early_n : __ldcg(a.offsets + w.e + 1) - off;
            const int row0 = off + w.rt * BM, nvalid = min(BM, n_e - w.rt * BM);
            if (w.wb >= 0 && nvalid > 64 * c) {
                consume<ACT, CL>(a, &to, smem, full, empty, rank, c, row0, nvalid, w.e, w.wb, g, true);
            } else {
                for (int kb = 0; kb < KB; kb++) {
                    mbar_wait(&full[(g + kb) % ST], ((g + kb) / ST) & 1);
                    release<CL>(empty, (g + kb) % ST, rank, lane);
                }
            }
            if (ACT && a.gdone && w.wb >= 0) { /* this warpgroup's part of the tile is stored */
                __threadfence();
                asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
                if ((threadIdx.x & 127) == 0) atomicAdd(a.gdone + w.e, 1);
            }
        }
        if (!ACT && (threadIdx.x & 127) == 0) bulk_wait(); /* down's TMA stores are written */
    }
    if (CL) cluster_sync();
#else
    (void)ta;
    (void)ta64;
    (void)tb;
    (void)tx;
    (void)tx64;
    (void)to;
    (void)a;
    __trap();
#endif
}

/* rtp[q] = row tiles of experts E1-1 .. E1-q (highest first), rtp[E1] = total. pair: rtp
 * counts the full row-tile pairs (rt / 2) and rtp[E1 + 1 ..] the odd last tiles (rt & 1)
 * the same way. One block. */
__global__ void k_wg_tiles(const int32_t *__restrict__ offsets, int32_t *__restrict__ rtp, int E1, int pair,
                           int skip_e) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* an early gate_up launch (programmatic dependent launch) may start now; the offsets are
     * read after this grid's own wait (a no-op after a plain launch) */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    if (threadIdx.x < 2) rtp[2 * (E1 + 1) + threadIdx.x] = 0; /* the persistent launches' item counters */
    __shared__ int32_t cnt[1024]; /* pair: [0, 512) pairs, [512, 1024) odd tails */
    for (int q = threadIdx.x; q < E1; q += blockDim.x) {
        const int e = E1 - 1 - q;
        const int rt = e == skip_e ? 0 : (__ldcg(offsets + e + 1) - __ldcg(offsets + e) + BM - 1) / BM;
        cnt[q] = pair ? rt / 2 : rt;
        if (pair) cnt[512 + q] = rt & 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int q = 0; q < E1; q++) {
            rtp[q] = acc;
            acc += cnt[q];
        }
        rtp[E1] = acc;
        if (pair) {
            acc = 0;
            for (int q = 0; q < E1; q++) {
                rtp[E1 + 1 + q] = acc;
                acc += cnt[512 + q];
            }
            rtp[2 * E1 + 1] = acc;
        }
    }
}

} // namespace

int tpm_moe_wgmma_ok(const tpm_moe_dev &d, int device) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
        return 0;
    return major == 9 && minor == 0 && d.H % 256 == 0 && d.Il % 128 == 0 && d.H % BK == 0 && d.Il % BK == 0 &&
           d.E1 <= 512 && encode_fn() != nullptr;
}

tpm_status tpm_moe_wgmma_setup(const tpm_moe_dev &d, int max_rows, tpm_moe_wg_ctx *c) {
    static_assert(sizeof(CUtensorMap) == sizeof(c->maps[0]), "tensor map size");
    CUtensorMap m[7];
    TPM_TRY(make_map(&m[0], d.xp, (uint64_t)max_rows, (uint64_t)d.H));        /* A of gate_up */
    TPM_TRY(make_map(&m[1], d.w13, (uint64_t)d.E1 * 2 * d.Il, (uint64_t)d.H)); /* B of gate_up */
    TPM_TRY(make_map(&m[2], d.act_bf, (uint64_t)max_rows, (uint64_t)d.Il));  /* A of down */
    TPM_TRY(make_map(&m[3], d.w2, (uint64_t)d.E1 * d.H, (uint64_t)d.Il));     /* B of down */
    TPM_TRY(make_map(&m[4], d.xp, (uint64_t)max_rows, (uint64_t)d.H, 64));    /* A halves (persistent, odd items) */
    TPM_TRY(make_map(&m[5], d.act_bf, (uint64_t)max_rows, (uint64_t)d.Il, 64));
    TPM_TRY(make_map(&m[6], d.rows_bf, (uint64_t)max_rows, (uint64_t)d.H, 64)); /* down's output stores */
    memcpy(c->maps, m, sizeof m);
    const void *fns[8] = {(const void *)k_wg_gemm<true, false>,   (const void *)k_wg_gemm<false, false>,
                          (const void *)k_wg_gemm<true, true>,    (const void *)k_wg_gemm<false, true>,
                          (const void *)k_wg_gemm_p<true, false>, (const void *)k_wg_gemm_p<false, false>,
                          (const void *)k_wg_gemm_p<true, true>,  (const void *)k_wg_gemm_p<false, true>};
    for (int i = 0; i < 8; i++)
        TPM_CUDA_TRY(cudaFuncSetAttribute(fns[i], cudaFuncAttributeMaxDynamicSharedMemorySize, i & 1 ? SMEM_D : SMEM_G));
    /* the persistent grids: as many CTAs (clusters of two) as are resident at once, so the
     * static item schedule never leaves a CTA waiting for a second wave */
    int dev = 0, nsm = 0;
    TPM_CUDA_TRY(cudaGetDevice(&dev));
    TPM_CUDA_TRY(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
    int per_sm = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_wg_gemm_p<true, false>, kThreads, SMEM_G));
    c->grid_p = nsm * (per_sm > 0 ? per_sm : 1);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)(2 * (c->grid_p / 2)));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = SMEM_G;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int ncl = 0;
    TPM_CUDA_TRY(cudaOccupancyMaxActiveClusters(&ncl, (const void *)k_wg_gemm_p<true, true>, &cfg));
    c->grid_pc = 2 * (ncl > 0 ? ncl : 1);
    c->ready = 1;
    return TPM_OK;
}

tpm_status tpm_moe_prefill_wgmma(const tpm_moe_dev &d, const tpm_moe_wg_ctx &c, const uint16_t *x, int T,
                                 int cluster, int band, int skip_shared, int early, int down_early,
                                 cudaStream_t s) {
    TPM_ASSERT(c.ready && c.rtp);
    const long long rows = (long long)T * d.K;
    const int cl = cluster == 1 || cluster == 2, persist = cluster >= 2;
    const int skip = skip_shared && d.fused;
    /* early: the shared slot's gate_up items start before the routing's outputs exist (see the
     * top of the file); its A rows come from x itself through a per-call map */
    CUtensorMap mx, mx64;
    early = early && persist && d.fused && d.ep == 1 && !skip && ((uintptr_t)x & 15) == 0 &&
            make_map(&mx, x, (uint64_t)T, (uint64_t)d.H) == TPM_OK &&
            make_map(&mx64, x, (uint64_t)T, (uint64_t)d.H, 64) == TPM_OK;
    /* skip / early: the shared slot's rows (the last T) are not gathered (nor computed, skip) */
    TPM_TRY(tpm_moe_launch_gather(d, x, T, (int)(skip || early ? (long long)T * d.k : rows), early, s));
    cudaLaunchConfig_t tcfg = {};
    cudaLaunchAttribute pdl[1];
    pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl[0].val.programmaticStreamSerializationAllowed = 1;
    tcfg.gridDim = dim3(1);
    tcfg.blockDim = dim3(256);
    tcfg.stream = s;
    tcfg.attrs = pdl;
    tcfg.numAttrs = early ? 1 : 0;
    TPM_CUDA_TRY(cudaLaunchKernelEx(&tcfg, k_wg_tiles, d.offsets, c.rtp, d.E1, cl, skip ? d.Es : -1));
    /* upper bounds: row tiles, each touched expert adding at most one partial one; with
     * clusters the full pairs (rows / 2 BM + E1) and the odd tails (one per expert) */
    const long long ne = rows < d.E1 ? rows : d.E1;
    const long long ub = cl ? rows / (2 * BM) + ne : rows / BM + ne;
    const CUtensorMap *m = reinterpret_cast<const CUtensorMap *>(c.maps);
    wg_args g = {};
    g.offsets = d.offsets;
    g.E1 = d.E1;
    g.band = band;
    g.b13 = d.b13;
    g.Il = d.Il;
    g.act = d.act;
    g.alpha = d.alpha;
    g.limit = d.limit;
    g.beta = d.beta;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[2]; /* the 2-CTA cluster; programmatic dependent launch (early, down_early) */
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 2;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1] = pdl[0];
    cfg.blockDim = dim3(kThreads);
    cfg.stream = s;
    cfg.attrs = at;
    for (int mat = 0; mat < 2; mat++) {
        if (mat == 0) { /* gate_up + activation: weight blocks of 128 gate rows (+ the 128 matching up rows) */
            g.nb = d.Il / 128;
            g.K = d.H;
            g.wrows = 2 * d.Il;
            g.nb_rows = 128;
            g.bhalf = d.Il;
            g.out = d.act_bf;
            g.ldo = d.Il;
        } else { /* down: weight blocks of 256 rows of w2 */
            g.nb = d.H / 256;
            g.K = d.Il;
            g.wrows = d.H;
            g.nb_rows = 256;
            g.bhalf = 128;
            g.out = d.rows_bf;
            g.ldo = d.H;
        }
        const CUtensorMap &ma = m[2 * mat], &mb = m[2 * mat + 1];
        const CUtensorMap &mo = mat ? m[6] : ma; /* down's output in 64-row boxes (gate_up: unused) */
        cfg.dynamicSmemBytes = mat ? SMEM_D : SMEM_G;
        g.rtp = c.rtp;
        g.tail = 0;
        g.ctr = c.rtp + 2 * (d.E1 + 1) + mat;
        g.early_items = 0;
        if (persist) { /* one launch of resident CTAs taking items from the list */
            const bool ea = early && mat == 0, dn = down_early && mat == 1;
            cfg.gridDim = dim3((unsigned)(cl ? c.grid_pc : c.grid_p));
            /* attributes: [cluster] [pdl]: cl and ea / dn pick a window of at[] */
            cfg.attrs = cl ? at : at + 1;
            cfg.numAttrs = (cl ? 1 : 0) + (ea || dn ? 1 : 0);
            /* down_early: gate_up counts its stored tiles per expert, down waits for an expert's
             * before it loads its rows, chained by programmatic dependent launch */
            g.gdone = down_early ? c.rtp + 2 * (d.E1 + 1) + 4 : nullptr;
            g.gu_nb = d.Il / 128;
            const CUtensorMap &m64 = m[4 + mat];
            if (ea) { /* the shared slot's items first, launched early */
                const int rtc = (T + BM - 1) / BM;
                g.ctr = c.rtp + 2 * (d.E1 + 1) + 2;
                g.ctr_exit = g.ctr + 1;
                g.early_items = cl ? g.nb * (rtc / 2) + ((g.nb + 1) / 2) * (rtc & 1) : g.nb * rtc;
                g.early_off = T * d.k;
                g.early_n = T;
            }
            void (*fn)(CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap, wg_args) =
                cl ? (mat ? k_wg_gemm_p<false, true> : k_wg_gemm_p<true, true>)
                   : (mat ? k_wg_gemm_p<false, false> : k_wg_gemm_p<true, false>);
            TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, fn, ma, m64, mb, ea ? mx : ma, ea ? mx64 : m64, mo, g));
            g.ctr_exit = nullptr;
            g.early_items = 0;
            continue;
        }
        if (cl) {
            cfg.numAttrs = 1;
            cfg.gridDim = dim3((unsigned)(2 * ub * g.nb));
            TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, mat ? k_wg_gemm<false, true> : k_wg_gemm<true, true>, ma, mb, mo, g));
            g.rtp = c.rtp + d.E1 + 1; /* then each expert's odd last row tile, one CTA each */
            g.tail = 1;
            cfg.numAttrs = 0;
            cfg.gridDim = dim3((unsigned)(ne * g.nb));
        } else {
            cfg.numAttrs = 0;
            cfg.gridDim = dim3((unsigned)(ub * g.nb));
        }
        TPM_CUDA_TRY(cudaLaunchKernelEx(&cfg, mat ? k_wg_gemm<false, false> : k_wg_gemm<true, false>, ma, mb, mo, g));
    }
    return TPM_OK;
}

/* the preloader's handle on this file's kernels (src/core/cuda_preload.cu) */
TPM_CUDA_ANCHOR(moe_gemm_sm90a, (k_wg_tiles))
