#!/usr/bin/env bash
# run_r99_h200.sh - one H200, into $OUT/r99: the final tree (the two-stage kernels instantiated for 1-2 tokens only) after the
# gate_up_rows refactor (one load / FMA helper for both forms; PTX identical up
# to two accumulator registers' names): gpu_moe, gpu_moe_api, and m3 TP 1
# fused at 1-8 tokens, two passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_api, gpu_moe of the final tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r99_h200.sh
NAME=r99
. bench/device_env.sh
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 240 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$R/$t.log" | head -8
done
pack
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s(x%s) ", $1, $15, $18}'; echo; }
for pass in 1 2; do
  timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --tokens 1,2,3,4,8 --check 1 --reps 40 \
    --json "$R/moe_p$pass.json" > "$R/moe_p$pass.log" 2>&1
  echo "== pass $pass rc=$? ($(el))"; tt "$R/moe_p$pass.log"
done
pack
echo "== total $(el)"
