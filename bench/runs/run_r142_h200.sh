#!/usr/bin/env bash
# run_r142_h200.sh - one H200, into $OUT/r142: the prefill's shared MLP beside the routing, the
# split plan from 8192 tokens, and the session's table.
#  1. gpu_moe (with prefill_overlap_equals_serial: the overlapped MLP gives the serial bits,
#     eager and in a graph, fused split and unfused, wgmma and cuBLAS prefill), gpu_moe_api.
#  2. Plans, whole layer, two passes interleaved:
#       tpmoe bench moe --preset m3 --tokens 1024,2048,4096,6144,8192 --gemm-hold 0 --check 2
#         --fuse-shared 1 --shared-plan slot | --fuse-shared 1 --shared-plan split |
#         --fuse-shared 0 | the last two with --shared-overlap 0 (the MLP after the routing)
#  3. The MoE command (moe_m3_tp1.json, the plot's input):
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r142_h200.sh
NAME=r142
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|overlap|beside the routing" "$1" | head -16; }
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name extra...
  local n=$1; shift
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1024,2048,4096,6144,8192 --gemm-hold 0 --check 2 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s %s (r %s e %s) sel!%s | ", $1, $4, $15, $11, $12, $20}' "$R/$n.log"; echo
}
for p in 1 2; do
  bm "slot_p$p" --fuse-shared 1 --shared-plan slot
  bm "split_p$p" --fuse-shared 1 --shared-plan split
  bm "unf_p$p" --fuse-shared 0
  bm "split0_p$p" --fuse-shared 1 --shared-plan split --shared-overlap 0
  bm "unf0_p$p" --fuse-shared 0 --shared-overlap 0
  pack
done
timeout 300 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe m3 tp1 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1.log" | cut -c1-200
pack
echo "== total $(el)"
