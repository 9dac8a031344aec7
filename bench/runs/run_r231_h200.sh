#!/usr/bin/env bash
# run_r231_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r231: round 39's fourth call.
# r230 found even's and thin's GEMMs equal under Nsight Compute (clocks locked to base, L2 flushed
# before each kernel): 6.92 against 7.05 ms, where the free-running probe has even 12% behind
# (r229). Here:
#   1. the same profile of routed (uniform 256) and m3rr (random) in form 2;
#   2. the free-running probe per layout (routed, thin, even, m3rr; form 2; 200 timed calls each, so
#      that each runs ~1.5 s) with the SM clock and the board power sampled every 50 ms.
# Binary: prebuilt/bin.txz (wg_probe of 150678d, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r231_h200.sh
NAME=r231
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
for l in routed m3rr; do
  timeout 100 ncu --clock-control base --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --import-source no \
    --kernel-name regex:k_wg_gemm_p --launch-skip 2 --launch-count 2 -o /tmp/r231_$l \
    "$B/wg_probe" --layout $l --form 2 --reps 1 > "$R/ncu_$l.log" 2>&1
  echo "== ncu $l rc=$? ($(el))"
  ncu --import /tmp/r231_$l.ncu-rep --page details > "$R/details_$l.txt" 2>&1
  grep -E "Duration|L2 Cache Throughput|DRAM Throughput|Compute \(SM\) Throughput" "$R/details_$l.txt" | head -8
  pack
done
for l in routed thin even m3rr; do
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 50 > "$R/clocks_$l.csv" 2>&1 &
  S=$!
  timeout 60 "$B/wg_probe" --layout $l --form 2 --reps 200 --json "$R/probe_$l.json" > "$R/probe_$l.log" 2>&1
  kill $S 2>/dev/null; wait $S 2>/dev/null
  printf "== %-7s %s  clock/power: %s\n" $l "$(grep "^$l" "$R/probe_$l.log" | awk '{print $7, $8}')" \
    "$(awk -F', ' '{gsub(/ MHz/, "", $2); gsub(/ W/, "", $3); if ($3 > 150) {c += $2; p += $3; n++}} END {if (n) printf "%.0f MHz %.0f W (%d samples)", c / n, p / n, n}' "$R/clocks_$l.csv")"
done
pack
echo "== r231 done ($(el))"
