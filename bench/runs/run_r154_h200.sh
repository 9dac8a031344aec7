#!/usr/bin/env bash
# run_r154_h200.sh - one H200, into $OUT/r154: the prefill's down launch chained to gate_up
# (tuning.prefill_down_early: programmatic dependent launch, a per-expert counter of stored
# gate_up tiles).
#   gpu_moe_paths (prefill_early_equals_plain with the chained down, eager and in a graph;
#   prefill_gemm_modes: the persistent forms now chain it by default), gpu_moe, gpu_moe_api;
#   three passes interleaved, fused and unfused:
#     tpmoe bench moe --preset m3 --tokens 64,128,512,1024,2048,4096,8192 --fuse-shared both --check 2
#       --prefill-down-early 1 | --prefill-down-early 0
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r154_h200.sh
NAME=r154
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|T=4500 the early" "$1" | head -12; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name extra...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 64,128,512,1024,2048,4096,8192 --fuse-shared both \
    --check 2 --json "$R/$n.json" "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s: %s %s | ", $1, $2, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "chain_p$p" --prefill-down-early 1
  bm "plain_p$p" --prefill-down-early 0
  pack
done
echo "== total $(el)"
