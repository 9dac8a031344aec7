#!/usr/bin/env bash
# run_r221_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r221: Nsight Compute on the
# 8192-token prefill's GEMMs, tpmoe's own against cuBLAS's, in one process at the same locked clock
# (--clock-control base: per-cycle efficiency, the board's power cap left out). The fused m3 layer
# at 8192 tokens runs the split plan: the routed experts on k_wg_gemm_p (persistent 2-CTA clusters,
# gate_up with the activation, then down) and the shared expert as dense cuBLAS GEMMs
# (8192 x 6144 x 6144 and 8192 x 6144 x 3072: cuBLAS's nvjet kernels, the bound's kind). The first
# two launches of each: speed of light, compute and memory workload, warp states, scheduler,
# launch, occupancy.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r221_h200.sh
NAME=r221
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1 --tokens 8192"
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy"
MET="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct"
for k in k_wg_gemm_p nvjet; do
  timeout 240 ncu --clock-control base $SECS $MET --import-source no --kernel-name regex:$k --launch-count 2 \
    -o /tmp/r221_$k $M > "$R/ncu_$k.log" 2>&1
  echo "== ncu $k rc=$? ($(el))"
  ncu --import /tmp/r221_$k.ncu-rep --page details > "$R/details_$k.txt" 2>&1
  grep -E "^  [a-zA-Z_]|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|hmma|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Registers Per|Achieved Occ|Block Size|Grid Size|Cluster Size|lts__t_bytes|lts__t_sector_hit|dram__bytes" "$R/details_$k.txt" | head -60
  pack
done
echo "== r221 done ($(el))"
