#!/usr/bin/env bash
# run_r87_h200.sh - one H200, into $OUT/r87: the final tree (split shared plan
# from 5 tokens) re-checked: gpu_moe, gpu_moe_api, then m3 at TP 1, 1-8 tokens,
# fused and unfused, twice.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the final tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r87_h200.sh
NAME=r87
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
for pass in 1 2; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,8 --fuse-shared both \
    --check 1 --json "$R/moe_p$pass.json" > "$R/moe_p$pass.log" 2>&1
  echo "== bench pass $pass rc=$? ($(el))"
  sed -n '/^[0-9]/p' "$R/moe_p$pass.log" | awk '{print $1, $2, $4, $10, $12, $15, $18}'
done
pack
echo "== total $(el)"
