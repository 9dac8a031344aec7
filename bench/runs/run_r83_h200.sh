#!/usr/bin/env bash
# run_r83_h200.sh - round 12, one H200, into $OUT/r83: where the warps of the
# own wgmma prefill GEMM (persistent 2-CTA clusters, bands of 16; the default
# from 4096 tokens) stall at 8192 tokens: Nsight Compute's full set with the
# SASS source page (warp-stall samples per instruction) of the gate_up launch.
# Binaries (prebuilt/bin.txz): tpmoe of the defaults commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r83_h200.sh
NAME=r83
. bench/device_env.sh
timeout 300 ncu --clock-control none --set full --import-source no --kernel-name regex:k_wg_gemm_p --launch-count 1 \
  -o /tmp/r83 "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 0 --reps 1 > "$R/ncu.log" 2>&1
echo "== ncu rc=$? ($(el))"; tail -3 "$R/ncu.log"
ncu --import /tmp/r83.ncu-rep --page source --csv --print-source sass > "$R/sass.csv" 2> "$R/sass.err"
echo "== source page rc=$? ($(el)) $(wc -l < "$R/sass.csv") lines"; head -c 600 "$R/sass.err"
head -2 "$R/sass.csv" | cut -c1-1500
ncu --import /tmp/r83.ncu-rep --page details --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section InstructionStats > "$R/details.txt" 2>&1
echo "== details rc=$? ($(el))"
grep -iE "stall|Issue|Eligible|Pipe|Warp Cycles" "$R/details.txt" | head -40
ncu --import /tmp/r83.ncu-rep --page raw --csv > "$R/raw.csv" 2>&1
python3 - "$R/raw.csv" <<'PY' 2>&1 | head -60
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) >= 3:
    h, u, v = rows[0], rows[1], rows[2]
    for k, unit, val in zip(h, u, v):
        if ('stall' in k and 'pct' not in k and ('ratio' in k or 'warp_latency' in k)) or 'pipe_tensor' in k or 'gmma' in k:
            print(k, unit, val)
PY
pack
echo "== total $(el)"
