#!/usr/bin/env bash
# run_r171_h200.sh - one H200, into $OUT/r171: round 27's final library (mode 1 up to 24 tokens).
#   1. gpu_moe_paths, gpu_moe, gpu_moe_api;
#   2. the routing and the layer, m3, fused, 1-256 tokens (two passes), deepseek-v3 and gpt-oss
#      1-24 tokens (one pass);
#   3. the issue's MoE command, three passes (pass 1 -> moe_m3_tp1.json, 2, 3 -> _pass2, _pass3):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit before
# this script's.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r171_h200.sh
NAME=r171
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
TR=1,2,3,4,5,6,7,8,9,12,16,20,24,25,32,64,128,129,256
for pass in a b; do bm route_$pass $TR --preset m3 --fuse-shared 1 --check 1; pack; done
bm dsv3 1,2,4,8,9,16,24,25,32 --preset deepseek-v3 --fuse-shared 1 --check 2
bm oss 1,2,4,8,9,16,24,25,32 --preset gpt-oss --check 2
pack
for p in 1 2 3; do
  j=moe_m3_tp1.json; [ $p -gt 1 ] && j=moe_m3_tp1_pass$p.json
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== pass $p rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1_p$p.log"; echo
  pack
done
echo "== total $(el)"
