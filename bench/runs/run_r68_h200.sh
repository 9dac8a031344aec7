#!/usr/bin/env bash
# run_r68_h200.sh - the flag-free two-shot's world-2 codec path (run2: stepped
# ranges and slots, my term straight into the sum, PRMT magic from constant
# memory, two-instruction tie scan) against the previous build, one H200:
# per-instruction counts under Nsight Compute (INT4 and INT8, bf16 32 MB,
# one rank's work alone), solo times of both builds in alternation, and the
# two-rank loopback (set 19 against set 5, every output compared bitwise).
# Binaries carried: prebuilt/ar_loopback (new), prebuilt/ar_loopback_old.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r68_h200.sh
NAME=${NAME:-r68}
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
for pass in 1 2; do
  for bin in ar_loopback_old ar_loopback; do
    for cfg in 3,33554432,19 1,33554432,19 2,33554432,19 5,33554432,19 3,100663296,19 1,100663296,19; do
      echo "$pass $bin $(CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=$cfg "$B/$bin" 2>&1 | tail -1)"
    done
  done
done | tee "$R/solo_times.log"
CUDA_VISIBLE_DEVICES=0 timeout 240 "$B/ar_loopback" "$R/loopback.json" > "$R/loopback.log" 2>&1
echo "== loopback rc=$? ($(el))"; tail -25 "$R/loopback.log"
echo "== total $(el)"
