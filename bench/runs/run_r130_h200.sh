#!/usr/bin/env bash
# run_r130_h200.sh - one H200, into $OUT/r130: the session's final tree. The GPU tests
# (gpu_preload, gpu_allreduce, gpu_moe, gpu_moe_api), then the MoE command (m3, TP 1,
# fused and unfused, moe_m3_tp1.json + the plot's input) and TP 2's rank-local layer at 1 and 8
# tokens (--shard 2, moe_m3_shard2.json).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_preload, gpu_allreduce, gpu_moe, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r130_h200.sh
NAME=r130
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|gpu_preload:" "$1" | head -8; }
for t in gpu_preload gpu_allreduce gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
timeout 300 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe m3 tp1 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1.log" | cut -c1-200
pack
timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --shard 2 --fuse-shared both --check 2 \
  --gemm-hold 0 --json "$R/moe_m3_shard2.json" > "$R/bench_moe_shard2.log" 2>&1
echo "== bench moe m3 shard 2 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_shard2.log" | cut -c1-200
pack
echo "== total $(el)"
