#!/usr/bin/env bash
# run_r27_h200x2.sh - round 27: more rows per warp (all the same bits):
# down_kernel 2 (4 rows x 2 chunks) or 5 (6 x 2), gate_up_pairs 2 (2 row pairs x 2)
# or 3 (3 x 2); TP 1 at 1-8 tokens and TP 2 at 1 and 8, fused, two passes
# alternating; then gpu_moe. Binaries in prebuilt/bin.txz.
#   NAME=r27 OUT=/some/dir bash bench/runs/run_r27_h200x2.sh
NAME=${NAME:-r27}
. bench/device_env.sh
for pass in a b; do
  for cfg in 2:2 5:2 2:3 5:3; do
    dk=${cfg%:*} gp=${cfg#*:}
    for tp in 1 2; do
      n=tp${tp}_dk${dk}_gp${gp}_$pass
      toks=1,2,4,8; [ $tp = 2 ] && toks=1,8
      timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens $toks --tp $tp --fuse-shared 1 --check 1 --reps 40 \
        --down-kernel $dk --gate-up-pairs $gp --json "$R/$n.json" > "$R/$n.log" 2>&1
      echo "== $n rc=$? ($(el))"
      grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $6, $12, $15, $16, $18}'
    done
  done
done
pack
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
