#!/usr/bin/env bash
# run_r26_h200x2.sh - round 26: gate_up_pairs 2 (2 row pairs x 2 chunks for every
# item) against 3 (the fused shared slot's pre-routing items as 1 x 4: twice as
# many, so more blocks stream beside the routing); TP 1 at 1-8 tokens and TP 2 at
# 1 and 8, fused, two passes alternating; then gpu_moe. Binaries in prebuilt/bin.txz.
#   NAME=r26 OUT=/some/dir bash bench/runs/run_r26_h200x2.sh
NAME=${NAME:-r26}
. bench/device_env.sh
for pass in a b; do
  for gp in 2 3; do
    for tp in 1 2; do
      n=tp${tp}_gp${gp}_$pass
      toks=1,2,4,8; [ $tp = 2 ] && toks=1,8
      timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens $toks --tp $tp --fuse-shared 1 --check 1 --reps 40 \
        --gate-up-pairs $gp --json "$R/$n.json" > "$R/$n.log" 2>&1
      echo "== $n rc=$? ($(el))"
      grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $4, $6, $10, $12, $14, $15, $16, $18}'
    done
  done
done
pack
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
