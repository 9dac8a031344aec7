#!/usr/bin/env bash
# run_r31_h200.sh - routing mode 3 (one launch, router on tensor cores, clusters of 8)
# on one H200: gpu_moe (mode 3 against the reference and the other modes), then the
# layer at 1..256 tokens with mode 3 on its default range (9..256), off (0:0, the
# previous modes), and forced from 1 token (1:256); the phases of mode 3 by stops.
#   NAME=r31 OUT=/some/dir bash bench/runs/run_r31_h200.sh
NAME=${NAME:-r31}
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > |mode 3|Assert|assert" "$R/gpu_moe.log" | head -12
pack
TOK=${TOK:-1,2,4,8,16,32,64,128,192,256}
for v in def:9:256 off:0:0 all:1:256; do
  n=${v%%:*}; rng=${v#*:}
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens $TOK --fuse-shared 1 --check 1 --reps 20 \
    --route-tc $rng --json "$R/route_$n.json" > "$R/route_$n.log" 2>&1
  echo "== bench route $n ($rng) rc=$? ($(el))"
  grep -E "^[0-9]" "$R/route_$n.log" | awk '{print $1, $7, $10, $11, $12, $15, $19, $20}'
  pack
done
for st in 1 2 3; do
  timeout 90 "$B/tpmoe" bench moe --preset m3 --tokens 16,64,256 --fuse-shared 1 --check 0 --reps 20 \
    --route-tc 1:256 --route-stop $st --json "$R/stop$st.json" > "$R/stop$st.log" 2>&1
  echo "== stop $st rc=$? ($(el))"
  grep -E "^[0-9]" "$R/stop$st.log" | awk '{print $1, $7, $10, $11}'
done
pack
echo "== total $(el)"
