#!/usr/bin/env bash
# run_r187_h200.sh - one H200, into $OUT/r187: round 29's final library (mode 1's wide form by
# default up to 11 tokens, and only while its grid is one wave).
#   1. gpu_moe (the wide form against the 8-token tiles bit for bit at 10 and 16 tokens);
#   2. routing net, m3 and deepseek-v3, fused, one pass.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of this script's commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r187_h200.sh
NAME=r187
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep -c "route mode 1 (" "$R/gpu_moe.log"
pack
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --tokens $tk --gemm-hold 0 --check 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
bm m3 1,8,9,10,11,12,13,16,17 --preset m3 --fuse-shared 1
bm deepseek-v3 9,12,16 --preset deepseek-v3 --fuse-shared 1
pack
echo "== total $(el)"
