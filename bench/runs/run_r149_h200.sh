#!/usr/bin/env bash
# run_r149_h200.sh - one H200, into $OUT/r149: the prefill's early shared gate_up items
# (tuning.prefill_early 1, the default in this build: the gather, the tile table and the
# gate_up launch chained by programmatic dependent launch, the fused shared slot's gate_up
# items run while the routing runs) against the plain chain (0).
#   gpu_moe_paths (prefill_early_equals_plain: the same bits, eager and graph), gpu_moe,
#   gpu_moe_api;
#   three passes interleaved, fused and unfused:
#     tpmoe bench moe --preset m3 --tokens 9,16,24,32,48,64,128,256,512,1024,2048 --fuse-shared both
#       --check 2 [--prefill-early 0]
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r149_h200.sh
NAME=r149
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|early shared" "$1" | head -10; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name extra...
  local n=$1; shift
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 9,16,24,32,48,64,128,256,512,1024,2048 --fuse-shared both \
    --check 2 "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s: %s sel!%s | ", $1, $2, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "early_p$p"
  bm "plain_p$p" --prefill-early 0
  pack
done
echo "== total $(el)"
