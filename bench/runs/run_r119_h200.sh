#!/usr/bin/env bash
# run_r119_h200.sh - one H200, into $OUT/r119: r118 passed everything but gpu_moe_api's
# cuda_vs_cpu, whose rank threads created their layers (now with the warm-up, which waits for
# the device) while the other rank's first all-reduce already spun: the test now creates both
# layers before either forwards and destroys them after both are done (a barrier each). With the
# ranks sharing the GPU: gpu_moe_api with its CLI case, tpmoe moe EP 2 at 8 and 300 tokens, then
# gpu_moe (the layer's own tests; tpm_cuda_moe_warm is new beside them).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_api, gpu_moe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r119_h200.sh
NAME=r119
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_moe_api.log" | head -10
pack
for cfg in "1 2 8" "2 2 300"; do
  set -- $cfg
  TPMOE_TIMEOUT_MS=15000 timeout 60 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $1 --ep $2 \
    --tokens $3 --iters 2 --check > "$R/moe_tp$1_ep$2_t$3.log" 2>&1
  echo "== tp $1 ep $2 tokens $3 rc=$? ($(el))"
  grep -E "ranks agree|: ok|rror|timeout" "$R/moe_tp$1_ep$2_t$3.log" | cut -c1-160 | head -3
done
pack
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
