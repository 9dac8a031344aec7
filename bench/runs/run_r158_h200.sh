#!/usr/bin/env bash
# run_r158_h200.sh - one H200, into $OUT/r158: the prefill combine's occupancy (round 24, third
# step). r157: the bf16 combine is bound by its row loads in flight (44 registers: 40 warps per
# SM). TPM_EXP_MINB (one binary): 1 = fc0eccf's kernel; 6 = __launch_bounds__(256, 6) (39
# registers, 48 warps); 8 = (256, 8) (32 registers, 64 warps, 32 bytes of spills).
#   1. the same bits: `tpmoe moe --backend cuda --output`, 6 and 8 against 1, three mini presets
#      at 13 .. 1500 tokens;
#   2. gpu_moe_paths with TPM_EXP_MINB=8;
#   3. tpmoe bench moe --preset m3 --tokens 128,1024,4096,8192 --fuse-shared 1 --check 2 --gemm-hold 0,
#      the three variants, three passes interleaved.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_paths.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r158_h200.sh
NAME=r158
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
nd=0; nsame=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 13 40 300 1500; do
    for v in 1 6 8; do
      TPM_EXP_MINB=$v timeout 60 "$B/tpmoe" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
        --output "$R/bits_$v.st" > "$R/bits_${v}_${p}_$t.log" 2>&1 || echo "rc!=0 $v $p $t"
      [ $v = 1 ] && continue
      if cmp -s "$R/bits_1.st" "$R/bits_$v.st"; then nsame=$((nsame+1)); else nd=$((nd+1)); echo "DIFF $p $t var $v"; fi
    done
  done
done
rm -f "$R"/bits_*.st
echo "== bits: $nsame same, $nd differ ($(el))"
TPM_EXP_MINB=8 timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths minb 8 rc=$? ($(el))"; ok "$R/gpu_moe_paths.log"
pack
pf() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s: tot %s comb %s sel!%s | ", $1, $15, $13, $20}' "$R/$1.log"; echo; }
for p in 1 2 3; do
  for v in 1 6 8; do
    TPM_EXP_MINB=$v timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 128,1024,4096,8192 --fuse-shared 1 \
      --check 2 --gemm-hold 0 --json "$R/v${v}_p$p.json" > "$R/v${v}_p$p.log" 2>&1
    echo "== v$v p$p rc=$? ($(el))"; pf v${v}_p$p
  done
  pack
done
echo "== total $(el)"
