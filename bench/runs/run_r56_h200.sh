#!/usr/bin/env bash
# run_r56_h200.sh - Nsight Compute over the one-GPU loopback of the world-2
# two-shot (bench/ar_loopback.cu, both ranks' kernels on GPU 0, concurrent):
# application-range replay of one timed iteration (cudaProfilerStart / Stop
# around it), so both ranks' kernels run together in every pass. Points:
# INT4 32 MB on sets 5 and 19, exact 32 MB on set 5.
# Binary carried: prebuilt/ar_loopback (build line in bench/ar_loopback.cu).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r56_h200.sh
NAME=${NAME:-r56}
. bench/device_env.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; "$NCU" --version | tail -1
for cfg in 3,33554432,5 3,33554432,19 0,33554432,5; do
  tag=${cfg//,/_}
  LOOPBACK_ONLY=$cfg timeout 150 "$NCU" --replay-mode app-range --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    -o "$R/prof_$tag" -f "$B/ar_loopback" > "$R/ncu_$tag.log" 2>&1
  echo "== ncu $cfg rc=$? ($(el))"; tail -3 "$R/ncu_$tag.log"
  "$NCU" -i "$R/prof_$tag.ncu-rep" --page details > "$R/prof_$tag.txt" 2>&1
  grep -E "Duration|Throughput|Issue|Issued Ipc|Executed Ipc|Stall|No Eligible|Active Warps|Eligible|Memory \[%\]|DRAM|L2 Cache|L1/TEX|Pipe|One or More" "$R/prof_$tag.txt" | head -40
done
echo "== total $(el)"
