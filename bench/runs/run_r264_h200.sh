#!/usr/bin/env bash
# run_r264_h200.sh - one GPU, into $OUT/r264: round 49's routing step by step, and gpu_moe's
# refactored TP-rank check. First every GPU test on the Release binaries (gpu_moe's TP 2 / TP 8
# route_experts_for checks are one loop now), then the trace build's routing alone (mode 3 and
# mode 1's several tiles) with the permutation by every selecting block (default) and by the last
# block, two passes:
#   tpmoe_trace bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
#     --tokens 16,24,32,64,128,256 [--route-perm-min 0 | 12]
# (--route-perm-min 12 also takes mode 1's tiles at 16 and 24 tokens.)
# Binaries: prebuilt/bin.txz: compact Release builds (tpmoe, gpu_act, gpu_moe, gpu_moe_paths,
# gpu_moe_api) and tpmoe_trace (-DTPMOE_MOE_TRACE=ON) of round 49's sources.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r264_h200.sh
NAME=r264
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for pass in a b; do
  for pm in 12 0; do
    tag=${pass}_pm$pm
    timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
      --tokens 16,24,32,64,128,256 --route-perm-min $pm --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    echo "== $tag rc=$? ($(el))"
    grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
  done
  pack
done
echo "== r264 done ($(el))"
