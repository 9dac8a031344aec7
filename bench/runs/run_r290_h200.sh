#!/usr/bin/env bash
# run_r290_h200.sh - one GPU, into $OUT/r290: the final tree's tests that changed after r287 (the
# forward_host helper in gpu_moe, gpu_route_cl and gpu_route_wide; the kernels are r287's).
# Binaries: prebuilt/bin.txz (compact Release GPU tests).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r290_h200.sh
NAME=r290
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_route_cl gpu_moe; do
  timeout 120 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
echo "== r290 done ($(el))"
