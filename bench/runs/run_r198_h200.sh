#!/usr/bin/env bash
# run_r198_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r198: round 32, routing
# mode 3's pipelined loads for Ep > 128 (two m-tiles per warp, two register stages), bit-equal
# to the direct and ring loads (gpu_moe's m2-like test), and timed against them:
#   1. gpu_moe (Release, this tree);
#   2. routing net, fused, mode 3 forced, direct against pipelined loads, two passes interleaved,
#      JSON, on the two 256-expert presets: m2 (H 3072, top-8) and deepseek-v3 (H 7168, top-8 in
#      groups); mode 2 (the router GEMM) beside them at 96-256 tokens;
#   0. on an H200 only, first: r197's script (round 31's defaults, the issue's table) into $OUT/r197.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r198_h200.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/runs/run_r197_h200.sh
fi
NAME=r198
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep "m2-like" "$R/gpu_moe.log" | head -12
pack
bm() { # name preset tokens args...
  local n=$1 pr=$2 tk=$3; shift 3
  timeout 120 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-16s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
for pass in a b; do
  for pr in m2 deepseek-v3; do
    bm ${pr}_direct_$pass $pr 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads direct
    bm ${pr}_pipe_$pass $pr 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads pipe
    bm ${pr}_mode2_$pass $pr 96,128,160,192,256 --route-tc 0:0
  done
  pack
done
echo "== r198 done ($(el))"
