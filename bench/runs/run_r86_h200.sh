#!/usr/bin/env bash
# run_r86_h200.sh - one H200, into $OUT/r86: the fused layer's shared plan at
# 3-8 tokens now that the GEMVs are faster than when the split point (4) was
# set in round 3 (r85: 4 tokens slot 419.2-419.5 us vs split 425.3-427.6): m3,
# TP 1, fused, the plan auto (split from 4, beside the routing) against slot
# (the shared slot in the GEMV launches), in alternation, three passes.
# Binaries (prebuilt/bin.txz): tpmoe of the final16_moe commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r86_h200.sh
NAME=r86
. bench/device_env.sh
for pass in 1 2 3; do
  for pl in auto slot; do
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 3,4,5,6,7,8 --fuse-shared 1 --shared-plan $pl \
      --check 1 --json "$R/${pl}_p$pass.json" > "$R/${pl}_p$pass.log" 2>&1
    echo "== plan=$pl pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/${pl}_p$pass.log" | awk '{print $1, $4, $10, $12, $15, $18}'
  done
done
pack
echo "== total $(el)"
