#!/usr/bin/env bash
# run_r139_h200.sh - one H200, into $OUT/r139: the routing's loads issued together.
#  - select_token (k_select, routing modes 0 and 2): the 3 slices of every expert's logit and the
#    bias loaded before the first add (the runtime slice loop had put each L2 load behind the
#    previous add: 12 dependent trips per token at 128 experts);
#  - k_route_fused's slice sums (mode 1): one 16-byte load per slice for four experts (the
#    scalar form spent ~20 instructions of address arithmetic per load, r138's SASS page).
# Same bits by construction; gpu_moe and gpu_moe_api check them against the CPU reference.
# A/B, routing net of the harness (rnet_us), two passes of each binary, interleaved:
#   tpmoe bench moe --preset m3 --tokens 1,2,3,4,6,8,16,32,64,128,129,256,512,1024,8192
#     --gemm-hold 0 --check 2 --fuse-shared 1 --shared-plan slot
# Binaries (prebuilt/bin.txz): head (tpmoe before), tpmoe, gpu_moe, gpu_moe_api (after).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r139_h200.sh
NAME=r139
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
bm() { # name binary
  timeout 200 "$B/$2" bench moe --preset m3 --tokens 1,2,3,4,6,8,16,32,64,128,129,256,512,1024,8192 \
    --gemm-hold 0 --check 2 --fuse-shared 1 --shared-plan slot > "$R/$1.log" 2>&1
  echo "== $1 rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s/%s ", $1, $11, $20}' "$R/$1.log"; echo
}
for p in 1 2; do bm "head_p$p" head; bm "new_p$p" tpmoe; done
pack
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
