#!/usr/bin/env bash
# run_r8_h200x2.sh - round 8 on 2 x H200 in one device call: gpu_allreduce on
# kernel set 7 (the world-2 two-shot with reduce and gather two steps behind),
# sets 5 and 7 side by side (bitwise compared), and the routing launch timed
# with its phases cut off one by one (--route-stop 1..3; outputs of those
# replays are invalid, only their time is used).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.tgz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r8_h200x2.sh
NAME=${NAME:-r8}
. bench/device_env.sh

TPMOE_CUDA_AR_VARIANT=7 timeout 90 "$B/gpu_allreduce" > "$R/gpu_allreduce_v7.log" 2>&1
echo "== gpu_allreduce (set 7) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v7.log" | head -8
pack

timeout 120 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4,int4_h --variants 5,7 \
  --sizes "${AR_SIZES:-2M,8M,32M,96M}" --iters 30 --json "$R/allreduce_lag.json" > "$R/bench_allreduce_lag.log" 2>&1
echo "== bench allreduce 5 vs 7 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_lag.log"
pack

for stop in 0 1 2 3; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --fuse-shared 1 --flush read --route-stop $stop \
    --check 1 > "$R/bench_moe_route_stop$stop.log" 2>&1
  echo "== route stop $stop rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/bench_moe_route_stop$stop.log" | cut -c1-110
done
pack
echo "== total $(el)"
