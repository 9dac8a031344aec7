#!/usr/bin/env bash
# run_r137_h200.sh - one H200, into $OUT/r137: the session's final tree. The GPU tests
# (gpu_preload, gpu_allreduce, gpu_moe, gpu_moe_api; gpu_comm_api needs two GPUs), then the
# issue's MoE command (m3, TP 1, fused and unfused, moe_m3_tp1.json, the plot's input), a
# rerun of r130's on another session's board.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_preload, gpu_allreduce, gpu_moe, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r137_h200.sh
NAME=r137
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|gpu_preload:|graph:" "$1" | head -8; }
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
echo "== total $(el)"
