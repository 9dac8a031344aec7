#!/usr/bin/env bash
# run_r159_h200.sh - one H200, into $OUT/r159: the final library of the sixth 2026-12-02 session
# (the prefill combine capped at 32 registers, round 24).
#   gpu_moe_paths, gpu_moe, gpu_moe_api;
#   the MoE command, three passes (pass 1 -> moe_m3_tp1.json, 2, 3 -> _pass2, _pass3):
#     tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r159_h200.sh
NAME=r159
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
for p in 1 2 3; do
  j=moe_m3_tp1.json; [ $p -gt 1 ] && j=moe_m3_tp1_pass$p.json
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== pass $p rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s | ", $1, $2, $4, $15, $18, $20}' "$R/bench_moe_tp1_p$p.log"; echo
  pack
done
echo "== total $(el)"
