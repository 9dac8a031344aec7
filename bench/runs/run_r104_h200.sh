#!/usr/bin/env bash
# run_r104_h200.sh - round 14, one H200, into $OUT/r104: Nsight Compute on
# k_select (mode 2's selection + permutation launch), which r103 timed at
# 22.8 us (256 tokens), 21.0 (1024) and 93.8 (8192) beside a 7-52 us router
# GEMM: speed of light, warp states, launch / occupancy and the SASS source
# page with stall samples, at 256 and 8192 tokens.
# Binaries (prebuilt/bin.txz): tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r104_h200.sh
NAME=r104
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1"
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section SourceCounters"
for t in 256 8192; do
  timeout 150 ncu --clock-control none $SECS --import-source no --kernel-name regex:k_select --launch-count 1 \
    -o /tmp/r104_t$t $M --tokens $t > "$R/ncu_t$t.log" 2>&1
  echo "== ncu $t rc=$? ($(el))"
  ncu --import /tmp/r104_t$t.ncu-rep --page details > "$R/details_t$t.txt" 2>&1
  ncu --import /tmp/r104_t$t.ncu-rep --page source --csv --print-source sass > "$R/sass_t$t.csv" 2> "$R/sass_t$t.err"
  grep -E "Duration|Registers Per|Achieved Occ|Theoretical Occ|Warp Cycles Per Issued|No Eligible|Local Memory|Block Limit|Stall" "$R/details_t$t.txt" | head -30
done
xz -9 "$R"/sass_*.csv
pack
echo "== total $(el)"
