#!/usr/bin/env bash
# run_r123_h200.sh - one H200, into $OUT/r123: r122's TP 2 x EP 2 at 256 tokens (world 4 sharing the
# GPU) timed out with three rank threads waiting for the driver's lock inside cuLaunchKernelEx of
# cuBLAS's router GEMM, a kernel the warm-up had launched: a launch that grows the local-memory
# reservation waits for the device, and by default the reservation shrinks after. tpmoe now sets
# cudaDeviceLmemResizeToMax in this mode. The case twice, then TP 2 x EP 2 at 300 and EP 2 at 40.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r123_h200.sh
NAME=r123
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1
for cfg in "2 2 256" "2 2 256" "2 2 300" "1 2 40"; do
  set -- $cfg
  TPMOE_TIMEOUT_MS=15000 timeout 40 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 \
    --tokens $3 --iters 2 --check >> "$R/moe_tp$1_ep$2_t$3.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 rc=$? ($(el))"
  grep -E "ranks agree|: ok|: FAIL|rror|timeout" "$R/moe_tp$1_ep$2_t$3.log" | cut -c1-150 | tail -2
done
pack
echo "== total $(el)"
