#!/usr/bin/env bash
# run_r29_h200x2.sh - round 29: at TP 2 (inter/tp = 1536: half-size items), 1 gate/up
# row pair per warp against 2 (down 4 x 2 in both), 1 and 8 tokens, fused and
# unfused, two passes alternating. Binaries in prebuilt/bin.txz (the tree's head).
#   NAME=r29 OUT=/some/dir bash bench/runs/run_r29_h200x2.sh
NAME=${NAME:-r29}
. bench/device_env.sh
for pass in a b; do
  for gp in 1 2; do
    n=tp2_gp${gp}_$pass
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both --check 1 --reps 40 \
      --gate-up-pairs $gp --json "$R/$n.json" > "$R/$n.log" 2>&1
    echo "== $n rc=$? ($(el))"
    grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $2, $10, $12, $14, $15, $16, $18}'
  done
done
pack
echo "== total $(el)"
