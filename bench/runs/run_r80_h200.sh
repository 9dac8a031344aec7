#!/usr/bin/env bash
# run_r80_h200.sh - round 12's second MoE experiment on one H200, into $OUT/r80:
# the own wgmma prefill GEMM's tile order in bands (prefill_band: a large
# expert's row tiles band by band, so its A rows stay in L2 while its weight
# blocks stream past) and the persistent forms taking their items from a
# counter (prefill_cluster 2: 2-CTA clusters, 3: single CTAs), against the
# default (prefill_cluster 0, no bands), the same binary.
# First gpu_moe (prefill_gemm_modes compares every form and band setting with
# the default bit for bit), then m3 at TP 1, fused, 1024 / 4096 / 8192 tokens,
# the variants in alternation, twice; then Nsight Compute on the two GEMM
# launches at 8192 tokens for three of them (duration, DRAM, L2, SM clock).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r80_h200.sh
NAME=r80
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > "$R/smi.txt" 2>&1
TPMOE_TOOL=$B/tpmoe timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep "T=5000  prefill gemm" "$R/gpu_moe.log" | head -12
pack
V="0:0 0:16 0:8 2:0 2:16 3:16"
for pass in 1 2; do
  for v in $V; do
    pc=${v%%:*}; bd=${v##*:}
    timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --prefill-cluster $pc \
      --prefill-band $bd --check 1 --json "$R/pc${pc}_b${bd}_p$pass.json" > "$R/pc${pc}_b${bd}_p$pass.log" 2>&1
    echo "== prefill_cluster=$pc band=$bd pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/pc${pc}_b${bd}_p$pass.log" | awk '{print $1, $12, $15, $18}'
  done
  pack
done
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
for v in 0:0 0:16 2:16; do
  pc=${v%%:*}; bd=${v##*:}
  timeout 150 ncu --clock-control none --kernel-name regex:k_wg_gemm --launch-count 2 --metrics $M --csv \
    "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 0 --reps 1 --prefill-cluster $pc \
    --prefill-band $bd > "$R/ncu_pc${pc}_b$bd.csv" 2>&1
  echo "== ncu prefill_cluster=$pc band=$bd rc=$? ($(el))"
  grep -E "k_wg_gemm" "$R/ncu_pc${pc}_b$bd.csv" | awk -F'","' '{print substr($5,1,30)" | "$(NF-2)" | "$NF}'
done
pack
echo "== total $(el)"
