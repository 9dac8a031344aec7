#!/usr/bin/env bash
# run_r100_h200.sh - round 13, one H200, into $OUT/r100: gate_up_pipe 2 (the
# two register stages at 3-8 tokens too, in stages of one chunk per lane)
# against 1 (two stages at 1-2 tokens only: the default), gpu_moe first
# (pdl_equals_plain compares pipe 2 bit for bit), m3 TP 1 fused at 3-8 tokens,
# alternating, three passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the gate_up_pipe 2 commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r100_h200.sh
NAME=r100
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$R/gpu_moe.log" | head -8
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --tokens 3,4,5,6,8 --check 1 --reps 40"
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s(x%s) ", $1, $15, $12, $18}'; echo; }
for pass in 1 2 3; do
  for p in 1 2; do
    timeout 90 $M --gate-up-pipe $p --json "$R/pipe${p}_p$pass.json" > "$R/pipe${p}_p$pass.log" 2>&1
    echo "== gate_up_pipe $p pass $pass rc=$? ($(el))"; tt "$R/pipe${p}_p$pass.log"
  done
done
sed -n '/^tokens/,$p' "$R/pipe1_p1.log" | cut -c1-200
pack
echo "== total $(el)"
