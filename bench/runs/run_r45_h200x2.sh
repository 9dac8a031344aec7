#!/usr/bin/env bash
# run_r45_h200x2.sh - the default set's warp-specialized two-shot on a balanced
# grid (as few CTAs as give the same number of column rounds) on 2 x H200 in
# one device call: gpu_allreduce on the default set 10, then sets 5, 9 (the
# same kernel on min(columns, SMs) CTAs) and 10 side by side (outputs compared
# bitwise with set 5's).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r45_h200x2.sh
NAME=${NAME:-r45}
. bench/device_env.sh

timeout 200 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_allreduce.log" | head -8
pack
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6 --variants 5,9,10 \
  --sizes 16M,32M,64M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 9 / 10 rc=$? ($(el))"
cut -c1-220 "$R/bench_allreduce_sets.log"
pack
echo "== total $(el)"
