#!/usr/bin/env bash
# run_r40_h200x2.sh - round 10 of the all-reduce on 2 x H200 in one device call:
# gpu_allreduce on kernel set 9 (the world-2 two-shot in warp-specialized
# roles, twoshot_ws_kernel), then sets 5 and 9 side by side in one process
# (every output of set 9 compared bitwise with set 5's), exact and codecs.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r40_h200x2.sh
NAME=${NAME:-r40}
. bench/device_env.sh

TPMOE_CUDA_AR_VARIANT=9 timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v9.log" 2>&1
echo "== gpu_allreduce (set 9) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v9.log" | head -8
pack

timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,fp8,int4_h --variants 5,9 \
  --sizes "${AR_SIZES:-2M,8M,16M,32M,64M,96M,128M}" --iters 30 --json "$R/allreduce_ws.json" > "$R/bench_allreduce_ws.log" 2>&1
echo "== bench allreduce 5 vs 9 rc=$? ($(el))"
cut -c1-220 "$R/bench_allreduce_ws.log"
pack
echo "== total $(el)"
