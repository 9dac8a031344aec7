#!/usr/bin/env bash
# run_r25_h200.sh - round 25: decode kernel shapes per warp (all the same bits):
# down_kernel 0 (2 rows x 4 chunks), 2 (4 x 2), 4 (8 x 1) with gate_up_pairs 1
# (1 row pair x 4 chunks) or 2 (2 x 2); 1-8 tokens, fused, two passes
# alternating; then gpu_moe. Binaries in prebuilt/bin.txz.
#   NAME=r25 OUT=/some/dir bash bench/runs/run_r25_h200.sh
NAME=${NAME:-r25}
. bench/device_env.sh
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for pass in a b; do
  for cfg in 0:1 2:1 2:2 4:1 4:2; do
    dk=${cfg%:*} gp=${cfg#*:}
    n=dk${dk}_gp${gp}_$pass
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --check 1 --reps 40 \
      --down-kernel $dk --gate-up-pairs $gp --json "$R/$n.json" > "$R/$n.log" 2>&1
    echo "== $n rc=$? ($(el))"
    grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $4, $6, $12, $15, $16, $18}'
  done
done
pack
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
