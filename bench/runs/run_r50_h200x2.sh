#!/usr/bin/env bash
# run_r50_h200x2.sh - the final tree's all-reduce after folding the two-shot
# kernels' shared prologue into Ctx::begin (no change in what they compute):
# gpu_allreduce on the default set 10, on set 9 (the warp-specialized kernel
# at every two-shot size) and on set 1 (twoshot_kernel), gpu_comm_api, and
# sets 5 / 10 side by side at 2-96 MB (outputs compared bitwise with 5's).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r50_h200x2.sh
NAME=${NAME:-r50}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }

for v in 9 1; do
  TPMOE_CUDA_AR_VARIANT=$v timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v$v.log" 2>&1
  echo "== gpu_allreduce (set $v) rc=$? ($(el))"; ok "$R/gpu_allreduce_v$v.log"
done
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t (default) rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4 --variants 5,10 \
  --sizes 2M,32M,96M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_sets.log"
pack
echo "== total $(el)"
