#!/usr/bin/env bash
# run_r96_h200.sh - round 13, one H200, into $OUT/r96: the 1-4 token layer's
# timeline (trace build) under the knobs that change the pre-routing phase:
# r95 showed the routing ending at 12.8 us (1 token) while only the shared
# slot's 192 gate_up items (gate_up_pairs 2) have work, the other ~336
# blocks of k_gate_up2 waiting. gate_up_pairs 1 (384 shared items) and
# route_experts 16 (twice the routing blocks), each against the default,
# fused, two passes.
# Binaries (prebuilt/bin.txz): tpmoe of the trace build.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r96_h200.sh
NAME=r96
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --check 1 --reps 40 --trace 30 --fuse-shared 1 --tokens 1,2,4"
tl() { grep -E "^#   |^[0-9]+ " "$1" | cut -c1-200; }
for pass in 1 2; do
  for v in "default" "--gate-up-pairs 1" "--route-experts 16"; do
    tag=$(echo "$v" | tr -d ' -'); a=$v; [ "$v" = default ] && a=""
    timeout 90 $M $a > "$R/${tag}_p$pass.log" 2>&1
    echo "== $v pass $pass rc=$? ($(el))"; tl "$R/${tag}_p$pass.log"
  done
done
pack
echo "== total $(el)"
