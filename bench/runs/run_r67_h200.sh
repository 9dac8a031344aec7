#!/usr/bin/env bash
# run_r67_h200.sh - per-instruction executed counts of one rank's flag-free
# two-shot work (set 19, bench/ar_loopback.cu LOOPBACK_SOLO, bf16 32 MB) for
# INT4 and INT8 under Nsight Compute (kernel replay, source counters); the
# SASS tables are mapped to source lines here with the same build's cubin.
# Binary carried: prebuilt/ar_loopback (build line in bench/ar_loopback.cu, plus -lineinfo).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r67_h200.sh
NAME=${NAME:-r67}
. bench/device_env.sh
NCU=$(command -v ncu)
for cfg in 3,33554432,19 1,33554432,19; do
  tag=${cfg//,/_}
  CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=$cfg timeout 200 "$NCU" --clock-control none \
    --section SourceCounters --section SpeedOfLight --section WarpStateStats --import-source yes \
    -k regex:twoshot --launch-skip 3 --launch-count 1 -o "$R/solo_$tag" -f "$B/ar_loopback" > "$R/ncu_solo_$tag.log" 2>&1
  echo "== ncu solo $cfg rc=$? ($(el))"
  "$NCU" -i "$R/solo_$tag.ncu-rep" --page source --print-source sass --csv > "$R/solo_${tag}_sass.csv" 2>&1
  "$NCU" -i "$R/solo_$tag.ncu-rep" --page details > "$R/solo_${tag}_details.txt" 2>&1
  gzip -9 "$R/solo_${tag}_sass.csv"; rm -f "$R/solo_$tag.ncu-rep"
done
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 "$B/ar_loopback" > "$R/solo_int4_time.log" 2>&1
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=1,33554432,19 "$B/ar_loopback" > "$R/solo_int8_time.log" 2>&1
tail -n 3 "$R"/solo_*_time.log
echo "== total $(el)"
