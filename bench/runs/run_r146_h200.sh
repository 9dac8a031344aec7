#!/usr/bin/env bash
# run_r146_h200.sh - one H200, into $OUT/r146: gpu_moe after its layer set-up was shared by
# run_gpu and run_stream (new_layer; no library change since r143).
# Binaries (prebuilt/bin.txz): gpu_moe of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r146_h200.sh
NAME=r146
. bench/device_env.sh
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -12
pack
echo "== total $(el)"
