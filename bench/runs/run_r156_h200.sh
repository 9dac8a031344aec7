#!/usr/bin/env bash
# run_r156_h200.sh - one H200, into $OUT/r156: the prefill's elementwise kernels (round 24).
#   new = this commit: k_combine's bf16 rows read the slots' indices first, then RIF rows at a
#   time (TPM_EXP_RIF=1|2, default 1); k_gather reads the K rows' indices before its stores;
#   the prefill combine under programmatic dependent launch behind down (TPM_EXP_CPDL=1).
#   head = tpmoe of fc0eccf (before).
#   1. the same bits: `tpmoe moe --backend cuda --output` of head and new (each variant) on three
#      mini presets at 1 .. 1500 tokens;
#   2. gpu_moe_paths, gpu_moe with TPM_EXP_CPDL=1 (and gpu_moe_paths again with TPM_EXP_RIF=2);
#   3. tpmoe bench moe --preset m3 --tokens 64,128,1024,4096,8192 --check 2 --gemm-hold 0,
#      head / new / new CPDL / new CPDL RIF 2, three passes interleaved.
# Binaries (prebuilt/bin.txz): head, tpmoe, gpu_moe, gpu_moe_paths.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r156_h200.sh
NAME=r156
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
# 1. bits
nd=0; nsame=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 5 13 40 300 1500; do
    timeout 60 "$B/head" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
      --output "$R/bits_head.st" > "$R/bits_head_${p}_$t.log" 2>&1 || echo "rc!=0 head $p $t"
    for v in "1 0" "1 1" "2 1"; do
      set -- $v
      TPM_EXP_RIF=$1 TPM_EXP_CPDL=$2 timeout 60 "$B/tpmoe" moe --backend cuda --preset $p --tokens $t --iters 1 \
        --seed 7 --output "$R/bits_new.st" > "$R/bits_new_${p}_$t.log" 2>&1 || echo "rc!=0 new $v $p $t"
      if cmp -s "$R/bits_head.st" "$R/bits_new.st"; then nsame=$((nsame+1)); else nd=$((nd+1)); echo "DIFF $p $t rif/cpdl $v"; fi
    done
  done
done
rm -f "$R"/bits_*.st
echo "== bits: $nsame same, $nd differ ($(el))"
# 2. tests
TPM_EXP_CPDL=1 timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths cpdl rc=$? ($(el))"; ok "$R/gpu_moe_paths.log"
TPM_EXP_CPDL=1 TPM_EXP_RIF=2 timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths_rif2.log" 2>&1
echo "== gpu_moe_paths cpdl rif2 rc=$? ($(el))"; ok "$R/gpu_moe_paths_rif2.log"
TPM_EXP_CPDL=1 timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe cpdl rc=$? ($(el))"; ok "$R/gpu_moe.log"
pack
# 3. bench
pf() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s: tot %s exp %s comb %s sel!%s | ", $1, $15, $12, $13, $20}' "$R/$1.log"; echo; }
for p in 1 2 3; do
  for v in "head head 1 0" "new tpmoe 1 0" "cpdl tpmoe 1 1" "rif2 tpmoe 2 1"; do
    set -- $v
    TPM_EXP_RIF=$3 TPM_EXP_CPDL=$4 timeout 120 "$B/$2" bench moe --preset m3 --tokens 64,128,1024,4096,8192 \
      --check 2 --gemm-hold 0 --json "$R/${1}_p$p.json" > "$R/${1}_p$p.log" 2>&1
    echo "== $1 p$p rc=$? ($(el))"; pf ${1}_p$p
  done
  pack
done
echo "== total $(el)"
