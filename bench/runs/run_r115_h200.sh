#!/usr/bin/env bash
# run_r115_h200.sh - one H200, into $OUT/r115: the final tree's GPU tests on one GPU: gpu_moe
# (the layer against the fp64 / CPU references, fused vs unfused, every path), gpu_moe_api (TP 2 /
# EP 2 with the two ranks sharing the GPU) and gpu_allreduce (worlds 1..8 sharing the GPU,
# TPMOE_CUDA_SHARE_GPU=1, set by the tests themselves on a one-GPU machine).
# Binaries (prebuilt/bin.txz): gpu_moe, gpu_moe_api, gpu_allreduce, tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r115_h200.sh
NAME=r115
. bench/device_env.sh
export TPMOE_TOOL=$B/tpmoe
for t in gpu_allreduce gpu_moe_api gpu_moe; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ|GPU|graph:|skipped" "$R/$t.log" | head -12
done
pack
