#!/usr/bin/env bash
# run_r37_h200.sh - the tree's head after final10 (a refactor of routing mode 3's launch config):
# gpu_moe on one H200, and the routing at 16-128 tokens.
#   NAME=r37 OUT=/some/dir bash bench/runs/run_r37_h200.sh
NAME=${NAME:-r37}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -6
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,16,64,128 --fuse-shared 1 --check 1 --reps 20 \
  --json "$R/route.json" > "$R/route.log" 2>&1
echo "== bench rc=$? ($(el))"
grep -E "^# T=|^[0-9]" "$R/route.log" | cut -c1-150
pack
