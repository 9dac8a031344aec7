#!/usr/bin/env bash
# run_r162_h200.sh - one H200, into $OUT/r162: the final tree of the seventh 2026-12-02 session
# (the library of r159: the commits since add and revert the r161 experiment, docs, results).
#   gpu_preload, gpu_allreduce (worlds 2..8 sharing the GPU), gpu_moe_paths, gpu_moe, gpu_moe_api;
#   the MoE command, one pass (moe_m3_tp1.json):
#     tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   TP 2's rank-local layer, fused and unfused, 1-8 tokens (--shard 2; no 2-GPU machine lent).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_preload, gpu_allreduce, gpu_moe, gpu_moe_paths, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r162_h200.sh
NAME=r162
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|gpu_preload:|graph:" "$1" | head -8; }
for t in gpu_preload gpu_allreduce gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe m3 tp1 rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s | ", $1, $2, $4, $15, $18, $20}' "$R/bench_moe_tp1.log"; echo
pack
timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --fuse-shared both --check 1 --shard 2 \
  --json "$R/moe_m3_shard2.json" > "$R/bench_moe_shard2.log" 2>&1
echo "== bench moe m3 shard 2 rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s | ", $1, $2, $4, $15}' "$R/bench_moe_shard2.log"; echo
pack
echo "== total $(el)"
