#!/usr/bin/env bash
# run_r138_h200.sh - one H200, into $OUT/r138: Nsight Compute on k_route_fused (routing mode 1)
# at 1 and 4 tokens: warp states and the SASS source page with stall samples, to see where the
# last block's tail (ticket, slice sums, selection, permutation: 4-5 us, r136) waits.
# Binaries (prebuilt/bin.txz): tpmoe of HEAD (built with -lineinfo).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r138_h200.sh
NAME=r138
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --shared-plan slot --check 0 --gemm-hold 0 --reps 1"
SECS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section SourceCounters"
for t in 1 4; do
  timeout 150 ncu --clock-control none $SECS --import-source no --kernel-name regex:k_route_fused --launch-count 1 \
    -o /tmp/r138_t$t $M --tokens $t > "$R/ncu_t$t.log" 2>&1
  echo "== ncu $t rc=$? ($(el))"
  ncu --import /tmp/r138_t$t.ncu-rep --page details > "$R/details_t$t.txt" 2>&1
  ncu --import /tmp/r138_t$t.ncu-rep --page source --csv --print-source sass > "$R/sass_t$t.csv" 2> "$R/sass_t$t.err"
  grep -E "Duration|Registers Per|Warp Cycles Per Issued|No Eligible|Stall" "$R/details_t$t.txt" | head -12
done
xz -9 "$R"/sass_*.csv
pack
echo "== total $(el)"
