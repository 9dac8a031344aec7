#!/usr/bin/env bash
# run_r97_h200.sh - round 13, one H200, into $OUT/r97: k_gate_up2's weight
# loads in two register stages (gate_up_pipe). r95/r96: the 1-token gate_up
# phase streams 377 MB at 4.03 TB/s (down 4.36, the read benchmark 4.62) and
# ends at the same time whether the routing ends at 13 or 19 us: each warp
# issues its 8 loads, waits, computes, and only then issues the next 8.
# gpu_moe (pdl_equals_plain compares it bit for bit), then m3 TP 1 fused at
# 1-8 tokens, off / on alternating, three passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the gate_up_pipe commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r97_h200.sh
NAME=r97
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$R/gpu_moe.log" | head -8
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --tokens 1,2,3,4,6,8 --check 1 --reps 40"
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s/%s(x%s) ", $1, $15, $12, $18}'; echo; }
for pass in 1 2 3; do
  for p in 0 1; do
    timeout 90 $M --gate-up-pipe $p --json "$R/pipe${p}_p$pass.json" > "$R/pipe${p}_p$pass.log" 2>&1
    echo "== gate_up_pipe $p pass $pass rc=$? ($(el))"; tt "$R/pipe${p}_p$pass.log"
  done
done
sed -n '/^tokens/,$p' "$R/pipe1_p1.log" | cut -c1-200
pack
echo "== total $(el)"
