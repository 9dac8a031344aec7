#!/usr/bin/env bash
# run_r84_h200.sh - round 12's L2 prefetch experiment on one H200, into $OUT/r84:
# the persistent forms of the own wgmma prefill GEMM (the defaults: CTAs below
# 4096 tokens, 2-CTA clusters from it, bands of 16) with the weight boxes
# prefetched into L2 N k-blocks ahead of their loads (prefill_prefetch), N = 0,
# 2, 4, 8, 16, the same binary. r83 found the consumer warps waiting for their
# stages ~20% of the time at 8192 tokens.
# First gpu_moe (the prefetching forms against the default, bit for bit), then
# m3 at TP 1, fused, 1024 / 2048 / 4096 / 8192 tokens, in alternation, twice.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r84_h200.sh
NAME=r84
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|differ" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
pack
for pass in 1 2; do
  for pf in 0 2 4 8 16; do
    timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1024,2048,4096,8192 --fuse-shared 1 --prefill-prefetch $pf \
      --check 1 --json "$R/pf${pf}_p$pass.json" > "$R/pf${pf}_p$pass.log" 2>&1
    echo "== prefetch=$pf pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/pf${pf}_p$pass.log" | awk '{print $1, $12, $15, $18}'
  done
  pack
done
echo "== total $(el)"
