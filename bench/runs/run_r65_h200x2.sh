#!/usr/bin/env bash
# run_r65_h200x2.sh - gpu_allreduce of the final tree with the graph-replay
# test alternating the exact two-shot (flag kernels) and an INT4 two-shot
# (the flag-free kernel on its own slots under the default set 10), 100k
# replays. Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r65_h200x2.sh
NAME=${NAME:-r65}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 150 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|graph:" "$R/gpu_allreduce.log" | head -8
pack
