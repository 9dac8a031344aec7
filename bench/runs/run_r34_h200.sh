#!/usr/bin/env bash
# run_r34_h200.sh - is the routing's per-phase cost the cold L2 (the read flush evicts the
# kernel's code and counters)? The routing phases by stops, with the read flush and with
# no flush, mode 1 at 1 token, mode 3 at 16 and 64 tokens, one H200 (r33's binaries).
#   NAME=r34 OUT=/some/dir bash bench/runs/run_r34_h200.sh
NAME=${NAME:-r34}
. bench/device_env.sh
run() { # name, extra args...
  n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --reps 30 --check 0 "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "== $n ($*) rc=$? ($(el))"
  grep -E "^# harness" "$R/$n.log" | head -1
  grep -E "^[0-9]" "$R/$n.log" | awk '{print $1, $7, $10, $11}'
}
for fl in read none; do
  for st in 1 2 3 0; do
    run f${fl}_m1_s$st --tokens 1,2 --route-tc 0:0 --route-stop $st --flush $fl
    run f${fl}_m3_s$st --tokens 16,64 --route-tc 1:256 --route-tc-loads direct --route-stop $st --flush $fl
  done
done
pack
echo "== total $(el)"
