#!/usr/bin/env bash
# run_r194_h200.sh - one H200, into $OUT/r194: round 31, routing mode 3's pipelined loads
# (--route-tc-loads pipe: three one-chunk register stages), the router's fragments now stored in
# mma operand order (wr3f: no register moves before each mma) and the mma of 4 or 8 n-tiles
# without branches (r193 ran the first form on an H100: ~8 instructions per mma).
#   1. gpu_moe (mode 3 direct / ring / pipe give the same bits), Release;
#   2. routing net, m3, fused, mode 3 forced (--route-tc 1:256) with direct and with pipe loads,
#      and mode 2 (--route-tc 0:0), 25-256 tokens, two passes, interleaved;
#   3. mode 3's steps (--trace-route 100, the trace build), direct and pipe, 32 / 64 / 128 / 256 tokens;
#   4. ncu of k_route_tc at 32, 128 and 256 tokens, pipe (where the counters can be read);
#   5. gpu_moe_paths, gpu_moe_api.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r194_h200.sh
NAME=r194
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep -c "(pipe)" "$R/gpu_moe.log"
pack
bm() { # name binary tokens args...
  local n=$1 b=$2 tk=$3; shift 3
  timeout 150 "$B/$b" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-12s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
TK=25,32,64,96,112,128,160,192,256
for pass in a b; do
  bm direct_$pass tpmoe $TK --route-tc 1:256 --route-tc-loads direct
  bm pipe_$pass tpmoe $TK --route-tc 1:256 --route-tc-loads pipe
  bm mode2_$pass tpmoe 96,112,128,160,192,256 --route-tc 0:0
  pack
done
for l in direct pipe; do
  timeout 120 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --check 1 --gemm-hold 0 --trace-route 100 \
    --route-tc 1:256 --route-tc-loads $l --tokens 32,64,128,256 > "$R/trace_$l.log" 2>&1
  echo "== trace $l rc=$? ($(el))"; grep "^# T=.*\(routing mode\|mode 3, first\)" "$R/trace_$l.log" | sed 's/(medians of 100 replays)//; s/fused=1 //'
  pack
done
for t in 32 128 256; do
  for l in pipe; do
    timeout 100 ncu --clock-control none --kernel-name regex:k_route_tc --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
      "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 0 --reps 3 --tokens $t \
      --route-tc 1:256 --route-tc-loads $l > "$R/ncu_${l}_$t.txt" 2>&1
    echo "== ncu $l $t rc=$? ($(el))"
    grep -E "Duration|DRAM Throughput|L1/TEX Hit|L2 Hit|Memory Throughput|Registers Per|Stall Long|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A" "$R/ncu_${l}_$t.txt" | head -12
    pack
  done
done
timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths rc=$? ($(el))"; ok "$R/gpu_moe_paths.log"
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
