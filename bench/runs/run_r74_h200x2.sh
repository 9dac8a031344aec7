#!/usr/bin/env bash
# run_r74_h200x2.sh - round 13's MoE experiment on 2 x H200, into $OUT/r74:
# the decode path's combine run by k_down2 itself (tuning combine_fused 1,
# the new default) against the combine kernel after it (0), the same binary.
# First the MoE GPU tests (gpu_moe compares every k_down2 shape combining
# itself with set 0 and with combine_fused 0, bit for bit; gpu_moe_api), then
# m3 at TP 1 (1, 2, 4, 8 tokens, fused; both settings in alternation, twice)
# and at TP 2 (1, 8 tokens, fused and unfused, both settings).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api (Release, sm_90) of
# commit 7355511 (the option was reverted after this run: slower).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r74_h200x2.sh
NAME=r74
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$R/smi.txt" 2>&1
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 240 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
for pass in 1 2; do
  for cf in 1 0; do
    timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --combine-fused $cf \
      --check 1 --json "$R/tp1_cf${cf}_p$pass.json" > "$R/tp1_cf${cf}_p$pass.log" 2>&1
    echo "== tp1 combine_fused=$cf pass $pass rc=$? ($(el))"
    sed -n '/^tokens/,$p' "$R/tp1_cf${cf}_p$pass.log" | cut -c1-200
  done
done
pack
for cf in 1 0; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both --combine-fused $cf \
    --check 1 --json "$R/tp2_cf$cf.json" > "$R/tp2_cf$cf.log" 2>&1
  echo "== tp2 combine_fused=$cf rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/tp2_cf$cf.log" | cut -c1-200
done
pack
echo "== total $(el)"
