#!/usr/bin/env bash
# run_r91_h200.sh - round 13, one H200, into $OUT/r91: where the routing's
# time goes. (1) the phase stops (--route-stop 1..3, 0 = whole) of the default
# modes at 2, 16, 64, 256 tokens and mode 3 forced at 256; (2) Nsight Compute
# on the routing launches (k_route_fused at 2 tokens, k_route_tc at 16 and
# 256, mode 2's GEMM + k_select at 256): speed of light, memory, warp stall
# reasons (is it "no instruction" = cold instruction cache, or memory?), and
# the SASS source page (stall samples per instruction) of k_route_tc at 16.
# Binaries (prebuilt/bin.txz): tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r91_h200.sh
NAME=r91
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt"
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0"
for st in 1 2 3 0; do
  $M --tokens 2,16,64,256 --route-stop $st --reps 40 > "$R/stop$st.log" 2>&1
  $M --tokens 256 --route-tc 9:256 --route-stop $st --reps 40 > "$R/stop${st}_tc256.log" 2>&1
  echo "== stop $st ($(el))"; grep -E "^(2|16|64|256) " "$R/stop$st.log" "$R/stop${st}_tc256.log" | awk '{print $1, $10, $11}'
done
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section SourceCounters"
prof() { # tag tokens extra-args kernel-regex count
  timeout 120 ncu --clock-control none $SECS --import-source no --kernel-name "regex:$4" --launch-count $5 \
    -o /tmp/r91_$1 $M --tokens $2 --reps 1 $3 > "$R/ncu_$1.log" 2>&1
  echo "== ncu $1 rc=$? ($(el))"; tail -2 "$R/ncu_$1.log"
  ncu --import /tmp/r91_$1.ncu-rep --page details > "$R/details_$1.txt" 2>&1
  ncu --import /tmp/r91_$1.ncu-rep --page raw --csv > "$R/raw_$1.csv" 2>&1
  grep -E "^  [a-z_]+|Duration|DRAM Throughput|Memory Throughput|No Instruction|Stall|Warp Cycles Per Issued|Registers Per|Achieved Occ|Block Limit" "$R/details_$1.txt" | head -60
}
prof t2 2 "" "k_route" 1
prof t16 16 "" "k_route" 1
prof t256tc 256 "--route-tc 9:256" "k_route" 1
prof t256g 256 "" "k_select|k_perm|nvjet|xmma|cutlass|sm90|gemm" 3
ncu --import /tmp/r91_t16.ncu-rep --page source --csv --print-source sass > "$R/sass_t16.csv" 2> "$R/sass_t16.err"
ncu --import /tmp/r91_t256tc.ncu-rep --page source --csv --print-source sass > "$R/sass_t256tc.csv" 2> "$R/sass_t256tc.err"
echo "== source pages ($(el)) $(wc -l < "$R/sass_t16.csv") / $(wc -l < "$R/sass_t256tc.csv") lines"
pack
echo "== total $(el)"
