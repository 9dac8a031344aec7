#!/usr/bin/env bash
# run_r201_h200.sh - one GPU (H200 asked; an H100 may come):
#   0. on an H200 only: r199's script (r197's and r198's H200 figures) into $OUT/r197 and $OUT/r199;
#   1. on any other card, into $OUT/r201: the GPU tests r198 did not run on round 32's binaries,
#      gpu_moe_paths and gpu_moe_api (r198 ran gpu_moe).
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r201_h200.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/runs/run_r199_h200.sh
  exit
fi
NAME=r201
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
echo "== r201 done ($(el))"
