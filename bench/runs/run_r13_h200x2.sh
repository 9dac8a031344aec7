#!/usr/bin/env bash
# run_r13_h200x2.sh - round 13: the wgmma grouped GEMM in 2-CTA clusters with
# the A tile multicast (256 x 128 tiles): prefill timings against cuBLAS over
# 4 streams, every gpu_moe test, then Nsight Compute on both launches at 8192
# tokens. Binaries (tpmoe, gpu_moe) carried in prebuilt/bin.txz.
#   OUT=/some/dir bash bench/runs/run_r13_h200x2.sh
NAME=${NAME:-r13}
. bench/device_env.sh
for g in wgmma streams; do
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens ${PF_TOKENS:-128,1024,8192} --fuse-shared 1 --check 2 \
    --prefill-gemm $g --reps 10 --json "$R/moe_prefill_$g.json" > "$R/bench_moe_prefill_$g.log" 2>&1
  echo "== bench moe prefill $g rc=$? ($(el))"
  grep -E "^#|^[0-9]|error|FAIL" "$R/bench_moe_prefill_$g.log" | grep -v harness | cut -c1-220
  [ "${ONLY_WGMMA:-0}" = 1 ] && break
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|prefill gemm 3" "$R/gpu_moe.log" | head -30
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
timeout 120 ncu --clock-control none --kernel-name regex:k_wg_gemm --launch-count 2 --metrics $M --csv \
  "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 1 --reps 2 > "$R/ncu_wgmma.csv" 2>&1
echo "== ncu rc=$? ($(el))"
grep -E "k_wg_gemm" "$R/ncu_wgmma.csv" | awk -F'","' '{print substr($5,1,30)" | "$(NF-2)" | "$NF}'
pack
echo "== total $(el)"
