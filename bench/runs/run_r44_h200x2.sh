#!/usr/bin/env bash
# run_r44_h200x2.sh - the final tree's all-reduce on 2 x H200 in one device
# call (after set 14's removal): gpu_allreduce and gpu_comm_api on the default
# kernel set 10, and sets 5 / 10 side by side at 2-128 MB (outputs compared
# bitwise with set 5's).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r44_h200x2.sh
NAME=${NAME:-r44}
. bench/device_env.sh

for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4 --variants 5,10 \
  --sizes 2M,16M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_sets.log"
pack
echo "== total $(el)"
