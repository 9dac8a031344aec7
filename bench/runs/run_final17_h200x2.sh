#!/usr/bin/env bash
# run_final17_h200x2.sh - the 2 x H200 check of the final tree, if a 2-GPU
# machine is lent before the session ends, into $OUT/final17: the all-reduce
# half of run_final_h200x2.sh (gpu_allreduce, gpu_comm_api, the CUDA MoE CLI
# at TP 2, the whole all-reduce table on the default set: the all-reduce code
# of commit e5f4fdb has not run on two GPUs yet), then gpu_moe_api (its TP 2 /
# EP 2 parts) and m3 at TP 2, 1 and 8 tokens, fused and unfused.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api,
# gpu_moe_api of the final tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final17_h200x2.sh
NAME=final17 PART=ar bash bench/runs/run_final_h200x2.sh
NAME=final17
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
grep -E "^ +(12288|786432|2097152|33554432|100663296) " "$R/bench_allreduce.log" | cut -c1-120
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
echo "== bench moe tp2 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp2.log" | cut -c1-200
pack
echo "== total $(el)"
