#!/usr/bin/env bash
# run_r224_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r224: where the 8192-token
# prefill GEMM's warps stall (round 37's open question: the tensor pipe at ~75%, L2 ruled out by
# r222). Nsight Compute, clocks locked to base, on the first gate_up launch of the own kernel
# (persistent 2-CTA clusters): warp states and the SASS source page with its stall samples.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
NAME=r224
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1 --tokens 8192"
timeout 200 ncu --clock-control base --section WarpStateStats --section SourceCounters --import-source no \
  --kernel-name regex:k_wg_gemm_p --launch-count 1 -o /tmp/r224 $M > "$R/ncu.log" 2>&1
echo "== ncu rc=$? ($(el))"
ncu --import /tmp/r224.ncu-rep --page details > "$R/details.txt" 2>&1
ncu --import /tmp/r224.ncu-rep --page source --csv --print-source sass > "$R/sass.csv" 2> "$R/sass.err"
grep -iE "stall|Warp Cycles" "$R/details.txt" | head -30
xz -9 "$R/sass.csv"
pack
echo "== r224 done ($(el))"
