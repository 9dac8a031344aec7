#!/usr/bin/env bash
# run_r121_h200.sh - one H200, into $OUT/r121: r120 showed the warm-up by buckets is not enough
# for EP rank 0's dense shared MLP (cuBLAS picks its kernel by the token count: 300 loaded a new
# library after 256 and 384 had run). EP rank 0 now stages x and runs that MLP over bucketed
# rows (eight buckets per octave), every bucket run at create. With the ranks sharing the GPU:
# tpmoe moe at EP 2 (1, 3, 40, 300, 1000, 4097 tokens; 300 unfused too) and TP 2 x EP 2 (256,
# 300, 777), then gpu_moe_api (its CLI case at EP 2) and gpu_moe.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_api, gpu_moe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r121_h200.sh
NAME=r121
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1
for cfg in "1 2 1 auto" "1 2 3 auto" "1 2 40 auto" "1 2 300 auto" "1 2 300 0" "1 2 1000 auto" "1 2 4097 0" \
           "2 2 256 auto" "2 2 300 auto" "2 2 777 0"; do
  set -- $cfg
  TPMOE_TIMEOUT_MS=15000 timeout 60 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 \
    --tokens $3 --fuse-shared $4 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3_f$4.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 fuse $4 rc=$? ($(el))"
  grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3_f$4.log" | cut -c1-150 | head -2
done
pack
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_moe_api.log" | head -10
pack
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
