#!/usr/bin/env bash
# run_r116x2_h200x2.sh - one call on 2 x H200 (the first two-GPU machine lent since final15):
#  1. final17 (bench/runs/run_final17_h200x2.sh): gpu_allreduce, gpu_comm_api, the CUDA MoE CLI at
#     TP 2, the whole all-reduce table, gpu_moe_api, m3 at TP 2 fused / unfused. Commit e5f4fdb
#     and the fail-fast Spin::tick have not run on two GPUs before.
#  2. gpu_allreduce with TPMOE_CUDA_SHARE_GPU=1 over both GPUs: worlds 2..8 with ranks i on GPU
#     i % 2, i.e. real NVLink peers and same-GPU peers in one communicator.
#  3. r116's graph loop on GPU 0 alone (CUDA_VISIBLE_DEVICES=0: the ranks share it), worlds
#     8, 8, 8, 4, 2, now with 32 hardware queues; then tpmoe moe EP 2 / TP 8 @40 there.
# Ran 2026-12-01 on nvidia-h200-x2 (binaries of 7065c16); that session was cut off before its
# results were kept, so none are committed (what its output showed: docs/allreduce_cuda.md).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api, gpu_moe_api of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r116x2_h200x2.sh
bash bench/runs/run_final17_h200x2.sh
NAME=r116x2
. bench/device_env.sh
TPMOE_CUDA_SHARE_GPU=1 timeout 150 "$B/gpu_allreduce" > "$R/gpu_allreduce_share2.log" 2>&1
echo "== gpu_allreduce, ranks shared over 2 GPUs rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|worlds" "$R/gpu_allreduce_share2.log" | head -8
pack
export CUDA_VISIBLE_DEVICES=0
for w in 8 8 8 4 2; do
  GPU_AR_ONLY=graph GPU_AR_WORLD=$w timeout 45 "$B/gpu_allreduce" >> "$R/graph.log" 2>&1
  echo "== one GPU, graph world $w rc=$? ($(el))"; grep -E "graph:|replays:" "$R/graph.log" | tail -1
done
pack
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=8000
for cfg in "1 2 40" "8 1 40"; do
  set -- $cfg
  timeout 30 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 --tokens $3 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3.log" 2>&1
  echo "== one GPU, tp $1 ep $2 tokens $3 rc=$? ($(el))"; grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3.log" | head -3
  pack
done
echo "== total $(el)"
