#!/usr/bin/env bash
# run_r143_h200.sh - one H200, into $OUT/r143: r142's binaries with gpu_moe's new test fixed
# (prefill_overlap_equals_serial freed its reference output before its last comparisons: the
# first 31 bytes then read allocator metadata). gpu_moe, gpu_moe_api, then the MoE
# command three times (pass 1 is moe_m3_tp1.json, the plot's input):
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r143_h200.sh
NAME=r143
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|beside the routing" "$1" | head -16; }
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
for p in 1 2 3; do
  j=$R/moe_m3_tp1.json; [ $p -gt 1 ] && j=$R/moe_m3_tp1_pass$p.json
  timeout 300 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== bench moe m3 tp1 pass $p rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/bench_moe_tp1_p$p.log" | cut -c1-200
  pack
done
echo "== total $(el)"
