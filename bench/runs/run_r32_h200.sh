#!/usr/bin/env bash
# run_r32_h200.sh - routing mode 3 after r31 (non-volatile mma interleaving the n-tiles,
# the bias in shared memory, the ticket lines prefetched into L2; mode 1 prefetches its
# ticket lines too), one H200: gpu_moe; the layer at 1..256 tokens with mode 3 on its
# default range, off, and from 1 token; mode 3 over 2..16 clusters of 8; the phases by stops.
#   NAME=r32 OUT=/some/dir bash bench/runs/run_r32_h200.sh
NAME=${NAME:-r32}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > |not available|Assert|assert" "$R/gpu_moe.log" | head -8
pack
TOK=${TOK:-1,2,4,8,16,32,64,128,192,256}
run() { # name, extra args...
  n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --reps 20 "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "== $n ($*) rc=$? ($(el))"
  grep -E "^# T=" "$R/$n.log" | head -12
  grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $7, $10, $11, $12, $15, $19, $20}'
}
run route_def --tokens $TOK --check 1
run route_off --tokens $TOK --check 1 --route-tc 0:0
run route_all --tokens 1,2,4,8 --check 1 --route-tc 1:256
pack
for c in 2 4 8 12 16; do run cl$c --tokens 16,64,128,256 --check 1 --route-tc 1:256 --route-tc-clusters $c; done
pack
for st in 1 2 3; do
  run tcstop$st --tokens 16,64,256 --check 0 --route-tc 1:256 --route-stop $st
  run f1stop$st --tokens 1,8 --check 0 --route-tc 0:0 --route-stop $st
done
pack
echo "== total $(el)"
