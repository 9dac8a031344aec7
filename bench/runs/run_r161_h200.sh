#!/usr/bin/env bash
# run_r161_h200.sh - one H200, into $OUT/r161: EXPERIMENT r161. The decode path's small shares
# (TP 8 at 1 token: r132's timeline had the routed gate_up at 2.4 TB/s, HBM idle through the
# routing's tail). In k_route_fused (T <= 8) the logits blocks that are not last wait for the last
# block's selections (an epoch it releases right after selecting), then prefetch into L2
# (prefetch.global.L2, 128-byte lines) the heads of every gate/up row of each selected routed
# expert, TPM_EXP_PF bytes in all, each block a share. PF 0 (off) / 8 / 16 / 32 MB at the TP 8 /
# 4 / 2 shares and TP 1, 1-8 tokens, two alternating passes; then the outputs' bits, PF on / off.
# (A first form, the last block alone issuing cp.async.bulk.prefetch.L2 per row, held the routing
# launch until its prefetches were done: 57 us at TP 8, 1 token, 4 KB per row.)
# Binaries (prebuilt/bin.txz): tpmoe of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r161_h200.sh
NAME=r161
. bench/device_env.sh
bm() { # name pf args...
  local n=$1 pf=$2; shift 2
  TPM_EXP_PF=$pf timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --gemm-hold 0 --check 1 \
    --fuse-shared 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s ", $1, $15, $11}')"
}
for pass in a b; do
  for s in 8 4 2; do
    for pf in 0 8388608 16777216 33554432; do bm s${s}_pf${pf}_$pass $pf --shard $s; done
  done
  for pf in 0 8388608 16777216 33554432; do bm tp1_pf${pf}_$pass $pf; done
  pack
done
echo "== bits $(el)"
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 3 8; do
    for pf in 0 16777216; do
      TPM_EXP_PF=$pf timeout 60 "$B/tpmoe" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
        --output "$R/o_${p}_${t}_$pf.bin" > "$R/o_${p}_${t}_$pf.log" 2>&1 || echo "rc $? $p $t $pf"
    done
    cmp -s "$R/o_${p}_${t}_0.bin" "$R/o_${p}_${t}_16777216.bin" && echo "same $p $t" || echo "DIFF $p $t"
  done
done
rm -f "$R"/o_*.bin
pack
echo "== total $(el)"
