#!/usr/bin/env bash
# run_r30_h200.sh - the final tree's check on one H200 after the routing builders'
# shared warp scan (a refactor, no change of behaviour): gpu_moe, then the layer
# at 1, 8, 64, 1024 and 8192 tokens (every routing mode and permutation builder).
#   NAME=r30 OUT=/some/dir bash bench/runs/run_r30_h200.sh
NAME=${NAME:-r30}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
timeout 90 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,64,1024,8192 --fuse-shared 1 --check 2 --reps 20 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe rc=$? ($(el))"
grep -E "^[0-9]" "$R/bench_moe_tp1.log" | awk '{print $1, $3, $7, $10, $11, $12, $15, $16, $17, $18, $19, $20}'
pack
echo "== total $(el)"
