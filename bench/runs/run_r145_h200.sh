#!/usr/bin/env bash
# run_r145_h200.sh - one H200, into $OUT/r145: gpu_moe_api with its fifth CLI case, EP 2 unfused
# at 300 tokens (two ranks sharing the GPU): EP rank 0's dense shared MLP beside the prefill's
# routing on the side stream's cuBLAS handle, new in round 17.
# Binaries (prebuilt/bin.txz): tpmoe (r143's), gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r145_h200.sh
NAME=r145
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|moe --backend" "$R/gpu_moe_api.log" | head -12
pack
echo "== total $(el)"
