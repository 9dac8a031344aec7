#!/usr/bin/env bash
# run_r15_h200x2.sh - round 15: the wgmma grouped GEMM with a 9-stage ring of
# BK = 32 (64-byte swizzle) stages, with
# and without 2-CTA clusters sharing the weight tile by multicast TMA, at
# 1024 / 4096 / 8192 tokens, every gpu_moe test, then Nsight Compute on the
# clustered launches at 8192 tokens. Binaries (tpmoe, gpu_moe) carried in
# prebuilt/bin.txz.   OUT=/some/dir bash bench/runs/run_r15_h200x2.sh
NAME=${NAME:-r15}
. bench/device_env.sh
for cl in 0 1; do
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens ${PF_TOKENS:-1024,4096,8192} --fuse-shared 1 --check 2 \
    --prefill-gemm wgmma --prefill-cluster $cl --reps 10 --json "$R/moe_prefill_cl$cl.json" > "$R/bench_moe_prefill_cl$cl.log" 2>&1
  echo "== bench moe prefill wgmma cluster $cl rc=$? ($(el))"
  grep -E "^# device|^[0-9]|error|FAIL" "$R/bench_moe_prefill_cl$cl.log" | cut -c1-220
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|prefill gemm [345]" "$R/gpu_moe.log" | head -40
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
timeout 120 ncu --clock-control none --kernel-name regex:k_wg_gemm --launch-count 2 --metrics $M --csv \
  "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 1 --reps 2 --prefill-cluster ${NCU_CL:-0} > "$R/ncu_wgmma_cl1.csv" 2>&1
echo "== ncu rc=$? ($(el))"
grep -E "k_wg_gemm" "$R/ncu_wgmma_cl1.csv" | awk -F'","' '{print substr($5,1,36)" | "$(NF-2)" | "$NF}'
pack
echo "== total $(el)"
