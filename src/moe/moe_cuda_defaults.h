/*
 * moe_cuda_defaults.h - the defaults of tpm_cuda_moe_tuning (applied by tpm_cuda_moe_create in
 * moe_cuda_layer.cu), each with the measurements that chose it. Included by moe_cuda_layer.cu
 * only; the rounds behind them are in docs/moe_cuda_rounds.md and docs/moe_cuda_rounds_2-9.md.
 */
#ifndef TPM_MOE_CUDA_DEFAULTS_H
#define TPM_MOE_CUDA_DEFAULTS_H

/* Defaults of tpm_cuda_moe_tuning, from the H200 run of 2026-11-30 (m3,
 * fused, bench/results/moe_m3_tp1_{before,path_prefill,path_decode}.json,
 * moe_m3_run2_tail.txt): decode kernel 0 (scalar) beats kernel 1 (tensor
 * core) at 1 and 8 tokens (175.8 vs 240.7 us, 930.9 vs 1184.6); decode beats
 * prefill up to 8 tokens (930.9 vs 1162.0 at 8) and loses from 16 (decode
 * 1912 (kernel 1) / 2027 (kernel 0, earlier run) vs prefill 1760.8): decode
 * up to 8 tokens. Router GEMM vs one fused launch: 29.2 vs 42.9 us at 64
 * tokens, 34.8 vs 81.3 at 256 (fused launch: 33.3 us at 32). */
/* Round 4 (H200 run of 2026-11-30, bench/results/moe_m3_tp1_dk{0,2}*.json): decode kernel
 * set 2 with programmatic dependent launch beats set 0, fused, whole layer, us:
 *   tokens 1: 167.4 vs 174.8   2: 251.7 vs 265.1   4: 474.1 vs 483.8   8: 894.2 vs 902.6
 * (set 2 without PDL: 174.3, 260.7, 479.8, 899.0: the gain is the overlap). */
#define TPM_MOE_DECODE_KERNEL 2
#define TPM_MOE_DECODE_MAX_TOKENS 8
#define TPM_MOE_ROUTE_GEMM_MIN 64
/* Router experts per logits block (modes 0, 1); more blocks route faster but take SM slots from
 * the shared slot's gate_up items. 0 = by size: 32 up to 2 tokens, 8 at 3-8, 16 at 9-24 (rounds 26,
 * 27: r163, r164, r167, r168, r170), 32 above; the same bits where the H slices match (m3: 16).
 * A rank of TP >= 2 (no EP) takes 16 up to 2 tokens: with a 1/TP share of the shared slot's items
 * beside the routing, its fused layer is faster so at 1-2 tokens (r252, r253, `--shard`: TP 2
 * 1.9-4.8 us, TP 4 0-1.1, TP 8 1.4-2.4; TP 1 keeps 32: 16 is 0.5-1.2 us slower there). */
#define TPM_MOE_ROUTE_EXPERTS 0
/* Routing mode 3 (moe_cuda_route_tc.cu: one launch, the router on tensor cores, clusters
 * of 8) from / up to this many tokens, fragments loaded straight into registers. Round 33
 * (one H200, bench/results/r33, m3, routing net of the harness, us; mode 3 direct / mode 3
 * ring / the best of modes 1 and 2):
 *   tokens 16: 14.7 / 17.3 / 14.9   24: 15.2 / 17.6 / 19.5   32: 15.7 / 17.6 / 19.7
 *   tokens 64: 18.0 / 19.6 / 22.4   128: 22.6 / 25.4 / 23.5  256: 31.9 / 37.3 / 25.6
 * Mode 3 up to 128 tokens; direct loads. From 25 since round 27 (r170: mode 1 10.4 / 12.0 us at
 * 9-16 / 24 tokens, mode 3 13.3-13.6 / 14.0; the layer 3-10 us faster; a tie at 32).
 * Round 31 (one H200, bench/results/r194, routing net, us, two passes; mode 3 pipelined loads
 * (2) / direct (1) / mode 2): 25: 11.9-12.0 / 12.9   64: 13.8-14.0 / 15.0-15.1
 *   128: 16.5-16.6 / 19.7-19.8 / 20.8-22.1   192: 18.5-18.9 / 23.2-23.3 / 22.7-22.8
 *   256: 22.7-22.8 / 30.3-30.4 / 24.3-24.6
 * so mode 3 up to 256 tokens (all it takes), pipelined loads. */
/* Routing mode 1's wide form (one row of 16-token blocks) up to this many tokens (round 29,
 * bench/results/r185, m3, routing net, us, wide / 8-token tiles: 9.4 / 9.6-9.7 at 9 tokens,
 * 9.5-9.7 / 9.8-10.0 at 10-11, 9.9-10.0 / 10.0 at 12-13, 10.1-10.3 / 9.9-10.3 at 14-16). */
#define TPM_MOE_ROUTE_WIDE 11
/* The permutation by every selecting block (tuning.route_perm_min, round 49) from this many
 * tokens (0 = never), and never above TPM_MOE_ROUTE_PERM_MAX_T: its waiting blocks (one per
 * 8-token group) must stay far fewer than the blocks the device holds at once. r266 (ONE H100,
 * m3 fused, routing net, medians of three passes, against the last block's permutation): mode 3
 * -0.8 to -0.9 us at 25-128 tokens, -1.1 / -1.3 at 160 / 192, -3.1 at 256 (21.0-21.3 against
 * 23.9-24.4); r267: mode 1's several tiles level at 12-24 (within 0.3 us either way, against the
 * direct count and the bitmap). So from mode 3's start. */
#define TPM_MOE_ROUTE_PERM_MIN 25
#define TPM_MOE_ROUTE_PERM_MAX_T 256
/* Polled partial logits (tuning.route_poll, round 50; ONE H100, m3 fused, routing net, three
 * passes, polled against the tickets): bit 0, mode 1's one row (r271): -0.6 us at 1 token, level at
 * 2, -0.3 to -0.5 at 3-7, -0.8 at 8 (7.2-7.3 against 8.1), level in the wide form (9-11); bit 1,
 * mode 3's groups (r272, r273): -0.2 to -0.6 at 25, -0.1 to -0.4 at 32-64, -0.7 to -1.5 at 96-256;
 * bit 2, mode 1's several rows (r275): -0.5 to -0.7 at 12-24. All three. */
/* Bit 4, mode 3's cluster sums spread over every rank in tiles of at most 64 tokens (round 54):
 * r291 (ONE H100, m3 fused, routing net, three passes, against 7): -0.7 us at 25 tokens, -0.3 at
 * 32 and 48, level at 64 (spread in every tile: +0.4 at 65, +0.2 at 96, level at 128-256). */
/* Bit 5, the cluster meeting's poll spread over the last cluster's 8 ranks (round 55): off, not
 * yet measured on a GPU (bench/runs/run_r293_h200.sh is its A/B). */
#define TPM_MOE_ROUTE_POLL 23
#define TPM_MOE_ROUTE_TC_MIN 25
#define TPM_MOE_ROUTE_TC_MAX 256
/* Mode 3's fragments (tuning.route_tc_loads): 3 since round 51, the fp32 router's operand-order
 * copy split in registers (two thirds of 2's bytes). r278 (ONE H100, m3 fused, routing net, three
 * passes): against 2, level at 25-64 tokens, -0.8 us at 128, -1.8 at 256 (17.7 against 19.5). */
#define TPM_MOE_ROUTE_TC_LOADS 3
/* Routing mode 4 (moe_cuda_route_cl.cu, round 52: one cluster of 16 CTAs does the whole routing,
 * every meeting a cluster barrier) from / up to this many tokens, before mode 1 / mode 3: never
 * by default. r280 (ONE H100, m3 fused, routing net, two passes, against modes 1 / 3): 13.8-14.2
 * against 5.4-5.5 us at 1 token, 14.6 / 8.6-8.8 at 9, 16.6 / 11.7 at 32, 20.2-20.3 / 12.9-13.3 at
 * 64; clusters of 8 5.5-8 us slower still. Its trace: the logits alone end at 9.0 us from 1 to 16
 * tokens: 16 SMs each stream 192 KB of the fp32 router at ~21 GB/s, so the router needs most of
 * the SMs (round 28 saw the same), and what the cluster saves after the logits (~3.5 us of the
 * 32-token tail) cannot pay that. Kept as a tested option (tuning.route_cl_min / max). */
#define TPM_MOE_ROUTE_CL_MIN 1
#define TPM_MOE_ROUTE_CL_MAX 0
/* Mode 3's selecting blocks meet at a cluster barrier where they are one cluster's (one token
 * tile), up to this many tokens (tuning.route_cluster_meet, round 52). ONE H100, m3 fused, routing
 * net, three passes each, against the global counter: r281 -0.4 us at 25 tokens, -0.2 at 32, -0.5
 * at 48, level at 64; r282 (another board) -0.6 at 25, -0.35 at 32, +0.1 at 48, +0.2 at 64. So up
 * to 32 tokens (four groups). r282 also read the selections from the groups' shared memory after
 * the meeting instead of through L2 (e77f98c, reverted): 0.2-0.8 us slower. */
#define TPM_MOE_ROUTE_CLUSTER_MEET 32
/* Mode 3 in 128-token tiles from this many tokens (tuning.route_tc_wide, round 53); 0 = never.
 * r286 (ONE H100, m3 fused, routing net, three passes, against the 64-token tiles, both with the
 * cluster meeting up to 32 tokens): -0.2 us at 25 tokens, -0.75 at 32, -1.9 at 48, -2.2 at 64-65,
 * -1.6 at 96, -0.8 at 128, +0.3 at 160, -0.2 at 192, -1.9 at 256 (16.9 against 18.8); r285 (without
 * the meeting) the same within 0.3 us. So wherever mode 3 runs. */
#define TPM_MOE_ROUTE_TC_WIDE 1
/* Mode 3 on the fewest clusters for the most chunks per CTA (tuning.route_tc_fit, round 53). r287
 * (ONE H100, m3 fused, routing net, three passes, the 128-token tiles, against all 15 resident):
 * -0.1 to -0.2 us at 25-96 and 160-256 tokens, -0.5 at 128 (14.5 against 15.1: 12 clusters). */
#define TPM_MOE_ROUTE_TC_FIT 1
/* Mode 3's 128-token tiles with the experts split in groups (tuning.route_tc_split, round 54).
 * r291 (ONE H100, m3 fused, routing net, three passes, against the unsplit tiles, all spread):
 * 2 groups +0.1..0.75 us at 25-48 tokens, level at 64-65, +0.2..1.2 at 96-256; 4 groups +0.6..2.0
 * at 64-256 (four times the x bytes per CTA; the runs' tiles then added by a quarter of the
 * warps, since by the whole CTA: not measured). So off. */
#define TPM_MOE_ROUTE_TC_SPLIT 1
/* Up to this many tokens the prefill chains by programmatic dependent launch (moe_cuda_gemm_sm90a.cu)
 * the shared slot's gate_up items beside the routing (EARLY; round 20: 5-20 us faster at 24-2048
 * tokens) and down to gate_up (DOWN_EARLY; round 23: 13-33 us at 64-1024). In the persistent
 * clusters (4096 tokens on) neither was faster on round 22's kernels; with round 42's down kernel
 * both are (round 44, bench/results/r245: ONE H100, m3 fused, four passes, the variants in turn,
 * whole layer, us): 4096 tokens both 6200.0-6263.2 against none 6309.1-6350.7 (-1.7%), 8192
 * tokens (the slot plan, see TPM_MOE_PREFILL_SPLIT_MIN) 9080.7-9132.1 against the split plan
 * without them 9154.9-9470.9 (-2.0%). Not measured above 8192. */
#define TPM_MOE_PREFILL_EARLY 8192
#define TPM_MOE_PREFILL_DOWN_EARLY 8192
/* Shared-expert plan of a fused layer on the decode path (kernel 0): from
 * this many tokens the shared slot runs as dense cuBLAS GEMMs (split plan).
 * The GEMV's multi-token shared slot is issue-bound (per 16-byte weight load
 * NT x-loads and 8*NT FMAs), cuBLAS's dense GEMMs are not, but the split
 * costs ~3 more launches. H200 run of 2026-11-30 (round 3, m3, TP 1,
 * bench/results/moe_m3_tp1_plan_{slot,split}.json), whole layer, us:
 *   tokens  1: slot 176.2, split 193.4     tokens 4: slot 505.4, split 490.7
 *   tokens  2: slot 261.1, split 269.6     tokens 8: slot 940.3, split 886.0
 * TP 2 (moe_m3_tp2*.json): 8 tokens slot 520.3, split 514.5. Split from 4.
 * Round 12 (bench/results/r86, one H200, TP 1, fused, the split plan beside the routing / slot,
 * three passes, us): 3 tokens both slot 322.4-324.0; 4 tokens 425.7-427.5 / 419.4-420.2; 5
 * tokens 558.8-562.6 / 564.3-565.1; 6 661.1-664.3 / 666.5-668.5; 8 816.9-818.0 / 836.2-838.4.
 * The GEMVs got faster since round 3: split from 5 (TP 2 at 4 tokens not measured). */
#define TPM_MOE_SHARED_SPLIT_MIN 5
/* Prefill expert GEMMs (tpm_moe_prefill_gemm). Same run, fused, whole layer,
 * us (moe_m3_tp1_gemm_{loop,streams}.json, moe_m3_tp1_prefill.json):
 *   tokens   32: loop 2825.9, grouped 2112.7, streams (4) 1983.6
 *   tokens 1024: loop 5159.1, grouped 4231.6, streams (4) 3772.6
 *   tokens 8192: loop 9822.4, grouped 19603.9, streams (4) 9762.1
 * cublasGemmGroupedBatchedEx (cuBLAS 13.0) is twice as slow as the loop at
 * 8192 tokens; the loop over 4 streams is the fastest at every size. */
#define TPM_MOE_PREFILL_GEMM TPM_MOE_GEMM_STREAMS
/* Where the own wgmma/TMA grouped GEMM can run (a 9.0 device, fitting shapes)
 * it is the default prefill path instead: see docs/moe_cuda_rounds_2-9.md, round 6. */
#define TPM_MOE_PREFILL_WGMMA 1
/* Prefill split plan (fused layer, own wgmma GEMM: the shared slot's T rows as dense cuBLAS
 * GEMMs) from this many tokens. Round 18 (r18) found no gain beyond noise; on round 12's
 * persistent, clustered kernel the slot fell behind from 8192 tokens (r140, r141: one H200, three
 * passes each, whole layer, us, slot / split / unfused, means):
 *   4096: 5671 / 5680 / 5722    6144: 7593 / 7592 / 7524    8192: 9469 / 9433 / 9413
 *   12288: 13321 / 13273 / 13252    16384: 17289 / 17087 / 17095
 * (the slot behind the unfused layer at 8192 in 6 passes of 6). With the early shared items and
 * the chained down (round 44, r245, above) the slot plan is ahead at 8192 tokens in 4 passes of
 * 4, 2.0% on average: the split plan from 8193 (12288 and 16384 not measured since round 12). */
#define TPM_MOE_PREFILL_SPLIT_MIN 8193
/* ... and up to this many tokens, where the slot's 128-row tile is mostly padding and the shared
 * expert's weights are read by a tile of the grouped launch after the routing: bench/results/r46m
 * (one H200, fused slot / unfused / fused split, us): 16 tokens 1265.6 / 1253.8 / 1254.1 (final10:
 * slot 1260.9, unfused 1250.0), 24 tokens 1722.0 / 1734.5 / 1732.4, 32 tokens 1989.6 / 1990.8 /
 * 1997.7, 64 tokens 2823.5 / 2833.5 / 2816.3. Split where the slot lost in both runs: up to 16. */
#define TPM_MOE_PREFILL_SPLIT_MAX 16
/* Form of the own prefill GEMM (round 12, docs/moe_cuda_rounds.md): -1 = by size, persistent CTAs
 * taking tiles from a counter (prefill_cluster 3) below TPM_MOE_PREFILL_CLUSTER_MIN tokens and
 * persistent 2-CTA clusters sharing tiles by multicast (2) from it. r81 / r82 (one H200, fused,
 * us, one CTA per tile / 2 / 3): 128 tokens 3342.7 / 3358.8 / 3311.9, 1024 3689.8 / 3692.5 /
 * 3639.0, 2048 4060.8 / 4097.3 / 3988.7, 4096 5763.5 / 5578.9 / 5646.1, 8192 9630.0 / 9448.2 /
 * 9661.3 (second passes within 1%). */
#define TPM_MOE_PREFILL_CLUSTER (-1)
#define TPM_MOE_PREFILL_CLUSTER_MIN 4096
/* Row tiles per band of the own prefill GEMM's tile order (round 12, r80): an expert with more
 * row tiles (the shared slot from 2048 tokens) runs band by band, so its A rows stay in L2 while
 * each weight block streams past (8192 tokens: gate_up reads 12.18 instead of 12.83 GB from
 * HBM, down 5.33 instead of 5.74; the layer 0-1% faster). 0 = round 6's order. */
#define TPM_MOE_PREFILL_BAND 16
/* Shared MLP of the split / dense plans overlapped with the routing (round 6; the prefill path
 * too since round 17). */
#define TPM_MOE_SHARED_OVERLAP 1
/* Decode kernel set 2 with programmatic dependent launch (round 4, above). */
#define TPM_MOE_PDL 1
/* Down kernel of set 2 up to 8 tokens: 0 = k_down2 with 2 rows x 4 chunks per
 * warp (round 4), 1 = k_down4 (bulk-copy ring, round 5; docs/moe_cuda_rounds_2-9.md), 2 /
 * 3 / 4 = k_down2 with 4 x 2, 1 x 8, 8 x 1; gate/up row pairs per warp of
 * k_gate_up2 (1 x 4 chunks or 2 x 2). All the same bits. Rounds 24-25 (one
 * H200, bench/results/r24, r25, two passes each, fused layer, us):
 *   tokens            1       2       4       8
 *   down 0, pairs 1   145.7   229.4   449.4   874.0
 *   down 2, pairs 1   143.2   222.4   441.5   843.4
 *   down 2, pairs 2   142.5   222.3   437.5   822.8
 *   down 4, pairs 1   150.5   221.7   456.1   952.6   (down 3: 152.6 .. 906.8, r24)
 * Each warp's rows longer and fewer items per expert: down 2 + pairs 2. That was TP 1's
 * expert (3072 gate rows). A TP rank's share timed alone (bench moe --shard, r127 / r128, two
 * passes each, fused layer, us, pairs 1 / 2):
 *   share (gate rows)  1 token      2            3            4            5            8
 *   TP 8 (384)         41.5 / 41.2  56.5 / 59.0  70.7 / 74.0  85.2 / 91.0  119 / 113    162 / 155
 *   TP 4 (768)         59.6 / 55.0  78.8 / 77.9  106 / 108    133 / 136    188 / 182    261 / 255
 *   TP 2 (1536)        87.3 / 83.2  130 / 124    -            234 / 230    -            458 / 441
 * (TP 2: pairs 1 in one pass, pairs 2 in three, r127.)
 * With few rows per expert and 2-4 tokens (the slot plan; from 5 the shared expert leaves the
 * GEMV items) more, smaller items stream faster; elsewhere 2. TP 4's 2% at 3-4 tokens against
 * its 1% loss at 2 is left out. 0 = by size (tpm_cuda_moe_gate_up_pairs_for). */
#define TPM_MOE_DOWN_KERNEL 2
#define TPM_MOE_GATE_UP_PAIRS 0
#define TPM_MOE_GUP1_MAX_ROWS 384
/* Decode set 2, down_kernel 2: k_down2 waits per expert for its gate_up tiles (1) or for the
 * whole k_gate_up2 grid (0). */
#define TPM_MOE_EXPERT_WAIT 0
/* Decode kernel 2 up to 2 tokens: k_gate_up2's weight loads in two register stages
 * (tuning.gate_up_pipe). r97 (one H200, m3 TP 1 fused, three passes, whole layer, us, on / off):
 *   1 token 140.1-140.4 / 141.2-141.4   2 tokens 220.7-222.0 / 222.0-222.4
 * (the experts phase timed alone is slower with it, 141.2 vs 137.9 at 1 token; the layer, where
 * the routing runs beside it, is faster); 3-8 tokens 8-11% slower: off there. */
#ifndef TPM_MOE_GATE_UP_PIPE
#define TPM_MOE_GATE_UP_PIPE 1
#endif
/* The fused shared slot on tensor cores in decode kernel set 2's slot plan from this many tokens
 * (tuning.shared_mma; round 36); 0 = never. r216 / r217 (ONE H100, m3 TP 1 fused, whole layer,
 * us, two passes; the defaults (scalar slot at 3-4 tokens, split plan from 5) / slot plan on tensor
 * cores / slot plan scalar):
 *   tokens 3: 448.6-449.7 / 460.3-460.5 / 449.0-449.6   4: 590.5-591.7 / 600.8-601.6 / 591.5-591.7
 *   tokens 5: 744.8-746.8 / 748.3-750.0 / 747.9-749.4   6: 885.0-887.8 / 890.1-890.4 / 893.6-894.5
 *   tokens 8: 1099.3-1101.2 / 1104.0-1105.4 / 1117.4-1117.9
 * TP 2's rank share (--shard 2), defaults / tensor cores: 4 tokens 310.2-310.3 / 313.6-313.9, 8
 * tokens 569.5-570.4 / 577.8-577.9. Ahead of the scalar slot from 5 tokens, behind the split plan
 * by 0.3-0.7% there and behind the scalar slot at 3-4 (its instantiations hold 2 blocks per SM,
 * the plain GEMVs 3 at 4 tokens): off. Measured on an H100 only; the H200's decode layer sits
 * further from its floor (1.08x at 8 tokens against the H100's 1.03x), so it waits for one. */
#define TPM_MOE_SHARED_MMA 0
/* Routing tickets: every thread fences (1) or a barrier and one acq_rel atomic (0). */
#define TPM_MOE_ROUTE_FENCE 0

#endif /* TPM_MOE_CUDA_DEFAULTS_H */
