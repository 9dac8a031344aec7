#!/usr/bin/env bash
# run_r114_h200.sh - one H200, into $OUT/r114: why `tpmoe moe --backend cuda` at EP 2 / TP 8 timed
# out with the ranks sharing the GPU in r111-r113 while gpu_moe_api's TP 2 / EP 2 passed. The
# guess: a rank's first forward runs a first-use initialisation that waits for the device
# (cuBLAS's, used from 5 tokens: the split plan's dense MLP, the router GEMM from 64, the
# prefill), while another rank's all-reduce spins there. At 1-4 tokens the layer runs no cuBLAS
# (the slot plan, the fused routing launch): those should pass. Timeout 8 s per wait.
# Binaries (prebuilt/bin.txz): tpmoe of HEAD (r113's).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r114_h200.sh
NAME=r114
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=8000
for cfg in "1 2 3" "8 1 3" "1 2 40" "8 1 40"; do
  set -- $cfg
  timeout 40 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 --tokens $3 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 rc=$? ($(el))"; grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3.log" | head -3
done
pack
