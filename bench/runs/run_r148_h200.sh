#!/usr/bin/env bash
# run_r148_h200.sh - one H200, into $OUT/r148: the prefill combine with every slot's row load
# issued before the first sum (tuning.combine_loads 1, the default in this build) against one
# slot at a time (0), after the gpu_moe split (gpu_moe + gpu_moe_paths).
#   gpu_moe, gpu_moe_paths, gpu_moe_api;
#   A/B, two passes interleaved, fused layer:
#     tpmoe bench moe --preset m3 --tokens 32,128,1024,4096,8192 --fuse-shared 1 --check 2 [--combine-loads 0]
#   the MoE command, three passes (pass 1 -> moe_m3_tp1.json):
#     tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r148_h200.sh
NAME=r148
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe gpu_moe_paths; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name extra...
  local n=$1; shift
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 32,128,1024,4096,8192 --fuse-shared 1 --check 2 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s: %s/%s sel!%s | ", $1, $13, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2; do
  bm "ld1_p$p"
  bm "ld0_p$p" --combine-loads 0
done
pack
for p in 1 2 3; do
  j=$R/moe_m3_tp1.json; [ $p -gt 1 ] && j=$R/moe_m3_tp1_pass$p.json
  timeout 300 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== bench moe m3 tp1 pass $p rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s: %s %s x%s | ", $1, $2, $13, $15, $18}' "$R/bench_moe_tp1_p$p.log"; echo
  pack
done
echo "== total $(el)"
