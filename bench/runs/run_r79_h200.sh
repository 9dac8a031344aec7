#!/usr/bin/env bash
# run_r79_h200.sh - round 12's MoE experiment on one H200, into $OUT/r79:
# the persistent forms of the own wgmma prefill GEMM (prefill_cluster 2:
# persistent 2-CTA clusters, row-tile pairs sharing the weight tile and odd
# last row tiles sharing the A tile; 3: persistent CTAs without clusters)
# against one CTA per tile (0, the default), the same binary.
# First gpu_moe (prefill_gemm_modes compares every form with the default bit
# for bit, now also on a preset with odd weight-block counts), then m3 at TP 1,
# fused, 128 / 1024 / 4096 / 8192 tokens, the three forms in alternation, twice.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r79_h200.sh
NAME=r79
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$R/smi.txt" 2>&1
TPMOE_TOOL=$B/tpmoe timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep "prefill gemm [67]" "$R/gpu_moe.log" | head -4
pack
for pass in 1 2; do
  for pc in 0 2 3; do
    timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 128,1024,4096,8192 --fuse-shared 1 --prefill-cluster $pc \
      --check 1 --json "$R/pc${pc}_p$pass.json" > "$R/pc${pc}_p$pass.log" 2>&1
    echo "== prefill_cluster=$pc pass $pass rc=$? ($(el))"
    sed -n '/^tokens/,$p' "$R/pc${pc}_p$pass.log" | cut -c1-200
  done
  pack
done
echo "== total $(el)"
