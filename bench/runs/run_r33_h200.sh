#!/usr/bin/env bash
# run_r33_h200.sh - routing mode 3 with its fragments loaded straight into registers
# (route_tc_loads 1, direct) against the cp.async ring of r32 (0) and the previous modes,
# one H200: gpu_moe (ring and direct give the same bits); the layer at 1..256 tokens; the
# cluster count; the phases by stops.
#   NAME=r33 OUT=/some/dir bash bench/runs/run_r33_h200.sh
NAME=${NAME:-r33}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|rel err .* > |not available|Assert|assert" "$R/gpu_moe.log" | head -8
pack
TOK=${TOK:-1,2,4,8,16,24,32,48,64,96,128,192,256}
run() { # name, extra args...
  n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --reps 20 "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "== $n ($*) rc=$? ($(el))"
  grep -E "^# T=" "$R/$n.log" | head -3
  grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $7, $10, $11, $12, $15, $19, $20}'
}
run direct --tokens $TOK --check 1 --route-tc 1:256 --route-tc-loads direct
run ring --tokens $TOK --check 1 --route-tc 1:256 --route-tc-loads ring
run off --tokens $TOK --check 1 --route-tc 0:0
pack
for c in 8 12 16; do run dcl$c --tokens 32,64,128,256 --check 0 --route-tc 1:256 --route-tc-loads direct --route-tc-clusters $c; done
pack
for st in 1 2 3; do
  run dstop$st --tokens 16,64,256 --check 0 --route-tc 1:256 --route-tc-loads direct --route-stop $st
done
pack
echo "== total $(el)"
