#!/usr/bin/env bash
# run_r102_h200.sh - round 13, one H200, into $OUT/r102: down_prefetch off /
# on: each k_down2 block, resident while k_gate_up2's tail still streams (r95:
# from 63.5 us at 1 token, the wait ends at ~95), prefetches its first item's
# rows into L2 (one cp.async.bulk.prefetch.L2 per row) before its wait. m3 TP 1
# fused at 1-8 tokens, alternating, three passes (results are unchanged: the
# bench's fp64 check runs on each).
# Binaries (prebuilt/bin.txz): tpmoe of the down_prefetch commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r102_h200.sh
NAME=r102
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --tokens 1,2,4,8 --check 1 --reps 40"
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s(x%s,sel!%s) ", $1, $15, $12, $18, $20}'; echo; }
for pass in 1 2 3; do
  for p in 0 1; do
    timeout 90 $M --down-prefetch $p --json "$R/pf${p}_p$pass.json" > "$R/pf${p}_p$pass.log" 2>&1
    echo "== down_prefetch $p pass $pass rc=$? ($(el))"; tt "$R/pf${p}_p$pass.log"
  done
done
pack
echo "== total $(el)"
