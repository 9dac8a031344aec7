#!/usr/bin/env bash
# run_r230_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r230: round 39's third call.
# Why do the rows of half-filled tiles cost so much (r229: the probe's `even` layout, 320 / 192-row
# experts with no padded row, 24% behind a uniform 256 rows; `thin`, 257 / 255, 10-12%)? Nsight
# Compute, clocks locked to base, on the second call's gate_up and down launches (persistent 2-CTA
# clusters, form 2) of each layout: speed of light, warp states, scheduler, memory, and the SASS
# page's stall samples.
# Binary: prebuilt/bin.txz (wg_probe of this tree, stripped: --layout / --form / --reps).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r230_h200.sh
NAME=r230
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for l in even thin; do
  timeout 100 ncu --clock-control base --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section SourceCounters --import-source no \
    --kernel-name regex:k_wg_gemm_p --launch-skip 2 --launch-count 2 -o /tmp/r230_$l \
    "$B/wg_probe" --layout $l --form 2 --reps 1 > "$R/ncu_$l.log" 2>&1
  echo "== ncu $l rc=$? ($(el))"
  ncu --import /tmp/r230_$l.ncu-rep --page details > "$R/details_$l.txt" 2>&1
  ncu --import /tmp/r230_$l.ncu-rep --page source --csv --print-source sass > "$R/sass_$l.csv" 2> "$R/sass_$l.err"
  xz -9 "$R/sass_$l.csv"
  grep -E "^  k_wg|Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Warp Cycles Per Issued|No Eligible|Issued Warp" "$R/details_$l.txt" | head -24
  pack
done
echo "== r230 done ($(el))"
