#!/usr/bin/env bash
# run_r133_h200.sh - one H200, into $OUT/r133: k_down2 prefetching the touched experts' down rows
# into L2 before its wait (tuning down_prefetch, default off). r132: at TP 8's share gate_up streams
# at 2.4 TB/s, so HBM has room under its tail; r102 had a first-item prefetch 3-7% slower at TP 1.
# Off against on, alternating, for the TP 8 / 4 / 2 shares and TP 1 at 1, 2, 4, 8 tokens (fused,
# checked), then gpu_moe.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r133_h200.sh
NAME=r133
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --gemm-hold 0 --check 2 --fuse-shared 1 "$@" \
    > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-12s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s(%s) ", $1, $15, $19}')"
}
for s in 8 4; do
  for pass in a b; do
    bm s${s}_pf0_$pass --shard $s --down-prefetch 0
    bm s${s}_pf1_$pass --shard $s --down-prefetch 1
  done
done
bm s2_pf0 --shard 2 --down-prefetch 0
bm s2_pf1 --shard 2 --down-prefetch 1
bm s1_pf0 --down-prefetch 0
bm s1_pf1 --down-prefetch 1
pack
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
