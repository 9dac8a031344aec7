#!/usr/bin/env bash
# run_r160_h200.sh - one H200, into $OUT/r160: the prefill gather's index loads (round 24, fourth
# step). k_gather stores each token's 16-byte piece to its K rows, reading the K row indices one
# by one between the stores (the compiler cannot hoist them: the stores may alias them).
# TPM_EXP_GATHER (one binary): 0 = that kernel (32 registers); 1 = the K indices read first
# through restrict pointers (37 registers); 2 = 1 under __launch_bounds__(256, 8) (32 registers).
#   1. the same bits: `tpmoe moe --backend cuda --output`, 1 and 2 against 0, three mini presets
#      at 13 .. 1500 tokens;
#   2. gpu_moe_paths with TPM_EXP_GATHER=2;
#   3. the gather's and the combine's kernel times under Nsight Compute (gpu__time_duration, no
#      clock control), m3, fused, 1024 and 8192 tokens, each variant.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe_paths.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r160_h200.sh
NAME=r160
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
nd=0; nsame=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 13 300 1500; do
    for v in 0 1 2; do
      TPM_EXP_GATHER=$v timeout 60 "$B/tpmoe" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
        --output "$R/bits_$v.st" > "$R/bits_${v}_${p}_$t.log" 2>&1 || echo "rc!=0 $v $p $t"
      [ $v = 0 ] && continue
      if cmp -s "$R/bits_0.st" "$R/bits_$v.st"; then nsame=$((nsame+1)); else nd=$((nd+1)); echo "DIFF $p $t var $v"; fi
    done
  done
done
rm -f "$R"/bits_*.st
echo "== bits: $nsame same, $nd differ ($(el))"
TPM_EXP_GATHER=2 timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths gather 2 rc=$? ($(el))"; ok "$R/gpu_moe_paths.log"
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 3"
for t in 1024 8192; do
  for v in 0 1 2; do
    TPM_EXP_GATHER=$v timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum \
      --kernel-name regex:"k_gather|k_combine" --csv $M --tokens $t > "$R/ncu_t${t}_v$v.csv" 2> "$R/ncu_t${t}_v$v.err"
    echo "== ncu $t v$v rc=$? ($(el))"
    grep -E "k_gather|k_combine" "$R/ncu_t${t}_v$v.csv" | awk -F'","' '{n=$5; sub(/\(.*/, "", n); v=$NF; gsub(/[",]/, "", v);
      k=n; s[k]+=v; c[k]++; if (!(k in mn) || v+0 < mn[k]) mn[k]=v+0; if (v+0 > mx[k]) mx[k]=v+0}
      END {for (k in s) printf "  %s n=%d min %.1f max %.1f us\n", k, c[k], mn[k]/1000, mx[k]/1000}'
  done
  pack
done
echo "== total $(el)"
