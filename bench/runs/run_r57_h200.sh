#!/usr/bin/env bash
# run_r57_h200.sh - one rank's local work of set 19's two-shot, alone on one
# GPU (bench/ar_loopback.cu, LOOPBACK_SOLO: its slots pre-filled so no poll
# waits): times at 8 and 32 MB, then Nsight Compute (kernel replay, full set,
# source counters) on INT4 32 MB and exact 32 MB.
# Binary carried: prebuilt/ar_loopback (build line in bench/ar_loopback.cu, plus -lineinfo).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r57_h200.sh
NAME=${NAME:-r57}
. bench/device_env.sh
NCU=$(command -v ncu)
for cfg in 3,8388608,19 3,33554432,19 1,33554432,19 0,33554432,19 3,100663296,19; do
  LOOPBACK_SOLO=$cfg timeout 60 "$B/ar_loopback" 2>&1 | tee -a "$R/solo.log"
done
for cfg in 3,33554432,19 0,33554432,19; do
  tag=${cfg//,/_}
  LOOPBACK_SOLO=$cfg timeout 200 "$NCU" --clock-control none --set full --import-source yes \
    -k regex:twoshot --launch-skip 3 --launch-count 1 -o "$R/solo_$tag" -f "$B/ar_loopback" > "$R/ncu_solo_$tag.log" 2>&1
  echo "== ncu solo $cfg rc=$? ($(el))"; tail -2 "$R/ncu_solo_$tag.log"
  "$NCU" -i "$R/solo_$tag.ncu-rep" --page details > "$R/solo_$tag.txt" 2>&1
  "$NCU" -i "$R/solo_$tag.ncu-rep" --page source --print-source sass --csv > "$R/solo_${tag}_sass.csv" 2>&1
  grep -E "Duration|Executed Ipc Active|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|DRAM Throughput|L2 Cache Throughput|represents|Registers Per|Achieved Occupancy" "$R/solo_$tag.txt" | head -24
done
echo "== total $(el)"
