#!/usr/bin/env bash
# run_r147_h200.sh - one H200, into $OUT/r147: routing mode 4 (the whole routing of up to 8
# tokens by ONE cluster of 16 CTAs, router slices in shared memory by bulk copies, no global
# tickets) against mode 1 (64 blocks, two block-done tickets).
#   gpu_moe, gpu_moe_api (mode 4 is the default up to 8 tokens in this build);
#   three passes interleaved, whole layer and routing net:
#     tpmoe bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 2 [--route-cl 0]
#   mode 4's phases: the same with --route-stop 1 | 2 | 3 (one pass each).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r147_h200.sh
NAME=r147
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader > "$R/gpu.txt" 2>&1
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|mode 4" "$R/gpu_moe.log" | head -12
timeout 200 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe_api.log" | head -6
bm() { # name extra...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 2 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s %s/%s sel!%s | ", $1, $7, $11, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "cl_p$p"
  bm "fused_p$p" --route-cl 0
done
for st in 1 2 3; do bm "cl_stop$st" --route-stop $st; done
pack
echo "== total $(el)"
