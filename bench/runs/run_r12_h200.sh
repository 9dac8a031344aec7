#!/usr/bin/env bash
# run_r12_h200.sh - round 12: Nsight Compute on the own wgmma grouped GEMM
# (k_wg_gemm, 8192 tokens of m3) and on cuBLAS's kernels of the streams path
# at the same size: tensor pipe, L2 and DRAM throughput, clock.
NAME=${NAME:-r12}
. bench/device_env.sh
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct
timeout 200 ncu --clock-control none --kernel-name regex:k_wg_gemm --launch-skip 0 --launch-count 2 --metrics $M --csv \
  "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 1 --reps 2 --prefill-gemm wgmma > "$R/ncu_wgmma.csv" 2>&1
echo "== ncu wgmma rc=$? ($(el))"
grep -E "k_wg_gemm" "$R/ncu_wgmma.csv" | awk -F'","' '{print $5" | "$(NF-2)" | "$(NF-1)" | "$NF}' | cut -c1-200
timeout 200 ncu --clock-control none --kernel-name regex:"sm90|gemm|Kernel" --launch-skip 40 --launch-count 6 --metrics $M --csv \
  "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 1 --reps 2 --prefill-gemm streams > "$R/ncu_streams.csv" 2>&1
echo "== ncu streams rc=$? ($(el))"
grep -E "sm90|gemm|Kernel" "$R/ncu_streams.csv" | awk -F'","' '{print $5" | "$(NF-2)" | "$(NF-1)" | "$NF}' | cut -c1-200 | tail -60
pack
echo "== total $(el)"
