#!/usr/bin/env bash
# run_r101_h200.sh - round 13, one H200, into $OUT/r101: k_down2's weight loads
# in two register stages (down_pipe, 1-2 tokens) off / on: the timeline (r95)
# has the down phase at 4.36 TB/s. gpu_moe first (pdl_equals_plain compares
# it bit for bit), m3 TP 1 fused at 1-2 tokens, alternating, three passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the down_pipe commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r101_h200.sh
NAME=r101
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$R/gpu_moe.log" | head -8
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --tokens 1,2 --check 1 --reps 40"
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s(x%s) ", $1, $15, $12, $18}'; echo; }
for pass in 1 2 3; do
  for p in 0 1; do
    timeout 90 $M --down-pipe $p --json "$R/pipe${p}_p$pass.json" > "$R/pipe${p}_p$pass.log" 2>&1
    echo "== down_pipe $p pass $pass rc=$? ($(el))"; tt "$R/pipe${p}_p$pass.log"
  done
done
sed -n '/^tokens/,$p' "$R/pipe1_p1.log" | cut -c1-200
pack
echo "== total $(el)"
