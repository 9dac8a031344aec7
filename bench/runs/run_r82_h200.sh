#!/usr/bin/env bash
# run_r82_h200.sh - round 12's third MoE experiment on one H200, into $OUT/r82:
# the own wgmma prefill GEMM with an expert's partial last 64-row chunk run
# with the wgmma sides swapped (prefill_swap_max: tokens as the N side, 8-row
# steps), one CTA per tile (prefill_cluster 0), against the same without swap
# and the persistent forms (2, 3; they ignore swap), all in bands of 16.
# First gpu_moe (prefill_gemm_modes compares the swapped form with the plain
# one bit for bit and prints how many outputs differ, if any), then m3 at TP 1,
# fused, 128 / 1024 / 4096 / 8192 tokens, the variants in alternation, twice.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r82_h200.sh
NAME=r82
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$R/smi.txt" 2>&1
TPMOE_TOOL=$B/tpmoe timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep -E "differ|T=5000  prefill gemm 1[123]" "$R/gpu_moe.log" | head -12
pack
V="0:0 0:56 0:32 2:0 3:0"
for pass in 1 2; do
  for v in $V; do
    pc=${v%%:*}; sw=${v##*:}
    timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 128,1024,4096,8192 --fuse-shared 1 --prefill-cluster $pc \
      --prefill-band 16 --prefill-swap $sw --check 1 --json "$R/pc${pc}_s${sw}_p$pass.json" > "$R/pc${pc}_s${sw}_p$pass.log" 2>&1
    echo "== prefill_cluster=$pc swap=$sw pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/pc${pc}_s${sw}_p$pass.log" | awk '{print $1, $12, $15, $18, $19}'
  done
  pack
done
echo "== total $(el)"
