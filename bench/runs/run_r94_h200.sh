#!/usr/bin/env bash
# run_r94_h200.sh - round 13, one H200, into $OUT/r94: the shared slot's down
# rows as pre-routing items of k_gate_up2 (shared_down_pre). final18 put the
# routing's exposed part of the 1-token layer at ~5 us (layer - experts -
# combine + harness); the slot's gate_up items alone (75 MB, ~16 us) do not
# cover the routing under the HBM contention, the down rows add ~38 MB.
# gpu_moe (pdl_equals_plain compares it bit for bit), then m3 TP 1 fused at
# 1-4 tokens (the slot plan), off / on alternating, three passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the shared_down_pre commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r94_h200.sh
NAME=r94
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$R/gpu_moe.log" | head -8
pack
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --tokens 1,2,3,4 --check 1 --reps 40"
tt() { grep -E "^[0-9]+ " "$1" | awk '{printf "%s:%s(x%s) ", $1, $15, $18}'; echo; }
for pass in 1 2 3; do
  for e in 0 1; do
    timeout 90 $M --shared-down-pre $e --json "$R/sdp${e}_p$pass.json" > "$R/sdp${e}_p$pass.log" 2>&1
    echo "== shared_down_pre $e pass $pass rc=$? ($(el))"; tt "$R/sdp${e}_p$pass.log"
  done
done
sed -n '/^tokens/,$p' "$R/sdp1_p1.log" | cut -c1-200
pack
echo "== total $(el)"
