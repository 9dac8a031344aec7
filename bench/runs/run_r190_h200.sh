#!/usr/bin/env bash
# run_r190_h200.sh - one H200, into $OUT/r190: round 30 (2bb3d85) on the issue's machine, the same
# binaries as r189 (which ran on an H100 because no H200 was lent).
#   1. routing net, m3, fused, 1-256 tokens: round 30 against 5759d48 (both -DTPMOE_MOE_TRACE=ON
#      builds, tracing off), two passes each, interleaved;
#   2. mode 3's tail with the first / last block marks (--trace-route 100), round 30's trace build;
#   3. the issue's MoE command, two passes, Release build (-> moe_m3_tp1.json, moe_m3_tp1_b.json):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   4. gpu_moe_paths, gpu_moe, gpu_moe_api (Release) where time is left.
# Binaries: prebuilt/bin.txz as in r189 (compact builds, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r190_h200.sh
NAME=r190
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # name binary tokens args...
  local n=$1 b=$2 tk=$3; shift 3
  timeout 150 "$B/$b" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-16s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
TR=1,2,4,8,9,12,16,17,20,24,25,32,64,128,256
for pass in a b; do
  bm route_new_$pass tpmoe_trace $TR --preset m3 --fuse-shared 1 --check 1
  bm route_head_$pass tpmoe_head $TR --preset m3 --fuse-shared 1 --check 1
  pack
done
timeout 120 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --check 1 --gemm-hold 0 --trace-route 100 \
  --tokens 17,24,25,32,64,128 > "$R/trace.log" 2>&1
echo "== trace rc=$? ($(el))"; grep "^# T=.*\(routing mode\|mode 3, first\)" "$R/trace.log" | sed 's/(medians of 100 replays)//; s/fused=1 //'
pack
bm route_rel tpmoe $TR --preset m3 --fuse-shared 1 --check 1
for pass in a b; do
  j=moe_m3_tp1.json; [ $pass = b ] && j=moe_m3_tp1_b.json
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_$pass.log" 2>&1
  echo "== table $pass rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1_$pass.log"; echo
  pack
done
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
  pack
done
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
