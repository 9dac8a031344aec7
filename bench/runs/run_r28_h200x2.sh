#!/usr/bin/env bash
# run_r28_h200x2.sh - round 28: the one-token routing launch with 1 token's
# registers (88 instead of 192 per thread, the same bits) against the previous
# build (tpmoe_before = commit e427cc4, final8's), TP 1 at 1-2 tokens and TP 2 at
# 1 and 8, fused and unfused, two passes alternating; then gpu_moe.
#   NAME=r28 OUT=/some/dir bash bench/runs/run_r28_h200x2.sh
NAME=${NAME:-r28}
. bench/device_env.sh
for pass in a b; do
  for bin in tpmoe_before tpmoe; do
    for tp in 1 2; do
      n=${bin}_tp${tp}_$pass
      toks=1,2; [ $tp = 2 ] && toks=1,8
      timeout 60 "$B/$bin" bench moe --preset m3 --tokens $toks --tp $tp --fuse-shared both --check 1 --reps 40 \
        --json "$R/$n.json" > "$R/$n.log" 2>&1
      echo "== $n rc=$? ($(el))"
      grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $2, $10, $11, $12, $14, $15, $16, $18}'
    done
  done
done
pack
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
