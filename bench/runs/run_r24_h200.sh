#!/usr/bin/env bash
# run_r24_h200.sh - round 24: k_down2's shapes per warp (down_kernel 0: 2 rows x 4
# chunks, 2: 4 x 2, 3: 1 x 8; the same bits), decode 1-8 tokens, fused, two
# passes alternating; then gpu_moe (the shapes against set 0 bit for bit, EP
# with every kernel set). Binaries in prebuilt/bin.txz.
#   NAME=r24 OUT=/some/dir bash bench/runs/run_r24_h200.sh
NAME=${NAME:-r24}
. bench/device_env.sh
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for pass in a b; do
  for dk in 0 2 3; do
    n=down${dk}_$pass
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --check 1 --reps 40 \
      --down-kernel $dk --json "$R/$n.json" > "$R/$n.log" 2>&1
    echo "== $n rc=$? ($(el))"
    grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $4, $6, $10, $12, $15, $16, $18}'
  done
done
pack
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > " "$R/gpu_moe.log" | head -8
pack
echo "== total $(el)"
