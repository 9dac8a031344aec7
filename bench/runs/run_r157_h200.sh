#!/usr/bin/env bash
# run_r157_h200.sh - one H200, into $OUT/r157: the prefill combine's loads (round 24, second
# step). r156 had k_combine's bf16 rows 12-17% slower with the slots' indices read first AND the
# rows read with ld.global.cg; this call separates the two (TPM_EXP_COMB, one binary):
#   0 = fc0eccf's loop; 1 = the indices of 8 slots first (50 registers); 2 = of 4 slots first
#   (42 registers, fc0eccf's occupancy); 3 = fc0eccf's loop with ld.global.cg row loads.
#   1. the same bits: `tpmoe moe --backend cuda --output`, variants 1-3 against 0, three mini
#      presets at 13 .. 1500 tokens;
#   2. gpu_moe_paths with TPM_EXP_COMB=2;
#   3. tpmoe bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --check 2 --gemm-hold 0,
#      the four variants, three passes interleaved.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_paths.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r157_h200.sh
NAME=r157
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
nd=0; nsame=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 13 40 300 1500; do
    for v in 0 1 2 3; do
      TPM_EXP_COMB=$v timeout 60 "$B/tpmoe" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
        --output "$R/bits_$v.st" > "$R/bits_${v}_${p}_$t.log" 2>&1 || echo "rc!=0 $v $p $t"
      [ $v = 0 ] && continue
      if cmp -s "$R/bits_0.st" "$R/bits_$v.st"; then nsame=$((nsame+1)); else nd=$((nd+1)); echo "DIFF $p $t var $v"; fi
    done
  done
done
rm -f "$R"/bits_*.st
echo "== bits: $nsame same, $nd differ ($(el))"
TPM_EXP_COMB=2 timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths comb 2 rc=$? ($(el))"; ok "$R/gpu_moe_paths.log"
pack
pf() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s: tot %s comb %s sel!%s | ", $1, $15, $13, $20}' "$R/$1.log"; echo; }
for p in 1 2 3; do
  for v in 0 1 2 3; do
    TPM_EXP_COMB=$v timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 \
      --check 2 --gemm-hold 0 --json "$R/v${v}_p$p.json" > "$R/v${v}_p$p.log" 2>&1
    echo "== v$v p$p rc=$? ($(el))"; pf v${v}_p$p
  done
  pack
done
echo "== total $(el)"
