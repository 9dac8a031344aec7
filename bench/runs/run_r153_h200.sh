#!/usr/bin/env bash
# run_r153_h200.sh - one H200, into $OUT/r153: the prefill's early shared gate_up items in the
# persistent 2-CTA clusters too (4096-8191 tokens, the fused slot plan).
#   gpu_moe_paths (prefill_early_equals_plain now at 4100 and 4500 tokens too), gpu_moe, gpu_moe_api;
#   three passes interleaved, fused layer:
#     tpmoe bench moe --preset m3 --tokens 2048,3072,4096,5120,6144,8191 --fuse-shared 1 --check 2
#       --prefill-early 8191 | --prefill-early 4095 (the default: the persistent CTAs only)
#   then the command once:
#     tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r153_h200.sh
NAME=r153
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|T=4[15]00 the early" "$1" | head -12; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name extra...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 2048,3072,4096,5120,6144,8191 --fuse-shared 1 \
    --check 2 --json "$R/$n.json" "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s: %s %s %s | ", $1, $4, $15, $19, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "early_p$p" --prefill-early 8191
  bm "plain_p$p" --prefill-early 4095
  pack
done
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== issue table rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s | ", $1, $2, $4, $15, $18, $20}' "$R/bench_moe_tp1.log"; echo
pack
echo "== total $(el)"
