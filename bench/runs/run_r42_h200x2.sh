#!/usr/bin/env bash
# run_r42_h200x2.sh - round 12 of the all-reduce on 2 x H200 in one device call:
# gpu_allreduce on kernel set 13 (set 10 with streaming cache hints in the
# warp-specialized two-shot) and gpu_comm_api on the default set (10); sets
# 5, 10, 13 side by side in one process (outputs compared bitwise with set
# 5's); then the full benchmark with TPMOE_CUDA_AR_VARIANT=13 (JSON, PNG).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r42_h200x2.sh
NAME=${NAME:-r42}
. bench/device_env.sh

TPMOE_CUDA_AR_VARIANT=13 timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v13.log" 2>&1
echo "== gpu_allreduce (set 13) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v13.log" | head -8
TPMOE_TOOL=$B/tpmoe timeout 150 "$B/gpu_comm_api" > "$R/gpu_comm_api.log" 2>&1
echo "== gpu_comm_api (default set) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_comm_api.log" | head -8
pack

timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6 --variants 5,10,13 \
  --sizes "${AR_SIZES:-16M,32M,64M,96M,128M}" --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 13 rc=$? ($(el))"
cut -c1-220 "$R/bench_allreduce_sets.log"
pack

TPMOE_CUDA_AR_VARIANT=13 timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 \
  --codecs none,int8,int6,int4,fp8,int4_h,int6_h --sizes 4K,12K,64K,256K,768K,2M,8M,32M,96M,128M \
  --json "$R/allreduce_h200x2_v13.json" --png "$R/allreduce_h200x2_v13.png" > "$R/bench_allreduce_v13.log" 2>&1
echo "== bench allreduce (set 13) rc=$? ($(el))"
grep -E " (none|int8|int4) " "$R/bench_allreduce_v13.log" | grep -E "^ *(12288|786432|2097152|33554432|100663296) " | cut -c1-120
pack
echo "== total $(el)"
