#!/usr/bin/env bash
# run_r92_h200.sh - round 13, one H200, into $OUT/r92: routing mode 4 (one
# cluster of 16 CTAs per token tile, moe_cuda_route_cl.cu), first run.
# (1) gpu_moe (route_mode4_shapes, the variants with mode 4, presets through
# mode 4 at 9..256 tokens); (2) the routing phase, m3 TP 1 fused, mode 4 at
# 1..256 tokens against the previous defaults (mode 4 off), in alternation;
# (3) tokens per cluster 8 / 16 / 32 / 64; (4) the phase stops of mode 4;
# (5) Nsight Compute on k_route_cl at 16 and 256 tokens.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the mode 4 commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r92_h200.sh
NAME=r92
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt"
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ|mode 4" "$R/gpu_moe.log" | head -20
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1"
TK=1,2,4,8,9,16,32,64,128,256
rt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s ", $1, $11, $7}'; echo; }
for pass in 1 2; do
  timeout 120 $M --tokens $TK --route-cl 1:256 --check 1 --reps 40 --json "$R/cl_p$pass.json" > "$R/cl_p$pass.log" 2>&1
  echo "== mode4 pass $pass rc=$? ($(el))"; rt "$R/cl_p$pass.log"
  timeout 120 $M --tokens $TK --route-cl 0:0 --check 1 --reps 40 --json "$R/base_p$pass.json" > "$R/base_p$pass.log" 2>&1
  echo "== base  pass $pass rc=$? ($(el))"; rt "$R/base_p$pass.log"
done
grep -E "^# T=" "$R/cl_p1.log" | head -12
sed -n '/^tokens/,$p' "$R/cl_p1.log" | cut -c1-210
pack
for tok in 8 16 32 64; do
  timeout 90 $M --tokens 16,64,128,256 --route-cl 1:256 --route-cl-tokens $tok --check 1 --reps 40 > "$R/tok$tok.log" 2>&1
  echo "== tokens/cluster $tok rc=$? ($(el))"; rt "$R/tok$tok.log"
done
for st in 1 2 3; do
  timeout 90 $M --tokens 2,16,64,256 --route-cl 1:256 --route-stop $st --check 0 --reps 40 > "$R/stop$st.log" 2>&1
  echo "== stop $st rc=$? ($(el))"; rt "$R/stop$st.log"
done
pack
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --section SourceCounters"
for T in 16 256; do
  timeout 90 ncu --clock-control none $SECS --import-source no --kernel-name regex:k_route_cl --launch-count 1 \
    -o /tmp/r92_$T $M --tokens $T --route-cl 1:256 --check 0 --reps 1 > "$R/ncu_$T.log" 2>&1
  echo "== ncu $T rc=$? ($(el))"
  ncu --import /tmp/r92_$T.ncu-rep --page details > "$R/details_$T.txt" 2>&1
  ncu --import /tmp/r92_$T.ncu-rep --page raw --csv > "$R/raw_$T.csv" 2>&1
  ncu --import /tmp/r92_$T.ncu-rep --page source --csv --print-source sass > "$R/sass_$T.csv" 2>/dev/null
  grep -E "Duration|DRAM Throughput|Registers Per|Cluster Size|Grid Size|Dynamic Shared" "$R/details_$T.txt" | head -8
done
pack
echo "== total $(el)"
