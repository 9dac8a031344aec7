#!/usr/bin/env bash
# run_r118_h200.sh - one H200, into $OUT/r118: r117's deadlock fixed? The layer now warms up at
# create (tpm_cuda_moe_warm: every cuBLAS call site's first use before any forward), and the graph
# test uploads each rank's graph before the replays. With the ranks sharing the GPU:
# tpmoe moe at EP 2 (3 and 40 tokens, fused and unfused) and TP 8 at 40; gpu_moe_api with its CLI
# case (EP 2 no longer skipped here); the graph test alone at worlds 8 (x4), 4, 2; then the whole
# gpu_allreduce suite.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_api, gpu_allreduce of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r118_h200.sh
NAME=r118
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=15000
for cfg in "1 2 3 auto" "1 2 40 auto" "1 2 3 0" "1 2 40 0" "8 1 40 auto"; do
  set -- $cfg
  timeout 60 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 --tokens $3 \
    --fuse-shared $4 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3_f$4.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 fuse $4 rc=$? ($(el))"
  grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3_f$4.log" | cut -c1-160 | head -3
done
unset TPMOE_TIMEOUT_MS
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|cli" "$R/gpu_moe_api.log" | head -10
pack
for w in 8 8 8 8 4 2; do
  GPU_AR_ONLY=graph GPU_AR_WORLD=$w timeout 60 "$B/gpu_allreduce" >> "$R/graph.log" 2>&1
  echo "== graph world $w rc=$? ($(el))"; grep -E "graph:|replays:" "$R/graph.log" | tail -1
done
pack
timeout 200 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|worlds" "$R/gpu_allreduce.log" | head -8
pack
echo "== total $(el)"
