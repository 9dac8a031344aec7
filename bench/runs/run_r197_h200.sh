#!/usr/bin/env bash
# run_r197_h200.sh - one H200, into $OUT/r197: round 31's defaults (mode 3 with pipelined loads,
# 25-256 tokens) on the issue's machine (r195 ran them on an H100; its GPU tests passed there).
#   1. gpu_moe, gpu_moe_paths, gpu_moe_api (Release, the new defaults);
#   2. routing net, m3, fused, two passes, JSON: the defaults at 1-256 tokens, and mode 3 forced
#      with the direct and the pipelined loads at 25-256 (r194's comparison, now with JSON);
#   3. the issue's MoE command, two passes (-> moe_m3_tp1.json, moe_m3_tp1_b.json):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# r196 landed on an H100; r197 is the same script with a guard: it stops unless the card is an H200.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped; 735cafe since r198).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r197_h200.sh
NAME=r197
. bench/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader)"; exit 3; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe gpu_moe_paths gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-12s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
for pass in a b; do
  bm default_$pass 1,8,9,12,16,17,20,24,25,32,64,96,128,160,192,256
  bm direct_$pass 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads direct
  bm pipe_$pass 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads pipe
  pack
done
for pass in a b; do
  j=moe_m3_tp1.json; [ $pass = b ] && j=moe_m3_tp1_b.json
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_$pass.log" 2>&1
  echo "== table $pass rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1_$pass.log"; echo
  pack
done
echo "== total $(el)"
