#!/usr/bin/env bash
# run_r95_h200.sh - round 13, one H200, into $OUT/r95: the 1-4 token layer's
# timeline (a -DTPMOE_MOE_TRACE=ON build: %globaltimer at each decode kernel's
# blocks' start, after their griddepcontrol.wait and at their end; medians of
# 30 graph replays after the usual flush), m3 TP 1, fused and unfused: where
# the ~10 us between the 1-token layer (142 us) and its weight stream go.
# Binaries (prebuilt/bin.txz): tpmoe of the trace build (build-trace).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r95_h200.sh
NAME=r95
. bench/device_env.sh
M="$B/tpmoe bench moe --preset m3 --check 1 --reps 40 --trace 30"
for f in 1 0; do
  timeout 90 $M --tokens 1,2,4 --fuse-shared $f > "$R/trace_f$f.log" 2>&1
  echo "== fused $f rc=$? ($(el))"; grep -E "^#|^[0-9]+ " "$R/trace_f$f.log" | grep -v "routing mode\|harness\|route_net\|device" | cut -c1-200
done
timeout 90 $M --tokens 1 --fuse-shared 1 --route-legacy 1 > "$R/trace_legacy.log" 2>&1
echo "== fused, legacy routing rc=$? ($(el))"; grep -E "^#   |^1 " "$R/trace_legacy.log" | cut -c1-200
pack
echo "== total $(el)"
