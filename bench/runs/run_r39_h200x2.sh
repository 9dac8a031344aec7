#!/usr/bin/env bash
# run_r39_h200x2.sh - gpu_moe_api (TP 2 and EP 2 through the public API and the CLI, against the
# CPU backend) on the submitted head, 2 x H200.
#   NAME=r39 OUT=/some/dir bash bench/runs/run_r39_h200x2.sh
NAME=${NAME:-r39}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe_api.log" | head -6
timeout 60 "$B/tpmoe" moe --preset m3-mini --tokens 64 --backend cuda --tp 2 --check > "$R/moe_cuda_cli.log" 2>&1
echo "== tpmoe moe --backend cuda --tp 2 rc=$? ($(el))"; tail -2 "$R/moe_cuda_cli.log"
pack
