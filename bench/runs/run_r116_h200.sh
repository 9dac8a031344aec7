#!/usr/bin/env bash
# run_r116_h200.sh - one H200, into $OUT/r116 (written for the next session; not run yet): r115's
# unexplained timeout of the world-8 graph replays with the ranks sharing the GPU. The graph test
# alone (GPU_AR_ONLY=graph), five times at world 8 and twice at worlds 2, 3, 4 (the tests now ask
# for 32 hardware queues, CUDA_DEVICE_MAX_CONNECTIONS); then 20 replays at world 8 under
# compute-sanitizer memcheck (a write past a rank's buffer into its neighbour's control words is
# one candidate); then tpmoe moe at EP 2 / TP 8, which timed out in r113 / r114 with 8 queues.
# Binaries (prebuilt/bin.txz): gpu_allreduce, tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r116_h200.sh
NAME=r116
. bench/device_env.sh
export GPU_AR_ONLY=graph
for w in 8 8 8 8 8 2 2 3 3 4 4; do
  GPU_AR_WORLD=$w timeout 60 "$B/gpu_allreduce" >> "$R/graph.log" 2>&1
  echo "== world $w rc=$? ($(el))"; grep -E "graph:|replays:" "$R/graph.log" | tail -2
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$CS" ]; then
  GPU_AR_WORLD=8 GPU_AR_REPLAYS=20 timeout 240 "$CS" --tool memcheck "$B/gpu_allreduce" > "$R/memcheck.log" 2>&1
  echo "== memcheck rc=$? ($(el))"; grep -E "ERROR SUMMARY|Invalid|graph:|replays:" "$R/memcheck.log" | head -8
else
  echo "== no compute-sanitizer"
fi
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=8000
for cfg in "1 2 3" "1 2 40" "8 1 40" "2 2 300"; do
  set -- $cfg
  timeout 40 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 --tokens $3 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 rc=$? ($(el))"; grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3.log" | head -3
done
pack
