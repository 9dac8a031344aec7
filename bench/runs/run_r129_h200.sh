#!/usr/bin/env bash
# run_r129_h200.sh - one H200, into $OUT/r129: gate/up row pairs by size (the new default:
# 1 for experts of <= 384 gate rows at 2-4 tokens, else 2; r127 / r128). gpu_moe (its tuning
# test checks the rule), then the fused layer's defaults at 1-8 tokens for the TP 8, TP 4 and
# TP 2 shares and TP 1 (the last three must not move: the rule leaves them at 2 pairs).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r129_h200.sh
NAME=r129
. bench/device_env.sh
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -8
pack
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 2 --fuse-shared 1 "$@" \
    > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-10s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s:%s ", $1, $6, $15}')"
}
bm s8 --shard 8
bm s4 --shard 4
bm s2 --shard 2
bm tp1
pack
echo "== total $(el)"
